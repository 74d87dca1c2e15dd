// mxfp8_nvfp4_dequantize: one pass over the stored matrix that decodes each value with its block scale
// and amax, reading the block scales where they are stored (row-major or swizzled, through ScaleSource).
#include <cstdint>
#include <vector>

#include "api/export_internal.hpp"
#include "api/tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/shape.hpp"
#include "cuda/cuda_runtime.hpp"

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_nvfp4_dequantize(const mxfp8_nvfp4_tensor *handle,
                                                         const mxfp8_dequantize_options *options, DLTensor *output) {
  return guarded([&] {
    if (!handle) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    const mxfp8_tensor *tensor = nvfp4_tensor(handle);
    if (!output) fail(MXFP8_ERROR_INVALID_ARGUMENT, "output is NULL");
    const mxfp8_dequantize_options o = read_dequantize_options(options);
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
  });
}
