// Resharding: a caller's mxfp8_shard checked against a tensor, the jobs that read only the shard's bytes
// out of the stored (row-major, padded or swizzled) scales, and the export of one shard
// (mxfp8_export_components with options.shard).
#include <cstdio>
#include <string>
#include <vector>

#include "api/export_internal.hpp"
#include "api/outputs.hpp"
#include "api/shard.hpp"
#include "core/dlpack_tensor.hpp"
#include "core/dltensor_checks.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {
namespace {

// The most row pieces one shard may name: a fused weight has a handful; this only keeps a wild count
// from reaching the allocator.
constexpr size_t kMostPieces = size_t{1} << 24;

// One range [begin, end) of a dimension of `extent`, `end` possibly MXFP8_SHARD_END: inside the dimension,
// not reversed, empty only when the dimension is. Returns the range with the end resolved.
RowRange check_range(const char *name, const char *begin_field, const char *end_field, int64_t begin, int64_t end,
                     int64_t extent, const char *unit, bool end_may_be_open) {
  if (end == MXFP8_SHARD_END && end_may_be_open) end = extent;
  if (begin < 0 || begin > extent)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".", begin_field, " is ", begin, ", outside the tensor's ", extent, " ",
         unit, " (0..", extent, ")");
  if (end < 0 || end > extent)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".", end_field, " is ", end, ", outside the tensor's ", extent, " ", unit,
         " (0..", extent, end_may_be_open ? ", or MXFP8_SHARD_END)" : ")");
  if (end < begin)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ", unit, " [", begin, ", ", end, ") run backwards (", begin_field,
         " > ", end_field, ")");
  if (end == begin && extent > 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": ", unit, " [", begin, ", ", end, ") are empty: a shard holds at least one ",
         unit == std::string("rows") ? "row" : "column", " of each range");
  return RowRange{begin, end};
}

// A boundary of the block axis: a multiple of the block (32, or NVFP4's 16), or the dimension's end.
void check_block_boundary(const char *name, const char *field, int64_t at, int64_t extent, const char *axis,
                          const char *direction, int64_t block) {
  if (at % block != 0 && at != extent)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".", field, " is ", at, ", not a multiple of ", block, " (nor the tensor's ",
         extent, "): ", direction, " scale blocks run ", block, " ", axis, ", so a shard of them starts and ends at a "
         "block boundary");
}

}  // namespace

RowRange Shard::scale_rows_of(const RowRange &piece) const {
  if (!columnwise) return piece;
  return RowRange{piece.begin / block, ceil_div(piece.end, block)};
}

Shard resolve_shard(const mxfp8_shard *given, int64_t rows, int64_t cols, bool columnwise, const char *name,
                    int64_t block) {
  const mxfp8_shard defaults = MXFP8_SHARD_INIT;
  const mxfp8_shard s = read_sized_struct(given, defaults, sizeof(mxfp8_shard), name, "MXFP8_SHARD_INIT");
  if (s.reserved != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".reserved is ", s.reserved, ", must be 0");
  Shard out;
  out.columnwise = columnwise;
  out.block = block;
  const RowRange c = check_range(name, "col_begin", "col_end", s.col_begin, s.col_end, cols, "columns", true);
  out.col_begin = c.begin;
  out.col_end = c.end;
  if (!columnwise) {
    check_block_boundary(name, "col_begin", c.begin, cols, "along K", "rowwise", block);
    check_block_boundary(name, "col_end", c.end, cols, "along K", "rowwise", block);
  }

  if (s.num_row_pieces == 0) {
    out.pieces.push_back(check_range(name, "row_begin", "row_end", s.row_begin, s.row_end, rows, "rows", true));
  } else {
    if (!s.row_pieces)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".row_pieces is NULL but ", name, ".num_row_pieces is ", s.num_row_pieces);
    if (s.num_row_pieces > kMostPieces)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".num_row_pieces is ", s.num_row_pieces, ", more than ", kMostPieces);
    if (s.row_begin != 0 || s.row_end != MXFP8_SHARD_END)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, " sets both row_begin / row_end (", s.row_begin, ", ", s.row_end,
           ") and row_pieces: leave row_begin 0 and row_end MXFP8_SHARD_END when the rows come in pieces");
    out.pieces.reserve(s.num_row_pieces);
    for (size_t p = 0; p < s.num_row_pieces; ++p) {
      char begin_field[48], end_field[48];
      std::snprintf(begin_field, sizeof begin_field, "row_pieces[%zu]", 2 * p);
      std::snprintf(end_field, sizeof end_field, "row_pieces[%zu]", 2 * p + 1);
      out.pieces.push_back(
          check_range(name, begin_field, end_field, s.row_pieces[2 * p], s.row_pieces[2 * p + 1], rows, "rows", false));
    }
  }
  for (size_t p = 0; p < out.pieces.size(); ++p) {
    const RowRange &r = out.pieces[p];
    if (columnwise) {
      char begin_field[48], end_field[48];
      std::snprintf(begin_field, sizeof begin_field, s.num_row_pieces ? "row_pieces[%zu]" : "row_begin", 2 * p);
      std::snprintf(end_field, sizeof end_field, s.num_row_pieces ? "row_pieces[%zu]" : "row_end", 2 * p + 1);
      check_block_boundary(name, begin_field, r.begin, rows, "along M", "columnwise", block);
      check_block_boundary(name, end_field, r.end, rows, "along M", "columnwise", block);
      if (p + 1 < out.pieces.size() && r.end % block != 0)
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ".", end_field, " is ", r.end, ", the end of a partial block, but "
             "pieces follow it: a columnwise shard's blocks of ", block, " rows must line up, so only its last piece "
             "may end in the tensor's partial last block");
    }
    if (out.rows > INT64_MAX - (r.end - r.begin))  // pieces may repeat rows
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": its row pieces add up to more than INT64_MAX rows");
    out.rows += r.end - r.begin;
  }
  if (out.rows > 0 && out.cols() > INT64_MAX / out.rows)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": its ", out.rows, " rows x ", out.cols(), " columns overflow int64");
  out.scale_rows = columnwise ? ceil_div(out.rows, block) : out.rows;
  out.scale_cols = columnwise ? out.cols() : ceil_div(out.cols(), block);
  return out;
}

Shard resolve_nvfp4_shard(const mxfp8_shard *given, int64_t rows, int64_t cols, bool columnwise, const char *name) {
  // The logical rules first (columnwise: blocks of 16 along M), so that messages speak of M and K.
  const Shard logical = resolve_shard(given, rows, cols, columnwise, name, kNvfp4BlockSize);
  if (!columnwise) return logical;
  if (logical.pieces.size() != 1)
    fail(MXFP8_ERROR_UNSUPPORTED, name, " has ", logical.pieces.size(), " row pieces for a columnwise NVFP4 tensor, "
         "whose rows of M are columns of the stored (K, M) matrix: take its rows as one range (row_begin, row_end), "
         "or the rowwise data");
  Shard stored;
  stored.block = kNvfp4BlockSize;
  stored.pieces.push_back(RowRange{logical.col_begin, logical.col_end});
  stored.rows = logical.cols();
  stored.col_begin = logical.pieces[0].begin;
  stored.col_end = logical.pieces[0].end;
  stored.scale_rows = stored.rows;
  stored.scale_cols = ceil_div(stored.cols(), kNvfp4BlockSize);
  return stored;
}

Shard packed_value_bytes(const Shard &stored) {
  Shard bytes = stored;
  bytes.col_begin /= 2;
  bytes.col_end /= 2;
  return bytes;
}

void add_shard_scale_jobs(std::vector<ScaleJob> &jobs, const ScaleSource &source, const Shard &shard, uint8_t *dst) {
  const int64_t c0 = shard.columnwise ? shard.col_begin : shard.col_begin / shard.block;
  const int64_t c1 = c0 + shard.scale_cols;
  int64_t at = 0;  // the shard's S rows written so far
  for (const RowRange &piece : shard.pieces) {
    const RowRange r = shard.scale_rows_of(piece);
    if (r.end > r.begin && c1 > c0)
      jobs.push_back(compact_job(crop(source, r.begin, r.end, c0, c1), dst + at * shard.scale_cols));
    at += r.end - r.begin;
  }
}

void add_shard_swizzled_scale_jobs(std::vector<ScaleJob> &jobs, const ScaleSource &source, const Shard &shard,
                                   uint8_t *dst, const char *name) {
  const int64_t c0 = shard.columnwise ? shard.col_begin : shard.col_begin / shard.block;
  const int64_t c1 = c0 + shard.scale_cols;
  const bool whole = shard.pieces.size() == 1 && shard.scale_rows_of(shard.pieces[0]).begin == 0 &&
                     shard.scale_rows == source.rows && c0 == 0 && c1 == source.cols;
  if (shard.scale_rows == 0 || shard.scale_cols == 0) return;
  if (whole) {
    jobs.push_back(swizzled_job(source, shard.columnwise, dst));
    return;
  }
  if (source.swizzled)
    fail(MXFP8_ERROR_UNSUPPORTED, name, ": a shard of scales stored in the 128x4 layout cannot be written into a 128x4 "
         "destination in one pass; carry them compact (MXFP8_SCALE_LAYOUT_COMPACT, what a bucket carries by default) or ask "
         "for a compact destination");
  if (shard.pieces.size() > 1 && shard.columnwise)
    fail(MXFP8_ERROR_UNSUPPORTED, name, ": columnwise 128x4 scales are swizzled as S^T, where row pieces are columns "
         "of tiles: import a shard of several pieces into a compact destination");
  // Rowwise: piece p fills the tile rows of the destination from its first row on, so each piece but the
  // last must end on a whole tile (128 rows); its swizzled buffer is then the destination's from that row.
  const int64_t padded_cols = round_up(shard.scale_cols, kTileCols);
  int64_t at = 0;
  for (size_t p = 0; p < shard.pieces.size(); ++p) {
    const RowRange r = shard.scale_rows_of(shard.pieces[p]);
    if (p + 1 < shard.pieces.size() && (r.end - r.begin) % kTileRows != 0)
      fail(MXFP8_ERROR_UNSUPPORTED, name, ": row piece ", p, " has ", r.end - r.begin, " rows; into a 128x4 "
           "destination every piece but the last must be a multiple of 128 rows (whole tiles)");
    jobs.push_back(swizzled_job(crop(source, r.begin, r.end, c0, c1), shard.columnwise, dst + at * padded_cols));
    at += r.end - r.begin;
  }
}

void add_shard_value_jobs(std::vector<ScaleJob> &jobs, const uint8_t *values, int64_t cols, const Shard &shard,
                          uint8_t *dst) {
  const int64_t width = shard.cols();
  int64_t at = 0;
  for (const RowRange &piece : shard.pieces) {
    const int64_t n = piece.end - piece.begin;
    const uint8_t *src = values + piece.begin * cols + shard.col_begin;
    if (width == cols) {  // whole rows lie back to back: one flat copy (the copy engine's, when large)
      add_copy_jobs(jobs, src, dst + at * width, n * width);
    } else if (n > 0 && width > 0) {
      jobs.push_back(copy_job(ByteMatrix{const_cast<uint8_t *>(src), n, width, cols, 1},
                              ByteMatrix{dst + at * width, n, width, width, 1}));
    }
    at += n;
  }
}

namespace {

// The values output: a view, or a copy whose jobs join `jobs`. `scales` is the call's scales output, made
// first: a values copy must not land on it either. An NVFP4 tensor's shard is of its stored matrix
// (resolve_nvfp4_shard), two values a byte: moved as bytes (packed_value_bytes), and given as
// float4_e2m1fn elements (the default, MXFP8_VALUES_FP8) or as their uint8 bytes.
ManagedPtr export_shard_values(const mxfp8_tensor &t, const Direction &dir, const Shard &s, const mxfp8_export_options &o,
                               const DLManagedTensorVersioned *scales, std::vector<ScaleJob> &jobs) {
  const DLManagedTensorVersioned &src = *dir.data;
  const bool nvfp4 = t.format == MXFP8_FORMAT_NVFP4, float4 = nvfp4 && o.values_dtype == MXFP8_VALUES_FP8;
  const DLDataType dtype = float4 ? DLDataType{kDLFloat4_e2m1fn, 4, 1} : values_dtype(t.format, o.values_dtype);
  const Shard bytes = nvfp4 ? packed_value_bytes(s) : s;
  const int64_t row_bytes = nvfp4 ? dir.cols / 2 : t.cols, per_byte = float4 ? 2 : 1;  // elements a byte
  std::vector<int64_t> shape{s.rows, bytes.cols() * per_byte};
  if (s.pieces.size() == 1) {  // one range: a view with the stored matrix's row stride
    DLTensor base = src.dl_tensor;
    if (bytes.values_bytes() > 0)
      base.byte_offset += static_cast<uint64_t>(s.pieces[0].begin * row_bytes + bytes.col_begin);
    return make_view(keep_alive(&t), base, dtype, std::move(shape), {row_bytes * per_byte, 1},
                     src.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
  }
  ManagedPtr out = allocate_copy(t.device, dtype, shape, Allocation{o.allocator, o.stream});
  if (bytes.values_bytes() == 0) return out;
  check_copy_lands_apart(t, *out, "values", scales);
  add_shard_value_jobs(jobs, dir.data_begin, row_bytes, bytes, byte_pointer(out->dl_tensor));
  return out;
}

// The scales output: a view, or a copy whose jobs join `jobs`.
ManagedPtr export_shard_scales(const mxfp8_tensor &t, const Direction &dir, const Shard &s, const mxfp8_export_options &o,
                               std::vector<ScaleJob> &jobs) {
  // NVFP4's block scales are E4M3 (MXFP8_SCALES_E8M0 asks for the format's own scale type).
  const DLDataType dtype = t.format == MXFP8_FORMAT_NVFP4 && o.scales_dtype == MXFP8_SCALES_E8M0
                               ? DLDataType{kDLFloat8_e4m3fn, 8, 1}
                               : scales_dtype(o.scales_dtype);
  std::vector<int64_t> shape{s.scale_rows, s.scale_cols};
  if (!dir.source.swizzled && s.pieces.size() == 1) {
    const RowRange r = s.scale_rows_of(s.pieces[0]);
    const int64_t c0 = s.columnwise ? s.col_begin : s.col_begin / s.block;
    const ByteMatrix m = crop(dir.source, r.begin, r.end, c0, c0 + s.scale_cols).row_major;
    if (s.scale_rows <= 1 || m.row_stride == s.scale_cols || o.padded_scales == MXFP8_PADDED_SCALES_STRIDED_VIEW) {
      const DLManagedTensorVersioned &src = *dir.scales;
      DLTensor base = src.dl_tensor;
      if (s.scales_bytes() > 0) base.byte_offset = static_cast<uint64_t>(m.data - static_cast<uint8_t *>(base.data));
      const int64_t row_stride = s.scale_rows <= 1 ? s.scale_cols : m.row_stride;
      return make_view(keep_alive(&t), base, dtype, std::move(shape), {row_stride, 1},
                       src.flags & DLPACK_FLAG_BITMASK_READ_ONLY);
    }
  }
  ManagedPtr out = allocate_copy(t.device, dtype, shape, Allocation{o.allocator, o.stream});
  if (s.scales_bytes() == 0) return out;
  check_copy_lands_apart(t, *out);
  add_shard_scale_jobs(jobs, dir.source, s, byte_pointer(out->dl_tensor));
  return out;
}

}  // namespace

void export_shard(const mxfp8_tensor &tensor, const Direction &dir, const mxfp8_export_options &o,
                  DLManagedTensorVersioned **values, DLManagedTensorVersioned **scales) {
  const bool columnwise = o.direction == MXFP8_DIRECTION_COLUMNWISE;
  const Shard s = tensor.format == MXFP8_FORMAT_NVFP4
                      ? resolve_nvfp4_shard(o.shard, tensor.rows, tensor.cols, columnwise, "options.shard")
                      : resolve_shard(o.shard, tensor.rows, tensor.cols, columnwise, "options.shard");
  // Both outputs are made and checked before either copy is written (one launch for both); a failure on
  // the way releases what was made.
  std::vector<ScaleJob> jobs;
  ManagedPtr scales_out = scales ? export_shard_scales(tensor, dir, s, o, jobs) : nullptr;
  ManagedPtr values_out = values ? export_shard_values(tensor, dir, s, o, scales_out.get(), jobs) : nullptr;
  run_jobs_on(tensor.device, jobs.data(), jobs.size(), o.stream);
  if (scales) *scales = scales_out.release();
  if (values) *values = values_out.release();
}

}  // namespace mxfp8
