//! The receiver's transfer on the host path: from a bucket a transfer filled, and from TE storage directly, into
//! poisoned targets of both layouts, against references built here from the layout's formula.
mod common;
use common::*;

use mxfp8::{
    Layout, ManagedTensor, ScaleLayout, Status, Stream, Target, Tensor, TensorBuilder, Transfer,
};

/// A (m, k) rowwise tensor with swizzled (padding poisoned) or TE-padded scales; its values and compact scales.
fn make(m: usize, k: usize, seed: u64, swizzled: bool) -> (Tensor, Vec<u8>, Vec<u8>) {
    let values = random_bytes(m * k, seed, 0, 255);
    let c = k.div_ceil(32);
    let scales = random_bytes(m * c, seed + 1, 1, 254);
    let (rp, cp) = (m.div_ceil(128) * 128, c.div_ceil(4) * 4);
    let stored = if swizzled { swizzle_reference(&scales, m, c, POISON) } else { pad_reference(&scales, m, c, rp, cp, POISON) };
    let tensor = TensorBuilder::new()
        .scale_layout(if swizzled { ScaleLayout::GemmSwizzled } else { ScaleLayout::RowMajor })
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(stored, &[rp as i64, cp as i64]).unwrap(),
        )
        .build()
        .unwrap();
    (tensor, values, scales)
}

const SHAPES: [(usize, usize, bool); 3] = [(100, 48, true), (257, 33, false), (31, 1000, true)];

fn expected(scales: &[u8], m: usize, k: usize, layout: Layout) -> Vec<u8> {
    match layout {
        Layout::Compact => scales.to_vec(),
        Layout::Cutlass128x4 => swizzle_reference(scales, m, k.div_ceil(32), 0),
        // DeepGEMM's packed UE8M0 tensor, as its torch path builds it: S zero-padded to
        // (roundup(m, 4), roundup(c, 4)) bytes, each row's bytes read as little-endian int32 words, the
        // int32 matrix stored MN-major (word (r, j) at j * roundup(m, 4) + r).
        Layout::DeepgemmPacked => {
            let (c, aligned) = (k.div_ceil(32), m.div_ceil(4) * 4);
            let mut padded = vec![0u8; aligned * c.div_ceil(4) * 4];
            for r in 0..m {
                padded[r * c.div_ceil(4) * 4..][..c].copy_from_slice(&scales[r * c..][..c]);
            }
            let mut out = vec![0u8; padded.len()];
            for r in 0..aligned {
                for j in 0..c.div_ceil(4) {
                    let word = u32::from_le_bytes(padded[(r * c.div_ceil(4) + j) * 4..][..4].try_into().unwrap());
                    out[(j * aligned + r) * 4..][..4].copy_from_slice(&word.to_le_bytes());
                }
            }
            out
        }
        Layout::DeepgemmFloat32 => hopper_deepgemm_reference(scales),
        other => unreachable!("{other:?} is not an import layout"),
    }
}

#[test]
fn a_bucket_imports_into_each_tensors_own_layout() {
    let made: Vec<_> = SHAPES.iter().enumerate().map(|(i, &(m, k, s))| make(m, k, 10 + i as u64, s)).collect();
    let tensors: Vec<&Tensor> = made.iter().map(|t| &t.0).collect();
    let send = Transfer::from_tensors(&tensors);
    let (parts, total) = send.bucket_parts(64).unwrap();
    let manifest = send.manifest(["a", "b", "c"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    let layouts = [Layout::Cutlass128x4, Layout::Compact, Layout::DeepgemmFloat32];
    let mut values: Vec<Vec<u8>> = made.iter().map(|t| vec![POISON; t.1.len()]).collect();
    let mut scales: Vec<Vec<u8>> = SHAPES
        .iter()
        .zip(&made)
        .zip(layouts)
        .map(|((&(m, k, _), t), l)| vec![POISON; expected(&t.2, m, k, l).len()])
        .collect();
    let targets: Vec<Target> = values.iter_mut().zip(scales.iter_mut()).zip(layouts).map(|((v, s), layout)| Target::new(v, s, layout)).collect();
    Transfer::from_bucket(&bucket, &manifest).to_buffers(targets).run(Stream::default()).unwrap();
    for (i, (&(m, k, _), t)) in SHAPES.iter().zip(&made).enumerate() {
        assert_eq!(values[i], t.1, "values of tensor {i}");
        assert_eq!(scales[i], expected(&t.2, m, k, layouts[i]), "scales of tensor {i}");
    }

    // The manifest says the scales are swizzled, the bucket holds compact ones: refused, nothing written.
    let mut v = vec![POISON; made[0].1.len()];
    let mut s = vec![POISON; made[0].2.len()];
    let first = mxfp8::Manifest { entries: manifest.entries[..1].to_vec() };
    let err = Transfer::from_bucket(&bucket, &first)
        .source_layout(Layout::Cutlass128x4)
        .to_buffers(vec![Target::new(&mut v, &mut s, Layout::Compact)])
        .run(Stream::default())
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("desc.parts_in[0] gives 200 bytes of scales"), "{}", err.message);
    assert!(v.iter().chain(&s).all(|&b| b == POISON));
}

#[test]
fn te_storage_imports_directly() {
    for layout in [Layout::Compact, Layout::Cutlass128x4, Layout::DeepgemmPacked, Layout::DeepgemmFloat32] {
        let made: Vec<_> = SHAPES.iter().enumerate().map(|(i, &(m, k, s))| make(m, k, 20 + i as u64, s)).collect();
        let tensors: Vec<&Tensor> = made.iter().map(|t| &t.0).collect();
        let mut values: Vec<Vec<u8>> = made.iter().map(|t| vec![POISON; t.1.len()]).collect();
        let mut scales: Vec<Vec<u8>> =
            SHAPES.iter().zip(&made).map(|(&(m, k, _), t)| vec![POISON; expected(&t.2, m, k, layout).len()]).collect();
        let targets: Vec<Target> = values.iter_mut().zip(scales.iter_mut()).map(|(v, s)| Target::new(v, s, layout)).collect();
        Transfer::from_tensors(&tensors).to_buffers(targets).run(Stream::default()).unwrap();
        for (i, (&(m, k, _), t)) in SHAPES.iter().zip(&made).enumerate() {
            assert_eq!(values[i], t.1, "values of tensor {i}");
            assert_eq!(scales[i], expected(&t.2, m, k, layout), "{layout:?} scales of tensor {i}");
        }
    }
}

/// A global scale given at an MXFP8 entry is refused before anything is written: nothing would write it
/// (the library wrote nothing into it and returned Ok, so the caller's float kept its old value).
#[test]
fn a_global_scale_at_an_mxfp8_target_is_refused() {
    let (tensor, _, _) = make(64, 64, 93, false);
    let (mut values, mut scales, mut global) = (vec![POISON; 64 * 64], vec![POISON; 64 * 2], vec![7f32; 1]);
    let err = Transfer::from_tensors(&[&tensor])
        .to_buffers(vec![Target::new(&mut values, &mut scales, Layout::Compact).global_scale(&mut global)])
        .run(Stream::default())
        .unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("targets[0] has a global_scale, but entry 0 is E4M3"), "{err}");
    assert!(values.iter().chain(&scales).all(|&b| b == POISON) && global == [7.0], "the refused transfer wrote");
}
