"""mxfp8.quantize and mxfp8.dequantize on the host, bit for bit against mx_reference (NumPy +
ml_dtypes, written from the rules)."""
import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import mxfp8
import mx_reference as ref

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
SHAPES = [(1, 1), (3, 33), (64, 96), (70, 100), (2, 3, 40), (33, 31), (5, 64), (40, 1)]


def u8(a):
    return np.from_dlpack(a)


def quantize(x, **kw):
    return mxfp8.quantize(x, values_dtype="uint8", **kw)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fp8_dtype", ["e4m3", "e5m2"])
@pytest.mark.parametrize("rounding", ["rceil", "floor"])
@pytest.mark.parametrize("mode", ["rowwise", "columnwise", "both", "32x32"])
def test_quantize_matches_the_reference_bit_for_bit(dtype, fp8_dtype, rounding, mode):
    for i, shape in enumerate(SHAPES):
        x = ref.special_input(shape, DTYPES[dtype], seed=i)
        block = "32x32" if mode == "32x32" else "1x32"
        rowwise = mode in ("rowwise", "both", "32x32")
        columnwise = mode in ("columnwise", "both", "32x32")
        q = quantize(x, fp8_dtype=fp8_dtype, rounding=rounding, block=block, rowwise=rowwise, columnwise=columnwise)
        for direction, values, scales in (("rowwise", q.rowwise_data, q.rowwise_scale_inv),
                                          ("columnwise", q.columnwise_data, q.columnwise_scale_inv)):
            wanted = rowwise if direction == "rowwise" else columnwise
            assert (values is None) == (not wanted)
            if not wanted:
                continue
            v_ref, s_ref = ref.quantize(x, fp8_dtype, rounding, direction, block)
            v, s = u8(values), u8(scales)
            assert v.shape == shape
            if block == "1x32" and direction == "rowwise":
                assert s.shape == (*shape[:-1], s_ref.shape[1])
            else:
                assert s.shape == s_ref.shape
            np.testing.assert_array_equal(s.reshape(s_ref.shape), s_ref, err_msg=f"{shape} {direction} scales")
            np.testing.assert_array_equal(v, v_ref, err_msg=f"{shape} {direction} values")


def test_known_answers():
    """A few blocks worked out by hand from the rules."""
    x = np.zeros((6, 32), np.float32)
    x[0, 0] = 1.0      # amax 1: 1/448 rounds up to 2^-8, e = 119, 1 * 2^8 = 256 = 0x78
    x[1, 0] = 448.0    # 448 * float(1/448) == 1.0 exactly: e = 127, 448 stays 448 = 0x7E
    x[2, :] = 0.0      # all zero: e = 0, r(0) = 1
    x[2, 5] = -0.0     # keeps its sign: 0x80
    x[3, 0], x[3, 1] = np.inf, 3.0   # Inf: e = 254, r = 0: 3 * 0 = 0, Inf * 0 = NaN = 0x7F
    x[4, 0], x[4, 1] = np.nan, 2.0   # NaN is skipped by the amax: e from 2 (120), NaN stays 0x7F
    x[5, 0] = 500.0    # 500/448 > 1: e = 128, 500 / 2 = 250 -> 256 (0x78; RNE between 240 and 256)
    q = quantize(x)
    s, v = u8(q.rowwise_scale_inv)[:, 0], u8(q.rowwise_data)
    assert list(s) == [119, 127, 0, 254, 120, 128]
    assert v[0, 0] == 0x78 and v[1, 0] == 0x7E and v[2, 5] == 0x80 and v[2, 0] == 0
    assert v[3, 0] == 0x7F and v[3, 1] == 0 and v[4, 0] == 0x7F and v[4, 1] == 0x78 and v[5, 0] == 0x78
    f = quantize(x, rounding="floor")
    # FLOOR: floor(log2 500) = 8, e = 127 - 8 + 8 = 127: 500 saturates to 448 (0x7E)
    assert u8(f.rowwise_scale_inv)[5, 0] == 127 and u8(f.rowwise_data)[5, 0] == 0x7E


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("block", ["1x32", "32x32"])
@pytest.mark.parametrize("shape", [(100, 48), (257, 33), (64, 4096 + 32)])
def test_padded_and_swizzled_layouts_are_te_buffers(direction, block, shape):
    x = ref.special_input(shape, ml_dtypes.bfloat16, seed=7)
    kw = dict(block=block, rowwise=direction == "rowwise", columnwise=direction == "columnwise")
    compact = quantize(x, **kw)
    padded = quantize(x, scales="padded", **kw)
    swizzled = quantize(x, scales="swizzled", **kw)
    prefix = direction
    values = [u8(getattr(q, f"{prefix}_data")) for q in (compact, padded, swizzled)]
    assert all(np.array_equal(values[0], v) for v in values[1:])
    m, k = shape
    # The stored 1x32 scales S (for 32x32 blocks: each block's scale repeated, as TE stores them).
    s = u8(getattr(compact, f"{prefix}_scale_inv"))
    if block == "32x32":
        s = np.repeat(s, 32, axis=0)[:m] if direction == "rowwise" else np.repeat(s, 32, axis=1)[:, :k]
    r, c = s.shape
    rp, cp = (ref.round_up(r, 128), ref.round_up(c, 4)) if direction == "rowwise" else (ref.round_up(r, 4), ref.round_up(c, 128))
    expected_padded = np.zeros((rp, cp), np.uint8)
    expected_padded[:r, :c] = s
    np.testing.assert_array_equal(u8(getattr(padded, f"{prefix}_scale_inv")), expected_padded)
    expected_swizzled = ref.swizzle(s if direction == "rowwise" else s.T)
    got = u8(getattr(swizzled, f"{prefix}_scale_inv"))
    assert got.shape == (rp, cp)
    np.testing.assert_array_equal(got.reshape(-1), expected_swizzled)
    # And the export reads them back to the compact scales.
    exported = mxfp8.export_components(values[2], got, swizzled=True, direction=direction, block=block,
                                       values_dtype="uint8")
    np.testing.assert_array_equal(u8(exported.scales), u8(getattr(compact, f"{prefix}_scale_inv")))


@pytest.mark.parametrize("fp8_dtype", ["e4m3", "e5m2"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("out_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("layout", ["swizzled", "padded", "compact"])
def test_dequantize_matches_the_reference(fp8_dtype, direction, out_dtype, layout):
    x = ref.special_input((70, 200), np.float32, seed=3)  # padded scales: 7 of 8 columns, 7 of 8 rows of 32
    q = quantize(x, scales=layout, fp8_dtype=fp8_dtype, rowwise=direction == "rowwise",
                 columnwise=direction == "columnwise")
    v, stored = u8(getattr(q, f"{direction}_data")), u8(getattr(q, f"{direction}_scale_inv"))
    compact = u8(quantize(x, fp8_dtype=fp8_dtype, rowwise=direction == "rowwise",
                          columnwise=direction == "columnwise")[1 if direction == "rowwise" else 3])
    got = mxfp8.dequantize(v, stored, swizzled=layout == "swizzled", fp8_dtype=fp8_dtype, direction=direction,
                           dtype=out_dtype)
    want = ref.dequantize(v, compact.reshape(-1, compact.shape[-1]), fp8_dtype, direction)
    if out_dtype == "bfloat16":
        want = want.astype(ml_dtypes.bfloat16)
    assert got.dtype == want.dtype and got.shape == want.shape
    nan = np.isnan(want.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan)
    assert np.array_equal(got.view(np.uint16 if out_dtype == "bfloat16" else np.uint32)[~nan],
                          want.view(np.uint16 if out_dtype == "bfloat16" else np.uint32)[~nan])


def test_quantize_then_dequantize_is_close_for_finite_input():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((128, 256)) * np.exp(rng.uniform(-8, 8, (128, 1)))).astype(np.float32)
    q = quantize(x)
    y = mxfp8.dequantize(u8(q.rowwise_data), u8(q.rowwise_scale_inv), swizzled=False)
    # E4M3 keeps 3 mantissa bits: relative error <= 2^-4 for elements within 2^6 of their block's amax.
    amax = np.repeat(np.abs(x).reshape(128, 8, 32).max(axis=2), 32, axis=1)
    big = np.abs(x) > amax / 64
    assert np.all(np.abs(y - x)[big] <= np.abs(x)[big] * 2.0 ** -4)


def test_outputs_feed_a_tensor_description_and_empty_inputs_work():
    q = quantize(np.zeros((0, 64), np.float32), scales="padded")
    assert u8(q.rowwise_data).shape == (0, 64) and u8(q.rowwise_scale_inv).shape == (0, 4)
    q = quantize(np.ones((3, 0), np.float32), columnwise=True)
    assert u8(q.rowwise_scale_inv).shape == (3, 0) and u8(q.columnwise_scale_inv).shape == (1, 0)


def test_fp8_and_e8m0_dtypes_and_bad_input():
    x = np.ones((4, 64), np.float32)
    q = mxfp8.quantize(x, fp8_dtype="e5m2", scales_dtype="e8m0")
    assert q.rowwise_data.dtype == "float8_e5m2" and q.rowwise_scale_inv.dtype == "float8_e8m0fnu"
    with pytest.raises(ValueError, match="cannot be quantized"):
        mxfp8.quantize(np.ones((4, 64), np.int32))
    with pytest.raises(ValueError, match="row-major"):
        mxfp8.quantize(np.ones((64, 4), np.float32).T)
    with pytest.raises(ValueError, match="rowwise and columnwise are both False"):
        mxfp8.quantize(x, rowwise=False)
    with pytest.raises(ValueError, match="rounding must be one of"):
        mxfp8.quantize(x, rounding="nearest")
    with pytest.raises(ValueError, match="0-dimensional"):
        mxfp8.quantize(np.array(1.0, np.float32))


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_compressed_tensors_rounding_differs_from_rceil_only_at_the_mantissa_1_75(dtype):
    """The header's statement (mxfp8_scale_rounding): for E4M3 and finite normal amaxes, the
    compressed-tensors rule gives the RCEIL scale except where the block's amax is 1.75 * 2^k, where it
    gives one more. Random weights, plus blocks built on each side of 1.75."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((256, 4096)).astype(np.float32)
    x[0, :32] = 0.5
    x[0, 5] = 1.75 * 4        # exactly 1.75 * 2^2: differs
    x[1, :32] = 0.5
    x[1, 5] = 1.7578125 * 4   # the next bfloat16 above: the same scale under both
    x[2, :32] = 0.5
    x[2, 5] = 1.7421875 * 4   # the one below: the same scale under both
    x = x.astype(DTYPES[dtype])
    rceil = u8(quantize(x, rounding="rceil").rowwise_scale_inv).astype(int)
    ct = u8(quantize(x, rounding="compressed_tensors").rowwise_scale_inv).astype(int)
    amax = np.abs(x.astype(np.float32)).reshape(256, -1, 32).max(-1)
    mantissa = np.frexp(amax)[0] * 2
    at_1_75 = mantissa == 1.75
    assert at_1_75[0, 0] and not at_1_75[1, 0] and not at_1_75[2, 0]
    if dtype == "bfloat16":  # 7 mantissa bits: random blocks land there too, not only the one built above
        assert at_1_75.sum() > 1
    np.testing.assert_array_equal(ct - rceil, at_1_75.astype(int))


def test_the_compact_32x32_form_is_one_scale_per_block_what_export_gives_and_is_not_read_back():
    """Quantized's docstring said every form could be handed back to export_components as it is; the compact
    32x32 form cannot (one scale per block is not a storage form TE keeps). What it is: the export of the
    padded form with block="32x32". The third probe of the Python layer found the docstring wrong."""
    x = np.random.default_rng(3).standard_normal((100, 80)).astype(np.float32)
    compact = mxfp8.quantize(x, block="32x32", values_dtype="uint8")
    padded = mxfp8.quantize(x, block="32x32", values_dtype="uint8", scales="padded")
    blocks = np.from_dlpack(compact.rowwise_scale_inv)
    assert blocks.shape == (4, 3)
    _, exported = mxfp8.export_components(padded.rowwise_data, padded.rowwise_scale_inv, swizzled=False, block="32x32")
    np.testing.assert_array_equal(np.from_dlpack(exported), blocks)
    with pytest.raises(ValueError, match="cannot hold the 100 x 3 scale matrix"):
        mxfp8.export_components(compact.rowwise_data, compact.rowwise_scale_inv, swizzled=False, block="32x32")
