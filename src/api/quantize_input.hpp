// The input of the quantize calls (MXFP8 and NVFP4): a bfloat16, float16 or float32 tensor, row-major
// contiguous and aligned, read as M = prod(lead) rows of K. Checked once, here, for both.
#pragma once

#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/quantize.hpp"

namespace mxfp8 {

struct Input {
  const DLTensor *tensor;
  InputType type;
  std::vector<int64_t> shape;
  int64_t rows;
  int64_t cols;
  int64_t bytes;
};

// Fails naming `name` ("input", "inputs[2]") for a NULL tensor, a dtype that cannot be quantized,
// non-compact strides, a NULL data pointer, misalignment, an unknown device or a 0-d shape.
Input read_input(const DLTensor *input, const char *name = "input");

}  // namespace mxfp8
