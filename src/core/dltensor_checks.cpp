#include "core/dltensor_checks.hpp"

#include <numeric>
#include <utility>

#include "core/error.hpp"
#include "core/indexed_name.hpp"
#include "core/shape.hpp"

namespace mxfp8 {

std::string format_shape(const int64_t *dims, int64_t ndim) {
  if (!dims && ndim > 0) return "(NULL)";
  std::string s = "(";
  for (int64_t i = 0; i < ndim && i < kMaxDims; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  if (ndim > kMaxDims) s += cat(", ... ", ndim, " dimensions in all");
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
    case kDLComplex: name = "complex"; break;
    case kDLOpaqueHandle: name = "opaque_handle"; break;
    case kDLFloat8_e3m4: name = "float8_e3m4"; break;
    case kDLFloat8_e4m3: name = "float8_e4m3"; break;
    case kDLFloat8_e4m3b11fnuz: name = "float8_e4m3b11fnuz"; break;
    case kDLFloat8_e4m3fn: name = "float8_e4m3fn"; break;
    case kDLFloat8_e4m3fnuz: name = "float8_e4m3fnuz"; break;
    case kDLFloat8_e5m2: name = "float8_e5m2"; break;
    case kDLFloat8_e5m2fnuz: name = "float8_e5m2fnuz"; break;
    case kDLFloat8_e8m0fnu: name = "float8_e8m0fnu"; break;
    case kDLFloat6_e2m3fn: name = "float6_e2m3fn"; break;
    case kDLFloat6_e3m2fn: name = "float6_e3m2fn"; break;
    case kDLFloat4_e2m1fn: name = "float4_e2m1fn"; break;
    default: break;
  }
  // The narrow float codes name their width; the bit count is only worth saying when it disagrees.
  const bool named_width = dtype.code >= kDLFloat8_e3m4 && dtype.code <= kDLFloat4_e2m1fn;
  if (named_width) {
    const int width = dtype.code == kDLFloat4_e2m1fn ? 4 : dtype.code >= kDLFloat6_e2m3fn ? 6 : 8;
    std::string s = dtype.bits == width ? std::string(name) : cat(name, " bits ", static_cast<int>(dtype.bits));
    if (dtype.lanes != 1) s += cat("x", dtype.lanes);
    return s;
  }
  std::string s = name ? cat(name, static_cast<int>(dtype.bits))
                       : cat("code ", static_cast<int>(dtype.code), " bits ", static_cast<int>(dtype.bits));
  if (dtype.lanes != 1) s += cat("x", dtype.lanes);
  return s;
}

bool is_dtype(DLDataType dtype, uint8_t code, uint8_t bits) {
  return dtype.code == code && dtype.bits == bits && dtype.lanes == 1;
}

DLDataType fp8_dtype(int32_t format) {
  return DLDataType{static_cast<uint8_t>(format == MXFP8_FORMAT_E5M2 ? kDLFloat8_e5m2 : kDLFloat8_e4m3fn), 8, 1};
}

DLDataType values_dtype(int32_t format, int32_t values_dtype) {
  return values_dtype == MXFP8_VALUES_UINT8 ? DLDataType{kDLUInt, 8, 1} : fp8_dtype(format);
}

DLDataType scales_dtype(int32_t scales_dtype) {
  return DLDataType{static_cast<uint8_t>(scales_dtype == MXFP8_SCALES_E8M0 ? kDLFloat8_e8m0fnu : kDLUInt), 8, 1};
}

uint8_t *expect_buffer(const DLTensor &t, const BufferCheck &c) {
  const int64_t numel = checked_numel(t, c.name);
  switch (c.holds) {
    case Holds::ScaleBytes:
    case Holds::E4m3ScaleBytes:
    case Holds::AnyScaleBytes: check_scale_dtype(t, c.name, c.holds); break;
    case Holds::Fp8Values: {
      const DLDataType fp8 = fp8_dtype(c.format);
      if (!is_dtype(t.dtype, kDLUInt, 8) && !is_dtype(t.dtype, fp8.code, 8))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, c.name, ": dtype ", format_dtype(t.dtype), " does not hold ",
             c.format == MXFP8_FORMAT_E5M2 ? "E5M2" : "E4M3", " values (expected uint8 or ", format_dtype(fp8), ")");
      break;
    }
    case Holds::Bytes:
      if (t.dtype.bits != 8 || t.dtype.lanes != 1)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, c.name, ": dtype ", format_dtype(t.dtype), " is not a byte type");
      break;
    case Holds::CheckedByCaller: break;
  }
  if (c.device && !same_device(t.device, *c.device))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, c.name, " is on ", format_device(t.device), " but ", c.device_of, " on ",
         format_device(*c.device));
  if (c.numel >= 0 && numel != c.numel)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, c.name, ": holds ", numel, " elements (shape ", format_shape(t.shape, t.ndim),
         "), needs exactly ", c.numel);
  if (!is_compact(t))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, c.name, ": strides ", format_shape(t.strides, t.ndim),
         " are not row-major contiguous for shape ", format_shape(t.shape, t.ndim));
  if (numel == 0) return nullptr;
  if (!t.data) fail(MXFP8_ERROR_INVALID_ARGUMENT, c.name, ": data is NULL");
  return byte_pointer(t);
}

uint8_t *expect_indexed_buffer(const DLTensor &t, const BufferCheck &check, size_t index, const char *suffix) {
  try {
    return expect_buffer(t, check);
  } catch (const Error &) {
    const IndexedName name(check.name, index, suffix);
    BufferCheck named = check;
    named.name = name;
    expect_buffer(t, named);  // the checks only read, so this fails the same way, now naming the argument
    throw;
  }
}

void check_scale_dtype(const DLTensor &t, const char *name) { check_scale_dtype(t, name, Holds::ScaleBytes); }

void check_scale_dtype(const DLTensor &t, const char *name, Holds holds) {
  const bool e8m0 = holds != Holds::E4m3ScaleBytes, e4m3 = holds != Holds::ScaleBytes;
  if (is_dtype(t.dtype, kDLUInt, 8) || (e8m0 && is_dtype(t.dtype, kDLFloat8_e8m0fnu, 8)) ||
      (e4m3 && is_dtype(t.dtype, kDLFloat8_e4m3fn, 8)))
    return;
  fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype),
       !e4m3  ? " is not an E8M0 scale byte (uint8 or float8_e8m0fnu)"
       : !e8m0 ? " is not an E4M3 block scale byte (uint8 or float8_e4m3fn)"
               : " is not a scale byte (uint8, float8_e8m0fnu or float8_e4m3fn)");
}

int64_t bytes_of(int64_t numel, DLDataType dtype, const char *name) {
  const int64_t bits = checked_mul(numel, int64_t{dtype.bits} * dtype.lanes, name);
  return bits / 8 + (bits % 8 != 0);
}

int64_t checked_bytes(const DLTensor &t, const char *name) { return bytes_of(checked_numel(t, name), t.dtype, name); }

int64_t checked_numel(const DLTensor &t, const char *name) {
  if (t.ndim < 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ndim ", t.ndim, " is negative");
  if (t.ndim > kMaxDims)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ndim ", t.ndim, " is more than the ", kMaxDims, " dimensions supported");
  if (t.ndim > 0 && !t.shape) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape is NULL with ndim ", t.ndim);
  // Every caller tensor is counted here before its data + byte_offset is formed (byte_pointer): an offset
  // past int64, or one that carries the pointer past the end of the address space, would wrap to memory
  // before the buffer, so it is refused rather than written through.
  if (t.byte_offset > static_cast<uint64_t>(INT64_MAX) ||
      (t.data && t.byte_offset > UINTPTR_MAX - reinterpret_cast<uintptr_t>(t.data)))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": byte_offset ", t.byte_offset,
         t.byte_offset > static_cast<uint64_t>(INT64_MAX) ? " does not fit in int64"
                                                          : " carries data past the end of the address space");
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim),
           " has a negative dimension");
  int64_t n = 0;
  if (!product_fits(t.shape, static_cast<size_t>(t.ndim), &n))  // ndim >= 0: checked above
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim),
         " has more elements than int64 can count");
  return n;
}

bool is_compact(const DLTensor &t) {
  if (!t.strides || t.ndim <= 0) return true;
  if (!t.shape) return false;
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) return true;  // no elements: any strides describe the same (empty) memory
  int64_t expected = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    if (__builtin_mul_overflow(expected, t.shape[i], &expected)) return false;
  }
  return true;
}

void check_version(const DLManagedTensorVersioned &m, const char *name) {
  // DLPack: a consumer must not read any other field of a tensor whose major version differs from its own.
  if (m.version.major == DLPACK_MAJOR_VERSION) return;
  fail(m.version.major > DLPACK_MAJOR_VERSION ? MXFP8_ERROR_UNSUPPORTED : MXFP8_ERROR_INVALID_ARGUMENT, name,
       ": DLPack version ", m.version.major, ".", m.version.minor, ", but this library reads DLPack ",
       DLPACK_MAJOR_VERSION, ".x tensors (a DLManagedTensorVersioned of another major version must not be read)");
}

uint8_t *byte_pointer(const DLTensor &t) { return static_cast<uint8_t *>(t.data) + t.byte_offset; }

bool elements_distinct(const ByteMatrix &m) {
  if (m.rows == 0 || m.cols == 0) return true;  // no elements, nothing to share
  const int64_t rs = m.row_stride, cs = m.col_stride;
  if (m.rows == 1) return m.cols == 1 || cs >= 1;
  if (m.cols == 1) return rs >= 1;
  if (rs < 1 || cs < 1) return false;  // a zero stride with two or more elements along it
  // Elements (r, c) and (r + dr, c + dc) share a byte iff rs * dr == -cs * dc with |dr| < rows, |dc| < cols
  // and (dr, dc) != 0; the smallest such pair is |dr| = cs / g, |dc| = rs / g (g = gcd(rs, cs)). So the
  // bytes are distinct iff that pair does not fit: exact, where "the larger stride clears the other axis's
  // span" refused interleavings such as strides (2, 99) on (100, 2).
  const int64_t g = std::gcd(rs, cs);
  return cs / g >= m.rows || rs / g >= m.cols;
}

ByteMatrix as_byte_matrix(const DLTensor &t, const char *name, bool any_strides) {
  const int64_t numel = checked_numel(t, name);
  if (t.ndim < 1) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": a scale matrix needs at least 1 dimension");
  if (numel > 0 && !t.data) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": data is NULL");
  const int32_t last = t.ndim - 1;
  ByteMatrix m{byte_pointer(t), 1, t.shape[last], t.shape[last], 1};
  // The leading dimensions' product fits where numel is not 0; with K = 0 it may not ((2^62, 32, 0)).
  if (!product_fits(t.shape, static_cast<size_t>(last), &m.rows))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim),
         " has more rows than int64 can count");
  if (!t.strides || numel == 0) return m;  // no elements: strides say nothing
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.strides[i] < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": negative strides ", format_shape(t.strides, t.ndim),
           " are not supported");
  if (m.cols > 1) m.col_stride = t.strides[last];
  const auto too_far = [&] {
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": strides ", format_shape(t.strides, t.ndim), " for shape ",
         format_shape(t.shape, t.ndim), " address more bytes than int64 can count");
  };
  const auto checked = [&](int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) too_far();
    return r;
  };
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
      if (t.strides[i] != checked(row_stride, inner))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": strides ", format_shape(t.strides, t.ndim),
             " do not flatten into rows of one stride for shape ", format_shape(t.shape, t.ndim));
    }
  }
  if (row_stride >= 0) m.row_stride = row_stride;
  else m.row_stride = checked(m.cols, m.col_stride);
  // Every byte the matrix addresses, and every stride a view of it can carry, must be countable.
  int64_t extent;
  if (__builtin_add_overflow(checked(m.rows, m.row_stride), checked(m.cols, m.col_stride), &extent)) too_far();
  return m;
}

}  // namespace mxfp8
