"""An MXFP8 quantizer and decoder written from the rules, in NumPy + ml_dtypes, independently of the
library: what mxfp8.quantize must match bit for bit (and the PyTorch reference on the device, too).

RCEIL is Transformer Engine's float_to_e8m0(amax * float32(1/max_norm)) and exp2f_rcp; FLOOR is OCP MX
v1.0. amax skips NaN (fmax); elements are float32 products rounded to nearest-even into FP8 (ml_dtypes),
saturated to +-max_norm; NaN is written as 0x7F.
"""
import numpy as np
import ml_dtypes

from conftest import round_up, swizzle_reference as swizzle  # noqa: F401  (the layout, written once)

MAX_NORM = {"e4m3": 448.0, "e5m2": 57344.0}
EMAX = {"e4m3": 8, "e5m2": 15}
FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def exponent(amax, fp8_dtype, rounding):
    """The E8M0 byte for float32 amaxes."""
    amax = np.asarray(amax, np.float32)
    if rounding == "rceil":
        v = amax * np.float32(1.0 / MAX_NORM[fp8_dtype])
        bits = v.view(np.uint32)
        exp = ((bits >> 23) & 0xFF).astype(np.int64)
        man = bits & 0x7FFFFF
        up = (man > 0) & (exp != 0xFE) & ~((exp == 0) & (man <= 0x400000))
        e = np.where(exp == 0xFF, 0xFE, exp + up)
        e = np.where(v == 0, 0, e)
    else:
        exp = ((amax.view(np.uint32) >> 23) & 0xFF).astype(np.int64)
        e = np.where(exp == 0xFF, 0xFE, np.clip(exp - EMAX[fp8_dtype], 0, 254))
    return e.astype(np.uint8)


def reciprocal(e, rounding):
    """What a block's elements are multiplied by, float32."""
    e = e.astype(np.int64)
    if rounding == "rceil":
        r = ((254 - e) << 23).astype(np.uint32).view(np.float32)
        return np.where(e == 0, np.float32(1.0), r).astype(np.float32)
    return np.ldexp(np.float64(1.0), 127 - e).astype(np.float32)


def encode(scaled, fp8_dtype):
    m = np.float32(MAX_NORM[fp8_dtype])
    q = np.clip(scaled, -m, m).astype(FP8[fp8_dtype]).view(np.uint8)
    return np.where(np.isnan(scaled), np.uint8(0x7F), q)


def _block_amax(a, rows, cols):
    """fmax of |a| over blocks of rows x cols (a already padded to multiples)."""
    m, k = a.shape
    b = a.reshape(m // rows, rows, k // cols, cols)
    return np.fmax.reduce(np.fmax.reduce(b, axis=3), axis=1)


def quantize(x, fp8_dtype="e4m3", rounding="rceil", direction="rowwise", block="1x32"):
    """(values uint8 of x's shape, compact scales): rowwise (M, ceil(K/32)), columnwise (ceil(M/32), K),
    32x32 (ceil(M/32), ceil(K/32))."""
    shape = np.shape(x)
    x32 = np.asarray(x).astype(np.float32).reshape(-1, shape[-1])
    m, k = x32.shape
    padded = np.zeros((round_up(m, 32), round_up(k, 32)), np.float32)
    padded[:m, :k] = np.abs(x32)
    if block == "32x32":
        scales = exponent(_block_amax(padded, 32, 32), fp8_dtype, rounding)
        per_element = np.repeat(np.repeat(scales, 32, axis=0), 32, axis=1)[:m, :k]
    elif direction == "rowwise":
        scales = exponent(_block_amax(padded, 1, 32), fp8_dtype, rounding)[:m]
        per_element = np.repeat(scales, 32, axis=1)[:, :k]
    else:
        scales = exponent(_block_amax(padded, 32, 1), fp8_dtype, rounding)[:, :k]
        per_element = np.repeat(scales, 32, axis=0)[:m]
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = x32 * reciprocal(per_element, rounding)
    return encode(scaled, fp8_dtype).reshape(shape), scales


def dequantize(values_u8, scales, fp8_dtype, direction="rowwise"):
    """float32 of values * 2^(e - 127) (NaN for e = 255), with compact scales."""
    v = values_u8.view(FP8[fp8_dtype]).astype(np.float32).reshape(-1, values_u8.shape[-1])
    s = np.ldexp(np.float32(1.0), scales.astype(np.int32) - 127).astype(np.float32)
    s[scales == 255] = np.nan
    s = np.repeat(s, 32, axis=1)[:, : v.shape[1]] if direction == "rowwise" else np.repeat(s, 32, axis=0)[: v.shape[0]]
    with np.errstate(invalid="ignore", over="ignore"):
        return (v * s.reshape(v.shape)).reshape(values_u8.shape)


def special_input(shape, dtype, seed):
    """Random normal values with outliers, all-zero blocks, NaN, +-Inf, -0, tiny and subnormal values,
    and exact rounding ties, in `dtype` (a NumPy or ml_dtypes type)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    if n:
        flat[rng.integers(0, n, max(1, n // 50))] *= 1000.0  # outliers
        flat[rng.integers(0, n, max(1, n // 40))] = np.float32(2.0) ** rng.integers(-140, -120)  # tiny
        flat[rng.integers(0, n, max(1, n // 40))] *= np.float32(2.0) ** -20
        flat[rng.integers(0, n, max(1, n // 60))] = -0.0
        # ties: 464 * 2^j lies halfway between two E4M3 neighbours of the same block scale
        flat[rng.integers(0, n, max(1, n // 60))] = np.float32(464.0) * np.float32(2.0) ** rng.integers(-4, 4)
        if n >= 64:
            flat[rng.integers(0, n, 2)] = np.nan
            flat[rng.integers(0, n)] = np.inf
            flat[rng.integers(0, n)] = -np.inf
        if x.ndim >= 1 and x.shape[-1] >= 32 and x.reshape(-1, x.shape[-1]).shape[0] > 2:
            x.reshape(-1, x.shape[-1])[1, :32] = 0.0  # an all-zero block
    return x.astype(dtype)
