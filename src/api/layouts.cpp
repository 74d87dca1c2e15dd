// The mxfp8_layout table (layouts.hpp) and mxfp8_layout_bytes.
#include "api/layouts.hpp"

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"
#include "core/target_layout.hpp"

namespace mxfp8 {
namespace {

// value, enum name, name, label, supported, columnwise, permutes value rows, int32 words
constexpr LayoutInfo kLayouts[] = {
    {MXFP8_LAYOUT_COMPACT, "MXFP8_LAYOUT_COMPACT", "compact", "compact", true, true, false, false},
    {MXFP8_LAYOUT_CUTLASS_128X4, "MXFP8_LAYOUT_CUTLASS_128X4", "cutlass_128x4", "128x4 swizzled", true, true, false,
     false},
    // The TRT-LLM shuffle (issue 18, item 2) plugs in here: its entry, and its cases in target_layout.hpp.
    {MXFP8_LAYOUT_TRTLLM_SHUFFLED, "MXFP8_LAYOUT_TRTLLM_SHUFFLED", "trtllm", "TRT-LLM shuffled", false, false, true,
     false},
    {MXFP8_LAYOUT_DEEPGEMM_PACKED, "MXFP8_LAYOUT_DEEPGEMM_PACKED", "deepgemm", "DeepGEMM packed", true, false, false,
     true},
};

}  // namespace

const LayoutInfo &layout_info(int32_t layout, const char *field, bool allow_unsupported) {
  for (const LayoutInfo &l : kLayouts) {
    if (l.value != layout) continue;
    if (!l.supported && !allow_unsupported)
      fail(MXFP8_ERROR_UNSUPPORTED, field, " is ", l.enum_name, " (", l.value, "): this build of libmxfp8 does not "
           "write or read the ", l.label, " layout yet");
    return l;
  }
  std::string expected;
  for (const LayoutInfo &l : kLayouts) expected += cat(expected.empty() ? "" : " or ", l.enum_name, " (", l.value, ")");
  fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout, ", expected ", expected);
}

int64_t layout_bytes(const LayoutInfo &layout, int64_t rows, int64_t cols, bool columnwise, const char *field) {
  if (columnwise && !layout.columnwise)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout.enum_name, ", which lays out rowwise scales only (",
         "it packs the scales of consecutive K blocks together): it has no columnwise form; ask for rowwise scales");
  switch (layout.value) {
    case MXFP8_LAYOUT_CUTLASS_128X4: {
      // Columnwise scales are swizzled as their transpose.
      const int64_t sr = columnwise ? cols : rows, sc = columnwise ? rows : cols;
      return checked_mul(checked_round_up(sr, kTileRows, "the swizzled scales' padded row count"),
                         checked_round_up(sc, kTileCols, "the swizzled scales' padded column count"),
                         "swizzled scale size");
    }
    case MXFP8_LAYOUT_DEEPGEMM_PACKED:
      return checked_mul(checked_round_up(cols, kPackedScalesPerWord, "the packed scales' padded K-block count"),
                         checked_round_up(rows, kDeepGemmMnAlignment, "the packed scales' aligned MN"),
                         "DeepGEMM packed scale size");
    default:
      return checked_mul(rows, cols, "compact scale size");
  }
}

uint8_t *expect_layout_buffer(const DLTensor &t, const LayoutInfo &layout, int64_t bytes, int64_t groups, int64_t rows,
                              int64_t cols, const char *name, const DLDevice &device, const char *device_of) {
  const int64_t numel = checked_numel(t, name);
  const bool words = layout.int32_words && is_dtype(t.dtype, kDLInt, 32);
  if (words && layout.value == MXFP8_LAYOUT_DEEPGEMM_PACKED && t.strides && t.ndim == (groups == 1 ? 2 : 3)) {
    // The parameter DeepGEMM's get_mn_major_tma_aligned_packed_ue8m0_tensor returns: [G,] mn, packed
    // with strides ([packed * mn_aligned,] 1, mn_aligned) over a storage of exactly `bytes`.
    const int64_t packed = ceil_div(cols, kPackedScalesPerWord), aligned = round_up(rows, kDeepGemmMnAlignment);
    const int64_t *shape = t.shape + (t.ndim - 2), *strides = t.strides + (t.ndim - 2);
    const bool engine_parameter = shape[0] == rows && shape[1] == packed && (strides[0] == 1 || rows <= 1) &&
                                  (strides[1] == aligned || packed <= 1) &&
                                  (t.ndim == 2 || (t.shape[0] == groups && (t.strides[0] == packed * aligned || groups <= 1)));
    if (engine_parameter && rows > 0 && packed > 0 && groups > 0) {
      if (!same_device(t.device, device))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, " is on ", format_device(t.device), " but ", device_of, " on ",
             format_device(device));
      if (!t.data) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": data is NULL");
      return byte_pointer(t);
    }
  }
  const int64_t element_bytes = words ? 4 : 1;
  if (!words && !is_dtype(t.dtype, kDLUInt, 8) && !is_dtype(t.dtype, kDLFloat8_e8m0fnu, 8))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype), " does not hold ", layout.label,
         " scales (expected ", layout.int32_words ? "int32, " : "", "uint8 or float8_e8m0fnu)");
  if (numel > bytes / element_bytes + 1 || numel * element_bytes != bytes)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ", layout.label, " scales of ", groups == 1 ? "a " : cat(groups, " "),
         rows, " x ", cols, " matri", groups == 1 ? "x are " : "ces are ", bytes, " bytes, got ", numel * element_bytes,
         " (shape ", format_shape(t.shape, t.ndim), ", ", format_dtype(t.dtype), ")");
  return expect_buffer(t, {name, Holds::CheckedByCaller, 0, &device, device_of, numel});
}

bool zero_as_one(int32_t scale_fixup, const char *field) {
  check_enum(scale_fixup, field,
             {{MXFP8_SCALE_FIXUP_NONE, "MXFP8_SCALE_FIXUP_NONE"},
              {MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE, "MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE"}});
  return scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
}

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_layout_bytes(int32_t layout, int32_t direction, int64_t rows, int64_t cols,
                                                     int64_t *bytes) {
  return guarded([&] {
    if (!bytes) fail(MXFP8_ERROR_INVALID_ARGUMENT, "bytes is NULL");
    check_enum(direction, "direction",
               {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
    if (rows < 0 || cols < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "rows and cols are ", rows, " and ", cols, ", must not be negative");
    *bytes = layout_bytes(layout_info(layout, "layout"), rows, cols, direction == MXFP8_DIRECTION_COLUMNWISE, "layout");
  });
}
