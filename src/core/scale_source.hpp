// Where one direction's compact scale matrix S (rows x cols) lives as stored, readable element by
// element on host and device: a swizzled buffer (of S, or of S^T for columnwise scales) or a row-major
// matrix inside a possibly padded buffer.
#pragma once

#include <cstdint>

#include "core/error.hpp"
#include "core/scale_job.hpp"
#include "core/swizzle_index.hpp"
#include "core/target_layout.hpp"

namespace mxfp8 {

struct ScaleSource {
  const uint8_t *swizzled;  // NULL: row_major
  bool transposed;          // the swizzled matrix is S^T
  ByteMatrix row_major;
  int64_t rows;
  int64_t cols;
  // A window of a larger swizzled matrix (crop()): S here is the stored S's (row0 + r, col0 + c), and the
  // stored swizzled matrix (S, or S^T when transposed) has padded_cols columns. 0, 0, 0: not a window.
  int64_t row0 = 0;
  int64_t col0 = 0;
  int64_t padded_cols = 0;
  // The mxfp8_scale_layout `swizzled` is in: the 128x4 layout as producers store it, or an engine layout a
  // bucket carries (then only layout jobs read it, never transposed nor cropped).
  int32_t layout = MXFP8_SCALE_LAYOUT_128X4;
};

// The padded column count of the swizzled matrix that holds `s` (S, or S^T when transposed).
MXFP8_HOST_DEVICE inline int64_t swizzled_padded_cols(const ScaleSource &s) {
  if (s.padded_cols) return s.padded_cols;
  const int64_t cols = s.transposed ? s.rows : s.cols;
  return (cols + kTileCols - 1) / kTileCols * kTileCols;
}

MXFP8_HOST_DEVICE inline const uint8_t *scale_address(const ScaleSource &s, int64_t r, int64_t c) {
  if (!s.swizzled) return s.row_major.data + r * s.row_major.row_stride + c * s.row_major.col_stride;
  if (s.layout != MXFP8_SCALE_LAYOUT_128X4) return s.swizzled + layout_offset(s.layout, s.rows, s.cols, r, c);
  const int64_t padded = swizzled_padded_cols(s);
  r += s.row0;
  c += s.col0;
  return s.swizzled + (s.transposed ? swizzled_offset(c, r, padded) : swizzled_offset(r, c, padded));
}

// Scale (r, c) of S, as stored: decoded when an engine layout stores it as more than its byte.
MXFP8_HOST_DEVICE inline uint8_t read_scale(const ScaleSource &s, int64_t r, int64_t c) {
  const uint8_t *at = scale_address(s, r, c);
  return s.swizzled ? layout_decode(s.layout, at) : *at;
}

// Rows [r0, r1) and columns [c0, c1) of S (0 <= r0 <= r1 <= rows, same for columns; checked by the
// caller): a sub-matrix of a row-major source, a window of a swizzled one. Reads nothing.
inline ScaleSource crop(const ScaleSource &s, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  if (r0 == 0 && c0 == 0 && r1 == s.rows && c1 == s.cols) return s;
  ScaleSource out = s;
  out.rows = r1 - r0;
  out.cols = c1 - c0;
  if (s.swizzled) {
    out.padded_cols = swizzled_padded_cols(s);
    out.row0 = s.row0 + r0;
    out.col0 = s.col0 + c0;
  } else {
    out.row_major.data = s.row_major.data + r0 * s.row_major.row_stride + c0 * s.row_major.col_stride;
    out.row_major.rows = out.rows;
    out.row_major.cols = out.cols;
  }
  return out;
}

// A job reading the stored swizzled matrix of `s` (S^T when transposed) from the window's first scale:
// the tile that holds it, what is left of the origin inside that tile, the tile-row stride.
inline ScaleJob swizzled_window_job(const ScaleSource &s, ByteMatrix dst) {
  const int64_t padded = swizzled_padded_cols(s), stride = padded / kTileCols;
  const int64_t r0 = s.transposed ? s.col0 : s.row0, c0 = s.transposed ? s.row0 : s.col0;
  ScaleJob job = make_job(JobKind::Unswizzle, s.swizzled + ((r0 / kTileRows) * stride + c0 / kTileCols) * kTileBytes,
                          ByteMatrix{nullptr, 0, 0, 0, 0}, dst);
  job.swizzled_row0 = r0 % kTileRows;
  job.swizzled_col0 = c0 % kTileCols;
  job.swizzled_tile_stride = stride;
  return job;
}

// The job writing S compact (rows x cols, row-major, row stride cols) at `dst`. Swizzled columnwise scales
// are S^T swizzled: the job unswizzles S^T into a transposed view of the output.
inline ScaleJob compact_job(const ScaleSource &s, uint8_t *dst) {
  if (!s.swizzled) return copy_job(s.row_major, ByteMatrix{dst, s.rows, s.cols, s.cols, 1});
  if (s.transposed) return swizzled_window_job(s, ByteMatrix{dst, s.cols, s.rows, 1, s.cols});
  return swizzled_window_job(s, ByteMatrix{dst, s.rows, s.cols, s.cols, 1});
}

// The job writing S in the 128x4 swizzled layout at `dst`, padding as zeros; the matrix swizzled is S^T
// when `transposed` (columnwise scales, as TE and cuBLAS lay them out). A source swizzled the same way is
// copied (its padding zeroed, never trusted); a row-major one is swizzled.
inline ScaleJob swizzled_job(const ScaleSource &s, bool transposed, uint8_t *dst) {
  const int64_t rows = transposed ? s.cols : s.rows, cols = transposed ? s.rows : s.cols;
  const ByteMatrix out{dst, rows, cols, 0, 0};
  if (s.swizzled) {
    if (s.transposed != transposed) fail(MXFP8_ERROR_INTERNAL, "a swizzled source of the other orientation");
    if (s.padded_cols) fail(MXFP8_ERROR_INTERNAL, "a swizzled copy of a window of a swizzled matrix");
    if (rows % kTileRows == 0 && cols % kTileCols == 0) {
      // No padding to zero: the two buffers hold the same bytes, so the job is a plain copy of whole tiles,
      // which a large transfer moves at copy speed with its values (the bulk copy on sm_90+).
      const int64_t tiles = rows / kTileRows * (cols / kTileCols);
      return copy_job(ByteMatrix{const_cast<uint8_t *>(s.swizzled), tiles, kTileBytes, kTileBytes, 1},
                      ByteMatrix{dst, tiles, kTileBytes, kTileBytes, 1});
    }
    return ScaleJob{JobKind::SwizzledCopy, s.swizzled, ByteMatrix{}, out};
  }
  const ByteMatrix &m = s.row_major;
  const ByteMatrix src = transposed ? ByteMatrix{m.data, m.cols, m.rows, m.col_stride, m.row_stride} : m;
  return ScaleJob{JobKind::Swizzle, nullptr, src, out};
}

// The job writing M in `layout` at `dst` (every byte, padding as zeros): M = S, or S^T when
// `transposed` (columnwise scales in a layout that lays out their transpose); byte 0 written as 1 when
// `zero_as_one`. Padded (pad.rows != 0, rowwise only): M is S padded to padded_rows x padded_cols.
inline ScaleJob layout_job(const ScaleSource &s, int32_t layout, bool transposed, uint8_t *dst, bool zero_as_one,
                           const Padding &pad = {}, int64_t padded_rows = 0, int64_t padded_cols = 0) {
  // A layout job reads S through layout_job_source, which has no window: shards never reach here (the
  // import refuses engine layouts and the fix-up for them), and this keeps it so.
  if (s.padded_cols) fail(MXFP8_ERROR_INTERNAL, "a layout job reading a window of a swizzled matrix");
  if (pad.rows && (transposed || pad.rows != s.rows || pad.cols != s.cols))
    fail(MXFP8_ERROR_INTERNAL, "a padded layout job of another matrix than its source, or transposed");
  ScaleJob job{JobKind::Layout, s.swizzled, s.row_major,
               ByteMatrix{dst, transposed ? s.cols : s.rows, transposed ? s.rows : s.cols, 0, 0}};
  if (pad.rows) job.dst.rows = padded_rows, job.dst.cols = padded_cols;
  job.layout = layout;
  job.source_layout = s.layout;
  job.source_transposed = s.transposed;
  job.read_transposed = transposed;
  job.zero_as_one = zero_as_one;
  job.pad = pad;
  return job;
}

// The source a layout job reads, as a ScaleSource of S.
MXFP8_HOST_DEVICE inline ScaleSource layout_job_source(const ScaleJob &job) {
  const int64_t rows = job.pad.rows ? job.pad.rows : job.read_transposed ? job.dst.cols : job.dst.rows;
  const int64_t cols = job.pad.rows ? job.pad.cols : job.read_transposed ? job.dst.rows : job.dst.cols;
  ScaleSource s{job.swizzled, job.source_transposed, job.src, rows, cols};
  s.layout = job.source_layout;
  return s;
}

// Scale (r, c) of the matrix a layout job writes (of padded_rows rows; S itself, unless `pad` pads it):
// S's, byte 0 as 1 when `zero_as_one`, or pad.scale for padding.
MXFP8_HOST_DEVICE inline uint8_t layout_job_scale(const ScaleSource &s, const Padding &pad, int64_t padded_rows, int64_t r,
                                                  int64_t c, bool zero_as_one) {
  if (pad.rows) {
    r = padded_source_row<int64_t>(pad.rows, padded_rows, pad.halves, r);
    if (r == kPaddingRow<int64_t> || c >= pad.cols) return pad.scale;
  }
  const uint8_t v = read_scale(s, r, c);
  return zero_as_one && v == 0 ? uint8_t{1} : v;
}

// The job writing S in `layout` at `dst`, the fastest job that does it: the dedicated compact and 128x4
// jobs for the layouts they write, a layout job for the others and whenever bytes are rewritten or S is
// padded (to padded_rows x padded_cols, by `pad`).
inline ScaleJob scale_job(const ScaleSource &s, int32_t layout, bool columnwise, uint8_t *dst, bool zero_as_one,
                          const Padding &pad = {}, int64_t padded_rows = 0, int64_t padded_cols = 0) {
  if (pad.rows) return layout_job(s, layout, false, dst, zero_as_one, pad, padded_rows, padded_cols);
  const bool packed_source = s.swizzled && s.layout != MXFP8_SCALE_LAYOUT_128X4;
  if (!zero_as_one && !packed_source) {
    if (layout == MXFP8_SCALE_LAYOUT_COMPACT) return compact_job(s, dst);
    if (layout == MXFP8_SCALE_LAYOUT_128X4 && (!s.swizzled || s.transposed == columnwise))
      return swizzled_job(s, columnwise, dst);
  }
  // 128x4 lays out columnwise scales transposed; the other layouts lay out S as it is.
  return layout_job(s, layout, layout == MXFP8_SCALE_LAYOUT_128X4 && columnwise, dst, zero_as_one);
}

// Block (br, bc) of the 32-wide blocks along `axis`: its first stored scale in *value, and the row-major
// index in S of the first stored scale of the block that differs from it, or -1.
MXFP8_HOST_DEVICE inline int64_t read_block(const ScaleSource &s, int axis, int64_t br, int64_t bc, uint8_t *value) {
  const int64_t r0 = axis == 0 ? br * kBlockSize : br, c0 = axis == 0 ? bc : bc * kBlockSize;
  *value = read_scale(s, r0, c0);
  for (int64_t i = 1; i < kBlockSize; ++i) {
    const int64_t r = axis == 0 ? r0 + i : r0, c = axis == 0 ? c0 : c0 + i;
    if (r >= s.rows || c >= s.cols) break;
    if (read_scale(s, r, c) != *value) return r * s.cols + c;
  }
  return -1;
}

// The first scale that differs from the first scale of its 32-wide block, if any.
struct BlockMismatch {
  int64_t row = -1;  // -1: every block agrees
  int64_t col = -1;
};

// One scale per 32 along `axis` of S (0: rows, as rowwise 2-D weights repeat a block's scale down 32
// rows; 1: columns, as columnwise ones repeat it across 32 columns) into `out`
// (ceil(rows/32) x cols or rows x ceil(cols/32)).
BlockMismatch block_scales_host(const ScaleSource &s, int axis, ByteMatrix out);
namespace cuda {
// The same on the device, queued on `stream`; waits for `stream` to learn whether the blocks agreed.
BlockMismatch block_scales(const ScaleSource &s, int axis, ByteMatrix out, void *stream);
}  // namespace cuda

}  // namespace mxfp8
