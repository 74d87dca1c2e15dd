// The _mxfp8 extension: a translation layer between Python's DLPack protocol and the C API. It decides
// nothing about layouts; every check and every byte moved is the C library's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <tuple>
#include <type_traits>

#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>
#include <mxfp8/mxfp8.h>

#include "dlpack_take.hpp"
#include "python_args.hpp"
#include "shard_list.hpp"

#ifdef MXFP8_PYTHON_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace py = pybind11;

namespace {

using namespace mxfp8_python;

// An output of the library, shared by every DLPack export made from it.
struct Owned {
  DLManagedTensorVersioned *managed;
  explicit Owned(DLManagedTensorVersioned *m) : managed(m) {}
  ~Owned() {
    if (managed && managed->deleter) managed->deleter(managed);
  }
};

// The capsule names of DLPack's two managed tensors.
template <class Managed>
constexpr const char *kCapsuleName = std::is_same_v<Managed, DLManagedTensorVersioned> ? "dltensor_versioned" : "dltensor";

// What a capsule carries: a copy of the DLTensor (pointing into the shared owner's shape and strides)
// plus a reference on the owner, so each __dlpack__ call can be consumed independently.
template <class Managed>
struct Export {
  Managed managed{};
  std::shared_ptr<Owned> owner;
  static void deleter(Managed *self) { delete static_cast<Export *>(self->manager_ctx); }
  static void capsule_destructor(PyObject *capsule) {
    // Only an unconsumed capsule still owns its tensor.
    if (PyCapsule_IsValid(capsule, kCapsuleName<Managed>)) {
      auto *m = static_cast<Managed *>(PyCapsule_GetPointer(capsule, kCapsuleName<Managed>));
      if (m && m->deleter) m->deleter(m);
    }
  }
};

// A DLPack protocol argument made of two ints: (major, minor), (device_type, device_id).
std::pair<int64_t, int64_t> int_pair(py::handle obj, const char *name, const char *what) {
  if (PyTuple_Check(obj.ptr()) || PyList_Check(obj.ptr())) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    if (seq.size() == 2) {
      const auto a = as_int64(seq[0]), b = as_int64(seq[1]);
      if (a && b) return {*a, *b};
    }
  }
  throw py::type_error(std::string("__dlpack__: ") + name + " must be a " + what + " tuple of ints, got " +
                       py::repr(obj).cast<std::string>());
}

// numpy's names for DLPack dtypes; "x<lanes>" for vector types.
std::string dtype_name(DLDataType dtype) {
  const std::string bits = std::to_string(dtype.bits);
  std::string name;
  switch (dtype.code) {
    case kDLInt: name = "int" + bits; break;
    case kDLUInt: name = "uint" + bits; break;
    case kDLFloat: name = "float" + bits; break;
    case kDLBfloat: name = "bfloat" + bits; break;
    case kDLComplex: name = "complex" + bits; break;
    case kDLBool: name = "bool"; break;
    case kDLOpaqueHandle: name = "opaque_handle"; break;
    case kDLFloat8_e3m4: name = "float8_e3m4"; break;
    case kDLFloat8_e4m3: name = "float8_e4m3"; break;
    case kDLFloat8_e4m3b11fnuz: name = "float8_e4m3b11fnuz"; break;
    case kDLFloat8_e4m3fn: name = "float8_e4m3fn"; break;
    case kDLFloat8_e4m3fnuz: name = "float8_e4m3fnuz"; break;
    case kDLFloat8_e5m2: name = "float8_e5m2"; break;
    case kDLFloat8_e5m2fnuz: name = "float8_e5m2fnuz"; break;
    case kDLFloat8_e8m0fnu: name = "float8_e8m0fnu"; break;
    case kDLFloat6_e2m3fn: name = "float6_e2m3fn"; break;
    case kDLFloat6_e3m2fn: name = "float6_e3m2fn"; break;
    case kDLFloat4_e2m1fn: name = "float4_e2m1fn"; break;
    default: name = "DLPack type code " + std::to_string(dtype.code) + " of " + bits + " bits"; break;
  }
  if (dtype.lanes != 1) name += "x" + std::to_string(dtype.lanes);
  return name;
}

// A DLPack-exportable result (values or scales).
class Array {
 public:
  Array(DLManagedTensorVersioned *m, intptr_t producer_stream)
      : owner_(std::make_shared<Owned>(m)), producer_stream_(producer_stream) {}

  const DLTensor &tensor() const { return owner_->managed->dl_tensor; }

  py::tuple dlpack_device() const {
    return py::make_tuple(static_cast<int>(tensor().device.device_type), tensor().device.device_id);
  }

  py::object dlpack(py::object stream, py::object max_version, py::object dl_device, py::object copy) {
    if (!copy.is_none() && !PyBool_Check(copy.ptr()))
      throw py::type_error("__dlpack__: copy must be None, True or False, got " + type_name(copy));
    if (!copy.is_none() && copy.cast<bool>())
      throw py::buffer_error("mxfp8 outputs are exported without copying; copy=True is not supported");
    if (!dl_device.is_none()) {
      const auto d = int_pair(dl_device, "dl_device", "(device_type, device_id)");
      if (d.first != tensor().device.device_type || d.second != tensor().device.device_id)
        throw py::buffer_error("mxfp8 outputs cannot be moved to another device by __dlpack__");
    }
    const bool versioned =
        !max_version.is_none() && int_pair(max_version, "max_version", "(major, minor)").first >= 1;
    if (!stream.is_none() && !as_int64(stream))
      throw py::type_error("__dlpack__: stream must be None or an int (a CUDA stream handle; -1: do not synchronize), got " +
                           type_name(stream));
    synchronize_consumer(stream);
    if (versioned) return capsule<DLManagedTensorVersioned>();
    if (owner_->managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
      throw py::buffer_error("a read-only tensor needs a consumer that speaks DLPack >= 1.0 (max_version)");
    return capsule<DLManagedTensor>();
  }

  // Tuples, as NumPy's and torch's are: `a.shape == (64, 2)` holds for every result of the API.
  py::tuple shape() const { return ints(tensor().shape); }
  py::tuple strides() const { return ints(tensor().strides); }
  std::string dtype() const { return dtype_name(tensor().dtype); }
  bool is_copy() const { return owner_->managed->flags & DLPACK_FLAG_BITMASK_IS_COPIED; }
  bool read_only() const { return owner_->managed->flags & DLPACK_FLAG_BITMASK_READ_ONLY; }
  uintptr_t data_ptr() const {
    return reinterpret_cast<uintptr_t>(tensor().data) + static_cast<uintptr_t>(tensor().byte_offset);
  }

 private:
  // n = ndim ints as one tuple, built in place (not a vector, then a list, then the tuple).
  py::tuple ints(const int64_t *v) const {
    py::tuple t(tensor().ndim);
    for (int32_t k = 0; k < tensor().ndim; ++k) {
      PyObject *item = PyLong_FromLongLong(v[k]);
      if (!item) throw py::error_already_set();
      PyTuple_SET_ITEM(t.ptr(), k, item);
    }
    return t;
  }
  // A new capsule of this array (a versioned or a legacy managed tensor) sharing its owner.
  template <class Managed>
  py::object capsule() const {
    auto *e = new Export<Managed>;
    e->owner = owner_;
    e->managed.manager_ctx = e;
    e->managed.deleter = Export<Managed>::deleter;
    e->managed.dl_tensor = tensor();
    if constexpr (std::is_same_v<Managed, DLManagedTensorVersioned>) {
      e->managed.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
      e->managed.flags = owner_->managed->flags;
    }
    return py::reinterpret_steal<py::object>(
        PyCapsule_New(&e->managed, kCapsuleName<Managed>, Export<Managed>::capsule_destructor));
  }

  // DLPack's stream rule: the consumer's `stream` must not run ahead of the work that produced this
  // array (queued on producer_stream_). -1 means the consumer takes care of it.
  void synchronize_consumer(py::object stream) const {
    const DLDeviceType type = tensor().device.device_type;
    if (type != kDLCUDA && type != kDLCUDAManaged) {
      if (!stream.is_none() && stream.cast<intptr_t>() != -1)
        throw py::buffer_error("stream must be None for an array in host memory");
      return;
    }
    if (stream.is_none() || !is_copy()) return;  // views: no work of ours to wait for
    const intptr_t consumer = stream.cast<intptr_t>();
    if (consumer == -1) return;
#ifdef MXFP8_PYTHON_WITH_CUDA
    // 1 is the legacy default stream, 2 the per-thread one, others are cudaStream_t values.
    auto as_stream = [](intptr_t s) {
      return s == 1 ? cudaStreamLegacy : s == 2 ? cudaStreamPerThread : reinterpret_cast<cudaStream_t>(s);
    };
    cudaStream_t producer = producer_stream_ == 0 ? cudaStreamLegacy : reinterpret_cast<cudaStream_t>(producer_stream_);
    if (as_stream(consumer) == producer) return;
    cudaEvent_t event;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventRecord(event, producer) != cudaSuccess || cudaStreamWaitEvent(as_stream(consumer), event, 0) != cudaSuccess)
      throw std::runtime_error(std::string("ordering the consumer stream after the export: ") +
                               cudaGetErrorString(cudaGetLastError()));
    cudaEventDestroy(event);
#else
    throw py::buffer_error("this build of mxfp8 has no CUDA support");
#endif
  }

  std::shared_ptr<Owned> owner_;
  intptr_t producer_stream_;
};

// A result of the library for Python: the framework's own tensor in exchange mode (ownership passes to it),
// else an Array any DLPack consumer takes.
py::object hand_back(const Exchange &ex, DLManagedTensorVersioned *managed) {
  if (!ex.api) return py::cast(Array(managed, ex.stream));
  void *out = nullptr;
  if (ex.api->managed_tensor_to_py_object_no_sync(managed, &out) != 0 || !out)
    raise_exchange_failure("managed_tensor_to_py_object_no_sync");
  return py::reinterpret_steal<py::object>(static_cast<PyObject *>(out));
}

// The allocator the C library calls for copies when the caller passes a Python callable
// alloc(shape, dl_device) -> object with __dlpack__ (e.g. torch.empty on the right device). The export
// runs with the GIL held, on this thread, so a thread-local hands the callable over. A result this binding
// refuses (read-only, another DLPack major version) is reported as the ValueError it is, not as the
// allocator failure (MemoryError) the C library turns every allocator error into.
thread_local py::object *current_allocator = nullptr;
thread_local std::string *allocator_refusal = nullptr;

int call_python_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                          void (*set_error)(void *, const char *, const char *)) {
  try {
    std::vector<int64_t> shape(prototype->shape, prototype->shape + prototype->ndim);
    py::object result = (*current_allocator)(
        shape, py::make_tuple(static_cast<int>(prototype->device.device_type), prototype->device.device_id));
    auto taken = take_dlpack(result, "allocator result", py::none(), Access::Write);
    *out = taken->release();
    return 0;
  } catch (py::error_already_set &e) {
    set_error(error_ctx, "PythonError", e.what());
  } catch (py::value_error &e) {
    if (allocator_refusal) *allocator_refusal = e.what();
    set_error(error_ctx, "ValueError", e.what());
  } catch (std::exception &e) {
    set_error(error_ctx, "PythonError", e.what());
  }
  return -1;
}

// Runs `call` with `allocator` (a Python callable, or None: none) as the one call_python_allocator uses;
// raises what the binding refused of the allocator's results.
template <class Call>
mxfp8_status with_allocator(py::object &allocator, Call call) {
  if (allocator.is_none()) return call();
  py::object *previous = current_allocator;
  std::string *previous_refusal = allocator_refusal;
  std::string refusal;
  current_allocator = &allocator;
  allocator_refusal = &refusal;
  const mxfp8_status status = call();
  current_allocator = previous;
  allocator_refusal = previous_refusal;
  if (status != MXFP8_OK && !refusal.empty()) throw py::value_error(refusal);
  return status;
}

// Whether the framework's C allocator makes the library's copies: in exchange mode, but for pinned host
// memory, which it may not make.
bool framework_allocates(const Exchange &ex) { return ex.api && ex.device.device_type != kDLCUDAHost; }

// Who allocates the library's copies: the framework (framework_allocates), else the Python callable
// `allocator` when given, else the library.
template <class Options>
void choose_allocator(Options &o, const Exchange &ex, const py::object &allocator) {
  if (framework_allocates(ex))
    o.allocator = ex.api->managed_tensor_allocator;  // the same signature as ours (DLPack's allocator)
  else if (!allocator.is_none())
    o.allocator = call_python_allocator;
}

// Runs one export call on `ex`'s stream with its allocator (choose_allocator's), into two results that
// `back` hands back (hand_back's by default).
template <class Call, class Back>
std::pair<py::object, py::object> export_pair(mxfp8_export_options &o, const Exchange &ex, py::object &allocator,
                                              Call call, Back back) {
  o.stream = reinterpret_cast<void *>(ex.stream);
  choose_allocator(o, ex, allocator);
  DLManagedTensorVersioned *values = nullptr, *scales = nullptr;
  check(with_allocator(allocator, [&] { return call(&values, &scales); }));
  TakenTensor values_owner{values}, scales_owner{scales};  // freed if handing one back fails
  py::object v = back(values_owner.release());
  return {std::move(v), back(scales_owner.release())};
}

template <class Call>
py::tuple export_with(mxfp8_export_options &o, const Exchange &ex, py::object allocator, Call call) {
  auto [v, s] = export_pair(o, ex, allocator, call, [&](DLManagedTensorVersioned *m) { return hand_back(ex, m); });
  return py::make_tuple(v, s);
}

// The Exchange of a call on a handle made in exchange mode (`api`, on `device`): the framework's current
// stream when the caller gave none, else the caller's (0: the legacy default stream).
Exchange exchange_for(const DLPackExchangeAPI *api, DLDevice device, const py::object &stream,
                      py::object dlpack_stream = py::none()) {
  if (api && stream.is_none()) return Exchange::current(api, device);
  return Exchange::explicit_stream(stream.is_none() ? 0 : stream.cast<intptr_t>(), std::move(dlpack_stream));
}

// What Tensor and Nvfp4Tensor share: the library's handle on DLPack inputs, and the exchange API (set when
// made in exchange mode) and device it was made in, from which each call's stream follows.
class Handle {
 public:
  ~Handle() { mxfp8_tensor_release(handle_); }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;

  const mxfp8_tensor *handle() const { return handle_; }
  const DLPackExchangeAPI *api() const { return api_; }
  DLDevice device() const { return device_; }
  // The storages of the torch tensors the handle was made over, for a plan that reads them (storage_of): a
  // run checks they have not moved (a storage resized in place frees the memory the plan reads).
  void pin(std::vector<py::object> &pins) const {
    for (const py::object &input : inputs_)
      if (py::object storage = storage_of(input); !storage.is_none()) pins.push_back(std::move(storage));
  }

 protected:
  Handle() = default;
  Handle(mxfp8_tensor *handle, const DLPackExchangeAPI *api, DLDevice device)
      : handle_(handle), api_(api), device_(device) {}

  // Takes inputs[i] (None: not given; names[i] in messages) into *fields[i] of `desc` and makes the handle,
  // which then owns them. exchange: every input through the first given one's framework's DLPack exchange
  // API (its type has one); else __dlpack__ on `stream`.
  template <size_t N>
  void create(mxfp8_tensor_desc &desc, const py::object (&inputs)[N], const char *const (&names)[N],
              DLManagedTensorVersioned **const (&fields)[N], bool exchange, py::object stream) {
    Exchange ex = Exchange::explicit_stream(0, stream);
    for (size_t i = 0; exchange && i < N; ++i)
      if (!inputs[i].is_none()) {
        ex = Exchange{exchange_api_of(inputs[i])};
        if (!ex.api) throw py::type_error(std::string(names[i]) + ": its type has no usable DLPack exchange API");
        break;
      }
    std::unique_ptr<TakenTensor> taken[N];
    bool device_set = false;
    for (size_t i = 0; i < N; ++i) {
      if (inputs[i].is_none()) continue;
      taken[i] = take(inputs[i], names[i], ex);
      *fields[i] = taken[i]->managed;
      if (!device_set) device_ = taken[i]->managed->dl_tensor.device, device_set = true;
    }
    api_ = ex.api;
    check(mxfp8_tensor_create(&desc, &handle_));
    for (size_t i = 0; i < N; ++i)
      if (taken[i]) taken[i]->release(), inputs_.push_back(inputs[i]);  // the handle owns them now
  }

  mxfp8_tensor *handle_ = nullptr;
  std::vector<py::object> inputs_;  // what the handle was made over (pin)
  const DLPackExchangeAPI *api_ = nullptr;
  DLDevice device_{kDLCPU, 0};
};

class Tensor : public Handle {
 public:
  // Takes over a handle the library made (a grouped expert).
  Tensor(mxfp8_tensor *handle, const DLPackExchangeAPI *api, DLDevice device) : Handle(handle, api, device) {}

  // exchange: take the inputs through their framework's DLPack exchange API (the first input's type
  // has one); `stream` is then not used.
  Tensor(py::object rowwise_data, py::object rowwise_scale_inv, py::object columnwise_data,
         py::object columnwise_scale_inv, std::optional<std::vector<int64_t>> shape, int format, bool swizzled,
         int block, py::object stream, std::optional<std::string> data_name, std::optional<std::string> scale_inv_name,
         bool exchange) {
    mxfp8_tensor_desc desc = tensor_desc(format, block, swizzled, shape ? &*shape : nullptr);
    const py::object inputs[4] = {rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv};
    // How errors name the inputs: the caller's argument names when given (one direction's data and scales).
    const char *names[4] = {"rowwise_data", "rowwise_scale_inv", "columnwise_data", "columnwise_scale_inv"};
    for (int d = 0; d < 2; ++d) {
      if (data_name && !inputs[2 * d].is_none()) names[2 * d] = data_name->c_str();
      if (scale_inv_name && !inputs[2 * d + 1].is_none()) names[2 * d + 1] = scale_inv_name->c_str();
    }
    DLManagedTensorVersioned **const fields[4] = {&desc.rowwise_data, &desc.rowwise_scale_inv, &desc.columnwise_data,
                                                  &desc.columnwise_scale_inv};
    create(desc, inputs, names, fields, exchange, stream);
  }

  // stream None: the framework's current stream for a handle made in exchange mode, else the legacy
  // default stream.
  py::tuple export_components(int direction, int values_dtype, int scales_dtype, bool contiguous, bool block_scales,
                              py::object stream, py::object allocator) {
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = direction;
    o.values_dtype = values_dtype;
    o.scales_dtype = scales_dtype;
    o.padded_scales = contiguous ? MXFP8_PADDED_SCALES_COPY : MXFP8_PADDED_SCALES_STRIDED_VIEW;
    o.scales_granularity = block_scales ? MXFP8_SCALES_PER_32X32 : MXFP8_SCALES_PER_32;
    return export_with(o, exchange_for(api_, device_, stream), allocator,
                       [&](DLManagedTensorVersioned **v, DLManagedTensorVersioned **s) {
                         return mxfp8_export_components(handle_, &o, v, s);
                       });
  }
};

// The desc of E grouped experts (Grouped's and convert's); the caller sets the per-expert lists and buffers.
mxfp8_grouped_desc grouped_desc(int format, bool swizzled, int packing, int32_t num_experts, int64_t cols,
                                int64_t uniform_rows) {
  mxfp8_grouped_desc desc = MXFP8_GROUPED_DESC_INIT;
  desc.format = format;
  desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  desc.scales = packing;
  desc.num_experts = num_experts;
  desc.cols = cols;
  desc.uniform_rows = uniform_rows;
  return desc;
}

// The Python handle on grouped MoE experts (rowwise).
class Grouped {
 public:
  Grouped(py::object data, py::object scale_inv, int32_t num_experts, int64_t cols,
          std::optional<std::vector<int64_t>> expert_rows, int64_t uniform_rows,
          std::optional<std::vector<int64_t>> scale_offsets, int format, bool swizzled, int packing, py::object stream,
          bool exchange) {
    mxfp8_grouped_desc desc = grouped_desc(format, swizzled, packing, num_experts, cols, uniform_rows);
    // A per-expert list (None: not given) of one entry per expert.
    auto per_expert = [&](const char *name, const std::optional<std::vector<int64_t>> &list) -> const int64_t * {
      if (!list) return nullptr;
      if (static_cast<int64_t>(list->size()) != num_experts)
        throw py::value_error(std::string(name) + " has " + std::to_string(list->size()) + " entries for " +
                              std::to_string(num_experts) + " experts");
      return list->data();
    };
    desc.expert_rows = per_expert("expert_rows", expert_rows);
    desc.scale_offsets = per_expert("scale_offsets", scale_offsets);
    Exchange ex = exchange ? Exchange{exchange_api_of(data)} : Exchange::explicit_stream(0, stream);
    if (exchange && !ex.api) throw py::type_error("data: its type has no usable DLPack exchange API");
    auto taken_data = take(data, "data", ex);
    auto taken_scales = take(scale_inv, "scale_inv", ex);
    api_ = ex.api;
    device_ = taken_data->managed->dl_tensor.device;
    desc.data = taken_data->managed;
    desc.scale_inv = taken_scales->managed;
    check(mxfp8_grouped_tensor_create(&desc, &handle_));
    taken_data->release();
    taken_scales->release();
  }
  ~Grouped() { mxfp8_grouped_tensor_release(handle_); }
  Grouped(const Grouped &) = delete;
  Grouped &operator=(const Grouped &) = delete;

  std::unique_ptr<Tensor> expert(int32_t e) {
    mxfp8_tensor *t = nullptr;
    check(mxfp8_grouped_expert(handle_, e, &t));
    return std::make_unique<Tensor>(t, api_, device_);
  }

  // mxfp8_grouped_export of every expert stacked (experts None) or of the chosen ones, in this order. An
  // empty list stays a choice of none (refused by the library), never NULL and 0, which would mean every expert.
  py::tuple export_experts(const std::optional<std::vector<int32_t>> &experts, int values_dtype, int scales_dtype,
                           py::object stream, py::object allocator) {
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.values_dtype = values_dtype;
    o.scales_dtype = scales_dtype;
    static const int32_t none = 0;
    const int32_t *chosen = !experts ? nullptr : experts->empty() ? &none : experts->data();
    const size_t count = experts ? experts->size() : 0;
    return export_with(o, exchange_for(api_, device_, stream), allocator,
                       [&](DLManagedTensorVersioned **v, DLManagedTensorVersioned **s) {
                         return mxfp8_grouped_export(handle_, chosen, count, &o, v, s);
                       });
  }

 private:
  mxfp8_grouped_tensor *handle_ = nullptr;
  const DLPackExchangeAPI *api_ = nullptr;  // set when made in exchange mode
  DLDevice device_{kDLCPU, 0};
};

std::vector<const mxfp8_tensor *> handles(const std::vector<Tensor *> &tensors) {
  std::vector<const mxfp8_tensor *> out;
  for (const Tensor *t : tensors) out.push_back(t->handle());
  return out;
}

using EntryRow = std::tuple<uint64_t, uint64_t, uint64_t, uint64_t>;
using Nvfp4Row = std::tuple<uint64_t, uint64_t, int32_t>;  // amax_offset, amax_bytes, e4m3_max

// A transfer from `tensors` (handles of either format; the vector outlives the desc), every entry in
// `direction`, into a bucket (the destination it starts with: mxfp8_bucket_parts lays it out, and
// mxfp8_transfer / _prepare fill it once bucket_out and parts_out are set) or into scales-only buffers
// (to_scales).
struct TensorTransfer {
  std::vector<int32_t> directions;
  std::vector<mxfp8_bucket_part> parts;
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;
  TensorTransfer(const std::vector<const mxfp8_tensor *> &tensors, int direction, const ShardList &shards)
      : directions(tensors.size(), direction) {
    desc.source = MXFP8_TRANSFER_FROM_TENSORS;
    desc.destination = MXFP8_TRANSFER_TO_BUCKET;
    desc.count = tensors.size();
    desc.tensors = tensors.data();
    desc.directions = directions.data();
    desc.shards = shards.data();
  }
  TensorTransfer(const TensorTransfer &) = delete;  // the desc points into the vectors
  TensorTransfer &operator=(const TensorTransfer &) = delete;
  // Into caller buffers, each entry's compact scales only (no values array): a batched export.
  void to_scales(const std::vector<DLTensor *> &scales) {
    desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
    desc.scales = scales.data();
  }
  // The plan's rows as the desc's parts: the values and scales parts, and (NVFP4) the amax part. An NVFP4
  // row's E4M3_MAX, which the receiver's manifest carries, must be its tensor's (`e4m3_maxes`, 0 at MXFP8
  // entries): the transfer itself reads it from the tensor, so a row that disagrees would go unnoticed.
  void set_parts(const std::vector<EntryRow> &plan, const std::vector<Nvfp4Row> &nvfp4_plan,
                 const std::vector<int32_t> &e4m3_maxes) {
    if (nvfp4_plan.size() != plan.size()) throw py::value_error("the plan's lists must have one entry per tensor");
    for (size_t i = 0; i < plan.size() && i < e4m3_maxes.size(); ++i)
      if (e4m3_maxes[i] != 0 && std::get<2>(nvfp4_plan[i]) != e4m3_maxes[i])
        throw py::value_error("nvfp4_plan[" + std::to_string(i) + "] gives e4m3_max " +
                              std::to_string(std::get<2>(nvfp4_plan[i])) + ", tensors[" + std::to_string(i) +
                              "] has " + std::to_string(e4m3_maxes[i]) + ": plan the bucket for these tensors");
    parts.clear();
    for (size_t i = 0; i < plan.size(); ++i) {
      const auto &[vo, vb, so, sb] = plan[i];
      parts.push_back(mxfp8_bucket_part{vo, vb, so, sb, std::get<0>(nvfp4_plan[i]), std::get<1>(nvfp4_plan[i])});
    }
    desc.parts_out = parts.data();
  }
  // mxfp8_bucket_parts: the rows of a plan, the NVFP4 rows (amax_offset, amax_bytes, e4m3_max: entry i's
  // e4m3_maxes[i], 0 at MXFP8 entries) and the total.
  py::tuple plan(uint64_t alignment, const std::vector<int32_t> &e4m3_maxes = {}) {
    parts.assign(desc.count, mxfp8_bucket_part{});
    uint64_t total = 0;
    check(mxfp8_bucket_parts(&desc, alignment, parts.data(), &total));
    py::list rows, nv_rows;
    for (size_t i = 0; i < parts.size(); ++i) {
      const mxfp8_bucket_part &p = parts[i];
      rows.append(py::make_tuple(p.values_offset, p.values_bytes, p.scales_offset, p.scales_bytes));
      nv_rows.append(py::make_tuple(p.amax_offset, p.amax_bytes, i < e4m3_maxes.size() ? e4m3_maxes[i] : 0));
    }
    return py::make_tuple(rows, nv_rows, total);
  }
};

// What a Plan keeps of the objects it writes: each taken (the desc points at its tensor) and, for a view,
// its storage (storage_of) held.
struct PlanDestinations {
  std::vector<std::unique_ptr<TakenTensor>> taken;
  std::vector<py::object> pins;
  DLTensor *add(py::handle obj, const std::string &name, Exchange &ex) {
    if (py::object storage = storage_of(obj); !storage.is_none()) pins.push_back(std::move(storage));
    taken.push_back(take(obj, name.c_str(), ex, Access::Write));
    return taken.back()->tensor();
  }
  std::unique_ptr<Plan> prepare(const mxfp8_transfer_desc &desc, const Exchange &ex) {
    mxfp8_plan *plan = nullptr;
    check(mxfp8_transfer_prepare(&desc, &plan));
    return std::make_unique<Plan>(plan, std::move(taken), ex, std::move(pins));
  }
};

// The prepared transfers from tensors (a Plan: checked once, each run one launch on the framework's current
// stream in exchange mode, else on the given stream), keeping each destination taken; the tensors are held
// by the library's plan.

// Their compact scales into `destinations` (a batched export); names[i] says what destinations[i] is to the
// caller (messages name it; default "destinations[i]").
std::unique_ptr<Plan> prepare_export(const std::vector<Tensor *> &tensors, const std::vector<py::object> &destinations,
                                     int direction, py::object dlpack_stream,
                                     const std::optional<std::vector<std::string>> &names) {
  if (tensors.empty()) throw py::value_error("tensors is empty: nothing to prepare");
  if (tensors.size() != destinations.size())
    throw py::value_error(std::to_string(tensors.size()) + " tensors but " + std::to_string(destinations.size()) +
                          " destinations");
  if (names && names->size() != destinations.size()) throw py::value_error("names must have one entry per destination");
  Exchange ex = exchange_for(tensors[0]->api(), tensors[0]->device(), py::none(), std::move(dlpack_stream));
  PlanDestinations kept;
  std::vector<DLTensor *> dls;
  for (size_t i = 0; i < destinations.size(); ++i)
    dls.push_back(kept.add(destinations[i], names ? (*names)[i] : "destinations[" + std::to_string(i) + "]", ex));
  for (const Tensor *source : tensors) source->pin(kept.pins);
  const auto h = handles(tensors);
  const ShardList whole(std::nullopt, h.size());
  TensorTransfer t(h, direction, whole);
  t.to_scales(dls);
  return kept.prepare(t.desc, ex);
}

// NumPy cannot export ml_dtypes' bfloat16 through DLPack: such an array goes as its uint16 bits (the
// second member says so), relabelled by relabel_bfloat16 once taken.
std::pair<py::object, bool> numpy_bfloat16_as_bits(py::handle a) {
  py::object obj = py::reinterpret_borrow<py::object>(a);
  if (py::str(py::type::of(a).attr("__module__")).cast<std::string>() != "numpy") return {obj, false};
  py::object dtype = py::getattr(a, "dtype", py::none());
  if (py::str(py::getattr(dtype, "name", py::str(""))).cast<std::string>() != "bfloat16") return {obj, false};
  return {obj.attr("view")(py::module_::import("numpy").attr("uint16")), true};
}

void relabel_bfloat16(DLTensor *t, bool bfloat16_bits) {
  if (!bfloat16_bits) return;
  if (t->dtype.code != kDLUInt || t->dtype.bits != 16 || t->dtype.lanes != 1)
    throw py::value_error("bfloat16_bits needs a uint16 array");
  t->dtype = DLDataType{kDLBfloat, 16, 1};
}

// take() of an object that may be such a NumPy bfloat16 array.
std::unique_ptr<TakenTensor> take_bfloat16(py::handle obj, const char *name, Exchange &ex, Access access) {
  auto [bits, bfloat16_bits] = numpy_bfloat16_as_bits(obj);
  auto taken = take(bits, name, ex, access);
  relabel_bfloat16(taken->tensor(), bfloat16_bits);
  return taken;
}

// quantize's four results for Python (None where not asked for); none leaks if one fails.
// `back` hands one back.
template <class Back>
void hand_back_all(DLManagedTensorVersioned *(&out)[4], py::object (&result)[4], Back back) {
  for (int i = 0; i < 4; ++i) {
    if (!out[i]) {
      result[i] = py::none();
      continue;
    }
    DLManagedTensorVersioned *managed = out[i];
    out[i] = nullptr;
    try {
      result[i] = back(managed);
    } catch (...) {
      for (int j = i + 1; j < 4; ++j)
        if (out[j] && out[j]->deleter) out[j]->deleter(out[j]);
      throw;
    }
  }
}

// mxfp8_nvfp4_quantize_into over DLPack objects, one input or fused shards (fused=True names them x[i]
// rather than x): every tensor is borrowed for the call; the outputs and amax are the caller's, written
// in place.
void nvfp4_quantize(const std::vector<py::object> &inputs, const std::vector<py::object> &values,
                    const std::vector<py::object> &scales, py::object amax, bool fused, int amax_scope, int amax_mode,
                    int four_over_six, int e4m3_max, int layout, int direction, py::object stream,
                    py::object dlpack_stream) {
  if (inputs.empty() || inputs.size() != values.size() || inputs.size() != scales.size())
    throw py::value_error("nvfp4_quantize: inputs, values and scales must be non-empty and of one length");
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.amax_scope = amax_scope;
  o.amax_mode = amax_mode;
  o.four_over_six = four_over_six;
  o.e4m3_max = e4m3_max;
  o.scales_layout = layout;
  o.direction = direction;
  Exchange ex = exchange_for_objects(inputs[0], stream, dlpack_stream);
  std::vector<std::unique_ptr<TakenTensor>> taken;
  std::vector<DLTensor *> in, v, s;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string n = fused ? "[" + std::to_string(i) + "]" : "";
    taken.push_back(take_bfloat16(inputs[i], ("x" + n).c_str(), ex, Access::Read));
    in.push_back(&taken.back()->managed->dl_tensor);
    taken.push_back(take(values[i], ("values" + n).c_str(), ex, Access::Write));
    v.push_back(&taken.back()->managed->dl_tensor);
    taken.push_back(take(scales[i], ("scales" + n).c_str(), ex, Access::Write));
    s.push_back(&taken.back()->managed->dl_tensor);
  }
  taken.push_back(take(amax, "amax", ex, amax_mode == MXFP8_NVFP4_AMAX_COMPUTE ? Access::Write : Access::Read));
  DLTensor *a = &taken.back()->managed->dl_tensor;
  o.stream = reinterpret_cast<void *>(ex.stream);
  check(mxfp8_nvfp4_quantize_into(in.data(), in.size(), &o, v.data(), s.data(), a));
}

// ---- The Python API's calls, each done here end to end (issues 15 and 33) ------------------------------
// export_components, quantize, dequantize, swizzle_scales / unswizzle_scales and convert: each Python function is
// one call of its entry below, the only implementation of the call. The entry checks every argument (the
// messages name the Python argument, worded as _args words them), takes every object (the framework's
// DLPack C exchange API when the caller left the stream to it, else __dlpack__: versioned or legacy
// capsules, version and read-only checks, all in dlpack_take.hpp), runs the library and hands the results
// back. The plain case (the framework's tensors with an exchange API, plain str / bool / int / tuple
// arguments, no stream) calls no Python code and makes no Python object but the results.

constexpr std::pair<const char *, int> kFormats[] = {{"e4m3", MXFP8_FORMAT_E4M3}, {"e5m2", MXFP8_FORMAT_E5M2}};
constexpr std::pair<const char *, int> kDirections[] = {{"rowwise", MXFP8_DIRECTION_ROWWISE},
                                                        {"columnwise", MXFP8_DIRECTION_COLUMNWISE}};
constexpr std::pair<const char *, int> kValuesDtypes[] = {{"fp8", 0}, {"uint8", 1}};
constexpr std::pair<const char *, int> kScalesDtypes[] = {{"uint8", 0}, {"e8m0", 1}};
constexpr std::pair<const char *, int> kBlocks[] = {{"1x32", 0}, {"32x32", 1}};
constexpr std::pair<const char *, int> kRoundings[] = {{"rceil", 0}, {"floor", 1}, {"compressed_tensors", 2}};
constexpr std::pair<const char *, int> kLayouts[] = {{"compact", 0}, {"padded", 1}, {"swizzled", 2}};
constexpr std::pair<const char *, int> kOutputs[] = {{"float32", 0}, {"bfloat16", 1}};

// Devices as _args compares them: (device_type, device_id), host memory (plain or pinned) one kind.
using DevicePair = std::pair<int64_t, int64_t>;
DevicePair pair_of(DLDevice d) { return {d.device_type, d.device_id}; }
bool same_memory(DevicePair a, DevicePair b) {
  auto host = [](DevicePair d) { return d.first == kDLCPU || d.first == kDLCUDAHost; };
  return a == b || (host(a) && host(b));
}
std::string format_device(DevicePair d) {
  const char *name = d.first == kDLCPU ? "cpu" : d.first == kDLCUDA ? "cuda" : d.first == kDLCUDAHost ? "cuda_host"
                     : d.first == kDLCUDAManaged ? "cuda_managed" : nullptr;
  return (name ? std::string(name) : "type " + std::to_string(d.first)) + ":" + std::to_string(d.second);
}

DevicePair asked_dlpack_device(const char *name, py::handle obj);

// A jax.Array's device as its __dlpack_device__ says it (dlpack_take.hpp's JAX route): that Python method's
// answer depends only on the array's device and memory kind (platform, CUDA or ROCm, pinned host memory,
// local hardware id), so for an array on one device (jax_single_device_sharding) in the "device" memory
// kind it is asked once per jax Device and remembered (0.8 us a call otherwise). Nothing: not such an
// array; ask __dlpack_device__.
std::optional<DevicePair> jax_device(const char *name, py::handle obj) {
  const py::object sharding = jax_single_device_sharding(obj);
  if (!sharding) return std::nullopt;
  // A deleted (or donated) array: __dlpack_device__ raises what JAX raises for it, as before the route.
  static PyObject *is_deleted_name = PyUnicode_InternFromString("is_deleted");
  const py::object deleted = steal(PyObject_CallMethodNoArgs(obj.ptr(), is_deleted_name));
  if (!deleted) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw py::error_already_set();
    PyErr_Clear();
    return std::nullopt;
  }
  if (deleted.ptr() != Py_False) return std::nullopt;
  static PyObject *memory_kind_name = PyUnicode_InternFromString("memory_kind");
  static PyObject *device_memory = PyUnicode_InternFromString("device");
  const py::object kind = jax_attr(sharding.ptr(), memory_kind_name);
  if (!kind) return std::nullopt;
  // pinned or unpinned host memory: __dlpack_device__ decides
  if (!PyUnicode_Check(kind.ptr()) || PyUnicode_Compare(kind.ptr(), device_memory) != 0) return std::nullopt;
  py::object device = jax_device_of_sharding(sharding.ptr());
  if (!device) return std::nullopt;
  auto &known = jax_devices();
  if (auto it = known.find(device.ptr()); it != known.end()) return it->second;
  const DevicePair d = asked_dlpack_device(name, obj);
  // The map keeps the reference (unless another thread, while __dlpack_device__ ran, put the device there
  // first).
  if (known.emplace(device.ptr(), d).second) device.release();
  return d;
}

// _args.dlpack_producer: obj's device, as its __dlpack_device__ says (which moves nothing); remembered per
// device for a jax.Array (jax_device), else asked.
DevicePair dlpack_device_of(const char *name, py::handle obj) {
  if (const auto d = jax_device(name, obj)) return *d;
  return asked_dlpack_device(name, obj);
}

// obj.__dlpack_device__(), checked to be a (device_type, device_id) pair.
DevicePair asked_dlpack_device(const char *name, py::handle obj) {
  if (!has_attribute(obj, "__dlpack__") || !has_attribute(obj, "__dlpack_device__"))
    throw py::type_error(std::string(name) + ": expected an object with __dlpack__ (torch, JAX, CuPy, NumPy), got " +
                         type_name(obj));
  py::object device = obj.attr("__dlpack_device__")();
  if (PyTuple_Check(device.ptr()) || PyList_Check(device.ptr())) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(device);
    if (seq.size() == 2) {
      const py::object a = steal(PyNumber_Index(py::object(seq[0]).ptr()));
      const py::object b = a ? steal(PyNumber_Index(py::object(seq[1]).ptr())) : py::object();
      if (a && b) {
        const DevicePair d{PyLong_AsLongLong(a.ptr()), PyLong_AsLongLong(b.ptr())};
        if (!PyErr_Occurred()) return d;  // else one did not fit int64_t
      }
      PyErr_Clear();
    }
  }
  throw py::type_error(std::string(name) + ".__dlpack_device__() returned " + repr_of(device) +
                       ", not a (device_type, device_id) pair");
}

// _args.dims and _args.dtype_name for a producer without .shape or .dtype (DLPack promises neither):
// (shape, NumPy's name of the dtype) as its capsule says them, the capsule taken and released at once.
// Stream -1 on a CUDA device is DLPack's "no synchronization": nothing is read. The take checked ndim and
// the shape array (check_dims); a negative dimension is refused here, before it sizes anything.
std::pair<py::tuple, std::string> dlpack_meta(const std::string &name, py::handle obj) {
  const DevicePair d = dlpack_device_of(name.c_str(), obj);
  const py::object stream = d.first == kDLCUDA || d.first == kDLCUDAManaged ? py::object(py::int_(-1)) : py::none();
  const auto taken = take_dlpack(obj, Name(name.c_str()), stream);
  const DLTensor &t = *taken->tensor();
  py::tuple shape(t.ndim);
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      throw py::value_error(name + ": dimension " + std::to_string(i) + " of its DLPack tensor is " +
                            std::to_string(t.shape[i]) + ", expected a size of 0 or more");
    shape[i] = py::int_(t.shape[i]);
  }
  return {shape, dtype_name(t.dtype)};
}

// The torch module when obj is a torch tensor, else None (_args.torch_module; torch is not imported here).
py::object torch_of(py::handle obj) {
  const std::string module = py::str(py::type::of(obj).attr("__module__"));
  if (module.rfind("torch", 0) != 0) return py::none();
  py::object torch = imported("torch");
  if (!torch) return py::none();
  return py::isinstance(obj, torch.attr("Tensor")) ? torch : py::none();
}

// A cudaStream_t as an int (_args.stream_pointer): from torch / CuPy stream objects or ints; None: torch's
// current stream on data's device for torch inputs, else the legacy default stream (0).
int64_t stream_pointer(py::handle stream, py::handle torch, py::handle data, bool cuda) {
  if (!cuda) {
    if (!stream.is_none()) throw py::value_error("stream is only meaningful for CUDA tensors");
    return 0;
  }
  if (stream.is_none()) {
    if (torch.is_none()) return 0;
    return torch.attr("cuda").attr("current_stream")(data.attr("device")).attr("cuda_stream").cast<int64_t>();
  }
  py::object value = py::reinterpret_borrow<py::object>(stream);
  for (const char *attribute : {"cuda_stream", "ptr"})  // torch.cuda.Stream, cupy.cuda.Stream
    if (has_attribute(stream, attribute)) {
      value = stream.attr(attribute);
      break;
    }
  if (PyBool_Check(value.ptr()) || !has_attribute(py::type::of(value), "__index__"))
    throw py::type_error("stream must be a torch.cuda.Stream, a cupy.cuda.Stream, an int (a cudaStream_t) or None, got " +
                         repr_of(stream) + " (" + type_name(stream) + ")");
  bool ignored = false;
  return integer("stream", value, ignored, 0, INT64_MAX);
}

// The allocator of the library's copies for torch inputs (None for others): PyTorch's caching allocator on
// data's device, pinned when the library asks for kDLCUDAHost memory (the device of a pinned input).
py::object torch_allocator(py::handle torch_module, py::handle data) {
  if (torch_module.is_none()) return py::none();
  py::object torch = py::reinterpret_borrow<py::object>(torch_module), device = data.attr("device");
  return py::cpp_function([torch, device](std::vector<int64_t> shape, py::tuple dl_device) -> py::object {
    return torch.attr("empty")(shape, py::arg("dtype") = torch.attr("uint8"), py::arg("device") = device,
                               py::arg("pin_memory") = dl_device[0].cast<int>() == kDLCUDAHost);
  });
}

// name's device `d` against the first input's: host memory is one kind; else a ValueError naming both.
void same_device(const std::string &name, DevicePair d, const std::string &first_name, DevicePair first, bool output) {
  if (same_memory(d, first)) return;
  throw py::value_error(name + " is on " + format_device(d) + " but " + first_name + " is on " + format_device(first) +
                        (output ? ": the output must be on the inputs' device" : ": all buffers must share one device"));
}

bool is_cuda(DevicePair d) { return d.first == kDLCUDA || d.first == kDLCUDAManaged; }

// _args.inputs: (torch, cuda, stream, first name, first device, exchange) of a call on `objects` (a dict,
// the first entry deciding): every device asked and compared before any __dlpack__ call; exchange when
// the caller gave no stream and the first object's framework has a DLPack C exchange API (stream None:
// the extension asks the framework), else the stream as stream_pointer reads it.
py::tuple inputs_of(py::handle stream, const py::dict &objects) {
  if (objects.empty()) throw py::value_error("inputs: no objects");
  std::string first_name;
  py::handle first;
  DevicePair first_device{kDLCPU, 0};
  for (auto [key, obj] : objects) {
    const std::string name = py::str(key);
    const DevicePair d = dlpack_device_of(name.c_str(), obj);
    if (!first) {
      first_name = name, first = obj, first_device = d;
      continue;
    }
    same_device(name, d, first_name, first_device, false);
  }
  py::object torch = torch_of(first);
  const bool cuda = is_cuda(first_device);
  py::tuple device = py::make_tuple(first_device.first, first_device.second);
  if (stream.is_none() && exchange_api_of(first))
    return py::make_tuple(torch, cuda, py::none(), first_name, device, true);
  return py::make_tuple(torch, cuda, stream_pointer(stream, torch, first, cuda), first_name, device, false);
}

// One call's objects (as _args.inputs decides): the first input decides the framework and the stream. With
// no stream and a first input whose framework has an exchange API, each of that framework's objects is
// taken through it (its device compared once taken: taking runs no producer code) and any other is asked
// its device before its capsule; else every device is compared before any __dlpack__ call, and the stream
// is the caller's (torch's current one for a torch tensor).
class Call {
 public:
  Exchange ex;
  bool plain = true;  // no Python code run for an argument, every object taken through the exchange API

  // Takes inputs[i] (named names[i]) for reading into into[i]; `out` (named out_name; None: none) is an
  // output whose device is checked here, before any capsule, and taken by take_output.
  // An MXFP8 tensor's two inputs, data and scale_inv, into taken[0] and taken[1] (export, dequantize, convert).
  void take_tensor(py::handle stream, py::handle data, py::handle scale_inv, TakenTensor *taken,
                   py::handle out = py::none()) {
    static const char *const names[2] = {"data", "scale_inv"};
    const py::handle inputs[2] = {data, scale_inv};
    take_inputs(stream, 2, names, inputs, taken, out);
  }

  void take_inputs(py::handle stream, size_t n, const char *const *names, const py::handle *inputs, TakenTensor *into,
                   py::handle out = py::none(), const char *out_name = "out") {
    first_ = inputs[0];
    first_name_ = names[0];
    const DLPackExchangeAPI *api = stream.is_none() ? exchange_api_of(first_) : nullptr;
    if (api) {
      ex = Exchange{api};
      take_from_framework(first_, first_name_, ex, Access::Read, into[0]);
      device_ = pair_of(ex.device);
      bool others = false;
      for (size_t i = 1; i < n; ++i) {
        if (exchange_api_of(inputs[i]) != api) {
          others = true;
          same_device(names[i], dlpack_device_of(names[i], inputs[i]), false);
          continue;
        }
        take_from_framework(inputs[i], names[i], ex, Access::Read, into[i]);
        same_device(names[i], pair_of(into[i].managed->dl_tensor.device), false);
      }
      if (!out.is_none() && exchange_api_of(out) != api) out_device(out_name, out);
      if (!others) return;
      plain = false;
      for (size_t i = 1; i < n; ++i)
        if (!into[i].managed) into[i].managed = take(inputs[i], names[i], ex)->release();
      return;
    }
    plain = false;
    DevicePair devices[4];
    for (size_t i = 0; i < n; ++i) devices[i] = dlpack_device_of(names[i], inputs[i]);
    device_ = devices[0];
    for (size_t i = 1; i < n; ++i) same_device(names[i], devices[i], false);
    if (!out.is_none()) out_device(out_name, out);
    const bool cuda = is_cuda(device_);
    const int64_t s = stream_pointer(stream, torch(), first_, cuda);
    ex = Exchange::explicit_stream(s, cuda ? py::object(py::int_(s ? s : 1)) : py::object(py::none()));
    ex.device = DLDevice{static_cast<DLDeviceType>(device_.first), static_cast<int32_t>(device_.second)};
    for (size_t i = 0; i < n; ++i) into[i].managed = take_dlpack(inputs[i], names[i], ex.dlpack_stream, Access::Read)->release();
  }

  // An output the library writes into (its device checked by take_inputs when not the framework's).
  std::unique_ptr<TakenTensor> take_output(py::handle out, const char *name = "out") {
    const bool framework = ex.api && exchange_api_of(out) == ex.api;
    if (!framework) plain = false;
    auto taken = take(out, name, ex, Access::Write);
    if (framework) same_device(name, pair_of(taken->managed->dl_tensor.device), true);
    return taken;
  }

  // The torch module when the first input is a torch tensor, else None.
  py::object torch() {
    if (!torch_known_) {
      torch_known_ = true;
      torch_ = torch_of(first_);
    }
    return torch_;
  }

  // Who makes the library's copies when not the framework's C allocator: torch_allocator's (None: the
  // library's own).
  py::object allocator() {
    if (framework_allocates()) return py::none();
    return torch_allocator(torch(), first_);
  }

  // A result: the framework's tensor in exchange mode, else an Array (a torch tensor for torch inputs).
  py::object result(DLManagedTensorVersioned *managed) {
    py::object r = hand_back(ex, managed);
    if (!ex.api && !this->torch().is_none()) r = torch_.attr("from_dlpack")(r);
    return r;
  }

  // A new byte (or `dtype`) array of `shape` like the first input where the framework cannot make one:
  // torch.empty for torch inputs, numpy.empty otherwise.
  py::object new_bytes(const std::vector<int64_t> &shape) {
    py::tuple dims = py::cast(shape);
    py::object torch = this->torch();
    if (!torch.is_none())
      return torch.attr("empty")(dims, py::arg("dtype") = torch.attr("uint8"), py::arg("device") = first_.attr("device"));
    py::module_ numpy = py::module_::import("numpy");
    return numpy.attr("empty")(dims, py::arg("dtype") = numpy.attr("uint8"));
  }

  // An output the caller gave (None: none): its device checked now, before any capsule, unless it is the
  // framework's (take_output checks it once taken).
  void check_output(const char *name, py::handle obj) {
    if (!obj.is_none() && !(ex.api && exchange_api_of(obj) == ex.api)) out_device(name, obj);
  }

  bool framework_allocates() const { return ::framework_allocates(ex); }
  int64_t device_type() const { return device_.first; }
  bool cuda() const { return is_cuda(device_); }
  py::handle first() const { return first_; }

 private:
  void same_device(const char *name, DevicePair d, bool output) const {
    ::same_device(name, d, first_name_, device_, output);
  }
  void out_device(const char *name, py::handle out) { same_device(name, dlpack_device_of(name, out), true); }

  py::handle first_;
  const char *first_name_ = "";
  DevicePair device_{kDLCPU, 0};
  bool torch_known_ = false;
  py::object torch_;
};

struct ReleaseTensor {
  void operator()(mxfp8_tensor *t) const { mxfp8_tensor_release(t); }
};
using TensorHandle = std::unique_ptr<mxfp8_tensor, ReleaseTensor>;

// One direction of an MXFP8 tensor as export_components and dequantize describe it: direction, shape (None:
// data's), fp8_dtype and swizzled, read in that order.
struct TensorArgs {
  int direction;
  std::optional<std::vector<int64_t>> shape;
  int format;
  bool swizzled;
  TensorArgs(py::handle direction_arg, py::handle shape_arg_, py::handle fp8_dtype, py::handle swizzled_arg, bool &plain)
      : direction(choice("direction", direction_arg, kDirections)),
        shape(shape_arg_.is_none() ? std::nullopt : std::optional(shape_arg("shape", shape_arg_, plain))),
        format(choice("fp8_dtype", fp8_dtype, kFormats)),
        swizzled(flag("swizzled", swizzled_arg, plain)) {
    // The library reads ndim 0 as "the data's shape": a () given is the caller's mistake, not that.
    if (shape && shape->empty()) throw py::value_error("shape is empty: an MXFP8 tensor needs a last dimension K");
  }
};

// The library's handle on one direction's data and scale_inv (taken into `taken`, which it then owns).
TensorHandle tensor_of(TakenTensor (&taken)[2], const std::optional<std::vector<int64_t>> &shape, int format,
                       bool swizzled, int direction, int block) {
  return TensorHandle(one_direction_tensor(tensor_desc(format, block, swizzled, shape ? &*shape : nullptr), direction,
                                           taken[0], taken[1], nullptr, check));
}

// A new tensor from the framework's allocator, owned here until handed back.
std::unique_ptr<TakenTensor> allocate(const Exchange &ex, DLDataType dtype, std::vector<int64_t> shape, const char *name) {
  DLTensor prototype{};
  prototype.device = ex.device;
  prototype.dtype = dtype;
  prototype.ndim = static_cast<int32_t>(shape.size());
  prototype.shape = shape.data();
  std::string error;
  auto t = std::make_unique<TakenTensor>();
  auto record = [](void *ctx, const char *kind, const char *message) {
    *static_cast<std::string *>(ctx) = std::string(kind ? kind : "error") + ": " + (message ? message : "");
  };
  if (ex.api->managed_tensor_allocator(&prototype, &t->managed, &error, record) != 0 || !t->managed) {
    t->managed = nullptr;
    PyErr_SetString(PyExc_MemoryError, (std::string(name) + ": the framework could not allocate it: " + error).c_str());
    throw py::error_already_set();
  }
  return t;
}

// The classes export_components and quantize return (mxfp8.Components and mxfp8.Quantized, NamedTuples),
// handed over once by the Python layer (set_result_types) and built here with no Python-level __new__ call.
PyTypeObject *components_type = nullptr;  // strong references, kept for the life of the process
PyTypeObject *quantized_type = nullptr;
PyTypeObject *converted_type = nullptr;

// items as a `type` (a plain tuple before set_result_types ran).
py::object named_tuple(PyTypeObject *type, std::initializer_list<py::object *> items) {
  if (!type) type = &PyTuple_Type;
  const Py_ssize_t n = static_cast<Py_ssize_t>(items.size());
  // What tuple.__new__(type, items) does for a tuple subclass without a __dict__.
  PyObject *result = type == &PyTuple_Type ? PyTuple_New(n) : type->tp_alloc(type, n);
  if (!result) throw py::error_already_set();
  Py_ssize_t i = 0;
  for (py::object *item : items) PyTuple_SET_ITEM(result, i++, item->release().ptr());
  return py::reinterpret_steal<py::object>(result);
}

PyTypeObject *result_type(py::handle cls) {
  auto *type = reinterpret_cast<PyTypeObject *>(cls.ptr());
  if (!PyType_Check(cls.ptr()) || !PyType_IsSubtype(type, &PyTuple_Type) || type->tp_dictoffset != 0)
    throw py::type_error("set_result_types: Components must be a tuple subclass without a __dict__ (a NamedTuple)");
  Py_INCREF(type);
  return type;
}

void set_result_types(py::handle components_class, py::handle quantized_class, py::handle converted_class) {
  if (!converted_class.is_none()) {
    PyTypeObject *v = result_type(converted_class);
    Py_XDECREF(reinterpret_cast<PyObject *>(converted_type));
    converted_type = v;
  }
  if (components_class.is_none()) return;
  PyTypeObject *c = result_type(components_class);
  PyTypeObject *q = quantized_class.is_none() ? nullptr : result_type(quantized_class);
  Py_XDECREF(reinterpret_cast<PyObject *>(components_type));
  components_type = c;
  if (q) {
    Py_XDECREF(reinterpret_cast<PyObject *>(quantized_type));
    quantized_type = q;
  }
}

// export_components(data, scale_inv, shape, fp8_dtype, swizzled, direction, values_dtype, scales_dtype,
// contiguous, block, stream, rows, cols): a Components.
py::object export_components_entry(PyObject *const *args) {
  py::handle data = args[0], scale_inv = args[1], shape = args[2], fp8_dtype = args[3], swizzled = args[4],
             direction = args[5], values_dtype = args[6], scales_dtype = args[7], contiguous = args[8],
             block = args[9], stream = args[10], rows = args[11], cols = args[12];
  bool plain = true;
  const bool sharded = !rows.is_none() || !cols.is_none();
  const int blk = choice("block", block, kBlocks);
  std::optional<ShardList> shard;
  if (sharded) {
    plain = false;
    if (blk != 0) throw py::value_error("rows / cols: a shard exports the stored per-32 scales, so block must be \"1x32\"");
    shard.emplace(std::vector<py::object>{py::module_::import("mxfp8._shard").attr("shard_fields")(rows, cols)}, 1);
  }
  const int vd = choice("values_dtype", values_dtype, kValuesDtypes);
  const int sd = choice("scales_dtype", scales_dtype, kScalesDtypes);
  const bool copy = flag("contiguous", contiguous, plain);
  const TensorArgs a(direction, shape, fp8_dtype, swizzled, plain);
  Call call;
  call.plain = plain;
  TakenTensor taken[2];
  call.take_tensor(stream, data, scale_inv, taken);
  TensorHandle tensor = tensor_of(taken, a.shape, a.format, a.swizzled, a.direction, blk);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.direction = a.direction;
  o.values_dtype = vd;
  o.scales_dtype = sd;
  o.padded_scales = copy ? MXFP8_PADDED_SCALES_COPY : MXFP8_PADDED_SCALES_STRIDED_VIEW;
  o.scales_granularity = blk == 1 ? MXFP8_SCALES_PER_32X32 : MXFP8_SCALES_PER_32;
  if (shard) o.shard = shard->data()[0];
  py::object allocator = call.allocator();
  auto [v, s] = export_pair(
      o, call.ex, allocator,
      [&](DLManagedTensorVersioned **v, DLManagedTensorVersioned **s) {
        return mxfp8_export_components(tensor.get(), &o, v, s);
      },
      [&](DLManagedTensorVersioned *m) { return call.result(m); });
  if (call.plain) ++fast_exports;
  return named_tuple(components_type, {&v, &s});
}

// quantize(x, fp8_dtype, block, rounding, scales, rowwise, columnwise, values_dtype, scales_dtype, stream
// [, allocator]): a Quantized (None for a direction not asked for). allocator (not given by mxfp8.quantize):
// a Python callable alloc(shape, dl_device) making the library's copies instead of the framework's or torch's.
py::object quantize_entry(PyObject *const *args) {
  py::handle x = args[0], fp8_dtype = args[1], block = args[2], rounding = args[3], scales = args[4],
             rowwise = args[5], columnwise = args[6], values_dtype = args[7], scales_dtype = args[8], stream = args[9],
             given_allocator = args[10];
  bool plain = true;
  const bool row = flag("rowwise", rowwise, plain), col = flag("columnwise", columnwise, plain);
  if (!row && !col) throw py::value_error("rowwise and columnwise are both False: ask for at least one direction");
  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.format = choice("fp8_dtype", fp8_dtype, kFormats);
  o.block = choice("block", block, kBlocks);
  o.scale_rounding = choice("rounding", rounding, kRoundings);
  o.scales_layout = choice("scales", scales, kLayouts);
  o.values_dtype = choice("values_dtype", values_dtype, kValuesDtypes);
  o.scales_dtype = choice("scales_dtype", scales_dtype, kScalesDtypes);
  Call call;
  call.plain = plain;
  bool bfloat16_bits = false;
  py::object input = py::reinterpret_borrow<py::object>(x);
  if (!exchange_api_of(x)) std::tie(input, bfloat16_bits) = numpy_bfloat16_as_bits(x);
  static const char *const names[1] = {"x"};
  const py::handle inputs[1] = {input};
  TakenTensor taken[1];
  call.take_inputs(stream, 1, names, inputs, taken);
  relabel_bfloat16(taken[0].tensor(), bfloat16_bits);
  o.stream = reinterpret_cast<void *>(call.ex.stream);
  py::object allocator = given_allocator.is_none() ? call.allocator() : py::reinterpret_borrow<py::object>(given_allocator);
  if (!given_allocator.is_none()) {
    call.plain = false;
    o.allocator = call_python_allocator;
  }
  if (given_allocator.is_none()) choose_allocator(o, call.ex, allocator);
  DLManagedTensorVersioned *out[4] = {};
  check(with_allocator(allocator, [&] {
    return mxfp8_quantize(taken[0].tensor(), &o, row ? &out[0] : nullptr, row ? &out[1] : nullptr,
                          col ? &out[2] : nullptr, col ? &out[3] : nullptr);
  }));
  py::object p[4];
  hand_back_all(out, p, [&](DLManagedTensorVersioned *m) { return call.result(m); });
  if (call.plain) ++fast_exports;
  return named_tuple(quantized_type, {&p[0], &p[1], &p[2], &p[3]});
}

// dequantize(data, scale_inv, shape, fp8_dtype, swizzled, direction, block, dtype, out, stream): out, or a
// new array (the framework's in exchange mode, else _quantize._empty's).
py::object dequantize_entry(PyObject *const *args) {
  py::handle data = args[0], scale_inv = args[1], shape = args[2], fp8_dtype = args[3], swizzled = args[4],
             direction = args[5], block = args[6], dtype = args[7], out = args[8], stream = args[9];
  bool plain = true;
  const int output = choice("dtype", dtype, kOutputs, false);
  const TensorArgs a(direction, shape, fp8_dtype, swizzled, plain);
  const int blk = choice("block", block, kBlocks);
  Call call;
  call.plain = plain;
  TakenTensor taken[2];
  call.take_tensor(stream, data, scale_inv, taken, out);
  const std::vector<int64_t> logical =
      a.shape ? *a.shape : std::vector<int64_t>(taken[0].tensor()->shape, taken[0].tensor()->shape + taken[0].tensor()->ndim);
  TensorHandle tensor = tensor_of(taken, a.shape, a.format, a.swizzled, a.direction, blk);
  std::unique_ptr<TakenTensor> target;
  py::object result = py::reinterpret_borrow<py::object>(out);
  bool bfloat16_bits = false;
  if (out.is_none() && call.framework_allocates()) {
    target = allocate(call.ex, output == 0 ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLBfloat, 16, 1}, logical, "out");
  } else {
    if (out.is_none())
      result = py::module_::import("mxfp8._quantize").attr("_empty")(call.torch(), call.cuda(), call.first(),
                                                                     py::tuple(py::cast(logical)), dtype);
    py::object bits = result;
    if (!exchange_api_of(result)) std::tie(bits, bfloat16_bits) = numpy_bfloat16_as_bits(result);
    target = call.take_output(bits);
    relabel_bfloat16(target->tensor(), bfloat16_bits);
  }
  mxfp8_dequantize_options o = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  o.direction = a.direction;
  o.stream = reinterpret_cast<void *>(call.ex.stream);
  check(mxfp8_dequantize(tensor.get(), &o, target->tensor()));
  if (call.plain) ++fast_exports;
  if (result.is_none()) return hand_back(call.ex, target->release());
  return result;
}

bool any_negative(const int64_t *dims, size_t n) { return std::any_of(dims, dims + n, [](int64_t d) { return d < 0; }); }

// The product of `n` dimensions (none negative): nullopt past int64; a zero anywhere makes 0, whatever the others
// multiply to (the library counts so).
std::optional<int64_t> elements(const int64_t *dims, size_t n) {
  if (std::find(dims, dims + n, int64_t{0}) != dims + n) return 0;
  int64_t p = 1;
  for (size_t i = 0; i < n; ++i)
    if (__builtin_mul_overflow(p, dims[i], &p)) return std::nullopt;
  return p;
}

// swizzle_scales(source, out, True, None, None, stream) / unswizzle_scales(source, out, False, rows, cols,
// stream): out, or a new buffer (the framework's in exchange mode, else a torch or NumPy one).
py::object swizzle_entry(PyObject *const *args) {
  py::handle source = args[0], out = args[1], swizzle_flag = args[2], rows = args[3], cols = args[4], stream = args[5];
  const bool swizzle = swizzle_flag.ptr() == Py_True;
  const char *name = swizzle ? "compact" : "swizzled";
  bool plain = true;
  int64_t r = 0, c = 0;
  if (!swizzle) {
    r = integer("rows", rows, plain, 0);
    c = integer("cols", cols, plain, 0);
  }
  Call call;
  call.plain = plain;
  const char *const names[1] = {name};
  const py::handle inputs[1] = {source};
  TakenTensor taken[1];
  call.take_inputs(stream, 1, names, inputs, taken, out);
  const DLTensor &s = *taken[0].tensor();
  // The bytes of an (R, C) matrix in the 128x4 layout, as the library sizes it.
  const auto swizzled_bytes = [](int64_t rr, int64_t cc, const std::string &what) {
    int64_t n = 0;
    const mxfp8_status st = mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_128X4, MXFP8_DIRECTION_ROWWISE, rr, cc, &n);
    if (st != MXFP8_OK) raise_status(st, what + ": " + mxfp8_last_error());
    return n;
  };
  // The product of the source's dimensions before `end` (false: past int64).
  if (s.ndim > 0 && any_negative(s.shape, static_cast<size_t>(s.ndim)))
    throw py::value_error(std::string(name) + ": its shape has a negative dimension");
  const auto product = [&s](int32_t end, int64_t &n) {
    const std::optional<int64_t> p = elements(s.shape, static_cast<size_t>(end));
    n = p.value_or(0);
    return p.has_value();
  };
  std::vector<int64_t> shape{r, c};
  int64_t held = 0;
  if (swizzle) {
    if (s.ndim < 1) throw py::value_error(std::string(name) + " is 0-dimensional: expected its last dimension to be K");
    if (!product(s.ndim - 1, held)) throw py::value_error(std::string(name) + ": its swizzled size does not fit in int64");
    shape = {swizzled_bytes(held, s.shape[s.ndim - 1], name)};
  } else if (out.is_none()) {
    // rows and cols size the new buffer: a pair that the swizzled buffer does not hold is refused before
    // anything is allocated (a lying pair asked for terabytes and failed as a MemoryError). A given out
    // is checked against them below, and the library checks the pair.
    if (const int64_t n = swizzled_bytes(r, c, "rows, cols"); !product(s.ndim, held) || held != n) {
      py::list dims;
      for (int32_t i = 0; i < s.ndim; ++i) dims.append(s.shape[i]);
      throw py::value_error("rows, cols are " + std::to_string(r) + ", " + std::to_string(c) +
                            ": the swizzled layout of a " + std::to_string(r) + " x " + std::to_string(c) +
                            " scale matrix is " + std::to_string(n) + " bytes, but swizzled has shape " +
                            repr_of(py::tuple(dims)));
    }
  }
  std::unique_ptr<TakenTensor> dst;
  py::object result = py::reinterpret_borrow<py::object>(out);
  if (out.is_none()) {
    if (call.framework_allocates()) {
      dst = allocate(call.ex, DLDataType{kDLUInt, 8, 1}, shape, "out");
    } else {
      result = call.new_bytes(shape);
      dst = call.take_output(result);
    }
  } else {
    dst = call.take_output(out);
    // unswizzle_scales(swizzled, rows, cols, out): an out that is not the (rows, cols) matrix is refused
    // (the library would read out's shape and ignore rows and cols).
    const DLTensor &o = *dst->tensor();
    if (!swizzle) {
      if (o.ndim < 1) throw py::value_error("out is 0-dimensional: expected its last dimension to be K");
      // Checked in int64 (no Python object on a call that passes); Python ints, as the product may be past
      // int64, only for a refusal's message.
      int64_t out_rows = 1;
      bool fits = true;
      for (int32_t i = 0; i + 1 < o.ndim; ++i) fits &= o.shape[i] >= 0 && !__builtin_mul_overflow(out_rows, o.shape[i], &out_rows);
      const int64_t out_cols = o.shape[o.ndim - 1];
      if (!fits || out_rows != r || out_cols != c) {
        py::object rows_held = py::int_(1);
        py::list dims_list;
        for (int32_t i = 0; i < o.ndim; ++i) {
          dims_list.append(o.shape[i]);
          if (i + 1 < o.ndim) rows_held = rows_held * py::int_(o.shape[i]);
        }
        throw py::value_error("out holds a " + py::str(rows_held).cast<std::string>() + " x " + std::to_string(out_cols) +
                              " matrix (shape " + repr_of(py::tuple(dims_list)) + "), but rows, cols are " +
                              std::to_string(r) + ", " + std::to_string(c));
      }
    }
  }
  void *st = reinterpret_cast<void *>(call.ex.stream);
  check(swizzle ? mxfp8_swizzle_scales(taken[0].tensor(), dst->tensor(), st)
                : mxfp8_unswizzle_scales(taken[0].tensor(), dst->tensor(), st));
  if (call.plain) ++fast_exports;
  if (result.is_none()) return hand_back(call.ex, dst->release());
  return result;
}

// _import._code's refusal: "name is 'x', expected one of 'a', 'b'" (the words of `table`, in order).
template <size_t N>
int code_of(const char *name, py::handle value, const std::pair<const char *, int> (&table)[N]) {
  if (const auto code = lookup(value, table)) return *code;
  throw py::value_error(std::string(name) + " is " + repr_of(value) + ", expected one of " + keys_of(table, false));
}

constexpr std::pair<const char *, int> kTargets[] = {
    {"compact", MXFP8_SCALE_LAYOUT_COMPACT},           {"cutlass_128x4", MXFP8_SCALE_LAYOUT_128X4},
    {"trtllm", MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED},    {"deepgemm", MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED},
    {"trtllm_gated", MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED}, {"deepgemm_float32", MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32}};
constexpr std::pair<const char *, int> kGroupedScales[] = {{"padded", MXFP8_GROUPED_SCALES_PADDED},
                                                           {"compact", MXFP8_GROUPED_SCALES_COMPACT}};

// ceil(a / b) for b > 0, as Python's -(-a // b) (a may be negative: a shape the library then refuses).
int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? a / b + (a % b != 0) : a / b; }

int64_t times(int64_t a, int64_t b, const char *what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw py::value_error(std::string(what) + " overflows int64");
  return r;
}

int64_t round_up(int64_t a, int64_t b, const char *what) { return times(ceil_div(a, b), b, what); }

// A new array of `shape` (element type `dtype`, a torch / NumPy name) next to the first input where the
// framework does not allocate: torch.empty for torch inputs, numpy.empty in host memory (_convert._empty's rules).
py::object new_array(Call &call, const std::vector<int64_t> &shape, py::handle dtype_obj, const char *dtype) {
  py::tuple dims = py::cast(shape);
  py::object torch = call.torch();
  if (!torch.is_none())
    return torch.attr("empty")(dims, py::arg("dtype") = dtype_obj ? py::reinterpret_borrow<py::object>(dtype_obj)
                                                                 : torch.attr(dtype),
                               py::arg("device") = call.first().attr("device"));
  if (call.device_type() != kDLCPU && call.device_type() != kDLCUDAHost)
    throw py::type_error("outputs are allocated here for torch tensors and host arrays only: pass values= and "
                         "out= buffers of your framework (JAX: mxfp8.jax.convert allocates them, inside jit too)");
  py::module_ numpy = py::module_::import("numpy");
  return numpy.attr("empty")(dims, py::arg("dtype") = dtype);
}

// A managed tensor over `base`'s data with its own shape and strides (in elements), `base` released with
// it: DeepGEMM's strided view of a flat allocation, handed to the framework without a Python call.
struct StridedView {
  DLManagedTensorVersioned versioned{};
  DLManagedTensorVersioned *base = nullptr;
  std::vector<int64_t> shape, strides;
  static void deleter(DLManagedTensorVersioned *self) {
    auto *v = static_cast<StridedView *>(self->manager_ctx);
    if (v->base && v->base->deleter) v->base->deleter(v->base);
    delete v;
  }
  static DLManagedTensorVersioned *make(DLManagedTensorVersioned *base, std::vector<int64_t> shape,
                                        std::vector<int64_t> strides) {
    auto *v = new StridedView;
    v->base = base;
    v->shape = std::move(shape);
    v->strides = std::move(strides);
    v->versioned.version = base->version;
    v->versioned.manager_ctx = v;
    v->versioned.deleter = deleter;
    v->versioned.flags = base->flags;
    v->versioned.dl_tensor = base->dl_tensor;
    v->versioned.dl_tensor.ndim = static_cast<int32_t>(v->shape.size());
    v->versioned.dl_tensor.shape = v->shape.data();
    v->versioned.dl_tensor.strides = v->strides.data();
    return &v->versioned;
  }
};

// What mxfp8.convert writes for a source of logical shape `dims` (K last; `experts` > 0: that many grouped
// experts of equal rows, stacked), as the engine's parameter: the values' shape (padded when asked), the
// scales' shape (and DeepGEMM's strides, in elements, over a flat storage of `count` elements), and the
// bytes of one matrix's scales in the layout. The padded extents follow mxfp8_convert_options (the library
// checks the outputs' sizes against them); a pad_cols_to the library refuses is left to its message.
struct EngineParameter {
  std::vector<int64_t> values, scales, strides;
  int64_t r = 0, c = 0, per = 0, count = 0, expert_rows = 0;
};

EngineParameter engine_parameter(const std::vector<int64_t> &dims, int64_t experts, int target, int dir, int64_t rows_to,
                                 int64_t cols_to) {
  if (dims.empty()) throw py::value_error("shape must have at least one dimension (K)");
  if (any_negative(dims.data(), dims.size()))
    throw py::value_error("shape " + py::repr(py::tuple(py::cast(dims))).cast<std::string>() + " has a negative dimension");
  const bool col = dir == MXFP8_DIRECTION_COLUMNWISE;
  EngineParameter p;
  const std::optional<int64_t> rows = elements(dims.data(), dims.size() - 1);
  if (!rows) throw py::value_error("the shape's rows overflows int64");
  int64_t m = *rows, k = dims.back();
  std::vector<int64_t> lead(dims.begin(), dims.end() - 1);
  if (experts) {
    if (m % experts)
      throw py::value_error("the experts' " + std::to_string(m) + " rows do not split into " + std::to_string(experts) +
                            " experts of equal size");
    m /= experts;
    lead = {m};
    if (dims.size() < 2) throw py::value_error("grouped experts need a shape (*, K)");
  }
  p.expert_rows = m;  // the source's, before padding
  if (rows_to > 1 || cols_to > 0) {
    const int64_t halves = target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED && m % 2 == 0 ? 2 : 1;
    if (rows_to > 1) m = times(halves, round_up(m / halves, rows_to, "the padded rows"), "the padded rows");
    if (cols_to > 0 && cols_to % 32 == 0) k = round_up(k, cols_to, "the padded K");
    if (m != p.expert_rows) lead = {m};  // padded rows: one matrix of M' rows; else the lead dims stay
  }
  const int64_t r = col ? ceil_div(m, 32) : m, c = col ? k : ceil_div(k, 32);
  check(mxfp8_layout_bytes(target, dir, r, c, &p.per));
  const bool deepgemm = target == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
  const bool words = deepgemm || target == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32;
  p.r = r;
  p.c = c;
  p.count = times(std::max<int64_t>(experts, 1), p.per, "the scales' bytes") / (words ? 4 : 1);
  if (experts) p.scales.push_back(experts);
  // DeepGEMM's alone: rounded for every target, 2^63 - 1 rows of an empty K were refused.
  const int64_t packed = ceil_div(c, 4), aligned = deepgemm ? round_up(r, 4, "the aligned rows") : 0;
  switch (target) {
    case MXFP8_SCALE_LAYOUT_COMPACT:
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32:
      if (col) p.scales.push_back(r);
      else p.scales.insert(p.scales.end(), lead.begin(), lead.end());
      p.scales.push_back(c);
      break;
    case MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED:
      p.scales.insert(p.scales.end(), {r, packed});
      if (experts) p.strides.push_back(times(packed, aligned, "the scales' strides"));
      p.strides.insert(p.strides.end(), {1, aligned});
      break;
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED:
    case MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED:  // vLLM's [E, M, C] parameter (C % 4 == 0 there)
      p.scales.insert(p.scales.end(), {r, round_up(c, 4, "the scales' columns")});
      break;
    default:  // cutlass_128x4: flat per matrix
      p.scales.push_back(experts ? p.per : p.count);
  }
  if (!deepgemm) {
    int64_t n = 1;
    for (int64_t e : p.scales) n = times(n, e, "the scales' elements");
    if (n != p.count) throw std::runtime_error("convert: the engine parameter's shape does not hold the layout's bytes");
  }
  p.values = experts ? std::vector<int64_t>{experts, m} : lead;
  p.values.push_back(k);
  return p;
}

// engine_parameter(shape, target, direction, num_experts, pad_rows_to, pad_cols_to): (values shape, scales
// shape, the bytes of one matrix's scales in the layout), for mxfp8.jax.convert's results.
py::object engine_parameter_entry(PyObject *const *args) {
  bool plain = true;
  const std::vector<int64_t> dims = shape_arg("shape", args[0], plain);
  const int target = code_of("target", args[1], kTargets);
  const int dir = code_of("direction", args[2], kDirections);
  const int64_t experts = py::handle(args[3]).is_none() ? 0 : integer("num_experts", args[3], plain, 1, INT32_MAX);
  const EngineParameter p = engine_parameter(dims, experts, target, dir, integer("pad_rows_to", args[4], plain),
                                             integer("pad_cols_to", args[5], plain));
  return py::make_tuple(py::tuple(py::cast(p.values)), py::tuple(py::cast(p.scales)), p.per);
}

// convert(data, scale_inv, target, shape, fp8_dtype, swizzled, direction, num_experts, scales, values, out,
// zero_exponent_as_one, pad_rows_to, pad_cols_to, pad_scale, stream): a Converted (values None unless asked
// for). New outputs are the inputs' framework's (its allocator in exchange mode, else torch.empty /
// numpy.empty), the scales shaped as the target's engine parameter (_convert's docs).
py::object convert_entry(PyObject *const *args) {
  py::handle data = args[0], scale_inv = args[1], target_arg = args[2], shape = args[3], fp8_dtype = args[4],
             swizzled = args[5], direction = args[6], num_experts = args[7], scales = args[8], values = args[9],
             out = args[10], zero_exponent_as_one = args[11], pad_rows_to = args[12], pad_cols_to = args[13],
             pad_scale = args[14], stream = args[15];
  bool plain = true;
  const int target = code_of("target", target_arg, kTargets);
  std::optional<std::vector<int64_t>> given;
  if (!shape.is_none()) given = shape_arg("shape", shape, plain);
  const int64_t experts = num_experts.is_none() ? 0 : integer("num_experts", num_experts, plain, 1, INT32_MAX);
  const int dir = code_of("direction", direction, kDirections);
  const int64_t rows_to = integer("pad_rows_to", pad_rows_to, plain), cols_to = integer("pad_cols_to", pad_cols_to, plain);
  const int format = code_of("fp8_dtype", fp8_dtype, kFormats);
  const bool swz = flag("swizzled", swizzled, plain);
  const int grouped_scales = code_of("scales", scales, kGroupedScales);
  const bool zero_as_one = flag("zero_exponent_as_one", zero_exponent_as_one, plain);
  const int32_t fill = static_cast<int32_t>(integer("pad_scale", pad_scale, plain, INT32_MIN, INT32_MAX));
  // values: a flag (NumPy's bool too, as every flag), None (False) or the buffer to write them into.
  const bool values_flag = PyBool_Check(values.ptr()) || numpy_bool(values);
  const bool new_values = values_flag && flag("values", values, plain);
  const bool given_values = !values_flag && !values.is_none();

  Call call;
  call.plain = plain;
  TakenTensor taken[2];
  call.take_tensor(stream, data, scale_inv, taken, out);
  if (given_values) call.check_output("values", values);
  const DLTensor &d = *taken[0].tensor();
  const DLDataType data_dtype = d.dtype;
  const std::vector<int64_t> dims = given ? *given : std::vector<int64_t>(d.shape, d.shape + d.ndim);
  const EngineParameter param = engine_parameter(dims, experts, target, dir, rows_to, cols_to);
  const std::vector<int64_t> &pshape = param.scales, &pstrides = param.strides, &vshape = param.values;
  const int64_t r = param.r, count = param.count, expert_rows = param.expert_rows;
  const bool deepgemm = target == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
  const bool words = deepgemm || target == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32;

  // The source's handle before any output is made: a shape (or experts) the data does not hold is refused
  // here, not once outputs of its size were allocated (a lying shape asked for terabytes: a MemoryError).
  TensorHandle tensor;
  std::unique_ptr<mxfp8_grouped_tensor, void (*)(mxfp8_grouped_tensor *)> group(nullptr, mxfp8_grouped_tensor_release);
  if (experts > 0 && given) {
    // The grouped desc takes K from `shape` and the data as so many bytes, so a shape that is not the data's
    // (another K) read every row at the wrong offsets; one tensor's is refused by the library.
    const std::optional<int64_t> given_n = elements(dims.data(), dims.size()),
                                 data_n = elements(d.shape, static_cast<size_t>(d.ndim));
    if (!given_n || given_n != data_n || (d.ndim >= 2 && dims.back() != d.shape[d.ndim - 1]))
      throw py::value_error("shape " + py::repr(py::tuple(py::cast(dims))).cast<std::string>() + " is not data's shape " +
                            py::repr(py::tuple(py::cast(std::vector<int64_t>(d.shape, d.shape + d.ndim)))).cast<std::string>() +
                            " (the experts stacked: the same elements and the same K)");
  }
  if (experts > 0) {
    mxfp8_grouped_desc desc =
        grouped_desc(format, swz, grouped_scales, static_cast<int32_t>(experts), dims.back(), expert_rows);
    desc.data = taken[0].managed;
    desc.scale_inv = taken[1].managed;
    mxfp8_grouped_tensor *g = nullptr;
    check(mxfp8_grouped_tensor_create(&desc, &g));
    group.reset(g);
    taken[0].release();  // owned by the group now
    taken[1].release();
  } else {
    tensor = tensor_of(taken, dims, format, swz, dir, MXFP8_BLOCK_1X32);
  }

  const char *word = deepgemm ? "int32" : target == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 ? "float32" : "uint8";
  const DLDataType scale_dtype = deepgemm ? DLDataType{kDLInt, 32, 1}
                                 : words  ? DLDataType{kDLFloat, 32, 1}
                                          : DLDataType{kDLUInt, 8, 1};
  const std::vector<int64_t> &alloc_shape = deepgemm ? std::vector<int64_t>{count} : pshape;
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = target;
  o.direction = dir;
  o.scale_fixup = zero_as_one ? MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE : MXFP8_SCALE_FIXUP_NONE;
  o.pad_rows_to = rows_to;
  o.pad_cols_to = cols_to;
  o.pad_scale = fill;
  o.stream = reinterpret_cast<void *>(call.ex.stream);
  // New outputs past 64 MiB are asked of the library first (MXFP8_CHECK_ONLY, over stand-ins at addresses
  // no memory backs, far above any real one): an option it refuses (a pad_scale of 255 with rows padded to
  // 2^40) is its ValueError, not a MemoryError for outputs of that size. Smaller ones are allocated and the
  // call itself refuses, with the same message.
  int64_t new_bytes = 0;
  if (out.is_none()) new_bytes = times(count, words ? 4 : 1, "the scales' bytes");
  if (new_values) {
    int64_t n = 1;
    for (int64_t e : vshape) n = times(n, e, "the values' bytes");
    new_bytes = new_bytes > INT64_MAX - n ? INT64_MAX : new_bytes + n;
  }
  std::unique_ptr<TakenTensor> scales_out, values_out;
  if (given_values) values_out = call.take_output(values, "values");
  if (!out.is_none()) scales_out = call.take_output(out, "out");
  if (new_bytes > (int64_t{1} << 26)) {
    std::vector<int64_t> scales_shape = alloc_shape, values_shape = vshape;
    DLTensor scales_stand_in{reinterpret_cast<void *>(uintptr_t{1} << 60), d.device,
                             static_cast<int32_t>(scales_shape.size()), scale_dtype, scales_shape.data(), nullptr, 0};
    DLTensor values_stand_in{reinterpret_cast<void *>(uintptr_t{1} << 61), d.device,
                             static_cast<int32_t>(values_shape.size()), DLDataType{kDLUInt, 8, 1}, values_shape.data(),
                             nullptr, 0};
    DLTensor *sv = new_values ? &values_stand_in : values_out ? values_out->tensor() : nullptr;
    DLTensor *ss = scales_out ? scales_out->tensor() : &scales_stand_in;
    mxfp8_convert_options checked = o;
    checked.flags |= MXFP8_CHECK_ONLY;
    check(group ? mxfp8_grouped_convert(group.get(), &checked, sv, ss) : mxfp8_convert(tensor.get(), &checked, sv, ss));
  }
  // New outputs: the framework's allocator in exchange mode (DeepGEMM's strided view is made with torch's
  // as_strided, so other frameworks' come from numpy), else torch.empty / numpy.empty.
  py::object scales_obj = py::reinterpret_borrow<py::object>(out), values_obj = py::none();
  // DeepGEMM's view of rows not a multiple of 4 does not reach the layout's end: made with torch's as_strided
  // (the storage the whole allocation), so it is the framework's allocation only for torch.
  const bool exact_view = r % 4 == 0;
  const bool framework = call.framework_allocates() && (!deepgemm || exact_view || !call.torch().is_none());
  if (out.is_none()) {
    if (framework) {
      scales_out = allocate(call.ex, scale_dtype, alloc_shape, "out");
    } else {
      scales_obj = new_array(call, alloc_shape, py::handle(), word);
      scales_out = call.take_output(scales_obj, "out");
    }
  }
  if (new_values) {
    if (call.framework_allocates()) {
      const bool byte = data_dtype.bits == 8 && data_dtype.lanes == 1;
      values_out = allocate(call.ex, byte ? data_dtype : DLDataType{kDLUInt, 8, 1}, vshape, "values");
    } else {
      py::object torch = call.torch();
      values_obj = new_array(call, vshape, torch.is_none() ? py::handle() : py::handle(data.attr("dtype")), "uint8");
      values_out = call.take_output(values_obj, "values");
    }
  } else if (given_values) {
    values_obj = py::reinterpret_borrow<py::object>(values);
  }

  DLTensor *v = values_out ? values_out->tensor() : nullptr;
  mxfp8_status st;
  {
    py::gil_scoped_release unlocked;
    st = group ? mxfp8_grouped_convert(group.get(), &o, v, scales_out->tensor())
               : mxfp8_convert(tensor.get(), &o, v, scales_out->tensor());
  }
  group.reset();
  check(st);
  if (out.is_none()) {
    // DeepGEMM's view made by the framework from DLPack strides when its extent is the whole layout (rows a
    // multiple of 4: torch then gives it the allocation's storage, as as_strided does); else as_strided.
    if (framework && deepgemm && exact_view) {
      scales_obj = hand_back(call.ex, StridedView::make(scales_out->release(), pshape, pstrides));
    } else if (framework) {
      scales_obj = hand_back(call.ex, scales_out->release());
    }
    if (deepgemm && !(framework && exact_view)) {  // DeepGEMM's strided view of the flat layout (the library wrote every byte of it)
      py::tuple view_shape = py::cast(pshape), view_strides = py::cast(pstrides);
      if (!call.torch().is_none()) {
        scales_obj = scales_obj.attr("as_strided")(view_shape, view_strides);
      } else {
        for (size_t i = 0; i < pstrides.size(); ++i) view_strides[i] = py::int_(pstrides[i] * 4);
        scales_obj = py::module_::import("numpy.lib.stride_tricks").attr("as_strided")(
            scales_obj, view_shape, view_strides, py::arg("writeable") = true);
      }
    }
  }
  if (new_values && call.framework_allocates()) values_obj = hand_back(call.ex, values_out->release());
  if (call.plain) ++fast_exports;
  return named_tuple(converted_type, {&values_obj, &scales_obj});
}

// ---- NVFP4 -------------------------------------------------------------------------------------------
// The Python handle on an NVFP4 mxfp8_tensor: one or both directions' data, block scales and amax, taken
// like Tensor's inputs (the inputs' framework's exchange API when `exchange`, else __dlpack__).
class Nvfp4Tensor : public Handle {
 public:
  Nvfp4Tensor(py::object rowwise_data, py::object rowwise_scale_inv, py::object rowwise_amax,
              py::object columnwise_data, py::object columnwise_scale_inv, py::object columnwise_amax,
              std::optional<std::vector<int64_t>> shape, bool swizzled, int32_t e4m3_max, py::object stream,
              bool exchange) {
    mxfp8_tensor_desc desc = tensor_desc(MXFP8_FORMAT_NVFP4, MXFP8_BLOCK_1X16, swizzled, shape ? &*shape : nullptr);
    desc.e4m3_max = e4m3_max_ = e4m3_max;
    const py::object inputs[6] = {rowwise_data,    rowwise_scale_inv,    rowwise_amax,
                                  columnwise_data, columnwise_scale_inv, columnwise_amax};
    static const char *const names[6] = {"data",           "scale_inv",           "amax",
                                         "columnwise data", "columnwise scale_inv", "columnwise amax"};
    DLManagedTensorVersioned **const fields[6] = {&desc.rowwise_data,    &desc.rowwise_scale_inv,    &desc.rowwise_amax,
                                                  &desc.columnwise_data, &desc.columnwise_scale_inv, &desc.columnwise_amax};
    create(desc, inputs, names, fields, exchange, stream);
  }
  int32_t e4m3_max() const { return e4m3_max_; }

  // (values, scales, global_scale): mxfp8_export_components, then mxfp8_export_global_scale, with the same
  // options (values_dtype / scales_dtype as mxfp8_values_dtype / mxfp8_scales_dtype: FP8 (0) is float4 and
  // E8M0 (1) float8_e4m3fn for NVFP4); stream None: the framework's current stream in exchange mode.
  // shard: None, or options.shard as _shard.shard_fields gives it.
  py::tuple export_components(int direction, int values_dtype, int scales_dtype, bool contiguous, int global_scale,
                              py::object stream, py::object shard) {
    const ShardList shards(shard.is_none() ? std::nullopt : std::optional<std::vector<py::object>>({shard}), 1);
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    if (shards.data()) o.shard = shards.data()[0];
    o.direction = direction;
    o.values_dtype = values_dtype;
    o.scales_dtype = scales_dtype;
    o.padded_scales = contiguous ? MXFP8_PADDED_SCALES_COPY : MXFP8_PADDED_SCALES_STRIDED_VIEW;
    o.global_scale = global_scale;
    const Exchange ex = exchange_for(api_, device_, stream);
    py::object no_allocator = py::none();  // the framework's in exchange mode, else the library's
    auto [values, scales] = export_pair(
        o, ex, no_allocator,
        [&](DLManagedTensorVersioned **v, DLManagedTensorVersioned **s) {
          return mxfp8_export_components(handle_, &o, v, s);
        },
        [&](DLManagedTensorVersioned *m) { return hand_back(ex, m); });
    DLManagedTensorVersioned *global = nullptr;
    check(mxfp8_export_global_scale(handle_, &o, &global));
    return py::make_tuple(values, scales, hand_back(ex, global));
  }

  // mxfp8_dequantize into the DLPack object `output` (float32 or bfloat16).
  void dequantize(int direction, py::object output, py::object stream, py::object dlpack_stream) {
    mxfp8_dequantize_options o = MXFP8_DEQUANTIZE_OPTIONS_INIT;
    o.direction = direction;
    Exchange ex = exchange_for(api_, device_, stream, dlpack_stream);
    o.stream = reinterpret_cast<void *>(ex.stream);
    check(mxfp8_dequantize(handle_, &o, take_bfloat16(output, "out", ex, Access::Write)->tensor()));
  }

 private:
  int32_t e4m3_max_ = 0;
};
// ---- Buckets of MXFP8 and NVFP4 entries ---------------------------------------------------------------
// The handles of a mixed bucket: entry i is a Tensor or an Nvfp4Tensor (an mxfp8_tensor of format NVFP4 to
// the transfer); the exchange API and device of entry 0 decide the stream, as for export_bucket.
struct MixedHandles {
  std::vector<const mxfp8_tensor *> tensors;
  std::vector<const Handle *> owners;  // their Tensor / Nvfp4Tensor objects
  std::vector<int32_t> e4m3_maxes;  // 0 at MXFP8 entries
  const DLPackExchangeAPI *api = nullptr;
  DLDevice device{kDLCPU, 0};
};

MixedHandles mixed_handles(const py::list &tensors) {
  MixedHandles h;
  for (size_t i = 0; i < tensors.size(); ++i) {
    py::handle t = tensors[i];
    const DLPackExchangeAPI *api = nullptr;
    DLDevice device{kDLCPU, 0};
    if (py::isinstance<Tensor>(t)) {
      const Tensor &x = t.cast<const Tensor &>();
      h.tensors.push_back(x.handle()), h.owners.push_back(&x), h.e4m3_maxes.push_back(0);
      api = x.api(), device = x.device();
    } else if (py::isinstance<Nvfp4Tensor>(t)) {
      const Nvfp4Tensor &x = t.cast<const Nvfp4Tensor &>();
      h.tensors.push_back(x.handle()), h.owners.push_back(&x), h.e4m3_maxes.push_back(x.e4m3_max());
      api = x.api(), device = x.device();
    } else {
      throw py::type_error("tensors[" + std::to_string(i) + "] is neither a Tensor nor an Nvfp4Tensor");
    }
    if (i == 0) h.api = api, h.device = device;
  }
  return h;
}

// ([(values_offset, values_bytes, scales_offset, scales_bytes)], [(amax_offset, amax_bytes, e4m3_max)]
// (zeros at MXFP8 entries), total bytes).
py::tuple bucket_plan(const py::list &tensors, int direction, uint64_t alignment,
                            const std::optional<std::vector<py::object>> &shards) {
  const MixedHandles h = mixed_handles(tensors);
  const ShardList shard_list(shards, h.tensors.size());
  TensorTransfer t(h.tensors, direction, shard_list);
  return t.plan(alignment, h.e4m3_maxes);
}

// Each entry's bytes in a bucket of its own (mxfp8_bucket_parts of that entry alone): what iter_buckets and
// prepare_buckets group tensors by, so that no size is computed outside the library.
// A refusal names the entry by names[i] (the caller's "tensors['w']"), the library's message being about a
// desc of that entry alone.
std::vector<uint64_t> bucket_entry_bytes(const py::list &tensors, int direction, uint64_t alignment,
                                         const std::optional<std::vector<py::object>> &shards,
                                         const std::vector<std::string> &names) {
  const MixedHandles h = mixed_handles(tensors);
  const ShardList shard_list(shards, h.tensors.size());
  TensorTransfer t(h.tensors, direction, shard_list);
  t.desc.count = 1;  // entry i alone: the desc's arrays from entry i on
  std::vector<uint64_t> bytes;
  bytes.reserve(h.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    t.desc.tensors = h.tensors.data() + i;
    if (shard_list.data()) t.desc.shards = shard_list.data() + i;
    mxfp8_bucket_part part{};
    uint64_t total = 0;
    const mxfp8_status st = mxfp8_bucket_parts(&t.desc, alignment, &part, &total);
    if (st != MXFP8_OK) raise_status(st, (i < names.size() ? names[i] + ": " : std::string()) + mxfp8_last_error());
    bytes.push_back(total);
  }
  return bytes;
}

// A bucket fill: `tensors` (their exchange API and device those of the first) into a bucket at the parts of
// `plan` and `nvfp4_plan`; with `shards`, each tensor's shard.
struct BucketFill {
  MixedHandles h;
  ShardList shard_list;
  TensorTransfer t;
  BucketFill(const py::list &tensors, const std::vector<EntryRow> &plan, const std::vector<Nvfp4Row> &nvfp4_plan,
             int direction, const std::optional<std::vector<py::object>> &shards)
      : h(mixed_handles(tensors)), shard_list(shards, h.tensors.size()), t(h.tensors, direction, shard_list) {
    t.set_parts(plan, nvfp4_plan, h.e4m3_maxes);
  }
};

// The bucket as the caller passed it: 1-D (what unpack_bucket and import_bucket read back; the library fills any
// contiguous shape) and, when of bytes, at least `total` of them (the plan's size). Said here, in the caller's
// name: the library would name the desc.parts_out entry that runs past its end, a field the caller never saw.
void check_bucket(const DLTensor *b, uint64_t total, const std::string &bucket_name) {
  if (b->ndim != 1) {
    std::string shape = "(";
    for (int i = 0; i < b->ndim; ++i) shape += (i ? ", " : "") + std::to_string(b->shape[i]);
    throw py::value_error(bucket_name + " must be a 1-D byte buffer, got shape " + shape + ")");
  }
  if (b->dtype.bits == 8 && b->dtype.lanes == 1 && b->shape[0] >= 0 && static_cast<uint64_t>(b->shape[0]) < total)
    throw py::value_error(bucket_name + " holds " + std::to_string(b->shape[0]) + " bytes but these tensors take " +
                          std::to_string(total));
}

// stream None: the framework's current stream in exchange mode.
void export_bucket(const py::list &tensors, const std::vector<EntryRow> &plan, const std::vector<Nvfp4Row> &nvfp4_plan,
                   uint64_t total, py::object bucket, int direction, py::object stream, py::object dlpack_stream,
                   const std::string &bucket_name, const std::optional<std::vector<py::object>> &shards) {
  BucketFill fill(tensors, plan, nvfp4_plan, direction, shards);
  Exchange ex = exchange_for(fill.h.api, fill.h.device, stream, dlpack_stream);
  auto taken = take(bucket, bucket_name.c_str(), ex, Access::Write);
  check_bucket(taken->tensor(), total, bucket_name);
  fill.t.desc.bucket_out = taken->tensor();
  check(mxfp8_transfer(&fill.t.desc, reinterpret_cast<void *>(ex.stream)));
}

std::unique_ptr<Plan> prepare_bucket(const py::list &tensors, const std::vector<EntryRow> &plan,
                                     const std::vector<Nvfp4Row> &nvfp4_plan, uint64_t total, py::object bucket, int direction,
                                     py::object dlpack_stream, const std::string &bucket_name,
                                     const std::optional<std::vector<py::object>> &shards) {
  if (tensors.empty()) throw py::value_error("tensors is empty: nothing to prepare");
  BucketFill fill(tensors, plan, nvfp4_plan, direction, shards);
  Exchange ex = exchange_for(fill.h.api, fill.h.device, py::none(), std::move(dlpack_stream));
  PlanDestinations kept;
  fill.t.desc.bucket_out = kept.add(bucket, bucket_name, ex);
  check_bucket(fill.t.desc.bucket_out, total, bucket_name);
  for (const Handle *source : fill.h.owners) source->pin(kept.pins);
  return kept.prepare(fill.t.desc, ex);
}

}  // namespace

// The receiver's import (import_bindings.cpp).
void register_import(py::module_ &m);

PYBIND11_MODULE(_mxfp8, m) {
  m.doc() = "Low-level binding of libmxfp8; use the mxfp8 package instead.";
  m.attr("version") = mxfp8_version();
  m.attr("header_version") = MXFP8_VERSION;
#ifdef MXFP8_PYTHON_WITH_CUDA
  m.attr("with_cuda") = true;
#else
  m.attr("with_cuda") = false;
#endif

  py::class_<Array>(m, "Array", "A DLPack-exportable output of an export (values or scales).")
      .def("__dlpack__", &Array::dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", &Array::dlpack_device)
      .def_property_readonly("shape", &Array::shape)
      .def_property_readonly("strides", &Array::strides)
      .def_property_readonly("dtype", &Array::dtype)
      .def_property_readonly("is_copy", &Array::is_copy)
      .def_property_readonly("read_only", &Array::read_only)
      .def_property_readonly("data_ptr", &Array::data_ptr)
      .def("__repr__", [](const Array &a) {
        return "mxfp8.Array(shape=" + py::repr(a.shape()).cast<std::string>() + ", dtype=" + a.dtype() +
               (a.is_copy() ? ", copy" : ", view") + ")";
      });

  py::class_<Tensor>(m, "Tensor", "An mxfp8_tensor handle over DLPack inputs.")
      .def(py::init<py::object, py::object, py::object, py::object, std::optional<std::vector<int64_t>>, int, bool,
                    int, py::object, std::optional<std::string>, std::optional<std::string>, bool>(),
           py::kw_only(), py::arg("rowwise_data") = py::none(), py::arg("rowwise_scale_inv") = py::none(),
           py::arg("columnwise_data") = py::none(), py::arg("columnwise_scale_inv") = py::none(),
           py::arg("shape") = py::none(), py::arg("format") = 1, py::arg("swizzled") = false, py::arg("block") = 0,
           py::arg("stream") = py::none(), py::arg("data_name") = py::none(), py::arg("scale_inv_name") = py::none(),
           py::arg("exchange") = false)
      .def("export_components", &Tensor::export_components, py::kw_only(), py::arg("direction") = 0,
           py::arg("values_dtype") = 0, py::arg("scales_dtype") = 0, py::arg("contiguous") = true,
           py::arg("block_scales") = false, py::arg("stream") = py::none(), py::arg("allocator") = py::none());

  py::class_<Plan>(m, "Plan", "A prepared transfer (an mxfp8_plan) and the objects it writes: mxfp8.Plan's core.")
      .def("run", &Plan::run, py::arg("stream") = py::none(),
           "mxfp8_plan_run on `stream` (a cudaStream_t as an int; None: the framework's current stream, else the "
           "legacy default stream).")
      .def("check_storages", &Plan::check_storages,
           "ValueError when a torch storage the plan reads or writes was resized since it was prepared.");
  py::class_<StoragePins>(m, "StoragePins",
                          "The storages of the torch tensors among `objects` (others are skipped), held, with the "
                          "address and size each had: iter_buckets' sources between two buckets.")
      .def(py::init([](const py::iterable &objects) {
             std::vector<py::object> storages;
             for (py::handle obj : objects)
               if (py::object storage = storage_of(obj); !storage.is_none()) storages.push_back(std::move(storage));
             return StoragePins(std::move(storages));
           }),
           py::arg("objects"))
      .def("check", &StoragePins::check, py::arg("resized"), py::arg("advice"),
           "ValueError \"<resized> (<address>, <bytes> bytes, is now ...): <advice>\" for the first storage that "
           "moved or changed size.");
  m.def("prepare_export", &prepare_export, py::arg("tensors"), py::arg("destinations"), py::arg("direction") = 0,
        py::arg("dlpack_stream") = py::none(), py::arg("names") = py::none(),
        "The compact scales of `tensors` into `destinations`, checked once (mxfp8_transfer_prepare): a Plan.");
  m.def("nvfp4_quantize", &nvfp4_quantize, py::arg("inputs"), py::arg("values"), py::arg("scales"), py::arg("amax"),
        py::kw_only(), py::arg("fused"), py::arg("amax_scope"), py::arg("amax_mode"), py::arg("four_over_six"),
        py::arg("e4m3_max"), py::arg("layout"), py::arg("direction") = 0, py::arg("stream") = py::none(),
        py::arg("dlpack_stream") = py::none(),
        "mxfp8_nvfp4_quantize_into into caller buffers");

  py::class_<Grouped>(m, "Grouped", "An mxfp8_grouped_tensor handle over flat DLPack inputs.")
      .def(py::init<py::object, py::object, int32_t, int64_t, std::optional<std::vector<int64_t>>, int64_t,
                    std::optional<std::vector<int64_t>>, int, bool, int, py::object, bool>(),
           py::kw_only(), py::arg("data"), py::arg("scale_inv"), py::arg("num_experts"), py::arg("cols"),
           py::arg("expert_rows") = py::none(), py::arg("uniform_rows") = 0, py::arg("scale_offsets") = py::none(),
           py::arg("format") = 1, py::arg("swizzled") = false, py::arg("packing") = 0, py::arg("stream") = py::none(),
           py::arg("exchange") = false)
      .def("expert", &Grouped::expert, py::arg("expert"))
      .def("export_experts", &Grouped::export_experts, py::arg("experts") = py::none(), py::kw_only(), py::arg("values_dtype") = 0,
           py::arg("scales_dtype") = 0, py::arg("stream") = py::none(), py::arg("allocator") = py::none());

  // The Python API's calls (METH_FASTCALL, positional: each Python function passes its arguments on).
  static PyMethodDef entries[] = {
      {"export_components", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<export_components_entry, 13>)),
       METH_FASTCALL,
       "export_components(data, scale_inv, shape, fp8_dtype, swizzled, direction, values_dtype, scales_dtype, "
       "contiguous, block, stream, rows, cols)\n--\n\nmxfp8.export_components: a Components."},
      {"quantize", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<quantize_entry, 11, 1>)), METH_FASTCALL,
       "quantize(x, fp8_dtype, block, rounding, scales, rowwise, columnwise, values_dtype, scales_dtype, stream, "
       "allocator=None)\n--\n\nmxfp8.quantize: a Quantized. allocator (positional; mxfp8.quantize passes none): "
       "alloc(shape, dl_device) makes the library's copies."},
      {"dequantize", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<dequantize_entry, 10>)),
       METH_FASTCALL,
       "dequantize(data, scale_inv, shape, fp8_dtype, swizzled, direction, block, dtype, out, stream)\n--\n\n"
       "mxfp8.dequantize: out, or the new array."},
      {"convert", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<convert_entry, 16>)), METH_FASTCALL,
       "convert(data, scale_inv, target, shape, fp8_dtype, swizzled, direction, num_experts, scales, values, out, "
       "zero_exponent_as_one, pad_rows_to, pad_cols_to, pad_scale, stream)\n--\n\nmxfp8.convert: a Converted."},
      {"engine_parameter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<engine_parameter_entry, 6>)),
       METH_FASTCALL,
       "engine_parameter(shape, target, direction, num_experts, pad_rows_to, pad_cols_to)\n--\n\n(values shape, "
       "scales shape, bytes of one matrix's scales): what mxfp8.convert writes, as the engine's parameter."},
      {"swizzle_scales", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<swizzle_entry, 6>)),
       METH_FASTCALL,
       "swizzle_scales(source, out, swizzle, rows, cols, stream)\n--\n\nmxfp8.swizzle_scales (swizzle True) and "
       "mxfp8.unswizzle_scales (swizzle False; rows and cols its arguments): out, or the new buffer."},
  };
  for (PyMethodDef &def : entries)
    m.add_object(def.ml_name, py::reinterpret_steal<py::object>(PyCFunction_NewEx(&def, nullptr, m.attr("__name__").ptr())));
  m.def("set_result_types", &set_result_types, py::arg("components") = py::none(), py::arg("quantized") = py::none(),
        py::arg("converted") = py::none(),
        "The Components, Quantized and Converted classes export_components, quantize and convert return (the Python "
        "layer calls this once).");
  m.def("inputs", &inputs_of, py::arg("stream"), py::arg("objects"),
        "_args.inputs: (torch, cuda, stream, first name, first device, exchange) of a call on the dict `objects`.");
  m.def("check_output", [](const std::string &name, py::handle obj, const std::string &first_name,
                           std::pair<int64_t, int64_t> device) {
    same_device(name, dlpack_device_of(name.c_str(), obj), first_name, device, true);
  }, py::arg("name"), py::arg("obj"), py::arg("first_name"), py::arg("device"),
        "An output lives where the inputs do (asked with __dlpack_device__ only); a ValueError naming both.");
  m.def("stream_pointer", &stream_pointer, py::arg("stream"), py::arg("torch"), py::arg("data"), py::arg("cuda"),
        "A cudaStream_t as an int, from a torch / CuPy stream, an int, or torch's current stream (None).");
  m.def("torch_allocator", &torch_allocator, py::arg("torch"), py::arg("data"),
        "The allocator of the library's copies for torch inputs (torch.empty on data's device; None without torch).");
  m.def("dlpack_meta", &dlpack_meta, py::arg("name"), py::arg("obj"),
        "(shape, dtype name) as obj's DLPack capsule says them (for a producer without .shape or .dtype).");
  m.def("torch_of", &torch_of, py::arg("obj"), "The torch module when obj is a torch tensor, else None.");
  m.def("has_exchange_api", [](py::handle obj) { return exchange_api_of(obj) != nullptr; }, py::arg("obj"),
        "Whether obj's type publishes a DLPack C exchange API this build uses.");
  m.def("taken_counts", [] {
    return py::dict(py::arg("exchange_api") = taken_by_exchange_api, py::arg("dlpack") = taken_by_dunder_dlpack);
  }, "How many objects were taken through each path (for tests).");
  m.def("taken_by_jax", [] { return taken_by_jax; },
        "How many jax.Arrays were taken through jaxlib's C++ export rather than __dlpack__ (for tests).");
  m.def("fast_exports", [] { return fast_exports; }, "How many calls of the Python API were plain: every object taken through its framework's exchange API, no "
        "Python code run for an argument (for tests).");
  py::class_<Nvfp4Tensor>(m, "Nvfp4Tensor", "An NVFP4 mxfp8_tensor handle over DLPack inputs.")
      .def(py::init<py::object, py::object, py::object, py::object, py::object, py::object,
                    std::optional<std::vector<int64_t>>, bool, int32_t, py::object, bool>(),
           py::kw_only(), py::arg("rowwise_data") = py::none(), py::arg("rowwise_scale_inv") = py::none(),
           py::arg("rowwise_amax") = py::none(), py::arg("columnwise_data") = py::none(),
           py::arg("columnwise_scale_inv") = py::none(), py::arg("columnwise_amax") = py::none(),
           py::arg("shape") = py::none(), py::arg("swizzled") = false, py::arg("e4m3_max") = 448,
           py::arg("stream") = py::none(), py::arg("exchange") = false)
      .def("export_components", &Nvfp4Tensor::export_components, py::kw_only(), py::arg("direction") = 0,
           py::arg("values_dtype") = 0, py::arg("scales_dtype") = 0, py::arg("contiguous") = true,
           py::arg("global_scale") = 0, py::arg("stream") = py::none(), py::arg("shard") = py::none())
      .def("dequantize", &Nvfp4Tensor::dequantize, py::arg("direction"), py::arg("output"),
           py::arg("stream") = py::none(), py::arg("dlpack_stream") = py::none());
  m.def("bucket_plan", &bucket_plan, py::arg("tensors"), py::arg("direction") = 0, py::arg("alignment") = 256,
        py::arg("shards") = py::none(),
        "mxfp8_bucket_parts over Tensor and Nvfp4Tensor handles (shards: None, or per tensor None or a shard): "
        "(entries, nvfp4_entries, total bytes).");
  m.def("bucket_entry_bytes", &bucket_entry_bytes, py::arg("tensors"), py::arg("direction") = 0,
        py::arg("alignment") = 256, py::arg("shards") = py::none(), py::arg("names") = std::vector<std::string>(),
        "Each entry's bytes in a bucket of its own (mxfp8_bucket_parts of it alone); names[i] labels a refusal.");
  m.def("export_bucket", &export_bucket, py::arg("tensors"), py::arg("plan"), py::arg("nvfp4_plan"),
        py::arg("total"), py::arg("bucket"), py::kw_only(), py::arg("direction") = 0, py::arg("stream") = py::none(),
        py::arg("dlpack_stream") = py::none(), py::arg("bucket_name") = "bucket", py::arg("shards") = py::none(),
        "mxfp8_transfer into a bucket of Tensor and Nvfp4Tensor entries.");
  m.def("prepare_bucket", &prepare_bucket, py::arg("tensors"), py::arg("plan"), py::arg("nvfp4_plan"),
        py::arg("total"), py::arg("bucket"), py::kw_only(), py::arg("direction") = 0, py::arg("dlpack_stream") = py::none(),
        py::arg("bucket_name") = "bucket", py::arg("shards") = py::none(),
        "mxfp8_transfer_prepare of that fill, as a Plan.");
  register_import(m);
}
