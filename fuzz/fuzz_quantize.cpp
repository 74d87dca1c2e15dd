// libFuzzer harness over mxfp8_quantize_into on the host. The input bytes choose the shape, the input
// dtype and its bits (any pattern: NaN, Inf, subnormals), the format, rounding, block and directions, and
// sometimes a wrong option or a wrong-sized output. Every buffer is exactly as large as described, so
// ASan reports a write outside it. A failed call must leave every output untouched. When the three scale
// layouts succeed, the oracle checks what must hold between them, from the layouts' definitions: the
// same values; the padded buffer holds the stored scales and zeros elsewhere; the swizzled buffer is that
// matrix (the transpose, columnwise) permuted as ref_swizzled_index says; 32x32 blocks give both
// directions the same values; and a tensor described with the swizzled outputs exports the compact
// scales back.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <mxfp8/mxfp8.h>

#include "fuzz_support.hpp"

namespace {

using fuzz::Reader;
using fuzz::ref_swizzled_index;
using fuzz::round_up;

constexpr uint8_t kPoison = 0xFF;  // never a value byte: no value encodes as 0xFF
// Scales have no such byte (the compressed-tensors rule writes 255 for a block with Inf or NaN), so each
// layout's scales start from a different poison: a byte one layout leaves unwritten then differs from
// the other layouts' (compared below), unless it already holds the right scale.
constexpr uint8_t kScalePoison[3] = {0xA5, 0x5A, 0xC3};

int64_t ceil32(int64_t v) { return (v + 31) / 32; }

DLTensor flat(std::vector<uint8_t> &bytes, int64_t *n) {
  DLTensor t{};
  t.data = bytes.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = n;
  return t;
}

// One direction's outputs for one scale layout.
struct Outputs {
  std::vector<uint8_t> values, scales;
  int64_t values_n = 0, scales_n = 0;
  DLTensor v{}, s{};
};

[[noreturn]] void wrong(const char *what) {
  std::fprintf(stderr, "fuzz_quantize: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  const int ndim = 1 + in.byte() % 3;
  std::vector<int64_t> shape(ndim);
  for (auto &d : shape) d = in.byte() % 10 == 0 ? 0 : 1 + in.below(in.byte() % 2 ? 40 : 200);
  int64_t m = 1;
  for (int i = 0; i + 1 < ndim; ++i) m *= shape[i];
  const int64_t k = shape.back(), n = m * k;
  if (n > (1 << 18)) return 0;
  static const DLDataType kTypes[] = {{kDLBfloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}};
  const DLDataType type = kTypes[in.byte() % 3];
  std::vector<uint8_t> x(static_cast<size_t>(n) * type.bits / 8 + 1);
  uint64_t seed = 0;
  for (int i = 0; i < 8; ++i) seed = seed << 8 | in.byte();
  for (auto &b : x) {  // xorshift from the fuzzer's seed: every bit pattern turns up
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    b = static_cast<uint8_t>(seed);
  }
  DLTensor input{x.data(), {kDLCPU, 0}, ndim, type, shape.data(), nullptr, 0};

  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.format = 1 + in.byte() % 2;
  o.scale_rounding = in.byte() % 3;
  o.block = in.byte() % 3 == 0;
  const int wanted = 1 + in.byte() % 3;  // 1 rowwise, 2 columnwise, 3 both
  const int broken = in.byte() % 16;     // 0: a wrong option; 1: a wrong-sized output; else valid
  if (broken == 0) o.format = 3;

  // Expected geometry, from the layout definitions. S: the stored 1x32 matrix of a direction.
  const int64_t rows[2] = {m, ceil32(m)}, cols[2] = {ceil32(k), k};
  Outputs out[3][2];  // [layout][direction]
  bool ok = true;
  for (int layout = 0; layout < 3; ++layout) {
    o.scales_layout = layout;
    for (int d = 0; d < 2; ++d) {
      if (!(wanted >> d & 1)) continue;
      Outputs &q = out[layout][d];
      q.values_n = n;
      if (layout == MXFP8_QUANTIZED_SCALES_COMPACT)
        q.scales_n = o.block ? ceil32(m) * ceil32(k) : rows[d] * cols[d];
      else
        q.scales_n = d ? round_up(rows[1], 4) * round_up(k, 128) : round_up(m, 128) * round_up(cols[0], 4);
      if (broken == 1 && d == (wanted == 2)) q.scales_n += 1;
      q.values.assign(static_cast<size_t>(q.values_n), kPoison);
      q.scales.assign(static_cast<size_t>(q.scales_n), kScalePoison[layout]);
      q.v = flat(q.values, &q.values_n);
      q.s = flat(q.scales, &q.scales_n);
    }
    Outputs &r = out[layout][0], &c = out[layout][1];
    const mxfp8_status st = mxfp8_quantize_into(&input, &o, wanted & 1 ? &r.v : nullptr, wanted & 1 ? &r.s : nullptr,
                                                wanted & 2 ? &c.v : nullptr, wanted & 2 ? &c.s : nullptr);
    if ((st == MXFP8_OK) != (broken > 1)) wrong("status does not match the validity of the call");
    if (st != MXFP8_OK) {
      for (const Outputs &q : out[layout])
        for (uint8_t b : q.values) if (b != kPoison) wrong("a failed call wrote values");
      for (const Outputs &q : out[layout])
        for (uint8_t b : q.scales) if (b != kScalePoison[layout]) wrong("a failed call wrote scales");
      ok = false;
    }
  }
  if (!ok) return 0;

  for (int d = 0; d < 2; ++d) {
    if (!(wanted >> d & 1)) continue;
    const Outputs &compact = out[0][d], &padded = out[1][d], &swizzled = out[2][d];
    if (compact.values != padded.values || compact.values != swizzled.values) wrong("values differ between layouts");
    for (uint8_t b : compact.values) if (b == kPoison) wrong("a value byte was not written");
    // The stored 1x32 scale (r, c): the compact one, repeated over each 32x32 block's rows or columns.
    auto stored = [&](int64_t r, int64_t c) -> uint8_t {
      if (!o.block) return compact.scales[static_cast<size_t>(r * cols[d] + c)];
      return d ? compact.scales[static_cast<size_t>(r * ceil32(k) + c / 32)]
               : compact.scales[static_cast<size_t>((r / 32) * ceil32(k) + c)];
    };
    const int64_t pr = d ? round_up(rows[1], 4) : round_up(m, 128), pc = d ? round_up(k, 128) : round_up(cols[0], 4);
    for (int64_t r = 0; r < pr; ++r)
      for (int64_t c = 0; c < pc; ++c) {
        const uint8_t want = r < rows[d] && c < cols[d] ? stored(r, c) : 0;
        if (padded.scales[static_cast<size_t>(r * pc + c)] != want) wrong("padded scales differ from the compact ones");
        const size_t at = d ? ref_swizzled_index(c, r, pr) : ref_swizzled_index(r, c, pc);
        if (swizzled.scales[at] != want) wrong("swizzled scales differ from the permute form");
      }
  }
  if (o.block && wanted == 3 && out[0][0].values != out[0][1].values) wrong("32x32 directions differ");

  // The swizzled outputs, described as a tensor, export the compact scales back.
  if (!(wanted & 1) || m == 0 || k == 0) return 0;
  Outputs &z = out[2][0];
  DLManagedTensorVersioned values{}, scales{};
  values.version = scales.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  values.dl_tensor = z.v;
  values.dl_tensor.shape = shape.data();
  values.dl_tensor.ndim = ndim;
  scales.dl_tensor = z.s;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = o.format;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.block = o.block;
  desc.rowwise_data = &values;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = nullptr;
  if (mxfp8_tensor_create(&desc, &t) != MXFP8_OK) wrong("the swizzled outputs do not describe a tensor");
  mxfp8_export_options e = MXFP8_EXPORT_OPTIONS_INIT;
  e.scales_granularity = o.block ? MXFP8_SCALES_PER_32X32 : MXFP8_SCALES_PER_32;
  DLManagedTensorVersioned *exported = nullptr;
  if (mxfp8_export_components(t, &e, nullptr, &exported) != MXFP8_OK) wrong("exporting the swizzled outputs failed");
  if (std::memcmp(exported->dl_tensor.data, out[0][0].scales.data(), out[0][0].scales.size()) != 0)
    wrong("the export of the swizzled outputs differs from the compact scales");
  exported->deleter(exported);
  mxfp8_tensor_release(t);
  return 0;
}
