/* Many threads at once: each creating, exporting and releasing its own tensors; all exporting from one
 * shared handle and releasing their views in their own order; and mxfp8_last_error staying per thread.
 * Run under ThreadSanitizer by scripts/test.sh. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_create_export_and_release_concurrently),
  };
  return cmocka_run_group_tests_name("concurrency", tests, NULL, NULL);
}
