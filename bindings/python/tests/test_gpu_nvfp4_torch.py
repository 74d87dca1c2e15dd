"""NVFP4 quantize on CUDA torch tensors, bit for bit against nvfp4_quantize_reference.py (TE's rule in NumPy):
every option, both directions, fused shards, a given amax on the device, a side stream. Skips without a
CUDA device."""
import numpy as np
import pytest

import mxfp8
import nvfp4_quantize_reference as ref
from test_nvfp4_quantize import OPTIONS, _ref_kwargs, as_dtype, specials

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
    pytest.skip("needs a CUDA device and a CUDA build of mxfp8", allow_module_level=True)

F32 = np.float32
TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def to_cuda(x, dtype):
    """The NumPy array (float32, float16 or ml_dtypes bfloat16) as a CUDA tensor of the same bits."""
    if dtype == "bfloat16":
        return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.ascontiguousarray(x)).cuda()


@pytest.mark.parametrize("columnwise", [False, True])
@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("shape", [(64, 256), (34, 30), (300, 1040), (2, 3, 40)], ids=str)
def test_cuda_matches_reference(shape, dtype, options, per_row, columnwise):
    if per_row and columnwise:
        pytest.skip("per-row amax is rowwise only (refused columnwise, as TE keeps one columnwise amax)")
    x, xf = as_dtype(specials(np.random.default_rng(sum(shape) + len(dtype)), shape), dtype)
    q = mxfp8.nvfp4_quantize(to_cuda(x, dtype), per_row=per_row, columnwise=columnwise, **options)
    assert q.values.is_cuda and q.scales.is_cuda and q.amax.is_cuda
    m, k = int(np.prod(shape[:-1])), shape[-1]
    x2 = xf.reshape(m, k)
    ev, es, ea = ref.quantize(x2.T.copy() if columnwise else x2, per_row=per_row, **_ref_kwargs(options))
    np.testing.assert_array_equal(q.amax.cpu().numpy().view(np.uint32), ea.view(np.uint32))
    np.testing.assert_array_equal(q.scales.cpu().numpy().reshape(es.shape), es)
    np.testing.assert_array_equal(q.values.cpu().numpy().reshape(ev.shape), ev)


@pytest.mark.parametrize("layout", ["padded", "swizzled"])
def test_cuda_padded_and_swizzled_scales(layout):
    x = specials(np.random.default_rng(9), (200, 80))
    q = mxfp8.nvfp4_quantize(to_cuda(x, "float32"), scales=layout, four_over_six="mae")
    _, es, _ = ref.quantize(x, four_over_six="mae")
    want = ref.padded(es) if layout == "padded" else ref.swizzled(es)
    np.testing.assert_array_equal(q.scales.cpu().numpy(), want)


def test_cuda_fused_shards_and_given_amax_on_a_side_stream():
    rng = np.random.default_rng(10)
    shards = [rng.standard_normal((r, 64)).astype(F32) * F32(s) for r, s in ((128, 1.0), (17, 30.0), (64, 0.1))]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = mxfp8.nvfp4_quantize_fused([to_cuda(s, "float32") for s in shards], four_over_six="mse")
    stream.synchronize()
    shared = np.array([max(ref.tensor_amax(s) for s in shards)], F32)
    for shard, q in zip(shards, out):
        assert q.amax.cpu().numpy().tolist() == shared.tolist()
        ev, es, _ = ref.quantize(shard, amax=shared, four_over_six="mse")
        np.testing.assert_array_equal(q.values.cpu().numpy(), ev)
        np.testing.assert_array_equal(q.scales.cpu().numpy(), es)
    given = torch.tensor([0.25], device="cuda")
    q = mxfp8.nvfp4_quantize(to_cuda(shards[0], "float32"), amax=given)
    ev, es, _ = ref.quantize(shards[0], amax=np.array([0.25], F32))
    np.testing.assert_array_equal(q.values.cpu().numpy(), ev)
    np.testing.assert_array_equal(q.scales.cpu().numpy(), es)
    assert given.item() == 0.25


@pytest.mark.parametrize("per_row", [False, True])
@pytest.mark.parametrize("rows", [(1, 199), [(199, 200), (0, 3)]], ids=["range", "pieces"])
def test_cuda_export_of_a_shard_matches_the_host(rows, per_row):
    """mxfp8.nvfp4.export_components(rows=, cols=) of CUDA torch tensors (copies through torch's allocator
    for row pieces) is the host export of the same bytes, every part."""
    x = specials(np.random.default_rng(12), (200, 96))
    q = mxfp8.nvfp4_quantize(to_cuda(x, "float32"), per_row=per_row, scales="swizzled")
    kwargs = dict(shape=(200, 96), swizzled=True, rows=rows, cols=(32, None))
    dev = mxfp8.nvfp4.export_components(q.values, q.scales, q.amax, **kwargs)
    host = mxfp8.nvfp4.export_components(q.values.cpu().numpy(), q.scales.cpu().numpy(), q.amax.cpu().numpy(), **kwargs)
    torch.cuda.synchronize()
    for name in ("values", "scales", "global_scale"):
        got, want = getattr(dev, name), np.from_dlpack(getattr(host, name))
        assert got.is_cuda, name
        np.testing.assert_array_equal(got.cpu().numpy().view(np.uint8), want.view(np.uint8), err_msg=name)
