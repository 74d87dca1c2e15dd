/* The sender's side of the transfer: FROM_TENSORS -> TO_BUCKET. mxfp8_bucket_parts lays out the values
 * and compact scales of several tensors (every stored layout, both directions, partial blocks) and the
 * transfer packs them into one poisoned buffer; the bytes between parts stay untouched; parts that do not
 * fit the tensors or the bucket are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

enum { N = 4 };

typedef struct {
  test_tensor *data[N], *scales[N];
  uint8_t *s[N];
  int64_t s_bytes[N];
  mxfp8_tensor *t[N];
} fixture;

/* (100, 48) swizzled, (257, 33) padded, (64, 96) compact, and a columnwise (70, 200) padded tensor. */
static fixture make(int columnwise_last, uint64_t *rng) {
  fixture f;
  static const int64_t shapes[N][2] = {{100, 48}, {257, 33}, {64, 96}, {70, 200}};
  for (int i = 0; i < N; ++i) {
    const int col = columnwise_last && i == N - 1;
    const int64_t rows = shapes[i][0], k = shapes[i][1];
    const int64_t r = col ? ref_ceil_div(rows, 32) : rows, c = col ? k : ref_ceil_div(k, 32);
    const int storage = i == 0 ? 2 : i == 2 ? 0 : 1; /* 0 compact, 1 padded, 2 swizzled */
    int64_t bshape[2] = {r, c};
    if (storage) {
      bshape[0] = col ? ref_round_up(r, 4) : ref_round_up(r, 128);
      bshape[1] = col ? ref_round_up(c, 128) : ref_round_up(c, 4);
    }
    f.data[i] = test_tensor_new(2, shapes[i], kDLUInt, 1);
    f.scales[i] = test_tensor_new(2, bshape, kDLUInt, 1);
    fill_random(f.data[i]->buffer, f.data[i]->bytes, rng);
    f.s_bytes[i] = r * c;
    f.s[i] = malloc((size_t)(r * c) + 1);
    fill_random_scales(f.s[i], (size_t)(r * c), rng);
    for (int64_t y = 0; y < r; ++y)
      for (int64_t x = 0; x < c; ++x) {
        size_t at = (size_t)(y * bshape[1] + x);
        if (storage == 2) at = ref_swizzled_index(y, x, ref_round_up(c, 4));
        f.scales[i]->buffer[at] = f.s[i][y * c + x];
      }
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.scale_layout = storage == 2 ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    if (col) {
      desc.columnwise_data = &f.data[i]->managed;
      desc.columnwise_scale_inv = &f.scales[i]->managed;
    } else {
      desc.rowwise_data = &f.data[i]->managed;
      desc.rowwise_scale_inv = &f.scales[i]->managed;
    }
    EXPECT(mxfp8_tensor_create(&desc, &f.t[i]) == MXFP8_OK, "create %d: %s", i, mxfp8_last_error());
  }
  return f;
}

static void release_fixture(fixture *f) {
  for (int i = 0; i < N; ++i) {
    mxfp8_tensor_release(f->t[i]);
    test_tensor_free(f->data[i]);
    test_tensor_free(f->scales[i]);
    free(f->s[i]);
  }
}

/* Every tensor of the fixture, rowwise, into a bucket (bucket_out and parts_out set by the test). */
static mxfp8_transfer_desc to_bucket(const fixture *f) {
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, N);
  d.tensors = (const mxfp8_tensor *const *)f->t;
  return d;
}

static void test_bucket_packs_values_and_compact_scales(void **state) {
  (void)state;
  uint64_t rng = 900;
  fixture f = make(0, &rng);
  mxfp8_transfer_desc d = to_bucket(&f);
  mxfp8_bucket_part entries[N];
  uint64_t total = 0;
  assert_int_equal(mxfp8_bucket_parts(&d, 256, entries, &total), MXFP8_OK);
  uint64_t end = 0;
  for (int i = 0; i < N; ++i) {
    EXPECT(entries[i].values_offset % 256 == 0 && entries[i].scales_offset % 256 == 0, "alignment");
    EXPECT(entries[i].values_offset >= end, "tensor order, no overlap");
    EXPECT(entries[i].values_bytes == f.data[i]->bytes && entries[i].scales_bytes == (uint64_t)f.s_bytes[i], "sizes");
    EXPECT(entries[i].scales_offset >= entries[i].values_offset + entries[i].values_bytes, "scales after values");
    end = entries[i].scales_offset + entries[i].scales_bytes;
  }
  EXPECT(total == end, "total %llu, end %llu", (unsigned long long)total, (unsigned long long)end);
  uint8_t *bucket = malloc(total);
  memset(bucket, POISON, total);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  d.bucket_out = &b;
  d.parts_out = entries;
  assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_OK);
  uint64_t covered = 0;
  for (int i = 0; i < N; ++i) {
    EXPECT(memcmp(bucket + entries[i].values_offset, f.data[i]->buffer, f.data[i]->bytes) == 0, "values %d", i);
    EXPECT(memcmp(bucket + entries[i].scales_offset, f.s[i], (size_t)f.s_bytes[i]) == 0, "scales %d", i);
    covered += entries[i].values_bytes + entries[i].scales_bytes;
  }
  uint64_t poisoned = 0;
  for (uint64_t j = 0; j < total; ++j) poisoned += bucket[j] == POISON;
  /* every byte outside the parts is still poison (test scales never are; random values may be) */
  EXPECT(poisoned >= total - covered, "padding between parts was written");
  free(bucket);
  release_fixture(&f);
}

static void test_bucket_of_columnwise_scales(void **state) {
  (void)state;
  uint64_t rng = 901;
  fixture f = make(1, &rng);
  /* every entry columnwise (desc.directions): the columnwise tensor alone, then the rowwise-only ones too */
  const int32_t columnwise[N] = {MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE, MXFP8_DIRECTION_COLUMNWISE,
                                 MXFP8_DIRECTION_COLUMNWISE};
  mxfp8_transfer_desc d = transfer_desc(MXFP8_TRANSFER_FROM_TENSORS, MXFP8_TRANSFER_TO_BUCKET, 1);
  d.tensors = (const mxfp8_tensor *const *)&f.t[N - 1];
  d.directions = columnwise;
  mxfp8_bucket_part e;
  uint64_t total = 0;
  assert_int_equal(mxfp8_bucket_parts(&d, 1, &e, &total), MXFP8_OK);
  uint8_t *bucket = malloc(total);
  int64_t bshape[1] = {(int64_t)total};
  DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  d.bucket_out = &b;
  d.parts_out = &e;
  assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_OK);
  assert_memory_equal(bucket + e.scales_offset, f.s[N - 1], (size_t)f.s_bytes[N - 1]);
  mxfp8_bucket_part all[N];
  mxfp8_transfer_desc every = to_bucket(&f);
  every.directions = columnwise;
  assert_int_equal(mxfp8_bucket_parts(&every, 1, all, &total), MXFP8_ERROR_MISSING_DATA);
  free(bucket);
  release_fixture(&f);
}

static void test_plans_that_do_not_fit_are_refused(void **state) {
  (void)state;
  uint64_t rng = 902;
  fixture f = make(0, &rng);
  mxfp8_transfer_desc d = to_bucket(&f);
  mxfp8_bucket_part entries[N], bad[N];
  uint64_t total = 0;
  assert_int_equal(mxfp8_bucket_parts(&d, 3, entries, &total), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("alignment is 3");
  assert_int_equal(mxfp8_bucket_parts(&d, 16, entries, &total), MXFP8_OK);
  uint8_t *bucket = malloc(total);
  memset(bucket, POISON, total);
  int64_t bshape[1] = {(int64_t)total - 1}; /* one byte short */
  DLTensor b = {bucket, {kDLCPU, 0}, 1, {kDLUInt, 8, 1}, bshape, NULL, 0};
  d.bucket_out = &b;
  d.parts_out = entries;
  assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  char want[160]; /* the last part is the first that does not fit */
  snprintf(want, sizeof want, "desc.parts_out[%d]: its %llu bytes of scales at byte %llu run past the end of a bucket of %llu bytes",
           N - 1, (unsigned long long)entries[N - 1].scales_bytes, (unsigned long long)entries[N - 1].scales_offset,
           (unsigned long long)(total - 1));
  assert_last_error_contains(want);
  bshape[0] = (int64_t)total;
  memcpy(bad, entries, sizeof bad);
  bad[1].values_offset = bad[0].values_offset + 8; /* on top of tensor 0's values */
  d.parts_out = bad;
  assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("desc.parts_out[1] values and desc.parts_out[0] values overlap in memory");
  memcpy(bad, entries, sizeof bad);
  bad[2].scales_bytes -= 1;
  assert_int_equal(mxfp8_transfer(&d, NULL), MXFP8_ERROR_INVALID_ARGUMENT);
  assert_last_error_contains("plan the bucket with mxfp8_bucket_parts for this desc");
  for (uint64_t j = 0; j < total; ++j) EXPECT(bucket[j] == POISON, "a refused export wrote byte %llu", (unsigned long long)j);
  free(bucket);
  release_fixture(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bucket_packs_values_and_compact_scales),
      cmocka_unit_test(test_bucket_of_columnwise_scales),
      cmocka_unit_test(test_plans_that_do_not_fit_are_refused),
  };
  return cmocka_run_group_tests_name("buckets", tests, NULL, NULL);
}
