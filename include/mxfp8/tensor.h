/* mxfp8/tensor.h: The tensors: an MXFP8 or NVFP4 tensor and grouped MoE experts as their producer stores
 * them, and exporting their values, compact scales and (NVFP4) second-level scale.
 *
 * Part of the mxfp8 C API: include <mxfp8/mxfp8.h>, which includes this file after the conventions,
 * the version and the status codes every declaration here relies on. */
#ifndef MXFP8_TENSOR_H_
#define MXFP8_TENSOR_H_

#ifndef MXFP8_MXFP8_H_
#error "include <mxfp8/mxfp8.h>, not <mxfp8/tensor.h> alone"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ====================================================================================================
 * Describing a tensor: MXFP8, or NVFP4 (whose rules are EXPERIMENTAL)                  [STABLE]
 * ==================================================================================================== */

/* The encoding of the values. */
typedef enum mxfp8_format {
  MXFP8_FORMAT_UNSET = 0, /* not said: refused by every call (MXFP8_TENSOR_DESC_INIT_UNSET sets it) */
  MXFP8_FORMAT_E4M3 = 1, /* float8_e4m3fn, DLPack code kDLFloat8_e4m3fn (10) */
  MXFP8_FORMAT_E5M2 = 2, /* float8_e5m2,   DLPack code kDLFloat8_e5m2 (12) */
  /* NVFP4: FP4 E2M1 values, one E4M3 scale per 16 values, a float32 amax (below, "NVFP4 tensors"). What
   * it accepts and how its tensors export may still change (EXPERIMENTAL, like every NVFP4 call). */
  MXFP8_FORMAT_NVFP4 = 3
} mxfp8_format;

/* Where the bytes of a scale matrix lie: in a tensor's storage (mxfp8_tensor_desc.scale_layout: the two
 * STABLE values), and where a call writes scales (a transfer's target or bucket part, mxfp8_convert,
 * mxfp8_layout_bytes: every value). One enum for every place; the 128x4 tiles have one name, 128X4.
 *
 * Rowwise scales S (one per 32 consecutive values along K) form an R x C matrix with R = M = prod(lead)
 * and C = ceil(K/32). Columnwise scales (one per 32 consecutive rows) form an R x C matrix with
 * R = ceil(M/32) and C = K. A partial last block keeps its own scale, hence the ceil. (NVFP4: below.) */
typedef enum mxfp8_scale_layout {
  MXFP8_SCALE_LAYOUT_UNSET = -1, /* not said: refused by every call (MXFP8_TENSOR_DESC_INIT_UNSET sets it) */
  /* Row-major. As a tensor's storage: (R', C') with R' >= R and C' >= C; the buffer's own shape gives R'
   * and C' (leading dims are flattened into rows), padding never read. TE allocates R' = roundup(R, 128),
   * C' = roundup(C, 4) for rowwise and R' = roundup(R, 4), C' = roundup(C, 128) for columnwise; a compact
   * (R, C) buffer is fine too. Where a call writes scales: compact, exactly R * C bytes (what vLLM and
   * SGLang load), under its other name, MXFP8_SCALE_LAYOUT_COMPACT. */
  MXFP8_SCALE_LAYOUT_ROW_MAJOR = 0,
  MXFP8_SCALE_LAYOUT_COMPACT = 0,
  /* The cuBLAS / CUTLASS block-scaling layout ("128x4" tiles). For rowwise scales, S padded to
   * Rp = roundup(R, 128), Cp = roundup(C, 4) and stored tile by tile:
   *
   *   offset(r, c) = ((r / 128) * (Cp / 4) + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4
   *
   * Columnwise scales are swizzled as their transpose: the matrix swizzled is S^T (C x R), so Rp and Cp
   * are roundup(K, 128) and roundup(ceil(M/32), 4). The buffer must be contiguous and hold exactly
   * Rp * Cp bytes: any other size means the caller's idea of the layout is wrong, and guessing would
   * decode to noise. Written by a call: padding bytes zero (what a cuBLAS or CUTLASS MXFP8 GEMM loads:
   * vLLM's FlashInfer-CUTLASS linear, SGLang's weight_scale_inv_swizzled). MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED
   * is its name in 0.1 (STABLE, kept). */
  MXFP8_SCALE_LAYOUT_128X4 = 1,
  MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED = 1,
  /* The engine layouts, written by calls only (never a tensor's storage; EXPERIMENTAL): layout.h,
   * "Engine layouts", gives each one's bytes and which engine loads it. */
  MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED = 2,
  MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED = 3,
  MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED = 4,
  MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 = 5
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
  MXFP8_BLOCK_32X32 = 1,
  /* One scale per 16 consecutive values of a stored row: NVFP4's only block. An NVFP4 description must
   * say it; an MXFP8 one may not. */
  MXFP8_BLOCK_1X16 = 2
} mxfp8_block;

/* NVFP4 tensors (Blackwell's 4-bit recipe), as Transformer Engine stores them (transformer_engine/pytorch/
 * tensor/nvfp4_tensor.py, custom_recipes/reference_nvfp4.py, common/cast/nvfp4/dequantize_nvfp4.cuh):
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
 *     along its rows, and everything about NVFP4 here speaks of that stored matrix. C must be even (rows
 *     are whole bytes, as TE stores them); mxfp8_nvfp4_quantize_into refuses odd C, so all it writes can
 *     be described. Per-row amax exists for rowwise data only (TE keeps one columnwise amax), and the
 *     quantize refuses it for columnwise.
 *
 * Consumers: vLLM's ModelOpt NVFP4 loads uint8 values [N, K/2], row-major E4M3 scales [N, K/16] and
 * weight_scale_2 = amax / (6 * 448) (MXFP8_NVFP4_GLOBAL_SCALE_DECODE); FlashInfer's nvfp4_quantize takes
 * the encode scale 6 * 448 / amax (MXFP8_NVFP4_GLOBAL_SCALE_ENCODE); compressed-tensors stores that
 * encode scale as its weight_global_scale (its own generate_gparam computes it in the weight's dtype
 * and as a reciprocal times 2688, so its bits may differ from this division's in the last places:
 * keep the block scales and the global scale from one source). The cuBLAS layout of the block scales is the MXFP8 one on
 * bytes: mxfp8_swizzle_scales and mxfp8_unswizzle_scales move NVFP4 scale matrices R x ceil(C/16) as
 * they are (uint8 or float8_e4m3fn). */

/* Everything that says what a tensor is and where its bytes are. Start from MXFP8_TENSOR_DESC_INIT_UNSET
 * (below: the format and the scale layout must then be said) or MXFP8_TENSOR_DESC_INIT.
 *
 * MXFP8 (format E4M3 or E5M2):
 * Data tensors: the tensor's shape (not transposed, also for columnwise data, as TE stores it), dtype
 * uint8 or the float8 code matching `format`, row-major contiguous (strides NULL or compact).
 * Scale tensors: dtype uint8 or kDLFloat8_e8m0fnu (14), laid out as `scale_layout` says; the last
 * dimension must have stride 1 and the leading dimensions must flatten into rows.
 * At least one direction needs both its data and its scales; a direction with only one of the two is an
 * error. The NVFP4 fields (rowwise_amax, columnwise_amax, e4m3_max, reserved2) must stay NULL / 0.
 *
 * NVFP4 (format MXFP8_FORMAT_NVFP4, block MXFP8_BLOCK_1X16, e4m3_max 448 or 256): per direction three
 * tensors, *_data, *_scale_inv and *_amax, given all three or not at all (at least one direction):
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
 *                bytes (S itself, never its transpose). Padding is never read.
 *   *_amax:      float32, contiguous, one element (per tensor, any shape such as () or (1,)) or, rowwise
 *                only, M elements (TE's row_scaled_nvfp4: amax of row r). Read by the calls that use it.
 * Its logical shape (*lead, K): from `shape` when ndim > 0 (then each direction's data is checked against
 * it), else from rowwise data ((*lead, K) as the data's leading dimensions and K = 2 * last for uint8),
 * else from columnwise data as TE reads it back: (K, d1, ..., dn) gives (d1, ..., 2 * dn, K) for uint8.
 *
 * All buffers live on the same device: kDLCPU, kDLCUDA, kDLCUDAHost or kDLCUDAManaged.
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
  /* Added for NVFP4 after the fields above (a smaller struct_size means NULL / 0, hence MXFP8 only);
   * MXFP8 tensors leave them NULL / 0. */
  DLManagedTensorVersioned *rowwise_amax;    /* float32: 1 element, or M (TE's row_scaled_nvfp4) */
  DLManagedTensorVersioned *columnwise_amax; /* float32: 1 element */
  int32_t e4m3_max;     /* NVFP4's E4M3_MAX: 448, or 256 for TE's 4over6 tensors; 0 = not said, refused */
  uint32_t reserved2;   /* must be 0 */
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
    0u,                                    /* reserved */                            \
    NULL,                                  /* rowwise_amax */                        \
    NULL,                                  /* columnwise_amax */                     \
    0,                                     /* e4m3_max: NVFP4 must set it */         \
    0u                                     /* reserved2 */                           \
  }

/* What new code starts from: MXFP8_TENSOR_DESC_INIT with the format and the scale layout "not said", so
 * mxfp8_tensor_create refuses the description until both are set (MXFP8_ERROR_INVALID_ARGUMENT naming
 * the field). A layout left at ROW_MAJOR by MXFP8_TENSOR_DESC_INIT (STABLE: its meaning cannot change)
 * decodes TE's 128x4-swizzled scales as row-major whenever the two sizes coincide; a layout never set is
 * an error instead. Set it from Transformer Engine's _with_gemm_swizzled_scales. */
#define MXFP8_TENSOR_DESC_INIT_UNSET                                                      \
  {                                                                                  \
    (uint32_t) sizeof(mxfp8_tensor_desc),  /* struct_size */                         \
    MXFP8_FORMAT_UNSET,                    /* format: must be set */                 \
    MXFP8_SCALE_LAYOUT_UNSET,              /* scale_layout: must be set */           \
    0,                                     /* ndim: the shape comes from the data */ \
    NULL,                                  /* shape */                               \
    NULL,                                  /* rowwise_data */                        \
    NULL,                                  /* rowwise_scale_inv */                   \
    NULL,                                  /* columnwise_data */                     \
    NULL,                                  /* columnwise_scale_inv */                \
    MXFP8_BLOCK_1X32,                      /* block */                               \
    0u,                                    /* reserved */                            \
    NULL,                                  /* rowwise_amax */                        \
    NULL,                                  /* columnwise_amax */                     \
    0,                                     /* e4m3_max: NVFP4 must set it */         \
    0u                                     /* reserved2 */                           \
  }

/* An immutable, reference-counted handle on a validated tensor of either format. Thread-safe: any
 * number of threads may export from one handle at once. */
typedef struct mxfp8_tensor mxfp8_tensor;

/* Validates `desc` completely (shapes, dtypes, devices, buffer sizes, strides) and wraps it in a handle.
 * Every later export can only fail for reasons outside the description (memory, CUDA).
 * `*out` is written only on success. Touches no tensor memory, launches nothing. */
MXFP8_API mxfp8_status mxfp8_tensor_create(const mxfp8_tensor_desc *desc, mxfp8_tensor **out);

/* Drops the caller's reference (either format). Views exported from the tensor hold their own
 * references, so they stay valid; the input deleters run when the last reference goes. NULL is fine.
 * Cannot fail. */
MXFP8_API void mxfp8_tensor_release(mxfp8_tensor *tensor);

/* ====================================================================================================
 * Exporting values and compact scales                                                  [STABLE]
 * ==================================================================================================== */

/* The dtype of the exported values, read per format: the format's own type, or its bytes. */
typedef enum mxfp8_values_dtype {
  /* The format's own type: kDLFloat8_e4m3fn or kDLFloat8_e5m2; for NVFP4 kDLFloat4_e2m1fn (17), bits 4,
   * lanes 1, packed as DLPack defines it (two per byte, even element low), shape in elements. */
  MXFP8_VALUES_FP8 = 0,
  /* The same bytes as uint8, for consumers without float8 (CuPy, NumPy); for NVFP4 the packed bytes, two
   * values each, what ModelOpt checkpoints and vLLM load. */
  MXFP8_VALUES_UINT8 = 1
} mxfp8_values_dtype;

/* The dtype of the exported scales, read per format: the stored scale byte either way. MXFP8: the E8M0
 * biased exponent byte, scale = 2^(byte - 127), byte 255 is NaN. NVFP4: the E4M3 byte. */
typedef enum mxfp8_scales_dtype {
  MXFP8_SCALES_UINT8 = 0, /* uint8: the wire format vLLM and SGLang load (MXFP8 and NVFP4 alike) */
  /* The format's scale type: kDLFloat8_e8m0fnu (14); for NVFP4 kDLFloat8_e4m3fn (10), what vLLM's
   * weight_scale parameter holds. */
  MXFP8_SCALES_E8M0 = 1
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

/* Which second-level scale of an NVFP4 tensor mxfp8_export_global_scale returns (float32, one per amax).
 * Also what a transfer writes to global_scales (mxfp8_transfer_desc.global_scale). */
typedef enum mxfp8_nvfp4_global_scale {
  /* amax / (6 * E4M3_MAX), a float division (a NaN amax gives the canonical NaN 0x7FFFFFFF, on the host
   * as on the GPU): the factor that decodes, ModelOpt's and vLLM's weight_scale_2. x = e2m1 * e4m3 * this,
   * up to the rounding of the product. */
  MXFP8_NVFP4_GLOBAL_SCALE_DECODE = 0,
  /* (6 * E4M3_MAX) / amax, as Transformer Engine's quantizer computes it
   * (compute_global_encode_scaling_factor_FP4, common/cast/nvfp4/core_nvfp4.cuh): capped at FLT_MAX (also
   * for a NaN amax), and 1 when amax is zero or the quotient is zero (amax Inf). FlashInfer's
   * nvfp4_quantize global_scale; compressed-tensors' weight_global_scale. */
  MXFP8_NVFP4_GLOBAL_SCALE_ENCODE = 1
} mxfp8_nvfp4_global_scale;

/* Options of mxfp8_export_components (and mxfp8_export_global_scale). Start from
 * MXFP8_EXPORT_OPTIONS_INIT; NULL options mean the defaults it sets. */
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
   * mxfp8_scale_fixup (declared in layout.h; this field and the enum's published values are stable like
   * the rest of this struct) applied to every scale mxfp8_export_scales_batched writes (a transfer has
   * its own, mxfp8_transfer_desc.scale_fixup). mxfp8_export_components and mxfp8_grouped_export,
   * whose scales may be views, take only MXFP8_SCALE_FIXUP_NONE (MXFP8_ERROR_INVALID_ARGUMENT
   * otherwise). */
  int32_t scale_fixup;
  uint32_t reserved3;         /* must be 0 */
  /* Added after the fields above (a smaller struct_size means NULL, MXFP8_NVFP4_GLOBAL_SCALE_DECODE, 0). */
  /* mxfp8_export_components exports only this shard of the tensor (see mxfp8_shard in transfer.h for the
   * legal boundaries and the outputs' shapes, NVFP4's included); read during the call only. NULL: the
   * whole tensor. mxfp8_export_global_scale takes it too (an NVFP4 shard's second-level scale). The
   * batched and grouped exports export whole tensors and refuse a set shard (MXFP8_ERROR_INVALID_ARGUMENT). */
  const struct mxfp8_shard *shard;
  int32_t global_scale;       /* mxfp8_nvfp4_global_scale of mxfp8_export_global_scale; default decode */
  uint32_t reserved4;         /* must be 0 */
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
    0u,                                       /* reserved3 */                         \
    NULL,                                     /* shard: the whole tensor */           \
    MXFP8_NVFP4_GLOBAL_SCALE_DECODE,          /* global_scale */                      \
    0u                                        /* reserved4 */                         \
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
 * With options->shard set, only that shard (mxfp8_shard, transfer.h: its legal boundaries and its
 * (rows, cols) matrix), as the whole is exported:
 *
 *   values: (rows, cols). A zero-copy view for one row range, whatever the columns: a strided view with
 *           the tensor's row stride K (contiguous when the shard spans all of K); it shares memory
 *           with the source like the whole tensor's values. Several row pieces: a copy.
 *   scales: the shard's compact scales, (rows, ceil(cols/32)) rowwise, (ceil(rows/32), cols) columnwise.
 *           A view when the tensor's scales are row-major and the shard's lie as one range whose rows are
 *           contiguous (or with MXFP8_PADDED_SCALES_STRIDED_VIEW, any one range: a view with the stored
 *           row stride); otherwise a copy, read straight from the stored (padded or swizzled) scales, of
 *           only the shard's scales (the whole tensor's compact scales are never made). The copies of
 *           both outputs take one kernel launch on options->stream for CUDA memory.
 *
 * A shard exports the stored per-32 scales: with options->shard set, options->scales_granularity must be
 * MXFP8_SCALES_PER_32 (MXFP8_ERROR_INVALID_ARGUMENT otherwise). A shard that breaks a rule of mxfp8_shard
 * is MXFP8_ERROR_INVALID_ARGUMENT naming the field (options.shard.col_begin, ...).
 *
 * An NVFP4 tensor (EXPERIMENTAL) exports its stored matrix, with per-32 granularity only:
 *
 *   values: ALWAYS a zero-copy view: rowwise (*lead, K/2) uint8 or (*lead, K) float4; columnwise the
 *           stored transpose, (K, M/2) uint8 or (K, M) float4. Even element in the low nibble.
 *   scales: the E4M3 block scales, compact row-major: rowwise (*lead, ceil(K/16)), columnwise
 *           (K, ceil(M/16)); a view or a copy by the same rules as above.
 *   Its second-level scale comes from mxfp8_export_global_scale.
 *   With options->shard (the NVFP4 rules of mxfp8_shard in transfer.h): the shard of the stored matrix,
 *   2-D (rows, cols) rowwise, (cols, rows) columnwise, values (.., cols/2) uint8 or (.., cols) float4 --
 *   a view for one row range, a copy for several row pieces -- and its E4M3 scales (.., ceil(cols/16))
 *   by the same rules as an MXFP8 shard's.
 *
 * Every output the library makes (a view, or a copy in its own memory) carries strides (never NULL when
 * ndim > 0) and the DLPack version of the header the library was built with; a copy in memory from
 * options->allocator comes back as the allocator made it (its strides, which a contiguous tensor may
 * leave NULL, and its version), with the dtype and DLPACK_FLAG_BITMASK_IS_COPIED set. Views keep `tensor` alive; release each output by calling its deleter (once).
 * Either output pointer may be NULL to skip that output, but not both. Both outputs are written only on
 * success. Thread-safe. Fails with MXFP8_ERROR_MISSING_DATA when the tensor has no data for `direction`.
 */
MXFP8_API mxfp8_status mxfp8_export_components(const mxfp8_tensor *tensor,
                                               const mxfp8_export_options *options,
                                               DLManagedTensorVersioned **values,
                                               DLManagedTensorVersioned **scales);

/* ====================================================================================================
 * NVFP4: the second-level scale                                                        [EXPERIMENTAL]
 * ==================================================================================================== */

/* The second-level scale of one direction (options->direction) of an NVFP4 tensor: float32, the amax's
 * shape (one per tensor, or one per row), options->global_scale's convention of each amax; with
 * options->shard, a per-tensor amax's one float still (the shard's block scales were computed against
 * it) and a per-row amax's the shard's rows, piece by piece, shape (rows); always a copy
 * (allocated as mxfp8_export_components allocates copies: options->allocator must return a float32
 * tensor for it). Host: done on return. CUDA: computed by a kernel on options->stream. Written only on
 * success; release it by calling its deleter. Other options as mxfp8_export_components (values_dtype,
 * scales_dtype, padded_scales, scales_granularity and scale_fixup are checked but not read). Fails with MXFP8_ERROR_INVALID_ARGUMENT for an MXFP8
 * tensor (it has no second level) or a shard off the rules, MXFP8_ERROR_MISSING_DATA when the tensor has
 * no data for the direction, MXFP8_ERROR_UNSUPPORTED for a columnwise shard of several row pieces (as
 * mxfp8_export_components). Thread-safe. */
MXFP8_API mxfp8_status mxfp8_export_global_scale(const mxfp8_tensor *tensor, const mxfp8_export_options *options,
                                                 DLManagedTensorVersioned **global_scale);

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
  int32_t num_experts;         /* E, 1 to 2^20 (1048576) */
  uint32_t reserved;           /* must be 0 */
  int64_t cols;                /* K, shared by all experts */
  int64_t uniform_rows;        /* rows of every expert, when expert_rows is NULL */
  const int64_t *expert_rows;  /* E row counts (may differ, may be 0), copied; or NULL */
  /* E offsets, in bytes, of each expert's scales inside scale_inv (copied); NULL: back to back in
   * expert order, each taking the size `scales` says. */
  const int64_t *scale_offsets;
  /* Values: uint8 or the float8 of `format`, contiguous, sum(rows_e) * K elements (any shape, e.g.
   * (sum rows, K) or (E, N, K)). Scales: uint8 or e8m0, contiguous, large enough for every expert
   * (Transformer Engine's JAX grouped quantize allocates for its worst case: bytes past the experts'
   * are never read). Back to back, expert e's scales start where expert e-1's end, so the buffer's size
   * cannot tell a wrong num_experts or row count: four experts of N rows described as two of 2N read
   * each expert's scales from the wrong bytes where N is not a multiple of 128.
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

/* Experts stacked, the shape vLLM's MoE layers load: values [count, N, K] and compact scales
 * [count, N, ceil(K/32)], rowwise.
 *
 *   experts NULL, count 0: every expert in order (count = E), which needs experts of one row count N.
 *   otherwise:             the experts one rank serves (expert parallelism), in the order given
 *                          (experts[i] in 0..E-1; an expert may appear more than once), which must share
 *                          one row count N. count 0 with experts set (there would be no N) and experts
 *                          NULL with count > 0 are MXFP8_ERROR_INVALID_ARGUMENT. `experts` is read during
 *                          the call only.
 *
 * Each output is a view when the experts it holds lie back to back in the flat buffers in the order given
 * (always so for every expert; the chosen ones when experts[i] == experts[0] + i), the scales only when
 * packed MXFP8_GROUPED_SCALES_COMPACT with each expert's scales right after the one before; otherwise a
 * copy. The copies of both outputs are made by one launch on options->stream (large contiguous parts
 * moved as mxfp8_transfer moves them). Options as mxfp8_export_components, except: direction
 * rowwise (columnwise is MXFP8_ERROR_MISSING_DATA), per-32 granularity, scale_fixup NONE and shard NULL
 * (MXFP8_ERROR_INVALID_ARGUMENT otherwise). Ownership, allocation and output rules as
 * mxfp8_export_components. */
MXFP8_API mxfp8_status mxfp8_grouped_export(const mxfp8_grouped_tensor *grouped, const int32_t *experts, size_t count,
                                            const mxfp8_export_options *options, DLManagedTensorVersioned **values,
                                            DLManagedTensorVersioned **scales);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXFP8_TENSOR_H_ */
