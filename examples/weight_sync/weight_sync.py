"""RL weight sync, the way the frameworks do it, with libmxfp8 doing the export.

A trainer process holds an MXFP8 model in Transformer Engine's layout (FP8 values plus E8M0 scales padded
to 128x4 tiles and swizzled for cuBLAS). After every simulated optimizer step it requantizes its float32
master weights into that layout with mxfp8.quantize (bit-exact with TE), packs the weights into buckets
of a chosen size (mxfp8.iter_buckets: values copied, scales unswizzled straight into place, one launch
per bucket) and hands each bucket to an inference process. The inference
process rebuilds vLLM-style parameters (FP8 weight + uint8 [N, ceil(K/32)] scales) by copying out of the
bucket, re-swizzles the scales for its own GEMM (mxfp8.swizzle_scales), and checks every tensor bit for
bit against a direct compact quantize of the same master weights.

Transports:
  ipc  one GPU, two processes, CUDA IPC through torch.multiprocessing (what verl and SGLang do)
  shm  CPU only: the bucket lives in multiprocessing shared memory; needs NumPy, not torch

  python examples/weight_sync/weight_sync.py                  # ipc when torch sees a GPU, else shm
  python examples/weight_sync/weight_sync.py --transport shm --steps 2
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
        self.scale_inv = {}
        self.reference = {}

    def step(self):
        for w in self.master.values():  # an Adam-like step: a small signed update everywhere
            w -= 1e-3 * np.sign(self.rng.standard_normal(w.shape).astype(np.float32)) * np.abs(w).mean()

    def quantize(self):
        """Into TE's layout (swizzled scales), bit-exact with TE, the values written in place. The compact
        quantize of the same weights is what the receiver must rebuild."""
        for name, w in self.master.items():
            te = mxfp8.quantize(w, scales="swizzled", values_dtype="uint8")
            self.values[name][...] = np.from_dlpack(te.rowwise_data)
            self.scale_inv[name] = np.from_dlpack(te.rowwise_scale_inv)
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
        self.scale_inv = {}
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
            self.scale_inv[name] = te.rowwise_scale_inv
            compact = mxfp8.quantize(w)
            self.reference[name] = (compact.rowwise_data.view(uint8), compact.rowwise_scale_inv)


def specs(model):
    return {n: {"data": model.values[n], "scale_inv": model.scale_inv[n], "swizzled": True} for n in model.values}


# ---------------------------------------------------------------------------------------- inference ---
def receive_params(parts, params, xp):
    """What an inference engine's load_weights does: copy each part into its own parameters; then
    re-swizzle the scales for its GEMM."""
    gemm_scales = {}
    for name, (values, scales) in parts.items():
        weight, weight_scale = params[name]
        if xp is np:
            weight[...] = values
            weight_scale[...] = scales
        else:
            weight.copy_(values)
            weight_scale.copy_(scales)
        gemm_scales[name] = mxfp8.swizzle_scales(weight_scale)
    return gemm_scales


def verify(params, gemm_scales, reference, names, xp):
    for name in names:
        weight, weight_scale = params[name]
        values, s = reference[name]
        same = (np.array_equal(weight, values) and np.array_equal(weight_scale, s) and
                np.array_equal(gemm_scales[name], swizzle_reference(s, np).reshape(-1))) if xp is np else (
            xp.equal(weight.view(xp.uint8), values) and xp.equal(weight_scale, s) and
            xp.equal(gemm_scales[name], swizzle_reference(s, xp).reshape(-1)))
        if not same:
            return f"{name} differs"
    return None


def shm_inference(shapes, inbox, outbox):
    from multiprocessing import shared_memory

    params = {n: (np.empty(s, np.uint8), np.empty((s[0], -(-s[1] // BLOCK)), np.uint8)) for n, s in shapes.items()}
    while (message := inbox.get()) is not None:
        shm_name, manifest, reference = message
        shm = shared_memory.SharedMemory(name=shm_name)
        try:
            bucket = np.ndarray((manifest[-1]["scales_offset"] + manifest[-1]["scales_bytes"],), np.uint8, shm.buf)
            gemm = receive_params(mxfp8.unpack_bucket(bucket, manifest), params, np)
            del bucket
        finally:
            shm.close()
        outbox.put(verify(params, gemm, reference, [m["name"] for m in manifest], np))


def ipc_inference(shapes, inbox, outbox):
    import torch

    params = {n: (torch.empty(s, dtype=torch.float8_e4m3fn, device="cuda"),
                  torch.empty((s[0], -(-s[1] // BLOCK)), dtype=torch.uint8, device="cuda")) for n, s in shapes.items()}
    while (message := inbox.get()) is not None:
        bucket, manifest, reference = message  # CUDA tensors: torch maps the trainer's memory (CUDA IPC)
        gemm = receive_params(mxfp8.unpack_bucket(bucket, manifest), params, torch)
        torch.cuda.synchronize()
        error = verify(params, gemm, reference, [m["name"] for m in manifest], torch)
        del bucket, message
        outbox.put(error)


# ------------------------------------------------------------------------------------------- driver ---
def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transport", choices=["auto", "ipc", "shm"], default="auto")
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

    shapes = model_shapes(args.layers, args.hidden)
    context = multiprocessing.get_context("spawn")
    if transport == "ipc":
        import torch.multiprocessing as tmp

        context = tmp.get_context("spawn")
    inbox, outbox = context.Queue(), context.Queue()
    target = ipc_inference if transport == "ipc" else shm_inference
    receiver = context.Process(target=target, args=(shapes, inbox, outbox), daemon=True)
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
    print(f"weight sync over {transport}: {len(shapes)} MXFP8 weights, {total / 1e6:.1f} M values, "
          f"buckets of {args.bucket_mb} MB", flush=True)
    failures = 0
    try:
        for step in range(1, args.steps + 1):
            model.step()
            model.quantize()
            start, sent, buckets = time.perf_counter(), 0, 0
            for bucket, manifest in mxfp8.iter_buckets(specs(model), bucket_bytes=bucket_bytes, buffer=shared_array):
                reference = {m["name"]: model.reference[m["name"]] for m in manifest}
                if transport == "ipc":
                    model.torch.cuda.current_stream().synchronize()  # the bucket is complete before it is shared
                    inbox.put((bucket, manifest, reference))
                else:  # the bucket already is the shared memory the receiver maps
                    inbox.put((shared.name, manifest, reference))
                error = outbox.get()  # the receiver is done with the bucket before it is refilled
                failures += error is not None
                if error:
                    print(f"  step {step}: MISMATCH: {error}", flush=True)
                sent += int(np.prod(bucket.shape))
                buckets += 1
            elapsed = time.perf_counter() - start
            print(f"  step {step}: {buckets} buckets, {sent / 1e6:.1f} MB in {elapsed * 1e3:.1f} ms "
                  f"({sent / elapsed / 1e9:.2f} GB/s), every tensor bit-exact: {failures == 0}", flush=True)
    finally:
        inbox.put(None)
        receiver.join(timeout=60)
        if shared is not None:
            del shared_array
            shared.close()
            shared.unlink()
    if failures or receiver.exitcode != 0:
        raise SystemExit(f"weight sync failed: {failures} mismatching buckets, receiver exit {receiver.exitcode}")
    print("weight sync OK")


if __name__ == "__main__":
    main()
