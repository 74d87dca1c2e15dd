/* Shared helpers for the C tests. Everything here is built from the layout's definition, independently
 * of the library: the swizzle from the permute form of the layout, FP8 decoding from the bit formats. */
#ifndef MXFP8_TEST_SUPPORT_H_
#define MXFP8_TEST_SUPPORT_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <mxfp8/mxfp8.h>

/* A scale byte that never appears in test data: every padding byte is set to it, so reading padding
 * shows up as a wrong value (it is also NaN in E8M0). Test scales are drawn from 1..254. */
#define POISON 0xFFu

/* The last mxfp8_scale_layout value: tests that loop over every layout go up to it. */
#define TEST_LAST_LAYOUT MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32

uint64_t rng_next(uint64_t *state);
/* n random bytes; scales avoid POISON and 0. */
void fill_random(uint8_t *p, size_t n, uint64_t *state);
void fill_random_scales(uint8_t *p, size_t n, uint64_t *state);

/* n quantizer inputs of `type` (0 bfloat16, 1 float16, 2 float32), written as their bits: ordinary values
 * spanning a few binades per 32-value block (half with 5-bit mantissas, which scale to exact rounding
 * ties), all-zero blocks, random signs, and 1 in 64 random bit patterns (NaN, Inf, subnormals, huge). */
void fill_quantize_input(void *buf, int type, size_t n, uint64_t *state);

/* A host tensor the test owns, wrapped as a DLManagedTensorVersioned whose deleter counts its calls
 * instead of freeing (the test frees with test_tensor_free). */
typedef struct {
  DLManagedTensorVersioned managed;
  int64_t shape[8];
  int64_t strides[8];
  uint8_t *buffer;
  size_t bytes;
  int deleter_calls;
} test_tensor;

/* ndim dims, dtype (code, bits 8), row-major strides, buffer of prod(shape) bytes filled with POISON.
 * with_deleter = 0 leaves the deleter NULL (borrowed memory). */
test_tensor *test_tensor_new(int32_t ndim, const int64_t *shape, uint8_t code, int with_deleter);
void test_tensor_free(test_tensor *t);
/* A 1-D float32 test tensor of n elements holding `values`, with a counting deleter (e.g. an NVFP4 amax). */
test_tensor *test_float_tensor(int64_t n, const float *values);
/* The deleter installed by test_tensor_new: counts, frees nothing. */
void test_tensor_count_deleter(DLManagedTensorVersioned *self);

/* Byte offset of scale (r, c) in the swizzled buffer of an R x C matrix, from the layout's permute form:
 * swizzled = padded.reshape(Rp/128, 4, 32, Cp/4, 4).permute(0, 3, 2, 1, 4). */
size_t ref_swizzled_index(int64_t r, int64_t c, int64_t padded_cols);
int64_t ref_round_up(int64_t n, int64_t d);
int64_t ref_ceil_div(int64_t n, int64_t d);

/* FP8 and E8M0 decoding, from the bit formats. */
double ref_decode_e4m3(uint8_t v);
double ref_decode_e5m2(uint8_t v);
double ref_decode_e8m0(uint8_t s);

/* Reads element `index` (row-major over shape) of an output through its own strides. */
uint8_t read_through_strides(const DLTensor *t, int64_t index);

/* Fails the test, printing the library's message, unless mxfp8_last_error() contains `needle`. */
void assert_last_error_contains(const char *needle);

/* A borrowed (NULL deleter) uint8 tensor of this header's DLPack version: `data` on device 0 of
 * `device_type`, with `ndim` dimensions from `shape` (kept by the caller), row-major. */
DLManagedTensorVersioned borrowed_bytes(void *data, DLDeviceType device_type, int32_t ndim, int64_t *shape);

/* Releases an exported tensor (calls its deleter once); NULL is fine. */
void release_managed(DLManagedTensorVersioned *m);

/* 1 when a CUDA device is usable from this process (always 0 in a build without CUDA). */
int cuda_device_available(void);

/* One shard exported alone: mxfp8_export_components with `options` (NULL: MXFP8_EXPORT_OPTIONS_INIT,
 * else a full-size struct, copied) and options.shard = `shard` (NULL: the whole tensor). What the tests
 * written against mxfp8_export_shard (folded into options.shard) call. */
mxfp8_status export_shard(const mxfp8_tensor *tensor, const mxfp8_shard *shard, const mxfp8_export_options *options,
                          DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales);

/* An NVFP4 mxfp8_tensor_desc as the tests start from it: format NVFP4, 1x16 blocks, E4M3_MAX 448, written
 * out field by field (not built from MXFP8_TENSOR_DESC_INIT, whose NVFP4 fields are "not said"). */
#define NVFP4_TENSOR_DESC_INIT                                                                               \
  {(uint32_t)sizeof(mxfp8_tensor_desc), MXFP8_FORMAT_NVFP4, MXFP8_SCALE_LAYOUT_ROW_MAJOR, 0, NULL, NULL, NULL, \
   NULL, NULL, MXFP8_BLOCK_1X16, 0u, NULL, NULL, 448, 0u}

/* The export options the NVFP4 tests start from: the defaults of mxfp8_export_options except uint8
 * values (the NVFP4 export's old default, which the ported checks expect). */
#define NVFP4_EXPORT_OPTIONS_INIT                                                                              \
  {(uint32_t)sizeof(mxfp8_export_options), MXFP8_DIRECTION_ROWWISE, MXFP8_VALUES_UINT8, MXFP8_SCALES_UINT8,       \
   MXFP8_PADDED_SCALES_COPY, 0u, NULL, NULL, MXFP8_SCALES_PER_32, 0u, 0, 0u, NULL, MXFP8_NVFP4_GLOBAL_SCALE_DECODE, \
   0u}

/* What the removed nvfp4_export_components did, as its two replacements: values and scales from
 * mxfp8_export_components (when either is asked), then the global scale from mxfp8_export_global_scale
 * (when asked). All or nothing: a failure of the second releases what the first made. */
mxfp8_status nvfp4_export_components(const mxfp8_tensor *tensor, const mxfp8_export_options *options,
                                     DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales,
                                     DLManagedTensorVersioned **global_scale);



/* A DLPack allocator (the mxfp8_export_options.allocator signature) that returns host buffers filled
 * with POISON, so that an output byte the library forgets to write shows up. Counts its calls. */
extern int poisoned_allocator_calls;
int poisoned_allocator(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                       void (*set_error)(void *error_ctx, const char *kind, const char *message));

/* Fails the test with a printed context unless cond holds. */
#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      print_error("%s:%d: expected %s: ", __FILE__, __LINE__, #cond); \
      print_error(__VA_ARGS__);                                    \
      print_error("\n");                                           \
      fail();                                                      \
    }                                                              \
  } while (0)

/* The transfer desc a test starts from: MXFP8_TRANSFER_DESC_INIT with its source, destination and count
 * (every array NULL: the test sets those its transfer needs). */
static inline mxfp8_transfer_desc transfer_desc(int32_t source, int32_t destination, size_t count) {
  mxfp8_transfer_desc d = MXFP8_TRANSFER_DESC_INIT;
  d.source = source;
  d.destination = destination;
  d.count = count;
  return d;
}

/* desc.directions for a transfer whose entries (at most TEST_MAX_ENTRIES) all go in `direction`. */
#define TEST_MAX_ENTRIES 64
const int32_t *all_in_direction(int32_t direction);

/* mxfp8_transfer_check of the source side of `d` alone (TO_NOTHING: its destination fields cleared), as a
 * receiver checks a sender's description of a bucket before reading its bytes. */
static inline mxfp8_status transfer_check_source(const mxfp8_transfer_desc *d) {
  mxfp8_transfer_desc c = *d;
  c.destination = MXFP8_TRANSFER_TO_NOTHING;
  c.global_scale = MXFP8_NVFP4_GLOBAL_SCALE_DECODE;
  c.target_layouts = NULL;
  c.values = c.scales = c.global_scales = NULL;
  c.bucket_out = NULL;
  c.parts_out = NULL;
  return mxfp8_transfer_check(&c);
}

#endif
