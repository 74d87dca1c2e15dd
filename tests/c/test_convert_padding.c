/* An engine's padding in mxfp8_convert / mxfp8_grouped_convert (options.pad_rows_to, pad_cols_to,
 * pad_scale) on the host: vLLM's align_mxfp8_moe_weights_for_fi_trtllm followed by its swap and
 * FlashInfer's shuffle, each written out in padding_reference.h and trtllm_reference.h, against the
 * library's one call. Sources are TE storage (compact, padded row-major with poisoned padding, 128x4
 * swizzled), outputs are poisoned; shapes pad rows only, K only, both, and neither (aligned already);
 * K is not a multiple of 32 in some. The row-order layouts take padding too, and every bad option is
 * refused before anything is written, with options.flags = MXFP8_CHECK_ONLY as without it;
 * with it an accepted convert writes nothing, even at addresses nobody owns. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "padding_reference.h"
#include "trtllm_reference.h"

static void expect_bytes(const uint8_t *got, const uint8_t *want, int64_t n, const char *what, int case_index, int variant) {
  int64_t bad = 0, first = -1;
  for (int64_t b = 0; b < n; ++b)
    if (got[b] != want[b] && bad++ == 0) first = b;
  EXPECT(bad == 0, "%s (case %d, source %d): %lld of %lld bytes differ, the first at %lld", what, case_index, variant,
         (long long)bad, (long long)n, (long long)first);
  EXPECT(got[n] == POISON, "%s (case %d, source %d): written past the end", what, case_index, variant);
}

struct PadCase {
  int64_t experts, n, k, rows_to, cols_to;
  int gated;
  int pad_scale;
};

/* vLLM 0.33 pads w13 [E, 2I, H] with (128, 256), gated, and w2 [E, H, I] with (256, 128). */
static const struct PadCase kCases[] = {
    {2, 2 * 72, 200, 128, 256, 1, 127},  /* w13: I 72 -> 128 a half, H 200 -> 256 (C 7 -> 8) */
    {2, 200, 72, 256, 128, 0, 127},      /* w2: H 200 -> 256, I 72 -> 128 (C 3 -> 4) */
    {3, 2 * 128, 96, 128, 256, 1, 127},  /* rows aligned already: K alone, 96 -> 256 */
    {1, 2 * 40, 64, 128, 0, 1, 127},     /* rows alone: I 40 -> 128, K as it is */
    {2, 128, 256, 128, 256, 0, 127},     /* aligned: the padded call is the plain one */
    {2, 2 * 64, 33, 128, 64, 1, 1},      /* K 33 (a partial block) -> 64; another padding scale */
};

static void test_padded_experts_match_vllms_alignment_then_shuffle(void **state) {
  (void)state;
  uint64_t rng = 301;
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; ++i)
    for (int variant = 0; variant < 3; ++variant) {
      const struct PadCase *pc = &kCases[i];
      const int64_t experts = pc->experts, n = pc->n, k = pc->k, c = ref_ceil_div(k, 32);
      uint8_t *values = malloc((size_t)(experts * n * k)), *compact = malloc((size_t)(experts * n * c));
      fill_random(values, (size_t)(experts * n * k), &rng);
      fill_random_scales(compact, (size_t)(experts * n * c), &rng);
      test_tensor *data, *scales;
      mxfp8_grouped_tensor *g = make_grouped(values, compact, experts, n, k, variant, &data, &scales);
      struct ref_padded first = ref_pad_expert(values, compact, n, k, pc->rows_to, pc->cols_to, pc->gated, (uint8_t)pc->pad_scale);
      const int64_t np = first.n, kp = first.k, cp = first.c, cp4 = ref_round_up(cp, 4);
      ref_padded_free(&first);
      uint8_t *want_v = malloc((size_t)(experts * np * kp) + 1), *want_s = malloc((size_t)(experts * np * cp4) + 1);
      for (int64_t e = 0; e < experts; ++e) {
        struct ref_padded p = ref_pad_expert(values + e * n * k, compact + e * n * c, n, k, pc->rows_to, pc->cols_to,
                                             pc->gated, (uint8_t)pc->pad_scale);
        ref_trtllm(p.values, p.scales, np, kp, cp, pc->gated, want_v + e * np * kp, want_s + e * np * cp4);
        ref_padded_free(&p);
      }
      uint8_t *out_v = poisoned(experts * np * kp), *out_s = poisoned(experts * np * cp4);
      int64_t vshape[3] = {experts, np, kp}, sshape[1] = {experts * np * cp4};
      DLTensor v = {out_v, {kDLCPU, 0}, 3, {kDLFloat8_e4m3fn, 8, 1}, vshape, NULL, 0};
      DLTensor s = {out_s, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      EXPECT(o.pad_scale == 127 && o.pad_rows_to == 0 && o.pad_cols_to == 0, "MXFP8_CONVERT_OPTIONS_INIT pads nothing, with 127");
      o.target = pc->gated ? MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED : MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED;
      o.pad_rows_to = pc->rows_to;
      o.pad_cols_to = pc->cols_to;
      o.pad_scale = pc->pad_scale;
      assert_int_equal(mxfp8_grouped_convert(g, &o, &v, &s), MXFP8_OK);
      expect_bytes(out_v, want_v, experts * np * kp, "padded values", (int)i, variant);
      expect_bytes(out_s, want_s, experts * np * cp4, "padded scales", (int)i, variant);
      /* The unpadded sizes are refused: a caller's buffers follow the padded shape. */
      if (np != n || kp != k) {
        int64_t small[3] = {experts, n, k};
        v.shape = small;
        memset(out_v, POISON, (size_t)(experts * np * kp) + 1);
        assert_int_equal(mxfp8_grouped_convert(g, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
        EXPECT(out_v[0] == POISON && out_s[experts * np * cp4] == POISON, "a refused convert wrote");
      }
      free(out_v);
      free(out_s);
      free(want_v);
      free(want_s);
      mxfp8_grouped_tensor_release(g);
      test_tensor_free(data);
      test_tensor_free(scales);
      free(values);
      free(compact);
    }
}

/* One tensor (mxfp8_convert) into the layouts that keep row order, padded: the padded matrix in each
 * layout (engine_layouts_support.h's references), values padded with zeros in row order. */
static void test_padding_into_row_order_layouts(void **state) {
  (void)state;
  uint64_t rng = 302;
  static const int32_t layouts[] = {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED,
                                    MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32};
  for (int source = 0; source < 2; ++source)
    for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; ++l) {
      const spec sp = {2, {100, 200, 0}, MXFP8_DIRECTION_ROWWISE, source, 0};
      te_tensor t = make_te(&sp, &rng);
      struct ref_padded p = ref_pad_expert(t.ref.values, t.ref.compact, 100, 200, 48, 256, 0, 127);  /* 144 x 256, C 8 */
      int64_t bytes = 0;
      uint8_t *want_s = ref_layout(p.scales, p.n, p.c, layouts[l], 0, &bytes);
      uint8_t *out_v = poisoned(p.n * p.k), *out_s = poisoned(bytes);
      int64_t vshape[2] = {p.n, p.k}, sshape[1] = {bytes};
      DLTensor v = {out_v, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, vshape, NULL, 0};
      DLTensor s = {out_s, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      o.target = layouts[l];
      o.pad_rows_to = 48;
      o.pad_cols_to = 256;
      assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_OK);
      expect_bytes(out_v, p.values, p.n * p.k, "padded values in row order", (int)l, source);
      expect_bytes(out_s, want_s, bytes, "padded scales", (int)l, source);
      free(out_v);
      free(out_s);
      free(want_s);
      ref_padded_free(&p);
      free_te(&t);
    }
}

/* Bad padding options, each refused with a message that names it, nothing written. */
static void test_bad_padding_is_refused(void **state) {
  (void)state;
  uint64_t rng = 303;
  const spec sp = {2, {2 * 72, 200, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0};
  te_tensor t = make_te(&sp, &rng);
  uint8_t *out_v = poisoned(256 * 256), *out_s = poisoned(256 * 8);
  int64_t vshape[1] = {256 * 256}, sshape[1] = {256 * 8};
  DLTensor v = {out_v, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
  DLTensor s = {out_s, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  struct {
    int64_t rows_to, cols_to;
    int pad_scale, direction, no_values;
    const char *message;
  } cases[] = {
      {-128, 256, 127, MXFP8_DIRECTION_ROWWISE, 0, "a multiple to pad to, or 0 for none"},
      {128, -256, 127, MXFP8_DIRECTION_ROWWISE, 0, "a multiple to pad to, or 0 for none"},
      {128, 48, 127, MXFP8_DIRECTION_ROWWISE, 0, "pad_cols_to is 48, not a multiple of 32"},
      {128, 256, 255, MXFP8_DIRECTION_ROWWISE, 0, "255 is NaN"},
      {128, 256, -1, MXFP8_DIRECTION_ROWWISE, 0, "expected an E8M0 byte 0 .. 254"},
      {128, 256, 127, MXFP8_DIRECTION_COLUMNWISE, 0, "pad a rowwise weight"},
      {128, 256, 127, MXFP8_DIRECTION_ROWWISE, 1, "values is NULL, but options.pad_rows_to / pad_cols_to pad the weight"},
  };
  for (int check_only = 0; check_only < 2; ++check_only) /* the same refusal, status and message, checked only */
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.flags = check_only ? MXFP8_CHECK_ONLY : 0u;
    /* a target that keeps row order, so that only the padding asks for the values */
    o.target = cases[i].no_values ? MXFP8_SCALE_LAYOUT_COMPACT : MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
    o.pad_rows_to = cases[i].rows_to;
    o.pad_cols_to = cases[i].cols_to;
    o.pad_scale = cases[i].pad_scale;
    o.direction = cases[i].direction;
    assert_int_equal(mxfp8_convert(t.handle, &o, cases[i].no_values ? NULL : &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    assert_last_error_contains(cases[i].message);
    EXPECT(out_v[0] == POISON && out_s[0] == POISON, "case %zu: a refused convert wrote", i);
  }
  free_te(&t);
  /* The gated target pads each half: an odd row count has no halves. */
  const spec odd = {2, {99, 64, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0};
  t = make_te(&odd, &rng);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  o.pad_rows_to = 128;
  for (int check_only = 0; check_only < 2; ++check_only) {
    o.flags = check_only ? MXFP8_CHECK_ONLY : 0u;
    assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    assert_last_error_contains("an odd count");
    EXPECT(out_v[0] == POISON && out_s[0] == POISON, "a refused convert wrote");
  }
  free_te(&t);
  free(out_v);
  free(out_s);
}

/* MXFP8_CHECK_ONLY accepts what the convert accepts and writes nothing: outputs described at
 * addresses no memory backs (their bytes are never touched), a single tensor and grouped experts, a
 * target that permutes rows with padding; then the real convert of the same request succeeds. Unknown
 * flag bits are refused. */
static void test_check_only_writes_nothing(void **state) {
  (void)state;
  uint64_t rng = 305;
  const int64_t experts = 2, n = 2 * 72, k = 200, c = ref_ceil_div(k, 32);
  uint8_t *values = malloc((size_t)(experts * n * k)), *compact = malloc((size_t)(experts * n * c));
  fill_random(values, (size_t)(experts * n * k), &rng);
  fill_random_scales(compact, (size_t)(experts * n * c), &rng);
  test_tensor *data, *scales;
  mxfp8_grouped_tensor *g = make_grouped(values, compact, experts, n, k, 2, &data, &scales); /* 128x4 swizzled */
  const spec sp = {2, {n, k, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0};
  te_tensor t = make_te(&sp, &rng);
  /* Padded (128, 256), gated: each expert 256 x 256 values and 256 x 8 scales. */
  int64_t vshape[3] = {experts, 256, 256}, sshape[1] = {experts * 256 * 8};
  DLTensor v = {(void *)(uintptr_t)(UINT64_C(1) << 40), {kDLCPU, 0}, 3, {kDLUInt, 8, 1}, vshape, NULL, 0};
  DLTensor s = {(void *)(uintptr_t)(UINT64_C(2) << 40), {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  o.pad_rows_to = 128;
  o.pad_cols_to = 256;
  o.flags = MXFP8_CHECK_ONLY;
  assert_int_equal(mxfp8_grouped_convert(g, &o, &v, &s), MXFP8_OK);
  vshape[0] = 1;
  sshape[0] = 256 * 8;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_OK);
  sshape[0] = 256 * 8 - 1; /* a size the convert refuses is refused as well */
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
  o.flags = 2;
  sshape[0] = 256 * 8;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("options.flags is 2, expected MXFP8_CHECK_ONLY (1) or 0");
  /* The same request, converted, into real buffers (poisoned, so that a write shows). */
  uint8_t *out_v = poisoned(256 * 256), *out_s = poisoned(256 * 8);
  v.data = out_v;
  s.data = out_s;
  o.flags = MXFP8_CHECK_ONLY;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_OK);
  EXPECT(out_v[0] == POISON && out_v[256 * 256 - 1] == POISON && out_s[0] == POISON && out_s[256 * 8 - 1] == POISON,
         "a checked-only convert wrote");
  o.flags = 0;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_OK);
  EXPECT(out_s[0] != POISON || out_s[1] != POISON, "the convert itself wrote nothing");
  free(out_v);
  free(out_s);
  free_te(&t);
  mxfp8_grouped_tensor_release(g);
  test_tensor_free(data);
  test_tensor_free(scales);
  free(values);
  free(compact);
}

/* A caller built before the padding fields (struct_size ends at `stream`) pads nothing, whatever follows
 * its struct in memory; a size inside the new fields is no version of the struct. */
static void test_an_older_caller_pads_nothing(void **state) {
  (void)state;
  uint64_t rng = 304;
  const spec sp = {2, {128, 64, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0};
  te_tensor t = make_te(&sp, &rng);
  uint8_t *out_v = poisoned(128 * 64), *out_s = poisoned(128 * 2);
  int64_t vshape[1] = {128 * 64}, sshape[1] = {128 * 2};
  DLTensor v = {out_v, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, vshape, NULL, 0};
  DLTensor s = {out_s, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.struct_size = (uint32_t)offsetof(mxfp8_convert_options, pad_rows_to);
  o.pad_rows_to = 256; /* past the caller's struct: not read */
  o.pad_cols_to = 256;
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_OK);
  expect_bytes(out_v, t.ref.values, 128 * 64, "values of an older caller", 0, 0);
  expect_bytes(out_s, t.ref.compact, 128 * 2, "scales of an older caller", 0, 0);
  o.struct_size = (uint32_t)offsetof(mxfp8_convert_options, pad_cols_to);
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("which ends inside a field");
  /* A caller built before `flags` (48 bytes) converts, whatever lies in its struct's last 4 bytes of
   * padding and past it. */
  memset(out_v, POISON, 128 * 64);
  o.struct_size = (uint32_t)offsetof(mxfp8_convert_options, flags);
  o.pad_rows_to = 0;
  o.pad_cols_to = 0;
  memset((char *)&o + offsetof(mxfp8_convert_options, pad_scale) + sizeof o.pad_scale, 0xFF,
         sizeof o - offsetof(mxfp8_convert_options, pad_scale) - sizeof o.pad_scale);
  assert_int_equal(mxfp8_convert(t.handle, &o, &v, &s), MXFP8_OK);
  expect_bytes(out_v, t.ref.values, 128 * 64, "values of a caller without flags", 0, 0);
  free(out_v);
  free(out_s);
  free_te(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_padded_experts_match_vllms_alignment_then_shuffle),
      cmocka_unit_test(test_padding_into_row_order_layouts),
      cmocka_unit_test(test_bad_padding_is_refused),
      cmocka_unit_test(test_check_only_writes_nothing),
      cmocka_unit_test(test_an_older_caller_pads_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
