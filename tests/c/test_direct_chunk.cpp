// The direct-chunk mapping of the scale kernel (src/core/direct_chunk.hpp), run on the host: for narrow
// matrices of many shapes, a swizzled buffer built from the swizzle formula (swizzle_index.hpp, with
// random bytes in its padding) is cut into chunks, staged and stored by a host transcription of the
// kernel's direct path (locate, stage_chunk, store_direct_chunk in src/cuda/scale_jobs_cuda.cu), and the
// compact matrix it writes must equal the one the buffer was built from, every padding byte of the
// destination untouched. Also checked: every chunk covers whole tile rows, the kernel's stepped (tile row,
// tile column) per vector equals the division, the byte-by-byte staging agrees, no two words of a chunk share
// a shared-memory slot, the store reads only staged slots, the slots fit direct_staging_words, and the
// bank conflicts of both shared-memory phases are what the header says (staging at most 2-way for
// tile_cols <= 30, stores conflict-free). The kernel itself is checked against the host path on the GPU
// (test_gpu: narrow random shapes, and the grouped narrow experts case).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/direct_chunk.hpp"

namespace mxfp8 {
namespace {

int failures = 0;

void expect(bool ok, const char *what, int rows, int cols, int tiles_per_chunk, long detail) {
  if (ok) return;
  if (++failures <= 20)
    std::fprintf(stderr, "FAIL %s: rows %d cols %d chunk %d tiles (%ld)\n", what, rows, cols, tiles_per_chunk, detail);
}

constexpr int kThreadsPerTile = 8;  // W::kThreads = tiles per chunk * 8, as in the kernel

// One export of a (rows, cols) scale matrix as a direct job, the destination rows row_stride apart.
void check_shape(int rows, int cols, int tiles_per_chunk, int64_t row_stride, int64_t col_stride, std::mt19937 &rng) {
  const int tile_cols = (cols + 3) / 4, tile_rows = (rows + 127) / 128;
  if (2 * tile_cols > tiles_per_chunk) return;  // not a direct job
  const int threads = tiles_per_chunk * kThreadsPerTile;
  const int64_t padded_cols = int64_t{tile_cols} * 4;
  std::vector<uint8_t> swizzled(static_cast<size_t>(tile_rows) * tile_cols * kTileBytes);
  for (auto &b : swizzled) b = static_cast<uint8_t>(rng());  // padding rows and columns: garbage
  std::vector<uint8_t> want(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      want[static_cast<size_t>(r) * cols + c] = static_cast<uint8_t>(rng());
      swizzled[swizzled_offset(r, c, padded_cols)] = want[static_cast<size_t>(r) * cols + c];
    }
  const int64_t dst_bytes = (rows - 1) * row_stride + (cols - 1) * col_stride + 1;
  constexpr uint8_t kPoison = 0xA5;
  std::vector<uint8_t> dst(static_cast<size_t>(dst_bytes), kPoison);
  std::vector<bool> written(dst.size(), false);

  const int per_chunk = direct_tile_rows_per_chunk(tiles_per_chunk, tile_cols);
  expect(per_chunk >= 2 && per_chunk * tile_cols <= tiles_per_chunk, "tile rows per chunk", rows, cols, tiles_per_chunk, per_chunk);
  const int chunks = (tile_rows + per_chunk - 1) / per_chunk;  // chunks_of
  const int staging_words = direct_staging_words(tiles_per_chunk);
  for (int local = 0; local < chunks; ++local) {
    // locate
    const int tile_row = local * per_chunk;
    const int tiles = std::min(per_chunk, tile_rows - tile_row) * tile_cols;
    const int64_t linear_tile = int64_t{tile_row} * tile_cols;
    expect(tiles > 0 && tiles <= tiles_per_chunk && tiles % tile_cols == 0, "chunk tiles", rows, cols, tiles_per_chunk, tiles);
    // stage_chunk: thread x holds vectors x + v * threads; vector i is line i % 32 of tile i / 32.
    std::vector<uint32_t> smem(static_cast<size_t>(staging_words), 0);
    std::vector<bool> staged(smem.size(), false);
    const int vectors = tiles * 32;
    for (int i = 0; i < vectors; ++i) {
      const uint8_t *line = swizzled.data() + (linear_tile * 32 + i) * 16;
      const int w = direct_compact_word(i / 32, i % 32, 0, tile_cols);
      for (int s = 0; s < 4; ++s) {
        const int slot = direct_staging_slot(w + s * 32 * tile_cols);
        expect(slot >= 0 && slot < staging_words, "slot in range", rows, cols, tiles_per_chunk, slot);
        if (slot < 0 || slot >= staging_words) continue;
        expect(!staged[slot], "slot written once", rows, cols, tiles_per_chunk, slot);
        // The byte-by-byte fallback's index: word i * 4 + s of the chunk is line (i * 4 + s) % 128 / 4, sub-tile s.
        const int fw = (i * 4 + s) % 128;
        expect(direct_staging_slot(direct_compact_word((i * 4 + s) / 128, fw / 4, fw % 4, tile_cols)) == slot,
               "fallback staging agrees", rows, cols, tiles_per_chunk, i);
        staged[slot] = true;
        smem[slot] = uint32_t{line[4 * s]} | uint32_t{line[4 * s + 1]} << 8 | uint32_t{line[4 * s + 2]} << 16 |
                     uint32_t{line[4 * s + 3]} << 24;
      }
    }
    // The kernel steps each thread's (tile row, tile column) from vector to vector instead of dividing.
    for (int x = 0; x < threads; ++x) {
      const int tile_step = threads / 32, line = x % 32, tile0 = x / 32;
      int tile_row = tile0 / tile_cols, tile_col = tile0 - tile_row * tile_cols;
      const int step_rows = tile_step / tile_cols, step_cols = tile_step - step_rows * tile_cols;
      for (int v = 0; v < 4; ++v) {
        const int i = x + v * threads;
        expect(direct_compact_word_at(tile_row, tile_col, line, 0, tile_cols) == direct_compact_word(i / 32, i % 32, 0, tile_cols),
               "stepped tile agrees", rows, cols, tiles_per_chunk, i);
        tile_col += step_cols;
        tile_row += step_rows + (tile_col >= tile_cols);
        if (tile_col >= tile_cols) tile_col -= tile_cols;
      }
    }
    // Staging bank conflicts: a warp is 32 consecutive vectors (one tile); one store per s.
    for (int warp0 = 0; warp0 < vectors; warp0 += 32)
      for (int s = 0; s < 4; ++s) {
        int per_bank[32] = {0}, worst = 0;
        for (int l = 0; l < 32; ++l) {
          const int i = warp0 + l;
          worst = std::max(worst, ++per_bank[direct_staging_slot(direct_compact_word(i / 32, i % 32, s, tile_cols)) % 32]);
        }
        expect(worst <= (tile_cols <= 30 ? 2 : 32), "staging at most 2-way", rows, cols, tiles_per_chunk, worst);
      }
    // store_direct_chunk
    const int row0 = tile_row * 128;
    const int words = std::min((tiles / tile_cols) * 128, rows - row0) * tile_cols;
    for (int warp_w0 = 0; warp_w0 < words; warp_w0 += 128)
      for (int k = 0; k < 4; ++k) {  // store-side bank conflicts: lane l reads word warp_w0 + 4 l + k
        int per_bank[32] = {0}, worst = 0;
        for (int l = 0; l < 32; ++l) worst = std::max(worst, ++per_bank[direct_staging_slot(warp_w0 + 4 * l + k) % 32]);
        expect(worst == 1, "store reads conflict-free", rows, cols, tiles_per_chunk, worst);
      }
    // The kernel's choice of 16-byte stores (dst itself 16-byte aligned here, offset 0).
    const int64_t run = row0 * row_stride;
    const bool word_stores = col_stride == 1 && row_stride % 4 == 0;
    const bool vector_stores = word_stores && cols % 4 == 0 && run % 16 == 0 &&
                         (row_stride == cols || (tile_cols % 4 == 0 && row_stride % 16 == 0));
    for (int t = 0; t < threads; ++t)
      for (int w0 = 4 * t; w0 < words; w0 += 4 * threads) {
        if (vector_stores && w0 + 4 <= words) {  // one 16-byte store of words w0 .. w0 + 3
          const int64_t at = run + (w0 / tile_cols) * row_stride + 4 * (w0 % tile_cols);
          expect(at % 16 == 0, "16-byte store aligned", rows, cols, tiles_per_chunk, at);
          for (int k = 0; k < 4; ++k) {
            const int w = w0 + k;
            expect(at + 4 * k == (row0 + w / tile_cols) * row_stride + 4 * (w % tile_cols), "16-byte store contiguous", rows, cols,
                   tiles_per_chunk, w);
            for (int b = 0; b < 4; ++b) {
              expect(!written[at + 4 * k + b], "byte written once", rows, cols, tiles_per_chunk, at);
              written[at + 4 * k + b] = true;
              dst[at + 4 * k + b] = static_cast<uint8_t>(smem[direct_staging_slot(w)] >> (8 * b));
            }
          }
          continue;
        }
        for (int w = w0; w < w0 + 4; ++w) {
          const int slot = direct_staging_slot(w);
          expect(slot < staging_words && staged[slot], "store reads staged slots", rows, cols, tiles_per_chunk, w);
          if (w >= words) continue;  // the vector path reads 4 words, the word path stops here
          const int r = row0 + w / tile_cols, col = 4 * (w % tile_cols);
          const int valid = std::min(4, cols - col);
          for (int b = 0; b < valid; ++b) {
            const int64_t at = r * row_stride + (col + b) * col_stride;
            expect(!written[at], "byte written once", rows, cols, tiles_per_chunk, at);
            written[at] = true;
            dst[at] = static_cast<uint8_t>(smem[slot] >> (8 * b));
          }
        }
      }
  }
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int64_t at = r * row_stride + c * col_stride;
      expect(dst[at] == want[static_cast<size_t>(r) * cols + c], "compact scale", rows, cols, tiles_per_chunk, r * 100000L + c);
      written[at] = false;  // left: bytes written outside the matrix
      dst[at] = kPoison;
    }
  for (size_t at = 0; at < dst.size(); ++at)
    if (written[at] || dst[at] != kPoison) {
      expect(false, "padding untouched", rows, cols, tiles_per_chunk, static_cast<long>(at));
      break;
    }
}

}  // namespace
}  // namespace mxfp8

int main() {
  using namespace mxfp8;
  std::mt19937 rng(21);
  int shapes = 0;
  // Every direct tile width (cols 1..128: 1..32 tile columns, narrow and wide chunks), partial and whole
  // tile rows, odd and even tile row counts; dense rows, padded rows, and a transposed destination.
  const int row_counts[] = {1, 31, 127, 128, 129, 640, 700, 1536, 4096};
  for (int tiles_per_chunk : {32, 64})
    for (int cols = 1; cols <= 128; ++cols)
      for (int rows : row_counts) {
        if (rows == 4096 && cols % 8 != 0) continue;  // time: 4096 rows for every 8th width (24, 64, 96 among them)
        check_shape(rows, cols, tiles_per_chunk, cols, 1, rng);
        if (cols % 7 == 0 || cols <= 3 || cols == 24) {
          check_shape(rows, cols, tiles_per_chunk, cols + 5, 1, rng);
          check_shape(rows, cols, tiles_per_chunk, 1, rows, rng);
        }
        // Rows 16-byte aligned, not dense: 16-byte stores along rows when tile_cols % 4 == 0, words otherwise.
        if (cols % 4 == 0) check_shape(rows, cols, tiles_per_chunk, (cols + 15) / 16 * 16 + 16, 1, rng);
        ++shapes;
      }
  if (failures) {
    std::fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  std::printf("direct chunks: %d shapes x 2 chunk widths, mapping, staging and banks as documented\n", shapes / 2);
  return 0;
}
