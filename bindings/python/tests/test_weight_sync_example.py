"""The weight-sync example's receiving side catches a corrupted parameter (its check can fail), and its
sending side round-trips a model through buckets bit for bit, on the CPU."""
import importlib.util
import pathlib

import numpy as np
import pytest

import mxfp8

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "weight_sync" / "weight_sync.py"


def load_example():
    spec = importlib.util.spec_from_file_location("weight_sync_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("layout", ["compact", "cutlass_128x4"])
def test_receiver_imports_every_bucket_and_notices_a_flipped_byte(layout):
    ws = load_example()
    shapes = ws.model_shapes(layers=2, hidden=256)
    model = ws.NumpyModel(shapes, seed=3)
    model.step()
    model.quantize()
    params = ws.make_params(shapes, layout, np)
    names = []
    for bucket, manifest in mxfp8.iter_buckets(ws.specs(model), bucket_bytes=1 << 20):
        mxfp8.import_bucket(bucket, manifest, params)
        names += [m["name"] for m in manifest]
    assert sorted(names) == sorted(shapes)
    assert ws.verify(params, model.reference, names, np) is None
    params[names[3]][1].reshape(-1)[5] ^= 1
    assert ws.verify(params, model.reference, names, np) == f"{names[3]} differs"


def test_direct_path_moves_the_trainers_storage_into_parameters_at_every_step():
    """What the receiver does over CUDA IPC, on host memory: prepared once, run after every step."""
    ws = load_example()
    shapes = ws.model_shapes(layers=1, hidden=256)
    model = ws.NumpyModel(shapes, seed=4)
    params = ws.make_params(shapes, "cutlass_128x4", np)
    plan = None
    for _ in range(2):
        model.step()
        model.quantize()  # in place: the storage the plan reads stays where it was
        plan = plan or mxfp8.prepare_import_tensors(ws.specs(model), params)
        plan.run()
        assert ws.verify(params, model.reference, list(shapes), np) is None


@pytest.mark.parametrize("layout, hidden, fmt", [("compact", 256, "mxfp8"), ("cutlass_128x4", 1024, "mxfp8"),
                                                 ("compact", 256, "nvfp4"), ("cutlass_128x4", 1024, "nvfp4")])
def test_two_ranks_each_import_their_tp2_shard_of_whole_buckets(layout, hidden, fmt):
    """--tp 2 on host memory: whole buckets, each rank importing its shard (fused QKV and gate-up by row
    pieces, o / down by K columns, down's last block partial), checked against the crop of the compact
    quantize; the two ranks together hold every byte of every weight. NVFP4 the same, with its amax."""
    ws = load_example()
    shapes = ws.model_shapes(layers=1, hidden=hidden)
    model = ws.NumpyModel(shapes, seed=5, fmt=fmt)
    model.step()
    model.quantize()
    ranks = [ws.rank_view(shapes, 2, rank) for rank in range(2)]
    params = [ws.make_params(own, layout, np, fmt) for _, own in ranks]
    for bucket, manifest in mxfp8.iter_buckets(ws.specs(model), bucket_bytes=1 << 20):
        names = [m["name"] for m in manifest]
        for (shards, _), p in zip(ranks, params):
            mxfp8.import_bucket(bucket, manifest, p, shards={n: shards[n] for n in names})
    for (shards, _), p in zip(ranks, params):
        assert ws.verify(p, ws.crop_reference(model.reference, shapes, shards, np), list(shapes), np) is None
    for name, (n, k) in shapes.items():  # the shards partition each weight
        if "rows" in ranks[0][0][name]:
            rows = ws.shard_rows(ranks[0][0][name], n) + ws.shard_rows(ranks[1][0][name], n)
            assert sorted(rows) == list(range(n))
        else:
            assert ranks[0][0][name]["cols"][1] == ranks[1][0][name]["cols"][0] and ranks[1][0][name]["cols"][1] == k
    params[1][names[-1]][1].reshape(-1)[3] ^= 1  # the check can fail
    assert ws.verify(params[1], ws.crop_reference(model.reference, shapes, ranks[1][0], np), list(shapes), np) is not None


@pytest.mark.parametrize("fmt", ["mxfp8", "nvfp4"])
def test_tp2_example_runs_over_shared_memory(fmt):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(EXAMPLE), "--transport", "shm", "--tp", "2", "--steps", "2", "--layers", "1",
                          "--hidden", "1024", "--format", fmt], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 receivers each taking its TP-2 shard" in out.stdout and "weight sync OK" in out.stdout
    assert f"{fmt.upper()} weights" in out.stdout


@pytest.mark.parametrize("layout", ["compact", "cutlass_128x4"])
def test_nvfp4_receiver_gets_modelopt_parameters_and_notices_each_part_changed(layout):
    """--format nvfp4 on host memory: TE's NVFP4 storage (swizzled scales, amax) through buckets into vLLM
    ModelOpt's weight, weight_scale and weight_scale_2, checked against a direct compact quantize; a flipped
    byte in any of the three parts is noticed."""
    ws = load_example()
    shapes = ws.model_shapes(layers=1, hidden=256)
    model = ws.NumpyModel(shapes, seed=6, fmt="nvfp4")
    model.step()
    model.quantize()
    params = ws.make_params(shapes, layout, np, "nvfp4")
    names = []
    for bucket, manifest in mxfp8.iter_buckets(ws.specs(model), bucket_bytes=1 << 19):
        assert all(m["format"] == "nvfp4" for m in manifest)
        mxfp8.import_bucket(bucket, manifest, params)
        names += [m["name"] for m in manifest]
    assert sorted(names) == sorted(shapes)
    assert ws.verify(params, model.reference, names, np) is None
    for part in range(3):
        flipped = params[names[1]][part].reshape(-1).view(np.uint8)
        flipped[0] ^= 1
        assert ws.verify(params, model.reference, names, np) == f"{names[1]} differs"
        flipped[0] ^= 1


def test_nvfp4_example_runs_over_shared_memory():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, str(EXAMPLE), "--transport", "shm", "--format", "nvfp4", "--steps", "2",
                          "--layers", "1", "--hidden", "512"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "NVFP4 weights" in out.stdout and "weight sync OK" in out.stdout


def test_nvfp4_direct_path_moves_the_trainers_storage_into_parameters():
    """--format nvfp4 over the direct path, on host memory: prepared once over TE's NVFP4 storage, run after
    every requantize."""
    ws = load_example()
    shapes = ws.model_shapes(layers=1, hidden=256)
    model = ws.NumpyModel(shapes, seed=7, fmt="nvfp4")
    params = ws.make_params(shapes, "cutlass_128x4", np, "nvfp4")
    plan = None
    for _ in range(2):
        model.step()
        model.quantize()
        plan = plan or mxfp8.prepare_import_tensors(ws.specs(model), params)
        plan.run()
        assert ws.verify(params, model.reference, list(shapes), np) is None


def test_the_driver_waits_for_ready_and_fails_on_a_receiver_that_died_first():
    """The driver times nothing until every receiver says "ready"; a receiver process that exits before it
    is up (an import error, no CUDA device) is an error naming its exit code, not a wait for good."""
    import multiprocessing

    ws = load_example()

    class Receiver:
        exitcode = None

    outbox = multiprocessing.get_context("spawn").Queue()
    outbox.put("ready")
    assert ws.first_message(Receiver(), outbox) == "ready"
    dead = Receiver()
    dead.exitcode = 3
    with pytest.raises(SystemExit, match="a receiver exited with code 3 before it was up"):
        ws.first_message(dead, outbox)
