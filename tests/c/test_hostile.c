/* Hostile but valid input: what the library must get right, not refuse. Allocators that place their
 * tensor at a byte_offset, empty tensors with astronomically many rows (work must follow bytes, not a
 * dimension), NULL data for empty buffers, pinned-memory sources whose copies are not pinned, and calls
 * whose inputs legitimately share bytes. The refusals are in test_bad_input.c (and docs/errors.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* An allocator whose tensors start `kOffset` bytes into their allocation, expressed as byte_offset, the
 * way a framework hands out a slice of a larger buffer. */
enum { kOffset = 64 };
static int offset_made, offset_deleted;

typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[8];
  uint8_t *block;
} offset_tensor;

static void offset_deleter(DLManagedTensorVersioned *self) {
  offset_tensor *t = (offset_tensor *)self->manager_ctx;
  offset_deleted++;
  free(t->block);
  free(t);
}

static int offset_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                            void (*set_error)(void *, const char *, const char *)) {
  (void)error_ctx;
  (void)set_error;
  size_t bytes = 1;
  offset_tensor *t = calloc(1, sizeof *t);
  for (int i = 0; i < prototype->ndim; ++i) bytes *= (size_t)prototype->shape[i], t->shape[i] = prototype->shape[i];
  t->block = malloc(bytes + 2 * kOffset);
  memset(t->block, POISON, bytes + 2 * kOffset);
  t->managed.version.major = DLPACK_MAJOR_VERSION;
  t->managed.version.minor = DLPACK_MINOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = offset_deleter;
  t->managed.dl_tensor = *prototype;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.dl_tensor.strides = NULL;
  t->managed.dl_tensor.data = t->block;
  t->managed.dl_tensor.byte_offset = kOffset;
  offset_made++;
  *out = &t->managed;
  return 0;
}

static const uint8_t *bytes_of(const DLManagedTensorVersioned *m) {
  return (const uint8_t *)m->dl_tensor.data + m->dl_tensor.byte_offset;
}

/* The byte_offset of an allocator's tensor is where the output starts: quantize writes there and only
 * there (the 64 bytes before it and after it keep their poison). */
static void test_quantize_honours_allocator_byte_offset(void **state) {
  (void)state;
  enum { M = 64, K = 64 };
  static float input[M * K];
  for (int i = 0; i < M * K; ++i) input[i] = (float)((i * 37) % 199) - 99.0f;
  int64_t shape[2] = {M, K};
  DLTensor in = {input, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  /* The reference: the same quantize into caller buffers. */
  uint8_t ref_values[M * K], ref_scales[M * 2];
  int64_t scale_shape[2] = {M, 2};
  DLTensor rv = {ref_values, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, shape, NULL, 0};
  DLTensor rs = {ref_scales, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, scale_shape, NULL, 0};
  assert_int_equal(mxfp8_quantize_into(&in, NULL, &rv, &rs, NULL, NULL), MXFP8_OK);

  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.allocator = offset_allocator;
  offset_made = offset_deleted = 0;
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_quantize(&in, &o, &v, &s, NULL, NULL), MXFP8_OK);
  assert_int_equal(offset_made, 2);
  assert_int_equal(v->dl_tensor.byte_offset, kOffset);
  EXPECT(memcmp(bytes_of(v), ref_values, sizeof ref_values) == 0, "values written at the allocator's byte_offset");
  EXPECT(memcmp(bytes_of(s), ref_scales, sizeof ref_scales) == 0, "scales written at the allocator's byte_offset");
  const uint8_t *block = (const uint8_t *)v->dl_tensor.data;
  for (int i = 0; i < kOffset; ++i) {
    EXPECT(block[i] == POISON, "byte %d before the values was written", i);
    EXPECT(block[kOffset + M * K + i] == POISON, "byte %d after the values was written", i);
  }
  release_managed(v);
  release_managed(s);
  assert_int_equal(offset_deleted, 2);
}

/* The same for an export's scale copy. */
static void test_export_honours_allocator_byte_offset(void **state) {
  (void)state;
  const int64_t shape[2] = {100, 48}, padded[2] = {128, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 0), *scales = test_tensor_new(2, padded, kDLUInt, 0);
  uint64_t rng = 11;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = offset_allocator;
  DLManagedTensorVersioned *s = NULL;
  assert_int_equal(mxfp8_export_components(t, &o, NULL, &s), MXFP8_OK);
  const uint8_t *out = bytes_of(s);
  for (int r = 0; r < 100; ++r)
    for (int c = 0; c < 2; ++c) EXPECT(out[r * 2 + c] == scales->buffer[r * 4 + c], "scale (%d, %d)", r, c);
  const uint8_t *block = (const uint8_t *)s->dl_tensor.data;
  for (int i = 0; i < kOffset; ++i) EXPECT(block[i] == POISON && block[kOffset + 200 + i] == POISON, "byte %d", i);
  release_managed(s);
  mxfp8_tensor_release(t);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* A (2^40, 0) tensor has no bytes: each call returns at once instead of visiting 2^40 empty rows (which
 * took an hour). ctest's timeout for this executable would catch a regression. */
static void test_empty_tensors_with_huge_dimensions_cost_nothing(void **state) {
  (void)state;
  const int64_t rows = (int64_t)1 << 40;
  int64_t shape[2] = {rows, 0}, swizzled_shape[1] = {0};
  DLManagedTensorVersioned data = borrowed_bytes(NULL, kDLCPU, 2, shape), scales = data;
  for (int layout = 0; layout < 2; ++layout) {
    scales.dl_tensor.shape = layout ? swizzled_shape : shape;
    scales.dl_tensor.ndim = layout ? 1 : 2;
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = layout;
    desc.rowwise_data = &data;
    desc.rowwise_scale_inv = &scales;
    mxfp8_tensor *t = NULL;
    assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
    int64_t none[1] = {0};
    DLTensor dst = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, none, NULL, 0};
    DLTensor *dsts[1] = {&dst};
    const mxfp8_tensor *ts[1] = {t};
    assert_int_equal(mxfp8_export_scales_batched(ts, dsts, 1, NULL), MXFP8_OK);
    DLManagedTensorVersioned *s = NULL;
    assert_int_equal(mxfp8_export_components(t, NULL, NULL, &s), MXFP8_OK);
    release_managed(s);
    mxfp8_transfer_desc to_bucket = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 1);
    to_bucket.tensors = ts;
    mxfp8_bucket_part e;
    uint64_t total = 1;
    assert_int_equal(mxfp8_bucket_parts(&to_bucket, 256, &e, &total), MXFP8_OK);
    assert_int_equal(total, 0);
    DLTensor bucket = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, none, NULL, 0};
    to_bucket.bucket_out = &bucket;
    to_bucket.parts_out = &e;
    assert_int_equal(mxfp8_transfer(&to_bucket, NULL), MXFP8_OK);
    mxfp8_tensor_release(t);
  }
  /* The same through the low-level pair and a grouped expert. */
  DLTensor compact = {NULL, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, shape, NULL, 0};
  DLTensor swizzled = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, swizzled_shape, NULL, 0};
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &compact, NULL), MXFP8_OK);
  int64_t flat[1] = {0};
  DLManagedTensorVersioned gdata = data, gscales = data;
  gdata.dl_tensor.shape = flat;
  gdata.dl_tensor.ndim = 1;
  gscales.dl_tensor = gdata.dl_tensor;
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = 1;
  g.cols = 0;
  g.uniform_rows = rows;
  g.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  g.data = &gdata;
  g.scale_inv = &gscales;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  mxfp8_tensor *expert = NULL;
  assert_int_equal(mxfp8_grouped_expert(grouped, 0, &expert), MXFP8_OK);
  int64_t none[1] = {0};
  DLTensor dst = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, none, NULL, 0};
  DLTensor *dsts[1] = {&dst};
  const mxfp8_tensor *ts[1] = {expert};
  assert_int_equal(mxfp8_export_scales_batched(ts, dsts, 1, NULL), MXFP8_OK);
  mxfp8_tensor_release(expert);
  mxfp8_grouped_tensor_release(grouped);
}

/* Every stride an output carries is an int64 that fits, also for an empty tensor whose non-zero
 * dimensions multiply past INT64_MAX: (0, 2^62, 3) has no elements, but the row-major stride of its first
 * dimension, 2^62 * 3, does not fit. Found by fuzz/fuzz_hostile.cpp: the library computed it with a
 * wrapping multiplication (UBSan: signed integer overflow in compact_strides and strided_rows; the
 * production build handed out a stride of -2^62). Any non-negative strides describe an empty tensor. */
static void check_strides_fit(const DLManagedTensorVersioned *m) {
  const DLTensor *t = &m->dl_tensor;
  assert_non_null(t->strides);
  for (int i = 0; i < t->ndim; ++i) EXPECT(t->strides[i] >= 0, "stride %d of an empty output is %lld", i, (long long)t->strides[i]);
}

static void test_empty_tensors_whose_strides_would_overflow(void **state) {
  (void)state;
  const int64_t big = (int64_t)1 << 62;
  /* mxfp8_quantize allocates (0, 2^62, 3) values and (0, 2^62, 1) compact scales. */
  int64_t shape[3] = {0, big, 3};
  DLTensor in = {NULL, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_quantize(&in, NULL, &v, &s, NULL, NULL), MXFP8_OK);
  check_strides_fit(v);
  check_strides_fit(s);
  release_managed(v);
  release_managed(s);

  /* mxfp8_export_components views (0, 2^62, 33) values and its scales, (0, 2^62, 2) rows of stride 2. */
  int64_t data_shape[3] = {0, big, 33}, scale_shape[2] = {0, 2};
  DLManagedTensorVersioned data = borrowed_bytes(NULL, kDLCPU, 3, data_shape);
  DLManagedTensorVersioned scales = borrowed_bytes(NULL, kDLCPU, 2, scale_shape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  assert_int_equal(mxfp8_export_components(t, NULL, &v, &s), MXFP8_OK);
  check_strides_fit(v);
  check_strides_fit(s);
  release_managed(v);
  release_managed(s);
  mxfp8_tensor_release(t);
}

/* Empty buffers may carry a NULL data pointer (valid DLPack); nothing is written through it. */
static void test_empty_buffers_with_null_data(void **state) {
  (void)state;
  int64_t cshape[2] = {0, 4}, sshape[1] = {0};
  DLTensor compact = {NULL, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, cshape, NULL, 0};
  DLTensor swizzled = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &compact, NULL), MXFP8_OK);
  /* count 0 needs nothing else, for a transfer into a bucket as for batched exports */
  const mxfp8_transfer_desc empty = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 0);
  assert_int_equal(mxfp8_transfer(&empty, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_export_scales_batched(NULL, NULL, 0, NULL), MXFP8_OK);
}

/* Copies the library allocates for a kDLCUDAHost (pinned) source are plain malloc memory, and say so:
 * kDLCPU. Views keep the source's device. */
static void test_copies_of_pinned_sources_are_labelled_cpu(void **state) {
  (void)state;
  const int64_t shape[2] = {100, 48}, padded[2] = {128, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 0), *scales = test_tensor_new(2, padded, kDLUInt, 0);
  uint64_t rng = 3;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  data->managed.dl_tensor.device.device_type = kDLCUDAHost;
  scales->managed.dl_tensor.device.device_type = kDLCUDAHost;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_export_components(t, NULL, &v, &s), MXFP8_OK);
  assert_int_equal(v->dl_tensor.device.device_type, kDLCUDAHost);
  assert_int_equal(s->dl_tensor.device.device_type, kDLCPU);
  EXPECT(s->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "the scales are a copy");
  release_managed(v);
  release_managed(s);
  mxfp8_tensor_release(t);

  float input[64];
  for (int i = 0; i < 64; ++i) input[i] = (float)i;
  int64_t in_shape[1] = {64};
  DLTensor in = {input, {kDLCUDAHost, 0}, 1, {kDLFloat, 32, 1}, in_shape, NULL, 0};
  DLManagedTensorVersioned *qv = NULL, *qs = NULL;
  assert_int_equal(mxfp8_quantize(&in, NULL, &qv, &qs, NULL, NULL), MXFP8_OK);
  assert_int_equal(qv->dl_tensor.device.device_type, kDLCPU);
  assert_int_equal(qs->dl_tensor.device.device_type, kDLCPU);
  release_managed(qv);
  release_managed(qs);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* Inputs may share bytes with each other (only outputs must be apart): one tensor exported twice in one
 * batch, into two destinations. */
static void test_inputs_may_share_bytes(void **state) {
  (void)state;
  const int64_t shape[2] = {100, 48}, padded[2] = {128, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 0), *scales = test_tensor_new(2, padded, kDLUInt, 0);
  uint64_t rng = 4;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  uint8_t out[400];
  memset(out, POISON, sizeof out);
  int64_t dshape[1] = {200};
  DLTensor d0 = {out, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, dshape, NULL, 0};
  DLTensor d1 = {out + 200, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, dshape, NULL, 0};
  DLTensor *dsts[2] = {&d0, &d1};
  const mxfp8_tensor *ts[2] = {t, t};
  assert_int_equal(mxfp8_export_scales_batched(ts, dsts, 2, NULL), MXFP8_OK);
  for (int r = 0; r < 100; ++r)
    for (int c = 0; c < 2; ++c) {
      EXPECT(out[r * 2 + c] == scales->buffer[r * 4 + c], "first copy (%d, %d)", r, c);
      EXPECT(out[200 + r * 2 + c] == scales->buffer[r * 4 + c], "second copy (%d, %d)", r, c);
    }
  mxfp8_tensor_release(t);
  test_tensor_free(data);
  test_tensor_free(scales);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_honours_allocator_byte_offset),
      cmocka_unit_test(test_export_honours_allocator_byte_offset),
      cmocka_unit_test(test_empty_tensors_with_huge_dimensions_cost_nothing),
      cmocka_unit_test(test_empty_tensors_whose_strides_would_overflow),
      cmocka_unit_test(test_empty_buffers_with_null_data),
      cmocka_unit_test(test_copies_of_pinned_sources_are_labelled_cpu),
      cmocka_unit_test(test_inputs_may_share_bytes),
  };
  return cmocka_run_group_tests_name("hostile but valid input", tests, NULL, NULL);
}
