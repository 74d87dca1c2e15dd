//! The safe API on host memory: swizzled and padded exports, decode, errors, drop order.
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

use mxfp8::{sys, Block, Direction, ExportOptions, Format, ManagedTensor, PaddedScales, ScaleLayout, ScalesGranularity, Status, Stream, TensorBuilder};

/// The cuBLAS layout offset, written here from the layout's permute form (independent of the library).
fn swizzled_index(r: usize, c: usize, padded_cols: usize) -> usize {
    let (a, b, cc, d, e) = (r / 128, (r % 128) / 32, r % 32, c / 4, c % 4);
    (((a * (padded_cols / 4) + d) * 32 + cc) * 4 + b) * 4 + e
}

fn random_bytes(n: usize, seed: u64, lo: u8, hi: u8) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            lo + (x % (hi as u64 - lo as u64 + 1)) as u8
        })
        .collect()
}

/// E4M3FN to f64, from the bit format.
fn decode_e4m3(v: u8) -> f64 {
    let (sign, e, m) = (v >> 7, ((v >> 3) & 15) as i32, (v & 7) as f64);
    if e == 15 && m == 7.0 {
        return f64::NAN;
    }
    let x = if e == 0 { m * 2f64.powi(-9) } else { (8.0 + m) * 2f64.powi(e - 10) };
    if sign == 1 { -x } else { x }
}

const POISON: u8 = 0xFF;

fn swizzled_tensor(rows: usize, k: usize, seed: u64) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let c = k.div_ceil(32);
    let (rp, cp) = (rows.div_ceil(128) * 128, c.div_ceil(4) * 4);
    let values = random_bytes(rows * k, seed, 0, 255);
    let scales = random_bytes(rows * c, seed + 1, 1, 254);
    let mut swz = vec![POISON; rp * cp];
    for r in 0..rows {
        for j in 0..c {
            swz[swizzled_index(r, j, cp)] = scales[r * c + j];
        }
    }
    (values, scales, swz)
}

#[test]
fn swizzled_export_decodes_exactly() {
    let (rows, k) = (257, 48);
    let (values, scales, swz) = swizzled_tensor(rows, k, 7);
    let rp = rows.div_ceil(128) * 128;
    let tensor = TensorBuilder::new()
        .format(Format::E4M3)
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[rows as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(swz, &[rp as i64, 4]).unwrap(),
        )
        .build()
        .unwrap();
    let parts = tensor.export(&ExportOptions::default()).unwrap();
    drop(tensor); // the values view keeps its source alive
    assert_eq!(parts.values.shape(), &[257, 48]);
    assert_eq!(parts.values.dtype().code, sys::DLDataTypeCode::FLOAT8_E4M3FN);
    assert!(!parts.values.is_copy() && parts.scales.is_copy());
    assert_eq!(parts.scales.shape(), &[257, 2]);
    let got_scales = parts.scales.as_host_bytes().unwrap();
    assert_eq!(got_scales, &scales[..]);
    let got_values = parts.values.as_host_bytes().unwrap();
    for r in 0..rows {
        for j in 0..k {
            let expected = decode_e4m3(values[r * k + j]) * 2f64.powi(scales[r * 2 + j / 32] as i32 - 127);
            let got = decode_e4m3(got_values[r * k + j]) * 2f64.powi(got_scales[r * 2 + j / 32] as i32 - 127);
            assert!(got == expected || (got.is_nan() && expected.is_nan()), "({r}, {j})");
        }
    }
}

#[test]
fn padded_scales_copy_or_strided_view() {
    let (rows, k) = (100, 48);
    let scales = random_bytes(rows * 2, 3, 1, 254);
    let mut padded = vec![POISON; 128 * 4];
    for r in 0..rows {
        padded[r * 4..r * 4 + 2].copy_from_slice(&scales[r * 2..r * 2 + 2]);
    }
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(
            ManagedTensor::from_host(vec![0x38; rows * k], &[rows as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(padded, &[128, 4]).unwrap(),
        )
        .build()
        .unwrap();
    let copy = tensor.export(&ExportOptions::default()).unwrap();
    assert!(copy.scales.is_copy());
    assert_eq!(copy.scales.as_host_bytes().unwrap(), &scales[..]);
    let view = tensor.export(&ExportOptions::new().padded_scales(PaddedScales::StridedView)).unwrap();
    assert!(!view.scales.is_copy());
    assert_eq!(view.scales.strides(), vec![4, 1]);
    assert!(view.scales.as_host_bytes().is_none()); // not contiguous
    assert_eq!(view.scales.to_host::<u8>().unwrap(), scales);
}

#[test]
fn errors_carry_status_and_message() {
    let err = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(vec![0; 100 * 48], &[100, 48]).unwrap(),
            ManagedTensor::from_host(vec![1; 200], &[100, 2]).unwrap(),
        )
        .build()
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("need 128 x 4 = 512 bytes, got 200"), "{}", err.message);
    assert!(err.to_string().starts_with("invalid argument: "));

    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(
            ManagedTensor::from_host(vec![0; 64 * 64], &[64, 64]).unwrap(),
            ManagedTensor::from_host(vec![1; 64 * 2], &[64, 2]).unwrap(),
        )
        .build()
        .unwrap();
    let err = tensor.export(&ExportOptions::new().direction(Direction::Columnwise)).unwrap_err();
    assert_eq!(err.status, Status::MissingData);
    assert!(err.message.contains("no columnwise data"));
    assert!(ManagedTensor::from_host(vec![0; 10], &[3, 3]).is_err());
}

#[test]
fn host_swizzle_round_trip() {
    let (rows, cols) = (300, 7);
    let s = random_bytes(rows * cols, 9, 1, 254);
    let swz = common::swizzle_host(&s, rows, cols).unwrap();
    assert_eq!(swz.len(), 384 * 8);
    for r in 0..rows {
        for c in 0..cols {
            assert_eq!(swz[swizzled_index(r, c, 8)], s[r * cols + c]);
        }
    }
    assert_eq!(common::unswizzle_host(&swz, rows, cols).unwrap(), s);
    assert!(common::unswizzle_host(&swz[..100], rows, cols).is_err());
}

// Drop order: counting deleters on foreign tensors.
static DELETED: AtomicUsize = AtomicUsize::new(0);

struct Foreign {
    managed: sys::DLManagedTensorVersioned,
    shape: [i64; 2],
    bytes: Vec<u8>,
}

unsafe extern "C" fn count_and_free(m: *mut sys::DLManagedTensorVersioned) {
    DELETED.fetch_add(1, Ordering::SeqCst);
    drop(Box::from_raw((*m).manager_ctx as *mut Foreign));
}

fn foreign(bytes: Vec<u8>, shape: [i64; 2]) -> ManagedTensor {
    let mut f = Box::new(Foreign {
        managed: sys::DLManagedTensorVersioned {
            version: sys::DLPackVersion { major: 1, minor: 1 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(count_and_free),
            flags: 0,
            dl_tensor: sys::DLTensor {
                data: std::ptr::null_mut(),
                device: sys::DLDevice { device_type: sys::DLDeviceType::CPU, device_id: 0 },
                ndim: 2,
                dtype: sys::DLDataType { code: sys::DLDataTypeCode::UINT, bits: 8, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape,
        bytes,
    });
    f.managed.dl_tensor.data = f.bytes.as_mut_ptr() as *mut c_void;
    f.managed.dl_tensor.shape = f.shape.as_mut_ptr();
    let raw = Box::into_raw(f);
    // SAFETY: raw is a leaked Foreign whose deleter frees it once, from any thread.
    unsafe {
        (*raw).managed.manager_ctx = raw as *mut c_void;
        ManagedTensor::from_raw(std::ptr::addr_of_mut!((*raw).managed)).unwrap()
    }
}

#[test]
fn inputs_are_freed_once_after_the_last_view() {
    DELETED.store(0, Ordering::SeqCst);
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(foreign(vec![5; 8 * 128], [8, 128]), foreign(vec![120; 8 * 4], [8, 4]))
        .build()
        .unwrap();
    let parts = tensor.export(&ExportOptions::default()).unwrap(); // both views (C = 4: compact)
    assert!(!parts.scales.is_copy());
    drop(tensor);
    assert_eq!(DELETED.load(Ordering::SeqCst), 0);
    let Components { values, scales, global_scale } = parts;
    assert!(global_scale.is_none()); // MXFP8 has no second level
    drop(scales);
    assert_eq!(DELETED.load(Ordering::SeqCst), 0);
    assert_eq!(values.as_host_bytes().unwrap()[1000], 5);
    drop(values);
    assert_eq!(DELETED.load(Ordering::SeqCst), 2);

    // A failed build drops (and so frees) its inputs exactly once.
    let err = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(foreign(vec![5; 8 * 128], [8, 128]), foreign(vec![120; 4], [1, 4]))
        .build();
    assert!(err.is_err());
    assert_eq!(DELETED.load(Ordering::SeqCst), 4);
}

use mxfp8::Components;

#[test]
fn tensors_are_shared_across_threads() {
    let (values, scales, swz) = swizzled_tensor(512, 256, 21);
    let tensor = std::sync::Arc::new(
        TensorBuilder::new()
            .scale_layout(ScaleLayout::GemmSwizzled)
            .rowwise(
                ManagedTensor::from_host(values, &[512, 256]).unwrap(),
                ManagedTensor::from_host(swz, &[512, 8]).unwrap(),
            )
            .build()
            .unwrap(),
    );
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let t = tensor.clone();
            std::thread::spawn(move || t.export(&ExportOptions::default()).unwrap().scales.to_host::<u8>().unwrap())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), scales);
    }
}

#[test]
fn block_scales_of_a_2d_quantized_weight() {
    // (64, 64): 2 x 2 blocks; rowwise scales repeat each block's scale down its 32 rows.
    let blocks = [101u8, 102, 103, 104];
    let mut padded = vec![POISON; 128 * 4];
    for r in 0..64 {
        padded[r * 4] = blocks[(r / 32) * 2];
        padded[r * 4 + 1] = blocks[(r / 32) * 2 + 1];
    }
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .block(Block::B32x32)
        .rowwise(
            ManagedTensor::from_host(vec![0x38; 64 * 64], &[64, 64]).unwrap(),
            ManagedTensor::from_host(padded, &[128, 4]).unwrap(),
        )
        .build()
        .unwrap();
    let parts = tensor.export(&ExportOptions::new().granularity(ScalesGranularity::Per32x32)).unwrap();
    assert_eq!(parts.scales.shape(), &[2, 2]);
    assert_eq!(parts.scales.as_host_bytes().unwrap(), &blocks);
}

#[test]
fn host_swizzle_into_caller_slices() {
    let (rows, cols) = (129, 6);
    let s = random_bytes(rows * cols, 19, 1, 254);
    let mut swz = vec![POISON; 256 * 8];
    mxfp8::swizzle_scales(&s, rows, cols, &mut swz, Stream::default()).unwrap();
    for (i, &b) in swz.iter().enumerate() {
        let (tile, within) = (i / 512, i % 512);
        let (r, c) = ((tile / 2) * 128 + ((within % 16) / 4) * 32 + within / 16, (tile % 2) * 4 + within % 4);
        let expected = if r < rows && c < cols { s[r * cols + c] } else { 0 }; // padding written as zero
        assert_eq!(b, expected, "byte {i}");
    }
    let mut back = vec![POISON; rows * cols];
    mxfp8::unswizzle_scales(&swz, rows, cols, &mut back, Stream::default()).unwrap();
    assert_eq!(back, s);
    let err = mxfp8::swizzle_scales(&s, rows, cols, &mut swz[1..], Stream::default()).unwrap_err();
    assert_eq!(err.status, mxfp8::Status::InvalidArgument);
    assert!(err.message.contains("2047"), "{err}");
    let err = mxfp8::unswizzle_scales(&swz, rows, cols, &mut back[1..], Stream::default()).unwrap_err();
    assert!(err.message.contains("cannot have the shape [129, 6]"), "{err}");
}

/// A tensor of no elements may have dimensions whose product overflows past the zero (the library takes
/// one: any strides describe no memory): from_host and strides() used to panic computing the
/// row-major strides ("attempt to multiply with overflow").
#[test]
fn empty_tensors_of_huge_dimensions_do_not_panic() {
    let t = ManagedTensor::from_host(Vec::<u8>::new(), &[0, 1 << 40, 1 << 40]).unwrap();
    assert_eq!(t.strides().len(), 3);
    assert_eq!(t.as_host_bytes(), Some(&[][..]));
    assert_eq!(t.to_host::<u8>(), Some(vec![]));
    assert!(ManagedTensor::from_host(Vec::<f32>::new(), &[0, 1 << 40, 1 << 40]).is_ok());
    // The zero anywhere: the product was folded left to right, so dimensions that overflowed before the
    // zero refused the shape ("0 bytes cannot have shape ...") that the same dimensions after it took.
    for shape in [[i64::MAX, i64::MAX, 0], [i64::MAX, 0, i64::MAX], [0, i64::MAX, i64::MAX]] {
        assert!(ManagedTensor::from_host(Vec::<u8>::new(), &shape).is_ok(), "{shape:?}");
    }
    assert!(ManagedTensor::from_host(Vec::<u8>::new(), &[-1, 0]).is_err(), "a negative dimension");
}

/// An empty `shape(&[])` is the header's "ndim 0: the logical shape comes from the data": Tensor::shape
/// is then the data's too. It used to be `[]`, so dequantize_host allocated 1 element and failed, and a
/// manifest described a rank-0 entry.
#[test]
fn an_empty_logical_shape_takes_the_datas() {
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .shape(&[])
        .rowwise(ManagedTensor::from_host(vec![0x38; 4 * 64], &[4, 64]).unwrap(),
                 ManagedTensor::from_host(vec![127; 4 * 2], &[4, 2]).unwrap())
        .build()
        .unwrap();
    assert_eq!(tensor.shape(), &[4, 64]);
    assert_eq!(common::dequantize_host(&tensor, Direction::Rowwise).unwrap().len(), 256);
}
