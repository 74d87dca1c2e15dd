/* Each folded 0.1 transfer call as the mxfp8_transfer_desc it is now (see transfer_calls.h). */
#include "transfer_calls.h"

#include <stdio.h>
#include <stdlib.h>

/* A desc and the arrays the translation made for it (freed by release_arrays once the call returned:
 * the library reads a desc's arrays during the call and the preparation only). */
typedef struct {
  mxfp8_transfer_desc desc;
  const mxfp8_tensor **tensors;
  int32_t *directions, *formats, *source_layouts, *e4m3_maxes, *targets;
  mxfp8_bucket_part *parts;
  DLTensor **values, **scales;
  void *stream;
} translated;

/* A test that needs a count no array can hold (SIZE_MAX) calls the library directly: the translation stops. */
static void *array_of(size_t count, size_t size) {
  void *p = calloc(count ? count : 1, size);
  if (!p) {
    fprintf(stderr, "transfer_calls.c: no memory for %zu entries\n", count);
    abort();
  }
  return p;
}

static void release_arrays(translated *t) {
  free((void *)t->tensors);
  free(t->directions);
  free(t->formats);
  free(t->source_layouts);
  free(t->e4m3_maxes);
  free(t->targets);
  free(t->parts);
  free(t->values);
  free(t->scales);
}

static void from_tensors(translated *t, const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                         const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options) {
  const mxfp8_transfer_desc init = MXFP8_TRANSFER_DESC_INIT;
  *t = (translated){0};
  t->desc = init;
  t->desc.source = MXFP8_TRANSFER_FROM_TENSORS;
  t->desc.count = count;
  t->desc.shards = shards;
  const int32_t direction = options ? options->direction : MXFP8_DIRECTION_ROWWISE;
  if (options) {
    t->desc.scale_fixup = options->scale_fixup;
    t->stream = options->stream;
  }
  t->directions = array_of(count, sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) t->directions[i] = direction;
  t->desc.directions = t->directions;
  if (tensors || nvfp4) {
    t->tensors = array_of(count, sizeof(mxfp8_tensor *));
    for (size_t i = 0; i < count; ++i)
      t->tensors[i] = (tensors && tensors[i]) ? tensors[i] : nvfp4 ? (const mxfp8_tensor *)nvfp4[i] : NULL;
    t->desc.tensors = t->tensors;
  }
}

/* Merges the two halves of a 0.1 bucket plan into the desc's parts (NULL entries: NULL parts). */
static const mxfp8_bucket_part *parts_of(translated *t, size_t count, const bucket_entry *entries,
                                         const bucket_nvfp4_entry *nvfp4_entries) {
  if (!entries) return NULL;
  t->parts = array_of(count, sizeof(mxfp8_bucket_part));
  for (size_t i = 0; i < count; ++i) {
    mxfp8_bucket_part *p = &t->parts[i];
    p->values_offset = entries[i].values_offset;
    p->values_bytes = entries[i].values_bytes;
    p->scales_offset = entries[i].scales_offset;
    p->scales_bytes = entries[i].scales_bytes;
    if (nvfp4_entries) {
      p->amax_offset = nvfp4_entries[i].amax_offset;
      p->amax_bytes = nvfp4_entries[i].amax_bytes;
    }
  }
  return t->parts;
}

static void to_buffers(translated *t, const import_destination *destinations, size_t count) {
  t->desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
  if (!destinations) return; /* values, scales and layouts NULL: the library names desc.scales */
  t->values = array_of(count, sizeof(DLTensor *));
  t->scales = array_of(count, sizeof(DLTensor *));
  t->targets = array_of(count, sizeof(int32_t));
  for (size_t i = 0; i < count; ++i) {
    t->values[i] = destinations[i].values;
    t->scales[i] = destinations[i].scales;
    t->targets[i] = destinations[i].scales_layout;
  }
  t->desc.values = t->values;
  t->desc.scales = t->scales;
  t->desc.target_layouts = t->targets;
}

/* Runs, or prepares into *out; then frees what the translation made. */
static mxfp8_status finish(translated *t, mxfp8_plan **out) {
  const mxfp8_status s = out ? mxfp8_transfer_prepare(&t->desc, out) : mxfp8_transfer(&t->desc, t->stream);
  release_arrays(t);
  return s;
}

mxfp8_status folded_bucket_plan(const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                                const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options,
                                uint64_t alignment, bucket_entry *entries, bucket_nvfp4_entry *nvfp4_entries,
                                uint64_t *total_bytes) {
  translated t;
  from_tensors(&t, tensors, nvfp4, shards, count, options);
  t.desc.destination = MXFP8_TRANSFER_TO_BUCKET;
  mxfp8_bucket_part *parts = entries ? array_of(count, sizeof(mxfp8_bucket_part)) : NULL;
  const mxfp8_status s = mxfp8_bucket_parts(&t.desc, alignment, parts, total_bytes);
  if (s == MXFP8_OK) {
    for (size_t i = 0; i < count; ++i) {
      entries[i] = (bucket_entry){parts[i].values_offset, parts[i].values_bytes, parts[i].scales_offset,
                                  parts[i].scales_bytes};
      if (nvfp4_entries) nvfp4_entries[i] = (bucket_nvfp4_entry){parts[i].amax_offset, parts[i].amax_bytes, 0};
    }
  }
  free(parts);
  release_arrays(&t);
  return s;
}

mxfp8_status folded_export_bucket(const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                                  const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options,
                                  const bucket_entry *entries, const bucket_nvfp4_entry *nvfp4_entries,
                                  DLTensor *bucket, mxfp8_plan **out) {
  translated t;
  from_tensors(&t, tensors, nvfp4, shards, count, options);
  t.desc.destination = MXFP8_TRANSFER_TO_BUCKET;
  t.desc.bucket_out = bucket;
  t.desc.parts_out = parts_of(&t, count, entries, nvfp4_entries);
  return finish(&t, out);
}

mxfp8_status folded_import_tensors(const mxfp8_tensor *const *tensors, const mxfp8_tensor *const *nvfp4,
                                   const mxfp8_shard *const *shards, size_t count, const mxfp8_export_options *options,
                                   const import_destination *destinations, DLTensor *const *global_scales,
                                   int32_t global_scale, mxfp8_plan **out) {
  translated t;
  from_tensors(&t, tensors, nvfp4, shards, count, options);
  to_buffers(&t, destinations, count);
  t.desc.global_scales = global_scales;
  t.desc.global_scale = global_scale;
  return finish(&t, out);
}

mxfp8_status folded_prepare_scales_batched(const mxfp8_tensor *const *tensors, DLTensor *const *destinations,
                                           size_t count, const mxfp8_export_options *options, mxfp8_plan **out) {
  translated t;
  from_tensors(&t, tensors, NULL, NULL, count, options);
  t.desc.destination = MXFP8_TRANSFER_TO_BUFFERS;
  t.desc.scales = destinations;
  return finish(&t, out);
}

/* The manifest's arrays as the desc's (formats and layouts filled with their 0.1 defaults). */
static void from_manifest(translated *t, const DLTensor *bucket, const bucket_manifest *m) {
  const mxfp8_transfer_desc init = MXFP8_TRANSFER_DESC_INIT;
  *t = (translated){0};
  t->desc = init;
  t->desc.source = MXFP8_TRANSFER_FROM_BUCKET;
  const size_t n = m->count;
  t->desc.count = n;
  t->desc.bucket_in = bucket;
  t->desc.parts_in = parts_of(t, n, m->entries, m->nvfp4_entries);
  t->formats = array_of(n, sizeof(int32_t));
  t->source_layouts = array_of(n, sizeof(int32_t));
  t->e4m3_maxes = array_of(n, sizeof(int32_t));
  for (size_t i = 0; i < n; ++i) {
    t->formats[i] = m->formats ? m->formats[i] : MXFP8_FORMAT_E4M3;
    t->source_layouts[i] = m->scales_layouts ? m->scales_layouts[i] : MXFP8_SCALE_LAYOUT_COMPACT;
    t->e4m3_maxes[i] = m->nvfp4_entries ? m->nvfp4_entries[i].e4m3_max : 0;
  }
  t->desc.formats = t->formats;
  t->desc.source_layouts = t->source_layouts;
  t->desc.e4m3_maxes = t->e4m3_maxes;
  t->desc.ndims = m->ndims;
  t->desc.shapes = m->shapes;
  t->desc.directions = m->directions;
  t->desc.scales_ndims = m->scales_ndims;
  t->desc.scales_shapes = m->scales_shapes;
  t->desc.shards = m->shards;
  t->desc.scale_fixup = m->scale_fixup;
}

mxfp8_status folded_import_bucket(const DLTensor *bucket, const bucket_manifest *manifest,
                                  const import_destination *destinations, void *stream, mxfp8_plan **out) {
  if (!manifest) return out ? mxfp8_transfer_prepare(NULL, out) : mxfp8_transfer(NULL, stream);
  translated t;
  from_manifest(&t, bucket, manifest);
  to_buffers(&t, destinations, manifest->count);
  t.desc.global_scales = manifest->global_scales;
  t.desc.global_scale = manifest->global_scale;
  t.stream = stream;
  return finish(&t, out);
}

mxfp8_status folded_manifest_check(const DLTensor *bucket, const bucket_manifest *manifest) {
  if (!manifest) return mxfp8_transfer_check(NULL);
  translated t;
  from_manifest(&t, bucket, manifest);
  t.desc.destination = MXFP8_TRANSFER_TO_NOTHING;
  const mxfp8_status s = mxfp8_transfer_check(&t.desc);
  release_arrays(&t);
  return s;
}
