// The scale unswizzle as a bulk-asynchronous pipeline (sm_90 and later; MXFP8_UNSWIZZLE_PATH=bulk).
//
// Why: a chunk of the swizzled buffer (W::kTilesPerChunk 128x4 tiles of one tile row) is one contiguous
// run of bytes, so it can be fetched by the SM's copy engine with one cp.async.bulk, and a block can keep
// several chunks in flight without holding them in registers. The register path (two register sets,
// scale_jobs_cuda.cu) has at most one chunk in flight per block and reached 0.80 of a copy on wide
// launches (262144 x 896 scales, the whole model; H100, bench/LOG.md 2026-12-06), the shared-memory path
// 0.87 with a block barrier per chunk. Here the loads of the next kStages - 1 chunks are always in flight
// while one is stored, and no block barrier is taken after the start.
//
// The pipeline, per block (a persistent grid: block b takes chunks b, b + gridDim.x, ... of the batch,
// `mine` of them; the n-th is "chunk n" below):
// - a ring of kStages stages in dynamic shared memory, one chunk each (chunk n in stage n % kStages), and
//   two mbarriers per stage: `full` (1 arrival: the producer's arrive.expect_tx, plus the chunk's bytes
//   as transactions) and `empty` (one arrival per warp: the warp has read the stage);
// - the producer is thread 0. It fills the ring with chunks 0 .. kStages - 1, then, each time every warp
//   has released chunk n (it waits on empty[n % kStages]), issues chunk n + kStages into the same stage;
// - every warp consumes every chunk: it waits on full[n % kStages] (phase parity (n / kStages) & 1, the
//   stage's (n / kStages)-th use), reads its thread's four 16-byte lines out of the stage, orders those
//   reads before the async proxy's next write there (fence.proxy.async, every thread, and the producer
//   again after its wait on `empty`), arrives on empty[n % kStages] (lane 0, after __syncwarp), and only
//   then stores the lines as compact rows with store_transposed_chunk (the registers path's store: a
//   4 x 4 word transpose, 16-byte stores), so the refill of the stage waits for the reads, never for the
//   stores;
// - phases cannot be confused: full[s] cannot complete a second phase before every warp has released the
//   first (the refill waits on empty[s]), and empty[s] cannot collect a warp's next arrival before the
//   producer has refilled s (the warp waits on full[s] first);
// - exit: the producer issues chunk n only for n < mine and every thread waits on full for every one of
//   them, so no bulk copy is pending when a block leaves; the last `empty` phases are never waited on.
// Each thread takes line l of quad q (tiles 4q .. 4q + 3): a warp is 4 quads x 8 consecutive lines, so
// the 8 lanes of each quarter-warp read 128 contiguous bytes of one tile (no bank conflict), and a store
// instruction writes 8 rows x 64 contiguous bytes.
//
// Sizes: a narrow chunk is 16 KiB (4 stages, 64 KiB a block, 3 blocks an SM), a wide one 32 KiB (3
// stages, 96 KiB, 2 blocks an SM): about 192 KiB of an SM's shared memory, most of it loads in flight.
// The launches that come here are the registers path's (scale_jobs_cuda.cu, launch_batch): aligned
// unswizzles alone, not direct, not a gather, every swizzled base 16-byte aligned (cp.async.bulk's unit);
// a chunk's start is that base plus a multiple of 512 bytes and its size a multiple of 512.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "cuda/bulk_async_ptx.cuh"
#include "cuda/cuda_check.cuh"
#include "cuda/scale_chunks.cuh"

namespace mxfp8::cuda {
namespace {

template <class W>
struct BulkRing {
  static constexpr int kChunkBytes = W::kTilesPerChunk * static_cast<int>(kTileBytes);
  static constexpr int kStages = std::max(3, (64 << 10) / kChunkBytes);  // narrow 4, wide 3
  static constexpr int kBytes = kStages * kChunkBytes;
  static constexpr int kWarps = W::kThreads / 32;
};

// The thread's quad and line: 4 quads x 8 consecutive lines a warp (head comment).
__device__ QuadLine ring_quad_line() {
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  return QuadLine{(warp / 4) * 4 + lane / 8, (warp % 4) * 8 + lane % 8};
}

template <class W, int kCapacity>
__global__ void __launch_bounds__(W::kThreads, W::kMinBlocksPerSm)
    unswizzle_bulk_kernel(const __grid_constant__ JobBatch<kCapacity> batch, int32_t total_chunks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Ring = BulkRing<W>;
  static_assert(W::kThreads == W::kTilesPerChunk * 8 && W::kVectorsPerThread == 4, "a thread moves one line of a quad");
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t full[Ring::kStages];
  __shared__ __align__(8) uint64_t empty[Ring::kStages];
  const int32_t step = static_cast<int32_t>(gridDim.x);
  const int32_t first = static_cast<int32_t>(blockIdx.x);
  if (first >= total_chunks) return;  // the whole block: the grid is at most one block a chunk anyway
  const int32_t mine = (total_chunks - 1 - first) / step + 1;
  const bool producer = threadIdx.x == 0;
  if (producer) {
    for (int s = 0; s < Ring::kStages; ++s) {
      mbarrier_init(shared_address(&full[s]), 1);
      mbarrier_init(shared_address(&empty[s]), Ring::kWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();  // the barriers initialized before any thread waits on them

  int load_job = 0;  // the producer's cursor for locate: it runs up to kStages chunks ahead of its own reads
  auto issue = [&](int32_t n) {
    const int stage = n % Ring::kStages;
    const Chunk c = locate<W>(batch, first + n * step, load_job);
    const uint32_t bytes = static_cast<uint32_t>(c.tiles) * static_cast<uint32_t>(kTileBytes);
    const uint32_t barrier = shared_address(&full[stage]);
    arrive_expect_tx(barrier, bytes);  // the same count as the copy reports: the phase ends when it lands
    bulk_load(shared_address(ring + stage * Ring::kChunkBytes), swizzled_chunk(c), bytes, barrier);
  };
  if (producer)
    for (int32_t n = 0; n < Ring::kStages && n < mine; ++n) issue(n);

  const QuadLine at = ring_quad_line();
  const int lane = static_cast<int>(threadIdx.x) % 32;
  int job_index = 0;
  for (int32_t n = 0; n < mine; ++n) {
    const int stage = n % Ring::kStages;
    const uint32_t parity = static_cast<uint32_t>(n / Ring::kStages) & 1;
    const Chunk c = locate<W>(batch, first + n * step, job_index);
    wait_parity(shared_address(&full[stage]), parity);
    const uint8_t *staged = ring + stage * Ring::kChunkBytes;
    uint4 regs[W::kVectorsPerThread];
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int tile = 4 * at.quad + t;  // past a partial chunk: stale bytes, never read (zero, never stored)
      regs[t] = tile < c.tiles
                    ? *reinterpret_cast<const uint4 *>(staged + tile * static_cast<int>(kTileBytes) + at.line * static_cast<int>(kLineBytes))
                    : uint4{};
    }
    // Release the stage: this thread's reads ordered before the bulk copy that will overwrite it (a
    // generic-proxy read, then an async-proxy write), the warp's reads before lane 0's arrival.
    fence_proxy_async_shared();
    __syncwarp();
    if (lane == 0) arrive(shared_address(&empty[stage]));
    if (producer && n + Ring::kStages < mine) {
      wait_parity(shared_address(&empty[stage]), parity);  // every warp has read chunk n
      // The readers fenced before they arrived; the issuing thread fences too (one instruction a chunk),
      // so the generic reads are ordered before the async write on either side of the hand-off.
      fence_proxy_async_shared();
      issue(n + Ring::kStages);
    }
    store_transposed_chunk<W>(c, regs, at);
  }
#else
  __trap();  // never launched: launch_batch asks bulk_async_supported() first
#endif
}

}  // namespace

template <class W, int kCapacity>
void launch_unswizzle_bulk(const JobBatch<kCapacity> &batch, int64_t chunks, cudaStream_t stream) {
  for (int i = 0; i < batch.count; ++i) {
    const DeviceJob &j = batch.jobs[i];
    if (j.kind != JobKind::Unswizzle || j.gather || j.tiles.direct || (reinterpret_cast<uintptr_t>(j.swizzled) & 15) != 0)
      fail(MXFP8_ERROR_INTERNAL, "a job the bulk unswizzle cannot copy (not an aligned, tile-row unswizzle) reached it");
  }
  constexpr auto kernel = unswizzle_bulk_kernel<W, kCapacity>;
  constexpr int kRingBytes = BulkRing<W>::kBytes;
  const int64_t grid = std::min<int64_t>(chunks, resident_blocks<kernel>(W::kThreads, kRingBytes));
  kernel<<<static_cast<unsigned>(grid), W::kThreads, kRingBytes, stream>>>(batch, static_cast<int32_t>(chunks));
  check(cudaGetLastError(), "launching the bulk scale unswizzle kernel");
}

template void launch_unswizzle_bulk<Narrow, 1>(const JobBatch<1> &, int64_t, cudaStream_t);
template void launch_unswizzle_bulk<Narrow, kSmallBatch>(const JobBatch<kSmallBatch> &, int64_t, cudaStream_t);
template void launch_unswizzle_bulk<Narrow, kMaxJobsPerLaunch>(const JobBatch<kMaxJobsPerLaunch> &, int64_t, cudaStream_t);
template void launch_unswizzle_bulk<Wide, 1>(const JobBatch<1> &, int64_t, cudaStream_t);
template void launch_unswizzle_bulk<Wide, kSmallBatch>(const JobBatch<kSmallBatch> &, int64_t, cudaStream_t);
template void launch_unswizzle_bulk<Wide, kMaxJobsPerLaunch>(const JobBatch<kMaxJobsPerLaunch> &, int64_t, cudaStream_t);

}  // namespace mxfp8::cuda
