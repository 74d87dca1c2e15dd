// What the single and the batched export share: option checks, the direction lookup, and the job that
// produces one tensor's compact scales.
#pragma once

#include "mxfp8/mxfp8.h"
#include "scale_copy.hpp"
#include "scale_source.hpp"
#include "tensor.hpp"

namespace mxfp8 {

mxfp8_export_options read_options(const mxfp8_export_options *given);
// Fails for a tensor count no caller's array can hold (e.g. SIZE_MAX), before anything is reserved.
void check_count(size_t count);
// Fails with MXFP8_ERROR_MISSING_DATA when the tensor has no data for `direction`.
const Direction &require_direction(const mxfp8_tensor &t, mxfp8_direction direction);
// Where the stored scales of `direction` are.
ScaleSource scale_source(const mxfp8_tensor &t, mxfp8_direction direction);
// The job writing the compact R x C scales of `direction` to dst_data (row-major, row stride C).
ScaleJob compact_scales_job(const mxfp8_tensor &t, mxfp8_direction direction, uint8_t *dst_data);
// Runs the jobs where `device`'s memory lives: host loops, or one launch on `stream` (a cudaStream_t)
// with `device` current.
void run_jobs_on(DLDevice device, const ScaleJob *jobs, size_t count, void *stream);

}  // namespace mxfp8
