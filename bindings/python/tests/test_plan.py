"""mxfp8.Plan from prepare_export and prepare_buckets: checked once, one launch per run, the sources as they
are at each run. References are the layout's permute form (conftest), never the library."""
import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8, swizzle_reference

SHAPES = [(100, 48), (257, 200), (3, 31, 1000)]


def _plan_inputs(storage, direction="rowwise"):
    tensors, expected = {}, {}
    for i, shape in enumerate(SHAPES):
        data, buf, s = make_mxfp8(shape, storage, direction, seed=i)
        tensors[f"w{i}"] = {"data": data, "scale_inv": buf, "swizzled": storage == "swizzled"}
        expected[f"w{i}"] = s
    return tensors, expected


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_plan_exports_the_compact_scales_at_every_export(storage, direction):
    tensors, expected = _plan_inputs(storage, direction)
    plan = mxfp8.prepare_export(tensors, direction=direction)
    plan.buffer[:] = 0xEE  # poison: every byte must be written
    views = plan.views()
    assert sum(s.size for s in expected.values()) == plan.buffer.size  # a new out is exactly the scales
    assert plan.manifest is None and plan.run() is plan.buffer
    for name, s in expected.items():
        np.testing.assert_array_equal(views[name].reshape(s.shape), s)
    # An optimizer step in place: the next export shows it, through the same views.
    for i, (name, spec) in enumerate(tensors.items()):
        s = np.random.default_rng(100 + i).integers(1, 255, size=expected[name].shape, dtype=np.uint8)
        if storage == "swizzled":
            mat = s if direction == "rowwise" else s.T
            real = swizzle_reference(np.ones_like(mat)) == 1
            flat = spec["scale_inv"].reshape(-1)
            flat[real] = swizzle_reference(mat)[real]
        elif storage == "padded":
            spec["scale_inv"][: s.shape[0], : s.shape[1]] = s
        else:
            spec["scale_inv"].reshape(s.shape)[:] = s
        expected[name] = s
    plan.run()
    for name, s in expected.items():
        np.testing.assert_array_equal(views[name].reshape(s.shape), s)


def test_plan_writes_into_the_callers_buffer_and_keeps_its_sources():
    tensors, expected = _plan_inputs("swizzled")
    out = np.full(sum(s.size for s in expected.values()), 0xEE, np.uint8)
    plan = mxfp8.prepare_export(tensors, out=out)
    del tensors  # the plan holds the sources
    assert plan.run() is out
    at = 0
    for s in expected.values():
        np.testing.assert_array_equal(out[at:at + s.size].reshape(s.shape), s)
        at += s.size


def test_plan_refuses_bad_input_with_the_librarys_message():
    tensors, expected = _plan_inputs("swizzled")
    with pytest.raises(ValueError, match="tensors is empty"):
        mxfp8.prepare_export({})
    small = np.zeros(10, np.uint8)
    # The messages name what the caller passed (out), not the library's destinations[i].
    with pytest.raises(ValueError, match=r"^out holds 10 bytes but the compact scales of these tensors take"):
        mxfp8.prepare_export(tensors, out=small)
    read_only = np.zeros(sum(s.size for s in expected.values()), np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match=r"^out\[0:\d+\] \(the scales of tensors\['w0'\]\) is read-only"):
        mxfp8.prepare_export(tensors, out=read_only)
    with pytest.raises(ValueError, match="direction"):
        mxfp8.prepare_export(tensors, direction="diagonal")


# ------------------------------------------------------------------------------------ prepare_buckets ---
def _check_bucket(bucket, manifest, tensors, expected):
    """Every tensor of `manifest` in `bucket`: its values byte for byte, its compact scales as the
    reference made them."""
    for e in manifest:
        values = bucket[e["values_offset"]:e["values_offset"] + e["values_bytes"]]
        np.testing.assert_array_equal(values, tensors[e["name"]]["data"].reshape(-1))
        scales = bucket[e["scales_offset"]:e["scales_offset"] + e["scales_bytes"]]
        np.testing.assert_array_equal(scales, expected[e["name"]].reshape(-1))


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_bucket_plan_fills_the_groups_iter_buckets_makes_at_every_step(direction):
    tensors, expected = _plan_inputs("swizzled", direction)
    bucket_bytes = 60_000  # w0 (~5 KB packed) and w1 (~53 KB) share a bucket, w2 (~96 KB) travels alone
    plans = mxfp8.prepare_buckets(tensors, bucket_bytes=bucket_bytes, direction=direction)
    walked = list(mxfp8.iter_buckets(tensors, bucket_bytes=bucket_bytes, direction=direction))
    assert len(plans) == len(walked) == 2
    assert [p.manifest for p in plans] == [m for _, m in walked]
    assert [[e["name"] for e in p.manifest] for p in plans] == [["w0", "w1"], ["w2"]]
    # One buffer of the largest bucket's size, each plan's buffer a view of its start.
    buffer = plans[0].buffer.base
    assert buffer.size == max(p.buffer.size for p in plans)
    assert all(p.buffer.base is buffer and p.buffer.ctypes.data == buffer.ctypes.data for p in plans)
    for step in range(2):
        for plan in plans:
            buffer[:] = 0xEE  # poison: the fill must write every byte a receiver reads
            bucket = plan.run()
            assert bucket is plan.buffer
            _check_bucket(bucket, plan.manifest, tensors, expected)
        # An optimizer step in place: the next fills carry the new values and scales (a plan that kept
        # copies of either would fail here).
        for i, (name, spec) in enumerate(tensors.items()):
            spec["data"][...] = np.random.default_rng(step).integers(0, 256, spec["data"].shape, dtype=np.uint8)
            s = np.random.default_rng(50 + 10 * step + i).integers(1, 255, expected[name].shape, dtype=np.uint8)
            mat = s if direction == "rowwise" else s.T
            real = swizzle_reference(np.ones_like(mat)) == 1
            spec["scale_inv"].reshape(-1)[real] = swizzle_reference(mat)[real]
            expected[name] = s
    # The last step's values and scales, each bucket filled as it is reached, like iter_buckets.
    for plan, (_, walked_manifest) in zip(plans, walked):
        assert plan.manifest == walked_manifest
        _check_bucket(plan.run(), plan.manifest, tensors, expected)


def test_bucket_plan_buckets_import_into_parameters_through_prepared_imports():
    tensors, expected = _plan_inputs("padded")
    buffer = np.zeros(1 << 17, np.uint8)
    plans = mxfp8.prepare_buckets(tensors, bucket_bytes=1 << 16, buffer=buffer)
    assert all(p.buffer.base is buffer for p in plans) and len(plans) == 2
    params = {name: (np.full(spec["data"].shape, 0xEE, np.uint8), np.full(expected[name].shape, 0xEE, np.uint8))
              for name, spec in tensors.items()}
    imports = [mxfp8.prepare_import_bucket(p.buffer, p.manifest, params) for p in plans]
    assert all(isinstance(p, mxfp8.Plan) and p.buffer is None and p.views() == {} for p in imports)
    for plan, imported in zip(plans, imports):
        plan.run()
        imported.run()
    for name, (values, scales) in params.items():
        np.testing.assert_array_equal(values, tensors[name]["data"])
        np.testing.assert_array_equal(scales, expected[name])


def test_bucket_plan_refuses_bad_input():
    tensors, _ = _plan_inputs("swizzled")
    with pytest.raises(ValueError, match="tensors is empty"):
        mxfp8.prepare_buckets({}, bucket_bytes=1 << 20)
    with pytest.raises(ValueError, match="the largest bucket needs"):
        mxfp8.prepare_buckets(tensors, bucket_bytes=1 << 20, buffer=np.zeros(100, np.uint8))
    read_only = np.zeros(1 << 20, np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mxfp8.prepare_buckets(tensors, bucket_bytes=1 << 20, buffer=read_only)
    with pytest.raises(ValueError, match="bucket_bytes is 0"):
        mxfp8.prepare_buckets(tensors, bucket_bytes=0)


def test_bucket_plan_fills_shards_as_iter_buckets_does():
    """Specs with "rows" / "cols" (resharding) go through prepare_buckets' groups and prepared fills: each
    bucket part is byte for byte the one iter_buckets yields, and the test's own crop of the tensor."""
    specs, want = {}, {}
    for i, (storage, shape, rows, cols) in enumerate([
            ("swizzled", (300, 200), [(100, 200), (0, 50)], None),  # row pieces inside 128-row tiles
            ("padded", (257, 96), (13, 250), (32, 96)),
            ("swizzled", (130, 48), None, None),                    # a whole tensor among shards
            ("compact", (64, 1024), None, (512, 1024))]):
        data, buf, s = make_mxfp8(shape, storage, seed=20 + i)
        spec = {"data": data, "scale_inv": buf, "swizzled": storage == "swizzled"}
        if rows is not None:
            spec["rows"] = rows
        if cols is not None:
            spec["cols"] = cols
        specs[f"w{i}"] = spec
        pieces = [rows] if isinstance(rows, tuple) else rows or [(0, shape[0])]
        index = np.concatenate([np.arange(a, b) for a, b in pieces])
        k0, k1 = cols or (0, shape[1])
        want[f"w{i}"] = (data[index][:, k0:k1], s[index][:, k0 // 32:-(-k1 // 32)])
    bucket_bytes = 40_000
    plans = mxfp8.prepare_buckets(specs, bucket_bytes=bucket_bytes)
    walked = [(bucket.copy(), manifest) for bucket, manifest in mxfp8.iter_buckets(specs, bucket_bytes=bucket_bytes)]
    assert len(plans) == len(walked) > 1
    assert [p.manifest for p in plans] == [m for _, m in walked]
    names = []
    for plan, (walked_bucket, manifest) in zip(plans, walked):
        plan.buffer.base[:] = 0xEE  # poison: the fill must write what iter_buckets wrote
        bucket = plan.run()
        assert bucket.size <= walked_bucket.size
        assert {n for n, _ in plan.views().items()} == {e["name"] for e in manifest}  # unpack_bucket's views
        for e in manifest:  # every part's bytes (the alignment gaps between parts are nobody's)
            for at, n in ((e["values_offset"], e["values_bytes"]), (e["scales_offset"], e["scales_bytes"])):
                np.testing.assert_array_equal(bucket[at:at + n], walked_bucket[at:at + n])
        for name, part in mxfp8.unpack_bucket(bucket, manifest).items():
            np.testing.assert_array_equal(part.values, want[name][0])
            np.testing.assert_array_equal(part.scales, want[name][1])
            names.append(name)
    assert sorted(names) == sorted(want)


def test_export_plan_refuses_shard_specs():
    tensors, _ = _plan_inputs("swizzled")
    tensors["w1"]["rows"] = (0, 128)
    with pytest.raises(ValueError, match=r"tensors\['w1'\] has 'rows' / 'cols': prepare_export exports whole"):
        mxfp8.prepare_export(tensors)
