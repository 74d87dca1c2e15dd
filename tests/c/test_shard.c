/* mxfp8_export_shard against an independent reference: the test draws the compact scales S itself, lays
 * them into the storage a producer uses (compact, TE-padded with poisoned padding, or swizzled from the
 * layout's permute form, padding poisoned), and expects exactly the crop of S and of the values that the
 * shard names, for random boundaries (last partial blocks, one-block and one-row shards, several row
 * pieces), in both directions. Inputs are never touched; copies land in poisoned buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

enum storage { STORAGE_COMPACT, STORAGE_PADDED, STORAGE_SWIZZLED };
static const char *const kStorageNames[] = {"compact", "padded", "swizzled"};

/* One tensor of m x k values in one direction, with its reference scales. */
typedef struct {
  int64_t m, k;
  int columnwise;
  enum storage storage;
  int64_t s_rows, s_cols; /* the compact S */
  uint8_t *s;             /* S, row-major, drawn by the test */
  test_tensor *data, *scales;
  uint8_t *data_before, *scales_before;
  mxfp8_tensor *tensor;
} source;

static void make_source(source *src, int64_t m, int64_t k, int columnwise, enum storage storage, uint64_t *rng) {
  memset(src, 0, sizeof *src);
  src->m = m;
  src->k = k;
  src->columnwise = columnwise;
  src->storage = storage;
  src->s_rows = columnwise ? ref_ceil_div(m, 32) : m;
  src->s_cols = columnwise ? k : ref_ceil_div(k, 32);
  const int64_t shape[2] = {m, k};
  src->data = test_tensor_new(2, shape, kDLUInt, 1);
  fill_random(src->data->buffer, src->data->bytes, rng);
  src->s = (uint8_t *)malloc((size_t)(src->s_rows * src->s_cols) + 1);
  fill_random_scales(src->s, (size_t)(src->s_rows * src->s_cols), rng);
  int64_t buffer_shape[2] = {src->s_rows, src->s_cols};
  if (storage != STORAGE_COMPACT) { /* Transformer Engine's allocation; the padding keeps its POISON */
    buffer_shape[0] = columnwise ? ref_round_up(src->s_rows, 4) : ref_round_up(src->s_rows, 128);
    buffer_shape[1] = columnwise ? ref_round_up(src->s_cols, 128) : ref_round_up(src->s_cols, 4);
  }
  src->scales = test_tensor_new(2, buffer_shape, kDLUInt, 1);
  for (int64_t r = 0; r < src->s_rows; ++r)
    for (int64_t c = 0; c < src->s_cols; ++c) {
      size_t at;
      if (storage != STORAGE_SWIZZLED) at = (size_t)(r * buffer_shape[1] + c);
      else if (!columnwise) at = ref_swizzled_index(r, c, ref_round_up(src->s_cols, 4));
      else at = ref_swizzled_index(c, r, ref_round_up(src->s_rows, 4)); /* S^T is what is swizzled */
      src->scales->buffer[at] = src->s[r * src->s_cols + c];
    }
  src->data_before = (uint8_t *)malloc(src->data->bytes + 1);
  src->scales_before = (uint8_t *)malloc(src->scales->bytes + 1);
  memcpy(src->data_before, src->data->buffer, src->data->bytes);
  memcpy(src->scales_before, src->scales->buffer, src->scales->bytes);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = storage == STORAGE_SWIZZLED ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (columnwise) {
    desc.columnwise_data = &src->data->managed;
    desc.columnwise_scale_inv = &src->scales->managed;
  } else {
    desc.rowwise_data = &src->data->managed;
    desc.rowwise_scale_inv = &src->scales->managed;
  }
  EXPECT(mxfp8_tensor_create(&desc, &src->tensor) == MXFP8_OK, "create: %s", mxfp8_last_error());
}

static void free_source(source *src) {
  EXPECT(memcmp(src->data_before, src->data->buffer, src->data->bytes) == 0, "the values were modified");
  EXPECT(memcmp(src->scales_before, src->scales->buffer, src->scales->bytes) == 0, "the scales were modified");
  mxfp8_tensor_release(src->tensor);
  EXPECT(src->data->deleter_calls == 1 && src->scales->deleter_calls == 1, "deleters ran %d, %d times",
         src->data->deleter_calls, src->scales->deleter_calls);
  test_tensor_free(src->data);
  test_tensor_free(src->scales);
  free(src->s);
  free(src->data_before);
  free(src->scales_before);
}

/* Exports `shard` and checks both outputs against the crop of the test's own values and S. */
static void check_shard(const source *src, const mxfp8_shard *shard, int caller_alloc, int strided_view,
                        const char *ctx) {
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.direction = src->columnwise ? MXFP8_DIRECTION_COLUMNWISE : MXFP8_DIRECTION_ROWWISE;
  if (caller_alloc) o.allocator = poisoned_allocator;
  if (strided_view) o.padded_scales = MXFP8_PADDED_SCALES_STRIDED_VIEW;
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  const mxfp8_status st = mxfp8_export_shard(src->tensor, shard, &o, &values, &scales);
  EXPECT(st == MXFP8_OK, "%s: %s", ctx, mxfp8_last_error());

  /* The shard's rows, in order, from the single range or the pieces. */
  int64_t pieces[16];
  size_t n = shard->num_row_pieces;
  if (n == 0) {
    pieces[0] = shard->row_begin;
    pieces[1] = shard->row_end == MXFP8_SHARD_END ? src->m : shard->row_end;
    n = 1;
  } else {
    memcpy(pieces, shard->row_pieces, 2 * n * sizeof(int64_t));
  }
  const int64_t k0 = shard->col_begin, k1 = shard->col_end == MXFP8_SHARD_END ? src->k : shard->col_end;
  const int64_t cols = k1 - k0;
  int64_t rows = 0;
  for (size_t p = 0; p < n; ++p) rows += pieces[2 * p + 1] - pieces[2 * p];

  const DLTensor *v = &values->dl_tensor;
  EXPECT(v->ndim == 2 && v->shape[0] == rows && v->shape[1] == cols, "%s: values shape (%lld, %lld), expected (%lld, %lld)",
         ctx, (long long)v->shape[0], (long long)v->shape[1], (long long)rows, (long long)cols);
  int64_t out_row = 0;
  for (size_t p = 0; p < n; ++p)
    for (int64_t r = pieces[2 * p]; r < pieces[2 * p + 1]; ++r, ++out_row)
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t got = read_through_strides(v, out_row * cols + c), want = src->data->buffer[r * src->k + k0 + c];
        EXPECT(got == want, "%s: value (%lld, %lld) is %u, expected %u", ctx, (long long)out_row, (long long)c, got, want);
      }
  if (n == 1) /* one range: a view into the tensor's own bytes */
    EXPECT(!(values->flags & DLPACK_FLAG_BITMASK_IS_COPIED) && (uint8_t *)v->data == src->data->buffer,
           "%s: one row range of values should be a view", ctx);

  const DLTensor *s = &scales->dl_tensor;
  const int64_t s_rows = src->columnwise ? ref_ceil_div(rows, 32) : rows;
  const int64_t s_cols = src->columnwise ? cols : ref_ceil_div(cols, 32);
  const int64_t c0 = src->columnwise ? k0 : k0 / 32;
  EXPECT(s->ndim == 2 && s->shape[0] == s_rows && s->shape[1] == s_cols, "%s: scales shape (%lld, %lld), expected (%lld, %lld)",
         ctx, (long long)s->shape[0], (long long)s->shape[1], (long long)s_rows, (long long)s_cols);
  int64_t out = 0;
  for (size_t p = 0; p < n; ++p) {
    const int64_t r0 = src->columnwise ? pieces[2 * p] / 32 : pieces[2 * p];
    const int64_t r1 = src->columnwise ? ref_ceil_div(pieces[2 * p + 1], 32) : pieces[2 * p + 1];
    for (int64_t r = r0; r < r1; ++r, ++out)
      for (int64_t c = 0; c < s_cols; ++c) {
        const uint8_t got = read_through_strides(s, out * s_cols + c), want = src->s[r * src->s_cols + c0 + c];
        EXPECT(got == want, "%s: scale (%lld, %lld) is %u, expected %u (S[%lld][%lld])", ctx, (long long)out,
               (long long)c, got, want, (long long)r, (long long)(c0 + c));
      }
  }
  EXPECT(out == s_rows, "%s: %lld scale rows checked, expected %lld", ctx, (long long)out, (long long)s_rows);
  if (src->storage == STORAGE_SWIZZLED || n > 1)
    EXPECT(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "%s: swizzled or pieced scales must be a copy", ctx);
  release_managed(values);
  release_managed(scales);
}

static int64_t pick(uint64_t *rng, int64_t lo, int64_t hi) { /* in [lo, hi] */
  return lo + (int64_t)(rng_next(rng) % (uint64_t)(hi - lo + 1));
}

/* A random legal range of `extent` along a block axis: block boundaries, the end clipped to the extent,
 * biased towards one block and the last (partial) block. Writes [*b, *e). */
static void block_range(uint64_t *rng, int64_t extent, int64_t *b, int64_t *e) {
  const int64_t blocks = ref_ceil_div(extent, 32);
  int64_t b0 = pick(rng, 0, blocks - 1), b1;
  switch (rng_next(rng) % 4) {
    case 0: b1 = b0 + 1; break;          /* one block */
    case 1: b1 = blocks; break;          /* through the last, maybe partial, block */
    default: b1 = pick(rng, b0 + 1, blocks);
  }
  *b = 32 * b0;
  *e = 32 * b1 < extent ? 32 * b1 : extent;
}

/* A random non-empty range of any boundaries. */
static void any_range(uint64_t *rng, int64_t extent, int64_t *b, int64_t *e) {
  *b = pick(rng, 0, extent - 1);
  *e = rng_next(rng) % 4 == 0 ? *b + 1 : pick(rng, *b + 1, extent);
}

static const int64_t kShapes[][2] = {{100, 48}, {257, 200}, {300, 33}, {1, 16}, {130, 96}, {64, 1024}, {513, 130}, {40, 300}};

static void test_random_shards_match_the_crop(void **state) {
  (void)state;
  uint64_t rng = 2020;
  for (size_t sh = 0; sh < sizeof kShapes / sizeof kShapes[0]; ++sh)
    for (int columnwise = 0; columnwise < 2; ++columnwise)
      for (int storage = 0; storage < 3; ++storage) {
        source src;
        make_source(&src, kShapes[sh][0], kShapes[sh][1], columnwise, (enum storage)storage, &rng);
        for (int trial = 0; trial < 12; ++trial) {
          mxfp8_shard shard = MXFP8_SHARD_INIT;
          if (columnwise) {
            block_range(&rng, src.m, &shard.row_begin, &shard.row_end);
            any_range(&rng, src.k, &shard.col_begin, &shard.col_end);
          } else {
            any_range(&rng, src.m, &shard.row_begin, &shard.row_end);
            block_range(&rng, src.k, &shard.col_begin, &shard.col_end);
          }
          if (trial == 0) shard.row_end = MXFP8_SHARD_END, shard.row_begin = 0; /* the whole of M */
          if (trial == 1) shard.col_end = MXFP8_SHARD_END;
          char ctx[200];
          snprintf(ctx, sizeof ctx, "(%lld, %lld) %s %s rows [%lld, %lld) cols [%lld, %lld)", (long long)src.m,
                   (long long)src.k, columnwise ? "columnwise" : "rowwise", kStorageNames[storage],
                   (long long)shard.row_begin, (long long)shard.row_end, (long long)shard.col_begin,
                   (long long)shard.col_end);
          check_shard(&src, &shard, trial % 3 == 2, trial % 4 == 3, ctx);
        }
        free_source(&src);
      }
}

/* Fused QKV / gate-up: a rank's rows come in pieces, in any order. */
static void test_row_pieces_concatenate(void **state) {
  (void)state;
  uint64_t rng = 77;
  for (size_t sh = 0; sh < sizeof kShapes / sizeof kShapes[0]; ++sh)
    for (int columnwise = 0; columnwise < 2; ++columnwise)
      for (int storage = 0; storage < 3; ++storage) {
        source src;
        make_source(&src, kShapes[sh][0], kShapes[sh][1], columnwise, (enum storage)storage, &rng);
        for (int trial = 0; trial < 8; ++trial) {
          mxfp8_shard shard = MXFP8_SHARD_INIT;
          int64_t pieces[6];
          const size_t n = (size_t)pick(&rng, 1, 3);
          for (size_t p = 0; p < n; ++p) {
            if (!columnwise) {
              any_range(&rng, src.m, &pieces[2 * p], &pieces[2 * p + 1]);
              continue;
            }
            block_range(&rng, src.m, &pieces[2 * p], &pieces[2 * p + 1]);
            /* only the last piece may end in a partial block: others stop at the last whole one */
            if (p + 1 < n) pieces[2 * p + 1] = pieces[2 * p + 1] / 32 * 32;
          }
          int ok = 1;
          for (size_t p = 0; p < n; ++p) ok &= pieces[2 * p + 1] > pieces[2 * p];
          if (!ok) continue;
          shard.num_row_pieces = n;
          shard.row_pieces = pieces;
          if (columnwise) any_range(&rng, src.k, &shard.col_begin, &shard.col_end);
          else block_range(&rng, src.k, &shard.col_begin, &shard.col_end);
          char ctx[200];
          snprintf(ctx, sizeof ctx, "(%lld, %lld) %s %s %zu pieces from [%lld, %lld) cols [%lld, %lld)", (long long)src.m,
                   (long long)src.k, columnwise ? "columnwise" : "rowwise", kStorageNames[storage], n,
                   (long long)pieces[0], (long long)pieces[1], (long long)shard.col_begin, (long long)shard.col_end);
          check_shard(&src, &shard, trial % 2, 0, ctx);
        }
        free_source(&src);
      }
}

/* Row-major scales of one row range spanning every stored column are a view into the producer's buffer;
 * padded ones a view only when asked for (strided); swizzled ones always a copy of the shard alone. */
static void test_views_where_the_bytes_lie(void **state) {
  (void)state;
  uint64_t rng = 5;
  for (int storage = 0; storage < 3; ++storage) {
    source src;
    make_source(&src, 300, 200, 0, (enum storage)storage, &rng); /* C = 7: TE pads to 8 */
    mxfp8_shard shard = MXFP8_SHARD_INIT;
    shard.row_begin = 150;
    shard.row_end = 300;
    for (int strided = 0; strided < 2; ++strided) {
      mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
      if (strided) o.padded_scales = MXFP8_PADDED_SCALES_STRIDED_VIEW;
      DLManagedTensorVersioned *scales = NULL;
      EXPECT(mxfp8_export_shard(src.tensor, &shard, &o, NULL, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
      const int copied = (scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
      const int expect_view = storage == STORAGE_COMPACT || (storage == STORAGE_PADDED && strided);
      EXPECT(copied == !expect_view, "%s strided %d: copied %d", kStorageNames[storage], strided, copied);
      if (expect_view)
        EXPECT((uint8_t *)scales->dl_tensor.data + scales->dl_tensor.byte_offset ==
                   src.scales->buffer + 150 * scales->dl_tensor.strides[0],
               "%s: the view does not start at row 150", kStorageNames[storage]);
      release_managed(scales);
    }
    free_source(&src);
  }
}

/* A shard of an empty dimension is empty (and costs nothing); values-only and scales-only exports. */
static void test_empty_tensor_and_single_outputs(void **state) {
  (void)state;
  uint64_t rng = 9;
  source src;
  make_source(&src, 0, 64, 0, STORAGE_SWIZZLED, &rng);
  mxfp8_shard whole = MXFP8_SHARD_INIT;
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  EXPECT(mxfp8_export_shard(src.tensor, &whole, NULL, &values, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(values->dl_tensor.shape[0] == 0 && scales->dl_tensor.shape[0] == 0 && scales->dl_tensor.shape[1] == 2,
         "empty shard shapes");
  release_managed(values);
  release_managed(scales);
  free_source(&src);

  make_source(&src, 70, 64, 0, STORAGE_SWIZZLED, &rng);
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.col_begin = 32;
  values = NULL;
  EXPECT(mxfp8_export_shard(src.tensor, &shard, NULL, &values, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(values->dl_tensor.shape[1] == 32 && values->dl_tensor.strides[0] == 64, "a column shard's values keep the row stride");
  release_managed(values);
  scales = NULL;
  EXPECT(mxfp8_export_shard(src.tensor, &shard, NULL, NULL, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
  for (int64_t r = 0; r < 70; ++r)
    EXPECT(read_through_strides(&scales->dl_tensor, r) == src.s[r * 2 + 1], "scale row %lld", (long long)r);
  release_managed(scales);
  free_source(&src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_shards_match_the_crop),
      cmocka_unit_test(test_row_pieces_concatenate),
      cmocka_unit_test(test_views_where_the_bytes_lie),
      cmocka_unit_test(test_empty_tensor_and_single_outputs),
  };
  return cmocka_run_group_tests_name("shard export", tests, NULL, NULL);
}
