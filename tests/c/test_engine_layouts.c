/* The engine-native targets (mxfp8_scale_layout) on the host: mxfp8_convert and mxfp8_grouped_convert into
 * compact, CUTLASS 128x4 and DeepGEMM packed buffers, the transfer (from tensors and from buckets) with
 * the new layouts, the scale fix-up, and round trips back to compact; mxfp8_layout_bytes' formulas;
 * refused converts writing nothing, DeepGEMM's strided form kept in its extent, converts on many threads.
 * Every expected byte comes from engine_layouts_support.h (the consumers' documented procedures), sources
 * are TE storage with poisoned padding, outputs are poisoned, and shapes are partial: rows not a multiple
 * of 4 or 128, K not a multiple of 32, ceil(K/32) not a multiple of 4. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "tensor_fixtures.h"

static const int32_t kTargets[] = {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED,
                                   MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32};
static const char *const kTargetNames[] = {"compact", "cutlass_128x4", "deepgemm", "deepgemm_float32"};

static int is_deepgemm(int32_t layout) {
  return layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED || layout == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32;
}

/* A poisoned host buffer of n bytes (one more, to catch a write past the end) and its DLTensor. */
typedef struct {
  uint8_t *bytes;
  int64_t shape[3];
  int64_t strides[3];
  DLTensor tensor;
} out_buffer;

static void make_out(out_buffer *o, int64_t n, uint8_t code, uint8_t bits) {
  o->bytes = malloc((size_t)n + 1);
  memset(o->bytes, POISON, (size_t)n + 1);
  o->shape[0] = n / (bits / 8);
  o->tensor = (DLTensor){o->bytes, {kDLCPU, 0}, 1, {code, bits, 1}, o->shape, NULL, 0};
}

static void expect_bytes(const uint8_t *got, const uint8_t *want, int64_t n, const char *what, const char *target) {
  for (int64_t b = 0; b < n; ++b)
    EXPECT(got[b] == want[b], "%s (%s): byte %lld is %u, expected %u", what, target, (long long)b, got[b], want[b]);
  EXPECT(got[n] == POISON, "%s (%s): written past the end", what, target);
}

/* The first `written` bytes as wanted, the rest of n (and the guard byte) untouched. */
static void expect_written_then_poison(const uint8_t *got, const uint8_t *want, int64_t written, int64_t n,
                                       const char *what) {
  for (int64_t b = 0; b < written; ++b)
    EXPECT(got[b] == want[b], "%s: byte %lld is %u, expected %u", what, (long long)b, got[b], want[b]);
  for (int64_t b = written; b <= n; ++b)
    EXPECT(got[b] == POISON, "%s: byte %lld lies outside the destination's extent but was written", what, (long long)b);
}

enum { kSpecs = 8 };
static const spec kSpecs_[kSpecs] = {
    {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0},   /* C = 2, rows not a multiple of 4 */
    {2, {257, 200, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},  /* K % 32 != 0, C = 7 */
    {3, {3, 5, 130}, MXFP8_DIRECTION_ROWWISE, 0, 0},    /* M = 15, C = 5 */
    {2, {130, 288, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},  /* C = 9 */
    {2, {1, 33, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0},     /* one row */
    {2, {256, 512, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},  /* whole tiles: no padding anywhere */
    {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, 0, 0},
    {2, {70, 33, 0}, MXFP8_DIRECTION_COLUMNWISE, 1, 0},
};

/* The transfer into an engine's parameter, one rowwise MXFP8 entry: values (may be NULL) and scales in
 * `target`, with `fixup`; from a bucket holding the entry's values and its scales part in `part_layout`
 * (tensor_into: from the trainer's tensor, immediate with plan NULL, else prepared into *plan). */
static mxfp8_status part_into(const DLTensor *bucket, const mxfp8_bucket_part *part, const int64_t *shape, int32_t part_layout,
                              int32_t fixup, DLTensor *values, DLTensor *scales, int32_t target) {
  const int32_t ndim = 2, format = MXFP8_FORMAT_E4M3;
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, 1);
  d.bucket_in = bucket;
  d.parts_in = part;
  d.ndims = &ndim;
  d.shapes = &shape;
  d.formats = &format;
  d.source_layouts = &part_layout;
  d.scale_fixup = fixup;
  d.values = &values;
  d.scales = &scales;
  d.target_layouts = &target;
  return mxfp8_transfer(&d, NULL);
}

static mxfp8_status tensor_into(const mxfp8_tensor *tensor, int32_t fixup, DLTensor *values, DLTensor *scales, int32_t target,
                                mxfp8_plan **plan) {
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
  d.tensors = &tensor;
  d.scale_fixup = fixup;
  d.values = &values;
  d.scales = &scales;
  d.target_layouts = &target;
  return plan ? mxfp8_transfer_prepare(&d, plan) : mxfp8_transfer(&d, NULL);
}

static void test_convert_writes_each_target_exactly(void **state) {
  (void)state;
  uint64_t rng = 5;
  for (int fixup = 0; fixup < 2; ++fixup)
    for (int i = 0; i < kSpecs; ++i) {
      const spec *s = &kSpecs_[i];
      const int col = s->direction == MXFP8_DIRECTION_COLUMNWISE;
      te_tensor t = make_te(s, &rng);
      if (fixup) zero_some_scales(&t, s, &rng);
      uint8_t *want_s = fixup ? ref_zero_as_one(t.ref.compact, t.ref.r * t.ref.c) : NULL;
      for (size_t k = 0; k < sizeof kTargets / sizeof kTargets[0]; ++k) {
        const int32_t target = kTargets[k];
        mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
        o.target = target;
        o.direction = s->direction;
        o.scale_fixup = fixup ? MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE : MXFP8_SCALE_FIXUP_NONE;
        if (col && is_deepgemm(target)) {
          out_buffer any;
          make_out(&any, 64, kDLUInt, 8);
          assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &any.tensor), MXFP8_ERROR_INVALID_ARGUMENT);
          assert_last_error_contains("rowwise scales only");
          EXPECT(any.bytes[0] == POISON, "a refused convert wrote");
          free(any.bytes);
          continue;
        }
        int64_t n = 0;
        uint8_t *want = ref_layout(fixup ? want_s : t.ref.compact, t.ref.r, t.ref.c, target, col, &n);
        int64_t lib_bytes = -1;
        assert_int_equal(mxfp8_layout_bytes(target, s->direction, t.ref.r, t.ref.c, &lib_bytes), MXFP8_OK);
        EXPECT(lib_bytes == n, "spec %d %s: mxfp8_layout_bytes %lld, the reference %lld", i, kTargetNames[k],
               (long long)lib_bytes, (long long)n);
        out_buffer scales, values;
        make_out(&scales, n, kDLUInt, 8);
        make_out(&values, t.ref.values_bytes, kDLFloat8_e4m3fn, 8);
        assert_int_equal(mxfp8_convert(t.handle, &o, &values.tensor, &scales.tensor), MXFP8_OK);
        expect_bytes(scales.bytes, want, n, fixup ? "convert with fix-up" : "convert", kTargetNames[k]);
        expect_bytes(values.bytes, t.ref.values, t.ref.values_bytes, "convert values", kTargetNames[k]);
        /* Without values: only the scales are written. */
        memset(scales.bytes, POISON, (size_t)n + 1);
        assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &scales.tensor), MXFP8_OK);
        expect_bytes(scales.bytes, want, n, "convert, scales only", kTargetNames[k]);
        free(scales.bytes);
        free(values.bytes);
        free(want);
      }
      free(want_s);
      free_te(&t);
    }
}

/* DeepGEMM's parameter is int32: a flat int32 buffer and the engine's own strided [mn, ceil(sf_k/4)]
 * tensor (strides (1, mn_aligned)) are both accepted and hold the same bytes. */
static void test_deepgemm_accepts_the_engines_int32_parameter(void **state) {
  (void)state;
  uint64_t rng = 9;
  const spec s = {2, {102, 200, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0}; /* mn 102 -> 104, sf_k 7 -> 2 words */
  te_tensor t = make_te(&s, &rng);
  int64_t n = 0;
  uint8_t *want = ref_layout(t.ref.compact, t.ref.r, t.ref.c, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &n);
  assert_int_equal(n, 4 * 2 * 104);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
  out_buffer flat;
  make_out(&flat, n, kDLInt, 32);
  assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &flat.tensor), MXFP8_OK);
  expect_bytes(flat.bytes, want, n, "int32 flat", "deepgemm");
  out_buffer param;
  make_out(&param, n, kDLInt, 32);
  param.tensor.ndim = 2;
  param.shape[0] = 102, param.shape[1] = 2;
  param.strides[0] = 1, param.strides[1] = 104;
  param.tensor.strides = param.strides;
  assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &param.tensor), MXFP8_OK);
  /* The view ends at int32 104 + 101: the last column's padding rows 102 and 103 are not its to write. */
  expect_written_then_poison(param.bytes, want, 4 * (104 + 102), n, "int32 engine parameter");
  /* The same shape with row-major strides is not DeepGEMM's tensor (and not its byte count). */
  param.strides[0] = 2, param.strides[1] = 1;
  memset(param.bytes, POISON, (size_t)n + 1);
  assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &param.tensor), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("DeepGEMM packed scales of a 102 x 7 matrix are 832 bytes, got 816");
  assert_last_error_contains("strides (2, 1)");
  assert_last_error_contains("strided int32 form is ([1,] 102, 2) with strides ([208,] 1, 104)");
  EXPECT(param.bytes[0] == POISON, "a refused convert wrote");
  free(flat.bytes);
  free(param.bytes);
  free(want);
  free_te(&t);
}

/* Hopper DeepGEMM's float32 parameter: every E8M0 byte (0 and 255 included) as the float32 SGLang makes
 * of it, into float32 or byte buffers (other 32-bit types refused, nothing written), and back: a bucket
 * part in this layout imports to compact and 128x4 as the bytes it was made from. */
static void test_deepgemm_float32_carries_every_exponent(void **state) {
  (void)state;
  uint64_t rng = 77;
  const spec s = {2, {128, 32 * 17, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0}; /* 128 x 17 = 2176 scales */
  te_tensor t = make_te(&s, &rng);
  for (int64_t i = 0; i < t.ref.r * t.ref.c; ++i) t.ref.compact[i] = (uint8_t)(i * 7); /* every byte, mixed */
  for (int64_t y = 0; y < t.ref.r; ++y) /* the producer's row-major storage, rows roundup(17, 4) apart */
    memcpy(t.scales->buffer + y * 20, t.ref.compact + y * t.ref.c, (size_t)t.ref.c);
  int64_t n = 0;
  uint8_t *want = ref_layout(t.ref.compact, t.ref.r, t.ref.c, MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, 0, &n);
  assert_int_equal(n, 4 * 128 * 17);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32;
  out_buffer param;
  make_out(&param, n, kDLFloat, 32);
  param.tensor.ndim = 2;
  param.shape[0] = 128, param.shape[1] = 17;
  assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &param.tensor), MXFP8_OK);
  expect_bytes(param.bytes, want, n, "float32 [128, 17]", "deepgemm_float32");
  const float *f = (const float *)param.bytes;
  EXPECT(f[0] == 0.0f && f[1] == ldexpf(1.0f, 7 - 127) && f[73] == INFINITY, /* bytes 0, 7 and 511 % 256 = 255 */
         "float32 values %g %g %g", f[0], f[1], f[73]);
  /* int32 is DeepGEMM packed's element type, not this layout's: refused before anything is written. */
  memset(param.bytes, POISON, (size_t)n + 1);
  param.tensor.dtype = (DLDataType){kDLInt, 32, 1};
  assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &param.tensor), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("does not hold DeepGEMM float32 scales (expected float32, uint8 or float8_e8m0fnu)");
  EXPECT(param.bytes[0] == POISON, "a refused convert wrote");
  /* Back: the float32 bytes as a bucket part, imported to compact and to 128x4. */
  for (int to = 0; to < 2; ++to) {
    const int32_t dst_layout = to ? MXFP8_SCALE_LAYOUT_128X4 : MXFP8_SCALE_LAYOUT_COMPACT;
    int64_t m_bytes = 0;
    uint8_t *back = ref_layout(t.ref.compact, t.ref.r, t.ref.c, dst_layout, 0, &m_bytes);
    out_buffer bucket, values, scales;
    make_out(&bucket, t.ref.values_bytes + n, kDLUInt, 8);
    memcpy(bucket.bytes, t.ref.values, (size_t)t.ref.values_bytes);
    memcpy(bucket.bytes + t.ref.values_bytes, want, (size_t)n);
    const mxfp8_bucket_part entry = {0, (uint64_t)t.ref.values_bytes, (uint64_t)t.ref.values_bytes, (uint64_t)n, 0, 0};
    make_out(&values, t.ref.values_bytes, kDLUInt, 8);
    make_out(&scales, m_bytes, kDLUInt, 8);
    assert_int_equal(part_into(&bucket.tensor, &entry, s.shape, MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, MXFP8_SCALE_FIXUP_NONE,
                               &values.tensor, &scales.tensor, dst_layout),
                     MXFP8_OK);
    expect_bytes(scales.bytes, back, m_bytes, "float32 part imported", to ? "cutlass_128x4" : "compact");
    free(bucket.bytes);
    free(values.bytes);
    free(scales.bytes);
    free(back);
  }
  /* Columnwise has no float32 form (DeepGEMM scales K blocks). */
  int64_t bytes = 0;
  assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, MXFP8_DIRECTION_COLUMNWISE, 4, 4, &bytes),
                   MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("rowwise scales only");
  free(param.bytes);
  free(want);
  free_te(&t);
}

/* E experts of N rows, stored as TE stores them, converted stacked in one call. */
static void test_grouped_experts_convert_stacked(void **state) {
  (void)state;
  uint64_t rng = 21;
  const int64_t experts = 5, n = 102, k = 200, c = 7; /* N not a multiple of 4, K of 32, C of 4 */
  for (int variant = 0; variant < 3; ++variant) { /* compact, padded row-major, padded swizzled */
    uint8_t *values = malloc((size_t)(experts * n * k));
    fill_random(values, (size_t)(experts * n * k), &rng);
    uint8_t *compact = malloc((size_t)(experts * n * c));
    fill_random_scales(compact, (size_t)(experts * n * c), &rng);
    add_zero_scales(compact, experts * n * c, &rng);
    test_tensor *data, *scales;
    mxfp8_grouped_tensor *g = make_grouped(values, compact, experts, n, k, variant, &data, &scales);
    for (int fixup = 0; fixup < 2; ++fixup)
      for (size_t t = 0; t < sizeof kTargets / sizeof kTargets[0]; ++t) {
        int64_t per_out = 0;
        uint8_t *probe = ref_layout(compact, n, c, kTargets[t], 0, &per_out);
        free(probe);
        uint8_t *want = malloc((size_t)(experts * per_out) + 1);
        for (int64_t e = 0; e < experts; ++e) {
          uint8_t *src = fixup ? ref_zero_as_one(compact + e * n * c, n * c) : NULL;
          int64_t bytes = 0;
          uint8_t *one = ref_layout(fixup ? src : compact + e * n * c, n, c, kTargets[t], 0, &bytes);
          memcpy(want + e * per_out, one, (size_t)bytes);
          free(one);
          free(src);
        }
        mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
        o.target = kTargets[t];
        o.scale_fixup = fixup;
        out_buffer out, vals;
        make_out(&out, experts * per_out, kDLUInt, 8);
        make_out(&vals, experts * n * k, kDLUInt, 8);
        if (kTargets[t] == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED && variant == 1) {
          /* As SGLang holds it: int32 [E, N, ceil(C/4)], strides (ceil(C/4) * 104, 1, 104). */
          out.tensor.dtype = (DLDataType){kDLInt, 32, 1};
          out.tensor.ndim = 3;
          out.shape[0] = experts, out.shape[1] = n, out.shape[2] = 2;
          out.strides[0] = 2 * 104, out.strides[1] = 1, out.strides[2] = 104;
          out.tensor.strides = out.strides;
        }
        if (kTargets[t] == MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 && variant == 1) {
          /* As SGLang holds it on Hopper: float32 [E, N, C]. */
          out.tensor.dtype = (DLDataType){kDLFloat, 32, 1};
          out.tensor.ndim = 3;
          out.shape[0] = experts, out.shape[1] = n, out.shape[2] = c;
        }
        assert_int_equal(mxfp8_grouped_convert(g, &o, &vals.tensor, &out.tensor), MXFP8_OK);
        if (out.tensor.strides) /* the view ends before the last expert's last padding rows, 102 and 103 */
          expect_written_then_poison(out.bytes, want, experts * per_out - 8, experts * per_out, "grouped strided");
        else
          expect_bytes(out.bytes, want, experts * per_out, fixup ? "grouped with fix-up" : "grouped", kTargetNames[t]);
        expect_bytes(vals.bytes, values, experts * n * k, "grouped values", kTargetNames[t]);
        free(out.bytes);
        free(vals.bytes);
        free(want);
      }
    mxfp8_grouped_tensor_release(g);
    test_tensor_free(data);
    test_tensor_free(scales);
    free(values);
    free(compact);
  }
}

/* A bucket whose scale parts are in an engine layout (desc.source_layouts says which) imports back into
 * compact and into any other layout: convert -> bucket -> import is the identity on S. */
static void test_engine_layout_parts_round_trip_to_compact(void **state) {
  (void)state;
  uint64_t rng = 33;
  const spec s = {2, {131, 230, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0}; /* C = 8, rows 131 */
  te_tensor t = make_te(&s, &rng);
  for (size_t from = 1; from < sizeof kTargets / sizeof kTargets[0]; ++from)
    for (size_t to = 0; to < sizeof kTargets / sizeof kTargets[0]; ++to) {
      int64_t part = 0, n = 0;
      uint8_t *probe = ref_layout(t.ref.compact, t.ref.r, t.ref.c, kTargets[from], 0, &part);
      free(probe);
      uint8_t *want = ref_layout(t.ref.compact, t.ref.r, t.ref.c, kTargets[to], 0, &n);
      /* The bucket: values, then the scales converted by the library into `from`. */
      const int64_t bucket_bytes = t.ref.values_bytes + part;
      out_buffer bucket;
      make_out(&bucket, bucket_bytes, kDLUInt, 8);
      memcpy(bucket.bytes, t.ref.values, (size_t)t.ref.values_bytes);
      int64_t part_shape[1] = {part};
      DLTensor part_tensor = {bucket.bytes + t.ref.values_bytes, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, part_shape, NULL, 0};
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      o.target = kTargets[from];
      assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &part_tensor), MXFP8_OK);
      const mxfp8_bucket_part entry = {0, (uint64_t)t.ref.values_bytes, (uint64_t)t.ref.values_bytes, (uint64_t)part, 0, 0};
      out_buffer values, scales;
      make_out(&values, t.ref.values_bytes, kDLUInt, 8);
      make_out(&scales, n, kDLUInt, 8);
      assert_int_equal(part_into(&bucket.tensor, &entry, s.shape, kTargets[from], MXFP8_SCALE_FIXUP_NONE, &values.tensor,
                                 &scales.tensor, kTargets[to]),
                       MXFP8_OK);
      expect_bytes(scales.bytes, want, n, kTargetNames[from], kTargetNames[to]);
      expect_bytes(values.bytes, t.ref.values, t.ref.values_bytes, "round trip values", kTargetNames[to]);
      /* The part recorded in another layout than it is in: refused, nothing written. */
      const int32_t wrong = kTargets[from] == MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED ? MXFP8_SCALE_LAYOUT_128X4
                                                                          : MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
      memset(scales.bytes, POISON, (size_t)n + 1);
      assert_int_equal(part_into(&bucket.tensor, &entry, s.shape, wrong, MXFP8_SCALE_FIXUP_NONE, &values.tensor, &scales.tensor,
                                 kTargets[to]),
                       MXFP8_ERROR_INVALID_ARGUMENT);
      assert_last_error_contains("desc.parts_in[0] gives");
      assert_last_error_contains("the manifest does not describe this bucket");
      EXPECT(scales.bytes[0] == POISON, "a refused import wrote");
      free(bucket.bytes);
      free(values.bytes);
      free(scales.bytes);
      free(want);
    }
  free_te(&t);
}

/* The fix-up through the transfer (from tensors and from a bucket) and the sender's batched export:
 * every exponent 0 arrives as 1, padding stays 0, and without the option every byte arrives as stored. */
static void test_scale_fixup_on_import_and_export(void **state) {
  (void)state;
  uint64_t rng = 45;
  const spec s = {2, {100, 230, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0};
  te_tensor t = make_te(&s, &rng);
  zero_some_scales(&t, &s, &rng);
  uint8_t *fixed = ref_zero_as_one(t.ref.compact, t.ref.r * t.ref.c);
  for (size_t k = 0; k < sizeof kTargets / sizeof kTargets[0]; ++k)
    for (int fixup = 0; fixup < 2; ++fixup) {
      int64_t n = 0;
      uint8_t *want = ref_layout(fixup ? fixed : t.ref.compact, t.ref.r, t.ref.c, kTargets[k], 0, &n);
      out_buffer values, scales;
      make_out(&values, t.ref.values_bytes, kDLUInt, 8);
      make_out(&scales, n, kDLUInt, 8);
      mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
      o.scale_fixup = fixup;
      const mxfp8_tensor *handle = t.handle;
      assert_int_equal(tensor_into(handle, fixup, &values.tensor, &scales.tensor, kTargets[k], NULL), MXFP8_OK);
      expect_bytes(scales.bytes, want, n, fixup ? "from tensors with fix-up" : "from tensors", kTargetNames[k]);
      /* The bucket path: the receiver's desc carries the fix-up. */
      const int64_t total = t.ref.values_bytes + t.ref.r * t.ref.c;
      out_buffer bucket;
      make_out(&bucket, total, kDLUInt, 8);
      memcpy(bucket.bytes, t.ref.values, (size_t)t.ref.values_bytes);
      memcpy(bucket.bytes + t.ref.values_bytes, t.ref.compact, (size_t)(t.ref.r * t.ref.c));
      const mxfp8_bucket_part entry = {0, (uint64_t)t.ref.values_bytes, (uint64_t)t.ref.values_bytes,
                                       (uint64_t)(t.ref.r * t.ref.c), 0, 0};
      memset(scales.bytes, POISON, (size_t)n + 1);
      assert_int_equal(part_into(&bucket.tensor, &entry, s.shape, MXFP8_SCALE_LAYOUT_COMPACT, fixup, &values.tensor,
                                 &scales.tensor, kTargets[k]),
                       MXFP8_OK);
      expect_bytes(scales.bytes, want, n, fixup ? "from a bucket with fix-up" : "from a bucket", kTargetNames[k]);
      if (kTargets[k] == MXFP8_SCALE_LAYOUT_COMPACT) { /* the sender's side */
        DLTensor *dsts[1] = {&scales.tensor};
        memset(scales.bytes, POISON, (size_t)n + 1);
        assert_int_equal(mxfp8_export_scales_batched(&handle, dsts, 1, &o), MXFP8_OK);
        expect_bytes(scales.bytes, want, n, fixup ? "batched export with fix-up" : "batched export", "compact");
      }
      free(bucket.bytes);
      free(values.bytes);
      free(scales.bytes);
      free(want);
    }
  /* mxfp8_export_components returns views, so it cannot rewrite: refused. */
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.scale_fixup = MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
  DLManagedTensorVersioned *sc = NULL;
  assert_int_equal(mxfp8_export_components(t.handle, &o, NULL, &sc), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("options.scale_fixup is 1");
  assert_null(sc);
  free(fixed);
  free_te(&t);
}

/* A prepared import into DeepGEMM parameters with the fix-up: checked once, each run rewrites the
 * parameter from what the sources hold then. A bucket import into the same parameter without the fix-up
 * writes the scales as stored. */
static void test_prepared_import_into_deepgemm_parameters(void **state) {
  (void)state;
  uint64_t rng = 51;
  const spec s = {2, {130, 230, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0};
  te_tensor t = make_te(&s, &rng);
  zero_some_scales(&t, &s, &rng);
  uint8_t *fixed = ref_zero_as_one(t.ref.compact, t.ref.r * t.ref.c);
  int64_t n = 0;
  uint8_t *want = ref_layout(fixed, t.ref.r, t.ref.c, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &n);
  out_buffer values, scales;
  make_out(&values, t.ref.values_bytes, kDLUInt, 8);
  make_out(&scales, n, kDLInt, 32);
  mxfp8_plan *plan = NULL;
  assert_int_equal(tensor_into(t.handle, MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE, &values.tensor, &scales.tensor,
                               MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, &plan),
                   MXFP8_OK);
  EXPECT(scales.bytes[0] == POISON, "preparing wrote the parameter");
  for (int run = 0; run < 2; ++run) {
    memset(scales.bytes, POISON, (size_t)n + 1);
    assert_int_equal(mxfp8_plan_run(plan, NULL), MXFP8_OK);
    expect_bytes(scales.bytes, want, n, "prepared import with fix-up", "deepgemm");
  }
  mxfp8_plan_release(plan);

  /* The bucket import into the same int32 parameter, without the fix-up: every byte as stored. */
  uint8_t *plain = ref_layout(t.ref.compact, t.ref.r, t.ref.c, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &n);
  out_buffer bucket;
  make_out(&bucket, t.ref.values_bytes + t.ref.r * t.ref.c, kDLUInt, 8);
  memcpy(bucket.bytes, t.ref.values, (size_t)t.ref.values_bytes);
  memcpy(bucket.bytes + t.ref.values_bytes, t.ref.compact, (size_t)(t.ref.r * t.ref.c));
  const mxfp8_bucket_part entry = {0, (uint64_t)t.ref.values_bytes, (uint64_t)t.ref.values_bytes, (uint64_t)(t.ref.r * t.ref.c),
                                   0, 0};
  memset(scales.bytes, POISON, (size_t)n + 1);
  assert_int_equal(part_into(&bucket.tensor, &entry, s.shape, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_FIXUP_NONE,
                             &values.tensor, &scales.tensor, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED),
                   MXFP8_OK);
  expect_bytes(scales.bytes, plain, n, "bucket import", "deepgemm");
  free(bucket.bytes);
  free(plain);
  free(values.bytes);
  free(scales.bytes);
  free(want);
  free(fixed);
  free_te(&t);
}

/* DeepGEMM's strided int32 form over storage of exactly its extent, rows % 4 != 0: the tensor describes
 * (G - 1) * p * mn_aligned + (p - 1) * mn_aligned + mn int32, fewer than the layout's G * p * mn_aligned;
 * the library writes every described int32 and nothing past it (the guard words stay poisoned). Through
 * mxfp8_convert, mxfp8_grouped_convert ([1, mn, p] and [G, mn, p]) and a FROM_TENSORS transfer. */
static void test_deepgemm_strided_form_stays_in_its_extent(void **state) {
  (void)state;
  uint64_t rng = 61;
  enum { kMn = 6, kAligned = 8, kWords = 2, kGuard = 16 }; /* K 200: sf_k 7, 2 int32 per row */
  const int64_t k = 200, c = 7;
  for (int64_t experts = 1; experts <= 3; ++experts) {
    uint8_t *compact = malloc((size_t)(experts * kMn * c));
    fill_random_scales(compact, (size_t)(experts * kMn * c), &rng);
    const int64_t per = kWords * kAligned * 4, extent = 4 * ((experts - 1) * kWords * kAligned + kAligned + kMn);
    uint8_t *want = malloc((size_t)(experts * per));
    for (int64_t e = 0; e < experts; ++e) {
      int64_t bytes = 0;
      uint8_t *one = ref_layout(compact + e * kMn * c, kMn, c, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &bytes);
      assert_int_equal(bytes, per);
      memcpy(want + e * per, one, (size_t)bytes);
      free(one);
    }
    uint8_t *storage = malloc((size_t)(extent + kGuard));
    int64_t shape[3] = {experts, kMn, kWords}, strides[3] = {kWords * kAligned, 1, kAligned};
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
    for (int form = 0; form < 3; ++form) { /* 0: [G, mn, p] grouped; 1: [mn, p] one tensor; 2: its import */
      if (form > 0 && experts > 1) break;
      memset(storage, POISON, (size_t)(extent + kGuard));
      DLTensor param = {storage, {kDLCPU, 0}, form == 0 ? 3 : 2, {kDLInt, 32, 1}, form == 0 ? shape : shape + 1,
                        form == 0 ? strides : strides + 1, 0};
      if (form == 0) {
        const int64_t values_shape[2] = {experts * kMn, k}, scales_shape[1] = {experts * kMn * c};
        test_tensor *data = test_tensor_new(2, values_shape, kDLUInt, 0);
        test_tensor *scales = test_tensor_new(1, scales_shape, kDLUInt, 0);
        memcpy(scales->buffer, compact, (size_t)(experts * kMn * c));
        mxfp8_grouped_desc d = MXFP8_GROUPED_DESC_INIT;
        d.scale_layout = MXFP8_SCALE_LAYOUT_ROW_MAJOR;
        d.scales = MXFP8_GROUPED_SCALES_COMPACT;
        d.num_experts = (int32_t)experts;
        d.cols = k;
        d.uniform_rows = kMn;
        d.data = &data->managed;
        d.scale_inv = &scales->managed;
        mxfp8_grouped_tensor *g = NULL;
        assert_int_equal(mxfp8_grouped_tensor_create(&d, &g), MXFP8_OK);
        assert_int_equal(mxfp8_grouped_convert(g, &o, NULL, &param), MXFP8_OK);
        mxfp8_grouped_tensor_release(g);
        test_tensor_free(data);
        test_tensor_free(scales);
      } else {
        const spec sp = {2, {kMn, k, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0};
        te_tensor t = make_te(&sp, &rng);
        /* the tensor draws its own scales: what is wanted, from them */
        int64_t bytes = 0;
        uint8_t *one = ref_layout(t.ref.compact, kMn, c, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &bytes);
        memcpy(want, one, (size_t)bytes);
        free(one);
        if (form == 1) {
          assert_int_equal(mxfp8_convert(t.handle, &o, NULL, &param), MXFP8_OK);
        } else {
          out_buffer values;
          make_out(&values, t.ref.values_bytes, kDLUInt, 8);
          assert_int_equal(tensor_into(t.handle, MXFP8_SCALE_FIXUP_NONE, &values.tensor, &param,
                                       MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, NULL),
                           MXFP8_OK);
          free(values.bytes);
        }
        free_te(&t);
      }
      for (int64_t b = 0; b < extent; ++b)
        EXPECT(storage[b] == want[b], "%lld experts, form %d: byte %lld is %u, expected %u", (long long)experts, form,
               (long long)b, storage[b], want[b]);
      for (int64_t b = extent; b < extent + kGuard; ++b)
        EXPECT(storage[b] == POISON, "%lld experts, form %d: byte %lld past the extent (%lld) was written",
               (long long)experts, form, (long long)b, (long long)extent);
    }
    free(storage);
    free(want);
    free(compact);
  }
}

/* ---------------------------------------------------------------------------------------------------
 * mxfp8_layout_bytes
 * --------------------------------------------------------------------------------------------------- */

/* "in *bytes": the byte counts of every layout, from the formulas in the header (written here), for sizes
 * that are not multiples of anything; on failure *bytes is left as it was. */
static void test_layout_bytes_formulas_and_failures(void **state) {
  (void)state;
  const int64_t sizes[] = {0, 1, 3, 4, 5, 31, 100, 127, 128, 129, 255, 256, 1000};
  const int n = (int)(sizeof sizes / sizeof sizes[0]);
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const int64_t R = sizes[a], C = sizes[b];
      int64_t got = -7;
      assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_COMPACT, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == R * C, "compact %lld x %lld: %lld", (long long)R, (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_COMPACT, 1, R, C, &got), MXFP8_OK);
      EXPECT(got == R * C, "columnwise compact %lld x %lld: %lld", (long long)R, (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_128X4, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == ref_round_up(R, 128) * ref_round_up(C, 4), "128x4 %lld x %lld: %lld", (long long)R, (long long)C,
             (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_128X4, 1, R, C, &got), MXFP8_OK);
      EXPECT(got == ref_round_up(C, 128) * ref_round_up(R, 4), "columnwise 128x4 %lld x %lld: %lld", (long long)R,
             (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == 4 * ref_ceil_div(C, 4) * ref_round_up(R, 4), "DeepGEMM %lld x %lld: %lld", (long long)R,
             (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == 4 * R * C, "DeepGEMM float32 %lld x %lld: %lld", (long long)R, (long long)C, (long long)got);
      for (int32_t l = MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED; l <= MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED; l += 2) {
        got = -7;
        const mxfp8_status st = mxfp8_layout_bytes(l, 0, R, C, &got);
        if (R % 128 == 0) {
          assert_int_equal(st, MXFP8_OK);
          EXPECT(got == R * ref_round_up(C, 4), "TRT-LLM %lld x %lld: %lld", (long long)R, (long long)C, (long long)got);
        } else {
          assert_int_equal(st, MXFP8_ERROR_INVALID_ARGUMENT);
          assert_int_equal(got, -7);
        }
      }
    }
  /* An empty matrix is 0 bytes however large its other side (padded first, that side would overflow);
   * the TRT-LLM row rule still holds for it. */
  const int64_t huge[] = {INT64_MAX, INT64_MAX - 3, (int64_t)1 << 62};
  for (int32_t l = MXFP8_SCALE_LAYOUT_COMPACT; l <= TEST_LAST_LAYOUT; ++l)
    for (int32_t direction = 0; direction <= 1; ++direction) {
      if (direction == 1 && l != MXFP8_SCALE_LAYOUT_COMPACT && l != MXFP8_SCALE_LAYOUT_128X4) continue;
      const int trtllm = l == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || l == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED;
      for (size_t h = 0; h < sizeof huge / sizeof huge[0]; ++h) {
        int64_t got = -7;
        assert_int_equal(mxfp8_layout_bytes(l, direction, 0, huge[h], &got), MXFP8_OK);
        EXPECT(got == 0, "layout %d direction %d, 0 x %lld: %lld", l, direction, (long long)huge[h], (long long)got);
        got = -7;
        const mxfp8_status st = mxfp8_layout_bytes(l, direction, huge[h], 0, &got);
        if (trtllm && huge[h] % 128 != 0) {
          EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && got == -7, "TRT-LLM %lld x 0 taken", (long long)huge[h]);
        } else {
          assert_int_equal(st, MXFP8_OK);
          EXPECT(got == 0, "layout %d direction %d, %lld x 0: %lld", l, direction, (long long)huge[h], (long long)got);
        }
      }
    }
  /* The swizzle pair agrees: an empty matrix swizzles to and from 0 bytes however large its other side. */
  for (size_t h = 0; h < sizeof huge / sizeof huge[0]; ++h)
    for (int side = 0; side < 2; ++side) {
      int64_t cshape[2] = {side ? 0 : huge[h], side ? huge[h] : 0}, sshape[1] = {0};
      DLTensor compact = {NULL, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, cshape, NULL, 0};
      DLTensor swizzled = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
      EXPECT(mxfp8_swizzle_scales(&compact, &swizzled, NULL) == MXFP8_OK, "swizzle of %lld x %lld: %s",
             (long long)cshape[0], (long long)cshape[1], mxfp8_last_error());
      EXPECT(mxfp8_unswizzle_scales(&swizzled, &compact, NULL) == MXFP8_OK, "unswizzle of %lld x %lld: %s",
             (long long)cshape[0], (long long)cshape[1], mxfp8_last_error());
    }
  {  /* Leading dimensions whose product int64 cannot count, with K = 0: refused as such (the fuzzer found the
      * product computed unchecked, a signed overflow, where the element count, 0, was checked). */
    int64_t cshape[3] = {(int64_t)1 << 62, 32, 0}, sshape[1] = {0};
    DLTensor compact = {NULL, {kDLCPU, 0}, 3, {kDLUInt, 8, 1}, cshape, NULL, 0};
    DLTensor swizzled = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
    assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(mxfp8_last_error(), "compact: shape (4611686018427387904, 32, 0) has more rows than int64 can count"),
           "%s", mxfp8_last_error());
    /* The same shape as an NVFP4 tensor's values: its leading dimensions were multiplied unchecked too. */
    float amax = 1.0f;
    int64_t logical[2] = {0, 32}, scale_shape[2] = {0, 2}, amax_shape[1] = {1};
    DLManagedTensorVersioned values = {{1, 1}, NULL, NULL, 0, {NULL, {kDLCPU, 0}, 3, {kDLUInt, 8, 1}, cshape, NULL, 0}};
    DLManagedTensorVersioned scales = {{1, 1}, NULL, NULL, 0, {NULL, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, scale_shape, NULL, 0}};
    DLManagedTensorVersioned amaxes = {{1, 1}, NULL, NULL, 0, {&amax, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, amax_shape, NULL, 0}};
    mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
    d.format = MXFP8_FORMAT_NVFP4;
    d.block = MXFP8_BLOCK_1X16;
    d.e4m3_max = 448;
    d.ndim = 2;
    d.shape = logical;
    d.rowwise_data = &values;
    d.rowwise_scale_inv = &scales;
    d.rowwise_amax = &amaxes;
    mxfp8_tensor *t = NULL;
    assert_int_equal(mxfp8_tensor_create(&d, &t), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(strstr(mxfp8_last_error(), "does not hold the stored 0 x 32 matrix") != NULL, "%s", mxfp8_last_error());
  }
  /* Failures: unknown layouts and directions, negative sizes, sizes whose byte count overflows int64. */
  const struct {
    int32_t layout, direction;
    int64_t rows, cols;
  } bad[] = {
      {-1, 0, 1, 1},
      {TEST_LAST_LAYOUT + 1, 0, 1, 1},
      {MXFP8_SCALE_LAYOUT_COMPACT, 2, 1, 1},
      {MXFP8_SCALE_LAYOUT_COMPACT, -1, 1, 1},
      {MXFP8_SCALE_LAYOUT_COMPACT, 0, INT64_MIN, 1},
      {MXFP8_SCALE_LAYOUT_COMPACT, 0, 1, -1},
      {MXFP8_SCALE_LAYOUT_COMPACT, 0, INT64_MAX, 2},
      {MXFP8_SCALE_LAYOUT_128X4, 0, INT64_MAX, 1},
      {MXFP8_SCALE_LAYOUT_128X4, 0, 1, INT64_MAX},
      {MXFP8_SCALE_LAYOUT_128X4, 1, INT64_MAX - 3, 1},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, INT64_MAX, 1},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, 1, INT64_MAX},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, (int64_t)1 << 40, (int64_t)1 << 40},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 1, 4, 4},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, 1, 4, 4},
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, 0, (int64_t)1 << 31, (int64_t)1 << 31}, /* 2^62 scales, 2^64 bytes */
      {MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32, 0, INT64_MAX, 2},
      {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, 1, 128, 4},
      {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED, 1, 128, 4},
      {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, 0, (int64_t)1 << 62, 8},
      {MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, 0, 128, INT64_MAX},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    int64_t got = -7;
    const mxfp8_status st = mxfp8_layout_bytes(bad[i].layout, bad[i].direction, bad[i].rows, bad[i].cols, &got);
    EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "case %zu returned %d", i, st);
    EXPECT(got == -7, "case %zu wrote *bytes on failure", i);
    EXPECT(strlen(mxfp8_last_error()) > 0, "case %zu has no message", i);
  }
  int64_t untouched = -7;
  assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_128X4, 0, INT64_MAX, 1, &untouched), MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(strstr(mxfp8_last_error(), "layout (MXFP8_SCALE_LAYOUT_128X4): the swizzled scales' padded row count overflows "
                                    "int64 for a 9223372036854775807 x 1 scale matrix") != NULL,
         "an overflow names the layout and the matrix: %s", mxfp8_last_error());
  assert_int_equal(mxfp8_layout_bytes(MXFP8_SCALE_LAYOUT_COMPACT, 0, 1, 1, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
}

/* ---------------------------------------------------------------------------------------------------
 * mxfp8_convert
 * --------------------------------------------------------------------------------------------------- */

/* "Everything ... is checked before anything is written": a call that fails on its values output (the
 * second checked) writes no scale byte, and one that fails on its scales writes no value. */
static void test_convert_failure_writes_nothing(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 128, 64, 2);
  const int64_t sbytes = 128 * 2 * 4; /* the largest target: DeepGEMM float32 (128x4, DeepGEMM packed and TRT-LLM take 512) */
  /* The scales buffer is as large as the values, so that a values output laid over it is real memory. */
  uint8_t *scales = malloc((size_t)(128 * 64)), *values = malloc((size_t)(128 * 64 + 1));
  int64_t sshape[1] = {sbytes}, vshape[1] = {128 * 64 - 1}, good_v[1] = {128 * 64};
  DLTensor s = host_bytes(scales, 1, sshape), v = host_bytes(values, 1, vshape);
  for (int32_t target = 0; target <= TEST_LAST_LAYOUT; ++target) {
    int64_t need = 0;
    assert_int_equal(mxfp8_layout_bytes(target, 0, 128, 2, &need), MXFP8_OK);
    sshape[0] = need;
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = target;
    /* values one byte short */
    memset(scales, POISON, (size_t)sbytes);
    memset(values, POISON, (size_t)(128 * 64 + 1));
    v.shape = vshape;
    assert_int_equal(mxfp8_convert(r.t, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(all_poison(scales, (size_t)need), "target %d: scales written although the values were refused", target);
    EXPECT(all_poison(values, 128 * 64 + 1), "target %d: values written on failure", target);
    /* scales one byte short, values right */
    v.shape = good_v;
    sshape[0] = need - 1;
    assert_int_equal(mxfp8_convert(r.t, &o, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(all_poison(scales, (size_t)need), "target %d: scales written on failure", target);
    EXPECT(all_poison(values, 128 * 64 + 1), "target %d: values written although the scales were refused", target);
    /* the values output over the tensor's own values (an in-place convert) */
    sshape[0] = need;
    DLTensor alias = host_bytes(r.data->buffer, 1, good_v);
    memcpy(values, r.data->buffer, 128 * 64);
    assert_int_equal(mxfp8_convert(r.t, &o, &alias, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(memcmp(values, r.data->buffer, 128 * 64) == 0, "target %d: the source values changed", target);
    EXPECT(all_poison(scales, (size_t)need), "target %d: scales written although the values alias the source", target);
    /* the scales output over the values output: one buffer for both */
    DLTensor v_over_s = host_bytes(scales, 1, good_v);
    memset(scales, POISON, 128 * 64);
    assert_int_equal(mxfp8_convert(r.t, &o, &v_over_s, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(all_poison(scales, 128 * 64), "target %d: written with both outputs in one buffer", target);
  }
  free(scales);
  free(values);
  free_rowwise(&r);
}

/* "Every byte is written, padding included (as zero), except that the library never writes past the
 * extent a tensor describes": DeepGEMM's strided int32 (R, ceil(C/4)) with strides (1, roundup(R, 4)) for
 * R % 4 != 0: the last column's padding rows keep their bytes, everything else is the reference; and the
 * destination's byte_offset is honoured. */
static void test_convert_deepgemm_strided_extent(void **state) {
  (void)state;
  const int64_t ms[] = {1, 5, 37, 102};
  for (size_t i = 0; i < sizeof ms / sizeof ms[0]; ++i) {
    rowwise_tensor r;
    const int64_t m = ms[i], k = 200; /* C = 7: two int32 columns, the last half padding */
    make_rowwise(&r, m, k, 10 + i);
    int64_t ref_bytes = 0;
    uint8_t *ref = ref_layout(r.s, r.sr, r.sc, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &ref_bytes);
    const int64_t aligned = ref_round_up(m, 4), packed = ref_ceil_div(r.sc, 4);
    const int64_t extent = 4 * ((packed - 1) * aligned + m);
    uint8_t *block = malloc((size_t)(ref_bytes + 2 * 64));
    memset(block, POISON, (size_t)(ref_bytes + 2 * 64));
    int64_t shape[2] = {m, packed}, strides[2] = {1, aligned};
    DLTensor s = host_bytes(block, 2, shape);
    s.dtype.code = kDLInt;
    s.dtype.bits = 32;
    s.strides = strides;
    s.byte_offset = 64;
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
    assert_int_equal(mxfp8_convert(r.t, &o, NULL, &s), MXFP8_OK);
    EXPECT(all_poison(block, 64), "m %lld: bytes before byte_offset written", (long long)m);
    EXPECT(memcmp(block + 64, ref, (size_t)extent) == 0, "m %lld: the extent differs from DeepGEMM's packing", (long long)m);
    EXPECT(all_poison(block + 64 + extent, (size_t)(ref_bytes - extent + 64)), "m %lld: bytes past the extent written",
           (long long)m);
    free(block);
    free(ref);
    free_rowwise(&r);
  }
}

/* Thread-safe: one tensor converted by several threads at once, each into its own buffers, gives each
 * the reference bytes. */
typedef struct {
  const mxfp8_tensor *t;
  int32_t target;
  uint8_t *scales, *values;
  int64_t scale_bytes, value_bytes;
  mxfp8_status status;
} convert_job;

static void *run_convert(void *arg) {
  convert_job *j = arg;
  int64_t sshape[1] = {j->scale_bytes}, vshape[1] = {j->value_bytes};
  DLTensor s = host_bytes(j->scales, 1, sshape), v = host_bytes(j->values, 1, vshape);
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = j->target;
  for (int rep = 0; rep < 20 && j->status == MXFP8_OK; ++rep) j->status = mxfp8_convert(j->t, &o, &v, &s);
  return NULL;
}

static void test_convert_concurrently(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 256, 96, 3);
  enum { kThreads = 4 };
  convert_job jobs[kThreads];
  pthread_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    const int32_t target = i % 2 ? MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED : MXFP8_SCALE_LAYOUT_128X4;
    int64_t bytes = 0;
    assert_int_equal(mxfp8_layout_bytes(target, 0, r.sr, r.sc, &bytes), MXFP8_OK);
    jobs[i] = (convert_job){r.t, target, malloc((size_t)bytes), malloc((size_t)(r.m * r.k)), bytes, r.m * r.k, MXFP8_OK};
    memset(jobs[i].scales, POISON, (size_t)bytes);
    assert_int_equal(pthread_create(&threads[i], NULL, run_convert, &jobs[i]), 0);
  }
  for (int i = 0; i < kThreads; ++i) {
    assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(jobs[i].status, MXFP8_OK);
    int64_t ref_bytes = 0;
    uint8_t *ref = ref_layout(r.s, r.sr, r.sc, jobs[i].target, 0, &ref_bytes);
    assert_int_equal(ref_bytes, jobs[i].scale_bytes);
    EXPECT(memcmp(ref, jobs[i].scales, (size_t)ref_bytes) == 0, "thread %d: scales differ from the reference", i);
    EXPECT(memcmp(r.data->buffer, jobs[i].values, (size_t)(r.m * r.k)) == 0, "thread %d: values differ", i);
    free(ref);
    free(jobs[i].scales);
    free(jobs[i].values);
  }
  free_rowwise(&r);
}

/* mxfp8_grouped_convert into DeepGEMM's strided [E, N, ceil(C/4)] int32 tensor, N % 4 != 0: "only the
 * last expert's last padding rows lie past the view's extent and are left alone"; every other byte is the
 * reference, padding zero. */
static void test_grouped_convert_deepgemm_strided_extent(void **state) {
  (void)state;
  enum { E = 3, N = 37, K = 200, C = 7 };
  const int64_t padded_expert = 128 * 8, aligned = 40, packed = 2;
  int64_t dshape[1] = {E * N * K}, sshape[1] = {E * padded_expert};
  test_tensor *data = test_tensor_new(1, dshape, kDLUInt, 1), *scales = test_tensor_new(1, sshape, kDLUInt, 1);
  uint64_t rng = 31;
  fill_random(data->buffer, data->bytes, &rng);
  uint8_t *s_ref = malloc(E * N * C);
  fill_random_scales(s_ref, E * N * C, &rng);
  for (int e = 0; e < E; ++e)
    for (int y = 0; y < N; ++y)
      for (int x = 0; x < C; ++x) scales->buffer[e * padded_expert + y * 8 + x] = s_ref[(e * N + y) * C + x];
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = E;
  g.cols = K;
  g.uniform_rows = N;
  g.data = &data->managed;
  g.scale_inv = &scales->managed;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  const int64_t expert_bytes = 4 * packed * aligned, total = E * expert_bytes;
  const int64_t extent = 4 * ((E - 1) * packed * aligned + (N - 1) + (packed - 1) * aligned + 1);
  uint8_t *want = malloc((size_t)total), *out = malloc((size_t)total);
  for (int e = 0; e < E; ++e) {
    int64_t b = 0;
    uint8_t *r = ref_layout(s_ref + e * N * C, N, C, MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, 0, &b);
    assert_int_equal(b, expert_bytes);
    memcpy(want + e * expert_bytes, r, (size_t)b);
    free(r);
  }
  memset(out, POISON, (size_t)total);
  int64_t shape[3] = {E, N, packed}, strides[3] = {packed * aligned, 1, aligned};
  DLTensor st = host_bytes(out, 3, shape);
  st.dtype.code = kDLInt;
  st.dtype.bits = 32;
  st.strides = strides;
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
  assert_int_equal(mxfp8_grouped_convert(grouped, &o, NULL, &st), MXFP8_OK);
  EXPECT(memcmp(out, want, (size_t)extent) == 0, "the extent differs from DeepGEMM's packing");
  EXPECT(all_poison(out + extent, (size_t)(total - extent)), "bytes past the view's extent were written");
  EXPECT(total - extent == 4 * (aligned - N), "the test's own extent arithmetic");
  free(want);
  free(out);
  free(s_ref);
  mxfp8_grouped_tensor_release(grouped);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* An int32 DeepGEMM destination of 2^62 elements (2^64 bytes, past int64): refused as the wrong size,
 * with no wrapped arithmetic on the way (UBSan aborts on a signed overflow, in a message too). */
static void test_deepgemm_destination_of_2_62_words(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 48, 23);
  uint8_t dummy[16];
  int64_t shape[1] = {(int64_t)1 << 62};
  DLTensor s = host_bytes(dummy, 1, shape);
  s.dtype.code = kDLInt;
  s.dtype.bits = 32;
  mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
  o.target = MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED;
  const mxfp8_status st = mxfp8_convert(r.t, &o, NULL, &s);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "status %d (%s)", st, mxfp8_last_error());
  assert_last_error_contains("got 4611686018427387904 x 4 (more than int64 counts)");
  free_rowwise(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_convert_writes_each_target_exactly),
      cmocka_unit_test(test_deepgemm_accepts_the_engines_int32_parameter),
      cmocka_unit_test(test_deepgemm_float32_carries_every_exponent),
      cmocka_unit_test(test_grouped_experts_convert_stacked),
      cmocka_unit_test(test_engine_layout_parts_round_trip_to_compact),
      cmocka_unit_test(test_scale_fixup_on_import_and_export),
      cmocka_unit_test(test_prepared_import_into_deepgemm_parameters),
      cmocka_unit_test(test_deepgemm_strided_form_stays_in_its_extent),
      cmocka_unit_test(test_layout_bytes_formulas_and_failures),
      cmocka_unit_test(test_convert_failure_writes_nothing),
      cmocka_unit_test(test_convert_deepgemm_strided_extent),
      cmocka_unit_test(test_convert_concurrently),
      cmocka_unit_test(test_grouped_convert_deepgemm_strided_extent),
      cmocka_unit_test(test_deepgemm_destination_of_2_62_words),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
