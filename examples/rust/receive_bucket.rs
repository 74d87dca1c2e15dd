//! The inference side of a weight sync, in Rust: maps a bucket that the Python weight-sync example's
//! trainer wrote into POSIX shared memory (examples/rust/send_bucket.py runs that trainer and this
//! program), unpacks it with the manifest into per-tensor views that borrow the mapping (no copy), and
//! checks every tensor bit for bit against its own quantize of the trainer's master weights: the values
//! and compact scales as received, and the scales re-swizzled for its GEMM against the Transformer Engine
//! layout the trainer stored.
//!
//!   receive_bucket <shared-memory name> <manifest file> <folder of <name>.f32 master weights>
//!
//! The manifest format is send_bucket.py's (one tensor per line). Linux: the segment is /dev/shm/<name>.
use std::error::Error;
use std::ffi::c_void;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

use mxfp8::{quantize, swizzle_scales, BucketPart, Direction, Format, Manifest, ManifestEntry, QuantizeOptions, QuantizedScales, Stream};

extern "C" {
    // From the C library every Rust program on Linux links; declared here to keep the example free of
    // dependencies.
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut c_void;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
}
const PROT_READ: i32 = 1; // Linux values
const MAP_SHARED: i32 = 1;

/// A read-only shared mapping of a whole file.
struct Mapping {
    ptr: *mut c_void,
    len: usize,
}

impl Mapping {
    fn open(path: &Path) -> std::io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        // SAFETY: a fresh read-only mapping of `len` bytes of an open file; checked below.
        let ptr = unsafe { mmap(std::ptr::null_mut(), len.max(1), PROT_READ, MAP_SHARED, file.as_raw_fd(), 0) };
        if ptr as isize == -1 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { ptr, len })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping holds `len` readable bytes until Drop; the sender does not write the
        // segment while this process runs (it waits for our exit before it refills the bucket).
        unsafe { std::slice::from_raw_parts(self.ptr as *const u8, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once.
        unsafe { munmap(self.ptr, self.len.max(1)) };
    }
}

fn dims(text: &str) -> Result<Vec<i64>, Box<dyn Error>> {
    Ok(text.split(',').map(str::parse).collect::<Result<_, _>>()?)
}

/// send_bucket.py's manifest: name fp8_dtype values_offset values_bytes scales_offset scales_bytes shape scales_shape.
fn read_manifest(path: &Path) -> Result<Manifest, Box<dyn Error>> {
    let mut entries = Vec::new();
    for line in std::fs::read_to_string(path)?.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [name, fp8, vo, vb, so, sb, shape, scales_shape] = f[..] else {
            return Err(format!("manifest line {line:?}: expected 8 fields").into());
        };
        entries.push(ManifestEntry {
            name: name.to_string(),
            format: match fp8 {
                "e4m3" => Format::E4M3,
                "e5m2" => Format::E5M2,
                other => return Err(format!("{name}: unknown fp8_dtype {other}").into()),
            },
            direction: Direction::Rowwise,
            part: BucketPart {
                values_offset: vo.parse()?,
                values_bytes: vb.parse()?,
                scales_offset: so.parse()?,
                scales_bytes: sb.parse()?,
                ..Default::default()
            },
            shape: dims(shape)?,
            scales_shape: dims(scales_shape)?,
            e4m3_max: 0,
        });
    }
    Ok(Manifest { entries })
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, shm_name, manifest_path, weights] = &args[..] else {
        return Err("usage: receive_bucket <shared-memory name> <manifest file> <master-weights folder>".into());
    };
    let mapping = Mapping::open(&Path::new("/dev/shm").join(shm_name.trim_start_matches('/')))?;
    let manifest = read_manifest(Path::new(manifest_path))?;
    let views = manifest.unpack(mapping.bytes())?; // checked against the bucket; views, not copies

    let mut mismatches = Vec::new();
    for view in &views {
        // What an inference engine's load_weights does: copy the parts into its own parameters...
        let e = view.entry;
        let (weight, weight_scale) = (view.values.as_host().unwrap().to_vec(), view.scales.as_host().unwrap().to_vec());
        let (rows, cols) = (e.scales_shape[..e.scales_shape.len() - 1].iter().product::<i64>() as usize, *e.scales_shape.last().unwrap() as usize);
        // ...and re-swizzle the scales for its GEMM.
        let mut gemm_scales = vec![0u8; mxfp8::layout_bytes(mxfp8::Layout::Cutlass128x4, Direction::Rowwise, rows as i64, cols as i64)? as usize];
        swizzle_scales(&weight_scale, rows, cols, &mut gemm_scales, Stream::default())?;

        // The check: the same master weights quantized here, compact and in TE's swizzled layout.
        let raw = std::fs::read(Path::new(weights).join(format!("{}.f32", e.name)))?;
        let master: Vec<f32> = raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let options = QuantizeOptions::new().format(e.format);
        let compact = quantize(&master, &e.shape, &[Direction::Rowwise], &options)?.remove(0);
        let te = quantize(&master, &e.shape, &[Direction::Rowwise], &options.scales(QuantizedScales::Swizzled))?.remove(0);
        if compact.data.as_host_bytes() != Some(&weight[..]) {
            mismatches.push(format!("{}: values differ", e.name));
        } else if compact.scale_inv.as_host_bytes() != Some(&weight_scale[..]) {
            mismatches.push(format!("{}: scales differ", e.name));
        } else if te.scale_inv.as_host_bytes() != Some(&gemm_scales[..]) {
            mismatches.push(format!("{}: re-swizzled scales differ from the trainer's layout", e.name));
        }
    }
    let bytes: usize = views.iter().map(|v| v.values.len() + v.scales.len()).sum();
    if !mismatches.is_empty() {
        eprintln!("receive_bucket: {}", mismatches.join("; "));
        std::process::exit(1);
    }
    println!("    rust receiver: {} tensors, {bytes} bytes from /dev/shm/{shm_name}: every tensor bit-exact", views.len());
    Ok(())
}
