/* What the GPU test executables share: checked CUDA calls and the skip on machines without a device. */
#ifndef MXFP8_TEST_GPU_SUPPORT_H_
#define MXFP8_TEST_GPU_SUPPORT_H_

#include "test_support.h"

#ifdef MXFP8_TEST_WITH_CUDA
#include <cuda_runtime_api.h>

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      print_error("%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      fail();                                                                           \
    }                                                                                   \
  } while (0)

/* A device copy of n host bytes, and a device buffer of n bytes (and one guard byte) poisoned with
 * POISON; cudaFree both. */
static inline uint8_t *to_device(const uint8_t *host, size_t n) {
  uint8_t *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, n ? n : 1));
  if (n) CUDA_OK(cudaMemcpy(d, host, n, cudaMemcpyHostToDevice));
  return d;
}

static inline uint8_t *poisoned_device(size_t n) {
  uint8_t *d = NULL;
  CUDA_OK(cudaMalloc((void **)&d, n + 1));
  CUDA_OK(cudaMemset(d, POISON, n + 1));
  return d;
}

#define REQUIRE_GPU()                                         \
  do {                                                        \
    if (!cuda_device_available()) {                           \
      print_message("no CUDA device: skipping GPU case\n");  \
      skip();                                                 \
    }                                                         \
  } while (0)
#else
#define REQUIRE_GPU()                                                     \
  do {                                                                    \
    print_message("libmxfp8 built without CUDA: skipping GPU case\n");   \
    skip();                                                               \
  } while (0)
#endif
#endif
