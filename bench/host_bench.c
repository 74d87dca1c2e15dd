/* Times the host (CPU) path on a (4096, 8192) weight, through the public API, against a memcpy of the
 * same bytes timed in the same run:
 *
 *   quantize:   BF16 -> MXFP8 E4M3 rowwise, compact scales (mxfp8_quantize_into, caller buffers);
 *   dequantize: those values and scales -> BF16 (mxfp8_dequantize);
 *   unswizzle:  its (4096, 256) scales, swizzled -> compact (mxfp8_unswizzle_scales).
 *
 * and, for the host cost of one immediate grouped MoE export (issue 36; --grouped alone runs only these):
 *
 *   grouped:    mxfp8_grouped_export of every expert of 256 experts with GEMM-swizzled, padded scales, the
 *               scales alone (a copy, unswizzled) as bench_scales.cu's MoE case calls it, once with
 *               experts of (128, 256) and once with tiny experts of (1, 32) (mostly the call's own host
 *               cost); and once choosing all 256 tiny experts in reverse order, values and scales (both
 *               copies). Each call (its output released) timed alone, MXFP8_HOST_THREADS=1, the median
 *               and minimum in microseconds over --grouped-calls calls. Then the checks alone: every
 *               expert of (128, 256) with row-major compact scales, values and scales (both views);
 *               and the immediate call as a loader holding no handle makes it: mxfp8_grouped_tensor_create,
 *               the export, the release, for the tiny swizzled experts and the (128, 256) views.
 *
 * and, for the host cost of an immediate batched MoE export (issue 36; --batched alone runs only these):
 *
 *   batched:    mxfp8_export_scales_batched of 256 expert tensors (handles made once by mxfp8_grouped_expert
 *               from two grouped tensors of 128 experts, GEMM-swizzled padded scales, as bench_scales.cu's
 *               `moe` case makes them) into 256 caller DLTensors, byte offsets into one host bucket in
 *               order; once with experts of (128, 64) (each group's jobs merge into one: the call's per-
 *               expert checks, then one unswizzle of 64 KiB), once with tiny experts of (1, 32) (one
 *               1-scale job an expert, unmerged), and once with experts of (128, 64) whose scales are
 *               row-major and compact (the same checks an expert; each group's jobs merge into one copy
 *               of 32 KiB, so the figure is mostly the per-expert checks and jobs: the swizzled case's host
 *               unswizzle of 64 KiB takes ~100 us on this box, which on a GPU is a kernel's work). Each
 *               call timed alone, MXFP8_HOST_THREADS=1, median, minimum and p90 in microseconds over
 *               --grouped-calls calls.
 *
 * Each once with MXFP8_HOST_THREADS=1 and once with the variable unset (every core the process may run
 * on). The copy moves the same number of bytes counting read + write, as bench_scales.cu does: a memcpy
 * of (bytes read + bytes written) / 2. Every figure is the median (and the minimum) of --reps timed runs
 * after one warm-up.
 * The weight (64 MiB of input) is larger than this machine's last-level cache, so the runs are mostly
 * cold; nothing else is done to flush caches.
 *
 *   host_bench [--reps N] [--grouped] [--batched] [--grouped-calls N] [--out FILE] [--note TEXT]
 *   (JSON on stdout, and in FILE when given) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mxfp8/mxfp8.h>

enum { kRows = 4096, kCols = 8192, kScaleCols = kCols / 32, kMaxReps = 99 };

static double clock_ms(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }

static int compare_doubles(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void check(mxfp8_status s, const char *what) {
  if (s == MXFP8_OK) return;
  fprintf(stderr, "host_bench: %s failed: %s\n", what, mxfp8_last_error());
  exit(1);
}

static void *allocate(size_t bytes) {
  void *p = malloc(bytes);
  if (!p) {
    fprintf(stderr, "host_bench: out of memory (%zu bytes)\n", bytes);
    exit(1);
  }
  memset(p, 0x5A, bytes); /* touch every page before timing */
  return p;
}

typedef void (*operation)(void *ctx);

typedef struct {
  double median, min, cpu_median;
} timing;

static timing time_ms(operation op, void *ctx, int reps) {
  double ms[kMaxReps], cpu[kMaxReps];
  op(ctx); /* warm-up */
  for (int i = 0; i < reps; ++i) {
    const double t0 = now_ms(), c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    op(ctx);
    ms[i] = now_ms() - t0;
    cpu[i] = clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
  }
  qsort(ms, (size_t)reps, sizeof ms[0], compare_doubles);
  qsort(cpu, (size_t)reps, sizeof cpu[0], compare_doubles);
  return (timing){ms[reps / 2], ms[0], cpu[reps / 2]};
}

/* The buffers of all three operations, built once. */
typedef struct {
  DLTensor input, values, scales, swizzled, compact, output;
  mxfp8_tensor *tensor;
  void *copy_src, *copy_dst;
  size_t copy_bytes;
} bench;

static void run_quantize(void *ctx) {
  bench *b = (bench *)ctx;
  check(mxfp8_quantize_into(&b->input, NULL, &b->values, &b->scales, NULL, NULL), "mxfp8_quantize_into");
}

static void run_dequantize(void *ctx) {
  bench *b = (bench *)ctx;
  check(mxfp8_dequantize(b->tensor, NULL, &b->output), "mxfp8_dequantize");
}

static void run_unswizzle(void *ctx) {
  bench *b = (bench *)ctx;
  check(mxfp8_unswizzle_scales(&b->swizzled, &b->compact, NULL), "mxfp8_unswizzle_scales");
}

static void run_copy(void *ctx) {
  bench *b = (bench *)ctx;
  memcpy(b->copy_dst, b->copy_src, b->copy_bytes);
}

/* One operation's line of the JSON: 1 thread, all threads, and the copy of its bytes (medians; the
 * minimums too, and the process CPU time: on a shared machine that of the 1-thread runs is the better
 * estimate of what the code itself costs, and that of the all-thread runs, summed over the threads, shows
 * what splitting adds). */
static void time_operation(FILE *out, const char *name, operation op, bench *b, size_t bytes_moved, int reps,
                           int last) {
  setenv("MXFP8_HOST_THREADS", "1", 1);
  const timing one = time_ms(op, b, reps);
  unsetenv("MXFP8_HOST_THREADS");
  const timing all = time_ms(op, b, reps);
  b->copy_bytes = bytes_moved / 2;
  const timing copy = time_ms(run_copy, b, reps);
  fprintf(out,
          "  \"%s\": {\"ms_1t\": %.3f, \"ms_all\": %.3f, \"copy_ms\": %.3f, \"bytes_moved\": %zu, "
          "\"all_vs_copy\": %.3f, \"1t_vs_copy\": %.3f, \"min_ms_1t\": %.3f, \"min_ms_all\": %.3f, \"min_copy_ms\": %.3f, \"cpu_ms_1t\": %.3f, "
          "\"cpu_ms_all\": %.3f, \"copy_cpu_ms\": %.3f}%s\n",
          name, one.median, all.median, copy.median, bytes_moved, copy.median / all.median, copy.median / one.median,
          one.min, all.min, copy.min, one.cpu_median, all.cpu_median, copy.cpu_median, last ? "" : ",");
}

/* ---- The grouped MoE export (issue 36) ---- */

enum { kExperts = 256 };

static void no_delete(DLManagedTensorVersioned *self) { (void)self; }

typedef struct {
  mxfp8_grouped_desc desc;
  mxfp8_grouped_tensor *grouped;
  const int32_t *experts; /* NULL: every expert */
  size_t count;
  int values; /* export the values too */
  int create; /* each call creates the grouped tensor from `desc` and releases it (an immediate call) */
  DLManagedTensorVersioned data_m, scales_m;
  int64_t data_shape[2], scales_shape[1];
  void *data, *scales;
} grouped_case;

/* 256 experts of (rows, cols), their scales GEMM-swizzled and padded, or row-major and compact. */
static void grouped_setup(grouped_case *g, int64_t rows, int64_t cols, int swizzled) {
  const int64_t scale_cols = (cols + 31) / 32;
  const int64_t per_expert = swizzled ? (rows + 127) / 128 * 128 * ((scale_cols + 3) / 4 * 4) : rows * scale_cols;
  g->data = allocate((size_t)(kExperts * rows * cols));
  g->scales = allocate((size_t)(kExperts * per_expert));
  g->data_shape[0] = kExperts * rows, g->data_shape[1] = cols;
  g->scales_shape[0] = kExperts * per_expert;
  memset(&g->data_m, 0, sizeof g->data_m);
  memset(&g->scales_m, 0, sizeof g->scales_m);
  g->data_m.version.major = DLPACK_MAJOR_VERSION, g->data_m.version.minor = DLPACK_MINOR_VERSION;
  g->scales_m.version = g->data_m.version;
  const DLTensor data_t = {g->data, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, g->data_shape, NULL, 0};
  const DLTensor scales_t = {g->scales, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, g->scales_shape, NULL, 0};
  g->data_m.dl_tensor = data_t, g->scales_m.dl_tensor = scales_t;
  g->data_m.deleter = g->scales_m.deleter = no_delete;
  const mxfp8_grouped_desc init = MXFP8_GROUPED_DESC_INIT;
  g->desc = init;
  g->desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  g->desc.scales = swizzled ? MXFP8_GROUPED_SCALES_PADDED : MXFP8_GROUPED_SCALES_COMPACT;
  g->desc.num_experts = kExperts;
  g->desc.cols = cols;
  g->desc.uniform_rows = rows;
  g->desc.data = &g->data_m;
  g->desc.scale_inv = &g->scales_m;
  check(mxfp8_grouped_tensor_create(&g->desc, &g->grouped), "mxfp8_grouped_tensor_create");
}

static void grouped_call(const grouped_case *g) {
  DLManagedTensorVersioned *values = NULL, *scales = NULL;
  mxfp8_grouped_tensor *grouped = g->grouped;
  if (g->create) check(mxfp8_grouped_tensor_create(&g->desc, &grouped), "mxfp8_grouped_tensor_create");
  check(mxfp8_grouped_export(grouped, g->experts, g->count, NULL, g->values ? &values : NULL, &scales),
        "mxfp8_grouped_export");
  if (values && values->deleter) values->deleter(values);
  if (scales->deleter) scales->deleter(scales);
  if (g->create) mxfp8_grouped_tensor_release(grouped);
}

/* Median and minimum, in microseconds, of `calls` calls of call(arg) timed one at a time after a few warm-ups. */
static void time_calls(FILE *out, const char *name, void (*call)(const void *), const void *arg, int calls, int last) {
  double *us = (double *)malloc((size_t)calls * sizeof *us);
  if (!us) exit(1);
  for (int i = 0; i < 16; ++i) call(arg);
  const double c0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < calls; ++i) {
    const double t0 = now_ms();
    call(arg);
    us[i] = (now_ms() - t0) * 1e3;
  }
  const double cpu_us = (clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3 / calls;
  qsort(us, (size_t)calls, sizeof us[0], compare_doubles);
  fprintf(out, "    \"%s\": {\"us_median\": %.2f, \"us_min\": %.2f, \"us_p90\": %.2f, \"cpu_us_mean\": %.2f}%s\n", name,
          us[calls / 2], us[0], us[calls * 9 / 10], cpu_us, last ? "" : ",");
  free(us);
}

static void grouped_call_of(const void *g) { grouped_call((const grouped_case *)g); }

static void time_grouped(FILE *out, const char *name, const grouped_case *g, int calls, int last) {
  time_calls(out, name, grouped_call_of, g, calls, last);
}

static void time_grouped_cases(FILE *out, int calls) {
  setenv("MXFP8_HOST_THREADS", "1", 1);
  grouped_case small, tiny, views;
  memset(&small, 0, sizeof small);
  memset(&tiny, 0, sizeof tiny);
  memset(&views, 0, sizeof views);
  grouped_setup(&small, 128, 256, 1);
  grouped_setup(&tiny, 1, 32, 1);
  grouped_setup(&views, 128, 256, 0);
  views.values = 1;
  static int32_t reversed[kExperts];
  for (int e = 0; e < kExperts; ++e) reversed[e] = kExperts - 1 - e;
  grouped_case tiny_chosen = tiny, tiny_created = tiny, views_created = views;
  tiny_chosen.experts = reversed, tiny_chosen.count = kExperts, tiny_chosen.values = 1;
  tiny_created.create = 1, views_created.create = 1;
  fprintf(out, "  \"grouped\": {\n    \"experts\": %d, \"calls\": %d, \"threads\": 1,\n", kExperts, calls);
  time_grouped(out, "all_128x256_scales", &small, calls, 0);
  time_grouped(out, "all_1x32_scales", &tiny, calls, 0);
  time_grouped(out, "reversed_1x32_values_scales", &tiny_chosen, calls, 0);
  time_grouped(out, "all_128x256_views", &views, calls, 0);
  time_grouped(out, "create_all_1x32_scales", &tiny_created, calls, 0);
  time_grouped(out, "create_all_128x256_views", &views_created, calls, 1);
  fprintf(out, "  }");
  mxfp8_grouped_tensor_release(small.grouped);
  mxfp8_grouped_tensor_release(tiny.grouped);
  mxfp8_grouped_tensor_release(views.grouped);
  free(small.data), free(small.scales), free(tiny.data), free(tiny.scales), free(views.data), free(views.scales);
  unsetenv("MXFP8_HOST_THREADS");
}

/* ---- The batched export of expert handles (issue 36) ---- */

enum { kGroupExperts = 128 };

typedef struct {
  grouped_case groups[2];
  mxfp8_tensor *experts[kExperts];
  DLTensor dst[kExperts];
  DLTensor *dst_ptrs[kExperts];
  int64_t sizes[kExperts];
  uint8_t *bucket;
} batched_case;

/* Two grouped tensors of 128 experts of (rows, cols), swizzled padded scales; 256 expert handles; their
 * compact scales' destinations back to back in one bucket. */
static void batched_setup(batched_case *b, int64_t rows, int64_t cols, int swizzled) {
  memset(b, 0, sizeof *b);
  const int64_t c = (cols + 31) / 32, per_expert = rows * c;
  b->bucket = (uint8_t *)allocate((size_t)(kExperts * per_expert));
  for (int g = 0; g < 2; ++g) {
    /* grouped_setup makes kExperts (256) experts; the first 128 of each are used, as bench_scales' groups */
    grouped_setup(&b->groups[g], rows, cols, swizzled);
    for (int e = 0; e < kGroupExperts; ++e) {
      const int i = g * kGroupExperts + e;
      check(mxfp8_grouped_expert(b->groups[g].grouped, e, &b->experts[i]), "mxfp8_grouped_expert");
      b->sizes[i] = per_expert;
      const DLTensor d = {b->bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, &b->sizes[i], NULL, (uint64_t)(i * per_expert)};
      b->dst[i] = d;
      b->dst_ptrs[i] = &b->dst[i];
    }
  }
}

static void batched_release(batched_case *b) {
  for (int i = 0; i < kExperts; ++i) mxfp8_tensor_release(b->experts[i]);
  for (int g = 0; g < 2; ++g) {
    mxfp8_grouped_tensor_release(b->groups[g].grouped);
    free(b->groups[g].data), free(b->groups[g].scales);
  }
  free(b->bucket);
}

static void batched_call(const batched_case *b) {
  check(mxfp8_export_scales_batched((const mxfp8_tensor *const *)b->experts, b->dst_ptrs, kExperts, NULL),
        "mxfp8_export_scales_batched");
}

static void batched_call_of(const void *b) { batched_call((const batched_case *)b); }

static void time_batched(FILE *out, const char *name, const batched_case *b, int calls, int last) {
  time_calls(out, name, batched_call_of, b, calls, last);
}

static void time_batched_cases(FILE *out, int calls) {
  setenv("MXFP8_HOST_THREADS", "1", 1);
  static batched_case small, tiny, row_major;
  batched_setup(&small, 128, 64, 1);
  batched_setup(&tiny, 1, 32, 1);
  batched_setup(&row_major, 128, 64, 0);
  fprintf(out, "  \"batched\": {\n    \"experts\": %d, \"calls\": %d, \"threads\": 1,\n", kExperts, calls);
  time_batched(out, "experts_128x64", &small, calls, 0);
  time_batched(out, "experts_1x32", &tiny, calls, 0);
  time_batched(out, "experts_128x64_row_major", &row_major, calls, 1);
  fprintf(out, "  }");
  batched_release(&small);
  batched_release(&tiny);
  batched_release(&row_major);
  unsetenv("MXFP8_HOST_THREADS");
}

static void cpu_model(char *buf, size_t n) {
  snprintf(buf, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    for (++v; *v == ' '; ++v) {
    }
    snprintf(buf, n, "%.*s", (int)strcspn(v, "\n\""), v);
    break;
  }
  fclose(f);
}

static void load_average(char *buf, size_t n) {
  snprintf(buf, n, "unknown");
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f) return;
  if (fgets(buf, (int)n, f)) buf[strcspn(buf, " ")] = '\0'; /* the 1-minute figure */
  fclose(f);
}

/* The (4096, 8192) weight's three operations. */
static void time_weight(FILE *out, int reps) {
  bench b;
  memset(&b, 0, sizeof b);
  const size_t n = (size_t)kRows * kCols, scale_bytes = (size_t)kRows * kScaleCols;
  const size_t swizzled_bytes = scale_bytes; /* 4096 and 256 are multiples of 128 and 4 */
  static int64_t shape[2] = {kRows, kCols}, scale_shape[2] = {kRows, kScaleCols};
  uint16_t *input = (uint16_t *)allocate(n * 2);
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < n; ++i) { /* BF16 weights in [2^-11, 2^-7), random signs */
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    input[i] = (uint16_t)(((state >> 16) & 0x807F) | (uint16_t)((0x3C00 - 0x0200) + ((state >> 24) % 4) * 0x80));
  }
  const DLTensor input_t = {input, {kDLCPU, 0}, 2, {kDLBfloat, 16, 1}, shape, NULL, 0};
  const DLTensor values_t = {allocate(n), {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, shape, NULL, 0};
  const DLTensor scales_t = {allocate(scale_bytes), {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, scale_shape, NULL, 0};
  const DLTensor swizzled_t = {allocate(swizzled_bytes), {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, scale_shape, NULL, 0};
  const DLTensor compact_t = {allocate(scale_bytes), {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, scale_shape, NULL, 0};
  const DLTensor output_t = {allocate(n * 2), {kDLCPU, 0}, 2, {kDLBfloat, 16, 1}, shape, NULL, 0};
  b.input = input_t, b.values = values_t, b.scales = scales_t, b.swizzled = swizzled_t, b.compact = compact_t;
  b.output = output_t;
  run_quantize(&b);
  check(mxfp8_swizzle_scales(&b.scales, &b.swizzled, NULL), "mxfp8_swizzle_scales");

  /* Borrowed (NULL deleter) views of the quantized buffers for the dequantize. */
  DLManagedTensorVersioned values_m, scales_m;
  memset(&values_m, 0, sizeof values_m);
  memset(&scales_m, 0, sizeof scales_m);
  values_m.version.major = DLPACK_MAJOR_VERSION, values_m.version.minor = DLPACK_MINOR_VERSION;
  scales_m.version = values_m.version;
  values_m.dl_tensor = b.values, scales_m.dl_tensor = b.scales;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &values_m, desc.rowwise_scale_inv = &scales_m;
  check(mxfp8_tensor_create(&desc, &b.tensor), "mxfp8_tensor_create");

  const size_t copy_max = n * 2 + n + scale_bytes; /* the largest operation's bytes moved */
  b.copy_src = allocate(copy_max), b.copy_dst = allocate(copy_max);

  time_operation(out, "quantize", run_quantize, &b, n * 2 + n + scale_bytes, reps, 0);
  time_operation(out, "dequantize", run_dequantize, &b, n + scale_bytes + n * 2, reps, 0);
  time_operation(out, "unswizzle", run_unswizzle, &b, swizzled_bytes + scale_bytes, reps, 0);
  mxfp8_tensor_release(b.tensor);
  free(input), free(b.values.data), free(b.scales.data), free(b.swizzled.data), free(b.compact.data);
  free(b.output.data), free(b.copy_src), free(b.copy_dst);
}

int main(int argc, char **argv) {
  int reps = 5, grouped_only = 0, batched_only = 0, grouped_calls = 5000;
  const char *out_path = NULL, *note = "";
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
    else if (!strcmp(argv[i], "--note") && i + 1 < argc) note = argv[++i];
    else if (!strcmp(argv[i], "--grouped")) grouped_only = 1;
    else if (!strcmp(argv[i], "--batched")) batched_only = 1;
    else if (!strcmp(argv[i], "--grouped-calls") && i + 1 < argc) grouped_calls = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--reps N] [--grouped] [--batched] [--grouped-calls N] [--out FILE] [--note TEXT]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > kMaxReps) {
    fprintf(stderr, "host_bench: --reps must be 1..%d\n", kMaxReps);
    return 2;
  }
  if (grouped_calls < 1) {
    fprintf(stderr, "host_bench: --grouped-calls must be at least 1\n");
    return 2;
  }

  cpu_set_t set;
  const int cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  char model[256], load[64], date[32];
  cpu_model(model, sizeof model);
  load_average(load, sizeof load);
  const time_t t = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));

  char *text = NULL;
  size_t text_size = 0;
  FILE *out = open_memstream(&text, &text_size);
  fprintf(out, "{\n  \"date\": \"%s\",\n  \"cpu\": \"%s\",\n  \"cores\": %d,\n  \"load_average_1min_at_start\": %s,\n",
          date, model, cores, load);
  fprintf(out, "  \"shape\": [%d, %d],\n  \"reps\": %d,\n  \"note\": \"%s\",\n", kRows, kCols, reps, note);
  if (!grouped_only && !batched_only) time_weight(out, reps);
  if (!batched_only || grouped_only) time_grouped_cases(out, grouped_calls);
  if (!grouped_only || batched_only) {
    if (!batched_only || grouped_only) fprintf(out, ",\n");
    time_batched_cases(out, grouped_calls);
  }
  fprintf(out, "\n}\n");
  fclose(out);
  fputs(text, stdout);
  if (out_path) {
    FILE *f = fopen(out_path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "host_bench: cannot write %s\n", out_path);
      return 1;
    }
  }
  free(text);
  return 0;
}
