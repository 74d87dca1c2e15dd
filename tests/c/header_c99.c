/* Compiled with -std=c99 -pedantic -Werror: the public header is plain C99 and its initializers work. */
#include <mxfp8/mxfp8.h>

int mxfp8_header_c99_check(void);
int mxfp8_header_c99_check(void) {
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  mxfp8_export_options options = MXFP8_EXPORT_OPTIONS_INIT;
  return (int)desc.struct_size + (int)options.struct_size;
}
