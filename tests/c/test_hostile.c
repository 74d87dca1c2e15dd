/* The conventions every call keeps against a hostile caller. Valid input the library must get right, not
 * refuse: allocators that place their tensor at a byte_offset, empty tensors with astronomically many rows
 * (work must follow bytes, not a dimension), NULL data for empty buffers, pinned-memory sources whose
 * copies are not pinned, calls whose inputs legitimately share bytes, option structs from a newer caller.
 * And input that must be refused without a write: a byte_offset past int64, device pointers in a build
 * without CUDA, NULL arguments. The table of single refusals is test_bad_input.c (and docs/errors.md). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tensor_fixtures.h"
#include "test_support.h"

/* An allocator whose tensors start `kOffset` bytes into their allocation, expressed as byte_offset, the
 * way a framework hands out a slice of a larger buffer. */
enum { kOffset = 64 };
static int offset_made, offset_deleted;

typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[8];
  uint8_t *block;
} offset_tensor;

static void offset_deleter(DLManagedTensorVersioned *self) {
  offset_tensor *t = (offset_tensor *)self->manager_ctx;
  offset_deleted++;
  free(t->block);
  free(t);
}

static int offset_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                            void (*set_error)(void *, const char *, const char *)) {
  (void)error_ctx;
  (void)set_error;
  size_t bytes = 1;
  offset_tensor *t = calloc(1, sizeof *t);
  for (int i = 0; i < prototype->ndim; ++i) bytes *= (size_t)prototype->shape[i], t->shape[i] = prototype->shape[i];
  t->block = malloc(bytes + 2 * kOffset);
  memset(t->block, POISON, bytes + 2 * kOffset);
  t->managed.version.major = DLPACK_MAJOR_VERSION;
  t->managed.version.minor = DLPACK_MINOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = offset_deleter;
  t->managed.dl_tensor = *prototype;
  t->managed.dl_tensor.shape = t->shape;
  t->managed.dl_tensor.strides = NULL;
  t->managed.dl_tensor.data = t->block;
  t->managed.dl_tensor.byte_offset = kOffset;
  offset_made++;
  *out = &t->managed;
  return 0;
}

static const uint8_t *bytes_of(const DLManagedTensorVersioned *m) {
  return (const uint8_t *)m->dl_tensor.data + m->dl_tensor.byte_offset;
}

/* The byte_offset of an allocator's tensor is where the output starts: quantize writes there and only
 * there (the 64 bytes before it and after it keep their poison). */
static void test_quantize_honours_allocator_byte_offset(void **state) {
  (void)state;
  enum { M = 64, K = 64 };
  static float input[M * K];
  for (int i = 0; i < M * K; ++i) input[i] = (float)((i * 37) % 199) - 99.0f;
  int64_t shape[2] = {M, K};
  DLTensor in = {input, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
  /* The reference: the same quantize into caller buffers. */
  uint8_t ref_values[M * K], ref_scales[M * 2];
  int64_t scale_shape[2] = {M, 2};
  DLTensor rv = {ref_values, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, shape, NULL, 0};
  DLTensor rs = {ref_scales, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, scale_shape, NULL, 0};
  assert_int_equal(mxfp8_quantize_into(&in, NULL, &rv, &rs, NULL, NULL), MXFP8_OK);

  mxfp8_quantize_options o = MXFP8_QUANTIZE_OPTIONS_INIT;
  o.allocator = offset_allocator;
  offset_made = offset_deleted = 0;
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_quantize(&in, &o, &v, &s, NULL, NULL), MXFP8_OK);
  assert_int_equal(offset_made, 2);
  assert_int_equal(v->dl_tensor.byte_offset, kOffset);
  EXPECT(memcmp(bytes_of(v), ref_values, sizeof ref_values) == 0, "values written at the allocator's byte_offset");
  EXPECT(memcmp(bytes_of(s), ref_scales, sizeof ref_scales) == 0, "scales written at the allocator's byte_offset");
  const uint8_t *block = (const uint8_t *)v->dl_tensor.data;
  for (int i = 0; i < kOffset; ++i) {
    EXPECT(block[i] == POISON, "byte %d before the values was written", i);
    EXPECT(block[kOffset + M * K + i] == POISON, "byte %d after the values was written", i);
  }
  release_managed(v);
  release_managed(s);
  assert_int_equal(offset_deleted, 2);
}

/* The same for an export's scale copy. */
static void test_export_honours_allocator_byte_offset(void **state) {
  (void)state;
  const int64_t shape[2] = {100, 48}, padded[2] = {128, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 0), *scales = test_tensor_new(2, padded, kDLUInt, 0);
  uint64_t rng = 11;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.allocator = offset_allocator;
  DLManagedTensorVersioned *s = NULL;
  assert_int_equal(mxfp8_export_components(t, &o, NULL, &s), MXFP8_OK);
  const uint8_t *out = bytes_of(s);
  for (int r = 0; r < 100; ++r)
    for (int c = 0; c < 2; ++c) EXPECT(out[r * 2 + c] == scales->buffer[r * 4 + c], "scale (%d, %d)", r, c);
  const uint8_t *block = (const uint8_t *)s->dl_tensor.data;
  for (int i = 0; i < kOffset; ++i) EXPECT(block[i] == POISON && block[kOffset + 200 + i] == POISON, "byte %d", i);
  release_managed(s);
  mxfp8_tensor_release(t);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* A (2^40, 0) tensor has no bytes: each call returns at once instead of visiting 2^40 empty rows (which
 * took an hour). ctest's timeout for this executable would catch a regression. */
static void test_empty_tensors_with_huge_dimensions_cost_nothing(void **state) {
  (void)state;
  const int64_t rows = (int64_t)1 << 40;
  int64_t shape[2] = {rows, 0}, swizzled_shape[1] = {0};
  DLManagedTensorVersioned data = borrowed_bytes(NULL, kDLCPU, 2, shape), scales = data;
  for (int layout = 0; layout < 2; ++layout) {
    scales.dl_tensor.shape = layout ? swizzled_shape : shape;
    scales.dl_tensor.ndim = layout ? 1 : 2;
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = layout;
    desc.rowwise_data = &data;
    desc.rowwise_scale_inv = &scales;
    mxfp8_tensor *t = NULL;
    assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
    int64_t none[1] = {0};
    DLTensor dst = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, none, NULL, 0};
    DLTensor *dsts[1] = {&dst};
    const mxfp8_tensor *ts[1] = {t};
    assert_int_equal(mxfp8_export_scales_batched(ts, dsts, 1, NULL), MXFP8_OK);
    DLManagedTensorVersioned *s = NULL;
    assert_int_equal(mxfp8_export_components(t, NULL, NULL, &s), MXFP8_OK);
    release_managed(s);
    mxfp8_transfer_desc to_bucket = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 1);
    to_bucket.tensors = ts;
    mxfp8_bucket_part e;
    uint64_t total = 1;
    assert_int_equal(mxfp8_bucket_parts(&to_bucket, 256, &e, &total), MXFP8_OK);
    assert_int_equal(total, 0);
    DLTensor bucket = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, none, NULL, 0};
    to_bucket.bucket_out = &bucket;
    to_bucket.parts_out = &e;
    assert_int_equal(mxfp8_transfer(&to_bucket, NULL), MXFP8_OK);
    mxfp8_tensor_release(t);
  }
  /* The same through the low-level pair and a grouped expert. */
  DLTensor compact = {NULL, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, shape, NULL, 0};
  DLTensor swizzled = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, swizzled_shape, NULL, 0};
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &compact, NULL), MXFP8_OK);
  int64_t flat[1] = {0};
  DLManagedTensorVersioned gdata = data, gscales = data;
  gdata.dl_tensor.shape = flat;
  gdata.dl_tensor.ndim = 1;
  gscales.dl_tensor = gdata.dl_tensor;
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = 1;
  g.cols = 0;
  g.uniform_rows = rows;
  g.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  g.data = &gdata;
  g.scale_inv = &gscales;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  mxfp8_tensor *expert = NULL;
  assert_int_equal(mxfp8_grouped_expert(grouped, 0, &expert), MXFP8_OK);
  int64_t none[1] = {0};
  DLTensor dst = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, none, NULL, 0};
  DLTensor *dsts[1] = {&dst};
  const mxfp8_tensor *ts[1] = {expert};
  assert_int_equal(mxfp8_export_scales_batched(ts, dsts, 1, NULL), MXFP8_OK);
  mxfp8_tensor_release(expert);
  mxfp8_grouped_tensor_release(grouped);
}

/* Every stride an output carries is an int64 that fits, also for an empty tensor whose non-zero
 * dimensions multiply past INT64_MAX: (0, 2^62, 3) has no elements, but the row-major stride of its first
 * dimension, 2^62 * 3, does not fit. Found by fuzz/fuzz_hostile.cpp: the library computed it with a
 * wrapping multiplication (UBSan: signed integer overflow in compact_strides and strided_rows; the
 * production build handed out a stride of -2^62). Any non-negative strides describe an empty tensor. */
static void check_strides_fit(const DLManagedTensorVersioned *m) {
  const DLTensor *t = &m->dl_tensor;
  assert_non_null(t->strides);
  for (int i = 0; i < t->ndim; ++i) EXPECT(t->strides[i] >= 0, "stride %d of an empty output is %lld", i, (long long)t->strides[i]);
}

static void test_empty_tensors_whose_strides_would_overflow(void **state) {
  (void)state;
  const int64_t big = (int64_t)1 << 62;
  /* mxfp8_quantize allocates (0, 2^62, 3) values and (0, 2^62, 1) compact scales. */
  int64_t shape[3] = {0, big, 3};
  DLTensor in = {NULL, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_quantize(&in, NULL, &v, &s, NULL, NULL), MXFP8_OK);
  check_strides_fit(v);
  check_strides_fit(s);
  release_managed(v);
  release_managed(s);

  /* mxfp8_export_components views (0, 2^62, 33) values and its scales, (0, 2^62, 2) rows of stride 2. */
  int64_t data_shape[3] = {0, big, 33}, scale_shape[2] = {0, 2};
  DLManagedTensorVersioned data = borrowed_bytes(NULL, kDLCPU, 3, data_shape);
  DLManagedTensorVersioned scales = borrowed_bytes(NULL, kDLCPU, 2, scale_shape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  assert_int_equal(mxfp8_export_components(t, NULL, &v, &s), MXFP8_OK);
  check_strides_fit(v);
  check_strides_fit(s);
  release_managed(v);
  release_managed(s);
  mxfp8_tensor_release(t);
}

/* Empty buffers may carry a NULL data pointer (valid DLPack); nothing is written through it. */
static void test_empty_buffers_with_null_data(void **state) {
  (void)state;
  int64_t cshape[2] = {0, 4}, sshape[1] = {0};
  DLTensor compact = {NULL, {kDLCPU, 0}, 2, {kDLUInt, 8, 1}, cshape, NULL, 0};
  DLTensor swizzled = {NULL, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, sshape, NULL, 0};
  assert_int_equal(mxfp8_swizzle_scales(&compact, &swizzled, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_unswizzle_scales(&swizzled, &compact, NULL), MXFP8_OK);
  /* count 0 needs nothing else, for a transfer into a bucket as for batched exports */
  const mxfp8_transfer_desc empty = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 0);
  assert_int_equal(mxfp8_transfer(&empty, NULL), MXFP8_OK);
  assert_int_equal(mxfp8_export_scales_batched(NULL, NULL, 0, NULL), MXFP8_OK);
}

/* Copies the library allocates for a kDLCUDAHost (pinned) source are plain malloc memory, and say so:
 * kDLCPU. Views keep the source's device. */
static void test_copies_of_pinned_sources_are_labelled_cpu(void **state) {
  (void)state;
  const int64_t shape[2] = {100, 48}, padded[2] = {128, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 0), *scales = test_tensor_new(2, padded, kDLUInt, 0);
  uint64_t rng = 3;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  data->managed.dl_tensor.device.device_type = kDLCUDAHost;
  scales->managed.dl_tensor.device.device_type = kDLCUDAHost;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  DLManagedTensorVersioned *v = NULL, *s = NULL;
  assert_int_equal(mxfp8_export_components(t, NULL, &v, &s), MXFP8_OK);
  assert_int_equal(v->dl_tensor.device.device_type, kDLCUDAHost);
  assert_int_equal(s->dl_tensor.device.device_type, kDLCPU);
  EXPECT(s->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "the scales are a copy");
  release_managed(v);
  release_managed(s);
  mxfp8_tensor_release(t);

  float input[64];
  for (int i = 0; i < 64; ++i) input[i] = (float)i;
  int64_t in_shape[1] = {64};
  DLTensor in = {input, {kDLCUDAHost, 0}, 1, {kDLFloat, 32, 1}, in_shape, NULL, 0};
  DLManagedTensorVersioned *qv = NULL, *qs = NULL;
  assert_int_equal(mxfp8_quantize(&in, NULL, &qv, &qs, NULL, NULL), MXFP8_OK);
  assert_int_equal(qv->dl_tensor.device.device_type, kDLCPU);
  assert_int_equal(qs->dl_tensor.device.device_type, kDLCPU);
  release_managed(qv);
  release_managed(qs);
  test_tensor_free(data);
  test_tensor_free(scales);
}

/* Inputs may share bytes with each other (only outputs must be apart): one tensor exported twice in one
 * batch, into two destinations. */
static void test_inputs_may_share_bytes(void **state) {
  (void)state;
  const int64_t shape[2] = {100, 48}, padded[2] = {128, 4};
  test_tensor *data = test_tensor_new(2, shape, kDLUInt, 0), *scales = test_tensor_new(2, padded, kDLUInt, 0);
  uint64_t rng = 4;
  fill_random_scales(scales->buffer, scales->bytes, &rng);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &scales->managed;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  uint8_t out[400];
  memset(out, POISON, sizeof out);
  int64_t dshape[1] = {200};
  DLTensor d0 = {out, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, dshape, NULL, 0};
  DLTensor d1 = {out + 200, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, dshape, NULL, 0};
  DLTensor *dsts[2] = {&d0, &d1};
  const mxfp8_tensor *ts[2] = {t, t};
  assert_int_equal(mxfp8_export_scales_batched(ts, dsts, 2, NULL), MXFP8_OK);
  for (int r = 0; r < 100; ++r)
    for (int c = 0; c < 2; ++c) {
      EXPECT(out[r * 2 + c] == scales->buffer[r * 4 + c], "first copy (%d, %d)", r, c);
      EXPECT(out[200 + r * 2 + c] == scales->buffer[r * 4 + c], "second copy (%d, %d)", r, c);
    }
  mxfp8_tensor_release(t);
  test_tensor_free(data);
  test_tensor_free(scales);
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
 * Device memory is never touched from the host. In a build without CUDA, tensors labelled kDLCUDA whose
 * data pointers are not host memory at all (a host read or write would crash) are described and viewed,
 * and every call that would move their bytes answers MXFP8_ERROR_UNSUPPORTED ("Valid, but not something
 * this build can do") with no output written. (With CUDA compiled in these pointers would reach kernels:
 * the GPU tests cover that build.)
 * --------------------------------------------------------------------------------------------------- */

static void test_device_pointers_never_touched_without_cuda(void **state) {
  (void)state;
#ifdef MXFP8_TEST_WITH_CUDA
  skip();
#else
  void *const fake = (void *)(uintptr_t)0x1000; /* the first page is never mapped */
  void *const fake2 = (void *)(uintptr_t)0x90000;
  int64_t dshape[2] = {128, 64}, sshape[2] = {128, 4};
  DLManagedTensorVersioned data = borrowed_bytes(fake, kDLCUDA, 2, dshape);
  DLManagedTensorVersioned scales = borrowed_bytes(fake2, kDLCUDA, 2, sshape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scales;
  mxfp8_tensor *t = NULL;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  int64_t n512[1] = {512}, nv[1] = {128 * 64};
  DLTensor out_s = {(void *)(uintptr_t)0x200000, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, n512, NULL, 0};
  DLTensor out_v = {(void *)(uintptr_t)0x300000, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, nv, NULL, 0};
  for (int32_t target = 0; target <= TEST_LAST_LAYOUT; ++target) {
    int64_t need = 0;
    assert_int_equal(mxfp8_layout_bytes(target, 0, 128, 2, &need), MXFP8_OK);
    n512[0] = need;
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = target;
    const mxfp8_status st = mxfp8_convert(t, &o, &out_v, &out_s);
    EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "convert to target %d: status %d (%s)", target, st, mxfp8_last_error());
  }
  /* A shard: the one-range values are a view (fine without CUDA), the several-pieces copy is not. */
  const int64_t pieces[4] = {0, 10, 20, 30};
  mxfp8_shard shard = MXFP8_SHARD_INIT;
  DLManagedTensorVersioned *v = SENTINEL, *sc = SENTINEL;
  assert_int_equal(export_shard(t, &shard, NULL, &v, NULL), MXFP8_OK);
  EXPECT(v->dl_tensor.device.device_type == kDLCUDA, "the view is not on the device");
  release_managed(v);
  v = SENTINEL;
  shard.num_row_pieces = 2;
  shard.row_pieces = pieces;
  mxfp8_status st = export_shard(t, &shard, NULL, &v, &sc);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED && v == SENTINEL && sc == SENTINEL, "shard copy: status %d (%s)", st,
         mxfp8_last_error());
  const mxfp8_tensor *ts[1] = {t};
  const mxfp8_shard *shards[1] = {&shard};
  int64_t ns[1] = {20 * 2}, nvs[1] = {20 * 64};
  DLTensor ds = {(void *)(uintptr_t)0x200000, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, ns, NULL, 0};
  DLTensor dv = {(void *)(uintptr_t)0x300000, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, nvs, NULL, 0};
  DLTensor *dvs[1] = {&dv}, *dss[1] = {&ds};
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
  d.tensors = ts, d.shards = shards, d.values = dvs, d.scales = dss;
  st = mxfp8_transfer(&d, NULL);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "import of a shard: status %d (%s)", st, mxfp8_last_error());
  mxfp8_tensor_release(t);

  /* NVFP4: described and viewed; its scales copy, global scale, dequantize and quantize are device work. */
  int64_t nvd[2] = {40, 24}, nvsc[2] = {128, 4}, one[1] = {1};
  DLManagedTensorVersioned nd = borrowed_bytes(fake, kDLCUDA, 2, nvd), ns2 = borrowed_bytes(fake2, kDLCUDA, 2, nvsc);
  DLManagedTensorVersioned na = borrowed_bytes((void *)(uintptr_t)0x400000, kDLCUDA, 1, one);
  na.dl_tensor.dtype.code = kDLFloat;
  na.dl_tensor.dtype.bits = 32;
  mxfp8_tensor_desc nvdesc = NVFP4_TENSOR_DESC_INIT;
  nvdesc.rowwise_data = &nd;
  nvdesc.rowwise_scale_inv = &ns2;
  nvdesc.rowwise_amax = &na;
  mxfp8_tensor *nt = NULL;
  assert_int_equal(mxfp8_tensor_create(&nvdesc, &nt), MXFP8_OK);
  DLManagedTensorVersioned *g = SENTINEL;
  v = SENTINEL, sc = SENTINEL;
  st = nvfp4_export_components(nt, NULL, &v, &sc, &g);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED && v == SENTINEL && sc == SENTINEL && g == SENTINEL, "nvfp4 export: %d (%s)", st,
         mxfp8_last_error());
  int64_t nout[1] = {40 * 48};
  DLTensor out = {(void *)(uintptr_t)0x500000, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, nout, NULL, 0};
  st = mxfp8_dequantize(nt, NULL, &out);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "nvfp4 dequantize: %d (%s)", st, mxfp8_last_error());
  mxfp8_tensor_release(nt);
  int64_t ishape[2] = {40, 48}, qv[1] = {40 * 24}, qs[1] = {40 * 3};
  DLTensor in = {fake, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, ishape, NULL, 0};
  DLTensor qvt = {(void *)(uintptr_t)0x200000, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, qv, NULL, 0};
  DLTensor qst = {(void *)(uintptr_t)0x300000, {kDLCUDA, 0}, 1, {kDLUInt, 8, 1}, qs, NULL, 0};
  DLTensor qat = {(void *)(uintptr_t)0x400000, {kDLCUDA, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
  st = mxfp8_nvfp4_quantize_into((const DLTensor *[]){&in}, 1, NULL, (DLTensor *[]){&qvt}, (DLTensor *[]){&qst}, &qat);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "nvfp4 quantize: %d (%s)", st, mxfp8_last_error());
  DLTensor qvt2 = qvt, qst2 = qst;
  qvt2.data = (void *)(uintptr_t)0x600000, qst2.data = (void *)(uintptr_t)0x700000;
  const DLTensor *ins[2] = {&in, &in};
  DLTensor *qvs[2] = {&qvt, &qvt2}, *qss[2] = {&qst, &qst2};
  st = mxfp8_nvfp4_quantize_into(ins, 2, NULL, qvs, qss, &qat);
  EXPECT(st == MXFP8_ERROR_UNSUPPORTED, "nvfp4 fused quantize: %d (%s)", st, mxfp8_last_error());
#endif
}

/* "Work is proportional to the bytes moved: an empty tensor costs nothing, however large its other
 * dimensions. Empty buffers may have a NULL data pointer." Empty tensors of 2^40 rows (or 2^40 columns)
 * through shards, the transfer, convert, the grouped calls and NVFP4 quantize: each returns at once (ctest's timeout would catch a loop over 2^40 rows). */
static void test_empty_tensors_with_huge_dimensions_through_shards_convert_grouped_and_nvfp4(void **state) {
  (void)state;
  const int64_t big = (int64_t)1 << 40; /* a multiple of 128: the TRT-LLM targets take it */
  const int64_t shapes[2][2] = {{big, 0}, {0, big}};
  for (int which = 0; which < 2; ++which) {
    int64_t shape[2] = {shapes[which][0], shapes[which][1]}, sshape[2] = {shapes[which][0], which ? big / 32 : 0};
    if (which) sshape[0] = 0;
    DLManagedTensorVersioned data = borrowed_bytes(NULL, kDLCPU, 2, shape), scales = borrowed_bytes(NULL, kDLCPU, 2, sshape);
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.rowwise_data = &data;
    desc.rowwise_scale_inv = &scales;
    mxfp8_tensor *t = NULL;
    assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
    int64_t none[1] = {0};
    DLTensor empty = host_bytes(NULL, 1, none);
    DLTensor empty_v = host_bytes(NULL, 1, none);
    for (int32_t target = 0; target <= TEST_LAST_LAYOUT; ++target) {
      mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
      o.target = target;
      const mxfp8_status st = mxfp8_convert(t, &o, &empty_v, &empty);
      EXPECT(st == MXFP8_OK, "shape %d, target %d: status %d (%s)", which, target, st, mxfp8_last_error());
    }
    mxfp8_shard shard = MXFP8_SHARD_INIT;
    const int64_t pieces[4] = {0, which ? 0 : big / 2, which ? 0 : big / 4, which ? 0 : big};
    shard.num_row_pieces = 2;
    shard.row_pieces = pieces;
    DLManagedTensorVersioned *v = NULL, *sc = NULL;
    mxfp8_status st = export_shard(t, &shard, NULL, &v, &sc);
    EXPECT(st == MXFP8_OK, "shape %d: export_shard %d (%s)", which, st, mxfp8_last_error());
    if (st == MXFP8_OK) release_managed(v), release_managed(sc);
    const mxfp8_tensor *ts[1] = {t};
    const mxfp8_shard *shards[1] = {&shard};
    DLTensor *dvs[1] = {&empty_v}, *dss[1] = {&empty};
    mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
    d.tensors = ts, d.shards = shards, d.values = dvs, d.scales = dss;
    st = mxfp8_transfer(&d, NULL);
    EXPECT(st == MXFP8_OK, "shape %d: transfer of a shard %d (%s)", which, st, mxfp8_last_error());
    mxfp8_tensor_release(t);
    /* NVFP4 quantize of the same empty input. */
    DLTensor in = {NULL, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, NULL, 0};
    float amax = -1.0f;
    int64_t one[1] = {1};
    DLTensor at = {&amax, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
    st = mxfp8_nvfp4_quantize_into((const DLTensor *[]){&in}, 1, NULL, (DLTensor *[]){&empty_v}, (DLTensor *[]){&empty}, &at);
    EXPECT(st == MXFP8_OK && amax == 0.0f, "shape %d: nvfp4 quantize %d (%s), amax %g", which, st, mxfp8_last_error(),
           (double)amax);
  }
  /* Grouped: 1000 experts of 2^40 rows and K = 0, every target. */
  int64_t flat[1] = {0};
  DLManagedTensorVersioned gd = borrowed_bytes(NULL, kDLCPU, 1, flat), gs = borrowed_bytes(NULL, kDLCPU, 1, flat);
  mxfp8_grouped_desc g = MXFP8_GROUPED_DESC_INIT;
  g.num_experts = 1000, g.cols = 0, g.uniform_rows = big, g.scales = MXFP8_GROUPED_SCALES_COMPACT;
  g.data = &gd, g.scale_inv = &gs;
  mxfp8_grouped_tensor *grouped = NULL;
  assert_int_equal(mxfp8_grouped_tensor_create(&g, &grouped), MXFP8_OK);
  int64_t none[1] = {0};
  DLTensor empty = host_bytes(NULL, 1, none), empty_v = host_bytes(NULL, 1, none);
  for (int32_t target = 0; target <= TEST_LAST_LAYOUT; ++target) {
    mxfp8_convert_options o = MXFP8_CONVERT_OPTIONS_INIT;
    o.target = target;
    const mxfp8_status st = mxfp8_grouped_convert(grouped, &o, &empty_v, &empty);
    EXPECT(st == MXFP8_OK, "grouped target %d: status %d (%s)", target, st, mxfp8_last_error());
  }
  int32_t picks[3] = {999, 0, 999};
  DLManagedTensorVersioned *v = NULL, *sc = NULL;
  assert_int_equal(mxfp8_grouped_export(grouped, picks, 3, NULL, &v, &sc), MXFP8_OK);
  release_managed(v);
  release_managed(sc);
  mxfp8_grouped_tensor_release(grouped);
}

/* "A struct from a newer caller is accepted when the fields this library does not know are zero": the
 * option structs of convert, dequantize and the NVFP4 export given with 16 more bytes, zero (works as the struct alone) or not (refused with
 * MXFP8_ERROR_UNSUPPORTED, "not something this build can do", nothing written). */
typedef struct {
  uint8_t bytes[256];
} newer_struct;

static void *newer(newer_struct *n, const void *known, size_t size, int tail_byte) {
  memset(n, 0, sizeof *n);
  memcpy(n->bytes, known, size);
  const uint32_t bigger = (uint32_t)(size + 16);
  memcpy(n->bytes, &bigger, sizeof bigger); /* struct_size is the first field of every one */
  n->bytes[size + 7] = (uint8_t)tail_byte;
  return n->bytes;
}

static void test_newer_option_structs_of_convert_dequantize_and_nvfp4(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 100, 64, 29);
  nv_tensor nvt;
  assert_int_equal(make_nv(&nvt, 0, DLPACK_MAJOR_VERSION), MXFP8_OK);
  for (int tail = 0; tail < 2; ++tail) {
    const mxfp8_status want = tail ? MXFP8_ERROR_UNSUPPORTED : MXFP8_OK;
    newer_struct n;
    /* mxfp8_convert_options */
    mxfp8_convert_options co = MXFP8_CONVERT_OPTIONS_INIT;
    uint8_t out[200];
    memset(out, POISON, sizeof out);
    int64_t oshape[1] = {200};
    DLTensor ot = host_bytes(out, 1, oshape);
    mxfp8_status st = mxfp8_convert(r.t, newer(&n, &co, sizeof co, tail), NULL, &ot);
    EXPECT(st == want, "convert options, tail %d: %d (%s)", tail, st, mxfp8_last_error());
    EXPECT(tail ? all_poison(out, sizeof out) : memcmp(out, r.s, 200) == 0, "convert, tail %d: output", tail);
    /* mxfp8_shard */
    mxfp8_shard sh = MXFP8_SHARD_INIT;
    sh.row_end = 10;
    DLManagedTensorVersioned *v = SENTINEL;
    st = export_shard(r.t, newer(&n, &sh, sizeof sh, tail), NULL, &v, NULL);
    EXPECT(st == want, "shard, tail %d: %d (%s)", tail, st, mxfp8_last_error());
    if (st == MXFP8_OK) {
      EXPECT(v->dl_tensor.shape[0] == 10, "the shard's rows");
      release_managed(v);
    } else {
      EXPECT(v == SENTINEL, "an output on failure");
    }
    /* mxfp8_export_options */
    mxfp8_export_options eo = NVFP4_EXPORT_OPTIONS_INIT;
    DLManagedTensorVersioned *g = SENTINEL;
    st = nvfp4_export_components(nvt.t, newer(&n, &eo, sizeof eo, tail), NULL, NULL, &g);
    EXPECT(st == want, "nvfp4 export options, tail %d: %d (%s)", tail, st, mxfp8_last_error());
    if (st == MXFP8_OK) release_managed(g);
    else EXPECT(g == SENTINEL, "an output on failure");
    /* mxfp8_dequantize_options for mxfp8_dequantize */
    mxfp8_dequantize_options dq = MXFP8_DEQUANTIZE_OPTIONS_INIT;
    float *dout = malloc(40 * 48 * sizeof(float));
    memset(dout, POISON, 40 * 48 * sizeof(float));
    int64_t dshape[1] = {40 * 48};
    DLTensor dt = {dout, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, dshape, NULL, 0};
    st = mxfp8_dequantize(nvt.t, newer(&n, &dq, sizeof dq, tail), &dt);
    EXPECT(st == want, "dequantize options, tail %d: %d (%s)", tail, st, mxfp8_last_error());
    if (tail) EXPECT(all_poison((const uint8_t *)dout, 40 * 48 * sizeof(float)), "dequantize wrote on failure");
    free(dout);
    /* mxfp8_nvfp4_quantize_options */
    float in[4 * 32];
    for (int i = 0; i < 4 * 32; ++i) in[i] = (float)(i % 13) - 6.0f;
    uint8_t qv[64], qs[8];
    float amax = -1.0f;
    memset(qv, POISON, sizeof qv);
    int64_t ishape[2] = {4, 32}, qvs[1] = {64}, qss[1] = {8}, one[1] = {1};
    DLTensor it = {in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ishape, NULL, 0};
    DLTensor qvt = host_bytes(qv, 1, qvs), qst = host_bytes(qs, 1, qss);
    DLTensor at = {&amax, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
    mxfp8_nvfp4_quantize_options qo = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
    st = mxfp8_nvfp4_quantize_into((const DLTensor *[]){&it}, 1, newer(&n, &qo, sizeof qo, tail), (DLTensor *[]){&qvt}, (DLTensor *[]){&qst}, &at);
    EXPECT(st == want, "nvfp4 quantize options, tail %d: %d (%s)", tail, st, mxfp8_last_error());
    if (tail) EXPECT(all_poison(qv, sizeof qv) && amax == -1.0f, "nvfp4 quantize wrote on failure");
    /* mxfp8_tensor_desc */
    mxfp8_tensor_desc nd = NVFP4_TENSOR_DESC_INIT;
    nd.rowwise_data = &nvt.data->managed;
    nd.rowwise_scale_inv = &nvt.scales->managed;
    nd.rowwise_amax = &nvt.amax->managed;
    mxfp8_tensor *second = (mxfp8_tensor *)(uintptr_t)0xBAD0;
    st = mxfp8_tensor_create(newer(&n, &nd, sizeof nd, tail), &second);
    EXPECT(st == want, "nvfp4 desc, tail %d: %d (%s)", tail, st, mxfp8_last_error());
    if (st == MXFP8_OK) {
      /* A second handle on nvt's managed tensors: their (counting) deleters run once more when it goes,
       * which the counts below forget. */
      DLManagedTensorVersioned *g2 = NULL;
      assert_int_equal(nvfp4_export_components(second, NULL, NULL, NULL, &g2), MXFP8_OK);
      release_managed(g2);
      mxfp8_tensor_release(second);
      nvt.data->deleter_calls = nvt.scales->deleter_calls = nvt.amax->deleter_calls = 0;
    } else {
      EXPECT(second == (mxfp8_tensor *)(uintptr_t)0xBAD0, "*out written on failure");
    }
  }
  free_nv(&nvt, 1);
  free_rowwise(&r);
}

/* NULL in every pointer argument the transfer, the grouped calls and NVFP4 take (where the header does
 * not make NULL mean something): MXFP8_ERROR_INVALID_ARGUMENT, never a crash, no output written. */
static void test_null_pointer_arguments_of_the_transfer_grouped_and_nvfp4(void **state) {
  (void)state;
  rowwise_tensor r;
  make_rowwise(&r, 64, 64, 61);
  const mxfp8_tensor *ts[1] = {r.t};
  mxfp8_bucket_part e;
  uint64_t total = 77;
  uint8_t buf[64 * 64 + 64 * 2];
  int64_t bshape[1] = {sizeof buf};
  DLTensor bucket = host_bytes(buf, 1, bshape);
  mxfp8_plan *p = (mxfp8_plan *)(uintptr_t)0xBAD0;
  assert_int_equal(mxfp8_grouped_convert(NULL, NULL, NULL, &bucket), MXFP8_ERROR_INVALID_ARGUMENT);
  /* desc.tensors, the parts and the total of mxfp8_bucket_parts; tensors, parts_out and bucket_out of the
   * transfer and its preparation. */
  const mxfp8_tensor *null_ts[1] = {NULL};
  mxfp8_transfer_desc plan = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 1);
  assert_int_equal(mxfp8_bucket_parts(&plan, 1, &e, &total), MXFP8_ERROR_INVALID_ARGUMENT);
  plan.tensors = ts;
  assert_int_equal(mxfp8_bucket_parts(&plan, 1, NULL, &total), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_bucket_parts(&plan, 1, &e, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(total == 77, "a failed plan wrote the total");
  plan.tensors = null_ts;
  assert_int_equal(mxfp8_bucket_parts(&plan, 1, &e, &total), MXFP8_ERROR_INVALID_ARGUMENT);
  plan.tensors = ts;
  assert_int_equal(mxfp8_bucket_parts(&plan, 1, &e, &total), MXFP8_OK);
  mxfp8_transfer_desc fill = plan;
  fill.bucket_out = &bucket;
  assert_int_equal(mxfp8_transfer(&fill, NULL), MXFP8_ERROR_INVALID_ARGUMENT); /* parts_out NULL */
  fill.bucket_out = NULL, fill.parts_out = &e;
  assert_int_equal(mxfp8_transfer(&fill, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  fill.bucket_out = &bucket, fill.tensors = NULL;
  assert_int_equal(mxfp8_transfer(&fill, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  fill.tensors = ts, fill.parts_out = NULL;
  assert_int_equal(mxfp8_transfer_prepare(&fill, &p), MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(p == (mxfp8_plan *)(uintptr_t)0xBAD0, "*out written on failure");
  /* A NULL desc for every verb, a NULL out of an otherwise good preparation, a NULL plan to run. */
  mxfp8_bucket_part part = e;
  fill.parts_out = &part;
  assert_int_equal(mxfp8_transfer_check(&fill), MXFP8_OK);
  assert_int_equal(mxfp8_transfer_prepare(&fill, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_bucket_parts(NULL, 1, &part, &total), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_transfer(NULL, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_transfer_check(NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_transfer_prepare(NULL, &p), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_plan_run(NULL, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  mxfp8_plan_release(NULL);
  EXPECT(p == (mxfp8_plan *)(uintptr_t)0xBAD0, "*out written on failure");
  /* A NULL scales[0] (and values[0]), NULL values and scales arrays, a NULL tensor: refused. */
  DLTensor *null_buffers[1] = {NULL};
  mxfp8_transfer_desc into = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUFFERS, 1);
  into.tensors = ts, into.values = null_buffers, into.scales = null_buffers;
  assert_int_equal(mxfp8_transfer(&into, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  into.values = into.scales = NULL;
  assert_int_equal(mxfp8_transfer(&into, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  into.values = into.scales = null_buffers, into.tensors = null_ts;
  assert_int_equal(mxfp8_transfer(&into, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  into.tensors = ts;
  assert_int_equal(mxfp8_transfer_prepare(&into, &p), MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(p == (mxfp8_plan *)(uintptr_t)0xBAD0, "*out written on failure");
  uint8_t iv[64 * 64], is[64 * 2];
  int64_t ivs[1] = {sizeof iv}, iss[1] = {sizeof is};
  DLTensor ivt = host_bytes(iv, 1, ivs), ist = host_bytes(is, 1, iss);
  DLTensor *ivals[1] = {&ivt}, *iscs[1] = {&ist};
  mxfp8_transfer_desc import = MXFP8_TRANSFER_DESC_INIT;
  import.source = MXFP8_TRANSFER_FROM_TENSORS, import.destination = MXFP8_TRANSFER_TO_BUFFERS, import.count = 1;
  import.tensors = ts, import.values = ivals, import.scales = iscs;
  assert_int_equal(mxfp8_transfer_check(&import), MXFP8_OK);
  assert_int_equal(mxfp8_transfer_prepare(&import, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  const int32_t pick[1] = {0};
  DLManagedTensorVersioned *v = SENTINEL;
  assert_int_equal(mxfp8_grouped_export(NULL, pick, 1, NULL, &v, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(nvfp4_export_components(NULL, NULL, &v, NULL, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  EXPECT(v == SENTINEL, "an output written on failure");
  /* The NVFP4 quantize: a NULL entry of values or scales. */
  float in[2 * 32] = {0};
  int64_t ishape[2] = {2, 32}, vs[1] = {32}, ss[1] = {4}, one[1] = {1};
  uint8_t qv[32], qs[4];
  float amax = 0;
  DLTensor it = {in, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, ishape, NULL, 0};
  DLTensor vt = host_bytes(qv, 1, vs), st = host_bytes(qs, 1, ss);
  DLTensor at = {&amax, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, one, NULL, 0};
  const DLTensor *ins[1] = {&it};
  DLTensor *vals[1] = {NULL}, *scs[1] = {&st};
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 1, NULL, vals, scs, &at), MXFP8_ERROR_INVALID_ARGUMENT);
  vals[0] = &vt, scs[0] = NULL;
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 1, NULL, vals, scs, &at), MXFP8_ERROR_INVALID_ARGUMENT);
  scs[0] = &st;
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 1, NULL, vals, scs, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mxfp8_nvfp4_quantize_into(ins, 1, NULL, vals, scs, &at), MXFP8_OK);
  free_rowwise(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_honours_allocator_byte_offset),
      cmocka_unit_test(test_export_honours_allocator_byte_offset),
      cmocka_unit_test(test_empty_tensors_with_huge_dimensions_cost_nothing),
      cmocka_unit_test(test_empty_tensors_whose_strides_would_overflow),
      cmocka_unit_test(test_empty_buffers_with_null_data),
      cmocka_unit_test(test_copies_of_pinned_sources_are_labelled_cpu),
      cmocka_unit_test(test_inputs_may_share_bytes),
      cmocka_unit_test(test_destination_byte_offset_past_int64_is_refused),
      cmocka_unit_test(test_device_pointers_never_touched_without_cuda),
      cmocka_unit_test(test_empty_tensors_with_huge_dimensions_through_shards_convert_grouped_and_nvfp4),
      cmocka_unit_test(test_newer_option_structs_of_convert_dequantize_and_nvfp4),
      cmocka_unit_test(test_null_pointer_arguments_of_the_transfer_grouped_and_nvfp4),
  };
  return cmocka_run_group_tests_name("hostile but valid input", tests, NULL, NULL);
}
