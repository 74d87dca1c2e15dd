// One scale per 32x32 block from the stored 1x32 scales, on the host.
#include "scale_source.hpp"

namespace mxfp8 {

// Reports the disagreement with the smallest row-major index in S, as the CUDA version does.
BlockMismatch block_scales_host(const ScaleSource &s, int axis, ByteMatrix out) {
  BlockMismatch first;
  int64_t first_index = -1;
  for (int64_t br = 0; br < out.rows; ++br)
    for (int64_t bc = 0; bc < out.cols; ++bc) {
      const int64_t r0 = axis == 0 ? br * kBlockSize : br, c0 = axis == 0 ? bc : bc * kBlockSize;
      const uint8_t value = *scale_address(s, r0, c0);
      out.data[br * out.row_stride + bc * out.col_stride] = value;
      for (int64_t i = 1; i < kBlockSize; ++i) {
        const int64_t r = axis == 0 ? r0 + i : r0, c = axis == 0 ? c0 : c0 + i;
        if (r >= s.rows || c >= s.cols) break;
        if (*scale_address(s, r, c) == value) continue;
        if (first_index < 0 || r * s.cols + c < first_index) {
          first_index = r * s.cols + c;
          first = BlockMismatch{r, c};
        }
        break;
      }
    }
  return first;
}

}  // namespace mxfp8
