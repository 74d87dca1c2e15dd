// The CUDA runtime seam (cuda_runtime.hpp): the device scope, the SM count kernels size their grids by,
// and device memory for the copies the library allocates itself: a stream-ordered pool per device that
// keeps up to kRetainedBytes of freed memory for reuse. The device's default pool gives memory back to
// the driver at every synchronization, and mapping it again costs more than a small export itself.
#include <cuda_runtime.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>

#include "cuda/cuda_check.cuh"
#include "core/error.hpp"
#include "cuda/cuda_runtime.hpp"

namespace mxfp8::cuda {
namespace {

constexpr uint64_t kRetainedBytes = 64ull << 20;
constexpr int kMaxDevices = 64;


// MXFP8_DEVICE_POOL_LIMIT_BYTES caps each pool (CUDA rounds it up to its allocation granularity): a
// process that shares the GPU can bound what the library holds, and tests can make allocations fail.
// Unset or 0: no cap beyond the device's memory.
size_t pool_limit() {
  const char *text = std::getenv("MXFP8_DEVICE_POOL_LIMIT_BYTES");
  if (!text || !*text) return 0;
  char *end = nullptr;
  errno = 0;
  const unsigned long long limit = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || *text == '-')
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "MXFP8_DEVICE_POOL_LIMIT_BYTES is \"", text, "\", expected a byte count");
  return static_cast<size_t>(limit);
}

// Created on first use and kept for the life of the process (destroying a pool during static
// destruction could race with the CUDA runtime's own teardown).
cudaMemPool_t pool_for(int device) {
  static std::mutex mutex;
  static cudaMemPool_t pools[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) fail(MXFP8_ERROR_UNSUPPORTED, "CUDA device ", device, " is out of range");
  std::lock_guard<std::mutex> lock(mutex);
  if (!pools[device]) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    props.maxSize = pool_limit();
    cudaMemPool_t pool = nullptr;
    check(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
    uint64_t threshold = kRetainedBytes;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold), "cudaMemPoolSetAttribute");
    pools[device] = pool;
  }
  return pools[device];
}

}  // namespace

bool compiled_in() { return true; }
void require_compiled_in() {}

DeviceScope::DeviceScope(int device) {
  // A forged or stale device id is the caller's mistake, not a CUDA failure: say which devices exist.
  int count = 0;
  check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (device < 0 || device >= count)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "cuda:", device, " does not exist: this process sees ", count, " CUDA device",
         count == 1 ? "" : "s");
  int current = 0;
  check(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device) {
    check(cudaSetDevice(device), "cudaSetDevice");
    previous_ = current;
  }
}

DeviceScope::~DeviceScope() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

int sm_count(int device) {
  static std::atomic<int> cached[kMaxDevices] = {};
  if (device >= 0 && device < kMaxDevices) {
    const int known = cached[device].load(std::memory_order_relaxed);
    if (known > 0) return known;
  }
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  if (device >= 0 && device < kMaxDevices) cached[device].store(sms, std::memory_order_relaxed);
  return sms;
}

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

void *allocate(int64_t bytes, void *stream) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  void *p = nullptr;
  check(cudaMallocFromPoolAsync(&p, static_cast<size_t>(bytes), pool_for(device), static_cast<cudaStream_t>(stream)),
        "allocating device memory for the scales copy");
  return p;
}

// Cannot fail from the caller's point of view (a deleter has no way to report it); a failure (a stream
// in an invalidated graph capture, say) is consumed here so that it does not surface as the error of the
// next, unrelated call that checks cudaGetLastError.
void free_async(void *ptr, void *stream) noexcept {
  if (cudaFreeAsync(ptr, static_cast<cudaStream_t>(stream)) != cudaSuccess) cudaGetLastError();
}

}  // namespace mxfp8::cuda
