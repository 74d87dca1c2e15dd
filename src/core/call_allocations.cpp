#include "core/call_allocations.hpp"

#include <algorithm>

namespace mxfp8 {
namespace {
thread_local CallAllocations *current = nullptr;
}

CallAllocations::CallAllocations() noexcept : outer_(current) { current = this; }

CallAllocations::~CallAllocations() { current = outer_; }

bool CallAllocations::take(const void *tensor) {
  if (!current) return true;
  std::vector<const void *> &owned = current->owned_;
  if (std::find(owned.begin(), owned.end(), tensor) != owned.end()) return false;
  owned.push_back(tensor);
  return true;
}

void CallAllocations::forget(const void *tensor) noexcept {
  if (!current) return;
  std::vector<const void *> &owned = current->owned_;
  owned.erase(std::remove(owned.begin(), owned.end(), tensor), owned.end());
}

}  // namespace mxfp8
