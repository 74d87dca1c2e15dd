// The bytes a buffer covers, and the one check that no write lands on another buffer of the same call:
// outputs must not overlap inputs (the header forbids it for every call) or each other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/scale_job.hpp"

namespace mxfp8 {

// [begin, begin + bytes) of one buffer, named for messages as `kind`, `kind[index]` or `kind[index] part`
// (no string is built unless a check fails: the batched calls make spans for every tensor of a model).
struct Span {
  uintptr_t begin;
  uint64_t bytes;
  const char *kind;
  size_t index;
  bool written;
  const char *part = nullptr;
};
constexpr size_t kNoIndex = static_cast<size_t>(-1);

// The bytes from the first to the last element of a validated matrix (none when it is empty).
Span span_of(const ByteMatrix &m, const char *kind, size_t index, bool written);
// `bytes` contiguous bytes from `begin`.
Span span_of(const void *begin, int64_t bytes, const char *kind, size_t index, bool written);

// Appends Span{begin, bytes, kind, index, written, part}, written field by field into the vector: a Span
// built apart (a braced temporary, or span_of's result) and then pushed is copied 16 bytes at a time from
// the 8-byte stores that just built it, a store-to-load forward the CPU cannot make (GCC, x86-64: a stall
// of ~10-20 cycles a span; the batched calls add a few spans for every tensor of a model).
inline void add_span(std::vector<Span> &spans, const void *begin, uint64_t bytes, const char *kind, size_t index,
                     bool written, const char *part = nullptr) {
  Span &s = spans.emplace_back();
  s.begin = reinterpret_cast<uintptr_t>(begin);
  s.bytes = bytes;
  s.kind = kind;
  s.index = index;
  s.written = written;
  s.part = part;
}

// Fails with MXFP8_ERROR_INVALID_ARGUMENT naming both buffers when a written span overlaps any other
// span; read spans may overlap each other. O(w log w + r log w) for w written and r read spans.
void check_no_overlap(const std::vector<Span> &spans);

}  // namespace mxfp8
