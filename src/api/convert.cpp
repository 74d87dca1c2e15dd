// mxfp8_convert and mxfp8_grouped_convert: a tensor's or grouped experts' scales, as the producer
// stores them, written in an engine's layout (layouts.hpp) into caller buffers, values alongside.
// Everything is checked first; the work is one job list run in one launch, the same jobs the import
// runs. An engine's padding (options.pad_*) is done by the same jobs, which write the padded matrices.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "api/export_internal.hpp"
#include "api/grouped.hpp"
#include "api/layouts.hpp"
#include "api/tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {
namespace {

struct ConvertRequest {
  mxfp8_convert_options options;
  const LayoutInfo *target;
  bool zero_as_one;
  bool padding;     // options.pad_rows_to or pad_cols_to asked for it
  bool check_only;  // MXFP8_CHECK_ONLY: the checks alone
};

// The first version ended at `stream`; the padding fields came after it, together (the second version
// ends at `flags`, padding included: 48 bytes).
constexpr size_t kConvertOptionsV1Size = offsetof(mxfp8_convert_options, pad_rows_to);
constexpr size_t kConvertOptionsV2Size = offsetof(mxfp8_convert_options, flags);

ConvertRequest read_convert_options(const mxfp8_convert_options *given) {
  const mxfp8_convert_options defaults = MXFP8_CONVERT_OPTIONS_INIT;
  ConvertRequest r{read_sized_struct(given, defaults, kConvertOptionsV1Size, "mxfp8_convert_options",
                                     "MXFP8_CONVERT_OPTIONS_INIT", {kConvertOptionsV2Size}),
                   nullptr, false, false, false};
  r.check_only = check_only(r.options.flags);
  check_enum(r.options.direction, "options.direction",
             {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
  r.target = &layout_info(r.options.target, "options.target");
  r.zero_as_one = zero_as_one(r.options.scale_fixup, "options.scale_fixup");
  const mxfp8_convert_options &o = r.options;
  if (o.pad_rows_to < 0 || o.pad_cols_to < 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.pad_rows_to and pad_cols_to are ", o.pad_rows_to, " and ", o.pad_cols_to,
         ": a multiple to pad to, or 0 for none");
  if (o.pad_cols_to % kBlockSize != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.pad_cols_to is ", o.pad_cols_to, ", not a multiple of ", kBlockSize,
         ": the padded K must end on a scale block");
  if (o.pad_scale < 0 || o.pad_scale > 254)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.pad_scale is ", o.pad_scale, ", expected an E8M0 byte 0 .. 254 (255 is NaN, "
         "which would make the padding NaN; vLLM pads with 127, 2^0)");
  r.padding = o.pad_rows_to != 0 || o.pad_cols_to != 0;
  if (r.padding && o.direction != MXFP8_DIRECTION_ROWWISE)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.pad_rows_to / pad_cols_to pad a rowwise weight (an engine's alignment of N "
         "and K); direction is columnwise");
  return r;
}

// One expert of `rows` x `cols` values (K = cols) as the convert writes it: padded when asked.
struct Extent {
  int64_t rows;
  int64_t cols;
  int64_t scale_cols;
  bool padded;  // differs from the source
};

Extent padded_extent(const ConvertRequest &r, int64_t rows, int64_t cols, int64_t scale_cols) {
  Extent e{rows, cols, scale_cols, false};
  if (!r.padding) return e;
  const int64_t to = r.options.pad_rows_to;
  if (to > 1 && r.target->value == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED) {
    if (rows % 2 != 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.target is MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED, whose rows are two halves "
           "([gate; up]) padded each on its own, but an expert has ", rows, " rows, an odd count");
    e.rows = checked_mul(2, checked_round_up(rows / 2, to, "the padded rows"), "the padded rows");
  } else if (to > 1) {
    e.rows = checked_round_up(rows, to, "the padded rows");
  }
  if (r.options.pad_cols_to > 0) {
    e.cols = checked_round_up(cols, r.options.pad_cols_to, "the padded K");
    e.scale_cols = e.cols / kBlockSize;
  }
  e.padded = e.rows != rows || e.cols != cols;
  return e;
}

// What a padded job of a source of rows x cols needs (padding.hpp): value jobs pad with zeros, layout
// jobs with the requested scale.
Padding padding_of(const ConvertRequest &r, int64_t rows, int64_t cols, bool scales) {
  return Padding{rows, cols, r.target->value == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED,
                 static_cast<uint8_t>(scales ? r.options.pad_scale : 0)};
}

// The values output, when given (required by a target that permutes value rows): `bytes` FP8 values.
uint8_t *check_values_output(const DLTensor *values, const ConvertRequest &r, int32_t format, int64_t bytes,
                             const DLDevice &device, const char *device_of, std::vector<Span> &spans) {
  if (!values) {
    if (r.target->permutes_value_rows)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "values is NULL, but options.target ", r.target->enum_name,
           " permutes value rows: the values must be written with their scales");
    if (r.padding)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "values is NULL, but options.pad_rows_to / pad_cols_to pad the weight: the padded "
           "values must be written with their scales");
    return nullptr;
  }
  uint8_t *out = expect_buffer(*values, {"values", Holds::Fp8Values, format, &device, device_of, bytes});
  spans.push_back(span_of(out, bytes, "values", kNoIndex, true));
  return out;
}

// The jobs writing the values of `groups` stacked matrices of group_rows x cols into the target, as
// `out` of each: a copy, or a row-permuted copy for a target that moves rows or a padded one (all groups
// in one job; row order kept but for the TRT-LLM targets).
void add_values_jobs(std::vector<ScaleJob> &jobs, const ConvertRequest &r, const uint8_t *src, uint8_t *dst,
                     int64_t groups, int64_t group_rows, int64_t cols, const Extent &out) {
  const LayoutInfo &target = *r.target;
  if (groups * out.rows * out.cols == 0) return;
  const int32_t order = target.permutes_value_rows ? target.value : MXFP8_SCALE_LAYOUT_COMPACT;
  if (out.padded)
    return jobs.push_back(padded_rows_job(order, src, dst, groups, out.rows, out.cols, padding_of(r, group_rows, cols, false)));
  if (!target.permutes_value_rows) return add_copy_jobs(jobs, src, dst, groups * group_rows * cols);
  jobs.push_back(permuted_rows_job(target.value, src, dst, groups, group_rows, cols));
}

// The job writing `source`'s scales (rows x cols) in the target at `dst`, padded to `out` when asked.
ScaleJob convert_scale_job(const ScaleSource &source, const ConvertRequest &r, bool columnwise, uint8_t *dst,
                           const Extent &out) {
  if (!out.padded) return scale_job(source, r.target->value, columnwise, dst, r.zero_as_one);
  return scale_job(source, r.target->value, columnwise, dst, r.zero_as_one, padding_of(r, source.rows, source.cols, true),
                   out.rows, out.scale_cols);
}

ExportJobs convert_jobs(const mxfp8_tensor *t, const ConvertRequest &r, DLTensor *values, DLTensor *scales) {
  if (!t) fail(MXFP8_ERROR_INVALID_ARGUMENT, "tensor is NULL");
  if (!scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, "scales is NULL");
  const auto direction = static_cast<mxfp8_direction>(r.options.direction);
  const bool columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
  const Direction &dir = require_direction(*t, direction);
  if (r.target->value == MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED && t->shape.size() > 2)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "options.target is MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED_GATED, which interleaves the two "
         "halves of one expert's rows, but the tensor has shape ", format_shape(t->shape),
         ": mxfp8_convert lays out one expert; convert stacked experts with mxfp8_grouped_convert");
  if (r.padding && dir.scale_rows != t->rows)  // rowwise scales hold one row per value row (padded_extent's premise)
    fail(MXFP8_ERROR_INTERNAL, "rowwise scales of ", dir.scale_rows, " rows for ", t->rows, " value rows");
  const Extent extent = padded_extent(r, t->rows, t->cols, dir.scale_cols);
  const int64_t scale_rows = r.padding ? extent.rows : dir.scale_rows;
  const int64_t bytes = layout_bytes(*r.target, scale_rows, extent.scale_cols, columnwise, "options.target");
  ExportJobs work;
  work.device = t->device;
  std::vector<Span> spans;
  add_read_spans(*t, kNoIndex, "the tensor's", spans);
  const LayoutBuffer out = expect_layout_buffer(*scales, *r.target, bytes, 1, scale_rows, extent.scale_cols, "scales",
                                                t->device, "the tensor is");
  spans.push_back(span_of(out.data, out.writable, "scales", kNoIndex, true));
  const int64_t values_bytes = checked_mul(extent.rows, extent.cols, "the padded values");  // else validated at creation
  uint8_t *values_out = check_values_output(values, r, t->format, values_bytes, t->device, "the tensor is", spans);
  check_no_overlap(spans);
  if (values_out)
    add_values_jobs(work.jobs, r, byte_pointer(dir.data->dl_tensor), values_out, 1, t->rows, t->cols, extent);
  if (bytes > 0) {
    work.jobs.push_back(convert_scale_job(dir.source, r, columnwise, out.data, extent));
    work.jobs.back().layout_bytes = out.writable;
  }
  return work;
}

ExportJobs grouped_convert_jobs(const mxfp8_grouped_tensor *g, const ConvertRequest &r, DLTensor *values,
                                DLTensor *scales) {
  if (!g) fail(MXFP8_ERROR_INVALID_ARGUMENT, "grouped is NULL");
  if (!scales) fail(MXFP8_ERROR_INVALID_ARGUMENT, "scales is NULL");
  if (r.options.direction != MXFP8_DIRECTION_ROWWISE)
    fail(MXFP8_ERROR_MISSING_DATA, "grouped experts carry rowwise data only: convert them with direction rowwise");
  const int64_t n = g->rows.front();
  const auto other = std::find_if(g->rows.begin(), g->rows.end(), [&](int64_t rows) { return rows != n; });
  if (other != g->rows.end())
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "a stacked target needs experts of one row count; these have ", n, " and ", *other,
         " rows: convert them per expert (mxfp8_grouped_expert, then mxfp8_convert)");
  const auto experts = static_cast<int64_t>(g->rows.size());
  const Extent extent = padded_extent(r, n, g->cols, g->scale_cols);
  const int64_t expert_bytes = layout_bytes(*r.target, extent.rows, extent.scale_cols, false, "options.target");
  const int64_t bytes = checked_mul(experts, expert_bytes, "the stacked scales' size");
  ExportJobs work;
  work.device = g->device;
  const DLTensor &data = g->data->dl_tensor, &stored = g->scales->dl_tensor;
  std::vector<Span> spans{
      span_of(byte_pointer(data), checked_numel(data, "data"), "grouped data", kNoIndex, false),
      span_of(byte_pointer(stored), checked_numel(stored, "scale_inv"), "grouped scale_inv", kNoIndex, false)};
  const LayoutBuffer out = expect_layout_buffer(*scales, *r.target, bytes, experts, extent.rows, extent.scale_cols, "scales",
                                                g->device, "the experts are");
  spans.push_back(span_of(out.data, out.writable, "scales", kNoIndex, true));
  const int64_t values_bytes =
      checked_mul(checked_mul(experts, extent.rows, "the experts' values"), extent.cols, "the experts' values");
  uint8_t *values_out = check_values_output(values, r, g->format, values_bytes, g->device, "the experts are", spans);
  check_no_overlap(spans);
  work.jobs.reserve(2 + (expert_bytes > 0 ? static_cast<size_t>(experts) : 0));  // once, not grown job by job
  // The experts' values are back to back in row order (mxfp8_grouped_desc): one job for all of them.
  if (values_out) add_values_jobs(work.jobs, r, byte_pointer(data), values_out, experts, n, g->cols, extent);
  if (expert_bytes > 0)
    for (int64_t e = 0; e < experts; ++e) {
      work.jobs.push_back(convert_scale_job(g->sources[e], r, false, out.data + e * expert_bytes, extent));
      work.jobs.back().layout_bytes = std::min(expert_bytes, out.writable - e * expert_bytes);  // the last may stop short
    }
  return work;
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_convert(const mxfp8_tensor *tensor, const mxfp8_convert_options *options,
                                                DLTensor *values, DLTensor *scales) {
  return guarded([&] {
    const ConvertRequest r = read_convert_options(options);
    const ExportJobs work = convert_jobs(tensor, r, values, scales);
    if (r.check_only) return;
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), r.options.stream);
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_grouped_convert(const mxfp8_grouped_tensor *grouped,
                                                        const mxfp8_convert_options *options, DLTensor *values,
                                                        DLTensor *scales) {
  return guarded([&] {
    const ConvertRequest r = read_convert_options(options);
    const ExportJobs work = grouped_convert_jobs(grouped, r, values, scales);
    if (r.check_only) return;
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), r.options.stream);
  });
}
