// The floating-point environment the library's host arithmetic is written for: round to nearest even,
// subnormals neither flushed nor read as zero. A caller's thread may run with another: XLA's CPU threads
// and programs linked with -ffast-math (crtfastmath) set flush-to-zero and denormals-are-zero, which
// would silently change decoded values and chosen scales. Each C entry point sets the default
// environment for its duration and restores the caller's on return; the threads a call starts inherit
// it (pthread_create copies the creating thread's environment).
#pragma once

#include <cfenv>

namespace mxfp8 {

class DefaultFloatEnvironment {
 public:
  DefaultFloatEnvironment() noexcept : saved_ok_(std::fegetenv(&saved_) == 0) {
    if (saved_ok_) std::fesetenv(FE_DFL_ENV);
  }
  ~DefaultFloatEnvironment() {
    if (saved_ok_) std::fesetenv(&saved_);
  }
  DefaultFloatEnvironment(const DefaultFloatEnvironment &) = delete;
  DefaultFloatEnvironment &operator=(const DefaultFloatEnvironment &) = delete;

 private:
  std::fenv_t saved_;
  bool saved_ok_;
};

}  // namespace mxfp8
