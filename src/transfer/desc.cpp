// The transfer description (transfer.h), read once and handed to the job builder of its destination:
// tensors into a bucket (to_bucket.cpp), tensors or a bucket into caller buffers (to_buffers.cpp), a
// bucket (from_bucket.cpp) or tensors checked alone. This file is the one place that
// says which source goes to which destination, and which desc arrays each of them reads.
#include "transfer/desc.hpp"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "transfer/from_bucket.hpp"
#include "transfer/jobs.hpp"
#include "api/export_internal.hpp"
#include "core/error.hpp"
#include "core/indexed_name.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {
namespace {

const char *source_name(int32_t source) {
  return source == MXFP8_TRANSFER_FROM_TENSORS ? "MXFP8_TRANSFER_FROM_TENSORS" : "MXFP8_TRANSFER_FROM_BUCKET";
}

const char *destination_name(int32_t destination) {
  switch (destination) {
    case MXFP8_TRANSFER_TO_BUFFERS: return "MXFP8_TRANSFER_TO_BUFFERS";
    case MXFP8_TRANSFER_TO_BUCKET: return "MXFP8_TRANSFER_TO_BUCKET";
    default: return "MXFP8_TRANSFER_TO_NOTHING";
  }
}

// An array the chosen source or destination does not read must not be set: a caller who filled
// `values` for a TO_BUCKET transfer (or `shapes` for one FROM_TENSORS) meant another transfer.
void refuse_unread(const void *field, const char *name, const mxfp8_transfer_desc &d, bool by_destination) {
  if (field)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.", name, " is set, but a transfer ",
         by_destination ? "to " : "from ", by_destination ? destination_name(d.destination) : source_name(d.source),
         " does not read it: leave it NULL");
}

}  // namespace

BucketTensors tensors_of(const mxfp8_transfer_desc &d) {
  BucketTensors in;
  in.tensors = d.tensors;
  in.shards = d.shards;
  in.count = d.count;
  in.directions = d.directions;
  in.layouts = d.target_layouts;
  return in;
}

mxfp8_transfer_desc read_transfer_desc(const mxfp8_transfer_desc *given, TransferVerb verb) {
  if (!given) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc is NULL");
  const mxfp8_transfer_desc defaults = MXFP8_TRANSFER_DESC_INIT;
  const mxfp8_transfer_desc d =
      read_sized_struct(given, defaults, sizeof(mxfp8_transfer_desc), "desc", "MXFP8_TRANSFER_DESC_INIT");
  if (d.reserved != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.reserved is ", d.reserved, ", must be 0");
  check_enum(d.source, "desc.source",
             {{MXFP8_TRANSFER_FROM_TENSORS, "MXFP8_TRANSFER_FROM_TENSORS"},
              {MXFP8_TRANSFER_FROM_BUCKET, "MXFP8_TRANSFER_FROM_BUCKET"}});
  check_enum(d.destination, "desc.destination",
             {{MXFP8_TRANSFER_TO_BUFFERS, "MXFP8_TRANSFER_TO_BUFFERS"},
              {MXFP8_TRANSFER_TO_BUCKET, "MXFP8_TRANSFER_TO_BUCKET"},
              {MXFP8_TRANSFER_TO_NOTHING, "MXFP8_TRANSFER_TO_NOTHING"}});
  zero_as_one(d.scale_fixup, "desc.scale_fixup");
  check_enum(d.global_scale, "desc.global_scale",
             {{MXFP8_NVFP4_GLOBAL_SCALE_DECODE, "MXFP8_NVFP4_GLOBAL_SCALE_DECODE"},
              {MXFP8_NVFP4_GLOBAL_SCALE_ENCODE, "MXFP8_NVFP4_GLOBAL_SCALE_ENCODE"}});
  check_count(d.count);
  // Read here once for every source and destination (the job builders take them as checked).
  for (size_t i = 0; d.directions && i < d.count; ++i)
    check_enum(d.directions[i], IndexedName("desc.directions", i),
               {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});

  // Which verb may take which destination, and the one pair no verb takes.
  if (d.destination == MXFP8_TRANSFER_TO_NOTHING && verb != TransferVerb::Check)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.destination is MXFP8_TRANSFER_TO_NOTHING: only mxfp8_transfer_check "
         "takes it (there is nothing to move)");
  if (verb == TransferVerb::PlanBucket &&
      (d.source != MXFP8_TRANSFER_FROM_TENSORS || d.destination != MXFP8_TRANSFER_TO_BUCKET))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_bucket_parts lays out a MXFP8_TRANSFER_FROM_TENSORS, "
         "MXFP8_TRANSFER_TO_BUCKET transfer; desc says ", source_name(d.source), ", ", destination_name(d.destination));
  if (d.source == MXFP8_TRANSFER_FROM_BUCKET && d.destination == MXFP8_TRANSFER_TO_BUCKET)
    fail(MXFP8_ERROR_UNSUPPORTED, "a transfer from a bucket to a bucket is not offered: import the bucket "
         "(MXFP8_TRANSFER_TO_BUFFERS), or describe its tensors with mxfp8_tensor_create and bucket those");

  // Each array belongs to one source or one destination; the others must stay NULL.
  const bool tensors = d.source == MXFP8_TRANSFER_FROM_TENSORS;
  if (tensors) {
    for (const auto &[field, name] : {std::pair<const void *, const char *>{d.bucket_in, "bucket_in"},
                                      {d.parts_in, "parts_in"}, {d.ndims, "ndims"}, {d.shapes, "shapes"},
                                      {d.formats, "formats"}, {d.source_layouts, "source_layouts"},
                                      {d.e4m3_maxes, "e4m3_maxes"}, {d.scales_ndims, "scales_ndims"},
                                      {d.scales_shapes, "scales_shapes"}})
      refuse_unread(field, name, d, false);
  } else {
    refuse_unread(d.tensors, "tensors", d, false);
  }
  const bool buffers = d.destination == MXFP8_TRANSFER_TO_BUFFERS, bucket = d.destination == MXFP8_TRANSFER_TO_BUCKET;
  if (!buffers) {
    refuse_unread(d.values, "values", d, true);
    refuse_unread(d.scales, "scales", d, true);
    refuse_unread(d.global_scales, "global_scales", d, true);
  }
  if (!bucket) {
    refuse_unread(d.bucket_out, "bucket_out", d, true);
    refuse_unread(d.parts_out, "parts_out", d, true);
  }
  if (!buffers && !bucket) refuse_unread(d.target_layouts, "target_layouts", d, true);
  return d;
}

namespace {

// The checks and jobs of the destination the desc names (the source's builder for it).
ExportJobs jobs_for_destination(const mxfp8_transfer_desc &d) {
  if (d.source == MXFP8_TRANSFER_FROM_TENSORS) {
    if (d.destination == MXFP8_TRANSFER_TO_BUCKET) {
      if (d.count > 0 && !d.parts_out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_out is NULL");
      return tensor_bucket_jobs(tensors_of(d), d.scale_fixup, d.parts_out, d.bucket_out);
    }
    if (d.destination == MXFP8_TRANSFER_TO_BUFFERS) return import_tensor_jobs(d);
    // TO_NOTHING: every entry planned into a bucket no one fills runs every check of the source side.
    uint64_t total = 0;
    plan_bucket_parts(tensors_of(d), d.scale_fixup, 1, &total);
    return ExportJobs{};
  }
  if (d.destination == MXFP8_TRANSFER_TO_BUFFERS) return import_bucket_jobs(d);
  check_bucket_manifest(d);  // TO_NOTHING
  return ExportJobs{};
}

}  // namespace

ExportJobs transfer_jobs(const mxfp8_transfer_desc &d) {
  ExportJobs work = jobs_for_destination(d);
  coalesce_jobs(work.jobs);  // once, so a plan runs the merged jobs at every step
  return work;
}

}  // namespace mxfp8
