"""NVFP4 tensors in buckets, on host arrays: export_bucket / iter_buckets / prepare_buckets with "format": "nvfp4"
specs (whole, or the sender's shard of each), unpack_bucket and import_bucket / prepare_import_bucket on the
receiver, against nvfp4_reference
(written from the format's rules) and conftest's permute-form swizzle: every source scale layout with
poisoned padding, both directions, per-row amax with its special values, both E4M3_MAX values, partial
blocks, a bucket mixing MXFP8 and NVFP4 tensors, and the inputs that must be refused."""
import numpy as np
import pytest

import mxfp8
from conftest import POISON, make_mxfp8, swizzle_reference
from nvfp4_reference import encode_scale, pack, random_case, store_scales

AMAXES = np.array([3.5, 0.0, 2688.0, 1e-30, 65504.0, 0.125, 7.0e6, np.inf, np.nan], np.float32)


def decode_scale(amax, e4m3_max):
    """amax / (6 * E4M3_MAX), one float32 division (vLLM ModelOpt's weight_scale_2), NaN canonical."""
    with np.errstate(invalid="ignore", over="ignore"):
        s = (np.asarray(amax, np.float32) / np.float32(6 * e4m3_max)).astype(np.float32)
    bits = s.view(np.uint32).copy()
    bits[np.isnan(s)] = 0x7FFFFFFF
    return bits


def nvfp4_source(shape, layout, direction, per_row, e4m3_max, seed):
    """A spec and its reference: packed values, compact scales and amax of the stored matrix."""
    m, k = shape
    rows, cols = (m, k) if direction == "rowwise" else (k, m)
    codes, scales = random_case(rows, cols, seed)
    amax = np.resize(AMAXES, rows).astype(np.float32) if per_row else np.array([7.25], np.float32)
    spec = {"format": "nvfp4", "data": pack(codes), "scale_inv": store_scales(scales, layout), "amax": amax,
            "swizzled": layout == "swizzled", "shape": shape, "e4m3_max": e4m3_max}
    return spec, (pack(codes), scales, amax, e4m3_max)


def params_for(ref, layout):
    """Poisoned destinations of one NVFP4 entry: values, scales in `layout`, one float32 per amax."""
    values, scales, amax, _ = ref
    n = scales.size if layout == "compact" else swizzle_reference(scales).size
    return (np.full(values.size, POISON, np.uint8), np.full(n, POISON, np.uint8),
            np.full(amax.size, np.nan, np.float32), layout)


def check_params(p, ref, convention="decode"):
    values, scales, amax, e4m3_max = ref
    np.testing.assert_array_equal(p[0], values.reshape(-1))
    want = scales.reshape(-1) if p[3] == "compact" else swizzle_reference(scales)
    np.testing.assert_array_equal(p[1], want)
    if convention == "decode":
        np.testing.assert_array_equal(p[2].view(np.uint32), decode_scale(amax, e4m3_max))
    else:
        np.testing.assert_array_equal(p[2].view(np.uint32), np.asarray(encode_scale(amax, e4m3_max), np.float32).view(np.uint32))


CASES = [  # (shape, source layout, direction, per-row amax, E4M3_MAX, destination layout)
    ((130, 40), "compact", "rowwise", True, 448, "cutlass_128x4"),
    ((100, 48), "padded", "rowwise", False, 256, "compact"),
    ((257, 100), "swizzled", "rowwise", True, 448, "compact"),
    ((1, 18), "swizzled", "rowwise", False, 448, "cutlass_128x4"),
    ((34, 130), "padded", "columnwise", False, 448, "cutlass_128x4"),
    ((96, 20), "swizzled", "columnwise", False, 256, "compact"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
@pytest.mark.parametrize("convention", ["decode", "encode"])
def test_nvfp4_tensor_round_trips_through_a_bucket(case, convention):
    shape, layout, direction, per_row, e4m3_max, target = case
    spec, ref = nvfp4_source(shape, layout, direction, per_row, e4m3_max, seed=sum(shape))
    bucket, manifest = mxfp8.export_bucket({"w": spec}, direction=direction, alignment=64)
    (entry,) = manifest
    assert entry["format"] == "nvfp4" and entry["e4m3_max"] == e4m3_max and "fp8_dtype" not in entry
    assert entry["amax_offset"] % 64 == 0 and entry["amax_bytes"] == 4 * ref[2].size
    # The wire: the stored bytes, the compact scales and the amax as TE keeps it.
    np.testing.assert_array_equal(bucket[entry["values_offset"]:][:entry["values_bytes"]], ref[0].reshape(-1))
    np.testing.assert_array_equal(bucket[entry["scales_offset"]:][:entry["scales_bytes"]], ref[1].reshape(-1))
    np.testing.assert_array_equal(bucket[entry["amax_offset"]:][:entry["amax_bytes"]], ref[2].view(np.uint8))
    p = params_for(ref, target)
    mxfp8.import_bucket(bucket, manifest, {"w": p}, global_scale=convention)
    check_params(p, ref, convention)


def test_unpack_bucket_gives_views_and_weight_scale_2():
    spec, ref = nvfp4_source((130, 40), "swizzled", "rowwise", True, 448, seed=3)
    bucket, manifest = mxfp8.export_bucket({"w": spec})
    parts = mxfp8.unpack_bucket(bucket, manifest)["w"]
    assert isinstance(parts, mxfp8.nvfp4.Components)
    assert parts.values.shape == (130, 20) and parts.scales.shape == (130, 3)
    assert np.shares_memory(parts.values, bucket) and np.shares_memory(parts.scales, bucket)
    np.testing.assert_array_equal(parts.values, ref[0])
    np.testing.assert_array_equal(parts.scales, ref[1])
    ok = ~np.isnan(ref[2])
    np.testing.assert_array_equal(parts.global_scale.view(np.uint32)[ok], decode_scale(ref[2], 448)[ok])
    # The same as the library's own export of the tensor.
    lib = mxfp8.nvfp4.export_components(spec["data"], spec["scale_inv"], spec["amax"], swizzled=True)
    np.testing.assert_array_equal(np.from_dlpack(lib.scales), parts.scales)


def test_mixed_bucket_of_mxfp8_and_nvfp4_tensors():
    nv_a, ref_a = nvfp4_source((130, 40), "swizzled", "rowwise", True, 448, seed=5)
    nv_b, ref_b = nvfp4_source((64, 32), "padded", "rowwise", False, 256, seed=6)
    data, buf, s = make_mxfp8((100, 96), "swizzled", seed=7)
    tensors = {"a": nv_a, "m": {"data": data, "scale_inv": buf, "swizzled": True}, "b": nv_b}
    bucket, manifest = mxfp8.export_bucket(tensors)
    assert [e.get("format", "mxfp8") for e in manifest] == ["nvfp4", "mxfp8", "nvfp4"]
    pa, pb = params_for(ref_a, "cutlass_128x4"), params_for(ref_b, "compact")
    mv, ms = np.full(9600, POISON, np.uint8), np.full(512, POISON, np.uint8)
    mxfp8.import_bucket(bucket, manifest, {"a": pa, "m": (mv, ms, "cutlass_128x4"), "b": pb})
    check_params(pa, ref_a)
    check_params(pb, ref_b)
    np.testing.assert_array_equal(mv, data.reshape(-1))
    np.testing.assert_array_equal(ms, swizzle_reference(s))
    parts = mxfp8.unpack_bucket(bucket, manifest)
    np.testing.assert_array_equal(parts["m"].scales, s)
    np.testing.assert_array_equal(parts["b"].scales, ref_b[1])


def test_iter_buckets_and_bucket_plan_group_nvfp4_tensors():
    sources = [nvfp4_source((130, 40 + 16 * i), "padded", "rowwise", i % 2 == 1, 448, seed=i) for i in range(5)]
    tensors = {f"w{i}": spec for i, (spec, _) in enumerate(sources)}
    refs = {f"w{i}": ref for i, (_, ref) in enumerate(sources)}
    buffer = np.full(8192, POISON, np.uint8)
    seen = []
    for bucket, manifest in mxfp8.iter_buckets(tensors, bucket_bytes=8192, buffer=buffer):
        params = {e["name"]: params_for(refs[e["name"]], "compact") for e in manifest}
        mxfp8.import_bucket(bucket, manifest, params)
        for name, p in params.items():
            check_params(p, refs[name])
            seen.append(name)
    assert seen == list(tensors) and len(seen) == 5

    plans = mxfp8.prepare_buckets(tensors, bucket_bytes=8192)
    assert len(plans) > 1
    for plan in plans:
        manifest = plan.manifest
        bucket = plan.run()
        params = {e["name"]: params_for(refs[e["name"]], "cutlass_128x4") for e in manifest}
        imported = mxfp8.prepare_import_bucket(bucket, manifest, params, global_scale="encode")
        assert all(np.all(p[0] == POISON) for p in params.values())  # preparing writes nothing
        imported.run()
        for name, p in params.items():
            check_params(p, refs[name], "encode")


def test_an_mxfp8_consumer_cannot_read_an_nvfp4_entry():
    spec, ref = nvfp4_source((40, 64), "compact", "rowwise", False, 448, seed=9)
    bucket, manifest = mxfp8.export_bucket({"w": spec})
    p = params_for(ref, "compact")
    # A manifest entry without its format reads as MXFP8: its NVFP4 keys give it away, and without them
    # the part sizes do.
    stripped = [{k: v for k, v in manifest[0].items() if k != "format"}]
    for read in (lambda: mxfp8.import_bucket(bucket, stripped, {"w": (p[0], p[1])}),
                 lambda: mxfp8.unpack_bucket(bucket, stripped)):
        with pytest.raises(ValueError, match=r"manifest\[0\] is an MXFP8 entry and has 'amax_offset', an NVFP4"):
            read()
    bare = [{k: v for k, v in stripped[0].items() if k not in ("amax_offset", "amax_bytes", "e4m3_max")}]
    with pytest.raises(ValueError, match="gives 1280 bytes of values, its shape and row-major layout give 2560"):
        mxfp8.import_bucket(bucket, bare, {"w": (p[0], p[1])})
    with pytest.raises(ValueError, match="has no 'fp8_dtype'"):
        mxfp8.unpack_bucket(bucket, bare)
    # MXFP8 parameters for an NVFP4 entry.
    with pytest.raises(ValueError, match="is an NVFP4 entry: it must be"):
        mxfp8.import_bucket(bucket, manifest, {"w": (p[0], p[1])})
    # Too small a destination: nothing is written.
    short = (p[0][:-1], p[1], p[2], "compact")
    with pytest.raises(ValueError, match=r"desc\.values\[0\]"):
        mxfp8.import_bucket(bucket, manifest, {"w": short})
    assert np.all(p[0] == POISON) and np.all(p[1] == POISON) and np.all(np.isnan(p[2]))
    with pytest.raises(ValueError, match="global_scale is 'amax'"):
        mxfp8.import_bucket(bucket, manifest, {"w": p}, global_scale="amax")


@pytest.mark.parametrize("entry, key, value", [
    ("m", "amax_offset", "garbage"), ("m", "amax_bytes", [1, 2]), ("m", "e4m3_max", 3.5), ("m", "amax_offset", 0),
    ("a", "fp8_dtype", {"not": "a dtype"}), ("a", "fp8_dtype", "e4m3"),
])
def test_a_key_of_the_other_format_is_refused(entry, key, value):
    # Read by no reader of that entry, the key would pass unchecked whatever it held: refused by name, as
    # import_tensors refuses a spec's, before anything is written.
    nv, ref = nvfp4_source((40, 64), "compact", "rowwise", False, 448, seed=11)
    data, buf, s = make_mxfp8((100, 48), "compact", seed=12)
    bucket, manifest = mxfp8.export_bucket({"m": {"data": data, "swizzled": False, "scale_inv": buf}, "a": nv})
    i = [e["name"] for e in manifest].index(entry)
    manifest[i][key] = value
    kind, other = ("MXFP8", "an NVFP4") if entry == "m" else ("NVFP4", "an MXFP8")
    message = rf"manifest\[{i}\] is an {kind} entry and has '{key}', {other}"
    mv, ms = np.full(4800, POISON, np.uint8), np.full(200, POISON, np.uint8)
    pa = params_for(ref, "compact")
    with pytest.raises(ValueError, match=message):
        mxfp8.unpack_bucket(bucket, manifest)
    with pytest.raises(ValueError, match=message):
        mxfp8.import_bucket(bucket, manifest, {"m": (mv, ms), "a": pa})
    assert np.all(mv == POISON) and np.all(ms == POISON) and np.all(pa[0] == POISON)


def test_bad_nvfp4_specs_are_refused():
    spec, _ = nvfp4_source((40, 64), "compact", "rowwise", False, 448, seed=10)
    with pytest.raises(ValueError, match="has no 'amax'"):
        mxfp8.export_bucket({"w": {k: v for k, v in spec.items() if k != "amax"}})
    with pytest.raises(ValueError, match="'fp8_dtype', which NVFP4 tensors do not take"):
        mxfp8.export_bucket({"w": dict(spec, fp8_dtype="e4m3")})
    with pytest.raises(ValueError, match="'amax', which only NVFP4 tensors take"):
        mxfp8.export_bucket({"w": {k: v for k, v in spec.items() if k != "format"}})
    with pytest.raises(ValueError, match="e4m3_max"):
        mxfp8.export_bucket({"w": dict(spec, e4m3_max=300)})
    with pytest.raises(ValueError, match="prepare_export exports MXFP8 scales"):
        mxfp8.prepare_export({"w": spec})
    with pytest.raises(ValueError, match=r"columnwise_data: shape \(40, 32\) does not hold the stored 64 x 40 matrix"):
        mxfp8.export_bucket({"w": spec}, direction="columnwise")


@pytest.mark.parametrize("prepared", [False, True])
@pytest.mark.parametrize("convention", ["decode", "encode"])
def test_import_tensors_reads_nvfp4_storage_directly(prepared, convention):
    """The direct path (mxfp8_import_tensors_mixed): TE's NVFP4 storage, next to an MXFP8 tensor, straight
    into the engine's parameters; a prepared plan re-reads the storage at every run."""
    nv_a, ref_a = nvfp4_source((130, 40), "swizzled", "rowwise", True, 448, seed=21)
    nv_b, ref_b = nvfp4_source((100, 50), "padded", "rowwise", False, 256, seed=22)
    data, buf, s = make_mxfp8((40, 64), "padded", seed=23)
    tensors = {"a": nv_a, "m": {"data": data, "swizzled": False, "scale_inv": buf}, "b": nv_b}
    pa, pb = params_for(ref_a, "cutlass_128x4"), params_for(ref_b, "compact")
    mv, ms = np.full(2560, POISON, np.uint8), np.full(80, POISON, np.uint8)
    params = {"a": pa, "m": (mv, ms, "compact"), "b": pb}
    if prepared:
        plan = mxfp8.prepare_import_tensors(tensors, params, global_scale=convention)
        assert np.all(pa[0] == POISON)
        plan.run()
    else:
        mxfp8.import_tensors(tensors, params, global_scale=convention)
    check_params(pa, ref_a, convention)
    check_params(pb, ref_b, convention)
    np.testing.assert_array_equal(mv, data.reshape(-1))
    np.testing.assert_array_equal(ms, s.reshape(-1))
    if prepared:  # the storage changes in place (an optimizer step); the plan moves what it holds now
        nv_a["amax"][:] = nv_a["amax"][::-1].copy()
        plan.run()
        check_params(pa, (ref_a[0], ref_a[1], nv_a["amax"], 448), convention)


def shard_reference(ref, direction, rows, cols):
    """The shard of an NVFP4 reference cut by the header's rules: rowwise the stored (M, K) itself;
    columnwise the stored (K, M), the shard's rows of M its columns and its columns of K its rows."""
    values, scales, amax, e4m3_max = ref
    ranges = [rows] if isinstance(rows[0], int) else rows
    if direction == "rowwise":
        stored_rows = np.concatenate([np.arange(a, b) for a, b in ranges])
        c0, c1 = cols
    else:
        stored_rows, (c0, c1) = np.arange(*cols), ranges[0]
    out_scales = scales[stored_rows][:, c0 // 16:c0 // 16 + -(-(c1 - c0) // 16)]
    out_amax = amax[stored_rows] if amax.size > 1 else amax
    return values[stored_rows][:, c0 // 2:c1 // 2], out_scales, out_amax, e4m3_max


NVFP4_SHARDS = [  # (shape, direction, per-row amax, the receiver's rows, cols, its scales layout)
    ((130, 72), "rowwise", False, (3, 70), (16, 48), "compact"),
    ((130, 72), "rowwise", True, [(100, 130), (0, 10)], (32, 72), "compact"),
    ((130, 72), "rowwise", True, [(0, 128), (128, 130)], (0, 64), "cutlass_128x4"),
    ((100, 50), "columnwise", False, (16, 100), (3, 40), "cutlass_128x4"),
    ((100, 50), "columnwise", False, (0, 32), (0, 50), "compact"),
]


@pytest.mark.parametrize("case", NVFP4_SHARDS, ids=lambda c: f"{c[1]}-{c[3]}-{c[4]}-{c[5]}")
@pytest.mark.parametrize("convention", ["decode", "encode"])
def test_import_bucket_takes_a_shard_of_an_nvfp4_tensor(case, convention):
    shape, direction, per_row, rows, cols, target = case
    spec, ref = nvfp4_source(shape, "swizzled", direction, per_row, 448, seed=sum(shape) + len(rows))
    bucket, manifest = mxfp8.export_bucket({"w": spec}, direction=direction)
    want = shard_reference(ref, direction, rows, cols)
    p = params_for(want, target)
    mxfp8.import_bucket(bucket, manifest, {"w": p}, shards={"w": {"rows": rows, "cols": cols}},
                        global_scale=convention)
    check_params(p, want, convention)


@pytest.mark.parametrize("case", NVFP4_SHARDS, ids=lambda c: f"{c[1]}-{c[3]}-{c[4]}-{c[5]}")
@pytest.mark.parametrize("route", ["iter_buckets", "bucket_plan"])
def test_a_bucket_of_nvfp4_shards(case, route):
    """The sender's side (the transfer's desc.shards of NVFP4 entries): each rank is sent only its shard
    of each weight, next to an MXFP8 tensor's shard in the same bucket; the receiver imports the entries
    whole, and they equal the shard cut by the header's rules (the per-row amax too)."""
    shape, direction, per_row, rows, cols, target = case
    spec, ref = nvfp4_source(shape, "swizzled", direction, per_row, 448, seed=sum(shape) + len(rows) + 3)
    want = shard_reference(ref, direction, rows, cols)
    data, buf, s = make_mxfp8((64, 96), "padded", direction=direction, seed=26)
    m_rows = (0, 32) if direction == "rowwise" else (32, 64)
    tensors = {"w": dict(spec, rows=rows, cols=cols), "m": {"data": data, "swizzled": False, "scale_inv": buf, "rows": m_rows}}
    if route == "iter_buckets":
        (bucket, manifest), = list(mxfp8.iter_buckets(tensors, direction=direction, bucket_bytes=1 << 20))
    else:
        plans = mxfp8.prepare_buckets(tensors, direction=direction, bucket_bytes=1 << 20)
        ((bucket, manifest),) = [(p.run().copy(), p.manifest) for p in plans]
    w, m = manifest
    assert w["format"] == "nvfp4" and w["amax_bytes"] == 4 * want[2].size
    np.testing.assert_array_equal(bucket[w["amax_offset"]:][:w["amax_bytes"]], want[2].view(np.uint8))
    p = params_for(want, target)
    mv, ms = np.full(32 * 96, POISON, np.uint8), np.full(32 * 3, POISON, np.uint8)
    mxfp8.import_bucket(bucket, manifest, {"w": p, "m": (mv, ms, "compact")})
    check_params(p, want)
    r0 = m_rows[0]
    np.testing.assert_array_equal(mv, data.view(np.uint8)[r0:r0 + 32].reshape(-1))
    np.testing.assert_array_equal(ms, (s[:32] if direction == "rowwise" else s[1]).reshape(-1))


def test_a_bucket_refuses_nvfp4_shards_the_transfer_refuses():
    spec, _ = nvfp4_source((100, 50), "compact", "columnwise", False, 448, seed=32)
    with pytest.raises(TypeError, match="row pieces for a columnwise NVFP4"):  # MXFP8_ERROR_UNSUPPORTED
        mxfp8.export_bucket({"w": dict(spec, rows=[(0, 16), (32, 48)])}, direction="columnwise")
    with pytest.raises(ValueError, match="not a multiple of 16"):
        mxfp8.export_bucket({"w": dict(spec, rows=(8, 24))}, direction="columnwise")


def test_a_plan_row_with_another_e4m3_max_is_refused():
    """The extension's fill checks each NVFP4 plan row's E4M3_MAX against its tensor: the receiver's
    manifest is built from those rows, and the transfer itself never reads them."""
    from mxfp8 import _mxfp8
    spec, _ = nvfp4_source((64, 64), "compact", "rowwise", False, 448, seed=33)
    t = _mxfp8.Nvfp4Tensor(rowwise_data=spec["data"], rowwise_scale_inv=spec["scale_inv"], rowwise_amax=spec["amax"],
                           shape=list(spec["shape"]), swizzled=False, e4m3_max=448, stream=None, exchange=False)
    entries, nvfp4_entries, total = _mxfp8.bucket_plan([t])
    bucket = np.zeros(total, np.uint8)
    (ao, ab, e4m3_max), = nvfp4_entries
    assert e4m3_max == 448
    with pytest.raises(ValueError, match=r"nvfp4_plan\[0\] gives e4m3_max 256, tensors\[0\] has 448"):
        _mxfp8.export_bucket([t], entries, [(ao, ab, 256)], total, bucket)
    assert not bucket.any()


def test_import_bucket_refuses_nvfp4_shards_off_the_blocks():
    spec, ref = nvfp4_source((100, 50), "compact", "columnwise", False, 448, seed=31)
    bucket, manifest = mxfp8.export_bucket({"w": spec}, direction="columnwise")
    p = params_for(shard_reference(ref, "columnwise", (0, 16), (0, 50)), "compact")
    with pytest.raises(TypeError, match="row pieces for a columnwise NVFP4"):  # MXFP8_ERROR_UNSUPPORTED
        mxfp8.import_bucket(bucket, manifest, {"w": p}, shards={"w": {"rows": [(0, 16), (32, 48)]}})
    with pytest.raises(ValueError, match="not a multiple of 16"):
        mxfp8.import_bucket(bucket, manifest, {"w": p}, shards={"w": {"rows": (8, 24)}})
    assert np.all(p[0] == POISON) and np.all(np.isnan(p[2]))


@pytest.mark.parametrize("case", NVFP4_SHARDS, ids=lambda c: f"{c[1]}-{c[3]}-{c[4]}-{c[5]}")
@pytest.mark.parametrize("storage", ["padded", "swizzled"])
@pytest.mark.parametrize("prepared", [False, True])
def test_import_tensors_takes_a_shard_of_nvfp4_storage(case, storage, prepared):
    """The direct path's shards (mxfp8_import_tensors_mixed): a receiver's shard read straight from the
    trainer's NVFP4 storage, next to an MXFP8 tensor's shard, cut as the bucket path cuts it."""
    shape, direction, per_row, rows, cols, target = case
    if storage == "swizzled" and target == "cutlass_128x4" and (rows, cols) != ((0, shape[0]), (0, shape[1])):
        target = "compact"  # a window of 128x4-stored scales goes into compact parameters (the 128x4 rule)
    spec, ref = nvfp4_source(shape, storage, direction, per_row, 448, seed=sum(shape) + len(rows) + 7)
    want = shard_reference(ref, direction, rows, cols)
    p = params_for(want, target)
    data, buf, s = make_mxfp8((64, 96), "padded", direction=direction, seed=25)
    mv, ms = np.full(32 * 96, POISON, np.uint8), np.full(32 * 3, POISON, np.uint8)
    tensors = {"w": spec, "m": {"data": data, "swizzled": False, "scale_inv": buf}}
    params = {"w": p, "m": (mv, ms, "compact")}
    m_rows = (0, 32) if direction == "rowwise" else (32, 64)
    shards = {"w": {"rows": rows, "cols": cols}, "m": {"rows": m_rows, "cols": (0, 96)}}
    if prepared:
        plan = mxfp8.prepare_import_tensors(tensors, params, direction=direction, shards=shards)
        assert np.all(p[0] == POISON)
        plan.run()
    else:
        mxfp8.import_tensors(tensors, params, direction=direction, shards=shards)
    check_params(p, want)
    r0 = m_rows[0]
    np.testing.assert_array_equal(mv, data.view(np.uint8)[r0:r0 + 32].reshape(-1))
    np.testing.assert_array_equal(ms, (s[:32] if direction == "rowwise" else s[1]).reshape(-1))


def test_import_tensors_refuses_nvfp4_shards_off_the_blocks_and_missing_parts():
    spec, ref = nvfp4_source((40, 64), "compact", "rowwise", False, 448, seed=24)
    p = params_for(ref, "compact")
    with pytest.raises(ValueError, match=r"shards\[0\]\.col_begin is 8, not a multiple of 16"):
        mxfp8.import_tensors({"w": spec}, {"w": p}, shards={"w": {"cols": (8, 64)}})
    # The library indexes the entry; the message also gives the caller's name for it.
    other, other_ref = nvfp4_source((40, 64), "compact", "rowwise", False, 448, seed=27)
    op = params_for(other_ref, "compact")
    with pytest.raises(ValueError, match=r"shards\[1\]\.col_begin is 8.*\(entry 1 is 'layers\.3\.w'\)$"):
        mxfp8.import_tensors({"w": spec, "layers.3.w": other}, {"w": p, "layers.3.w": op},
                             shards={"layers.3.w": {"cols": (8, 64)}})
    bucket, manifest = mxfp8.export_bucket({"w": spec, "layers.3.w": other})
    with pytest.raises(ValueError, match=r"desc\.shards\[1\]\.col_begin is 8.*\(entry 1 is 'layers\.3\.w'\)$"):
        mxfp8.import_bucket(bucket, manifest, {"w": p, "layers.3.w": op}, shards={"layers.3.w": {"cols": (8, 64)}})
    col_spec, _ = nvfp4_source((100, 50), "compact", "columnwise", False, 448, seed=26)
    with pytest.raises(TypeError, match="row pieces for a columnwise NVFP4"):  # MXFP8_ERROR_UNSUPPORTED
        mxfp8.import_tensors({"w": col_spec}, {"w": p}, direction="columnwise",
                             shards={"w": {"rows": [(0, 16), (32, 48)]}})
    with pytest.raises(ValueError, match="is an NVFP4 entry: it must be"):
        mxfp8.import_tensors({"w": spec}, {"w": (p[0], p[1])})
    with pytest.raises(ValueError, match="has no 'amax'"):
        mxfp8.import_tensors({"w": {k: v for k, v in spec.items() if k != "amax"}}, {"w": p})
    assert np.all(p[0] == POISON) and np.all(np.isnan(p[2]))
