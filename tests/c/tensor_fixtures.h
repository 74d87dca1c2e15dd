/* Tensors and buffers the contract tests share: a rowwise E4M3 tensor with TE-padded scales, an NVFP4
 * tensor, host byte views, and the checks that a refused call wrote nothing (every byte still POISON, an
 * output pointer still SENTINEL). Built from the formats' definitions, never by the library. */
#ifndef MXFP8_TENSOR_FIXTURES_H_
#define MXFP8_TENSOR_FIXTURES_H_

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* What an output pointer holds before a call that must not write it on failure. */
#define SENTINEL ((DLManagedTensorVersioned *)(uintptr_t)0xBAD0)

/* A rowwise (m, k) E4M3 tensor with TE-padded row-major scales (roundup(m, 128), roundup(ceil(k/32), 4)),
 * its compact scales S kept for reference. */
typedef struct {
  int64_t m, k, sr, sc;
  test_tensor *data, *scales;
  uint8_t *s;
  mxfp8_tensor *t;
} rowwise_tensor;

static inline void make_rowwise(rowwise_tensor *r, int64_t m, int64_t k, uint64_t seed) {
  memset(r, 0, sizeof *r);
  r->m = m;
  r->k = k;
  r->sr = m;
  r->sc = ref_ceil_div(k, 32);
  const int64_t shape[2] = {m, k}, padded[2] = {ref_round_up(m, 128), ref_round_up(r->sc, 4)};
  r->data = test_tensor_new(2, shape, kDLUInt, 1);
  r->scales = test_tensor_new(2, padded, kDLUInt, 1);
  uint64_t rng = seed;
  fill_random(r->data->buffer, r->data->bytes, &rng);
  r->s = malloc((size_t)(r->sr * r->sc) + 1);
  fill_random_scales(r->s, (size_t)(r->sr * r->sc), &rng);
  for (int64_t y = 0; y < r->sr; ++y)
    for (int64_t x = 0; x < r->sc; ++x) r->scales->buffer[y * padded[1] + x] = r->s[y * r->sc + x];
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &r->data->managed;
  desc.rowwise_scale_inv = &r->scales->managed;
  assert_int_equal(mxfp8_tensor_create(&desc, &r->t), MXFP8_OK);
}

static inline void free_rowwise(rowwise_tensor *r) {
  mxfp8_tensor_release(r->t);
  assert_int_equal(r->data->deleter_calls, 1);
  assert_int_equal(r->scales->deleter_calls, 1);
  test_tensor_free(r->data);
  test_tensor_free(r->scales);
  free(r->s);
}

static inline DLTensor host_bytes(void *data, int32_t ndim, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = kDLUInt;
  t.dtype.bits = 8;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static inline int all_poison(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != POISON) return 0;
  return 1;
}

/* A rowwise (40, 48) NVFP4 tensor: uint8 values (40, 24), TE-padded (128, 4) E4M3 scales for its 40 x 3
 * scale matrix (so an export's scales are a copy), one amax. */
typedef struct {
  test_tensor *data, *scales, *amax;
  mxfp8_tensor *t;
} nv_tensor;

static inline mxfp8_status make_nv(nv_tensor *n, int read_only, uint32_t amax_major) {
  const int64_t dshape[2] = {40, 24}, sshape[2] = {128, 4};
  n->data = test_tensor_new(2, dshape, kDLUInt, 1);
  n->scales = test_tensor_new(2, sshape, kDLUInt, 1);
  const float amax = 5.0f;
  n->amax = test_float_tensor(1, &amax);
  uint64_t rng = 11;
  fill_random(n->data->buffer, n->data->bytes, &rng);
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 3; ++x) n->scales->buffer[y * 4 + x] = (uint8_t)(0x20 + rng_next(&rng) % 0x40);
  if (read_only) n->data->managed.flags |= DLPACK_FLAG_BITMASK_READ_ONLY;
  n->amax->managed.version.major = amax_major;
  mxfp8_tensor_desc d = NVFP4_TENSOR_DESC_INIT;
  d.rowwise_data = &n->data->managed;
  d.rowwise_scale_inv = &n->scales->managed;
  d.rowwise_amax = &n->amax->managed;
  n->t = NULL;
  return mxfp8_tensor_create(&d, &n->t);
}

static inline void free_nv(nv_tensor *n, int expected_deletes) {
  mxfp8_tensor_release(n->t);
  EXPECT(n->data->deleter_calls == expected_deletes && n->scales->deleter_calls == expected_deletes &&
             n->amax->deleter_calls == expected_deletes,
         "deleters ran %d %d %d times, expected %d", n->data->deleter_calls, n->scales->deleter_calls,
         n->amax->deleter_calls, expected_deletes);
  test_tensor_free(n->data);
  test_tensor_free(n->scales);
  test_tensor_free(n->amax);
}

#endif
