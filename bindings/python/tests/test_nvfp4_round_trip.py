"""What mxfp8_nvfp4_quantize_into writes, mxfp8_tensor_create describes (format NVFP4) and mxfp8_dequantize
decodes: host quantize -> describe -> dequantize, rowwise and columnwise, per-tensor and per-row amax, every
scale layout. The quantized bytes are checked against nvfp4_quantize_reference.py (TE's encode rule in
NumPy) and the dequantized floats, bit for bit, against nvfp4_reference.py's decode of those reference
codes (TE's decode order). Also: what the describe side cannot take (odd K or M, a columnwise per-row amax)
the quantize refuses, naming the reason."""
import numpy as np
import pytest

import mxfp8
import nvfp4_quantize_reference as qref
import nvfp4_reference as dref

F32 = np.float32

SHAPES = [(6, 18), (34, 30), (130, 50), (2, 3, 40), (64, 256), (2, 2)]
OPTIONS = [dict(), dict(four_over_six="mse"), dict(four_over_six="mae", e4m3_max=256)]


def data(shape, seed):
    """Random data over several magnitudes, with zeros of both signs, E2M1 midpoints and a NaN."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * np.exp(rng.uniform(-6, 6, size=shape[:-1] + (1,)))).astype(F32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=max(1, flat.size // 10), replace=False)
    flat[picks] = rng.choice(np.array([0.0, -0.0, 0.25, 1.25, -5.0, 448.0, np.nan], F32), size=picks.size)
    return x


def unpack(values, cols):
    """(R, C/2) bytes -> (R, C) codes, the even element from the low nibble."""
    v = np.asarray(values, np.uint8).reshape(values.shape[0], -1)
    return np.stack([v & 0xF, v >> 4], axis=-1).reshape(v.shape[0], -1)[:, :cols]


def same_floats(got, want):
    """Bit for bit, except that any NaN matches any NaN (the library writes them canonically)."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    assert got.shape == want.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("layout", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction,per_row", [("rowwise", False), ("rowwise", True), ("columnwise", False)])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_quantize_describe_dequantize(shape, direction, per_row, layout, options):
    x = data(shape, seed=sum(shape) + len(options) + 7 * per_row)
    m, k = int(np.prod(shape[:-1])), shape[-1]
    columnwise = direction == "columnwise"
    stored = x.reshape(m, k).T.copy() if columnwise else x.reshape(m, k)  # the (R, C) matrix TE stores
    e4m3_max = options.get("e4m3_max", 448)

    q = mxfp8.nvfp4_quantize(x, per_row=per_row, columnwise=columnwise, scales=layout, **options)
    ev, es, ea = qref.quantize(stored, per_row=per_row, four_over_six=options.get("four_over_six"),
                               e4m3_max=e4m3_max)
    want_scales = {"compact": es, "padded": qref.padded(es), "swizzled": qref.swizzled(es)}[layout]
    np.testing.assert_array_equal(np.asarray(q.values).reshape(ev.shape), ev)
    np.testing.assert_array_equal(np.asarray(q.scales).reshape(want_scales.shape), want_scales)
    np.testing.assert_array_equal(np.asarray(q.amax).view(np.uint32), ea.view(np.uint32))

    # The quantize's own outputs, as they are, are what the describe/dequantize side takes.
    out = mxfp8.nvfp4.dequantize(q.values, q.scales, q.amax, shape=shape, swizzled=layout == "swizzled",
                                 direction=direction, e4m3_max=e4m3_max)
    want = dref.dequantize(unpack(ev, stored.shape[1]), es, ea, e4m3_max)
    same_floats(np.asarray(out).reshape(want.shape), want)

    # And the exported parts are the quantized bytes, compact.
    parts = mxfp8.nvfp4.export_components(q.values, q.scales, q.amax, shape=shape, swizzled=layout == "swizzled",
                                          direction=direction, e4m3_max=e4m3_max)
    np.testing.assert_array_equal(np.from_dlpack(parts.values).reshape(ev.shape), ev)
    np.testing.assert_array_equal(np.from_dlpack(parts.scales).reshape(es.shape), es)


@pytest.mark.parametrize("shape,columnwise,what", [((4, 17), False, "K = 17 is odd"), ((3, 32), True, "M = 3 is odd"),
                                                   ((2, 1), False, "K = 1 is odd")])
def test_quantize_refuses_rows_that_do_not_fill_bytes(shape, columnwise, what):
    with pytest.raises(ValueError, match=what):
        mxfp8.nvfp4_quantize(np.ones(shape, F32), columnwise=columnwise)


def test_quantize_refuses_a_columnwise_per_row_amax():
    with pytest.raises(ValueError, match="keeps one columnwise amax per tensor"):
        mxfp8.nvfp4_quantize(np.ones((32, 16), F32), columnwise=True, per_row=True)
