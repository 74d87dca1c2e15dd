// Neighbouring jobs that are one matrix: merged before they run, so a batch of stacked experts is one
// job instead of one per expert (a smaller kernel parameter and fewer job lookups on the device; see
// coalesce_jobs in scale_job.hpp).
#include "core/scale_job.hpp"

#include "core/shape.hpp"
#include "core/swizzle_index.hpp"

namespace mxfp8 {
namespace {

// `b` is what a write of `a`'s dst continues with: the same columns and strides, its first row the one
// after `a`'s last.
bool dst_continues(const ByteMatrix &a, const ByteMatrix &b) {
  return a.cols == b.cols && a.row_stride == b.row_stride && a.col_stride == 1 && b.col_stride == 1 &&
         b.data == a.data + a.rows * a.row_stride;
}

// Every field the two kinds below do not read, equal (their defaults, in practice).
bool same_options(const ScaleJob &a, const ScaleJob &b) {
  return a.kind == b.kind && a.zero_as_one == b.zero_as_one && a.layout == b.layout &&
         a.source_layout == b.source_layout && a.source_transposed == b.source_transposed &&
         a.read_transposed == b.read_transposed && a.group_rows == b.group_rows && a.layout_bytes == b.layout_bytes;
}

// Tiles between a swizzled source's tile rows (0 in a job: the matrix's own, roundup(cols, 4) / 4).
int64_t tile_stride(const ScaleJob &j) {
  return j.swizzled_tile_stride != 0 ? j.swizzled_tile_stride : ceil_div(j.dst.cols, kTileCols);
}

bool mergeable(const ScaleJob &a, const ScaleJob &b) {
  if (!same_options(a, b) || a.dst.rows <= 0 || b.dst.rows <= 0 || !dst_continues(a.dst, b.dst)) return false;
  switch (a.kind) {
    case JobKind::Copy:  // row-major source rows that continue the same way
      return a.src.cols == b.src.cols && a.src.row_stride == b.src.row_stride && a.src.col_stride == 1 &&
             b.src.col_stride == 1 && b.src.data == a.src.data + a.src.rows * a.src.row_stride;
    case JobKind::Unswizzle: {
      // Two swizzled matrices (or windows of one parent, at its tile-row stride) are one when the first
      // fills whole 128-row tiles and the second's first tile row is the one after the first's last.
      const int64_t stride = tile_stride(a);
      return a.swizzled && a.swizzled_row0 == 0 && a.swizzled_col0 == 0 && b.swizzled_row0 == 0 &&
             b.swizzled_col0 == 0 && tile_stride(b) == stride && a.dst.rows % kTileRows == 0 &&
             b.swizzled == a.swizzled + a.dst.rows / kTileRows * stride * kTileBytes;
    }
    default:
      return false;
  }
}

// Folds `next` into `into` (mergeable(into, next) holds).
void merge_into(ScaleJob &into, const ScaleJob &next) {
  into.dst.rows += next.dst.rows;
  if (into.kind == JobKind::Copy) into.src.rows += next.src.rows;
}

}  // namespace

void coalesce_jobs(std::vector<ScaleJob> &jobs) {
  size_t kept = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (kept > 0 && mergeable(jobs[kept - 1], jobs[i])) {
      merge_into(jobs[kept - 1], jobs[i]);
      continue;
    }
    jobs[kept++] = jobs[i];
  }
  jobs.resize(kept);
}

void append_coalesced(std::vector<ScaleJob> &jobs, const ScaleJob &job) {
  if (!jobs.empty() && mergeable(jobs.back(), job)) return merge_into(jobs.back(), job);
  jobs.push_back(job);
}

}  // namespace mxfp8
