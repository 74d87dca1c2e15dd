// One quantization, as the host loop and the CUDA kernels both see it: the input read as M x K, and
// for each wanted direction where its values go and where each of its scales goes.
#pragma once

#include <cstdint>

#include "core/mx_numerics.hpp"
#include "core/swizzle_index.hpp"

namespace mxfp8 {

enum class InputType : int32_t { BFloat16, Float16, Float32 };

// Where the scales of one direction are written. Scale (i, j) of the stored matrix (rowwise: row r,
// block b; columnwise: row block rb, column c) lands at scale_offset(). `row_shift`/`col_shift` are 5 (a
// division by 32, as a shift: kernels call this per scale) for the one-per-32x32-block compact outputs,
// whose matrix is (ceil(M/32), ceil(K/32)), else 0.
struct ScaleOut {
  uint8_t *data;
  int64_t bytes;       // the whole buffer, padding included
  int64_t ld;          // row-major: row length; swizzled: the padded column count of the swizzled matrix
  int32_t swizzled;    // GEMM layout
  int32_t transposed;  // columnwise GEMM layout: the matrix swizzled is S^T
  int32_t row_shift;
  int32_t col_shift;
  int32_t padded;      // the buffer holds padding: it is zeroed before the scales are written
};

MXFP8_HOST_DEVICE inline int64_t scale_offset(const ScaleOut &s, int64_t i, int64_t j) {
  i >>= s.row_shift;
  j >>= s.col_shift;
  if (!s.swizzled) return i * s.ld + j;
  return s.transposed ? swizzled_offset(j, i, s.ld) : swizzled_offset(i, j, s.ld);
}

struct QuantizeJob {
  const void *input;
  InputType input_type;
  int32_t e5m2;
  ScaleRounding rounding;
  int32_t block_32x32;
  int64_t rows;  // M
  int64_t cols;  // K
  uint8_t *row_values;  // NULL: no rowwise output
  uint8_t *col_values;  // NULL: no columnwise output
  ScaleOut row_scales;
  ScaleOut col_scales;
};

// Done when it returns. Padded scale buffers are zeroed first.
void quantize_host(const QuantizeJob &job);

// What mxfp8_dequantize computes: out[r, k] = fp8(values[r, k]) * 2^(scales[r', k'] - 127), the scales
// row-major (rowwise: r' = r, k' = k / 32; columnwise: r' = r / 32, k' = k), rows scale_row_stride apart
// (padded buffers are read in place).
struct DequantizeJob {
  const uint8_t *values;
  const uint8_t *scales;
  int64_t rows;
  int64_t cols;
  int64_t scale_row_stride;
  int32_t e5m2;
  int32_t columnwise;
  int32_t bf16_output;
  void *output;
};
void dequantize_host(const DequantizeJob &job);

namespace cuda {
// Queued on `stream`.
void quantize(const QuantizeJob &job, void *stream);
void dequantize(const DequantizeJob &job, void *stream);
}  // namespace cuda

}  // namespace mxfp8
