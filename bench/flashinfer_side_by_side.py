#!/usr/bin/env python3
"""mxfp8's scale swizzle and unswizzle next to FlashInfer's (issue 36), by GPU time, on one GPU.

Per scale-matrix shape (rows R, columns C = K/32) and direction:
  swizzle    compact (R, C) uint8 -> the cuBLAS/CUTLASS 128x4 layout:
             mxfp8.swizzle_scales(compact, out)  against FlashInfer's block_scale_interleave kernel
  unswizzle  the 128x4 layout -> compact (R, C):
             mxfp8.unswizzle_scales(swizzled, R, C, out)  against FlashInfer's block_scale_interleave_reverse
  copy       a torch copy_ of the same bytes (half of what the transform reads plus writes), the floor.
Shapes: R in 128, 1024, 8192, 16384, 57344 x C in 128, 160, 224 (K = 4096, 5120, 7168). FlashInfer's reverse
takes only R % 128 == 0 and C % 4 == 0, which all of these are.

FlashInfer is called through its JIT module (flashinfer/quantization/fp4_quantization.py,
gen_fp4_quantization_sm<arch>_module().build_and_load(), the module FlashInfer's own
get_fp4_quantization_module builds): its exported functions block_scale_interleave_sm100(in, out) and
block_scale_interleave_reverse_sm100(in (R, C), out (R, C)), the kernels behind the public
flashinfer.block_scale_interleave (the reverse has no public wrapper). Each swizzle shape also checks the
public API's output against the module's.

Method: each sample is one call timed by two CUDA events around it, after a spin kernel (torch.cuda._sleep,
~100 us: the host has enqueued the call before the GPU reaches the first event, so no host time is
counted) and a write of a 256 MiB buffer (L2, 50-60 MB on H100/H200, is cold and full of others' dirty lines,
as in bench_scales' rotation); the figure is the median of --reps samples, in microseconds. Before timing,
every output is poisoned, written once by each side and compared bit for bit with the other side's and with
a torch view/permute reference ("bit_exact": ours == FlashInfer's).

FlashInfer travels as a trimmed tarball (../shared/tools/flashinfer-trim.sh .carry/flashinfer.tar.xz; the
device has no network): this script unpacks it once under --flashinfer-dir, puts it first on sys.path,
unpacks apache-tvm-ffi (and FlashInfer's pure-Python imports) from .carry/wheels when the interpreter lacks
them, and lets FlashInfer JIT-build its fp4 quantization module with nvcc on the first run (~1 minute; cached
under --flashinfer-dir for the next run on the same machine). Without the tarball an installed flashinfer is
used. Every case runs in its own try/except: a failure is recorded in its entry's "errors" and the run goes
on; the exit status is 1 when anything failed or differed.

  python3 bench/flashinfer_side_by_side.py --out OUT/flashinfer_side_by_side.json   # on the GPU (~2 min cold)
  python3 bench/flashinfer_side_by_side.py --smoke                                  # tiny shapes, CPU or GPU

Without a GPU, --smoke runs both libraries' host paths on tiny CPU tensors (FlashInfer's module has host
versions of both functions): it checks the calling conventions and the bit-exactness, and times host wall clock.

Writes {"date", "gpu", "flashinfer_version", "method", "sizes": {"RxC/direction": {"direction", "rows",
"cols", "bytes", "ours_us", "flashinfer_us", "copy_us", "bit_exact", ..., "errors": {part: message}}},
"errors": {...}} (the file is rewritten after every entry, so a run cut short keeps what it measured).
"""
import argparse
import ctypes
import datetime
import glob
import hashlib
import importlib
import json
import os
import statistics
import sys
import tarfile
import time
import traceback
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [128, 1024, 8192, 16384, 57344]
COLS = [128, 160, 224]  # K = 4096, 5120, 7168
SMOKE_SHAPES = [(128, 4), (256, 8), (384, 28)]
DIRECTIONS = ("swizzle", "unswizzle")
FLUSH_BYTES = 256 << 20  # the cold-cache footprint bench_scales.cu rotates over
SPIN_CYCLES = 200_000  # ~100 us at H100/H200 clocks: longer than the host's enqueue of one sample
WARMUP = 3
# Wheels (in --wheels) for modules FlashInfer imports that a bare machine may lack; the rest of its imports
# (torch, numpy, jinja2, filelock) come with torch.
WHEEL_OF_MODULE = {"tvm_ffi": "apache_tvm_ffi", "requests": "requests", "urllib3": "urllib3", "idna": "idna",
                   "certifi": "certifi", "charset_normalizer": "charset_normalizer", "packaging": "packaging",
                   "filelock": "filelock"}


def round_up(n, d):
    return (n + d - 1) // d * d


def error_text(e):
    """One line for the JSON: the exception and where it came from (the last frame of ours or theirs)."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" (at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno})" if tb else ""
    text = f"{type(e).__name__}: {e}".strip()
    return (text[:1500] + " ..." if len(text) > 1500 else text) + where


# --- FlashInfer onto sys.path -----------------------------------------------------------------------------
def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def unpack_tarball(tar_path, base):
    """The tarball's contents in a directory named after its digest: unpacked once, reused on later runs
    (a stable path keeps FlashInfer's JIT cache valid: its ninja file names the sources' absolute paths)."""
    dest = os.path.join(base, "pkg-" + file_digest(tar_path))
    if os.path.isdir(os.path.join(dest, "flashinfer")):
        return dest
    partial = f"{dest}.partial-{os.getpid()}"
    os.makedirs(partial)
    with tarfile.open(tar_path) as tar:
        if hasattr(tarfile, "data_filter"):  # refuse absolute paths and links out of the folder
            tar.extractall(partial, filter="data")
        else:
            tar.extractall(partial)
    os.rename(partial, dest)  # whole or not at all: a run killed mid-unpack leaves only a .partial folder
    return dest


def wheel_for(module, wheels_dir):
    """The wheel in wheels_dir that provides `module` for this interpreter, or None."""
    dist = WHEEL_OF_MODULE.get(module)
    if dist is None or not os.path.isdir(wheels_dir):
        return None
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    for name in sorted(os.listdir(wheels_dir)):
        if name.startswith(dist + "-") and name.endswith(".whl") and (f"-{tag}-" in name or "-none-any" in name):
            return os.path.join(wheels_dir, name)
    return None


def add_wheel(module, wheels_dir, base, notes):
    """Unpack the wheel that provides `module` into a folder first on sys.path (installing nothing into
    the machine's Python); False when there is none."""
    wheel = wheel_for(module, wheels_dir)
    if wheel is None:
        return False
    site = os.path.join(base, f"site-cp{sys.version_info[0]}{sys.version_info[1]}")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    if site not in sys.path:
        sys.path.insert(0, site)
    importlib.invalidate_caches()
    notes.append(f"{module} from {os.path.basename(wheel)}")
    return True


def import_flashinfer(args, capability, info):
    """FlashInfer's package and its fp4 quantization JIT module (built on first use). Sets in `info` where
    FlashInfer came from, its version, and the JIT build's time."""
    base = args.flashinfer_dir
    os.makedirs(base, exist_ok=True)
    # Read once, at import, by flashinfer.jit.env: the JIT cache under base, not ~/.cache; the target
    # architecture from the GPU (or sm_90 without one, for the CPU smoke run).
    os.environ.setdefault("FLASHINFER_WORKSPACE_BASE", os.path.join(base, "workspace"))
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "%d.%d" % (capability or (9, 0)))
    if args.flashinfer_tar and os.path.isfile(args.flashinfer_tar):
        t = time.perf_counter()
        pkg = unpack_tarball(args.flashinfer_tar, base)
        sys.path.insert(0, pkg)
        info["flashinfer_source"] = f"{args.flashinfer_tar} -> {pkg} ({time.perf_counter() - t:.1f} s)"
    else:
        info["flashinfer_source"] = f"installed (no tarball at {args.flashinfer_tar})"
    notes = []
    for _ in range(len(WHEEL_OF_MODULE) + 1):  # each round can add one missing module's wheel
        try:
            import flashinfer  # noqa: F401

            try:
                from flashinfer.quantization import fp4_quantization as fq
            except ImportError:  # layouts before flashinfer/quantization/ had it at the top level
                from flashinfer import fp4_quantization as fq
            break
        except ModuleNotFoundError as e:
            missing = (e.name or "").split(".")[0]
            for name in [m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer.")]:
                del sys.modules[name]  # a half-imported package would hide the retry's errors
            if not add_wheel(missing, args.wheels, base, notes):
                raise
    else:
        raise RuntimeError(f"FlashInfer still fails to import after unpacking {notes}")
    if notes:
        info["unpacked_wheels"] = notes
    info["flashinfer_version"] = getattr(flashinfer, "__version__", "unknown")
    info["flashinfer_file"] = flashinfer.__file__
    # The module FlashInfer's get_fp4_quantization_module(backend) builds, named by the same backend key
    # ("90" on H100/H200); that getter hides the module behind torch ops and has no reverse, so build the spec.
    arch = "%d%d" % (capability or (9, 0))
    gen = getattr(fq, f"gen_fp4_quantization_sm{arch}_module", None)
    if gen is None:
        raise RuntimeError(f"FlashInfer {info['flashinfer_version']} has no gen_fp4_quantization_sm{arch}_module")
    spec = gen()
    info["flashinfer_module"] = f"{spec.name} ({spec.get_library_path()})"
    t = time.perf_counter()
    try:
        module = spec.build_and_load()
    except Exception as e:  # noqa: BLE001 - retried once below when it is the CUDA runtime
        # The module links libcudart of the toolkit that built it (no rpath): where the loader does not find
        # it (torch brings another CUDA's), load it from that toolkit by path and try again.
        if "libcudart" not in str(e):
            raise
        info["preloaded"] = preload_cudart()
        module = spec.build_and_load()
    info["flashinfer_jit_build_and_load_s"] = round(time.perf_counter() - t, 1)
    return flashinfer, module


def preload_cudart():
    from flashinfer.jit.cpp_ext import get_cuda_path

    home = get_cuda_path()
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        libs = sorted(glob.glob(os.path.join(home, sub, "libcudart.so.[0-9]*")), key=len)
        if libs:
            ctypes.CDLL(libs[0], mode=ctypes.RTLD_GLOBAL)
            return libs[0]
    raise RuntimeError(f"no libcudart.so.* under {home}")


# --- timing ---------------------------------------------------------------------------------------------
def make_timer(torch, cuda, reps):
    """fn -> (median, min) microseconds of one call: GPU time with a cold L2 on CUDA, host wall clock on CPU."""
    if not cuda:
        def host_us(fn):
            for _ in range(WARMUP):
                fn()
            samples = []
            for _ in range(reps):
                t = time.perf_counter()
                fn()
                samples.append((time.perf_counter() - t) * 1e6)
            return statistics.median(samples), min(samples)
        return host_us

    flush = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    spin = getattr(torch.cuda, "_sleep", None)  # private but long-lived; without it the flush alone hides the host

    def gpu_us(fn):
        for _ in range(WARMUP):
            fn()
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for i, (start, stop) in enumerate(events):  # no sync between samples: the host stays ahead of the GPU
            if spin is not None:
                spin(SPIN_CYCLES)
            flush.fill_(i & 0xFF)
            start.record()
            fn()
            stop.record()
        torch.cuda.synchronize()
        samples = [start.elapsed_time(stop) * 1e3 for start, stop in events]
        return statistics.median(samples), min(samples)
    return gpu_us


# --- one entry: a shape and a direction ---------------------------------------------------------------
def torch_swizzle(torch, compact):
    """The 128x4 layout by view/permute (zero padding), as engines build it: the reference."""
    rows, cols = compact.shape
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    padded = torch.zeros((rp, cp), dtype=torch.uint8, device=compact.device)
    padded[:rows, :cols] = compact
    return padded.view(rp // 128, 4, 32, cp // 4, 4).permute(0, 3, 2, 1, 4).reshape(-1)


def torch_unswizzle(torch, swizzled, rows, cols):
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    return swizzled.view(rp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4).reshape(rp, cp)[:rows, :cols]


def run_entry(torch, device, mxfp8, fi, fi_module, timer, rows, cols, direction):
    rp, cp = round_up(rows, 128), round_up(cols, 4)
    compact_bytes, swizzled_bytes = rows * cols, rp * cp
    entry = {"direction": direction, "rows": rows, "cols": cols,
             "bytes": compact_bytes + swizzled_bytes,  # read + written
             "ours_us": None, "flashinfer_us": None, "copy_us": None, "bit_exact": None}
    errors = {}

    def attempt(part, fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - one part failing must not lose the others
            errors[part] = error_text(e)
            return None

    gen = torch.Generator(device=device).manual_seed(rows * 1000 + cols)
    if direction == "swizzle":
        src = torch.randint(0, 256, (rows, cols), dtype=torch.uint8, device=device, generator=gen)
        ours_out = torch.empty(swizzled_bytes, dtype=torch.uint8, device=device)
        fi_out = torch.empty(swizzled_bytes, dtype=torch.uint8, device=device)
        reference = torch_swizzle(torch, src)

        def ours():
            mxfp8.swizzle_scales(src, ours_out)

        def theirs():
            fi_module.block_scale_interleave_sm100(src, fi_out)

        def theirs_result():
            return fi_out
    else:
        # Every byte of an aligned swizzled buffer is a real scale; FlashInfer's reverse takes no other.
        src = torch.randint(0, 256, (swizzled_bytes,), dtype=torch.uint8, device=device, generator=gen)
        ours_out = torch.empty((rows, cols), dtype=torch.uint8, device=device)
        fi_out = torch.empty((rp, cp), dtype=torch.uint8, device=device)
        reference = torch_unswizzle(torch, src, rows, cols)
        src_2d = src.view(rp, cp)  # the reverse reads (rows, cols) of the padded matrix from its input's shape

        def ours():
            mxfp8.unswizzle_scales(src, rows, cols, ours_out)

        def theirs():
            if rows % 128 or cols % 4:
                raise ValueError("FlashInfer's reverse takes rows % 128 == 0 and cols % 4 == 0 only")
            fi_module.block_scale_interleave_reverse_sm100(src_2d, fi_out)

        def theirs_result():
            return fi_out[:rows, :cols]

    # Poisoned with different bytes, so an output one side never wrote cannot match the other's.
    ours_out.fill_(0x5A)
    fi_out.fill_(0xA5)
    def checked(fn):  # the call and its completion: an asynchronous CUDA error lands on the side that caused it
        fn()
        if device == "cuda":
            torch.cuda.synchronize()

    if mxfp8 is None:
        errors["ours"] = "mxfp8 did not import (see errors.mxfp8_import)"
    else:
        attempt("ours", lambda: checked(ours))
    if fi_module is None:
        errors["flashinfer"] = "FlashInfer unavailable (see errors.flashinfer_setup)"
    else:
        attempt("flashinfer", lambda: checked(theirs))

    def compare():
        if "ours" not in errors:
            entry["ours_matches_reference"] = bool(torch.equal(ours_out.reshape(-1), reference.reshape(-1)))
        if "flashinfer" not in errors:
            entry["flashinfer_matches_reference"] = bool(torch.equal(theirs_result().reshape(-1), reference.reshape(-1)))
        if "ours" not in errors and "flashinfer" not in errors:
            entry["bit_exact"] = bool(torch.equal(ours_out.reshape(-1), theirs_result().reshape(-1)))

    attempt("compare", compare)
    if direction == "swizzle" and fi is not None and device == "cuda":
        # The public wrapper (torch custom op over the same kernel; it needs a CUDA device to pick its module).
        entry["flashinfer_public_api_bit_exact"] = attempt(
            "flashinfer_public_api", lambda: bool(torch.equal(fi.block_scale_interleave(src).reshape(-1), fi_out)))

    half = (compact_bytes + swizzled_bytes) // 2  # a copy of it reads and writes what the transform does
    copy_src = torch.randint(0, 256, (half,), dtype=torch.uint8, device=device, generator=gen)
    copy_dst = torch.empty_like(copy_src)
    for part, key, fn in (("ours", "ours_us", ours), ("flashinfer", "flashinfer_us", theirs),
                          ("copy", "copy_us", lambda: copy_dst.copy_(copy_src))):
        if part in errors:
            continue
        timed = attempt(part, lambda: timer(fn))
        if timed is not None:
            entry[key], entry[key.replace("_us", "_min_us")] = round(timed[0], 2), round(timed[1], 2)
    if entry["ours_us"] and entry["copy_us"]:
        entry["ours_fraction_of_copy"] = round(entry["copy_us"] / entry["ours_us"], 3)
    if entry["flashinfer_us"] and entry["copy_us"]:
        entry["flashinfer_fraction_of_copy"] = round(entry["copy_us"] / entry["flashinfer_us"], 3)
    if entry["ours_us"] and entry["flashinfer_us"]:
        entry["speedup_vs_flashinfer"] = round(entry["flashinfer_us"] / entry["ours_us"], 2)
    if errors:
        entry["errors"] = errors
    return entry


# --- the run --------------------------------------------------------------------------------------------
def write(path, result):
    if not path:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(result, indent=2) + "\n")
    os.replace(tmp, path)


def parse_shapes(text):
    return [tuple(int(v) for v in s.lower().split("x")) for s in text.split(",") if s.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the JSON here (rewritten after every entry)")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, few reps; CPU when there is no GPU")
    parser.add_argument("--reps", type=int, default=None, help="timed samples per figure (default 100, smoke 5)")
    parser.add_argument("--shapes", help="RxC,RxC,... instead of the default grid")
    parser.add_argument("--flashinfer-tar", default=os.path.join(ROOT, ".carry", "flashinfer.tar.xz"),
                        help="FlashInfer trimmed by flashinfer-trim.sh (default .carry/flashinfer.tar.xz)")
    parser.add_argument("--wheels", default=os.path.join(ROOT, ".carry", "wheels"),
                        help="wheels to unpack when apache-tvm-ffi or a FlashInfer import is missing")
    parser.add_argument("--flashinfer-dir", default="/tmp/mxfp8-flashinfer",
                        help="where FlashInfer is unpacked and JIT-builds (reused by later runs)")
    parser.add_argument("--merge", help="also set the flashinfer_side_by_side key of this JSON file")
    args = parser.parse_args()
    reps = args.reps or (5 if args.smoke else 100)
    shapes = parse_shapes(args.shapes) if args.shapes else (
        SMOKE_SHAPES if args.smoke else [(r, c) for r in ROWS for c in COLS])

    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        raise SystemExit("flashinfer_side_by_side: needs a CUDA GPU (use --smoke for a CPU check)")
    device = "cuda" if cuda else "cpu"
    capability = torch.cuda.get_device_capability() if cuda else None
    result = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name() if cuda else "cpu",
        "flashinfer_version": None,
        "torch_version": torch.__version__,
        "method": ("CUDA events around one call after a spin kernel and a 256 MiB L2 flush write; "
                   f"median of {reps} samples, microseconds" if cuda else
                   f"CPU smoke: host wall clock of each library's host path, median of {reps}"),
        "smoke": args.smoke,
        "sizes": {},
    }
    errors = {}
    try:
        import mxfp8

        result["mxfp8_version"] = getattr(mxfp8, "__version__", None)
    except Exception as e:  # noqa: BLE001 - FlashInfer and the copy are still worth timing
        mxfp8 = None
        errors["mxfp8_import"] = error_text(e)
    fi = fi_module = None
    info = {}
    try:
        fi, fi_module = import_flashinfer(args, capability, info)
    except Exception as e:  # noqa: BLE001
        errors["flashinfer_setup"] = error_text(e)
        print(traceback.format_exc(), file=sys.stderr)
    result.update(info)
    result["flashinfer_version"] = info.get("flashinfer_version")
    timer = None
    try:
        timer = make_timer(torch, cuda, reps)
    except Exception as e:  # noqa: BLE001
        errors["timer"] = error_text(e)
    if errors:
        result["errors"] = errors
    write(args.out, result)

    for rows, cols in shapes:
        for direction in DIRECTIONS:
            key = f"{rows}x{cols}/{direction}"
            try:
                if timer is None:
                    raise RuntimeError("no timer (see errors.timer)")
                entry = run_entry(torch, device, mxfp8, fi, fi_module, timer, rows, cols, direction)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory: the next shape still runs
                entry = {"direction": direction, "rows": rows, "cols": cols, "errors": {"entry": error_text(e)}}
            result["sizes"][key] = entry
            write(args.out, result)
            print(f"{key:>20}: ours {entry.get('ours_us')} us, flashinfer {entry.get('flashinfer_us')} us, "
                  f"copy {entry.get('copy_us')} us, bit_exact {entry.get('bit_exact')}"
                  + (f", errors {entry['errors']}" if entry.get("errors") else ""), flush=True)
            if cuda:
                torch.cuda.empty_cache()

    entries = list(result["sizes"].values())
    failed = [k for k, v in result["sizes"].items() if v.get("errors") or v.get("bit_exact") is not True
              or v.get("ours_matches_reference") is False or v.get("flashinfer_matches_reference") is False
              or v.get("flashinfer_public_api_bit_exact") is False]
    summary = {"entries": len(entries), "bit_exact": sum(v.get("bit_exact") is True for v in entries),
               "failed": failed}
    for direction in DIRECTIONS:
        speedups = [v["speedup_vs_flashinfer"] for v in entries
                    if v.get("direction") == direction and v.get("speedup_vs_flashinfer")]
        if speedups:
            summary[f"{direction}_speedup_vs_flashinfer_median"] = round(statistics.median(speedups), 2)
    result["summary"] = summary
    write(args.out, result)
    if args.merge:
        try:
            with open(args.merge) as f:
                merged = json.load(f)
            merged["flashinfer_side_by_side"] = result
            write(args.merge, merged)
        except Exception as e:  # noqa: BLE001 - the run's own file is written already
            print(f"--merge {args.merge}: {error_text(e)}", file=sys.stderr)
    print(json.dumps({k: result.get(k) for k in ("gpu", "flashinfer_version", "flashinfer_jit_build_and_load_s")}))
    if errors:
        print("setup errors:", json.dumps(errors))
    print("summary:", json.dumps(summary))
    return 1 if (errors or failed) else 0


if __name__ == "__main__":
    sys.exit(main())
