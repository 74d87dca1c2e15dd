// The conversions of mx_numerics.hpp that the host loops apply to every element, on 16 lanes at a time
// (GCC/Clang vector extensions: one AVX-512 register, two AVX2 or four SSE2 registers, whichever the
// calling function is compiled for; see host_isa.hpp) and without branches. Each gives exactly the result
// of its reference in mx_numerics.hpp for every input (tests/c/test_host_numerics.cpp compares them on
// every 8- and 16-bit input and on every float whose low bits matter); the references stay the
// definition, and the GPU's dequantize kernel uses them. Host only.
//
// Vectors are passed by reference and returned inside a struct: a 64-byte vector may not cross a function
// boundary by value in code compiled for narrower registers, even an inlined one (Clang checks this).
#pragma once

#include <cstdint>
#include <cstring>

#include "host_isa.hpp"
#include "mx_numerics.hpp"

namespace mxfp8 {

constexpr int kLaneCount = 16;
typedef uint32_t VecU32 __attribute__((vector_size(4 * kLaneCount)));
typedef int32_t VecI32 __attribute__((vector_size(4 * kLaneCount)));
typedef float VecF32 __attribute__((vector_size(4 * kLaneCount)));
typedef uint16_t VecU16 __attribute__((vector_size(2 * kLaneCount)));
typedef uint8_t VecU8 __attribute__((vector_size(kLaneCount)));

struct Lanes {
  VecU32 v;
};

// 16 elements from memory (any alignment) as float bits, and 16 results back.
MXFP8_ALWAYS_INLINE Lanes load_bf16_lanes(const uint16_t *p) {
  VecU16 h;
  std::memcpy(&h, p, sizeof h);
  return Lanes{__builtin_convertvector(h, VecU32) << 16};
}
MXFP8_ALWAYS_INLINE Lanes load_u32_lanes(const void *p) {
  Lanes x;
  std::memcpy(&x.v, p, sizeof x.v);
  return x;
}
MXFP8_ALWAYS_INLINE Lanes load_u8_lanes(const uint8_t *p) {
  VecU8 b;
  std::memcpy(&b, p, sizeof b);
  return Lanes{__builtin_convertvector(b, VecU32)};
}
MXFP8_ALWAYS_INLINE void store_u8_lanes(uint8_t *p, const VecU32 &x) {
  const VecU8 b = __builtin_convertvector(x, VecU8);
  std::memcpy(p, &b, sizeof b);
}
MXFP8_ALWAYS_INLINE void store_u16_lanes(uint16_t *p, const VecU32 &x) {
  const VecU16 h = __builtin_convertvector(x, VecU16);
  std::memcpy(p, &h, sizeof h);
}
MXFP8_ALWAYS_INLINE void store_u32_lanes(void *p, const VecU32 &x) { std::memcpy(p, &x, sizeof x); }

// x * r in float, as bits (r one float, or one per lane).
MXFP8_ALWAYS_INLINE Lanes multiply_lanes(const VecU32 &x, float r) {
  return Lanes{reinterpret_cast<VecU32>(reinterpret_cast<VecF32>(x) * r)};
}
MXFP8_ALWAYS_INLINE Lanes multiply_lanes(const VecU32 &x, const VecF32 &r) {
  return Lanes{reinterpret_cast<VecU32>(reinterpret_cast<VecF32>(x) * r)};
}

// fp16_to_float: exponent and mantissa move into place with one add of the bias difference (Inf and NaN,
// exponent 31, with a larger one to reach 255); a subnormal half is its mantissa times 2^-24, exact in
// float.
MXFP8_ALWAYS_INLINE Lanes load_fp16_lanes(const uint16_t *p) {
  VecU16 h;
  std::memcpy(&h, p, sizeof h);
  const VecU32 x = __builtin_convertvector(h, VecU32);
  const VecU32 sign = (x & 0x8000u) << 16;
  const VecU32 magnitude = x & 0x7FFFu;
  const VecU32 exponent = magnitude >> 10;
  const VecU32 normal = (magnitude << 13) + ((127u - 15u) << 23);
  const VecU32 special = (magnitude << 13) + ((255u - 31u) << 23);
  const VecU32 subnormal =
      reinterpret_cast<VecU32>(__builtin_convertvector(reinterpret_cast<VecI32>(magnitude), VecF32) * 0x1p-24f);
  return Lanes{sign | (exponent == 0u ? subnormal : exponent == 0x1Fu ? special : normal)};
}

// |x| as bits, 0 for NaN: for non-negative floats the bit patterns order as the values do, so the unsigned
// maximum of these is the amax with every NaN skipped (and -0 counted as 0).
MXFP8_ALWAYS_INLINE Lanes magnitude_key_lanes(const VecU32 &bits) {
  const VecU32 magnitude = bits & 0x7FFFFFFFu;
  return Lanes{magnitude > 0x7F800000u ? 0u : magnitude};
}
MXFP8_ALWAYS_INLINE Lanes max_lanes(const VecU32 &a, const VecU32 &b) { return Lanes{a > b ? a : b}; }
MXFP8_ALWAYS_INLINE uint32_t horizontal_max(const VecU32 &a) {
  uint32_t lanes[kLaneCount];
  std::memcpy(lanes, &a, sizeof lanes);
  uint32_t m = 0;
  for (uint32_t x : lanes) m = x > m ? x : m;
  return m;
}

// fp8_encode: the same n = round(|x| / 2^(e - m)) and code = ((e - min_e) << m) + n, with the per-element
// branches turned into selects: the shift grows by how far x lies below the smallest normal FP8 exponent
// (capped at 31, where n and its rounding are 0, as the reference's shift >= 25 gives), and zero, float
// subnormals (shift 31), Inf (a code past max_code) and NaN fall out of the same arithmetic plus the
// final saturation and NaN select.
template <bool E5M2>
MXFP8_ALWAYS_INLINE Lanes fp8_encode_lanes(const VecU32 &u) {
  constexpr Fp8Format f = fp8_format(E5M2);
  constexpr uint32_t m = static_cast<uint32_t>(f.mantissa_bits);
  constexpr uint32_t min_biased = static_cast<uint32_t>(127 + 1 - f.bias);  // float exponent of FP8's min normal
  constexpr uint32_t max_code = f.max_code;
  const VecU32 sign = (u >> 24) & 0x80u;
  const VecU32 magnitude = u & 0x7FFFFFFFu;
  const VecU32 biased = magnitude >> 23;
  const VecU32 below = biased < min_biased ? min_biased - biased : 0u;
  const VecU32 wide_shift = (23u - m) + below;
  const VecU32 shift = wide_shift > 31u ? 31u : wide_shift;
  const VecU32 significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const VecU32 truncated = significand >> shift;
  const VecU32 rest = significand & ((1u << shift) - 1u);
  const VecU32 half = 1u << (shift - 1u);
  // Round to nearest even: up when rest > half, or rest == half and the truncated value is odd.
  const VecU32 n = truncated + (rest + (truncated & 1u) > half ? 1u : 0u);
  const VecU32 exponent_field = (biased > min_biased ? biased : min_biased) - min_biased;
  const VecU32 code = (exponent_field << m) + n;
  const VecU32 saturated = code > max_code ? max_code : code;
  return Lanes{magnitude > 0x7F800000u ? 0x7Fu : (sign | saturated)};
}

// fp8_decode, as float bits: normal codes shift into place and rebias with one add; subnormal codes are
// their mantissa times 2^(1 - bias - m), exact in float; then E4M3's NaN and E5M2's Inf/NaN.
template <bool E5M2>
MXFP8_ALWAYS_INLINE Lanes fp8_decode_lanes(const VecU32 &c) {
  constexpr Fp8Format f = fp8_format(E5M2);
  constexpr uint32_t m = static_cast<uint32_t>(f.mantissa_bits);
  constexpr float subnormal_unit = E5M2 ? 0x1p-16f : 0x1p-9f;  // 2^(1 - bias - m)
  const VecU32 sign = (c & 0x80u) << 24;
  const VecU32 magnitude = c & 0x7Fu;
  const VecU32 exponent = magnitude >> m;
  const VecU32 normal = (magnitude << (23u - m)) + (static_cast<uint32_t>(127 - f.bias) << 23);
  const VecU32 subnormal = reinterpret_cast<VecU32>(
      __builtin_convertvector(reinterpret_cast<VecI32>(magnitude), VecF32) * subnormal_unit);
  const VecU32 finite = exponent == 0u ? subnormal : normal;
  const VecU32 special = E5M2 ? (magnitude > 0x7Cu ? 0x7FC00000u : 0x7F800000u) : VecU32{} + 0x7FC00000u;
  const VecU32 is_special = E5M2 ? exponent == 0x1Fu : magnitude == 0x7Fu;
  return Lanes{sign | (is_special ? special : finite)};
}

// e8m0_value, as float bits.
MXFP8_ALWAYS_INLINE Lanes e8m0_value_lanes(const VecU32 &e) {
  return Lanes{e == 255u ? 0x7FC00000u : e == 0u ? 0x00400000u : e << 23};
}

// dequantize_element from the decoded value's and the scale's bits: the float product, every NaN written
// as 0x7FFFFFFF.
MXFP8_ALWAYS_INLINE Lanes dequantize_lanes(const VecU32 &value_bits, const VecU32 &scale_bits) {
  const VecU32 product = reinterpret_cast<VecU32>(reinterpret_cast<VecF32>(value_bits) * reinterpret_cast<VecF32>(scale_bits));
  return Lanes{(product & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FFFFFFFu : product};
}

// float_to_bf16 (in the low 16 bits of each lane).
MXFP8_ALWAYS_INLINE Lanes bf16_lanes(const VecU32 &u) {
  const VecU32 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return Lanes{(u & 0x7FFFFFFFu) > 0x7F800000u ? 0x7FFFu : rounded};
}

}  // namespace mxfp8
