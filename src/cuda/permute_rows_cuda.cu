// CUDA kernel of a row-permuted copy (scale_copy.hpp): the values of the TRT-LLM layouts, all experts
// in one launch. Rows move in 16-byte vectors (4 or 1 bytes when K or a pointer is not aligned for them).
// A block copies a tile of whole destination rows at a time: as many rows (1, 2, 4, ... 32, so that a
// tile never spans two experts, whose rows are multiples of 32) as fill kThreads * kUnroll vectors, so
// that short rows (an MoE down projection's K of 1536 bytes is 96 vectors) still keep kUnroll loads in
// flight per thread before the stores. Each vector's source row comes from target_layout.hpp's
// layout_source_row. Consecutive threads move consecutive vectors of a row, so every load and store of
// a warp is contiguous whatever the permutation.
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

constexpr int64_t kMaxTileRows = 32;  // divides every expert's row count (the layouts need 128)

// Rows per tile: the largest power of two up to 32 whose rows hold at most kThreads * kUnroll vectors.
int64_t tile_rows_for(int64_t per_row) {
  int64_t rows = 1;
  while (rows < kMaxTileRows && 2 * rows * per_row <= int64_t{kThreads} * kUnroll) rows *= 2;
  return rows;
}

template <class Vec>
__global__ void __launch_bounds__(kThreads) permute_rows_kernel(const Vec *src, Vec *dst, int64_t rows, int64_t per_row,
                                                                int64_t tile_rows, int64_t group_rows, int32_t layout) {
  const int64_t tiles = rows / tile_rows, tile_vectors = tile_rows * per_row;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int64_t r0 = tile * tile_rows;
    const int64_t first = r0 - r0 % group_rows;  // the tile's expert (a tile never spans two)
    const Vec *from = src + first * per_row;
    Vec *to = dst + r0 * per_row;  // the tile's rows are contiguous in the destination
    for (int64_t i0 = threadIdx.x; i0 < tile_vectors; i0 += int64_t{kThreads} * kUnroll) {
      Vec v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = i0 + u * kThreads;
        if (i >= tile_vectors) continue;
        // 32-bit: a tile holds fewer than 2^31 vectors (checked on the host), and a 64-bit division is slow.
        const int64_t in_tile = static_cast<uint32_t>(i) / static_cast<uint32_t>(per_row), c = i - in_tile * per_row;
        const int64_t source = layout_source_row(layout, group_rows, r0 - first + in_tile);
        v[u] = __ldcs(from + source * per_row + c);  // read once: do not keep in L2
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = i0 + u * kThreads;
        if (i < tile_vectors) to[i] = v[u];
      }
    }
  }
}

template <class Vec>
void launch(const ScaleJob &job, cudaStream_t stream) {
  const int64_t rows = job.dst.rows, per_row = job.dst.cols / static_cast<int64_t>(sizeof(Vec));
  const int64_t tile_rows = tile_rows_for(per_row);
  const int64_t grid = std::min<int64_t>(rows / tile_rows, resident_blocks<permute_rows_kernel<Vec>>(kThreads));
  permute_rows_kernel<Vec><<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(
      reinterpret_cast<const Vec *>(job.src.data), reinterpret_cast<Vec *>(job.dst.data), rows, per_row, tile_rows,
      job.group_rows, job.row_layout);
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
      job.dst.col_stride != 1 || job.group_rows <= 0 || job.group_rows % kMaxTileRows != 0 ||
      job.dst.rows % job.group_rows != 0)
    fail(MXFP8_ERROR_INTERNAL, "a row permutation job needs dense row-major matrices of whole groups of 32 rows");
  if (job.dst.cols > INT32_MAX)
    fail(MXFP8_ERROR_UNSUPPORTED, "rows of ", job.dst.cols, " bytes are beyond what the row permutation kernel covers (2^31 - 1)");
  auto s = static_cast<cudaStream_t>(stream);
  if (fits(job, 16)) return launch<uint4>(job, s);
  if (fits(job, 4)) return launch<uint32_t>(job, s);
  launch<uint8_t>(job, s);
}

}  // namespace mxfp8::cuda
