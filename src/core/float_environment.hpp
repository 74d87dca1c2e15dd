// The floating-point environment the library's host arithmetic is written for: round to nearest even,
// subnormals neither flushed nor read as zero. A caller's thread may run with another: XLA's CPU threads
// and programs linked with -ffast-math (crtfastmath) set flush-to-zero and denormals-are-zero, which
// would silently change decoded values and chosen scales. Each C entry point sets the default
// environment for its duration and restores the caller's on return; the threads a call starts inherit
// it (pthread_create copies the creating thread's environment).
//
// The cost matters: every C call pays it. fegetenv / fesetenv save and load the x87 environment too, about
// 190 ns a call on x86-64 (two fesetenv), against a views-only export of about 2 us. So on x86 the guard
// first reads MXCSR and the x87 control word (a few ns): when both already say the default (exceptions
// masked, round to nearest, no flush; x87 also at 64-bit precision) it only restores MXCSR on return, which
// gives back the caller's sticky exception flags as fesetenv would; otherwise it takes the full path.
#pragma once

#include <cfenv>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace mxfp8 {

// fegetenv on entry, the default environment for the call, fesetenv of the caller's on return.
class SavedFloatEnvironment {
 public:
  SavedFloatEnvironment() noexcept : saved_ok_(std::fegetenv(&saved_) == 0) {
    if (saved_ok_) std::fesetenv(FE_DFL_ENV);
  }
  ~SavedFloatEnvironment() {
    if (saved_ok_) std::fesetenv(&saved_);
  }
  SavedFloatEnvironment(const SavedFloatEnvironment &) = delete;
  SavedFloatEnvironment &operator=(const SavedFloatEnvironment &) = delete;

 private:
  std::fenv_t saved_;
  bool saved_ok_;
};

#if defined(__x86_64__) || defined(__i386__)
class DefaultFloatEnvironment {
 public:
  DefaultFloatEnvironment() noexcept : mxcsr_(_mm_getcsr()) {
    unsigned short x87;
    __asm__ volatile("fnstcw %0" : "=m"(x87));
    // MXCSR without its six sticky flags; the x87 word's masks, precision and rounding fields.
    already_default_ = (mxcsr_ & ~kMxcsrFlags) == kDefaultMxcsr && (x87 & kX87Fields) == kDefaultX87;
    if (!already_default_) full_.emplace();
  }
  ~DefaultFloatEnvironment() {
    if (already_default_) _mm_setcsr(mxcsr_);  // the caller's flags back, as fesetenv would
  }
  DefaultFloatEnvironment(const DefaultFloatEnvironment &) = delete;
  DefaultFloatEnvironment &operator=(const DefaultFloatEnvironment &) = delete;

 private:
  static constexpr unsigned kMxcsrFlags = 0x3Fu;
  static constexpr unsigned kDefaultMxcsr = 0x1F80u;  // all exceptions masked, round to nearest, no FTZ / DAZ
  static constexpr unsigned short kX87Fields = 0x0F3Fu;
  static constexpr unsigned short kDefaultX87 = 0x033Fu;  // masked, 64-bit precision, round to nearest
  unsigned mxcsr_;
  bool already_default_;
  std::optional<SavedFloatEnvironment> full_;
};
#else
using DefaultFloatEnvironment = SavedFloatEnvironment;
#endif

}  // namespace mxfp8
