"""compressed-tensors' MXFP8 quantizer, step by step in NumPy + ml_dtypes, written from its code
(compressed_tensors.quantization.utils.mxfp_utils and .lifecycle.forward_helpers, 0.20) and not from
this library's: what mxfp8.quantize(rounding="compressed_tensors") must match bit for bit.

The steps, in the dtype compressed-tensors works in (bfloat16 for a bfloat16 input, as vLLM's online
quantizer runs it; float32 otherwise, a float16 input being upcast first):
  1. amax of |x| per block; torch.amax propagates NaN. Its NaN is torch's canonical one (0x7FC00000,
     bfloat16 0x7FC0), which step 2 turns into Inf. (compressed-tensors on a NaN of another payload
     may differ: the add of step 2 can carry into the sign bit, e.g. 0x7FFFFFFF gives -0 and scale 0.
     The library treats every NaN as the canonical one.)
  2. round_to_power_2: the amax's bits + (1 << (mantissa_bits - elem_mantissa - 1)) with FP4's one
     mantissa bit, then only the sign and exponent bits kept.
  3. generate_mx_scales: 127 + floor(log2(p)) - 8 (floor(log2(448))).
  4. round_to_quantized_type_dtype(uint8): round(clamp(., 0, 255)).
  5. the float scale 2^(e - 127) in float32, cast to the working dtype (2^128 is Inf).
  6. _quantize: x / scale, clamped to +-448, cast to float8_e4m3fn.
E5M2 (which compressed-tensors has no MX format for) follows the same steps with 15 and 57344.

The library writes every NaN value as 0x7F; torch's cast keeps a NaN's sign bit. `nan_as_7f` maps the
reference's NaN bytes to 0x7F for the comparison.
"""
import numpy as np
import ml_dtypes

MAX = {"e4m3": 448.0, "e5m2": 57344.0}
OFFSET = {"e4m3": 8, "e5m2": 15}  # floor(log2(max))
FP8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}
FP4_E2M1_MANTISSA = 1


def working_dtype(dtype):
    return ml_dtypes.bfloat16 if np.dtype(dtype) == np.dtype(ml_dtypes.bfloat16) else np.float32


def round_to_power_2(amax):
    """compressed-tensors' round_to_power_2 on a bfloat16 or float32 array."""
    if amax.dtype == np.dtype(ml_dtypes.bfloat16):
        bits, mantissa, exponent, back = amax.view(np.uint16).astype(np.int64), 7, 8, np.uint16
    else:
        bits, mantissa, exponent, back = amax.view(np.uint32).astype(np.int64), 23, 8, np.uint32
    add = 1 << (mantissa - FP4_E2M1_MANTISSA - 1)
    sign_exponent_mask = ((1 << (exponent + 1)) - 1) << mantissa
    return ((bits + add) & sign_exponent_mask).astype(back).view(amax.dtype)


def scale_bytes(amax, fp8_dtype="e4m3"):
    """Steps 2-4 for block amaxes already in the working dtype."""
    p = round_to_power_2(amax).astype(np.float32)  # a power of two, 0 or Inf: exact in float32
    with np.errstate(divide="ignore"):
        e = 127 + np.floor(np.log2(p)) - OFFSET[fp8_dtype]
    return np.round(np.clip(e, 0, 255)).astype(np.uint8)


def _block_amax(a, rows, cols):
    """max of |a| over blocks of rows x cols, NaN propagating (a padded with zeros to multiples)."""
    m, k = a.shape
    return a.reshape(m // rows, rows, k // cols, cols).max(axis=(1, 3))


def _canonical(amax):
    """float32 amaxes with every NaN as 0x7FC00000 (what torch's reductions return)."""
    return np.where(np.isnan(amax), np.float32(np.nan), amax).astype(np.float32)


def quantize(x, fp8_dtype="e4m3", direction="rowwise", block="1x32"):
    """(values uint8 of x's shape, compact scales), the layout of mx_reference.quantize."""
    shape = np.shape(x)
    work = working_dtype(np.asarray(x).dtype)
    xw = np.asarray(x).astype(np.float32).astype(work).reshape(-1, shape[-1])
    m, k = xw.shape
    pm, pk = -(-m // 32) * 32, -(-k // 32) * 32
    padded = np.zeros((pm, pk), np.float32)
    padded[:m, :k] = np.abs(xw.astype(np.float32))  # |x| is exact in any dtype; the amax is an element
    if block == "32x32":
        scales = scale_bytes(_canonical(_block_amax(padded, 32, 32)).astype(work), fp8_dtype)
        per_element = np.repeat(np.repeat(scales, 32, axis=0), 32, axis=1)[:m, :k]
    elif direction == "rowwise":
        scales = scale_bytes(_canonical(_block_amax(padded, 1, 32)).astype(work), fp8_dtype)[:m]
        per_element = np.repeat(scales, 32, axis=1)[:, :k]
    else:
        scales = scale_bytes(_canonical(_block_amax(padded, 32, 1)).astype(work), fp8_dtype)[:, :k]
        per_element = np.repeat(scales, 32, axis=0)[:m]
    with np.errstate(over="ignore"):
        scale = np.exp2(per_element.astype(np.float32) - 127.0).astype(np.float32).astype(work)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = (xw / scale).astype(work)  # bfloat16 / bfloat16 rounds to bfloat16, as torch does
    limit = MAX[fp8_dtype]
    clamped = np.clip(scaled.astype(np.float32), -limit, limit)
    values = clamped.astype(FP8[fp8_dtype]).view(np.uint8)
    return values.reshape(shape), scales


def nan_as_7f(values, fp8_dtype="e4m3"):
    """The reference's NaN bytes (0x7F or 0xFF for E4M3; any NaN code for E5M2) as 0x7F."""
    nan = np.isnan(values.view(FP8[fp8_dtype]).astype(np.float32))
    return np.where(nan, np.uint8(0x7F), values)
