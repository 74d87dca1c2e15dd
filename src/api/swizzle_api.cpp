// mxfp8_unswizzle_scales and mxfp8_swizzle_scales: one scale matrix between caller-owned buffers.
#include <memory>
#include <vector>

#include "api/layouts.hpp"
#include "cuda/cuda_runtime.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"

namespace mxfp8 {
namespace {

struct Operands {
  ByteMatrix compact;
  uint8_t *swizzled;
};

// Checks the pair and returns the compact matrix and the swizzled bytes.
Operands check_pair(const DLTensor *compact, const DLTensor *swizzled, const char *compact_name,
                    const char *swizzled_name, bool compact_written) {
  if (!compact) fail(MXFP8_ERROR_INVALID_ARGUMENT, compact_name, " is NULL");
  if (!swizzled) fail(MXFP8_ERROR_INVALID_ARGUMENT, swizzled_name, " is NULL");
  // Bytes are moved, never read as numbers: MXFP8's E8M0 and NVFP4's E4M3 scales alike.
  check_scale_dtype(*compact, compact_name, Holds::AnyScaleBytes);
  memory_of(compact->device, compact_name);  // a device type the library cannot touch fails here
  const ByteMatrix m = as_byte_matrix(*compact, compact_name, /*any_strides=*/true);
  if (compact_written && !elements_distinct(m))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, compact_name, ": strides ", format_shape(compact->strides, compact->ndim),
         " give some of its ", m.rows, " x ", m.cols, " elements the same byte: an output needs a byte per element");
  // The dtype before the size: a float32 buffer of the right bytes is a wrong dtype, not a wrong size.
  check_scale_dtype(*swizzled, swizzled_name, Holds::AnyScaleBytes);
  // mxfp8_layout_bytes' rule, the one the bindings size their outputs by (0 for an empty matrix, however large
  // its other side); the padded sides for the message fit wherever `needed` is not 0.
  const int64_t needed = layout_bytes(layout_info(MXFP8_SCALE_LAYOUT_128X4, swizzled_name), m.rows, m.cols,
                                      /*columnwise=*/false, swizzled_name);
  const int64_t padded_rows = needed ? round_up(m.rows, kTileRows) : 0, padded_cols = needed ? round_up(m.cols, kTileCols) : 0;
  const int64_t numel = checked_numel(*swizzled, swizzled_name);
  if (numel != needed)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, swizzled_name, ": the swizzled layout of a ", m.rows, " x ", m.cols,
         " scale matrix is ", padded_rows, " x ", padded_cols, " = ", needed, " bytes, got ", numel,
         " (shape ", format_shape(swizzled->shape, swizzled->ndim), ")");
  expect_buffer(*swizzled, {swizzled_name, Holds::AnyScaleBytes, 0, &compact->device, "compact is", needed});
  // One of the two is written: in place is not a thing a permutation between two layouts can do.
  std::vector<Span> spans{span_of(m, compact_name, kNoIndex, compact_written),
                          span_of(byte_pointer(*swizzled), numel, swizzled_name, kNoIndex, !compact_written)};
  check_no_overlap(spans);
  return Operands{m, byte_pointer(*swizzled)};
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_unswizzle_scales(const DLTensor *swizzled, DLTensor *compact, void *stream) {
  return guarded([&] {
    const Operands op = check_pair(compact, swizzled, "compact", "swizzled", /*compact_written=*/true);
    if (op.compact.rows == 0 || op.compact.cols == 0) return;
    where_memory_lives(
        compact->device, "compact", [&] { unswizzle_host(op.swizzled, op.compact); },
        [&] { cuda::unswizzle(op.swizzled, op.compact, stream); });
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_swizzle_scales(const DLTensor *compact, DLTensor *swizzled, void *stream) {
  return guarded([&] {
    const Operands op = check_pair(compact, swizzled, "compact", "swizzled", /*compact_written=*/false);
    // An empty matrix has an empty swizzled buffer (roundup(0, n) = 0): nothing to write, however many
    // rows or columns the other side has.
    if (op.compact.rows == 0 || op.compact.cols == 0) return;
    where_memory_lives(
        compact->device, "compact", [&] { swizzle_host(op.compact, op.swizzled); },
        [&] { cuda::swizzle(op.compact, op.swizzled, stream); });
  });
}
