// Buckets (FROM_TENSORS -> TO_BUCKET): many tensors' values (copied) and scales (cropped, unswizzled or
// swizzled in place) packed into one caller buffer, planned on the host and filled in one launch.
//
// An NVFP4 tensor is one more kind of entry of the same plan and fill, not a parallel set of them: its packed values and E4M3 block scales are byte matrices the MXFP8 jobs already
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
#include "api/layouts.hpp"
#include "api/tensor.hpp"
#include "core/memory_span.hpp"
#include "core/shape.hpp"
#include "api/shard.hpp"
#include "transfer/jobs.hpp"

namespace mxfp8 {

const mxfp8_tensor *nvfp4_entry(const BucketTensors &in, size_t i) {
  const mxfp8_tensor *t = in.tensors[i];
  if (!t) fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.tensors", i), " is NULL");
  return t->format == MXFP8_FORMAT_NVFP4 ? t : nullptr;
}

void check_tensors(const BucketTensors &in) {
  if (in.count > 0 && !in.tensors) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.tensors is NULL");
  check_count(in.count);
  for (size_t i = 0; i < in.count; ++i) {
    const mxfp8_tensor *nv = nvfp4_entry(in, i);
    const mxfp8_tensor &t = *in.tensors[i];
    require_direction(t, in.direction_of(i), nv != nullptr, "desc.tensors", i);
    if (!same_device(t.device, in.tensors[0]->device))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.tensors[", i, "] is on ", format_device(t.device), " but entry 0 is on ",
           format_device(in.tensors[0]->device), ": one transfer lives on one device");
  }
}

namespace {

// The fix-up rewrites whole tensors' scales only (a shard's are carried as stored): the plan refuses the
// combination as the export and the preparation do, so a bucket is never planned that cannot be filled.
void check_shard_fixup(int32_t scale_fixup, const BucketTensors &in, size_t i) {
  if (in.shards && in.shards[i] && scale_fixup != MXFP8_SCALE_FIXUP_NONE)
    fail(MXFP8_ERROR_UNSUPPORTED, "desc.scale_fixup is ", scale_fixup, " and desc.shards[", i, "] is set: the shards "
         "of a bucket carry their scale bytes as stored (MXFP8_SCALE_FIXUP_NONE)");
}

// The bytes of each part of entry i: an MXFP8 (shard of a) tensor's values and scales, or an NVFP4
// (shard of a) tensor's packed values, E4M3 scales and amax (float32 each).
struct EntrySizes {
  uint64_t values = 0, scales = 0, amax = 0;
};

// Entry i of a bucket filled from tensors, checked: what lands in it and from where. The one place a
// bucket entry's combination of format, direction, shard and scale layout is accepted or refused.
struct BucketEntry {
  const mxfp8_tensor *tensor;
  bool nvfp4, columnwise, sharded;
  const Direction *dir;
  const LayoutInfo *layout;  // of the scales part
  Shard shard;               // NVFP4: of the stored matrix (resolve_nvfp4_shard)
  int64_t rows, cols, scale_rows, scale_cols;  // what lands: MXFP8 logical, NVFP4 stored
  EntrySizes sizes;
};

BucketEntry bucket_entry(const BucketTensors &in, size_t i, int32_t scale_fixup) {
  BucketEntry e{};
  const mxfp8_tensor *nv = nvfp4_entry(in, i);
  e.tensor = nv ? nv : in.tensors[i];
  e.nvfp4 = nv != nullptr;
  const mxfp8_direction direction = in.direction_of(i);
  e.columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  e.dir = &e.tensor->directions[direction];
  const IndexedName layout_name("desc.target_layouts", i);
  e.layout = &layout_info(in.layout_of(i), layout_name);
  if (e.layout->permutes_value_rows)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, layout_name, " is ", e.layout->enum_name, " (", e.layout->value, "): a bucket "
         "carries values in row order, so its scales cannot be in a layout that permutes rows; write it with mxfp8_convert");
  const bool engine = e.layout->value != MXFP8_SCALE_LAYOUT_COMPACT && e.layout->value != MXFP8_SCALE_LAYOUT_128X4;
  if (e.nvfp4) require_nvfp4_layout(*e.layout, layout_name, "travel");
  else if (e.columnwise) require_columnwise_form(*e.layout, layout_name);  // before the shard's rule below
  e.sharded = in.shards && in.shards[i];
  const IndexedName shard_name("desc.shards", i);
  if (e.sharded && engine)
    fail(MXFP8_ERROR_UNSUPPORTED, shard_name, " is set and ", layout_name, " is ", e.layout->enum_name, ": a shard is "
         "written MXFP8_SCALE_LAYOUT_COMPACT or MXFP8_SCALE_LAYOUT_128X4");
  if (e.nvfp4) {
    if (e.sharded) e.shard = resolve_nvfp4_shard(in.shards[i], e.tensor->rows, e.tensor->cols, e.columnwise, shard_name);
    e.rows = e.sharded ? e.shard.rows : e.dir->rows;
    e.cols = e.sharded ? e.shard.cols() : e.dir->cols;
    e.scale_rows = e.rows;
    e.scale_cols = e.sharded ? e.shard.scale_cols : e.dir->scale_cols;
    e.sizes.values = static_cast<uint64_t>(e.rows * (e.cols / 2));
    // NVFP4 scales are never a transpose: the stored matrix already is one.
    e.sizes.scales = static_cast<uint64_t>(layout_bytes(*e.layout, e.scale_rows, e.scale_cols, false, layout_name));
    e.sizes.amax = static_cast<uint64_t>(e.dir->amax_count == 1 ? 1 : e.rows) * sizeof(float);
    return e;
  }
  e.shard = resolve_shard(e.sharded ? in.shards[i] : nullptr, e.tensor->rows, e.tensor->cols, e.columnwise, shard_name);
  if (e.sharded) check_shard_fixup(scale_fixup, in, i);
  e.rows = e.shard.rows;
  e.cols = e.shard.cols();
  e.scale_rows = e.shard.scale_rows;
  e.scale_cols = e.shard.scale_cols;
  e.sizes.values = static_cast<uint64_t>(e.shard.values_bytes());
  e.sizes.scales = static_cast<uint64_t>(layout_bytes(*e.layout, e.scale_rows, e.scale_cols, e.columnwise, layout_name));
  return e;
}

// The jobs writing entry e at `values`, `scales` and (NVFP4) `amax`: byte moves only. The plan builds them
// too, without running them, so that a shard the scale jobs cannot write (add_shard_swizzled_scale_jobs'
// refusals) is refused when the bucket is planned, not when it is filled.
void add_entry_jobs(std::vector<ScaleJob> &jobs, const BucketEntry &e, int32_t scale_fixup, uint8_t *values,
                    uint8_t *scales, uint8_t *amax, const char *shard_name) {
  const Direction &dir = *e.dir;
  const bool compact = e.layout->value == MXFP8_SCALE_LAYOUT_COMPACT;
  if (!e.sharded) {
    // The whole tensor: its values copied, its scales written by the fastest job, fixed up if asked (MXFP8).
    add_copy_jobs(jobs, e.nvfp4 ? dir.data_begin : byte_pointer(dir.data->dl_tensor), values,
                  static_cast<int64_t>(e.sizes.values));
    if (e.sizes.scales > 0 && e.scale_rows > 0 && e.scale_cols > 0) {
      const bool fix = !e.nvfp4 && scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
      jobs.push_back(scale_job(dir.source, e.layout->value, e.columnwise && !e.nvfp4, scales, fix));
      if (!compact) jobs.back().layout_bytes = static_cast<int64_t>(e.sizes.scales);
    }
    if (e.nvfp4) add_copy_jobs(jobs, reinterpret_cast<const uint8_t *>(dir.amax_data), amax, static_cast<int64_t>(e.sizes.amax));
    return;
  }
  if (e.nvfp4) add_shard_value_jobs(jobs, dir.data_begin, dir.cols / 2, packed_value_bytes(e.shard), values);
  else add_shard_value_jobs(jobs, byte_pointer(dir.data->dl_tensor), e.tensor->cols, e.shard, values);
  if (compact) add_shard_scale_jobs(jobs, dir.source, e.shard, scales);
  else add_shard_swizzled_scale_jobs(jobs, dir.source, e.shard, scales, shard_name);
  if (!e.nvfp4) return;
  const auto *amax_bytes = reinterpret_cast<const uint8_t *>(dir.amax_data);
  // A per-tensor amax is the shard's too (its block scales were computed against it); a per-row one
  // travels as the shard's rows' amaxes, piece by piece.
  if (dir.amax_count == 1) {
    add_copy_jobs(jobs, amax_bytes, amax, sizeof(float));
    return;
  }
  int64_t at = 0;
  for (const RowRange &piece : e.shard.pieces) {
    const int64_t n = (piece.end - piece.begin) * static_cast<int64_t>(sizeof(float));
    add_copy_jobs(jobs, amax_bytes + piece.begin * static_cast<int64_t>(sizeof(float)), amax + at, n);
    at += n;
  }
}

// An amax part is read as float32 by the receiver: it starts at a multiple of 4 (and of the alignment).
constexpr uint64_t kAmaxAlignment = sizeof(float);

void check_part(uint64_t offset, uint64_t bytes, const char *what, const char *parts, size_t i, int64_t size,
                std::vector<Span> &spans) {
  if (offset > static_cast<uint64_t>(size))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, parts, "[", i, "]: its ", what, " start at byte ", offset,
         ", past the end of a bucket of ", size, " bytes");
  if (bytes > static_cast<uint64_t>(size) - offset)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, parts, "[", i, "]: its ", bytes, " bytes of ", what, " at byte ", offset,
         " run past the end of a bucket of ", size, " bytes");
  // Offsets as addresses: the parts are the outputs, each must have bytes of its own.
  spans.push_back(Span{static_cast<uintptr_t>(offset), bytes, parts, i, true, what});
}

}  // namespace

ExportJobs tensor_bucket_jobs(const BucketTensors &in, int32_t scale_fixup, const mxfp8_bucket_part *given,
                              DLTensor *bucket) {
  ExportJobs result;
  // count == 0 needs nothing else, as for mxfp8_export_scales_batched.
  if (in.count == 0) return result;
  if (!given) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_out is NULL");
  if (!bucket) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.bucket_out is NULL");
  check_tensors(in);
  const DLDevice device = in.tensors[0]->device;
  uint8_t *base = expect_buffer(*bucket, {"desc.bucket_out", Holds::Bytes, 0, &device, "the tensors are", -1});
  const int64_t size = checked_numel(*bucket, "desc.bucket_out");

  // Every part where the plan put it: the right size, inside the bucket, overlapping no other part.
  std::vector<Span> parts;
  parts.reserve(3 * in.count);
  std::vector<BucketEntry> entries;
  entries.reserve(in.count);
  for (size_t i = 0; i < in.count; ++i) {
    entries.push_back(bucket_entry(in, i, scale_fixup));
    const BucketEntry &e = entries.back();
    const mxfp8_bucket_part &p = given[i];
    if (p.values_bytes != e.sizes.values || p.scales_bytes != e.sizes.scales)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_out[", i, "] gives ", p.values_bytes, " value and ", p.scales_bytes,
           " scale bytes, ", e.sharded ? "the shard of " : "", "desc.tensors[", i, "] has ", e.sizes.values,
           " and ", e.sizes.scales, ": plan the bucket with mxfp8_bucket_parts for this desc");
    check_part(p.values_offset, p.values_bytes, "values", "desc.parts_out", i, size, parts);
    check_part(p.scales_offset, p.scales_bytes, "scales", "desc.parts_out", i, size, parts);
    if (!e.nvfp4) {
      // What the receiver's desc would refuse as well (an MXFP8 part with an amax is not a part this
      // library plans): said here, before a byte is written.
      if (p.amax_offset != 0 || p.amax_bytes != 0)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_out[", i, "] gives an amax part (", p.amax_bytes, " bytes at byte ",
             p.amax_offset, ") but desc.tensors[", i, "] is an MXFP8 tensor: it has none (0, 0)");
      continue;
    }
    if (p.amax_bytes != e.sizes.amax || p.amax_offset % kAmaxAlignment != 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_out[", i, "] gives ", p.amax_bytes, " amax bytes at byte ",
           p.amax_offset, ", ", e.sharded ? "the shard of " : "", "desc.tensors[", i, "] has ", e.sizes.amax,
           " at a multiple of 4: plan the bucket with mxfp8_bucket_parts for this desc");
    // The receiver reads the amax as float32 where it lies (a bucket mapped or received in place), so a
    // bucket whose address puts it off a multiple of 4 would be written here and refused there.
    if (const uintptr_t misaligned = reinterpret_cast<uintptr_t>(base) % kAmaxAlignment)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.bucket_out starts ", misaligned, " byte", misaligned == 1 ? "" : "s",
           " past a multiple of 4, so the float32 amax of desc.tensors[", i, "] (an NVFP4 tensor) at byte ",
           p.amax_offset, " would be unaligned, which a receiver refuses: give a bucket aligned to 4 bytes (not a "
           "byte slice starting at an odd offset)");
    check_part(p.amax_offset, p.amax_bytes, "amax", "desc.parts_out", i, size, parts);
  }
  check_no_overlap(parts);

  // The bucket is written, so it must not hold any byte of a tensor it is filled from.
  std::vector<Span> spans{span_of(base, size, "desc.bucket_out", kNoIndex, true)};
  for (size_t i = 0; i < in.count; ++i) add_read_spans(*entries[i].tensor, i, "desc.tensors", spans);
  check_no_overlap(spans);

  result.device = bucket->device;
  result.jobs.reserve(3 * in.count);
  for (size_t i = 0; i < in.count; ++i) {
    const BucketEntry &e = entries[i];
    const mxfp8_bucket_part &p = given[i];
    add_entry_jobs(result.jobs, e, scale_fixup, base + p.values_offset, base + p.scales_offset,
                   e.nvfp4 ? base + p.amax_offset : nullptr, IndexedName("desc.shards", i));
  }
  return result;
}

std::vector<mxfp8_bucket_part> plan_bucket_parts(const BucketTensors &in, int32_t scale_fixup, uint64_t alignment,
                                                 uint64_t *total_bytes) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "alignment is ", alignment, ", expected a power of two");
  if (!total_bytes) fail(MXFP8_ERROR_INVALID_ARGUMENT, "total_bytes is NULL");
  check_tensors(in);
  std::vector<mxfp8_bucket_part> planned(in.count, mxfp8_bucket_part{0, 0, 0, 0, 0, 0});
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
  // The jobs are built for their own refusals only and never run: they point at an address no bucket
  // has (not NULL, whose offsets sanitizers rightly refuse).
  uint8_t *const nowhere = reinterpret_cast<uint8_t *>(uintptr_t{4096});
  std::vector<ScaleJob> unused;
  for (size_t i = 0; i < in.count; ++i) {
    const BucketEntry e = bucket_entry(in, i, scale_fixup);
    unused.clear();
    add_entry_jobs(unused, e, scale_fixup, nowhere, nowhere, nowhere, IndexedName("desc.shards", i));
    mxfp8_bucket_part &p = planned[i];
    p.values_bytes = e.sizes.values;
    p.values_offset = place(e.sizes.values, alignment);
    p.scales_bytes = e.sizes.scales;
    p.scales_offset = place(e.sizes.scales, alignment);
    if (!e.nvfp4) continue;
    p.amax_bytes = e.sizes.amax;
    p.amax_offset = place(e.sizes.amax, alignment > kAmaxAlignment ? alignment : kAmaxAlignment);
  }
  // A bucket is one DLTensor of `at` bytes, whose shape is int64: a larger layout describes no bucket.
  if (at > static_cast<uint64_t>(INT64_MAX))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the bucket's ", at, " bytes with alignment ", alignment,
         " are past INT64_MAX, the most a bucket (a DLTensor) can hold");
  *total_bytes = at;
  return planned;
}

}  // namespace mxfp8
