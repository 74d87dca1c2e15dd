/* Every bad input named in the contract, as a table: the status, a message that names the problem, and
 * nothing taken, written or freed. The table is also the source of docs/errors.md. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

/* A valid (100, 48) E4M3 tensor with TE-padded (128, 4) row-major scales, which each case breaks. */
typedef struct {
  test_tensor *data, *scales, *col_data, *col_scales;
  mxfp8_tensor_desc desc;
  int64_t desc_shape[2];
  int64_t bad_strides[2];
  struct {
    mxfp8_tensor_desc known;
    uint64_t tail;
  } newer;
  const mxfp8_tensor_desc *desc_arg;
  mxfp8_tensor **out_arg;
} create_fixture;

typedef void (*create_mutator)(create_fixture *f);
typedef struct {
  const char *name;
  create_mutator mutate;
  mxfp8_status status;
  const char *message;
} create_case;

#define D(f) (&(f)->data->managed.dl_tensor)
#define S(f) (&(f)->scales->managed.dl_tensor)
static void null_desc(create_fixture *f) { f->desc_arg = NULL; }
static void null_out(create_fixture *f) { f->out_arg = NULL; }
static void zero_struct_size(create_fixture *f) { f->desc.struct_size = 0; }
static void small_struct_size(create_fixture *f) { f->desc.struct_size = 8; }
static void newer_struct_nonzero_tail(create_fixture *f) {
  f->newer.known = f->desc;
  f->newer.known.struct_size = (uint32_t)sizeof f->newer;
  f->newer.tail = 1;
  f->desc_arg = &f->newer.known;
}
static void format_zero(create_fixture *f) { f->desc.format = 0; }
static void format_unknown(create_fixture *f) { f->desc.format = 3; }
static void layout_unknown(create_fixture *f) { f->desc.scale_layout = 2; }
static void ndim_negative(create_fixture *f) { f->desc.ndim = -1; }
static void ndim_huge(create_fixture *f) { f->desc.ndim = 65; }
static void shape_null(create_fixture *f) { f->desc.ndim = 2; f->desc.shape = NULL; }
static void shape_negative(create_fixture *f) {
  f->desc_shape[0] = -100; f->desc_shape[1] = 48; f->desc.ndim = 2; f->desc.shape = f->desc_shape;
}
static void shape_mismatch(create_fixture *f) {
  f->desc_shape[0] = 100; f->desc_shape[1] = 64; f->desc.ndim = 2; f->desc.shape = f->desc_shape;
}
static void no_data(create_fixture *f) { f->desc.rowwise_data = NULL; f->desc.rowwise_scale_inv = NULL; }
static void data_without_scales(create_fixture *f) { f->desc.rowwise_scale_inv = NULL; }
static void scales_without_data(create_fixture *f) { f->desc.rowwise_data = NULL; }
static void columnwise_without_scales(create_fixture *f) { f->desc.columnwise_data = &f->col_data->managed; }
static void same_tensor_twice(create_fixture *f) { f->desc.rowwise_scale_inv = f->desc.rowwise_data; }
static void data_float32(create_fixture *f) { D(f)->dtype.code = kDLFloat; D(f)->dtype.bits = 32; }
static void data_wrong_fp8(create_fixture *f) { D(f)->dtype.code = kDLFloat8_e5m2; }
static void data_lanes(create_fixture *f) { D(f)->dtype.lanes = 4; }
static void data_0d(create_fixture *f) { D(f)->ndim = 0; }
static void data_ndim_negative(create_fixture *f) { D(f)->ndim = -2; }
static void data_shape_null(create_fixture *f) { D(f)->shape = NULL; }
static void data_negative_dim(create_fixture *f) { f->data->shape[0] = -1; }
static void data_overflow(create_fixture *f) { f->data->shape[0] = INT64_MAX / 2; f->data->shape[1] = 48; }
static void data_not_contiguous(create_fixture *f) {
  f->bad_strides[0] = 1; f->bad_strides[1] = 100; D(f)->strides = f->bad_strides;
}
static void data_null_pointer(create_fixture *f) { D(f)->data = NULL; }
static void scales_int8(create_fixture *f) { S(f)->dtype.code = kDLInt; }
static void scales_float32(create_fixture *f) { S(f)->dtype.code = kDLFloat; S(f)->dtype.bits = 32; }
static void scales_too_few_rows(create_fixture *f) { f->scales->shape[0] = 99; }
static void scales_too_few_cols(create_fixture *f) { f->scales->shape[1] = 1; f->scales->strides[0] = 1; }
static void scales_last_stride(create_fixture *f) { f->scales->strides[1] = 2; }
static void scales_negative_stride(create_fixture *f) { f->scales->strides[0] = -4; }
static void scales_null_pointer(create_fixture *f) { S(f)->data = NULL; }
static void swizzled_but_compact_size(create_fixture *f) {
  f->desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  f->scales->shape[0] = 100; f->scales->shape[1] = 2; f->scales->strides[0] = 2;
}
static void swizzled_not_contiguous(create_fixture *f) {
  f->desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  f->scales->shape[0] = 4; f->scales->shape[1] = 128; f->scales->strides[0] = 1; f->scales->strides[1] = 4;
}
static void device_mismatch(create_fixture *f) { S(f)->device.device_type = kDLCUDA; }
static void device_id_mismatch(create_fixture *f) { S(f)->device.device_id = 1; }
static void device_unsupported(create_fixture *f) {
  D(f)->device.device_type = kDLVulkan; S(f)->device.device_type = kDLVulkan;
}

static const create_case kCreateCases[] = {
    {"desc is NULL", null_desc, MXFP8_ERROR_INVALID_ARGUMENT, "desc is NULL"},
    {"out is NULL", null_out, MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL"},
    {"struct_size 0", zero_struct_size, MXFP8_ERROR_INVALID_ARGUMENT, "MXFP8_TENSOR_DESC_INIT"},
    {"struct_size smaller than version 1", small_struct_size, MXFP8_ERROR_INVALID_ARGUMENT, "struct_size is 8"},
    {"newer struct with unknown fields set", newer_struct_nonzero_tail, MXFP8_ERROR_UNSUPPORTED, "fields this build does not know"},
    {"format 0 (unset)", format_zero, MXFP8_ERROR_INVALID_ARGUMENT, "desc.format is 0"},
    {"format unknown", format_unknown, MXFP8_ERROR_INVALID_ARGUMENT, "desc.format is 3"},
    {"scale_layout unknown", layout_unknown, MXFP8_ERROR_INVALID_ARGUMENT, "desc.scale_layout is 2"},
    {"ndim negative", ndim_negative, MXFP8_ERROR_INVALID_ARGUMENT, "desc.ndim is -1"},
    {"ndim above 64", ndim_huge, MXFP8_ERROR_INVALID_ARGUMENT, "desc.ndim is 65"},
    {"shape NULL with ndim > 0", shape_null, MXFP8_ERROR_INVALID_ARGUMENT, "desc.shape is NULL"},
    {"shape with a negative dimension", shape_negative, MXFP8_ERROR_INVALID_ARGUMENT, "negative dimension"},
    {"data shape differs from the logical shape", shape_mismatch, MXFP8_ERROR_INVALID_ARGUMENT, "does not match the tensor's shape (100, 64)"},
    {"no data at all", no_data, MXFP8_ERROR_MISSING_DATA, "neither rowwise nor columnwise data"},
    {"data without scales", data_without_scales, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_data is given without rowwise_scale_inv"},
    {"scales without data", scales_without_data, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_scale_inv is given without rowwise_data"},
    {"columnwise data without scales", columnwise_without_scales, MXFP8_ERROR_INVALID_ARGUMENT, "columnwise_data is given without"},
    {"one managed tensor in two fields", same_tensor_twice, MXFP8_ERROR_INVALID_ARGUMENT, "passed twice"},
    {"data dtype float32", data_float32, MXFP8_ERROR_INVALID_ARGUMENT, "dtype float32 does not hold E4M3"},
    {"data dtype of the other fp8 format", data_wrong_fp8, MXFP8_ERROR_INVALID_ARGUMENT, "dtype float8_e5m2 does not hold E4M3"},
    {"data dtype with lanes", data_lanes, MXFP8_ERROR_INVALID_ARGUMENT, "uint8x4"},
    {"data 0-dimensional", data_0d, MXFP8_ERROR_INVALID_ARGUMENT, "0-dimensional"},
    {"data ndim negative", data_ndim_negative, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_data: ndim -2 is negative"},
    {"data shape NULL", data_shape_null, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_data: shape is NULL"},
    {"data negative dimension", data_negative_dim, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_data: shape (-1, 48) has a negative dimension"},
    {"data dimensions overflow int64", data_overflow, MXFP8_ERROR_INVALID_ARGUMENT, "more elements than int64"},
    {"data not contiguous", data_not_contiguous, MXFP8_ERROR_INVALID_ARGUMENT, "not row-major contiguous"},
    {"data pointer NULL", data_null_pointer, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_data: data is NULL"},
    {"scales dtype int8", scales_int8, MXFP8_ERROR_INVALID_ARGUMENT, "dtype int8 is not an E8M0 scale byte"},
    {"scales dtype float32", scales_float32, MXFP8_ERROR_INVALID_ARGUMENT, "dtype float32 is not an E8M0 scale byte"},
    {"scale buffer with too few rows", scales_too_few_rows, MXFP8_ERROR_INVALID_ARGUMENT, "a 99 x 4 buffer (shape (99, 4)) cannot hold the 100 x 2 scale matrix"},
    {"scale buffer with too few columns", scales_too_few_cols, MXFP8_ERROR_INVALID_ARGUMENT, "cannot hold the 100 x 2 scale matrix"},
    {"scales with a last stride other than 1", scales_last_stride, MXFP8_ERROR_INVALID_ARGUMENT, "the last dimension must have stride 1"},
    {"scales with negative strides", scales_negative_stride, MXFP8_ERROR_INVALID_ARGUMENT, "negative strides"},
    {"scales pointer NULL", scales_null_pointer, MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_scale_inv: data is NULL"},
    {"swizzled layout on a compact buffer", swizzled_but_compact_size, MXFP8_ERROR_INVALID_ARGUMENT, "need 128 x 4 = 512 bytes, got 200"},
    {"swizzled buffer not contiguous", swizzled_not_contiguous, MXFP8_ERROR_INVALID_ARGUMENT, "must be contiguous"},
    {"scales on another device type", device_mismatch, MXFP8_ERROR_INVALID_ARGUMENT, "is on cuda:0 but rowwise_data is on cpu:0"},
    {"scales on another device id", device_id_mismatch, MXFP8_ERROR_INVALID_ARGUMENT, "is on cpu:1"},
    {"unsupported device type", device_unsupported, MXFP8_ERROR_UNSUPPORTED, "device type 7:0 is not supported"},
};

static void setup_create(create_fixture *f) {
  memset(f, 0, sizeof *f);
  uint64_t rng = 99;
  const int64_t shape[2] = {100, 48}, scale_shape[2] = {128, 4};
  f->data = test_tensor_new(2, shape, kDLUInt, 1);
  f->scales = test_tensor_new(2, scale_shape, kDLUInt, 1);
  f->col_data = test_tensor_new(2, shape, kDLUInt, 1);
  fill_random(f->data->buffer, f->data->bytes, &rng);
  fill_random_scales(f->scales->buffer, f->scales->bytes, &rng);
  mxfp8_tensor_desc init = MXFP8_TENSOR_DESC_INIT;
  f->desc = init;
  f->desc.rowwise_data = &f->data->managed;
  f->desc.rowwise_scale_inv = &f->scales->managed;
  f->desc_arg = &f->desc;
}

static void test_bad_create_input(void **state) {
  const create_case *c = (const create_case *)*state;
  create_fixture f;
  setup_create(&f);
  mxfp8_tensor *out = (mxfp8_tensor *)(uintptr_t)0xBAD;
  f.out_arg = &out;
  c->mutate(&f);
  uint8_t *data_before = malloc(f.data->bytes), *scales_before = malloc(f.scales->bytes);
  memcpy(data_before, f.data->buffer, f.data->bytes);
  memcpy(scales_before, f.scales->buffer, f.scales->bytes);
  const mxfp8_status st = mxfp8_tensor_create(f.desc_arg, f.out_arg);
  EXPECT(st == c->status, "%s: status %d (%s), expected %d", c->name, st, mxfp8_last_error(), c->status);
  assert_last_error_contains(c->message);
  EXPECT(out == (mxfp8_tensor *)(uintptr_t)0xBAD, "%s: out was written", c->name);
  EXPECT(f.data->deleter_calls == 0 && f.scales->deleter_calls == 0 && f.col_data->deleter_calls == 0,
         "%s: a deleter ran on failure", c->name);
  EXPECT(memcmp(data_before, f.data->buffer, f.data->bytes) == 0, "%s: data modified", c->name);
  EXPECT(memcmp(scales_before, f.scales->buffer, f.scales->bytes) == 0, "%s: scales modified", c->name);
  free(data_before);
  free(scales_before);
  test_tensor_free(f.data);
  test_tensor_free(f.scales);
  test_tensor_free(f.col_data);
}

/* Export-time bad input, against a valid rowwise-only tensor. */
typedef struct {
  const char *name;
  int null_tensor, null_values, null_scales;
  mxfp8_export_options options;
  int use_options;
  mxfp8_status status;
  const char *message;
} export_case;

#define OPTS(size, dir, vd, sd, pad, res) \
  { (uint32_t)(size), dir, vd, sd, pad, res, NULL, NULL }
#define GOOD_SIZE sizeof(mxfp8_export_options)
static const export_case kExportCases[] = {
    {"tensor is NULL", 1, 0, 0, OPTS(GOOD_SIZE, 0, 0, 0, 0, 0), 0, MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL"},
    {"both outputs NULL", 0, 1, 1, OPTS(GOOD_SIZE, 0, 0, 0, 0, 0), 0, MXFP8_ERROR_INVALID_ARGUMENT, "both NULL"},
    {"options struct_size 0", 0, 0, 0, OPTS(0, 0, 0, 0, 0, 0), 1, MXFP8_ERROR_INVALID_ARGUMENT, "MXFP8_EXPORT_OPTIONS_INIT"},
    {"direction unknown", 0, 0, 0, OPTS(GOOD_SIZE, 2, 0, 0, 0, 0), 1, MXFP8_ERROR_INVALID_ARGUMENT, "options.direction is 2"},
    {"values_dtype unknown", 0, 0, 0, OPTS(GOOD_SIZE, 0, 5, 0, 0, 0), 1, MXFP8_ERROR_INVALID_ARGUMENT, "options.values_dtype is 5"},
    {"scales_dtype unknown", 0, 0, 0, OPTS(GOOD_SIZE, 0, 0, 9, 0, 0), 1, MXFP8_ERROR_INVALID_ARGUMENT, "options.scales_dtype is 9"},
    {"padded_scales unknown", 0, 0, 0, OPTS(GOOD_SIZE, 0, 0, 0, 3, 0), 1, MXFP8_ERROR_INVALID_ARGUMENT, "options.padded_scales is 3"},
    {"reserved not zero", 0, 0, 0, OPTS(GOOD_SIZE, 0, 0, 0, 0, 1), 1, MXFP8_ERROR_INVALID_ARGUMENT, "options.reserved is 1"},
    {"direction without data", 0, 0, 0, OPTS(GOOD_SIZE, 1, 0, 0, 0, 0), 1, MXFP8_ERROR_MISSING_DATA, "no columnwise data"},
};

static void test_bad_export_input(void **state) {
  const export_case *c = (const export_case *)*state;
  create_fixture f;
  setup_create(&f);
  mxfp8_tensor *tensor = NULL;
  assert_int_equal(mxfp8_tensor_create(&f.desc, &tensor), MXFP8_OK);
  DLManagedTensorVersioned *sentinel = (DLManagedTensorVersioned *)(uintptr_t)0xBAD;
  DLManagedTensorVersioned *values = sentinel, *scales = sentinel;
  const mxfp8_status st = mxfp8_export_components(c->null_tensor ? NULL : tensor, c->use_options ? &c->options : NULL,
                                                  c->null_values ? NULL : &values, c->null_scales ? NULL : &scales);
  EXPECT(st == c->status, "%s: status %d (%s), expected %d", c->name, st, mxfp8_last_error(), c->status);
  assert_last_error_contains(c->message);
  EXPECT(values == sentinel && scales == sentinel, "%s: an output was written", c->name);
  mxfp8_tensor_release(tensor);
  /* A failed export took no reference: the inputs are freed now. */
  EXPECT(f.data->deleter_calls == 1 && f.scales->deleter_calls == 1, "%s: deleters ran %d, %d times", c->name,
         f.data->deleter_calls, f.scales->deleter_calls);
  test_tensor_free(f.data);
  test_tensor_free(f.scales);
  test_tensor_free(f.col_data);
}

int main(void) {
  enum { NC = sizeof(kCreateCases) / sizeof(kCreateCases[0]), NE = sizeof(kExportCases) / sizeof(kExportCases[0]) };
  struct CMUnitTest tests[NC + NE];
  for (int i = 0; i < NC; ++i) {
    struct CMUnitTest t = cmocka_unit_test_prestate(test_bad_create_input, (void *)&kCreateCases[i]);
    t.name = kCreateCases[i].name;
    tests[i] = t;
  }
  for (int i = 0; i < NE; ++i) {
    struct CMUnitTest t = cmocka_unit_test_prestate(test_bad_export_input, (void *)&kExportCases[i]);
    t.name = kExportCases[i].name;
    tests[NC + i] = t;
  }
  return cmocka_run_group_tests_name("bad input (status, message, nothing taken or changed)", tests, NULL, NULL);
}
