// The table of mxfp8_scale_layout values: one entry per layout, the one place the calls that take a layout
// (import, convert, the manifest) learn its name, which directions it takes and how many bytes it
// gives. The index functions live in core/target_layout.hpp.
#pragma once

#include <cstdint>

#include <dlpack/dlpack.h>

#include "mxfp8/mxfp8.h"

namespace mxfp8 {

struct LayoutInfo {
  int32_t value;
  const char *enum_name;      // "MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED"
  const char *label;          // in messages: "DeepGEMM packed"
  bool columnwise;            // takes columnwise scales
  bool permutes_value_rows;   // the values are written in another row order (a convert needs them)
  // The 32-bit element type the engine holds it as, which a destination may have besides bytes
  // (kDLInt: DeepGEMM's packed int32; kDLFloat: DeepGEMM's float32), or kByteElements.
  int32_t word_code;
};
constexpr int32_t kByteElements = -1;

// The entry of `layout`, after checking that it is a known value (field: the argument it came from, for
// the message).
const LayoutInfo &layout_info(int32_t layout, const char *field);

// Transfer rules of a layout that come before a shard's (transfer.h's list, whose first broken rule is the one
// reported): a columnwise entry needs a layout with a columnwise form (not DeepGEMM's or TRT-LLM's), and an
// NVFP4 entry's scales are compact or 128x4 (`verb`: how they move, "travel" or "are imported"). `field`
// names the layout given.
void require_columnwise_form(const LayoutInfo &layout, const char *field);
void require_nvfp4_layout(const LayoutInfo &layout, const char *field, const char *verb);
// Into buffers a transfer writes values in row order: a layout that permutes value rows (TRT-LLM's) is
// mxfp8_convert's, the first rule of the list.
void require_rows_in_order(const LayoutInfo &layout, const char *field);
// The target layout `layout` of an NVFP4 entry imported into buffers, its two rules checked in the list's order.
const LayoutInfo &nvfp4_target_layout(int32_t layout, const char *field);

// The bytes S (rows x cols, a `columnwise` tensor's scales when set) takes in the layout: checked
// arithmetic; fails naming `field` for a direction the layout does not take.
int64_t layout_bytes(const LayoutInfo &layout, int64_t rows, int64_t cols, bool columnwise, const char *field);

// A caller's buffer for S (rows x cols, `groups` of them back to back) in `layout`, `bytes` in all:
// uint8 or float8_e8m0fnu holding exactly `bytes` (or 32-bit elements holding bytes / 4, of the type an
// engine keeps the layout in: LayoutInfo::word_code), contiguous, on `device`; for the DeepGEMM layout also the engine's own strided int32
// parameter ([groups,] rows, ceil(cols / 4)) with DeepGEMM's strides.
struct LayoutBuffer {
  uint8_t *data;     // its first byte
  int64_t writable;  // the bytes from data the tensor describes: `bytes`, or fewer for the strided form
                     // when rows % 4 != 0 (its extent ends before the last column's padding rows)
};
LayoutBuffer expect_layout_buffer(const DLTensor &t, const LayoutInfo &layout, int64_t bytes, int64_t groups, int64_t rows,
                              int64_t cols, const char *name, const DLDevice &device, const char *device_of);

// The flag of an mxfp8_scale_fixup field: true for MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE.
bool zero_as_one(int32_t scale_fixup, const char *field);

}  // namespace mxfp8
