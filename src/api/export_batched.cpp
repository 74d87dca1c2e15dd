// mxfp8_export_scales_batched: many tensors' compact scales into caller-owned buffers, all checked
// first, then produced in one launch.
#include <vector>

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "api/export_internal.hpp"
#include "core/memory_span.hpp"
#include "core/shape.hpp"

namespace mxfp8 {

ExportJobs batched_jobs(const mxfp8_tensor *const *tensors, DLTensor *const *destinations, size_t count,
                        const mxfp8_export_options &o) {
  if (o.scales_granularity != MXFP8_SCALES_PER_32)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "mxfp8_export_scales_batched exports the stored per-32 scales: "
         "options.scales_granularity must be MXFP8_SCALES_PER_32");
  ExportJobs result;
  if (count == 0) return result;
  if (!tensors) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors is NULL");
  if (!destinations) fail(MXFP8_ERROR_INVALID_ARGUMENT, "destinations is NULL");
  check_count(count);
  const auto direction = static_cast<mxfp8_direction>(o.direction);
  std::vector<ScaleJob> &jobs = result.jobs;
  jobs.reserve(count);
  std::vector<Span> spans;  // every destination and every buffer of every tensor
  spans.reserve(5 * count);
  DLDevice &device = result.device;
  for (size_t i = 0; i < count; ++i) {
    const mxfp8_tensor *t = tensors[i];
    DLTensor *dst = destinations[i];
    if (!t) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors[", i, "] is NULL");
    if (!dst) fail(MXFP8_ERROR_INVALID_ARGUMENT, "destinations[", i, "] is NULL");
    if (i == 0) device = t->device;
    if (!same_device(t->device, device))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors[", i, "] is on ", format_device(t->device), " but tensors[0] is on ",
           format_device(device), ": one batch runs on one device");
    const Direction &dir = require_direction(*t, direction, false, "tensors", i);
    const int64_t needed = dir.scale_rows * dir.scale_cols;
    uint8_t *out = expect_indexed_buffer(*dst, {"destinations", Holds::ScaleBytes, 0, &device, "the tensors are", needed}, i);
    add_read_spans(*t, i, "tensors", spans);
    add_span(spans, out, static_cast<uint64_t>(needed), "destinations", i, true);
    // An empty matrix moves nothing, however many rows it has: no job, so no loop over its rows. Merged as
    // it is appended (the list coalesce_jobs makes): the experts of a grouped tensor exported back to back
    // are one job, and a job merged is never copied into the list.
    if (needed > 0)
      append_coalesced(jobs, scale_job(dir.source, MXFP8_SCALE_LAYOUT_COMPACT, direction == MXFP8_DIRECTION_COLUMNWISE,
                                       out, o.scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE));
  }
  check_no_overlap(spans);
  return result;
}

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_export_scales_batched(const mxfp8_tensor *const *tensors,
                                                              DLTensor *const *destinations, size_t count,
                                                              const mxfp8_export_options *options) {
  return guarded([&] {
    const mxfp8_export_options o = read_options(options);
    refuse_shard(o, "mxfp8_export_scales_batched");
    const ExportJobs work = batched_jobs(tensors, destinations, count, o);
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), o.stream);
  });
}
