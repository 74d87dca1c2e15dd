// One NVFP4 quantization (or several sharing one amax), as the host loop and the CUDA kernels both see
// it: the input read as M x K, where its packed values, its scales and its amax go. The numbers are
// nvfp4_numerics.hpp's.
#pragma once

#include <cstdint>

#include "core/quantize.hpp"  // InputType, ScaleOut, scale_offset

namespace mxfp8 {

// Rowwise, line i is row i of the input (K values); columnwise, it is column i (M values, K apart), as
// TE's columnwise data is the transpose quantized rowwise. Line i's packed values start at
// values + i * ceil(length / 2), its block b's scale lands at scale_offset(scales, i, b).
struct Nvfp4Shard {
  const void *input;
  int64_t rows;     // M
  uint8_t *values;  // lines x ceil(length / 2) bytes
  ScaleOut scales;  // (lines, ceil(length / 16)) scales, row_shift/col_shift 0
};

struct Nvfp4QuantizeJob {
  InputType input_type;
  int64_t cols;              // K, the same for every shard
  const Nvfp4Shard *shards;  // host memory, `count` of them
  int32_t count;
  int32_t columnwise;        // lines are the input's columns
  int32_t per_row_amax;      // amax holds one float per line (one shard only)
  int32_t amax_given;        // read amax; else compute it (the max over every shard) and write it first
  int32_t selection;         // Nvfp4Selection
  float e4m3_max;            // 448 or 256
  float *amax;               // 1 float, or one per line for per-row amax; in the input's memory
};

// Done when it returns. Padded scale buffers are zeroed first.
void nvfp4_quantize_host(const Nvfp4QuantizeJob &job);

namespace cuda {
// Queued on `stream`.
void nvfp4_quantize(const Nvfp4QuantizeJob &job, void *stream);
}  // namespace cuda

}  // namespace mxfp8
