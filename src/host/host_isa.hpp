// Which vector instructions a host loop runs with. The loops are straight-line code over fixed 32-element
// blocks (mx_numerics_lanes.hpp) that the compiler vectorizes; on x86-64 each is compiled three times,
// for the baseline (SSE2), for AVX2 and for AVX-512, and every call runs the best one this CPU and OS
// support. No code path depends on it for its results: all three give the same bytes (the host tests
// compare them). Other architectures build the baseline only (which is NEON on aarch64).
#pragma once

#define MXFP8_ALWAYS_INLINE inline __attribute__((always_inline))

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MXFP8_HOST_ISA_X86 1
#define MXFP8_TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2")))
#define MXFP8_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2")))
#else
#define MXFP8_HOST_ISA_X86 0
#endif

namespace mxfp8 {

enum class HostIsa { Baseline = 0, Avx2 = 1, Avx512 = 2 };

// The best this CPU supports, lowered to MXFP8_HOST_ISA when that names a lower one ("baseline" or
// "avx2"; for tests and comparisons, read at every call).
HostIsa host_isa();

// The lanes of one vector register of each: 32-bit lanes per 512-, 256- and 128-bit register.
constexpr int kLanesAvx512 = 16, kLanesAvx2 = 8, kLanesBaseline = 4;

// Kernel::run<N>(args...) compiled for host_isa(), with N its lanes per register. Kernel::run must be
// MXFP8_ALWAYS_INLINE, as must what its inner loops call, so that each wrapper below holds its own copy
// compiled for its target.
template <class Kernel, class... Args>
void run_baseline(const Args &...args) {
  Kernel::template run<kLanesBaseline>(args...);
}
#if MXFP8_HOST_ISA_X86
template <class Kernel, class... Args>
MXFP8_TARGET_AVX2 void run_avx2(const Args &...args) {
  Kernel::template run<kLanesAvx2>(args...);
}
template <class Kernel, class... Args>
MXFP8_TARGET_AVX512 void run_avx512(const Args &...args) {
  Kernel::template run<kLanesAvx512>(args...);
}
#endif

template <class Kernel, class... Args>
void run_for_host_isa(const Args &...args) {
#if MXFP8_HOST_ISA_X86
  switch (host_isa()) {
    case HostIsa::Avx512: return run_avx512<Kernel>(args...);
    case HostIsa::Avx2: return run_avx2<Kernel>(args...);
    case HostIsa::Baseline: break;
  }
#endif
  run_baseline<Kernel>(args...);
}

}  // namespace mxfp8
