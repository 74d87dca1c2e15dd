"""Two ranks over gloo (a file store), a trainer (rank 0) and a receiver (rank 1), for test_distributed's
faults that need no torchrun: `python dist_faults.py CASE` prints one JSON line per rank with what it saw.

CASE:
  aliased   the receiver's two parameters are the same tensors, its tensors in two buckets: refused at connect.
  resized   a parameter's storage is resized after step 1: step 2 is refused whole, nothing of it written.
  stale     both ranks make a new default group; the old Sender and Receiver refuse to run on it.
"""
import datetime
import json
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import mxfp8.distributed as md

SHAPES = {"a": (64, 64), "b": (64, 64)}


def storage(seed):
    g = torch.Generator().manual_seed(seed)
    return {n: {"data": torch.randint(0, 256, s, dtype=torch.uint8, generator=g),
                "scale_inv": torch.randint(1, 255, (s[0], s[1] // 32), dtype=torch.uint8, generator=g),
                "swizzled": False} for n, s in SHAPES.items()}


def params():
    return {n: (torch.zeros(s, dtype=torch.uint8), torch.zeros(s[0], s[1] // 32, dtype=torch.uint8))
            for n, s in SHAPES.items()}


def init(store, rank):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=20))


def attempt(call):
    try:
        return {"result": call()}
    except md.SyncError as err:
        return {"error": str(err)}


def holds(p, seed):
    expected = storage(seed)
    return {n: torch.equal(p[n][0], expected[n]["data"]) and torch.equal(p[n][1], expected[n]["scale_inv"])
            for n in SHAPES}


def run(rank, case, stores):
    init(stores[0], rank)
    seen = {"rank": rank}
    if rank == 0:
        st = storage(1)
        sender = md.Sender(st, bucket_bytes=1)  # one tensor a bucket
        seen["connect"] = attempt(sender.connect)
        if "error" not in seen["connect"]:
            seen["send1"] = attempt(sender.send)
            new = storage(2)
            for n in SHAPES:
                st[n]["data"].copy_(new[n]["data"])
                st[n]["scale_inv"].copy_(new[n]["scale_inv"])
            if case == "stale":
                dist.barrier()  # the receiver has the step before the group goes
                dist.destroy_process_group()
                init(stores[1], rank)
                seen["stale_send"] = attempt(sender.send)
                dist.barrier()
            else:
                seen["send2"] = attempt(sender.send)
    else:
        p = params()
        if case == "aliased":
            p["b"] = p["a"]
        receiver = md.Receiver(p)
        seen["connect"] = attempt(receiver.connect)
        if "error" not in seen["connect"]:
            seen["receive1"] = attempt(receiver.receive)
            seen["holds1"] = holds(p, 1)
            if case == "stale":
                dist.barrier()
                dist.destroy_process_group()
                init(stores[1], rank)
                seen["stale_receive"] = attempt(receiver.receive)
                dist.barrier()
            else:
                p["b"][0].untyped_storage().resize_(2 * 64 * 64)  # b's memory moves
                seen["receive2"] = attempt(receiver.receive)
                seen["holds_after"] = holds(p, 1)
                seen["step"] = receiver.step
    os.write(1, (json.dumps(seen) + "\n").encode())  # one write: the two ranks' lines never interleave
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, args=(sys.argv[1], [tempfile.mktemp(), tempfile.mktemp()]), nprocs=2)
