#include "transfer/from_bucket.hpp"

#include <algorithm>
#include <cstddef>

#include "api/export_internal.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/indexed_name.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"
#include "core/swizzle_index.hpp"
#include "transfer/jobs.hpp"

namespace mxfp8 {

namespace {

// The desc's bucket arrays, before any entry is read: what every entry needs set (a format and a layout
// are required rather than defaulted: a 128x4 part the size of a compact one, or an E5M2 part read as
// E4M3, would import without an error and decode to noise), and the parts' amax fields against their
// formats.
void check_arrays(const mxfp8_transfer_desc &d) {
  if (!d.parts_in) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_in is NULL");
  if (!d.formats) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.formats is NULL: say each entry's format");
  if (!d.source_layouts)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.source_layouts is NULL: say the layout each entry's scales part is in");
  for (size_t i = 0; i < d.count; ++i) {
    const mxfp8_bucket_part &p = d.parts_in[i];
    if (d.formats[i] != MXFP8_FORMAT_NVFP4) {
      if (p.amax_offset != 0 || p.amax_bytes != 0)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.parts_in", i), " gives an amax part (", p.amax_bytes,
             " bytes at byte ", p.amax_offset, ") but desc.formats[", i, "] is not MXFP8_FORMAT_NVFP4: an MXFP8 entry "
             "has none (0, 0)");
    } else if (!d.e4m3_maxes) {
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.e4m3_maxes is NULL but desc.formats[", i, "] is MXFP8_FORMAT_NVFP4: "
           "say its E4M3_MAX (448, or 256 for Transformer Engine's 4over6 tensors)");
    }
  }
  if (!d.ndims) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.ndims is NULL");
  if (!d.shapes) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shapes is NULL");
  if (!d.scales_ndims != !d.scales_shapes)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, d.scales_ndims ? "desc.scales_shapes" : "desc.scales_ndims", " is NULL but ",
         d.scales_ndims ? "desc.scales_ndims" : "desc.scales_shapes", " is set: give both, or neither");
}

// A part of the bucket: inside it (offset + bytes compared without wrapping), of exactly the bytes its
// shape and layout give.
void check_part(size_t i, const char *what, uint64_t offset, uint64_t bytes, int64_t expected, const char *layout,
                int64_t bucket_size) {
  if (bytes != static_cast<uint64_t>(expected))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_in[", i, "] gives ", bytes, " bytes of ", what, ", its shape and ",
         layout, " layout give ", expected, ": the manifest does not describe this bucket");
  if (offset > static_cast<uint64_t>(bucket_size) || bytes > static_cast<uint64_t>(bucket_size) - offset)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_in[", i, "]: its ", bytes, " bytes of ", what, " at byte ", offset,
         " run past the end of a bucket of ", bucket_size, " bytes");
}

// The sender's shape of entry i's scales names S (scale_rows x scale_cols) when its last dimension is
// S's columns and the others multiply to S's rows: a shape of the right byte count that is not S (a
// transpose, another split) would have a reader index the scales wrongly.
void check_scales_shape(const mxfp8_transfer_desc &m, size_t i, const CheckedEntry &e) {
  const int32_t ndim = m.scales_ndims[i];
  if (ndim < 1 || ndim > kMaxDims)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scales_ndims[", i, "] is ", ndim, ", expected 1..", kMaxDims);
  const int64_t *shape = m.scales_shapes[i];
  if (!shape) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scales_shapes[", i, "] is NULL");
  // A product past int64 is not S's rows; a zero anywhere makes none (experts (E, 0, K): (E, 0, ceil(K/32))).
  bool names_s = shape[ndim - 1] == e.scale_cols;
  for (int32_t d = 0; d + 1 < ndim; ++d) names_s = names_s && shape[d] >= 0;
  int64_t rows = 0;
  if (!names_s || !product_fits(shape, static_cast<size_t>(ndim - 1), &rows) || rows != e.scale_rows)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scales_shapes[", i, "] is ", format_shape(shape, ndim), ", not the ",
         e.format == MXFP8_FORMAT_NVFP4 ? "NVFP4 " : "", e.columnwise ? "columnwise" : "rowwise", " scale matrix of shape ",
         format_shape(m.shapes[i], m.ndims[i]), ", which is ", e.scale_rows, " x ", e.scale_cols,
         " (its last dimension the columns, the others multiplying to the rows)");
}

// The amax part of an NVFP4 entry: 4 bytes, or 4 a row (rowwise), inside the bucket at a multiple of 4,
// and the E4M3_MAX it decodes with.
void check_amax_part(const mxfp8_transfer_desc &d, size_t i, const uint8_t *base, int64_t size, CheckedEntry &e) {
  const int32_t e4m3_max = d.e4m3_maxes[i];
  if (e4m3_max != 448 && e4m3_max != 256)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.e4m3_maxes", i), " is ", e4m3_max,
         ", expected 448 or 256 (Transformer Engine's 4over6 tensors)");
  e.e4m3_max = e4m3_max;
  const mxfp8_bucket_part &n = d.parts_in[i];
  const int64_t amax_count = static_cast<int64_t>(n.amax_bytes / sizeof(float));
  if (n.amax_bytes % sizeof(float) != 0 || (amax_count != 1 && (e.columnwise || amax_count != e.rows)))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.parts_in", i, ".amax_bytes"), " is ", n.amax_bytes,
         ", expected 4 (one float32 amax)", e.columnwise ? "" : cat(" or ", 4 * e.rows, " (one per row)"));
  if (n.amax_offset > static_cast<uint64_t>(size) || n.amax_bytes > static_cast<uint64_t>(size) - n.amax_offset)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_in[", i, "]: its ", n.amax_bytes, " bytes of amax at byte ",
         n.amax_offset, " run past the end of a bucket of ", size, " bytes");
  // The header's rule for the wire, whatever the receiver's alignment: a reader that maps the bucket at
  // an aligned address reads the floats in place.
  if (n.amax_offset % sizeof(float) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, IndexedName("desc.parts_in", i, ".amax_offset"), " is ", n.amax_offset,
         ", not a multiple of 4 (the float32 amax)");
  e.amax = base + n.amax_offset;
  // The offset is a multiple of 4; the kernels and a receiver reading the bytes itself (TO_NOTHING) read
  // floats, so the bucket's address must be one too.
  if (const uintptr_t misaligned = reinterpret_cast<uintptr_t>(e.amax) % alignof(float))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.parts_in[", i, "]: the float32 amax at byte ", n.amax_offset,
         " of the bucket is unaligned, as desc.bucket_in starts ", misaligned, " byte", misaligned == 1 ? "" : "s",
         " past a multiple of 4: give the bucket at an address aligned to 4 bytes");
  e.amax_count = amax_count;
}

// One byte range of the bucket, named for messages.
struct BucketPart {
  uint64_t begin, end;
  size_t entry;
  const char *what;  // "values", "scales" or "amax"
};

// No byte of the bucket belongs to two parts: a manifest that lists the same bytes twice (two entries,
// or an entry's scales inside its own values) describes no bucket a sender filled.
void check_parts_apart(std::vector<BucketPart> &parts) {
  std::sort(parts.begin(), parts.end(), [](const BucketPart &a, const BucketPart &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.entry < b.entry;
  });
  const auto name = [](const BucketPart &p) { return cat("desc.parts_in[", p.entry, "] ", p.what); };
  for (size_t k = 1, furthest = 0; k < parts.size(); ++k) {
    const BucketPart &p = parts[k], &before = parts[furthest];
    if (p.begin < before.end)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name(p), " (bytes ", p.begin, "..", p.end, ") and ", name(before), " (bytes ",
           before.begin, "..", before.end, ") overlap in the bucket: each byte belongs to one part");
    if (p.end > before.end) furthest = k;
  }
}

}  // namespace

CheckedManifest check_bucket_manifest(const mxfp8_transfer_desc &m) {
  CheckedManifest result;
  if (m.count == 0) return result;
  check_arrays(m);
  if (!m.bucket_in) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.bucket_in is NULL");
  const uint8_t *base = expect_buffer(*m.bucket_in, {"desc.bucket_in", Holds::Bytes, 0, nullptr, nullptr, -1});
  const int64_t size = checked_numel(*m.bucket_in, "desc.bucket_in");
  result.base = base;
  result.size = size;

  result.entries.reserve(m.count);
  std::vector<BucketPart> parts;
  parts.reserve(3 * m.count);
  for (size_t i = 0; i < m.count; ++i) {
    const int32_t ndim = m.ndims[i];
    if (ndim < 1 || ndim > kMaxDims)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.ndims[", i, "] is ", ndim, ", expected 1..", kMaxDims);
    const int64_t *shape = m.shapes[i];
    if (!shape) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shapes[", i, "] is NULL");
    // The entry named on overflow (a receiver has thousands), the string made only then.
    const auto overflow = [&] {
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shapes[", i, "] ", format_shape(shape, ndim), ": its rows or elements overflow int64");
    };
    const auto times = [&](int64_t a, int64_t b) {
      int64_t r = 0;
      if (__builtin_mul_overflow(a, b, &r)) overflow();
      return r;
    };
    for (int32_t d = 0; d < ndim; ++d)
      if (shape[d] < 0)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shapes[", i, "] ", format_shape(shape, ndim), " has a negative dimension");
    int64_t rows = 0;
    if (!product_fits(shape, static_cast<size_t>(ndim - 1), &rows)) overflow();
    const int64_t cols = shape[ndim - 1];
    times(rows, cols);
    CheckedEntry e;
    e.format = m.formats[i];
    check_enum(e.format, IndexedName("desc.formats", i), {{MXFP8_FORMAT_E4M3, "MXFP8_FORMAT_E4M3"}, {MXFP8_FORMAT_E5M2, "MXFP8_FORMAT_E5M2"},
                                                              {MXFP8_FORMAT_NVFP4, "MXFP8_FORMAT_NVFP4"}});
    const int32_t direction = m.directions ? m.directions[i] : MXFP8_DIRECTION_ROWWISE;
    check_enum(direction, IndexedName("desc.directions", i), {{MXFP8_DIRECTION_ROWWISE, "MXFP8_DIRECTION_ROWWISE"},
                                  {MXFP8_DIRECTION_COLUMNWISE, "MXFP8_DIRECTION_COLUMNWISE"}});
    e.columnwise = direction == MXFP8_DIRECTION_COLUMNWISE;
    const int32_t layout = m.source_layouts[i];
    const IndexedName field("desc.source_layouts", i);
    e.layout = &layout_info(layout, field);
    if (e.layout->permutes_value_rows)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, field, " is ", e.layout->enum_name, " (", e.layout->value, "): a bucket carries "
           "values in row order, so its scales cannot be in a layout that permutes rows");
    const mxfp8_bucket_part &part = m.parts_in[i];
    int64_t scales_bytes;
    const char *values_label;
    if (e.format == MXFP8_FORMAT_NVFP4) {
      // The stored matrix: rowwise (M, K), columnwise the (K, M) transpose, scaled along its rows.
      e.rows = e.columnwise ? cols : rows;
      e.cols = e.columnwise ? rows : cols;
      if (e.cols % 2 != 0)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shapes[", i, "] ", format_shape(shape, ndim), ": the stored ",
             e.columnwise ? "columnwise" : "rowwise", " rows of this NVFP4 entry have ", e.cols,
             " values, an odd count (two a byte)");
      require_nvfp4_layout(*e.layout, field, "travel");
      e.scale_rows = e.rows;
      e.scale_cols = ceil_div(e.cols, kNvfp4BlockSize);
      e.values_bytes = times(e.rows, e.cols / 2);
      // NVFP4 scales are never a transpose: the stored matrix already is one.
      scales_bytes = layout_bytes(*e.layout, e.scale_rows, e.scale_cols, false, field);
      values_label = "packed NVFP4";
    } else {
      e.rows = rows;
      e.cols = cols;
      e.scale_rows = e.columnwise ? ceil_div(rows, kBlockSize) : rows;
      e.scale_cols = e.columnwise ? cols : ceil_div(cols, kBlockSize);
      e.values_bytes = rows * cols;  // checked above
      scales_bytes = layout_bytes(*e.layout, e.scale_rows, e.scale_cols, e.columnwise, field);
      values_label = "row-major";
    }
    check_part(i, "values", part.values_offset, part.values_bytes, e.values_bytes, values_label, size);
    check_part(i, "scales", part.scales_offset, part.scales_bytes, scales_bytes, e.layout->label, size);
    e.values = base + part.values_offset;
    e.scales = base + part.scales_offset;
    parts.push_back({part.values_offset, part.values_offset + part.values_bytes, i, "values"});
    parts.push_back({part.scales_offset, part.scales_offset + part.scales_bytes, i, "scales"});
    if (e.format == MXFP8_FORMAT_NVFP4) {
      check_amax_part(m, i, base, size, e);
      parts.push_back({part.amax_offset, part.amax_offset + part.amax_bytes, i, "amax"});
    }
    if (m.shards && m.shards[i]) {  // the receiver's part of a whole tensor, in the stored matrix's terms
      e.sharded = true;
      const IndexedName name("desc.shards", i);
      if (e.format == MXFP8_FORMAT_NVFP4 && m.target_layouts) {  // the target's NVFP4 rule comes first (transfer.h)
        nvfp4_target_layout(m.target_layouts[i], IndexedName("desc.target_layouts", i));
      }
      e.shard = e.format == MXFP8_FORMAT_NVFP4 ? resolve_nvfp4_shard(m.shards[i], rows, cols, e.columnwise, name)
                                               : resolve_shard(m.shards[i], rows, cols, e.columnwise, name);
    }
    if (m.scales_shapes) check_scales_shape(m, i, e);
    result.entries.push_back(std::move(e));
  }
  // Empty parts hold no byte, so they may sit anywhere (an empty tensor's parts share an offset).
  parts.erase(std::remove_if(parts.begin(), parts.end(), [](const BucketPart &p) { return p.begin == p.end; }), parts.end());
  check_parts_apart(parts);
  return result;
}

}  // namespace mxfp8
