"""One weight-sync step over torch.distributed: mxfp8.distributed against the same bytes sent by hand.

    torchrun --standalone --nproc-per-node 2 bench/dist_sync.py --backend gloo --device cpu --out OUT.json

Rank 0 holds an MXFP8 model in Transformer Engine's storage (values, swizzled 128x4 scales), rank 1 the
engine's parameters (values, compact scales). Both ways move a whole step and are checked bit for bit
after timing:
  ours      mxfp8.distributed: Sender.send (buckets filled in one launch each, double-buffered broadcasts,
            a commit) and Receiver.receive (staged, then one import launch per bucket);
  by_hand   what RL frameworks write today: per tensor, the values cloned and the scales unswizzled with
            torch ops (view, permute, crop, contiguous), then two broadcasts, received straight into
            the parameters.
The figure is the median step time over --reps steps after --warmup, each step ended by a barrier;
rank 0 writes the JSON (date, device, backend, bytes, ms, ratio).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import mxfp8
import mxfp8.distributed

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "weight_sync"))
import weight_sync as ws  # noqa: E402  (the model shapes)


def unswizzle_by_hand(flat, rows, cols):
    """TE's 128x4 tiles back to the compact (rows, cols) matrix, as frameworks write it in torch."""
    rp, cp = -(-rows // 128) * 128, -(-cols // 4) * 4
    tiles = flat.view(rp // 128, cp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4)
    return tiles.reshape(rp, cp)[:rows, :cols].contiguous()


def sync_point(device):
    if device == "cuda":
        torch.cuda.synchronize()
    dist.barrier()


def timed(step, device, warmup, reps):
    times = []
    for i in range(warmup + reps):
        sync_point(device)
        start = time.perf_counter()
        step()
        sync_point(device)
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--bucket-mb", type=float, default=64)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one rep (seconds)")
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.smoke:
        args.layers, args.hidden, args.warmup, args.reps = 1, 256, 0, 1
    if args.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=300))
    rank = dist.get_rank()
    if dist.get_world_size() != 2:
        raise SystemExit("bench/dist_sync.py runs with 2 ranks (--nproc-per-node 2)")
    shapes = ws.model_shapes(args.layers, args.hidden)
    device = args.device
    rng = np.random.default_rng(0)

    if rank == 0:
        storage = {}
        for name, shape in shapes.items():
            w = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32) * 0.02).to(device)
            q = mxfp8.quantize(w, scales="swizzled")
            storage[name] = (q.rowwise_data.view(torch.uint8), q.rowwise_scale_inv.view(torch.uint8).reshape(-1))
        sender = mxfp8.distributed.Sender({n: {"data": v, "scale_inv": s, "swizzled": True, "shape": shapes[n]}
                                           for n, (v, s) in storage.items()},
                                          bucket_bytes=int(args.bucket_mb * 2**20))
        sender.connect()

        def by_hand():
            for name, (values, scale_inv) in storage.items():
                n, k = shapes[name]
                dist.broadcast(values.clone(), src=0)
                dist.broadcast(unswizzle_by_hand(scale_inv, n, -(-k // 32)), src=0)

        ours_ms = timed(sender.send, device, args.warmup, args.reps)
        hand_ms = timed(by_hand, device, args.warmup, args.reps)
        check = [None]
        dist.broadcast_object_list(check, src=1)
        total = sum(int(np.prod(s)) + s[0] * -(-s[1] // 32) for s in shapes.values())
        result = {
            "date": datetime.date.today().isoformat(),
            "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or platform.machine(),
            "backend": args.backend, "tensor_device": device, "tensors": len(shapes), "bytes": total,
            "bucket_mb": args.bucket_mb, "reps": args.reps,
            "ours_ms": round(ours_ms, 3), "by_hand_ms": round(hand_ms, 3),
            "by_hand_over_ours": round(hand_ms / ours_ms, 3), "bit_exact": check[0],
            "torch": torch.__version__, "smoke": args.smoke,
        }
        print(json.dumps(result, indent=1), flush=True)
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"dist_sync": result}, f, indent=1)
    else:
        params = {n: (torch.empty(s, dtype=torch.uint8, device=device),
                      torch.empty((s[0], -(-s[1] // 32)), dtype=torch.uint8, device=device)) for n, s in shapes.items()}
        receiver = mxfp8.distributed.Receiver(params, device=device)
        receiver.connect()
        timed(receiver.receive, device, args.warmup, args.reps)
        ours = {n: (v.clone(), s.clone()) for n, (v, s) in params.items()}
        for parts in params.values():
            for t in parts:
                t.fill_(0xA5)

        def by_hand():
            for name, (values, scales) in params.items():
                dist.broadcast(values, src=0)
                dist.broadcast(scales, src=0)

        timed(by_hand, device, args.warmup, args.reps)
        # Both ways delivered the same bytes, and they are the compact quantize of rank 0's weights.
        rng_ref = np.random.default_rng(0)
        exact = True
        for name, shape in shapes.items():
            w = torch.from_numpy(rng_ref.standard_normal(shape, dtype=np.float32) * 0.02)
            q = mxfp8.quantize(w)
            want = (q.rowwise_data.view(torch.uint8), q.rowwise_scale_inv)
            for got in (ours[name], params[name]):
                exact &= all(torch.equal(g.cpu(), x) for g, x in zip(got, want))
        dist.broadcast_object_list([bool(exact)], src=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
