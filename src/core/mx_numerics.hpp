// The MXFP8 number formats, written once for host and device: choosing a block's E8M0 scale (TE's
// RCEIL, OCP's FLOOR, compressed-tensors' rule), the reciprocal its elements are multiplied by, FP8 encode and decode, and the
// 16-bit float conversions. The CUDA kernels encode with the hardware's cvt.rn.satfinite instead of
// fp8_encode; the GPU tests compare the two on every special value.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/swizzle_index.hpp"  // MXFP8_HOST_DEVICE

namespace mxfp8 {

MXFP8_HOST_DEVICE inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

MXFP8_HOST_DEVICE inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Transformer Engine's Quantized_Limits<OType>::max_norm_rcp: 1 / max_norm rounded once to float.
MXFP8_HOST_DEVICE constexpr float max_norm_reciprocal(bool e5m2) {
  return e5m2 ? static_cast<float>(1.0 / 57344.0) : static_cast<float>(1.0 / 448.0);
}

// RCEIL: TE's float_to_e8m0(amax * max_norm_rcp), its software path (Hopper and older). On Blackwell TE
// uses cvt.rp.satfinite.ue8m0x2.f32 instead, which by PTX's rounding rules gives the same byte for every
// non-negative input (zero and subnormals up to 2^-127 to 0, Inf to 254); not run here (the H200 is a
// Hopper chip). This library computes it this way on every architecture.
MXFP8_HOST_DEVICE inline uint8_t e8m0_rceil(float amax, bool e5m2) {
  const float v = amax * max_norm_reciprocal(e5m2);
  const uint32_t u = float_bits(v);
  uint32_t exponent = (u >> 23) & 0xFF;
  const uint32_t mantissa = u & 0x7FFFFF;
  if (exponent == 0xFF) return mantissa ? 0xFF : 0xFE;  // NaN (an amax never is), Inf saturates
  if (v == 0.0f) return 0;
  // Round up unless v is already a power of two; 254 saturates; subnormals up to 2^-127 stay at 0.
  if (mantissa > 0 && exponent != 0xFE && !(exponent == 0 && mantissa <= 0x400000)) ++exponent;
  return static_cast<uint8_t>(exponent);
}

// FLOOR (OCP MX v1.0): floor(log2(amax)) - emax, biased and clamped to [0, 254].
MXFP8_HOST_DEVICE inline uint8_t e8m0_floor(float amax, bool e5m2) {
  const int32_t emax = e5m2 ? 15 : 8;
  const int32_t exponent = static_cast<int32_t>((float_bits(amax) >> 23) & 0xFF);  // 0: zero or subnormal
  if (exponent == 0xFF) return 0xFE;
  const int32_t e = exponent - emax;
  return static_cast<uint8_t>(e < 0 ? 0 : e);
}

// RCEIL's reciprocal, TE's exp2f_rcp: the bits of 2^(127 - e), with its two edges: e == 0 gives 1 and
// e == 254 gives +0.
MXFP8_HOST_DEVICE inline float rceil_reciprocal(uint8_t e) {
  return e == 0 ? 1.0f : bits_float(static_cast<uint32_t>(254 - e) << 23);
}

// FLOOR's reciprocal: exactly 2^(127 - e) for e in [0, 254]; 2^-127 is the subnormal 0x00400000.
MXFP8_HOST_DEVICE inline float exact_reciprocal(uint8_t e) {
  return e == 254 ? bits_float(0x00400000u) : bits_float(static_cast<uint32_t>(254 - e) << 23);
}

// compressed-tensors' MX rule (compressed_tensors.quantization.utils.mxfp_utils: generate_mx_scales,
// then round_to_quantized_type_dtype to uint8), on the float bits of an amax that counts NaN as Inf:
//   p = round_to_power_2(amax): the sign and exponent bits of amax + 2^(mantissa bits - 2), i.e. the
//       power of two below amax, or the one above when amax's mantissa fraction is >= 0.75 (its
//       "+ 1 << (mantissa - elem_mantissa - 1)" with FP4's one mantissa bit, for every MX format);
//       +Inf when that carries out of the largest exponent;
//   e = clamp(round(127 + floor(log2(p)) - emax), 0, 255): 0 for p = 0 (log2 gives -Inf), 255 for
//       p = Inf (and a NaN amax, which the add above turns into Inf).
// The rule is the same on bfloat16 bits (its add is 1 << 5 on 7 mantissa bits) as on float bits, since
// the bits it looks at are the same; that is what makes this bit-exact with compressed-tensors run in
// bfloat16. emax is 8 for E4M3 (its _MX_ELEM_OFFSET); compressed-tensors has no E5M2 MX format, where
// this library uses emax 15 (57344 = 1.75 * 2^15, so the same 0.75 cut keeps amax below max_norm).
MXFP8_HOST_DEVICE inline uint8_t e8m0_compressed_tensors(float amax, bool e5m2) {
  const uint32_t u = float_bits(amax) & 0x7FFFFFFFu;
  if (u >= 0x7F800000u) return 0xFF;  // Inf or NaN
  const uint32_t power = (u + 0x200000u) & 0x7F800000u;  // the exponent field of p; 0 for p = 0
  if (power == 0x7F800000u) return 0xFF;
  if (power == 0) return 0;
  const int32_t e = static_cast<int32_t>(power >> 23) - (e5m2 ? 15 : 8);
  return static_cast<uint8_t>(e < 0 ? 0 : e);
}

// compressed-tensors divides by the float 2^(e - 127), which is +Inf for e = 255: x / Inf is a zero of
// x's sign, and NaN for Inf and NaN. Multiplying by 2^(127 - e), or by +0 for e = 255, gives the same
// float for every x (a power of two divides and multiplies exactly, down to the same correctly rounded
// subnormals).
MXFP8_HOST_DEVICE inline float compressed_tensors_reciprocal(uint8_t e) {
  return e == 255 ? 0.0f : exact_reciprocal(e);
}

// The three rules by their mxfp8_scale_rounding values, for the quantize loops and kernels.
enum class ScaleRounding : int32_t { Rceil = 0, Floor = 1, CompressedTensors = 2 };

MXFP8_HOST_DEVICE inline uint8_t block_exponent(float amax, ScaleRounding rule, bool e5m2) {
  switch (rule) {
    case ScaleRounding::Floor: return e8m0_floor(amax, e5m2);
    case ScaleRounding::CompressedTensors: return e8m0_compressed_tensors(amax, e5m2);
    default: return e8m0_rceil(amax, e5m2);
  }
}

MXFP8_HOST_DEVICE inline float block_reciprocal(uint8_t e, ScaleRounding rule) {
  switch (rule) {
    case ScaleRounding::Floor: return exact_reciprocal(e);
    case ScaleRounding::CompressedTensors: return compressed_tensors_reciprocal(e);
    default: return rceil_reciprocal(e);
  }
}

// Whether a NaN element takes part in its block's amax (as +Inf): compressed-tensors' torch.amax
// propagates NaN, so a block holding one gets the scale 255 and comes out as zeros and NaN. TE and the
// GPU's max.f32 skip NaN, and so do RCEIL and FLOOR here.
MXFP8_HOST_DEVICE inline bool nan_counts_in_amax(ScaleRounding rule) { return rule == ScaleRounding::CompressedTensors; }

// 2^(e - 127) as a float (e == 0 is the subnormal 2^-127), NaN for e == 255: an E8M0 scale's value.
MXFP8_HOST_DEVICE inline float e8m0_value(uint8_t e) {
  if (e == 255) return bits_float(0x7FC00000u);
  return e == 0 ? bits_float(0x00400000u) : bits_float(static_cast<uint32_t>(e) << 23);
}

// One FP8 format's geometry: mantissa bits, exponent bias, the largest finite code.
struct Fp8Format {
  int32_t mantissa_bits;
  int32_t bias;
  uint8_t max_code;  // 0x7E = 448 (E4M3), 0x7B = 57344 (E5M2)
};
MXFP8_HOST_DEVICE constexpr Fp8Format fp8_format(bool e5m2) {
  return e5m2 ? Fp8Format{2, 15, 0x7B} : Fp8Format{3, 7, 0x7E};
}

// Round to nearest even, saturating (Inf to +-max too), NaN to 0x7F: PTX cvt.rn.satfinite.e4m3x2.f32 /
// .e5m2x2.f32. Works on the bits, so it does not depend on the host's floating-point environment.
MXFP8_HOST_DEVICE inline uint8_t fp8_encode(float x, bool e5m2) {
  const Fp8Format f = fp8_format(e5m2);
  const uint32_t u = float_bits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80);
  const uint32_t biased = (u >> 23) & 0xFF;
  const uint32_t mantissa = u & 0x7FFFFF;
  if (biased == 0xFF) return mantissa ? uint8_t{0x7F} : static_cast<uint8_t>(sign | f.max_code);
  if (biased == 0) return sign;  // float subnormals are far below half the smallest FP8 subnormal
  // n = round(|x| / 2^(e - m)) with e the FP8 exponent (at least the smallest normal one); then the code
  // is ((e - min_e) << m) + n, which also covers subnormals (e = min_e, n < 2^m) and the carry of n into
  // the next exponent.
  const int32_t min_e = 1 - f.bias;
  int32_t e = static_cast<int32_t>(biased) - 127;
  if (e < min_e) e = min_e;
  const int32_t shift = 23 + e - f.mantissa_bits - (static_cast<int32_t>(biased) - 127);
  const uint32_t significand = mantissa | 0x800000;
  uint32_t n = 0;
  if (shift < 25) {
    n = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (n & 1))) ++n;
  }
  const int64_t code = (static_cast<int64_t>(e - min_e) << f.mantissa_bits) + n;
  return static_cast<uint8_t>(sign | (code > f.max_code ? f.max_code : code));
}

// The value of an FP8 code (exact in float).
MXFP8_HOST_DEVICE inline float fp8_decode(uint8_t c, bool e5m2) {
  const Fp8Format f = fp8_format(e5m2);
  const uint32_t sign = static_cast<uint32_t>(c & 0x80) << 24;
  const uint32_t exponent = (c & 0x7F) >> f.mantissa_bits;
  const uint32_t mantissa = c & ((1u << f.mantissa_bits) - 1);
  const uint32_t top = 0x7Fu >> f.mantissa_bits;
  if (exponent == top && (e5m2 || mantissa == 7))
    return bits_float(mantissa ? 0x7FC00000u | sign : 0x7F800000u | sign);  // E5M2 Inf/NaN, E4M3 NaN
  if (exponent == 0) {
    // m * 2^(1 - bias - mantissa_bits): built in float bits by normalizing m.
    if (mantissa == 0) return bits_float(sign);
    int32_t shift = 0;
    uint32_t m = mantissa;
    while (!(m & (1u << f.mantissa_bits))) {
      m <<= 1;
      ++shift;
    }
    const uint32_t biased = static_cast<uint32_t>(1 - f.bias - shift + 127);
    return bits_float(sign | (biased << 23) | ((m & ((1u << f.mantissa_bits) - 1)) << (23 - f.mantissa_bits)));
  }
  const uint32_t biased = exponent - static_cast<uint32_t>(f.bias) + 127;
  return bits_float(sign | (biased << 23) | (mantissa << (23 - f.mantissa_bits)));
}

// One dequantized element: the FP8 value times its scale, in float, with every NaN written as CUDA's
// canonical 0x7FFFFFFF (a host multiply would keep the NaN operand's payload and sign instead).
MXFP8_HOST_DEVICE inline float dequantize_element(uint8_t value, uint8_t scale, bool e5m2) {
  const float v = fp8_decode(value, e5m2) * e8m0_value(scale);
  return v != v ? bits_float(0x7FFFFFFFu) : v;
}

MXFP8_HOST_DEVICE inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

MXFP8_HOST_DEVICE inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  uint32_t mantissa = h & 0x3FF;
  if (exponent == 0x1F) return bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return bits_float(sign);
    int32_t e = -14;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      --e;
    }
    return bits_float(sign | (static_cast<uint32_t>(e + 127) << 23) | ((mantissa & 0x3FF) << 13));
  }
  return bits_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

// Round to nearest even; NaN becomes 0x7FFF, as CUDA's __float2bfloat16_rn makes it.
MXFP8_HOST_DEVICE inline uint16_t float_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return 0x7FFF;
  const uint32_t rounded = u + 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace mxfp8
