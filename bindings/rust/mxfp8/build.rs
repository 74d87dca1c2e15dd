//! Puts the folder libmxfp8 was linked from into the RPATH of this crate's tests and examples, so they run
//! without `LD_LIBRARY_PATH`. mxfp8-sys finds the library (`MXFP8_LIB_DIR` or `pkg-config mxfp8`) and hands
//! the folder on as `DEP_MXFP8_RPATH`; empty under `MXFP8_NO_RPATH=1`. (Cargo applies a build script's
//! link arguments to its own package only, so a program of yours needs the same line in its build script;
//! see the README's Rust section.)
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_MXFP8_RPATH");
    if let Ok(dirs) = std::env::var("DEP_MXFP8_RPATH") {
        for dir in dirs.split(':').filter(|d| !d.is_empty()) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
