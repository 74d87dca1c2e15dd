/* The per-combination transfer calls of 0.1 (mxfp8_bucket_plan, mxfp8_export_bucket, mxfp8_import_bucket,
 * mxfp8_import_tensors, their _shards / _mixed / prepare_ forms) folded into mxfp8_transfer_desc in 0.2.
 * Many tests were written against them, and what they check (every bucket, import, shard and NVFP4 rule)
 * still holds through the transfer. So each folded call is written here ONCE as the desc it is now, with
 * the argument shapes those tests use, and the tests call folded_*() instead: the library sees nothing
 * but mxfp8_bucket_parts, mxfp8_transfer, mxfp8_transfer_check and mxfp8_transfer_prepare. This file is
 * also the migration table CHANGELOG points to: each function is how one old call reads as a desc.
 *
 * Nothing here checks an argument: a NULL array is passed on as the desc's NULL field, so the library's
 * refusal (naming desc.*) is what a test sees. What the old calls checked that the desc no longer has
 * (an options or manifest struct_size, a granularity) has nothing to translate into and is not tested. */
#ifndef MXFP8_TRANSFER_CALLS_H_
#define MXFP8_TRANSFER_CALLS_H_

#include <mxfp8/mxfp8.h>

/* Where one entry's values and scales sit in a bucket (the first four fields of mxfp8_bucket_part). */
typedef struct {
  uint64_t values_offset, values_bytes;
  uint64_t scales_offset, scales_bytes;
} bucket_entry;

/* Where an NVFP4 entry's amax sits, and its E4M3_MAX (the desc's e4m3_maxes[i] on the receiving side;
 * a plan leaves it 0: the sender knows it from its tensor). All zero for an MXFP8 entry. */
typedef struct {
  uint64_t amax_offset, amax_bytes;
  int32_t e4m3_max;
} bucket_nvfp4_entry;

/* What a receiver knows of a bucket, as the 0.1 manifest said it; becomes a FROM_BUCKET desc's arrays.
 * formats NULL: all E4M3; scales_layouts NULL: all compact (the desc requires both, so they are filled). */
typedef struct {
  size_t count;
  const bucket_entry *entries;
  const int32_t *ndims;
  const int64_t *const *shapes;
  const int32_t *formats;
  const int32_t *directions;
  const int32_t *scales_layouts;
  int32_t scale_fixup;
  const mxfp8_shard *const *shards;
  const bucket_nvfp4_entry *nvfp4_entries;
  DLTensor *const *global_scales;
  int32_t global_scale;
  const int32_t *scales_ndims;
  const int64_t *const *scales_shapes;
} bucket_manifest;

#define BUCKET_MANIFEST_INIT {0, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL, NULL, NULL, 0, NULL, NULL}

/* One entry's destination buffers: the desc's values[i], scales[i], target_layouts[i]. */
typedef struct {
  DLTensor *values;
  DLTensor *scales;
  int32_t scales_layout;
} import_destination;

/* Entries from tensors: `tensors` (MXFP8) and `nvfp4` (NVFP4 handles, cast) are merged entry by entry,
 * the first non-NULL of the two (either array may be NULL); every entry in options->direction with
 * options->scale_fixup (NULL options: rowwise, none); shards NULL or one per entry. The CUDA stream of
 * an immediate call is options->stream. */

/* mxfp8_bucket_parts; entries / nvfp4_entries (NULL allowed when no entry is NVFP4) and *total_bytes
 * written on success only. */
mxfp8_status folded_bucket_plan(const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                                const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options,
                                uint64_t alignment, bucket_entry *entries, bucket_nvfp4_entry *nvfp4_entries,
                                uint64_t *total_bytes);

/* FROM_TENSORS -> TO_BUCKET at the parts `entries` (+ nvfp4_entries) say. out NULL: mxfp8_transfer;
 * otherwise mxfp8_transfer_prepare into *out. */
mxfp8_status folded_export_bucket(const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                                  const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options,
                                  const bucket_entry *entries, const bucket_nvfp4_entry *nvfp4_entries,
                                  DLTensor *bucket, mxfp8_plan **out);

/* FROM_TENSORS -> TO_BUFFERS (global_scales NULL when no entry is NVFP4). out as above. */
mxfp8_status folded_import_tensors(const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                                   const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options,
                                   const import_destination *destinations, DLTensor *const *global_scales,
                                   int32_t global_scale, mxfp8_plan **out);

/* mxfp8_prepare_scales_batched: FROM_TENSORS -> TO_BUFFERS, compact scales only (values NULL). */
mxfp8_status folded_prepare_scales_batched(const mxfp8_tensor *const *tensors, DLTensor *const *destinations,
                                           size_t count, const mxfp8_export_options *options, mxfp8_plan **out);

/* FROM_BUCKET -> TO_BUFFERS (a NULL manifest is a NULL desc). out NULL: mxfp8_transfer on `stream`. */
mxfp8_status folded_import_bucket(const DLTensor *bucket, const bucket_manifest *manifest,
                                  const import_destination *destinations, void *stream, mxfp8_plan **out);

/* FROM_BUCKET -> TO_NOTHING: mxfp8_transfer_check. */
mxfp8_status folded_manifest_check(const DLTensor *bucket, const bucket_manifest *manifest);

#endif /* MXFP8_TRANSFER_CALLS_H_ */
