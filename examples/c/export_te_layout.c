/* Export an MXFP8 weight stored the way Transformer Engine stores it (scales padded to 128 x 4 tiles and
 * swizzled for cuBLAS) into what an inference engine loads: FP8 values plus compact uint8 scales.
 *
 * The sample is a (200, 80) weight: 200 rows of 80 values, so each row has ceil(80/32) = 3 scales and
 * the last block of every row holds only 16 values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mxfp8/mxfp8.h>

enum { ROWS = 200, K = 80, SCALES_PER_ROW = (K + 31) / 32, PADDED_ROWS = 256, PADDED_COLS = 4 };

/* The cuBLAS block-scaling layout (see mxfp8.h, MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED). */
static size_t swizzled_offset(size_t r, size_t c) {
  return ((r / 128) * (PADDED_COLS / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

static DLManagedTensorVersioned borrowed_bytes(void *data, int64_t *shape) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m); /* deleter NULL: this program owns the memory */
  m.version.major = DLPACK_MAJOR_VERSION;
  m.version.minor = DLPACK_MINOR_VERSION;
  m.dl_tensor.data = data;
  m.dl_tensor.device.device_type = kDLCPU;
  m.dl_tensor.ndim = 2;
  m.dl_tensor.dtype.code = kDLUInt;
  m.dl_tensor.dtype.bits = 8;
  m.dl_tensor.dtype.lanes = 1;
  m.dl_tensor.shape = shape;
  return m;
}

#define CHECK(call)                                                                         \
  do {                                                                                      \
    mxfp8_status s_ = (call);                                                               \
    if (s_ != MXFP8_OK) {                                                                   \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mxfp8_status_string(s_), mxfp8_last_error()); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main(void) {
  static uint8_t values[ROWS * K], swizzled[PADDED_ROWS * PADDED_COLS], expected[ROWS * SCALES_PER_ROW];
  for (size_t i = 0; i < sizeof values; ++i) values[i] = (uint8_t)(i * 37u + 11u);
  memset(swizzled, 0, sizeof swizzled);
  for (size_t r = 0; r < ROWS; ++r)
    for (size_t c = 0; c < SCALES_PER_ROW; ++c) {
      expected[r * SCALES_PER_ROW + c] = (uint8_t)(120 + (r * 3 + c) % 15); /* 2^-7 .. 2^7 */
      swizzled[swizzled_offset(r, c)] = expected[r * SCALES_PER_ROW + c];
    }

  int64_t shape[2] = {ROWS, K}, scale_shape[2] = {PADDED_ROWS, PADDED_COLS};
  DLManagedTensorVersioned data = borrowed_bytes(values, shape);
  DLManagedTensorVersioned scale_inv = borrowed_bytes(swizzled, scale_shape);
  mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT_UNSET; /* format and layout must be said */
  desc.format = MXFP8_FORMAT_E4M3;
  desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  desc.rowwise_data = &data;
  desc.rowwise_scale_inv = &scale_inv;

  mxfp8_tensor *tensor = NULL;
  CHECK(mxfp8_tensor_create(&desc, &tensor));
  DLManagedTensorVersioned *out_values = NULL, *out_scales = NULL;
  CHECK(mxfp8_export_components(tensor, NULL, &out_values, &out_scales));
  mxfp8_tensor_release(tensor); /* the values view keeps what it needs alive */

  const DLTensor *v = &out_values->dl_tensor, *s = &out_scales->dl_tensor;
  printf("libmxfp8 %u: exported a (%d, %d) E4M3 weight stored with TE's padded, GEMM-swizzled scales\n",
         mxfp8_version(), ROWS, K);
  printf("  values: shape (%lld, %lld), dtype code %d (float8_e4m3fn), %s\n", (long long)v->shape[0],
         (long long)v->shape[1], v->dtype.code, v->data == values ? "zero-copy view" : "COPY (unexpected)");
  printf("  scales: shape (%lld, %lld), strides (%lld, %lld), uint8, %s\n", (long long)s->shape[0],
         (long long)s->shape[1], (long long)s->strides[0], (long long)s->strides[1],
         (out_scales->flags & DLPACK_FLAG_BITMASK_IS_COPIED) ? "unswizzled copy" : "view");
  printf("  scales of rows 0-2: ");
  const uint8_t *got = (const uint8_t *)s->data;
  for (int i = 0; i < 3 * SCALES_PER_ROW; ++i) printf("%u ", got[i]);
  const int same = memcmp(got, expected, sizeof expected) == 0;
  printf("\n  all %d scales match the ones stored: %s\n", ROWS * SCALES_PER_ROW, same ? "yes" : "NO");

  out_values->deleter(out_values);
  out_scales->deleter(out_scales);
  return same ? 0 : 1;
}
