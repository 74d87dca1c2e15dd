// mxfp8_quantize and mxfp8_quantize_into: check the input, the options and (for caller buffers) every
// output, work out each direction's scale geometry, then run the host loop or the CUDA kernel.
#include "core/quantize.hpp"
#include "api/quantize_input.hpp"
#include "api/outputs.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/dlpack_tensor.hpp"
#include "cuda/cuda_runtime.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {
namespace {

const char *const kValueNames[2] = {"rowwise_data", "columnwise_data"};
const char *const kScaleNames[2] = {"rowwise_scale_inv", "columnwise_scale_inv"};

mxfp8_quantize_options read_quantize_options(const mxfp8_quantize_options *given) {
  const mxfp8_quantize_options defaults = MXFP8_QUANTIZE_OPTIONS_INIT;
  const mxfp8_quantize_options o = read_sized_struct(given, defaults, sizeof(mxfp8_quantize_options),
                                                     "mxfp8_quantize_options", "MXFP8_QUANTIZE_OPTIONS_INIT");
  check_enum(o.format, "options.format", {{MXFP8_FORMAT_E4M3, "MXFP8_FORMAT_E4M3"}, {MXFP8_FORMAT_E5M2, "MXFP8_FORMAT_E5M2"}});
  check_enum(o.block, "options.block", {{MXFP8_BLOCK_1X32, "MXFP8_BLOCK_1X32"}, {MXFP8_BLOCK_32X32, "MXFP8_BLOCK_32X32"}});
  check_enum(o.scale_rounding, "options.scale_rounding",
             {{MXFP8_SCALE_ROUNDING_RCEIL, "MXFP8_SCALE_ROUNDING_RCEIL"},
              {MXFP8_SCALE_ROUNDING_FLOOR, "MXFP8_SCALE_ROUNDING_FLOOR"},
              {MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS, "MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS"}});
  check_enum(o.scales_layout, "options.scales_layout",
             {{MXFP8_QUANTIZED_SCALES_COMPACT, "MXFP8_QUANTIZED_SCALES_COMPACT"},
              {MXFP8_QUANTIZED_SCALES_PADDED, "MXFP8_QUANTIZED_SCALES_PADDED"},
              {MXFP8_QUANTIZED_SCALES_SWIZZLED, "MXFP8_QUANTIZED_SCALES_SWIZZLED"}});
  check_enum(o.values_dtype, "options.values_dtype", {{MXFP8_VALUES_FP8, "MXFP8_VALUES_FP8"}, {MXFP8_VALUES_UINT8, "MXFP8_VALUES_UINT8"}});
  check_enum(o.scales_dtype, "options.scales_dtype", {{MXFP8_SCALES_UINT8, "MXFP8_SCALES_UINT8"}, {MXFP8_SCALES_E8M0, "MXFP8_SCALES_E8M0"}});
  check_only(o.flags);
  return o;
}

// The scale output of one direction: its shape (for allocation and checks) and where each scale goes.
struct ScaleGeometry {
  std::vector<int64_t> shape;
  ScaleOut out;
};

ScaleGeometry scale_geometry(const Input &in, int direction, const mxfp8_quantize_options &o) {
  const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  const int64_t M = in.rows, K = in.cols;
  const int64_t R = columnwise ? ceil_div(M, kBlockSize) : M;
  const int64_t C = columnwise ? K : ceil_div(K, kBlockSize);
  ScaleGeometry g{{}, ScaleOut{nullptr, 0, C, 0, 0, 0, 0, 0}};
  if (o.scales_layout == MXFP8_QUANTIZED_SCALES_COMPACT) {
    if (o.block == MXFP8_BLOCK_32X32) {
      g.shape = {ceil_div(M, kBlockSize), ceil_div(K, kBlockSize)};
      g.out.ld = g.shape[1];
      static_assert(kBlockSize == int64_t{1} << 5, "the shift is log2(kBlockSize)");
      (columnwise ? g.out.col_shift : g.out.row_shift) = 5;
    } else if (columnwise) {
      g.shape = {R, C};
    } else {
      g.shape.assign(in.shape.begin(), in.shape.end() - 1);
      g.shape.push_back(C);
    }
  } else {
    // Transformer Engine's allocation; the swizzled form swizzles S (rowwise) or S^T (columnwise).
    const int64_t Rp = checked_round_up(R, columnwise ? kTileCols : kTileRows, "the padded scale row count");
    const int64_t Cp = checked_round_up(C, columnwise ? kTileRows : kTileCols, "the padded scale column count");
    g.shape = {Rp, Cp};
    g.out.padded = 1;
    g.out.ld = Cp;
    if (o.scales_layout == MXFP8_QUANTIZED_SCALES_SWIZZLED) {
      g.out.swizzled = 1;
      g.out.transposed = columnwise;
      g.out.ld = columnwise ? Rp : Cp;
    }
  }
  g.out.bytes = product(g.shape, 0, g.shape.size(), "the scale buffer's size");
  return g;
}

QuantizeJob make_job(const Input &in, const mxfp8_quantize_options &o) {
  QuantizeJob j{};
  j.input = in.tensor->data ? byte_pointer(*in.tensor) : nullptr;
  j.input_type = in.type;
  j.e5m2 = o.format == MXFP8_FORMAT_E5M2;
  j.rounding = static_cast<ScaleRounding>(o.scale_rounding);  // checked by read_quantize_options
  j.block_32x32 = o.block == MXFP8_BLOCK_32X32;
  j.rows = in.rows;
  j.cols = in.cols;
  return j;
}

void set_direction(QuantizeJob &j, int direction, uint8_t *values, ScaleOut scales) {
  if (direction == MXFP8_DIRECTION_ROWWISE) j.row_values = values, j.row_scales = scales;
  else j.col_values = values, j.col_scales = scales;
}

void run(const Input &in, const QuantizeJob &j, void *stream) {
  if (j.rows == 0 || j.cols == 0) return;
  where_memory_lives(in.tensor->device, "input", [&] { quantize_host(j); }, [&] { cuda::quantize(j, stream); });
}

// Which directions the caller asked for: both pointers of a pair, or neither.
template <class T>
std::vector<int> wanted_directions(T *const values[2], T *const scales[2]) {
  std::vector<int> wanted;
  for (int d = 0; d < 2; ++d) {
    if (!values[d] != !scales[d])
      fail(MXFP8_ERROR_INVALID_ARGUMENT, values[d] ? kScaleNames[d] : kValueNames[d], " is NULL but ",
           values[d] ? kValueNames[d] : kScaleNames[d], " is not: pass both outputs of a direction, or neither");
    if (values[d]) wanted.push_back(d);
  }
  if (wanted.empty())
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "every output is NULL: pass rowwise_data and rowwise_scale_inv, "
         "columnwise_data and columnwise_scale_inv, or all four");
  return wanted;
}

// Two output pointers of one call that are the same place would leak the first output written there.
template <class T>
void check_distinct(T *const values[2], T *const scales[2]) {
  T *const all[4] = {values[0], scales[0], values[1], scales[1]};
  const char *const names[4] = {kValueNames[0], kScaleNames[0], kValueNames[1], kScaleNames[1]};
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b)
      if (all[a] && all[a] == all[b])
        fail(MXFP8_ERROR_INVALID_ARGUMENT, names[a], " and ", names[b], " are the same pointer: each output needs its own");
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_quantize(const DLTensor *input, const mxfp8_quantize_options *options,
                                                 DLManagedTensorVersioned **rowwise_data,
                                                 DLManagedTensorVersioned **rowwise_scale_inv,
                                                 DLManagedTensorVersioned **columnwise_data,
                                                 DLManagedTensorVersioned **columnwise_scale_inv) {
  return guarded([&] {
    const Input in = read_input(input);
    const mxfp8_quantize_options o = read_quantize_options(options);
    if (check_only(o.flags))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.flags is MXFP8_CHECK_ONLY, which mxfp8_quantize does not take: it "
           "allocates its outputs (check a call of mxfp8_quantize_into on the buffers you will pass)");
    DLManagedTensorVersioned **const values[2] = {rowwise_data, columnwise_data};
    DLManagedTensorVersioned **const scales[2] = {rowwise_scale_inv, columnwise_scale_inv};
    const std::vector<int> wanted = wanted_directions(values, scales);
    check_distinct(values, scales);
    const Allocation allocation{o.allocator, o.stream};
    QuantizeJob job = make_job(in, o);
    ManagedPtr made[2][2];
    std::vector<Span> spans{span_of(job.input, in.bytes, "input", kNoIndex, false)};
    for (int d : wanted) {
      ScaleGeometry g = scale_geometry(in, d, o);
      made[d][0] = allocate_copy(in.tensor->device, values_dtype(o.format, o.values_dtype), in.shape, allocation);
      made[d][1] = allocate_copy(in.tensor->device, scales_dtype(o.scales_dtype), g.shape, allocation);
      // An allocator may place its tensor at a byte_offset: write where data + byte_offset points.
      uint8_t *v = in.rows * in.cols > 0 ? byte_pointer(made[d][0]->dl_tensor) : nullptr;
      g.out.data = g.out.bytes > 0 ? byte_pointer(made[d][1]->dl_tensor) : nullptr;
      spans.push_back(span_of(v, in.rows * in.cols, kValueNames[d], kNoIndex, true));
      spans.push_back(span_of(g.out.data, g.out.bytes, kScaleNames[d], kNoIndex, true));
      set_direction(job, d, v, g.out);
    }
    check_no_overlap(spans);  // a caller's allocator may hand back memory of the input or of another output
    run(in, job, o.stream);
    for (int d : wanted) {
      *values[d] = made[d][0].release();
      *scales[d] = made[d][1].release();
    }
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_quantize_into(const DLTensor *input, const mxfp8_quantize_options *options,
                                                      DLTensor *rowwise_data, DLTensor *rowwise_scale_inv,
                                                      DLTensor *columnwise_data, DLTensor *columnwise_scale_inv) {
  return guarded([&] {
    const Input in = read_input(input);
    const mxfp8_quantize_options o = read_quantize_options(options);
    DLTensor *const values[2] = {rowwise_data, columnwise_data};
    DLTensor *const scales[2] = {rowwise_scale_inv, columnwise_scale_inv};
    const std::vector<int> wanted = wanted_directions(values, scales);
    check_distinct(values, scales);
    const auto format = static_cast<mxfp8_format>(o.format);
    QuantizeJob job = make_job(in, o);
    std::vector<Span> spans{span_of(job.input, in.bytes, "input", kNoIndex, false)};
    for (int d : wanted) {
      ScaleGeometry g = scale_geometry(in, d, o);
      const DLDevice &device = in.tensor->device;
      uint8_t *v = expect_buffer(*values[d], {kValueNames[d], Holds::Fp8Values, format, &device, "the input is", in.rows * in.cols});
      g.out.data = expect_buffer(*scales[d], {kScaleNames[d], Holds::ScaleBytes, 0, &device, "the input is", g.out.bytes});
      spans.push_back(span_of(v, in.rows * in.cols, kValueNames[d], kNoIndex, true));
      spans.push_back(span_of(g.out.data, g.out.bytes, kScaleNames[d], kNoIndex, true));
      set_direction(job, d, v, g.out);
    }
    check_no_overlap(spans);
    if (!check_only(o.flags)) run(in, job, o.stream);
  });
}
