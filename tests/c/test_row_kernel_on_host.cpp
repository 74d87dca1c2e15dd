// The TRT-LLM row kernel (src/cuda/permute_rows_cuda.cu) without a GPU: its source, compiled for the CPU
// behind cuda_on_host/ (each thread of the grid run in turn, every vector access checked for alignment),
// takes the jobs a grouped convert makes (one row-permuted values job, one layout job per expert) and
// must write what FlashInfer's steps give, rebuilt here one at a time (vLLM's swap_w13_to_w31,
// reorder_rows_for_gated_act_gemm, shuffle_matrix_a's srcToDstBlk32RowMap, then the 128x4 interleave
// of the scales, padding 0). Shapes take the 16-, 4- and 1-byte paths of values and scale rows, rows in
// one or two passes, 1 to 8 experts; odd byte offsets; grids of 1, 5 and 1000 blocks; the exponent
// fix-up; scale jobs at irregular strides (two runs, two launches) and of another layout than the values
// (launched apart). Outputs are poisoned, and the bytes past them must stay so. The GPU tests
// (test_gpu_trtllm.c) run the same shapes on a device; this one runs everywhere, CI included.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/cuda_check.cuh"
#include "core/scale_job.hpp"

namespace {

constexpr uint8_t kPoison = 0xEE;
constexpr int kBlockMap[32] = {0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27,
                               4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31};
int failures = 0;

// Destination row j of one expert of m rows holds source row idx[j].
std::vector<int64_t> row_indices(int64_t m, bool gated) {
  std::vector<int64_t> step(m), out(m);
  for (int64_t j = 0; j < m; ++j) step[j] = j;
  if (gated) {
    std::vector<int64_t> swapped(m);  // [gate; up] -> [up; gate]
    for (int64_t j = 0; j < m; ++j) swapped[j] = j < m / 2 ? m / 2 + j : j - m / 2;
    const int64_t top = (m + 1) / 2;  // top half to even rows, bottom half to odd rows
    for (int64_t i = 0; i < top; ++i) step[2 * i] = swapped[i];
    for (int64_t i = 0; top + i < m; ++i) step[2 * i + 1] = swapped[top + i];
  }
  for (int64_t old = 0; old < m; ++old) out[old / 32 * 32 + kBlockMap[old % 32]] = step[old];
  return out;
}

// cuBLAS's 128x4 layout: byte offset of (r, c) in a matrix of cp (a multiple of 4) columns.
int64_t interleaved(int64_t r, int64_t c, int64_t cp) {
  return ((r / 128) * (cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

uint64_t next(uint64_t &s) {
  s ^= s << 13, s ^= s >> 7, s ^= s << 17;
  return s;
}

struct Case {
  int64_t experts, n, k;
  bool gated;
  int in_offset;    // of the source values and scales
  int out_offset;   // of the values output (scales output: 16 bytes on, still aligned for the row kernel)
  bool fixup;       // exponent byte 0 written as 1
  int blocks;       // resident blocks the launch sees
  int order;        // 0: experts' scale outputs in order; 1: reversed; 2: expert 0 last (two runs)
  bool other_layout;  // the scale jobs in the other TRT-LLM layout than the values
};

void run(const Case &t) {
  using namespace mxfp8;
  cuda::host_resident_blocks = t.blocks;
  const int64_t E = t.experts, n = t.n, k = t.k, c = (k + 31) / 32, cp = (c + 3) / 4 * 4;
  uint64_t seed = static_cast<uint64_t>(E * 1000003 + n * 1009 + k) | 1;
  std::vector<uint8_t> vin(E * n * k + 32), sin(E * n * c + 32), vout(E * n * k + 32, kPoison), sout(E * n * cp + 32, kPoison);
  for (auto &b : vin) b = static_cast<uint8_t>(next(seed));
  for (auto &b : sin) b = next(seed) % 4 == 0 ? 0 : static_cast<uint8_t>(next(seed));  // zeros for the fix-up
  const uint8_t *V = vin.data() + t.in_offset, *S = sin.data() + t.in_offset;
  uint8_t *VO = vout.data() + t.out_offset, *SO = sout.data() + (t.out_offset ? 16 : 0);
  const bool scales_gated = t.gated != t.other_layout;
  auto slot = [&](int64_t e) { return t.order == 1 ? E - 1 - e : t.order == 2 ? (e + 1) % E : e; };
  std::vector<ScaleJob> jobs;
  jobs.push_back(permuted_rows_job(t.gated ? MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED : MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, V, VO, E, n, k));
  for (int64_t e = 0; e < E; ++e) {  // what scale_job makes of a compact grouped source
    ScaleJob j{JobKind::Layout, nullptr, ByteMatrix{const_cast<uint8_t *>(S) + e * n * c, n, c, c, 1}, ByteMatrix{SO + slot(e) * n * cp, n, c, 0, 0}};
    j.layout = scales_gated ? MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED : MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED;
    j.zero_as_one = t.fixup;
    j.layout_bytes = n * cp;
    jobs.push_back(j);
  }
  std::vector<ScaleJob> rest;
  const long before = host_launches;
  const bool took = cuda::run_row_permutations(jobs.data(), jobs.size(), nullptr, rest);
  const long launches = host_launches - before, want_launches = (t.order == 2 && E > 2) || t.other_layout ? 2 : 1;
  int64_t bad_values = 0, bad_scales = 0, bad_poison = 0;
  const std::vector<int64_t> vidx = row_indices(n, t.gated), sidx = row_indices(n, scales_gated);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t j = 0; j < n; ++j) {
      bad_values += std::memcmp(VO + (e * n + j) * k, V + (e * n + vidx[j]) * k, static_cast<size_t>(k)) != 0;
      for (int64_t x = 0; x < cp; ++x) {
        uint8_t want = x < c ? S[(e * n + sidx[j]) * c + x] : 0;
        if (t.fixup && x < c && want == 0) want = 1;
        bad_scales += SO[slot(e) * n * cp + interleaved(j, x, cp)] != want;
      }
    }
  for (int64_t b = 0; b < t.out_offset; ++b) bad_poison += vout[b] != kPoison;
  bad_poison += VO[E * n * k] != kPoison;
  bad_poison += SO[E * n * cp] != kPoison;
  if (!took || !rest.empty() || launches != want_launches || bad_values || bad_scales || bad_poison) {
    ++failures;
    std::printf("FAILED: %lld experts of %lld x %lld, gated %d, offsets %d/%d, fix-up %d, %d blocks, order %d, other "
                "layout %d: taken %d, %zu left, %ld launches (want %ld), %lld value rows and %lld scale bytes "
                "differ, %lld poison bytes written\n",
                static_cast<long long>(E), static_cast<long long>(n), static_cast<long long>(k), t.gated, t.in_offset,
                t.out_offset, t.fixup, t.blocks, t.order, t.other_layout, took, rest.size(), launches, want_launches,
                static_cast<long long>(bad_values), static_cast<long long>(bad_scales), static_cast<long long>(bad_poison));
  }
}

}  // namespace

int main() {
  // experts, rows, K: 16-byte values (2048, 1536, 640, 4096; 4624 and 8240 in two passes), 4-byte (200;
  // 1540 in two passes), bytes (33; 257 in two passes; 1); scale rows of C = 64, 48, 20, 128, 145, 258
  // (16-byte, word, byte loads) and 7, 49, 2, 9, 1.
  const int64_t shapes[][3] = {{8, 384, 2048}, {3, 128, 200}, {2, 256, 33},   {4, 128, 4624}, {3, 256, 1536},
                               {2, 128, 640},  {2, 128, 1540}, {1, 128, 257}, {2, 128, 16},   {1, 128, 1},
                               {3, 256, 4096}, {1, 128, 8240}};
  int cases = 0;
  for (const auto &s : shapes)
    for (int gated = 0; gated < 2; ++gated)
      for (int offset : {0, 1, 4})
        for (int blocks : {1, 5, 1000}) {
          run(Case{s[0], s[1], s[2], gated == 1, offset, offset == 1 ? 1 : 0, (blocks + offset) % 2 == 1, blocks, 0, false});
          ++cases;
        }
  for (const auto &s : shapes)
    for (int order = 1; order < 3; ++order) {
      run(Case{s[0], s[1], s[2], order == 1, 0, 0, false, 7, order, false});
      run(Case{s[0], s[1], s[2], order == 2, 0, 0, true, 3, 0, true});
      cases += 2;
    }
  std::printf("%d cases, %d failed\n", cases, failures);
  return failures == 0 ? 0 : 1;
}
