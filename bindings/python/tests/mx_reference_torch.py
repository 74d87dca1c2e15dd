"""The rowwise RCEIL rules of mx_reference again, in PyTorch ops (so they run on the GPU): the device's
second reference for mxfp8.quantize, and the PyTorch baseline of the quantize benchmark
(bench/run_bench.py)."""
import torch

MAX_NORM = {"e4m3": 448.0, "e5m2": 57344.0}
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def quantize_rowwise(x, fp8_dtype="e4m3"):
    """RCEIL, 1x32 blocks along K (K % 32 == 0): (values as uint8 (M, K), scales uint8 (M, K/32))."""
    m, k = x.shape
    blocks = x.reshape(m, k // 32, 32).float()
    magnitude = blocks.abs()
    amax = torch.where(magnitude.isnan(), torch.zeros_like(magnitude), magnitude).amax(-1)  # NaN skipped
    v = amax * torch.tensor(1.0 / MAX_NORM[fp8_dtype], dtype=torch.float32, device=x.device)
    bits = v.view(torch.int32)
    exponent = (bits >> 23) & 0xFF
    mantissa = bits & 0x7FFFFF
    up = (mantissa > 0) & (exponent != 0xFE) & ~((exponent == 0) & (mantissa <= 0x400000))
    e = torch.where(exponent == 0xFF, 0xFE, exponent + up.int())
    e = torch.where(v == 0, 0, e)
    reciprocal = torch.where(e == 0, 1.0, ((254 - e) << 23).view(torch.float32))
    scaled = blocks * reciprocal[..., None]
    limit = MAX_NORM[fp8_dtype]
    q = scaled.clamp(-limit, limit).to(FP8[fp8_dtype]).view(torch.uint8)
    q = torch.where(scaled.isnan(), torch.full_like(q, 0x7F), q)
    return q.reshape(m, k), e.to(torch.uint8)
