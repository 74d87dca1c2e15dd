"""vLLM's own MXFP8 functions as the oracle (issue 35, items 3 and 5): `swizzle_mxfp8_scale` (the cuBLAS 128x4
layout its FlashInfer path loads) and `_mxfp8_e4m3_quantize_torch` (its online MXFP8 quantizer on Hopper),
compiled unchanged from vllm/model_executor/layers/quantization/utils/mxfp8_utils.py as scripts/install_deps.sh
keeps it from the vLLM 0.33.0 wheel (the module imports the whole engine, so conftest.vllm_functions compiles
the two functions from its syntax tree). Our swizzle and our RCEIL quantize (Transformer Engine's rule) must
give every byte theirs: the README's statement that vLLM's online rule is RCEIL, pinned. Random weights whose
rows span 2^-12..2^12, with an all-zero block, M not a multiple of 128, K/32 not of 4; float32 and bfloat16;
2-D and 3-D (vLLM swizzles each matrix of a 3-D tensor on its own). Skips without the kept file."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mxfp8  # noqa: E402
from conftest import vllm_functions  # noqa: E402


@pytest.fixture(scope="module")
def vllm():
    # The module's constants, as facts (mxfp8_utils.py defines them beside the functions)
    namespace = {"torch": torch, "MXFP8_VALUE_DTYPE": torch.float8_e4m3fn, "MXFP8_SCALE_DTYPE": torch.uint8,
                 "MXFP8_BLOCK_SIZE": 32}
    return vllm_functions("vllm/model_executor/layers/quantization/utils/mxfp8_utils.py",
                          ["swizzle_mxfp8_scale", "_mxfp8_e4m3_quantize_torch"], namespace)


def weights(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * torch.exp2(torch.randint(-12, 13, shape[:-1] + (1,), generator=g).float())
    x.view(-1, shape[-1])[1, 32:64] = 0  # one all-zero block
    return x.to(dtype)


def u8(t):
    return t.contiguous().view(torch.uint8).numpy()


@pytest.mark.parametrize("m,k", [(1, 32), (130, 96), (257, 1056), (128, 512)])
def test_128x4_swizzle_is_vllms(vllm, m, k):
    s = torch.randint(0, 256, (m, k // 32), dtype=torch.uint8, generator=torch.Generator().manual_seed(m + k))
    want = vllm["swizzle_mxfp8_scale"](s, M=m, K=k)
    got = mxfp8.swizzle_scales(s)
    assert np.array_equal(u8(got).reshape(-1), u8(want))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", [(130, 96), (3, 70, 160), (256, 1024)])
def test_online_quantize_is_rceil(vllm, dtype, shape):
    x = weights(shape, dtype, seed=sum(shape))
    values, scales = vllm["_mxfp8_e4m3_quantize_torch"](x)
    ours = mxfp8.quantize(x)  # TE's RCEIL rule, compact scales
    assert np.array_equal(u8(ours.rowwise_data), u8(values))
    assert np.array_equal(u8(ours.rowwise_scale_inv).reshape(-1), u8(scales).reshape(-1))
    if len(shape) == 2:  # vLLM's swizzled form: each matrix's 128x4 scales, flat
        _, swizzled = vllm["_mxfp8_e4m3_quantize_torch"](x, is_sf_swizzled_layout=True)
        assert np.array_equal(u8(mxfp8.quantize(x, scales="swizzled").rowwise_scale_inv).reshape(-1), u8(swizzled))
