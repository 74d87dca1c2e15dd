//! The calls driven with DeviceBytes over host memory, which their contract allows (any DLPack device):
//! the same results as with host slices and the references, so the DeviceBytes route of every call
//! (Buf::device, BufMut::device, `From<DeviceBytes>`) is exercised without a GPU.
mod common;
use common::*;

use std::ffi::c_void;

use mxfp8::{
    export_scales_batched, quantize_into, swizzle_scales, sys, unswizzle_scales, Buf, BufMut, DequantizeOptions, DeviceBytes, Direction, Dtype,
    ExportOptions, ManagedTensor, QuantizeOptions, QuantizedScales, ScaleLayout, Status, Stream, Target, TensorBuilder, Transfer,
};

const CPU: sys::DLDevice = sys::DLDevice { device_type: sys::DLDeviceType::CPU, device_id: 0 };

fn bytes_of<T>(v: &mut [T]) -> DeviceBytes {
    // SAFETY: host memory the test owns and does not touch until the (synchronous) host call returns.
    unsafe { DeviceBytes::new(v.as_mut_ptr() as *mut c_void, std::mem::size_of_val(v), CPU) }
}

fn f32_in(v: &mut [f32]) -> Buf<'static> {
    Buf::device(bytes_of(v), Dtype::F32).unwrap()
}

fn f32_out(v: &mut [f32]) -> BufMut<'static> {
    BufMut::device(bytes_of(v), Dtype::F32).unwrap()
}

fn swizzled_len(rows: usize, cols: usize) -> usize {
    rows.div_ceil(128) * 128 * cols.div_ceil(4) * 4
}

#[test]
fn device_wrappers_work_on_host_memory() {
    let (rows, cols) = (130usize, 5usize);
    let mut compact = random_bytes(rows * cols, 70, 1, 254);
    let mut swizzled = vec![POISON; swizzled_len(rows, cols)];
    swizzle_scales(bytes_of(&mut compact), rows, cols, bytes_of(&mut swizzled), Stream::default()).unwrap();
    assert_eq!(swizzled, swizzle_reference(&compact, rows, cols, 0));
    let mut back = vec![POISON; rows * cols];
    unswizzle_scales(bytes_of(&mut swizzled), rows, cols, bytes_of(&mut back), Stream::default()).unwrap();
    assert_eq!(back, compact);
    let err = unswizzle_scales(bytes_of(&mut swizzled), rows, cols, bytes_of(&mut back[1..]), Stream::default()).unwrap_err();
    assert!(err.message.contains("cannot have the shape [130, 5]"), "{err}");

    // A tensor from the swizzled scales: batched export and a bucket through DeviceBytes.
    let k = cols * 32 - 7;
    let values = random_bytes(rows * k, 71, 0, 255);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[rows as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(swizzled.clone(), &[swizzled.len() as i64]).unwrap(),
        )
        .build()
        .unwrap();
    let mut dst = vec![POISON; rows * cols];
    export_scales_batched(&[&tensor], vec![bytes_of(&mut dst).into()], &ExportOptions::default()).unwrap();
    assert_eq!(dst, compact);
    let send = Transfer::from_tensors(&[&tensor, &tensor]);
    let (parts, total) = send.bucket_parts(128).unwrap();
    let manifest = send.manifest(["x", "y"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(bytes_of(&mut bucket), &parts).run(Stream::default()).unwrap();
    let base = bucket.as_ptr() as usize;
    for (e, v) in parts.iter().zip(manifest.unpack(bytes_of(&mut bucket)).unwrap()) {
        let (vs, ss) = (v.values.as_device().unwrap(), v.scales.as_device().unwrap());
        assert_eq!((vs.as_ptr() as usize - base, vs.len()), (e.values_offset as usize, values.len()));
        assert_eq!((ss.as_ptr() as usize - base, ss.len()), (e.scales_offset as usize, compact.len()));
        assert_eq!(&bucket[e.scales_offset as usize..][..compact.len()], &compact[..]);
    }
    assert_eq!(manifest.unpack(bytes_of(&mut bucket[1..])).unwrap_err().status, Status::InvalidArgument);

    // Dequantize into DeviceBytes equals dequantize into a slice.
    let expected = common::dequantize_host(&tensor, Direction::Rowwise).unwrap();
    let mut out = vec![f32::NAN; rows * k];
    tensor.dequantize_into(f32_out(&mut out), &DequantizeOptions::new()).unwrap();
    assert!(out.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()));
}

#[test]
fn quantize_into_device_on_host_memory() {
    let (m, k) = (50usize, 90usize);
    let mut x = random_floats(m * k, 72);
    let (rv, rs) = quantize_rowwise_reference(&x, m, k);
    let options = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let mut v = vec![POISON; m * k];
    let mut s = vec![POISON; swizzled_len(m, 3)];
    quantize_into(f32_in(&mut x), &[m as i64, k as i64], &options, Some((bytes_of(&mut v).into(), bytes_of(&mut s).into())), None).unwrap();
    assert_eq!(v, rv);
    assert_eq!(s, swizzle_reference(&rs, m, 3, 0));
    let err = quantize_into(f32_in(&mut x[1..]), &[m as i64, k as i64], &options, Some((bytes_of(&mut v).into(), bytes_of(&mut s).into())), None)
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.starts_with("input:"), "{err}");
    // Device bytes that are not a whole number of elements.
    let odd = unsafe { DeviceBytes::new(x.as_mut_ptr() as *mut c_void, 6, CPU) };
    let err = Buf::device(odd, Dtype::F32).unwrap_err();
    assert!(err.status == Status::InvalidArgument && err.message.contains("not a whole number of F32 elements"), "{err}");
}

/// A rowwise (m, k) tensor with swizzled scales (padding poisoned); its values and compact scales.
fn swizzled_tensor(m: usize, k: usize, seed: u64) -> (mxfp8::Tensor, Vec<u8>, Vec<u8>) {
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, seed, 0, 255);
    let scales = random_bytes(m * c, seed + 1, 1, 254);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(swizzle_reference(&scales, m, c, POISON), &[swizzled_len(m, c) as i64]).unwrap(),
        )
        .build()
        .unwrap();
    (tensor, values, scales)
}

#[test]
fn convert_and_import_device_wrappers_on_host_memory() {
    use mxfp8::{ConvertOptions, GroupedBuilder, GroupedScales, Layout, Shard};
    let (m, k) = (130usize, 70usize);
    let c = k.div_ceil(32);
    let (tensor, values, scales) = swizzled_tensor(m, k, 80);
    let want = swizzle_reference(&scales, m, c, 0);
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; want.len()]);
    tensor.convert_into(&ConvertOptions::new().target(Layout::Cutlass128x4), Some(bytes_of(&mut v).into()), bytes_of(&mut s)).unwrap();
    assert_eq!((&v, &s), (&values, &want));
    let mut short = vec![POISON; want.len() - 1];
    let err = tensor.convert_into(&ConvertOptions::new().target(Layout::Cutlass128x4), None, bytes_of(&mut short)).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");

    // Grouped: two experts of (128, 64), compact scales; DeepGEMM's layout per expert from its formula.
    let (e, n, kk) = (2usize, 128usize, 64usize);
    let gv = random_bytes(e * n * kk, 81, 0, 255);
    let gs = random_bytes(e * n * 2, 82, 1, 254);
    let grouped = GroupedBuilder::new()
        .uniform_experts(e as i32, n as i64, kk as i64)
        .scales(GroupedScales::Compact)
        .buffers(ManagedTensor::from_host(gv, &[(e * n * kk) as i64]).unwrap(), ManagedTensor::from_host(gs.clone(), &[(e * n * 2) as i64]).unwrap())
        .build()
        .unwrap();
    let per = 4 * n;
    let mut out = vec![POISON; e * per];
    grouped.convert_into(&ConvertOptions::new().target(Layout::DeepgemmPacked), None, bytes_of(&mut out)).unwrap();
    for x in 0..e {
        assert_eq!(out[x * per..(x + 1) * per], deepgemm_reference(&gs[x * n * 2..(x + 1) * n * 2], n, 2, 0)[..], "expert {x}");
    }

    // The direct transfer, whole and a shard, into DeviceBytes targets.
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; m * c]);
    let targets = vec![Target::new(bytes_of(&mut v), bytes_of(&mut s), Layout::Compact)];
    Transfer::from_tensors(&[&tensor]).to_buffers(targets).run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &scales));
    let (mut v, mut s) = (vec![POISON; 30 * k], vec![POISON; 30 * c]);
    let targets = vec![Target::new(bytes_of(&mut v), bytes_of(&mut s), Layout::Compact)];
    Transfer::from_tensors(&[&tensor]).shards(&[Shard::rows(100..130)]).to_buffers(targets).run(Stream::default()).unwrap();
    assert_eq!((&v[..], &s[..]), (&values[100 * k..], &scales[100 * c..]));

    // A bucket through DeviceBytes: filled (prepared), then received (immediate and prepared).
    let send = Transfer::from_tensors(&[&tensor]);
    let (parts, total) = send.bucket_parts(64).unwrap();
    let manifest = send.manifest(["w"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(bytes_of(&mut bucket), &parts).prepare().unwrap().run(Stream::default()).unwrap();
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; want.len()]);
    let targets = vec![Target::new(bytes_of(&mut v), bytes_of(&mut s), Layout::Cutlass128x4)];
    Transfer::from_bucket(bytes_of(&mut bucket), &manifest).to_buffers(targets).run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &want));
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; want.len()]);
    let targets = vec![Target::new(bytes_of(&mut v), bytes_of(&mut s), Layout::Cutlass128x4)];
    Transfer::from_bucket(bytes_of(&mut bucket), &manifest).to_buffers(targets).prepare().unwrap().run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &want));
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; m * c]);
    let targets = vec![Target::new(bytes_of(&mut v), bytes_of(&mut s), Layout::Compact)];
    Transfer::from_tensors(&[&tensor]).to_buffers(targets).prepare().unwrap().run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &scales));
}

#[test]
fn nvfp4_device_wrappers_on_host_memory() {
    use mxfp8::{nvfp4_quantize_into, Format, Nvfp4Part, Nvfp4QuantizeOptions};
    let (m, k) = (37usize, 40usize);
    let shape = [m as i64, k as i64];
    let mut x = random_floats(m * k, 90);
    let options = Nvfp4QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let (mut hv, mut hs, mut ha) = (vec![POISON; m * k / 2], vec![POISON; 512], [0f32]);
    let part = Nvfp4Part { input: Buf::from(&x), shape: &shape, values: (&mut hv).into(), scales: (&mut hs).into() };
    nvfp4_quantize_into(vec![part], &options, &mut ha).unwrap();
    let (mut dv, mut ds, mut da) = (vec![POISON; m * k / 2], vec![POISON; 512], [0f32]);
    let part = Nvfp4Part { input: f32_in(&mut x), shape: &shape, values: bytes_of(&mut dv).into(), scales: bytes_of(&mut ds).into() };
    nvfp4_quantize_into(vec![part], &options, f32_out(&mut da)).unwrap();
    assert_eq!((&dv, &ds, da[0].to_bits()), (&hv, &hs, ha[0].to_bits()));
    let part = Nvfp4Part { input: f32_in(&mut x), shape: &shape, values: bytes_of(&mut dv).into(), scales: bytes_of(&mut ds).into() };
    let err = nvfp4_quantize_into(vec![part], &options, f32_out(&mut da[..0])).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");

    // Dequantize into DeviceBytes equals dequantize into a slice.
    let tensor = TensorBuilder::new()
        .format(Format::Nvfp4)
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(hv.clone(), &[m as i64, (k / 2) as i64]).unwrap(),
            ManagedTensor::from_host(hs.clone(), &[128, 4]).unwrap(),
        )
        .amax(Direction::Rowwise, ManagedTensor::from_host(ha.to_vec(), &[1]).unwrap())
        .build()
        .unwrap();
    let expected = common::dequantize_host(&tensor, Direction::Rowwise).unwrap();
    let mut out = vec![f32::NAN; m * k];
    tensor.dequantize_into(f32_out(&mut out), &DequantizeOptions::new()).unwrap();
    assert!(out.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()));

    // Fused, two shards: device equals host.
    let mut y = random_floats(10 * k, 91).iter().map(|v| v * 100.0).collect::<Vec<f32>>();
    let yshape = [10i64, k as i64];
    let compact = Nvfp4QuantizeOptions::new();
    let (mut h1v, mut h1s, mut h2v, mut h2s, mut hamax) = (vec![POISON; m * k / 2], vec![POISON; m * 3], vec![POISON; 10 * k / 2], vec![POISON; 30], 0f32);
    let host_shards = vec![
        Nvfp4Part { input: Buf::from(&x), shape: &shape, values: (&mut h1v).into(), scales: (&mut h1s).into() },
        Nvfp4Part { input: Buf::from(&y), shape: &yshape, values: (&mut h2v).into(), scales: (&mut h2s).into() },
    ];
    nvfp4_quantize_into(host_shards, &compact, std::slice::from_mut(&mut hamax)).unwrap();
    let (mut d1v, mut d1s, mut d2v, mut d2s, mut damax) = (vec![POISON; m * k / 2], vec![POISON; m * 3], vec![POISON; 10 * k / 2], vec![POISON; 30], [0f32]);
    let device_shards = vec![
        Nvfp4Part { input: f32_in(&mut x), shape: &shape, values: bytes_of(&mut d1v).into(), scales: bytes_of(&mut d1s).into() },
        Nvfp4Part { input: f32_in(&mut y), shape: &yshape, values: bytes_of(&mut d2v).into(), scales: bytes_of(&mut d2s).into() },
    ];
    nvfp4_quantize_into(device_shards, &compact, f32_out(&mut damax)).unwrap();
    assert_eq!((&d1v, &d1s, &d2v, &d2s, damax[0].to_bits()), (&h1v, &h1s, &h2v, &h2s, hamax.to_bits()));
}
