/* Ownership: each input deleter runs exactly once, only after the handle and every view are released,
 * in whatever order (views of shards, NVFP4 exports and grouped experts too); copies own their memory;
 * borrowed (NULL-deleter) inputs work; failures take nothing. */
#include <string.h>

#include "tensor_fixtures.h"
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

/* "Views keep `tensor` alive": after the caller's release, the views of a shard (options.shard),
 * nvfp4_export_components and mxfp8_grouped_export (chosen experts) still read the source (in-place updates
 * show through), and the source's deleters run once, when the last view goes. The views are views: no
 * DLPACK_FLAG_BITMASK_IS_COPIED, the source's memory; consecutive experts give views, a repeat a copy. */
static void test_views_outlive_the_handle(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 96, 17);
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.row_begin = 10, shard.row_end = 60, shard.col_begin = 32, shard.col_end = 64;
  DLManagedTensorVersioned *v = NULL;
  assert_int_equal(export_shard(r.t, &shard, NULL, &v, NULL), MXFP8_OK);
  mxfp8_tensor_release(r.t);
  r.t = NULL;
  EXPECT(r.data->deleter_calls == 0, "the data was deleted while a view of it lives");
  EXPECT(!(v->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "a view flagged as a copy");
  EXPECT(v->dl_tensor.strides && v->dl_tensor.strides[0] == 96 && v->dl_tensor.strides[1] == 1, "the view's strides");
  r.data->buffer[20 * 96 + 40] ^= 0x5A; /* an in-place update of the source shows through */
  const uint8_t *vb = (const uint8_t *)v->dl_tensor.data + v->dl_tensor.byte_offset;
  EXPECT(vb[10 * 96 + 8] == r.data->buffer[20 * 96 + 40], "the view does not show the source's bytes");
  release_managed(v);
  EXPECT(r.data->deleter_calls == 1 && r.scales->deleter_calls == 1, "deleters ran %d, %d times",
         r.data->deleter_calls, r.scales->deleter_calls);
  test_tensor_free(r.data);
  test_tensor_free(r.scales);
  free(r.s);

  nv_tensor n;
  assert_int_equal(make_nv(&n, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  mxfp8_export_options no = NVFP4_EXPORT_OPTIONS_INIT;
  no.values_dtype = MXFP8_VALUES_FP8;
  DLManagedTensorVersioned *nvv = NULL;
  assert_int_equal(nvfp4_export_components(n.t, &no, &nvv, NULL, NULL), MXFP8_OK);
  mxfp8_tensor_release(n.t);
  n.t = NULL;
  EXPECT(n.data->deleter_calls == 0, "NVFP4 data deleted while its view lives");
  EXPECT(nvv->dl_tensor.dtype.code == kDLFloat4_e2m1fn && nvv->dl_tensor.shape[1] == 48, "float4 view of (40, 48)");
  EXPECT(nvv->dl_tensor.data == n.data->buffer && !(nvv->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "not a view");
  release_managed(nvv);
  free_nv(&n, 1);

  enum { E = 4, N = 8, K = 64 };
  int64_t dshape[1] = {E * N * K}, sshape[1] = {E * N * 2};
  test_tensor *data = test_tensor_new(1, dshape, kDLUInt, 1), *scales = test_tensor_new(1, sshape, kDLUInt, 1);
  uint64_t rng = 19;
  fill_random(data->buffer, data->bytes, &rng);
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = E, g.cols = K, g.uniform_rows = N, g.scales = MXFP8_GROUPED_SCALES_COMPACT;
  g.data = &data->managed, g.scale_inv = &scales->managed;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  const int32_t consecutive[2] = {1, 2}, repeated[2] = {2, 2};
  DLManagedTensorVersioned *gv = NULL, *gs = NULL, *rv = NULL, *rs = NULL;
  assert_int_equal(mxfp8_grouped_export(grouped, consecutive, 2, NULL, &gv, &gs), MXFP8_OK);
  assert_int_equal(mxfp8_grouped_export(grouped, repeated, 2, NULL, &rv, &rs), MXFP8_OK);
  mxfp8_grouped_tensor_release(grouped);
  EXPECT(data->deleter_calls == 0 && scales->deleter_calls == 0, "grouped buffers deleted while views live");
  EXPECT((const uint8_t *)gv->dl_tensor.data + gv->dl_tensor.byte_offset == data->buffer + N * K &&
             !(gv->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "consecutive experts' values are not a view");
  EXPECT((const uint8_t *)gs->dl_tensor.data + gs->dl_tensor.byte_offset == scales->buffer + N * 2 &&
             !(gs->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "consecutive compact experts' scales are not a view");
  EXPECT((rv->flags & DLPACK_FLAG_BITMASK_IS_COPIED) && (rs->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "a repeat is a copy");
  for (int i = 0; i < 2; ++i) {
    EXPECT(memcmp((const uint8_t *)rv->dl_tensor.data + i * N * K, data->buffer + 2 * N * K, N * K) == 0, "repeat %d", i);
    EXPECT(memcmp((const uint8_t *)rs->dl_tensor.data + i * N * 2, scales->buffer + 2 * N * 2, N * 2) == 0, "repeat %d", i);
  }
  release_managed(rv);
  release_managed(rs);
  release_managed(gv);
  EXPECT(data->deleter_calls == 0, "deleted while the scales view lives");
  release_managed(gs);
  EXPECT(data->deleter_calls == 1 && scales->deleter_calls == 1, "grouped deleters ran %d, %d times",
         data->deleter_calls, scales->deleter_calls);
  test_tensor_free(data);
  test_tensor_free(scales);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_release_order_runs_each_deleter_once_at_the_end),
      cmocka_unit_test(test_copies_own_their_memory),
      cmocka_unit_test(test_many_exports_hold_one_reference_each),
      cmocka_unit_test(test_borrowed_inputs_with_null_deleters),
      cmocka_unit_test(test_release_null_is_fine),
      cmocka_unit_test(test_failed_copy_leaks_nothing_and_reports_the_allocator),
      cmocka_unit_test(test_views_outlive_the_handle),
  };
  return cmocka_run_group_tests_name("lifetime and ownership", tests, NULL, NULL);
}
