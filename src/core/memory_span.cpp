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

void check_no_overlap(const std::vector<Span> &spans) {
  // Messages name the span that starts later (at the same address: the one listed later) first.
  const auto later = [&](uint32_t a, uint32_t b) {
    return spans[a].begin != spans[b].begin ? spans[a].begin > spans[b].begin : a > b;
  };
  const auto report = [&](uint32_t a, uint32_t b) {
    if (later(b, a)) std::swap(a, b);
    const Span &s = spans[a], &hit = spans[b];
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name_of(s), " and ", name_of(hit), " overlap in memory (",
         s.written && hit.written ? "two outputs" : "an output and an input", " of one call must not share bytes)");
  };
  // Written spans in address order: each must start at or after the furthest end before it. Only they
  // are sorted (a batched call over a model has a few read spans for each written one).
  // The count and the first span held in locals: writes.push_back could alias spans' own fields for all the
  // compiler knows, which reloaded and re-divided spans.size() on every span (a batched call has ~3 a tensor).
  const size_t count = spans.size();
  const Span *const all = spans.data();
  std::vector<uint32_t> writes;
  writes.reserve(count);
  for (size_t i = 0; i < count; ++i)
    if (all[i].written && all[i].bytes > 0) writes.push_back(static_cast<uint32_t>(i));
  const auto before = [&](uint32_t a, uint32_t b) { return later(b, a); };
  if (!std::is_sorted(writes.begin(), writes.end(), before))  // destinations laid out in order: no sort
    std::sort(writes.begin(), writes.end(), before);
  for (size_t k = 1, furthest = 0; k < writes.size(); ++k) {
    if (spans[writes[k]].begin < end_of(&spans[writes[furthest]])) report(writes[k], writes[furthest]);
    furthest = k;  // disjoint so far, so this one ends furthest
  }
  // The written spans are now disjoint and sorted, so their ends are sorted too: the only one a read span
  // can meet first is the first that ends after the read span begins. Read spans outside the written
  // range as a whole (the usual case: sources and destinations in different allocations) skip the search.
  if (writes.empty()) return;
  const uintptr_t written_begin = spans[writes.front()].begin, written_end = end_of(&spans[writes.back()]);
  for (size_t i = 0; i < count; ++i) {
    const Span &r = all[i];
    if (r.written || r.bytes == 0 || end_of(&r) <= written_begin || r.begin >= written_end) continue;
    const auto w = std::partition_point(writes.begin(), writes.end(),
                                        [&](uint32_t k) { return end_of(&spans[k]) <= r.begin; });
    if (w != writes.end() && spans[*w].begin < end_of(&r)) report(static_cast<uint32_t>(i), *w);
  }
}

}  // namespace mxfp8
