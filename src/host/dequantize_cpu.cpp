// The host loop of mxfp8_dequantize.
#include "core/mx_numerics.hpp"
#include "core/quantize.hpp"
#include "core/shape.hpp"

namespace mxfp8 {

void dequantize_host(const DequantizeJob &j) {
  for (int64_t r = 0; r < j.rows; ++r)
    for (int64_t k = 0; k < j.cols; ++k) {
      const uint8_t e = j.columnwise ? j.scales[(r / kBlockSize) * j.scale_row_stride + k]
                                     : j.scales[r * j.scale_row_stride + k / kBlockSize];
      const float v = dequantize_element(j.values[r * j.cols + k], e, j.e5m2);
      if (j.bf16_output) static_cast<uint16_t *>(j.output)[r * j.cols + k] = float_to_bf16(v);
      else static_cast<float *>(j.output)[r * j.cols + k] = v;
    }
}

}  // namespace mxfp8
