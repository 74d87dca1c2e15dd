/* A plain C program that loads libmxfp8 at run time, as a serving stack's plugin loader would, and
 * exports a swizzled tensor through dlsym'd entry points. Usage: test_dlopen /path/to/libmxfp8.so */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <mxfp8/mxfp8.h>

#define LOAD(var, name)                                               \
  var = (__typeof__(var))dlsym(lib, name);                             \
  if (!var) {                                                          \
    fprintf(stderr, "dlsym(%s) failed: %s\n", name, dlerror());        \
    return 1;                                                          \
  }

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return 1;
  }
  uint32_t (*version)(void);
  mxfp8_status (*create)(const mxfp8_tensor_desc *, mxfp8_tensor **);
  void (*release)(mxfp8_tensor *);
  mxfp8_status (*export_components)(const mxfp8_tensor *, const mxfp8_export_options *,
                                    DLManagedTensorVersioned **, DLManagedTensorVersioned **);
  const char *(*last_error)(void);
  LOAD(version, "mxfp8_version");
  LOAD(create, "mxfp8_tensor_create");
  LOAD(release, "mxfp8_tensor_release");
  LOAD(export_components, "mxfp8_export_components");
  LOAD(last_error, "mxfp8_last_error");
  if (version() != MXFP8_VERSION) {
    fprintf(stderr, "library version %u, header %u\n", version(), (unsigned)MXFP8_VERSION);
    return 1;
  }
  /* A (4, 64) tensor: 4 x 2 scales, swizzled into one 512-byte tile; scale (r, c) = 10 * r + c + 1. */
  static uint8_t values[4 * 64], swizzled[512];
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) swizzled[r * 16 + c] = (uint8_t)(10 * r + c + 1);
  int64_t shape[2] = {4, 64}, swizzled_shape[2] = {128, 4};
  DLManagedTensorVersioned data, scales;
  memset(&data, 0, sizeof data);
  memset(&scales, 0, sizeof scales);
  data.dl_tensor.data = values;
  data.dl_tensor.device.device_type = kDLCPU;
  data.dl_tensor.ndim = 2;
  data.dl_tensor.shape = shape;
  data.dl_tensor.dtype.code = kDLUInt;
  data.dl_tensor.dtype.bits = 8;
  data.dl_tensor.dtype.lanes = 1;
  data.version.major = DLPACK_MAJOR_VERSION;
  data.version.minor = DLPACK_MINOR_VERSION;
  scales.version = data.version;
  scales.dl_tensor = data.dl_tensor;
  scales.dl_tensor.data = swizzled;
  scales.dl_tensor.shape = swizzled_shape;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = NULL;
  if (create(&desc, &t) != MXFP8_OK) {
    fprintf(stderr, "create: %s\n", last_error());
    return 1;
  }
  DLManagedTensorVersioned *out = NULL;
  if (export_components(t, NULL, NULL, &out) != MXFP8_OK) {
    fprintf(stderr, "export: %s\n", last_error());
    return 1;
  }
  const uint8_t *s = (const uint8_t *)out->dl_tensor.data;
  int bad = 0;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) bad += s[r * 2 + c] != 10 * r + c + 1;
  out->deleter(out);
  release(t);
  dlclose(lib);
  printf("dlopen + dlsym export: %s\n", bad ? "wrong scales" : "ok");
  return bad != 0;
}
