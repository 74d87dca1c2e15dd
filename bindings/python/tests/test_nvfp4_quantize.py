"""NVFP4 quantize on the host, bit for bit against nvfp4_quantize_reference.py (TE's rule written in NumPy).

Transformer Engine's own reference (transformer_engine/pytorch/custom_recipes/reference_nvfp4.py) needs
torch and an installed transformer_engine (a CUDA build): not importable here, so it is not run."""
import numpy as np
import pytest

import mxfp8
import nvfp4_quantize_reference as ref

ml_dtypes = pytest.importorskip("ml_dtypes")

F32 = np.float32
# K even throughout: NVFP4 rows fill whole bytes (odd K is refused, test_nvfp4_round_trip.py).
SHAPES = [(1, 16), (3, 32), (5, 18), (7, 2), (4, 34), (2, 30), (130, 50), (2, 3, 40), (1, 2), (9, 14)]
OPTIONS = [
    dict(),
    dict(four_over_six="mae"),
    dict(four_over_six="mse"),
    dict(four_over_six="mae", e4m3_max=256),
    dict(four_over_six="mse", e4m3_max=256),
]


def _ref_kwargs(options):
    return dict(four_over_six=options.get("four_over_six"), e4m3_max=options.get("e4m3_max", 448))


def as_dtype(x, dtype):
    """The input in `dtype`, and its exact float32 widening (what TE's kernels compute on)."""
    if dtype == "float32":
        x = x.astype(F32)
        return x, x
    if dtype == "float16":
        with np.errstate(over="ignore"):  # large salts become +-Inf in float16, on purpose
            x = x.astype(np.float16)
    else:
        x = x.astype(ml_dtypes.bfloat16)
    return x, x.astype(F32)


def specials(rng, shape):
    """Random data salted with NaN, +-Inf, zeros of both signs, float32/fp16/bf16 subnormals, all-zero
    blocks, E2M1 midpoints and E4M3 boundary magnitudes."""
    x = rng.standard_normal(shape).astype(F32) * F32(rng.choice([1e-3, 1.0, 300.0]))
    flat = x.reshape(-1)
    n = flat.size
    pool = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-41, 6e-8, -2e-39, 0.25, 0.75, 1.25, 1.75,
                     2.5, 3.5, 5.0, -0.25, -5.0, 448.0, 464.0, 2688.0, 1e30, -3e38], F32)
    idx = rng.choice(n, size=min(n, max(1, n // 8)), replace=False)
    flat[idx] = rng.choice(pool, size=idx.size)
    if shape[-1] >= 16 and shape[0] > 1:
        x.reshape(-1, shape[-1])[1, :16] = 0.0  # an all-zero block
    return x


def run(x, **options):
    q = mxfp8.nvfp4_quantize(x, **options)
    return np.asarray(q.values), np.asarray(q.scales), np.asarray(q.amax)


def expect(xf, **options):
    per_row = options.get("per_row", False)
    amax = options.get("amax")
    m, k = int(np.prod(xf.shape[:-1])), xf.shape[-1]
    return ref.quantize(xf.reshape(m, k), amax=amax, per_row=per_row, **_ref_kwargs(options))


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matches_reference_with_specials(shape, dtype, options):
    rng = np.random.default_rng(hash((shape, dtype)) % 2**32)
    x, xf = as_dtype(specials(rng, shape), dtype)
    values, scales, amax = run(x, **options)
    ev, es, ea = expect(xf, **options)
    m = int(np.prod(shape[:-1]))
    assert values.shape == shape[:-1] + (-(-shape[-1] // 2),)
    assert scales.shape == shape[:-1] + (-(-shape[-1] // 16),)
    np.testing.assert_array_equal(amax.view(np.uint32), ea.view(np.uint32))
    np.testing.assert_array_equal(scales.reshape(m, -1), es)
    np.testing.assert_array_equal(values.reshape(m, -1), ev)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("seed", range(6))
def test_random_data_per_row_amax(seed, options):
    rng = np.random.default_rng(100 + seed)
    shape = (int(rng.integers(1, 40)), 2 * int(rng.integers(1, 45)))
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-8, 8, size=(shape[0], 1)))).astype(F32)
    values, scales, amax = run(x, per_row=True, **options)
    ev, es, ea = expect(x, per_row=True, **options)
    np.testing.assert_array_equal(amax.view(np.uint32), ea.view(np.uint32))
    np.testing.assert_array_equal(scales, es)
    np.testing.assert_array_equal(values, ev)


def test_e2m1_midpoints_round_to_even():
    # amax 2688 gives S_enc = 1; a block whose amax is 6 gets scale 1.0 and multiplier 1, so each element
    # is encoded as it is: the midpoints between E2M1 neighbours, and their float neighbours.
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], F32)
    row = np.concatenate([mids, np.nextafter(mids, F32(0)), np.nextafter(mids, F32(10))])
    row = np.concatenate([row, -row, [6.0, 2688.0]]).astype(F32)
    x = np.zeros((2, 48), F32)
    x[0, : row.size - 1] = row[:-1]  # block amaxes 6 except the last
    x[1, 0] = 2688.0
    x[0, 15], x[0, 31], x[0, 47] = 6.0, 6.0, 6.0
    values, scales, amax = run(x)
    assert amax[0] == 2688.0
    assert list(scales[0]) == [0x38, 0x38, 0x38]  # E4M3 1.0
    codes = np.stack([values[0] & 15, values[0] >> 4], axis=1).reshape(-1)
    want = {0.25: 0, 0.75: 2, 1.25: 2, 1.75: 4, 2.5: 4, 3.5: 6, 5.0: 6}
    for i, v in enumerate(x[0]):
        if float(v) in want:
            assert codes[i] == want[float(v)], (i, v)
        elif -float(v) in want:
            assert codes[i] == want[-float(v)] | 8, (i, v)
    np.testing.assert_array_equal(values, expect(x)[0])


def test_block_scales_at_e4m3_boundaries_and_saturation():
    # S_enc = 1 (amax 2688): block scale = e4m3(block_amax * (1/6)). Sweep block amaxes across E4M3
    # rounding midpoints, its subnormal range, zero, and (with a small given amax) past saturation.
    rng = np.random.default_rng(7)
    mids = (ref.E4M3[1:] + ref.E4M3[:-1]) / 2
    targets = np.concatenate([mids, ref.E4M3, [1e-6, 2.0**-10, 2.0**-11, 0.0]]) * 6
    targets = np.concatenate([targets, np.nextafter(targets.astype(F32), F32(1e9)), np.nextafter(targets.astype(F32), F32(0))])
    m = targets.size
    x = (rng.uniform(-1, 1, size=(m, 16)) * targets[:, None]).astype(F32)
    x[np.arange(m), rng.integers(0, 16, size=m)] = targets.astype(F32)
    for options in OPTIONS:
        for amax in (np.array([2688.0], F32), np.array([1e-3], F32), np.array([np.nan], F32), np.array([np.inf], F32)):
            values, scales, _ = run(x, amax=amax.copy(), **options)
            ev, es, _ = ref.quantize(x, amax=amax, **_ref_kwargs(options))
            np.testing.assert_array_equal(scales, es, err_msg=f"{options} amax={amax}")
            np.testing.assert_array_equal(values, ev, err_msg=f"{options} amax={amax}")


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_all_zero_tensor_has_amax_zero(options):
    x = np.zeros((3, 20), F32)
    x[1, 3] = -0.0
    values, scales, amax = run(x, **options)
    assert amax.tolist() == [0.0]
    assert not scales.any()
    np.testing.assert_array_equal(values, expect(x, **options)[0])
    assert values[1, 1] == 0x80  # -0.0 keeps its sign (element 3 is a high nibble)


def test_inf_and_nan_inputs():
    x = np.array([[np.inf, 1.0, -np.inf, np.nan] + [0.5] * 12, [np.nan] * 16], F32)
    values, scales, amax = run(x)
    assert amax[0] == np.inf
    np.testing.assert_array_equal(values, expect(x)[0])
    np.testing.assert_array_equal(scales, expect(x)[1])
    assert values[1].tolist() == [0x77] * 8  # NaN -> +6, as cvt.rn.satfinite.e2m1x2 does
    assert scales[1, 0] == 0  # an all-NaN block has block amax 0


@pytest.mark.parametrize("layout", ["padded", "swizzled"])
@pytest.mark.parametrize("shape", [(5, 18), (130, 100), (1, 16), (200, 80)], ids=str)
def test_padded_and_swizzled_scales(shape, layout):
    x = specials(np.random.default_rng(3), shape)
    _, compact, _ = run(x)
    values, scales, _ = run(x, scales=layout)
    want = ref.padded(compact) if layout == "padded" else ref.swizzled(compact)
    np.testing.assert_array_equal(scales, want)
    np.testing.assert_array_equal(values, expect(x)[0])


def test_given_amax_is_used_and_not_written():
    x = np.random.default_rng(4).standard_normal((6, 40)).astype(F32)
    amax = np.array([0.5], F32)  # smaller than the data: block scales saturate at 448
    values, scales, got = run(x, amax=amax)
    assert got is amax or got.tolist() == [0.5]
    ev, es, _ = ref.quantize(x, amax=amax)
    np.testing.assert_array_equal(values, ev)
    np.testing.assert_array_equal(scales, es)
    assert (scales == 0x7E).any()


def test_threaded_host_loop_gives_the_same_bytes(monkeypatch):
    x = specials(np.random.default_rng(5), (300, 70))
    single = [run(x, **o) for o in OPTIONS]
    monkeypatch.setenv("MXFP8_HOST_MIN_BYTES_PER_THREAD", "0")
    monkeypatch.setenv("MXFP8_HOST_THREADS", "4")
    for o, s in zip(OPTIONS, single):
        for a, b in zip(run(x, **o), s):
            np.testing.assert_array_equal(a, b)
    monkeypatch.setenv("MXFP8_HOST_THREADS", "3")
    for a, b in zip(run(x, per_row=True), expect(x, per_row=True)):
        np.testing.assert_array_equal(a.reshape(b.shape), b)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_fused_shards_share_the_largest_amax(options):
    rng = np.random.default_rng(6)
    shards = [rng.standard_normal((r, 48)).astype(F32) * F32(s) for r, s in ((8, 1.0), (3, 40.0), (5, 0.01))]
    shards[2][0, 0] = np.nan
    out = mxfp8.nvfp4_quantize_fused(shards, **options)
    shared = max(ref.tensor_amax(s) for s in shards)
    for shard, q in zip(shards, out):
        assert np.asarray(q.amax).tolist() == [shared]
        ev, es, _ = ref.quantize(shard, amax=np.array([shared], F32), **_ref_kwargs(options))
        np.testing.assert_array_equal(np.asarray(q.values), ev)
        np.testing.assert_array_equal(np.asarray(q.scales), es)
        alone = mxfp8.nvfp4_quantize(shard, amax=np.array([shared], F32), **options)
        np.testing.assert_array_equal(np.asarray(alone.values), np.asarray(q.values))
    # A shard quantized under its own amax has other block scales: the reconcile is not a no-op.
    own = mxfp8.nvfp4_quantize(shards[0], **options)
    assert not np.array_equal(np.asarray(own.scales), np.asarray(out[0].scales))


def test_fused_with_given_amax_and_bfloat16():
    rng = np.random.default_rng(8)
    shards = [rng.standard_normal((4, 32)).astype(ml_dtypes.bfloat16) for _ in range(3)]
    amax = np.array([7.0], F32)
    out = mxfp8.nvfp4_quantize_fused(shards, amax=amax, scales="swizzled")
    for shard, q in zip(shards, out):
        ev, es, _ = ref.quantize(shard.astype(F32), amax=amax)
        np.testing.assert_array_equal(np.asarray(q.values), ev)
        np.testing.assert_array_equal(np.asarray(q.scales), ref.swizzled(es))
    assert amax.tolist() == [7.0]


def test_bad_arguments_name_the_argument():
    x = np.zeros((2, 16), F32)
    with pytest.raises(ValueError, match="e4m3_max is 256"):
        mxfp8.nvfp4_quantize(x, e4m3_max=256)
    with pytest.raises(ValueError, match="four_over_six"):
        mxfp8.nvfp4_quantize(x, four_over_six="max")
    with pytest.raises(ValueError, match="dtype"):
        mxfp8.nvfp4_quantize(x.astype(np.float64))
    with pytest.raises(ValueError, match="amax"):
        mxfp8.nvfp4_quantize(x, amax=np.zeros(2, F32))
    with pytest.raises(ValueError, match="K = 8 differs"):
        mxfp8.nvfp4_quantize_fused([x, np.zeros((2, 8), F32)])
    with pytest.raises(ValueError, match="amax"):
        mxfp8.nvfp4_quantize(x, amax=np.zeros(1, np.float64))


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("shape", [(6, 17), (34, 40), (16, 3), (2, 1), (130, 50), (2, 3, 40)], ids=str)
def test_columnwise_is_the_transpose_quantized(shape, options):
    # TE's columnwise NVFP4 data is x^T quantized rowwise (blocks of 16 along M), stored (K, M/2); M even,
    # K may be odd. Its amax is per tensor (per-row is rowwise only).
    x = specials(np.random.default_rng(sum(shape)), shape)
    m, k = int(np.prod(shape[:-1])), shape[-1]
    values, scales, amax = run(x, columnwise=True, **options)
    ev, es, ea = ref.quantize(x.reshape(m, k).T.copy(), **_ref_kwargs(options))
    assert values.shape == (k, m // 2) and scales.shape == (k, -(-m // 16))
    np.testing.assert_array_equal(amax.view(np.uint32), ea.view(np.uint32))
    np.testing.assert_array_equal(scales, es)
    np.testing.assert_array_equal(values, ev)
    # One amax for both directions: that of x (K may be odd here, so not from a rowwise quantize).
    np.testing.assert_array_equal(amax.view(np.uint32), np.array([ref.tensor_amax(x)], F32).view(np.uint32))


def test_columnwise_padded_scales_are_tes_allocation():
    x = specials(np.random.default_rng(11), (40, 200))
    _, compact, _ = run(x, columnwise=True)
    for layout, want in (("padded", ref.padded(compact)), ("swizzled", ref.swizzled(compact))):
        _, scales, _ = run(x, columnwise=True, scales=layout)
        assert scales.shape == (256, 4)  # (roundup(K, 128), roundup(ceil(M/16), 4))
        np.testing.assert_array_equal(scales, want)


def test_columnwise_fused_shards():
    rng = np.random.default_rng(12)
    shards = [rng.standard_normal((r, 24)).astype(F32) * F32(s) for r, s in ((16, 1.0), (10, 3.0))]
    out = mxfp8.nvfp4_quantize_fused(shards, columnwise=True, four_over_six="mse")
    shared = np.array([max(ref.tensor_amax(s) for s in shards)], F32)
    for shard, q in zip(shards, out):
        ev, es, _ = ref.quantize(shard.T.copy(), amax=shared, four_over_six="mse")
        np.testing.assert_array_equal(np.asarray(q.values), ev)
        np.testing.assert_array_equal(np.asarray(q.scales), es)


@pytest.mark.parametrize("columnwise", [False, True])
@pytest.mark.parametrize("shape", [(4, 0), (0, 6), (0, 0), (2, 0, 8)], ids=str)
def test_empty_tensors(shape, columnwise):
    m = int(np.prod(shape[:-1]))
    x = np.zeros(shape, F32)
    values, scales, amax = run(x, columnwise=columnwise)
    assert values.size == 0 and scales.size == 0 and amax.tolist() == [0.0]
    if not columnwise:  # per-row amax is rowwise only
        values, scales, amax = run(x, per_row=True)
        assert amax.shape == (m,) and not amax.any()  # every empty row's amax written as 0
    _, padded, _ = run(x, columnwise=columnwise, scales="padded")
    assert not padded.any()
