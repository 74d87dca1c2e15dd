/* Ownership: each input deleter runs exactly once, only after the handle and every view are released,
 * in whatever order; copies own their memory; borrowed (NULL-deleter) inputs work; failures take
 * nothing. */
#include <string.h>

#include "test_support.h"

typedef struct {
  test_tensor *data, *scales;
  mxfp8_tensor *tensor;
} fixture;

static fixture make(mxfp8_scale_layout layout, int with_deleters) {
  fixture f;
  uint64_t rng = 5;
  const int64_t shape[2] = {130, 128}, scale_shape[2] = {256, 4};
  f.data = test_tensor_new(2, shape, kDLUInt, with_deleters);
  f.scales = test_tensor_new(2, scale_shape, kDLUInt, with_deleters);
  fill_random(f.data->buffer, f.data->bytes, &rng);
  fill_random_scales(f.scales->buffer, f.scales->bytes, &rng);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = layout;
  desc.rowwise_data = &f.data->managed;
  desc.rowwise_scale_inv = &f.scales->managed;
  assert_int_equal(mxfp8_tensor_create(&desc, &f.tensor), MXFP8_OK);
  return f;
}

static void done(fixture *f) {
  test_tensor_free(f->data);
  test_tensor_free(f->scales);
}

/* The 6 orders of releasing {handle, values view, scales view}. */
static void test_every_release_order_runs_each_deleter_once_at_the_end(void **state) {
  (void)state;
  static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  for (int o = 0; o < 6; ++o) {
    fixture f = make(MXFP8_SCALE_LAYOUT_ROW_MAJOR, 1); /* C = 4: both outputs are views */
    DLManagedTensorVersioned *values = NULL, *scales = NULL;
    assert_int_equal(mxfp8_export_components(f.tensor, NULL, &values, &scales), MXFP8_OK);
    for (int step = 0; step < 3; ++step) {
      EXPECT(f.data->deleter_calls == 0 && f.scales->deleter_calls == 0, "order %d step %d: freed early", o, step);
      switch (orders[o][step]) {
        case 0: mxfp8_tensor_release(f.tensor); break;
        case 1:
          /* a view outliving the handle still reads the right bytes */
          assert_int_equal(read_through_strides(&values->dl_tensor, 1234), f.data->buffer[1234]);
          release_managed(values);
          break;
        case 2:
          assert_int_equal(read_through_strides(&scales->dl_tensor, 77), f.scales->buffer[77]);
          release_managed(scales);
          break;
      }
    }
    EXPECT(f.data->deleter_calls == 1 && f.scales->deleter_calls == 1, "order %d: deleters ran %d, %d times", o,
           f.data->deleter_calls, f.scales->deleter_calls);
    done(&f);
  }
}

static void test_copies_own_their_memory(void **state) {
  (void)state;
  fixture f = make(MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, 1);
  DLManagedTensorVersioned *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, NULL, NULL, &scales), MXFP8_OK);
  assert_true(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
  mxfp8_tensor_release(f.tensor);
  /* no view is alive: the inputs go now, the copy stays readable */
  assert_int_equal(f.data->deleter_calls, 1);
  assert_int_equal(f.scales->deleter_calls, 1);
  memset(f.scales->buffer, POISON, f.scales->bytes);
  for (int64_t i = 0; i < 130 * 4; ++i) assert_int_not_equal(read_through_strides(&scales->dl_tensor, i), POISON);
  release_managed(scales);
  done(&f);
}

static void test_many_exports_hold_one_reference_each(void **state) {
  (void)state;
  fixture f = make(MXFP8_SCALE_LAYOUT_ROW_MAJOR, 1);
  DLManagedTensorVersioned *views[64];
  for (int i = 0; i < 64; ++i) assert_int_equal(mxfp8_export_components(f.tensor, NULL, &views[i], NULL), MXFP8_OK);
  mxfp8_tensor_release(f.tensor);
  for (int i = 0; i < 64; ++i) {
    assert_int_equal(f.data->deleter_calls, 0);
    release_managed(views[i]);
  }
  assert_int_equal(f.data->deleter_calls, 1);
  done(&f);
}

static void test_borrowed_inputs_with_null_deleters(void **state) {
  (void)state;
  fixture f = make(MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, 0);
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, NULL, &values, &scales), MXFP8_OK);
  mxfp8_tensor_release(f.tensor);
  release_managed(values);
  release_managed(scales);
  assert_int_equal(f.data->deleter_calls, 0);
  done(&f);
}

static void test_release_null_is_fine(void **state) {
  (void)state;
  mxfp8_tensor_release(NULL);
}

static int failing_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                             void (*set_error)(void *, const char *, const char *)) {
  (void)prototype;
  (void)out;
  set_error(error_ctx, "MemoryError", "pool exhausted");
  return -1;
}

static void test_failed_copy_leaks_nothing_and_reports_the_allocator(void **state) {
  (void)state;
  fixture f = make(MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, 1);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = failing_allocator;
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  assert_int_equal(mxfp8_export_components(f.tensor, &o, &values, &scales), MXFP8_ERROR_OUT_OF_MEMORY);
  assert_last_error_contains("MemoryError: pool exhausted");
  assert_null(values);
  assert_null(scales);
  mxfp8_tensor_release(f.tensor);
  assert_int_equal(f.data->deleter_calls, 1); /* no view was left holding a reference */
  done(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_release_order_runs_each_deleter_once_at_the_end),
      cmocka_unit_test(test_copies_own_their_memory),
      cmocka_unit_test(test_many_exports_hold_one_reference_each),
      cmocka_unit_test(test_borrowed_inputs_with_null_deleters),
      cmocka_unit_test(test_release_null_is_fine),
      cmocka_unit_test(test_failed_copy_leaks_nothing_and_reports_the_allocator),
  };
  return cmocka_run_group_tests_name("lifetime and ownership", tests, NULL, NULL);
}
