/* The hostile caller against the newest calls (convert, layout_bytes, shards, grouped experts, NVFP4):
 * each test takes one sentence of the header's contract and would fail if the sentence were false.
 * Outputs are poisoned before each call, so a write on failure (or outside what a call may write) shows.
 * The plain refusals (one argument wrong, a status and a message) are rows of test_bad_input.c. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "test_support.h"

/* ---------------------------------------------------------------------------------------------------
 * Fixtures
 * --------------------------------------------------------------------------------------------------- */

/* A rowwise (m, k) E4M3 tensor with TE-padded row-major scales (roundup(m, 128), roundup(ceil(k/32), 4)),
 * its compact scales S kept for reference. */
typedef struct {
  int64_t m, k, sr, sc;
  test_tensor *data, *scales;
  uint8_t *s;
  mxfp8_tensor *t;
} rowwise_tensor;

static void make_rowwise(rowwise_tensor *r, int64_t m, int64_t k, uint64_t seed) {
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

static void free_rowwise(rowwise_tensor *r) {
  mxfp8_tensor_release(r->t);
  assert_int_equal(r->data->deleter_calls, 1);
  assert_int_equal(r->scales->deleter_calls, 1);
  test_tensor_free(r->data);
  test_tensor_free(r->scales);
  free(r->s);
}

static DLTensor host_bytes(void *data, int32_t ndim, int64_t *shape) {
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

static int all_poison(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != POISON) return 0;
  return 1;
}

/* ---------------------------------------------------------------------------------------------------
 * Conventions: "Every size, offset and stride is checked arithmetic: one that does not fit in int64 is
 * MXFP8_ERROR_INVALID_ARGUMENT, never a wrapped number." A destination's byte_offset past int64 (which
 * data + byte_offset would wrap to memory before the buffer) is refused, and nothing is written.
 * --------------------------------------------------------------------------------------------------- */

enum { kGuard = 256 };

static void test_destination_byte_offset_past_int64_is_refused(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 48, 1);
  const int64_t n = r.sr * r.sc;
  /* The destination sits kGuard bytes into a poisoned block; a byte_offset of -kGuard (as uint64) would
   * point data + byte_offset at the block's first byte. */
  uint8_t *block = malloc((size_t)(kGuard + n));
  memset(block, POISON, (size_t)(kGuard + n));
  int64_t shape[1] = {n};
  DLTensor dst = host_bytes(block + kGuard, 1, shape);
  dst.byte_offset = (uint64_t)0 - (uint64_t)kGuard;
  mxfp8_status st = mxfp8_convert(r.t, NULL, NULL, &dst);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_convert with byte_offset 2^64 - %d returned %d (%s)", kGuard, st,
         mxfp8_last_error());
  EXPECT(all_poison(block, (size_t)(kGuard + n)), "mxfp8_convert wrote through a wrapped byte_offset");

  DLTensor *dsts[1] = {&dst};
  const mxfp8_tensor *ts[1] = {r.t};
  st = mxfp8_export_scales_batched(ts, dsts, 1, NULL);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_export_scales_batched returned %d (%s)", st, mxfp8_last_error());
  EXPECT(all_poison(block, (size_t)(kGuard + n)), "mxfp8_export_scales_batched wrote through a wrapped byte_offset");

  /* The low-level pair: the (100, 2) compact destination. */
  int64_t cshape[2] = {100, 2}, sshape[1] = {512};
  uint8_t swz[512];
  memset(swz, 7, sizeof swz);
  DLTensor swizzled = host_bytes(swz, 1, sshape);
  DLTensor compact = host_bytes(block + kGuard, 2, cshape);
  compact.byte_offset = (uint64_t)0 - (uint64_t)kGuard;
  st = mxfp8_unswizzle_scales(&swizzled, &compact, NULL);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_unswizzle_scales returned %d (%s)", st, mxfp8_last_error());
  EXPECT(all_poison(block, (size_t)(kGuard + n)), "mxfp8_unswizzle_scales wrote through a wrapped byte_offset");

  free(block);
  free_rowwise(&r);
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
      assert_int_equal(mxfp8_layout_bytes(MXFP8_LAYOUT_COMPACT, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == R * C, "compact %lld x %lld: %lld", (long long)R, (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_LAYOUT_COMPACT, 1, R, C, &got), MXFP8_OK);
      EXPECT(got == R * C, "columnwise compact %lld x %lld: %lld", (long long)R, (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_LAYOUT_CUTLASS_128X4, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == ref_round_up(R, 128) * ref_round_up(C, 4), "128x4 %lld x %lld: %lld", (long long)R, (long long)C,
             (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_LAYOUT_CUTLASS_128X4, 1, R, C, &got), MXFP8_OK);
      EXPECT(got == ref_round_up(C, 128) * ref_round_up(R, 4), "columnwise 128x4 %lld x %lld: %lld", (long long)R,
             (long long)C, (long long)got);
      assert_int_equal(mxfp8_layout_bytes(MXFP8_LAYOUT_DEEPGEMM_PACKED, 0, R, C, &got), MXFP8_OK);
      EXPECT(got == 4 * ref_ceil_div(C, 4) * ref_round_up(R, 4), "DeepGEMM %lld x %lld: %lld", (long long)R,
             (long long)C, (long long)got);
      for (int32_t l = MXFP8_LAYOUT_TRTLLM_SHUFFLED; l <= MXFP8_LAYOUT_TRTLLM_SHUFFLED_GATED; l += 2) {
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
  /* Failures: unknown layouts and directions, negative sizes, sizes whose byte count overflows int64. */
  const struct {
    int32_t layout, direction;
    int64_t rows, cols;
  } bad[] = {
      {-1, 0, 1, 1},
      {5, 0, 1, 1},
      {MXFP8_LAYOUT_COMPACT, 2, 1, 1},
      {MXFP8_LAYOUT_COMPACT, -1, 1, 1},
      {MXFP8_LAYOUT_COMPACT, 0, INT64_MIN, 1},
      {MXFP8_LAYOUT_COMPACT, 0, 1, -1},
      {MXFP8_LAYOUT_COMPACT, 0, INT64_MAX, 2},
      {MXFP8_LAYOUT_CUTLASS_128X4, 0, INT64_MAX, 1},
      {MXFP8_LAYOUT_CUTLASS_128X4, 0, 1, INT64_MAX},
      {MXFP8_LAYOUT_CUTLASS_128X4, 1, INT64_MAX - 3, 1},
      {MXFP8_LAYOUT_DEEPGEMM_PACKED, 0, INT64_MAX, 1},
      {MXFP8_LAYOUT_DEEPGEMM_PACKED, 0, 1, INT64_MAX},
      {MXFP8_LAYOUT_DEEPGEMM_PACKED, 0, (int64_t)1 << 40, (int64_t)1 << 40},
      {MXFP8_LAYOUT_DEEPGEMM_PACKED, 1, 4, 4},
      {MXFP8_LAYOUT_TRTLLM_SHUFFLED, 1, 128, 4},
      {MXFP8_LAYOUT_TRTLLM_SHUFFLED_GATED, 1, 128, 4},
      {MXFP8_LAYOUT_TRTLLM_SHUFFLED, 0, (int64_t)1 << 62, 8},
      {MXFP8_LAYOUT_TRTLLM_SHUFFLED, 0, 128, INT64_MAX},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    int64_t got = -7;
    const mxfp8_status st = mxfp8_layout_bytes(bad[i].layout, bad[i].direction, bad[i].rows, bad[i].cols, &got);
    EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "case %zu returned %d", i, st);
    EXPECT(got == -7, "case %zu wrote *bytes on failure", i);
    EXPECT(strlen(mxfp8_last_error()) > 0, "case %zu has no message", i);
  }
  assert_int_equal(mxfp8_layout_bytes(MXFP8_LAYOUT_COMPACT, 0, 1, 1, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
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
  const int64_t sbytes = 128 * 4; /* TRT-LLM: R * roundup(C, 4) */
  uint8_t *scales = malloc((size_t)sbytes), *values = malloc((size_t)(128 * 64 + 1));
  int64_t sshape[1] = {sbytes}, vshape[1] = {128 * 64 - 1}, good_v[1] = {128 * 64};
  DLTensor s = host_bytes(scales, 1, sshape), v = host_bytes(values, 1, vshape);
  for (int32_t target = 0; target <= MXFP8_LAYOUT_TRTLLM_SHUFFLED_GATED; ++target) {
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
    if (need <= 128 * 64) {
      assert_int_equal(mxfp8_convert(r.t, &o, &v_over_s, &s), MXFP8_ERROR_INVALID_ARGUMENT);
      EXPECT(all_poison(scales, (size_t)need), "target %d: written with both outputs in one buffer", target);
    }
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
    uint8_t *ref = ref_layout(r.s, r.sr, r.sc, MXFP8_LAYOUT_DEEPGEMM_PACKED, 0, &ref_bytes);
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
    o.target = MXFP8_LAYOUT_DEEPGEMM_PACKED;
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
    const int32_t target = i % 2 ? MXFP8_LAYOUT_DEEPGEMM_PACKED : MXFP8_LAYOUT_CUTLASS_128X4;
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destination_byte_offset_past_int64_is_refused),
      cmocka_unit_test(test_layout_bytes_formulas_and_failures),
      cmocka_unit_test(test_convert_failure_writes_nothing),
      cmocka_unit_test(test_convert_deepgemm_strided_extent),
      cmocka_unit_test(test_convert_concurrently),
  };
  return cmocka_run_group_tests_name("hostile callers of the newest calls", tests, NULL, NULL);
}
