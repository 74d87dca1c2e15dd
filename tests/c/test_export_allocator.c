/* What an export does with the caller's allocator (mxfp8_export_options.allocator), for every call that
 * allocates (mxfp8_export_components whole and sharded, the grouped export, the NVFP4 export): an
 * allocator that fails, or returns a tensor it returned before, one over another output, over an input,
 * misaligned or at a byte_offset int64 cannot hold, on a chosen call. "On failure no output is written and
 * every tensor the allocator made is deleted once." */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_fixtures.h"

/* ---------------------------------------------------------------------------------------------------
 * A caller's allocator that succeeds, fails or returns a bad tensor on a chosen call
 * --------------------------------------------------------------------------------------------------- */

enum alloc_mode {
  ALLOC_GOOD, ALLOC_FAIL, ALLOC_MISALIGNED, ALLOC_OVER_SOURCE, ALLOC_OVER_PREVIOUS, ALLOC_OFFSET_2_63,
  ALLOC_SAME_AS, /* the very DLManagedTensorVersioned allocation `same_as` returned */
  ALLOC_GIVEN    /* `given`: e.g. a managed tensor the library holds for the call's input */
};
static struct {
  int calls, bad_call, same_as;
  DLManagedTensorVersioned *given;
  enum alloc_mode mode;
  uint8_t *source; /* ALLOC_OVER_SOURCE: the tensor's data is placed here */
  test_tensor *made[8];
} g_alloc;

static void reset_allocator(int bad_call, enum alloc_mode mode, uint8_t *source) {
  memset(&g_alloc, 0, sizeof g_alloc);
  g_alloc.bad_call = bad_call;
  g_alloc.mode = mode;
  g_alloc.source = source;
}

static int chosen_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                            void (*set_error)(void *, const char *, const char *)) {
  const int call = g_alloc.calls++;
  const enum alloc_mode mode = call == g_alloc.bad_call ? g_alloc.mode : ALLOC_GOOD;
  if (mode == ALLOC_FAIL) {
    set_error(error_ctx, "MemoryError", "the test's allocator refuses this call");
    return -1;
  }
  if (mode == ALLOC_GIVEN) {
    *out = g_alloc.given;
    return 0;
  }
  if (mode == ALLOC_SAME_AS) {
    *out = &g_alloc.made[g_alloc.same_as]->managed;  /* made[call] stays NULL: nothing new was made */
    return 0;
  }
  /* A float32 prototype gets 4 bytes an element; test_tensor_new makes bytes, so widen the last dim. */
  const int64_t element = (prototype->dtype.bits * prototype->dtype.lanes + 7) / 8;
  int64_t shape[8] = {1};
  const int32_t ndim = prototype->ndim;
  for (int32_t i = 0; i < ndim; ++i) shape[i] = prototype->shape[i];
  int64_t alloc_shape[1];
  int64_t n = 1;
  for (int32_t i = 0; i < ndim; ++i) n *= shape[i];
  alloc_shape[0] = n * element + 8 + 4096; /* room for a later tensor placed over this one (ALLOC_OVER_PREVIOUS) */
  test_tensor *t = test_tensor_new(1, alloc_shape, kDLUInt, 1);
  g_alloc.made[call] = t;
  /* Describe it as the prototype asked: the test_tensor's own shape array holds the prototype's dims. */
  for (int32_t i = 0; i < ndim; ++i) t->shape[i] = shape[i];
  t->managed.dl_tensor.ndim = ndim;
  t->managed.dl_tensor.shape = ndim ? t->shape : NULL;
  t->managed.dl_tensor.strides = NULL;
  t->managed.dl_tensor.dtype = prototype->dtype;
  t->managed.dl_tensor.device = prototype->device;
  if (mode == ALLOC_MISALIGNED) t->managed.dl_tensor.byte_offset = 1;
  if (mode == ALLOC_OVER_SOURCE) t->managed.dl_tensor.data = g_alloc.source;
  if (mode == ALLOC_OVER_PREVIOUS && call > 0) t->managed.dl_tensor.data = g_alloc.made[call - 1]->buffer;
  if (mode == ALLOC_OFFSET_2_63) { /* no wrap past the address space, but an offset int64 cannot hold */
    t->managed.dl_tensor.data = (void *)(uintptr_t)0x1000;
    t->managed.dl_tensor.byte_offset = (uint64_t)1 << 63;
  }
  *out = &t->managed;
  return 0;
}

/* Every tensor the allocator made was deleted exactly once (or, `kept`, is still owned by an output). */
static void expect_allocations_deleted(int kept) {
  for (int i = 0; i < g_alloc.calls; ++i) {
    if (!g_alloc.made[i]) continue;
    if (kept) continue;
    EXPECT(g_alloc.made[i]->deleter_calls == 1, "allocation %d was deleted %d times", i, g_alloc.made[i]->deleter_calls);
  }
}

static void free_allocations(void) {
  for (int i = 0; i < g_alloc.calls; ++i)
    if (g_alloc.made[i]) test_tensor_free(g_alloc.made[i]);
}


/* ---------------------------------------------------------------------------------------------------
 * mxfp8_export_components with options.shard: "Same ownership, stream, output and failure rules as
 * mxfp8_export_components": on failure no output is written and every tensor the allocator made is deleted once.
 * --------------------------------------------------------------------------------------------------- */

static void test_export_shard_allocator_failures(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 96, 4);
  /* Two row pieces: both outputs are copies, the scales made first. */
  const int64_t pieces[4] = {70, 90, 10, 30};
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.num_row_pieces = 2;
  shard.row_pieces = pieces;
  shard.col_begin = 32;
  const enum alloc_mode modes[] = {ALLOC_FAIL, ALLOC_OVER_SOURCE};
  const mxfp8_status want[] = {MXFP8_ERROR_OUT_OF_MEMORY, MXFP8_ERROR_INVALID_ARGUMENT};
  for (int m = 0; m < 2; ++m)
    for (int bad = 0; bad < 2; ++bad) {
      reset_allocator(bad, modes[m], r.data->buffer);
      mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
      o.allocator = chosen_allocator;
      DLManagedTensorVersioned *v = SENTINEL, *s = SENTINEL;
      const mxfp8_status st = export_shard(r.t, &shard, &o, &v, &s);
      EXPECT(st == want[m], "mode %d, bad call %d: status %d (%s)", m, bad, st, mxfp8_last_error());
      EXPECT(v == SENTINEL && s == SENTINEL, "mode %d, bad call %d: an output was written on failure", m, bad);
      /* "before anything is written": not even the first copy, into memory the allocator gave */
      if (bad == 1)
        EXPECT(all_poison(g_alloc.made[0]->buffer, g_alloc.made[0]->bytes),
               "mode %d: the scales copy was written before the call failed", m);
      expect_allocations_deleted(0);
      free_allocations();
    }
  /* And the good case: the copies hold the pieces' values and scales, in piece order. */
  reset_allocator(-1, ALLOC_GOOD, NULL);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = chosen_allocator;
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(export_shard(r.t, &shard, &o, &v, &s), MXFP8_OK);
  const uint8_t *vb = (const uint8_t *)v->dl_tensor.data, *sb = (const uint8_t *)s->dl_tensor.data;
  assert_int_equal(v->dl_tensor.shape[0], 40);
  assert_int_equal(v->dl_tensor.shape[1], 64);
  assert_int_equal(s->dl_tensor.shape[1], 2);
  for (int64_t y = 0; y < 40; ++y) {
    const int64_t src = y < 20 ? 70 + y : 10 + (y - 20);
    for (int64_t x = 0; x < 64; ++x) EXPECT(vb[y * 64 + x] == r.data->buffer[src * 96 + 32 + x], "value (%lld, %lld)", (long long)y, (long long)x);
    for (int64_t x = 0; x < 2; ++x) EXPECT(sb[y * 2 + x] == r.s[src * 3 + 1 + x], "scale (%lld, %lld)", (long long)y, (long long)x);
  }
  release_managed(v);
  release_managed(s);
  expect_allocations_deleted(0);
  free_allocations();
  free_rowwise(&r);
}

/* ---------------------------------------------------------------------------------------------------
 * mxfp8_grouped_export of chosen experts: "in the order given (an expert may appear more than once)";
 * "Ownership, allocation and output rules as mxfp8_export_components"; `experts` is read for `count`
 * entries only.
 * --------------------------------------------------------------------------------------------------- */

static void test_grouped_export_chosen_experts_repeats_and_failures(void **state) {
  (void)state;
  enum { E = 3, N = 40, K = 70, C = 3 };
  const int64_t padded_expert = 128 * 4;
  int64_t dshape[1] = {E * N * K}, sshape[1] = {E * padded_expert};
  test_tensor *data = test_tensor_new(1, dshape, kDLUInt, 1), *scales = test_tensor_new(1, sshape, kDLUInt, 1);
  uint64_t rng = 5;
  fill_random(data->buffer, data->bytes, &rng);
  uint8_t s_ref[E][N * C];
  for (int e = 0; e < E; ++e) {
    fill_random_scales(s_ref[e], N * C, &rng);
    for (int y = 0; y < N; ++y)
      for (int x = 0; x < C; ++x) scales->buffer[e * padded_expert + y * 4 + x] = s_ref[e][y * C + x];
  }
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = E;
  g.cols = K;
  g.uniform_rows = N;
  g.data = &data->managed;
  g.scale_inv = &scales->managed;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);

  /* Exactly `count` experts in a buffer of their own, so ASan sees any read past them. */
  int32_t *experts = malloc(3 * sizeof *experts);
  experts[0] = 2, experts[1] = 0, experts[2] = 2;
  reset_allocator(-1, ALLOC_GOOD, NULL);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = chosen_allocator;
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_grouped_export(grouped, experts, 3, &o, &v, &s), MXFP8_OK);
  const uint8_t *vb = (const uint8_t *)v->dl_tensor.data, *sb = (const uint8_t *)s->dl_tensor.data;
  for (int i = 0; i < 3; ++i) {
    EXPECT(memcmp(vb + i * N * K, data->buffer + experts[i] * N * K, N * K) == 0, "values of pick %d", i);
    EXPECT(memcmp(sb + i * N * C, s_ref[experts[i]], N * C) == 0, "scales of pick %d", i);
  }
  release_managed(v);
  release_managed(s);
  expect_allocations_deleted(0);
  free_allocations();

  /* Either copy failing, or landing on the source: no output written, every allocation deleted once. */
  const enum alloc_mode modes[] = {ALLOC_FAIL, ALLOC_OVER_SOURCE};
  for (int m = 0; m < 2; ++m)
    for (int bad = 0; bad < 2; ++bad) {
      reset_allocator(bad, modes[m], scales->buffer);
      v = SENTINEL, s = SENTINEL;
      const mxfp8_status st = mxfp8_grouped_export(grouped, experts, 3, &o, &v, &s);
      EXPECT(st != MXFP8_OK, "mode %d, bad call %d succeeded", m, bad);
      EXPECT(v == SENTINEL && s == SENTINEL, "mode %d, bad call %d: an output was written on failure", m, bad);
      expect_allocations_deleted(0);
      free_allocations();
    }
  /* Experts out of range in any position, negative, or of another row count: refused, nothing taken. */
  const int32_t bad_picks[][3] = {{0, 1, 3}, {-1, 0, 1}, {INT32_MIN, 0, 0}, {0, INT32_MAX, 0}};
  for (size_t i = 0; i < sizeof bad_picks / sizeof bad_picks[0]; ++i) {
    memcpy(experts, bad_picks[i], sizeof bad_picks[i]);
    v = SENTINEL, s = SENTINEL;
    assert_int_equal(mxfp8_grouped_export(grouped, experts, 3, NULL, &v, &s), MXFP8_ERROR_INVALID_ARGUMENT);
    EXPECT(v == SENTINEL && s == SENTINEL, "bad pick %zu wrote an output", i);
  }
  free(experts);
  mxfp8_grouped_tensor_release(grouped);
  assert_int_equal(data->deleter_calls, 1);
  assert_int_equal(scales->deleter_calls, 1);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* NVFP4 through mxfp8_export_components (the scales copy) and mxfp8_export_global_scale (the global scale
 * copy): "Outputs are written only on success"; "Allocation ... rules are those of
 * mxfp8_export_components": a failing allocator and a copy placed over the tensor leave every output as it
 * was and every allocation deleted once, and the float32 global scale not aligned to its elements is
 * refused. */
static void test_nvfp4_export_allocator_failures(void **state) {
  (void)state;
  nv_tensor n;
  assert_int_equal(make_nv(&n, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  const struct {
    int global; /* 0: mxfp8_export_components (values and scales), 1: mxfp8_export_global_scale */
    enum alloc_mode mode;
    mxfp8_status want;
  } cases[] = {
      {0, ALLOC_FAIL, MXFP8_ERROR_OUT_OF_MEMORY},        {1, ALLOC_FAIL, MXFP8_ERROR_OUT_OF_MEMORY},
      {0, ALLOC_OVER_SOURCE, MXFP8_ERROR_INVALID_ARGUMENT}, {1, ALLOC_OVER_SOURCE, MXFP8_ERROR_INVALID_ARGUMENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    reset_allocator(0, cases[i].mode, cases[i].global ? n.amax->buffer : n.scales->buffer);
    mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
    o.allocator = chosen_allocator;
    DLManagedTensorVersioned *v = SENTINEL, *s = SENTINEL, *g = SENTINEL;
    const mxfp8_status st =
        cases[i].global ? mxfp8_export_global_scale(n.t, &o, &g) : mxfp8_export_components(n.t, &o, &v, &s);
    EXPECT(st == cases[i].want, "case %zu: status %d (%s)", i, st, mxfp8_last_error());
    EXPECT(v == SENTINEL && s == SENTINEL && g == SENTINEL, "case %zu: an output was written on failure", i);
    EXPECT(g_alloc.calls == 1, "case %zu: the allocator was called %d times", i, g_alloc.calls);
    expect_allocations_deleted(0);
    free_allocations();
  }
  /* The float32 global scale placed at an odd byte_offset: refused. A byte output (the scales) at an odd
   * offset is fine. */
  reset_allocator(0, ALLOC_MISALIGNED, NULL);
  mxfp8_export_options mo = NVFP4_EXPORT_OPTIONS_INIT;
  mo.allocator = chosen_allocator;
  DLManagedTensorVersioned *mg = SENTINEL;
  mxfp8_status st = mxfp8_export_global_scale(n.t, &mo, &mg);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && mg == SENTINEL, "misaligned global scale: %d", st);
  assert_last_error_contains("not aligned to its 4-byte elements");
  expect_allocations_deleted(0);
  free_allocations();
  reset_allocator(0, ALLOC_MISALIGNED, NULL);
  DLManagedTensorVersioned *ms = SENTINEL;
  st = mxfp8_export_components(n.t, &mo, NULL, &ms);
  EXPECT(st == MXFP8_OK, "scales at an odd offset: %d (%s)", st, mxfp8_last_error());
  if (st == MXFP8_OK) release_managed(ms);
  free_allocations();
  /* A good run: the global scale is amax / (6 * 448), the scales the crop of the padded buffer. */
  reset_allocator(-1, ALLOC_GOOD, NULL);
  mxfp8_export_options o = NVFP4_EXPORT_OPTIONS_INIT;
  o.allocator = chosen_allocator;
  DLManagedTensorVersioned *s = NULL, *g = NULL;
  assert_int_equal(mxfp8_export_components(n.t, &o, NULL, &s), MXFP8_OK);
  assert_int_equal(mxfp8_export_global_scale(n.t, &o, &g), MXFP8_OK);
  float got;
  memcpy(&got, g->dl_tensor.data, 4);
  EXPECT(got == 5.0f / (6.0f * 448.0f), "global scale %.9g", (double)got);
  for (int y = 0; y < 40; ++y)
    for (int x = 0; x < 3; ++x)
      EXPECT(((const uint8_t *)s->dl_tensor.data)[y * 3 + x] == n.scales->buffer[y * 4 + x], "scale (%d, %d)", y, x);
  release_managed(s);
  release_managed(g);
  expect_allocations_deleted(0);
  free_allocations();
  free_nv(&n, 1);
}

/* "What a call writes must not share a byte ... with another of its outputs": a caller's allocator that
 * hands back, for a call's second copy, the memory of its first (mxfp8_quantize refuses this) makes
 * mxfp8_export_components with options.shard (values and scales copies of a shard of row pieces) fail with
 * MXFP8_ERROR_INVALID_ARGUMENT, no output written, each allocation deleted once; never one output
 * silently written over the other. */
static void test_allocator_copies_over_each_other_are_refused(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 96, 13);
  const int64_t pieces[4] = {70, 90, 10, 30};
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.num_row_pieces = 2;
  shard.row_pieces = pieces;
  reset_allocator(1, ALLOC_OVER_PREVIOUS, NULL);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = chosen_allocator;
  DLManagedTensorVersioned *v = SENTINEL, *s = SENTINEL;
  mxfp8_status st = export_shard(r.t, &shard, &o, &v, &s);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "export_shard (options.shard): status %d (%s)", st, mxfp8_last_error());
  if (st == MXFP8_OK) {
    /* what the caller got: the scales copy, overwritten by the values copy */
    EXPECT(memcmp(s->dl_tensor.data, r.s + 70 * 3, 2) == 0, "the scales output was overwritten by the values");
    release_managed(v);
    release_managed(s);
  } else {
    EXPECT(v == SENTINEL && s == SENTINEL, "an output was written on failure");
  }
  expect_allocations_deleted(0);
  free_allocations();
  free_rowwise(&r);

  /* An NVFP4 tensor's export makes at most one copy per call (scales from mxfp8_export_components, the
   * global scale from mxfp8_export_global_scale), so no NVFP4 call has two copies to place over each
   * other. */
}

/* The allocator contract: "the same DLManagedTensorVersioned returned for two outputs of one call is
 * refused with MXFP8_ERROR_INVALID_ARGUMENT (and its deleter runs once, not twice)". Through every call
 * that makes two copies: mxfp8_quantize (values, then scales) and mxfp8_export_components with options.shard
 * (values, then scales); an NVFP4 export makes one copy per call. Owning the tensor twice would run its
 * deleter twice on the failure path: a double free in the caller's allocator. */
static void test_allocator_returning_one_tensor_twice_is_refused(void **state) {
  (void)state;
  float input[64 * 70];
  for (int i = 0; i < 64 * 70; ++i) input[i] = (float)(i % 251) * 0.37f - 40.0f;
  int64_t in_shape[2] = {64, 70};
  DLTensor in = {input, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, in_shape, NULL, 0};
  reset_allocator(1, ALLOC_SAME_AS, NULL); /* same_as 0 */
  mxfp8_quantize_options qo = MXFP8_QUANTIZE_OPTIONS_INIT;
  qo.allocator = chosen_allocator;
  DLManagedTensorVersioned *v = SENTINEL, *sc = SENTINEL;
  mxfp8_status st = mxfp8_quantize(&in, &qo, &v, &sc, NULL, NULL);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_quantize: status %d (%s)", st, mxfp8_last_error());
  EXPECT(strstr(mxfp8_last_error(), "same DLManagedTensorVersioned") != NULL, "message: %s", mxfp8_last_error());
  EXPECT(v == SENTINEL && sc == SENTINEL, "an output was written on failure");
  EXPECT(g_alloc.calls == 2, "the allocator was called %d times", g_alloc.calls);
  expect_allocations_deleted(0);
  free_allocations();

  rowwise_tensor r;
  make_rowwise(&r, 100, 96, 17);
  const int64_t pieces[4] = {70, 90, 10, 30}; /* two pieces: values and scales are both copies */
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.num_row_pieces = 2;
  shard.row_pieces = pieces;
  reset_allocator(1, ALLOC_SAME_AS, NULL); /* same_as 0 */
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = chosen_allocator;
  v = sc = SENTINEL;
  st = export_shard(r.t, &shard, &o, &v, &sc);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "export_shard (options.shard): status %d (%s)", st, mxfp8_last_error());
  EXPECT(v == SENTINEL && sc == SENTINEL, "an output was written on failure");
  expect_allocations_deleted(0);
  free_allocations();
  free_rowwise(&r);


  /* A tensor of one call may come back in the next (the caller freed it in between): not refused. */
  reset_allocator(-1, ALLOC_GOOD, NULL);
  v = sc = SENTINEL;
  assert_int_equal(mxfp8_quantize(&in, &qo, &v, &sc, NULL, NULL), MXFP8_OK);
  release_managed(v);
  release_managed(sc);
  g_alloc.bad_call = 2; /* the next call's first allocation: the values tensor of the call before */
  g_alloc.mode = ALLOC_SAME_AS;
  g_alloc.same_as = 0;
  v = sc = SENTINEL;
  st = mxfp8_quantize(&in, &qo, &v, &sc, NULL, NULL);
  EXPECT(st == MXFP8_OK, "a tensor handed back again in a later call: status %d (%s)", st, mxfp8_last_error());
  EXPECT(v == &g_alloc.made[0]->managed, "the values output is not the tensor the allocator returned");
  release_managed(v);
  release_managed(sc);
  EXPECT(g_alloc.made[0]->deleter_calls == 2 && g_alloc.made[3]->deleter_calls == 1,
         "deleter calls %d and %d", g_alloc.made[0]->deleter_calls, g_alloc.made[3]->deleter_calls);
  free_allocations();
}

/* The allocator contract: a DLManagedTensorVersioned the library holds for the call's input (given to
 * mxfp8_tensor_create) returned as an output "is refused with MXFP8_ERROR_INVALID_ARGUMENT, and not
 * released". Before, the failed checks released it, freeing the handle's scales under it: their deleter
 * then ran twice. Through mxfp8_export_components (the padded scales' copy gets the tensor's own scales)
 * and nvfp4_export_components (the global scale gets the amax, the same shape and dtype). */
static void test_allocator_returning_an_input_tensor_is_refused(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 96, 21); /* padded (128, 4) scales: the export copies the compact (100, 3) */
  reset_allocator(0, ALLOC_GIVEN, NULL);
  g_alloc.given = &r.scales->managed;
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = chosen_allocator;
  DLManagedTensorVersioned *v = SENTINEL, *sc = SENTINEL;
  mxfp8_status st = mxfp8_export_components(r.t, &o, &v, &sc);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_export_components: status %d (%s)", st, mxfp8_last_error());
  EXPECT(strstr(mxfp8_last_error(), "input holds") != NULL, "message: %s", mxfp8_last_error());
  EXPECT(v == SENTINEL && sc == SENTINEL, "an output was written on failure");
  EXPECT(r.scales->deleter_calls == 0, "the handle's scales were released %d times by the call", r.scales->deleter_calls);
  free_rowwise(&r); /* asserts each deleter ran exactly once, at the release */

  nv_tensor n;
  assert_int_equal(make_nv(&n, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  reset_allocator(0, ALLOC_GIVEN, NULL);
  g_alloc.given = &n.amax->managed;
  mxfp8_export_options no = NVFP4_EXPORT_OPTIONS_INIT;
  no.allocator = chosen_allocator;
  DLManagedTensorVersioned *g = SENTINEL;
  st = nvfp4_export_components(n.t, &no, NULL, NULL, &g);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT, "nvfp4_export_components: status %d (%s)", st, mxfp8_last_error());
  EXPECT(g == SENTINEL, "the global scale was written on failure");
  EXPECT(n.amax->deleter_calls == 0, "the handle's amax was released %d times by the call", n.amax->deleter_calls);
  free_nv(&n, 1);
}

/* The allocator's contract ("Every field is checked before it is used") and the conventions' "Every
 * size, offset and stride is checked arithmetic: one that does not fit in int64 is
 * MXFP8_ERROR_INVALID_ARGUMENT": a result at byte_offset 2^63 (from data 0x1000: not past the end of the
 * address space, but no memory either) is refused by every call that allocates, never written through. */
static void test_allocator_result_at_byte_offset_2_63(void **state) {
  (void)state;
  mxfp8_status st;
  /* mxfp8_quantize */
  float in[2 * 64];
  for (int i = 0; i < 2 * 64; ++i) in[i] = (float)i;
  int64_t ishape[2] = {2, 64};
  DLTensor it = {in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ishape, NULL, 0};
  mxfp8_quantize_options qo = MXFP8_QUANTIZE_OPTIONS_INIT;
  qo.allocator = chosen_allocator;
  for (int bad = 0; bad < 2; ++bad) {
    reset_allocator(bad, ALLOC_OFFSET_2_63, NULL);
    DLManagedTensorVersioned *v = SENTINEL, *sc = SENTINEL;
    st = mxfp8_quantize(&it, &qo, &v, &sc, NULL, NULL);
    EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && v == SENTINEL && sc == SENTINEL, "quantize, call %d: %d (%s)", bad, st,
           mxfp8_last_error());
    expect_allocations_deleted(0);
    free_allocations();
  }
  /* mxfp8_export_components (a padded copy; options.shard of pieces), mxfp8_grouped_export (chosen experts) */
  rowwise_tensor r;
  make_rowwise(&r, 100, 64, 37);
  mxfp8_export_options eo = MXFP8_EXPORT_OPTIONS_INIT;
  eo.allocator = chosen_allocator;
  reset_allocator(0, ALLOC_OFFSET_2_63, NULL);
  DLManagedTensorVersioned *v = SENTINEL, *sc = SENTINEL;
  st = mxfp8_export_components(r.t, &eo, NULL, &sc);
  EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && sc == SENTINEL, "export_components: %d (%s)", st, mxfp8_last_error());
  expect_allocations_deleted(0);
  free_allocations();
  const int64_t pieces[4] = {50, 60, 0, 10};
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  shard.num_row_pieces = 2;
  shard.row_pieces = pieces;
  for (int bad = 0; bad < 2; ++bad) {
    reset_allocator(bad, ALLOC_OFFSET_2_63, NULL);
    v = SENTINEL, sc = SENTINEL;
    st = export_shard(r.t, &shard, &eo, &v, &sc);
    EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && v == SENTINEL && sc == SENTINEL, "export_shard, call %d: %d (%s)", bad,
           st, mxfp8_last_error());
    expect_allocations_deleted(0);
    free_allocations();
  }
  free_rowwise(&r);
  /* nvfp4_export_components */
  nv_tensor n;
  assert_int_equal(make_nv(&n, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  mxfp8_export_options no = NVFP4_EXPORT_OPTIONS_INIT;
  no.allocator = chosen_allocator;
  for (int bad = 0; bad < 2; ++bad) {
    reset_allocator(bad, ALLOC_OFFSET_2_63, NULL);
    DLManagedTensorVersioned *g = SENTINEL;
    sc = SENTINEL;
    st = nvfp4_export_components(n.t, &no, NULL, &sc, &g);
    EXPECT(st == MXFP8_ERROR_INVALID_ARGUMENT && sc == SENTINEL && g == SENTINEL, "nvfp4 export, call %d: %d (%s)", bad,
           st, mxfp8_last_error());
    expect_allocations_deleted(0);
    free_allocations();
  }
  free_nv(&n, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_export_shard_allocator_failures),
      cmocka_unit_test(test_grouped_export_chosen_experts_repeats_and_failures),
      cmocka_unit_test(test_nvfp4_export_allocator_failures),
      cmocka_unit_test(test_allocator_copies_over_each_other_are_refused),
      cmocka_unit_test(test_allocator_returning_one_tensor_twice_is_refused),
      cmocka_unit_test(test_allocator_returning_an_input_tensor_is_refused),
      cmocka_unit_test(test_allocator_result_at_byte_offset_2_63),
  };
  return cmocka_run_group_tests_name("the caller's allocator", tests, NULL, NULL);
}
