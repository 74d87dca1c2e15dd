/* Shards: one exported alone (mxfp8_export_components with options.shard, through export_shard in
 * test_support.c) and entries of a transfer (desc.shards: a bucket of shards, each rank's shard of a bucket
 * of whole tensors, a shard straight from the trainer's storage), against an independent reference: the
 * test draws the compact scales S itself, lays them into the storage a producer uses (compact, TE-padded
 * with poisoned padding, or swizzled from the layout's permute form, padding poisoned), and expects
 * exactly the crop of S and of the values that the shard names, for random boundaries (last partial
 * blocks, one-block and one-row shards, several row pieces), in both directions. Inputs are never
 * touched; copies land in poisoned buffers; what a shard cannot do (the scale fix-up, engine layouts,
 * windows of 128x4 tiles into 128x4) is refused with nothing written. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_fixtures.h"
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
  const mxfp8_status st = export_shard(src->tensor, shard, &o, &values, &scales);
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
      EXPECT(export_shard(src.tensor, &shard, &o, NULL, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
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
  EXPECT(export_shard(src.tensor, &whole, NULL, &values, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(values->dl_tensor.shape[0] == 0 && scales->dl_tensor.shape[0] == 0 && scales->dl_tensor.shape[1] == 2,
         "empty shard shapes");
  release_managed(values);
  release_managed(scales);
  free_source(&src);

  make_source(&src, 70, 64, 0, STORAGE_SWIZZLED, &rng);
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.col_begin = 32;
  values = NULL;
  EXPECT(export_shard(src.tensor, &shard, NULL, &values, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(values->dl_tensor.shape[1] == 32 && values->dl_tensor.strides[0] == 64, "a column shard's values keep the row stride");
  release_managed(values);
  scales = NULL;
  EXPECT(export_shard(src.tensor, &shard, NULL, NULL, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
  for (int64_t r = 0; r < 70; ++r)
    EXPECT(read_through_strides(&scales->dl_tensor, r) == src.s[r * 2 + 1], "scale row %lld", (long long)r);
  release_managed(scales);
  free_source(&src);
}

/* "A smaller struct_size means NULL": an options struct of the size before options.shard (56 bytes) exports
 * the whole tensor, whatever its caller's memory holds where the shard pointer now lies; the same bytes with
 * the full size are a shard (then the pointer is read). */
static void test_older_options_have_no_shard(void **state) {
  (void)state;
  uint64_t rng = 17;
  source src;
  make_source(&src, 70, 64, 0, STORAGE_PADDED, &rng);
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.col_begin = 32;
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.shard = &shard;
  o.struct_size = (uint32_t)offsetof(mxfp8_export_options, shard);
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  EXPECT(mxfp8_export_components(src.tensor, &o, &values, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(values->dl_tensor.shape[1] == 64 && scales->dl_tensor.shape[0] == 70 && scales->dl_tensor.shape[1] == 2,
         "an older struct's export is the whole tensor");
  for (int64_t i = 0; i < 70 * 2; ++i)
    EXPECT(read_through_strides(&scales->dl_tensor, i) == src.s[i], "whole scale %lld", (long long)i);
  release_managed(values);
  release_managed(scales);
  o.struct_size = (uint32_t)sizeof o;
  values = NULL, scales = NULL;
  EXPECT(mxfp8_export_components(src.tensor, &o, &values, &scales) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(values->dl_tensor.shape[1] == 32 && scales->dl_tensor.shape[1] == 1, "the full struct's export is the shard");
  for (int64_t r = 0; r < 70; ++r)
    EXPECT(read_through_strides(&scales->dl_tensor, r) == src.s[r * 2 + 1], "shard scale row %lld", (long long)r);
  release_managed(values);
  release_managed(scales);
  free_source(&src);
}

/* The shard's expected bytes, from the test's own values and S: values (rows x cols) and compact scales,
 * row-major, in new buffers; sizes in *values_bytes, *scale_rows, *scale_cols. */
static void expected_shard(const source *src, const mxfp8_shard *shard, uint8_t **values, int64_t *values_bytes,
                           uint8_t **scales, int64_t *scale_rows, int64_t *scale_cols) {
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
  *values_bytes = rows * cols;
  *values = (uint8_t *)malloc((size_t)(rows * cols) + 1);
  int64_t out = 0;
  for (size_t p = 0; p < n; ++p)
    for (int64_t r = pieces[2 * p]; r < pieces[2 * p + 1]; ++r, ++out)
      memcpy(*values + out * cols, src->data->buffer + r * src->k + k0, (size_t)cols);
  *scale_rows = src->columnwise ? ref_ceil_div(rows, 32) : rows;
  *scale_cols = src->columnwise ? cols : ref_ceil_div(cols, 32);
  const int64_t c0 = src->columnwise ? k0 : k0 / 32;
  *scales = (uint8_t *)malloc((size_t)(*scale_rows * *scale_cols) + 1);
  out = 0;
  for (size_t p = 0; p < n; ++p) {
    const int64_t r0 = src->columnwise ? pieces[2 * p] / 32 : pieces[2 * p];
    const int64_t r1 = src->columnwise ? ref_ceil_div(pieces[2 * p + 1], 32) : pieces[2 * p + 1];
    for (int64_t r = r0; r < r1; ++r, ++out) memcpy(*scales + out * *scale_cols, src->s + r * src->s_cols + c0, (size_t)*scale_cols);
  }
}

/* A bucket of shards (mxfp8_bucket_parts + a TO_BUCKET transfer with desc.shards, immediate and prepared)
 * holds exactly each shard's crop where the plan says; a NULL shard is the whole tensor. */
static void test_bucket_of_shards_holds_each_crop(void **state) {
  (void)state;
  uint64_t rng = 31;
  for (int columnwise = 0; columnwise < 2; ++columnwise)
    for (int trial = 0; trial < 6; ++trial) {
      enum { N = 4 };
      source src[N];
      mxfp8_shard shard[N];
      int64_t pieces[N][4];
      const mxfp8_shard *shards[N];
      const mxfp8_tensor *tensors[N];
      for (int i = 0; i < N; ++i) {
        make_source(&src[i], kShapes[(trial + i) % 8][0], kShapes[(trial + i) % 8][1], columnwise, (enum storage)(i % 3), &rng);
        tensors[i] = src[i].tensor;
        mxfp8_shard init = MXFP8_SHARD_INIT;
        shard[i] = init;
        if (columnwise) {
          block_range(&rng, src[i].m, &shard[i].row_begin, &shard[i].row_end);
          any_range(&rng, src[i].k, &shard[i].col_begin, &shard[i].col_end);
        } else {
          any_range(&rng, src[i].m, &shard[i].row_begin, &shard[i].row_end);
          block_range(&rng, src[i].k, &shard[i].col_begin, &shard[i].col_end);
          if (i == 2 && src[i].m > 2) { /* two pieces, in reverse order */
            pieces[i][0] = src[i].m / 2, pieces[i][1] = src[i].m, pieces[i][2] = 0, pieces[i][3] = src[i].m / 2;
            shard[i].row_begin = 0, shard[i].row_end = MXFP8_SHARD_END;
            shard[i].num_row_pieces = 2, shard[i].row_pieces = pieces[i];
          }
        }
        shards[i] = i == 3 ? NULL : &shard[i];
      }
      mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, N);
      d.tensors = tensors;
      d.directions = all_in_direction(columnwise);
      d.shards = shards;
      mxfp8_bucket_part entries[N];
      uint64_t total = 0;
      EXPECT(mxfp8_bucket_parts(&d, 64, entries, &total) == MXFP8_OK, "plan: %s", mxfp8_last_error());
      d.parts_out = entries;
      for (int prepared = 0; prepared < 2; ++prepared) {
        uint8_t *bucket = (uint8_t *)malloc(total + 1);
        memset(bucket, POISON, total);
        int64_t shape[1] = {(int64_t)total};
        DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape, NULL, 0};
        d.bucket_out = &b;
        if (prepared) {
          mxfp8_plan *plan = NULL;
          EXPECT(mxfp8_transfer_prepare(&d, &plan) == MXFP8_OK, "%s", mxfp8_last_error());
          EXPECT(mxfp8_plan_run(plan, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
          mxfp8_plan_release(plan);
        } else {
          EXPECT(mxfp8_transfer(&d, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
        }
        for (int i = 0; i < N; ++i) {
          mxfp8_shard whole = MXFP8_SHARD_INIT;
          uint8_t *v, *sc;
          int64_t vb, sr, scc;
          expected_shard(&src[i], shards[i] ? shards[i] : &whole, &v, &vb, &sc, &sr, &scc);
          EXPECT(entries[i].values_bytes == (uint64_t)vb && entries[i].scales_bytes == (uint64_t)(sr * scc),
                 "entry %d sizes %llu, %llu", i, (unsigned long long)entries[i].values_bytes,
                 (unsigned long long)entries[i].scales_bytes);
          EXPECT(memcmp(bucket + entries[i].values_offset, v, (size_t)vb) == 0, "col %d trial %d entry %d: values", columnwise, trial, i);
          EXPECT(memcmp(bucket + entries[i].scales_offset, sc, (size_t)(sr * scc)) == 0, "col %d trial %d entry %d (%s): scales",
                 columnwise, trial, i, kStorageNames[i % 3]);
          free(v);
          free(sc);
        }
        free(bucket);
      }
      for (int i = 0; i < N; ++i) free_source(&src[i]);
    }
}

/* Rewrites scale (r, c) of a rowwise source, in the test's S and where the storage holds it. */
static void set_scale(source *src, int64_t r, int64_t c, uint8_t value) {
  src->s[r * src->s_cols + c] = value;
  const size_t at = src->storage == STORAGE_SWIZZLED ? ref_swizzled_index(r, c, ref_round_up(src->s_cols, 4))
                    : src->storage == STORAGE_PADDED ? (size_t)(r * ref_round_up(src->s_cols, 4) + c)
                                                     : (size_t)(r * src->s_cols + c);
  src->scales->buffer[at] = value;
  src->scales_before[at] = value;
}

/* desc.scale_fixup with buckets of shards: applied to the whole tensors (NULL shards; every byte 0 of
 * the test's own S written as 1), refused with MXFP8_ERROR_UNSUPPORTED once a shard is set, by the plan
 * (nothing written) and by the transfer (the bucket untouched). */
static void test_bucket_shards_and_the_scale_fixup(void **state) {
  (void)state;
  uint64_t rng = 57;
  enum { N = 2 };
  source src[N];
  const mxfp8_tensor *tensors[N];
  for (int i = 0; i < N; ++i) {
    make_source(&src[i], 130, 96, 0, i == 0 ? STORAGE_SWIZZLED : STORAGE_PADDED, &rng);
    set_scale(&src[i], 0, 1, 0); /* at least two zero exponents each */
    set_scale(&src[i], src[i].s_rows - 1, src[i].s_cols - 1, 0);
    tensors[i] = src[i].tensor;
  }
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.row_begin = 10, shard.row_end = 70;
  const mxfp8_shard *none[N] = {NULL, NULL}, *one[N] = {&shard, NULL};
  for (int sharded = 0; sharded < 2; ++sharded) {
    mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, N);
    d.tensors = tensors;
    d.shards = sharded ? one : none;
    d.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
    mxfp8_bucket_part entries[N];
    uint64_t total = 0;
    if (sharded) {  /* the plan refuses the combination too (nothing written), so it is planned without it */
      const mxfp8_status planned = mxfp8_bucket_parts(&d, 64, entries, &total);
      EXPECT(planned == MXFP8_ERROR_UNSUPPORTED && total == 0, "plan: status %d: %s", planned, mxfp8_last_error());
      assert_non_null(strstr(mxfp8_last_error(), "desc.shards[0] is set"));
      d.scale_fixup = MXFP8_SCALE_FIXUP_NONE;
    }
    EXPECT(mxfp8_bucket_parts(&d, 64, entries, &total) == MXFP8_OK, "%s", mxfp8_last_error());
    d.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
    uint8_t *bucket = (uint8_t *)malloc(total + 1);
    memset(bucket, POISON, total);
    int64_t shape[1] = {(int64_t)total};
    DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, shape, NULL, 0};
    d.bucket_out = &b;
    d.parts_out = entries;
    const mxfp8_status st = mxfp8_transfer(&d, NULL);
    if (sharded) {
      EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "status %d: %s", st, mxfp8_last_error());
      assert_non_null(strstr(mxfp8_last_error(), "desc.shards[0] is set"));
      int untouched = 1;
      for (uint64_t j = 0; j < total; ++j) untouched &= bucket[j] == POISON;
      EXPECT(untouched, "the bucket was written");
    } else {
      EXPECT(st == MXFP8_OK, "%s", mxfp8_last_error());
      for (int i = 0; i < N; ++i) {
        const int64_t n = src[i].s_rows * src[i].s_cols;
        EXPECT(entries[i].scales_bytes == (uint64_t)n, "entry %d", i);
        for (int64_t j = 0; j < n; ++j) {
          const uint8_t want = src[i].s[j] == 0 ? 1 : src[i].s[j];
          EXPECT(bucket[entries[i].scales_offset + (uint64_t)j] == want, "tensor %d scale %lld", i, (long long)j);
        }
      }
    }
    free(bucket);
  }
  for (int i = 0; i < N; ++i) free_source(&src[i]);
}

/* The receiver's side: a bucket of whole tensors, each rank importing its own shard (desc.shards)
 * into compact and 128x4 destinations; the 128x4 reference is the crop swizzled from the layout's formula
 * in the test, padding zero. */
static void test_import_takes_each_ranks_shard_of_a_whole_bucket(void **state) {
  (void)state;
  uint64_t rng = 41;
  const int64_t m = 384, k = 200; /* three tiles of rows, C = 7 */
  for (int columnwise = 0; columnwise < 2; ++columnwise) {
    source src;
    make_source(&src, m, k, columnwise, STORAGE_SWIZZLED, &rng);
    const mxfp8_tensor *tensors[1] = {src.tensor};
    const int32_t directions[1] = {columnwise};
    mxfp8_transfer_desc send = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 1);
    send.tensors = tensors;
    send.directions = directions;
    mxfp8_bucket_part entry;
    uint64_t total = 0;
    EXPECT(mxfp8_bucket_parts(&send, 256, &entry, &total) == MXFP8_OK, "%s", mxfp8_last_error());
    uint8_t *bucket = (uint8_t *)malloc(total + 1);
    int64_t bshape[1] = {(int64_t)total};
    DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
    send.bucket_out = &b;
    send.parts_out = &entry;
    EXPECT(mxfp8_transfer(&send, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
    /* rank r of TP-2 along N (rows) and along K, plus a two-piece rank (rowwise) */
    for (int rank = 0; rank < 5; ++rank)
      for (int target = 0; target < 2; ++target) {
        mxfp8_shard shard = MXFP8_SHARD_INIT;
        int64_t pieces[4] = {256, 384, 0, 128};
        if (rank < 2) shard.row_begin = rank * m / 2, shard.row_end = (rank + 1) * m / 2;
        else if (rank < 4) shard.col_begin = (rank - 2) * 96, shard.col_end = rank == 2 ? 96 : k;
        else if (columnwise) shard.row_begin = 128, shard.row_end = 320;
        else shard.num_row_pieces = 2, shard.row_pieces = pieces;
        if (columnwise && rank >= 2 && rank < 4) shard.col_begin = (rank - 2) * 100, shard.col_end = rank == 2 ? 100 : k;
        uint8_t *v, *sc;
        int64_t vb, sr, scc;
        expected_shard(&src, &shard, &v, &vb, &sc, &sr, &scc);
        const int64_t mr = columnwise ? scc : sr, mc = columnwise ? sr : scc; /* the matrix swizzled */
        const int64_t swz_bytes = ref_round_up(mr, 128) * ref_round_up(mc, 4);
        uint8_t *want_swz = (uint8_t *)calloc((size_t)swz_bytes + 1, 1);
        for (int64_t y = 0; y < sr; ++y)
          for (int64_t x = 0; x < scc; ++x)
            want_swz[columnwise ? ref_swizzled_index(x, y, ref_round_up(mc, 4)) : ref_swizzled_index(y, x, ref_round_up(mc, 4))] = sc[y * scc + x];
        const int64_t dst_scale_bytes = target ? swz_bytes : sr * scc;
        uint8_t *dv = (uint8_t *)malloc((size_t)vb + 1), *ds = (uint8_t *)malloc((size_t)dst_scale_bytes + 1);
        memset(dv, POISON, (size_t)vb);
        memset(ds, POISON, (size_t)dst_scale_bytes);
        int64_t vshape[1] = {vb}, sshape[1] = {dst_scale_bytes};
        DLTensor dvt = {dv, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
        DLTensor dst = {ds, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
        DLTensor *out_values[1] = {&dvt}, *out_scales[1] = {&dst};
        const int32_t targets[1] = {target ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT};
        const int32_t ndims[1] = {2}, formats[1] = {MXFP8_FORMAT_E4M3}, compact[1] = {MXFP8_SCALE_LAYOUT_COMPACT};
        const int64_t shape[2] = {m, k};
        const int64_t *shapes[1] = {shape};
        const mxfp8_shard *shards[1] = {&shard};
        mxfp8_transfer_desc receive = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, 1);
        receive.bucket_in = &b, receive.parts_in = &entry, receive.ndims = ndims, receive.shapes = shapes;
        receive.formats = formats, receive.source_layouts = compact, receive.directions = directions;
        receive.shards = shards;
        receive.values = out_values, receive.scales = out_scales, receive.target_layouts = targets;
        EXPECT(mxfp8_transfer(&receive, NULL) == MXFP8_OK, "col %d rank %d target %d: %s", columnwise, rank, target,
               mxfp8_last_error());
        EXPECT(memcmp(dv, v, (size_t)vb) == 0, "col %d rank %d target %d: values", columnwise, rank, target);
        EXPECT(memcmp(ds, target ? want_swz : sc, (size_t)dst_scale_bytes) == 0, "col %d rank %d target %d: scales", columnwise,
               rank, target);
        free(v), free(sc), free(want_swz), free(dv), free(ds);
      }
    free(bucket);
    free_source(&src);
  }
}

/* What one pass cannot do is refused up front, with the destination untouched. */
static void test_import_refuses_pieces_that_split_tiles(void **state) {
  (void)state;
  uint64_t rng = 43;
  source src;
  make_source(&src, 300, 64, 0, STORAGE_PADDED, &rng);
  const mxfp8_tensor *tensors[1] = {src.tensor};
  mxfp8_transfer_desc send = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 1);
  send.tensors = tensors;
  mxfp8_bucket_part entry;
  uint64_t total = 0;
  EXPECT(mxfp8_bucket_parts(&send, 256, &entry, &total) == MXFP8_OK, "%s", mxfp8_last_error());
  uint8_t *bucket = (uint8_t *)malloc(total + 1);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  send.bucket_out = &b;
  send.parts_out = &entry;
  EXPECT(mxfp8_transfer(&send, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
  int64_t pieces[4] = {0, 100, 200, 300};
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.num_row_pieces = 2, shard.row_pieces = pieces;
  uint8_t dv[200 * 64], ds[256 * 4];
  memset(dv, POISON, sizeof dv), memset(ds, POISON, sizeof ds);
  int64_t vshape[1] = {(int64_t)sizeof dv}, sshape[1] = {(int64_t)sizeof ds};
  DLTensor dvt = {dv, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
  DLTensor dst = {ds, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  DLTensor *out_values[1] = {&dvt}, *out_scales[1] = {&dst};
  const int32_t targets[1] = {MXFP8_SCALE_LAYOUT_128X4};
  const int32_t ndims[1] = {2}, formats[1] = {MXFP8_FORMAT_E4M3}, compact[1] = {MXFP8_SCALE_LAYOUT_COMPACT};
  const int64_t shape[2] = {300, 64};
  const int64_t *shapes[1] = {shape};
  const mxfp8_shard *shards[1] = {&shard};
  mxfp8_transfer_desc receive = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, 1);
  receive.bucket_in = &b, receive.parts_in = &entry, receive.ndims = ndims, receive.shapes = shapes;
  receive.formats = formats, receive.source_layouts = compact, receive.shards = shards;
  receive.values = out_values, receive.scales = out_scales, receive.target_layouts = targets;
  EXPECT(mxfp8_transfer(&receive, NULL) == MXFP8_ERROR_UNSUPPORTED, "status: %s", mxfp8_last_error());
  assert_last_error_contains("desc.shards[0]: row piece 0 has 100 rows");
  for (size_t i = 0; i < sizeof dv; ++i) EXPECT(dv[i] == POISON, "values written");
  for (size_t i = 0; i < sizeof ds; ++i) EXPECT(ds[i] == POISON, "scales written");
  free(bucket);
  free_source(&src);
}

/* The direct path: each rank's shard read straight from the trainer's storage (a FROM_TENSORS transfer
 * with desc.shards, immediate and prepared) into compact destinations from any storage, and into 128x4
 * destinations from row-major storage; a window of swizzled storage into a 128x4 destination is refused
 * untouched. */
static void test_direct_import_of_shards(void **state) {
  (void)state;
  uint64_t rng = 47;
  for (int storage = 0; storage < 3; ++storage)
    for (int columnwise = 0; columnwise < 2; ++columnwise)
      for (int target = 0; target < 2; ++target) {
        source src;
        make_source(&src, 384, 200, columnwise, (enum storage)storage, &rng);
        mxfp8_shard shard = MXFP8_SHARD_INIT;
        int64_t pieces[4] = {256, 384, 0, 128};
        if (columnwise) shard.row_begin = 64, shard.row_end = 384, shard.col_begin = 7, shard.col_end = 150;
        else if (target) shard.num_row_pieces = 2, shard.row_pieces = pieces, shard.col_begin = 64;
        else shard.row_begin = 37, shard.row_end = 300, shard.col_begin = 32, shard.col_end = 160;
        uint8_t *v, *sc;
        int64_t vb, sr, scc;
        expected_shard(&src, &shard, &v, &vb, &sc, &sr, &scc);
        const int64_t mr = columnwise ? scc : sr, mc = columnwise ? sr : scc; /* the matrix swizzled */
        const int64_t swz_bytes = ref_round_up(mr, 128) * ref_round_up(mc, 4);
        uint8_t *want_swz = (uint8_t *)calloc((size_t)swz_bytes + 1, 1);
        for (int64_t y = 0; y < sr; ++y)
          for (int64_t x = 0; x < scc; ++x)
            want_swz[columnwise ? ref_swizzled_index(x, y, ref_round_up(mc, 4)) : ref_swizzled_index(y, x, ref_round_up(mc, 4))] =
                sc[y * scc + x];
        const int64_t dst_bytes = target ? swz_bytes : sr * scc;
        uint8_t *dv = (uint8_t *)malloc((size_t)vb + 1), *ds = (uint8_t *)malloc((size_t)dst_bytes + 1);
        int64_t vshape[1] = {vb}, sshape[1] = {dst_bytes};
        DLTensor dvt = {dv, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
        DLTensor dst = {ds, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
        DLTensor *out_values[1] = {&dvt}, *out_scales[1] = {&dst};
        const int32_t targets[1] = {target ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT};
        const mxfp8_tensor *tensors[1] = {src.tensor};
        const mxfp8_shard *shards[1] = {&shard};
        const int32_t directions[1] = {columnwise};
        mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
        d.tensors = tensors, d.directions = directions, d.shards = shards;
        d.values = out_values, d.scales = out_scales, d.target_layouts = targets;
        for (int prepared = 0; prepared < 2; ++prepared) {
          memset(dv, POISON, (size_t)vb);
          memset(ds, POISON, (size_t)dst_bytes);
          mxfp8_status st;
          if (prepared) {
            mxfp8_plan *plan = NULL;
            st = mxfp8_transfer_prepare(&d, &plan);
            if (st == MXFP8_OK) st = mxfp8_plan_run(plan, NULL);
            mxfp8_plan_release(plan);
          } else {
            st = mxfp8_transfer(&d, NULL);
          }
          char ctx[120];
          snprintf(ctx, sizeof ctx, "%s %s target %d prepared %d", kStorageNames[storage], columnwise ? "columnwise" : "rowwise",
                   target, prepared);
          if (storage == STORAGE_SWIZZLED && target) {
            EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "%s: status %d (%s)", ctx, st, mxfp8_last_error());
            assert_last_error_contains("desc.shards[0]: a shard of scales stored in the 128x4 layout");
            for (int64_t i = 0; i < vb; ++i) EXPECT(dv[i] == POISON, "%s: values written", ctx);
            for (int64_t i = 0; i < dst_bytes; ++i) EXPECT(ds[i] == POISON, "%s: scales written", ctx);
            continue;
          }
          EXPECT(st == MXFP8_OK, "%s: %s", ctx, mxfp8_last_error());
          EXPECT(memcmp(dv, v, (size_t)vb) == 0, "%s: values", ctx);
          EXPECT(memcmp(ds, target ? want_swz : sc, (size_t)dst_bytes) == 0, "%s: scales", ctx);
        }
        free(v), free(sc), free(want_swz), free(dv), free(ds);
        free_source(&src);
      }
}

/* ---------------------------------------------------------------------------------------------------
 * Buckets of shards: "a shard ... with scale_fixup: UNSUPPORTED" (for mxfp8_bucket_parts, mxfp8_transfer
 * and mxfp8_transfer_prepare alike), and a failed mxfp8_bucket_parts writes neither the parts nor the total
 * ("written on success only").
 * --------------------------------------------------------------------------------------------------- */

static void test_bucket_shards_refuse_fixup_and_write_nothing(void **state) {
  (void)state;
  rowwise_tensor a, b;
  make_rowwise(&a, 100, 96, 6);
  make_rowwise(&b, 64, 40, 7);
  const mxfp8_tensor *ts[2] = {a.t, b.t};
  mxfp8_shard half = MXFP8_SHARD_INIT;
  half.row_end = 50;
  const mxfp8_shard *shards[2] = {NULL, &half};
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 2);
  d.tensors = ts;
  d.shards = shards;
  d.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
  mxfp8_bucket_part entries[2];
  memset(entries, POISON, sizeof entries);
  uint64_t total = 12345;
  mxfp8_status st = mxfp8_bucket_parts(&d, 256, entries, &total);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "plan with a shard and a fix-up returned %d (%s)", st, mxfp8_last_error());
  EXPECT(total == 12345 && all_poison((const uint8_t *)entries, sizeof entries), "a failed plan wrote its outputs");
  /* A bad second shard: nothing of the first entry written either. */
  mxfp8_shard bad = MXFP8_SHARD_INIT;
  bad.col_begin = 16;
  shards[1] = &bad;
  d.scale_fixup = MXFP8_SCALE_FIXUP_NONE;
  st = mxfp8_bucket_parts(&d, 256, entries, &total);
  assert_int_equal(st, MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(total == 12345 && all_poison((const uint8_t *)entries, sizeof entries), "a failed plan wrote its outputs");
  /* The export of a good plan with the fix-up set: UNSUPPORTED, the bucket untouched; prepare likewise. */
  shards[1] = &half;
  assert_int_equal(mxfp8_bucket_parts(&d, 256, entries, &total), MXFP8_OK);
  uint8_t *bucket = malloc((size_t)total);
  memset(bucket, POISON, (size_t)total);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor bt = host_bytes(bucket, 1, bshape);
  d.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
  d.bucket_out = &bt;
  d.parts_out = entries;
  assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_ERROR_UNSUPPORTED);
  EXPECT(all_poison(bucket, (size_t)total), "a refused bucket export wrote the bucket");
  mxfp8_plan *p = (mxfp8_plan *)(uintptr_t)0xBAD0;
  assert_int_equal(mxfp8_transfer_prepare(&d, &p), MXFP8_ERROR_UNSUPPORTED);
  EXPECT(p == (mxfp8_plan *)(uintptr_t)0xBAD0, "a refused preparation wrote *out");
  free(bucket);
  free_rowwise(&a);
  free_rowwise(&b);
}

/* ---------------------------------------------------------------------------------------------------
 * Imports: "checked before anything is written" across destinations; shards refused into engine layouts
 * with MXFP8_ERROR_UNSUPPORTED.
 * --------------------------------------------------------------------------------------------------- */

static void test_import_tensor_shards_write_nothing_on_failure(void **state) {
  (void)state;
  rowwise_tensor a, b;
  make_rowwise(&a, 100, 96, 8);
  make_rowwise(&b, 64, 40, 9);
  const mxfp8_tensor *ts[2] = {a.t, b.t};
  mxfp8_shard cols = MXFP8_SHARD_INIT;
  cols.col_end = 64;
  const mxfp8_shard *shards[2] = {&cols, NULL};
  uint8_t v0[100 * 64], s0[100 * 2], v1[64 * 40], s1[64 * 2 * 4];
  int64_t v0s[1] = {sizeof v0}, s0s[1] = {sizeof s0}, v1s[1] = {sizeof v1}, s1s[1] = {64 * 2};
  DLTensor dv0 = host_bytes(v0, 1, v0s), ds0 = host_bytes(s0, 1, s0s), dv1 = host_bytes(v1, 1, v1s),
           ds1 = host_bytes(s1, 1, s1s);
  DLTensor *values[2] = {&dv0, &dv1}, *scales[2] = {&ds0, &ds1};
  int32_t targets[2];
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 2);
  d.tensors = ts, d.shards = shards, d.values = values, d.scales = scales, d.target_layouts = targets;
  const struct {
    int32_t layout0, layout1;
    int64_t s1_bytes;
    mxfp8_status want;
  } cases[] = {
      {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, 64 * 4, MXFP8_ERROR_INVALID_ARGUMENT},
      {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_COMPACT, 64 * 2 - 1, MXFP8_ERROR_INVALID_ARGUMENT},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, MXFP8_SCALE_LAYOUT_COMPACT, 64 * 2, MXFP8_ERROR_UNSUPPORTED},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    memset(v0, POISON, sizeof v0), memset(s0, POISON, sizeof s0), memset(v1, POISON, sizeof v1), memset(s1, POISON, sizeof s1);
    targets[0] = cases[i].layout0;
    targets[1] = cases[i].layout1;
    s1s[0] = cases[i].s1_bytes;
    int64_t s0_need = 0;
    assert_int_equal(mxfp8_layout_bytes(cases[i].layout0, 0, 100, 2, &s0_need), MXFP8_OK);
    uint8_t *s0_buf = malloc((size_t)s0_need);
    memset(s0_buf, POISON, (size_t)s0_need);
    int64_t s0n[1] = {s0_need};
    DLTensor ds0b = host_bytes(s0_buf, 1, s0n);
    scales[0] = &ds0b;
    const mxfp8_status st = mxfp8_transfer(&d, NULL);
    EXPECT(st == cases[i].want, "case %zu: status %d (%s)", i, st, mxfp8_last_error());
    EXPECT(all_poison(v0, sizeof v0) && all_poison(s0_buf, (size_t)s0_need), "case %zu: destination 0 written", i);
    EXPECT(all_poison(v1, sizeof v1) && all_poison(s1, sizeof s1), "case %zu: destination 1 written", i);
    free(s0_buf);
    scales[0] = &ds0;
  }
  free_rowwise(&a);
  free_rowwise(&b);
}

/* desc.shards of a FROM_BUCKET transfer with a part in MXFP8_SCALE_LAYOUT_128X4: "A shard of a bucket
 * part in MXFP8_SCALE_LAYOUT_128X4 may only go to a compact destination" (there: the crop of S, read out
 * of the tiles), and into a 128x4 destination it is MXFP8_ERROR_UNSUPPORTED with nothing written. The
 * bucket is built here from the layout's formula. Both directions, row and column windows, partial blocks. */
static void test_shards_of_a_swizzled_bucket_part(void **state) {
  (void)state;
  const int64_t m = 300, k = 200;
  uint64_t rng = 47;
  for (int columnwise = 0; columnwise < 2; ++columnwise) {
    const int64_t R = columnwise ? ref_ceil_div(m, 32) : m, C = columnwise ? k : ref_ceil_div(k, 32);
    const int64_t mr = columnwise ? C : R, mc = columnwise ? R : C; /* the matrix swizzled: S or S^T */
    const int64_t swz = ref_round_up(mr, 128) * ref_round_up(mc, 4);
    uint8_t *S = malloc((size_t)(R * C));
    fill_random_scales(S, (size_t)(R * C), &rng);
    const uint64_t values_offset = 0, scales_offset = (uint64_t)ref_round_up(m * k, 256);
    const int64_t total = (int64_t)scales_offset + swz;
    uint8_t *bucket = malloc((size_t)total);
    memset(bucket, POISON, (size_t)total);
    fill_random(bucket, (size_t)(m * k), &rng);
    for (int64_t y = 0; y < R; ++y)
      for (int64_t x = 0; x < C; ++x)
        bucket[scales_offset + (columnwise ? ref_swizzled_index(x, y, ref_round_up(mc, 4))
                                           : ref_swizzled_index(y, x, ref_round_up(mc, 4)))] = S[y * C + x];
    for (int64_t i = scales_offset; i < total; ++i) /* padding zero, as the layout has it */
      if (bucket[i] == POISON) bucket[i] = 0;
    const mxfp8_bucket_part entry = {values_offset, (uint64_t)(m * k), scales_offset, (uint64_t)swz, 0, 0};
    int64_t bshape[1] = {total};
    DLTensor bt = host_bytes(bucket, 1, bshape);
    const int32_t ndims[1] = {2}, directions[1] = {columnwise}, layouts[1] = {MXFP8_SCALE_LAYOUT_128X4};
    const int32_t formats[1] = {MXFP8_FORMAT_E4M3};
    const int64_t shape[2] = {m, k};
    const int64_t *shapes[1] = {shape};
    const struct {
      int64_t r0, r1, c0, c1;
    } windows[] = {{0, 96, 0, -1}, {64, 300, 32, 200}, {288, 300, 0, 64}, {128, 160, 160, 200}};
    for (size_t w = 0; w < sizeof windows / sizeof windows[0]; ++w) {
      mxfp8_shard shard = MXFP8_SHARD_INIT;
      shard.row_begin = windows[w].r0, shard.row_end = windows[w].r1;
      shard.col_begin = windows[w].c0, shard.col_end = windows[w].c1;
      const int64_t c1 = windows[w].c1 < 0 ? k : windows[w].c1;
      const int64_t rows = windows[w].r1 - windows[w].r0, cols = c1 - windows[w].c0;
      const int64_t sr = columnwise ? ref_ceil_div(rows, 32) : rows, sc = columnwise ? cols : ref_ceil_div(cols, 32);
      const int64_t y0 = columnwise ? windows[w].r0 / 32 : windows[w].r0, x0 = columnwise ? windows[w].c0 : windows[w].c0 / 32;
      const mxfp8_shard *shards[1] = {&shard};
      mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, 1);
      d.bucket_in = &bt, d.parts_in = &entry, d.ndims = ndims, d.shapes = shapes, d.directions = directions;
      d.formats = formats, d.source_layouts = layouts;
      d.shards = shards;
      uint8_t *dv = malloc((size_t)(rows * cols)), *ds = malloc((size_t)(sr * sc) + 4096);
      for (int target = 0; target < 2; ++target) {
        memset(dv, POISON, (size_t)(rows * cols));
        memset(ds, POISON, (size_t)(sr * sc) + 4096);
        int64_t need = 0;
        assert_int_equal(mxfp8_layout_bytes(target, columnwise, sr, sc, &need), MXFP8_OK);
        int64_t vshape[1] = {rows * cols}, sshape[1] = {need};
        DLTensor dvt = host_bytes(dv, 1, vshape), dst = host_bytes(ds, 1, sshape);
        DLTensor *dvs[1] = {&dvt}, *dss[1] = {&dst};
        d.values = dvs, d.scales = dss, d.target_layouts = &target;
        const mxfp8_status st = mxfp8_transfer(&d, NULL);
        if (target == MXFP8_SCALE_LAYOUT_128X4) {
          EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "col %d window %zu into 128x4: status %d (%s)", columnwise, w, st,
                 mxfp8_last_error());
          EXPECT(all_poison(dv, (size_t)(rows * cols)) && all_poison(ds, (size_t)need), "col %d window %zu: written",
                 columnwise, w);
          continue;
        }
        EXPECT(st == MXFP8_OK, "col %d window %zu: status %d (%s)", columnwise, w, st, mxfp8_last_error());
        for (int64_t y = 0; y < rows; ++y)
          EXPECT(memcmp(dv + y * cols, bucket + (windows[w].r0 + y) * k + windows[w].c0, (size_t)cols) == 0,
                 "col %d window %zu: values row %lld", columnwise, w, (long long)y);
        for (int64_t y = 0; y < sr; ++y)
          for (int64_t x = 0; x < sc; ++x)
            EXPECT(ds[y * sc + x] == S[(y0 + y) * C + x0 + x], "col %d window %zu: scale (%lld, %lld)", columnwise, w,
                   (long long)y, (long long)x);
        EXPECT(all_poison(ds + sr * sc, 4096), "col %d window %zu: written past the destination", columnwise, w);
      }
      free(dv);
      free(ds);
    }
    free(S);
    free(bucket);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_shards_match_the_crop),
      cmocka_unit_test(test_row_pieces_concatenate),
      cmocka_unit_test(test_views_where_the_bytes_lie),
      cmocka_unit_test(test_empty_tensor_and_single_outputs),
      cmocka_unit_test(test_older_options_have_no_shard),
      cmocka_unit_test(test_bucket_of_shards_holds_each_crop),
      cmocka_unit_test(test_bucket_shards_and_the_scale_fixup),
      cmocka_unit_test(test_import_takes_each_ranks_shard_of_a_whole_bucket),
      cmocka_unit_test(test_import_refuses_pieces_that_split_tiles),
      cmocka_unit_test(test_direct_import_of_shards),
      cmocka_unit_test(test_bucket_shards_refuse_fixup_and_write_nothing),
      cmocka_unit_test(test_import_tensor_shards_write_nothing_on_failure),
      cmocka_unit_test(test_shards_of_a_swizzled_bucket_part),
  };
  return cmocka_run_group_tests_name("shard export", tests, NULL, NULL);
}
