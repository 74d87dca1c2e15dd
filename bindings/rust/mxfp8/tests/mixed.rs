//! Buckets and imports that mix MXFP8 and NVFP4 tensors, on the host path: plan, fill (and its prepared
//! form), the direct import (and its prepared form) into poisoned targets, against references written here
//! from the header's rules: the stored scales are built from compact ones with the 128x4 formula (padding
//! poisoned), so the compact scales and the 128x4 targets the library must produce are known without it;
//! the global scales are the header's float formulas of the amax. Shapes have partial blocks (K not a
//! multiple of 32 or 16) and rows that are not a multiple of 128.
mod common;
use common::*;

use mxfp8::{
    import_bucket_mixed_host, import_tensors_mixed_host, Direction, ExportOptions, Format, GlobalScale, ImportTarget, Layout, ManagedTensor,
    ManifestEntry, MixedBucketImport, MixedBucketPlan, MixedBucketView, MixedImportTarget, MixedManifest, MixedManifestEntry, MixedTensor,
    Nvfp4ImportTarget, Nvfp4Tensor, Nvfp4TensorBuilder, PreparedExport, ScaleLayout, Status, Stream, Tensor, TensorBuilder,
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
            ManagedTensor::from_host_bytes(values.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host_bytes(stored, &[round_up(m, 128) as i64, round_up(c, 4) as i64]).unwrap(),
        )
        .build()
        .unwrap();
    Mxfp8 { tensor, values, scales, rows: m, k }
}

/// An NVFP4 rowwise tensor of logical shape `shape` (rows = prod(lead), K even) with scales stored
/// swizzled or TE-padded (padding poisoned), one amax or one per row; its packed values, compact E4M3
/// scales and amaxes.
struct Nvfp4 {
    tensor: Nvfp4Tensor,
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
    let tensor = Nvfp4TensorBuilder::new()
        .scale_layout(if swizzled { ScaleLayout::GemmSwizzled } else { ScaleLayout::RowMajor })
        .e4m3_max(e4m3_max)
        .rowwise(
            ManagedTensor::from_host_bytes(values.clone(), &data_shape).unwrap(),
            ManagedTensor::from_host_bytes(stored, &[rp as i64, cp as i64]).unwrap(),
            ManagedTensor::from_host_f32(amax.clone(), &[amax.len() as i64]).unwrap(),
        )
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

fn mixed<'t>(a: &'t Mxfp8, b: &'t Nvfp4, c: &'t Nvfp4) -> Vec<MixedTensor<'t>> {
    vec![MixedTensor::Mxfp8(&a.tensor), MixedTensor::Nvfp4(&b.tensor), (&c.tensor).into()]
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

/// Checks the plan's layout against the header and returns the bucket the plan must fill, as the
/// expected (offset, bytes) parts.
fn expected_parts(plan: &MixedBucketPlan<'_>, a: &Mxfp8, b: &Nvfp4, c: &Nvfp4) -> Vec<(u64, Vec<u8>)> {
    let (e, n) = (plan.entries(), plan.nvfp4_entries());
    assert_eq!((e.len(), n.len()), (3, 3));
    let mut parts = vec![(e[0].values_offset, a.values.clone()), (e[0].scales_offset, a.scales.clone())];
    assert_eq!(n[0], Default::default(), "an MXFP8 entry has an all-zero NVFP4 entry");
    for (i, t) in [(1, b), (2, c)] {
        assert_eq!(e[i].values_bytes as usize, t.rows * t.k / 2);
        assert_eq!(e[i].scales_bytes as usize, t.rows * t.k.div_ceil(16));
        assert_eq!(n[i].amax_bytes as usize, 4 * t.amax.len());
        assert_eq!((n[i].e4m3_max, n[i].reserved), (t.e4m3_max, 0));
        parts.push((e[i].values_offset, t.values.clone()));
        parts.push((e[i].scales_offset, t.scales.clone()));
        parts.push((n[i].amax_offset, f32_bytes(&t.amax)));
    }
    assert_eq!((e[0].values_bytes as usize, e[0].scales_bytes as usize), (a.rows * a.k, a.rows * a.k.div_ceil(32)));
    // In bucket order, each at a multiple of the alignment, none overlapping, all inside.
    let mut end = 0u64;
    for (offset, bytes) in &parts {
        assert_eq!(offset % ALIGNMENT, 0, "part at {offset}");
        assert!(*offset >= end, "part at {offset} overlaps the one before (ending at {end})");
        end = offset + bytes.len() as u64;
    }
    assert!(end <= plan.total_bytes());
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
    let plan = MixedBucketPlan::new(&tensors, &ExportOptions::default(), ALIGNMENT).unwrap();
    assert_eq!(plan.direction(), Direction::Rowwise);
    let expected = expected_bucket(&expected_parts(&plan, &a, &b, &c), plan.total_bytes());
    // A bucket longer than needed: the tail is left as it was too.
    let mut bucket = vec![POISON; plan.total_bytes() as usize + 17];
    plan.fill(&mut bucket).unwrap();
    assert_eq!(&bucket[..expected.len()], &expected[..]);
    assert!(bucket[expected.len()..].iter().all(|&x| x == POISON));

    // The prepared fill writes the same bytes, at every run.
    let mut again = vec![POISON; bucket.len()];
    {
        let prepared = PreparedExport::bucket_mixed(&plan, &mut again).unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
        prepared.run(Stream::LEGACY_DEFAULT).unwrap();
    }
    assert_eq!(again, bucket);

    // A plan of the MXFP8 entry alone is BucketPlan's.
    let alone = MixedBucketPlan::new(&tensors[..1], &ExportOptions::default(), ALIGNMENT).unwrap();
    let classic = mxfp8::BucketPlan::new(&[&a.tensor], &ExportOptions::default(), ALIGNMENT).unwrap();
    assert_eq!((alone.entries(), alone.total_bytes()), (classic.entries(), classic.total_bytes()));
}

#[test]
fn the_prepared_fill_outlives_its_plan() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let plan = MixedBucketPlan::new(&tensors, &ExportOptions::default(), ALIGNMENT).unwrap();
    let expected = expected_bucket(&expected_parts(&plan, &a, &b, &c), plan.total_bytes());
    let mut bucket = vec![POISON; plan.total_bytes() as usize];
    let prepared = PreparedExport::bucket_mixed(&plan, &mut bucket).unwrap();
    drop(plan);
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

    fn borrow(&mut self) -> Vec<MixedImportTarget<'_>> {
        let mut out = Vec::new();
        let layouts = [Layout::Compact, Layout::Cutlass128x4, Layout::Compact];
        for (i, ((v, s), g)) in self.values.iter_mut().zip(self.scales.iter_mut()).zip(self.globals.iter_mut()).enumerate() {
            out.push(if i == 0 {
                MixedImportTarget::Mxfp8(ImportTarget { values: v, scales: s, layout: layouts[i] })
            } else {
                MixedImportTarget::Nvfp4(Nvfp4ImportTarget { values: v, scales: s, layout: layouts[i], global_scale: g })
            });
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

#[test]
fn a_mixed_import_writes_engine_targets_in_both_global_scale_conventions() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    for (convention, global) in [(GlobalScale::Decode, decode_global as fn(f32, i32) -> f32), (GlobalScale::Encode, encode_global)] {
        let mut immediate = Targets::new(&a, &b, &c);
        import_tensors_mixed_host(&tensors, &ExportOptions::default(), convention, &mut immediate.borrow()).unwrap();
        immediate.check(&a, &b, &c, global);

        // The prepared form writes the same bytes, at every run, into targets it keeps borrowed.
        let mut prepared_targets = Targets::new(&a, &b, &c);
        {
            let mut borrowed = prepared_targets.borrow();
            let prepared = PreparedExport::import_tensors_mixed(&tensors, &ExportOptions::default(), convention, &mut borrowed).unwrap();
            prepared.run(Stream::LEGACY_DEFAULT).unwrap();
            prepared.run(Stream::LEGACY_DEFAULT).unwrap();
        }
        assert_eq!(prepared_targets.values, immediate.values);
        assert_eq!(prepared_targets.scales, immediate.scales);
        assert_eq!(prepared_targets.globals.concat().iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                   immediate.globals.concat().iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }
    // The global scales agree with the NVFP4 export's own (Nvfp4Tensor::global_scale).
    let mut t = Targets::new(&a, &b, &c);
    import_tensors_mixed_host(&tensors, &ExportOptions::default(), GlobalScale::Encode, &mut t.borrow()).unwrap();
    let exported = c.tensor.global_scale(&mxfp8::Nvfp4ExportOptions::new().global_scale(GlobalScale::Encode)).unwrap();
    assert_eq!(f32_bytes(&exported.to_host_f32().unwrap()), f32_bytes(&t.globals[2]));
}

#[test]
fn bad_buckets_fail_and_write_nothing() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let plan = MixedBucketPlan::new(&tensors, &ExportOptions::default(), ALIGNMENT).unwrap();
    // One byte short (the last part is an amax, so it would be written past the end).
    let mut short = vec![POISON; plan.total_bytes() as usize - 1];
    let err = plan.fill(&mut short).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("bucket"), "{err}");
    assert!(short.iter().all(|&x| x == POISON));
    let err = PreparedExport::bucket_mixed(&plan, &mut short).err().expect("an undersized bucket is refused when prepared");
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(short.iter().all(|&x| x == POISON));

    // An alignment that is not a power of two; a plan of nothing is empty.
    let err = MixedBucketPlan::new(&tensors, &ExportOptions::default(), 48).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("alignment"), "{err}");
    let empty = MixedBucketPlan::new(&[], &ExportOptions::default(), ALIGNMENT).unwrap();
    assert_eq!(empty.total_bytes(), 0);
    empty.fill(&mut []).unwrap();

    // A columnwise plan of tensors stored rowwise only: no data for the direction.
    let err = MixedBucketPlan::new(&tensors, &ExportOptions::new().direction(Direction::Columnwise), ALIGNMENT).unwrap_err();
    assert_eq!(err.status, Status::MissingData, "{err}");
}

#[test]
fn bad_imports_fail_and_write_nothing() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let options = ExportOptions::default();

    // NVFP4 values one byte short (a target that does not match the tensor's shape).
    let mut t = Targets::new(&a, &b, &c);
    t.values[2].pop();
    let err = import_tensors_mixed_host(&tensors, &options, GlobalScale::Decode, &mut t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched(), "a failed import wrote to a target");
    let err = PreparedExport::import_tensors_mixed(&tensors, &options, GlobalScale::Decode, &mut t.borrow()).err().expect("refused when prepared");
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // One global scale for a per-row amax of 45.
    let mut t = Targets::new(&a, &b, &c);
    t.globals[2].truncate(1);
    let err = import_tensors_mixed_host(&tensors, &options, GlobalScale::Decode, &mut t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // 128x4 NVFP4 scales one tile row short; a layout NVFP4 does not have.
    let mut t = Targets::new(&a, &b, &c);
    let len = t.scales[1].len();
    t.scales[1].truncate(len - 4);
    let err = import_tensors_mixed_host(&tensors, &options, GlobalScale::Decode, &mut t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());
    let mut t = Targets::new(&a, &b, &c);
    let mut borrowed = t.borrow();
    if let MixedImportTarget::Nvfp4(target) = &mut borrowed[2] {
        target.layout = Layout::DeepgemmPacked;
    }
    let err = import_tensors_mixed_host(&tensors, &options, GlobalScale::Decode, &mut borrowed).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    drop(borrowed);
    assert!(t.untouched());

    // A target of the other kind, named; and counts that differ.
    let mut t = Targets::new(&a, &b, &c);
    let swapped = [tensors[0], tensors[2], tensors[1]];
    let mut borrowed = t.borrow();
    borrowed.swap(0, 1);
    let err = import_tensors_mixed_host(&swapped, &options, GlobalScale::Decode, &mut borrowed).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("targets[0] is an NVFP4 target for an MXFP8 tensor"), "{err}");
    let err = import_tensors_mixed_host(&tensors[..2], &options, GlobalScale::Decode, &mut borrowed).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains("2 tensors but 3 targets"), "{err}");
    // (The prepared form keeps the targets borrowed as long as they live.)
    let err = PreparedExport::import_tensors_mixed(&swapped, &options, GlobalScale::Decode, &mut borrowed).err().expect("refused when prepared");
    assert!(err.message.contains("targets[0]"), "{err}");
    assert!(t.untouched());
}

/// What the sender transmits for `tensors` (named a, b, c): a filled bucket and its manifest.
fn sent(tensors: &[MixedTensor<'_>]) -> (Vec<u8>, MixedManifest) {
    let plan = MixedBucketPlan::new(tensors, &ExportOptions::default(), ALIGNMENT).unwrap();
    let mut bucket = vec![POISON; plan.total_bytes() as usize];
    plan.fill(&mut bucket).unwrap();
    (bucket, plan.manifest(["a", "b", "c"]).unwrap())
}

#[test]
fn a_mixed_bucket_unpacks_and_imports_on_the_receiving_side() {
    let (a, b, c) = inputs();
    let tensors = mixed(&a, &b, &c);
    let plan = MixedBucketPlan::new(&tensors, &ExportOptions::default(), ALIGNMENT).unwrap();
    let (bucket, manifest) = sent(&tensors);
    assert!(plan.manifest(["a"]).is_err());

    // The manifest: shapes and the compact scales' shapes from the format rules.
    match &manifest.entries[0] {
        MixedManifestEntry::Mxfp8(e) => {
            assert_eq!((e.name.as_str(), &e.shape[..], &e.scales_shape[..]), ("a", &[133, 72][..], &[133, 3][..]))
        }
        other => panic!("entry 0 is {other:?}"),
    }
    for (i, t, shape) in [(1, &b, vec![2, 70, 40]), (2, &c, vec![45, 34])] {
        let MixedManifestEntry::Nvfp4(e) = &manifest.entries[i] else { panic!("entry {i} is not NVFP4") };
        assert_eq!(e.shape, shape);
        assert_eq!(e.scales_shape, vec![t.rows as i64, t.k.div_ceil(16) as i64]);
        assert_eq!((e.amax_offset, e.amax_bytes, e.e4m3_max), (plan.nvfp4_entries()[i].amax_offset, 4 * t.amax.len() as u64, t.e4m3_max));
    }

    // Unpack: views of the packed values, compact scales and amax.
    let views = manifest.unpack(&bucket).unwrap();
    let MixedBucketView::Mxfp8(v) = views[0] else { panic!("view 0 is not MXFP8") };
    assert_eq!((v.name, v.values, v.scales), ("a", &a.values[..], &a.scales[..]));
    for (i, t) in [(1, &b), (2, &c)] {
        let MixedBucketView::Nvfp4(v) = views[i] else { panic!("view {i} is not NVFP4") };
        assert_eq!((v.values, v.scales, v.e4m3_max), (&t.values[..], &t.scales[..], t.e4m3_max));
        assert_eq!(v.amax().iter().map(|x| x.to_bits()).collect::<Vec<_>>(), t.amax.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }

    // Import into engine targets, both conventions; the prepared form writes the same.
    for (convention, global) in [(GlobalScale::Decode, decode_global as fn(f32, i32) -> f32), (GlobalScale::Encode, encode_global)] {
        let import = MixedBucketImport { global_scale: convention, ..MixedBucketImport::new(&manifest.entries, Direction::Rowwise) };
        let mut immediate = Targets::new(&a, &b, &c);
        import_bucket_mixed_host(&bucket, &import, &mut immediate.borrow()).unwrap();
        immediate.check(&a, &b, &c, global);
        let mut prepared = Targets::new(&a, &b, &c);
        {
            let mut borrowed = prepared.borrow();
            let plan = PreparedExport::import_bucket_mixed(&bucket, &import, &mut borrowed).unwrap();
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
    let err = import_bucket_mixed_host(short, &MixedBucketImport::new(&manifest.entries, Direction::Rowwise), &mut t.borrow()).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(t.untouched());

    // An NVFP4 entry described as MXFP8 (same parts, shape and an MXFP8 target): its sizes do not match.
    let MixedManifestEntry::Nvfp4(e) = &manifest.entries[2] else { panic!() };
    let mut lying = manifest.clone();
    lying.entries[2] = MixedManifestEntry::Mxfp8(ManifestEntry {
        name: e.name.clone(),
        shape: e.shape.clone(),
        format: Format::E4M3,
        values_offset: e.values_offset,
        values_bytes: e.values_bytes,
        scales_offset: e.scales_offset,
        scales_bytes: e.scales_bytes,
        scales_shape: vec![45, 2],
    });
    let err = lying.unpack(&bucket).unwrap_err();
    assert!(err.message.contains("desc.parts_in[2] gives 765 bytes of values, its shape and row-major layout give 1530"), "{err}");
    let mut t = Targets::new(&a, &b, &c);
    let (mut v, mut s) = (vec![POISON; 45 * 34], vec![POISON; 45 * 2]);
    {
        let mut borrowed = t.borrow();
        borrowed[2] = MixedImportTarget::Mxfp8(ImportTarget { values: &mut v, scales: &mut s, layout: Layout::Compact });
        let err = import_bucket_mixed_host(&bucket, &MixedBucketImport::new(&lying.entries, Direction::Rowwise), &mut borrowed).unwrap_err();
        assert_eq!(err.status, Status::InvalidArgument, "{err}");
    }
    assert!(t.untouched() && v.iter().chain(&s).all(|&x| x == POISON));

    // A target of the other kind is named; a count that differs is refused.
    let mut t = Targets::new(&a, &b, &c);
    let mut borrowed = t.borrow();
    borrowed.swap(0, 1);
    let err = import_bucket_mixed_host(&bucket, &MixedBucketImport::new(&manifest.entries, Direction::Rowwise), &mut borrowed).unwrap_err();
    assert!(err.message.contains("targets[0] is an NVFP4 target for an MXFP8 manifest entry"), "{err}");
    let err = import_bucket_mixed_host(&bucket, &MixedBucketImport::new(&manifest.entries[..2], Direction::Rowwise), &mut borrowed).unwrap_err();
    assert!(err.message.contains("2 manifest entries but 3 targets"), "{err}");
    drop(borrowed);
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
    let a = TensorBuilder::new()
        .columnwise(
            ManagedTensor::from_host_bytes(mv.clone(), &[m as i64, k as i64]).unwrap(),
            ManagedTensor::from_host_bytes(pad_reference(&ms, 3, k, 4, 256, POISON), &[4, 256]).unwrap(),
        )
        .build()
        .unwrap();
    let (r, c) = (140usize, 50usize);
    let nv = random_bytes(r * c / 2, 83, 0, 255);
    let ns = random_bytes(r * 4, 84, 0x01, 0x7E);
    let b = Nvfp4TensorBuilder::new()
        .columnwise(
            ManagedTensor::from_host_bytes(nv.clone(), &[r as i64, (c / 2) as i64]).unwrap(),
            ManagedTensor::from_host_bytes(pad_reference(&ns, r, 4, 256, 4, POISON), &[256, 4]).unwrap(),
            ManagedTensor::from_host_f32(vec![9.25], &[1]).unwrap(),
        )
        .build()
        .unwrap();
    let options = ExportOptions::new().direction(Direction::Columnwise);
    let tensors = [MixedTensor::Mxfp8(&a), MixedTensor::Nvfp4(&b)];
    let plan = MixedBucketPlan::new(&tensors, &options, ALIGNMENT).unwrap();
    assert_eq!(plan.direction(), Direction::Columnwise);
    let mut bucket = vec![POISON; plan.total_bytes() as usize];
    plan.fill(&mut bucket).unwrap();
    let manifest = plan.manifest(["a", "b"]).unwrap();
    let views = manifest.unpack(&bucket).unwrap();
    let MixedBucketView::Mxfp8(v) = views[0] else { panic!("view 0 is not MXFP8") };
    assert_eq!((v.values, v.scales, v.scales_shape), (&mv[..], &ms[..], &[3, 150][..]));
    let MixedBucketView::Nvfp4(v) = views[1] else { panic!("view 1 is not NVFP4") };
    assert_eq!((v.shape, v.values, v.scales, v.scales_shape), (&[50, 140][..], &nv[..], &ns[..], &[140, 4][..]));
    assert_eq!(v.amax(), vec![9.25]);

    // The receiver: the bucket and the direct path write the same compact targets.
    let expected = (mv.clone(), ms.clone(), nv.clone(), ns.clone(), (9.25f32 / 2688.0).to_bits());
    for from_bucket in [true, false] {
        let (mut v0, mut s0, mut v1, mut s1, mut g) = (vec![POISON; mv.len()], vec![POISON; ms.len()], vec![POISON; nv.len()], vec![POISON; ns.len()], [0f32]);
        let mut targets = [
            MixedImportTarget::Mxfp8(ImportTarget { values: &mut v0, scales: &mut s0, layout: Layout::Compact }),
            MixedImportTarget::Nvfp4(Nvfp4ImportTarget { values: &mut v1, scales: &mut s1, layout: Layout::Compact, global_scale: &mut g }),
        ];
        if from_bucket {
            import_bucket_mixed_host(&bucket, &MixedBucketImport::new(&manifest.entries, Direction::Columnwise), &mut targets).unwrap();
        } else {
            import_tensors_mixed_host(&tensors, &options, GlobalScale::Decode, &mut targets).unwrap();
        }
        assert!((v0, s0, v1, s1, g[0].to_bits()) == expected, "from the bucket: {from_bucket}");
    }
}
