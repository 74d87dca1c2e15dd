/* NVFP4: describing, exporting, swizzling and dequantizing, against references written from the format's
 * rules (E2M1 table, E4M3 bits, even element in the low nibble, the 128x4 swizzle from its permute form,
 * TE's decode formula), never from the library. Every layout (compact, TE-padded with poisoned padding,
 * swizzled with poisoned padding), both directions (columnwise stored transposed), per-tensor and per-row
 * amax, both E4M3_MAX variants, partial blocks, rows not a multiple of 128, special scales and amaxes;
 * the DLPack version and read-only flag of its buffers, outputs over the tensor's own bytes, the fused
 * quantize of shards against the single one.
 * The GPU cases (same inputs on the device, bit for bit against the host) skip without a CUDA device. */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_fixtures.h"
#include "test_gpu_support.h"

/* E2M1 codes 0..7; bit 3 is the sign. */
static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

static float ref_e2m1(uint8_t code) { return (code & 8) ? -kE2m1[code & 7] : kE2m1[code & 7]; }

static uint32_t bits_of(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* TE's dequantize_fp4_kernel, in float and in its order: (scale * amax) * (1 / (6 * E4M3_MAX)), times
 * the value; NaN written canonically. */
static float ref_element(uint8_t code, uint8_t scale, float amax, int e4m3_max) {
  const float factor = 1.0f / (6.0f * (float)e4m3_max);
  const float s = (float)ref_decode_e4m3(scale) * amax;
  const float final_scale = s * factor;
  const float v = ref_e2m1(code) * final_scale;
  if (isnan(v)) {
    const uint32_t canonical = 0x7FFFFFFFu;
    float f;
    memcpy(&f, &canonical, sizeof f);
    return f;
  }
  return v;
}

static uint16_t ref_bf16(float f) {
  const uint32_t u = bits_of(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return 0x7FFF;
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

enum { COMPACT = 0, PADDED = 1, SWIZZLED = 2 };

typedef struct {
  int64_t M, K;      /* logical (M, K), 2-D unless lead3 */
  int direction;     /* stored matrix: rowwise (M, K), columnwise (K, M) */
  int layout;
  int per_row_amax;  /* rowwise only */
  int e4m3_max;
  int lead3;         /* rowwise data as (2, M/2, K/2): leading dims flatten into rows */
} nv_case;

typedef struct {
  nv_case c;
  int64_t R, C, SC;     /* stored rows, cols, scale cols */
  uint8_t *codes;       /* R x C codes, one per byte: the reference */
  uint8_t *scales;      /* R x SC compact: the reference */
  float amax[512];
  int64_t amax_count;
  test_tensor *data, *scale_buf, *amax_t;
  mxfp8_tensor *tensor;
} nv_fixture;

/* Scale bytes: mostly ordinary E4M3 values, plus zero, -0, subnormals (0x01..0x07), the largest (0x7E =
 * 448), NaN (0x7F, 0xFF) and negative ones. */
static uint8_t random_scale(uint64_t *rng) {
  static const uint8_t kSpecial[] = {0x00, 0x80, 0x01, 0x03, 0x07, 0x08, 0x7E, 0x7F, 0xFF, 0xB8, 0x77};
  const uint64_t r = rng_next(rng);
  if (r % 8 == 0) return kSpecial[(r >> 8) % sizeof kSpecial];
  return (uint8_t)(0x20 + (r >> 16) % 0x40);
}

static void build(nv_fixture *f, const nv_case *c, uint64_t seed) {
  memset(f, 0, sizeof *f);
  f->c = *c;
  uint64_t rng = seed;
  const int row = c->direction == MXFP8_DIRECTION_ROWWISE;
  f->R = row ? c->M : c->K;
  f->C = row ? c->K : c->M;
  f->SC = ref_ceil_div(f->C, 16);
  f->codes = malloc((size_t)(f->R * f->C + 1));
  f->scales = malloc((size_t)(f->R * f->SC + 1));
  for (int64_t i = 0; i < f->R * f->C; ++i) f->codes[i] = (uint8_t)(rng_next(&rng) % 16);
  /* Some all-zero blocks (codes 0 and 8, +-0). */
  for (int64_t r = 0; r < f->R; r += 3)
    for (int64_t k = 0; k < 16 && k < f->C; ++k) f->codes[r * f->C + k] = (uint8_t)((k & 1) * 8);
  for (int64_t i = 0; i < f->R * f->SC; ++i) f->scales[i] = random_scale(&rng);

  /* Values: two codes per byte, the even element in the low nibble. */
  int64_t dshape[3];
  int ndim = 2;
  if (row && c->lead3) {
    dshape[0] = 2; dshape[1] = c->M / 2; dshape[2] = c->K / 2; ndim = 3;
  } else {
    dshape[0] = f->R; dshape[1] = f->C / 2;
  }
  f->data = test_tensor_new(ndim, dshape, kDLUInt, 1);
  for (int64_t r = 0; r < f->R; ++r)
    for (int64_t i = 0; i < f->C / 2; ++i)
      f->data->buffer[r * (f->C / 2) + i] =
          (uint8_t)(f->codes[r * f->C + 2 * i] | (f->codes[r * f->C + 2 * i + 1] << 4));

  /* Scales, in the case's layout; padding keeps POISON. */
  const int64_t Rp = ref_round_up(f->R, 128), Cp = ref_round_up(f->SC, 4);
  if (c->layout == SWIZZLED) {
    const int64_t n = Rp * Cp;
    f->scale_buf = test_tensor_new(1, &n, kDLFloat8_e4m3fn, 1);
    for (int64_t r = 0; r < f->R; ++r)
      for (int64_t k = 0; k < f->SC; ++k) f->scale_buf->buffer[ref_swizzled_index(r, k, Cp)] = f->scales[r * f->SC + k];
  } else {
    const int64_t shape[2] = {c->layout == PADDED ? Rp : f->R, c->layout == PADDED ? Cp : f->SC};
    f->scale_buf = test_tensor_new(2, shape, kDLUInt, 1);
    for (int64_t r = 0; r < f->R; ++r)
      memcpy(f->scale_buf->buffer + r * shape[1], f->scales + r * f->SC, (size_t)f->SC);
  }

  /* amax: ordinary values, and per row also 0, Inf, NaN and tiny ones. */
  static const float kAmax[] = {3.5f, 0.0f, 2688.0f, 1e-30f, 65504.0f, 0.125f, 7.0e6f};
  f->amax_count = c->per_row_amax ? f->R : 1;
  for (int64_t i = 0; i < f->amax_count; ++i) f->amax[i] = kAmax[i % 7];
  if (c->per_row_amax && f->R > 9) {
    f->amax[8] = INFINITY;
    f->amax[9] = NAN;
  }
  f->amax_t = test_float_tensor(f->amax_count, f->amax);

  mxfp8_tensor_desc d = NVFP4_TENSOR_DESC_INIT;
  d.scale_layout = c->layout == SWIZZLED ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  d.e4m3_max = c->e4m3_max;
  const int64_t logical[2] = {c->M, c->K};
  d.ndim = 2;
  if (row && c->lead3) d.ndim = 0; /* the shape comes from the 3-D data */
  d.shape = logical;
  if (row) {
    d.rowwise_data = &f->data->managed;
    d.rowwise_scale_inv = &f->scale_buf->managed;
    d.rowwise_amax = &f->amax_t->managed;
  } else {
    d.columnwise_data = &f->data->managed;
    d.columnwise_scale_inv = &f->scale_buf->managed;
    d.columnwise_amax = &f->amax_t->managed;
  }
  const mxfp8_status st = mxfp8_tensor_create(&d, &f->tensor);
  EXPECT(st == MXFP8_OK, "create: %s", mxfp8_last_error());
}

static void teardown(nv_fixture *f) {
  mxfp8_tensor_release(f->tensor);
  /* Every input's deleter ran exactly once, when the last reference went. */
  EXPECT(f->data->deleter_calls == 1 && f->scale_buf->deleter_calls == 1 && f->amax_t->deleter_calls == 1,
         "deleters ran %d %d %d times", f->data->deleter_calls, f->scale_buf->deleter_calls, f->amax_t->deleter_calls);
  test_tensor_free(f->data);
  test_tensor_free(f->scale_buf);
  test_tensor_free(f->amax_t);
  free(f->codes);
  free(f->scales);
}

static float amax_of_row(const nv_fixture *f, int64_t r) { return f->amax[f->amax_count > 1 ? r : 0]; }

static void check_dequantized(const nv_fixture *f, const void *out, int bf16) {
  for (int64_t r = 0; r < f->R; ++r)
    for (int64_t k = 0; k < f->C; ++k) {
      const float want = ref_element(f->codes[r * f->C + k], f->scales[r * f->SC + k / 16], amax_of_row(f, r),
                                     f->c.e4m3_max);
      const int64_t i = r * f->C + k;
      if (bf16) {
        const uint16_t got = ((const uint16_t *)out)[i];
        EXPECT(got == ref_bf16(want), "(%lld, %lld): bf16 0x%04x, want 0x%04x", (long long)r, (long long)k, got,
               ref_bf16(want));
      } else {
        const uint32_t got = ((const uint32_t *)out)[i];
        EXPECT(got == bits_of(want), "(%lld, %lld): 0x%08x, want 0x%08x (code %u scale 0x%02x)", (long long)r,
               (long long)k, got, bits_of(want), f->codes[i], f->scales[r * f->SC + k / 16]);
      }
    }
}

static void dequantize_and_check(const nv_fixture *f, int bf16) {
  const int64_t n = f->R * f->C;
  uint8_t *out = malloc((size_t)(n * 4 + 4));
  memset(out, 0xA5, (size_t)(n * 4 + 4)); /* poisoned */
  int64_t shape[1] = {n};
  DLTensor o = {out, {kDLCPU, 0}, 1, {bf16 ? kDLBfloat : kDLFloat, bf16 ? 16 : 32, 1}, shape, NULL, 0};
  mxfp8_dequantize_options opts = MXFP8_DEQUANTIZE_OPTIONS_INIT;
  opts.direction = f->c.direction;
  const mxfp8_status st = mxfp8_dequantize(f->tensor, &opts, &o);
  EXPECT(st == MXFP8_OK, "dequantize: %s", mxfp8_last_error());
  check_dequantized(f, out, bf16);
  free(out);
}

/* Shapes: partial last blocks (K % 16 != 0), rows not a multiple of 128, one row, 3-D leading dims. */
static const nv_case kCases[] = {
    {1, 16, 0, COMPACT, 0, 448, 0},     {3, 40, 0, COMPACT, 1, 448, 0},  {130, 34, 0, PADDED, 0, 448, 0},
    {130, 34, 0, SWIZZLED, 1, 448, 0},  {200, 64, 0, PADDED, 1, 256, 0}, {200, 64, 0, SWIZZLED, 0, 256, 0},
    {64, 50, 0, SWIZZLED, 0, 448, 1},   {64, 50, 0, PADDED, 0, 448, 1},  {34, 130, 1, COMPACT, 0, 448, 0},
    {34, 130, 1, PADDED, 0, 448, 0},    {34, 130, 1, SWIZZLED, 0, 256, 0}, {258, 6, 1, SWIZZLED, 0, 448, 0},
    {48, 272, 1, PADDED, 0, 448, 0},
};
enum { NCASES = sizeof kCases / sizeof kCases[0] };

static void test_dequantize_matches_reference_every_layout(void **state) {
  (void)state;
  for (int i = 0; i < NCASES; ++i)
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      nv_fixture f;
      build(&f, &kCases[i], 1000 + (uint64_t)i);
      dequantize_and_check(&f, bf16);
      teardown(&f);
    }
}

static void release(DLManagedTensorVersioned *m) { release_managed(m); }

static void test_export_values_scales_and_views(void **state) {
  (void)state;
  for (int i = 0; i < NCASES; ++i) {
    nv_fixture f;
    build(&f, &kCases[i], 2000 + (uint64_t)i);
    for (int strided = 0; strided < 2; ++strided) {
      mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
      o.direction = f.c.direction;
      o.scales_dtype = strided ? MXFP8_SCALES_E8M0 : MXFP8_SCALES_UINT8;
      o.values_dtype = strided ? MXFP8_VALUES_FP8 : MXFP8_VALUES_UINT8;
      o.padded_scales = strided ? MXFP8_PADDED_SCALES_STRIDED_VIEW : MXFP8_PADDED_SCALES_COPY;
      DLManagedTensorVersioned *v = NULL, *s = NULL;
      EXPECT(nvfp4_export_components(f.tensor, &o, &v, &s, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
      /* values: a view of the very bytes, shape (*lead, K/2) / (K, M/2), or float4 (.., K) / (K, M). */
      const DLTensor *vt = &v->dl_tensor;
      EXPECT(vt->data == f.data->buffer && vt->byte_offset == 0, "values are not a view");
      EXPECT(!(v->flags & DLPACK_FLAG_BITMASK_IS_COPIED), "values flagged as a copy");
      EXPECT(strided ? (vt->dtype.code == kDLFloat4_e2m1fn && vt->dtype.bits == 4)
                     : (vt->dtype.code == kDLUInt && vt->dtype.bits == 8),
             "values dtype %d/%d", vt->dtype.code, vt->dtype.bits);
      const int64_t last = strided ? f.C : f.C / 2;
      EXPECT(vt->shape[vt->ndim - 1] == last, "values last dim %lld", (long long)vt->shape[vt->ndim - 1]);
      if (f.c.direction == MXFP8_DIRECTION_COLUMNWISE)
        EXPECT(vt->ndim == 2 && vt->shape[0] == f.c.K, "columnwise values are (K, .)");
      else
        EXPECT(vt->ndim == (f.c.lead3 ? 3 : 2), "rowwise values keep the leading dimensions");
      EXPECT(vt->strides && vt->strides[vt->ndim - 1] == 1 && vt->strides[vt->ndim - 2] == last, "values strides");
      /* scales: compact (*lead, ceil(K/16)) / (K, ceil(M/16)), each element the reference. */
      const DLTensor *st = &s->dl_tensor;
      EXPECT(st->shape[st->ndim - 1] == f.SC, "scales last dim %lld, want %lld", (long long)st->shape[st->ndim - 1],
             (long long)f.SC);
      EXPECT(st->dtype.code == (strided ? kDLFloat8_e4m3fn : kDLUInt), "scales dtype %d", st->dtype.code);
      for (int64_t j = 0; j < f.R * f.SC; ++j)
        EXPECT(read_through_strides(st, j) == f.scales[j], "scale %lld: 0x%02x, want 0x%02x", (long long)j,
               read_through_strides(st, j), f.scales[j]);
      const int copied = (s->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0;
      const int padding_columns = ref_round_up(f.SC, 4) != f.SC;
      const int expect_copy = f.c.layout == SWIZZLED || (f.c.layout == PADDED && padding_columns && !strided && f.R > 1);
      EXPECT(copied == expect_copy, "layout %d strided %d: copy %d", f.c.layout, strided, copied);
      if (!copied) EXPECT(st->data == f.scale_buf->buffer, "a scale view that does not view the buffer");
      release(v);
      release(s);
    }
    teardown(&f); /* views released first: the deleters ran once the last reference went */
  }
}

/* options.shard of an NVFP4 tensor (transfer.h, "NVFP4 entries ... take shards"): the shard of its stored
 * matrix, rowwise (rows, cols) of (M, K), columnwise the (cols, rows) transpose TE stores; values two a
 * byte (float4_e2m1fn elements or their uint8 bytes), E4M3 scales one per 16 along its rows, and the
 * global scale of a per-row amax the shard's rows, piece by piece. The references are cut from the
 * fixture's codes and scales by those rules, and the global scales from the whole tensor's export. */
typedef struct {
  int64_t pieces[4]; /* stored rows [pieces[2p], pieces[2p + 1]) */
  int npieces;
  int64_t c0, c1;    /* stored columns */
} stored_cut;

/* The byte holding element (i, 2 * jb) of a 2-D values output, through its strides (in elements). */
static uint8_t value_byte(const DLTensor *t, int64_t i, int64_t jb) {
  const int64_t per_byte = t->dtype.bits == 4 ? 2 : 1;
  const int64_t row_stride = t->strides ? t->strides[0] : t->shape[1];
  return ((const uint8_t *)t->data)[t->byte_offset + i * row_stride / per_byte + jb];
}

static void check_shard_outputs(const nv_fixture *f, const stored_cut *cut, const DLManagedTensorVersioned *v,
                                const DLManagedTensorVersioned *s, const DLManagedTensorVersioned *g,
                                const float *whole_global, const char *what) {
  const int64_t cols = cut->c1 - cut->c0, scale_cols = ref_ceil_div(cols, 16);
  int64_t rows = 0;
  for (int p = 0; p < cut->npieces; ++p) rows += cut->pieces[2 * p + 1] - cut->pieces[2 * p];
  const DLTensor *vt = &v->dl_tensor, *st = &s->dl_tensor, *gt = &g->dl_tensor;
  const int float4 = vt->dtype.code == kDLFloat4_e2m1fn;
  EXPECT(vt->ndim == 2 && vt->shape[0] == rows && vt->shape[1] == (float4 ? cols : cols / 2),
         "%s: values shape (%lld, %lld), want (%lld, %lld)", what, (long long)vt->shape[0], (long long)vt->shape[1],
         (long long)rows, (long long)(float4 ? cols : cols / 2));
  EXPECT(st->ndim == 2 && st->shape[0] == rows && st->shape[1] == scale_cols, "%s: scales shape (%lld, %lld)", what,
         (long long)st->shape[0], (long long)st->shape[1]);
  EXPECT(v->flags & DLPACK_FLAG_BITMASK_IS_COPIED ? cut->npieces > 1 : vt->data == f->data->buffer,
         "%s: one range of values is a view of the stored bytes, several a copy", what);
  int64_t i = 0;
  for (int p = 0; p < cut->npieces; ++p)
    for (int64_t r = cut->pieces[2 * p]; r < cut->pieces[2 * p + 1]; ++r, ++i) {
      for (int64_t jb = 0; jb < cols / 2; ++jb) {
        const int64_t c = cut->c0 + 2 * jb;
        const uint8_t want = (uint8_t)(f->codes[r * f->C + c] | (f->codes[r * f->C + c + 1] << 4));
        EXPECT(value_byte(vt, i, jb) == want, "%s: values byte (%lld, %lld) 0x%02x, want 0x%02x", what, (long long)i,
               (long long)jb, value_byte(vt, i, jb), want);
      }
      for (int64_t k = 0; k < scale_cols; ++k) {
        const uint8_t want = f->scales[r * f->SC + cut->c0 / 16 + k], got = read_through_strides(st, i * scale_cols + k);
        EXPECT(got == want, "%s: scale (%lld, %lld) 0x%02x, want 0x%02x", what, (long long)i, (long long)k, got, want);
      }
      if (f->amax_count > 1)
        EXPECT(bits_of(((const float *)gt->data)[i]) == bits_of(whole_global[r]), "%s: global scale of row %lld", what,
               (long long)r);
    }
  const int64_t globals = f->amax_count > 1 ? rows : 1;
  EXPECT(gt->ndim == 1 && gt->shape[0] == globals, "%s: %lld global scales, want %lld", what, (long long)gt->shape[0],
         (long long)globals);
  if (f->amax_count == 1)
    EXPECT(bits_of(*(const float *)gt->data) == bits_of(whole_global[0]), "%s: a per-tensor amax is the shard's", what);
}

static void test_export_shards(void **state) {
  (void)state;
  for (int i = 0; i < NCASES; ++i) {
    nv_fixture f;
    build(&f, &kCases[i], 4000 + (uint64_t)i);
    const int64_t M = f.c.M, K = f.c.K;
    mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
    o.direction = f.c.direction;
    DLManagedTensorVersioned *whole = NULL;
    EXPECT(mxfp8_export_global_scale(f.tensor, &o, &whole) == MXFP8_OK, "%s", mxfp8_last_error());
    mxfp8_shard sh[2] = {MXFP8_SHARD_INIT, MXFP8_SHARD_INIT};
    stored_cut cuts[2];
    int nshards = 1;
    if (f.c.direction == MXFP8_DIRECTION_ROWWISE) {
      /* One range (rows inside, K from a block boundary) and two row pieces out of order. */
      sh[0].row_begin = M > 2 ? 1 : 0;
      sh[0].row_end = M > 2 ? M - 1 : MXFP8_SHARD_END;
      sh[0].col_begin = K > 16 ? 16 : 0;
      cuts[0] = (stored_cut){{sh[0].row_begin, M > 2 ? M - 1 : M}, 1, sh[0].col_begin, K};
      if (M >= 2) {
        static int64_t pieces[4];
        pieces[0] = M - 1; pieces[1] = M; pieces[2] = 0; pieces[3] = 1;
        sh[1].num_row_pieces = 2;
        sh[1].row_pieces = pieces;
        sh[1].col_end = K > 16 ? 16 : MXFP8_SHARD_END;
        cuts[1] = (stored_cut){{M - 1, M, 0, 1}, 2, 0, K > 16 ? 16 : K};
        nshards = 2;
      }
    } else {
      /* Rows of M are stored columns (boundaries multiples of 16 or M); columns of K any. */
      sh[0].row_begin = M > 16 ? 16 : 0;
      sh[0].col_begin = K > 2 ? 1 : 0;
      sh[0].col_end = K > 2 ? K - 1 : MXFP8_SHARD_END;
      cuts[0] = (stored_cut){{sh[0].col_begin, K > 2 ? K - 1 : K}, 1, sh[0].row_begin, M};
    }
    for (int k = 0; k < nshards; ++k)
      for (int float4 = 0; float4 < 2; ++float4) {
        char what[96];
        snprintf(what, sizeof what, "case %d shard %d %s", i, k, float4 ? "float4" : "uint8");
        o.shard = &sh[k];
        o.values_dtype = float4 ? MXFP8_VALUES_FP8 : MXFP8_VALUES_UINT8;
        /* Byte copies over POISON (the test allocator makes 8-bit tensors): a byte not written shows. */
        o.allocator = float4 ? NULL : poisoned_allocator;
        DLManagedTensorVersioned *v = NULL, *s = NULL, *g = NULL;
        EXPECT(mxfp8_export_components(f.tensor, &o, &v, &s) == MXFP8_OK, "%s: %s", what, mxfp8_last_error());
        o.allocator = NULL;
        EXPECT(mxfp8_export_global_scale(f.tensor, &o, &g) == MXFP8_OK, "%s: %s", what, mxfp8_last_error());
        if (v && s && g) check_shard_outputs(&f, &cuts[k], v, s, g, (const float *)whole->dl_tensor.data, what);
        release(v);
        release(s);
        release(g);
      }
    if (f.c.direction == MXFP8_DIRECTION_COLUMNWISE && M >= 32) {
      /* Two ranges of M would be two column windows of the stored (K, M) matrix: refused, nothing written. */
      static const int64_t pieces[4] = {0, 16, 16, 32};
      mxfp8_shard two = MXFP8_SHARD_INIT;
      two.num_row_pieces = 2;
      two.row_pieces = pieces;
      o.shard = &two;
      DLManagedTensorVersioned *const untouched = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;
      DLManagedTensorVersioned *v = untouched, *g = untouched;
      EXPECT(mxfp8_export_components(f.tensor, &o, &v, NULL) == MXFP8_ERROR_UNSUPPORTED, "case %d: pieces", i);
      assert_last_error_contains("options.shard has 2 row pieces for a columnwise NVFP4 tensor");
      EXPECT(mxfp8_export_global_scale(f.tensor, &o, &g) == MXFP8_ERROR_UNSUPPORTED, "case %d: pieces", i);
      EXPECT(v == untouched && g == untouched, "case %d: an output was written", i);
    }
    release(whole);
    teardown(&f);
  }
}

/* The tensor outlives its handle while a view holds it. */
static void test_views_keep_the_tensor_alive(void **state) {
  (void)state;
  nv_fixture f;
  build(&f, &kCases[2], 7);
  DLManagedTensorVersioned *v = NULL;
  EXPECT(nvfp4_export_components(f.tensor, NULL, &v, NULL, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
  mxfp8_tensor_release(f.tensor);
  f.tensor = NULL;
  EXPECT(f.data->deleter_calls == 0, "deleter ran while a view lives");
  release(v);
  EXPECT(f.data->deleter_calls == 1, "deleter did not run after the last view");
  teardown(&f);
}

static float ref_encode(float amax, int e4m3_max) {
  if (amax == 0.0f) return 1.0f;
  const float s = ((float)e4m3_max * 6.0f) / amax;
  if (isnan(s) || s > FLT_MAX) return FLT_MAX;
  return s == 0.0f ? 1.0f : s;
}

static void test_global_scale_both_conventions(void **state) {
  (void)state;
  /* Explicit specials: amax 2688 decodes as 1 and encodes as 1; 0 decodes as 0 and encodes as 1 (TE);
   * Inf encodes as 1; NaN encodes as FLT_MAX; a tiny amax's quotient overflows to FLT_MAX. */
  const nv_case c = {12, 32, 0, PADDED, 1, 448, 0};
  nv_fixture f;
  build(&f, &c, 3);
  DLManagedTensorVersioned *const untouched = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;
  const float specials[12] = {2688.0f, 0.0f, INFINITY, NAN, 1e-38f, 448.0f, 6.0f, -0.0f, 1.0f, 3.0e38f, 12.5f, 1e-45f};
  memcpy(f.amax, specials, sizeof specials);
  memcpy(f.amax_t->buffer, specials, sizeof specials);
  for (int encode = 0; encode < 2; ++encode) {
    mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
    o.global_scale = encode ? MXFP8_NVFP4_GLOBAL_SCALE_ENCODE : MXFP8_NVFP4_GLOBAL_SCALE_DECODE;
    DLManagedTensorVersioned *g = untouched;
    EXPECT(mxfp8_export_global_scale(f.tensor, &o, &g) == MXFP8_OK, "%s", mxfp8_last_error());
    const DLTensor *t = &g->dl_tensor;
    EXPECT(t->dtype.code == kDLFloat && t->dtype.bits == 32 && t->ndim == 1 && t->shape[0] == 12, "global scale shape");
    EXPECT(g->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "global scale is a copy");
    const float *got = (const float *)t->data;
    for (int i = 0; i < 12; ++i) {
      const float want = encode ? ref_encode(specials[i], 448) : specials[i] / 2688.0f;
      EXPECT(bits_of(got[i]) == bits_of(want) || (isnan(got[i]) && isnan(want)), "%s of amax %g: %g, want %g",
             encode ? "encode" : "decode", (double)specials[i], (double)got[i], (double)want);
    }
    if (encode) {
      EXPECT(got[0] == 1.0f && got[1] == 1.0f && got[2] == 1.0f && got[3] == FLT_MAX && got[4] == FLT_MAX,
             "TE's edge cases");
    } else {
      EXPECT(got[0] == 1.0f && got[1] == 0.0f, "decode of 2688 and 0");
    }
    release(g);
  }
  teardown(&f);
  /* E4M3_MAX 256 (4over6 tensors): decode amax / 1536, encode 1536 / amax, per-tensor amax. */
  const nv_case c256 = {12, 32, 0, COMPACT, 0, 256, 0};
  build(&f, &c256, 4);
  const float amax = 3.0e3f;
  memcpy(f.amax_t->buffer, &amax, sizeof amax);
  for (int encode = 0; encode < 2; ++encode) {
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.global_scale = encode ? MXFP8_NVFP4_GLOBAL_SCALE_ENCODE : MXFP8_NVFP4_GLOBAL_SCALE_DECODE;
    DLManagedTensorVersioned *g = untouched;
    EXPECT(mxfp8_export_global_scale(f.tensor, &o, &g) == MXFP8_OK, "%s", mxfp8_last_error());
    const float want = encode ? 1536.0f / amax : amax / 1536.0f;
    const float got = *(const float *)g->dl_tensor.data;
    EXPECT(bits_of(got) == bits_of(want), "E4M3_MAX 256, %s: %.9g, want %.9g", encode ? "encode" : "decode",
           (double)got, (double)want);
    release(g);
  }
  teardown(&f);
}

/* One tensor for every format: with the defaults of mxfp8_export_options an NVFP4 tensor's values come as
 * the format's own type, float4_e2m1fn, (M, K) elements over the same bytes; its scales as uint8. */
static void test_default_options_export_float4_values(void **state) {
  (void)state;
  const nv_case c = {40, 48, 0, COMPACT, 0, 448, 0};
  nv_fixture f;
  build(&f, &c, 11);
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  EXPECT(mxfp8_export_components(f.tensor, NULL, &v, &s) == MXFP8_OK, "%s", mxfp8_last_error());
  const DLTensor *vt = &v->dl_tensor;
  EXPECT(vt->dtype.code == kDLFloat4_e2m1fn && vt->dtype.bits == 4 && vt->dtype.lanes == 1, "values dtype %d/%d",
         vt->dtype.code, vt->dtype.bits);
  EXPECT(vt->ndim == 2 && vt->shape[0] == 40 && vt->shape[1] == 48, "values shape (%lld, %lld)",
         (long long)vt->shape[0], (long long)vt->shape[1]);
  EXPECT(vt->data == f.data->buffer, "values are not a view");
  EXPECT(s->dl_tensor.dtype.code == kDLUInt && s->dl_tensor.dtype.bits == 8, "scales dtype %d", s->dl_tensor.dtype.code);
  for (int64_t j = 0; j < f.R * f.SC; ++j) EXPECT(read_through_strides(&s->dl_tensor, j) == f.scales[j], "scale %lld", (long long)j);
  release(v);
  release(s);
  teardown(&f);
}

/* A (4, 64) rowwise MXFP8 tensor over `data` and `scales`, from a desc whose struct_size is `size` and
 * whose NVFP4 fields hold `junk` values (not read when size ends before them). */
static mxfp8_status mxfp8_with(uint32_t size, int junk, test_tensor *data, test_tensor *scales, test_tensor *amax,
                               mxfp8_tensor **out) {
  mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
  d.struct_size = size;
  d.rowwise_data = &data->managed;
  d.rowwise_scale_inv = &scales->managed;
  if (junk) {
    d.rowwise_amax = &amax->managed;
    d.columnwise_amax = &amax->managed;
    d.e4m3_max = 7;
    d.reserved2 = 9;
  }
  return mxfp8_tensor_create(&d, out);
}

/* The STABLE desc grew by appending: a caller built before the NVFP4 fields (struct_size ending at
 * `reserved`, or at `block` before that) still creates the MXFP8 tensor it did, whatever lies past its
 * struct; the same bytes read as part of a full-size desc are refused. */
static void test_old_size_desc_creates_mxfp8_as_before(void **state) {
  (void)state;
  uint64_t rng = 5;
  const int64_t ds[2] = {4, 64}, ss[2] = {4, 2};
  const float one = 1.0f;
  test_tensor *data = test_tensor_new(2, ds, kDLUInt, 0), *scales = test_tensor_new(2, ss, kDLUInt, 0);
  test_tensor *amax = test_float_tensor(1, &one);
  fill_random(data->buffer, data->bytes, &rng);
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  const uint32_t sizes[3] = {(uint32_t)offsetof(mxfp8_tensor_desc, rowwise_amax),
                             (uint32_t)offsetof(mxfp8_tensor_desc, reserved), (uint32_t)sizeof(mxfp8_tensor_desc)};
  EXPECT(sizes[0] == 64 && sizes[2] == 88, "the desc is %u bytes, its 0.1 prefix %u", sizes[2], sizes[0]);
  for (int i = 0; i < 3; ++i) {
    mxfp8_tensor *t = NULL;
    const mxfp8_status st = mxfp8_with(sizes[i], 1, data, scales, amax, &t);
    if (i == 2) {
      EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && t == NULL, "a full-size MXFP8 desc with NVFP4 fields set: %d", st);
      continue;
    }
    EXPECT(st == MXFP8_OK, "struct_size %u: %s", sizes[i], mxfp8_last_error());
    DLManagedTensorVersioned *v = NULL, *s = NULL;
    EXPECT(mxfp8_export_components(t, NULL, &v, &s) == MXFP8_OK, "%s", mxfp8_last_error());
    EXPECT(v->dl_tensor.dtype.code == kDLFloat8_e4m3fn && v->dl_tensor.data == data->buffer, "values as before");
    EXPECT(s->dl_tensor.ndim == 2 && s->dl_tensor.shape[1] == 2, "scales shape as before");
    for (int64_t j = 0; j < 8; ++j) EXPECT(read_through_strides(&s->dl_tensor, j) == scales->buffer[j], "scale %lld", (long long)j);
    DLManagedTensorVersioned *g = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;
    EXPECT(mxfp8_export_global_scale(t, NULL, &g) == MXFP8_ERROR_INVALID_ARGUMENT, "an MXFP8 global scale");
    assert_last_error_contains("it has no second-level scale");
    EXPECT(g == (DLManagedTensorVersioned *)(uintptr_t)0xBAD, "global_scale written on failure");
    float out[256];
    int64_t n = 256;
    DLTensor o = {out, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, &n, NULL, 0};
    EXPECT(mxfp8_dequantize(t, NULL, &o) == MXFP8_OK, "%s", mxfp8_last_error());
    for (int64_t j = 0; j < 256; ++j) {
      const double want = ref_decode_e4m3(data->buffer[j]) * ref_decode_e8m0(scales->buffer[(j / 64) * 2 + (j % 64) / 32]);
      EXPECT(bits_of(out[j]) == bits_of((float)want) || (isnan(out[j]) && isnan(want)), "element %lld", (long long)j);
    }
    release(v);
    release(s);
    mxfp8_tensor_release(t);
  }
  test_tensor_free(data);
  test_tensor_free(scales);
  test_tensor_free(amax);
}

/* The 128x4 swizzle of a 16-value-block E4M3 scale matrix (R, ceil(C/16)), both ways, with the byte-moving
 * low-level calls and float8_e4m3fn dtypes. */
static void test_swizzle_both_ways_for_16_value_blocks(void **state) {
  (void)state;
  const int64_t shapes[][2] = {{130, 3}, {1, 1}, {256, 8}, {77, 9}};
  for (int i = 0; i < 4; ++i) {
    const int64_t R = shapes[i][0], SC = shapes[i][1], Rp = ref_round_up(R, 128), Cp = ref_round_up(SC, 4);
    uint64_t rng = 77 + (uint64_t)i;
    test_tensor *compact = test_tensor_new(2, shapes[i], kDLFloat8_e4m3fn, 0);
    for (int64_t j = 0; j < R * SC; ++j) compact->buffer[j] = random_scale(&rng);
    const int64_t n = Rp * Cp;
    test_tensor *swz = test_tensor_new(1, &n, kDLFloat8_e4m3fn, 0); /* poisoned */
    EXPECT(mxfp8_swizzle_scales(&compact->managed.dl_tensor, &swz->managed.dl_tensor, NULL) == MXFP8_OK, "%s",
           mxfp8_last_error());
    for (int64_t r = 0; r < Rp; ++r)
      for (int64_t k = 0; k < Cp; ++k) {
        const uint8_t want = (r < R && k < SC) ? compact->buffer[r * SC + k] : 0;
        EXPECT(swz->buffer[ref_swizzled_index(r, k, Cp)] == want, "swizzled (%lld, %lld)", (long long)r, (long long)k);
      }
    test_tensor *back = test_tensor_new(2, shapes[i], kDLUInt, 0);
    EXPECT(mxfp8_unswizzle_scales(&swz->managed.dl_tensor, &back->managed.dl_tensor, NULL) == MXFP8_OK, "%s",
           mxfp8_last_error());
    EXPECT(memcmp(back->buffer, compact->buffer, (size_t)(R * SC)) == 0, "unswizzle does not give the matrix back");
    test_tensor_free(compact);
    test_tensor_free(swz);
    test_tensor_free(back);
  }
}

/* A swizzled NVFP4 tensor exports the same compact scales and decodes to the same bits as the padded one. */
static void test_swizzled_and_padded_agree(void **state) {
  (void)state;
  nv_case a = {130, 34, 0, PADDED, 1, 448, 0}, b = a;
  b.layout = SWIZZLED;
  nv_fixture fa, fb;
  build(&fa, &a, 5);
  build(&fb, &b, 5);
  const int64_t n = fa.R * fa.C;
  float *oa = malloc((size_t)n * 4), *ob = malloc((size_t)n * 4);
  int64_t shape[1] = {n};
  DLTensor ta = {oa, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0}, tb = ta;
  tb.data = ob;
  EXPECT(mxfp8_dequantize(fa.tensor, NULL, &ta) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(mxfp8_dequantize(fb.tensor, NULL, &tb) == MXFP8_OK, "%s", mxfp8_last_error());
  EXPECT(memcmp(oa, ob, (size_t)n * 4) == 0, "swizzled and padded decode differently");
  free(oa);
  free(ob);
  teardown(&fa);
  teardown(&fb);
}

/* Both directions in one tensor, as TE stores a (2, 64, 48) weight: rowwise (2, 64, 24) bytes and columnwise
 * (48, 2, 32) bytes (NVFP4TensorStorage keeps (K, *lead) with the last dimension halved), the logical shape
 * read back from the data; each direction decodes its own stored matrix. */
static void test_both_directions_in_te_shapes(void **state) {
  (void)state;
  uint64_t rng = 41;
  const int64_t M = 128, K = 48;
  uint8_t *row_codes = malloc((size_t)(M * K)), *col_codes = malloc((size_t)(K * M));
  for (int64_t i = 0; i < M * K; ++i) row_codes[i] = (uint8_t)(rng_next(&rng) % 16);
  for (int64_t i = 0; i < K * M; ++i) col_codes[i] = (uint8_t)(rng_next(&rng) % 16);
  const int64_t rshape[3] = {2, 64, 24}, cshape[3] = {48, 2, 32}, rs[2] = {128, 4}, cs[2] = {128, 8};
  test_tensor *rd = test_tensor_new(3, rshape, kDLUInt, 1), *cd = test_tensor_new(3, cshape, kDLUInt, 1);
  test_tensor *rsc = test_tensor_new(2, rs, kDLUInt, 1), *csc = test_tensor_new(2, cs, kDLUInt, 1);
  for (int64_t i = 0; i < M * K / 2; ++i) {
    rd->buffer[i] = (uint8_t)(row_codes[2 * i] | (row_codes[2 * i + 1] << 4));
    cd->buffer[i] = (uint8_t)(col_codes[2 * i] | (col_codes[2 * i + 1] << 4));
  }
  for (int64_t r = 0; r < M; ++r)
    for (int64_t c = 0; c < 3; ++c) rsc->buffer[r * 4 + c] = random_scale(&rng);
  for (int64_t r = 0; r < K; ++r)
    for (int64_t c = 0; c < 8; ++c) csc->buffer[r * 8 + c] = random_scale(&rng);
  const float ra = 5.0f, ca = 9.0f;
  test_tensor *ram = test_float_tensor(1, &ra), *cam = test_float_tensor(1, &ca);
  mxfp8_tensor_desc d = NVFP4_TENSOR_DESC_INIT;
  d.rowwise_data = &rd->managed; d.rowwise_scale_inv = &rsc->managed; d.rowwise_amax = &ram->managed;
  d.columnwise_data = &cd->managed; d.columnwise_scale_inv = &csc->managed; d.columnwise_amax = &cam->managed;
  for (int columnwise_only = 0; columnwise_only < 2; ++columnwise_only) {
    mxfp8_tensor_desc dd = d;
    if (columnwise_only) dd.rowwise_data = dd.rowwise_scale_inv = dd.rowwise_amax = NULL;
    mxfp8_tensor *t = NULL;
    EXPECT(mxfp8_tensor_create(&dd, &t) == MXFP8_OK, "%s", mxfp8_last_error());
    for (int dir = columnwise_only; dir < 2; ++dir) {
      const int64_t R = dir ? K : M, C = dir ? M : K;
      const uint8_t *codes = dir ? col_codes : row_codes, *scales = dir ? csc->buffer : rsc->buffer;
      const int64_t ld = dir ? 8 : 4;
      float *out = malloc((size_t)(R * C) * 4);
      int64_t shape[2] = {R, C};
      DLTensor o = {out, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
      mxfp8_dequantize_options opts = MXFP8_DEQUANTIZE_OPTIONS_INIT;
      opts.direction = dir;
      EXPECT(mxfp8_dequantize(t, &opts, &o) == MXFP8_OK, "%s", mxfp8_last_error());
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
          const float want = ref_element(codes[r * C + c], scales[r * ld + c / 16], dir ? ca : ra, 448);
          EXPECT(bits_of(out[r * C + c]) == bits_of(want), "direction %d (%lld, %lld)", dir, (long long)r, (long long)c);
        }
      free(out);
      mxfp8_export_options eo = NVFP4_EXPORT_OPTIONS_INIT;
      eo.direction = dir;
      DLManagedTensorVersioned *v = NULL, *s = NULL;
      EXPECT(nvfp4_export_components(t, &eo, &v, &s, NULL) == MXFP8_OK, "%s", mxfp8_last_error());
      /* rowwise keeps (2, 64, .); columnwise is the 2-D stored matrix (K, .) */
      EXPECT(v->dl_tensor.ndim == (dir ? 2 : 3) && v->dl_tensor.shape[v->dl_tensor.ndim - 1] == C / 2, "values shape");
      EXPECT(s->dl_tensor.shape[s->dl_tensor.ndim - 1] == (dir ? 8 : 3), "scales shape");
      release_managed(v);
      release_managed(s);
    }
    mxfp8_tensor_release(t);
  }
  test_tensor *all[6] = {rd, cd, rsc, csc, ram, cam};
  for (int i = 0; i < 6; ++i) {
    /* the columnwise inputs were described twice (both tensors), the rowwise ones once */
    EXPECT(all[i]->deleter_calls == (i % 2 == 1 ? 2 : 1), "input %d: deleter ran %d times", i, all[i]->deleter_calls);
    test_tensor_free(all[i]);
  }
  free(row_codes);
  free(col_codes);
}

#ifdef MXFP8_TEST_WITH_CUDA
/* A host test tensor's bytes on the device, same shape, borrowed (the test frees it). */
static DLManagedTensorVersioned on_device(const test_tensor *t, void **alloc) {
  CUDA_OK(cudaMalloc(alloc, t->bytes + 1));
  CUDA_OK(cudaMemcpy(*alloc, t->buffer, t->bytes, cudaMemcpyHostToDevice));
  DLManagedTensorVersioned m = t->managed;
  m.deleter = NULL;
  m.dl_tensor.data = *alloc;
  m.dl_tensor.device.device_type = kDLCUDA;
  m.dl_tensor.device.device_id = 0;
  return m;
}
#endif

/* Every case on the GPU: dequantize (float32 and bfloat16), the compact scales and both global scales,
 * bit for bit against the host results. */
static void test_gpu_matches_host(void **state) {
  (void)state;
  REQUIRE_GPU();
#ifdef MXFP8_TEST_WITH_CUDA
  for (int i = 0; i < NCASES; ++i) {
    nv_fixture f;
    build(&f, &kCases[i], 3000 + (uint64_t)i);
    void *allocs[3];
    DLManagedTensorVersioned dd = on_device(f.data, &allocs[0]), ds = on_device(f.scale_buf, &allocs[1]),
                             da = on_device(f.amax_t, &allocs[2]);
    mxfp8_tensor_desc d = NVFP4_TENSOR_DESC_INIT;
    d.scale_layout = f.c.layout == SWIZZLED ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    d.e4m3_max = f.c.e4m3_max;
    const int64_t logical[2] = {f.c.M, f.c.K};
    d.ndim = 2;
    d.shape = logical;
    const int row = f.c.direction == MXFP8_DIRECTION_ROWWISE;
    *(row ? &d.rowwise_data : &d.columnwise_data) = &dd;
    *(row ? &d.rowwise_scale_inv : &d.columnwise_scale_inv) = &ds;
    *(row ? &d.rowwise_amax : &d.columnwise_amax) = &da;
    mxfp8_tensor *gt = NULL;
    EXPECT(mxfp8_tensor_create(&d, &gt) == MXFP8_OK, "%s", mxfp8_last_error());
    const int64_t n = f.R * f.C;
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      void *dev_out;
      CUDA_OK(cudaMalloc(&dev_out, (size_t)n * 4 + 4));
      CUDA_OK(cudaMemset(dev_out, 0xA5, (size_t)n * 4 + 4));
      int64_t shape[1] = {n};
      DLTensor o = {dev_out, {kDLCUDA, 0}, 1, {bf16 ? kDLBfloat : kDLFloat, bf16 ? 16 : 32, 1}, shape, NULL, 0};
      mxfp8_dequantize_options opts = MXFP8_DEQUANTIZE_OPTIONS_INIT;
      opts.direction = f.c.direction;
      EXPECT(mxfp8_dequantize(gt, &opts, &o) == MXFP8_OK, "%s", mxfp8_last_error());
      uint8_t *host = malloc((size_t)n * 4 + 4);
      CUDA_OK(cudaMemcpy(host, dev_out, (size_t)n * 4 + 4, cudaMemcpyDeviceToHost));
      check_dequantized(&f, host, bf16);
      free(host);
      cudaFree(dev_out);
    }
    for (int encode = 0; encode < 2; ++encode) {
      mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
      o.direction = f.c.direction;
      o.global_scale = encode;
      DLManagedTensorVersioned *s = NULL, *g = NULL, *gh = NULL;
      EXPECT(nvfp4_export_components(gt, &o, NULL, &s, &g) == MXFP8_OK, "%s", mxfp8_last_error());
      EXPECT(nvfp4_export_components(f.tensor, &o, NULL, NULL, &gh) == MXFP8_OK, "%s", mxfp8_last_error());
      CUDA_OK(cudaDeviceSynchronize());
      const DLTensor *st = &s->dl_tensor;
      uint8_t *scales = malloc((size_t)(f.R * f.SC + 1));
      if (s->flags & DLPACK_FLAG_BITMASK_IS_COPIED) {
        CUDA_OK(cudaMemcpy(scales, (uint8_t *)st->data + st->byte_offset, (size_t)(f.R * f.SC), cudaMemcpyDeviceToHost));
        EXPECT(memcmp(scales, f.scales, (size_t)(f.R * f.SC)) == 0, "device scales copy differs");
      }
      float *gs = malloc((size_t)f.amax_count * 4);
      CUDA_OK(cudaMemcpy(gs, g->dl_tensor.data, (size_t)f.amax_count * 4, cudaMemcpyDeviceToHost));
      EXPECT(memcmp(gs, gh->dl_tensor.data, (size_t)f.amax_count * 4) == 0, "device global scales differ from host");
      free(scales);
      free(gs);
      release(s);
      release(g);
      release(gh);
    }
    if (row && f.c.M >= 2) {
      /* A shard of two row pieces: values, scales and (per-row amax) global scales are copies made by the
       * device's jobs, each equal to the host's byte for byte. */
      const int64_t pieces[4] = {f.c.M - 1, f.c.M, 0, 1};
      mxfp8_shard sh = MXFP8_SHARD_INIT;
      sh.num_row_pieces = 2;
      sh.row_pieces = pieces;
      mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
      o.shard = &sh;
      DLManagedTensorVersioned *out[2][3] = {{NULL, NULL, NULL}, {NULL, NULL, NULL}};
      EXPECT(nvfp4_export_components(gt, &o, &out[0][0], &out[0][1], &out[0][2]) == MXFP8_OK, "%s", mxfp8_last_error());
      EXPECT(nvfp4_export_components(f.tensor, &o, &out[1][0], &out[1][1], &out[1][2]) == MXFP8_OK, "%s",
             mxfp8_last_error());
      CUDA_OK(cudaDeviceSynchronize());
      const int64_t bytes[3] = {2 * (f.C / 2), 2 * f.SC, 4 * (f.amax_count > 1 ? 2 : 1)};
      for (int k = 0; k < 3; ++k) {
        const DLTensor *dev = &out[0][k]->dl_tensor, *host = &out[1][k]->dl_tensor;
        EXPECT(out[0][k]->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "shard output %d is a copy", k);
        uint8_t *back = malloc((size_t)bytes[k]);
        CUDA_OK(cudaMemcpy(back, (uint8_t *)dev->data + dev->byte_offset, (size_t)bytes[k], cudaMemcpyDeviceToHost));
        EXPECT(memcmp(back, (uint8_t *)host->data + host->byte_offset, (size_t)bytes[k]) == 0,
               "case %d: the device's shard output %d differs from the host's", i, k);
        free(back);
        release(out[0][k]);
        release(out[1][k]);
      }
    }
    mxfp8_tensor_release(gt);
    for (int k = 0; k < 3; ++k) cudaFree(allocs[k]);
    teardown(&f);
  }
#endif
}

/* The global scales of a shard of 1100 one-row pieces (rows repeat): 1100 jobs, which the device computes
 * in two launches (its batches hold 1000) and the host in one loop; each value is the formula's of its
 * row's amax, bit for bit, on both. */
static void test_global_scales_of_many_pieces(void **state) {
  (void)state;
  const nv_case c = {200, 64, 0, PADDED, 1, 256, 0};
  nv_fixture f;
  build(&f, &c, 77);
  enum { PIECES = 1100 };
  int64_t *pieces = malloc(sizeof(int64_t) * 2 * PIECES);
  for (int p = 0; p < PIECES; ++p) {
    pieces[2 * p] = (37 * p + 11) % c.M;
    pieces[2 * p + 1] = pieces[2 * p] + 1;
  }
  mxfp8_shard sh = MXFP8_SHARD_INIT;
  sh.num_row_pieces = PIECES;
  sh.row_pieces = pieces;
  mxfp8_tensor *gt = NULL;
#ifdef MXFP8_TEST_WITH_CUDA
  void *allocs[3] = {NULL, NULL, NULL};
  DLManagedTensorVersioned dd, ds, da;
  if (cuda_device_available()) {
    dd = on_device(f.data, &allocs[0]), ds = on_device(f.scale_buf, &allocs[1]), da = on_device(f.amax_t, &allocs[2]);
    mxfp8_tensor_desc d = NVFP4_TENSOR_DESC_INIT;
    d.scale_layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    d.e4m3_max = c.e4m3_max;
    const int64_t logical[2] = {c.M, c.K};
    d.ndim = 2;
    d.shape = logical;
    d.rowwise_data = &dd, d.rowwise_scale_inv = &ds, d.rowwise_amax = &da;
    EXPECT(mxfp8_tensor_create(&d, &gt) == MXFP8_OK, "%s", mxfp8_last_error());
  }
#endif
  for (int on_gpu = 0; on_gpu < 1 + (gt != NULL); ++on_gpu)
    for (int encode = 0; encode < 2; ++encode) {
      mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
      o.shard = &sh;
      o.global_scale = encode ? MXFP8_NVFP4_GLOBAL_SCALE_ENCODE : MXFP8_NVFP4_GLOBAL_SCALE_DECODE;
      DLManagedTensorVersioned *g = NULL;
      EXPECT(mxfp8_export_global_scale(on_gpu ? gt : f.tensor, &o, &g) == MXFP8_OK, "%s", mxfp8_last_error());
      EXPECT(g->dl_tensor.ndim == 1 && g->dl_tensor.shape[0] == PIECES, "one global scale a piece's row");
      float got[PIECES];
#ifdef MXFP8_TEST_WITH_CUDA
      if (on_gpu) CUDA_OK(cudaMemcpy(got, g->dl_tensor.data, sizeof got, cudaMemcpyDeviceToHost));
#endif
      if (!on_gpu) memcpy(got, g->dl_tensor.data, sizeof got);
      for (int p = 0; p < PIECES; ++p) {
        const float amax = f.amax[pieces[2 * p]];
        const float want = encode ? ref_encode(amax, c.e4m3_max) : amax / (6.0f * (float)c.e4m3_max);
        EXPECT(bits_of(got[p]) == bits_of(want) || (isnan(got[p]) && isnan(want)),
               "%s, %s, piece %d (row %lld): %.9g, want %.9g", on_gpu ? "device" : "host", encode ? "encode" : "decode",
               p, (long long)pieces[2 * p], (double)got[p], (double)want);
      }
      release(g);
    }
  mxfp8_tensor_release(gt);
#ifdef MXFP8_TEST_WITH_CUDA
  for (int k = 0; k < 3; ++k) cudaFree(allocs[k]);
#endif
  free(pieces);
  teardown(&f);
}

/* The DLPack version is checked before anything else, and on failure nothing is taken: "A
 * DLManagedTensorVersioned whose version.major is not this header's DLPACK_MAJOR_VERSION is refused";
 * read-only data gives a read-only values view. */
static void test_nvfp4_versions_and_read_only(void **state) {
  (void)state;
  nv_tensor n;
  const uint32_t majors[] = {0, DLPACK_MAJOR_VERSION + 1, 0xFFFFFFFFu};
  for (size_t i = 0; i < sizeof majors / sizeof majors[0]; ++i) {
    EXPECT(make_nv(&n, 0, majors[i]) != MXFP8_OK, "an amax of DLPack major %u was accepted", majors[i]);
    EXPECT(n.t == NULL, "*out written on failure");
    free_nv(&n, 0);
  }
  assert_int_equal(make_nv(&n, 1, DLPACK_MAJOR_VERSION), MXFP8_OK);
  DLManagedTensorVersioned *v = NULL;
  assert_int_equal(nvfp4_export_components(n.t, NULL, &v, NULL, NULL), MXFP8_OK);
  EXPECT(v->flags & DLPACK_FLAG_BITMASK_READ_ONLY, "a view of read-only data is not flagged read-only");
  release_managed(v);
  free_nv(&n, 1);
}

/* mxfp8_dequantize: the output shares no byte with the tensor's buffers (the amax included), and a
 * refused call writes nothing. */
static void test_nvfp4_dequantize_output_over_the_tensor(void **state) {
  (void)state;
  nv_tensor n;
  assert_int_equal(make_nv(&n, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  int64_t shape[1] = {40 * 48};
  DLTensor out = {n.amax->buffer, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  const uint8_t before[4] = {n.amax->buffer[0], n.amax->buffer[1], n.amax->buffer[2], n.amax->buffer[3]};
  /* An output over the scales (a float32 view of their 512 bytes, then of the right element count, which
   * overlaps them too), then over the amax. */
  out.data = n.scales->buffer;
  shape[0] = 128;
  uint8_t scales_before[512];
  memcpy(scales_before, n.scales->buffer, 512);
  mxfp8_status st = mxfp8_dequantize(n.t, NULL, &out);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "an output over the scales: status %d", st);
  shape[0] = 40 * 48;
  st = mxfp8_dequantize(n.t, NULL, &out); /* the right size now; still over the scales */
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "an output over the scales: status %d (%s)", st, mxfp8_last_error());
  EXPECT(memcmp(scales_before, n.scales->buffer, 512) == 0, "the scales were written");
  out.data = n.amax->buffer;
  st = mxfp8_dequantize(n.t, NULL, &out);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "an output over the amax: status %d (%s)", st, mxfp8_last_error());
  EXPECT(memcmp(before, n.amax->buffer, 4) == 0, "the amax was written");
  free_nv(&n, 1);
}

/* mxfp8_nvfp4_quantize_into: with MXFP8_NVFP4_AMAX_GIVEN the amax "is not checked or written"; a fused
 * call (count 3) writes each shard "byte for byte as a count-1 call writes it with that amax given", and
 * its computed amax is the largest of the shards'. */
static void test_nvfp4_fused_matches_single_with_the_shared_amax(void **state) {
  (void)state;
  enum { K = 48 };
  const int64_t rows[3] = {10, 33, 2};
  float *in[3];
  uint64_t rng = 12;
  for (int i = 0; i < 3; ++i) {
    in[i] = malloc((size_t)(rows[i] * K) * sizeof(float));
    fill_quantize_input(in[i], 2, (size_t)(rows[i] * K), &rng);
  }
  int64_t ishape[3][2], vshape[3][1], sshape[3][1];
  DLTensor inputs[3], values[3], scales[3], single_v[3], single_s[3];
  uint8_t *vb[3], *sb[3], *svb[3], *ssb[3];
  for (int i = 0; i < 3; ++i) {
    ishape[i][0] = rows[i], ishape[i][1] = K;
    vshape[i][0] = rows[i] * K / 2;
    sshape[i][0] = rows[i] * 3;
    inputs[i] = (DLTensor){in[i], {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ishape[i], NULL, 0};
    vb[i] = malloc((size_t)vshape[i][0]), sb[i] = malloc((size_t)sshape[i][0]);
    svb[i] = malloc((size_t)vshape[i][0]), ssb[i] = malloc((size_t)sshape[i][0]);
    memset(vb[i], POISON, (size_t)vshape[i][0]);
    memset(svb[i], 0x11, (size_t)vshape[i][0]);
    values[i] = host_bytes(vb[i], 1, vshape[i]);
    scales[i] = host_bytes(sb[i], 1, sshape[i]);
    single_v[i] = host_bytes(svb[i], 1, vshape[i]);
    single_s[i] = host_bytes(ssb[i], 1, sshape[i]);
  }
  const DLTensor *ins[3] = {&inputs[0], &inputs[1], &inputs[2]};
  DLTensor *vs[3] = {&values[0], &values[1], &values[2]}, *ss[3] = {&scales[0], &scales[1], &scales[2]};
  float shared = -1.0f;
  int64_t one[1] = {1};
  DLTensor amax = {&shared, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 3, NULL, vs, ss, &amax), MXFP8_OK);
  /* Each shard alone computes its own amax; the shared one is the largest. */
  float largest = 0.0f;
  for (int i = 0; i < 3; ++i) {
    float own = -1.0f;
    DLTensor own_amax = {&own, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
    assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&inputs[i]}, 1, NULL, (DLTensor *[]){&single_v[i]}, (DLTensor *[]){&single_s[i]}, &own_amax), MXFP8_OK);
    if (own > largest) largest = own;
  }
  EXPECT(shared == largest, "shared amax %.9g, largest shard amax %.9g", (double)shared, (double)largest);
  /* With the shared amax given, each shard alone is the fused result; the given amax is left as it is. */
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.amax_mode = MXFP8_NVFP4_AMAX_GIVEN;
  for (int i = 0; i < 3; ++i) {
    float given = shared;
    DLTensor given_amax = {&given, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
    assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&inputs[i]}, 1, &o, (DLTensor *[]){&single_v[i]}, (DLTensor *[]){&single_s[i]}, &given_amax), MXFP8_OK);
    EXPECT(memcmp(&given, &shared, 4) == 0, "a given amax was written");
    EXPECT(memcmp(svb[i], vb[i], (size_t)vshape[i][0]) == 0, "shard %d: values differ from the fused call's", i);
    EXPECT(memcmp(ssb[i], sb[i], (size_t)sshape[i][0]) == 0, "shard %d: scales differ from the fused call's", i);
  }
  /* A NaN with a payload given to the fused call: used, and its bits left alone. */
  const uint32_t payload = 0x7FC01234u;
  float nan_amax;
  memcpy(&nan_amax, &payload, 4);
  amax.data = &nan_amax;
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 3, &o, vs, ss, &amax), MXFP8_OK);
  EXPECT(memcmp(&nan_amax, &payload, 4) == 0, "the given NaN amax was rewritten");
  /* A given amax may not sit in a written output: refused, nothing written. */
  for (int i = 0; i < 3; ++i) memset(vb[i], POISON, (size_t)vshape[i][0]), memset(sb[i], POISON, (size_t)sshape[i][0]);
  float *inside = (float *)(void *)(vb[1] + 4);
  memcpy(vb[1] + 4, &shared, 4);
  amax.data = inside;
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 3, &o, vs, ss, &amax), MXFP8_ERROR_INVALID_ARGUMENT);
  memset(vb[1] + 4, POISON, 4);
  for (int i = 0; i < 3; ++i)
    EXPECT(all_poison(vb[i], (size_t)vshape[i][0]) && all_poison(sb[i], (size_t)sshape[i][0]), "shard %d written", i);
  for (int i = 0; i < 3; ++i) free(in[i]), free(vb[i]), free(sb[i]), free(svb[i]), free(ssb[i]);
}

/* mxfp8_nvfp4_quantize_into: "No buffer written may overlap the input or another buffer; a given amax is
 * only read, so, as any input, it may share bytes with the input": a given amax inside the input works
 * (the same bytes as a separate copy of it), a computed one there is refused with nothing written. */
static void test_nvfp4_given_amax_inside_the_input(void **state) {
  (void)state;
  enum { M = 8, K = 32 };
  float in[M * K];
  uint64_t rng = 43;
  fill_quantize_input(in, 2, M * K, &rng);
  in[5] = 7.5f; /* the amax the call is given, read from inside the input */
  uint8_t v1[M * K / 2], s1[M * 2], v2[M * K / 2], s2[M * 2];
  int64_t ishape[2] = {M, K}, vs[1] = {M * K / 2}, ss[1] = {M * 2}, one[1] = {1};
  DLTensor it = {in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ishape, NULL, 0};
  DLTensor vt1 = host_bytes(v1, 1, vs), st1 = host_bytes(s1, 1, ss), vt2 = host_bytes(v2, 1, vs), st2 = host_bytes(s2, 1, ss);
  DLTensor inside = {in + 5, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
  float separate_value = 7.5f;
  DLTensor separate = {&separate_value, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.amax_mode = MXFP8_NVFP4_AMAX_GIVEN;
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&it}, 1, &o, (DLTensor *[]){&vt1}, (DLTensor *[]){&st1}, &inside), MXFP8_OK);
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&it}, 1, &o, (DLTensor *[]){&vt2}, (DLTensor *[]){&st2}, &separate), MXFP8_OK);
  EXPECT(memcmp(v1, v2, sizeof v1) == 0 && memcmp(s1, s2, sizeof s1) == 0, "a given amax inside the input differs");
  EXPECT(in[5] == 7.5f, "the input changed");
  o.amax_mode = MXFP8_NVFP4_AMAX_COMPUTE;
  memset(v1, POISON, sizeof v1);
  memset(s1, POISON, sizeof s1);
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&it}, 1, &o, (DLTensor *[]){&vt1}, (DLTensor *[]){&st1}, &inside), MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(in[5] == 7.5f && all_poison(v1, sizeof v1) && all_poison(s1, sizeof s1), "a refused quantize wrote");
}

/* mxfp8_nvfp4_quantize_into, fused: "No buffer written may overlap an input or another buffer" across
 * shards (shard 0's scales over shard 1's values, a computed amax over shard 1's input, shard 1's values
 * over shard 0's input); nothing is written on refusal. */
static void test_fused_quantize_overlaps_across_shards(void **state) {
  (void)state;
  enum { K = 32 };
  float in0[4 * K], in1[6 * K];
  uint64_t rng = 5;
  for (int i = 0; i < 4 * K; ++i) in0[i] = (float)((int)(rng_next(&rng) % 200) - 100) / 8.0f;
  for (int i = 0; i < 6 * K; ++i) in1[i] = (float)((int)(rng_next(&rng) % 200) - 100) / 8.0f;
  uint8_t arena[4 * 16 + 4 * 2 + 6 * 16 + 6 * 2 + 8];
  int64_t is0[2] = {4, K}, is1[2] = {6, K}, vs0[1] = {4 * 16}, ss0[1] = {4 * 2}, vs1[1] = {6 * 16}, ss1[1] = {6 * 2},
          one[1] = {1};
  for (int c = 0; c < 4; ++c) {
    float in1_copy[6 * K];
    memcpy(in1_copy, in1, sizeof in1);
    DLTensor i0 = {in0, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, is0, NULL, 0};
    DLTensor i1 = {in1_copy, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, is1, NULL, 0};
    uint8_t *v0 = arena, *s0 = v0 + 64, *v1 = s0 + 8, *s1 = v1 + 96;
    float *a = (float *)(void *)(arena + sizeof arena - 8);
    if (c == 0) s0 = v1 + 4;                 /* shard 0's scales over shard 1's values */
    if (c == 1) a = in1_copy + 3;            /* a computed amax over shard 1's input */
    if (c == 2) v1 = (uint8_t *)in0;         /* shard 1's values over shard 0's input */
    DLTensor tv0 = host_bytes(v0, 1, vs0), ts0 = host_bytes(s0, 1, ss0), tv1 = host_bytes(v1, 1, vs1),
             ts1 = host_bytes(s1, 1, ss1);
    DLTensor ta = {a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
    const DLTensor *ins[2] = {&i0, &i1};
    DLTensor *vals[2] = {&tv0, &tv1}, *scs[2] = {&ts0, &ts1};
    memset(arena, POISON, sizeof arena);
    float in0_before[4 * K];
    memcpy(in0_before, in0, sizeof in0);
    const mxfp8_status st = mxfp8_nvfp4_quantize_into(ins, 2, NULL, vals, scs, &ta);
    if (c == 3) {
      EXPECT(st == MXFP8_OK, "apart: status %d (%s)", st, mxfp8_last_error());
      continue;
    }
    EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "case %d: status %d (%s)", c, st, mxfp8_last_error());
    EXPECT(all_poison(arena, sizeof arena), "case %d: an output was written on failure", c);
    EXPECT(memcmp(in1_copy, in1, sizeof in1) == 0 && memcmp(in0, in0_before, sizeof in0) == 0,
           "case %d: an input was written", c);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dequantize_matches_reference_every_layout),
      cmocka_unit_test(test_export_values_scales_and_views),
      cmocka_unit_test(test_export_shards),
      cmocka_unit_test(test_views_keep_the_tensor_alive),
      cmocka_unit_test(test_global_scale_both_conventions),
      cmocka_unit_test(test_default_options_export_float4_values),
      cmocka_unit_test(test_old_size_desc_creates_mxfp8_as_before),
      cmocka_unit_test(test_swizzle_both_ways_for_16_value_blocks),
      cmocka_unit_test(test_swizzled_and_padded_agree),
      cmocka_unit_test(test_both_directions_in_te_shapes),
      cmocka_unit_test(test_gpu_matches_host),
      cmocka_unit_test(test_global_scales_of_many_pieces),
      cmocka_unit_test(test_nvfp4_versions_and_read_only),
      cmocka_unit_test(test_nvfp4_dequantize_output_over_the_tensor),
      cmocka_unit_test(test_nvfp4_fused_matches_single_with_the_shared_amax),
      cmocka_unit_test(test_nvfp4_given_amax_inside_the_input),
      cmocka_unit_test(test_fused_quantize_overlaps_across_shards),
  };
  return cmocka_run_group_tests_name("NVFP4", tests, NULL, NULL);
}
