/* Many threads at once: each creating, exporting and releasing its own tensors; all exporting from one
 * shared handle and releasing their views in their own order (whole tensors, shards, NVFP4 and grouped
 * experts); and mxfp8_last_error staying per thread. Run under ThreadSanitizer by scripts/test.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_fixtures.h"
#include "test_support.h"

enum { THREADS = 8, ITERATIONS = 150 };

typedef struct {
  int index;
  const mxfp8_tensor *shared;
  const uint8_t *shared_scales; /* the compact scales the shared tensor must export */
  int64_t shared_rows;
  int failures;
  char detail[200];
} worker;

#define WORKER_EXPECT(w, cond, ...)                                  \
  do {                                                               \
    if (!(cond) && !(w)->failures++) snprintf((w)->detail, sizeof (w)->detail, __VA_ARGS__); \
  } while (0)

static void *work(void *arg) {
  worker *w = (worker *)arg;
  uint64_t rng = 1000 + (uint64_t)w->index;
  for (int it = 0; it < ITERATIONS; ++it) {
    /* 1. a tensor of its own: (rows, 64) with swizzled scales */
    const int64_t rows = 1 + (int64_t)(rng_next(&rng) % 200), shape[2] = {rows, 64};
    const int64_t swz_shape[2] = {ref_round_up(rows, 128), 4};
    test_tensor *data = test_tensor_new(2, shape, kDLUInt, 1), *scales = test_tensor_new(2, swz_shape, kDLUInt, 1);
    uint8_t expected[200 * 2];
    fill_random_scales(expected, (size_t)(rows * 2), &rng);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < 2; ++c) scales->buffer[ref_swizzled_index(r, c, 4)] = expected[r * 2 + c];
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    desc.rowwise_data = &data->managed;
    desc.rowwise_scale_inv = &scales->managed;
    mxfp8_tensor *own = NULL;
    WORKER_EXPECT(w, mxfp8_tensor_create(&desc, &own) == MXFP8_OK, "create: %s", mxfp8_last_error());
    DLManagedTensorVersioned *v = NULL, *s = NULL;
    WORKER_EXPECT(w, own && mxfp8_export_components(own, NULL, &v, &s) == MXFP8_OK, "export: %s", mxfp8_last_error());
    if (s) WORKER_EXPECT(w, memcmp(s->dl_tensor.data, expected, (size_t)(rows * 2)) == 0, "own scales differ");
    mxfp8_tensor_release(own);
    release_managed(s);
    release_managed(v);
    WORKER_EXPECT(w, data->deleter_calls == 1 && scales->deleter_calls == 1, "own deleters");
    test_tensor_free(data);
    test_tensor_free(scales);

    /* 2. the shared handle: export, read, release in this thread's order */
    DLManagedTensorVersioned *sv = NULL, *ss = NULL;
    WORKER_EXPECT(w, mxfp8_export_components(w->shared, NULL, &sv, &ss) == MXFP8_OK, "shared export: %s",
                  mxfp8_last_error());
    if (ss) WORKER_EXPECT(w, memcmp(ss->dl_tensor.data, w->shared_scales, (size_t)(w->shared_rows * 2)) == 0,
                          "shared scales differ");
    if ((it + w->index) % 2) {
      release_managed(sv);
      release_managed(ss);
    } else {
      release_managed(ss);
      release_managed(sv);
    }

    /* 3. an error of this thread's own: the message it reads is its own */
    mxfp8_export_options bad = MXFP8_EXPORT_OPTIONS_INIT;
    bad.values_dtype = 100 + w->index;
    char wanted[64];
    snprintf(wanted, sizeof wanted, "options.values_dtype is %d,", 100 + w->index);
    WORKER_EXPECT(w, mxfp8_export_components(w->shared, &bad, &sv, NULL) == MXFP8_ERROR_INVALID_ARGUMENT, "bad");
    WORKER_EXPECT(w, strstr(mxfp8_last_error(), wanted) != NULL, "thread %d read \"%s\"", w->index, mxfp8_last_error());
  }
  return NULL;
}

static void test_threads_create_export_and_release_concurrently(void **state) {
  (void)state;
  uint64_t rng = 7;
  const int64_t rows = 300, shape[2] = {rows, 64}, swz_shape[2] = {384, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 1), *scales = test_tensor_new(2, swz_shape, kDLUInt, 1);
  uint8_t expected[300 * 2];
  fill_random_scales(expected, sizeof expected, &rng);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < 2; ++c) scales->buffer[ref_swizzled_index(r, c, 4)] = expected[r * 2 + c];
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *shared = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &shared), MXFP8_OK);

  pthread_t threads[THREADS];
  worker workers[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    workers[i] = (worker){i, shared, expected, rows, 0, ""};
    assert_int_equal(pthread_create(&threads[i], NULL, work, &workers[i]), 0);
  }
  for (int i = 0; i < THREADS; ++i) assert_int_equal(pthread_join(threads[i], NULL), 0);
  for (int i = 0; i < THREADS; ++i) EXPECT(workers[i].failures == 0, "thread %d: %s", i, workers[i].detail);
  assert_int_equal(data->deleter_calls, 0);
  mxfp8_tensor_release(shared);
  assert_int_equal(data->deleter_calls, 1);
  assert_int_equal(scales->deleter_calls, 1);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* "Thread-safe": many threads exporting shards, NVFP4 components and chosen experts of the same handles
 * at once (views and copies; each thread releases its own outputs); every output is right and every
 * deleter runs once, after the last view (ThreadSanitizer runs this test too). */
typedef struct {
  const mxfp8_tensor *t;
  const mxfp8_tensor *nv;
  const mxfp8_grouped_tensor *g;
  const uint8_t *values, *s, *nv_scales, *g_values;
  int failures;
} export_job;

static void *run_exports(void *arg) {
  export_job *j = arg;
  for (int rep = 0; rep < 50; ++rep) {
    mxfp8_shard shard = MXFP8_SHARD_INIT;
    const int64_t pieces[4] = {30 + rep % 20, 60, 0, 10};
    if (rep % 2) shard.num_row_pieces = 2, shard.row_pieces = pieces;
    else shard.row_begin = rep % 50, shard.row_end = 60;
    DLManagedTensorVersioned *v = NULL, *sc = NULL;
    if (export_shard(j->t, &shard, NULL, &v, &sc) != MXFP8_OK) {
      j->failures++;
      continue;
    }
    const int64_t first = rep % 2 ? pieces[0] : shard.row_begin;
    const uint8_t *vb = (const uint8_t *)v->dl_tensor.data + v->dl_tensor.byte_offset;
    const uint8_t *sb = (const uint8_t *)sc->dl_tensor.data + sc->dl_tensor.byte_offset;
    if (memcmp(vb, j->values + first * 96, 96) != 0 || memcmp(sb, j->s + first * 3, 3) != 0) j->failures++;
    release_managed(v);
    release_managed(sc);
    DLManagedTensorVersioned *nvs = NULL, *nvg = NULL;
    if (nvfp4_export_components(j->nv, NULL, NULL, &nvs, &nvg) != MXFP8_OK) {
      j->failures++;
      continue;
    }
    float gscale;
    memcpy(&gscale, nvg->dl_tensor.data, 4);
    if (gscale != 5.0f / (6.0f * 448.0f) || memcmp(nvs->dl_tensor.data, j->nv_scales, 3) != 0) j->failures++;
    release_managed(nvs);
    release_managed(nvg);
    const int32_t picks[2] = {rep % 3, (rep + 1) % 3};
    DLManagedTensorVersioned *gv = NULL;
    if (mxfp8_grouped_export(j->g, picks, 2, NULL, &gv, NULL) != MXFP8_OK) {
      j->failures++;
      continue;
    }
    if (memcmp((const uint8_t *)gv->dl_tensor.data + gv->dl_tensor.byte_offset, j->g_values + picks[0] * 8 * 32, 8 * 32) != 0)
      j->failures++;
    release_managed(gv);
  }
  return NULL;
}

static void test_shard_nvfp4_and_grouped_exports_concurrently(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 96, 53);
  nv_tensor n;
  assert_int_equal(make_nv(&n, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  int64_t dshape[1] = {3 * 8 * 32}, sshape[1] = {3 * 8};
  test_tensor *gd = test_tensor_new(1, dshape, kDLUInt, 1), *gs = test_tensor_new(1, sshape, kDLUInt, 1);
  uint64_t rng = 59;
  fill_random(gd->buffer, gd->bytes, &rng);
  fill_random_scales(gs->buffer, gs->bytes, &rng);
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = 3, g.cols = 32, g.uniform_rows = 8, g.scales = MXFP8_GROUPED_SCALES_COMPACT;
  g.data = &gd->managed, g.scale_inv = &gs->managed;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  enum { kThreads = 4 };
  export_job jobs[kThreads];
  pthread_t threads[kThreads];
  for (int i = 0; i < kThreads; ++i) {
    jobs[i] = (export_job){r.t, n.t, grouped, r.data->buffer, r.s, n.scales->buffer, gd->buffer, 0};
    assert_int_equal(pthread_create(&threads[i], NULL, run_exports, &jobs[i]), 0);
  }
  for (int i = 0; i < kThreads; ++i) {
    assert_int_equal(pthread_join(threads[i], NULL), 0);
    EXPECT(jobs[i].failures == 0, "thread %d: %d wrong or failed exports", i, jobs[i].failures);
  }
  mxfp8_grouped_tensor_release(grouped);
  EXPECT(gd->deleter_calls == 1 && gs->deleter_calls == 1, "grouped deleters ran %d, %d times", gd->deleter_calls,
         gs->deleter_calls);
  test_tensor_free(gd);
  test_tensor_free(gs);
  free_nv(&n, 1);
  free_rowwise(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_create_export_and_release_concurrently),
      cmocka_unit_test(test_shard_nvfp4_and_grouped_exports_concurrently),
  };
  return cmocka_run_group_tests_name("concurrency", tests, NULL, NULL);
}
