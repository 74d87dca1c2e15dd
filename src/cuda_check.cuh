// The one mapping from a CUDA runtime error to a status, for every file that calls CUDA: an allocation
// failure is MXFP8_ERROR_OUT_OF_MEMORY (the header promises it for device memory), anything else
// MXFP8_ERROR_CUDA with CUDA's name and text.
#pragma once

#include <cuda_runtime.h>

#include "error.hpp"

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

}  // namespace mxfp8::cuda
