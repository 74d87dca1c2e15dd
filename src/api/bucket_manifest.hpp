// A bucket's manifest checked against the bucket: the one place its rules live. mxfp8_bucket_manifest_check
// runs it for a binding that reads the bytes itself; mxfp8_import_bucket (and its prepared form) runs it,
// then checks only its destinations.
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
  bool sharded = false;            // manifest.shards[i] set: `shard` is it, resolved (NVFP4: of the stored matrix)
  Shard shard;
  // NVFP4 only: the float32 amax part (1, or one per row) and the E4M3_MAX it decodes with.
  const uint8_t *amax = nullptr;
  int64_t amax_count = 0;
  int32_t e4m3_max = 0;
};

// What messages call the fields: mxfp8_bucket_manifest's names (kManifestNames), or those of the transfer
// desc a FROM_BUCKET transfer describes the same bucket with (kTransferNames).
struct ManifestNames {
  const char *bucket;
  const char *parts;       // the values and scales parts
  const char *amax_parts;  // the NVFP4 amax parts
  const char *e4m3_max, *e4m3_max_suffix;
  const char *ndims, *shapes, *formats, *directions, *layouts, *shards, *scales_ndims, *scales_shapes, *global_scales;
};
extern const ManifestNames kManifestNames, kTransferNames;

struct CheckedManifest {
  const ManifestNames *names = &kManifestNames;
  mxfp8_bucket_manifest manifest;  // as the caller's version gave it, later fields at their defaults
  const uint8_t *base = nullptr;   // the bucket's first byte (NULL when count == 0)
  int64_t size = 0;
  std::vector<CheckedEntry> entries;
};

// Fails with MXFP8_ERROR_INVALID_ARGUMENT (MXFP8_ERROR_UNSUPPORTED for row pieces of a columnwise NVFP4
// entry) naming the field. Reads the bucket's address and size only, so it accepts memory of any device.
CheckedManifest check_bucket_manifest(const DLTensor *bucket, const mxfp8_bucket_manifest *manifest,
                                      const ManifestNames &names);

}  // namespace mxfp8
