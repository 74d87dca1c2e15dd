/* mxfp8/transfer.h: Moving many tensors: batched exports, buckets, prepared exports, imports into an engine's
 * parameters, shards, and NVFP4 entries among them.
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
 *   options: `direction` and `stream` are used; the dtype, padding and allocator fields do not apply
 *            (NULL options: rowwise, legacy default stream).
 *
 * CUDA: queued on `stream`, the call does not wait. Host: done when the call returns. count == 0 is a
 * no-op. */
MXFP8_API mxfp8_status mxfp8_export_scales_batched(const mxfp8_tensor *const *tensors,
                                                   DLTensor *const *destinations, size_t count,
                                                   const mxfp8_export_options *options);

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
 *                           launches every step (no check, allocation or synchronization: capturable in
 *                           a CUDA graph) until mxfp8_plan_release;
 *
 * plus mxfp8_bucket_parts, which lays out the bucket a TO_BUCKET transfer fills. Sources and
 * destinations:
 *
 *   FROM_TENSORS  tensors[i]: handles of either format (an NVFP4 one is its stored matrix of the entry's
 *                 direction), e.g. a trainer's TE storage, or the same mapped over CUDA IPC by a receiver.
 *   FROM_BUCKET   bucket_in at parts_in[i]: what a sender's TO_BUCKET transfer filled, described by the
 *                 per-entry arrays the sender hands over with it (a manifest: the receiver has only bytes).
 *   TO_BUFFERS    values[i], scales[i] (and for NVFP4 global_scales[i]): caller buffers or an engine's own
 *                 parameters, written in place, scales in target_layouts[i].
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
 * The wire format of a bucket entry is the one the older bucket calls write (below): an MXFP8 entry's
 * values then its scales; an NVFP4 entry's packed values, E4M3 scales and float32 amax ("NVFP4 in
 * buckets and imports"), each part at a multiple of the alignment. */

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

  /* FROM_TENSORS: one handle per entry, MXFP8 or NVFP4 (mxfp8_tensor or a cast mxfp8_nvfp4_tensor). */
  const mxfp8_tensor *const *tensors;

  /* FROM_BUCKET: the bucket (contiguous uint8, host or CUDA memory) and what the sender says each part is. */
  const DLTensor *bucket_in;
  const mxfp8_bucket_part *parts_in;
  const int32_t *ndims;              /* logical rank, 1..64 */
  const int64_t *const *shapes;      /* logical shape (*lead, K) of what the part holds (a shard sent alone: the shard's) */
  const int32_t *formats;            /* mxfp8_format; required */
  const int32_t *source_layouts;     /* mxfp8_layout of each scales part; required (a 128x4 part the size of a
                                        compact one would otherwise decode to noise) */
  const int32_t *e4m3_maxes;         /* read at NVFP4 entries, required when there is one: 448 or 256 */
  const int32_t *scales_ndims;       /* optional (both or neither): the sender's shape of S, checked to name S */
  const int64_t *const *scales_shapes;

  /* Destinations: the mxfp8_layout each entry's scales are written in (TO_BUFFERS and TO_BUCKET; NULL:
   * all MXFP8_LAYOUT_COMPACT). NVFP4 entries: COMPACT or CUTLASS_128X4. */
  const int32_t *target_layouts;

  /* TO_BUFFERS, checked as mxfp8_import_destination's fields are (dtypes, exact sizes, contiguous). */
  DLTensor *const *values;        /* NULL, or a NULL entry: that entry's scales only */
  DLTensor *const *scales;        /* required */
  DLTensor *const *global_scales; /* float32, one per amax (the shard's rows for a per-row amax); read at
                                     NVFP4 entries only, required when there is one */

  /* TO_BUCKET: contiguous uint8 of at least the planned size, and the plan of mxfp8_bucket_parts for this
   * desc (each part checked against it: the right size, inside the bucket, apart from the others). */
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
 * *total_bytes are written on success only; a size or padding that does not fit in uint64 fails. Checks
 * what the transfer checks of the sources; touches no tensor memory. */
MXFP8_API mxfp8_status mxfp8_bucket_parts(const mxfp8_transfer_desc *desc, uint64_t alignment,
                                          mxfp8_bucket_part *parts, uint64_t *total_bytes);

/* Checks everything (desc, every source, part, shard, destination, overlap), then moves every entry:
 * values copied, scales moved from where they lie into the target layout in the same pass, NVFP4 amaxes
 * copied into a bucket or turned into global scales in buffers. CUDA: one launch on `stream` (a
 * cudaStream_t; NULL: the legacy default stream) for the whole transfer (a few past several hundred
 * parts), values of 4 MiB or more moved at copy speed as mxfp8_export_bucket says, and (TO_BUFFERS) one
 * small kernel per NVFP4 entry for its global scale; the call does not wait. Host: done on return.
 * count == 0 moves nothing (the desc itself is still checked). When an entry breaks two rules, the first
 * of the list above that applies is the one reported (an NVFP4 shard into DeepGEMM's layout: the NVFP4
 * rule, INVALID_ARGUMENT). */
MXFP8_API mxfp8_status mxfp8_transfer(const mxfp8_transfer_desc *desc, void *stream);

/* The checks of mxfp8_transfer, in the same order with the same status and message; nothing written,
 * nothing kept. Reads buffers' addresses and sizes, never their bytes. With TO_NOTHING: the source side
 * alone (for FROM_BUCKET, what mxfp8_bucket_manifest_check checks). */
MXFP8_API mxfp8_status mxfp8_transfer_check(const mxfp8_transfer_desc *desc);

/* A transfer checked once and kept as its work (see "Prepared exports" for the contract it shares with
 * mxfp8_prepared_export: immutable, thread-safe to run, holds a reference on every source tensor; the
 * bucket's and the buffers' addresses stay yours, keep them in place). */
typedef struct mxfp8_plan mxfp8_plan;

/* mxfp8_transfer's checks, once; *out on success only. TO_NOTHING is refused (there is nothing to run). */
MXFP8_API mxfp8_status mxfp8_transfer_prepare(const mxfp8_transfer_desc *desc, mxfp8_plan **out);
/* Launches the plan on `stream` (as mxfp8_transfer). Fails only for CUDA reasons (and a NULL plan:
 * MXFP8_ERROR_INVALID_ARGUMENT). */
MXFP8_API mxfp8_status mxfp8_plan_run(const mxfp8_plan *plan, void *stream);
/* Drops the plan and its tensor references. NULL is fine; cannot fail. Queued work keeps running:
 * release after it is ordered. */
MXFP8_API void mxfp8_plan_release(mxfp8_plan *plan);

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
 * queued on `options->stream`, plus the parts of values of at least 4 MiB, moved at copy speed: on sm_90
 * and later by one more launch (a bulk-copy pipeline, up to 1000 parts a launch), elsewhere by one
 * cudaMemcpyAsync each (the environment, read once: MXFP8_COPY_ENGINE_MIN_BYTES sets that size, 0 keeps
 * every byte in the kernel; MXFP8_BULK_COPY=0 takes cudaMemcpyAsync on any GPU).
 * `entries` must come from mxfp8_bucket_plan for the same tensors and options (they are checked to lie
 * inside the bucket and not to overlap); the bucket must not overlap any buffer of the tensors.
 * count == 0 is a no-op (every pointer may then be NULL). */
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
   * entry: the whole tensor. NVFP4 entries too ("Resharding" gives their boundaries). */
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
 *           elements) or DeepGEMM's own strided int32 (R, ceil(C/4)) tensor; for
 *           MXFP8_LAYOUT_DEEPGEMM_FLOAT32 also float32 (R * C elements). Every byte is written,
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
 * past several hundred parts) queued on `stream`, values of 4 MiB or more moved on the same stream as
 * mxfp8_export_bucket moves them; the call does not wait. Host: done when the call
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
 * MXFP8_ERROR_UNSUPPORTED: row pieces of a columnwise NVFP4 entry) with mxfp8_last_error() naming the field, the
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
 * (ceil(rows/32), cols) columnwise, exactly the crop of what mxfp8_export_components returns.
 *
 * NVFP4 tensors take shards on the receiver's side (manifest.shards of a bucket entry, and the shards of
 * the direct path, mxfp8_import_tensors_mixed) and, through mxfp8_transfer_desc, on the sender's too (a
 * bucket of NVFP4 shards), in the same logical terms, with NVFP4's blocks of 16 along the stored
 * matrix's rows:
 *   rowwise (stored (M, K)):            col_begin a multiple of 16; col_end a multiple of 16 or K. Rows:
 *                                       any, pieces too.
 *   columnwise (stored (K, M)):         row_begin, row_end multiples of 16 or M (they are stored columns);
 *                                       columns: any (stored rows). Two or more row pieces would be
 *                                       several column windows of the stored matrix:
 *                                       MXFP8_ERROR_UNSUPPORTED (one piece is its range).
 * The shard lands as its stored matrix: rowwise (rows, cols), columnwise (cols, rows), values packed two a
 * byte, E4M3 scales one per 16 along its rows (compact or 128x4, as the whole entry's). A per-tensor amax
 * is the shard's too (its block scales were computed against it): global_scales[i] holds one float. A
 * per-row amax gives the shard's rows' amaxes, piece by piece: global_scales[i] holds `rows` floats. */

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
 * MXFP8_ERROR_UNSUPPORTED. CUDA: one launch for the whole bucket (values of whole-row shards of 4 MiB or more
 * moved as mxfp8_export_bucket moves them). */
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
 * of both outputs are made by one launch on options->stream (values of 4 MiB or more per expert moved as
 * mxfp8_export_bucket moves them). Options, ownership and failures as mxfp8_grouped_export_stacked; count == 0 is an
 * error (there would be no N). `experts` is read during the call only. */
MXFP8_API mxfp8_status mxfp8_grouped_export_experts(const mxfp8_grouped_tensor *grouped, const int32_t *experts,
                                                    size_t count, const mxfp8_export_options *options,
                                                    DLManagedTensorVersioned **values,
                                                    DLManagedTensorVersioned **scales);

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
 * are; manifest.shards takes this receiver's shard of an NVFP4 entry (see "Shards"). CUDA: the values and scales move in the bucket's one launch; the global scales are computed by
 * one more small kernel per NVFP4 entry, queued on the same stream after it (host: done on return). */

/* The direct path with NVFP4 tensors (no bucket): mxfp8_import_tensors where entry i is tensors[i] (an
 * MXFP8 tensor, imported as there) when `tensors` and tensors[i] are set, else nvfp4_tensors[i], whose
 * stored matrix of direction options->direction is read straight from the trainer's storage (e.g. mapped
 * over CUDA IPC): its values copied into destinations[i].values, its E4M3 scales moved from their stored
 * layout (compact, TE-padded or 128x4) into destinations[i].scales in the layout it asks, its amax written
 * to global_scales[i] in the `global_scale` convention (mxfp8_nvfp4_global_scale). destinations[i] and
 * global_scales[i] are checked as for an NVFP4 entry of mxfp8_import_bucket; global_scales has `count`
 * pointers, read at NVFP4 entries only (it may be NULL when none is NVFP4). shards: NULL, or `count`
 * pointers, a NULL one taking the whole tensor: entry i is this receiver's shard of its tensor, as
 * mxfp8_import_tensor_shards takes one of an MXFP8 tensor and as manifest.shards takes one of an NVFP4
 * bucket entry (rows and 16-aligned columns of the logical (M, K); columnwise, 16-aligned rows of M and no
 * row pieces), destinations[i] and global_scales[i] sized for the shard. options->scale_fixup applies to
 * the MXFP8 entries only, and not to shards. Same checks, overlap rules and stream as mxfp8_import_tensors (destinations must
 * not overlap any buffer of any tensor, amax included); the global scales take one more small kernel per
 * NVFP4 entry on CUDA. count == 0 is a no-op. */
MXFP8_API mxfp8_status mxfp8_import_tensors_mixed(const mxfp8_tensor *const *tensors,
                                                  const mxfp8_nvfp4_tensor *const *nvfp4_tensors,
                                                  const mxfp8_shard *const *shards, size_t count,
                                                  const mxfp8_export_options *options,
                                                  const mxfp8_import_destination *destinations,
                                                  DLTensor *const *global_scales, int32_t global_scale);

/* The prepared form (see "Prepared exports"): the plan holds a reference on every tensor of both kinds;
 * the destinations' and global scales' addresses stay yours. options->stream is not used. */
MXFP8_API mxfp8_status mxfp8_prepare_import_tensors_mixed(const mxfp8_tensor *const *tensors,
                                                          const mxfp8_nvfp4_tensor *const *nvfp4_tensors,
                                                          const mxfp8_shard *const *shards, size_t count,
                                                          const mxfp8_export_options *options,
                                                          const mxfp8_import_destination *destinations,
                                                          DLTensor *const *global_scales, int32_t global_scale,
                                                          mxfp8_prepared_export **out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MXFP8_TRANSFER_H_ */
