/* References for the engine layouts (mxfp8_scale_layout), written from each consumer's documented behaviour
 * and never from the library's index functions:
 *   - DeepGEMM packed UE8M0, as DeepGEMM's own torch path builds it
 *     (get_mn_major_tma_aligned_packed_ue8m0_tensor_torch, csrc/jit_kernels/impls/smxx_layout.hpp):
 *     pad S (mn x sf_k) with zeros to (roundup(mn, 4), roundup(sf_k, 4)) bytes, read each row's bytes as
 *     little-endian int32 words, and store the int32 matrix MN-major (word (m, j) at j * mn_aligned + m);
 *   - the CUTLASS / cuBLAS 128x4 layout from its permute form (ref_swizzled_index), padding zero;
 *   - DeepGEMM's float32 scales on Hopper, as SGLang builds them ((u8.to(int32) << 23).view(float32),
 *     Fp8LinearMethod._process_mxfp8_linear_weight_scale): here from the value each byte stands for,
 *     2^(e - 127) computed with ldexpf (0.0 for byte 0, infinity for 255, as those bit patterns read),
 *     stored as a float32 in host order.
 * Shared by test_engine_layouts.c (host) and test_gpu_import.c (device). */
#ifndef MXFP8_ENGINE_LAYOUTS_SUPPORT_H_
#define MXFP8_ENGINE_LAYOUTS_SUPPORT_H_

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "import_support.h"
#include "test_support.h"

static inline int64_t ref_deepgemm_bytes(int64_t mn, int64_t sf_k) {
  return 4 * ref_ceil_div(sf_k, 4) * ref_round_up(mn, 4);
}

static inline int64_t ref_cutlass_bytes(int64_t rows, int64_t cols) {
  return (rows == 0 || cols == 0) ? 0 : ref_round_up(rows, 128) * ref_round_up(cols, 4);
}

/* S (mn x sf_k, row-major) written as DeepGEMM's packed int32 tensor, as bytes in memory. */
static inline void ref_deepgemm(const uint8_t *s, int64_t mn, int64_t sf_k, uint8_t *out) {
  const int64_t mn_aligned = ref_round_up(mn, 4), k_aligned = ref_round_up(sf_k, 4), packed = k_aligned / 4;
  uint8_t *padded = calloc((size_t)(mn_aligned * k_aligned) + 1, 1);
  for (int64_t m = 0; m < mn; ++m) memcpy(padded + m * k_aligned, s + m * sf_k, (size_t)sf_k);
  for (int64_t m = 0; m < mn_aligned; ++m)
    for (int64_t j = 0; j < packed; ++j) {
      const uint8_t *w = padded + m * k_aligned + 4 * j;
      const uint32_t word = (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
      uint8_t *dst = out + 4 * (j * mn_aligned + m); /* int32 element (m, j), strides (1, mn_aligned) */
      for (int b = 0; b < 4; ++b) dst[b] = (uint8_t)(word >> (8 * b)); /* little-endian in memory */
    }
  free(padded);
}

/* S (rows x cols) in the 128x4 layout; `transposed`: S^T is laid out (columnwise scales). */
static inline void ref_cutlass(const uint8_t *s, int64_t rows, int64_t cols, int transposed, uint8_t *out) {
  const int64_t sr = transposed ? cols : rows, sc = transposed ? rows : cols;
  memset(out, 0, (size_t)ref_cutlass_bytes(sr, sc));
  const int64_t cp = ref_round_up(sc, 4);
  for (int64_t y = 0; y < rows; ++y)
    for (int64_t x = 0; x < cols; ++x)
      out[transposed ? ref_swizzled_index(x, y, cp) : ref_swizzled_index(y, x, cp)] = s[y * cols + x];
}

/* S (rows x cols, row-major) as Hopper DeepGEMM's float32 [rows, cols]. */
static inline void ref_deepgemm_float32(const uint8_t *s, int64_t n, uint8_t *out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = s[i] == 0 ? 0.0f : s[i] == 255 ? INFINITY : ldexpf(1.0f, (int)s[i] - 127);
    memcpy(out + 4 * i, &v, 4);
  }
}

/* S with NeMo RL's fix-up (#3477): exponent byte 0 becomes 1. */
static inline uint8_t *ref_zero_as_one(const uint8_t *s, int64_t n) {
  uint8_t *out = malloc((size_t)n + 1);
  for (int64_t i = 0; i < n; ++i) out[i] = s[i] == 0 ? 1 : s[i];
  return out;
}

/* The bytes of S (rows x cols) in `layout` (compact, 128x4 or a DeepGEMM one), in a new buffer; *bytes
 * set. */
static inline uint8_t *ref_layout(const uint8_t *s, int64_t rows, int64_t cols, int32_t layout, int columnwise,
                                  int64_t *bytes) {
  uint8_t *out;
  if (layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32) {
    *bytes = 4 * rows * cols;
    out = malloc((size_t)*bytes + 1);
    ref_deepgemm_float32(s, rows * cols, out);
  } else if (layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED) {
    *bytes = ref_deepgemm_bytes(rows, cols);
    out = malloc((size_t)*bytes + 1);
    ref_deepgemm(s, rows, cols, out);
  } else if (layout == MXFP8_SCALE_LAYOUT_128X4) {
    *bytes = columnwise ? ref_cutlass_bytes(cols, rows) : ref_cutlass_bytes(rows, cols);
    out = malloc((size_t)*bytes + 1);
    ref_cutlass(s, rows, cols, columnwise, out);
  } else {
    *bytes = rows * cols;
    out = malloc((size_t)*bytes + 1);
    memcpy(out, s, (size_t)*bytes);
  }
  return out;
}

/* Sprinkles exponent-0 scales (all-zero blocks) over S, so the fix-up has bytes to rewrite. */
static inline void add_zero_scales(uint8_t *s, int64_t n, uint64_t *rng) {
  for (int64_t i = 0; i < n; ++i)
    if (rng_next(rng) % 5 == 0) s[i] = 0;
}

/* Sets about a fifth of a TE tensor's scales to exponent 0 (all-zero blocks), in its reference (compact
 * and swizzled) and in the storage make_te built, so the fix-up has bytes to rewrite. */
static inline void zero_some_scales(te_tensor *t, const spec *s, uint64_t *rng) {
  const int col = s->direction == MXFP8_DIRECTION_COLUMNWISE;
  reference *ref = &t->ref;
  const int64_t stride = col ? ref_round_up(ref->c, 128) : ref_round_up(ref->c, 4);
  for (int64_t y = 0; y < ref->r; ++y)
    for (int64_t x = 0; x < ref->c; ++x) {
      if (rng_next(rng) % 5 != 0) continue;
      ref->compact[y * ref->c + x] = 0;
      if (s->source_layout == 1) {
        const int64_t cp = ref_round_up(col ? ref->r : ref->c, 4);
        const size_t at = col ? ref_swizzled_index(x, y, cp) : ref_swizzled_index(y, x, cp);
        t->scales->buffer[at] = 0;
        ref->swizzled[at] = 0;
      } else {
        t->scales->buffer[y * stride + x] = 0;
      }
    }
}

/* n bytes of POISON and one more, to catch a write past the end. */
static inline uint8_t *poisoned(int64_t n) {
  uint8_t *p = malloc((size_t)n + 1);
  memset(p, POISON, (size_t)n + 1);
  return p;
}

/* Grouped experts stored as TE stores them (variant 0 compact, 1 padded row-major, 2 padded swizzled),
 * converted stacked in one call. */
static inline mxfp8_grouped_tensor *make_grouped(const uint8_t *values, const uint8_t *compact, int64_t experts, int64_t n,
                                          int64_t k, int variant, test_tensor **data, test_tensor **scales) {
  const int64_t c = ref_ceil_div(k, 32);
  const int64_t per = variant == 0 ? n * c : ref_round_up(n, 128) * ref_round_up(c, 4);
  const int64_t values_shape[2] = {experts * n, k}, scales_shape[1] = {experts * per};
  *data = test_tensor_new(2, values_shape, kDLUInt, 0);
  *scales = test_tensor_new(1, scales_shape, kDLUInt, 0); /* poisoned padding */
  memcpy((*data)->buffer, values, (size_t)(experts * n * k));
  for (int64_t e = 0; e < experts; ++e)
    for (int64_t y = 0; y < n; ++y)
      for (int64_t x = 0; x < c; ++x) {
        uint8_t *at = (*scales)->buffer + e * per;
        const uint8_t v = compact[(e * n + y) * c + x];
        if (variant == 0) at[y * c + x] = v;
        else if (variant == 1) at[y * ref_round_up(c, 4) + x] = v;
        else at[ref_swizzled_index(y, x, ref_round_up(c, 4))] = v;
      }
  mxfp8_grouped_desc d = MXFP8_GROUPED_DESC_INIT;
  d.scale_layout = variant == 2 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  d.scales = variant == 0 ? MXFP8_GROUPED_SCALES_COMPACT : MXFP8_GROUPED_SCALES_PADDED;
  d.num_experts = (int32_t)experts;
  d.cols = k;
  d.uniform_rows = n;
  d.data = &(*data)->managed;
  d.scale_inv = &(*scales)->managed;
  mxfp8_grouped_tensor *g = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
  return g;
}

#endif
