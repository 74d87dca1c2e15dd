// The receiver's import for Python, and the one reader of what callers describe tensors with: a source
// spec (Source: import_tensors' sources, and export_bucket's through read_spec), a params dict
// (take_params) and a bucket manifest (BucketSource), each read here with no Python object per entry. One
// mxfp8_transfer_desc (from a bucket or from tensors, to the engine's buffers) is run by mxfp8_transfer,
// checked by mxfp8_transfer_check or prepared once (a Plan). A translation layer only: it takes each
// object's DLTensor as every other call of the extension does (dlpack_take.hpp: the framework's DLPack C
// exchange API when the caller left the stream to it, else __dlpack__), fills the desc, and lets the
// library check what the tensors mean. An uncommon value (a NumPy int, an unknown word) goes to the Python
// checker of mxfp8._args (or mxfp8._import), so a refusal has one wording whichever path reads it.
// import_tensors is the whole of mxfp8.import_tensors (a METH_FASTCALL entry: every argument read here).
// register_import adds the functions to a module (the extension calls it from its PYBIND11_MODULE).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <dlpack/dlpack.h>

#include "mxfp8/mxfp8.h"
#include "dlpack_take.hpp"
#include "python_args.hpp"
#include "shard_list.hpp"

namespace py = pybind11;

namespace {

using namespace mxfp8_python;

// A checker of mxfp8._args (flag, choice, e4m3_max, shape), called for a value the common case does not
// take: it words every refusal, so a value is refused with one message whichever binding path reads it.
py::object python_check(const char *name, const char *module = "mxfp8._args") {
  return py::module_::import(module).attr(name);  // sys.modules' entry: a dict lookup, paid only off the common case
}

// Element i of a sequence the caller passed.
py::object item(const py::object &sequence, Py_ssize_t i) {
  PyObject *o = PyTuple_CheckExact(sequence.ptr()) ? Py_NewRef(PyTuple_GET_ITEM(sequence.ptr(), i))
                                                   : PySequence_GetItem(sequence.ptr(), i);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// A word's code in `table` (a dict word -> int) for a known word, else the refusal of the Python checker
// (`module`.`checker`(what(), value, table)): one wording for every path.
template <class What>
int32_t choice_code(py::handle value, py::handle table, What what, const char *checker = "choice",
                    const char *module = "mxfp8._args") {
  if (PyUnicode_Check(value.ptr()))
    if (PyObject *code = PyDict_GetItemWithError(table.ptr(), value.ptr())) return static_cast<int32_t>(PyLong_AsLong(code));
  if (PyErr_Occurred()) throw py::error_already_set();
  return python_check(checker, module)(what(), value, table).template cast<int32_t>();  // raises for every word not in table
}

// The destinations of one call, as the desc's parallel arrays, read from the caller's params dict: the
// taken tensors stay alive for the call (and a prepared plan's life).
struct Destinations {
  std::vector<std::unique_ptr<TakenTensor>> taken;
  std::vector<DLTensor *> values, scales, global_scales;
  std::vector<int32_t> layouts;
  bool any_nvfp4 = false;
  // The desc's destination fields (TO_BUFFERS) over these arrays.
  void describe(mxfp8_transfer_desc &d) const {
    d.destination = MXFP8_TRANSFER_TO_BUFFERS;
    d.values = values.data();
    d.scales = scales.data();
    d.target_layouts = layouts.data();
    d.global_scales = any_nvfp4 ? global_scales.data() : nullptr;
  }
  bool prepare = false;           // for a plan: each torch tensor's storage pinned (storage_of)
  std::vector<py::object> pins;  // a plan's: the storages of its torch sources, destinations and bucket
  void pin(py::handle obj) {
    if (!prepare) return;
    py::object storage = storage_of(obj);
    if (!storage.is_none()) pins.push_back(std::move(storage));
  }
  DLTensor *take_one(py::handle obj, py::handle key, const char *part, Exchange &ex) {
    pin(obj);
    taken.push_back(take(obj, Name("params", key, part), ex, Access::Write));
    return taken.back()->tensor();
  }
};

// params[key] of every key in turn: (values, scales[, layout]) for an MXFP8 entry, (values, scales,
// global_scale[, layout]) where nvfp4[i]; `layout` (a code) where an entry names none.
Destinations take_params(py::handle params, const std::vector<py::handle> &keys, const std::vector<bool> &nvfp4,
                         int32_t layout, py::handle layouts, Exchange &ex, bool prepare) {
  const size_t n = keys.size();
  const bool dict = PyDict_Check(params.ptr());
  static const py::handle mapping = py::object(py::module_::import("collections.abc").attr("Mapping")).release();
  if (!dict && !py::isinstance(params, mapping))
    throw py::type_error("params must be a mapping name -> (values, scales[, ...]), got " + type_name(params));
  std::vector<py::object> entries(n);
  std::vector<py::handle> missing;
  for (size_t i = 0; i < n; ++i) {
    // A dict's entry, or a mapping's params[key]: its KeyError is a missing entry, any other error its own.
    PyObject *p = dict ? Py_XNewRef(PyDict_GetItemWithError(params.ptr(), keys[i].ptr()))
                       : PyObject_GetItem(params.ptr(), keys[i].ptr());
    if (!p && !dict && PyErr_ExceptionMatches(PyExc_KeyError)) PyErr_Clear();
    if (!p && PyErr_Occurred()) throw py::error_already_set();
    if (p)
      entries[i] = py::reinterpret_steal<py::object>(p);
    else
      missing.push_back(keys[i]);
  }
  if (!missing.empty()) {
    const bool more = missing.size() > 5;
    py::list first_five;
    for (size_t i = 0; i < missing.size() && i < 5; ++i) first_five.append(missing[i]);
    const std::string shown = py::repr(first_five).cast<std::string>();
    PyErr_SetString(PyExc_KeyError, ("params has no entry for " + shown + (more ? " ..." : "")).c_str());
    throw py::error_already_set();
  }
  Destinations d;
  d.prepare = prepare;
  d.taken.reserve(3 * n);
  d.values.reserve(n);
  d.scales.reserve(n);
  d.global_scales.reserve(n);
  d.layouts.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const py::handle key = keys[i];
    py::object p = entries[i];
    Py_ssize_t size = PySequence_Check(p.ptr()) && !PyUnicode_Check(p.ptr()) ? PySequence_Size(p.ptr()) : -1;
    if (size < 0 && PyErr_Occurred()) {  // no length (a TypeError): refused below; a __len__'s own error: its
      if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
    }
    // An entry of the right length held whole (a tuple of its items): a __dlpack__ of one may change the
    // caller's list, which a read of the next by index would then find shorter or holding another object.
    if (size >= 2 && size <= 4 && !PyTuple_CheckExact(p.ptr())) {
      p = py::reinterpret_steal<py::object>(PySequence_Tuple(p.ptr()));
      if (!p) throw py::error_already_set();  // its own iteration's error
      size = PyTuple_GET_SIZE(p.ptr());
    }
    const bool nv = nvfp4[i];
    if (nv && (size < 3 || size > 4 || PyUnicode_Check(item(p, 2).ptr())))
      throw py::value_error(Name("params", key, "").str() + " is an NVFP4 entry: it must be (values, scales, "
                            "global_scale) or (values, scales, global_scale, layout)");
    if (!nv && (size < 2 || size > 3))
      throw py::value_error(Name("params", key, "").str() +
                            " must be (values, scales) or (values, scales, layout)");
    const Py_ssize_t layout_at = nv ? 3 : 2;
    const auto what = [&] { return Name("params", key, "").str() + " layout"; };
    d.layouts.push_back(size > layout_at ? choice_code(item(p, layout_at), layouts, what, "_code", "mxfp8._import")
                                         : layout);
    d.values.push_back(d.take_one(item(p, 0), key, "[0]", ex));
    d.scales.push_back(d.take_one(item(p, 1), key, "[1]", ex));
    d.global_scales.push_back(nv ? d.take_one(item(p, 2), key, "[2]", ex) : nullptr);
    d.any_nvfp4 = d.any_nvfp4 || nv;
  }
  return d;
}

// A refusal of the library's about one source, said of that source ("tensors['w']: rowwise_scale_inv: ..."),
// as export_bucket says it: the library's message names the field, not which of thousands of tensors.
// `where` is called only on failure (a label costs a repr, paid by no call that succeeds).
template <class Where>
void check_source(mxfp8_status status, Where where) {
  if (status == MXFP8_OK) return;
  const std::string prefix = where();
  raise_status(status, prefix.empty() ? mxfp8_last_error() : prefix + ": " + mxfp8_last_error());
}

// A refusal of a whole call whose message indexes one entry (shards[2], destinations[0].values, ...):
// the caller's name of that entry (keys[i], its repr) is added, "... (entry 2 is 'layers.3.w')".
void check_entries(mxfp8_status status, const std::vector<py::handle> &keys) {
  if (status == MXFP8_OK) return;
  // A plain scan: the std::regex this was crashed the CUDA build's module on every such refusal on the
  // device (Python 3.12, SIGSEGV; not seen on this machine's 3.11), cause not pinned down.
  static const char *const kLists[] = {"shards", "values", "scales", "target_layouts", "global_scales", "tensors",
                                       "parts_in", "shapes", "ndims", "formats", "directions", "source_layouts",
                                       "e4m3_maxes", "scales_shapes", "scales_ndims"};
  std::string message = mxfp8_last_error();
  for (size_t open = message.find('['); open != std::string::npos; open = message.find('[', open + 1)) {
    size_t start = open;  // the identifier before '[' (a '.' ends it: "manifest.shards[2]" reads "shards")
    while (start > 0 && (std::isalnum(static_cast<unsigned char>(message[start - 1])) || message[start - 1] == '_'))
      --start;
    const std::string list = message.substr(start, open - start);
    if (std::none_of(std::begin(kLists), std::end(kLists), [&](const char *k) { return list == k; })) continue;
    char *end = nullptr;
    const unsigned long long i = std::strtoull(message.c_str() + open + 1, &end, 10);
    if (end == message.c_str() + open + 1 || *end != ']') continue;
    if (i < keys.size()) message += " (entry " + std::to_string(i) + " is " + py::repr(keys[i]).cast<std::string>() + ")";
    break;
  }
  raise_status(status, message);
}

// A Python table of the package (a dict word -> code), looked up once.
py::handle python_table(const char *module, const char *name) {
  return py::object(py::module_::import(module).attr(name)).release();  // kept for the process's life
}

// A manifest number: a Python int (not a bool) in [0, high]; any other value goes to mxfp8._args.integer,
// which takes what has __index__ and words every refusal.
template <class What>
uint64_t manifest_int(py::handle value, uint64_t high, What what) {
  if (PyLong_CheckExact(value.ptr())) {
    const unsigned long long v = PyLong_AsUnsignedLongLong(value.ptr());
    if (!PyErr_Occurred() && v <= high) return v;
    PyErr_Clear();
  }
  return python_check("integer")(what(), value, 0, high).template cast<uint64_t>();
}

// The keys every manifest entry needs, and an NVFP4 entry's besides.
constexpr const char *kParts[] = {"values_offset", "values_bytes", "scales_offset", "scales_bytes"};
constexpr const char *kNvfp4Keys[] = {"direction", "scales_shape", "amax_offset", "amax_bytes", "e4m3_max"};
// Every key an entry may have: another is refused, as a spec's is (a misspelt "direction" or
// "scales_layout" would otherwise describe the other matrix, of the same size for square tensors).
constexpr const char *kManifestKeys[] = {"name", "shape", "format", "fp8_dtype", "direction", "scales_layout",
                                         "scales_shape", "values_offset", "values_bytes", "scales_offset",
                                         "scales_bytes", "amax_offset", "amax_bytes", "e4m3_max"};

// Whether `key` is one of kManifestKeys (matched by address, a literal's keys being interned, then by value).
bool manifest_key(PyObject *key) {
  constexpr size_t n = sizeof(kManifestKeys) / sizeof(kManifestKeys[0]);
  static PyObject *interned[n] = {};
  if (!interned[0])
    for (size_t i = 0; i < n; ++i) interned[i] = PyUnicode_InternFromString(kManifestKeys[i]);
  for (size_t i = 0; i < n; ++i)
    if (key == interned[i]) return true;
  if (PyUnicode_Check(key))
    for (size_t i = 0; i < n; ++i)
      if (PyUnicode_Compare(key, interned[i]) == 0) return true;
  return false;
}

// A bucket manifest (export_bucket's list of dicts, or a sender's JSON of it) read into the desc's
// FROM_BUCKET lists, for import_bucket and every reader of a manifest (unpack_bucket, sglang). Only what
// Python alone sees is checked here: a list of dicts, the keys each entry needs, names hashable and unique,
// numbers that are Python ints of their C field's range, known words (mxfp8._args words each refusal). What
// the manifest means (each part's size against its shape, direction and layout; parts inside the bucket
// and apart; scale shapes; NVFP4 amax and e4m3_max) is mxfp8_transfer_check's, the check mxfp8_transfer
// makes: every receiver, in every binding, refuses the same manifests with the same message
// (desc.parts_in[i] there is manifest[i] here). need_scales_shape: every entry must give "scales_shape"
// and (MXFP8) "fp8_dtype", as unpack_bucket shapes its views by them; else scale shapes are checked when
// every entry gives one.
struct BucketSource {
  py::list entries;              // the manifest's entries (dicts)
  // Each entry's name, held: a caller's code that runs while the manifest is read (a checker, a
  // __dlpack__) may rewrite the entry; `names` borrows from `held_names`.
  std::vector<py::object> held_names;
  std::vector<py::handle> names;
  std::vector<mxfp8_bucket_part> parts;
  std::vector<std::vector<int64_t>> shape_store, scales_shape_store;
  std::vector<const int64_t *> shapes, scales_shapes;
  std::vector<int32_t> ndims, scales_ndims, formats, directions, layouts, e4m3_maxes;
  std::vector<bool> nvfp4;
  mxfp8_transfer_desc desc = MXFP8_TRANSFER_DESC_INIT;

  BucketSource(const DLTensor *bucket, py::handle manifest, bool need_scales_shape) {
    static const py::handle mapping = python_table("collections.abc", "Mapping");
    static const py::handle entry_formats = python_table("mxfp8._manifest", "ENTRY_FORMATS");
    static const py::handle fp8_dtypes = python_table("mxfp8._api", "_FORMATS");
    static const py::handle direction_codes = python_table("mxfp8._api", "_DIRECTIONS");
    static const py::handle layout_codes = python_table("mxfp8._manifest", "LAYOUTS");
    if (PyUnicode_Check(manifest.ptr()) || PyBytes_Check(manifest.ptr()) || py::isinstance(manifest, mapping) ||
        !has_attribute(manifest, "__iter__"))
      throw py::type_error("manifest must be the list export_bucket returned, got " + type_name(manifest));
    entries = py::reinterpret_steal<py::list>(PySequence_List(manifest.ptr()));
    if (!entries) throw py::error_already_set();
    const size_t n = entries.size();
    const py::set seen;
    for (size_t i = 0; i < n; ++i) {
      const std::string where = "manifest[" + std::to_string(i) + "]";
      py::handle e = entries[i];
      if (!PyDict_Check(e.ptr())) {
        if (!py::isinstance(e, mapping))
          throw py::type_error(where + " must be a dict, got " + type_name(e));
        entries[i] = py::dict(py::reinterpret_borrow<py::object>(e));
        e = entries[i];
      }
      // Every value held at once, before any is read: a reader below may run Python code (an __index__, a
      // checker) that changes the entry, which then still reads as it was.
      constexpr size_t kKeys = sizeof(kManifestKeys) / sizeof(kManifestKeys[0]);
      py::object held[kKeys];
      for (size_t k = 0; k < kKeys; ++k)
        held[k] = py::reinterpret_borrow<py::object>(PyDict_GetItemString(e.ptr(), kManifestKeys[k]));
      const auto get = [&](const char *key) -> const py::object & {
        for (size_t k = 0; k < kKeys; ++k)
          if (std::strcmp(key, kManifestKeys[k]) == 0) return held[k];
        throw std::logic_error(std::string("mxfp8: the manifest reader asked for '") + key + "', not a manifest key");
      };
      const auto field = [&](const char *key) { return [&where, key] { return where + "['" + key + "']"; }; };
      bool plain = true;  // (a value that is not plain is still taken)
      {
        PyObject *k, *v;
        Py_ssize_t pos = 0;
        while (PyDict_Next(e.ptr(), &pos, &k, &v))
          if (!manifest_key(k)) {
            std::string known;
            for (const char *name : kManifestKeys) known += (known.empty() ? "" : ", ") + std::string(name);
            throw py::value_error(where + " has an unknown key " + py::repr(k).cast<std::string>() + " (known: " +
                                  known + ")");
          }
      }
      const py::object format = get("format");
      const bool nv = format && choice_code(format, entry_formats, field("format")) == 1;
      const auto require = [&](const char *key) {
        if (!get(key)) throw py::value_error(where + " has no '" + key + "'");
      };
      // A key of the other format is refused, as a spec's is: no reader of this entry would look at it,
      // so a wrong value there would pass unchecked.
      const auto refuse_other_format = [&](const char *key) {
        if (get(key))
          throw py::value_error(where + " is an " + (nv ? "NVFP4" : "MXFP8") + " entry and has '" + key + "', an " +
                                (nv ? "MXFP8" : "NVFP4 (\"format\": \"nvfp4\")") + " entry's key");
      };
      if (nv) {
        refuse_other_format("fp8_dtype");
      } else {
        for (size_t k = 2; k < 5; ++k) refuse_other_format(kNvfp4Keys[k]);  // amax_offset, amax_bytes, e4m3_max
      }
      for (const char *key : {"name", "shape"}) require(key);
      for (const char *key : kParts) require(key);
      if (nv) {
        for (const char *key : kNvfp4Keys) require(key);
      } else if (need_scales_shape) {
        for (const char *key : {"fp8_dtype", "scales_shape"}) require(key);
      }
      const py::object name = get("name");
      if (PyObject_Hash(name.ptr()) == -1) {  // unhashable (a TypeError), or a __hash__'s own error
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
        PyErr_Clear();
        throw py::type_error(where + "['name'] must be hashable, got " + type_name(name));
      }
      // A name's own __eq__ may raise (names of equal hash are compared): its error, not a pending one.
      const int twice = PySet_Contains(seen.ptr(), name.ptr());
      if (twice < 0 || (!twice && PySet_Add(seen.ptr(), name.ptr()) < 0)) throw py::error_already_set();
      if (twice) throw py::value_error(where + "['name'] " + py::repr(name).cast<std::string>() + " appears twice");
      held_names.push_back(name);
      names.push_back(name);
      shape_store.push_back(shape_arg(field("shape"), get("shape"), plain));
      uint64_t part[6] = {};
      for (size_t k = 0; k < 4; ++k) part[k] = manifest_int(get(kParts[k]), UINT64_MAX, field(kParts[k]));
      if (nv)
        for (size_t k = 2; k < 4; ++k) part[k + 2] = manifest_int(get(kNvfp4Keys[k]), UINT64_MAX, field(kNvfp4Keys[k]));
      parts.push_back(mxfp8_bucket_part{part[0], part[1], part[2], part[3], part[4], part[5]});
      if (const py::object scales_shape = get("scales_shape"))
        scales_shape_store.push_back(shape_arg(field("scales_shape"), scales_shape, plain));
      e4m3_maxes.push_back(nv ? static_cast<int32_t>(manifest_int(get("e4m3_max"), INT32_MAX, field("e4m3_max"))) : 0);
      const py::object fp8_dtype = get("fp8_dtype");
      formats.push_back(nv ? MXFP8_FORMAT_NVFP4 : fp8_dtype ? choice_code(fp8_dtype, fp8_dtypes, field("fp8_dtype"))
                                                           : MXFP8_FORMAT_E4M3);
      const py::object direction = get("direction"), layout = get("scales_layout");
      directions.push_back(direction ? choice_code(direction, direction_codes, field("direction")) : 0);
      layouts.push_back(layout ? choice_code(layout, layout_codes, field("scales_layout")) : MXFP8_SCALE_LAYOUT_COMPACT);
      nvfp4.push_back(nv);
    }
    for (const auto &shape : shape_store) {
      ndims.push_back(static_cast<int32_t>(shape.size()));
      shapes.push_back(shape.data());
    }
    const bool every_scales_shape = n > 0 && scales_shape_store.size() == n;
    for (size_t i = 0; every_scales_shape && i < n; ++i) {
      scales_ndims.push_back(static_cast<int32_t>(scales_shape_store[i].size()));
      scales_shapes.push_back(scales_shape_store[i].data());
    }
    desc.source = MXFP8_TRANSFER_FROM_BUCKET;
    desc.destination = MXFP8_TRANSFER_TO_NOTHING;
    desc.count = n;
    desc.bucket_in = bucket;
    desc.parts_in = parts.data();
    desc.ndims = ndims.data();
    desc.shapes = shapes.data();
    desc.formats = formats.data();
    desc.directions = directions.data();
    desc.source_layouts = layouts.data();
    desc.e4m3_maxes = e4m3_maxes.data();
    desc.scales_ndims = every_scales_shape ? scales_ndims.data() : nullptr;
    desc.scales_shapes = every_scales_shape ? scales_shapes.data() : nullptr;
  }
  BucketSource(const BucketSource &) = delete;  // the desc points into the vectors
  BucketSource &operator=(const BucketSource &) = delete;
};

// mxfp8_transfer_check of the bucket alone (TO_NOTHING): the C library's reading of a manifest (what the
// import checks before it looks at a destination), for unpack_bucket's views and SGLang's payload. Only
// the bucket's address and size are read.
void bucket_manifest_check(py::handle bucket, py::handle manifest, bool need_scales_shape) {
  auto taken_bucket = take_dlpack(bucket, "bucket", py::none(), Access::Read);
  BucketSource source(taken_bucket->tensor(), manifest, need_scales_shape);
  check_entries(mxfp8_transfer_check(&source.desc), source.names);  // "... (entry 0 is 'w')", as import_bucket
}

// The transfer `d`, run on `stream` or prepared: a Plan keeping the destinations, or None.
py::object run_transfer(const mxfp8_transfer_desc &d, const Exchange &ex, bool prepare, Destinations &&dst,
                        const std::vector<py::handle> &keys) {
  mxfp8_status st;
  mxfp8_plan *plan = nullptr;
  {
    py::gil_scoped_release unlocked;
    st = prepare ? mxfp8_transfer_prepare(&d, &plan) : mxfp8_transfer(&d, reinterpret_cast<void *>(ex.stream));
  }
  check_entries(st, keys);
  if (prepare) return py::cast(std::make_unique<Plan>(plan, std::move(dst.taken), ex, std::move(dst.pins)));
  return py::none();
}

py::object import_bucket(py::handle bucket, py::handle manifest, py::handle params, int32_t layout,
                         const py::dict &layouts, int32_t scale_fixup, py::object stream, py::object dlpack_stream,
                         bool prepare, const std::optional<std::vector<py::object>> &shards, int32_t global_scale) {
  Exchange ex = exchange_for_objects(bucket, stream, std::move(dlpack_stream));
  auto taken_bucket = take(bucket, "bucket", ex, Access::Read);  // in exchange mode, fixes the stream
  BucketSource source(taken_bucket->tensor(), manifest, false);
  const ShardList shard_list(shards, source.names.size());
  Destinations dst = take_params(params, source.names, source.nvfp4, layout, layouts, ex, prepare);
  dst.pin(bucket);
  mxfp8_transfer_desc &d = source.desc;
  dst.describe(d);
  d.scale_fixup = scale_fixup;
  d.shards = shard_list.data();
  d.global_scale = global_scale;
  dst.taken.push_back(std::move(taken_bucket));  // a plan keeps the bucket it reads (desc.bucket_in stays valid)
  return run_transfer(d, ex, prepare, std::move(dst), source.names);
}

// Handles over the sources of one import, of either format (an NVFP4 handle is an mxfp8_tensor of format
// NVFP4 to the transfer); the tensors own their managed inputs once created.
struct Handles {
  std::vector<const mxfp8_tensor *> tensors;
  Handles() = default;
  Handles(const Handles &) = delete;
  Handles &operator=(const Handles &) = delete;
  ~Handles() {
    for (const mxfp8_tensor *h : tensors) mxfp8_tensor_release(const_cast<mxfp8_tensor *>(h));
  }
};

// The keys a source spec may have (every reader of a spec: import_tensors, and _Spec through read_spec), interned once:
// a spec's keys are matched by address (a Python literal's keys are interned) before by value.
constexpr const char *kSpecKeys[] = {"data", "scale_inv", "fp8_dtype", "swizzled", "shape", "rows", "cols",
                                     "format", "amax", "e4m3_max"};
constexpr size_t kNumSpecKeys = sizeof(kSpecKeys) / sizeof(kSpecKeys[0]);
enum SpecKey { kData, kScaleInv, kFp8Dtype, kSwizzled, kShape, kRows, kCols, kFormat, kAmax, kE4m3Max };

int spec_key_index(PyObject *key) {
  static PyObject *interned[kNumSpecKeys] = {};
  if (!interned[0])
    for (size_t i = 0; i < kNumSpecKeys; ++i) interned[i] = PyUnicode_InternFromString(kSpecKeys[i]);
  for (size_t i = 0; i < kNumSpecKeys; ++i)
    if (key == interned[i]) return static_cast<int>(i);
  if (PyUnicode_Check(key))
    for (size_t i = 0; i < kNumSpecKeys; ++i)
      if (PyUnicode_Compare(key, interned[i]) == 0) return static_cast<int>(i);
  return -1;
}

// One source spec of import_tensors, read as export_bucket reads its specs: unknown keys refused, data,
// scale_inv and "swizzled" (a real bool) required, "format" "mxfp8" or "nvfp4", MXFP8's "fp8_dtype" and
// NVFP4's "amax" / "e4m3_max" on their own format only, a shard refused (the receiver's shards= says it).
// The common values are read here; any other goes to the Python checker that words its refusal.
struct Source {
  py::object data, scale_inv, amax;  // held: the caller's dict may change while its tensors are taken
  bool nvfp4 = false, swizzled = false;
  int32_t format = MXFP8_FORMAT_E4M3, e4m3_max = 448;
  std::vector<int64_t> shape;  // empty: the library reads the logical shape from the data
  py::dict spec;               // holds what the handles above borrow (a copy when the caller's is not a dict)

  bool sharded = false;         // "rows" or "cols" given (what the shard is, _shard.shard_spec reads)

  // shards: whether the caller takes a shard in the spec (export_bucket) or refuses one (import_tensors).
  Source(py::handle key, py::handle spec_object, bool shards = false) {
    const auto where = [&] { return "tensors[" + py::repr(key).cast<std::string>() + "]"; };
    if (PyDict_Check(spec_object.ptr())) {
      spec = py::reinterpret_borrow<py::dict>(spec_object);
    } else {
      static py::handle mapping = py::object(py::module_::import("collections.abc").attr("Mapping")).release();
      if (!py::isinstance(spec_object, mapping))
        throw py::type_error(where() + " must be a dict with 'data' and 'scale_inv', got " + type_name(spec_object));
      spec = py::dict(py::reinterpret_borrow<py::object>(spec_object));
    }
    py::object values[kNumSpecKeys];  // held: a checker below is Python code that may change the spec
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(spec.ptr(), &pos, &k, &v)) {
      const int i = spec_key_index(k);
      if (i >= 0) {
        values[i] = py::reinterpret_borrow<py::object>(v);
        continue;
      }
      std::string known;
      for (const char *name : kSpecKeys) known += (known.empty() ? "" : ", ") + std::string(name);
      throw py::value_error(where() + " has an unknown key " + py::repr(k).cast<std::string>() + " (known: " + known + ")");
    }
    const auto get = [&](SpecKey key) -> const py::object & { return values[key]; };
    for (SpecKey key : {kData, kScaleInv})
      if (!get(key) || get(key).is_none()) throw py::value_error(where() + " has no '" + kSpecKeys[key] + "'");
    data = get(kData);
    scale_inv = get(kScaleInv);
    if (py::handle f = get(kFormat)) {
      static const py::handle formats = python_table("mxfp8._manifest", "ENTRY_FORMATS");
      nvfp4 = choice_code(f, formats, [&] { return where() + "['format']"; }) == 1;
    }
    // Required, as export_components' swizzled= is: TE's padded row-major scales and their 128x4 swizzle
    // have the same size, so a default would read one as the other without an error.
    const py::handle s = get(kSwizzled);
    if (!s)
      throw py::value_error(where() + " has no 'swizzled': True when its scales are in the cuBLAS 128x4 layout "
                            "(TE's optimize_for_gemm), False when row-major (compact or padded); the two have the "
                            "same size, so a guess would read one as the other silently");
    bool plain = true;  // (a value that is not plain is still taken)
    swizzled = flag([&] { return where() + "['swizzled']"; }, s, plain);
    sharded = get(kRows) || get(kCols);
    if (sharded && !shards)
      throw py::value_error(where() + " has 'rows' / 'cols': import_tensors takes a receiver's shard as "
                            "shards={name: {'rows': ..., 'cols': ...}}");
    for (SpecKey key : {kAmax, kE4m3Max, kFp8Dtype})
      if (get(key) && nvfp4 == (key == kFp8Dtype))
        throw py::value_error(where() + " has '" + kSpecKeys[key] + "', " +
                              (nvfp4 ? "which NVFP4 tensors do not take (their values are E2M1)"
                                     : "which only NVFP4 tensors take (set 'format': 'nvfp4')"));
    if (nvfp4) {
      format = MXFP8_FORMAT_NVFP4;
      amax = get(kAmax);
      if (!amax || amax.is_none())
        throw py::value_error(where() + " has no 'amax': an NVFP4 tensor needs its float32 amax (per tensor or per row)");
      if (py::handle m = get(kE4m3Max))
        e4m3_max = static_cast<int32_t>(integer([&] { return where() + "['e4m3_max']"; }, m, plain, 0, INT32_MAX));
    } else if (py::handle d = get(kFp8Dtype)) {
      static const py::handle dtypes = python_table("mxfp8._api", "_FORMATS");
      format = choice_code(d, dtypes, [&] { return where() + "['fp8_dtype']"; });
    }
    if (py::handle given = get(kShape)) {
      shape = shape_arg([&] { return where() + "['shape']"; }, given, plain);
      if (shape.empty())
        throw py::value_error(where() + "['shape'] is empty: an " + (nvfp4 ? "NVFP4" : "MXFP8") +
                              " tensor needs a last dimension K");
    }
  }
};

// One spec read for the Python layer's _Spec (export_bucket, iter_buckets, prepare_*): (data, scale_inv,
// amax or None, nvfp4, swizzled, format, e4m3_max, shape or None, sharded), by the rules import_tensors reads.
py::tuple read_spec(py::handle key, py::handle spec) {
  const Source s(key, spec, true);
  return py::make_tuple(s.data, s.scale_inv, s.amax ? s.amax : py::none(), s.nvfp4, s.swizzled, s.format, s.e4m3_max,
                        s.shape.empty() ? py::object(py::none()) : py::cast(s.shape), s.sharded);
}

// import_tensors / prepare_import_tensors (tensors, params, direction, layout, stream, zero_exponent_as_one,
// shards, global_scale, prepare): the whole call, every argument read here as mxfp8._import read it (its
// checkers word the uncommon refusals), every source spec and its params entry read (no Python work per
// tensor), the handles made, one transfer run (None) or prepared ((Plan, cuda) for mxfp8.Plan).
py::object import_tensors(PyObject *const *args) {
  const py::handle tensors = args[0], params = args[1], stream = args[4], shards = args[6];
  const bool prepare = args[8] == Py_True;
  static const py::handle mapping = python_table("collections.abc", "Mapping");
  if (!PyDict_Check(tensors.ptr()) && !py::isinstance(tensors, mapping))
    throw py::type_error("tensors must be a dict name -> {'data', 'scale_inv', ...}, got " + type_name(tensors));
  // The keys and specs held (a snapshot, with no dict made): a checker or __dlpack__ the call runs is Python
  // code that may change the caller's dict (a mapping is read as dict(tensors)).
  py::object given = py::reinterpret_borrow<py::object>(tensors);
  if (!PyDict_CheckExact(tensors.ptr()))
    given = py::reinterpret_steal<py::object>(PyObject_CallOneArg(reinterpret_cast<PyObject *>(&PyDict_Type), tensors.ptr()));
  if (!given) throw py::error_already_set();
  std::vector<py::object> held;  // key, spec, key, spec, ...
  held.reserve(2 * PyDict_GET_SIZE(given.ptr()));
  PyObject *k, *v;
  for (Py_ssize_t pos = 0; PyDict_Next(given.ptr(), &pos, &k, &v);) {
    held.push_back(py::reinterpret_borrow<py::object>(k));
    held.push_back(py::reinterpret_borrow<py::object>(v));
  }
  const size_t n = held.size() / 2;
  if (!n) throw py::value_error("tensors is empty: nothing to import");
  std::vector<py::handle> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = held[2 * i];
  // The stream, decided by the first source's data as _args.inputs decides it (a bad spec: the specs'
  // reading below says why). With no stream, an immediate call on a framework with an exchange API skips
  // asking that object its device: the transfer takes it through the API and compares every device.
  static PyObject *data_key = PyUnicode_InternFromString("data");
  py::object first = py::none(), stream_ptr = py::reinterpret_borrow<py::object>(stream), dlpack_stream = py::none();
  const py::handle first_spec = held[1];
  if (PyDict_CheckExact(first_spec.ptr())) {
    if (PyObject *d = PyDict_GetItemWithError(first_spec.ptr(), data_key)) first = py::reinterpret_borrow<py::object>(d);
    if (PyErr_Occurred()) throw py::error_already_set();
  } else if (py::isinstance(first_spec, mapping)) {
    first = first_spec.attr("get")("data");
  }
  bool cuda = false;
  if (!first.is_none() && (prepare || !stream.is_none() || !exchange_api_of(first))) {
    py::dict objects;
    objects[py::str("tensors[" + py::repr(keys[0]).cast<std::string>() + "]['data']")] = first;
    const py::tuple in = python_check("inputs", "mxfp8._mxfp8")(stream, objects);  // (torch, cuda, stream, ...)
    cuda = in[1].cast<bool>();
    stream_ptr = in[2];
    if (cuda) dlpack_stream = !stream_ptr.is_none() && stream_ptr.cast<intptr_t>() ? stream_ptr : py::int_(1);
  }
  // The words, read as _import._code reads them (its wording for a refusal).
  static const py::handle direction_words = python_table("mxfp8._api", "_DIRECTIONS"),
                          layouts = python_table("mxfp8._manifest", "LAYOUTS"),
                          global_scales = python_table("mxfp8._import", "_GLOBAL_SCALES");
  const auto code = [](const char *name, py::handle value, py::handle table) {
    return choice_code(value, table, [&] { return std::string(name); }, "_code", "mxfp8._import");
  };
  const int32_t direction = code("direction", args[2], direction_words), layout = code("layout", args[3], layouts);
  const int32_t scale_fixup = PyBool_Check(args[5]) ? args[5] == Py_True
                                                    : python_check("_fixup", "mxfp8._import")(py::handle(args[5])).cast<int32_t>();
  // The shards read by the Python layer's reader (only when given: it is a module lookup).
  const auto read_shards = [&] {
    return python_check("_shards", "mxfp8._import")(py::cast(keys), shards, "the tensors dict").cast<std::vector<py::object>>();
  };
  const ShardList shard_list(shards.is_none() ? std::nullopt : std::optional(read_shards()), n);
  const int32_t global_scale = code("global_scale", args[7], global_scales);
  std::vector<Source> sources;
  sources.reserve(n);
  for (size_t i = 0; i < n; ++i) sources.emplace_back(keys[i], held[2 * i + 1]);
  std::vector<bool> nvfp4(n);
  for (size_t i = 0; i < n; ++i) nvfp4[i] = sources[i].nvfp4;
  Exchange ex = exchange_for_objects(sources[0].data, stream_ptr, std::move(dlpack_stream));
  Handles handles;
  handles.tensors.reserve(n);
  std::vector<py::object> source_pins;
  for (size_t i = 0; i < n; ++i) {
    const Source &src = sources[i];
    const auto where = [&] { return "tensors[" + py::repr(keys[i]).cast<std::string>() + "]"; };
    if (prepare)  // a plan's sources: their storages pinned with the destinations' (take_params, below)
      for (py::handle obj : {py::handle(src.data), py::handle(src.scale_inv), src.nvfp4 ? py::handle(src.amax) : py::handle(Py_None)}) {
        py::object storage = storage_of(obj);
        if (!storage.is_none()) source_pins.push_back(std::move(storage));
      }
    auto d = take(src.data, Name("tensors", keys[i], "['data']"), ex, Access::Read);
    auto s = take(src.scale_inv, Name("tensors", keys[i], "['scale_inv']"), ex, Access::Read);
    auto a = src.nvfp4 ? take(src.amax, Name("tensors", keys[i], "['amax']"), ex, Access::Read) : nullptr;
    mxfp8_tensor_desc desc =
        tensor_desc(src.format, src.nvfp4 ? MXFP8_BLOCK_1X16 : MXFP8_BLOCK_1X32, src.swizzled, &src.shape);
    if (src.nvfp4) desc.e4m3_max = src.e4m3_max;
    handles.tensors.push_back(
        one_direction_tensor(desc, direction, *d, *s, a.get(), [&](mxfp8_status st) { check_source(st, where); }));
  }
  Destinations dst = take_params(params, keys, nvfp4, layout, layouts, ex, prepare);
  for (py::object &storage : source_pins) dst.pins.push_back(std::move(storage));
  const std::vector<int32_t> directions(n, direction);
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = MXFP8_TRANSFER_FROM_TENSORS;
  d.count = n;
  d.tensors = handles.tensors.data();
  d.directions = directions.data();
  d.shards = shard_list.data();
  dst.describe(d);
  d.scale_fixup = scale_fixup;
  d.global_scale = global_scale;
  py::object plan = run_transfer(d, ex, prepare, std::move(dst), keys);  // stream: the first take's
  return prepare ? py::make_tuple(plan, cuda) : plan;
}

int64_t layout_bytes(int32_t layout, int32_t direction, int64_t rows, int64_t cols) {
  int64_t bytes = 0;
  check(mxfp8_layout_bytes(layout, direction, rows, cols, &bytes));
  return bytes;
}

}  // namespace

void register_import(py::module_ &m) {
  m.def("import_bucket", &import_bucket, py::arg("bucket"), py::arg("manifest"), py::arg("params"), py::arg("layout"),
        py::arg("layouts"), py::arg("scale_fixup"), py::arg("stream"), py::arg("dlpack_stream"), py::arg("prepare"),
        py::arg("shards") = py::none(), py::arg("global_scale") = 0,
        "mxfp8_transfer from a bucket its manifest describes into params[name] (or mxfp8_transfer_prepare with "
        "prepare=True, returning a Plan).");
  m.def("bucket_manifest_check", &bucket_manifest_check, py::arg("bucket"), py::arg("manifest"),
        py::arg("need_scales_shape") = false, "mxfp8_transfer_check of a bucket alone (MXFP8_TRANSFER_TO_NOTHING).");
  m.def("read_spec", &read_spec, py::arg("name"), py::arg("spec"),
        "A source spec read and checked (the one reader of every spec): (data, scale_inv, amax, nvfp4, swizzled, "
        "format, e4m3_max, shape or None, sharded).");
  static PyMethodDef entry = {
      "import_tensors", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fastcall<import_tensors, 9>)),
      METH_FASTCALL,
      "import_tensors(tensors, params, direction, layout, stream, zero_exponent_as_one, shards, global_scale, "
      "prepare)\n--\n\nmxfp8.import_tensors (None) and prepare_import_tensors (prepare True: (Plan, cuda))."};
  m.add_object(entry.ml_name, py::reinterpret_steal<py::object>(PyCFunction_NewEx(&entry, nullptr, m.attr("__name__").ptr())));
  m.def("layout_bytes", &layout_bytes, py::arg("layout"), py::arg("direction"), py::arg("rows"), py::arg("cols"),
        "mxfp8_layout_bytes.");
}
