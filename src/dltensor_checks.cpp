#include "dltensor_checks.hpp"

#include "error.hpp"
#include "shape.hpp"

namespace mxfp8 {

std::string format_shape(const int64_t *dims, int64_t ndim) {
  std::string s = "(";
  for (int64_t i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (ndim == 1) s += ",";
  return s + ")";
}

Memory memory_of(DLDevice device, const char *name) {
  switch (device.device_type) {
    case kDLCPU:
    case kDLCUDAHost: return Memory::Host;
    case kDLCUDA:
    case kDLCUDAManaged: return Memory::Cuda;
    default: break;
  }
  fail(MXFP8_ERROR_UNSUPPORTED, name, ": device ", format_device(device),
       " is not supported (kDLCPU, kDLCUDA, kDLCUDAHost and kDLCUDAManaged are)");
}

bool same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

std::string format_device(DLDevice device) {
  const char *type = nullptr;
  switch (device.device_type) {
    case kDLCPU: type = "cpu"; break;
    case kDLCUDA: type = "cuda"; break;
    case kDLCUDAHost: type = "cuda_host"; break;
    case kDLCUDAManaged: type = "cuda_managed"; break;
    default: break;
  }
  if (type) return cat(type, ":", device.device_id);
  return cat("type ", static_cast<int>(device.device_type), ":", device.device_id);
}

std::string format_dtype(DLDataType dtype) {
  const char *name = nullptr;
  switch (dtype.code) {
    case kDLInt: name = "int"; break;
    case kDLUInt: name = "uint"; break;
    case kDLFloat: name = "float"; break;
    case kDLBfloat: name = "bfloat"; break;
    case kDLBool: name = "bool"; break;
    case kDLFloat8_e4m3fn: return "float8_e4m3fn";
    case kDLFloat8_e5m2: return "float8_e5m2";
    case kDLFloat8_e8m0fnu: return "float8_e8m0fnu";
    default: break;
  }
  std::string s = name ? cat(name, static_cast<int>(dtype.bits))
                       : cat("code ", static_cast<int>(dtype.code), " bits ", static_cast<int>(dtype.bits));
  if (dtype.lanes != 1) s += cat("x", dtype.lanes);
  return s;
}

bool is_dtype(DLDataType dtype, uint8_t code, uint8_t bits) {
  return dtype.code == code && dtype.bits == bits && dtype.lanes == 1;
}

void check_scale_dtype(const DLTensor &t, const char *name) {
  if (!is_dtype(t.dtype, kDLUInt, 8) && !is_dtype(t.dtype, kDLFloat8_e8m0fnu, 8))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype),
         " is not an E8M0 scale byte (uint8 or float8_e8m0fnu)");
}

int64_t checked_numel(const DLTensor &t, const char *name) {
  if (t.ndim < 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ndim ", t.ndim, " is negative");
  if (t.ndim > 0 && !t.shape) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape is NULL with ndim ", t.ndim);
  int64_t n = 1;
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim),
           " has a negative dimension");
    if (__builtin_mul_overflow(n, t.shape[i], &n))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim),
           " has more elements than int64 can count");
  }
  return n;
}

bool is_compact(const DLTensor &t) {
  if (!t.strides) return true;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) return true;  // no elements: any strides describe the same (empty) memory
  int64_t expected = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

uint8_t *byte_pointer(const DLTensor &t) { return static_cast<uint8_t *>(t.data) + t.byte_offset; }

ByteMatrix as_byte_matrix(const DLTensor &t, const char *name, bool any_strides) {
  const int64_t numel = checked_numel(t, name);
  if (t.ndim < 1) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": a scale matrix needs at least 1 dimension");
  if (numel > 0 && !t.data) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": data is NULL");
  const int32_t last = t.ndim - 1;
  ByteMatrix m{byte_pointer(t), 1, t.shape[last], t.shape[last], 1};
  for (int32_t i = 0; i < last; ++i) m.rows *= t.shape[i];  // cannot overflow: numel did not
  if (!t.strides || numel == 0) return m;  // no elements: strides say nothing
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.strides[i] < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": negative strides ", format_shape(t.strides, t.ndim),
           " are not supported");
  if (m.cols > 1) m.col_stride = t.strides[last];
  if (!any_strides && m.col_stride != 1)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": the last dimension must have stride 1, strides are ",
         format_shape(t.strides, t.ndim));
  // The leading dimensions must flatten into one row index with a single stride.
  int64_t row_stride = -1;
  for (int32_t i = last - 1; i >= 0; --i) {
    if (t.shape[i] == 1) continue;
    if (row_stride < 0) {
      row_stride = t.strides[i];
    } else {
      int64_t inner = 1;
      for (int32_t j = i + 1; j < last; ++j) inner *= t.shape[j];
      if (t.strides[i] != row_stride * inner)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": strides ", format_shape(t.strides, t.ndim),
             " do not flatten into rows of one stride for shape ", format_shape(t.shape, t.ndim));
    }
  }
  if (row_stride >= 0) m.row_stride = row_stride;
  else m.row_stride = m.cols * m.col_stride;
  return m;
}

}  // namespace mxfp8
