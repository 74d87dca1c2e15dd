// How the bulk copy (src/cuda/bulk_copy_cuda.cu) cuts a span of `rows` rows of `row_bytes` bytes into
// chunks of at most kCopyChunkBytes, one shared-memory stage each. Host-callable so that a host test
// (tests/c/test_copy_chunks.cpp) checks, for many shapes, that the chunks the kernel places cover every
// byte of the span once, in order.
//
// Rows no longer than a chunk go whole, as many as fit (a K shard's 1 KiB rows: 16 a chunk, the last
// chunk of the span fewer); a longer row is cut into pieces of kCopyChunkBytes, the last shorter (a
// contiguous span is one such row).
#pragma once

#include <cstdint>

#include "core/swizzle_index.hpp"  // MXFP8_HOST_DEVICE

namespace mxfp8 {

constexpr int64_t kCopyChunkBytes = 16384;

// One chunk: `rows` rows of `bytes` each, from row `row` at byte `offset` of the row.
struct CopyChunk {
  int64_t row;
  int64_t offset;
  int64_t rows;
  int64_t bytes;
};

// Chunks of a span of rows of `row_bytes` (> 0): whole rows a chunk, or chunks a row.
MXFP8_HOST_DEVICE inline int64_t copy_rows_per_chunk(int64_t row_bytes) {
  return row_bytes <= kCopyChunkBytes ? kCopyChunkBytes / row_bytes : 1;
}
MXFP8_HOST_DEVICE inline int64_t copy_chunks_per_row(int64_t row_bytes) {
  return row_bytes <= kCopyChunkBytes ? 1 : (row_bytes + kCopyChunkBytes - 1) / kCopyChunkBytes;
}

// How many chunks the span has (rows >= 0, row_bytes > 0).
MXFP8_HOST_DEVICE inline int64_t copy_chunk_count(int64_t row_bytes, int64_t rows) {
  const int64_t per_chunk = copy_rows_per_chunk(row_bytes);
  return (rows + per_chunk - 1) / per_chunk * copy_chunks_per_row(row_bytes);
}

// Chunk `index` (0 .. copy_chunk_count - 1) of the span.
MXFP8_HOST_DEVICE inline CopyChunk copy_chunk(int64_t row_bytes, int64_t rows, int64_t index) {
  const int64_t per_chunk = copy_rows_per_chunk(row_bytes), per_row = copy_chunks_per_row(row_bytes);
  const int64_t row = index / per_row * per_chunk, offset = index % per_row * kCopyChunkBytes;
  const int64_t rows_left = rows - row, bytes_left = row_bytes - offset;
  return CopyChunk{row, offset, rows_left < per_chunk ? rows_left : per_chunk,
                   bytes_left < kCopyChunkBytes ? bytes_left : kCopyChunkBytes};
}

}  // namespace mxfp8
