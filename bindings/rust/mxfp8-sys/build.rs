//! Finds libmxfp8 when building, and says where it is for run time.
//!
//! Build time: `MXFP8_LIB_DIR` (the folder holding `libmxfp8.so`, e.g. a CMake build folder or
//! `<prefix>/lib`), else the `pkg-config` program (`pkg-config --libs mxfp8`, which `PKG_CONFIG_PATH` steers).
//!
//! Run time: that folder goes into the RPATH (ELF RUNPATH) of this package's tests, examples and binaries,
//! and is handed to direct dependents as `DEP_MXFP8_RPATH` (colon-separated; the `mxfp8` crate's build script
//! puts it into the RPATH of its own tests and examples). So they run without `LD_LIBRARY_PATH`. A system
//! folder that pkg-config does not name with `-L` needs no RPATH and gets none. `MXFP8_NO_RPATH=1` leaves
//! the RPATH out (for distribution packages; then the library must be where the dynamic loader looks).
use std::env;
use std::process::Command;

fn main() {
    for var in ["MXFP8_LIB_DIR", "MXFP8_INCLUDE_DIR", "MXFP8_NO_RPATH", "PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if let Ok(include) = env::var("MXFP8_INCLUDE_DIR") {
        // Dependents with C code of their own (and the layout test) find the header here.
        println!("cargo:include={include}");
    }
    let mut rpath: Vec<String> = Vec::new();
    if let Ok(dir) = env::var("MXFP8_LIB_DIR") {
        // Cargo runs this script from the mxfp8-sys folder, not from where cargo was called, so a relative
        // path would name some other folder (and the linker, the RPATH and the tests would each read it anew).
        if std::path::Path::new(&dir).is_relative() {
            panic!("MXFP8_LIB_DIR is {dir}, a relative path: give it as an absolute one (e.g. \"$PWD/build\")");
        }
        // Said here, not as the linker's "unable to find library -lmxfp8" after the crate has compiled.
        if !std::path::Path::new(&dir).join("libmxfp8.so").exists() {
            panic!(
                "MXFP8_LIB_DIR is {dir}, which holds no libmxfp8.so: build the library first \
                 (cmake -S . -B build && cmake --build build), then point MXFP8_LIB_DIR at that folder"
            );
        }
        println!("cargo:rustc-link-search=native={dir}");
        rpath.push(dir);
    } else {
        match Command::new("pkg-config").args(["--libs", "mxfp8"]).output() {
            Ok(out) if out.status.success() => {
                for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    if let Some(dir) = flag.strip_prefix("-L") {
                        println!("cargo:rustc-link-search=native={dir}");
                        rpath.push(dir.to_string());
                    } else if let Some(dirs) = flag.strip_prefix("-Wl,-rpath,") {
                        rpath.extend(dirs.split(',').map(str::to_string));
                    }
                }
            }
            _ => panic!(
                "libmxfp8 not found: set MXFP8_LIB_DIR to the folder holding libmxfp8.so \
                 (e.g. the CMake build folder), or install it where `pkg-config mxfp8` finds it"
            ),
        }
    }
    println!("cargo:rustc-link-lib=dylib=mxfp8");
    if env::var("MXFP8_NO_RPATH").is_ok_and(|v| !v.is_empty() && v != "0") {
        return;
    }
    // One entry per folder, however pkg-config spells it (lib/pkgconfig/../../lib).
    let mut folders: Vec<String> = Vec::new();
    for dir in rpath {
        let dir = std::fs::canonicalize(&dir).map_or(dir, |p| p.display().to_string());
        if !folders.contains(&dir) {
            folders.push(dir);
        }
    }
    let rpath = folders;
    for dir in &rpath {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    if !rpath.is_empty() {
        println!("cargo:rpath={}", rpath.join(":"));
    }
}
