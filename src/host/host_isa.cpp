// Which vector instruction set the host loops run with; see host_isa.hpp.
#include "host/host_isa.hpp"

#include <cstdlib>
#include <cstring>

namespace mxfp8 {
namespace {

HostIsa detected() {
#if MXFP8_HOST_ISA_X86
  // These check the OS too: AVX-512 counts only when the kernel saves the ZMM registers (XCR0).
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return HostIsa::Avx512;
  if (__builtin_cpu_supports("avx2")) return HostIsa::Avx2;
#endif
  return HostIsa::Baseline;
}

}  // namespace

HostIsa host_isa() {
  static const HostIsa best = detected();
  const char *wanted = std::getenv("MXFP8_HOST_ISA");
  if (wanted && std::strcmp(wanted, "baseline") == 0) return HostIsa::Baseline;
  if (wanted && std::strcmp(wanted, "avx2") == 0 && best > HostIsa::Avx2) return HostIsa::Avx2;
  return best;
}

}  // namespace mxfp8
