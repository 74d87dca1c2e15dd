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
    with pytest.raises(ValueError, match=r"destinations\[0\]: holds"):
        mxfp8.ExportPlan(tensors, out=small)
    read_only = np.zeros(sum(s.size for s in expected.values()), np.uint8)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        mxfp8.ExportPlan(tensors, out=read_only)
    with pytest.raises(ValueError, match="direction"):
        mxfp8.ExportPlan(tensors, direction="diagonal")
