// Overflow-checked arithmetic on the dimensions that come from callers, block and tile counts, and
// how shapes are written in messages.
#pragma once

#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "core/swizzle_index.hpp"

namespace mxfp8 {

inline int64_t checked_mul(int64_t a, int64_t b, const char *what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail(MXFP8_ERROR_INVALID_ARGUMENT, what, " overflows int64");
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, const char *what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail(MXFP8_ERROR_INVALID_ARGUMENT, what, " overflows int64");
  return r;
}

// For non-negative n and positive d.
MXFP8_HOST_DEVICE constexpr int64_t ceil_div(int64_t n, int64_t d) { return n / d + (n % d != 0); }
MXFP8_HOST_DEVICE constexpr int64_t round_up(int64_t n, int64_t d) { return ceil_div(n, d) * d; }
// round_up of a caller's size: fails instead of wrapping (roundup(INT64_MAX, 128) does not fit).
inline int64_t checked_round_up(int64_t n, int64_t d, const char *what) { return checked_mul(ceil_div(n, d), d, what); }

// The product of the n non-negative dimensions at `dims` into *out; false when it overflows int64. A zero
// anywhere makes 0, whatever the others multiply to: (2^40, 2^40, 0, 64) has no rows, as (0, 2^40, 2^40, 64)
// has none (folded left to right, the first overflowed before the zero came). The caller words the failure.
inline bool product_fits(const int64_t *dims, size_t n, int64_t *out) {
  *out = 0;
  for (size_t i = 0; i < n; ++i)
    if (dims[i] == 0) return true;
  int64_t p = 1;
  for (size_t i = 0; i < n; ++i)
    if (__builtin_mul_overflow(p, dims[i], &p)) return false;
  *out = p;
  return true;
}

inline int64_t product(const std::vector<int64_t> &dims, size_t begin, size_t end, const char *what) {
  int64_t p = 0;
  if (!product_fits(dims.data() + begin, end - begin, &p)) fail(MXFP8_ERROR_INVALID_ARGUMENT, what, " overflows int64");
  return p;
}

// The most dimensions any DLTensor may have here (PyTorch's limit too); more is an error, and messages
// never read more than this many entries of a caller's shape.
constexpr int32_t kMaxDims = 64;

// "(3, 5, 48)"; "(NULL)" for a NULL array, and only the first kMaxDims entries of a longer one.
std::string format_shape(const int64_t *dims, int64_t ndim);
inline std::string format_shape(const std::vector<int64_t> &dims) {
  return format_shape(dims.data(), static_cast<int64_t>(dims.size()));
}

}  // namespace mxfp8
