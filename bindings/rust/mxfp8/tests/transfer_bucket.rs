//! Batched export and buckets on the host path, against references built here: tensors made from known
//! compact scales (stored padded, swizzled by the layout formula, or columnwise), bucket offsets from the
//! transfer's documented rule (each part aligned, values then scales, in tensor order).
mod common;
use common::*;

use mxfp8::{
    export_scales_batched, BufMut, Direction, ExportOptions, ManagedTensor, Manifest, ScaleLayout, Status, Stream, Tensor,
    TensorBuilder, Transfer,
};

/// A tensor of shape (m, k) with random values and compact scales, stored as `how` says; returns the
/// tensor, its values and its compact scales of `direction`.
struct Made {
    tensor: Tensor,
    values: Vec<u8>,
    scales: Vec<u8>,
}

fn make(m: usize, k: usize, seed: u64, swizzled: bool, direction: Direction) -> Made {
    let values = random_bytes(m * k, seed, 0, 255);
    let shape = [m as i64, k as i64];
    match direction {
        Direction::Rowwise => {
            let c = k.div_ceil(32);
            let scales = random_bytes(m * c, seed + 1, 1, 254);
            let (rp, cp) = (m.div_ceil(128) * 128, c.div_ceil(4) * 4);
            let stored = if swizzled { swizzle_reference(&scales, m, c, POISON) } else { pad_reference(&scales, m, c, rp, cp, POISON) };
            let tensor = TensorBuilder::new()
                .scale_layout(if swizzled { ScaleLayout::GemmSwizzled } else { ScaleLayout::RowMajor })
                .rowwise(
                    ManagedTensor::from_host(values.clone(), &shape).unwrap(),
                    ManagedTensor::from_host(stored, &[rp as i64, cp as i64]).unwrap(),
                )
                .build()
                .unwrap();
            Made { tensor, values, scales }
        }
        Direction::Columnwise => {
            let r = m.div_ceil(32);
            let scales = random_bytes(r * k, seed + 1, 1, 254);
            let (rp, cp) = (r.div_ceil(4) * 4, k.div_ceil(128) * 128);
            let stored = pad_reference(&scales, r, k, rp, cp, POISON);
            let tensor = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
                .columnwise(
                    ManagedTensor::from_host(values.clone(), &shape).unwrap(),
                    ManagedTensor::from_host(stored, &[rp as i64, cp as i64]).unwrap(),
                )
                .build()
                .unwrap();
            Made { tensor, values, scales }
        }
    }
}

#[test]
fn batched_export_writes_every_tensors_compact_scales() {
    let made = [make(100, 48, 1, true, Direction::Rowwise), make(7, 300, 2, false, Direction::Rowwise), make(257, 33, 3, true, Direction::Rowwise)];
    let tensors: Vec<&Tensor> = made.iter().map(|m| &m.tensor).collect();
    let mut buffers: Vec<Vec<u8>> = made.iter().map(|m| vec![POISON; m.scales.len()]).collect();
    let slices: Vec<BufMut> = buffers.iter_mut().map(BufMut::from).collect();
    export_scales_batched(&tensors, slices, &ExportOptions::default()).unwrap();
    for (b, m) in buffers.iter().zip(&made) {
        assert_eq!(b, &m.scales);
    }

    let col = [make(70, 40, 4, false, Direction::Columnwise), make(33, 129, 5, false, Direction::Columnwise)];
    let tensors: Vec<&Tensor> = col.iter().map(|m| &m.tensor).collect();
    let mut buffers: Vec<Vec<u8>> = col.iter().map(|m| vec![POISON; m.scales.len()]).collect();
    let slices: Vec<BufMut> = buffers.iter_mut().map(BufMut::from).collect();
    export_scales_batched(&tensors, slices, &ExportOptions::new().direction(Direction::Columnwise)).unwrap();
    assert_eq!(buffers[0], col[0].scales);
    assert_eq!(buffers[1], col[1].scales);
    assert_eq!(col[1].tensor.scales_shape(Direction::Columnwise), vec![2, 129]);
}

#[test]
fn batched_export_rejects_bad_entries_before_writing_anything() {
    let made = [make(100, 48, 1, true, Direction::Rowwise), make(20, 64, 2, false, Direction::Rowwise)];
    let tensors: Vec<&Tensor> = made.iter().map(|m| &m.tensor).collect();
    let (mut first, mut second) = (vec![POISON; 200], vec![POISON; 39]);
    let err = export_scales_batched(&tensors, vec![BufMut::from(&mut first), BufMut::from(&mut second)], &ExportOptions::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("destinations[1]: holds 39 elements"), "{err}");
    assert!(first.iter().chain(&second).all(|&b| b == POISON));

    let mut second = [POISON; 40];
    let err = export_scales_batched(&tensors, vec![BufMut::from(&mut first), BufMut::from(&mut second)], &ExportOptions::new().direction(Direction::Columnwise))
        .unwrap_err();
    assert_eq!(err.status, Status::MissingData);
    assert!(err.message.contains("no columnwise data"), "{err}");

    let err = export_scales_batched(&tensors, vec![BufMut::from(&mut first)], &ExportOptions::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("2 tensors but 1 destinations"), "{err}");
}

fn round_up(n: u64, a: u64) -> u64 {
    n.div_ceil(a) * a
}

#[test]
fn bucket_follows_its_plan_and_unpacks_into_views() {
    let made = [make(100, 48, 11, true, Direction::Rowwise), make(3, 70, 12, false, Direction::Rowwise), make(130, 256, 13, true, Direction::Rowwise)];
    let tensors: Vec<&Tensor> = made.iter().map(|m| &m.tensor).collect();
    for alignment in [1u64, 64, 256] {
        let send = Transfer::from_tensors(&tensors);
        let (parts, total) = send.bucket_parts(alignment).unwrap();
        // The plan, from its documented rule.
        let mut at = 0u64;
        for (e, m) in parts.iter().zip(&made) {
            let vo = round_up(at, alignment);
            let so = round_up(vo + m.values.len() as u64, alignment);
            assert_eq!((e.values_offset, e.values_bytes, e.scales_offset, e.scales_bytes), (vo, m.values.len() as u64, so, m.scales.len() as u64));
            assert_eq!((e.amax_offset, e.amax_bytes), (0, 0));
            at = so + m.scales.len() as u64;
        }
        assert_eq!(total, at);

        // Filled: every part in place, every byte between parts untouched.
        let manifest = send.manifest(["a", "b", "c"], &parts).unwrap();
        let mut bucket = vec![POISON; total as usize + 5];
        send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
        let mut expected = vec![POISON; bucket.len()];
        for (e, m) in parts.iter().zip(&made) {
            expected[e.values_offset as usize..][..m.values.len()].copy_from_slice(&m.values);
            expected[e.scales_offset as usize..][..m.scales.len()].copy_from_slice(&m.scales);
        }
        assert!(bucket == expected, "alignment {alignment}");

        let views = manifest.unpack(&bucket).unwrap();
        for (v, (m, name)) in views.iter().zip(made.iter().zip(["a", "b", "c"])) {
            let (values, scales) = (v.values.as_host().unwrap(), v.scales.as_host().unwrap());
            assert_eq!((v.entry.name.as_str(), values, scales, v.entry.format), (name, &m.values[..], &m.scales[..], m.tensor.format()));
            assert_eq!((&v.entry.shape[..], v.entry.direction), (m.tensor.shape(), Direction::Rowwise));
            assert_eq!(v.entry.scales_shape, m.tensor.scales_shape(Direction::Rowwise));
            assert!(v.amax.is_empty() && v.amax_values() == Some(vec![]));
            // Views, not copies: they point into the bucket.
            assert!(bucket.as_ptr_range().contains(&values.as_ptr()));
        }
    }
}

#[test]
fn bucket_errors_carry_the_librarys_message() {
    let made = [make(100, 48, 21, true, Direction::Rowwise), make(3, 70, 22, false, Direction::Rowwise)];
    let tensors: Vec<&Tensor> = made.iter().map(|m| &m.tensor).collect();
    let err = Transfer::from_tensors(&tensors).bucket_parts(3).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("alignment is 3, expected a power of two"), "{err}");
    // A layout of more than i64::MAX bytes (which no bucket, a DLTensor, can hold) was returned as a total.
    let err = Transfer::from_tensors(&tensors).bucket_parts(1 << 62).unwrap_err();
    assert!(err.status == Status::InvalidArgument && err.message.contains("are past INT64_MAX"), "{err}");

    let send = Transfer::from_tensors(&tensors);
    let (parts, total) = send.bucket_parts(256).unwrap();
    assert!(send.manifest(["only one name"], &parts).is_err());
    let mut short = vec![POISON; total as usize - 1];
    let len = short.len();
    let err = send.to_bucket(&mut short, &parts).run(Stream::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("desc.parts_out[1]") && err.message.contains(&format!("a bucket of {len} bytes")), "{err}");
    assert!(short.iter().all(|&b| b == POISON));
    // Parts of another length than the entries: refused before the library reads the array.
    let err = Transfer::from_tensors(&tensors).to_bucket(&mut short, &parts[..1]).run(Stream::default()).unwrap_err();
    assert!(err.status == Status::InvalidArgument && err.message.contains("1 bucket parts for 2 entries"), "{err}");

    let err = Transfer::from_tensors(&tensors).direction(Direction::Columnwise).bucket_parts(256).unwrap_err();
    assert_eq!(err.status, Status::MissingData);
}

#[test]
fn unpack_checks_every_entry_against_the_bucket() {
    let made = [make(100, 48, 31, false, Direction::Rowwise)];
    let send = Transfer::from_tensors(&[&made[0].tensor]);
    let (parts, total) = send.bucket_parts(256).unwrap();
    let good = send.manifest(["w"], &parts).unwrap();
    let mut bucket = vec![0u8; total as usize];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();

    let err = good.unpack(&bucket[..bucket.len() - 1]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("desc.parts_in[0]: its 200 bytes of scales at byte 4864 run past the end of a bucket of 5063 bytes"), "{err}");

    let mut bad = good.clone();
    bad.entries[0].shape = vec![100, 47];
    let err = bad.unpack(&bucket).unwrap_err();
    assert!(err.message.contains("desc.parts_in[0] gives 4800 bytes of values, its shape and row-major layout give 4700"), "{err}");

    let mut bad = good.clone();
    bad.entries[0].part.values_offset = u64::MAX - 10;
    assert_eq!(bad.unpack(&bucket).unwrap_err().status, Status::InvalidArgument);
    assert!(Manifest::default().unpack(&[0u8; 0]).unwrap().is_empty());
}

#[test]
fn handles_are_send_and_sync_where_the_header_says_so() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<mxfp8::Tensor>();
    send_sync::<mxfp8::GroupedTensor>();
    send_sync::<mxfp8::ManagedTensor>();
    send_sync::<mxfp8::DeviceBytes>();
    send_sync::<mxfp8::Stream>();
    send_sync::<mxfp8::Manifest>();
    send_sync::<mxfp8::BucketView<'static>>();
    send_sync::<mxfp8::Error>();
    send_sync::<mxfp8::Components>();
    send_sync::<mxfp8::Buf<'static>>();
    send_sync::<mxfp8::BufMut<'static>>();
    send_sync::<mxfp8::Target<'static>>();
    // Send only: two overlapping runs of one plan or transfer write the same destinations (the doc tests
    // of Plan and Transfer check the missing Sync).
    fn send<T: Send>() {}
    send::<mxfp8::Plan<'static>>();
    send::<mxfp8::Transfer<'static, 'static>>();
}

/// A bucket's parts are compact whatever destination the transfer was given: `bucket_parts` of a
/// transfer built `to_buffers` with 128x4 targets lays out the same bucket as the plain transfer (the crate
/// once passed the targets' layouts along, so its parts described a bucket no `to_bucket` could fill).
#[test]
fn bucket_parts_are_compact_whatever_the_destination() {
    let made = make(64, 64, 91, true, Direction::Rowwise);
    let (mut values, mut scales) = (vec![POISON; 64 * 64], vec![POISON; 128 * 4]);
    let to_buffers = Transfer::from_tensors(&[&made.tensor])
        .to_buffers(vec![mxfp8::Target::new(&mut values, &mut scales, mxfp8::Layout::Cutlass128x4)]);
    let (parts, total) = to_buffers.bucket_parts(256).unwrap();
    let plain = Transfer::from_tensors(&[&made.tensor]);
    assert_eq!((parts.clone(), total), plain.bucket_parts(256).unwrap());
    assert_eq!(parts[0].scales_bytes, 64 * 2);
    let manifest = plain.manifest(["w"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    plain.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    let views = manifest.unpack(&bucket).unwrap();
    assert_eq!(views[0].scales.as_host(), Some(&made.scales[..]));
}
