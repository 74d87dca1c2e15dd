// The host loop of mxfp8_quantize. Per block: the amax (every NaN skipped, as the GPU's max.f32 skips it),
// the E8M0 exponent, then every element multiplied by the block's reciprocal and encoded; see
// mx_numerics.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "mx_numerics.hpp"
#include "quantize.hpp"
#include "shape.hpp"

namespace mxfp8 {
namespace {

float load(const void *input, InputType type, int64_t i) {
  switch (type) {
    case InputType::BFloat16: return bf16_to_float(static_cast<const uint16_t *>(input)[i]);
    case InputType::Float16: return fp16_to_float(static_cast<const uint16_t *>(input)[i]);
    case InputType::Float32: break;
  }
  return static_cast<const float *>(input)[i];
}

// max(amax, |x|) skipping NaN. Not std::fmax: glibc's returns NaN for a signaling NaN, which would make
// the host disagree with the GPU (and with Transformer Engine) on such inputs.
float amax_with(float amax, float x) {
  const float magnitude = std::fabs(x);
  return magnitude > amax ? magnitude : amax;
}

struct BlockScaler {
  bool e5m2;
  bool floor_rounding;
  uint8_t exponent(float amax) const { return floor_rounding ? e8m0_floor(amax, e5m2) : e8m0_rceil(amax, e5m2); }
  float reciprocal(uint8_t e) const { return floor_rounding ? exact_reciprocal(e) : rceil_reciprocal(e); }
};

void zero_padding(const ScaleOut &s) {
  if (s.data && s.padded) std::memset(s.data, 0, static_cast<size_t>(s.bytes));
}

}  // namespace

void quantize_host(const QuantizeJob &j) {
  const int64_t M = j.rows, K = j.cols;
  const int64_t row_blocks = ceil_div(M, kBlockSize), col_blocks = ceil_div(K, kBlockSize);
  const BlockScaler scaler{j.e5m2 != 0, j.floor_rounding != 0};
  auto x = [&](int64_t r, int64_t c) { return load(j.input, j.input_type, r * K + c); };
  zero_padding(j.row_scales);
  zero_padding(j.col_scales);
  if (j.block_32x32) {
    // One amax per 32x32 block, shared by both directions.
    std::vector<float> amax(static_cast<size_t>(row_blocks * col_blocks), 0.0f);
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c) {
        float &a = amax[static_cast<size_t>((r / kBlockSize) * col_blocks + c / kBlockSize)];
        a = amax_with(a, x(r, c));
      }
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c) {
        const uint8_t e = scaler.exponent(amax[static_cast<size_t>((r / kBlockSize) * col_blocks + c / kBlockSize)]);
        const uint8_t q = fp8_encode(x(r, c) * scaler.reciprocal(e), j.e5m2);
        if (j.row_values) {
          j.row_values[r * K + c] = q;
          j.row_scales.data[scale_offset(j.row_scales, r, c / kBlockSize)] = e;
        }
        if (j.col_values) {
          j.col_values[r * K + c] = q;
          j.col_scales.data[scale_offset(j.col_scales, r / kBlockSize, c)] = e;
        }
      }
    return;
  }
  if (j.row_values) {
    for (int64_t r = 0; r < M; ++r)
      for (int64_t b = 0; b < col_blocks; ++b) {
        const int64_t c0 = b * kBlockSize, c1 = std::min(c0 + kBlockSize, K);
        float amax = 0.0f;
        for (int64_t c = c0; c < c1; ++c) amax = amax_with(amax, x(r, c));
        const uint8_t e = scaler.exponent(amax);
        const float reciprocal = scaler.reciprocal(e);
        j.row_scales.data[scale_offset(j.row_scales, r, b)] = e;
        for (int64_t c = c0; c < c1; ++c) j.row_values[r * K + c] = fp8_encode(x(r, c) * reciprocal, j.e5m2);
      }
  }
  if (j.col_values) {
    // One 32-row block at a time, row by row, so the input is read in storage order.
    std::vector<float> amax(static_cast<size_t>(K)), reciprocal(static_cast<size_t>(K));
    for (int64_t rb = 0; rb < row_blocks; ++rb) {
      const int64_t r0 = rb * kBlockSize, r1 = std::min(r0 + kBlockSize, M);
      std::fill(amax.begin(), amax.end(), 0.0f);
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < K; ++c) amax[c] = amax_with(amax[c], x(r, c));
      for (int64_t c = 0; c < K; ++c) {
        const uint8_t e = scaler.exponent(amax[c]);
        j.col_scales.data[scale_offset(j.col_scales, rb, c)] = e;
        reciprocal[c] = scaler.reciprocal(e);
      }
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = 0; c < K; ++c) j.col_values[r * K + c] = fp8_encode(x(r, c) * reciprocal[c], j.e5m2);
    }
  }
}

}  // namespace mxfp8
