/* mxfp8/quantize.h: Quantizing BF16 / FP16 / FP32 to MXFP8 and NVFP4 (bit-exact with Transformer Engine), and
 * dequantizing.
 *
 * Part of the mxfp8 C API: include <mxfp8/mxfp8.h>, which includes this file after the conventions,
 * the version and the status codes every declaration here relies on. */
#ifndef MXFP8_QUANTIZE_H_
#define MXFP8_QUANTIZE_H_

#ifndef MXFP8_MXFP8_H_
#error "include <mxfp8/mxfp8.h>, not <mxfp8/quantize.h> alone"
#endif

#ifdef __cplusplus
extern "C" {
#endif

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
   * RCEIL does. For E4M3 and a finite, normal amax below 1.75 * 2^127, the two differ exactly on blocks
   * whose amax has the mantissa 1.75 (this rule's scale byte is then one higher: amax = 1.75 * 2^k is
   * 448 * 2^(k-8), which RCEIL keeps). As its
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
  uint32_t flags;         /* MXFP8_CHECK_ONLY (mxfp8_quantize_into only) or 0 */
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
    0u,                                         /* flags */                             \
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
 * the call does not wait.
 *
 * An NVFP4 tensor (EXPERIMENTAL; mxfp8/tensor.h, "NVFP4 tensors", describes it and its decode formula):
 * `output` holds R * C elements (any shape) of the stored matrix, so columnwise output is the (K, M)
 * transpose TE stores. Each element is computed as TE's dequantize kernel does (that formula, in float),
 * then rounded to nearest-even for bfloat16; every NaN (an E4M3 NaN scale 0x7F/0xFF, a NaN or Inf amax
 * times zero) is written as above. Reads every scale layout in place; CUDA: one kernel queued on
 * options->stream, no scratch. */
MXFP8_API mxfp8_status mxfp8_dequantize(const mxfp8_tensor *tensor, const mxfp8_dequantize_options *options,
                                        DLTensor *output);

/* ====================================================================================================
 * NVFP4: quantizing BF16 / FP16 / FP32, bit-exact with Transformer Engine, and decoding [EXPERIMENTAL]
 * ==================================================================================================== */

/* NVFP4 is FP4 E2M1 values (+-{0, 0.5, 1, 1.5, 2, 3, 4, 6}), one E4M3 scale per 16 consecutive values
 * along K, and a second-level float32 `amax` (per tensor, or per row). An element decodes as
 * fp4 * e4m3_scale * amax / (6 * E4M3_MAX) (E4M3_MAX = 448, or 256 with 4over6's option); the exact
 * float order, which is what mxfp8_dequantize computes and which can round differently from
 * other orders, is the formula of the "NVFP4 tensors" comment of mxfp8/tensor.h.
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
 * as an NVFP4 mxfp8_tensor_desc requires, so that every output can be described and dequantized. Partial
 * blocks (K not a multiple of 16) use only their real elements.
 * ModelOpt's NVFP4QTensor.quantize (0.47) gives the same bytes for finite inputs without -0.0 (which
 * is code 8 here, as TE's kernel writes it, and code 0 there; an Inf or NaN input gives another tensor
 * there altogether) except in three cases (pinned by the Python test test_oracle_modelopt.py): an
 * all-zero block (its scale 1.0, here 0); a block whose scale
 * rounds below E4M3's smallest subnormal 2^-9 (clamped to 2^-9 there and its values kept, here scale 0:
 * the block decodes to zeros); and a scale or value whose unrounded magnitude is within a few float32
 * ulps of a rounding boundary, which ModelOpt (x / (scale * amax / (6 * 448))) may round to the
 * neighbouring code. */

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

/* Options of mxfp8_nvfp4_quantize_into. Start from MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT; NULL means its
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
   * (an NVFP4 mxfp8_tensor_desc describes nothing else); columnwise with MXFP8_NVFP4_AMAX_PER_ROW is refused. */
  int32_t direction;
  uint32_t flags; /* MXFP8_CHECK_ONLY or 0 */
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
    0u,                                               /* flags */                           \
    NULL                                              /* stream: the legacy default stream */ \
  }

/* Quantizes `count` inputs (count >= 1; each bfloat16, float16 or float32; row-major contiguous;
 * data + byte_offset aligned to the element size; ndim >= 1, logical shape (*lead, K) read as M =
 * prod(lead) rows of K) to NVFP4 in caller-owned buffers on the inputs' device: inputs[i] is written to
 * values[i] and scales[i] (shapes for rowwise; columnwise swaps M and K, see options.direction):
 *
 *   values[i]: uint8 (or any one-byte dtype), contiguous, M * K/2 elements (any shape, e.g.
 *           (*lead, K/2)), packed as described above. K must be even (M for columnwise).
 *   scales[i]: uint8 or float8_e4m3fn, contiguous, exactly as many elements as options->scales_layout
 *           says, with one scale per 16 values: compact (M, ceil(K/16)); padded (roundup(M, 128),
 *           roundup(ceil(K/16), 4)), TE's allocation; or that padded matrix in the cuBLAS 128x4 GEMM
 *           layout (the MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED formula with 16-value blocks). Padding bytes
 *           are written as zero.
 *   amax:   float32, contiguous, 1 element (per tensor) or M (per row, rowwise only, count 1 only),
 *           aligned to 4 bytes; written (MXFP8_NVFP4_AMAX_COMPUTE) or read (MXFP8_NVFP4_AMAX_GIVEN).
 *
 * count == 1 quantizes one tensor, with either amax scope. count > 1 quantizes fused shards (Q/K/V, or
 * gate/up) that an engine stores as one tensor with one global scale: the inputs (same dtype, same K,
 * same device; any row counts) share one per-tensor amax (options->amax_scope must be per tensor), so
 * every shard's block scales are derived against the common S_enc. With MXFP8_NVFP4_AMAX_COMPUTE the
 * shared amax is the largest of the shards' amaxes (what vLLM's ModelOpt loader takes as weight_scale_2 =
 * amax / (6 * 448) when shards differ), written to `amax`; with MXFP8_NVFP4_AMAX_GIVEN it is read from
 * there. Each shard comes out byte for byte as a count-1 call writes it with that amax given.
 *
 * No buffer written may overlap an input or another buffer; a given amax (MXFP8_NVFP4_AMAX_GIVEN) is
 * only read, so, as any input, it may share bytes with the inputs (inputs may share bytes with each
 * other). Everything is checked before anything is written.
 * Host memory: done when the call returns (large inputs on several threads, as mxfp8_quantize).
 * CUDA: queued on options->stream (a memset of the amax or of padded scales, an amax kernel when it is
 * computed, then the quantize kernel); the call does not wait, and the amax never leaves the device.
 * The arrays are read during the call only. */
MXFP8_API mxfp8_status mxfp8_nvfp4_quantize_into(const DLTensor *const *inputs, size_t count,
                                                 const mxfp8_nvfp4_quantize_options *options,
                                                 DLTensor *const *values, DLTensor *const *scales,
                                                 DLTensor *amax);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXFP8_QUANTIZE_H_ */
