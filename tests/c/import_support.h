/* What the receiver's tests (test_transfer_buffers.c and test_transfer_nvfp4.c on the host,
 * test_gpu_import.c on the device) share: tensors described by a spec, their reference bytes built from
 * the layout's permute form (ref_swizzled_index), never by the library, and Transformer Engine storage
 * made from them. */
#ifndef MXFP8_IMPORT_SUPPORT_H_
#define MXFP8_IMPORT_SUPPORT_H_

#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* One tensor of a test: its shape, direction, how its scales sit in the source and what the
 * destination wants. */
typedef struct {
  int32_t ndim;
  int64_t shape[3];
  int32_t direction;
  int32_t source_layout; /* bucket: mxfp8_scale_layout; tensors: 0 padded row-major, 1 swizzled */
  int32_t target;        /* mxfp8_scale_layout of the destination */
} spec;

/* The reference of one tensor: its values, its compact scales S (R x C), and both target layouts. */
typedef struct {
  int64_t m, k, r, c, values_bytes;
  uint8_t *values, *compact;
  uint8_t *swizzled; /* S (rowwise) or S^T (columnwise) swizzled, padding zero */
  int64_t swizzled_bytes;
} reference;

static inline reference make_reference(const spec *s, uint64_t *rng) {
  reference ref;
  ref.m = 1;
  for (int32_t d = 0; d + 1 < s->ndim; ++d) ref.m *= s->shape[d];
  ref.k = s->shape[s->ndim - 1];
  const int col = s->direction == MXFP8_DIRECTION_COLUMNWISE;
  ref.r = col ? ref_ceil_div(ref.m, 32) : ref.m;
  ref.c = col ? ref.k : ref_ceil_div(ref.k, 32);
  ref.values_bytes = ref.m * ref.k;
  ref.values = malloc((size_t)ref.values_bytes + 1);
  fill_random(ref.values, (size_t)ref.values_bytes, rng);
  ref.compact = malloc((size_t)(ref.r * ref.c) + 1);
  fill_random_scales(ref.compact, (size_t)(ref.r * ref.c), rng);
  const int64_t sr = col ? ref.c : ref.r, sc = col ? ref.r : ref.c; /* the matrix that is swizzled */
  const int64_t rp = ref_round_up(sr, 128), cp = ref_round_up(sc, 4);
  ref.swizzled_bytes = (sr == 0 || sc == 0) ? 0 : rp * cp;
  ref.swizzled = calloc((size_t)ref.swizzled_bytes + 1, 1);
  for (int64_t y = 0; y < ref.r; ++y)
    for (int64_t x = 0; x < ref.c; ++x)
      ref.swizzled[col ? ref_swizzled_index(x, y, cp) : ref_swizzled_index(y, x, cp)] = ref.compact[y * ref.c + x];
  return ref;
}

static inline void free_reference(reference *ref) {
  free(ref->values);
  free(ref->compact);
  free(ref->swizzled);
}

/* A swizzled buffer of `ref` whose padding is poisoned (a producer's padding is never trusted). */
static inline void write_swizzled_poisoned(const reference *ref, int col, uint8_t *out) {
  const int64_t sr = col ? ref->c : ref->r, sc = col ? ref->r : ref->c;
  const int64_t cp = ref_round_up(sc, 4);
  memset(out, POISON, (size_t)ref->swizzled_bytes);
  for (int64_t y = 0; y < sr; ++y)
    for (int64_t x = 0; x < sc; ++x) {
      const size_t at = ref_swizzled_index(y, x, cp);
      out[at] = ref->swizzled[at];
    }
}

static inline int64_t target_bytes(const reference *ref, int32_t target) {
  return target == MXFP8_SCALE_LAYOUT_COMPACT ? ref->r * ref->c : ref->swizzled_bytes;
}

typedef struct {
  reference ref;
  test_tensor *data, *scales;
  mxfp8_tensor *handle;
} te_tensor;

/* TE's allocation: rowwise (roundup(M, 128), roundup(C, 4)), columnwise (roundup(R, 4), roundup(K, 128)). */
static inline te_tensor make_te(const spec *s, uint64_t *rng) {
  te_tensor t;
  t.ref = make_reference(s, rng);
  const int col = s->direction == MXFP8_DIRECTION_COLUMNWISE;
  t.data = test_tensor_new(s->ndim, s->shape, kDLUInt, 0);
  memcpy(t.data->buffer, t.ref.values, (size_t)t.ref.values_bytes);
  if (s->source_layout == 1) {
    const int64_t sshape[1] = {t.ref.swizzled_bytes};
    t.scales = test_tensor_new(1, sshape, kDLUInt, 0);
    write_swizzled_poisoned(&t.ref, col, t.scales->buffer);
  } else {
    const int64_t sshape[2] = {col ? ref_round_up(t.ref.r, 4) : ref_round_up(t.ref.r, 128),
                               col ? ref_round_up(t.ref.c, 128) : ref_round_up(t.ref.c, 4)};
    t.scales = test_tensor_new(2, sshape, kDLUInt, 0); /* poisoned */
    for (int64_t y = 0; y < t.ref.r; ++y)
      memcpy(t.scales->buffer + y * sshape[1], t.ref.compact + y * t.ref.c, (size_t)t.ref.c);
  }
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = s->source_layout == 1 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (col) {
    desc.columnwise_data = &t.data->managed;
    desc.columnwise_scale_inv = &t.scales->managed;
  } else {
    desc.rowwise_data = &t.data->managed;
    desc.rowwise_scale_inv = &t.scales->managed;
  }
  assert_int_equal(mxfp8_tensor_create(&desc, &t.handle), MXFP8_OK);
  return t;
}

static inline void free_te(te_tensor *t) {
  mxfp8_tensor_release(t->handle);
  test_tensor_free(t->data);
  test_tensor_free(t->scales);
  free_reference(&t->ref);
}

#endif
