// The CUDA runtime facts a kernel's host side asks for (src/cuda/cuda_check.cuh), for a kernel run on the
// CPU (cuda_runtime.h here): no errors, and as many resident blocks as the test sets.
#pragma once

#include <cuda_runtime.h>

#include "core/error.hpp"

namespace mxfp8::cuda {
inline void check(cudaError_t, const char *) {}
inline int host_resident_blocks = 1;
template <auto Kernel>
int resident_blocks(int) {
  return host_resident_blocks;
}
}  // namespace mxfp8::cuda
