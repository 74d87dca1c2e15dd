// Every Python object the extension reads or writes goes through here: the one capsule path of the
// binding (module.cpp's calls and import_bindings.cpp's alike). It takes a tensor from a producer through
// the framework's DLPack C exchange API or through __dlpack__ (versioned or legacy capsule), refuses a
// tensor of another DLPack major version unread and a read-only tensor (or a jax.Array) the library would
// write into, and maps the library's statuses to Python exceptions. A call that writes into an object takes
// it with Access::Write; nothing else checks the read-only flag, so no entry point may take its objects
// another way.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <dlpack/dlpack.h>
#include <mxfp8/mxfp8.h>

#include "python_args.hpp"  // has_attribute

namespace mxfp8_python {

namespace py = pybind11;

// A new reference from the C API, owned: every path out drops it exactly once. The extension holds no
// reference by hand (a manual count dropped __dlpack_device__'s device_type twice on one error path).
inline py::object steal(PyObject *new_reference) { return py::reinterpret_steal<py::object>(new_reference); }

// How far exchange_api_of follows prev_api looking for our major version (a real chain has one or two).
constexpr int kMaxExchangeApiHops = 16;

// Python exceptions for the library's statuses: bad or missing input is a ValueError, something this
// build cannot do a TypeError, memory a MemoryError, CUDA and internal failures a RuntimeError.
// `message` defaults to the library's (a caller may have said more: which tensor, which entry).
[[noreturn]] inline void raise_status(mxfp8_status status, const std::string &message = mxfp8_last_error()) {
  switch (status) {
    case MXFP8_ERROR_INVALID_ARGUMENT:
    case MXFP8_ERROR_MISSING_DATA: throw py::value_error(message);
    case MXFP8_ERROR_UNSUPPORTED: throw py::type_error(message);
    case MXFP8_ERROR_OUT_OF_MEMORY:
      PyErr_SetString(PyExc_MemoryError, message.c_str());
      throw py::error_already_set();
    default: throw std::runtime_error(std::string(mxfp8_status_string(status)) + ": " + message);
  }
}

// The desc every tensor handle of the extension starts from: `format`, `block`, scales in the 128x4
// swizzled layout or row-major, and `shape` when given (the desc points into it: keep it alive until
// mxfp8_tensor_create returns); the caller sets the buffers.
inline mxfp8_tensor_desc tensor_desc(int32_t format, int32_t block, bool swizzled, const std::vector<int64_t> *shape) {
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.format = format;
  desc.block = block;
  desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (shape) {
    desc.ndim = static_cast<int32_t>(shape->size());
    desc.shape = shape->data();
  }
  return desc;
}

inline void check(mxfp8_status status) {
  if (status != MXFP8_OK) raise_status(status);
}

// A legacy (unversioned) DLManagedTensor dressed as a versioned one for the C API. The wrapper IS a
// DLManagedTensorVersioned laid out by the dlpack.h this binding was compiled with, so it carries that
// header's version: the C library reads no field of a tensor whose major version is not its own, and the
// producer's legacy DLTensor is copied into the fields of this layout. No flags: a legacy capsule cannot
// say read-only (NumPy refuses to export a non-writeable array that way).
struct LegacyWrapper {
  DLManagedTensorVersioned versioned{};
  DLManagedTensor *legacy = nullptr;
  static void deleter(DLManagedTensorVersioned *self) {
    auto *w = static_cast<LegacyWrapper *>(self->manager_ctx);
    if (w->legacy->deleter) w->legacy->deleter(w->legacy);
    delete w;
  }
};

// Owns one managed tensor taken from a producer until it is handed to the C library.
struct TakenTensor {
  DLManagedTensorVersioned *managed = nullptr;
  ~TakenTensor() {
    if (managed && managed->deleter) managed->deleter(managed);
  }
  DLManagedTensorVersioned *release() {
    auto *m = managed;
    managed = nullptr;
    return m;
  }
  DLTensor *tensor() const { return &managed->dl_tensor; }
};

// The library's handle on one direction's data and scale_inv (and an NVFP4 tensor's amax) over `desc`
// (tensor_desc's, buffers unset); the taken tensors are the handle's once it is made. `checked` raises
// for a refusal, worded for its caller.
template <class Checked>
mxfp8_tensor *one_direction_tensor(mxfp8_tensor_desc desc, int32_t direction, TakenTensor &data, TakenTensor &scale_inv,
                                   TakenTensor *amax, Checked checked) {
  const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  *(columnwise ? &desc.columnwise_data : &desc.rowwise_data) = data.managed;
  *(columnwise ? &desc.columnwise_scale_inv : &desc.rowwise_scale_inv) = scale_inv.managed;
  if (amax) *(columnwise ? &desc.columnwise_amax : &desc.rowwise_amax) = amax->managed;
  mxfp8_tensor *t = nullptr;
  checked(mxfp8_tensor_create(&desc, &t));
  for (TakenTensor *owned : {&data, &scale_inv, amax})  // the handle's now
    if (owned) owned->release();
  return t;
}

// What the caller called an object: a fixed name, or owner[repr(key)]part ("params['w'][1]") for an entry
// of the caller's dict, formatted only when a message needs it (a call over thousands of tensors that
// succeeds builds no string).
struct Name {
  const char *text = nullptr;
  const char *owner = nullptr, *part = nullptr;
  py::handle key;
  Name(const char *fixed) : text(fixed) {}  // NOLINT: a C string is a name
  Name(const char *owner_, py::handle key_, const char *part_) : owner(owner_), part(part_), key(key_) {}
  std::string str() const { return text ? text : std::string(owner) + "[" + py::repr(key).cast<std::string>() + "]" + part; }
};

// What the library will do with a tensor taken from a producer: only read it, or write into it.
enum class Access { Read, Write };

// The dimensions of a taken tensor as far as the extension reads them itself, before the library's own
// checks (the sizes of outputs it allocates, unswizzle_scales' out): ndim within the header's limit (at most
// 64, mxfp8.h) and a shape array to read. A forged capsule with no shape array crashed swizzle_scales.
inline void check_dims(const DLTensor &t, const Name &name) {
  constexpr int32_t kMaxDims = 64;
  if (t.ndim < 0 || t.ndim > kMaxDims || (t.ndim > 0 && !t.shape))
    throw py::value_error(name.str() + ": its DLPack tensor has ndim " + std::to_string(t.ndim) +
                          (t.ndim > 0 && t.ndim <= kMaxDims ? " and no shape array" : "") +
                          ": expected 0 to 64 dimensions and their sizes");
}

// A versioned tensor of another major version is deleted unread (DLPack: its other fields may not be laid
// out as we think); a tensor the library would write into must not be flagged read-only.
inline void check_taken(const DLManagedTensorVersioned &managed, const Name &name, Access access) {
  const DLPackVersion version = managed.version;
  if (version.major != DLPACK_MAJOR_VERSION)
    throw py::value_error(name.str() + ": DLPack version " + std::to_string(version.major) + "." +
                          std::to_string(version.minor) + " is not supported (this build of mxfp8 reads DLPack " +
                          std::to_string(DLPACK_MAJOR_VERSION) + ".x)");
  if (access == Access::Write && (managed.flags & DLPACK_FLAG_BITMASK_READ_ONLY))
    throw py::value_error(name.str() + " is read-only (its producer flagged it DLPACK_FLAG_BITMASK_READ_ONLY, " +
                          "e.g. a NumPy array with flags.writeable False): mxfp8 writes its result there");
  check_dims(managed.dl_tensor, name);
}

// How many objects each path took (tests read them to prove which path a framework took).
inline size_t taken_by_exchange_api = 0, taken_by_dunder_dlpack = 0, fast_exports = 0;  // fast: calls done by the extension alone

// Consumes obj.__dlpack__(...): asks for a versioned capsule, accepts a legacy one.
// One vectorcall of obj.__dlpack__(stream=..., max_version=...) (the method, keyword names and version
// made once: at thousands of buffers a call, pybind11's keyword call cost more than the library's checks).
inline py::object call_dunder_dlpack(py::handle obj, const py::object &stream, bool with_max_version) {
  static PyObject *method = PyUnicode_InternFromString("__dlpack__");
  static PyObject *both = Py_BuildValue("(ss)", "stream", "max_version");
  static PyObject *stream_only = Py_BuildValue("(s)", "stream");
  static PyObject *max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  PyObject *args[] = {obj.ptr(), stream.ptr(), max_version};
  PyObject *result = PyObject_VectorcallMethod(method, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                               with_max_version ? both : stream_only);
  if (!result) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(result);
}

// A producer that cannot export an object says so with BufferError (DLPack's word for it), RuntimeError
// (torch's, for a meta or sparse tensor) or TypeError (an object of a kind it does not export): raised
// again as the TypeError the API promises for an object it cannot take, naming the argument, the
// producer's error chained as its cause and its first line quoted. Any other error (ValueError,
// MemoryError, KeyboardInterrupt) propagates as it is.
[[noreturn]] inline void raise_export_failure(const std::string &name, const char *how) {
  if (!PyErr_ExceptionMatches(PyExc_BufferError) && !PyErr_ExceptionMatches(PyExc_RuntimeError) &&
      !PyErr_ExceptionMatches(PyExc_TypeError))
    throw py::error_already_set();
  py::error_already_set cause;
  std::string said = py::str(cause.value()).cast<std::string>();
  said = said.substr(0, said.find('\n'));
  const std::string message = name + ": " + how + " could not export it (" +
                              py::str(py::type::handle_of(cause.value()).attr("__name__")).cast<std::string>() + ": " +
                              said + ")";
  py::raise_from(cause, PyExc_TypeError, message.c_str());
  throw py::error_already_set();
}

// Takes a capsule a producer returned: versioned (its version and read-only flag checked) or legacy.
inline std::unique_ptr<TakenTensor> take_capsule(const py::object &capsule, const Name &name, Access access) {
  auto taken = std::make_unique<TakenTensor>();
  PyObject *cap = capsule.ptr();
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    taken->managed = static_cast<DLManagedTensorVersioned *>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
    PyCapsule_SetName(cap, "used_dltensor_versioned");  // ours now: `taken` calls the deleter
    check_taken(*taken->managed, name, access);
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    auto *legacy = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(cap, "dltensor"));
    PyCapsule_SetName(cap, "used_dltensor");
    auto *w = new LegacyWrapper;
    w->legacy = legacy;
    w->versioned.version = DLPackVersion{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    w->versioned.manager_ctx = w;
    w->versioned.deleter = LegacyWrapper::deleter;
    w->versioned.dl_tensor = legacy->dl_tensor;
    taken->managed = &w->versioned;
    check_dims(taken->managed->dl_tensor, name);  // a legacy capsule has no version or flags to check
  } else {
    throw py::type_error(name.str() + ".__dlpack__() did not return a DLPack capsule");
  }
  return taken;
}


// ---- jax.Array: JAX's own C++ export without its Python __dlpack__ (issue 38) ---------------------------
// jax.Array.__dlpack__ and __dlpack_device__ are Python (1.6 and 0.8 us a call on a 2-core host, two arrays
// a call). __dlpack__ checks that the array lies on one device (sharding.device_set), then hands
// array.addressable_data(0) to jaxlib._jax.buffer_to_dlpack_managed_tensor(buffer, stream=stream): the C++
// function that takes an external reference to the buffer (the capsule keeps it alive; a deleted or donated
// array is refused there) and synchronizes: stream None, the host waits until the buffer is computed; a
// CUDA stream, that stream waits for it (0.36 us). That function exports the array's FIRST buffer whatever
// the sharding, so the binding calls it itself only for an array that lies on one device by its type:
// exactly jaxlib._jax.ArrayImpl with a jaxlib._jax.SingleDeviceSharding, on a device of this process
// (jax_devices), handing it addressable_data(0) as __dlpack__ does and the stream __dlpack__ would have
// been passed. Anything else (another sharding, even of one device; a device not yet known; a jaxlib
// without these names; a call that raises) goes through __dlpack__, which raises JAX's own errors.

// What the route needs from jaxlib, looked up once (nullptr: no route).
struct JaxNames {
  PyObject *array = nullptr;          // jaxlib._jax.ArrayImpl
  PyObject *single_device = nullptr;  // jaxlib._jax.SingleDeviceSharding
  PyObject *export_buffer = nullptr;  // jaxlib._jax.buffer_to_dlpack_managed_tensor
};

// Set when jaxlib's function refused its arguments (jax_capsule): no route from then on.
inline bool &jax_route_off() {
  static bool off = false;
  return off;
}

inline const JaxNames *jax_names(PyObject *obj) {
  static JaxNames names;  // strong references, kept for the process's life
  static bool looked = false;
  if (looked) return names.array && !jax_route_off() ? &names : nullptr;
  // Until a jax.Array is seen, nothing is looked up (no import: a jax.Array means jaxlib is imported).
  if (std::strcmp(Py_TYPE(obj)->tp_name, "jaxlib._jax.ArrayImpl") != 0) return nullptr;
  looked = true;
  static PyObject *module_name = PyUnicode_InternFromString("jaxlib._jax");
  const py::object module = steal(PyImport_GetModule(module_name));
  if (!module) {
    PyErr_Clear();
    return nullptr;
  }
  py::object array = steal(PyObject_GetAttrString(module.ptr(), "ArrayImpl"));
  py::object single_device = array ? steal(PyObject_GetAttrString(module.ptr(), "SingleDeviceSharding")) : py::object();
  py::object export_buffer =
      single_device ? steal(PyObject_GetAttrString(module.ptr(), "buffer_to_dlpack_managed_tensor")) : py::object();
  if (!export_buffer || !PyType_Check(array.ptr()) || !PyType_Check(single_device.ptr()) ||
      reinterpret_cast<PyObject *>(Py_TYPE(obj)) != array.ptr()) {
    PyErr_Clear();
    return nullptr;
  }
  names = JaxNames{array.release().ptr(), single_device.release().ptr(), export_buffer.release().ptr()};
  return &names;
}

// An attribute, or a null object with the error cleared when it is an Exception (the caller falls back to
// the protocol, which raises JAX's own error); anything else (KeyboardInterrupt) propagates.
inline py::object jax_attr(PyObject *obj, PyObject *name) {
  py::object value = steal(PyObject_GetAttr(obj, name));
  if (!value) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw py::error_already_set();
    PyErr_Clear();
  }
  return value;
}

// obj's sharding when obj is a jax.Array on one device by its type, else a null object.
inline py::object jax_single_device_sharding(py::handle obj, const JaxNames **names_out = nullptr) {
  const JaxNames *names = jax_names(obj.ptr());
  if (!names || reinterpret_cast<PyObject *>(Py_TYPE(obj.ptr())) != names->array) return {};
  static PyObject *sharding_name = PyUnicode_InternFromString("sharding");
  py::object sharding = jax_attr(obj.ptr(), sharding_name);
  if (!sharding || reinterpret_cast<PyObject *>(Py_TYPE(sharding.ptr())) != names->single_device) return {};
  if (names_out) *names_out = names;
  return sharding;
}

// How many objects the route took (tests read it to prove the route was or was not taken).
inline size_t taken_by_jax = 0;

// The JAX devices whose arrays answered __dlpack_device__ (module.cpp's jax_device asks it once a device, for
// an array in the device's "device" memory kind): (DLPack device type, id) by jax Device object, each kept
// alive (the map never sees a reused address); the GIL guards it. A device here holds an array of this
// process: jaxlib's export of an array with no local buffer would read past an empty list (JAX's __dlpack__
// refuses it in Python), so the route takes only arrays on a device found here.
inline std::unordered_map<PyObject *, std::pair<int64_t, int64_t>> &jax_devices() {
  static std::unordered_map<PyObject *, std::pair<int64_t, int64_t>> known;
  return known;
}

// sharding._device, or a null object (error cleared as jax_attr does).
inline py::object jax_device_of_sharding(PyObject *sharding) {
  static PyObject *device_name = PyUnicode_InternFromString("_device");
  return jax_attr(sharding, device_name);
}

// obj's capsule through the route, or None where the route does not apply or failed (the caller then asks
// __dlpack__). stream: what __dlpack__ would have been given.
inline py::object jax_capsule(py::handle obj, const py::object &stream) {
  const JaxNames *names = nullptr;
  const py::object sharding = jax_single_device_sharding(obj, &names);
  const py::object device = sharding ? jax_device_of_sharding(sharding.ptr()) : py::object();
  // not yet known to be this process's: __dlpack__ decides
  if (!device || jax_devices().count(device.ptr()) == 0) return py::none();
  // The array's shard (addressable_data(0): a new ArrayImpl over the same buffer), exported as __dlpack__
  // exports it, never the caller's array itself: jaxlib's export holds an external reference on the
  // buffer of the array it is given, and the caller's x.delete() while that reference lived (a view
  // export_components returned) destroyed the buffer under it, a CHECK failure that aborted the process.
  static PyObject *addressable_data = PyUnicode_InternFromString("addressable_data");
  static PyObject *zero = PyLong_FromLong(0);
  const py::object shard = steal(PyObject_CallMethodOneArg(obj.ptr(), addressable_data, zero));
  if (!shard) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw py::error_already_set();
    PyErr_Clear();  // __dlpack__ says why, in JAX's words
    return py::none();
  }
  static PyObject *stream_only = Py_BuildValue("(s)", "stream");
  PyObject *args[] = {nullptr, shard.ptr(), stream.ptr()};
  PyObject *capsule = PyObject_Vectorcall(names->export_buffer, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, stream_only);
  if (!capsule) {
    if (!PyErr_ExceptionMatches(PyExc_Exception)) throw py::error_already_set();
    // A TypeError: a jaxlib whose function takes other arguments; the route is off for the process (it
    // costs only speed), rather than failing every call before __dlpack__.
    if (PyErr_ExceptionMatches(PyExc_TypeError)) jax_route_off() = true;
    PyErr_Clear();  // __dlpack__ says why, in JAX's words
    return py::none();
  }
  ++taken_by_jax;
  return py::reinterpret_steal<py::object>(capsule);
}

// take_dlpack without the jax.Array rule: the route for a jax.Array on one device, else __dlpack__.
inline std::unique_ptr<TakenTensor> take_jax_or_dunder(py::handle obj, const Name &name, const py::object &stream,
                                                       Access access) {
  if (py::object capsule = jax_capsule(obj, stream); !capsule.is_none()) return take_capsule(capsule, name, access);
  if (!has_attribute(obj, "__dlpack__"))
    throw py::type_error(name.str() + ": expected an object with __dlpack__ (torch, JAX, CuPy, NumPy), got " +
                         py::str(py::type::of(obj)).cast<std::string>());
  py::object capsule;
  try {
    try {
      capsule = call_dunder_dlpack(obj, stream, true);
    } catch (py::error_already_set &e) {
      if (!e.matches(PyExc_TypeError)) throw;
      capsule = call_dunder_dlpack(obj, stream, false);  // a producer older than DLPack 1.0
    }
  } catch (py::error_already_set &e) {
    e.restore();
    raise_export_failure(name.str(), "its __dlpack__");
  }
  ++taken_by_dunder_dlpack;
  return take_capsule(capsule, name, access);
}

// Whether obj is a jax.Array (jaxlib's ArrayImpl, by its type's name: no import, no Python call).
inline bool is_jax_array(py::handle obj) {
  const char *type = Py_TYPE(obj.ptr())->tp_name;
  const size_t n = std::strlen(type);
  constexpr char kSuffix[] = ".ArrayImpl";
  constexpr size_t kSuffixLength = sizeof(kSuffix) - 1;
  return std::strncmp(type, "jaxlib.", 7) == 0 && n > kSuffixLength &&
         std::strcmp(type + n - kSuffixLength, kSuffix) == 0;
}

inline std::unique_ptr<TakenTensor> take_dlpack(py::handle obj, const Name &name, const py::object &stream,
                                                Access access = Access::Read) {
  // JAX arrays never change (XLA may share or reuse their buffers), but jaxlib exports them as legacy
  // capsules, which cannot say read-only: a jax.Array is refused as a destination here, by its type, before
  // any export, whichever way (the route or __dlpack__) it would have been taken.
  if (access == Access::Write && is_jax_array(obj))
    throw py::value_error(name.str() + " is a jax.Array, which JAX never lets change (XLA may share or reuse its "
                          "buffer): mxfp8 writes its result there. Write into NumPy or torch buffers, or call "
                          "mxfp8.jax, which returns new arrays (inside jax.jit too)");
  return take_jax_or_dunder(obj, name, stream, access);
}


// ---- The DLPack C exchange API (DLPack 1.2+) ---------------------------------------------------------
// A framework may publish C functions for its own tensors as the capsule type(x).__dlpack_c_exchange_api__
// (PyTorch does): taking a tensor, making one from a managed tensor, allocating, and its current stream,
// with no Python call and no stream synchronization. The binding uses them when the caller left the
// stream to the inputs' framework: the work then runs on the framework's current stream, so nothing
// needs ordering. Any other object, or an explicit stream, goes through __dlpack__ as before.

// The exchange API of obj's type, or nullptr; looked up once per type (the type is kept alive so the
// cache never sees a reused address). One whose major version is not ours is walked back through
// prev_api; one without the four functions used here is not used.
inline const DLPackExchangeAPI *exchange_api_of(py::handle obj) {
  static std::unordered_map<PyObject *, const DLPackExchangeAPI *> cache;  // the GIL guards it
  PyObject *type = reinterpret_cast<PyObject *>(Py_TYPE(obj.ptr()));
  if (auto it = cache.find(type); it != cache.end()) return it->second;
  const DLPackExchangeAPI *api = nullptr;
  if (const py::object capsule = steal(PyObject_GetAttrString(type, "__dlpack_c_exchange_api__"))) {
    if (PyCapsule_IsValid(capsule.ptr(), "dlpack_exchange_api")) {
      auto *header =
          static_cast<const DLPackExchangeAPIHeader *>(PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
      // A bounded walk: a producer's chain that loops (or runs on) must not hang the caller holding the GIL.
      for (int hops = 0; header && header->version.major != DLPACK_MAJOR_VERSION; ++hops)
        header = hops < kMaxExchangeApiHops ? header->prev_api : nullptr;
      auto *candidate = reinterpret_cast<const DLPackExchangeAPI *>(header);
      if (candidate && candidate->managed_tensor_allocator && candidate->managed_tensor_from_py_object_no_sync &&
          candidate->managed_tensor_to_py_object_no_sync && candidate->current_work_stream)
        api = candidate;
    }
  } else {
    PyErr_Clear();
  }
  Py_INCREF(type);
  cache.emplace(type, api);
  return api;
}

// A failed exchange API call: its Python exception, or one naming what failed.
[[noreturn]] inline void raise_exchange_failure(const std::string &what) {
  if (PyErr_Occurred()) throw py::error_already_set();
  throw py::type_error(what + ": the framework's DLPack exchange API failed without saying why");
}

inline bool is_cuda(DLDevice device) { return device.device_type == kDLCUDA || device.device_type == kDLCUDAManaged; }

// How one call takes its objects and hands its results back.
struct Exchange {
  const DLPackExchangeAPI *api = nullptr;  // the inputs' framework's, in exchange mode
  intptr_t stream = 0;                     // the cudaStream_t the library queues its work on
  py::object dlpack_stream = py::none();   // __dlpack__'s stream argument for every other object
  DLDevice device{kDLCPU, 0};              // the inputs' device, once known
  bool resolved = false;                   // stream, dlpack_stream and device known
  bool dlpack_stream_is_stream = false;    // dlpack_stream is `stream`, made only when an object needs it

  // The caller's explicit stream (and __dlpack__ stream): the __dlpack__ path.
  static Exchange explicit_stream(intptr_t stream, py::object dlpack_stream) {
    Exchange e;
    e.stream = stream;
    e.dlpack_stream = std::move(dlpack_stream);
    e.resolved = true;
    return e;
  }

  // Exchange mode on `device`: the framework's current stream there.
  static Exchange current(const DLPackExchangeAPI *api, DLDevice device) {
    Exchange e;
    e.api = api;
    e.resolve(device);
    return e;
  }

  void resolve(DLDevice d) {
    device = d;
    resolved = true;
    if (!is_cuda(d)) return;  // host memory: no stream (DLPack: the consumer need not ask)
    void *s = nullptr;
    if (api->current_work_stream(d.device_type, d.device_id, &s) != 0) raise_exchange_failure("current_work_stream");
    stream = reinterpret_cast<intptr_t>(s);
    dlpack_stream_is_stream = true;  // a Python int only if some object goes through __dlpack__
  }

  // __dlpack__'s stream argument: DLPack spells the legacy default stream 1.
  const py::object &dlpack_stream_argument() {
    if (dlpack_stream_is_stream) {
      dlpack_stream = py::int_(stream == 0 ? 1 : stream);
      dlpack_stream_is_stream = false;
    }
    return dlpack_stream;
  }
};

// Takes obj for one call: through the exchange API when it is the call's framework's, else __dlpack__.
// In exchange mode the first object taken is the framework's, and its device fixes the stream.
// take() of an object of the call's framework, into `into`.
inline void take_from_framework(py::handle obj, const Name &name, Exchange &ex, Access access, TakenTensor &into) {
  if (ex.api->managed_tensor_from_py_object_no_sync(obj.ptr(), &into.managed) != 0 || !into.managed) {
    into.managed = nullptr;
    if (PyErr_Occurred()) raise_export_failure(name.str(), "the framework's DLPack exchange API");
    raise_exchange_failure(name.str());
  }
  ++taken_by_exchange_api;
  check_taken(*into.managed, name, access);
  if (!ex.resolved) ex.resolve(into.managed->dl_tensor.device);
}

inline std::unique_ptr<TakenTensor> take(py::handle obj, const Name &name, Exchange &ex, Access access = Access::Read) {
  if (ex.api && exchange_api_of(obj) == ex.api) {
    auto taken = std::make_unique<TakenTensor>();
    take_from_framework(obj, name, ex, access, *taken);
    return taken;
  }
  if (!ex.resolved) throw std::logic_error(name.str() + ": exchange mode needs the framework's object first");
  return take_dlpack(obj, name, ex.dlpack_stream_argument(), access);
}


// What a plan holds of `obj` besides its DLPack export: a torch tensor's storage (untyped_storage()), None
// for anything else. A torch tensor's DLPack export holds the tensor, not its storage, and `t.data = x` or
// `t.set_(...)` (module.to(), an engine's weight reload) gives that tensor another storage and frees the old
// one, which a plan would go on reading and writing; the storage object keeps it alive. (An alias made by
// detach() would too, at ~5x the host time a tensor: 0.3 against 0.06 µs here, four tensors an entry.)
inline py::object storage_of(py::handle obj) {
  static PyObject *tensor_type = nullptr;  // torch.Tensor once torch is imported (no torch object before)
  if (!tensor_type) {
    if (const py::object torch = imported("torch"))
      tensor_type = PyObject_GetAttrString(torch.ptr(), "Tensor");  // kept for the process's life
    if (!tensor_type && PyErr_Occurred()) throw py::error_already_set();
  }
  if (!tensor_type) return py::none();
  const int is_tensor = PyObject_IsInstance(obj.ptr(), tensor_type);
  if (is_tensor < 0) throw py::error_already_set();
  if (!is_tensor) return py::none();
  static PyObject *method = PyUnicode_InternFromString("untyped_storage");
  PyObject *storage = PyObject_CallMethodNoArgs(obj.ptr(), method);
  if (!storage) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(storage);
}

// The storages of torch tensors (storage_of), held, so that a tensor given another storage (`t.data = x`)
// leaves them the memory they describe, each with the address and size it had when taken. A storage
// resized in place (torch's resize_) has moved, or shrunk: what was described is freed memory, or past the
// storage's end, which a plan's run would read and write (a write there corrupted the heap and aborted the
// process) and views of its output would show. The size too: resized up and down again, a storage can come
// back to its old address with fewer bytes (the allocator hands the freed block out again).
class StoragePins {
 public:
  StoragePins() = default;
  // Each storage once (a bucket's or a model's is many tensors'), in a hash set: a 3008-tensor refit has
  // ~12,000 storages, which a scan of the kept ones made a quadratic prepare.
  explicit StoragePins(std::vector<py::object> &&storages) {
    std::unordered_set<PyObject *> seen;
    seen.reserve(storages.size());
    for (py::object &storage : storages)
      if (seen.insert(storage.ptr()).second) {
        const uintptr_t at = address_of(storage), bytes = bytes_of(storage);
        pins_.push_back(Pin{std::move(storage), at, bytes});
      }
  }
  // A ValueError "<resized> (<then>, is now <now>): <advice>" for the first storage that changed.
  void check(const std::string &resized, const std::string &advice) const {
    for (const Pin &p : pins_) {
      const uintptr_t now = address_of(p.storage), bytes = bytes_of(p.storage);
      if (now != p.address || bytes != p.bytes)
        throw py::value_error(resized + " (" + hex(p.address) + ", " + std::to_string(p.bytes) + " bytes, is now " +
                              hex(now) + ", " + std::to_string(bytes) + " bytes): " + advice);
    }
  }

 private:
  struct Pin {
    py::object storage;  // a torch UntypedStorage
    uintptr_t address;   // its data_ptr() when taken
    uintptr_t bytes;     // and its nbytes()
  };
  // storage.<method>() as an unsigned integer.
  static uintptr_t ask(const py::object &storage, PyObject *method) {
    const py::object v = steal(PyObject_CallMethodNoArgs(storage.ptr(), method));
    if (!v) throw py::error_already_set();
    const uintptr_t n = static_cast<uintptr_t>(PyLong_AsUnsignedLongLong(v.ptr()));
    if (PyErr_Occurred()) throw py::error_already_set();
    return n;
  }
  static uintptr_t address_of(const py::object &storage) {
    static PyObject *method = PyUnicode_InternFromString("data_ptr");
    return ask(storage, method);
  }
  static uintptr_t bytes_of(const py::object &storage) {
    static PyObject *method = PyUnicode_InternFromString("nbytes");
    return ask(storage, method);
  }
  static std::string hex(uintptr_t v) {
    char text[2 + 2 * sizeof v + 1];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return text;
  }
  std::vector<Pin> pins_;
};

// The one prepared transfer of the binding (the core of mxfp8.Plan, whatever made it: an export, a bucket
// fill, an import): the library's plan, the objects it writes (taken, so their storage stays alive whatever
// becomes of the caller's references; the plan itself holds the sources), and the framework whose current
// stream a run takes when given none.
class Plan {
 public:
  // keep: what the plan writes (and a bucket it reads); pins: the storages of the torch tensors among
  // everything it reads and writes (storage_of), so that a tensor given another storage leaves it the old.
  Plan(mxfp8_plan *plan, std::vector<std::unique_ptr<TakenTensor>> &&keep, const Exchange &ex,
       std::vector<py::object> &&pins)
      : plan_(plan), keep_(std::move(keep)), pins_(std::move(pins)), api_(ex.api), device_(ex.device) {}
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;
  // stream: a cudaStream_t as an int, or None: the framework's current stream (exchange mode), else the
  // legacy default stream. Runs of one plan write the same bytes, so the header forbids two at once; the
  // run drops the GIL, so two Python threads could otherwise enter together: serialised here (on CUDA, runs
  // queued on two streams must still be ordered by the caller, as any two writes of one buffer).
  void run(const py::object &stream) {
    intptr_t s = stream.is_none() ? 0 : stream.cast<intptr_t>();
    if (stream.is_none() && api_ && is_cuda(device_)) {
      void *current = nullptr;
      if (api_->current_work_stream(device_.device_type, device_.device_id, &current) != 0)
        raise_exchange_failure("current_work_stream");
      s = reinterpret_cast<intptr_t>(current);
    }
    check_storages();
    mxfp8_status st;
    {
      py::gil_scoped_release unlocked;
      std::lock_guard<std::mutex> one_run_at_a_time(running_);
      st = mxfp8_plan_run(plan_.get(), reinterpret_cast<void *>(s));
    }
    check(st);
  }

  // Before a run and before views of its output are handed out (StoragePins says why).
  void check_storages() const {
    pins_.check("a tensor this plan reads or writes had its storage resized since the plan was prepared",
                "the plan's addresses are of freed memory; prepare a new plan");
  }

 private:
  // Released by its holder, so that a constructor that throws (a storage's data_ptr() failing) releases
  // it too, where a destructor would not run.
  struct ReleasePlan {
    void operator()(mxfp8_plan *p) const { mxfp8_plan_release(p); }
  };
  std::unique_ptr<mxfp8_plan, ReleasePlan> plan_;
  std::vector<std::unique_ptr<TakenTensor>> keep_;
  StoragePins pins_;
  const DLPackExchangeAPI *api_;
  DLDevice device_;
  std::mutex running_;
};

// The Exchange of a call on Python objects. stream None: the first object's framework's current stream,
// every object of that framework taken through its DLPack C exchange API (resolved when `first` is
// taken), or the legacy default stream (0) for a framework without one; an int: the caller's
// cudaStream_t. dlpack_stream: __dlpack__'s stream argument for objects taken that way.
inline Exchange exchange_for_objects(py::handle first, const py::object &stream, py::object dlpack_stream) {
  if (!stream.is_none()) return Exchange::explicit_stream(stream.cast<intptr_t>(), std::move(dlpack_stream));
  Exchange ex{exchange_api_of(first)};
  if (!ex.api) return Exchange::explicit_stream(0, std::move(dlpack_stream));
  return ex;
}

// A METH_FASTCALL entry over `body`: no pybind11 argument dispatch for the calls made every step; a C++
// exception becomes the Python exception pybind11 would raise for it.
// kOptional trailing arguments may be left out (the body sees them as None).
template <py::object (*Body)(PyObject *const *), Py_ssize_t kArgs, Py_ssize_t kOptional = 0>
inline PyObject *fastcall(PyObject *, PyObject *const *args, Py_ssize_t nargs) {
  if (nargs < kArgs - kOptional || nargs > kArgs) {
    if (kOptional)
      PyErr_Format(PyExc_TypeError, "expected %zd to %zd positional arguments, got %zd", kArgs - kOptional, kArgs, nargs);
    else
      PyErr_Format(PyExc_TypeError, "expected %zd positional arguments, got %zd", kArgs, nargs);
    return nullptr;
  }
  try {
    if (nargs < kArgs) {
      PyObject *all[kArgs];
      for (Py_ssize_t i = 0; i < kArgs; ++i) all[i] = i < nargs ? args[i] : Py_None;
      return Body(all).release().ptr();
    }
    return Body(args).release().ptr();
  } catch (py::error_already_set &e) {
    e.restore();
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  return nullptr;
}

}  // namespace mxfp8_python
