// mxfp8_tensor_create and mxfp8_tensor_release, both formats: everything about a tensor is checked once,
// here, so that an export can only fail for reasons outside the description (memory, CUDA). An NVFP4
// description becomes an mxfp8_tensor of format MXFP8_FORMAT_NVFP4 (create_nvfp4_tensor).
#include "api/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>

#include "core/dltensor_checks.hpp"
#include "core/call_allocations.hpp"
#include "core/error.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {
namespace {

constexpr size_t kDescV1Size = offsetof(mxfp8_tensor_desc, columnwise_scale_inv) + sizeof(void *);

const char *const kDataNames[2] = {"rowwise_data", "columnwise_data"};
const char *const kScaleNames[2] = {"rowwise_scale_inv", "columnwise_scale_inv"};
const char *const kAmaxNames[2] = {"rowwise_amax", "columnwise_amax"};

std::vector<int64_t> logical_shape(const mxfp8_tensor_desc &desc, const DLTensor &data,
                                   const char *data_name) {
  if (desc.ndim < 0 || desc.ndim > kMaxDims)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.ndim is ", desc.ndim, ", expected 0 to ", kMaxDims);
  if (desc.ndim == 0) {
    checked_numel(data, data_name);
    if (data.ndim < 1)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, data_name, " is 0-dimensional: an MXFP8 tensor needs a last "
           "dimension K to block");
    return std::vector<int64_t>(data.shape, data.shape + data.ndim);
  }
  if (!desc.shape) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shape is NULL with desc.ndim ", desc.ndim);
  std::vector<int64_t> shape(desc.shape, desc.shape + desc.ndim);
  for (int64_t d : shape)
    if (d < 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shape ", format_shape(shape), " has a negative dimension");
  return shape;
}

// Values are exported as views of this buffer, so it must be exactly the logical shape, row-major.
void check_data(const DLTensor &t, const char *name, const std::vector<int64_t> &shape, mxfp8_format format) {
  expect_buffer(t, {name, Holds::Fp8Values, format, nullptr, nullptr, -1});
  if (!std::equal(t.shape, t.shape + t.ndim, shape.begin(), shape.end()))  // no vector made on every create
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim),
         " does not match the tensor's shape ", format_shape(shape));
}

// How a values buffer holds its codes: uint8 bytes of two codes (last dimension cols / 2), or DLPack's
// packed float4_e2m1fn (last dimension cols). Either way the bytes are the same.
enum class ValuesDtype { PackedBytes, Float4 };

ValuesDtype values_dtype_of(const DLManagedTensorVersioned &m, const char *name) {
  const DLDataType d = m.dl_tensor.dtype;
  if (is_dtype(d, kDLUInt, 8)) return ValuesDtype::PackedBytes;
  if (is_dtype(d, kDLFloat4_e2m1fn, 4)) {
    if (m.flags & DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": float4_e2m1fn flagged DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED "
           "(one value per byte); NVFP4 values are packed two per byte");
    return ValuesDtype::Float4;
  }
  fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(d),
       " does not hold NVFP4 values (expected uint8, two values per byte, or float4_e2m1fn)");
}

std::vector<int64_t> nvfp4_logical_shape(const mxfp8_tensor_desc &desc, DLManagedTensorVersioned *const data[2]) {
  if (desc.ndim < 0 || desc.ndim > kMaxDims)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.ndim is ", desc.ndim, ", expected 0 to ", kMaxDims);
  if (desc.ndim > 0) {
    if (!desc.shape) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shape is NULL with desc.ndim ", desc.ndim);
    std::vector<int64_t> shape(desc.shape, desc.shape + desc.ndim);
    for (int64_t d : shape)
      if (d < 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.shape ", format_shape(shape), " has a negative dimension");
    return shape;
  }
  const int d = data[0] ? 0 : 1;
  const DLTensor &t = data[d]->dl_tensor;
  checked_numel(t, kDataNames[d]);
  const int64_t per_element = values_dtype_of(*data[d], kDataNames[d]) == ValuesDtype::PackedBytes ? 2 : 1;
  if (d == 0) {
    if (t.ndim < 1)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "rowwise_data is 0-dimensional: an NVFP4 tensor needs a last dimension K");
    std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
    shape.back() = checked_mul(shape.back(), per_element, "K");
    return shape;
  }
  // TE stores the columnwise data of (d1, ..., dn, K) as (K, d1, ..., dn / 2) bytes (NVFP4TensorStorage.size()).
  if (t.ndim < 2)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "columnwise_data has ", t.ndim, " dimension(s) ", format_shape(t.shape, t.ndim),
         ": without rowwise data, set desc.ndim and desc.shape, or pass the columnwise data as TE stores it, "
         "(K, *lead) with the last dimension packed");
  std::vector<int64_t> shape(t.shape + 1, t.shape + t.ndim);
  shape.back() = checked_mul(shape.back(), per_element, "M");
  shape.push_back(t.shape[0]);
  return shape;
}

// The values must be exactly the stored matrix, row-major contiguous, in either of the two ways its shape
// can say so: leading dimensions flattening into the rows and the last one a row (cols / 2 bytes or cols
// float4 elements; TE's rowwise (*lead, K/2)), or the first dimension the rows and the others flattening
// into a row (TE's columnwise (K, *lead) with its last dimension halved).
void check_values(const DLManagedTensorVersioned &m, const char *name, int64_t rows, int64_t cols) {
  const DLTensor &t = m.dl_tensor;
  const ValuesDtype dtype = values_dtype_of(m, name);
  expect_buffer(t, {name, Holds::CheckedByCaller, 0, nullptr, nullptr, -1});
  const int64_t row = dtype == ValuesDtype::PackedBytes ? cols / 2 : cols;
  // Zero-aware products; -1 (matching nothing) where int64 cannot count them: with a 0 elsewhere the element
  // count is 0 and was checked, but (2^62, 32, 0)'s leading dimensions still multiply past int64.
  int64_t leading = -1, trailing = -1;
  if (t.ndim >= 1) {
    const size_t others = static_cast<size_t>(t.ndim - 1);
    if (!product_fits(t.shape, others, &leading)) leading = -1;
    if (!product_fits(t.shape + 1, others, &trailing)) trailing = -1;
  }
  const bool rows_then_row = t.ndim >= 1 && leading == rows && t.shape[t.ndim - 1] == row;
  const bool row_per_first = t.ndim >= 1 && t.shape[0] == rows && trailing == row;
  if (!rows_then_row && !row_per_first)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": shape ", format_shape(t.shape, t.ndim), " does not hold the stored ",
         rows, " x ", cols, " matrix as rows of ", row,
         dtype == ValuesDtype::PackedBytes ? " bytes (two values each)" : " float4 values",
         " (expected leading dimensions whose product is ", rows, " and a last dimension of ", row,
         ", or a first dimension of ", rows, " and the others' product ", row, ")");
}

// One float32 amax per tensor, or (rowwise) one per row.
void check_amax(const DLTensor &t, const char *name, int direction, int64_t rows, const DLDevice &device,
                Direction &dir) {
  if (!is_dtype(t.dtype, kDLFloat, 32))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": dtype ", format_dtype(t.dtype), " is not float32");
  dir.amax_data = reinterpret_cast<const float *>(
      expect_buffer(t, {name, Holds::CheckedByCaller, 0, &device, "the data is", -1}));
  const int64_t n = checked_numel(t, name);
  const bool rowwise = direction == MXFP8_DIRECTION_ROWWISE;
  if (n != 1 && !(rowwise && n == rows))
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": holds ", n, " elements (shape ", format_shape(t.shape, t.ndim),
         "), needs ", rowwise ? cat("1 (per tensor) or ", rows, " (one per row, TE's row_scaled_nvfp4)")
                              : std::string("exactly 1 (Transformer Engine keeps one columnwise amax per tensor)"));
  if (reinterpret_cast<uintptr_t>(dir.amax_data) % alignof(float) != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": the data (data + byte_offset) is not aligned to its 4-byte elements");
  dir.amax_count = n;
}

}  // namespace

void check_scales(const DLTensor &t, const char *name, mxfp8_scale_layout layout, Direction &dir,
                  bool transposed_swizzle, Holds holds) {
  const int64_t r = dir.scale_rows, c = dir.scale_cols;
  if (layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED) {
    // Columnwise scales are swizzled as their transpose.
    const int64_t sr = transposed_swizzle ? c : r, sc = transposed_swizzle ? r : c;
    const int64_t padded_rows = checked_round_up(sr, kTileRows, "the swizzled scales' padded row count");
    const int64_t padded_cols = checked_round_up(sc, kTileCols, "the swizzled scales' padded column count");
    const int64_t needed = checked_mul(padded_rows, padded_cols, "swizzled scale size");
    dir.scales_begin = expect_buffer(t, {name, holds, 0, nullptr, nullptr, -1});
    const int64_t numel = checked_numel(t, name);
    if (numel != needed)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": GEMM-swizzled scales of a ", r, " x ", c,
           " scale matrix need ", padded_rows, " x ", padded_cols, " = ", needed, " bytes, got ", numel,
           " (shape ", format_shape(t.shape, t.ndim),
           "); are these scales really swizzled, and for this tensor?");
    dir.scales_bytes = numel;
    return;
  }
  check_scale_dtype(t, name, holds);
  dir.row_major = as_byte_matrix(t, name, /*any_strides=*/false);
  const Span whole = span_of(dir.row_major, name, kNoIndex, false);
  dir.scales_begin = dir.row_major.data;
  dir.scales_bytes = static_cast<int64_t>(whole.bytes);
  if (dir.row_major.rows < r || dir.row_major.cols < c)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": a ", dir.row_major.rows, " x ", dir.row_major.cols,
         " buffer (shape ", format_shape(t.shape, t.ndim), ") cannot hold the ", r, " x ", c,
         " scale matrix");
  if (r > 1 && dir.row_major.row_stride < c)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, name, ": row stride ", dir.row_major.row_stride,
         " is shorter than a row of ", c, " scales");
  dir.row_major.rows = r;
  dir.row_major.cols = c;
}

// An NVFP4 description (desc.format MXFP8_FORMAT_NVFP4, already read by create_tensor) into a tensor. The
// block scales go through the MXFP8 scale check with E4M3 dtypes and a scale matrix of ceil(cols / 16)
// columns; the swizzled layout is the same 128x4 one (TransformerEngine common/cast/nvfp4/
// dequantize_nvfp4.cuh indexes NVFP4 scales with the MXFP8 gemm_swizzled_scale_idx).
std::unique_ptr<mxfp8_tensor> create_nvfp4_tensor(const mxfp8_tensor_desc &desc) {
  if (desc.block != MXFP8_BLOCK_1X16)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.block is ", desc.block, ": an NVFP4 tensor has one scale per 16 values, "
         "set desc.block = MXFP8_BLOCK_1X16 (2)");
  if (desc.e4m3_max == 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.e4m3_max is 0 (not set): an NVFP4 tensor needs its E4M3_MAX, 448, or 256 "
         "for Transformer Engine's 4over6 tensors (nvfp4_e4m3_max); a wrong one decodes every value wrongly");
  if (desc.e4m3_max != 448 && desc.e4m3_max != 256)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.e4m3_max is ", desc.e4m3_max,
         ", expected 448 or 256 (Transformer Engine's nvfp4_e4m3_max: 256 with its 4over6 option)");

  DLManagedTensorVersioned *const given[2][3] = {{desc.rowwise_data, desc.rowwise_scale_inv, desc.rowwise_amax},
                                                 {desc.columnwise_data, desc.columnwise_scale_inv, desc.columnwise_amax}};
  const char *const *const names[3] = {kDataNames, kScaleNames, kAmaxNames};
  for (int d = 0; d < 2; ++d) {
    const char *present = nullptr;
    for (int part = 0; part < 3; ++part)
      if (given[d][part] && !present) present = names[part][d];
    for (int part = 0; part < 3 && present; ++part)
      if (!given[d][part])
        fail(MXFP8_ERROR_INVALID_ARGUMENT, names[part][d], " is NULL but ", present,
             " is given: a direction needs its data, its block scales and its amax");
  }
  if (!given[0][0] && !given[1][0])
    fail(MXFP8_ERROR_MISSING_DATA, "desc has neither rowwise nor columnwise data: nothing to describe");
  for (int d = 0; d < 2; ++d)
    for (int part = 0; part < 3; ++part)
      if (given[d][part]) check_version(*given[d][part], names[part][d]);
  const DLManagedTensorVersioned *all[6] = {given[0][0], given[0][1], given[0][2], given[1][0], given[1][1], given[1][2]};
  check_distinct_managed(all, 6);

  auto tensor = std::make_unique<mxfp8_tensor>();
  tensor->format = MXFP8_FORMAT_NVFP4;
  tensor->block = MXFP8_BLOCK_1X16;  // kNvfp4BlockSize values per scale
  tensor->scale_layout = static_cast<mxfp8_scale_layout>(desc.scale_layout);
  tensor->e4m3_max = desc.e4m3_max;
  DLManagedTensorVersioned *const data[2] = {given[0][0], given[1][0]};
  tensor->shape = nvfp4_logical_shape(desc, data);
  if (tensor->shape.empty())
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the logical shape is 0-dimensional: an NVFP4 tensor needs a last dimension K");
  tensor->cols = tensor->shape.back();
  tensor->rows = product(tensor->shape, 0, tensor->shape.size() - 1, "the number of rows");
  checked_mul(tensor->rows, tensor->cols, "the number of elements");
  const char *first_name = data[0] ? kDataNames[0] : kDataNames[1];
  tensor->device = (data[0] ? data[0] : data[1])->dl_tensor.device;
  memory_of(tensor->device, first_name);

  for (int d = 0; d < 2; ++d) {
    if (!given[d][0]) continue;
    Direction &dir = tensor->directions[d];
    for (int part = 0; part < 3; ++part) {
      const DLDevice device = given[d][part]->dl_tensor.device;
      if (!same_device(device, tensor->device))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, names[part][d], " is on ", format_device(device), " but ", first_name,
             " is on ", format_device(tensor->device), ": all buffers must share one device");
    }
    const bool rowwise = d == MXFP8_DIRECTION_ROWWISE;
    dir.rows = rowwise ? tensor->rows : tensor->cols;
    dir.cols = rowwise ? tensor->cols : tensor->rows;
    if (dir.cols % 2 != 0)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, kDataNames[d], ": the stored rows have ", dir.cols, " values (",
           rowwise ? "K" : "M", "), an odd count: NVFP4 packs two values per byte, so every row must fill whole bytes");
    const DLTensor &values = given[d][0]->dl_tensor, &scales = given[d][1]->dl_tensor;
    check_values(*given[d][0], kDataNames[d], dir.rows, dir.cols);
    dir.scale_rows = dir.rows;
    dir.scale_cols = ceil_div(dir.cols, kNvfp4BlockSize);
    // The stored matrix is scaled along its rows in both directions, so its scales are never swizzled
    // as a transpose (unlike MXFP8's columnwise scales).
    check_scales(scales, kScaleNames[d], tensor->scale_layout, dir, /*transposed_swizzle=*/false,
                 Holds::E4m3ScaleBytes);
    check_amax(given[d][2]->dl_tensor, kAmaxNames[d], d, dir.rows, tensor->device, dir);
    dir.data = given[d][0];
    dir.scales = given[d][1];
    dir.amax = given[d][2];
    dir.data_begin = byte_pointer(values);
    dir.data_bytes = dir.rows * (dir.cols / 2);
    const bool swizzled = tensor->scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    dir.source = ScaleSource{swizzled ? byte_pointer(scales) : nullptr, false, dir.row_major, dir.scale_rows,
                             dir.scale_cols};
  }
  return tensor;
}


void hold_for_call(const mxfp8_tensor &tensor) {
  for (const Direction &d : tensor.directions) {
    CallAllocations::hold(d.data);
    CallAllocations::hold(d.scales);
    CallAllocations::hold(d.amax);
  }
}

void retain(const mxfp8_tensor *tensor) noexcept {
  tensor->references.fetch_add(1, std::memory_order_relaxed);
}

void release(const mxfp8_tensor *tensor) noexcept {
  if (tensor->references.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  for (const Direction &dir : tensor->directions)
    for (DLManagedTensorVersioned *m : {dir.data, dir.scales, dir.amax})
      if (m && m->deleter) m->deleter(m);
  delete tensor;
}

KeepAlive keep_alive(const mxfp8_tensor *tensor) {
  retain(tensor);
  return KeepAlive{[](const void *o) noexcept { release(static_cast<const mxfp8_tensor *>(o)); }, tensor};
}

void check_distinct_managed(const DLManagedTensorVersioned *const *fields, int count) {
  for (int i = 0; i < count; ++i)
    for (int j = i + 1; j < count; ++j)
      if (fields[i] && fields[i] == fields[j])
        fail(MXFP8_ERROR_INVALID_ARGUMENT, "the same DLManagedTensorVersioned is passed twice: each field "
             "needs its own, since each one's deleter runs once");
}

std::unique_ptr<mxfp8_tensor> create_tensor(const mxfp8_tensor_desc &desc_in) {
  const mxfp8_tensor_desc defaults = MXFP8_TENSOR_DESC_INIT;
  const mxfp8_tensor_desc desc =
      read_sized_struct(&desc_in, defaults, kDescV1Size, "mxfp8_tensor_desc", "MXFP8_TENSOR_DESC_INIT",
                        {offsetof(mxfp8_tensor_desc, reserved), offsetof(mxfp8_tensor_desc, rowwise_amax),
                         offsetof(mxfp8_tensor_desc, columnwise_amax), offsetof(mxfp8_tensor_desc, e4m3_max),
                         offsetof(mxfp8_tensor_desc, reserved2)});
  // Fields a caller started from MXFP8_TENSOR_DESC_INIT_UNSET and never set: said as such, not as a
  // value out of range.
  if (desc.format == MXFP8_FORMAT_UNSET)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.format is 0 (MXFP8_FORMAT_UNSET: not set): say MXFP8_FORMAT_E4M3, "
         "MXFP8_FORMAT_E5M2 or MXFP8_FORMAT_NVFP4");
  check_enum(desc.format, "desc.format",
             {{MXFP8_FORMAT_E4M3, "MXFP8_FORMAT_E4M3"}, {MXFP8_FORMAT_E5M2, "MXFP8_FORMAT_E5M2"},
              {MXFP8_FORMAT_NVFP4, "MXFP8_FORMAT_NVFP4"}});
  if (desc.scale_layout == MXFP8_SCALE_LAYOUT_UNSET)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.scale_layout is -1 (MXFP8_SCALE_LAYOUT_UNSET: not set): say "
         "MXFP8_SCALE_LAYOUT_ROW_MAJOR, or MXFP8_SCALE_LAYOUT_128X4 when the scales are in the 128x4 tiles "
         "(Transformer Engine's _with_gemm_swizzled_scales)");
  check_enum(desc.scale_layout, "desc.scale_layout",
             {{MXFP8_SCALE_LAYOUT_ROW_MAJOR, "MXFP8_SCALE_LAYOUT_ROW_MAJOR"},
              {MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, "MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED"}});
  if (desc.reserved != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.reserved is ", desc.reserved, ", must be 0");
  if (desc.reserved2 != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.reserved2 is ", desc.reserved2, ", must be 0");
  if (desc.format == MXFP8_FORMAT_NVFP4) return create_nvfp4_tensor(desc);
  if (desc.block == MXFP8_BLOCK_1X16)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.block is MXFP8_BLOCK_1X16: 1x16 is NVFP4's block (desc.format "
         "MXFP8_FORMAT_NVFP4); an MXFP8 tensor has MXFP8_BLOCK_1X32 or MXFP8_BLOCK_32X32");
  check_enum(desc.block, "desc.block", {{MXFP8_BLOCK_1X32, "MXFP8_BLOCK_1X32"}, {MXFP8_BLOCK_32X32, "MXFP8_BLOCK_32X32"}});
  for (const auto &[field, name] : {std::pair{desc.rowwise_amax, "rowwise_amax"}, std::pair{desc.columnwise_amax, "columnwise_amax"}})
    if (field)
      fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.", name, " is set for an MXFP8 tensor (desc.format ", desc.format,
           "): only NVFP4 tensors have an amax; leave it NULL");
  if (desc.e4m3_max != 0)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.e4m3_max is ", desc.e4m3_max, " for an MXFP8 tensor (desc.format ",
         desc.format, "): E4M3_MAX is NVFP4's second level; leave it 0");

  DLManagedTensorVersioned *const given[2][2] = {{desc.rowwise_data, desc.rowwise_scale_inv},
                                                 {desc.columnwise_data, desc.columnwise_scale_inv}};
  const DLTensor *first_data = nullptr;
  const char *first_name = nullptr;
  for (int d = 0; d < 2; ++d) {
    if (!given[d][0] != !given[d][1])
      fail(MXFP8_ERROR_INVALID_ARGUMENT, given[d][0] ? kDataNames[d] : kScaleNames[d], " is given without ",
           given[d][0] ? kScaleNames[d] : kDataNames[d], ": a direction needs both its data and its scales");
    if (given[d][0] && !first_data) {
      first_data = &given[d][0]->dl_tensor;
      first_name = kDataNames[d];
    }
  }
  if (!first_data) fail(MXFP8_ERROR_MISSING_DATA, "desc has neither rowwise nor columnwise data: nothing to describe");
  for (int d = 0; d < 2; ++d)
    for (int part = 0; part < 2; ++part)
      if (given[d][part]) check_version(*given[d][part], part == 0 ? kDataNames[d] : kScaleNames[d]);
  const DLManagedTensorVersioned *all[4] = {given[0][0], given[0][1], given[1][0], given[1][1]};
  check_distinct_managed(all, 4);

  auto tensor = std::make_unique<mxfp8_tensor>();
  tensor->format = static_cast<mxfp8_format>(desc.format);
  tensor->scale_layout = static_cast<mxfp8_scale_layout>(desc.scale_layout);
  tensor->block = static_cast<mxfp8_block>(desc.block);
  tensor->shape = logical_shape(desc, *first_data, first_name);
  if (tensor->shape.empty())
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the logical shape is 0-dimensional: an MXFP8 tensor needs a last dimension K");
  tensor->cols = tensor->shape.back();
  tensor->rows = product(tensor->shape, 0, tensor->shape.size() - 1, "the number of rows");
  checked_mul(tensor->rows, tensor->cols, "the number of elements");
  tensor->device = first_data->device;
  memory_of(tensor->device, first_name);

  for (int d = 0; d < 2; ++d) {
    if (!given[d][0]) continue;
    Direction &dir = tensor->directions[d];
    const DLTensor &data = given[d][0]->dl_tensor, &scales = given[d][1]->dl_tensor;
    for (const auto &[t, name] : {std::pair{&data, kDataNames[d]}, std::pair{&scales, kScaleNames[d]}})
      if (!same_device(t->device, tensor->device))
        fail(MXFP8_ERROR_INVALID_ARGUMENT, name, " is on ", format_device(t->device), " but ", first_name, " is on ",
             format_device(tensor->device), ": all buffers must share one device");
    check_data(data, kDataNames[d], tensor->shape, tensor->format);
    const bool columnwise = d == MXFP8_DIRECTION_COLUMNWISE;
    dir.scale_rows = columnwise ? ceil_div(tensor->rows, kBlockSize) : tensor->rows;
    dir.scale_cols = columnwise ? tensor->cols : ceil_div(tensor->cols, kBlockSize);
    check_scales(scales, kScaleNames[d], tensor->scale_layout, dir, columnwise, Holds::ScaleBytes);
    dir.data = given[d][0];
    dir.scales = given[d][1];
    dir.data_begin = byte_pointer(data);
    dir.data_bytes = tensor->rows * tensor->cols;
    const bool swizzled = tensor->scale_layout == MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED;
    dir.source = ScaleSource{swizzled ? byte_pointer(scales) : nullptr, columnwise, dir.row_major, dir.scale_rows,
                             dir.scale_cols};
  }
  return tensor;
}

void add_read_spans(const mxfp8_tensor &tensor, size_t index, const char *kind, std::vector<Span> &spans) {
  for (int d = 0; d < 2; ++d) {
    const Direction &dir = tensor.directions[d];
    if (!dir.present()) continue;
    add_span(spans, dir.data_begin, static_cast<uint64_t>(dir.data_bytes), kind, index, false, kDataNames[d]);
    add_span(spans, dir.scales_begin, static_cast<uint64_t>(dir.scales_bytes), kind, index, false, kScaleNames[d]);
    if (dir.amax_data)
      add_span(spans, dir.amax_data, static_cast<uint64_t>(dir.amax_count) * sizeof(float), kind, index, false,
               kAmaxNames[d]);
  }
}

const Direction &require_direction(const mxfp8_tensor &t, int32_t direction, bool nvfp4, const char *kind,
                                   size_t index) {
  // Built only on a refusal: batched calls ask for every tensor of a model.
  const auto which = [&] { return kind ? cat(kind, "[", index, "]: ") : std::string(); };
  const bool is_nvfp4 = t.format == MXFP8_FORMAT_NVFP4;
  if (is_nvfp4 != nvfp4)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, which(), "the tensor is ", is_nvfp4 ? "an NVFP4" : "an MXFP8", " tensor, this call takes ",
         nvfp4 ? "NVFP4 tensors (desc.format MXFP8_FORMAT_NVFP4)"
               : "MXFP8 tensors (desc.format MXFP8_FORMAT_E4M3 or MXFP8_FORMAT_E5M2)");
  const Direction &dir = t.directions[direction];
  if (!dir.present()) {
    const bool row = direction == MXFP8_DIRECTION_ROWWISE;
    const char *has = row ? "columnwise" : "rowwise", *lacks = row ? "rowwise" : "columnwise";
    if (nvfp4)
      fail(MXFP8_ERROR_MISSING_DATA, which(), "the NVFP4 tensor has no ", lacks, " data (it was created with only ", has,
           " buffers); use direction ", has, " or describe the tensor with its ", lacks, " data, scales and amax");
    fail(MXFP8_ERROR_MISSING_DATA, which(), "the tensor has no ", lacks, " data (it was created with only ", has,
         " data and scales); export with direction ", has, " or describe the tensor with its ", lacks, " buffers");
  }
  return dir;
}

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_tensor_create(const mxfp8_tensor_desc *desc, mxfp8_tensor **out) {
  return guarded([&] {
    if (!desc) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (!out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = create_tensor(*desc).release();
  });
}

extern "C" MXFP8_API void mxfp8_tensor_release(mxfp8_tensor *tensor) {
  if (tensor) mxfp8::release(tensor);
}
