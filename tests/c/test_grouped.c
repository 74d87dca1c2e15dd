/* Grouped MoE experts in one flat values buffer and one flat scale buffer: per expert, all experts in
 * one batched call, and stacked [E, N, ...]; uneven experts, partial blocks, explicit offsets, every
 * scale layout; lifetime; bad descriptions. Inputs are built from the layout's permute form. */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

enum { MAX_EXPERTS = 8 };

typedef struct {
  int experts;
  int64_t rows[MAX_EXPERTS];
  int64_t k;
  mxfp8_scale_layout layout;
  mxfp8_grouped_scales packing;
  /* explicit scale_offsets: 1, with poisoned gaps between experts; 2, with a poisoned lead before the
   * first expert only (the experts' scales back to back after it) */
  int gaps;
} group_case;

typedef struct {
  test_tensor *data, *scales;
  uint8_t *s[MAX_EXPERTS]; /* each expert's compact scales */
  int64_t offsets[MAX_EXPERTS];
  mxfp8_grouped_tensor *g;
} group;

static group make_group(const group_case *c, uint64_t *rng) {
  group g;
  memset(&g, 0, sizeof g);
  const int64_t cols = ref_ceil_div(c->k, 32);
  int64_t total_rows = 0, scale_bytes = 0;
  for (int e = 0; e < c->experts; ++e) {
    total_rows += c->rows[e];
    g.offsets[e] = scale_bytes + (c->gaps == 1 || (c->gaps == 2 && e == 0) ? 16 : 0);
    const int64_t bytes = c->packing == MXFP8_GROUPED_SCALES_PADDED ? ref_round_up(c->rows[e], 128) * ref_round_up(cols, 4)
                                                                    : c->rows[e] * cols;
    scale_bytes = g.offsets[e] + bytes;
  }
  /* a spare byte: a buffer large enough is taken, back to back too (TE's JAX grouped quantize over-allocates) */
  const int64_t vshape[2] = {total_rows, c->k}, sshape[1] = {scale_bytes + 1};
  g.data = test_tensor_new(2, vshape, kDLUInt, 1);
  g.scales = test_tensor_new(1, sshape, kDLUInt, 1);
  fill_random(g.data->buffer, g.data->bytes, rng);
  for (int e = 0; e < c->experts; ++e) {
    g.s[e] = malloc((size_t)(c->rows[e] * cols) + 1);
    fill_random_scales(g.s[e], (size_t)(c->rows[e] * cols), rng);
    const int64_t row_stride = c->packing == MXFP8_GROUPED_SCALES_PADDED ? ref_round_up(cols, 4) : cols;
    for (int64_t r = 0; r < c->rows[e]; ++r)
      for (int64_t x = 0; x < cols; ++x) {
        const size_t at = c->layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED ? ref_swizzled_index(r, x, ref_round_up(cols, 4))
                                                                      : (size_t)(r * row_stride + x);
        g.scales->buffer[g.offsets[e] + (int64_t)at] = g.s[e][r * cols + x];
      }
  }
  mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
  desc.scale_layout = c->layout;
  desc.scales = c->packing;
  desc.num_experts = c->experts;
  desc.cols = c->k;
  desc.expert_rows = c->rows;
  desc.scale_offsets = c->gaps ? g.offsets : NULL;
  desc.data = &g.data->managed;
  desc.scale_inv = &g.scales->managed;
  const mxfp8_status st = mxfp8_grouped_tensor_create(&desc, &g.g);
  EXPECT(st == MXFP8_OK, "grouped create: %s", mxfp8_last_error());
  return g;
}

static void free_group(group *g, int experts) {
  for (int e = 0; e < experts; ++e) free(g->s[e]);
  test_tensor_free(g->data);
  test_tensor_free(g->scales);
}

static const group_case kCases[] = {
    {5, {0, 1, 100, 257, 128}, 48, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 0},
    {5, {0, 1, 100, 257, 128}, 48, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_PADDED, 0},
    {4, {64, 3, 200, 31}, 200, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 0},
    {4, {64, 3, 200, 31}, 200, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 1},
    {3, {96, 96, 96}, 16, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 1},
    /* Experts of whole 128-row tiles back to back: the batched export's jobs merge into one matrix (128 +
     * 256 + 128, then the 100-row expert ends the run: the 128 after it is a job of its own). */
    {6, {128, 256, 128, 100, 128, 128}, 48, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 0},
    /* The same rows with gaps between the experts' scales: nothing continues, nothing merges. */
    {3, {128, 128, 256}, 48, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 1},
    /* Row-major compact scales back to back: their copies merge the same way. */
    {4, {128, 7, 128, 128}, 300, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 0},
};

static void test_each_expert_exports_its_own_scales(void **state) {
  (void)state;
  uint64_t rng = 600;
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i) {
    const group_case *c = &kCases[i];
    group g = make_group(c, &rng);
    const int64_t cols = ref_ceil_div(c->k, 32);
    int64_t first_row = 0, total = 0;
    for (int e = 0; e < c->experts; ++e) total += c->rows[e] * cols;
    uint8_t *bucket = malloc((size_t)total + 1);
    memset(bucket, POISON, (size_t)total + 1);
    mxfp8_tensor *experts[MAX_EXPERTS];
    DLTensor dst[MAX_EXPERTS];
    DLTensor *dsts[MAX_EXPERTS];
    int64_t sizes[MAX_EXPERTS], at = 0;
    for (int e = 0; e < c->experts; ++e) {
      EXPECT(mxfp8_grouped_expert(g.g, e, &experts[e]) == MXFP8_OK, "case %zu expert %d: %s", i, e, mxfp8_last_error());
      DLManagedTensorVersioned *values = NULL, *scales = NULL;
      EXPECT(mxfp8_export_components(experts[e], NULL, &values, &scales) == MXFP8_OK, "export: %s", mxfp8_last_error());
      EXPECT(values->dl_tensor.shape[0] == c->rows[e] && values->dl_tensor.shape[1] == c->k, "case %zu expert %d shape", i, e);
      EXPECT((uint8_t *)values->dl_tensor.data + values->dl_tensor.byte_offset == g.data->buffer + first_row * c->k,
             "case %zu expert %d: values are not a view at its first row", i, e);
      for (int64_t j = 0; j < c->rows[e] * cols; ++j)
        EXPECT(read_through_strides(&scales->dl_tensor, j) == g.s[e][j], "case %zu expert %d scale %lld", i, e, (long long)j);
      release_managed(values);
      release_managed(scales);
      first_row += c->rows[e];
      sizes[e] = c->rows[e] * cols;
      dst[e] = (DLTensor){bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &sizes[e], NULL, (uint64_t)at};
      dsts[e] = &dst[e];
      at += sizes[e];
    }
    /* all experts in one batched call */
    EXPECT(mxfp8_export_scales_batched((const mxfp8_tensor *const *)experts, dsts, (size_t)c->experts, NULL) == MXFP8_OK,
           "batched: %s", mxfp8_last_error());
    at = 0;
    for (int e = 0; e < c->experts; ++e) {
      EXPECT(memcmp(bucket + at, g.s[e], (size_t)sizes[e]) == 0, "case %zu: batched expert %d", i, e);
      at += sizes[e];
    }
    /* the group goes first; the experts keep the flat buffers alive */
    mxfp8_grouped_tensor_release(g.g);
    EXPECT(g.data->deleter_calls == 0, "freed while experts live");
    for (int e = 0; e < c->experts; ++e) mxfp8_tensor_release(experts[e]);
    EXPECT(g.data->deleter_calls == 1 && g.scales->deleter_calls == 1, "case %zu: deleters %d, %d", i,
           g.data->deleter_calls, g.scales->deleter_calls);
    free(bucket);
    free_group(&g, c->experts);
  }
}

static void test_stacked_export_for_uniform_experts(void **state) {
  (void)state;
  uint64_t rng = 601;
  const group_case uniform[] = {
      {4, {96, 96, 96, 96}, 200, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 0},
      {4, {96, 96, 96, 96}, 200, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_PADDED, 0},
      {4, {96, 96, 96, 96}, 200, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 0},
      {4, {96, 96, 96, 96}, 200, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 1},
      {4, {96, 96, 96, 96}, 200, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 2},
      /* whole tiles: the four experts' unswizzle jobs are one */
      {4, {128, 128, 128, 128}, 200, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 0},
  };
  for (int i = 0; i < (int)(sizeof uniform / sizeof uniform[0]); ++i) {
    group g = make_group(&uniform[i], &rng);
    const int64_t n = uniform[i].rows[0];
    DLManagedTensorVersioned *values = NULL, *scales = NULL;
    EXPECT(mxfp8_grouped_export(g.g, NULL, 0, NULL, &values, &scales) == MXFP8_OK, "stacked: %s", mxfp8_last_error());
    EXPECT(values->dl_tensor.ndim == 3 && values->dl_tensor.shape[0] == 4 && values->dl_tensor.shape[1] == n &&
               values->dl_tensor.shape[2] == 200 && values->dl_tensor.data == g.data->buffer,
           "values [E, N, K] view");
    EXPECT(scales->dl_tensor.ndim == 3 && scales->dl_tensor.shape[2] == 7, "scales [E, N, C]");
    /* "a view when ... compact with each expert's scales right after the one before", wherever the first
     * starts */
    const int view = uniform[i].packing == MXFP8_GROUPED_SCALES_COMPACT && uniform[i].gaps != 1;
    EXPECT(!!(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == !view, "case %d: view or copy", i);
    for (int e = 0; e < 4; ++e)
      for (int64_t j = 0; j < n * 7; ++j)
        EXPECT(read_through_strides(&scales->dl_tensor, e * n * 7 + j) == g.s[e][j], "case %d expert %d scale %lld", i, e,
               (long long)j);
    mxfp8_grouped_tensor_release(g.g);
    release_managed(values);
    /* a scales view still holds the flat buffers; a scales copy does not */
    EXPECT(g.data->deleter_calls == (view ? 0 : 1), "case %d: data deleter ran %d times", i, g.data->deleter_calls);
    release_managed(scales);
    EXPECT(g.data->deleter_calls == 1 && g.scales->deleter_calls == 1, "deleters after the last view");
    free_group(&g, 4);
  }
}

static void test_bad_grouped_descriptions(void **state) {
  (void)state;
  const int64_t vshape[2] = {200, 64}, sshape[1] = {384 * 4};
  test_tensor *data = test_tensor_new(2, vshape, kDLUInt, 1), *scales = test_tensor_new(1, sshape, kDLUInt, 1);
  const int64_t rows[2] = {100, 100}, uneven[2] = {150, 50}, far[2] = {0, 1100};
  mxfp8_grouped_desc base = MXFP8_GROUPED_DESC_INIT;
  base.num_experts = 2;
  base.cols = 64;
  base.expert_rows = rows;
  base.data = &data->managed;
  base.scale_inv = &scales->managed;
  mxfp8_grouped_tensor *g = (mxfp8_grouped_tensor *)(uintptr_t)0x1;
  mxfp8_grouped_desc d = base;
  d.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  d.scales = MXFP8_GROUPED_SCALES_COMPACT;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("cannot be MXFP8_GROUPED_SCALES_COMPACT");
  d = base;
  d.cols = 65;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("the experts need 200 rows x 65 = 13000");
  d = base;
  d.scale_offsets = far;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("holds 1536 bytes, the experts' scales reach byte 1612");
  /* An offset whose end passes INT64_MAX names itself; a larger buffer is taken, at offsets or back to back. */
  d = base;
  d.scale_offsets = (const int64_t[]){0, INT64_MAX - 2};
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.scale_offsets[1] is 9223372036854775805: with the expert's 512 bytes of scales it "
                             "ends past INT64_MAX");
  d.scale_offsets = (const int64_t[]){0, 512};
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
  mxfp8_grouped_tensor_release(g);
  d.scale_offsets = NULL; /* 1024 bytes of experts' scales in 1536 */
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
  mxfp8_grouped_tensor_release(g);
  g = (mxfp8_grouped_tensor *)(uintptr_t)0x1;
  assert_int_equal(data->deleter_calls, 2);
  data->deleter_calls = scales->deleter_calls = 0;
  d = base;
  d.num_experts = 0;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.num_experts is 0");
  assert_ptr_equal(g, (mxfp8_grouped_tensor *)(uintptr_t)0x1);
  assert_int_equal(data->deleter_calls + scales->deleter_calls, 0);
  /* valid, uneven: stacking is refused, and experts are range-checked */
  d = base;
  d.expert_rows = uneven;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
  DLManagedTensorVersioned *v = NULL;
  assert_int_equal(mxfp8_grouped_export(g, NULL, 0, NULL, &v, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("these have 150 and 50 rows");
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_grouped_expert(g, 2, &t), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("expert 2 is out of range: the group has 2 experts");
  mxfp8_grouped_tensor_release(g);
  assert_int_equal(data->deleter_calls, 1);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* Expert parallelism: a subset of experts in a given order, stacked; views only where the chosen experts
 * lie back to back in order, copies (poisoned first) otherwise; every layout; bad choices refused. */
/* Neighbouring swizzled sources are one matrix only when the first fills whole 128-row tiles. Here both
 * tensors' scales are the same 128 x 4 tile (sources may share bytes: only writes are checked), the
 * first using 100 of its rows: read as one matrix, the second's rows would be the first's rows 100.. of
 * that tile. Both references come from the one buffer through the swizzle formula. */
static void test_batched_merges_only_whole_tiles(void **state) {
  (void)state;
  uint64_t rng = 777;
  enum { K = 128, C = 4, ROWS_A = 100, ROWS_B = 128, B_AT = 0, BYTES = 128 * C };
  uint8_t *buffer = malloc(BYTES);
  fill_random_scales(buffer, BYTES, &rng);
  int64_t scale_shape[2] = {128, C};
  DLManagedTensorVersioned scales_a = borrowed_bytes(buffer, kDLCPU, 2, scale_shape);
  DLManagedTensorVersioned scales_b = borrowed_bytes(buffer, kDLCPU, 2, scale_shape);
  scales_b.dl_tensor.byte_offset = B_AT;
  const int64_t rows[2] = {ROWS_A, ROWS_B};
  int64_t value_shapes[2][2] = {{ROWS_A, K}, {ROWS_B, K}};
  uint8_t *values = calloc(ROWS_B * K, 1);
  DLManagedTensorVersioned data[2] = {borrowed_bytes(values, kDLCPU, 2, value_shapes[0]),
                                      borrowed_bytes(values, kDLCPU, 2, value_shapes[1])};
  mxfp8_tensor *t[2];
  for (int i = 0; i < 2; ++i) {
    data[i].dl_tensor.dtype.code = kDLFloat8_e4m3fn;
    mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
    d.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    d.rowwise_data = &data[i];
    d.rowwise_scale_inv = i == 0 ? &scales_a : &scales_b;
    EXPECT(mxfp8_tensor_create(&d, &t[i]) == MXFP8_OK, "create %d: %s", i, mxfp8_last_error());
  }
  uint8_t out[(ROWS_A + ROWS_B) * C];
  memset(out, POISON, sizeof out);
  int64_t sizes[2] = {ROWS_A * C, ROWS_B * C};
  DLTensor dst[2] = {{out, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &sizes[0], NULL, 0},
                     {out, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &sizes[1], NULL, (uint64_t)sizes[0]}};
  DLTensor *dsts[2] = {&dst[0], &dst[1]};
  EXPECT(mxfp8_export_scales_batched((const mxfp8_tensor *const *)t, dsts, 2, NULL) == MXFP8_OK, "%s",
         mxfp8_last_error());
  const int64_t at[2] = {0, B_AT};
  for (int i = 0, o = 0; i < 2; ++i)
    for (int64_t r = 0; r < rows[i]; ++r)
      for (int64_t c = 0; c < C; ++c, ++o) {
        const uint8_t want = buffer[at[i] + (int64_t)ref_swizzled_index(r, c, C)];
        EXPECT(out[o] == want, "tensor %d scale (%lld, %lld): 0x%02x, want 0x%02x", i, (long long)r, (long long)c,
               out[o], want);
      }
  for (int i = 0; i < 2; ++i) mxfp8_tensor_release(t[i]);
  free(values);
  free(buffer);
}

static void test_subset_of_experts_in_any_order(void **state) {
  (void)state;
  static const group_case uniform[] = {
      {6, {160, 160, 160, 160, 160, 160}, 200, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, MXFP8_GROUPED_SCALES_PADDED, 0},
      {6, {160, 160, 160, 160, 160, 160}, 200, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_PADDED, 1},
      {6, {33, 33, 33, 33, 33, 33}, 48, MXFP8_SCALE_LAYOUT_ROW_MAJOR, MXFP8_GROUPED_SCALES_COMPACT, 0},
  };
  static const int32_t choices[][4] = {{4, 1, 5, 1}, {2, 3, 4, -1}, {5, -1, -1, -1}, {0, 2, 4, -1}};
  uint64_t rng = 61;
  for (size_t ci = 0; ci < sizeof uniform / sizeof uniform[0]; ++ci) {
    const group_case *c = &uniform[ci];
    group g = make_group(c, &rng);
    const int64_t n = c->rows[0], k = c->k, cols = ref_ceil_div(k, 32);
    for (size_t choice = 0; choice < sizeof choices / sizeof choices[0]; ++choice) {
      size_t count = 0;
      while (count < 4 && choices[choice][count] >= 0) ++count;
      mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
      o.allocator = poisoned_allocator;
      DLManagedTensorVersioned *values = NULL, *scales = NULL;
      EXPECT(mxfp8_grouped_export(g.g, choices[choice], count, &o, &values, &scales) == MXFP8_OK, "case %zu: %s",
             ci, mxfp8_last_error());
      EXPECT(values->dl_tensor.ndim == 3 && values->dl_tensor.shape[0] == (int64_t)count && values->dl_tensor.shape[1] == n &&
                 scales->dl_tensor.shape[2] == cols, "case %zu choice %zu: shapes", ci, choice);
      int in_order = 1;
      for (size_t i = 1; i < count; ++i) in_order &= choices[choice][i] == choices[choice][0] + (int32_t)i;
      EXPECT(!!(values->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == !in_order, "case %zu choice %zu: values view/copy", ci, choice);
      const int scales_view = in_order && c->packing == MXFP8_GROUPED_SCALES_COMPACT && !c->gaps;
      EXPECT(!!(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == !scales_view, "case %zu choice %zu: scales view/copy", ci, choice);
      for (size_t i = 0; i < count; ++i) {
        const int32_t e = choices[choice][i];
        for (int64_t j = 0; j < n * k; ++j)
          EXPECT(read_through_strides(&values->dl_tensor, (int64_t)i * n * k + j) == g.data->buffer[e * n * k + j],
                 "case %zu choice %zu: expert %d value %lld", ci, choice, e, (long long)j);
        for (int64_t j = 0; j < n * cols; ++j)
          EXPECT(read_through_strides(&scales->dl_tensor, (int64_t)i * n * cols + j) == g.s[e][j],
                 "case %zu choice %zu: expert %d scale %lld", ci, choice, e, (long long)j);
      }
      release_managed(values);
      release_managed(scales);
    }
    /* bad choices: nothing written */
    DLManagedTensorVersioned *sentinel = (DLManagedTensorVersioned *)(uintptr_t)0xBAD, *v = sentinel, *sc = sentinel;
    const int32_t out_of_range[2] = {1, 6};
    EXPECT(mxfp8_grouped_export(g.g, out_of_range, 2, NULL, &v, &sc) == MXFP8_ERROR_INVALID_ARGUMENT, "range");
    assert_last_error_contains("experts[1] is 6, out of range: the group has 6 experts");
    EXPECT(mxfp8_grouped_export(g.g, out_of_range, 0, NULL, &v, &sc) == MXFP8_ERROR_INVALID_ARGUMENT, "count 0");
    assert_last_error_contains("count is 0");
    EXPECT(mxfp8_grouped_export(g.g, NULL, 2, NULL, &v, &sc) == MXFP8_ERROR_INVALID_ARGUMENT, "NULL");
    assert_last_error_contains("experts is NULL");
    /* a set options.shard (even the whole tensor) is a choice the stacked exports cannot honour */
    mxfp8_export_options sharded = MXFP8_EXPORT_OPTIONS_INIT;
    const mxfp8_shard whole = MXFP8_SHARD_INIT;
    sharded.shard = &whole;
    EXPECT(mxfp8_grouped_export(g.g, out_of_range, 1, &sharded, &v, &sc) == MXFP8_ERROR_INVALID_ARGUMENT, "shard");
    assert_last_error_contains("options.shard is set: mxfp8_grouped_export exports whole tensors");
    EXPECT(mxfp8_grouped_export(g.g, NULL, 0, &sharded, &v, &sc) == MXFP8_ERROR_INVALID_ARGUMENT, "shard, all");
    assert_last_error_contains("options.shard is set: mxfp8_grouped_export exports whole tensors");
    EXPECT(v == sentinel && sc == sentinel, "an output was written");
    mxfp8_grouped_tensor_release(g.g);
    free_group(&g, c->experts);
  }
  /* experts of different row counts cannot be stacked */
  group g = make_group(&kCases[2], &rng);
  const int32_t mixed[2] = {0, 2};
  DLManagedTensorVersioned *v = NULL, *sc = NULL;
  EXPECT(mxfp8_grouped_export(g.g, mixed, 2, NULL, &v, &sc) == MXFP8_ERROR_INVALID_ARGUMENT, "mixed rows");
  assert_last_error_contains("experts[1] (expert 2) has 200");
  mxfp8_grouped_tensor_release(g.g);
  free_group(&g, kCases[2].experts);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_expert_exports_its_own_scales),
      cmocka_unit_test(test_stacked_export_for_uniform_experts),
      cmocka_unit_test(test_bad_grouped_descriptions),
      cmocka_unit_test(test_subset_of_experts_in_any_order),
      cmocka_unit_test(test_batched_merges_only_whole_tiles),
  };
  return cmocka_run_group_tests_name("grouped MoE experts", tests, NULL, NULL);
}
