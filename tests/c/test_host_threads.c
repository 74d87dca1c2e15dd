/* The host loops give the same bytes however a call is split across threads and whichever instruction set
 * they run with: quantize (bfloat16, float16 and float32 inputs; E4M3 and E5M2; RCEIL and FLOOR; rowwise,
 * columnwise and both; 1x32 and 32x32 blocks; compact, padded and swizzled scales), dequantize (both
 * directions, compact and padded scales, float32 and bfloat16 output) and unswizzle (contiguous and
 * transposed destinations), on shapes with M and K not multiples of 32 and inputs full of NaN, Inf and
 * subnormals. The reference is one thread with the baseline (SSE2-width) build; the others are every core
 * with the best instruction set, one thread with the best, and every core with AVX2.
 * MXFP8_HOST_MIN_BYTES_PER_THREAD=0 makes even these small calls split (one thread per core, at most one
 * per row or 32-row block). Run under ThreadSanitizer by scripts/test.sh. (That the baseline build equals
 * the scalar definitions is test_host_numerics; that those equal an independent reference is
 * bindings/python/tests/test_quantize.py, and the GPU test_gpu_quantize.c.) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_layouts_support.h"
#include "tensor_fixtures.h"
#include "test_support.h"
#include "trtllm_reference.h"

typedef struct {
  const char *threads;   /* MXFP8_HOST_THREADS, NULL: unset */
  const char *min_bytes; /* MXFP8_HOST_MIN_BYTES_PER_THREAD */
  const char *isa;       /* MXFP8_HOST_ISA */
  const char *name;
} setting;

static const setting kSettings[] = {
    {"1", NULL, "baseline", "1 thread, baseline"}, /* the reference */
    {NULL, "0", NULL, "all cores, best instruction set"},
    {"1", NULL, NULL, "1 thread, best instruction set"},
    {NULL, "0", "avx2", "all cores, AVX2"},
};
enum { SETTINGS = sizeof kSettings / sizeof kSettings[0] };

static void set_or_unset(const char *name, const char *value) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
}

static void apply(const setting *s) {
  set_or_unset("MXFP8_HOST_THREADS", s->threads);
  set_or_unset("MXFP8_HOST_MIN_BYTES_PER_THREAD", s->min_bytes);
  set_or_unset("MXFP8_HOST_ISA", s->isa);
}

static int setup(void **state) {
  (void)state;
  cpu_set_t set;
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  if (cores < 2) print_message("only %d core: the threaded settings run on one thread here\n", cores);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  apply(&(setting){NULL, NULL, NULL, NULL});
  return 0;
}

/* Odd shapes: M and K around multiples of 32, a 3-D one, a single element. */
typedef struct {
  int ndim;
  int64_t shape[3];
} test_shape;

static const test_shape kShapes[] = {
    {2, {1, 1, 0}},   {2, {33, 31, 0}},  {2, {31, 33, 0}},  {2, {97, 70, 0}},
    {2, {65, 161, 0}}, {3, {3, 37, 45}}, {2, {130, 257, 0}}, {2, {64, 96, 0}},
};
enum { SHAPES = sizeof kShapes / sizeof kShapes[0] };

static int64_t rows_of(const test_shape *s) { return s->ndim == 3 ? s->shape[0] * s->shape[1] : s->shape[0]; }
static int64_t cols_of(const test_shape *s) { return s->shape[s->ndim - 1]; }

static DLTensor flat(void *data, int64_t *count, uint8_t code, uint8_t bits) {
  DLTensor t = {data, {kDLCPU, 0}, 1, {code, bits, 1}, count, NULL, 0};
  return t;
}

/* Quantizer input: the test suite's usual mix (a few binades per block, ties, zero blocks) with every
 * fifth element replaced by a random bit pattern (NaN, Inf, subnormals, huge values). */
static void *quantizer_input(int type, int64_t n, uint64_t *rng) {
  const size_t element = type == 2 ? 4 : 2;
  void *x = malloc((size_t)n * element + 1);
  fill_quantize_input(x, type, (size_t)n, rng);
  for (int64_t i = 4; i < n; i += 5) {
    const uint64_t r = rng_next(rng);
    if (type == 2) ((uint32_t *)x)[i] = (uint32_t)r;
    else ((uint16_t *)x)[i] = (uint16_t)r;
  }
  return x;
}

/* The element count of one direction's scale buffer. */
static int64_t scale_count(int64_t M, int64_t K, int columnwise, const mxfp8_quantize_options *o) {
  const int64_t R = columnwise ? ref_ceil_div(M, 32) : M, C = columnwise ? K : ref_ceil_div(K, 32);
  if (o->scales_layout == MXFP8_QUANTIZED_SCALES_COMPACT)
    return o->block == MXFP8_BLOCK_32X32 ? ref_ceil_div(M, 32) * ref_ceil_div(K, 32) : R * C;
  return columnwise ? ref_round_up(R, 4) * ref_round_up(C, 128) : ref_round_up(R, 128) * ref_round_up(C, 4);
}

/* Every output of one quantize, poisoned first, in one buffer: rowwise values, rowwise scales, columnwise
 * values, columnwise scales (the parts not asked for stay poisoned). */
static uint8_t *quantize_outputs(const void *x, int type, const test_shape *s, const mxfp8_quantize_options *o,
                                 int directions, size_t *bytes) {
  const int64_t M = rows_of(s), K = cols_of(s), n = M * K;
  int64_t counts[4] = {n, scale_count(M, K, 0, o), n, scale_count(M, K, 1, o)};
  *bytes = (size_t)(counts[0] + counts[1] + counts[2] + counts[3]);
  uint8_t *out = malloc(*bytes);
  memset(out, POISON, *bytes);
  DLTensor parts[4];
  uint8_t *p = out;
  for (int i = 0; i < 4; ++i) {
    parts[i] = flat(p, &counts[i], kDLUInt, 8);
    p += counts[i];
  }
  int64_t shape[3];
  memcpy(shape, s->shape, sizeof shape);
  DLTensor in = {(void *)x, {kDLCPU, 0}, s->ndim, {(uint8_t)(type == 0 ? kDLBfloat : kDLFloat), (uint8_t)(type == 2 ? 32 : 16), 1},
                 shape, NULL, 0};
  const int row = directions & 1, col = directions & 2;
  const mxfp8_status status = mxfp8_quantize_into(&in, o, row ? &parts[0] : NULL, row ? &parts[1] : NULL,
                                                  col ? &parts[2] : NULL, col ? &parts[3] : NULL);
  if (status != MXFP8_OK) fail_msg("mxfp8_quantize_into: %s", mxfp8_last_error());
  return out;
}

static int first_difference(const uint8_t *a, const uint8_t *b, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return (int)i;
  return -1;
}

static void test_quantize_same_bytes_threaded_and_on_every_instruction_set(void **state) {
  (void)state;
  uint64_t rng = 21;
  int compared = 0;
  for (int si = 0; si < SHAPES; ++si)
    for (int type = 0; type < 3; ++type) {
      const test_shape *s = &kShapes[si];
      void *x = quantizer_input(type, rows_of(s) * cols_of(s), &rng);
      for (int config = 0; config < 72; ++config) {
        mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
        const int directions = 1 + config % 3;
        o.block = (config / 3) % 2 ? MXFP8_BLOCK_32X32 : MXFP8_BLOCK_1X32;
        o.format = (config / 6) % 2 ? MXFP8_FORMAT_E5M2 : MXFP8_FORMAT_E4M3;
        o.scale_rounding = (config / 12) % 2 ? MXFP8_SCALE_ROUNDING_FLOOR : MXFP8_SCALE_ROUNDING_RCEIL;
        o.scales_layout = (mxfp8_quantized_scales)((config / 24) % 3);
        size_t bytes = 0, other_bytes = 0;
        apply(&kSettings[0]);
        uint8_t *reference = quantize_outputs(x, type, s, &o, directions, &bytes);
        for (int k = 1; k < SETTINGS; ++k) {
          apply(&kSettings[k]);
          uint8_t *got = quantize_outputs(x, type, s, &o, directions, &other_bytes);
          const int at = first_difference(reference, got, bytes);
          if (at >= 0)
            fail_msg("quantize shape #%d type %d config %d, %s: byte %d is 0x%02x, with %s 0x%02x", si, type, config,
                     kSettings[k].name, at, got[at], kSettings[0].name, reference[at]);
          free(got);
          ++compared;
        }
        free(reference);
      }
      free(x);
    }
  print_message("quantize: %d outputs equal to the 1-thread baseline build\n", compared);
}

/* A borrowed (NULL deleter) managed tensor over `data`. */
static DLManagedTensorVersioned borrowed(void *data, int ndim, int64_t *shape) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  DLTensor t = {data, {kDLCPU, 0}, ndim, {kDLUInt, 8, 1}, shape, NULL, 0};
  m.dl_tensor = t;
  return m;
}

static void test_dequantize_same_bytes_threaded_and_on_every_instruction_set(void **state) {
  (void)state;
  uint64_t rng = 2121;
  int compared = 0;
  for (int si = 0; si < SHAPES; ++si)
    for (int padded = 0; padded < 2; ++padded)
      for (int e5m2 = 0; e5m2 < 2; ++e5m2) {
        const test_shape *s = &kShapes[si];
        const int64_t M = rows_of(s), K = cols_of(s), n = M * K, pad = padded ? 3 : 0;
        /* Every code and every scale byte (0 and 255 included), row-major scales, padding columns poisoned. */
        int64_t values_shape[3], row_scales_shape[2] = {M, ref_ceil_div(K, 32) + pad},
                                 col_scales_shape[2] = {ref_ceil_div(M, 32), K + pad};
        memcpy(values_shape, s->shape, sizeof values_shape);
        uint8_t *row_values = malloc((size_t)n), *col_values = malloc((size_t)n);
        uint8_t *row_scales = malloc((size_t)(row_scales_shape[0] * row_scales_shape[1]));
        uint8_t *col_scales = malloc((size_t)(col_scales_shape[0] * col_scales_shape[1]));
        fill_random(row_values, (size_t)n, &rng);
        fill_random(col_values, (size_t)n, &rng);
        for (int64_t i = 0; i < row_scales_shape[0] * row_scales_shape[1]; ++i) row_scales[i] = (uint8_t)rng_next(&rng);
        for (int64_t i = 0; i < col_scales_shape[0] * col_scales_shape[1]; ++i) col_scales[i] = (uint8_t)rng_next(&rng);
        DLManagedTensorVersioned parts[4] = {borrowed(row_values, s->ndim, values_shape),
                                             borrowed(row_scales, 2, row_scales_shape),
                                             borrowed(col_values, s->ndim, values_shape),
                                             borrowed(col_scales, 2, col_scales_shape)};
        mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
        desc.format = e5m2 ? MXFP8_FORMAT_E5M2 : MXFP8_FORMAT_E4M3;
        desc.rowwise_data = &parts[0], desc.rowwise_scale_inv = &parts[1];
        desc.columnwise_data = &parts[2], desc.columnwise_scale_inv = &parts[3];
        mxfp8_tensor *t = NULL;
        if (mxfp8_tensor_create(&desc, &t) != MXFP8_OK) fail_msg("mxfp8_tensor_create: %s", mxfp8_last_error());
        for (int direction = 0; direction < 2; ++direction)
          for (int bf16 = 0; bf16 < 2; ++bf16) {
            mxfp8_dequantize_options o = MXFP8_DEQUANTIZE_OPTIONS_INIT;
            o.direction = direction;
            const size_t bytes = (size_t)n * (bf16 ? 2 : 4);
            uint8_t *out[SETTINGS];
            int64_t count = n;
            for (int k = 0; k < SETTINGS; ++k) {
              out[k] = malloc(bytes);
              memset(out[k], POISON, bytes);
              DLTensor o_t = flat(out[k], &count, bf16 ? kDLBfloat : kDLFloat, bf16 ? 16 : 32);
              apply(&kSettings[k]);
              if (mxfp8_dequantize(t, &o, &o_t) != MXFP8_OK) fail_msg("mxfp8_dequantize: %s", mxfp8_last_error());
            }
            for (int k = 1; k < SETTINGS; ++k) {
              const int at = first_difference(out[0], out[k], bytes);
              if (at >= 0)
                fail_msg("dequantize shape #%d padded %d e5m2 %d direction %d bf16 %d, %s: byte %d differs", si, padded,
                         e5m2, direction, bf16, kSettings[k].name, at);
              ++compared;
            }
            for (int k = 0; k < SETTINGS; ++k) free(out[k]);
          }
        mxfp8_tensor_release(t);
        free(row_values), free(col_values), free(row_scales), free(col_scales);
      }
  print_message("dequantize: %d outputs equal to the 1-thread baseline build\n", compared);
}

static void test_unswizzle_same_bytes_threaded(void **state) {
  (void)state;
  static const int64_t kMatrices[][2] = {{1, 1}, {33, 5}, {130, 7}, {257, 66}, {300, 4}};
  uint64_t rng = 212121;
  int compared = 0;
  for (size_t m = 0; m < sizeof kMatrices / sizeof kMatrices[0]; ++m)
    for (int transposed = 0; transposed < 2; ++transposed) {
      const int64_t R = kMatrices[m][0], C = kMatrices[m][1];
      int64_t swizzled_count = ref_round_up(R, 128) * ref_round_up(C, 4);
      uint8_t *swizzled = malloc((size_t)swizzled_count);
      fill_random(swizzled, (size_t)swizzled_count, &rng);
      DLTensor src = flat(swizzled, &swizzled_count, kDLUInt, 8);
      /* The R x C destination: contiguous, or a (C, R) buffer written through strides (1, R). */
      int64_t shape[2] = {R, C}, strides[2] = {transposed ? 1 : C, transposed ? R : 1};
      uint8_t *out[SETTINGS];
      for (int k = 0; k < SETTINGS; ++k) {
        out[k] = malloc((size_t)(R * C));
        memset(out[k], POISON, (size_t)(R * C));
        DLTensor dst = {out[k], {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, shape, strides, 0};
        apply(&kSettings[k]);
        if (mxfp8_unswizzle_scales(&src, &dst, NULL) != MXFP8_OK) fail_msg("mxfp8_unswizzle_scales: %s", mxfp8_last_error());
      }
      for (int64_t r = 0; r < R; ++r) /* and the reference is right: the layout's formula */
        for (int64_t c = 0; c < C; ++c)
          if (out[0][r * strides[0] + c * strides[1]] != swizzled[ref_swizzled_index(r, c, ref_round_up(C, 4))])
            fail_msg("unswizzle (%lld, %lld): scale (%lld, %lld) wrong", (long long)R, (long long)C, (long long)r, (long long)c);
      for (int k = 1; k < SETTINGS; ++k) {
        if (first_difference(out[0], out[k], (size_t)(R * C)) >= 0)
          fail_msg("unswizzle (%lld, %lld) transposed %d, %s: differs", (long long)R, (long long)C, transposed, kSettings[k].name);
        ++compared;
      }
      for (int k = 0; k < SETTINGS; ++k) free(out[k]);
      free(swizzled);
    }
  print_message("unswizzle: %d outputs equal to the 1-thread build\n", compared);
}

/* ---------------------------------------------------------------------------------------------------
 * "The bytes written never depend on the split": the host loops of the engine layouts (the TRT-LLM row
 * permutation) and of the NVFP4 quantize, with every call split (MXFP8_HOST_MIN_BYTES_PER_THREAD=0) and with
 * none (MXFP8_HOST_THREADS=1), against the references.
 * --------------------------------------------------------------------------------------------------- */

static void set_split(int split) {
  unsetenv("MXFP8_HOST_THREADS");
  unsetenv("MXFP8_HOST_MIN_BYTES_PER_THREAD");
  if (split) setenv("MXFP8_HOST_MIN_BYTES_PER_THREAD", "0", 1);
  else setenv("MXFP8_HOST_THREADS", "1", 1);
}

static void test_engine_layouts_and_nvfp4_independent_of_the_split(void **state) {
  (void)state;
  enum { E = 3, N = 256, K = 200, C = 7 };
  const int64_t padded_expert = N * 8; /* roundup(N, 128) x roundup(7, 4) */
  int64_t dshape[1] = {E * N * K}, sshape[1] = {E * padded_expert};
  test_tensor *data = test_tensor_new(1, dshape, kDLUInt, 1), *scales = test_tensor_new(1, sshape, kDLUInt, 1);
  uint64_t rng = 21;
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
  uint8_t *values = malloc(E * N * K), *want_values = malloc(E * N * K);
  for (int split = 0; split < 2; ++split) {
    set_split(split);
    for (int32_t target = 0; target <= TEST_LAST_LAYOUT; ++target) {
      int64_t expert_bytes = 0;
      assert_int_equal(mxfp8_layout_bytes(target, 0, N, C, &expert_bytes), MXFP8_OK);
      uint8_t *out = malloc((size_t)(E * expert_bytes)), *want = malloc((size_t)(E * expert_bytes));
      for (int e = 0; e < E; ++e) {
        const uint8_t *se = s_ref + e * N * C, *ve = data->buffer + e * N * K;
        if (target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED || target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED) {
          ref_trtllm(ve, se, N, K, C, target == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED, want_values + e * N * K,
                     want + e * expert_bytes);
        } else {
          int64_t b = 0;
          uint8_t *r = ref_layout(se, N, C, target, 0, &b);
          memcpy(want + e * expert_bytes, r, (size_t)b);
          memcpy(want_values + e * N * K, ve, N * K);
          free(r);
        }
      }
      memset(out, POISON, (size_t)(E * expert_bytes));
      memset(values, POISON, E * N * K);
      int64_t os[1] = {E * expert_bytes}, vs[1] = {E * N * K};
      DLTensor ot = host_bytes(out, 1, os), vt = host_bytes(values, 1, vs);
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      o.target = target;
      assert_int_equal(mxfp8_grouped_convert(grouped, &o, &vt, &ot), MXFP8_OK);
      EXPECT(memcmp(out, want, (size_t)(E * expert_bytes)) == 0, "split %d, target %d: scales differ", split, target);
      EXPECT(memcmp(values, want_values, E * N * K) == 0, "split %d, target %d: values differ", split, target);
      free(out);
      free(want);
    }
  }
  free(values);
  free(want_values);
  free(s_ref);
  mxfp8_grouped_tensor_release(grouped);
  test_tensor_free(data);
  test_tensor_free(scales);

  /* NVFP4: the same bytes whichever way the rows are split, both directions, every scale layout. */
  enum { M = 300, KQ = 96 };
  float *in = malloc(M * KQ * sizeof(float));
  fill_quantize_input(in, 2, M * KQ, &rng);
  int64_t ishape[2] = {M, KQ};
  DLTensor it = {in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ishape, NULL, 0};
  for (int direction = 0; direction < 2; ++direction)
    for (int layout = 0; layout < 3; ++layout) {
      const int64_t lines = direction ? KQ : M, length = direction ? M : KQ, sc = ref_ceil_div(length, 16);
      const int64_t sbytes = layout ? ref_round_up(lines, 128) * ref_round_up(sc, 4) : lines * sc;
      uint8_t *v[2], *sb[2];
      float amax[2];
      for (int split = 0; split < 2; ++split) {
        set_split(split);
        v[split] = malloc((size_t)(lines * length / 2));
        sb[split] = malloc((size_t)sbytes);
        int64_t vn[1] = {lines * length / 2}, sn[1] = {sbytes}, one[1] = {1};
        DLTensor vt = host_bytes(v[split], 1, vn), st = host_bytes(sb[split], 1, sn);
        DLTensor at = {&amax[split], {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
        mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
        o.direction = direction;
        o.scales_layout = layout;
        o.four_over_six = (direction + layout) % 3;
        if (o.four_over_six) o.e4m3_max = 256;
        assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&it}, 1, &o, (DLTensor *[]){&vt}, (DLTensor *[]){&st}, &at), MXFP8_OK);
      }
      EXPECT(memcmp(v[0], v[1], (size_t)(lines * length / 2)) == 0, "direction %d layout %d: values depend on the split",
             direction, layout);
      EXPECT(memcmp(sb[0], sb[1], (size_t)sbytes) == 0, "direction %d layout %d: scales depend on the split", direction,
             layout);
      EXPECT(memcmp(&amax[0], &amax[1], 4) == 0, "direction %d layout %d: amax depends on the split", direction, layout);
      for (int i = 0; i < 2; ++i) free(v[i]), free(sb[i]);
    }
  free(in);
  unsetenv("MXFP8_HOST_THREADS");
  unsetenv("MXFP8_HOST_MIN_BYTES_PER_THREAD");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_same_bytes_threaded_and_on_every_instruction_set),
      cmocka_unit_test(test_dequantize_same_bytes_threaded_and_on_every_instruction_set),
      cmocka_unit_test(test_unswizzle_same_bytes_threaded),
      cmocka_unit_test(test_engine_layouts_and_nvfp4_independent_of_the_split),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
