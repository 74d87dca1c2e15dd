/* The receiver's side of the transfer, TO_BUFFERS: a bucket (FROM_BUCKET, described by the sender's
 * parts) or a trainer's tensors (FROM_TENSORS) written into engine parameters, compact or 128x4 swizzled. Every expected byte is built here from the layout's
 * permute form (ref_swizzled_index), never by the library; destinations and every padding byte of the
 * sources are poisoned, shapes are partial along rows and K, and columnwise entries are included. */
#include <stdlib.h>
#include <string.h>

#include "import_support.h"

/* The engine's parameter buffers of one tensor, poisoned. */
typedef struct {
  uint8_t *values, *scales;
  int64_t values_shape[1], scales_shape[1];
  DLTensor values_tensor, scales_tensor;
} parameter;

static void make_parameter(parameter *p, const reference *ref, int32_t target, int32_t values_code) {
  p->values_shape[0] = ref->values_bytes;
  p->scales_shape[0] = target_bytes(ref, target);
  p->values = malloc((size_t)p->values_shape[0] + 1);
  p->scales = malloc((size_t)p->scales_shape[0] + 1);
  memset(p->values, POISON, (size_t)p->values_shape[0] + 1);
  memset(p->scales, POISON, (size_t)p->scales_shape[0] + 1);
  p->values_tensor = (DLTensor){p->values, {kDLCPU, 0}, 1, {(uint8_t)values_code, 8, 1}, p->values_shape, NULL, 0};
  p->scales_tensor = (DLTensor){p->scales, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, p->scales_shape, NULL, 0};
}

static void poison_parameter(parameter *p) {
  memset(p->values, POISON, (size_t)p->values_shape[0] + 1);
  memset(p->scales, POISON, (size_t)p->scales_shape[0] + 1);
}

/* The destination holds exactly the reference, and the byte past it is untouched. */
static void expect_parameter(const parameter *p, const reference *ref, int32_t target, const char *what, int i) {
  EXPECT(memcmp(p->values, ref->values, (size_t)ref->values_bytes) == 0, "%s: tensor %d values", what, i);
  const uint8_t *want = target == MXFP8_SCALE_LAYOUT_COMPACT ? ref->compact : ref->swizzled;
  const int64_t n = target_bytes(ref, target);
  for (int64_t b = 0; b < n; ++b)
    EXPECT(p->scales[b] == want[b], "%s: tensor %d (%s) scale byte %lld is %u, expected %u", what, i,
           target == MXFP8_SCALE_LAYOUT_COMPACT ? "compact" : "swizzled", (long long)b, p->scales[b], want[b]);
  EXPECT(p->values[ref->values_bytes] == POISON && p->scales[n] == POISON, "%s: tensor %d written past its end", what, i);
}

static void free_parameter(parameter *p) {
  free(p->values);
  free(p->scales);
}

/* ---------------------------------------------------------------------------------------------------- */
/* Buckets built by hand (not by a TO_BUCKET transfer): parts at odd offsets, gaps poisoned. */

enum { kBucketTensors = 9 };
static const spec kBucketSpecs[kBucketTensors] = {
    {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_COMPACT},
    {2, {257, 33, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {31, 1000, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_128X4},
    {2, {130, 200, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_COMPACT},
    {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {70, 33, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_COMPACT},
    {3, {3, 5, 40}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    {2, {0, 64, 0}, MXFP8_DIRECTION_ROWWISE, MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_128X4},
    /* A whole tile grid: swizzled to swizzled is then a plain copy with no padding. */
    {2, {256, 256, 0}, MXFP8_DIRECTION_COLUMNWISE, MXFP8_SCALE_LAYOUT_128X4, MXFP8_SCALE_LAYOUT_128X4},
};

typedef struct {
  reference ref[kBucketTensors];
  parameter param[kBucketTensors];
  DLTensor *values[kBucketTensors], *scales[kBucketTensors];
  int32_t targets[kBucketTensors];
  mxfp8_bucket_part entries[kBucketTensors];
  int32_t ndims[kBucketTensors], directions[kBucketTensors], layouts[kBucketTensors], formats[kBucketTensors];
  const int64_t *shapes[kBucketTensors];
  mxfp8_transfer_desc desc; /* FROM_BUCKET -> TO_BUFFERS over the arrays above */
  uint8_t *bucket;
  int64_t bucket_shape[1];
  DLTensor bucket_tensor;
} bucket_fixture;

/* Writes every tensor's parts into the bucket at its recorded offsets (after a refill of the refs). */
static void pack(bucket_fixture *f) {
  for (int i = 0; i < kBucketTensors; ++i) {
    const reference *ref = &f->ref[i];
    memcpy(f->bucket + f->entries[i].values_offset, ref->values, (size_t)ref->values_bytes);
    if (f->layouts[i] == MXFP8_SCALE_LAYOUT_COMPACT)
      memcpy(f->bucket + f->entries[i].scales_offset, ref->compact, (size_t)(ref->r * ref->c));
    else
      write_swizzled_poisoned(ref, f->directions[i] == MXFP8_DIRECTION_COLUMNWISE, f->bucket + f->entries[i].scales_offset);
  }
}

static void make_bucket(bucket_fixture *f, uint64_t seed) {
  uint64_t rng = seed;
  uint64_t at = 3; /* odd offsets: the unaligned paths are taken too */
  for (int i = 0; i < kBucketTensors; ++i) {
    const spec *s = &kBucketSpecs[i];
    f->ref[i] = make_reference(s, &rng);
    f->ndims[i] = s->ndim;
    f->shapes[i] = s->shape;
    f->directions[i] = s->direction;
    f->layouts[i] = s->source_layout;
    f->entries[i].values_offset = at;
    f->entries[i].values_bytes = (uint64_t)f->ref[i].values_bytes;
    at += f->entries[i].values_bytes + (i % 2 ? 16 : 5);
    f->entries[i].scales_offset = at;
    f->entries[i].scales_bytes = (uint64_t)target_bytes(&f->ref[i], s->source_layout);
    at += f->entries[i].scales_bytes + 7;
    make_parameter(&f->param[i], &f->ref[i], s->target, i % 3 == 0 ? kDLFloat8_e4m3fn : kDLUInt);
    f->values[i] = &f->param[i].values_tensor;
    f->scales[i] = &f->param[i].scales_tensor;
    f->targets[i] = s->target;
    f->formats[i] = MXFP8_FORMAT_E4M3;
    f->entries[i].amax_offset = f->entries[i].amax_bytes = 0;
  }
  f->bucket_shape[0] = (int64_t)at;
  f->bucket = malloc(at);
  memset(f->bucket, POISON, at);
  f->bucket_tensor = (DLTensor){f->bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, f->bucket_shape, NULL, 0};
  pack(f);
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, kBucketTensors);
  d.bucket_in = &f->bucket_tensor;
  d.parts_in = f->entries;
  d.ndims = f->ndims;
  d.shapes = f->shapes;
  d.formats = f->formats;
  d.directions = f->directions;
  d.source_layouts = f->layouts;
  d.values = f->values;
  d.scales = f->scales;
  d.target_layouts = f->targets;
  f->desc = d;
}

static void free_bucket(bucket_fixture *f) {
  for (int i = 0; i < kBucketTensors; ++i) {
    free_reference(&f->ref[i]);
    free_parameter(&f->param[i]);
  }
  free(f->bucket);
}

static void test_bucket_import_writes_every_layout_exactly(void **state) {
  (void)state;
  bucket_fixture f;
  make_bucket(&f, 11);
  uint8_t *before = malloc((size_t)f.bucket_shape[0]);
  memcpy(before, f.bucket, (size_t)f.bucket_shape[0]);
  assert_int_equal(mxfp8_transfer(&f.desc, NULL), MXFP8_OK);
  for (int i = 0; i < kBucketTensors; ++i) expect_parameter(&f.param[i], &f.ref[i], kBucketSpecs[i].target, "import", i);
  EXPECT(memcmp(before, f.bucket, (size_t)f.bucket_shape[0]) == 0, "the bucket was written");
  free(before);
  free_bucket(&f);
}

static void test_prepared_bucket_import_reads_the_bucket_at_each_run(void **state) {
  (void)state;
  bucket_fixture f;
  make_bucket(&f, 12);
  mxfp8_plan *plan = NULL;
  assert_int_equal(mxfp8_transfer_prepare(&f.desc, &plan), MXFP8_OK);
  for (int i = 0; i < kBucketTensors; ++i) EXPECT(f.param[i].scales[0] == POISON, "preparing wrote destination %d", i);
  for (int step = 0; step < 3; ++step) {
    /* A new refit: new values and scales in the same bucket, parameters poisoned again. */
    uint64_t rng = 1000 + (uint64_t)step;
    for (int i = 0; i < kBucketTensors; ++i) {
      free_reference(&f.ref[i]);
      f.ref[i] = make_reference(&kBucketSpecs[i], &rng);
      poison_parameter(&f.param[i]);
    }
    pack(&f);
    assert_int_equal(mxfp8_plan_run(plan, NULL), MXFP8_OK);
    for (int i = 0; i < kBucketTensors; ++i) expect_parameter(&f.param[i], &f.ref[i], kBucketSpecs[i].target, "run", i);
  }
  mxfp8_plan_release(plan);
  free_bucket(&f);
}

/* The two halves meet: a TO_BUCKET transfer on the sender, a FROM_BUCKET one on the receiver with the
 * parts mxfp8_bucket_parts gave (compact scales: the sender's target_layouts were NULL). */
static void test_exported_bucket_imports_into_swizzled_parameters(void **state) {
  (void)state;
  uint64_t rng = 21;
  enum { T = 2 };
  const spec specs[T] = {{2, {200, 100, 0}, 0, 1, MXFP8_SCALE_LAYOUT_128X4}, {2, {45, 64, 0}, 0, 1, MXFP8_SCALE_LAYOUT_COMPACT}};
  reference ref[T];
  test_tensor *data[T], *scales[T];
  mxfp8_tensor *t[T];
  parameter p[T];
  DLTensor *out_values[T], *out_scales[T];
  int32_t targets[T];
  for (int i = 0; i < T; ++i) {
    ref[i] = make_reference(&specs[i], &rng);
    data[i] = test_tensor_new(2, specs[i].shape, kDLUInt, 0);
    memcpy(data[i]->buffer, ref[i].values, (size_t)ref[i].values_bytes);
    const int64_t sshape[1] = {ref[i].swizzled_bytes};
    scales[i] = test_tensor_new(1, sshape, kDLUInt, 0);
    write_swizzled_poisoned(&ref[i], 0, scales[i]->buffer);
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    desc.rowwise_data = &data[i]->managed;
    desc.rowwise_scale_inv = &scales[i]->managed;
    assert_int_equal(mxfp8_tensor_create(&desc, &t[i]), MXFP8_OK);
    make_parameter(&p[i], &ref[i], specs[i].target, kDLUInt);
    out_values[i] = &p[i].values_tensor, out_scales[i] = &p[i].scales_tensor, targets[i] = specs[i].target;
  }
  mxfp8_transfer_desc send = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, T);
  send.tensors = (const mxfp8_tensor *const *)t;
  mxfp8_bucket_part entries[T];
  uint64_t total = 0;
  assert_int_equal(mxfp8_bucket_parts(&send, 256, entries, &total), MXFP8_OK);
  uint8_t *bytes = malloc(total);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor bucket = {bytes, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  send.bucket_out = &bucket;
  send.parts_out = entries;
  assert_int_equal(mxfp8_transfer(&send, NULL), MXFP8_OK);
  int32_t ndims[T] = {2, 2};
  const int64_t *shapes[T] = {specs[0].shape, specs[1].shape};
  const int32_t formats[T] = {MXFP8_FORMAT_E4M3, MXFP8_FORMAT_E4M3};
  const int32_t compact[T] = {MXFP8_SCALE_LAYOUT_COMPACT, MXFP8_SCALE_LAYOUT_COMPACT};
  mxfp8_transfer_desc receive = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_BUFFERS, T);
  receive.bucket_in = &bucket;
  receive.parts_in = entries;
  receive.ndims = ndims;
  receive.shapes = shapes;
  receive.formats = formats;
  receive.source_layouts = compact;
  receive.values = out_values;
  receive.scales = out_scales;
  receive.target_layouts = targets;
  assert_int_equal(mxfp8_transfer(&receive, NULL), MXFP8_OK);
  for (int i = 0; i < T; ++i) expect_parameter(&p[i], &ref[i], specs[i].target, "round trip", i);
  free(bytes);
  for (int i = 0; i < T; ++i) {
    mxfp8_tensor_release(t[i]);
    test_tensor_free(data[i]);
    test_tensor_free(scales[i]);
    free_parameter(&p[i]);
    free_reference(&ref[i]);
  }
}

/* ---------------------------------------------------------------------------------------------------- */
/* The direct path: Transformer Engine storage (padded row-major or swizzled, padding poisoned). */

enum { kDirect = 5 };
static const spec kDirectSpecs[kDirect] = {
    {2, {100, 48, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0},
    {2, {257, 33, 0}, MXFP8_DIRECTION_ROWWISE, 0, 0},
    {2, {70, 200, 0}, MXFP8_DIRECTION_COLUMNWISE, 1, 0},
    {2, {33, 130, 0}, MXFP8_DIRECTION_COLUMNWISE, 0, 0},
    {3, {2, 64, 96}, MXFP8_DIRECTION_ROWWISE, 1, 0},
};

/* Each TE tensor into compact and into swizzled parameters, immediate and prepared (the tensors of one
 * direction per transfer). */
static void test_direct_import_from_te_storage(void **state) {
  (void)state;
  uint64_t rng = 31;
  te_tensor te[kDirect];
  for (int i = 0; i < kDirect; ++i) te[i] = make_te(&kDirectSpecs[i], &rng);
  for (int target = 0; target < 2; ++target)
    for (int prepared = 0; prepared < 2; ++prepared)
      for (int32_t direction = 0; direction < 2; ++direction) {
        const mxfp8_tensor *tensors[kDirect];
        parameter p[kDirect];
        DLTensor *values[kDirect], *scales[kDirect];
        int32_t targets[kDirect], directions[kDirect];
        int idx[kDirect], n = 0;
        for (int i = 0; i < kDirect; ++i) {
          if (kDirectSpecs[i].direction != direction) continue;
          idx[n] = i;
          tensors[n] = te[i].handle;
          make_parameter(&p[n], &te[i].ref, target, kDLUInt);
          values[n] = &p[n].values_tensor, scales[n] = &p[n].scales_tensor, targets[n] = target;
          directions[n] = direction;
          ++n;
        }
        mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, (size_t)n);
        d.tensors = tensors;
        d.directions = directions;
        d.values = values;
        d.scales = scales;
        d.target_layouts = targets;
        if (prepared) {
          mxfp8_plan *plan = NULL;
          assert_int_equal(mxfp8_transfer_prepare(&d, &plan), MXFP8_OK);
          for (int j = 0; j < n; ++j) EXPECT(p[j].values[0] == POISON, "preparing wrote tensor %d", idx[j]);
          assert_int_equal(mxfp8_plan_run(plan, NULL), MXFP8_OK);
          mxfp8_plan_release(plan);
        } else {
          assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_OK);
        }
        for (int j = 0; j < n; ++j) {
          expect_parameter(&p[j], &te[idx[j]].ref, target, prepared ? "prepared direct" : "direct", idx[j]);
          free_parameter(&p[j]);
        }
      }
  for (int i = 0; i < kDirect; ++i) free_te(&te[i]);
}

/* A plan keeps its tensors alive: their deleters run at the plan's release, not the handle's. */
static void test_prepared_direct_import_holds_its_tensors(void **state) {
  (void)state;
  uint64_t rng = 41;
  const spec s = {2, {40, 64, 0}, MXFP8_DIRECTION_ROWWISE, 1, 0};
  reference ref = make_reference(&s, &rng);
  test_tensor *data = test_tensor_new(2, s.shape, kDLUInt, 1);
  memcpy(data->buffer, ref.values, (size_t)ref.values_bytes);
  const int64_t sshape[1] = {ref.swizzled_bytes};
  test_tensor *scales = test_tensor_new(1, sshape, kDLUInt, 1);
  write_swizzled_poisoned(&ref, 0, scales->buffer);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  parameter p;
  make_parameter(&p, &ref, MXFP8_SCALE_LAYOUT_128X4, kDLUInt);
  DLTensor *out_values[1] = {&p.values_tensor}, *out_scales[1] = {&p.scales_tensor};
  const int32_t targets[1] = {MXFP8_SCALE_LAYOUT_128X4};
  mxfp8_plan *plan = NULL;
  const mxfp8_tensor *ts[1] = {t};
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
  d.tensors = ts;
  d.values = out_values;
  d.scales = out_scales;
  d.target_layouts = targets;
  assert_int_equal(mxfp8_transfer_prepare(&d, &plan), MXFP8_OK);
  mxfp8_tensor_release(t);
  EXPECT(data->deleter_calls == 0 && scales->deleter_calls == 0, "the plan let its tensor go");
  assert_int_equal(mxfp8_plan_run(plan, NULL), MXFP8_OK);
  expect_parameter(&p, &ref, MXFP8_SCALE_LAYOUT_128X4, "held", 0);
  mxfp8_plan_release(plan);
  EXPECT(data->deleter_calls == 1 && scales->deleter_calls == 1, "deleters ran %d and %d times", data->deleter_calls,
         scales->deleter_calls);
  free_parameter(&p);
  free_reference(&ref);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* A failing entry leaves every destination untouched, the earlier good ones included. */
static void test_a_bad_entry_writes_nothing(void **state) {
  (void)state;
  bucket_fixture f;
  make_bucket(&f, 51);
  f.layouts[4] = MXFP8_SCALE_LAYOUT_128X4; /* tensor 4's part holds compact scales */
  assert_int_equal(mxfp8_transfer(&f.desc, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.parts_in[4] gives 600 bytes of scales, its shape and 128x4 swizzled layout give 1024");
  for (int i = 0; i < kBucketTensors; ++i) {
    for (int64_t b = 0; b <= f.param[i].values_shape[0]; ++b) EXPECT(f.param[i].values[b] == POISON, "tensor %d values written", i);
    for (int64_t b = 0; b <= f.param[i].scales_shape[0]; ++b) EXPECT(f.param[i].scales[b] == POISON, "tensor %d scales written", i);
  }
  free_bucket(&f);
}

/* What a sender wrote passes mxfp8_transfer_check of the FROM_BUCKET side (with the scales' shapes, any
 * split of S's rows in the leading dimensions; with the bucket on a device this build cannot touch, whose
 * bytes the check never reads), and an import given the same shapes writes every byte as before. */
static void test_manifest_check_accepts_what_the_sender_wrote(void **state) {
  (void)state;
  bucket_fixture f;
  make_bucket(&f, 61);
  int64_t scales_shape[kBucketTensors][3];
  const int64_t *scales_shapes[kBucketTensors];
  int32_t scales_ndims[kBucketTensors];
  for (int i = 0; i < kBucketTensors; ++i) {
    const spec *s = &kBucketSpecs[i];
    scales_ndims[i] = 2;
    scales_shape[i][0] = f.ref[i].r, scales_shape[i][1] = f.ref[i].c;
    if (s->ndim == 3) { /* rowwise (*lead, ceil(K/32)), as the bindings write it */
      scales_ndims[i] = 3;
      scales_shape[i][0] = s->shape[0], scales_shape[i][1] = s->shape[1], scales_shape[i][2] = f.ref[i].c;
    }
    scales_shapes[i] = scales_shape[i];
  }
  EXPECT(transfer_check_source(&f.desc) == MXFP8_OK, "check: %s", mxfp8_last_error());
  f.desc.scales_ndims = scales_ndims;
  f.desc.scales_shapes = scales_shapes;
  EXPECT(transfer_check_source(&f.desc) == MXFP8_OK, "check: %s", mxfp8_last_error());
  DLTensor on_gpu = f.bucket_tensor;
  on_gpu.device = (DLDevice){kDLCUDA, 0};
  mxfp8_transfer_desc gpu = f.desc;
  gpu.bucket_in = &on_gpu;
  EXPECT(transfer_check_source(&gpu) == MXFP8_OK, "check of a CUDA bucket: %s", mxfp8_last_error());
  const mxfp8_transfer_desc empty = transfer_desc(MXFP8_TRANSFER_FROM_BUCKET, MXFP8_TRANSFER_TO_NOTHING, 0);
  EXPECT(mxfp8_transfer_check(&empty) == MXFP8_OK, "an empty bucket description needs no bucket: %s", mxfp8_last_error());
  assert_int_equal(mxfp8_transfer(&f.desc, NULL), MXFP8_OK);
  for (int i = 0; i < kBucketTensors; ++i) expect_parameter(&f.param[i], &f.ref[i], kBucketSpecs[i].target, "checked shapes", i);
  free_bucket(&f);
}

/* A manifest whose parts share bytes describes no bucket a sender filled: the import and the check refuse
 * it with the same message, and nothing is written. Tensor 0's scales said to lie inside its own values
 * were imported from the value bytes before. */
static void test_parts_sharing_bucket_bytes_are_refused(void **state) {
  (void)state;
  bucket_fixture f;
  make_bucket(&f, 71);
  f.entries[0].scales_offset = f.entries[0].values_offset + 64;
  assert_int_equal(transfer_check_source(&f.desc), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.parts_in[0] scales (bytes 67..267) and desc.parts_in[0] values (bytes 3..4803) "
                             "overlap in the bucket");
  assert_int_equal(mxfp8_transfer(&f.desc, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.parts_in[0] scales (bytes 67..267) and desc.parts_in[0] values (bytes 3..4803) "
                             "overlap in the bucket");
  /* Two entries over the same bytes: tensor 1's values said to start where tensor 0's do. */
  free_bucket(&f);
  make_bucket(&f, 72);
  f.entries[1].values_offset = f.entries[0].values_offset;
  assert_int_equal(mxfp8_transfer(&f.desc, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.parts_in[0] values");
  assert_last_error_contains("overlap in the bucket");
  for (int i = 0; i < kBucketTensors; ++i) {
    for (int64_t b = 0; b <= f.param[i].values_shape[0]; ++b) EXPECT(f.param[i].values[b] == POISON, "tensor %d values written", i);
    for (int64_t b = 0; b <= f.param[i].scales_shape[0]; ++b) EXPECT(f.param[i].scales[b] == POISON, "tensor %d scales written", i);
  }
  free_bucket(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bucket_import_writes_every_layout_exactly),
      cmocka_unit_test(test_prepared_bucket_import_reads_the_bucket_at_each_run),
      cmocka_unit_test(test_exported_bucket_imports_into_swizzled_parameters),
      cmocka_unit_test(test_direct_import_from_te_storage),
      cmocka_unit_test(test_prepared_direct_import_holds_its_tensors),
      cmocka_unit_test(test_a_bad_entry_writes_nothing),
      cmocka_unit_test(test_manifest_check_accepts_what_the_sender_wrote),
      cmocka_unit_test(test_parts_sharing_bucket_bytes_are_refused),
  };
  return cmocka_run_group_tests_name("import into engine parameters", tests, NULL, NULL);
}
