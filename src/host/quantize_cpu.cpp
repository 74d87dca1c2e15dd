// The host loop of mxfp8_quantize. Per block: the amax (every NaN skipped, as the GPU's max.f32 skips it),
// the E8M0 exponent, then every element multiplied by the block's reciprocal and encoded; see
// mx_numerics.hpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/mx_numerics.hpp"
#include "core/quantize.hpp"
#include "core/shape.hpp"

namespace mxfp8 {
namespace {

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

// The whole loop for one input type; `x(r, c)` reads element (r, c) as float.
template <class Read>
void quantize_elements(const QuantizeJob &j, Read x) {
  const int64_t M = j.rows, K = j.cols;
  const int64_t row_blocks = ceil_div(M, kBlockSize), col_blocks = ceil_div(K, kBlockSize);
  const BlockScaler scaler{j.e5m2 != 0, j.floor_rounding != 0};
  zero_padding(j.row_scales);
  zero_padding(j.col_scales);
  if (j.block_32x32) {
    // One amax per 32x32 block, shared by both directions; then each block's exponent and reciprocal once.
    const size_t blocks = static_cast<size_t>(row_blocks * col_blocks);
    std::vector<float> amax(blocks, 0.0f), reciprocal(blocks);
    std::vector<uint8_t> exponent(blocks);
    auto block_of = [&](int64_t r, int64_t c) { return static_cast<size_t>((r / kBlockSize) * col_blocks + c / kBlockSize); };
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < K; ++c) amax[block_of(r, c)] = amax_with(amax[block_of(r, c)], x(r, c));
    for (size_t b = 0; b < blocks; ++b) {
      exponent[b] = scaler.exponent(amax[b]);
      reciprocal[b] = scaler.reciprocal(exponent[b]);
    }
    for (int64_t r = 0; r < M; ++r) {
      for (int64_t c = 0; c < K; ++c) {
        const uint8_t q = fp8_encode(x(r, c) * reciprocal[block_of(r, c)], j.e5m2);
        if (j.row_values) j.row_values[r * K + c] = q;
        if (j.col_values) j.col_values[r * K + c] = q;
      }
      for (int64_t b = 0; b < col_blocks && j.row_values; ++b)  // the block's scale on each of its rows
        j.row_scales.data[scale_offset(j.row_scales, r, b)] = exponent[block_of(r, b * kBlockSize)];
    }
    for (int64_t rb = 0; rb < row_blocks && j.col_values; ++rb)  // and on each of its columns
      for (int64_t c = 0; c < K; ++c) j.col_scales.data[scale_offset(j.col_scales, rb, c)] = exponent[block_of(rb * kBlockSize, c)];
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

}  // namespace

void quantize_host(const QuantizeJob &j) {
  const int64_t K = j.cols;
  switch (j.input_type) {
    case InputType::BFloat16: {
      const auto *in = static_cast<const uint16_t *>(j.input);
      return quantize_elements(j, [=](int64_t r, int64_t c) { return bf16_to_float(in[r * K + c]); });
    }
    case InputType::Float16: {
      const auto *in = static_cast<const uint16_t *>(j.input);
      return quantize_elements(j, [=](int64_t r, int64_t c) { return fp16_to_float(in[r * K + c]); });
    }
    case InputType::Float32: {
      const auto *in = static_cast<const float *>(j.input);
      return quantize_elements(j, [=](int64_t r, int64_t c) { return in[r * K + c]; });
    }
  }
}

}  // namespace mxfp8
