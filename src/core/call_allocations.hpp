// The tensors a caller's allocator has handed to the C call running on this thread, and the managed
// tensors the call's input handles hold. An allocator that returns the same DLManagedTensorVersioned for
// two outputs of one call, or one the library already holds for an input, would make the library own it
// twice and call its deleter while it is still in use (or twice): the library asks here before it takes
// ownership, and refuses those without deleting them. Every C entry point opens a scope (guarded() makes
// one); a call made from inside an allocator gets its own and restores the outer.
#pragma once

#include <vector>

namespace mxfp8 {

class CallAllocations {
 public:
  CallAllocations() noexcept;  // opens this thread's scope
  ~CallAllocations();          // closes it, restoring the enclosing one
  CallAllocations(const CallAllocations &) = delete;
  CallAllocations &operator=(const CallAllocations &) = delete;

  // What take() found: a tensor new to the call (now recorded as owned by it), one the allocator already
  // handed to this call, or one an input handle of the call holds.
  enum class Taken { kNew, kRepeated, kHeldByInput };
  // Outside any scope (never, through the C API) it records nothing and returns kNew. May throw
  // std::bad_alloc (recording), having recorded nothing.
  static Taken take(const void *tensor);
  // The running call reads a handle holding `tensor` (NULL is ignored). At most kMaxHeld a call (an NVFP4
  // tensor's two directions hold 6); no allocation, so the views-only exports stay allocation-free.
  static void hold(const void *tensor) noexcept;
  static constexpr int kMaxHeld = 8;
  // `tensor`'s deleter is about to run: the allocator may hand the same address out again.
  static void forget(const void *tensor) noexcept;

 private:
  std::vector<const void *> owned_;  // a handful a call: no allocation until the first
  const void *held_[kMaxHeld] = {};  // the input handles' managed tensors
  int held_count_ = 0;
  CallAllocations *outer_;
};

}  // namespace mxfp8
