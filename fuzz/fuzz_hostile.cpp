// libFuzzer harness for what a hostile caller can hand the library beyond descriptions: the results of a
// caller's allocator, option structs, outputs that overlap sources or each other, empty tensors with huge
// dimensions, and sizes and strides at the edge of int64. The first input byte picks a section; the rest
// choose everything else. Every oracle follows the header, and the references are built here from the
// layouts' formulas (ref_swizzled_index), except where a section tests only where bytes land (then the
// same call into separate buffers is the reference):
//   - allocator results: the call succeeds exactly when every tensor the allocator returned keeps the
//     header's contract; then the output is the allocator's tensor, correct at data + byte_offset, and
//     nothing outside it was written; otherwise no output pointer is written, the sources and every
//     allocation are untouched, and every tensor the allocator returned is deleted exactly once;
//   - option structs: the call succeeds exactly when the struct is valid (struct_size, tail, every field);
//   - overlaps: outputs sharing a byte with a source or with each other are refused with nothing written;
//     otherwise the result is correct and no byte outside the outputs changed;
//   - empty tensors with dimensions up to 2^40 succeed (libFuzzer's -timeout flags a slow one), larger
//     ones succeed or are refused cleanly;
//   - sizes and strides near INT64_MAX: a clean refusal or a description whose views carry sane strides
//     (UBSan aborts on any wrapped product);
//   - the newest calls (first byte 213 and up): mxfp8_layout_bytes against the header's formulas,
//     mxfp8_convert and mxfp8_grouped_convert into every target with their outputs anywhere in an arena,
//     mxfp8_export_components of legal and illegal options.shard, and NVFP4 quantize -> describe -> export ->
//     dequantize.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <mxfp8/mxfp8.h>

#include "fuzz_support.hpp"

namespace {

using fuzz::Reader;
using fuzz::ref_swizzled_index;
using fuzz::round_up;

[[noreturn]] void wrong(const char *what) {
  std::fprintf(stderr, "fuzz_hostile: %s (last error: %s)\n", what, mxfp8_last_error());
  std::abort();
}

int64_t ceil32(int64_t v) { return (v + 31) / 32; }
constexpr DLDevice kCpu{kDLCPU, 0};
constexpr DLDataType kU8{kDLUInt, 8, 1};
const auto kSentinel = reinterpret_cast<DLManagedTensorVersioned *>(uintptr_t{0xBAD0});

// A caller-owned managed tensor that counts its deleter calls.
struct Managed {
  DLManagedTensorVersioned m{};
  std::vector<int64_t> shape, strides;
  int deleted = 0;
  static void count(DLManagedTensorVersioned *self) { ++static_cast<Managed *>(self->manager_ctx)->deleted; }
  Managed(void *data, std::vector<int64_t> dims, DLDataType dtype = kU8) : shape(std::move(dims)) {
    m.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    m.manager_ctx = this;
    m.deleter = count;
    m.dl_tensor = DLTensor{data, kCpu, static_cast<int32_t>(shape.size()), dtype, shape.data(), nullptr, 0};
  }
  Managed(const Managed &) = delete;
};

DLTensor flat_tensor(void *data, int64_t *n, DLDataType dtype = kU8) {
  return DLTensor{data, kCpu, 1, dtype, n, nullptr, 0};
}

// A transfer of `count` tensors into a bucket (MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET),
// every entry in `direction`: plan() lays the bucket out (mxfp8_bucket_parts), fill() moves the tensors
// into it at those parts (mxfp8_transfer, host memory: done on return). Owns the desc's arrays.
struct BucketTransfer {
  std::vector<int32_t> directions;
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;
  BucketTransfer(const mxfp8_tensor *const *tensors, size_t count, int32_t direction) : directions(count, direction) {
    desc.source = MXFP8_TRANSFER_FROM_TENSORS;
    desc.destination = MXFP8_TRANSFER_TO_BUCKET;
    desc.count = count;
    desc.directions = directions.data();
    desc.tensors = tensors;
  }
  BucketTransfer(const BucketTransfer &) = delete;
  mxfp8_status plan(uint64_t alignment, mxfp8_bucket_part *parts, uint64_t *total) const {
    return mxfp8_bucket_parts(&desc, alignment, parts, total);
  }
  mxfp8_status fill(const mxfp8_bucket_part *parts, DLTensor *bucket) {
    desc.parts_out = parts;
    desc.bucket_out = bucket;
    return mxfp8_transfer(&desc, nullptr);
  }
};

// [begin, end) of bytes; empty spans overlap nothing.
struct Range {
  uintptr_t begin = 0, end = 0;
};
Range range_of(const void *p, int64_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  return Range{b, bytes > 0 ? b + static_cast<uintptr_t>(bytes) : b};
}
bool overlap(Range a, Range b) { return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end; }

// ---------------------------------------------------------------------------------------------------
// A source MXFP8 tensor whose compact scale matrix S is known, stored in one of the layouts.
// ---------------------------------------------------------------------------------------------------
struct Source {
  int64_t m = 0, k = 0, rows = 0, cols = 0;  // logical M x K, S is rows x cols
  bool columnwise = false, swizzled = false, block32 = false;
  std::vector<uint8_t> s;             // S, row-major
  uint8_t *values = nullptr, *scales = nullptr;
  int64_t values_bytes = 0, scale_bytes = 0;
  int64_t scale_buffer_rows = 0, scale_buffer_cols = 0;  // row-major buffers: R' x C'
};

// Fills S (block-consistent for 32x32 blocks) from the fuzzer's bytes.
void fill_scales(Reader &in, Source &t) {
  t.s.resize(static_cast<size_t>(t.rows * t.cols));
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ in.byte() ^ (uint64_t{in.byte()} << 8);
  auto next = [&] {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    return static_cast<uint8_t>(seed % 255);  // 0..254 (255 is NaN: fine to move, kept out for dequantize)
  };
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c) {
      uint8_t v = next();
      if (t.block32) {  // rowwise: rows of a 32-block agree; columnwise: columns of a 32-block agree
        if (!t.columnwise && r % 32) v = t.s[static_cast<size_t>((r - r % 32) * t.cols + c)];
        if (t.columnwise && c % 32) v = t.s[static_cast<size_t>(r * t.cols + c - c % 32)];
      }
      t.s[static_cast<size_t>(r * t.cols + c)] = v;
    }
}

// Where S's (r, c) lies in the stored scale buffer.
size_t stored_index(const Source &t, int64_t r, int64_t c) {
  if (t.swizzled)
    return t.columnwise ? ref_swizzled_index(c, r, round_up(t.rows, 4)) : ref_swizzled_index(r, c, round_up(t.cols, 4));
  return static_cast<size_t>(r * t.scale_buffer_cols + c);
}

// Chooses the geometry; the caller provides the memory (values_bytes, scale_bytes) and calls store().
void plan_source(Reader &in, Source &t, int64_t max_m, int64_t max_k, int64_t force_m = 0) {
  t.m = 1 + in.below(max_m);
  if (force_m > 0) t.m = force_m;
  t.k = 1 + in.below(max_k);
  t.columnwise = in.byte() % 3 == 0;
  t.rows = t.columnwise ? ceil32(t.m) : t.m;
  t.cols = t.columnwise ? t.k : ceil32(t.k);
  const int layout = in.byte() % 3;  // 0 swizzled, 1 TE-padded row-major, 2 compact row-major
  t.swizzled = layout == 0;
  t.values_bytes = t.m * t.k;
  if (t.swizzled) {
    t.scale_bytes = t.columnwise ? round_up(t.cols, 128) * round_up(t.rows, 4) : round_up(t.rows, 128) * round_up(t.cols, 4);
  } else {
    t.scale_buffer_rows = layout == 1 ? round_up(t.rows, t.columnwise ? 4 : 128) : t.rows;
    t.scale_buffer_cols = layout == 1 ? round_up(t.cols, t.columnwise ? 128 : 4) : t.cols;
    t.scale_bytes = t.scale_buffer_rows * t.scale_buffer_cols;
  }
}

// Writes S into the stored layout (padding keeps whatever bytes were there).
void store(const Source &t) {
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c) t.scales[stored_index(t, r, c)] = t.s[static_cast<size_t>(r * t.cols + c)];
}

// The tensor handle over a Source; the managed tensors are borrowed (they outlive the handle).
struct Described {
  std::unique_ptr<Managed> data, scales;
  mxfp8_tensor *tensor = nullptr;
  Described(const Source &t) {
    data = std::make_unique<Managed>(t.values, std::vector<int64_t>{t.m, t.k});
    data->m.deleter = nullptr;
    scales = std::make_unique<Managed>(t.scales, t.swizzled ? std::vector<int64_t>{t.scale_bytes}
                                                           : std::vector<int64_t>{t.scale_buffer_rows, t.scale_buffer_cols});
    scales->m.deleter = nullptr;
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = t.swizzled;
    desc.block = t.block32;
    (t.columnwise ? desc.columnwise_data : desc.rowwise_data) = &data->m;
    (t.columnwise ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &scales->m;
    if (mxfp8_tensor_create(&desc, &tensor) != MXFP8_OK) wrong("a valid source was refused");
  }
  ~Described() { mxfp8_tensor_release(tensor); }
  Range values_range(const Source &t) const { return range_of(t.values, t.values_bytes); }
  Range scales_range(const Source &t) const { return range_of(t.scales, t.scale_bytes); }
};

// ---------------------------------------------------------------------------------------------------
// Section 0: a hostile allocator behind mxfp8_export_components, mxfp8_grouped_export (all experts),
// mxfp8_quantize and mxfp8_export_components with options.shard.
// ---------------------------------------------------------------------------------------------------
constexpr uint8_t kPoison = 0xA5;
constexpr size_t kMargin = 64;

struct Allocated {
  std::vector<uint8_t> block;    // kMargin poison, the output, kMargin poison (when it is ours)
  std::vector<int64_t> shape, strides;
  DLManagedTensorVersioned m{};
  int deleted = 0;
  bool returned = false;    // rc == 0 and *out == &m: the library owns it now
  bool acceptable = false;  // every field keeps the header's contract (overlap judged later)
  int64_t bytes = 0;        // prod(prototype shape)
  uint8_t *out_begin = nullptr;  // data + byte_offset
  static void count(DLManagedTensorVersioned *self) { ++static_cast<Allocated *>(self->manager_ctx)->deleted; }
};

struct AllocatorState {
  Reader *in = nullptr;
  std::vector<std::unique_ptr<Allocated>> made;
  std::vector<int> events;     // per allocator call: the index in `made`, or -1 for a failed call
  std::vector<Range> sources;  // bytes an allocation may be pointed into
  Allocated decoy;             // a real tensor a failing allocator leaves in *out: never to be deleted
} g_alloc;

// The header's contract of an allocator result, judged here independently of the library's checks.
bool keeps_contract(const DLManagedTensorVersioned &m, const DLTensor &proto) {
  if (m.version.major != DLPACK_MAJOR_VERSION) return false;
  const DLTensor &t = m.dl_tensor;
  if (t.ndim != proto.ndim || (t.ndim > 0 && !t.shape)) return false;
  // The prototype lives only during the call: a tensor that borrows its shape array would dangle.
  if (t.ndim > 0 && t.shape == proto.shape) return false;
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] != proto.shape[i]) return false;
  if (t.dtype.bits != 8 || t.dtype.lanes != 1 || (t.dtype.code != kDLUInt && t.dtype.code != proto.dtype.code))
    return false;
  if (t.device.device_type != proto.device.device_type || t.device.device_id != proto.device.device_id) return false;
  if (t.strides) {  // contiguous: dimensions of size 1 may carry any stride
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (t.shape[i] != 1 && t.strides[i] != expected) return false;
      expected *= t.shape[i];
    }
  }
  if (!t.data) return false;
  if (t.byte_offset > UINTPTR_MAX - reinterpret_cast<uintptr_t>(t.data)) return false;
  if (t.byte_offset > static_cast<uint64_t>(INT64_MAX)) return false;  // every offset fits in int64
  if (m.flags & DLPACK_FLAG_BITMASK_READ_ONLY) return false;
  return true;
}

int hostile_allocator(DLTensor *proto, DLManagedTensorVersioned **out, void *ctx,
                      void (*set_error)(void *, const char *, const char *)) {
  Reader &in = *g_alloc.in;
  const uint8_t how = in.byte();
  if (how % 23 == 0) {  // failure: an error and garbage in *out, which must be neither read nor deleted
    if (in.byte() % 2) set_error(ctx, in.byte() % 4 ? "MemoryError" : nullptr, in.byte() % 4 ? "no memory today" : nullptr);
    *out = in.byte() % 2 ? kSentinel : &g_alloc.decoy.m;
    g_alloc.events.push_back(-1);
    return in.byte() % 2 ? -1 : 1;
  }
  if (how % 23 == 1) {  // "success" with nothing
    *out = nullptr;
    g_alloc.events.push_back(-1);
    return 0;
  }
  auto a = std::make_unique<Allocated>();
  a->bytes = 1;
  for (int i = 0; i < proto->ndim; ++i) a->bytes *= proto->shape[i];
  a->block.assign(static_cast<size_t>(a->bytes) + 2 * kMargin, kPoison);
  a->shape.assign(proto->shape, proto->shape + proto->ndim);
  DLManagedTensorVersioned &m = a->m;
  m.version = DLPackVersion{DLPACK_MAJOR_VERSION, static_cast<uint32_t>(in.byte() % 4)};
  m.manager_ctx = a.get();
  m.deleter = Allocated::count;
  m.dl_tensor = *proto;
  m.dl_tensor.shape = a->shape.data();
  m.dl_tensor.strides = nullptr;
  // Where the output starts: data + byte_offset = block + kMargin, split in several ways.
  const uint64_t offset = (uint64_t[]){0, 1, 3, 8, 64}[in.byte() % 5];
  m.dl_tensor.data = a->block.data() + kMargin - offset;
  m.dl_tensor.byte_offset = offset;
  if (in.byte() % 4 == 0) m.dl_tensor.dtype = kU8;
  if (in.byte() % 4 == 0) m.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
  if (in.byte() % 4 == 0) {  // explicit strides, compact, with odd strides on dimensions of size 1
    a->strides.resize(a->shape.size());
    int64_t s = 1;
    for (size_t i = a->shape.size(); i-- > 0;) {
      a->strides[i] = a->shape[i] == 1 && in.byte() % 2 ? 1 + in.below(1000) : s;
      s *= a->shape[i];
    }
    m.dl_tensor.strides = a->strides.empty() ? nullptr : a->strides.data();
  }
  // Then 0 to 3 hostile fields.
  for (int n = in.byte() % 4; n > 0 && in.n; --n) {
    switch (in.byte() % 16) {
      case 0: m.version.major = (uint32_t[]){0, 2, 255, 0xFFFFFFFFu}[in.byte() % 4]; break;
      case 1: {
        const int32_t ndims[] = {proto->ndim + 1, proto->ndim - 1, 100000, -1, 65, INT32_MAX};
        m.dl_tensor.ndim = ndims[in.byte() % 6];
        if (in.byte() % 2) m.dl_tensor.shape = nullptr;
        break;
      }
      case 2: m.dl_tensor.shape = nullptr; break;
      case 3:
        if (!a->shape.empty()) {
          // -shape[0] - 1 in wrapping arithmetic: shape[0] may already be INT64_MIN from an earlier mutation.
          const int64_t deltas[] = {1, -1, static_cast<int64_t>(~static_cast<uint64_t>(a->shape[0])), INT64_MAX / 2};
          int64_t &dim = a->shape[in.byte() % a->shape.size()];
          dim = static_cast<int64_t>(static_cast<uint64_t>(dim) + static_cast<uint64_t>(deltas[in.byte() % 4]));
        }
        break;
      case 4:
        a->strides.assign(a->shape.size(), 0);
        for (auto &s : a->strides) s = (int64_t[]){1, 0, -1, 2, 4096, INT64_MAX, INT64_MIN}[in.byte() % 7];
        m.dl_tensor.strides = a->strides.empty() ? nullptr : a->strides.data();
        break;
      case 5: m.dl_tensor.dtype = DLDataType{in.byte(), static_cast<uint8_t>((uint8_t[]){8, 16, 32, 0}[in.byte() % 4]),
                                             static_cast<uint16_t>(in.byte() % 4 ? 1 : 4)}; break;
      case 6: m.dl_tensor.device = DLDevice{(DLDeviceType[]){kDLCUDA, kDLCUDAHost, kDLCPU, kDLVulkan}[in.byte() % 4],
                                            static_cast<int32_t>(in.byte() % 3)}; break;
      case 7: m.dl_tensor.data = nullptr; break;
      case 8: m.flags |= DLPACK_FLAG_BITMASK_READ_ONLY; break;
      case 9:  // past the end of the address space, or (from a low address) past int64 only
        m.dl_tensor.byte_offset = in.byte() % 2 ? UINT64_MAX - in.byte() : (uint64_t{1} << 63) + in.byte();
        break;
      case 10:
      case 11: {  // over a source, or over an earlier allocation
        std::vector<Range> targets = g_alloc.sources;
        for (const auto &b : g_alloc.made)
          if (b->out_begin) targets.push_back(range_of(b->out_begin, b->bytes));
        if (targets.empty()) break;
        const Range r = targets[in.byte() % targets.size()];
        // Anywhere from the output's last byte on the target's first to its first byte on the target's last.
        const int64_t span = static_cast<int64_t>(r.end - r.begin);
        const int64_t shift = in.below(span + a->bytes - 1) - (a->bytes - 1);
        m.dl_tensor.data = reinterpret_cast<uint8_t *>(r.begin) + shift;
        m.dl_tensor.byte_offset = 0;
        break;
      }
      case 12: m.flags = in.byte() % 2 ? ~uint64_t{0} : DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED; break;
      case 13: m.deleter = nullptr; break;
      case 14: m.dl_tensor.shape = proto->shape; break;  // the library's array, freed when the call returns
      default: break;  // left as it was
    }
  }
  a->acceptable = keeps_contract(m, *proto);
  a->out_begin = a->acceptable ? static_cast<uint8_t *>(m.dl_tensor.data) + m.dl_tensor.byte_offset : nullptr;
  a->returned = true;
  *out = &m;
  g_alloc.events.push_back(static_cast<int>(g_alloc.made.size()));
  g_alloc.made.push_back(std::move(a));
  return 0;
}

// The reference bytes one allocation must hold on success.
void check_output_block(const Allocated &a, const uint8_t *expected, int64_t n) {
  if (a.bytes != n) wrong("an allocation of an unexpected size was handed back");
  const uint8_t *base = a.block.data();
  // The output lies at block + kMargin unless a hostile case moved it (then the call must have failed).
  if (a.out_begin != base + kMargin) wrong("a moved allocation was accepted");
  for (size_t i = 0; i < kMargin; ++i)
    if (base[i] != kPoison || base[kMargin + n + i] != kPoison) wrong("a byte outside the allocator's tensor was written");
  if (n > 0 && std::memcmp(a.out_begin, expected, static_cast<size_t>(n)) != 0)
    wrong("the output at data + byte_offset differs from the reference");
}

bool untouched_blocks() {
  for (const auto &a : g_alloc.made)
    for (uint8_t b : a->block)
      if (b != kPoison) return false;
  return true;
}

// One call through the hostile allocator. `run` makes the call; `reads` are the call's sources;
// `expected` maps the allocations, in order, to their reference bytes (it is called only on success).
void release(DLManagedTensorVersioned *t) {
  if (t->deleter) t->deleter(t);
}

template <class Run, class Expected>
void through_allocator(Reader &in, const std::vector<Range> &reads, std::vector<uint8_t *> source_bytes_begin,
                       const std::vector<int64_t> &source_sizes, size_t outputs, Run run, Expected expected) {
  g_alloc.in = &in;
  g_alloc.made.clear();
  g_alloc.events.clear();
  g_alloc.sources = reads;
  g_alloc.decoy.deleted = 0;
  g_alloc.decoy.m.manager_ctx = &g_alloc.decoy;
  g_alloc.decoy.m.deleter = Allocated::count;
  std::vector<std::vector<uint8_t>> before;  // snapshots of the sources
  for (size_t i = 0; i < source_bytes_begin.size(); ++i)
    before.emplace_back(source_bytes_begin[i], source_bytes_begin[i] + source_sizes[i]);
  std::vector<DLManagedTensorVersioned *> outs(outputs, kSentinel);
  const mxfp8_status st = run(outs);

  // What the library had to conclude. It stops at the first failed allocator call (out of memory) or
  // the first tensor that breaks the contract (invalid argument); when every call gave a good tensor,
  // the outputs must also stay clear of the sources and of each other.
  mxfp8_status want = MXFP8_OK;
  size_t first_bad = g_alloc.events.size();
  for (size_t i = 0; i < g_alloc.events.size() && want == MXFP8_OK; ++i) {
    const int e = g_alloc.events[i];
    if (e < 0) want = MXFP8_ERROR_OUT_OF_MEMORY, first_bad = i;
    else if (!g_alloc.made[static_cast<size_t>(e)]->acceptable) want = MXFP8_ERROR_INVALID_ARGUMENT, first_bad = i;
  }
  if (first_bad + 1 < g_alloc.events.size()) wrong("the allocator was called again after a bad result");
  // Outputs over a source or over each other: refused, either as soon as the overlapping allocation comes
  // back (an options.shard export checks each copy as it is made) or once all are made (mxfp8_quantize).
  size_t calls_needed = outputs;
  if (want == MXFP8_OK) {
    for (size_t i = 0; i < g_alloc.made.size() && want == MXFP8_OK; ++i) {
      const Range r = range_of(g_alloc.made[i]->out_begin, g_alloc.made[i]->bytes);
      for (const Range &s : reads)
        if (overlap(r, s)) want = MXFP8_ERROR_INVALID_ARGUMENT;
      for (size_t j = 0; j < i; ++j)
        if (overlap(r, range_of(g_alloc.made[j]->out_begin, g_alloc.made[j]->bytes))) want = MXFP8_ERROR_INVALID_ARGUMENT;
      if (want != MXFP8_OK) calls_needed = i + 1;
    }
  }
  if (first_bad == g_alloc.events.size() &&
      (g_alloc.events.size() < calls_needed || g_alloc.events.size() > outputs)) {
    std::fprintf(stderr, "fuzz_hostile: status %d, %zu allocator calls for %zu outputs\n", st, g_alloc.events.size(), outputs);
    wrong("one allocator call per output was expected");
  }
  for (size_t i = 0; i < source_bytes_begin.size(); ++i)
    if (std::memcmp(before[i].data(), source_bytes_begin[i], before[i].size()) != 0) wrong("a source was modified");
  if (g_alloc.decoy.deleted) wrong("the tensor a failing allocator left in *out was deleted");
  if (st != want) {
    std::fprintf(stderr, "fuzz_hostile: status %d, expected %d\n", st, want);
    wrong(st == MXFP8_OK ? "a call through a hostile allocator succeeded" : "a call through an allocator failed wrongly");
  }
  if (st == MXFP8_OK) {
    for (const auto &a : g_alloc.made)
      if (a->deleted) wrong("an output was deleted before it was handed back");
    expected(outs);  // compares the outputs, then releases them
    for (const auto &a : g_alloc.made)
      if (a->deleted != (a->m.deleter ? 1 : 0)) wrong("an output's deleter did not run exactly once");
  } else {
    for (DLManagedTensorVersioned *o : outs)
      if (o != kSentinel) wrong("a failed call wrote an output pointer");
    for (const auto &a : g_alloc.made)
      if (a->deleted != (a->m.deleter ? 1 : 0)) wrong("a tensor of a failed call was not deleted exactly once");
    if (!untouched_blocks()) wrong("a failed call wrote into an allocation");
  }
  g_alloc.made.clear();
}

void section_allocator(Reader &in) {
  const int call = in.byte() % 4;
  if (call == 3) {  // an options.shard export of row pieces: its scales and its values are both copies
    Source t;
    plan_source(in, t, 200, 160);
    fill_scales(in, t);
    std::vector<uint8_t> values(static_cast<size_t>(t.values_bytes)), scales(static_cast<size_t>(t.scale_bytes), 9);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 13 + 5);
    t.values = values.data();
    t.scales = scales.data();
    store(t);
    Described d(t);
    // Two pieces: rowwise the later rows first; columnwise in order, since only the last piece may end in
    // the partial last block (both start on blocks).
    const int64_t unit = t.columnwise ? 32 : 1, blocks = (t.m + unit - 1) / unit;
    if (blocks < 2) return;
    const int64_t cut = unit * (1 + in.below(blocks - 1));
    int64_t pieces[4] = {cut, t.m, 0, cut};
    if (t.columnwise) pieces[0] = 0, pieces[1] = cut, pieces[2] = cut, pieces[3] = t.m;
    mxfp8_shard sh = MXFP8_SHARD_INIT;
    sh.num_row_pieces = 2;
    sh.row_pieces = pieces;
    // The references: the pieces' rows of the values, and their rows of S (a block's row columnwise).
    std::vector<uint8_t> ref_values, ref_scales;
    for (int p = 0; p < 2; ++p) {
      ref_values.insert(ref_values.end(), values.begin() + pieces[2 * p] * t.k, values.begin() + pieces[2 * p + 1] * t.k);
      const int64_t r0 = pieces[2 * p] / unit, r1 = (pieces[2 * p + 1] + unit - 1) / unit;
      ref_scales.insert(ref_scales.end(), t.s.begin() + r0 * t.cols, t.s.begin() + r1 * t.cols);
    }
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = t.columnwise;
    o.allocator = hostile_allocator;
    o.shard = &sh;
    through_allocator(
        in, {d.values_range(t), d.scales_range(t)}, {values.data(), scales.data()}, {t.values_bytes, t.scale_bytes}, 2,
        [&](std::vector<DLManagedTensorVersioned *> &outs) {
          return mxfp8_export_components(d.tensor, &o, &outs[1], &outs[0]);  // scales are made first
        },
        [&](std::vector<DLManagedTensorVersioned *> &outs) {
          for (size_t i = 0; i < 2; ++i)
            if (outs[i] != &g_alloc.made[i]->m) wrong("a shard output is not the allocator's tensor");
          check_output_block(*g_alloc.made[0], ref_scales.data(), static_cast<int64_t>(ref_scales.size()));
          check_output_block(*g_alloc.made[1], ref_values.data(), static_cast<int64_t>(ref_values.size()));
          release(outs[0]);
          release(outs[1]);
        });
    return;
  }
  if (call == 0) {  // mxfp8_export_components of a tensor whose scales are copied
    Source t;
    plan_source(in, t, 300, 160);
    const bool granular = in.byte() % 4 == 0;
    t.block32 = granular;
    // Only a copy calls the allocator: padding columns over more than one row, or swizzled scales.
    if (!t.swizzled && !granular && t.rows == 1) {
      t.swizzled = true;
      t.scale_bytes = t.columnwise ? round_up(t.cols, 128) * round_up(t.rows, 4) : round_up(t.rows, 128) * round_up(t.cols, 4);
    } else if (!t.swizzled && !granular && t.scale_buffer_cols == t.cols) {
      t.scale_buffer_cols += 4;
      t.scale_bytes = t.scale_buffer_rows * t.scale_buffer_cols;
    }
    fill_scales(in, t);
    std::vector<uint8_t> values(static_cast<size_t>(t.values_bytes), 7), scales(static_cast<size_t>(t.scale_bytes), 9);
    t.values = values.data();
    t.scales = scales.data();
    store(t);
    Described d(t);
    // The reference: S, or one scale per 32 x 32 block.
    std::vector<uint8_t> ref;
    if (!granular) {
      ref = t.s;
    } else {
      const int64_t br = ceil32(t.m), bc = ceil32(t.k);
      for (int64_t r = 0; r < br; ++r)
        for (int64_t c = 0; c < bc; ++c)
          ref.push_back(t.columnwise ? t.s[static_cast<size_t>(r * t.cols + c * 32)] : t.s[static_cast<size_t>(r * 32 * t.cols + c)]);
    }
    const bool want_values = in.byte() % 2;
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = t.columnwise;
    o.scales_dtype = in.byte() % 2;
    o.scales_granularity = granular;
    o.allocator = hostile_allocator;
    through_allocator(
        in, {d.values_range(t), d.scales_range(t)}, {values.data(), scales.data()}, {t.values_bytes, t.scale_bytes}, 1,
        [&](std::vector<DLManagedTensorVersioned *> &outs) {
          DLManagedTensorVersioned *v = kSentinel;
          const mxfp8_status st = mxfp8_export_components(d.tensor, &o, want_values ? &v : nullptr, &outs[0]);
          if (st != MXFP8_OK && v != kSentinel) wrong("a failed export wrote the values pointer");
          if (st == MXFP8_OK && want_values) {
            if (v->dl_tensor.data != t.values) wrong("the values are not a view");
            v->deleter(v);
          }
          return st;
        },
        [&](std::vector<DLManagedTensorVersioned *> &outs) {
          const Allocated &a = *g_alloc.made[0];
          if (outs[0] != &a.m) wrong("the scales are not the allocator's tensor");
          if (!(a.m.flags & DLPACK_FLAG_BITMASK_IS_COPIED)) wrong("a copy is not flagged as copied");
          if (a.m.dl_tensor.dtype.code != (o.scales_dtype ? kDLFloat8_e8m0fnu : kDLUInt)) wrong("the scales' dtype");
          check_output_block(a, ref.data(), static_cast<int64_t>(ref.size()));
          release(outs[0]);
        });
    return;
  }
  if (call == 1) {  // mxfp8_grouped_export of all padded experts: one copy
    const int32_t experts = 1 + in.byte() % 4;
    const int64_t n = 1 + in.below(160), k = 1 + in.below(130), c = ceil32(k);
    const bool swizzled = in.byte() % 2;
    const int64_t pr = round_up(n, 128), pc = round_up(c, 4), per = pr * pc;
    std::vector<uint8_t> values(static_cast<size_t>(experts * n * k), 3), scales(static_cast<size_t>(experts * per), 0);
    std::vector<uint8_t> ref(static_cast<size_t>(experts * n * c));
    uint64_t seed = in.byte() + 1;
    for (int32_t e = 0; e < experts; ++e)
      for (int64_t r = 0; r < n; ++r)
        for (int64_t q = 0; q < c; ++q) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          const auto v = static_cast<uint8_t>(seed >> 56);
          ref[static_cast<size_t>((e * n + r) * c + q)] = v;
          scales[static_cast<size_t>(e * per) + (swizzled ? ref_swizzled_index(r, q, pc) : static_cast<size_t>(r * pc + q))] = v;
        }
    Managed data(values.data(), {experts * n, k}), scale(scales.data(), {experts * per});
    mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
    desc.scale_layout = swizzled;
    desc.num_experts = experts;
    desc.cols = k;
    desc.uniform_rows = n;
    desc.data = &data.m;
    desc.scale_inv = &scale.m;
    mxfp8_grouped_tensor *g = nullptr;
    if (mxfp8_grouped_tensor_create(&desc, &g) != MXFP8_OK) wrong("valid experts were refused");
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.allocator = hostile_allocator;
    through_allocator(
        in, {range_of(values.data(), static_cast<int64_t>(values.size())), range_of(scales.data(), static_cast<int64_t>(scales.size()))},
        {values.data(), scales.data()}, {static_cast<int64_t>(values.size()), static_cast<int64_t>(scales.size())}, 1,
        [&](std::vector<DLManagedTensorVersioned *> &outs) {
          return mxfp8_grouped_export(g, nullptr, 0, &o, nullptr, &outs[0]);
        },
        [&](std::vector<DLManagedTensorVersioned *> &outs) {
          const Allocated &a = *g_alloc.made[0];
          if (outs[0] != &a.m) wrong("the stacked scales are not the allocator's tensor");
          check_output_block(a, ref.data(), static_cast<int64_t>(ref.size()));
          release(outs[0]);
        });
    mxfp8_grouped_tensor_release(g);
    if (data.deleted != 1 || scale.deleted != 1) wrong("a grouped input was not deleted exactly once");
    return;
  }
  // mxfp8_quantize: up to four allocations.
  const int64_t m = 1 + in.below(96), k = 1 + in.below(96);
  const bool bf16 = in.byte() % 2;
  const int64_t element = bf16 ? 2 : 4;
  std::vector<uint8_t> x(static_cast<size_t>(m * k * element));
  uint64_t seed = in.byte() + 7;
  for (auto &b : x) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(seed >> 59);  // small exponents: finite values
  }
  if (!bf16)
    for (size_t i = 3; i < x.size(); i += 4) x[i] = static_cast<uint8_t>(0x3C + (x[i] & 1));
  else
    for (size_t i = 1; i < x.size(); i += 2) x[i] = static_cast<uint8_t>(0x3E + (x[i] & 1));
  int64_t shape[2] = {m, k};
  DLTensor input{x.data(), kCpu, 2, bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.format = 1 + in.byte() % 2;
  o.block = in.byte() % 3 == 0;
  o.scales_layout = in.byte() % 3;
  o.values_dtype = in.byte() % 2;
  o.scales_dtype = in.byte() % 2;
  const int wanted = 1 + in.byte() % 3;
  // The reference: the same quantize into caller buffers (what lands where is tested here, not the math).
  std::vector<uint8_t> ref[2][2];
  DLManagedTensorVersioned *outs_probe[4] = {};
  {
    mxfp8_quantize_options plain = o;
    plain.allocator = nullptr;
    if (mxfp8_quantize(&input, &plain, wanted & 1 ? &outs_probe[0] : nullptr, wanted & 1 ? &outs_probe[1] : nullptr,
                       wanted & 2 ? &outs_probe[2] : nullptr, wanted & 2 ? &outs_probe[3] : nullptr) != MXFP8_OK)
      wrong("a valid quantize failed");
    for (int i = 0; i < 4; ++i) {
      if (!outs_probe[i]) continue;
      const DLTensor &t = outs_probe[i]->dl_tensor;
      int64_t nb = 1;
      for (int j = 0; j < t.ndim; ++j) nb *= t.shape[j];
      const auto *p = static_cast<const uint8_t *>(t.data) + t.byte_offset;
      ref[i / 2][i % 2].assign(p, p + nb);
      outs_probe[i]->deleter(outs_probe[i]);
    }
  }
  o.allocator = hostile_allocator;
  const size_t outputs = wanted == 3 ? 4 : 2;
  through_allocator(
      in, {range_of(x.data(), static_cast<int64_t>(x.size()))}, {x.data()}, {static_cast<int64_t>(x.size())}, outputs,
      [&](std::vector<DLManagedTensorVersioned *> &outs) {
        DLManagedTensorVersioned **p[4] = {nullptr, nullptr, nullptr, nullptr};
        size_t next = 0;
        for (int d = 0; d < 2; ++d)
          if (wanted >> d & 1) p[2 * d] = &outs[next++], p[2 * d + 1] = &outs[next++];
        return mxfp8_quantize(&input, &o, p[0], p[1], p[2], p[3]);
      },
      [&](std::vector<DLManagedTensorVersioned *> &outs) {
        size_t next = 0;
        for (int d = 0; d < 2; ++d) {
          if (!(wanted >> d & 1)) continue;
          for (int part = 0; part < 2; ++part, ++next) {
            // The library allocates values then scales, direction by direction.
            const Allocated &a = *g_alloc.made[next];
            if (outs[next] != &a.m) wrong("a quantize output is not the allocator's tensor");
            check_output_block(a, ref[d][part].data(), static_cast<int64_t>(ref[d][part].size()));
          }
        }
        for (DLManagedTensorVersioned *t : outs) release(t);
      });
}

// ---------------------------------------------------------------------------------------------------
// Section 1: outputs placed anywhere in one arena, over a source, over each other or apart.
// ---------------------------------------------------------------------------------------------------
constexpr int64_t kArena = 24576;

struct Arena {
  std::vector<uint8_t> bytes, before;
  explicit Arena(Reader &in) : bytes(static_cast<size_t>(kArena)) {
    uint64_t seed = 0x2545F4914F6CDD1Dull ^ in.byte();
    for (auto &b : bytes) {
      seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
      b = static_cast<uint8_t>(seed % 255);
    }
  }
  // An offset where `size` bytes fit, aligned to `align`; 0 when nothing fits.
  int64_t place(Reader &in, int64_t size, int64_t align = 1) {
    if (size >= kArena) return 0;
    return in.below(kArena - size + 1) / align * align;
  }
  uint8_t *at(int64_t offset) { return bytes.data() + offset; }
  void snapshot() { before = bytes; }
  // Every byte outside `written` is as it was.
  void unchanged_outside(const std::vector<Range> &written, const char *what) const {
    std::vector<uint8_t> inside(static_cast<size_t>(kArena), 0);
    const auto base = reinterpret_cast<uintptr_t>(bytes.data());
    for (const Range &r : written)
      for (uintptr_t p = std::max(r.begin, base); p < std::min(r.end, base + kArena); ++p) inside[p - base] = 1;
    for (size_t i = 0; i < bytes.size(); ++i)
      if (!inside[i] && bytes[i] != before[i]) wrong(what);
  }
};

// The call was refused exactly when it had to be, and a refusal wrote nothing.
bool judge(mxfp8_status st, bool overlapping, const Arena &arena) {
  if (overlapping) {
    if (st != MXFP8_ERROR_INVALID_ARGUMENT) {
      std::fprintf(stderr, "fuzz_hostile: status %d for overlapping buffers\n", st);
      wrong("overlapping outputs were not refused");
    }
    if (arena.bytes != arena.before) wrong("a refused call wrote something");
    return false;
  }
  if (st != MXFP8_OK) wrong("a call with disjoint buffers failed");
  return true;
}

// A source tensor inside the arena (values and scales may share bytes: inputs may overlap).
void place_source(Reader &in, Arena &arena, Source &t, int64_t max_m, int64_t max_k) {
  plan_source(in, t, max_m, max_k);
  fill_scales(in, t);
  t.values = arena.at(arena.place(in, t.values_bytes));
  t.scales = arena.at(arena.place(in, t.scale_bytes));
  store(t);
}

void section_overlap(Reader &in) {
  Arena arena(in);
  const int call = in.byte() % 6;
  if (call == 0) {  // mxfp8_export_scales_batched: two destinations of one tensor
    Source t;
    place_source(in, arena, t, 96, 160);
    Described d(t);
    const int64_t n = t.rows * t.cols;
    int64_t shape[2] = {n, n};
    uint8_t *dst[2] = {arena.at(arena.place(in, n)), arena.at(arena.place(in, n))};
    DLTensor d0 = flat_tensor(dst[0], &shape[0]), d1 = flat_tensor(dst[1], &shape[1]);
    DLTensor *dsts[2] = {&d0, &d1};
    const mxfp8_tensor *ts[2] = {d.tensor, d.tensor};
    const Range r0 = range_of(dst[0], n), r1 = range_of(dst[1], n);
    bool overlapping = overlap(r0, r1);
    for (Range r : {r0, r1}) overlapping |= overlap(r, d.values_range(t)) || overlap(r, d.scales_range(t));
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = t.columnwise;
    arena.snapshot();
    if (!judge(mxfp8_export_scales_batched(ts, dsts, 2, &o), overlapping, arena)) return;
    for (uint8_t *p : dst)
      if (std::memcmp(p, t.s.data(), static_cast<size_t>(n)) != 0) wrong("a batched destination differs from S");
    arena.unchanged_outside({r0, r1}, "a batched export wrote outside its destinations");
    return;
  }
  if (call == 1) {  // a transfer into a bucket: one or two tensors, the bucket anywhere
    Source t;
    place_source(in, arena, t, 64, 128);
    Described d(t);
    const size_t count = 1 + in.byte() % 2;
    const mxfp8_tensor *ts[2] = {d.tensor, d.tensor};
    BucketTransfer transfer(ts, count, t.columnwise);
    mxfp8_bucket_part e[2];
    uint64_t total = 0;
    const uint64_t alignment = (uint64_t[]){1, 2, 64, 256}[in.byte() % 4];
    if (transfer.plan(alignment, e, &total) != MXFP8_OK) wrong("a bucket plan failed");
    bool overlapping = false;
    if (count == 2 && in.byte() % 8 == 0) {  // a lying plan: the second tensor's parts over the first's
      e[1] = e[0];
      overlapping = true;
    }
    int64_t size = static_cast<int64_t>(total) + in.below(16);
    uint8_t *base = arena.at(arena.place(in, size));
    if (size > kArena) return;
    const Range bucket_range = range_of(base, size);
    overlapping |= overlap(bucket_range, d.values_range(t)) || overlap(bucket_range, d.scales_range(t));
    DLTensor bucket = flat_tensor(base, &size);
    arena.snapshot();
    if (!judge(transfer.fill(e, &bucket), overlapping, arena)) return;
    std::vector<Range> parts;
    for (size_t i = 0; i < count; ++i) {
      if (std::memcmp(base + e[i].values_offset, arena.before.data() + (t.values - arena.bytes.data()),
                      static_cast<size_t>(t.values_bytes)) != 0)
        wrong("a bucket's values differ from the source");
      if (std::memcmp(base + e[i].scales_offset, t.s.data(), t.s.size()) != 0) wrong("a bucket's scales differ from S");
      parts.push_back(range_of(base + e[i].values_offset, static_cast<int64_t>(e[i].values_bytes)));
      parts.push_back(range_of(base + e[i].scales_offset, static_cast<int64_t>(e[i].scales_bytes)));
    }
    arena.unchanged_outside(parts, "a bucket export wrote outside its parts");
    return;
  }
  if (call == 2 || call == 3) {  // the swizzle pair between a (strided) compact matrix and its swizzled form
    // Now and then a row stride shorter than a row: the compact matrix's own elements share bytes,
    // which an input may do and an output may not.
    const int64_t r = 1 + in.below(260), c = 1 + in.below(12), rs = in.byte() % 8 ? c + in.below(4) : in.below(c);
    const int64_t pr = round_up(r, 128), pc = round_up(c, 4), sw_bytes = pr * pc;
    const int64_t compact_span = (r - 1) * rs + c;
    uint8_t *compact = arena.at(arena.place(in, compact_span)), *swizzled = arena.at(arena.place(in, sw_bytes));
    int64_t cshape[2] = {r, c}, cstrides[2] = {rs, 1}, sshape[1] = {sw_bytes};
    DLTensor ct{compact, kCpu, 2, kU8, cshape, cstrides, 0}, st = flat_tensor(swizzled, &sshape[0]);
    const Range cr = range_of(compact, compact_span), sr = range_of(swizzled, sw_bytes);
    const bool self_overlapping = r > 1 && rs < c;
    const bool overlapping = overlap(cr, sr) || (call == 3 && self_overlapping);
    arena.snapshot();
    const auto before_at = [&](const uint8_t *p) { return arena.before[static_cast<size_t>(p - arena.bytes.data())]; };
    if (call == 2) {
      if (!judge(mxfp8_swizzle_scales(&ct, &st, nullptr), overlapping, arena)) return;
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j)
          if (swizzled[ref_swizzled_index(i, j, pc)] != before_at(compact + i * rs + j)) wrong("swizzled bytes differ");
      std::vector<uint8_t> is_scale(static_cast<size_t>(sw_bytes), 0);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) is_scale[ref_swizzled_index(i, j, pc)] = 1;
      for (int64_t i = 0; i < sw_bytes; ++i)
        if (!is_scale[static_cast<size_t>(i)] && swizzled[i] != 0) wrong("swizzle padding is not zero");
      arena.unchanged_outside({sr}, "a swizzle wrote outside its output");
    } else {
      if (!judge(mxfp8_unswizzle_scales(&st, &ct, nullptr), overlapping, arena)) return;
      std::vector<Range> written;
      for (int64_t i = 0; i < r; ++i) {
        for (int64_t j = 0; j < c; ++j)
          if (compact[i * rs + j] != before_at(swizzled + ref_swizzled_index(i, j, pc))) wrong("unswizzled bytes differ");
        written.push_back(range_of(compact + i * rs, c));
      }
      arena.unchanged_outside(written, "an unswizzle wrote outside its rows (or into a stride gap)");
    }
    return;
  }
  if (call == 4) {  // mxfp8_dequantize onto the arena
    Source t;
    place_source(in, arena, t, 64, 128);
    Described d(t);
    const bool bf16 = in.byte() % 2;
    const int64_t element = bf16 ? 2 : 4, bytes = t.values_bytes * element;
    std::vector<uint8_t> ref(static_cast<size_t>(bytes));
    int64_t n = t.values_bytes;
    const DLDataType type = bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    DLTensor ref_out = flat_tensor(ref.data(), &n, type);
    mxfp8_dequantize_options o = MXFP8_DEQUANTIZE_OPTIONS_INIT;
    o.direction = t.columnwise;
    if (mxfp8_dequantize(d.tensor, &o, &ref_out) != MXFP8_OK) wrong("a valid dequantize failed");
    if (bytes > kArena) return;
    uint8_t *out = arena.at(arena.place(in, bytes, element));
    DLTensor out_t = flat_tensor(out, &n, type);
    const Range r = range_of(out, bytes);
    const bool overlapping = overlap(r, d.values_range(t)) || overlap(r, d.scales_range(t));
    arena.snapshot();
    if (!judge(mxfp8_dequantize(d.tensor, &o, &out_t), overlapping, arena)) return;
    if (std::memcmp(out, ref.data(), ref.size()) != 0) wrong("a dequantize into the arena differs");
    arena.unchanged_outside({r}, "a dequantize wrote outside its output");
    return;
  }
  // mxfp8_quantize_into: the input and up to four outputs in the arena.
  const int64_t m = 1 + in.below(80), k = 1 + in.below(80);
  const bool bf16 = in.byte() % 2;
  const int64_t element = bf16 ? 2 : 4;
  int64_t shape[2] = {m, k};
  const DLDataType type = bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
  if (m * k * element > kArena) return;
  uint8_t *x = arena.at(arena.place(in, m * k * element, element));
  DLTensor input{x, kCpu, 2, type, shape, nullptr, 0};
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.block = in.byte() % 3 == 0;
  o.scales_layout = in.byte() % 3;
  const int wanted = 1 + in.byte() % 3;
  // The reference, and the output sizes, from the same quantize into the library's own buffers.
  DLManagedTensorVersioned *ref[4] = {};
  if (mxfp8_quantize(&input, &o, wanted & 1 ? &ref[0] : nullptr, wanted & 1 ? &ref[1] : nullptr,
                     wanted & 2 ? &ref[2] : nullptr, wanted & 2 ? &ref[3] : nullptr) != MXFP8_OK)
    wrong("a valid quantize failed");
  int64_t sizes[4] = {};
  uint8_t *outs[4] = {};
  DLTensor ts[4];
  std::vector<Range> written;
  bool overlapping = false;
  for (int i = 0; i < 4; ++i) {
    if (!ref[i]) continue;
    sizes[i] = 1;
    for (int j = 0; j < ref[i]->dl_tensor.ndim; ++j) sizes[i] *= ref[i]->dl_tensor.shape[j];
    outs[i] = arena.at(arena.place(in, sizes[i]));
    ts[i] = flat_tensor(outs[i], &sizes[i]);
    const Range r = range_of(outs[i], sizes[i]);
    overlapping |= overlap(r, range_of(x, m * k * element));
    for (const Range &w : written) overlapping |= overlap(r, w);
    written.push_back(r);
  }
  arena.snapshot();
  const mxfp8_status st = mxfp8_quantize_into(&input, &o, outs[0] ? &ts[0] : nullptr, outs[1] ? &ts[1] : nullptr,
                                              outs[2] ? &ts[2] : nullptr, outs[3] ? &ts[3] : nullptr);
  if (judge(st, overlapping, arena)) {
    for (int i = 0; i < 4; ++i)
      if (ref[i] && std::memcmp(outs[i], static_cast<uint8_t *>(ref[i]->dl_tensor.data) + ref[i]->dl_tensor.byte_offset,
                                static_cast<size_t>(sizes[i])) != 0)
        wrong("a quantize_into output in the arena differs from the reference");
    arena.unchanged_outside(written, "a quantize_into wrote outside its outputs");
  }
  for (DLManagedTensorVersioned *r : ref)
    if (r) r->deleter(r);
}

// ---------------------------------------------------------------------------------------------------
// Section 2: empty tensors with huge dimensions, through every call. Work must follow bytes: up to 2^40
// every call succeeds at once (libFuzzer's -timeout flags a slow one); beyond, a clean refusal is fine.
// ---------------------------------------------------------------------------------------------------
int64_t ceil_div32(int64_t v) { return v / 32 + (v % 32 != 0); }  // no overflow at INT64_MAX

int g_unexpected_allocations = 0;
int counting_allocator(DLTensor *, DLManagedTensorVersioned **, void *, void (*)(void *, const char *, const char *)) {
  ++g_unexpected_allocations;  // an empty output needs no memory: never asked for
  return -1;
}

void expect_ok(mxfp8_status st, bool must, const char *what) {
  if (st == MXFP8_OK) return;
  if (must || st != MXFP8_ERROR_INVALID_ARGUMENT) {
    std::fprintf(stderr, "fuzz_hostile: status %d\n", st);
    wrong(what);
  }
}

int64_t numel_of(const DLTensor &t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n = t.shape[i] == 0 ? 0 : n;
  return n == 0 ? 0 : 1;
}

void section_empty(Reader &in) {
  const int64_t dims[] = {int64_t{1} << 40, int64_t{1} << 31, 33, 4096, int64_t{1} << 62, INT64_MAX, INT64_MAX - 31};
  const int64_t a = dims[in.byte() % 7], b = dims[in.byte() % 4];
  const bool small = a <= (int64_t{1} << 40);
  g_unexpected_allocations = 0;
  const int call = in.byte() % 4;
  if (call == 0) {  // a tensor, its exports, batched, bucket, dequantize
    const int form = in.byte() % 3;  // (a, 0), (0, a), (a, 0, b)
    std::vector<int64_t> shape = form == 0 ? std::vector<int64_t>{a, 0}
                                 : form == 1 ? std::vector<int64_t>{0, a}
                                             : std::vector<int64_t>{a, 0, b};
    const bool columnwise = in.byte() % 2, swizzled = in.byte() % 2, block32 = in.byte() % 4 == 0;
    const int64_t m = form == 0 ? a : 0, k = shape.back();  // M = prod(lead): a for (a, 0), else 0
    const int64_t rows = columnwise ? ceil_div32(m) : m, cols = columnwise ? k : ceil_div32(k);
    Managed data(nullptr, shape);
    data.m.deleter = nullptr;
    std::unique_ptr<Managed> scales;
    if (swizzled) scales = std::make_unique<Managed>(nullptr, std::vector<int64_t>{0});
    else if (in.byte() % 2) scales = std::make_unique<Managed>(nullptr, std::vector<int64_t>{rows, cols});
    else scales = std::make_unique<Managed>(nullptr, std::vector<int64_t>{rows, 0});  // no columns at all
    scales->m.deleter = nullptr;
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = swizzled;
    desc.block = block32;
    (columnwise ? desc.columnwise_data : desc.rowwise_data) = &data.m;
    (columnwise ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &scales->m;
    mxfp8_tensor *t = nullptr;
    const mxfp8_status created = mxfp8_tensor_create(&desc, &t);
    // Row-major (R', C') needs R' >= R and C' >= C (the header), also for a matrix with no rows.
    const bool fits = swizzled || scales->shape[1] == cols;
    if (created != MXFP8_OK) {
      if (fits) expect_ok(created, small, "an empty tensor was refused");
      return;
    }
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = columnwise;
    o.padded_scales = in.byte() % 2;
    o.scales_granularity = block32 && in.byte() % 2;
    o.allocator = in.byte() % 2 ? counting_allocator : nullptr;
    DLManagedTensorVersioned *v = nullptr, *sc = nullptr;
    const mxfp8_status exported = mxfp8_export_components(t, &o, &v, &sc);
    expect_ok(exported, small, "exporting an empty tensor failed");
    if (exported == MXFP8_OK) {
      if (numel_of(sc->dl_tensor) != 0 || numel_of(v->dl_tensor) != 0) wrong("an empty tensor exported elements");
      if (sc->dl_tensor.ndim > 0 && !sc->dl_tensor.strides) wrong("exported scales without strides");
      v->deleter(v);
      sc->deleter(sc);
    }
    int64_t zero = 0;
    DLTensor dst = flat_tensor(nullptr, &zero);
    DLTensor *dsts[1] = {&dst};
    const mxfp8_tensor *ts[2] = {t, t};
    o.scales_granularity = MXFP8_SCALES_PER_32;  // batched exports move the stored scales
    expect_ok(mxfp8_export_scales_batched(ts, dsts, 1, &o), small, "a batched export of an empty tensor failed");
    BucketTransfer transfer(ts, 2, columnwise);  // a bucket moves the stored scales too (no options)
    mxfp8_bucket_part e[2];
    uint64_t total = 0;
    const mxfp8_status planned = transfer.plan(256, e, &total);
    expect_ok(planned, small, "planning a bucket of empty tensors failed");
    if (planned == MXFP8_OK) {
      std::vector<uint8_t> bucket_bytes(static_cast<size_t>(total) + 1);
      int64_t size = static_cast<int64_t>(total);
      DLTensor bucket = flat_tensor(bucket_bytes.data(), &size);
      expect_ok(transfer.fill(e, &bucket), small, "a bucket of empty tensors failed");
    }
    mxfp8_dequantize_options dq = MXFP8_DEQUANTIZE_OPTIONS_INIT;
    dq.direction = columnwise;
    DLTensor out = flat_tensor(nullptr, &zero, DLDataType{kDLFloat, 32, 1});
    expect_ok(mxfp8_dequantize(t, &dq, &out), small, "dequantizing an empty tensor failed");
    mxfp8_tensor_release(t);
  } else if (call == 1) {  // the swizzle pair of an empty matrix
    int64_t cshape[2] = {a, 0}, sshape[1] = {0};
    if (in.byte() % 2) std::swap(cshape[0], cshape[1]);
    int64_t cstrides[2] = {in.byte() % 2 ? INT64_MAX : 1, in.byte() % 2 ? INT64_MAX : 1};
    DLTensor compact{nullptr, kCpu, 2, kU8, cshape, in.byte() % 2 ? cstrides : nullptr, 0};
    DLTensor swz = flat_tensor(nullptr, &sshape[0]);
    // (a, 0) pads to roundup(a, 128) x 0: fine up to INT64_MAX - 127; (0, a) to 0 x roundup(a, 4).
    expect_ok(mxfp8_swizzle_scales(&compact, &swz, nullptr), small, "swizzling an empty matrix failed");
    expect_ok(mxfp8_unswizzle_scales(&swz, &compact, nullptr), small, "unswizzling into an empty matrix failed");
  } else if (call == 2) {  // quantize and quantize_into of an empty input
    int64_t shape[3] = {a, 0, b};
    int32_t ndim = 2;
    if (in.byte() % 2) std::swap(shape[0], shape[1]);
    if (in.byte() % 4 == 0) ndim = 3;
    DLTensor input{nullptr, kCpu, ndim, in.byte() % 2 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1}, shape,
                   nullptr, 0};
    mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
    o.scales_layout = in.byte() % 3;
    o.block = in.byte() % 3 == 0;
    o.allocator = in.byte() % 2 ? counting_allocator : nullptr;
    DLManagedTensorVersioned *q[4] = {};
    const mxfp8_status st = mxfp8_quantize(&input, &o, &q[0], &q[1], &q[2], &q[3]);
    expect_ok(st, small, "quantizing an empty input failed");
    if (st == MXFP8_OK) {
      int64_t sizes[4];
      DLTensor outs[4];
      for (int i = 0; i < 4; ++i) {
        if (numel_of(q[i]->dl_tensor) != 0) wrong("an empty input quantized to elements");
        sizes[i] = 0;
        outs[i] = flat_tensor(nullptr, &sizes[i]);
        q[i]->deleter(q[i]);
      }
      o.allocator = nullptr;
      expect_ok(mxfp8_quantize_into(&input, &o, &outs[0], &outs[1], &outs[2], &outs[3]), small,
                "quantize_into of an empty input failed");
    }
  } else {  // grouped experts with no values: K = 0 and huge rows, or rows 0 and a huge K
    const bool no_cols = in.byte() % 2;
    const int32_t experts = 1 + in.byte() % 4;
    int64_t zero = 0;
    Managed data(nullptr, {zero}), scales(nullptr, {zero});
    data.m.deleter = scales.m.deleter = nullptr;
    mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
    desc.scale_layout = in.byte() % 2;
    desc.scales = desc.scale_layout ? MXFP8_GROUPED_SCALES_PADDED : in.byte() % 2;
    desc.num_experts = experts;
    desc.cols = no_cols ? 0 : a;
    desc.uniform_rows = no_cols ? a : 0;
    desc.data = &data.m;
    desc.scale_inv = &scales.m;
    mxfp8_grouped_tensor *g = nullptr;
    // E experts of `a` rows: fine while E * a fits in int64.
    const bool fits = !no_cols || a <= INT64_MAX / 4;
    const mxfp8_status st = mxfp8_grouped_tensor_create(&desc, &g);
    expect_ok(st, small && fits, "empty experts were refused");
    if (st != MXFP8_OK) return;
    for (int32_t e = 0; e < experts; ++e) {
      mxfp8_tensor *t = nullptr;
      const mxfp8_status got = mxfp8_grouped_expert(g, e, &t);
      expect_ok(got, small, "an empty expert was refused");
      if (got != MXFP8_OK) continue;
      int64_t z = 0;
      DLTensor dst = flat_tensor(nullptr, &z);
      DLTensor *dsts[1] = {&dst};
      const mxfp8_tensor *ts[1] = {t};
      expect_ok(mxfp8_export_scales_batched(ts, dsts, 1, nullptr), small, "a batched export of an empty expert failed");
      mxfp8_tensor_release(t);
    }
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.allocator = in.byte() % 2 ? counting_allocator : nullptr;
    DLManagedTensorVersioned *v = nullptr, *sc = nullptr;
    const mxfp8_status stacked = mxfp8_grouped_export(g, nullptr, 0, &o, &v, &sc);
    expect_ok(stacked, small, "stacking empty experts failed");
    if (stacked == MXFP8_OK) {
      v->deleter(v);
      sc->deleter(sc);
    }
    mxfp8_grouped_tensor_release(g);
  }
  if (g_unexpected_allocations) wrong("the allocator was asked for an empty output");
}

// ---------------------------------------------------------------------------------------------------
// Section 3: sizes, strides and dimension counts at the edge. Only calls that touch no tensor memory
// (create, plans, views) or that must refuse run, so the buffers can be a few bytes whatever their
// descriptions say. UBSan aborts on a wrapped product; INTERNAL is never the answer.
// ---------------------------------------------------------------------------------------------------
const int64_t kEdge[] = {0, 1, 2, 3, 4, 31, 32, 33, 127, 128, 129, int64_t{1} << 31, int64_t{1} << 32,
                         int64_t{1} << 40, int64_t{1} << 61, int64_t{1} << 62, INT64_MAX / 2, INT64_MAX - 127,
                         INT64_MAX - 1, INT64_MAX, -1, INT64_MIN};
int64_t edge(Reader &in) { return in.byte() % 4 ? kEdge[in.byte() % 10] : kEdge[in.byte() % (sizeof kEdge / sizeof *kEdge)]; }

void clean(mxfp8_status st, const char *what) {
  if (st == MXFP8_OK || st == MXFP8_ERROR_INVALID_ARGUMENT || st == MXFP8_ERROR_UNSUPPORTED) return;
  std::fprintf(stderr, "fuzz_hostile: status %d\n", st);
  wrong(what);
}

// A view's strides address only what int64 can count, and none is negative.
void sane_view(const DLManagedTensorVersioned *m) {
  const DLTensor &t = m->dl_tensor;
  if (t.ndim > 0 && !t.strides) wrong("a view without strides");
  int64_t extent = 0;
  bool empty = false;
  for (int i = 0; i < t.ndim; ++i) empty |= t.shape[i] == 0;
  for (int i = 0; i < t.ndim && !empty; ++i) {
    if (t.shape[i] < 0 || t.strides[i] < 0) wrong("a view with a negative shape or stride");
    int64_t reach;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &reach) || __builtin_add_overflow(extent, reach, &extent))
      wrong("a view whose strides address more than int64 can count");
  }
}

void section_edges(Reader &in) {
  uint8_t bytes[64] = {};
  const int call = in.byte() % 5;
  if (call == 0 || call == 1) {  // a tensor of edge sizes and scale strides; views and plans only
    const int lead = call == 1 ? 1 + in.byte() % 70 : 1 + in.byte() % 2;  // call 1: many dimensions
    std::vector<int64_t> shape(static_cast<size_t>(lead), 1);
    shape.push_back(edge(in));
    for (int i = 0; i < lead && i < 3; ++i) shape[static_cast<size_t>(lead - 1 - i)] = in.byte() % 2 ? edge(in) : 1 + in.byte() % 8;
    const bool columnwise = in.byte() % 3 == 0, swizzled = in.byte() % 3 == 0;
    Managed data(bytes, shape);
    data.m.deleter = nullptr;
    const int sdim = in.byte() % 8 == 0 ? 66 : 1 + in.byte() % 3;
    std::vector<int64_t> sshape(static_cast<size_t>(sdim)), sstrides(static_cast<size_t>(sdim));
    for (auto &d : sshape) d = in.byte() % 3 ? edge(in) : 1;
    for (auto &d : sstrides) d = in.byte() % 2 ? edge(in) : 1;
    sstrides.back() = in.byte() % 4 ? 1 : edge(in);
    Managed scales(bytes, sshape);
    scales.m.deleter = nullptr;
    if (in.byte() % 2) {
      scales.strides = sstrides;
      scales.m.dl_tensor.strides = scales.strides.data();
    }
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = swizzled;
    std::vector<int64_t> logical = shape;
    if (in.byte() % 4 == 0) {
      desc.ndim = in.byte() % 8 == 0 ? 65 + in.byte() % 4 : static_cast<int32_t>(logical.size());
      logical.resize(static_cast<size_t>(std::max<int32_t>(desc.ndim, 1)), 1);
      desc.shape = logical.data();
    }
    (columnwise ? desc.columnwise_data : desc.rowwise_data) = &data.m;
    (columnwise ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &scales.m;
    mxfp8_tensor *t = nullptr;
    const mxfp8_status st = mxfp8_tensor_create(&desc, &t);
    clean(st, "an edge-sized description gave an unclean status");
    if (st != MXFP8_OK) return;
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = columnwise;
    o.padded_scales = MXFP8_PADDED_SCALES_STRIDED_VIEW;
    DLManagedTensorVersioned *v = nullptr, *sc = nullptr;
    // Values are always a view; row-major scales with STRIDED_VIEW are a view too.
    const mxfp8_status exported = mxfp8_export_components(t, &o, &v, swizzled ? nullptr : &sc);
    if (exported != MXFP8_OK) wrong("a view export of a created tensor failed");
    sane_view(v);
    v->deleter(v);
    if (sc) {
      sane_view(sc);
      sc->deleter(sc);
    }
    const mxfp8_tensor *ts[3] = {t, t, t};
    const BucketTransfer transfer(ts, 3, columnwise);
    mxfp8_bucket_part e[3];
    uint64_t total = 0;
    const uint64_t alignment = in.byte() % 2 ? uint64_t{1} << (in.byte() % 64) : static_cast<uint64_t>(edge(in));
    const mxfp8_status planned = transfer.plan(alignment, e, &total);
    clean(planned, "an edge-sized bucket plan gave an unclean status");
    if (planned == MXFP8_OK) {  // parts in order, aligned, apart, inside the total
      uint64_t end = 0;
      for (const auto &x : e) {
        if (x.amax_offset != 0 || x.amax_bytes != 0) wrong("an MXFP8 entry planned with an amax part");
        for (const uint64_t off : {x.values_offset, x.scales_offset}) {
          const uint64_t len = off == x.values_offset ? x.values_bytes : x.scales_bytes;
          if (off % alignment || off < end || off > total || len > total - off) wrong("a bucket plan with parts out of place");
          end = off + len;
        }
      }
    }
    mxfp8_tensor_release(t);
  } else if (call == 2) {  // the swizzle pair with edge shapes and strides: refused unless empty
    int64_t cshape[2] = {edge(in), edge(in)}, cstrides[2] = {edge(in), in.byte() % 2 ? 1 : edge(in)};
    int64_t sshape[1] = {edge(in)};
    DLTensor compact{bytes, kCpu, 2, kU8, cshape, in.byte() % 2 ? cstrides : nullptr, 0};
    DLTensor swz = flat_tensor(bytes + 32, &sshape[0]);
    // Only bytes[0..64) exist, so a pair the library may accept and run is skipped: non-empty, sizes
    // that agree, strides that are not negative and address a countable extent. Every other non-empty
    // pair must be refused.
    const bool empty = cshape[0] == 0 || cshape[1] == 0;
    const bool strided = compact.strides != nullptr;
    int64_t padded_r = 0, padded_c = 0, needed = 0, reach_r = 0, reach_c = 0, extent = 0;
    const bool sizes_fit = cshape[0] >= 0 && cshape[1] >= 0 &&
                           !__builtin_mul_overflow(cshape[0] / 128 + (cshape[0] % 128 != 0), 128, &padded_r) &&
                           !__builtin_mul_overflow(cshape[1] / 4 + (cshape[1] % 4 != 0), 4, &padded_c) &&
                           !__builtin_mul_overflow(padded_r, padded_c, &needed);
    const bool extent_fits = cshape[0] >= 1 && cshape[1] >= 1 &&
        (!strided ? !__builtin_mul_overflow(cshape[0], cshape[1], &extent)
                 : cstrides[0] >= 0 && cstrides[1] >= 0 && !__builtin_mul_overflow(cshape[0] - 1, cstrides[0], &reach_r) &&
                       !__builtin_mul_overflow(cshape[1] - 1, cstrides[1], &reach_c) &&
                       !__builtin_add_overflow(reach_r, reach_c, &extent));
    if (!empty && sizes_fit && needed == sshape[0] && extent_fits) return;
    const mxfp8_status swizzled = mxfp8_swizzle_scales(&compact, &swz, nullptr);
    const mxfp8_status unswizzled = mxfp8_unswizzle_scales(&swz, &compact, nullptr);
    clean(swizzled, "an edge swizzle gave an unclean status");
    clean(unswizzled, "an edge unswizzle gave an unclean status");
    if (!empty && (swizzled == MXFP8_OK || unswizzled == MXFP8_OK)) wrong("an impossible non-empty swizzle pair was accepted");
  } else if (call == 3) {  // grouped experts of edge sizes; views only
    // Counts around the limit of 2^20 experts (2^20 itself validates a million experts: 10 s under ASan).
    const int32_t experts = in.byte() % 8 == 0 ? (int32_t[]){0, -1, 1 << 12, (1 << 20) + 1, INT32_MAX}[in.byte() % 5]
                                               : 1 + in.byte() % 4;
    std::vector<int64_t> rows(4), offsets(4);
    for (auto &r : rows) r = edge(in);
    for (auto &o : offsets) o = in.byte() % 2 ? edge(in) : 0;
    int64_t vshape[1] = {edge(in)}, sshape[1] = {edge(in)};
    Managed data(bytes, {vshape[0]}), scales(bytes, {sshape[0]});
    data.m.deleter = scales.m.deleter = nullptr;
    mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
    desc.scale_layout = in.byte() % 2;
    desc.scales = desc.scale_layout ? 0 : in.byte() % 2;
    desc.num_experts = experts;
    desc.cols = edge(in);
    desc.uniform_rows = edge(in);
    if (experts >= 1 && experts <= 4 && in.byte() % 2) desc.expert_rows = rows.data();
    if (experts >= 1 && experts <= 4 && in.byte() % 2) desc.scale_offsets = offsets.data();
    desc.data = &data.m;
    desc.scale_inv = &scales.m;
    mxfp8_grouped_tensor *g = nullptr;
    const mxfp8_status st = mxfp8_grouped_tensor_create(&desc, &g);
    clean(st, "edge-sized experts gave an unclean status");
    if (st != MXFP8_OK) return;
    for (int32_t e = 0; e < std::min(experts, 4); ++e) {
      mxfp8_tensor *t = nullptr;
      if (mxfp8_grouped_expert(g, e, &t) != MXFP8_OK) wrong("an expert of created experts was refused");
      DLManagedTensorVersioned *v = nullptr;
      if (mxfp8_export_components(t, nullptr, &v, nullptr) != MXFP8_OK) wrong("an expert's values view failed");
      sane_view(v);
      v->deleter(v);
      mxfp8_tensor_release(t);
    }
    DLManagedTensorVersioned *v = nullptr;
    const mxfp8_status stacked = mxfp8_grouped_export(g, nullptr, 0, nullptr, &v, nullptr);
    clean(stacked, "stacking edge-sized experts gave an unclean status");
    if (stacked == MXFP8_OK) {
      sane_view(v);
      v->deleter(v);
    }
    mxfp8_grouped_tensor_release(g);
  } else {  // quantize of an input whose element count or byte size cannot be counted, or is 0
    int64_t shape[3] = {edge(in), edge(in), edge(in)};
    const int32_t ndim = in.byte() % 8 == 0 ? 65 : 1 + in.byte() % 3;
    std::vector<int64_t> dims(static_cast<size_t>(ndim), 1);
    for (int i = 0; i < std::min(ndim, 3); ++i) dims[static_cast<size_t>(i)] = shape[i];
    DLTensor input{bytes, kCpu, ndim, DLDataType{kDLFloat, 32, 1}, dims.data(), nullptr, 0};
    bool countable = true, empty = false;
    int64_t n = 4;
    for (int64_t d : dims) {
      countable &= d >= 0 && !__builtin_mul_overflow(n, d, &n);
      empty |= d == 0;
    }
    if (countable && !empty && ndim <= 64) return;  // a real input: it would run (covered elsewhere)
    DLManagedTensorVersioned *q[2] = {};
    const mxfp8_status st = mxfp8_quantize(&input, nullptr, &q[0], &q[1], nullptr, nullptr);
    clean(st, "an edge-sized quantize gave an unclean status");
    if (st == MXFP8_OK) {
      if (!empty || ndim > 64) wrong("an uncountable input or one of more than 64 dimensions was quantized");
      q[0]->deleter(q[0]);
      q[1]->deleter(q[1]);
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// Section 4: option structs and descriptors with every field chosen, struct_size around the known
// versions, and tails. A valid struct must work and give the documented result; an invalid one must be
// refused with nothing written.
// ---------------------------------------------------------------------------------------------------
template <class T>
struct Newer {
  T known;
  uint8_t tail[64];
};

int32_t field(Reader &in, int32_t valid_count) {
  const uint8_t pick = in.byte();
  if (pick % 4) return pick % 8 < 6 ? static_cast<int32_t>(pick / 8) % valid_count : valid_count;
  return (int32_t[]){-1, INT32_MIN, INT32_MAX, 2, 3, 255}[in.byte() % 6];
}
uint32_t reserved(Reader &in) { return in.byte() % 8 == 0 ? (uint32_t[]){1, 0x80000000u, 0xFFFFFFFFu}[in.byte() % 3] : 0; }

// Picks struct_size: below the oldest version, each version, the current size, 1 to 3 bytes past a
// version (inside the next field: every field added after the first version is 4 or 8 bytes), and larger
// with a tail that is zero or not. Returns what the call must answer: OK (then the fields decide), or a
// refusal.
template <class T>
mxfp8_status size_struct(Reader &in, Newer<T> &s, std::initializer_list<size_t> versions) {
  std::memset(s.tail, 0, sizeof s.tail);
  const size_t oldest = *versions.begin();
  const uint8_t pick = in.byte() % 8;
  size_t size = sizeof(T);
  bool inside_a_field = false;
  if (pick == 0) size = in.below(static_cast<int64_t>(oldest));
  else if (pick == 1) size = versions.begin()[in.byte() % versions.size()];
  else if (pick == 2) size = sizeof(T) + 1 + in.below(sizeof s.tail);
  else if (pick == 3) {
    const size_t version = versions.begin()[in.byte() % versions.size()];
    if (version < sizeof(T)) {
      size = version + 1 + in.byte() % 3;
      inside_a_field = true;
    }
  }
  s.known.struct_size = static_cast<uint32_t>(size);
  if (size < oldest || inside_a_field) return MXFP8_ERROR_INVALID_ARGUMENT;
  if (size > sizeof(T) && in.byte() % 2) {
    s.tail[in.below(static_cast<int64_t>(size - sizeof(T)))] = static_cast<uint8_t>(1 + in.byte() % 255);
    return MXFP8_ERROR_UNSUPPORTED;
  }
  return MXFP8_OK;
}

void section_options(Reader &in) {
  Source t;
  plan_source(in, t, 70, 100);
  t.block32 = in.byte() % 3 == 0;
  fill_scales(in, t);
  std::vector<uint8_t> values(static_cast<size_t>(t.values_bytes), 0x38), scales(static_cast<size_t>(t.scale_bytes), 0);
  t.values = values.data();
  t.scales = scales.data();
  store(t);
  const int call = in.byte() % 5;
  if (call == 4) {  // mxfp8_grouped_desc: experts of the source's shape, scales sized for padded packing
    const int32_t experts = 1 + in.byte() % 3;
    const int64_t n = t.m, k = t.k, per = round_up(n, 128) * round_up(ceil32(k), 4);
    std::vector<uint8_t> gv(static_cast<size_t>(experts * n * k)), gs(static_cast<size_t>(experts * per));
    Managed data(gv.data(), {experts * n, k}), sc(gs.data(), {experts * per});
    Newer<mxfp8_grouped_desc> d{};
    d.known = MXFP8_GROUPED_DESC_INIT;
    const mxfp8_status sized = size_struct(in, d, {sizeof(mxfp8_grouped_desc)});
    mxfp8_grouped_desc &desc = d.known;
    desc.format = in.byte() % 4 ? 1 + in.byte() % 2 : field(in, 3);
    desc.scale_layout = field(in, 2);
    desc.scales = field(in, 2);
    desc.num_experts = in.byte() % 8 ? experts : (int32_t[]){0, -1, experts + 1, 1 << 21}[in.byte() % 4];
    desc.reserved = reserved(in);
    desc.cols = in.byte() % 8 ? k : (int64_t[]){-1, k + 1, 0}[in.byte() % 3];
    desc.uniform_rows = in.byte() % 8 ? n : (int64_t[]){-1, n + 1, INT64_MAX}[in.byte() % 3];
    desc.data = &data.m;
    desc.scale_inv = &sc.m;
    const bool valid = sized == MXFP8_OK && (desc.format == 1 || desc.format == 2) &&
                       (desc.scale_layout == 0 || desc.scale_layout == 1) && (desc.scales == 0 || desc.scales == 1) &&
                       !(desc.scale_layout == 1 && desc.scales == 1) && desc.num_experts == experts && desc.reserved == 0 &&
                       desc.cols == k && desc.uniform_rows == n;
    mxfp8_grouped_tensor *g = nullptr;
    const mxfp8_status st = mxfp8_grouped_tensor_create(&desc, &g);
    if ((st == MXFP8_OK) != valid || (sized != MXFP8_OK && st != sized)) {
      std::fprintf(stderr, "fuzz_hostile: status %d, struct_size %u\n", st, desc.struct_size);
      wrong("mxfp8_grouped_desc: the status does not follow the struct");
    }
    if (st != MXFP8_OK) {
      if (g || data.deleted || sc.deleted) wrong("a refused grouped desc took something");
      return;
    }
    mxfp8_grouped_tensor_release(g);
    if (data.deleted != 1 || sc.deleted != 1) wrong("the grouped deleters did not run once");
    return;
  }
  if (call == 0) {  // mxfp8_tensor_desc
    Managed data(t.values, {t.m, t.k}), sc(t.scales, t.swizzled ? std::vector<int64_t>{t.scale_bytes}
                                                               : std::vector<int64_t>{t.scale_buffer_rows, t.scale_buffer_cols});
    Newer<mxfp8_tensor_desc> d{};
    d.known = MXFP8_TENSOR_DESC_INIT;
    const size_t v1 = offsetof(mxfp8_tensor_desc, columnwise_scale_inv) + sizeof(void *);
    const mxfp8_status sized = size_struct(in, d, {v1, offsetof(mxfp8_tensor_desc, reserved),
                                                   offsetof(mxfp8_tensor_desc, rowwise_amax),
                                                   offsetof(mxfp8_tensor_desc, columnwise_amax),
                                                   offsetof(mxfp8_tensor_desc, e4m3_max),
                                                   offsetof(mxfp8_tensor_desc, reserved2), sizeof(mxfp8_tensor_desc)});
    mxfp8_tensor_desc &desc = d.known;
    desc.format = field(in, 3);  // 0 is not a format: E4M3 = 1, E5M2 = 2
    desc.scale_layout = t.swizzled;
    desc.block = t.block32;
    desc.reserved = reserved(in);
    (t.columnwise ? desc.columnwise_data : desc.rowwise_data) = &data.m;
    (t.columnwise ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &sc.m;
    const size_t size = desc.struct_size;
    // Fields past struct_size are not read: an older caller's struct means their defaults.
    const bool has_block = size >= offsetof(mxfp8_tensor_desc, block) + sizeof(int32_t);
    const bool has_reserved = size >= offsetof(mxfp8_tensor_desc, reserved) + sizeof(uint32_t);
    const bool valid = sized == MXFP8_OK && desc.format >= 1 && desc.format <= 2 && (!has_reserved || desc.reserved == 0);
    // 32x32 scales described as 1x32 are still valid 1x32 scales: the block only matters for exports.
    (void)has_block;
    mxfp8_tensor *out = nullptr;
    const mxfp8_status st = mxfp8_tensor_create(&desc, &out);
    if ((st == MXFP8_OK) != valid || (sized != MXFP8_OK && st != sized)) {
      std::fprintf(stderr, "fuzz_hostile: status %d, struct_size %zu\n", st, size);
      wrong("mxfp8_tensor_desc: the status does not follow the struct");
    }
    if (st != MXFP8_OK) {
      if (out || data.deleted || sc.deleted) wrong("a refused desc took something");
      return;
    }
    mxfp8_tensor_release(out);
    if (data.deleted != 1 || sc.deleted != 1) wrong("the deleters did not run once");
    return;
  }
  Described d(t);
  if (call == 1) {  // mxfp8_export_options through export_components
    Newer<mxfp8_export_options> n{};
    n.known = MXFP8_EXPORT_OPTIONS_INIT;
    const size_t v1 = offsetof(mxfp8_export_options, allocator) + sizeof(void *);
    const mxfp8_status sized = size_struct(in, n, {v1, offsetof(mxfp8_export_options, reserved2),
                                                   offsetof(mxfp8_export_options, shard),
                                                   offsetof(mxfp8_export_options, global_scale),
                                                   sizeof(mxfp8_export_options)});
    mxfp8_export_options &o = n.known;
    o.direction = in.byte() % 4 ? t.columnwise : field(in, 2);
    o.values_dtype = field(in, 2);
    o.scales_dtype = field(in, 2);
    o.padded_scales = field(in, 2);
    o.reserved = reserved(in);
    o.stream = reinterpret_cast<void *>(uintptr_t{0xDEAD} * (in.byte() % 2));  // host data: never used
    o.scales_granularity = in.byte() % 4 ? t.block32 : field(in, 2);
    o.reserved2 = reserved(in);
    o.global_scale = field(in, 2);  // read by no MXFP8 export, but checked by every call taking the options
    o.reserved4 = reserved(in);
    const size_t size = o.struct_size;
    const bool has_granularity = size >= offsetof(mxfp8_export_options, scales_granularity) + sizeof(int32_t);
    const bool has_reserved2 = size >= offsetof(mxfp8_export_options, reserved2) + sizeof(uint32_t);
    const bool has_global_scale = size >= offsetof(mxfp8_export_options, global_scale) + sizeof(int32_t);
    const bool has_reserved4 = size >= offsetof(mxfp8_export_options, reserved4) + sizeof(uint32_t);
    const int32_t granularity = has_granularity ? o.scales_granularity : 0;
    const auto in01 = [](int32_t v) { return v == 0 || v == 1; };
    bool valid = sized == MXFP8_OK && in01(o.direction) && in01(o.values_dtype) && in01(o.scales_dtype) &&
                 in01(o.padded_scales) && o.reserved == 0 && in01(granularity) && (!has_reserved2 || o.reserved2 == 0) &&
                 (!has_global_scale || in01(o.global_scale)) && (!has_reserved4 || o.reserved4 == 0);
    mxfp8_status want = valid ? MXFP8_OK : sized != MXFP8_OK ? sized : MXFP8_ERROR_INVALID_ARGUMENT;
    if (valid && o.direction != t.columnwise) want = MXFP8_ERROR_MISSING_DATA;
    if (valid && want == MXFP8_OK && granularity == 1 && !t.block32) want = MXFP8_ERROR_INVALID_ARGUMENT;
    DLManagedTensorVersioned *v = kSentinel, *s = kSentinel;
    const mxfp8_status st = mxfp8_export_components(d.tensor, &o, &v, &s);
    if (st != want) {
      std::fprintf(stderr, "fuzz_hostile: status %d, expected %d, struct_size %zu\n", st, want, size);
      wrong("mxfp8_export_options: the status does not follow the struct");
    }
    if (st != MXFP8_OK) {
      if (v != kSentinel || s != kSentinel) wrong("a refused export wrote an output");
      return;
    }
    const uint8_t fp8 = kDLFloat8_e4m3fn;
    if (v->dl_tensor.dtype.code != (o.values_dtype ? kDLUInt : fp8)) wrong("the values' dtype ignores the options");
    if (s->dl_tensor.dtype.code != (o.scales_dtype ? kDLFloat8_e8m0fnu : kDLUInt)) wrong("the scales' dtype ignores the options");
    const DLTensor &sc = s->dl_tensor;
    const int64_t rows = granularity ? ceil32(t.m) : t.rows, cols = granularity ? ceil32(t.k) : t.cols;
    if (sc.ndim != 2 || sc.shape[0] != rows || sc.shape[1] != cols) wrong("the scales' shape");
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const uint8_t got = static_cast<const uint8_t *>(sc.data)[sc.byte_offset + static_cast<uint64_t>(r * sc.strides[0] + c * sc.strides[1])];
        const int64_t sr = granularity && !t.columnwise ? r * 32 : r, scol = granularity && t.columnwise ? c * 32 : c;
        if (got != t.s[static_cast<size_t>(sr * t.cols + scol)]) wrong("exported scales differ from S");
      }
    v->deleter(v);
    s->deleter(s);
    return;
  }
  if (call == 2) {  // mxfp8_dequantize_options
    Newer<mxfp8_dequantize_options> n{};
    n.known = MXFP8_DEQUANTIZE_OPTIONS_INIT;
    const mxfp8_status sized = size_struct(in, n, {sizeof(mxfp8_dequantize_options)});
    n.known.direction = in.byte() % 4 ? t.columnwise : field(in, 2);
    n.known.stream = reinterpret_cast<void *>(uintptr_t{0xDEAD} * (in.byte() % 2));
    const bool valid = sized == MXFP8_OK && (n.known.direction == 0 || n.known.direction == 1);
    mxfp8_status want = valid ? MXFP8_OK : sized != MXFP8_OK ? sized : MXFP8_ERROR_INVALID_ARGUMENT;
    if (valid && n.known.direction != t.columnwise) want = MXFP8_ERROR_MISSING_DATA;
    std::vector<float> out(static_cast<size_t>(t.values_bytes), -7.0f);
    int64_t count = t.values_bytes;
    DLTensor o = flat_tensor(out.data(), &count, DLDataType{kDLFloat, 32, 1});
    const mxfp8_status st = mxfp8_dequantize(d.tensor, &n.known, &o);
    if (st != want) {
      std::fprintf(stderr, "fuzz_hostile: status %d, expected %d\n", st, want);
      wrong("mxfp8_dequantize_options: the status does not follow the struct");
    }
    if (st != MXFP8_OK)
      for (float f : out)
        if (f != -7.0f) wrong("a refused dequantize wrote its output");
    return;
  }
  // mxfp8_quantize_options through quantize_into; the reference is the same call with INIT + the fields.
  const int64_t m = t.m, k = t.k;
  std::vector<float> x(static_cast<size_t>(m * k));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 97) - 48) * 0.37f;
  int64_t shape[2] = {m, k};
  DLTensor input{x.data(), kCpu, 2, DLDataType{kDLFloat, 32, 1}, shape, nullptr, 0};
  Newer<mxfp8_quantize_options> n{};
  n.known = MXFP8_QUANTIZE_OPTIONS_INIT;
  const mxfp8_status sized = size_struct(in, n, {sizeof(mxfp8_quantize_options)});
  mxfp8_quantize_options &o = n.known;
  o.format = in.byte() % 4 ? 1 + in.byte() % 2 : field(in, 3);
  o.block = field(in, 2);
  o.scale_rounding = field(in, 3);
  o.scales_layout = field(in, 3);
  o.values_dtype = field(in, 2);  // not used by quantize_into, still checked
  o.scales_dtype = field(in, 2);
  o.flags = reserved(in);  // 1 is MXFP8_CHECK_ONLY: the checks alone, nothing written
  o.stream = reinterpret_cast<void *>(uintptr_t{0xDEAD} * (in.byte() % 2));
  const auto in_range = [](int32_t v, int32_t lo, int32_t hi) { return v >= lo && v <= hi; };
  const bool fields_ok = in_range(o.format, 1, 2) && in_range(o.block, 0, 1) && in_range(o.scale_rounding, 0, 2) &&
                         in_range(o.scales_layout, 0, 2) && in_range(o.values_dtype, 0, 1) &&
                         in_range(o.scales_dtype, 0, 1) && (o.flags == 0 || o.flags == MXFP8_CHECK_ONLY);
  // The outputs sized for the layout the fields ask for (the compact one when they are out of range).
  const int64_t layout = in_range(o.scales_layout, 0, 2) ? o.scales_layout : 0;
  const bool block = o.block == 1;
  int64_t scale_n = layout == 0 ? (block ? ceil32(m) * ceil32(k) : m * ceil32(k)) : round_up(m, 128) * round_up(ceil32(k), 4);
  std::vector<uint8_t> qv(static_cast<size_t>(m * k), 0xEE), qs(static_cast<size_t>(scale_n), 0xEE);
  int64_t vn = m * k;
  DLTensor tv = flat_tensor(qv.data(), &vn), ts = flat_tensor(qs.data(), &scale_n);
  const mxfp8_status st = mxfp8_quantize_into(&input, &o, &tv, &ts, nullptr, nullptr);
  const mxfp8_status want = sized != MXFP8_OK ? sized : fields_ok ? MXFP8_OK : MXFP8_ERROR_INVALID_ARGUMENT;
  if (st != want) {
    std::fprintf(stderr, "fuzz_hostile: status %d, expected %d\n", st, want);
    wrong("mxfp8_quantize_options: the status does not follow the struct");
  }
  if (st != MXFP8_OK || o.flags == MXFP8_CHECK_ONLY) {
    for (uint8_t b : qv) if (b != 0xEE) wrong("a refused or checked-only quantize wrote values");
    for (uint8_t b : qs) if (b != 0xEE) wrong("a refused or checked-only quantize wrote scales");
    return;
  }
  // The same fields through a struct of exactly this build's size give the same bytes.
  mxfp8_quantize_options plain = o;
  plain.struct_size = sizeof plain;
  std::vector<uint8_t> rv(qv.size()), rs(qs.size());
  DLTensor rtv = flat_tensor(rv.data(), &vn), rts = flat_tensor(rs.data(), &scale_n);
  if (mxfp8_quantize_into(&input, &plain, &rtv, &rts, nullptr, nullptr) != MXFP8_OK) wrong("the plain struct failed");
  if (rv != qv || rs != qs) wrong("a newer struct with a zero tail quantized differently");
}

// ---------------------------------------------------------------------------------------------------
// Section 5: the newest calls. mxfp8_layout_bytes against the header's formulas in 128-bit arithmetic;
// mxfp8_convert into every target, its outputs placed anywhere in an arena (refused exactly when a size,
// a layout's direction or row rule, or an overlap says so, with nothing written; otherwise the target's
// bytes from its formula and nothing outside the outputs written); options.shard exports with shards legal
// or not (refused exactly when the header's boundary rules say so; otherwise the crop of the values and
// of S); and an NVFP4 quantize whose outputs are described, exported and dequantized again.
// ---------------------------------------------------------------------------------------------------
using Wide = __int128;
constexpr Wide kInt64Max = INT64_MAX;

Wide wide_round_up(Wide v, Wide d) { return (v + d - 1) / d * d; }

// The bytes `layout` gives an R x C scale matrix, or -1 where the header refuses (or int64 cannot count).
int64_t expected_layout_bytes(int32_t layout, int32_t direction, int64_t rows, int64_t cols) {
  if (layout < 0 || layout > 5 || (direction != 0 && direction != 1) || rows < 0 || cols < 0) return -1;
  const bool columnwise = direction == 1;
  if (columnwise && layout >= 2) return -1;  // DeepGEMM and TRT-LLM: rowwise only
  const Wide r = rows, c = cols;
  if (layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32) {  // a float32 per scale, no padding
    const Wide scales = r * c;  // below 2^126; times 4 may not fit even 128 bits
    return scales > kInt64Max / 4 ? -1 : static_cast<int64_t>(scales * 4);
  }
  const bool trtllm = layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || layout == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  if (trtllm && rows % 128 != 0) return -1;
  if (rows == 0 || cols == 0) return 0;  // an empty matrix pads to nothing, however large its other side
  Wide parts[2] = {r, c};
  switch (layout) {
    case MXFP8_SCALE_LAYOUT_128X4:
      parts[0] = wide_round_up(columnwise ? c : r, 128), parts[1] = wide_round_up(columnwise ? r : c, 4);
      break;
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED:
      parts[1] = wide_round_up(c, 4);
      break;
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED:
      parts[0] = wide_round_up(c, 4), parts[1] = wide_round_up(r, 4);
      break;
    default: break;
  }
  if (parts[0] > kInt64Max || parts[1] > kInt64Max) return -1;  // a padded count int64 cannot hold
  const Wide bytes = parts[0] * parts[1];
  return bytes > kInt64Max ? -1 : static_cast<int64_t>(bytes);
}

int64_t edge_size(Reader &in) {
  const int64_t edges[] = {0, 1, 3, 4, 127, 128, 129, int64_t{1} << 40, (int64_t{1} << 61) + 5, INT64_MAX / 4,
                           INT64_MAX - 3, INT64_MAX, -1, INT64_MIN};
  const uint8_t pick = in.byte();
  return pick < 14 * 8 ? edges[pick % 14] : in.below(100000);
}

void newest_layout_bytes(Reader &in) {
  const int32_t layout = static_cast<int32_t>(in.byte() % 8) - 1, direction = static_cast<int32_t>(in.byte() % 4) - 1;
  const int64_t rows = edge_size(in), cols = edge_size(in);
  int64_t got = -7;
  const mxfp8_status st = mxfp8_layout_bytes(layout, direction, rows, cols, &got);
  const int64_t want = expected_layout_bytes(layout, direction, rows, cols);
  if (want < 0) {
    if (st != MXFP8_ERROR_INVALID_ARGUMENT) wrong("mxfp8_layout_bytes accepted what the header refuses");
    if (got != -7) wrong("mxfp8_layout_bytes wrote *bytes on failure");
    return;
  }
  if (st != MXFP8_OK) wrong("mxfp8_layout_bytes refused a valid request");
  if (got != want) wrong("mxfp8_layout_bytes disagrees with the header's formula");
}

// Where the target puts S(r, c) (R x C, rowwise unless `columnwise`), by the header's formulas.
int64_t target_offset(int32_t target, bool columnwise, int64_t R, int64_t C, int64_t r, int64_t c) {
  switch (target) {
    case MXFP8_SCALE_LAYOUT_128X4:
      return columnwise ? static_cast<int64_t>(ref_swizzled_index(c, r, round_up(R, 4)))
                        : static_cast<int64_t>(ref_swizzled_index(r, c, round_up(C, 4)));
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED: return ((c / 4) * round_up(R, 4) + r) * 4 + c % 4;
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED: {
      // The gated target first interleaves: up row i (source N + i) to 2i, gate row i (source i) to 2i + 1.
      if (target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED) r = r < R / 2 ? 2 * r + 1 : 2 * (r - R / 2);
      const int64_t moved = 32 * (r / 32) + 8 * (r % 4) + (r % 32) / 4;
      return static_cast<int64_t>(ref_swizzled_index(moved, c, round_up(C, 4)));
    }
    default: return r * C + c;
  }
}

// Writes scale byte `e` of S(r, c) into `expect`, the target's bytes: at target_offset, or for DeepGEMM's
// float32 target the four little-endian bytes of the float32 whose bits are e << 23, as SGLang builds it.
void expect_scale(std::vector<uint8_t> &expect, int64_t base, int32_t target, bool columnwise, int64_t R, int64_t C,
                  int64_t r, int64_t c, uint8_t e) {
  if (target == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32) {
    const uint32_t bits = static_cast<uint32_t>(e) << 23;
    for (int b = 0; b < 4; ++b)
      expect[static_cast<size_t>(base + (r * C + c) * 4 + b)] = static_cast<uint8_t>(bits >> (8 * b));
    return;
  }
  expect[static_cast<size_t>(base + target_offset(target, columnwise, R, C, r, c))] = e;
}

// The source row that lands in row `j` of a TRT-LLM target (the gated one first interleaves up and gate).
int64_t trtllm_source_row(int32_t target, int64_t rows, int64_t j) {
  // Row 32b + i of the (gated) matrix goes to 32b + 8 (i % 4) + i / 4: invert it.
  const int64_t b = j / 32, p = j % 32, i = (p % 8) * 4 + p / 8;
  const int64_t g = 32 * b + i;
  if (target != MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED) return g;
  return g % 2 == 0 ? rows / 2 + g / 2 : g / 2;
}

void newest_convert(Reader &in) {
  Arena arena(in);
  const int32_t target = static_cast<int32_t>(in.byte() % 6);
  const bool trtllm = target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  Source t;
  plan_source(in, t, 150, 96, trtllm && in.byte() % 4 ? 128 : 0);  // every buffer fits the arena
  fill_scales(in, t);
  t.values = arena.at(arena.place(in, t.values_bytes));
  t.scales = arena.at(arena.place(in, t.scale_bytes));
  store(t);
  Described d(t);
  const int64_t want = expected_layout_bytes(target, t.columnwise, t.rows, t.cols);
  bool refused = want < 0;
  // The scales output: the exact bytes, or a few off; now and then DeepGEMM's strided int32 form.
  const bool strided = target == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED && !t.columnwise && in.byte() % 3 == 0;
  const int64_t aligned = round_up(t.rows, 4), packed = (t.cols + 3) / 4;
  int64_t size = want < 0 ? t.rows * t.cols : want;
  if (!strided && in.byte() % 6 == 0) size += static_cast<int64_t>(in.byte() % 9) - 4;
  if (size < 0) size = 0;
  refused |= !strided && size != want;
  const int64_t writable = strided ? 4 * ((packed - 1) * aligned + t.rows) : size;
  uint8_t *scales = arena.at(arena.place(in, std::max<int64_t>(writable, size), strided ? 4 : 1));
  int64_t sshape[2] = {size, 0}, sstrides[2] = {1, aligned};
  DLTensor sd = flat_tensor(scales, &sshape[0]);
  if (strided) {
    sshape[0] = t.rows, sshape[1] = packed;
    sd = DLTensor{scales, kCpu, 2, DLDataType{kDLInt, 32, 1}, sshape, sstrides, 0};
  }
  // The values output: none (refused by the TRT-LLM targets, which permute them), or anywhere.
  const bool with_values = trtllm || in.byte() % 2;
  refused |= !with_values && trtllm;
  int64_t vsize = t.values_bytes;
  if (with_values && in.byte() % 8 == 0) vsize += static_cast<int64_t>(in.byte() % 3) - 1, refused |= vsize != t.values_bytes;
  uint8_t *values = with_values ? arena.at(arena.place(in, vsize)) : nullptr;
  DLTensor vd = flat_tensor(values, &vsize);
  const Range sr = range_of(scales, strided ? writable : size), vr = range_of(values, with_values ? vsize : 0);
  for (Range out : {sr, vr}) refused |= overlap(out, d.values_range(t)) || overlap(out, d.scales_range(t));
  refused |= overlap(sr, vr);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = target;
  o.direction = t.columnwise;
  arena.snapshot();
  const mxfp8_status st = mxfp8_convert(d.tensor, &o, with_values ? &vd : nullptr, &sd);
  if (refused) {
    if (st != MXFP8_ERROR_INVALID_ARGUMENT) wrong("mxfp8_convert accepted what the header refuses");
    if (arena.bytes != arena.before) wrong("a refused mxfp8_convert wrote something");
    return;
  }
  if (st != MXFP8_OK) wrong("mxfp8_convert refused a valid call");
  // Scales: S where the formula puts it, zero in every other byte the output describes.
  std::vector<uint8_t> expect(static_cast<size_t>(want), 0);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < t.cols; ++c)
      expect_scale(expect, 0, target, t.columnwise, t.rows, t.cols, r, c, t.s[static_cast<size_t>(r * t.cols + c)]);
  if (std::memcmp(scales, expect.data(), static_cast<size_t>(writable)) != 0) wrong("mxfp8_convert's scales differ");
  if (with_values) {
    const uint8_t *src = arena.before.data() + (t.values - arena.bytes.data());
    for (int64_t j = 0; j < t.m; ++j) {
      const int64_t from = trtllm ? trtllm_source_row(target, t.m, j) : j;
      if (std::memcmp(values + j * t.k, src + from * t.k, static_cast<size_t>(t.k)) != 0)
        wrong("mxfp8_convert's values differ");
    }
  }
  arena.unchanged_outside({sr, vr}, "mxfp8_convert wrote outside its outputs");
}

// One shard field: a boundary of interest, MXFP8_SHARD_END, or anything.
int64_t shard_field(Reader &in, int64_t extent) {
  const int64_t picks[] = {0, 32, 64, extent, extent - 1, MXFP8_SHARD_END, -5, extent + 1, INT64_MAX, INT64_MIN};
  const uint8_t b = in.byte();
  return b < 10 * 12 ? picks[b % 10] : in.below(extent + 2);
}

void newest_shard(Reader &in) {
  Source t;
  plan_source(in, t, 130, 130);
  std::vector<uint8_t> values(static_cast<size_t>(t.values_bytes)), scales(static_cast<size_t>(t.scale_bytes));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint8_t>(i * 7 + 3);
  t.values = values.data();
  t.scales = scales.data();
  fill_scales(in, t);
  store(t);
  Described d(t);
  mxfp8_shard sh = MXFP8_SHARD_INIT;
  int64_t pieces[6];
  const bool with_pieces = in.byte() % 3 == 0;
  if (with_pieces) {
    sh.num_row_pieces = 1 + in.byte() % 3;
    for (size_t i = 0; i < 2 * sh.num_row_pieces; ++i) pieces[i] = shard_field(in, t.m);
    sh.row_pieces = pieces;
    if (in.byte() % 8 == 0) sh.row_end = 10;  // both forms at once
  } else {
    if (in.byte() % 2) sh.row_begin = shard_field(in, t.m);
    if (in.byte() % 2) sh.row_end = shard_field(in, t.m);
  }
  if (in.byte() % 2) sh.col_begin = shard_field(in, t.k);
  if (in.byte() % 2) sh.col_end = shard_field(in, t.k);
  if (in.byte() % 16 == 0) sh.reserved = 1;
  // Legality, from the header's rules.
  bool legal = sh.reserved == 0;
  auto range_ok = [](int64_t b, int64_t e, int64_t extent, bool open) {
    if (open && e == MXFP8_SHARD_END) e = extent;
    return b >= 0 && b <= extent && e >= 0 && e <= extent && e >= b && (e > b || extent == 0);
  };
  auto boundary = [](int64_t at, int64_t extent) { return at % 32 == 0 || at == extent; };
  const int64_t ce = sh.col_end == MXFP8_SHARD_END ? t.k : sh.col_end;
  legal &= range_ok(sh.col_begin, sh.col_end, t.k, true);
  if (!t.columnwise) legal &= boundary(sh.col_begin, t.k) && boundary(ce, t.k);
  std::vector<std::pair<int64_t, int64_t>> rows;
  if (with_pieces) {
    legal &= sh.row_begin == 0 && sh.row_end == MXFP8_SHARD_END;
    for (size_t p = 0; p < sh.num_row_pieces; ++p) {
      const int64_t b = pieces[2 * p], e = pieces[2 * p + 1];
      legal &= range_ok(b, e, t.m, false);
      rows.emplace_back(b, e);
    }
  } else {
    legal &= range_ok(sh.row_begin, sh.row_end, t.m, true);
    rows.emplace_back(sh.row_begin, sh.row_end == MXFP8_SHARD_END ? t.m : sh.row_end);
  }
  if (t.columnwise)
    for (size_t p = 0; p < rows.size(); ++p) {
      legal &= boundary(rows[p].first, t.m) && boundary(rows[p].second, t.m);
      if (p + 1 < rows.size()) legal &= rows[p].second % 32 == 0;
    }
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.direction = t.columnwise;
  o.padded_scales = in.byte() % 2;
  o.shard = &sh;
  DLManagedTensorVersioned *v = kSentinel, *sc = kSentinel;
  const mxfp8_status st = mxfp8_export_components(d.tensor, &o, &v, &sc);
  if (!legal) {
    if (st != MXFP8_ERROR_INVALID_ARGUMENT) wrong("options.shard: mxfp8_export_components accepted a shard the header refuses");
    if (v != kSentinel || sc != kSentinel) wrong("a refused options.shard export wrote an output");
    return;
  }
  if (st != MXFP8_OK) wrong("options.shard: mxfp8_export_components refused a legal shard");
  // The shard's values (n x width) and its S, crops of the tensor's, read through the outputs' strides.
  int64_t n = 0;
  for (auto &r : rows) n += r.second - r.first;
  const int64_t width = ce - sh.col_begin;
  const int64_t srows = t.columnwise ? (n + 31) / 32 : n, scols = t.columnwise ? width : (width + 31) / 32;
  const DLTensor &vt = v->dl_tensor, &stt = sc->dl_tensor;
  if (vt.ndim != 2 || vt.shape[0] != n || vt.shape[1] != width || stt.ndim != 2 || stt.shape[0] != srows ||
      stt.shape[1] != scols)
    wrong("options.shard: the export's shapes differ from the header's");
  const auto *vb = static_cast<const uint8_t *>(vt.data) + vt.byte_offset;
  const auto *sb = static_cast<const uint8_t *>(stt.data) + stt.byte_offset;
  int64_t at = 0;
  for (auto &r : rows)
    for (int64_t y = r.first; y < r.second; ++y, ++at)
      for (int64_t x = 0; x < width; ++x)
        if (vb[at * vt.strides[0] + x * vt.strides[1]] != values[static_cast<size_t>(y * t.k + sh.col_begin + x)])
          wrong("a shard's value differs");
  // S rows of the shard: rowwise one per row; columnwise the blocks of each piece, in order.
  std::vector<int64_t> s_rows;
  for (auto &r : rows) {
    if (!t.columnwise) {
      for (int64_t y = r.first; y < r.second; ++y) s_rows.push_back(y);
    } else {
      for (int64_t y = r.first / 32; y < (r.second + 31) / 32; ++y) s_rows.push_back(y);
    }
  }
  const int64_t c0 = t.columnwise ? sh.col_begin : sh.col_begin / 32;
  for (int64_t y = 0; y < srows; ++y)
    for (int64_t x = 0; x < scols; ++x)
      if (sb[y * stt.strides[0] + x * stt.strides[1]] != t.s[static_cast<size_t>(s_rows[static_cast<size_t>(y)] * t.cols + c0 + x)])
        wrong("a shard's scale differs from S");
  v->deleter(v);
  sc->deleter(sc);
}

void newest_nvfp4(Reader &in) {
  const int64_t m = 1 + in.below(70), k = 1 + in.below(100);
  const int32_t direction = in.byte() % 2, layout = in.byte() % 3;
  std::vector<float> input(static_cast<size_t>(m * k));
  for (auto &x : input) x = static_cast<float>(static_cast<int>(in.byte()) - 128) * 0.37f;
  const int64_t lines = direction ? k : m, length = direction ? m : k, sc = (length + 15) / 16;
  const int64_t srows = layout ? round_up(lines, 128) : lines, scols = layout ? round_up(sc, 4) : sc;
  std::vector<uint8_t> values(static_cast<size_t>(lines * (length / 2)) + 1, kPoison);
  std::vector<uint8_t> scales(static_cast<size_t>(srows * scols) + 1, kPoison), compact(static_cast<size_t>(lines * sc) + 1);
  float amax = -1.0f, compact_amax = -1.0f;
  int64_t ishape[2] = {m, k}, vshape[2] = {lines, length / 2}, sshape[2] = {srows, scols}, cshape[2] = {lines, sc},
          one = 1;
  DLTensor it{input.data(), kCpu, 2, DLDataType{kDLFloat, 32, 1}, ishape, nullptr, 0};
  DLTensor vt{values.data(), kCpu, 2, kU8, vshape, nullptr, 0}, st{scales.data(), kCpu, 2, kU8, sshape, nullptr, 0};
  DLTensor ct{compact.data(), kCpu, 2, kU8, cshape, nullptr, 0};
  DLTensor at{&amax, kCpu, 1, DLDataType{kDLFloat, 32, 1}, &one, nullptr, 0}, cat = at;
  cat.data = &compact_amax;
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.direction = direction;
  o.scales_layout = layout;
  const DLTensor *inputs[1] = {&it};
  DLTensor *value_list[1] = {&vt}, *scale_list[1] = {&st}, *compact_list[1] = {&ct};
  const mxfp8_status q = mxfp8_nvfp4_quantize_into(inputs, 1, &o, value_list, scale_list, &at);
  if (length % 2) {
    if (q != MXFP8_ERROR_INVALID_ARGUMENT) wrong("an NVFP4 quantize of odd rows was not refused");
    if (values[0] != kPoison || scales[0] != kPoison || amax != -1.0f) wrong("a refused NVFP4 quantize wrote");
    return;
  }
  if (q != MXFP8_OK) wrong("a valid NVFP4 quantize failed");
  o.scales_layout = MXFP8_QUANTIZED_SCALES_COMPACT;
  if (mxfp8_nvfp4_quantize_into(inputs, 1, &o, value_list, compact_list, &cat) != MXFP8_OK || cat.data == nullptr || compact_amax != amax)
    wrong("the compact NVFP4 quantize disagrees");
  // Describe what was written, export its scales (compact, whatever the layout) and dequantize it.
  Managed data(values.data(), {lines, length / 2}), scale_buf(scales.data(), {srows, scols});
  int64_t flat = srows * scols;
  if (layout == MXFP8_QUANTIZED_SCALES_SWIZZLED) scale_buf.shape = {flat}, scale_buf.m.dl_tensor.ndim = 1;
  scale_buf.m.dl_tensor.shape = scale_buf.shape.data();
  Managed amax_m(&amax, {1}, DLDataType{kDLFloat, 32, 1});
  for (Managed *mm : {&data, &scale_buf, &amax_m}) mm->m.deleter = nullptr;
  int64_t logical[2] = {m, k};
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = MXFP8_FORMAT_NVFP4;
  desc.block = MXFP8_BLOCK_1X16;
  desc.e4m3_max = 448;
  desc.scale_layout = layout == MXFP8_QUANTIZED_SCALES_SWIZZLED;
  desc.ndim = 2;
  desc.shape = logical;
  (direction ? desc.columnwise_data : desc.rowwise_data) = &data.m;
  (direction ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &scale_buf.m;
  (direction ? desc.columnwise_amax : desc.rowwise_amax) = &amax_m.m;
  mxfp8_tensor *nv = nullptr;
  if (mxfp8_tensor_create(&desc, &nv) != MXFP8_OK) wrong("what the NVFP4 quantize wrote cannot be described");
  mxfp8_export_options eo = MXFP8_EXPORT_OPTIONS_INIT;
  eo.direction = direction;
  DLManagedTensorVersioned *exported = nullptr;
  if (mxfp8_export_components(nv, &eo, nullptr, &exported) != MXFP8_OK) wrong("NVFP4 export failed");
  const DLTensor &e = exported->dl_tensor;
  const auto *eb = static_cast<const uint8_t *>(e.data) + e.byte_offset;
  for (int64_t y = 0; y < lines; ++y)
    for (int64_t x = 0; x < sc; ++x)
      if (eb[y * e.strides[0] + x * e.strides[1]] != compact[static_cast<size_t>(y * sc + x)])
        wrong("NVFP4 scales exported from one layout differ from the compact quantize's");
  exported->deleter(exported);
  std::vector<float> decoded(static_cast<size_t>(m * k));
  int64_t dshape = m * k;
  DLTensor dt{decoded.data(), kCpu, 1, DLDataType{kDLFloat, 32, 1}, &dshape, nullptr, 0};
  mxfp8_dequantize_options dq = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  dq.direction = direction;
  if (mxfp8_dequantize(nv, &dq, &dt) != MXFP8_OK) wrong("NVFP4 dequantize failed");
  mxfp8_tensor_release(nv);
}

// mxfp8_grouped_convert: E experts of N rows (padded or compact, row-major or swizzled) into every target,
// the outputs anywhere in an arena: each expert's target bytes at e * B, or a refusal with nothing written.
void newest_grouped_convert(Reader &in) {
  Arena arena(in);
  const int32_t target = static_cast<int32_t>(in.byte() % 6);
  const bool trtllm = target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
  // TRT-LLM experts take 128 rows: fewer and narrower, so that sources and outputs fit the arena.
  const int32_t experts = 1 + in.byte() % (trtllm ? 2 : 4);
  const int64_t n = trtllm && in.byte() % 4 ? 128 : in.below(70), k = 1 + in.below(trtllm ? 24 : 100), c = (k + 31) / 32;
  const bool swizzled = in.byte() % 2, compact = !swizzled && in.byte() % 2;
  const int64_t per = compact ? n * c : round_up(n, 128) * round_up(c, 4);
  const int64_t values_bytes = experts * n * k, stored = experts * per;
  if (values_bytes + stored >= kArena / 2) return;
  uint8_t *values = arena.at(arena.place(in, values_bytes)), *scales = arena.at(arena.place(in, stored));
  std::vector<uint8_t> s(static_cast<size_t>(experts * n * c));
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<uint8_t>((i * 37 + in.byte()) % 255);
  for (int32_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t q = 0; q < c; ++q)
        scales[e * per + (swizzled ? static_cast<int64_t>(ref_swizzled_index(r, q, round_up(c, 4)))
                                   : r * (compact ? c : round_up(c, 4)) + q)] = s[static_cast<size_t>((e * n + r) * c + q)];
  Managed data(values, {experts * n, k}), stored_scales(scales, {stored});
  data.m.deleter = stored_scales.m.deleter = nullptr;
  mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
  desc.scale_layout = swizzled;
  desc.scales = compact;
  desc.num_experts = experts;
  desc.cols = k;
  desc.uniform_rows = n;
  desc.data = &data.m;
  desc.scale_inv = &stored_scales.m;
  mxfp8_grouped_tensor *g = nullptr;
  if (mxfp8_grouped_tensor_create(&desc, &g) != MXFP8_OK) wrong("valid grouped experts were refused");
  const int64_t per_target = expected_layout_bytes(target, 0, n, c);
  bool refused = per_target < 0;
  const int64_t want = refused ? 0 : experts * per_target;
  int64_t size = want;
  if (in.byte() % 6 == 0) size = std::max<int64_t>(0, size + static_cast<int64_t>(in.byte() % 9) - 4);
  refused |= size != want;
  const bool with_values = trtllm || in.byte() % 2;
  refused |= !with_values && trtllm;
  if (size + values_bytes >= kArena / 2) {
    mxfp8_grouped_tensor_release(g);
    return;
  }
  uint8_t *out = arena.at(arena.place(in, size)), *vout = with_values ? arena.at(arena.place(in, values_bytes)) : nullptr;
  int64_t oshape = size, vshape = values_bytes;
  DLTensor ot = flat_tensor(out, &oshape), vt = flat_tensor(vout, &vshape);
  const Range outr = range_of(out, size), vr = range_of(vout, with_values ? values_bytes : 0);
  for (Range r : {outr, vr})
    refused |= overlap(r, range_of(values, values_bytes)) || overlap(r, range_of(scales, stored));
  refused |= overlap(outr, vr);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = target;
  arena.snapshot();
  const mxfp8_status st = mxfp8_grouped_convert(g, &o, with_values ? &vt : nullptr, &ot);
  mxfp8_grouped_tensor_release(g);
  if (refused) {
    if (st != MXFP8_ERROR_INVALID_ARGUMENT) wrong("mxfp8_grouped_convert accepted what the header refuses");
    if (arena.bytes != arena.before) wrong("a refused mxfp8_grouped_convert wrote something");
    return;
  }
  if (st != MXFP8_OK) wrong("mxfp8_grouped_convert refused a valid call");
  std::vector<uint8_t> expect(static_cast<size_t>(want), 0);
  for (int32_t e = 0; e < experts; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t q = 0; q < c; ++q)
        expect_scale(expect, e * per_target, target, false, n, c, r, q, s[static_cast<size_t>((e * n + r) * c + q)]);
  if (want > 0 && std::memcmp(out, expect.data(), static_cast<size_t>(want)) != 0)
    wrong("mxfp8_grouped_convert's scales differ");
  if (with_values) {
    const uint8_t *src = arena.before.data() + (values - arena.bytes.data());
    for (int32_t e = 0; e < experts; ++e)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t from = trtllm ? trtllm_source_row(target, n, j) : j;
        if (std::memcmp(vout + (e * n + j) * k, src + (e * n + from) * k, static_cast<size_t>(k)) != 0)
          wrong("mxfp8_grouped_convert's values differ");
      }
  }
  arena.unchanged_outside({outr, vr}, "mxfp8_grouped_convert wrote outside its outputs");
}

void section_newest(Reader &in) {
  switch (in.byte() % 5) {
    case 0: newest_layout_bytes(in); break;
    case 1: newest_convert(in); break;
    case 2: newest_shard(in); break;
    case 3: newest_nvfp4(in); break;
    default: newest_grouped_convert(in); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  // First bytes 213 and up pick section 5 (added later): below, the earlier corpus keeps its sections.
  const uint8_t pick = in.byte();
  if (pick >= 213) {
    section_newest(in);
    return 0;
  }
  switch (pick % 5) {
    case 0: section_allocator(in); break;
    case 1: section_overlap(in); break;
    case 2: section_empty(in); break;
    case 3: section_edges(in); break;
    default: section_options(in); break;
  }
  return 0;
}
