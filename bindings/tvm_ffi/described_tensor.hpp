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
      : data_(borrowed(data)), scales_(borrowed(scale_inv)), handle_(desc(format, swizzled, dir)) {}
  DescribedTensor(const DescribedTensor &) = delete;
  DescribedTensor &operator=(const DescribedTensor &) = delete;

  const mxfp8_tensor *get() const { return handle_.get(); }

 private:
  mxfp8_tensor_desc desc(int32_t format, bool swizzled, int32_t dir) {
    mxfp8_tensor_desc d = MXFP8_TENSOR_DESC_INIT;
    d.format = format;
    d.scale_layout = swizzled ? MXFP8_SCALE_LAYOUT_GEMM_SWIZZLED : MXFP8_SCALE_LAYOUT_ROW_MAJOR;
    if (dir == MXFP8_DIRECTION_COLUMNWISE) {
      d.columnwise_data = &data_;
      d.columnwise_scale_inv = &scales_;
    } else {
      d.rowwise_data = &data_;
      d.rowwise_scale_inv = &scales_;
    }
    return d;
  }

  DLManagedTensorVersioned data_;
  DLManagedTensorVersioned scales_;
  TensorHandle handle_;
};

}  // namespace mxfp8_tvm_ffi

#endif  // MXFP8_TVM_FFI_DESCRIBED_TENSOR_HPP_
