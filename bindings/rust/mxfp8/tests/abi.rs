//! mxfp8-sys cannot drift from mxfp8.h: a C probe (tests/c/abi_probe.c) compiled here against the header
//! prints every struct's size and field offsets and every field of every `*_INIT` macro, and this test
//! compares them with the Rust declarations and their `Default` impls; a second test checks that every
//! function and struct of the header is declared, and that mxfp8-sys declares none the header lacks.
//!
//! The header is found through MXFP8_INCLUDE_DIR, else `pkg-config --cflags mxfp8`, else this repository's
//! include/; DLPack's through MXFP8_DLPACK_INCLUDE_DIR, else pkg-config, else
//! `python3 -m tvm_ffi.config --dlpack-includedir`, else the compiler's own paths. The C compiler is $CC
//! or `cc`. Without a compiler or a header the tests print why and pass, unless MXFP8_REQUIRE_ABI_PROBE=1
//! (scripts/test.sh sets it) makes that a failure.
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;

use mxfp8::sys::*;

fn skip_or_fail(reason: &str) {
    if std::env::var("MXFP8_REQUIRE_ABI_PROBE").as_deref() == Ok("1") {
        panic!("{reason} (MXFP8_REQUIRE_ABI_PROBE=1)");
    }
    eprintln!("skipped: {reason}");
}

fn command_output(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The -I flags that make `#include <mxfp8/mxfp8.h>` (and its dlpack.h) compile, and the header's path.
fn include_flags() -> Option<(Vec<String>, PathBuf)> {
    let mut flags = Vec::new();
    let pkg = command_output("pkg-config", &["--cflags", "mxfp8"]);
    let pkg_dirs: Vec<String> = pkg.iter().flat_map(|s| s.split_whitespace()).filter_map(|f| f.strip_prefix("-I")).map(String::from).collect();
    let repo_include = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../include");
    let header_dir = std::env::var("MXFP8_INCLUDE_DIR").ok().map(PathBuf::from).into_iter()
        .chain(pkg_dirs.iter().map(PathBuf::from))
        .chain([repo_include])
        .find(|d| d.join("mxfp8/mxfp8.h").is_file())?;
    flags.push(format!("-I{}", header_dir.display()));
    if let Ok(dir) = std::env::var("MXFP8_DLPACK_INCLUDE_DIR") {
        flags.push(format!("-I{dir}"));
    } else if !pkg_dirs.is_empty() {
        flags.extend(pkg_dirs.iter().map(|d| format!("-I{d}")));
    } else if let Some(dir) = command_output("python3", &["-m", "tvm_ffi.config", "--dlpack-includedir"]) {
        flags.push(format!("-I{dir}"));
    }
    Some((flags, header_dir.join("mxfp8/mxfp8.h")))
}

/// The probe's "name value" lines, or why it could not run.
fn probe() -> Result<BTreeMap<String, i64>, String> {
    let (flags, _) = include_flags().ok_or("mxfp8/mxfp8.h not found (set MXFP8_INCLUDE_DIR)")?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/abi_probe.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("abi_probe");
    let compiled = Command::new(&cc).arg("-std=c99").args(&flags).arg(&source).arg("-o").arg(&exe).output()
        .map_err(|e| format!("no C compiler ({cc}: {e})"))?;
    if !compiled.status.success() {
        return Err(format!("{cc} {flags:?} could not compile the probe:\n{}", String::from_utf8_lossy(&compiled.stderr)));
    }
    let out = Command::new(&exe).output().map_err(|e| format!("running the probe: {e}"))?;
    assert!(out.status.success(), "the probe failed");
    Ok(String::from_utf8(out.stdout).unwrap().lines().map(|l| {
        let (k, v) = l.split_once(' ').unwrap();
        (k.to_string(), v.parse().unwrap())
    }).collect())
}

macro_rules! layout {
    ($out:ident, $t:ident: $($f:ident),*) => {
        $out.insert(stringify!($t).to_string(), size_of::<$t>() as i64);
        $($out.insert(format!("{}.{}", stringify!($t), stringify!($f)), offset_of!($t, $f) as i64);)*
    };
}

/// `kind`: `int` fields compare as integers, `ptr` fields as "not NULL".
macro_rules! init {
    ($out:ident, $t:ident: $($kind:ident $f:ident),*) => {{
        let v = <$t>::default();
        $($out.insert(format!("init.{}.{}", stringify!($t), stringify!($f)), init!(@$kind v.$f));)*
    }};
    (@int $e:expr) => { $e as i64 };
    (@ptr $e:expr) => { !($e as *const ()).is_null() as i64 };
    (@fnptr $e:expr) => { $e.is_some() as i64 };
}

fn rust_view() -> BTreeMap<String, i64> {
    let mut r = BTreeMap::new();
    layout!(r, DLDevice: device_type, device_id);
    layout!(r, DLDataType: code, bits, lanes);
    layout!(r, DLTensor: data, device, ndim, dtype, shape, strides, byte_offset);
    layout!(r, DLPackVersion: major, minor);
    layout!(r, DLManagedTensorVersioned: version, manager_ctx, deleter, flags, dl_tensor);
    layout!(r, mxfp8_tensor_desc: struct_size, format, scale_layout, ndim, shape, rowwise_data, rowwise_scale_inv,
            columnwise_data, columnwise_scale_inv, block, reserved, rowwise_amax, columnwise_amax, e4m3_max, reserved2);
    layout!(r, mxfp8_export_options: struct_size, direction, values_dtype, scales_dtype, padded_scales, reserved, stream,
            allocator, scales_granularity, reserved2, scale_fixup, reserved3, shard, global_scale, reserved4);
    layout!(r, mxfp8_bucket_part: values_offset, values_bytes, scales_offset, scales_bytes, amax_offset, amax_bytes);
    layout!(r, mxfp8_transfer_desc: struct_size, source, destination, scale_fixup, global_scale, reserved, count,
            directions, shards, tensors, bucket_in, parts_in, ndims, shapes, formats, source_layouts, e4m3_maxes,
            scales_ndims, scales_shapes, target_layouts, values, scales, global_scales, bucket_out, parts_out);
    layout!(r, mxfp8_shard: struct_size, reserved, row_begin, row_end, col_begin, col_end, num_row_pieces, row_pieces);
    layout!(r, mxfp8_grouped_desc: struct_size, format, scale_layout, scales, num_experts, reserved, cols, uniform_rows,
            expert_rows, scale_offsets, data, scale_inv);
    layout!(r, mxfp8_quantize_options: struct_size, format, block, scale_rounding, scales_layout, values_dtype,
            scales_dtype, flags, stream, allocator);
    layout!(r, mxfp8_dequantize_options: struct_size, direction, stream);
    layout!(r, mxfp8_convert_options: struct_size, target, direction, scale_fixup, stream, pad_rows_to, pad_cols_to, pad_scale,
            flags);
    layout!(r, mxfp8_nvfp4_quantize_options: struct_size, amax_scope, amax_mode, four_over_six, e4m3_max, scales_layout,
            direction, flags, stream);
    r.insert("mxfp8_status".into(), size_of::<mxfp8_status>() as i64);
    r.insert("MXFP8_VERSION".into(), MXFP8_VERSION as i64);
    r.insert("MXFP8_NUM_STATUS".into(), mxfp8_status::NUM_STATUS.0 as i64);

    init!(r, mxfp8_tensor_desc: int struct_size, int format, int scale_layout, int ndim, ptr shape, ptr rowwise_data,
          ptr rowwise_scale_inv, ptr columnwise_data, ptr columnwise_scale_inv, int block, int reserved,
          ptr rowwise_amax, ptr columnwise_amax, int e4m3_max, int reserved2);
    init!(r, mxfp8_export_options: int struct_size, int direction, int values_dtype, int scales_dtype, int padded_scales,
          int reserved, ptr stream, fnptr allocator, int scales_granularity, int reserved2, int scale_fixup,
          int reserved3, ptr shard, int global_scale, int reserved4);
    init!(r, mxfp8_transfer_desc: int struct_size, int source, int destination, int scale_fixup, int global_scale,
          int reserved, int count, ptr directions, ptr shards, ptr tensors, ptr bucket_in, ptr parts_in, ptr ndims,
          ptr shapes, ptr formats, ptr source_layouts, ptr e4m3_maxes, ptr scales_ndims, ptr scales_shapes,
          ptr target_layouts, ptr values, ptr scales, ptr global_scales, ptr bucket_out, ptr parts_out);
    init!(r, mxfp8_shard: int struct_size, int reserved, int row_begin, int row_end, int col_begin, int col_end,
          int num_row_pieces, ptr row_pieces);
    init!(r, mxfp8_grouped_desc: int struct_size, int format, int scale_layout, int scales, int num_experts, int reserved,
          int cols, int uniform_rows, ptr expert_rows, ptr scale_offsets, ptr data, ptr scale_inv);
    init!(r, mxfp8_quantize_options: int struct_size, int format, int block, int scale_rounding, int scales_layout,
          int values_dtype, int scales_dtype, int flags, ptr stream, fnptr allocator);
    init!(r, mxfp8_dequantize_options: int struct_size, int direction, ptr stream);
    init!(r, mxfp8_convert_options: int struct_size, int target, int direction, int scale_fixup, ptr stream, int pad_rows_to,
          int pad_cols_to, int pad_scale, int flags);
    init!(r, mxfp8_nvfp4_quantize_options: int struct_size, int amax_scope, int amax_mode, int four_over_six,
          int e4m3_max, int scales_layout, int direction, int flags, ptr stream);
    r
}

#[test]
fn layouts_and_init_defaults_match_the_c_header() {
    let c = match probe() {
        Ok(c) => c,
        Err(reason) => return skip_or_fail(&reason),
    };
    let rust = rust_view();
    let only_c: Vec<_> = c.keys().filter(|k| !rust.contains_key(*k)).collect();
    let only_rust: Vec<_> = rust.keys().filter(|k| !c.contains_key(*k)).collect();
    assert!(only_c.is_empty() && only_rust.is_empty(), "the probe and this test list different items: C only {only_c:?}, Rust only {only_rust:?}");
    let differ: Vec<String> = rust.iter().filter(|(k, v)| c[*k] != **v).map(|(k, v)| format!("{k}: C {}, Rust {v}", c[k])).collect();
    assert!(differ.is_empty(), "mxfp8-sys disagrees with mxfp8.h:\n{}", differ.join("\n"));
    // The probe is not vacuous: it printed every struct's size and every INIT macro.
    assert!(c.len() > 100, "{}", c.len());
}

/// Every `MXFP8_API` function and every `typedef struct` of the header has a declaration in mxfp8-sys
/// (read from its source, which sits next to this crate in the repository) and a line in the probe, and
/// every `mxfp8_` function and struct mxfp8-sys declares is in the header.
#[test]
fn every_function_and_struct_of_the_header_is_declared() {
    let Some((_, header)) = include_flags() else {
        return skip_or_fail("mxfp8/mxfp8.h not found (set MXFP8_INCLUDE_DIR)");
    };
    let sys_source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mxfp8-sys/src/lib.rs");
    let Ok(sys_source) = std::fs::read_to_string(&sys_source) else {
        return skip_or_fail("mxfp8-sys's source is not next to this crate (not a repository checkout)");
    };
    // Every public header, not only the umbrella: a declaration moved into a header of its own folder must
    // still be checked (reading mxfp8.h alone would then pass while checking less).
    let mut paths: Vec<PathBuf> = std::fs::read_dir(header.parent().unwrap()).unwrap()
        .map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "h")).collect();
    paths.sort();
    let header: String = paths.iter().map(|p| std::fs::read_to_string(p).unwrap()).collect::<Vec<_>>().join("\n");
    let functions: Vec<&str> = header.lines().filter(|l| l.starts_with("MXFP8_API ")).map(|l| {
        let name = &l[..l.find('(').expect("a declaration on one line")];
        name.rsplit([' ', '*']).next().unwrap()
    }).collect();
    assert!(functions.len() >= 18, "{functions:?}");
    let missing: Vec<_> = functions.iter().filter(|f| !sys_source.contains(&format!("pub fn {f}("))).collect();
    assert!(missing.is_empty(), "mxfp8-sys does not declare {missing:?}");

    let structs: Vec<&str> = header.lines().filter_map(|l| l.strip_prefix("typedef struct ")).filter(|l| l.ends_with('{'))
        .map(|l| l.trim_end_matches('{').trim()).collect();
    let probe = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/abi_probe.c")).unwrap();
    for s in &structs {
        assert!(sys_source.contains(&format!("pub struct {s} {{")), "mxfp8-sys does not declare struct {s}");
        assert!(probe.contains(&format!("SIZE({s});")), "tests/c/abi_probe.c does not check struct {s}");
    }
    assert!(structs.len() >= 6, "{structs:?}");
    // Opaque handles (`typedef struct mxfp8_tensor mxfp8_tensor;`).
    let handles: Vec<&str> = header.lines().filter_map(|l| l.strip_prefix("typedef struct ")).filter(|l| l.ends_with(';'))
        .map(|l| l.split(' ').next().unwrap()).collect();
    for h in &handles {
        assert!(sys_source.contains(&format!("pub struct {h} {{")), "mxfp8-sys does not declare handle {h}");
    }
    assert!(handles.len() >= 2, "{handles:?}");

    // The other way: nothing the header has dropped is still declared.
    let declared = |prefix: &str, end: char| -> Vec<String> {
        sys_source.lines().filter_map(|l| l.trim_start().strip_prefix(prefix)).filter_map(|l| l.split_once(end))
            .map(|(name, _)| name.trim().to_string()).filter(|name| name.starts_with("mxfp8_")).collect()
    };
    let stale: Vec<String> = declared("pub fn ", '(').into_iter().filter(|f| !functions.contains(&f.as_str())).collect();
    assert!(stale.is_empty(), "mxfp8-sys declares functions the header does not: {stale:?}");
    let stale: Vec<String> = declared("pub struct ", '{').into_iter()
        .filter(|s| !structs.contains(&s.as_str()) && !handles.contains(&s.as_str())).collect();
    assert!(stale.is_empty(), "mxfp8-sys declares structs the header does not: {stale:?}");
}
