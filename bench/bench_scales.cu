// Times libmxfp8's scale unswizzle and its quantizer on the GPU against a device-to-device copy of the
// same number of bytes, timed the same way in the same run. Prints one JSON object on stdout (bench/run_bench.py merges
// it with the PyTorch baseline).
//
// Method: every timed loop rotates over enough distinct input/output buffers that they do not fit in the
// 60 MB L2 (cold caches), enqueues its iterations back to back between two CUDA events (launch gaps stay
// hidden behind the GPU queue), and the reported time is the median over repetitions of the per-iteration
// mean. Bandwidth counts bytes read plus bytes written.
//
// `bench_scales --profile [--cases a,b,...] [--no-timing] [--out FILE]` instead runs each case of
// `profile_case_names` once inside a cudaProfilerStart/Stop range, for Nsight Compute
// (`ncu --profile-from-start off`, bench/device/profile_kernels.sh): a marker kernel, the call, a copy kernel of
// the same bytes, cudaMemcpyAsync of the same bytes. It writes the list of cases it ran (with event
// timings of each outside the range, unless --no-timing) as JSON to FILE or stdout.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <mxfp8/mxfp8.h>

namespace {

__global__ void empty_kernel() {}

// Holds the stream for `cycles` SM clocks.
__global__ void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

void cuda_check(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

void mxfp8_check(mxfp8_status s, const char *what) {
  if (s != MXFP8_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, mxfp8_status_string(s), mxfp8_last_error());
    std::exit(1);
  }
}

constexpr size_t kColdBytes = 256ull << 20;  // rotate over at least this much memory
constexpr int kRepetitions = 15;
// Every managed tensor this benchmark makes speaks the DLPack of the header it is built with.
constexpr DLPackVersion kCurrentDlpack{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};

int64_t round_up(int64_t n, int64_t d) { return (n + d - 1) / d * d; }

template <class Body>
double median_ms_per_iteration(int iterations, Body body) {
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "event");
  cuda_check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < iterations; ++i) body(i);  // warm-up
  cuda_check(cudaDeviceSynchronize(), "warm-up");
  std::vector<double> samples;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    cuda_check(cudaEventRecord(start), "record");
    for (int i = 0; i < iterations; ++i) body(i);
    cuda_check(cudaEventRecord(stop), "record");
    cuda_check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    samples.push_back(static_cast<double>(ms) / iterations);
  }
  cuda_check(cudaGetLastError(), "timed loop");
  std::sort(samples.begin(), samples.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return samples[samples.size() / 2];
}

// One call split into its two costs, medians over kRepetitions: `gpu_ms`, the GPU time alone (a spin
// kernel holds the stream while the host enqueues the call, so the events around it see no host time),
// and `host_us`, the host wall clock of the call itself. A batched call is GPU-bound when host_us is
// below gpu_ms (the queue then hides it), host-bound otherwise. `host_us_loop` is the same host time as
// the mean of kLoopCalls calls back to back behind one long spin: the device machine's host clock spreads
// ~2x between single calls of the same tree (bench/LOG.md), a loop of them much less.
struct Split {
  double gpu_ms, host_us, host_us_loop;
};
constexpr int kLoopCalls = 64;

template <class Body>
Split split_costs(int iterations, Body body) {
  cudaEvent_t start, stop;
  cuda_check(cudaEventCreate(&start), "event");
  cuda_check(cudaEventCreate(&stop), "event");
  std::vector<double> gpu, host;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    spin_kernel<<<1, 1>>>(4000000);  // ~2 ms at the H200's clocks: far longer than any call's host time
    cuda_check(cudaEventRecord(start), "record");
    const auto t0 = std::chrono::steady_clock::now();
    body(rep % iterations);
    host.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    cuda_check(cudaEventRecord(stop), "record");
    cuda_check(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    cuda_check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    gpu.push_back(ms);
  }
  spin_kernel<<<1, 1>>>(40000000);  // ~20 ms: longer than kLoopCalls host-bound calls
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLoopCalls; ++i) body(i % iterations);
  const double loop_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  cuda_check(cudaDeviceSynchronize(), "after the host loop");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(gpu.begin(), gpu.end());
  std::sort(host.begin(), host.end());
  return Split{gpu[gpu.size() / 2], host[host.size() / 2], loop_us / kLoopCalls};
}

DLTensor bytes_tensor(void *data, int64_t *shape, int ndim) {
  DLTensor t{};
  t.data = data;
  t.device = DLDevice{kDLCUDA, 0};
  t.ndim = ndim;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  return t;
}

// Device-to-device copy of `bytes_moved / 2` bytes (so it moves `bytes_moved` counting read + write).
double copy_ms(int64_t bytes_moved) {
  const size_t half = static_cast<size_t>(bytes_moved / 2);
  const int copies = static_cast<int>(std::max<size_t>(2, kColdBytes / std::max<size_t>(1, 2 * half)));
  std::vector<void *> src(copies), dst(copies);
  for (int i = 0; i < copies; ++i) {
    cuda_check(cudaMalloc(&src[i], half), "malloc");
    cuda_check(cudaMalloc(&dst[i], half), "malloc");
    cuda_check(cudaMemset(src[i], i, half), "memset");
  }
  const double ms = median_ms_per_iteration(copies, [&](int i) {
    cuda_check(cudaMemcpyAsync(dst[i], src[i], half, cudaMemcpyDeviceToDevice, nullptr), "copy");
  });
  for (int i = 0; i < copies; ++i) {
    cudaFree(src[i]);
    cudaFree(dst[i]);
  }
  return ms;
}

// ---- Profiling mode (bench/device/profile_kernels.sh) ----

// Separates the cases in a profile: launched first in each case's profiler range, with gridDim.x = the
// case's index + 1, so bench/device/ncu_summary.py can assign the kernels that follow it to that case.
__global__ void profile_case_marker() {}

// The copy a case is compared with, as a kernel Nsight Compute can profile (cudaMemcpyAsync device to
// device may run on a copy engine, which it does not see): a persistent grid, 16-byte vectors, four
// loads in flight per thread.
__global__ void __launch_bounds__(256) profile_copy_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst,
                                                           int64_t vectors) {
  constexpr int kInFlight = 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + (kInFlight - 1) * stride < vectors; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) v[k] = __ldg(src + i + k * stride);
#pragma unroll
    for (int k = 0; k < kInFlight; ++k) dst[i + k * stride] = v[k];
  }
  for (; i < vectors; i += stride) dst[i] = __ldg(src + i);
}

void launch_profile_copy(const void *src, void *dst, int64_t vectors) {
  static int grid = 0;
  if (grid == 0) {
    int per_sm = 0, sms = 0;
    cuda_check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, profile_copy_kernel, 256, 0), "occupancy");
    cuda_check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "SM count");
    grid = std::max(1, per_sm * sms);
  }
  const int64_t blocks = std::min<int64_t>(grid, std::max<int64_t>(1, (vectors + 255) / 256));
  profile_copy_kernel<<<static_cast<unsigned>(blocks), 256>>>(static_cast<const uint4 *>(src), static_cast<uint4 *>(dst),
                                                             vectors);
  cuda_check(cudaGetLastError(), "copy kernel");
}

// The cases, in the order they run (bench/device/profile_kernels.sh groups them into ncu runs).
const char *const profile_case_names[] = {"moe", "moe_1536x4096", "moe_4096x768", "weight_57344x8192",
                                          "weight_8192x28672", "model"};

// Runs the cases it is handed when --cases names them (all when --cases is absent), and lists them.
struct Profiler {
  std::vector<std::string> only;
  bool timing = true;
  std::string json;  // the cases run so far, as JSON objects
  int index = 0;     // cases run so far (the marker's grid is index + 1)

  bool wants(const char *name) const {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  }

  // `call(set)` does the case's work on input set `set` (0 <= set < sets); `bytes` it moves (read +
  // written); `sets` distinct sets for the timing's cold rotation. The copy moves the same bytes: half
  // read, half written.
  void run(const char *name, int64_t bytes, int sets, const std::function<void(int)> &call) {
    if (!wants(name)) return;
    const int64_t half = (bytes / 2 + 15) / 16 * 16;
    const int copies = static_cast<int>(std::max<int64_t>(2, static_cast<int64_t>(kColdBytes) / std::max<int64_t>(1, 2 * half)));
    std::vector<void *> src(copies), dst(copies);
    for (int i = 0; i < copies; ++i) {
      cuda_check(cudaMalloc(&src[i], half), "malloc");
      cuda_check(cudaMalloc(&dst[i], half), "malloc");
      cuda_check(cudaMemset(src[i], i + 1, half), "memset");
    }
    char text[512];
    int n = std::snprintf(text, sizeof text, "%s{\"index\": %d, \"name\": \"%s\", \"bytes\": %lld, \"sets\": %d, "
                          "\"copy_kernel_pattern\": \"profile_copy_kernel\"",
                          json.empty() ? "" : ", ", index, name, (long long)bytes, sets);
    if (timing) {
      const double call_ms = median_ms_per_iteration(sets, call);
      const double call_gpu_ms = split_costs(sets, call).gpu_ms;  // without the host's part (MoE: host-bound at times)
      const double kernel_ms = median_ms_per_iteration(copies, [&](int i) { launch_profile_copy(src[i], dst[i], half / 16); });
      const double memcpy_ms = median_ms_per_iteration(copies, [&](int i) {
        cuda_check(cudaMemcpyAsync(dst[i], src[i], half, cudaMemcpyDeviceToDevice, nullptr), "copy");
      });
      n += std::snprintf(text + n, sizeof text - n,
                         ", \"call_ms\": %.5f, \"call_gpu_ms\": %.5f, \"copy_kernel_ms\": %.5f, \"memcpy_ms\": %.5f",
                         call_ms, call_gpu_ms, kernel_ms, memcpy_ms);
    } else {
      call(0);  // warm-up outside the range (first-call set-up, the library's pool)
    }
    std::snprintf(text + n, sizeof text - n, "}");
    json += text;
    cuda_check(cudaDeviceSynchronize(), "before the profiled range");
    // Without a profiler attached these two do nothing; their status is not this benchmark's concern.
    (void)cudaProfilerStart();
    profile_case_marker<<<index + 1, 32>>>();
    call(0);
    launch_profile_copy(src[0], dst[0], half / 16);
    cuda_check(cudaMemcpyAsync(dst[1], src[1], half, cudaMemcpyDeviceToDevice, nullptr), "copy");
    cuda_check(cudaDeviceSynchronize(), "the profiled range");
    (void)cudaProfilerStop();
    cudaGetLastError();
    for (int i = 0; i < copies; ++i) cudaFree(src[i]), cudaFree(dst[i]);
    ++index;
  }
};

// One weight's swizzled scales, unswizzled into a compact buffer (`ms`), and the other direction,
// mxfp8_swizzle_scales of the compact scales into the 128x4 layout (`swizzle_ms`: what an importer that
// feeds cuBLAS runs); the same bytes move either way.
struct ShapeResult {
  int64_t rows, k, bytes;
  double ms, swizzle_ms, copy_ms;
};

// With a profiler: only its case `weight_<rows>x<k>` (no result).
ShapeResult bench_shape(int64_t rows, int64_t k, Profiler *profiler = nullptr) {
  const int64_t c = (k + 31) / 32, rp = round_up(rows, 128), cp = round_up(c, 4);
  const int64_t bytes = rp * cp + rows * c;
  const int copies = static_cast<int>(std::max<int64_t>(2, kColdBytes / bytes));
  std::vector<uint8_t *> swz(copies), out(copies);
  std::vector<uint8_t> host(static_cast<size_t>(rp * cp));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(100 + i % 50);
  for (int i = 0; i < copies; ++i) {
    cuda_check(cudaMalloc(&swz[i], rp * cp), "malloc");
    cuda_check(cudaMalloc(&out[i], rows * c), "malloc");
    cuda_check(cudaMemcpy(swz[i], host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
  }
  int64_t sshape[1] = {rp * cp}, cshape[2] = {rows, c};
  const auto call = [&](int i) {
    DLTensor s = bytes_tensor(swz[i], sshape, 1), o = bytes_tensor(out[i], cshape, 2);
    mxfp8_check(mxfp8_unswizzle_scales(&s, &o, nullptr), "unswizzle");
  };
  const auto swizzle = [&](int i) {
    DLTensor s = bytes_tensor(swz[i], sshape, 1), o = bytes_tensor(out[i], cshape, 2);
    mxfp8_check(mxfp8_swizzle_scales(&o, &s, nullptr), "swizzle");
  };
  double ms = 0, swizzle_ms = 0;
  if (profiler) {
    const std::string name = "weight_" + std::to_string(rows) + "x" + std::to_string(k);
    profiler->run(name.c_str(), bytes, copies, call);
  } else {
    ms = median_ms_per_iteration(copies, call);
    swizzle_ms = median_ms_per_iteration(copies, swizzle);
  }
  for (int i = 0; i < copies; ++i) {
    cudaFree(swz[i]);
    cudaFree(out[i]);
  }
  if (profiler) return ShapeResult{rows, k, bytes, 0, 0, 0};
  return ShapeResult{rows, k, bytes, ms, swizzle_ms, copy_ms(bytes)};
}

// A whole 80-layer model: 320 swizzled weights, exported in one batched call into one buffer.
struct ModelResult {
  int tensors;
  int64_t bytes;
  double ms, copy_ms;
  Split split;
};

// With a profiler: only its case `model` (no result).
ModelResult bench_model(const std::vector<std::pair<int64_t, int64_t>> &layer, int layers, Profiler *profiler = nullptr) {
  std::vector<mxfp8_tensor *> tensors;
  std::vector<uint8_t *> buffers;
  std::vector<DLTensor> dst;
  std::vector<std::vector<int64_t>> shapes;
  int64_t total_in = 0, total_out = 0;
  for (int l = 0; l < layers; ++l)
    for (auto [rows, k] : layer) total_out += rows * ((k + 31) / 32);
  uint8_t *bucket;
  cuda_check(cudaMalloc(&bucket, total_out), "malloc bucket");
  // The values are never read by a scales export, but they are described: one allocation as large as the
  // largest weight serves every description (a description may not claim bytes it does not have: they
  // could be some destination's, which the library refuses).
  int64_t most_values = 0;
  for (auto [rows, k] : layer) most_values = std::max(most_values, rows * k);
  uint8_t *values;
  cuda_check(cudaMalloc(&values, most_values), "malloc values");
  int64_t offset = 0;
  shapes.reserve(layers * layer.size() * 3);
  for (int l = 0; l < layers; ++l)
    for (auto [rows, k] : layer) {
      const int64_t c = (k + 31) / 32, rp = round_up(rows, 128), cp = round_up(c, 4);
      uint8_t *swz;
      cuda_check(cudaMalloc(&swz, rp * cp), "malloc");
      cuda_check(cudaMemset(swz, 120, rp * cp), "memset");
      buffers.push_back(swz);
      total_in += rp * cp;
      shapes.push_back({rows, k});
      shapes.push_back({rp, cp});
      shapes.push_back({rows * c});
      auto *data = new DLManagedTensorVersioned{kCurrentDlpack};
      auto *scales = new DLManagedTensorVersioned{kCurrentDlpack};
      data->dl_tensor = bytes_tensor(values, shapes[shapes.size() - 3].data(), 2);
      scales->dl_tensor = bytes_tensor(swz, shapes[shapes.size() - 2].data(), 2);
      data->deleter = scales->deleter = [](DLManagedTensorVersioned *self) { delete self; };
      mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
      desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
      desc.rowwise_data = data;
      desc.rowwise_scale_inv = scales;
      mxfp8_tensor *t = nullptr;
      mxfp8_check(mxfp8_tensor_create(&desc, &t), "create");
      tensors.push_back(t);
      dst.push_back(bytes_tensor(bucket, shapes.back().data(), 1));
      dst.back().byte_offset = static_cast<uint64_t>(offset);
      offset += rows * c;
    }
  std::vector<DLTensor *> dst_ptrs;
  for (auto &d : dst) dst_ptrs.push_back(&d);
  const auto call = [&](int) {
    mxfp8_check(mxfp8_export_scales_batched(tensors.data(), dst_ptrs.data(), tensors.size(), nullptr), "batched");
  };
  const int64_t bytes = total_in + total_out;
  double ms = 0;
  Split split{};
  if (profiler) {
    profiler->run("model", bytes, 3, call);  // 4.28 GB: cold without rotation; 3 calls a timed batch (as above)
  } else {
    ms = median_ms_per_iteration(3, call);
    split = split_costs(1, call);
  }
  for (auto *t : tensors) mxfp8_tensor_release(t);
  for (auto *b : buffers) cudaFree(b);
  cudaFree(bucket);
  cudaFree(values);
  if (profiler) return ModelResult{static_cast<int>(tensors.size()), bytes, 0, 0, split};
  return ModelResult{static_cast<int>(tensors.size()), bytes, ms, copy_ms(bytes), split};
}

// A 128-expert MoE layer: 128 experts of (1536, 4096) and 128 of (4096, 768), each group one flat
// values buffer and one flat scale buffer of TE-padded swizzled scales, all 256 experts exported in one
// batched call (one launch). Rotates over 4 copies of the layer for cold caches.
struct MoeResult {
  int experts;
  int64_t bytes;
  double ms, copy_ms;
  Split split;
  double group_gpu_ms[2];  // the (1536, 4096) experts alone, the (4096, 768) ones alone
  Split grouped;           // the same experts through mxfp8_grouped_export, one call a group
};

// With a profiler: only its cases `moe` (all 256 experts) and `moe_<rows>x<k>` (one group), no result.
MoeResult bench_moe(Profiler *profiler = nullptr) {
  constexpr int kExperts = 128, kSets = 4;
  const std::pair<int64_t, int64_t> groups[2] = {{1536, 4096}, {4096, 768}};
  uint8_t *values;  // never read by a scales export: one allocation serves every group's description
  cuda_check(cudaMalloc(&values, static_cast<size_t>(kExperts) * 1536 * 4096), "malloc values");
  std::vector<std::vector<mxfp8_tensor *>> experts(kSets);
  std::vector<std::vector<DLTensor>> dst(kSets);
  std::vector<std::vector<int64_t>> sizes(kSets);
  std::vector<void *> buffers;
  std::vector<mxfp8_grouped_tensor *> handles;
  int64_t bytes = 0;
  for (int set = 0; set < kSets; ++set) {
    int64_t out_bytes = 0;
    for (auto [rows, k] : groups) out_bytes += kExperts * rows * ((k + 31) / 32);
    uint8_t *bucket;
    cuda_check(cudaMalloc(&bucket, out_bytes), "malloc bucket");
    buffers.push_back(bucket);
    int64_t at = 0;
    sizes[set].reserve(2 * kExperts);
    dst[set].reserve(2 * kExperts);
    bytes = out_bytes;
    for (auto [rows, k] : groups) {
      const int64_t c = (k + 31) / 32, per_expert = round_up(rows, 128) * round_up(c, 4);
      uint8_t *flat;
      cuda_check(cudaMalloc(&flat, kExperts * per_expert), "malloc scales");
      cuda_check(cudaMemset(flat, 121, kExperts * per_expert), "memset");
      buffers.push_back(flat);
      bytes += kExperts * per_expert;
      static int64_t value_shapes[2][2], flat_shapes[2][1];
      const int g = rows == 1536 ? 0 : 1;
      value_shapes[g][0] = kExperts * rows;
      value_shapes[g][1] = k;
      flat_shapes[g][0] = kExperts * per_expert;
      auto *data = new DLManagedTensorVersioned{kCurrentDlpack};
      auto *scales = new DLManagedTensorVersioned{kCurrentDlpack};
      data->dl_tensor = bytes_tensor(values, value_shapes[g], 2);
      scales->dl_tensor = bytes_tensor(flat, flat_shapes[g], 1);
      data->deleter = scales->deleter = [](DLManagedTensorVersioned *self) { delete self; };
      mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
      desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
      desc.num_experts = kExperts;
      desc.cols = k;
      desc.uniform_rows = rows;
      desc.data = data;
      desc.scale_inv = scales;
      mxfp8_grouped_tensor *grouped = nullptr;
      mxfp8_check(mxfp8_grouped_tensor_create(&desc, &grouped), "grouped");
      handles.push_back(grouped);
      for (int e = 0; e < kExperts; ++e) {
        mxfp8_tensor *t = nullptr;
        mxfp8_check(mxfp8_grouped_expert(grouped, e, &t), "expert");
        experts[set].push_back(t);
        sizes[set].push_back(rows * c);
        dst[set].push_back(bytes_tensor(bucket, &sizes[set].back(), 1));
        dst[set].back().byte_offset = static_cast<uint64_t>(at);
        at += rows * c;
      }
    }
  }
  std::vector<std::vector<DLTensor *>> dst_ptrs(kSets);
  for (int set = 0; set < kSets; ++set)
    for (auto &d : dst[set]) dst_ptrs[set].push_back(&d);
  const auto call = [&](int set) {
    mxfp8_check(mxfp8_export_scales_batched(experts[set].data(), dst_ptrs[set].data(), experts[set].size(), nullptr),
                "batched experts");
  };
  // Each group alone (the first 128 tensors of a set are the (1536, 4096) experts).
  const auto group_call = [&](int g) {
    return [&, g](int set) {
      mxfp8_check(mxfp8_export_scales_batched(experts[set].data() + g * kExperts, dst_ptrs[set].data() + g * kExperts,
                                              kExperts, nullptr),
                  "one group of experts");
    };
  };
  // The same 256 experts through the grouped call, once a group, what a loader holding the grouped tensors
  // calls: its checks do not grow with the experts, and each group's scales are one job. Each call returns
  // a new copy (the library's stream-ordered pool), released at once.
  const auto grouped_call = [&](int set) {
    for (int g = 0; g < 2; ++g) {
      DLManagedTensorVersioned *scales = nullptr;
      mxfp8_check(mxfp8_grouped_export(handles[static_cast<size_t>(set) * 2 + g], nullptr, 0, nullptr, nullptr, &scales),
                  "grouped export");
      scales->deleter(scales);
    }
  };
  double ms = 0, group_gpu_ms[2] = {0, 0};
  Split split{}, grouped{};
  if (profiler) {
    profiler->run("moe", bytes, kSets, call);
    for (int g = 0; g < 2; ++g) {
      const auto [rows, k] = groups[g];
      const int64_t c = (k + 31) / 32;
      const int64_t group_bytes = kExperts * (round_up(rows, 128) * round_up(c, 4) + rows * c);
      const std::string name = "moe_" + std::to_string(rows) + "x" + std::to_string(k);
      profiler->run(name.c_str(), group_bytes, kSets, group_call(g));
    }
  } else {
    ms = median_ms_per_iteration(kSets, call);
    split = split_costs(kSets, call);
    for (int g = 0; g < 2; ++g) group_gpu_ms[g] = split_costs(kSets, group_call(g)).gpu_ms;
    grouped = split_costs(kSets, grouped_call);
  }
  for (auto &set : experts)
    for (auto *t : set) mxfp8_tensor_release(t);
  for (auto *g : handles) mxfp8_grouped_tensor_release(g);
  for (void *b : buffers) cudaFree(b);
  cudaFree(values);
  if (profiler) return MoeResult{2 * kExperts, bytes, 0, 0, split, {0, 0}, {}};
  return MoeResult{2 * kExperts, bytes, ms, copy_ms(bytes), split, {group_gpu_ms[0], group_gpu_ms[1]}, grouped};
}

// Host wall-clock of one complete export of a tiny swizzled tensor (allocation, kernel, wait).
// Quantizing a (rows, k) BF16 weight: rowwise compact (the target: against a copy of the bytes it must
// move, 2 B read + 1 B + 1/32 B written per element), and rowwise + columnwise into TE's swizzled layout.
struct QuantizeResult {
  int64_t rows, k, bytes;
  double ms, copy_ms, both_swizzled_ms, block_32x32_both_swizzled_ms;
};

QuantizeResult bench_quantize(int64_t rows, int64_t k) {
  const int64_t n = rows * k, c = k / 32;
  const int64_t scale_bytes = rows * c, padded = round_up(rows, 128) * round_up(c, 4);
  const int64_t col_padded = round_up((rows + 31) / 32, 4) * round_up(k, 128);
  QuantizeResult r{rows, k, 2 * n + n + scale_bytes, 0, 0, 0, 0};
  const int copies = 2;  // 2 x 470 MB of input for the largest weight: beyond L2 either way
  std::vector<void *> in(copies), values(copies), cvalues(copies), scales(copies), cscales(copies);
  constexpr int64_t kPatternRows = 64;  // bfloat16 values of many binades, both signs, repeated
  std::vector<uint16_t> host(static_cast<size_t>(kPatternRows * k));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>(0x3800 + (i * 2654435761u) % 0x0C00) | ((i & 1) << 15);
  for (int i = 0; i < copies; ++i) {
    cuda_check(cudaMalloc(&in[i], 2 * n), "malloc");
    for (int64_t row = 0; row < rows; row += kPatternRows)
      cuda_check(cudaMemcpy(static_cast<uint16_t *>(in[i]) + row * k, host.data(),
                            static_cast<size_t>(2 * k * std::min(kPatternRows, rows - row)), cudaMemcpyHostToDevice),
                 "upload");
    cuda_check(cudaMalloc(&values[i], n), "malloc");
    cuda_check(cudaMalloc(&cvalues[i], n), "malloc");
    cuda_check(cudaMalloc(&scales[i], padded), "malloc");
    cuda_check(cudaMalloc(&cscales[i], col_padded), "malloc");
  }
  int64_t xshape[2] = {rows, k}, vshape[1] = {n}, sshape[1] = {scale_bytes}, pshape[1] = {padded}, cpshape[1] = {col_padded};
  auto input = [&](int i) {
    DLTensor t = bytes_tensor(in[i], xshape, 2);
    t.dtype = DLDataType{kDLBfloat, 16, 1};
    return t;
  };
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  r.ms = median_ms_per_iteration(copies, [&](int i) {
    DLTensor x = input(i), v = bytes_tensor(values[i], vshape, 1), s = bytes_tensor(scales[i], sshape, 1);
    mxfp8_check(mxfp8_quantize_into(&x, &o, &v, &s, nullptr, nullptr), "quantize");
  });
  r.copy_ms = copy_ms(r.bytes);
  mxfp8_quantize_options te = MXFP8_QUANTIZE_OPTIONS_INIT;
  te.scales_layout = MXFP8_QUANTIZED_SCALES_SWIZZLED;
  auto both = [&](int i) {
    DLTensor x = input(i), v = bytes_tensor(values[i], vshape, 1), s = bytes_tensor(scales[i], pshape, 1);
    DLTensor cv = bytes_tensor(cvalues[i], vshape, 1), cs = bytes_tensor(cscales[i], cpshape, 1);
    mxfp8_check(mxfp8_quantize_into(&x, &te, &v, &s, &cv, &cs), "quantize both");
  };
  r.both_swizzled_ms = median_ms_per_iteration(copies, both);
  te.block = MXFP8_BLOCK_32X32;
  r.block_32x32_both_swizzled_ms = median_ms_per_iteration(copies, both);
  for (int i = 0; i < copies; ++i) {
    cudaFree(in[i]), cudaFree(values[i]), cudaFree(cvalues[i]), cudaFree(scales[i]), cudaFree(cscales[i]);
  }
  return r;
}

// NVFP4 quantize of a (rows, k) BF16 weight, rowwise, TE's default rule, compact scales (issue 22):
// `ms` with the per-tensor amax computed (the amax pass reads the input a second time, so the call moves
// `bytes_with_amax_pass`), `given_amax_ms` with it given (one pass, `bytes`: 2 B read + 1/2 B + 1/16 B
// written per element, and the amax); each against a copy of the same count of bytes. nvfp4_bench.py
// measures the same through Python (bench/LOG.md, "NVFP4 quantize"); this one is here for bench/device/ab.sh.
struct Nvfp4QuantizeResult {
  int64_t rows, k, bytes, bytes_with_amax_pass;
  double ms, given_amax_ms, copy_ms, all_bytes_copy_ms;
};

Nvfp4QuantizeResult bench_nvfp4_quantize(int64_t rows, int64_t k) {
  const int64_t n = rows * k, scale_bytes = rows * (k / 16);
  Nvfp4QuantizeResult r{rows, k, 2 * n + n / 2 + scale_bytes + 4, 0, 0, 0, 0, 0};
  r.bytes_with_amax_pass = r.bytes + 2 * n;
  const int copies = 2;  // 2 x 470 MB of input for the largest weight: beyond L2 either way
  std::vector<void *> in(copies), values(copies), scales(copies), amax(copies);
  constexpr int64_t kPatternRows = 64;  // bfloat16 values of many binades, both signs, repeated; no NaN
  std::vector<uint16_t> host(static_cast<size_t>(kPatternRows * k));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>(0x3800 + (i * 2654435761u) % 0x0C00) | ((i & 1) << 15);
  for (int i = 0; i < copies; ++i) {
    cuda_check(cudaMalloc(&in[i], 2 * n), "malloc");
    for (int64_t row = 0; row < rows; row += kPatternRows)
      cuda_check(cudaMemcpy(static_cast<uint16_t *>(in[i]) + row * k, host.data(),
                            static_cast<size_t>(2 * k * std::min(kPatternRows, rows - row)), cudaMemcpyHostToDevice),
                 "upload");
    cuda_check(cudaMalloc(&values[i], n / 2), "malloc");
    cuda_check(cudaMalloc(&scales[i], scale_bytes), "malloc");
    cuda_check(cudaMalloc(&amax[i], 4), "malloc");
  }
  int64_t xshape[2] = {rows, k}, vshape[1] = {n / 2}, sshape[1] = {scale_bytes}, ashape[1] = {1};
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  auto quantize = [&](int i) {
    DLTensor x = bytes_tensor(in[i], xshape, 2), v = bytes_tensor(values[i], vshape, 1);
    DLTensor s = bytes_tensor(scales[i], sshape, 1), a = bytes_tensor(amax[i], ashape, 1);
    x.dtype = DLDataType{kDLBfloat, 16, 1};
    a.dtype = DLDataType{kDLFloat, 32, 1};
    const DLTensor *inputs[1] = {&x};
    DLTensor *value_list[1] = {&v}, *scale_list[1] = {&s};
    mxfp8_check(mxfp8_nvfp4_quantize_into(inputs, 1, &o, value_list, scale_list, &a), "nvfp4 quantize");
  };
  r.ms = median_ms_per_iteration(copies, quantize);
  o.amax_mode = MXFP8_NVFP4_AMAX_GIVEN;  // each input's amax, as the runs above left it
  r.given_amax_ms = median_ms_per_iteration(copies, quantize);
  r.copy_ms = copy_ms(r.bytes);
  r.all_bytes_copy_ms = copy_ms(r.bytes_with_amax_pass);
  for (int i = 0; i < copies; ++i) cudaFree(in[i]), cudaFree(values[i]), cudaFree(scales[i]), cudaFree(amax[i]);
  return r;
}

// NVFP4 export of a (rows, k) weight's GEMM-swizzled E4M3 scales (issue 22), the figure nvfp4_bench.py takes
// from Python in a CUDA graph (export_us). `ms`: one mxfp8_export_components and one mxfp8_export_global_scale
// on the legacy stream, the three outputs asked for (the values view; the (rows, ceil(k/16)) scales unswizzled into a copy
// the library allocates; the decode global scale, a one-thread kernel) and released, rotating over enough
// tensors (distinct swizzled buffers, one shared values buffer) to stay out of L2; `gpu_ms` / `host_us`: the
// same calls split into their GPU time alone and its host time; `unswizzle_ms`: mxfp8_unswizzle_scales of the
// same matrices into caller buffers (the scale kernel alone). `bytes` = the swizzled buffer read + the
// compact matrix written, `copy_ms` a copy moving as many (bench/README.md, "Method").
struct Nvfp4ExportResult {
  int64_t rows, k, bytes;
  double ms, unswizzle_ms, copy_ms;
  Split split;
};

Nvfp4ExportResult bench_nvfp4_export(int64_t rows, int64_t k) {
  const int64_t c = (k + 15) / 16, rp = round_up(rows, 128), cp = round_up(c, 4);
  const int64_t bytes = rp * cp + rows * c;
  const int copies = static_cast<int>(std::max<int64_t>(2, kColdBytes / bytes));
  std::vector<uint8_t *> swz(copies), out(copies);
  std::vector<uint8_t> host(static_cast<size_t>(rp * cp));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(0x30 + i % 40);  // E4M3 0.5..15
  for (int i = 0; i < copies; ++i) {
    cuda_check(cudaMalloc(&swz[i], rp * cp), "malloc");
    cuda_check(cudaMalloc(&out[i], rows * c), "malloc");
    cuda_check(cudaMemcpy(swz[i], host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
  }
  void *values = nullptr, *amax = nullptr;
  cuda_check(cudaMalloc(&values, rows * (k / 2)), "malloc");
  cuda_check(cudaMalloc(&amax, sizeof(float)), "malloc");
  const float one = 1.0f;
  cuda_check(cudaMemcpy(amax, &one, sizeof one, cudaMemcpyHostToDevice), "upload");
  int64_t vshape[2] = {rows, k / 2}, sshape[2] = {rp, cp}, ashape[1] = {1}, cshape[2] = {rows, c};
  std::vector<mxfp8_tensor *> tensors(copies);
  // Borrowed (no deleter), and referenced by the handles until they are released: they outlive the loop.
  std::vector<DLManagedTensorVersioned> managed(3 * static_cast<size_t>(copies), DLManagedTensorVersioned{kCurrentDlpack});
  for (int i = 0; i < copies; ++i) {
    DLManagedTensorVersioned &data = managed[3 * i], &scales = managed[3 * i + 1], &am = managed[3 * i + 2];
    data.dl_tensor = bytes_tensor(values, vshape, 2);
    scales.dl_tensor = bytes_tensor(swz[i], sshape, 2);
    am.dl_tensor = bytes_tensor(amax, ashape, 1);
    am.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.format = MXFP8_FORMAT_NVFP4;
    desc.block = MXFP8_BLOCK_1X16;
    desc.e4m3_max = 448;
    desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    desc.rowwise_data = &data;
    desc.rowwise_scale_inv = &scales;
    desc.rowwise_amax = &am;
    mxfp8_check(mxfp8_tensor_create(&desc, &tensors[i]), "nvfp4 create");
  }
  auto export_one = [&](int i) {
    DLManagedTensorVersioned *v = nullptr, *s = nullptr, *g = nullptr;
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.values_dtype = MXFP8_VALUES_UINT8;
    mxfp8_check(mxfp8_export_components(tensors[i], &o, &v, &s), "nvfp4 export");
    mxfp8_check(mxfp8_export_global_scale(tensors[i], &o, &g), "nvfp4 global scale");
    v->deleter(v);
    s->deleter(s);
    g->deleter(g);
  };
  Nvfp4ExportResult r{rows, k, bytes, 0, 0, 0, {0, 0}};
  r.ms = median_ms_per_iteration(copies, export_one);
  r.split = split_costs(copies, export_one);
  r.unswizzle_ms = median_ms_per_iteration(copies, [&](int i) {
    DLTensor s = bytes_tensor(swz[i], sshape, 2), o = bytes_tensor(out[i], cshape, 2);
    mxfp8_check(mxfp8_unswizzle_scales(&s, &o, nullptr), "unswizzle");
  });
  r.copy_ms = copy_ms(bytes);
  for (auto *t : tensors) mxfp8_tensor_release(t);
  for (int i = 0; i < copies; ++i) cudaFree(swz[i]), cudaFree(out[i]);
  cudaFree(values);
  cudaFree(amax);
  return r;
}

double bench_tiny_us(double &unswizzle_us, double &floor_us) {
  const int64_t rows = 128, k = 128;
  uint8_t *values, *swz;
  cuda_check(cudaMalloc(&values, rows * k), "malloc");
  cuda_check(cudaMalloc(&swz, 512), "malloc");
  cuda_check(cudaMemset(swz, 127, 512), "memset");
  int64_t vshape[2] = {rows, k}, sshape[2] = {128, 4};
  DLManagedTensorVersioned data{kCurrentDlpack}, scales{kCurrentDlpack};
  data.dl_tensor = bytes_tensor(values, vshape, 2);
  scales.dl_tensor = bytes_tensor(swz, sshape, 2);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = nullptr;
  mxfp8_check(mxfp8_tensor_create(&desc, &t), "create");
  std::vector<double> samples;
  for (int i = 0; i < 2200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    DLManagedTensorVersioned *v = nullptr, *s = nullptr;
    mxfp8_check(mxfp8_export_components(t, nullptr, &v, &s), "export");
    cuda_check(cudaStreamSynchronize(nullptr), "sync");
    const auto stop = std::chrono::steady_clock::now();
    v->deleter(v);
    s->deleter(s);
    if (i >= 200) samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  mxfp8_tensor_release(t);
  std::sort(samples.begin(), samples.end());
  const double export_us = samples[samples.size() / 2];
  // The same without the allocation: unswizzle into a buffer allocated once.
  uint8_t *out;
  cuda_check(cudaMalloc(&out, rows * 4), "malloc");
  int64_t cshape[2] = {rows, 4};
  DLTensor s = bytes_tensor(swz, sshape, 2), o = bytes_tensor(out, cshape, 2);
  samples.clear();
  for (int i = 0; i < 2200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    mxfp8_check(mxfp8_unswizzle_scales(&s, &o, nullptr), "unswizzle");
    cuda_check(cudaStreamSynchronize(nullptr), "sync");
    const auto stop = std::chrono::steady_clock::now();
    if (i >= 200) samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::sort(samples.begin(), samples.end());
  unswizzle_us = samples[samples.size() / 2];
  // The floor: launching an empty kernel plus the same wait.
  samples.clear();
  for (int i = 0; i < 2200; ++i) {
    const auto start = std::chrono::steady_clock::now();
    empty_kernel<<<1, 32>>>();
    cuda_check(cudaStreamSynchronize(nullptr), "sync");
    const auto stop = std::chrono::steady_clock::now();
    if (i >= 200) samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::sort(samples.begin(), samples.end());
  floor_us = samples[samples.size() / 2];
  cudaFree(out);
  cudaFree(values);
  cudaFree(swz);
  return export_us;
}

}  // namespace

// bench_scales --profile [--cases a,b,...] [--no-timing] [--out FILE]: the profiling mode (top of file).
int profile_main(int argc, char **argv, const std::vector<std::pair<int64_t, int64_t>> &layer) {
  Profiler profiler;
  const char *out_path = nullptr;
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no-timing")) {
      profiler.timing = false;
    } else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) {
      out_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--cases") && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (comma > at) profiler.only.push_back(list.substr(at, comma - at));
        at = comma + 1;
      }
    } else {
      std::fprintf(stderr, "bench_scales --profile: unknown argument %s (--cases a,b,... --no-timing --out FILE)\n", argv[i]);
      return 2;
    }
  }
  for (const std::string &name : profiler.only)
    if (std::none_of(std::begin(profile_case_names), std::end(profile_case_names),
                     [&](const char *known) { return name == known; })) {
      std::fprintf(stderr, "bench_scales --profile: no case %s; the cases:", name.c_str());
      for (const char *known : profile_case_names) std::fprintf(stderr, " %s", known);
      std::fprintf(stderr, "\n");
      return 2;
    }
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "properties");
  // The order of profile_case_names; a set-up only when one of its cases is wanted.
  if (profiler.wants("moe") || profiler.wants("moe_1536x4096") || profiler.wants("moe_4096x768")) bench_moe(&profiler);
  if (profiler.wants("weight_57344x8192")) bench_shape(57344, 8192, &profiler);
  if (profiler.wants("weight_8192x28672")) bench_shape(8192, 28672, &profiler);
  if (profiler.wants("model")) bench_model(layer, 80, &profiler);
  FILE *out = out_path ? std::fopen(out_path, "w") : stdout;
  if (!out) {
    std::fprintf(stderr, "bench_scales --profile: cannot write %s\n", out_path);
    return 1;
  }
  std::fprintf(out, "{\"gpu\": \"%s\", \"sms\": %d, \"timing\": %s, \"cases\": [%s]}\n", prop.name,
               prop.multiProcessorCount, profiler.timing ? "true" : "false", profiler.json.c_str());
  if (out != stdout) std::fclose(out);
  return 0;
}

int main(int argc, char **argv) {
  const std::vector<std::pair<int64_t, int64_t>> layer = {{10240, 8192}, {8192, 8192}, {57344, 8192}, {8192, 28672}};
  if (argc > 1 && !std::strcmp(argv[1], "--profile")) return profile_main(argc, argv, layer);
  if (argc > 1) {
    std::fprintf(stderr, "usage: bench_scales [--profile [--cases a,b,...] [--no-timing] [--out FILE]]\n");
    return 2;
  }
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "properties");
  const double peak_ms = copy_ms(2ll << 30);  // a 1 GiB copy: 2 GiB moved
  // The unswizzle's path as the library reads it (once a process): bench/device/ab.sh PATHS= runs this
  // binary once per value, so one A/B shows both paths per shape. (A library older than the knob ignores it.)
  const char *path = std::getenv("MXFP8_UNSWIZZLE_PATH");
  std::printf("{\"gpu\": \"%s\", \"unswizzle_path\": \"%s\", \"copy_peak_gbps\": %.1f, \"shapes\": {", prop.name,
              path && *path ? path : "default", (2ll << 30) / peak_ms / 1e6);
  // The model's four weights, then two larger scale matrices (65536 x 1024 and 262144 x 896 scales: the
  // sizes issue 36 quotes for the swizzle direction).
  std::vector<std::pair<int64_t, int64_t>> shapes = layer;
  shapes.insert(shapes.end(), {{65536, 32768}, {262144, 28672}});
  for (size_t i = 0; i < shapes.size(); ++i) {
    const ShapeResult r = bench_shape(shapes[i].first, shapes[i].second);
    std::printf("%s\"%lldx%lld\": {\"bytes\": %lld, \"unswizzle_ms\": %.5f, \"swizzle_ms\": %.5f, \"copy_ms\": %.5f, "
                "\"unswizzle_gbps\": %.1f, \"swizzle_gbps\": %.1f, \"copy_gbps\": %.1f}",
                i ? ", " : "", (long long)r.rows, (long long)r.k, (long long)r.bytes, r.ms, r.swizzle_ms, r.copy_ms,
                r.bytes / r.ms / 1e6, r.bytes / r.swizzle_ms / 1e6, r.bytes / r.copy_ms / 1e6);
    std::fflush(stdout);
  }
  const ModelResult m = bench_model(layer, 80);
  std::printf("}, \"whole_model\": {\"tensors\": %d, \"bytes\": %lld, \"ms\": %.4f, \"copy_ms\": %.4f, "
              "\"gpu_ms\": %.4f, \"host_us\": %.1f}",
              m.tensors, (long long)m.bytes, m.ms, m.copy_ms, m.split.gpu_ms, m.split.host_us);
  const MoeResult moe = bench_moe();
  std::printf(", \"moe\": {\"experts\": %d, \"bytes\": %lld, \"ms\": %.4f, \"copy_ms\": %.4f, \"gpu_ms\": %.4f, "
              "\"host_us\": %.1f, \"host_us_loop\": %.1f, \"gpu_ms_1536x4096\": %.4f, \"gpu_ms_4096x768\": %.4f, "
              "\"grouped_export\": {\"calls\": 2, \"gpu_ms\": %.4f, \"host_us\": %.1f, \"host_us_loop\": %.1f}}",
              moe.experts, (long long)moe.bytes, moe.ms, moe.copy_ms, moe.split.gpu_ms, moe.split.host_us,
              moe.split.host_us_loop, moe.group_gpu_ms[0], moe.group_gpu_ms[1], moe.grouped.gpu_ms, moe.grouped.host_us,
              moe.grouped.host_us_loop);
  double unswizzle_us = 0, floor_us = 0;
  const double export_us = bench_tiny_us(unswizzle_us, floor_us);
  std::printf(", \"tiny\": {\"us\": %.2f, \"unswizzle_into_buffer_us\": %.2f, \"empty_kernel_and_sync_us\": %.2f}",
              export_us, unswizzle_us, floor_us);
  const QuantizeResult q = bench_quantize(8192, 28672);
  std::printf(", \"quantize\": {\"shape\": [%lld, %lld], \"bytes\": %lld, \"ms\": %.4f, \"copy_ms\": %.4f, "
              "\"both_directions_swizzled_ms\": %.4f, \"block_32x32_both_directions_swizzled_ms\": %.4f}",
              (long long)q.rows, (long long)q.k, (long long)q.bytes, q.ms, q.copy_ms, q.both_swizzled_ms,
              q.block_32x32_both_swizzled_ms);
  std::fflush(stdout);
  const Nvfp4QuantizeResult f = bench_nvfp4_quantize(8192, 28672);
  std::printf(", \"nvfp4_quantize\": {\"shape\": [%lld, %lld], \"bytes\": %lld, \"bytes_with_amax_pass\": %lld, "
              "\"ms\": %.4f, \"given_amax_ms\": %.4f, \"copy_ms\": %.4f, \"all_bytes_copy_ms\": %.4f}",
              (long long)f.rows, (long long)f.k, (long long)f.bytes, (long long)f.bytes_with_amax_pass, f.ms,
              f.given_amax_ms, f.copy_ms, f.all_bytes_copy_ms);
  std::fflush(stdout);
  const Nvfp4ExportResult e = bench_nvfp4_export(8192, 28672);
  std::printf(", \"nvfp4_export\": {\"shape\": [%lld, %lld], \"bytes\": %lld, \"ms\": %.5f, \"gpu_ms\": %.5f, "
              "\"host_us\": %.1f, \"unswizzle_ms\": %.5f, \"copy_ms\": %.5f}}\n",
              (long long)e.rows, (long long)e.k, (long long)e.bytes, e.ms, e.split.gpu_ms, e.split.host_us,
              e.unswizzle_ms, e.copy_ms);
  return 0;
}
