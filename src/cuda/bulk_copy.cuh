// Large contiguous copies (the values of a bucket or an import) through a bulk-asynchronous pipeline
// on Hopper and later: one launch for many spans, where cudaMemcpyAsync costs a host call each.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mxfp8::cuda {

// One contiguous run of bytes to copy.
struct CopySpan {
  const uint8_t *src;
  uint8_t *dst;
  int64_t bytes;
};

// Whether bulk_copy runs on the current device: the device is sm_90 or later, the library carries code
// for it, and MXFP8_BULK_COPY is not "0" (read once; "0" sends large copies to cudaMemcpyAsync, one
// call each, as before the pipeline existed).
bool bulk_copy_available();

// What bulk_copy takes: src, dst and bytes all multiples of 16 (the bulk copy unit).
inline bool bulk_copy_fits(const CopySpan &s) {
  return ((reinterpret_cast<uintptr_t>(s.src) | reinterpret_cast<uintptr_t>(s.dst) |
           static_cast<uintptr_t>(s.bytes)) & 15) == 0;
}

// Queues every span on `stream` (spans that fit, on a device where bulk_copy_available()).
void bulk_copy(const CopySpan *spans, size_t count, cudaStream_t stream);

}  // namespace mxfp8::cuda
