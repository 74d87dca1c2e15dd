// The host loop of a layout job (scale_job.hpp): every byte of the target layout, in storage order,
// gathered through the layout's inverse index (target_layout.hpp). Writes are sequential; reads follow
// the source's own layout. Scales are a few percent of a transfer's bytes, so one loop serves every
// layout.
#include "core/scale_job.hpp"
#include "core/scale_source.hpp"
#include "core/target_layout.hpp"
#include "host/host_threads.hpp"

namespace mxfp8 {

void write_layout_host(const ScaleJob &job) {
  const int64_t rows = job.dst.rows, cols = job.dst.cols;
  if (rows == 0 || cols == 0) return;  // the layout has no bytes (and dst may be NULL)
  const int64_t size = layout_size(job.layout, rows, cols);
  const int64_t bytes = job.layout_bytes >= 0 && job.layout_bytes < size ? job.layout_bytes : size;
  const ScaleSource source = layout_job_source(job);
  constexpr int64_t kBytesPerPiece = 4096;
  const int64_t pieces = (bytes + kBytesPerPiece - 1) / kBytesPerPiece;
  parallel_for(pieces, 2 * bytes, [&](int64_t p0, int64_t p1) {
    const int64_t end = p1 * kBytesPerPiece < bytes ? p1 * kBytesPerPiece : bytes;
    const bool word_per_scale = job.layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32;  // pieces start at a word
    uint8_t scale = 0;
    for (int64_t at = p0 * kBytesPerPiece; at < end; ++at) {
      int64_t r, c;
      uint8_t v = 0;
      if (layout_element(job.layout, rows, cols, at, &r, &c)) {
        if (!word_per_scale || at % kFloat32Bytes == 0) {  // a float32's four bytes hold one scale
          scale = job.read_transposed ? layout_job_scale(source, job.pad, rows, c, r, job.zero_as_one)
                                      : layout_job_scale(source, job.pad, rows, r, c, job.zero_as_one);
        }
        v = layout_encode(job.layout, scale, at);
      }
      job.dst.data[at] = v;
    }
  });
}

}  // namespace mxfp8
