"""Transformer Engine's NVFP4 quantizer, written in NumPy from TE's rule (not from this library's code).

Sources read (TransformerEngine main): custom_recipes/reference_nvfp4.py (_quantize_blockwise_reference,
cast_to_fp4x2, the 4over6 reference), common/cast/nvfp4/core_nvfp4.cuh (the global encode scale),
quantize_transpose_nvfp4.cuh and quantize_4over6_nvfp4.cuh (operation order), cuda_fp4.hpp (what
cvt.rn.satfinite.e2m1x2 does with NaN and signed zeros). Every step is a float32 NumPy operation, which
rounds to nearest even like the GPU's __f*_rn. The two places where TE's Python reference and its kernels
differ, this follows the kernels: -0.0 (and negatives that round to zero) keep the sign bit (code 8), and
NaN becomes +6 (code 7), where reference_nvfp4.cast_to_fp4x2 writes code 0 for both.
"""
import numpy as np

F32 = np.float32
FLT_MAX = F32(np.finfo(np.float32).max)


def _e4m3_positive_values():
    """The 127 finite non-negative E4M3 (fn) values, code 0x00..0x7E, from the format's definition."""
    vals = []
    for code in range(0x7F):
        e, m = code >> 3, code & 7
        vals.append(m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))
    return np.array(vals, dtype=np.float64)


E4M3 = _e4m3_positive_values()
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float64)


def e4m3_encode(a):
    """__nv_fp8_e4m3(float): nearest, ties to the even code, saturating at 448 (Inf too), NaN 0x7F."""
    a = np.asarray(a, dtype=np.float64)
    mag = np.abs(a)
    hi = np.clip(np.searchsorted(E4M3, mag, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    d_lo, d_hi = np.abs(mag - E4M3[lo]), np.abs(E4M3[hi] - mag)
    code = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(mag >= 448.0, 126, code)  # satfinite: everything above the largest finite value
    code = code | np.where(np.signbit(a), 0x80, 0)
    return np.where(np.isnan(a), 0x7F, code).astype(np.uint8)


def e4m3_value(code):
    code = np.asarray(code, dtype=np.int64)
    v = E4M3[np.minimum(code & 0x7F, 126)]
    return np.where(code & 0x80, -v, v).astype(F32)


def e2m1_encode(y):
    """cvt.rn.satfinite.e2m1x2.f32, with TE's reference thresholds (cast_to_fp4x2) on the magnitude."""
    y = np.asarray(y, dtype=F32)
    a = np.abs(y)
    code = np.select(
        [a <= 0.25, a < 0.75, a <= 1.25, a < 1.75, a <= 2.5, a < 3.5, a <= 5.0],
        [0, 1, 2, 3, 4, 5, 6],
        default=7,
    )
    code = code | np.where(np.signbit(y), 8, 0)
    return np.where(np.isnan(y), 7, code).astype(np.uint8)


def e2m1_value(code):
    code = np.asarray(code, dtype=np.int64)
    v = E2M1[code & 7]
    return np.where(code & 8, -v, v).astype(F32)


def tensor_amax(x):
    """max |x|, NaN skipped, 0 for an empty tensor (TE's amax kernels use fmaxf)."""
    a = np.abs(np.asarray(x, dtype=F32)).ravel()
    return F32(np.fmax.reduce(a, initial=F32(0)))


def encode_scale(amax, e4m3_max):
    """compute_global_encode_scaling_factor_FP4: fminf(E4M3_MAX * 6 / amax, FLT_MAX); 1 for 0 / Inf."""
    amax = np.asarray(amax, dtype=F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # a tiny amax overflows to Inf
        s = np.fmin(F32(e4m3_max * 6) / amax, FLT_MAX).astype(F32)
    return np.where((amax == 0) | (s == 0), F32(1), s).astype(F32)


def quantize(x, *, amax=None, per_row=False, four_over_six=None, e4m3_max=448):
    """x: float32 (M, K) (already widened exactly from its dtype). Returns (values (M, ceil(K/2)) uint8,
    scales (M, ceil(K/16)) uint8, amax float32 (1,) or (M,))."""
    x = np.asarray(x, dtype=F32)
    m, k = x.shape
    nb = -(-k // 16)
    if amax is None:
        amax = np.array([tensor_amax(r) for r in x], F32) if per_row else np.array([tensor_amax(x)], F32)
    amax = np.asarray(amax, F32)
    row_amax = amax.reshape(m, 1) if per_row else np.full((m, 1), amax.reshape(-1)[0], F32)
    s_enc = encode_scale(row_amax, e4m3_max)  # (M, 1)
    with np.errstate(divide="ignore"):
        s_dec = (F32(1) / s_enc).astype(F32)
    xp = np.zeros((m, nb * 16), F32)  # TE pads partial blocks with zeros
    xp[:, :k] = x
    blocks = xp.reshape(m, nb, 16)
    block_amax = np.fmax.reduce(np.abs(blocks), axis=2, initial=F32(0)).astype(F32)  # NaN skipped
    s_enc_b, s_dec_b = s_enc.reshape(m, 1), s_dec.reshape(m, 1)

    def multiplier(scale):
        with np.errstate(divide="ignore", over="ignore"):
            return np.fmin(F32(1) / (e4m3_value(scale) * s_dec_b).astype(F32), FLT_MAX).astype(F32)

    def encode(r):
        with np.errstate(over="ignore", invalid="ignore"):
            return e2m1_encode((blocks * r[:, :, None]).astype(F32))

    if four_over_six is None:
        with np.errstate(over="ignore", invalid="ignore"):
            scale = e4m3_encode((block_amax * (s_enc_b * (F32(1) / F32(6))).astype(F32)).astype(F32))
        codes = encode(multiplier(scale))
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            base = ((block_amax / F32(6)).astype(F32) * s_enc_b).astype(F32)
            scale6 = e4m3_encode(np.fmin(base, F32(448)))
            scale4 = e4m3_encode(np.fmin((base * F32(1.5)).astype(F32), F32(448)))
        codes6, codes4 = encode(multiplier(scale6)), encode(multiplier(scale4))
        denom = F32(6 * e4m3_max)
        amax_b = row_amax.reshape(m, 1)

        def error(codes, scale):
            err = np.zeros((m, nb), F32)
            sf = e4m3_value(scale)
            with np.errstate(over="ignore", invalid="ignore"):
                for i in range(16):  # element order, one rounding per operation
                    val = (((e2m1_value(codes[:, :, i]) * sf).astype(F32) * amax_b).astype(F32) / denom).astype(F32)
                    d = (val - blocks[:, :, i]).astype(F32)
                    err = (err + (np.abs(d) if four_over_six == "mae" else (d * d).astype(F32))).astype(F32)
            return err

        pick4 = error(codes4, scale4) < error(codes6, scale6)
        codes = np.where(pick4[:, :, None], codes4, codes6)
        scale = np.where(pick4, scale4, scale6)
    codes = codes.reshape(m, nb * 16)[:, :k]
    if k % 2:
        codes = np.concatenate([codes, np.zeros((m, 1), np.uint8)], axis=1)
    values = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    return values, scale.astype(np.uint8), amax.reshape(-1)


def round_up(n, d):
    return (n + d - 1) // d * d


def padded(scales):
    """TE's padded allocation (roundup(M, 128), roundup(C, 4)), padding zero."""
    r, c = scales.shape
    out = np.zeros((round_up(r, 128), round_up(c, 4)), np.uint8)
    out[:r, :c] = scales
    return out


def swizzled(scales):
    """The padded matrix in the cuBLAS 128x4 layout, placed element by element from the offset formula."""
    p = padded(scales)
    rp, cp = p.shape
    out = np.zeros(rp * cp, np.uint8)
    rr, cc = np.meshgrid(np.arange(rp), np.arange(cp), indexing="ij")
    offset = ((rr // 128) * (cp // 4) + cc // 4) * 512 + (rr % 32) * 16 + ((rr % 128) // 32) * 4 + cc % 4
    out[offset.ravel()] = p.ravel()
    return out.reshape(rp, cp)
