/* The FlashInfer TRT-LLM MoE targets on the host: mxfp8_grouped_convert and mxfp8_convert into
 * MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED (w2) and MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED (w13 of SwiGLU experts),
 * against trtllm_reference.h (the consumers' steps, one at a time). Sources are TE storage (compact,
 * padded with poisoned padding, 128x4 swizzled), outputs are poisoned, K is not a multiple of 32 and
 * ceil(K/32) not of 4; the outputs are also undone with the reference's row indices back to the compact
 * source (the round trip), and the shapes FlashInfer cannot take are refused. */
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "import_support.h"
#include "trtllm_reference.h"

static const int32_t kLayouts[2] = {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED};
static const char *const kNames[2] = {"trtllm", "trtllm_gated"};

static void expect_same(const uint8_t *got, const uint8_t *want, int64_t n, const char *what, const char *layout,
                        int64_t experts, int64_t rows, int64_t k) {
  int64_t bad = 0;
  for (int64_t b = 0; b < n; ++b) bad += got[b] != want[b];
  EXPECT(bad == 0, "%s (%s, %lld experts of %lld x %lld): %lld bytes differ", what, layout, (long long)experts,
         (long long)rows, (long long)k, (long long)bad);
  EXPECT(got[n] == POISON, "%s (%s): written past the end", what, layout);
}

static void test_grouped_experts_match_flashinfers_steps(void **state) {
  (void)state;
  uint64_t rng = 77;
  /* rows: one 128-row block, and three (the gated halves are then 192 rows: not a multiple of 128);
   * K: 200 (C = 7, K % 32 = 8), 96 (C = 3), 256 (C = 8: no padding column) */
  static const int64_t shapes[][3] = {{3, 128, 200}, {2, 384, 96}, {4, 256, 256}, {1, 128, 33}};
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
    for (int variant = 0; variant < 3; ++variant) {
      const int64_t experts = shapes[s][0], n = shapes[s][1], k = shapes[s][2], c = ref_ceil_div(k, 32);
      const int64_t cp = ref_round_up(c, 4);
      uint8_t *values = malloc((size_t)(experts * n * k));
      fill_random(values, (size_t)(experts * n * k), &rng);
      uint8_t *compact = malloc((size_t)(experts * n * c));
      fill_random_scales(compact, (size_t)(experts * n * c), &rng);
      test_tensor *data, *scales;
      mxfp8_grouped_tensor *g = make_grouped(values, compact, experts, n, k, variant, &data, &scales);
      for (int l = 0; l < 2; ++l) {
        uint8_t *want_v = malloc((size_t)(experts * n * k) + 1), *want_s = malloc((size_t)(experts * n * cp) + 1);
        for (int64_t e = 0; e < experts; ++e)
          ref_trtllm(values + e * n * k, compact + e * n * c, n, k, c, l, want_v + e * n * k, want_s + e * n * cp);
        int64_t bytes = -1;
        assert_int_equal(mxfp8_layout_bytes(kLayouts[l], MXFP8_DIRECTION_ROWWISE, n, c, &bytes), MXFP8_OK);
        EXPECT(bytes == n * cp, "%s: mxfp8_layout_bytes %lld, expected %lld", kNames[l], (long long)bytes, (long long)(n * cp));
        uint8_t *out_v = poisoned(experts * n * k), *out_s = poisoned(experts * n * cp);
        /* Shaped as vLLM's parameters: w [E, M, K] and (C % 4 == 0) scales [E, M, C]; flat otherwise. */
        int64_t vshape[3] = {experts, n, k}, sshape[3] = {experts, n, cp};
        DLTensor v = {out_v, {kDLCPU, 0}, 3, {kDLFloat8_e4m3fn, 8, 1}, vshape, NULL, 0};
        DLTensor sc = {out_s, {kDLCPU, 0}, 3, {kDLUInt, 8, 1}, sshape, NULL, 0};
        mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
        o.target = kLayouts[l];
        assert_int_equal(mxfp8_grouped_convert(g, &o, &v, &sc), MXFP8_OK);
        expect_same(out_v, want_v, experts * n * k, "values", kNames[l], experts, n, k);
        expect_same(out_s, want_s, experts * n * cp, "scales", kNames[l], experts, n, k);
        /* The round trip: the reference's row indices undo both, back to the compact source. */
        int64_t *idx = ref_trtllm_row_indices(n, l);
        int64_t bad = 0;
        for (int64_t e = 0; e < experts; ++e)
          for (int64_t j = 0; j < n; ++j) {
            const int64_t row = e * n + idx[j];
            bad += memcmp(out_v + (e * n + j) * k, values + row * k, (size_t)k) != 0;
            for (int64_t x = 0; x < cp; ++x) {
              const uint8_t got = out_s[e * n * cp + ref_swizzled_index(j, x, cp)];
              bad += x < c ? got != compact[row * c + x] : got != 0; /* padding columns are zero */
            }
          }
        EXPECT(bad == 0, "%s round trip: %lld rows or scales do not come back", kNames[l], (long long)bad);
        free(idx);
        free(out_v);
        free(out_s);
        free(want_v);
        free(want_s);
      }
      mxfp8_grouped_tensor_release(g);
      test_tensor_free(data);
      test_tensor_free(scales);
      free(values);
      free(compact);
    }
}

/* One expert as one mxfp8_tensor: the same bytes. A 3-D tensor is fine for the plain shuffle (it works in
 * 32-row blocks) and refused for the gated one, which needs each expert's halves. */
static void test_one_tensor_is_one_expert(void **state) {
  (void)state;
  uint64_t rng = 78;
  for (int source = 0; source < 2; ++source)
    for (int l = 0; l < 2; ++l) {
      const spec s = {2, {256, 200, 0}, MXFP8_DIRECTION_ROWWISE, source, 0};
      te_tensor t = make_te(&s, &rng);
      const int64_t m = 256, k = 200, c = 7, cp = 8;
      uint8_t *want_v = malloc((size_t)(m * k) + 1), *want_s = malloc((size_t)(m * cp) + 1);
      ref_trtllm(t.ref.values, t.ref.compact, m, k, c, l, want_v, want_s);
      uint8_t *out_v = poisoned(m * k), *out_s = poisoned(m * cp);
      int64_t vshape[1] = {m * k}, sshape[1] = {m * cp};
      DLTensor v = {out_v, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
      DLTensor sc = {out_s, {kDLCPU, 0}, 1, {kDLFloat8_e8m0fnu, 8, 1}, sshape, NULL, 0};
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      o.target = kLayouts[l];
      assert_int_equal(mxfp8_convert(t.handle, &o, &v, &sc), MXFP8_OK);
      expect_same(out_v, want_v, m * k, "values", kNames[l], 1, m, k);
      expect_same(out_s, want_s, m * cp, "scales", kNames[l], 1, m, k);
      /* Scales alone: refused, since the values would stay in the old row order. */
      memset(out_s, POISON, (size_t)(m * cp) + 1);
      assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &sc), MXFP8_ERROR_INVALID_ARGUMENT);
      assert_last_error_contains("values is NULL, but options.target");
      EXPECT(out_s[0] == POISON, "a refused convert wrote");
      free(out_v);
      free(out_s);
      free(want_v);
      free(want_s);
      free_te(&t);
    }
  /* [2, 128, 64]: two experts in one tensor. */
  const spec s3 = {3, {2, 128, 64}, MXFP8_DIRECTION_ROWWISE, 0, 0};
  te_tensor t = make_te(&s3, &rng);
  uint8_t *want_v = malloc(2 * 128 * 64 + 1), *want_s = malloc(2 * 128 * 4 + 1);
  for (int e = 0; e < 2; ++e)
    ref_trtllm(t.ref.values + e * 128 * 64, t.ref.compact + e * 128 * 2, 128, 64, 2, 0, want_v + e * 128 * 64,
               want_s + e * 128 * 4);
  uint8_t *out_v = poisoned(2 * 128 * 64), *out_s = poisoned(2 * 128 * 4);
  int64_t vshape[1] = {2 * 128 * 64}, sshape[1] = {2 * 128 * 4};
  DLTensor v = {out_v, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
  DLTensor sc = {out_s, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &sc), MXFP8_OK);
  expect_same(out_v, want_v, 2 * 128 * 64, "3-D values", "trtllm", 2, 128, 64);
  expect_same(out_s, want_s, 2 * 128 * 4, "3-D scales", "trtllm", 2, 128, 64);
  memset(out_v, POISON, 2 * 128 * 64 + 1);
  memset(out_s, POISON, 2 * 128 * 4 + 1);
  o.target = MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &sc), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("convert stacked experts with mxfp8_grouped_convert");
  EXPECT(out_v[0] == POISON && out_s[0] == POISON, "a refused convert wrote");
  free(out_v);
  free(out_s);
  free(want_v);
  free(want_s);
  free_te(&t);
}

/* What FlashInfer cannot take: rows not a multiple of 128 (the values' 32-row blocks are not enough,
 * the scales' interleave needs 128), columnwise scales; and a bucket or import target (its values are in
 * row order). Nothing is written. */
static void test_shapes_flashinfer_cannot_take_are_refused(void **state) {
  (void)state;
  uint64_t rng = 79;
  for (int l = 0; l < 2; ++l) {
    int64_t bytes = -7;
    for (int64_t rows = 32; rows <= 224; rows += 32) {
      if (rows == 128) continue;
      assert_int_equal(mxfp8_layout_bytes(kLayouts[l], MXFP8_DIRECTION_ROWWISE, rows, 2, &bytes),
                       MXFP8_ERROR_INVALID_ARGUMENT);
      assert_last_error_contains("multiple of 128");
    }
    assert_int_equal(mxfp8_layout_bytes(kLayouts[l], MXFP8_DIRECTION_COLUMNWISE, 128, 2, &bytes), MXFP8_ERROR_INVALID_ARGUMENT);
    assert_last_error_contains("rowwise scales only");
    EXPECT(bytes == -7, "*bytes written on failure");
    const spec s = {2, {96, 64, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0}; /* 96 rows: whole 32-row blocks only */
    te_tensor t = make_te(&s, &rng);
    uint8_t *out_v = poisoned(96 * 64), *out_s = poisoned(96 * 4);
    int64_t vshape[1] = {96 * 64}, sshape[1] = {96 * 4};
    DLTensor v = {out_v, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
    DLTensor sc = {out_s, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = kLayouts[l];
    assert_int_equal(mxfp8_convert(t.handle, &o, &v, &sc), MXFP8_ERROR_INVALID_ARGUMENT);
    assert_last_error_contains("needs rows (per expert) a multiple of 128");
    assert_last_error_contains("got 96");
    EXPECT(out_v[0] == POISON && out_s[0] == POISON, "a refused convert wrote");
    /* A TO_BUFFERS transfer whose target layout is a TRT-LLM one. */
    const mxfp8_tensor *handle = t.handle;
    DLTensor *values[1] = {&v}, *scales[1] = {&sc};
    mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
    d.tensors = &handle;
    d.values = values;
    d.scales = scales;
    d.target_layouts = &kLayouts[l];
    assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
    assert_last_error_contains("desc.target_layouts[0] is MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED");
    assert_last_error_contains("write it with mxfp8_convert");
    EXPECT(out_v[0] == POISON && out_s[0] == POISON, "a refused import wrote");
    free(out_v);
    free(out_s);
    free_te(&t);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_grouped_experts_match_flashinfers_steps),
      cmocka_unit_test(test_one_tensor_is_one_expert),
      cmocka_unit_test(test_shapes_flashinfer_cannot_take_are_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
