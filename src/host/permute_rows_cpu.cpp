// The host loop of a row-permuted copy (scale_job.hpp): the values of the TRT-LLM layouts, whose rows
// move as their scale rows do (target_layout.hpp). Each destination row is one memcpy from the source
// row the layout names (padded: and zeros for the padding); rows are split across threads.
#include <cstring>

#include "core/scale_job.hpp"
#include "core/target_layout.hpp"
#include "host/host_threads.hpp"

namespace mxfp8 {

void permute_rows_host(const ScaleJob &job) {
  const int64_t rows = job.dst.rows, cols = job.dst.cols, group = job.group_rows;
  if (rows == 0 || cols == 0) return;
  parallel_for(rows, 2 * rows * cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t first = r - r % group;  // the group's (expert's) first row
      const int64_t d = layout_source_row(job.layout, group, r - first);
      uint8_t *out = job.dst.data + r * job.dst.row_stride;
      if (!job.pad.rows) {
        std::memcpy(out, job.src.data + (first + d) * job.src.row_stride, static_cast<size_t>(cols));
        continue;
      }
      // Padded: the group's rows in src are pad.rows apart; padding rows and columns are zeros.
      const int64_t from = padded_source_row<int64_t>(job.pad.rows, group, job.pad.halves, d);
      const int64_t copied = from == kPaddingRow<int64_t> ? 0 : job.pad.cols;
      if (copied) std::memcpy(out, job.src.data + (r / group * job.pad.rows + from) * job.src.row_stride, static_cast<size_t>(copied));
      std::memset(out + copied, 0, static_cast<size_t>(cols - copied));
    }
  });
}

}  // namespace mxfp8
