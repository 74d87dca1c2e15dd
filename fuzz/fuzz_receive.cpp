// libFuzzer harness for what a receiver is handed by another process: a bucket's bytes and the manifest
// that says what lies where (mxfp8_transfer, MXFP8_TRANSFER_FROM_BUCKET into the receiver's buffers,
// host memory). The manifest is built honestly from random entries (MXFP8 E4M3 / E5M2 of rank 1 to 3 and
// NVFP4 with a per-tensor or per-row amax, rowwise and columnwise, compact or 128x4 scale parts into
// compact or 128x4 buffers, rowwise), then, for
// about half the inputs, one field is changed: an offset or a size moved, two parts made to share bytes,
// a shape, format, direction, layout, E4M3_MAX or destination size changed, the bucket cut short; for a
// third of the inputs the sender's shape of each scale matrix goes along (desc.scales_shapes), one of
// its dimensions changed for some. The
// bucket and every buffer are allocated at exactly their size, so ASan reports any read or write past
// them. The oracle is the header's contract, written here from its formulas, not from the library:
//   - the call succeeds exactly when the contract allows the manifest: each part exactly the bytes its
//     shape, format, direction and layout give, inside the bucket, apart from every other part, an NVFP4
//     amax of one float (or one a row, rowwise) at a multiple of 4 bytes and none for MXFP8, every buffer
//     exactly its size, a given scale shape one that names S (its last dimension S's columns, the others
//     multiplying to S's rows);
//   - then each buffer holds what the bucket's bytes at those parts mean: the values as they lie, the
//     scale matrix moved into the buffer's layout (128x4 from its permute form, padding zero), NVFP4's
//     global scales amax / (6 * E4M3_MAX) in float32;
//   - a refused call wrote nothing: every buffer still holds its poison.
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

constexpr uint8_t kPoison = 0xA5;
constexpr DLDevice kCpu{kDLCPU, 0};
constexpr DLDataType kU8{kDLUInt, 8, 1}, kF32{kDLFloat, 32, 1};

[[noreturn]] void broken(const char *what) {
  std::fprintf(stderr, "fuzz_receive: %s (last error: %s)\n", what, mxfp8_last_error());
  std::abort();
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// One entry as the manifest says it, and its buffers.
struct Entry {
  int32_t format = MXFP8_FORMAT_E4M3, direction = MXFP8_DIRECTION_ROWWISE;
  int32_t source_layout = MXFP8_SCALE_LAYOUT_COMPACT, target_layout = MXFP8_SCALE_LAYOUT_COMPACT;
  int32_t e4m3_max = 448;
  std::vector<int64_t> shape, scales_shape;  // the sender's shape of S: (*lead, C) rowwise, (R, C) else
  mxfp8_bucket_part part{};
  int64_t values_size = 0, scales_size = 0, globals = 0;  // the buffers' sizes (the honest ones unless changed)
  bool nvfp4() const { return format == MXFP8_FORMAT_NVFP4; }
};

// What the contract says of an entry: its stored matrix (rows x cols; NVFP4 columnwise: the (K, M)
// transpose), the values' bytes, the scale matrix S (r x c), and whether such an entry exists at all.
struct Expected {
  bool valid = true;
  int64_t rows = 0, cols = 0, values = 0, r = 0, c = 0;
  int64_t scales(int32_t layout) const {
    return layout == MXFP8_SCALE_LAYOUT_128X4 ? round_up(r, 128) * round_up(c, 4) : r * c;
  }
};

Expected expected(const Entry &e) {
  Expected x;
  if (e.shape.empty()) return x.valid = false, x;
  int64_t m = 1;
  for (size_t i = 0; i + 1 < e.shape.size(); ++i) m *= e.shape[i];
  const int64_t k = e.shape.back();
  if (m < 1 || k < 1) return x.valid = false, x;
  const bool row = e.direction == MXFP8_DIRECTION_ROWWISE;
  if (e.nvfp4()) {
    // The stored matrix: rowwise (M, K), columnwise (K, M); two E2M1 codes a byte, so its columns even.
    x.rows = row ? m : k, x.cols = row ? k : m;
    x.valid = x.cols % 2 == 0 && (e.e4m3_max == 448 || e.e4m3_max == 256);
    x.values = x.rows * x.cols / 2, x.r = x.rows, x.c = ceil_div(x.cols, 16);
  } else {
    x.rows = m, x.cols = k, x.values = m * k;
    x.r = row ? m : ceil_div(m, 32), x.c = row ? ceil_div(k, 32) : k;
  }
  // 128x4 parts and buffers are made for rowwise entries only, and no change below gives a columnwise entry
  // one: a columnwise 128x4 layout is of S's transpose, which this oracle does not write down.
  return x;
}

// Byte (i, j) of S in a part of `layout` of an r x c matrix.
size_t at(int32_t layout, int64_t i, int64_t j, int64_t c) {
  return layout == MXFP8_SCALE_LAYOUT_128X4 ? ref_swizzled_index(i, j, round_up(c, 4))
                                            : static_cast<size_t>(i * c + j);
}

struct Span {
  uint64_t begin, bytes;
};
// Two parts inside the bucket share no byte.
bool apart(Span a, Span b) { return !a.bytes || !b.bytes || a.begin + a.bytes <= b.begin || b.begin + b.bytes <= a.begin; }

uint64_t next(uint64_t &seed) {
  seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
  return seed;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  const size_t n = 1 + in.below(4);
  std::vector<Entry> entries(n);
  uint64_t at_byte = 0;
  const auto place = [&](uint64_t bytes, uint64_t align) {
    at_byte = static_cast<uint64_t>(round_up(static_cast<int64_t>(at_byte), static_cast<int64_t>(align)));
    const uint64_t begin = at_byte;
    at_byte += bytes;
    return begin;
  };
  // Honest entries, laid out one after another.
  for (Entry &e : entries) {
    const int kind = static_cast<int>(in.below(6));
    e.format = kind < 2 ? MXFP8_FORMAT_E4M3 : kind < 4 ? MXFP8_FORMAT_E5M2 : MXFP8_FORMAT_NVFP4;
    e.direction = in.below(3) == 0 ? MXFP8_DIRECTION_COLUMNWISE : MXFP8_DIRECTION_ROWWISE;
    const bool row = e.direction == MXFP8_DIRECTION_ROWWISE;
    if (e.nvfp4()) {  // the stored matrix's columns even: K rowwise, M columnwise
      const int64_t m = 1 + in.below(200), k = 1 + in.below(160);
      e.shape = {row ? m : 2 * ((m + 1) / 2), row ? 2 * ((k + 1) / 2) : k};
      e.e4m3_max = in.below(2) ? 448 : 256;
    } else {
      const int64_t rank = 1 + in.below(3);
      for (int64_t d = 0; d + 1 < rank; ++d) e.shape.push_back(1 + in.below(d == 0 ? 150 : 3));
      e.shape.push_back(1 + in.below(160));
    }
    if (row) {
      if (in.below(2)) e.source_layout = MXFP8_SCALE_LAYOUT_128X4;
      if (in.below(2)) e.target_layout = MXFP8_SCALE_LAYOUT_128X4;
    }
    const Expected x = expected(e);
    if (!x.valid) broken("the generator made an entry the contract has no place for");
    e.part.values_bytes = static_cast<uint64_t>(x.values);
    e.part.values_offset = place(e.part.values_bytes, 1 + in.below(64));
    e.part.scales_bytes = static_cast<uint64_t>(x.scales(e.source_layout));
    e.part.scales_offset = place(e.part.scales_bytes, 1 + in.below(64));
    if (e.nvfp4()) {  // per tensor, or (rowwise) per row
      e.globals = row && in.below(3) == 0 ? x.rows : 1;
      e.part.amax_bytes = 4 * static_cast<uint64_t>(e.globals);
      e.part.amax_offset = place(e.part.amax_bytes, 4);
    }
    e.values_size = x.values;
    e.scales_size = x.scales(e.target_layout);
    if (row && e.shape.size() > 1 && !e.nvfp4()) {
      e.scales_shape.assign(e.shape.begin(), e.shape.end() - 1);
      e.scales_shape.push_back(x.c);
    } else {
      e.scales_shape = {x.r, x.c};
    }
  }
  const bool scales_shapes = in.below(3) == 0;
  int64_t bucket_size = static_cast<int64_t>(at_byte) + in.below(32);

  // One field changed, for about half the inputs (the manifest is then not the sender's, and may or may
  // not still be one the contract allows).
  if (in.below(2) == 1) {
    Entry &e = entries[static_cast<size_t>(in.below(static_cast<int64_t>(n)))];
    Entry &other = entries[static_cast<size_t>(in.below(static_cast<int64_t>(n)))];
    const int64_t delta = in.below(81) - 40;
    const bool row = e.direction == MXFP8_DIRECTION_ROWWISE;
    switch (in.below(scales_shapes ? 16 : 15)) {
      case 0: e.part.values_offset += static_cast<uint64_t>(delta); break;
      case 1: e.part.values_bytes += static_cast<uint64_t>(delta); break;
      case 2: e.part.scales_offset += static_cast<uint64_t>(delta); break;
      case 3: e.part.scales_bytes += static_cast<uint64_t>(delta); break;
      case 4: e.shape.back() += delta; break;
      case 5: e.part.scales_offset = UINT64_MAX - static_cast<uint64_t>(in.below(64)); break;
      case 6: e.part.values_offset = other.part.scales_offset + static_cast<uint64_t>(in.below(8)); break;
      case 7: (in.below(2) ? e.values_size : e.scales_size) += delta; break;
      case 8: e.part.amax_offset += static_cast<uint64_t>(in.below(9)); break;  // a multiple of 4, or not
      case 9: {  // one float, one a row, or another count; the buffer as the part says, or not
        const int64_t count = in.below(3) == 0 ? in.below(5) : in.below(2) ? 1 : expected(e).rows;
        e.part.amax_bytes = 4 * static_cast<uint64_t>(count);
        if (in.below(4)) e.globals = count;
        break;
      }
      case 10: e.e4m3_max = static_cast<int32_t>(in.below(2) ? in.below(1024) : in.below(2) ? 448 : 256); break;
      case 11: e.format = e.nvfp4() ? MXFP8_FORMAT_E4M3 : MXFP8_FORMAT_NVFP4; break;
      case 12: bucket_size -= in.below(bucket_size + 1); break;
      case 13:
        if (e.source_layout == MXFP8_SCALE_LAYOUT_COMPACT && e.target_layout == MXFP8_SCALE_LAYOUT_COMPACT)
          e.direction = row ? MXFP8_DIRECTION_COLUMNWISE : MXFP8_DIRECTION_ROWWISE;
        break;
      case 14:
        if (row)
          e.source_layout = e.source_layout == MXFP8_SCALE_LAYOUT_128X4 ? MXFP8_SCALE_LAYOUT_COMPACT
                                                                          : MXFP8_SCALE_LAYOUT_128X4;
        break;
      default: e.scales_shape[static_cast<size_t>(in.below(static_cast<int64_t>(e.scales_shape.size())))] += delta; break;
    }
  }
  if (bucket_size < 0) bucket_size = 0;

  // What the contract allows, judged before the call.
  const auto inside = [&](Span s) {
    return s.begin <= static_cast<uint64_t>(bucket_size) && s.bytes <= static_cast<uint64_t>(bucket_size) - s.begin;
  };
  bool allowed = true;
  std::vector<Span> spans;
  for (const Entry &e : entries) {
    const Expected x = expected(e);
    const mxfp8_bucket_part &p = e.part;
    const bool row = e.direction == MXFP8_DIRECTION_ROWWISE;
    bool ok = x.valid && p.values_bytes == static_cast<uint64_t>(x.values) &&
              p.scales_bytes == static_cast<uint64_t>(x.scales(e.source_layout)) &&
              e.values_size == x.values && e.scales_size == x.scales(e.target_layout);
    if (e.nvfp4())
      ok = ok && p.amax_offset % 4 == 0 &&
           (p.amax_bytes == 4 || (row && x.valid && p.amax_bytes == 4 * static_cast<uint64_t>(x.rows))) &&
           e.globals == static_cast<int64_t>(p.amax_bytes / 4);
    else
      ok = ok && p.amax_bytes == 0 && p.amax_offset == 0;
    if (scales_shapes) {
      int64_t lead = 1;
      bool negative = false;
      for (size_t d = 0; d + 1 < e.scales_shape.size(); ++d) lead *= e.scales_shape[d], negative |= e.scales_shape[d] < 0;
      ok = ok && !negative && e.scales_shape.back() == x.c && lead == x.r;
    }
    for (const Span s : {Span{p.values_offset, p.values_bytes}, Span{p.scales_offset, p.scales_bytes},
                         Span{p.amax_offset, p.amax_bytes}}) {
      ok = ok && inside(s);
      for (const Span other : spans) ok = ok && apart(s, other);
      if (ok) spans.push_back(s);
    }
    allowed = allowed && ok;
  }

  // The bucket: random bytes, each amax part finite floats, exactly its size.
  const uint64_t seed0 = in.byte(), seed1 = in.byte();
  uint64_t seed = 0x9E3779B97F4A7C15ull ^ seed0 ^ seed1 << 8;
  std::unique_ptr<uint8_t[]> bucket(new uint8_t[static_cast<size_t>(bucket_size)]);
  for (int64_t i = 0; i < bucket_size; ++i) bucket[static_cast<size_t>(i)] = static_cast<uint8_t>(next(seed));
  for (const Entry &e : entries)
    if (e.part.amax_offset % 4 == 0 && inside(Span{e.part.amax_offset, e.part.amax_bytes}))
      for (uint64_t b = 0; b < e.part.amax_bytes; b += 4) {
        const float amax = static_cast<float>(next(seed) % 100000) / 7.0f + 0.5f;
        std::memcpy(&bucket[e.part.amax_offset + b], &amax, 4);
      }
  int64_t bucket_shape[1] = {bucket_size};
  const DLTensor bucket_in{bucket.get(), kCpu, 1, kU8, bucket_shape, nullptr, 0};

  // The receiver's buffers, poisoned, each exactly its size.
  std::vector<std::unique_ptr<uint8_t[]>> values(n), scales(n);
  std::vector<std::unique_ptr<float[]>> globals(n);
  std::vector<int64_t> sizes(3 * n);
  std::vector<DLTensor> tensors(3 * n);
  std::vector<DLTensor *> values_out(n), scales_out(n), globals_out(n);
  std::vector<mxfp8_bucket_part> parts(n);
  std::vector<int32_t> ndims(n), formats(n), directions(n), source_layouts(n), target_layouts(n), maxes(n);
  std::vector<const int64_t *> shapes(n), scale_shapes(n);
  std::vector<int32_t> scale_ndims(n);
  bool any_nvfp4 = false;
  for (size_t i = 0; i < n; ++i) {
    Entry &e = entries[i];
    e.values_size = std::max<int64_t>(e.values_size, 0);
    e.scales_size = std::max<int64_t>(e.scales_size, 0);
    e.globals = std::max<int64_t>(e.globals, 0);
    values[i].reset(new uint8_t[static_cast<size_t>(e.values_size)]);
    scales[i].reset(new uint8_t[static_cast<size_t>(e.scales_size)]);
    globals[i].reset(new float[static_cast<size_t>(e.globals)]);
    std::memset(values[i].get(), kPoison, static_cast<size_t>(e.values_size));
    std::memset(scales[i].get(), kPoison, static_cast<size_t>(e.scales_size));
    std::memset(globals[i].get(), kPoison, static_cast<size_t>(e.globals) * sizeof(float));
    sizes[3 * i] = e.values_size, sizes[3 * i + 1] = e.scales_size, sizes[3 * i + 2] = e.globals;
    tensors[3 * i] = DLTensor{values[i].get(), kCpu, 1, kU8, &sizes[3 * i], nullptr, 0};
    tensors[3 * i + 1] = DLTensor{scales[i].get(), kCpu, 1, kU8, &sizes[3 * i + 1], nullptr, 0};
    tensors[3 * i + 2] = DLTensor{globals[i].get(), kCpu, 1, kF32, &sizes[3 * i + 2], nullptr, 0};
    values_out[i] = &tensors[3 * i], scales_out[i] = &tensors[3 * i + 1];
    globals_out[i] = e.nvfp4() ? &tensors[3 * i + 2] : nullptr;
    any_nvfp4 = any_nvfp4 || e.nvfp4();
    parts[i] = e.part;
    ndims[i] = static_cast<int32_t>(e.shape.size());
    shapes[i] = e.shape.data();
    scale_ndims[i] = static_cast<int32_t>(e.scales_shape.size());
    scale_shapes[i] = e.scales_shape.data();
    formats[i] = e.format, directions[i] = e.direction, maxes[i] = e.e4m3_max;
    source_layouts[i] = e.source_layout, target_layouts[i] = e.target_layout;
  }
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;
  desc.source = MXFP8_TRANSFER_FROM_BUCKET;
  desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
  desc.count = n;
  desc.directions = directions.data();
  desc.bucket_in = &bucket_in;
  desc.parts_in = parts.data();
  desc.ndims = ndims.data();
  desc.shapes = shapes.data();
  desc.formats = formats.data();
  desc.source_layouts = source_layouts.data();
  desc.e4m3_maxes = maxes.data();
  if (scales_shapes) desc.scales_ndims = scale_ndims.data(), desc.scales_shapes = scale_shapes.data();
  desc.target_layouts = target_layouts.data();
  desc.values = values_out.data();
  desc.scales = scales_out.data();
  desc.global_scales = any_nvfp4 ? globals_out.data() : nullptr;
  const mxfp8_status status = mxfp8_transfer(&desc, nullptr);

  if (allowed && status != MXFP8_OK) broken("a manifest the contract allows was refused");
  if (!allowed && status == MXFP8_OK) broken("a manifest the contract does not allow was accepted");
  if (status != MXFP8_OK) {
    for (size_t i = 0; i < n; ++i) {
      for (int64_t b = 0; b < entries[i].values_size; ++b)
        if (values[i][static_cast<size_t>(b)] != kPoison) broken("a refused transfer wrote values");
      for (int64_t b = 0; b < entries[i].scales_size; ++b)
        if (scales[i][static_cast<size_t>(b)] != kPoison) broken("a refused transfer wrote scales");
      for (int64_t g = 0; g < entries[i].globals; ++g) {
        uint32_t bits;
        std::memcpy(&bits, &globals[i][static_cast<size_t>(g)], 4);
        if (bits != 0xA5A5A5A5u) broken("a refused transfer wrote a global scale");
      }
    }
    return 0;
  }

  // Accepted, as allowed: each buffer holds what its parts mean.
  for (size_t i = 0; i < n; ++i) {
    const Entry &e = entries[i];
    const Expected x = expected(e);
    const mxfp8_bucket_part &p = e.part;
    if (std::memcmp(values[i].get(), &bucket[p.values_offset], static_cast<size_t>(x.values)) != 0)
      broken("the values are not the bucket's bytes");
    std::vector<uint8_t> want(static_cast<size_t>(e.scales_size), 0);  // 128x4 padding is zero
    for (int64_t r = 0; r < x.r; ++r)
      for (int64_t c = 0; c < x.c; ++c)
        want[at(e.target_layout, r, c, x.c)] = bucket[p.scales_offset + at(e.source_layout, r, c, x.c)];
    if (std::memcmp(scales[i].get(), want.data(), want.size()) != 0) broken("the scales are not the part's S");
    for (int64_t g = 0; e.nvfp4() && g < e.globals; ++g) {
      float amax;
      std::memcpy(&amax, &bucket[p.amax_offset + 4 * static_cast<uint64_t>(g)], 4);
      const float decode = amax / (6.0f * static_cast<float>(e.e4m3_max));
      if (std::memcmp(&globals[i][static_cast<size_t>(g)], &decode, 4) != 0)
        broken("a global scale is not amax / (6 * E4M3_MAX)");
    }
  }
  return 0;
}
