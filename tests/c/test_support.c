#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t rng_next(uint64_t *state) {
  /* splitmix64 */
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fill_random(uint8_t *p, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; ++i) p[i] = (uint8_t)rng_next(state);
}

void fill_random_scales(uint8_t *p, size_t n, uint64_t *state) {
  for (size_t i = 0; i < n; ++i) p[i] = (uint8_t)(1 + rng_next(state) % 254); /* 1..254 */
}

void fill_quantize_input(void *buf, int type, size_t n, uint64_t *state) {
  /* exponent field width, bias-relative range of ordinary values, mantissa width */
  const int exp_bits = type == 2 ? 8 : type == 1 ? 5 : 8, man_bits = type == 2 ? 23 : type == 1 ? 10 : 7;
  const int bias = (1 << (exp_bits - 1)) - 1;
  uint32_t block_exp = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng_next(state);
    if (i % 32 == 0) block_exp = (uint32_t)(bias - 6 + (int)(rng_next(state) % 12)); /* a few binades */
    uint32_t bits;
    if (r % 64 == 0) {
      bits = (uint32_t)(r >> 8); /* any pattern: NaN, Inf, subnormal, huge */
    } else if ((i / 32) % 11 == 5) {
      bits = 0; /* an all-zero block */
    } else {
      const uint32_t e = block_exp - (uint32_t)((r >> 8) % 4);
      uint32_t m = (uint32_t)(r >> 16) & ((1u << man_bits) - 1);
      if ((r >> 40) % 2) m &= ~((1u << (man_bits - 5)) - 1); /* 5 mantissa bits: exact ties after scaling */
      bits = (e << man_bits) | m;
      bits |= (uint32_t)((r >> 48) & 1) << (exp_bits + man_bits); /* sign */
    }
    if (type == 2) ((uint32_t *)buf)[i] = bits;
    else ((uint16_t *)buf)[i] = (uint16_t)bits;
  }
}

DLManagedTensorVersioned borrowed_bytes(void *data, DLDeviceType device_type, int32_t ndim, int64_t *shape) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.dl_tensor.data = data;
  m.dl_tensor.device.device_type = device_type;
  m.dl_tensor.ndim = ndim;
  m.dl_tensor.dtype.code = kDLUInt;
  m.dl_tensor.dtype.bits = 8;
  m.dl_tensor.dtype.lanes = 1;
  m.dl_tensor.shape = shape;
  return m;
}

void test_tensor_count_deleter(DLManagedTensorVersioned *self) {
  test_tensor *t = (test_tensor *)self->manager_ctx;
  t->deleter_calls++;
}

test_tensor *test_tensor_new(int32_t ndim, const int64_t *shape, uint8_t code, int with_deleter) {
  test_tensor *t = (test_tensor *)calloc(1, sizeof(test_tensor));
  size_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) {
    t->shape[i] = shape[i];
    n *= (size_t)shape[i];
  }
  int64_t s = 1;
  for (int32_t i = ndim - 1; i >= 0; --i) {
    t->strides[i] = s;
    s *= shape[i];
  }
  t->bytes = n;
  t->buffer = (uint8_t *)malloc(n ? n : 1);
  memset(t->buffer, POISON, n);
  t->managed.version.major = DLPACK_MAJOR_VERSION;
  t->managed.version.minor = DLPACK_MINOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = with_deleter ? test_tensor_count_deleter : NULL;
  t->managed.dl_tensor.data = t->buffer;
  t->managed.dl_tensor.device.device_type = kDLCPU;
  t->managed.dl_tensor.ndim = ndim;
  t->managed.dl_tensor.dtype.code = code;
  t->managed.dl_tensor.dtype.bits = 8;
  t->managed.dl_tensor.dtype.lanes = 1;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.dl_tensor.strides = t->strides;
  return t;
}

test_tensor *test_float_tensor(int64_t n, const float *values) {
  const int64_t bytes = n * 4;
  test_tensor *t = test_tensor_new(1, &bytes, kDLUInt, 1);
  t->shape[0] = n;
  t->strides[0] = 1;
  t->managed.dl_tensor.dtype.code = kDLFloat;
  t->managed.dl_tensor.dtype.bits = 32;
  memcpy(t->buffer, values, (size_t)bytes);
  return t;
}

void test_tensor_free(test_tensor *t) {
  if (!t) return;
  free(t->buffer);
  free(t);
}

int64_t ref_round_up(int64_t n, int64_t d) { return (n + d - 1) / d * d; }
int64_t ref_ceil_div(int64_t n, int64_t d) { return (n + d - 1) / d; }

size_t ref_swizzled_index(int64_t r, int64_t c, int64_t padded_cols) {
  /* padded (r, c) = reshaped (a, b, cc, d, e) with dims (Rp/128, 4, 32, Cp/4, 4);
   * the permuted array has dims (Rp/128, Cp/4, 32, 4, 4) and index (a, d, cc, b, e). */
  const int64_t a = r / 128, b = (r % 128) / 32, cc = r % 32, d = c / 4, e = c % 4;
  const int64_t tiles_per_row = padded_cols / 4;
  return (size_t)((((a * tiles_per_row + d) * 32 + cc) * 4 + b) * 4 + e);
}

static double decode_minifloat(uint8_t v, int exp_bits, int man_bits, int bias, int e4m3fn) {
  const int sign = v >> 7;
  const int e = (v >> man_bits) & ((1 << exp_bits) - 1);
  const int m = v & ((1 << man_bits) - 1);
  double x;
  if (e4m3fn) {
    if (e == 15 && m == 7) return NAN; /* E4M3FN: only S.1111.111 is NaN, no infinities */
  } else if (e == (1 << exp_bits) - 1) {
    x = m ? NAN : INFINITY;
    return sign ? -x : x;
  }
  if (e == 0) x = ldexp((double)m, 1 - bias - man_bits);
  else x = ldexp((double)((1 << man_bits) | m), e - bias - man_bits);
  return sign ? -x : x;
}

double ref_decode_e4m3(uint8_t v) { return decode_minifloat(v, 4, 3, 7, 1); }
double ref_decode_e5m2(uint8_t v) { return decode_minifloat(v, 5, 2, 15, 0); }
double ref_decode_e8m0(uint8_t s) { return s == 255 ? NAN : ldexp(1.0, (int)s - 127); }

uint8_t read_through_strides(const DLTensor *t, int64_t index) {
  int64_t offset = 0;
  for (int32_t i = t->ndim - 1; i >= 0; --i) {
    const int64_t coord = index % t->shape[i];
    index /= t->shape[i];
    offset += coord * t->strides[i];
  }
  return ((const uint8_t *)t->data)[t->byte_offset + (uint64_t)offset];
}

void assert_last_error_contains(const char *needle) {
  const char *message = mxfp8_last_error();
  assert_non_null(message);
  if (!strstr(message, needle)) {
    print_error("expected the last error to contain \"%s\", got \"%s\"\n", needle, message);
    fail();
  }
}

void release_managed(DLManagedTensorVersioned *m) {
  if (m && m->deleter) m->deleter(m);
}

mxfp8_status nvfp4_export_components(const mxfp8_tensor *tensor, const mxfp8_export_options *options,
                                     DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales,
                                     DLManagedTensorVersioned **global_scale) {
  DLManagedTensorVersioned *v = NULL, *s = NULL, *g = NULL;
  if (values || scales) {
    const mxfp8_status st = mxfp8_export_components(tensor, options, values ? &v : NULL, scales ? &s : NULL);
    if (st != MXFP8_OK) return st;
  }
  if (global_scale) {
    const mxfp8_status st = mxfp8_export_global_scale(tensor, options, &g);
    if (st != MXFP8_OK) {
      release_managed(v);
      release_managed(s);
      return st;
    }
  }
  if (values) *values = v;
  if (scales) *scales = s;
  if (global_scale) *global_scale = g;
  return MXFP8_OK;
}

int poisoned_allocator_calls = 0;

static void free_test_tensor_deleter(DLManagedTensorVersioned *self) {
  test_tensor_free((test_tensor *)self->manager_ctx);
}

int poisoned_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                       void (*set_error)(void *error_ctx, const char *kind, const char *message)) {
  if (prototype->device.device_type != kDLCPU) {
    set_error(error_ctx, "ValueError", "poisoned_allocator only makes host tensors");
    return -1;
  }
  poisoned_allocator_calls++;
  test_tensor *t = test_tensor_new(prototype->ndim, prototype->shape, prototype->dtype.code, 1);
  t->managed.deleter = free_test_tensor_deleter;
  *out = &t->managed;
  return 0;
}

#ifdef MXFP8_TEST_WITH_CUDA
#include <cuda_runtime_api.h>
int cuda_device_available(void) {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}
#else
int cuda_device_available(void) { return 0; }
#endif

mxfp8_status export_shard(const mxfp8_tensor *tensor, const mxfp8_shard *shard, const mxfp8_export_options *options,
                          DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales) {
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  if (options) {
    /* A smaller struct_size would make the library ignore the shard set below: a test mistake, not input. */
    if (options->struct_size != sizeof o) {
      fprintf(stderr, "export_shard: options.struct_size %u, the helper needs a full-size struct\n",
              (unsigned)options->struct_size);
      abort();
    }
    o = *options;
  }
  o.shard = shard;
  return mxfp8_export_components(tensor, &o, values, scales);
}

const int32_t *all_in_direction(int32_t direction) {
#define COL8 MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE, \
             MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE
  static const int32_t rowwise[TEST_MAX_ENTRIES] = {0};
  static const int32_t columnwise[TEST_MAX_ENTRIES] = {COL8, COL8, COL8, COL8, COL8, COL8, COL8, COL8};
#undef COL8
  return direction == MXFP8_DIRECTION_COLUMNWISE ? columnwise : rowwise;
}
