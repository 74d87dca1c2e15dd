"""mxfp8.distributed over gloo on the CPU, as RL frameworks run it: the example under torchrun (a trainer and
TP-2 receivers, MXFP8 and NVFP4, 20 steps, every tensor checked bit for bit by each receiver's replay),
and the faults: a receiver killed mid-step (the sender fails within the timeout, the survivor keeps its
last complete step, a restarted receiver rejoins at the next step), and a receiver whose model differs
(refused before any byte is written, on both sides, naming the tensor)."""
import json
import pathlib
import re
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("this torch has no gloo backend", allow_module_level=True)

import mxfp8.distributed  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "weight_sync" / "dist_sync.py"
WORKER = pathlib.Path(__file__).with_name("dist_worker.py")


def torchrun(*args, nproc=3, timeout=600):
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
                           str(EXAMPLE), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("fmt, layout", [("mxfp8", "compact"), ("nvfp4", "compact"), ("mxfp8", "cutlass_128x4")])
def test_example_syncs_tp2_receivers_for_20_steps_bit_for_bit(fmt, layout):
    hidden = "1024" if layout == "cutlass_128x4" else "512"  # TP-2 row pieces of whole 128-row tiles
    out = torchrun("--backend", "gloo", "--device", "cpu", "--steps", "20", "--tp", "2", "--format", fmt,
                   "--layout", layout, "--hidden", hidden, "--layers", "1")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "weight sync OK"
    assert f"{fmt.upper()} weights" in lines[0] and "2 receivers (TP-2)" in lines[0]
    assert [line.split(":")[0] for line in lines[1:-1]] == [f"step {s}" for s in range(1, 21)]
    assert all(line.endswith("every receiver bit-exact") for line in lines[1:-1])


@pytest.mark.skipif(not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda,
                    reason="needs a CUDA device and the CUDA build (gloo moves CUDA tensors: one GPU runs every rank)")
@pytest.mark.parametrize("fmt, tp", [("mxfp8", 2), ("nvfp4", 1)])
def test_example_syncs_cuda_tensors_over_gloo_on_one_gpu(fmt, tp):
    out = torchrun("--backend", "gloo", "--device", "cuda", "--steps", "20", "--tp", str(tp), "--format", fmt,
                   "--layers", "2", "--hidden", "1024", "--layout", "cutlass_128x4")
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "weight sync OK" and "on cuda" in lines[0]
    assert sum(line.endswith("every receiver bit-exact") for line in lines) == 20


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2 or not mxfp8._mxfp8.with_cuda
                    or not dist.is_nccl_available(),
                    reason="NCCL runs one rank per GPU: needs 2 GPUs (the trainer and a receiver) and the CUDA build")
@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_example_syncs_over_nccl_one_rank_per_gpu(fmt):
    nproc = min(torch.cuda.device_count(), 3)  # with 3 GPUs, TP-2 receivers
    out = torchrun("--backend", "nccl", "--device", "cuda", "--steps", "20", "--tp", str(nproc - 1), "--format", fmt,
                   "--layers", "2", "--hidden", "1024", "--layout", "cutlass_128x4", nproc=nproc)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "weight sync OK" and "over nccl on cuda" in lines[0]
    assert sum(line.endswith("every receiver bit-exact") for line in lines) == 20


def test_example_refuses_receivers_that_are_not_whole_tp_groups():
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                          str(EXAMPLE), "--tp", "2", "--steps", "1"], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "1 + a multiple of 2, got 2" in out.stderr


class Ranks:
    """Worker processes on a TCPStore this test hosts; each prints JSON events (dist_worker.py)."""

    def __init__(self, world, steps, timeout=10):
        self.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        self.world, self.steps, self.timeout = world, steps, timeout
        self.procs = []

    def start(self, role, rank, generation=0, *extra):
        cmd = [sys.executable, str(WORKER), role, str(rank), str(self.world), str(self.store.port), str(generation),
               str(self.steps), "--timeout", str(self.timeout), *extra]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def events(proc, timeout=240):
        out, err = proc.communicate(timeout=timeout)
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return proc.returncode, events, err

    def kill_all(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()


def test_a_receiver_killed_mid_step_fails_the_step_for_everyone_and_a_restarted_one_rejoins():
    ranks = Ranks(world=3, steps=5)
    try:
        trainer = ranks.start("trainer", 0)
        survivor = ranks.start("receiver", 1)
        dying = ranks.start("receiver", 2, 0, "--die-at", "3")
        assert dying.wait(timeout=240) == 17  # gone while taking bucket 1 of step 3
        # The trainer opens generation 1 once it has seen the failure; the restarted rank joins it.
        deadline = time.monotonic() + 120
        while ranks.store.check(["generation"]) is False and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ranks.store.get("generation") == b"1"
        restarted = ranks.start("receiver", 2, 1)
        code, trainer_events, err = ranks.events(trainer)
        assert code == 0, err
        code, survivor_events, err = ranks.events(survivor)
        assert code == 0, err
        code, restarted_events, err = ranks.events(restarted)
        assert code == 0, err
    finally:
        ranks.kill_all()

    failed = [e for e in trainer_events if "failed" in e]
    assert len(failed) == 1 and failed[0]["failed"] == 3 and failed[0]["step"] == 2
    assert failed[0]["after_s"] < ranks.timeout + 5, failed  # within the group's timeout, no hang
    assert "step 3 failed at" in failed[0]["error"] and "they keep step 2" in failed[0]["error"]
    assert [e["sent"] for e in trainer_events if "sent" in e] == [1, 2, 3, 4, 5]
    assert all(e["errors"] == [] for e in trainer_events if "sent" in e)

    cut = [e for e in survivor_events if "cut_short" in e]
    assert len(cut) == 1 and cut[0]["step"] == 2 and cut[0]["kept_error"] is None  # step 2, bit for bit
    assert "the parameters keep step 2" in cut[0]["cut_short"]
    assert [(e["received"], e["error"]) for e in survivor_events if "received" in e] == [(s, None) for s in range(1, 6)]
    # The restarted receiver is current from the step it joined at.
    assert [(e["received"], e["error"]) for e in restarted_events if "received" in e] == [(s, None) for s in (3, 4, 5)]


@pytest.mark.parametrize("fault, says", [("--wrong", "TypeError|ValueError"), ("--empty", "must be \\(values, scales")])
def test_a_receiver_whose_model_differs_is_refused_before_any_byte_is_written(fault, says):
    ranks = Ranks(world=2, steps=1)
    name = "layers.0.o_proj.weight"
    try:
        trainer = ranks.start("trainer", 0)
        receiver = ranks.start("receiver", 1, 0, fault, name)
        code, trainer_events, trainer_err = ranks.events(trainer)
        _, receiver_events, _ = ranks.events(receiver)
    finally:
        ranks.kill_all()
    assert code != 0 and "Timed out" not in trainer_err  # told by the receiver, not by the group's timeout
    assert "SyncError" in trainer_err and "rank 1 refused the sender's manifests" in trainer_err
    assert f"{name!r}" in trainer_err and re.search(says, trainer_err)
    (refused,) = receiver_events
    assert f"{name!r}" in refused["refused"] and "nothing was written" in refused["refused"]
    assert refused["untouched"] is True  # every parameter byte still the poison


def faults(case):
    """dist_faults.py CASE: a trainer and a receiver, one JSON line each, by rank."""
    out = subprocess.run([sys.executable, str(WORKER.with_name("dist_faults.py")), case], capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {seen["rank"]: seen for seen in lines}


def test_two_tensors_into_the_same_parameter_bytes_are_refused_across_buckets():
    # One tensor a bucket: the import of the whole step is one transfer, so the library's overlap check sees
    # both (each bucket alone passed it, and b's bytes went into a's parameters without a word).
    seen = faults("aliased")
    for rank in (0, 1):
        # values or scales first, as the check meets them in address order
        assert re.search(r"desc\.(values|scales)\[1\] and desc\.\1\[0\] overlap in memory .*'b'",
                         seen[rank]["connect"]["error"])


def test_a_step_whose_import_is_refused_writes_nothing_and_says_so():
    # b's storage resized after step 1: step 2 arrives whole, but the import would write freed memory; it
    # is refused before any parameter is written, a's included (a plan a bucket had written a's).
    seen = faults("resized")
    assert seen[0]["send2"] == {"result": 2}
    receiver = seen[1]
    assert receiver["receive1"] == {"result": 1} and receiver["holds1"] == {"a": True, "b": True}
    assert re.search(r"step 2 arrived but its import was refused \(ValueError: .*storage resized.*the parameters keep "
                     r"step 1; connect again", receiver["receive2"]["error"])
    assert receiver["holds_after"] == {"a": True, "b": True} and receiver["step"] == 1


def test_a_sender_and_receiver_refuse_a_group_they_did_not_connect_on():
    # After destroy_process_group and a new default group, the old pair's broadcasts met no handshake, and
    # gloo aborted the peer's process; both refuse instead.
    seen = faults("stale")
    assert seen[0]["send1"] == {"result": 1} and seen[1]["receive1"] == {"result": 1}
    for rank, call in ((0, "stale_send"), (1, "stale_receive")):
        assert "the process group it connected on is gone" in seen[rank][call]["error"]


def test_send_and_receive_before_connect_are_refused():
    sender = mxfp8.distributed.Sender(
        {"w": {"data": torch.zeros(4, 64, dtype=torch.uint8), "swizzled": False, "scale_inv": torch.zeros(4, 2, dtype=torch.uint8)}},
        bucket_bytes=1 << 16)
    with pytest.raises(mxfp8.distributed.SyncError, match="torch.distributed is not initialized|before connect"):
        sender.send()
    import numpy as np

    with pytest.raises(TypeError, match="must be torch tensors"):
        mxfp8.distributed.Sender({"w": {"data": np.zeros((4, 64), np.uint8), "swizzled": False, "scale_inv": np.zeros((4, 2), np.uint8)}},
                                 bucket_bytes=1 << 16)
    receiver = mxfp8.distributed.Receiver({})
    with pytest.raises(mxfp8.distributed.SyncError, match="torch.distributed is not initialized|before connect"):
        receiver.receive()


def test_a_forged_handshake_is_refused_before_anything_is_prepared(tmp_path, monkeypatch):
    """A one-rank gloo group in this process; the sender's hello forged (the receiver's broadcast patched)."""
    sender = mxfp8.distributed.Sender(
        {n: {"data": torch.zeros(4, 64, dtype=torch.uint8), "scale_inv": torch.zeros(4, 2, dtype=torch.uint8),
             "swizzled": False} for n in ("a", "b")}, bucket_bytes=256)  # two buckets
    assert len(sender.manifests) == 2
    params = {n: (torch.full((4, 64), 0x5A, dtype=torch.uint8), torch.full((4, 2), 0x5A, dtype=torch.uint8))
              for n in ("a", "b")}
    good = {"protocol": mxfp8.distributed.PROTOCOL, "src": 0, "step": 0, "manifests": sender.manifests,
            "sizes": sender.sizes}
    forged = [  # (the hello's changes, the refusal)
        # one size short: the connect passed with no plan for b (a step of one bucket never imported it)
        (dict(sizes=sender.sizes[:1]), "2 manifests but bucket sizes"),
        (dict(sizes=[sender.sizes[0], -1]), "must be non-negative ints"),
        (dict(sizes=[sender.sizes[0], float(sender.sizes[1])]), "must be non-negative ints"),
        (dict(step="7"), r"step '7' must be non-negative ints"),
        (dict(manifests={"a": 1}), "not a list of manifests"),
    ]
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        for change, refusal in forged:
            hello = dict(good, **change)
            monkeypatch.setattr(dist, "broadcast_object_list", lambda objects, src, group: objects.__setitem__(0, hello))
            receiver = mxfp8.distributed.Receiver(params)
            with pytest.raises(mxfp8.distributed.SyncError, match=refusal):
                receiver.connect()
            assert receiver._src is None and receiver._plan is None
        monkeypatch.setattr(dist, "broadcast_object_list", lambda objects, src, group: objects.__setitem__(0, good))
        receiver = mxfp8.distributed.Receiver(params)
        receiver.connect()
        assert receiver._plan is not None  # one plan for the step's two buckets
    finally:
        dist.destroy_process_group()
    assert all((p == 0x5A).all() for pair in params.values() for p in pair)
