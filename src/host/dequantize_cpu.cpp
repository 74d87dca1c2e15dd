// The host loop of mxfp8_dequantize: dequantize_element (mx_numerics.hpp) on every element, 32 at a time
// in the branch-free forms of mx_numerics_lanes.hpp so that it vectorizes (host_isa.hpp), rows split
// across threads (host_threads.hpp).
#include <cstring>

#include "host/host_isa.hpp"
#include "host/host_threads.hpp"
#include "host/mx_numerics_lanes.hpp"
#include "core/quantize.hpp"
#include "core/shape.hpp"

namespace mxfp8 {
namespace {

constexpr int kLanes = static_cast<int>(kBlockSize);  // kLanes / N vectors of N lanes

template <bool Bf16Output, int N>
MXFP8_ALWAYS_INLINE void store_lanes(void *output, int64_t index, const typename Lanes<N>::U32 &bits) {
  if (Bf16Output) store_u16_lanes<N>(static_cast<uint16_t *>(output) + index, bf16_lanes<N>(bits).v);
  else store_u32_lanes<N>(static_cast<float *>(output) + index, bits);
}

// 32 consecutive values of a row: one block sharing scales[0] (rowwise), or each with its own scale from
// scales[0..31] (columnwise).
template <bool E5M2, bool Bf16Output, int N>
MXFP8_ALWAYS_INLINE void dequantize_32(const uint8_t *values, const uint8_t *scales, bool columnwise, void *output,
                                       int64_t index) {
  const typename Lanes<N>::U32 shared = e8m0_value_lanes<N>(splat<N>(scales[0]).v).v;
  _Pragma("GCC unroll 8") for (int k = 0; k < kLanes / N; ++k) {  // unrolled: registers, not memory
    const typename Lanes<N>::U32 scale = columnwise ? e8m0_value_lanes<N>(load_u8_lanes<N>(scales + k * N).v).v : shared;
    const typename Lanes<N>::U32 value = fp8_decode_lanes<E5M2, N>(load_u8_lanes<N>(values + k * N).v).v;
    store_lanes<Bf16Output, N>(output, index + k * N, dequantize_lanes<N>(value, scale).v);
  }
}

template <bool E5M2, bool Bf16Output>
struct DequantizeRows {
  template <int N>
  MXFP8_ALWAYS_INLINE static void run(const DequantizeJob &j, const int64_t &r0, const int64_t &r1) {
    const int64_t K = j.cols, full_blocks = K / kBlockSize, tail = K - full_blocks * kBlockSize;
    const bool columnwise = j.columnwise != 0;
    constexpr int64_t kOutputBytes = Bf16Output ? 2 : 4;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t *values = j.values + r * K;
      const uint8_t *scales = columnwise ? j.scales + (r / kBlockSize) * j.scale_row_stride : j.scales + r * j.scale_row_stride;
      for (int64_t b = 0; b < full_blocks; ++b)
        dequantize_32<E5M2, Bf16Output, N>(values + b * kBlockSize, columnwise ? scales + b * kBlockSize : scales + b,
                                        columnwise, j.output, r * K + b * kBlockSize);
      if (tail) {  // the row's last, partial block through zero-padded copies
        uint8_t padded_values[kLanes] = {}, padded_scales[kLanes] = {};
        alignas(64) uint8_t out[kLanes * kOutputBytes];
        const int64_t c0 = full_blocks * kBlockSize;
        std::memcpy(padded_values, values + c0, static_cast<size_t>(tail));
        std::memcpy(padded_scales, columnwise ? scales + c0 : scales + full_blocks,
                    static_cast<size_t>(columnwise ? tail : 1));
        dequantize_32<E5M2, Bf16Output, N>(padded_values, padded_scales, columnwise, out, 0);
        std::memcpy(static_cast<uint8_t *>(j.output) + (r * K + c0) * kOutputBytes, out,
                    static_cast<size_t>(tail * kOutputBytes));
      }
    }
  }
};

template <bool E5M2, bool Bf16Output>
void dequantize_typed(const DequantizeJob &j) {
  const int64_t bytes = j.rows * j.cols * (1 + (Bf16Output ? 2 : 4));
  parallel_for(j.rows, bytes, [&](int64_t begin, int64_t end) {
    run_for_host_isa<DequantizeRows<E5M2, Bf16Output>>(j, begin, end);
  });
}

}  // namespace

void dequantize_host(const DequantizeJob &j) {
  if (j.e5m2) return j.bf16_output ? dequantize_typed<true, true>(j) : dequantize_typed<true, false>(j);
  j.bf16_output ? dequantize_typed<false, true>(j) : dequantize_typed<false, false>(j);
}

}  // namespace mxfp8
