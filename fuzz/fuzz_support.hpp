// What the fuzz harnesses share: reading choices from the fuzzer's bytes, and the swizzled layout written
// from its permute form (independently of the library).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fuzz {

struct Reader {
  const uint8_t *p;
  size_t n;
  uint8_t byte() {
    if (!n) return 0;
    --n;
    return *p++;
  }
  int64_t below(int64_t bound) { return (static_cast<int64_t>(byte()) << 8 | byte()) % bound; }
};

inline int64_t round_up(int64_t v, int64_t d) { return (v + d - 1) / d * d; }

// swizzled = padded.reshape(Rp/128, 4, 32, Cp/4, 4).permute(0, 3, 2, 1, 4): where (r, c) lands.
inline size_t ref_swizzled_index(int64_t r, int64_t c, int64_t padded_cols) {
  const int64_t a = r / 128, b = (r % 128) / 32, cc = r % 32, d = c / 4, e = c % 4;
  return static_cast<size_t>((((a * (padded_cols / 4) + d) * 32 + cc) * 4 + b) * 4 + e);
}

}  // namespace fuzz
