//! The safe option types start from mxfp8-sys's `Default` impls, which tests/abi.rs compares field by
//! field with the C `*_INIT` macros: so the safe defaults are the C defaults. This test closes the chain
//! (safe default -> C struct == mxfp8-sys default), and checks the status enum and error type.
use mxfp8::{
    sys, Block, ConvertOptions, DequantizeOptions, Direction, Nvfp4QuantizeOptions, Error, ExportOptions, Format, GroupedBuilder, GroupedScales, ManagedTensor, QuantizeOptions, ScaleLayout, Status,
    TensorBuilder,
};

#[test]
fn safe_defaults_are_the_c_initializers() {
    let (a, b) = (ExportOptions::default().to_sys(), sys::mxfp8_export_options::default());
    assert_eq!(
        (a.struct_size, a.direction, a.values_dtype, a.scales_dtype, a.padded_scales, a.reserved, a.stream, a.allocator.is_none(), a.scales_granularity, a.reserved2),
        (b.struct_size, b.direction, b.values_dtype, b.scales_dtype, b.padded_scales, b.reserved, b.stream, b.allocator.is_none(), b.scales_granularity, b.reserved2)
    );
    assert_eq!((a.scale_fixup, a.reserved3), (b.scale_fixup, b.reserved3));
    assert_eq!((a.shard, a.global_scale, a.reserved4), (b.shard, b.global_scale, b.reserved4));
    // NVFP4 exports are the same mxfp8_export_options: one options type, the C default (the format's own
    // type, float4 for NVFP4) included.
    assert_eq!(a.values_dtype, sys::MXFP8_VALUES_FP8);
    let (a, b) = (Nvfp4QuantizeOptions::default().to_sys(), sys::mxfp8_nvfp4_quantize_options::default());
    assert_eq!(
        (a.struct_size, a.amax_scope, a.amax_mode, a.four_over_six, a.e4m3_max, a.scales_layout, a.direction, a.flags, a.stream),
        (b.struct_size, b.amax_scope, b.amax_mode, b.four_over_six, b.e4m3_max, b.scales_layout, b.direction, b.flags, b.stream)
    );
    let nvfp4 = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .format(Format::Nvfp4)
        .rowwise(ManagedTensor::from_host(vec![0; 16], &[1, 16]).unwrap(), ManagedTensor::from_host(vec![0x38; 2], &[1, 2]).unwrap())
        .amax(Direction::Rowwise, ManagedTensor::from_host(vec![1.0], &[1]).unwrap())
        .build()
        .unwrap();
    // The C desc leaves E4M3_MAX "not said" (0, refused for NVFP4); the builder says TE's default, 448,
    // and NVFP4's block, 1x16.
    assert_eq!((nvfp4.e4m3_max(), sys::mxfp8_tensor_desc::default().e4m3_max), (Some(448), 0));
    assert_eq!((nvfp4.format(), nvfp4.block(), nvfp4.shape()), (Format::Nvfp4, Block::B1x16, &[1, 32][..]));
    let (a, b) = (ConvertOptions::default().to_sys(), sys::mxfp8_convert_options::default());
    assert_eq!((a.struct_size, a.target, a.direction, a.scale_fixup, a.stream), (b.struct_size, b.target, b.direction, b.scale_fixup, b.stream));
    let (a, b) = (QuantizeOptions::default().to_sys(), sys::mxfp8_quantize_options::default());
    assert_eq!(
        (a.struct_size, a.format, a.block, a.scale_rounding, a.scales_layout, a.values_dtype, a.scales_dtype, a.flags, a.stream, a.allocator.is_none()),
        (b.struct_size, b.format, b.block, b.scale_rounding, b.scales_layout, b.values_dtype, b.scales_dtype, b.flags, b.stream, b.allocator.is_none())
    );
    let (a, b) = (DequantizeOptions::default().to_sys(), sys::mxfp8_dequantize_options::default());
    assert_eq!((a.struct_size, a.direction, a.stream), (b.struct_size, b.direction, b.stream));

    // The builders' defaults show in what they build.
    let d = sys::mxfp8_tensor_desc::default();
    let t = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(ManagedTensor::from_host(vec![0; 64], &[2, 32]).unwrap(), ManagedTensor::from_host(vec![1; 2], &[2, 1]).unwrap())
        .build()
        .unwrap();
    assert_eq!((t.format().to_raw(), t.block().to_raw()), (d.format, d.block));
    assert_eq!((t.format(), t.block()), (Format::E4M3, Block::B1x32));
    let g = sys::mxfp8_grouped_desc::default();
    assert_eq!(GroupedScales::from_raw(g.scales), Some(GroupedScales::Padded));
    let e = GroupedBuilder::new()
        .uniform_experts(1, 2, 32)
        .buffers(ManagedTensor::from_host(vec![0; 64], &[2, 32]).unwrap(), ManagedTensor::from_host(vec![1; 512], &[128, 4]).unwrap())
        .build()
        .unwrap();
    assert_eq!(e.expert(0).unwrap().format().to_raw(), g.format);
}

// The scale layout has no default: a tensor described without it is refused by the library, by name,
// rather than read as row-major (Transformer Engine's swizzled scales of the same shape would decode to
// noise).
#[test]
fn a_tensor_without_a_scale_layout_is_refused() {
    let err = TensorBuilder::new()
        .rowwise(ManagedTensor::from_host(vec![0; 64], &[2, 32]).unwrap(), ManagedTensor::from_host(vec![1; 2], &[2, 1]).unwrap())
        .build()
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("desc.scale_layout is -1 (MXFP8_SCALE_LAYOUT_UNSET"), "{}", err.message);
}

#[test]
fn statuses_and_errors() {
    for (raw, status, name) in [
        (1, Status::InvalidArgument, "invalid argument"),
        (2, Status::MissingData, "missing data"),
        (3, Status::Unsupported, "unsupported"),
        (4, Status::OutOfMemory, "out of memory"),
        (5, Status::Cuda, "CUDA error"),
        (6, Status::Internal, "internal error"),
    ] {
        assert_eq!(Status::from_raw(sys::mxfp8_status(raw)), Some(status));
        assert_eq!(status.to_raw(), sys::mxfp8_status(raw));
        assert_eq!(status.name(), name);
    }
    assert_eq!(Status::from_raw(sys::mxfp8_status::OK), None);
    assert_eq!(Status::from_raw(sys::mxfp8_status(99)), Some(Status::Unknown(99)));
    assert_eq!(Status::Unknown(99).name(), "unknown status");
    let err = ManagedTensor::from_host(vec![0; 10], &[3, 3]).unwrap_err();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(err.clone());
    assert_eq!(boxed.to_string(), "invalid argument: 10 bytes cannot have shape [3, 3]");
    assert_eq!(err, Error { status: Status::InvalidArgument, message: "10 bytes cannot have shape [3, 3]".into() });
    assert_eq!(mxfp8::version(), sys::MXFP8_VERSION);
}
