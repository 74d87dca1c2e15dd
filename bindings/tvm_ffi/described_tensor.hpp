// One direction of an MXFP8 tensor (its data and scale_inv, as a caller's tensor views) described to
// the C API for the length of one call.
#ifndef MXFP8_TVM_FFI_DESCRIBED_TENSOR_HPP_
#define MXFP8_TVM_FFI_DESCRIBED_TENSOR_HPP_

#include <tvm/ffi/container/tensor.h>

#include "call_support.hpp"

namespace mxfp8_tvm_ffi {

// mxfp8_tensor_create keeps the managed tensors it is given by address, so they live here, next to
// the handle, and the object stays where it was built.
class DescribedTensor {
 public:
  // data: the values (uint8 or the float8 of fp8_dtype), shape (*lead, K); scale_inv: the scales of
  // `dir`, row-major (padded or not) or, with swizzled, in the 128x4 GEMM layout.
  DescribedTensor(const DLTensor &data, const DLTensor &scale_inv, int32_t format, bool swizzled, int32_t dir)
      : data_(borrowed(data)), scales_(borrowed(scale_inv)), handle_(desc(format, swizzled, dir, 0)) {}
  // An NVFP4 tensor's stored matrix of `dir` (TE's storage: packed values, E4M3 block scales, the amax of
  // one float or one a row) and its E4M3_MAX (448, or 256 for 4over6 tensors).
  DescribedTensor(const DLTensor &data, const DLTensor &scale_inv, const DLTensor &amax, bool swizzled, int32_t dir,
                  int32_t e4m3_max)
      : data_(borrowed(data)), scales_(borrowed(scale_inv)), amax_(borrowed(amax)),
        handle_(desc(MXFP8_FORMAT_NVFP4, swizzled, dir, e4m3_max)) {}
  DescribedTensor(const DescribedTensor &) = delete;
  DescribedTensor &operator=(const DescribedTensor &) = delete;

  const mxfp8_tensor *get() const { return handle_.get(); }

 private:
  mxfp8_tensor_desc desc(int32_t format, bool swizzled, int32_t dir, int32_t e4m3_max) {
    mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
    d.format = format;
    d.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    const bool nvfp4 = format == MXFP8_FORMAT_NVFP4;
    if (nvfp4) {
      d.block = MXFP8_BLOCK_1X16;
      d.e4m3_max = e4m3_max;
    }
    const bool columnwise = dir == MXFP8_DIRECTION_COLUMNWISE;
    (columnwise ? d.columnwise_data : d.rowwise_data) = &data_;
    (columnwise ? d.columnwise_scale_inv : d.rowwise_scale_inv) = &scales_;
    if (nvfp4) (columnwise ? d.columnwise_amax : d.rowwise_amax) = &amax_;
    return d;
  }

  DLManagedTensorVersioned data_;
  DLManagedTensorVersioned scales_;
  DLManagedTensorVersioned amax_{};
  TensorHandle handle_;
};

}  // namespace mxfp8_tvm_ffi

#endif  // MXFP8_TVM_FFI_DESCRIBED_TENSOR_HPP_
