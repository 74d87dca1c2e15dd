/* A weight sync in C with one description, mxfp8_transfer_desc: the trainer packs its tensors (as
 * Transformer Engine stores them: FP8 values, 128x4-swizzled scales) into one bucket, a tensor-parallel
 * receiver takes its half of each weight straight into its parameters, scales in the 128x4 layout its GEMM
 * loads. The sender runs mxfp8_bucket_parts + mxfp8_transfer once; the receiver prepares its import once
 * and runs it every step (mxfp8_transfer_prepare + mxfp8_plan_run: one launch, no checks).
 *
 * The weights are (300, 96): rows not a multiple of 128, three scales a row. Host memory here; CUDA memory
 * is described the same way (kDLCUDA), with a stream passed to mxfp8_transfer / mxfp8_plan_run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mxfp8/mxfp8.h>

enum { WEIGHTS = 2, ROWS = 300, K = 96, C = K / 32, PADDED_ROWS = 384, PADDED_COLS = 4, HALF = ROWS / 2 };

/* The cuBLAS / CUTLASS 128x4 layout of an R x C scale matrix padded to Cp columns (layout.h). */
static size_t offset_128x4(size_t r, size_t c, size_t padded_cols) {
  return ((r / 128) * (padded_cols / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4;
}

static DLTensor bytes_of(void *data, int64_t *shape, int32_t ndim) {
  DLTensor t = {data, {kDLCPU, 0}, ndim, {kDLUInt, 8, 1}, shape, NULL, 0};
  return t;
}

#define CHECK(call)                                                                                 \
  do {                                                                                              \
    mxfp8_status s_ = (call);                                                                       \
    if (s_ != MXFP8_OK) {                                                                           \
      fprintf(stderr, "%s failed: %s: %s\n", #call, mxfp8_status_string(s_), mxfp8_last_error()); \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

int main(void) {
  /* The trainer's storage, and the compact scales every rank should end up with. */
  static uint8_t values[WEIGHTS][ROWS * K], swizzled[WEIGHTS][PADDED_ROWS * PADDED_COLS], compact[WEIGHTS][ROWS * C];
  int64_t shape[2] = {ROWS, K}, scale_shape[2] = {PADDED_ROWS, PADDED_COLS};
  DLManagedTensorVersioned data[WEIGHTS], scale_inv[WEIGHTS];
  mxfp8_tensor *tensors[WEIGHTS];
  for (int w = 0; w < WEIGHTS; ++w) {
    for (size_t i = 0; i < sizeof values[w]; ++i) values[w][i] = (uint8_t)(i * 37u + 11u * (unsigned)w);
    memset(swizzled[w], 0, sizeof swizzled[w]);
    for (size_t r = 0; r < ROWS; ++r)
      for (size_t c = 0; c < C; ++c) {
        compact[w][r * C + c] = (uint8_t)(118 + (r * 3 + c + (size_t)w) % 17);
        swizzled[w][offset_128x4(r, c, PADDED_COLS)] = compact[w][r * C + c];
      }
    memset(&data[w], 0, sizeof data[w]); /* deleters NULL: this program owns the memory */
    memset(&scale_inv[w], 0, sizeof scale_inv[w]);
    data[w].version.major = scale_inv[w].version.major = DLPACK_MAJOR_VERSION;
    data[w].version.minor = scale_inv[w].version.minor = DLPACK_MINOR_VERSION;
    data[w].dl_tensor = bytes_of(values[w], shape, 2);
    scale_inv[w].dl_tensor = bytes_of(swizzled[w], scale_shape, 2);
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT_UNSET; /* format and layout must be said */
    desc.format = MXFP8_FORMAT_E4M3;
    desc.scale_layout = MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    desc.ndim = 2;
    desc.shape = shape;
    desc.rowwise_data = &data[w];
    desc.rowwise_scale_inv = &scale_inv[w];
    CHECK(mxfp8_tensor_create(&desc, &tensors[w]));
  }

  /* Sender: lay the bucket out, then fill it (one launch on a GPU). */
  mxfp8_transfer_desc send = MXFP8_TRANSFER_DESC_INIT;
  send.source = MXFP8_TRANSFER_FROM_TENSORS;
  send.destination = MXFP8_TRANSFER_TO_BUCKET;
  send.count = WEIGHTS;
  send.tensors = (const mxfp8_tensor *const *)tensors;
  mxfp8_bucket_part parts[WEIGHTS];
  uint64_t total = 0;
  CHECK(mxfp8_bucket_parts(&send, 256, parts, &total));
  uint8_t *bucket_bytes = malloc(total);
  int64_t bucket_shape[1] = {(int64_t)total};
  DLTensor bucket = bytes_of(bucket_bytes, bucket_shape, 1);
  send.bucket_out = &bucket;
  send.parts_out = parts;
  CHECK(mxfp8_transfer(&send, NULL));

  /* Receiver (rank 1 of 2): rows 150..299 of each weight, into its parameters. It knows the bucket only
   * by what the sender says of each part: parts, shapes, formats, layouts. */
  static uint8_t my_values[WEIGHTS][HALF * K], my_scales[WEIGHTS][256 * PADDED_COLS];
  int64_t values_shape[1] = {HALF * K}, scales_shape[1] = {256 * PADDED_COLS};
  DLTensor value_params[WEIGHTS], scale_params[WEIGHTS];
  DLTensor *value_ptrs[WEIGHTS], *scale_ptrs[WEIGHTS];
  const int64_t *shapes[WEIGHTS];
  int32_t ndims[WEIGHTS], formats[WEIGHTS], source_layouts[WEIGHTS], targets[WEIGHTS];
  mxfp8_shard half = MXFP8_SHARD_INIT;
  half.row_begin = HALF;
  const mxfp8_shard *shards[WEIGHTS];
  for (int w = 0; w < WEIGHTS; ++w) {
    value_params[w] = bytes_of(my_values[w], values_shape, 1);
    scale_params[w] = bytes_of(my_scales[w], scales_shape, 1);
    value_ptrs[w] = &value_params[w];
    scale_ptrs[w] = &scale_params[w];
    shapes[w] = shape;
    ndims[w] = 2;
    formats[w] = MXFP8_FORMAT_E4M3;
    source_layouts[w] = MXFP8_SCALE_LAYOUT_COMPACT; /* what the sender wrote (its target_layouts: NULL) */
    targets[w] = MXFP8_SCALE_LAYOUT_128X4;
    shards[w] = &half;
  }
  mxfp8_transfer_desc receive = MXFP8_TRANSFER_DESC_INIT;
  receive.source = MXFP8_TRANSFER_FROM_BUCKET;
  receive.destination = MXFP8_TRANSFER_TO_BUFFERS;
  receive.count = WEIGHTS;
  receive.shards = shards;
  receive.bucket_in = &bucket;
  receive.parts_in = parts;
  receive.ndims = ndims;
  receive.shapes = shapes;
  receive.formats = formats;
  receive.source_layouts = source_layouts;
  receive.target_layouts = targets;
  receive.values = value_ptrs;
  receive.scales = scale_ptrs;
  mxfp8_plan *plan = NULL;
  CHECK(mxfp8_transfer_prepare(&receive, &plan)); /* once */
  CHECK(mxfp8_plan_run(plan, NULL));              /* every step */
  mxfp8_plan_release(plan);

  for (int w = 0; w < WEIGHTS; ++w) {
    if (memcmp(my_values[w], values[w] + HALF * K, sizeof my_values[w]) != 0) {
      fprintf(stderr, "weight %d: values differ\n", w);
      return 1;
    }
    for (size_t r = 0; r < HALF; ++r)
      for (size_t c = 0; c < C; ++c)
        if (my_scales[w][offset_128x4(r, c, PADDED_COLS)] != compact[w][(HALF + r) * C + c]) {
          fprintf(stderr, "weight %d: scale (%zu, %zu) differs\n", w, r, c);
          return 1;
        }
  }
  printf("bucket of %llu bytes; rank 1 holds rows %d..%d of %d weights, scales in 128x4: bit-exact\n",
         (unsigned long long)total, HALF, ROWS - 1, WEIGHTS);
  for (int w = 0; w < WEIGHTS; ++w) mxfp8_tensor_release(tensors[w]);
  free(bucket_bytes);
  return 0;
}
