// The branch-free 16-lane conversions the host loops use (src/mx_numerics_lanes.hpp) against the scalar
// definitions in src/mx_numerics.hpp, which were the host loop before it was vectorized and which the GPU's
// dequantize still runs: bit for bit, on every 8-bit and 16-bit input, and on every float whose exponent,
// sign and top 7 mantissa bits differ, each with the low 16 mantissa bits set to the patterns rounding
// can tell apart (0, 1, a tie, just above and below a tie, all ones). Compiled for each instruction set
// the host loops are (baseline, AVX2, AVX-512) and run on those this CPU has.
//
// MXFP8_NUMERICS_EXHAUSTIVE=1 checks the encoder on all 2^32 float patterns instead (a few minutes).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "host/host_isa.hpp"
#include "core/mx_numerics.hpp"
#include "host/mx_numerics_lanes.hpp"

// The lane lambdas must be inlined into the per-instruction-set callers to be compiled for them.
#define MXFP8_LAMBDA_INLINE __attribute__((always_inline))

namespace mxfp8 {
namespace {

int failures = 0;

void expect_equal(uint32_t got, uint32_t want, const char *isa, const char *what, uint32_t input) {
  if (got == want) return;
  if (++failures <= 20)
    std::fprintf(stderr, "FAIL [%s] %s(0x%08x): lanes give 0x%08x, the reference 0x%08x\n", isa, what, input, got, want);
}

constexpr int kBatch = 16;  // inputs per check: one AVX-512 vector, two AVX2 or four baseline ones

// kBatch inputs through one lane function (N lanes at a time) and its reference.
template <int N, class Lane, class Reference>
MXFP8_ALWAYS_INLINE void compare(const uint32_t *inputs, const char *isa, const char *what, Lane lane, Reference reference) {
  for (int k = 0; k < kBatch / N; ++k) {
    typename Lanes<N>::U32 in;
    std::memcpy(&in, inputs + k * N, sizeof in);
    const Lanes<N> out = lane(in);
    uint32_t got[N];
    std::memcpy(got, &out.v, sizeof got);
    for (int i = 0; i < N; ++i) expect_equal(got[i], reference(inputs[k * N + i]), isa, what, inputs[k * N + i]);
  }
}

// Every float pattern the encoder can distinguish: the top 16 bits exhaustively, the low 16 bits from
// patterns around each possible rounding point (the cut is at bit 20 or 21 for normals and higher for
// subnormals, so below bit 16 only "zero or not" matters; a few others for good measure).
constexpr uint32_t kLowPatterns[kBatch] = {0x0000, 0x0001, 0x0002, 0x00FF, 0x7FFF, 0x8000, 0x8001, 0xFFFF,
                                           0x4000, 0xC000, 0x1234, 0xFFFE, 0x0100, 0x7FFE, 0x3FFF, 0x5555};

template <bool E5M2, int N>
MXFP8_ALWAYS_INLINE void check_encode(const char *isa, bool exhaustive) {
  using U32 = typename Lanes<N>::U32;
  uint32_t in[kBatch];
  auto lane = [](const U32 &v) MXFP8_LAMBDA_INLINE { return fp8_encode_lanes<E5M2, N>(v); };
  auto reference = [](uint32_t u) { return static_cast<uint32_t>(fp8_encode(bits_float(u), E5M2)); };
  const char *name = E5M2 ? "fp8_encode E5M2" : "fp8_encode E4M3";
  if (exhaustive) {
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kBatch) {
      for (int i = 0; i < kBatch; ++i) in[i] = static_cast<uint32_t>(base) + static_cast<uint32_t>(i);
      compare<N>(in, isa, name, lane, reference);
    }
    return;
  }
  for (uint32_t high = 0; high < 0x10000u; ++high) {
    for (int i = 0; i < kBatch; ++i) in[i] = (high << 16) | kLowPatterns[i];
    compare<N>(in, isa, name, lane, reference);
  }
}

template <bool E5M2, int N>
MXFP8_ALWAYS_INLINE void check_decode_and_dequantize(const char *isa) {
  using U32 = typename Lanes<N>::U32;
  uint32_t in[kBatch];
  for (uint32_t c = 0; c < 256; c += kBatch) {
    for (int i = 0; i < kBatch; ++i) in[i] = c + static_cast<uint32_t>(i);
    compare<N>(in, isa, "fp8_decode", [](const U32 &v) MXFP8_LAMBDA_INLINE { return fp8_decode_lanes<E5M2, N>(v); },
               [](uint32_t x) { return float_bits(fp8_decode(static_cast<uint8_t>(x), E5M2)); });
  }
  // Every (value, scale) pair: the 16 bits are value << 8 | scale.
  for (uint32_t pair = 0; pair < 0x10000u; pair += kBatch) {
    for (int i = 0; i < kBatch; ++i) in[i] = pair + static_cast<uint32_t>(i);
    compare<N>(
        in, isa, "dequantize_element",
        [](const U32 &v) MXFP8_LAMBDA_INLINE {
          return dequantize_lanes<N>(fp8_decode_lanes<E5M2, N>(v >> 8).v, e8m0_value_lanes<N>(v & 0xFFu).v);
        },
        [](uint32_t x) {
          return float_bits(dequantize_element(static_cast<uint8_t>(x >> 8), static_cast<uint8_t>(x & 0xFF), E5M2));
        });
  }
}

struct CheckAll {
  template <int N>
  MXFP8_ALWAYS_INLINE static void run(const char *const &isa, const bool &exhaustive) {
    using U32 = typename Lanes<N>::U32;
    check_encode<false, N>(isa, exhaustive);
    check_encode<true, N>(isa, exhaustive);
    check_decode_and_dequantize<false, N>(isa);
    check_decode_and_dequantize<true, N>(isa);
    uint32_t in[kBatch];
    for (uint32_t e = 0; e < 256; e += kBatch) {
      for (int i = 0; i < kBatch; ++i) in[i] = e + static_cast<uint32_t>(i);
      compare<N>(in, isa, "e8m0_value", [](const U32 &v) MXFP8_LAMBDA_INLINE { return e8m0_value_lanes<N>(v); },
                 [](uint32_t x) { return float_bits(e8m0_value(static_cast<uint8_t>(x))); });
    }
    for (uint32_t h = 0; h < 0x10000u; h += N) {
      uint16_t halves[N];
      for (int i = 0; i < N; ++i) halves[i] = static_cast<uint16_t>(h + static_cast<uint32_t>(i));
      const Lanes<N> got = load_fp16_lanes<N>(halves), got_bf16 = load_bf16_lanes<N>(halves);
      uint32_t out[N], out_bf16[N];
      std::memcpy(out, &got.v, sizeof out);
      std::memcpy(out_bf16, &got_bf16.v, sizeof out_bf16);
      for (int i = 0; i < N; ++i) {
        expect_equal(out[i], float_bits(fp16_to_float(halves[i])), isa, "fp16_to_float", halves[i]);
        expect_equal(out_bf16[i], float_bits(bf16_to_float(halves[i])), isa, "bf16_to_float", halves[i]);
      }
    }
    for (uint32_t high = 0; high < 0x10000u; ++high) {
      for (int i = 0; i < kBatch; ++i) in[i] = (high << 16) | kLowPatterns[i];
      compare<N>(in, isa, "float_to_bf16", [](const U32 &v) MXFP8_LAMBDA_INLINE { return bf16_lanes<N>(v); },
                 [](uint32_t u) { return static_cast<uint32_t>(float_to_bf16(bits_float(u))); });
      // The amax key: |x| with NaN as 0, ordered like the values.
      compare<N>(in, isa, "magnitude_key", [](const U32 &v) MXFP8_LAMBDA_INLINE { return magnitude_key_lanes<N>(v); },
                 [](uint32_t u) {
                   const float x = bits_float(u);
                   return x != x ? 0u : float_bits(x < 0 ? -x : x == 0 ? 0.0f : x);  // -0 counts as 0
                 });
      // compressed-tensors' amax key: NaN counts as +Inf.
      compare<N>(in, isa, "magnitude_key (NaN as Inf)",
                 [](const U32 &v) MXFP8_LAMBDA_INLINE { return magnitude_key_lanes<N>(v, 0x7F800000u); },
                 [](uint32_t u) {
                   const float x = bits_float(u);
                   return x != x ? 0x7F800000u : float_bits(x < 0 ? -x : x == 0 ? 0.0f : x);
                 });
    }
  }
};

}  // namespace
}  // namespace mxfp8

int main() {
  using namespace mxfp8;
  const char *env = std::getenv("MXFP8_NUMERICS_EXHAUSTIVE");
  const bool exhaustive = env && std::strcmp(env, "1") == 0;
  const HostIsa best = host_isa();
  run_baseline<CheckAll>("baseline", exhaustive);
  int isas = 1;
#if MXFP8_HOST_ISA_X86
  if (best >= HostIsa::Avx2) run_avx2<CheckAll>("avx2", exhaustive), ++isas;
  if (best >= HostIsa::Avx512) run_avx512<CheckAll>("avx512", exhaustive), ++isas;
#endif
  if (failures) {
    std::fprintf(stderr, "%d mismatches\n", failures);
    return 1;
  }
  std::printf("host numerics: lanes == reference on %d instruction set(s)%s\n", isas,
              exhaustive ? ", encoder on all 2^32 floats" : "");
  return 0;
}
