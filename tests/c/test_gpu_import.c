/* The import on the GPU: buckets and TE storage in device memory written into device parameters (compact
 * and 128x4), compared byte for byte with references built from the layout's formula; a batch past one
 * launch's job capacity and large enough for the wide chunks; a prepared import replayed in a CUDA graph;
 * the engine-native targets (mxfp8_convert, mxfp8_grouped_convert, DeepGEMM bucket parts, the fix-up)
 * against engine_layouts_support.h.
 * Every case skips without a device. */
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "import_support.h"
#include "test_gpu_support.h"

#ifdef MXFP8_TEST_WITH_CUDA

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
  mxfp8_bucket_part *entries = calloc((size_t)n, sizeof *entries);
  int32_t *ndims = calloc((size_t)n, sizeof *ndims), *dirs = calloc((size_t)n, sizeof *dirs),
          *layouts = calloc((size_t)n, sizeof *layouts), *formats = calloc((size_t)n, sizeof *formats),
          *targets = calloc((size_t)n, sizeof *targets);
  const int64_t **shapes = calloc((size_t)n, sizeof *shapes);
  uint64_t at = 1;
  for (int i = 0; i < n; ++i) {
    ref[i] = make_reference(&specs[i], &rng);
    ndims[i] = specs[i].ndim, shapes[i] = specs[i].shape, dirs[i] = specs[i].direction, layouts[i] = specs[i].source_layout;
    formats[i] = MXFP8_FORMAT_E4M3, targets[i] = specs[i].target;
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
    if (layouts[i] == MXFP8_SCALE_LAYOUT_COMPACT)
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
  DLTensor **dvs = calloc((size_t)n, sizeof *dvs), **dss = calloc((size_t)n, sizeof *dss);
  for (int i = 0; i < n; ++i) {
    dshapes[i][0] = ref[i].values_bytes;
    dshapes[i][1] = target_bytes(&ref[i], specs[i].target);
    values[i] = poisoned_device((size_t)dshapes[i][0]);
    scales[i] = poisoned_device((size_t)dshapes[i][1]);
    dv[i] = device_bytes(values[i], &dshapes[i][0]);
    ds[i] = device_bytes(scales[i], &dshapes[i][1]);
    dvs[i] = &dv[i], dss[i] = &ds[i];
  }
  mxfp8_transfer_desc m = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, (size_t)n);
  m.bucket_in = &bucket_tensor;
  m.parts_in = entries;
  m.ndims = ndims;
  m.shapes = shapes;
  m.formats = formats;
  m.directions = dirs;
  m.source_layouts = layouts;
  m.values = dvs;
  m.scales = dss;
  m.target_layouts = targets;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (!graph) {
    assert_int_equal(mxfp8_transfer(&m, stream), MXFP8_OK);
    CUDA_OK(cudaStreamSynchronize(stream));
  } else {
    mxfp8_plan *plan = NULL;
    assert_int_equal(mxfp8_transfer_prepare(&m, &plan), MXFP8_OK);
    cudaGraph_t g;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    assert_int_equal(mxfp8_plan_run(plan, stream), MXFP8_OK);
    CUDA_OK(cudaStreamEndCapture(stream, &g));
    CUDA_OK(cudaGraphInstantiate(&exec, g, 0));
    for (int step = 0; step < 2; ++step) {
      /* A new refit: new bytes in the same bucket, parameters poisoned again, one graph launch. */
      for (int i = 0; i < n; ++i) {
        free_reference(&ref[i]);
        ref[i] = make_reference(&specs[i], &rng);
        memcpy(host + entries[i].values_offset, ref[i].values, (size_t)ref[i].values_bytes);
        if (layouts[i] == MXFP8_SCALE_LAYOUT_COMPACT)
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
    mxfp8_plan_release(plan);
  }
  for (int i = 0; i < n; ++i) {
    expect_device(values[i], ref[i].values, ref[i].values_bytes, "values", i);
    expect_device(scales[i], specs[i].target == MXFP8_SCALE_LAYOUT_COMPACT ? ref[i].compact : ref[i].swizzled,
                  dshapes[i][1], specs[i].target == MXFP8_SCALE_LAYOUT_COMPACT ? "compact scales" : "swizzled scales", i);
    CUDA_OK(cudaFree(values[i]));
    CUDA_OK(cudaFree(scales[i]));
    free_reference(&ref[i]);
  }
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(bucket));
  free(host), free(ref), free(entries), free(ndims), free(dirs), free(layouts), free(formats), free(targets), free(shapes);
  free(values), free(scales), free(dshapes), free(dv), free(ds), free(dvs), free(dss);
}

static const spec kSpecs[] = {
    {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_COMPACT},
    {2, {257, 33, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {31, 1000, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_128X4},
    {2, {130, 200, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_COMPACT},
    {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {70, 33, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_COMPACT},
    {3, {3, 5, 40}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {0, 64, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {256, 256, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_128X4},
    {2, {1000, 8192, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {4096, 2880, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_128X4},
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
                      (i / 2) % 2 ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT,
                      i % 2 ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT};
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
      DLTensor *vs[1] = {&v}, *ss[1] = {&s};
      const int32_t directions[1] = {te_specs[i].direction}, targets[1] = {target};
      const mxfp8_tensor *ts[1] = {t};
      mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
      d.tensors = ts, d.directions = directions, d.values = vs, d.scales = ss, d.target_layouts = targets;
      assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_OK);
      CUDA_OK(cudaDeviceSynchronize());
      expect_device(pv, te.ref.values, vshape[0], "direct values", i);
      expect_device(ps, target == MXFP8_SCALE_LAYOUT_COMPACT ? te.ref.compact : te.ref.swizzled, sshape[0], "direct scales", i);
      mxfp8_tensor_release(t);
      CUDA_OK(cudaFree(pv));
      CUDA_OK(cudaFree(ps));
      CUDA_OK(cudaFree(dd));
      CUDA_OK(cudaFree(dsc));
      free_te(&te);
    }
}

/* A TE tensor's storage uploaded to the device and described again: the handle, and the device buffers
 * to free. */
typedef struct {
  mxfp8_tensor *handle;
  uint8_t *data, *scales;
} device_te;

static void free_managed_copy(DLManagedTensorVersioned *self) { free(self); }

static device_te upload_te(const te_tensor *te, const spec *s) {
  device_te d;
  d.data = to_device(te->data->buffer, te->data->bytes);
  d.scales = to_device(te->scales->buffer, te->scales->bytes);
  /* The handle holds its managed tensors until it is released (mxfp8_tensor_create takes them), so they
   * live on the heap and go with their deleter: the convert call reads the values through them. */
  DLManagedTensorVersioned *md = malloc(sizeof *md), *ms = malloc(sizeof *ms);
  assert_non_null(md);
  assert_non_null(ms);
  *md = te->data->managed, *ms = te->scales->managed;
  md->deleter = ms->deleter = free_managed_copy;
  md->dl_tensor.data = d.data, ms->dl_tensor.data = d.scales;
  md->dl_tensor.device = (DLDevice){kDLCUDA, 0}, ms->dl_tensor.device = (DLDevice){kDLCUDA, 0};
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = s->source_layout == 1 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (s->direction == MXFP8_DIRECTION_COLUMNWISE) desc.columnwise_data = md, desc.columnwise_scale_inv = ms;
  else desc.rowwise_data = md, desc.rowwise_scale_inv = ms;
  d.handle = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &d.handle), MXFP8_OK);
  return d;
}

static void free_device_te(device_te *d) {
  mxfp8_tensor_release(d->handle);
  CUDA_OK(cudaFree(d->data));
  CUDA_OK(cudaFree(d->scales));
}

static const int32_t kEngineTargets[] = {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED,
                                         MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32};

/* mxfp8_convert on device memory: every target, with and without the fix-up, into aligned and
 * unaligned (byte_offset 1) outputs, against the host references. */
static void test_gpu_convert_matches_the_engine_references(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const spec specs[] = {
      {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},   {2, {257, 200, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0},
      {3, {3, 5, 130}, MXFP8_DIRECTION_ROWWISE, 0, 0},    {2, {130, 4096, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0},
      {2, {2050, 2048, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0}, {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, 0, 0},
      {2, {70, 33, 0}, MXFP8_DIRECTION_COLUMNWISE, 1, 0},
  };
  uint64_t rng = 71;
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; ++i) {
    const spec *s = &specs[i];
    const int col = s->direction == MXFP8_DIRECTION_COLUMNWISE;
    te_tensor te = make_te(s, &rng);
    zero_some_scales(&te, s, &rng);
    device_te d = upload_te(&te, s);
    uint8_t *fixed = ref_zero_as_one(te.ref.compact, te.ref.r * te.ref.c);
    for (size_t k = 0; k < sizeof kEngineTargets / sizeof kEngineTargets[0]; ++k) {
      if (col && (kEngineTargets[k] == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED || kEngineTargets[k] == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32))
        continue; /* refused (host test) */
      for (int variant = 0; variant < 4; ++variant) {
        const int fixup = variant & 1, offset = variant >> 1;
        int64_t n = 0;
        uint8_t *want = ref_layout(fixup ? fixed : te.ref.compact, te.ref.r, te.ref.c, kEngineTargets[k], col, &n);
        uint8_t *ps = poisoned_device((size_t)n + 1), *pv = poisoned_device((size_t)te.ref.values_bytes + 1);
        int64_t sshape[1] = {n}, vshape[1] = {te.ref.values_bytes};
        DLTensor st = device_bytes(ps, sshape), vt = device_bytes(pv, vshape);
        st.byte_offset = vt.byte_offset = (uint64_t)offset;
        mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
        o.target = kEngineTargets[k];
        o.direction = s->direction;
        o.scale_fixup = fixup;
        assert_int_equal(mxfp8_convert(d.handle, &o, &vt, &st), MXFP8_OK);
        CUDA_OK(cudaDeviceSynchronize());
        expect_device(ps + offset, want, n, fixup ? "convert with fix-up" : "convert", (int)i);
        expect_device(pv + offset, te.ref.values, te.ref.values_bytes, "convert values", (int)i);
        CUDA_OK(cudaFree(ps));
        CUDA_OK(cudaFree(pv));
        free(want);
      }
    }
    free(fixed);
    free_device_te(&d);
    free_te(&te);
  }
}

/* 128 and 300 experts of the shapes of an MoE layer, stored as TE stores them on the device,
 * converted stacked in one call (one launch), against the per-expert references. The padded row-major
 * cases of 13, 45 and 141 scales a row (rows of 16, 48 and 144 bytes: 16-byte aligned, ragged ends) and
 * 130/300/301 rows take the register paths of the 128x4 and DeepGEMM packed targets with partial quads,
 * words and tile rows (13 and 45: direct chunks of whole tile rows; 141: two chunks a tile row, the
 * second of 4 tiles); 3 scales a row (rows of 4 bytes) and 8 (compact, 8 bytes) take the fallbacks.
 * scales_only: the fix-up run converts the scales alone (values NULL), so that the launch holds layout
 * jobs only. */
static void test_gpu_grouped_convert_stacked(void **state) {
  (void)state;
  REQUIRE_GPU();
  const int quick = getenv("MXFP8_TEST_QUICK") != NULL;
  const struct { int64_t experts, n, k; int variant, scales_only; } cases[] = {
      {128, 102, 200, 2, 0}, {128, quick ? 256 : 1536, 2048, 0, 0}, {300, 36, 96, 1, 0}, {128, 130, 230, 0, 0},
      {5, 300, 416, 1, 1},   {6, 301, 1420, 1, 1},   {3, 130, 4507, 1, 1},
  };
  uint64_t rng = 72;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ++ci) {
    const int64_t experts = cases[ci].experts, n = cases[ci].n, k = cases[ci].k, c = ref_ceil_div(k, 32);
    const int variant = cases[ci].variant; /* 0 compact, 1 padded row-major, 2 padded swizzled */
    const int64_t per = variant == 0 ? n * c : ref_round_up(n, 128) * ref_round_up(c, 4);
    uint8_t *values = malloc((size_t)(experts * n * k));
    fill_random(values, (size_t)(experts * n * k), &rng);
    uint8_t *compact = malloc((size_t)(experts * n * c));
    fill_random_scales(compact, (size_t)(experts * n * c), &rng);
    add_zero_scales(compact, experts * n * c, &rng);
    uint8_t *stored = malloc((size_t)(experts * per));
    memset(stored, POISON, (size_t)(experts * per));
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t y = 0; y < n; ++y)
        for (int64_t x = 0; x < c; ++x) {
          const uint8_t v = compact[(e * n + y) * c + x];
          uint8_t *at = stored + e * per;
          if (variant == 0) at[y * c + x] = v;
          else if (variant == 1) at[y * ref_round_up(c, 4) + x] = v;
          else at[ref_swizzled_index(y, x, ref_round_up(c, 4))] = v;
        }
    uint8_t *dv = to_device(values, (size_t)(experts * n * k)), *ds = to_device(stored, (size_t)(experts * per));
    int64_t vshape[2] = {experts * n, k}, sshape[1] = {experts * per};
    DLManagedTensorVersioned md = borrowed_bytes(dv, kDLCUDA, 2, vshape), ms = borrowed_bytes(ds, kDLCUDA, 1, sshape);
    mxfp8_grouped_desc gd = MXFP8_GROUPED_DESC_INIT;
    gd.scale_layout = variant == 2 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    gd.scales = variant == 0 ? MXFP8_GROUPED_SCALES_COMPACT : MXFP8_GROUPED_SCALES_PADDED;
    gd.num_experts = (int32_t)experts;
    gd.cols = k;
    gd.uniform_rows = n;
    gd.data = &md;
    gd.scale_inv = &ms;
    mxfp8_grouped_tensor *g = NULL;
    assert_int_equal(mxfp8_grouped_tensor_create(&gd, &g), MXFP8_OK);
    for (size_t t = 0; t < sizeof kEngineTargets / sizeof kEngineTargets[0]; ++t)
      for (int fixup = 0; fixup < 2; ++fixup) {
        int64_t per_out = 0;
        free(ref_layout(compact, n, c, kEngineTargets[t], 0, &per_out));
        uint8_t *want = malloc((size_t)(experts * per_out) + 1);
        for (int64_t e = 0; e < experts; ++e) {
          uint8_t *src = fixup ? ref_zero_as_one(compact + e * n * c, n * c) : NULL;
          int64_t bytes = 0;
          uint8_t *one = ref_layout(fixup ? src : compact + e * n * c, n, c, kEngineTargets[t], 0, &bytes);
          memcpy(want + e * per_out, one, (size_t)bytes);
          free(one);
          free(src);
        }
        int64_t oshape[1] = {experts * per_out}, ovshape[1] = {experts * n * k};
        uint8_t *po = poisoned_device((size_t)oshape[0]), *pv = poisoned_device((size_t)ovshape[0]);
        DLTensor ot = device_bytes(po, oshape), vt = device_bytes(pv, ovshape);
        mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
        o.target = kEngineTargets[t];
        o.scale_fixup = fixup;
        const int scales_only = fixup && cases[ci].scales_only;
        assert_int_equal(mxfp8_grouped_convert(g, &o, scales_only ? NULL : &vt, &ot), MXFP8_OK);
        CUDA_OK(cudaDeviceSynchronize());
        expect_device(po, want, oshape[0], fixup ? "grouped convert with fix-up" : "grouped convert", (int)ci);
        if (!scales_only) expect_device(pv, values, ovshape[0], "grouped convert values", (int)ci);
        CUDA_OK(cudaFree(po));
        CUDA_OK(cudaFree(pv));
        free(want);
      }
    mxfp8_grouped_tensor_release(g);
    CUDA_OK(cudaFree(dv));
    CUDA_OK(cudaFree(ds));
    free(values);
    free(compact);
    free(stored);
  }
}

/* A device bucket whose scale part is in a DeepGEMM layout (packed or float32, as desc.source_layouts
 * records), at an odd offset, imports back into compact and 128x4 parameters, with and without
 * desc.scale_fixup. */
static void test_gpu_deepgemm_bucket_part_round_trips(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 73;
  const spec s = {2, {1000, 1000, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0}; /* C = 32, rows not a multiple of 128 */
  te_tensor te = make_te(&s, &rng);
  zero_some_scales(&te, &s, &rng);
  uint8_t *fixed = ref_zero_as_one(te.ref.compact, te.ref.r * te.ref.c);
  static const int32_t part_layouts[2] = {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32};
  for (int pl = 0; pl < 2; ++pl) {
    const int32_t ndim = 2, layout = part_layouts[pl];
    int64_t part = 0;
    uint8_t *packed = ref_layout(te.ref.compact, te.ref.r, te.ref.c, layout, 0, &part);
    const int64_t total = te.ref.values_bytes + 5 + part;
    uint8_t *host = malloc((size_t)total);
    memcpy(host, te.ref.values, (size_t)te.ref.values_bytes);
    memcpy(host + te.ref.values_bytes + 5, packed, (size_t)part);
    uint8_t *bucket = to_device(host, (size_t)total);
    int64_t bshape[1] = {total};
    DLTensor bt = device_bytes(bucket, bshape);
    const mxfp8_bucket_part entry = {0, (uint64_t)te.ref.values_bytes, (uint64_t)te.ref.values_bytes + 5, (uint64_t)part, 0, 0};
    const int32_t format = MXFP8_FORMAT_E4M3;
    const int64_t *shape = s.shape;
    for (int target = 0; target < 2; ++target)
      for (int fixup = 0; fixup < 2; ++fixup) {
        mxfp8_transfer_desc m = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, 1);
        m.bucket_in = &bt;
        m.parts_in = &entry;
        m.ndims = &ndim;
        m.shapes = &shape;
        m.formats = &format;
        m.source_layouts = &layout;
        m.scale_fixup = fixup;
        int64_t n = 0;
        uint8_t *want = ref_layout(fixup ? fixed : te.ref.compact, te.ref.r, te.ref.c, target, 0, &n);
        int64_t vshape[1] = {te.ref.values_bytes}, sshape[1] = {n};
        uint8_t *pv = poisoned_device((size_t)vshape[0]), *ps = poisoned_device((size_t)n);
        DLTensor vt = device_bytes(pv, vshape), st = device_bytes(ps, sshape);
        DLTensor *vs[1] = {&vt}, *ss[1] = {&st};
        const int32_t targets[1] = {target};
        m.values = vs, m.scales = ss, m.target_layouts = targets;
        assert_int_equal(mxfp8_transfer(&m, NULL), MXFP8_OK);
        CUDA_OK(cudaDeviceSynchronize());
        expect_device(ps, want, n, fixup ? "DeepGEMM part, fix-up" : "DeepGEMM part", 10 * pl + target);
        expect_device(pv, te.ref.values, vshape[0], "DeepGEMM part values", 10 * pl + target);
        CUDA_OK(cudaFree(pv));
        CUDA_OK(cudaFree(ps));
        free(want);
      }
    CUDA_OK(cudaFree(bucket));
    free(host);
    free(packed);
  }
  free(fixed);
  free_te(&te);
}

/* DeepGEMM's strided int32 form on the device over storage of exactly its extent (mn 102, so the view
 * ends 2 int32 before the layout): every described byte as the reference says, the guard bytes past
 * the extent untouched (the host test covers grouped and import; this one the kernel's bound). */
static void test_gpu_deepgemm_strided_form_stays_in_its_extent(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 74;
  const spec s = {2, {102, 200, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0}; /* sf_k 7: 2 int32 per row, mn_aligned 104 */
  te_tensor te = make_te(&s, &rng);
  device_te d = upload_te(&te, &s);
  int64_t n = 0;
  uint8_t *want = ref_layout(te.ref.compact, te.ref.r, te.ref.c, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &n);
  const int64_t extent = 4 * (104 + 102), guard = 16;
  assert_true(extent < n);
  uint8_t *ps = poisoned_device((size_t)(extent + guard - 1)); /* extent + guard bytes, all POISON */
  int64_t shape[2] = {102, 2}, strides[2] = {1, 104};
  DLTensor st = {ps, {kDLCUDA, 0}, 2, {kDLInt, 32, 1}, shape, strides, 0};
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
  assert_int_equal(mxfp8_convert(d.handle, &o, NULL, &st), MXFP8_OK);
  CUDA_OK(cudaDeviceSynchronize());
  uint8_t *h = malloc((size_t)(extent + guard));
  CUDA_OK(cudaMemcpy(h, ps, (size_t)(extent + guard), cudaMemcpyDeviceToHost));
  for (int64_t b = 0; b < extent; ++b)
    EXPECT(h[b] == want[b], "strided DeepGEMM: byte %lld is %u, expected %u", (long long)b, h[b], want[b]);
  for (int64_t b = extent; b < extent + guard; ++b)
    EXPECT(h[b] == POISON, "strided DeepGEMM: byte %lld past the extent (%lld) was written", (long long)b,
           (long long)extent);
  free(h);
  CUDA_OK(cudaFree(ps));
  free(want);
  free_device_te(&d);
  free_te(&te);
}

#else
static void test_gpu_bucket_import_matches_the_formula(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_prepared_bucket_import_replays_in_a_cuda_graph(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_import_of_many_and_large_tensors(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_direct_import_from_te_storage(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_convert_matches_the_engine_references(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_grouped_convert_stacked(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_deepgemm_bucket_part_round_trips(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_deepgemm_strided_form_stays_in_its_extent(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_bucket_import_matches_the_formula),
      cmocka_unit_test(test_gpu_prepared_bucket_import_replays_in_a_cuda_graph),
      cmocka_unit_test(test_gpu_import_of_many_and_large_tensors),
      cmocka_unit_test(test_gpu_direct_import_from_te_storage),
      cmocka_unit_test(test_gpu_convert_matches_the_engine_references),
      cmocka_unit_test(test_gpu_grouped_convert_stacked),
      cmocka_unit_test(test_gpu_deepgemm_bucket_part_round_trips),
      cmocka_unit_test(test_gpu_deepgemm_strided_form_stays_in_its_extent),
  };
  return cmocka_run_group_tests_name("import on the GPU", tests, NULL, NULL);
}
