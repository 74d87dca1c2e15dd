// Padding a weight to an engine's alignment (mxfp8_convert_options.pad_rows_to / pad_cols_to), in the jobs
// that write it: a padded matrix M' (R' x C') whose rows and columns past the source's are padding, and
// whose rows are two halves padded each on its own for the gated layout (w13 = [gate; up], as vLLM's
// align_mxfp8_moe_weights_for_fi_trtllm pads it: gate rows to 0 .. I - 1, up rows to I' .. I' + I - 1).
// Padding values are zero; padding scales a given E8M0 byte (vLLM: 127, so that padded rows and columns
// contribute nothing). Usable on host and device.
#pragma once

#include <cstdint>

#include "core/swizzle_index.hpp"

namespace mxfp8 {

// What a job writing M' needs to know of its source: the source's extent (of one group for a row job),
// and what a padding scale is. rows == 0: the job is not padded (M' is the source).
struct Padding {
  int64_t rows = 0;
  int64_t cols = 0;      // scale columns of a layout job, bytes of a row for a value job
  bool halves = false;   // the rows are two halves, each padded on its own
  uint8_t scale = 0;     // the byte of a padding scale
};

// A padding row's "source row".
template <class Int>
constexpr Int kPaddingRow = static_cast<Int>(-1);

// The source row of row r of the padded matrix of padded_rows rows, or kPaddingRow for a padding row.
template <class Int>
MXFP8_HOST_DEVICE inline Int padded_source_row(Int source_rows, Int padded_rows, bool halves, Int r) {
  if (!halves) return r < source_rows ? r : kPaddingRow<Int>;
  const Int half = source_rows / 2, padded_half = padded_rows / 2;
  const bool second = r >= padded_half;
  const Int q = second ? r - padded_half : r;
  return q < half ? (second ? half : Int{0}) + q : kPaddingRow<Int>;
}

}  // namespace mxfp8
