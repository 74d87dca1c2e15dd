// A serving stack's kernel loader, in miniature: dlopen libmxfp8_tvm_ffi, look its functions up by name
// (`__tvm_ffi_<name>`) and call them through tvm-ffi's stable C ABI: arguments and result as TVMFFIAny,
// errors fetched with TVMFFIErrorMoveFromRaised. It includes no mxfp8 header and does not link libmxfp8:
// everything it knows about the library is the function names and their arguments.
//
// Usage: load_adapter /path/to/libmxfp8_tvm_ffi.so
// Undoes the 128x4 GEMM swizzle of a 200 x 7 scale matrix built here from the layout's formula, checks
// every byte, swizzles it back, then checks what a bad call raises.
#include <dlfcn.h>
#include <tvm/ffi/c_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

// A function of the library, as the loader sees it.
TVMFFISafeCallType lookup(void *library, const char *name) {
  std::string symbol = std::string("__tvm_ffi_") + name;
  auto f = reinterpret_cast<TVMFFISafeCallType>(dlsym(library, symbol.c_str()));
  if (f == nullptr) std::fprintf(stderr, "%s not found: %s\n", symbol.c_str(), dlerror());
  return f;
}

TVMFFIAny none() {
  TVMFFIAny a;
  std::memset(&a, 0, sizeof a);
  a.type_index = kTVMFFINone;
  return a;
}

// A borrowed host tensor argument: tvm-ffi passes a DLTensor* as it is (a TensorView on the other side).
TVMFFIAny tensor_arg(DLTensor *t) {
  TVMFFIAny a = none();
  a.type_index = kTVMFFIDLTensorPtr;
  a.v_ptr = t;
  return a;
}

DLTensor host_uint8(uint8_t *data, int32_t ndim, int64_t *shape, int64_t *strides) {
  DLTensor t;
  std::memset(&t, 0, sizeof t);
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = ndim;
  t.dtype = {kDLUInt, 8, 1};
  t.shape = shape;
  t.strides = strides;
  return t;
}

// The error a failed call raised, as "Kind: message"; printed, then released.
std::string take_raised_error(const char *call) {
  TVMFFIObjectHandle error = nullptr;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == nullptr) {
    std::printf("%s failed without an error object\n", call);
    return "";
  }
  const TVMFFIErrorCell *cell = TVMFFIErrorGetCellPtr(error);
  std::string text = std::string(cell->kind.data, cell->kind.size) + ": " +
                     std::string(cell->message.data, cell->message.size);
  TVMFFIObjectDecRef(error);
  std::printf("%s raised %s\n", call, text.c_str());
  return text;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s /path/to/libmxfp8_tvm_ffi.so\n", argv[0]);
    return 2;
  }
  void *library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  TVMFFISafeCallType version = lookup(library, "version");
  TVMFFISafeCallType unswizzle = lookup(library, "unswizzle_scales");
  TVMFFISafeCallType swizzle = lookup(library, "swizzle_scales");
  if (version == nullptr || unswizzle == nullptr || swizzle == nullptr) return 1;

  TVMFFIAny result = none();
  if (version(nullptr, nullptr, 0, &result) != 0 || result.type_index != kTVMFFIInt) {
    take_raised_error("version");
    return 1;
  }
  std::printf("libmxfp8 %lld through tvm-ffi\n", static_cast<long long>(result.v_int64));

  // S (R x C) in the cuBLAS 128x4 layout: tiles of 128 rows x 4 columns, 512 bytes each, tile-row-major.
  const int64_t rows = 200, cols = 7, padded_rows = 256, padded_cols = 8;
  std::vector<uint8_t> swizzled(padded_rows * padded_cols, 0xEE);  // padding that must never be read
  std::vector<uint8_t> expected_swizzle(swizzled.size(), 0);          // what swizzle_scales writes back
  auto scale = [](int64_t r, int64_t c) { return static_cast<uint8_t>((r * 7 + c * 13 + 1) % 251); };
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      int64_t at = ((r / 128) * (padded_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
      swizzled[at] = expected_swizzle[at] = scale(r, c);
    }
  std::vector<uint8_t> compact(rows * cols, 0xAA);  // poisoned: every byte must be written

  int64_t swizzled_shape[1] = {padded_rows * padded_cols}, swizzled_strides[1] = {1};
  int64_t compact_shape[2] = {rows, cols}, compact_strides[2] = {cols, 1};
  DLTensor swizzled_t = host_uint8(swizzled.data(), 1, swizzled_shape, swizzled_strides);
  DLTensor compact_t = host_uint8(compact.data(), 2, compact_shape, compact_strides);

  TVMFFIAny args[2] = {tensor_arg(&swizzled_t), tensor_arg(&compact_t)};
  result = none();
  if (unswizzle(nullptr, args, 2, &result) != 0) {
    take_raised_error("unswizzle_scales");
    return 1;
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (compact[r * cols + c] != scale(r, c)) {
        std::printf("unswizzle_scales: scale (%lld, %lld) is %u, expected %u\n", static_cast<long long>(r),
                    static_cast<long long>(c), compact[r * cols + c], scale(r, c));
        return 1;
      }

  // Back again: the swizzled buffer comes out as the formula placed it, padding zeroed.
  std::vector<uint8_t> again(swizzled.size(), 0xAA);
  DLTensor again_t = host_uint8(again.data(), 1, swizzled_shape, swizzled_strides);
  TVMFFIAny back[2] = {tensor_arg(&compact_t), tensor_arg(&again_t)};
  result = none();
  if (swizzle(nullptr, back, 2, &result) != 0) {
    take_raised_error("swizzle_scales");
    return 1;
  }
  for (size_t i = 0; i < again.size(); ++i)
    if (again[i] != expected_swizzle[i]) {
      std::printf("swizzle_scales: byte %zu is %u\n", i, again[i]);
      return 1;
    }
  std::printf("unswizzled a %lld x %lld scale matrix and swizzled it back, every byte as the formula says\n",
              static_cast<long long>(rows), static_cast<long long>(cols));

  // A swizzled buffer one byte short of the layout's 256 x 8 bytes: the call fails, the error names the
  // argument, nothing is written.
  int64_t short_shape[1] = {padded_rows * padded_cols - 1};
  DLTensor short_t = host_uint8(swizzled.data(), 1, short_shape, swizzled_strides);
  TVMFFIAny bad[2] = {tensor_arg(&short_t), tensor_arg(&compact_t)};
  result = none();
  if (unswizzle(nullptr, bad, 2, &result) == 0) {
    std::printf("unswizzle_scales accepted a swizzled buffer of the wrong size\n");
    return 1;
  }
  std::string error = take_raised_error("unswizzle_scales with 2047 swizzled bytes");
  if (error.rfind("ValueError: invalid argument: swizzled: ", 0) != 0) {
    std::printf("expected a ValueError naming `swizzled`\n");
    return 1;
  }
  return 0;
}
