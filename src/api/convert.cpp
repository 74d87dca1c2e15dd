// mxfp8_convert and mxfp8_grouped_convert: a tensor's or grouped experts' scales, as the producer
// stores them, written in an engine's layout (layouts.hpp) into caller buffers, values alongside.
// Everything is checked first; the work is one job list run in one launch, the same jobs the import
// runs.
#include <algorithm>
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
};

ConvertRequest read_convert_options(const mxfp8_convert_options *given) {
  const mxfp8_convert_options defaults = MXFP8_CONVERT_OPTIONS_INIT;
  ConvertRequest r{read_sized_struct(given, defaults, sizeof(mxfp8_convert_options), "mxfp8_convert_options",
                                     "MXFP8_CONVERT_OPTIONS_INIT"),
                   nullptr, false};
  check_enum(r.options.direction, "options.direction",
             {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"}, {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
  r.target = &layout_info(r.options.target, "options.target");
  r.zero_as_one = zero_as_one(r.options.scale_fixup, "options.scale_fixup");
  return r;
}

// The values output, when given (required by a target that permutes value rows): `bytes` FP8 values.
uint8_t *check_values_output(const DLTensor *values, const ConvertRequest &r, int32_t format, int64_t bytes,
                             const DLDevice &device, const char *device_of, std::vector<Span> &spans) {
  if (!values) {
    if (r.target->permutes_value_rows)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "values is NULL, but options.target ", r.target->enum_name,
           " permutes value rows: the values must be written with their scales");
    return nullptr;
  }
  uint8_t *out = expect_buffer(*values, {"values", Holds::Fp8Values, format, &device, device_of, bytes});
  spans.push_back(span_of(out, bytes, "values", kNoIndex, true));
  return out;
}

// The jobs writing the values of `groups` stacked matrices of group_rows x cols into the target: a copy,
// or a row-permuted copy for a target that moves rows (all groups in one job).
void add_values_jobs(std::vector<ScaleJob> &jobs, const LayoutInfo &target, const uint8_t *src, uint8_t *dst,
                     int64_t groups, int64_t group_rows, int64_t cols) {
  if (!target.permutes_value_rows) return add_copy_jobs(jobs, src, dst, groups * group_rows * cols);
  if (groups * group_rows * cols > 0) jobs.push_back(permuted_rows_job(target.value, src, dst, groups, group_rows, cols));
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
  const int64_t bytes = layout_bytes(*r.target, dir.scale_rows, dir.scale_cols, columnwise, "options.target");
  ExportJobs work;
  work.device = t->device;
  std::vector<Span> spans;
  add_read_spans(*t, kNoIndex, "the tensor's", spans);
  const LayoutBuffer out = expect_layout_buffer(*scales, *r.target, bytes, 1, dir.scale_rows, dir.scale_cols, "scales",
                                                t->device, "the tensor is");
  spans.push_back(span_of(out.data, out.writable, "scales", kNoIndex, true));
  const int64_t values_bytes = t->rows * t->cols;  // validated when the tensor was created
  uint8_t *values_out = check_values_output(values, r, t->format, values_bytes, t->device, "the tensor is", spans);
  check_no_overlap(spans);
  if (values_out) add_values_jobs(work.jobs, *r.target, byte_pointer(dir.data->dl_tensor), values_out, 1, t->rows, t->cols);
  if (bytes > 0) {
    work.jobs.push_back(scale_job(dir.source, r.target->value, columnwise, out.data, r.zero_as_one));
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
  const int64_t expert_bytes = layout_bytes(*r.target, n, g->scale_cols, false, "options.target");
  const int64_t bytes = checked_mul(experts, expert_bytes, "the stacked scales' size");
  ExportJobs work;
  work.device = g->device;
  const DLTensor &data = g->data->dl_tensor, &stored = g->scales->dl_tensor;
  std::vector<Span> spans{
      span_of(byte_pointer(data), checked_numel(data, "data"), "grouped data", kNoIndex, false),
      span_of(byte_pointer(stored), checked_numel(stored, "scale_inv"), "grouped scale_inv", kNoIndex, false)};
  const LayoutBuffer out = expect_layout_buffer(*scales, *r.target, bytes, experts, n, g->scale_cols, "scales",
                                                g->device, "the experts are");
  spans.push_back(span_of(out.data, out.writable, "scales", kNoIndex, true));
  const int64_t values_bytes = checked_mul(checked_mul(experts, n, "the experts' values"), g->cols, "the experts' values");
  uint8_t *values_out = check_values_output(values, r, g->format, values_bytes, g->device, "the experts are", spans);
  check_no_overlap(spans);
  // The experts' values are back to back in row order (mxfp8_grouped_desc): one job for all of them.
  if (values_out) add_values_jobs(work.jobs, *r.target, byte_pointer(data), values_out, experts, n, g->cols);
  if (expert_bytes > 0)
    for (int64_t e = 0; e < experts; ++e) {
      work.jobs.push_back(scale_job(g->sources[e], r.target->value, false, out.data + e * expert_bytes, r.zero_as_one));
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
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), r.options.stream);
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_grouped_convert(const mxfp8_grouped_tensor *grouped,
                                                        const mxfp8_convert_options *options, DLTensor *values,
                                                        DLTensor *scales) {
  return guarded([&] {
    const ConvertRequest r = read_convert_options(options);
    const ExportJobs work = grouped_convert_jobs(grouped, r, values, scales);
    run_jobs_on(work.device, work.jobs.data(), work.jobs.size(), r.options.stream);
  });
}
