// The CUDA kernels of NVFP4 decoding: the dequantize, one thread per output element, grid-stride (for
// checking and for consumers without NVFP4 support, not a hot path), and the second-level scales of many
// tensors in one launch (every run of a plan with NVFP4 entries). The element math is nvfp4_decode.hpp's,
// shared with the host loops.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>

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

// The global scales of up to kCapacity tensors, the jobs a kernel parameter: blockIdx.y picks the job,
// blockIdx.x and the threads stride over its amaxes (one per tensor, or one per row of a per-row amax).
template <int kCapacity>
struct GlobalScaleBatch {
  Nvfp4GlobalScaleJob jobs[kCapacity];  // the first gridDim.y of them
};
// A full batch is ~32 KiB of kernel parameter, copied into every launch (host time, as the scale jobs'
// batches measure it): one job and small batches take smaller ones.
constexpr int kMostJobs = 1000;
static_assert(sizeof(GlobalScaleBatch<kMostJobs>) <= 32764, "the batch is one kernel parameter (at most 32764 bytes)");
constexpr int kSmallBatch = 32;

template <int kCapacity>
__global__ void nvfp4_global_scale_kernel(const __grid_constant__ GlobalScaleBatch<kCapacity> batch) {
  const Nvfp4GlobalScaleJob &j = batch.jobs[blockIdx.y];
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

namespace {

template <int kCapacity>
void launch_global_scales(const Nvfp4GlobalScaleJob *jobs, size_t count, cudaStream_t stream) {
  auto batch = std::make_unique<GlobalScaleBatch<kCapacity>>();  // heap, not stack: up to ~32 KiB
  int64_t most = 0;
  for (size_t k = 0; k < count; ++k) {
    batch->jobs[k] = jobs[k];
    most = std::max(most, jobs[k].count);
  }
  const dim3 grid(blocks_for(most), static_cast<unsigned>(count));
  nvfp4_global_scale_kernel<kCapacity><<<grid, kThreads, 0, stream>>>(*batch);
  check(cudaGetLastError(), "launching the NVFP4 global scale kernel");
}

}  // namespace

void nvfp4_global_scales(const Nvfp4GlobalScaleJob *jobs, size_t count, void *stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  for (size_t next = 0; next < count;) {
    const size_t n = std::min<size_t>(count - next, kMostJobs);
    if (n == 1) launch_global_scales<1>(jobs + next, n, s);
    else if (n <= kSmallBatch) launch_global_scales<kSmallBatch>(jobs + next, n, s);
    else launch_global_scales<kMostJobs>(jobs + next, n, s);
    next += n;
  }
}

}  // namespace mxfp8::cuda
