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
