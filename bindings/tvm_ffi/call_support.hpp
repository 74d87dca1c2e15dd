// What every function of the tvm-ffi adapter needs to call the C API: a failed status turned into a
// tvm-ffi error, option strings turned into enum values, a caller's tensor view lent to a descriptor,
// and the stream tvm-ffi's environment names for a device.
#ifndef MXFP8_TVM_FFI_CALL_SUPPORT_HPP_
#define MXFP8_TVM_FFI_CALL_SUPPORT_HPP_

#include <mxfp8/mxfp8.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include "borrowed_tensor.hpp"

namespace mxfp8_tvm_ffi {

// Throws a tvm-ffi error of `kind`: the name of the exception class a Python caller receives.
[[noreturn]] inline void raise(const char *kind, const std::string &message) {
  throw tvm::ffi::Error(kind, message, TVMFFIBacktrace(__FILE__, __LINE__, TVM_FFI_FUNC_SIG, 0));
}

// Raises the failure of a C call as a tvm-ffi error: the kind is the Python exception the pybind11
// binding raises for the same status (so `except ValueError` works with either door), and the message
// is the status name and the library's own message, e.g.
//   "invalid argument: swizzled: the swizzled layout of a 200 x 7 scale matrix is 256 x 8 = 2048 bytes,
//    got 2047 (shape (2047,))".
inline void check(mxfp8_status status) {
  if (status == MXFP8_OK) return;
  const std::string message = std::string(mxfp8_status_string(status)) + ": " + mxfp8_last_error();
  switch (status) {
    case MXFP8_ERROR_INVALID_ARGUMENT:
    case MXFP8_ERROR_MISSING_DATA: raise("ValueError", message);
    case MXFP8_ERROR_UNSUPPORTED: raise("TypeError", message);
    case MXFP8_ERROR_OUT_OF_MEMORY: raise("MemoryError", message);
    default: raise("RuntimeError", message);
  }
}

// One named choice of a string argument, e.g. {"swizzled", MXFP8_QUANTIZED_SCALES_SWIZZLED}.
struct Choice {
  const char *name;
  int32_t value;
};

// The value of `given` among `choices`; a ValueError naming the argument and the choices otherwise.
inline int32_t choose(const char *argument, const tvm::ffi::String &given, std::initializer_list<Choice> choices) {
  std::string known;
  for (const Choice &c : choices) {
    if (given == c.name) return c.value;
    known += known.empty() ? "" : ", ";
    known += std::string("\"") + c.name + "\"";
  }
  raise("ValueError", std::string("invalid argument: ") + argument + ": expected one of " + known + ", got \"" +
                          std::string(given) + "\"");
}

// An integer argument of an int32 option: tvm-ffi passes an int64, which must not wrap into a legal value.
inline int32_t int32_argument(const char *argument, int64_t value) {
  if (value < INT32_MIN || value > INT32_MAX)
    raise("ValueError", std::string("invalid argument: ") + argument + ": " + std::to_string(value) +
                            " does not fit in an int32");
  return static_cast<int32_t>(value);
}

inline int32_t fp8_format(const tvm::ffi::String &fp8_dtype) {
  return choose("fp8_dtype", fp8_dtype, {{"e4m3", MXFP8_FORMAT_E4M3}, {"e5m2", MXFP8_FORMAT_E5M2}});
}

inline int32_t direction(const tvm::ffi::String &name) {
  return choose("direction", name, {{"rowwise", MXFP8_DIRECTION_ROWWISE}, {"columnwise", MXFP8_DIRECTION_COLUMNWISE}});
}

// The DLTensor a TensorView holds, strides as given (NULL is a legal DLPack "row-major"; the view's
// strides() accessor would refuse it). A TensorView is a standard-layout class whose one member is that
// DLTensor, so the two addresses are interchangeable ([basic.compound]); the asserts keep it so.
static_assert(std::is_standard_layout_v<tvm::ffi::TensorView> && sizeof(tvm::ffi::TensorView) == sizeof(DLTensor),
              "tvm::ffi::TensorView is no longer a bare DLTensor");
inline const DLTensor &dl_tensor(const tvm::ffi::TensorView &view) {
  return *reinterpret_cast<const DLTensor *>(&view);
}
inline DLTensor *mutable_dl_tensor(tvm::ffi::TensorView &view) { return reinterpret_cast<DLTensor *>(&view); }

// A caller's tensor lent to an mxfp8_tensor_desc (nothing here outlives the call unless a tvm-ffi view
// holds the caller's tensor, see export_scales).
using mxfp8_adapter::borrowed;

// The stream the work on `device` runs on: the one tvm-ffi's environment holds for it (the caller's
// framework sets it; for torch tensors, torch's current stream), NULL (the legacy default stream) when
// none is set. Host memory has no stream. Pinned and managed memory are CUDA memory to a kernel, so they
// take the stream of their CUDA device.
inline void *stream_for(DLDevice device) {
  switch (device.device_type) {
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLCUDAManaged: return TVMFFIEnvGetStream(kDLCUDA, device.device_id);
    default: return nullptr;
  }
}

// Owns an mxfp8_tensor for the length of one call.
class TensorHandle {
 public:
  explicit TensorHandle(const mxfp8_tensor_desc &desc) { check(mxfp8_tensor_create(&desc, &tensor_)); }
  ~TensorHandle() { mxfp8_tensor_release(tensor_); }
  TensorHandle(TensorHandle &&other) noexcept : tensor_(std::exchange(other.tensor_, nullptr)) {}
  TensorHandle(const TensorHandle &) = delete;
  TensorHandle &operator=(const TensorHandle &) = delete;
  TensorHandle &operator=(TensorHandle &&) = delete;
  const mxfp8_tensor *get() const { return tensor_; }

 private:
  mxfp8_tensor *tensor_ = nullptr;
};

}  // namespace mxfp8_tvm_ffi

#endif  // MXFP8_TVM_FFI_CALL_SUPPORT_HPP_
