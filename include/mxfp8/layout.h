/* mxfp8/layout.h: Scale layouts: the engine layouts, converting a tensor or grouped experts into one, and the
 * 128x4 swizzle of one scale matrix between caller buffers.
 *
 * Part of the mxfp8 C API: include <mxfp8/mxfp8.h>, which includes this file after the conventions,
 * the version and the status codes every declaration here relies on. */
#ifndef MXFP8_LAYOUT_H_
#define MXFP8_LAYOUT_H_

#ifndef MXFP8_MXFP8_H_
#error "include <mxfp8/mxfp8.h>, not <mxfp8/layout.h> alone"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ====================================================================================================
 * Engine layouts: where an engine wants the scale bytes, and the fix-ups some need      [EXPERIMENTAL]
 * ==================================================================================================== */

/* The engine layouts: the values 2..5 of mxfp8_scale_layout (tensor.h), with COMPACT (0) and 128X4 (1)
 * the layouts a call writes scales in (docs/api.md, "Engine layouts, shards, experts", says which engine
 * loads which). Values are row-major in every layout except the TRT-LLM ones, which permute value rows.
 * Scales of a rowwise tensor form S (R x C) = (M, ceil(K/32)); of a columnwise tensor
 * S (R x C) = (ceil(M/32), K). Every layout can be a convert target (mxfp8_convert, mxfp8_grouped_convert);
 * every layout but the TRT-LLM ones (which permute value rows, while a bucket and a transfer keep values in
 * row order) can also be a transfer's target and a bucket part's layout (mxfp8_transfer_desc). The bytes
 * a layout gives for (R, C) are exact: a buffer or part of any other size is refused, so scales are never
 * decoded in a layout they are not in (nor transformed twice). For grouped experts each expert's scales
 * take that many bytes, back to back.
 *
 * MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED (2):
 *   FlashInfer's TRT-LLM MoE weights (vLLM's MXFP8 MoE backend: what _shuffle_mxfp8_moe_weights makes of
 *   w2_weight and its scales), per expert of R rows, R a multiple of 128 (FlashInfer's requirement):
 *   FlashInfer's shuffle_matrix_a permutation (epilogue_tile_m 128) moves row 32b + i of the values
 *   and of S to row 32b + 8 * (i % 4) + i / 4; the permuted S is then laid out as
 *   MXFP8_SCALE_LAYOUT_128X4 (shuffle_matrix_sf_a), R * roundup(C, 4) bytes, padding zero:
 *
 *     byte offset of S(r, c) = swizzled offset of (32 * (r / 32) + 8 * (r % 4) + (r % 32) / 4, c)
 *
 *   The values must be converted along (mxfp8_convert*): their rows move the same way. Rowwise only;
 *   not a bucket or import layout (a bucket's values are in row order).
 *
 * MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED (3):
 *   DeepGEMM's packed UE8M0 scales, for DeepGEMM on Blackwell (sm100 / sm120, where SGLang sets
 *   DEEPGEMM_SCALE_UE8M0: its weight_scale_inv_deepgemm; DeepGEMM's
 *   get_mn_major_tma_aligned_packed_ue8m0_tensor): the int32 tensor [mn, ceil(sf_k / 4)] with
 *   mn = R, sf_k = C, MN-major, strides (1, mn_aligned) in int32 elements, mn_aligned = roundup(R, 4).
 *   Int32 (m, j) holds the E8M0 bytes of S(m, 4j .. 4j+3), S(m, 4j) in its lowest byte, so in memory:
 *
 *     byte offset of S(r, c) = ((c / 4) * roundup(R, 4) + r) * 4 + c % 4
 *
 *   exactly 4 * ceil(C / 4) * roundup(R, 4) bytes; padding bytes (columns C.. of the last int32 of a row,
 *   rows R .. mn_aligned) are zero (DeepGEMM's strided view, when R % 4 != 0, does not describe the
 *   last column's padding rows: those bytes are left as they are; see mxfp8_convert). Grouped experts stack to DeepGEMM's [G, mn, ceil(sf_k / 4)] with
 *   strides (ceil(sf_k / 4) * mn_aligned, 1, mn_aligned). Rowwise scales only (DeepGEMM packs along K):
 *   columnwise is refused with MXFP8_ERROR_INVALID_ARGUMENT.
 *
 * MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED (4):
 *   The same for the gate-and-up projection of a gated activation (SwiGLU): what vLLM loads as
 *   w13_weight and its scales. The source rows are [gate (w1) rows 0 .. N-1; up (w3) rows N .. 2N-1],
 *   as vLLM's and SGLang's w13 and the checkpoints hold them (R = 2N). First vLLM's swap_w13_to_w31
 *   and FlashInfer's reorder_rows_for_gated_act_gemm: row 2i <- up row i (source N + i), row 2i + 1 <-
 *   gate row i (source i); then MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED's shuffle and 128x4 interleave.
 *
 * MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 (5):
 *   DeepGEMM's scales on Hopper (sm90, where SGLang does not set DEEPGEMM_SCALE_UE8M0): SGLang's
 *   weight_scale_inv_deepgemm there is float32 [R, C], row-major, each scale the float32 whose bits
 *   are its E8M0 byte << 23 (SGLang's _process_mxfp8_linear_weight_scale: (u8.to(int32) << 23)
 *   .view(float32)), so 2^(e - 127) for bytes 1..254, +0.0 for byte 0 and +inf for byte 255. In memory,
 *   little-endian:
 *
 *     bytes 4 * (r * C + c) .. + 3 of S(r, c) = 0, 0, (e & 1) << 7, e >> 1
 *
 *   exactly 4 * R * C bytes, no padding. Grouped experts stack to [E, R, C]. Rowwise only, as
 *   MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED. Read back (a bucket part in this layout), a scale is its float32's
 *   exponent field: the sign and mantissa bits, which this layout never sets, are not read. */

/* A rewrite of scale bytes some consumers need, applied to every real scale a call writes (padding
 * stays zero). */
typedef enum mxfp8_scale_fixup {
  MXFP8_SCALE_FIXUP_NONE = 0, /* the scale bytes as stored: the default */
  /* E8M0 byte 0 (2^-127, an all-zero block) written as 1 (2^-126). NeMo RL (#3477) writes it so, so
   * that its two weight transports send identical scale bytes; a block of zeros decodes to zeros either
   * way. */
  MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE = 1
} mxfp8_scale_fixup;

/* ====================================================================================================
 * Engine-native targets: a tensor or grouped experts converted into an engine's layout  [EXPERIMENTAL]
 * ==================================================================================================== */

/* An engine loads MXFP8 weights in its kernels' own layout (mxfp8_scale_layout; docs/api.md says which
 * engine parameter takes which). These calls write it once, checked, from the scales as the producer
 * stores them (compact, padded or 128x4 swizzled, as described by mxfp8_tensor_create or
 * mxfp8_grouped_tensor_create), into caller buffers: no per-expert pass in the engine.
 * Options: start from MXFP8_CONVERT_OPTIONS_INIT; NULL means its defaults. */
typedef struct mxfp8_convert_options {
  uint32_t struct_size; /* sizeof(mxfp8_convert_options) */
  int32_t target;       /* mxfp8_scale_layout the scales are written in, default MXFP8_SCALE_LAYOUT_COMPACT */
  int32_t direction;    /* mxfp8_direction read from an mxfp8_tensor, default rowwise (grouped: rowwise only) */
  int32_t scale_fixup;  /* mxfp8_scale_fixup, default none */
  void *stream;         /* cudaStream_t the work is queued on (NULL: the legacy default); unused for host memory */
  /* Padding to an engine's alignment, in the same launch (rowwise; see "Padding" below). 0: none. */
  int64_t pad_rows_to;  /* each expert's rows (of the gated target, each half's) to a multiple of this */
  int64_t pad_cols_to;  /* K to a multiple of this, a multiple of 32 */
  int32_t pad_scale;    /* E8M0 byte of a padding scale, default 127 (2^0, vLLM's); not 255 (NaN) */
  /* MXFP8_CHECK_ONLY or 0. 64 bits wide so that it starts past the 4 bytes of padding that end the
   * previous version of this struct (48 bytes), which a caller built against it may leave unset. */
  uint64_t flags;
} mxfp8_convert_options;

#define MXFP8_CONVERT_OPTIONS_INIT                                                     \
  {                                                                                    \
    (uint32_t) sizeof(mxfp8_convert_options),  /* struct_size */                       \
    MXFP8_SCALE_LAYOUT_COMPACT,                      /* target */                            \
    MXFP8_DIRECTION_ROWWISE,                   /* direction */                         \
    MXFP8_SCALE_FIXUP_NONE,                    /* scale_fixup */                       \
    NULL,                                      /* stream: the legacy default stream */ \
    0,                                         /* pad_rows_to: no padding */           \
    0,                                         /* pad_cols_to: no padding */           \
    127,                                       /* pad_scale: 2^0 */                    \
    0u                                         /* flags: convert */                    \
  }

/* Padding (options->pad_rows_to, pad_cols_to): an engine whose kernels need aligned sizes loads the
 * weight padded. With padding, the call writes the padded weight: each expert's N rows become
 * N' = roundup(N, pad_rows_to) (MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED: each half, [gate; up] with
 * N = 2I becoming [gate, zeros; up, zeros] of N' = 2 roundup(I, pad_rows_to)), K becomes
 * K' = roundup(K, pad_cols_to), padding values are zero and padding scales (the scale matrix grows to
 * N' x K' / 32) options->pad_scale, all before the target's row order and layout: the target lays out
 * the padded matrix, so its sizes are those of (N', K' / 32) and the values output holds N' x K'
 * bytes an expert. This is vLLM's align_mxfp8_moe_weights_for_fi_trtllm (vLLM 0.33, the FlashInfer
 * TRT-LLM MXFP8 MoE backend: intermediate size to 128, hidden size to 256, scale 127), which pads w13
 * [E, 2I, H] with pad_rows_to 128 and pad_cols_to 256 and w2 [E, H, I] with pad_rows_to 256 and
 * pad_cols_to 128, then swaps and shuffles: the TRT-LLM targets with these options give its result.
 * Any target takes padding; the scale_fixup rewrites the real scales only. Rowwise only; the values
 * output is required (the padded values are a new array). */

/* Writes direction options->direction of `tensor` in layout options->target:
 *
 *   scales: uint8, float8_e8m0fnu, or the engine's own element type (int32 for
 *           MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED, float32 for MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32), contiguous, exactly the
 *           bytes the target gives for the tensor's scale matrix (any shape), on the tensor's device;
 *           for MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED also DeepGEMM's own strided int32 tensor (R, ceil(C/4)),
 *           strides (1, roundup(R, 4)), also [1, R, ceil(C/4)]. Every byte is written, padding included
 *           (as zero), except that the library never writes past the extent a tensor describes: the
 *           strided form's extent ends at int32 (ceil(C/4) - 1) * roundup(R, 4) + R, so when R % 4 != 0
 *           the last column's padding rows R .. roundup(R, 4) - 1 (the last 4 * (roundup(R, 4) - R)
 *           bytes of the layout) are left as they are. DeepGEMM reads only rows < R, and the storage
 *           get_mn_major_tma_aligned_packed_ue8m0_tensor allocates holds the whole layout.
 *   values: NULL, or uint8 / the float8 of the tensor's format, contiguous, prod(shape) elements
 *           (padded: M' x K', M' the padded rows of M = prod(lead)): the values in the target's row
 *           order (a copy for every target but the TRT-LLM ones). Required by targets that permute
 *           value rows and by padding. The TRT-LLM targets lay the tensor out as one expert of
 *           M = prod(lead) rows; MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED refuses a tensor of more than 2
 *           dimensions (stacked experts: mxfp8_grouped_convert).
 *
 * Columnwise: compact and 128x4 as mxfp8_scale_layout says (128x4 swizzles S^T, as cuBLAS reads columnwise
 * scales); the DeepGEMM and TRT-LLM layouts are rowwise only and refuse it. Everything (options,
 * dtypes, sizes, devices, no output sharing a byte with the tensor or with the other output) is checked
 * before anything is written. Host memory: done on return. CUDA: one launch on options->stream (plus the
 * copy of large contiguous parts, as mxfp8_transfer moves them; the TRT-LLM targets' values
 * take a row-permuting launch of their own instead); the call does not wait. */
MXFP8_API mxfp8_status mxfp8_convert(const mxfp8_tensor *tensor, const mxfp8_convert_options *options,
                                     DLTensor *values, DLTensor *scales);

/* The same for E grouped experts of one row count N (rowwise): expert e's scales are written at byte
 * e * B of `scales`, B the bytes the target gives for (N, ceil(K/32)), so the buffer holds E * B bytes
 * (for MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 float32 [E, N, C]; for MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED DeepGEMM's int32
 * [E, N, ceil(sf_k/4)], flat or with its strides
 * (ceil(sf_k/4) * roundup(N, 4), 1, roundup(N, 4)), where only the last expert's last padding rows lie
 * past the view's extent and are left alone, as for mxfp8_convert); values, when given, E * N * K elements, stacked
 * [E, N, K] in the target's row order (the TRT-LLM targets permute each expert's rows: vLLM's
 * w13_weight / w2_weight). All experts in one launch (a second past about 300 experts; the TRT-LLM
 * targets' values one more, for all experts). Same checks and stream rules as mxfp8_convert. */
MXFP8_API mxfp8_status mxfp8_grouped_convert(const mxfp8_grouped_tensor *grouped,
                                             const mxfp8_convert_options *options, DLTensor *values,
                                             DLTensor *scales);

/* The bytes the scales of an R x C scale matrix S take in `layout` (`direction` says whether S is
 * rowwise, or columnwise as 128x4 swizzles its transpose), in *bytes: what an engine allocates before
 * a convert or an import. An empty matrix (rows or cols 0) is 0 bytes in every layout, however large
 * its other side (the TRT-LLM layouts' row rule below still applies). Fails with MXFP8_ERROR_INVALID_ARGUMENT for an unknown layout, a layout that does not
 * take this direction (the DeepGEMM and TRT-LLM layouts are rowwise only), negative rows or cols, for
 * the TRT-LLM layouts rows not a multiple of 128 (FlashInfer's requirement), and a size int64 cannot
 * hold. */
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXFP8_LAYOUT_H_ */
