// One scale per 32x32 block from the stored 1x32 scales, on the host.
#include "core/scale_source.hpp"

namespace mxfp8 {

// Reports the disagreement with the smallest row-major index in S, as the CUDA version does.
BlockMismatch block_scales_host(const ScaleSource &s, int axis, ByteMatrix out) {
  int64_t first = -1;
  for (int64_t br = 0; br < out.rows; ++br)
    for (int64_t bc = 0; bc < out.cols; ++bc) {
      uint8_t value;
      const int64_t mismatch = read_block(s, axis, br, bc, &value);
      out.data[br * out.row_stride + bc * out.col_stride] = value;
      if (mismatch >= 0 && (first < 0 || mismatch < first)) first = mismatch;
    }
  return first < 0 ? BlockMismatch{} : BlockMismatch{first / s.cols, first % s.cols};
}

}  // namespace mxfp8
