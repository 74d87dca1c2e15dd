//! A receiver's manifest is checked by the library (`mxfp8_transfer_check` of the bucket) before any view is
//! made: the hand-written manifests below have parts of the right byte counts, inside the bucket, yet
//! describe no bucket a sender filled (issue 31 items 6 and 10). The crate used to accept each of them.
use mxfp8::{BucketPart, DeviceBytes, Direction, Format, Manifest, ManifestEntry, ScaleLayout, Status};

/// One (48, 100) E4M3 tensor of `direction`: 4800 bytes of values at 0, its compact scales at 4864.
fn entry_of(direction: Direction, scales_shape: &[i64], scales_bytes: u64) -> ManifestEntry {
    ManifestEntry {
        name: "w".into(),
        shape: vec![48, 100],
        format: Format::E4M3,
        direction,
        part: BucketPart { values_offset: 0, values_bytes: 4800, scales_offset: 4864, scales_bytes, ..Default::default() },
        scales_shape: scales_shape.to_vec(),
        e4m3_max: 0,
    }
}

fn mxfp8_entry(scales_shape: &[i64], scales_bytes: u64) -> ManifestEntry {
    entry_of(Direction::Rowwise, scales_shape, scales_bytes)
}

fn manifest(entries: Vec<ManifestEntry>) -> Manifest {
    Manifest { entries }
}

fn refused(err: mxfp8::Error, message: &str) {
    assert_eq!(err.status, Status::InvalidArgument, "{err}");
    assert!(err.message.contains(message), "expected {message:?} in {err}");
}

#[test]
fn a_scales_shape_of_the_right_bytes_but_the_wrong_matrix_is_refused() {
    let bucket = vec![0u8; 5120];
    // (100, 2) holds 200 bytes, as the columnwise scales (2, 100) of (48, 100) do: only the shape is wrong.
    let err = manifest(vec![mxfp8_entry(&[100, 2], 200)]).unpack(&bucket).unwrap_err();
    refused(err, "desc.parts_in[0] gives 200 bytes of scales, its shape and compact layout give 192");
    // The same bytes under the shape that names them: columnwise, accepted, and the view keeps the shape.
    let columnwise = manifest(vec![entry_of(Direction::Columnwise, &[2, 100], 200)]);
    let views = columnwise.unpack(&bucket).unwrap();
    assert_eq!((views[0].scales.len(), &views[0].entry.scales_shape[..]), (200, &[2, 100][..]));
    // ... and refused when the entry says rowwise.
    refused(manifest(vec![mxfp8_entry(&[2, 100], 200)]).unpack(&bucket).unwrap_err(), "desc.parts_in[0] gives 200 bytes of scales");
    // Rowwise (48, 4), and (1, 48, 4) (any split of S's rows): accepted; (4, 48) has 192 bytes and is not S.
    assert!(manifest(vec![mxfp8_entry(&[48, 4], 192)]).unpack(&bucket).is_ok());
    assert!(manifest(vec![mxfp8_entry(&[1, 48, 4], 192)]).unpack(&bucket).is_ok());
    let err = manifest(vec![mxfp8_entry(&[4, 48], 192)]).unpack(&bucket).unwrap_err();
    refused(err, "desc.scales_shapes[0] is (4, 48), not the rowwise scale matrix of shape (48, 100), which is 48 x 4");
}

#[test]
fn entries_over_the_same_bytes_are_refused() {
    let bucket = vec![0u8; 5120];
    let one = mxfp8_entry(&[48, 4], 192);
    let err = manifest(vec![one.clone(), ManifestEntry { name: "twin".into(), ..one.clone() }]).unpack(&bucket).unwrap_err();
    refused(err, "desc.parts_in[1] values (bytes 0..4800) and desc.parts_in[0] values (bytes 0..4800) overlap in the bucket");
    // An entry's scales inside its own values.
    let inside = ManifestEntry { part: BucketPart { scales_offset: 100, ..one.part }, ..one.clone() };
    let err = manifest(vec![inside.clone()]).unpack(&bucket).unwrap_err();
    refused(err, "desc.parts_in[0] scales (bytes 100..292) and desc.parts_in[0] values (bytes 0..4800) overlap");
    // The device form asks the same question (it reads the bucket's address and size, never its bytes).
    // SAFETY: host memory described as host memory; nothing is queued on it.
    let device = unsafe { DeviceBytes::new(bucket.as_ptr() as *mut _, bucket.len(), mxfp8::sys::DLDevice { device_type: mxfp8::sys::DLDeviceType::CPU, device_id: 0 }) };
    refused(manifest(vec![inside]).unpack(device).unwrap_err(), "overlap in the bucket");
    let good = manifest(vec![one]);
    let views = good.unpack(device).unwrap();
    assert_eq!((views[0].values.len(), views[0].scales.len()), (4800, 192));
    // Views of DeviceBytes are DeviceBytes (never Rust slices): sub-ranges at the manifest's offsets.
    assert!(views[0].scales.as_host().is_none());
    let at = views[0].scales.as_device().unwrap();
    assert_eq!((at.as_ptr() as usize - bucket.as_ptr() as usize, at.len(), at.device()), (4864, 192, views[0].values.as_device().unwrap().device()));
}

#[test]
fn parts_past_the_end_of_u64_are_refused() {
    // values_offset + values_bytes = 2^64 + 5: no bucket holds it.
    let e = mxfp8_entry(&[48, 4], 192);
    let part = BucketPart { values_offset: u64::MAX - 4, values_bytes: 10, scales_bytes: 1, ..e.part };
    let m = manifest(vec![ManifestEntry { shape: vec![1, 10], part, scales_shape: vec![1, 1], ..e }]);
    refused(m.unpack(&[0u8; 5120]).unwrap_err(), "its 10 bytes of values at byte 18446744073709551611 run past the end of a bucket of 5120 bytes");
}

/// One (64, 64) NVFP4 tensor, rowwise: 2048 bytes of packed values, 64 x 4 compact E4M3 scales, one amax.
fn nvfp4_entry() -> ManifestEntry {
    ManifestEntry {
        name: "q".into(),
        shape: vec![64, 64],
        format: Format::Nvfp4,
        direction: Direction::Rowwise,
        part: BucketPart { values_offset: 0, values_bytes: 2048, scales_offset: 2048, scales_bytes: 256, amax_offset: 2304, amax_bytes: 4 },
        scales_shape: vec![64, 4],
        e4m3_max: 448,
    }
}

fn unpack_nvfp4(e: ManifestEntry) -> Result<usize, mxfp8::Error> {
    let mut bucket = vec![0u8; 2320];
    bucket[2304..2308].copy_from_slice(&2.5f32.to_ne_bytes());
    let m = manifest(vec![e]);
    let views = m.unpack(&bucket)?;
    assert_eq!((views[0].amax.len(), views[0].amax_values()), (4, Some(vec![2.5])));
    Ok(views.len())
}

#[test]
fn nvfp4_entries_are_checked_by_the_library() {
    assert_eq!(unpack_nvfp4(nvfp4_entry()).unwrap(), 1);
    // (32, 8): the 256 bytes of the 64 x 4 scale matrix, not its shape.
    let err = unpack_nvfp4(ManifestEntry { scales_shape: vec![32, 8], ..nvfp4_entry() }).unwrap_err();
    refused(err, "desc.scales_shapes[0] is (32, 8), not the NVFP4 rowwise scale matrix of shape (64, 64), which is 64 x 4");
    let err = unpack_nvfp4(ManifestEntry { part: BucketPart { amax_offset: 2309, ..nvfp4_entry().part }, ..nvfp4_entry() }).unwrap_err();
    refused(err, "desc.parts_in[0].amax_offset is 2309, not a multiple of 4");
    let err = unpack_nvfp4(ManifestEntry { e4m3_max: 300, ..nvfp4_entry() }).unwrap_err();
    refused(err, "desc.e4m3_maxes[0] is 300, expected 448 or 256");
    let err = unpack_nvfp4(ManifestEntry { part: BucketPart { amax_offset: 2044, ..nvfp4_entry().part }, ..nvfp4_entry() }).unwrap_err();
    refused(err, "desc.parts_in[0] amax (bytes 2044..2048) and desc.parts_in[0] values (bytes 0..2048) overlap");
}

fn sender_weight() -> mxfp8::Tensor {
    mxfp8::TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
        .rowwise(mxfp8::ManagedTensor::from_host(vec![0x38; 64 * 64], &[64, 64]).unwrap(),
                 mxfp8::ManagedTensor::from_host(vec![127; 64 * 2], &[64, 2]).unwrap())
        .columnwise(mxfp8::ManagedTensor::from_host(vec![0x38; 64 * 64], &[64, 64]).unwrap(),
                    mxfp8::ManagedTensor::from_host(vec![127; 2 * 64], &[2, 64]).unwrap())
        .build()
        .unwrap()
}

/// A sender's manifest describes the transfer it is made from, which the library checks first: per-entry
/// arrays of the wrong length and shards the library refuses used to be read past (a missing direction
/// silently rowwise, an unchecked shard's shape) into a manifest of entries the bucket does not hold.
#[test]
fn a_senders_manifest_is_of_a_transfer_the_library_accepts() {
    let w = sender_weight();
    let parts = [BucketPart::default(); 2];
    let err = mxfp8::Transfer::from_tensors(&[&w, &w]).directions(&[Direction::Columnwise]).manifest(["a", "b"], &parts).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("1 directions for 2 entries"), "{err}");
    let err = mxfp8::Transfer::from_tensors(&[&w, &w]).shards(&[mxfp8::Shard::rows(0..32)]).manifest(["a", "b"], &parts).unwrap_err();
    assert!(err.message.contains("1 shards for 2 entries"), "{err}");
    let err = mxfp8::Transfer::from_tensors(&[&w]).shards(&[mxfp8::Shard::cols(0..100)]).manifest(["a"], &parts[..1]).unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.message.contains("desc.shards[0]"), "{err}");
    // Aligned arrays: the entries say what the transfer moves.
    let send = mxfp8::Transfer::from_tensors(&[&w, &w]).directions(&[Direction::Columnwise, Direction::Rowwise]);
    let (parts, _) = send.bucket_parts(256).unwrap();
    let m = send.manifest(["a", "b"], &parts).unwrap();
    assert_eq!((m.entries[0].direction, &m.entries[0].scales_shape[..]), (Direction::Columnwise, &[2, 64][..]));
    assert_eq!((m.entries[1].direction, &m.entries[1].scales_shape[..]), (Direction::Rowwise, &[64, 2][..]));
}

/// `scales_shape` empty is "not said" for a whole manifest only: the C desc takes every entry's scale
/// shape or none, so one entry without it among entries with it is refused (the field's doc said any
/// entry could leave it empty).
#[test]
fn scales_shapes_are_given_for_every_entry_or_none() {
    let w = sender_weight();
    let send = mxfp8::Transfer::from_tensors(&[&w, &w]);
    let (parts, total) = send.bucket_parts(256).unwrap();
    let mut bucket = vec![0u8; total as usize];
    let mut m = send.manifest(["a", "b"], &parts).unwrap();
    send.to_bucket(&mut bucket, &parts).run(mxfp8::Stream::default()).unwrap();
    m.entries[1].scales_shape.clear();
    let err = m.unpack(&bucket).unwrap_err();
    refused(err, "the manifest entry 1 (\"b\") has no scales_shape while entry 0's is given");
    m.entries[0].scales_shape.clear();
    assert_eq!(m.unpack(&bucket).unwrap().len(), 2);
}

/// The C desc carries a bucket entry's direction only as the transfer's `directions`: a receiver's
/// `.direction()` used to replace the manifest's without a word, and where both directions have the same
/// bytes (NVFP4 with M == K; any entry without scale shapes) the library read the entry as the other
/// direction's matrix. The second probe of the Rust layer found it.
#[test]
fn a_direction_other_than_the_manifests_is_refused() {
    let q = nvfp4_entry();  // (64, 64) rowwise: the columnwise (K, M) matrix has the same bytes
    let mut bucket = vec![0u8; 2320];
    bucket[2304..2308].copy_from_slice(&2.5f32.to_ne_bytes());
    let m = manifest(vec![q.clone()]);
    let (mut v, mut s, mut g) = (vec![0u8; 2048], vec![0u8; 256], vec![0f32; 1]);
    fn target<'a>(v: &'a mut [u8], s: &'a mut [u8], g: &'a mut [f32]) -> Vec<mxfp8::Target<'a>> {
        vec![mxfp8::Target::new(v, s, mxfp8::Layout::Compact).global_scale(g)]
    }
    let err = mxfp8::Transfer::from_bucket(&bucket, &m).direction(Direction::Columnwise)
        .to_buffers(target(&mut v, &mut s, &mut g)).run(mxfp8::Stream::default()).unwrap_err();
    refused(err, "directions[0] is Columnwise, but the manifest entry 0 (\"q\") was written Rowwise");
    assert!(v.iter().chain(&s).all(|&b| b == 0) && g == [0.0], "nothing written");
    // Its own direction, said or not, reads it.
    for given in [None, Some(Direction::Rowwise)] {
        let t = mxfp8::Transfer::from_bucket(&bucket, &m);
        let t = if let Some(d) = given { t.direction(d) } else { t };
        t.to_buffers(target(&mut v, &mut s, &mut g)).run(mxfp8::Stream::default()).unwrap();
    }
    // MXFP8 (32, 32) without scale shapes: rowwise (32, 1) and columnwise (1, 32) are 32 bytes each.
    let e = ManifestEntry {
        name: "m".into(), shape: vec![32, 32], format: Format::E4M3, direction: Direction::Rowwise,
        part: BucketPart { values_offset: 0, values_bytes: 1024, scales_offset: 1024, scales_bytes: 32, ..Default::default() },
        scales_shape: vec![], e4m3_max: 0,
    };
    let bucket = vec![0x38u8; 1056];
    let m = manifest(vec![e]);
    let err = mxfp8::Transfer::from_bucket(&bucket, &m).directions(&[Direction::Columnwise]).check().unwrap_err();
    refused(err, "directions[0] is Columnwise, but the manifest entry 0 (\"m\") was written Rowwise");
    mxfp8::Transfer::from_bucket(&bucket, &m).directions(&[Direction::Rowwise]).check().unwrap();
}

/// What the C desc cannot refuse because it does not read it, refused by the crate, naming the entry:
/// E4M3_MAX on an MXFP8 entry (the field's doc says 0), an empty shape.
#[test]
fn an_mxfp8_entry_with_an_e4m3_max_or_an_entry_without_a_shape_is_refused() {
    let bucket = vec![0u8; 5120];
    let err = manifest(vec![ManifestEntry { e4m3_max: 448, ..mxfp8_entry(&[48, 4], 192) }]).unpack(&bucket).unwrap_err();
    refused(err, "the manifest entry 0 (\"w\") is E4M3 with e4m3_max 448: E4M3_MAX is NVFP4's, 0 for MXFP8");
    let err = manifest(vec![ManifestEntry { shape: vec![], ..mxfp8_entry(&[48, 4], 192) }]).unpack(&bucket).unwrap_err();
    refused(err, "the manifest entry 0 (\"w\") has an empty shape");
}
