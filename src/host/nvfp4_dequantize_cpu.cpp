// The host loops of NVFP4 decoding: nvfp4_dequantize_element (nvfp4_decode.hpp) on every element, rows
// split across threads (host_threads.hpp), and the second-level scale of every amax. Scalar: for
// verification and for consumers without NVFP4 support, not a hot path.
#include "core/nvfp4_decode.hpp"
#include "host/host_threads.hpp"

namespace mxfp8 {

void nvfp4_dequantize_host(const Nvfp4DequantizeJob &j) {
  const int64_t element = j.bf16_output ? 2 : 4;
  const int64_t bytes = j.rows * (j.cols / 2 + j.cols * element);
  parallel_for(j.rows, bytes, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t c = 0; c < j.cols; ++c) {
        const float v = nvfp4_dequantize_element(j, r, c);
        const int64_t i = r * j.cols + c;
        if (j.bf16_output) static_cast<uint16_t *>(j.output)[i] = float_to_bf16(v);
        else static_cast<float *>(j.output)[i] = v;
      }
  });
}

void nvfp4_global_scales_host(const Nvfp4GlobalScaleJob *jobs, size_t count) {
  for (size_t k = 0; k < count; ++k)
    for (int64_t i = 0; i < jobs[k].count; ++i) jobs[k].out[i] = nvfp4_global_scale(jobs[k], i);
}

}  // namespace mxfp8
