// The mxfp8_scale_layout table (layouts.hpp) and mxfp8_layout_bytes.
#include "api/layouts.hpp"

#include <algorithm>

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"
#include "core/target_layout.hpp"

namespace mxfp8 {
namespace {

// value, enum name, label, columnwise, permutes value rows, the engine's 32-bit element type
constexpr LayoutInfo kLayouts[] = {
    {MXFP8_SCALE_LAYOUT_COMPACT, "MXFP8_SCALE_LAYOUT_COMPACT", "compact", true, false, kByteElements},
    {MXFP8_SCALE_LAYOUT_128X4, "MXFP8_SCALE_LAYOUT_128X4", "128x4 swizzled", true, false, kByteElements},
    {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, "MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED", "TRT-LLM shuffled", false, true, kByteElements},
    {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, "MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED", "DeepGEMM packed", false, false, kDLInt},
    {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED, "MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED", "TRT-LLM shuffled gated", false, true,
     kByteElements},
    {MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, "MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32", "DeepGEMM float32", false, false, kDLFloat},
};

// FlashInfer's shuffle_matrix_sf_a asserts M % 128 == 0 (and shuffle_matrix_a works in 32-row blocks).
constexpr int64_t kTrtllmRowMultiple = 128;

// The bytes of a non-empty R x C scale matrix in `layout` (its checks done by layout_bytes).
int64_t padded_bytes(const LayoutInfo &layout, int64_t rows, int64_t cols, bool columnwise) {
  switch (layout.value) {
    case MXFP8_SCALE_LAYOUT_128X4: {
      // Columnwise scales are swizzled as their transpose.
      const int64_t sr = columnwise ? cols : rows, sc = columnwise ? rows : cols;
      return checked_mul(checked_round_up(sr, kTileRows, "the swizzled scales' padded row count"),
                         checked_round_up(sc, kTileCols, "the swizzled scales' padded column count"),
                         "swizzled scale size");
    }
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED:
      return checked_mul(rows, checked_round_up(cols, kTileCols, "the TRT-LLM scales' padded column count"),
                         "TRT-LLM shuffled scale size");
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED:
      return checked_mul(checked_round_up(cols, kPackedScalesPerWord, "the packed scales' padded K-block count"),
                         checked_round_up(rows, kDeepGemmMnAlignment, "the packed scales' aligned MN"),
                         "DeepGEMM packed scale size");
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32:
      return checked_mul(checked_mul(rows, cols, "DeepGEMM float32 scale count"), kFloat32Bytes,
                         "DeepGEMM float32 scale size");
    default:
      return checked_mul(rows, cols, "compact scale size");
  }
}

}  // namespace

const LayoutInfo &layout_info(int32_t layout, const char *field) {
  for (const LayoutInfo &l : kLayouts)
    if (l.value == layout) return l;
  std::string expected;
  for (const LayoutInfo &l : kLayouts) expected += cat(expected.empty() ? "" : " or ", l.enum_name, " (", l.value, ")");
  fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout, ", expected ", expected);
}

void require_columnwise_form(const LayoutInfo &layout, const char *field) {
  if (!layout.columnwise)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout.enum_name, ", which lays out rowwise scales only (",
         "what its engine loads for a weight): it has no columnwise form; ask for rowwise scales");
}

void require_nvfp4_layout(const LayoutInfo &layout, const char *field, const char *verb) {
  if (layout.value != MXFP8_SCALE_LAYOUT_COMPACT && layout.value != MXFP8_SCALE_LAYOUT_128X4)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout.enum_name, " for an NVFP4 entry: NVFP4 scales ", verb,
         " MXFP8_SCALE_LAYOUT_COMPACT or MXFP8_SCALE_LAYOUT_128X4 (the other layouts are MXFP8's)");
}

void require_rows_in_order(const LayoutInfo &layout, const char *field) {
  if (layout.permutes_value_rows)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout.enum_name, " (", layout.value, "), which permutes value rows: "
         "write it with mxfp8_convert or mxfp8_grouped_convert");
}

const LayoutInfo &nvfp4_target_layout(int32_t layout, const char *field) {
  const LayoutInfo &info = layout_info(layout, field);
  require_rows_in_order(info, field);
  require_nvfp4_layout(info, field, "are imported");
  return info;
}

int64_t layout_bytes(const LayoutInfo &layout, int64_t rows, int64_t cols, bool columnwise, const char *field) {
  if (columnwise) require_columnwise_form(layout, field);
  const bool trtllm =
      layout.value == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || layout.value == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  if (trtllm && rows % kTrtllmRowMultiple != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", layout.enum_name, ", which needs rows (per expert) a multiple "
         "of ", kTrtllmRowMultiple, " (FlashInfer's shuffle_matrix_sf_a requires it; the values shuffle in blocks "
         "of 32 rows), got ", rows);
  // An empty matrix is 0 bytes in every layout (each pads what it has; nothing pads to nothing), however large
  // its other side: rounded up first, that side overflowed (2^63 - 1 rows of 0 columns).
  if (rows == 0 || cols == 0) return 0;
  try {
    return padded_bytes(layout, rows, cols, columnwise);
  } catch (const Error &e) {  // a size int64 cannot hold: said of the field whose layout it is, and the matrix
    fail(e.status(), field, " (", layout.enum_name, "): ", e.what(), " for a ", rows, " x ", cols, " scale matrix");
  }
}

LayoutBuffer expect_layout_buffer(const DLTensor &t, const LayoutInfo &layout, int64_t bytes, int64_t groups, int64_t rows,
                                  int64_t cols, const char *name, const DLDevice &device, const char *device_of) {
  const int64_t numel = checked_numel(t, name);
  const bool words = layout.word_code != kByteElements && is_dtype(t.dtype, layout.word_code, 32);
  // [1, rows, packed] is one group too (SGLang's parameter for a single expert).
  if (words && layout.value == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED && t.strides && (t.ndim == 3 || (t.ndim == 2 && groups == 1))) {
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
      // The tensor describes the int32 up to its last element: when rows % 4 != 0 that stops before the
      // last column's padding rows (the end of the layout), which the storage DeepGEMM allocated holds but
      // this view does not promise. Those bytes are left alone.
      int64_t last = 0;
      for (int32_t d = 0; d < t.ndim; ++d) last += (t.shape[d] - 1) * t.strides[d];
      return {byte_pointer(t), std::min(bytes, 4 * (last + 1))};
    }
  }
  const int64_t element_bytes = words ? 4 : 1;
  if (!words && !is_dtype(t.dtype, kDLUInt, 8) && !is_dtype(t.dtype, kDLFloat8_e8m0fnu, 8))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype), " does not hold ", layout.label,
         " scales (expected ", layout.word_code == kDLInt ? "int32, " : layout.word_code == kDLFloat ? "float32, " : "",
         "uint8 or float8_e8m0fnu)");
  // An int32 tensor of more than 2^61 elements has more bytes than int64 counts: say so, never wrap.
  int64_t got = 0;
  const bool uncountable = __builtin_mul_overflow(numel, element_bytes, &got);
  if (uncountable || got != bytes)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ", layout.label, " scales of ", groups == 1 ? "a " : cat(groups, " "),
         rows, " x ", cols, " matri", groups == 1 ? "x are " : "ces are ", bytes, " bytes, got ",
         uncountable ? cat(numel, " x 4 (more than int64 counts)") : cat(got),
         " (shape ", format_shape(t.shape, t.ndim), t.strides ? cat(", strides ", format_shape(t.strides, t.ndim)) : "",
         ", ", format_dtype(t.dtype), ")",
         words && layout.value == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED
             ? cat("; DeepGEMM's strided int32 form is ([", groups, ",] ", rows, ", ", ceil_div(cols, kPackedScalesPerWord),
                   ") with strides ([", ceil_div(cols, kPackedScalesPerWord) * round_up(rows, kDeepGemmMnAlignment), ",] 1, ",
                   round_up(rows, kDeepGemmMnAlignment), ")")
             : "");
  return {expect_buffer(t, {name, Holds::CheckedByCaller, 0, &device, device_of, numel}), bytes};
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
