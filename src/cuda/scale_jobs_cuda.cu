// CUDA kernels for the scale matrix operations.
//
// Both directions work on "chunks": W::kTilesPerChunk consecutive 128x4 tiles of one tile row. In the
// swizzled buffer a chunk is one contiguous run of W::kTilesPerChunk * 512 bytes; in the compact matrix it
// is 128 rows x (4 * W::kTilesPerChunk) columns. A thread block moves one chunk at a time, so that both
// its global reads and its global writes are coalesced: 16-byte vectors on the swizzled side, runs of
// 4 * W::kTilesPerChunk bytes along each compact row on the other.
//
// A launch of aligned, not direct unswizzles alone moves each chunk in registers, one chunk a thread
// block (unswizzle_chunk_kernel): a thread loads line l of 4 tiles (16 bytes each: 4 scales of rows l,
// l + 32, l + 64, l + 96 per tile) and stores 16 consecutive scales of each of those 4 rows, a 4 x 4 word
// transpose with no shared memory and no barrier (store_transposed_chunk; mxfp8_swizzle_scales' kernel
// is its mirror, on the same kind of grid). A run of such unswizzles of at most kTinyLaunchMaxTiles tiles
// takes chunks of one quad, a warp a block (Tiny), so that a small matrix spreads over SMs; the swizzle
// kernel launches warp-sized blocks at the same sizes. MXFP8_UNSWIZZLE_PATH=smem sends every such launch
// through shared memory instead, to time one against the other.
// Other launches stage chunks through shared memory:
//
// Shared memory holds a chunk in its compact form, one 32-bit word (4 scales) per row and tile:
// word (r, j) at r * (tiles per chunk + 1) + j. The padding word keeps both access patterns nearly free
// of bank conflicts: a warp staging one tile writes rows l, l+32, l+64, l+96 of lane l (banks l + j);
// a warp gathering 16-byte row segments reads 4 rows x 8 quads (banks r + 4q + k, all distinct) for
// narrow chunks, 2 rows x 16 quads (2-way) for wide ones. (Direct chunks stage differently, below.)
//
// Narrow matrices (rows shorter than half a chunk, e.g. 24 scales) take "direct" chunks instead: as many
// whole tile rows as fit in a chunk (5 rows of 6 tiles for 24 scales), staged in compact order and
// written in output order, 4 consecutive words a thread, so that a warp's stores cover one contiguous
// 512-byte run when the rows are dense (core/direct_chunk.hpp: the mapping and its bank analysis).
// Row-major sources (padded crops, bucket copies) skip shared memory: each thread copies 16-byte (or
// smaller) row segments.
//
// Jobs that produce a swizzled buffer (the import side: engine parameters in the cuBLAS layout) share the
// launch. Their chunks are the same runs of tiles of the destination, written without shared memory.
// From a row-major source with 16-byte aligned rows, in a launch that stages nothing (kUnstaged), a
// thread moves line l of 4 tiles as mxfp8_swizzle_scales does (store_swizzled_quads: 16-byte loads of 4
// rows, a 4 x 4 word transpose in registers, 16-byte stores; narrow matrices in direct chunks of whole
// tile rows when no job of the run stages, is_direct); otherwise it assembles one 16-byte line
// (the words of 4 rows, 4 bytes from each of 32 rows per warp) from the row-major source, or loads the
// same line of a swizzled source, zeroes the padding in it and stores it.
// Engine layout jobs write their layout word by word through its inverse index (store_layout_chunk), but
// for two: into the whole 128x4 layout from row-major scales they run as swizzle jobs (runs_as_swizzle),
// and DeepGEMM's packed layout from aligned row-major scales moves blocks of rows (store_packed_block).
// A launch with no unswizzle to stage (only imports and layouts) runs without shared memory or barriers.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cuda/bulk_copy.cuh"
#include "cuda/cuda_check.cuh"
#include "core/direct_chunk.hpp"
#include "core/error.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"
#include "core/scale_source.hpp"
#include "core/swizzle_index.hpp"
#include "core/target_layout.hpp"

namespace mxfp8::cuda {
namespace {

constexpr int kWordsPerTile = static_cast<int>(kTileBytes / 4);  // 128: one 32-bit word per tile row
constexpr int kWordsPerLine = static_cast<int>(kLineBytes / 4);  // 4
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
constexpr int kWideChunksPerBlock = 8;
// Tiny chunks (one quad, 2 KiB, a warp a block) for an unswizzle of at most kTinyLaunchMaxTiles tiles (1 MiB:
// 64 narrow chunks) in registers: a (128, 128) scale matrix was one narrow block of 256 threads, whose
// 16 KiB of loads queued on one SM (4.2 us of kernel against FlashInfer's 3.2 us over 128 blocks, H100,
// ncu); as 8 warps on 8 SMs it is latency, not one SM's queue. The swizzle kernel does the same with
// warp-sized blocks at the same sizes (swizzle()).
// Only the in-register unswizzle takes it, so it has none of Width's shared-memory sizes.
struct Tiny {
  static constexpr int kTilesPerChunk = 4;
  static constexpr int kThreads = 32;
  static constexpr int kVectorsPerThread = kTilesPerChunk * kVectorsPerTile / kThreads;  // 4
};
constexpr int64_t kTinyLaunchMaxTiles = 2048;


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

// A layout job's description in DeviceJob::layout_bits: the target layout (bits 0-7), the source's
// packed layout (8-15), five flags, and the byte of a padding scale (24-31). A swizzle job's layout_bits
// hold kZeroAsOne alone: a layout job into the 128x4 layout runs as one (runs_as_swizzle).
// kPackedBlocks: a DeepGEMM packed job chunked in blocks of rows (packed_blocks, store_packed_block).
constexpr int32_t kSourceTransposed = 1 << 16, kReadTransposed = 1 << 17, kZeroAsOne = 1 << 18, kPadHalves = 1 << 19,
                  kPackedBlocks = 1 << 20;
constexpr int kPadScaleShift = 24;
// Output words of a layout job's chunk: 4 per thread, as the other chunks move 4 vectors per thread.
template <class W>
constexpr int64_t kLayoutWordsPerChunk = int64_t{W::kThreads} * 4;
// A packed block (store_packed_block): kThreads rows x 8 words, each row's 8 words (32 scales, one
// 32-byte sector of a row-major source) read by the same lanes of two neighbouring warps.
template <class W>
constexpr int kPackedBlockRows = W::kThreads;
constexpr int kPackedBlockWords = 8;

int32_t layout_job_bits(const ScaleJob &j) {
  return j.layout | (j.source_layout << 8) | (j.source_transposed ? kSourceTransposed : 0) |
         (j.read_transposed ? kReadTransposed : 0) | (j.zero_as_one ? kZeroAsOne : 0) | (j.pad.halves ? kPadHalves : 0) |
         static_cast<int32_t>(static_cast<uint32_t>(j.pad.scale) << kPadScaleShift);
}

template <int kCapacity>
struct JobBatch {
  int32_t count;
  DeviceJob jobs[kCapacity];
};
static_assert(sizeof(JobBatch<kMaxJobsPerLaunch>) <= 32764, "the batch is one kernel parameter (at most 32764 bytes)");
static_assert(sizeof(DeviceJob) == 104, "kMaxJobsPerLaunch is sized for 104-byte jobs");

__device__ uint32_t load_word_bytes(const uint8_t *p, int valid) {
  uint32_t w = 0;
  for (int b = 0; b < 4; ++b)
    if (b < valid) w |= static_cast<uint32_t>(p[b]) << (8 * b);
  return w;
}

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
__device__ Chunk locate(const JobBatch<kCapacity> &batch, int32_t chunk, int &job_index) {
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

__device__ const uint8_t *swizzled_chunk(const Chunk &c) { return c.job->swizzled + c.linear_tile * kTileBytes; }

// MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE on a word of 4 scales: each zero byte that `mask` keeps (the
// columns inside the matrix; padding stays zero) becomes 1.
__device__ uint32_t zero_bytes_as_one(uint32_t word, uint32_t mask) {
  return word | (__vcmpeq4(word, 0u) & mask & 0x01010101u);
}

// The bytes of a word that hold one of `valid` scales (any count: <= 0 none, >= 4 all).
__device__ uint32_t valid_bytes_mask(int valid) {
  return valid >= 4 ? 0xFFFFFFFFu : valid <= 0 ? 0u : (1u << (8 * valid)) - 1u;
}

__device__ bool vector_loads(const Chunk &c) {
  return c.job->kind == JobKind::Unswizzle && !c.job->gather &&
         (reinterpret_cast<uintptr_t>(swizzled_chunk(c)) & 15) == 0;
}

// The `valid` scales of dst row r from column col of a gather job, read byte by byte through the swizzle
// index of the source (the window's origin inside its first tile added).
__device__ uint32_t gather_word(const DeviceJob &job, int64_t r, int64_t col, int valid) {
  const int64_t padded_cols = static_cast<int64_t>(job.src_tile_stride) * kTileCols;
  uint32_t w = 0;
  for (int b = 0; b < valid; ++b)
    w |= static_cast<uint32_t>(job.swizzled[swizzled_offset(job.window_row0 + r, job.window_col0 + col + b, padded_cols)])
         << (8 * b);
  return w;
}

// Issues the 16-byte loads of a swizzled chunk into registers (they complete while the previous chunk
// is being stored).
template <class W>
__device__ void load_chunk(const Chunk &c, uint4 (&regs)[W::kVectorsPerThread]) {
  if (!vector_loads(c)) return;
  const uint4 *src = reinterpret_cast<const uint4 *>(swizzled_chunk(c));
  const int vectors = c.tiles * kVectorsPerTile;
#pragma unroll
  for (int v = 0; v < W::kVectorsPerThread; ++v) {
    const int i = threadIdx.x + v * W::kThreads;
    if (i < vectors) regs[v] = __ldg(src + i);
  }
}

// The quad of tiles (4q .. 4q + 3 of the chunk) and the line l of each that a thread moves in registers.
// A warp takes 8 quads x 4 consecutive lines, so its loads are 8 runs of 64 bytes and its stores 4 rows x
// 128 contiguous bytes; 8 warps cover the 32 lines of 8 quads.
struct QuadLine {
  int quad, line;
};
// A chunk of 32 tiles or more: each group of 8 warps takes 8 quads, a warp 4 lines of each (a warp's stores
// then cover 128 contiguous bytes of 4 compact rows). A tiny chunk (one quad, Tiny) has a warp alone: lane
// l takes line l.
template <class W>
__device__ QuadLine quad_line() {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if constexpr (W::kTilesPerChunk < 32) {
    static_assert(W::kTilesPerChunk == 4, "a chunk below 32 tiles is one quad, one warp");
    return QuadLine{0, lane};
  }
  return QuadLine{(warp / 8) * 8 + lane / 4, (warp % 8) * 4 + lane % 4};
}

// The loads of an in-register chunk: line l of tiles 4q .. 4q + 3 (quad_line), 16 bytes each.
template <class W>
__device__ void load_transposed_chunk(const Chunk &c, uint4 (&regs)[W::kVectorsPerThread]) {
  static_assert(W::kVectorsPerThread == 4 && W::kThreads == W::kTilesPerChunk * 8, "a thread moves one line of a quad");
  const uint4 *src = reinterpret_cast<const uint4 *>(swizzled_chunk(c));
  const QuadLine at = quad_line<W>();
  // Every vector assigned, a zero past the chunk (the stores skip what lies past it).
#pragma unroll
  for (int t = 0; t < 4; ++t)
    regs[t] = 4 * at.quad + t < c.tiles ? __ldg(src + (4 * at.quad + t) * kVectorsPerTile + at.line) : uint4{};
}

__device__ uint32_t word_of(const uint4 &v, int s) { return s == 0 ? v.x : s == 1 ? v.y : s == 2 ? v.z : v.w; }

// Writes an in-register chunk: the thread holds line l of 4 tiles, i.e. 4 scales of rows l, l + 32,
// l + 64 and l + 96 in each tile; transposed, that is 16 consecutive scales (one 16-byte store) of each
// of the 4 rows. Partial quads, unaligned or strided rows fall back to words or bytes.
template <class W>
__device__ void store_transposed_chunk(const Chunk &c, const uint4 (&regs)[W::kVectorsPerThread]) {
  const QuadLine at = quad_line<W>();
  const int first = 4 * at.quad;
  const int tiles_left = c.tiles - first;  // of this quad: 1 to 4 valid, or none
  if (tiles_left <= 0) return;
  // Only what the stores need, in registers and relative to the thread's first row and column (through
  // the pointer, every store could alias the job).
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

// Puts a swizzled chunk into shared memory: from the registers, or byte by byte when a caller's
// byte_offset left the buffer unaligned (correct, slower).
template <class W>
__device__ void stage_chunk(const Chunk &c, const uint4 (&regs)[W::kVectorsPerThread], uint32_t *tiles) {
  if (c.job->kind != JobKind::Unswizzle || c.job->gather) return;
  if (c.job->tiles.direct) {  // compact order, padded (core/direct_chunk.hpp)
    const int tile_cols = c.job->tile_cols;
    const int vectors = c.tiles * kVectorsPerTile;
    if (vector_loads(c)) {
      constexpr int kSubtileStep = static_cast<int>(kSubtileRows);  // rows between the words of a line
      // Vector i = threadIdx.x + v * kThreads is line i % 32 (the same for every v) of chunk tile i / 32,
      // which steps by kTileStep tiles: (tile row, tile column) stepped rather than divided for each v
      // (the divisions cost the plain path 8 more bytes of spill).
      constexpr int kTileStep = W::kThreads / kVectorsPerTile;
      const int line = threadIdx.x % kVectorsPerTile, tile0 = threadIdx.x / kVectorsPerTile;
      int tile_row = tile0 / tile_cols, tile_col = tile0 - tile_row * tile_cols;
      const int step_rows = kTileStep / tile_cols, step_cols = kTileStep - step_rows * tile_cols;
#pragma unroll
      for (int v = 0; v < W::kVectorsPerThread; ++v) {
        const int i = threadIdx.x + v * W::kThreads;
        const int w = direct_compact_word_at(tile_row, tile_col, line, 0, tile_cols);
        tile_col += step_cols;
        tile_row += step_rows + (tile_col >= tile_cols);
        if (tile_col >= tile_cols) tile_col -= tile_cols;
        if (i >= vectors) continue;
        tiles[direct_staging_slot(w)] = regs[v].x;
        tiles[direct_staging_slot(w + 1 * kSubtileStep * tile_cols)] = regs[v].y;
        tiles[direct_staging_slot(w + 2 * kSubtileStep * tile_cols)] = regs[v].z;
        tiles[direct_staging_slot(w + 3 * kSubtileStep * tile_cols)] = regs[v].w;
      }
    } else {
      const uint8_t *src = swizzled_chunk(c);
      for (int i = threadIdx.x; i < vectors * kWordsPerLine; i += W::kThreads) {
        const int w = i % kWordsPerTile;  // word w of a tile: line w / 4, sub-tile w % 4
        tiles[direct_staging_slot(direct_compact_word(i / kWordsPerTile, w / kWordsPerLine, w % kWordsPerLine, tile_cols))] =
            load_word_bytes(src + 4 * i, 4);
      }
    }
    return;
  }
  if (vector_loads(c)) {
    const int vectors = c.tiles * kVectorsPerTile;
#pragma unroll
    for (int v = 0; v < W::kVectorsPerThread; ++v) {
      const int i = threadIdx.x + v * W::kThreads;
      if (i >= vectors) continue;
      // A 16-byte vector is line l of tile j: the words of rows l, l + 32, l + 64 and l + 96.
      uint32_t *dst = tiles + (i % kVectorsPerTile) * W::kSmemRowStride + i / kVectorsPerTile;
      dst[0 * kSubtileRows * W::kSmemRowStride] = regs[v].x;
      dst[1 * kSubtileRows * W::kSmemRowStride] = regs[v].y;
      dst[2 * kSubtileRows * W::kSmemRowStride] = regs[v].z;
      dst[3 * kSubtileRows * W::kSmemRowStride] = regs[v].w;
    }
  } else {
    const uint8_t *src = swizzled_chunk(c);
    for (int i = threadIdx.x; i < c.tiles * kWordsPerTile; i += W::kThreads) {
      const int w = i % kWordsPerTile;  // word w of a tile: line w / 4, sub-tile w % 4
      const int r_in_tile = (w % kWordsPerLine) * kSubtileRows + w / kWordsPerLine;
      tiles[r_in_tile * W::kSmemRowStride + i / kWordsPerTile] = load_word_bytes(src + 4 * i, 4);
    }
  }
}

template <class W>
__device__ uint32_t swizzled_word(const uint32_t *tiles, int tile, int r_in_tile) {
  return tiles[r_in_tile * W::kSmemRowStride + tile];
}

// Writes the chunk's 128 rows x 4 * tiles columns of the compact matrix. A thread writes 4 consecutive
// words (16 bytes) of one row, 8 threads one 128-byte row segment. Partial, unaligned or strided
// segments fall back to words or bytes.
// Direct chunks: the chunk's rows row0 .. row0 + chunk_rows - 1 (whole tile rows, clipped to the matrix),
// staged in compact order (core/direct_chunk.hpp). Thread q takes compact words 4q .. 4q + 3, word w
// being scales 4 (w % tile_cols) .. + 3 of row row0 + w / tile_cols, so a warp covers 128 consecutive
// words: with dense rows (row_stride == cols, cols % 4 == 0) one contiguous, 16-byte-aligned 512-byte run
// of 16-byte stores; with rows of whole quads (tile_cols % 4 == 0, row_stride % 16 == 0) 16-byte stores
// along the rows. Otherwise (a partial last tile column, strided or unaligned rows) word by word, each
// word as a 32-bit store or its valid bytes. Only the fields it needs are loaded (register pressure).
template <class W>
__device__ void store_direct_chunk(const Chunk &c, const uint32_t *tiles) {
  // 32-bit indices (rows and cols fit, checked on the host) keep this path within the register cap.
  const int64_t row_stride = c.job->dst_row_stride, col_stride = c.job->dst_col_stride;
  const int rows = c.job->rows, cols = c.job->cols, tile_cols = c.job->tile_cols;
  const bool word_stores = c.job->word_stores;
  const int row0 = c.tile_row * static_cast<int>(kTileRows);
  const int words = min((c.tiles / tile_cols) * static_cast<int>(kTileRows), rows - row0) * tile_cols;
  uint8_t *const run = c.job->dst + row0 * row_stride;
  const bool vectors = word_stores && cols % 4 == 0 && (reinterpret_cast<uintptr_t>(run) & 15) == 0 &&
                       (row_stride == cols || (tile_cols % 4 == 0 && (row_stride & 15) == 0));
  for (int w0 = 4 * threadIdx.x; w0 < words; w0 += 4 * W::kThreads) {
    if (vectors && w0 + 4 <= words) {
      *reinterpret_cast<uint4 *>(run + (w0 / tile_cols) * row_stride + 4 * (w0 % tile_cols)) =
          make_uint4(tiles[direct_staging_slot(w0)], tiles[direct_staging_slot(w0 + 1)],
                     tiles[direct_staging_slot(w0 + 2)], tiles[direct_staging_slot(w0 + 3)]);
      continue;
    }
    for (int w = w0; w < w0 + 4 && w < words; ++w) {
      const uint32_t word = tiles[direct_staging_slot(w)];
      const int col = 4 * (w % tile_cols);
      const int valid = col + 4 <= cols ? 4 : cols - col;
      uint8_t *out = run + (w / tile_cols) * row_stride + col * col_stride;
      if (word_stores && valid == 4) {
        *reinterpret_cast<uint32_t *>(out) = word;
      } else {
        for (int b = 0; b < valid; ++b) out[b * col_stride] = static_cast<uint8_t>(word >> (8 * b));
      }
    }
  }
}

// A swizzle job's chunk from a row-major source whose rows start 16-byte aligned (col_stride 1), into an
// aligned destination: mxfp8_swizzle_scales' 4 x 4 word transpose (swizzle_kernel, below) inside the
// chunk loop. A thread takes line l of quad q (tiles 4q .. 4q + 3 of a tile row of the chunk: kThreads
// threads are kTilesPerChunk / 4 quads x 32 lines, quad_line), loads 16 scales of each of rows l, l + 32,
// l + 64, l + 96 (a warp: 4 rows x 128 contiguous bytes) and stores line l of its 4 tiles (8 runs of 64
// bytes). A direct chunk (narrow rows: whole tile rows, is_direct) numbers its quads row by row, each
// row's last quad partial when tile_cols % 4 != 0, and the threads step through them. The quad at a
// ragged row end loads words or bytes; rows and columns past the matrix are zeros.
template <class W>
__device__ void store_swizzled_quads(const Chunk &c, bool zero_as_one) {
  static_assert(W::kThreads == W::kTilesPerChunk / 4 * kVectorsPerTile, "a thread moves one line of a quad");
  constexpr int kQuadsPerStep = W::kTilesPerChunk / 4;
  const QuadLine at = quad_line<W>();
  const DeviceJob &job = *c.job;
  const bool direct = job.tiles.direct;
  const int width = direct ? job.tile_cols : c.tiles;  // tiles of each of the chunk's tile rows
  const int quads_per_row = (width + 3) / 4;
  const int quads = (direct ? c.tiles / job.tile_cols : 1) * quads_per_row;
  for (int quad = at.quad; quad < quads; quad += kQuadsPerStep) {
    const int tile_row_in_chunk = quad / quads_per_row, first = 4 * (quad % quads_per_row);
    const int tile_row = c.tile_row + tile_row_in_chunk;
    const int col = (c.first_tile + first) * static_cast<int>(kTileCols);
    const int cols_left = job.cols - col, rows_left = job.rows - tile_row * static_cast<int>(kTileRows) - at.line;
    const uint8_t *const src = job.src + (static_cast<int64_t>(tile_row) * kTileRows + at.line) * job.src_row_stride + col;
    const int64_t subtile_stride = kSubtileRows * job.src_row_stride;
    uint32_t words[4][4];  // [sub-tile s: row l + 32 s][tile 4q + t]
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint8_t *p = src + s * subtile_stride;
      if (s * static_cast<int>(kSubtileRows) >= rows_left) {
#pragma unroll
        for (int t = 0; t < 4; ++t) words[s][t] = 0;
      } else if (cols_left >= 4 * static_cast<int>(kTileCols)) {
        const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
        words[s][0] = v.x, words[s][1] = v.y, words[s][2] = v.z, words[s][3] = v.w;
      } else {
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int valid = cols_left - t * static_cast<int>(kTileCols);  // 4-byte aligned: rows and col are
          words[s][t] = valid >= 4 ? __ldg(reinterpret_cast<const uint32_t *>(p + 4 * t))
                                   : valid > 0 ? load_word_bytes(p + 4 * t, valid) : 0u;
        }
      }
      if (zero_as_one && s * static_cast<int>(kSubtileRows) < rows_left) {
#pragma unroll
        for (int t = 0; t < 4; ++t) words[s][t] = zero_bytes_as_one(words[s][t], valid_bytes_mask(cols_left - 4 * t));
      }
    }
    uint4 *const out =
        reinterpret_cast<uint4 *>(job.dst + (c.linear_tile + tile_row_in_chunk * job.tile_cols + first) * kTileBytes) + at.line;
#pragma unroll
    for (int t = 0; t < 4; ++t)
      if (first + t < width) out[t * kVectorsPerTile] = make_uint4(words[0][t], words[1][t], words[2][t], words[3][t]);
  }
}

// A swizzle job's chunk: thread i writes line i % 32 of tile i / 32, the words of rows l, l + 32, l + 64
// and l + 96 of that tile, each masked to the matrix (padding rows and columns are zeros). kQuads (the
// launches without shared memory, kUnstaged: the others would spill more): aligned row-major sources take
// store_swizzled_quads instead.
template <class W, bool kQuads>
__device__ void store_swizzled_chunk(const Chunk &c) {
  const bool zero_as_one = (c.job->layout_bits & kZeroAsOne) != 0;
  if (kQuads && !c.job->swizzled && c.job->src_col_stride == 1 &&
      ((reinterpret_cast<uintptr_t>(c.job->src) | static_cast<uintptr_t>(c.job->src_row_stride) |
        reinterpret_cast<uintptr_t>(c.job->dst)) & 15) == 0)
    return store_swizzled_quads<W>(c, zero_as_one);
  const DeviceJob job = *c.job;
  uint8_t *const out = job.dst + c.linear_tile * kTileBytes;
  const uint8_t *const same_layout = job.swizzled ? job.swizzled + c.linear_tile * kTileBytes : nullptr;
  const bool aligned = (reinterpret_cast<uintptr_t>(out) & 15) == 0 &&
                       (!same_layout || (reinterpret_cast<uintptr_t>(same_layout) & 15) == 0);
  for (int i = threadIdx.x; i < c.tiles * kVectorsPerTile; i += W::kThreads) {
    const int line = i % kVectorsPerTile;
    const int64_t col = static_cast<int64_t>(c.first_tile + i / kVectorsPerTile) * kTileCols;
    const int valid = col + kTileCols <= job.cols ? static_cast<int>(kTileCols) : static_cast<int>(job.cols - col);
    const uint32_t mask = valid_bytes_mask(valid);
    uint32_t words[4];
    if (same_layout && aligned) {
      const uint4 v = __ldg(reinterpret_cast<const uint4 *>(same_layout) + i);
      words[0] = v.x, words[1] = v.y, words[2] = v.z, words[3] = v.w;
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int64_t r = static_cast<int64_t>(c.tile_row) * kTileRows + s * kSubtileRows + line;
      if (r >= job.rows) {
        words[s] = 0;
      } else if (same_layout) {
        if (!aligned) words[s] = load_word_bytes(same_layout + 16 * i + 4 * s, 4);
        words[s] &= mask;
      } else {
        // A compact row-major source (a bucket's scales, an engine's compact parameter): one 32-bit load
        // per word. Byte by byte, a warp's 32 lanes (32 rows) issued four loads for 4 bytes each.
        const uint8_t *p = job.src + r * job.src_row_stride + col * job.src_col_stride;
        uint32_t w = 0;
        if (valid == 4 && job.src_col_stride == 1 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) {
          w = __ldg(reinterpret_cast<const uint32_t *>(p));
        } else {
          for (int b = 0; b < valid; ++b) w |= static_cast<uint32_t>(p[b * job.src_col_stride]) << (8 * b);
        }
        words[s] = zero_as_one ? zero_bytes_as_one(w, mask) : w;
      }
    }
    if (aligned) {
      reinterpret_cast<uint4 *>(out)[i] = make_uint4(words[0], words[1], words[2], words[3]);
    } else {
      for (int b = 0; b < 16; ++b) out[16 * i + b] = static_cast<uint8_t>(words[b / 4] >> (8 * (b % 4)));
    }
  }
}

// A DeepGEMM packed job's block (kPackedBlocks: a row-major source whose rows start 16-byte aligned,
// neither transposed nor padded, whole words written). Word (mn, k4) of the layout holds scales 4 k4 ..
// 4 k4 + 3 of row mn, at word k4 * mn_aligned + mn: a row's 4 scales are one word, and consecutive rows
// are consecutive words. Chunk i is rows (i / groups) * kPackedBlockRows .. + kPackedBlockRows - 1 and
// words (i % groups) * 8 .. + 7 (groups = ceil(ceil(cols / 4) / 8)). Lane l of warp w takes words
// 4 (w % 2) .. + 3 of the group in rows (w / 2) * 32 + l and kThreads / 2 further: per row one 16-byte
// load (16 scales; the two warps of a pair read a row's 32-byte sector between them), then 4 word
// stores, each a run of 32 consecutive words (128 bytes) across the warp. Rows mn .. mn_aligned and
// columns past the matrix are zeros, as layout_element has them; a ragged row end loads words or bytes.
template <class W>
__device__ void store_packed_block(const Chunk &c) {
  const DeviceJob &job = *c.job;
  const int groups = (job.tile_cols + kPackedBlockWords - 1) / kPackedBlockWords;  // tile_cols: ceil(cols / 4)
  const int local = static_cast<int>(c.linear_tile);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int row0 = (local / groups) * kPackedBlockRows<W> + (warp / 2) * 32 + lane;
  const int k0 = (local % groups) * kPackedBlockWords + 4 * (warp % 2);
  constexpr int kAlign = static_cast<int>(kDeepGemmMnAlignment);
  const int mn_aligned = (job.rows + kAlign - 1) / kAlign * kAlign;
  if (k0 >= job.tile_cols) return;
  constexpr int kScalesPerWord = static_cast<int>(kPackedScalesPerWord);
  const int cols_left = job.cols - kScalesPerWord * k0;
  uint32_t words[2][4];  // [row0, row0 + kThreads / 2][word k0 + k]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + h * (W::kThreads / 2);
#pragma unroll
    for (int k = 0; k < 4; ++k) words[h][k] = 0;
    if (row >= job.rows) continue;
    const uint8_t *p = job.src + static_cast<int64_t>(row) * job.src_row_stride + kScalesPerWord * k0;
    if (cols_left >= 4 * kScalesPerWord) {
      const uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
      words[h][0] = v.x, words[h][1] = v.y, words[h][2] = v.z, words[h][3] = v.w;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int valid = cols_left - 4 * k;  // 4-byte aligned: rows and 4 k0 are
        words[h][k] = valid >= 4 ? __ldg(reinterpret_cast<const uint32_t *>(p + 4 * k))
                                 : valid > 0 ? load_word_bytes(p + 4 * k, valid) : 0u;
      }
    }
    if (job.layout_bits & kZeroAsOne) {
#pragma unroll
      for (int k = 0; k < 4; ++k) words[h][k] = zero_bytes_as_one(words[h][k], valid_bytes_mask(cols_left - 4 * k));
    }
  }
  // The bytes written may stop short of the layout (a strided destination's last expert): whole words.
  const int64_t words_written = job.dst_row_stride / 4;
  uint32_t *const out = reinterpret_cast<uint32_t *>(job.dst);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + h * (W::kThreads / 2);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t w = static_cast<int64_t>(k0 + k) * mn_aligned + row;
      if (row < mn_aligned && k0 + k < job.tile_cols && w < words_written) out[w] = words[h][k];
    }
  }
}

// A layout job's chunk: thread t writes output words t, t + kThreads, ... of the chunk's run, so the
// warp's stores are contiguous. Each word is gathered through the layout's inverse index: for layouts
// whose words are 4 columns of one row (layout_packs_row_words) one lookup and, from a row-major source
// with aligned rows, one 32-bit load per word; otherwise byte by byte. kPadded: the job pads S
// (DeviceJob::padded), a separate body so that the common one keeps its registers.
template <class W, bool kPadded>
__device__ void store_layout_chunk(const Chunk &c) {
  const DeviceJob job = *c.job;
  const int32_t bits = job.layout_bits;
  const int32_t layout = bits & 0xFF;
  const bool read_transposed = bits & kReadTransposed, zero_as_one = bits & kZeroAsOne;
  const int64_t rows = job.rows, cols = job.cols;  // of the matrix laid out: S, S^T, or S padded
  const Padding pad = kPadded ? Padding{job.padded.rows, job.padded.cols, (bits & kPadHalves) != 0,
                                        static_cast<uint8_t>(static_cast<uint32_t>(bits) >> kPadScaleShift)}
                              : Padding{};
  const int64_t s_rows = pad.rows ? pad.rows : read_transposed ? cols : rows;
  const int64_t s_cols = pad.rows ? pad.cols : read_transposed ? rows : cols;
  ScaleSource source{job.swizzled, (bits & kSourceTransposed) != 0,
                     ByteMatrix{const_cast<uint8_t *>(job.src), s_rows, s_cols, job.src_row_stride, job.src_col_stride},
                     s_rows, s_cols};
  source.layout = (bits >> 8) & 0xFF;
  const int64_t bytes = job.dst_row_stride;
  const bool row_words = layout_packs_row_words(layout) && !read_transposed;
  const bool word_loads = row_words && !job.swizzled && job.src_col_stride == 1 &&
                          (reinterpret_cast<uintptr_t>(job.src) & 3) == 0 && (job.src_row_stride & 3) == 0;
  const bool word_stores = (reinterpret_cast<uintptr_t>(job.dst) & 3) == 0;
  const int64_t first = c.linear_tile * kLayoutWordsPerChunk<W>;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const int64_t w = first + threadIdx.x + v * W::kThreads;
    if (4 * w >= bytes) break;
    uint32_t word = 0;
    if (row_words) {
      int64_t r, c0;
      if (layout_element(layout, rows, cols, 4 * w, &r, &c0)) {
        const int valid = c0 + 4 <= cols ? 4 : static_cast<int>(cols - c0);
        const int64_t from = pad.rows ? padded_source_row<int64_t>(pad.rows, rows, pad.halves, r) : r;
        if (word_loads && valid == 4 && from != kPaddingRow<int64_t> && c0 + 4 <= s_cols) {  // 4 scales of S
          word = __ldg(reinterpret_cast<const uint32_t *>(job.src + from * job.src_row_stride + c0));
          if (zero_as_one)
            for (int b = 0; b < 4; ++b)
              if (((word >> (8 * b)) & 0xFF) == 0) word |= 1u << (8 * b);
        } else {
          for (int b = 0; b < valid; ++b)
            word |= static_cast<uint32_t>(layout_job_scale(source, pad, rows, r, c0 + b, zero_as_one)) << (8 * b);
        }
      }
    } else if (layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32) {  // a word is one scale's float32
      int64_t r, cc;
      if (layout_element(layout, rows, cols, 4 * w, &r, &cc)) {
        const uint8_t value = read_transposed ? layout_job_scale(source, pad, rows, cc, r, zero_as_one)
                                              : layout_job_scale(source, pad, rows, r, cc, zero_as_one);
        word = static_cast<uint32_t>(value) << kFloat32ExponentShift;
      }
    } else {
      for (int b = 0; b < 4 && 4 * w + b < bytes; ++b) {
        int64_t r, cc;
        if (!layout_element(layout, rows, cols, 4 * w + b, &r, &cc)) continue;
        const uint8_t value = read_transposed ? layout_job_scale(source, pad, rows, cc, r, zero_as_one)
                                              : layout_job_scale(source, pad, rows, r, cc, zero_as_one);
        word |= static_cast<uint32_t>(layout_encode(layout, value, 4 * w + b)) << (8 * b);
      }
    }
    uint8_t *out = job.dst + 4 * w;
    if (word_stores && 4 * w + 4 <= bytes) {
      *reinterpret_cast<uint32_t *>(out) = word;
    } else {
      for (int b = 0; b < 4 && 4 * w + b < bytes; ++b) out[b] = static_cast<uint8_t>(word >> (8 * b));
    }
  }
}

// A gather job's chunk (a window of a swizzled matrix whose origin is inside a tile): its tile row's
// scales, chunk columns first_tile * 4 on, each word gathered byte by byte (gather_word).
template <class W>
__device__ void store_gather_chunk(const Chunk &c) {
  const DeviceJob job = *c.job;
  constexpr int kWords = kTileRows * W::kTilesPerChunk;  // one word (4 scales) per tile and tile row
  for (int i = threadIdx.x; i < kWords; i += W::kThreads) {
    const int j = i % W::kTilesPerChunk;
    const int64_t r = static_cast<int64_t>(c.tile_row) * kTileRows + i / W::kTilesPerChunk;
    const int64_t cj = static_cast<int64_t>(c.first_tile + j) * kTileCols;
    if (j >= c.tiles || r >= job.rows || cj >= job.cols) continue;
    const int valid = static_cast<int>(cj + kTileCols <= job.cols ? kTileCols : job.cols - cj);
    const uint32_t w = gather_word(job, r, cj, valid);
    uint8_t *o = job.dst + r * job.dst_row_stride + cj * job.dst_col_stride;
    if (job.word_stores && valid == 4) {
      *reinterpret_cast<uint32_t *>(o) = w;
    } else {
      for (int b = 0; b < valid; ++b) o[b * job.dst_col_stride] = static_cast<uint8_t>(w >> (8 * b));
    }
  }
}

// kPaths: which kinds of job a launch holds beyond the plain export ones, so each launch compiles only
// the store paths it can take. Under the 64-register cap every path compiled in costs spill (ptxas, sm_90,
// nvcc 13.0, bytes of spill stores / loads a thread): plain exports 16/16; with the swizzle path (imports
// into the 128x4 layout) 60/96; with the layout and window-gather paths as well 452/1252. Without
// staging (kUnstaged): swizzles 0/0, swizzles and layouts 312/980, packed blocks alone (kPackedOnly) 0/0
// at 40 registers.
constexpr int kPlainPaths = 0;
constexpr int kSwizzlePath = 1;        // Swizzle and SwizzledCopy jobs: the 128x4 layout written
constexpr int kLayoutGatherPaths = 2;  // engine layout jobs and windows starting inside a tile
// Added to kSwizzlePath (with or without kLayoutGatherPaths): no job of the launch stages chunks in shared
// memory (none is an unswizzle other than a gather), so the loop has neither shared memory nor barriers,
// and no register set is held across a store for the next chunk's loads (load_chunk loads nothing for
// these jobs): the swizzle and layout stores keep those registers (produce_compact_kernel).
constexpr int kUnstaged = 8;
// With kUnstaged alone: a launch of DeepGEMM packed blocks only (kPackedBlocks jobs), the store with
// nothing else compiled in (no spill; with the other layout paths beside it the kernel spills).
constexpr int kPackedOnly = 16;
template <class W, int kPaths>
__device__ void store_chunk(const Chunk &c, const uint32_t *tiles) {
  if constexpr ((kPaths & kPackedOnly) != 0) return store_packed_block<W>(c);
  if constexpr ((kPaths & kLayoutGatherPaths) != 0) {
    if (c.job->kind == JobKind::Layout) {
      if (c.job->padded.rows) return store_layout_chunk<W, true>(c);
      return c.job->layout_bits & kPackedBlocks ? store_packed_block<W>(c) : store_layout_chunk<W, false>(c);
    }
    if (c.job->gather) return store_gather_chunk<W>(c);
  }
  if constexpr ((kPaths & kSwizzlePath) != 0) {
    if (c.job->kind == JobKind::Swizzle || c.job->kind == JobKind::SwizzledCopy) return store_swizzled_chunk<W, (kPaths & kUnstaged) != 0>(c);
  }
  if (c.job->tiles.direct) return store_direct_chunk<W>(c, tiles);
  // A register copy: through the pointer, every global store below could alias the job's fields.
  const DeviceJob job = *c.job;
  constexpr int kQuads = W::kTilesPerChunk / 4;
  const bool vector_rows = job.word_stores && (reinterpret_cast<uintptr_t>(job.dst) & 15) == 0 &&
                           (job.dst_row_stride & 15) == 0 &&
                           (job.swizzled || ((reinterpret_cast<uintptr_t>(job.src) & 15) == 0 && (job.src_row_stride & 15) == 0));
  for (int i = threadIdx.x; i < kTileRows * kQuads; i += W::kThreads) {
    const int q = i % kQuads;
    const int r_in_tile = i / kQuads;
    const int64_t r = static_cast<int64_t>(c.tile_row) * kTileRows + r_in_tile;
    const int first = 4 * q;  // first tile of this quad, relative to the chunk
    if (first >= c.tiles || r >= job.rows) continue;
    const int64_t col = static_cast<int64_t>(c.first_tile + first) * kTileCols;
    uint8_t *out = job.dst + r * job.dst_row_stride + col * job.dst_col_stride;
    if (vector_rows && first + 4 <= c.tiles && col + 4 * kTileCols <= job.cols) {
      *reinterpret_cast<uint4 *>(out) =
          job.swizzled ? make_uint4(swizzled_word<W>(tiles, first, r_in_tile), swizzled_word<W>(tiles, first + 1, r_in_tile),
                                    swizzled_word<W>(tiles, first + 2, r_in_tile), swizzled_word<W>(tiles, first + 3, r_in_tile))
                       : __ldg(reinterpret_cast<const uint4 *>(job.src + r * job.src_row_stride + col));
      continue;
    }
    for (int j = first; j < first + 4 && j < c.tiles; ++j) {
      const int64_t cj = static_cast<int64_t>(c.first_tile + j) * kTileCols;
      if (cj >= job.cols) break;
      const int valid = static_cast<int>(cj + kTileCols <= job.cols ? kTileCols : job.cols - cj);
      uint32_t w;
      if (job.swizzled) {
        w = swizzled_word<W>(tiles, j, r_in_tile);
      } else {
        const uint8_t *p = job.src + r * job.src_row_stride + cj;
        w = (valid == 4 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) ? __ldg(reinterpret_cast<const uint32_t *>(p))
                                                                      : load_word_bytes(p, valid);
      }
      uint8_t *o = job.dst + r * job.dst_row_stride + cj * job.dst_col_stride;
      if (job.word_stores && valid == 4) {
        *reinterpret_cast<uint32_t *>(o) = w;
      } else {
        for (int b = 0; b < valid; ++b) o[b * job.dst_col_stride] = static_cast<uint8_t>(w >> (8 * b));
      }
    }
  }
}

// A persistent grid: block b produces chunks b, b + gridDim.x, ... of the whole batch. The loads of
// the next chunk are issued before the current one is stored, so every block keeps reads in flight
// while it writes.
template <class W, int kCapacity, int kPaths>
__global__ void __launch_bounds__(W::kThreads, W::kMinBlocksPerSm) produce_compact_kernel(const __grid_constant__ JobBatch<kCapacity> batch,
                                                                   int32_t total_chunks) {
  int32_t chunk = static_cast<int32_t>(blockIdx.x);
  if (chunk >= total_chunks) return;
  int job_index = 0;
  Chunk current = locate<W>(batch, chunk, job_index);
  if constexpr ((kPaths & kUnstaged) != 0) {
    while (true) {
      store_chunk<W, kPaths>(current, nullptr);  // no tiles: no chunk of the launch reads shared memory
      chunk += static_cast<int32_t>(gridDim.x);
      if (chunk >= total_chunks) return;
      current = locate<W>(batch, chunk, job_index);
    }
  } else {
    __shared__ __align__(16) uint32_t tiles[W::kSmemWords];
    uint4 regs[W::kVectorsPerThread];
    load_chunk<W>(current, regs);
    while (true) {
      stage_chunk<W>(current, regs, tiles);
      __syncthreads();
      const int32_t next = chunk + static_cast<int32_t>(gridDim.x);
      const bool has_next = next < total_chunks;
      if (has_next) load_chunk<W>(locate<W>(batch, next, job_index), regs);
      store_chunk<W, kPaths>(current, tiles);
      __syncthreads();
      if (!has_next) break;
      chunk = next;
      current = locate<W>(batch, chunk, job_index);  // recomputed rather than kept live across the store
    }
  }
}

// The inverse, mxfp8_swizzle_scales: a transpose of 4 x 4 words in registers, no shared memory. One
// thread takes quad q (tiles 4q .. 4q + 3) of a tile row and line l of each of its tiles: it reads the
// 16 bytes of columns 16q .. 16q + 15 from each of rows l, l + 32, l + 64 and l + 96 (one vector a row)
// and writes line l of the four tiles, each the words of those four rows for one tile. A warp is 8
// quads x 4 consecutive lines, so a load instruction reads 4 rows x 128 contiguous bytes and a store
// writes 8 runs of 64 bytes. Quads are numbered across tile rows (p = tile row * quads + q) so a
// narrow matrix does not leave lanes idle at every tile row's end. Rows and columns past the matrix
// are the layout's zero padding; unaligned or strided rows fall back to words or bytes.
// (A chunk through shared memory, as the unswizzle does, waited out a barrier per chunk: 0.60-0.79 of
// a copy at large sizes on the H100/H200, bench/LOG.md.)
constexpr int kSwizzleThreads = 256;
constexpr int kSwizzleQuadsPerWarp = 8, kSwizzleLinesPerWarp = 4;

__device__ uint32_t compact_word(const ByteMatrix &src, int64_t r, int64_t c, bool word_loads) {
  const int64_t valid = src.cols - c < kTileCols ? src.cols - c : kTileCols;
  if (valid <= 0) return 0;
  const uint8_t *p = src.data + r * src.row_stride + c * src.col_stride;
  if (word_loads && valid == kTileCols) return __ldg(reinterpret_cast<const uint32_t *>(p));
  uint32_t w = 0;
  for (int b = 0; b < valid; ++b) w |= static_cast<uint32_t>(p[b * src.col_stride]) << (8 * b);
  return w;
}

// Threads map to (quad, line) by their index in the grid, whatever the block size: kThreads is 256, or a
// warp for a tiny launch (swizzle()).
template <int kThreads>
__global__ void __launch_bounds__(kThreads) swizzle_kernel(ByteMatrix src, uint8_t *swizzled, int32_t tile_cols,
                                                           int32_t quads_per_row, int64_t quads) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t warp = thread / 32;
  const int lane = static_cast<int>(thread % 32);
  constexpr int kLineGroups = static_cast<int>(kSubtileRows) / kSwizzleLinesPerWarp;  // 8 warps a quad group
  const int64_t p = (warp / kLineGroups) * kSwizzleQuadsPerWarp + lane / kSwizzleLinesPerWarp;
  const int line = static_cast<int>(warp % kLineGroups) * kSwizzleLinesPerWarp + lane % kSwizzleLinesPerWarp;
  if (p >= quads) return;
  const int64_t tile_row = p / quads_per_row;
  const int q = static_cast<int>(p % quads_per_row);
  const int64_t col = static_cast<int64_t>(q) * 4 * kTileCols;
  const bool word_loads = src.col_stride == 1 && ((reinterpret_cast<uintptr_t>(src.data) | src.row_stride) & 3) == 0;
  const bool vector_loads = src.col_stride == 1 && ((reinterpret_cast<uintptr_t>(src.data) | src.row_stride) & 15) == 0 &&
                            col + 4 * kTileCols <= src.cols;
  uint32_t words[4][4];  // [sub-tile s: row line + 32 s][tile 4q + t]
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const int64_t r = tile_row * kTileRows + s * kSubtileRows + line;
    if (r >= src.rows) {
      for (int t = 0; t < 4; ++t) words[s][t] = 0;
    } else if (vector_loads) {
      const uint4 v = __ldg(reinterpret_cast<const uint4 *>(src.data + r * src.row_stride + col));
      words[s][0] = v.x, words[s][1] = v.y, words[s][2] = v.z, words[s][3] = v.w;
    } else {
      for (int t = 0; t < 4; ++t) words[s][t] = compact_word(src, r, col + t * kTileCols, word_loads);
    }
  }
  uint8_t *const line0 = swizzled + (tile_row * tile_cols + 4 * q) * kTileBytes + line * kLineBytes;
  const bool vector_stores = (reinterpret_cast<uintptr_t>(swizzled) & 15) == 0;
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    if (4 * q + t >= tile_cols) break;
    uint8_t *out = line0 + t * kTileBytes;
    if (vector_stores) {
      *reinterpret_cast<uint4 *>(out) = make_uint4(words[0][t], words[1][t], words[2][t], words[3][t]);
    } else {
      for (int b = 0; b < 16; ++b) out[b] = static_cast<uint8_t>(words[b / 4][t] >> (8 * (b % 4)));
    }
  }
}

int32_t checked_int32(int64_t v, const char *what) {
  if (v > INT32_MAX) fail(MXFP8_ERROR_UNSUPPORTED, what, " ", v, " is beyond what one kernel launch covers (2^31 - 1)");
  return static_cast<int32_t>(v);
}

// The unswizzle of a launch of aligned unswizzles alone (not direct, not a gather: the common export), in
// registers: block b moves chunk b and exits, the grid of swizzle_kernel, whose mirror it is. Against the
// persistent grid that came before (4 blocks an SM under a 64-register cap, two register sets so the next
// chunk's loads were in flight during the stores; narrow launches only, wide ones through shared memory)
// it ties on the model's weights (4-29 MB of scales moved) and wins on larger matrices: 262144 x 896 scales
// 0.856 -> 0.96 of a copy, the whole model 1.543 -> 1.476 ms against a 1.410 ms copy, H100, bench/LOG.md
// 2026-12-07 (fourteenth session). Not profiled yet: the likely cause is the block scheduler refilling an
// SM as blocks finish, with no 64-register cap limiting how many chunks' loads are in flight.
template <class W, int kCapacity>
__global__ void __launch_bounds__(W::kThreads) unswizzle_chunk_kernel(const __grid_constant__ JobBatch<kCapacity> batch) {
  int job_index = 0;
  const Chunk c = locate<W>(batch, static_cast<int32_t>(blockIdx.x), job_index);
  uint4 regs[W::kVectorsPerThread];
  load_transposed_chunk<W>(c, regs);
  store_transposed_chunk<W>(c, regs);
}

template <class W, int kCapacity, int kPaths>
void launch_kernel(const JobBatch<kCapacity> &batch, int64_t chunks, cudaStream_t stream) {
  constexpr auto kernel = produce_compact_kernel<W, kCapacity, kPaths>;
  const int64_t grid = std::min<int64_t>(chunks, resident_blocks<kernel>(W::kThreads));
  kernel<<<static_cast<unsigned>(grid), W::kThreads, 0, stream>>>(batch, static_cast<int32_t>(chunks));
  check(cudaGetLastError(), "launching the scale unswizzle kernel");
}

// MXFP8_UNSWIZZLE_PATH, read once: how a launch of aligned unswizzles alone moves its chunks. Unset or
// "registers": in registers, one chunk a block (unswizzle_chunk_kernel); "smem": through shared memory in
// the persistent loop every other launch takes, to time one against the other in one build
// (bench/device/ab.sh PATHS=...).
enum class UnswizzlePath { Registers, Smem };
UnswizzlePath unswizzle_path() {
  static const UnswizzlePath value = [] {
    const char *text = std::getenv("MXFP8_UNSWIZZLE_PATH");
    if (!text || !*text || std::strcmp(text, "registers") == 0) return UnswizzlePath::Registers;
    if (std::strcmp(text, "smem") == 0) return UnswizzlePath::Smem;
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "MXFP8_UNSWIZZLE_PATH is \"", text, "\", expected registers or smem (or unset)");
  }();
  return value;
}

template <class W, int kCapacity>
void launch_batch(const JobBatch<kCapacity> &batch, int64_t chunks, cudaStream_t stream) {
  if (chunks == 0) return;
  int paths = kPlainPaths;
  bool in_registers = true, staged = false, packed_only = true;
  for (int i = 0; i < batch.count; ++i) {
    const DeviceJob &j = batch.jobs[i];
    staged = staged || (j.kind == JobKind::Unswizzle && !j.gather);
    packed_only = packed_only && j.kind == JobKind::Layout && j.padded.rows == 0 && (j.layout_bits & kPackedBlocks) != 0;
    if (j.kind == JobKind::Layout || j.gather != 0) paths |= kLayoutGatherPaths;
    else if (j.kind == JobKind::Swizzle || j.kind == JobKind::SwizzledCopy) paths |= kSwizzlePath;
    in_registers = in_registers && j.kind == JobKind::Unswizzle && !j.gather && !j.tiles.direct &&
                   (reinterpret_cast<uintptr_t>(j.swizzled) & 15) == 0;
  }
  const UnswizzlePath path = unswizzle_path();  // read (and a bad value refused) by every launch
  if (in_registers && path == UnswizzlePath::Registers) {
    unswizzle_chunk_kernel<W, kCapacity><<<static_cast<unsigned>(checked_int32(chunks, "chunks in one launch")),
                                           W::kThreads, 0, stream>>>(batch);
    return check(cudaGetLastError(), "launching the scale unswizzle kernel");
  }
  if (packed_only) launch_kernel<W, kCapacity, kPackedOnly | kUnstaged>(batch, chunks, stream);
  else if ((paths & kLayoutGatherPaths) && !staged)
    launch_kernel<W, kCapacity, kSwizzlePath | kLayoutGatherPaths | kUnstaged>(batch, chunks, stream);
  else if (paths & kLayoutGatherPaths) launch_kernel<W, kCapacity, kSwizzlePath | kLayoutGatherPaths>(batch, chunks, stream);
  else if ((paths & kSwizzlePath) && !staged) launch_kernel<W, kCapacity, kSwizzlePath | kUnstaged>(batch, chunks, stream);
  else if (paths & kSwizzlePath) launch_kernel<W, kCapacity, kSwizzlePath>(batch, chunks, stream);
  else launch_kernel<W, kCapacity, kPlainPaths>(batch, chunks, stream);
}

// The bytes a layout job writes: the layout, or the prefix of it its destination describes.
int64_t layout_job_bytes(const ScaleJob &job) {
  const int64_t size = layout_size(job.layout, job.dst.rows, job.dst.cols);
  return job.layout_bytes >= 0 && job.layout_bytes < size ? job.layout_bytes : size;
}

// A layout job into the whole 128x4 layout from a row-major S, neither transposed nor padded: exactly a
// swizzle job's output, byte 0 written as 1 when zero_as_one (which is what made it a layout job,
// scale_job). It runs as a swizzle job with kZeroAsOne in its layout_bits, whose chunks move tiles (in
// registers from aligned rows, store_swizzled_quads) rather than gathering each word from 32 rows
// through the layout's inverse index.
bool runs_as_swizzle(const ScaleJob &job) {
  return job.kind == JobKind::Layout && job.layout == MXFP8_SCALE_LAYOUT_128X4 && !job.swizzled && !job.read_transposed &&
         job.pad.rows == 0 && layout_job_bytes(job) == layout_size(job.layout, job.dst.rows, job.dst.cols);
}

// A DeepGEMM packed layout job that store_packed_block takes: from a row-major S whose rows start 16-byte
// aligned, neither transposed nor padded, into a 4-byte aligned destination of whole words (rows well
// inside 32 bits: the block's row indices are ints).
bool packed_blocks(const ScaleJob &job) {
  return job.kind == JobKind::Layout && job.layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED && !job.swizzled &&
         !job.read_transposed && job.pad.rows == 0 && job.src.col_stride == 1 &&
         ((reinterpret_cast<uintptr_t>(job.src.data) | static_cast<uintptr_t>(job.src.row_stride)) & 15) == 0 &&
         (reinterpret_cast<uintptr_t>(job.dst.data) & 3) == 0 && layout_job_bytes(job) % 4 == 0 &&
         job.dst.rows < (int64_t{1} << 30);
}

// The kind the kernel runs a job as.
JobKind device_kind(const ScaleJob &job) { return runs_as_swizzle(job) ? JobKind::Swizzle : job.kind; }

// A swizzle job whose chunks store_swizzled_quads moves (in a kUnstaged launch): the same test as the
// kernel's (store_swizzled_chunk).
bool swizzles_in_quads(const ScaleJob &job) {
  return device_kind(job) == JobKind::Swizzle && !job.swizzled && job.src.col_stride == 1 &&
         ((reinterpret_cast<uintptr_t>(job.src.data) | static_cast<uintptr_t>(job.src.row_stride) |
           reinterpret_cast<uintptr_t>(job.dst.data)) & 15) == 0;
}

// Narrow swizzled matrices (rows shorter than half a chunk) take direct chunks: whole tile rows, as many as
// fit, so a chunk stays mostly full however few scales a row holds (an MoE down projection has 24: 5 tile
// rows of 6 tiles, 30 of 32), and its output is one run of rows.
// A window of a larger matrix keeps to tile rows (its tiles are not consecutive in storage).
// Swizzle jobs take them too (store_swizzled_quads) when their rows move in registers, which only the
// launches without staging compile (kUnstaged): `unstaged`, no job of the run stages a chunk.
bool is_direct(const ScaleJob &job, int tiles_per_chunk, bool unstaged) {
  if (2 * ceil_div(job.dst.cols, kTileCols) > tiles_per_chunk) return false;
  if (device_kind(job) == JobKind::Swizzle) return unstaged && swizzles_in_quads(job);
  return job.kind == JobKind::Unswizzle && job.swizzled_row0 == 0 && job.swizzled_col0 == 0 &&
         (job.swizzled_tile_stride == 0 || job.swizzled_tile_stride == ceil_div(job.dst.cols, kTileCols));
}

// Whether a chunk of `job` is staged in shared memory: an unswizzle's, unless its window starts inside a
// tile (a gather reads global memory byte by byte).
bool stages_chunks(const ScaleJob &job) {
  return job.kind == JobKind::Unswizzle && !(job.swizzled && (job.swizzled_row0 != 0 || job.swizzled_col0 != 0));
}

template <class W>
int64_t chunks_of(const ScaleJob &job, bool unstaged) {
  constexpr int tiles_per_chunk = W::kTilesPerChunk;
  if (device_kind(job) == JobKind::Layout) {
    if (packed_blocks(job))
      return ceil_div(round_up(job.dst.rows, kDeepGemmMnAlignment), int64_t{kPackedBlockRows<W>}) *
             ceil_div(ceil_div(job.dst.cols, kPackedScalesPerWord), int64_t{kPackedBlockWords});
    return ceil_div(ceil_div(layout_job_bytes(job), 4), kLayoutWordsPerChunk<W>);
  }
  const int64_t tile_rows = ceil_div(job.dst.rows, kTileRows), tile_cols = ceil_div(job.dst.cols, kTileCols);
  if (is_direct(job, tiles_per_chunk, unstaged))
    return ceil_div(tile_rows, int64_t{direct_tile_rows_per_chunk(tiles_per_chunk, static_cast<int>(tile_cols))});
  return tile_rows * ceil_div(tile_cols, tiles_per_chunk);
}

// Fills `batch` from jobs[begin..] until it is full; returns the number of blocks it needs.
template <class W, int kCapacity>
int64_t fill_batch(JobBatch<kCapacity> &batch, const ScaleJob *jobs, size_t count, size_t &next, bool unstaged) {
  batch.count = 0;
  int64_t blocks = 0;
  while (next < count && batch.count < kCapacity) {
    const ScaleJob &in = jobs[next++];
    if (in.dst.rows == 0 || in.dst.cols == 0) continue;
    DeviceJob &j = batch.jobs[batch.count];
    j.swizzled = in.swizzled;
    j.src = in.src.data;
    j.dst = in.dst.data;
    j.src_row_stride = in.src.row_stride;
    if (in.kind == JobKind::PermuteRows) fail(MXFP8_ERROR_INTERNAL, "a row permutation reached the scale kernel");
    j.kind = device_kind(in);
    const bool layout = j.kind == JobKind::Layout;
    j.dst_row_stride = layout ? layout_job_bytes(in) : in.dst.row_stride;
    j.dst_col_stride = in.dst.col_stride;
    j.src_col_stride = in.src.col_stride;
    j.layout_bits = layout ? layout_job_bits(in) | (packed_blocks(in) ? kPackedBlocks : 0) : in.zero_as_one ? kZeroAsOne : 0;
    j.rows = checked_int32(in.dst.rows, "scale rows");
    j.cols = checked_int32(in.dst.cols, "scale columns");
    j.tile_cols = static_cast<int32_t>(ceil_div(j.cols, kTileCols));
    j.chunks_per_row = static_cast<int32_t>(ceil_div(j.tile_cols, W::kTilesPerChunk));
    j.first_block = checked_int32(blocks, "blocks in one launch");
    j.word_stores = in.dst.col_stride == 1 && (reinterpret_cast<uintptr_t>(in.dst.data) & 3) == 0 &&
                    (in.dst.row_stride & 3) == 0;
    if (layout) {
      j.padded = PaddedFrom{checked_int32(in.pad.rows, "padded scale rows"), checked_int32(in.pad.cols, "padded scale columns")};
    } else {
      j.tiles = TileShape{is_direct(in, W::kTilesPerChunk, unstaged), static_cast<int32_t>(ceil_div(j.rows, kTileRows))};
    }
    // Swizzle jobs write (and copy) whole tiles of their own matrix; only Unswizzle jobs read windows.
    if (in.kind != JobKind::Unswizzle && (in.swizzled_row0 || in.swizzled_col0 || (in.swizzled_tile_stride && in.swizzled_tile_stride != j.tile_cols)))
      fail(MXFP8_ERROR_INTERNAL, "a job other than an unswizzle reading a window of a swizzled matrix");
    j.src_tile_stride = in.swizzled_tile_stride ? checked_int32(in.swizzled_tile_stride, "scale tile columns") : j.tile_cols;
    j.window_row0 = static_cast<int16_t>(in.swizzled_row0);
    j.window_col0 = static_cast<int8_t>(in.swizzled_col0);
    j.gather = in.swizzled && (in.swizzled_row0 != 0 || in.swizzled_col0 != 0);
    blocks += chunks_of<W>(in, unstaged);
    checked_int32(blocks, "blocks in one launch");
    ++batch.count;
  }
  return blocks;
}

// The batch is the kernel's parameter, copied whole into every launch: a full one (~31 KiB) costs ~9 us
// of host time more than a one-job one on an H100's host (bench/host_transfer --cuda's ancestor, 2026-12-06: a batched
// export of 1 tensor 3.0 us, of 2 tensors 12.2 us). So a launch takes the smallest of three sizes its jobs
// fit: one job, up to kSmallBatch, or kMaxJobsPerLaunch (more jobs: several launches).
constexpr int kSmallBatch = 16;

// Fills the next batch of `jobs` in W's chunks and hands it to `launch(batch, chunks)`.
template <class W, int kCapacity, class Launch>
void launch_next(const ScaleJob *jobs, size_t count, size_t &next, bool unstaged, const Launch &launch) {
  if constexpr (kCapacity == kMaxJobsPerLaunch) {
    auto batch = std::make_unique<JobBatch<kCapacity>>();  // heap, not stack: ~31 KiB
    launch(*batch, fill_batch<W>(*batch, jobs, count, next, unstaged));
  } else {
    JobBatch<kCapacity> batch;
    launch(batch, fill_batch<W>(batch, jobs, count, next, unstaged));
  }
}

// Whether a run is a few aligned unswizzles that the in-register kernel takes in Tiny chunks: each an
// unswizzle that launch_batch would move in registers (no gather, tiles not direct at Tiny's width, a
// 16-byte aligned source), at most kTinyLaunchMaxTiles tiles in all, MXFP8_UNSWIZZLE_PATH not smem.
bool tiny_unswizzles(const ScaleJob *jobs, size_t count, bool unstaged) {
  int64_t tiles = 0;
  for (size_t i = 0; i < count; ++i) {
    const ScaleJob &j = jobs[i];
    if (j.kind != JobKind::Unswizzle || !j.swizzled || !stages_chunks(j) /* a gather */ ||
        is_direct(j, Tiny::kTilesPerChunk, unstaged) || (reinterpret_cast<uintptr_t>(j.swizzled) & 15) != 0)
      return false;
    tiles += ceil_div(j.dst.rows, kTileRows) * ceil_div(j.dst.cols, kTileCols);
    if (tiles > kTinyLaunchMaxTiles) return false;
  }
  return unswizzle_path() == UnswizzlePath::Registers;
}

template <int kCapacity>
void launch_tiny_unswizzles(const JobBatch<kCapacity> &batch, int64_t chunks, cudaStream_t stream) {
  if (chunks == 0) return;
  unswizzle_chunk_kernel<Tiny, kCapacity><<<static_cast<unsigned>(chunks), Tiny::kThreads, 0, stream>>>(batch);
  check(cudaGetLastError(), "launching the scale unswizzle kernel");
}

// Every job of the run in W's chunks, one `launch(batch, chunks)` per batch of the smallest size that fits.
template <class W, class Launch>
void run_jobs_with(const ScaleJob *jobs, size_t count, bool unstaged, const Launch &launch) {
  size_t next = 0;
  while (next < count) {
    const size_t left = count - next;
    if (left == 1) launch_next<W, 1>(jobs, count, next, unstaged, launch);
    else if (left <= kSmallBatch) launch_next<W, kSmallBatch>(jobs, count, next, unstaged, launch);
    else launch_next<W, kMaxJobsPerLaunch>(jobs, count, next, unstaged, launch);
  }
}

// Wide chunks once the batch holds at least kWideChunksPerBlock of them per resident block.
bool wide_chunks_pay(const ScaleJob *jobs, size_t count, bool unstaged) {
  int64_t chunks = 0;
  for (size_t i = 0; i < count; ++i)
    if (jobs[i].dst.rows > 0 && jobs[i].dst.cols > 0) chunks += chunks_of<Wide>(jobs[i], unstaged);
  return chunks >= int64_t{kWideChunksPerBlock} *
                       resident_blocks<produce_compact_kernel<Wide, kMaxJobsPerLaunch, kPlainPaths>>(Wide::kThreads);
}

// Large contiguous copies (the values of a bucket or an import, and scales that need no layout change)
// leave the scale kernel, whose row segments reach 0.70-0.85 of copy speed (H200): on sm_90 and later
// all of them go to one bulk-copy launch (bulk_copy_cuda.cu), with the large windows of rows of at least
// kBulkWindowMinRowBytes (a K shard's values); elsewhere (or with MXFP8_BULK_COPY=0, or unaligned) each
// contiguous one to a cudaMemcpyAsync, which costs a host call per part, and windows stay in the kernel.
// MXFP8_COPY_ENGINE_MIN_BYTES, read once: the smallest part copied that way (0: never, every byte in the
// one kernel launch). Unset: 64 KiB where the bulk copy takes them (its launch costs the same for one part
// or a thousand: a refit's 3 MiB NVFP4 values and 200-800 KiB scale tiles ran at 0.6-0.7 of copy speed
// in the scale kernel, H200 2026-12-06), 4 MiB for cudaMemcpyAsync (a host call each).
constexpr int64_t kDefaultCopyEngineMinBytes = int64_t{4} << 20;
constexpr int64_t kDefaultBulkCopyMinBytes = int64_t{64} << 10;

int64_t copy_engine_min_bytes(bool bulk) {
  static const int64_t value = [] {
    const char *text = std::getenv("MXFP8_COPY_ENGINE_MIN_BYTES");
    if (!text || !*text) return int64_t{-1};
    char *end = nullptr;
    errno = 0;
    const long long v = std::strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0' || v < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "MXFP8_COPY_ENGINE_MIN_BYTES is \"", text, "\", expected a byte count");
    return static_cast<int64_t>(v);
  }();
  return value >= 0 ? value : bulk ? kDefaultBulkCopyMinBytes : kDefaultCopyEngineMinBytes;
}

// A job that copies one contiguous run of bytes (rows of a flat copy, both sides dense).
bool is_flat_copy(const ScaleJob &j) {
  return j.kind == JobKind::Copy && j.src.col_stride == 1 && j.dst.col_stride == 1 &&
         j.src.row_stride == j.src.cols && j.dst.row_stride == j.dst.cols;
}

// The shortest rows of a window the bulk copy takes (one bulk load per row): a K shard's 1 KiB rows
// (TP-8 of K = 8192) and up; shorter ones stay in the scale kernel's row segments.
constexpr int64_t kBulkWindowMinRowBytes = 512;

// A job that copies whole rows of a row-major source (a window of its rows: a K shard's columns) to
// rows back to back: what a bucket or a shard's own buffer receives, and a CopySpan carries.
bool is_row_copy(const ScaleJob &j) {
  return j.kind == JobKind::Copy && j.src.col_stride == 1 && j.dst.col_stride == 1 &&
         (j.dst.row_stride == j.dst.cols || j.dst.rows == 1);
}

CopySpan span_of(const ScaleJob &j) {
  if (is_flat_copy(j)) return CopySpan{j.src.data, j.dst.data, j.dst.rows * j.dst.cols};
  return CopySpan{j.src.data, j.dst.data, j.dst.cols, j.dst.rows, j.src.row_stride};
}

}  // namespace

void run_jobs(const ScaleJob *jobs, size_t count, void *stream) {
  // The TRT-LLM layouts have a kernel of their own (permute_rows_cuda.cu): the values of all experts
  // (a row-permuted copy) and, in the same launch, their scales when read from row-major scales.
  std::vector<ScaleJob> not_permuted;
  if (run_row_permutations(jobs, count, stream, not_permuted)) {
    jobs = not_permuted.data();
    count = not_permuted.size();
  }
  auto s = static_cast<cudaStream_t>(stream);
  // The bulk copy's threshold is the smaller one: the device is asked whether the bulk copy runs (a
  // cudaGetDevice) only once some part reaches it, so a call of small jobs pays nothing for the route.
  // Windows of rows (a K shard's columns) go to the bulk copy too, whose loads are one per row; to
  // cudaMemcpyAsync only contiguous parts go (a window would be a cudaMemcpy2DAsync, a host call each).
  const int64_t bulk_min_bytes = copy_engine_min_bytes(true);
  std::vector<ScaleJob> rest;
  // What may leave the kernel: a part as large as the bulk copy's threshold that is contiguous, or a
  // window of rows long enough for the bulk copy's one load a row (a window of short rows never leaves,
  // so a call of them asks the device nothing).
  const auto may_leave = [&](const ScaleJob &j, const CopySpan &span) {
    return is_row_copy(j) && span.bytes() >= bulk_min_bytes &&
           (span.rows == 1 || span.row_bytes >= kBulkWindowMinRowBytes);
  };
  if (bulk_min_bytes > 0 &&
      std::any_of(jobs, jobs + count, [&](const ScaleJob &j) { return may_leave(j, span_of(j)); })) {
    const bool bulk = bulk_copy_available();
    const int64_t memcpy_min_bytes = copy_engine_min_bytes(false);  // never below bulk_min_bytes
    std::vector<CopySpan> spans;
    rest.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const ScaleJob &j = jobs[i];
      const CopySpan span = span_of(j);
      const bool leaves = may_leave(j, span);
      if (leaves && bulk && bulk_copy_fits(span)) spans.push_back(span);
      else if (leaves && span.rows == 1 && span.bytes() >= memcpy_min_bytes)  // unaligned, or no bulk copy
        check(cudaMemcpyAsync(span.dst, span.src, static_cast<size_t>(span.bytes()), cudaMemcpyDefault, s),
              "queueing a copy of values");
      else rest.push_back(j);  // small, a window the bulk copy cannot take, or not a copy of rows
    }
    bulk_copy(spans.data(), spans.size(), s);
    jobs = rest.data();
    count = rest.size();
  }
  if (count == 0) return;
  // No job of the run staged: every launch of it is kUnstaged, so swizzle jobs may take direct chunks.
  const bool unstaged = std::none_of(jobs, jobs + count, stages_chunks);
  if (tiny_unswizzles(jobs, count, unstaged))
    run_jobs_with<Tiny>(jobs, count, unstaged, [s](const auto &batch, int64_t chunks) { launch_tiny_unswizzles(batch, chunks, s); });
  else if (wide_chunks_pay(jobs, count, unstaged))
    run_jobs_with<Wide>(jobs, count, unstaged, [s](const auto &batch, int64_t chunks) { launch_batch<Wide>(batch, chunks, s); });
  else
    run_jobs_with<Narrow>(jobs, count, unstaged, [s](const auto &batch, int64_t chunks) { launch_batch<Narrow>(batch, chunks, s); });
}

void unswizzle(const uint8_t *swizzled, ByteMatrix dst, void *stream) {
  const ScaleJob job{JobKind::Unswizzle, swizzled, ByteMatrix{}, dst};
  run_jobs(&job, 1, stream);
}

void copy_matrix(ByteMatrix src, ByteMatrix dst, void *stream) {
  if (src.col_stride != 1) fail(MXFP8_ERROR_INTERNAL, "copy_matrix needs a source with col_stride 1");
  const ScaleJob job = copy_job(src, dst);
  run_jobs(&job, 1, stream);
}

void swizzle(ByteMatrix src, uint8_t *swizzled, void *stream) {
  const int64_t tile_rows = ceil_div(src.rows, kTileRows);
  const int32_t tile_cols = checked_int32(ceil_div(src.cols, kTileCols), "scale tile columns");
  const int32_t quads_per_row = static_cast<int32_t>(ceil_div(tile_cols, 4));
  const int64_t quads = tile_rows * quads_per_row;
  if (quads == 0) return;
  // Each quad group of kSwizzleQuadsPerWarp quads takes 8 warps (one per 4 lines): a block of 256 threads,
  // or, for at most kTinyLaunchMaxTiles tiles, 8 blocks of a warp (Tiny's reason).
  const int64_t groups = ceil_div(quads, kSwizzleQuadsPerWarp);
  checked_int32(groups, "blocks in one launch");
  const auto s = static_cast<cudaStream_t>(stream);
  if (tile_rows * tile_cols <= kTinyLaunchMaxTiles)
    swizzle_kernel<32><<<static_cast<unsigned>(groups * (kSwizzleThreads / 32)), 32, 0, s>>>(src, swizzled, tile_cols,
                                                                                            quads_per_row, quads);
  else
    swizzle_kernel<kSwizzleThreads><<<static_cast<unsigned>(groups), kSwizzleThreads, 0, s>>>(src, swizzled, tile_cols,
                                                                                            quads_per_row, quads);
  check(cudaGetLastError(), "launching the scale swizzle kernel");
}

}  // namespace mxfp8::cuda
