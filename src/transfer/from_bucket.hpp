// A bucket's manifest (what a FROM_BUCKET transfer desc says of the bucket's parts) checked against the
// bucket: the one place its rules live. mxfp8_transfer_check with TO_NOTHING runs it for a receiver that
// reads the bytes itself; an import from the bucket runs it, then checks only its destinations.
#pragma once

#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "mxfp8/mxfp8.h"
#include "api/layouts.hpp"
#include "api/shard.hpp"

namespace mxfp8 {

// Entry i of a manifest, checked: every part inside the bucket, of exactly the bytes its shape, format,
// direction and layout give, sharing no byte with another part.
struct CheckedEntry {
  int32_t format;
  bool columnwise;
  const LayoutInfo *layout;  // of the scales part as the bucket carries it
  // MXFP8: the logical (M, K); NVFP4: the stored matrix (rowwise (M, K), columnwise (K, M)).
  int64_t rows, cols;
  int64_t values_bytes;
  int64_t scale_rows, scale_cols;  // S: what one scale per block gives for (rows, cols)
  const uint8_t *values;           // base + values_offset
  const uint8_t *scales;           // base + scales_offset
  bool sharded = false;            // desc.shards[i] set: `shard` is it, resolved (NVFP4: of the stored matrix)
  Shard shard;
  // NVFP4 only: the float32 amax part (1, or one per row) and the E4M3_MAX it decodes with.
  const uint8_t *amax = nullptr;
  int64_t amax_count = 0;
  int32_t e4m3_max = 0;
};

struct CheckedManifest {
  const uint8_t *base = nullptr;  // the bucket's first byte (NULL when count == 0)
  int64_t size = 0;
  std::vector<CheckedEntry> entries;
};

// Fails with MXFP8_ERROR_INVALID_ARGUMENT (MXFP8_ERROR_UNSUPPORTED for row pieces of a columnwise NVFP4
// entry) naming the field. Reads the bucket's address and size only, so it accepts memory of any device.
// `d` is a FROM_BUCKET desc (read_transfer_desc); its destination arrays are not looked at.
CheckedManifest check_bucket_manifest(const mxfp8_transfer_desc &d);

}  // namespace mxfp8
