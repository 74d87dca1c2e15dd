/* The FlashInfer TRT-LLM MoE targets on the GPU: grouped experts in device memory (compact scales, and TE's
 * padded 128x4 swizzled ones) converted by mxfp8_convert_grouped into poisoned device parameters, compared
 * byte for byte with trtllm_reference.h (vLLM's and FlashInfer's steps, one at a time). Rows of 2048,
 * 200 and 33 bytes take the 16-byte, 4-byte and byte paths of the row permutation kernel; a stream the
 * caller made is honoured. Every case skips without a device. */
#include <stdlib.h>
#include <string.h>

#include "test_gpu_support.h"
#include "trtllm_reference.h"

#ifdef MXFP8_TEST_WITH_CUDA

static void expect_device(const uint8_t *d, const uint8_t *want, int64_t n, const char *what, int shape) {
  uint8_t *h = malloc((size_t)n + 1);
  CUDA_OK(cudaMemcpy(h, d, (size_t)n + 1, cudaMemcpyDeviceToHost));
  int64_t bad = 0, first = -1;
  for (int64_t b = 0; b < n; ++b)
    if (h[b] != want[b] && bad++ == 0) first = b;
  EXPECT(bad == 0, "%s (shape %d): %lld bytes differ, the first at %lld", what, shape, (long long)bad, (long long)first);
  EXPECT(h[n] == POISON, "%s (shape %d): written past the end", what, shape);
  free(h);
}

static void test_gpu_trtllm_grouped_matches_flashinfers_steps(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const int64_t shapes[][3] = {{8, 384, 2048}, {3, 128, 200}, {2, 256, 33}};
  static const int32_t layouts[2] = {MXFP8_LAYOUT_TRTLLM_SHUFFLED, MXFP8_LAYOUT_TRTLLM_SHUFFLED_GATED};
  uint64_t rng = 91;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
    for (int swizzled = 0; swizzled < 2; ++swizzled) {
      const int64_t experts = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2];
      const int64_t c = ref_ceil_div(k, 32), cp = ref_round_up(c, 4);
      uint8_t *values = malloc((size_t)(experts * n * k)), *compact = malloc((size_t)(experts * n * c));
      fill_random(values, (size_t)(experts * n * k), &rng);
      fill_random_scales(compact, (size_t)(experts * n * c), &rng);
      /* TE's swizzled storage per expert (padding poisoned), or compact scales back to back. */
      const int64_t per = swizzled ? n * cp : n * c;
      uint8_t *stored = malloc((size_t)(experts * per));
      memset(stored, POISON, (size_t)(experts * per));
      for (int64_t e = 0; e < experts; ++e)
        for (int64_t y = 0; y < n; ++y)
          for (int64_t x = 0; x < c; ++x)
            stored[e * per + (swizzled ? (int64_t)ref_swizzled_index(y, x, cp) : y * c + x)] = compact[(e * n + y) * c + x];
      uint8_t *dv = to_device(values, (size_t)(experts * n * k)), *ds = to_device(stored, (size_t)(experts * per));
      int64_t vshape[2] = {experts * n, k}, sshape[1] = {experts * per};
      DLManagedTensorVersioned mv = {0}, ms = {0};
      mv.version.major = DLPACK_MAJOR_VERSION, ms.version.major = DLPACK_MAJOR_VERSION;
      mv.dl_tensor = (DLTensor){dv, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, vshape, NULL, 0};
      ms.dl_tensor = (DLTensor){ds, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
      mxfp8_grouped_desc d = MXFP8_GROUPED_DESC_INIT;
      d.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
      d.scales = swizzled ? MXFP8_GROUPED_SCALES_PADDED : MXFP8_GROUPED_SCALES_COMPACT;
      d.num_experts = (int32_t)experts;
      d.cols = k;
      d.uniform_rows = n;
      d.data = &mv;
      d.scale_inv = &ms;
      mxfp8_grouped_tensor *g = NULL;
      assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
      for (int l = 0; l < 2; ++l) {
        uint8_t *want_v = malloc((size_t)(experts * n * k) + 1), *want_s = malloc((size_t)(experts * n * cp) + 1);
        for (int64_t e = 0; e < experts; ++e)
          ref_trtllm(values + e * n * k, compact + e * n * c, n, k, c, l, want_v + e * n * k, want_s + e * n * cp);
        uint8_t *pv = poisoned_device((size_t)(experts * n * k)), *ps = poisoned_device((size_t)(experts * n * cp));
        int64_t ov[3] = {experts, n, k}, os[3] = {experts, n, cp};
        DLTensor v = {pv, {kDLCUDA, 0}, 3, {kDLFloat8_e4m3fn, 8, 1}, ov, NULL, 0};
        DLTensor s = {ps, {kDLCUDA, 0}, 3, {kDLUInt, 8, 1}, os, NULL, 0};
        mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
        o.target = layouts[l];
        o.stream = stream;
        assert_int_equal(mxfp8_convert_grouped(g, &o, &v, &s), MXFP8_OK);
        CUDA_OK(cudaStreamSynchronize(stream));
        expect_device(pv, want_v, experts * n * k, l ? "gated values" : "values", (int)sh);
        expect_device(ps, want_s, experts * n * cp, l ? "gated scales" : "scales", (int)sh);
        CUDA_OK(cudaFree(pv));
        CUDA_OK(cudaFree(ps));
        free(want_v);
        free(want_s);
      }
      mxfp8_grouped_tensor_release(g);
      CUDA_OK(cudaFree(dv));
      CUDA_OK(cudaFree(ds));
      free(values);
      free(compact);
      free(stored);
    }
  CUDA_OK(cudaStreamDestroy(stream));
}

#else
static void test_gpu_trtllm_grouped_matches_flashinfers_steps(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_trtllm_grouped_matches_flashinfers_steps),
  };
  return cmocka_run_group_tests_name("TRT-LLM targets on the GPU", tests, NULL, NULL);
}
