// The host loop of the NVFP4 quantize calls: the amax first (per tensor: the largest magnitude over every
// shard, rows split over threads and their maxima combined; per row: each line's own), then each line's
// blocks of 16, one at a time, with nvfp4_numerics.hpp's rule. A line is a row of the input, or a
// column for columnwise quantization (gathered K elements apart). Scalar code: the rule's divisions and
// 4over6's two candidates do not map onto the lane forms the MXFP8 loop uses, and the GPU is where
// weights of interesting size are quantized. Rows are split across threads (host_threads.hpp); the
// bytes written never depend on the split.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/nvfp4_numerics.hpp"
#include "core/nvfp4_quantize.hpp"
#include "core/shape.hpp"
#include "host/host_threads.hpp"

namespace mxfp8 {
namespace {

int64_t element_bytes(InputType t) { return t == InputType::Float32 ? 4 : 2; }

float element(const void *input, InputType type, int64_t i) {
  switch (type) {
    case InputType::BFloat16: return bf16_to_float(static_cast<const uint16_t *>(input)[i]);
    case InputType::Float16: return fp16_to_float(static_cast<const uint16_t *>(input)[i]);
    default: return static_cast<const float *>(input)[i];
  }
}

// Row r of the input as floats (exact widening).
void load_row(const void *input, InputType type, int64_t r, int64_t K, float *out) {
  if (type == InputType::Float32) {
    std::memcpy(out, static_cast<const float *>(input) + r * K, static_cast<size_t>(K) * sizeof(float));
    return;
  }
  const uint16_t *p = static_cast<const uint16_t *>(input) + r * K;
  if (type == InputType::BFloat16)
    for (int64_t k = 0; k < K; ++k) out[k] = bf16_to_float(p[k]);
  else
    for (int64_t k = 0; k < K; ++k) out[k] = fp16_to_float(p[k]);
}

// Line i of a shard: row i, or column i (its M elements, K apart).
void load_line(const void *input, InputType type, bool columnwise, int64_t M, int64_t K, int64_t i, float *out) {
  if (!columnwise) return load_row(input, type, i, K, out);
  for (int64_t r = 0; r < M; ++r) out[r] = element(input, type, r * K + i);
}

float row_amax(const float *x, int64_t K) {
  float m = 0.0f;
  for (int64_t k = 0; k < K; ++k) m = max_magnitude(m, x[k]);
  return m;
}

// Quantizes line r (K values here: the line's length) into the shard's outputs.
void quantize_line(const float *x, int64_t K, int64_t r, const Nvfp4RowScale &row, int32_t selection,
                   const Nvfp4Shard &shard) {
  uint8_t *values = shard.values + r * ceil_div(K, int64_t{2});
  uint8_t codes[kNvfp4BlockSize];
  for (int64_t b = 0, k0 = 0; k0 < K; ++b, k0 += kNvfp4BlockSize) {
    const int n = static_cast<int>(std::min<int64_t>(kNvfp4BlockSize, K - k0));
    shard.scales.data[scale_offset(shard.scales, r, b)] = nvfp4_quantize_block(x + k0, n, row, selection, codes);
    for (int i = 0; i < n; i += 2) {
      const uint8_t high = i + 1 < n ? codes[i + 1] : 0;
      values[(k0 + i) / 2] = static_cast<uint8_t>(codes[i] | (high << 4));
    }
  }
}

// The largest magnitude over every shard. Each thread's share is combined by an atomic maximum of the
// float bits, which order like the values for the non-negative floats a magnitude is.
float tensor_amax(const Nvfp4QuantizeJob &j, int32_t shard_index) {
  const Nvfp4Shard &s = j.shards[shard_index];
  std::atomic<uint32_t> result{0};
  parallel_for(s.rows, s.rows * j.cols * element_bytes(j.input_type), [&](int64_t begin, int64_t end) {
    std::vector<float> x(static_cast<size_t>(j.cols));
    float m = 0.0f;
    for (int64_t r = begin; r < end; ++r) {
      load_row(s.input, j.input_type, r, j.cols, x.data());
      m = std::max(m, row_amax(x.data(), j.cols));
    }
    uint32_t seen = result.load();
    while (float_bits(m) > seen && !result.compare_exchange_weak(seen, float_bits(m))) {
    }
  });
  return bits_float(result.load());
}

}  // namespace

void nvfp4_quantize_host(const Nvfp4QuantizeJob &j) {
  const int64_t K = j.cols;
  for (int32_t i = 0; i < j.count; ++i) {
    const ScaleOut &s = j.shards[i].scales;
    if (s.data && s.padded) std::memset(s.data, 0, static_cast<size_t>(s.bytes));
  }
  if (!j.per_row_amax && !j.amax_given) {
    float amax = 0.0f;
    for (int32_t i = 0; i < j.count; ++i)
      if (j.shards[i].rows > 0 && K > 0) amax = std::max(amax, tensor_amax(j, i));
    *j.amax = amax;
  }
  const float e4m3_max = j.e4m3_max;
  // Per-row amaxes may be an empty buffer (no lines); per tensor there is always the one float.
  const Nvfp4RowScale tensor_scale = j.per_row_amax ? Nvfp4RowScale{} : nvfp4_row_scale(*j.amax, e4m3_max);
  for (int32_t i = 0; i < j.count; ++i) {
    const Nvfp4Shard &shard = j.shards[i];
    const int64_t M = shard.rows;
    const int64_t lines = j.columnwise ? K : M, length = j.columnwise ? M : K;
    if (lines == 0) continue;
    if (length == 0) {  // lines of no values: their amaxes are 0, there is nothing else to write
      if (j.per_row_amax && !j.amax_given) std::fill(j.amax, j.amax + lines, 0.0f);
      continue;
    }
    const int64_t bytes = lines * (length * element_bytes(j.input_type) + ceil_div(length, int64_t{2}) +
                                   ceil_div(length, int64_t{kNvfp4BlockSize}));
    parallel_for(lines, bytes, [&](int64_t begin, int64_t end) {
      std::vector<float> x(static_cast<size_t>(length));
      for (int64_t r = begin; r < end; ++r) {
        load_line(shard.input, j.input_type, j.columnwise, M, K, r, x.data());
        Nvfp4RowScale row = tensor_scale;
        if (j.per_row_amax) {
          if (!j.amax_given) j.amax[r] = row_amax(x.data(), length);
          row = nvfp4_row_scale(j.amax[r], e4m3_max);
        }
        quantize_line(x.data(), length, r, row, j.selection, shard);
      }
    });
  }
}

}  // namespace mxfp8
