// The PTX of Hopper's bulk-asynchronous copies and of the mbarriers they complete on, wrapped once for the
// kernels that run a shared-memory ring (bulk_copy_cuda.cu). sm_90 and later only:
// every wrapper exists only in device code compiled for such an architecture, so a caller guards its use
// with the same `__CUDA_ARCH__ >= 900` (and its launch with bulk_async_supported(), bulk_copy.cuh).
//
// The rules these kernels follow (PTX ISA, "mbarrier" and "Asynchronous proxy"):
// - an mbarrier is initialized by one thread, and fence_mbarrier_init() makes that visible to the bulk
//   copies (the async proxy) before any copy may complete on it; a block barrier then publishes it to
//   the threads that wait on it;
// - a phase completes when its expected arrivals have arrived and its transaction bytes have landed:
//   arrive_expect_tx(bytes) is the issuing thread's arrival plus the bytes the copy will report, so the
//   count must equal the bytes copied;
// - waiters name the phase by its parity (phase k of a barrier used once per ring turn: parity k & 1);
// - shared memory read with ordinary loads and then overwritten by a bulk copy needs a proxy fence
//   between the two (fence_proxy_async_shared), or the copy may land before the reads are done.
#pragma once

#include <cstdint>

namespace mxfp8::cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t shared_address(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(arrivals) : "memory");
}

// The barriers' initialization visible to the bulk copies (the async proxy) that complete on them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Waits (acquire, CTA scope) until the phase of `barrier` with this parity has completed.
__device__ __forceinline__ void wait_parity(uint32_t barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(barrier), "r"(parity) : "memory");
  } while (!done);
}

// One arrival (release, CTA scope): the caller's earlier memory accesses are ordered before it.
__device__ __forceinline__ void arrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(barrier) : "memory");
}

// The issuing thread's arrival, expecting `bytes` more of transactions before the phase completes.
__device__ __forceinline__ void arrive_expect_tx(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes) : "memory");
}

// Global -> shared: `bytes` (a multiple of 16, both addresses 16-byte aligned), counted on `barrier`.
__device__ __forceinline__ void bulk_load(uint32_t dst, const void *src, uint32_t bytes, uint32_t barrier) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(barrier)
               : "memory");
}

// Shared -> global, as one bulk group of its own (wait_bulk_group_read / wait_bulk_groups track it).
__device__ __forceinline__ void bulk_store(void *dst, uint32_t src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Until at most kPending of this thread's bulk groups still read their shared memory.
template <int kPending>
__device__ __forceinline__ void wait_bulk_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Until every bulk group of this thread has completed (its writes done).
__device__ __forceinline__ void wait_bulk_groups() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Orders this thread's earlier generic-proxy accesses to shared memory before later async-proxy ones.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
#endif

}  // namespace mxfp8::cuda
