"""export_components(..., rows=, cols=): one shard of a tensor, against the crop of the whole compact
export and of the test's own scales, for every storage (padding poisoned) and both directions."""
import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8

SHAPES = [(100, 48), (257, 200), (300, 33), (1, 16), (130, 96), (64, 1024), (40, 300)]


def _block_range(rng, extent):
    """A random legal range along the scale-block axis: block boundaries, the end clipped to extent,
    often one block or through the last (partial) one."""
    blocks = -(-extent // 32)
    b0 = int(rng.integers(0, blocks))
    kind = int(rng.integers(0, 4))
    b1 = b0 + 1 if kind == 0 else blocks if kind == 1 else int(rng.integers(b0 + 1, blocks + 1))
    return 32 * b0, min(32 * b1, extent)


def _any_range(rng, extent):
    b = int(rng.integers(0, extent))
    return b, int(rng.integers(b + 1, extent + 1))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_random_shards_are_the_crop_of_the_whole_export(shape, storage, direction):
    data, buf, s = make_mxfp8(shape, storage, direction, seed=hash((shape, storage, direction)) & 0xFFFF)
    m, k = shape
    whole_values, whole_scales = mxfp8.export_components(data, buf, swizzled=storage == "swizzled",
                                                         direction=direction, values_dtype="uint8")
    whole = np.from_dlpack(whole_scales).copy()
    assert np.array_equal(whole, s)
    rng = np.random.default_rng(m * 1000 + k)
    for _ in range(10):
        if direction == "rowwise":
            rows, cols = _any_range(rng, m), _block_range(rng, k)
            s_rows, s_cols = slice(*rows), slice(cols[0] // 32, -(-cols[1] // 32))
        else:
            rows, cols = _block_range(rng, m), _any_range(rng, k)
            s_rows, s_cols = slice(rows[0] // 32, -(-rows[1] // 32)), slice(*cols)
        values, scales = mxfp8.export_components(data, buf, swizzled=storage == "swizzled", direction=direction,
                                                 values_dtype="uint8", rows=rows, cols=cols)
        v, sc = np.from_dlpack(values), np.from_dlpack(scales)
        assert np.array_equal(v, data[slice(*rows), slice(*cols)])
        assert np.shares_memory(v, data) and not values.is_copy
        assert np.array_equal(sc, whole[s_rows, s_cols]), (rows, cols)
        assert np.array_equal(sc, s[s_rows, s_cols])


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
def test_fused_qkv_pieces_concatenate(storage):
    # A fused QKV weight of 8 query heads and 2 KV heads of 64 rows: TP-2 rank 1 takes heads 4..7 of Q,
    # KV head 1 of K and of V.
    head, k = 64, 96
    m = (8 + 2 + 2) * head
    data, buf, s = make_mxfp8((m, k), storage, seed=3)
    pieces = [(4 * head, 8 * head), (9 * head, 10 * head), (11 * head, 12 * head)]
    values, scales = mxfp8.export_components(data, buf, swizzled=storage == "swizzled", values_dtype="uint8",
                                             rows=pieces)
    want_rows = np.concatenate([np.arange(a, b) for a, b in pieces])
    assert np.array_equal(np.from_dlpack(values), data[want_rows])
    assert np.array_equal(np.from_dlpack(scales), s[want_rows])
    assert values.is_copy


def test_open_ends_and_cols_only():
    data, buf, s = make_mxfp8((70, 200), "swizzled", seed=1)
    values, scales = mxfp8.export_components(data, buf, swizzled=True, values_dtype="uint8", cols=(128, None))
    assert np.array_equal(np.from_dlpack(values), data[:, 128:])
    assert np.array_equal(np.from_dlpack(scales), s[:, 4:])


@pytest.mark.parametrize("rows, cols, error, message", [
    (None, (16, 48), ValueError, "options.shard.col_begin is 16, not a multiple of 32"),
    (None, (0, 40), ValueError, "options.shard.col_end is 40, not a multiple of 32"),
    ((50, 101), None, ValueError, "options.shard.row_end is 101, outside the tensor's 100 rows"),
    ((40, 40), None, ValueError, "rows [40, 40) are empty"),
    ([(0, 10), (90, 120)], None, ValueError, "options.shard.row_pieces[3] is 120"),
    (5, None, TypeError, "rows must be a (begin, end) pair"),
    # -1 is not "all but the last" here (nor MXFP8_SHARD_END, which it was, silently: every row); None is the end
    ((0, -1), None, ValueError, "rows is (0, -1): an end is a position, not negative (None is the end"),
    (None, (0, -1), ValueError, "cols is (0, -1): an end is a position, not negative"),
    ([(0, 10), (20, -1)], None, ValueError, "rows[1] is (20, -1): an end is a position, not negative"),
    (("a", 3), None, TypeError, "rows[0] must be an int"),
])
def test_bad_shards_name_the_problem(rows, cols, error, message):
    data, buf, _ = make_mxfp8((100, 48), "padded")
    before = buf.copy()
    with pytest.raises(error) as info:
        mxfp8.export_components(data, buf, rows=rows, cols=cols, swizzled=False)
    assert message in str(info.value)
    assert np.array_equal(buf, before)


def test_columnwise_boundaries_follow_the_blocks_along_m():
    data, buf, _ = make_mxfp8((100, 48), "swizzled", direction="columnwise")
    with pytest.raises(ValueError, match="columnwise scale blocks run 32 along M"):
        mxfp8.export_components(data, buf, swizzled=True, direction="columnwise", rows=(16, 100))
    with pytest.raises(ValueError, match="block must be"):
        mxfp8.export_components(data, buf, swizzled=True, direction="columnwise", rows=(0, 32), block="32x32")


def test_bucket_of_shards_unpacks_to_each_crop():
    """export_bucket / iter_buckets with "rows" / "cols" in a spec carry only the shard, described in the
    manifest as a 2-D (rows, cols) tensor."""
    specs, want = {}, {}
    for i, (storage, shape, rows, cols) in enumerate([
            ("swizzled", (300, 200), [(100, 200), (0, 50)], None),
            ("padded", (257, 96), (13, 250), (32, 96)),
            ("compact", (64, 1024), None, (512, 1024)),
            ("swizzled", (130, 48), None, None)]):
        data, buf, s = make_mxfp8(shape, storage, seed=10 + i)
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
    bucket, manifest = mxfp8.export_bucket(specs)
    parts = mxfp8.unpack_bucket(bucket, manifest)
    for name, (v, s) in want.items():
        assert np.array_equal(parts[name].values, v) and np.array_equal(parts[name].scales, s), name
        assert tuple(next(m for m in manifest if m["name"] == name)["shape"]) == v.shape
    names = []
    for bucket, manifest in mxfp8.iter_buckets(specs, bucket_bytes=40000):
        for name, part in mxfp8.unpack_bucket(bucket, manifest).items():
            assert np.array_equal(part.values, want[name][0]) and np.array_equal(part.scales, want[name][1])
            names.append(name)
    assert sorted(names) == sorted(want)


@pytest.mark.parametrize("layout", ["compact", "cutlass_128x4"])
def test_each_rank_imports_its_shard_of_a_whole_bucket(layout):
    """The receiver's side: a bucket of whole tensors; rank r imports rows / pieces / columns of it into
    parameters of the shard's size, the 128x4 reference swizzled from the permute form in conftest."""
    from conftest import swizzle_reference

    shapes = {"qkv": (768, 256), "o": (256, 256), "down": (256, 1056)}
    tensors, whole = {}, {}
    for i, (name, shape) in enumerate(shapes.items()):
        data, buf, s = make_mxfp8(shape, "swizzled", seed=20 + i)
        tensors[name] = {"data": data, "scale_inv": buf, "swizzled": True}
        whole[name] = (data, s)
    bucket, manifest = mxfp8.export_bucket(tensors)
    for rank in range(2):
        shards = {"qkv": {"rows": [(rank * 256, rank * 256 + 256), (512 + rank * 128, 640 + rank * 128)]},
                  "o": {"cols": (rank * 128, rank * 128 + 128)},
                  "down": {"cols": (rank * 544, 544 if rank == 0 else 1056)}}
        params, want = {}, {}
        for name, shard in shards.items():
            data, s = whole[name]
            pieces = shard.get("rows", [(0, data.shape[0])])
            index = np.concatenate([np.arange(a, b) for a, b in pieces])
            k0, k1 = shard.get("cols", (0, data.shape[1]))
            v, sc = data[index][:, k0:k1], s[index][:, k0 // 32:-(-k1 // 32)]
            want[name] = (v, sc if layout == "compact" else swizzle_reference(sc))
            params[name] = (np.full(v.shape, 0xFF, np.uint8), np.full(mxfp8.scales_shape(v.shape, layout), 0xFF, np.uint8))
        mxfp8.import_bucket(bucket, manifest, params, layout=layout, shards=shards)
        for name, (v, sc) in want.items():
            assert np.array_equal(params[name][0], v), (rank, name)
            assert np.array_equal(params[name][1].reshape(-1), sc.reshape(-1)), (rank, name)


def test_import_shards_name_the_tensor():
    data, buf, _ = make_mxfp8((100, 48), "padded")
    bucket, manifest = mxfp8.export_bucket({"w": {"data": data, "swizzled": False, "scale_inv": buf}})
    params = {"w": (np.empty((100, 48), np.uint8), np.empty((100, 2), np.uint8))}
    with pytest.raises(ValueError, match=r"desc.shards\[0\].col_begin is 16"):
        mxfp8.import_bucket(bucket, manifest, params, shards={"w": {"cols": (16, 48)}})
    with pytest.raises(KeyError, match=r"\['x'\], which the manifest does not hold"):
        mxfp8.import_bucket(bucket, manifest, params, shards={"x": {"cols": (0, 32)}})
    with pytest.raises(KeyError, match=r"\['x'\], which the tensors dict does not hold"):  # no manifest here
        mxfp8.import_tensors({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, params, shards={"x": {"cols": (0, 32)}})
    whole = {"w": (np.full((100, 48), 7, np.uint8), np.full((100, 2), 7, np.uint8))}
    for call in (lambda s: mxfp8.import_bucket(bucket, manifest, whole, shards=s),
                 lambda s: mxfp8.import_tensors({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, whole, shards=s)):
        with pytest.raises(ValueError, match=r"shards\['w'\] has 'row': a shard takes 'rows' and 'cols' only"):
            call({"w": {"row": (0, 10)}})  # misspelt: would have imported the whole tensor into whole-size params
        with pytest.raises(ValueError, match=r"shards\['w'\]: rows is \(0, -1\): an end is a position"):
            call({"w": {"rows": (0, -1)}})  # read as MXFP8_SHARD_END, it imported every row
        assert (whole["w"][0] == 7).all()


def test_reshard_benchmark_smoke_run_checks_its_shards():
    """bench/reshard.py --smoke: the benchmark's logic (bit-exact check of every shard against the crop,
    the JSON it writes and merges) in seconds."""
    import json
    import pathlib
    import subprocess
    import sys
    import tempfile

    bench = pathlib.Path(__file__).resolve().parents[3] / "bench" / "reshard.py"
    with tempfile.TemporaryDirectory() as tmp:
        merged = pathlib.Path(tmp) / "results.json"
        merged.write_text(json.dumps({"other": 1}))
        out = subprocess.run([sys.executable, str(bench), "--smoke", "--merge", str(merged)], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(merged.read_text())
    assert result["other"] == 1 and result["reshard"]["bit_exact"] is True
    assert set(result["reshard"]) >= {"shard_ms", "shard_copy_ms", "crop_ms", "model_ms", "model_copy_ms", "model_crop_ms"}


@pytest.mark.parametrize("storage", ["padded", "swizzled"])
def test_direct_import_of_each_ranks_shard(storage):
    """import_tensors(..., shards=): the rank's part read straight from the trainer's storage."""
    data, buf, s = make_mxfp8((384, 200), storage, seed=30)
    tensors = {"w": {"data": data, "scale_inv": buf, "swizzled": storage == "swizzled"}}
    for rank in range(2):
        shard = {"rows": (rank * 192, rank * 192 + 192), "cols": (0, 96)}
        params = {"w": (np.full((192, 96), 0xFF, np.uint8), np.full((192, 3), 0xFF, np.uint8))}
        mxfp8.import_tensors(tensors, params, shards={"w": shard})
        assert np.array_equal(params["w"][0], data[rank * 192:rank * 192 + 192, :96])
        assert np.array_equal(params["w"][1], s[rank * 192:rank * 192 + 192, :3])
        plan = mxfp8.prepare_import_tensors(tensors, params, shards={"w": shard})
        params["w"][1][...] = 0xFF
        plan.run()
        assert np.array_equal(params["w"][1], s[rank * 192:rank * 192 + 192, :3])
    swizzled_params = {"w": (np.empty((192, 96), np.uint8), np.empty(mxfp8.scales_shape((192, 96), "cutlass_128x4"), np.uint8))}
    if storage == "swizzled":  # a window of swizzled storage into 128x4 parameters: refused
        with pytest.raises(TypeError, match="stored in the 128x4 layout"):
            mxfp8.import_tensors(tensors, swizzled_params, layout="cutlass_128x4", shards={"w": {"rows": (0, 192), "cols": (0, 96)}})
    else:
        mxfp8.import_tensors(tensors, swizzled_params, layout="cutlass_128x4", shards={"w": {"rows": (0, 192), "cols": (0, 96)}})


# Degenerate shapes (the fourth probe of the Python layer, 2026-12-07): a zero anywhere is an empty tensor,
# whatever the other dimensions multiply to, and a negative dimension is refused as itself on every path.

def _forged_empty(shape, kept):
    """An empty uint8 tensor of `shape` (which NumPy and torch cannot make), forged; `kept` holds it for as long as
    the library may hold its managed tensor (the forgery's memory is the Python object's)."""
    from dlpack_forge import ForgedTensor, Producer

    memory = np.zeros(16, np.uint8)
    kept.append(Producer(ForgedTensor(memory.ctypes.data, shape, strides=[0] * (len(shape) - 1) + [1], keep=memory)))
    return kept[-1]


@pytest.mark.parametrize("lead", [(0, 2**40, 2**40), (2**40, 2**40, 0), (2**40, 0, 2**40)])
def test_a_zero_anywhere_is_an_empty_tensor_on_every_path(lead):
    """Rows and elements were multiplied left to right with an overflow check, so (2^40, 2^40, 0, 64) was refused
    ("more elements than int64 can count", "the number of rows overflows int64") where (0, 2^40, 2^40, 64) was taken."""
    shape, scales_shape, kept = lead + (64,), lead + (2,), []
    values, scales = mxfp8.export_components(_forged_empty(shape, kept), _forged_empty(scales_shape, kept),
                                             swizzled=False, values_dtype="uint8")
    assert tuple(scales.shape) == scales_shape and tuple(values.shape) == shape
    del values, scales  # the views release the forged inputs, which `kept` still holds
    spec = {"w": {"data": _forged_empty(shape, kept), "scale_inv": _forged_empty(scales_shape, kept), "swizzled": False}}
    bucket, manifest = mxfp8.export_bucket(spec)
    assert tuple(manifest[0]["scales_shape"]) == scales_shape and len(bucket) == 0  # (NumPy cannot view it: its limit)
    mxfp8.import_tensors(spec, {"w": (_forged_empty(shape, kept), _forged_empty(scales_shape, kept))})
    assert mxfp8.swizzle_scales(_forged_empty(scales_shape, kept)).shape == (0,)


def test_convert_takes_an_empty_k_of_any_rows_and_refuses_negative_shapes():
    """convert rounded the rows up to 4 for every target (DeepGEMM's alone needs it), so 2^63 - 1 rows of an
    empty K were refused where every other path takes them; a negative shape= passed the grouped path (two
    negatives multiply to the data's count) and was reported as a derived value elsewhere."""
    rows = 2**63 - 1
    data, scales = np.empty((rows, 0), np.uint8), np.empty((rows, 0), np.uint8)
    assert mxfp8.convert(data, scales, "compact", swizzled=False).scales.size == 0  # (float32 ones: NumPy's own limit)
    assert mxfp8.layout_bytes("cutlass_128x4", rows, 0) == 0 and mxfp8.layout_bytes("deepgemm", 0, rows) == 0
    w = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    q = mxfp8.quantize(w, values_dtype="uint8")
    for kw in (dict(num_experts=1, scales="compact", shape=(-2, -1, 64)), dict(shape=(4, -32))):
        with pytest.raises(ValueError, match=r"shape \(-2, -1, 64\) has a negative dimension|shape \(4, -32\) has a "
                                             r"negative dimension"):
            mxfp8.convert(q.rowwise_data, q.rowwise_scale_inv, "compact", swizzled=False, **kw)
    from dlpack_forge import ForgedTensor, Producer

    memory = np.zeros(64, np.uint8)
    negative = Producer(ForgedTensor(memory.ctypes.data, (-1, 64), keep=memory), shape=(-1, 64))
    with pytest.raises(ValueError, match="compact: its shape has a negative dimension"):
        mxfp8.swizzle_scales(negative)
    with pytest.raises(ValueError, match=r"data: shape \(-1, 64\) has a negative dimension"):
        mxfp8.export_grouped(negative, np.zeros(8, np.uint8), num_experts=1, swizzled=False)
