// mxfp8_prepared_export: a batched, bucket or import (bucket or tensors) transfer checked once and kept as its jobs, so that the
// export a trainer repeats every step is one launch with no checks, no allocation and no
// synchronization (capturable in a CUDA graph).
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "api/bucket_manifest.hpp"
#include "api/export_internal.hpp"
#include "api/transfer.hpp"
#include "api/tensor.hpp"
#include "cuda/cuda_runtime.hpp"

// A transfer checked once and kept as its work (mxfp8_transfer_prepare, and every mxfp8_prepare_* call).
struct mxfp8_plan {
  mxfp8::ExportJobs work;
  // One reference each, so every source buffer's owner outlives the plan (its deleter runs only after
  // the plan's release).
  std::vector<const mxfp8_tensor *> tensors;  // of either format
  ~mxfp8_plan() {
    for (const mxfp8_tensor *t : tensors) mxfp8::release(t);
  }
};
// The plan under the name of the prepared calls that mxfp8_transfer_prepare replaces (issue 32).
struct mxfp8_prepared_export : mxfp8_plan {};

namespace mxfp8 {
namespace {

// Entry i is tensors[i] when `tensors` and tensors[i] are set, else nvfp4_tensors[i] (the jobs' checks
// ran first); either array may be NULL. Reserved before any retain: a push_back that threw after its
// retain would leak that reference.
void keep(mxfp8_plan &prepared, const mxfp8_tensor *const *tensors,
          const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count) {
  prepared.tensors.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const mxfp8_tensor *t = tensors && tensors[i] ? tensors[i] : nvfp4_tensor(nvfp4_tensors[i]);
    retain(t);
    prepared.tensors.push_back(t);
  }
}

// The body of every mxfp8_prepare_* call: `jobs()` builds (and so checks) the transfer, then the plan
// keeps a reference on each source tensor and is handed out. Nothing is kept when a check fails.
template <class Plan, class Jobs>
mxfp8_status prepare(Plan **out, Jobs &&jobs, const mxfp8_tensor *const *tensors = nullptr,
                     const mxfp8_nvfp4_tensor *const *nvfp4_tensors = nullptr, size_t count = 0) {
  return guarded([&] {
    if (!out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL");
    auto prepared = std::make_unique<Plan>();
    prepared->work = jobs();
    // The header promises a preparation makes the immediate call's checks and a run fails only for CUDA
    // reasons: a build without CUDA refuses a plan over CUDA memory here, as the immediate call does.
    const ExportJobs &work = prepared->work;
    if ((!work.jobs.empty() || !work.global_scales.empty()) && memory_of(work.device, "the transfer") == Memory::Cuda)
      cuda::require_compiled_in();
    keep(*prepared, tensors, nvfp4_tensors, count);
    *out = prepared.release();
  });
}

}  // namespace
}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_scales_batched(const mxfp8_tensor *const *tensors,
                                                               DLTensor *const *destinations, size_t count,
                                                               const mxfp8_export_options *options,
                                                               mxfp8_prepared_export **out) {
  return prepare(out, [&] { return batched_jobs(tensors, destinations, count, read_options(options)); }, tensors,
                 nullptr, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_bucket(const mxfp8_tensor *const *tensors, size_t count,
                                                       const mxfp8_export_options *options,
                                                       const mxfp8_bucket_entry *entries, DLTensor *bucket,
                                                       mxfp8_prepared_export **out) {
  return prepare(out, [&] { return bucket_jobs(tensors, nullptr, count, read_options(options), entries, bucket); },
                 tensors, nullptr, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_bucket_shards(const mxfp8_tensor *const *tensors,
                                                              const mxfp8_shard *const *shards, size_t count,
                                                              const mxfp8_export_options *options,
                                                              const mxfp8_bucket_entry *entries, DLTensor *bucket,
                                                              mxfp8_prepared_export **out) {
  return prepare(out, [&] { return bucket_jobs(tensors, shards, count, read_options(options), entries, bucket); },
                 tensors, nullptr, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_bucket_mixed(const mxfp8_tensor *const *tensors,
                                                             const mxfp8_nvfp4_tensor *const *nvfp4_tensors, size_t count,
                                                             const mxfp8_export_options *options,
                                                             const mxfp8_bucket_entry *entries,
                                                             const mxfp8_bucket_nvfp4_entry *nvfp4_entries,
                                                             DLTensor *bucket, mxfp8_prepared_export **out) {
  return prepare(out, [&] {
    return mixed_bucket_jobs(BucketTensors{tensors, nvfp4_tensors, nullptr, count, true}, read_options(options), entries,
                             nvfp4_entries, bucket);
  }, tensors, nvfp4_tensors, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_import_bucket(const DLTensor *bucket,
                                                              const mxfp8_bucket_manifest *manifest,
                                                              const mxfp8_import_destination *destinations,
                                                              mxfp8_prepared_export **out) {
  return prepare(out, [&] { return import_bucket_jobs(bucket, manifest, ImportTargets{destinations}, kManifestNames); });
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_import_tensors(const mxfp8_tensor *const *tensors, size_t count,
                                                               const mxfp8_export_options *options,
                                                               const mxfp8_import_destination *destinations,
                                                               mxfp8_prepared_export **out) {
  return prepare(out, [&] { return import_tensor_jobs(tensors, nullptr, count, read_options(options), destinations); },
                 tensors, nullptr, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_import_tensor_shards(const mxfp8_tensor *const *tensors,
                                                                     const mxfp8_shard *const *shards, size_t count,
                                                                     const mxfp8_export_options *options,
                                                                     const mxfp8_import_destination *destinations,
                                                                     mxfp8_prepared_export **out) {
  return prepare(out, [&] { return import_tensor_jobs(tensors, shards, count, read_options(options), destinations); },
                 tensors, nullptr, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepare_import_tensors_mixed(const mxfp8_tensor *const *tensors,
                                                                     const mxfp8_nvfp4_tensor *const *nvfp4_tensors,
                                                                     const mxfp8_shard *const *shards, size_t count,
                                                                     const mxfp8_export_options *options,
                                                                     const mxfp8_import_destination *destinations,
                                                                     DLTensor *const *global_scales, int32_t global_scale,
                                                                     mxfp8_prepared_export **out) {
  return prepare(out, [&] {
    return import_mixed_tensor_jobs(BucketTensors{tensors, nvfp4_tensors, shards, count, true}, read_options(options),
                                    ImportTargets{destinations}, global_scales, global_scale);
  }, tensors, nvfp4_tensors, count);
}

extern "C" MXFP8_API mxfp8_status mxfp8_prepared_export_run(const mxfp8_prepared_export *prepared, void *stream) {
  return guarded([&] {
    if (!prepared) fail(MXFP8_ERROR_INVALID_ARGUMENT, "prepared is NULL");
    run_export_jobs(prepared->work, stream);
  });
}

extern "C" MXFP8_API void mxfp8_prepared_export_release(mxfp8_prepared_export *prepared) { delete prepared; }

extern "C" MXFP8_API mxfp8_status mxfp8_transfer_prepare(const mxfp8_transfer_desc *desc, mxfp8_plan **out) {
  // The desc is read once: its arrays are the caller's, and the plan must keep what was checked.
  mxfp8_transfer_desc d;
  const mxfp8_status read = guarded([&] { d = read_transfer_desc(desc, TransferVerb::Prepare); });
  if (read != MXFP8_OK) return read;
  const bool tensors = d.source == MXFP8_TRANSFER_FROM_TENSORS;
  return prepare(out, [&] { return transfer_jobs(d); }, tensors ? d.tensors : nullptr, nullptr, tensors ? d.count : 0);
}

extern "C" MXFP8_API mxfp8_status mxfp8_plan_run(const mxfp8_plan *plan, void *stream) {
  return guarded([&] {
    if (!plan) fail(MXFP8_ERROR_INVALID_ARGUMENT, "plan is NULL");
    run_export_jobs(plan->work, stream);
  });
}

extern "C" MXFP8_API void mxfp8_plan_release(mxfp8_plan *plan) { delete plan; }
