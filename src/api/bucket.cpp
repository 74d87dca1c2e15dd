// Buckets: many tensors' values (copied) and compact scales (unswizzled or cropped in place) packed into
// one caller buffer, planned on the host and filled in one launch.
#include <algorithm>
#include <vector>

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/indexed_name.hpp"
#include "api/export_internal.hpp"
#include "core/memory_span.hpp"
#include "core/shape.hpp"
#include "api/shard.hpp"

namespace mxfp8 {
namespace {

struct Part {
  uint64_t offset, bytes;
  const char *what;  // "values" or "scales"
};

void check_tensors(const mxfp8_tensor *const *tensors, size_t count, mxfp8_direction direction) {
  if (count > 0 && !tensors) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors is NULL");
  check_count(count);
  for (size_t i = 0; i < count; ++i) {
    if (!tensors[i]) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors[", i, "] is NULL");
    require_direction(*tensors[i], direction);
    if (!same_device(tensors[i]->device, tensors[0]->device))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors[", i, "] is on ", format_device(tensors[i]->device),
           " but tensors[0] is on ", format_device(tensors[0]->device), ": one bucket lives on one device");
  }
}

// Entry i's shard of tensors[i] (the whole tensor when `shards` or shards[i] is NULL), checked.
Shard shard_of(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards, size_t i, mxfp8_direction direction) {
  // The name is formatted without snprintf or allocation: this runs once per tensor of a whole model.
  return resolve_shard(shards ? shards[i] : nullptr, tensors[i]->rows, tensors[i]->cols,
                       direction == MXFP8_DIRECTION_COLUMNWISE, IndexedName("shards", i));
}

// The fix-up rewrites whole tensors' scales only (a shard's are carried as stored): the plan refuses the
// combination as the export and the preparation do, so a bucket is never planned that cannot be filled.
void check_shard_fixup(const mxfp8_export_options &o, const mxfp8_shard *const *shards, size_t i) {
  if (shards && shards[i] && o.scale_fixup != MXFP8_SCALE_FIXUP_NONE)
    fail(MXFP8_ERROR_UNSUPPORTED, "options.scale_fixup is ", o.scale_fixup, " and shards[", i, "] is set: the "
         "shards of a bucket carry their scale bytes as stored (MXFP8_SCALE_FIXUP_NONE)");
}

mxfp8_export_options bucket_options(const mxfp8_export_options *given) {
  const mxfp8_export_options o = read_options(given);
  if (o.scales_granularity != MXFP8_SCALES_PER_32)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "buckets carry the stored per-32 scales: options.scales_granularity must be "
         "MXFP8_SCALES_PER_32");
  return o;
}

}  // namespace

ExportJobs bucket_jobs(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards, size_t count,
                       const mxfp8_export_options &options, const mxfp8_bucket_entry *entries, DLTensor *bucket) {
  const mxfp8_export_options o = bucket_options(&options);
  const auto direction = static_cast<mxfp8_direction>(o.direction);
  ExportJobs result;
  // count == 0 needs nothing else, as for mxfp8_export_scales_batched.
  if (count == 0) return result;
  if (!entries) fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries is NULL");
  if (!bucket) fail(MXFP8_ERROR_INVALID_ARGUMENT, "bucket is NULL");
  check_tensors(tensors, count, direction);
  uint8_t *base = expect_buffer(*bucket, {"bucket", Holds::Bytes, 0, &tensors[0]->device, "the tensors are", -1});
  const int64_t size = checked_numel(*bucket, "bucket");

  // Every part where the plan put it: the right size, inside the bucket, overlapping no other part.
  std::vector<Span> parts;
  parts.reserve(2 * count);
  std::vector<Shard> planned;
  planned.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const mxfp8_bucket_entry &e = entries[i];
    const Shard &sh = planned.emplace_back(shard_of(tensors, shards, i, direction));
    const auto values = static_cast<uint64_t>(sh.values_bytes()), scales = static_cast<uint64_t>(sh.scales_bytes());
    if (e.values_bytes != values || e.scales_bytes != scales)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries[", i, "] gives ", e.values_bytes, " value and ", e.scales_bytes,
           " scale bytes, ", shards && shards[i] ? "the shard of " : "", "tensors[", i, "] has ", values, " and ", scales,
           ": plan the bucket with ", shards ? "mxfp8_bucket_plan_shards for these tensors, shards" : "mxfp8_bucket_plan for these tensors",
           " and options");
    for (const Part p : {Part{e.values_offset, e.values_bytes, "values"},
                         Part{e.scales_offset, e.scales_bytes, "scales"}}) {
      if (p.offset > static_cast<uint64_t>(size))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries[", i, "]: its ", p.what, " start at byte ", p.offset,
             ", past the end of a bucket of ", size, " bytes");
      if (p.bytes > static_cast<uint64_t>(size) - p.offset)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries[", i, "]: its ", p.bytes, " bytes of ", p.what, " at byte ",
             p.offset, " run past the end of a bucket of ", size, " bytes");
      // Offsets as addresses: the parts are the outputs, each must have bytes of its own.
      parts.push_back(Span{static_cast<uintptr_t>(p.offset), p.bytes, "entries", i, true, p.what});
    }
  }
  check_no_overlap(parts);

  // The bucket is written, so it must not hold any byte of a tensor it is filled from.
  std::vector<Span> spans{span_of(base, size, "bucket", kNoIndex, true)};
  for (size_t i = 0; i < count; ++i) add_read_spans(*tensors[i], i, "tensors", spans);
  check_no_overlap(spans);

  result.device = bucket->device;
  std::vector<ScaleJob> &jobs = result.jobs;
  jobs.reserve(3 * count);
  for (size_t i = 0; i < count; ++i) {
    const mxfp8_tensor &t = *tensors[i];
    const Direction &dir = t.directions[direction];
    if (!shards || !shards[i]) {  // the whole tensor: its scales written by the fastest job, fixed up if asked
      add_copy_jobs(jobs, byte_pointer(dir.data->dl_tensor), base + entries[i].values_offset,
                    static_cast<int64_t>(entries[i].values_bytes));
      if (entries[i].scales_bytes > 0)
        jobs.push_back(scale_job(dir.source, MXFP8_LAYOUT_COMPACT, direction == MXFP8_DIRECTION_COLUMNWISE,
                                 base + entries[i].scales_offset, o.scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE));
      continue;
    }
    check_shard_fixup(o, shards, i);
    add_shard_value_jobs(jobs, byte_pointer(dir.data->dl_tensor), t.cols, planned[i], base + entries[i].values_offset);
    add_shard_scale_jobs(jobs, dir.source, planned[i], base + entries[i].scales_offset);
  }
  return result;
}

namespace {

void plan_bucket(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards, size_t count,
                 const mxfp8_export_options *options, uint64_t alignment, mxfp8_bucket_entry *entries,
                 uint64_t *total_bytes) {
  const mxfp8_export_options o = bucket_options(options);
  const auto direction = static_cast<mxfp8_direction>(o.direction);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "alignment is ", alignment, ", expected a power of two");
  if (count > 0 && !entries) fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries is NULL");
  if (!total_bytes) fail(MXFP8_ERROR_INVALID_ARGUMENT, "total_bytes is NULL");
  check_tensors(tensors, count, direction);
  std::vector<mxfp8_bucket_entry> planned(count);
  uint64_t at = 0;
  auto place = [&](uint64_t bytes) {
    // Rounding up to `alignment` can wrap as surely as the sum can (alignment 2^63).
    if (__builtin_add_overflow(at, alignment - 1, &at))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "the bucket size overflows uint64 with alignment ", alignment);
    at &= ~(alignment - 1);
    const uint64_t offset = at;
    if (__builtin_add_overflow(at, bytes, &at))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "the bucket size overflows uint64 with alignment ", alignment);
    return offset;
  };
  for (size_t i = 0; i < count; ++i) {
    const Shard sh = shard_of(tensors, shards, i, direction);
    check_shard_fixup(o, shards, i);
    planned[i].values_bytes = static_cast<uint64_t>(sh.values_bytes());
    planned[i].values_offset = place(planned[i].values_bytes);
    planned[i].scales_bytes = static_cast<uint64_t>(sh.scales_bytes());
    planned[i].scales_offset = place(planned[i].scales_bytes);
  }
  std::copy(planned.begin(), planned.end(), entries);
  *total_bytes = at;
}

}  // namespace

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_plan(const mxfp8_tensor *const *tensors, size_t count,
                                                    const mxfp8_export_options *options, uint64_t alignment,
                                                    mxfp8_bucket_entry *entries, uint64_t *total_bytes) {
  return guarded([&] { plan_bucket(tensors, nullptr, count, options, alignment, entries, total_bytes); });
}

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_plan_shards(const mxfp8_tensor *const *tensors,
                                                           const mxfp8_shard *const *shards, size_t count,
                                                           const mxfp8_export_options *options, uint64_t alignment,
                                                           mxfp8_bucket_entry *entries, uint64_t *total_bytes) {
  return guarded([&] { plan_bucket(tensors, shards, count, options, alignment, entries, total_bytes); });
}

extern "C" MXFP8_API mxfp8_status mxfp8_export_bucket(const mxfp8_tensor *const *tensors, size_t count,
                                                      const mxfp8_export_options *options,
                                                      const mxfp8_bucket_entry *entries, DLTensor *bucket) {
  return guarded([&] {
    const mxfp8_export_options o = read_options(options);
    const ExportJobs work = bucket_jobs(tensors, nullptr, count, o, entries, bucket);
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), o.stream);
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_export_bucket_shards(const mxfp8_tensor *const *tensors,
                                                             const mxfp8_shard *const *shards, size_t count,
                                                             const mxfp8_export_options *options,
                                                             const mxfp8_bucket_entry *entries, DLTensor *bucket) {
  return guarded([&] {
    const mxfp8_export_options o = read_options(options);
    const ExportJobs work = bucket_jobs(tensors, shards, count, o, entries, bucket);
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), o.stream);
  });
}
