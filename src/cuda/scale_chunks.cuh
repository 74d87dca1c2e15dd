// The scale kernels' (scale_jobs_cuda.cu) view of a launch: its jobs as the kernel sees them (DeviceJob,
// JobBatch, the kernel parameter), the chunk widths, where a chunk of a batch lies (Chunk, locate), and the
// in-register store of an unswizzled chunk (store_transposed_chunk), apart from the kernels that use them.
// scale_jobs_cuda.cu's head comment explains chunks.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/direct_chunk.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"
#include "core/swizzle_index.hpp"

namespace mxfp8::cuda {

constexpr int kVectorsPerTile = static_cast<int>(kTileBytes / 16);  // 32 16-byte loads per tile
constexpr int kMaxJobsPerLaunch = 300;  // keeps the kernel parameter under 32 KiB (104-byte jobs)

// A chunk width: kTiles tiles of one tile row, moved by kTiles * 8 threads holding 4 vectors each.
template <int kTiles>
struct Width {
  static constexpr int kTilesPerChunk = kTiles;
  static constexpr int kThreads = kTiles * 8;
  static constexpr int kVectorsPerThread = kTiles * kVectorsPerTile / kThreads;  // 4
  static constexpr int kSmemRowStride = kTiles + 1;  // words per chunk row in shared memory
  static constexpr int kSmemWords = std::max<int>(kTileRows * kSmemRowStride, direct_staging_words(kTiles));
  // Half the SM's 2048 threads resident: caps registers at 64, which the measured versions used.
  static constexpr int kMinBlocksPerSm = 1024 / kThreads;
};
// Narrow chunks (16 KiB) keep more blocks busy on one matrix; wide chunks (32 KiB, a whole tile row when
// K <= 8192) write longer contiguous runs, which wins once a batch has many chunks per resident block.
// Measured on the H200: bench/LOG.md, v4 (narrow) and v5 (wide).
using Narrow = Width<32>;
using Wide = Width<64>;
// The three batch capacities a launch is built with (scale_jobs_cuda.cu, launch_next): one job, up to
// kSmallBatch, or kMaxJobsPerLaunch.
constexpr int kSmallBatch = 16;

// Two fields of a job that only some kinds read: tile jobs their chunking, layout jobs their padding.
struct TileShape {
  int32_t direct;     // narrow matrix: chunks are runs of whole tiles, scattered without a gather
  int32_t tile_rows;  // ceil(rows / 128)
};
struct PaddedFrom {   // a padded layout job's source, S (rows x cols) of ScaleJob::pad; rows 0: not padded
  int32_t rows;
  int32_t cols;
};

// One matrix of a launch, as the kernel sees it.
struct DeviceJob {
  const uint8_t *swizzled;  // NULL: copy from src instead
  const uint8_t *src;
  uint8_t *dst;
  int64_t src_row_stride;
  int64_t dst_row_stride;   // layout jobs: the bytes written (ScaleJob::layout_bytes, resolved)
  int64_t dst_col_stride;
  int64_t src_col_stride;   // row-major sources of swizzle jobs (a transposed view for columnwise scales)
  int32_t rows;
  int32_t cols;
  int32_t tile_cols;        // roundup(cols, 4) / 4
  int32_t chunks_per_row;   // ceil(tile_cols / W::kTilesPerChunk)
  int32_t first_block;
  int32_t word_stores;      // dst rows are 4-byte aligned with col_stride 1
  union {                   // by kind: a job stays 104 bytes
    TileShape tiles;        // every kind but Layout
    PaddedFrom padded;      // Layout
  };
  // Layout jobs: the target layout, the source's layout, four flags and the padding scale (layout_job_bits).
  int32_t layout_bits;
  // A window of a larger swizzled matrix (ScaleJob::swizzled_row0 ...): tile rows of the source are
  // src_tile_stride tiles apart. An origin inside a tile (window_row0, window_col0 not 0) makes every
  // scale a byte gathered through the swizzle index (`gather`), since the window's tiles are not the
  // source's; a tile-aligned window moves whole source tiles like any matrix.
  int32_t src_tile_stride;
  int16_t window_row0;
  int8_t window_col0;
  int8_t gather;
  JobKind kind;  // in the struct's tail padding: a job stays 104 bytes and a launch takes 300 of them
};

template <int kCapacity>
struct JobBatch {
  int32_t count;
  DeviceJob jobs[kCapacity];
};
static_assert(sizeof(JobBatch<kMaxJobsPerLaunch>) <= 32764, "the batch is one kernel parameter (at most 32764 bytes)");
static_assert(sizeof(DeviceJob) == 104, "kMaxJobsPerLaunch is sized for 104-byte jobs");

// Where one chunk of a batch lies: its job, tile row, first tile column and width in tiles.
// A direct job's chunk is whole tile rows from tile_row on: `tiles` (a multiple of tile_cols) consecutive
// tiles in storage order, starting at linear_tile; other chunks stay inside one tile row.
struct Chunk {
  const DeviceJob *job;
  int64_t linear_tile;  // the chunk's first tile in the swizzled buffer
  int tile_row;
  int first_tile;
  int tiles;
};

// Chunks are visited in increasing order, so the job index only ever moves forward. A block's next chunk
// is gridDim.x chunks on, which can skip dozens of small jobs (an MoE layer's experts take a few chunks
// each): past the next job, a binary search over first_block (strictly increasing: fill_batch gives
// every job at least one chunk) rather than a walk of dependent parameter loads.
template <class W, int kCapacity>
__device__ inline Chunk locate(const JobBatch<kCapacity> &batch, int32_t chunk, int &job_index) {
  if (job_index + 1 < batch.count && batch.jobs[job_index + 1].first_block <= chunk) {
    int lo = job_index + 1, hi = batch.count - 1;  // the answer is in [lo, hi]; jobs[lo] starts at or before
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (batch.jobs[mid].first_block <= chunk) lo = mid;
      else hi = mid - 1;
    }
    job_index = lo;
  }
  const DeviceJob &job = batch.jobs[job_index];
  const int local = chunk - job.first_block;
  if (job.kind == JobKind::Layout) return Chunk{&job, local, 0, 0, 0};  // linear_tile: the chunk's index
  if (job.tiles.direct) {
    const int per_chunk = direct_tile_rows_per_chunk(W::kTilesPerChunk, job.tile_cols);
    const int tile_row = local * per_chunk;
    return Chunk{&job, static_cast<int64_t>(tile_row) * job.tile_cols, tile_row, 0,
                 min(per_chunk, job.tiles.tile_rows - tile_row) * job.tile_cols};
  }
  const int tile_row = local / job.chunks_per_row;
  const int first_tile = (local % job.chunks_per_row) * W::kTilesPerChunk;
  return Chunk{&job, static_cast<int64_t>(tile_row) * job.src_tile_stride + first_tile, tile_row, first_tile,
               min(W::kTilesPerChunk, job.tile_cols - first_tile)};
}

__device__ inline const uint8_t *swizzled_chunk(const Chunk &c) { return c.job->swizzled + c.linear_tile * kTileBytes; }

// The quad of tiles (4q .. 4q + 3 of the chunk) and the line l of each that a thread moves.
struct QuadLine {
  int quad, line;
};

__device__ inline uint32_t word_of(const uint4 &v, int s) { return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w; }

// Writes an in-register chunk: the thread holds line l of 4 tiles (`at`), i.e. 4 scales of rows l, l + 32,
// l + 64 and l + 96 in each tile; transposed, that is 16 consecutive scales (one 16-byte store) of each
// of the 4 rows. Partial quads, unaligned or strided rows fall back to words or bytes.
template <class W>
__device__ void store_transposed_chunk(const Chunk &c, const uint4 (&regs)[W::kVectorsPerThread], QuadLine at) {
  const int first = 4 * at.quad;
  const int tiles_left = c.tiles - first;  // of this quad: 1 to 4 valid, or none
  if (tiles_left <= 0) return;
  // Only what the stores need, in registers and relative to the thread's first row and column (through
  // the pointer, every store could alias the job; and two register sets are live here, see
  // transposed_step in scale_jobs_cuda.cu, so every field kept costs a spill).
  const int row = c.tile_row * static_cast<int>(kTileRows) + at.line;
  const int col = (c.first_tile + first) * static_cast<int>(kTileCols);
  const int rows_left = c.job->rows - row, cols_left = c.job->cols - col;
  const int64_t row_stride = c.job->dst_row_stride, col_stride = c.job->dst_col_stride;
  uint8_t *out = c.job->dst + row * row_stride + col * col_stride;
  const bool word_stores = c.job->word_stores;
  const bool vector = word_stores && tiles_left >= 4 && cols_left >= 4 * static_cast<int>(kTileCols) &&
                      ((reinterpret_cast<uintptr_t>(out) | static_cast<uintptr_t>(row_stride)) & 15) == 0;
#pragma unroll
  for (int s = 0; s < 4; ++s, out += kSubtileRows * row_stride) {
    if (s * static_cast<int>(kSubtileRows) >= rows_left) break;
    if (vector) {
      *reinterpret_cast<uint4 *>(out) =
          make_uint4(word_of(regs[0], s), word_of(regs[1], s), word_of(regs[2], s), word_of(regs[3], s));
      continue;
    }
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int cj = t * static_cast<int>(kTileCols);  // relative to col
      if (t >= tiles_left || cj >= cols_left) break;
      const int valid = cj + static_cast<int>(kTileCols) <= cols_left ? static_cast<int>(kTileCols) : cols_left - cj;
      const uint32_t w = word_of(regs[t], s);
      uint8_t *o = out + cj * col_stride;
      if (word_stores && valid == 4) {
        *reinterpret_cast<uint32_t *>(o) = w;
      } else {
        for (int b = 0; b < valid; ++b) o[b * col_stride] = static_cast<uint8_t>(w >> (8 * b));
      }
    }
  }
}

}  // namespace mxfp8::cuda
