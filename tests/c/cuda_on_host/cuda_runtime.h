// A stand-in for the CUDA runtime, so that a kernel's source runs on the CPU (test_row_kernel_on_host):
// each thread of the grid runs to completion in turn. Valid for kernels whose threads never wait on each
// other (no shared memory, barriers or warp shuffles), as the TRT-LLM row kernel's do not. Every vector
// load and store checks its alignment, as the device would fault on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

struct HostDim3 {
  unsigned x = 0, y = 0, z = 0;
};
inline HostDim3 threadIdx, blockIdx, gridDim, blockDim;

#define __global__
#define __device__
#define __launch_bounds__(...)

template <class T>
void expect_aligned(const T *p) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(T) != 0) {
    std::fprintf(stderr, "a %zu-byte access at a misaligned address: the device would fault\n", sizeof(T));
    std::abort();
  }
}
template <class T>
T __ldcs(const T *p) {
  expect_aligned(p);
  return *p;
}
template <class T>
T __ldg(const T *p) {
  expect_aligned(p);
  return *p;
}
template <class T>
void __stcs(T *p, T v) {
  expect_aligned(p);
  *p = v;
}
using std::min;

typedef void *cudaStream_t;
typedef int cudaError_t;
inline cudaError_t cudaGetLastError() { return 0; }

// kernel<<<grid, threads, 0, stream>>>(args...), rewritten by tests/c/CMakeLists.txt into this call.
inline long host_launches = 0;
template <class Kernel, class... Args>
void run_grid(Kernel kernel, unsigned grid, unsigned threads, Args... args) {
  ++host_launches;
  gridDim.x = grid;
  blockDim.x = threads;
  for (unsigned b = 0; b < grid; ++b)
    for (unsigned t = 0; t < threads; ++t) {
      blockIdx.x = b;
      threadIdx.x = t;
      kernel(args...);
    }
}
