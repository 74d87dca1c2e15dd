// Making and freeing the DLManagedTensorVersioned outputs: views that keep their source tensor alive,
// and contiguous buffers for copies (from the caller's allocator or the library's own).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/call_allocations.hpp"
#include "mxfp8/mxfp8.h"

namespace mxfp8 {

// Owns one managed tensor until released; calls its deleter otherwise (so a failed export frees what
// it had made so far).
struct ManagedDeleter {
  void operator()(DLManagedTensorVersioned *m) const noexcept {
    if (!m) return;
    CallAllocations::forget(m);
    if (m->deleter) m->deleter(m);
  }
};
using ManagedPtr = std::unique_ptr<DLManagedTensorVersioned, ManagedDeleter>;

// Row-major strides of `shape`.
std::vector<int64_t> compact_strides(const std::vector<int64_t> &shape);

// What a view keeps alive: `release(object)` runs once, from the view's deleter. The handles make one
// for themselves (keep_alive in api/tensor.hpp, api/grouped.hpp): core knows no
// handle.
struct KeepAlive {
  void (*release)(const void *object) noexcept;
  const void *object;
};

// A view of `base`'s memory (same data pointer and byte_offset) with another dtype, shape or strides,
// holding `owner` until its deleter runs.
ManagedPtr make_view(KeepAlive owner, const DLTensor &base, DLDataType dtype, std::vector<int64_t> shape,
                     std::vector<int64_t> strides, uint64_t flags);

// Where the buffers a call returns come from: the caller's allocator (DLPack's
// DLPackManagedTensorAllocator signature), or the library's own on `stream`.
using Allocator = int (*)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                          void (*set_error)(void *error_ctx, const char *kind, const char *message));
struct Allocation {
  Allocator allocator;  // NULL: the library allocates
  void *stream;
};

// A new contiguous tensor from the caller's allocator, flagged DLPACK_FLAG_BITMASK_IS_COPIED: everything
// it returns is checked (a bad result is deleted and reported). api/outputs.hpp's allocate_copy decides
// between this and the library's own memory.
ManagedPtr from_caller_allocator(DLDevice device, DLDataType dtype, const std::vector<int64_t> &shape,
                                 Allocator allocator);

// Memory a library-made copy owns, and the function its deleter hands it to (free, or a stream-ordered
// device free on `stream`): the layer that allocates says how, so this one knows no allocator.
struct BufferRelease {
  void (*release)(void *memory, void *stream) noexcept;
  void *memory;
  void *stream;
};

// A new contiguous library tensor on `device` flagged DLPACK_FLAG_BITMASK_IS_COPIED, with no memory yet
// (data NULL, as a zero-element tensor keeps it); attach_buffer gives it its memory, which its deleter
// then releases.
ManagedPtr new_copy(DLDevice device, DLDataType dtype, const std::vector<int64_t> &shape);
void attach_buffer(DLManagedTensorVersioned &copy, BufferRelease buffer) noexcept;

}  // namespace mxfp8
