// "kind[index]suffix" (e.g. "destinations[17].scales") written into a fixed buffer, for the argument
// names the per-tensor checks of a batched call pass down. The batched calls name every tensor's
// arguments before checking them, once per tensor of a whole model: snprintf took ~800 instructions a
// name there, a third of the checks' cost for a 256-expert layer (callgrind, 2026-12-03).
#pragma once

#include <cstddef>
#include <cstring>
#include <ostream>

namespace mxfp8 {

class IndexedName {
 public:
  IndexedName(const char *kind, size_t index, const char *suffix = "") {
    size_t n = 0;
    const auto put = [&](const char *s) {
      for (; *s && n + 1 < sizeof text_; ++s) text_[n++] = *s;
    };
    put(kind);
    put("[");
    char digits[24];
    size_t d = 0;
    do digits[d++] = static_cast<char>('0' + index % 10); while ((index /= 10) != 0);
    while (d > 0 && n + 1 < sizeof text_) text_[n++] = digits[--d];
    put("]");
    put(suffix);
    text_[n] = '\0';
  }
  operator const char *() const { return text_; }
  // Streamed as its text (fail()'s messages); without this, ostream would take the pointer conversion.
  friend std::ostream &operator<<(std::ostream &out, const IndexedName &name) { return out << name.text_; }

 private:
  char text_[96];
};

}  // namespace mxfp8
