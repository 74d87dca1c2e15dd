// The buffers a call returns as copies: from the caller's allocator, or the library's own memory.
#pragma once

#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/dlpack_tensor.hpp"

namespace mxfp8 {

// A new contiguous tensor on `device`, flagged DLPACK_FLAG_BITMASK_IS_COPIED, from the caller's
// allocator when there is one (everything it returns is checked; a bad result is deleted and reported),
// else from malloc (host memory: labelled kDLCPU, also for kDLCUDAHost sources, since malloc memory is
// not pinned) or the library's stream-ordered device pool. Write through byte_pointer(): an allocator
// may return a byte_offset. Zero-element tensors get a NULL data pointer and no allocation.
ManagedPtr allocate_copy(DLDevice device, DLDataType dtype, const std::vector<int64_t> &shape,
                         const Allocation &allocation);

}  // namespace mxfp8
