"""RL weight sync, the way the frameworks do it, with libmxfp8 doing the export and the import.

A trainer process holds an MXFP8 model in Transformer Engine's layout (FP8 values plus E8M0 scales padded
to 128x4 tiles and swizzled for cuBLAS), at fixed addresses. After every simulated optimizer step it
requantizes its float32 master weights into that storage with mxfp8.quantize (bit-exact with TE). The
inference process owns its parameters (FP8 weight + scales in the layout its GEMM reads: compact
[N, ceil(K/32)] for vLLM / SGLang's loaders, or cuBLAS 128x4 for a CUTLASS MXFP8 linear) and updates them
in place, then checks every tensor bit for bit against a direct quantize of the same master weights
(outside the timed part).

Paths:
  direct    (ipc only) the receiver maps the trainer's storage over CUDA IPC once, prepares
            mxfp8.prepare_import_tensors, and each step moves every tensor from TE's storage into its
            parameters in one launch, the layout transform fused: no bucket, no extra memory.
  bucketed  the trainer packs buckets (mxfp8.iter_buckets: values copied, scales unswizzled in place,
            one launch per bucket); the receiver writes each into its parameters with mxfp8.import_bucket
            (one launch per bucket). For transports that need one buffer (NCCL, shared memory, network).

Transports:
  ipc  one GPU, two processes, CUDA IPC through torch.multiprocessing (what verl and SGLang do)
  shm  CPU only: the bucket lives in multiprocessing shared memory; needs NumPy, not torch

  python examples/weight_sync/weight_sync.py                  # ipc + direct when torch sees a GPU, else shm
  python examples/weight_sync/weight_sync.py --transport shm --steps 2
  python examples/weight_sync/weight_sync.py --path bucketed --layout compact
"""
import argparse
import multiprocessing
import time

import numpy as np

import mxfp8

BLOCK = 32  # values per scale


def model_shapes(layers, hidden):
    """A small Llama-like stack: qkv, o, gate_up, down per layer (K not always a multiple of 128)."""
    shapes = {}
    for i in range(layers):
        shapes[f"layers.{i}.qkv_proj.weight"] = (hidden + hidden // 2, hidden)
        shapes[f"layers.{i}.o_proj.weight"] = (hidden, hidden)
        shapes[f"layers.{i}.gate_up_proj.weight"] = (2 * 3 * hidden, hidden)
        shapes[f"layers.{i}.down_proj.weight"] = (hidden, 3 * hidden + 48)  # a partial last block
    return shapes


def swizzle_reference(s, xp):
    """TE's optimize_for_gemm layout of an R x C scale matrix, from its permute form (padding zero)."""
    r, c = s.shape
    rp, cp = -(-r // 128) * 128, -(-c // 4) * 4
    padded = xp.zeros((rp, cp), dtype=s.dtype) if xp is np else xp.zeros((rp, cp), dtype=s.dtype, device=s.device)
    padded[:r, :c] = s
    tiles = padded.reshape(rp // 128, 4, 32, cp // 4, 4)
    tiles = tiles.transpose(0, 3, 2, 1, 4) if xp is np else tiles.permute(0, 3, 2, 1, 4)
    return tiles.reshape(rp, cp)


# ------------------------------------------------------------------------------------------ trainer ---
class NumpyModel:
    """Master weights in float32; MXFP8 storage (values + swizzled scales) kept in place across steps."""

    def __init__(self, shapes, seed=0):
        self.rng = np.random.default_rng(seed)
        self.master = {n: self.rng.standard_normal(s).astype(np.float32) * 0.02 for n, s in shapes.items()}
        self.values = {n: np.empty(s, np.uint8) for n, s in shapes.items()}
        self.scale_inv = {n: np.empty(mxfp8.scales_shape(s, "cutlass_128x4"), np.uint8) for n, s in shapes.items()}
        self.reference = {}

    def step(self):
        for w in self.master.values():  # an Adam-like step: a small signed update everywhere
            w -= 1e-3 * np.sign(self.rng.standard_normal(w.shape).astype(np.float32)) * np.abs(w).mean()

    def quantize(self):
        """Into TE's layout (swizzled scales), bit-exact with TE, written in place. The compact quantize of
        the same weights is what the receiver must rebuild."""
        for name, w in self.master.items():
            te = mxfp8.quantize(w, scales="swizzled", values_dtype="uint8")
            self.values[name][...] = np.from_dlpack(te.rowwise_data)
            self.scale_inv[name][...] = np.from_dlpack(te.rowwise_scale_inv).reshape(-1)
            compact = mxfp8.quantize(w, values_dtype="uint8")
            self.reference[name] = (np.from_dlpack(compact.rowwise_data), np.from_dlpack(compact.rowwise_scale_inv))


class TorchModel:
    """The same on the GPU."""

    def __init__(self, shapes, seed=0):
        import torch

        self.torch = torch
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.master = {n: torch.randn(s, device="cuda", generator=self.gen) * 0.02 for n, s in shapes.items()}
        self.values = {n: torch.empty(s, dtype=torch.uint8, device="cuda") for n, s in shapes.items()}
        self.scale_inv = {n: torch.empty(mxfp8.scales_shape(s, "cutlass_128x4"), dtype=torch.uint8, device="cuda")
                          for n, s in shapes.items()}
        self.reference = {}

    def step(self):
        torch = self.torch
        for w in self.master.values():
            w -= 1e-3 * torch.sign(torch.randn(w.shape, device="cuda", generator=self.gen)) * w.abs().mean()

    def quantize(self):
        uint8 = self.torch.uint8
        for name, w in self.master.items():
            te = mxfp8.quantize(w, scales="swizzled")
            self.values[name].copy_(te.rowwise_data.view(uint8))
            self.scale_inv[name].copy_(te.rowwise_scale_inv.view(uint8).reshape(-1))
            compact = mxfp8.quantize(w)
            self.reference[name] = (compact.rowwise_data.view(uint8), compact.rowwise_scale_inv)


def specs(model):
    return {n: {"data": model.values[n], "scale_inv": model.scale_inv[n], "swizzled": True} for n in model.values}


# ---------------------------------------------------------------------------------------- inference ---
def make_params(shapes, layout, xp):
    """The engine's own parameters: FP8 weight and scales in the layout its GEMM reads (fixed addresses,
    updated in place at every refit)."""
    if xp is np:
        return {n: (np.empty(s, np.uint8), np.empty(mxfp8.scales_shape(s, layout), np.uint8), layout)
                for n, s in shapes.items()}
    return {n: (xp.empty(s, dtype=xp.float8_e4m3fn, device="cuda"),
                xp.empty(mxfp8.scales_shape(s, layout), dtype=xp.uint8, device="cuda"), layout)
            for n, s in shapes.items()}


def verify(params, reference, names, xp):
    """Every parameter equals a direct quantize of the master weights, in the parameter's layout."""
    for name in names:
        weight, weight_scale, layout = params[name]
        values, s = reference[name]
        if layout == "compact":
            want = s
        else:
            want = swizzle_reference(s, xp).reshape(-1)
        if xp is np:
            same = np.array_equal(weight, values) and np.array_equal(weight_scale.reshape(want.shape), want)
        else:
            same = xp.equal(weight.view(xp.uint8), values) and xp.equal(weight_scale.reshape(want.shape), want)
        if not same:
            return f"{name} differs"
    return None


def shm_inference(shapes, layout, inbox, outbox):
    from multiprocessing import shared_memory

    params = make_params(shapes, layout, np)
    while (message := inbox.get()) is not None:
        shm_name, manifest, reference = message
        shm = shared_memory.SharedMemory(name=shm_name)
        try:
            bucket = np.ndarray((manifest[-1]["scales_offset"] + manifest[-1]["scales_bytes"],), np.uint8, shm.buf)
            mxfp8.import_bucket(bucket, manifest, params)  # every tensor into place, one pass
            del bucket
        finally:
            shm.close()
        outbox.put("imported")  # the bucket may be refilled; the check below is not timed
        outbox.put(verify(params, reference, [m["name"] for m in manifest], np))


def ipc_inference(shapes, layout, inbox, outbox):
    import torch

    params = make_params(shapes, layout, torch)
    plan = None
    while (message := inbox.get()) is not None:
        if message[0] == "storage":  # the direct path: the trainer's storage, mapped once over CUDA IPC
            storage = message[1]
            plan = mxfp8.prepare_import_tensors(storage, params)
            outbox.put("prepared")
            continue
        if message[0] == "step":  # direct: one launch moves every tensor from TE's storage into params
            reference = message[1]
            plan.run()
            names = list(reference)
        else:  # a bucket (its CUDA memory mapped over IPC), one launch into params
            _, bucket, manifest, reference = message
            mxfp8.import_bucket(bucket, manifest, params)
            names = [m["name"] for m in manifest]
        torch.cuda.synchronize()
        outbox.put("imported")
        error = verify(params, reference, names, torch)
        del message
        outbox.put(error)


# ------------------------------------------------------------------------------------------- driver ---
def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", choices=["auto", "ipc", "shm"], default="auto")
    parser.add_argument("--path", choices=["auto", "direct", "bucketed"], default="auto",
                        help="direct (ipc only; the default there) or bucketed (the only path over shm)")
    parser.add_argument("--layout", choices=["compact", "cutlass_128x4"], default="cutlass_128x4",
                        help="the layout of the engine's scale parameters")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--bucket-mb", type=float, default=16)
    args = parser.parse_args()
    transport = args.transport
    if transport == "auto":
        try:
            import torch

            transport = "ipc" if torch.cuda.is_available() and mxfp8._mxfp8.with_cuda else "shm"
        except ImportError:
            transport = "shm"
    path = args.path if args.path != "auto" else ("direct" if transport == "ipc" else "bucketed")
    if path == "direct" and transport != "ipc":
        raise SystemExit("--path direct needs --transport ipc (the receiver maps the trainer's GPU memory)")

    shapes = model_shapes(args.layers, args.hidden)
    context = multiprocessing.get_context("spawn")
    if transport == "ipc":
        import torch.multiprocessing as tmp

        context = tmp.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    target = ipc_inference if transport == "ipc" else shm_inference
    receiver = context.Process(target=target, args=(shapes, args.layout, inbox, outbox), daemon=True)
    receiver.start()
    model = TorchModel(shapes) if transport == "ipc" else NumpyModel(shapes)
    # Every bucket holds at least the largest tensor (values + scales, aligned).
    bucket_bytes = max(int(args.bucket_mb * 2**20), max(int(np.prod(s)) * 33 // 32 + 1024 for s in shapes.values()))
    shared, shared_array = None, None
    if transport == "shm":  # the trainer exports straight into memory the receiver maps: no extra copy
        from multiprocessing import shared_memory

        shared = shared_memory.SharedMemory(create=True, size=bucket_bytes)
        shared_array = np.ndarray((bucket_bytes,), np.uint8, shared.buf)
    total = sum(np.prod(s) for s in shapes.values())
    print(f"weight sync over {transport}, {path} path, engine scales {args.layout}: {len(shapes)} MXFP8 weights, "
          f"{total / 1e6:.1f} M values" + (f", buckets of {args.bucket_mb} MB" if path == "bucketed" else ""), flush=True)
    if path == "direct":  # fixed storage: shared once, imported at every step
        inbox.put(("storage", specs(model)))
        assert outbox.get() == "prepared"
    failures = 0
    try:
        for step in range(1, args.steps + 1):
            model.step()
            model.quantize()
            # Timed: the export (bucketed), the hand-over and the receiver's import, not the check.
            elapsed, sent, buckets, errors = 0.0, 0, 0, []
            if path == "direct":
                model.torch.cuda.current_stream().synchronize()  # the storage is complete before it is read
                start = time.perf_counter()
                inbox.put(("step", dict(model.reference)))
                assert outbox.get() == "imported"
                elapsed = time.perf_counter() - start
                errors.append(outbox.get())
                sent, buckets = sum(int(v.numel()) + int(s.numel()) for v, s in
                                    zip(model.values.values(), model.scale_inv.values())), 0
            else:
                start = time.perf_counter()
                for bucket, manifest in mxfp8.iter_buckets(specs(model), bucket_bytes=bucket_bytes, buffer=shared_array):
                    reference = {m["name"]: model.reference[m["name"]] for m in manifest}
                    if transport == "ipc":
                        model.torch.cuda.current_stream().synchronize()  # the bucket is complete before it is shared
                        inbox.put(("bucket", bucket, manifest, reference))
                    else:  # the bucket already is the shared memory the receiver maps
                        inbox.put((shared.name, manifest, reference))
                    assert outbox.get() == "imported"  # the receiver is done with the bucket before it is refilled
                    elapsed += time.perf_counter() - start
                    errors.append(outbox.get())  # the check, not timed
                    start = time.perf_counter()
                    sent += int(np.prod(bucket.shape))
                    buckets += 1
            for error in errors:
                failures += error is not None
                if error:
                    print(f"  step {step}: MISMATCH: {error}", flush=True)
            print(f"  step {step}: " + (f"{buckets} buckets, " if path == "bucketed" else "") +
                  f"{sent / 1e6:.1f} MB in {elapsed * 1e3:.1f} ms ({sent / elapsed / 1e9:.2f} GB/s), "
                  f"every tensor bit-exact: {failures == 0}", flush=True)
    finally:
        inbox.put(None)
        receiver.join(timeout=60)
        if shared is not None:
            del shared_array
            shared.close()
            shared.unlink()
    if failures or receiver.exitcode != 0:
        raise SystemExit(f"weight sync failed: {failures} mismatching tensors or buckets, receiver exit {receiver.exitcode}")
    print("weight sync OK")


if __name__ == "__main__":
    main()
