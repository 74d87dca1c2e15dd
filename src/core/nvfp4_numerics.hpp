// The NVFP4 number format and Transformer Engine's NVFP4 quantizer rule, written once for host and
// device: FP4 E2M1 encode and decode, the global encode scale, and the quantization of one 1x16 block
// (TE's default rule and its 4over6 selection). The E4M3 scale encode is mx_numerics.hpp's fp8_encode.
//
// The rule, as TE computes it (TransformerEngine main, read 2026-12; facts, not code):
//   - common/cast/nvfp4/core_nvfp4.cuh, compute_global_encode_scaling_factor_FP4<E4M3_MAX>:
//     S_enc = E4M3_MAX * 6 / amax in float, then fminf(S_enc, FLT_MAX) (so a NaN amax gives FLT_MAX), and
//     1 when amax == 0 or S_enc == 0 (amax = Inf).
//   - quantize_transpose_nvfp4.cuh (and its tuned BF16 1D variant, and the fallback
//     transpose/quantize_transpose_vector_blockwise_fp4.cu, which agree): S_dec = 1 / S_enc (the generic
//     kernel divides in double and rounds to float: the same float, double having more than 2 * 24 + 2
//     bits); block amax = fmaxf over |x| (NaN skipped; BF16 pairs by __hmax, which also skips NaN);
//     scale = static_cast<fp8e4m3>(block_amax * (S_enc * (1.0f / 6.0f))): the product in float, then
//     __nv_fp8_e4m3's conversion: round to nearest even, saturating to 448 (Inf too), NaN to 0x7F;
//     the elements' multiplier r = fminf(1.0f / (float(scale) * S_dec), FLT_MAX) (tuned 1D:
//     compute_nvfp4_scaling_coefficient<float>, the default, not fast-math, path).
//   - util/ptx_arch_spec.cuh, mul_cvt_*_to_fp4_*_with_rn / _round_to_nearest<float>: the input is
//     widened to float, multiplied by r in float (mul.f32x2), and converted by cvt.rn.satfinite.e2m1x2.f32,
//     the even element in the low nibble. Round to nearest even, saturating to +-6; CUDA's own
//     emulation of that instruction (cuda_fp4.hpp, __nv_cvt_double_to_fp4) keeps the sign of zeros and
//     underflows and turns NaN into +6 (0x7). TE's Python reference (custom_recipes/reference_nvfp4.py,
//     cast_to_fp4x2) has the same thresholds but maps -0.0 and NaN to code 0; we follow the kernel.
//   - 4over6, cast/nvfp4/quantize_4over6_nvfp4.cuh (compute_scale_pair, accumulate_dequant_error, the
//     non-fast-math path): base = block_amax / 6 * S_enc (a true division here, unlike above), scale6 =
//     e4m3(fminf(base, 448)), scale4 = e4m3(fminf(base * 1.5, 448)), each r as above; the error of a
//     candidate is accumulated element by element in order (__fadd_rn), from
//     d = ((q * scale) * amax) / (6 * E4M3_MAX) - x; map-to-4 wins only when its error is strictly
//     smaller. E4M3_MAX (448 or 256) enters only S_enc and that denominator; the scale itself always
//     saturates at 448.
// TE quantizes rowwise with K a multiple of 16 (its Python reference pads with zeros); partial blocks here
// use only their real elements for the amax and the values, which is what zero padding gives, and
// 4over6 sums the padding's error terms as TE's kernel does (see nvfp4_quantize_block).
//
// Every float operation that matters goes through the *_rn helpers: on the GPU they are the
// round-to-nearest intrinsics (nvcc would otherwise fuse a multiply and an add into an FMA); on the host
// the library is compiled without FMA contraction for these files (CMakeLists.txt).
#pragma once

#include <cstdint>

#include "core/mx_numerics.hpp"

namespace mxfp8 {

constexpr int kNvfp4BlockSize = 16;
constexpr float kFp4Max = 6.0f;
constexpr float kE4m3ScaleMax = 448.0f;         // where a block scale saturates, whatever E4M3_MAX is
constexpr float kFloatMax = 3.40282346638528859811704183484516925e+38f;

MXFP8_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MXFP8_HOST_DEVICE inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
MXFP8_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MXFP8_HOST_DEVICE inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
// fminf's rule: a NaN operand yields the other one.
MXFP8_HOST_DEVICE inline float fmin_like(float a, float b) { return a != a ? b : (b < a ? b : a); }
MXFP8_HOST_DEVICE inline float abs_float(float x) { return bits_float(float_bits(x) & 0x7FFFFFFFu); }
// fmaxf's rule for a running maximum of magnitudes: NaN elements are skipped.
MXFP8_HOST_DEVICE inline float max_magnitude(float running, float x) {
  const float a = abs_float(x);
  return a > running ? a : running;
}

// |x| rounded onto the E2M1 grid {0, 0.5, 1, 1.5, 2, 3, 4, 6} (round to nearest even, saturating at 6,
// NaN to 6), returned as the float 2^23 + code, code = 0..7 in its low mantissa bits. The grid's step is
// 0.5 below 2, 1 in [2, 4) and 2 in [4, 6], so with a = min(|x|, 6) each step's rounding is one float
// addition that lands in [2^23, 2^24), where the float step is 1 (round to nearest even there is the
// grid's tie to the even code):
//   v1 = 2^23 + 0 + rne(2a)     the code if a < 2
//   v2 = 2^23 + 2 + rne(a)      the code if 2 <= a < 4   (2, 3, 4 are codes 4, 5, 6)
//   v3 = 2^23 + 4 + rne(a / 2)  the code if a >= 4       (4, 6 are codes 6, 7)
// and the code is the smallest of the three, as rne is monotone: for a < 2, 2a <= a + 2 and
// 2a <= a/2 + 4; for 2 <= a < 4, a + 2 <= 2a and a + 2 <= a/2 + 4; for a >= 4, a/2 + 4 is below both.
// Six operations on the GPU (a min, three adds, a three-way min), no branch: fewer than counting the
// seven midpoints, which this replaced (tests/c/test_nvfp4_numerics.cpp checks the two agree on every float).
// Exactness: 2a is exact, a / 2 is exact unless a is subnormal, where 2^23 + 4 + a/2 rounds to 2^23 + 4
// whether a/2 was rounded first or not; so the device's fused multiply-adds and the host's multiply
// then add give the same float, and FMA contraction cannot change it. Like every float operation of
// the NVFP4 rule, the host's depends on round-to-nearest, the default floating-point environment.
MXFP8_HOST_DEVICE inline float e2m1_rounded_magnitude(float x) {
#if defined(__CUDA_ARCH__)
  const float a = fminf(fabsf(x), kFp4Max);  // fminf: NaN gives 6
  const float v1 = __fmaf_rn(a, 2.0f, 8388608.0f);
  const float v2 = __fadd_rn(a, 8388610.0f);
  const float v3 = __fmaf_rn(a, 0.5f, 8388612.0f);
  // The three are positive floats, whose bits order like their values: one three-way integer minimum
  // (a single instruction on sm_90, emulated before it).
  return __uint_as_float(__vimin3_u32(__float_as_uint(v1), __float_as_uint(v2), __float_as_uint(v3)));
#else
  const float a = fmin_like(abs_float(x), kFp4Max);
  const float v1 = add_rn(mul_rn(a, 2.0f), 8388608.0f);
  const float v2 = add_rn(a, 8388610.0f);
  const float v3 = add_rn(mul_rn(a, 0.5f), 8388612.0f);
  const float v12 = v2 < v1 ? v2 : v1;
  return v3 < v12 ? v3 : v12;
#endif
}

// The E2M1 code of |x| (0..7) from e2m1_rounded_magnitude.
MXFP8_HOST_DEVICE inline uint32_t e2m1_magnitude_code(float rounded) { return float_bits(rounded) & 0x7u; }

// cvt.rn.satfinite.e2m1x2.f32 on one value: round to nearest even on the grid {0, 0.5, 1, 1.5, 2, 3,
// 4, 6}, saturating; the sign bit kept (also for zeros); NaN to +6.
MXFP8_HOST_DEVICE inline uint8_t e2m1_encode(float x) {
  const uint32_t u = float_bits(x);
  const uint32_t code = e2m1_magnitude_code(e2m1_rounded_magnitude(x));
  const bool nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint8_t>(nan ? 0x7u : (code | ((u >> 28) & 0x8u)));
}

// The value of an E2M1 code (exact in float).
MXFP8_HOST_DEVICE inline float e2m1_value(uint8_t code) {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = magnitudes[code & 0x7];
  return (code & 0x8) ? -v : v;
}

// S_enc of an amax (see the top of this file). e4m3_max is 448 or 256.
MXFP8_HOST_DEVICE inline float nvfp4_encode_scale(float amax, float e4m3_max) {
  const float s = fmin_like(div_rn(e4m3_max * kFp4Max, amax), kFloatMax);
  if (amax == 0.0f || s == 0.0f) return 1.0f;
  return s;
}

// What the block loops need per row: the global scales and, for 4over6, the amax and E4M3_MAX.
struct Nvfp4RowScale {
  float s_enc;
  float s_dec;
  float amax;
  float error_denominator;  // 6 * E4M3_MAX
};

MXFP8_HOST_DEVICE inline Nvfp4RowScale nvfp4_row_scale(float amax, float e4m3_max) {
  const float s_enc = nvfp4_encode_scale(amax, e4m3_max);
  return Nvfp4RowScale{s_enc, div_rn(1.0f, s_enc), amax, e4m3_max * kFp4Max};
}

// The multiplier of a block's elements once its scale byte is chosen.
MXFP8_HOST_DEVICE inline float nvfp4_block_multiplier(uint8_t scale, float s_dec) {
  return fmin_like(div_rn(1.0f, mul_rn(fp8_decode(scale, false), s_dec)), kFloatMax);
}

enum Nvfp4Selection : int32_t { kNvfp4Default = 0, kNvfp4FourOverSixMae = 1, kNvfp4FourOverSixMse = 2 };

// Quantizes the n (1..16) values x of one block: returns its scale byte and writes n codes.
MXFP8_HOST_DEVICE inline uint8_t nvfp4_quantize_block(const float *x, int n, const Nvfp4RowScale &row,
                                                      int32_t selection, uint8_t *codes) {
  float block_amax = 0.0f;
  for (int i = 0; i < n; ++i) block_amax = max_magnitude(block_amax, x[i]);
  if (selection == kNvfp4Default) {
    const uint8_t scale = fp8_encode(mul_rn(block_amax, mul_rn(row.s_enc, 1.0f / kFp4Max)), false);
    const float r = nvfp4_block_multiplier(scale, row.s_dec);
    for (int i = 0; i < n; ++i) codes[i] = e2m1_encode(mul_rn(x[i], r));
    return scale;
  }
  const float base = mul_rn(div_rn(block_amax, kFp4Max), row.s_enc);
  const uint8_t scale6 = fp8_encode(fmin_like(base, kE4m3ScaleMax), false);
  const uint8_t scale4 = fp8_encode(fmin_like(mul_rn(base, 1.5f), kE4m3ScaleMax), false);
  const float r6 = nvfp4_block_multiplier(scale6, row.s_dec);
  const float r4 = nvfp4_block_multiplier(scale4, row.s_dec);
  const float sf6 = fp8_decode(scale6, false);
  const float sf4 = fp8_decode(scale4, false);
  uint8_t codes4[kNvfp4BlockSize];
  float err6 = 0.0f, err4 = 0.0f;
  // TE's kernel sums the error over all 16 lanes, a partial block's missing ones read as zeros: their
  // terms are 0, except under an amax of Inf or NaN, where 0 * amax is NaN. So they are summed here too.
  for (int i = 0; i < kNvfp4BlockSize; ++i) {
    const float xi = i < n ? x[i] : 0.0f;
    const uint8_t c6 = e2m1_encode(mul_rn(xi, r6));
    const uint8_t c4 = e2m1_encode(mul_rn(xi, r4));
    if (i < n) codes[i] = c6, codes4[i] = c4;
    const float d6 = sub_rn(div_rn(mul_rn(mul_rn(e2m1_value(c6), sf6), row.amax), row.error_denominator), xi);
    const float d4 = sub_rn(div_rn(mul_rn(mul_rn(e2m1_value(c4), sf4), row.amax), row.error_denominator), xi);
    if (selection == kNvfp4FourOverSixMse) {
      err6 = add_rn(err6, mul_rn(d6, d6));
      err4 = add_rn(err4, mul_rn(d4, d4));
    } else {
      err6 = add_rn(err6, abs_float(d6));
      err4 = add_rn(err4, abs_float(d4));
    }
  }
  if (!(err4 < err6)) return scale6;
  for (int i = 0; i < n; ++i) codes[i] = codes4[i];
  return scale4;
}

}  // namespace mxfp8
