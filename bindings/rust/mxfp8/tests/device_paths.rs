//! The device-memory wrappers (DeviceBytes) driven with host memory, which their contract allows (any
//! DLPack device): the same results as the host-slice wrappers and the references, so the DLTensor
//! plumbing of every `_device` function is exercised without a GPU.
mod common;
use common::*;

use std::ffi::c_void;

use mxfp8::{
    export_scales_batched_device, quantize_into_device, swizzle_scales_device, sys, unswizzle_scales_device, BucketPlan, DequantizeOptions,
    DeviceBytes, Direction, ExportOptions, InputDtype, ManagedTensor, OutputDtype, QuantizeOptions, QuantizedScales, ScaleLayout, Status,
    Stream, TensorBuilder,
};

const CPU: sys::DLDevice = sys::DLDevice { device_type: sys::DLDeviceType::CPU, device_id: 0 };

fn bytes_of<T>(v: &mut [T]) -> DeviceBytes {
    // SAFETY: host memory the test owns and does not touch until the (synchronous) host call returns.
    unsafe { DeviceBytes::new(v.as_mut_ptr() as *mut c_void, std::mem::size_of_val(v), CPU) }
}

#[test]
fn device_wrappers_work_on_host_memory() {
    let (rows, cols) = (130usize, 5usize);
    let mut compact = random_bytes(rows * cols, 70, 1, 254);
    let mut swizzled = vec![POISON; mxfp8::swizzled_len(rows, cols)];
    swizzle_scales_device(bytes_of(&mut compact), rows, cols, bytes_of(&mut swizzled), Stream::default()).unwrap();
    assert_eq!(swizzled, swizzle_reference(&compact, rows, cols, 0));
    let mut back = vec![POISON; rows * cols];
    unswizzle_scales_device(bytes_of(&mut swizzled), rows, cols, bytes_of(&mut back), Stream::default()).unwrap();
    assert_eq!(back, compact);
    let err = unswizzle_scales_device(bytes_of(&mut swizzled), rows, cols, bytes_of(&mut back[1..]), Stream::default()).unwrap_err();
    assert!(err.message.contains("cannot be a 130 x 5 matrix"), "{err}");

    // A tensor from the swizzled scales: batched export and a bucket through DeviceBytes.
    let k = cols * 32 - 7;
    let values = random_bytes(rows * k, 71, 0, 255);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host_bytes(values.clone(), &[rows as i64, k as i64]).unwrap(),
            ManagedTensor::from_host_bytes(swizzled.clone(), &[swizzled.len() as i64]).unwrap(),
        )
        .build()
        .unwrap();
    let mut dst = vec![POISON; rows * cols];
    export_scales_batched_device(&[&tensor], &[bytes_of(&mut dst)], &ExportOptions::default()).unwrap();
    assert_eq!(dst, compact);
    let plan = BucketPlan::new(&[&tensor, &tensor], &ExportOptions::default(), 128).unwrap();
    let mut bucket = vec![POISON; plan.total_bytes() as usize];
    plan.fill_device(bytes_of(&mut bucket)).unwrap();
    let manifest = plan.manifest(["x", "y"]).unwrap();
    let base = bucket.as_ptr() as usize;
    for (e, v) in plan.entries().iter().zip(manifest.unpack_device(bytes_of(&mut bucket)).unwrap()) {
        assert_eq!((v.values.as_ptr() as usize - base, v.values.len()), (e.values_offset as usize, values.len()));
        assert_eq!((v.scales.as_ptr() as usize - base, v.scales.len()), (e.scales_offset as usize, compact.len()));
        assert_eq!(&bucket[e.scales_offset as usize..][..compact.len()], &compact[..]);
    }
    assert_eq!(manifest.unpack_device(bytes_of(&mut bucket[1..])).unwrap_err().status, Status::InvalidArgument);

    // Dequantize into DeviceBytes equals dequantize into a slice.
    let expected = tensor.dequantize_host(Direction::Rowwise).unwrap();
    let mut out = vec![f32::NAN; rows * k];
    tensor.dequantize_into_device(bytes_of(&mut out), OutputDtype::F32, &DequantizeOptions::new()).unwrap();
    assert!(out.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn quantize_into_device_on_host_memory() {
    let (m, k) = (50usize, 90usize);
    let mut x = random_floats(m * k, 72);
    let (rv, rs) = quantize_rowwise_reference(&x, m, k);
    let options = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let mut v = vec![POISON; m * k];
    let mut s = vec![POISON; mxfp8::swizzled_len(m, 3)];
    quantize_into_device(bytes_of(&mut x), InputDtype::F32, &[m as i64, k as i64], &options, Some((bytes_of(&mut v), bytes_of(&mut s))), None).unwrap();
    assert_eq!(v, rv);
    assert_eq!(s, swizzle_reference(&rs, m, 3, 0));
    let err = quantize_into_device(bytes_of(&mut x[1..]), InputDtype::F32, &[m as i64, k as i64], &options, Some((bytes_of(&mut v), bytes_of(&mut s))), None)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.starts_with("input:"), "{err}");
}
