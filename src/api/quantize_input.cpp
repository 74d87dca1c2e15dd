// read_input: see quantize_input.hpp.
#include "api/quantize_input.hpp"

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"

namespace mxfp8 {

Input read_input(const DLTensor *input, const char *name) {
  if (!input) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, " is NULL");
  const DLTensor &t = *input;
  const int64_t numel = checked_numel(t, name);
  if (t.ndim < 1)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, " is 0-dimensional: quantizing needs a last dimension K to block");
  Input in{input, InputType::Float32, std::vector<int64_t>(t.shape, t.shape + t.ndim), 0, 0, 0};
  int64_t element = 4;
  if (is_dtype(t.dtype, kDLBfloat, 16)) in.type = InputType::BFloat16, element = 2;
  else if (is_dtype(t.dtype, kDLFloat, 16)) in.type = InputType::Float16, element = 2;
  else if (!is_dtype(t.dtype, kDLFloat, 32))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype), " cannot be quantized (bfloat16, "
         "float16 and float32 can)");
  if (!is_compact(t))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": strides ", format_shape(t.strides, t.ndim), " are not row-major "
         "contiguous for shape ", format_shape(in.shape), " (make it contiguous first)");
  if (numel > 0 && !t.data) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": data is NULL");
  if (numel > 0 && reinterpret_cast<uintptr_t>(byte_pointer(t)) % static_cast<uintptr_t>(element) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": the data (data + byte_offset) is not aligned to its ", element,
         "-byte elements");
  memory_of(t.device, name);
  in.cols = in.shape.back();
  in.rows = product(in.shape, 0, in.shape.size() - 1, "the input's row count");
  in.bytes = checked_mul(numel, element, "the input's size in bytes");
  return in;
}


}  // namespace mxfp8
