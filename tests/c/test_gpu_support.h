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
