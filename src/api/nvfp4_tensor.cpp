// mxfp8_nvfp4_tensor_create and mxfp8_nvfp4_tensor_release: everything about an NVFP4 tensor is checked
// once, here, into an mxfp8_tensor of format MXFP8_FORMAT_NVFP4 (tensor.hpp). The block scales go through
// the MXFP8 scale check (tensor.cpp) with E4M3 dtypes and a scale matrix of ceil(cols / 16) columns; the
// swizzled layout is the same 128x4 one (TransformerEngine common/cast/nvfp4/dequantize_nvfp4.cuh indexes
// NVFP4 scales with the MXFP8 gemm_swizzled_scale_idx).
#include <memory>

#include "api/tensor.hpp"

#include "core/dltensor_checks.hpp"
#include "core/call_allocations.hpp"
#include "core/error.hpp"
#include "core/nvfp4_decode.hpp"
#include "core/shape.hpp"
#include "core/sized_struct.hpp"

namespace mxfp8 {
namespace {

const char *const kDataNames[2] = {"rowwise_data", "columnwise_data"};
const char *const kScaleNames[2] = {"rowwise_scale_inv", "columnwise_scale_inv"};
const char *const kAmaxNames[2] = {"rowwise_amax", "columnwise_amax"};

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

std::vector<int64_t> logical_shape(const mxfp8_nvfp4_tensor_desc &desc, DLManagedTensorVersioned *const data[2]) {
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
  int64_t leading = 1, trailing = 1;  // cannot overflow: checked_numel did not
  for (int32_t i = 0; i + 1 < t.ndim; ++i) leading *= t.shape[i];
  for (int32_t i = 1; i < t.ndim; ++i) trailing *= t.shape[i];
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

std::unique_ptr<mxfp8_tensor> create_nvfp4_tensor(const mxfp8_nvfp4_tensor_desc &desc_in) {
  const mxfp8_nvfp4_tensor_desc defaults = MXFP8_NVFP4_TENSOR_DESC_INIT;
  const mxfp8_nvfp4_tensor_desc desc = read_sized_struct(&desc_in, defaults, sizeof(mxfp8_nvfp4_tensor_desc),
                                                         "mxfp8_nvfp4_tensor_desc", "MXFP8_NVFP4_TENSOR_DESC_INIT");
  check_enum(desc.scale_layout, "desc.scale_layout",
             {{MXFP8_SCALE_LAYOUT_ROW_MAJOR, "MXFP8_SCALE_LAYOUT_ROW_MAJOR"},
              {MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, "MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED"}});
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
  tensor->block = MXFP8_BLOCK_1X32;  // not read for NVFP4, whose blocks are 1x16 (kNvfp4BlockSize)
  tensor->scale_layout = static_cast<mxfp8_scale_layout>(desc.scale_layout);
  tensor->e4m3_max = desc.e4m3_max;
  DLManagedTensorVersioned *const data[2] = {given[0][0], given[1][0]};
  tensor->shape = logical_shape(desc, data);
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

}  // namespace mxfp8

using namespace mxfp8;

extern "C" MXFP8_API mxfp8_status mxfp8_nvfp4_tensor_create(const mxfp8_nvfp4_tensor_desc *desc,
                                                            mxfp8_nvfp4_tensor **out) {
  return guarded([&] {
    if (!desc) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc is NULL");
    if (!out) fail(MXFP8_ERROR_INVALID_ARGUMENT, "out is NULL");
    *out = nvfp4_handle(create_nvfp4_tensor(*desc).release());
  });
}

extern "C" MXFP8_API void mxfp8_nvfp4_tensor_release(mxfp8_nvfp4_tensor *tensor) {
  if (tensor) mxfp8::release(nvfp4_tensor(tensor));
}
