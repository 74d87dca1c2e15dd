/* The C side of bench/python_host_cost.py: the same receiver's transfer, timed from C, so that the Python
 * binding's overhead is the difference. `--layers` x `--experts` x 2 host tensors (w13 (96, 128), w2
 * (128, 64): Transformer Engine's storage, FP8 values and 128x4-swizzled scales) moved into their own
 * (values, scales) buffers with MXFP8_SCALE_LAYOUT_128X4 targets, as bench/refit_scale.py --case moe does
 * on a GPU. Per tensor, the median of --reps:
 *
 *   prepare    mxfp8_tensor_create of every source (what the binding does per source) +
 *              mxfp8_transfer_prepare + the handles released (the plan keeps its references)
 *   run        mxfp8_plan_run (host memory: the copies themselves)
 *   immediate  mxfp8_tensor_create of every source + mxfp8_transfer + the handles released
 *   batched    mxfp8_export_scales_batched of the first 256 sources' compact scales (an MoE layer's call),
 *              per call
 *
 * With --cuda (a build with CUDA) every buffer is device memory and each figure is the calling thread's
 * host time, launches enqueued and not waited for (bench_scales and bench/refit_scale.py time the GPU).
 *
 *   host_transfer [--layers 94] [--experts 16] [--reps 7] [--cuda]     (one JSON line on stdout) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mxfp8/mxfp8.h>

#ifdef MXFP8_BENCH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

enum { kMaxReps = 99 };

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void check(mxfp8_status s, const char *what) {
  if (s == MXFP8_OK) return;
  fprintf(stderr, "host_transfer: %s failed: %s\n", what, mxfp8_last_error());
  exit(1);
}

static int on_cuda = 0;

static void *allocate(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "host_transfer: out of memory\n");
    exit(1);
  }
  memset(p, 0x7F, bytes);
  if (!on_cuda) return p;
#ifdef MXFP8_BENCH_WITH_CUDA
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess || cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "host_transfer: CUDA allocation failed\n");
    exit(1);
  }
  free(p);
  return d;
#else
  return p;
#endif
}

/* Waits for what a --cuda run queued (outside the timed part). */
static void synchronize(void) {
#ifdef MXFP8_BENCH_WITH_CUDA
  if (on_cuda && cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "host_transfer: a queued transfer failed\n");
    exit(1);
  }
#endif
}

/* A host uint8 buffer as DLPack sees it: the tensor the library is handed (a managed one, with a deleter
 * that frees nothing: the buffers live for the whole run) or a plain DLTensor destination. */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[2];
} buffer;

static void no_delete(DLManagedTensorVersioned *self) { (void)self; }

static void describe(buffer *b, void *data, int ndim, int64_t d0, int64_t d1) {
  memset(b, 0, sizeof *b);
  b->shape[0] = d0;
  b->shape[1] = d1;
  b->managed.version.major = DLPACK_MAJOR_VERSION;
  b->managed.version.minor = DLPACK_MINOR_VERSION;
  b->managed.deleter = no_delete;
  DLTensor *t = &b->managed.dl_tensor;
  t->data = data;
  t->device.device_type = on_cuda ? kDLCUDA : kDLCPU;
  t->ndim = ndim;
  t->dtype.code = kDLUInt;
  t->dtype.bits = 8;
  t->dtype.lanes = 1;
  t->shape = b->shape;
}

static int64_t round_up(int64_t n, int64_t d) { return (n + d - 1) / d * d; }

typedef struct {
  size_t count;
  buffer *data, *scale_inv, *values, *scales;
  int64_t (*shapes)[2];
  mxfp8_tensor **handles;
  DLTensor **values_ptr, **scales_ptr;
  int32_t *layouts;
  mxfp8_transfer_desc desc;
} transfer;

static void create_handles(transfer *x) {
  for (size_t i = 0; i < x->count; ++i) {
    mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT_UNSET;
    d.format = MXFP8_FORMAT_E4M3;
    d.scale_layout = MXFP8_SCALE_LAYOUT_128X4;
    d.ndim = 2;
    d.shape = x->shapes[i];
    d.rowwise_data = &x->data[i].managed;
    d.rowwise_scale_inv = &x->scale_inv[i].managed;
    check(mxfp8_tensor_create(&d, &x->handles[i]), "mxfp8_tensor_create");
  }
}

static void release_handles(transfer *x) {
  for (size_t i = 0; i < x->count; ++i) mxfp8_tensor_release(x->handles[i]);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, compare_doubles);
  return t[n / 2];
}

int main(int argc, char **argv) {
  int layers = 94, experts = 16, reps = 7;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--cuda")) on_cuda = 1;
    else if (i + 1 < argc && !strcmp(argv[i], "--layers")) layers = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--experts")) experts = atoi(argv[++i]);
    else if (i + 1 < argc && !strcmp(argv[i], "--reps")) reps = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: host_transfer [--layers N] [--experts N] [--reps N] [--cuda]\n");
      return 2;
    }
  }
#ifndef MXFP8_BENCH_WITH_CUDA
  if (on_cuda) {
    fprintf(stderr, "host_transfer: --cuda needs a build with CUDA\n");
    return 2;
  }
#endif
  if (layers < 1 || experts < 1 || reps < 1 || reps > kMaxReps) {
    fprintf(stderr, "host_transfer: layers, experts >= 1; reps 1..%d\n", kMaxReps);
    return 2;
  }
  static const int64_t kShapes[2][2] = {{96, 128}, {128, 64}};
  transfer x;
  memset(&x, 0, sizeof x);
  x.count = (size_t)layers * (size_t)experts * 2;
  x.data = calloc(x.count, sizeof(buffer));
  x.scale_inv = calloc(x.count, sizeof(buffer));
  x.values = calloc(x.count, sizeof(buffer));
  x.scales = calloc(x.count, sizeof(buffer));
  x.shapes = calloc(x.count, sizeof *x.shapes);
  x.handles = calloc(x.count, sizeof *x.handles);
  x.values_ptr = calloc(x.count, sizeof *x.values_ptr);
  x.scales_ptr = calloc(x.count, sizeof *x.scales_ptr);
  x.layouts = calloc(x.count, sizeof *x.layouts);
  for (size_t i = 0; i < x.count; ++i) {
    const int64_t rows = kShapes[i % 2][0], cols = kShapes[i % 2][1];
    const int64_t scale_bytes = round_up(rows, 128) * round_up((cols + 31) / 32, 4);
    x.shapes[i][0] = rows;
    x.shapes[i][1] = cols;
    describe(&x.data[i], allocate((size_t)(rows * cols)), 2, rows, cols);
    describe(&x.scale_inv[i], allocate((size_t)scale_bytes), 1, scale_bytes, 0);
    describe(&x.values[i], allocate((size_t)(rows * cols)), 2, rows, cols);
    describe(&x.scales[i], allocate((size_t)scale_bytes), 1, scale_bytes, 0);
    x.values_ptr[i] = &x.values[i].managed.dl_tensor;
    x.scales_ptr[i] = &x.scales[i].managed.dl_tensor;
    x.layouts[i] = MXFP8_SCALE_LAYOUT_128X4;
  }
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = MXFP8_TRANSFER_FROM_TENSORS;
  d.destination = MXFP8_TRANSFER_TO_BUFFERS;
  d.count = x.count;
  d.tensors = (const mxfp8_tensor *const *)x.handles;
  d.values = x.values_ptr;
  d.scales = x.scales_ptr;
  d.target_layouts = x.layouts;

  /* The batched export's destinations: the first `batched` sources' compact scales, back to back. */
  const size_t batched = x.count < 256 ? x.count : 256;
  int64_t *compact_shapes = calloc(batched, sizeof(int64_t));
  DLTensor *compact = calloc(batched, sizeof(DLTensor)), **compact_ptr = calloc(batched, sizeof(DLTensor *));
  for (size_t i = 0; i < batched; ++i) {
    compact_shapes[i] = x.shapes[i][0] * ((x.shapes[i][1] + 31) / 32);
    compact[i] = x.scales[i].managed.dl_tensor;  /* its memory: the sources' targets, reused */
    compact[i].ndim = 1;
    compact[i].shape = &compact_shapes[i];
    compact_ptr[i] = &compact[i];
  }

  double prepare[kMaxReps + 1], run[kMaxReps + 1], immediate[kMaxReps + 1], batch[kMaxReps + 1];
  mxfp8_plan *plan = NULL;
  for (int r = 0; r <= reps; ++r) { /* r == 0: the warm-up, not counted */
    double t0 = now_us();
    create_handles(&x);
    mxfp8_plan *p = NULL;
    check(mxfp8_transfer_prepare(&d, &p), "mxfp8_transfer_prepare");
    release_handles(&x);
    prepare[r] = (now_us() - t0) / (double)x.count;
    if (plan) mxfp8_plan_release(plan);
    plan = p;

    t0 = now_us();
    check(mxfp8_plan_run(plan, NULL), "mxfp8_plan_run");
    run[r] = (now_us() - t0) / (double)x.count;
    synchronize();

    t0 = now_us();
    create_handles(&x);
    check(mxfp8_transfer(&d, NULL), "mxfp8_transfer");
    release_handles(&x);
    immediate[r] = (now_us() - t0) / (double)x.count;
    synchronize();

    create_handles(&x);
    t0 = now_us();
    check(mxfp8_export_scales_batched((const mxfp8_tensor *const *)x.handles, compact_ptr, batched, NULL),
          "mxfp8_export_scales_batched");
    batch[r] = now_us() - t0;
    synchronize();
    release_handles(&x);
  }
  mxfp8_plan_release(plan);
  if (!on_cuda && memcmp(x.values[0].managed.dl_tensor.data, x.data[0].managed.dl_tensor.data, 96 * 128) != 0) {
    fprintf(stderr, "host_transfer: the transfer did not write the values\n");
    return 1;
  }
  printf("{\"memory\": \"%s\", \"tensors\": %zu, \"reps\": %d, \"prepare_us\": %.3f, \"run_us\": %.3f, "
         "\"immediate_us\": %.3f, \"batched_export\": {\"tensors\": %zu, \"call_us\": %.3f}}\n",
         on_cuda ? "cuda" : "host", x.count, reps, median(prepare + 1, reps), median(run + 1, reps),
         median(immediate + 1, reps), batched, median(batch + 1, reps));
  return 0;
}
