// The validated, immutable, reference-counted tensor behind the opaque mxfp8_tensor handle: an MXFP8
// format, or MXFP8_FORMAT_NVFP4 (one type, whose NVFP4 fields MXFP8 tensors leave empty).
#pragma once

#include <atomic>
#include <memory>
#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/dlpack_tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/memory_span.hpp"
#include "mxfp8/mxfp8.h"
#include "core/scale_job.hpp"
#include "core/scale_source.hpp"

namespace mxfp8 {

// One direction's data and scales, with the geometry validated at creation.
struct Direction {
  DLManagedTensorVersioned *data = nullptr;
  DLManagedTensorVersioned *scales = nullptr;
  // The compact scale matrix S: R x C (rowwise: M x ceil(K/32); columnwise: ceil(M/32) x K).
  int64_t scale_rows = 0;
  int64_t scale_cols = 0;
  // For MXFP8_SCALE_LAYOUT_ROW_MAJOR: where S sits inside the (possibly padded) buffer.
  ByteMatrix row_major{};
  // Where S is read from, whatever the layout: what every copy, bucket and check of S starts from.
  ScaleSource source{};
  // Every byte the data and the scale buffer cover (padding included), for the overlap checks of calls
  // that write somewhere.
  const uint8_t *data_begin = nullptr;
  int64_t data_bytes = 0;
  const uint8_t *scales_begin = nullptr;
  int64_t scales_bytes = 0;
  // NVFP4 only. Each direction is one stored matrix (rows x cols: rowwise (M, K), columnwise the (K, M)
  // transpose TE stores) scaled along its rows, so its block scales are read and moved by the same
  // scale sources and jobs as MXFP8's, with 16 values per scale (S: rows x ceil(cols / 16)).
  DLManagedTensorVersioned *amax = nullptr;
  const float *amax_data = nullptr;
  int64_t amax_count = 0;  // 1 (per tensor) or rows (per row)
  int64_t rows = 0;        // the stored matrix
  int64_t cols = 0;
  bool present() const { return data != nullptr; }
};

}  // namespace mxfp8

struct mxfp8_tensor {
  mutable std::atomic<int64_t> references{1};
  mxfp8_format format = MXFP8_FORMAT_E4M3;
  mxfp8_scale_layout scale_layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  mxfp8_block block = MXFP8_BLOCK_1X32;
  std::vector<int64_t> shape;  // (*lead, K)
  int64_t rows = 0;            // M = prod(lead)
  int64_t cols = 0;            // K
  DLDevice device{};
  int32_t e4m3_max = 0;        // NVFP4: 448, or 256 (TE's 4over6); 0 for MXFP8
  mxfp8::Direction directions[2];  // indexed by mxfp8_direction
};

namespace mxfp8 {
void retain(const mxfp8_tensor *tensor) noexcept;
// Tells the running call that `tensor`'s managed tensors are its inputs' (CallAllocations::hold): a
// caller's allocator that returns one of them is refused, not owned a second time.
void hold_for_call(const mxfp8_tensor &tensor);
void release(const mxfp8_tensor *tensor) noexcept;
KeepAlive keep_alive(const mxfp8_tensor *tensor);  // takes a reference on the tensor, for a view
// Fails when one non-NULL managed tensor appears twice among the `count` fields of a description: each
// field's deleter runs once, so a tensor given twice would be freed twice. Shared with NVFP4 tensors.
void check_distinct_managed(const DLManagedTensorVersioned *const *fields, int count);
// Validates a description into a tensor (what mxfp8_tensor_create does); takes nothing on failure.
std::unique_ptr<mxfp8_tensor> create_tensor(const mxfp8_tensor_desc &desc);
// Checks the scale buffer `t` of one direction against the compact matrix dir.scale_rows x dir.scale_cols
// it must hold, in `layout` (swizzled as its transpose when `transposed_swizzle`), with the dtypes of
// `holds`; fills dir.row_major (row-major layout) and the scale span. Shared with NVFP4 tensors.
void check_scales(const DLTensor &t, const char *name, mxfp8_scale_layout layout, Direction &dir,
                  bool transposed_swizzle, Holds holds);
// Appends the spans of every buffer of `tensor` (read by the call: data, scales and, NVFP4, amax of both
// directions), named kind[index] (kNoIndex: kind alone).
void add_read_spans(const mxfp8_tensor &tensor, size_t index, const char *kind, std::vector<Span> &spans);
// Fails with MXFP8_ERROR_MISSING_DATA when the tensor has no data for `direction`, and with
// MXFP8_ERROR_INVALID_ARGUMENT when its format is not the family the call takes (`nvfp4`).
// `kind` names the tensor among several ("desc.tensors" with `index`): a refusal then says which entry.
const Direction &require_direction(const mxfp8_tensor &tensor, int32_t direction, bool nvfp4 = false,
                                   const char *kind = nullptr, size_t index = 0);

// Validates an NVFP4 description (desc.format MXFP8_FORMAT_NVFP4, read and its common fields checked by
// create_tensor) into a tensor; takes nothing on failure.
std::unique_ptr<mxfp8_tensor> create_nvfp4_tensor(const mxfp8_tensor_desc &desc);
}  // namespace mxfp8
