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

// How many blocks of `Kernel` at `threads` threads fit on the current device at once (occupancy x SMs),
// for persistent grids. Looked up once per device and kernel.
template <auto Kernel>
int resident_blocks(int threads) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices] = {};
  const int device = current_device();
  const bool cacheable = device >= 0 && device < kMaxDevices;
  if (cacheable) {
    const int known = cached[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, 0),
        "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
  const int blocks = std::max(1, sm_count(device) * per_sm);
  if (cacheable) cached[device].store(blocks, std::memory_order_relaxed);
  return blocks;
}

}  // namespace mxfp8::cuda
