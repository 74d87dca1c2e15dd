// Python arguments read as mxfp8._args reads them (int, bool, word, shape), with its wording of every
// refusal, for both translation units of the extension: module.cpp's calls and import_bindings.cpp's
// specs and manifests. A plain value (an exact int, True / False, a list or tuple of ints) costs no
// Python call; anything else clears `plain`, which tells a caller the call was not the common case.
#pragma once

#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mxfp8_python {

namespace py = pybind11;

inline std::string type_name(py::handle obj) { return py::str(py::type::of(obj).attr("__name__")).cast<std::string>(); }

// A Python int (not a bool) that fits in int64_t, or nothing.
inline std::optional<int64_t> as_int64(py::handle obj) {
  if (!PyLong_Check(obj.ptr()) || PyBool_Check(obj.ptr())) return std::nullopt;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (overflow || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

inline std::string repr_of(py::handle obj) { return py::repr(obj).cast<std::string>(); }

// Python's hasattr: only an AttributeError means "no". py::hasattr (PyObject_HasAttrString, which returns 0
// on any error, on every Python version) swallows every exception, so a __getattr__ that fails (a lazy
// tensor that cannot materialize) read as "not a DLPack object" or "not a sequence" instead of the
// caller's own error.
inline bool has_attribute(py::handle obj, const char *name) {
  PyObject *value = PyObject_GetAttrString(obj.ptr(), name);
  if (value) {
    Py_DECREF(value);
    return true;
  }
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) throw py::error_already_set();
  PyErr_Clear();
  return false;
}

// The code of a str `value` among `table`'s keys, or nothing (not a str, or not a key).
template <size_t N>
std::optional<int> lookup(py::handle value, const std::pair<const char *, int> (&table)[N]) {
  if (!PyUnicode_Check(value.ptr())) return std::nullopt;
  Py_ssize_t size = 0;
  const char *s = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (!s) {
    PyErr_Clear();
    return std::nullopt;
  }
  for (const auto &[key, code] : table)
    if (std::strlen(key) == static_cast<size_t>(size) && std::memcmp(key, s, size) == 0) return code;
  return std::nullopt;
}

// `table`'s keys as Python prints them, "'a', 'b'": in the table's order, or sorted (_args.choice's
// sorted(table)).
template <size_t N>
std::string keys_of(const std::pair<const char *, int> (&table)[N], bool sorted) {
  std::vector<std::string> keys;
  for (const auto &entry : table) keys.push_back(entry.first);
  if (sorted) std::sort(keys.begin(), keys.end());
  std::string listed;
  for (const std::string &key : keys) listed += (listed.empty() ? "'" : ", '") + key + "'";
  return listed;
}

// _args.choice: a str among `table`'s keys (the message lists them sorted, or in the table's order).
template <size_t N>
int choice(const char *name, py::handle value, const std::pair<const char *, int> (&table)[N], bool sorted = true) {
  if (const auto code = lookup(value, table)) return *code;
  throw py::value_error(std::string(name) + " must be one of [" + keys_of(table, sorted) + "], got " + repr_of(value));
}

// What a refusal names: a C string, or a callable that makes it, called only to word a refusal (a
// spec's "tensors['w']['shape']" costs a repr of the key, which no value that is taken pays).
inline std::string label_text(const char *name) { return name; }
inline std::string label_text(const std::string &name) { return name; }
template <class Make, class = decltype(std::declval<const Make &>()())>
std::string label_text(const Make &make) { return make(); }

// A module already imported (numpy, torch), or a null object; no import is attempted. sys.modules[name]
// = None (how a program blocks a module) is "not imported", as sys.modules.get(name) reads it in _args.
inline py::object imported(const char *name) {
  const py::object module_name = py::reinterpret_steal<py::object>(PyUnicode_FromString(name));
  if (!module_name) throw py::error_already_set();
  py::object module = py::reinterpret_steal<py::object>(PyImport_GetModule(module_name.ptr()));
  if (!module && PyErr_Occurred()) throw py::error_already_set();
  return module && !module.is_none() ? module : py::object();
}

// Whether `value` is NumPy's bool (a flag, as True and False are).
inline bool numpy_bool(py::handle value) {
  const py::object np = imported("numpy");
  if (!np) return false;
  return py::isinstance(value, np.attr("bool_"));
}

// _args.flag: a real bool, or NumPy's (which makes the call not plain).
template <class Label>
bool flag(const Label &name, py::handle value, bool &plain) {
  if (value.ptr() == Py_True) return true;
  if (value.ptr() == Py_False) return false;
  if (numpy_bool(value)) {
    plain = false;
    return value.cast<bool>();
  }
  throw py::type_error(label_text(name) + " must be True or False, got " + repr_of(value) + " (" + type_name(value) + ")");
}

// _args.integer: an int (anything with __index__ but a bool) in [low, high]; name[index] when index >= 0.
template <class Label>
int64_t integer(const Label &name, py::handle value, bool &plain, int64_t low = INT64_MIN, int64_t high = INT64_MAX,
                Py_ssize_t index = -1) {
  auto label = [&] { return index < 0 ? label_text(name) : label_text(name) + "[" + std::to_string(index) + "]"; };
  py::object number;
  if (PyLong_CheckExact(value.ptr())) {
    number = py::reinterpret_borrow<py::object>(value);
  } else {
    plain = false;
    PyObject *i = PyBool_Check(value.ptr()) ? nullptr : PyNumber_Index(value.ptr());
    if (!i) {
      if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError)) throw py::error_already_set();
      PyErr_Clear();
      throw py::type_error(label() + " must be an int, got " + repr_of(value) + " (" + type_name(value) + ")");
    }
    number = py::reinterpret_steal<py::object>(i);
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow || v < low || v > high)
    throw py::value_error(label() + " is " + py::str(number).cast<std::string>() + ", expected " + std::to_string(low) +
                          " to " + std::to_string(high));
  return v;
}

// A mapping (a dict or any collections.abc.Mapping), whose iteration gives its keys: no shape, though it has
// __len__ and __getitem__ as a sequence does (a 1-D torch tensor or NumPy array is a shape).
inline bool is_mapping(py::handle value) {
  if (PyDict_Check(value.ptr())) return true;
  // Kept for the process (a static py::object would be released after the interpreter is gone).
  static PyObject *const mapping = py::object(py::module_::import("collections.abc").attr("Mapping")).release().ptr();
  const int is = PyObject_IsInstance(value.ptr(), mapping);
  if (is < 0) throw py::error_already_set();
  return is == 1;
}

// _args.shape: a sequence of ints that fit int64 (the library checks what they mean).
template <class Label>
std::vector<int64_t> shape_arg(const Label &name, py::handle value, bool &plain) {
  std::vector<int64_t> dims;
  PyObject *o = value.ptr();
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o)) {
    // A list with an item that is not an exact int is read from a tuple of its items: that item's __index__
    // is Python code, which may change the list under the loop (exact ints run none).
    py::object items = py::reinterpret_borrow<py::object>(value);
    if (PyList_CheckExact(o))
      for (Py_ssize_t i = 0; i < PyList_GET_SIZE(o); ++i)
        if (!PyLong_CheckExact(PyList_GET_ITEM(o, i))) {
          items = py::reinterpret_steal<py::object>(PyList_AsTuple(o));
          if (!items) throw py::error_already_set();
          break;
        }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(items.ptr());
    dims.reserve(n);
    for (Py_ssize_t i = 0; i < n; ++i)
      dims.push_back(integer(name, PySequence_Fast_GET_ITEM(items.ptr(), i), plain, INT64_MIN, INT64_MAX, i));
    return dims;
  }
  plain = false;
  if (PyUnicode_Check(o) || PyBytes_Check(o) || !has_attribute(value, "__len__") || !has_attribute(value, "__getitem__") ||
      is_mapping(value))
    throw py::type_error(label_text(name) + " must be a sequence of ints, got " + repr_of(value) + " (" + type_name(value) + ")");
  Py_ssize_t i = 0;
  for (py::handle d : py::reinterpret_borrow<py::iterable>(value)) dims.push_back(integer(name, d, plain, INT64_MIN, INT64_MAX, i++));
  return dims;
}

}  // namespace mxfp8_python
