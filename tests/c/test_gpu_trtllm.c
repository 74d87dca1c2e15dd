/* The FlashInfer TRT-LLM MoE targets on the GPU: grouped experts in device memory (compact scales, and TE's
 * padded 128x4 swizzled ones) converted by mxfp8_grouped_convert into poisoned device parameters, compared
 * byte for byte with trtllm_reference.h (vLLM's and FlashInfer's steps, one at a time); the bytes around
 * each output stay poisoned. A stream the caller made is honoured. Every case skips without a device.
 *
 * The cases cover the row kernel's paths (permute_rows_cuda.cu). Values: rows of 2048, 640 and 1536
 * bytes (16-byte vectors, several rows a warp's tile, the last tile pass partial), 4624 (16-byte, one row
 * in two passes), 200 and 1540 (4-byte vectors; 1540 in two passes), 33 and 257 (bytes; 257 in two
 * passes), 1 to 8 experts. Scales from compact storage (written by the same launch): C = 64 and 48 (16-byte
 * row loads; 48 leaves the second half of its last column group empty), 20 (word loads, a one-tile half),
 * 7, 2, 145, 49 and 9 (byte loads, partial words and tiles). Then what the row kernel leaves to the
 * batched scale kernel: TE's swizzled scales, and a scale output not aligned to 16 bytes; and buffers at
 * odd byte offsets (source values and scales: byte loads; output values: byte stores), with the exponent
 * fix-up (byte 0 written as 1, padding still 0) on scales that hold zeros. Then vLLM's padding
 * (options.pad_rows_to / pad_cols_to; padding_reference.h) on both kernels' paths, and the padded
 * values of the row-order layouts (the row kernel's identity order), device against host. */
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "padding_reference.h"
#include "test_gpu_support.h"
#include "trtllm_reference.h"

#ifdef MXFP8_TEST_WITH_CUDA

/* A device buffer of offset + n + 1 bytes, poisoned, with `host` (n bytes) at offset when given. */
static uint8_t *device_at(const uint8_t *host, size_t n, size_t offset) {
  uint8_t *d = poisoned_device(offset + n);
  if (host && n) CUDA_OK(cudaMemcpy(d + offset, host, n, cudaMemcpyHostToDevice));
  return d;
}

/* d holds `want` (n bytes) at offset, poison before it and in the byte after it. */
static void expect_device(const uint8_t *d, int64_t offset, const uint8_t *want, int64_t n, const char *what, int c) {
  uint8_t *h = malloc((size_t)(offset + n) + 1);
  CUDA_OK(cudaMemcpy(h, d, (size_t)(offset + n) + 1, cudaMemcpyDeviceToHost));
  int64_t bad = 0, first = -1;
  for (int64_t b = 0; b < n; ++b)
    if (h[offset + b] != want[b] && bad++ == 0) first = b;
  EXPECT(bad == 0, "%s (case %d): %lld bytes differ, the first at %lld", what, c, (long long)bad, (long long)first);
  for (int64_t b = 0; b < offset; ++b) EXPECT(h[b] == POISON, "%s (case %d): byte %lld before the output written", what, c, (long long)b);
  EXPECT(h[offset + n] == POISON, "%s (case %d): written past the end", what, c);
  free(h);
}

struct TrtllmCase {
  int64_t experts, n, k;
  int swizzled;    /* TE's padded 128x4 scales per expert, else compact back to back */
  int in_offset;   /* byte offset of the source values and scales */
  int out_offset;  /* byte offset of the values output; the scales output's is 4 times it */
  int fixup;       /* MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE, on scales with zeros */
  int64_t rows_to, cols_to; /* vLLM's padding (padding_reference.h), 0: none */
};

static void run_case(const struct TrtllmCase *tc, int index, cudaStream_t stream, uint64_t *rng) {
  static const int32_t layouts[2] = {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED};
  const int64_t experts = tc->experts, n = tc->n, k = tc->k;
  const int64_t c = ref_ceil_div(k, 32), cp = ref_round_up(c, 4);
  uint8_t *values = malloc((size_t)(experts * n * k)), *compact = malloc((size_t)(experts * n * c));
  fill_random(values, (size_t)(experts * n * k), rng);
  fill_random_scales(compact, (size_t)(experts * n * c), rng); /* never 0 nor POISON */
  uint8_t *expected = malloc((size_t)(experts * n * c));       /* the scales the outputs hold */
  memcpy(expected, compact, (size_t)(experts * n * c));
  if (tc->fixup)
    for (int64_t i = 0; i < experts * n * c; i += 5) compact[i] = 0, expected[i] = 1;
  /* TE's swizzled storage per expert (padding poisoned), or compact scales back to back. */
  const int64_t per = tc->swizzled ? ref_round_up(n, 128) * cp : n * c;
  uint8_t *stored = malloc((size_t)(experts * per));
  memset(stored, POISON, (size_t)(experts * per));
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t y = 0; y < n; ++y)
      for (int64_t x = 0; x < c; ++x)
        stored[e * per + (tc->swizzled ? (int64_t)ref_swizzled_index(y, x, cp) : y * c + x)] = compact[(e * n + y) * c + x];
  uint8_t *dv = device_at(values, (size_t)(experts * n * k), (size_t)tc->in_offset);
  uint8_t *ds = device_at(stored, (size_t)(experts * per), (size_t)tc->in_offset);
  int64_t vshape[2] = {experts * n, k}, sshape[1] = {experts * per};
  DLManagedTensorVersioned mv = {0}, ms = {0};
  mv.version.major = DLPACK_MAJOR_VERSION, ms.version.major = DLPACK_MAJOR_VERSION;
  mv.dl_tensor = (DLTensor){dv, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, vshape, NULL, (uint64_t)tc->in_offset};
  ms.dl_tensor = (DLTensor){ds, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, (uint64_t)tc->in_offset};
  mxfp8_grouped_desc d = MXFP8_GROUPED_DESC_INIT;
  d.scale_layout = tc->swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  d.scales = tc->swizzled ? MXFP8_GROUPED_SCALES_PADDED : MXFP8_GROUPED_SCALES_COMPACT;
  d.num_experts = (int32_t)experts;
  d.cols = k;
  d.uniform_rows = n;
  d.data = &mv;
  d.scale_inv = &ms;
  mxfp8_grouped_tensor *g = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
  for (int l = 0; l < 2; ++l) {
    /* The padded expert's extent (the expert itself when not padded). */
    struct ref_padded shape = ref_pad_expert(values, expected, n, k, tc->rows_to, tc->cols_to, l, 127);
    const int64_t np = shape.n, kp = shape.k, pc = shape.c, pcp = ref_round_up(pc, 4);
    ref_padded_free(&shape);
    uint8_t *want_v = malloc((size_t)(experts * np * kp) + 1), *want_s = malloc((size_t)(experts * np * pcp) + 1);
    for (int64_t e = 0; e < experts; ++e) {
      struct ref_padded p = ref_pad_expert(values + e * n * k, expected + e * n * c, n, k, tc->rows_to, tc->cols_to, l, 127);
      ref_trtllm(p.values, p.scales, np, kp, pc, l, want_v + e * np * kp, want_s + e * np * pcp);
      ref_padded_free(&p);
    }
    const int64_t v_offset = tc->out_offset, s_offset = 4 * tc->out_offset;
    uint8_t *pv = device_at(NULL, (size_t)(experts * np * kp), (size_t)v_offset);
    uint8_t *ps = device_at(NULL, (size_t)(experts * np * pcp), (size_t)s_offset);
    int64_t ov[3] = {experts, np, kp}, os[3] = {experts, np, pcp};
    DLTensor v = {pv, {kDLCUDA, 0}, 3, {kDLFloat8_e4m3fn, 8, 1}, ov, NULL, (uint64_t)v_offset};
    DLTensor s = {ps, {kDLCUDA, 0}, 3, {kDLUInt, 8, 1}, os, NULL, (uint64_t)s_offset};
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = layouts[l];
    o.stream = stream;
    if (tc->fixup) o.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
    o.pad_rows_to = tc->rows_to;
    o.pad_cols_to = tc->cols_to;
    assert_int_equal(mxfp8_grouped_convert(g, &o, &v, &s), MXFP8_OK);
    CUDA_OK(cudaStreamSynchronize(stream));
    expect_device(pv, v_offset, want_v, experts * np * kp, l ? "gated values" : "values", index);
    expect_device(ps, s_offset, want_s, experts * np * pcp, l ? "gated scales" : "scales", index);
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
  free(expected);
  free(stored);
}

static void test_gpu_trtllm_grouped_matches_flashinfers_steps(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const struct TrtllmCase cases[] = {
      /* experts, n, k, swizzled, in_offset, out_offset, fixup, rows_to, cols_to */
      {8, 384, 2048, 0, 0, 0, 0, 0, 0}, {8, 384, 2048, 1, 0, 0, 0, 0, 0}, {3, 128, 200, 0, 0, 0, 0, 0, 0}, {3, 128, 200, 1, 0, 0, 0, 0, 0},
      {2, 256, 33, 0, 0, 0, 0, 0, 0},   {2, 256, 33, 1, 0, 0, 0, 0, 0},   {4, 128, 4624, 0, 0, 0, 0, 0, 0}, {3, 256, 1536, 0, 0, 0, 0, 0, 0},
      {2, 128, 640, 0, 0, 0, 0, 0, 0},  {2, 128, 1540, 0, 0, 0, 0, 0, 0}, {1, 128, 257, 0, 0, 0, 0, 0, 0},
      /* odd offsets and the fix-up: the row kernel's byte paths, and the batched kernel's layout jobs */
      {3, 256, 2048, 0, 1, 0, 1, 0, 0}, {3, 256, 2048, 0, 0, 1, 1, 0, 0}, {2, 128, 640, 1, 0, 0, 1, 0, 0}, {2, 128, 1536, 0, 0, 0, 1, 0, 0},
      /* vLLM's padding (rows each half to 128 for the gated layout, K to 256): 16-byte, word and byte
       * vectors of the padded rows, compact (the row kernel) and swizzled sources (the batched kernel) */
      {3, 144, 2880, 0, 0, 0, 0, 128, 256}, {3, 144, 2880, 1, 0, 0, 0, 128, 256}, {2, 200, 72, 0, 0, 0, 0, 256, 128},
      {2, 80, 200, 0, 0, 0, 1, 128, 256},   {2, 80, 33, 0, 1, 1, 0, 128, 64},    {4, 256, 96, 0, 0, 0, 0, 128, 256},
  };
  uint64_t rng = 91;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) run_case(&cases[i], (int)i, stream, &rng);
  CUDA_OK(cudaStreamDestroy(stream));
}

/* Padded experts into the layouts that keep row order: values through the row kernel's identity order,
 * scales through the batched kernel's layout jobs (16-byte, word and byte value rows). */
static void test_gpu_padding_into_row_order_layouts(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const int32_t layouts[] = {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED,
                                    MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32};
  static const int64_t shapes[][5] = {/* experts, n, k, rows_to, cols_to */
                                      {3, 100, 200, 48, 256}, {2, 37, 36, 8, 64}, {2, 64, 33, 128, 0}};
  uint64_t rng = 92;
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; ++l) {
      const int64_t experts = shapes[sh][0], n = shapes[sh][1], k = shapes[sh][2], c = ref_ceil_div(k, 32);
      uint8_t *values = malloc((size_t)(experts * n * k)), *compact = malloc((size_t)(experts * n * c));
      fill_random(values, (size_t)(experts * n * k), &rng);
      fill_random_scales(compact, (size_t)(experts * n * c), &rng);
      struct ref_padded shape = ref_pad_expert(values, compact, n, k, shapes[sh][3], shapes[sh][4], 0, 127);
      const int64_t np = shape.n, kp = shape.k;
      int64_t per = 0;
      free(ref_layout(shape.scales, np, shape.c, layouts[l], 0, &per));
      ref_padded_free(&shape);
      uint8_t *want_v = malloc((size_t)(experts * np * kp) + 1), *want_s = malloc((size_t)(experts * per) + 1);
      for (int64_t e = 0; e < experts; ++e) {
        struct ref_padded p = ref_pad_expert(values + e * n * k, compact + e * n * c, n, k, shapes[sh][3], shapes[sh][4], 0, 127);
        int64_t bytes = 0;
        uint8_t *laid = ref_layout(p.scales, np, p.c, layouts[l], 0, &bytes);
        memcpy(want_v + e * np * kp, p.values, (size_t)(np * kp));
        memcpy(want_s + e * per, laid, (size_t)per);
        free(laid);
        ref_padded_free(&p);
      }
      uint8_t *dv = device_at(values, (size_t)(experts * n * k), 0), *ds = device_at(compact, (size_t)(experts * n * c), 0);
      int64_t vshape[2] = {experts * n, k}, sshape[1] = {experts * n * c};
      DLManagedTensorVersioned mv = {0}, ms = {0};
      mv.version.major = DLPACK_MAJOR_VERSION, ms.version.major = DLPACK_MAJOR_VERSION;
      mv.dl_tensor = (DLTensor){dv, {kDLCUDA, 0}, 2, {kDLUInt, 8, 1}, vshape, NULL, 0};
      ms.dl_tensor = (DLTensor){ds, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
      mxfp8_grouped_desc d = MXFP8_GROUPED_DESC_INIT;
      d.scale_layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR;
      d.scales = MXFP8_GROUPED_SCALES_COMPACT;
      d.num_experts = (int32_t)experts;
      d.cols = k;
      d.uniform_rows = n;
      d.data = &mv;
      d.scale_inv = &ms;
      mxfp8_grouped_tensor *g = NULL;
      assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
      uint8_t *pv = device_at(NULL, (size_t)(experts * np * kp), 0), *ps = device_at(NULL, (size_t)(experts * per), 0);
      int64_t ov[1] = {experts * np * kp}, os[1] = {experts * per};
      DLTensor v = {pv, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, ov, NULL, 0};
      DLTensor sc = {ps, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, os, NULL, 0};
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      o.target = layouts[l];
      o.pad_rows_to = shapes[sh][3];
      o.pad_cols_to = shapes[sh][4];
      assert_int_equal(mxfp8_grouped_convert(g, &o, &v, &sc), MXFP8_OK);
      CUDA_OK(cudaDeviceSynchronize());
      expect_device(pv, 0, want_v, experts * np * kp, "padded values in row order", (int)(sh * 10 + l));
      expect_device(ps, 0, want_s, experts * per, "padded scales", (int)(sh * 10 + l));
      mxfp8_grouped_tensor_release(g);
      CUDA_OK(cudaFree(dv));
      CUDA_OK(cudaFree(ds));
      CUDA_OK(cudaFree(pv));
      CUDA_OK(cudaFree(ps));
      free(values);
      free(compact);
      free(want_v);
      free(want_s);
    }
}

#else
static void test_gpu_trtllm_grouped_matches_flashinfers_steps(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_padding_into_row_order_layouts(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_trtllm_grouped_matches_flashinfers_steps),
      cmocka_unit_test(test_gpu_padding_into_row_order_layouts),
  };
  return cmocka_run_group_tests_name("TRT-LLM targets on the GPU", tests, NULL, NULL);
}
