/* mxfp8/transfer.h: Moving many tensors: the batched export of scales, shards, and the transfer (one
 * description of many tensors of either format, whole or sharded, from a trainer's storage or a bucket
 * into a bucket or an engine's own parameters, run at once or prepared once and run every step).
 *
 * Part of the mxfp8 C API: include <mxfp8/mxfp8.h>, which includes this file after the conventions,
 * the version and the status codes every declaration here relies on. */
#ifndef MXFP8_TRANSFER_H_
#define MXFP8_TRANSFER_H_

#ifndef MXFP8_MXFP8_H_
#error "include <mxfp8/mxfp8.h>, not <mxfp8/transfer.h> alone"
#endif

#ifdef __cplusplus
extern "C" {
#endif

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
 *   options: `direction`, `stream` and `scale_fixup` are used; the dtype, padding and allocator fields
 *            do not apply, and a set `shard` is refused (MXFP8_ERROR_INVALID_ARGUMENT: the call exports
 *            whole tensors) (NULL options: rowwise, legacy default stream).
 *
 * CUDA: queued on `stream`, the call does not wait. Host: done when the call returns. count == 0
 * moves nothing (the options are still checked). */
MXFP8_API mxfp8_status mxfp8_export_scales_batched(const mxfp8_tensor *const *tensors,
                                                   DLTensor *const *destinations, size_t count,
                                                   const mxfp8_export_options *options);

/* ====================================================================================================
 * Resharding: the shard one inference rank needs, straight from the trainer's storage  [EXPERIMENTAL]
 * ==================================================================================================== */

/* A trainer and its inference engine rarely share a parallel layout: the trainer may hold a whole weight
 * while each engine rank needs a tensor-parallel shard of it. A shard is one exported alone
 * (mxfp8_export_components' options.shard) or entry i of a transfer (desc.shards[i], on either side of a
 * bucket). A shard is a range of rows (of M = prod(lead): a shard of N for column-parallel weights) and
 * a range of columns (of K: row-parallel weights), or several row ranges concatenated (the Q, K and V
 * rows of one rank of a fused QKV weight, the gate and up rows of a fused gate-up weight). Its scales are read where they are stored (row-major,
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
 * (ceil(rows/32), cols) columnwise, exactly the crop of what mxfp8_export_components returns.
 *
 * NVFP4 entries of a transfer take shards as MXFP8 ones do, on both sides of a bucket, in the same logical
 * terms, with NVFP4's blocks of 16 along the stored matrix's rows:
 *   rowwise (stored (M, K)):            col_begin a multiple of 16; col_end a multiple of 16 or K. Rows:
 *                                       any, pieces too.
 *   columnwise (stored (K, M)):         row_begin, row_end multiples of 16 or M (they are stored columns);
 *                                       columns: any (stored rows). Two or more row pieces would be
 *                                       several column windows of the stored matrix:
 *                                       MXFP8_ERROR_UNSUPPORTED (one piece is its range).
 * The shard lands as its stored matrix: rowwise (rows, cols), columnwise (cols, rows), values packed two a
 * byte, E4M3 scales one per 16 along its rows (compact or 128x4, as the whole entry's). A per-tensor amax
 * is the shard's too (its block scales were computed against it): global_scales[i] holds one float. A
 * per-row amax gives the shard's rows' amaxes, piece by piece: global_scales[i] holds `rows` floats.
 *
 * In a transfer, entry i's shard is what lands: in a bucket (FROM_TENSORS -> TO_BUCKET: the part holds the
 * shard, values row-major (rows, cols), then its scales; the receiver describes the entry with the shard's
 * shape) or in buffers (sized for the shard), read from where it lies: the trainer's storage, or a bucket
 * of whole tensors (FROM_BUCKET: every rank maps one bucket and takes its own part). A shard keeps its
 * scale bytes as stored, so:
 *   - into an MXFP8_SCALE_LAYOUT_128X4 target: a shard of 128x4 scales (a swizzled tensor, a 128x4
 *     part) only when it is the whole matrix (otherwise take it into a compact target); a shard of
 *     row-major scales of one row range, or of several row pieces when its scales are rowwise and every
 *     piece but the last is a multiple of 128 rows (each piece fills whole tiles);
 *   - the engine layouts (as a part's or a target layout) and desc.scale_fixup do not take a shard;
 * each of these is MXFP8_ERROR_UNSUPPORTED for the entry. */

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

/* ====================================================================================================
 * The transfer: one description of many tensors moved from where they are to where they go
 *                                                                                       [EXPERIMENTAL]
 * ==================================================================================================== */

/* Every way of moving many tensors is one call on one description, mxfp8_transfer_desc: per-entry
 * parallel arrays (entry i at index i) that say where each tensor comes from, which part of it (a
 * shard), and where it goes, in one of three verbs:
 *
 *   mxfp8_transfer          checks everything, then moves every entry (one launch on CUDA memory);
 *   mxfp8_transfer_check    the same checks, nothing written, nothing kept;
 *   mxfp8_transfer_prepare  the same checks once, the work kept as an mxfp8_plan that mxfp8_plan_run
 *                           launches every step (on CUDA memory no check, allocation or
 *                           synchronization: capturable in a CUDA graph; on host memory the work may
 *                           be split over threads started for the run, see mxfp8.h) until
 *                           mxfp8_plan_release;
 *
 * plus mxfp8_bucket_parts, which lays out the bucket a TO_BUCKET transfer fills. Sources and
 * destinations:
 *
 *   FROM_TENSORS  tensors[i]: handles of either format (an NVFP4 one is its stored matrix of the entry's
 *                 direction), e.g. a trainer's TE storage, or the same mapped over CUDA IPC by a receiver.
 *   FROM_BUCKET   bucket_in at parts_in[i]: what a sender's TO_BUCKET transfer filled, described by the
 *                 per-entry arrays the sender hands over with it (a manifest: the receiver has only bytes).
 *   TO_BUFFERS    values[i], scales[i] (and for NVFP4 global_scales[i]): caller buffers or an engine's own
 *                 parameters, written in place (their addresses stay the engine's, so its CUDA graphs
 *                 stay valid), scales in target_layouts[i].
 *   TO_BUCKET     bucket_out at parts_out[i] (from mxfp8_bucket_parts): values, then scales in
 *                 target_layouts[i], then (NVFP4) the amax, for one IPC handle or one NCCL broadcast.
 *   TO_NOTHING    mxfp8_transfer_check only: the source side alone (a receiver that reads a bucket's bytes
 *                 itself reads only parts the library accepted).
 *
 * Every source goes to every destination (bucket to bucket excepted: MXFP8_ERROR_UNSUPPORTED), with any
 * mix of MXFP8 and NVFP4 entries, each entry in its own direction, whole or a shard (shards[i], see
 * "Resharding": NVFP4 shards too, on both sides), immediate or prepared. What the transfer cannot do is
 * refused for the entry, before anything is written, with one status and a message naming the field:
 *   a layout that permutes value rows (TRT-LLM) as a part's or a target layout: INVALID_ARGUMENT (use
 *   mxfp8_convert); an NVFP4 entry with an engine layout (DeepGEMM, TRT-LLM): INVALID_ARGUMENT; a
 *   columnwise entry with a DeepGEMM layout: INVALID_ARGUMENT; a shard with an engine layout, with
 *   scale_fixup, or of 128x4 scales into a 128x4 target (unless whole tiles, see "Resharding"):
 *   UNSUPPORTED; row pieces of a columnwise NVFP4 entry: UNSUPPORTED.
 *
 * A bucket on the wire. Entry i's parts follow one another in entry order, each at a multiple of the
 * plan's alignment; bytes between parts are left as they were:
 *   MXFP8: values, prod(shape) bytes row-major (the shard's (rows, cols) for a shard), then the scale
 *          matrix S (rowwise (M, ceil(K/32)), columnwise (ceil(M/32), K)) in the part's layout:
 *          MXFP8_SCALE_LAYOUT_COMPACT (R * C bytes, what vLLM / SGLang load) unless target_layouts[i] says
 *          otherwise.
 *   NVFP4: for the stored matrix of the entry's direction (rows x cols: rowwise (M, K), columnwise the
 *          (K, M) transpose TE stores; cols even): values of rows * cols / 2 bytes, two E2M1 codes a byte,
 *          the even element in the low nibble; the E4M3 block scales S (rows x ceil(cols / 16)) compact
 *          or in MXFP8_SCALE_LAYOUT_128X4; then the amax, float32, at a multiple of 4 bytes: one per
 *          tensor, or one per row (rowwise, TE's row_scaled_nvfp4). The second level ON THE WIRE IS THE
 *          AMAX, as Transformer Engine keeps it: both conventions are computed from it (the decode scale
 *          amax / (6 * E4M3_MAX), vLLM ModelOpt's weight_scale_2, and the encode scale
 *          (6 * E4M3_MAX) / amax that FlashInfer and compressed-tensors take), so the receiver gets either
 *          bit for bit as mxfp8_export_global_scale computes it, which no single float of the other
 *          convention would allow (x / 2688 does not round-trip through * 2688 for every x). E4M3_MAX
 *          (448, or 256 for TE's 4over6 tensors) travels beside the bucket (desc.e4m3_maxes). A receiver
 *          that reads the bytes itself computes weight_scale_2 as the float32 division
 *          amax / (6 * E4M3_MAX).
 * A receiver that says an entry is MXFP8 when the bucket holds NVFP4 (or the other way round) is refused:
 * the part sizes of the two formats differ for every shape with values. */

/* Where one entry's parts sit in a bucket, in bytes from the bucket's first byte. An array element (one
 * per entry), so it has no struct_size and keeps this layout for good. */
typedef struct mxfp8_bucket_part {
  uint64_t values_offset, values_bytes; /* MXFP8: rows * cols; NVFP4: rows * cols / 2 (the shard's if any) */
  uint64_t scales_offset, scales_bytes; /* the scale matrix S in the part's layout */
  uint64_t amax_offset, amax_bytes;     /* NVFP4: 4, or 4 a row (per-row amax), at a multiple of 4; MXFP8: 0, 0
                                           (anything else is refused) */
} mxfp8_bucket_part;

typedef enum mxfp8_transfer_source {
  MXFP8_TRANSFER_SOURCE_UNSET = 0, /* refused: say where the tensors come from */
  MXFP8_TRANSFER_FROM_TENSORS = 1,
  MXFP8_TRANSFER_FROM_BUCKET = 2
} mxfp8_transfer_source;

typedef enum mxfp8_transfer_destination {
  MXFP8_TRANSFER_DESTINATION_UNSET = 0, /* refused: say where they go */
  MXFP8_TRANSFER_TO_BUFFERS = 1,
  MXFP8_TRANSFER_TO_BUCKET = 2,
  MXFP8_TRANSFER_TO_NOTHING = 3 /* mxfp8_transfer_check only */
} mxfp8_transfer_destination;

/* One transfer of `count` entries. Start from MXFP8_TRANSFER_DESC_INIT: fields added later are appended,
 * with 0 / NULL meaning what a desc without them meant. Every array has `count` elements and is read
 * during the call (and the preparation) only; an array that does not apply to the chosen source or
 * destination must be NULL (a forgotten choice is an error, not ignored data); a scalar field that does
 * not apply (global_scale of a transfer without NVFP4 buffers) is not read. All tensors, buffers and the
 * bucket of one transfer live on one device; no written byte belongs to two outputs or to a source. */
typedef struct mxfp8_transfer_desc {
  uint32_t struct_size;  /* sizeof(mxfp8_transfer_desc) */
  int32_t source;        /* mxfp8_transfer_source; must be set */
  int32_t destination;   /* mxfp8_transfer_destination; must be set */
  int32_t scale_fixup;   /* mxfp8_scale_fixup of every MXFP8 scale written (whole tensors only); NVFP4
                            scales travel as stored */
  int32_t global_scale;  /* mxfp8_nvfp4_global_scale written to global_scales[i]; default decode */
  uint32_t reserved;     /* must be 0 */
  size_t count;

  /* Per entry, either source. */
  const int32_t *directions;               /* mxfp8_direction; NULL: all rowwise */
  const struct mxfp8_shard *const *shards; /* NULL, or a NULL entry: the whole tensor */

  /* FROM_TENSORS: one handle per entry, MXFP8 or NVFP4 (mxfp8_tensor_create makes both). */
  const mxfp8_tensor *const *tensors;

  /* FROM_BUCKET: the bucket (contiguous bytes: uint8, or any other dtype of 8 bits, e.g. a wire buffer
   * received as int8, read as bytes; host or CUDA memory; only read; with an NVFP4 entry at an address
   * that is a multiple of 4, so that its float32 amax is aligned, TO_NOTHING too) and what the sender says
   * each part is. Every part must be of exactly the bytes its shape, format, direction and layout give,
   * inside the bucket (offset + bytes never wraps) and apart from every other part. */
  const DLTensor *bucket_in;
  const mxfp8_bucket_part *parts_in;
  const int32_t *ndims;              /* logical rank, 1..64 */
  const int64_t *const *shapes;      /* logical shape (*lead, K) of what the part holds (a shard sent alone: the shard's) */
  const int32_t *formats;            /* mxfp8_format; required */
  const int32_t *source_layouts;     /* mxfp8_scale_layout of each scales part; required (a 128x4 part the size of a
                                        compact one would otherwise decode to noise) */
  const int32_t *e4m3_maxes;         /* read at NVFP4 entries, required when there is one: 448 or 256 */
  /* Optional (both or neither): the sender's shape of each entry's S, so that a shape that merely has the
   * right byte count is refused. A given shape names S when its last dimension is S's columns and the
   * others multiply to S's rows ((*lead, ceil(K/32)) and (M, ceil(K/32)) both do), whatever the layout
   * (the layout gives the bytes); scales_ndims[i] 1..64. */
  const int32_t *scales_ndims;
  const int64_t *const *scales_shapes;

  /* Destinations: the mxfp8_scale_layout each entry's scales are written in (TO_BUFFERS and TO_BUCKET; NULL:
   * all MXFP8_SCALE_LAYOUT_COMPACT). NVFP4 entries: COMPACT or 128X4. */
  const int32_t *target_layouts;

  /* TO_BUFFERS, each contiguous, on the sources' device, sharing no byte with a source or another buffer:
   *   values[i]: uint8 or the float8 of the entry's format, exactly prod(shape) elements (any shape);
   *              NVFP4: uint8 of rows * cols / 2 or float4_e2m1fn of rows * cols elements (vLLM's uint8
   *              weight [N, K/2]).
   *   scales[i]: uint8 or float8_e8m0fnu (NVFP4: float8_e4m3fn), exactly the bytes target_layouts[i]
   *              gives (any shape: (R, C), flat, ...), every byte written, padding as zero; for
   *              MXFP8_SCALE_LAYOUT_DEEPGEMM_PACKED also int32 (a quarter as many elements) or DeepGEMM's own
   *              strided int32 (R, ceil(C/4)) tensor (what lies past the extent it describes is left, see
   *              mxfp8_convert); for MXFP8_SCALE_LAYOUT_DEEPGEMM_FLOAT32 also float32 (R * C elements).
   *   global_scales[i]: float32, one element per amax (the shard's rows for a per-row amax), aligned to 4
   *              bytes, receiving desc.global_scale's convention of each amax, bit for bit what
   *              mxfp8_export_global_scale returns for the same amax and E4M3_MAX; NULL at an MXFP8
   *              entry (a buffer there is refused: nothing would write it). */
  DLTensor *const *values;        /* NULL, or a NULL entry: that entry's scales only */
  DLTensor *const *scales;        /* required */
  DLTensor *const *global_scales; /* required when there is an NVFP4 entry; NULL at MXFP8 entries */

  /* TO_BUCKET: contiguous bytes (as bucket_in) of at least the planned size, and the plan of mxfp8_bucket_parts for this
   * desc (each part checked against it: the right size, inside the bucket, apart from the others). With an
   * NVFP4 entry the bucket starts at a multiple of 4 bytes, so its float32 amax lands aligned, as a
   * receiver reads it. */
  DLTensor *bucket_out;
  const mxfp8_bucket_part *parts_out;
} mxfp8_transfer_desc;

#define MXFP8_TRANSFER_DESC_INIT                                                    \
  {                                                                                 \
    (uint32_t) sizeof(mxfp8_transfer_desc), /* struct_size */                       \
    MXFP8_TRANSFER_SOURCE_UNSET,            /* source: must be set */               \
    MXFP8_TRANSFER_DESTINATION_UNSET,       /* destination: must be set */          \
    MXFP8_SCALE_FIXUP_NONE,                 /* scale_fixup */                       \
    MXFP8_NVFP4_GLOBAL_SCALE_DECODE,        /* global_scale */                      \
    0u,                                     /* reserved */                          \
    0,                                      /* count */                             \
    NULL, NULL,                             /* directions: rowwise; shards: whole */ \
    NULL,                                   /* tensors */                           \
    NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, /* the bucket source */  \
    NULL,                                   /* target_layouts: compact */           \
    NULL, NULL, NULL,                       /* values, scales, global_scales */     \
    NULL, NULL                              /* bucket_out, parts_out */             \
  }

/* Lays out the bucket of a FROM_TENSORS, TO_BUCKET desc (bucket_out and parts_out are not read; any
 * other source or destination: MXFP8_ERROR_INVALID_ARGUMENT): entry i's values, scales (in
 * target_layouts[i]) and, for NVFP4, amax, each at a multiple of `alignment` (a power of two; 256 suits
 * every consumer's vector loads; the amax also at a multiple of 4), in entry order. parts[count] and
 * *total_bytes are written on success only; a bucket past INT64_MAX bytes (a DLTensor's shape) fails. Checks
 * what the transfer checks of the sources; touches no tensor memory. */
MXFP8_API mxfp8_status mxfp8_bucket_parts(const mxfp8_transfer_desc *desc, uint64_t alignment,
                                          mxfp8_bucket_part *parts, uint64_t *total_bytes);

/* Checks everything (desc, every source, part, shard, destination, overlap), then moves every entry:
 * values copied, scales moved from where they lie into the target layout in the same pass (a copy when
 * the layouts agree, otherwise the transform between them; desc.scale_fixup rewrites exponent bytes 0 as
 * it says), NVFP4 amaxes copied into a bucket or turned into global scales in buffers. CUDA: one launch
 * on `stream` (a cudaStream_t; NULL: the legacy default stream) for the whole transfer (a few past
 * several hundred parts), plus the contiguous parts (values, and scales whose bytes need no layout
 * change: 128x4 to 128x4 with no padding) moved at copy speed: on sm_90 and later those of at least
 * 64 KiB by one more launch (a bulk-copy pipeline, up to 1000 parts a launch), elsewhere those of at
 * least 4 MiB by one cudaMemcpyAsync each (the environment, read once: MXFP8_COPY_ENGINE_MIN_BYTES sets
 * that size for both, 0 keeps every byte in the kernel; MXFP8_BULK_COPY=0 takes cudaMemcpyAsync on any
 * GPU); and (TO_BUFFERS) one small kernel for the global scales of up to 1000 NVFP4 entries. The call
 * does not wait. Host: done on return.
 * count == 0 moves nothing (the desc itself is still checked). When an entry breaks two rules, the first
 * of the list above that applies is the one reported (an NVFP4 shard into DeepGEMM's layout: the NVFP4
 * rule, INVALID_ARGUMENT). */
MXFP8_API mxfp8_status mxfp8_transfer(const mxfp8_transfer_desc *desc, void *stream);

/* The checks of mxfp8_transfer, in the same order with the same status and message; nothing written,
 * nothing kept. Reads buffers' addresses and sizes, never their bytes. With TO_NOTHING: the source side
 * alone (for FROM_BUCKET: every entry's rank, shape, format, direction, layout, E4M3_MAX and shard, and
 * every part's size, place and overlap, as the sender's manifest describes them, and an NVFP4 amax's
 * alignment in memory). */
MXFP8_API mxfp8_status mxfp8_transfer_check(const mxfp8_transfer_desc *desc);

/* A transfer checked once and kept as its work. A trainer moves the same weights from the same buffers
 * at every refit (Megatron keeps MXFP8 storage at fixed addresses so its CUDA graphs stay valid), so the
 * checks need not run every step: a run is only the launch. Immutable and thread-safe: a run changes
 * nothing in the plan, so any number of threads may share, run and release plans made from the same
 * tensors. Each run of one plan writes the same buffers (or bucket), though, so two runs of it that
 * overlap in time race on those bytes, as two writes of any buffer do: order them.
 *
 * What it holds: a reference on every source tensor (their deleters, and with them the owners of the
 * source buffers, wait for mxfp8_plan_release), and the addresses of the bucket and the buffers, which
 * stay yours: keep them allocated and in place for as long as you run the plan. A producer that
 * reallocates a source (a new storage for a parameter) must describe it again and prepare again: the
 * plan keeps the old storage alive and would move it, never freed memory but stale values. The desc and
 * its arrays are not kept. */
typedef struct mxfp8_plan mxfp8_plan;

/* mxfp8_transfer's checks, once; *out on success only. TO_NOTHING is refused (there is nothing to run). */
MXFP8_API mxfp8_status mxfp8_transfer_prepare(const mxfp8_transfer_desc *desc, mxfp8_plan **out);
/* Launches the plan on `stream` (as mxfp8_transfer; host memory: done on return). Fails only for CUDA
 * reasons (and a NULL plan: MXFP8_ERROR_INVALID_ARGUMENT). */
MXFP8_API mxfp8_status mxfp8_plan_run(const mxfp8_plan *plan, void *stream);
/* Drops the plan and its tensor references. NULL is fine; cannot fail. Queued work keeps running:
 * release after it is ordered. */
MXFP8_API void mxfp8_plan_release(mxfp8_plan *plan);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXFP8_TRANSFER_H_ */
