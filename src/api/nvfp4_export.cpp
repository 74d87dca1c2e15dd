// mxfp8_nvfp4_export_components: the values view, the compact E4M3 block scales (the MXFP8 export's own
// view-or-copy, export_scale_matrix, on a 16-value block matrix) and the second-level scale.
#include <cstddef>
#include <vector>

#include "api/export_internal.hpp"
#include "api/outputs.hpp"
#include "api/tensor.hpp"
#include "core/dlpack_tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/sized_struct.hpp"
#include "cuda/cuda_runtime.hpp"

namespace mxfp8 {
namespace {

mxfp8_nvfp4_export_options read_nvfp4_options(const mxfp8_nvfp4_export_options *given) {
  const mxfp8_nvfp4_export_options defaults = MXFP8_NVFP4_EXPORT_OPTIONS_INIT;
  const mxfp8_nvfp4_export_options o = read_sized_struct(
      given, defaults, sizeof(mxfp8_nvfp4_export_options), "mxfp8_nvfp4_export_options", "MXFP8_NVFP4_EXPORT_OPTIONS_INIT");
  check_enum(o.direction, "options.direction",
             {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
  check_enum(o.values_dtype, "options.values_dtype",
             {{MXFP8_NVFP4_VALUES_UINT8, "MXFP8_NVFP4_VALUES_UINT8"}, {MXFP8_NVFP4_VALUES_FLOAT4, "MXFP8_NVFP4_VALUES_FLOAT4"}});
  check_enum(o.scales_dtype, "options.scales_dtype",
             {{MXFP8_NVFP4_SCALES_UINT8, "MXFP8_NVFP4_SCALES_UINT8"}, {MXFP8_NVFP4_SCALES_E4M3, "MXFP8_NVFP4_SCALES_E4M3"}});
  check_enum(o.padded_scales, "options.padded_scales",
             {{MXFP8_PADDED_SCALES_COPY, "MXFP8_PADDED_SCALES_COPY"},
              {MXFP8_PADDED_SCALES_STRIDED_VIEW, "MXFP8_PADDED_SCALES_STRIDED_VIEW"}});
  check_enum(o.global_scale, "options.global_scale",
             {{MXFP8_NVFP4_GLOBAL_SCALE_DECODE, "MXFP8_NVFP4_GLOBAL_SCALE_DECODE"},
              {MXFP8_NVFP4_GLOBAL_SCALE_ENCODE, "MXFP8_NVFP4_GLOBAL_SCALE_ENCODE"}});
  return o;
}

// The stored matrix's shape as an output: rowwise keeps the leading dimensions, (*lead, last);
// columnwise is the 2-D transpose TE stores, (K, last).
std::vector<int64_t> stored_shape(const mxfp8_tensor &t, int32_t direction, int64_t last) {
  if (direction == MXFP8_DIRECTION_COLUMNWISE) return {t.cols, last};
  std::vector<int64_t> shape(t.shape.begin(), t.shape.end() - 1);
  shape.push_back(last);
  return shape;
}

ManagedPtr export_values(const mxfp8_tensor &t, const Direction &dir, const mxfp8_nvfp4_export_options &o) {
  const bool float4 = o.values_dtype == MXFP8_NVFP4_VALUES_FLOAT4;
  const DLDataType dtype = float4 ? DLDataType{kDLFloat4_e2m1fn, 4, 1} : DLDataType{kDLUInt, 8, 1};
  std::vector<int64_t> shape = stored_shape(t, o.direction, float4 ? dir.cols : dir.cols / 2);
  std::vector<int64_t> strides = compact_strides(shape);  // in elements, as DLPack counts them
  const DLManagedTensorVersioned &src = *dir.data;
  return make_view(keep_alive(&t), src.dl_tensor, dtype, std::move(shape), std::move(strides),
                   src.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
}

// The bytes of an output the library made (a copy), by its dtype.
int64_t copy_bytes(const DLTensor &c, const char *what) {
  return checked_numel(c, what) * ((c.dtype.bits * c.dtype.lanes + 7) / 8);
}

// A copy must not land on the tensor it is made from (a caller's allocator could put it there), nor on
// `earlier`, a copy the same call made before it (ignored when NULL or a view).
void check_lands_apart(const mxfp8_tensor &t, const DLManagedTensorVersioned &copy, const char *what,
                       const DLManagedTensorVersioned *earlier = nullptr) {
  std::vector<Span> spans;
  add_read_spans(t, kNoIndex, "the tensor's", spans);
  spans.push_back(span_of(byte_pointer(copy.dl_tensor), copy_bytes(copy.dl_tensor, what), what, kNoIndex, true));
  if (earlier && (earlier->flags & DLPACK_FLAG_BITMASK_IS_COPIED))
    spans.push_back(span_of(byte_pointer(earlier->dl_tensor), copy_bytes(earlier->dl_tensor, "the other copy"),
                            "the call's other copy from options.allocator", kNoIndex, true));
  check_no_overlap(spans);
}

// `global` is the call's global scale output, made first: a scales copy must not land on it either.
ManagedPtr export_scales(const mxfp8_tensor &t, const Direction &dir, const mxfp8_nvfp4_export_options &o,
                         const DLManagedTensorVersioned *global) {
  const DLDataType dtype{static_cast<uint8_t>(o.scales_dtype == MXFP8_NVFP4_SCALES_E4M3 ? kDLFloat8_e4m3fn : kDLUInt), 8, 1};
  return export_scale_matrix(dir, t.scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, t.device, dtype,
                             stored_shape(t, o.direction, dir.scale_cols), o.padded_scales,
                             Allocation{o.allocator, o.stream}, [&] { return keep_alive(&t); },
                             [&](const DLManagedTensorVersioned &copy) {
                               check_lands_apart(t, copy, "the scales copy from options.allocator", global);
                             });
}

// Always a copy, of the amax's own shape: a few floats. Made (and checked) before the scales, which are
// written as they are made, so that a failure on either leaves every allocation unwritten; computed
// after them, where the amax lives (compute_global_scale).
ManagedPtr allocate_global_scale(const mxfp8_tensor &t, const Direction &dir,
                                 const mxfp8_nvfp4_export_options &o) {
  const DLTensor &amax = dir.amax->dl_tensor;
  const std::vector<int64_t> shape(amax.shape, amax.shape + amax.ndim);
  ManagedPtr out = allocate_copy(t.device, DLDataType{kDLFloat, 32, 1}, shape, Allocation{o.allocator, o.stream});
  if (dir.amax_count == 0) return out;
  check_lands_apart(t, *out, "the global scale copy from options.allocator");
  if (reinterpret_cast<uintptr_t>(byte_pointer(out->dl_tensor)) % alignof(float) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the global scale copy from options.allocator is not aligned to its 4-byte elements");
  return out;
}

void compute_global_scale(const mxfp8_tensor &t, const Direction &dir, const mxfp8_nvfp4_export_options &o,
                          DLManagedTensorVersioned &out) {
  if (dir.amax_count == 0) return;
  auto *dst = reinterpret_cast<float *>(byte_pointer(out.dl_tensor));
  const Nvfp4GlobalScaleJob job{dir.amax_data, dst, dir.amax_count, t.e4m3_max,
                                o.global_scale == MXFP8_NVFP4_GLOBAL_SCALE_ENCODE};
  where_memory_lives(
      t.device, "amax", [&] { nvfp4_global_scale_host(job); }, [&] { cuda::nvfp4_global_scale(job, o.stream); });
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_nvfp4_export_components(const mxfp8_nvfp4_tensor *handle,
                                                                const mxfp8_nvfp4_export_options *options,
                                                                DLManagedTensorVersioned **values,
                                                                DLManagedTensorVersioned **scales,
                                                                DLManagedTensorVersioned **global_scale) {
  return guarded([&] {
    if (!handle) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    const mxfp8_tensor *tensor = nvfp4_tensor(handle);
    hold_for_call(*tensor);
    if (!values && !scales && !global_scale)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "values, scales and global_scale are all NULL: nothing to export");
    if ((values && (values == scales || values == global_scale)) || (scales && scales == global_scale))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "two output pointers point to the same place: each output needs its own");
    const mxfp8_nvfp4_export_options o = read_nvfp4_options(options);
    const Direction &dir = require_direction(*tensor, o.direction, /*nvfp4=*/true);
    // The copies first: they are what can fail (memory, CUDA); the values are only a view. Both copies are
    // allocated and checked before either is written.
    ManagedPtr global_out = global_scale ? allocate_global_scale(*tensor, dir, o) : nullptr;
    ManagedPtr scales_out = scales ? export_scales(*tensor, dir, o, global_out.get()) : nullptr;
    if (global_scale) compute_global_scale(*tensor, dir, o, *global_out);
    ManagedPtr values_out = values ? export_values(*tensor, dir, o) : nullptr;
    if (scales) *scales = scales_out.release();
    if (global_scale) *global_scale = global_out.release();
    if (values) *values = values_out.release();
  });
}
