/* CUDA failures reported as the header promises: device memory the library cannot allocate is
 * MXFP8_ERROR_OUT_OF_MEMORY on every path that allocates (export copies, grouped copies, quantize
 * outputs, dequantize scratch, the 32x32 check's flag), a device id the process does not have is
 * MXFP8_ERROR_INVALID_ARGUMENT, any other CUDA failure is MXFP8_ERROR_CUDA with CUDA's text, nothing is
 * written on failure, and the library works again afterwards.
 * The failures are real: this process caps the library's device pool with MXFP8_DEVICE_POOL_LIMIT_BYTES
 * (set before the first call), and every request below is larger than the cap. Skips without a GPU. */
#include <stdlib.h>
#include <string.h>

#include "test_gpu_support.h"

#ifdef MXFP8_TEST_WITH_CUDA

/* The pool cap, 2 MiB (CUDA may round it up to its granularity), and a 64 MiB compact scale matrix,
 * far past it whatever the rounding. */
enum { kRows = 16384, kCols = 4096 };

typedef struct {
  DLManagedTensorVersioned data, scales;
  int64_t shape[2], scale_shape[1];
  uint8_t *d_values, *d_swizzled;
} device_tensor;

/* A (kRows, 32 * kCols) tensor with swizzled scales, in cudaMalloc memory (not the library's pool). */
static mxfp8_tensor *make_swizzled(device_tensor *t) {
  memset(t, 0, sizeof *t);
  const size_t values = (size_t)kRows * 32 * kCols, scales = (size_t)kRows * kCols;
  CUDA_OK(cudaMalloc((void **)&t->d_values, values));
  CUDA_OK(cudaMalloc((void **)&t->d_swizzled, scales));
  CUDA_OK(cudaMemset(t->d_values, 0x38, values));
  CUDA_OK(cudaMemset(t->d_swizzled, 127, scales));
  t->shape[0] = kRows;
  t->shape[1] = 32 * kCols;
  t->scale_shape[0] = (int64_t)scales;
  t->data = borrowed_bytes(t->d_values, kDLCUDA, 2, t->shape);
  t->scales = borrowed_bytes(t->d_swizzled, kDLCUDA, 1, t->scale_shape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = &t->data;
  desc.rowwise_scale_inv = &t->scales;
  mxfp8_tensor *handle = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &handle), MXFP8_OK);
  return handle;
}

static void free_swizzled(device_tensor *t, mxfp8_tensor *handle) {
  mxfp8_tensor_release(handle);
  CUDA_OK(cudaFree(t->d_values));
  CUDA_OK(cudaFree(t->d_swizzled));
}

static void expect_oom(mxfp8_status st, const char *what) {
  EXPECT(st == MXFP8_ERROR_OUT_OF_MEMORY, "%s: status %d (%s), expected out of memory", what, st, mxfp8_last_error());
  assert_last_error_contains("out of memory");  /* CUDA's own text, not a stale error from elsewhere */
}

static void test_every_allocating_path_reports_out_of_memory(void **state) {
  (void)state;
  REQUIRE_GPU();
  device_tensor t;
  mxfp8_tensor *handle = make_swizzled(&t);
  DLManagedTensorVersioned *sentinel = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;

  /* export_components: the unswizzled copy (64 MiB) */
  DLManagedTensorVersioned *v = sentinel, *s = sentinel;
  expect_oom(mxfp8_export_components(handle, NULL, &v, &s), "export copy");
  EXPECT(v == sentinel && s == sentinel, "outputs written on failure");

  /* dequantize: the compact scratch (64 MiB), into a bfloat16 output */
  uint16_t *d_out = NULL;
  CUDA_OK(cudaMalloc((void **)&d_out, sizeof(uint16_t) * kRows * 32 * kCols));
  int64_t out_shape[1] = {(int64_t)kRows * 32 * kCols};
  DLTensor out = {d_out, {kDLCUDA, 0}, 1, {kDLBfloat, 16, 1}, out_shape, NULL, 0};
  expect_oom(mxfp8_dequantize(handle, NULL, &out), "dequantize scratch");
  CUDA_OK(cudaFree(d_out));

  /* quantize: library-allocated outputs (values of a (kRows, 4096) float32 input are 64 MiB) */
  float *d_in = NULL;
  CUDA_OK(cudaMalloc((void **)&d_in, sizeof(float) * kRows * 4096));
  CUDA_OK(cudaMemset(d_in, 0, sizeof(float) * kRows * 4096));
  int64_t in_shape[2] = {kRows, 4096};
  DLTensor in = {d_in, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, in_shape, NULL, 0};
  DLManagedTensorVersioned *qv = sentinel, *qs = sentinel;
  expect_oom(mxfp8_quantize(&in, NULL, &qv, &qs, NULL, NULL), "quantize outputs");
  EXPECT(qv == sentinel && qs == sentinel, "quantize outputs written on failure");
  CUDA_OK(cudaFree(d_in));

  /* grouped, stacked: one copy of both experts' scales (2 x 32 MiB) */
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = 2;
  g.cols = 32 * kCols;
  g.uniform_rows = kRows / 2;
  g.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  g.data = &t.data;
  g.scale_inv = &t.scales;
  mxfp8_grouped_tensor *grouped = NULL;
  /* The group borrows the same buffers (NULL deleters): the tensor above keeps them alive. */
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  DLManagedTensorVersioned *gv = sentinel, *gs = sentinel;
  expect_oom(mxfp8_grouped_export(grouped, NULL, 0, NULL, &gv, &gs), "grouped stacked copy");
  EXPECT(gv == sentinel && gs == sentinel, "grouped outputs written on failure");
  mxfp8_grouped_tensor_release(grouped);
  free_swizzled(&t, handle);
}

/* The 32x32 check allocates only a small output and an 8-byte flag: fill the capped pool with held
 * copies first, then ask. */
static void test_block_scale_check_reports_out_of_memory_when_the_pool_is_full(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { kSmall = 256 };
  uint8_t *d_values = NULL, *d_scales = NULL;
  CUDA_OK(cudaMalloc((void **)&d_values, (size_t)kSmall * 32 * kSmall));
  CUDA_OK(cudaMalloc((void **)&d_scales, (size_t)kSmall * kSmall));
  CUDA_OK(cudaMemset(d_scales, 120, (size_t)kSmall * kSmall));
  int64_t shape[2] = {kSmall, 32 * kSmall}, sshape[1] = {(int64_t)kSmall * kSmall};
  DLManagedTensorVersioned data = borrowed_bytes(d_values, kDLCUDA, 2, shape);
  DLManagedTensorVersioned scales = borrowed_bytes(d_scales, kDLCUDA, 1, sshape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.block = MXFP8_BLOCK_32X32;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  /* Hold 64 KiB copies, then 32x32 exports (a 2 KiB output each, and the flag), until the pool says
   * no: the 32x32 path itself must be the one that reports it. */
  enum { kMostHeld = 4096 };
  DLManagedTensorVersioned **held = calloc(kMostHeld, sizeof *held);
  int n = 0;
  mxfp8_status st = MXFP8_OK;
  while (n < kMostHeld && (st = mxfp8_export_components(t, NULL, NULL, &held[n])) == MXFP8_OK) ++n;
  expect_oom(st, "filling the capped pool with copies");
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.scales_granularity = MXFP8_SCALES_PER_32X32;
  DLManagedTensorVersioned *b = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;
  while (n < kMostHeld && (st = mxfp8_export_components(t, &o, NULL, &held[n])) == MXFP8_OK) ++n;
  expect_oom(st, "32x32 block scales");
  EXPECT(n < kMostHeld, "the capped pool held %d outputs", n);
  /* Give the memory back: the same export works again. */
  for (int i = 0; i < n; ++i) release_managed(held[i]);
  free(held);
  CUDA_OK(cudaDeviceSynchronize());
  assert_int_equal(mxfp8_export_components(t, &o, NULL, &b), MXFP8_OK);
  release_managed(b);
  CUDA_OK(cudaDeviceSynchronize());
  mxfp8_tensor_release(t);
  CUDA_OK(cudaFree(d_values));
  CUDA_OK(cudaFree(d_scales));
}

/* A forged DLPack tensor claiming CUDA device 7 (the device machine has one GPU): a clear refusal, not
 * CUDA's "invalid device ordinal" and not a fault; then the context still works. */
static void test_a_device_that_does_not_exist_is_invalid_input(void **state) {
  (void)state;
  REQUIRE_GPU();
  int count = 0;
  CUDA_OK(cudaGetDeviceCount(&count));
  uint8_t *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, 1024));
  int64_t shape[2] = {128, 4}, flat[1] = {512};
  DLTensor compact = {d, {kDLCUDA, count}, 2, {kDLUInt, 8, 1}, shape, NULL, 0};
  DLTensor swizzled = {d + 512, {kDLCUDA, count}, 1, {kDLUInt, 8, 1}, flat, NULL, 0};
  const mxfp8_status st = mxfp8_swizzle_scales(&compact, &swizzled, NULL);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "status %d (%s)", st, mxfp8_last_error());
  assert_last_error_contains("does not exist");
  assert_last_error_contains("cuda:");
  compact.device.device_id = swizzled.device.device_id = 0;
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_OK);
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaFree(d));
}

/* A CUDA failure the caller can really cause: the 32x32 block-scale check waits for its stream, which a
 * stream being captured into a graph refuses. The call reports MXFP8_ERROR_CUDA with CUDA's own text,
 * writes no output, and once the capture is ended the context works as before. */
static void test_a_cuda_failure_is_reported_with_cudas_text_and_leaves_the_context_usable(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { kSmall = 64 };
  uint8_t *d_values = NULL, *d_scales = NULL;
  CUDA_OK(cudaMalloc((void **)&d_values, (size_t)kSmall * 32 * kSmall));
  CUDA_OK(cudaMalloc((void **)&d_scales, (size_t)ref_round_up(kSmall, 128) * kSmall));
  CUDA_OK(cudaMemset(d_scales, 120, (size_t)ref_round_up(kSmall, 128) * kSmall));
  int64_t shape[2] = {kSmall, 32 * kSmall}, sshape[1] = {ref_round_up(kSmall, 128) * kSmall};
  DLManagedTensorVersioned data = borrowed_bytes(d_values, kDLCUDA, 2, shape);
  DLManagedTensorVersioned scales = borrowed_bytes(d_scales, kDLCUDA, 1, sshape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.block = MXFP8_BLOCK_32X32;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.scales_granularity = MXFP8_SCALES_PER_32X32;
  o.stream = stream;
  DLManagedTensorVersioned *b = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const mxfp8_status st = mxfp8_export_components(t, &o, NULL, &b);
  cudaGraph_t graph = NULL;
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph); /* invalidated by the refused wait */
  EXPECT(st == MXFP8_ERROR_CUDA, "status %d (%s)", st, mxfp8_last_error());
  assert_last_error_contains("checking the 32x32 block scales: cuda");  /* our context, then CUDA's name */
  EXPECT(b == (DLManagedTensorVersioned *)(uintptr_t)0xBAD, "output written on failure");
  if (ended == cudaSuccess && graph) cudaGraphDestroy(graph);
  (void)cudaGetLastError();
  /* The context works: the same call on a new stream, then on the stream whose capture failed. */
  cudaStream_t fresh;
  CUDA_OK(cudaStreamCreateWithFlags(&fresh, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i) {
    o.stream = i == 0 ? fresh : stream;
    const mxfp8_status again = mxfp8_export_components(t, &o, NULL, &b);
    EXPECT(again == MXFP8_OK, "the call after the failed capture, on the %s stream: status %d (%s)",
           i == 0 ? "new" : "same", again, mxfp8_last_error());
    CUDA_OK(cudaStreamSynchronize(i == 0 ? fresh : stream));
    release_managed(b);
    CUDA_OK(cudaStreamSynchronize(i == 0 ? fresh : stream));
  }
  CUDA_OK(cudaStreamDestroy(fresh));
  CUDA_OK(cudaStreamDestroy(stream));
  mxfp8_tensor_release(t);
  CUDA_OK(cudaFree(d_values));
  CUDA_OK(cudaFree(d_scales));
}

#else
static void test_every_allocating_path_reports_out_of_memory(void **state) { (void)state; REQUIRE_GPU(); }
static void test_block_scale_check_reports_out_of_memory_when_the_pool_is_full(void **state) {
  (void)state;
  REQUIRE_GPU();
}
static void test_a_device_that_does_not_exist_is_invalid_input(void **state) { (void)state; REQUIRE_GPU(); }
static void test_a_cuda_failure_is_reported_with_cudas_text_and_leaves_the_context_usable(void **state) {
  (void)state;
  REQUIRE_GPU();
}
#endif

int main(void) {
  /* Before the library's first CUDA call in this process: the pool reads it when it is created. */
  setenv("MXFP8_DEVICE_POOL_LIMIT_BYTES", "2097152", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_allocating_path_reports_out_of_memory),
      cmocka_unit_test(test_block_scale_check_reports_out_of_memory_when_the_pool_is_full),
      cmocka_unit_test(test_a_device_that_does_not_exist_is_invalid_input),
      cmocka_unit_test(test_a_cuda_failure_is_reported_with_cudas_text_and_leaves_the_context_usable),
  };
  return cmocka_run_group_tests_name("CUDA failures", tests, NULL, NULL);
}
