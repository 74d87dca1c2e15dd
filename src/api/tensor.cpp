// mxfp8_tensor_create and mxfp8_tensor_release: everything about a tensor is checked once, here, so
// that an export can only fail for reasons outside the description (memory, CUDA).
#include "api/tensor.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>

#include "core/dltensor_checks.hpp"
#include "core/call_allocations.hpp"
#include "core/error.hpp"
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
                        {offsetof(mxfp8_tensor_desc, reserved)});
  check_enum(desc.format, "desc.format",
             {{MXFP8_FORMAT_E4M3, "MXFP8_FORMAT_E4M3"}, {MXFP8_FORMAT_E5M2, "MXFP8_FORMAT_E5M2"}});
  check_enum(desc.scale_layout, "desc.scale_layout",
             {{MXFP8_SCALE_LAYOUT_ROW_MAJOR, "MXFP8_SCALE_LAYOUT_ROW_MAJOR"},
              {MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED, "MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED"}});
  check_enum(desc.block, "desc.block", {{MXFP8_BLOCK_1X32, "MXFP8_BLOCK_1X32"}, {MXFP8_BLOCK_32X32, "MXFP8_BLOCK_32X32"}});
  if (desc.reserved != 0) fail(MXFP8_ERROR_INVALID_ARGUMENT, "desc.reserved is ", desc.reserved, ", must be 0");

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
    spans.push_back(Span{reinterpret_cast<uintptr_t>(dir.data_begin), static_cast<uint64_t>(dir.data_bytes), kind,
                         index, false, kDataNames[d]});
    spans.push_back(Span{reinterpret_cast<uintptr_t>(dir.scales_begin), static_cast<uint64_t>(dir.scales_bytes), kind,
                         index, false, kScaleNames[d]});
    if (dir.amax_data)
      spans.push_back(Span{reinterpret_cast<uintptr_t>(dir.amax_data),
                           static_cast<uint64_t>(dir.amax_count) * sizeof(float), kind, index, false, kAmaxNames[d]});
  }
}

const Direction &require_direction(const mxfp8_tensor &t, int32_t direction, bool nvfp4) {
  const bool is_nvfp4 = t.format == MXFP8_FORMAT_NVFP4;
  if (is_nvfp4 != nvfp4)
    fail(MXFP8_ERROR_INVALID_ARGUMENT, "the tensor is ", is_nvfp4 ? "an NVFP4" : "an MXFP8", " tensor, this call takes ",
         nvfp4 ? "NVFP4 tensors (mxfp8_nvfp4_tensor_create)" : "MXFP8 tensors (mxfp8_tensor_create)");
  const Direction &dir = t.directions[direction];
  if (!dir.present()) {
    const bool row = direction == MXFP8_DIRECTION_ROWWISE;
    const char *has = row ? "columnwise" : "rowwise", *lacks = row ? "rowwise" : "columnwise";
    if (nvfp4)
      fail(MXFP8_ERROR_MISSING_DATA, "the NVFP4 tensor has no ", lacks, " data (it was created with only ", has,
           " buffers); use direction ", has, " or describe the tensor with its ", lacks, " data, scales and amax");
    fail(MXFP8_ERROR_MISSING_DATA, "the tensor has no ", lacks, " data (it was created with only ", has,
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
