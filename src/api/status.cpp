// Status names, the thread-local last error and the version: the parts of the ABI that cannot fail.
#include <cstring>
#include <string>

#include "core/error.hpp"
#include "mxfp8/mxfp8.h"

namespace mxfp8 {
namespace {
thread_local std::string last_error;
}

void set_last_error(mxfp8_status status, const char *message) noexcept {
  try {
    last_error.assign(message ? message : "");
  } catch (...) {
    // Storing the detail needs memory we do not have; keep at least the status name.
    last_error.clear();
    (void)status;
  }
  if (last_error.empty()) {
    // Never leave a failure without a message: fall back to the status name, which is static.
    try {
      last_error.assign(mxfp8_status_string(status));
    } catch (...) {
    }
  }
}

}  // namespace mxfp8

extern "C" {

MXFP8_API uint32_t mxfp8_version(void) { return MXFP8_VERSION; }

MXFP8_API const char *mxfp8_status_string(mxfp8_status status) {
  switch (status) {
    case MXFP8_OK: return "success";
    case MXFP8_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case MXFP8_ERROR_MISSING_DATA: return "missing data";
    case MXFP8_ERROR_UNSUPPORTED: return "unsupported";
    case MXFP8_ERROR_OUT_OF_MEMORY: return "out of memory";
    case MXFP8_ERROR_CUDA: return "CUDA error";
    case MXFP8_ERROR_INTERNAL: return "internal error";
    case MXFP8_NUM_STATUS: break;
  }
  return "unknown status";
}

MXFP8_API const char *mxfp8_last_error(void) { return mxfp8::last_error.c_str(); }

}  // extern "C"
