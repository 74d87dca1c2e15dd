// libmxfp8_tvm_ffi: the mxfp8 C API as an Apache TVM FFI kernel library, loaded the way serving stacks
// load FlashInfer (tvm_ffi.load_module(mxfp8.tvm_ffi_library_path()) from Python, or dlopen and the
// `__tvm_ffi_<name>` symbols from C/C++).
//
// The conventions of a tvm-ffi kernel library, as its kernel library guide gives them:
//   - arguments are tensor views (any DLPack producer: torch, NumPy, JAX, CuPy, a C DLTensor*);
//   - outputs are allocated by the caller (CUDA graphs, the framework's allocator) and written in place;
//     the one tensor handed back, export_scales' values, is a view that tvm-ffi itself makes of the
//     caller's data (its deleter lives in libtvm_ffi and keeps the caller's tensor alive, not this
//     library);
//   - CUDA work runs on the stream tvm-ffi's environment holds for the tensors' device (for torch
//     tensors called from Python: torch's current stream), never synchronized here;
//   - a failure is raised as a tvm-ffi error (ValueError, TypeError, MemoryError or RuntimeError, as the
//     pybind11 binding raises it) whose message is the library's status name and message.
// Only the `__tvm_ffi_*` symbols are exported (see CMakeLists.txt); each is a thin call into libmxfp8,
// which does every check and moves every byte. What each function does is its doc string, at the end of
// this file (exported: `mod.get_function_doc(name)` in Python), next to its type signature (exported
// as metadata: `mod.get_function_metadata(name)`).
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>
#include <tvm/ffi/string.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "call_support.hpp"
#include "described_tensor.hpp"

namespace mxfp8_tvm_ffi {
namespace {

using tvm::ffi::Array;
using tvm::ffi::Optional;
using tvm::ffi::String;
using tvm::ffi::Tensor;
using tvm::ffi::TensorView;

int64_t version() { return mxfp8_version(); }

void unswizzle_scales(TensorView swizzled, TensorView compact) {
  check(mxfp8_unswizzle_scales(&dl_tensor(swizzled), mutable_dl_tensor(compact), stream_for(compact.device())));
}

void swizzle_scales(TensorView compact, TensorView swizzled) {
  check(mxfp8_swizzle_scales(&dl_tensor(compact), mutable_dl_tensor(swizzled), stream_for(swizzled.device())));
}

// Releases a DLPack tensor the C API returned.
struct ManagedDeleter {
  void operator()(DLManagedTensorVersioned *m) const {
    if (m != nullptr && m->deleter != nullptr) m->deleter(m);
  }
};
using ManagedPtr = std::unique_ptr<DLManagedTensorVersioned, ManagedDeleter>;

// The DLTensor of a Tensor argument, or a TypeError naming it: tvm-ffi passes None for a Tensor (or an item
// of an Array<Tensor>) as an undefined Tensor, whose DLTensor pointer is null (TensorView refuses None
// itself). `index` >= 0 names an item of a list argument.
DLTensor *defined(const Tensor &t, const char *argument, int64_t index = -1) {
  if (!t.defined())
    raise("TypeError", std::string(argument) + (index >= 0 ? "[" + std::to_string(index) + "]" : std::string()) +
                           " is None, expected a tensor");
  return const_cast<DLTensor *>(t.GetDLTensorPtr());
}

// A tvm-ffi tensor over `source`'s memory laid out as `layout` says (same data pointer, any dtype,
// shape and strides), made by libtvm_ffi: it keeps `source` alive and frees nothing itself.
Tensor view_of(const Tensor &source, const DLTensor &layout) {
  using tvm::ffi::detail::ObjectUnsafe;  // the handle plumbing Tensor::as_strided uses, which keeps the dtype
  TVMFFIObjectHandle out = nullptr;
  TVM_FFI_CHECK_SAFE_CALL(
      TVMFFITensorCreateUnsafeView(ObjectUnsafe::RawObjectPtrFromObjectRef(source), &layout, &out));
  return Tensor(ObjectUnsafe::ObjectPtrFromOwned<tvm::ffi::TensorObj>(static_cast<TVMFFIObject *>(out)));
}

Tensor export_scales(Tensor data, TensorView scale_inv, TensorView scales, String fp8_dtype, bool swizzled,
                     String direction_name) {
  const int32_t dir = direction(direction_name);
  DescribedTensor tensor(*defined(data, "data"), dl_tensor(scale_inv), fp8_format(fp8_dtype), swizzled, dir);
  mxfp8_export_options options = MXFP8_EXPORT_OPTIONS_INIT;
  options.direction = dir;
  options.stream = stream_for(scales.device());

  // The values view first: it queues nothing, so a failure of the scales below leaves nothing behind.
  DLManagedTensorVersioned *values_out = nullptr;
  check(mxfp8_export_components(tensor.get(), &options, &values_out, nullptr));
  ManagedPtr values(values_out);
  Tensor view = view_of(data, values->dl_tensor);

  const mxfp8_tensor *tensors[1] = {tensor.get()};
  DLTensor *destinations[1] = {mutable_dl_tensor(scales)};
  check(mxfp8_export_scales_batched(tensors, destinations, 1, &options));
  return view;
}

void quantize(TensorView input, Optional<TensorView> rowwise_data, Optional<TensorView> rowwise_scale_inv,
              Optional<TensorView> columnwise_data, Optional<TensorView> columnwise_scale_inv, String fp8_dtype,
              String block, String rounding, String scales) {
  mxfp8_quantize_options options = MXFP8_QUANTIZE_OPTIONS_INIT;
  options.format = fp8_format(fp8_dtype);
  options.block = choose("block", block, {{"1x32", MXFP8_BLOCK_1X32}, {"32x32", MXFP8_BLOCK_32X32}});
  options.scale_rounding =
      choose("rounding", rounding, {{"rceil", MXFP8_SCALE_ROUNDING_RCEIL},
                                    {"floor", MXFP8_SCALE_ROUNDING_FLOOR},
                                    {"compressed_tensors", MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS}});
  options.scales_layout = choose("scales", scales,
                                 {{"compact", MXFP8_QUANTIZED_SCALES_COMPACT},
                                  {"padded", MXFP8_QUANTIZED_SCALES_PADDED},
                                  {"swizzled", MXFP8_QUANTIZED_SCALES_SWIZZLED}});
  options.stream = stream_for(input.device());
  // Optional::value() returns a copy: keep the copies here so the pointers stay valid for the call
  // (reserved up front, so no push_back moves them).
  Optional<TensorView> given[4] = {rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv};
  std::vector<TensorView> held;
  held.reserve(4);
  DLTensor *outputs[4] = {};
  for (int i = 0; i < 4; ++i) {
    if (given[i].has_value()) {
      held.push_back(given[i].value());
      outputs[i] = mutable_dl_tensor(held.back());
    }
  }
  check(mxfp8_quantize_into(&dl_tensor(input), &options, outputs[0], outputs[1], outputs[2], outputs[3]));
}

void dequantize(TensorView data, TensorView scale_inv, TensorView output, String fp8_dtype, bool swizzled,
                String direction_name) {
  const int32_t dir = direction(direction_name);
  DescribedTensor tensor(dl_tensor(data), dl_tensor(scale_inv), fp8_format(fp8_dtype), swizzled, dir);
  mxfp8_dequantize_options options = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  options.direction = dir;
  options.stream = stream_for(output.device());
  check(mxfp8_dequantize(tensor.get(), &options, mutable_dl_tensor(output)));
}

// The scale layouts a destination takes, by the names of mxfp8.convert and a bucket manifest.
int32_t scale_layout(const String &target) {
  return choose("target", target,
                {{"compact", MXFP8_SCALE_LAYOUT_COMPACT},
                 {"cutlass_128x4", MXFP8_SCALE_LAYOUT_128X4},
                 {"trtllm", MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED},
                 {"deepgemm", MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED},
                 {"trtllm_gated", MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED},
                 {"deepgemm_float32", MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32}});
}

void convert(TensorView data, TensorView scale_inv, TensorView scales, Optional<TensorView> values, String target,
             String fp8_dtype, bool swizzled, String direction_name, bool zero_exponent_as_one, int64_t pad_rows_to,
             int64_t pad_cols_to, int64_t pad_scale) {
  const int32_t dir = direction(direction_name);
  DescribedTensor tensor(dl_tensor(data), dl_tensor(scale_inv), fp8_format(fp8_dtype), swizzled, dir);
  mxfp8_convert_options options = MXFP8_CONVERT_OPTIONS_INIT;
  options.target = scale_layout(target);
  options.direction = dir;
  options.scale_fixup = zero_exponent_as_one ? MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE : MXFP8_SCALE_FIXUP_NONE;
  options.pad_rows_to = pad_rows_to;
  options.pad_cols_to = pad_cols_to;
  options.pad_scale = int32_argument("pad_scale", pad_scale);
  options.stream = stream_for(scales.device());
  // Optional::value() returns a copy: keep it here so the pointer stays valid for the call.
  std::optional<TensorView> held;
  if (values.has_value()) held = values.value();
  DLTensor *values_out = held ? mutable_dl_tensor(*held) : nullptr;
  check(mxfp8_convert(tensor.get(), &options, values_out, mutable_dl_tensor(scales)));
}

// ---- Transfers: a bucket's export, and the import into a receiver's buffers, immediate or prepared ----

// One transfer and everything its desc points into: the caller's tensors (held, so
// that a prepared plan's tensors outlive every run), their descriptions, and the per-entry arrays. Built
// in place by the from_* and to_buffers steps below, never copied (the desc points into it).
struct Transfer {
  std::deque<Array<Tensor>> held;  // a deque: hold() hands out references that later holds keep valid
  Optional<Tensor> bucket;
  std::vector<std::unique_ptr<DescribedTensor>> described;
  std::vector<const mxfp8_tensor *> handles;
  std::vector<int32_t> directions, layouts, formats, source_layouts, ndims, e4m3_maxes;
  std::deque<std::vector<int64_t>> shape_values;
  std::vector<const int64_t *> shapes;
  std::vector<mxfp8_bucket_part> parts;
  uint64_t total_bytes = 0;
  bool nvfp4 = false;  // every entry NVFP4 (else every entry MXFP8)
  std::vector<DLTensor *> values_out, scales_out, global_out;
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;
  DLDevice device{kDLCPU, 0};
  const char *entries = "entries";  // what the entries are, for a count that does not match

  Transfer() = default;
  Transfer(const Transfer &) = delete;
  Transfer &operator=(const Transfer &) = delete;

  // `list`, held for the transfer; a ValueError unless it has one tensor per entry.
  const Array<Tensor> &hold(const char *name, Array<Tensor> list, size_t count) {
    if (list.size() != count)
      raise("ValueError", std::string("invalid argument: ") + name + ": " + std::to_string(list.size()) +
                              " tensors for " + std::to_string(count) + " " + entries);
    held.push_back(std::move(list));
    return held.back();
  }
  // The DLTensors of `list` (held), one per entry; None only where the C API takes a NULL entry
  // (`may_be_none`: values, "that entry's scales only").
  std::vector<DLTensor *> &outputs(const char *name, Array<Tensor> list, std::vector<DLTensor *> &out,
                                   bool may_be_none) {
    const Array<Tensor> &held_list = hold(name, std::move(list), desc.count);
    for (size_t i = 0; i < held_list.size(); ++i) {
      const Tensor &t = held_list[i];
      out.push_back(may_be_none && !t.defined() ? nullptr : defined(t, name, static_cast<int64_t>(i)));
    }
    return out;
  }
};

// FROM_TENSORS: data[i] + scale_inv[i] (+ amax[i] for NVFP4: `amax` given), all of one format, storage and
// direction.
void from_tensors(Transfer &t, Array<Tensor> data_list, Array<Tensor> scale_inv_list, Optional<Array<Tensor>> amax_list,
                  int32_t format, bool swizzled, int32_t dir, int64_t e4m3_max) {
  const size_t n = data_list.size();
  t.entries = "data tensors";
  const Array<Tensor> &data = t.hold("data_list", std::move(data_list), n);
  const Array<Tensor> &scale_inv = t.hold("scale_inv_list", std::move(scale_inv_list), n);
  const Array<Tensor> *amax = amax_list.has_value() ? &t.hold("amax_list", amax_list.value(), n) : nullptr;
  for (size_t i = 0; i < n; ++i) {
    const int64_t at = static_cast<int64_t>(i);
    const DLTensor &d = *defined(data[i], "data_list", at), &s = *defined(scale_inv[i], "scale_inv_list", at);
    const DLTensor *a = amax ? defined((*amax)[i], "amax_list", at) : nullptr;
    const int32_t max = amax ? int32_argument("e4m3_max", e4m3_max) : 0;
    try {  // the library's checks of the tensor
      t.described.push_back(a ? std::make_unique<DescribedTensor>(d, s, *a, swizzled, dir, max)
                              : std::make_unique<DescribedTensor>(d, s, format, swizzled, dir));
    } catch (const tvm::ffi::Error &e) {  // the library names the tensor's own fields; say which entry it is
      const std::string message = e.message(), entry = "entry " + std::to_string(i) + " (data_list[" + std::to_string(i) +
          "], scale_inv_list[" + std::to_string(i) + "]" + (amax ? ", amax_list[" + std::to_string(i) + "]" : "") + "): ";
      const size_t status_end = message.find(": ");  // check()'s "invalid argument: " first
      raise(e.kind().c_str(), status_end == std::string::npos
                                  ? entry + message
                                  : message.substr(0, status_end + 2) + entry + message.substr(status_end + 2));
    }
    t.handles.push_back(t.described.back()->get());
  }
  t.nvfp4 = amax != nullptr;
  t.directions.assign(n, dir);
  t.desc.source = MXFP8_TRANSFER_FROM_TENSORS;
  t.desc.count = n;
  t.desc.tensors = t.handles.data();
  t.desc.directions = t.directions.data();
}

// FROM_BUCKET: the bucket an export_bucket (nvfp4_export_bucket: `nvfp4`) filled, read by its manifest
// (see manifest() below) and each tensor's logical shape; compact scales.
void from_bucket(Transfer &t, Tensor bucket, const Array<int64_t> &manifest, const Array<Array<int64_t>> &shapes,
                 int32_t format, int32_t dir, int64_t e4m3_max = 0) {
  const size_t n = shapes.size(), width = format == MXFP8_FORMAT_NVFP4 ? 6 : 4;
  if (manifest.size() != 1 + width * n)
    raise("ValueError", "invalid argument: manifest: " + std::to_string(manifest.size()) + " integers for " +
                            std::to_string(n) + " shapes, expected 1 + " + std::to_string(width) + " * " +
                            std::to_string(n) +
                            (width == 6 ? " (nvfp4_export_bucket's manifest)" : " (export_bucket's manifest)"));
  for (size_t i = 0; i < n; ++i) {
    const auto at = [&](size_t k) -> uint64_t {
      if (k >= width) return 0;
      const int64_t v = manifest[1 + width * i + k];
      if (v < 0)  // an offset or size, never negative: said as itself, not as the uint64 it would wrap to
        raise("ValueError", "invalid argument: manifest[" + std::to_string(1 + width * i + k) + "] is " +
                                std::to_string(v) + ", an offset or byte count of entry " + std::to_string(i) +
                                ": must be >= 0");
      return static_cast<uint64_t>(v);
    };
    t.parts.push_back(mxfp8_bucket_part{at(0), at(1), at(2), at(3), at(4), at(5)});
    t.shape_values.emplace_back(shapes[i].begin(), shapes[i].end());
    t.shapes.push_back(t.shape_values.back().data());
    t.ndims.push_back(static_cast<int32_t>(shapes[i].size()));
  }
  t.entries = "shapes";
  t.nvfp4 = format == MXFP8_FORMAT_NVFP4;
  t.formats.assign(n, format);
  t.source_layouts.assign(n, MXFP8_SCALE_LAYOUT_COMPACT);
  t.directions.assign(n, dir);
  if (t.nvfp4) {
    t.e4m3_maxes.assign(n, int32_argument("e4m3_max", e4m3_max));
    t.desc.e4m3_maxes = t.e4m3_maxes.data();
  }
  defined(bucket, "bucket");
  t.bucket = std::move(bucket);
  t.device = t.bucket.value().GetDLTensorPtr()->device;
  t.desc.source = MXFP8_TRANSFER_FROM_BUCKET;
  t.desc.count = n;
  t.desc.bucket_in = t.bucket.value().GetDLTensorPtr();
  t.desc.parts_in = t.parts.data();
  // manifest[0] is the bucket's size as the sender planned it: a shorter bucket is not the one it describes.
  const DLTensor &b = *t.desc.bucket_in;
  if (manifest[0] < 0 || (b.ndim == 1 && b.dtype.bits == 8 && b.shape[0] < manifest[0]))
    raise("ValueError", "invalid argument: manifest[0] (the bucket's total bytes) is " + std::to_string(manifest[0]) +
                            (manifest[0] < 0 ? ": must be >= 0" : ", but bucket holds " + std::to_string(b.shape[0]) +
                                                                      " bytes: not the bucket the manifest describes"));
  t.desc.ndims = t.ndims.data();
  t.desc.shapes = t.shapes.data();
  t.desc.formats = t.formats.data();
  t.desc.source_layouts = t.source_layouts.data();
  t.desc.directions = t.directions.data();
}

// TO_BUFFERS: values (or None: scales only), scales in `target`'s layout, and for NVFP4 entries the global
// scales (`global_scales` given) in `convention`.
void to_buffers(Transfer &t, Optional<Array<Tensor>> values, Array<Tensor> scales,
                Optional<Array<Tensor>> global_scales, const String &target, bool zero_exponent_as_one,
                int32_t convention = MXFP8_NVFP4_GLOBAL_SCALE_DECODE) {
  t.desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
  t.desc.scale_fixup = zero_exponent_as_one ? MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE : MXFP8_SCALE_FIXUP_NONE;
  t.desc.global_scale = convention;
  t.layouts.assign(t.desc.count, scale_layout(target));
  t.desc.target_layouts = t.layouts.data();
  t.desc.scales = t.outputs("scales_list", std::move(scales), t.scales_out, false).data();
  if (values.has_value()) t.desc.values = t.outputs("values_list", values.value(), t.values_out, true).data();
  if (global_scales.has_value())
    t.desc.global_scales = t.outputs("global_scales_list", global_scales.value(), t.global_out, false).data();
  if (!t.bucket.has_value() && !t.scales_out.empty()) t.device = t.scales_out[0]->device;
}

// Runs a transfer now, on the environment's stream of its device.
void run_now(const Transfer &t) { check(mxfp8_transfer(&t.desc, stream_for(t.device))); }

// A prepared transfer: its checks made once (mxfp8_transfer_prepare), returned as a function of no
// arguments that runs it (mxfp8_plan_run) on the stream tvm-ffi's environment holds at each call. The
// function owns the plan and the caller's tensors (so their memory outlives every run, unless a framework
// gives one of them other memory: a torch `t.data = x`, which no DLPack holder sees); dropping the function
// releases them.
tvm::ffi::Function prepare(std::unique_ptr<Transfer> transfer) {
  struct Prepared {
    std::unique_ptr<Transfer> transfer;
    mxfp8_plan *plan = nullptr;
    ~Prepared() { mxfp8_plan_release(plan); }
  };
  auto prepared = std::make_shared<Prepared>();
  prepared->transfer = std::move(transfer);
  check(mxfp8_transfer_prepare(&prepared->transfer->desc, &prepared->plan));
  return tvm::ffi::Function::FromTyped(
      [prepared]() { check(mxfp8_plan_run(prepared->plan, stream_for(prepared->transfer->device))); });
}

// TO_BUCKET, planned (mxfp8_bucket_parts): each entry's parts at multiples of `alignment`, compact scales.
void plan_bucket(Transfer &t, int64_t alignment) {
  if (alignment < 1)  // the C call takes a uint64: a negative one must not wrap into a power of two
    raise("ValueError", "invalid argument: alignment: expected a power of two >= 1, got " + std::to_string(alignment));
  t.desc.destination = MXFP8_TRANSFER_TO_BUCKET;
  t.parts.resize(t.desc.count);
  check(mxfp8_bucket_parts(&t.desc, static_cast<uint64_t>(alignment), t.parts.data(), &t.total_bytes));
  t.desc.parts_out = t.parts.data();
}

// The plan as integers: [total_bytes, then per tensor values_offset, values_bytes, scales_offset,
// scales_bytes (and for NVFP4 amax_offset, amax_bytes)], all in bytes from the bucket's first byte.
Array<int64_t> manifest(const Transfer &t) {
  std::vector<int64_t> out{static_cast<int64_t>(t.total_bytes)};
  for (const mxfp8_bucket_part &e : t.parts) {
    for (uint64_t v : {e.values_offset, e.values_bytes, e.scales_offset, e.scales_bytes})
      out.push_back(static_cast<int64_t>(v));
    if (t.nvfp4) {
      out.push_back(static_cast<int64_t>(e.amax_offset));
      out.push_back(static_cast<int64_t>(e.amax_bytes));
    }
  }
  return Array<int64_t>(out.begin(), out.end());
}

// The manifest of the planned bucket, after filling `bucket` when one is given.
Array<int64_t> export_planned(Transfer &t, int64_t alignment, Optional<TensorView> bucket) {
  plan_bucket(t, alignment);
  if (bucket.has_value()) {
    TensorView out = bucket.value();
    // Said of `bucket`, not of the desc.parts_out entry that would run past its end (a field the caller never saw).
    if (out.ndim() == 1 && out.dtype().bits == 8 && static_cast<uint64_t>(out.size(0)) < t.total_bytes)
      raise("ValueError", "invalid argument: bucket holds " + std::to_string(out.size(0)) +
                              " bytes but these tensors take " + std::to_string(t.total_bytes));
    t.desc.bucket_out = mutable_dl_tensor(out);
    check(mxfp8_transfer(&t.desc, stream_for(out.device())));
  }
  return manifest(t);
}

Array<int64_t> bucket_plan(Array<Tensor> data, Array<Tensor> scale_inv, String fp8_dtype, bool swizzled,
                           String direction_name, int64_t alignment) {
  Transfer t;
  from_tensors(t, data, scale_inv, std::nullopt, fp8_format(fp8_dtype), swizzled, direction(direction_name), 0);
  return export_planned(t, alignment, std::nullopt);
}

Array<int64_t> export_bucket(Array<Tensor> data, Array<Tensor> scale_inv, TensorView bucket, String fp8_dtype,
                             bool swizzled, String direction_name, int64_t alignment) {
  Transfer t;
  from_tensors(t, data, scale_inv, std::nullopt, fp8_format(fp8_dtype), swizzled, direction(direction_name), 0);
  return export_planned(t, alignment, bucket);
}

// MXFP8 tensors into buffers.
std::unique_ptr<Transfer> tensors_to_buffers(Array<Tensor> data_list, Array<Tensor> scale_inv_list,
                                             Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                                             const String &fp8_dtype, bool swizzled, const String &direction_name,
                                             const String &target, bool zero_exponent_as_one) {
  auto t = std::make_unique<Transfer>();
  from_tensors(*t, std::move(data_list), std::move(scale_inv_list), std::nullopt, fp8_format(fp8_dtype), swizzled,
               direction(direction_name), 0);
  to_buffers(*t, std::move(values_list), std::move(scales_list), std::nullopt, target, zero_exponent_as_one);
  return t;
}

void import_tensors(Array<Tensor> data_list, Array<Tensor> scale_inv_list, Optional<Array<Tensor>> values_list,
                    Array<Tensor> scales_list, String fp8_dtype, bool swizzled, String direction_name, String target,
                    bool zero_exponent_as_one) {
  run_now(*tensors_to_buffers(data_list, scale_inv_list, values_list, scales_list, fp8_dtype, swizzled,
                              direction_name, target, zero_exponent_as_one));
}

tvm::ffi::Function prepare_import_tensors(Array<Tensor> data_list, Array<Tensor> scale_inv_list,
                                          Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                                          String fp8_dtype, bool swizzled, String direction_name, String target,
                                          bool zero_exponent_as_one) {
  return prepare(tensors_to_buffers(data_list, scale_inv_list, values_list, scales_list, fp8_dtype, swizzled,
                                    direction_name, target, zero_exponent_as_one));
}

// A bucket of MXFP8 tensors (export_bucket's) into buffers.
std::unique_ptr<Transfer> bucket_to_buffers(Tensor bucket, const Array<int64_t> &manifest,
                                            const Array<Array<int64_t>> &shapes, Optional<Array<Tensor>> values_list,
                                            Array<Tensor> scales_list, const String &fp8_dtype,
                                            const String &direction_name, const String &target,
                                            bool zero_exponent_as_one) {
  auto t = std::make_unique<Transfer>();
  from_bucket(*t, std::move(bucket), manifest, shapes, fp8_format(fp8_dtype), direction(direction_name));
  to_buffers(*t, std::move(values_list), std::move(scales_list), std::nullopt, target, zero_exponent_as_one);
  return t;
}

void import_bucket(Tensor bucket, Array<int64_t> manifest, Array<Array<int64_t>> shapes,
                   Optional<Array<Tensor>> values_list, Array<Tensor> scales_list, String fp8_dtype,
                   String direction_name, String target, bool zero_exponent_as_one) {
  run_now(*bucket_to_buffers(bucket, manifest, shapes, values_list, scales_list, fp8_dtype, direction_name, target,
                             zero_exponent_as_one));
}

tvm::ffi::Function prepare_import_bucket(Tensor bucket, Array<int64_t> manifest, Array<Array<int64_t>> shapes,
                                         Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                                         String fp8_dtype, String direction_name, String target,
                                         bool zero_exponent_as_one) {
  return prepare(bucket_to_buffers(bucket, manifest, shapes, values_list, scales_list, fp8_dtype, direction_name,
                                   target, zero_exponent_as_one));
}

// ---- NVFP4 ----

int32_t global_scale_convention(const String &name) {
  return choose("global_scale_convention", name,
                {{"decode", MXFP8_NVFP4_GLOBAL_SCALE_DECODE}, {"encode", MXFP8_NVFP4_GLOBAL_SCALE_ENCODE}});
}

// NVFP4 tensors (TE's storage of one direction) into buffers: values, E4M3 scales, global scales.
std::unique_ptr<Transfer> nvfp4_tensors_to_buffers(Array<Tensor> data_list, Array<Tensor> scale_inv_list,
                                                   Array<Tensor> amax_list, Optional<Array<Tensor>> values_list,
                                                   Array<Tensor> scales_list, Array<Tensor> global_scales_list,
                                                   bool swizzled, const String &direction_name, const String &target,
                                                   int64_t e4m3_max, const String &convention) {
  auto t = std::make_unique<Transfer>();
  from_tensors(*t, std::move(data_list), std::move(scale_inv_list), std::move(amax_list), MXFP8_FORMAT_NVFP4, swizzled,
               direction(direction_name), e4m3_max);
  to_buffers(*t, std::move(values_list), std::move(scales_list), std::move(global_scales_list), target, false,
             global_scale_convention(convention));
  return t;
}

void nvfp4_import_tensors(Array<Tensor> data_list, Array<Tensor> scale_inv_list, Array<Tensor> amax_list,
                          Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                          Array<Tensor> global_scales_list, bool swizzled, String direction_name, String target,
                          int64_t e4m3_max, String convention) {
  run_now(*nvfp4_tensors_to_buffers(data_list, scale_inv_list, amax_list, values_list, scales_list, global_scales_list,
                                    swizzled, direction_name, target, e4m3_max, convention));
}

tvm::ffi::Function prepare_nvfp4_import_tensors(Array<Tensor> data_list, Array<Tensor> scale_inv_list,
                                                Array<Tensor> amax_list, Optional<Array<Tensor>> values_list,
                                                Array<Tensor> scales_list, Array<Tensor> global_scales_list,
                                                bool swizzled, String direction_name, String target,
                                                int64_t e4m3_max, String convention) {
  return prepare(nvfp4_tensors_to_buffers(data_list, scale_inv_list, amax_list, values_list, scales_list,
                                          global_scales_list, swizzled, direction_name, target, e4m3_max, convention));
}

// NVFP4 tensors described (TE's storage of one direction), for a bucket's plan or export.
Array<int64_t> nvfp4_export_planned(Array<Tensor> data_list, Array<Tensor> scale_inv_list, Array<Tensor> amax_list,
                                    Optional<TensorView> bucket, bool swizzled, const String &direction_name,
                                    int64_t e4m3_max, int64_t alignment) {
  Transfer t;
  from_tensors(t, std::move(data_list), std::move(scale_inv_list), std::move(amax_list), MXFP8_FORMAT_NVFP4, swizzled,
               direction(direction_name), e4m3_max);
  return export_planned(t, alignment, bucket);
}

Array<int64_t> nvfp4_bucket_plan(Array<Tensor> data_list, Array<Tensor> scale_inv_list, Array<Tensor> amax_list,
                                 bool swizzled, String direction_name, int64_t e4m3_max, int64_t alignment) {
  return nvfp4_export_planned(data_list, scale_inv_list, amax_list, std::nullopt, swizzled, direction_name, e4m3_max,
                              alignment);
}

Array<int64_t> nvfp4_export_bucket(Array<Tensor> data_list, Array<Tensor> scale_inv_list, Array<Tensor> amax_list,
                                   TensorView bucket, bool swizzled, String direction_name, int64_t e4m3_max,
                                   int64_t alignment) {
  return nvfp4_export_planned(data_list, scale_inv_list, amax_list, bucket, swizzled, direction_name, e4m3_max,
                              alignment);
}

// A bucket of NVFP4 tensors (nvfp4_export_bucket's) into buffers.
std::unique_ptr<Transfer> nvfp4_bucket_to_buffers(Tensor bucket, const Array<int64_t> &manifest,
                                                  const Array<Array<int64_t>> &shapes,
                                                  Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                                                  Array<Tensor> global_scales_list, const String &direction_name,
                                                  const String &target, int64_t e4m3_max, const String &convention) {
  auto t = std::make_unique<Transfer>();
  from_bucket(*t, std::move(bucket), manifest, shapes, MXFP8_FORMAT_NVFP4, direction(direction_name), e4m3_max);
  to_buffers(*t, std::move(values_list), std::move(scales_list), std::move(global_scales_list), target, false,
             global_scale_convention(convention));
  return t;
}

void nvfp4_import_bucket(Tensor bucket, Array<int64_t> manifest, Array<Array<int64_t>> shapes,
                         Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                         Array<Tensor> global_scales_list, String direction_name, String target, int64_t e4m3_max,
                         String convention) {
  run_now(*nvfp4_bucket_to_buffers(bucket, manifest, shapes, values_list, scales_list, global_scales_list,
                                   direction_name, target, e4m3_max, convention));
}

tvm::ffi::Function prepare_nvfp4_import_bucket(Tensor bucket, Array<int64_t> manifest, Array<Array<int64_t>> shapes,
                                               Optional<Array<Tensor>> values_list, Array<Tensor> scales_list,
                                               Array<Tensor> global_scales_list, String direction_name,
                                               String target, int64_t e4m3_max, String convention) {
  return prepare(nvfp4_bucket_to_buffers(bucket, manifest, shapes, values_list, scales_list, global_scales_list,
                                         direction_name, target, e4m3_max, convention));
}

// The values view (packed uint8) of one direction of an NVFP4 tensor as TE stores it, and its compact
// E4M3 block scales and second-level scale written into the caller's buffers in one transfer.
Tensor nvfp4_export(Tensor data, TensorView scale_inv, TensorView amax, TensorView scales, TensorView global_scale,
                    bool swizzled, String direction_name, int64_t e4m3_max, String convention) {
  const int32_t dir = direction(direction_name);
  DescribedTensor tensor(*defined(data, "data"), dl_tensor(scale_inv), dl_tensor(amax), swizzled, dir,
                         int32_argument("e4m3_max", e4m3_max));
  mxfp8_export_options options = MXFP8_EXPORT_OPTIONS_INIT;
  options.direction = dir;
  options.values_dtype = MXFP8_VALUES_UINT8;
  DLManagedTensorVersioned *values_out = nullptr;
  check(mxfp8_export_components(tensor.get(), &options, &values_out, nullptr));
  ManagedPtr values(values_out);
  Tensor view = view_of(data, values->dl_tensor);

  const mxfp8_tensor *handles[1] = {tensor.get()};
  const int32_t directions[1] = {dir};
  DLTensor *scales_out[1] = {mutable_dl_tensor(scales)}, *global_out[1] = {mutable_dl_tensor(global_scale)};
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;
  desc.source = MXFP8_TRANSFER_FROM_TENSORS;
  desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
  desc.global_scale = global_scale_convention(convention);
  desc.count = 1;
  desc.tensors = handles;
  desc.directions = directions;
  desc.scales = scales_out;
  desc.global_scales = global_out;
  check(mxfp8_transfer(&desc, stream_for(scales.device())));
  return view;
}

void nvfp4_quantize(TensorView input, TensorView values, TensorView scales, TensorView amax, String scales_layout,
                    String amax_scope, bool amax_given, String direction_name, int64_t e4m3_max, String four_over_six) {
  mxfp8_nvfp4_quantize_options options = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  options.scales_layout = choose("scales_layout", scales_layout,
                                 {{"compact", MXFP8_QUANTIZED_SCALES_COMPACT},
                                  {"padded", MXFP8_QUANTIZED_SCALES_PADDED},
                                  {"swizzled", MXFP8_QUANTIZED_SCALES_SWIZZLED}});
  options.amax_scope =
      choose("amax_scope", amax_scope, {{"tensor", MXFP8_NVFP4_AMAX_PER_TENSOR}, {"row", MXFP8_NVFP4_AMAX_PER_ROW}});
  options.amax_mode = amax_given ? MXFP8_NVFP4_AMAX_GIVEN : MXFP8_NVFP4_AMAX_COMPUTE;
  options.four_over_six = choose("four_over_six", four_over_six,
                                 {{"off", MXFP8_NVFP4_4OVER6_OFF}, {"mae", MXFP8_NVFP4_4OVER6_MAE},
                                  {"mse", MXFP8_NVFP4_4OVER6_MSE}});
  options.e4m3_max = int32_argument("e4m3_max", e4m3_max);
  options.direction = direction(direction_name);
  options.stream = stream_for(input.device());
  const DLTensor *inputs[1] = {&dl_tensor(input)};
  DLTensor *values_out[1] = {mutable_dl_tensor(values)}, *scales_out[1] = {mutable_dl_tensor(scales)};
  check(mxfp8_nvfp4_quantize_into(inputs, 1, &options, values_out, scales_out, mutable_dl_tensor(amax)));
}

}  // namespace
}  // namespace mxfp8_tvm_ffi

TVM_FFI_DLL_EXPORT_TYPED_FUNC(version, mxfp8_tvm_ffi::version);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(version, R"(mxfp8_version() of the libmxfp8 loaded: MAJOR * 10000 + MINOR * 100 + PATCH.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(unswizzle_scales, mxfp8_tvm_ffi::unswizzle_scales);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(unswizzle_scales, R"(unswizzle_scales(swizzled, compact)

Writes the (R, C) scale matrix held in the cuBLAS 128x4 layout `swizzled` (contiguous uint8 or
float8_e8m0fnu, exactly roundup(R, 128) * roundup(C, 4) bytes, any shape) into `compact` (uint8 or
float8_e8m0fnu, same device; its shape gives R and C, leading dims flattened into rows; any strides, so a
transposed view writes the transpose). mxfp8_unswizzle_scales.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(swizzle_scales, mxfp8_tvm_ffi::swizzle_scales);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(swizzle_scales, R"(swizzle_scales(compact, swizzled)

The inverse of unswizzle_scales: writes every byte of `swizzled`, padding zeroed as cuBLAS expects.
mxfp8_swizzle_scales.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(export_scales, mxfp8_tvm_ffi::export_scales);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(export_scales, R"(export_scales(data, scale_inv, scales, fp8_dtype, swizzled, direction) -> values

One direction of an MXFP8 tensor, as mxfp8_export_components defines it. Writes the compact scales
((*lead, ceil(K/32)) rowwise, (ceil(M/32), K) columnwise, row-major) into `scales` (uint8 or
float8_e8m0fnu, contiguous, exactly that many elements, any shape) and returns the values: a view of
`data` with the float8 dtype of `fp8_dtype` and the tensor's shape, which keeps `data` alive.
  data: (*lead, K), uint8 or the float8 of fp8_dtype ("e4m3" | "e5m2").
  scale_inv: the scales of `direction` ("rowwise" | "columnwise") as stored: row-major, padded or not,
    or, with swizzled=True, in the cuBLAS 128x4 layout.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(quantize, mxfp8_tvm_ffi::quantize);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(quantize, R"(quantize(x, rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv, fp8_dtype, block, rounding, scales)

Quantizes x (bfloat16, float16 or float32, row-major contiguous, (*lead, K)) into your buffers,
bit-exact with Transformer Engine under "rceil" (mxfp8_quantize_into). Pass a direction's data and
scale_inv together, None for both to skip it. Values: uint8 or the float8 of fp8_dtype, prod(shape)
elements. Scales: uint8 or float8_e8m0fnu, exactly the element count of the layout.
  fp8_dtype "e4m3" | "e5m2"; block "1x32" | "32x32"; rounding "rceil" | "floor" (OCP MX) | "compressed_tensors";
  scales "compact" | "padded" (Transformer Engine's allocation) | "swizzled" (its cuBLAS 128x4 layout).)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(dequantize, mxfp8_tvm_ffi::dequantize);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(dequantize, R"(dequantize(data, scale_inv, out, fp8_dtype, swizzled, direction)

Decodes one direction of an MXFP8 tensor into `out` (float32 or bfloat16, contiguous, the tensor's
element count): value * 2^(scale - 127), NaN for scale 255 (mxfp8_dequantize). Arguments as
export_scales.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(convert, mxfp8_tvm_ffi::convert);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(convert, R"(convert(data, scale_inv, scales, values, target, fp8_dtype, swizzled, direction, zero_exponent_as_one, pad_rows_to, pad_cols_to, pad_scale)

Writes one direction of an MXFP8 tensor in the layout an engine's kernels load (mxfp8_convert), into
your buffers, every byte of them (padding as zero):
  target: "compact" | "cutlass_128x4" (cuBLAS / CUTLASS 128x4, flat) | "deepgemm" (DeepGEMM's packed
    int32 [R, ceil(C/4)], flat or with its MN-major strides: Blackwell) | "deepgemm_float32" (DeepGEMM's
    float32 [R, C] on Hopper, bits e << 23) | "trtllm" | "trtllm_gated" (FlashInfer's TRT-LLM MoE
    layouts, one expert of M rows, M a multiple of 128, values required).
  scales: uint8, float8_e8m0fnu, or (deepgemm) int32, (deepgemm_float32) float32, exactly the bytes the target gives for the
    tensor's scale matrix. values: None, or prod(shape) elements (uint8 or the float8 of fp8_dtype) in
    the target's row order.
  data, scale_inv, fp8_dtype, swizzled, direction: as export_scales. zero_exponent_as_one: write scale
    byte 0 as 1 (NeMo RL's fix-up).
  pad_rows_to, pad_cols_to: 0 for none, or the padded weight an engine's kernels load (rowwise; values
    required): M rows to a multiple of pad_rows_to (trtllm_gated: each half), K to a multiple of
    pad_cols_to (a multiple of 32), padding values zero and padding scales the E8M0 byte pad_scale (127,
    2^0, is vLLM's; 255 is refused); `values` and `scales` are then sized for the padded matrix.
Grouped experts: the Python package's mxfp8.convert(..., num_experts=).)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(bucket_plan, mxfp8_tvm_ffi::bucket_plan);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(bucket_plan, R"(bucket_plan(data_list, scale_inv_list, fp8_dtype, swizzled, direction, alignment) -> manifest

Where each tensor's values and compact scales go in a bucket (mxfp8_bucket_parts), as integers:
[total_bytes, then values_offset, values_bytes, scales_offset, scales_bytes for each tensor], in bytes
from the bucket's first byte, every part at a multiple of `alignment` (a power of two). Touches no
tensor memory. Every tensor shares fp8_dtype, swizzled and direction (see export_scales).)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(export_bucket, mxfp8_tvm_ffi::export_bucket);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(export_bucket, R"(export_bucket(data_list, scale_inv_list, bucket, fp8_dtype, swizzled, direction, alignment) -> manifest

Packs every tensor's values and compact scales into `bucket` (contiguous uint8, at least total_bytes,
on the tensors' device) in one launch (mxfp8_transfer); bytes between parts are left as they were.
Returns the manifest of bucket_plan.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(import_tensors, mxfp8_tvm_ffi::import_tensors);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(import_tensors, R"(import_tensors(data_list, scale_inv_list, values_list, scales_list, fp8_dtype, swizzled, direction, target, zero_exponent_as_one)

A receiver's import (mxfp8_transfer, tensors to buffers): each tensor's values (values_list[i], or
values_list None for scales only) and its scales in `target`'s layout ("compact", "cutlass_128x4",
"deepgemm" or "deepgemm_float32"; the TRT-LLM layouts permute value rows, so they are convert's) written
into the caller's buffers,
straight from the tensors as stored (see export_scales), every entry checked before anything is written,
in as few launches as the jobs allow, on the current stream of the buffers' device.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(prepare_import_tensors, mxfp8_tvm_ffi::prepare_import_tensors);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(prepare_import_tensors, R"(prepare_import_tensors(data_list, scale_inv_list, values_list, scales_list, fp8_dtype, swizzled, direction, target, zero_exponent_as_one) -> run

import_tensors checked once (mxfp8_transfer_prepare): returns a function of no arguments that moves the
same bytes again (mxfp8_plan_run) with no checks and no allocation, on the current stream of the buffers'
device at the time of the call (capturable in a CUDA graph). The function holds every tensor given, so
their memory stays valid while it lives, as long as each keeps its memory: a torch tensor given another
storage afterwards (`t.data = x`, `t.set_(...)`, a resize) lets its old memory go, which the runs would
still read or write; prepare again after that. Let the function go to release the plan.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(import_bucket, mxfp8_tvm_ffi::import_bucket);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(import_bucket, R"(import_bucket(bucket, manifest, shapes, values_list, scales_list, fp8_dtype, direction, target, zero_exponent_as_one)

A receiver's import of a bucket that export_bucket filled (mxfp8_transfer, bucket to buffers): `bucket`
(contiguous uint8, host or CUDA memory, only read), `manifest` the integers export_bucket returned
([total_bytes, then values_offset, values_bytes, scales_offset, scales_bytes a tensor]) and `shapes` each
tensor's logical shape (*lead, K), sent beside the bytes; every part is checked against its shape,
fp8_dtype and direction before anything is written. Writes each tensor's values (values_list[i], or
values_list None for scales only) and its scales in `target`'s layout (as import_tensors) into the
caller's buffers, on the current stream of the bucket's device.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(prepare_import_bucket, mxfp8_tvm_ffi::prepare_import_bucket);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(prepare_import_bucket, R"(prepare_import_bucket(bucket, manifest, shapes, values_list, scales_list, fp8_dtype, direction, target, zero_exponent_as_one) -> run

import_bucket checked once (mxfp8_transfer_prepare): returns a function of no arguments that moves the
bucket's current bytes again (mxfp8_plan_run), no checks and no allocation, on the current stream of the
bucket's device at the time of the call. It holds the bucket and the buffers (each keeping its memory,
as prepare_import_tensors says); let it go to release the plan.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvfp4_import_tensors, mxfp8_tvm_ffi::nvfp4_import_tensors);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(nvfp4_import_tensors, R"(nvfp4_import_tensors(data_list, scale_inv_list, amax_list, values_list, scales_list, global_scales_list, swizzled, direction, target, e4m3_max, global_scale_convention)

A receiver's import of NVFP4 tensors (mxfp8_transfer, tensors to buffers), each one direction as
Transformer Engine stores it (data, scale_inv, amax: see nvfp4_export; all sharing swizzled, direction
and e4m3_max, 448 or 256): its values (values_list[i]: uint8 of the stored matrix's rows * cols / 2, or
values_list None), its E4M3 block scales in `target`'s layout ("compact" (R, ceil(C/16)) or
"cutlass_128x4"; the engine layouts are MXFP8 only and refused) and the second-level scale of each amax
(global_scales_list[i], float32, as many as the amax; global_scale_convention "decode" or "encode", see
nvfp4_export) into the caller's buffers, every entry checked before anything is written.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(prepare_nvfp4_import_tensors, mxfp8_tvm_ffi::prepare_nvfp4_import_tensors);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(prepare_nvfp4_import_tensors, R"(prepare_nvfp4_import_tensors(data_list, scale_inv_list, amax_list, values_list, scales_list, global_scales_list, swizzled, direction, target, e4m3_max, global_scale_convention) -> run

nvfp4_import_tensors checked once (mxfp8_transfer_prepare): returns a function of no arguments that runs
it again (mxfp8_plan_run) on the current stream of the buffers' device; it holds every tensor given (each
keeping its memory, as prepare_import_tensors says).)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvfp4_bucket_plan, mxfp8_tvm_ffi::nvfp4_bucket_plan);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(nvfp4_bucket_plan, R"(nvfp4_bucket_plan(data_list, scale_inv_list, amax_list, swizzled, direction, e4m3_max, alignment) -> manifest

bucket_plan for NVFP4 tensors as Transformer Engine stores them (see nvfp4_export; all sharing swizzled,
direction and e4m3_max) (mxfp8_bucket_parts): [total_bytes, then values_offset, values_bytes,
scales_offset, scales_bytes, amax_offset, amax_bytes for each tensor], in bytes from the bucket's first
byte: the packed values, the compact E4M3 scales and the float32 amax of each, every part at a multiple
of `alignment` (the amax also of 4). Touches no tensor memory.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvfp4_export_bucket, mxfp8_tvm_ffi::nvfp4_export_bucket);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(nvfp4_export_bucket, R"(nvfp4_export_bucket(data_list, scale_inv_list, amax_list, bucket, swizzled, direction, e4m3_max, alignment) -> manifest

Packs every NVFP4 tensor's values, compact E4M3 scales and amax (the second level travels as the amax)
into `bucket` (contiguous uint8, at least total_bytes, on the tensors' device) in one transfer
(mxfp8_transfer); bytes between parts are left as they were. Returns nvfp4_bucket_plan's manifest.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvfp4_import_bucket, mxfp8_tvm_ffi::nvfp4_import_bucket);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(nvfp4_import_bucket, R"(nvfp4_import_bucket(bucket, manifest, shapes, values_list, scales_list, global_scales_list, direction, target, e4m3_max, global_scale_convention)

A receiver's import of a bucket that nvfp4_export_bucket filled (mxfp8_transfer, bucket to buffers):
its manifest, each tensor's logical shape (*lead, K), the direction and e4m3_max it was sent with; writes
values (uint8, the stored matrix's rows * cols / 2, or values_list None), E4M3 scales in `target`'s
layout ("compact" or "cutlass_128x4") and each amax's second-level scale (float32,
global_scale_convention "decode" or "encode") into the caller's buffers, every part checked first.)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(prepare_nvfp4_import_bucket, mxfp8_tvm_ffi::prepare_nvfp4_import_bucket);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(prepare_nvfp4_import_bucket, R"(prepare_nvfp4_import_bucket(bucket, manifest, shapes, values_list, scales_list, global_scales_list, direction, target, e4m3_max, global_scale_convention) -> run

nvfp4_import_bucket checked once (mxfp8_transfer_prepare): a function of no arguments that moves the
bucket's current bytes again (mxfp8_plan_run); it holds the bucket and the buffers (each keeping its
memory, as prepare_import_tensors says).)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvfp4_export, mxfp8_tvm_ffi::nvfp4_export);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(nvfp4_export, R"(nvfp4_export(data, scale_inv, amax, scales, global_scale, swizzled, direction, e4m3_max, global_scale_convention) -> values

One direction of an NVFP4 tensor as Transformer Engine stores it (data: packed uint8 (*lead, K/2), or
columnwise (K, M/2); scale_inv: E4M3 block scales, row-major or, with swizzled, in the 128x4 layout;
amax: float32, one or one a row; e4m3_max 448 or 256): returns a zero-copy uint8 view of the values
(mxfp8_export_components) and writes, in one transfer (mxfp8_transfer), the compact E4M3 scales
(R, ceil(C/16)) into `scales` and the second-level scale of each amax into `global_scale` (float32, as
many as the amax; global_scale_convention "decode" = amax / (6 * e4m3_max), vLLM's weight_scale_2, or
"encode", its reciprocal as Transformer Engine computes it).)");

TVM_FFI_DLL_EXPORT_TYPED_FUNC(nvfp4_quantize, mxfp8_tvm_ffi::nvfp4_quantize);
TVM_FFI_DLL_EXPORT_TYPED_FUNC_DOC(nvfp4_quantize, R"(nvfp4_quantize(x, values, scales, amax, scales_layout, amax_scope, amax_given, direction, e4m3_max, four_over_six)

Quantizes x (bfloat16, float16 or float32, (*lead, K), K even) to NVFP4 bit for bit as Transformer
Engine does (mxfp8_nvfp4_quantize_into) into the caller's buffers: values (uint8, M * K/2), scales (uint8
or float8_e4m3fn; scales_layout "compact", "padded" or "swizzled"), amax (float32: 1 for amax_scope
"tensor", M for "row"; written, or read when amax_given); direction "columnwise" quantizes the
transpose; e4m3_max 448 (or 256 with four_over_six "mae" / "mse").)");
