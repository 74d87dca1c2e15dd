/* mxfp8_quantize and mxfp8_dequantize on the GPU, byte for byte against the host path (which
 * test_quantize.c and the NumPy reference pin down): every input type, format, rounding, scale layout and
 * direction, on shapes that take the vector kernels and shapes that take the tile kernel, inputs with
 * NaN, Inf, subnormals and rounding ties, poisoned outputs, an unaligned input, library allocation on a
 * stream. Every case skips when no CUDA device is usable. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_gpu_support.h"

#ifdef MXFP8_TEST_WITH_CUDA

static const int kElementBytes[3] = {2, 2, 4};
static const DLDataType kInputType[3] = {{kDLBfloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}};

static int64_t scale_count(int64_t m, int64_t k, int columnwise, const mxfp8_quantize_options *o) {
  const int64_t r = columnwise ? ref_ceil_div(m, 32) : m, c = columnwise ? k : ref_ceil_div(k, 32);
  if (o->scales_layout == MXFP8_QUANTIZED_SCALES_COMPACT)
    return o->block == MXFP8_BLOCK_32X32 ? ref_ceil_div(m, 32) * ref_ceil_div(k, 32) : r * c;
  return columnwise ? ref_round_up(r, 4) * ref_round_up(k, 128) : ref_round_up(m, 128) * ref_round_up(c, 4);
}

static DLTensor flat(void *data, int64_t *n, DLDataType dtype, DLDeviceType device) {
  DLTensor t = {data, {device, 0}, 1, dtype, n, NULL, 0};
  return t;
}

/* Quantizes one random input on the host and on the device (input `offset` bytes into its allocation,
 * outputs poisoned) and compares every output byte. Returns 0 when they agree. */
static int compare_quantize(int type, int64_t m, int64_t k, const mxfp8_quantize_options *o, int rowwise, int columnwise,
                            uint64_t offset, uint64_t seed) {
  const int64_t n = m * k;
  const size_t in_bytes = (size_t)n * (size_t)kElementBytes[type];
  uint8_t *x = malloc(in_bytes + 1);
  fill_quantize_input(x, type, (size_t)n, &seed);
  uint8_t *dx = NULL;
  CUDA_OK(cudaMalloc((void **)&dx, in_bytes + offset + 1));
  CUDA_OK(cudaMemcpy(dx + offset, x, in_bytes, cudaMemcpyHostToDevice));
  int64_t shape[2] = {m, k}, counts[4] = {n, scale_count(m, k, 0, o), n, scale_count(m, k, 1, o)};
  uint8_t *host[4] = {0}, *device[4] = {0}, *back[4] = {0};
  DLTensor ht[4], dt[4];
  const DLDataType u8 = {kDLUInt, 8, 1};
  for (int i = 0; i < 4; ++i) {
    if (!(i < 2 ? rowwise : columnwise)) continue;
    host[i] = malloc((size_t)counts[i] + 1);
    back[i] = malloc((size_t)counts[i] + 1);
    memset(host[i], POISON, (size_t)counts[i] + 1);
    CUDA_OK(cudaMalloc((void **)&device[i], (size_t)counts[i] + 1));
    CUDA_OK(cudaMemset(device[i], POISON, (size_t)counts[i] + 1));
    ht[i] = flat(host[i], &counts[i], u8, kDLCPU);
    dt[i] = flat(device[i], &counts[i], u8, kDLCUDA);
  }
  DLTensor hin = {x, {kDLCPU, 0}, 2, kInputType[type], shape, NULL, 0};
  DLTensor din = {dx, {kDLCUDA, 0}, 2, kInputType[type], shape, NULL, offset};
#define OUT(t, i) (host[i] ? &t[i] : NULL)
  assert_int_equal(mxfp8_quantize_into(&hin, o, OUT(ht, 0), OUT(ht, 1), OUT(ht, 2), OUT(ht, 3)), MXFP8_OK);
  const mxfp8_status st = mxfp8_quantize_into(&din, o, OUT(dt, 0), OUT(dt, 1), OUT(dt, 2), OUT(dt, 3));
#undef OUT
  EXPECT(st == MXFP8_OK, "device quantize: %s", mxfp8_last_error());
  CUDA_OK(cudaDeviceSynchronize());
  int bad = 0;
  static const char *const names[4] = {"rowwise values", "rowwise scales", "columnwise values", "columnwise scales"};
  for (int i = 0; i < 4 && !bad; ++i) {
    if (!host[i]) continue;
    CUDA_OK(cudaMemcpy(back[i], device[i], (size_t)counts[i] + 1, cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j <= counts[i]; ++j)
      if (back[i][j] != host[i][j]) {
        const int64_t e = i % 2 == 0 && j < n ? j : -1;
        uint32_t bits = 0;
        if (e >= 0) memcpy(&bits, x + (size_t)e * (size_t)kElementBytes[type], (size_t)kElementBytes[type]);
        print_error("type %d (%lld, %lld) format %d rounding %d layout %d block %d: %s[%lld]: device 0x%02x, host 0x%02x "
                    "(input bits 0x%08x)\n", type, (long long)m, (long long)k, o->format, o->scale_rounding,
                    o->scales_layout, o->block, names[i], (long long)j, back[i][j], host[i][j], bits);
        bad = 1;
        break;
      }
  }
  for (int i = 0; i < 4; ++i) {
    free(host[i]);
    free(back[i]);
    cudaFree(device[i]);
  }
  cudaFree(dx);
  free(x);
  return bad;
}

static void test_gpu_quantize_equals_host_for_every_option(void **state) {
  (void)state;
  REQUIRE_GPU();
  const int quick = getenv("MXFP8_TEST_QUICK") != NULL;
  /* (64, 256), (257, 96), (512, 4096): K % 32 == 0, the streaming kernel for rowwise 1x32; the others
   * take the tile kernel; (1, 1) and (33, 31) are partial in both directions. */
  static const int64_t shapes[][2] = {{64, 256}, {257, 96}, {70, 100}, {1, 1}, {33, 31}, {512, 4096}};
  /* MXFP8_TEST_QUICK (compute-sanitizer runs): two shapes, one per kernel; bfloat16 and float32; E4M3. */
  const int nshapes = quick ? 2 : 6, type_step = quick ? 2 : 1, last_format = quick ? 1 : 2;
  static const int64_t quick_shapes[][2] = {{64, 256}, {70, 100}};
  /* rowwise, columnwise, 32x32 */
  static const int modes[][3] = {{1, 0, 0}, {0, 1, 0}, {1, 1, 0}, {1, 0, 1}, {0, 1, 1}, {1, 1, 1}};
  int failures = 0, runs = 0;
  for (int type = 0; type < 3; type += type_step)
    for (int format = 1; format <= last_format; ++format)
      for (int rounding = 0; rounding < 3; ++rounding) /* RCEIL, FLOOR, COMPRESSED_TENSORS */
        for (int layout = 0; layout < 3; ++layout)
          for (int mode = 0; mode < 6; ++mode)
            for (int s = 0; s < nshapes; ++s) {
              mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
              o.format = format, o.scale_rounding = rounding, o.scales_layout = layout, o.block = modes[mode][2];
              const int64_t *shape = quick ? quick_shapes[s] : shapes[s];
              failures += compare_quantize(type, shape[0], shape[1], &o, modes[mode][0], modes[mode][1], 0,
                                           (uint64_t)(runs++ * 7919 + 1));
            }
  print_message("%d configurations, %d differ\n", runs, failures);
  EXPECT(failures == 0, "%d of %d configurations differ", failures, runs);
}

static void test_gpu_quantize_unaligned_input_takes_the_tile_kernel(void **state) {
  (void)state;
  REQUIRE_GPU();
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  int failures = 0;
  for (int type = 0; type < 3; ++type) { /* one and three elements in: no 16-byte loads */
    o.scales_layout = MXFP8_QUANTIZED_SCALES_COMPACT;
    failures += compare_quantize(type, 128, 1024, &o, 1, 0, (uint64_t)kElementBytes[type], 17);
    o.scales_layout = MXFP8_QUANTIZED_SCALES_SWIZZLED;
    failures += compare_quantize(type, 128, 1024, &o, 1, 0, 3 * (uint64_t)kElementBytes[type], 18);
  }
  EXPECT(failures == 0, "%d configurations differ", failures);
}

/* Library allocation on a non-blocking stream, then the outputs described as a tensor and dequantized on
 * the device, against the same on the host. */
static void test_gpu_quantize_allocating_and_dequantize_equal_host(void **state) {
  (void)state;
  REQUIRE_GPU();
  enum { M = 300, K = 4096 + 64 };
  uint16_t *x = malloc(sizeof(uint16_t) * M * K);
  uint64_t rng = 23;
  fill_quantize_input(x, 0, (size_t)M * K, &rng);
  uint16_t *dx = NULL;
  CUDA_OK(cudaMalloc((void **)&dx, sizeof(uint16_t) * M * K));
  CUDA_OK(cudaMemcpy(dx, x, sizeof(uint16_t) * M * K, cudaMemcpyHostToDevice));
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int64_t shape[2] = {M, K};
  DLTensor hin = {x, {kDLCPU, 0}, 2, kInputType[0], shape, NULL, 0};
  DLTensor din = {dx, {kDLCUDA, 0}, 2, kInputType[0], shape, NULL, 0};
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.scales_layout = MXFP8_QUANTIZED_SCALES_SWIZZLED;
  o.stream = stream;
  DLManagedTensorVersioned *h[4] = {0}, *d[4] = {0};
  assert_int_equal(mxfp8_quantize(&hin, &o, &h[0], &h[1], &h[2], &h[3]), MXFP8_OK);
  assert_int_equal(mxfp8_quantize(&din, &o, &d[0], &d[1], &d[2], &d[3]), MXFP8_OK);
  mxfp8_tensor *tensors[2];
  for (int side = 0; side < 2; ++side) {
    DLManagedTensorVersioned **p = side ? d : h;
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    desc.rowwise_data = p[0], desc.rowwise_scale_inv = p[1], desc.columnwise_data = p[2], desc.columnwise_scale_inv = p[3];
    assert_int_equal(mxfp8_tensor_create(&desc, &tensors[side]), MXFP8_OK);
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  for (int i = 0; i < 4; ++i) {
    const DLTensor *ht = &h[i]->dl_tensor, *dt = &d[i]->dl_tensor;
    size_t bytes = 1;
    for (int j = 0; j < ht->ndim; ++j) bytes *= (size_t)ht->shape[j];
    uint8_t *back = malloc(bytes);
    CUDA_OK(cudaMemcpy(back, dt->data, bytes, cudaMemcpyDeviceToHost));
    EXPECT(memcmp(back, ht->data, bytes) == 0, "output %d differs", i);
    free(back);
  }
  for (int direction = 0; direction < 2; ++direction)
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      const size_t bytes = (size_t)M * K * (bf16 ? 2 : 4);
      void *hout = malloc(bytes), *dout = NULL, *back = malloc(bytes);
      CUDA_OK(cudaMalloc(&dout, bytes));
      const DLDataType dtype = bf16 ? (DLDataType){kDLBfloat, 16, 1} : (DLDataType){kDLFloat, 32, 1};
      DLTensor ho = {hout, {kDLCPU, 0}, 2, dtype, shape, NULL, 0}, dou = {dout, {kDLCUDA, 0}, 2, dtype, shape, NULL, 0};
      mxfp8_dequantize_options dq = MXFP8_DEQUANTIZE_OPTIONS_INIT;
      dq.direction = direction;
      dq.stream = stream;
      assert_int_equal(mxfp8_dequantize(tensors[0], &dq, &ho), MXFP8_OK);
      assert_int_equal(mxfp8_dequantize(tensors[1], &dq, &dou), MXFP8_OK);
      CUDA_OK(cudaMemcpyAsync(back, dout, bytes, cudaMemcpyDeviceToHost, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      EXPECT(memcmp(back, hout, bytes) == 0, "dequantize direction %d bf16 %d differs", direction, bf16);
      free(hout), free(back), cudaFree(dout);
    }
  mxfp8_tensor_release(tensors[0]);
  mxfp8_tensor_release(tensors[1]);
  CUDA_OK(cudaStreamSynchronize(stream));
  CUDA_OK(cudaStreamDestroy(stream));
  cudaFree(dx);
  free(x);
}

#else /* built without CUDA */
static void test_gpu_quantize_equals_host_for_every_option(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_quantize_unaligned_input_takes_the_tile_kernel(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_quantize_allocating_and_dequantize_equal_host(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_quantize_equals_host_for_every_option),
      cmocka_unit_test(test_gpu_quantize_unaligned_input_takes_the_tile_kernel),
      cmocka_unit_test(test_gpu_quantize_allocating_and_dequantize_equal_host),
  };
  return cmocka_run_group_tests_name("quantize and dequantize (GPU against host)", tests, NULL, NULL);
}
