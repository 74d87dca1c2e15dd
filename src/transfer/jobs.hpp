// The job builders of the transfer, one per destination (desc.cpp hands a read desc to them): tensors
// into a bucket (to_bucket.cpp), tensors or a bucket into caller buffers (to_buffers.cpp); a bucket's parts
// are checked in from_bucket.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mxfp8/mxfp8.h"
#include "api/export_internal.hpp"
#include "core/error.hpp"

namespace mxfp8 {

// The tensors of a transfer from tensors: desc.tensors, handles of either format, with the desc's
// per-entry arrays (directions checked when the desc was read; shards and layouts where they are used).
struct BucketTensors {
  const mxfp8_tensor *const *tensors = nullptr;
  const mxfp8_shard *const *shards = nullptr;  // NULL (or an entry of it NULL): whole tensors
  size_t count = 0;
  const int32_t *directions = nullptr;  // NULL: all rowwise
  const int32_t *layouts = nullptr;     // of each entry's scales where they land; NULL: all compact
  mxfp8_direction direction_of(size_t i) const {
    return static_cast<mxfp8_direction>(directions ? directions[i] : MXFP8_DIRECTION_ROWWISE);
  }
  int32_t layout_of(size_t i) const { return layouts ? layouts[i] : MXFP8_SCALE_LAYOUT_COMPACT; }
};
// The tensors side of a FROM_TENSORS desc (desc.cpp).
BucketTensors tensors_of(const mxfp8_transfer_desc &d);
// Entry i's tensor if it is an NVFP4 one, else NULL (an MXFP8 one); fails when desc.tensors[i] is NULL.
const mxfp8_tensor *nvfp4_entry(const BucketTensors &in, size_t i);
// Every entry set, with data for its direction, all on one device.
void check_tensors(const BucketTensors &in);

// The checks and jobs filling a bucket from tensors (FROM_TENSORS -> TO_BUCKET; any mix of formats,
// directions, shards and scale layouts): every part the size its entry gives, inside the bucket, apart
// from the others and from every source. `scale_fixup` is the desc's (checked when it was read).
ExportJobs tensor_bucket_jobs(const BucketTensors &in, int32_t scale_fixup, const mxfp8_bucket_part *parts,
                              DLTensor *bucket);
// Lays the bucket out (what mxfp8_bucket_parts returns); total_bytes NULL fails.
std::vector<mxfp8_bucket_part> plan_bucket_parts(const BucketTensors &in, int32_t scale_fixup, uint64_t alignment,
                                                 uint64_t *total_bytes);

// Where a TO_BUFFERS transfer writes: the desc's parallel arrays (values optional: a NULL array or entry
// writes that entry's scales only).
struct ImportTargets {
  DLTensor *const *values = nullptr;
  DLTensor *const *scales = nullptr;
  const int32_t *layouts = nullptr;        // NULL: all compact
  DLTensor *const *global_scales = nullptr;  // read at NVFP4 entries; one given at an MXFP8 entry is refused
  struct Entry {
    DLTensor *values, *scales;
    int32_t layout;
  };
  // Fails when the desc gives no scales buffers at all.
  void require() const {
    if (!scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scales is NULL");
  }
  Entry at(size_t i) const {
    return Entry{values ? values[i] : nullptr, scales[i], layouts ? layouts[i] : static_cast<int32_t>(MXFP8_SCALE_LAYOUT_COMPACT)};
  }
};

// TO_BUFFERS (to_buffers.cpp): from a bucket and the desc's manifest arrays, or from tensors (the direct path);
// every check, then the jobs (NVFP4 entries' global scales among them).
ExportJobs import_bucket_jobs(const mxfp8_transfer_desc &d);
ExportJobs import_tensor_jobs(const mxfp8_transfer_desc &d);

}  // namespace mxfp8
