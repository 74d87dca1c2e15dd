// CUDA kernel of a row-permuted copy (scale_copy.hpp): the values of the TRT-LLM layouts, all experts
// in one launch. A block copies whole destination rows: it works out the source row once per row
// (target_layout.hpp's layout_source_row), then its threads move the row in 16-byte vectors (4 or 1 bytes
// when K or a pointer is not aligned for them), kUnroll loads in flight per thread before the stores.
// Every load and store of a warp is contiguous, so this runs at copy speed whatever the permutation.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/cuda_check.cuh"
#include "core/error.hpp"
#include "core/scale_copy.hpp"
#include "core/target_layout.hpp"

namespace mxfp8::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;

template <class Vec>
__global__ void __launch_bounds__(kThreads) permute_rows_kernel(const Vec *src, Vec *dst, int64_t rows, int64_t per_row,
                                                                int64_t group_rows, int32_t layout) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t first = row - row % group_rows;
    const Vec *from = src + (first + layout_source_row(layout, group_rows, row - first)) * per_row;
    Vec *to = dst + row * per_row;
    for (int64_t c0 = threadIdx.x; c0 < per_row; c0 += int64_t{kThreads} * kUnroll) {
      Vec v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + u * kThreads;
        if (c < per_row) v[u] = __ldcs(from + c);  // read once: do not keep in L2
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + u * kThreads;
        if (c < per_row) to[c] = v[u];
      }
    }
  }
}

template <class Vec>
void launch(const ScaleJob &job, cudaStream_t stream) {
  const int64_t rows = job.dst.rows;
  const int64_t grid = std::min<int64_t>(rows, resident_blocks<permute_rows_kernel<Vec>>(kThreads));
  permute_rows_kernel<Vec><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
      reinterpret_cast<const Vec *>(job.src.data), reinterpret_cast<Vec *>(job.dst.data), rows,
      job.dst.cols / static_cast<int64_t>(sizeof(Vec)), job.group_rows, job.row_layout);
  check(cudaGetLastError(), "launching the row permutation kernel");
}

bool fits(const ScaleJob &job, uintptr_t bytes) {
  return job.dst.cols % static_cast<int64_t>(bytes) == 0 && reinterpret_cast<uintptr_t>(job.src.data) % bytes == 0 &&
         reinterpret_cast<uintptr_t>(job.dst.data) % bytes == 0;
}

}  // namespace

void permute_rows(const ScaleJob &job, void *stream) {
  if (job.dst.rows == 0 || job.dst.cols == 0) return;
  if (job.src.row_stride != job.dst.cols || job.dst.row_stride != job.dst.cols || job.src.col_stride != 1 ||
      job.dst.col_stride != 1 || job.group_rows <= 0 || job.dst.rows % job.group_rows != 0)
    fail(MXFP8_ERROR_INTERNAL, "a row permutation job needs dense row-major matrices of whole groups");
  auto s = static_cast<cudaStream_t>(stream);
  if (fits(job, 16)) return launch<uint4>(job, s);
  if (fits(job, 4)) return launch<uint32_t>(job, s);
  launch<uint8_t>(job, s);
}

}  // namespace mxfp8::cuda
