//! Plans (Transfer::prepare) on host memory: the compact scales (checked against the layout's formula) at every
//! run, from a plan that outlives the tensor handles it was made from; and the immediate call's refusals.
mod common;

use common::{random_bytes, swizzled_index};
use mxfp8::{Layout, ManagedTensor, ScaleLayout, Status, Stream, Target, TensorBuilder, Transfer};

fn scales(n: usize, seed: u64) -> Vec<u8> {
    random_bytes(n, seed, 1, 254)
}

#[test]
fn prepared_batched_export_writes_the_compact_scales_at_every_run() {
    let shapes = [(100usize, 48usize), (257, 200), (31, 1000)];
    let mut expected = Vec::new();
    let mut tensors = Vec::new();
    for (i, &(rows, k)) in shapes.iter().enumerate() {
        let c = k.div_ceil(32);
        let (rp, cp) = (rows.div_ceil(128) * 128, c.div_ceil(4) * 4);
        let s = scales(rows * c, 10 + i as u64);
        let mut swz = vec![0xFFu8; rp * cp];
        for r in 0..rows {
            for j in 0..c {
                swz[swizzled_index(r, j, cp)] = s[r * c + j];
            }
        }
        tensors.push(
            TensorBuilder::new()
                .scale_layout(ScaleLayout::GemmSwizzled)
                .rowwise(
                    ManagedTensor::from_host(vec![0x38; rows * k], &[rows as i64, k as i64]).unwrap(),
                    ManagedTensor::from_host(swz, &[(rp * cp) as i64]).unwrap(),
                )
                .build()
                .unwrap(),
        );
        expected.push(s);
    }
    let refs: Vec<_> = tensors.iter().collect();
    let mut outs: Vec<Vec<u8>> = expected.iter().map(|s| vec![0xEE; s.len()]).collect();
    {
        let targets: Vec<Target> = outs.iter_mut().map(|v| Target::scales(v, Layout::Compact)).collect();
        let plan = Transfer::from_tensors(&refs).to_buffers(targets).prepare().unwrap();
        drop(refs);
        drop(tensors); // the plan holds its own references
        for _ in 0..2 {
            plan.run(Stream::LEGACY_DEFAULT).unwrap();
        }
    }
    assert_eq!(outs, expected);
}

#[test]
fn preparing_refuses_what_the_immediate_call_refuses() {
    let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(
            ManagedTensor::from_host(vec![0; 100 * 48], &[100, 48]).unwrap(),
            ManagedTensor::from_host(scales(200, 3), &[100, 2]).unwrap(),
        )
        .build()
        .unwrap();
    let mut wrong = vec![0u8; 199];
    let err = Transfer::from_tensors(&[&tensor]).to_buffers(vec![Target::scales(&mut wrong, Layout::Compact)]).prepare().err().unwrap();
    assert_eq!(err.status, Status::InvalidArgument);
    // The prepared form is a transfer with scales-only destinations: its message names the desc's field.
    assert!(err.message.contains("desc.scales[0]") && err.message.contains("are 200 bytes, got 199"), "{}", err.message);
}
