"""The receiver's import through the Python API, on host memory: buckets (also in shared memory, as the
weight-sync example sends them) and TE storage written into engine parameters, compact or 128x4. The
expected bytes come from conftest's permute-form swizzle, never from the library."""
from multiprocessing import shared_memory

import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8, swizzle_reference

POISON = 0xFF
SHAPES = [((100, 48), "swizzled"), ((257, 33), "padded"), ((3, 5, 64), "compact"), ((31, 1000), "swizzled")]


def expected_scales(s, layout, direction="rowwise"):
    if layout == "compact":
        return s
    return swizzle_reference(s if direction == "rowwise" else s.T.copy())


def sources(direction="rowwise", seed=0):
    specs, expected = {}, {}
    for i, (shape, storage) in enumerate(SHAPES):
        data, buf, s = make_mxfp8(shape, storage, direction=direction, seed=seed + i)
        name = f"layer{i}.weight"
        specs[name] = {"data": data, "scale_inv": buf, "swizzled": storage == "swizzled"}
        expected[name] = (data, s)
    return specs, expected


def poisoned_params(expected, layouts, direction="rowwise"):
    params = {}
    for name, (data, _) in expected.items():
        values = np.full(data.shape, POISON, np.uint8)
        scales = np.full(mxfp8.scales_shape(data.shape, layouts[name], direction), POISON, np.uint8)
        params[name] = (values, scales, layouts[name])
    return params


def check(params, expected, direction="rowwise"):
    for name, (data, s) in expected.items():
        values, scales, layout = params[name]
        np.testing.assert_array_equal(values, data, err_msg=name)
        np.testing.assert_array_equal(scales.reshape(-1), expected_scales(s, layout, direction).reshape(-1),
                                      err_msg=f"{name} ({layout})")


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_bucket_imports_into_compact_and_swizzled_parameters(direction):
    specs, expected = sources(direction)
    bucket, manifest = mxfp8.export_bucket(specs, direction=direction, alignment=64)
    assert all(e["direction"] == direction and e["scales_layout"] == "compact" for e in manifest)
    layouts = {name: ("cutlass_128x4" if i % 2 else "compact") for i, name in enumerate(specs)}
    params = poisoned_params(expected, layouts, direction)
    before = bucket.copy()
    mxfp8.import_bucket(bucket, manifest, params)
    check(params, expected, direction)
    np.testing.assert_array_equal(bucket, before)


def test_prepared_import_reads_the_bucket_at_each_run():
    specs, _ = sources()
    bucket, manifest = mxfp8.export_bucket(specs)
    layouts = {name: "cutlass_128x4" for name in specs}
    plan = None
    for step in range(3):
        specs, expected = sources(seed=10 * step)
        mxfp8.export_bucket(specs, bucket=bucket)  # the next refit, into the same bucket
        if plan is None:
            params = poisoned_params(expected, layouts)
            plan = mxfp8.prepare_import_bucket(bucket, manifest, params)
            assert all((p[0] == POISON).all() for p in params.values()), "preparing wrote a parameter"
        for values, scales, _ in params.values():
            values.fill(POISON)
            scales.fill(POISON)
        plan.run()
        check(params, expected)


def test_bucket_in_shared_memory():
    specs, expected = sources(seed=5)
    _, manifest = mxfp8.export_bucket(specs)
    total = max(e["scales_offset"] + e["scales_bytes"] for e in manifest)
    shm = shared_memory.SharedMemory(create=True, size=total)
    try:
        bucket = np.ndarray((total,), np.uint8, buffer=shm.buf)
        mxfp8.export_bucket(specs, bucket=bucket)
        # The receiver maps the same segment by name.
        peer = shared_memory.SharedMemory(name=shm.name)
        received = np.ndarray((total,), np.uint8, buffer=peer.buf)
        layouts = {name: "compact" for name in specs}
        params = poisoned_params(expected, layouts)
        mxfp8.import_bucket(received, manifest, params)
        check(params, expected)
        del received, bucket
        peer.close()
    finally:
        shm.close()
        shm.unlink()


def test_swizzled_parts_in_a_bucket_are_copied_with_padding_zeroed():
    """A bucket carrying TE's swizzled scales as they are (manifest scales_layout "cutlass_128x4")."""
    data, buf, s = make_mxfp8((100, 48), "swizzled", seed=3)  # padding poisoned
    bucket = np.concatenate([data.reshape(-1), buf.reshape(-1)])
    manifest = [{"name": "w", "shape": (100, 48), "fp8_dtype": "e4m3", "scales_layout": "cutlass_128x4",
                 "values_offset": 0, "values_bytes": data.size, "scales_offset": data.size, "scales_bytes": buf.size}]
    for layout in ("cutlass_128x4", "compact"):
        params = poisoned_params({"w": (data, s)}, {"w": layout})
        mxfp8.import_bucket(bucket, manifest, params)
        check(params, {"w": (data, s)})


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("prepared", [False, True])
def test_direct_import_from_te_storage(direction, prepared):
    specs, expected = sources(direction, seed=20)
    layouts = {name: ("compact" if i % 2 else "cutlass_128x4") for i, name in enumerate(specs)}
    params = poisoned_params(expected, layouts, direction)
    if prepared:
        plan = mxfp8.prepare_import_tensors(specs, params, direction=direction)
        plan.run()
    else:
        mxfp8.import_tensors(specs, params, direction=direction)
    check(params, expected, direction)


@pytest.mark.parametrize("prepared", [False, True])
def test_direct_import_reads_any_mapping(prepared):
    """The extension reads the specs and the params itself: read-only mappings of every level (the tensors,
    each spec, the params) import as dicts do, and a prepared plan keeps what it reads alive after the
    caller's mappings are gone."""
    from types import MappingProxyType
    specs, expected = sources(seed=40)
    layouts = {name: ("compact" if i % 2 else "cutlass_128x4") for i, name in enumerate(specs)}
    params = poisoned_params(expected, layouts)
    tensors = MappingProxyType({name: MappingProxyType(dict(spec)) for name, spec in specs.items()})
    call = mxfp8.prepare_import_tensors if prepared else mxfp8.import_tensors
    plan = call(tensors, MappingProxyType(params))
    if prepared:
        assert isinstance(plan, mxfp8.Plan) and plan.buffer is None and plan.manifest is None
        del tensors, specs  # the plan holds the sources, and the parameters it writes
        plan.run()
    check(params, expected)


def test_a_prepared_import_keeps_what_it_reads_and_writes_alive():
    """A Plan holds the bucket it reads (or the sources) and the parameters it writes for its whole life,
    whatever becomes of the caller's references, and lets them go with it."""
    import gc
    import weakref
    specs, expected = sources(seed=50)
    layouts = {name: "cutlass_128x4" for name in specs}
    bucket, manifest = mxfp8.export_bucket(specs)
    for prepare, source in ((lambda p: mxfp8.prepare_import_bucket(bucket, manifest, p), "bucket"),
                            (lambda p: mxfp8.prepare_import_tensors(specs, p), "specs")):
        params = poisoned_params(expected, layouts)
        held = [weakref.ref(a) for p in params.values() for a in p[:2]]
        held += [weakref.ref(bucket)] if source == "bucket" else [weakref.ref(s["scale_inv"]) for s in specs.values()]
        plan = prepare(params)
        del params
        if source == "bucket":
            del bucket
        else:
            del specs
        gc.collect()
        assert all(h() is not None for h in held)
        plan.run()
        check({name: (values(), scales(), "cutlass_128x4") for name, values, scales in
               zip(expected, held[0:8:2], held[1:8:2])}, expected)
        del plan
        gc.collect()
        assert all(h() is None for h in held)
        specs, expected = sources(seed=60)
        bucket, manifest = mxfp8.export_bucket(specs)


def test_bad_parameters_are_refused_before_anything_is_written():
    specs, expected = sources()
    bucket, manifest = mxfp8.export_bucket(specs)
    layouts = {name: "cutlass_128x4" for name in specs}
    params = poisoned_params(expected, layouts)
    name = manifest[1]["name"]
    values, scales, _ = params[name]
    params[name] = (values, scales[:-1], "cutlass_128x4")
    with pytest.raises(ValueError, match=r"desc\.scales\[1\]: 128x4 swizzled scales of a 257 x 2 matrix are 1536 bytes, got 1535"):
        mxfp8.import_bucket(bucket, manifest, params)
    assert all((p[0] == POISON).all() and (p[1] == POISON).all() for p in params.values())
    with pytest.raises(KeyError, match="layer0.weight"):
        mxfp8.import_bucket(bucket, manifest, {})
    with pytest.raises(ValueError, match="layout is 'swizzled'"):
        two = {n: p[:2] for n, p in poisoned_params(expected, layouts).items()}  # the call's layout applies
        mxfp8.import_bucket(bucket, manifest, two, layout="swizzled")
    wrong = [dict(e) for e in manifest]
    wrong[0]["scales_layout"] = "cutlass_128x4"  # a double transform: the part holds compact scales
    with pytest.raises(ValueError, match=r"desc.parts_in\[0\] gives 200 bytes of scales"):
        mxfp8.import_bucket(bucket, wrong, poisoned_params(expected, layouts))
