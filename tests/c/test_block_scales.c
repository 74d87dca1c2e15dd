/* 2-D (32x32) block scales: a tensor described as MXFP8_BLOCK_32X32 exports one scale per block, from
 * rowwise or columnwise scales, padded or swizzled; blocks whose stored scales disagree are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

typedef struct {
  int64_t rows, k;
} shape2;

static const shape2 kShapes[] = {{100, 48}, {64, 64}, {33, 100}, {257, 300}, {1, 16}, {31, 33}};

/* Builds a 32x32-quantized tensor's stored scales for one direction from block scales B, stores them
 * padded (storage 0) or swizzled (1), and creates the tensor. Returns B. */
static uint8_t *make_block_tensor(shape2 s, int columnwise, int swizzled, uint64_t *rng, test_tensor **data,
                                  test_tensor **buf, mxfp8_tensor **out, int64_t *mb, int64_t *cb) {
  *mb = ref_ceil_div(s.rows, 32);
  *cb = ref_ceil_div(s.k, 32);
  uint8_t *b = malloc((size_t)(*mb * *cb));
  fill_random_scales(b, (size_t)(*mb * *cb), rng);
  const int64_t r = columnwise ? *mb : s.rows, c = columnwise ? s.k : *cb;
  const int64_t shape[2] = {s.rows, s.k};
  const int64_t bshape[2] = {columnwise ? ref_round_up(r, 4) : ref_round_up(r, 128),
                             columnwise ? ref_round_up(c, 128) : ref_round_up(c, 4)};
  *data = test_tensor_new(2, shape, kDLUInt, 1);
  *buf = test_tensor_new(2, bshape, kDLUInt, 1);
  for (int64_t y = 0; y < r; ++y)
    for (int64_t x = 0; x < c; ++x) {
      const uint8_t v = columnwise ? b[y * *cb + x / 32] : b[(y / 32) * *cb + x];
      size_t at = (size_t)(y * bshape[1] + x);
      if (swizzled) at = columnwise ? ref_swizzled_index(x, y, ref_round_up(r, 4)) : ref_swizzled_index(y, x, ref_round_up(c, 4));
      (*buf)->buffer[at] = v;
    }
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.block = MXFP8_BLOCK_32X32;
  desc.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
  if (columnwise) {
    desc.columnwise_data = &(*data)->managed;
    desc.columnwise_scale_inv = &(*buf)->managed;
  } else {
    desc.rowwise_data = &(*data)->managed;
    desc.rowwise_scale_inv = &(*buf)->managed;
  }
  assert_int_equal(mxfp8_tensor_create(&desc, out), MXFP8_OK);
  return b;
}

static void test_block_scales_equal_the_blocks_stored(void **state) {
  (void)state;
  uint64_t rng = 32;
  for (size_t i = 0; i < sizeof kShapes / sizeof kShapes[0]; ++i)
    for (int columnwise = 0; columnwise < 2; ++columnwise)
      for (int swizzled = 0; swizzled < 2; ++swizzled) {
        test_tensor *data, *buf;
        mxfp8_tensor *t;
        int64_t mb, cb;
        uint8_t *b = make_block_tensor(kShapes[i], columnwise, swizzled, &rng, &data, &buf, &t, &mb, &cb);
        mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
        o.direction = columnwise;
        o.scales_granularity = MXFP8_SCALES_PER_32X32;
        o.allocator = poisoned_allocator;
        DLManagedTensorVersioned *scales = NULL;
        const mxfp8_status st = mxfp8_export_components(t, &o, NULL, &scales);
        EXPECT(st == MXFP8_OK, "(%lld, %lld) col %d swz %d: %s", (long long)kShapes[i].rows, (long long)kShapes[i].k,
               columnwise, swizzled, mxfp8_last_error());
        EXPECT(scales->dl_tensor.ndim == 2 && scales->dl_tensor.shape[0] == mb && scales->dl_tensor.shape[1] == cb,
               "block scales shape");
        EXPECT(scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED, "block scales are a copy");
        EXPECT(memcmp(scales->dl_tensor.data, b, (size_t)(mb * cb)) == 0, "(%lld, %lld) col %d swz %d: block scales differ",
               (long long)kShapes[i].rows, (long long)kShapes[i].k, columnwise, swizzled);
        release_managed(scales);
        mxfp8_tensor_release(t);
        test_tensor_free(data);
        test_tensor_free(buf);
        free(b);
      }
}

static void test_disagreeing_block_is_refused_with_its_position(void **state) {
  (void)state;
  uint64_t rng = 33;
  const shape2 s = {100, 96};
  for (int columnwise = 0; columnwise < 2; ++columnwise) {
    test_tensor *data, *buf;
    mxfp8_tensor *t;
    int64_t mb, cb;
    uint8_t *b = make_block_tensor(s, columnwise, 0, &rng, &data, &buf, &t, &mb, &cb);
    /* one stored scale inside a block changes: rowwise S(33, 1), columnwise S(0, 40) */
    const int64_t row_cols = buf->shape[1];
    const size_t at = columnwise ? (size_t)40 : (size_t)(33 * row_cols + 1);
    buf->buffer[at] = (uint8_t)(buf->buffer[at] == 200 ? 201 : 200);
    mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
    o.direction = columnwise;
    o.scales_granularity = MXFP8_SCALES_PER_32X32;
    DLManagedTensorVersioned *scales = (DLManagedTensorVersioned *)(uintptr_t)0x1;
    assert_int_equal(mxfp8_export_components(t, &o, NULL, &scales), MXFP8_ERROR_INVALID_ARGUMENT);
    assert_last_error_contains(columnwise ? "scale (0, 40) differs from scale (0, 32), the first of its 32-column block"
                                          : "scale (33, 1) differs from scale (32, 1), the first of its 32-row block");
    assert_ptr_equal(scales, (DLManagedTensorVersioned *)(uintptr_t)0x1);
    /* the stored per-32 scales still export as they are */
    o.scales_granularity = MXFP8_SCALES_PER_32;
    assert_int_equal(mxfp8_export_components(t, &o, NULL, &scales), MXFP8_OK);
    release_managed(scales);
    mxfp8_tensor_release(t);
    test_tensor_free(data);
    test_tensor_free(buf);
    free(b);
  }
}

static void test_older_callers_structs_get_defaults(void **state) {
  (void)state;
  /* A caller compiled against the first layout of the structs (before desc.block and
   * options.scales_granularity): whatever lies past its struct_size is never read. */
  uint64_t rng = 34;
  test_tensor *data, *buf;
  mxfp8_tensor *t;
  int64_t mb, cb;
  uint8_t *b = make_block_tensor((shape2){64, 64}, 0, 0, &rng, &data, &buf, &t, &mb, &cb);
  mxfp8_tensor_release(t);
  data->deleter_calls = buf->deleter_calls = 0;
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
  desc.struct_size = (uint32_t)offsetof(mxfp8_tensor_desc, block);
  desc.block = 77; /* garbage beyond the old struct */
  desc.rowwise_data = &data->managed;
  desc.rowwise_scale_inv = &buf->managed;
  assert_int_equal(mxfp8_tensor_create(&desc, &t), MXFP8_OK);
  mxfp8_export_options o = MXFP8_EXPORT_OPTIONS_INIT;
  o.struct_size = (uint32_t)offsetof(mxfp8_export_options, scales_granularity);
  o.scales_granularity = 99;
  DLManagedTensorVersioned *scales = NULL;
  assert_int_equal(mxfp8_export_components(t, &o, NULL, &scales), MXFP8_OK);
  assert_int_equal(scales->dl_tensor.shape[1], 2); /* per-32 scales: the old default */
  release_managed(scales);
  mxfp8_tensor_release(t);
  test_tensor_free(data);
  test_tensor_free(buf);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_block_scales_equal_the_blocks_stored),
      cmocka_unit_test(test_disagreeing_block_is_refused_with_its_position),
      cmocka_unit_test(test_older_callers_structs_get_defaults),
  };
  return cmocka_run_group_tests_name("32x32 block scales", tests, NULL, NULL);
}
