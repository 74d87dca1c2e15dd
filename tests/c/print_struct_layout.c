/* Prints the size and field offsets of every struct shared with the Rust mirror (mxfp8-sys), one
 * "name value" per line; bindings/rust/mxfp8/tests/layout.rs compares them with Rust's view. */
#include <stddef.h>
#include <stdio.h>

#include <mxfp8/mxfp8.h>

#define SIZE(T) printf("%s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))

int main(void) {
  SIZE(DLDevice);
  FIELD(DLDevice, device_id);
  SIZE(DLDataType);
  FIELD(DLDataType, bits);
  FIELD(DLDataType, lanes);
  SIZE(DLTensor);
  FIELD(DLTensor, device);
  FIELD(DLTensor, ndim);
  FIELD(DLTensor, dtype);
  FIELD(DLTensor, shape);
  FIELD(DLTensor, strides);
  FIELD(DLTensor, byte_offset);
  SIZE(DLManagedTensorVersioned);
  FIELD(DLManagedTensorVersioned, manager_ctx);
  FIELD(DLManagedTensorVersioned, deleter);
  FIELD(DLManagedTensorVersioned, flags);
  FIELD(DLManagedTensorVersioned, dl_tensor);
  SIZE(mxfp8_tensor_desc);
  FIELD(mxfp8_tensor_desc, format);
  FIELD(mxfp8_tensor_desc, scale_layout);
  FIELD(mxfp8_tensor_desc, ndim);
  FIELD(mxfp8_tensor_desc, shape);
  FIELD(mxfp8_tensor_desc, rowwise_data);
  FIELD(mxfp8_tensor_desc, rowwise_scale_inv);
  FIELD(mxfp8_tensor_desc, columnwise_data);
  FIELD(mxfp8_tensor_desc, columnwise_scale_inv);
  FIELD(mxfp8_tensor_desc, block);
  FIELD(mxfp8_tensor_desc, reserved);
  SIZE(mxfp8_export_options);
  FIELD(mxfp8_export_options, direction);
  FIELD(mxfp8_export_options, values_dtype);
  FIELD(mxfp8_export_options, scales_dtype);
  FIELD(mxfp8_export_options, padded_scales);
  FIELD(mxfp8_export_options, reserved);
  FIELD(mxfp8_export_options, stream);
  FIELD(mxfp8_export_options, allocator);
  FIELD(mxfp8_export_options, scales_granularity);
  FIELD(mxfp8_export_options, reserved2);
  SIZE(mxfp8_grouped_desc);
  FIELD(mxfp8_grouped_desc, format);
  FIELD(mxfp8_grouped_desc, scale_layout);
  FIELD(mxfp8_grouped_desc, scales);
  FIELD(mxfp8_grouped_desc, num_experts);
  FIELD(mxfp8_grouped_desc, reserved);
  FIELD(mxfp8_grouped_desc, cols);
  FIELD(mxfp8_grouped_desc, uniform_rows);
  FIELD(mxfp8_grouped_desc, expert_rows);
  FIELD(mxfp8_grouped_desc, scale_offsets);
  FIELD(mxfp8_grouped_desc, data);
  FIELD(mxfp8_grouped_desc, scale_inv);
  SIZE(mxfp8_quantize_options);
  FIELD(mxfp8_quantize_options, format);
  FIELD(mxfp8_quantize_options, block);
  FIELD(mxfp8_quantize_options, scale_rounding);
  FIELD(mxfp8_quantize_options, scales_layout);
  FIELD(mxfp8_quantize_options, values_dtype);
  FIELD(mxfp8_quantize_options, scales_dtype);
  FIELD(mxfp8_quantize_options, reserved);
  FIELD(mxfp8_quantize_options, stream);
  FIELD(mxfp8_quantize_options, allocator);
  SIZE(mxfp8_dequantize_options);
  FIELD(mxfp8_dequantize_options, direction);
  FIELD(mxfp8_dequantize_options, stream);
  printf("mxfp8_status %zu\n", sizeof(mxfp8_status));
  printf("MXFP8_VERSION %d\n", MXFP8_VERSION);
  return 0;
}
