// The bulk-copy pipeline (bulk_copy.cuh): each block runs a ring of kStages shared-memory buffers that
// one thread keeps full with cp.async.bulk loads (global -> shared, completion counted in bytes on an
// mbarrier per stage) and drains with cp.async.bulk stores (shared -> global, tracked as bulk groups).
// The copy engine of the SM does the moving; the thread only issues, so a block keeps
// (kStages - 1) * kChunkBytes of loads in flight with no registers or warps spent on data.
//
// A launch takes up to kMaxSpans spans (the kernel parameter, under 32 KiB); their chunks of at most
// kChunkBytes are numbered span after span, and block b takes chunks b, b + grid, b + 2 * grid, ..., so
// that every block reads from many places at once and a span's tail is spread. A span of rows shorter
// than a chunk (a K shard's window: 1-4 KiB of each 8-28 KiB row) puts as many whole rows in a chunk as
// fit, one bulk load each, completing on the stage's one barrier; the destination rows are adjacent (a
// bucket, a shard's own buffer), so the chunk's store is one bulk copy. A longer row is cut into chunks,
// as a contiguous span (one row) is.
//
// Why not cudaMemcpyAsync per span: a 235B-class refit moves 1,504 spans of 6-12 MiB, and each call
// costs ~5-10 µs of host time: the GPU outran the host that fed it (issue 36, bench/refit_scale.py).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/copy_chunks.hpp"
#include "core/error.hpp"
#include "cuda/bulk_copy.cuh"
#include "cuda/cuda_check.cuh"

namespace mxfp8::cuda {
namespace {

constexpr int kChunkBytes = static_cast<int>(kCopyChunkBytes);  // core/copy_chunks.hpp cuts spans into these
constexpr int kStages = 6;                          // 96 KiB a block: two blocks an SM
constexpr int kRingBytes = kStages * kChunkBytes;
constexpr int kMaxSpans = 680;                      // 48 bytes each: 32,656 bytes of parameter

struct SpanBatch {
  int32_t count;
  int64_t total_chunks;
  const uint8_t *src[kMaxSpans];
  uint8_t *dst[kMaxSpans];
  int64_t row_bytes[kMaxSpans];
  int64_t rows[kMaxSpans];
  int64_t src_stride[kMaxSpans];
  int64_t first_chunk[kMaxSpans];  // chunks of the spans before this one
};
static_assert(sizeof(SpanBatch) <= 32764, "the kernel parameter limit");

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t shared_address(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void wait_parity(uint32_t barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(barrier), "r"(parity) : "memory");
  } while (!done);
}
#endif

__global__ void __launch_bounds__(32) bulk_copy_kernel(const __grid_constant__ SpanBatch batch) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t full[kStages];
  __shared__ uint8_t *stage_dst[kStages];
  __shared__ uint32_t stage_bytes[kStages];
  if (threadIdx.x != 0) return;
  const int64_t step = gridDim.x;
  const int64_t mine = blockIdx.x < batch.total_chunks ? (batch.total_chunks - blockIdx.x + step - 1) / step : 0;
  if (mine == 0) return;
  for (int s = 0; s < kStages; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&full[s])) : "memory");
  // The barriers' initialization must be visible to the bulk copies (the async proxy) that complete on them.
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");

  int span = 0;  // the span of the next chunk loaded: chunks only increase, so the cursor only advances
  auto load = [&](int64_t n) {
    const int stage = static_cast<int>(n % kStages);
    const int64_t chunk = blockIdx.x + n * step;
    while (span + 1 < batch.count && chunk >= batch.first_chunk[span + 1]) ++span;
    const int64_t row_bytes = batch.row_bytes[span];
    const CopyChunk c = copy_chunk(row_bytes, batch.rows[span], chunk - batch.first_chunk[span]);
    const uint32_t rows = static_cast<uint32_t>(c.rows), bytes = static_cast<uint32_t>(c.bytes);
    const int64_t src_stride = batch.src_stride[span];
    stage_dst[stage] = batch.dst[span] + c.row * row_bytes + c.offset;  // destination rows back to back
    stage_bytes[stage] = rows * bytes;
    const uint32_t barrier = shared_address(&full[stage]);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(rows * bytes)
                 : "memory");
    const uint8_t *src = batch.src[span] + c.row * src_stride + c.offset;
    for (uint32_t r = 0; r < rows; ++r)
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                   ::"r"(shared_address(ring + stage * kChunkBytes + r * bytes)), "l"(src + r * src_stride),
                   "r"(bytes), "r"(barrier)
                   : "memory");
  };
  for (int64_t n = 0; n < kStages && n < mine; ++n) load(n);
  for (int64_t n = 0; n < mine; ++n) {
    const int stage = static_cast<int>(n % kStages);
    wait_parity(shared_address(&full[stage]), static_cast<uint32_t>((n / kStages) & 1));
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(stage_dst[stage]), "r"(shared_address(ring + stage * kChunkBytes)), "r"(stage_bytes[stage])
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    // Refill the stage the previous store read from, once it has read it (at most this store pending).
    if (n >= 1 && n - 1 + kStages < mine) {
      asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
      load(n - 1 + kStages);
    }
  }
  // Every store complete before the block (and its shared memory) goes away.
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
#else
  __trap();  // never launched: bulk_copy_available() checks the loaded image's architecture
#endif
}

bool env_allows_bulk_copy() {
  static const bool allowed = [] {
    const char *text = std::getenv("MXFP8_BULK_COPY");
    return !(text && std::strcmp(text, "0") == 0);
  }();
  return allowed;
}

constexpr int kMaxDevices = 64;

}  // namespace

bool bulk_copy_available() {
  if (!env_allows_bulk_copy()) return false;
  // 0 unknown, 1 no, 2 yes, per device: the image the runtime loads for a device is fixed per process.
  static std::atomic<int> known[kMaxDevices] = {};
  const int device = current_device();
  const bool cacheable = device >= 0 && device < kMaxDevices;
  if (cacheable) {
    const int k = known[device].load(std::memory_order_relaxed);
    if (k != 0) return k == 2;
  }
  // binaryVersion is the architecture of the code the runtime picked for this device: an sm_80 build
  // running on a Hopper has none of the pipeline's instructions.
  cudaFuncAttributes attributes{};
  check(cudaFuncGetAttributes(&attributes, bulk_copy_kernel), "cudaFuncGetAttributes");
  const bool yes = attributes.binaryVersion >= 90;
  if (yes)  // once per device, with the answer: the copy kernel's ring is above the 48 KiB default
    check(cudaFuncSetAttribute(bulk_copy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kRingBytes),
          "setting the bulk copy's shared memory");
  if (cacheable) known[device].store(yes ? 2 : 1, std::memory_order_relaxed);
  return yes;
}

void bulk_copy(const CopySpan *spans, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  // Heap, not stack: the batch is ~32 KiB.
  auto batch = std::make_unique<SpanBatch>();
  const int64_t blocks_per_launch = 2 * static_cast<int64_t>(sm_count(current_device()));
  size_t next = 0;
  while (next < count) {
    batch->count = 0;
    int64_t chunks = 0;
    for (; next < count && batch->count < kMaxSpans; ++next) {
      const CopySpan &s = spans[next];
      if (!bulk_copy_fits(s)) fail(MXFP8_ERROR_INTERNAL, "a span that is not 16-byte aligned reached the bulk copy");
      if (s.bytes() == 0) continue;
      const int i = batch->count++;
      batch->src[i] = s.src;
      batch->dst[i] = s.dst;
      batch->row_bytes[i] = s.row_bytes;
      batch->rows[i] = s.rows;
      batch->src_stride[i] = s.src_stride;
      batch->first_chunk[i] = chunks;
      chunks += copy_chunk_count(s.row_bytes, s.rows);
    }
    if (batch->count == 0) continue;
    batch->total_chunks = chunks;
    const unsigned grid = static_cast<unsigned>(std::min(chunks, blocks_per_launch));
    bulk_copy_kernel<<<grid, 32, kRingBytes, stream>>>(*batch);
    check(cudaGetLastError(), "launching the bulk copy kernel");
  }
}

}  // namespace mxfp8::cuda
