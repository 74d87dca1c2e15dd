/* What an export promises beyond the layout: views follow later writes, empty tensors, missing data,
 * dtype options, flags, logical shapes, defaults, and the version and status calls. */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct {
  test_tensor *data, *scales;
  mxfp8_tensor *tensor;
} fixture;

/* A (rows, k) E4M3 tensor with TE-padded row-major scales, random contents. */
static fixture make_rowwise(int64_t rows, int64_t k, int columnwise) {
  fixture f;
  uint64_t rng = 42;
  const int64_t shape[2] = {rows, k};
  const int64_t scale_shape[2] = {columnwise ? ref_round_up(ref_ceil_div(rows, 32), 4) : ref_round_up(rows, 128),
                                  columnwise ? ref_round_up(k, 128) : ref_round_up(ref_ceil_div(k, 32), 4)};
  f.data = test_tensor_new(2, shape, kDLUInt, 1);
  f.scales = test_tensor_new(2, scale_shape, kDLUInt, 1);
  fill_random(f.data->buffer, f.data->bytes, &rng);
  fill_random_scales(f.scales->buffer, f.scales->bytes, &rng);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  if (columnwise) {
    desc.columnwise_data = &f.data->managed;
    desc.columnwise_scale_inv = &f.scales->managed;
  } else {
    desc.rowwise_data = &f.data->managed;
    desc.rowwise_scale_inv = &f.scales->managed;
  }
  f.tensor = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &f.tensor), MXFP8_OK);
  return f;
}

static void free_fixture(fixture *f) {
  mxfp8_tensor_release(f->tensor);
  assert_int_equal(f->data->deleter_calls, 1);
  assert_int_equal(f->scales->deleter_calls, 1);
  test_tensor_free(f->data);
  test_tensor_free(f->scales);
}

static void test_views_see_writes_made_after_export(void **state) {
  (void)state;
  fixture f = make_rowwise(100, 64, 0); /* C = 2: the padded buffer is 128 x 4, so ask for a strided view */
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.padded_scales = MXFP8_PADDED_SCALES_STRIDED_VIEW;
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, &o, &values, &scales), MXFP8_OK);
  assert_false(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  /* An optimizer step rewrites the source in place. */
  f.data->buffer[99 * 64 + 63] ^= 0x5A;
  f.scales->buffer[99 * 4 + 1] = 77;
  assert_int_equal(read_through_strides(&values->dl_tensor, 99 * 64 + 63), f.data->buffer[99 * 64 + 63]);
  assert_int_equal(read_through_strides(&scales->dl_tensor, 99 * 2 + 1), 77);
  assert_int_equal(scales->dl_tensor.strides[0], 4);
  release_managed(values);
  release_managed(scales);
  free_fixture(&f);
}

static void run_empty(const int64_t *shape, mxfp8_scale_layout layout, int64_t scale_rows, int64_t scale_cols) {
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 1);
  const int64_t scale_shape[2] = {scale_rows, scale_cols};
  test_tensor *scales = test_tensor_new(2, scale_shape, kDLUInt, 1);
  /* NumPy describes empty arrays with all-zero strides; they say nothing about the layout. */
  data->strides[0] = data->strides[1] = scales->strides[0] = scales->strides[1] = 0;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = layout;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  DLManagedTensorVersioned *values = NULL, *out = NULL;
  assert_int_equal(mxfp8_export_components(t, NULL, &values, &out), MXFP8_OK);
  assert_int_equal(values->dl_tensor.shape[0], shape[0]);
  assert_int_equal(values->dl_tensor.shape[1], shape[1]);
  assert_int_equal(out->dl_tensor.ndim, 2);
  assert_int_equal(out->dl_tensor.shape[0], shape[0]);
  assert_int_equal(out->dl_tensor.shape[1], ref_ceil_div(shape[1], 32));
  assert_non_null(out->dl_tensor.strides);
  release_managed(values);
  release_managed(out);
  mxfp8_tensor_release(t);
  assert_int_equal(data->deleter_calls, 1);
  test_tensor_free(data);
  test_tensor_free(scales);
}

static void test_empty_tensor_exports_empty_components(void **state) {
  (void)state;
  const int64_t no_rows[2] = {0, 64}, no_cols[2] = {4, 0};
  run_empty(no_rows, MXFP8_SCALE_LAYOUT_ROW_MAJOR, 0, 4);
  run_empty(no_rows, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, 0, 4);
  run_empty(no_cols, MXFP8_SCALE_LAYOUT_ROW_MAJOR, 128, 0);
}

static void test_missing_direction_is_missing_data(void **state) {
  (void)state;
  fixture f = make_rowwise(64, 64, /*columnwise=*/1);
  DLManagedTensorVersioned *sentinel = (DLManagedTensorVersioned *)(uintptr_t)0x1234;
  DLManagedTensorVersioned *values = sentinel, *scales = sentinel;
  assert_int_equal(mxfp8_export_components(f.tensor, NULL, &values, &scales), MXFP8_ERROR_MISSING_DATA);
  assert_last_error_contains("no rowwise data");
  assert_ptr_equal(values, sentinel);
  assert_ptr_equal(scales, sentinel);
  free_fixture(&f);

  f = make_rowwise(64, 64, 0);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.direction = MXFP8_DIRECTION_COLUMNWISE;
  assert_int_equal(mxfp8_export_components(f.tensor, &o, &values, &scales), MXFP8_ERROR_MISSING_DATA);
  assert_last_error_contains("no columnwise data");
  free_fixture(&f);
}

static void test_dtype_options(void **state) {
  (void)state;
  fixture f = make_rowwise(40, 96, 0);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.values_dtype = MXFP8_VALUES_UINT8;
  o.scales_dtype = MXFP8_SCALES_E8M0;
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, &o, &values, &scales), MXFP8_OK);
  assert_int_equal(values->dl_tensor.dtype.code, kDLUInt);
  assert_int_equal(scales->dl_tensor.dtype.code, kDLFloat8_e8m0fnu);
  assert_int_equal(scales->dl_tensor.dtype.bits, 8);
  release_managed(values);
  release_managed(scales);
  free_fixture(&f);
}

static void test_read_only_source_gives_read_only_views(void **state) {
  (void)state;
  fixture f = make_rowwise(8, 128, 0); /* C = 4: compact, the scales are a view too */
  mxfp8_tensor_release(f.tensor);
  f.data->deleter_calls = f.scales->deleter_calls = 0;
  f.data->managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  f.scales->managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &f.data->managed;
  desc.rowwise_scale_inv = &f.scales->managed;
  assert_int_equal(mxfp8_tensor_create(&desc, &f.tensor), MXFP8_OK);
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, NULL, &values, &scales), MXFP8_OK);
  assert_true(values->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  assert_true(scales->flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  assert_false(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  release_managed(values);
  release_managed(scales);
  free_fixture(&f);
}

static void test_logical_shape_from_desc_and_byte_offset(void **state) {
  (void)state;
  /* A 3-D logical shape; the source's data starts 256 bytes into its allocation. */
  const int64_t shape[3] = {2, 3, 64};
  test_tensor *data = test_tensor_new(3, shape, kDLFloat8_e4m3fn, 1);
  const int64_t scale_shape[2] = {128, 4};
  test_tensor *scales = test_tensor_new(2, scale_shape, kDLUInt, 1);
  uint64_t rng = 7;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  data->managed.dl_tensor.data = data->buffer - 256;
  data->managed.dl_tensor.byte_offset = 256;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.ndim = 3;
  desc.shape = shape;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  DLManagedTensorVersioned *values = NULL, *out = NULL;
  assert_int_equal(mxfp8_export_components(t, NULL, &values, &out), MXFP8_OK);
  assert_ptr_equal((uint8_t *)values->dl_tensor.data + values->dl_tensor.byte_offset, data->buffer);
  assert_int_equal(out->dl_tensor.ndim, 3);
  assert_int_equal(out->dl_tensor.shape[2], 2);
  assert_true(out->flags & DLPACK_FLAG_BITMASK_IS_COPIED); /* padded to 4 columns: copied by default */
  for (int64_t i = 0; i < 6 * 2; ++i)
    assert_int_equal(read_through_strides(&out->dl_tensor, i), scales->buffer[(i / 2) * 4 + i % 2]);
  release_managed(values);
  release_managed(out);
  mxfp8_tensor_release(t);
  test_tensor_free(data);
  test_tensor_free(scales);
}

static void test_either_output_may_be_skipped(void **state) {
  (void)state;
  fixture f = make_rowwise(100, 48, 0);
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, NULL, NULL, &scales), MXFP8_OK);
  assert_int_equal(mxfp8_export_components(f.tensor, NULL, &values, NULL), MXFP8_OK);
  assert_int_equal(scales->dl_tensor.shape[1], 2);
  assert_int_equal(values->dl_tensor.shape[1], 48);
  release_managed(values);
  release_managed(scales);
  free_fixture(&f);
}

static void test_newer_struct_with_zero_tail_is_accepted(void **state) {
  (void)state;
  fixture f = make_rowwise(100, 48, 0);
  struct {
    mxfp8_export_options known;
    uint64_t future_fields[4];
  } newer;
  memset(&newer, 0, sizeof newer);
  mxfp8_export_options init = MXFP8_EXPORT_OPTIONS_INIT;
  newer.known = init;
  newer.known.struct_size = (uint32_t)sizeof newer;
  DLManagedTensorVersioned *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, &newer.known, NULL, &scales), MXFP8_OK);
  release_managed(scales);
  newer.future_fields[2] = 1;
  assert_int_equal(mxfp8_export_components(f.tensor, &newer.known, NULL, &scales), MXFP8_ERROR_UNSUPPORTED);
  assert_last_error_contains("fields this build does not know");
  free_fixture(&f);
}

static void test_cuda_tensors_export_views_without_touching_memory(void **state) {
  (void)state;
  /* Descriptors of CUDA memory: the values view never dereferences, so a fake pointer is fine. A copy
   * of CUDA memory needs the CUDA path, which is absent or has no device here. */
  fixture f = make_rowwise(100, 48, 0);
  mxfp8_tensor_release(f.tensor);
  f.data->deleter_calls = f.scales->deleter_calls = 0;
  f.data->managed.dl_tensor.device.device_type = kDLCUDA;
  f.scales->managed.dl_tensor.device.device_type = kDLCUDA;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &f.data->managed;
  desc.rowwise_scale_inv = &f.scales->managed;
  assert_int_equal(mxfp8_tensor_create(&desc, &f.tensor), MXFP8_OK);
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.padded_scales = MXFP8_PADDED_SCALES_STRIDED_VIEW;
  assert_int_equal(mxfp8_export_components(f.tensor, &o, &values, &scales), MXFP8_OK);
  assert_int_equal(values->dl_tensor.device.device_type, kDLCUDA);
  assert_int_equal(scales->dl_tensor.device.device_type, kDLCUDA);
  release_managed(values);
  release_managed(scales);
  if (!cuda_device_available()) {
    const mxfp8_status st = mxfp8_export_components(f.tensor, NULL, NULL, &scales);
#ifdef MXFP8_TEST_WITH_CUDA
    assert_int_equal(st, MXFP8_ERROR_CUDA);
#else
    assert_int_equal(st, MXFP8_ERROR_UNSUPPORTED);
    assert_last_error_contains("built without CUDA");
#endif
  }
  free_fixture(&f);
}

static void test_version_and_status_strings(void **state) {
  (void)state;
  assert_int_equal(mxfp8_version(), MXFP8_VERSION);
  assert_int_equal(MXFP8_VERSION, MXFP8_VERSION_MAJOR * 10000 + MXFP8_VERSION_MINOR * 100 + MXFP8_VERSION_PATCH);
  /* The published values, pinned. */
  assert_int_equal(MXFP8_OK, 0);
  assert_int_equal(MXFP8_ERROR_INVALID_ARGUMENT, 1);
  assert_int_equal(MXFP8_ERROR_MISSING_DATA, 2);
  assert_int_equal(MXFP8_ERROR_UNSUPPORTED, 3);
  assert_int_equal(MXFP8_ERROR_OUT_OF_MEMORY, 4);
  assert_int_equal(MXFP8_ERROR_CUDA, 5);
  assert_int_equal(MXFP8_ERROR_INTERNAL, 6);
  for (int s = 0; s < MXFP8_NUM_STATUS; ++s) {
    const char *text = mxfp8_status_string((mxfp8_status)s);
    assert_non_null(text);
    assert_string_not_equal(text, "unknown status");
  }
  assert_string_equal(mxfp8_status_string((mxfp8_status)999), "unknown status");
  assert_non_null(mxfp8_last_error());
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_views_see_writes_made_after_export),
      cmocka_unit_test(test_empty_tensor_exports_empty_components),
      cmocka_unit_test(test_missing_direction_is_missing_data),
      cmocka_unit_test(test_dtype_options),
      cmocka_unit_test(test_read_only_source_gives_read_only_views),
      cmocka_unit_test(test_logical_shape_from_desc_and_byte_offset),
      cmocka_unit_test(test_either_output_may_be_skipped),
      cmocka_unit_test(test_newer_struct_with_zero_tail_is_accepted),
      cmocka_unit_test(test_cuda_tensors_export_views_without_touching_memory),
      cmocka_unit_test(test_version_and_status_strings),
  };
  return cmocka_run_group_tests_name("export semantics", tests, NULL, NULL);
}
