#include "core/memory_span.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mxfp8 {
namespace {

std::string name_of(const Span &s) {
  std::string name = s.index == kNoIndex ? std::string(s.kind) : cat(s.kind, "[", s.index, "]");
  return s.part ? cat(name, " ", s.part) : name;
}

// Saturates rather than wraps, so a forged pointer near the top of the address space cannot hide a span.
uintptr_t end_of(const Span *s) {
  return s->bytes > UINTPTR_MAX - s->begin ? UINTPTR_MAX : s->begin + static_cast<uintptr_t>(s->bytes);
}

}  // namespace

Span span_of(const ByteMatrix &m, const char *kind, size_t index, bool written) {
  uint64_t bytes = 0;
  if (m.rows > 0 && m.cols > 0)  // validated matrices cannot overflow here (as_byte_matrix checked the extent)
    bytes = static_cast<uint64_t>((m.rows - 1) * m.row_stride + (m.cols - 1) * m.col_stride + 1);
  return Span{reinterpret_cast<uintptr_t>(m.data), bytes, kind, index, written};
}

Span span_of(const void *begin, int64_t bytes, const char *kind, size_t index, bool written) {
  return Span{reinterpret_cast<uintptr_t>(begin), static_cast<uint64_t>(bytes), kind, index, written};
}

void check_no_overlap(std::vector<Span> &spans) {
  spans.erase(std::remove_if(spans.begin(), spans.end(), [](const Span &s) { return s.bytes == 0; }), spans.end());
  std::stable_sort(spans.begin(), spans.end(), [](const Span &a, const Span &b) { return a.begin < b.begin; });
  // Sweeping in address order, a span overlaps an earlier one exactly when it starts before the furthest
  // end seen so far: over all spans for a written one, over the written ones for a read one.
  const Span *furthest = nullptr, *furthest_written = nullptr;
  for (const Span &s : spans) {
    const Span *hit = s.written ? furthest : furthest_written;
    if (hit && s.begin < end_of(hit))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name_of(s), " and ", name_of(*hit), " overlap in memory (",
           s.written && hit->written ? "two outputs" : "an output and an input",
           " of one call must not share bytes)");
    if (!furthest || end_of(&s) > end_of(furthest)) furthest = &s;
    if (s.written && (!furthest_written || end_of(&s) > end_of(furthest_written))) furthest_written = &s;
  }
}

}  // namespace mxfp8
