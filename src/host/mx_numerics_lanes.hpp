// The conversions of mx_numerics.hpp that the host loops apply to every element, on N lanes at a time
// (GCC/Clang vector extensions) and without branches. N is the register width of the instruction set the
// calling function is compiled for (host_isa.hpp): 16 for AVX-512, 8 for AVX2, 4 for the baseline (SSE2,
// or NEON on aarch64). A vector wider than the target's registers would compile, but GCC then does every
// comparison and select one lane at a time.
//
// Each function gives exactly the result of its reference in mx_numerics.hpp for every input
// (tests/c/test_host_numerics.cpp compares them on every 8- and 16-bit input and on every float whose low
// bits matter, for each N); the references stay the definition, and the GPU's dequantize kernel uses them.
// Host only.
//
// Comparisons are signed: every value compared is below 2^31, and x86 before AVX-512 compares only signed
// lanes natively. Vectors are passed by reference and returned inside a struct: a vector wider than the
// baseline's registers may not cross a function boundary by value, even an inlined one (Clang checks).
#pragma once

#include <cstdint>
#include <cstring>

#include "host/host_isa.hpp"
#include "core/mx_numerics.hpp"

namespace mxfp8 {

// N lanes of uint32 (float bits, codes, exponents), and the types they are loaded from and stored to.
template <int N>
struct Lanes {
  typedef uint32_t U32 __attribute__((vector_size(4 * N)));
  typedef int32_t I32 __attribute__((vector_size(4 * N)));
  typedef float F32 __attribute__((vector_size(4 * N)));
  typedef uint16_t U16 __attribute__((vector_size(2 * N)));
  typedef uint8_t U8 __attribute__((vector_size(N)));
  U32 v;
};

// Comparisons as select masks, and the select. Signed comparisons: both sides are below 2^31. The select
// is the vector `?:`, which compiles to masked moves or blends when it directly follows its comparison.
template <int N>
struct Mask {
  typename Lanes<N>::I32 v;
};
template <int N>
MXFP8_ALWAYS_INLINE Mask<N> greater(const typename Lanes<N>::U32 &a, uint32_t b) {
  return Mask<N>{reinterpret_cast<typename Lanes<N>::I32>(a) > static_cast<int32_t>(b)};
}
template <int N>
MXFP8_ALWAYS_INLINE Mask<N> greater(const typename Lanes<N>::U32 &a, const typename Lanes<N>::U32 &b) {
  using I32 = typename Lanes<N>::I32;
  return Mask<N>{reinterpret_cast<I32>(a) > reinterpret_cast<I32>(b)};
}
template <int N>
MXFP8_ALWAYS_INLINE Mask<N> equal(const typename Lanes<N>::U32 &a, uint32_t b) {
  return Mask<N>{a == b};
}
// mask ? a : b, per lane (a may be one value for every lane).
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> select(const Mask<N> &mask, const typename Lanes<N>::U32 &a, const typename Lanes<N>::U32 &b) {
  return Lanes<N>{mask.v ? a : b};
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> select(const Mask<N> &mask, uint32_t a, const typename Lanes<N>::U32 &b) {
  return Lanes<N>{mask.v ? typename Lanes<N>::U32{} + a : b};
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> select(const Mask<N> &mask, uint32_t a, uint32_t b) {
  return Lanes<N>{mask.v ? typename Lanes<N>::U32{} + a : typename Lanes<N>::U32{} + b};
}
// min(a, b) and max(a, b) for lanes below 2^31 (one instruction each).
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> minimum(const typename Lanes<N>::U32 &a, uint32_t b) {
  using I32 = typename Lanes<N>::I32;
  const I32 x = reinterpret_cast<I32>(a), y = I32{} + static_cast<int32_t>(b);
  return Lanes<N>{reinterpret_cast<typename Lanes<N>::U32>(x < y ? x : y)};
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> maximum(const typename Lanes<N>::I32 &a, int32_t b) {
  using I32 = typename Lanes<N>::I32;
  const I32 y = I32{} + b;
  return Lanes<N>{reinterpret_cast<typename Lanes<N>::U32>(a > y ? a : y)};
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> splat(uint32_t x) {
  return Lanes<N>{typename Lanes<N>::U32{} + x};
}

// N elements from memory (any alignment), as float bits; and N results back.
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> load_bf16_lanes(const uint16_t *p) {
  typename Lanes<N>::U16 h;
  std::memcpy(&h, p, sizeof h);
  return Lanes<N>{__builtin_convertvector(h, typename Lanes<N>::U32) << 16};
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> load_u32_lanes(const void *p) {
  Lanes<N> x;
  std::memcpy(&x.v, p, sizeof x.v);
  return x;
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> load_u8_lanes(const uint8_t *p) {
  typename Lanes<N>::U8 b;
  std::memcpy(&b, p, sizeof b);
  // Widened in two steps: GCC does a direct 8-to-32-bit conversion one lane at a time.
  return Lanes<N>{__builtin_convertvector(__builtin_convertvector(b, typename Lanes<N>::U16), typename Lanes<N>::U32)};
}
template <int N>
MXFP8_ALWAYS_INLINE void store_u8_lanes(uint8_t *p, const typename Lanes<N>::U32 &x) {
  // AVX-512 narrows in one instruction (vpmovdb); narrower targets in two steps, for the same reason as
  // load_u8_lanes widens in two.
  using U8 = typename Lanes<N>::U8;
  const U8 b = N == 16 ? __builtin_convertvector(x, U8)
                       : __builtin_convertvector(__builtin_convertvector(x, typename Lanes<N>::U16), U8);
  std::memcpy(p, &b, sizeof b);
}
template <int N>
MXFP8_ALWAYS_INLINE void store_u16_lanes(uint16_t *p, const typename Lanes<N>::U32 &x) {
  const typename Lanes<N>::U16 h = __builtin_convertvector(x, typename Lanes<N>::U16);
  std::memcpy(p, &h, sizeof h);
}
template <int N>
MXFP8_ALWAYS_INLINE void store_u32_lanes(void *p, const typename Lanes<N>::U32 &x) {
  std::memcpy(p, &x, sizeof x);
}

// x * r in float, as bits (r one float, or one per lane).
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> multiply_lanes(const typename Lanes<N>::U32 &x, float r) {
  using L = Lanes<N>;
  return L{reinterpret_cast<typename L::U32>(reinterpret_cast<typename L::F32>(x) * r)};
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> multiply_lanes(const typename Lanes<N>::U32 &x, const typename Lanes<N>::F32 &r) {
  using L = Lanes<N>;
  return L{reinterpret_cast<typename L::U32>(reinterpret_cast<typename L::F32>(x) * r)};
}

// A small non-negative integer (< 2^24) times a power of two, as float bits: exact.
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> scaled_integer(const typename Lanes<N>::U32 &n, float unit) {
  using L = Lanes<N>;
  return L{reinterpret_cast<typename L::U32>(__builtin_convertvector(reinterpret_cast<typename L::I32>(n), typename L::F32) * unit)};
}

// fp16_to_float: exponent and mantissa move into place with one add of the bias difference (Inf and NaN,
// exponent 31, with a larger one to reach 255); a subnormal half is its mantissa times 2^-24.
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> load_fp16_lanes(const uint16_t *p) {
  using U32 = typename Lanes<N>::U32;
  typename Lanes<N>::U16 h;
  std::memcpy(&h, p, sizeof h);
  const U32 x = __builtin_convertvector(h, U32);
  const U32 sign = (x & 0x8000u) << 16;
  const U32 magnitude = x & 0x7FFFu;
  const U32 exponent = magnitude >> 10;
  const U32 normal = (magnitude << 13) + ((127u - 15u) << 23);
  const U32 special = (magnitude << 13) + ((255u - 31u) << 23);
  const U32 finite = select<N>(equal<N>(exponent, 0), scaled_integer<N>(magnitude, 0x1p-24f).v, normal).v;
  return Lanes<N>{sign | select<N>(equal<N>(exponent, 0x1F), special, finite).v};
}

// |x| as bits, `nan_key` for NaN: for non-negative floats the bit patterns order as the values do, so the
// maximum of these is the amax (and -0 counts as 0) with every NaN skipped (nan_key 0) or counted as +Inf
// (nan_key 0x7F800000, compressed-tensors' rule).
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> magnitude_key_lanes(const typename Lanes<N>::U32 &bits, uint32_t nan_key = 0) {
  const typename Lanes<N>::U32 magnitude = bits & 0x7FFFFFFFu;
  return select<N>(greater<N>(magnitude, 0x7F800000u), nan_key, magnitude);
}
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> max_lanes(const typename Lanes<N>::U32 &a, const typename Lanes<N>::U32 &b) {
  return select<N>(greater<N>(a, b), a, b);
}
template <int N>
MXFP8_ALWAYS_INLINE uint32_t horizontal_max(const typename Lanes<N>::U32 &a) {
  uint32_t lanes[N];
  std::memcpy(lanes, &a, sizeof lanes);
  uint32_t m = 0;
  _Pragma("GCC unroll 16") for (uint32_t x : lanes) m = x > m ? x : m;
  return m;
}

// fp8_encode: the same n = round(|x| / 2^(e - m)) and code = ((e - min_e) << m) + n, with the per-element
// branches turned into selects: the shift grows by how far x lies below the smallest normal FP8 exponent
// (capped at 31, where n rounds to 0 as it does for the reference's shift >= 25), and zero, float
// subnormals (shift 31), Inf (a code past max_code) and NaN fall out of the same arithmetic plus the final
// saturation and NaN select. Rounding to nearest even adds half - 1, plus 1 when the truncated value is
// odd, before truncating.
template <bool E5M2, int N>
MXFP8_ALWAYS_INLINE Lanes<N> fp8_encode_lanes(const typename Lanes<N>::U32 &u) {
  using U32 = typename Lanes<N>::U32;
  constexpr Fp8Format f = fp8_format(E5M2);
  constexpr uint32_t m = static_cast<uint32_t>(f.mantissa_bits);
  constexpr uint32_t min_biased = static_cast<uint32_t>(127 + 1 - f.bias);  // float exponent of FP8's min normal
  const U32 sign = (u >> 24) & 0x80u;
  const U32 magnitude = u & 0x7FFFFFFFu;
  const U32 biased = magnitude >> 23;
  const U32 below = maximum<N>(reinterpret_cast<typename Lanes<N>::I32>(min_biased - biased), 0).v;
  const U32 shift = minimum<N>((23u - m) + below, 31u).v;
  const U32 significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const U32 n = (significand + ((1u << (shift - 1u)) - 1u) + ((significand >> shift) & 1u)) >> shift;
  const U32 code = ((biased - min_biased + below) << m) + n;  // biased + below is at least min_biased
  const U32 saturated = minimum<N>(code, f.max_code).v;
  return select<N>(greater<N>(magnitude, 0x7F800000u), 0x7Fu, sign | saturated);
}

// fp8_decode, as float bits: normal codes shift into place and rebias with one add; subnormal codes are
// their mantissa times 2^(1 - bias - m), exact in float; then E4M3's NaN and E5M2's Inf/NaN.
template <bool E5M2, int N>
MXFP8_ALWAYS_INLINE Lanes<N> fp8_decode_lanes(const typename Lanes<N>::U32 &c) {
  using U32 = typename Lanes<N>::U32;
  constexpr Fp8Format f = fp8_format(E5M2);
  constexpr uint32_t m = static_cast<uint32_t>(f.mantissa_bits);
  constexpr float subnormal_unit = E5M2 ? 0x1p-16f : 0x1p-9f;  // 2^(1 - bias - m)
  const U32 sign = (c & 0x80u) << 24;
  const U32 magnitude = c & 0x7Fu;
  const U32 exponent = magnitude >> m;
  const U32 normal = (magnitude << (23u - m)) + (static_cast<uint32_t>(127 - f.bias) << 23);
  const U32 finite = select<N>(equal<N>(exponent, 0), scaled_integer<N>(magnitude, subnormal_unit).v, normal).v;
  const U32 special = select<N>(greater<N>(magnitude, E5M2 ? 0x7Cu : 0x7Eu), 0x7FC00000u, 0x7F800000u).v;
  const Mask<N> is_special = E5M2 ? equal<N>(exponent, 0x1F) : equal<N>(magnitude, 0x7F);
  return Lanes<N>{sign | select<N>(is_special, special, finite).v};
}

// e8m0_value, as float bits.
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> e8m0_value_lanes(const typename Lanes<N>::U32 &e) {
  return select<N>(equal<N>(e, 255), 0x7FC00000u, select<N>(equal<N>(e, 0), 0x00400000u, e << 23).v);
}

// dequantize_element from the decoded value's and the scale's bits: the float product, every NaN written
// as 0x7FFFFFFF.
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> dequantize_lanes(const typename Lanes<N>::U32 &value_bits, const typename Lanes<N>::U32 &scale_bits) {
  using L = Lanes<N>;
  const typename L::U32 product = multiply_lanes<N>(value_bits, reinterpret_cast<typename L::F32>(scale_bits)).v;
  return select<N>(greater<N>(product & 0x7FFFFFFFu, 0x7F800000u), 0x7FFFFFFFu, product);
}

// float_to_bf16 (in the low 16 bits of each lane).
template <int N>
MXFP8_ALWAYS_INLINE Lanes<N> bf16_lanes(const typename Lanes<N>::U32 &u) {
  const typename Lanes<N>::U32 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  return select<N>(greater<N>(u & 0x7FFFFFFFu, 0x7F800000u), 0x7FFFu, rounded);
}

}  // namespace mxfp8
