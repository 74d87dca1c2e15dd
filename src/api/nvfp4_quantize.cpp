// mxfp8_nvfp4_quantize_into (one input, or fused shards under one amax): check the inputs, the options
// and every caller buffer, work out the scale geometry (16-value blocks), then run the host loop or the
// CUDA kernels.
#include <cstdint>
#include <string>
#include <vector>

#include "api/quantize_input.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "core/nvfp4_numerics.hpp"
#include "core/nvfp4_quantize.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"
#include "cuda/cuda_runtime.hpp"

namespace mxfp8 {
namespace {

mxfp8_nvfp4_quantize_options read_options(const mxfp8_nvfp4_quantize_options *given) {
  const mxfp8_nvfp4_quantize_options defaults = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  const mxfp8_nvfp4_quantize_options o =
      read_sized_struct(given, defaults, sizeof(mxfp8_nvfp4_quantize_options), "mxfp8_nvfp4_quantize_options",
                        "MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT");
  check_enum(o.amax_scope, "options.amax_scope",
             {{MXFP8_NVFP4_AMAX_PER_TENSOR, "MXFP8_NVFP4_AMAX_PER_TENSOR"}, {MXFP8_NVFP4_AMAX_PER_ROW, "MXFP8_NVFP4_AMAX_PER_ROW"}});
  check_enum(o.amax_mode, "options.amax_mode",
             {{MXFP8_NVFP4_AMAX_COMPUTE, "MXFP8_NVFP4_AMAX_COMPUTE"}, {MXFP8_NVFP4_AMAX_GIVEN, "MXFP8_NVFP4_AMAX_GIVEN"}});
  check_enum(o.four_over_six, "options.four_over_six",
             {{MXFP8_NVFP4_4OVER6_OFF, "MXFP8_NVFP4_4OVER6_OFF"},
              {MXFP8_NVFP4_4OVER6_MAE, "MXFP8_NVFP4_4OVER6_MAE"},
              {MXFP8_NVFP4_4OVER6_MSE, "MXFP8_NVFP4_4OVER6_MSE"}});
  check_enum(o.scales_layout, "options.scales_layout",
             {{MXFP8_QUANTIZED_SCALES_COMPACT, "MXFP8_QUANTIZED_SCALES_COMPACT"},
              {MXFP8_QUANTIZED_SCALES_PADDED, "MXFP8_QUANTIZED_SCALES_PADDED"},
              {MXFP8_QUANTIZED_SCALES_SWIZZLED, "MXFP8_QUANTIZED_SCALES_SWIZZLED"}});
  check_enum(o.direction, "options.direction",
             {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
  if (o.e4m3_max != 448 && o.e4m3_max != 256)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.e4m3_max is ", o.e4m3_max, ", expected 448 or 256");
  // Transformer Engine allows 256 only with 4over6 ("Non-4over6 NVFP4 quantization requires E4M3 max 448").
  if (o.e4m3_max == 256 && o.four_over_six == MXFP8_NVFP4_4OVER6_OFF)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.e4m3_max is 256 but options.four_over_six is MXFP8_NVFP4_4OVER6_OFF: "
         "E4M3_MAX 256 exists only for 4over6 (use 448, or turn 4over6 on)");
  check_only(o.flags);
  // Transformer Engine's row_scaled_nvfp4 scales rows of the rowwise data only; its columnwise amax is one
  // per tensor, and an NVFP4 mxfp8_tensor_desc describes nothing else.
  if (o.amax_scope == MXFP8_NVFP4_AMAX_PER_ROW && o.direction == MXFP8_DIRECTION_COLUMNWISE)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.amax_scope is MXFP8_NVFP4_AMAX_PER_ROW with options.direction "
         "MXFP8_DIRECTION_COLUMNWISE: Transformer Engine keeps one columnwise amax per tensor (row_scaled_nvfp4 is "
         "rowwise only), so per-row amax is rowwise only");
  return o;
}

// The (lines, ceil(length/16)) scale matrix in the layout asked for, as mxfp8_quantize's rowwise geometry
// with 16-value blocks: compact, TE's padded (roundup(lines, 128), roundup(C, 4)), or that swizzled.
// Columnwise, TE quantizes the transpose rowwise, so its scales take the same geometry with M and K
// swapped (nvfp4_tensor.py: (roundup(K, 128), roundup(ceil(M/16), 4))).
ScaleOut scale_geometry(int64_t M, int64_t K, int32_t layout) {
  const int64_t C = ceil_div(K, int64_t{kNvfp4BlockSize});
  ScaleOut out{nullptr, 0, C, 0, 0, 0, 0, 0};
  int64_t rows = M, cols = C;
  if (layout != MXFP8_QUANTIZED_SCALES_COMPACT) {
    rows = checked_round_up(M, kTileRows, "the padded scale row count");
    cols = checked_round_up(C, kTileCols, "the padded scale column count");
    out.padded = 1;
    out.ld = cols;
    out.swizzled = layout == MXFP8_QUANTIZED_SCALES_SWIZZLED;
  }
  out.bytes = checked_mul(rows, cols, "the scale buffer's size");
  return out;
}

int32_t selection_of(const mxfp8_nvfp4_quantize_options &o) {
  switch (o.four_over_six) {
    case MXFP8_NVFP4_4OVER6_MAE: return kNvfp4FourOverSixMae;
    case MXFP8_NVFP4_4OVER6_MSE: return kNvfp4FourOverSixMse;
    default: return kNvfp4Default;
  }
}

// Each shard's values and scales, the amax, and that nothing written overlaps anything else, given the
// inputs already read. Fills `shards`.
float *check_outputs(const std::vector<Input> &in, const mxfp8_nvfp4_quantize_options &o, DLTensor *const *values,
                     DLTensor *const *scales, DLTensor *amax, std::vector<Nvfp4Shard> &shards) {
  const DLDevice &device = in[0].tensor->device;
  const bool columnwise = o.direction == MXFP8_DIRECTION_COLUMNWISE;
  std::vector<Span> spans;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string vname = cat("values[", i, "]"), sname = cat("scales[", i, "]");
    if (!values[i]) fail(MXFP8_ERROR_INVALID_ARGUMENT, vname, " is NULL");
    if (!scales[i]) fail(MXFP8_ERROR_INVALID_ARGUMENT, sname, " is NULL");
    const int64_t lines = columnwise ? in[i].cols : in[i].rows, length = columnwise ? in[i].rows : in[i].cols;
    // Transformer Engine stores a row of C values in C/2 bytes; an odd row cannot be stored or described
    // (an NVFP4 mxfp8_tensor_desc refuses it), so it is refused here rather than padded.
    if (length % 2 != 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "inputs[", i, "]: ", columnwise ? "M" : "K", " = ", length,
           " is odd: NVFP4 stores two values per byte and every ",
           columnwise ? "columnwise (K, M)" : "rowwise (M, K)", " row must fill whole bytes, as Transformer Engine "
           "stores it");
    const int64_t value_bytes = checked_mul(lines, length / 2, "the values' size");
    Nvfp4Shard s{in[i].tensor->data ? byte_pointer(*in[i].tensor) : nullptr, in[i].rows, nullptr,
                 scale_geometry(lines, length, o.scales_layout)};
    s.values = expect_buffer(*values[i], {vname.c_str(), Holds::Bytes, 0, &device, "inputs[0] is", value_bytes});
    s.scales.data =
        expect_buffer(*scales[i], {sname.c_str(), Holds::Fp8Values, MXFP8_FORMAT_E4M3, &device, "inputs[0] is", s.scales.bytes});
    spans.push_back(span_of(s.input, in[i].bytes, "inputs", i, false));
    spans.push_back(span_of(s.values, value_bytes, "values", i, true));
    spans.push_back(span_of(s.scales.data, s.scales.bytes, "scales", i, true));
    shards.push_back(s);
  }
  if (!amax) fail(MXFP8_ERROR_INVALID_ARGUMENT, "amax is NULL");
  const bool per_row = o.amax_scope == MXFP8_NVFP4_AMAX_PER_ROW;
  const int64_t amax_count = per_row ? (columnwise ? in[0].cols : in[0].rows) : 1;
  if (!is_dtype(amax->dtype, kDLFloat, 32))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "amax: dtype ", format_dtype(amax->dtype), " is not float32");
  float *a = reinterpret_cast<float *>(
      expect_buffer(*amax, {"amax", Holds::CheckedByCaller, 0, &device, "inputs[0] is", amax_count}));
  if (a && reinterpret_cast<uintptr_t>(a) % alignof(float) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "amax: the data (data + byte_offset) is not aligned to its 4-byte elements");
  spans.push_back(span_of(a, amax_count * 4, "amax", kNoIndex, o.amax_mode == MXFP8_NVFP4_AMAX_COMPUTE));
  check_no_overlap(spans);
  return a;
}

void run(const std::vector<Input> &in, const mxfp8_nvfp4_quantize_options &o, const std::vector<Nvfp4Shard> &shards,
         float *amax) {
  Nvfp4QuantizeJob j{};
  j.input_type = in[0].type;
  j.cols = in[0].cols;
  j.shards = shards.data();
  j.count = static_cast<int32_t>(shards.size());
  j.columnwise = o.direction == MXFP8_DIRECTION_COLUMNWISE;
  j.per_row_amax = o.amax_scope == MXFP8_NVFP4_AMAX_PER_ROW;
  j.amax_given = o.amax_mode == MXFP8_NVFP4_AMAX_GIVEN;
  j.selection = selection_of(o);
  j.e4m3_max = static_cast<float>(o.e4m3_max);
  j.amax = amax;
  // Per-row amaxes of an empty tensor: nothing to compute or write.
  if (j.per_row_amax && !amax) return;
  where_memory_lives(in[0].tensor->device, "inputs[0]", [&] { nvfp4_quantize_host(j); },
                     [&] { cuda::nvfp4_quantize(j, o.stream); });
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_nvfp4_quantize_into(const DLTensor *const *inputs, size_t count,
                                                            const mxfp8_nvfp4_quantize_options *options,
                                                            DLTensor *const *values, DLTensor *const *scales,
                                                            DLTensor *amax) {
  return guarded([&] {
    if (!inputs) fail(MXFP8_ERROR_INVALID_ARGUMENT, "inputs is NULL");
    if (count == 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "count is ", count, ": quantization needs at least one input");
    if (!values) fail(MXFP8_ERROR_INVALID_ARGUMENT, "values is NULL");
    if (!scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, "scales is NULL");
    if (count > static_cast<size_t>(INT32_MAX))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "count is ", count, ": at most ", INT32_MAX, " inputs");
    std::vector<Input> in;
    for (size_t i = 0; i < count; ++i) {
      const std::string name = cat("inputs[", i, "]");
      in.push_back(read_input(inputs[i], name.c_str()));
      if (i == 0) continue;
      if (in[i].type != in[0].type)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(inputs[i]->dtype), " differs from inputs[0]'s ",
             format_dtype(inputs[0]->dtype), ": fused shards share one dtype");
      if (in[i].cols != in[0].cols)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": K = ", in[i].cols, " differs from inputs[0]'s K = ", in[0].cols,
             ": fused shards share their last dimension");
      if (!same_device(inputs[i]->device, inputs[0]->device))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, " is on ", format_device(inputs[i]->device), " but inputs[0] is on ",
             format_device(inputs[0]->device));
    }
    const mxfp8_nvfp4_quantize_options o = read_options(options);
    // One input may take per-row amaxes; fused shards take the one amax they share.
    if (count > 1 && o.amax_scope != MXFP8_NVFP4_AMAX_PER_TENSOR)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.amax_scope is MXFP8_NVFP4_AMAX_PER_ROW with count ", count,
           ": fused shards share one per-tensor amax (quantize per-row inputs one at a time, count 1)");
    std::vector<Nvfp4Shard> shards;
    float *a = check_outputs(in, o, values, scales, amax, shards);
    if (!check_only(o.flags)) run(in, o, shards, a);
  });
}
