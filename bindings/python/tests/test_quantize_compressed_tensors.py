"""mxfp8.quantize(rounding="compressed_tensors"): bit for bit against ct_reference (compressed-tensors'
steps in NumPy), against compressed-tensors itself where it is installed (it needs torch, which CI does
not install), and on the GPU where there is one."""
import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import mxfp8
import ct_reference as ct
import mx_reference

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
SHAPES = [(1, 1), (3, 33), (64, 96), (70, 100), (2, 3, 40), (33, 31), (5, 64), (40, 1)]
MODES = {  # rowwise, columnwise, block
    "rowwise": (True, False, "1x32"),
    "columnwise": (False, True, "1x32"),
    "both": (True, True, "1x32"),
    "32x32": (True, True, "32x32"),
}


def u8(a):
    return np.from_dlpack(a)


def boundary_input(shape, dtype, seed):
    """special_input plus amaxes on the rule's edges: mantissas of exactly 1.75 (rounds up) and just below
    (stays), in float32 and in bfloat16 steps; amaxes at and above 1.75 * 2^127 (scale 255); the largest
    bfloat16 and float16; tiny and subnormal amaxes (scale 0); whole blocks of one such value."""
    x = mx_reference.special_input(shape, np.float32, seed).astype(np.float32)
    rng = np.random.default_rng(seed + 100)
    flat = x.reshape(-1)
    n = flat.size
    edges = np.array([1.75, 1.7499999, 1.7421875, 1.0, 1.5, 448.0, 3.5, 57344.0, 65504.0,
                      2.0 ** -126, 2.0 ** -130, 2.0 ** -149, 2.0 ** -118, 1.75 * 2.0 ** -120,
                      1.75 * 2.0 ** 127, 1.7499999 * 2.0 ** 127, 3.3895313892515355e38, 2.0 ** 127], np.float32)
    if n:
        picks = rng.integers(0, n, max(1, n // 8))
        flat[picks] = edges[rng.integers(0, edges.size, picks.size)] * np.where(rng.random(picks.size) < 0.5, -1, 1) \
            * np.float32(2.0) ** rng.integers(-6, 1, picks.size).astype(np.float32)
        flat[rng.integers(0, n, max(1, n // 16))] = edges[rng.integers(0, edges.size)]
    m = x.reshape(-1, shape[-1])
    if m.shape[0] > 4 and m.shape[1] >= 32:
        m[4, :32] = np.float32(1.75 * 2.0 ** -3)  # a whole block on the cut
    with np.errstate(over="ignore"):
        return x.astype(dtype)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fp8_dtype", ["e4m3", "e5m2"])
@pytest.mark.parametrize("mode", list(MODES))
def test_matches_the_reference_bit_for_bit(dtype, fp8_dtype, mode):
    rowwise, columnwise, block = MODES[mode]
    for i, shape in enumerate(SHAPES):
        for x in (mx_reference.special_input(shape, DTYPES[dtype], seed=i), boundary_input(shape, DTYPES[dtype], seed=i)):
            q = mxfp8.quantize(x, fp8_dtype=fp8_dtype, rounding="compressed_tensors", block=block, rowwise=rowwise,
                               columnwise=columnwise, values_dtype="uint8")
            for direction, values, scales in (("rowwise", q.rowwise_data, q.rowwise_scale_inv),
                                              ("columnwise", q.columnwise_data, q.columnwise_scale_inv)):
                if values is None:
                    continue
                v_ref, s_ref = ct.quantize(x, fp8_dtype, direction, block)
                v, s = u8(values), u8(scales)
                np.testing.assert_array_equal(s.reshape(s_ref.shape), s_ref, err_msg=f"{shape} {direction} scales")
                np.testing.assert_array_equal(v, ct.nan_as_7f(v_ref, fp8_dtype), err_msg=f"{shape} {direction} values")


def test_known_answers():
    """Blocks worked out by hand from compressed-tensors' rule (E4M3, offset 8)."""
    x = np.zeros((10, 32), np.float32)
    x[0, 0] = 1.0          # p = 1: e = 127 + 0 - 8 = 119; 1 * 2^8 = 256 = 0x78
    x[1, 0] = 1.75         # mantissa 0.75 rounds p up to 2: e = 120; 1.75 * 2^7 = 224 = 0x76
    x[2, 0] = 1.7499999    # stays at p = 1: e = 119; 447.99997 rounds to 448 = 0x7E (no saturation needed)
    x[3, :] = 0.0          # all zero: log2(0) = -Inf, clamped: e = 0
    x[3, 5] = -0.0         # 0 * 2^127 keeps its sign: 0x80
    x[4, 0], x[4, 1] = np.inf, -3.0   # Inf: e = 255, 3 / Inf = -0 (0x80), Inf / Inf = NaN (0x7F)
    x[5, 0], x[5, 1] = np.nan, 2.0    # NaN counts: e = 255, 2 / Inf = 0
    x[6, 0] = 3.0e38       # >= 1.75 * 2^127: round_to_power_2 overflows to Inf: e = 255
    x[7, 0] = 2.0 ** -130  # 127 - 130 - 8 < 0: e = 0, 2^-130 * 2^127 = 2^-3 = 0x20
    x[8, 0] = 500.0        # 1.95 * 2^8 rounds up: p = 512, e = 128; 500 / 2 = 250 -> 256 (RNE) = 0x78
    x[9, 0] = 448.0        # 448 = 1.75 * 2^8: p = 512, e = 128; 448 / 2 = 224 = 0x76
    q = mxfp8.quantize(x, rounding="compressed_tensors", values_dtype="uint8")
    s, v = u8(q.rowwise_scale_inv)[:, 0], u8(q.rowwise_data)
    assert list(s) == [119, 120, 119, 0, 255, 255, 255, 0, 128, 128]
    assert v[0, 0] == 0x78 and v[1, 0] == 0x76 and v[2, 0] == 0x7E
    assert v[3, 5] == 0x80 and v[3, 0] == 0
    assert v[4, 0] == 0x7F and v[4, 1] == 0x80 and v[5, 0] == 0x7F and v[5, 1] == 0 and v[6, 0] == 0
    assert v[7, 0] == 0x20
    assert v[8, 0] == 0x78 and v[9, 0] == 0x76
    # RCEIL and FLOOR differ on the same blocks: the rule really is a third one
    r = u8(mxfp8.quantize(x, values_dtype="uint8").rowwise_scale_inv)[:, 0]
    f = u8(mxfp8.quantize(x, rounding="floor", values_dtype="uint8").rowwise_scale_inv)[:, 0]
    assert list(r) != list(s) and list(f) != list(s)


def test_every_nan_payload_counts_as_inf():
    """The library reads any NaN as torch's canonical one: scale 255 whatever the payload and sign."""
    payloads = np.array([0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0xFFC00000, 0xFFFFFFFF, 0x7FE00000], np.uint32)
    x = np.ones((payloads.size, 32), np.float32)
    x[np.arange(payloads.size), 3] = payloads.view(np.float32)
    q = mxfp8.quantize(x, rounding="compressed_tensors", values_dtype="uint8")
    assert (u8(q.rowwise_scale_inv) == 255).all()
    v = u8(q.rowwise_data)
    assert (v[:, 3] == 0x7F).all() and (np.delete(v, 3, axis=1) == 0).all()


def test_the_name_is_checked():
    x = boundary_input((64, 96), np.float32, seed=3)
    v_ref, s_ref = ct.quantize(x, "e4m3")
    q = mxfp8.quantize(x, rounding="compressed_tensors", values_dtype="uint8")
    np.testing.assert_array_equal(u8(q.rowwise_scale_inv), s_ref)
    with pytest.raises(ValueError, match="rounding must be one of"):
        mxfp8.quantize(x, rounding="compressed-tensors")


# compressed-tensors itself, where it is installed (it pulls torch; CI does not install it).
def _compressed_tensors_quantize(x):
    """vLLM #46400's _quantize_mxfp8, from compressed-tensors' own functions: rowwise E4M3, K % 32 == 0."""
    import torch
    from compressed_tensors.quantization import QuantizationArgs, QuantizationType
    from compressed_tensors.quantization.lifecycle.forward_helpers import _quantize
    from compressed_tensors.quantization.quant_args import round_to_quantized_type_dtype
    from compressed_tensors.quantization.utils.mxfp_utils import generate_mx_scales

    n, k = x.shape
    groups = x.view(n, k // 32, 32)
    amax = groups.abs().amax(dim=2)
    scale = generate_mx_scales(amax, num_bits=8)
    byte = round_to_quantized_type_dtype(scale, torch.uint8, cast_to_original_dtype=False)
    scale_f = torch.exp2(byte.to(torch.int32).to(torch.float32) - 127.0).to(x.dtype)
    args = QuantizationArgs(num_bits=8, type=QuantizationType.FLOAT, symmetric=True)
    q = _quantize(x=groups, scale=scale_f.unsqueeze(-1), zero_point=None, q_min=torch.tensor(-448.0),
                  q_max=torch.tensor(448.0), args=args, dtype=torch.float8_e4m3fn)
    return q.reshape(n, k).view(torch.uint8).numpy(), byte.numpy()


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16"])
def test_matches_compressed_tensors_itself(dtype):
    torch = pytest.importorskip("torch")
    pytest.importorskip("compressed_tensors")
    for i, shape in enumerate([(64, 96), (5, 4096), (130, 64)]):
        for x_np in (mx_reference.special_input(shape, DTYPES[dtype], seed=i), boundary_input(shape, DTYPES[dtype], seed=i)):
            x = torch.from_numpy(x_np.astype(np.float32)).to(getattr(torch, dtype))  # exact
            # compressed-tensors works in the input's dtype for bfloat16 and float32; float16 goes through
            # float32 (in float16 its 2^(e - 127) scales underflow; see mxfp8.h)
            v_ct, s_ct = _compressed_tensors_quantize(x if dtype != "float16" else x.float())
            # the inputs hold only canonical NaNs, the ones compressed-tensors turns into scale 255
            q = mxfp8.quantize(x_np, rounding="compressed_tensors", values_dtype="uint8")
            np.testing.assert_array_equal(u8(q.rowwise_scale_inv), s_ct, err_msg=f"{dtype} {shape} scales")
            np.testing.assert_array_equal(u8(q.rowwise_data), ct.nan_as_7f(v_ct), err_msg=f"{dtype} {shape} values")


def test_reference_agrees_with_compressed_tensors_itself():
    """The NumPy reference is only worth something if it is compressed-tensors: checked where it is installed."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("compressed_tensors")
    for dtype in ("bfloat16", "float32"):
        x_np = boundary_input((96, 128), DTYPES[dtype], seed=9)
        v_ct, s_ct = _compressed_tensors_quantize(torch.from_numpy(x_np.astype(np.float32)).to(getattr(torch, dtype)))
        v_ref, s_ref = ct.quantize(x_np)
        np.testing.assert_array_equal(s_ref, s_ct)
        np.testing.assert_array_equal(ct.nan_as_7f(v_ref), ct.nan_as_7f(v_ct))


def test_on_the_gpu_matches_the_reference():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
        pytest.skip("needs a CUDA device and a CUDA build of mxfp8")
    for dtype in ("bfloat16", "float16", "float32"):
        for shape, block in (((512, 4096 + 64), "1x32"), ((70, 100), "1x32"), ((256, 512), "32x32")):
            x_np = boundary_input(shape, DTYPES[dtype], seed=11)
            x = torch.from_numpy(x_np.astype(np.float32)).cuda().to(getattr(torch, dtype))
            q = mxfp8.quantize(x, rounding="compressed_tensors", block=block, rowwise=True, columnwise=True)
            for direction in ("rowwise", "columnwise"):
                v_ref, s_ref = ct.quantize(x_np, "e4m3", direction, block)
                values = getattr(q, f"{direction}_data").view(torch.uint8).cpu().numpy()
                scales = getattr(q, f"{direction}_scale_inv").cpu().numpy()
                np.testing.assert_array_equal(scales.reshape(s_ref.shape), s_ref, err_msg=f"{dtype} {shape} {direction}")
                np.testing.assert_array_equal(values, ct.nan_as_7f(v_ref), err_msg=f"{dtype} {shape} {direction}")
