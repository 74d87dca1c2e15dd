// The transfer's calls (transfer.h): mxfp8_transfer, mxfp8_transfer_check and mxfp8_bucket_parts, each
// the desc read (transfer/desc.cpp) and handed to the transfer's job builders (src/transfer/); the plan's
// calls are in plan.cpp.
#include <algorithm>
#include <vector>

#include "api/export_internal.hpp"
#include "core/error.hpp"
#include "core/memory_span.hpp"
#include "transfer/desc.hpp"
#include "transfer/jobs.hpp"

using namespace mxfp8;

namespace {

// The layout's two outputs are plain host memory the caller points at: neither may land on the other or on
// what the call reads (the desc, the arrays of it a bucket's layout reads, each shard and its row pieces), as
// for every call's buffers. Written after every check, they would otherwise give a total inside parts[], or a
// desc or shard overwritten. Run after the plan, which validated the shards read here.
void check_bucket_parts_outputs(const mxfp8_transfer_desc &caller, const mxfp8_transfer_desc &d,
                                const mxfp8_bucket_part *parts, const uint64_t *total_bytes) {
  std::vector<Span> spans;
  add_span(spans, parts, d.count * sizeof(mxfp8_bucket_part), "parts", kNoIndex, true);
  if (total_bytes) add_span(spans, total_bytes, sizeof(uint64_t), "total_bytes", kNoIndex, true);
  add_span(spans, &caller, caller.struct_size, "desc", kNoIndex, false);
  add_span(spans, d.tensors, d.count * sizeof(*d.tensors), "desc.tensors", kNoIndex, false);
  if (d.directions) add_span(spans, d.directions, d.count * sizeof(*d.directions), "desc.directions", kNoIndex, false);
  if (d.shards) {
    add_span(spans, d.shards, d.count * sizeof(*d.shards), "desc.shards", kNoIndex, false);
    for (size_t i = 0; i < d.count; ++i) {
      const mxfp8_shard *shard = d.shards[i];
      if (!shard) continue;
      add_span(spans, shard, shard->struct_size, "desc.shards", i, false);
      if (shard->row_pieces)
        add_span(spans, shard->row_pieces, 2 * shard->num_row_pieces * sizeof(int64_t), "desc.shards", i, false,
                 "row_pieces");
    }
  }
  if (d.target_layouts)
    add_span(spans, d.target_layouts, d.count * sizeof(*d.target_layouts), "desc.target_layouts", kNoIndex, false);
  check_no_overlap(spans);
}

}  // namespace

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_parts(const mxfp8_transfer_desc *desc, uint64_t alignment,
                                                     mxfp8_bucket_part *parts, uint64_t *total_bytes) {
  return guarded([&] {
    const mxfp8_transfer_desc d = read_transfer_desc(desc, TransferVerb::PlanBucket);
    if (d.count > 0 && !parts) fail(MXFP8_ERROR_INVALID_ARGUMENT, "parts is NULL");
    uint64_t total = 0;
    const std::vector<mxfp8_bucket_part> planned =
        plan_bucket_parts(tensors_of(d), d.scale_fixup, alignment, total_bytes ? &total : nullptr);
    check_bucket_parts_outputs(*desc, d, parts, total_bytes);
    std::copy(planned.begin(), planned.end(), parts);
    *total_bytes = total;
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_transfer(const mxfp8_transfer_desc *desc, void *stream) {
  return guarded([&] {
    const ExportJobs work = transfer_jobs(read_transfer_desc(desc, TransferVerb::Run));
    run_export_jobs(work, stream);
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_transfer_check(const mxfp8_transfer_desc *desc) {
  return guarded([&] { transfer_jobs(read_transfer_desc(desc, TransferVerb::Check)); });
}
