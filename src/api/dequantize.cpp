// mxfp8_dequantize, both formats. MXFP8: one pass that decodes and multiplies, reading
// row-major scales (compact or padded) where they are; swizzled scales are first unswizzled into scratch
// by the export's own job. NVFP4: one pass over the stored matrix that decodes each value with its block
// scale and amax, reading the block scales where they are stored (row-major or swizzled, through
// ScaleSource).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cuda/cuda_runtime.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "api/export_internal.hpp"
#include "api/tensor.hpp"
#include "core/memory_span.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/quantize.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {

mxfp8_dequantize_options read_dequantize_options(const mxfp8_dequantize_options *given) {
  const mxfp8_dequantize_options defaults = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  const mxfp8_dequantize_options o = read_sized_struct(given, defaults, sizeof(mxfp8_dequantize_options),
                                                       "mxfp8_dequantize_options", "MXFP8_DEQUANTIZE_OPTIONS_INIT");
  check_enum(o.direction, "options.direction",
             {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
  return o;
}

namespace {

// Stream-ordered device scratch, freed (on the same stream) when it goes out of scope.
struct DeviceScratch {
  void *ptr;
  void *stream;
  ~DeviceScratch() { cuda::free_async(ptr, stream); }
};

// An NVFP4 tensor: one pass over the stored matrix (R * C elements, columnwise the (K, M) transpose).
void dequantize_nvfp4(const mxfp8_tensor *tensor, const mxfp8_dequantize_options &o, DLTensor *output) {
  const Direction &dir = require_direction(*tensor, o.direction, /*nvfp4=*/true);
  const DLTensor &out = *output;
  const bool bf16 = is_dtype(out.dtype, kDLBfloat, 16);
  if (!bf16 && !is_dtype(out.dtype, kDLFloat, 32))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "output: dtype ", format_dtype(out.dtype), " is not float32 or bfloat16");
  const int64_t n = dir.rows * dir.cols;
  if (!expect_buffer(out, {"output", Holds::CheckedByCaller, 0, &tensor->device, "the tensor is", n})) return;
  const int64_t element = bf16 ? 2 : 4;
  if (reinterpret_cast<uintptr_t>(byte_pointer(out)) % static_cast<uintptr_t>(element) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "output: the data (data + byte_offset) is not aligned to its ", element,
         "-byte elements");
  std::vector<Span> spans{
      span_of(byte_pointer(out), checked_mul(n, element, "the output's size in bytes"), "output", kNoIndex, true)};
  add_read_spans(*tensor, kNoIndex, "the tensor's", spans);
  check_no_overlap(spans);
  const Nvfp4DequantizeJob job{dir.data_begin, dir.source, dir.amax_data, dir.amax_count > 1,
                               tensor->e4m3_max, bf16, dir.rows, dir.cols, byte_pointer(out)};
  where_memory_lives(
      tensor->device, "tensor", [&] { nvfp4_dequantize_host(job); }, [&] { cuda::nvfp4_dequantize(job, o.stream); });
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_dequantize(const mxfp8_tensor *tensor, const mxfp8_dequantize_options *options,
                                                   DLTensor *output) {
  return guarded([&] {
    if (!tensor) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    if (!output) fail(MXFP8_ERROR_INVALID_ARGUMENT, "output is NULL");
    const mxfp8_dequantize_options o = read_dequantize_options(options);
    if (tensor->format == MXFP8_FORMAT_NVFP4) return dequantize_nvfp4(tensor, o, output);
    const auto direction = static_cast<mxfp8_direction>(o.direction);
    const Direction &dir = require_direction(*tensor, direction);
    const DLTensor &out = *output;
    const bool bf16 = is_dtype(out.dtype, kDLBfloat, 16);
    if (!bf16 && !is_dtype(out.dtype, kDLFloat, 32))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "output: dtype ", format_dtype(out.dtype), " is not float32 or bfloat16");
    const int64_t n = tensor->rows * tensor->cols;
    if (!expect_buffer(out, {"output", Holds::CheckedByCaller, 0, &tensor->device, "the tensor is", n})) return;
    const int64_t element = bf16 ? 2 : 4;
    if (reinterpret_cast<uintptr_t>(byte_pointer(out)) % static_cast<uintptr_t>(element) != 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "output: the data (data + byte_offset) is not aligned to its ", element,
           "-byte elements");
    std::vector<Span> spans{span_of(byte_pointer(out), checked_mul(n, element, "the output's size in bytes"), "output",
                                    kNoIndex, true)};
    add_read_spans(*tensor, kNoIndex, "the tensor's", spans);
    check_no_overlap(spans);

    DequantizeJob job{byte_pointer(dir.data->dl_tensor), dir.row_major.data, tensor->rows, tensor->cols,
                      dir.row_major.row_stride, tensor->format == MXFP8_FORMAT_E5M2,
                      direction == MXFP8_DIRECTION_COLUMNWISE, bf16, byte_pointer(out)};
    if (tensor->scale_layout == MXFP8_SCALE_LAYOUT_ROW_MAJOR)  // compact or padded: read in place
      return where_memory_lives(
          tensor->device, "tensor", [&] { dequantize_host(job); }, [&] { cuda::dequantize(job, o.stream); });
    // Swizzled: unswizzle into compact scratch first, with the export's own job.
    const int64_t scale_bytes = dir.scale_rows * dir.scale_cols;
    job.scale_row_stride = dir.scale_cols;
    where_memory_lives(
        tensor->device, "tensor",
        [&] {
          std::vector<uint8_t> scales(static_cast<size_t>(scale_bytes));
          const ScaleJob s = compact_job(dir.source, scales.data());
          run_jobs_on(tensor->device, &s, 1, nullptr);
          job.scales = scales.data();
          dequantize_host(job);
        },
        [&] {
          DeviceScratch scales{cuda::allocate(scale_bytes, o.stream), o.stream};
          const ScaleJob s = compact_job(dir.source, static_cast<uint8_t *>(scales.ptr));
          run_jobs_on(tensor->device, &s, 1, o.stream);
          job.scales = static_cast<const uint8_t *>(scales.ptr);
          cuda::dequantize(job, o.stream);
        });
  });
}

