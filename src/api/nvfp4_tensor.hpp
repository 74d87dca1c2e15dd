// The validated, immutable, reference-counted NVFP4 tensor behind the opaque mxfp8_nvfp4_tensor handle.
// Each direction is one stored matrix (rows x cols: rowwise (M, K), columnwise the (K, M) transpose TE
// stores) scaled along its rows, so its block scales are the same Direction an MXFP8 tensor has, read and
// moved by the same scale sources and jobs, with 16 values per scale instead of 32.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <dlpack/dlpack.h>

#include "api/tensor.hpp"
#include "core/dlpack_tensor.hpp"
#include "core/memory_span.hpp"
#include "mxfp8/mxfp8.h"

namespace mxfp8 {

struct Nvfp4Direction {
  Direction part;  // data and scales: scale matrix rows x ceil(cols / 16), spans, where S is read from
  DLManagedTensorVersioned *amax = nullptr;
  const float *amax_data = nullptr;
  int64_t amax_count = 0;  // 1 (per tensor) or rows (per row)
  int64_t rows = 0;        // the stored matrix
  int64_t cols = 0;
  bool present() const { return part.present(); }
};

}  // namespace mxfp8

struct mxfp8_nvfp4_tensor {
  mutable std::atomic<int64_t> references{1};
  mxfp8_scale_layout scale_layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  int32_t e4m3_max = 448;
  std::vector<int64_t> shape;  // (*lead, K)
  int64_t rows = 0;            // M = prod(lead)
  int64_t cols = 0;            // K
  DLDevice device{};
  mxfp8::Nvfp4Direction directions[2];  // indexed by mxfp8_direction
};

namespace mxfp8 {
void retain(const mxfp8_nvfp4_tensor *tensor) noexcept;
void hold_for_call(const mxfp8_nvfp4_tensor &tensor);  // as for mxfp8_tensor (tensor.hpp)
void release(const mxfp8_nvfp4_tensor *tensor) noexcept;
KeepAlive keep_alive(const mxfp8_nvfp4_tensor *tensor);  // takes a reference
// Validates a description (what mxfp8_nvfp4_tensor_create does); takes nothing on failure.
std::unique_ptr<mxfp8_nvfp4_tensor> create_nvfp4_tensor(const mxfp8_nvfp4_tensor_desc &desc);
// Appends the spans of every buffer of `tensor` (data, scales, amax of both directions), read by the call.
void add_read_spans(const mxfp8_nvfp4_tensor &tensor, const char *kind, std::vector<Span> &spans);
// The same, named kind[index] (a tensor of a batched call).
void add_read_spans(const mxfp8_nvfp4_tensor &tensor, size_t index, const char *kind, std::vector<Span> &spans);
// Fails with MXFP8_ERROR_MISSING_DATA when the tensor has no data for `direction`.
const Nvfp4Direction &require_direction(const mxfp8_nvfp4_tensor &tensor, int32_t direction);
}  // namespace mxfp8
