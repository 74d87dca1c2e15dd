// Host loops for the scale matrix operations.
#include <cstring>

#include "core/scale_copy.hpp"
#include "core/shape.hpp"
#include "core/swizzle_index.hpp"

namespace mxfp8 {

// Every loop below is over rows x cols: an empty matrix returns first, so the work is proportional to
// bytes, never to a dimension of an empty matrix (2^40 rows of 0 columns).
void unswizzle_host(const uint8_t *swizzled, ByteMatrix dst) {
  if (dst.rows == 0 || dst.cols == 0) return;
  const int64_t padded_cols = round_up(dst.cols, kTileCols);
  if (dst.col_stride == 1) {
    // The 4 scales of one row inside a tile are one aligned word: move words, not bytes.
    for (int64_t r = 0; r < dst.rows; ++r) {
      uint8_t *row = dst.data + r * dst.row_stride;
      int64_t c = 0;
      for (; c + kTileCols <= dst.cols; c += kTileCols)
        std::memcpy(row + c, swizzled + swizzled_offset(r, c, padded_cols), kTileCols);
      for (; c < dst.cols; ++c) row[c] = swizzled[swizzled_offset(r, c, padded_cols)];
    }
    return;
  }
  for (int64_t r = 0; r < dst.rows; ++r)
    for (int64_t c = 0; c < dst.cols; ++c)
      dst.data[r * dst.row_stride + c * dst.col_stride] = swizzled[swizzled_offset(r, c, padded_cols)];
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
  if (job.to_swizzled) {
    if (job.swizzled) copy_swizzled_host(job.swizzled, job.dst.data, job.dst.rows, job.dst.cols);
    else swizzle_host(job.src, job.dst.data);
  } else if (job.swizzled) {
    unswizzle_host(job.swizzled, job.dst);
  } else {
    copy_matrix_host(job.src, job.dst);
  }
}

}  // namespace mxfp8
