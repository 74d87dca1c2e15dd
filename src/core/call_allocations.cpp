#include "core/call_allocations.hpp"

#include <algorithm>

namespace mxfp8 {
namespace {
thread_local CallAllocations *current = nullptr;
}

CallAllocations::CallAllocations() noexcept : outer_(current) { current = this; }

CallAllocations::~CallAllocations() { current = outer_; }

CallAllocations::Taken CallAllocations::take(const void *tensor) {
  if (!current) return Taken::kNew;
  const void *const *held = current->held_;
  if (std::find(held, held + current->held_count_, tensor) != held + current->held_count_) return Taken::kHeldByInput;
  std::vector<const void *> &owned = current->owned_;
  if (std::find(owned.begin(), owned.end(), tensor) != owned.end()) return Taken::kRepeated;
  owned.push_back(tensor);
  return Taken::kNew;
}

void CallAllocations::hold(const void *tensor) noexcept {
  if (current && tensor && current->held_count_ < kMaxHeld) current->held_[current->held_count_++] = tensor;
}

void CallAllocations::forget(const void *tensor) noexcept {
  if (!current) return;
  std::vector<const void *> &owned = current->owned_;
  owned.erase(std::remove(owned.begin(), owned.end(), tensor), owned.end());
}

}  // namespace mxfp8
