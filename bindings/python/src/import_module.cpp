// A module of its own for the receiver's import while the main extension (module.cpp) is being
// rewritten: at the merge, module.cpp calls register_import(m) itself and this file goes away
// (mxfp8/_import.py looks for the functions in _mxfp8 first).
#include <pybind11/pybind11.h>

void register_import(pybind11::module_ &m);

PYBIND11_MODULE(_mxfp8_import, m) {
  m.doc() = "mxfp8's receiver-side import (mxfp8_import_bucket, mxfp8_import_tensors)";
  register_import(m);
}
