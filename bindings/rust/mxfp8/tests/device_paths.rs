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

/// A rowwise (m, k) tensor with swizzled scales (padding poisoned); its values and compact scales.
fn swizzled_tensor(m: usize, k: usize, seed: u64) -> (mxfp8::Tensor, Vec<u8>, Vec<u8>) {
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, seed, 0, 255);
    let scales = random_bytes(m * c, seed + 1, 1, 254);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host_bytes(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host_bytes(swizzle_reference(&scales, m, c, POISON), &[mxfp8::swizzled_len(m, c) as i64]).unwrap(),
        )
        .build()
        .unwrap();
    (tensor, values, scales)
}

#[test]
fn convert_and_import_device_wrappers_on_host_memory() {
    use mxfp8::{
        import_bucket_device, import_tensor_shards_device, import_tensors_device, BucketImport, ConvertOptions, DeviceImportTarget,
        GroupedBuilder, GroupedScales, Layout, PreparedExport, Shard,
    };
    let (m, k) = (130usize, 70usize);
    let c = k.div_ceil(32);
    let (tensor, values, scales) = swizzled_tensor(m, k, 80);
    let want = swizzle_reference(&scales, m, c, 0);
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; want.len()]);
    tensor.convert_device(&ConvertOptions::new().target(Layout::Cutlass128x4), Some(bytes_of(&mut v)), bytes_of(&mut s)).unwrap();
    assert_eq!((&v, &s), (&values, &want));
    let mut short = vec![POISON; want.len() - 1];
    let err = tensor.convert_device(&ConvertOptions::new().target(Layout::Cutlass128x4), None, bytes_of(&mut short)).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");

    // Grouped: two experts of (128, 64), compact scales; DeepGEMM's layout per expert from its formula.
    let (e, n, kk) = (2usize, 128usize, 64usize);
    let gv = random_bytes(e * n * kk, 81, 0, 255);
    let gs = random_bytes(e * n * 2, 82, 1, 254);
    let grouped = GroupedBuilder::new()
        .uniform_experts(e as i32, n as i64, kk as i64)
        .scales(GroupedScales::Compact)
        .buffers(ManagedTensor::from_host_bytes(gv, &[(e * n * kk) as i64]).unwrap(), ManagedTensor::from_host_bytes(gs.clone(), &[(e * n * 2) as i64]).unwrap())
        .build()
        .unwrap();
    let per = 4 * n;
    let mut out = vec![POISON; e * per];
    grouped.convert_device(&ConvertOptions::new().target(Layout::DeepgemmPacked), None, bytes_of(&mut out)).unwrap();
    for x in 0..e {
        assert_eq!(out[x * per..(x + 1) * per], deepgemm_reference(&gs[x * n * 2..(x + 1) * n * 2], n, 2, 0)[..], "expert {x}");
    }

    // The direct import, whole and a shard, into DeviceBytes targets.
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; m * c]);
    let targets = [DeviceImportTarget { values: bytes_of(&mut v), scales: bytes_of(&mut s), layout: Layout::Compact }];
    import_tensors_device(&[&tensor], &ExportOptions::default(), &targets).unwrap();
    assert_eq!((&v, &s), (&values, &scales));
    let (mut v, mut s) = (vec![POISON; 30 * k], vec![POISON; 30 * c]);
    let targets = [DeviceImportTarget { values: bytes_of(&mut v), scales: bytes_of(&mut s), layout: Layout::Compact }];
    import_tensor_shards_device(&[&tensor], &[Shard::rows(100..130)], &ExportOptions::default(), &targets).unwrap();
    assert_eq!((&v[..], &s[..]), (&values[100 * k..], &scales[100 * c..]));

    // A bucket through DeviceBytes: filled (prepared), then imported (immediate and prepared).
    let plan = BucketPlan::new(&[&tensor], &ExportOptions::default(), 64).unwrap();
    let mut bucket = vec![POISON; plan.total_bytes() as usize];
    PreparedExport::bucket_device(&plan, bytes_of(&mut bucket)).unwrap().run(Stream::default()).unwrap();
    let manifest = plan.manifest(["w"]).unwrap();
    let import = BucketImport::new(&manifest.entries, Direction::Rowwise);
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; want.len()]);
    let targets = [DeviceImportTarget { values: bytes_of(&mut v), scales: bytes_of(&mut s), layout: Layout::Cutlass128x4 }];
    import_bucket_device(bytes_of(&mut bucket), &import, &targets, Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &want));
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; want.len()]);
    let targets = [DeviceImportTarget { values: bytes_of(&mut v), scales: bytes_of(&mut s), layout: Layout::Cutlass128x4 }];
    PreparedExport::import_bucket_device(bytes_of(&mut bucket), &import, &targets).unwrap().run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &want));
    let (mut v, mut s) = (vec![POISON; m * k], vec![POISON; m * c]);
    let targets = [DeviceImportTarget { values: bytes_of(&mut v), scales: bytes_of(&mut s), layout: Layout::Compact }];
    PreparedExport::import_tensors_device(&[&tensor], None, &ExportOptions::default(), &targets).unwrap().run(Stream::default()).unwrap();
    assert_eq!((&v, &s), (&values, &scales));
}

#[test]
fn nvfp4_device_wrappers_on_host_memory() {
    use mxfp8::{
        nvfp4_quantize_fused_into, nvfp4_quantize_fused_into_device, nvfp4_quantize_into, nvfp4_quantize_into_device, DeviceFusedShard,
        FusedShard, HostInput, Nvfp4Output, Nvfp4QuantizeOptions, Nvfp4TensorBuilder,
    };
    let (m, k) = (37usize, 40usize);
    let shape = [m as i64, k as i64];
    let mut x = random_floats(m * k, 90);
    let options = Nvfp4QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let (mut hv, mut hs, mut ha) = (vec![POISON; m * k / 2], vec![POISON; 512], [0f32]);
    nvfp4_quantize_into(HostInput::F32(&x), &shape, &options, Nvfp4Output { values: &mut hv, scales: &mut hs }, &mut ha).unwrap();
    let (mut dv, mut ds, mut da) = (vec![POISON; m * k / 2], vec![POISON; 512], [0f32]);
    nvfp4_quantize_into_device(bytes_of(&mut x), InputDtype::F32, &shape, &options, bytes_of(&mut dv), bytes_of(&mut ds), bytes_of(&mut da)).unwrap();
    assert_eq!((&dv, &ds, da[0].to_bits()), (&hv, &hs, ha[0].to_bits()));
    let err = nvfp4_quantize_into_device(bytes_of(&mut x), InputDtype::F32, &shape, &options, bytes_of(&mut dv), bytes_of(&mut ds), bytes_of(&mut da[..0]))
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");

    // Dequantize into DeviceBytes equals dequantize into a slice.
    let tensor = Nvfp4TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host_bytes(hv.clone(), &[m as i64, (k / 2) as i64]).unwrap(),
            ManagedTensor::from_host_bytes(hs.clone(), &[128, 4]).unwrap(),
            ManagedTensor::from_host_f32(ha.to_vec(), &[1]).unwrap(),
        )
        .build()
        .unwrap();
    let expected = tensor.dequantize_host(Direction::Rowwise).unwrap();
    let mut out = vec![f32::NAN; m * k];
    tensor.dequantize_into_device(bytes_of(&mut out), OutputDtype::F32, &DequantizeOptions::new()).unwrap();
    assert!(out.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()));

    // Fused, two shards: device equals host.
    let mut y = random_floats(10 * k, 91).iter().map(|v| v * 100.0).collect::<Vec<f32>>();
    let yshape = [10i64, k as i64];
    let compact = Nvfp4QuantizeOptions::new();
    let (mut h1v, mut h1s, mut h2v, mut h2s, mut hamax) = (vec![POISON; m * k / 2], vec![POISON; m * 3], vec![POISON; 10 * k / 2], vec![POISON; 30], 0f32);
    let mut host_shards = [
        FusedShard { input: HostInput::F32(&x), shape: &shape, output: Nvfp4Output { values: &mut h1v, scales: &mut h1s } },
        FusedShard { input: HostInput::F32(&y), shape: &yshape, output: Nvfp4Output { values: &mut h2v, scales: &mut h2s } },
    ];
    nvfp4_quantize_fused_into(&mut host_shards, &compact, &mut hamax).unwrap();
    let (mut d1v, mut d1s, mut d2v, mut d2s, mut damax) = (vec![POISON; m * k / 2], vec![POISON; m * 3], vec![POISON; 10 * k / 2], vec![POISON; 30], [0f32]);
    let device_shards = [
        DeviceFusedShard { input: bytes_of(&mut x), shape: &shape, values: bytes_of(&mut d1v), scales: bytes_of(&mut d1s) },
        DeviceFusedShard { input: bytes_of(&mut y), shape: &yshape, values: bytes_of(&mut d2v), scales: bytes_of(&mut d2s) },
    ];
    nvfp4_quantize_fused_into_device(&device_shards, InputDtype::F32, &compact, bytes_of(&mut damax)).unwrap();
    assert_eq!((&d1v, &d1s, &d2v, &d2s, damax[0].to_bits()), (&h1v, &h1s, &h2v, &h2s, hamax.to_bits()));
}
