//! The Rust mirror of the C structs cannot drift: compares every size and field offset with what a C
//! program compiled against mxfp8.h prints (tests/c/print_struct_layout.c, built by CMake; its path in
//! MXFP8_LAYOUT_PROBE, which scripts/test.sh sets).
use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

use mxfp8::sys::*;

#[test]
fn struct_layout_matches_the_c_header() {
    let Ok(probe) = std::env::var("MXFP8_LAYOUT_PROBE") else {
        panic!("set MXFP8_LAYOUT_PROBE to the print_struct_layout program built by CMake (scripts/test.sh does)");
    };
    let out = Command::new(&probe).output().expect("running the layout probe");
    assert!(out.status.success());
    let c: HashMap<String, usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let rust: Vec<(&str, usize)> = vec![
        ("DLDevice", size_of::<DLDevice>()),
        ("DLDevice.device_id", offset_of!(DLDevice, device_id)),
        ("DLDataType", size_of::<DLDataType>()),
        ("DLDataType.bits", offset_of!(DLDataType, bits)),
        ("DLDataType.lanes", offset_of!(DLDataType, lanes)),
        ("DLTensor", size_of::<DLTensor>()),
        ("DLTensor.device", offset_of!(DLTensor, device)),
        ("DLTensor.ndim", offset_of!(DLTensor, ndim)),
        ("DLTensor.dtype", offset_of!(DLTensor, dtype)),
        ("DLTensor.shape", offset_of!(DLTensor, shape)),
        ("DLTensor.strides", offset_of!(DLTensor, strides)),
        ("DLTensor.byte_offset", offset_of!(DLTensor, byte_offset)),
        ("DLManagedTensorVersioned", size_of::<DLManagedTensorVersioned>()),
        ("DLManagedTensorVersioned.manager_ctx", offset_of!(DLManagedTensorVersioned, manager_ctx)),
        ("DLManagedTensorVersioned.deleter", offset_of!(DLManagedTensorVersioned, deleter)),
        ("DLManagedTensorVersioned.flags", offset_of!(DLManagedTensorVersioned, flags)),
        ("DLManagedTensorVersioned.dl_tensor", offset_of!(DLManagedTensorVersioned, dl_tensor)),
        ("mxfp8_tensor_desc", size_of::<mxfp8_tensor_desc>()),
        ("mxfp8_tensor_desc.format", offset_of!(mxfp8_tensor_desc, format)),
        ("mxfp8_tensor_desc.scale_layout", offset_of!(mxfp8_tensor_desc, scale_layout)),
        ("mxfp8_tensor_desc.ndim", offset_of!(mxfp8_tensor_desc, ndim)),
        ("mxfp8_tensor_desc.shape", offset_of!(mxfp8_tensor_desc, shape)),
        ("mxfp8_tensor_desc.rowwise_data", offset_of!(mxfp8_tensor_desc, rowwise_data)),
        ("mxfp8_tensor_desc.rowwise_scale_inv", offset_of!(mxfp8_tensor_desc, rowwise_scale_inv)),
        ("mxfp8_tensor_desc.columnwise_data", offset_of!(mxfp8_tensor_desc, columnwise_data)),
        ("mxfp8_tensor_desc.columnwise_scale_inv", offset_of!(mxfp8_tensor_desc, columnwise_scale_inv)),
        ("mxfp8_tensor_desc.block", offset_of!(mxfp8_tensor_desc, block)),
        ("mxfp8_tensor_desc.reserved", offset_of!(mxfp8_tensor_desc, reserved)),
        ("mxfp8_export_options", size_of::<mxfp8_export_options>()),
        ("mxfp8_export_options.direction", offset_of!(mxfp8_export_options, direction)),
        ("mxfp8_export_options.values_dtype", offset_of!(mxfp8_export_options, values_dtype)),
        ("mxfp8_export_options.scales_dtype", offset_of!(mxfp8_export_options, scales_dtype)),
        ("mxfp8_export_options.padded_scales", offset_of!(mxfp8_export_options, padded_scales)),
        ("mxfp8_export_options.reserved", offset_of!(mxfp8_export_options, reserved)),
        ("mxfp8_export_options.stream", offset_of!(mxfp8_export_options, stream)),
        ("mxfp8_export_options.allocator", offset_of!(mxfp8_export_options, allocator)),
        ("mxfp8_export_options.scales_granularity", offset_of!(mxfp8_export_options, scales_granularity)),
        ("mxfp8_export_options.reserved2", offset_of!(mxfp8_export_options, reserved2)),
        ("mxfp8_grouped_desc", size_of::<mxfp8_grouped_desc>()),
        ("mxfp8_grouped_desc.format", offset_of!(mxfp8_grouped_desc, format)),
        ("mxfp8_grouped_desc.scale_layout", offset_of!(mxfp8_grouped_desc, scale_layout)),
        ("mxfp8_grouped_desc.scales", offset_of!(mxfp8_grouped_desc, scales)),
        ("mxfp8_grouped_desc.num_experts", offset_of!(mxfp8_grouped_desc, num_experts)),
        ("mxfp8_grouped_desc.reserved", offset_of!(mxfp8_grouped_desc, reserved)),
        ("mxfp8_grouped_desc.cols", offset_of!(mxfp8_grouped_desc, cols)),
        ("mxfp8_grouped_desc.uniform_rows", offset_of!(mxfp8_grouped_desc, uniform_rows)),
        ("mxfp8_grouped_desc.expert_rows", offset_of!(mxfp8_grouped_desc, expert_rows)),
        ("mxfp8_grouped_desc.scale_offsets", offset_of!(mxfp8_grouped_desc, scale_offsets)),
        ("mxfp8_grouped_desc.data", offset_of!(mxfp8_grouped_desc, data)),
        ("mxfp8_grouped_desc.scale_inv", offset_of!(mxfp8_grouped_desc, scale_inv)),
        ("mxfp8_quantize_options", size_of::<mxfp8_quantize_options>()),
        ("mxfp8_quantize_options.format", offset_of!(mxfp8_quantize_options, format)),
        ("mxfp8_quantize_options.block", offset_of!(mxfp8_quantize_options, block)),
        ("mxfp8_quantize_options.scale_rounding", offset_of!(mxfp8_quantize_options, scale_rounding)),
        ("mxfp8_quantize_options.scales_layout", offset_of!(mxfp8_quantize_options, scales_layout)),
        ("mxfp8_quantize_options.values_dtype", offset_of!(mxfp8_quantize_options, values_dtype)),
        ("mxfp8_quantize_options.scales_dtype", offset_of!(mxfp8_quantize_options, scales_dtype)),
        ("mxfp8_quantize_options.reserved", offset_of!(mxfp8_quantize_options, reserved)),
        ("mxfp8_quantize_options.stream", offset_of!(mxfp8_quantize_options, stream)),
        ("mxfp8_quantize_options.allocator", offset_of!(mxfp8_quantize_options, allocator)),
        ("mxfp8_dequantize_options", size_of::<mxfp8_dequantize_options>()),
        ("mxfp8_dequantize_options.direction", offset_of!(mxfp8_dequantize_options, direction)),
        ("mxfp8_dequantize_options.stream", offset_of!(mxfp8_dequantize_options, stream)),
        ("mxfp8_status", size_of::<mxfp8_status>()),
        ("MXFP8_VERSION", MXFP8_VERSION as usize),
    ];
    assert_eq!(rust.len(), c.len(), "the probe and this test list different fields");
    for (name, value) in rust {
        assert_eq!(c.get(name), Some(&value), "{name}: C says {:?}, Rust {value}", c.get(name));
    }
}
