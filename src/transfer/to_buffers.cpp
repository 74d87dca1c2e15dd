// A transfer into caller buffers (TO_BUFFERS): tensors from a bucket (described by the desc's manifest
// arrays) or straight from a trainer's storage (mxfp8_tensor handles) written into the engine's own
// parameter buffers, values copied and scales moved into the layout each target asks for. Everything is
// checked first; the work is one job list, run in one launch (or kept by a plan).
#include <cstddef>
#include <vector>

#include "api/export_internal.hpp"
#include "api/layouts.hpp"
#include "api/tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/indexed_name.hpp"
#include "core/memory_span.hpp"
#include "core/shape.hpp"
#include "api/shard.hpp"
#include "transfer/from_bucket.hpp"
#include "transfer/jobs.hpp"

namespace mxfp8 {
namespace {

// One entry's destination, checked: values (unless desc.values[i] is NULL: scales only) and scales buffers
// of the right dtypes and exact sizes on `device`; their spans join `spans` as written.
struct CheckedDestination {
  uint8_t *values;          // NULL: scales only
  uint8_t *scales;
  int64_t scales_writable;  // the bytes of the layout the scales tensor describes (LayoutBuffer)
  int32_t layout;
  bool zero_as_one;
};

CheckedDestination check_destination(const ImportTargets &targets, size_t i, int32_t format,
                                     int64_t values_bytes, int64_t scale_rows, int64_t scale_cols, bool columnwise,
                                     const DLDevice &device, const char *device_of, bool zero_as_one,
                                     std::vector<Span> &spans) {
  const ImportTargets::Entry d = targets.at(i);
  // Names formatted without snprintf or allocation: this runs once per tensor of a whole model.
  // A buffer nothing would write is the caller's mistake (an entry they took for NVFP4), not a no-op.
  if (targets.global_scales && targets.global_scales[i])
    fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.global_scales", i), " is set, but entry ", i,
         " is an MXFP8 tensor, which has no second-level scale: nothing would write it; leave it NULL");
  const IndexedName name("desc.target_layouts", i);
  const LayoutInfo &layout = layout_info(d.layout, name);
  require_rows_in_order(layout, name);
  const int64_t scales_bytes = layout_bytes(layout, scale_rows, scale_cols, columnwise, name);
  if (!d.scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.scales", i), " is NULL");
  CheckedDestination out{nullptr, nullptr, 0, d.layout, zero_as_one};
  if (d.values) {
    out.values = expect_indexed_buffer(*d.values, {"desc.values", Holds::Fp8Values, format, &device, device_of, values_bytes}, i);
    spans.push_back(span_of(out.values, values_bytes, "desc.values", i, true));
  }
  const LayoutBuffer scales_buffer = expect_layout_buffer(*d.scales, layout, scales_bytes, 1, scale_rows, scale_cols,
                                                          IndexedName("desc.scales", i), device, device_of);
  out.scales = scales_buffer.data;
  out.scales_writable = scales_buffer.writable;
  spans.push_back(span_of(out.scales, out.scales_writable, "desc.scales", i, true));
  return out;
}

// The jobs moving one tensor: its values (a flat copy) and its scales S from `source` into the layout
// the destination asks for.
void add_tensor_jobs(std::vector<ScaleJob> &jobs, const uint8_t *values, int64_t values_bytes,
                     const ScaleSource &source, bool columnwise, const CheckedDestination &d) {
  if (d.values) add_copy_jobs(jobs, values, d.values, values_bytes);
  if (source.rows == 0 || source.cols == 0) return;
  jobs.push_back(scale_job(source, d.layout, columnwise, d.scales, d.zero_as_one));
  jobs.back().layout_bytes = d.scales_writable;
}

// The jobs moving shard `sh` of a tensor (`cols` values a row at `values`, scales S from `source`) into
// the destination. A shard is written compact or 128x4 with its scale bytes as stored: the engine
// layouts and the fix-up are not combined with shards yet (`name` names the shard in the refusal).
void add_shard_jobs(std::vector<ScaleJob> &jobs, const uint8_t *values, int64_t cols, const ScaleSource &source,
                    const Shard &sh, const CheckedDestination &d, const char *name) {
  if (source.swizzled && source.layout != MXFP8_SCALE_LAYOUT_128X4)
    fail(MXFP8_ERROR_UNSUPPORTED, name, ": a shard of scales carried in an engine layout (",
         layout_info(source.layout, name).enum_name, "); carry them compact or 128x4");
  if (d.layout != MXFP8_SCALE_LAYOUT_COMPACT && d.layout != MXFP8_SCALE_LAYOUT_128X4)
    fail(MXFP8_ERROR_UNSUPPORTED, name, ": a shard is imported into MXFP8_SCALE_LAYOUT_COMPACT or MXFP8_SCALE_LAYOUT_128X4 "
         "destinations only, not ", layout_info(d.layout, name).enum_name);
  if (d.zero_as_one)
    fail(MXFP8_ERROR_UNSUPPORTED, name, ": a shard is imported with its scale bytes as stored "
         "(scale_fixup MXFP8_SCALE_FIXUP_NONE)");
  if (d.values) add_shard_value_jobs(jobs, values, cols, sh, d.values);
  if (d.layout == MXFP8_SCALE_LAYOUT_COMPACT) add_shard_scale_jobs(jobs, source, sh, d.scales);
  else add_shard_swizzled_scale_jobs(jobs, source, sh, d.scales, name);
}

// The destination dtypes of an NVFP4 entry's values: packed bytes, or DLPack's packed float4 (two a byte).
int64_t nvfp4_values_numel(const DLTensor &t, const char *name, int64_t values_bytes) {
  if (is_dtype(t.dtype, kDLUInt, 8)) return values_bytes;
  if (is_dtype(t.dtype, kDLFloat4_e2m1fn, 4)) return checked_mul(values_bytes, 2, "the NVFP4 value count");
  fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype),
       " does not hold NVFP4 values (expected uint8, two values per byte, or float4_e2m1fn)");
}

// Where an NVFP4 tensor's parts are read from (a bucket's parts, or a trainer's storage): the stored
// matrix (rows x cols, cols even) as packed codes, its E4M3 scales S (rows x ceil(cols / 16), as stored:
// compact, padded or 128x4, never a transpose), and its float32 amax.
struct Nvfp4Parts {
  const uint8_t *values;
  ScaleSource scales;
  const float *amax;
  int64_t amax_count;
  int32_t e4m3_max;
  int64_t rows, cols;
};

// Destination i of an NVFP4 tensor, or of shard `sh` of it (NULL: the whole; a shard of the stored matrix,
// resolve_nvfp4_shard): values, scales in their layout and global_scales[i] in `convention`, checked on
// `device` and added to `spans` as written; then the jobs: the values copied, the E4M3 scales moved by the
// MXFP8 scale jobs, the amax turned into the asked convention (a per-row amax: the shard's rows' only).
void add_nvfp4_destination(const Nvfp4Parts &p, const Shard *sh, size_t i, const ImportTargets &targets,
                           int32_t convention, const DLDevice &device,
                           const char *device_of, std::vector<Span> &spans, ExportJobs &result) {
  const ImportTargets::Entry d = targets.at(i);
  const IndexedName target_name("desc.target_layouts", i);
  const LayoutInfo &target = nvfp4_target_layout(d.layout, target_name);
  if (!d.scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.scales", i), " is NULL");
  DLTensor *global = targets.global_scales ? targets.global_scales[i] : nullptr;
  if (!global) fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.global_scales", i), " is NULL for an NVFP4 entry");
  // What lands: the stored matrix, or the shard's rows x cols of it (cols even: checked by the caller, or
  // multiples of 16 by resolve_nvfp4_shard).
  const int64_t rows = sh ? sh->rows : p.rows, cols = sh ? sh->cols() : p.cols;
  const int64_t values_bytes = rows * (cols / 2), scale_cols = sh ? sh->scale_cols : p.scales.cols;
  const int64_t amax_count = p.amax_count == 1 ? 1 : rows;  // per tensor, or the rows that land
  uint8_t *values = d.values ? expect_indexed_buffer(*d.values, {"desc.values", Holds::CheckedByCaller, 0, &device, device_of,
                                                                 nvfp4_values_numel(*d.values, IndexedName("desc.values", i), values_bytes)},
                                                     i)
                             : nullptr;
  const int64_t target_bytes = layout_bytes(target, rows, scale_cols, false, target_name);
  // Said in the layout's terms first: 16-value blocks make a scale matrix an MXFP8 caller would not expect.
  const IndexedName scales_name("desc.scales", i);
  const int64_t scales_numel = checked_numel(*d.scales, scales_name);
  if (scales_numel != target_bytes)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, scales_name, ": ", target.label, " E4M3 scales of the ", rows, " x ", scale_cols,
         " block matrix (one per 16 values", sh ? " of the shard" : "", ") are ", target_bytes, " bytes, got ",
         scales_numel, " (shape ", format_shape(d.scales->shape, d.scales->ndim), ")");
  uint8_t *scales = expect_indexed_buffer(
      *d.scales, {"desc.scales", Holds::E4m3ScaleBytes, 0, &device, device_of, target_bytes}, i);
  if (!is_dtype(global->dtype, kDLFloat, 32))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.global_scales", i), ": dtype ", format_dtype(global->dtype),
         " is not float32");
  uint8_t *out = expect_indexed_buffer(*global, {"desc.global_scales", Holds::CheckedByCaller, 0, &device, device_of, amax_count}, i);
  if (reinterpret_cast<uintptr_t>(out) % alignof(float) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.global_scales", i), ": the data (data + byte_offset) is not aligned to "
         "its 4-byte elements");
  if (values) spans.push_back(span_of(values, values_bytes, "desc.values", i, true));
  spans.push_back(span_of(scales, target_bytes, "desc.scales", i, true));
  spans.push_back(span_of(out, amax_count * static_cast<int64_t>(sizeof(float)), "desc.global_scales", i, true));

  const bool encode = convention == MXFP8_NVFP4_GLOBAL_SCALE_ENCODE;
  auto *global_out = reinterpret_cast<float *>(out);
  if (sh) {
    // NVFP4 scales are never a transpose (the stored matrix is one already): the rowwise shard jobs.
    if (values) add_shard_value_jobs(result.jobs, p.values, p.cols / 2, packed_value_bytes(*sh), values);
    if (target.value == MXFP8_SCALE_LAYOUT_COMPACT) add_shard_scale_jobs(result.jobs, p.scales, *sh, scales);
    else add_shard_swizzled_scale_jobs(result.jobs, p.scales, *sh, scales, IndexedName("desc.shards", i));
    // A per-tensor amax is the shard's too: its block scales were computed against it.
    if (p.amax_count == 1) {
      result.global_scales.push_back(Nvfp4GlobalScaleJob{p.amax, global_out, 1, p.e4m3_max, encode});
      return;
    }
    int64_t at = 0;
    for (const RowRange &piece : sh->pieces) {
      const int64_t n = piece.end - piece.begin;
      if (n > 0)
        result.global_scales.push_back(Nvfp4GlobalScaleJob{p.amax + piece.begin, global_out + at, n, p.e4m3_max, encode});
      at += n;
    }
    return;
  }
  if (values) add_copy_jobs(result.jobs, p.values, values, values_bytes);
  if (p.rows > 0 && scale_cols > 0) {
    result.jobs.push_back(scale_job(p.scales, target.value, /*columnwise=*/false, scales, /*zero_as_one=*/false));
    result.jobs.back().layout_bytes = target_bytes;
  }
  if (p.amax_count > 0)
    result.global_scales.push_back(Nvfp4GlobalScaleJob{p.amax, global_out, p.amax_count, p.e4m3_max, encode});
}

// An NVFP4 entry (desc.formats[i] == MXFP8_FORMAT_NVFP4), its parts checked against the bucket
// (check_bucket_manifest): what reading them needs, then its destination (add_nvfp4_destination,
// desc.global_scales[i]).
void add_nvfp4_entry(const mxfp8_transfer_desc &m, size_t i, const CheckedEntry &e, const DLDevice &device,
                     const ImportTargets &targets, std::vector<Span> &spans, ExportJobs &result) {
  if (!m.global_scales)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.global_scales is NULL but desc.formats[", i,
         "] is MXFP8_FORMAT_NVFP4: an NVFP4 entry needs a destination for its second-level scale");
  // The amax is aligned (check_amax_part, for every destination).
  const int64_t r = e.scale_rows, scale_cols = e.scale_cols;
  ScaleSource scales{nullptr, false, ByteMatrix{const_cast<uint8_t *>(e.scales), r, scale_cols, scale_cols, 1}, r, scale_cols};
  if (e.layout->value == MXFP8_SCALE_LAYOUT_128X4) scales = ScaleSource{e.scales, false, ByteMatrix{}, r, scale_cols};
  const Nvfp4Parts parts{e.values, scales, reinterpret_cast<const float *>(e.amax), e.amax_count, e.e4m3_max, e.rows, e.cols};
  add_nvfp4_destination(parts, e.sharded ? &e.shard : nullptr, i, targets, m.global_scale, device,
                        "the bucket is", spans, result);
}

}  // namespace

ExportJobs import_bucket_jobs(const mxfp8_transfer_desc &m) {
  const CheckedManifest checked = check_bucket_manifest(m);
  ExportJobs result;
  if (m.count == 0) return result;
  const ImportTargets targets{m.values, m.scales, m.target_layouts, m.global_scales};
  targets.require();
  const DLTensor *bucket = m.bucket_in;
  memory_of(bucket->device, "desc.bucket_in");  // a device type the library cannot touch fails here
  result.device = bucket->device;

  std::vector<Span> spans{span_of(checked.base, checked.size, "desc.bucket_in", kNoIndex, false)};
  spans.reserve(1 + 2 * m.count);
  std::vector<ScaleJob> &jobs = result.jobs;
  jobs.reserve(3 * m.count);
  const bool fixup = m.scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;
  for (size_t i = 0; i < m.count; ++i) {
    const CheckedEntry &e = checked.entries[i];
    if (e.format == MXFP8_FORMAT_NVFP4) {
      add_nvfp4_entry(m, i, e, bucket->device, targets, spans, result);
      continue;
    }
    ScaleSource source{nullptr, e.columnwise, ByteMatrix{const_cast<uint8_t *>(e.scales), e.scale_rows, e.scale_cols, e.scale_cols, 1},
                       e.scale_rows, e.scale_cols};
    if (e.layout->value != MXFP8_SCALE_LAYOUT_COMPACT) {  // a packed layout: the 128x4 one, or an engine's
      source = ScaleSource{e.scales, e.columnwise, ByteMatrix{}, e.scale_rows, e.scale_cols};
      source.layout = e.layout->value;
    }
    if (e.sharded) {  // the receiver's part of a whole tensor
      const IndexedName shard_name("desc.shards", i);
      const Shard &sh = e.shard;
      const CheckedDestination d = check_destination(targets, i, e.format, sh.values_bytes(), sh.scale_rows,
                                                     sh.scale_cols, e.columnwise, bucket->device, "the bucket is", fixup,
                                                     spans);
      add_shard_jobs(jobs, e.values, e.cols, source, sh, d, shard_name);
      continue;
    }
    const CheckedDestination d = check_destination(targets, i, e.format, e.values_bytes, e.scale_rows, e.scale_cols,
                                                   e.columnwise, bucket->device, "the bucket is", fixup, spans);
    add_tensor_jobs(jobs, e.values, e.values_bytes, source, e.columnwise, d);
  }
  check_no_overlap(spans);
  return result;
}

ExportJobs import_tensor_jobs(const mxfp8_transfer_desc &desc) {
  ExportJobs result;
  const BucketTensors in = tensors_of(desc);
  const size_t count = in.count;
  const mxfp8_shard *const *shards = in.shards;
  if (count == 0) return result;
  if (!in.tensors) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.tensors is NULL");
  const ImportTargets targets{desc.values, desc.scales, desc.target_layouts, desc.global_scales};
  targets.require();
  const bool fixup = desc.scale_fixup == MXFP8_SCALE_FIXUP_ZERO_EXPONENT_AS_ONE;  // checked when the desc was read
  std::vector<Span> spans;
  spans.reserve(6 * count);
  std::vector<ScaleJob> &jobs = result.jobs;
  jobs.reserve(3 * count);
  for (size_t i = 0; i < count; ++i) {
    const mxfp8_tensor *nv = nvfp4_entry(in, i);
    const mxfp8_tensor &t = nv ? *nv : *in.tensors[i];
    if (i == 0) result.device = t.device;
    if (!same_device(t.device, result.device))
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.tensors[", i, "] is on ", format_device(t.device), " but entry 0 is on ",
           format_device(result.device), ": one import runs on one device");
    const mxfp8_direction direction = in.direction_of(i);
    const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
    const Direction &dir = require_direction(t, direction, nv != nullptr, "desc.tensors", i);
    const bool sharded = shards && shards[i];
    const IndexedName shard_name("desc.shards", i);
    if (nv) {  // read straight from the trainer's NVFP4 storage
      if (!targets.global_scales)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.global_scales is NULL but entry ", i,
             " is an NVFP4 tensor: it needs a destination for its second-level scale");
      const Nvfp4Parts parts{dir.data_begin, dir.source, dir.amax_data, dir.amax_count, nv->e4m3_max,
                             dir.rows, dir.cols};
      // A shard is given in logical terms (rows of M, columns of K) and resolved onto the stored matrix.
      Shard sh;
      if (sharded) {  // the target's NVFP4 rule first: it comes before the shard's in transfer.h's list
        nvfp4_target_layout(targets.at(i).layout, IndexedName("desc.target_layouts", i));
        sh = resolve_nvfp4_shard(shards[i], nv->rows, nv->cols, columnwise, shard_name);
      }
      add_read_spans(*nv, i, "desc.tensors", spans);
      add_nvfp4_destination(parts, sharded ? &sh : nullptr, i, targets, desc.global_scale, nv->device,
                            "the tensors are", spans, result);
      continue;
    }
    if (sharded) {  // this receiver's part of the trainer's tensor
      const Shard sh = resolve_shard(shards[i], t.rows, t.cols, columnwise, shard_name);
      const CheckedDestination d = check_destination(targets, i, t.format, sh.values_bytes(), sh.scale_rows,
                                                     sh.scale_cols, columnwise, t.device, "the tensors are", fixup,
                                                     spans);
      add_read_spans(t, i, "desc.tensors", spans);
      add_shard_jobs(jobs, byte_pointer(dir.data->dl_tensor), t.cols, dir.source, sh, d, shard_name);
      continue;
    }
    const int64_t values_bytes = t.rows * t.cols;  // validated when the tensor was created
    const CheckedDestination d = check_destination(targets, i, t.format, values_bytes, dir.scale_rows,
                                                   dir.scale_cols, columnwise, t.device, "the tensors are", fixup, spans);
    add_read_spans(t, i, "desc.tensors", spans);
    add_tensor_jobs(jobs, byte_pointer(dir.data->dl_tensor), values_bytes, dir.source, columnwise, d);
  }
  check_no_overlap(spans);
  return result;
}

}  // namespace mxfp8
