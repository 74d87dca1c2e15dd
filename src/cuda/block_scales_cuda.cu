// One scale per 32x32 block from the stored 1x32 scales, on the device. One thread per block scale:
// it reads the 32 stored scales of its block (a column of them for rowwise scales, a row for
// columnwise), writes the first, and records the earliest disagreement with an atomic minimum.
#include <cuda_runtime.h>

#include "cuda/cuda_check.cuh"
#include "cuda/cuda_runtime.hpp"
#include "core/error.hpp"
#include "core/scale_source.hpp"

namespace mxfp8::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned long long kNone = ~0ull;


__global__ void block_scales_kernel(ScaleSource s, int axis, ByteMatrix out, unsigned long long *first_mismatch) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= out.rows * out.cols) return;
  const int64_t br = i / out.cols, bc = i % out.cols;
  uint8_t value;
  const int64_t mismatch = read_block(s, axis, br, bc, &value);
  out.data[br * out.row_stride + bc * out.col_stride] = value;
  if (mismatch >= 0) atomicMin(first_mismatch, static_cast<unsigned long long>(mismatch));
}

}  // namespace

BlockMismatch block_scales(const ScaleSource &s, int axis, ByteMatrix out, void *stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int64_t n = out.rows * out.cols;
  if (n == 0) return {};
  // From the library's pool, like every other device allocation (the default pool would give it back to
  // the driver at the synchronize below).
  auto *flag = static_cast<unsigned long long *>(allocate(sizeof(unsigned long long), stream));
  unsigned long long first = kNone;
  cudaError_t e = cudaMemcpyAsync(flag, &first, sizeof first, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess) {
    block_scales_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, st>>>(s, axis, out, flag);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(&first, flag, sizeof first, cudaMemcpyDeviceToHost, st);
  free_async(flag, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(st);
  check(e, "checking the 32x32 block scales");
  if (first == kNone) return {};
  const auto index = static_cast<int64_t>(first);
  return BlockMismatch{index / s.cols, index % s.cols};
}

}  // namespace mxfp8::cuda
