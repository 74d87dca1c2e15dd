/* The low-level pair mxfp8_swizzle_scales / mxfp8_unswizzle_scales between caller buffers, checked
 * against the layout's permute form, with poisoned destinations. */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static DLTensor host_bytes(uint8_t *p, int32_t ndim, int64_t *shape, int64_t *strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLUInt;
  t.dtype.bits = 8;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  return t;
}

static const int64_t kSizes[][2] = {{1, 1}, {100, 2}, {128, 4}, {257, 33}, {300, 7}, {31, 129}, {1024, 16}};

static void test_swizzle_matches_formula_and_zeroes_padding(void **state) {
  (void)state;
  uint64_t rng = 11;
  for (size_t i = 0; i < sizeof kSizes / sizeof kSizes[0]; ++i) {
    const int64_t r = kSizes[i][0], c = kSizes[i][1];
    const int64_t rp = ref_round_up(r, 128), cp = ref_round_up(c, 4);
    uint8_t *s = malloc((size_t)(r * c)), *swz = malloc((size_t)(rp * cp)), *back = malloc((size_t)(r * c));
    fill_random_scales(s, (size_t)(r * c), &rng);
    memset(swz, POISON, (size_t)(rp * cp));
    memset(back, POISON, (size_t)(r * c));
    int64_t s_shape[2] = {r, c}, swz_shape[1] = {rp * cp};
    DLTensor compact = host_bytes(s, 2, s_shape, NULL), swizzled = host_bytes(swz, 1, swz_shape, NULL);
    assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_OK);
    /* every real scale where the formula puts it, every padding byte zero */
    uint8_t *expected = calloc((size_t)(rp * cp), 1);
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) expected[ref_swizzled_index(y, x, cp)] = s[y * c + x];
    EXPECT(memcmp(expected, swz, (size_t)(rp * cp)) == 0, "%lld x %lld: swizzled bytes differ", (long long)r, (long long)c);
    DLTensor out = host_bytes(back, 2, s_shape, NULL);
    assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &out, NULL), MXFP8_OK);
    EXPECT(memcmp(s, back, (size_t)(r * c)) == 0, "%lld x %lld: round trip differs", (long long)r, (long long)c);
    free(s);
    free(swz);
    free(back);
    free(expected);
  }
}

static void test_unswizzle_into_a_transposed_view(void **state) {
  (void)state;
  /* Columnwise scales are swizzled as S^T (K x Mb): unswizzling into a (K, Mb) view with strides
   * (1, K) of an (Mb, K) buffer yields S itself. */
  uint64_t rng = 12;
  const int64_t mb = 5, k = 200, rp = ref_round_up(k, 128), cp = ref_round_up(mb, 4);
  uint8_t s[5 * 200], swz[256 * 8], out[5 * 200];
  fill_random_scales(s, sizeof s, &rng);
  memset(swz, POISON, sizeof swz);
  for (int64_t y = 0; y < mb; ++y)
    for (int64_t x = 0; x < k; ++x) swz[ref_swizzled_index(x, y, cp)] = s[y * k + x];
  memset(out, POISON, sizeof out);
  int64_t swz_shape[2] = {rp, cp}, view_shape[2] = {k, mb}, view_strides[2] = {1, k};
  DLTensor swizzled = host_bytes(swz, 2, swz_shape, NULL), view = host_bytes(out, 2, view_shape, view_strides);
  assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &view, NULL), MXFP8_OK);
  assert_memory_equal(s, out, sizeof s);
}

/* Strides that give every element a byte of its own are any such strides, as layout.h says: the exact
 * rule, checked here against a brute-force search for a shared byte, on interleavings the older rule
 * ("the larger stride clears the other axis's span") refused. */
static void test_unswizzle_into_any_strides_with_a_byte_per_element(void **state) {
  (void)state;
  static const int64_t cases[][4] = {/* rows, cols, row stride, col stride */
                                     {100, 2, 2, 99}, {50, 2, 3, 100}, {7, 5, 5, 1}, {100, 2, 2, 98},
                                     {6, 4, 4, 6},    {6, 4, 4, 7},    {3, 3, 0, 1}, {33, 3, 3, 1}};
  uint64_t rng = 13;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const int64_t r = cases[i][0], c = cases[i][1], rs = cases[i][2], cs = cases[i][3];
    const int64_t span = (r - 1) * rs + (c - 1) * cs + 1, rp = ref_round_up(r, 128), cp = ref_round_up(c, 4);
    uint8_t *s = malloc((size_t)(r * c)), *swz = malloc((size_t)(rp * cp)), *out = malloc((size_t)span);
    int *owners = calloc((size_t)span, sizeof *owners);
    int shared = 0;
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) shared |= owners[y * rs + x * cs]++;
    fill_random_scales(s, (size_t)(r * c), &rng);
    memset(swz, POISON, (size_t)(rp * cp));
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) swz[ref_swizzled_index(y, x, cp)] = s[y * c + x];
    memset(out, POISON, (size_t)span);
    int64_t swz_shape[1] = {rp * cp}, shape[2] = {r, c}, strides[2] = {rs, cs};
    DLTensor swizzled = host_bytes(swz, 1, swz_shape, NULL), view = host_bytes(out, 2, shape, strides);
    const mxfp8_status st = mxfp8_unswizzle_scales(&swizzled, &view, NULL);
    EXPECT(st == (shared ? MXFP8_ERROR_INVALID_ARGUMENT : MXFP8_OK), "(%lld, %lld) strides (%lld, %lld): status %d, %s",
           (long long)r, (long long)c, (long long)rs, (long long)cs, (int)st, shared ? "bytes shared" : "a byte each");
    for (int64_t b = 0; b < span; ++b)
      if (shared || !owners[b]) EXPECT(out[b] == POISON, "byte %lld written", (long long)b);
    if (!shared)
      for (int64_t y = 0; y < r; ++y)
        for (int64_t x = 0; x < c; ++x)
          EXPECT(out[y * rs + x * cs] == s[y * c + x], "(%lld, %lld) at (%lld, %lld)", (long long)y, (long long)x,
                 (long long)rs, (long long)cs);
    free(s);
    free(swz);
    free(out);
    free(owners);
  }
}

static void test_bad_pairs_are_rejected(void **state) {
  (void)state;
  uint8_t a[512], b[512];
  int64_t compact_shape[2] = {100, 2}, small[1] = {200}, right[1] = {512};
  DLTensor compact = host_bytes(a, 2, compact_shape, NULL), wrong = host_bytes(b, 1, small, NULL),
           swizzled = host_bytes(b, 1, right, NULL);
  assert_int_equal(mxfp8_unswizzle_scales(&wrong, &compact, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("128 x 4 = 512 bytes, got 200");
  assert_int_equal(mxfp8_unswizzle_scales(NULL, &compact, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("swizzled is NULL");
  assert_int_equal(mxfp8_swizzle_scales(&compact, NULL, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  swizzled.dtype.code = kDLFloat;
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("swizzled: dtype float8");
  swizzled.dtype.code = kDLUInt;
  swizzled.device.device_type = kDLCUDA;
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("swizzled is on cuda:0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_swizzle_matches_formula_and_zeroes_padding),
      cmocka_unit_test(test_unswizzle_into_a_transposed_view),
      cmocka_unit_test(test_unswizzle_into_any_strides_with_a_byte_per_element),
      cmocka_unit_test(test_bad_pairs_are_rejected),
  };
  return cmocka_run_group_tests_name("swizzle and unswizzle between caller buffers", tests, NULL, NULL);
}
