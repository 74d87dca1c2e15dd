// The CUDA runtime as the rest of the library sees it: whether CUDA is compiled in, the device scope,
// device memory, and the one branch between host loops and CUDA work. Implemented by cuda_runtime.cu,
// stubbed in one place (cuda_unavailable.cpp) for builds without a CUDA compiler.
#pragma once

#include <cstdint>

#include <dlpack/dlpack.h>

#include "core/dltensor_checks.hpp"

namespace mxfp8 {
namespace cuda {

// False when the library was built without a CUDA compiler: every CUDA operation then fails with
// MXFP8_ERROR_UNSUPPORTED.
bool compiled_in();
// Fails as every CUDA operation of such a build does (MXFP8_ERROR_UNSUPPORTED, the same message), for a
// preparation that must refuse now what its runs could never do.
void require_compiled_in();

// Makes `device` current for its lifetime, then restores the caller's current device. Does nothing
// when the device is already current. A device the process does not have is invalid input.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope &) = delete;
  DeviceScope &operator=(const DeviceScope &) = delete;

 private:
  int previous_ = -1;
};

// Stream-ordered device memory from the library's pool on the current device (MXFP8_ERROR_OUT_OF_MEMORY
// when it cannot be had), and its release on the same stream.
void *allocate(int64_t bytes, void *stream);
void free_async(void *ptr, void *stream) noexcept;

}  // namespace cuda

// Runs `host()` when `device`'s memory is host memory, else `on_cuda()` with `device` current (`name`
// names the buffer when the device type is not supported).
template <class Host, class OnCuda>
decltype(auto) where_memory_lives(DLDevice device, const char *name, Host &&host, OnCuda &&on_cuda) {
  if (memory_of(device, name) == Memory::Host) return host();
  cuda::DeviceScope scope(device.device_id);
  return on_cuda();
}

}  // namespace mxfp8
