//! The transfer (`mxfp8_transfer_desc`): many tensors of either format, whole or sharded, from tensors or
//! a bucket into a bucket, the engine's buffers or nothing (a check), run at once or prepared once into a
//! [`Plan`] run every step; and the [`Manifest`] a receiver reads a bucket with.
use std::marker::PhantomData;
use std::ptr;

use crate::error::{check, invalid, Error};
use crate::handle::Handle;
use crate::memory::{Buf, BufMut, Dl};
use crate::options::{CField, Direction, Format, GlobalScale, Layout, ScaleFixup, Stream};
use crate::shard::{RawShards, Shard};
use crate::sys;
use crate::tensor::{compact_scales_shape, Tensor};

/// Where one entry's parts sit in a bucket, in bytes from its first byte (`mxfp8_bucket_part`): values,
/// scales, and (NVFP4) the float32 amax; an MXFP8 entry's amax fields are 0.
pub type BucketPart = sys::mxfp8_bucket_part;

/// One entry's destination among the engine's buffers (`TO_BUFFERS`), each written in place.
#[derive(Debug)]
pub struct Target<'a> {
    /// The values (`prod(shape)` bytes; NVFP4 `rows * cols / 2`), or None for the scales only.
    pub values: Option<BufMut<'a>>,
    /// The scales, exactly the bytes `layout` gives ([`layout_bytes`](crate::layout_bytes)); padding zero.
    pub scales: BufMut<'a>,
    /// The layout the scales are written in (NVFP4: compact or 128x4).
    pub layout: Layout,
    /// An NVFP4 entry's global scale (float32, one per amax) in the transfer's convention.
    pub global_scale: Option<BufMut<'a>>,
}

impl<'a> Target<'a> {
    /// Values and scales in `layout`.
    pub fn new(values: impl Into<BufMut<'a>>, scales: impl Into<BufMut<'a>>, layout: Layout) -> Self {
        Self { values: Some(values.into()), scales: scales.into(), layout, global_scale: None }
    }
    /// Scales only (what a batched export of scales writes).
    pub fn scales(scales: impl Into<BufMut<'a>>, layout: Layout) -> Self {
        Self { values: None, scales: scales.into(), layout, global_scale: None }
    }
    setters! {
        /// With an NVFP4 entry's global scale.
        global_scale(global_scale: impl Into<BufMut<'a>>) => global_scale = Some(global_scale.into());
    }
}

#[derive(Debug)]
enum Source<'t, 'm> {
    Tensors(Vec<&'t Tensor>),
    Bucket(Buf<'m>, &'t Manifest),
}

#[derive(Debug)]
enum Destination<'m> {
    Nothing,
    Buffers(Vec<Target<'m>>),
    Bucket(BufMut<'m>, Vec<BucketPart>),
}

/// One transfer (`mxfp8_transfer_desc`), built as the desc is: a source (tensors of either format, or a
/// bucket and its [`Manifest`]), per-entry direction and shard, and a destination (the engine's
/// buffers, a bucket, or none: [`check`](Self::check) only). Every rule is the library's: this type
/// translates, and an error carries the library's message naming the field. `'t` is the borrow of the
/// tensors and the manifest (read during each call), `'m` that of the memory (bucket, buffers), which a
/// prepared [`Plan`] keeps.
///
/// ```
/// # use mxfp8::{Layout, ManagedTensor, ScaleLayout, Stream, Target, TensorBuilder, Transfer};
/// # fn main() -> Result<(), mxfp8::Error> {
/// let weight = TensorBuilder::new().scale_layout(ScaleLayout::RowMajor)
///     .rowwise(ManagedTensor::from_host(vec![0x38; 4 * 64], &[4, 64])?,
///              ManagedTensor::from_host(vec![127; 4 * 2], &[4, 2])?)
///     .build()?;
/// // Sender: a bucket, and the manifest a receiver reads it with.
/// let send = Transfer::from_tensors(&[&weight]);
/// let (parts, total) = send.bucket_parts(256)?;
/// let manifest = send.manifest(["layer0.weight"], &parts)?;
/// let mut bucket = vec![0u8; total as usize];
/// send.to_bucket(&mut bucket, &parts).run(Stream::default())?;
/// // Receiver: views the library checked, or a transfer into the engine's own buffers.
/// assert_eq!(manifest.unpack(&bucket)?[0].scales.as_host(), Some(&[127u8; 8][..]));
/// let (mut values, mut scales) = (vec![0u8; 256], vec![0u8; 8]);
/// Transfer::from_bucket(&bucket, &manifest)
///     .to_buffers(vec![Target::new(&mut values, &mut scales, Layout::Compact)])
///     .run(Stream::default())?;
/// assert_eq!((values[0], scales[0]), (0x38, 127));
/// # Ok(()) }
/// ```
///
/// A transfer is `Send` but not `Sync` (two runs at once would write the same destinations):
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<mxfp8::Transfer<'static, 'static>>();
/// ```
#[derive(Debug)]
pub struct Transfer<'t, 'm> {
    source: Source<'t, 'm>,
    directions: Option<Vec<Direction>>,
    shards: Option<Vec<Shard>>,
    scale_fixup: ScaleFixup,
    global_scale: GlobalScale,
    source_layout: Layout,
    destination: Destination<'m>,
    /// Send but not Sync: two runs at once from two threads would write the same destinations.
    _not_sync: PhantomData<std::cell::Cell<()>>,
}

impl<'t, 'm> Transfer<'t, 'm> {
    /// The defaults of `MXFP8_TRANSFER_DESC_INIT` (read from mxfp8-sys), every bucket part compact.
    fn new(source: Source<'t, 'm>) -> Self {
        let c = sys::mxfp8_transfer_desc::default();
        let scale_fixup = CField::from_c(c.scale_fixup, "scale_fixup");
        let global_scale = CField::from_c(c.global_scale, "global_scale");
        let (directions, shards, source_layout) = (None, None, Layout::Compact);
        Self { source, directions, shards, scale_fixup, global_scale, source_layout, destination: Destination::Nothing, _not_sync: PhantomData }
    }

    /// From `tensors` (`FROM_TENSORS`), MXFP8 and NVFP4 alike, every entry rowwise until told otherwise.
    pub fn from_tensors(tensors: &[&'t Tensor]) -> Self {
        Self::new(Source::Tensors(tensors.to_vec()))
    }
    /// From a bucket (`FROM_BUCKET`, only read) that `manifest` describes: each entry's parts, shape,
    /// format, direction, scales shape and E4M3_MAX, all checked by the library.
    pub fn from_bucket(bucket: impl Into<Buf<'m>>, manifest: &'t Manifest) -> Self {
        Self::new(Source::Bucket(bucket.into(), manifest))
    }
    /// Every entry in `direction` (default: rowwise, or each manifest entry's own; a bucket entry is read in
    /// the direction it was written, and another is refused).
    pub fn direction(self, direction: Direction) -> Self {
        let n = self.count();
        self.directions(&vec![direction; n])
    }
    setters! {
        /// Entry i in `directions[i]` (one per entry).
        directions(directions: &[Direction]) => directions = Some(directions.to_vec());
        /// Entry i is `shards[i]` of its tensor (one per entry, [`Shard::whole`] for all of it): of the
        /// source tensor, or of the whole tensor a bucket entry holds.
        shards(shards: &[Shard]) => shards = Some(shards.to_vec());
        /// The rewrite of every MXFP8 scale written (whole tensors only; default none).
        scale_fixup(fixup: ScaleFixup) => scale_fixup = fixup;
        /// The convention NVFP4 amaxes are written in to [`Target::global_scale`] (default decode).
        global_scale(convention: GlobalScale) => global_scale = convention;
        /// The layout of a bucket source's scales parts, every entry (default [`Layout::Compact`]).
        source_layout(layout: Layout) => source_layout = layout;
        /// Into the engine's buffers (`TO_BUFFERS`), one target per entry.
        to_buffers(targets: Vec<Target<'m>>) => destination = Destination::Buffers(targets);
        /// Into `bucket` at `parts`, from [`bucket_parts`](Self::bucket_parts) of this transfer (`TO_BUCKET`).
        to_bucket(bucket: impl Into<BufMut<'m>>, parts: &[BucketPart]) => destination = Destination::Bucket(bucket.into(), parts.to_vec());
    }

    fn count(&self) -> usize {
        match &self.source {
            Source::Tensors(t) => t.len(),
            Source::Bucket(_, m) => m.entries.len(),
        }
    }

    /// Builds the desc and its arrays, which live for the call of `f` (the Rust-side check is only that
    /// every per-entry array has one element per entry: the library cannot see an array's length).
    fn call<R>(&self, f: impl FnOnce(&sys::mxfp8_transfer_desc) -> R) -> Result<R, Error> {
        let n = self.count();
        let lengths = [
            ("directions", self.directions.as_ref().map(Vec::len)),
            ("shards", self.shards.as_ref().map(Vec::len)),
            ("targets", if let Destination::Buffers(t) = &self.destination { Some(t.len()) } else { None }),
            ("bucket parts", if let Destination::Bucket(_, p) = &self.destination { Some(p.len()) } else { None }),
        ];
        if let Some((what, len)) = lengths.iter().find_map(|(w, l)| l.filter(|&l| l != n).map(|l| (w, l))) {
            return Err(invalid(format!("{len} {what} for {n} entries")));
        }
        let (tensors, bucket_in, entries): (&[&Tensor], _, &[ManifestEntry]) = match &self.source {
            Source::Tensors(t) => (t, None, &[]),
            Source::Bucket(b, m) => (&[], Some(b), &m.entries),
        };
        check_entries(entries, self.directions.as_deref())?;
        self.check_rust_fields()?;
        let directions: Vec<i32> = match &self.directions {
            Some(d) => d.iter().map(|d| d.to_raw()).collect(),
            None if bucket_in.is_some() => entries.iter().map(|e| e.direction.to_raw()).collect(),
            None => vec![Direction::Rowwise.to_raw(); n],
        };
        let shards = self.shards.as_deref().map(RawShards::new);
        let handles: Vec<*const sys::mxfp8_tensor> = tensors.iter().map(|t| t.as_raw()).collect();
        let mut bucket_dl = bucket_in.map(|b| b.raw.dl(None));
        let parts_in: Vec<BucketPart> = entries.iter().map(|e| e.part).collect();
        let ndims: Vec<i32> = entries.iter().map(|e| e.shape.len() as i32).collect();
        let shapes: Vec<*const i64> = entries.iter().map(|e| e.shape.as_ptr()).collect();
        let formats: Vec<i32> = entries.iter().map(|e| e.format.to_raw()).collect();
        let source_layouts = vec![self.source_layout.to_raw(); entries.len()];
        let e4m3_maxes: Vec<i32> = entries.iter().map(|e| e.e4m3_max).collect();
        let scales_ndims: Vec<i32> = entries.iter().map(|e| e.scales_shape.len() as i32).collect();
        let scales_shapes: Vec<*const i64> = entries.iter().map(|e| e.scales_shape.as_ptr()).collect();
        let targets: &[Target<'_>] = if let Destination::Buffers(t) = &self.destination { t } else { &[] };
        let mut values: Vec<Option<Dl>> = targets.iter().map(|t| t.values.as_ref().map(|v| v.raw.dl(None))).collect();
        let mut scales: Vec<Dl> = targets.iter().map(|t| t.scales.raw.dl(None)).collect();
        let mut globals: Vec<Option<Dl>> = targets.iter().map(|t| t.global_scale.as_ref().map(|g| g.raw.dl(None))).collect();
        let layouts: Vec<i32> = targets.iter().map(|t| t.layout.to_raw()).collect();
        let value_ptrs: Vec<*mut sys::DLTensor> = values.iter_mut().map(|v| v.as_mut().map_or(ptr::null_mut(), Dl::ptr)).collect();
        let scale_ptrs: Vec<*mut sys::DLTensor> = scales.iter_mut().map(Dl::ptr).collect();
        let global_ptrs: Vec<*mut sys::DLTensor> = globals.iter_mut().map(|g| g.as_mut().map_or(ptr::null_mut(), Dl::ptr)).collect();
        let mut d = sys::mxfp8_transfer_desc {
            scale_fixup: self.scale_fixup.to_raw(),
            global_scale: self.global_scale.to_raw(),
            count: n,
            directions: directions.as_ptr(),
            shards: shards.as_ref().map_or(ptr::null(), RawShards::as_ptr),
            ..Default::default()
        };
        match &mut bucket_dl {
            None => {
                d.source = sys::MXFP8_TRANSFER_FROM_TENSORS;
                d.tensors = handles.as_ptr();
            }
            Some(bucket) => {
                d.source = sys::MXFP8_TRANSFER_FROM_BUCKET;
                d.bucket_in = bucket.ptr();
                d.parts_in = parts_in.as_ptr();
                d.ndims = ndims.as_ptr();
                d.shapes = shapes.as_ptr();
                d.formats = formats.as_ptr();
                d.source_layouts = source_layouts.as_ptr();
                d.e4m3_maxes = e4m3_maxes.as_ptr();
                if scales_ndims.iter().any(|&n| n > 0) {
                    d.scales_ndims = scales_ndims.as_ptr();
                    d.scales_shapes = scales_shapes.as_ptr();
                }
            }
        }
        let mut bucket_out = None;
        match &self.destination {
            Destination::Nothing => d.destination = sys::MXFP8_TRANSFER_TO_NOTHING,
            Destination::Buffers(_) => {
                d.destination = sys::MXFP8_TRANSFER_TO_BUFFERS;
                d.values = value_ptrs.as_ptr();
                d.scales = scale_ptrs.as_ptr();
                d.target_layouts = layouts.as_ptr();
                if globals.iter().any(Option::is_some) {
                    d.global_scales = global_ptrs.as_ptr();
                }
            }
            Destination::Bucket(bucket, parts) => {
                d.destination = sys::MXFP8_TRANSFER_TO_BUCKET;
                d.bucket_out = bucket_out.insert(bucket.raw.dl(None)).ptr();
                d.parts_out = parts.as_ptr();
            }
        }
        Ok(f(&d))
    }

    /// What the library would refuse under the C desc's names (`desc.global_scales[i]`,
    /// `desc.shards[i].row_pieces[j]`), refused under the Rust ones.
    fn check_rust_fields(&self) -> Result<(), Error> {
        if let Destination::Buffers(targets) = &self.destination {
            for (i, _) in targets.iter().enumerate().filter(|(_, t)| t.global_scale.is_some()) {
                let format = match &self.source {
                    Source::Tensors(tensors) => tensors[i].format(),
                    Source::Bucket(_, m) => m.entries[i].format,
                };
                if format != Format::Nvfp4 {
                    return Err(invalid(format!("targets[{i}] has a global_scale, but entry {i} is {format:?}: a global scale is an NVFP4 entry's")));
                }
            }
        }
        for (i, shard) in self.shards.iter().flatten().enumerate() {
            if shard.rows.len() > 1 && shard.rows.iter().any(|r| r.end == Shard::END) {
                return Err(invalid(format!("shards[{i}]: Shard::END ends the one row range only; give each of several row pieces its end")));
            }
        }
        Ok(())
    }

    /// `mxfp8_bucket_parts`: lays out the bucket of this transfer from tensors (entry i's values, compact
    /// scales and NVFP4 amax, each at a multiple of `alignment`, a power of two; 256 suits every
    /// consumer's vector loads): the parts and the bucket's size. Touches no tensor memory.
    pub fn bucket_parts(&self, alignment: u64) -> Result<(Vec<BucketPart>, u64), Error> {
        let mut parts = vec![BucketPart::default(); self.count()];
        let mut total = 0u64;
        self.call(|d| {
            // The bucket's parts, every one compact (what to_bucket fills and a manifest describes), whatever
            // destination this transfer was given: a to_buffers transfer's targets and layouts are not read.
            let (values, scales, global_scales, target_layouts) = (ptr::null(), ptr::null(), ptr::null(), ptr::null());
            let d = sys::mxfp8_transfer_desc { destination: sys::MXFP8_TRANSFER_TO_BUCKET, values, scales, global_scales, target_layouts, ..*d };
            // SAFETY: `parts` holds count elements; the desc's arrays live for the call.
            check(unsafe { sys::mxfp8_bucket_parts(&d, alignment, parts.as_mut_ptr(), &mut total) })
        })??;
        Ok((parts, total))
    }

    /// The manifest a receiver needs for the bucket of this transfer from tensors laid out at `parts`,
    /// naming the entries in order: each entry's shape (a shard's `(rows, cols)`), format, direction,
    /// compact scales' shape and E4M3_MAX, which the receiver's library checks against the bucket. The
    /// transfer is [`check`](Self::check)ed first: its refusal (an entry's direction or shard) is the error.
    /// `parts` must be the slice the bucket is filled with ([`to_bucket`](Self::to_bucket)): they are
    /// recorded as given, and the receiver checks sizes and bounds, so the parts of two entries of equal
    /// sizes given in another order would label one entry's bytes with the other's name.
    pub fn manifest<S: Into<String>>(&self, names: impl IntoIterator<Item = S>, parts: &[BucketPart]) -> Result<Manifest, Error> {
        let Source::Tensors(tensors) = &self.source else { return Err(invalid("a manifest describes a transfer from tensors")) };
        let names: Vec<String> = names.into_iter().map(Into::into).collect();
        if names.len() != tensors.len() || parts.len() != tensors.len() {
            return Err(invalid(format!("{} names and {} parts for {} tensors", names.len(), parts.len(), tensors.len())));
        }
        // The entries below read directions[i] and shards[i]: arrays of one element per entry, of
        // directions and shards the library accepts for these tensors.
        self.check()?;
        let entry = |(i, ((name, t), part)): (usize, ((String, &&Tensor), &BucketPart))| {
            let direction = self.directions.as_ref().and_then(|d| d.get(i).copied()).unwrap_or(Direction::Rowwise);
            let shape = self.shards.as_ref().and_then(|s| s.get(i)).map_or_else(|| t.shape().to_vec(), |s| s.shape_of(t.shape()));
            let scales_shape = compact_scales_shape(&shape, direction, t.format());
            ManifestEntry { name, shape, format: t.format(), direction, part: *part, scales_shape, e4m3_max: t.e4m3_max().unwrap_or(0) }
        };
        Ok(Manifest { entries: names.into_iter().zip(tensors).zip(parts).enumerate().map(entry).collect() })
    }

    /// `mxfp8_transfer`: checks everything, then moves every entry. Device memory: one launch (and a
    /// few more for large values and NVFP4 global scales) queued on `stream`; host memory: done on return.
    pub fn run(&self, stream: Stream) -> Result<(), Error> {
        // SAFETY: host buffers are borrowed for 'm, device ones promised (DeviceBytes) for the queued work.
        self.call(|d| check(unsafe { sys::mxfp8_transfer(d, stream.as_raw()) }))?
    }
    /// `mxfp8_transfer_check`: every check of [`run`](Self::run) (with no destination: the source side
    /// alone), nothing written.
    pub fn check(&self) -> Result<(), Error> {
        // SAFETY: the check reads addresses and sizes, never the bytes behind them.
        self.call(|d| check(unsafe { sys::mxfp8_transfer_check(d) }))?
    }
    /// `mxfp8_transfer_prepare`: the checks once, the work kept as a [`Plan`], which holds a reference on
    /// every source tensor (so it may outlive them) and keeps the memory (bucket, buffers) borrowed, device
    /// memory promised, for as long as it lives.
    pub fn prepare(self) -> Result<Plan<'m>, Error> {
        // SAFETY: the plan keeps the addresses of memory borrowed (or promised) for 'm, which Plan<'m> carries; the
        // tensors' references are the plan's own.
        let raw = self.call(|d| Handle::make("mxfp8_transfer_prepare", |out| unsafe { sys::mxfp8_transfer_prepare(d, out) }))??;
        Ok(Plan { raw, _memory: PhantomData })
    }
}

/// An `mxfp8_plan`: a transfer checked once, its work kept. Each [`run`](Plan::run) is the launch alone
/// (no check, no allocation, no synchronization), so it can be captured in a CUDA graph. The buffers stay
/// borrowed (host) or promised (device) for the plan's lifetime `'a`.
///
/// A plan is `Send` but not `Sync`: its runs write the same destinations, so two at once would race.
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<mxfp8::Plan<'static>>();
/// ```
///
/// It cannot outlive the memory it writes:
///
/// ```compile_fail,E0597
/// # use mxfp8::{Stream, Transfer};
/// let plan = {
///     let mut bucket = vec![0u8; 64];
///     Transfer::from_tensors(&[]).to_bucket(&mut bucket, &[]).prepare().unwrap()
/// }; // error: `bucket` does not live long enough
/// plan.run(Stream::LEGACY_DEFAULT).unwrap();
/// ```
#[derive(Debug)]
pub struct Plan<'a> {
    /// The plan owns its tensor references (transfer.h: it may be run and released from any thread).
    raw: Handle<sys::mxfp8_plan>,
    /// The memory it writes, borrowed for 'a. Not Sync (`&mut` is, a Cell is not): two overlapping
    /// runs of one plan write the same destinations, so `run(&self)` from two threads would be a data race.
    _memory: PhantomData<(&'a mut [u8], std::cell::Cell<()>)>,
}

impl Plan<'_> {
    /// `mxfp8_plan_run` on `stream` (host memory: done on return).
    pub fn run(&self, stream: Stream) -> Result<(), Error> {
        // SAFETY: the plan is live; the stream's validity is Stream::from_raw's promise.
        check(unsafe { sys::mxfp8_plan_run(self.raw.as_ptr(), stream.as_raw()) })
    }
}

/// One entry of a bucket: what the receiver needs to find and shape its parts (the fields of a Python
/// `mxfp8.export_bucket` manifest entry). Every field is public: a receiver rebuilds it from whatever the
/// sender transmitted, and the library checks it against the bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The tensor's name.
    pub name: String,
    /// The logical shape of what the entry holds (a shard's `(rows, cols)`).
    pub shape: Vec<i64>,
    /// The encoding of the values.
    pub format: Format,
    /// The direction the entry carries (NVFP4: the stored matrix of that direction).
    pub direction: Direction,
    /// Where its values, scales and (NVFP4) amax lie.
    pub part: BucketPart,
    /// The shape of the scale matrix, compact ([`Tensor::scales_shape`]: rowwise MXFP8
    /// `(*lead, ceil(K/32))`, NVFP4 `(*lead, ceil(K/16))`); empty in every entry: not said (the library then checks bytes only). The
    /// library takes the scale shapes of all entries or of none: one left empty among others is refused.
    pub scales_shape: Vec<i64>,
    /// NVFP4's E4M3_MAX (448 or 256); 0 for MXFP8.
    pub e4m3_max: i32,
}

/// What the C desc cannot carry of a manifest, checked here so that the refusal names the Rust field: a
/// direction given for a bucket entry must be the one the entry was written in (for NVFP4 with M == K, or
/// without scale shapes, both directions have the same bytes, and the library would read one as the
/// other); E4M3_MAX is NVFP4's alone; the shape and the scale shapes of all entries or none are said.
fn check_entries(entries: &[ManifestEntry], directions: Option<&[Direction]>) -> Result<(), Error> {
    let said = entries.iter().position(|e| !e.scales_shape.is_empty());
    for (i, e) in entries.iter().enumerate() {
        let entry = format!("manifest entry {i} ({:?})", e.name);
        if let Some(&given) = directions.and_then(|d| d.get(i)).filter(|&&d| d != e.direction) {
            return Err(invalid(format!(
                "directions[{i}] is {given:?}, but the {entry} was written {:?}: a bucket entry is read in its own direction",
                e.direction
            )));
        }
        if e.format != Format::Nvfp4 && e.e4m3_max != 0 {
            return Err(invalid(format!("the {entry} is {:?} with e4m3_max {}: E4M3_MAX is NVFP4's, 0 for MXFP8", e.format, e.e4m3_max)));
        }
        if e.shape.is_empty() {
            return Err(invalid(format!("the {entry} has an empty shape")));
        }
        if let Some(j) = said.filter(|_| e.scales_shape.is_empty()) {
            return Err(invalid(format!(
                "the {entry} has no scales_shape while entry {j}'s is given: give every entry's scale shape or none"
            )));
        }
    }
    Ok(())
}

/// What a bucket holds, entry by entry. Made by [`Transfer::manifest`] on the sending side, or rebuilt by
/// the receiver (its fields are public).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The entries, in bucket order.
    pub entries: Vec<ManifestEntry>,
}

/// One entry inside a bucket: sub-ranges of its memory (host slices through [`Buf::as_host`], device
/// memory through [`Buf::as_device`]), of parts the library checked.
#[derive(Copy, Clone, Debug)]
pub struct BucketView<'b> {
    /// The manifest's entry.
    pub entry: &'b ManifestEntry,
    /// The values, row-major (NVFP4: packed).
    pub values: Buf<'b>,
    /// The compact scales, row-major.
    pub scales: Buf<'b>,
    /// NVFP4: the float32 amaxes' bytes as the sender's memory holds them; empty for MXFP8.
    pub amax: Buf<'b>,
}

impl BucketView<'_> {
    /// The amaxes of a host bucket (one, or one per row; empty for MXFP8). The decode global scale
    /// (`weight_scale_2`) is the float32 division `amax / (6 * E4M3_MAX)`.
    pub fn amax_values(&self) -> Option<Vec<f32>> {
        Some(self.amax.as_host()?.chunks_exact(4).map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect())
    }
}

impl Manifest {
    /// Every entry of a bucket (host or device) as views into it, after the library has checked the
    /// manifest against the bucket (`mxfp8_transfer_check` to nothing: each part of exactly the bytes its
    /// shape, format and direction give, inside the bucket, apart from the others, `scales_shape` the scale
    /// matrix; with an NVFP4 entry the bucket at an address that is a multiple of 4, so its float32 amax
    /// is aligned); its refusal comes back as the error. The views borrow the bucket:
    ///
    /// ```compile_fail,E0597
    /// # let manifest = mxfp8::Manifest::default();
    /// let views = {
    ///     let bucket = vec![0u8; 1024];
    ///     manifest.unpack(&bucket).unwrap()
    /// }; // error: `bucket` does not live long enough
    /// println!("{}", views.len());
    /// ```
    pub fn unpack<'b, 'm: 'b>(&'b self, bucket: impl Into<Buf<'m>>) -> Result<Vec<BucketView<'b>>, Error> {
        let bucket = bucket.into();
        Transfer::from_bucket(bucket, self).check()?;
        let view = |e: &'b ManifestEntry| {
            let p = &e.part;
            BucketView {
                entry: e,
                values: bucket.sub(p.values_offset, p.values_bytes),
                scales: bucket.sub(p.scales_offset, p.scales_bytes),
                amax: bucket.sub(p.amax_offset, p.amax_bytes),
            }
        };
        Ok(self.entries.iter().map(view).collect())
    }
}
