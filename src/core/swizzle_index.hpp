// The one place the cuBLAS block-scaling ("128x4") layout is written down, usable on host and device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define MXFP8_HOST_DEVICE __host__ __device__
#else
#define MXFP8_HOST_DEVICE
#endif

namespace mxfp8 {

constexpr int64_t kBlockSize = 32;    // values sharing one E8M0 scale
constexpr int64_t kTileRows = 128;    // rows of one swizzled scale tile
constexpr int64_t kTileCols = 4;      // columns of one tile: the 4 scales of a row form one 32-bit word
constexpr int64_t kSubtileRows = 32;  // a tile interleaves 4 sub-tiles of 32 rows
constexpr int64_t kTileBytes = kTileRows * kTileCols;            // 512
constexpr int64_t kLineBytes = kTileBytes / kSubtileRows;        // 16: one line holds 4 rows' words

// Byte offset of scale (r, c) of a matrix with `padded_cols` = roundup(C, 4) columns.
// A tile covers 128 rows x 4 columns (512 bytes); tiles are stored row of tiles by row of tiles.
// Inside a tile, row r lands in 16-byte line r % 32, at word (r % 128) / 32, so the four scales of one
// row inside one tile are a single aligned 32-bit word.
MXFP8_HOST_DEVICE inline int64_t swizzled_offset(int64_t r, int64_t c, int64_t padded_cols) {
  const int64_t tile = (r / kTileRows) * (padded_cols / kTileCols) + c / kTileCols;
  return tile * kTileBytes + (r % kSubtileRows) * kLineBytes +
         ((r % kTileRows) / kSubtileRows) * kTileCols + (c % kTileCols);
}

}  // namespace mxfp8
