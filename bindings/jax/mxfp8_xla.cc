// libmxfp8_xla: the C API as XLA FFI handlers, so that a JAX program calls mxfp8 inside jax.jit
// (bindings/python/mxfp8/jax.py registers them with jax.ffi and wraps them in functions of jax.Arrays).
//
// Every handler only translates: XLA's buffers become DLTensor views (row-major, on the handler's
// device), its attributes become option fields, the work goes on XLA's stream, and a failed status
// becomes an XLA error carrying the library's own message. Each operation has two symbols,
// mxfp8_xla_<op>_host (XLA's CPU platform) and mxfp8_xla_<op>_cuda (its CUDA platform: XLA's stream and
// device ordinal); the CUDA one needs no CUDA header, since a stream is an opaque pointer to the C API.
#include <mxfp8/mxfp8.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "borrowed_tensor.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Where a handler runs: the device of every buffer, and the stream (NULL on the host). check_only: a
// trace-time check (mxfp8_xla_check), whose buffers are shapes at made-up addresses: the library checks
// them and nothing runs.
struct Place {
  DLDevice device;
  void *stream;
  bool check_only = false;
};

// A failed status as an XLA error: the status name and the library's message, which JAX raises as
// XlaRuntimeError (ValueError-like refusals are kInvalidArgument).
ffi::Error check(mxfp8_status status) {
  if (status == MXFP8_OK) return ffi::Error::Success();
  const std::string message = std::string("mxfp8: ") + mxfp8_status_string(status) + ": " + mxfp8_last_error();
  switch (status) {
    case MXFP8_ERROR_INVALID_ARGUMENT:
    case MXFP8_ERROR_MISSING_DATA: return ffi::Error(ffi::ErrorCode::kInvalidArgument, message);
    case MXFP8_ERROR_UNSUPPORTED: return ffi::Error(ffi::ErrorCode::kUnimplemented, message);
    case MXFP8_ERROR_OUT_OF_MEMORY: return ffi::Error(ffi::ErrorCode::kResourceExhausted, message);
    default: return ffi::Error(ffi::ErrorCode::kInternal, message);
  }
}

// The element types the library takes, each with its DLPack type: the one list the handlers map buffers
// through and name in their refusal.
struct TakenType {
  ffi::DataType xla;
  DLDataType dl;
};
constexpr TakenType kTakenTypes[] = {
    {ffi::DataType::U8, {kDLUInt, 8, 1}},           {ffi::DataType::S32, {kDLInt, 32, 1}},
    {ffi::DataType::F32, {kDLFloat, 32, 1}},        {ffi::DataType::F16, {kDLFloat, 16, 1}},
    {ffi::DataType::BF16, {kDLBfloat, 16, 1}},      {ffi::DataType::F8E4M3FN, {kDLFloat8_e4m3fn, 8, 1}},
    {ffi::DataType::F8E5M2, {kDLFloat8_e5m2, 8, 1}}, {ffi::DataType::F8E8M0FNU, {kDLFloat8_e8m0fnu, 8, 1}},
};

// JAX's name of an XLA element type (NumPy's, or ml_dtypes'), for messages; XLA's number for one this
// list does not know (a type newer than these handlers).
std::string jax_type_name(ffi::DataType type) {
  switch (type) {
    case ffi::DataType::PRED: return "bool";
    case ffi::DataType::S1: return "int1";
    case ffi::DataType::S2: return "int2";
    case ffi::DataType::S4: return "int4";
    case ffi::DataType::S8: return "int8";
    case ffi::DataType::S16: return "int16";
    case ffi::DataType::S32: return "int32";
    case ffi::DataType::S64: return "int64";
    case ffi::DataType::U1: return "uint1";
    case ffi::DataType::U2: return "uint2";
    case ffi::DataType::U4: return "uint4";
    case ffi::DataType::U8: return "uint8";
    case ffi::DataType::U16: return "uint16";
    case ffi::DataType::U32: return "uint32";
    case ffi::DataType::U64: return "uint64";
    case ffi::DataType::F16: return "float16";
    case ffi::DataType::F32: return "float32";
    case ffi::DataType::F64: return "float64";
    case ffi::DataType::BF16: return "bfloat16";
    case ffi::DataType::C64: return "complex64";
    case ffi::DataType::C128: return "complex128";
    case ffi::DataType::TOKEN: return "token";
    case ffi::DataType::F8E5M2: return "float8_e5m2";
    case ffi::DataType::F8E4M3: return "float8_e4m3";
    case ffi::DataType::F8E4M3FN: return "float8_e4m3fn";
    case ffi::DataType::F8E4M3B11FNUZ: return "float8_e4m3b11fnuz";
    case ffi::DataType::F8E5M2FNUZ: return "float8_e5m2fnuz";
    case ffi::DataType::F8E4M3FNUZ: return "float8_e4m3fnuz";
    case ffi::DataType::F8E3M4: return "float8_e3m4";
    case ffi::DataType::F4E2M1FN: return "float4_e2m1fn";
    case ffi::DataType::F8E8M0FNU: return "float8_e8m0fnu";
    default: return "XLA element type " + std::to_string(static_cast<int>(type));
  }
}

// The DLPack type of an XLA element type; false for one the library never takes.
bool dl_dtype(ffi::DataType type, DLDataType *out) {
  for (const TakenType &t : kTakenTypes)
    if (t.xla == type) {
      *out = t.dl;
      return true;
    }
  return false;
}

// The one refusal of every handler for a buffer of a type the library never takes: the argument, its
// type by JAX's name, and the types taken.
ffi::Error unsupported_type(const char *name, ffi::DataType type) {
  std::string message = std::string("mxfp8: ") + name + " is " + jax_type_name(type) +
                        ", which the library never takes (its types:";
  for (const TakenType &t : kTakenTypes) message += (&t == kTakenTypes ? " " : ", ") + jax_type_name(t.xla);
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, message + ")");
}

// An XLA buffer seen as a DLTensor: XLA's buffers are dense and row-major, so strides stay NULL. `name`
// is the argument's name in messages. A handler checks every view it makes with usable(...) before any
// reaches the library: a buffer of an element type with no DLPack counterpart has no dtype to pass.
class View {
 public:
  View(const ffi::AnyBuffer &buffer, const Place &place, const char *name)
      : View(buffer.dimensions(), buffer.element_type(), buffer.untyped_data(), place, name) {}
  View(ffi::Span<const int64_t> dims, ffi::DataType type, void *data, const Place &place, const char *name)
      : name_(name), type_(type) {
    shape_.assign(dims.begin(), dims.end());
    known_ = dl_dtype(type_, &tensor_.dtype);
    tensor_.data = data;
    tensor_.device = place.device;
    tensor_.ndim = static_cast<int32_t>(shape_.size());
    tensor_.shape = shape_.data();
    tensor_.strides = nullptr;
    tensor_.byte_offset = 0;
  }
  View(const View &) = delete;
  View &operator=(const View &) = delete;

  // An error naming the argument and its type when the element type is none the library takes.
  ffi::Error usable() const { return known_ ? ffi::Error::Success() : unsupported_type(name_, type_); }
  DLTensor *get() { return &tensor_; }
  const DLTensor &tensor() const { return tensor_; }

 private:
  const char *name_;
  ffi::DataType type_;
  std::vector<int64_t> shape_;
  DLTensor tensor_{};
  bool known_ = false;
};

// The first of `views` whose element type the library does not take, as an error; else success.
template <class... Views>
ffi::Error usable(const Views &...views) {
  ffi::Error result = ffi::Error::Success();
  ((result.success() ? (void)(result = views.usable()) : (void)0), ...);
  return result;
}

// A buffer lent to a descriptor for one call: the library only borrows it.
using mxfp8_adapter::borrowed;

// An mxfp8_tensor or mxfp8_grouped_tensor for the length of one handler call.
template <class Handle, void (*Release)(Handle *)>
struct Owned {
  Handle *handle = nullptr;
  ~Owned() { Release(handle); }
};
using TensorHandle = Owned<mxfp8_tensor, mxfp8_tensor_release>;
using GroupedHandle = Owned<mxfp8_grouped_tensor, mxfp8_grouped_tensor_release>;

// One direction of an MXFP8 tensor as a producer stores it (its values' shape is the logical shape).
ffi::Error describe(View &data, View &scales, int32_t format, int32_t swizzled, int32_t direction,
                    DLManagedTensorVersioned (&lent)[2], TensorHandle &out) {
  lent[0] = borrowed(data.tensor());
  lent[1] = borrowed(scales.tensor());
  mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
  d.format = format;
  d.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (direction == MXFP8_DIRECTION_COLUMNWISE) {
    d.columnwise_data = &lent[0];
    d.columnwise_scale_inv = &lent[1];
  } else {
    d.rowwise_data = &lent[0];
    d.rowwise_scale_inv = &lent[1];
  }
  return check(mxfp8_tensor_create(&d, &out.handle));
}

// ---- the operations, each once for both platforms -------------------------------------------------

// The scale transposes have no options, so no MXFP8_CHECK_ONLY: checked only, each runs on the host on a
// one-tile stand-in of its operands' element types (the library's dtype checks), then the swizzled side's
// size is compared with mxfp8_layout_bytes, the size the library requires of it (in elements: every type
// it takes is a byte).
using ScaleMove = mxfp8_status (*)(const DLTensor *, DLTensor *, void *);

ffi::Error scale_move_views(const Place &place, View &in, View &out, bool to_swizzled, ScaleMove move) {
  if (auto e = usable(in, out); e.failure()) return e;
  if (!place.check_only) return check(move(in.get(), out.get(), place.stream));
  const DLTensor &compact = (to_swizzled ? in : out).tensor(), &swizzled = (to_swizzled ? out : in).tensor();
  int64_t one_shape[2] = {1, 1}, tile_shape[1] = {512};
  alignas(8) uint8_t one[8] = {127}, tile[512 * 8] = {};  // room for the widest type a view may carry
  DLTensor small{one, {kDLCPU, 0}, 2, compact.dtype, one_shape, nullptr, 0};
  DLTensor whole{tile, {kDLCPU, 0}, 1, swizzled.dtype, tile_shape, nullptr, 0};
  if (auto e = check(to_swizzled ? move(&small, &whole, nullptr) : move(&whole, &small, nullptr)); e.failure()) return e;
  int64_t rows = 1, cols = compact.ndim > 0 ? compact.shape[compact.ndim - 1] : 1, have = 1, need = 0;
  bool overflow = false;  // shapes a tracer was given, not arrays that exist: their products may not fit
  for (int32_t i = 0; i + 1 < compact.ndim; ++i) overflow |= __builtin_mul_overflow(rows, compact.shape[i], &rows);
  for (int32_t i = 0; i < swizzled.ndim; ++i) overflow |= __builtin_mul_overflow(have, swizzled.shape[i], &have);
  if (overflow) return ffi::Error::InvalidArgument("mxfp8: a scale matrix of more than 2^63 elements");
  if (auto e = check(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_128X4, MXFP8_DIRECTION_ROWWISE, rows, cols, &need)); e.failure())
    return e;
  if (have != need)
    return ffi::Error::InvalidArgument("mxfp8: the 128x4 layout of a " + std::to_string(rows) + " x " +
                                       std::to_string(cols) + " scale matrix is " + std::to_string(need) +
                                       " bytes, but " + (to_swizzled ? "the result" : "swizzled") + " holds " +
                                       std::to_string(have));
  return ffi::Error::Success();
}

ffi::Error unswizzle_scales(Place place, ffi::AnyBuffer swizzled, ffi::Result<ffi::AnyBuffer> compact) {
  View in(swizzled, place, "swizzled"), out(*compact, place, "the result");
  return scale_move_views(place, in, out, false, mxfp8_unswizzle_scales);
}

ffi::Error swizzle_scales(Place place, ffi::AnyBuffer compact, ffi::Result<ffi::AnyBuffer> swizzled) {
  View in(compact, place, "compact"), out(*swizzled, place, "the result");
  return scale_move_views(place, in, out, true, mxfp8_swizzle_scales);
}

// The scales (and, with two results, the values) of one tensor or of num_experts grouped experts of
// equal rows in the layout `target` (mxfp8_convert, mxfp8_grouped_convert).
// The attributes of a convert, in the binding's order.
struct ConvertAttributes {
  int32_t format, swizzled, direction, target, scale_fixup, num_experts, grouped_scales;
  int64_t pad_rows_to, pad_cols_to;
  int32_t pad_scale;
};

ffi::Error convert_views(const Place &place, View &d, View &s, View *values, View &out, const ConvertAttributes &a) {
  if (auto e = usable(d, s, out); e.failure()) return e;
  if (values)
    if (auto e = usable(*values); e.failure()) return e;
  DLTensor *values_tensor = values ? values->get() : nullptr;
  const int32_t format = a.format, swizzled = a.swizzled, direction = a.direction, num_experts = a.num_experts;
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = a.target;
  o.direction = direction;
  o.scale_fixup = a.scale_fixup;
  o.pad_rows_to = a.pad_rows_to;
  o.pad_cols_to = a.pad_cols_to;
  o.pad_scale = a.pad_scale;
  o.stream = place.stream;
  o.flags = place.check_only ? MXFP8_CHECK_ONLY : 0u;
  if (num_experts == 0) {
    DLManagedTensorVersioned lent[2];
    TensorHandle t;
    if (auto e = describe(d, s, format, swizzled, direction, lent, t); e.failure()) return e;
    return check(mxfp8_convert(t.handle, &o, values_tensor, out.get()));
  }
  const DLTensor &dt = d.tensor();
  int64_t rows = 1;
  for (int32_t i = 0; i + 1 < dt.ndim; ++i) rows *= dt.shape[i];
  DLManagedTensorVersioned lent[2] = {borrowed(dt), borrowed(s.tensor())};
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.format = format;
  g.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  g.scales = a.grouped_scales;
  g.num_experts = num_experts;
  g.cols = dt.ndim > 0 ? dt.shape[dt.ndim - 1] : 0;
  g.uniform_rows = num_experts > 0 ? rows / num_experts : 0;
  g.data = &lent[0];
  g.scale_inv = &lent[1];
  GroupedHandle t;
  if (auto e = check(mxfp8_grouped_tensor_create(&g, &t.handle)); e.failure()) return e;
  return check(mxfp8_grouped_convert(t.handle, &o, values_tensor, out.get()));
}

ffi::Error convert(Place place, ffi::AnyBuffer data, ffi::AnyBuffer scale_inv, ffi::RemainingRets results,
                   int32_t format, int32_t swizzled, int32_t direction, int32_t target, int32_t scale_fixup,
                   int32_t num_experts, int32_t grouped_scales, int64_t pad_rows_to, int64_t pad_cols_to,
                   int32_t pad_scale) {
  if (results.size() != 1 && results.size() != 2)
    return ffi::Error::InvalidArgument("mxfp8: convert returns the scales, or the values and the scales");
  auto scales_out = results.get<ffi::AnyBuffer>(results.size() - 1);
  if (scales_out.has_error()) return scales_out.error();
  View d(data, place, "data"), s(scale_inv, place, "scale_inv"), out(**scales_out, place, "the scales result");
  std::optional<View> values;
  if (results.size() == 2) {
    auto v = results.get<ffi::AnyBuffer>(0);
    if (v.has_error()) return v.error();
    values.emplace(**v, place, "the values result");
  }
  return convert_views(place, d, s, values ? &*values : nullptr, out,
                       {format, swizzled, direction, target, scale_fixup, num_experts, grouped_scales, pad_rows_to,
                        pad_cols_to, pad_scale});
}

// One direction of `input` quantized into XLA's two results (mxfp8_quantize_into).
ffi::Error quantize_views(const Place &place, View &in, View &v, View &s, int32_t format, int32_t scale_rounding,
                          int32_t scales_layout, int32_t direction) {
  if (auto e = usable(in, v, s); e.failure()) return e;
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.format = format;
  o.scale_rounding = scale_rounding;
  o.scales_layout = scales_layout;
  o.stream = place.stream;
  o.flags = place.check_only ? MXFP8_CHECK_ONLY : 0u;
  const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  return check(mxfp8_quantize_into(in.get(), &o, columnwise ? nullptr : v.get(), columnwise ? nullptr : s.get(),
                                   columnwise ? v.get() : nullptr, columnwise ? s.get() : nullptr));
}

ffi::Error quantize(Place place, ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> values,
                    ffi::Result<ffi::AnyBuffer> scales, int32_t format, int32_t scale_rounding,
                    int32_t scales_layout, int32_t direction) {
  View in(input, place, "x"), v(*values, place, "the values result"), s(*scales, place, "the scales result");
  return quantize_views(place, in, v, s, format, scale_rounding, scales_layout, direction);
}

// One direction of a stored MXFP8 tensor decoded into float32 or bfloat16 (mxfp8_dequantize).
// Checked only: the tensor (mxfp8_tensor_create touches no memory); the result's shape and type are
// the caller's own (mxfp8.jax makes them from the data).
ffi::Error dequantize_views(const Place &place, View &d, View &s, View &out, int32_t format, int32_t swizzled,
                            int32_t direction) {
  if (auto e = usable(d, s, out); e.failure()) return e;
  DLManagedTensorVersioned lent[2];
  TensorHandle t;
  if (auto e = describe(d, s, format, swizzled, direction, lent, t); e.failure() || place.check_only) return e;
  mxfp8_dequantize_options o = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  o.direction = direction;
  o.stream = place.stream;
  return check(mxfp8_dequantize(t.handle, &o, out.get()));
}

ffi::Error dequantize(Place place, ffi::AnyBuffer data, ffi::AnyBuffer scale_inv, ffi::Result<ffi::AnyBuffer> output,
                      int32_t format, int32_t swizzled, int32_t direction) {
  View d(data, place, "data"), s(scale_inv, place, "scale_inv"), out(*output, place, "the result");
  return dequantize_views(place, d, s, out, format, swizzled, direction);
}

// One direction of `input` quantized to NVFP4 (mxfp8_nvfp4_quantize_into), the amax computed into the
// third result: packed values, E4M3 block scales, float32 amax (one, or one per row).
ffi::Error nvfp4_quantize_views(const Place &place, View &in, View &v, View &s, View &a, int32_t amax_scope,
                                int32_t four_over_six, int32_t e4m3_max, int32_t scales_layout, int32_t direction) {
  if (auto e = usable(in, v, s, a); e.failure()) return e;
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.amax_scope = amax_scope;
  o.four_over_six = four_over_six;
  o.e4m3_max = e4m3_max;
  o.scales_layout = scales_layout;
  o.direction = direction;
  o.stream = place.stream;
  o.flags = place.check_only ? MXFP8_CHECK_ONLY : 0u;
  const DLTensor *inputs[1] = {in.get()};
  DLTensor *value_list[1] = {v.get()}, *scale_list[1] = {s.get()};
  return check(mxfp8_nvfp4_quantize_into(inputs, 1, &o, value_list, scale_list, a.get()));
}

ffi::Error nvfp4_quantize(Place place, ffi::AnyBuffer input, ffi::Result<ffi::AnyBuffer> values,
                          ffi::Result<ffi::AnyBuffer> scales, ffi::Result<ffi::AnyBuffer> amax, int32_t amax_scope,
                          int32_t four_over_six, int32_t e4m3_max, int32_t scales_layout, int32_t direction) {
  View in(input, place, "x"), v(*values, place, "the values result"), s(*scales, place, "the scales result"),
      a(*amax, place, "the amax result");
  return nvfp4_quantize_views(place, in, v, s, a, amax_scope, four_over_six, e4m3_max, scales_layout, direction);
}

// One direction of a stored NVFP4 tensor (its logical shape taken from the packed values, as
// mxfp8_tensor_create does with ndim 0) decoded into float32 or bfloat16 (mxfp8_dequantize).
ffi::Error nvfp4_dequantize_views(const Place &place, View &d, View &s, View &a, View &out, int32_t swizzled,
                                  int32_t e4m3_max, int32_t direction) {
  if (auto e = usable(d, s, a, out); e.failure()) return e;
  DLManagedTensorVersioned lent[3] = {borrowed(d.tensor()), borrowed(s.tensor()), borrowed(a.tensor())};
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = MXFP8_FORMAT_NVFP4;
  desc.block = MXFP8_BLOCK_1X16;
  desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  desc.e4m3_max = e4m3_max;
  const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  (columnwise ? desc.columnwise_data : desc.rowwise_data) = &lent[0];
  (columnwise ? desc.columnwise_scale_inv : desc.rowwise_scale_inv) = &lent[1];
  (columnwise ? desc.columnwise_amax : desc.rowwise_amax) = &lent[2];
  TensorHandle t;
  if (auto e = check(mxfp8_tensor_create(&desc, &t.handle)); e.failure() || place.check_only) return e;
  mxfp8_dequantize_options o = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  o.direction = direction;
  o.stream = place.stream;
  return check(mxfp8_dequantize(t.handle, &o, out.get()));
}

ffi::Error nvfp4_dequantize(Place place, ffi::AnyBuffer data, ffi::AnyBuffer scale_inv, ffi::AnyBuffer amax,
                            ffi::Result<ffi::AnyBuffer> output, int32_t swizzled, int32_t e4m3_max, int32_t direction) {
  View d(data, place, "data"), s(scale_inv, place, "scale_inv"), a(amax, place, "amax"), out(*output, place, "the result");
  return nvfp4_dequantize_views(place, d, s, a, out, swizzled, e4m3_max, direction);
}

// ---- trace-time checks (mxfp8_xla_check) -------------------------------------------------------------

// An attribute list as mxfp8.jax passes it to ffi_call: names and values.
struct Attributes {
  const char *const *names;
  const int64_t *values;
  int32_t count;

  // The value of `name`; `missing` set when there is none.
  int64_t operator()(const char *name, bool &missing) const {
    for (int32_t i = 0; i < count; ++i)
      if (std::strcmp(names[i], name) == 0) return values[i];
    missing = true;
    return 0;
  }
};

}  // namespace

// One operand of a call as a tracer knows it: its shape and JAX's name of its element type. C layout:
// mxfp8.jax fills it through ctypes.
struct mxfp8_xla_operand {
  int32_t ndim;
  const int64_t *shape;
  const char *dtype;
};

namespace {

// A check's operands as Views, each at an address of its own that no memory backs, one after the other
// with a terabyte of room at least: the library's overlap checks see distinct buffers however large they
// are (a padded result past a terabyte was "scales and values overlap"); only addresses and sizes are read.
class CheckedOperands {
 public:
  CheckedOperands(const mxfp8_xla_operand *operands, int32_t count, const Place &place, const char *const *names) {
    views_.reserve(static_cast<size_t>(count));
    constexpr uint64_t kRoom = uint64_t{1} << 40;
    uint64_t at = kRoom;
    bool past = false;  // the buffers so far fill the address space: no such buffers exist
    for (int32_t i = 0; i < count; ++i) {
      ffi::DataType type = ffi::DataType::INVALID;
      uint64_t bytes = 1;  // an unknown type: refused by name before any address is read
      for (const TakenType &t : kTakenTypes)
        if (jax_type_name(t.xla) == operands[i].dtype) type = t.xla, bytes = t.dl.bits / 8;
      for (int32_t d = 0; d < operands[i].ndim; ++d)  // a negative dimension: the library refuses the shape
        if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(std::max<int64_t>(operands[i].shape[d], 0)), &bytes))
          bytes = UINT64_MAX;
      const uintptr_t address = past ? static_cast<uintptr_t>(i + 1) << 40 : static_cast<uintptr_t>(at);
      uint64_t span = 0;
      past = past || __builtin_add_overflow(bytes / kRoom * kRoom, 2 * kRoom, &span) || __builtin_add_overflow(at, span, &at);
      views_.emplace_back(std::make_unique<View>(ffi::Span<const int64_t>(operands[i].shape, operands[i].ndim), type,
                                                 reinterpret_cast<void *>(address), place, names[i]));
    }
  }
  View &operator[](size_t i) { return *views_[i]; }

 private:
  std::vector<std::unique_ptr<View>> views_;
};

// The check of `operation` on its operands (arguments, then results) and attributes: the handler's own
// path with Place::check_only, so the library's checks run as the call would run them and nothing else.
ffi::Error check_operation(const std::string &operation, const mxfp8_xla_operand *operands, int32_t count,
                           const Attributes &attribute) {
  const Place place{{kDLCPU, 0}, nullptr, true};
  bool missing = false;
  auto a32 = [&](const char *name) { return static_cast<int32_t>(attribute(name, missing)); };
  if (operation == "convert" && (count == 3 || count == 4)) {
    static const char *const kNames[] = {"data", "scale_inv", "the values result", "the scales result"};
    const char *const names[] = {kNames[0], kNames[1], count == 4 ? kNames[2] : kNames[3], kNames[3]};
    CheckedOperands v(operands, count, place, names);
    const ConvertAttributes a{a32("format"), a32("swizzled"), a32("direction"), a32("target"), a32("scale_fixup"),
                              a32("num_experts"), a32("grouped_scales"), attribute("pad_rows_to", missing),
                              attribute("pad_cols_to", missing), a32("pad_scale")};
    if (!missing) return convert_views(place, v[0], v[1], count == 4 ? &v[2] : nullptr, v[count - 1], a);
  } else if (operation == "dequantize" && count == 3) {
    static const char *const names[] = {"data", "scale_inv", "the result"};
    CheckedOperands v(operands, count, place, names);
    const int32_t format = a32("format"), swizzled = a32("swizzled"), direction = a32("direction");
    if (!missing) return dequantize_views(place, v[0], v[1], v[2], format, swizzled, direction);
  } else if (operation == "nvfp4_dequantize" && count == 4) {
    static const char *const names[] = {"data", "scale_inv", "amax", "the result"};
    CheckedOperands v(operands, count, place, names);
    const int32_t swizzled = a32("swizzled"), e4m3_max = a32("e4m3_max"), direction = a32("direction");
    if (!missing) return nvfp4_dequantize_views(place, v[0], v[1], v[2], v[3], swizzled, e4m3_max, direction);
  } else if (operation == "quantize" && count == 3) {
    static const char *const names[] = {"x", "the values result", "the scales result"};
    CheckedOperands v(operands, count, place, names);
    const int32_t format = a32("format"), rounding = a32("scale_rounding"), layout = a32("scales_layout");
    const int32_t direction = a32("direction");
    if (!missing) return quantize_views(place, v[0], v[1], v[2], format, rounding, layout, direction);
  } else if (operation == "nvfp4_quantize" && count == 4) {
    static const char *const names[] = {"x", "the values result", "the scales result", "the amax result"};
    CheckedOperands v(operands, count, place, names);
    const int32_t scope = a32("amax_scope"), four_over_six = a32("four_over_six"), e4m3_max = a32("e4m3_max");
    const int32_t layout = a32("scales_layout"), direction = a32("direction");
    if (!missing) return nvfp4_quantize_views(place, v[0], v[1], v[2], v[3], scope, four_over_six, e4m3_max, layout, direction);
  } else if ((operation == "unswizzle_scales" || operation == "swizzle_scales") && count == 2) {
    const bool to_swizzled = operation == "swizzle_scales";
    const char *const names[] = {to_swizzled ? "compact" : "swizzled", "the result"};
    CheckedOperands v(operands, count, place, names);
    return scale_move_views(place, v[0], v[1], to_swizzled, to_swizzled ? mxfp8_swizzle_scales : mxfp8_unswizzle_scales);
  } else {
    return ffi::Error::InvalidArgument("mxfp8: no trace-time check of " + operation + " with " + std::to_string(count) +
                                       " operands");
  }
  return ffi::Error::InvalidArgument("mxfp8: the check of " + operation + " lacks an attribute of its call");
}

// ---- the two platforms ------------------------------------------------------------------------------

// An operation's entry points per platform: on the host every buffer is kDLCPU memory; on CUDA they
// are device memory of XLA's device ordinal, and the work goes on XLA's stream.
template <auto Impl>
struct Platforms;
template <class... Args, ffi::Error (*Impl)(Place, Args...)>
struct Platforms<Impl> {
  static ffi::Error host(Args... args) { return Impl(Place{{kDLCPU, 0}, nullptr}, args...); }
  static ffi::Error cuda(void *stream, int32_t device, Args... args) {
    return Impl(Place{{kDLCUDA, device}, stream}, args...);
  }
};

auto on_host() { return ffi::Ffi::Bind(); }
auto on_cuda() { return ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void *>>().Ctx<ffi::DeviceOrdinal>(); }

template <class B>
auto unswizzle_binding(B b) {
  return std::move(b).template Arg<ffi::AnyBuffer>().template Ret<ffi::AnyBuffer>();
}
template <class B>
auto convert_binding(B b) {
  return std::move(b).template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .RemainingRets()
      .template Attr<int32_t>("format")
      .template Attr<int32_t>("swizzled")
      .template Attr<int32_t>("direction")
      .template Attr<int32_t>("target")
      .template Attr<int32_t>("scale_fixup")
      .template Attr<int32_t>("num_experts")
      .template Attr<int32_t>("grouped_scales")
      .template Attr<int64_t>("pad_rows_to")
      .template Attr<int64_t>("pad_cols_to")
      .template Attr<int32_t>("pad_scale");
}
template <class B>
auto quantize_binding(B b) {
  return std::move(b).template Arg<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Attr<int32_t>("format")
      .template Attr<int32_t>("scale_rounding")
      .template Attr<int32_t>("scales_layout")
      .template Attr<int32_t>("direction");
}
template <class B>
auto dequantize_binding(B b) {
  return std::move(b).template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Attr<int32_t>("format")
      .template Attr<int32_t>("swizzled")
      .template Attr<int32_t>("direction");
}

template <class B>
auto nvfp4_quantize_binding(B b) {
  return std::move(b).template Arg<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Attr<int32_t>("amax_scope")
      .template Attr<int32_t>("four_over_six")
      .template Attr<int32_t>("e4m3_max")
      .template Attr<int32_t>("scales_layout")
      .template Attr<int32_t>("direction");
}
template <class B>
auto nvfp4_dequantize_binding(B b) {
  return std::move(b).template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Arg<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Attr<int32_t>("swizzled")
      .template Attr<int32_t>("e4m3_max")
      .template Attr<int32_t>("direction");
}

}  // namespace

// The two exported handlers of an operation: declared visible first (the library is built with hidden
// visibility, and the version script exports only these), then defined by XLA's macro. The CUDA ones may
// be captured into XLA's command buffers (CUDA graphs): a call only queues work on the stream it is given
// (kernels, async copies and memsets, stream-ordered scratch), as the library's graph-safe plans do.
#define MXFP8_XLA_OPERATION(name, binding)                                                                  \
  extern "C" __attribute__((visibility("default"))) XLA_FFI_Error *mxfp8_xla_##name##_host(XLA_FFI_CallFrame *); \
  extern "C" __attribute__((visibility("default"))) XLA_FFI_Error *mxfp8_xla_##name##_cuda(XLA_FFI_CallFrame *); \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(mxfp8_xla_##name##_host, Platforms<name>::host, binding(on_host()));         \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(mxfp8_xla_##name##_cuda, Platforms<name>::cuda, binding(on_cuda()),             \
                                {ffi::Traits::kCmdBufferCompatible})

MXFP8_XLA_OPERATION(unswizzle_scales, unswizzle_binding);
MXFP8_XLA_OPERATION(swizzle_scales, unswizzle_binding);
MXFP8_XLA_OPERATION(convert, convert_binding);
MXFP8_XLA_OPERATION(quantize, quantize_binding);
MXFP8_XLA_OPERATION(dequantize, dequantize_binding);
MXFP8_XLA_OPERATION(nvfp4_quantize, nvfp4_quantize_binding);
MXFP8_XLA_OPERATION(nvfp4_dequantize, nvfp4_dequantize_binding);

// What mxfp8.jax calls at trace time, before it adds a call to the program: the operation's checks on
// `count` operands (its arguments, then its results) described by shape and type, and its attributes
// by name. Returns 0 when the call would be taken; otherwise the XLA error code the handler would
// return at run time (kInvalidArgument for a refused input, kUnimplemented for what the library does
// not do) with its message, the library's own, in *message (valid until the thread's next check).
// Touches no buffer and launches nothing: the check runs the host path with MXFP8_CHECK_ONLY,
// or stops after mxfp8_tensor_create, which reads addresses and sizes only.
extern "C" __attribute__((visibility("default"))) int32_t mxfp8_xla_check(const char *operation,
                                                                         const mxfp8_xla_operand *operands,
                                                                         int32_t count, const char *const *names,
                                                                         const int64_t *values, int32_t num_attributes,
                                                                         const char **message) {
  static thread_local std::string text;
  try {
    const ffi::Error e = check_operation(operation, operands, count, Attributes{names, values, num_attributes});
    if (e.success()) return 0;
    text = e.message();
    *message = text.c_str();
    return static_cast<int32_t>(e.errc().value_or(ffi::ErrorCode::kInternal));
  } catch (const std::exception &x) {  // an allocation: no exception leaves a C entry point
    text = std::string("mxfp8: the trace-time check failed: ") + x.what();
    *message = text.c_str();
    return static_cast<int32_t>(ffi::ErrorCode::kInternal);
  }
}
