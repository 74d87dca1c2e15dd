"""ExportPlan: checked once, one launch per export, the sources as they are at each export. References are
the layout's permute form (conftest), never the library."""
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
    plan = mxfp8.ExportPlan(tensors, direction=direction)
    plan.out[:] = 0xEE  # poison: every byte must be written
    views = plan.views()
    assert plan.scales_bytes == sum(s.size for s in expected.values()) == plan.out.size
    plan.export()
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
    plan.export()
    for name, s in expected.items():
        np.testing.assert_array_equal(views[name].reshape(s.shape), s)


def test_plan_writes_into_the_callers_buffer_and_keeps_its_sources():
    tensors, expected = _plan_inputs("swizzled")
    out = np.full(sum(s.size for s in expected.values()), 0xEE, np.uint8)
    plan = mxfp8.ExportPlan(tensors, out=out)
    del tensors  # the plan holds the sources
    assert plan.export() is out
    at = 0
    for s in expected.values():
        np.testing.assert_array_equal(out[at:at + s.size].reshape(s.shape), s)
        at += s.size


def test_plan_refuses_bad_input_with_the_librarys_message():
    tensors, expected = _plan_inputs("swizzled")
    with pytest.raises(ValueError, match="tensors is empty"):
        mxfp8.ExportPlan({})
    small = np.zeros(10, np.uint8)
    # The messages name what the caller passed (out), not the library's destinations[i].
    with pytest.raises(ValueError, match=r"^out holds 10 bytes but the compact scales of these tensors take"):
        mxfp8.ExportPlan(tensors, out=small)
    read_only = np.zeros(sum(s.size for s in expected.values()), np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match=r"^out\[0:\d+\] \(the scales of tensors\['w0'\]\) is read-only"):
        mxfp8.ExportPlan(tensors, out=read_only)
    with pytest.raises(ValueError, match="direction"):
        mxfp8.ExportPlan(tensors, direction="diagonal")


# ----------------------------------------------------------------------------------------- BucketPlan ---
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
    plan = mxfp8.BucketPlan(tensors, bucket_bytes=bucket_bytes, direction=direction)
    walked = list(mxfp8.iter_buckets(tensors, bucket_bytes=bucket_bytes, direction=direction))
    assert len(plan) == len(walked) == 2
    assert plan.manifests == [m for _, m in walked]
    assert [[e["name"] for e in m] for m in plan.manifests] == [["w0", "w1"], ["w2"]]
    assert plan.buffer.size == max(plan.sizes)
    for step in range(2):
        for i, manifest in enumerate(plan.manifests):
            plan.buffer[:] = 0xEE  # poison: the fill must write every byte a receiver reads
            bucket = plan.fill(i)
            assert bucket.size == plan.sizes[i] and np.shares_memory(bucket, plan.buffer)
            _check_bucket(bucket, manifest, tensors, expected)
        # An optimizer step in place: the next fills carry the new values and scales (a plan that kept
        # copies of either would fail here).
        for i, (name, spec) in enumerate(tensors.items()):
            spec["data"][...] = np.random.default_rng(step).integers(0, 256, spec["data"].shape, dtype=np.uint8)
            s = np.random.default_rng(50 + 10 * step + i).integers(1, 255, expected[name].shape, dtype=np.uint8)
            mat = s if direction == "rowwise" else s.T
            real = swizzle_reference(np.ones_like(mat)) == 1
            spec["scale_inv"].reshape(-1)[real] = swizzle_reference(mat)[real]
            expected[name] = s
    # Iterating fills each bucket as it is reached, like iter_buckets.
    for (bucket, manifest), (_, walked_manifest) in zip(plan, walked):
        assert manifest == walked_manifest
        _check_bucket(bucket, manifest, tensors, expected)


def test_bucket_plan_buckets_import_into_parameters_through_prepared_imports():
    tensors, expected = _plan_inputs("padded")
    buffer = np.zeros(1 << 17, np.uint8)
    plan = mxfp8.BucketPlan(tensors, bucket_bytes=1 << 16, buffer=buffer)
    assert plan.buffer is buffer and len(plan) == 2
    params = {name: (np.full(spec["data"].shape, 0xEE, np.uint8), np.full(expected[name].shape, 0xEE, np.uint8))
              for name, spec in tensors.items()}
    imports = [mxfp8.prepare_import_bucket(buffer[:size], manifest, params)
               for size, manifest in zip(plan.sizes, plan.manifests)]
    for i in range(len(plan)):
        plan.fill(i)
        imports[i].run()
    for name, (values, scales) in params.items():
        np.testing.assert_array_equal(values, tensors[name]["data"])
        np.testing.assert_array_equal(scales, expected[name])


def test_bucket_plan_refuses_bad_input():
    tensors, _ = _plan_inputs("swizzled")
    with pytest.raises(ValueError, match="tensors is empty"):
        mxfp8.BucketPlan({}, bucket_bytes=1 << 20)
    with pytest.raises(ValueError, match="the largest bucket needs"):
        mxfp8.BucketPlan(tensors, bucket_bytes=1 << 20, buffer=np.zeros(100, np.uint8))
    read_only = np.zeros(1 << 20, np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mxfp8.BucketPlan(tensors, bucket_bytes=1 << 20, buffer=read_only)
    plan = mxfp8.BucketPlan(tensors, bucket_bytes=1 << 20)
    for bad in (1, -2, True, "0"):
        with pytest.raises(IndexError, match="out of range"):
            plan.fill(bad)


def test_bucket_plan_fills_shards_as_iter_buckets_does():
    """Specs with "rows" / "cols" (resharding) go through BucketPlan's groups and prepared fills: each
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
    plan = mxfp8.BucketPlan(specs, bucket_bytes=bucket_bytes)
    walked = [(bucket.copy(), manifest) for bucket, manifest in mxfp8.iter_buckets(specs, bucket_bytes=bucket_bytes)]
    assert len(plan) == len(walked) > 1
    assert plan.manifests == [m for _, m in walked]
    names = []
    for i, (walked_bucket, manifest) in enumerate(walked):
        plan.buffer[:] = 0xEE  # poison: the fill must write what iter_buckets wrote
        bucket = plan.fill(i)
        assert bucket.size == plan.sizes[i] <= walked_bucket.size
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
    with pytest.raises(ValueError, match=r"tensors\['w1'\] has 'rows' / 'cols': ExportPlan exports whole"):
        mxfp8.ExportPlan(tensors)
