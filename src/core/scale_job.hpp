// The byte-moving operations on one scale matrix, with one implementation per place the bytes live.
// The layout math is shared (swizzle_index.hpp); the host and CUDA versions differ only in how they
// move bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mxfp8/mxfp8.h"
#include "core/padding.hpp"

namespace mxfp8 {

// A 2-D byte matrix with element strides (in bytes, since every scale is one byte).
struct ByteMatrix {
  uint8_t *data;
  int64_t rows;
  int64_t cols;
  int64_t row_stride;
  int64_t col_stride;
};

// What a ScaleJob does: one kind per loop the host and the device run.
enum class JobKind : uint8_t {
  // dst = src, the same rows and cols; src has col_stride 1 (values, and compact scales as stored).
  Copy,
  // dst (compact, any strides: a transposed view writes columnwise scales) from the 128x4 swizzled
  // buffer at `swizzled`, or from a window of it (the swizzled_* fields).
  Unswizzle,
  // Every byte of the 128x4 swizzled buffer at dst.data of a dst.rows x dst.cols matrix (dst's strides
  // unused), padding as zeros, from `src` (any strides, e.g. a transposed view for columnwise scales).
  Swizzle,
  // The same from a swizzled buffer of the same matrix at `swizzled`: a copy whose padding is zeroed,
  // since a producer's padding is never trusted.
  SwizzledCopy,
  // Every byte (or the first layout_bytes) of the matrix M (dst.rows x dst.cols) in `layout`
  // (target_layout.hpp) at dst.data, padding as zeros, gathered through the layout's inverse index from
  // S (M = S, or S^T when read_transposed) as stored: `swizzled` in `source_layout` (of S, or S^T when
  // source_transposed, as ScaleSource says) or else the row-major `src`. Any layout to any layout, so
  // a new engine layout needs no job of its own.
  Layout,
  // The values of a layout that permutes rows (the TRT-LLM ones): `dst` (row-major, rows a multiple of
  // group_rows: experts stacked) row g * group_rows + d is `src` row g * group_rows +
  // layout_source_row(layout, group_rows, d), every byte of it. Padded (`pad`): dst is the padded
  // matrices, group_rows theirs; layout_source_row names a padded row, padded_source_row its row in
  // src (groups of pad.rows rows of pad.cols bytes), and padding rows and columns are zeros. Also the
  // values of a padded convert into a layout that keeps row order (layout: compact, the identity).
  PermuteRows,
};

// One matrix of bytes to produce: its kind, and the fields that kind reads.
// An Unswizzle job may read a window of a larger swizzled matrix (a shard, see scale_source.hpp's crop):
// dst(r, c) is the swizzled matrix's (swizzled_row0 + r, swizzled_col0 + c), where `swizzled` points at
// the tile holding the window's first scale, swizzled_row0 < 128 and swizzled_col0 < 4 are what is left
// of the window's origin inside that tile, and tile rows are swizzled_tile_stride tiles apart (the
// parent's roundup(C, 4) / 4). 0 / 0 / 0: the whole matrix, tile rows roundup(dst.cols, 4) / 4 apart.
struct ScaleJob {
  JobKind kind;
  const uint8_t *swizzled;
  ByteMatrix src;
  ByteMatrix dst;
  int64_t swizzled_row0 = 0;
  int64_t swizzled_col0 = 0;
  int64_t swizzled_tile_stride = 0;
  int32_t layout = MXFP8_SCALE_LAYOUT_COMPACT;  // Layout: the target; PermuteRows: the layout whose row order
  int32_t source_layout = MXFP8_SCALE_LAYOUT_128X4;
  bool source_transposed = false;
  bool read_transposed = false;
  bool zero_as_one = false;  // MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE
  int64_t group_rows = 0;
  // Layout jobs: the bytes written, a prefix of the layout (-1: all of it). A strided destination may
  // describe less than the whole layout (api/layouts.hpp, LayoutBuffer); the rest is left alone.
  int64_t layout_bytes = -1;
  // Layout and PermuteRows jobs: dst is the padded matrix of a source of pad.rows x pad.cols (padding.hpp).
  Padding pad = {};
};

// ScaleJob{kind, swizzled, src, dst}, every other field its default, set field by field: the braced form
// zeroes the whole job first (GCC: a `rep stos` of its 176 bytes, ~9 ns on the host, paid per expert by
// a grouped export).
inline ScaleJob make_job(JobKind kind, const uint8_t *swizzled, ByteMatrix src, ByteMatrix dst) {
  ScaleJob job;  // the fields with defaults take them; the four below have none
  job.kind = kind;
  job.swizzled = swizzled;
  job.src = src;
  job.dst = dst;
  return job;
}

// The Copy job dst = src.
inline ScaleJob copy_job(ByteMatrix src, ByteMatrix dst) { return make_job(JobKind::Copy, nullptr, src, dst); }

// The PermuteRows job of `groups` stacked matrices of group_rows x cols bytes (both row-major, dense):
// the values of `layout`.
inline ScaleJob permuted_rows_job(int32_t layout, const uint8_t *src, uint8_t *dst, int64_t groups, int64_t group_rows,
                                  int64_t cols) {
  const int64_t rows = groups * group_rows;
  ScaleJob job{JobKind::PermuteRows, nullptr, ByteMatrix{const_cast<uint8_t *>(src), rows, cols, cols, 1},
               ByteMatrix{dst, rows, cols, cols, 1}};
  job.layout = layout;
  job.group_rows = group_rows;
  return job;
}

// The same from `groups` matrices of pad.rows x pad.cols bytes into their padded matrices of
// padded_rows x padded_cols, padding zero.
inline ScaleJob padded_rows_job(int32_t layout, const uint8_t *src, uint8_t *dst, int64_t groups, int64_t padded_rows,
                                int64_t padded_cols, const Padding &pad) {
  ScaleJob job = permuted_rows_job(layout, src, dst, groups, padded_rows, padded_cols);
  job.src = ByteMatrix{const_cast<uint8_t *>(src), groups * pad.rows, pad.cols, pad.cols, 1};
  job.pad = pad;
  return job;
}

// Merges each run of neighbouring jobs that are one matrix (job_coalescing.cpp): Copy jobs whose source
// and destination rows both continue, and Unswizzle jobs of whole swizzled matrices stored back to back,
// the first of whole 128-row tiles, into compact rows that continue (the experts of a grouped tensor
// exported into one buffer). The bytes written are the same; only the job count changes. In place.
void coalesce_jobs(std::vector<ScaleJob> &jobs);
// Appends `job`, merged into the last job when coalesce_jobs would merge the two: jobs appended one by one
// this way are what coalesce_jobs makes of the same jobs appended plainly, without holding every one.
void append_coalesced(std::vector<ScaleJob> &jobs, const ScaleJob &job);

// The swizzled buffer of an R x C matrix: roundup(R, 128) * roundup(C, 4) contiguous bytes.
// `dst` has R rows and C columns, any strides.
void unswizzle_host(const uint8_t *swizzled, ByteMatrix dst);
// The window (row0, col0) + dst's extent of the swizzled matrix at `swizzled`, whose tile rows are
// tile_stride tiles apart (see ScaleJob); unswizzle_host is its whole-matrix case.
void unswizzle_window_host(const uint8_t *swizzled, int64_t row0, int64_t col0, int64_t tile_stride, ByteMatrix dst);
// Writes every byte of the swizzled buffer of `src`, padding as zeros.
void swizzle_host(ByteMatrix src, uint8_t *swizzled);
// dst = src, same rows and cols.
void copy_matrix_host(ByteMatrix src, ByteMatrix dst);
// The swizzled buffer of a rows x cols matrix copied from `src` (the same layout), padding as zeros.
void copy_swizzled_host(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols);
// A Layout job, on host memory.
void write_layout_host(const ScaleJob &job);
// A PermuteRows job, on host memory.
void permute_rows_host(const ScaleJob &job);
// Any job, on host memory.
void run_job_host(const ScaleJob &job);

namespace cuda {
// Same contracts as the host versions, queued on `stream` (a cudaStream_t), device pointers.
// All jobs of a batch, of both kinds, run in one kernel launch (a few launches past several hundred jobs).
void run_jobs(const ScaleJob *jobs, size_t count, void *stream);
void unswizzle(const uint8_t *swizzled, ByteMatrix dst, void *stream);
void swizzle(ByteMatrix src, uint8_t *swizzled, void *stream);
void copy_matrix(ByteMatrix src, ByteMatrix dst, void *stream);
// The jobs of the TRT-LLM layouts' row kernel (permute_rows_cuda.cu): row-permuted copies (the values)
// and the TRT-LLM layout jobs that read row-major scales, a copy job and the run of its experts' scale
// jobs in one launch. run_jobs hands its batch here first: false when no job is for this kernel (and
// nothing ran); else those ran, and `rest` holds the others, in order.
bool run_row_permutations(const ScaleJob *jobs, size_t count, void *stream, std::vector<ScaleJob> &rest);
}  // namespace cuda

}  // namespace mxfp8
