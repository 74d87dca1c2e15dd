// The tensors a caller's allocator has handed to the C call running on this thread. An allocator that
// returns the same DLManagedTensorVersioned for two outputs of one call would make the library own it
// twice, and call its deleter twice when the call fails afterwards (a double free in the caller's code):
// the library asks here before it takes ownership, and refuses the second. Every C entry point opens a
// scope (guarded() makes one); a call made from inside an allocator gets its own and restores the outer.
#pragma once

#include <vector>

namespace mxfp8 {

class CallAllocations {
 public:
  CallAllocations() noexcept;  // opens this thread's scope
  ~CallAllocations();          // closes it, restoring the enclosing one
  CallAllocations(const CallAllocations &) = delete;
  CallAllocations &operator=(const CallAllocations &) = delete;

  // Records `tensor` as owned by the running call; false when it already is (handed out twice).
  // Outside any scope (never, through the C API) it records nothing and returns true.
  static bool take(const void *tensor);
  // `tensor`'s deleter is about to run: the allocator may hand the same address out again.
  static void forget(const void *tensor) noexcept;

 private:
  std::vector<const void *> owned_;  // a handful a call: no allocation until the first
  CallAllocations *outer_;
};

}  // namespace mxfp8
