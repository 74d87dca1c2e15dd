"""One rank of test_distributed.py's weight sync, run as its own process: the trainer or a receiver of
examples/weight_sync/dist_sync.py's model, in a gloo group made on a TCPStore the test hosts, generation
by generation (a new group after each failure). Prints one JSON line per event for the test to read.

    python dist_worker.py ROLE RANK WORLD PORT GENERATION STEPS [--die-at STEP] [--wrong NAME] [--empty NAME]
                          [--timeout S]
"""
import argparse
import datetime
import json
import os
import pathlib
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import mxfp8.distributed

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "examples" / "weight_sync"))
import dist_sync  # noqa: E402
import weight_sync as ws  # noqa: E402

SEED, LAYERS, HIDDEN, BUCKET_BYTES = 3, 1, 256, 1 << 18


def event(**fields):
    print(json.dumps(fields), flush=True)


def join(store, rank, world, generation, timeout):
    """The gloo group of `generation`: every rank of it calls this with the same number. The ranks first meet
    on the store, for up to a minute: a survivor hears of a failure only when its own receive times out
    (`timeout` after it began to wait), while the trainer, told at once by the lost connection, would give
    up on it after the same `timeout` (the test failed whenever the survivor's wait had begun first)."""
    arrived = f"generation{generation}/arrived"
    store.add(arrived, 1)
    deadline = time.monotonic() + 60
    while store.add(arrived, 0) < world:
        if time.monotonic() > deadline:
            raise RuntimeError(f"generation {generation}: {store.add(arrived, 0)} of {world} ranks came in a minute")
        time.sleep(0.05)
    dist.init_process_group("gloo", store=dist.PrefixStore(f"generation{generation}", store), rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=timeout))


def trainer(args, store, shapes):
    model = ws.NumpyModel(shapes, seed=SEED)
    model.quantize()
    storage = dist_sync.TrainerStorage(model, "cpu")
    sender = mxfp8.distributed.Sender(storage.specs(), bucket_bytes=BUCKET_BYTES)
    generation = args.generation
    join(store, args.rank, args.world, generation, args.timeout)
    sender.connect()
    for _ in range(args.steps):
        storage.refresh()
        while True:  # a failed step is sent again, to the group that forms after it
            start = time.monotonic()
            try:
                step = sender.send()
                break
            except mxfp8.distributed.SyncError as err:
                event(role="trainer", failed=sender.step + 1, after_s=time.monotonic() - start, error=str(err),
                      step=sender.step)
                dist.destroy_process_group()
                generation += 1
                store.set("generation", str(generation))
                join(store, args.rank, args.world, generation, args.timeout)
                sender.connect()
                event(role="trainer", rejoined=generation)
        verdicts = [None] * args.world
        dist.all_gather_object(verdicts, None)
        event(role="trainer", sent=step, errors=[v for v in verdicts if v is not None])
    dist.destroy_process_group()


class DyingReceiver(mxfp8.distributed.Receiver):
    """A receiver whose process ends while it takes bucket 1 of step `die_at`: a rank killed mid-step."""

    die_at = None

    def _receive_bucket(self, index):
        if self._sender_step + 1 == self.die_at and index == 1:
            os._exit(17)
        return super()._receive_bucket(index)


def receiver(args, store, shapes):
    params = ws.make_params(shapes, "compact", np)
    for parts in params.values():
        for a in parts[:-1]:
            a[...] = 0xA5  # poison: a tensor never written cannot pass
    if args.wrong:  # this receiver's model differs from the trainer's in one tensor
        values, scales, layout = params[args.wrong]
        params[args.wrong] = (values[:, :-32], scales[:, :-1].copy(), layout)
    if args.empty:  # or holds nothing usable for it
        params[args.empty] = ()
    replay = ws.NumpyModel(shapes, seed=SEED)
    replay.quantize()
    replayed = 0
    receiver = DyingReceiver(params)
    receiver.die_at = args.die_at
    generation = args.generation
    join(store, args.rank, args.world, generation, args.timeout)
    try:
        receiver.connect()
    except mxfp8.distributed.SyncError as err:
        untouched = all((a.view(np.uint8) == 0xA5).all() for parts in params.values() for a in parts[:-1])
        event(role="receiver", rank=args.rank, refused=str(err), untouched=bool(untouched))
        dist.destroy_process_group()
        return
    while receiver.step < args.steps:
        try:
            step = receiver.receive()
        except mxfp8.distributed.SyncError as err:
            # The parameters must still be the last complete step's, bit for bit.
            kept = ws.verify(params, replay.reference, list(shapes), np) if receiver.step else "no step yet"
            event(role="receiver", rank=args.rank, cut_short=str(err), step=receiver.step, kept_error=kept)
            dist.destroy_process_group()
            generation += 1
            join(store, args.rank, args.world, generation, args.timeout)
            receiver.connect()
            continue
        while replayed < step:  # a restarted receiver replays the trainer's steps it missed
            replay.step()
            replay.quantize()
            replayed += 1
        error = ws.verify(params, replay.reference, list(shapes), np)
        event(role="receiver", rank=args.rank, received=step, error=error)
        dist.all_gather_object([None] * args.world, None if error is None else f"rank {args.rank}: {error}")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["trainer", "receiver"])
    for name in ("rank", "world", "port", "generation", "steps"):
        parser.add_argument(name, type=int)
    parser.add_argument("--die-at", type=int)
    parser.add_argument("--wrong")
    parser.add_argument("--empty")
    parser.add_argument("--timeout", type=float, default=20)
    args = parser.parse_args()
    store = dist.TCPStore("127.0.0.1", args.port, is_master=False, timeout=datetime.timedelta(seconds=60))
    shapes = ws.model_shapes(LAYERS, HIDDEN)
    (trainer if args.role == "trainer" else receiver)(args, store, shapes)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
