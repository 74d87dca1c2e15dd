// What the single and the batched export share: option checks, the direction lookup, and the job that
// produces one tensor's compact scales.
#pragma once

#include <functional>
#include <vector>

#include "mxfp8/mxfp8.h"
#include "core/dlpack_tensor.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/scale_job.hpp"
#include "core/scale_source.hpp"
#include "api/tensor.hpp"

namespace mxfp8 {

mxfp8_export_options read_options(const mxfp8_export_options *given);
// Fails for a tensor count no caller's array can hold (e.g. SIZE_MAX), before anything is reserved.
void check_count(size_t count);
// A copy from the caller's allocator must not land on the tensor it is made from, nor on `earlier`, a copy
// the same call already made (ignored when NULL or a view). `what` names the copy ("scales", "values").
void check_copy_lands_apart(const mxfp8_tensor &t, const DLManagedTensorVersioned &copy, const char *what = "scales",
                            const DLManagedTensorVersioned *earlier = nullptr);
// Everything one batched or bucket export moves, checked: the jobs and the device they run on. What
// the immediate calls run at once and what mxfp8_prepared_export keeps for later runs.
struct ExportJobs {
  DLDevice device{kDLCPU, 0};
  std::vector<ScaleJob> jobs;
  // The second-level scales an import of NVFP4 entries computes (decode or encode of each amax), run
  // after `jobs`: the one part of a transfer that is arithmetic, not a byte move.
  std::vector<Nvfp4GlobalScaleJob> global_scales;
};
// Runs all of `work` where its memory lives, on `stream`: the jobs, then the global scales.
void run_export_jobs(const ExportJobs &work, void *stream);
// The checks and jobs of mxfp8_export_scales_batched (export_batched.cpp) and mxfp8_export_bucket
// (bucket.cpp); count == 0 gives no jobs.
ExportJobs batched_jobs(const mxfp8_tensor *const *tensors, DLTensor *const *destinations, size_t count,
                        const mxfp8_export_options &options);
// `shards` NULL (or an entry of it NULL): whole tensors.
ExportJobs bucket_jobs(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards, size_t count,
                       const mxfp8_export_options &options,
                       const mxfp8_bucket_entry *entries, DLTensor *bucket);

// The tensors of a bucket or direct import of MXFP8 and NVFP4 entries. For the *_mixed calls entry i is
// tensors[i] when `tensors` and tensors[i] are set, else nvfp4[i]; for the transfer (`desc`) tensors[i]
// is a handle of either format and `nvfp4` is NULL. `shards` NULL (or an entry of it NULL): whole tensors.
struct BucketTensors {
  const mxfp8_tensor *const *tensors = nullptr;
  const mxfp8_nvfp4_tensor *const *nvfp4 = nullptr;
  const mxfp8_shard *const *shards = nullptr;
  size_t count = 0;
  bool mixed = false;  // called as mxfp8_*_mixed (names both arrays in messages)
  bool desc = false;   // called as mxfp8_transfer* (names desc.* in messages)
  // The transfer's per-entry arrays: mxfp8_direction (NULL: the options' one for all) and the
  // mxfp8_layout each entry's scales are written in (NULL: all compact).
  const int32_t *directions = nullptr;
  const int32_t *layouts = nullptr;
  mxfp8_direction direction_of(size_t i, int32_t all) const {
    return static_cast<mxfp8_direction>(directions ? directions[i] : all);
  }
  int32_t layout_of(size_t i) const { return layouts ? layouts[i] : MXFP8_LAYOUT_COMPACT; }
  // How messages name entry i's tensor: "tensors[i]", "nvfp4_tensors[i]" or "desc.tensors[i]".
  const char *tensors_name(bool nvfp4_entry) const {
    return desc ? "desc.tensors" : nvfp4_entry ? "nvfp4_tensors" : "tensors";
  }
};
// Entry i's NVFP4 tensor, or NULL when it is an MXFP8 one (in.tensors[i]); fails unless exactly one is set
// (the transfer: unless tensors[i] is set).
const mxfp8_tensor *nvfp4_entry(const BucketTensors &in, size_t i);
// Entry i's tensor, of either format.
const mxfp8_tensor &entry_tensor(const BucketTensors &in, size_t i);
// Every entry set, of the family its call takes, with data for its direction (`direction` unless the
// entries have their own), all on one device.
void check_tensors(const BucketTensors &in, int32_t direction);

// Where each entry's parts lie in a bucket: the older calls' two arrays (entries, and nvfp4_entries for
// the amax of NVFP4 entries), or the transfer's one (parts).
struct BucketParts {
  const mxfp8_bucket_entry *entries = nullptr;
  const mxfp8_bucket_nvfp4_entry *nvfp4_entries = nullptr;
  const mxfp8_bucket_part *parts = nullptr;
  mxfp8_bucket_part part(size_t i, bool nvfp4) const {
    if (parts) return parts[i];
    const mxfp8_bucket_entry &e = entries[i];
    const bool amax = nvfp4 && nvfp4_entries;
    return mxfp8_bucket_part{e.values_offset, e.values_bytes, e.scales_offset, e.scales_bytes,
                             amax ? nvfp4_entries[i].amax_offset : 0, amax ? nvfp4_entries[i].amax_bytes : 0};
  }
};
// A part's values and scales as the older calls' entry (member by member: no narrowing to refuse when a
// field's type differs, as the ABI gate's scratch build makes it).
inline mxfp8_bucket_entry entry_of(const mxfp8_bucket_part &p) {
  mxfp8_bucket_entry e{};
  e.values_offset = p.values_offset;
  e.values_bytes = p.values_bytes;
  e.scales_offset = p.scales_offset;
  e.scales_bytes = p.scales_bytes;
  return e;
}
// The checks and jobs filling a bucket from tensors (any mix of formats, directions, shards and scale
// layouts): every part the size its entry gives, inside the bucket, apart from the others and from
// every source.
ExportJobs tensor_bucket_jobs(const BucketTensors &in, const mxfp8_export_options &options, const BucketParts &parts,
                              DLTensor *bucket);
// Lays the bucket out (what mxfp8_bucket_parts returns); total_bytes NULL fails.
std::vector<mxfp8_bucket_part> plan_bucket_parts(const BucketTensors &in, const mxfp8_export_options *options,
                                                 uint64_t alignment, uint64_t *total_bytes);
// bucket_jobs for a mixed bucket; `nvfp4_entries` holds the NVFP4 entries' amax parts (NULL when none).
ExportJobs mixed_bucket_jobs(const BucketTensors &in, const mxfp8_export_options &options,
                             const mxfp8_bucket_entry *entries, const mxfp8_bucket_nvfp4_entry *nvfp4_entries,
                             DLTensor *bucket);

// Where an import writes: the older calls' mxfp8_import_destination array, or the transfer's parallel
// arrays (where values are optional: a NULL values array or entry writes that entry's scales only), with
// the names messages give each field.
struct ImportTargets {
  const mxfp8_import_destination *destinations = nullptr;
  DLTensor *const *values = nullptr;
  DLTensor *const *scales = nullptr;
  const int32_t *layouts = nullptr;
  bool desc = false;
  struct Names {
    const char *values, *values_suffix, *values_part, *scales, *scales_suffix, *scales_part, *layouts, *layouts_suffix;
  };
  const Names &names() const {
    static const Names older{"destinations", ".values", "values", "destinations", ".scales", "scales",
                             "destinations", ".scales_layout"};
    static const Names transfer{"desc.values", "", nullptr, "desc.scales", "", nullptr, "desc.target_layouts", ""};
    return desc ? transfer : older;
  }
  bool values_optional() const { return desc; }
  // Fails when the call gave no destinations at all.
  void require() const {
    if (desc ? !scales : !destinations)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, desc ? "desc.scales is NULL" : "destinations is NULL");
  }
  mxfp8_import_destination at(size_t i) const {
    if (!desc) return destinations[i];
    return mxfp8_import_destination{values ? values[i] : nullptr, scales[i],
                                    layouts ? layouts[i] : static_cast<int32_t>(MXFP8_LAYOUT_COMPACT), 0u};
  }
};

// The receiver's import (import.cpp): from a bucket and its manifest, or from tensors (the direct
// path); checks and jobs of mxfp8_import_bucket / mxfp8_import_tensors and their prepared forms.
struct ManifestNames;  // api/bucket_manifest.hpp
ExportJobs import_bucket_jobs(const DLTensor *bucket, const mxfp8_bucket_manifest *manifest,
                              const ImportTargets &targets, const ManifestNames &names);
// The direct import of MXFP8 and NVFP4 tensors (mxfp8_import_tensors_mixed): NVFP4 entry i's global scale
// goes to global_scales[i] in `convention`.
ExportJobs import_mixed_tensor_jobs(const BucketTensors &in, const mxfp8_export_options &options,
                                    const ImportTargets &targets, DLTensor *const *global_scales,
                                    int32_t convention);
// `shards` NULL (or an entry of it NULL): whole tensors.
ExportJobs import_tensor_jobs(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards, size_t count,
                              const mxfp8_export_options &options,
                              const mxfp8_import_destination *destinations);

// A flat copy of `bytes` becomes rows of kCopyRowBytes plus a one-row tail, so that the scale kernel's
// row-segment jobs move it (16 bytes at a time when aligned) in the same launch as the scales.
constexpr int64_t kCopyRowBytes = 4096;
// Appends the jobs that copy `bytes` contiguous bytes from src to dst.
void add_copy_jobs(std::vector<ScaleJob> &jobs, const uint8_t *src, uint8_t *dst, int64_t bytes);

// Strides of a (*lead, C) view over rows that are `row_stride` bytes apart.
std::vector<int64_t> strided_rows(const std::vector<int64_t> &shape, int64_t row_stride);

// One direction's compact scale matrix (dir.scale_rows x dir.scale_cols) as an output of `shape` (its
// leading dimensions may split the rows): a view of the row-major buffer when its rows are adjacent (or
// padded and `padded_scales` asks for a strided view; the view holds owner()), else a contiguous copy made
// by the compact job (crop or unswizzle) on `allocation.stream`, after check_copy(copy) has accepted where
// it landed. What mxfp8_export_components and the NVFP4 export both return.
ManagedPtr export_scale_matrix(const Direction &dir, bool swizzled, DLDevice device, DLDataType dtype,
                               std::vector<int64_t> shape, int32_t padded_scales, const Allocation &allocation,
                               const std::function<KeepAlive()> &owner,
                               const std::function<void(const DLManagedTensorVersioned &)> &check_copy);

// The options of mxfp8_dequantize, which mxfp8_nvfp4_dequantize takes too (dequantize.cpp).
mxfp8_dequantize_options read_dequantize_options(const mxfp8_dequantize_options *given);

// Runs the jobs where `device`'s memory lives: host loops, or one launch on `stream` (a cudaStream_t)
// with `device` current.
void run_jobs_on(DLDevice device, const ScaleJob *jobs, size_t count, void *stream);

}  // namespace mxfp8
