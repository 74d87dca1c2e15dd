// What every .cu file shares: the one mapping from a CUDA runtime error to a status (an allocation
// failure is MXFP8_ERROR_OUT_OF_MEMORY, as the header promises for device memory; anything else
// MXFP8_ERROR_CUDA with CUDA's name and text), and the device facts grids are sized by.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "core/error.hpp"

namespace mxfp8::cuda {

inline void check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  // A failed runtime call also leaves its error as the thread's "last error": consume it here, or the
  // next launch's cudaGetLastError() would report this failure again against a call that succeeded.
  // (Sticky errors, which end the context, are not cleared by this and keep showing, as they must.)
  cudaGetLastError();
  if (e == cudaErrorMemoryAllocation) fail(MXFP8_ERROR_OUT_OF_MEMORY, what, ": ", cudaGetErrorString(e));
  fail(MXFP8_ERROR_CUDA, what, ": ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

// The current device, and its streaming multiprocessors (looked up once per device); cuda_runtime.cu.
int current_device();
int sm_count(int device);

// How many blocks of `Kernel` at `threads` threads and `dynamic_smem` bytes of dynamic shared memory fit
// on the current device at once (occupancy x SMs), for persistent grids. Looked up once per device and
// kernel; a kernel that takes more dynamic shared memory than the 48 KiB default is allowed its amount
// and asks for the SM's largest shared-memory carveout first (attributes of the kernel on that device,
// set once with the lookup), so that the count is what runs: with less carveout, fewer of its blocks fit.
template <auto Kernel>
int resident_blocks(int threads, int dynamic_smem = 0) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  const int device = current_device();
  const bool cacheable = device >= 0 && device < kMaxDevices;
  if (cacheable) {
    const int known = cached[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  constexpr int kDefaultDynamicSmem = 48 << 10;
  if (dynamic_smem > kDefaultDynamicSmem) {
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_smem),
          "allowing a kernel its dynamic shared memory");
    check(cudaFuncSetAttribute(Kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared),
          "asking for a kernel's shared-memory carveout");
  }
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, static_cast<size_t>(dynamic_smem)),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int blocks = std::max(1, sm_count(device) * per_sm);
  if (cacheable) cached[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace mxfp8::cuda
