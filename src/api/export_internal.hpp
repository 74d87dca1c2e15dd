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
// For the calls that take mxfp8_export_options but export whole tensors (`call` names the call): a set
// options.shard is a choice they cannot honour, refused rather than ignored.
void refuse_shard(const mxfp8_export_options &o, const char *call);
// Fails for a tensor count no caller's array can hold (e.g. SIZE_MAX), before anything is reserved.
void check_count(size_t count);
// A copy from the caller's allocator must not land on the tensor it is made from, nor on `earlier`, a copy
// the same call already made (ignored when NULL or a view). `what` names the copy ("scales", "values").
void check_copy_lands_apart(const mxfp8_tensor &t, const DLManagedTensorVersioned &copy, const char *what = "scales",
                            const DLManagedTensorVersioned *earlier = nullptr);
// Everything one batched export or transfer moves, checked: the jobs and the device they run on. What
// the immediate calls run at once and what an mxfp8_plan keeps for later runs.
struct ExportJobs {
  DLDevice device{kDLCPU, 0};
  std::vector<ScaleJob> jobs;
  // The second-level scales an import of NVFP4 entries computes (decode or encode of each amax), run
  // after `jobs`: the one part of a transfer that is arithmetic, not a byte move.
  std::vector<Nvfp4GlobalScaleJob> global_scales;
};
// Runs all of `work` where its memory lives, on `stream`: the jobs, then the global scales.
void run_export_jobs(const ExportJobs &work, void *stream);
// The checks and jobs of mxfp8_export_scales_batched (export_batched.cpp); count == 0 gives no jobs.
ExportJobs batched_jobs(const mxfp8_tensor *const *tensors, DLTensor *const *destinations, size_t count,
                        const mxfp8_export_options &options);

// A flat copy of `bytes` becomes rows of kCopyRowBytes plus a one-row tail, so that the scale kernel's
// row-segment jobs move it (16 bytes at a time when aligned) in the same launch as the scales.
constexpr int64_t kCopyRowBytes = 4096;
// The jobs that copy `bytes` contiguous bytes from src to dst, written to `parts`: returns how many (0 to 2).
size_t copy_jobs(const uint8_t *src, uint8_t *dst, int64_t bytes, ScaleJob parts[2]);
// Appends those jobs.
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

// The options of mxfp8_dequantize, either format (dequantize.cpp).
mxfp8_dequantize_options read_dequantize_options(const mxfp8_dequantize_options *given);

// Runs the jobs where `device`'s memory lives: host loops, or one launch on `stream` (a cudaStream_t)
// with `device` current.
void run_jobs_on(DLDevice device, const ScaleJob *jobs, size_t count, void *stream);

}  // namespace mxfp8
