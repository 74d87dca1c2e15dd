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

NVFP4 (--format nvfp4): the trainer keeps NVFP4 storage as TE does (packed E2M1 values, E4M3
block scales swizzled for cuBLAS, a float32 amax per weight), requantized with mxfp8.nvfp4_quantize
(bit-exact with TE); the buckets carry the packed values, compact E4M3 scales and the amax (the direct path
reads them where they are), and the receiver writes vLLM ModelOpt's parameters: weight [N, K/2],
weight_scale (compact [N, ceil(K/16)] or 128x4) and weight_scale_2 = amax / (6 * 448), checked bit for bit.

Resharding (--tp N, bucketed): the trainer holds whole weights and sends whole buckets; N receiver
processes (tensor-parallel ranks) each map every bucket and import only their own shard into parameters of
the shard's size (mxfp8.import_bucket(..., shards=)): column-parallel weights by rows (the fused QKV and
gate-up weights by several row pieces, a rank's Q, K and V heads), row-parallel ones by K columns. Each
rank checks its parameters bit for bit against the crop of a direct compact quantize. NVFP4 shards the
same way (its blocks of 16 along K), each rank's weight_scale_2 being the whole tensor's.

Transports:
  ipc  one GPU, two processes, CUDA IPC through torch.multiprocessing (what verl and SGLang do)
  shm  CPU only: the bucket lives in multiprocessing shared memory; needs NumPy, not torch

  python examples/weight_sync/weight_sync.py                  # ipc + direct when torch sees a GPU, else shm
  python examples/weight_sync/weight_sync.py --transport shm --steps 2
  python examples/weight_sync/weight_sync.py --path bucketed --layout compact
  python examples/weight_sync/weight_sync.py --tp 2               # two receivers, each its TP-2 shard
  python examples/weight_sync/weight_sync.py --format nvfp4 --transport shm --steps 2
  python examples/weight_sync/weight_sync.py --format nvfp4 --tp 2 --transport shm
"""
import argparse
import multiprocessing
import queue
import time

import numpy as np

import mxfp8

BLOCK = 32  # values per scale
NVFP4_BLOCK = 16  # values per E4M3 block scale
NVFP4_DECODE_DIVISOR = np.float32(6 * 448)  # weight_scale_2 = amax / (6 * E4M3_MAX)


def nvfp4_scales_shape(shape, layout):
    """The shape of an NVFP4 weight_scale parameter: compact (N, ceil(K/16)), or the 128x4 layout flat."""
    n, c = shape[0], -(-shape[1] // NVFP4_BLOCK)
    return (n, c) if layout == "compact" else (-(-n // 128) * 128 * (-(-c // 4) * 4),)


def model_shapes(layers, hidden):
    """A small Llama-like stack: qkv, o, gate_up, down per layer (K not always a multiple of 128)."""
    shapes = {}
    for i in range(layers):
        shapes[f"layers.{i}.qkv_proj.weight"] = (hidden + hidden // 2, hidden)
        shapes[f"layers.{i}.o_proj.weight"] = (hidden, hidden)
        shapes[f"layers.{i}.gate_up_proj.weight"] = (2 * 3 * hidden, hidden)
        shapes[f"layers.{i}.down_proj.weight"] = (hidden, 3 * hidden + 48)  # a partial last block
    return shapes


def tp_shards(shapes, tp, rank):
    """Rank `rank`'s shard of every weight under tensor parallelism of `tp`, in export_components'
    rows= / cols= terms. Column-parallel (qkv, gate_up: a shard of N) take rows: the fused QKV weight its
    Q heads, then its K and V heads; gate_up its gate rows, then its up rows. Row-parallel (o, down: a
    shard of K) take K columns, split at a multiple of 32 (the scale blocks run along K: MXFP8's 32 values, NVFP4's 16)."""
    shards = {}
    for name, (n, k) in shapes.items():
        if name.endswith("qkv_proj.weight"):
            q, kv = 2 * n // 3, n // 6  # (hidden + hidden // 2) rows: Q hidden, K and V hidden // 4 each
            pieces = [(rank * q // tp, (rank + 1) * q // tp)]
            pieces += [(q + j * kv + rank * kv // tp, q + j * kv + (rank + 1) * kv // tp) for j in range(2)]
            shards[name] = {"rows": pieces}
        elif name.endswith("gate_up_proj.weight"):
            half = n // 2
            shards[name] = {"rows": [(j * half + rank * half // tp, j * half + (rank + 1) * half // tp) for j in range(2)]}
        else:  # o_proj, down_proj: row-parallel
            step = -(-k // tp // BLOCK) * BLOCK
            shards[name] = {"cols": (min(rank * step, k), min((rank + 1) * step, k))}
    return shards


def shard_rows(shard, n):
    """The row indices of `shard` of a weight of n rows, in order."""
    rows = shard.get("rows", (0, n))
    pieces = [rows] if isinstance(rows, tuple) else rows
    return [r for a, b in pieces for r in range(a, b)]


def shard_shape(shape, shard):
    k0, k1 = shard.get("cols", (0, shape[1]))
    return (len(shard_rows(shard, shape[0])), k1 - k0)


def crop_reference(reference, shapes, shards, xp):
    """The crop of each compact reference that a rank's shard holds: the check of the resharded import,
    computed here from the direct quantize, not by the library. MXFP8 (values, scales): one byte per value,
    a scale per 32; NVFP4 (values, scales, weight_scale_2): two values per byte, a scale per 16, and the
    per-tensor weight_scale_2 whole."""
    out = {}
    for name, (values, scales, *scale_2) in reference.items():
        shard = shards[name]
        rows = shard_rows(shard, shapes[name][0])
        k0, k1 = shard.get("cols", (0, shapes[name][1]))
        index = np.array(rows) if xp is np else xp.tensor(rows, device=values.device)
        if scale_2:  # NVFP4
            out[name] = (values[index][:, k0 // 2:k1 // 2], scales[index][:, k0 // NVFP4_BLOCK:-(-k1 // NVFP4_BLOCK)],
                         scale_2[0])
        else:
            out[name] = (values[index][:, k0:k1], scales[index][:, k0 // BLOCK:-(-k1 // BLOCK)])
    return out


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
    """Master weights in float32; MXFP8 storage (values + swizzled scales) kept in place across steps, or
    NVFP4 storage (packed values, swizzled E4M3 scales, amax) with fmt "nvfp4"."""

    def __init__(self, shapes, seed=0, fmt="mxfp8"):
        self.rng = np.random.default_rng(seed)
        self.fmt = fmt
        self.master = {n: self.rng.standard_normal(s).astype(np.float32) * 0.02 for n, s in shapes.items()}
        if fmt == "nvfp4":
            self.values = {n: np.empty((s[0], s[1] // 2), np.uint8) for n, s in shapes.items()}
            self.scale_inv = {n: np.empty(nvfp4_scales_shape(s, "cutlass_128x4"), np.uint8) for n, s in shapes.items()}
            self.amax = {n: np.empty(1, np.float32) for n in shapes}
        else:
            self.values = {n: np.empty(s, np.uint8) for n, s in shapes.items()}
            self.scale_inv = {n: np.empty(mxfp8.scales_shape(s, "cutlass_128x4"), np.uint8) for n, s in shapes.items()}
        self.reference = {}

    def step(self):
        for w in self.master.values():  # an Adam-like step: a small signed update everywhere
            w -= 1e-3 * np.sign(self.rng.standard_normal(w.shape).astype(np.float32)) * np.abs(w).mean()

    def quantize(self):
        """Into TE's layout (swizzled scales), bit-exact with TE, written in place. The compact quantize of
        the same weights is what the receiver must rebuild."""
        if self.fmt == "nvfp4":
            for name, w in self.master.items():
                te = mxfp8.nvfp4_quantize(w, scales="swizzled")
                self.values[name][...] = te.values
                self.scale_inv[name][...] = te.scales.reshape(-1)
                self.amax[name][...] = te.amax
                compact = mxfp8.nvfp4_quantize(w)
                self.reference[name] = (compact.values, compact.scales, compact.amax / NVFP4_DECODE_DIVISOR)
            return
        for name, w in self.master.items():
            te = mxfp8.quantize(w, scales="swizzled", values_dtype="uint8")
            self.values[name][...] = np.from_dlpack(te.rowwise_data)
            self.scale_inv[name][...] = np.from_dlpack(te.rowwise_scale_inv).reshape(-1)
            compact = mxfp8.quantize(w, values_dtype="uint8")
            self.reference[name] = (np.from_dlpack(compact.rowwise_data), np.from_dlpack(compact.rowwise_scale_inv))


class TorchModel:
    """The same on the GPU."""

    def __init__(self, shapes, seed=0, fmt="mxfp8"):
        import torch

        self.torch = torch
        self.fmt = fmt
        self.gen = torch.Generator(device="cuda").manual_seed(seed)
        self.master = {n: torch.randn(s, device="cuda", generator=self.gen) * 0.02 for n, s in shapes.items()}
        if fmt == "nvfp4":
            self.values = {n: torch.empty((s[0], s[1] // 2), dtype=torch.uint8, device="cuda") for n, s in shapes.items()}
            self.scale_inv = {n: torch.empty(nvfp4_scales_shape(s, "cutlass_128x4"), dtype=torch.uint8, device="cuda")
                              for n, s in shapes.items()}
            self.amax = {n: torch.empty(1, dtype=torch.float32, device="cuda") for n in shapes}
        else:
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
        if self.fmt == "nvfp4":
            divisor = self.torch.tensor(float(NVFP4_DECODE_DIVISOR), dtype=self.torch.float32, device="cuda")
            for name, w in self.master.items():
                te = mxfp8.nvfp4_quantize(w, scales="swizzled")
                self.values[name].copy_(te.values)
                self.scale_inv[name].copy_(te.scales.reshape(-1))
                self.amax[name].copy_(te.amax)
                compact = mxfp8.nvfp4_quantize(w)
                self.reference[name] = (compact.values, compact.scales, compact.amax / divisor)
            return
        for name, w in self.master.items():
            te = mxfp8.quantize(w, scales="swizzled")
            self.values[name].copy_(te.rowwise_data.view(uint8))
            self.scale_inv[name].copy_(te.rowwise_scale_inv.view(uint8).reshape(-1))
            compact = mxfp8.quantize(w)
            self.reference[name] = (compact.rowwise_data.view(uint8), compact.rowwise_scale_inv)


def specs(model):
    if model.fmt == "nvfp4":  # TE's NVFP4 storage: a new kind of bucket entry, with its amax
        return {n: {"format": "nvfp4", "data": model.values[n], "scale_inv": model.scale_inv[n], "amax": model.amax[n],
                    "swizzled": True, "shape": tuple(model.master[n].shape)} for n in model.values}
    return {n: {"data": model.values[n], "scale_inv": model.scale_inv[n], "swizzled": True} for n in model.values}


# ---------------------------------------------------------------------------------------- inference ---
def make_params(shapes, layout, xp, fmt="mxfp8"):
    """The engine's own parameters: FP8 weight and scales in the layout its GEMM reads (fixed addresses,
    updated in place at every refit). NVFP4: vLLM ModelOpt's weight [N, K/2] (uint8), weight_scale
    (E4M3 bytes) and weight_scale_2 (float32)."""
    if fmt == "nvfp4":
        if xp is np:
            return {n: (np.empty((s[0], s[1] // 2), np.uint8), np.empty(nvfp4_scales_shape(s, layout), np.uint8),
                        np.empty(1, np.float32), layout) for n, s in shapes.items()}
        return {n: (xp.empty((s[0], s[1] // 2), dtype=xp.uint8, device="cuda"),
                    xp.empty(nvfp4_scales_shape(s, layout), dtype=xp.float8_e4m3fn, device="cuda"),
                    xp.empty(1, dtype=xp.float32, device="cuda"), layout) for n, s in shapes.items()}
    if xp is np:
        return {n: (np.empty(s, np.uint8), np.empty(mxfp8.scales_shape(s, layout), np.uint8), layout)
                for n, s in shapes.items()}
    return {n: (xp.empty(s, dtype=xp.float8_e4m3fn, device="cuda"),
                xp.empty(mxfp8.scales_shape(s, layout), dtype=xp.uint8, device="cuda"), layout)
            for n, s in shapes.items()}


def verify_nvfp4(params, reference, names, xp):
    """weight, weight_scale (in its layout) and weight_scale_2 equal a direct compact quantize of the master
    weights and its amax / (6 * 448)."""
    for name in names:
        weight, weight_scale, weight_scale_2, layout = params[name]
        values, s, scale_2 = reference[name]
        want = s if layout == "compact" else swizzle_reference(s, xp).reshape(-1)
        if xp is np:
            same = (np.array_equal(weight, values) and np.array_equal(weight_scale.reshape(want.shape), want) and
                    np.array_equal(weight_scale_2.view(np.uint32), scale_2.view(np.uint32)))
        else:
            same = (xp.equal(weight, values) and xp.equal(weight_scale.view(xp.uint8).reshape(want.shape), want) and
                    xp.equal(weight_scale_2.view(xp.int32), scale_2.view(xp.int32)))
        if not same:
            return f"{name} differs"
    return None


def verify(params, reference, names, xp):
    """Every parameter equals a direct quantize of the master weights, in the parameter's layout."""
    if len(next(iter(params.values()))) == 4:
        return verify_nvfp4(params, reference, names, xp)
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


def rank_view(shapes, tp, rank):
    """What one receiver holds: its shards (None without tensor parallelism) and its parameters' shapes."""
    if tp == 1:
        return None, shapes
    shards = tp_shards(shapes, tp, rank)
    return shards, {n: shard_shape(s, shards[n]) for n, s in shapes.items()}


def bucket_end(manifest):
    """The bucket's size: the end of its last part (an NVFP4 entry ends with its amax)."""
    return max(max(e["scales_offset"] + e["scales_bytes"], e.get("amax_offset", 0) + e.get("amax_bytes", 0))
               for e in manifest)


def shm_inference(shapes, layout, inbox, outbox, tp=1, rank=0, fmt="mxfp8"):
    from multiprocessing import shared_memory

    shards, own = rank_view(shapes, tp, rank)
    params = make_params(own, layout, np, fmt)
    outbox.put("ready")
    while (message := inbox.get()) is not None:
        shm_name, manifest, reference = message
        shm = shared_memory.SharedMemory(name=shm_name)
        try:
            bucket = np.ndarray((bucket_end(manifest),), np.uint8, shm.buf)
            names = [m["name"] for m in manifest]
            # every tensor (or this rank's shard of it) into place, one pass
            mxfp8.import_bucket(bucket, manifest, params, shards=shards and {n: shards[n] for n in names})
            del bucket
        finally:
            shm.close()
        outbox.put("imported")  # the bucket may be refilled; the check below is not timed
        if shards:
            reference = crop_reference(reference, shapes, shards, np)
        outbox.put(verify(params, reference, names, np))


def ipc_inference(shapes, layout, inbox, outbox, tp=1, rank=0, fmt="mxfp8"):
    import torch

    shards, own = rank_view(shapes, tp, rank)
    params = make_params(own, layout, torch, fmt)
    outbox.put("ready")  # the engine is up (torch imported, its CUDA context made, its parameters allocated)
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
            names = [m["name"] for m in manifest]
            mxfp8.import_bucket(bucket, manifest, params, shards=shards and {n: shards[n] for n in names})
        torch.cuda.synchronize()
        outbox.put("imported")
        if shards:
            reference = crop_reference(reference, shapes, shards, torch)
        error = verify(params, reference, names, torch)
        del message
        outbox.put(error)


# ------------------------------------------------------------------------------------------- driver ---
def first_message(receiver, outbox):
    """The receiver's first message; a receiver that exits first (an import error, no CUDA device, out of
    memory) is an error here, not a driver waiting for good."""
    while True:
        try:
            return outbox.get(timeout=1)
        except queue.Empty:
            if receiver.exitcode is not None:
                raise SystemExit(f"a receiver exited with code {receiver.exitcode} before it was up") from None


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
    parser.add_argument("--tp", type=int, default=1,
                        help="receivers, each taking its tensor-parallel shard of every whole bucket (bucketed)")
    parser.add_argument("--format", choices=["mxfp8", "nvfp4"], default="mxfp8",
                        help="the trainer's storage: MXFP8, or NVFP4")
    args = parser.parse_args()
    transport = args.transport
    if transport == "auto":
        try:
            import torch

            transport = "ipc" if torch.cuda.is_available() and mxfp8._mxfp8.with_cuda else "shm"
        except ImportError:
            transport = "shm"
    path = args.path if args.path != "auto" else ("direct" if transport == "ipc" and args.tp == 1 else "bucketed")
    if path == "direct" and transport != "ipc":
        raise SystemExit("--path direct needs --transport ipc (the receiver maps the trainer's GPU memory)")
    if path == "direct" and args.tp != 1:
        raise SystemExit("--tp needs --path bucketed (each rank imports its shard of the trainer's buckets)")

    shapes = model_shapes(args.layers, args.hidden)
    context = multiprocessing.get_context("spawn")
    if transport == "ipc":
        import torch.multiprocessing as tmp

        context = tmp.get_context("spawn")
    target = ipc_inference if transport == "ipc" else shm_inference
    queues = [(context.Queue(), context.Queue()) for _ in range(args.tp)]
    receivers = [context.Process(target=target, args=(shapes, args.layout, inbox, outbox, args.tp, rank, args.format),
                                 daemon=True)
                 for rank, (inbox, outbox) in enumerate(queues)]
    for receiver in receivers:
        receiver.start()
    model = TorchModel(shapes, fmt=args.format) if transport == "ipc" else NumpyModel(shapes, fmt=args.format)
    # Every bucket holds at least the largest tensor (values + scales, aligned).
    bucket_bytes = max(int(args.bucket_mb * 2**20), max(int(np.prod(s)) * 33 // 32 + 1024 for s in shapes.values()))
    shared, shared_array = None, None
    if transport == "shm":  # the trainer exports straight into memory the receiver maps: no extra copy
        from multiprocessing import shared_memory

        shared = shared_memory.SharedMemory(create=True, size=bucket_bytes)
        shared_array = np.ndarray((bucket_bytes,), np.uint8, shared.buf)
    total = sum(np.prod(s) for s in shapes.values())
    print(f"weight sync over {transport}, {path} path, engine scales {args.layout}: {len(shapes)} "
          f"{args.format.upper()} weights, "
          f"{total / 1e6:.1f} M values" + (f", buckets of {args.bucket_mb} MB" if path == "bucketed" else "") +
          (f", {args.tp} receivers each taking its TP-{args.tp} shard" if args.tp > 1 else ""), flush=True)
    inbox, outbox = queues[0]
    failures = 0
    try:
        # The receivers start as separate processes (import torch, make a CUDA context, allocate their
        # parameters: seconds): every step's time is the transfer's only once they are up.
        for receiver, (_, rank_outbox) in zip(receivers, queues):
            message = first_message(receiver, rank_outbox)
            if message != "ready":
                raise RuntimeError(f"a receiver said {message!r} before it was up")
        if path == "direct":  # fixed storage: shared once, imported at every step
            inbox.put(("storage", specs(model)))
            assert outbox.get() == "prepared"
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
                sent += 4 * len(getattr(model, "amax", {}))
            else:
                start = time.perf_counter()
                for bucket, manifest in mxfp8.iter_buckets(specs(model), bucket_bytes=bucket_bytes, buffer=shared_array):
                    reference = {m["name"]: model.reference[m["name"]] for m in manifest}
                    if transport == "ipc":
                        model.torch.cuda.current_stream().synchronize()  # the bucket is complete before it is shared
                    for rank_inbox, _ in queues:  # every rank maps the same bucket
                        if transport == "ipc":
                            rank_inbox.put(("bucket", bucket, manifest, reference))
                        else:  # the bucket already is the shared memory the receiver maps
                            rank_inbox.put((shared.name, manifest, reference))
                    for _, rank_outbox in queues:  # every rank is done with the bucket before it is refilled
                        assert rank_outbox.get() == "imported"
                    elapsed += time.perf_counter() - start
                    errors += [rank_outbox.get() for _, rank_outbox in queues]  # the checks, not timed
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
        for rank_inbox, _ in queues:
            rank_inbox.put(None)
        for receiver in receivers:
            receiver.join(timeout=60)
        if shared is not None:
            del shared_array
            shared.close()
            shared.unlink()
    exits = [receiver.exitcode for receiver in receivers]
    if failures or any(code != 0 for code in exits):
        raise SystemExit(f"weight sync failed: {failures} mismatching tensors or buckets, receiver exits {exits}")
    print("weight sync OK")


if __name__ == "__main__":
    main()
