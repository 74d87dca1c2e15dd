"""NVIDIA ModelOpt's own quantizers as the oracle (issue 35 item 5): its MXFP8QTensor and NVFP4QTensor,
imported unchanged from the nvidia-modelopt wheel (scripts/install_deps.sh installs it for CI), quantize the
same weights as mxfp8.quantize and mxfp8.nvfp4_quantize, and every value byte, scale byte and global scale
must be equal. Inputs: random weights whose rows span 2^-12..2^12, with blocks of zeros, exact powers of
two and values on the rounding boundaries, in float32 and bfloat16, K not a multiple of 128, M not of 128.
Skips where ModelOpt does not import.

NVFP4 differs from ModelOpt in two kinds of block, found here and pinned: an all-zero block (ModelOpt
writes block scale 1.0, Transformer Engine and the library 0) and a block whose scale
block_amax / (6 * weight_scale_2) rounds below E4M3's smallest subnormal 2^-9 (ModelOpt clamps it to
2^-9 and keeps the block's values; TE and the library write scale 0, so the block decodes to zeros, which
is at most 2^-10 * 6 * weight_scale_2 from the weights). And a block scale or a value whose unrounded
magnitude lies within a few float32 ulps of a rounding boundary (E4M3's, or E2M1's 0.25, 0.75, ..., 5)
may round to the neighbouring code: the two compute it in different orders (ModelOpt
x / (scale * weight_scale_2), TE with its encode scale), which differ in the last bit (seen on bfloat16
weights, where exact ties are common). Every other byte is equal."""
import pytest

torch = pytest.importorskip("torch")
qtensor = pytest.importorskip("modelopt.torch.quantization.qtensor")

import mxfp8  # noqa: E402


def weights(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-12, 12, (shape[0], 1), generator=g).float())
    w[1, :32] = 0  # a zero block
    w[2, :64] = torch.exp2(torch.arange(64).float() % 8 - 4)  # exact powers of two
    w[3, :16] = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0] * 2) * (1 - 2 * (torch.arange(16) % 2))
    return w.to(dtype)


SHAPES = [(130, 96), (64, 544), (257, 160)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_mxfp8_equals_modelopt(shape, dtype):
    w = weights(shape, dtype, seed=sum(shape))
    theirs, scales = qtensor.MXFP8QTensor.quantize(w)
    ours = mxfp8.quantize(w)
    assert torch.equal(theirs._quantized_data.view(torch.uint8), ours.rowwise_data.view(torch.uint8))
    assert torch.equal(scales, ours.rowwise_scale_inv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_nvfp4_equals_modelopt(shape, dtype):
    w = weights(shape, dtype, seed=sum(shape) + 1)
    theirs, scales, scale_2 = qtensor.NVFP4QTensor.quantize(w, 16)
    ours = mxfp8.nvfp4_quantize(w)
    decode = torch.from_dlpack(ours.amax) / torch.tensor(6.0 * 448)  # ModelOpt's weight_scale_2, one division
    assert torch.equal(scale_2.reshape(1).view(torch.int32), decode.view(torch.int32))
    assert_equal_but_underflowing_blocks(w, theirs._quantized_data, scales, ours, decode)


def assert_equal_but_underflowing_blocks(w, their_values, their_scales, ours, decode):
    """Every value and scale byte equal, except in the blocks the module's docstring names, which must
    be exactly those and differ exactly so."""
    m, k = w.shape
    our_values, our_scales = torch.from_dlpack(ours.values), torch.from_dlpack(ours.scales)
    block_amax = w.float().abs().view(m, k // 16, 16).amax(-1)
    zero = block_amax == 0
    underflow = ~zero & (block_amax / (6 * decode) < 2.0 ** -10)
    assert underflow.any() and zero.any()  # the inputs reach both cases
    odd = zero | underflow
    # A block scale whose unrounded value block_amax / (6 * weight_scale_2) rounds differently a few ulps
    # away sits on an E4M3 rounding boundary: the two may round it to neighbouring codes.
    ratio = block_amax / (6 * decode)
    delta = 4 * torch.finfo(torch.float32).eps
    on_boundary = (ratio * (1 - delta)).to(torch.float8_e4m3fn) != (ratio * (1 + delta)).to(torch.float8_e4m3fn)
    scale_differs = their_scales.view(torch.uint8) != our_scales
    assert (on_boundary | ~scale_differs | odd).all(), "a block scale differs away from a rounding boundary"
    same = ~odd & ~scale_differs
    assert (our_scales[odd] == 0).all()
    assert (their_scales.float()[zero] == 1.0).all() and (their_scales.float()[underflow] == 2.0 ** -9).all()
    # Values: equal but at the rounding boundaries, and there one code apart.
    codes = lambda packed: torch.stack([packed & 15, packed >> 4], -1).reshape(m, k // 16, 16)  # noqa: E731
    lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, 0, -.5, -1, -1.5, -2, -3, -4, -6])
    ours_v, theirs_v = lut[codes(our_values).long()], lut[codes(their_values).long()]
    differ = (ours_v != theirs_v) & same.unsqueeze(-1)
    scaled = (w.float().view(m, k // 16, 16) / (their_scales.float() * decode).unsqueeze(-1)).abs()
    boundaries = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    near = ((scaled.unsqueeze(-1) - boundaries).abs() <= 4 * torch.finfo(torch.float32).eps * boundaries).any(-1)
    assert (near | ~differ).all(), "a value differs away from a rounding boundary"
    steps = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6])
    index = lambda v: torch.bucketize(v.abs(), steps)  # noqa: E731
    assert ((index(ours_v) - index(theirs_v)).abs()[differ] == 1).all()
    assert differ.sum() <= 0.01 * same.sum() * 16


def test_fused_nvfp4_equals_modelopt_under_the_shared_global_scale():
    """q/k/v quantized under one amax (mxfp8.nvfp4_quantize_fused) are what ModelOpt gives each of them with
    the group's weight_scale_2, as its exporter shares it across a fused layer."""
    parts = [weights((128, 256), torch.bfloat16, seed=s) * (1 + s) for s in range(3)]
    ours = mxfp8.nvfp4_quantize_fused(parts)
    shared = torch.from_dlpack(ours[0].amax) / torch.tensor(6.0 * 448)
    assert torch.equal(shared, max(p.float().abs().max() for p in parts).reshape(1) / torch.tensor(6.0 * 448))
    for p, q in zip(parts, ours):
        theirs, scales, _ = qtensor.NVFP4QTensor.quantize(p, 16, weights_scaling_factor_2=shared.reshape(()))
        assert_equal_but_underflowing_blocks(p, theirs._quantized_data, scales, q, shared)


def test_nvfp4_negative_zero_and_non_finite_inputs_differ_from_modelopt_as_the_header_says():
    """quantize.h: ModelOpt gives the same bytes for finite inputs without -0.0; -0.0 is code 8 here (TE's
    kernel, the sign kept) and code 0 there, and an Inf input gives another tensor there altogether (its
    global scale becomes Inf, ours stays the one the header's rule gives)."""
    x = torch.tensor([[1.0, -0.0] + [0.5] * 14])
    theirs = qtensor.NVFP4QTensor.quantize(x.clone(), 16)[0]._quantized_data.view(torch.uint8)
    ours = torch.from_dlpack(mxfp8.nvfp4_quantize(x).values).view(torch.uint8)
    assert theirs[0, 0] >> 4 == 0 and ours[0, 0] >> 4 == 8  # element 1 (-0.0) is the high nibble of byte 0
    assert torch.equal(theirs[0, 1:], ours[0, 1:]) and theirs[0, 0] & 0xF == ours[0, 0] & 0xF
    inf = torch.tensor([[float("inf")] + [1.0] * 15, [2.0] * 16])
    _, their_scales, their_scale_2 = qtensor.NVFP4QTensor.quantize(inf.clone(), 16)
    assert torch.isinf(their_scale_2).all()
    assert torch.isinf(torch.from_dlpack(mxfp8.nvfp4_quantize(inf).amax)).all()  # the amax kept; its scale finite
    assert not torch.equal(their_scales.view(torch.uint8).reshape(-1),
                           torch.from_dlpack(mxfp8.nvfp4_quantize(inf).scales).view(torch.uint8).reshape(-1))
