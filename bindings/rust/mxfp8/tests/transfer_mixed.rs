//! Transfers that mix MXFP8 and NVFP4 tensors, on the host path: bucket parts, fill (and its prepared
//! form), the direct transfer into buffers (and its prepared form) into poisoned targets, against references written here
//! from the header's rules: the stored scales are built from compact ones with the 128x4 formula (padding
//! poisoned), so the compact scales and the 128x4 targets the library must produce are known without it;
//! the global scales are the header's float formulas of the amax. Shapes have partial blocks (K not a
//! multiple of 32 or 16) and rows that are not a multiple of 128.
mod common;
use common::*;

use mxfp8::{
    BucketPart, Direction, ExportOptions, Format, GlobalScale, Layout, ManagedTensor, Manifest, ScaleLayout, Status, Stream, Target, Tensor,
    TensorBuilder, Transfer,
};

const ALIGNMENT: u64 = 64;

/// An MXFP8 (m, k) rowwise tensor with swizzled scales (padding poisoned); its values and compact scales.
struct Mxfp8 {
    tensor: Tensor,
    values: Vec<u8>,
    scales: Vec<u8>,
    rows: usize,
    k: usize,
}

fn mxfp8(m: usize, k: usize, seed: u64) -> Mxfp8 {
    let c = k.div_ceil(32);
    let values = random_bytes(m * k, seed, 0, 255);
    let scales = random_bytes(m * c, seed + 1, 1, 254);
    let stored = swizzle_reference(&scales, m, c, POISON);
    let tensor = TensorBuilder::new()
        .scale_layout(ScaleLayout::GemmSwizzled)
        .rowwise(
            ManagedTensor::from_host(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(stored, &[round_up(m, 128) as i64, round_up(c, 4) as i64]).unwrap(),
        )
        .build()
        .unwrap();
    Mxfp8 { tensor, values, scales, rows: m, k }
}

/// An NVFP4 rowwise tensor of logical shape `shape` (rows = prod(lead), K even) with scales stored
/// swizzled or TE-padded (padding poisoned), one amax or one per row; its packed values, compact E4M3
/// scales and amaxes.
struct Nvfp4 {
    tensor: Tensor,
    values: Vec<u8>,
    scales: Vec<u8>,
    amax: Vec<f32>,
    rows: usize,
    k: usize,
    e4m3_max: i32,
}

fn nvfp4(shape: &[usize], seed: u64, swizzled: bool, per_row: bool, e4m3_max: i32) -> Nvfp4 {
    let (k, rows) = (shape[shape.len() - 1], shape[..shape.len() - 1].iter().product::<usize>());
    let c = k.div_ceil(16);
    let values = random_bytes(rows * k / 2, seed, 0, 255);
    // Finite positive E4M3 scales (0x01..0x7E), zero included once.
    let mut scales = random_bytes(rows * c, seed + 1, 0x01, 0x7E);
    scales[3] = 0;
    let amax: Vec<f32> = (0..if per_row { rows } else { 1 }).map(|i| 0.75 + 1.37 * i as f32 + seed as f32).collect();
    let (rp, cp) = (round_up(rows, 128), round_up(c, 4));
    let stored = if swizzled { swizzle_reference(&scales, rows, c, POISON) } else { pad_reference(&scales, rows, c, rp, cp, POISON) };
    let mut data_shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    *data_shape.last_mut().unwrap() /= 2;
    let tensor = TensorBuilder::new().format(Format::Nvfp4)
        .scale_layout(if swizzled { ScaleLayout::GemmSwizzled } else { ScaleLayout::RowMajor })
        .e4m3_max(e4m3_max)
        .rowwise(ManagedTensor::from_host(values.clone(), &data_shape).unwrap(), ManagedTensor::from_host(stored, &[rp as i64, cp as i64]).unwrap()).amax(Direction::Rowwise, ManagedTensor::from_host(amax.clone(), &[amax.len() as i64]).unwrap())
        .build()
        .unwrap();
    Nvfp4 { tensor, values, scales, amax, rows, k, e4m3_max }
}

/// The inputs of every test: MXFP8 (133, 72) (3 scale columns, the last block 8 wide); NVFP4 (2, 70, 40)
/// swizzled with one amax (140 rows, blocks 16, 16, 8); NVFP4 (45, 34) TE-padded with one amax per row
/// and E4M3_MAX 256 (blocks 16, 16, 2).
fn inputs() -> (Mxfp8, Nvfp4, Nvfp4) {
    (mxfp8(133, 72, 7), nvfp4(&[2, 70, 40], 3, true, false, 448), nvfp4(&[45, 34], 5, false, true, 256))
}

fn mixed<'t>(a: &'t Mxfp8, b: &'t Nvfp4, c: &'t Nvfp4) -> Vec<&'t Tensor> {
    vec![&a.tensor, &b.tensor, &c.tensor]
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The header's decode global scale: the float32 division amax / (6 * E4M3_MAX).
fn decode_global(amax: f32, e4m3_max: i32) -> f32 {
    amax / (6.0 * e4m3_max as f32)
}

/// Transformer Engine's encode scale, per the header: (6 * E4M3_MAX) / amax capped at FLT_MAX, 1 for a
/// zero amax or a zero quotient.
fn encode_global(amax: f32, e4m3_max: i32) -> f32 {
    let s = (6.0 * e4m3_max as f32) / amax;
    let s = if s.is_nan() { f32::MAX } else { s.min(f32::MAX) };
    if amax == 0.0 || s == 0.0 {
        1.0
    } else {
        s
    }
}

/// Checks the parts' layout against the header and returns the bucket the transfer must fill, as the
/// expected (offset, bytes) parts.
fn expected_parts(e: &[BucketPart], total: u64, a: &Mxfp8, b: &Nvfp4, c: &Nvfp4) -> Vec<(u64, Vec<u8>)> {
    assert_eq!(e.len(), 3);
    let mut parts = vec![(e[0].values_offset, a.values.clone()), (e[0].scales_offset, a.scales.clone())];
    assert_eq!((e[0].amax_offset, e[0].amax_bytes), (0, 0), "an MXFP8 entry has no amax part");
    for (i, t) in [(1, b), (2, c)] {
        assert_eq!(e[i].values_bytes as usize, t.rows * t.k / 2);
        assert_eq!(e[i].scales_bytes as usize, t.rows * t.k.div_ceil(16));
        assert_eq!(e[i].amax_bytes as usize, 4 * t.amax.len());
        parts.push((e[i].values_offset, t.values.clone()));
        parts.push((e[i].scales_offset, t.scales.clone()));
        parts.push((e[i].amax_offset, f32_bytes(&t.amax)));
    }
    assert_eq!((e[0].values_bytes as usize, e[0].scales_bytes as usize), (a.rows * a.k, a.rows * a.k.div_ceil(32)));
    // In bucket order, each at a multiple of the alignment, none overlapping, all inside.
    let mut end = 0u64;
    for (offset, bytes) in &parts {
        assert_eq!(offset % ALIGNMENT, 0, "part at {offset}");
        assert!(*offset >= end, "part at {offset} overlaps the one before (ending at {end})");
        end = offset + bytes.len() as u64;
    }
    assert!(end <= total);
    parts
}

/// The whole bucket: each part's bytes in place, POISON between parts (the fill leaves them).
fn expected_bucket(parts: &[(u64, Vec<u8>)], total: u64) -> Vec<u8> {
    let mut bucket = vec![POISON; total as usize];
    for (offset, bytes) in parts {
        bucket[*offset as usize..][..bytes.len()].copy_from_slice(bytes);
    }
    bucket
}

#[test]
fn a_mixed_bucket_carries_values_compact_scales_and_amax() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let send = Transfer::from_tensors(&tensors);
    let (parts, total) = send.bucket_parts(ALIGNMENT).unwrap();
    let expected = expected_bucket(&expected_parts(&parts, total, &a, &b, &c), total);
    // A bucket longer than needed: the tail is left as it was too.
    let mut bucket = vec![POISON; total as usize + 17];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    assert_eq!(&bucket[..expected.len()], &expected[..]);
    assert!(bucket[expected.len()..].iter().all(|&x| x == POISON));

    // The prepared fill writes the same bytes, at every run.
    let mut again = vec![POISON; bucket.len()];
    {
        let prepared = Transfer::from_tensors(&tensors).to_bucket(&mut again, &parts).prepare().unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    }
    assert_eq!(again, bucket);

    // The MXFP8 entry alone is laid out as in a bucket of MXFP8 tensors only.
    let (alone, alone_total) = Transfer::from_tensors(&tensors[..1]).bucket_parts(ALIGNMENT).unwrap();
    let (classic, classic_total) = Transfer::from_tensors(&[&a.tensor]).bucket_parts(ALIGNMENT).unwrap();
    assert_eq!((alone, alone_total), (classic, classic_total));
}

#[test]
fn the_prepared_fill_outlives_its_tensors() {
    let (a, b, c) = inputs();
    let (parts, total) = Transfer::from_tensors(&mixed(&a, &b, &c)).bucket_parts(ALIGNMENT).unwrap();
    let expected = expected_bucket(&expected_parts(&parts, total, &a, &b, &c), total);
    let mut bucket = vec![POISON; total as usize];
    let prepared = Transfer::from_tensors(&mixed(&a, &b, &c)).to_bucket(&mut bucket, &parts).prepare().unwrap();
    drop((a, b, c)); // the plan holds its own references on the tensors
    prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    drop(prepared);
    assert_eq!(bucket, expected);
}

/// Poisoned targets for the three inputs: MXFP8 compact; NVFP4 (2, 70, 40) into 128x4 scales; NVFP4
/// (45, 34) compact. Buffers: (values, scales, global scale) per entry.
struct Targets {
    values: Vec<Vec<u8>>,
    scales: Vec<Vec<u8>>,
    globals: Vec<Vec<f32>>,
}

const POISON_F32: f32 = -123.25;

impl Targets {
    fn new(a: &Mxfp8, b: &Nvfp4, c: &Nvfp4) -> Self {
        let swizzled_b = round_up(b.rows, 128) * round_up(b.k.div_ceil(16), 4);
        Targets {
            values: vec![vec![POISON; a.values.len()], vec![POISON; b.values.len()], vec![POISON; c.values.len()]],
            scales: vec![vec![POISON; a.scales.len()], vec![POISON; swizzled_b], vec![POISON; c.scales.len()]],
            globals: vec![Vec::new(), vec![POISON_F32; b.amax.len()], vec![POISON_F32; c.amax.len()]],
        }
    }

    fn borrow(&mut self) -> Vec<Target<'_>> {
        let mut out = Vec::new();
        let layouts = [Layout::Compact, Layout::Cutlass128x4, Layout::Compact];
        for (i, ((v, s), g)) in self.values.iter_mut().zip(self.scales.iter_mut()).zip(self.globals.iter_mut()).enumerate() {
            let target = Target::new(v, s, layouts[i]);
            out.push(if i == 0 { target } else { target.global_scale(g) });
        }
        out
    }

    fn untouched(&self) -> bool {
        self.values.iter().chain(&self.scales).all(|b| b.iter().all(|&x| x == POISON))
            && self.globals.iter().all(|g| g.iter().all(|&x| x.to_bits() == POISON_F32.to_bits()))
    }

    fn check(&self, a: &Mxfp8, b: &Nvfp4, c: &Nvfp4, global: fn(f32, i32) -> f32) {
        assert_eq!(self.values[0], a.values);
        assert_eq!(self.scales[0], a.scales);
        assert_eq!(self.values[1], b.values);
        // The 128x4 target: the formula's layout of the compact scales, padding zero.
        assert_eq!(self.scales[1], swizzle_reference(&b.scales, b.rows, b.k.div_ceil(16), 0));
        assert_eq!(self.values[2], c.values);
        assert_eq!(self.scales[2], c.scales);
        for (g, t) in [(&self.globals[1], b), (&self.globals[2], c)] {
            let want: Vec<u32> = t.amax.iter().map(|&x| global(x, t.e4m3_max).to_bits()).collect();
            assert_eq!(g.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want);
        }
    }
}

fn run(tensors: &[&Tensor], convention: GlobalScale, targets: Vec<Target<'_>>) -> Result<(), mxfp8::Error> {
    Transfer::from_tensors(tensors).global_scale(convention).to_buffers(targets).run(Stream::default())
}

#[test]
fn a_mixed_import_writes_engine_targets_in_both_global_scale_conventions() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    for (convention, global) in [(GlobalScale::Decode, decode_global as fn(f32, i32) -> f32), (GlobalScale::Encode, encode_global)] {
        let mut immediate = Targets::new(&a, &b, &c);
        run(&tensors, convention, immediate.borrow()).unwrap();
        immediate.check(&a, &b, &c, global);

        // The prepared form writes the same bytes, at every run, into targets it keeps borrowed.
        let mut prepared_targets = Targets::new(&a, &b, &c);
        {
            let prepared = Transfer::from_tensors(&tensors).global_scale(convention).to_buffers(prepared_targets.borrow()).prepare().unwrap();
            prepared.run(Stream::LEGACY_DEFAULT).unwrap();
            prepared.run(Stream::LEGACY_DEFAULT).unwrap();
        }
        assert_eq!(prepared_targets.values, immediate.values);
        assert_eq!(prepared_targets.scales, immediate.scales);
        assert_eq!(prepared_targets.globals.concat().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                   immediate.globals.concat().iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }
    // The global scales agree with the NVFP4 export's own (Tensor::global_scale).
    let mut t = Targets::new(&a, &b, &c);
    run(&tensors, GlobalScale::Encode, t.borrow()).unwrap();
    let exported = c.tensor.global_scale(&ExportOptions::new().global_scale(GlobalScale::Encode)).unwrap();
    assert_eq!(f32_bytes(&exported.to_host::<f32>().unwrap()), f32_bytes(&t.globals[2]));
    // An MXFP8 tensor has no second level: the library says so.
    let err = a.tensor.global_scale(&ExportOptions::new()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
}

#[test]
fn bad_buckets_fail_and_write_nothing() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let (parts, total) = Transfer::from_tensors(&tensors).bucket_parts(ALIGNMENT).unwrap();
    // One byte short (the last part is an amax, so it would be written past the end).
    let mut short = vec![POISON; total as usize - 1];
    let err = Transfer::from_tensors(&tensors).to_bucket(&mut short, &parts).run(Stream::default()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("bucket"), "{err}");
    assert!(short.iter().all(|&x| x == POISON));
    let err = Transfer::from_tensors(&tensors).to_bucket(&mut short, &parts).prepare().expect_err("an undersized bucket is refused when prepared");
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(short.iter().all(|&x| x == POISON));

    // An alignment that is not a power of two; a transfer of nothing is empty.
    let err = Transfer::from_tensors(&tensors).bucket_parts(48).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("alignment"), "{err}");
    let (none, empty) = Transfer::from_tensors(&[]).bucket_parts(ALIGNMENT).unwrap();
    assert_eq!((none.len(), empty), (0, 0));
    Transfer::from_tensors(&[]).to_bucket(&mut [0u8; 0], &[]).run(Stream::default()).unwrap();

    // A columnwise bucket of tensors stored rowwise only: no data for the direction.
    let err = Transfer::from_tensors(&tensors).direction(Direction::Columnwise).bucket_parts(ALIGNMENT).unwrap_err();
    assert_eq!(err.status, Status::MissingData, "{err}");
}

#[test]
fn bad_imports_fail_and_write_nothing() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);

    // NVFP4 values one byte short (a target that does not match the tensor's shape).
    let mut t = Targets::new(&a, &b, &c);
    t.values[2].pop();
    let err = run(&tensors, GlobalScale::Decode, t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched(), "a failed import wrote to a target");
    let err = Transfer::from_tensors(&tensors).to_buffers(t.borrow()).prepare().expect_err("refused when prepared");
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // One global scale for a per-row amax of 45.
    let mut t = Targets::new(&a, &b, &c);
    t.globals[2].truncate(1);
    let err = run(&tensors, GlobalScale::Decode, t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());
    // No global scale at all for the NVFP4 entries.
    let mut t = Targets::new(&a, &b, &c);
    let bare: Vec<Target> = t.borrow().into_iter().map(|x| Target { global_scale: None, ..x }).collect();
    let err = run(&tensors, GlobalScale::Decode, bare).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // 128x4 NVFP4 scales one tile row short; a layout NVFP4 does not have.
    let mut t = Targets::new(&a, &b, &c);
    let len = t.scales[1].len();
    t.scales[1].truncate(len - 4);
    let err = run(&tensors, GlobalScale::Decode, t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());
    let mut t = Targets::new(&a, &b, &c);
    let mut borrowed = t.borrow();
    borrowed[2].layout = Layout::DeepgemmPacked;
    let err = run(&tensors, GlobalScale::Decode, borrowed).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // A target of the other entry (an NVFP4 entry's buffers for an MXFP8 tensor): its sizes are refused;
    // and counts that differ.
    let mut t = Targets::new(&a, &b, &c);
    let swapped = [tensors[0], tensors[2], tensors[1]];
    let mut borrowed = t.borrow();
    borrowed.swap(0, 1);
    let err = run(&swapped, GlobalScale::Decode, borrowed).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("[0]"), "{err}");
    let err = run(&tensors[..2], GlobalScale::Decode, t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("3 targets for 2 entries"), "{err}");
    let mut borrowed = t.borrow();
    borrowed.swap(0, 1);
    let err = Transfer::from_tensors(&swapped).to_buffers(borrowed).prepare().expect_err("refused when prepared");
    assert!(err.message.contains("[0]"), "{err}");
    assert!(t.untouched());
}

/// What the sender transmits for `tensors` (named a, b, c): a filled bucket and its manifest.
fn sent(tensors: &[&Tensor]) -> (Vec<u8>, Manifest) {
    let send = Transfer::from_tensors(tensors);
    let (parts, total) = send.bucket_parts(ALIGNMENT).unwrap();
    let manifest = send.manifest(["a", "b", "c"], &parts).unwrap();
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    (bucket, manifest)
}

fn receive(bucket: &[u8], manifest: &Manifest, convention: GlobalScale, targets: Vec<Target<'_>>) -> Result<(), mxfp8::Error> {
    Transfer::from_bucket(bucket, manifest).global_scale(convention).to_buffers(targets).run(Stream::default())
}

#[test]
fn a_mixed_bucket_unpacks_and_imports_on_the_receiving_side() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let send = Transfer::from_tensors(&tensors);
    let (parts, _) = send.bucket_parts(ALIGNMENT).unwrap();
    let (bucket, manifest) = sent(&tensors);
    assert!(send.manifest(["a"], &parts).is_err());

    // The manifest: shapes and the compact scales' shapes from the format rules.
    let e = &manifest.entries[0];
    assert_eq!((e.name.as_str(), &e.shape[..], &e.scales_shape[..], e.format), ("a", &[133, 72][..], &[133, 3][..], Format::E4M3));
    for (i, t, shape) in [(1, &b, vec![2, 70, 40]), (2, &c, vec![45, 34])] {
        let e = &manifest.entries[i];
        assert_eq!((e.format, &e.shape), (Format::Nvfp4, &shape));
        // (*lead, ceil(K/16)), as the export and a Python sender's manifest give them.
        let lead = &shape[..shape.len() - 1];
        assert_eq!((&e.scales_shape[..lead.len()], e.scales_shape[lead.len()..].to_vec()), (lead, vec![t.k.div_ceil(16) as i64]));
        assert_eq!(lead.iter().product::<i64>(), t.rows as i64);
        assert_eq!((e.part, e.part.amax_bytes, e.e4m3_max), (parts[i], 4 * t.amax.len() as u64, t.e4m3_max));
    }

    // Unpack: views of the packed values, compact scales and amax.
    let views = manifest.unpack(&bucket).unwrap();
    let v = &views[0];
    assert_eq!((v.entry.name.as_str(), v.values.as_host().unwrap(), v.scales.as_host().unwrap()), ("a", &a.values[..], &a.scales[..]));
    for (i, t) in [(1, &b), (2, &c)] {
        let v = &views[i];
        assert_eq!((v.values.as_host().unwrap(), v.scales.as_host().unwrap(), v.entry.e4m3_max), (&t.values[..], &t.scales[..], t.e4m3_max));
        let amax = v.amax_values().unwrap();
        assert_eq!(amax.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), t.amax.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }

    // Import into engine targets, both conventions; the prepared form writes the same.
    for (convention, global) in [(GlobalScale::Decode, decode_global as fn(f32, i32) -> f32), (GlobalScale::Encode, encode_global)] {
        let mut immediate = Targets::new(&a, &b, &c);
        receive(&bucket, &manifest, convention, immediate.borrow()).unwrap();
        immediate.check(&a, &b, &c, global);
        let mut prepared = Targets::new(&a, &b, &c);
        {
            let plan = Transfer::from_bucket(&bucket, &manifest).global_scale(convention).to_buffers(prepared.borrow()).prepare().unwrap();
            plan.run(Stream::LEGACY_DEFAULT).unwrap();
        }
        prepared.check(&a, &b, &c, global);
    }
}

#[test]
fn bad_manifests_fail_and_write_nothing() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let (bucket, manifest) = sent(&tensors);

    // A bucket one byte short of its last part (the amax of entry 2).
    let short = &bucket[..bucket.len() - 1];
    let err = manifest.unpack(short).unwrap_err();
    assert!(err.message.contains("desc.parts_in[2]: its 180 bytes of amax at byte 14336 run past the end of a bucket of 14515 bytes"), "{err}");
    let mut t = Targets::new(&a, &b, &c);
    let err = receive(short, &manifest, GlobalScale::Decode, t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // An NVFP4 entry described as MXFP8 (same parts, shape and an MXFP8 target): its sizes do not match.
    let mut lying = manifest.clone();
    let e = &mut lying.entries[2];
    (e.format, e.e4m3_max, e.scales_shape) = (Format::E4M3, 0, vec![45, 2]);
    e.part.amax_offset = 0;
    e.part.amax_bytes = 0;
    let err = lying.unpack(&bucket).unwrap_err();
    assert!(err.message.contains("desc.parts_in[2] gives 765 bytes of values, its shape and row-major layout give 1530"), "{err}");
    let mut t = Targets::new(&a, &b, &c);
    let (mut v, mut s) = (vec![POISON; 45 * 34], vec![POISON; 45 * 2]);
    {
        let mut borrowed = t.borrow();
        borrowed[2] = Target::new(&mut v, &mut s, Layout::Compact);
        let err = receive(&bucket, &lying, GlobalScale::Decode, borrowed).unwrap_err();
        assert_eq!(err.status, Status::InvalidArgument, "{err}");
    }
    assert!(t.untouched() && v.iter().chain(&s).all(|&x| x == POISON));

    // Another entry's target is refused; a count that differs is refused.
    let mut t = Targets::new(&a, &b, &c);
    let mut borrowed = t.borrow();
    borrowed.swap(0, 1);
    let err = receive(&bucket, &manifest, GlobalScale::Decode, borrowed).unwrap_err();
    assert!(err.status == Status::InvalidArgument && err.message.contains("[0]"), "{err}");
    let two = Manifest { entries: manifest.entries[..2].to_vec() };
    let err = receive(&bucket, &two, GlobalScale::Decode, t.borrow()).unwrap_err();
    assert!(err.message.contains("3 targets for 2 entries"), "{err}");
    assert!(t.untouched());
}

#[test]
fn a_columnwise_mixed_bucket_carries_the_stored_transposes() {
    // MXFP8 (70, 150) columnwise: scales (ceil(70/32), 150) = (3, 150), TE-padded to (4, 256). NVFP4
    // logical (50, 140) columnwise: the stored (140, 50) transpose as (140, 25) bytes, scales
    // (140, ceil(50/16)) = (140, 4) (the last block 2 wide), TE-padded to (256, 4); both paddings poisoned.
    let (m, k) = (70usize, 150usize);
    let mv = random_bytes(m * k, 81, 0, 255);
    let ms = random_bytes(3 * k, 82, 1, 254);
    let a = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .columnwise(
            ManagedTensor::from_host(mv.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host(pad_reference(&ms, 3, k, 4, 256, POISON), &[4, 256]).unwrap(),
        )
        .build()
        .unwrap();
    let (r, c) = (140usize, 50usize);
    let nv = random_bytes(r * c / 2, 83, 0, 255);
    let ns = random_bytes(r * 4, 84, 0x01, 0x7E);
    let b = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .format(Format::Nvfp4)
        .columnwise(
            ManagedTensor::from_host(nv.clone(), &[r as i64, (c / 2) as i64]).unwrap(),
            ManagedTensor::from_host(pad_reference(&ns, r, 4, 256, 4, POISON), &[256, 4]).unwrap(),
        )
        .amax(Direction::Columnwise, ManagedTensor::from_host(vec![9.25], &[1]).unwrap())
        .build()
        .unwrap();
    let tensors = [&a, &b];
    let send = Transfer::from_tensors(&tensors).direction(Direction::Columnwise);
    let (parts, total) = send.bucket_parts(ALIGNMENT).unwrap();
    let manifest = send.manifest(["a", "b"], &parts).unwrap();
    assert!(manifest.entries.iter().all(|e| e.direction == Direction::Columnwise));
    let mut bucket = vec![POISON; total as usize];
    send.to_bucket(&mut bucket, &parts).run(Stream::default()).unwrap();
    let views = manifest.unpack(&bucket).unwrap();
    let v = &views[0];
    assert_eq!((v.values.as_host().unwrap(), v.scales.as_host().unwrap(), &v.entry.scales_shape[..]), (&mv[..], &ms[..], &[3, 150][..]));
    let v = &views[1];
    assert_eq!((&v.entry.shape[..], v.values.as_host().unwrap(), v.scales.as_host().unwrap(), &v.entry.scales_shape[..]), (&[50, 140][..], &nv[..], &ns[..], &[140, 4][..]));
    assert_eq!(v.amax_values(), Some(vec![9.25]));

    // The receiver: the bucket and the direct path write the same compact targets.
    let expected = (mv.clone(), ms.clone(), nv.clone(), ns.clone(), (9.25f32 / 2688.0).to_bits());
    for from_bucket in [true, false] {
        let (mut v0, mut s0, mut v1, mut s1, mut g) = (vec![POISON; mv.len()], vec![POISON; ms.len()], vec![POISON; nv.len()], vec![POISON; ns.len()], [0f32]);
        let targets = vec![Target::new(&mut v0, &mut s0, Layout::Compact), Target::new(&mut v1, &mut s1, Layout::Compact).global_scale(&mut g)];
        if from_bucket {
            receive(&bucket, &manifest, GlobalScale::Decode, targets).unwrap();
        } else {
            Transfer::from_tensors(&tensors).direction(Direction::Columnwise).to_buffers(targets).run(Stream::default()).unwrap();
        }
        assert!((v0, s0, v1, s1, g[0].to_bits()) == expected, "from the bucket: {from_bucket}");
    }
}
