// The bulk copy's chunks (src/core/copy_chunks.hpp), run on the host: for spans of many row sizes and row
// counts, the chunks copy_chunk places (as the kernel in src/cuda/bulk_copy_cuda.cu places them) must
// cover every byte of the span exactly once, in increasing order, each fitting one 16 KiB stage; a chunk
// of several rows takes them whole; and for rows a multiple of 16 bytes (all the kernel is given) every
// piece starts and ends on 16 bytes, the unit of cp.async.bulk. The kernel itself is checked against the
// host path on the GPU (test_gpu: the shard buckets and imports, whose K shards are such spans).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "core/copy_chunks.hpp"

namespace {

int failures = 0;

void expect(bool ok, const char *what, int64_t row_bytes, int64_t rows, int64_t chunk) {
  if (ok) return;
  if (++failures <= 20)
    std::fprintf(stderr, "FAIL %s: row_bytes %lld rows %lld chunk %lld\n", what, static_cast<long long>(row_bytes),
                 static_cast<long long>(rows), static_cast<long long>(chunk));
}

void check_span(int64_t row_bytes, int64_t rows) {
  using mxfp8::kCopyChunkBytes;
  std::vector<uint8_t> covered(static_cast<size_t>(row_bytes * rows), 0);
  const int64_t count = mxfp8::copy_chunk_count(row_bytes, rows);
  int64_t last_start = -1;
  for (int64_t i = 0; i < count; ++i) {
    const mxfp8::CopyChunk c = mxfp8::copy_chunk(row_bytes, rows, i);
    expect(c.rows >= 1 && c.bytes >= 1, "an empty chunk", row_bytes, rows, i);
    expect(c.rows * c.bytes <= kCopyChunkBytes, "a chunk larger than a stage", row_bytes, rows, i);
    expect(c.rows == 1 || (c.offset == 0 && c.bytes == row_bytes), "a chunk of several rows takes part of one",
           row_bytes, rows, i);
    expect(c.row >= 0 && c.row + c.rows <= rows && c.offset >= 0 && c.offset + c.bytes <= row_bytes,
           "a chunk outside the span", row_bytes, rows, i);
    if (row_bytes % 16 == 0) expect(c.offset % 16 == 0 && c.bytes % 16 == 0, "a piece off 16 bytes", row_bytes, rows, i);
    const int64_t start = c.row * row_bytes + c.offset;
    expect(start > last_start, "chunks out of order", row_bytes, rows, i);
    last_start = start;
    if (c.row < 0 || c.row + c.rows > rows || c.offset < 0 || c.offset + c.bytes > row_bytes) continue;
    for (int64_t r = c.row; r < c.row + c.rows; ++r)
      for (int64_t b = c.offset; b < c.offset + c.bytes; ++b) ++covered[static_cast<size_t>(r * row_bytes + b)];
  }
  for (size_t at = 0; at < covered.size(); ++at)
    if (covered[at] != 1) {
      expect(false, covered[at] ? "a byte copied twice" : "a byte not copied", row_bytes, rows, static_cast<int64_t>(at));
      break;
    }
}

}  // namespace

int main() {
  // Rows of a K shard (800 B, TP-8 1 KiB and 3.5 KiB), exactly a chunk, just over, several chunks with a
  // short last piece, odd sizes (the index math does not need 16), and one contiguous span per size.
  const int64_t row_sizes[] = {1, 16, 48, 800, 1024, 3584, 5000, 8192, 16368, 16384, 16400, 34848, 49152, 100003};
  const int64_t row_counts[] = {0, 1, 2, 3, 15, 16, 17, 20, 21, 63, 333};
  int spans = 0;
  for (int64_t row_bytes : row_sizes)
    for (int64_t rows : row_counts) {
      check_span(row_bytes, rows);
      ++spans;
    }
  if (failures) {
    std::fprintf(stderr, "%d failures\n", failures);
    return 1;
  }
  std::printf("copy chunks: %d spans, every byte once, in order, within a stage\n", spans);
  return 0;
}
