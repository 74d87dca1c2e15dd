/* mxfp8_nvfp4_quantize_into (one input, and fused shards) on the GPU, byte for byte against the
 * host path (which bindings/python/tests/test_nvfp4_quantize.py pins to a NumPy reference of TE's rule):
 * every input type, 4over6 mode and E4M3_MAX, amax scope and mode, scale layout and direction, on shapes
 * that take the vector path (K a multiple of 16, aligned) and the element path (partial blocks, an input not
 * 16-byte aligned), inputs with NaN, Inf, subnormals and rounding ties, poisoned outputs (one guard byte
 * past each). Every case skips when no CUDA device is usable. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_gpu_support.h"

#ifdef MXFP8_TEST_WITH_CUDA

static const int kElementBytes[3] = {2, 2, 4};
static const DLDataType kInputType[3] = {{kDLBfloat, 16, 1}, {kDLFloat, 16, 1}, {kDLFloat, 32, 1}};

/* Lines of `length` values: rows of K, or (columnwise, the transpose) columns of M. */
static int64_t scale_count(int64_t lines, int64_t length, int layout) {
  const int64_t c = ref_ceil_div(length, 16);
  return layout == MXFP8_QUANTIZED_SCALES_COMPACT ? lines * c : ref_round_up(lines, 128) * ref_round_up(c, 4);
}

static DLTensor flat(void *data, int64_t *n, DLDataType dtype, DLDeviceType device) {
  DLTensor t = {data, {device, 0}, 1, dtype, n, NULL, 0};
  return t;
}

/* One shard's buffers on both sides, outputs poisoned with one guard byte each. */
typedef struct {
  int64_t m, shape[2], counts[2];
  uint8_t *x, *dx;
  uint8_t *host[2], *device[2], *back[2];
  DLTensor hin, din, ht[2], dt[2];
} shard;

static void make_shard(shard *s, int type, int64_t m, int64_t k, int layout, int columnwise, uint64_t offset,
                       uint64_t seed) {
  memset(s, 0, sizeof *s);
  s->m = m;
  s->shape[0] = m, s->shape[1] = k;
  const size_t in_bytes = (size_t)(m * k) * (size_t)kElementBytes[type];
  s->x = malloc(in_bytes + 1);
  fill_quantize_input(s->x, type, (size_t)(m * k), &seed);
  CUDA_OK(cudaMalloc((void **)&s->dx, in_bytes + offset + 1));
  CUDA_OK(cudaMemcpy(s->dx + offset, s->x, in_bytes, cudaMemcpyHostToDevice));
  const int64_t lines = columnwise ? k : m, length = columnwise ? m : k;
  s->counts[0] = lines * ref_ceil_div(length, 2);
  s->counts[1] = scale_count(lines, length, layout);
  const DLDataType u8 = {kDLUInt, 8, 1};
  for (int i = 0; i < 2; ++i) {
    s->host[i] = malloc((size_t)s->counts[i] + 1);
    s->back[i] = malloc((size_t)s->counts[i] + 1);
    memset(s->host[i], POISON, (size_t)s->counts[i] + 1);
    CUDA_OK(cudaMalloc((void **)&s->device[i], (size_t)s->counts[i] + 1));
    CUDA_OK(cudaMemset(s->device[i], POISON, (size_t)s->counts[i] + 1));
    s->ht[i] = flat(s->host[i], &s->counts[i], u8, kDLCPU);
    s->dt[i] = flat(s->device[i], &s->counts[i], u8, kDLCUDA);
  }
  s->hin = (DLTensor){s->x, {kDLCPU, 0}, 2, kInputType[type], s->shape, NULL, 0};
  s->din = (DLTensor){s->dx, {kDLCUDA, 0}, 2, kInputType[type], s->shape, NULL, offset};
}

static int compare_shard(shard *s, const char *what) {
  static const char *const names[2] = {"values", "scales"};
  for (int i = 0; i < 2; ++i) {
    CUDA_OK(cudaMemcpy(s->back[i], s->device[i], (size_t)s->counts[i] + 1, cudaMemcpyDeviceToHost));
    for (int64_t j = 0; j <= s->counts[i]; ++j)
      if (s->back[i][j] != s->host[i][j]) {
        print_error("%s: %s[%lld]: device 0x%02x, host 0x%02x\n", what, names[i], (long long)j, s->back[i][j], s->host[i][j]);
        return 1;
      }
  }
  return 0;
}

static void free_shard(shard *s) {
  for (int i = 0; i < 2; ++i) {
    free(s->host[i]);
    free(s->back[i]);
    cudaFree(s->device[i]);
  }
  cudaFree(s->dx);
  free(s->x);
}

/* amax buffers: host and device, poisoned, or set to `given` when the mode reads them. */
static int compare_amax(const float *host, const float *device_ptr, int64_t n, const char *what) {
  float *back = malloc(sizeof(float) * (size_t)(n + 1));
  CUDA_OK(cudaMemcpy(back, device_ptr, sizeof(float) * (size_t)(n + 1), cudaMemcpyDeviceToHost));
  const int bad = memcmp(back, host, sizeof(float) * (size_t)(n + 1)) != 0;
  if (bad) print_error("%s: amax differs (device %g, host %g)\n", what, (double)back[0], (double)host[0]);
  free(back);
  return bad;
}

static int compare_one(int type, int64_t m, int64_t k, const mxfp8_nvfp4_quantize_options *o, uint64_t offset,
                       float given, uint64_t seed) {
  shard s;
  const int columnwise = o->direction == MXFP8_DIRECTION_COLUMNWISE;
  make_shard(&s, type, m, k, o->scales_layout, columnwise, offset, seed);
  int64_t amax_n = o->amax_scope == MXFP8_NVFP4_AMAX_PER_ROW ? (columnwise ? k : m) : 1;
  float *ha = malloc(sizeof(float) * (size_t)(amax_n + 1));
  float *da = NULL;
  CUDA_OK(cudaMalloc((void **)&da, sizeof(float) * (size_t)(amax_n + 1)));
  memset(ha, POISON, sizeof(float) * (size_t)(amax_n + 1));
  if (o->amax_mode == MXFP8_NVFP4_AMAX_GIVEN)
    for (int64_t i = 0; i < amax_n; ++i) ha[i] = given * (float)(1 + i % 3);
  CUDA_OK(cudaMemcpy(da, ha, sizeof(float) * (size_t)(amax_n + 1), cudaMemcpyHostToDevice));
  DLTensor hat = flat(ha, &amax_n, (DLDataType){kDLFloat, 32, 1}, kDLCPU);
  DLTensor dat = flat(da, &amax_n, (DLDataType){kDLFloat, 32, 1}, kDLCUDA);
  assert_int_equal(mxfp8_nvfp4_quantize_into((const DLTensor *[]){&s.hin}, 1, o, (DLTensor *[]){&s.ht[0]}, (DLTensor *[]){&s.ht[1]}, &hat), MXFP8_OK);
  const mxfp8_status st = mxfp8_nvfp4_quantize_into((const DLTensor *[]){&s.din}, 1, o, (DLTensor *[]){&s.dt[0]}, (DLTensor *[]){&s.dt[1]}, &dat);
  EXPECT(st == MXFP8_OK, "device quantize: %s", mxfp8_last_error());
  CUDA_OK(cudaDeviceSynchronize());
  char what[200];
  snprintf(what, sizeof what, "type %d (%lld, %lld) offset %llu 4over6 %d e4m3_max %d scope %d mode %d layout %d "
           "direction %d", type, (long long)m, (long long)k, (unsigned long long)offset, o->four_over_six, o->e4m3_max,
           o->amax_scope, o->amax_mode, o->scales_layout, o->direction);
  const int bad = compare_shard(&s, what) || compare_amax(ha, da, amax_n, what);
  free(ha);
  cudaFree(da);
  free_shard(&s);
  return bad;
}

static void test_gpu_nvfp4_quantize_equals_host_for_every_option(void **state) {
  (void)state;
  REQUIRE_GPU();
  const int quick = getenv("MXFP8_TEST_QUICK") != NULL;
  /* (64, 256), (300, 4096): the vector path; the others element by element (partial blocks). M and K
   * even: both directions' stored rows must fill whole bytes. */
  static const int64_t shapes[][2] = {{64, 256}, {70, 100}, {2, 2}, {34, 30}, {6, 18}, {300, 4096}};
  static const int selections[][2] = {{MXFP8_NVFP4_4OVER6_OFF, 448}, {MXFP8_NVFP4_4OVER6_MAE, 448},
                                      {MXFP8_NVFP4_4OVER6_MSE, 448}, {MXFP8_NVFP4_4OVER6_MAE, 256},
                                      {MXFP8_NVFP4_4OVER6_MSE, 256}};
  const float givens[] = {3.0f, 1e-3f, NAN, INFINITY, 0.0f};
  /* MXFP8_TEST_QUICK (compute-sanitizer runs): bfloat16 and float32, two shapes (one per path), three of
   * the five selections, compact and swizzled scales. */
  const int nshapes = quick ? 2 : 6, type_step = quick ? 2 : 1, sel_step = quick ? 2 : 1, layout_step = quick ? 2 : 1;
  int failures = 0, runs = 0;
  for (int type = 0; type < 3; type += type_step)
    for (int sel = 0; sel < 5; sel += sel_step)
      for (int layout = 0; layout < 3; layout += layout_step)
        for (int variant = 0; variant < 8; ++variant) /* amax scope x amax mode x direction */
          for (int sh = 0; sh < nshapes; ++sh) {
            mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
            o.four_over_six = selections[sel][0], o.e4m3_max = selections[sel][1], o.scales_layout = layout;
            o.amax_scope = variant & 1, o.amax_mode = (variant >> 1) & 1, o.direction = variant >> 2;
            if (o.amax_scope == MXFP8_NVFP4_AMAX_PER_ROW && o.direction == MXFP8_DIRECTION_COLUMNWISE)
              continue; /* refused: per-row amax is rowwise only */
            failures += compare_one(type, shapes[sh][0], shapes[sh][1], &o, 0, givens[runs % 5],
                                    (uint64_t)(runs * 7919 + 1));
            ++runs;
          }
  print_message("%d configurations, %d differ\n", runs, failures);
  EXPECT(failures == 0, "%d of %d configurations differ", failures, runs);
}

static void test_gpu_nvfp4_quantize_unaligned_input_and_stream(void **state) {
  (void)state;
  REQUIRE_GPU();
  int failures = 0;
  for (int type = 0; type < 3; ++type) { /* one element in: no 16-byte loads */
    mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
    failures += compare_one(type, 128, 1024, &o, (uint64_t)kElementBytes[type], 0.0f, 17);
    o.scales_layout = MXFP8_QUANTIZED_SCALES_SWIZZLED, o.four_over_six = MXFP8_NVFP4_4OVER6_MAE;
    failures += compare_one(type, 128, 1024, &o, 3 * (uint64_t)kElementBytes[type], 0.0f, 18);
    o.direction = MXFP8_DIRECTION_COLUMNWISE;
    failures += compare_one(type, 100, 260, &o, (uint64_t)kElementBytes[type], 0.0f, 20);
  }
  /* On a non-blocking stream, with a large enough input to take many blocks of the grid. */
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
  o.stream = stream;
  failures += compare_one(0, 2048, 2048 + 32, &o, 0, 0.0f, 19);
  o.direction = MXFP8_DIRECTION_COLUMNWISE;
  failures += compare_one(0, 2048 + 16, 1024, &o, 0, 0.0f, 21);
  o.direction = MXFP8_DIRECTION_ROWWISE, o.amax_scope = MXFP8_NVFP4_AMAX_PER_ROW;
  failures += compare_one(0, 1024, 2048 + 16, &o, 0, 0.0f, 22);
  CUDA_OK(cudaStreamDestroy(stream));
  EXPECT(failures == 0, "%d configurations differ", failures);
}

/* Three shards of different sizes and ranges under one computed amax, on both sides. */
static void test_gpu_nvfp4_fused_equals_host(void **state) {
  (void)state;
  REQUIRE_GPU();
  static const int64_t rows[3] = {64, 6, 130}; /* even: shards are also quantized columnwise */
  int failures = 0;
  for (int type = 0; type < 3; ++type)
    for (int sel = 0; sel < 2; ++sel) {
      mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
      o.four_over_six = sel ? MXFP8_NVFP4_4OVER6_MSE : MXFP8_NVFP4_4OVER6_OFF;
      o.scales_layout = MXFP8_QUANTIZED_SCALES_PADDED;
      o.direction = sel;  /* columnwise with 4over6 */
      shard s[3];
      const DLTensor *hin[3], *din[3];
      DLTensor *hv[3], *hs[3], *dv[3], *ds[3];
      for (int i = 0; i < 3; ++i) {
        make_shard(&s[i], type, rows[i], 96, o.scales_layout, o.direction, 0, (uint64_t)(100 + 10 * type + i));
        hin[i] = &s[i].hin, din[i] = &s[i].din;
        hv[i] = &s[i].ht[0], hs[i] = &s[i].ht[1], dv[i] = &s[i].dt[0], ds[i] = &s[i].dt[1];
      }
      int64_t one = 1;
      float ha[2];
      memset(ha, POISON, sizeof ha);
      float *da = NULL;
      CUDA_OK(cudaMalloc((void **)&da, sizeof ha));
      CUDA_OK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
      DLTensor hat = flat(ha, &one, (DLDataType){kDLFloat, 32, 1}, kDLCPU);
      DLTensor dat = flat(da, &one, (DLDataType){kDLFloat, 32, 1}, kDLCUDA);
      assert_int_equal(mxfp8_nvfp4_quantize_into(hin, 3, &o, hv, hs, &hat), MXFP8_OK);
      EXPECT(mxfp8_nvfp4_quantize_into(din, 3, &o, dv, ds, &dat) == MXFP8_OK, "%s", mxfp8_last_error());
      CUDA_OK(cudaDeviceSynchronize());
      char what[64];
      snprintf(what, sizeof what, "fused type %d 4over6 %d direction %d", type, o.four_over_six, o.direction);
      failures += compare_amax(ha, da, 1, what);
      for (int i = 0; i < 3; ++i) {
        failures += compare_shard(&s[i], what);
        free_shard(&s[i]);
      }
      cudaFree(da);
    }
  EXPECT(failures == 0, "%d comparisons differ", failures);
}

/* The rowwise full-block kernel (TE's default rule, K a multiple of 16, aligned buffers) on inputs large
 * enough that every thread of its persistent grid takes several steps, with blocks per row (333) that
 * make the (row, block) step wrap at varying places; every input type, both amax scopes; the amax
 * computed (Inf here: the input has Inf), given as an ordinary value, as a negative one (the multipliers
 * stay positive, so the signs may come from the input: see quantize_full_block), as a tiny one (S_enc
 * saturates at FLT_MAX) and a tiny negative one (S_enc is -Inf, S_dec -0); compact, padded and swizzled
 * scales. */
static void test_gpu_nvfp4_full_block_kernel_steps_and_amax_edges(void **state) {
  (void)state;
  REQUIRE_GPU();
  const float givens[] = {0.0f, 5.0f, -3.0f, 1e-38f, -1e-38f};
  /* MXFP8_TEST_QUICK (compute-sanitizer runs): bfloat16 and float32; the amax computed and -3. */
  const int quick = getenv("MXFP8_TEST_QUICK") != NULL, type_step = quick ? 2 : 1, given_step = quick ? 2 : 1;
  int failures = 0, runs = 0;
  for (int type = 0; type < 3; type += type_step)
    for (int scope = 0; scope < 2; ++scope)
      for (int g = 0; g < 5; g += given_step) {
        if (quick && g == 4) continue;
        mxfp8_nvfp4_quantize_options o = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
        o.amax_scope = scope;
        o.amax_mode = g == 0 ? MXFP8_NVFP4_AMAX_COMPUTE : MXFP8_NVFP4_AMAX_GIVEN;
        o.scales_layout = runs % 3;
        failures += compare_one(type, 1500, 16 * 333, &o, 0, givens[g], (uint64_t)(runs * 104729 + 7));
        ++runs;
      }
  print_message("%d configurations, %d differ\n", runs, failures);
  EXPECT(failures == 0, "%d of %d configurations differ", failures, runs);
}

#else /* built without CUDA */
static void test_gpu_nvfp4_quantize_equals_host_for_every_option(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_nvfp4_quantize_unaligned_input_and_stream(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_nvfp4_fused_equals_host(void **state) { (void)state; REQUIRE_GPU(); }
static void test_gpu_nvfp4_full_block_kernel_steps_and_amax_edges(void **state) { (void)state; REQUIRE_GPU(); }
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gpu_nvfp4_quantize_equals_host_for_every_option),
      cmocka_unit_test(test_gpu_nvfp4_quantize_unaligned_input_and_stream),
      cmocka_unit_test(test_gpu_nvfp4_fused_equals_host),
      cmocka_unit_test(test_gpu_nvfp4_full_block_kernel_steps_and_amax_edges),
  };
  return cmocka_run_group_tests_name("NVFP4 quantize on the GPU equals the host", tests, NULL, NULL);
}
