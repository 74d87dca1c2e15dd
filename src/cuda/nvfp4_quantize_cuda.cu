// CUDA kernels of the NVFP4 quantize calls.
//
// The amax first, as Transformer Engine does it (a separate pass, since every block scale depends on it):
// per tensor, tensor_amax_kernel strides over the input with 16-byte loads, each warp reduces its
// threads' maxima and one atomicMax per warp folds them into the caller's amax (float bits of
// non-negative floats order like the values; the amax is zeroed first, and several shards of a fused
// call fold into the same word). Per row, row_amax_kernel gives each row a warp, whose lanes read
// consecutive elements (coalesced).
//
// Columnwise (TE's transposed data: line c is column c of the input), the per-column amax is
// column_amax_kernel (a thread per column: a warp reads 32 neighbouring columns of a row at a time), and
// quantize_blocks_kernel's threads are numbered column-fastest (thread t: column t % K of row block
// t / K), so a warp's 16 loads each read 32 neighbouring elements of one row.
//
// Then quantize_blocks_kernel: one thread per 16-value block. Neighbouring threads own neighbouring
// blocks of a row, so a warp reads 32 consecutive blocks (1 KiB of BF16) and writes 256 consecutive
// bytes of values and 32 of compact scales. When K is a multiple of 16 and the buffers are aligned, a
// thread loads its block with 16-byte loads and stores its 8 value bytes at once; otherwise element by
// element. The numbers are nvfp4_numerics.hpp's, shared with the host loop; the E2M1 and E4M3 encodes
// are done on the bits there, not with Blackwell's cvt.rn.satfinite.e2m1x2 (which Hopper lacks), so
// the bytes are the same on every architecture.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/error.hpp"
#include "core/nvfp4_numerics.hpp"
#include "core/nvfp4_quantize.hpp"
#include "core/shape.hpp"
#include "cuda/cuda_check.cuh"

namespace mxfp8::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kVectorBytes = 16;

struct BFloat16 {
  using Raw = uint16_t;
  __device__ static float load(Raw v) { return bf16_to_float(v); }
};
struct Float16 {
  using Raw = uint16_t;
  __device__ static float load(Raw v) { return fp16_to_float(v); }
};
struct Float32 {
  using Raw = float;
  __device__ static float load(Raw v) { return v; }
};

// One 16-byte vector of input as floats.
template <class In>
__device__ inline void unpack(const uint4 &raw, float *x) {
  constexpr int kPer = kVectorBytes / static_cast<int>(sizeof(typename In::Raw));
  const auto *elements = reinterpret_cast<const typename In::Raw *>(&raw);
#pragma unroll
  for (int i = 0; i < kPer; ++i) x[i] = In::load(elements[i]);
}

__device__ inline float warp_max_magnitude(float m) {
  for (int offset = kWarpSize / 2; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
  return m;
}

template <class In>
__global__ void __launch_bounds__(kThreads) tensor_amax_kernel(const typename In::Raw *in, int64_t n, bool vectors,
                                                               unsigned *amax_bits) {
  constexpr int kPer = kVectorBytes / static_cast<int>(sizeof(typename In::Raw));
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float m = 0.0f;
  const int64_t vector_count = vectors ? n / kPer : 0;
  const auto *v = reinterpret_cast<const uint4 *>(in);
  for (int64_t i = first; i < vector_count; i += stride) {
    float x[kPer];
    unpack<In>(__ldg(v + i), x);
#pragma unroll
    for (int e = 0; e < kPer; ++e) m = max_magnitude(m, x[e]);
  }
  for (int64_t i = vector_count * kPer + first; i < n; i += stride) m = max_magnitude(m, In::load(in[i]));
  m = warp_max_magnitude(m);
  if (threadIdx.x % kWarpSize == 0 && m > 0.0f) atomicMax(amax_bits, __float_as_uint(m));
}

template <class In>
__global__ void __launch_bounds__(kThreads) row_amax_kernel(const typename In::Raw *in, int64_t rows, int64_t cols,
                                                            float *amax) {
  const int lane = threadIdx.x % kWarpSize;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarpSize);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarpSize) + threadIdx.x / kWarpSize; r < rows;
       r += warps) {
    float m = 0.0f;
    for (int64_t k = lane; k < cols; k += kWarpSize) m = max_magnitude(m, In::load(in[r * cols + k]));
    m = warp_max_magnitude(m);
    if (lane == 0) amax[r] = m;
  }
}

template <class In>
__global__ void __launch_bounds__(kThreads) column_amax_kernel(const typename In::Raw *in, int64_t rows, int64_t cols,
                                                               float *amax) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += stride) {
    float m = 0.0f;
    for (int64_t r = 0; r < rows; ++r) m = max_magnitude(m, In::load(in[r * cols + c]));
    amax[c] = m;
  }
}

// Rowwise, a line is a row (`length` = K values, consecutive); columnwise, a column (`length` = M
// values, K apart).
struct BlockKernelArgs {
  const void *input;
  int64_t rows;
  int64_t cols;
  int32_t columnwise;
  int64_t lines;
  int64_t length;
  int64_t blocks_per_line;
  uint8_t *values;
  ScaleOut scales;
  const float *amax;
  int32_t per_row_amax;
  int32_t selection;
  float e4m3_max;
  int32_t vectors;         // rowwise, K % 16 == 0, input 16-byte and values 8-byte aligned: 16-byte loads
  int32_t aligned_values;  // values 8-byte aligned
};

// kFourOverSix: compiled separately, so that TE's default rule does not carry 4over6's second candidate
// in registers.
template <class In, bool kFourOverSix>
__global__ void __launch_bounds__(kThreads) quantize_blocks_kernel(BlockKernelArgs a) {
  using Raw = typename In::Raw;
  constexpr int kPer = kVectorBytes / static_cast<int>(sizeof(Raw));
  const auto *in = static_cast<const Raw *>(a.input);
  const int64_t total = a.lines * a.blocks_per_line;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t value_line_bytes = ceil_div(a.length, int64_t{2});
  const Nvfp4RowScale tensor_scale = a.per_row_amax ? Nvfp4RowScale{} : nvfp4_row_scale(a.amax[0], a.e4m3_max);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < total; b += stride) {
    // Rowwise: blocks of a row are neighbours; columnwise: columns of a row block are.
    const int64_t line = a.columnwise ? b % a.lines : b / a.blocks_per_line;
    const int64_t blk = a.columnwise ? b / a.lines : b - line * a.blocks_per_line;
    const int64_t k0 = blk * kNvfp4BlockSize;
    const int n = a.length - k0 < kNvfp4BlockSize ? static_cast<int>(a.length - k0) : kNvfp4BlockSize;
    float x[kNvfp4BlockSize];
    if (a.vectors) {
      const auto *v = reinterpret_cast<const uint4 *>(in + line * a.cols + k0);
#pragma unroll
      for (int i = 0; i < kNvfp4BlockSize / kPer; ++i) unpack<In>(__ldg(v + i), x + i * kPer);
    } else if (a.columnwise) {
      for (int i = 0; i < n; ++i) x[i] = In::load(in[(k0 + i) * a.cols + line]);
    } else {
      for (int i = 0; i < n; ++i) x[i] = In::load(in[line * a.cols + k0 + i]);
    }
    const Nvfp4RowScale row = a.per_row_amax ? nvfp4_row_scale(a.amax[line], a.e4m3_max) : tensor_scale;
    uint8_t codes[kNvfp4BlockSize];
    const uint8_t scale = nvfp4_quantize_block(x, n, row, kFourOverSix ? a.selection : kNvfp4Default, codes);
    a.scales.data[scale_offset(a.scales, line, blk)] = scale;
    uint8_t *out = a.values + line * value_line_bytes + k0 / 2;
    if (n == kNvfp4BlockSize) {
      uint2 packed{0, 0};
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const uint32_t byte = static_cast<uint32_t>(codes[2 * i]) | (static_cast<uint32_t>(codes[2 * i + 1]) << 4);
        if (i < 4) packed.x |= byte << (8 * i);
        else packed.y |= byte << (8 * (i - 4));
      }
      if (a.aligned_values && a.length % kNvfp4BlockSize == 0) {  // every line starts 8-byte aligned
        *reinterpret_cast<uint2 *>(out) = packed;
      } else {
        for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(packed.x >> (8 * i));
        for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<uint8_t>(packed.y >> (8 * i));
      }
    } else {
      for (int i = 0; i < n; i += 2) out[i / 2] = static_cast<uint8_t>(codes[i] | ((i + 1 < n ? codes[i + 1] : 0) << 4));
    }
  }
}

bool aligned(const void *p, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// Grids are sized for a full SM of kThreads-thread blocks (2048 threads): the kernels stride over their
// work, so this only bounds the grid.
int64_t resident_blocks() { return int64_t{sm_count(current_device())} * (2048 / kThreads); }

template <class In>
void launch(const Nvfp4QuantizeJob &j, cudaStream_t stream) {
  const int64_t most = resident_blocks();
  const int64_t element = sizeof(typename In::Raw);
  if (!j.per_row_amax && !j.amax_given) {
    check(cudaMemsetAsync(j.amax, 0, sizeof(float), stream), "zeroing the amax");
    for (int32_t i = 0; i < j.count; ++i) {
      const Nvfp4Shard &s = j.shards[i];
      const int64_t n = s.rows * j.cols;
      if (n == 0) continue;
      const int64_t blocks = std::min(most, ceil_div(n, int64_t{kThreads} * (kVectorBytes / element)));
      tensor_amax_kernel<In><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          static_cast<const typename In::Raw *>(s.input), n, aligned(s.input, kVectorBytes),
          reinterpret_cast<unsigned *>(j.amax));
      check(cudaGetLastError(), "launching the NVFP4 amax kernel");
    }
  }
  for (int32_t i = 0; i < j.count; ++i) {
    const Nvfp4Shard &s = j.shards[i];
    if (s.scales.data && s.scales.padded)
      check(cudaMemsetAsync(s.scales.data, 0, static_cast<size_t>(s.scales.bytes), stream), "zeroing the scale padding");
    const int64_t lines = j.columnwise ? j.cols : s.rows, length = j.columnwise ? s.rows : j.cols;
    if (lines == 0) continue;
    if (length == 0) {  // lines of no values: their amaxes are 0, there is nothing else to write
      if (j.per_row_amax && !j.amax_given)
        check(cudaMemsetAsync(j.amax, 0, static_cast<size_t>(lines) * sizeof(float), stream), "zeroing the amaxes");
      continue;
    }
    const auto *input = static_cast<const typename In::Raw *>(s.input);
    if (j.per_row_amax && !j.amax_given) {
      if (j.columnwise) {
        const int64_t blocks = std::min(most, ceil_div(j.cols, int64_t{kThreads}));
        column_amax_kernel<In><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(input, s.rows, j.cols, j.amax);
      } else {
        const int64_t blocks = std::min(most, ceil_div(s.rows, int64_t{kThreads / kWarpSize}));
        row_amax_kernel<In><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(input, s.rows, j.cols, j.amax);
      }
      check(cudaGetLastError(), "launching the NVFP4 row amax kernel");
    }
    BlockKernelArgs a{s.input, s.rows, j.cols, j.columnwise, lines, length, ceil_div(length, int64_t{kNvfp4BlockSize}),
                      s.values, s.scales, j.amax, j.per_row_amax, j.selection, j.e4m3_max, 0, 0};
    a.aligned_values = aligned(s.values, 8);
    a.vectors = !j.columnwise && j.cols % kNvfp4BlockSize == 0 && aligned(s.input, kVectorBytes) && a.aligned_values;
    const int64_t blocks = std::min(most, ceil_div(lines * a.blocks_per_line, int64_t{kThreads}));
    if (j.selection == kNvfp4Default)
      quantize_blocks_kernel<In, false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
    else
      quantize_blocks_kernel<In, true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
    check(cudaGetLastError(), "launching the NVFP4 quantize kernel");
  }
}

}  // namespace

void nvfp4_quantize(const Nvfp4QuantizeJob &j, void *stream) {
  auto st = static_cast<cudaStream_t>(stream);
  switch (j.input_type) {
    case InputType::BFloat16: return launch<BFloat16>(j, st);
    case InputType::Float16: return launch<Float16>(j, st);
    case InputType::Float32: return launch<Float32>(j, st);
  }
}

}  // namespace mxfp8::cuda
