// Buckets: many tensors' values (copied) and compact scales (unswizzled or cropped in place) packed into
// one caller buffer, planned on the host and filled in one launch.
//
// An NVFP4 tensor is one more kind of entry of the same plan and fill (mxfp8_*_bucket_mixed), not a
// parallel set of them: its packed values and E4M3 block scales are byte matrices the MXFP8 jobs already
// move (a 16-value scale matrix is swizzled and cropped exactly as a 32-value one), so only its third
// part, the amax, is new. The amax travels as TE keeps it (a 4-byte copy) rather than a global scale in
// one convention: the fill stays pure byte moves, and the receiver computes either convention from it
// bit for bit (import.cpp), which it could not do from the other convention's rounded float.
#include <algorithm>
#include <vector>

#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/indexed_name.hpp"
#include "api/export_internal.hpp"
#include "api/tensor.hpp"
#include "core/memory_span.hpp"
#include "core/shape.hpp"
#include "api/shard.hpp"

namespace mxfp8 {

const mxfp8_tensor *nvfp4_entry(const BucketTensors &in, size_t i) {
  const bool mxfp8 = in.tensors && in.tensors[i], nvfp4 = in.nvfp4 && in.nvfp4[i];
  if (mxfp8 && nvfp4)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors[", i, "] and nvfp4_tensors[", i, "] are both set: entry ", i,
         " is one tensor, MXFP8 or NVFP4");
  if (mxfp8) return nullptr;
  if (nvfp4) return nvfp4_tensor(in.nvfp4[i]);
  if (!in.mixed) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensors[", i, "] is NULL");
  fail(MXFP8_ERROR_INVALID_ARGUMENT, "neither tensors[", i, "] nor nvfp4_tensors[", i, "] is set: entry ", i,
       " needs one tensor");
}

namespace {

struct Part {
  uint64_t offset, bytes;
  const char *what;  // "values", "scales" or "amax"
};

DLDevice device_of(const BucketTensors &in, size_t i) {
  const mxfp8_tensor *nv = nvfp4_entry(in, i);
  return nv ? nv->device : in.tensors[i]->device;
}

void check_tensors(const BucketTensors &in, mxfp8_direction direction) {
  if (in.count > 0 && !in.tensors && !in.nvfp4)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, in.mixed ? "tensors and nvfp4_tensors are both NULL" : "tensors is NULL");
  check_count(in.count);
  for (size_t i = 0; i < in.count; ++i) {
    const mxfp8_tensor *nv = nvfp4_entry(in, i);
    if (nv) require_direction(*nv, direction, true);
    else require_direction(*in.tensors[i], direction);
    if (nv && in.shards && in.shards[i])
      fail(MXFP8_ERROR_UNSUPPORTED, "shards[", i, "] is set for an NVFP4 tensor: NVFP4 entries travel whole");
    const DLDevice device = device_of(in, i), first = device_of(in, 0);
    if (!same_device(device, first))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, nv ? "nvfp4_tensors[" : "tensors[", i, "] is on ", format_device(device),
           " but ", in.mixed ? "entry 0" : "tensors[0]", " is on ", format_device(first), ": one bucket lives on one device");
  }
}

// Entry i's shard of tensors[i] (the whole tensor when `shards` or shards[i] is NULL), checked.
Shard shard_of(const BucketTensors &in, size_t i, mxfp8_direction direction) {
  // The name is formatted without snprintf or allocation: this runs once per tensor of a whole model.
  return resolve_shard(in.shards ? in.shards[i] : nullptr, in.tensors[i]->rows, in.tensors[i]->cols,
                       direction == MXFP8_DIRECTION_COLUMNWISE, IndexedName("shards", i));
}

// The fix-up rewrites whole tensors' scales only (a shard's are carried as stored): the plan refuses the
// combination as the export and the preparation do, so a bucket is never planned that cannot be filled.
void check_shard_fixup(const mxfp8_export_options &o, const BucketTensors &in, size_t i) {
  if (in.shards && in.shards[i] && o.scale_fixup != MXFP8_SCALE_FIXUP_NONE)
    fail(MXFP8_ERROR_UNSUPPORTED, "options.scale_fixup is ", o.scale_fixup, " and shards[", i, "] is set: the "
         "shards of a bucket carry their scale bytes as stored (MXFP8_SCALE_FIXUP_NONE)");
}

// The bytes of each part of entry i: an MXFP8 (shard of a) tensor's values and compact scales, or an NVFP4
// tensor's packed values, compact E4M3 scales and amax (float32 each).
struct EntrySizes {
  uint64_t values = 0, scales = 0, amax = 0;
};

EntrySizes nvfp4_sizes(const Direction &dir) {
  return EntrySizes{static_cast<uint64_t>(dir.rows * (dir.cols / 2)),
                    static_cast<uint64_t>(dir.scale_rows * dir.scale_cols),
                    static_cast<uint64_t>(dir.amax_count) * sizeof(float)};
}

mxfp8_export_options bucket_options(const mxfp8_export_options *given) {
  const mxfp8_export_options o = read_options(given);
  if (o.scales_granularity != MXFP8_SCALES_PER_32)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "buckets carry the stored per-32 scales: options.scales_granularity must be "
         "MXFP8_SCALES_PER_32");
  return o;
}

// An amax part is read as float32 by the receiver: it starts at a multiple of 4 (and of the alignment).
constexpr uint64_t kAmaxAlignment = sizeof(float);

void check_part(const Part &p, size_t i, int64_t size, std::vector<Span> &parts) {
  if (p.offset > static_cast<uint64_t>(size))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries[", i, "]: its ", p.what, " start at byte ", p.offset,
         ", past the end of a bucket of ", size, " bytes");
  if (p.bytes > static_cast<uint64_t>(size) - p.offset)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries[", i, "]: its ", p.bytes, " bytes of ", p.what, " at byte ", p.offset,
         " run past the end of a bucket of ", size, " bytes");
  // Offsets as addresses: the parts are the outputs, each must have bytes of its own.
  parts.push_back(Span{static_cast<uintptr_t>(p.offset), p.bytes, "entries", i, true, p.what});
}

}  // namespace

ExportJobs mixed_bucket_jobs(const BucketTensors &in, const mxfp8_export_options &options,
                             const mxfp8_bucket_entry *entries, const mxfp8_bucket_nvfp4_entry *nvfp4_entries,
                             DLTensor *bucket) {
  const mxfp8_export_options o = bucket_options(&options);
  const auto direction = static_cast<mxfp8_direction>(o.direction);
  ExportJobs result;
  // count == 0 needs nothing else, as for mxfp8_export_scales_batched.
  if (in.count == 0) return result;
  if (!entries) fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries is NULL");
  if (!bucket) fail(MXFP8_ERROR_INVALID_ARGUMENT, "bucket is NULL");
  check_tensors(in, direction);
  const DLDevice device = device_of(in, 0);
  uint8_t *base = expect_buffer(*bucket, {"bucket", Holds::Bytes, 0, &device, "the tensors are", -1});
  const int64_t size = checked_numel(*bucket, "bucket");
  const bool shards = in.shards != nullptr;

  // Every part where the plan put it: the right size, inside the bucket, overlapping no other part.
  std::vector<Span> parts;
  parts.reserve(2 * in.count);
  std::vector<Shard> planned(in.count);
  for (size_t i = 0; i < in.count; ++i) {
    const mxfp8_bucket_entry &e = entries[i];
    const mxfp8_tensor *nv = nvfp4_entry(in, i);
    EntrySizes want;
    if (nv) {
      want = nvfp4_sizes(nv->directions[direction]);
    } else {
      planned[i] = shard_of(in, i, direction);
      want.values = static_cast<uint64_t>(planned[i].values_bytes());
      want.scales = static_cast<uint64_t>(planned[i].scales_bytes());
    }
    if (e.values_bytes != want.values || e.scales_bytes != want.scales)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries[", i, "] gives ", e.values_bytes, " value and ", e.scales_bytes,
           " scale bytes, ", shards && in.shards[i] ? "the shard of " : "", nv ? "nvfp4_tensors[" : "tensors[", i,
           "] has ", want.values, " and ", want.scales, ": plan the bucket with ",
           in.mixed ? "mxfp8_bucket_plan_mixed for these tensors"
                    : shards ? "mxfp8_bucket_plan_shards for these tensors, shards" : "mxfp8_bucket_plan for these tensors",
           " and options");
    check_part(Part{e.values_offset, e.values_bytes, "values"}, i, size, parts);
    check_part(Part{e.scales_offset, e.scales_bytes, "scales"}, i, size, parts);
    if (!nv) continue;
    if (!nvfp4_entries)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "nvfp4_entries is NULL but entry ", i, " is an NVFP4 tensor");
    const mxfp8_bucket_nvfp4_entry &n = nvfp4_entries[i];
    if (n.amax_bytes != want.amax || n.e4m3_max != nv->e4m3_max || n.reserved != 0 || n.amax_offset % kAmaxAlignment != 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "nvfp4_entries[", i, "] gives ", n.amax_bytes, " amax bytes at byte ",
           n.amax_offset, " with e4m3_max ", n.e4m3_max, " (reserved ", n.reserved, "), nvfp4_tensors[", i, "] has ",
           want.amax, " amax bytes, at a multiple of 4, and e4m3_max ", nv->e4m3_max,
           ": plan the bucket with mxfp8_bucket_plan_mixed for these tensors and options");
    check_part(Part{n.amax_offset, n.amax_bytes, "amax"}, i, size, parts);
  }
  check_no_overlap(parts);

  // The bucket is written, so it must not hold any byte of a tensor it is filled from.
  std::vector<Span> spans{span_of(base, size, "bucket", kNoIndex, true)};
  for (size_t i = 0; i < in.count; ++i) {
    if (const mxfp8_tensor *nv = nvfp4_entry(in, i)) add_read_spans(*nv, i, "nvfp4_tensors", spans);
    else add_read_spans(*in.tensors[i], i, "tensors", spans);
  }
  check_no_overlap(spans);

  result.device = bucket->device;
  std::vector<ScaleJob> &jobs = result.jobs;
  jobs.reserve(3 * in.count);
  for (size_t i = 0; i < in.count; ++i) {
    const mxfp8_bucket_entry &e = entries[i];
    if (const mxfp8_tensor *nv = nvfp4_entry(in, i)) {
      // Byte moves only: the values and the amax copied, the E4M3 scales cropped or unswizzled by the
      // compact job that writes MXFP8 scales (the stored matrix's scales are never a transpose).
      const Direction &dir = nv->directions[direction];
      add_copy_jobs(jobs, dir.data_begin, base + e.values_offset, static_cast<int64_t>(e.values_bytes));
      if (e.scales_bytes > 0) jobs.push_back(compact_job(dir.source, base + e.scales_offset));
      add_copy_jobs(jobs, reinterpret_cast<const uint8_t *>(dir.amax_data), base + nvfp4_entries[i].amax_offset,
                    static_cast<int64_t>(nvfp4_entries[i].amax_bytes));
      continue;
    }
    const mxfp8_tensor &t = *in.tensors[i];
    const Direction &dir = t.directions[direction];
    if (!shards || !in.shards[i]) {  // the whole tensor: its scales written by the fastest job, fixed up if asked
      add_copy_jobs(jobs, byte_pointer(dir.data->dl_tensor), base + e.values_offset, static_cast<int64_t>(e.values_bytes));
      if (e.scales_bytes > 0)
        jobs.push_back(scale_job(dir.source, MXFP8_LAYOUT_COMPACT, direction == MXFP8_DIRECTION_COLUMNWISE,
                                 base + e.scales_offset, o.scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE));
      continue;
    }
    check_shard_fixup(o, in, i);
    add_shard_value_jobs(jobs, byte_pointer(dir.data->dl_tensor), t.cols, planned[i], base + e.values_offset);
    add_shard_scale_jobs(jobs, dir.source, planned[i], base + e.scales_offset);
  }
  return result;
}

ExportJobs bucket_jobs(const mxfp8_tensor *const *tensors, const mxfp8_shard *const *shards, size_t count,
                       const mxfp8_export_options &options, const mxfp8_bucket_entry *entries, DLTensor *bucket) {
  return mixed_bucket_jobs(BucketTensors{tensors, nullptr, shards, count, false}, options, entries, nullptr, bucket);
}

namespace {

void plan_bucket(const BucketTensors &in, const mxfp8_export_options *options, uint64_t alignment,
                 mxfp8_bucket_entry *entries, mxfp8_bucket_nvfp4_entry *nvfp4_entries, uint64_t *total_bytes) {
  const mxfp8_export_options o = bucket_options(options);
  const auto direction = static_cast<mxfp8_direction>(o.direction);
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "alignment is ", alignment, ", expected a power of two");
  if (in.count > 0 && !entries) fail(MXFP8_ERROR_INVALID_ARGUMENT, "entries is NULL");
  if (!total_bytes) fail(MXFP8_ERROR_INVALID_ARGUMENT, "total_bytes is NULL");
  check_tensors(in, direction);
  for (size_t i = 0; i < in.count && !nvfp4_entries; ++i)
    if (nvfp4_entry(in, i)) fail(MXFP8_ERROR_INVALID_ARGUMENT, "nvfp4_entries is NULL but entry ", i, " is an NVFP4 tensor");
  std::vector<mxfp8_bucket_entry> planned(in.count);
  std::vector<mxfp8_bucket_nvfp4_entry> planned_nvfp4(nvfp4_entries ? in.count : 0, mxfp8_bucket_nvfp4_entry{0, 0, 0, 0u});
  uint64_t at = 0;
  auto place = [&](uint64_t bytes, uint64_t align) {
    // Rounding up to `align` can wrap as surely as the sum can (alignment 2^63).
    if (__builtin_add_overflow(at, align - 1, &at))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "the bucket size overflows uint64 with alignment ", alignment);
    at &= ~(align - 1);
    const uint64_t offset = at;
    if (__builtin_add_overflow(at, bytes, &at))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "the bucket size overflows uint64 with alignment ", alignment);
    return offset;
  };
  for (size_t i = 0; i < in.count; ++i) {
    const mxfp8_tensor *nv = nvfp4_entry(in, i);
    EntrySizes sizes;
    if (nv) {
      sizes = nvfp4_sizes(nv->directions[direction]);
    } else {
      const Shard sh = shard_of(in, i, direction);
      check_shard_fixup(o, in, i);
      sizes.values = static_cast<uint64_t>(sh.values_bytes());
      sizes.scales = static_cast<uint64_t>(sh.scales_bytes());
    }
    planned[i].values_bytes = sizes.values;
    planned[i].values_offset = place(sizes.values, alignment);
    planned[i].scales_bytes = sizes.scales;
    planned[i].scales_offset = place(sizes.scales, alignment);
    if (!nv) continue;
    planned_nvfp4[i].amax_bytes = sizes.amax;
    planned_nvfp4[i].amax_offset = place(sizes.amax, alignment > kAmaxAlignment ? alignment : kAmaxAlignment);
    planned_nvfp4[i].e4m3_max = nv->e4m3_max;
  }
  std::copy(planned.begin(), planned.end(), entries);
  if (nvfp4_entries) std::copy(planned_nvfp4.begin(), planned_nvfp4.end(), nvfp4_entries);
  *total_bytes = at;
}

}  // namespace

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_plan(const mxfp8_tensor *const *tensors, size_t count,
                                                    const mxfp8_export_options *options, uint64_t alignment,
                                                    mxfp8_bucket_entry *entries, uint64_t *total_bytes) {
  return guarded([&] {
    plan_bucket(BucketTensors{tensors, nullptr, nullptr, count, false}, options, alignment, entries, nullptr, total_bytes);
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_plan_shards(const mxfp8_tensor *const *tensors,
                                                           const mxfp8_shard *const *shards, size_t count,
                                                           const mxfp8_export_options *options, uint64_t alignment,
                                                           mxfp8_bucket_entry *entries, uint64_t *total_bytes) {
  return guarded([&] {
    plan_bucket(BucketTensors{tensors, nullptr, shards, count, false}, options, alignment, entries, nullptr, total_bytes);
  });
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

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_plan_mixed(const mxfp8_tensor *const *tensors,
                                                          const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                          const mxfp8_export_options *options, uint64_t alignment,
                                                          mxfp8_bucket_entry *entries,
                                                          mxfp8_bucket_nvfp4_entry *nvfp4_entries, uint64_t *total_bytes) {
  return guarded([&] {
    plan_bucket(BucketTensors{tensors, nvfp4_tensors, nullptr, count, true}, options, alignment, entries, nvfp4_entries,
                total_bytes);
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_export_bucket_mixed(const mxfp8_tensor *const *tensors,
                                                            const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                            const mxfp8_export_options *options,
                                                            const mxfp8_bucket_entry *entries,
                                                            const mxfp8_bucket_nvfp4_entry *nvfp4_entries,
                                                            DLTensor *bucket) {
  return guarded([&] {
    const mxfp8_export_options o = read_options(options);
    const ExportJobs work =
        mixed_bucket_jobs(BucketTensors{tensors, nvfp4_tensors, nullptr, count, true}, o, entries, nvfp4_entries, bucket);
    run_export_jobs(work, o.stream);
  });
}
