/* The host cost of a large transfer, from C: what mxfp8_tensor_create, mxfp8_transfer_prepare,
 * mxfp8_plan_run and the immediate mxfp8_transfer cost per tensor at the 235B-class refit's count (one EP-8
 * GPU's share of Qwen3-235B-A22B: 94 layers x 16 experts x 2 matrices = 3008 tensors, TE-swizzled scales into
 * CUTLASS 128x4 destinations, as bench/refit_scale.py --case moe runs it on the GPU).
 *
 * The tensors are small host matrices (every check of the library is per tensor, whatever its size), so
 * the figure is the library's own host work with no binding in between: bench/python_import_host.py times the
 * same transfer from Python, and the difference is the binding's. A run over host memory also copies the
 * bytes on this CPU; `run` is reported beside the others so that part can be subtracted. With --cuda (a
 * build with CUDA) every buffer is device memory and the figures are host time: what each call costs the
 * calling thread, its launches enqueued but not waited for (the GPU is not timed here; bench_scales and
 * bench/refit_scale.py time it).
 *
 *   transfer_host_cost [--tensors N] [--reps R] [--cuda]     (one JSON object on stdout)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mxfp8/mxfp8.h>

#ifdef MXFP8_BENCH_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

enum { kMaxReps = 100 };

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int compare_doubles(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *xs, int n) {
  qsort(xs, (size_t)n, sizeof(double), compare_doubles);
  return xs[n / 2];
}

static void check(mxfp8_status s, const char *what) {
  if (s == MXFP8_OK) return;
  fprintf(stderr, "transfer_host_cost: %s failed: %s\n", what, mxfp8_last_error());
  exit(1);
}

static void *allocate(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "transfer_host_cost: out of memory\n");
    exit(1);
  }
  return p;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

static int on_cuda = 0;
static DLDeviceType device_type(void) { return on_cuda ? kDLCUDA : kDLCPU; }

/* `bytes` filled from `host` (or with 0x5a when NULL), on the device the run uses. */
static void *buffer_on_device(const void *host, size_t bytes) {
  void *p = allocate(bytes);
  if (host) memcpy(p, host, bytes);
  else memset(p, 0x5a, bytes);
  if (!on_cuda) return p;
#ifdef MXFP8_BENCH_WITH_CUDA
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess || cudaMemcpy(d, p, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    fprintf(stderr, "transfer_host_cost: CUDA allocation failed\n");
    exit(1);
  }
  free(p);
  return d;
#else
  return p;
#endif
}

static void synchronize(void) {
#ifdef MXFP8_BENCH_WITH_CUDA
  if (on_cuda && cudaDeviceSynchronize() != cudaSuccess) {
    fprintf(stderr, "transfer_host_cost: a queued run failed\n");
    exit(1);
  }
#endif
}

/* A DLManagedTensorVersioned over memory this program owns (freed at exit, not by the deleter). */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[2];
} owned_view;

static void no_delete(DLManagedTensorVersioned *self) { (void)self; }

static DLManagedTensorVersioned *view_of(void *data, int64_t rows, int64_t cols, DLDataType dtype) {
  owned_view *v = allocate(sizeof *v);
  memset(v, 0, sizeof *v);
  v->shape[0] = rows;
  v->shape[1] = cols;
  v->managed.version.major = DLPACK_MAJOR_VERSION;
  v->managed.version.minor = DLPACK_MINOR_VERSION;
  v->managed.deleter = no_delete;
  v->managed.dl_tensor.data = data;
  v->managed.dl_tensor.device.device_type = device_type();
  v->managed.dl_tensor.ndim = 2;
  v->managed.dl_tensor.dtype = dtype;
  v->managed.dl_tensor.shape = v->shape;
  return &v->managed;
}

static DLTensor *buffer_of(size_t bytes, int64_t *shape) {
  DLTensor *t = allocate(sizeof *t);
  memset(t, 0, sizeof *t);
  t->data = buffer_on_device(NULL, bytes);
  t->device.device_type = device_type();
  t->ndim = 1;
  shape[0] = (int64_t)bytes;
  t->shape = shape;
  t->dtype = (DLDataType){kDLUInt, 8, 1};
  return t;
}

int main(int argc, char **argv) {
  int count = 94 * 16 * 2, reps = 9;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--tensors") && i + 1 < argc) count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--cuda")) on_cuda = 1;
    else {
      fprintf(stderr, "usage: %s [--tensors N] [--reps R] [--cuda]\n", argv[0]);
      return 2;
    }
  }
#ifndef MXFP8_BENCH_WITH_CUDA
  if (on_cuda) {
    fprintf(stderr, "transfer_host_cost: --cuda needs a build with CUDA\n");
    return 2;
  }
#endif
  if (count < 1 || reps < 1 || reps > kMaxReps) {
    fprintf(stderr, "transfer_host_cost: --tensors must be >= 1 and --reps 1..%d\n", kMaxReps);
    return 2;
  }
  /* Two shapes, as gate_up (rows 192) and down (rows 128) of a small expert: K not a multiple of 128. */
  const int64_t shapes[2][2] = {{192, 160}, {128, 96}};
  const DLDataType u8 = {kDLUInt, 8, 1}, fp8 = {kDLFloat8_e4m3fn, 8, 1};
  mxfp8_tensor **tensors = allocate(sizeof(*tensors) * (size_t)count);
  DLTensor **values = allocate(sizeof(*values) * (size_t)count), **scales = allocate(sizeof(*scales) * (size_t)count);
  int32_t *layouts = allocate(sizeof(int32_t) * (size_t)count);
  int64_t *buffer_shapes = allocate(sizeof(int64_t) * 2 * (size_t)count);
  double *create_us = allocate(sizeof(double) * (size_t)count);

  for (int i = 0; i < count; ++i) {
    const int64_t rows = shapes[i % 2][0], cols = shapes[i % 2][1], scale_cols = (cols + 31) / 32;
    const size_t swizzled = round_up((size_t)rows, 128) * round_up((size_t)scale_cols, 4);
    uint8_t *data = allocate((size_t)(rows * cols)), *scale = allocate(swizzled);
    for (int64_t b = 0; b < rows * cols; ++b) data[b] = (uint8_t)(b * 7 + i);
    for (size_t b = 0; b < swizzled; ++b) scale[b] = (uint8_t)(120 + (b + (size_t)i) % 13);
    if (on_cuda) {
      uint8_t *host_data = data, *host_scale = scale;
      data = buffer_on_device(host_data, (size_t)(rows * cols));
      scale = buffer_on_device(host_scale, swizzled);
      free(host_data);
      free(host_scale);
    }
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    desc.rowwise_data = view_of(data, rows, cols, fp8);
    desc.rowwise_scale_inv = view_of(scale, (int64_t)round_up((size_t)rows, 128), (int64_t)round_up((size_t)scale_cols, 4), u8);
    const double t0 = now_us();
    check(mxfp8_tensor_create(&desc, &tensors[i]), "mxfp8_tensor_create");
    create_us[i] = now_us() - t0;
    values[i] = buffer_of((size_t)(rows * cols), &buffer_shapes[2 * i]);
    scales[i] = buffer_of(swizzled, &buffer_shapes[2 * i + 1]);
    layouts[i] = MXFP8_SCALE_LAYOUT_128X4;
  }

  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;
  desc.source = MXFP8_TRANSFER_FROM_TENSORS;
  desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
  desc.count = (size_t)count;
  desc.tensors = (const mxfp8_tensor *const *)tensors;
  desc.target_layouts = layouts;
  desc.values = values;
  desc.scales = scales;

  /* The MoE layer's call (bench_scales' `moe`): the compact scales of 256 experts in one batched export. */
  const int experts = count < 256 ? count : 256;
  DLTensor **compact = allocate(sizeof(*compact) * (size_t)experts);
  int64_t *compact_shapes = allocate(sizeof(int64_t) * (size_t)experts);
  for (int i = 0; i < experts; ++i)
    compact[i] = buffer_of((size_t)(shapes[i % 2][0] * ((shapes[i % 2][1] + 31) / 32)), &compact_shapes[i]);

  double prepare[kMaxReps], run[kMaxReps], immediate[kMaxReps], check_only[kMaxReps], batched[kMaxReps];
  for (int r = 0; r < reps; ++r) {
    mxfp8_plan *plan = NULL;
    double t0 = now_us();
    check(mxfp8_transfer_prepare(&desc, &plan), "mxfp8_transfer_prepare");
    prepare[r] = now_us() - t0;
    t0 = now_us();
    check(mxfp8_plan_run(plan, NULL), "mxfp8_plan_run");
    run[r] = now_us() - t0;
    synchronize();
    mxfp8_plan_release(plan);
    t0 = now_us();
    check(mxfp8_transfer(&desc, NULL), "mxfp8_transfer");
    immediate[r] = now_us() - t0;
    synchronize();
    mxfp8_transfer_desc checked = desc;
    checked.destination = MXFP8_TRANSFER_TO_NOTHING;
    checked.values = NULL;
    checked.scales = NULL;
    checked.target_layouts = NULL;
    t0 = now_us();
    check(mxfp8_transfer_check(&checked), "mxfp8_transfer_check");
    check_only[r] = now_us() - t0;
    t0 = now_us();
    check(mxfp8_export_scales_batched((const mxfp8_tensor *const *)tensors, compact, (size_t)experts, NULL),
          "mxfp8_export_scales_batched");
    batched[r] = now_us() - t0;
    synchronize();
  }
  const double n = (double)count;
  printf("{\"memory\": \"%s\", \"tensors\": %d, \"reps\": %d, \"per_tensor_us\": {\"tensor_create\": %.3f, "
         "\"prepare\": %.3f, \"plan_run\": %.3f, \"immediate\": %.3f, \"check_sources\": %.3f}, "
         "\"batched_export_us\": {\"experts\": %d, \"call\": %.3f}}\n",
         on_cuda ? "cuda (host time of each call)" : "host (the copies done on this CPU)", count, reps, median(create_us, count), median(prepare, reps) / n, median(run, reps) / n,
         median(immediate, reps) / n, median(check_only, reps) / n, experts, median(batched, reps));
  for (int i = 0; i < count; ++i) mxfp8_tensor_release(tensors[i]);
  return 0;
}
