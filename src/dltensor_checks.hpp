// Reading caller-supplied DLTensors: dtypes, devices, element counts, strides, and the view of a
// scale buffer as a 2-D byte matrix. Every function names the offending field in its error.
#pragma once

#include <cstdint>
#include <string>

#include <dlpack/dlpack.h>

#include "scale_copy.hpp"

namespace mxfp8 {

// Where the bytes can be touched from: host loops or CUDA kernels.
enum class Memory { Host, Cuda };

// kDLCPU and kDLCUDAHost are host memory; kDLCUDA and kDLCUDAManaged are moved by kernels. Any other
// device type fails with MXFP8_ERROR_UNSUPPORTED.
Memory memory_of(DLDevice device, const char *name);
bool same_device(DLDevice a, DLDevice b);
std::string format_device(DLDevice device);

std::string format_dtype(DLDataType dtype);
bool is_dtype(DLDataType dtype, uint8_t code, uint8_t bits);
// uint8 or float8_e8m0fnu, the two dtypes an E8M0 scale byte may carry.
void check_scale_dtype(const DLTensor &t, const char *name);

// Fails unless the tensor's major DLPack version is this header's (DLPack forbids reading the rest).
void check_version(const DLManagedTensorVersioned &m, const char *name);

// Product of the shape; fails on a NULL shape, more than kMaxDims, negative or overflowing dimensions.
int64_t checked_numel(const DLTensor &t, const char *name);
// Row-major with no gaps (NULL strides count as compact; dimensions of size 1 are ignored).
bool is_compact(const DLTensor &t);
uint8_t *byte_pointer(const DLTensor &t);

// A scale buffer as rows x cols bytes: leading dimensions are flattened into rows, the last one must
// have stride 1 (unless `any_strides`, used for low-level destinations that may write a transpose).
ByteMatrix as_byte_matrix(const DLTensor &t, const char *name, bool any_strides);

}  // namespace mxfp8
