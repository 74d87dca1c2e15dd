// Compiled as C++17 with -pedantic -Werror: the header works from C++ and its initializers too.
#include <mxfp8/mxfp8.h>

#include <type_traits>

static_assert(std::is_standard_layout<mxfp8_tensor_desc>::value, "C layout");
static_assert(std::is_standard_layout<mxfp8_export_options>::value, "C layout");

int mxfp8_header_cxx17_check() {
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  mxfp8_export_options options = MXFP8_EXPORT_OPTIONS_INIT;
  return static_cast<int>(desc.struct_size + options.struct_size);
}
