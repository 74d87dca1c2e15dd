"""The weight-sync example's receiving side catches a corrupted parameter (its check can fail), and its
sending side round-trips a model through buckets bit for bit, on the CPU."""
import importlib.util
import pathlib

import numpy as np

import mxfp8

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "weight_sync" / "weight_sync.py"


def load_example():
    spec = importlib.util.spec_from_file_location("weight_sync_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_receiver_rebuilds_every_weight_and_notices_a_flipped_byte():
    ws = load_example()
    shapes = ws.model_shapes(layers=2, hidden=256)
    model = ws.NumpyModel(shapes, seed=3)
    model.step()
    model.quantize()
    params = {n: (np.empty(s, np.uint8), np.empty((s[0], -(-s[1] // 32)), np.uint8)) for n, s in shapes.items()}
    names, gemm = [], {}
    for bucket, manifest in mxfp8.iter_buckets(ws.specs(model), bucket_bytes=1 << 20):
        gemm.update(ws.receive_params(mxfp8.unpack_bucket(bucket, manifest), params, np))
        names += [m["name"] for m in manifest]
    assert sorted(names) == sorted(shapes)
    assert ws.verify(params, gemm, model.reference, names, np) is None
    params[names[3]][1][5, 0] ^= 1
    assert ws.verify(params, gemm, model.reference, names, np) == f"{names[3]} differs"
