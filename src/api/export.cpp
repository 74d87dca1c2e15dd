// mxfp8_export_components: check the options, decide view or copy for each output, build the outputs
// (a shard's, options.shard, in shard.cpp). An NVFP4 tensor gives the values view and the compact E4M3
// block scales (the same view-or-copy, export_scale_matrix, on a 16-value block matrix);
// mxfp8_export_global_scale its second-level scale.
#include <cstddef>
#include <functional>
#include <vector>

#include "core/dlpack_tensor.hpp"
#include "core/memory_span.hpp"
#include "api/export_internal.hpp"
#include "api/layouts.hpp"
#include "api/outputs.hpp"
#include "api/shard.hpp"
#include "core/scale_source.hpp"
#include "cuda/cuda_runtime.hpp"
#include "core/dltensor_checks.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/error.hpp"
#include "core/scale_job.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"
#include "api/tensor.hpp"

namespace mxfp8 {

constexpr size_t kOptionsV1Size = offsetof(mxfp8_export_options, allocator) + sizeof(void *);

mxfp8_export_options read_options(const mxfp8_export_options *given) {
  const mxfp8_export_options defaults = MXFP8_EXPORT_OPTIONS_INIT;
  const mxfp8_export_options o = read_sized_struct(
      given, defaults, kOptionsV1Size, "mxfp8_export_options", "MXFP8_EXPORT_OPTIONS_INIT",
      {offsetof(mxfp8_export_options, reserved2), offsetof(mxfp8_export_options, scale_fixup),
       offsetof(mxfp8_export_options, reserved3), offsetof(mxfp8_export_options, shard),
       offsetof(mxfp8_export_options, global_scale), offsetof(mxfp8_export_options, reserved4)});
  check_enum(o.direction, "options.direction",
             {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
  check_enum(o.values_dtype, "options.values_dtype",
             {{MXFP8_VALUES_FP8, "MXFP8_VALUES_FP8"}, {MXFP8_VALUES_UINT8, "MXFP8_VALUES_UINT8"}});
  check_enum(o.scales_dtype, "options.scales_dtype",
             {{MXFP8_SCALES_UINT8, "MXFP8_SCALES_UINT8"}, {MXFP8_SCALES_E8M0, "MXFP8_SCALES_E8M0"}});
  check_enum(o.scales_granularity, "options.scales_granularity",
             {{MXFP8_SCALES_PER_32, "MXFP8_SCALES_PER_32"}, {MXFP8_SCALES_PER_32X32, "MXFP8_SCALES_PER_32X32"}});
  if (o.reserved2 != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.reserved2 is ", o.reserved2, ", must be 0");
  if (o.reserved3 != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.reserved3 is ", o.reserved3, ", must be 0");
  check_enum(o.global_scale, "options.global_scale",
             {{MXFP8_NVFP4_GLOBAL_SCALE_DECODE, "MXFP8_NVFP4_GLOBAL_SCALE_DECODE"},
              {MXFP8_NVFP4_GLOBAL_SCALE_ENCODE, "MXFP8_NVFP4_GLOBAL_SCALE_ENCODE"}});
  if (o.reserved4 != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.reserved4 is ", o.reserved4, ", must be 0");
  zero_as_one(o.scale_fixup, "options.scale_fixup");
  check_enum(o.padded_scales, "options.padded_scales",
             {{MXFP8_PADDED_SCALES_COPY, "MXFP8_PADDED_SCALES_COPY"},
              {MXFP8_PADDED_SCALES_STRIDED_VIEW, "MXFP8_PADDED_SCALES_STRIDED_VIEW"}});
  if (o.reserved != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.reserved is ", o.reserved, ", must be 0");
  return o;
}

void refuse_shard(const mxfp8_export_options &o, const char *call) {
  if (o.shard)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.shard is set: ", call, " exports whole tensors; export a shard with "
         "mxfp8_export_components (options.shard) or a transfer (desc.shards), or leave options.shard NULL");
}

void check_count(size_t count) {
  // Each tensor costs the caller at least one pointer, and us a job and a few spans.
  constexpr size_t kMostTensors = (size_t{1} << 40);
  if (count > kMostTensors)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "count is ", count, ": more tensors than any array of them can hold (at most ",
         kMostTensors, ")");
}

static void run_jobs_host(const ScaleJob *jobs, size_t count) {
  for (size_t i = 0; i < count; ++i) run_job_host(jobs[i]);
}

void run_jobs_on(DLDevice device, const ScaleJob *jobs, size_t count, void *stream) {
  if (count == 0) return;
  where_memory_lives(device, "scales", [&] { run_jobs_host(jobs, count); }, [&] { cuda::run_jobs(jobs, count, stream); });
}

size_t copy_jobs(const uint8_t *src, uint8_t *dst, int64_t bytes, ScaleJob parts[2]) {
  const int64_t rows = bytes / kCopyRowBytes, tail = bytes % kCopyRowBytes;
  auto *s = const_cast<uint8_t *>(src);
  size_t made = 0;
  if (rows > 0)
    parts[made++] = copy_job(ByteMatrix{s, rows, kCopyRowBytes, kCopyRowBytes, 1},
                             ByteMatrix{dst, rows, kCopyRowBytes, kCopyRowBytes, 1});
  if (tail > 0) {
    const int64_t done = rows * kCopyRowBytes;
    parts[made++] = copy_job(ByteMatrix{s + done, 1, tail, tail, 1}, ByteMatrix{dst + done, 1, tail, tail, 1});
  }
  return made;
}

void add_copy_jobs(std::vector<ScaleJob> &jobs, const uint8_t *src, uint8_t *dst, int64_t bytes) {
  ScaleJob parts[2];
  const size_t made = copy_jobs(src, dst, bytes, parts);
  jobs.insert(jobs.end(), parts, parts + made);
}

void run_export_jobs(const ExportJobs &work, void *stream) {
  run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), stream);
  if (work.global_scales.empty()) return;
  // A few floats per NVFP4 tensor, all of them in one small launch after the byte moves on the same stream.
  const Nvfp4GlobalScaleJob *jobs = work.global_scales.data();
  const size_t count = work.global_scales.size();
  where_memory_lives(
      work.device, "global scales", [&] { nvfp4_global_scales_host(jobs, count); },
      [&] { cuda::nvfp4_global_scales(jobs, count, stream); });
}

// A copy from the caller's allocator must not land on the tensor it is made from, nor on a copy the same
// call made before it (`earlier`, when that output is a copy: a view's bytes are the tensor's). The copy's
// name is built only for the message: every export with a copy passes here.
void check_copy_lands_apart(const mxfp8_tensor &t, const DLManagedTensorVersioned &copy, const char *what,
                            const DLManagedTensorVersioned *earlier) {
  std::vector<Span> spans;
  spans.reserve(6);  // two directions' data and scales, the copy and an earlier one: one allocation
  add_read_spans(t, kNoIndex, "the tensor's", spans);
  const size_t copy_span = spans.size();
  spans.push_back(span_of(byte_pointer(copy.dl_tensor), checked_bytes(copy.dl_tensor, what), what, kNoIndex, true));
  if (earlier && (earlier->flags & DLPACK_FLAG_BITMASK_IS_COPIED))
    spans.push_back(span_of(byte_pointer(earlier->dl_tensor), checked_bytes(earlier->dl_tensor, "the other copy"),
                            "the call's other copy from options.allocator", kNoIndex, true));
  try {
    check_no_overlap(spans);
  } catch (const Error &) {
    const std::string name = cat("the ", what, " copy from options.allocator");  // outlives the check
    spans[copy_span].kind = name.c_str();
    check_no_overlap(spans);  // fails again, now naming the copy
    throw;
  }
}

// Strides of a (*lead, C) view over rows that are `row_stride` bytes apart.
std::vector<int64_t> strided_rows(const std::vector<int64_t> &shape, int64_t row_stride) {
  std::vector<int64_t> strides(shape.size());
  strides.back() = 1;
  int64_t s = row_stride;
  for (size_t i = shape.size() - 1; i-- > 0;) {
    strides[i] = s;
    // Only an empty shape (a 0 further out) can overflow here, and any stride describes an empty tensor.
    if (__builtin_mul_overflow(s, shape[i], &s)) s = 0;
  }
  return strides;
}

ManagedPtr export_scale_matrix(const Direction &dir, bool swizzled, DLDevice device, DLDataType dtype,
                               std::vector<int64_t> shape, int32_t padded_scales, const Allocation &allocation,
                               const std::function<KeepAlive()> &owner,
                               const std::function<void(const DLManagedTensorVersioned &)> &check_copy) {
  const DLManagedTensorVersioned &src = *dir.scales;
  const ByteMatrix &in = dir.row_major;
  if (!swizzled && (in.row_stride == dir.scale_cols || dir.scale_rows <= 1 ||
                    padded_scales == MXFP8_PADDED_SCALES_STRIDED_VIEW)) {
    std::vector<int64_t> strides = strided_rows(shape, dir.scale_rows <= 1 ? dir.scale_cols : in.row_stride);
    DLTensor base = src.dl_tensor;
    base.byte_offset = static_cast<uint64_t>(in.data - static_cast<uint8_t *>(base.data));
    return make_view(owner(), base, dtype, std::move(shape), std::move(strides),
                     src.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  }
  ManagedPtr out = allocate_copy(device, dtype, shape, allocation);
  if (dir.scale_rows == 0 || dir.scale_cols == 0) return out;
  check_copy(*out);
  const ScaleJob job = compact_job(dir.source, byte_pointer(out->dl_tensor));
  run_jobs_on(device, &job, 1, allocation.stream);
  return out;
}

namespace {

ManagedPtr export_values(const mxfp8_tensor &t, const Direction &dir, const mxfp8_export_options &o) {
  const DLManagedTensorVersioned &src = *dir.data;
  return make_view(keep_alive(&t), src.dl_tensor, values_dtype(t.format, o.values_dtype), t.shape, compact_strides(t.shape),
                   src.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
}

// Rowwise scales take the tensor's leading dimensions, (*lead, C); columnwise ones are (ceil(M/32), K).
std::vector<int64_t> scales_shape(const mxfp8_tensor &t, mxfp8_direction direction, const Direction &dir) {
  if (direction == MXFP8_DIRECTION_COLUMNWISE) return {dir.scale_rows, dir.scale_cols};
  std::vector<int64_t> shape(t.shape.begin(), t.shape.end() - 1);
  shape.push_back(dir.scale_cols);
  return shape;
}

// One scale per 32x32 block, (ceil(M/32), ceil(K/32)), checked against every stored scale of the block.
ManagedPtr export_block_scales(const mxfp8_tensor &t, mxfp8_direction direction, const mxfp8_export_options &o) {
  if (t.block != MXFP8_BLOCK_32X32)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.scales_granularity is MXFP8_SCALES_PER_32X32 but the tensor was "
         "described with 1x32 blocks: set desc.block = MXFP8_BLOCK_32X32 for 2-D quantized weights");
  const DLDataType dtype = scales_dtype(o.scales_dtype);
  const std::vector<int64_t> shape{ceil_div(t.rows, kBlockSize), ceil_div(t.cols, kBlockSize)};
  ManagedPtr out = allocate_copy(t.device, dtype, shape, Allocation{o.allocator, o.stream});
  if (shape[0] == 0 || shape[1] == 0) return out;
  check_copy_lands_apart(t, *out);
  const ByteMatrix dst{byte_pointer(out->dl_tensor), shape[0], shape[1], shape[1], 1};
  const ScaleSource &src = t.directions[direction].source;
  const int axis = direction == MXFP8_DIRECTION_ROWWISE ? 0 : 1;
  const BlockMismatch m = where_memory_lives(
      t.device, "scales", [&] { return block_scales_host(src, axis, dst); },
      [&] { return cuda::block_scales(src, axis, dst, o.stream); });
  if (m.row >= 0) {
    const int64_t r0 = axis == 0 ? m.row / kBlockSize * kBlockSize : m.row;
    const int64_t c0 = axis == 0 ? m.col : m.col / kBlockSize * kBlockSize;
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the 32x32 block scales disagree: ", direction == MXFP8_DIRECTION_ROWWISE ? "rowwise" : "columnwise",
         " scale (", m.row, ", ", m.col, ") differs from scale (", r0, ", ", c0, "), the first of its 32-",
         axis == 0 ? "row" : "column", " block; is this tensor really 2-D quantized?");
  }
  return out;
}

ManagedPtr export_scales(const mxfp8_tensor &t, mxfp8_direction direction, const mxfp8_export_options &o) {
  if (o.scales_granularity == MXFP8_SCALES_PER_32X32) return export_block_scales(t, direction, o);
  const Direction &dir = t.directions[direction];
  return export_scale_matrix(dir, t.scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, t.device,
                             scales_dtype(o.scales_dtype), scales_shape(t, direction, dir), o.padded_scales,
                             Allocation{o.allocator, o.stream}, [&] { return keep_alive(&t); },
                             [&](const DLManagedTensorVersioned &copy) { check_copy_lands_apart(t, copy); });
}

// ---- NVFP4 ----

// The stored matrix's shape as an output: rowwise keeps the leading dimensions, (*lead, last);
// columnwise is the 2-D transpose TE stores, (K, last).
std::vector<int64_t> stored_shape(const mxfp8_tensor &t, int32_t direction, int64_t last) {
  if (direction == MXFP8_DIRECTION_COLUMNWISE) return {t.cols, last};
  std::vector<int64_t> shape(t.shape.begin(), t.shape.end() - 1);
  shape.push_back(last);
  return shape;
}

// MXFP8_VALUES_FP8 is the format's own type, float4_e2m1fn (in elements); MXFP8_VALUES_UINT8 its bytes.
ManagedPtr export_nvfp4_values(const mxfp8_tensor &t, const Direction &dir, const mxfp8_export_options &o) {
  const bool float4 = o.values_dtype == MXFP8_VALUES_FP8;
  const DLDataType dtype = float4 ? DLDataType{kDLFloat4_e2m1fn, 4, 1} : DLDataType{kDLUInt, 8, 1};
  std::vector<int64_t> shape = stored_shape(t, o.direction, float4 ? dir.cols : dir.cols / 2);
  std::vector<int64_t> strides = compact_strides(shape);  // in elements, as DLPack counts them
  const DLManagedTensorVersioned &src = *dir.data;
  return make_view(keep_alive(&t), src.dl_tensor, dtype, std::move(shape), std::move(strides),
                   src.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
}

// MXFP8_SCALES_E8M0 is the format's scale type, float8_e4m3fn; MXFP8_SCALES_UINT8 its bytes.
ManagedPtr export_nvfp4_scales(const mxfp8_tensor &t, const Direction &dir, const mxfp8_export_options &o) {
  const DLDataType dtype{static_cast<uint8_t>(o.scales_dtype == MXFP8_SCALES_E8M0 ? kDLFloat8_e4m3fn : kDLUInt), 8, 1};
  return export_scale_matrix(dir, t.scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, t.device, dtype,
                             stored_shape(t, o.direction, dir.scale_cols), o.padded_scales,
                             Allocation{o.allocator, o.stream}, [&] { return keep_alive(&t); },
                             [&](const DLManagedTensorVersioned &copy) {
                               check_copy_lands_apart(t, copy, "scales");
                             });
}

// Always a copy: a few floats, allocated and checked, then computed where the amax lives. A per-tensor amax
// keeps its own shape, with or without options.shard (the shard's block scales were computed against it);
// a per-row amax (TE's row_scaled_nvfp4) gives one float a row, the shard's rows piece by piece.
ManagedPtr export_global_scale(const mxfp8_tensor &t, const Direction &dir, const mxfp8_export_options &o) {
  const DLTensor &amax = dir.amax->dl_tensor;
  std::vector<int64_t> shape(amax.shape, amax.shape + amax.ndim);
  std::vector<RowRange> pieces{RowRange{0, dir.amax_count}};
  if (o.shard) {
    const Shard s = resolve_nvfp4_shard(o.shard, t.rows, t.cols, o.direction == MXFP8_DIRECTION_COLUMNWISE,
                                        "options.shard");
    if (dir.amax_count > 1) {
      pieces = s.pieces;
      shape = {s.rows};
    }
  }
  ManagedPtr out = allocate_copy(t.device, DLDataType{kDLFloat, 32, 1}, shape, Allocation{o.allocator, o.stream});
  if (checked_numel(out->dl_tensor, "the global scale") == 0) return out;
  check_copy_lands_apart(t, *out, "global scale");
  auto *dst = reinterpret_cast<float *>(byte_pointer(out->dl_tensor));
  if (reinterpret_cast<uintptr_t>(dst) % alignof(float) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the global scale copy from options.allocator is not aligned to its 4-byte elements");
  const bool encode = o.global_scale == MXFP8_NVFP4_GLOBAL_SCALE_ENCODE;
  std::vector<Nvfp4GlobalScaleJob> jobs;  // one per piece of a shard's rows, in one launch
  for (const RowRange &piece : pieces) {
    const int64_t n = piece.end - piece.begin;
    if (n == 0) continue;
    jobs.push_back(Nvfp4GlobalScaleJob{dir.amax_data + piece.begin, dst, n, t.e4m3_max, encode});
    dst += n;
  }
  where_memory_lives(
      t.device, "amax", [&] { nvfp4_global_scales_host(jobs.data(), jobs.size()); },
      [&] { cuda::nvfp4_global_scales(jobs.data(), jobs.size(), o.stream); });
  return out;
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_export_components(const mxfp8_tensor *tensor,
                                                          const mxfp8_export_options *options,
                                                          DLManagedTensorVersioned **values,
                                                          DLManagedTensorVersioned **scales) {
  return guarded([&] {
    if (!tensor) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    hold_for_call(*tensor);
    if (!values && !scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, "values and scales are both NULL: nothing to export");
    if (values == scales)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "values and scales point to the same place: each output needs its own pointer");
    const mxfp8_export_options o = read_options(options);
    if (o.scale_fixup != MXFP8_SCALE_FIXUP_NONE)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.scale_fixup is ", o.scale_fixup, ": mxfp8_export_components returns "
           "views of the stored scales where it can, so it rewrites no byte; write the scales into a buffer of yours "
           "with mxfp8_export_scales_batched or mxfp8_convert");
    if (o.shard && o.scales_granularity != MXFP8_SCALES_PER_32)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.shard exports the stored per-32 scales: options.scales_granularity "
           "must be MXFP8_SCALES_PER_32");
    const auto direction = static_cast<mxfp8_direction>(o.direction);
    if (tensor->format == MXFP8_FORMAT_NVFP4) {
      if (o.scales_granularity != MXFP8_SCALES_PER_32)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.scales_granularity is ", o.scales_granularity, ": an NVFP4 tensor "
             "exports its stored 1x16 block scales, options.scales_granularity must be MXFP8_SCALES_PER_32");
      const Direction &dir = require_direction(*tensor, direction, /*nvfp4=*/true);
      if (o.shard) return export_shard(*tensor, dir, o, values, scales);
      // Scales first: they are the part that can fail (memory, CUDA); values are only a view.
      ManagedPtr scales_out = scales ? export_nvfp4_scales(*tensor, dir, o) : nullptr;
      ManagedPtr values_out = values ? export_nvfp4_values(*tensor, dir, o) : nullptr;
      if (scales) *scales = scales_out.release();
      if (values) *values = values_out.release();
      return;
    }
    const Direction &dir = require_direction(*tensor, direction);
    if (o.shard) return export_shard(*tensor, dir, o, values, scales);
    // Scales first: they are the part that can fail (memory, CUDA); values are only a view.
    ManagedPtr scales_out = scales ? export_scales(*tensor, direction, o) : nullptr;
    ManagedPtr values_out = values ? export_values(*tensor, dir, o) : nullptr;
    if (scales) *scales = scales_out.release();
    if (values) *values = values_out.release();
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_export_global_scale(const mxfp8_tensor *tensor,
                                                            const mxfp8_export_options *options,
                                                            DLManagedTensorVersioned **global_scale) {
  return guarded([&] {
    if (!tensor) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL");
    hold_for_call(*tensor);
    if (!global_scale) fail(MXFP8_ERROR_INVALID_ARGUMENT, "global_scale is NULL: nothing to export");
    const mxfp8_export_options o = read_options(options);
    if (tensor->format != MXFP8_FORMAT_NVFP4)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "the tensor is an MXFP8 tensor: it has no second-level scale "
           "(mxfp8_export_global_scale takes NVFP4 tensors, desc.format MXFP8_FORMAT_NVFP4)");
    const Direction &dir = require_direction(*tensor, o.direction, /*nvfp4=*/true);
    *global_scale = export_global_scale(*tensor, dir, o).release();
  });
}
