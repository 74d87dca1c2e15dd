/* mxfp8_quantize, mxfp8_quantize_into and mxfp8_dequantize on the host: answers worked out by hand from
 * the rules, the TE layouts against the permute form of the swizzle, the outputs handed straight to a
 * tensor description and exported back, and every output byte written; NVFP4 known answers. (Bit-exactness
 * on random data with every special value is checked against independent NumPy references in
 * bindings/python/tests/test_quantize.py and test_nvfp4_quantize.py, and GPU against host in
 * test_gpu_quantize.c and test_gpu_nvfp4_quantize.c.) */
#include <fenv.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static DLTensor host_tensor(void *data, int32_t ndim, int64_t *shape, uint8_t code, uint8_t bits) {
  DLTensor t = {data, {kDLCPU, 0}, ndim, {code, bits, 1}, shape, NULL, 0};
  return t;
}

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* One 32-value block per row, first elements as given, the rest zero. */
static void quantize_rows(const float *first_two, int rows, const mxfp8_quantize_options *o, uint8_t *values,
                          uint8_t *scales) {
  float *x = calloc((size_t)rows * 32, sizeof *x);
  for (int r = 0; r < rows; ++r) x[r * 32] = first_two[2 * r], x[r * 32 + 1] = first_two[2 * r + 1];
  int64_t xs[2] = {rows, 32}, ss[2] = {rows, 1};
  DLTensor in = host_tensor(x, 2, xs, kDLFloat, 32);
  DLTensor v = host_tensor(values, 2, xs, kDLUInt, 8), s = host_tensor(scales, 2, ss, kDLUInt, 8);
  assert_int_equal(mxfp8_quantize_into(&in, o, &v, &s, NULL, NULL), MXFP8_OK);
  free(x);
}

static void test_known_answers_e4m3_rceil_and_floor(void **state) {
  (void)state;
  const float inf = bits_to_float(0x7F800000u), snan = bits_to_float(0xFF800001u); /* -sNaN */
  const float rows[] = {
      1.0f, 0.0f,    /* 1 * float(1/448) -> 2^-8 rounded up: e 119; 1 * 2^8 = 256 = 0x78 */
      448.0f, 12.5f, /* 448 * float(1/448) is exactly 1: e 127; 448 = 0x7E; 12.5 ties to even: 12 = 0x54 */
      0.0f, -0.0f,   /* all zero: e 0, r(0) = 1; -0 keeps its sign: 0x80 */
      inf, 3.0f,     /* Inf: e 254, r(254) = 0; 3 * 0 = 0; Inf * 0 = NaN = 0x7F */
      2.0f, snan,    /* a signaling NaN is skipped by the amax too: e from 2 = 120; 2 * 2^7 = 256; NaN is 0x7F */
      500.0f, -1e-30f, /* e 128 (500/448 > 1), 500/2 = 250 -> 256 (RNE); a tiny value rounds to -0 (0x80) */
      1e-38f, -1e-38f  /* amax * (1/448) <= 2^-127: e 0 and r(0) = 1 (not 2^127), so both round to +-0 */
  };
  uint8_t v[7 * 32], s[7];
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  quantize_rows(rows, 7, &o, v, s);
  const uint8_t scales[7] = {119, 127, 0, 254, 120, 128, 0};
  const uint8_t first[7] = {0x78, 0x7E, 0x00, 0x7F, 0x78, 0x78, 0x00};
  const uint8_t second[7] = {0x00, 0x54, 0x80, 0x00, 0x7F, 0x80, 0x80};
  for (int r = 0; r < 7; ++r) {
    EXPECT(s[r] == scales[r], "row %d: scale %u, expected %u", r, s[r], scales[r]);
    EXPECT(v[r * 32] == first[r] && v[r * 32 + 1] == second[r], "row %d: values 0x%02x 0x%02x", r, v[r * 32], v[r * 32 + 1]);
  }
  /* FLOOR (OCP): e = floor(log2 amax) - 8 + 127. 1 -> 119 (same); 448 -> 127 - 8 + 8 = 127; 500 -> 127, and
   * 500 saturates to 448 (0x7E); Inf -> 254 and r = 2^-127 exactly: 3 * 2^-127 -> 0, Inf stays Inf -> 448. */
  o.scale_rounding = MXFP8_SCALE_ROUNDING_FLOOR;
  quantize_rows(rows, 7, &o, v, s);
  EXPECT(s[0] == 119 && s[1] == 127 && s[2] == 0 && s[3] == 254 && s[5] == 127, "floor scales %u %u %u %u %u", s[0], s[1], s[2], s[3], s[5]);
  EXPECT(v[3 * 32] == 0x7E && v[3 * 32 + 1] == 0x00 && v[5 * 32] == 0x7E, "floor values 0x%02x 0x%02x 0x%02x", v[96], v[97], v[160]);
}

/* compressed-tensors' rule: p = amax rounded to a power of two (up from a mantissa of 1.75), e = log2(p) - 8
 * + 127 clamped to [0, 255]; a NaN counts as Inf; r(255) = 0. */
static void test_known_answers_compressed_tensors_rounding(void **state) {
  (void)state;
  const float inf = bits_to_float(0x7F800000u), nan_payload = bits_to_float(0x7FFFFFFFu);
  const float rows[] = {
      1.0f, 0.0f,       /* p 1: e 119; 1 * 2^8 = 256 = 0x78 */
      1.75f, -1.0f,     /* mantissa .75 rounds up: p 2, e 120; 1.75 * 2^7 = 224 = 0x76; -128 = 0xF0 */
      1.7499999f, 0.0f, /* stays at p 1: e 119; 447.99997 -> 448 = 0x7E */
      448.0f, 12.5f,    /* 1.75 * 2^8: p 2^9, e 128; 448 / 2 = 224 = 0x76; 6.25 -> 6 (RNE) = 0x4C */
      inf, -3.0f,       /* Inf: e 255, r 0: Inf * 0 = NaN (0x7F), -3 * 0 = -0 (0x80) */
      2.0f, nan_payload, /* any NaN counts as Inf: e 255; 2 * 0 = 0; NaN 0x7F */
      3.0e38f, 1.0f,    /* >= 1.75 * 2^127 rounds to Inf: e 255; both 0 */
      0x1p-130f, 0.0f,  /* 127 - 130 - 8 < 0: e 0, r 2^127: 2^-3 = 0x20 */
      0.0f, -0.0f       /* all zero: e 0; -0 keeps its sign */
  };
  enum { kRows = 9 };
  uint8_t v[kRows * 32], s[kRows];
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.scale_rounding = MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS;
  memset(v, POISON, sizeof v);
  memset(s, POISON, sizeof s);
  quantize_rows(rows, kRows, &o, v, s);
  const uint8_t scales[kRows] = {119, 120, 119, 128, 255, 255, 255, 0, 0};
  const uint8_t first[kRows] = {0x78, 0x76, 0x7E, 0x76, 0x7F, 0x00, 0x00, 0x20, 0x00};
  const uint8_t second[kRows] = {0x00, 0xF0, 0x00, 0x4C, 0x80, 0x7F, 0x00, 0x00, 0x80};
  for (int r = 0; r < kRows; ++r) {
    EXPECT(s[r] == scales[r], "row %d: scale %u, expected %u", r, s[r], scales[r]);
    EXPECT(v[r * 32] == first[r] && v[r * 32 + 1] == second[r], "row %d: values 0x%02x 0x%02x, expected 0x%02x 0x%02x",
           r, v[r * 32], v[r * 32 + 1], first[r], second[r]);
  }
  /* E5M2 takes emax 15: amax 1 gives 127 - 15 = 112; 57344 (1.75 * 2^15) rounds up to 2^16: e 128. */
  const float e5m2_rows[] = {1.0f, 0.0f, 57344.0f, 0.0f};
  o.format = MXFP8_FORMAT_E5M2;
  quantize_rows(e5m2_rows, 2, &o, v, s);
  EXPECT(s[0] == 112 && s[1] == 128, "E5M2 scales %u %u, expected 112 128", s[0], s[1]);
  EXPECT(v[0] == 0x78 && v[32] == 0x77, "E5M2 values 0x%02x 0x%02x, expected 0x78 (2^15) 0x77 (28672)", v[0], v[32]);
}

static void test_known_answers_e5m2_and_16_bit_inputs(void **state) {
  (void)state;
  /* 1.0 as bfloat16 (0x3F80) and float16 (0x3C00), E5M2: 1 * float(1/57344) lies in (2^-16, 2^-15): e 112;
   * 1 * 2^15 = 32768 = 0x78 in E5M2. -57344 * 2^-? : a second row with amax 57344: e 127, code 0xFB. */
  uint16_t bf16[64] = {0x3F80}, f16[64] = {0x3C00};
  bf16[32] = 0xC760; /* -57344 */
  f16[32] = 0xFB00;  /* -57344 */
  int64_t xs[2] = {2, 32}, ss[2] = {2, 1};
  uint8_t v[64], s[2];
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.format = MXFP8_FORMAT_E5M2;
  for (int type = 0; type < 2; ++type) {
    DLTensor in = host_tensor(type ? (void *)f16 : (void *)bf16, 2, xs, type ? kDLFloat : kDLBfloat, 16);
    DLTensor vt = host_tensor(v, 2, xs, kDLFloat8_e5m2, 8), st = host_tensor(s, 2, ss, kDLFloat8_e8m0fnu, 8);
    memset(v, POISON, sizeof v);
    assert_int_equal(mxfp8_quantize_into(&in, &o, &vt, &st, NULL, NULL), MXFP8_OK);
    EXPECT(s[0] == 112 && v[0] == 0x78 && v[1] == 0x00, "type %d: scale %u value 0x%02x", type, s[0], v[0]);
    EXPECT(s[1] == 127 && v[32] == 0xFB, "type %d: scale %u value 0x%02x", type, s[1], v[32]);
  }
}

/* (100, 200) bfloat16, both directions, swizzled: the buffers hold the compact scales where the permute form
 * puts them and zeros elsewhere; a tensor described with them exports the compact scales back. */
static void test_swizzled_outputs_are_te_buffers_and_export_back(void **state) {
  (void)state;
  enum { M = 100, K = 200, RC = 7, CR = 4 }; /* ceil(K/32) = 7, ceil(M/32) = 4 */
  uint16_t *x = malloc(sizeof(uint16_t) * M * K);
  uint64_t rng = 5;
  fill_quantize_input(x, 0, (size_t)M * K, &rng);
  int64_t xs[2] = {M, K};
  DLTensor in = host_tensor(x, 2, xs, kDLBfloat, 16);

  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  DLManagedTensorVersioned *cv = NULL, *cs = NULL, *ccv = NULL, *ccs = NULL;
  poisoned_allocator_calls = 0;
  o.allocator = poisoned_allocator;
  assert_int_equal(mxfp8_quantize(&in, &o, &cv, &cs, &ccv, &ccs), MXFP8_OK);
  EXPECT(poisoned_allocator_calls == 4, "allocator called %d times", poisoned_allocator_calls);
  EXPECT(cs->dl_tensor.ndim == 2 && cs->dl_tensor.shape[0] == M && cs->dl_tensor.shape[1] == RC, "rowwise scales shape");
  EXPECT(ccs->dl_tensor.shape[0] == CR && ccs->dl_tensor.shape[1] == K, "columnwise scales shape");
  const uint8_t *compact[2] = {cs->dl_tensor.data, ccs->dl_tensor.data};
  for (int d = 0; d < 2; ++d) {
    const uint8_t *values = (d ? ccv : cv)->dl_tensor.data;
    for (int i = 0; i < M * K; ++i) EXPECT(values[i] != POISON, "direction %d: value %d not written", d, i);
  }

  o.scales_layout = MXFP8_QUANTIZED_SCALES_SWIZZLED;
  DLManagedTensorVersioned *sv = NULL, *ss = NULL, *scv = NULL, *scs = NULL;
  assert_int_equal(mxfp8_quantize(&in, &o, &sv, &ss, &scv, &scs), MXFP8_OK);
  /* rowwise S is M x 7 -> padded 128 x 8; columnwise S is 4 x K, swizzled as S^T (K x 4) -> 256 x 4. */
  const int64_t rows[2] = {M, K}, cols[2] = {RC, CR}, padded_cols[2] = {8, 4}, bytes[2] = {128 * 8, 256 * 4};
  const uint8_t *swizzled[2] = {ss->dl_tensor.data, scs->dl_tensor.data};
  EXPECT(ss->dl_tensor.shape[0] == 128 && ss->dl_tensor.shape[1] == 8, "rowwise swizzled shape");
  EXPECT(scs->dl_tensor.shape[0] == 4 && scs->dl_tensor.shape[1] == 256, "columnwise swizzled shape (TE's padded shape)");
  for (int d = 0; d < 2; ++d) {
    uint8_t *expected = calloc((size_t)bytes[d], 1);
    for (int64_t r = 0; r < rows[d]; ++r)
      for (int64_t c = 0; c < cols[d]; ++c) /* columnwise: element (r, c) of S^T is S[c][r] */
        expected[ref_swizzled_index(r, c, padded_cols[d])] = d ? compact[1][c * K + r] : compact[0][r * RC + c];
    EXPECT(memcmp(expected, swizzled[d], (size_t)bytes[d]) == 0, "direction %d: swizzled buffer differs", d);
    free(expected);
  }

  /* The outputs go straight into a description; export returns the compact scales, dequantize agrees. */
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = sv, desc.rowwise_scale_inv = ss, desc.columnwise_data = scv, desc.columnwise_scale_inv = scs;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  for (int d = 0; d < 2; ++d) {
    mxfp8_export_options eo = MXFP8_EXPORT_OPTIONS_INIT;
    eo.direction = d;
    DLManagedTensorVersioned *values = NULL, *scales = NULL;
    assert_int_equal(mxfp8_export_components(t, &eo, &values, &scales), MXFP8_OK);
    EXPECT(memcmp(scales->dl_tensor.data, compact[d], (size_t)(d ? CR * K : M * RC)) == 0, "direction %d: export differs", d);
    EXPECT(memcmp(values->dl_tensor.data, (d ? ccv : cv)->dl_tensor.data, M * K) == 0, "direction %d: values differ", d);
    release_managed(values);
    release_managed(scales);
  }
  float *y = malloc(sizeof(float) * M * K);
  mxfp8_dequantize_options dq = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  DLTensor out = host_tensor(y, 2, xs, kDLFloat, 32);
  assert_int_equal(mxfp8_dequantize(t, &dq, &out), MXFP8_OK);
  const uint8_t *v0 = cv->dl_tensor.data;
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < K; ++c) {
      const double want = ref_decode_e4m3(v0[r * K + c]) * ref_decode_e8m0(compact[0][r * RC + c / 32]);
      const float got = y[r * K + c];
      EXPECT((isnan(want) && isnan(got)) || (double)got == (float)want, "(%d, %d): %g, expected %g", r, c, got, want);
    }
  free(y);
  mxfp8_tensor_release(t);
  release_managed(cv), release_managed(cs), release_managed(ccv), release_managed(ccs);
  free(x);
}

/* Padded layouts zero their padding; 32x32 blocks give both directions the same values and one scale per
 * block; padded 32x32 scales repeat each block's scale as TE stores them. */
static void test_padded_and_block_outputs(void **state) {
  (void)state;
  enum { M = 70, K = 100 };
  float *x = malloc(sizeof(float) * M * K);
  uint64_t rng = 9;
  fill_quantize_input(x, 2, (size_t)M * K, &rng);
  int64_t xs[2] = {M, K}, cs[2] = {3, 4}, ps[2] = {128, 4}, pcs[2] = {4, 128};
  DLTensor in = host_tensor(x, 2, xs, kDLFloat, 32);
  uint8_t rv[M * K], cv[M * K], rs[3 * 4], ccs[3 * 4], prs[128 * 4], pcs_buf[4 * 128];
  memset(rv, POISON, sizeof rv), memset(cv, POISON, sizeof cv), memset(rs, POISON, sizeof rs), memset(ccs, POISON, sizeof ccs);
  DLTensor v1 = host_tensor(rv, 2, xs, kDLUInt, 8), v2 = host_tensor(cv, 2, xs, kDLUInt, 8);
  DLTensor s1 = host_tensor(rs, 2, cs, kDLUInt, 8), s2 = host_tensor(ccs, 2, cs, kDLUInt, 8);
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.block = MXFP8_BLOCK_32X32;
  assert_int_equal(mxfp8_quantize_into(&in, &o, &v1, &s1, &v2, &s2), MXFP8_OK);
  EXPECT(memcmp(rv, cv, sizeof rv) == 0 && memcmp(rs, ccs, sizeof rs) == 0, "32x32: directions differ");
  for (size_t i = 0; i < sizeof rs; ++i) EXPECT(rs[i] != POISON, "block scale %zu not written", i);

  o.scales_layout = MXFP8_QUANTIZED_SCALES_PADDED;
  memset(prs, POISON, sizeof prs), memset(pcs_buf, POISON, sizeof pcs_buf);
  DLTensor p1 = host_tensor(prs, 2, ps, kDLUInt, 8), p2 = host_tensor(pcs_buf, 2, pcs, kDLUInt, 8);
  assert_int_equal(mxfp8_quantize_into(&in, &o, &v1, &p1, &v2, &p2), MXFP8_OK);
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 4; ++c) {
      const uint8_t want = r < M ? rs[(r / 32) * 4 + c] : 0;
      EXPECT(prs[r * 4 + c] == want, "rowwise padded (%d, %d): %u, expected %u", r, c, prs[r * 4 + c], want);
    }
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 128; ++c) {
      const uint8_t want = r < 3 && c < K ? rs[r * 4 + c / 32] : 0;
      EXPECT(pcs_buf[r * 128 + c] == want, "columnwise padded (%d, %d): %u, expected %u", r, c, pcs_buf[r * 128 + c], want);
    }
  free(x);
}

static void test_dequantize_known_answers(void **state) {
  (void)state;
  /* Compact rowwise (2, 32) E5M2 tensor: row 0 scale 119, row 1 scale 255 (NaN). */
  uint8_t values[64] = {0}, scales[2] = {119, 255};
  values[0] = 0x3C; /* E5M2 1.0 */
  values[1] = 0x7C; /* +Inf */
  values[2] = 0x01; /* smallest subnormal, 2^-16 */
  values[3] = 0xFB; /* -57344 */
  int64_t vs[2] = {2, 32}, ss[2] = {2, 1};
  test_tensor *v = test_tensor_new(2, vs, kDLUInt, 0), *s = test_tensor_new(2, ss, kDLUInt, 0);
  memcpy(v->buffer, values, sizeof values);
  memcpy(s->buffer, scales, sizeof scales);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = MXFP8_FORMAT_E5M2;
  desc.rowwise_data = &v->managed, desc.rowwise_scale_inv = &s->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  float y[64];
  uint16_t b[64];
  DLTensor out = host_tensor(y, 2, vs, kDLFloat, 32), out16 = host_tensor(b, 2, vs, kDLBfloat, 16);
  assert_int_equal(mxfp8_dequantize(t, NULL, &out), MXFP8_OK);
  assert_int_equal(mxfp8_dequantize(t, NULL, &out16), MXFP8_OK);
  EXPECT(y[0] == ldexpf(1.0f, -8) && isinf(y[1]) && y[2] == ldexpf(1.0f, -24) && y[3] == -57344.0f * ldexpf(1.0f, -8),
         "row 0: %g %g %g %g", y[0], y[1], y[2], y[3]);
  uint32_t nan_bits[2];
  memcpy(nan_bits, &y[32], sizeof nan_bits);
  EXPECT(nan_bits[0] == 0x7FFFFFFFu && nan_bits[1] == 0x7FFFFFFFu, "a NaN scale decodes to the canonical NaN: 0x%08x",
         nan_bits[0]);
  EXPECT(b[0] == 0x3B80 && b[1] == 0x7F80 && b[32] == 0x7FFF, "bfloat16: 0x%04x 0x%04x 0x%04x", b[0], b[1], b[32]);
  mxfp8_tensor_release(t);
  test_tensor_free(v);
  test_tensor_free(s);
}

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define FTZ_DAZ 0x8040u /* MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6) */

/* Quantizes `in` (64 x 64 float32) and decodes the result, MXFP8 and NVFP4, into the given buffers. */
static void quantize_and_decode(const float *in, uint8_t *v, uint8_t *s, float *y, uint8_t *nv, uint8_t *ns,
                                float *amax) {
  int64_t shape[2] = {64, 64}, sshape[2] = {64, 2}, nvshape[2] = {64, 32}, nsshape[2] = {64, 4}, one[1] = {1};
  DLTensor it = host_tensor((void *)in, 2, shape, kDLFloat, 32), vt = host_tensor(v, 2, shape, kDLUInt, 8),
           st = host_tensor(s, 2, sshape, kDLUInt, 8), yt = host_tensor(y, 2, shape, kDLFloat, 32);
  assert_int_equal(mxfp8_quantize_into(&it, NULL, &vt, &st, NULL, NULL), MXFP8_OK);
  DLManagedTensorVersioned mv = {0}, ms = {0};
  mv.version.major = ms.version.major = DLPACK_MAJOR_VERSION;
  mv.dl_tensor = vt, ms.dl_tensor = st;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &mv, desc.rowwise_scale_inv = &ms;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  assert_int_equal(mxfp8_dequantize(t, NULL, &yt), MXFP8_OK);
  mxfp8_tensor_release(t);
  DLTensor nvt = host_tensor(nv, 2, nvshape, kDLUInt, 8), nst = host_tensor(ns, 2, nsshape, kDLUInt, 8),
           at = host_tensor(amax, 1, one, kDLFloat, 32);
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&it}, 1, NULL, (DLTensor *[]){&nvt}, (DLTensor *[]){&nst}, &at), MXFP8_OK);
}

/* "Subnormal inputs count like any other value (nothing is flushed to zero)": also for a caller whose
 * thread flushes (XLA's CPU threads, programs built with -ffast-math set FTZ and DAZ). The bytes equal
 * those made in the default environment, and the caller's environment is as it was afterwards. */
static void test_a_flushing_caller_gets_the_same_bytes(void **state) {
  (void)state;
  float in[64 * 64];
  uint64_t rng = 41;
  for (int i = 0; i < 64 * 64; ++i) { /* blocks of tiny values over 24 binades: subnormal inputs and decodes */
    const int block_exp = -140 + (int)((i / 32) % 40);
    const float mantissa = 1.0f + (float)(rng_next(&rng) % 1000) / 1000.0f;
    in[i] = ldexpf(rng_next(&rng) % 2 ? -mantissa : mantissa, block_exp - (int)(rng_next(&rng) % 24));
  }
  static uint8_t v[2][64 * 64], s[2][128], nv[2][64 * 32], ns[2][256];
  static float y[2][64 * 64], amax[2];
  quantize_and_decode(in, v[0], s[0], y[0], nv[0], ns[0], &amax[0]);
  const unsigned int before = _mm_getcsr();
  _mm_setcsr(before | FTZ_DAZ);
  quantize_and_decode(in, v[1], s[1], y[1], nv[1], ns[1], &amax[1]);
  const unsigned int after = _mm_getcsr();
  _mm_setcsr(before);
  EXPECT(after == (before | FTZ_DAZ), "the caller's MXCSR changed: 0x%x, was 0x%x", after, before | FTZ_DAZ);
  int subnormal_decodes = 0;
  for (int i = 0; i < 64 * 64; ++i) subnormal_decodes += y[0][i] != 0.0f && fabsf(y[0][i]) < 0x1p-126f;
  EXPECT(subnormal_decodes > 100, "the input should decode to subnormals, got %d", subnormal_decodes);
  EXPECT(memcmp(v[0], v[1], sizeof v[0]) == 0 && memcmp(s[0], s[1], sizeof s[0]) == 0, "MXFP8 quantize differs");
  EXPECT(memcmp(y[0], y[1], sizeof y[0]) == 0, "MXFP8 dequantize differs under FTZ/DAZ");
  EXPECT(memcmp(nv[0], nv[1], sizeof nv[0]) == 0 && memcmp(ns[0], ns[1], sizeof ns[0]) == 0 &&
             memcmp(&amax[0], &amax[1], sizeof amax[0]) == 0,
         "NVFP4 quantize differs under FTZ/DAZ");
}

/* A caller in the default environment (the guard's fast path) and one rounding upward (its full path)
 * both get the default environment's bytes, and find their rounding mode and sticky exception flags as
 * they left them: the library's own inexact results raise no flag the caller can see. */
static void test_the_callers_rounding_and_exception_flags_come_back(void **state) {
  (void)state;
  float in[64 * 64];
  uint64_t rng = 43;
  for (int i = 0; i < 64 * 64; ++i) in[i] = ((float)(rng_next(&rng) % 20001) - 10000.0f) / 777.0f;
  static uint8_t v[3][64 * 64], s[3][128], nv[3][64 * 32], ns[3][256];
  static float y[3][64 * 64], amax[3];
  quantize_and_decode(in, v[0], s[0], y[0], nv[0], ns[0], &amax[0]);
  for (int run = 1; run <= 2; ++run) {
    const int rounding = run == 1 ? FE_TONEAREST : FE_UPWARD;
    assert_int_equal(fesetround(rounding), 0);
    feclearexcept(FE_ALL_EXCEPT);
    feraiseexcept(FE_DIVBYZERO);
    quantize_and_decode(in, v[run], s[run], y[run], nv[run], ns[run], &amax[run]);
    const int flags = fetestexcept(FE_ALL_EXCEPT), after = fegetround();
    fesetround(FE_TONEAREST);
    feclearexcept(FE_ALL_EXCEPT);
    EXPECT(flags == FE_DIVBYZERO, "run %d: the caller's exception flags are 0x%x, were 0x%x", run, flags, FE_DIVBYZERO);
    EXPECT(after == rounding, "run %d: the caller's rounding mode is %d, was %d", run, after, rounding);
    EXPECT(memcmp(v[0], v[run], sizeof v[0]) == 0 && memcmp(s[0], s[run], sizeof s[0]) == 0 &&
               memcmp(y[0], y[run], sizeof y[0]) == 0 && memcmp(nv[0], nv[run], sizeof nv[0]) == 0 &&
               memcmp(ns[0], ns[run], sizeof ns[0]) == 0 && memcmp(&amax[0], &amax[run], sizeof amax[0]) == 0,
           "run %d: the bytes differ from the default environment's", run);
  }
}
#else
static void test_a_flushing_caller_gets_the_same_bytes(void **state) {
  (void)state;
  skip(); /* MXCSR is x86's; other ISAs' flush modes are not set up here */
}
static void test_the_callers_rounding_and_exception_flags_come_back(void **state) {
  (void)state;
  skip(); /* quantize_and_decode is x86-only here */
}
#endif

/* NVFP4, worked out by hand from TE's rule: amax 2688 gives S_enc = 448 * 6 / 2688 = 1, so a block
 * whose amax is 6 gets the scale e4m3(6 * (1 * (1/6))) = 1.0 (0x38) and multiplier 1, and its elements
 * are E2M1-rounded as they are: 6 -> 7, 1.25 -> 2 (tie to even), 0.75 -> 2 (tie to even), -0.3 -> 9,
 * NaN -> 7 (+6), -0.0 -> 8, 5 -> 6 (tie to even), 3 -> 5. The second block holds 2688 itself: scale
 * e4m3(448) = 0x7E. Values pack the even element into the low nibble. Every output byte is checked. */
static void test_nvfp4_known_answers(void **state) {
  (void)state;
  float x[2][32] = {{0}};
  const float first[8] = {6.0f, 1.25f, 0.75f, -0.3f, NAN, -0.0f, 5.0f, 3.0f};
  memcpy(x[0], first, sizeof first);
  x[0][16] = 2688.0f;
  x[1][0] = -2.5f; /* row 1: block amax 2.5 -> scale e4m3(2.5 / 6) */
  uint8_t values[2 * 16 + 1], scales[2 * 2 + 1];
  float amax[2];
  memset(values, POISON, sizeof values);
  memset(scales, POISON, sizeof scales);
  memset(amax, POISON, sizeof amax);
  int64_t xs[2] = {2, 32}, vs[2] = {2, 16}, ss[2] = {2, 2}, as[1] = {1};
  DLTensor in = host_tensor(x, 2, xs, kDLFloat, 32), v = host_tensor(values, 2, vs, kDLUInt, 8);
  DLTensor sc = host_tensor(scales, 2, ss, kDLUInt, 8), a = host_tensor(amax, 1, as, kDLFloat, 32);
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&in}, 1, NULL, (DLTensor *[]){&v}, (DLTensor *[]){&sc}, &a), MXFP8_OK);
  assert_true(amax[0] == 2688.0f);
  const uint8_t want_values[32] = {0x27, 0x92, 0x87, 0x56, 0, 0, 0, 0, 0x07, 0, 0, 0, 0, 0, 0, 0,
                                   /* row 1: -2.5 * (1 / (scale * 1)) with scale e4m3(0.41666..) = 0.40625:
                                    * -6.15 saturates to -6 (0xF) */
                                   0x0F, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 32; ++i) EXPECT(values[i] == want_values[i], "values[%d] = 0x%02x, expected 0x%02x", i, values[i], want_values[i]);
  EXPECT(values[32] == POISON, "wrote past the values");
  const uint8_t want_scales[4] = {0x38, 0x7E, 0x2D, 0x00}; /* 0x2D: E4M3 0.40625 = 1.625 * 2^-2 */
  for (int i = 0; i < 4; ++i) EXPECT(scales[i] == want_scales[i], "scales[%d] = 0x%02x, expected 0x%02x", i, scales[i], want_scales[i]);
  EXPECT(scales[4] == POISON, "wrote past the scales");
}

/* Per-row amaxes of rows that hold no values (K = 0) are written as 0. (Per-row amax is rowwise only.) */
static void test_nvfp4_empty_lines_get_zero_amax(void **state) {
  (void)state;
  float x[1];
  float amax[6];
  uint8_t values[1], scales[1];
  memset(amax, POISON, sizeof amax);
  int64_t xs[2] = {5, 0}, vs[1] = {0}, as[1] = {5};
  DLTensor in = host_tensor(x, 2, xs, kDLFloat, 32), v = host_tensor(values, 1, vs, kDLUInt, 8);
  DLTensor sc = host_tensor(scales, 1, vs, kDLUInt, 8), a = host_tensor(amax, 1, as, kDLFloat, 32);
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.amax_scope = MXFP8_NVFP4_AMAX_PER_ROW;
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&in}, 1, &o, (DLTensor *[]){&v}, (DLTensor *[]){&sc}, &a), MXFP8_OK);
  for (int i = 0; i < 5; ++i) EXPECT(amax[i] == 0.0f, "amax[%d] = %g", i, (double)amax[i]);
  uint32_t guard;
  memcpy(&guard, &amax[5], sizeof guard);
  EXPECT(guard == 0xFFFFFFFFu, "wrote past the amaxes");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_answers_e4m3_rceil_and_floor),
      cmocka_unit_test(test_known_answers_compressed_tensors_rounding),
      cmocka_unit_test(test_known_answers_e5m2_and_16_bit_inputs),
      cmocka_unit_test(test_swizzled_outputs_are_te_buffers_and_export_back),
      cmocka_unit_test(test_padded_and_block_outputs),
      cmocka_unit_test(test_dequantize_known_answers),
      cmocka_unit_test(test_a_flushing_caller_gets_the_same_bytes),
      cmocka_unit_test(test_the_callers_rounding_and_exception_flags_come_back),
      cmocka_unit_test(test_nvfp4_known_answers),
      cmocka_unit_test(test_nvfp4_empty_lines_get_zero_amax),
  };
  return cmocka_run_group_tests_name("quantize and dequantize (host)", tests, NULL, NULL);
}
