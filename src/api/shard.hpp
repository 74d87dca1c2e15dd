// A caller's mxfp8_shard, checked against one direction of one tensor, and the jobs that move the shard's
// values and compact scales straight out of the tensor's storage: what mxfp8_export_components with
// options.shard, the sharded bucket export and the sharded import share.
#pragma once

#include <cstdint>
#include <vector>

#include "mxfp8/mxfp8.h"
#include "core/scale_job.hpp"
#include "core/scale_source.hpp"

namespace mxfp8 {

struct RowRange {
  int64_t begin;
  int64_t end;
};

// A legal shard: its row pieces (rows of M, in output order), its columns, and its compact scale matrix
// (rowwise (rows, ceil(cols/block)); columnwise (ceil(rows/block), cols)). `block` is 32 for MXFP8, 16 for
// an NVFP4 tensor's stored matrix (resolve_nvfp4_shard).
struct Shard {
  std::vector<RowRange> pieces;
  int64_t rows = 0;
  int64_t col_begin = 0;
  int64_t col_end = 0;
  int64_t scale_rows = 0;
  int64_t scale_cols = 0;
  bool columnwise = false;
  int64_t block = kBlockSize;
  int64_t cols() const { return col_end - col_begin; }
  int64_t values_bytes() const { return rows * cols(); }
  int64_t scales_bytes() const { return scale_rows * scale_cols; }
  // The rows of the shard's S that piece p fills, and where they start in the stored S.
  RowRange scale_rows_of(const RowRange &piece) const;
};

// Checks `given` (NULL: the whole tensor) against a tensor of `rows` x `cols` values whose scale blocks
// run along K (rowwise) or along M (columnwise). `name` names the shard in messages ("shard",
// "shards[3]"). Fails with MXFP8_ERROR_INVALID_ARGUMENT naming the field and the rule it breaks.
Shard resolve_shard(const mxfp8_shard *given, int64_t rows, int64_t cols, bool columnwise, const char *name,
                    int64_t block = kBlockSize);

// The same for an NVFP4 tensor of logical (rows, cols) = (M, K), resolved in terms of its stored matrix,
// whose 16-value blocks run along the stored rows: rowwise that matrix is (M, K), so the shard is read as
// an MXFP8 rowwise one with blocks of 16; columnwise it is the (K, M) transpose, so the shard's rows of M
// are stored columns (boundaries multiples of 16, or M) and its columns of K are one range of stored rows.
// The result is always a rowwise Shard of the stored matrix. Several row pieces of a columnwise shard
// would be several column windows of the stored matrix, which a Shard does not describe: refused with
// MXFP8_ERROR_UNSUPPORTED.
Shard resolve_nvfp4_shard(const mxfp8_shard *given, int64_t rows, int64_t cols, bool columnwise, const char *name);

// The same shard of packed 4-bit values counted in bytes (its columns halved; they are even, being
// multiples of 16 or the stored matrix's even width): what add_shard_value_jobs copies for NVFP4.
Shard packed_value_bytes(const Shard &stored);

// The jobs writing the shard's compact scales, row-major, at `dst` (scale_rows x scale_cols), read from
// `source` (the tensor's whole S, as stored).
void add_shard_scale_jobs(std::vector<ScaleJob> &jobs, const ScaleSource &source, const Shard &shard, uint8_t *dst);
// The same into the 128x4 swizzled layout (MXFP8_SCALE_LAYOUT_128X4: the shard's S, or S^T for
// columnwise scales, padding zeroed). Fails with MXFP8_ERROR_UNSUPPORTED, naming `name`, for what one
// pass cannot do: a window of a swizzled source, or row pieces that do not fill whole tiles.
void add_shard_swizzled_scale_jobs(std::vector<ScaleJob> &jobs, const ScaleSource &source, const Shard &shard,
                                   uint8_t *dst, const char *name);
// The jobs copying the shard's values, row-major (rows x cols), to `dst` from the tensor's row-major
// values (`cols` = K per row).
void add_shard_value_jobs(std::vector<ScaleJob> &jobs, const uint8_t *values, int64_t cols, const Shard &shard,
                          uint8_t *dst);

struct Direction;

// mxfp8_export_components with options.shard set (the options read and checked, `dir` the direction they
// name): resolves the shard, makes both outputs (views, or copies by one launch on o.stream) and writes
// the non-NULL output pointers.
void export_shard(const mxfp8_tensor &tensor, const Direction &dir, const mxfp8_export_options &o,
                  DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales);

}  // namespace mxfp8
