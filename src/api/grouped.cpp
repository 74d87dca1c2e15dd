// Grouped MoE experts: one flat values buffer and one flat scale buffer, checked once, exported per
// expert (as ordinary mxfp8_tensor handles viewing the flat buffers) or stacked [count, N, ...]
// (mxfp8_grouped_export: every expert, or the chosen ones).
#include "api/grouped.hpp"
#include "api/outputs.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>

#include "core/call_allocations.hpp"
#include "core/dlpack_tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "api/export_internal.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"
#include "api/tensor.hpp"

namespace mxfp8 {
namespace {

constexpr size_t kGroupedDescV1Size = sizeof(mxfp8_grouped_desc);
constexpr int32_t kMaxExperts = 1 << 20;

// Bytes of one expert's scales in the flat buffer, and the shape they are viewed with.
std::vector<int64_t> expert_scale_shape(const mxfp8_grouped_tensor &g, int64_t rows) {
  if (g.scale_packing == MXFP8_GROUPED_SCALES_COMPACT) return {rows, g.scale_cols};
  return {checked_round_up(rows, kTileRows, "an expert's padded scale row count"),
          checked_round_up(g.scale_cols, kTileCols, "an expert's padded scale column count")};
}

// The same shape's bytes, with the same checks (and messages), making no vector: create runs it per expert.
int64_t expert_scale_bytes(const mxfp8_grouped_tensor &g, int64_t rows) {
  if (g.scale_packing == MXFP8_GROUPED_SCALES_COMPACT) return checked_mul(rows, g.scale_cols, "an expert's scale size");
  const int64_t padded_rows = checked_round_up(rows, kTileRows, "an expert's padded scale row count");
  const int64_t padded_cols = checked_round_up(g.scale_cols, kTileCols, "an expert's padded scale column count");
  return checked_mul(padded_rows, padded_cols, "an expert's scale size");
}

std::unique_ptr<mxfp8_grouped_tensor> create_grouped(const mxfp8_grouped_desc &given) {
  const mxfp8_grouped_desc defaults = MXFP8_GROUPED_DESC_INIT;
  const mxfp8_grouped_desc d =
      read_sized_struct(&given, defaults, kGroupedDescV1Size, "mxfp8_grouped_desc", "MXFP8_GROUPED_DESC_INIT");
  check_enum(d.format, "desc.format", {{MXFP8_FORMAT_E4M3, "MXFP8_FORMAT_E4M3"}, {MXFP8_FORMAT_E5M2, "MXFP8_FORMAT_E5M2"}});
  check_enum(d.scale_layout, "desc.scale_layout",
             {{MXFP8_SCALE_LAYOUT_ROW_MAJOR, "MXFP8_SCALE_LAYOUT_ROW_MAJOR"},
              {MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, "MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED"}});
  check_enum(d.scales, "desc.scales",
             {{MXFP8_GROUPED_SCALES_PADDED, "MXFP8_GROUPED_SCALES_PADDED"},
              {MXFP8_GROUPED_SCALES_COMPACT, "MXFP8_GROUPED_SCALES_COMPACT"}});
  if (d.reserved != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.reserved is ", d.reserved, ", must be 0");
  if (d.scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED && d.scales == MXFP8_GROUPED_SCALES_COMPACT)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "GEMM-swizzled scales come in 128x4 tiles, so they cannot be "
         "MXFP8_GROUPED_SCALES_COMPACT: use MXFP8_GROUPED_SCALES_PADDED");
  if (d.num_experts < 1 || d.num_experts > kMaxExperts)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.num_experts is ", d.num_experts, ", expected 1 to ", kMaxExperts);
  if (d.cols < 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.cols is ", d.cols, ", must be >= 0");
  if (!d.data) fail(MXFP8_ERROR_MISSING_DATA, "desc.data is NULL: the experts have no values");
  if (!d.scale_inv) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scale_inv is NULL: the experts have no scales");
  if (d.data == d.scale_inv)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.data and desc.scale_inv are the same DLManagedTensorVersioned");
  check_version(*d.data, "desc.data");
  check_version(*d.scale_inv, "desc.scale_inv");

  auto g = std::make_unique<mxfp8_grouped_tensor>();
  g->format = static_cast<mxfp8_format>(d.format);
  g->scale_layout = static_cast<mxfp8_scale_layout>(d.scale_layout);
  g->scale_packing = static_cast<mxfp8_grouped_scales>(d.scales);
  g->cols = d.cols;
  g->scale_cols = ceil_div(d.cols, kBlockSize);
  const auto experts = static_cast<size_t>(d.num_experts);
  g->rows.reserve(experts);
  g->first_row.reserve(experts);
  g->scale_offset.reserve(experts);
  g->sources.reserve(experts);
  int64_t total_rows = 0, scale_end = 0;
  for (int32_t e = 0; e < d.num_experts; ++e) {
    const int64_t rows = d.expert_rows ? d.expert_rows[e] : d.uniform_rows;
    if (rows < 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, d.expert_rows ? "desc.expert_rows[" : "desc.uniform_rows", d.expert_rows ? cat(e, "]") : "",
           " is ", rows, ", must be >= 0");
    g->rows.push_back(rows);
    g->first_row.push_back(total_rows);
    total_rows = checked_add(total_rows, rows, "the experts' total rows");
    const int64_t bytes = expert_scale_bytes(*g, rows);
    const int64_t offset = d.scale_offsets ? d.scale_offsets[e] : scale_end;
    if (offset < 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scale_offsets[", e, "] is ", offset, ", must be >= 0");
    if (d.scale_offsets && offset > INT64_MAX - bytes)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scale_offsets[", e, "] is ", offset, ": with the expert's ", bytes,
           " bytes of scales it ends past INT64_MAX");
    g->scale_offset.push_back(offset);
    scale_end = std::max(scale_end, checked_add(offset, bytes, "an expert's scale end"));
  }

  const DLTensor &data = d.data->dl_tensor, &scales = d.scale_inv->dl_tensor;
  g->device = data.device;
  memory_of(data.device, "desc.data");
  expect_buffer(data, {"desc.data", Holds::Fp8Values, g->format, nullptr, nullptr, -1});
  const int64_t values = checked_numel(data, "desc.data");
  const int64_t expected = checked_mul(total_rows, d.cols, "the experts' total values");
  if (values != expected)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.data: holds ", values, " values (shape ", format_shape(data.shape, data.ndim),
         "), the experts need ", total_rows, " rows x ", d.cols, " = ", expected);
  expect_buffer(scales, {"desc.scale_inv", Holds::ScaleBytes, 0, &data.device, "desc.data is", -1});
  const int64_t scale_bytes = checked_numel(scales, "desc.scale_inv");
  const char *packing = g->scale_packing == MXFP8_GROUPED_SCALES_PADDED ? "each padded to 128 x 4" : "compact";
  if (scale_bytes < scale_end)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scale_inv: holds ", scale_bytes, " bytes, the experts' scales reach byte ",
         scale_end, " (", packing, d.scale_offsets ? ", at desc.scale_offsets" : ", back to back", ")");
  // Larger is fine, back to back too: Transformer Engine's JAX grouped quantize sizes the buffer for the worst
  // case of group sizes it does not know at trace time, so bytes past the experts' scales are never read.
  g->data = d.data;
  g->scales = d.scale_inv;
  const bool swizzled = g->scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
  const int64_t row_stride =
      g->scale_packing == MXFP8_GROUPED_SCALES_PADDED ? round_up(g->scale_cols, kTileCols) : g->scale_cols;
  for (size_t e = 0; e < g->rows.size(); ++e) {
    uint8_t *at = byte_pointer(scales) + g->scale_offset[e];
    g->sources.push_back(ScaleSource{swizzled ? at : nullptr, false, ByteMatrix{at, g->rows[e], g->scale_cols, row_stride, 1},
                                     g->rows[e], g->scale_cols});
  }
  return g;
}

DLTensor offset_by(const DLTensor &t, int64_t bytes) {
  DLTensor moved = t;
  moved.byte_offset += static_cast<uint64_t>(bytes);
  return moved;
}

bool uniform_rows(const mxfp8_grouped_tensor &g) {
  for (int64_t r : g.rows)
    if (r != g.rows.front()) return false;
  return true;
}

// The argument checks of mxfp8_grouped_export: a grouped tensor, two distinct output pointers (one may be
// NULL), and options a stacked export of stored rowwise per-32 scales can honour.
mxfp8_export_options grouped_export_options(const mxfp8_grouped_tensor *g, const mxfp8_export_options *options,
                                            DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales) {
  const char *call = "mxfp8_grouped_export";
  if (!g) fail(MXFP8_ERROR_INVALID_ARGUMENT, "grouped is NULL");
  if (!values && !scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, "values and scales are both NULL: nothing to export");
  if (values == scales)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "values and scales point to the same place: each output needs its own pointer");
  const mxfp8_export_options o = read_options(options);
  refuse_shard(o, call);
  if (o.scale_fixup != MXFP8_SCALE_FIXUP_NONE)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.scale_fixup is ", o.scale_fixup, ": ", call,
         " returns views of the stored scales where it can, so it rewrites no byte; use mxfp8_grouped_convert");
  if (o.direction != MXFP8_DIRECTION_ROWWISE)
    fail(MXFP8_ERROR_MISSING_DATA, "grouped experts carry rowwise data only: export them with direction rowwise");
  if (o.scales_granularity != MXFP8_SCALES_PER_32)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "grouped experts export their stored per-32 scales: "
         "options.scales_granularity must be MXFP8_SCALES_PER_32");
  return o;
}

}  // namespace

void hold_for_call(const mxfp8_grouped_tensor &grouped) {
  CallAllocations::hold(grouped.data);
  CallAllocations::hold(grouped.scales);
}

void retain(const mxfp8_grouped_tensor *grouped) noexcept {
  grouped->references.fetch_add(1, std::memory_order_relaxed);
}

void release(const mxfp8_grouped_tensor *grouped) noexcept {
  if (grouped->references.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (DLManagedTensorVersioned *m : {grouped->data, grouped->scales})
    if (m->deleter) m->deleter(m);
  delete grouped;
}

KeepAlive keep_alive(const mxfp8_grouped_tensor *grouped) {
  retain(grouped);
  return KeepAlive{[](const void *o) noexcept { release(static_cast<const mxfp8_grouped_tensor *>(o)); }, grouped};
}

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_grouped_tensor_create(const mxfp8_grouped_desc *desc, mxfp8_grouped_tensor **out) {
  return guarded([&] {
    if (!desc) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (!out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = create_grouped(*desc).release();
  });
}

extern "C" MXFP8_API void mxfp8_grouped_tensor_release(mxfp8_grouped_tensor *grouped) {
  if (grouped) mxfp8::release(grouped);
}

extern "C" MXFP8_API mxfp8_status mxfp8_grouped_expert(const mxfp8_grouped_tensor *g, int32_t expert, mxfp8_tensor **out) {
  return guarded([&] {
    if (!g) fail(MXFP8_ERROR_INVALID_ARGUMENT, "grouped is NULL");
    if (!out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL");
    const auto experts = static_cast<int32_t>(g->rows.size());
    if (expert < 0 || expert >= experts)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "expert ", expert, " is out of range: the group has ", experts, " experts");
    const int64_t rows = g->rows[expert];
    const std::vector<int64_t> shape{rows, g->cols}, scale_shape = expert_scale_shape(*g, rows);
    // Views of the flat buffers: each holds a reference on the group, released by its deleter.
    ManagedPtr data = make_view(keep_alive(g), offset_by(g->data->dl_tensor, g->first_row[expert] * g->cols),
                                g->data->dl_tensor.dtype, shape, compact_strides(shape), g->data->flags);
    ManagedPtr scales = make_view(keep_alive(g), offset_by(g->scales->dl_tensor, g->scale_offset[expert]),
                                  g->scales->dl_tensor.dtype, scale_shape, compact_strides(scale_shape), g->scales->flags);
    mxfp8_tensor_desc desc = MXFP8_TENSOR_DESC_INIT;
    desc.format = g->format;
    desc.scale_layout = g->scale_layout;
    desc.rowwise_data = data.get();
    desc.rowwise_scale_inv = scales.get();
    *out = create_tensor(desc).release();
    data.release();  // the expert's tensor owns both views now
    scales.release();
  });
}

namespace mxfp8 {
namespace {

// Every expert (experts NULL, count 0): one row count among them. Returns it.
int64_t check_all_experts(const mxfp8_grouped_tensor &g) {
  if (!uniform_rows(g))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "stacking needs experts of one row count; these have ", g.rows.front(),
         " and ", *std::find_if(g.rows.begin(), g.rows.end(), [&](int64_t r) { return r != g.rows.front(); }),
         " rows: export them per expert (mxfp8_grouped_expert) or choose experts of one row count");
  return g.rows.front();
}

// The chosen experts, checked: each in range, one row count among them. Returns that row count.
int64_t check_experts(const mxfp8_grouped_tensor &g, const int32_t *experts, size_t count) {
  if (count == 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "count is 0: choose at least one expert (experts NULL and count 0 export "
         "all of them)");
  if (!experts)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "experts is NULL but count is ", count, ": pass the chosen experts (experts "
         "NULL and count 0 export all of them)");
  check_count(count);
  const auto total = static_cast<int64_t>(g.rows.size());
  for (size_t i = 0; i < count; ++i)
    if (experts[i] < 0 || experts[i] >= total)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "experts[", i, "] is ", experts[i], ", out of range: the group has ", total,
           " experts");
  const int64_t n = g.rows[experts[0]];
  for (size_t i = 1; i < count; ++i)
    if (g.rows[experts[i]] != n)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "stacking needs experts of one row count: experts[0] (expert ", experts[0],
           ") has ", n, " rows, experts[", i, "] (expert ", experts[i], ") has ", g.rows[experts[i]]);
  return n;
}

// experts[i] == experts[0] + i: the chosen experts lie back to back in the flat buffers, in order.
bool consecutive(const int32_t *experts, size_t count) {
  for (size_t i = 1; i < count; ++i)
    if (experts[i] != experts[0] + static_cast<int64_t>(i)) return false;
  return true;
}

}  // namespace
}  // namespace mxfp8

extern "C" MXFP8_API mxfp8_status mxfp8_grouped_export(const mxfp8_grouped_tensor *g, const int32_t *experts,
                                                       size_t count, const mxfp8_export_options *options,
                                                       DLManagedTensorVersioned **values,
                                                       DLManagedTensorVersioned **scales) {
  return guarded([&] {
    const mxfp8_export_options o = grouped_export_options(g, options, values, scales);
    hold_for_call(*g);
    // experts NULL and count 0: every expert in order, which is the same export of experts 0..E-1 (read
    // as such below; no array of them is made).
    const bool all = !experts && count == 0;
    const int64_t n = all ? check_all_experts(*g) : check_experts(*g, experts, count);
    if (all) count = g->rows.size();
    const auto expert = [&](size_t i) { return all ? i : static_cast<size_t>(experts[i]); };
    const int64_t c = g->scale_cols, k = g->cols;
    const auto chosen = static_cast<int64_t>(count);
    const std::vector<int64_t> values_shape{chosen, n, k}, scales_shape{chosen, n, c};
    const bool in_order = all || consecutive(experts, count);
    const uint64_t read_only = DLPACK_FLAG_BITMASK_READ_ONLY;

    // Views where the bytes already lie so; everything else is copied in one launch. The jobs merge as
    // they are made (append_coalesced: experts of whole 128-row tiles stored back to back are one job),
    // and room for them is made at most twice: a few at the first job (none for views alone), then what
    // every expert left could need.
    ManagedPtr values_out, scales_out;
    bool scales_view = scales && in_order && g->scale_packing == MXFP8_GROUPED_SCALES_COMPACT;
    for (size_t i = 1; i < count && scales_view; ++i)
      scales_view = g->scale_offset[expert(i)] == g->scale_offset[expert(0)] + static_cast<int64_t>(i) * n * c;
    // An upper bound on the jobs still to be appended: each expert's copy jobs (whole rows of
    // kCopyRowBytes and a tail), and one scale job each.
    size_t jobs_left = 0;
    if (values && !in_order && n * k > 0)
      jobs_left += count * static_cast<size_t>((n * k >= kCopyRowBytes) + (n * k % kCopyRowBytes != 0));
    if (scales && !scales_view && n * c > 0) jobs_left += count;
    std::vector<ScaleJob> jobs;
    const auto append = [&](const ScaleJob &job) {
      if (jobs.size() == jobs.capacity())
        jobs.reserve(jobs.empty() ? std::min<size_t>(4, jobs_left) : jobs.size() + jobs_left);
      append_coalesced(jobs, job);
      --jobs_left;
    };
    std::vector<Span> spans;
    spans.reserve(4);
    spans.push_back(
        span_of(byte_pointer(g->data->dl_tensor), checked_numel(g->data->dl_tensor, "data"), "desc.data", kNoIndex, false));
    spans.push_back(span_of(byte_pointer(g->scales->dl_tensor), checked_numel(g->scales->dl_tensor, "scale_inv"),
                            "desc.scale_inv", kNoIndex, false));
    if (values) {
      if (in_order) {
        values_out = make_view(keep_alive(g), offset_by(g->data->dl_tensor, g->first_row[expert(0)] * k),
                               values_dtype(g->format, o.values_dtype), values_shape, compact_strides(values_shape),
                               g->data->flags & read_only);
      } else {
        values_out = allocate_copy(g->device, values_dtype(g->format, o.values_dtype), values_shape,
                                   Allocation{o.allocator, o.stream});
        uint8_t *dst = byte_pointer(values_out->dl_tensor);
        const int64_t bytes = chosen * n * k;
        spans.push_back(span_of(bytes > 0 ? dst : nullptr, bytes, "the values copy from options.allocator", kNoIndex, true));
        const uint8_t *src = byte_pointer(g->data->dl_tensor);
        ScaleJob parts[2];
        for (size_t i = 0; i < count && n * k > 0; ++i) {
          const size_t made = copy_jobs(src + g->first_row[expert(i)] * k, dst + static_cast<int64_t>(i) * n * k, n * k, parts);
          for (size_t p = 0; p < made; ++p) append(parts[p]);
        }
      }
    }
    if (scales) {
      if (scales_view) {
        scales_out = make_view(keep_alive(g), offset_by(g->scales->dl_tensor, g->scale_offset[expert(0)]),
                               scales_dtype(o.scales_dtype), scales_shape, compact_strides(scales_shape),
                               g->scales->flags & read_only);
      } else {
        scales_out = allocate_copy(g->device, scales_dtype(o.scales_dtype), scales_shape, Allocation{o.allocator, o.stream});
        uint8_t *dst = byte_pointer(scales_out->dl_tensor);
        const int64_t bytes = chosen * n * c;
        spans.push_back(span_of(bytes > 0 ? dst : nullptr, bytes, "the scales copy from options.allocator", kNoIndex, true));
        for (size_t i = 0; i < count && n * c > 0; ++i)
          append(compact_job(g->sources[expert(i)], dst + static_cast<int64_t>(i) * n * c));
      }
    }
    check_no_overlap(spans);
    run_jobs_on(g->device, jobs.data(), jobs.size(), o.stream);
    if (scales) *scales = scales_out.release();
    if (values) *values = values_out.release();
  });
}
