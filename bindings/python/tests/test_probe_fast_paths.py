"""The second adversarial probe through Python (host memory; runs in CI): the extension's one entry per
call (export_components, dequantize, quantize, swizzle_scales / unswizzle_scales) on torch tensors, which
carry the DLPack C exchange API (the plain, fast case), against the same entry on NumPy arrays (taken
through __dlpack__), and the NVFP4 calls. Each case checks the exception's type and message; the
torch-against-NumPy comparisons need torch and skip without it."""
import numpy as np
import pytest

import mxfp8
from mxfp8 import _mxfp8, nvfp4
from conftest import POISON, swizzle_reference


def outcome(call):
    """(exception type name, message) of a call, or ("ok", None)."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 -- the type is what is compared
        return type(e).__name__, str(e)
    return "ok", None


M, K = 64, 96
rng = np.random.default_rng(7)
DATA = rng.integers(0, 256, (M, K), dtype=np.uint8)
SCALES = rng.integers(100, 140, (128, 4), dtype=np.uint8)  # TE-padded (roundup(64, 128), roundup(3, 4))
X = rng.standard_normal((M, K)).astype(np.float32)
COMPACT = rng.integers(1, 255, (70, 3), dtype=np.uint8)


# Each case: a name, and a function of a converter (torch.from_numpy, or the identity for NumPy) making
# the call. The NumPy call goes through __dlpack__, the torch one through the exchange API; both must answer
# bad input with the same exception and message (one entry checks both: issue 33).
def _cases():
    E, DQ, Q, SW, US = (mxfp8.export_components, mxfp8.dequantize, mxfp8.quantize, mxfp8.swizzle_scales,
                        mxfp8.unswizzle_scales)
    swizzled = swizzle_reference(COMPACT)
    return [
        ("export float32 data", lambda t: E(t(DATA.astype(np.float32)), t(SCALES))),
        ("export int8 data", lambda t: E(t(DATA.astype(np.int8)), t(SCALES))),
        ("export transposed data", lambda t: E(t(DATA).T, t(SCALES))),
        ("export too few scale rows", lambda t: E(t(DATA), t(SCALES[:10]))),
        ("export float scales", lambda t: E(t(DATA), t(SCALES.astype(np.float32)))),
        ("export shape of another K", lambda t: E(t(DATA), t(SCALES), shape=(64, 95))),
        ("export negative shape", lambda t: E(t(DATA), t(SCALES), shape=(-64, 96))),
        ("export shape past int64", lambda t: E(t(DATA), t(SCALES), shape=(2**63, 1))),
        ("export shape overflowing", lambda t: E(t(DATA), t(SCALES), shape=(2**62, 2**62))),
        ("export fp8_dtype", lambda t: E(t(DATA), t(SCALES), fp8_dtype="e3m4")),
        ("export swizzled of the wrong size", lambda t: E(t(DATA), t(SCALES[:64]), swizzled=True)),
        ("export missing direction", lambda t: E(t(DATA), t(SCALES), direction="columnwise")),
        ("export swizzled not a bool", lambda t: E(t(DATA), t(SCALES), swizzled=1)),
        ("export 32x32 blocks disagreeing", lambda t: E(t(DATA), t(SCALES), block="32x32")),
        ("dequantize dtype", lambda t: DQ(t(DATA), t(SCALES), dtype="float16")),
        ("dequantize out too small", lambda t: DQ(t(DATA), t(SCALES), out=t(np.empty(10, np.float32)))),
        ("dequantize out float64", lambda t: DQ(t(DATA), t(SCALES), out=t(np.empty(M * K, np.float64)))),
        ("dequantize out transposed", lambda t: DQ(t(DATA), t(SCALES), out=t(np.empty((K, M), np.float32)).T)),
        ("dequantize out over the data", lambda t: DQ(t(DATA), t(SCALES), out=t(DATA).reshape(-1))),
        ("dequantize shape overflowing", lambda t: DQ(t(DATA), t(SCALES), shape=(2**62, 2**62))),
        ("dequantize shape too large", lambda t: DQ(t(DATA), t(SCALES), shape=(2**20, 2**20))),
        ("quantize float64", lambda t: Q(t(X.astype(np.float64)))),
        ("quantize int32", lambda t: Q(t(X.astype(np.int32)))),
        ("quantize transposed", lambda t: Q(t(X).T)),
        ("quantize 0-dimensional", lambda t: Q(t(np.array(1.0, np.float32)))),
        ("quantize no direction", lambda t: Q(t(X), rowwise=False)),
        ("quantize rounding", lambda t: Q(t(X), rounding="up")),
        ("swizzle float", lambda t: SW(t(COMPACT.astype(np.float32)))),
        ("swizzle 0-dimensional", lambda t: SW(t(np.array(3, np.uint8)))),
        ("swizzle out too small", lambda t: SW(t(COMPACT), t(np.empty(10, np.uint8)))),
        ("swizzle out over the source", lambda t: SW(t(COMPACT), t(COMPACT).reshape(-1))),
        ("unswizzle rows past the buffer", lambda t: US(t(swizzled), 200, 3)),
        ("unswizzle negative rows", lambda t: US(t(swizzled), -1, 3)),
        ("unswizzle float rows", lambda t: US(t(swizzled), 70.0, 3)),
        ("unswizzle bool rows", lambda t: US(t(swizzled), True, 3)),
        ("unswizzle rows past int64", lambda t: US(t(swizzled), 2**63, 3)),
        ("unswizzle out of other rows and cols", lambda t: US(t(swizzled), 5, 5, t(np.empty((70, 3), np.uint8)))),
        ("unswizzle out transposed rows and cols", lambda t: US(t(swizzled), 3, 70, t(np.empty((70, 3), np.uint8)))),
    ]


CASES = _cases()


@pytest.mark.parametrize("name,call", CASES, ids=[c[0] for c in CASES])
def test_fast_path_raises_what_the_python_layer_raises(name, call):
    torch = pytest.importorskip("torch")
    slow = outcome(lambda: call(lambda a: a))
    fast = outcome(lambda: call(lambda a: torch.from_numpy(np.array(a, copy=True))))
    assert slow[0] != "ok", f"{name}: the Python layer accepted it"
    assert fast == slow, f"{name}: torch (fast path) {fast} vs NumPy (Python layer) {slow}"


def test_the_fast_paths_run_on_plain_torch_inputs():
    """The torch calls compared above are plain calls (the exchange API), not __dlpack__ ones as NumPy's are."""
    torch = pytest.importorskip("torch")
    before = _mxfp8.fast_exports()
    mxfp8.export_components(torch.from_numpy(DATA), torch.from_numpy(SCALES), swizzled=False)
    mxfp8.dequantize(torch.from_numpy(DATA), torch.from_numpy(SCALES), swizzled=False)
    mxfp8.quantize(torch.from_numpy(X))
    swizzled = mxfp8.swizzle_scales(torch.from_numpy(COMPACT))
    back = mxfp8.unswizzle_scales(swizzled, 70, 3)
    assert _mxfp8.fast_exports() - before == 5
    np.testing.assert_array_equal(swizzled.numpy(), swizzle_reference(COMPACT))
    np.testing.assert_array_equal(back.numpy(), COMPACT)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_unswizzle_refuses_an_out_that_is_not_rows_by_cols(framework):
    """unswizzle_scales(swizzled, rows, cols, out): "The (rows, cols) compact scale matrix ... into out".
    The library reads (R, C) from out's shape, so rows and cols that disagree were silently ignored (a
    caller asking for 5 x 5 got out's 70 x 3 written); refused now, out untouched."""
    convert = (lambda a: a) if framework == "numpy" else pytest.importorskip("torch").from_numpy
    swizzled = convert(swizzle_reference(COMPACT))
    out = np.full((70, 3), POISON, np.uint8)
    for rows, cols in [(5, 5), (3, 70), (210, 1), (1, 210)]:
        with pytest.raises(ValueError, match=r"out holds a 70 x 3 matrix"):
            mxfp8.unswizzle_scales(swizzled, rows, cols, convert(out))
        assert (out == POISON).all()
    # The (R, C) out, 1-D as (1, C) and with leading dimensions flattened into rows, still works.
    mxfp8.unswizzle_scales(swizzled, 70, 3, convert(out))
    np.testing.assert_array_equal(out, COMPACT)
    stacked = np.full((7, 10, 3), POISON, np.uint8)
    mxfp8.unswizzle_scales(swizzled, 70, 3, convert(stacked))
    np.testing.assert_array_equal(stacked.reshape(70, 3), COMPACT)


def test_unswizzle_out_rows_past_int64_are_refused_not_wrapped():
    """out's leading dimensions multiply to 6 * 6148914691236517217 = 2 * 2^64 + 70: wrapped to 64 bits
    that is 70, the rows asked for. A stride-0 out no framework would make (a forged capsule); refused
    with the true product, never written."""
    from dlpack_forge import ForgedTensor, Producer

    swizzled = swizzle_reference(COMPACT)
    held = np.full(3, POISON, np.uint8)
    out = Producer(ForgedTensor(held.ctypes.data, (6, 6148914691236517217, 3), strides=(0, 0, 1), keep=held))
    with pytest.raises(ValueError, match=r"out holds a 36893488147419103302 x 3 matrix"):
        mxfp8.unswizzle_scales(swizzled, 70, 3, out)
    assert (held == POISON).all()


# NVFP4: a (40, 48) tensor, uint8 values (40, 24), TE-padded (128, 4) E4M3 scales, one amax.
NV_DATA = rng.integers(0, 256, (40, 24), dtype=np.uint8)
NV_SCALES = rng.integers(0x20, 0x60, (128, 4), dtype=np.uint8)
NV_AMAX = np.array([5.0], np.float32)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("shape", [(2**20, 2**20), (40, 46), (2**62, 2**62)])
def test_nvfp4_dequantize_checks_the_shape_before_allocating(framework, shape):
    """nvfp4.dequantize(..., shape, out=None): "ValueError: bad input (the library's message names the
    argument)". It allocated the output from `shape` before the library saw the shape, so a wrong one was
    an allocation of that shape (MemoryError for 4 TiB from NumPy, RuntimeError from torch, real device
    memory on CUDA) instead of the library's ValueError, as mxfp8.dequantize gives."""
    convert = (lambda a: a) if framework == "numpy" else pytest.importorskip("torch").from_numpy
    with pytest.raises(ValueError, match=r"rowwise_data|overflows int64"):
        nvfp4.dequantize(convert(NV_DATA), convert(NV_SCALES), convert(NV_AMAX), shape=shape, swizzled=False)


def test_nvfp4_float4_values_with_torch_inputs_are_a_type_error():
    """values_dtype="float4" is DLPack's float4_e2m1fn, which torch does not import: with torch inputs the
    export ran and torch's from_dlpack raised a RuntimeError carrying its C++ backtrace. A TypeError naming
    the option now comes first; NumPy inputs still get the DLPack object."""
    torch = pytest.importorskip("torch")
    t = torch.from_numpy
    with pytest.raises(TypeError, match=r"values_dtype='float4' with torch inputs"):
        nvfp4.export_components(t(NV_DATA), t(NV_SCALES), t(NV_AMAX), swizzled=False, values_dtype="float4")
    values, _, _ = nvfp4.export_components(NV_DATA, NV_SCALES, NV_AMAX, swizzled=False, values_dtype="float4")
    assert values.dtype == "float4_e2m1fn" and tuple(values.shape) == (40, 48)
    uint8, _, _ = nvfp4.export_components(t(NV_DATA), t(NV_SCALES), t(NV_AMAX), swizzled=False)
    assert torch.equal(uint8, t(NV_DATA))


def test_nvfp4_calls_refuse_read_only_outputs_and_read_read_only_inputs():
    """Outputs flagged read-only are refused with nothing written; read-only inputs (the data, a given
    amax) are only read."""
    out = np.full((40, 48), POISON, np.float32).view(np.uint32)
    out.fill(0xFFFFFFFF)
    out = out.view(np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out is read-only"):
        nvfp4.dequantize(NV_DATA, NV_SCALES, NV_AMAX, out=out, swizzled=False)
    assert (out.view(np.uint32) == 0xFFFFFFFF).all()
    x = rng.standard_normal((4, 32)).astype(np.float32)
    x.flags.writeable = False
    amax = np.array([3.0], np.float32)
    amax.flags.writeable = False
    given = mxfp8.nvfp4_quantize(x, amax=amax)
    assert given.amax is amax and amax[0] == 3.0
    computed = mxfp8.nvfp4_quantize(x)
    assert computed.amax[0] == np.abs(x).max()
    fused = mxfp8.nvfp4_quantize_fused([x, x], amax=amax)
    np.testing.assert_array_equal(fused[0].values, given.values)
    np.testing.assert_array_equal(fused[1].scales, given.scales)


def test_nvfp4_empty_tensors_with_huge_dimensions():
    """"Work is proportional to the bytes moved: an empty tensor costs nothing, however large its other
    dimensions" -- through the Python layer, which makes the outputs from the shapes."""
    q = mxfp8.nvfp4_quantize(np.empty((0, 2**40), np.float32))
    assert q.values.shape == (0, 2**39) and q.scales.shape == (0, 2**36)
    q = mxfp8.nvfp4_quantize(np.empty((0, 2**40), np.float32), scales="padded")
    assert q.scales.shape == (0, 2**36)
    d = nvfp4.dequantize(np.zeros((0, 2**39), np.uint8), np.zeros((0, 2**36), np.uint8), np.ones(1, np.float32), swizzled=False)
    assert d.shape == (0, 2**40)


def _nvfp4_bucket():
    specs = {"w": {"format": "nvfp4", "data": NV_DATA, "swizzled": False, "scale_inv": NV_SCALES[:40, :3].copy(), "amax": NV_AMAX}}
    return mxfp8.export_bucket(specs)


def _nvfp4_params():
    return {"w": (np.full((40, 24), POISON, np.uint8), np.full((40, 3), POISON, np.uint8),
                  np.full(1, np.nan, np.float32))}


@pytest.mark.parametrize("key,value,error,names", [
    ("e4m3_max", 2**32 + 448, ValueError, "manifest[0]['e4m3_max']"),  # was cut to 448 and accepted
    ("e4m3_max", -448, ValueError, "manifest[0]['e4m3_max']"),  # was pybind11's signature list
    ("e4m3_max", 300, ValueError, "desc.e4m3_maxes[0]"),
    ("e4m3_max", None, TypeError, "manifest[0]['e4m3_max']"),
    ("amax_offset", -4, ValueError, "manifest[0]['amax_offset']"),
    ("amax_offset", 2**64, ValueError, "manifest[0]['amax_offset']"),
    ("amax_offset", 2**64 - 4, ValueError, "desc.parts_in[0]"),
    ("amax_bytes", 4.5, TypeError, "manifest[0]['amax_bytes']"),  # int() made it 4
    ("amax_bytes", "4", TypeError, "manifest[0]['amax_bytes']"),
    ("values_offset", -1, ValueError, "manifest[0]['values_offset']"),
    ("scales_bytes", 120.0, TypeError, "manifest[0]['scales_bytes']"),
    ("shape", [40, 2**63], ValueError, "manifest[0]['shape'][1]"),
    ("shape", [-40, 48], ValueError, "desc.shapes[0]"),
    ("shape", "ab", TypeError, "manifest[0]['shape']"),
])
def test_import_bucket_takes_a_senders_numbers_as_they_are(key, value, error, names):
    """A hostile (or buggy) sender's manifest through mxfp8.import_bucket: each number is used as given
    or refused naming the field, and nothing is written."""
    bucket, manifest = _nvfp4_bucket()
    params = _nvfp4_params()
    mxfp8.import_bucket(bucket, manifest, params)
    np.testing.assert_array_equal(params["w"][0], NV_DATA)
    assert params["w"][2][0] == np.float32(5.0) / np.float32(2688.0)
    manifest[0][key] = value
    params = _nvfp4_params()
    with pytest.raises(error) as raised:
        mxfp8.import_bucket(bucket, manifest, params)
    assert names in str(raised.value)
    assert (params["w"][0] == POISON).all() and (params["w"][1] == POISON).all() and np.isnan(params["w"][2]).all()
