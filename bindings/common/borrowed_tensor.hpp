// A caller's tensor lent to the C API for one call, shared by the adapters that translate another
// framework's calls (bindings/tvm_ffi, bindings/jax). Not installed; not part of the C API.
#pragma once

#include <mxfp8/mxfp8.h>

#include <cstring>

namespace mxfp8_adapter {

// A managed tensor with no deleter, which the C API reads as borrowed memory: the caller keeps it alive
// for the call, and nothing the call returns outlives it unless the adapter keeps the caller's tensor.
inline DLManagedTensorVersioned borrowed(const DLTensor &view) {
  DLManagedTensorVersioned m;
  std::memset(&m, 0, sizeof m);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.dl_tensor = view;
  return m;
}

}  // namespace mxfp8_adapter
