// Reading caller-supplied DLTensors: dtypes, devices, element counts, strides, and the view of a
// scale buffer as a 2-D byte matrix. Every function names the offending field in its error.
#pragma once

#include <cstdint>
#include <string>

#include <dlpack/dlpack.h>

#include "mxfp8/mxfp8.h"
#include "core/scale_job.hpp"

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

// The dtypes the library labels its outputs with: float8_e4m3fn / float8_e5m2 for `format`, or uint8 as
// mxfp8_values_dtype says; uint8 or float8_e8m0fnu as mxfp8_scales_dtype says.
DLDataType fp8_dtype(int32_t format);
DLDataType values_dtype(int32_t format, int32_t values_dtype);
DLDataType scales_dtype(int32_t scales_dtype);

// What a caller's buffer may hold: E8M0 scale bytes (uint8 or float8_e8m0fnu), FP8 values of one format
// (uint8 or that float8), any one-byte dtype, or what the caller checked itself (e.g. float outputs);
// NVFP4's E4M3 block scales (uint8 or float8_e4m3fn); either kind of scale byte (the byte-moving swizzle).
enum class Holds { ScaleBytes, Fp8Values, Bytes, CheckedByCaller, E4m3ScaleBytes, AnyScaleBytes };

// One caller buffer as a call sees it, checked in this order: a countable shape, its dtype, its device
// (when `device` is set: it must be that one, whose owner `device_of` names in the message with its verb,
// e.g. "the input is" or "the tensors are"),
// exactly `numel` elements (when >= 0), row-major contiguous, and a data pointer unless it is empty.
struct BufferCheck {
  const char *name;
  Holds holds;
  int32_t format;            // Holds::Fp8Values: an mxfp8_format
  const DLDevice *device;
  const char *device_of;
  int64_t numel;
};
// Returns data + byte_offset, or NULL for an empty buffer.
uint8_t *expect_buffer(const DLTensor &t, const BufferCheck &check);
// The same for argument `check.name[index]suffix` of a batched call (e.g. "destinations[7].values"):
// the name is formatted only when a check fails, since these run once per tensor of a whole model.
// `check` by reference: a BufferCheck passed by value is copied onto the stack 16 bytes at a time from the
// 8-byte stores that just built it (a failed store-to-load forward, a stall per tensor).
uint8_t *expect_indexed_buffer(const DLTensor &t, const BufferCheck &check, size_t index, const char *suffix = "");
// uint8 or float8_e8m0fnu, the two dtypes an E8M0 scale byte may carry.
void check_scale_dtype(const DLTensor &t, const char *name);
// The dtypes of `holds` (ScaleBytes, E4m3ScaleBytes or AnyScaleBytes) for a scale buffer.
void check_scale_dtype(const DLTensor &t, const char *name, Holds holds);

// Fails unless the tensor's major DLPack version is this header's (DLPack forbids reading the rest).
void check_version(const DLManagedTensorVersioned &m, const char *name);

// Product of the shape; fails on a NULL shape, more than kMaxDims, negative or overflowing dimensions, and
// a byte_offset past int64 or past the end of the address space (data + byte_offset would wrap).
int64_t checked_numel(const DLTensor &t, const char *name);
// The bytes its elements take (checked_numel's count; a 4-bit dtype takes half a byte an element).
int64_t checked_bytes(const DLTensor &t, const char *name);
// The bytes `numel` elements of `dtype` take, rounded up to whole bytes.
int64_t bytes_of(int64_t numel, DLDataType dtype, const char *name);
// Row-major with no gaps (NULL strides count as compact; dimensions of size 1 are ignored).
bool is_compact(const DLTensor &t);
uint8_t *byte_pointer(const DLTensor &t);

// Whether every element of `m` has a byte of its own (a destination with arbitrary strides: a transposed
// write, or interleaved rows): exactly, as layout.h promises.
bool elements_distinct(const ByteMatrix &m);

// A scale buffer as rows x cols bytes: leading dimensions are flattened into rows, the last one must
// have stride 1 (unless `any_strides`, used for low-level destinations that may write a transpose).
ByteMatrix as_byte_matrix(const DLTensor &t, const char *name, bool any_strides);

}  // namespace mxfp8
