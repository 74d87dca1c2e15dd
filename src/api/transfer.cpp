// The transfer's calls (transfer.h): mxfp8_transfer, mxfp8_transfer_check and mxfp8_bucket_parts, each
// the desc read (transfer/desc.cpp) and handed to the transfer's job builders (src/transfer/); the plan's
// calls are in plan.cpp.
#include <algorithm>
#include <vector>

#include "api/export_internal.hpp"
#include "core/error.hpp"
#include "transfer/desc.hpp"
#include "transfer/jobs.hpp"

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_bucket_parts(const mxfp8_transfer_desc *desc, uint64_t alignment,
                                                     mxfp8_bucket_part *parts, uint64_t *total_bytes) {
  return guarded([&] {
    const mxfp8_transfer_desc d = read_transfer_desc(desc, TransferVerb::PlanBucket);
    if (d.count > 0 && !parts) fail(MXFP8_ERROR_INVALID_ARGUMENT, "parts is NULL");
    uint64_t total = 0;
    const std::vector<mxfp8_bucket_part> planned =
        plan_bucket_parts(tensors_of(d), d.scale_fixup, alignment, total_bytes ? &total : nullptr);
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
