// The CUDA kernel of mxfp8_dequantize: one thread per output element, grid-stride. For checking and
// for consumers without MXFP8 support, not a hot path.
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

__global__ void dequantize_kernel(DequantizeJob j) {
  const int64_t n = j.rows * j.cols;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t r = i / j.cols, k = i - r * j.cols;
    const uint8_t e = j.columnwise ? j.scales[(r / kBlockSize) * j.scale_row_stride + k] : j.scales[r * j.scale_row_stride + k / kBlockSize];
    const float v = dequantize_element(j.values[i], e, j.e5m2);
    if (j.bf16_output) static_cast<uint16_t *>(j.output)[i] = float_to_bf16(v);
    else static_cast<float *>(j.output)[i] = v;
  }
}

}  // namespace

void dequantize(const DequantizeJob &j, void *stream) {
  const int64_t blocks = std::min<int64_t>(ceil_div(j.rows * j.cols, kThreads), 4096);
  dequantize_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(j);
  check(cudaGetLastError(), "launching the dequantize kernel");
}

}  // namespace mxfp8::cuda
