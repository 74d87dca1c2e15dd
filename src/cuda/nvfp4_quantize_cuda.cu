// CUDA kernels of the NVFP4 quantize calls.
//
// The amax first, as Transformer Engine does it (a separate pass, since every block scale depends on it):
// per tensor, tensor_amax_kernel strides over the input with 16-byte loads, four in flight per thread,
// back to front (so that the quantize pass, front to back, starts on what is still in L2); each warp
// reduces its threads' maxima and one atomicMax per warp folds them into the caller's amax (float bits of
// non-negative floats order like the values; the amax is zeroed first, and several shards of a fused
// call fold into the same word). Per row, row_amax_kernel gives each row a warp, whose lanes read
// consecutive elements (coalesced).
//
// Then the blocks. Rowwise with TE's default rule, K a multiple of 16 and aligned buffers (every weight
// TE quantizes), quantize_full_blocks_kernel: a thread per 16-value block per step of a persistent grid,
// all in registers, the multiplier of each possible scale byte computed once per thread block, the E2M1
// codes from nvfp4_numerics.hpp's e2m1_rounded_magnitude (six instructions a value, no branch); see its
// comment. Everything else (4over6, partial blocks, unaligned buffers, columnwise) quantize_blocks_kernel:
// one thread per 16-value block through nvfp4_quantize_block. Neighbouring threads own neighbouring
// blocks of a row, so a warp reads 32 consecutive blocks (1 KiB of BF16) and writes 256 consecutive
// bytes of values and 32 of compact scales. Columnwise (TE's transposed data: line c is column c of the
// input), the per-column amax is column_amax_kernel (a thread per column: a warp reads 32 neighbouring
// columns of a row at a time), and quantize_blocks_kernel's threads are numbered column-fastest (thread
// t: column t % K of row block t / K), so a warp's 16 loads each read 32 neighbouring elements of one row.
//
// The numbers are nvfp4_numerics.hpp's, shared with the host loop; the E2M1 encode is done there, not
// with Blackwell's cvt.rn.satfinite.e2m1x2 (which Hopper lacks), so the bytes are the same on every
// architecture. The block scale's E4M3 encode is the hardware conversion TE uses (fp8_encode's
// definition), as in the MXFP8 kernels.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
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
  constexpr int kInFlight = 4;  // 16-byte loads a thread issues before it uses the first
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float m = 0.0f;
  const int64_t vector_count = vectors ? n / kPer : 0;
  const auto *v = reinterpret_cast<const uint4 *>(in);
  // Back to front: the quantize pass that follows reads front to back, so the part read last here is
  // the part it starts with, which may still be in L2.
  for (int64_t i = first; i < vector_count; i += kInFlight * stride) {
    uint4 raw[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t k = i + u * stride;
      raw[u] = k < vector_count ? __ldg(v + (vector_count - 1 - k)) : uint4{0, 0, 0, 0};  // zeros change no max
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      float x[kPer];
      unpack<In>(raw[u], x);
#pragma unroll
      for (int e = 0; e < kPer; ++e) m = fmaxf(m, fabsf(x[e]));  // max_magnitude's rule: fmaxf skips NaN
    }
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

// PTX prmt in its default mode: byte n of the result is byte (s >> 4n) & 7 of {b, a}, or, when bit 3 of
// that selector nibble is set, that byte's top bit repeated 8 times.
__device__ inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t s) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
  return d;
}

// The full-block kernel's view of its input: a block's 16 values as 32-bit words, the bit pattern of
// their largest magnitude (integer maxima: the bits of non-negative floats order like their values), and
// each value as a float (exact widening) with its sign bit.
struct BFloat16Words {
  static constexpr int kWords = 8;  // two values a word, the even one in the low half
  static constexpr uint32_t kInfBits = 0x7F80;
  __device__ static uint32_t largest_magnitude_bits(const uint32_t *w) {
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < kWords; ++i) m = __vmaxu2(m, w[i] & 0x7FFF7FFFu);  // both halves at once
    return max(m & 0xFFFFu, m >> 16);
  }
  __device__ static float magnitude(uint32_t bits) { return __uint_as_float(bits << 16); }
  __device__ static float value(const uint32_t *w, int i) {
    return __uint_as_float(i % 2 ? w[i / 2] & 0xFFFF0000u : w[i / 2] << 16);
  }
  // The sign bits of values 8h..8h+7 at bit 3 of their nibbles (value k at bit 4 * (k - 8h) + 3), from
  // words 4h..4h+3, whose bits 15 and 31 they are: prmt's sign-replicating byte selection spreads each
  // sign over a byte, two more select even and odd values, one merge keeps each byte's nibbles apart.
  __device__ static uint32_t signs(const uint32_t *w, int h) {
    const uint32_t *q = w + 4 * h;
    const uint32_t a = prmt(q[0], q[1], 0xFBD9), b = prmt(q[2], q[3], 0xFBD9);  // values 0 2 1 3 / 4 6 5 7
    const uint32_t even = prmt(a, b, 0x5410), odd = prmt(a, b, 0x7632);           // values 0 2 4 6 / 1 3 5 7
    return ((even & 0x0F0F0F0Fu) | (odd & 0xF0F0F0F0u)) & 0x88888888u;
  }
};
struct Float16Words {
  static constexpr int kWords = 8;
  static constexpr uint32_t kInfBits = 0x7C00;
  __device__ static uint32_t largest_magnitude_bits(const uint32_t *w) {
    return BFloat16Words::largest_magnitude_bits(w);
  }
  // The hardware's half-to-float conversion: exact, as fp16_to_float is.
  __device__ static float widen(uint32_t bits) { return __half2float(__ushort_as_half(static_cast<unsigned short>(bits))); }
  __device__ static float magnitude(uint32_t bits) { return widen(bits); }
  __device__ static float value(const uint32_t *w, int i) { return widen(i % 2 ? w[i / 2] >> 16 : w[i / 2] & 0xFFFFu); }
  __device__ static uint32_t signs(const uint32_t *w, int h) { return BFloat16Words::signs(w, h); }
};
struct Float32Words {
  static constexpr int kWords = 16;
  static constexpr uint32_t kInfBits = 0x7F800000u;
  __device__ static uint32_t largest_magnitude_bits(const uint32_t *w) {
    uint32_t m = 0;
#pragma unroll
    for (int i = 0; i < kWords; ++i) m = max(m, w[i] & 0x7FFFFFFFu);
    return m;
  }
  __device__ static float magnitude(uint32_t bits) { return __uint_as_float(bits); }
  __device__ static float value(const uint32_t *w, int i) { return __uint_as_float(w[i]); }
  __device__ static uint32_t signs(const uint32_t *w, int h) {
    uint32_t s = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) s |= (w[8 * h + k] >> 31) << (4 * k + 3);
    return s;
  }
};
template <class In> struct WordsOf;
template <> struct WordsOf<BFloat16> { using Type = BFloat16Words; };
template <> struct WordsOf<Float16> { using Type = Float16Words; };
template <> struct WordsOf<Float32> { using Type = Float32Words; };

// TE's default rule on one full block, without NaN (its largest magnitude is at most Inf): the block
// amax is the largest magnitude; the scale byte is cvt.rn.satfinite.e4m3 of its product with
// S_enc / 6 (the instruction TE's static_cast<fp8e4m3> compiles to, and fp8_encode's definition: the
// MXFP8 kernels make the same conversion); the elements' multiplier r from `multipliers` (one per scale
// byte, per-tensor amax) or computed. Then each element's code from e2m1_rounded_magnitude(x * r),
// shared with the host, and its sign bit straight from the input: r is in (0, FLT_MAX] for every amax,
// negative, zero, tiny, Inf or NaN (the scale byte is encoded from block amax * S_enc / 6, so it has
// S_enc's sign, as S_dec = 1 / S_enc has, or is NaN; their product is then +0, positive or NaN, and
// nvfp4_block_multiplier turns 1 / +0 = +Inf and NaN into FLT_MAX), so x * r has x's sign, zeros and
// underflows included, and is NaN only where x is, which this path has none of. The 16 codes land in `packed` (value k in nibble k % 8 of word k / 8), the scale in `scale`.
template <class W, bool kPerRowAmax>
__device__ inline void quantize_full_block(const uint32_t *w, float block_amax, float encode_per_fp4, float s_dec,
                                           const float *multipliers, uint8_t &scale, uint2 &packed) {
  scale = static_cast<uint8_t>(__nv_cvt_float_to_fp8(mul_rn(block_amax, encode_per_fp4), __NV_SATFINITE, __NV_E4M3));
  const float r = kPerRowAmax ? nvfp4_block_multiplier(scale, s_dec) : multipliers[scale];
  uint32_t words[2] = {0, 0};
#pragma unroll
  for (int k = 0; k < kNvfp4BlockSize; ++k) {
    // float_bits(rounded) is 0x4B000000 + code: summed here, the constant part taken off once below.
    words[k / 8] += __float_as_uint(e2m1_rounded_magnitude(__fmul_rn(W::value(w, k), r))) << (4 * (k % 8));
  }
  constexpr uint32_t kRoundedBase = 0x4B000000u * 0x11111111u;  // 0x4B000000 in every nibble, wrapped
  packed.x = (words[0] - kRoundedBase) | W::signs(w, 0);
  packed.y = (words[1] - kRoundedBase) | W::signs(w, 1);
}

// Rowwise, TE's default rule, K a multiple of 16, input 16-byte and values 8-byte aligned (the layout of
// every weight): full blocks only, so block b of the tensor (line b / blocks_per_line) is input elements
// 16b.. and value bytes 8b... A thread per block per step, neighbouring threads on neighbouring blocks
// (a warp reads 1 KiB of BF16, writes 256 bytes of values and 32 of scales); a persistent grid, whose
// (line, block) position advances by a constant step instead of a division per block. Per-tensor amax:
// the 256 possible multipliers are computed once per thread block into shared memory (with
// nvfp4_block_multiplier, as the host does per block), which takes the division out of the block loop.
// Blocks that hold a NaN (rare) take nvfp4_quantize_block, as the generic kernel does.
struct FullBlockKernelArgs {
  const void *input;
  uint8_t *values;
  ScaleOut scales;
  const float *amax;
  int64_t blocks;           // lines * blocks_per_line
  int64_t blocks_per_line;
  int64_t step_lines;       // the grid's thread count as lines and blocks
  int64_t step_blocks;
  float e4m3_max;
};

template <class In, bool kPerRowAmax>
__global__ void __launch_bounds__(kThreads) quantize_full_blocks_kernel(FullBlockKernelArgs a) {
  using W = typename WordsOf<In>::Type;
  constexpr int kVectors = W::kWords / 4;
  __shared__ float multipliers[kPerRowAmax ? 1 : 256];
  Nvfp4RowScale row{};
  float encode_per_fp4 = 0.0f;
  if (!kPerRowAmax) {
    row = nvfp4_row_scale(a.amax[0], a.e4m3_max);
    encode_per_fp4 = mul_rn(row.s_enc, 1.0f / kFp4Max);
    for (int s = threadIdx.x; s < 256; s += blockDim.x)
      multipliers[s] = nvfp4_block_multiplier(static_cast<uint8_t>(s), row.s_dec);
    __syncthreads();
  }
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t line = first / a.blocks_per_line, blk = first - line * a.blocks_per_line;
  const auto *in = static_cast<const uint4 *>(a.input);
  // The next step's block is loaded while this one is quantized: two blocks' loads in flight a thread.
  auto load = [&](int64_t b, uint32_t *w) {
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const uint4 raw = b < a.blocks ? __ldg(in + b * kVectors + v) : uint4{0, 0, 0, 0};
      w[4 * v] = raw.x, w[4 * v + 1] = raw.y, w[4 * v + 2] = raw.z, w[4 * v + 3] = raw.w;
    }
  };
  uint32_t next[W::kWords];
  load(first, next);
  for (int64_t b = first; b < a.blocks; b += stride) {
    uint32_t w[W::kWords];
#pragma unroll
    for (int i = 0; i < W::kWords; ++i) w[i] = next[i];
    load(b + stride, next);
    if (kPerRowAmax) {
      row = nvfp4_row_scale(a.amax[line], a.e4m3_max);
      encode_per_fp4 = mul_rn(row.s_enc, 1.0f / kFp4Max);
    }
    const uint32_t largest = W::largest_magnitude_bits(w);
    uint8_t scale;
    uint2 packed;
    if (largest <= W::kInfBits) {
      quantize_full_block<W, kPerRowAmax>(w, W::magnitude(largest), encode_per_fp4, row.s_dec, multipliers, scale,
                                          packed);
    } else {
      float x[kNvfp4BlockSize];
      uint8_t codes[kNvfp4BlockSize];
#pragma unroll
      for (int k = 0; k < kNvfp4BlockSize; ++k) x[k] = W::value(w, k);
      scale = nvfp4_quantize_block(x, kNvfp4BlockSize, row, kNvfp4Default, codes);
      packed = uint2{0, 0};
#pragma unroll
      for (int k = 0; k < kNvfp4BlockSize; ++k) (k < 8 ? packed.x : packed.y) |= uint32_t{codes[k]} << (4 * (k % 8));
    }
    a.scales.data[scale_offset(a.scales, line, blk)] = scale;
    reinterpret_cast<uint2 *>(a.values)[b] = packed;
    line += a.step_lines;
    blk += a.step_blocks;
    if (blk >= a.blocks_per_line) blk -= a.blocks_per_line, ++line;
  }
}

bool aligned(const void *p, uintptr_t alignment) { return reinterpret_cast<uintptr_t>(p) % alignment == 0; }

// Grids are sized for a full SM of kThreads-thread blocks (2048 threads): the kernels stride over their
// work, so this only bounds the grid.
int64_t full_sm_blocks() { return int64_t{sm_count(current_device())} * (2048 / kThreads); }

template <class In>
void launch_full_blocks(const Nvfp4QuantizeJob &j, const Nvfp4Shard &s, const BlockKernelArgs &b, cudaStream_t stream) {
  FullBlockKernelArgs a{s.input, s.values, s.scales, j.amax, b.lines * b.blocks_per_line, b.blocks_per_line, 0, 0,
                        j.e4m3_max};
  const int resident = j.per_row_amax ? resident_blocks<quantize_full_blocks_kernel<In, true>>(kThreads)
                                      : resident_blocks<quantize_full_blocks_kernel<In, false>>(kThreads);
  const int64_t blocks = std::min(int64_t{resident}, ceil_div(a.blocks, int64_t{kThreads}));
  const int64_t stride = blocks * kThreads;
  a.step_lines = stride / a.blocks_per_line;
  a.step_blocks = stride % a.blocks_per_line;
  if (j.per_row_amax)
    quantize_full_blocks_kernel<In, true><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  else
    quantize_full_blocks_kernel<In, false><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(a);
  check(cudaGetLastError(), "launching the NVFP4 full-block quantize kernel");
}

template <class In>
void launch(const Nvfp4QuantizeJob &j, cudaStream_t stream) {
  const int64_t most = full_sm_blocks();
  const int64_t element = sizeof(typename In::Raw);
  if (!j.per_row_amax && !j.amax_given) {
    check(cudaMemsetAsync(j.amax, 0, sizeof(float), stream), "zeroing the amax");
    for (int32_t i = 0; i < j.count; ++i) {
      const Nvfp4Shard &s = j.shards[i];
      const int64_t n = s.rows * j.cols;
      if (n == 0) continue;
      const int64_t blocks = std::min(int64_t{resident_blocks<tensor_amax_kernel<In>>(kThreads)},
                                      ceil_div(n, int64_t{kThreads} * (kVectorBytes / element)));
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
    if (a.vectors && j.selection == kNvfp4Default) {
      launch_full_blocks<In>(j, s, a, stream);
      continue;
    }
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
