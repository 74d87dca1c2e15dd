// The mapping of a "direct" chunk of the scale kernel (src/cuda/scale_jobs_cuda.cu): how a narrow swizzled
// matrix (a row of at most half a chunk's tiles, e.g. an MoE down projection's 24 scales = 6 tiles) is cut
// into chunks, staged in shared memory and written out. Host-callable so that a host test
// (tests/c/test_direct_chunk.cpp) checks the same functions the kernel uses against the swizzle formula.
//
// A direct chunk is `direct_tile_rows_per_chunk` whole tile rows: tiles_per_chunk / tile_cols of them
// (>= 2, since a direct matrix has 2 * tile_cols <= tiles_per_chunk), the last chunk of a matrix fewer.
// Its tiles are consecutive in the swizzled buffer (tile row by tile row) and its compact output is the
// rows 128 * first_tile_row on: with dense rows, one contiguous run, written in order.
//
// Words of a chunk. The compact word (r, j) — the 4 scales of chunk row r (0 .. 128 * tile rows - 1) in
// tile column j — has the index w = r * tile_cols + j ("compact order"). In the swizzled buffer the
// chunk's tile t = (r / 128) * tile_cols + j holds it in 16-byte line r % 32, 32-bit word (r % 128) / 32:
// chunk vector (16-byte load) i is line i % 32 of tile i / 32, and its word s is compact word
// direct_compact_word(i / 32, i % 32, s, tile_cols).
//
// Shared memory holds the chunk in compact order with one padding word after every 32
// (direct_staging_slot). Why, in banks (word index mod 32):
// - Staging: a warp holds the 32 lines of one tile, and for each s its lanes write the words of rows
//   l + 32 s, l = 0..31, in one column: compact words B + l * tile_cols. Without padding that is a
//   gcd(tile_cols, 32)-way conflict (16-way for 16 tile columns, 2-way for 6); with it, at most 2-way
//   for every tile_cols <= 30 (checked over all tile_cols by the test), 31-way for 31 (wide chunks
//   only, rows of 121-124 scales: slow, not wrong).
// - Store: lane l of a warp takes 4 consecutive compact words 4 q .. 4 q + 3 (q = a multiple of 32 plus
//   l) for one 16-byte global store; its 4 loads (one per word) hit banks 4 (l % 8) + k + l / 8 plus a
//   constant: all 32 distinct (no conflict).
#pragma once

#include "core/swizzle_index.hpp"

namespace mxfp8 {

// Whole tile rows of `tile_cols` tiles that fit in a chunk of `tiles_per_chunk` tiles.
MXFP8_HOST_DEVICE inline int direct_tile_rows_per_chunk(int tiles_per_chunk, int tile_cols) {
  return tiles_per_chunk / tile_cols;
}

// The compact word (chunk row * tile_cols + tile column) that word s of line `line` of the chunk's tile
// `tile` holds: chunk row (tile / tile_cols) * 128 + 32 s + line, tile column tile % tile_cols.
// The same with the tile given as (tile row of the chunk, tile column): what the kernel steps through.
MXFP8_HOST_DEVICE inline int direct_compact_word_at(int tile_row, int tile_col, int line, int s, int tile_cols) {
  return (tile_row * static_cast<int>(kTileRows) + s * static_cast<int>(kSubtileRows) + line) * tile_cols + tile_col;
}
MXFP8_HOST_DEVICE inline int direct_compact_word(int tile, int line, int s, int tile_cols) {
  return direct_compact_word_at(tile / tile_cols, tile % tile_cols, line, s, tile_cols);
}

// The shared-memory word that holds compact word w: one padding word after every 32 (see above).
MXFP8_HOST_DEVICE inline int direct_staging_slot(int w) { return w + (w >> 5); }

// Shared-memory words a direct chunk of `tiles_per_chunk` tiles needs (128 words a tile, plus padding).
constexpr int direct_staging_words(int tiles_per_chunk) {
  return tiles_per_chunk * static_cast<int>(kTileRows) + tiles_per_chunk * static_cast<int>(kTileRows) / 32;
}

}  // namespace mxfp8
