// Host loops for the scale matrix operations.
#include <cstring>

#include "host/host_threads.hpp"
#include "core/error.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"
#include "core/swizzle_index.hpp"

namespace mxfp8 {

namespace {

// Rows [r0, r1) of unswizzle_window_host.
void unswizzle_rows(const uint8_t *swizzled, int64_t row0, int64_t col0, int64_t tile_stride, ByteMatrix dst,
                    int64_t r0, int64_t r1) {
  const int64_t padded_cols = tile_stride * kTileCols;
  if (dst.col_stride == 1 && col0 % kTileCols == 0) {
    // The 4 scales of one row inside a tile are one aligned word, and the row's next word is one tile
    // (512 bytes) further: move words, not bytes.
    for (int64_t r = r0; r < r1; ++r) {
      uint8_t *row = dst.data + r * dst.row_stride;
      int64_t c = 0, word = swizzled_offset(row0 + r, col0, padded_cols);
      for (; c + kTileCols <= dst.cols; c += kTileCols, word += kTileBytes) std::memcpy(row + c, swizzled + word, kTileCols);
      for (; c < dst.cols; ++c) row[c] = swizzled[swizzled_offset(row0 + r, col0 + c, padded_cols)];
    }
    return;
  }
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < dst.cols; ++c)
      dst.data[r * dst.row_stride + c * dst.col_stride] = swizzled[swizzled_offset(row0 + r, col0 + c, padded_cols)];
}

}  // namespace

// Rows split across threads (host_threads.hpp); each row moves 2 * cols bytes. Every function here
// returns first for an empty matrix, so the work follows the bytes, never a dimension of an empty matrix
// (2^40 rows of 0 columns would otherwise be visited one by one).
void unswizzle_window_host(const uint8_t *swizzled, int64_t row0, int64_t col0, int64_t tile_stride, ByteMatrix dst) {
  if (dst.rows == 0 || dst.cols == 0) return;
  parallel_for(dst.rows, 2 * dst.rows * dst.cols,
               [&](int64_t r0, int64_t r1) { unswizzle_rows(swizzled, row0, col0, tile_stride, dst, r0, r1); });
}

void unswizzle_host(const uint8_t *swizzled, ByteMatrix dst) {
  unswizzle_window_host(swizzled, 0, 0, ceil_div(dst.cols, kTileCols), dst);
}

void swizzle_host(ByteMatrix src, uint8_t *swizzled) {
  if (src.rows == 0 || src.cols == 0) return;  // its swizzled buffer has no bytes (and may be NULL)
  const int64_t padded_rows = round_up(src.rows, kTileRows);
  const int64_t padded_cols = round_up(src.cols, kTileCols);
  std::memset(swizzled, 0, static_cast<size_t>(padded_rows * padded_cols));
  for (int64_t r = 0; r < src.rows; ++r)
    for (int64_t c = 0; c < src.cols; ++c)
      swizzled[swizzled_offset(r, c, padded_cols)] = src.data[r * src.row_stride + c * src.col_stride];
}

void copy_matrix_host(ByteMatrix src, ByteMatrix dst) {
  if (src.rows == 0 || src.cols == 0) return;
  if (src.col_stride == 1 && dst.col_stride == 1) {
    // Both sides dense (rows back to back: the merged job of experts' compact scales): one copy, not one a
    // row (the 32768 2-byte rows of 256 experts of 128 rows took ~1.4 ns a row).
    if (src.row_stride == src.cols && dst.row_stride == dst.cols) {
      std::memcpy(dst.data, src.data, static_cast<size_t>(src.rows * src.cols));
      return;
    }
    for (int64_t r = 0; r < src.rows; ++r)
      std::memcpy(dst.data + r * dst.row_stride, src.data + r * src.row_stride,
                  static_cast<size_t>(src.cols));
    return;
  }
  for (int64_t r = 0; r < src.rows; ++r)
    for (int64_t c = 0; c < src.cols; ++c)
      dst.data[r * dst.row_stride + c * dst.col_stride] = src.data[r * src.row_stride + c * src.col_stride];
}

void copy_swizzled_host(const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  const int64_t padded_rows = round_up(rows, kTileRows), padded_cols = round_up(cols, kTileCols);
  const size_t bytes = static_cast<size_t>(padded_rows * padded_cols);
  if (padded_rows == rows && padded_cols == cols) {  // no padding: the copy it is
    std::memcpy(dst, src, bytes);
    return;
  }
  std::memset(dst, 0, bytes);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; c += kTileCols) {
      const int64_t at = swizzled_offset(r, c, padded_cols);  // the row's word in this tile
      std::memcpy(dst + at, src + at, static_cast<size_t>(cols - c < kTileCols ? cols - c : kTileCols));
    }
}

void run_job_host(const ScaleJob &job) {
  switch (job.kind) {
    case JobKind::Copy:
      return copy_matrix_host(job.src, job.dst);
    case JobKind::Unswizzle: {
      const int64_t stride = job.swizzled_tile_stride ? job.swizzled_tile_stride : ceil_div(job.dst.cols, kTileCols);
      return unswizzle_window_host(job.swizzled, job.swizzled_row0, job.swizzled_col0, stride, job.dst);
    }
    case JobKind::Swizzle:
      return swizzle_host(job.src, job.dst.data);
    case JobKind::SwizzledCopy:
      return copy_swizzled_host(job.swizzled, job.dst.data, job.dst.rows, job.dst.cols);
    case JobKind::Layout:
      return write_layout_host(job);
    case JobKind::PermuteRows:
      return permute_rows_host(job);
  }
  fail(MXFP8_ERROR_INTERNAL, "a scale job of unknown kind ", static_cast<int>(job.kind));
}

}  // namespace mxfp8
