/*
 * mxfp8 — hand MXFP8 weights from a trainer to whoever consumes them next.
 *
 * Copyright 2026 the mxfp8 authors. SPDX-License-Identifier: Apache-2.0
 *
 * An MXFP8 tensor of logical shape (*lead, K) is FP8 values plus one E8M0 scale (a biased power-of-two
 * exponent) per block of 32 values. Producers such as Transformer Engine store the scales padded, and
 * sometimes swizzled into the cuBLAS "128x4" GEMM layout. Consumers (vLLM, SGLang, JAX) want the values
 * plus compact row-major uint8 scales of shape (*lead, ceil(K/32)). This library turns the first into
 * the second with no dequantize and no requantize: a view where the bytes already sit right, otherwise a
 * copy made by one pass of an unswizzle loop (CPU) or kernel (CUDA). For trainers that keep BF16 weights
 * it also quantizes, bit-exact with Transformer Engine, straight into either layout (mxfp8_quantize).
 *
 * Conventions that hold for every function below:
 *   - Every function returns an mxfp8_status, except the few that cannot fail (they say so).
 *   - On failure nothing is allocated, nothing passed in is taken or modified, every output pointer is
 *     left as it was, and mxfp8_last_error() describes what was wrong.
 *   - No C++ exception and no signal ever leaves the library for bad input.
 *   - Structs that may grow open with `struct_size`; fill them with their *_INIT macro and then set the
 *     fields you need. A struct from a newer caller is accepted when the fields this library does not know
 *     are zero. Enum values and status values never change once published.
 *   - All memory is described with DLPack (https://dmlc.github.io/dlpack/), header >= 1.1. A
 *     DLManagedTensorVersioned whose version.major is not this header's DLPACK_MAJOR_VERSION is refused
 *     before any other field of it is read (DLPack forbids reading them). Tensors have at most 64
 *     dimensions. Every size, offset and stride is checked arithmetic: one that does not fit in int64 is
 *     MXFP8_ERROR_INVALID_ARGUMENT, never a wrapped number.
 *   - What a call writes must not share a byte with what it reads or with another of its outputs
 *     (in-place swizzles, a destination over a source's buffers, two overlapping destinations): such a
 *     call fails with MXFP8_ERROR_INVALID_ARGUMENT before anything is written. Inputs may share bytes.
 *     Two output pointers of one call must differ.
 *   - Work is proportional to the bytes moved: an empty tensor costs nothing, however large its other
 *     dimensions. Empty buffers may have a NULL data pointer.
 *   - Stability. Every section below is marked. STABLE: frozen in 0.x; a release may add functions,
 *     enum values and fields appended to size-prefixed structs, never change or remove one (the ABI gate
 *     in abi/ fails a build that does). EXPERIMENTAL (buckets, grouped experts, and what lands next:
 *     import targets, plans, NVFP4): young, used and tested, but may still change in a minor release;
 *     every such change is called out in CHANGELOG.md. Status values are stable whatever their section.
 *   - CUDA work runs on the stream you pass (NULL is the legacy default stream); the library never
 *     synchronizes the device behind your back. Errors from kernels that run asynchronously show up at a
 *     later CUDA call of yours or ours, as they do everywhere in CUDA.
 *   - Host work (quantize, dequantize, and the unswizzle of host scales by an export or
 *     mxfp8_unswizzle_scales) runs on the calling thread. A call that moves at least 4 MiB (reads plus
 *     writes) is split by rows over one thread per 2 MiB, at most one per core the calling thread may run
 *     on (sched_getaffinity); the calling thread takes one share, the others run on threads started for
 *     the call and joined before it returns. The bytes written never depend on the split. Environment
 *     variables, read by every such call of two or more rows (do not change them while another thread may
 *     be inside the library):
 *       MXFP8_HOST_THREADS=N              at most N threads; 1 keeps everything on the calling thread
 *                                         (for callers that run their own pool);
 *       MXFP8_HOST_MIN_BYTES_PER_THREAD=B B bytes per thread instead of 2 MiB (0: split every call);
 *       MXFP8_HOST_ISA=avx2|baseline      use no wider vector instructions than these (x86-64; by
 *                                         default the widest the CPU has: AVX-512, AVX2 or SSE2).
 *     Anything else in these variables (or nothing) means the defaults.
 */
#ifndef MXFP8_MXFP8_H_
#define MXFP8_MXFP8_H_

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION < 1 || \
    (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
#error "mxfp8.h needs dlpack.h 1.1 or newer (it defines the float8 type codes)"
#endif

#if defined(_WIN32)
#define MXFP8_API_EXPORT __declspec(dllexport)
#define MXFP8_API_IMPORT __declspec(dllimport)
#else
#define MXFP8_API_EXPORT __attribute__((visibility("default")))
#define MXFP8_API_IMPORT
#endif
/* MXFP8_BUILDING_LIBRARY is defined only while the library itself is compiled. */
#if defined(MXFP8_BUILDING_LIBRARY)
#define MXFP8_API MXFP8_API_EXPORT
#else
#define MXFP8_API MXFP8_API_IMPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ====================================================================================================
 * Version                                                                              [STABLE]
 * ==================================================================================================== */

#define MXFP8_VERSION_MAJOR 0
#define MXFP8_VERSION_MINOR 1
#define MXFP8_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, the same encoding mxfp8_version() returns. */
#define MXFP8_VERSION (MXFP8_VERSION_MAJOR * 10000 + MXFP8_VERSION_MINOR * 100 + MXFP8_VERSION_PATCH)

/* The version of the library actually loaded, encoded as MXFP8_VERSION. Compare it with the macro to
 * detect a header/library mismatch. Cannot fail. */
MXFP8_API uint32_t mxfp8_version(void);

/* ====================================================================================================
 * Status and errors                                                                    [STABLE]
 * ==================================================================================================== */

/* The values are pinned: a published value never changes meaning. New values may be added. */
typedef enum mxfp8_status {
  MXFP8_OK = 0,
  /* A pointer, enum, struct size, shape, dtype, stride or buffer size is wrong. Fix the call. */
  MXFP8_ERROR_INVALID_ARGUMENT = 1,
  /* The tensor has no data for the requested direction (e.g. rowwise export of a columnwise-only
   * tensor). */
  MXFP8_ERROR_MISSING_DATA = 2,
  /* Valid, but not something this build can do (a device type it does not know, a CUDA copy from a
   * build without CUDA). */
  MXFP8_ERROR_UNSUPPORTED = 3,
  /* Host or device memory could not be allocated (also: the caller's allocator failed). */
  MXFP8_ERROR_OUT_OF_MEMORY = 4,
  /* A CUDA runtime call or kernel launch failed; the message carries CUDA's error text. */
  MXFP8_ERROR_CUDA = 5,
  /* A bug in this library. Please report it with the message. */
  MXFP8_ERROR_INTERNAL = 6,
  /* Not a status: one past the largest value this header knows. */
  MXFP8_NUM_STATUS = 7
} mxfp8_status;

/* A short, static, English name for a status ("invalid argument"). Never NULL; unknown values give
 * "unknown status". Cannot fail. */
MXFP8_API const char *mxfp8_status_string(mxfp8_status status);

/* The detailed message of the last failed call made by *this thread* (for example
 * "rowwise_scale_inv: GEMM-swizzled scales for shape (100, 48) need 128 x 4 = 512 bytes, got 200").
 * Never NULL (empty when nothing failed yet). Only meaningful right after a call returned something
 * other than MXFP8_OK; successful calls do not clear it. The pointer stays valid until this thread's
 * next call into the library. Cannot fail. */
MXFP8_API const char *mxfp8_last_error(void);

/* ====================================================================================================
 * Describing an MXFP8 tensor                                                           [STABLE]
 * ==================================================================================================== */

/* The FP8 encoding of the values. */
typedef enum mxfp8_format {
  MXFP8_FORMAT_E4M3 = 1, /* float8_e4m3fn, DLPack code kDLFloat8_e4m3fn (10) */
  MXFP8_FORMAT_E5M2 = 2, /* float8_e5m2,   DLPack code kDLFloat8_e5m2 (12) */
  /* Not an MXFP8 encoding: marks an NVFP4 entry of a bucket in mxfp8_bucket_manifest.formats (see "NVFP4 in
   * buckets and imports"). mxfp8_tensor_desc and the other MXFP8 calls refuse it. */
  MXFP8_FORMAT_NVFP4 = 3
} mxfp8_format;

/* How a scale buffer is laid out in memory. Either layout may be padded; padding is never read.
 *
 * Rowwise scales S (one per 32 consecutive values along K) form an R x C matrix with R = M = prod(lead)
 * and C = ceil(K/32). Columnwise scales (one per 32 consecutive rows) form an R x C matrix with
 * R = ceil(M/32) and C = K. A partial last block keeps its own scale, hence the ceil. */
typedef enum mxfp8_scale_layout {
  /* Row-major (R', C') with R' >= R and C' >= C; the buffer's own shape gives R' and C' (leading dims
   * are flattened into rows). TE allocates R' = roundup(R, 128), C' = roundup(C, 4) for rowwise and
   * R' = roundup(R, 4), C' = roundup(C, 128) for columnwise. A compact (R, C) buffer is fine too. */
  MXFP8_SCALE_LAYOUT_ROW_MAJOR = 0,
  /* The cuBLAS / CUTLASS block-scaling layout ("128x4" tiles). For rowwise scales, S padded to
   * Rp = roundup(R, 128), Cp = roundup(C, 4) and stored tile by tile:
   *
   *   offset(r, c) = ((r / 128) * (Cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
   *
   * Columnwise scales are swizzled as their transpose: the matrix swizzled is S^T (C x R), so Rp and Cp
   * are roundup(K, 128) and roundup(ceil(M/32), 4). The buffer must be contiguous and hold exactly
   * Rp * Cp bytes: any other size means the caller's idea of the layout is wrong, and guessing would
   * decode to noise. */
  MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED = 1
} mxfp8_scale_layout;

/* Which copy of the data an export reads. */
typedef enum mxfp8_direction {
  MXFP8_DIRECTION_ROWWISE = 0,   /* values scaled along K: scales (*lead, ceil(K/32)) */
  MXFP8_DIRECTION_COLUMNWISE = 1 /* values scaled along rows: scales (ceil(M/32), K) */
} mxfp8_direction;

/* How many values share one scale. */
typedef enum mxfp8_block {
  MXFP8_BLOCK_1X32 = 0, /* one scale per 32 consecutive values (along K rowwise, along rows columnwise) */
  /* Transformer Engine's 2-D weight quantization: one scale per 32 x 32 block, stored as 1x32 scales in
   * which every row (rowwise) or column (columnwise) of a 32-wide block repeats the block's scale. */
  MXFP8_BLOCK_32X32 = 1
} mxfp8_block;

/* Everything that says what an MXFP8 tensor is and where its bytes are. Start from
 * MXFP8_TENSOR_DESC_INIT.
 *
 * Data tensors: the tensor's shape (not transposed, also for columnwise data, as TE stores it), dtype
 * uint8 or the float8 code matching `format`, row-major contiguous (strides NULL or compact).
 * Scale tensors: dtype uint8 or kDLFloat8_e8m0fnu (14), laid out as `scale_layout` says; the last
 * dimension must have stride 1 and the leading dimensions must flatten into rows.
 * All four live on the same device: kDLCPU, kDLCUDA, kDLCUDAHost or kDLCUDAManaged.
 * At least one direction needs both its data and its scales; a direction with only one of the two is an
 * error.
 *
 * Ownership: on success, mxfp8_tensor_create takes every non-NULL DLManagedTensorVersioned given here
 * and calls its deleter exactly once, when the tensor and every view exported from it are released. A
 * NULL deleter marks borrowed memory: you keep it alive for as long as the tensor or any view of it
 * lives. On failure nothing is taken. Passing the same managed tensor in two fields is an error. */
typedef struct mxfp8_tensor_desc {
  uint32_t struct_size; /* sizeof(mxfp8_tensor_desc) */
  int32_t format;       /* mxfp8_format */
  int32_t scale_layout; /* mxfp8_scale_layout, for both directions (TE's with_gemm_swizzled_scales) */
  int32_t ndim;         /* length of `shape`; 0 takes the logical shape from the data tensor */
  const int64_t *shape; /* the logical shape (*lead, K), copied; needed only to check the data's */
  DLManagedTensorVersioned *rowwise_data;
  DLManagedTensorVersioned *rowwise_scale_inv;
  DLManagedTensorVersioned *columnwise_data;
  DLManagedTensorVersioned *columnwise_scale_inv;
  /* Added in 0.1 after the fields above (older callers' smaller struct_size means 1x32). */
  int32_t block;        /* mxfp8_block */
  uint32_t reserved;    /* must be 0 */
} mxfp8_tensor_desc;

#define MXFP8_TENSOR_DESC_INIT                                                       \
  {                                                                                  \
    (uint32_t) sizeof(mxfp8_tensor_desc),  /* struct_size */                         \
    MXFP8_FORMAT_E4M3,                     /* format */                              \
    MXFP8_SCALE_LAYOUT_ROW_MAJOR,          /* scale_layout */                        \
    0,                                     /* ndim: the shape comes from the data */ \
    NULL,                                  /* shape */                               \
    NULL,                                  /* rowwise_data */                        \
    NULL,                                  /* rowwise_scale_inv */                   \
    NULL,                                  /* columnwise_data */                     \
    NULL,                                  /* columnwise_scale_inv */                \
    MXFP8_BLOCK_1X32,                      /* block */                               \
    0u                                     /* reserved */                            \
  }

/* An immutable, reference-counted handle on a validated MXFP8 tensor. Thread-safe: any number of
 * threads may export from one handle at once. */
typedef struct mxfp8_tensor mxfp8_tensor;

/* Validates `desc` completely (shapes, dtypes, devices, buffer sizes, strides) and wraps it in a handle.
 * Every later export can only fail for reasons outside the description (memory, CUDA).
 * `*out` is written only on success. Touches no tensor memory, launches nothing. */
MXFP8_API mxfp8_status mxfp8_tensor_create(const mxfp8_tensor_desc *desc, mxfp8_tensor **out);

/* Drops the caller's reference. Views exported from the tensor hold their own references, so they stay
 * valid; the input deleters run when the last reference goes. NULL is fine. Cannot fail. */
MXFP8_API void mxfp8_tensor_release(mxfp8_tensor *tensor);

/* ====================================================================================================
 * Exporting values and compact scales                                                  [STABLE]
 * ==================================================================================================== */

/* The dtype of the exported values. */
typedef enum mxfp8_values_dtype {
  MXFP8_VALUES_FP8 = 0,  /* kDLFloat8_e4m3fn or kDLFloat8_e5m2, by the tensor's format */
  MXFP8_VALUES_UINT8 = 1 /* the same bytes as uint8, for consumers without float8 (CuPy, NumPy) */
} mxfp8_values_dtype;

/* The dtype of the exported scales. Both are the E8M0 biased exponent byte: scale = 2^(byte - 127),
 * byte 255 is NaN. */
typedef enum mxfp8_scales_dtype {
  MXFP8_SCALES_UINT8 = 0, /* uint8: the wire format vLLM and SGLang load */
  MXFP8_SCALES_E8M0 = 1   /* kDLFloat8_e8m0fnu (14) */
} mxfp8_scales_dtype;

/* What to do with row-major scales that carry padding columns (C' > C). */
typedef enum mxfp8_padded_scales {
  MXFP8_PADDED_SCALES_COPY = 0,       /* a contiguous copy (what most consumers expect) */
  MXFP8_PADDED_SCALES_STRIDED_VIEW = 1 /* a zero-copy view whose row stride is C' */
} mxfp8_padded_scales;

/* Which scales an export returns. */
typedef enum mxfp8_scales_granularity {
  MXFP8_SCALES_PER_32 = 0, /* the stored 1x32 scales: (*lead, ceil(K/32)) rowwise, (ceil(M/32), K) columnwise */
  /* One scale per 32 x 32 block, (ceil(M/32), ceil(K/32)), for a tensor described as MXFP8_BLOCK_32X32.
   * Always a copy. The export checks that each block's rows (rowwise) or columns (columnwise) agree and
   * fails with MXFP8_ERROR_INVALID_ARGUMENT, naming the first disagreement, when they do not. For CUDA
   * memory this check makes the call wait for `stream` (cudaStreamSynchronize). */
  MXFP8_SCALES_PER_32X32 = 1
} mxfp8_scales_granularity;

/* Options of mxfp8_export_components. Start from MXFP8_EXPORT_OPTIONS_INIT; NULL options mean the
 * defaults it sets. */
typedef struct mxfp8_export_options {
  uint32_t struct_size; /* sizeof(mxfp8_export_options) */
  int32_t direction;    /* mxfp8_direction, default rowwise */
  int32_t values_dtype; /* mxfp8_values_dtype, default fp8 */
  int32_t scales_dtype; /* mxfp8_scales_dtype, default uint8 */
  int32_t padded_scales;/* mxfp8_padded_scales, default copy */
  uint32_t reserved;    /* must be 0 */
  /* cudaStream_t the copy (if any) runs on; NULL is the legacy default stream. Ignored for host data.
   * The export returns once the work is queued: order your reads of the scales after it on this stream
   * (or synchronize it). */
  void *stream;
  /* Optional: allocates the memory of copies. It has the signature of DLPack's
   * DLPackManagedTensorAllocator (so the one from a framework's DLPackExchangeAPI, e.g. PyTorch's caching
   * allocator, can be assigned directly): it receives a prototype DLTensor (dtype, ndim, shape, device),
   * returns 0 and a managed tensor on success, and calls SetError and returns non-zero on failure (then
   * `*out` is never read). The returned tensor must be of this header's DLPack major version, contiguous,
   * with the prototype's ndim, shape and device, dtype uint8 or the prototype's, a non-NULL data
   * pointer, not flagged read-only, and must not overlap the source; it may start at a byte_offset (the
   * output is written at data + byte_offset). Every field is checked before it is used; a result that
   * fails a check is released through its deleter and the call fails with MXFP8_ERROR_INVALID_ARGUMENT.
   * Each call must return a tensor of its own: the same DLManagedTensorVersioned returned for two outputs
   * of one call is refused with MXFP8_ERROR_INVALID_ARGUMENT (and its deleter runs once, not twice), and
   * so is one the call's tensor holds (given to mxfp8_tensor_create and the like), which is not released.
   * A good result is handed back to you as the output (with DLPACK_FLAG_BITMASK_IS_COPIED added). NULL:
   * the library allocates: malloc on the host (labelled kDLCPU, also for a kDLCUDAHost source: malloc
   * memory is not pinned); for CUDA memory a stream-ordered allocation on `stream` from the
   * library's own pool (one per device, keeping up to 64 MiB of freed memory for reuse; the environment
   * variable MXFP8_DEVICE_POOL_LIMIT_BYTES, read when a device's pool is first used, caps its size, and an
   * allocation past the cap fails with MXFP8_ERROR_OUT_OF_MEMORY like any other), and the output's
   * deleter frees it with cudaFreeAsync on that same stream. Then, as with PyTorch's record_stream, `stream` must
   * still exist when you call the deleter, and work on other streams that reads the copy must be ordered
   * before the deleter's free on `stream` (make `stream` wait for it, or synchronize first). */
  int (*allocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                   void (*set_error)(void *error_ctx, const char *kind, const char *message));
  /* Added in 0.1 after the fields above (older callers' smaller struct_size means per 32). */
  int32_t scales_granularity; /* mxfp8_scales_granularity */
  uint32_t reserved2;         /* must be 0 */
  /* Added after the fields above (a smaller struct_size means MXFP8_SCALE_FIXUP_NONE): the
   * mxfp8_scale_fixup (declared with the import calls; this field and the enum's published values are
   * stable like the rest of this struct, even though the import section is experimental) applied to
   * every scale written by
   * mxfp8_export_scales_batched, mxfp8_export_bucket and mxfp8_import_tensors and their prepared forms.
   * mxfp8_export_components and mxfp8_grouped_export_stacked, whose scales may be views, take only
   * MXFP8_SCALE_FIXUP_NONE (MXFP8_ERROR_INVALID_ARGUMENT otherwise), as do mxfp8_export_shard and
   * mxfp8_grouped_export_experts; the calls with shards refuse it for a tensor with a shard
   * (MXFP8_ERROR_UNSUPPORTED, see "Resharding"). */
  int32_t scale_fixup;
  uint32_t reserved3;         /* must be 0 */
} mxfp8_export_options;

#define MXFP8_EXPORT_OPTIONS_INIT                                                     \
  {                                                                                   \
    (uint32_t) sizeof(mxfp8_export_options),  /* struct_size */                       \
    MXFP8_DIRECTION_ROWWISE,                  /* direction */                         \
    MXFP8_VALUES_FP8,                         /* values_dtype */                      \
    MXFP8_SCALES_UINT8,                       /* scales_dtype */                      \
    MXFP8_PADDED_SCALES_COPY,                 /* padded_scales */                     \
    0u,                                       /* reserved */                          \
    NULL,                                     /* stream: the legacy default stream */ \
    NULL,                                     /* allocator: the library allocates */  \
    MXFP8_SCALES_PER_32,                      /* scales_granularity */                \
    0u,                                       /* reserved2 */                         \
    0,                                        /* scale_fixup: MXFP8_SCALE_FIXUP_NONE */ \
    0u                                        /* reserved3 */                         \
  }

/* Exports one direction of `tensor` as two DLPack tensors:
 *
 *   values: the data, shape = the tensor's logical shape, ALWAYS a zero-copy view. It shares memory with
 *           the source, so in-place updates of the source (an optimizer step) show through; clone it to
 *           keep a snapshot. Read-only if the source data was flagged read-only.
 *   scales: the E8M0 scales, compact: (*lead, ceil(K/32)) rowwise, (ceil(M/32), K) columnwise.
 *           A view when the bytes already lie that way (row-major, no padding columns, or padding
 *           columns with MXFP8_PADDED_SCALES_STRIDED_VIEW); otherwise a new contiguous buffer on the
 *           source's device, made by the unswizzle / crop copy, with DLPACK_FLAG_BITMASK_IS_COPIED set.
 *           With MXFP8_SCALES_PER_32X32: one per 32 x 32 block, (ceil(M/32), ceil(K/32)), always a copy.
 *
 * Every output carries strides (never NULL when ndim > 0) and the DLPack version of the header the
 * library was built with. Views keep `tensor` alive; release each output by calling its deleter (once).
 * Either output pointer may be NULL to skip that output, but not both. Both outputs are written only on
 * success. Thread-safe. Fails with MXFP8_ERROR_MISSING_DATA when the tensor has no data for `direction`.
 */
MXFP8_API mxfp8_status mxfp8_export_components(const mxfp8_tensor *tensor,
                                               const mxfp8_export_options *options,
                                               DLManagedTensorVersioned **values,
                                               DLManagedTensorVersioned **scales);

/* ====================================================================================================
 * Batched export: many tensors' scales into caller-owned memory, in one launch          [STABLE]
 * ==================================================================================================== */

/* Writes the compact scales of `count` tensors (direction `options->direction`) into caller-owned
 * buffers: destinations[i] receives the scales of tensors[i], row-major, as mxfp8_export_components
 * would return them. This is the weight-sync path: a whole model's scales in one kernel launch (one per
 * ~384 tensors) instead of one launch and one allocation per tensor.
 *
 *   destinations[i]: uint8 or e8m0, contiguous, exactly R_i * C_i elements (any shape, so slices of one
 *                    flat buffer work), on the device of the tensors. Must not overlap a source.
 *   All tensors live on one device. Every tensor and destination is checked before any work is queued,
 *   so a bad entry leaves every destination untouched.
 *   options: `direction` and `stream` are used; the dtype, padding and allocator fields do not apply
 *            (NULL options: rowwise, legacy default stream).
 *
 * CUDA: queued on `stream`, the call does not wait. Host: done when the call returns. count == 0 is a
 * no-op. */
MXFP8_API mxfp8_status mxfp8_export_scales_batched(const mxfp8_tensor *const *tensors,
                                                   DLTensor *const *destinations, size_t count,
                                                   const mxfp8_export_options *options);

/* ====================================================================================================
 * Buckets: many tensors' values and scales packed into one caller buffer, for one IPC handle or one
 * NCCL broadcast                                                                        [EXPERIMENTAL]
 * ==================================================================================================== */

/* Where one tensor's parts sit in a bucket, in bytes from the bucket's first byte. */
typedef struct mxfp8_bucket_entry {
  uint64_t values_offset;
  uint64_t values_bytes;  /* prod(shape): the values, row-major */
  uint64_t scales_offset;
  uint64_t scales_bytes;  /* the compact scales, row-major, as mxfp8_export_components returns them */
} mxfp8_bucket_entry;

/* Plans a bucket: tensor i's values at entries[i].values_offset and its compact scales (direction
 * `options->direction`) right after, every part starting at a multiple of `alignment` (a power of two,
 * at least 1; 256 suits every consumer's vector loads), in tensor order. `*total_bytes` is the bucket
 * size needed; a plan whose size or alignment padding does not fit in uint64 fails. Touches no tensor
 * memory. */
MXFP8_API mxfp8_status mxfp8_bucket_plan(const mxfp8_tensor *const *tensors, size_t count,
                                         const mxfp8_export_options *options, uint64_t alignment,
                                         mxfp8_bucket_entry *entries, uint64_t *total_bytes);

/* Fills `bucket` (contiguous uint8, at least the planned size, on the tensors' device) as `entries`
 * say: the values copied, the scales unswizzled or cropped straight into place; bytes between parts are
 * left as they were. CUDA: one kernel launch for the whole bucket (a few past several hundred parts),
 * queued on `options->stream`, plus one cudaMemcpyAsync on that stream per part of values of at least
 * 4 MiB, which the copy engine moves at copy speed (the environment variable MXFP8_COPY_ENGINE_MIN_BYTES,
 * read once, sets that size; 0 keeps every byte in the kernel). `entries` must come from mxfp8_bucket_plan for the same tensors and
 * options (they are checked to lie inside the bucket and not to overlap); the bucket must not overlap any
 * buffer of the tensors. count == 0 is a no-op (every pointer may then be NULL). */
MXFP8_API mxfp8_status mxfp8_export_bucket(const mxfp8_tensor *const *tensors, size_t count,
                                           const mxfp8_export_options *options,
                                           const mxfp8_bucket_entry *entries, DLTensor *bucket);

/* ====================================================================================================
 * Prepared exports: a batched or bucket export checked once, run every step                [EXPERIMENTAL]
 * ==================================================================================================== */

/* A trainer exports the same weights from the same buffers at every refit (Megatron keeps MXFP8 storage
 * at fixed addresses so its CUDA graphs stay valid). A prepared export does every check of
 * mxfp8_export_scales_batched or mxfp8_export_bucket once, at preparation, and keeps the work; each run
 * is then only the launch: no check, no allocation, no synchronization, so a run can be captured in a
 * CUDA graph. Immutable and thread-safe: a run changes nothing in the plan, so any number of threads may
 * share, run and release plans made from the same tensors. Each run of one plan writes the same
 * destinations (or bucket), though, so two runs of it that overlap in time race on those bytes, as two
 * writes of any buffer do: order them (one thread or stream at a time, or an event between streams).
 *
 * What it holds: a reference on every tensor (their deleters, and with them the owners of the source
 * buffers, wait for mxfp8_prepared_export_release), and the addresses of the destinations or the bucket,
 * which stay yours: keep them allocated and in place for as long as you run the plan. A producer that
 * reallocates a source (a new storage for a parameter) must describe it again and prepare again: the
 * plan keeps the old storage alive and would export it, never freed memory but stale values. */
typedef struct mxfp8_prepared_export mxfp8_prepared_export;

/* Prepares mxfp8_export_scales_batched(tensors, destinations, count, options); the same checks and the
 * same errors. options->stream is not used (each run names its stream). *out on success only. */
MXFP8_API mxfp8_status mxfp8_prepare_scales_batched(const mxfp8_tensor *const *tensors,
                                                    DLTensor *const *destinations, size_t count,
                                                    const mxfp8_export_options *options,
                                                    mxfp8_prepared_export **out);

/* Prepares mxfp8_export_bucket(tensors, count, options, entries, bucket); the same checks and errors.
 * options->stream is not used. *out on success only. */
MXFP8_API mxfp8_status mxfp8_prepare_bucket(const mxfp8_tensor *const *tensors, size_t count,
                                            const mxfp8_export_options *options,
                                            const mxfp8_bucket_entry *entries, DLTensor *bucket,
                                            mxfp8_prepared_export **out);

/* Runs the prepared export on `stream` (a cudaStream_t; NULL: the legacy default stream; ignored for
 * host memory, where the run is done when the call returns). CUDA: queued, the call does not wait.
 * Fails only for CUDA reasons. */
MXFP8_API mxfp8_status mxfp8_prepared_export_run(const mxfp8_prepared_export *prepared, void *stream);

/* Drops the plan and its tensor references. NULL is fine. Cannot fail. Work already queued by a run
 * keeps running: release after it is ordered (the sources stay alive only as long as the plan). */
MXFP8_API void mxfp8_prepared_export_release(mxfp8_prepared_export *prepared);

/* ====================================================================================================
 * Import: a bucket, or a trainer's tensors, written into the engine's own parameters   [EXPERIMENTAL]
 * ==================================================================================================== */

/* The layout of one tensor's parts, as a bucket carries them or as an engine's parameters want them
 * (docs/api.md, "Engine layouts, shards, experts", says which engine loads which).
 * Values are row-major in every layout except the TRT-LLM ones, which permute value rows.
 * Scales of a rowwise tensor form S (R x C) = (M, ceil(K/32)); of a columnwise tensor
 * S (R x C) = (ceil(M/32), K). Every layout can be a convert target (mxfp8_convert*); every layout but
 * the TRT-LLM ones (which permute value rows, while a bucket and an import keep values in row order) can
 * also be an import destination (mxfp8_import_*) and a bucket part (manifest.scales_layouts). The bytes
 * a layout gives for (R, C) are exact: a buffer or part
 * of any other size is refused, so scales are never decoded in a layout they are not in (nor
 * transformed twice). For grouped experts each expert's scales take that many bytes, back to back. */
typedef enum mxfp8_layout {
  /* Scales compact row-major, exactly R * C bytes: what mxfp8_export_bucket writes and vLLM / SGLang load. */
  MXFP8_LAYOUT_COMPACT = 0,
  /* Scales in the cuBLAS / CUTLASS 128x4 layout (MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED), flat, exactly
   * roundup(R, 128) * roundup(C, 4) bytes (columnwise: S^T swizzled, roundup(C, 128) * roundup(R, 4)),
   * padding bytes zero: what a cuBLAS or CUTLASS MXFP8 GEMM (vLLM's FlashInfer-CUTLASS linear, SGLang's
   * weight_scale_inv_swizzled) loads. */
  MXFP8_LAYOUT_CUTLASS_128X4 = 1,
  /* FlashInfer's TRT-LLM MoE weights (vLLM's MXFP8 MoE backend: what _shuffle_mxfp8_moe_weights makes of
   * w2_weight and its scales), per expert of R rows, R a multiple of 128 (FlashInfer's requirement):
   * FlashInfer's shuffle_matrix_a permutation (epilogue_tile_m 128) moves row 32b + i of the values
   * and of S to row 32b + 8 * (i % 4) + i / 4; the permuted S is then laid out as
   * MXFP8_LAYOUT_CUTLASS_128X4 (shuffle_matrix_sf_a), R * roundup(C, 4) bytes, padding zero:
   *
   *   byte offset of S(r, c) = swizzled offset of (32 * (r / 32) + 8 * (r % 4) + (r % 32) / 4, c)
   *
   * The values must be converted along (mxfp8_convert*): their rows move the same way. Rowwise only;
   * not a bucket or import layout (a bucket's values are in row order). */
  MXFP8_LAYOUT_TRTLLM_SHUFFLED = 2,
  /* DeepGEMM's packed UE8M0 scales (SGLang's DeepGEMM path; DeepGEMM's
   * get_mn_major_tma_aligned_packed_ue8m0_tensor): the int32 tensor [mn, ceil(sf_k / 4)] with
   * mn = R, sf_k = C, MN-major, strides (1, mn_aligned) in int32 elements, mn_aligned = roundup(R, 4).
   * Int32 (m, j) holds the E8M0 bytes of S(m, 4j .. 4j+3), S(m, 4j) in its lowest byte, so in memory:
   *
   *   byte offset of S(r, c) = ((c / 4) * roundup(R, 4) + r) * 4 + c % 4
   *
   * exactly 4 * ceil(C / 4) * roundup(R, 4) bytes; padding bytes (columns C.. of the last int32 of a row,
   * rows R .. mn_aligned) are zero (DeepGEMM's strided view, when R % 4 != 0, does not describe the
   * last column's padding rows: those bytes are left as they are; see mxfp8_convert). Grouped experts stack to DeepGEMM's [G, mn, ceil(sf_k / 4)] with
   * strides (ceil(sf_k / 4) * mn_aligned, 1, mn_aligned). Rowwise scales only (DeepGEMM packs along K):
   * columnwise is refused with MXFP8_ERROR_INVALID_ARGUMENT. */
  MXFP8_LAYOUT_DEEPGEMM_PACKED = 3,
  /* The same for the gate-and-up projection of a gated activation (SwiGLU): what vLLM loads as
   * w13_weight and its scales. The source rows are [gate (w1) rows 0 .. N-1; up (w3) rows N .. 2N-1],
   * as vLLM's and SGLang's w13 and the checkpoints hold them (R = 2N). First vLLM's swap_w13_to_w31
   * and FlashInfer's reorder_rows_for_gated_act_gemm: row 2i <- up row i (source N + i), row 2i + 1 <-
   * gate row i (source i); then MXFP8_LAYOUT_TRTLLM_SHUFFLED's shuffle and 128x4 interleave. */
  MXFP8_LAYOUT_TRTLLM_SHUFFLED_GATED = 4
} mxfp8_layout;

/* A rewrite of scale bytes some consumers need, applied to every real scale a call writes (padding
 * stays zero). */
typedef enum mxfp8_scale_fixup {
  MXFP8_SCALE_FIXUP_NONE = 0, /* the scale bytes as stored: the default */
  /* E8M0 byte 0 (2^-127, an all-zero block) written as 1 (2^-126). NeMo RL (#3477) writes it so, so
   * that its two weight transports send identical scale bytes; a block of zeros decodes to zeros either
   * way. */
  MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE = 1
} mxfp8_scale_fixup;

/* What a bucket holds, as the sender describes it to the receiver (who has only the bytes). The arrays
 * have `count` entries, tensor i's at index i; they are read during the call (and the preparation) only.
 * Start from MXFP8_BUCKET_MANIFEST_INIT: fields added later are appended, with 0 / NULL meaning what a
 * manifest without them meant. */
typedef struct mxfp8_bucket_manifest {
  uint32_t struct_size;                /* sizeof(mxfp8_bucket_manifest) */
  uint32_t reserved;                   /* must be 0 */
  size_t count;                        /* tensors in the bucket */
  const mxfp8_bucket_entry *entries;   /* where each tensor's values and scales lie (mxfp8_bucket_plan) */
  const int32_t *ndims;                /* each tensor's logical rank, 1..64 */
  const int64_t *const *shapes;        /* each tensor's logical shape (*lead, K) */
  const int32_t *formats;              /* mxfp8_format of each tensor's values; NULL: all E4M3 */
  const int32_t *directions;           /* mxfp8_direction of each tensor's scales; NULL: all rowwise */
  /* mxfp8_layout each tensor's scales have in the bucket; NULL: all MXFP8_LAYOUT_COMPACT, which is what
   * mxfp8_export_bucket writes. A part whose size does not match its layout is an error, so a receiver
   * never decodes scales in a layout they are not in (nor transforms them twice). The TRT-LLM layouts
   * are refused (MXFP8_ERROR_INVALID_ARGUMENT): a bucket carries values in row order. */
  const int32_t *scales_layouts;
  /* Added after the fields above (a smaller struct_size means MXFP8_SCALE_FIXUP_NONE): the
   * mxfp8_scale_fixup mxfp8_import_bucket applies to every scale it writes. */
  int32_t scale_fixup;
  uint32_t reserved2; /* must be 0 */
  /* Added with resharding (experimental) after the fields above. The shard of tensor i that
   * destinations[i] receives (see "Resharding"): the receiver takes only its rank's rows / columns of a
   * bucket that carries whole tensors, and the destination has the shard's sizes. NULL, or a NULL
   * entry: the whole tensor. */
  const struct mxfp8_shard *const *shards;
  /* Added with NVFP4 entries (experimental) after the fields above; see "NVFP4 in buckets and imports".
   * Entry i is NVFP4 when formats[i] is MXFP8_FORMAT_NVFP4; then nvfp4_entries[i] says where its amax
   * lies and which E4M3_MAX it has, and global_scales[i] receives its second-level scale in the
   * convention `global_scale` names. Both arrays have `count` entries, read at NVFP4 entries only; they
   * may be NULL when no entry is NVFP4. */
  const struct mxfp8_bucket_nvfp4_entry *nvfp4_entries;
  DLTensor *const *global_scales;
  int32_t global_scale; /* mxfp8_nvfp4_global_scale written to global_scales; default decode */
  uint32_t reserved3;   /* must be 0 */
  /* Added with mxfp8_bucket_manifest_check (experimental) after the fields above: the shape the sender
   * gives each entry's scale matrix S (a binding's manifest carries it, e.g. Python's and Rust's
   * "scales_shape"), so that a shape that merely has the right byte count is refused. S is MXFP8 rowwise
   * (M, ceil(K/32)), columnwise (ceil(M/32), K); NVFP4 (rows, ceil(cols/16)) of the stored matrix. A
   * given shape names S when its last dimension is S's columns and the others multiply to S's rows
   * ((*lead, ceil(K/32)) and (M, ceil(K/32)) both do), whatever scales_layouts[i] says (the layout gives
   * the bytes). Both NULL: not checked; scales_ndims[i] 1..64. */
  const int32_t *scales_ndims;
  const int64_t *const *scales_shapes;
} mxfp8_bucket_manifest;

#define MXFP8_BUCKET_MANIFEST_INIT                                          \
  {                                                                         \
    (uint32_t) sizeof(mxfp8_bucket_manifest),  /* struct_size */            \
    0u,                                        /* reserved */               \
    0,                                         /* count */                  \
    NULL,                                      /* entries */                \
    NULL,                                      /* ndims */                  \
    NULL,                                      /* shapes */                 \
    NULL,                                      /* formats: all E4M3 */      \
    NULL,                                      /* directions: all rowwise */ \
    NULL,                                      /* scales_layouts: compact */ \
    MXFP8_SCALE_FIXUP_NONE,                    /* scale_fixup */            \
    0u,                                        /* reserved2 */              \
    NULL,                                      /* shards: whole tensors */ \
    NULL,                                      /* nvfp4_entries: none */    \
    NULL,                                      /* global_scales: none */    \
    0,                                         /* global_scale: decode */   \
    0u,                                        /* reserved3 */              \
    NULL,                                      /* scales_ndims: unchecked */ \
    NULL                                       /* scales_shapes */          \
  }

/* One tensor's destination: the engine's own parameter buffers, which the import writes in place (their
 * addresses stay the engine's, so its CUDA graphs stay valid).
 *
 *   values: uint8 or the float8 of the tensor's format, contiguous, exactly prod(shape) elements (any
 *           shape), row-major bytes of the tensor.
 *   scales: uint8 or float8_e8m0fnu, contiguous, exactly the byte count `scales_layout` gives (any
 *           shape: (R, C), flat, ...); for MXFP8_LAYOUT_DEEPGEMM_PACKED also int32 (a quarter as many
 *           elements) or DeepGEMM's own strided int32 (R, ceil(C/4)) tensor. Every byte is written,
 *           padding included, except for the strided form what lies past the extent it describes (see
 *           mxfp8_convert). A layout that permutes value rows (TRT-LLM) cannot be a destination (the
 *           values here stay in row order): refused with MXFP8_ERROR_INVALID_ARGUMENT; write it with
 *           mxfp8_convert.
 * All destinations of a call live on the source's device and share no byte with the source or with each
 * other.
 *
 * This struct is an array element, so it has no struct_size and keeps this layout for good (an array of
 * it is indexed with the caller's sizeof). What a destination may need later (an engine's own layout
 * parameters, a shard) will come as parallel arrays in a size-prefixed struct, as mxfp8_bucket_manifest
 * grows. */
typedef struct mxfp8_import_destination {
  DLTensor *values;
  DLTensor *scales;
  int32_t scales_layout; /* mxfp8_layout the engine wants */
  uint32_t reserved;     /* must be 0 */
} mxfp8_import_destination;

/* Writes every tensor of `bucket` (contiguous uint8, host or CUDA memory) into destinations[i],
 * i < manifest->count: the values copied, the scales moved from the layout the manifest records into the
 * layout the destination asks for (a copy when they are the same, with padding written as zero;
 * otherwise the transform between the two, in the same pass; manifest->scale_fixup rewrites exponent
 * bytes 0 as it says). Everything (manifest, every part inside the bucket and of the size its shape and
 * layout give, every destination's dtype, size, device and overlap) is checked before anything is
 * written. CUDA: one kernel launch for the whole bucket (a few
 * past several hundred parts) queued on `stream`, values of 4 MiB or more through cudaMemcpyAsync on the
 * same stream as for mxfp8_export_bucket; the call does not wait. Host: done when the call
 * returns. count == 0 is a no-op. The bucket is only read. */
MXFP8_API mxfp8_status mxfp8_import_bucket(const DLTensor *bucket, const mxfp8_bucket_manifest *manifest,
                                           const mxfp8_import_destination *destinations, void *stream);

/* Checks `manifest` against `bucket` as mxfp8_import_bucket checks them before it looks at a
 * destination (experimental, as this section), so that a receiver that reads the bytes itself (a
 * binding's unpack) reads only parts the library accepted: the manifest's version and reserved fields;
 * each entry's rank, shape, format, direction and layout; each part (values, scales, an NVFP4 entry's
 * amax) of exactly the bytes its shape, format, direction and layout give, and inside the bucket (offset
 * + bytes never wraps); no byte of the bucket in two parts (of two entries, or of one); an NVFP4 entry's
 * amax_offset a multiple of 4, amax_bytes 4 or (rowwise) 4 * rows, e4m3_max 448 or 256, reserved 0; each
 * shard (manifest.shards) legal for its entry; each scales shape (manifest.scales_shapes) naming the
 * entry's S. What only a destination needs (manifest.global_scales) is not read: it may be NULL.
 * `bucket`: contiguous bytes on any device; only its address and size are read, never its bytes.
 * count == 0 is MXFP8_OK (bucket may then be NULL). A refusal is MXFP8_ERROR_INVALID_ARGUMENT (or
 * MXFP8_ERROR_UNSUPPORTED: a shard of an NVFP4 entry) with mxfp8_last_error() naming the field, the
 * status and message mxfp8_import_bucket gives for the same manifest. Keeps nothing. */
MXFP8_API mxfp8_status mxfp8_bucket_manifest_check(const DLTensor *bucket, const mxfp8_bucket_manifest *manifest);

/* The direct path, with no bucket: writes direction `options->direction` of tensors[i] (e.g. a trainer's
 * Transformer Engine storage that the receiver mapped over CUDA IPC and described with
 * mxfp8_tensor_create) into destinations[i], values copied and scales moved from the tensor's layout
 * (padded row-major or swizzled) into the destination's, all in one pass: one launch on
 * `options->stream` for CUDA memory. The other option fields do not apply (NULL options: rowwise, legacy
 * default stream). Same checks as mxfp8_import_bucket, and destinations must not overlap any buffer of
 * the tensors. count == 0 is a no-op. */
MXFP8_API mxfp8_status mxfp8_import_tensors(const mxfp8_tensor *const *tensors, size_t count,
                                            const mxfp8_export_options *options,
                                            const mxfp8_import_destination *destinations);

/* Prepared forms (see "Prepared exports"): every check done once, the work kept; run each step with
 * mxfp8_prepared_export_run(prepared, stream) (one launch, no check, allocation or synchronization, so
 * capturable in a CUDA graph), release with mxfp8_prepared_export_release. The bucket's and every
 * destination's addresses stay yours: keep them allocated and in place while you run the plan. The
 * manifest is not kept. A tensor-import plan holds a reference on every tensor. options->stream is not
 * used. *out on success only. */
MXFP8_API mxfp8_status mxfp8_prepare_import_bucket(const DLTensor *bucket, const mxfp8_bucket_manifest *manifest,
                                                   const mxfp8_import_destination *destinations,
                                                   mxfp8_prepared_export **out);
MXFP8_API mxfp8_status mxfp8_prepare_import_tensors(const mxfp8_tensor *const *tensors, size_t count,
                                                    const mxfp8_export_options *options,
                                                    const mxfp8_import_destination *destinations,
                                                    mxfp8_prepared_export **out);

/* ====================================================================================================
 * Grouped MoE experts: E experts in one flat values buffer and one flat scale buffer   [EXPERIMENTAL]
 * ==================================================================================================== */

/* How the experts' scales sit in the flat scale buffer. */
typedef enum mxfp8_grouped_scales {
  /* Each expert's scale matrix takes Transformer Engine's per-tensor allocation,
   * roundup(rows_e, 128) x roundup(ceil(K/32), 4), row-major or GEMM-swizzled as `scale_layout` says. */
  MXFP8_GROUPED_SCALES_PADDED = 0,
  /* Each expert's rows_e x ceil(K/32) scales, row-major with no padding (row-major layout only). */
  MXFP8_GROUPED_SCALES_COMPACT = 1
} mxfp8_grouped_scales;

/* E experts (rowwise data) of shapes (rows_e, K), stored back to back: expert e's values start at row
 * sum(rows_0..rows_{e-1}) of `data`. Start from MXFP8_GROUPED_DESC_INIT. */
typedef struct mxfp8_grouped_desc {
  uint32_t struct_size;        /* sizeof(mxfp8_grouped_desc) */
  int32_t format;              /* mxfp8_format */
  int32_t scale_layout;        /* mxfp8_scale_layout of every expert's scales */
  int32_t scales;              /* mxfp8_grouped_scales */
  int32_t num_experts;         /* E >= 1 */
  uint32_t reserved;           /* must be 0 */
  int64_t cols;                /* K, shared by all experts */
  int64_t uniform_rows;        /* rows of every expert, when expert_rows is NULL */
  const int64_t *expert_rows;  /* E row counts (may differ, may be 0), copied; or NULL */
  /* E offsets, in bytes, of each expert's scales inside scale_inv (copied); NULL: back to back in
   * expert order, each taking the size `scales` says. */
  const int64_t *scale_offsets;
  /* Values: uint8 or the float8 of `format`, contiguous, sum(rows_e) * K elements (any shape, e.g.
   * (sum rows, K) or (E, N, K)). Scales: uint8 or e8m0, contiguous, large enough for every expert.
   * Same ownership rules as mxfp8_tensor_desc: taken on success, deleters run once at the end. */
  DLManagedTensorVersioned *data;
  DLManagedTensorVersioned *scale_inv;
} mxfp8_grouped_desc;

#define MXFP8_GROUPED_DESC_INIT                                               \
  {                                                                           \
    (uint32_t) sizeof(mxfp8_grouped_desc),  /* struct_size */                 \
    MXFP8_FORMAT_E4M3,                      /* format */                      \
    MXFP8_SCALE_LAYOUT_ROW_MAJOR,           /* scale_layout */                \
    MXFP8_GROUPED_SCALES_PADDED,            /* scales */                      \
    0,                                      /* num_experts: must be set */    \
    0u,                                     /* reserved */                    \
    0,                                      /* cols */                        \
    0,                                      /* uniform_rows */                \
    NULL,                                   /* expert_rows */                 \
    NULL,                                   /* scale_offsets: back to back */ \
    NULL,                                   /* data */                        \
    NULL                                    /* scale_inv */                   \
  }

/* An immutable, reference-counted handle on validated grouped experts. Thread-safe like mxfp8_tensor. */
typedef struct mxfp8_grouped_tensor mxfp8_grouped_tensor;

/* Validates `desc` (every expert's region inside both buffers) and wraps it in a handle. */
MXFP8_API mxfp8_status mxfp8_grouped_tensor_create(const mxfp8_grouped_desc *desc, mxfp8_grouped_tensor **out);

/* Drops the caller's reference; expert handles and views hold their own. NULL is fine. Cannot fail. */
MXFP8_API void mxfp8_grouped_tensor_release(mxfp8_grouped_tensor *grouped);

/* A new mxfp8_tensor for expert `expert` (0 <= expert < E), viewing the flat buffers: export it with
 * mxfp8_export_components, or many at once into one buffer with mxfp8_export_scales_batched (one launch
 * for all experts). Release it with mxfp8_tensor_release. */
MXFP8_API mxfp8_status mxfp8_grouped_expert(const mxfp8_grouped_tensor *grouped, int32_t expert,
                                            mxfp8_tensor **out);

/* The experts stacked, the shape vLLM's MoE layers load: values [E, N, K] (a view) and scales
 * [E, N, ceil(K/32)] (a view when the scales are compact and back to back, else one copy made by one
 * launch for all experts). Needs experts of one row count N. Options as mxfp8_export_components
 * (rowwise; per-32 granularity). */
MXFP8_API mxfp8_status mxfp8_grouped_export_stacked(const mxfp8_grouped_tensor *grouped,
                                                    const mxfp8_export_options *options,
                                                    DLManagedTensorVersioned **values,
                                                    DLManagedTensorVersioned **scales);

/* ====================================================================================================
 * Engine-native targets: a tensor or grouped experts converted into an engine's layout  [EXPERIMENTAL]
 * ==================================================================================================== */

/* An engine loads MXFP8 weights in its kernels' own layout (mxfp8_layout; docs/api.md says which
 * engine parameter takes which). These calls write it once, checked, from the scales as the producer
 * stores them (compact, padded or 128x4 swizzled, as described by mxfp8_tensor_create or
 * mxfp8_grouped_tensor_create), into caller buffers: no per-expert pass in the engine.
 * Options: start from MXFP8_CONVERT_OPTIONS_INIT; NULL means its defaults. */
typedef struct mxfp8_convert_options {
  uint32_t struct_size; /* sizeof(mxfp8_convert_options) */
  int32_t target;       /* mxfp8_layout the scales are written in, default MXFP8_LAYOUT_COMPACT */
  int32_t direction;    /* mxfp8_direction read from an mxfp8_tensor, default rowwise (grouped: rowwise only) */
  int32_t scale_fixup;  /* mxfp8_scale_fixup, default none */
  void *stream;         /* cudaStream_t the work is queued on (NULL: the legacy default); unused for host memory */
} mxfp8_convert_options;

#define MXFP8_CONVERT_OPTIONS_INIT                                                     \
  {                                                                                    \
    (uint32_t) sizeof(mxfp8_convert_options),  /* struct_size */                       \
    MXFP8_LAYOUT_COMPACT,                      /* target */                            \
    MXFP8_DIRECTION_ROWWISE,                   /* direction */                         \
    MXFP8_SCALE_FIXUP_NONE,                    /* scale_fixup */                       \
    NULL                                       /* stream: the legacy default stream */ \
  }

/* Writes direction options->direction of `tensor` in layout options->target:
 *
 *   scales: uint8, float8_e8m0fnu or (for MXFP8_LAYOUT_DEEPGEMM_PACKED) int32, contiguous, exactly the
 *           bytes the target gives for the tensor's scale matrix (any shape), on the tensor's device;
 *           for MXFP8_LAYOUT_DEEPGEMM_PACKED also DeepGEMM's own strided int32 tensor (R, ceil(C/4)),
 *           strides (1, roundup(R, 4)), also [1, R, ceil(C/4)]. Every byte is written, padding included
 *           (as zero), except that the library never writes past the extent a tensor describes: the
 *           strided form's extent ends at int32 (ceil(C/4) - 1) * roundup(R, 4) + R, so when R % 4 != 0
 *           the last column's padding rows R .. roundup(R, 4) - 1 (the last 4 * (roundup(R, 4) - R)
 *           bytes of the layout) are left as they are. DeepGEMM reads only rows < R, and the storage
 *           get_mn_major_tma_aligned_packed_ue8m0_tensor allocates holds the whole layout.
 *   values: NULL, or uint8 / the float8 of the tensor's format, contiguous, prod(shape) elements: the
 *           values in the target's row order (a copy for every target but the TRT-LLM ones). Required
 *           by targets that permute value rows. The TRT-LLM targets lay the tensor out as one expert of
 *           M = prod(lead) rows; MXFP8_LAYOUT_TRTLLM_SHUFFLED_GATED refuses a tensor of more than 2
 *           dimensions (stacked experts: mxfp8_convert_grouped).
 *
 * Columnwise: compact and 128x4 as mxfp8_layout says (128x4 swizzles S^T, as cuBLAS reads columnwise
 * scales); the DeepGEMM and TRT-LLM layouts are rowwise only and refuse it. Everything (options,
 * dtypes, sizes, devices, no output sharing a byte with the tensor or with the other output) is checked
 * before anything is written. Host memory: done on return. CUDA: one launch on options->stream (plus a
 * cudaMemcpyAsync for values of 4 MiB or more, as mxfp8_export_bucket; the TRT-LLM targets' values
 * take a row-permuting launch of their own instead); the call does not wait. */
MXFP8_API mxfp8_status mxfp8_convert(const mxfp8_tensor *tensor, const mxfp8_convert_options *options,
                                     DLTensor *values, DLTensor *scales);

/* The same for E grouped experts of one row count N (rowwise): expert e's scales are written at byte
 * e * B of `scales`, B the bytes the target gives for (N, ceil(K/32)), so the buffer holds E * B bytes
 * (for MXFP8_LAYOUT_DEEPGEMM_PACKED: DeepGEMM's int32 [E, N, ceil(sf_k/4)], flat or with its strides
 * (ceil(sf_k/4) * roundup(N, 4), 1, roundup(N, 4)), where only the last expert's last padding rows lie
 * past the view's extent and are left alone, as for mxfp8_convert); values, when given, E * N * K elements, stacked
 * [E, N, K] in the target's row order (the TRT-LLM targets permute each expert's rows: vLLM's
 * w13_weight / w2_weight). All experts in one launch (a second past about 300 experts; the TRT-LLM
 * targets' values one more, for all experts). Same checks and stream rules as mxfp8_convert. */
MXFP8_API mxfp8_status mxfp8_convert_grouped(const mxfp8_grouped_tensor *grouped,
                                             const mxfp8_convert_options *options, DLTensor *values,
                                             DLTensor *scales);

/* The bytes the scales of an R x C scale matrix S take in `layout` (`direction` says whether S is
 * rowwise, or columnwise as 128x4 swizzles its transpose), in *bytes: what an engine allocates before
 * a convert or an import. Fails with MXFP8_ERROR_INVALID_ARGUMENT for an unknown layout, a layout that
 * does not take this direction (the DeepGEMM and TRT-LLM layouts are rowwise only), negative rows or
 * cols, and for the TRT-LLM layouts rows not a multiple of 128 (FlashInfer's requirement). */
MXFP8_API mxfp8_status mxfp8_layout_bytes(int32_t layout, int32_t direction, int64_t rows, int64_t cols,
                                          int64_t *bytes);

/* ====================================================================================================
 * Low level: one scale matrix between caller-owned buffers                             [STABLE]
 * ==================================================================================================== */

/* Undoes the GEMM swizzle of one scale matrix.
 *
 *   swizzled: contiguous, uint8, e8m0 or float8_e4m3fn, exactly roundup(R, 128) * roundup(C, 4) bytes
 *             (any shape).
 *   compact:  the R x C destination, uint8, e8m0 or float8_e4m3fn, same device; its shape gives R and C
 *             (leading dims flattened into rows). Any non-negative strides that give every element a
 *             byte of its own: strides (1, R) on this (R, C) shape write the transpose into a (C, R)
 *             row-major buffer, which is how columnwise scales come out. Strides under which two
 *             elements would share a byte (e.g. (0, 1)) are refused.
 *
 * The move is byte for byte, so it serves any one-byte scale: MXFP8's E8M0 and NVFP4's E4M3 block scales
 * (R x ceil(C/16), see the NVFP4 section) alike; float8_e4m3fn is accepted for the latter.
 * CUDA buffers: the kernel is queued on `stream` (NULL: legacy default); the call does not wait.
 * Host buffers: done when the call returns. `swizzled` is never written. */
MXFP8_API mxfp8_status mxfp8_unswizzle_scales(const DLTensor *swizzled, DLTensor *compact,
                                              void *stream);

/* The inverse, for the import side (a consumer that feeds cuBLAS): reads the R x C matrix `compact`
 * (same stride rules) and writes all roundup(R, 128) * roundup(C, 4) bytes of `swizzled`, padding
 * included, which is set to zero as cuBLAS expects. Same stream rules. `compact` is never written. */
MXFP8_API mxfp8_status mxfp8_swizzle_scales(const DLTensor *compact, DLTensor *swizzled,
                                            void *stream);

/* ====================================================================================================
 * Quantizing BF16 / FP16 / FP32 to MXFP8, bit-exact with Transformer Engine            [STABLE]
 * ==================================================================================================== */

/* How a block's E8M0 scale is chosen from its amax (the largest |x| of the block; every NaN element,
 * signaling ones too, is skipped, as the GPU's max.f32 skips them, except under COMPRESSED_TENSORS). max_norm is 448 (E4M3) or 57344 (E5M2); emax is 8 (E4M3) or 15 (E5M2).
 *
 * Then every element becomes fp8(x * r(e)): the float product, rounded to nearest-even into the FP8
 * format and saturated to +-max_norm (Inf too); NaN becomes 0x7F. Values of zero keep their sign.
 * Subnormal inputs count like any other value (nothing is flushed to zero, on the host or the GPU).
 * Partial blocks (K or M not a multiple of 32) use only their real elements; nothing is padded in. */
typedef enum mxfp8_scale_rounding {
  /* Transformer Engine's rule (its float_to_e8m0 and exp2f_rcp; Blackwell's ue8m0 conversion rounds the
   * same way):
   *   e = the E8M0 exponent of (amax * float(1 / max_norm)) rounded up (an exact power of two is kept);
   *       e = 0 for an all-zero block and for amax * (1/max_norm) <= 2^-127; e = 254 for Inf.
   *   r(e) = 2^(127 - e) as a float bit pattern, except r(0) = 1 and r(254) = 0.
   * So a block holding an Inf comes out as zeros (and NaN where the Inf was) with scale 2^127, exactly
   * as TE writes it. The default. */
  MXFP8_SCALE_ROUNDING_RCEIL = 0,
  /* The OCP MX v1.0 rule: e = clamp(floor(log2(amax)) - emax + 127, 0, 254) (254 for Inf), and
   * r(e) = 2^(127 - e) exactly (2^-127 is a subnormal float). The largest elements may exceed max_norm
   * and saturate; that is the rule's known cost. */
  MXFP8_SCALE_ROUNDING_FLOOR = 1,
  /* compressed-tensors' MX rule (llm-compressor's MXFP8 checkpoints), bit for bit. It is not the
   * rule of the engines' online quantizers: vLLM's, SGLang's, ModelOpt's and FlashInfer's round as
   * RCEIL does; this one differs where a block maximum's mantissa is >= 1.75. As its
   * generate_mx_scales and round_to_quantized_type_dtype(uint8) compute it:
   *   p = amax rounded to a power of two: down, or up when amax's mantissa is >= 1.75 (its
   *       round_to_power_2); amax >= 1.75 * 2^127 rounds to Inf;
   *   e = clamp(log2(p) - emax + 127, 0, 255): 0 for p = 0 (an all-zero block, subnormal amaxes),
   *       255 for p = Inf. A NaN element makes its block's amax NaN (torch.amax propagates it), which
   *       counts as Inf, as torch's own NaN (0x7FC00000) does in round_to_power_2's bit arithmetic.
   *   r(e) = 2^(127 - e) exactly, and r(255) = 0 (it divides by 2^(e - 127), +Inf for 255).
   * So no element ever saturates, and a block with an Inf, a NaN or an amax >= 1.75 * 2^127 gets the
   * scale byte 255 (E8M0's NaN) and comes out as zeros of its elements' signs, NaN where the Inf and
   * NaN were. emax is 8 for E4M3; compressed-tensors has no E5M2 MX format, for which this library uses
   * emax 15 (57344 = 1.75 * 2^15 too). The amax is taken on the input's exact values, which is
   * compressed-tensors in the input's dtype for bfloat16 (vLLM's path) and float32, and in float32 for
   * a float16 input. NaN elements are written 0x7F, as under the other rules (torch's cast keeps a
   * NaN's sign bit, so compressed-tensors may write 0xFF there; both decode to NaN). */
  MXFP8_SCALE_ROUNDING_COMPRESSED_TENSORS = 2
} mxfp8_scale_rounding;

/* The layout a quantize writes the scales in. Padding bytes are written as zero. */
typedef enum mxfp8_quantized_scales {
  /* Compact row-major: rowwise (*lead, ceil(K/32)), columnwise (ceil(M/32), K); with 32x32 blocks, one
   * scale per block, (ceil(M/32), ceil(K/32)), for either direction. What mxfp8_export_components
   * returns, so the outputs can be handed to a consumer as they are. */
  MXFP8_QUANTIZED_SCALES_COMPACT = 0,
  /* Transformer Engine's padded row-major buffer: rowwise (roundup(M, 128), roundup(ceil(K/32), 4)),
   * columnwise (roundup(ceil(M/32), 4), roundup(K, 128)). With 32x32 blocks the 1x32 scales are stored,
   * each block's scale repeated over its 32 rows (rowwise) or columns (columnwise), as TE stores them. */
  MXFP8_QUANTIZED_SCALES_PADDED = 1,
  /* The same buffer in the cuBLAS 128x4 GEMM layout (MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED). */
  MXFP8_QUANTIZED_SCALES_SWIZZLED = 2
} mxfp8_quantized_scales;

/* Options of mxfp8_quantize and mxfp8_quantize_into. Start from MXFP8_QUANTIZE_OPTIONS_INIT; NULL
 * options mean its defaults. */
typedef struct mxfp8_quantize_options {
  uint32_t struct_size;   /* sizeof(mxfp8_quantize_options) */
  int32_t format;         /* mxfp8_format, default E4M3 */
  int32_t block;          /* mxfp8_block, default 1x32 */
  int32_t scale_rounding; /* mxfp8_scale_rounding, default RCEIL */
  int32_t scales_layout;  /* mxfp8_quantized_scales, default compact */
  int32_t values_dtype;   /* mxfp8_values_dtype of the values mxfp8_quantize allocates, default fp8 */
  int32_t scales_dtype;   /* mxfp8_scales_dtype of the scales mxfp8_quantize allocates, default uint8 */
  uint32_t reserved;      /* must be 0 */
  /* cudaStream_t the kernel runs on (NULL: the legacy default stream); ignored for host memory. The
   * call returns once the work is queued. */
  void *stream;
  /* Allocates mxfp8_quantize's outputs; the same contract as mxfp8_export_options.allocator. NULL: the
   * library allocates, as it does for export copies (and the same stream rules apply to the deleters). */
  int (*allocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                   void (*set_error)(void *error_ctx, const char *kind, const char *message));
} mxfp8_quantize_options;

#define MXFP8_QUANTIZE_OPTIONS_INIT                                                     \
  {                                                                                     \
    (uint32_t) sizeof(mxfp8_quantize_options),  /* struct_size */                       \
    MXFP8_FORMAT_E4M3,                          /* format */                            \
    MXFP8_BLOCK_1X32,                           /* block */                             \
    MXFP8_SCALE_ROUNDING_RCEIL,                 /* scale_rounding */                    \
    MXFP8_QUANTIZED_SCALES_COMPACT,             /* scales_layout */                     \
    MXFP8_VALUES_FP8,                           /* values_dtype */                      \
    MXFP8_SCALES_UINT8,                         /* scales_dtype */                      \
    0u,                                         /* reserved */                          \
    NULL,                                       /* stream: the legacy default stream */ \
    NULL                                        /* allocator: the library allocates */  \
  }

/* Quantizes `input` (bfloat16, float16 or float32; row-major contiguous; data + byte_offset aligned to
 * the element size; ndim >= 1, logical shape (*lead, K) read as M = prod(lead) rows of K) into new
 * buffers on the input's device (host buffers the library allocates itself are malloc memory, labelled
 * kDLCPU even for a kDLCUDAHost input):
 *
 *   *rowwise_data / *columnwise_data:         the FP8 values, the input's shape (columnwise data is not
 *                                             transposed, as TE stores it);
 *   *rowwise_scale_inv / *columnwise_scale_inv: the E8M0 scales in options->scales_layout.
 *
 * Pass the pointers of the directions you want (a direction's two pointers together, at least one
 * direction); NULL pointers skip a direction. With 32x32 blocks both directions share every block's
 * scale, so their values are identical. The outputs are written only on success; each is released by
 * calling its deleter. They have the field names of mxfp8_tensor_desc on purpose: put them there (with
 * scale_layout GEMM-swizzled for MXFP8_QUANTIZED_SCALES_SWIZZLED, and block) to get an mxfp8_tensor.
 * Host memory: done when the call returns (large inputs on several threads; see the conventions at the
 * top). CUDA: queued on options->stream (a memset of padded scale buffers, then one kernel, or one per
 * direction for 1x32 blocks of aligned weights); the call does not wait. The input must stay unchanged
 * until that work has run. */
MXFP8_API mxfp8_status mxfp8_quantize(const DLTensor *input, const mxfp8_quantize_options *options,
                                      DLManagedTensorVersioned **rowwise_data,
                                      DLManagedTensorVersioned **rowwise_scale_inv,
                                      DLManagedTensorVersioned **columnwise_data,
                                      DLManagedTensorVersioned **columnwise_scale_inv);

/* The same into caller-owned buffers on the input's device. Values: uint8 or the float8 of `format`,
 * contiguous, prod(shape) elements (any shape). Scales: uint8 or float8_e8m0fnu, contiguous, exactly the
 * element count of options->scales_layout's shape (any shape). None may overlap the input or another.
 * values_dtype, scales_dtype and allocator are not used. Everything is checked before anything is
 * written. */
MXFP8_API mxfp8_status mxfp8_quantize_into(const DLTensor *input, const mxfp8_quantize_options *options,
                                           DLTensor *rowwise_data, DLTensor *rowwise_scale_inv,
                                           DLTensor *columnwise_data, DLTensor *columnwise_scale_inv);

/* Options of mxfp8_dequantize. Start from MXFP8_DEQUANTIZE_OPTIONS_INIT; NULL means its defaults. */
typedef struct mxfp8_dequantize_options {
  uint32_t struct_size; /* sizeof(mxfp8_dequantize_options) */
  int32_t direction;    /* mxfp8_direction, default rowwise */
  void *stream;         /* cudaStream_t, as for the other calls */
} mxfp8_dequantize_options;

#define MXFP8_DEQUANTIZE_OPTIONS_INIT                                                     \
  {                                                                                       \
    (uint32_t) sizeof(mxfp8_dequantize_options),  /* struct_size */                       \
    MXFP8_DIRECTION_ROWWISE,                      /* direction */                         \
    NULL                                          /* stream: the legacy default stream */ \
  }

/* Decodes one direction of `tensor` (any scale layout the descriptor allows) into `output`: float32 or
 * bfloat16, contiguous, prod(shape) elements, data + byte_offset aligned to the element size, on the
 * tensor's device, sharing no byte with the tensor's buffers. Each element is
 * fp8_value * 2^(e - 127) computed in float (e = 255 gives NaN), then rounded to nearest-even for
 * bfloat16. Every NaN is written as 0x7FFFFFFF (float32) or 0x7FFF (bfloat16), on the host as on the GPU.
 * For verification, and for consumers that cannot take MXFP8. Host: done on return. CUDA: queued on
 * options->stream, with a stream-ordered scratch copy of the compact scales from the library's pool;
 * the call does not wait. */
MXFP8_API mxfp8_status mxfp8_dequantize(const mxfp8_tensor *tensor, const mxfp8_dequantize_options *options,
                                        DLTensor *output);

/* ====================================================================================================
 * Resharding: the shard one inference rank needs, straight from the trainer's storage  [EXPERIMENTAL]
 * ==================================================================================================== */

/* A trainer and its inference engine rarely share a parallel layout: the trainer may hold a whole weight
 * while each engine rank needs a tensor-parallel shard of it. A shard is a range of rows (of
 * M = prod(lead): a shard of N for column-parallel weights) and a range of columns (of K: row-parallel
 * weights), or several row ranges concatenated (the Q, K and V rows of one rank of a fused QKV weight,
 * the gate and up rows of a fused gate-up weight). Its scales are read where they are stored (row-major,
 * padded, or swizzled, where a shard's rows and blocks are scattered through 128x4 tiles); the whole
 * tensor's compact scales are never made.
 *
 * Legal boundaries follow the direction's scale blocks, so that every block of the shard is a whole block
 * of the tensor (or its last, partial one):
 *   rowwise (blocks of 32 along K):     col_begin a multiple of 32; col_end a multiple of 32 or K.
 *                                       Rows: any.
 *   columnwise (blocks of 32 along M):  every row boundary (row_begin, row_end, each piece's) a multiple
 *                                       of 32 or M, and every piece but the last ends at a multiple of 32
 *                                       (so the pieces' blocks line up when concatenated). Columns: any.
 * Every range must lie inside the tensor and hold at least one row / column; only the default whole
 * range of a dimension that is itself 0 may be empty. Anything else is MXFP8_ERROR_INVALID_ARGUMENT
 * naming the field and the rule.
 *
 * The shard is a 2-D matrix (rows, cols), rows = the sum of its row ranges, cols = col_end - col_begin:
 * its values are (rows, cols) and its compact scales (rows, ceil(cols/32)) rowwise or
 * (ceil(rows/32), cols) columnwise, exactly the crop of what mxfp8_export_components returns. */

/* In row_end / col_end: the end of the dimension (M or K). */
#define MXFP8_SHARD_END (-1)

/* One shard of one tensor. Start from MXFP8_SHARD_INIT (the whole tensor) and set the ranges you need.
 * Fields added later are appended, 0 / NULL meaning what a shard without them meant. */
typedef struct mxfp8_shard {
  uint32_t struct_size; /* sizeof(mxfp8_shard) */
  uint32_t reserved;    /* must be 0 */
  int64_t row_begin;    /* rows [row_begin, row_end) of M = prod(lead) */
  int64_t row_end;      /* or MXFP8_SHARD_END */
  int64_t col_begin;    /* columns [col_begin, col_end) of K */
  int64_t col_end;      /* or MXFP8_SHARD_END */
  /* Several row ranges instead of one, concatenated in this order: piece p is rows
   * [row_pieces[2p], row_pieces[2p + 1]) (no MXFP8_SHARD_END here), in any order (they may even repeat
   * rows: a replicated KV head). With pieces, row_begin and row_end must keep their defaults
   * (0, MXFP8_SHARD_END). NULL / 0: the one range row_begin..row_end. Read during the call only. */
  size_t num_row_pieces;
  const int64_t *row_pieces;
} mxfp8_shard;

#define MXFP8_SHARD_INIT                                          \
  {                                                               \
    (uint32_t) sizeof(mxfp8_shard),  /* struct_size */            \
    0u,                              /* reserved */               \
    0,                               /* row_begin */              \
    MXFP8_SHARD_END,                 /* row_end: M */             \
    0,                               /* col_begin */              \
    MXFP8_SHARD_END,                 /* col_end: K */             \
    0,                               /* num_row_pieces */         \
    NULL                             /* row_pieces: one range */  \
  }

/* Exports one shard of direction `options->direction` of `tensor`, as mxfp8_export_components exports
 * the whole:
 *
 *   values: (rows, cols). A zero-copy view for one row range, whatever the columns: a strided view with
 *           the tensor's row stride K (contiguous when the shard spans all of K); it shares memory
 *           with the source like mxfp8_export_components' values. Several row pieces: a copy.
 *   scales: the shard's compact scales, (rows, ceil(cols/32)) rowwise, (ceil(rows/32), cols) columnwise.
 *           A view when the tensor's scales are row-major and the shard's lie as one range whose rows are
 *           contiguous (or with MXFP8_PADDED_SCALES_STRIDED_VIEW, any one range: a view with the stored
 *           row stride); otherwise a copy, read straight from the stored (padded or swizzled) scales, of
 *           only the shard's scales: one kernel launch on options->stream for CUDA memory.
 *
 * options as for mxfp8_export_components (NULL: its defaults); options->scales_granularity must be
 * MXFP8_SCALES_PER_32 and options->scale_fixup MXFP8_SCALE_FIXUP_NONE, as there. `shard` is read during the call only; NULL is an error (MXFP8_SHARD_INIT is the
 * whole tensor). Same ownership, stream, output and failure rules as mxfp8_export_components. */
MXFP8_API mxfp8_status mxfp8_export_shard(const mxfp8_tensor *tensor, const mxfp8_shard *shard,
                                          const mxfp8_export_options *options,
                                          DLManagedTensorVersioned **values,
                                          DLManagedTensorVersioned **scales);

/* Buckets of shards: mxfp8_bucket_plan / mxfp8_export_bucket / mxfp8_prepare_bucket where entry i holds
 * shards[i] of tensors[i] (its values row-major (rows, cols), then its compact scales), so that a trainer
 * sends each rank only its part. `shards` has `count` pointers (read during the call only); NULL, or a
 * NULL entry, is the whole tensor. The same checks and errors as the whole-tensor calls, plus each
 * shard's (named shards[i]); the entries must come from mxfp8_bucket_plan_shards with the same tensors,
 * shards and options. The receiver describes entry i with the shard's shape (rows, cols) in its
 * manifest. options->scale_fixup applies to the whole tensors only: with a shard set it is
 * MXFP8_ERROR_UNSUPPORTED. CUDA: one launch for the whole bucket (values of whole-row shards of 4 MiB or more through
 * cudaMemcpyAsync, as for mxfp8_export_bucket). */
MXFP8_API mxfp8_status mxfp8_bucket_plan_shards(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards,
                                                size_t count, const mxfp8_export_options *options, uint64_t alignment,
                                                mxfp8_bucket_entry *entries, uint64_t *total_bytes);
MXFP8_API mxfp8_status mxfp8_export_bucket_shards(const mxfp8_tensor *const *tensors,
                                                  const mxfp8_shard *const *shards, size_t count,
                                                  const mxfp8_export_options *options,
                                                  const mxfp8_bucket_entry *entries, DLTensor *bucket);
MXFP8_API mxfp8_status mxfp8_prepare_bucket_shards(const mxfp8_tensor *const *tensors,
                                                   const mxfp8_shard *const *shards, size_t count,
                                                   const mxfp8_export_options *options,
                                                   const mxfp8_bucket_entry *entries, DLTensor *bucket,
                                                   mxfp8_prepared_export **out);

/* The receiving side of a bucket needs no call of its own: mxfp8_bucket_manifest.shards names, per tensor of a
 * bucket of whole tensors, the shard mxfp8_import_bucket (and mxfp8_prepare_import_bucket) writes into
 * destinations[i] (values (rows, cols), scales of the shard's (rows, cols) in the destination's layout),
 * so every rank maps one bucket and takes its own part. A shard of a bucket part in
 * MXFP8_LAYOUT_CUTLASS_128X4 may only go to a compact destination; into an MXFP8_LAYOUT_CUTLASS_128X4
 * destination a shard of several row pieces needs rowwise scales and pieces of multiples of 128 rows
 * (but the last), so that each piece fills whole tiles; anything else is MXFP8_ERROR_UNSUPPORTED. A shard
 * is written with its scale bytes as stored, into MXFP8_LAYOUT_COMPACT or MXFP8_LAYOUT_CUTLASS_128X4
 * destinations, from parts in those layouts: the engine-native layouts (as the part's layout or the
 * destination's) and manifest.scale_fixup MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE are
 * MXFP8_ERROR_UNSUPPORTED for a tensor with a shard. */

/* The direct path with shards: mxfp8_import_tensors / mxfp8_prepare_import_tensors where destinations[i]
 * receives shards[i] of tensors[i] (NULL, or a NULL entry: the whole tensor), read straight from the
 * trainer's storage (e.g. mapped over CUDA IPC) in one launch. Into a compact destination any legal
 * shard; into an MXFP8_LAYOUT_CUTLASS_128X4 destination the same rules as above, so a shard of swizzled
 * storage (TE's optimize_for_gemm) goes to compact destinations only (MXFP8_ERROR_UNSUPPORTED otherwise),
 * and, as above, no shard goes to an engine-native layout nor with options->scale_fixup set.
 * Same checks and errors as mxfp8_import_tensors, plus each shard's (named shards[i]). */
MXFP8_API mxfp8_status mxfp8_import_tensor_shards(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards,
                                                  size_t count, const mxfp8_export_options *options,
                                                  const mxfp8_import_destination *destinations);
MXFP8_API mxfp8_status mxfp8_prepare_import_tensor_shards(const mxfp8_tensor *const *tensors,
                                                          const mxfp8_shard *const *shards, size_t count,
                                                          const mxfp8_export_options *options,
                                                          const mxfp8_import_destination *destinations,
                                                          mxfp8_prepared_export **out);

/* Expert parallelism: the experts one rank serves, from a grouped tensor (see "Grouped MoE experts"), in
 * the order given (experts[i] in 0..E-1; an expert may appear more than once), stacked as
 * mxfp8_grouped_export_stacked stacks all of them: values [count, N, K] and compact scales
 * [count, N, ceil(K/32)]. The chosen experts must share one row count N. Each output is a view when
 * the chosen experts lie back to back in the flat buffers in the order given (experts[i] ==
 * experts[0] + i; scales only when packed MXFP8_GROUPED_SCALES_COMPACT), otherwise a copy; the copies
 * of both outputs are made by one launch on options->stream (values of 4 MiB or more per expert through
 * cudaMemcpyAsync). Options, ownership and failures as mxfp8_grouped_export_stacked; count == 0 is an
 * error (there would be no N). `experts` is read during the call only. */
MXFP8_API mxfp8_status mxfp8_grouped_export_experts(const mxfp8_grouped_tensor *grouped, const int32_t *experts,
                                                    size_t count, const mxfp8_export_options *options,
                                                    DLManagedTensorVersioned **values,
                                                    DLManagedTensorVersioned **scales);

/* ====================================================================================================
 * NVFP4: describing, exporting, swizzling and dequantizing                             [EXPERIMENTAL]
 * ==================================================================================================== */

/* NVFP4 (Blackwell's 4-bit recipe), as Transformer Engine stores it (transformer_engine/pytorch/tensor/
 * nvfp4_tensor.py, custom_recipes/reference_nvfp4.py, common/cast/nvfp4/dequantize_nvfp4.cuh):
 *
 *   - values: FP4 E2M1 (sign, 2 exponent bits, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
 *     negatives; no Inf, no NaN), two per byte, the EVEN element in the LOW nibble (element 2i of a row
 *     is byte i & 0xF, element 2i+1 is byte i >> 4). This is also DLPack's packing of kDLFloat4_e2m1fn.
 *   - block scales: one FP8 E4M3 (float8_e4m3fn) per 16 consecutive values of a row (the last block of a
 *     row may be shorter). For a stored matrix of R rows and C columns the scale matrix S is
 *     R x ceil(C/16); TE allocates it padded to (roundup(R, 128), roundup(ceil(C/16), 4)), row-major or
 *     in the same cuBLAS 128x4 layout as MXFP8 (MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, S itself swizzled).
 *   - second level: TE keeps amax (float32; one per tensor, or one per row with its row_scaled_nvfp4
 *     option), and an element decodes as
 *
 *       x = e2m1(v) * ((e4m3(s) * amax) * float(1 / (6 * E4M3_MAX)))      computed in float, in this order
 *
 *     with E4M3_MAX = 448, or 256 with TE's "4over6" option (nvfp4_e4m3_max).
 *   - directions: rowwise data is the (M, K) matrix, M = prod(lead), scaled along K. Columnwise data is
 *     stored TRANSPOSED, the (K, M) matrix scaled along M, with scales padded to (roundup(K, 128),
 *     roundup(ceil(M/16), 4)); so either direction is one stored matrix (R, C) = (M, K) or (K, M), scaled
 *     along its rows, and everything below speaks of that stored matrix. C must be even (rows are whole
 *     bytes, as TE stores them); mxfp8_nvfp4_quantize_into refuses odd C, so all it writes can be
 *     described here. Per-row amax exists for rowwise data only (TE keeps one columnwise amax), and the
 *     quantize refuses it for columnwise.
 *
 * Consumers: vLLM's ModelOpt NVFP4 loads uint8 values [N, K/2], row-major E4M3 scales [N, K/16] and
 * weight_scale_2 = amax / (6 * 448) (MXFP8_NVFP4_GLOBAL_SCALE_DECODE); FlashInfer's nvfp4_quantize takes
 * the encode scale 6 * 448 / amax (MXFP8_NVFP4_GLOBAL_SCALE_ENCODE); compressed-tensors stores that
 * encode scale as its weight_global_scale. The cuBLAS layout of the block scales is the MXFP8 one on
 * bytes: mxfp8_swizzle_scales and mxfp8_unswizzle_scales move NVFP4 scale matrices R x ceil(C/16) as
 * they are (uint8 or float8_e4m3fn). */

/* The dtype of the exported values. Either way the bytes are the stored ones (even element low). */
typedef enum mxfp8_nvfp4_values_dtype {
  MXFP8_NVFP4_VALUES_UINT8 = 0,  /* packed bytes, (*lead, K/2) rowwise, (K, M/2) columnwise: what ModelOpt
                                  * checkpoints and vLLM load */
  MXFP8_NVFP4_VALUES_FLOAT4 = 1  /* kDLFloat4_e2m1fn (17), bits 4, lanes 1, packed as DLPack defines it:
                                  * (*lead, K) rowwise, (K, M) columnwise, strides in elements */
} mxfp8_nvfp4_values_dtype;

/* The dtype of the exported block scales: the E4M3 byte either way. */
typedef enum mxfp8_nvfp4_scales_dtype {
  MXFP8_NVFP4_SCALES_UINT8 = 0, /* uint8 */
  MXFP8_NVFP4_SCALES_E4M3 = 1   /* kDLFloat8_e4m3fn (10): what vLLM's weight_scale parameter holds */
} mxfp8_nvfp4_scales_dtype;

/* Which second-level scale an export returns (float32, one per amax). */
typedef enum mxfp8_nvfp4_global_scale {
  /* amax / (6 * E4M3_MAX), a float division: the factor that decodes, ModelOpt's and vLLM's
   * weight_scale_2. x = e2m1 * e4m3 * this, up to the rounding of the product. */
  MXFP8_NVFP4_GLOBAL_SCALE_DECODE = 0,
  /* (6 * E4M3_MAX) / amax, as Transformer Engine's quantizer computes it
   * (compute_global_encode_scaling_factor_FP4, common/cast/nvfp4/core_nvfp4.cuh): capped at FLT_MAX (also
   * for a NaN amax), and 1 when amax is zero or the quotient is zero (amax Inf). FlashInfer's
   * nvfp4_quantize global_scale; compressed-tensors' weight_global_scale. */
  MXFP8_NVFP4_GLOBAL_SCALE_ENCODE = 1
} mxfp8_nvfp4_global_scale;

/* Everything that says what an NVFP4 tensor is and where its bytes are. Start from
 * MXFP8_NVFP4_TENSOR_DESC_INIT.
 *
 * Per direction, three tensors, all on one device (kDLCPU, kDLCUDA, kDLCUDAHost or kDLCUDAManaged):
 *   *_data:      the stored matrix (R, C) (rowwise (M, K), columnwise (K, M)), row-major contiguous, as
 *                uint8 holding two values per byte, or kDLFloat4_e2m1fn with bits 4 and lanes 1 (not flagged
 *                DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED). Its shape must say rows of C/2 bytes (C
 *                float4 elements) one of two ways: leading dimensions whose product is R and a last
 *                dimension of one row (TE's rowwise (*lead, K/2)), or a first dimension R and the others'
 *                product one row (TE's columnwise (K, *lead) with its last dimension halved). C even.
 *   *_scale_inv: the E4M3 block scales, uint8 or kDLFloat8_e4m3fn, laid out as `scale_layout` says for
 *                the R x ceil(C/16) matrix S: row-major (R', C') with R' >= R, C' >= ceil(C/16), last
 *                dimension stride 1, leading dimensions flattening into rows (compact or TE's padded
 *                buffer), or GEMM-swizzled: contiguous, exactly roundup(R, 128) * roundup(ceil(C/16), 4)
 *                bytes. Padding is never read.
 *   *_amax:      float32, contiguous, one element (per tensor, any shape such as () or (1,)) or, rowwise
 *                only, M elements (TE's row_scaled_nvfp4: amax of row r).
 * A direction is given with all three or not at all; at least one direction is given.
 *
 * The logical shape (*lead, K): from `shape` when ndim > 0 (then each direction's data is checked against
 * it), else from rowwise data ((*lead, K) as the data's leading dimensions and K = 2 * last for uint8),
 * else from columnwise data as TE reads it back: (K, d1, ..., dn) gives (d1, ..., 2 * dn, K) for uint8.
 *
 * Ownership: as mxfp8_tensor_desc. On success every non-NULL managed tensor is taken and its deleter runs
 * exactly once, when the tensor and every view exported from it are released; a NULL deleter marks
 * borrowed memory. On failure nothing is taken. The same managed tensor in two fields is an error. */
typedef struct mxfp8_nvfp4_tensor_desc {
  uint32_t struct_size; /* sizeof(mxfp8_nvfp4_tensor_desc) */
  int32_t scale_layout; /* mxfp8_scale_layout of both directions' scales (TE's with_gemm_swizzled_scales) */
  int32_t e4m3_max;     /* 448, or 256 for TE's 4over6 tensors (nvfp4_e4m3_max) */
  int32_t ndim;         /* length of `shape`; 0 takes the logical shape from the data */
  const int64_t *shape; /* the logical shape (*lead, K), copied */
  DLManagedTensorVersioned *rowwise_data;
  DLManagedTensorVersioned *rowwise_scale_inv;
  DLManagedTensorVersioned *rowwise_amax;
  DLManagedTensorVersioned *columnwise_data;
  DLManagedTensorVersioned *columnwise_scale_inv;
  DLManagedTensorVersioned *columnwise_amax;
} mxfp8_nvfp4_tensor_desc;

#define MXFP8_NVFP4_TENSOR_DESC_INIT                                                  \
  {                                                                                   \
    (uint32_t) sizeof(mxfp8_nvfp4_tensor_desc),  /* struct_size */                    \
    MXFP8_SCALE_LAYOUT_ROW_MAJOR,                /* scale_layout */                   \
    448,                                         /* e4m3_max */                       \
    0,                                           /* ndim: the shape comes from data */ \
    NULL,                                        /* shape */                          \
    NULL,                                        /* rowwise_data */                   \
    NULL,                                        /* rowwise_scale_inv */              \
    NULL,                                        /* rowwise_amax */                   \
    NULL,                                        /* columnwise_data */                \
    NULL,                                        /* columnwise_scale_inv */           \
    NULL                                         /* columnwise_amax */                \
  }

/* An immutable, reference-counted handle on a validated NVFP4 tensor. Thread-safe like mxfp8_tensor. */
typedef struct mxfp8_nvfp4_tensor mxfp8_nvfp4_tensor;

/* Validates `desc` completely and wraps it in a handle; `*out` is written only on success. Touches no
 * tensor memory (the amax is read by the calls that use it), launches nothing. */
MXFP8_API mxfp8_status mxfp8_nvfp4_tensor_create(const mxfp8_nvfp4_tensor_desc *desc, mxfp8_nvfp4_tensor **out);

/* Drops the caller's reference; views hold their own. NULL is fine. Cannot fail. */
MXFP8_API void mxfp8_nvfp4_tensor_release(mxfp8_nvfp4_tensor *tensor);

/* Options of mxfp8_nvfp4_export_components. Start from MXFP8_NVFP4_EXPORT_OPTIONS_INIT; NULL options
 * mean its defaults. */
typedef struct mxfp8_nvfp4_export_options {
  uint32_t struct_size;  /* sizeof(mxfp8_nvfp4_export_options) */
  int32_t direction;     /* mxfp8_direction, default rowwise */
  int32_t values_dtype;  /* mxfp8_nvfp4_values_dtype, default uint8 */
  int32_t scales_dtype;  /* mxfp8_nvfp4_scales_dtype, default uint8 */
  int32_t padded_scales; /* mxfp8_padded_scales, default copy */
  int32_t global_scale;  /* mxfp8_nvfp4_global_scale, default decode */
  void *stream;          /* cudaStream_t of the copies; as mxfp8_export_options.stream */
  /* Allocates the copies; the same contract as mxfp8_export_options.allocator, except that the float32
   * prototype of the global scale must come back float32 (a byte prototype may come back uint8). NULL:
   * the library allocates. */
  int (*allocator)(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                   void (*set_error)(void *error_ctx, const char *kind, const char *message));
} mxfp8_nvfp4_export_options;

#define MXFP8_NVFP4_EXPORT_OPTIONS_INIT                                                 \
  {                                                                                     \
    (uint32_t) sizeof(mxfp8_nvfp4_export_options),  /* struct_size */                   \
    MXFP8_DIRECTION_ROWWISE,                        /* direction */                     \
    MXFP8_NVFP4_VALUES_UINT8,                       /* values_dtype */                  \
    MXFP8_NVFP4_SCALES_UINT8,                       /* scales_dtype */                  \
    MXFP8_PADDED_SCALES_COPY,                       /* padded_scales */                 \
    MXFP8_NVFP4_GLOBAL_SCALE_DECODE,                /* global_scale */                  \
    NULL,                                           /* stream: the legacy default */    \
    NULL                                            /* allocator: the library allocates */ \
  }

/* Exports one direction of `tensor` as up to three DLPack tensors:
 *
 *   values:       the stored data, ALWAYS a zero-copy view (in-place updates show through):
 *                 rowwise (*lead, K/2) uint8 or (*lead, K) float4; columnwise the stored transpose,
 *                 (K, M/2) uint8 or (K, M) float4. Even element in the low nibble.
 *   scales:       the E4M3 block scales, compact row-major: rowwise (*lead, ceil(K/16)), columnwise
 *                 (K, ceil(M/16)). A view when the buffer is row-major with no padding columns (or with
 *                 them and MXFP8_PADDED_SCALES_STRIDED_VIEW); otherwise a contiguous copy (crop, or the
 *                 unswizzle), flagged DLPACK_FLAG_BITMASK_IS_COPIED, as mxfp8_export_components makes it.
 *   global_scale: float32, the amax's shape, always a copy: `options->global_scale`'s convention of each
 *                 amax. CUDA: computed by a kernel on `options->stream`.
 *
 * Any output pointer may be NULL to skip it, but not all three. Outputs are written only on success; views
 * keep `tensor` alive; release each output by calling its deleter. Allocation and stream rules are those
 * of mxfp8_export_components. Fails with MXFP8_ERROR_MISSING_DATA when the tensor has no data for
 * `direction`. Thread-safe. */
MXFP8_API mxfp8_status mxfp8_nvfp4_export_components(const mxfp8_nvfp4_tensor *tensor,
                                                     const mxfp8_nvfp4_export_options *options,
                                                     DLManagedTensorVersioned **values,
                                                     DLManagedTensorVersioned **scales,
                                                     DLManagedTensorVersioned **global_scale);

/* Decodes one direction of `tensor` (options->direction; NULL options: rowwise, legacy default stream)
 * into `output`: float32 or bfloat16, contiguous, R * C elements (any shape) of the stored matrix, so
 * columnwise output is the (K, M) transpose TE stores; on the tensor's device, aligned to its element
 * size, sharing no byte with the tensor's buffers. Each element is computed as TE's dequantize kernel
 * does (the formula at the top of this section, in float), then rounded to nearest-even for bfloat16;
 * every NaN (an E4M3 NaN scale 0x7F/0xFF, a NaN or Inf amax times zero) is written as 0x7FFFFFFF
 * (float32) or 0x7FFF (bfloat16). Reads every scale layout in place. Host: done on return. CUDA: one
 * kernel queued on options->stream; the call does not wait. */
MXFP8_API mxfp8_status mxfp8_nvfp4_dequantize(const mxfp8_nvfp4_tensor *tensor,
                                              const mxfp8_dequantize_options *options, DLTensor *output);

/* ====================================================================================================
 * NVFP4: quantizing BF16 / FP16 / FP32, bit-exact with Transformer Engine          [EXPERIMENTAL]
 * ==================================================================================================== */

/* NVFP4 is FP4 E2M1 values (+-{0, 0.5, 1, 1.5, 2, 3, 4, 6}), one E4M3 scale per 16 consecutive values
 * along K, and a second-level float32 `amax` (per tensor, or per row). An element decodes as
 * fp4 * e4m3_scale * amax / (6 * E4M3_MAX) (E4M3_MAX = 448, or 256 with 4over6's option); the exact
 * float order, which is what mxfp8_nvfp4_dequantize computes and which can round differently from
 * other orders, is the formula of the "NVFP4: describing..." section above.
 * The quantizer below is Transformer Engine's NVFP4 quantizer (1x16 blocks, rowwise or columnwise, round
 * to nearest even; TE's stochastic rounding, random Hadamard transform and 16x16 2-D blocks are not
 * offered), computed as TE's kernels compute it, every step a float32 operation rounded to nearest even:
 *   S_enc  = (6 * E4M3_MAX) / amax, then min(S_enc, FLT_MAX) (NaN becomes FLT_MAX); 1 when amax == 0
 *            or S_enc == 0 (amax = Inf). S_dec = 1 / S_enc.
 *   per block, block_amax = max |x| over its real elements (NaN skipped, 0 for an empty block):
 *   scale  = e4m3(block_amax * (S_enc * (1/6)))  rounded to nearest even, saturating at 448;
 *   r      = min(1 / (float(scale) * S_dec), FLT_MAX)   (FLT_MAX for a zero scale);
 *   value  = e2m1(x * r), rounded to nearest even and saturating at +-6; -0 and values that round to
 *            zero keep their sign; NaN becomes +6 (0x7). That NaN rule is the one of
 *            Transformer Engine's kernel path (its cvt.rn.satfinite.e2m1x2 conversion) and of CUDA's
 *            host emulation of that conversion (__nv_cvt_float2_to_fp4x2 in cuda_fp4.hpp); this library
 *            does not use the instruction, it computes the rule in its own code on host and GPU alike.
 * With 4over6 (TE's nvfp4_use_4over6, the "Four Over Six" selection) each block is quantized twice,
 * with scale6 = e4m3(min((block_amax / 6) * S_enc, 448)) and scale4 = e4m3(min((block_amax / 6) * S_enc
 * * 1.5, 448)), each with its r as above; each candidate's error is summed over the block in element
 * order, err += |d| (MAE) or d * d (MSE) with d = ((e2m1 value * scale) * amax) / (6 * E4M3_MAX) - x;
 * (a partial block's missing elements count as zeros, as in TE's kernel: they add nothing unless amax is
 * Inf or NaN); the map-to-4 candidate is kept only when its error is strictly smaller. (TE's fast-math
 * error mode, which computes the error in FP16, is not offered.) TE's Python reference
 * (reference_nvfp4.py) writes code 0 for -0.0 and NaN; its kernels, and this library, do as above.
 * Values are packed two per byte, the even element in the low nibble: a row of K values takes K/2
 * bytes. K (M for columnwise) must be even, as Transformer Engine stores NVFP4 ((*lead, K/2) bytes) and
 * as mxfp8_nvfp4_tensor_create requires, so that every output can be described and dequantized. Partial
 * blocks (K not a multiple of 16) use only their real elements. */

/* Where the second-level amax comes from and how many there are. */
typedef enum mxfp8_nvfp4_amax_scope {
  MXFP8_NVFP4_AMAX_PER_TENSOR = 0, /* one float32 for the tensor (TE's default) */
  MXFP8_NVFP4_AMAX_PER_ROW = 1     /* one float32 per row, M of them (TE's row_scaled_nvfp4); rowwise only */
} mxfp8_nvfp4_amax_scope;

typedef enum mxfp8_nvfp4_amax_mode {
  /* The quantize computes amax (max |x| over the tensor or row, NaN skipped, 0 when empty) and writes
   * it to the caller's amax buffer before using it. */
  MXFP8_NVFP4_AMAX_COMPUTE = 0,
  /* The quantize reads the amax buffer as the caller filled it (any float32, used as TE would: a NaN
   * gives S_enc = FLT_MAX); for reusing or sharing a global scale. It is not checked or written. */
  MXFP8_NVFP4_AMAX_GIVEN = 1
} mxfp8_nvfp4_amax_mode;

typedef enum mxfp8_nvfp4_4over6 {
  MXFP8_NVFP4_4OVER6_OFF = 0, /* TE's default NVFP4 quantizer */
  MXFP8_NVFP4_4OVER6_MAE = 1, /* 4over6, candidates compared by absolute error (TE's "MAE") */
  MXFP8_NVFP4_4OVER6_MSE = 2  /* 4over6, candidates compared by squared error (TE's "MSE") */
} mxfp8_nvfp4_4over6;

/* Options of the NVFP4 quantize calls. Start from MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT; NULL means its
 * defaults. */
typedef struct mxfp8_nvfp4_quantize_options {
  uint32_t struct_size;  /* sizeof(mxfp8_nvfp4_quantize_options) */
  int32_t amax_scope;    /* mxfp8_nvfp4_amax_scope, default per tensor */
  int32_t amax_mode;     /* mxfp8_nvfp4_amax_mode, default compute */
  int32_t four_over_six; /* mxfp8_nvfp4_4over6, default off */
  int32_t e4m3_max;      /* E4M3_MAX of the second level: 448 (default) or 256 (only with 4over6) */
  int32_t scales_layout; /* mxfp8_quantized_scales: compact (default), padded or swizzled (below) */
  /* mxfp8_direction, default rowwise. Columnwise quantizes the transpose, as TE stores NVFP4 columnwise
   * data: the (K, M) matrix x^T, blocked along M. Everything below then reads with M and K swapped:
   * values (K, M/2), scales (K, ceil(M/16)) or padded (roundup(K, 128), roundup(ceil(M/16), 4)),
   * the per-tensor amax is the same as rowwise. Per-row amax is rowwise only: Transformer Engine's
   * row_scaled_nvfp4 scales the rows of its rowwise data, and keeps one columnwise amax per tensor
   * (mxfp8_nvfp4_tensor_create describes nothing else); columnwise with MXFP8_NVFP4_AMAX_PER_ROW is refused. */
  int32_t direction;
  uint32_t reserved; /* must be 0 (fills what would be padding before `stream`) */
  /* cudaStream_t the kernels run on (NULL: the legacy default stream); ignored for host memory. */
  void *stream;
} mxfp8_nvfp4_quantize_options;

#define MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT                                                   \
  {                                                                                         \
    (uint32_t) sizeof(mxfp8_nvfp4_quantize_options),  /* struct_size */                     \
    MXFP8_NVFP4_AMAX_PER_TENSOR,                      /* amax_scope */                      \
    MXFP8_NVFP4_AMAX_COMPUTE,                         /* amax_mode */                       \
    MXFP8_NVFP4_4OVER6_OFF,                           /* four_over_six */                   \
    448,                                              /* e4m3_max */                        \
    MXFP8_QUANTIZED_SCALES_COMPACT,                   /* scales_layout */                   \
    MXFP8_DIRECTION_ROWWISE,                          /* direction */                       \
    0,                                                /* reserved */                        \
    NULL                                              /* stream: the legacy default stream */ \
  }

/* Quantizes `input` (bfloat16, float16 or float32; row-major contiguous; data + byte_offset aligned to
 * the element size; ndim >= 1, logical shape (*lead, K) read as M = prod(lead) rows of K) to NVFP4 in
 * caller-owned buffers on the input's device (shapes for rowwise; columnwise swaps M and K, see
 * options.direction):
 *
 *   values: uint8 (or any one-byte dtype), contiguous, M * K/2 elements (any shape, e.g. (*lead, K/2)),
 *           packed as described above. K must be even (M for columnwise).
 *   scales: uint8 or float8_e4m3fn, contiguous, exactly as many elements as options->scales_layout
 *           says, with one scale per 16 values: compact (M, ceil(K/16)); padded (roundup(M, 128),
 *           roundup(ceil(K/16), 4)), TE's allocation; or that padded matrix in the cuBLAS 128x4 GEMM
 *           layout (the MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED formula with 16-value blocks). Padding bytes
 *           are written as zero.
 *   amax:   float32, contiguous, 1 element (per tensor) or M (per row, rowwise only), aligned to 4
 *           bytes; written (MXFP8_NVFP4_AMAX_COMPUTE) or read (MXFP8_NVFP4_AMAX_GIVEN).
 *
 * No buffer written may overlap the input or another buffer; a given amax (MXFP8_NVFP4_AMAX_GIVEN) is
 * only read, so, as any input, it may share bytes with the input. Everything is checked before anything
 * is written.
 * Host memory: done when the call returns (large inputs on several threads, as mxfp8_quantize).
 * CUDA: queued on options->stream (a memset of the amax or of padded scales, an amax kernel when it is
 * computed, then the quantize kernel); the call does not wait, and the amax never leaves the device. */
MXFP8_API mxfp8_status mxfp8_nvfp4_quantize_into(const DLTensor *input,
                                                 const mxfp8_nvfp4_quantize_options *options,
                                                 DLTensor *values, DLTensor *scales, DLTensor *amax);

/* Fused shards (Q/K/V, or gate/up) that an engine stores as one tensor with one global scale: quantizes
 * `count` inputs (same dtype, same K, same device; any row counts) under one shared per-tensor amax, so
 * every shard's block scales are re-derived against the common S_enc. With MXFP8_NVFP4_AMAX_COMPUTE the
 * shared amax is the largest of the shards' amaxes (what vLLM's ModelOpt loader takes as weight_scale_2
 * = amax / (6 * 448) when shards differ), written to `amax` (one float32); with MXFP8_NVFP4_AMAX_GIVEN it
 * is read from there. Shard i is written to values[i] and scales[i], with the rules of
 * mxfp8_nvfp4_quantize_into; options->amax_scope must be per tensor. The result is byte for byte what
 * mxfp8_nvfp4_quantize_into gives each shard with that amax given. Same stream and host rules. */
MXFP8_API mxfp8_status mxfp8_nvfp4_quantize_fused_into(const DLTensor *const *inputs, size_t count,
                                                       const mxfp8_nvfp4_quantize_options *options,
                                                       DLTensor *const *values, DLTensor *const *scales,
                                                       DLTensor *amax);

/* ====================================================================================================
 * NVFP4 in buckets and imports: an NVFP4 weight travels as MXFP8 ones do             [EXPERIMENTAL]
 * ==================================================================================================== */

/* An NVFP4 tensor is a new KIND OF ENTRY of the same buckets, manifests and import calls, not a parallel
 * set of them: a bucket is a list of parts and the receiver's manifest is a set of parallel per-entry
 * arrays (formats, directions, layouts, shards), so an NVFP4 entry is one more format value
 * (MXFP8_FORMAT_NVFP4) plus what only it has (a third part, the amax), appended to the manifest. One
 * bucket may then mix MXFP8 and NVFP4 tensors (a model that keeps some layers in MXFP8), is filled by one
 * launch and imported by one call, and every check (parts inside the bucket, sizes exact for the shape
 * and layout, no overlap, destinations) is the one MXFP8 entries already get.
 *
 * What an NVFP4 entry carries, for the stored matrix of its direction (rows x cols: rowwise (M, K),
 * columnwise the (K, M) transpose TE stores; cols even), in bucket order, each part at a multiple of the
 * plan's alignment:
 *   values: rows * cols / 2 bytes, row-major, two E2M1 codes per byte, the even element in the low nibble;
 *   scales: the E4M3 block scales S (rows x ceil(cols / 16)), compact row-major (what
 *           mxfp8_nvfp4_export_components returns), one byte each;
 *   amax:   the second level ON THE WIRE IS THE AMAX, float32, as Transformer Engine keeps it: one per
 *           tensor, or one per row (rowwise, TE's row_scaled_nvfp4), at a multiple of 4 bytes. The amax
 *           is what both conventions are computed from (the decode scale amax / (6 * E4M3_MAX), vLLM
 *           ModelOpt's weight_scale_2, and the encode scale (6 * E4M3_MAX) / amax that FlashInfer and
 *           compressed-tensors take, as TE computes it): the receiver gets either bit for bit as
 *           mxfp8_nvfp4_export_components computes it, which no single float of the other convention
 *           would allow (x / 2688 does not round-trip through * 2688 for every x). E4M3_MAX (448, or 256
 *           for TE's 4over6 tensors) travels in the entry's mxfp8_bucket_nvfp4_entry.
 *
 * A receiver that reads the bytes itself (not through mxfp8_import_bucket) computes weight_scale_2 as
 * the float32 division amax / (6 * E4M3_MAX). A manifest that says an entry is MXFP8 when the bucket
 * holds NVFP4 (or the other way round) is refused: the part sizes of the two formats differ for every
 * shape with values, and an NVFP4 entry needs its nvfp4_entries and global_scales. */

/* Where an NVFP4 entry's amax lies in the bucket, and how it decodes. An array element (one per entry of
 * a plan or manifest), so it has no struct_size and keeps this layout for good; entries of MXFP8 tensors
 * are all zero. */
typedef struct mxfp8_bucket_nvfp4_entry {
  uint64_t amax_offset; /* bytes from the bucket's first byte, a multiple of 4 */
  uint64_t amax_bytes;  /* 4 per amax: 4 (per tensor) or 4 * rows (per row, rowwise only) */
  int32_t e4m3_max;     /* 448, or 256 for TE's 4over6 tensors */
  uint32_t reserved;    /* 0 */
} mxfp8_bucket_nvfp4_entry;

/* Plans a bucket of MXFP8 and NVFP4 tensors: entry i is tensors[i] when `tensors` and tensors[i] are
 * non-NULL, else nvfp4_tensors[i] (exactly one of the two must be set; either array may be NULL when it
 * has no entry). Each MXFP8 entry is planned as mxfp8_bucket_plan plans it (values, then compact
 * scales); each NVFP4 entry's values, scales and amax (above) follow one another, each at a multiple of
 * `alignment` (the amax at a multiple of 4 as well). entries[i] receives the values and scales parts of
 * every entry, nvfp4_entries[i] the amax part of an NVFP4 entry (all zero for an MXFP8 one); both arrays
 * have `count` elements, and nvfp4_entries may be NULL when no entry is NVFP4. Both are written only on
 * success.
 * options: `direction` for every tensor (NVFP4: the stored matrix of that direction),
 * scales_granularity MXFP8_SCALES_PER_32, and scale_fixup, which rewrites E8M0 bytes and so applies to
 * the MXFP8 entries only (NVFP4 scales travel as stored); NULL options: rowwise. All tensors live on one
 * device. Touches no tensor memory. A plan with only MXFP8 entries equals mxfp8_bucket_plan's. */
MXFP8_API mxfp8_status mxfp8_bucket_plan_mixed(const mxfp8_tensor *const *tensors,
                                               const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                               const mxfp8_export_options *options, uint64_t alignment,
                                               mxfp8_bucket_entry *entries, mxfp8_bucket_nvfp4_entry *nvfp4_entries,
                                               uint64_t *total_bytes);

/* Fills `bucket` as the plan says (the same tensors, options, entries and nvfp4_entries): MXFP8 entries
 * as mxfp8_export_bucket fills them; NVFP4 values and amax copied, E4M3 scales cropped or unswizzled into
 * place. The checks, the stream and the single launch are mxfp8_export_bucket's (NVFP4 parts are byte
 * moves of the same jobs). count == 0 is a no-op. */
MXFP8_API mxfp8_status mxfp8_export_bucket_mixed(const mxfp8_tensor *const *tensors,
                                                 const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                 const mxfp8_export_options *options, const mxfp8_bucket_entry *entries,
                                                 const mxfp8_bucket_nvfp4_entry *nvfp4_entries, DLTensor *bucket);

/* The prepared form (see "Prepared exports"): run with mxfp8_prepared_export_run; the plan holds a
 * reference on every tensor of both kinds. */
MXFP8_API mxfp8_status mxfp8_prepare_bucket_mixed(const mxfp8_tensor *const *tensors,
                                                  const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                  const mxfp8_export_options *options,
                                                  const mxfp8_bucket_entry *entries,
                                                  const mxfp8_bucket_nvfp4_entry *nvfp4_entries, DLTensor *bucket,
                                                  mxfp8_prepared_export **out);

/* The receiving side is mxfp8_import_bucket and mxfp8_prepare_import_bucket, unchanged in signature. An
 * NVFP4 entry i of the manifest (formats[i] == MXFP8_FORMAT_NVFP4) is read as:
 *   shapes[i], ndims[i]: the logical shape (*lead, K); directions[i] picks the stored matrix (rows, cols)
 *       as above, cols even;
 *   entries[i]: values of rows * cols / 2 bytes and scales of the S bytes scales_layouts[i] gives for
 *       rows x ceil(cols / 16) (MXFP8_LAYOUT_COMPACT, or MXFP8_LAYOUT_CUTLASS_128X4 with S swizzled as
 *       it is, also for columnwise: the stored matrix is already the transpose);
 *   nvfp4_entries[i]: the amax part, 4 or (rowwise) 4 * rows bytes at a multiple of 4 bytes of the
 *       bucket's memory; e4m3_max 448 or 256; reserved 0.
 * and written into:
 *   destinations[i].values: uint8 of rows * cols / 2 elements or float4_e2m1fn (bits 4, lanes 1) of
 *       rows * cols elements, contiguous, any shape (vLLM's uint8 weight [N, K/2]);
 *   destinations[i].scales: uint8 or float8_e4m3fn, contiguous, exactly the bytes of
 *       destinations[i].scales_layout for S: MXFP8_LAYOUT_COMPACT (vLLM's weight_scale [N, ceil(K/16)]
 *       as loaded) or MXFP8_LAYOUT_CUTLASS_128X4 (roundup(rows, 128) * roundup(ceil(cols / 16), 4),
 *       padding zero: what vLLM's ModelOpt path swizzles weight_scale into for its FP4 GEMMs); the other
 *       layouts are MXFP8-only (MXFP8_ERROR_INVALID_ARGUMENT);
 *   manifest.global_scales[i]: float32, contiguous, one element per amax, aligned to 4 bytes, receiving
 *       manifest.global_scale's convention of each amax (MXFP8_NVFP4_GLOBAL_SCALE_DECODE, the default:
 *       weight_scale_2; or MXFP8_NVFP4_GLOBAL_SCALE_ENCODE), bit for bit what
 *       mxfp8_nvfp4_export_components returns for the same amax and E4M3_MAX.
 * Every destination buffer joins the overlap checks. manifest.scale_fixup leaves NVFP4 scales as they
 * are; manifest.shards is MXFP8_ERROR_UNSUPPORTED for an NVFP4 entry (resharding NVFP4 is not offered
 * yet). CUDA: the values and scales move in the bucket's one launch; the global scales are computed by
 * one more small kernel per NVFP4 entry, queued on the same stream after it (host: done on return). */

/* The direct path with NVFP4 tensors (no bucket): mxfp8_import_tensors where entry i is tensors[i] (an
 * MXFP8 tensor, imported as there) when `tensors` and tensors[i] are set, else nvfp4_tensors[i], whose
 * stored matrix of direction options->direction is read straight from the trainer's storage (e.g. mapped
 * over CUDA IPC): its values copied into destinations[i].values, its E4M3 scales moved from their stored
 * layout (compact, TE-padded or 128x4) into destinations[i].scales in the layout it asks, its amax written
 * to global_scales[i] in the `global_scale` convention (mxfp8_nvfp4_global_scale). destinations[i] and
 * global_scales[i] are checked as for an NVFP4 entry of mxfp8_import_bucket; global_scales has `count`
 * pointers, read at NVFP4 entries only (it may be NULL when none is NVFP4). options->scale_fixup applies to
 * the MXFP8 entries only. Same checks, overlap rules and stream as mxfp8_import_tensors (destinations must
 * not overlap any buffer of any tensor, amax included); the global scales take one more small kernel per
 * NVFP4 entry on CUDA. count == 0 is a no-op. */
MXFP8_API mxfp8_status mxfp8_import_tensors_mixed(const mxfp8_tensor *const *tensors,
                                                  const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                  const mxfp8_export_options *options,
                                                  const mxfp8_import_destination *destinations,
                                                  DLTensor *const *global_scales, int32_t global_scale);

/* The prepared form (see "Prepared exports"): the plan holds a reference on every tensor of both kinds;
 * the destinations' and global scales' addresses stay yours. options->stream is not used. */
MXFP8_API mxfp8_status mxfp8_prepare_import_tensors_mixed(const mxfp8_tensor *const *tensors,
                                                          const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                          const mxfp8_export_options *options,
                                                          const mxfp8_import_destination *destinations,
                                                          DLTensor *const *global_scales, int32_t global_scale,
                                                          mxfp8_prepared_export **out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXFP8_MXFP8_H_ */
