// The validated, immutable, reference-counted grouped MoE experts behind mxfp8_grouped_tensor.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "mxfp8/mxfp8.h"
#include "core/dlpack_tensor.hpp"
#include "core/scale_source.hpp"

struct mxfp8_grouped_tensor {
  mutable std::atomic<int64_t> references{1};
  DLManagedTensorVersioned *data = nullptr;   // owned: deleter at the end
  DLManagedTensorVersioned *scales = nullptr; // owned: deleter at the end
  mxfp8_format format = MXFP8_FORMAT_E4M3;
  mxfp8_scale_layout scale_layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  mxfp8_grouped_scales scale_packing = MXFP8_GROUPED_SCALES_PADDED;
  int64_t cols = 0;        // K
  int64_t scale_cols = 0;  // ceil(K/32)
  std::vector<int64_t> rows;          // per expert
  std::vector<int64_t> first_row;     // per expert, in the flat values
  std::vector<int64_t> scale_offset;  // per expert, bytes into the flat scales
  std::vector<mxfp8::ScaleSource> sources;  // per expert: where its rows x scale_cols scales are read from
  DLDevice device{};
};

namespace mxfp8 {
void retain(const mxfp8_grouped_tensor *grouped) noexcept;
void hold_for_call(const mxfp8_grouped_tensor &grouped);  // as for mxfp8_tensor (tensor.hpp)
void release(const mxfp8_grouped_tensor *grouped) noexcept;
KeepAlive keep_alive(const mxfp8_grouped_tensor *grouped);  // takes a reference on the group, for a view
}  // namespace mxfp8
