"""NVFP4 written from the format's rules, in NumPy, independently of the library (and of ml_dtypes):
the E2M1 table, E4M3 decoded from its bits (subnormals, NaN), two codes per byte with the even element in
the low nibble, TE's padded and 128x4 layouts (conftest's permute form), and TE's decode order
x = e2m1 * ((e4m3 * amax) * float32(1 / (6 * E4M3_MAX))), every product rounded to float32."""
import numpy as np

from conftest import POISON, round_up, swizzle_reference

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], np.float32)
SPECIAL_SCALES = np.array([0x00, 0x80, 0x01, 0x03, 0x07, 0x08, 0x7E, 0x7F, 0xFF, 0xB8, 0x77], np.uint8)


def e4m3(byte):
    """float32 values of E4M3 (float8_e4m3fn) bytes: bias 7, subnormals m * 2^-9, S.1111.111 NaN, no Inf."""
    b = np.asarray(byte, np.uint8).astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    e = (b >> 3) & 0xF
    m = b & 0x7
    v = np.where(e == 0, m * 2.0 ** -9, (8 + m) * np.exp2(e - 10.0))
    v = np.where((e == 15) & (m == 7), np.nan, v)
    return (sign * v).astype(np.float32)


def pack(codes):
    """(R, C) codes 0..15 -> (R, C/2) bytes, the even element in the low nibble."""
    codes = np.asarray(codes, np.uint8)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def random_case(rows, cols, seed):
    """Codes (with some all-zero blocks) and compact scales (with specials) of a rows x cols stored matrix."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 16, size=(rows, cols), dtype=np.uint8)
    codes[::3, :16] = np.array([0, 8] * 8, np.uint8)[: min(16, cols)]  # +-0 blocks
    sc = -(-cols // 16)
    scales = rng.integers(0x20, 0x60, size=(rows, sc), dtype=np.uint8)
    pick = rng.random((rows, sc)) < 0.15
    scales[pick] = rng.choice(SPECIAL_SCALES, size=int(pick.sum()))
    return codes, scales


def store_scales(scales, layout):
    """compact, TE-padded (roundup(R,128), roundup(C,4)) or 128x4-swizzled, padding poisoned."""
    r, c = scales.shape
    rp, cp = round_up(r, 128), round_up(c, 4)
    if layout == "compact":
        return scales.copy()
    if layout == "padded":
        buf = np.full((rp, cp), POISON, np.uint8)
        buf[:r, :c] = scales
        return buf
    swz = swizzle_reference(scales)
    real = swizzle_reference(np.ones_like(scales)) == 1
    swz[~real] = POISON
    return swz


def dequantize(codes, scales, amax, e4m3_max):
    """float32 (R, C): TE's dequantize_fp4_kernel, in its order."""
    rows, cols = codes.shape
    amax = np.asarray(amax, np.float32).reshape(-1)
    a = amax if amax.size == rows else np.full(rows, amax[0], np.float32)
    factor = np.float32(1.0) / np.float32(6.0 * e4m3_max)
    block = np.repeat(e4m3(scales), 16, axis=1)[:, :cols]
    with np.errstate(invalid="ignore", over="ignore"):
        final = (block * a[:, None]).astype(np.float32) * factor
        return (E2M1[codes] * final).astype(np.float32)


def encode_scale(amax, e4m3_max):
    """TE's compute_global_encode_scaling_factor_FP4: (E4M3_MAX * 6) / amax, fminf with FLT_MAX (NaN ->
    FLT_MAX), 1 for amax 0 or a zero quotient."""
    amax = np.asarray(amax, np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.float32(e4m3_max * 6.0) / amax
    big = np.float32(np.finfo(np.float32).max)
    s = np.where(np.isnan(s) | (s > big), big, s)
    return np.where((amax == 0) | (s == 0), np.float32(1.0), s).astype(np.float32)
