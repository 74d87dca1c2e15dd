"""RL weight sync across processes (and nodes) over torch.distributed, with mxfp8.distributed.

    torchrun --nproc-per-node N examples/weight_sync/dist_sync.py --backend gloo|nccl --device cpu|cuda \\
        --steps S [--tp T] [--format mxfp8|nvfp4]

Rank 0 is the trainer: float32 master weights of a small Llama-like stack, requantized after every simulated
optimizer step into Transformer Engine's storage (MXFP8: FP8 values and swizzled E8M0 scales; NVFP4: packed
values, swizzled E4M3 scales and the amax) at fixed addresses, and sent with mxfp8.distributed.Sender:
the manifests once, then per step only bytes (bucket fill in one launch, broadcast, the next bucket filled
while this one is on the wire, then a commit). Ranks 1..N-1 are receivers (mxfp8.distributed.Receiver):
each keeps the engine's parameters (compact or 128x4 scales; NVFP4: vLLM ModelOpt's weight, weight_scale,
weight_scale_2) and imports a step only once it has all of it. With --tp T the receivers are T-way tensor
parallel: receiver r imports shard (r - 1) % T of every weight (column-parallel by rows, row-parallel by K
columns) from the whole buckets.

Every receiver checks every tensor of every step bit for bit against its own replay of the trainer (the
same seed, the same steps, a direct compact quantize, cropped to its shard), outside the timed part; rank 0
prints each step's time and, last, "weight sync OK" when every receiver agreed at every step.

gloo moves CPU tensors, and CUDA tensors too (one GPU can run the GPU path with several processes); NCCL
needs CUDA tensors and a GPU per rank.
"""
import argparse
import datetime
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import mxfp8
import mxfp8.distributed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import weight_sync as ws  # noqa: E402  (the model, shards, parameters and checks of the one-machine example)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--tp", type=int, default=1, help="receivers per tensor-parallel group, each its shard")
    parser.add_argument("--format", choices=["mxfp8", "nvfp4"], default="mxfp8")
    parser.add_argument("--layout", choices=["compact", "cutlass_128x4"], default="compact",
                        help="the layout of the receivers' scale parameters")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--bucket-mb", type=float, default=1)
    parser.add_argument("--timeout", type=float, default=60, help="seconds a collective may wait for a peer")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def to_device(array, device):
    return torch.from_numpy(np.ascontiguousarray(array)).to(device)


class TrainerStorage:
    """The trainer's TE storage on `device`, at fixed addresses, refreshed from the host model each step."""

    def __init__(self, model, device):
        self.model, self.device = model, device
        parts = [model.values, model.scale_inv] + ([model.amax] if model.fmt == "nvfp4" else [])
        # On the CPU the torch tensors share the model's NumPy memory: its quantize writes them in place.
        self.parts = [{n: to_device(a[n], device) if device != "cpu" else torch.from_numpy(a[n]) for n in a}
                      for a in parts]

    def refresh(self):
        self.model.step()
        self.model.quantize()
        if self.device != "cpu":
            sources = [self.model.values, self.model.scale_inv] + ([self.model.amax] if self.model.fmt == "nvfp4" else [])
            for held, source in zip(self.parts, sources):
                for name, tensor in held.items():
                    tensor.copy_(torch.from_numpy(source[name]))

    def specs(self):
        values, scale_inv = self.parts[0], self.parts[1]
        if self.model.fmt == "nvfp4":
            return {n: {"format": "nvfp4", "data": values[n], "scale_inv": scale_inv[n], "amax": self.parts[2][n],
                        "swizzled": True, "shape": tuple(self.model.master[n].shape)} for n in values}
        return {n: {"data": values[n], "scale_inv": scale_inv[n], "swizzled": True} for n in values}


def reference_on(reference, device):
    """The replayed reference, as the parameters' framework holds it."""
    if device == "cpu":
        return reference
    return {n: tuple(to_device(a, device) for a in parts) for n, parts in reference.items()}


def trainer(args, shapes, world):
    model = ws.NumpyModel(shapes, seed=args.seed, fmt=args.format)
    model.quantize()  # the storage holds something before the plans are made
    storage = TrainerStorage(model, args.device)
    sender = mxfp8.distributed.Sender(storage.specs(), bucket_bytes=int(args.bucket_mb * 2**20))
    sender.connect()
    total = sum(sender.sizes)
    receivers = world - 1
    print(f"dist weight sync over {args.backend} on {args.device}: {len(shapes)} {args.format.upper()} weights, "
          f"{len(sender.sizes)} buckets, {total / 2**20:.1f} MiB a step, {receivers} receivers"
          + (f" (TP-{args.tp})" if args.tp > 1 else ""), flush=True)
    failures = 0
    for _ in range(args.steps):
        storage.refresh()
        if args.device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        step = sender.send()
        elapsed = time.perf_counter() - start
        verdicts = [None] * world
        dist.all_gather_object(verdicts, None)
        errors = [v for v in verdicts if v is not None]
        failures += len(errors)
        print(f"step {step}: sent in {elapsed * 1e3:.1f} ms ({total / elapsed / 1e9:.2f} GB/s); "
              + ("every receiver bit-exact" if not errors else "; ".join(errors)), flush=True)
    return failures


def receiver(args, shapes, rank):
    tp_rank = (rank - 1) % args.tp
    shards, own = ws.rank_view(shapes, args.tp, tp_rank)
    xp = np if args.device == "cpu" else torch
    params = ws.make_params(own, args.layout, xp, args.format)
    if xp is np:  # poisoned, so that a tensor never written cannot pass
        for parts in params.values():
            for a in parts[:-1]:
                a.view(np.uint8)[...] = 0xA5
    replay = ws.NumpyModel(shapes, seed=args.seed, fmt=args.format)  # the trainer's steps, redone here
    replay.quantize()
    receiver = mxfp8.distributed.Receiver(params, shards=shards, layout=args.layout, device=args.device)
    receiver.connect()
    for _ in range(args.steps):
        step = receiver.receive()
        if args.device == "cuda":
            torch.cuda.synchronize()
        replay.step()
        replay.quantize()
        reference = replay.reference
        if shards:
            reference = ws.crop_reference(reference, shapes, shards, np)
        error = ws.verify(params, reference_on(reference, args.device), list(shapes), xp)
        dist.all_gather_object([None] * dist.get_world_size(), None if error is None else f"rank {rank} step {step}: {error}")
    return 0


def main(argv=None):
    args = parse_args(argv)
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if world < 2 or (world - 1) % args.tp:
        if rank == 0:
            print(f"dist_sync needs a trainer and receivers in whole TP-{args.tp} groups: --nproc-per-node "
                  f"1 + a multiple of {args.tp}, got {world}", file=sys.stderr)
        dist.destroy_process_group()
        return 2
    shapes = ws.model_shapes(args.layers, args.hidden)
    try:
        failures = trainer(args, shapes, world) if rank == 0 else receiver(args, shapes, rank)
    finally:
        dist.destroy_process_group()
    if rank == 0:
        if failures:
            print(f"weight sync FAILED: {failures} receiver checks differ", flush=True)
            return 1
        print("weight sync OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
