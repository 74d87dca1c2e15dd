/* The import on the GPU: buckets and TE storage in device memory written into device parameters (compact
 * and 128x4), compared byte for byte with references built from the layout's formula; a batch past one
 * launch's job capacity and large enough for the wide chunks; a prepared import replayed in a CUDA graph.
 * Every case skips without a device. */
#include <stdlib.h>
#include <string.h>

#include "import_support.h"
#include "test_gpu_support.h"

#ifdef MXFP8_TEST_WITH_CUDA

/* Device copies of host bytes, and device parameters poisoned with POISON. */
static uint8_t *to_device(const uint8_t *host, size_t n) {
  uint8_t *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, n ? n : 1));
  if (n) CUDA_OK(cudaMemcpy(d, host, n, cudaMemcpyHostToDevice));
  return d;
}

static uint8_t *poisoned_device(size_t n) {
  uint8_t *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, n + 1));
  CUDA_OK(cudaMemset(d, POISON, n + 1));
  return d;
}

static DLTensor device_bytes(uint8_t *data, int64_t *shape) {
  return (DLTensor){data, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, shape, NULL, 0};
}

/* The device destination holds exactly the reference and the byte after it is untouched. */
static void expect_device(const uint8_t *d, const uint8_t *want, int64_t n, const char *what, int i) {
  uint8_t *h = malloc((size_t)n + 1);
  CUDA_OK(cudaMemcpy(h, d, (size_t)n + 1, cudaMemcpyDeviceToHost));
  for (int64_t b = 0; b < n; ++b)
    EXPECT(h[b] == want[b], "%s: tensor %d byte %lld is %u, expected %u", what, i, (long long)b, h[b], want[b]);
  EXPECT(h[n] == POISON, "%s: tensor %d written past its end", what, i);
  free(h);
}

/* A bucket of `n` tensors built by hand at odd offsets, imported on the device, checked. With `graph`,
 * the import is prepared, captured once and replayed over a refilled bucket. */
static void import_specs_on_device(const spec *specs, int n, int graph, uint64_t seed) {
  uint64_t rng = seed;
  reference *ref = calloc((size_t)n, sizeof *ref);
  mxfp8_bucket_entry *entries = calloc((size_t)n, sizeof *entries);
  int32_t *ndims = calloc((size_t)n, sizeof *ndims), *dirs = calloc((size_t)n, sizeof *dirs),
          *layouts = calloc((size_t)n, sizeof *layouts);
  const int64_t **shapes = calloc((size_t)n, sizeof *shapes);
  uint64_t at = 1;
  for (int i = 0; i < n; ++i) {
    ref[i] = make_reference(&specs[i], &rng);
    ndims[i] = specs[i].ndim, shapes[i] = specs[i].shape, dirs[i] = specs[i].direction, layouts[i] = specs[i].source_layout;
    entries[i].values_offset = at;
    entries[i].values_bytes = (uint64_t)ref[i].values_bytes;
    at += entries[i].values_bytes + (i % 3 == 0 ? 0 : 13);
    at = i % 2 ? (at + 255) / 256 * 256 : at; /* aligned and unaligned parts */
    entries[i].scales_offset = at;
    entries[i].scales_bytes = (uint64_t)target_bytes(&ref[i], specs[i].source_layout);
    at += entries[i].scales_bytes + 3;
  }
  uint8_t *host = malloc(at);
  memset(host, POISON, at);
  for (int i = 0; i < n; ++i) {
    memcpy(host + entries[i].values_offset, ref[i].values, (size_t)ref[i].values_bytes);
    if (layouts[i] == MXFP8_LAYOUT_COMPACT)
      memcpy(host + entries[i].scales_offset, ref[i].compact, (size_t)(ref[i].r * ref[i].c));
    else
      write_swizzled_poisoned(&ref[i], dirs[i] == MXFP8_DIRECTION_COLUMNWISE, host + entries[i].scales_offset);
  }
  uint8_t *bucket = to_device(host, at);
  int64_t bucket_shape[1] = {(int64_t)at};
  DLTensor bucket_tensor = device_bytes(bucket, bucket_shape);

  uint8_t **values = calloc((size_t)n, sizeof *values), **scales = calloc((size_t)n, sizeof *scales);
  int64_t(*dshapes)[2] = calloc((size_t)n, sizeof *dshapes);
  DLTensor *dv = calloc((size_t)n, sizeof *dv), *ds = calloc((size_t)n, sizeof *ds);
  mxfp8_import_destination *dst = calloc((size_t)n, sizeof *dst);
  for (int i = 0; i < n; ++i) {
    dshapes[i][0] = ref[i].values_bytes;
    dshapes[i][1] = target_bytes(&ref[i], specs[i].target);
    values[i] = poisoned_device((size_t)dshapes[i][0]);
    scales[i] = poisoned_device((size_t)dshapes[i][1]);
    dv[i] = device_bytes(values[i], &dshapes[i][0]);
    ds[i] = device_bytes(scales[i], &dshapes[i][1]);
    dst[i] = (mxfp8_import_destination){&dv[i], &ds[i], specs[i].target, 0};
  }
  mxfp8_bucket_manifest m = MXFP8_BUCKET_MANIFEST_INIT;
  m.count = (size_t)n;
  m.entries = entries;
  m.ndims = ndims;
  m.shapes = shapes;
  m.directions = dirs;
  m.scales_layouts = layouts;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!graph) {
    assert_int_equal(mxfp8_import_bucket(&bucket_tensor, &m, dst, stream), MXFP8_OK);
    CUDA_OK(cudaStreamSynchronize(stream));
  } else {
    mxfp8_prepared_export *plan = NULL;
    assert_int_equal(mxfp8_prepare_import_bucket(&bucket_tensor, &m, dst, &plan), MXFP8_OK);
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    assert_int_equal(mxfp8_prepared_export_run(plan, stream), MXFP8_OK);
    CUDA_OK(cudaStreamEndCapture(stream, &g));
    CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
    for (int step = 0; step < 2; ++step) {
      /* A new refit: new bytes in the same bucket, parameters poisoned again, one graph launch. */
      for (int i = 0; i < n; ++i) {
        free_reference(&ref[i]);
        ref[i] = make_reference(&specs[i], &rng);
        memcpy(host + entries[i].values_offset, ref[i].values, (size_t)ref[i].values_bytes);
        if (layouts[i] == MXFP8_LAYOUT_COMPACT)
          memcpy(host + entries[i].scales_offset, ref[i].compact, (size_t)(ref[i].r * ref[i].c));
        else
          write_swizzled_poisoned(&ref[i], dirs[i] == MXFP8_DIRECTION_COLUMNWISE, host + entries[i].scales_offset);
        CUDA_OK(cudaMemset(values[i], POISON, (size_t)dshapes[i][0] + 1));
        CUDA_OK(cudaMemset(scales[i], POISON, (size_t)dshapes[i][1] + 1));
      }
      CUDA_OK(cudaMemcpy(bucket, host, at, cudaMemcpyHostToDevice));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      if (step == 0) continue;  /* checked below, after the last replay */
      for (int i = 0; i < n; ++i) {
        expect_device(values[i], ref[i].values, ref[i].values_bytes, "graph values", i);
      }
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(g));
    mxfp8_prepared_export_release(plan);
  }
  for (int i = 0; i < n; ++i) {
    expect_device(values[i], ref[i].values, ref[i].values_bytes, "values", i);
    expect_device(scales[i], specs[i].target == MXFP8_LAYOUT_COMPACT ? ref[i].compact : ref[i].swizzled,
                  dshapes[i][1], specs[i].target == MXFP8_LAYOUT_COMPACT ? "compact scales" : "swizzled scales", i);
    CUDA_OK(cudaFree(values[i]));
    CUDA_OK(cudaFree(scales[i]));
    free_reference(&ref[i]);
  }
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(bucket));
  free(host), free(ref), free(entries), free(ndims), free(dirs), free(layouts), free(shapes);
  free(values), free(scales), free(dshapes), free(dv), free(ds), free(dst);
}

static const spec kSpecs[] = {
    {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_COMPACT, MXFP8_LAYOUT_COMPACT},
    {2, {257, 33, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_COMPACT, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {31, 1000, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_CUTLASS_128X4, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {130, 200, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_CUTLASS_128X4, MXFP8_LAYOUT_COMPACT},
    {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_LAYOUT_COMPACT, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {70, 33, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_LAYOUT_CUTLASS_128X4, MXFP8_LAYOUT_COMPACT},
    {3, {3, 5, 40}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_COMPACT, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {0, 64, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_COMPACT, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {256, 256, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_LAYOUT_CUTLASS_128X4, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {1000, 8192, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_COMPACT, MXFP8_LAYOUT_CUTLASS_128X4},
    {2, {4096, 2880, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_LAYOUT_CUTLASS_128X4, MXFP8_LAYOUT_CUTLASS_128X4},
};
enum { kSpecCount = sizeof(kSpecs) / sizeof(kSpecs[0]) };

static void test_gpu_bucket_import_matches_the_formula(void **state) {
  (void)state;
  REQUIRE_GPU();
  import_specs_on_device(kSpecs, kSpecCount, 0, 61);
}

static void test_gpu_prepared_bucket_import_replays_in_a_cuda_graph(void **state) {
  (void)state;
  REQUIRE_GPU();
  import_specs_on_device(kSpecs, kSpecCount, 1, 62);
}

/* More jobs than one launch holds (several launches), and enough chunks for the wide kernel. */
static void test_gpu_import_of_many_and_large_tensors(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { kMany = 420 };
  /* Under compute-sanitizer (MXFP8_TEST_QUICK) the large tensors are smaller: the job count stays. */
  const int64_t big_rows = getenv("MXFP8_TEST_QUICK") ? 512 : 8192;
  spec *specs = calloc(kMany, sizeof *specs);
  for (int i = 0; i < kMany; ++i) {
    const int big = i % 60 == 0;
    specs[i] = (spec){2, {big ? big_rows : 1 + i % 300, big ? 4096 : 32 + 7 * (i % 50), 0}, MXFP8_DIRECTION_ROWWISE,
                      (i / 2) % 2 ? MXFP8_LAYOUT_CUTLASS_128X4 : MXFP8_LAYOUT_COMPACT,
                      i % 2 ? MXFP8_LAYOUT_CUTLASS_128X4 : MXFP8_LAYOUT_COMPACT};
  }
  import_specs_on_device(specs, kMany, 0, 63);
  free(specs);
}

/* The direct path: TE storage uploaded to the device, imported into device parameters of both layouts. */
static void test_gpu_direct_import_from_te_storage(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const spec te_specs[] = {
      {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},  {2, {257, 33, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0},
      {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, 1, 0}, {2, {33, 130, 0}, MXFP8_DIRECTION_COLUMNWISE, 0, 0},
      {2, {8192, 1024, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},
  };
  enum { T = sizeof(te_specs) / sizeof(te_specs[0]) };
  uint64_t rng = 64;
  for (int target = 0; target < 2; ++target)
    for (int i = 0; i < T; ++i) {
      te_tensor te = make_te(&te_specs[i], &rng);
      const int col = te_specs[i].direction == MXFP8_DIRECTION_COLUMNWISE;
      /* The same storage on the device, described with the same layout. */
      uint8_t *dd = to_device(te.data->buffer, te.data->bytes), *dsc = to_device(te.scales->buffer, te.scales->bytes);
      DLManagedTensorVersioned md = te.data->managed, ms = te.scales->managed;
      md.deleter = NULL, ms.deleter = NULL;
      md.dl_tensor.data = dd, ms.dl_tensor.data = dsc;
      md.dl_tensor.device = (DLDevice){kDLCUDA, 0}, ms.dl_tensor.device = (DLDevice){kDLCUDA, 0};
      mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
      desc.scale_layout = te_specs[i].source_layout == 1 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
      if (col) desc.columnwise_data = &md, desc.columnwise_scale_inv = &ms;
      else desc.rowwise_data = &md, desc.rowwise_scale_inv = &ms;
      mxfp8_tensor *t = NULL;
      assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
      int64_t vshape[1] = {te.ref.values_bytes}, sshape[1] = {target_bytes(&te.ref, target)};
      uint8_t *pv = poisoned_device((size_t)vshape[0]), *ps = poisoned_device((size_t)sshape[0]);
      DLTensor v = device_bytes(pv, vshape), s = device_bytes(ps, sshape);
      mxfp8_import_destination d = {&v, &s, target, 0};
      mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
      o.direction = te_specs[i].direction;
      const mxfp8_tensor *ts[1] = {t};
      assert_int_equal(mxfp8_import_tensors(ts, 1, &o, &d), MXFP8_OK);
      CUDA_OK(cudaDeviceSynchronize());
      expect_device(pv, te.ref.values, vshape[0], "direct values", i);
      expect_device(ps, target == MXFP8_LAYOUT_COMPACT ? te.ref.compact : te.ref.swizzled, sshape[0], "direct scales", i);
      mxfp8_tensor_release(t);
      CUDA_OK(cudaFree(pv));
      CUDA_OK(cudaFree(ps));
      CUDA_OK(cudaFree(dd));
      CUDA_OK(cudaFree(dsc));
      free_te(&te);
    }
}

#else
static void test_gpu_bucket_import_matches_the_formula(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_prepared_bucket_import_replays_in_a_cuda_graph(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_import_of_many_and_large_tensors(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_direct_import_from_te_storage(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_bucket_import_matches_the_formula),
      cmocka_unit_test(test_gpu_prepared_bucket_import_replays_in_a_cuda_graph),
      cmocka_unit_test(test_gpu_import_of_many_and_large_tensors),
      cmocka_unit_test(test_gpu_direct_import_from_te_storage),
  };
  return cmocka_run_group_tests_name("import on the GPU", tests, NULL, NULL);
}
