/* The export of every storage layout a producer uses, for the seed's shapes and more: values are a view,
 * scales come out compact and exactly equal to the scales the test put in, padding is never read, and
 * the inputs are never touched. Swizzled inputs are built from the layout's permute form, in the test. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

enum storage { STORAGE_COMPACT, STORAGE_PADDED, STORAGE_SWIZZLED };
static const char *const kStorageNames[] = {"compact", "padded", "swizzled"};

typedef struct {
  int32_t ndim;
  int64_t shape[3];
  enum storage storage;
} layout_case;

/* The seed's shapes ((100, 48) partial last block, (128, 4096), (3, 5, 48), (1, 16), (257, 33)) plus
 * shapes whose scale counts are not multiples of 4 (C = 3, 7) or of 128 rows, and K < 32. */
#define SHAPES(storage)                                                                           \
  {2, {100, 48}, storage}, {2, {128, 4096}, storage}, {3, {3, 5, 48}, storage}, {2, {1, 16}, storage}, \
      {2, {257, 33}, storage}, {2, {64, 16}, storage}, {2, {33, 200}, storage}, {3, {2, 70, 96}, storage}

static layout_case kCases[] = {SHAPES(STORAGE_COMPACT), SHAPES(STORAGE_PADDED), SHAPES(STORAGE_SWIZZLED)};

typedef struct {
  int64_t rows, cols;             /* the compact scale matrix R x C */
  int32_t buffer_ndim;
  int64_t buffer_shape[3];
  int64_t buffer_row_cols;        /* columns of the row-major buffer (C' >= C) */
} scale_geometry;

static scale_geometry geometry_for(const layout_case *c, int columnwise) {
  scale_geometry g;
  int64_t m = 1;
  for (int32_t i = 0; i + 1 < c->ndim; ++i) m *= c->shape[i];
  const int64_t k = c->shape[c->ndim - 1];
  g.rows = columnwise ? ref_ceil_div(m, 32) : m;
  g.cols = columnwise ? k : ref_ceil_div(k, 32);
  g.buffer_ndim = 2;
  switch (c->storage) {
    case STORAGE_COMPACT:
      if (!columnwise) { /* (*lead, C), as a compact producer would hand it over */
        g.buffer_ndim = c->ndim;
        memcpy(g.buffer_shape, c->shape, sizeof(c->shape));
        g.buffer_shape[c->ndim - 1] = g.cols;
      } else {
        g.buffer_shape[0] = g.rows;
        g.buffer_shape[1] = g.cols;
      }
      g.buffer_row_cols = g.cols;
      break;
    case STORAGE_PADDED:
    case STORAGE_SWIZZLED: /* Transformer Engine's allocation */
      g.buffer_shape[0] = columnwise ? ref_round_up(g.rows, 4) : ref_round_up(g.rows, 128);
      g.buffer_shape[1] = columnwise ? ref_round_up(g.cols, 128) : ref_round_up(g.cols, 4);
      g.buffer_row_cols = g.buffer_shape[1];
      break;
  }
  return g;
}

/* Lays the reference scales S (R x C, row-major) into the buffer the way the storage says. */
static void store_scales(const layout_case *c, int columnwise, const scale_geometry *g, const uint8_t *s,
                         uint8_t *buffer) {
  for (int64_t r = 0; r < g->rows; ++r)
    for (int64_t col = 0; col < g->cols; ++col) {
      size_t at;
      if (c->storage != STORAGE_SWIZZLED) at = (size_t)(r * g->buffer_row_cols + col);
      else if (!columnwise) at = ref_swizzled_index(r, col, ref_round_up(g->cols, 4));
      else at = ref_swizzled_index(col, r, ref_round_up(g->rows, 4)); /* S^T is what is swizzled */
      buffer[at] = s[r * g->cols + col];
    }
}

static double decode(uint8_t v, int e5m2) { return e5m2 ? ref_decode_e5m2(v) : ref_decode_e4m3(v); }

static int same_double(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static void run_one(const layout_case *c, int e5m2, int strided_view, int columnwise, int caller_alloc,
                    uint64_t *rng) {
  char ctx[200];
  snprintf(ctx, sizeof ctx, "shape ndim %d (%lld, %lld, ...) %s %s %s %s %s", c->ndim, (long long)c->shape[0],
           (long long)c->shape[1], kStorageNames[c->storage], e5m2 ? "e5m2" : "e4m3",
           strided_view ? "strided-view" : "copy", columnwise ? "columnwise" : "rowwise",
           caller_alloc ? "caller-allocator" : "library-allocator");
  const scale_geometry g = geometry_for(c, columnwise);
  const int64_t k = c->shape[c->ndim - 1];

  /* Values stored as TE does (uint8) for E4M3, as the fp8 dtype for E5M2. */
  test_tensor *data = test_tensor_new(c->ndim, c->shape, e5m2 ? kDLFloat8_e5m2 : kDLUInt, 1);
  fill_random(data->buffer, data->bytes, rng);
  uint8_t *s = (uint8_t *)malloc((size_t)(g.rows * g.cols) + 1);
  fill_random_scales(s, (size_t)(g.rows * g.cols), rng);
  test_tensor *scales = test_tensor_new(g.buffer_ndim, g.buffer_shape, kDLUInt, 1);
  store_scales(c, columnwise, &g, s, scales->buffer);
  uint8_t *data_before = (uint8_t *)malloc(data->bytes + 1), *scales_before = (uint8_t *)malloc(scales->bytes + 1);
  memcpy(data_before, data->buffer, data->bytes);
  memcpy(scales_before, scales->buffer, scales->bytes);

  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = e5m2 ? MXFP8_FORMAT_E5M2 : MXFP8_FORMAT_E4M3;
  desc.scale_layout = c->storage == STORAGE_SWIZZLED ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (columnwise) {
    desc.columnwise_data = &data->managed;
    desc.columnwise_scale_inv = &scales->managed;
  } else {
    desc.rowwise_data = &data->managed;
    desc.rowwise_scale_inv = &scales->managed;
  }
  mxfp8_tensor *tensor = NULL;
  mxfp8_status st = mxfp8_tensor_create(&desc, &tensor);
  EXPECT(st == MXFP8_OK, "%s: create failed: %s", ctx, mxfp8_last_error());

  mxfp8_export_options options = MXFP8_EXPORT_OPTIONS_INIT;
  options.direction = columnwise ? MXFP8_DIRECTION_COLUMNWISE : MXFP8_DIRECTION_ROWWISE;
  options.padded_scales = strided_view ? MXFP8_PADDED_SCALES_STRIDED_VIEW : MXFP8_PADDED_SCALES_COPY;
  if (caller_alloc) options.allocator = poisoned_allocator;
  DLManagedTensorVersioned *values = NULL, *out_scales = NULL;
  st = mxfp8_export_components(tensor, &options, &values, &out_scales);
  EXPECT(st == MXFP8_OK, "%s: export failed: %s", ctx, mxfp8_last_error());

  /* values: a view with the tensor's shape and the format's fp8 dtype */
  const DLTensor *v = &values->dl_tensor;
  EXPECT(v->data == data->buffer && v->byte_offset == 0, "%s: values are not a view", ctx);
  EXPECT(v->dtype.code == (e5m2 ? kDLFloat8_e5m2 : kDLFloat8_e4m3fn) && v->dtype.bits == 8, "%s: dtype", ctx);
  EXPECT(v->ndim == c->ndim && memcmp(v->shape, c->shape, sizeof(int64_t) * (size_t)c->ndim) == 0, "%s: shape", ctx);
  EXPECT(v->strides != NULL && v->strides[c->ndim - 1] == 1, "%s: values strides", ctx);
  EXPECT(!(values->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "%s: values flagged as copied", ctx);

  /* scales: (*lead, C) rowwise, (ceil(M/32), K) columnwise; exactly S */
  const DLTensor *o = &out_scales->dl_tensor;
  if (columnwise) {
    EXPECT(o->ndim == 2 && o->shape[0] == g.rows && o->shape[1] == g.cols, "%s: columnwise scales shape", ctx);
  } else {
    EXPECT(o->ndim == c->ndim, "%s: scales ndim %d", ctx, o->ndim);
    for (int32_t i = 0; i + 1 < c->ndim; ++i) EXPECT(o->shape[i] == c->shape[i], "%s: scales dim %d", ctx, i);
    EXPECT(o->shape[c->ndim - 1] == ref_ceil_div(k, 32), "%s: scales last dim", ctx);
  }
  EXPECT(o->strides != NULL, "%s: scales strides NULL", ctx);
  EXPECT(o->dtype.code == kDLUInt && o->dtype.bits == 8 && o->dtype.lanes == 1, "%s: scales dtype", ctx);
  const int padded_cols = g.buffer_row_cols > g.cols && g.rows > 1;
  const int expect_copy = c->storage == STORAGE_SWIZZLED || (padded_cols && !strided_view);
  EXPECT(!!(out_scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == expect_copy, "%s: IS_COPIED is %d",
         ctx, !!(out_scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED));
  if (!expect_copy) EXPECT(o->data == scales->buffer, "%s: scales should be a view", ctx);
  if (expect_copy && caller_alloc && g.rows * g.cols > 0)
    EXPECT(o->data != scales->buffer && poisoned_allocator_calls > 0, "%s: allocator not used", ctx);
  for (int64_t i = 0; i < g.rows * g.cols; ++i) {
    const uint8_t got = read_through_strides(o, i);
    EXPECT(got == s[i], "%s: scale %lld (row %lld col %lld) is %u, expected %u", ctx, (long long)i,
           (long long)(i / g.cols), (long long)(i % g.cols), got, s[i]);
  }

  /* decode(values, scales) through the outputs equals the dequantization of what was stored */
  if (!caller_alloc) {
    const int64_t m_total = (int64_t)(data->bytes / (size_t)(k ? k : 1));
    for (int64_t m = 0; m < m_total && k > 0; ++m)
      for (int64_t kk = 0; kk < k; ++kk) {
        const int64_t si = columnwise ? (m / 32) * g.cols + kk : m * g.cols + kk / 32;
        const double expected = decode(data->buffer[m * k + kk], e5m2) * ref_decode_e8m0(s[si]);
        const double got = decode(read_through_strides(v, m * k + kk), e5m2) * ref_decode_e8m0(read_through_strides(o, si));
        EXPECT(same_double(got, expected), "%s: decode (%lld, %lld)", ctx, (long long)m, (long long)kk);
      }
  }

  EXPECT(memcmp(data_before, data->buffer, data->bytes) == 0, "%s: values input modified", ctx);
  EXPECT(memcmp(scales_before, scales->buffer, scales->bytes) == 0, "%s: scales input modified", ctx);
  release_managed(values);
  release_managed(out_scales);
  EXPECT(data->deleter_calls == 0 && scales->deleter_calls == 0, "%s: inputs freed too early", ctx);
  mxfp8_tensor_release(tensor);
  EXPECT(data->deleter_calls == 1 && scales->deleter_calls == 1, "%s: input deleters ran %d and %d times", ctx,
         data->deleter_calls, scales->deleter_calls);
  test_tensor_free(data);
  test_tensor_free(scales);
  free(s);
  free(data_before);
  free(scales_before);
}

static void test_export_matches_stored_scales(void **state) {
  const layout_case *c = (const layout_case *)*state;
  uint64_t rng = 0x5EED0000u + (uint64_t)c->shape[0] * 131u + (uint64_t)c->shape[1] + (uint64_t)c->storage;
  for (int e5m2 = 0; e5m2 < 2; ++e5m2)
    for (int strided_view = 0; strided_view < 2; ++strided_view)
      for (int columnwise = 0; columnwise < 2; ++columnwise)
        for (int caller_alloc = 0; caller_alloc < 2; ++caller_alloc)
          run_one(c, e5m2, strided_view, columnwise, caller_alloc, &rng);
}

int main(void) {
  enum { N = sizeof(kCases) / sizeof(kCases[0]) };
  struct CMUnitTest tests[N];
  char names[N][96];
  for (int i = 0; i < N; ++i) {
    const layout_case *c = &kCases[i];
    if (c->ndim == 3)
      snprintf(names[i], sizeof names[i], "export_%s_%lldx%lldx%lld", kStorageNames[c->storage],
               (long long)c->shape[0], (long long)c->shape[1], (long long)c->shape[2]);
    else
      snprintf(names[i], sizeof names[i], "export_%s_%lldx%lld", kStorageNames[c->storage],
               (long long)c->shape[0], (long long)c->shape[1]);
    struct CMUnitTest t = cmocka_unit_test_prestate(test_export_matches_stored_scales, (void *)c);
    t.name = names[i];
    tests[i] = t;
  }
  return cmocka_run_group_tests_name("export layouts (rowwise and columnwise, e4m3 and e5m2, view and copy)",
                                     tests, NULL, NULL);
}
