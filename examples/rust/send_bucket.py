"""The trainer side of examples/weight_sync/weight_sync.py --transport shm, with a Rust receiver.

It runs the weight-sync example's own trainer (its NumpyModel: float32 master weights requantized after
every step into Transformer Engine's layout, values plus GEMM-swizzled scales) and packs the weights with
mxfp8.iter_buckets straight into one POSIX shared-memory segment, exactly as the example does. For each
bucket it hands the Rust receiver (examples/rust/receive_bucket.rs) what the example's Python receiver gets
through its queue, as files a process in any language can read:

  - the shared-memory name (/dev/shm/<name> on Linux), on the command line;
  - the manifest, one tensor per line:
        name fp8_dtype values_offset values_bytes scales_offset scales_bytes shape scales_shape
    (shapes as comma-separated integers, e.g. "384,256 384,8");
  - each tensor's float32 master weights (<name>.f32, little-endian, row-major), which the receiver
    quantizes itself to check every received tensor bit for bit.

Run (from bindings/rust, with the library built and mxfp8 installed for Python):
  cargo build --offline --example receive_bucket
  python3 ../../examples/rust/send_bucket.py target/debug/examples/receive_bucket
"""
import argparse
import os
import subprocess
import sys
import tempfile
from multiprocessing import shared_memory

import numpy as np

import mxfp8

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "weight_sync"))
from weight_sync import NumpyModel, model_shapes, specs  # noqa: E402  (the example's own trainer)


def write_manifest(path, manifest):
    with open(path, "w") as f:
        for m in manifest:
            shape, scales_shape = (",".join(str(int(d)) for d in s) for s in (m["shape"], m["scales_shape"]))
            f.write(f'{m["name"]} {m["fp8_dtype"]} {m["values_offset"]} {m["values_bytes"]} '
                    f'{m["scales_offset"]} {m["scales_bytes"]} {shape} {scales_shape}\n')


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("receiver", help="the receive_bucket program built by cargo")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--bucket-mb", type=float, default=0.5)
    args = parser.parse_args()

    shapes = model_shapes(args.layers, args.hidden)
    model = NumpyModel(shapes)
    bucket_bytes = max(int(args.bucket_mb * 2**20), max(int(np.prod(s)) * 33 // 32 + 1024 for s in shapes.values()))
    shared = shared_memory.SharedMemory(create=True, size=bucket_bytes)
    shared_array = np.ndarray((bucket_bytes,), np.uint8, shared.buf)
    print(f"weight sync to a Rust receiver over shared memory: {len(shapes)} weights, buckets of {bucket_bytes} bytes",
          flush=True)
    try:
        with tempfile.TemporaryDirectory() as folder:
            for step in range(1, args.steps + 1):
                model.step()
                model.quantize()
                for name, w in model.master.items():
                    np.ascontiguousarray(w, dtype="<f4").tofile(os.path.join(folder, name + ".f32"))
                buckets = 0
                for _, manifest in mxfp8.iter_buckets(specs(model), bucket_bytes=bucket_bytes, buffer=shared_array):
                    write_manifest(os.path.join(folder, "manifest.txt"), manifest)
                    # The receiver maps the segment and is done with it before the next bucket is written.
                    subprocess.run([args.receiver, shared.name, os.path.join(folder, "manifest.txt"), folder], check=True)
                    buckets += 1
                print(f"  step {step}: {buckets} buckets received and checked in Rust", flush=True)
    finally:
        del shared_array
        shared.close()
        shared.unlink()
    print("weight sync to Rust OK")


if __name__ == "__main__":
    main()
