"""mxfp8.nvfp4 on host arrays, against nvfp4_reference (written from the format's rules): every scale
layout with poisoned padding, both directions (columnwise stored transposed), per-tensor and per-row amax,
both E4M3_MAX values, partial blocks, rows not a multiple of 128, special scales and amaxes."""
import numpy as np
import pytest

import mxfp8
from conftest import ml_dtypes, round_up, swizzle_reference
from nvfp4_reference import dequantize as ref_dequantize
from nvfp4_reference import e4m3, encode_scale, pack, random_case, store_scales

SHAPES = [(1, 16), (3, 40), (130, 34), (200, 64), (258, 6)]


def make(shape, layout, direction, per_row, seed):
    """(data, scale buffer, amax, codes, compact scales) of the stored matrix of `direction`."""
    m, k = shape
    rows, cols = (m, k) if direction == "rowwise" else (k, m)
    codes, scales = random_case(rows, cols, seed)
    amax = np.array([3.5, 0.0, 2688.0, 1e-30, 65504.0, 0.125, 7.0e6], np.float32)
    amax = np.resize(amax, rows) if per_row else np.array([7.25], np.float32)
    return pack(codes), store_scales(scales, layout), amax, codes, scales


def bits(a):
    return np.asarray(a, np.float32).view(np.uint32)


def assert_decoded(out, want):
    """Bit for bit, with every NaN written as the canonical 0x7FFFFFFF."""
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan)
    assert np.all(bits(out)[nan] == 0x7FFFFFFF)
    np.testing.assert_array_equal(bits(out)[~nan], bits(want)[~nan])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("layout", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("e4m3_max", [448, 256])
def test_dequantize_is_tes_formula_bit_for_bit(shape, layout, direction, e4m3_max):
    if direction == "columnwise" and shape[0] % 2:
        shape = (shape[0] + 1, shape[1])  # the stored (K, M) rows must fill whole bytes
    per_row = direction == "rowwise" and shape[0] > 1
    data, buf, amax, codes, scales = make(shape, layout, direction, per_row, seed=sum(shape) + e4m3_max)
    out = np.full(codes.shape, np.nan, np.float32)
    got = mxfp8.nvfp4.dequantize(data, buf, amax, shape=shape, swizzled=layout == "swizzled", direction=direction,
                                 e4m3_max=e4m3_max, out=out)
    assert got is out
    assert_decoded(out, ref_dequantize(codes, scales, amax, e4m3_max))


def test_dequantize_bfloat16_rounds_to_nearest_even():
    data, buf, amax, codes, scales = make((130, 34), "padded", "rowwise", True, seed=4)
    out = mxfp8.nvfp4.dequantize(data, buf, amax, dtype="bfloat16", swizzled=False)
    assert out.dtype == ml_dtypes.bfloat16 and out.shape == (130, 34)
    want = ref_dequantize(codes, scales, amax, 448)
    nan = np.isnan(want)
    np.testing.assert_array_equal(out.astype(np.float32)[~nan], want.astype(ml_dtypes.bfloat16).astype(np.float32)[~nan])
    assert np.all(out.view(np.uint16)[nan] == 0x7FFF)


def test_columnwise_decodes_the_transpose_te_stores():
    """The columnwise data of x is x^T quantized along M: its decode is (K, M) and a caller transposes it."""
    m, k = 48, 32
    codes, scales = random_case(k, m, seed=9)
    data = pack(codes)  # (K, M/2), as TE's _columnwise_data
    out = mxfp8.nvfp4.dequantize(data, store_scales(scales, "padded"), np.float32([1.0]), direction="columnwise", swizzled=False)
    assert out.shape == (k, m)
    assert_decoded(out, ref_dequantize(codes, scales, np.float32([1.0]), 448))


def test_nibble_order_even_element_low():
    codes = np.array([[1, 7] + [0] * 14], np.uint8)  # 0.5 then 6.0
    data = pack(codes)
    assert data[0, 0] == 0x71
    scales = np.array([[0x38]], np.uint8)  # 1.0
    out = mxfp8.nvfp4.dequantize(data, scales, np.float32([6 * 448]), swizzled=False)
    assert out[0, 0] == 0.5 and out[0, 1] == 6.0


@pytest.mark.parametrize("layout", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_export_components(layout, direction):
    shape = (130, 40)
    data, buf, amax, codes, scales = make(shape, layout, direction, False, seed=21)
    parts = mxfp8.nvfp4.export_components(data, buf, amax, shape=shape, swizzled=layout == "swizzled",
                                          direction=direction)
    values = np.from_dlpack(parts.values)
    assert values.dtype == np.uint8 and np.shares_memory(values, data)  # a view
    np.testing.assert_array_equal(values, data)
    got = np.from_dlpack(parts.scales)
    assert got.shape == scales.shape
    np.testing.assert_array_equal(got, scales)
    assert parts.scales.is_copy == (layout != "compact")
    g = np.from_dlpack(parts.global_scale)
    assert g.dtype == np.float32 and g.shape == (1,) and g[0] == np.float32(7.25) / np.float32(2688.0)


@pytest.mark.parametrize("layout", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction, per_row", [("rowwise", False), ("rowwise", True), ("columnwise", False)])
def test_export_of_a_shard_is_the_cut_of_the_stored_matrix(layout, direction, per_row):
    """rows / cols (options.shard): the shard of the stored matrix, cut here from the codes and scales the
    tensor was built from; one row range a view, row pieces a copy; a per-row amax's global scales the
    shard's rows."""
    m, k = 130, 80
    data, buf, amax, codes, scales = make((m, k), layout, direction, per_row, seed=31)
    whole = np.from_dlpack(mxfp8.nvfp4.export_components(data, buf, amax, shape=(m, k), swizzled=layout == "swizzled",
                                                         direction=direction).global_scale)
    if direction == "rowwise":
        cases = [((1, m - 1), (16, None), [(1, m - 1)], (16, k)),
                 ([(m - 1, m), (0, 1)], (0, 48), [(m - 1, m), (0, 1)], (0, 48))]
    else:  # rows of M are stored columns, columns of K stored rows
        cases = [((16, None), (1, k - 1), [(1, k - 1)], (16, m))]
    for rows, cols, stored_rows, (c0, c1) in cases:
        parts = mxfp8.nvfp4.export_components(data, buf, amax, shape=(m, k), swizzled=layout == "swizzled",
                                              direction=direction, rows=rows, cols=cols)
        want_codes = np.concatenate([codes[r0:r1, c0:c1] for r0, r1 in stored_rows])
        want_scales = np.concatenate([scales[r0:r1, c0 // 16:c0 // 16 + -(-(c1 - c0) // 16)] for r0, r1 in stored_rows])
        values = np.from_dlpack(parts.values)
        np.testing.assert_array_equal(values, pack(want_codes))
        assert np.shares_memory(values, data) == (len(stored_rows) == 1)  # one range: a view
        np.testing.assert_array_equal(np.from_dlpack(parts.scales), want_scales)
        g = np.from_dlpack(parts.global_scale)
        want_g = np.concatenate([whole[r0:r1] for r0, r1 in stored_rows]) if per_row else whole
        np.testing.assert_array_equal(g, want_g)
    with pytest.raises(ValueError, match=r"options\.shard\.(col|row)_begin is 8"):  # off the 16-value blocks
        mxfp8.nvfp4.export_components(data, buf, amax, shape=(m, k), swizzled=layout == "swizzled",
                                      direction=direction, rows=None if direction == "rowwise" else (8, None),
                                      cols=(8, None) if direction == "rowwise" else None)


def test_padded_scales_as_a_strided_view():
    data, buf, amax, codes, scales = make((130, 40), "padded", "rowwise", False, seed=5)
    parts = mxfp8.nvfp4.export_components(data, buf, amax, contiguous=False, swizzled=False)
    assert not parts.scales.is_copy
    view = np.from_dlpack(parts.scales)
    assert np.shares_memory(view, buf)
    np.testing.assert_array_equal(view, scales)


def test_rowwise_keeps_leading_dimensions():
    codes, scales = random_case(64, 48, seed=6)
    data = pack(codes).reshape(2, 32, 24)
    parts = mxfp8.nvfp4.export_components(data, store_scales(scales, "swizzled"), np.float32([1.0]), swizzled=True)
    assert parts.values.shape == (2, 32, 24) and parts.scales.shape == (2, 32, 3)
    np.testing.assert_array_equal(np.from_dlpack(parts.scales).reshape(64, 3), scales)


def test_float4_values_and_e4m3_scales_dtypes():
    data, buf, amax, codes, scales = make((16, 32), "compact", "rowwise", False, seed=8)
    parts = mxfp8.nvfp4.export_components(data, buf, amax, values_dtype="float4", scales_dtype="e4m3", swizzled=False)
    assert parts.values.dtype == "float4_e2m1fn" and parts.values.shape == (16, 32)
    assert parts.values.data_ptr == data.ctypes.data
    assert parts.scales.dtype == "float8_e4m3fn"


def test_global_scale_conventions_with_specials():
    amax = np.array([2688.0, 0.0, np.inf, np.nan, 1e-38, 448.0, 6.0, -0.0, 3e38, 1e-45], np.float32)
    rows = amax.size
    codes, scales = random_case(rows, 16, seed=10)
    for e4m3_max in (448, 256):
        dec = mxfp8.nvfp4.export_components(pack(codes), scales, amax, e4m3_max=e4m3_max, swizzled=False).global_scale
        enc = mxfp8.nvfp4.export_components(pack(codes), scales, amax, e4m3_max=e4m3_max,
                                            global_scale="encode", swizzled=False).global_scale
        with np.errstate(invalid="ignore", divide="ignore"):
            want_dec = amax / np.float32(6.0 * e4m3_max)
        np.testing.assert_array_equal(np.from_dlpack(dec), want_dec)
        np.testing.assert_array_equal(np.from_dlpack(enc), encode_scale(amax, e4m3_max))
    enc = np.from_dlpack(mxfp8.nvfp4.export_components(pack(codes), scales, amax, global_scale="encode", swizzled=False).global_scale)
    assert enc[0] == 1.0 and enc[1] == 1.0 and enc[2] == 1.0 and enc[3] == np.finfo(np.float32).max


@pytest.mark.parametrize("shape", [(130, 3), (1, 1), (256, 8), (77, 9)])
def test_swizzle_both_ways_for_16_value_blocks(shape):
    """The MXFP8 swizzle calls move NVFP4's (R, ceil(C/16)) E4M3 matrices byte for byte."""
    rng = np.random.default_rng(sum(shape))
    s = rng.integers(0, 256, size=shape, dtype=np.uint8)
    swz = mxfp8.swizzle_scales(s)
    np.testing.assert_array_equal(np.from_dlpack(swz).reshape(-1), swizzle_reference(s))
    back = mxfp8.unswizzle_scales(np.from_dlpack(swz), rows=shape[0], cols=shape[1])
    np.testing.assert_array_equal(np.from_dlpack(back), s)


def test_e4m3_reference_decodes_subnormals_and_nan():
    assert e4m3(0x01) == 2.0 ** -9 and e4m3(0x07) == 7 * 2.0 ** -9 and e4m3(0x08) == 2.0 ** -6
    assert e4m3(0x7E) == 448 and np.isnan(e4m3(0x7F)) and np.isnan(e4m3(0xFF)) and e4m3(0xB8) == -1.0


@pytest.mark.parametrize("case, message", [
    ("odd_k", "an odd count"),
    ("amax_shape", r"needs 1 \(per tensor\) or 4"),
    ("scales_small", "cannot hold the 4 x 2 scale matrix"),
    ("e4m3_max", "desc.e4m3_max is 300, expected 448 or 256"),
])
def test_bad_input_names_the_problem(case, message):
    data = np.zeros((4, 16), np.uint8)
    scales = np.zeros((4, 2), np.uint8)
    amax = np.float32([1.0])
    kwargs = {"swizzled": False}
    if case == "odd_k":
        kwargs["shape"] = (4, 31)
    elif case == "amax_shape":
        amax = np.float32([1.0, 2.0])
    elif case == "scales_small":
        scales = np.zeros((4, 1), np.uint8)
    else:
        kwargs["e4m3_max"] = 300
    with pytest.raises(ValueError, match=message):
        mxfp8.nvfp4.export_components(data, scales, amax, **kwargs)


def test_te_columnwise_storage_shape_reads_back():
    """TE keeps the columnwise data of a (2, 64, 48) weight as (48, 2, 32) bytes; with no shape= the
    logical shape comes back as TE's size() computes it, and the decode is the (48, 128) stored matrix."""
    codes, scales = random_case(48, 128, seed=12)
    data = pack(codes).reshape(48, 2, 32)
    amax = np.float32([2.0])
    out = mxfp8.nvfp4.dequantize(data, store_scales(scales, "swizzled"), amax, swizzled=True, direction="columnwise")
    assert out.shape == (48, 128)
    assert_decoded(out, ref_dequantize(codes, scales, amax, 448))
    parts = mxfp8.nvfp4.export_components(data, store_scales(scales, "padded"), amax, direction="columnwise", swizzled=False)
    assert parts.values.shape == (48, 64) and parts.scales.shape == (48, 8)


def test_export_te_reads_the_storage_fields():
    """A stand-in with NVFP4TensorStorage's field names: a (2, 64, 48) weight, both directions, swizzled."""
    import types

    row_codes, row_scales = random_case(128, 48, seed=13)
    col_codes, col_scales = random_case(48, 128, seed=14)
    t = types.SimpleNamespace(
        _rowwise_data=pack(row_codes).reshape(2, 64, 24), _rowwise_scale_inv=store_scales(row_scales, "swizzled"),
        _amax_rowwise=np.float32([3.0]), _columnwise_data=pack(col_codes).reshape(48, 2, 32),
        _columnwise_scale_inv=store_scales(col_scales, "swizzled"), _amax_columnwise=np.float32([5.0]),
        _with_gemm_swizzled_scales=True, _nvfp4_e4m3_max=256)
    row = mxfp8.nvfp4.export_te(t)
    assert row.values.shape == (2, 64, 24)
    np.testing.assert_array_equal(np.from_dlpack(row.scales).reshape(128, 3), row_scales)
    assert np.from_dlpack(row.global_scale)[0] == np.float32(3.0) / np.float32(1536.0)  # 6 * 256
    col = mxfp8.nvfp4.export_te(t, "columnwise", global_scale="encode")
    np.testing.assert_array_equal(np.from_dlpack(col.scales), col_scales)
    assert np.from_dlpack(col.global_scale)[0] == np.float32(1536.0) / np.float32(5.0)
    t._columnwise_data = None
    with pytest.raises(ValueError, match="no columnwise data"):
        mxfp8.nvfp4.export_te(t, "columnwise")
    # E4M3_MAX and the swizzle flag read as the package reads an int and a bool (int() took inf as an
    # OverflowError, 256.9 as 256 and "448" as 448; bool() took "False" as True); None and 0 are TE's default.
    for unset in (None, 0):
        t._nvfp4_e4m3_max = unset
        assert np.from_dlpack(mxfp8.nvfp4.export_te(t).global_scale)[0] == np.float32(3.0) / np.float32(2688.0)
    for lie in (float("inf"), 256.9, "448"):
        t._nvfp4_e4m3_max = lie
        with pytest.raises(TypeError, match=r"^_nvfp4_e4m3_max must be an int, got "):
            mxfp8.nvfp4.export_te(t)
    t._nvfp4_e4m3_max, t._with_gemm_swizzled_scales = 256, "True"
    with pytest.raises(TypeError, match=r"^_with_gemm_swizzled_scales must be True or False"):
        mxfp8.nvfp4.export_te(t)
    for not_te in (None, 5, np.zeros(4, np.uint8)):  # as mxfp8.export_te says it
        with pytest.raises(TypeError, match=r"^export_te takes a Transformer Engine NVFP4Tensor"):
            mxfp8.nvfp4.export_te(not_te)


def test_nvfp4_benchmark_smoke_run_checks_the_export():
    """bench/nvfp4_bench.py --smoke: the benchmark's quantize and export steps on the host (the export of a
    swizzled weight checked against the script's own unswizzle, the values a view), the JSON it merges."""
    import json
    import pathlib
    import subprocess
    import sys
    import tempfile

    bench = pathlib.Path(__file__).resolve().parents[3] / "bench" / "nvfp4_bench.py"
    with tempfile.TemporaryDirectory() as tmp:
        merged = pathlib.Path(tmp) / "results.json"
        merged.write_text(json.dumps({"other": 1, "nvfp4": {"kept": 2}}))
        out = subprocess.run([sys.executable, str(bench), "--smoke", "--reps", "3", "--merge", str(merged)],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(merged.read_text())
    r = result["nvfp4"]
    assert result["other"] == 1 and r["kept"] == 2
    assert r["bit_exact_with_host"] and r["export_bit_exact"] and r["export_values_view"]
    assert r["export_quantizer_swizzle_agrees"]
    assert set(r) >= {"quantize_ms", "quantize_copy_ms", "export_us", "export_copy_us", "export_fraction_of_copy"}
    assert "export_ge_85pct_of_copy" in r["targets"]
    # 200 x 67 scales: a padded (256, 68) swizzled buffer read, the (200, 67) matrix written
    assert r["export_bytes"] == 256 * 68 + 200 * 67 and r["export_copy_bytes"] == r["export_bytes"] // 2
