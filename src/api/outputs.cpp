#include "api/outputs.hpp"

#include <cstdlib>

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "cuda/cuda_runtime.hpp"

namespace mxfp8 {
namespace {

void free_host(void *memory, void *) noexcept { std::free(memory); }
void free_device(void *memory, void *stream) noexcept { cuda::free_async(memory, stream); }

}  // namespace

ManagedPtr allocate_copy(DLDevice device, DLDataType dtype, const std::vector<int64_t> &shape,
                         const Allocation &allocation) {
  const int64_t bytes = bytes_of(product(shape, 0, shape.size(), "the copy's size"), dtype, "the copy's size");
  if (allocation.allocator && bytes > 0) return from_caller_allocator(device, dtype, shape, allocation.allocator);
  const bool host = memory_of(device, "copy") == Memory::Host;
  // malloc memory is plain host memory: a copy of a kDLCUDAHost (pinned) source is not pinned, and says so.
  ManagedPtr out = new_copy(host ? DLDevice{kDLCPU, 0} : device, dtype, shape);
  if (bytes > 0)
    where_memory_lives(
        device, "copy",
        [&] {
          void *memory = std::malloc(static_cast<size_t>(bytes));
          if (!memory) fail(MXFP8_ERROR_OUT_OF_MEMORY, "cannot allocate ", bytes, " bytes of host memory");
          attach_buffer(*out, BufferRelease{free_host, memory, nullptr});
        },
        [&] { attach_buffer(*out, BufferRelease{free_device, cuda::allocate(bytes, allocation.stream), allocation.stream}); });
  return out;
}

}  // namespace mxfp8
