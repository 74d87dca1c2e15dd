"""mxfp8.sglang.flattened_bucket against SGLang's own FlattenedTensorBucket (tensor_bucket.py, read
unchanged from the sglang wheel that scripts/install_deps.sh downloads into the venv's wheels/; the rest of
SGLang is not installed): SGLang rebuilds from our bucket, with no copy, exactly the values and compact
E8M0 scales export_components gives for each tensor, under the names and dtypes its MXFP8 linear loads.
Skips without the wheel."""
import importlib.util
import pathlib
import sys
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mxfp8  # noqa: E402
import mxfp8.sglang  # noqa: E402
from conftest import make_mxfp8  # noqa: E402



def sglang_tensor_bucket(tmp_path_factory):
    wheels = sorted((pathlib.Path(sys.prefix) / "wheels").glob("sglang-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang wheel in {sys.prefix}/wheels (scripts/install_deps.sh test downloads it there)")
    folder = tmp_path_factory.mktemp("sglang")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        path = folder / "tensor_bucket.py"
        path.write_bytes(wheel.read("sglang/srt/weight_sync/tensor_bucket.py"))
    spec = importlib.util.spec_from_file_location("sglang_tensor_bucket", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tb(tmp_path_factory):
    return sglang_tensor_bucket(tmp_path_factory)


def test_sglang_rebuilds_our_bucket_into_the_exported_components(tb):
    specs, want = {}, {}
    for i, (shape, storage, fmt) in enumerate([((130, 96), "swizzled", "e4m3"), ((64, 544), "padded", "e5m2"),
                                               ((3, 40, 64), "swizzled", "e4m3")]):
        data, buf, s = make_mxfp8(shape, storage, seed=i)  # random bytes: either FP8 type reads them
        name = f"model.layers.{i}.mlp.down_proj"
        specs[name] = {"data": torch.from_numpy(data.view(np.uint8)), "scale_inv": torch.from_numpy(buf),
                       "swizzled": storage == "swizzled", "fp8_dtype": fmt, "shape": shape}
        want[name] = (data.view(np.uint8), s.reshape(-1, s.shape[-1]), fmt)
    seen = []
    for bucket, manifest in mxfp8.iter_buckets(specs, bucket_bytes=1 << 14):
        payload = mxfp8.sglang.flattened_bucket(bucket, manifest, tb.FlattenedTensorMetadata)
        assert payload["flattened_tensor"] is bucket  # the bucket itself: no copy
        rebuilt = tb.FlattenedTensorBucket(flattened_tensor=payload["flattened_tensor"],
                                           metadata=payload["metadata"]).reconstruct_tensors()
        for name, tensor in rebuilt:
            module, _, part = name.rpartition(".")
            values, scales, fmt = want[module]
            if part == "weight":
                assert tensor.dtype == {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[fmt]
                assert np.array_equal(tensor.view(torch.uint8).numpy(), values), name
            else:
                assert part == "weight_scale_inv" and tensor.dtype == torch.uint8
                assert np.array_equal(tensor.numpy(), scales), name
            assert tensor.untyped_storage().data_ptr() == bucket.untyped_storage().data_ptr()
            seen.append(name)
    assert sorted(seen) == sorted(f"{n}.{p}" for n in specs for p in ("weight", "weight_scale_inv"))


def test_what_sglang_cannot_load_is_refused(tb):
    spec, _ = __import__("test_nvfp4_bucket").nvfp4_source((64, 32), "compact", "rowwise", False, 448, seed=1)
    bucket, manifest = mxfp8.export_bucket({"w": {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                                                  for k, v in spec.items()}})
    with pytest.raises(ValueError, match="is NVFP4"):
        mxfp8.sglang.flattened_bucket(bucket, manifest, tb.FlattenedTensorMetadata)
    data, buf, _ = make_mxfp8((64, 64), "padded", direction="columnwise", seed=2)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": torch.from_numpy(data.view(np.uint8)),
                                                  "scale_inv": torch.from_numpy(buf), "swizzled": False}},
                                           direction="columnwise")
    with pytest.raises(ValueError, match="rowwise values with compact scales"):
        mxfp8.sglang.flattened_bucket(bucket, manifest, tb.FlattenedTensorMetadata)
    with pytest.raises(TypeError, match="1-D uint8 torch tensor"):
        mxfp8.sglang.flattened_bucket(bucket.numpy(), manifest, tb.FlattenedTensorMetadata)
    data, buf, _ = make_mxfp8((64, 64), "compact", seed=4)
    rowwise = {"data": torch.from_numpy(data.view(np.uint8)), "scale_inv": torch.from_numpy(buf), "swizzled": False}
    bucket, manifest = mxfp8.export_bucket({"w": rowwise, "w.weight": rowwise})  # one SGLang parameter, twice
    with pytest.raises(ValueError, match="gives 'w.weight' again"):
        mxfp8.sglang.flattened_bucket(bucket, manifest, tb.FlattenedTensorMetadata)


def test_the_example_posts_every_bucket_as_sglangs_route_takes_it(tb, monkeypatch):
    """examples/weight_sync/sglang_bucket.py's sync, with a `post` that does what SGLang's server does with the
    body (base64 -> the serializer's pickle -> FlattenedTensorBucket.reconstruct_tensors -> load_weights): small
    buckets so one buffer is refilled several times, every tensor checked byte for byte when it is posted."""
    import base64
    import io
    import json
    import pickle
    from multiprocessing.reduction import ForkingPickler

    monkeypatch.setitem(sys.modules, tb.__name__, tb)  # its metadata class pickles by module name
    spec = importlib.util.spec_from_file_location(
        "sglang_bucket_example", pathlib.Path(__file__).resolve().parents[3] / "examples/weight_sync/sglang_bucket.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    def serialize(obj, output_str=False):  # SGLang's MultiprocessingSerializer.serialize: ForkingPickler, base64
        buf = io.BytesIO()
        ForkingPickler(buf).dump(obj)
        return base64.b64encode(buf.getvalue()).decode() if output_str else buf.getvalue()

    storage, want = {}, {}
    for i, shape in enumerate([(130, 96), (64, 544), (3, 40, 64), (256, 200)]):
        data, buf, s = make_mxfp8(shape, "swizzled" if i % 2 else "padded", seed=10 + i)
        name = f"model.layers.{i}.self_attn.o_proj"
        storage[name] = {"data": torch.from_numpy(data.view(np.uint8)).view(torch.float8_e4m3fn),
                         "scale_inv": torch.from_numpy(buf), "swizzled": bool(i % 2)}
        want[f"{name}.weight"] = data.view(np.uint8)
        want[f"{name}.weight_scale_inv"] = s.reshape(-1, s.shape[-1])
    loaded, routes = {}, []

    def post(route, body):
        routes.append(route)
        body = json.loads(json.dumps(body))  # as it crosses HTTP
        if route == "/flush_cache":
            return
        assert body["load_format"] == "flattened_bucket" and body["flush_cache"] is False
        assert len(body["serialized_named_tensors"]) == 2  # one per TP rank
        payload = pickle.loads(base64.b64decode(body["serialized_named_tensors"][1]))
        bucket = tb.FlattenedTensorBucket(flattened_tensor=payload["flattened_tensor"], metadata=payload["metadata"])
        for name, tensor in bucket.reconstruct_tensors():  # load_weights: copied now, the buffer is refilled next
            loaded[name] = tensor.view(torch.uint8).numpy().copy()

    count, sent = example.sync(storage, post, tb.FlattenedTensorMetadata, serialize, tp_size=2, bucket_bytes=1 << 14)
    assert count > 1 and sent > 0 and routes == ["/update_weights_from_tensor"] * count + ["/flush_cache"]
    assert sorted(loaded) == sorted(want)
    for name, expected in want.items():
        assert np.array_equal(loaded[name].reshape(expected.shape), expected), name
