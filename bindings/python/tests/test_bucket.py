"""Buckets and the swizzle pair through the Python API, on host memory."""
import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8, swizzle_reference


def test_bucket_round_trip():
    specs, expected = {}, {}
    for i, (shape, storage) in enumerate([((100, 48), "swizzled"), ((257, 33), "padded"), ((3, 5, 64), "compact")]):
        data, buf, s = make_mxfp8(shape, storage, seed=i)
        specs[f"layer{i}.weight"] = {"data": data, "scale_inv": buf, "swizzled": storage == "swizzled"}
        expected[f"layer{i}.weight"] = (data, s)
    bucket, manifest = mxfp8.export_bucket(specs, alignment=64)
    assert [m["name"] for m in manifest] == list(specs)
    assert all(m["values_offset"] % 64 == 0 and m["scales_offset"] % 64 == 0 for m in manifest)
    parts = mxfp8.unpack_bucket(bucket, manifest)
    for name, (data, s) in expected.items():
        values, scales = parts[name]
        np.testing.assert_array_equal(values, data)
        np.testing.assert_array_equal(scales.reshape(s.shape), s)
        assert not np.shares_memory(values, data)  # a bucket holds copies


def test_swizzle_pair_matches_the_layout():
    rng = np.random.default_rng(1)
    s = rng.integers(1, 255, (300, 7), dtype=np.uint8)
    swz = mxfp8.swizzle_scales(s)
    np.testing.assert_array_equal(swz, swizzle_reference(s))
    np.testing.assert_array_equal(mxfp8.unswizzle_scales(swz, 300, 7), s)
    with pytest.raises(ValueError, match=r"the swizzled layout of a 300 x 7 scale matrix is 3072 bytes, but swizzled "
                                         r"has shape \(3071,\)"):
        mxfp8.unswizzle_scales(swz[:-1], 300, 7)
