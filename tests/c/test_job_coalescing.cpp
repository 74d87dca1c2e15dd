// coalesce_jobs (src/core/job_coalescing.cpp): which neighbouring jobs become one, and that the merged list
// writes exactly the bytes the original list writes (and that append_coalesced, job by job, makes the same
// list). Each case is a list of Copy / Unswizzle jobs over one
// arena of random bytes; both lists run through a transcription of the jobs' meaning written here from
// the swizzle formula (the 128x4 tile: 32 rows of 16 bytes, row r's 4 bytes at (r % 32) * 16 +
// (r % 128 / 32) * 4), into destinations poisoned first, and the results must be equal byte for byte,
// with the job count the case names. The library's own job runners are checked against the formula
// elsewhere (test_grouped, test_gpu); here the question is only whether a merge keeps the meaning.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/scale_job.hpp"

namespace mxfp8 {
namespace {

int failures = 0;

void expect(bool ok, const char *what, const char *detail) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "FAIL %s: %s\n", what, detail);
}

constexpr size_t kArena = 1 << 20;

// The byte of scale (r, c) of a swizzled matrix whose tile rows are `stride` tiles apart.
size_t swizzled_at(int64_t r, int64_t c, int64_t stride) {
  return static_cast<size_t>(((r / 128) * stride + c / 4) * 512 + (r % 32) * 16 + (r % 128 / 32) * 4 + c % 4);
}

void run(const ScaleJob &j) {
  for (int64_t r = 0; r < j.dst.rows; ++r)
    for (int64_t c = 0; c < j.dst.cols; ++c) {
      uint8_t v;
      if (j.kind == JobKind::Copy) {
        v = j.src.data[r * j.src.row_stride + c * j.src.col_stride];
      } else {
        const int64_t stride = j.swizzled_tile_stride ? j.swizzled_tile_stride : (j.dst.cols + 3) / 4;
        v = j.swizzled[swizzled_at(j.swizzled_row0 + r, j.swizzled_col0 + c, stride)];
      }
      if (j.zero_as_one && v == 0) v = 127;
      j.dst.data[r * j.dst.row_stride + c * j.dst.col_stride] = v;
    }
}

struct Arena {
  std::vector<uint8_t> in, out;
  Arena() : in(kArena), out(kArena) {
    std::mt19937 rng(7);
    for (uint8_t &b : in) b = static_cast<uint8_t>(rng() % 254 + 1);
  }
};

// A whole swizzled matrix of `rows` x `cols` scales at byte `at` of the arena, written compact at `to`.
ScaleJob unswizzle(Arena &a, size_t at, int64_t rows, int64_t cols, size_t to) {
  ScaleJob j{JobKind::Unswizzle, a.in.data() + at, ByteMatrix{}, ByteMatrix{a.out.data() + to, rows, cols, cols, 1}};
  j.swizzled_tile_stride = (cols + 3) / 4;  // as compact_job makes it
  return j;
}

ScaleJob copy(Arena &a, size_t from, size_t to, int64_t rows, int64_t cols, int64_t src_stride) {
  return copy_job(ByteMatrix{a.in.data() + from, rows, cols, src_stride, 1},
                  ByteMatrix{a.out.data() + to, rows, cols, cols, 1});
}

size_t tiles_bytes(int64_t rows, int64_t cols) { return static_cast<size_t>((rows + 127) / 128 * 128 * ((cols + 3) / 4 * 4)); }

// The fields a merge changes or compares, equal.
bool same_job(const ScaleJob &x, const ScaleJob &y) {
  const auto same = [](const ByteMatrix &m, const ByteMatrix &n) {
    return m.data == n.data && m.rows == n.rows && m.cols == n.cols && m.row_stride == n.row_stride &&
           m.col_stride == n.col_stride;
  };
  return x.kind == y.kind && x.swizzled == y.swizzled && same(x.src, y.src) && same(x.dst, y.dst) &&
         x.swizzled_row0 == y.swizzled_row0 && x.swizzled_col0 == y.swizzled_col0 &&
         x.swizzled_tile_stride == y.swizzled_tile_stride && x.zero_as_one == y.zero_as_one;
}

void check(const char *name, Arena &a, std::vector<ScaleJob> jobs, size_t want_count) {
  std::vector<uint8_t> before(kArena);
  std::memset(a.out.data(), 0xEE, kArena);
  for (const ScaleJob &j : jobs) run(j);
  before = a.out;
  // append_coalesced, one job at a time, makes the list coalesce_jobs makes of them all.
  std::vector<ScaleJob> appended;
  for (const ScaleJob &j : jobs) append_coalesced(appended, j);
  coalesce_jobs(jobs);
  bool same = appended.size() == jobs.size();
  for (size_t i = 0; same && i < jobs.size(); ++i) same = same_job(appended[i], jobs[i]);
  expect(same, name, "append_coalesced made another list than coalesce_jobs");
  char detail[96];
  std::snprintf(detail, sizeof detail, "%zu jobs after coalescing, want %zu", jobs.size(), want_count);
  expect(jobs.size() == want_count, name, detail);
  std::memset(a.out.data(), 0xEE, kArena);
  for (const ScaleJob &j : jobs) run(j);
  expect(a.out == before, name, "the merged jobs write other bytes");
}

void cases() {
  Arena a;
  // Stacked experts, compact outputs back to back: 128 + 256 + 128 + 100 rows are one matrix (the 100-row
  // one ends it); the 128 rows after it stay a job of their own.
  {
    const int64_t rows[5] = {128, 256, 128, 100, 128}, cols = 3;
    std::vector<ScaleJob> jobs;
    size_t at = 0, to = 0;
    for (int64_t r : rows) {
      jobs.push_back(unswizzle(a, at, r, cols, to));
      at += tiles_bytes(r, cols);
      to += static_cast<size_t>(r * cols);
    }
    check("stacked experts", a, jobs, 2);
    // The same with the third expert's output elsewhere: the run breaks there and again after it.
    jobs[2].dst.data += 64;
    jobs[3].dst.data += 64;
    jobs[4].dst.data += 64;
    check("a destination that does not continue", a, jobs, 3);
  }
  // Two tensors over the same tile, the first using 100 of its rows: not one matrix.
  check("a source inside the first's tile", a, {unswizzle(a, 0, 100, 4, 0), unswizzle(a, 0, 128, 4, 400)}, 2);
  // Windows of one wider parent (12 columns: 3 tiles a tile row), tile-aligned, the rows continuing.
  {
    ScaleJob w0 = unswizzle(a, 0, 128, 4, 0), w1 = unswizzle(a, 3 * 512, 64, 4, 512);
    w0.swizzled_tile_stride = w1.swizzled_tile_stride = 3;
    check("tile-aligned windows of one parent", a, {w0, w1}, 1);
    ScaleJob w2 = w1;
    w2.swizzled_col0 = 1;  // a window starting inside a tile gathers: never merged
    check("a window inside a tile", a, {w0, w2}, 2);
  }
  // Anything that reads or writes differently stays apart: the fix-up, a transposed destination.
  {
    ScaleJob j0 = unswizzle(a, 0, 128, 4, 0), j1 = unswizzle(a, 512, 128, 4, 512);
    j1.zero_as_one = true;
    check("a different fix-up", a, {j0, j1}, 2);
    ScaleJob t0 = j0, t1 = unswizzle(a, 512, 128, 4, 512);
    t0.dst = ByteMatrix{t0.dst.data, 128, 4, 1, 128};
    t1.dst = ByteMatrix{t1.dst.data, 128, 4, 1, 128};
    check("transposed destinations", a, {t0, t1}, 2);
  }
  // Copies: rows that continue on both sides merge; a gap in the source, other columns, or a kind change
  // do not.
  check("copies back to back", a, {copy(a, 0, 0, 10, 48, 48), copy(a, 480, 480, 7, 48, 48), copy(a, 816, 816, 1, 48, 48)}, 1);
  check("strided copies back to back", a, {copy(a, 0, 0, 10, 48, 64), copy(a, 640, 480, 7, 48, 64)}, 1);
  check("a source gap", a, {copy(a, 0, 0, 10, 48, 48), copy(a, 500, 480, 7, 48, 48)}, 2);
  check("other columns", a, {copy(a, 0, 0, 10, 48, 48), copy(a, 480, 480, 10, 24, 24)}, 2);
  check("a copy then an unswizzle", a, {copy(a, 0, 0, 10, 48, 48), unswizzle(a, 4096, 128, 4, 480)}, 2);
  check("empty jobs are left alone", a, {copy(a, 0, 0, 0, 48, 48), copy(a, 0, 0, 10, 48, 48)}, 2);
}

}  // namespace
}  // namespace mxfp8

int main() {
  mxfp8::cases();
  if (mxfp8::failures) {
    std::fprintf(stderr, "%d failures\n", mxfp8::failures);
    return 1;
  }
  std::printf("job coalescing: every case merged as named, the same bytes written\n");
  return 0;
}
