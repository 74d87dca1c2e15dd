// The transfer description read and turned into work: what mxfp8_transfer, mxfp8_transfer_check,
// mxfp8_transfer_prepare and mxfp8_bucket_parts share (transfer.cpp, plan.cpp).
#pragma once

#include "mxfp8/mxfp8.h"
#include "api/export_internal.hpp"

namespace mxfp8 {

// Which call reads the desc: each takes its own destinations (TO_NOTHING only Check, and PlanBucket only
// FROM_TENSORS, TO_BUCKET).
enum class TransferVerb { Run, Check, Prepare, PlanBucket };

// The caller's desc as this build knows it (later fields at their defaults), its enums, reserved field and
// count checked, and every array that its source and destination do not read refused when set.
mxfp8_transfer_desc read_transfer_desc(const mxfp8_transfer_desc *given, TransferVerb verb);

// Every check of the transfer `d` (read by read_transfer_desc), then its jobs; none for TO_NOTHING.
ExportJobs transfer_jobs(const mxfp8_transfer_desc &d);

}  // namespace mxfp8
