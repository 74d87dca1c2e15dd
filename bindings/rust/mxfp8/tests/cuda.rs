//! The calls on real CUDA memory (DeviceBytes as Buf / BufMut), against the host path and the references
//! of tests/common.
//! Built only with `--features cuda-tests` (it links libcudart for cudaMalloc/cudaMemcpy); skips with a
//! printed reason when no GPU is visible, unless MXFP8_REQUIRE_GPU=1. bench/device/gpu_check.sh runs it:
//!
//!   LIBRARY_PATH=/usr/local/cuda/lib64 MXFP8_LIB_DIR=<CUDA build> MXFP8_REQUIRE_GPU=1 \
//!     cargo test --offline --features cuda-tests --test cuda
#![cfg(feature = "cuda-tests")]
mod common;
use common::*;

use std::ffi::c_void;

use mxfp8::{
    export_scales_batched, quantize_into, swizzle_scales, sys, unswizzle_scales, Buf, BufMut, DequantizeOptions, DeviceBytes, Direction, Dtype,
    ExportOptions, Format, GroupedBuilder, GroupedScales, Layout, ManagedTensor, QuantizeOptions, QuantizedScales, ScaleLayout, Stream, Target,
    Tensor, TensorBuilder, Transfer,
};

#[link(name = "cudart")]
extern "C" {
    fn cudaGetDeviceCount(count: *mut i32) -> i32;
    fn cudaMalloc(ptr: *mut *mut c_void, size: usize) -> i32;
    fn cudaFree(ptr: *mut c_void) -> i32;
    fn cudaMemcpy(dst: *mut c_void, src: *const c_void, count: usize, kind: i32) -> i32;
    fn cudaMemset(ptr: *mut c_void, value: i32, count: usize) -> i32;
    fn cudaDeviceSynchronize() -> i32;
}
const HOST_TO_DEVICE: i32 = 1;
const DEVICE_TO_HOST: i32 = 2;

fn ok(status: i32, what: &str) {
    assert_eq!(status, 0, "{what} failed with cudaError {status}");
}

/// A cudaMalloc'ed buffer on GPU 0, freed on drop.
struct DeviceBuf {
    ptr: *mut c_void,
    len: usize,
}

impl DeviceBuf {
    fn new(len: usize, fill: u8) -> Self {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: plain CUDA runtime calls on a fresh allocation.
        unsafe {
            ok(cudaMalloc(&mut ptr, len.max(1)), "cudaMalloc");
            ok(cudaMemset(ptr, fill as i32, len), "cudaMemset");
        }
        Self { ptr, len }
    }
    fn from_host<T: Copy>(data: &[T]) -> Self {
        let b = Self::new(std::mem::size_of_val(data), 0);
        // SAFETY: copies size_of_val(data) bytes into an allocation of that size.
        unsafe { ok(cudaMemcpy(b.ptr, data.as_ptr() as *const c_void, b.len, HOST_TO_DEVICE), "cudaMemcpy") };
        b
    }
    fn to_host(&self) -> Vec<u8> {
        read_back(self.ptr, self.len)
    }
    fn bytes(&self) -> DeviceBytes {
        // SAFETY: memory of GPU 0 that this test keeps alive, and synchronizes on, past every use.
        unsafe { DeviceBytes::new(self.ptr, self.len, mxfp8::sys::DLDevice { device_type: mxfp8::sys::DLDeviceType::CUDA, device_id: 0 }) }
    }
    fn f32_in(&self) -> Buf<'static> {
        Buf::device(self.bytes(), Dtype::F32).unwrap()
    }
    fn f32_out(&self) -> BufMut<'static> {
        BufMut::device(self.bytes(), Dtype::F32).unwrap()
    }
}

impl Drop for DeviceBuf {
    fn drop(&mut self) {
        // SAFETY: our allocation; the device is synchronized before buffers go.
        unsafe {
            cudaDeviceSynchronize();
            cudaFree(self.ptr);
        }
    }
}

fn read_back(ptr: *const c_void, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    // SAFETY: waits for all queued work, then copies `len` bytes of device memory the caller owns.
    unsafe {
        ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        ok(cudaMemcpy(out.as_mut_ptr() as *mut c_void, ptr, len, DEVICE_TO_HOST), "cudaMemcpy");
    }
    out
}

/// A uint8 CUDA tensor of `shape` holding `bytes`, owned by the returned ManagedTensor.
fn device_tensor(bytes: &[u8], shape: &[i64]) -> ManagedTensor {
    device_tensor_of(bytes, shape, sys::DLDataType { code: sys::DLDataTypeCode::UINT, bits: 8, lanes: 1 })
}

/// A float32 CUDA tensor of `shape` holding `values`.
fn device_tensor_f32(values: &[f32], shape: &[i64]) -> ManagedTensor {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    device_tensor_of(&bytes, shape, sys::DLDataType { code: sys::DLDataTypeCode::FLOAT, bits: 32, lanes: 1 })
}

/// A CUDA tensor of `shape` and `dtype` holding `bytes`, owned by the returned ManagedTensor.
fn device_tensor_of(bytes: &[u8], shape: &[i64], dtype: sys::DLDataType) -> ManagedTensor {
    struct Owned {
        managed: sys::DLManagedTensorVersioned,
        _buf: DeviceBuf,
        shape: Vec<i64>,
    }
    unsafe extern "C" fn free(m: *mut sys::DLManagedTensorVersioned) {
        drop(Box::from_raw((*m).manager_ctx as *mut Owned));
    }
    let buf = DeviceBuf::from_host(bytes);
    let mut owned = Box::new(Owned {
        managed: sys::DLManagedTensorVersioned {
            version: sys::DLPackVersion { major: 1, minor: 1 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(free),
            flags: 0,
            dl_tensor: sys::DLTensor {
                data: buf.ptr,
                device: sys::DLDevice { device_type: sys::DLDeviceType::CUDA, device_id: 0 },
                ndim: shape.len() as i32,
                dtype,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        _buf: buf,
        shape: shape.to_vec(),
    });
    owned.managed.dl_tensor.shape = owned.shape.as_mut_ptr();
    let raw = Box::into_raw(owned);
    // SAFETY: a valid managed tensor nobody else releases; its deleter frees it once, from any thread.
    unsafe {
        (*raw).managed.manager_ctx = raw as *mut c_void;
        ManagedTensor::from_raw(std::ptr::addr_of_mut!((*raw).managed)).unwrap()
    }
}

fn gpu_present() -> bool {
    let mut n = 0;
    // SAFETY: writes one int.
    let status = unsafe { cudaGetDeviceCount(&mut n) };
    if status != 0 || n == 0 {
        if std::env::var("MXFP8_REQUIRE_GPU").as_deref() == Ok("1") {
            panic!("no GPU (cudaGetDeviceCount: error {status}, {n} devices) and MXFP8_REQUIRE_GPU=1");
        }
        eprintln!("skipped: no GPU (cudaGetDeviceCount: error {status}, {n} devices)");
        return false;
    }
    true
}

/// A TE-layout weight (values + swizzled scales) on the host and the same bytes on the device.
fn weight(m: usize, k: usize, seed: u64) -> (Tensor, Tensor, Vec<u8>, Vec<u8>) {
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, seed, 0, 0x7E);
    let scales = random_bytes(m * c, seed + 1, 100, 150);
    let swz = swizzle_reference(&scales, m, c, POISON);
    let shape = [m as i64, k as i64];
    let sshape = [swz.len() as i64];
    let build = |d: ManagedTensor, s: ManagedTensor| TensorBuilder::new().scale_layout(ScaleLayout::GemmSwizzled).rowwise(d, s).build().unwrap();
    let host = build(ManagedTensor::from_host(values.clone(), &shape).unwrap(), ManagedTensor::from_host(swz.clone(), &sshape).unwrap());
    let device = build(device_tensor(&values, &shape), device_tensor(&swz, &sshape));
    (host, device, values, scales)
}

#[test]
fn device_wrappers_on_cuda_memory() {
    if !gpu_present() {
        return;
    }
    let (host_a, dev_a, values_a, scales_a) = weight(257, 80, 1);
    let (host_b, dev_b, values_b, scales_b) = weight(64, 4096, 3);

    // export: the scales copy is made on the device.
    let parts = dev_a.export(&ExportOptions::default()).unwrap();
    assert_eq!(parts.scales.device().device_type, sys::DLDeviceType::CUDA);
    assert_eq!(read_back(parts.scales.data_ptr(), scales_a.len()), scales_a);
    assert_eq!(read_back(parts.values.data_ptr(), values_a.len()), values_a);

    // batched
    let (da, db) = (DeviceBuf::new(scales_a.len(), POISON), DeviceBuf::new(scales_b.len(), POISON));
    export_scales_batched(&[&dev_a, &dev_b], vec![da.bytes().into(), db.bytes().into()], &ExportOptions::default()).unwrap();
    assert_eq!((da.to_host(), db.to_host()), (scales_a.clone(), scales_b.clone()));

    // bucket: the device fill equals the host fill of the same bytes, gaps untouched.
    let host_send = Transfer::from_tensors(&[&host_a, &host_b]);
    let (host_parts, host_total) = host_send.bucket_parts(256).unwrap();
    let send = Transfer::from_tensors(&[&dev_a, &dev_b]);
    let (parts, total) = send.bucket_parts(256).unwrap();
    assert_eq!((&parts, total), (&host_parts, host_total));
    let mut expected = vec![POISON; total as usize];
    host_send.to_bucket(&mut expected, &host_parts).run(Stream::default()).unwrap();
    let bucket = DeviceBuf::new(total as usize, POISON);
    let manifest = send.manifest(["a", "b"], &parts).unwrap();
    send.to_bucket(bucket.bytes(), &parts).run(Stream::default()).unwrap();
    assert!(bucket.to_host() == expected);
    let views = manifest.unpack(bucket.bytes()).unwrap();
    let (vs, ss) = (views[1].values.as_device().unwrap(), views[1].scales.as_device().unwrap());
    assert_eq!(read_back(ss.as_ptr(), ss.len()), scales_b);
    assert_eq!(read_back(vs.as_ptr(), vs.len()), values_b);

    // swizzle both ways
    let (rows, cols) = (257usize, 3usize);
    let compact = DeviceBuf::from_host(&scales_a);
    let swz = DeviceBuf::new(mxfp8::layout_bytes(Layout::Cutlass128x4, Direction::Rowwise, rows as i64, cols as i64).unwrap() as usize, POISON);
    swizzle_scales(compact.bytes(), rows, cols, swz.bytes(), Stream::default()).unwrap();
    assert_eq!(swz.to_host(), swizzle_reference(&scales_a, rows, cols, 0));
    let back = DeviceBuf::new(rows * cols, POISON);
    unswizzle_scales(swz.bytes(), rows, cols, back.bytes(), Stream::default()).unwrap();
    assert_eq!(back.to_host(), scales_a);

    // quantize_into: the device result equals the host one (bit-exact on both) and the reference.
    let (m, k) = (70usize, 100usize);
    let x = random_floats(m * k, 9);
    let options = QuantizeOptions::new().scales(QuantizedScales::Swizzled);
    let slen = quantized_scales_shape(QuantizedScales::Swizzled, &[m as i64, k as i64], Direction::Rowwise).iter().product::<i64>() as usize;
    let (mut hv, mut hs) = (vec![POISON; m * k], vec![POISON; slen]);
    quantize_into(Buf::from(&x), &[m as i64, k as i64], &options, Some((BufMut::from(&mut hv), BufMut::from(&mut hs))), None).unwrap();
    let input = DeviceBuf::from_host(&x);
    let (dv, ds) = (DeviceBuf::new(m * k, POISON), DeviceBuf::new(slen, POISON));
    quantize_into(input.f32_in(), &[m as i64, k as i64], &options, Some((dv.bytes().into(), ds.bytes().into())), None).unwrap();
    assert_eq!((dv.to_host(), ds.to_host()), (hv.clone(), hs));
    assert_eq!(hv, quantize_rowwise_reference(&x, m, k).0);

    // dequantize
    let mut expected = vec![0f32; 257 * 80];
    host_a.dequantize_into(BufMut::from(&mut expected), &DequantizeOptions::new()).unwrap();
    let out = DeviceBuf::new(expected.len() * 4, 0xFF);
    dev_a.dequantize_into(out.f32_out(), &DequantizeOptions::new()).unwrap();
    let got: Vec<f32> = out.to_host().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
    assert!(got.iter().zip(&expected).all(|(a, b)| a.to_bits() == b.to_bits()));

    // grouped experts on the device: per expert and stacked (one copy for padded swizzled scales).
    let (e, n, k) = (3usize, 96usize, 160usize);
    let c = k.div_ceil(32);
    let vals = random_bytes(e * n * k, 20, 0, 255);
    let per: Vec<Vec<u8>> = (0..e).map(|i| random_bytes(n * c, 21 + i as u64, 1, 254)).collect();
    let flat: Vec<u8> = per.iter().flat_map(|s| swizzle_reference(s, n, c, POISON)).collect();
    let g = GroupedBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .scales(GroupedScales::Padded)
        .uniform_experts(e as i32, n as i64, k as i64)
        .buffers(device_tensor(&vals, &[(e * n) as i64, k as i64]), device_tensor(&flat, &[flat.len() as i64]))
        .build()
        .unwrap();
    let stacked = g.export(None, &ExportOptions::default()).unwrap();
    assert_eq!(read_back(stacked.scales.data_ptr(), e * n * c), per.concat());
    let experts: Vec<Tensor> = (0..e).map(|i| g.expert(i).unwrap()).collect();
    let dst = DeviceBuf::new(n * c, POISON);
    export_scales_batched(&[&experts[2]], vec![dst.bytes().into()], &ExportOptions::default()).unwrap();
    assert_eq!(dst.to_host(), per[2]);

    // Host slices cannot receive a device tensor's scales: the library says why.
    let mut host_dst = vec![0u8; scales_a.len()];
    let err = export_scales_batched(&[&dev_a], vec![BufMut::from(&mut host_dst)], &ExportOptions::default()).unwrap_err();
    assert!(err.message.contains("cuda:0"), "{err}");
}

fn f32s(bytes: &[u8]) -> Vec<u32> {
    bytes.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn f32_bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn engine_targets_imports_and_prepared_plans_on_cuda_memory() {
    use mxfp8::{ConvertOptions, Shard};
    if !gpu_present() {
        return;
    }
    // convert: every target, the device result equals the host one (checked against the references
    // in tests/convert.rs).
    let (host, dev, _, _) = weight(256, 200, 31);
    for target in [Layout::Compact, Layout::Cutlass128x4, Layout::DeepgemmPacked, Layout::DeepgemmFloat32, Layout::TrtllmShuffled] {
        let options = ConvertOptions::new().target(target);
        let bytes = mxfp8::layout_bytes(target, Direction::Rowwise, 256, 7).unwrap() as usize;
        let (mut hv, mut hs) = (vec![POISON; 256 * 200], vec![POISON; bytes]);
        host.convert_into(&options, Some(BufMut::from(&mut hv)), &mut hs).unwrap();
        let (dv, ds) = (DeviceBuf::new(256 * 200, POISON), DeviceBuf::new(bytes, POISON));
        dev.convert_into(&options, Some(dv.bytes().into()), ds.bytes()).unwrap();
        assert_eq!((dv.to_host(), ds.to_host()), (hv, hs), "{target:?}");
    }
    // grouped convert: 2 experts of (128, 64), compact scales, into the gated TRT-LLM layout.
    let (e, n, k) = (2usize, 128usize, 64usize);
    let vals = random_bytes(e * n * k, 32, 0, 255);
    let sc = random_bytes(e * n * 2, 33, 1, 254);
    let build = |d: ManagedTensor, s: ManagedTensor| {
        GroupedBuilder::new().scales(GroupedScales::Compact).uniform_experts(e as i32, n as i64, k as i64).buffers(d, s).build().unwrap()
    };
    let gh = build(ManagedTensor::from_host(vals.clone(), &[(e * n * k) as i64]).unwrap(), ManagedTensor::from_host(sc.clone(), &[sc.len() as i64]).unwrap());
    let gd = build(device_tensor(&vals, &[(e * n * k) as i64]), device_tensor(&sc, &[sc.len() as i64]));
    let options = ConvertOptions::new().target(Layout::TrtllmShuffledGated);
    let (mut hv, mut hs) = (vec![POISON; e * n * k], vec![POISON; e * n * 4]);
    gh.convert_into(&options, Some(BufMut::from(&mut hv)), &mut hs).unwrap();
    let (dv, ds) = (DeviceBuf::new(e * n * k, POISON), DeviceBuf::new(e * n * 4, POISON));
    gd.convert_into(&options, Some(dv.bytes().into()), ds.bytes()).unwrap();
    assert_eq!((dv.to_host(), ds.to_host()), (hv, hs));

    // The direct transfer, whole and a shard, device against host.
    let (m, kk, c) = (256usize, 200usize, 7usize);
    let shard = [Shard::rows(200..256)];
    let (mut hv, mut hs) = (vec![POISON; 56 * kk], vec![POISON; 56 * c]);
    Transfer::from_tensors(&[&host]).shards(&shard).to_buffers(vec![Target::new(&mut hv, &mut hs, Layout::Compact)]).run(Stream::default()).unwrap();
    let (dv, ds) = (DeviceBuf::new(56 * kk, POISON), DeviceBuf::new(56 * c, POISON));
    Transfer::from_tensors(&[&dev]).shards(&shard).to_buffers(vec![Target::new(dv.bytes(), ds.bytes(), Layout::Compact)]).run(Stream::default()).unwrap();
    assert_eq!((dv.to_host(), ds.to_host()), (hv, hs));
    let whole = mxfp8::layout_bytes(Layout::Cutlass128x4, Direction::Rowwise, m as i64, c as i64).unwrap() as usize;
    let (dv, ds) = (DeviceBuf::new(m * kk, POISON), DeviceBuf::new(whole, POISON));
    Transfer::from_tensors(&[&dev]).to_buffers(vec![Target::new(dv.bytes(), ds.bytes(), Layout::Cutlass128x4)]).run(Stream::default()).unwrap();
    let (mut hv, mut hs) = (vec![POISON; m * kk], vec![POISON; whole]);
    Transfer::from_tensors(&[&host]).to_buffers(vec![Target::new(&mut hv, &mut hs, Layout::Cutlass128x4)]).run(Stream::default()).unwrap();
    assert_eq!((dv.to_host(), ds.to_host()), (hv.clone(), hs.clone()));

    // A prepared device bucket fill, then the bucket received on the device (immediate and prepared).
    let host_send = Transfer::from_tensors(&[&host]);
    let (parts, total) = host_send.bucket_parts(256).unwrap();
    let manifest = host_send.manifest(["w"], &parts).unwrap();
    let mut expected = vec![POISON; total as usize];
    host_send.to_bucket(&mut expected, &parts).run(Stream::default()).unwrap();
    let bucket = DeviceBuf::new(total as usize, POISON);
    let prepared = Transfer::from_tensors(&[&dev]).to_bucket(bucket.bytes(), &parts).prepare().unwrap();
    prepared.run(Stream::default()).unwrap();
    assert!(bucket.to_host() == expected);
    let (mut hv2, mut hs2) = (vec![POISON; m * kk], vec![POISON; whole]);
    Transfer::from_bucket(&expected, &manifest).to_buffers(vec![Target::new(&mut hv2, &mut hs2, Layout::Cutlass128x4)]).run(Stream::default()).unwrap();
    assert_eq!((&hv2, &hs2), (&hv, &hs));
    let (dv, ds) = (DeviceBuf::new(m * kk, POISON), DeviceBuf::new(whole, POISON));
    Transfer::from_bucket(bucket.bytes(), &manifest)
        .to_buffers(vec![Target::new(dv.bytes(), ds.bytes(), Layout::Cutlass128x4)])
        .run(Stream::default())
        .unwrap();
    assert_eq!((dv.to_host(), ds.to_host()), (hv.clone(), hs.clone()));
    let (dv, ds) = (DeviceBuf::new(m * kk, POISON), DeviceBuf::new(whole, POISON));
    Transfer::from_bucket(bucket.bytes(), &manifest)
        .to_buffers(vec![Target::new(dv.bytes(), ds.bytes(), Layout::Cutlass128x4)])
        .prepare()
        .unwrap()
        .run(Stream::default())
        .unwrap();
    assert_eq!((dv.to_host(), ds.to_host()), (hv, hs));
    drop(prepared);
}

#[test]
fn nvfp4_on_cuda_memory() {
    use mxfp8::{nvfp4_quantize_into, AmaxScope, FourOverSix, GlobalScale, Nvfp4Part, Nvfp4QuantizeOptions, ValuesDtype};
    if !gpu_present() {
        return;
    }
    let (m, k) = (70usize, 100usize);
    let shape = [m as i64, k as i64];
    let x = random_floats(m * k, 41);
    let input = DeviceBuf::from_host(&x);
    // quantize_into: every option family, the device result equals the host one (checked against the
    // references in tests/nvfp4.rs).
    let cases = [
        (Nvfp4QuantizeOptions::new().scales(QuantizedScales::Swizzled), 1),
        (Nvfp4QuantizeOptions::new().direction(Direction::Columnwise).scales(QuantizedScales::Padded), 1),
        (Nvfp4QuantizeOptions::new().amax_scope(AmaxScope::PerRow), m),
        (Nvfp4QuantizeOptions::new().four_over_six(FourOverSix::Mse).e4m3_max(256), 1),
    ];
    for (options, alen) in cases {
        let (vlen, slen) = (m * k / 2, nvfp4_scales_len(options.scales, options.direction, &shape));
        let (mut hv, mut hs, mut ha) = (vec![POISON; vlen], vec![POISON; slen], vec![0f32; alen]);
        let part = Nvfp4Part { input: Buf::from(&x), shape: &shape, values: (&mut hv).into(), scales: (&mut hs).into() };
        nvfp4_quantize_into(vec![part], &options, &mut ha).unwrap();
        let (dv, ds, da) = (DeviceBuf::new(vlen, POISON), DeviceBuf::new(slen, POISON), DeviceBuf::new(4 * alen, 0));
        let part = Nvfp4Part { input: input.f32_in(), shape: &shape, values: dv.bytes().into(), scales: ds.bytes().into() };
        nvfp4_quantize_into(vec![part], &options, da.f32_out()).unwrap();
        assert_eq!((dv.to_host(), ds.to_host(), f32s(&da.to_host())), (hv, hs, f32_bits(&ha)), "{options:?}");
    }
    // fused: two shards under one amax.
    let y: Vec<f32> = random_floats(30 * k, 42).iter().map(|v| v * 50.0).collect();
    let input_y = DeviceBuf::from_host(&y);
    let yshape = [30i64, k as i64];
    let options = Nvfp4QuantizeOptions::new();
    let sc = k.div_ceil(16);
    let (mut h1v, mut h1s, mut h2v, mut h2s, mut ha) = (vec![POISON; m * k / 2], vec![POISON; m * sc], vec![POISON; 30 * k / 2], vec![POISON; 30 * sc], 0f32);
    let shards = vec![
        Nvfp4Part { input: Buf::from(&x), shape: &shape, values: (&mut h1v).into(), scales: (&mut h1s).into() },
        Nvfp4Part { input: Buf::from(&y), shape: &yshape, values: (&mut h2v).into(), scales: (&mut h2s).into() },
    ];
    nvfp4_quantize_into(shards, &options, std::slice::from_mut(&mut ha)).unwrap();
    let (d1v, d1s, d2v, d2s, da) =
        (DeviceBuf::new(m * k / 2, POISON), DeviceBuf::new(m * sc, POISON), DeviceBuf::new(30 * k / 2, POISON), DeviceBuf::new(30 * sc, POISON), DeviceBuf::new(4, 0));
    let device_shards = vec![
        Nvfp4Part { input: input.f32_in(), shape: &shape, values: d1v.bytes().into(), scales: d1s.bytes().into() },
        Nvfp4Part { input: input_y.f32_in(), shape: &yshape, values: d2v.bytes().into(), scales: d2s.bytes().into() },
    ];
    nvfp4_quantize_into(device_shards, &options, da.f32_out()).unwrap();
    assert_eq!((d1v.to_host(), d1s.to_host(), d2v.to_host(), d2s.to_host(), f32s(&da.to_host())), (h1v.clone(), h1s.clone(), h2v, h2s, vec![ha.to_bits()]));

    // An NVFP4 tensor in CUDA memory: export (the global scale computed on the device), dequantize.
    let build = |d: ManagedTensor, s: ManagedTensor, a: ManagedTensor| {
        TensorBuilder::new().scale_layout(ScaleLayout::RowMajor).format(Format::Nvfp4).rowwise(d, s).amax(Direction::Rowwise, a).build().unwrap()
    };
    let th = build(
        ManagedTensor::from_host(h1v.clone(), &[m as i64, (k / 2) as i64]).unwrap(),
        ManagedTensor::from_host(h1s.clone(), &[m as i64, sc as i64]).unwrap(),
        ManagedTensor::from_host(vec![ha], &[1]).unwrap(),
    );
    let td = build(device_tensor(&h1v, &[m as i64, (k / 2) as i64]), device_tensor(&h1s, &[m as i64, sc as i64]), device_tensor_f32(&[ha], &[1]));
    for convention in [GlobalScale::Decode, GlobalScale::Encode] {
        let options = ExportOptions::new().values_dtype(ValuesDtype::Uint8).global_scale(convention);
        let (ph, pd) = (th.export(&options).unwrap(), td.export(&options).unwrap());
        let (gh, gd) = (ph.global_scale.unwrap(), pd.global_scale.unwrap());
        assert_eq!(gd.device().device_type, sys::DLDeviceType::CUDA);
        assert_eq!(f32s(&read_back(gd.data_ptr(), 4)), f32_bits(&gh.to_host::<f32>().unwrap()), "{convention:?}");
        assert_eq!(read_back(pd.scales.data_ptr(), m * sc), h1s);
        assert_eq!(read_back(pd.values.data_ptr(), m * k / 2), h1v);
    }
    let expected = common::dequantize_host(&th, Direction::Rowwise).unwrap();
    let out = DeviceBuf::new(m * k * 4, 0xFF);
    td.dequantize_into(out.f32_out(), &DequantizeOptions::new()).unwrap();
    assert_eq!(f32s(&out.to_host()), f32_bits(&expected));
}

#[test]
fn mixed_buckets_and_imports_on_cuda_memory() {
    use mxfp8::GlobalScale;
    if !gpu_present() {
        return;
    }
    // MXFP8 (133, 72) and NVFP4 (140, 40), both with swizzled scales (padding poisoned): partial blocks,
    // rows not a multiple of 128. The device results equal the host ones (checked against the references
    // in tests/transfer_mixed.rs).
    let (mh, md, mv, ms) = weight(133, 72, 61);
    let (r, k, c) = (140usize, 40usize, 3usize);
    let values = random_bytes(r * k / 2, 62, 0, 255);
    let scales = random_bytes(r * c, 63, 1, 0x7E);
    let swz = swizzle_reference(&scales, r, c, POISON);
    let (vshape, sshape) = ([r as i64, (k / 2) as i64], [256i64, 4]);
    let build = |d: ManagedTensor, s: ManagedTensor, a: ManagedTensor| {
        TensorBuilder::new().format(Format::Nvfp4).scale_layout(ScaleLayout::GemmSwizzled).rowwise(d, s).amax(Direction::Rowwise, a).build().unwrap()
    };
    let nh = build(
        ManagedTensor::from_host(values.clone(), &vshape).unwrap(),
        ManagedTensor::from_host(swz.clone(), &sshape).unwrap(),
        ManagedTensor::from_host(vec![5.5], &[1]).unwrap(),
    );
    let nd = build(device_tensor(&values, &vshape), device_tensor(&swz, &sshape), device_tensor_f32(&[5.5], &[1]));
    let (host_tensors, dev_tensors) = ([&mh, &nh], [&md, &nd]);

    // The bucket: one launch, then its prepared form.
    let host_send = Transfer::from_tensors(&host_tensors);
    let (host_parts, host_total) = host_send.bucket_parts(256).unwrap();
    let mut expected = vec![POISON; host_total as usize];
    host_send.to_bucket(&mut expected, &host_parts).run(Stream::default()).unwrap();
    let send = Transfer::from_tensors(&dev_tensors);
    let (parts, total) = send.bucket_parts(256).unwrap();
    assert_eq!((&parts, total), (&host_parts, host_total));
    let manifest = send.manifest(["w", "n"], &parts).unwrap();
    let bucket = DeviceBuf::new(total as usize, POISON);
    send.to_bucket(bucket.bytes(), &parts).run(Stream::default()).unwrap();
    assert!(bucket.to_host() == expected);
    let again = DeviceBuf::new(total as usize, POISON);
    let prepared = Transfer::from_tensors(&dev_tensors).to_bucket(again.bytes(), &parts).prepare().unwrap();
    prepared.run(Stream::default()).unwrap();
    assert!(again.to_host() == expected);
    drop(prepared);
    let e = &host_parts;
    assert_eq!(&expected[e[0].values_offset as usize..][..mv.len()], &mv[..]);
    assert_eq!(&expected[e[0].scales_offset as usize..][..ms.len()], &ms[..]);
    assert_eq!(&expected[e[1].scales_offset as usize..][..scales.len()], &scales[..]);

    // The direct transfer (and the one from the bucket) into an MXFP8 compact and an NVFP4 128x4 target,
    // with the encode global scale.
    let (mut hmv, mut hms, mut hnv, mut hns, mut hg) = (vec![POISON; mv.len()], vec![POISON; ms.len()], vec![POISON; values.len()], vec![POISON; swz.len()], [0f32]);
    let targets = vec![
        Target::new(&mut hmv, &mut hms, Layout::Compact),
        Target::new(&mut hnv, &mut hns, Layout::Cutlass128x4).global_scale(&mut hg),
    ];
    Transfer::from_tensors(&host_tensors).global_scale(GlobalScale::Encode).to_buffers(targets).run(Stream::default()).unwrap();
    let host_result = (hmv, hms, hnv, hns, f32_bits(&hg));
    // The receiver of the device bucket writes the same, immediate and prepared.
    for (from_bucket, prepared) in [(false, false), (false, true), (true, false), (true, true)] {
        let bufs = [mv.len(), ms.len(), values.len(), swz.len(), 4].map(|n| DeviceBuf::new(n, POISON));
        let targets = vec![
            Target::new(bufs[0].bytes(), bufs[1].bytes(), Layout::Compact),
            Target::new(bufs[2].bytes(), bufs[3].bytes(), Layout::Cutlass128x4).global_scale(bufs[4].f32_out()),
        ];
        let transfer = if from_bucket { Transfer::from_bucket(bucket.bytes(), &manifest) } else { Transfer::from_tensors(&dev_tensors) };
        let transfer = transfer.global_scale(GlobalScale::Encode).to_buffers(targets);
        let plan = if prepared { Some(transfer.prepare().unwrap()) } else { transfer.run(Stream::default()).map(|_| None).unwrap() };
        if let Some(plan) = &plan {
            plan.run(Stream::default()).unwrap();
        }
        let got = (bufs[0].to_host(), bufs[1].to_host(), bufs[2].to_host(), bufs[3].to_host(), f32s(&bufs[4].to_host()));
        assert!(got == host_result, "from the bucket: {from_bucket}, prepared: {prepared}");
        drop(plan);
    }
}
