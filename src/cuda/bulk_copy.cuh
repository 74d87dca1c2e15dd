// Large copies (the values of a bucket or an import, whole or a window of their rows) through a
// bulk-asynchronous pipeline on Hopper and later: one launch for many spans, where cudaMemcpyAsync costs
// a host call each.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mxfp8::cuda {

// `rows` runs of `row_bytes` bytes to copy, read `src_stride` bytes apart and written back to back (a
// contiguous run is one row): the flat values of a tensor, or a window of its rows (a K shard's columns)
// into a bucket or the shard's own buffer.
struct CopySpan {
  const uint8_t *src;
  uint8_t *dst;
  int64_t row_bytes;
  int64_t rows = 1;
  int64_t src_stride = 0;

  int64_t bytes() const { return rows * row_bytes; }
};

// Whether bulk_copy runs on the current device: the device is sm_90 or later, the library carries code
// for it, and MXFP8_BULK_COPY is not "0" (read once; "0" sends large copies to cudaMemcpyAsync, one
// call each, as before the pipeline existed).
bool bulk_copy_available();

// What bulk_copy takes: src, dst, row_bytes and (with more than one row) src_stride all multiples of 16
// (the bulk copy's unit), source rows that do not overlap.
inline bool bulk_copy_fits(const CopySpan &s) {
  const uint64_t stride = s.rows > 1 ? static_cast<uint64_t>(s.src_stride) : 0;
  const bool apart = s.rows <= 1 || s.src_stride >= s.row_bytes;
  return apart && s.row_bytes >= 0 && s.rows >= 0 &&
         ((reinterpret_cast<uintptr_t>(s.src) | reinterpret_cast<uintptr_t>(s.dst) |
           static_cast<uint64_t>(s.row_bytes) | stride) & 15) == 0;
}

// Queues every span on `stream` (spans that fit, on a device where bulk_copy_available()).
void bulk_copy(const CopySpan *spans, size_t count, cudaStream_t stream);

}  // namespace mxfp8::cuda
