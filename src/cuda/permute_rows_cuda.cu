// CUDA kernel of the TRT-LLM layouts (target_layout.hpp): the values, a row-permuted copy job of all
// experts (scale_job.hpp), and in the same launch their scales, when a convert reads them from
// row-major compact scales (one layout job per expert, at a regular stride: one "scale run").
//
// A persistent grid whose warps take work items in turn (scale items first, then value tiles), each
// warp on its own: no shared memory, no block barrier. Row indices are 32-bit (checked on the host).
//  - A value tile is T whole destination rows of one expert (T a power of two up to 32, which divides
//    an expert's rows, as many as fit kLanes * kUnroll vectors; T = 1 and several passes for rows longer
//    than that), moved in 16-byte vectors (4 or 1 bytes when K or a pointer is not aligned for them).
//    Lane l moves vectors l, l + 32, ... of the tile, all kUnroll loads issued before the stores; warp
//    loads and stores are contiguous whatever the permutation. A tile's rows are contiguous in the
//    destination, so vector i of a tile goes to tile + i; its row in the tile is a multiply (no division),
//    and its source row a few shifts and adds (layout_source_row in 32 bits, the layout a template
//    parameter).
//  - A scale item is 8 tiles (32 scale columns) of one 128-row tile row of one expert's scales, in the
//    128x4 layout of the permuted rows. Lane l holds destination rows l, l + 32, l + 64 and l + 96:
//    the four words of line l of every tile. In two halves of 4 tiles, it reads 16 columns of each of
//    the four source rows (one 16-byte load a row; words or bytes when the rows are not aligned for
//    them) and writes line l of each tile, so the warp's stores are 512 contiguous bytes a tile.
//    Padding columns (past C, to a multiple of 4) are zeros.
// The old path of these scales, a layout job in the batched scale kernel (scale_jobs_cuda.cu), gathers
// each 4-byte word through the layout's inverse index with 64-bit divisions; it still takes the TRT-LLM
// jobs this kernel does not (swizzled sources, unaligned outputs).
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/cuda_check.cuh"
#include "core/error.hpp"
#include "core/scale_job.hpp"
#include "core/padding.hpp"
#include "core/shape.hpp"
#include "core/swizzle_index.hpp"
#include "core/target_layout.hpp"

namespace mxfp8::cuda {
namespace {

constexpr int kLanes = 32;
constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / kLanes;
constexpr int kUnroll = 8;                // vectors in flight per lane: a warp moves 4 KiB at a time
// 4 blocks (32 warps, 128 KiB of loads in flight) an SM: caps registers at 64, where ptxas (nvcc 13,
// sm_90) spills nothing (uncapped it takes 78). The layout as a template parameter and the tile row
// recomputed in each pass (not hoisted out of the pass loop) are what keep it there: before, 99.
constexpr int kMinBlocksPerSm = 4;
constexpr int64_t kMaxTileRows = 32;      // divides every expert's row count (the layouts need 128)
constexpr int kTilesPerScaleItem = 8;     // 32 scale columns: one 32-byte sector of each source row
constexpr int kTilesPerHalf = 4;          // 16 columns: one 16-byte load a row

// The values: a row-permuted copy, in units of the kernel's vector type. Padded (`padded`, a kernel
// template parameter): the destination is each expert's padded matrix, whose row r is source row
// padded_source_row(src_group_rows, group_rows, halves, r) of src_per_row vectors (padding.hpp), zeros past.
struct ValuesPart {
  const void *src;
  void *dst;
  uint32_t per_row;          // vectors a row
  uint32_t group_rows;       // rows of one expert
  uint32_t tile_rows;        // T
  uint32_t tiles_per_group;  // group_rows / T
  uint32_t tiles;            // of all experts; 0: no values in this launch
  int32_t layout;            // a TRT-LLM layout, or compact: row order kept (a padded convert's values)
  uint64_t per_row_inverse;  // ceil(2^32 / per_row)
  uint32_t src_per_row;      // the source's, = per_row unless padded
  uint32_t src_group_rows;   // the source's, = group_rows unless padded
  int32_t halves;
  int32_t padded;
};

// The scales: `groups` row-major matrices of rows x cols, group g's at src + g * src_group_stride, each
// written in `layout` at dst + g * dst_group_stride.
struct ScalesPart {
  const uint8_t *src;
  uint8_t *dst;
  int64_t src_group_stride;
  int64_t dst_group_stride;
  int64_t src_row_stride;
  uint32_t rows;
  uint32_t cols;
  uint32_t tile_cols;        // roundup(cols, 4) / 4
  uint32_t col_groups;       // ceil(tile_cols / 8): items per tile row
  uint32_t items_per_group;  // rows / 128 * col_groups
  uint32_t items;            // of all groups; 0: no scales in this launch
  int32_t layout;
  int32_t load_bytes;        // 16, 4 or 1: how the source rows are read
  int32_t zero_as_one;       // MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE
  // Padded (`padded`): rows x cols is each group's padded matrix, of a source of src_rows x src_cols;
  // padding scales are pad_scale. Else src_rows, src_cols = rows, cols.
  uint32_t src_rows;
  uint32_t src_cols;
  int32_t halves;
  int32_t padded;
  uint32_t pad_scale;
};

// Columns c0 .. c0 + 15 of one source row, `valid` of them (at most 16) existing, as 4 little-endian
// words, zeros past the row's end; exponent byte 0 as 1 in the valid ones when `zero_as_one`.
__device__ uint4 load_scale_words(const uint8_t *row, int32_t valid, int load_bytes, bool zero_as_one) {
  uint32_t w[4] = {0, 0, 0, 0};
  if (valid <= 0) return make_uint4(0, 0, 0, 0);
  if (load_bytes == 16) {  // cols % 16 == 0: a whole vector
    const uint4 v = __ldg(reinterpret_cast<const uint4 *>(row));
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if (load_bytes == 4) {  // cols % 4 == 0: whole words
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (4 * j < valid) w[j] = __ldg(reinterpret_cast<const uint32_t *>(row) + j);
  } else {
#pragma unroll
    for (int b = 0; b < 16; ++b)
      if (b < valid) w[b / 4] |= static_cast<uint32_t>(__ldg(row + b)) << (8 * (b % 4));
  }
  if (zero_as_one)
#pragma unroll
    for (int b = 0; b < 16; ++b)
      if (b < valid && ((w[b / 4] >> (8 * (b % 4))) & 0xFFu) == 0) w[b / 4] |= 1u << (8 * (b % 4));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Bytes [from, to) of the 16 in `v` (little-endian words) set to `pad`: a padded matrix's padding columns.
__device__ uint4 pad_scale_words(uint4 v, int32_t from, int32_t to, uint32_t pad) {
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int b = 0; b < 16; ++b)
    if (b >= from && b < to) w[b / 4] = (w[b / 4] & ~(0xFFu << (8 * (b % 4)))) | (pad << (8 * (b % 4)));
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// A scale item, in two halves of 4 tiles (16 columns): each lane loads 16 bytes of each of its 4 rows,
// then writes line `lane` of the half's tiles.
template <int32_t kLayout, bool kPadded>
__device__ void scale_item(const ScalesPart &p, uint32_t item, uint32_t lane) {
  const uint32_t group = item / p.items_per_group, in_group = item - group * p.items_per_group;
  const uint32_t tile_row = in_group / p.col_groups, col_group = in_group - tile_row * p.col_groups;
  const uint8_t *src = p.src + group * p.src_group_stride;
  const uint8_t *rows[4];  // the source rows of destination rows lane + 32 k of the tile row
  uint32_t row_cols[4];    // the scales each of them holds: 0 for a padding row
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t d = tile_row * static_cast<uint32_t>(kTileRows) + k * static_cast<uint32_t>(kSubtileRows) + lane;
    uint32_t from = layout_source_row<uint32_t>(kLayout, p.rows, d);
    row_cols[k] = p.src_cols;
    if constexpr (kPadded) {
      from = padded_source_row<uint32_t>(p.src_rows, p.rows, p.halves != 0, from);
      if (from == kPaddingRow<uint32_t>) from = 0, row_cols[k] = 0;
    }
    rows[k] = src + static_cast<int64_t>(from) * p.src_row_stride;
  }
  uint8_t *out = p.dst + group * p.dst_group_stride + static_cast<int64_t>(tile_row) * p.tile_cols * kTileBytes + lane * kLineBytes;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const uint32_t first_tile = col_group * kTilesPerScaleItem + half * kTilesPerHalf;
    if (first_tile >= p.tile_cols) break;
    const uint32_t c0 = first_tile * static_cast<uint32_t>(kTileCols);
    const int32_t valid = static_cast<int32_t>(min(p.cols - c0, 16u));
    uint4 words[4];  // of rows lane + 32 k: a word per tile
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (kPadded) {  // the row's scales, then padding to the padded matrix's columns
        const int32_t held = static_cast<int32_t>(min(row_cols[k] > c0 ? row_cols[k] - c0 : 0u, 16u));
        words[k] = pad_scale_words(load_scale_words(rows[k] + c0, held, p.load_bytes, p.zero_as_one), held, valid, p.pad_scale);
      } else {
        words[k] = load_scale_words(rows[k] + c0, valid, p.load_bytes, p.zero_as_one);
      }
    }
    const uint32_t tiles = min(p.tile_cols - first_tile, static_cast<uint32_t>(kTilesPerHalf));
    uint8_t *line = out + first_tile * kTileBytes;
    __stcs(reinterpret_cast<uint4 *>(line), make_uint4(words[0].x, words[1].x, words[2].x, words[3].x));
    if (tiles > 1) __stcs(reinterpret_cast<uint4 *>(line + kTileBytes), make_uint4(words[0].y, words[1].y, words[2].y, words[3].y));
    if (tiles > 2) __stcs(reinterpret_cast<uint4 *>(line + 2 * kTileBytes), make_uint4(words[0].z, words[1].z, words[2].z, words[3].z));
    if (tiles > 3) __stcs(reinterpret_cast<uint4 *>(line + 3 * kTileBytes), make_uint4(words[0].w, words[1].w, words[2].w, words[3].w));
  }
}

template <class Vec, int32_t kLayout, bool kPadded>
__device__ void value_tile(const ValuesPart &p, uint32_t tile, uint32_t lane) {
  const uint32_t group = tile / p.tiles_per_group, d0 = (tile - group * p.tiles_per_group) * p.tile_rows;
  const int64_t group_vectors = static_cast<int64_t>(p.group_rows) * p.per_row;
  const Vec *from = static_cast<const Vec *>(p.src) + group * static_cast<int64_t>(p.src_group_rows) * p.src_per_row;
  Vec *to = static_cast<Vec *>(p.dst) + group * group_vectors + static_cast<int64_t>(d0) * p.per_row;
  const uint32_t tile_vectors = p.tile_rows * p.per_row;
  for (uint32_t pass = 0; pass < tile_vectors; pass += kLanes * kUnroll) {  // more than one pass: T = 1
    Vec v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = pass + lane + kLanes * u;
      if (i >= tile_vectors) continue;
      // Row i / per_row of the tile: 0 when T = 1 (the only case with several passes); else i < 256,
      // per_row <= 128, and a multiply by per_row_inverse = ceil(2^32 / per_row) is exact (its error,
      // under i / 2^32, stays below 1 / per_row).
      const uint32_t r = p.tile_rows == 1 ? 0u : static_cast<uint32_t>((static_cast<uint64_t>(i) * p.per_row_inverse) >> 32);
      const uint32_t source = layout_source_row<uint32_t>(kLayout, p.group_rows, d0 + r), col = i - r * p.per_row;
      if constexpr (kPadded) {
        const uint32_t held = padded_source_row<uint32_t>(p.src_group_rows, p.group_rows, p.halves != 0, source);
        v[u] = held == kPaddingRow<uint32_t> || col >= p.src_per_row ? Vec{}
                                                                     : __ldcs(from + static_cast<int64_t>(held) * p.src_per_row + col);
      } else {
        v[u] = __ldcs(from + static_cast<int64_t>(source) * p.per_row + col);  // read once
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const uint32_t i = pass + lane + kLanes * u;
      if (i < tile_vectors) __stcs(to + i, v[u]);  // written once, read by the engine's GEMM, not by us
    }
  }
}

// kLayout: the TRT-LLM layout of the values and scales (or compact, the identity, for a padded convert's
// values), a constant so that the row map folds; kPadded: both parts write padded matrices.
template <class Vec, int32_t kLayout, bool kPadded>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm) permute_rows_kernel(const ValuesPart values, const ScalesPart scales) {
  const uint32_t lane = threadIdx.x % kLanes, warps = gridDim.x * kWarpsPerBlock;
  uint32_t item = blockIdx.x * kWarpsPerBlock + threadIdx.x / kLanes;
  for (; item < scales.items; item += warps) scale_item<kLayout, kPadded>(scales, item, lane);
  for (item -= scales.items; item < values.tiles; item += warps) value_tile<Vec, kLayout, kPadded>(values, item, lane);
}

// Rows per tile: the largest power of two up to 32 that divides an expert's rows and whose rows hold at
// most kLanes * kUnroll vectors.
uint32_t tile_rows_for(int64_t per_row, int64_t group_rows) {
  uint32_t rows = 1;
  while (rows < kMaxTileRows && 2 * rows * per_row <= int64_t{kLanes} * kUnroll && group_rows % (2 * rows) == 0) rows *= 2;
  return rows;
}

bool aligned(const void *p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

uint32_t checked_uint32(int64_t v, const char *what) {
  if (v < 0 || v > INT32_MAX)
    fail(MXFP8_ERROR_UNSUPPORTED, what, " ", v, " is beyond what the row permutation kernel covers (2^31 - 1)");
  return static_cast<uint32_t>(v);
}

// The values part of a row-permuted copy job, in units of Vec.
template <class Vec>
ValuesPart values_part(const ScaleJob &job) {
  ValuesPart p{job.src.data, job.dst.data, 0, 0, 0, 0, 0, job.layout, 0, 0, 0, job.pad.halves, job.pad.rows != 0};
  const int64_t per_row = job.dst.cols / static_cast<int64_t>(sizeof(Vec));
  p.per_row = checked_uint32(per_row, "vectors a row");
  p.group_rows = checked_uint32(job.group_rows, "rows of one expert");
  p.src_per_row = job.pad.rows ? checked_uint32(job.pad.cols / static_cast<int64_t>(sizeof(Vec)), "vectors a row") : p.per_row;
  p.src_group_rows = job.pad.rows ? checked_uint32(job.pad.rows, "rows of one expert") : p.group_rows;
  p.tile_rows = tile_rows_for(per_row, job.group_rows);
  p.tiles_per_group = p.group_rows / p.tile_rows;
  p.per_row_inverse = ((uint64_t{1} << 32) + p.per_row - 1) / p.per_row;
  p.tiles = checked_uint32(job.dst.rows / p.tile_rows, "row tiles");
  checked_uint32(job.dst.rows, "rows");
  return p;
}

void check_values_job(const ScaleJob &job) {
  const int64_t src_cols = job.pad.rows ? job.pad.cols : job.dst.cols;
  if (job.src.row_stride != src_cols || job.dst.row_stride != job.dst.cols || job.src.col_stride != 1 ||
      job.dst.col_stride != 1 || job.group_rows <= 0 || (is_trtllm_layout(job.layout) && job.group_rows % kMaxTileRows != 0) ||
      job.dst.rows % job.group_rows != 0)
    fail(MXFP8_ERROR_INTERNAL, "a row permutation job needs dense row-major matrices of whole groups (of 32 rows for the TRT-LLM layouts)");
}

bool fits(const ScaleJob &job, uintptr_t bytes) {
  const auto b = static_cast<int64_t>(bytes);
  return job.dst.cols % b == 0 && (!job.pad.rows || job.pad.cols % b == 0) && aligned(job.src.data, bytes) &&
         aligned(job.dst.data, bytes);
}

// A layout job this kernel writes: a TRT-LLM layout, all of it, of a row-major S with 128-row tile rows,
// into a destination aligned for 16-byte stores.
bool takes_scale_job(const ScaleJob &j) {
  return j.kind == JobKind::Layout && is_trtllm_layout(j.layout) && !j.swizzled && !j.read_transposed && j.src.col_stride == 1 &&
         j.src.data && j.dst.rows > 0 && j.dst.cols > 0 && j.dst.rows % kTileRows == 0 && j.dst.rows <= INT32_MAX &&
         j.dst.cols <= INT32_MAX && j.src.row_stride >= (j.pad.rows ? j.pad.cols : j.dst.cols) &&
         (j.layout_bytes < 0 || j.layout_bytes >= layout_size(j.layout, j.dst.rows, j.dst.cols)) && aligned(j.dst.data, 16);
}

// Whether `next` continues a scale run from `prev` at the run's strides (the first pair sets them).
bool continues_run(const ScaleJob &prev, const ScaleJob &next, int64_t src_step, int64_t dst_step) {
  return next.layout == prev.layout && next.zero_as_one == prev.zero_as_one && next.dst.rows == prev.dst.rows &&
         next.dst.cols == prev.dst.cols && next.src.row_stride == prev.src.row_stride && next.pad.rows == prev.pad.rows &&
         next.pad.cols == prev.pad.cols && next.pad.halves == prev.pad.halves && next.pad.scale == prev.pad.scale &&
         next.src.data - prev.src.data == src_step && next.dst.data - prev.dst.data == dst_step;
}

// The scales part of jobs[0 .. count) (a run, see continues_run).
ScalesPart scales_part(const ScaleJob *jobs, size_t count) {
  const ScaleJob &first = jobs[0];
  ScalesPart p{};
  p.src = first.src.data;
  p.dst = first.dst.data;
  p.src_group_stride = count > 1 ? jobs[1].src.data - first.src.data : 0;
  p.dst_group_stride = count > 1 ? jobs[1].dst.data - first.dst.data : 0;
  p.src_row_stride = first.src.row_stride;
  p.rows = static_cast<uint32_t>(first.dst.rows);
  p.cols = static_cast<uint32_t>(first.dst.cols);
  p.tile_cols = static_cast<uint32_t>(ceil_div(first.dst.cols, kTileCols));
  p.col_groups = static_cast<uint32_t>(ceil_div(p.tile_cols, kTilesPerScaleItem));
  p.items_per_group = checked_uint32(first.dst.rows / kTileRows * p.col_groups, "scale items of one expert");
  p.items = checked_uint32(static_cast<int64_t>(count) * p.items_per_group, "scale items");
  p.layout = first.layout;
  p.zero_as_one = first.zero_as_one;
  p.padded = first.pad.rows != 0;
  p.src_rows = p.padded ? static_cast<uint32_t>(first.pad.rows) : p.rows;  // at most rows
  p.src_cols = p.padded ? static_cast<uint32_t>(first.pad.cols) : p.cols;
  p.halves = first.pad.halves;
  p.pad_scale = first.pad.scale;
  auto rows_fit = [&](int64_t bytes) {
    return aligned(p.src, bytes) && p.src_row_stride % bytes == 0 && p.src_group_stride % bytes == 0 && p.src_cols % bytes == 0;
  };
  p.load_bytes = rows_fit(16) ? 16 : rows_fit(4) ? 4 : 1;
  return p;
}

template <class Vec, int32_t kLayout, bool kPadded>
void launch_kernel(const ValuesPart &values, const ScalesPart &scales, cudaStream_t stream) {
  const int64_t items = int64_t{values.tiles} + scales.items;
  if (items == 0) return;
  constexpr auto kernel = permute_rows_kernel<Vec, kLayout, kPadded>;
  const int64_t grid = std::min<int64_t>(ceil_div(items, kWarpsPerBlock), resident_blocks<kernel>(kThreads));
  checked_uint32(items + grid * kWarpsPerBlock, "work items");  // a warp's item index never wraps
  kernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(values, scales);
  check(cudaGetLastError(), "launching the row permutation kernel");
}

template <class Vec, bool kPadded>
void launch_layout(int32_t layout, const ValuesPart &values, const ScalesPart &scales, cudaStream_t stream) {
  if (layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED)
    return launch_kernel<Vec, MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED, kPadded>(values, scales, stream);
  if (layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || (values.tiles == 0 && scales.items == 0))
    return launch_kernel<Vec, MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, kPadded>(values, scales, stream);
  if constexpr (kPadded)  // a padded convert into a layout that keeps row order: its values alone
    if (layout == MXFP8_SCALE_LAYOUT_COMPACT && scales.items == 0)
      return launch_kernel<Vec, MXFP8_SCALE_LAYOUT_COMPACT, true>(values, scales, stream);
  fail(MXFP8_ERROR_INTERNAL, "the row permutation kernel writes the TRT-LLM layouts (and padded values in row order) only, "
       "not layout ", layout);
}

template <class Vec>
void launch(const ValuesPart &values, const ScalesPart &scales, cudaStream_t stream) {
  const int32_t layout = values.tiles ? values.layout : scales.layout;
  const bool padded = values.tiles ? values.padded : scales.padded;
  if (values.tiles && scales.items && (scales.layout != layout || scales.padded != values.padded)) {
    launch<Vec>(values, ScalesPart{}, stream);  // not one convert's: one launch each
    return launch<uint4>(ValuesPart{}, scales, stream);
  }
  if (padded) return launch_layout<Vec, true>(layout, values, scales, stream);
  launch_layout<Vec, false>(layout, values, scales, stream);
}

// One launch: the values job (or none) and a scale run (or none).
void launch_pair(const ScaleJob *values_job, const ScalesPart &scales, cudaStream_t stream) {
  if (!values_job || values_job->dst.rows == 0 || values_job->dst.cols == 0)
    return launch<uint4>(ValuesPart{}, scales, stream);
  check_values_job(*values_job);
  if (fits(*values_job, 16)) return launch<uint4>(values_part<uint4>(*values_job), scales, stream);
  if (fits(*values_job, 4)) return launch<uint32_t>(values_part<uint32_t>(*values_job), scales, stream);
  launch<uint8_t>(values_part<uint8_t>(*values_job), scales, stream);
}

}  // namespace

bool run_row_permutations(const ScaleJob *jobs, size_t count, void *stream, std::vector<ScaleJob> &rest) {
  if (!std::any_of(jobs, jobs + count, [](const ScaleJob &j) { return j.kind == JobKind::PermuteRows || takes_scale_job(j); }))
    return false;
  std::vector<const ScaleJob *> values;
  std::vector<ScaleJob> scales;
  for (size_t i = 0; i < count; ++i) {
    if (jobs[i].kind == JobKind::PermuteRows) values.push_back(&jobs[i]);
    else if (takes_scale_job(jobs[i])) scales.push_back(jobs[i]);
    else rest.push_back(jobs[i]);
  }
  // The scale jobs as runs at regular strides (a convert's experts: one run).
  std::vector<ScalesPart> runs;
  for (size_t begin = 0; begin < scales.size();) {
    size_t end = begin + 1;
    if (end < scales.size()) {
      const int64_t src_step = scales[end].src.data - scales[begin].src.data, dst_step = scales[end].dst.data - scales[begin].dst.data;
      while (end < scales.size() && continues_run(scales[end - 1], scales[end], src_step, dst_step)) ++end;
    }
    runs.push_back(scales_part(&scales[begin], end - begin));
    begin = end;
  }
  auto s = static_cast<cudaStream_t>(stream);
  for (size_t i = 0; i < std::max(values.size(), runs.size()); ++i)
    launch_pair(i < values.size() ? values[i] : nullptr, i < runs.size() ? runs[i] : ScalesPart{}, s);
  return true;
}

}  // namespace mxfp8::cuda
