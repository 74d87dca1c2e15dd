/* What the C compiler makes of mxfp8.h, one "name value" per line, for tests/abi.rs to compare with
 * mxfp8-sys: the size and every field offset of each struct the header shares with Rust, and every
 * field of every *_INIT macro (pointers as 1 when not NULL). Needs the header only, not the library. */
#include <stddef.h>
#include <stdio.h>

#include <mxfp8/mxfp8.h>

#define SIZE(T) printf("%s %zu\n", #T, sizeof(T))
#define FIELD(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f))
#define INIT_INT(T, v, f) printf("init.%s.%s %lld\n", #T, #f, (long long)(v).f)
#define INIT_PTR(T, v, f) printf("init.%s.%s %d\n", #T, #f, (v).f != NULL)

int main(void) {
  SIZE(DLDevice);
  FIELD(DLDevice, device_type);
  FIELD(DLDevice, device_id);
  SIZE(DLDataType);
  FIELD(DLDataType, code);
  FIELD(DLDataType, bits);
  FIELD(DLDataType, lanes);
  SIZE(DLTensor);
  FIELD(DLTensor, data);
  FIELD(DLTensor, device);
  FIELD(DLTensor, ndim);
  FIELD(DLTensor, dtype);
  FIELD(DLTensor, shape);
  FIELD(DLTensor, strides);
  FIELD(DLTensor, byte_offset);
  SIZE(DLPackVersion);
  FIELD(DLPackVersion, major);
  FIELD(DLPackVersion, minor);
  SIZE(DLManagedTensorVersioned);
  FIELD(DLManagedTensorVersioned, version);
  FIELD(DLManagedTensorVersioned, manager_ctx);
  FIELD(DLManagedTensorVersioned, deleter);
  FIELD(DLManagedTensorVersioned, flags);
  FIELD(DLManagedTensorVersioned, dl_tensor);

  SIZE(mxfp8_tensor_desc);
  FIELD(mxfp8_tensor_desc, struct_size);
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
  FIELD(mxfp8_tensor_desc, rowwise_amax);
  FIELD(mxfp8_tensor_desc, columnwise_amax);
  FIELD(mxfp8_tensor_desc, e4m3_max);
  FIELD(mxfp8_tensor_desc, reserved2);
  SIZE(mxfp8_export_options);
  FIELD(mxfp8_export_options, struct_size);
  FIELD(mxfp8_export_options, direction);
  FIELD(mxfp8_export_options, values_dtype);
  FIELD(mxfp8_export_options, scales_dtype);
  FIELD(mxfp8_export_options, padded_scales);
  FIELD(mxfp8_export_options, reserved);
  FIELD(mxfp8_export_options, stream);
  FIELD(mxfp8_export_options, allocator);
  FIELD(mxfp8_export_options, scales_granularity);
  FIELD(mxfp8_export_options, reserved2);
  FIELD(mxfp8_export_options, scale_fixup);
  FIELD(mxfp8_export_options, reserved3);
  FIELD(mxfp8_export_options, shard);
  FIELD(mxfp8_export_options, global_scale);
  FIELD(mxfp8_export_options, reserved4);
  SIZE(mxfp8_bucket_part);
  FIELD(mxfp8_bucket_part, values_offset);
  FIELD(mxfp8_bucket_part, values_bytes);
  FIELD(mxfp8_bucket_part, scales_offset);
  FIELD(mxfp8_bucket_part, scales_bytes);
  FIELD(mxfp8_bucket_part, amax_offset);
  FIELD(mxfp8_bucket_part, amax_bytes);
  SIZE(mxfp8_transfer_desc);
  FIELD(mxfp8_transfer_desc, struct_size);
  FIELD(mxfp8_transfer_desc, source);
  FIELD(mxfp8_transfer_desc, destination);
  FIELD(mxfp8_transfer_desc, scale_fixup);
  FIELD(mxfp8_transfer_desc, global_scale);
  FIELD(mxfp8_transfer_desc, reserved);
  FIELD(mxfp8_transfer_desc, count);
  FIELD(mxfp8_transfer_desc, directions);
  FIELD(mxfp8_transfer_desc, shards);
  FIELD(mxfp8_transfer_desc, tensors);
  FIELD(mxfp8_transfer_desc, bucket_in);
  FIELD(mxfp8_transfer_desc, parts_in);
  FIELD(mxfp8_transfer_desc, ndims);
  FIELD(mxfp8_transfer_desc, shapes);
  FIELD(mxfp8_transfer_desc, formats);
  FIELD(mxfp8_transfer_desc, source_layouts);
  FIELD(mxfp8_transfer_desc, e4m3_maxes);
  FIELD(mxfp8_transfer_desc, scales_ndims);
  FIELD(mxfp8_transfer_desc, scales_shapes);
  FIELD(mxfp8_transfer_desc, target_layouts);
  FIELD(mxfp8_transfer_desc, values);
  FIELD(mxfp8_transfer_desc, scales);
  FIELD(mxfp8_transfer_desc, global_scales);
  FIELD(mxfp8_transfer_desc, bucket_out);
  FIELD(mxfp8_transfer_desc, parts_out);
  SIZE(mxfp8_shard);
  FIELD(mxfp8_shard, struct_size);
  FIELD(mxfp8_shard, reserved);
  FIELD(mxfp8_shard, row_begin);
  FIELD(mxfp8_shard, row_end);
  FIELD(mxfp8_shard, col_begin);
  FIELD(mxfp8_shard, col_end);
  FIELD(mxfp8_shard, num_row_pieces);
  FIELD(mxfp8_shard, row_pieces);
  SIZE(mxfp8_grouped_desc);
  FIELD(mxfp8_grouped_desc, struct_size);
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
  FIELD(mxfp8_quantize_options, struct_size);
  FIELD(mxfp8_quantize_options, format);
  FIELD(mxfp8_quantize_options, block);
  FIELD(mxfp8_quantize_options, scale_rounding);
  FIELD(mxfp8_quantize_options, scales_layout);
  FIELD(mxfp8_quantize_options, values_dtype);
  FIELD(mxfp8_quantize_options, scales_dtype);
  FIELD(mxfp8_quantize_options, flags);
  FIELD(mxfp8_quantize_options, stream);
  FIELD(mxfp8_quantize_options, allocator);
  SIZE(mxfp8_convert_options);
  FIELD(mxfp8_convert_options, struct_size);
  FIELD(mxfp8_convert_options, target);
  FIELD(mxfp8_convert_options, direction);
  FIELD(mxfp8_convert_options, scale_fixup);
  FIELD(mxfp8_convert_options, stream);
  FIELD(mxfp8_convert_options, pad_rows_to);
  FIELD(mxfp8_convert_options, pad_cols_to);
  FIELD(mxfp8_convert_options, pad_scale);
  FIELD(mxfp8_convert_options, flags);
  SIZE(mxfp8_nvfp4_quantize_options);
  FIELD(mxfp8_nvfp4_quantize_options, struct_size);
  FIELD(mxfp8_nvfp4_quantize_options, amax_scope);
  FIELD(mxfp8_nvfp4_quantize_options, amax_mode);
  FIELD(mxfp8_nvfp4_quantize_options, four_over_six);
  FIELD(mxfp8_nvfp4_quantize_options, e4m3_max);
  FIELD(mxfp8_nvfp4_quantize_options, scales_layout);
  FIELD(mxfp8_nvfp4_quantize_options, direction);
  FIELD(mxfp8_nvfp4_quantize_options, flags);
  FIELD(mxfp8_nvfp4_quantize_options, stream);
  SIZE(mxfp8_dequantize_options);
  FIELD(mxfp8_dequantize_options, struct_size);
  FIELD(mxfp8_dequantize_options, direction);
  FIELD(mxfp8_dequantize_options, stream);
  SIZE(mxfp8_status);
  printf("MXFP8_VERSION %d\n", MXFP8_VERSION);
  printf("MXFP8_NUM_STATUS %d\n", (int)MXFP8_NUM_STATUS);

  {
    mxfp8_tensor_desc v = MXFP8_TENSOR_DESC_INIT;
    INIT_INT(mxfp8_tensor_desc, v, struct_size);
    INIT_INT(mxfp8_tensor_desc, v, format);
    INIT_INT(mxfp8_tensor_desc, v, scale_layout);
    INIT_INT(mxfp8_tensor_desc, v, ndim);
    INIT_PTR(mxfp8_tensor_desc, v, shape);
    INIT_PTR(mxfp8_tensor_desc, v, rowwise_data);
    INIT_PTR(mxfp8_tensor_desc, v, rowwise_scale_inv);
    INIT_PTR(mxfp8_tensor_desc, v, columnwise_data);
    INIT_PTR(mxfp8_tensor_desc, v, columnwise_scale_inv);
    INIT_INT(mxfp8_tensor_desc, v, block);
    INIT_INT(mxfp8_tensor_desc, v, reserved);
    INIT_PTR(mxfp8_tensor_desc, v, rowwise_amax);
    INIT_PTR(mxfp8_tensor_desc, v, columnwise_amax);
    INIT_INT(mxfp8_tensor_desc, v, e4m3_max);
    INIT_INT(mxfp8_tensor_desc, v, reserved2);
  }
  {
    mxfp8_export_options v = MXFP8_EXPORT_OPTIONS_INIT;
    INIT_INT(mxfp8_export_options, v, struct_size);
    INIT_INT(mxfp8_export_options, v, direction);
    INIT_INT(mxfp8_export_options, v, values_dtype);
    INIT_INT(mxfp8_export_options, v, scales_dtype);
    INIT_INT(mxfp8_export_options, v, padded_scales);
    INIT_INT(mxfp8_export_options, v, reserved);
    INIT_PTR(mxfp8_export_options, v, stream);
    INIT_PTR(mxfp8_export_options, v, allocator);
    INIT_INT(mxfp8_export_options, v, scales_granularity);
    INIT_INT(mxfp8_export_options, v, reserved2);
    INIT_INT(mxfp8_export_options, v, scale_fixup);
    INIT_INT(mxfp8_export_options, v, reserved3);
    INIT_PTR(mxfp8_export_options, v, shard);
    INIT_INT(mxfp8_export_options, v, global_scale);
    INIT_INT(mxfp8_export_options, v, reserved4);
  }
  {
    mxfp8_transfer_desc v = MXFP8_TRANSFER_DESC_INIT;
    INIT_INT(mxfp8_transfer_desc, v, struct_size);
    INIT_INT(mxfp8_transfer_desc, v, source);
    INIT_INT(mxfp8_transfer_desc, v, destination);
    INIT_INT(mxfp8_transfer_desc, v, scale_fixup);
    INIT_INT(mxfp8_transfer_desc, v, global_scale);
    INIT_INT(mxfp8_transfer_desc, v, reserved);
    INIT_INT(mxfp8_transfer_desc, v, count);
    INIT_PTR(mxfp8_transfer_desc, v, directions);
    INIT_PTR(mxfp8_transfer_desc, v, shards);
    INIT_PTR(mxfp8_transfer_desc, v, tensors);
    INIT_PTR(mxfp8_transfer_desc, v, bucket_in);
    INIT_PTR(mxfp8_transfer_desc, v, parts_in);
    INIT_PTR(mxfp8_transfer_desc, v, ndims);
    INIT_PTR(mxfp8_transfer_desc, v, shapes);
    INIT_PTR(mxfp8_transfer_desc, v, formats);
    INIT_PTR(mxfp8_transfer_desc, v, source_layouts);
    INIT_PTR(mxfp8_transfer_desc, v, e4m3_maxes);
    INIT_PTR(mxfp8_transfer_desc, v, scales_ndims);
    INIT_PTR(mxfp8_transfer_desc, v, scales_shapes);
    INIT_PTR(mxfp8_transfer_desc, v, target_layouts);
    INIT_PTR(mxfp8_transfer_desc, v, values);
    INIT_PTR(mxfp8_transfer_desc, v, scales);
    INIT_PTR(mxfp8_transfer_desc, v, global_scales);
    INIT_PTR(mxfp8_transfer_desc, v, bucket_out);
    INIT_PTR(mxfp8_transfer_desc, v, parts_out);
  }
  {
    mxfp8_shard v = MXFP8_SHARD_INIT;
    INIT_INT(mxfp8_shard, v, struct_size);
    INIT_INT(mxfp8_shard, v, reserved);
    INIT_INT(mxfp8_shard, v, row_begin);
    INIT_INT(mxfp8_shard, v, row_end);
    INIT_INT(mxfp8_shard, v, col_begin);
    INIT_INT(mxfp8_shard, v, col_end);
    INIT_INT(mxfp8_shard, v, num_row_pieces);
    INIT_PTR(mxfp8_shard, v, row_pieces);
  }
  {
    mxfp8_grouped_desc v = MXFP8_GROUPED_DESC_INIT;
    INIT_INT(mxfp8_grouped_desc, v, struct_size);
    INIT_INT(mxfp8_grouped_desc, v, format);
    INIT_INT(mxfp8_grouped_desc, v, scale_layout);
    INIT_INT(mxfp8_grouped_desc, v, scales);
    INIT_INT(mxfp8_grouped_desc, v, num_experts);
    INIT_INT(mxfp8_grouped_desc, v, reserved);
    INIT_INT(mxfp8_grouped_desc, v, cols);
    INIT_INT(mxfp8_grouped_desc, v, uniform_rows);
    INIT_PTR(mxfp8_grouped_desc, v, expert_rows);
    INIT_PTR(mxfp8_grouped_desc, v, scale_offsets);
    INIT_PTR(mxfp8_grouped_desc, v, data);
    INIT_PTR(mxfp8_grouped_desc, v, scale_inv);
  }
  {
    mxfp8_quantize_options v = MXFP8_QUANTIZE_OPTIONS_INIT;
    INIT_INT(mxfp8_quantize_options, v, struct_size);
    INIT_INT(mxfp8_quantize_options, v, format);
    INIT_INT(mxfp8_quantize_options, v, block);
    INIT_INT(mxfp8_quantize_options, v, scale_rounding);
    INIT_INT(mxfp8_quantize_options, v, scales_layout);
    INIT_INT(mxfp8_quantize_options, v, values_dtype);
    INIT_INT(mxfp8_quantize_options, v, scales_dtype);
    INIT_INT(mxfp8_quantize_options, v, flags);
    INIT_PTR(mxfp8_quantize_options, v, stream);
    INIT_PTR(mxfp8_quantize_options, v, allocator);
  }
  {
    mxfp8_dequantize_options v = MXFP8_DEQUANTIZE_OPTIONS_INIT;
    INIT_INT(mxfp8_dequantize_options, v, struct_size);
    INIT_INT(mxfp8_dequantize_options, v, direction);
    INIT_PTR(mxfp8_dequantize_options, v, stream);
  }
  {
    mxfp8_convert_options v = MXFP8_CONVERT_OPTIONS_INIT;
    INIT_INT(mxfp8_convert_options, v, struct_size);
    INIT_INT(mxfp8_convert_options, v, target);
    INIT_INT(mxfp8_convert_options, v, direction);
    INIT_INT(mxfp8_convert_options, v, scale_fixup);
    INIT_PTR(mxfp8_convert_options, v, stream);
    INIT_INT(mxfp8_convert_options, v, pad_rows_to);
    INIT_INT(mxfp8_convert_options, v, pad_cols_to);
    INIT_INT(mxfp8_convert_options, v, pad_scale);
    INIT_INT(mxfp8_convert_options, v, flags);
  }
  {
    mxfp8_nvfp4_quantize_options v = MXFP8_NVFP4_QUANTIZE_OPTIONS_INIT;
    INIT_INT(mxfp8_nvfp4_quantize_options, v, struct_size);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, amax_scope);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, amax_mode);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, four_over_six);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, e4m3_max);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, scales_layout);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, direction);
    INIT_INT(mxfp8_nvfp4_quantize_options, v, flags);
    INIT_PTR(mxfp8_nvfp4_quantize_options, v, stream);
  }
  return 0;
}
