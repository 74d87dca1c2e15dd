// Failures inside the library: an exception carrying a status, and the one place that turns any
// exception into a status plus the thread's last-error message at the C boundary.
#pragma once

#include <exception>
#include <new>
#include <sstream>
#include <string>
#include <utility>

#include "core/call_allocations.hpp"
#include "core/float_environment.hpp"
#include "mxfp8/mxfp8.h"

namespace mxfp8 {

class Error : public std::exception {
 public:
  Error(mxfp8_status status, std::string message) : status_(status), message_(std::move(message)) {}
  mxfp8_status status() const noexcept { return status_; }
  const char *what() const noexcept override { return message_.c_str(); }

 private:
  mxfp8_status status_;
  std::string message_;
};

// Concatenates anything streamable: fail(MXFP8_ERROR_INVALID_ARGUMENT, "ndim ", n, " is negative").
template <class... Parts>
std::string cat(const Parts &...parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <class... Parts>
[[noreturn]] void fail(mxfp8_status status, const Parts &...parts) {
  throw Error(status, cat(parts...));
}

// Sets this thread's mxfp8_last_error(). Never throws: if the message cannot be stored, a fixed one is.
void set_last_error(mxfp8_status status, const char *message) noexcept;

// Runs `body` and maps whatever it throws to a status. Every extern "C" entry point is one call of this,
// so nothing below the boundary needs to know it is behind a C ABI.
template <class Body>
mxfp8_status guarded(Body &&body) noexcept {
  const DefaultFloatEnvironment float_environment;  // the caller's is restored on return
  try {
    const CallAllocations scope;  // what the caller's allocator hands this call
    body();
    return MXFP8_OK;
  } catch (const Error &e) {
    set_last_error(e.status(), e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    set_last_error(MXFP8_ERROR_OUT_OF_MEMORY, "out of host memory");
    return MXFP8_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    set_last_error(MXFP8_ERROR_INTERNAL, e.what());
    return MXFP8_ERROR_INTERNAL;
  } catch (...) {
    set_last_error(MXFP8_ERROR_INTERNAL, "unknown exception inside libmxfp8");
    return MXFP8_ERROR_INTERNAL;
  }
}

}  // namespace mxfp8
