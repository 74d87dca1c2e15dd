// nvfp4_numerics.hpp's E2M1 encoder (three candidate roundings and their minimum) against the definition
// it replaced, written out here as the reference: the code is the number of midpoints between grid
// neighbours that |x| lies above, strictly above 0.25, 1.25, 2.5 and 5 and at or above 0.75, 1.75 and
// 3.5 (a tie goes to the even code); the sign bit kept, also for zeros and underflows; NaN to +6.
//
// By default on every float whose top 24 bits are anything (both signs, every exponent, Inf and NaNs) and
// whose low byte is one of 0x00 0x01 0x02 0x7F 0x80 0x81 0xFE 0xFF (134M patterns, a second or two; the
// sanitizer builds take longer): every point where the code changes (the midpoints and 6) has at most 3
// significant bits, so inside a run of 256 patterns that share their top 24 bits only the first two can
// differ, and the others are there to catch an encoder that looks at the low bits.
// MXFP8_NUMERICS_EXHAUSTIVE=1 checks all 2^32 patterns instead.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>

#include "core/nvfp4_numerics.hpp"

namespace {

int failures = 0;
uint64_t checked = 0;

uint8_t reference_encode(uint32_t u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7;  // NaN
  const float a = mxfp8::bits_float(u & 0x7FFFFFFFu);
  uint8_t code = 0;
  code += a > 0.25f;
  code += a >= 0.75f;
  code += a > 1.25f;
  code += a >= 1.75f;
  code += a > 2.5f;
  code += a >= 3.5f;
  code += a > 5.0f;
  return static_cast<uint8_t>(code | ((u >> 28) & 0x8u));
}

void report(uint32_t u) {
  const uint8_t got = mxfp8::e2m1_encode(mxfp8::bits_float(u));
  const uint8_t want = reference_encode(u);
  if (got != want && ++failures <= 20)
    std::fprintf(stderr, "FAIL e2m1_encode(0x%08x = %g) gives 0x%x, the reference 0x%x\n", u,
                 static_cast<double>(mxfp8::bits_float(u)), got, want);
}

// Patterns first .. last (inclusive), `step` apart: compared in runs without a branch (so that the
// compiler vectorizes both encoders), a run that differs is gone through again to report.
void check_range(uint64_t first, uint64_t last, uint64_t step) {
  constexpr uint64_t kRun = 4096;
  for (uint64_t begin = first; begin <= last; begin += kRun * step) {
    const uint64_t end = begin + kRun * step - 1 < last ? begin + kRun * step - 1 : last;
    uint32_t differ = 0;
    for (uint64_t u = begin; u <= end; u += step) {
      const uint32_t v = static_cast<uint32_t>(u);
      differ |= static_cast<uint32_t>(mxfp8::e2m1_encode(mxfp8::bits_float(v)) ^ reference_encode(v));
    }
    checked += (end - begin) / step + 1;
    if (differ)
      for (uint64_t u = begin; u <= end; u += step) report(static_cast<uint32_t>(u));
  }
}

// The grid and its midpoints by value, so that the sweep above is known to cover what matters.
void check_known_values() {
  const struct {
    float x;
    uint8_t code;
  } cases[] = {{0.0f, 0x0}, {-0.0f, 0x8}, {0.25f, 0x0}, {0.2500001f, 0x1}, {0.5f, 0x1}, {0.75f, 0x2},
               {0.7499999f, 0x1}, {1.25f, 0x2}, {1.2500001f, 0x3}, {1.75f, 0x4}, {2.5f, 0x4}, {2.5000002f, 0x5},
               {3.5f, 0x6}, {3.4999998f, 0x5}, {5.0f, 0x6}, {5.0000005f, 0x7}, {6.0f, 0x7}, {-6.5f, 0xF},
               {1e30f, 0x7}, {-1e-45f, 0x8}, {-3.0f, 0xD}};
  for (const auto &c : cases) {
    const uint8_t got = mxfp8::e2m1_encode(c.x);
    if (got != c.code && ++failures <= 20)
      std::fprintf(stderr, "FAIL e2m1_encode(%g) gives 0x%x, expected 0x%x\n", static_cast<double>(c.x), got, c.code);
  }
}

}  // namespace

int main() {
  check_known_values();
  const char *env = std::getenv("MXFP8_NUMERICS_EXHAUSTIVE");
  if (env && env[0] == '1') {
    check_range(0, 0xFFFFFFFFu, 1);
  } else {
    for (uint64_t low : {0x00, 0x01, 0x02, 0x7F, 0x80, 0x81, 0xFE, 0xFF}) check_range(low, 0xFFFFFF00u | low, 256);
  }
  std::printf("e2m1_encode: %llu float patterns, %d differences from the reference\n",
              static_cast<unsigned long long>(checked), failures);
  return failures == 0 ? 0 : 1;
}
