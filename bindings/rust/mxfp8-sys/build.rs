//! Finds libmxfp8: MXFP8_LIB_DIR (the folder holding libmxfp8.so), else the pkg-config program.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=MXFP8_LIB_DIR");
    println!("cargo:rerun-if-env-changed=MXFP8_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if let Ok(include) = env::var("MXFP8_INCLUDE_DIR") {
        // Dependents with C code of their own (and the layout test) find the header here.
        println!("cargo:include={include}");
    }
    if let Ok(dir) = env::var("MXFP8_LIB_DIR") {
        println!("cargo:rustc-link-search=native={dir}");
        println!("cargo:rustc-link-lib=dylib=mxfp8");
        return;
    }
    match Command::new("pkg-config").args(["--libs", "mxfp8"]).output() {
        Ok(out) if out.status.success() => {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                }
            }
            println!("cargo:rustc-link-lib=dylib=mxfp8");
        }
        _ => panic!(
            "libmxfp8 not found: set MXFP8_LIB_DIR to the folder holding libmxfp8.so \
             (e.g. the CMake build folder), or install it where `pkg-config mxfp8` finds it"
        ),
    }
}
