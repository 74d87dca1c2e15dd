// CUDA kernels of mxfp8_quantize.
//
// Rowwise 1x32 quantization with K a multiple of 32 (every weight matrix) takes the streaming kernel:
// the input is then one contiguous run of 32-value blocks. Each thread loads 16 bytes (8 BF16/FP16 or
// 4 FP32 values), the 4 or 8 lanes that hold one block agree on its amax with 2 or 3 butterfly
// shuffles, and each thread stores its 8 or 4 FP8 bytes, so a warp reads 512 and writes 256 (or 128)
// contiguous bytes per step. Each thread has kLoadsInFlight loads in flight before any math.
//
// Columnwise 1x32 quantization with K a multiple of 8 (4 for FP32), and 32x32 blocks with K a multiple of
// 32, take the column kernel: a thread per 16-byte column strip of a 32-row block (see
// quantize_columns_kernel). Both 1x32 directions together are one launch of each vector kernel.
//
// Everything else (K or alignment the vector kernels cannot take) takes the tile kernel: a warp owns a
// 32x32 tile, each lane one column of it in registers. Column amaxes are lane local; row amaxes
// (rowwise) and tile amaxes (32x32) are butterfly reductions across the warp. It is capped at 80
// registers (3 blocks of 256 threads per SM; uncapped it took 109 and 2 blocks, no faster).
//
// Measured on the H200 (bench/LOG.md, v10-v15): rowwise 84-88% of a copy of the bytes moved.
//
// The numerics are mx_numerics.hpp's, except the FP8 encode, which is the hardware's
// cvt.rn.satfinite (as in Transformer Engine); the GPU tests compare both on every special value.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/cuda_check.cuh"
#include "core/error.hpp"
#include "core/mx_numerics.hpp"
#include "core/quantize.hpp"
#include "core/shape.hpp"

namespace mxfp8::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int kLoadsInFlight = 4;
constexpr unsigned kFullMask = 0xFFFFFFFFu;


struct BFloat16 {
  using Raw = uint16_t;
  __device__ static float load(Raw v) { return bf16_to_float(v); }
  __device__ static float low(uint32_t w) { return __uint_as_float(w << 16); }
  __device__ static float high(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }
};
struct Float16 {
  using Raw = uint16_t;
  __device__ static float load(Raw v) { return __half2float(__ushort_as_half(v)); }
  __device__ static float low(uint32_t w) { return load(static_cast<Raw>(w & 0xFFFF)); }
  __device__ static float high(uint32_t w) { return load(static_cast<Raw>(w >> 16)); }
};
struct Float32 {
  using Raw = float;
  __device__ static float load(Raw v) { return v; }
};

__device__ inline uint8_t block_exponent(float amax, const QuantizeJob &j) { return mxfp8::block_exponent(amax, j.rounding, j.e5m2); }
__device__ inline float block_reciprocal(uint8_t e, const QuantizeJob &j) { return mxfp8::block_reciprocal(e, j.rounding); }

// |x| as it enters a block's amax: fmaxf skips a NaN, which is right for RCEIL and FLOOR; under
// compressed-tensors' rule a NaN counts as +Inf (nan_counts_in_amax).
__device__ inline float amax_term(float x, const QuantizeJob &j) {
  const float a = fabsf(x);
  return a != a && nan_counts_in_amax(j.rounding) ? __int_as_float(0x7F800000) : a;
}

__device__ inline __nv_fp8_interpretation_t interpretation(const QuantizeJob &j) { return j.e5m2 ? __NV_E5M2 : __NV_E4M3; }

__device__ inline uint8_t encode(float x, float reciprocal, const QuantizeJob &j) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fmul_rn(x, reciprocal), __NV_SATFINITE, interpretation(j)));
}

// Two values scaled and encoded into one 16-bit word, the first in the low byte.
__device__ inline uint32_t encode_pair(float a, float b, float ra, float rb, const QuantizeJob &j) {
  const float2 scaled = make_float2(__fmul_rn(a, ra), __fmul_rn(b, rb));
  return static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(scaled, __NV_SATFINITE, interpretation(j)));
}

// 4 or 8 encoded values (one 16-byte load's worth), packed for one 4- or 8-byte store.
template <int kPerVector>
__device__ inline uint2 encode_vector(const float *x, const float *reciprocal, const QuantizeJob &j) {
  uint2 packed{encode_pair(x[0], x[1], reciprocal[0], reciprocal[1], j) |
                   encode_pair(x[2], x[3], reciprocal[2], reciprocal[3], j) << 16,
               0};
  if constexpr (kPerVector == 8)
    packed.y = encode_pair(x[4], x[5], reciprocal[4], reciprocal[5], j) |
               encode_pair(x[6], x[7], reciprocal[6], reciprocal[7], j) << 16;
  return packed;
}

template <int kPerVector>
__device__ inline void store_vector(uint8_t *dst, uint2 packed) {
  if constexpr (kPerVector == 8) *reinterpret_cast<uint2 *>(dst) = packed;
  else *reinterpret_cast<uint32_t *>(dst) = packed.x;
}

__device__ inline float warp_max(float v, int width) {
  for (int m = 1; m < width; m <<= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, m));
  return v;
}

// 16 bytes of input as floats.
template <class In>
__device__ inline void unpack(const uint4 &raw, float *x) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (sizeof(typename In::Raw) == 4) {
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = __uint_as_float(w[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = In::low(w[i]);
      x[2 * i + 1] = In::high(w[i]);
    }
  }
}

template <class In>
__global__ void __launch_bounds__(kThreads) quantize_rows_kernel(QuantizeJob j, int64_t vectors) {
  constexpr int kPerVector = 16 / static_cast<int>(sizeof(typename In::Raw));  // values per load
  constexpr int kLanesPerBlock = 32 / kPerVector;
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * kThreads) >> 5;
  const auto *in = static_cast<const uint4 *>(j.input);
  const int64_t col_blocks = j.cols / kBlockSize;
  for (int64_t base = warp * 32 * kLoadsInFlight; base < vectors; base += warps * 32 * kLoadsInFlight) {
    uint4 raw[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t v = base + u * 32 + lane;
      raw[u] = v < vectors ? __ldcs(in + v) : make_uint4(0, 0, 0, 0);  // read once: do not keep in L2
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int64_t v = base + u * 32 + lane;
      float x[kPerVector];
      unpack<In>(raw[u], x);
      float amax = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerVector; ++i) amax = fmaxf(amax, amax_term(x[i], j));
      amax = warp_max(amax, kLanesPerBlock);  // every lane takes part, so the loop bound is per warp
      const uint8_t e = block_exponent(amax, j);
      const float r = block_reciprocal(e, j);
      if (v >= vectors) continue;
      float reciprocals[kPerVector];
#pragma unroll
      for (int i = 0; i < kPerVector; ++i) reciprocals[i] = r;
      store_vector<kPerVector>(j.row_values + v * kPerVector, encode_vector<kPerVector>(x, reciprocals, j));
      if (lane % kLanesPerBlock == 0) {
        const int64_t block = v / kLanesPerBlock;  // row * col_blocks + block within the row
        int64_t offset = block;
        if (j.row_scales.padded) {
          const int64_t row = block / col_blocks;
          offset = scale_offset(j.row_scales, row, block - row * col_blocks);
        }
        j.row_scales.data[offset] = e;
      }
    }
  }
}

// Columnwise 1x32 with K a multiple of the vector width, and 32x32 blocks with K a multiple of 32: each
// thread owns a 16-byte column strip of one 32-row block and holds all 32 of its loads in registers
// (issued together, so a resident block keeps 128 KiB in flight). Column amaxes are thread-local; for
// 32x32 blocks the 4 or 8 lanes holding one block's 32 columns agree on its amax with 2 or 3 shuffles,
// and the block's values are encoded once and stored to each direction asked for.
template <class In>
__global__ void __launch_bounds__(kThreads, 1) quantize_columns_kernel(QuantizeJob j) {
  constexpr int kPerVector = 16 / static_cast<int>(sizeof(typename In::Raw));
  constexpr int kLanesPerBlock = 32 / kPerVector;
  const int lane = threadIdx.x & 31;
  const int64_t strips = j.cols / kPerVector;  // 16-byte column strips per row
  const int64_t items = ceil_div(j.rows, kBlockSize) * strips;
  const auto *in = static_cast<const uint4 *>(j.input);
  // The loop bound is per warp, so that every lane takes part in the shuffles.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x - lane; base < items;
       base += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t item = base + lane;
    const int64_t row_block = item / strips, strip = item - row_block * strips, r0 = row_block * kBlockSize;
    const int rows_inside = item < items ? static_cast<int>(min(kBlockSize, j.rows - r0)) : 0;
    uint4 raw[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) raw[i] = i < rows_inside ? __ldcs(in + (r0 + i) * strips + strip) : make_uint4(0, 0, 0, 0);
    float amax[kPerVector] = {};
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      float x[kPerVector];
      unpack<In>(raw[i], x);
#pragma unroll
      for (int k = 0; k < kPerVector; ++k) amax[k] = fmaxf(amax[k], amax_term(x[k], j));
    }
    if (j.block_32x32) {
      float block_amax = 0.0f;
#pragma unroll
      for (int k = 0; k < kPerVector; ++k) block_amax = fmaxf(block_amax, amax[k]);
      block_amax = warp_max(block_amax, kLanesPerBlock);
#pragma unroll
      for (int k = 0; k < kPerVector; ++k) amax[k] = block_amax;
    }
    if (rows_inside == 0) continue;
    uint8_t e[kPerVector];
    float reciprocal[kPerVector];
#pragma unroll
    for (int k = 0; k < kPerVector; ++k) {
      e[k] = block_exponent(amax[k], j);
      reciprocal[k] = block_reciprocal(e[k], j);
    }
    const int64_t c0 = strip * kPerVector;
    if (j.col_values)
#pragma unroll
      for (int k = 0; k < kPerVector; ++k) j.col_scales.data[scale_offset(j.col_scales, row_block, c0 + k)] = e[k];
    if (j.row_values && lane % kLanesPerBlock == 0)  // 32x32 only: the block's scale on each of its rows
      for (int i = 0; i < rows_inside; ++i) j.row_scales.data[scale_offset(j.row_scales, r0 + i, c0 / kBlockSize)] = e[0];
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      if (i >= rows_inside) break;
      float x[kPerVector];
      unpack<In>(raw[i], x);
      const uint2 packed = encode_vector<kPerVector>(x, reciprocal, j);
      if (j.col_values) store_vector<kPerVector>(j.col_values + (r0 + i) * j.cols + c0, packed);
      if (j.row_values) store_vector<kPerVector>(j.row_values + (r0 + i) * j.cols + c0, packed);
    }
  }
}

template <class In>
__global__ void __launch_bounds__(kThreads, 3) quantize_tiles_kernel(QuantizeJob j) {
  const int lane = threadIdx.x & 31;
  const int64_t tile_cols = ceil_div(j.cols, kBlockSize);
  const int64_t tiles = ceil_div(j.rows, kBlockSize) * tile_cols;
  const auto *in = static_cast<const typename In::Raw *>(j.input);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; t < tiles; t += warps) {
    const int64_t r0 = t / tile_cols * kBlockSize, c0 = t % tile_cols * kBlockSize, c = c0 + lane;
    const bool column_inside = c < j.cols;
    const int rows_inside = static_cast<int>(min(kBlockSize, j.rows - r0));
    float x[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) x[i] = column_inside && i < rows_inside ? In::load(in[(r0 + i) * j.cols + c]) : 0.0f;
    float column_amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) column_amax = fmaxf(column_amax, amax_term(x[i], j));
    const float tile_amax = j.block_32x32 ? warp_max(column_amax, 32) : 0.0f;

    if (j.row_values) {
      uint8_t row_e = 0;  // lane i ends up with row i's exponent
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const float a = j.block_32x32 ? tile_amax : warp_max(amax_term(x[i], j), 32);
        if (lane == i) row_e = block_exponent(a, j);
      }
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        const auto e = static_cast<uint8_t>(__shfl_sync(kFullMask, row_e, i));
        if (column_inside && i < rows_inside) j.row_values[(r0 + i) * j.cols + c] = encode(x[i], block_reciprocal(e, j), j);
      }
      if (lane < rows_inside) j.row_scales.data[scale_offset(j.row_scales, r0 + lane, c0 / kBlockSize)] = row_e;
    }
    if (j.col_values) {
      const uint8_t e = block_exponent(j.block_32x32 ? tile_amax : column_amax, j);
      const float r = block_reciprocal(e, j);
#pragma unroll
      for (int i = 0; i < 32; ++i)
        if (column_inside && i < rows_inside) j.col_values[(r0 + i) * j.cols + c] = encode(x[i], r, j);
      if (column_inside) j.col_scales.data[scale_offset(j.col_scales, r0 / kBlockSize, c)] = e;
    }
  }
}

bool aligned(const void *p, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// Grids are sized for a full SM of kThreads-thread blocks (2048 threads), whatever each kernel's
// occupancy: the kernels stride over their work, so this only bounds the grid.
int resident_blocks() { return sm_count(current_device()) * (2048 / kThreads); }

// Rowwise and columnwise 1x32 work on aligned weights goes to the two vector kernels (one launch each,
// so each direction reads the input once), 32x32 blocks on aligned weights with K a multiple of 32 to
// the column kernel alone (one read for both directions); anything else to the tile kernel.
template <class In>
void launch(const QuantizeJob &j, cudaStream_t stream) {
  constexpr int kPerVector = 16 / static_cast<int>(sizeof(typename In::Raw));
  const bool vectors_fit = aligned(j.input, 16) && (!j.row_values || aligned(j.row_values, kPerVector)) &&
                           (!j.col_values || aligned(j.col_values, kPerVector));
  const bool rows_fit = !j.row_values || j.block_32x32 || j.cols % kBlockSize == 0;  // 32x32: the column kernel
  const bool columns_fit = j.block_32x32 ? j.cols % kBlockSize == 0 : !j.col_values || j.cols % kPerVector == 0;
  const int64_t most = resident_blocks();
  if (vectors_fit && rows_fit && columns_fit) {
    if (j.row_values && !j.block_32x32) {
      QuantizeJob rows = j;
      rows.col_values = nullptr;
      const int64_t vectors = j.rows * j.cols / kPerVector;
      const int64_t blocks = std::min(most, ceil_div(vectors, int64_t{kThreads} * kLoadsInFlight));
      quantize_rows_kernel<In><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(rows, vectors);
      check(cudaGetLastError(), "launching the rowwise quantize kernel");
    }
    if (j.col_values || j.block_32x32) {
      QuantizeJob columns = j;
      if (!j.block_32x32) columns.row_values = nullptr;
      const int64_t items = ceil_div(j.rows, kBlockSize) * (j.cols / kPerVector);
      const int64_t blocks = std::min(most / (2048 / kThreads), ceil_div(items, int64_t{kThreads}));
      quantize_columns_kernel<In><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(columns);
      check(cudaGetLastError(), "launching the column quantize kernel");
    }
    return;
  }
  const int64_t tiles = ceil_div(j.rows, kBlockSize) * ceil_div(j.cols, kBlockSize);
  const int64_t blocks = std::min(most, ceil_div(tiles, int64_t{kWarpsPerBlock}));
  quantize_tiles_kernel<In><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(j);
  check(cudaGetLastError(), "launching the quantize kernel");
}

}  // namespace

void quantize(const QuantizeJob &j, void *stream) {
  auto st = static_cast<cudaStream_t>(stream);
  for (const ScaleOut *s : {&j.row_scales, &j.col_scales})
    if (s->data && s->padded) check(cudaMemsetAsync(s->data, 0, static_cast<size_t>(s->bytes), st), "zeroing the scale padding");
  switch (j.input_type) {
    case InputType::BFloat16: return launch<BFloat16>(j, st);
    case InputType::Float16: return launch<Float16>(j, st);
    case InputType::Float32: return launch<Float32>(j, st);
  }
}

}  // namespace mxfp8::cuda
