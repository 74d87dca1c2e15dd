/* The CUDA path, bit for bit against the host path and the layout's definition: every storage layout
 * and direction on random shapes, poisoned destinations, unaligned buffers, stream ordering, batched
 * versus one-by-one, and the swizzle pair. Every case skips when no CUDA device is usable. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "test_gpu_support.h"

#ifdef MXFP8_TEST_WITH_CUDA

/* A host tensor's bytes copied to the device; the DLManagedTensorVersioned is the test's own. */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[3];
  uint8_t *device_alloc;
  int deleter_calls;
} gpu_tensor;

static void gpu_count_deleter(DLManagedTensorVersioned *self) { ((gpu_tensor *)self->manager_ctx)->deleter_calls++; }

/* Uploads `host`, placing it `offset` bytes into the allocation (to test unaligned buffers). */
static gpu_tensor *upload(const test_tensor *host, uint64_t offset) {
  gpu_tensor *g = calloc(1, sizeof *g);
  g->managed = host->managed;
  memcpy(g->shape, host->shape, sizeof g->shape);
  g->managed.dl_tensor.shape = g->shape;
  g->managed.dl_tensor.strides = NULL;
  g->managed.manager_ctx = g;
  g->managed.deleter = gpu_count_deleter;
  CUDA_OK(cudaMalloc((void **)&g->device_alloc, host->bytes + offset + 1));
  CUDA_OK(cudaMemcpy(g->device_alloc + offset, host->buffer, host->bytes, cudaMemcpyHostToDevice));
  g->managed.dl_tensor.data = g->device_alloc;
  g->managed.dl_tensor.byte_offset = offset;
  g->managed.dl_tensor.device.device_type = kDLCUDA;
  g->managed.dl_tensor.device.device_id = 0;
  return g;
}

static void gpu_tensor_free(gpu_tensor *g) {
  cudaFree(g->device_alloc);
  free(g);
}

/* Device allocator that hands out buffers filled with POISON. */
static void free_poisoned_device(DLManagedTensorVersioned *self) {
  cudaFree(self->dl_tensor.data);
  free(self->dl_tensor.shape);
  free(self);
}

static int poisoned_device_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                                     void (*set_error)(void *, const char *, const char *)) {
  size_t n = 1;
  for (int32_t i = 0; i < prototype->ndim; ++i) n *= (size_t)prototype->shape[i];
  DLManagedTensorVersioned *m = calloc(1, sizeof *m);
  m->version.major = DLPACK_MAJOR_VERSION;
  m->version.minor = DLPACK_MINOR_VERSION;
  int64_t *shape = calloc((size_t)prototype->ndim + 1, sizeof(int64_t));
  memcpy(shape, prototype->shape, sizeof(int64_t) * (size_t)prototype->ndim);
  m->dl_tensor = *prototype;
  m->dl_tensor.shape = shape;
  m->dl_tensor.strides = NULL;
  if (cudaMalloc(&m->dl_tensor.data, n) != cudaSuccess || cudaMemset(m->dl_tensor.data, POISON, n) != cudaSuccess) {
    set_error(error_ctx, "RuntimeError", "cudaMalloc failed");
    free(shape);
    free(m);
    return -1;
  }
  m->deleter = free_poisoned_device;
  *out = m;
  return 0;
}

/* Downloads a compact (contiguous) exported tensor. */
static uint8_t *download(const DLTensor *t, size_t n) {
  uint8_t *h = malloc(n + 1);
  if (n) CUDA_OK(cudaMemcpy(h, (const uint8_t *)t->data + t->byte_offset, n, cudaMemcpyDeviceToHost));
  return h;
}

/* Builds a random (rows, k) tensor with scales S in the given storage (0 compact, 1 TE-padded,
 * 2 swizzled) for one direction, on the host. Returns S (R x C). */
static uint8_t *make_host_tensor(int64_t rows, int64_t k, int storage, int columnwise, uint64_t *rng,
                                 test_tensor **data, test_tensor **scales, int64_t *r_out, int64_t *c_out) {
  const int64_t shape[2] = {rows, k};
  const int64_t r = columnwise ? ref_ceil_div(rows, 32) : rows, c = columnwise ? k : ref_ceil_div(k, 32);
  int64_t bshape[2] = {r, c};
  if (storage > 0) {
    bshape[0] = columnwise ? ref_round_up(r, 4) : ref_round_up(r, 128);
    bshape[1] = columnwise ? ref_round_up(c, 128) : ref_round_up(c, 4);
  }
  *data = test_tensor_new(2, shape, kDLUInt, 1);
  *scales = test_tensor_new(2, bshape, kDLUInt, 1);
  fill_random((*data)->buffer, (*data)->bytes, rng);
  uint8_t *s = malloc((size_t)(r * c) + 1);
  fill_random_scales(s, (size_t)(r * c), rng);
  for (int64_t y = 0; y < r; ++y)
    for (int64_t x = 0; x < c; ++x) {
      size_t at = (size_t)(y * bshape[1] + x);
      if (storage == 2) at = columnwise ? ref_swizzled_index(x, y, ref_round_up(r, 4)) : ref_swizzled_index(y, x, ref_round_up(c, 4));
      (*scales)->buffer[at] = s[y * c + x];
    }
  *r_out = r;
  *c_out = c;
  return s;
}

static mxfp8_tensor *create_on(DLManagedTensorVersioned *data, DLManagedTensorVersioned *scales, int storage,
                               int columnwise) {
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = storage == 2 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (columnwise) {
    desc.columnwise_data = data;
    desc.columnwise_scale_inv = scales;
  } else {
    desc.rowwise_data = data;
    desc.rowwise_scale_inv = scales;
  }
  mxfp8_tensor *t = NULL;
  const mxfp8_status st = mxfp8_tensor_create(&desc, &t);
  EXPECT(st == MXFP8_OK, "create: %s", mxfp8_last_error());
  return t;
}

static void test_gpu_export_equals_host_export_and_reference(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 2024;
  static const int64_t fixed[][2] = {{100, 48}, {128, 4096}, {15, 48}, {1, 16}, {257, 33}, {64, 16}, {1000, 8192}};
  /* MXFP8_TEST_QUICK (set under compute-sanitizer, which is slow) keeps the fixed shapes and a few
   * random ones. */
  const int shapes = getenv("MXFP8_TEST_QUICK") ? 10 : 40;
  for (int n = 0; n < shapes; ++n) {
    int64_t rows, k;
    if (n < 7) {
      rows = fixed[n][0];
      k = fixed[n][1];
    } else {
      rows = 1 + (int64_t)(rng_next(&rng) % 700);
      k = 1 + (int64_t)(rng_next(&rng) % 3000);
    }
    for (int storage = 0; storage < 3; ++storage)
      for (int columnwise = 0; columnwise < 2; ++columnwise)
        for (uint64_t offset = 0; offset < 2; ++offset) {
          test_tensor *hd, *hs;
          int64_t r, c;
          uint8_t *s = make_host_tensor(rows, k, storage, columnwise, &rng, &hd, &hs, &r, &c);
          gpu_tensor *gd = upload(hd, 0), *gs = upload(hs, offset * 3); /* offset 3: unaligned scales */
          mxfp8_tensor *gt = create_on(&gd->managed, &gs->managed, storage, columnwise);
          mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
          o.direction = columnwise;
          o.allocator = offset ? poisoned_device_allocator : NULL;
          DLManagedTensorVersioned *values = NULL, *scales = NULL;
          const mxfp8_status st = mxfp8_export_components(gt, &o, &values, &scales);
          EXPECT(st == MXFP8_OK, "export (%lld, %lld) storage %d col %d: %s", (long long)rows, (long long)k, storage,
                 columnwise, mxfp8_last_error());
          EXPECT(values->dl_tensor.data == gd->device_alloc, "values not a view");
          EXPECT(scales->dl_tensor.device.device_type == kDLCUDA, "scales not on the GPU");
          CUDA_OK(cudaDeviceSynchronize());
          const int copied = !!(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED);
          uint8_t *got;
          if (copied) {
            got = download(&scales->dl_tensor, (size_t)(r * c));
          } else { /* a view: read the rows through its stride */
            got = malloc((size_t)(r * c) + 1);
            for (int64_t y = 0; y < r; ++y)
              CUDA_OK(cudaMemcpy(got + y * c,
                                 (uint8_t *)scales->dl_tensor.data + scales->dl_tensor.byte_offset + y * scales->dl_tensor.strides[0],
                                 (size_t)c, cudaMemcpyDeviceToHost));
          }
          EXPECT(memcmp(got, s, (size_t)(r * c)) == 0, "(%lld, %lld) storage %d columnwise %d offset %d: scales differ",
                 (long long)rows, (long long)k, storage, columnwise, (int)offset);
          /* and the host path gives the same bytes */
          mxfp8_tensor *ht = create_on(&hd->managed, &hs->managed, storage, columnwise);
          DLManagedTensorVersioned *host_scales = NULL;
          mxfp8_export_options ho = MXFP8_EXPORT_OPTIONS_INIT;
          ho.direction = columnwise;
          assert_int_equal(mxfp8_export_components(ht, &ho, NULL, &host_scales), MXFP8_OK);
          for (int64_t i = 0; i < r * c; ++i)
            EXPECT(read_through_strides(&host_scales->dl_tensor, i) == got[i], "host and GPU differ at %lld", (long long)i);
          release_managed(host_scales);
          mxfp8_tensor_release(ht);
          release_managed(values);
          release_managed(scales);
          mxfp8_tensor_release(gt);
          EXPECT(gd->deleter_calls == 1 && gs->deleter_calls == 1, "GPU input deleters");
          CUDA_OK(cudaDeviceSynchronize());
          free(got);
          free(s);
          gpu_tensor_free(gd);
          gpu_tensor_free(gs);
          test_tensor_free(hd);
          test_tensor_free(hs);
        }
  }
}

/* Shards on the GPU against the crop of S the test drew: tile-aligned windows (whole source tiles),
 * windows starting inside a tile (the gather path), one block, the last partial block, row pieces. */
/* The row stride of a 2-D result: DLPack leaves strides NULL for a compact tensor (the library's copies). */
static int64_t row_stride_of(const DLTensor *t) { return t->strides ? t->strides[0] : t->shape[1]; }

static void test_gpu_shard_equals_crop(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 2020;
  static const int64_t shapes[][2] = {{100, 48}, {1000, 8192}, {257, 200}, {640, 1056}, {300, 33}, {2048, 4096}};
  for (size_t n = 0; n < sizeof shapes / sizeof shapes[0]; ++n)
    for (int storage = 0; storage < 3; ++storage)
      for (int columnwise = 0; columnwise < 2; ++columnwise)
        for (int trial = 0; trial < 6; ++trial) {
          const int64_t rows = shapes[n][0], k = shapes[n][1];
          test_tensor *hd, *hs;
          int64_t r, c;
          uint8_t *s = make_host_tensor(rows, k, storage, columnwise, &rng, &hd, &hs, &r, &c);
          gpu_tensor *gd = upload(hd, 0), *gs = upload(hs, trial == 5 ? 3 : 0);
          mxfp8_tensor *gt = create_on(&gd->managed, &gs->managed, storage, columnwise);
          /* Block-axis and free-axis ranges: aligned to whole tiles on even trials, anywhere on odd ones. */
          const int64_t block_extent = columnwise ? rows : k, free_extent = columnwise ? k : rows;
          const int64_t blocks = ref_ceil_div(block_extent, 32);
          int64_t b0 = (int64_t)(rng_next(&rng) % (uint64_t)blocks), b1 = trial == 1 ? b0 + 1 : blocks;
          if (trial % 2 == 0) b0 = b0 / 4 * 4;
          int64_t f0 = (int64_t)(rng_next(&rng) % (uint64_t)free_extent);
          if (trial % 2 == 0) f0 = f0 / 128 * 128;
          int64_t f1 = f0 + 1 + (int64_t)(rng_next(&rng) % (uint64_t)(free_extent - f0));
          mxfp8_shard shard = MXFP8_SHARD_INIT;
          int64_t pieces[4];
          const int64_t be = 32 * b1 < block_extent ? 32 * b1 : block_extent;
          if (columnwise) {
            shard.row_begin = 32 * b0, shard.row_end = be, shard.col_begin = f0, shard.col_end = f1;
          } else {
            shard.row_begin = f0, shard.row_end = f1, shard.col_begin = 32 * b0, shard.col_end = be;
            if (trial == 3 && f1 - f0 > 2) { /* two pieces, the second before the first */
              pieces[0] = (f0 + f1) / 2, pieces[1] = f1, pieces[2] = f0, pieces[3] = (f0 + f1) / 2;
              shard.row_begin = 0, shard.row_end = MXFP8_SHARD_END, shard.num_row_pieces = 2, shard.row_pieces = pieces;
            }
          }
          mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
          o.direction = columnwise;
          o.allocator = trial == 5 ? poisoned_device_allocator : NULL;
          DLManagedTensorVersioned *values = NULL, *scales = NULL;
          EXPECT(export_shard(gt, &shard, &o, &values, &scales) == MXFP8_OK, "shard: %s", mxfp8_last_error());
          CUDA_OK(cudaDeviceSynchronize());
          const int64_t sr = scales->dl_tensor.shape[0], sc = scales->dl_tensor.shape[1];
          uint8_t *got = malloc((size_t)(sr * sc) + 1);
          for (int64_t y = 0; y < sr; ++y)
            CUDA_OK(cudaMemcpy(got + y * sc, (uint8_t *)scales->dl_tensor.data + scales->dl_tensor.byte_offset + y * row_stride_of(&scales->dl_tensor),
                               (size_t)sc, cudaMemcpyDeviceToHost));
          const size_t npieces = shard.num_row_pieces ? 2 : 1;
          const int64_t one_range[2] = {shard.row_begin, shard.row_end};
          const int64_t *pr = shard.num_row_pieces ? pieces : one_range;
          const int64_t c0 = columnwise ? shard.col_begin : shard.col_begin / 32;
          int64_t out = 0;
          for (size_t p = 0; p < npieces; ++p) {
            const int64_t y0 = columnwise ? pr[2 * p] / 32 : pr[2 * p];
            const int64_t y1 = columnwise ? ref_ceil_div(pr[2 * p + 1], 32) : pr[2 * p + 1];
            for (int64_t y = y0; y < y1; ++y, ++out)
              for (int64_t x = 0; x < sc; ++x)
                EXPECT(got[out * sc + x] == s[y * c + c0 + x], "(%lld, %lld) storage %d col %d trial %d: scale (%lld, %lld)",
                       (long long)rows, (long long)k, storage, columnwise, trial, (long long)out, (long long)x);
          }
          EXPECT(out == sr, "scale rows %lld, expected %lld", (long long)out, (long long)sr);
          /* Values: a view of one range, a copy of pieces; either way the rows of the shard. */
          const int64_t vr = values->dl_tensor.shape[0], vc = values->dl_tensor.shape[1];
          uint8_t *vals = malloc((size_t)(vr * vc) + 1);
          for (int64_t y = 0; y < vr; ++y)
            CUDA_OK(cudaMemcpy(vals + y * vc, (uint8_t *)values->dl_tensor.data + values->dl_tensor.byte_offset + y * row_stride_of(&values->dl_tensor),
                               (size_t)vc, cudaMemcpyDeviceToHost));
          out = 0;
          for (size_t p = 0; p < npieces; ++p)
            for (int64_t y = pr[2 * p]; y < pr[2 * p + 1]; ++y, ++out)
              EXPECT(memcmp(vals + out * vc, hd->buffer + y * k + shard.col_begin, (size_t)vc) == 0, "values row %lld", (long long)out);
          free(vals);
          free(got);
          release_managed(values);
          release_managed(scales);
          mxfp8_tensor_release(gt);
          CUDA_OK(cudaDeviceSynchronize());
          free(s);
          gpu_tensor_free(gd);
          gpu_tensor_free(gs);
          test_tensor_free(hd);
          test_tensor_free(hs);
        }
}

/* Buckets of shards and the import of each rank's shard of a whole bucket, on the GPU, byte for byte
 * equal to the host path (which test_shard.c checks against the test's own crop and formula swizzle):
 * row ranges (tile-aligned and not), row pieces, K-column shards, compact and 128x4 destinations.
 * The K shards' values are windows of rows: 800-byte rows (the bulk copy on sm_90+ when
 * MXFP8_COPY_ENGINE_MIN_BYTES lets it take them, 20 rows a chunk), 1 KiB rows from row 5 of 333 (16 a
 * chunk, the last chunk partial) and 34,848-byte rows (three chunks a row, the last 2,080 bytes). */
static void test_gpu_shard_buckets_and_imports_equal_the_host(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { T = 6 };
  static const int64_t shapes[T][2] = {{1024, 8192}, {257, 200}, {640, 1056}, {384, 4096}, {333, 4096}, {96, 36864}};
  static const int storages[T] = {2, 2, 1, 2, 1, 2};
  uint64_t rng = 4040;
  test_tensor *hd[T], *hs[T];
  gpu_tensor *gd[T], *gs[T];
  mxfp8_tensor *ht[T], *gt[T];
  uint8_t *s[T];
  for (int i = 0; i < T; ++i) {
    int64_t r, c;
    s[i] = make_host_tensor(shapes[i][0], shapes[i][1], storages[i], 0, &rng, &hd[i], &hs[i], &r, &c);
    ht[i] = create_on(&hd[i]->managed, &hs[i]->managed, storages[i], 0);
    gd[i] = upload(hd[i], 0);
    gs[i] = upload(hs[i], 0);
    gt[i] = create_on(&gd[i]->managed, &gs[i]->managed, storages[i], 0);
  }
  int64_t pieces[4] = {512, 640, 128, 256};  /* whole tiles, the second before the first */
  mxfp8_shard sh[T];
  for (int i = 0; i < T; ++i) {
    mxfp8_shard init = MXFP8_SHARD_INIT;
    sh[i] = init;
  }
  sh[0].num_row_pieces = 2, sh[0].row_pieces = pieces;
  sh[1].row_begin = 37, sh[1].row_end = 250, sh[1].col_begin = 64; /* a window inside tiles: the gather */
  sh[2].col_begin = 256, sh[2].col_end = 1056;                     /* a K shard with a partial last block */
  sh[3].row_begin = 128, sh[3].row_end = 384;
  sh[4].row_begin = 5, sh[4].row_end = 333, sh[4].col_begin = 1024, sh[4].col_end = 2048;
  sh[5].col_begin = 1024, sh[5].col_end = 35872;
  const mxfp8_shard *shards[T] = {&sh[0], &sh[1], &sh[2], &sh[3], &sh[4], &sh[5]};
  mxfp8_transfer_desc gpu = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, T), host = gpu;
  gpu.tensors = (const mxfp8_tensor *const *)gt, gpu.shards = shards;
  host.tensors = (const mxfp8_tensor *const *)ht, host.shards = shards;
  mxfp8_bucket_part entries[T], host_entries[T];
  uint64_t total = 0, host_total = 0;
  assert_int_equal(mxfp8_bucket_parts(&gpu, 256, entries, &total), MXFP8_OK);
  assert_int_equal(mxfp8_bucket_parts(&host, 256, host_entries, &host_total), MXFP8_OK);
  assert_int_equal(total, host_total);
  uint8_t *d_bucket, *host_bucket = malloc(total), *got = malloc(total);
  CUDA_OK(cudaMalloc((void **)&d_bucket, total));
  CUDA_OK(cudaMemset(d_bucket, POISON, total));
  memset(host_bucket, POISON, total);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor db = {d_bucket, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  DLTensor hb = {host_bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  gpu.bucket_out = &db, gpu.parts_out = entries;
  host.bucket_out = &hb, host.parts_out = host_entries;
  EXPECT(mxfp8_transfer(&gpu, NULL) == MXFP8_OK, "gpu: %s", mxfp8_last_error());
  EXPECT(mxfp8_transfer(&host, NULL) == MXFP8_OK, "host: %s", mxfp8_last_error());
  CUDA_OK(cudaMemcpy(got, d_bucket, total, cudaMemcpyDeviceToHost));
  EXPECT(memcmp(got, host_bucket, total) == 0, "the GPU bucket of shards differs from the host one");
  cudaFree(d_bucket);
  free(host_bucket);
  free(got);

  /* The receiver: a whole bucket on each side, each tensor's shard imported into compact and 128x4. */
  gpu.shards = host.shards = NULL;
  assert_int_equal(mxfp8_bucket_parts(&gpu, 256, entries, &total), MXFP8_OK);
  uint8_t *whole_d, *whole_h = malloc(total);
  CUDA_OK(cudaMalloc((void **)&whole_d, total));
  bshape[0] = (int64_t)total;
  DLTensor wd = {whole_d, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  DLTensor wh = {whole_h, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  gpu.bucket_out = &wd, gpu.parts_out = entries;
  host.bucket_out = &wh, host.parts_out = entries;
  assert_int_equal(mxfp8_transfer(&gpu, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_transfer(&host, NULL), MXFP8_OK);
  int32_t ndims[T], formats[T], compact[T];
  const int64_t *shape_ptrs[T];
  for (int i = 0; i < T; ++i) ndims[i] = 2, shape_ptrs[i] = shapes[i];
  for (int i = 0; i < T; ++i) formats[i] = MXFP8_FORMAT_E4M3, compact[i] = MXFP8_SCALE_LAYOUT_COMPACT;
  for (int target = 0; target < 2; ++target) {
    int64_t vbytes[T], sbytes[T], vshape[T][1], sshape[T][1];
    uint8_t *dv[T], *ds[T], *hv[T], *hsc[T];
    DLTensor dvt[T], dst[T], hvt[T], hst[T];
    DLTensor *dvals[T], *dscales[T], *hvals[T], *hscales[T];
    int32_t layouts[T];
    for (int i = 0; i < T; ++i) {
      vbytes[i] = (int64_t)host_entries[i].values_bytes; /* the shard's sizes, from its bucket plan */
      const int64_t shard_cols = (sh[i].col_end == MXFP8_SHARD_END ? shapes[i][1] : sh[i].col_end) - sh[i].col_begin;
      const int64_t shard_rows = vbytes[i] / shard_cols, c = ref_ceil_div(shard_cols, 32);
      sbytes[i] = target ? ref_round_up(shard_rows, 128) * ref_round_up(c, 4) : shard_rows * c;
      vshape[i][0] = vbytes[i], sshape[i][0] = sbytes[i];
      CUDA_OK(cudaMalloc((void **)&dv[i], (size_t)vbytes[i]));
      CUDA_OK(cudaMalloc((void **)&ds[i], (size_t)sbytes[i]));
      CUDA_OK(cudaMemset(dv[i], POISON, (size_t)vbytes[i]));
      CUDA_OK(cudaMemset(ds[i], POISON, (size_t)sbytes[i]));
      hv[i] = malloc((size_t)vbytes[i]), hsc[i] = malloc((size_t)sbytes[i]);
      DLTensor a = {dv[i], {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, vshape[i], NULL, 0}, b = a, h1 = a, h2 = a;
      b.data = ds[i], b.shape = sshape[i];
      h1.data = hv[i], h1.device.device_type = kDLCPU;
      h2.data = hsc[i], h2.shape = sshape[i], h2.device.device_type = kDLCPU;
      dvt[i] = a, dst[i] = b, hvt[i] = h1, hst[i] = h2;
      const int32_t layout = target ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT;
      dvals[i] = &dvt[i], dscales[i] = &dst[i], hvals[i] = &hvt[i], hscales[i] = &hst[i], layouts[i] = layout;
    }
    mxfp8_transfer_desc receive = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, T), host_receive;
    receive.parts_in = entries, receive.ndims = ndims, receive.shapes = shape_ptrs, receive.shards = shards;
    receive.formats = formats, receive.source_layouts = compact, receive.target_layouts = layouts;
    host_receive = receive;
    receive.bucket_in = &wd, receive.values = dvals, receive.scales = dscales;
    host_receive.bucket_in = &wh, host_receive.values = hvals, host_receive.scales = hscales;
    EXPECT(mxfp8_transfer(&receive, NULL) == MXFP8_OK, "gpu import target %d: %s", target, mxfp8_last_error());
    EXPECT(mxfp8_transfer(&host_receive, NULL) == MXFP8_OK, "host import target %d: %s", target, mxfp8_last_error());
    CUDA_OK(cudaDeviceSynchronize());
    for (int i = 0; i < T; ++i) {
      uint8_t *gv = download(&dvt[i], (size_t)vbytes[i]), *gsc = download(&dst[i], (size_t)sbytes[i]);
      EXPECT(memcmp(gv, hv[i], (size_t)vbytes[i]) == 0, "target %d tensor %d: imported values differ", target, i);
      EXPECT(memcmp(gsc, hsc[i], (size_t)sbytes[i]) == 0, "target %d tensor %d: imported scales differ", target, i);
      free(gv), free(gsc), free(hv[i]), free(hsc[i]);
      cudaFree(dv[i]), cudaFree(ds[i]);
    }
  }
  cudaFree(whole_d);
  free(whole_h);
  for (int i = 0; i < T; ++i) {
    mxfp8_tensor_release(ht[i]);
    mxfp8_tensor_release(gt[i]);
    CUDA_OK(cudaDeviceSynchronize());
    gpu_tensor_free(gd[i]);
    gpu_tensor_free(gs[i]);
    test_tensor_free(hd[i]);
    test_tensor_free(hs[i]);
    free(s[i]);
  }
}

static void CUDART_CB sleep_a_while(void *arg) {
  (void)arg;
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

static void test_export_runs_on_the_given_stream_after_an_event_wait(void **state) {
  (void)state;
  REQUIRE_GPU();
  /* The writer stream overwrites the swizzled scales after a 50 ms host delay; the export stream waits
   * on the writer's event. A kernel on any other stream would read the old scales. */
  uint64_t rng = 77;
  test_tensor *hd, *hs;
  int64_t r, c;
  uint8_t *s = make_host_tensor(4096, 4096, 2, 0, &rng, &hd, &hs, &r, &c);
  gpu_tensor *gd = upload(hd, 0), *gs = upload(hs, 0);
  CUDA_OK(cudaMemset(gs->device_alloc, 0x11, hs->bytes)); /* stale contents */
  uint8_t *pinned;
  CUDA_OK(cudaMallocHost((void **)&pinned, hs->bytes));
  memcpy(pinned, hs->buffer, hs->bytes);
  cudaStream_t writer, exporter;
  cudaEvent_t written;
  CUDA_OK(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&exporter, cudaStreamNonBlocking));
  CUDA_OK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
  mxfp8_tensor *gt = create_on(&gd->managed, &gs->managed, 2, 0);
  CUDA_OK(cudaLaunchHostFunc(writer, sleep_a_while, NULL));
  CUDA_OK(cudaMemcpyAsync(gs->device_alloc, pinned, hs->bytes, cudaMemcpyHostToDevice, writer));
  CUDA_OK(cudaEventRecord(written, writer));
  CUDA_OK(cudaStreamWaitEvent(exporter, written, 0));
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.stream = exporter;
  DLManagedTensorVersioned *scales = NULL;
  assert_int_equal(mxfp8_export_components(gt, &o, NULL, &scales), MXFP8_OK);
  CUDA_OK(cudaStreamSynchronize(exporter));
  uint8_t *got = download(&scales->dl_tensor, (size_t)(r * c));
  assert_memory_equal(got, s, (size_t)(r * c));
  release_managed(scales); /* freed on `exporter`, which is still alive */
  CUDA_OK(cudaStreamSynchronize(exporter));
  mxfp8_tensor_release(gt);
  cudaStreamDestroy(writer);
  cudaStreamDestroy(exporter);
  cudaEventDestroy(written);
  cudaFreeHost(pinned);
  free(got);
  free(s);
  gpu_tensor_free(gd);
  gpu_tensor_free(gs);
  test_tensor_free(hd);
  test_tensor_free(hs);
}

static void test_batched_export_equals_one_by_one(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { N = 600 }; /* more than one launch's worth of jobs */
  uint64_t rng = 31337;
  test_tensor *hd[N], *hs[N];
  gpu_tensor *gd[N], *gs[N];
  mxfp8_tensor *t[N];
  uint8_t *s[N];
  int64_t offsets[N + 1];
  int direction_of[N];
  offsets[0] = 0;
  for (int i = 0; i < N; ++i) {
    int64_t r, c;
    const int64_t rows = 1 + (int64_t)(rng_next(&rng) % 300), k = 1 + (int64_t)(rng_next(&rng) % 600);
    const int storage = (int)(rng_next(&rng) % 3), columnwise = (int)(rng_next(&rng) % 2);
    s[i] = make_host_tensor(rows, k, storage, columnwise, &rng, &hd[i], &hs[i], &r, &c);
    gd[i] = upload(hd[i], 0);
    gs[i] = upload(hs[i], 0);
    t[i] = create_on(&gd[i]->managed, &gs[i]->managed, storage, columnwise);
    offsets[i + 1] = offsets[i] + r * c;
    direction_of[i] = columnwise;
  }
  /* Columnwise and rowwise tensors go in two batches (the direction is per batch). */
  uint8_t *bucket;
  CUDA_OK(cudaMalloc((void **)&bucket, (size_t)offsets[N]));
  CUDA_OK(cudaMemset(bucket, POISON, (size_t)offsets[N]));
  for (int columnwise = 0; columnwise < 2; ++columnwise) {
    const mxfp8_tensor *batch_tensors[N];
    DLTensor dst_tensors[N];
    DLTensor *dst[N];
    int64_t dst_shapes[N];
    size_t n = 0;
    for (int i = 0; i < N; ++i) {
      if (direction_of[i] != columnwise) continue;
      dst_shapes[n] = offsets[i + 1] - offsets[i];
      memset(&dst_tensors[n], 0, sizeof dst_tensors[n]);
      dst_tensors[n].data = bucket;
      dst_tensors[n].byte_offset = (uint64_t)offsets[i];
      dst_tensors[n].device.device_type = kDLCUDA;
      dst_tensors[n].ndim = 1;
      dst_tensors[n].shape = &dst_shapes[n];
      dst_tensors[n].dtype.code = kDLUInt;
      dst_tensors[n].dtype.bits = 8;
      dst_tensors[n].dtype.lanes = 1;
      dst[n] = &dst_tensors[n];
      batch_tensors[n] = t[i];
      ++n;
    }
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = columnwise;
    EXPECT(mxfp8_export_scales_batched(batch_tensors, dst, n, &o) == MXFP8_OK, "batched: %s", mxfp8_last_error());
  }
  CUDA_OK(cudaDeviceSynchronize());
  uint8_t *all = malloc((size_t)offsets[N]);
  CUDA_OK(cudaMemcpy(all, bucket, (size_t)offsets[N], cudaMemcpyDeviceToHost));
  for (int i = 0; i < N; ++i)
    EXPECT(memcmp(all + offsets[i], s[i], (size_t)(offsets[i + 1] - offsets[i])) == 0, "tensor %d differs", i);
  free(all);
  cudaFree(bucket);
  for (int i = 0; i < N; ++i) {
    mxfp8_tensor_release(t[i]);
    gpu_tensor_free(gd[i]);
    gpu_tensor_free(gs[i]);
    test_tensor_free(hd[i]);
    test_tensor_free(hs[i]);
    free(s[i]);
  }
}

static void test_large_batch_takes_the_wide_chunk_path_correctly(void **state) {
  (void)state;
  REQUIRE_GPU();
  /* 40 weights of (8192, 8352): 5120 wide chunks, enough for the kernel's wide-chunk variant (the
   * whole-model case). Their values share one device buffer: a scales export never reads values. */
  enum { N = 40 };
  const int64_t rows = 8192, k = 8352, c = ref_ceil_div(k, 32), cp = ref_round_up(c, 4);
  uint64_t rng = 4242;
  uint8_t *d_values, *bucket, *swz_host = malloc((size_t)(rows * cp)), *s_host[N];
  uint8_t *d_swz[N];
  CUDA_OK(cudaMalloc((void **)&d_values, (size_t)(rows * k)));
  CUDA_OK(cudaMalloc((void **)&bucket, (size_t)(N * rows * c)));
  CUDA_OK(cudaMemset(bucket, POISON, (size_t)(N * rows * c)));
  int64_t vshape[2] = {rows, k}, sshape[2] = {rows, cp}, dshape[1] = {rows * c};
  DLManagedTensorVersioned data[N], scales[N];
  DLTensor dst[N];
  DLTensor *dst_ptrs[N];
  const mxfp8_tensor *tensors[N];
  for (int i = 0; i < N; ++i) {
    s_host[i] = malloc((size_t)(rows * c));
    fill_random_scales(s_host[i], (size_t)(rows * c), &rng);
    memset(swz_host, POISON, (size_t)(rows * cp));
    for (int64_t y = 0; y < rows; ++y)
      for (int64_t x = 0; x < c; ++x) swz_host[ref_swizzled_index(y, x, cp)] = s_host[i][y * c + x];
    CUDA_OK(cudaMalloc((void **)&d_swz[i], (size_t)(rows * cp)));
    CUDA_OK(cudaMemcpy(d_swz[i], swz_host, (size_t)(rows * cp), cudaMemcpyHostToDevice));
    memset(&data[i], 0, sizeof data[i]);
    data[i].version.major = DLPACK_MAJOR_VERSION;
    data[i].version.minor = DLPACK_MINOR_VERSION;
    data[i].dl_tensor = (DLTensor){d_values, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, vshape, NULL, 0};
    scales[i] = data[i];
    scales[i].dl_tensor.data = d_swz[i];
    scales[i].dl_tensor.shape = sshape;
    tensors[i] = create_on(&data[i], &scales[i], 2, 0);
    dst[i] = (DLTensor){bucket, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, dshape, NULL, (uint64_t)(i * rows * c)};
    dst_ptrs[i] = &dst[i];
  }
  EXPECT(mxfp8_export_scales_batched(tensors, dst_ptrs, N, NULL) == MXFP8_OK, "batched: %s", mxfp8_last_error());
  uint8_t *got = malloc((size_t)(rows * c));
  for (int i = 0; i < N; ++i) {
    CUDA_OK(cudaMemcpy(got, bucket + i * rows * c, (size_t)(rows * c), cudaMemcpyDeviceToHost));
    EXPECT(memcmp(got, s_host[i], (size_t)(rows * c)) == 0, "weight %d differs", i);
  }
  for (int i = 0; i < N; ++i) {
    mxfp8_tensor_release((mxfp8_tensor *)tensors[i]);
    cudaFree(d_swz[i]);
    free(s_host[i]);
  }
  cudaFree(d_values);
  cudaFree(bucket);
  free(got);
  free(swz_host);
}

/* Host tensor -> same tensor in device memory (its deleters count on the GPU copies). */
static mxfp8_tensor *to_gpu(const test_tensor *data, const test_tensor *scales, const mxfp8_tensor_desc *host_desc,
                            int columnwise, gpu_tensor **gd, gpu_tensor **gs) {
  *gd = upload(data, 0);
  *gs = upload(scales, 0);
  mxfp8_tensor_desc desc = *host_desc;
  desc.rowwise_data = desc.rowwise_scale_inv = desc.columnwise_data = desc.columnwise_scale_inv = NULL;
  if (columnwise) {
    desc.columnwise_data = &(*gd)->managed;
    desc.columnwise_scale_inv = &(*gs)->managed;
  } else {
    desc.rowwise_data = &(*gd)->managed;
    desc.rowwise_scale_inv = &(*gs)->managed;
  }
  mxfp8_tensor *t = NULL;
  EXPECT(mxfp8_tensor_create(&desc, &t) == MXFP8_OK, "create: %s", mxfp8_last_error());
  return t;
}

static void test_gpu_block_scales_equal_host_and_report_the_same_disagreement(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 77;
  for (int columnwise = 0; columnwise < 2; ++columnwise)
    for (int swizzled = 0; swizzled < 2; ++swizzled) {
      const int64_t rows = 257, k = 300, mb = ref_ceil_div(rows, 32), cb = ref_ceil_div(k, 32);
      const int64_t r = columnwise ? mb : rows, c = columnwise ? k : cb;
      const int64_t shape[2] = {rows, k};
      const int64_t bshape[2] = {columnwise ? ref_round_up(r, 4) : ref_round_up(r, 128),
                                 columnwise ? ref_round_up(c, 128) : ref_round_up(c, 4)};
      test_tensor *data = test_tensor_new(2, shape, kDLUInt, 1), *buf = test_tensor_new(2, bshape, kDLUInt, 1);
      uint8_t b[9 * 10];
      fill_random_scales(b, sizeof b, &rng);
      for (int64_t y = 0; y < r; ++y)
        for (int64_t x = 0; x < c; ++x) {
          size_t at = (size_t)(y * bshape[1] + x);
          if (swizzled) at = columnwise ? ref_swizzled_index(x, y, ref_round_up(r, 4)) : ref_swizzled_index(y, x, ref_round_up(c, 4));
          buf->buffer[at] = columnwise ? b[y * cb + x / 32] : b[(y / 32) * cb + x];
        }
      mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
      desc.block = MXFP8_BLOCK_32X32;
      desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
      gpu_tensor *gd, *gs;
      mxfp8_tensor *t = to_gpu(data, buf, &desc, columnwise, &gd, &gs);
      mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
      o.direction = columnwise;
      o.scales_granularity = MXFP8_SCALES_PER_32X32;
      o.allocator = poisoned_device_allocator;
      DLManagedTensorVersioned *scales = NULL;
      EXPECT(mxfp8_export_components(t, &o, NULL, &scales) == MXFP8_OK, "col %d swz %d: %s", columnwise, swizzled,
             mxfp8_last_error());
      uint8_t *got = download(&scales->dl_tensor, (size_t)(mb * cb));
      EXPECT(memcmp(got, b, (size_t)(mb * cb)) == 0, "col %d swz %d: block scales differ", columnwise, swizzled);
      release_managed(scales);
      free(got);
      mxfp8_tensor_release(t);
      gpu_tensor_free(gd);
      gpu_tensor_free(gs);
      /* one stored scale breaks its block: the GPU names the same scale as the host */
      const int64_t y = columnwise ? 3 : 70, x = columnwise ? 101 : 5;
      size_t at = (size_t)(y * bshape[1] + x);
      if (swizzled) at = columnwise ? ref_swizzled_index(x, y, ref_round_up(r, 4)) : ref_swizzled_index(y, x, ref_round_up(c, 4));
      buf->buffer[at] ^= 1;
      t = to_gpu(data, buf, &desc, columnwise, &gd, &gs);
      EXPECT(mxfp8_export_components(t, &o, NULL, &scales) == MXFP8_ERROR_INVALID_ARGUMENT, "disagreement accepted");
      char wanted[64];
      snprintf(wanted, sizeof wanted, "scale (%lld, %lld) differs", (long long)y, (long long)x);
      assert_last_error_contains(wanted);
      mxfp8_tensor_release(t);
      gpu_tensor_free(gd);
      gpu_tensor_free(gs);
      test_tensor_free(data);
      test_tensor_free(buf);
    }
}

/* A grouped tensor of E experts (n, k) with swizzled scales, the flat scale buffer `offset` bytes into its
 * allocation and its padding random (so that a kernel copying padding rows or columns would be seen),
 * exported stacked into a poisoned buffer: the scales must equal the matrices the buffer was built from
 * by the swizzle formula. */
static void check_grouped_stacked(int E, int64_t n, int64_t k, uint64_t offset, uint64_t seed) {
  const int64_t c = ref_ceil_div(k, 32), rp = ref_round_up(n, 128), cp = ref_round_up(c, 4);
  uint64_t rng = seed;
  const int64_t vshape[2] = {E * n, k}, sshape[1] = {E * rp * cp};
  test_tensor *data = test_tensor_new(2, vshape, kDLUInt, 1), *flat = test_tensor_new(1, sshape, kDLUInt, 1);
  uint8_t *s = malloc((size_t)(E * n * c));
  fill_random_scales(s, (size_t)(E * n * c), &rng);
  fill_random(flat->buffer, flat->bytes, &rng);
  for (int e = 0; e < E; ++e)
    for (int64_t y = 0; y < n; ++y)
      for (int64_t x = 0; x < c; ++x) flat->buffer[e * rp * cp + (int64_t)ref_swizzled_index(y, x, cp)] = s[(e * n + y) * c + x];
  gpu_tensor *gd = upload(data, 0), *gs = upload(flat, offset);
  mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.num_experts = E;
  desc.cols = k;
  desc.uniform_rows = n;
  desc.data = &gd->managed;
  desc.scale_inv = &gs->managed;
  mxfp8_grouped_tensor *g = NULL;
  EXPECT(mxfp8_grouped_tensor_create(&desc, &g) == MXFP8_OK, "grouped: %s", mxfp8_last_error());
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = poisoned_device_allocator;
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  EXPECT(mxfp8_grouped_export(g, NULL, 0, &o, &values, &scales) == MXFP8_OK, "stacked: %s", mxfp8_last_error());
  EXPECT(values->dl_tensor.data == gd->device_alloc && values->dl_tensor.shape[0] == E, "values [E, N, K] view");
  uint8_t *got = download(&scales->dl_tensor, (size_t)(E * n * c));
  for (int64_t i = 0; i < E * n * c; ++i)
    if (got[i] != s[i]) {
      EXPECT(0, "%d experts (%lld, %lld), offset %d: expert %lld scale (%lld, %lld) is %d, expected %d", E, (long long)n,
             (long long)k, (int)offset, (long long)(i / (n * c)), (long long)(i / c % n), (long long)(i % c), got[i], s[i]);
      break;
    }
  release_managed(values);
  release_managed(scales);
  mxfp8_grouped_tensor_release(g);
  EXPECT(gd->deleter_calls == 1 && gs->deleter_calls == 1, "grouped deleters");
  free(got);
  free(s);
  gpu_tensor_free(gd);
  gpu_tensor_free(gs);
  test_tensor_free(data);
  test_tensor_free(flat);
}

static void test_gpu_grouped_stacked_equals_reference(void **state) {
  (void)state;
  REQUIRE_GPU();
  check_grouped_stacked(16, 300, 200, 0, 78);
}

/* Experts with narrow scale rows take the kernel's "direct" chunks (whole tile rows, as many as fit in a
 * chunk: core/direct_chunk.hpp), one batched call for all experts. The shapes cover tile rows per chunk
 * that do and do not divide an expert's tile rows (a partial last chunk), partial last tile rows, odd
 * and even tile columns, a partial last tile column (k not a multiple of 128: words stored one by one),
 * more than one launch of jobs (> 300 experts), an unaligned scale buffer (staged byte by byte) and, with
 * enough chunks, the wide chunk width. */
static void test_gpu_grouped_narrow_experts_equal_reference(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const struct { int E; int64_t n, k; uint64_t offset; } cases[] = {
      {40, 701, 768, 0},   /* the MoE down projection's 24 scales (6 tiles): 5 tile rows a chunk, 6 per expert;
                              odd experts start 8 bytes off a 16-byte boundary (word stores) */
      {40, 4096, 768, 0},  /* the benchmark's shape: 32 tile rows = 6 full chunks + 2 rows */
      {33, 300, 2048, 0},  /* 64 scales = 16 tiles (2 tile rows a chunk), 3 tile rows */
      {24, 1000, 1152, 0}, /* 36 scales = 9 tiles, odd: 3 tile rows a chunk, 8 tile rows */
      {24, 1000, 1500, 0}, /* 47 scales: a partial last tile column, 12 tiles */
      {24, 1000, 640, 0},  /* 20 scales = 5 tiles, odd: 6 tile rows a chunk, 8 tile rows */
      {20, 257, 96, 0},    /* 3 scales: one partial tile column, 32 tile rows a chunk */
      {64, 129, 32, 0},    /* 1 scale: 2 tile rows, the second with one row */
      {20, 650, 1536, 0},  /* 48 scales = 12 tiles, a multiple of 4 */
      {24, 700, 768, 1},   /* unaligned scale buffer */
      {310, 130, 320, 0},  /* 10 scales, 310 experts: two launches */
      {1200, 300, 3072, 0}, /* 96 scales = 24 tiles: wide chunks (2,400 of them, 2 tile rows each) */
  };
  const int count = (int)(sizeof cases / sizeof cases[0]);
  for (int i = 0; i < count; ++i) {
    if (getenv("MXFP8_TEST_QUICK") && cases[i].E > 300) continue;
    check_grouped_stacked(cases[i].E, cases[i].n, cases[i].k, cases[i].offset, 2100 + (uint64_t)i);
  }
}

static void test_gpu_bucket_equals_host_bucket(void **state) {
  (void)state;
  REQUIRE_GPU();
  /* 40 tensors of random shapes and layouts, values and scales into one poisoned device bucket */
  enum { T = 40 };
  uint64_t rng = 3030;
  test_tensor *hd[T], *hs[T];
  gpu_tensor *gd[T], *gs[T];
  mxfp8_tensor *ht[T], *gt[T];
  uint8_t *s[T];
  for (int i = 0; i < T; ++i) {
    int64_t r, c;
    const int64_t rows = 1 + (int64_t)(rng_next(&rng) % 600), k = 1 + (int64_t)(rng_next(&rng) % 5000);
    const int storage = (int)(rng_next(&rng) % 3);
    s[i] = make_host_tensor(rows, k, storage, 0, &rng, &hd[i], &hs[i], &r, &c);
    ht[i] = create_on(&hd[i]->managed, &hs[i]->managed, storage, 0);
    gd[i] = upload(hd[i], 0);
    gs[i] = upload(hs[i], 0);
    gt[i] = create_on(&gd[i]->managed, &gs[i]->managed, storage, 0);
  }
  mxfp8_transfer_desc gpu = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, T), host = gpu;
  gpu.tensors = (const mxfp8_tensor *const *)gt;
  host.tensors = (const mxfp8_tensor *const *)ht;
  mxfp8_bucket_part entries[T], host_entries[T];
  uint64_t total = 0, host_total = 0;
  assert_int_equal(mxfp8_bucket_parts(&gpu, 256, entries, &total), MXFP8_OK);
  assert_int_equal(mxfp8_bucket_parts(&host, 256, host_entries, &host_total), MXFP8_OK);
  assert_int_equal(total, host_total);
  uint8_t *d_bucket, *host_bucket = malloc(total), *got = malloc(total);
  CUDA_OK(cudaMalloc((void **)&d_bucket, total));
  CUDA_OK(cudaMemset(d_bucket, POISON, total));
  memset(host_bucket, POISON, total);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor db = {d_bucket, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  DLTensor hb = {host_bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  gpu.bucket_out = &db, gpu.parts_out = entries;
  host.bucket_out = &hb, host.parts_out = host_entries;
  EXPECT(mxfp8_transfer(&gpu, NULL) == MXFP8_OK, "gpu: %s", mxfp8_last_error());
  EXPECT(mxfp8_transfer(&host, NULL) == MXFP8_OK, "host: %s", mxfp8_last_error());
  CUDA_OK(cudaMemcpy(got, d_bucket, total, cudaMemcpyDeviceToHost));
  EXPECT(memcmp(got, host_bucket, total) == 0, "the GPU bucket differs from the host bucket");
  for (int i = 0; i < T; ++i) {
    EXPECT(memcmp(got + entries[i].values_offset, hd[i]->buffer, hd[i]->bytes) == 0, "values %d", i);
    EXPECT(memcmp(got + entries[i].scales_offset, s[i], entries[i].scales_bytes) == 0, "scales %d", i);
    mxfp8_tensor_release(ht[i]);
    mxfp8_tensor_release(gt[i]);
    gpu_tensor_free(gd[i]);
    gpu_tensor_free(gs[i]);
    test_tensor_free(hd[i]);
    test_tensor_free(hs[i]);
    free(s[i]);
  }
  cudaFree(d_bucket);
  free(host_bucket);
  free(got);
}

/* mxfp8_swizzle_scales and back, against the layout's formula, on the shapes and strides that take each
 * of the swizzle kernel's load and store paths: 16-byte row vectors (rows whose stride is a multiple of
 * 16, whole quads of tiles), 32-bit words (a partial last quad, rows 4-byte aligned), bytes (unaligned or
 * strided rows, a transposed view), unaligned swizzled output (byte stores), several tile rows in one
 * warp (3 quads a tile row), and partial tiles (rows past the matrix are zero padding); the round trip
 * back takes the unswizzle's paths for the same shapes (in registers from 17 tiles a row). */
static void test_gpu_swizzle_pair_matches_formula(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 5150;
  /* rows, cols, row stride (0: dense), transposed (col stride = rows' extent, row stride 1),
   * byte offset of the compact source, byte offset of the swizzled output */
  static const struct { int64_t r, c, row_stride, transposed, src_off, swz_off; } cases[] = {
      {1, 1, 0, 0, 0, 0},       {100, 2, 0, 0, 0, 0},  {257, 33, 0, 0, 0, 0},   {300, 7, 0, 0, 0, 0},
      {4096, 256, 0, 0, 0, 0},  {31, 129, 0, 0, 0, 0}, {1000, 48, 0, 0, 0, 0},  {300, 40, 64, 0, 0, 0},
      {129, 64, 80, 0, 4, 0},   {200, 37, 0, 0, 1, 0}, {130, 20, 0, 1, 0, 0},   {260, 32, 0, 0, 0, 3},
      /* and back through the unswizzle's in-register tiny chunks: 16-byte rows with a partial last quad (40
       * tiles), 4-byte rows with a partial last quad (21 tiles), byte rows */
      {200, 160, 0, 0, 0, 0},   {260, 84, 0, 0, 0, 0}, {130, 130, 0, 0, 0, 0},
      /* Every case above is at most 2048 tiles, a tiny launch (blocks of a warp) both ways ({4096, 256} exactly
       * 2048). Past it (256-thread blocks; narrow in-register chunks back): 33 x 64 tiles, 65 x 75 (4-byte
       * rows), a transposed source (byte loads) and an unaligned source and output (byte loads and stores),
       * 33 x 65 tiles each; and tiny with a partial last quad both ways (2 x 5 tiles) */
      {4097, 256, 0, 0, 0, 0},  {8200, 300, 0, 0, 0, 0}, {4200, 260, 0, 1, 0, 0},  {4200, 257, 0, 0, 1, 3},
      {130, 18, 0, 0, 0, 0},
  };
  for (size_t n = 0; n < sizeof cases / sizeof cases[0]; ++n) {
    const int64_t r = cases[n].r, c = cases[n].c, rp = ref_round_up(r, 128), cp = ref_round_up(c, 4);
    const int64_t rs = cases[n].transposed ? 1 : cases[n].row_stride ? cases[n].row_stride : c;
    const int64_t cs = cases[n].transposed ? r : 1;
    const int64_t src_off = cases[n].src_off, swz_off = cases[n].swz_off;
    const int64_t src_bytes = src_off + (r - 1) * rs + (c - 1) * cs + 1;
    uint8_t *src = malloc((size_t)src_bytes), *s = malloc((size_t)(r * c));
    uint8_t *expected = calloc((size_t)(rp * cp), 1), *got = malloc((size_t)(rp * cp));
    fill_random_scales(src, (size_t)src_bytes, &rng);
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) s[y * c + x] = src[src_off + y * rs + x * cs];
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) expected[ref_swizzled_index(y, x, cp)] = s[y * c + x];
    uint8_t *d_src, *d_swz, *d_back;
    CUDA_OK(cudaMalloc((void **)&d_src, (size_t)src_bytes));
    CUDA_OK(cudaMalloc((void **)&d_swz, (size_t)(swz_off + rp * cp)));
    CUDA_OK(cudaMalloc((void **)&d_back, (size_t)(r * c)));
    CUDA_OK(cudaMemcpy(d_src, src, (size_t)src_bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_swz, POISON, (size_t)(swz_off + rp * cp)));
    CUDA_OK(cudaMemset(d_back, POISON, (size_t)(r * c)));
    int64_t cshape[2] = {r, c}, cstrides[2] = {rs, cs}, sshape[1] = {rp * cp};
    DLTensor compact = {d_src + src_off, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, cshape, cstrides, 0};
    DLTensor swizzled = {d_swz + swz_off, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
    DLTensor back = {d_back, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, cshape, NULL, 0};
    EXPECT(mxfp8_swizzle_scales(&compact, &swizzled, NULL) == MXFP8_OK, "case %zu: %s", n, mxfp8_last_error());
    assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &back, NULL), MXFP8_OK);
    CUDA_OK(cudaMemcpy(got, d_swz + swz_off, (size_t)(rp * cp), cudaMemcpyDeviceToHost));
    EXPECT(memcmp(got, expected, (size_t)(rp * cp)) == 0, "%lld x %lld (case %zu): swizzled bytes (padding must be 0)",
           (long long)r, (long long)c, n);
    if (swz_off) {
      uint8_t before[16];
      CUDA_OK(cudaMemcpy(before, d_swz, (size_t)swz_off, cudaMemcpyDeviceToHost));
      for (int64_t i = 0; i < swz_off; ++i) EXPECT(before[i] == POISON, "case %zu: a byte before the output written", n);
    }
    CUDA_OK(cudaMemcpy(got, d_back, (size_t)(r * c), cudaMemcpyDeviceToHost));
    EXPECT(memcmp(got, s, (size_t)(r * c)) == 0, "%lld x %lld (case %zu): round trip", (long long)r, (long long)c, n);
    cudaFree(d_src);
    cudaFree(d_swz);
    cudaFree(d_back);
    free(src);
    free(s);
    free(expected);
    free(got);
  }
}

/* mxfp8_unswizzle_scales against the layout's formula on sizes that take each turn of the kernel's chunk
 * loop (by default in registers, one chunk a block; MXFP8_UNSWIZZLE_PATH=smem runs the same cases through
 * shared memory's persistent loop, ctest's gpu_unswizzle_smem): a narrow launch whose blocks take 3 or 4
 * chunks each in that loop (1798 chunks over the ~528 resident blocks of an H100) with a partial last
 * chunk of one tile; a wide launch (4200 chunks of 64 tiles, at least 8 a resident block, 15 or 16 a
 * block) with a partial last chunk of 2 tiles; partial last tile rows; 16-byte rows (row stride 144, 272),
 * 4-byte rows, a transposed output (strides (1, R): byte stores), blocks of one chunk each, an empty
 * matrix, swizzled scales at a byte offset: 16 (every path's vector loads) and 4 (every path falls back
 * to the shared-memory kernel's byte loads), and the sizes either side of the tiny launch.
 * The swizzled input is random bytes (padding included, which must not be copied); the output is
 * poisoned, so a byte written out of place or not at all shows. */
static void test_gpu_unswizzle_chunk_loops_match_formula(void **state) {
  (void)state;
  REQUIRE_GPU();
  uint64_t rng = 36036;
  /* rows, cols, row stride of the output (0: dense), transposed output, byte offset of the swizzled scales */
  static const struct { int64_t r, c, row_stride, transposed, offset; } cases[] = {
      {115001, 132, 144, 0, 0}, /* narrow: 899 tile rows x (32 + 1) tiles = 1798 chunks */
      {268790, 264, 272, 0, 0}, /* wide: 2100 tile rows x (64 + 2) tiles = 4200 chunks */
      {9000, 140, 0, 1, 0},     /* transposed, 35 tiles: 71 tile rows x (32 + 3) narrow chunks */
      {3000, 140, 0, 1, 0},     /* the same in tiny chunks (840 tiles) */
      {300, 200, 0, 0, 0},      /* 50 tiles, 4-byte rows: tiny chunks */
      {0, 140, 0, 0, 0},        /* empty: no chunk, nothing written */
      {9000, 140, 0, 0, 16},    /* 16-byte aligned base, not 512: narrow chunks */
      {3000, 140, 0, 0, 16},    /* the same, tiny */
      {3000, 140, 0, 0, 4},     /* unaligned base: byte loads */
      /* either side of the tiny launch (at most 2048 tiles, one quad a warp-sized block): 32 x 64 tiles in
       * 512 tiny chunks; 33 x 64 in narrow ones; 2 x 5 tiles (a quad and a partial one); 2 x 3 (one partial
       * quad); 2 x 2 (direct at the tiny width, so the shared-memory kernel's direct chunks) */
      {4096, 256, 0, 0, 0},     {4097, 256, 0, 0, 0},     {130, 18, 0, 0, 0},
      {130, 12, 0, 0, 0},       {130, 8, 0, 0, 0},
  };
  for (size_t n = 0; n < sizeof cases / sizeof cases[0]; ++n) {
    const int64_t r = cases[n].r, c = cases[n].c, rp = ref_round_up(r, 128), cp = ref_round_up(c, 4);
    const int64_t rs = cases[n].transposed ? 1 : cases[n].row_stride ? cases[n].row_stride : c;
    const int64_t cs = cases[n].transposed ? r : 1, off = cases[n].offset;
    /* the output buffer: the matrix's extent under its strides, at least one byte */
    const int64_t out_bytes = r == 0 ? 1 : (r - 1) * rs + (c - 1) * cs + 1;
    uint8_t *swz = malloc((size_t)(off + rp * cp + 1)), *expected = malloc((size_t)out_bytes), *got = malloc((size_t)out_bytes);
    fill_random_scales(swz, (size_t)(off + rp * cp + 1), &rng);
    memset(expected, POISON, (size_t)out_bytes);
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) expected[y * rs + x * cs] = swz[off + ref_swizzled_index(y, x, cp)];
    uint8_t *d_swz, *d_out;
    CUDA_OK(cudaMalloc((void **)&d_swz, (size_t)(off + rp * cp + 1)));
    CUDA_OK(cudaMalloc((void **)&d_out, (size_t)out_bytes));
    CUDA_OK(cudaMemcpy(d_swz, swz, (size_t)(off + rp * cp + 1), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_out, POISON, (size_t)out_bytes));
    int64_t cshape[2] = {r, c}, cstrides[2] = {rs, cs}, sshape[1] = {rp * cp};
    DLTensor swizzled = {d_swz, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, (uint64_t)off};
    DLTensor compact = {d_out, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, cshape, cstrides, 0};
    EXPECT(mxfp8_unswizzle_scales(&swizzled, &compact, NULL) == MXFP8_OK, "case %zu: %s", n, mxfp8_last_error());
    CUDA_OK(cudaMemcpy(got, d_out, (size_t)out_bytes, cudaMemcpyDeviceToHost));
    int64_t first_bad = -1;
    for (int64_t i = 0; i < out_bytes && first_bad < 0; ++i)
      if (got[i] != expected[i]) first_bad = i;
    EXPECT(first_bad < 0, "%lld x %lld (case %zu): byte %lld of the output is %d, expected %d", (long long)r,
           (long long)c, n, (long long)first_bad, first_bad < 0 ? 0 : got[first_bad], first_bad < 0 ? 0 : expected[first_bad]);
    cudaFree(d_swz);
    cudaFree(d_out);
    free(swz);
    free(expected);
    free(got);
  }
}

/* A prepared transfer of many tensors' scales (mxfp8_transfer_prepare) captured in a CUDA graph: every
 * replay writes the sources' scales as they are at that replay (new scales copied in between show), and a
 * run (mxfp8_plan_run) calls nothing that a global-mode capture refuses (no allocation, no
 * synchronization). */
static void test_prepared_export_replays_in_a_cuda_graph(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { N = 40 };
  uint64_t rng = 4242;
  test_tensor *hd[N], *hs[N];
  gpu_tensor *gd[N], *gs[N];
  mxfp8_tensor *t[N];
  uint8_t *s[N];
  int64_t offsets[N + 1], dst_shapes[N], rs[N], cs[N];
  DLTensor dst_tensors[N];
  DLTensor *dst[N];
  offsets[0] = 0;
  for (int i = 0; i < N; ++i) {
    const int64_t rows = 1 + (int64_t)(rng_next(&rng) % 300), k = 1 + (int64_t)(rng_next(&rng) % 600);
    s[i] = make_host_tensor(rows, k, /*storage=*/2, /*columnwise=*/0, &rng, &hd[i], &hs[i], &rs[i], &cs[i]);
    gd[i] = upload(hd[i], 0);
    gs[i] = upload(hs[i], 0);
    t[i] = create_on(&gd[i]->managed, &gs[i]->managed, 2, 0);
    offsets[i + 1] = offsets[i] + rs[i] * cs[i];
  }
  uint8_t *out;
  CUDA_OK(cudaMalloc((void **)&out, (size_t)offsets[N]));
  for (int i = 0; i < N; ++i) {
    dst_shapes[i] = offsets[i + 1] - offsets[i];
    dst_tensors[i] = (DLTensor){out, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, &dst_shapes[i], NULL, (uint64_t)offsets[i]};
    dst[i] = &dst_tensors[i];
  }
  mxfp8_plan *plan = NULL;
  mxfp8_transfer_desc scales_only = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, N);
  scales_only.tensors = (const mxfp8_tensor *const *)t;
  scales_only.scales = dst;
  EXPECT(mxfp8_transfer_prepare(&scales_only, &plan) == MXFP8_OK, "prepare: %s", mxfp8_last_error());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const mxfp8_status st = mxfp8_plan_run(plan, stream);
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  EXPECT(st == MXFP8_OK, "run under capture: %s", mxfp8_last_error());
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  uint8_t *all = malloc((size_t)offsets[N]);
  for (int replay = 0; replay < 2; ++replay) {
    CUDA_OK(cudaMemset(out, POISON, (size_t)offsets[N]));
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaMemcpy(all, out, (size_t)offsets[N], cudaMemcpyDeviceToHost));
    for (int i = 0; i < N; ++i)
      EXPECT(memcmp(all + offsets[i], s[i], (size_t)(offsets[i + 1] - offsets[i])) == 0, "replay %d tensor %d", replay, i);
    /* The next step's scales, swizzled by the layout's formula into the same device buffers. */
    for (int i = 0; i < N; ++i) {
      const int64_t cp = ref_round_up(cs[i], 4);
      fill_random_scales(s[i], (size_t)(rs[i] * cs[i]), &rng);
      for (int64_t y = 0; y < rs[i]; ++y)
        for (int64_t x = 0; x < cs[i]; ++x) hs[i]->buffer[ref_swizzled_index(y, x, cp)] = s[i][y * cs[i] + x];
      CUDA_OK(cudaMemcpy(gs[i]->device_alloc, hs[i]->buffer, hs[i]->bytes, cudaMemcpyHostToDevice));
    }
  }
  free(all);
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
  mxfp8_plan_release(plan);
  cudaFree(out);
  for (int i = 0; i < N; ++i) {
    mxfp8_tensor_release(t[i]);
    gpu_tensor_free(gd[i]);
    gpu_tensor_free(gs[i]);
    test_tensor_free(hd[i]);
    test_tensor_free(hs[i]);
    free(s[i]);
  }
}

#else /* built without CUDA */
static void test_gpu_export_equals_host_export_and_reference(void **state) { (void)state; REQUIRE_GPU(); }
static void test_export_runs_on_the_given_stream_after_an_event_wait(void **state) { (void)state; REQUIRE_GPU(); }
static void test_batched_export_equals_one_by_one(void **state) { (void)state; REQUIRE_GPU(); }
static void test_large_batch_takes_the_wide_chunk_path_correctly(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_block_scales_equal_host_and_report_the_same_disagreement(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_grouped_stacked_equals_reference(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_grouped_narrow_experts_equal_reference(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_bucket_equals_host_bucket(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_swizzle_pair_matches_formula(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_unswizzle_chunk_loops_match_formula(void **state) { (void)state; REQUIRE_GPU(); }
static void test_prepared_export_replays_in_a_cuda_graph(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_shard_equals_crop(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_shard_buckets_and_imports_equal_the_host(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_export_equals_host_export_and_reference),
      cmocka_unit_test(test_export_runs_on_the_given_stream_after_an_event_wait),
      cmocka_unit_test(test_batched_export_equals_one_by_one),
      cmocka_unit_test(test_large_batch_takes_the_wide_chunk_path_correctly),
      cmocka_unit_test(test_gpu_block_scales_equal_host_and_report_the_same_disagreement),
      cmocka_unit_test(test_gpu_grouped_stacked_equals_reference),
      cmocka_unit_test(test_gpu_grouped_narrow_experts_equal_reference),
      cmocka_unit_test(test_gpu_bucket_equals_host_bucket),
      cmocka_unit_test(test_gpu_swizzle_pair_matches_formula),
      cmocka_unit_test(test_gpu_unswizzle_chunk_loops_match_formula),
      cmocka_unit_test(test_prepared_export_replays_in_a_cuda_graph),
      cmocka_unit_test(test_gpu_shard_equals_crop),
      cmocka_unit_test(test_gpu_shard_buckets_and_imports_equal_the_host),
  };
  return cmocka_run_group_tests_name("CUDA path", tests, NULL, NULL);
}
