// mxfp8_plan: a transfer checked once and kept as its jobs, so that the transfer a trainer repeats every
// step is one launch with no checks, no allocation and no synchronization (capturable in a CUDA graph).
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "api/export_internal.hpp"
#include "transfer/desc.hpp"
#include "api/tensor.hpp"
#include "cuda/cuda_runtime.hpp"

struct mxfp8_plan {
  mxfp8::ExportJobs work;
  // One reference each, so every source buffer's owner outlives the plan (its deleter runs only after
  // the plan's release).
  std::vector<const mxfp8_tensor *> tensors;  // of either format
  ~mxfp8_plan() {
    for (const mxfp8_tensor *t : tensors) mxfp8::release(t);
  }
};

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_transfer_prepare(const mxfp8_transfer_desc *desc, mxfp8_plan **out) {
  return guarded([&] {
    // The desc is read once: its arrays are the caller's, and the plan must keep what was checked.
    const mxfp8_transfer_desc d = read_transfer_desc(desc, TransferVerb::Prepare);
    if (!out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL");
    auto plan = std::make_unique<mxfp8_plan>();
    plan->work = transfer_jobs(d);
    // The header promises a preparation makes the immediate call's checks and a run fails only for CUDA
    // reasons: a build without CUDA refuses a plan over CUDA memory here, as the immediate call does.
    const ExportJobs &work = plan->work;
    if ((!work.jobs.empty() || !work.global_scales.empty()) && memory_of(work.device, "the transfer") == Memory::Cuda)
      cuda::require_compiled_in();
    // Reserved before any retain: a push_back that threw after its retain would leak that reference.
    const size_t kept = d.source == MXFP8_TRANSFER_FROM_TENSORS ? d.count : 0;
    plan->tensors.reserve(kept);
    for (size_t i = 0; i < kept; ++i) {
      retain(d.tensors[i]);
      plan->tensors.push_back(d.tensors[i]);
    }
    *out = plan.release();
  });
}

extern "C" MXFP8_API mxfp8_status mxfp8_plan_run(const mxfp8_plan *plan, void *stream) {
  return guarded([&] {
    if (!plan) fail(MXFP8_ERROR_INVALID_ARGUMENT, "plan is NULL");
    run_export_jobs(plan->work, stream);
  });
}

extern "C" MXFP8_API void mxfp8_plan_release(mxfp8_plan *plan) { delete plan; }
