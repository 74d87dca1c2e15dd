// The CUDA kernels of NVFP4 decoding: one thread per output element (dequantize) or per amax (the
// second-level scale), grid-stride. The element math is nvfp4_decode.hpp's, shared with the host loop.
// For checking and for consumers without NVFP4 support, not a hot path.
#include <cuda_runtime.h>

#include <algorithm>

#include "core/nvfp4_decode.hpp"
#include "core/shape.hpp"
#include "cuda/cuda_check.cuh"

namespace mxfp8::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMostBlocks = 4096;  // grid-stride beyond this: enough to fill any GPU for a check

__global__ void nvfp4_dequantize_kernel(Nvfp4DequantizeJob j) {
  const int64_t n = j.rows * j.cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / j.cols, c = i - r * j.cols;
    const float v = nvfp4_dequantize_element(j, r, c);
    if (j.bf16_output) static_cast<uint16_t *>(j.output)[i] = float_to_bf16(v);
    else static_cast<float *>(j.output)[i] = v;
  }
}

__global__ void nvfp4_global_scale_kernel(Nvfp4GlobalScaleJob j) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < j.count;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    j.out[i] = nvfp4_global_scale(j, i);
}

unsigned blocks_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, std::min(ceil_div(n, kThreads), kMostBlocks))); }

}  // namespace

void nvfp4_dequantize(const Nvfp4DequantizeJob &j, void *stream) {
  nvfp4_dequantize_kernel<<<blocks_for(j.rows * j.cols), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(j);
  check(cudaGetLastError(), "launching the NVFP4 dequantize kernel");
}

void nvfp4_global_scale(const Nvfp4GlobalScaleJob &j, void *stream) {
  nvfp4_global_scale_kernel<<<blocks_for(j.count), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(j);
  check(cudaGetLastError(), "launching the NVFP4 global scale kernel");
}

}  // namespace mxfp8::cuda
