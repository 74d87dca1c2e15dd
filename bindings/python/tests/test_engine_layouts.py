"""Engine-native targets through the Python API: mxfp8.convert and the import calls into "compact",
"cutlass_128x4", "deepgemm" and "deepgemm_float32", each checked against a reference written here from the
consumer's own procedure (DeepGEMM's torch path of get_mn_major_tma_aligned_packed_ue8m0_tensor: pad, view
the bytes as little-endian int32, store MN-major; SGLang's Hopper DeepGEMM scales, (u8 as int32 << 23)
viewed as float32; the cuBLAS 128x4 permute form), never from the library; and "deepgemm" against SGLang's own
packing functions read from its wheel. Partial
shapes, poisoned outputs, round trips back to compact, the zero-exponent fix-up, bad input. Host arrays
always; torch (CPU, and CUDA where there is a GPU) when installed."""
import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8, round_up, swizzle_reference

POISON = 0xFF
TARGETS = ["compact", "cutlass_128x4", "deepgemm", "deepgemm_float32"]
# (shape, storage): rows not a multiple of 4, K not of 32, ceil(K/32) not of 4
SHAPES = [((100, 48), "padded"), ((257, 200), "swizzled"), ((3, 5, 130), "compact"), ((130, 288), "swizzled"),
          ((1, 33), "padded"), ((256, 512), "padded")]


def deepgemm_reference(s):
    """DeepGEMM's packed UE8M0 tensor of S (mn x sf_k) as (storage int32 array, shape, strides in
    elements), following its torch path: zero-pad to (roundup(mn, 4), roundup(sf_k, 4)) bytes, view each row
    as little-endian int32, copy into an MN-major tensor of strides (1, mn_aligned)."""
    mn, sf_k = s.shape
    mn_aligned, k_aligned = round_up(mn, 4), round_up(sf_k, 4)
    padded = np.zeros((mn_aligned, k_aligned), np.uint8)
    padded[:mn, :sf_k] = s
    words = padded.view("<i4")  # (mn_aligned, k_aligned / 4)
    storage = np.ascontiguousarray(words.T).reshape(-1)  # element (m, j) at j * mn_aligned + m
    return storage, (mn, k_aligned // 4), (1, mn_aligned)


def sglang_hopper_reference(s):
    """SGLang's weight_scale_inv_deepgemm on Hopper (Fp8LinearMethod._process_mxfp8_linear_weight_scale
    without DEEPGEMM_SCALE_UE8M0): (scale_u8.to(torch.int32) << 23).view(torch.float32), in NumPy."""
    return (s.astype(np.int32) << 23).view(np.float32)


def reference(s, target, direction="rowwise"):
    """The target's bytes of S, flat uint8."""
    if target == "compact":
        return s.reshape(-1)
    if target == "deepgemm_float32":
        return sglang_hopper_reference(s).reshape(-1).view(np.uint8)
    if target == "cutlass_128x4":
        return swizzle_reference(s if direction == "rowwise" else s.T.copy())
    return deepgemm_reference(s)[0].view(np.uint8)


def _sglang_deepgemm_packing(monkeypatch):
    """SGLang's own pack_mxfp8_weight_scale_for_deepgemm and its torch path of DeepGEMM's packing
    (_get_mn_major_tma_aligned_packed_ue8m0_tensor_torch_impl), read unchanged from the sglang wheel that
    scripts/install_deps.sh downloads (sglang/srt/layers/quantization/fp8_utils.py; only these two
    definitions are executed, the module's imports are far larger). The two DeepGEMM helpers they import are
    given here as DeepGEMM defines them (align: round up; get_tma_aligned_size: to 16 bytes), and DeepGEMM's
    packing entry point is SGLang's torch path, as SGLang's own use_torch_impl=True does."""
    import ast
    import pathlib
    import sys
    import types
    import zipfile

    torch = pytest.importorskip("torch")
    wheels = sorted((pathlib.Path(sys.prefix) / "wheels").glob("sglang-*.whl"))
    if not wheels:
        pytest.skip(f"no sglang wheel in {sys.prefix}/wheels (scripts/install_deps.sh test downloads it there)")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        source = wheel.read("sglang/srt/layers/quantization/fp8_utils.py").decode()
    wanted = ("pack_mxfp8_weight_scale_for_deepgemm", "_get_mn_major_tma_aligned_packed_ue8m0_tensor_torch_impl")
    defs = [node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name in wanted]
    assert sorted(d.name for d in defs) == sorted(wanted), "the sglang wheel no longer defines these"
    namespace = {"torch": torch}
    exec(compile(ast.Module(body=defs, type_ignores=[]), "sglang/srt/layers/quantization/fp8_utils.py", "exec"), namespace)
    utils = types.ModuleType("deep_gemm.utils")
    utils.align = lambda x, y: (x + y - 1) // y * y
    utils.get_tma_aligned_size = lambda x, element_size: utils.align(x, 16 // element_size)
    layout = types.ModuleType("deep_gemm.utils.layout")
    layout.get_mn_major_tma_aligned_packed_ue8m0_tensor = namespace[wanted[1]]
    for name, module in (("deep_gemm", types.ModuleType("deep_gemm")), ("deep_gemm.utils", utils),
                         ("deep_gemm.utils.layout", layout)):
        monkeypatch.setitem(sys.modules, name, module)
    utils.layout = layout
    sys.modules["deep_gemm"].utils = utils
    return torch, namespace[wanted[0]]


@pytest.mark.parametrize("n,k", [(256, 512), (100, 128), (130, 96), (4096, 768)])
def test_deepgemm_matches_sglangs_own_packing(monkeypatch, n, k):
    """SGLang's Blackwell weight_scale_inv_deepgemm (fp8_utils.pack_mxfp8_weight_scale_for_deepgemm, K a
    multiple of 32 as SGLang requires) against convert(..., "deepgemm"): the same int32 tensor, shape,
    strides and every word."""
    torch, pack = _sglang_deepgemm_packing(monkeypatch)
    data, buf, s = make_mxfp8((n, k), "swizzled", seed=n + k)
    want = pack(torch.from_numpy(s), n, k)
    got = mxfp8.convert(data, buf, "deepgemm", swizzled=True).scales
    assert got.dtype == np.int32 and got.shape == tuple(want.shape)
    assert got.strides == tuple(4 * x for x in want.stride())
    np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("shape,storage", SHAPES)
def test_convert_matches_the_consumers_reference(shape, storage, target):
    data, buf, s = make_mxfp8(shape, storage, seed=len(shape) + shape[-1])
    out = mxfp8.convert(data, buf, target, swizzled=storage == "swizzled", values=True)
    np.testing.assert_array_equal(out.values, data)
    flat = np.lib.stride_tricks.as_strided(out.scales, (mxfp8.layout_bytes(target, *s.shape) // out.scales.itemsize,),
                                           (out.scales.itemsize,)) if target == "deepgemm" else out.scales
    np.testing.assert_array_equal(flat.reshape(-1).view(np.uint8), reference(s, target))
    if target == "deepgemm":  # the engine's parameter: int32 [mn, ceil(sf_k/4)], strides (1, mn_aligned)
        _, want_shape, want_strides = deepgemm_reference(s)
        assert out.scales.dtype == np.int32 and out.scales.shape == want_shape
        assert out.scales.strides == tuple(4 * x for x in want_strides)
    elif target == "deepgemm_float32":  # SGLang's parameter on Hopper: float32 (*lead, ceil(K/32))
        assert out.scales.dtype == np.float32 and out.scales.shape == (*shape[:-1], s.shape[1])
        np.testing.assert_array_equal(out.scales.reshape(s.shape), sglang_hopper_reference(s))
    elif target == "compact":
        assert out.scales.shape == (*shape[:-1], s.shape[1])
    else:
        assert out.scales.shape == (round_up(s.shape[0], 128) * round_up(s.shape[1], 4),)


@pytest.mark.parametrize("target", TARGETS)
def test_convert_into_poisoned_buffers_and_back_to_compact(target):
    """Into the caller's poisoned buffer (every byte written, padding as the consumer expects), then a
    bucket holding that part, recorded as `target`, imported back to compact: the identity on S."""
    data, buf, s = make_mxfp8((131, 230), "swizzled", seed=7)
    n = mxfp8.layout_bytes(target, *s.shape)
    out = np.full(n + 1, POISON, np.uint8)
    mxfp8.convert(data, buf, target, swizzled=True, out=out[:n])
    np.testing.assert_array_equal(out[:n], reference(s, target))
    assert out[n] == POISON, "written past the end"
    bucket = np.concatenate([data.reshape(-1), out[:n]])
    manifest = [{"name": "w", "shape": data.shape, "values_offset": 0, "values_bytes": data.size,
                 "scales_offset": data.size, "scales_bytes": n, "scales_layout": target}]
    values = np.full(data.shape, POISON, np.uint8)
    compact = np.full(s.shape, POISON, np.uint8)
    mxfp8.import_bucket(bucket, manifest, {"w": (values, compact)})
    np.testing.assert_array_equal(compact, s)
    np.testing.assert_array_equal(values, data)
    # Recorded in a layout it is not in: refused before anything is written.
    wrong = "deepgemm" if target != "deepgemm" else "cutlass_128x4"
    compact.fill(POISON)
    with pytest.raises(ValueError, match=r"desc\.parts_in\[0\] gives \d+ bytes of scales"):
        mxfp8.import_bucket(bucket, [dict(manifest[0], scales_layout=wrong)], {"w": (values, compact)})
    assert (compact == POISON).all()


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("storage", ["padded", "compact", "swizzled"])
def test_grouped_experts_convert_stacked(storage, target):
    """128 experts of 102 rows (mn not a multiple of 4), K = 200 (sf_k = 7), one call."""
    experts, n, k = 128, 102, 200
    c = -(-k // 32)
    rng = np.random.default_rng(3)
    data = rng.integers(0, 256, (experts * n, k), dtype=np.uint8)
    s = rng.integers(1, 255, (experts, n, c), dtype=np.uint8)
    if storage == "compact":
        flat = s.reshape(-1).copy()
    else:
        per = round_up(n, 128) * round_up(c, 4)
        flat = np.full(experts * per, POISON, np.uint8)
        for e in range(experts):
            if storage == "padded":
                p = np.full((round_up(n, 128), round_up(c, 4)), POISON, np.uint8)
                p[:n, :c] = s[e]
                flat[e * per:(e + 1) * per] = p.reshape(-1)
            else:
                sw = swizzle_reference(s[e])
                mine = flat[e * per:(e + 1) * per]
                mine[:] = sw  # padding zero here; the library must not depend on it either way
    out = mxfp8.convert(data, flat, target, num_experts=experts, scales="compact" if storage == "compact" else "padded",
                        swizzled=storage == "swizzled", values=True)
    np.testing.assert_array_equal(out.values, data.reshape(experts, n, k))
    if target == "deepgemm":
        storage_words, (mn, packed), _ = deepgemm_reference(s[0])
        aligned = round_up(n, 4)
        assert out.scales.shape == (experts, n, packed) and out.scales.dtype == np.int32
        assert out.scales.strides == (4 * packed * aligned, 4, 4 * aligned)
        for e in (0, 1, experts - 1):
            np.testing.assert_array_equal(out.scales[e], deepgemm_reference(s[e])[0].reshape(packed, aligned).T[:n])
        whole = np.lib.stride_tricks.as_strided(out.scales, (experts * packed * aligned,), (4,))
        want = np.concatenate([deepgemm_reference(s[e])[0] for e in range(experts)])
        np.testing.assert_array_equal(whole, want)
    else:
        want = np.stack([reference(s[e], target) for e in range(experts)])
        np.testing.assert_array_equal(out.scales.reshape(experts, -1).view(np.uint8), want)
        if target == "deepgemm_float32":
            assert out.scales.shape == (experts, n, c) and out.scales.dtype == np.float32


def test_zero_exponent_fixup_rewrites_only_real_scales():
    data, buf, s = make_mxfp8((100, 230), "padded", seed=11)
    rng = np.random.default_rng(1)
    mask = rng.random(s.shape) < 0.25
    s[mask] = 0
    buf[:s.shape[0], :s.shape[1]][mask] = 0
    fixed = np.where(s == 0, 1, s).astype(np.uint8)
    for target in TARGETS:
        off = mxfp8.convert(data, buf, target, swizzled=False)
        on = mxfp8.convert(data, buf, target, zero_exponent_as_one=True, swizzled=False)
        for got, want in ((off, s), (on, fixed)):
            n = mxfp8.layout_bytes(target, *s.shape)
            flat = np.lib.stride_tricks.as_strided(got.scales, (n // got.scales.itemsize,), (got.scales.itemsize,))
            np.testing.assert_array_equal(flat.view(np.uint8), reference(want, target), err_msg=target)
    # The import path: every exponent 0 arrives as 1 in the engine's parameter.
    params = {"w": (np.full(data.shape, POISON, np.uint8), np.full(mxfp8.scales_shape(data.shape, "deepgemm"), POISON,
                                                                    np.int32), "deepgemm")}
    mxfp8.import_tensors({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, params, zero_exponent_as_one=True)
    np.testing.assert_array_equal(params["w"][1].view(np.uint8), reference(fixed, "deepgemm"))
    hopper = np.full(mxfp8.scales_shape(data.shape, "deepgemm_float32"), np.nan, np.float32)
    mxfp8.import_tensors({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, {"w": (params["w"][0], hopper, "deepgemm_float32")},
                         zero_exponent_as_one=True)
    np.testing.assert_array_equal(hopper, sglang_hopper_reference(fixed))
    with pytest.raises(TypeError, match="zero_exponent_as_one must be True or False"):
        mxfp8.convert(data, buf, "compact", zero_exponent_as_one=1, swizzled=False)
    # NumPy's bool is a flag here as in every other flag (it was a TypeError here and in the imports; for
    # convert's values, "expected an object with __dlpack__ ..., got bool").
    got = mxfp8.convert(data, buf, "deepgemm", zero_exponent_as_one=np.True_, values=np.True_, swizzled=False)
    np.testing.assert_array_equal(got.values, data)
    flat = np.lib.stride_tricks.as_strided(got.scales, (mxfp8.layout_bytes("deepgemm", *s.shape) // 4,), (4,))
    np.testing.assert_array_equal(flat.view(np.uint8), reference(fixed, "deepgemm"))
    assert mxfp8.convert(data, buf, "compact", values=np.False_, swizzled=False).values is None
    params["w"][1][...] = POISON
    mxfp8.import_tensors({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, params, zero_exponent_as_one=np.True_)
    np.testing.assert_array_equal(params["w"][1].view(np.uint8), reference(fixed, "deepgemm"))


def test_bad_input_gets_clear_errors():
    data, buf, s = make_mxfp8((100, 48), "padded", seed=2)
    with pytest.raises(ValueError, match="target is 'nvfp4'"):
        mxfp8.convert(data, buf, "nvfp4", swizzled=False)
    with pytest.raises(ValueError, match="DeepGEMM packed scales of a 100 x 2 matrix are 400 bytes, got 200"):
        mxfp8.convert(data, buf, "deepgemm", out=np.full(200, POISON, np.uint8), swizzled=False)
    with pytest.raises(ValueError, match="dtype float32 does not hold DeepGEMM packed scales"):
        mxfp8.convert(data, buf, "deepgemm", out=np.zeros(100, np.float32), swizzled=False)
    with pytest.raises(ValueError, match="dtype int32 does not hold DeepGEMM float32 scales"):
        mxfp8.convert(data, buf, "deepgemm_float32", out=np.zeros(200, np.int32), swizzled=False)
    cw_data, cw_buf, _ = make_mxfp8((70, 200), "padded", direction="columnwise", seed=4)
    for target in ("deepgemm", "deepgemm_float32"):
        with pytest.raises(ValueError, match="rowwise scales only"):
            mxfp8.convert(cw_data, cw_buf, target, direction="columnwise", swizzled=False)
        with pytest.raises(ValueError, match="rowwise scales only"):
            mxfp8.scales_shape((70, 200), target, "columnwise")
    with pytest.raises(ValueError, match="MXFP8_SCALE_LAYOUT_TRTLLM_SHUFFLED, which needs rows \\(per expert\\) a multiple of 128"):
        mxfp8.convert(data, buf, "trtllm", values=True, swizzled=False)
    with pytest.raises(ValueError, match="do not split into 3 experts"):
        mxfp8.convert(data, buf, "compact", num_experts=3, swizzled=False)


def test_columnwise_cutlass_is_the_transpose_swizzled():
    data, buf, s = make_mxfp8((70, 200), "padded", direction="columnwise", seed=5)
    out = mxfp8.convert(data, buf, "cutlass_128x4", direction="columnwise", swizzled=False)
    np.testing.assert_array_equal(out.scales, swizzle_reference(s.T.copy()))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_torch_outputs_are_the_engines_parameters(device):
    """With torch inputs the outputs are torch tensors shaped as SGLang's DeepGEMM parameter (int32
    [E, mn, ceil(sf_k/4)], DeepGEMM's strides) and vLLM's flat 128x4 scales; on CUDA one launch."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    experts, n, k = 8, 102, 200
    c = -(-k // 32)
    g = torch.Generator().manual_seed(0)
    data = torch.randint(0, 256, (experts * n, k), dtype=torch.uint8, generator=g)
    s = torch.randint(1, 255, (experts, n, c), dtype=torch.uint8, generator=g)
    values = data.view(torch.float8_e4m3fn).to(device)
    out = mxfp8.convert(values, s.reshape(-1).to(device), "deepgemm", num_experts=experts, scales="compact",
                        values=True, swizzled=False)
    aligned, packed = round_up(n, 4), -(-c // 4)
    assert out.scales.dtype == torch.int32 and out.scales.device.type == device
    assert tuple(out.scales.shape) == (experts, n, packed)
    assert out.scales.stride() == (packed * aligned, 1, aligned)
    assert out.values.dtype == torch.float8_e4m3fn and tuple(out.values.shape) == (experts, n, k)
    for e in range(experts):
        want = deepgemm_reference(s[e].numpy())[0].reshape(packed, aligned).T[:n]
        np.testing.assert_array_equal(out.scales[e].cpu().numpy(), want)
    cut = mxfp8.convert(values, s.reshape(-1).to(device), "cutlass_128x4", num_experts=experts, scales="compact", swizzled=False)
    assert tuple(cut.scales.shape) == (experts, round_up(n, 128) * round_up(c, 4))
    np.testing.assert_array_equal(cut.scales.cpu().numpy(), np.stack([swizzle_reference(x.numpy()) for x in s]))


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_hopper_deepgemm_scales_are_sglangs_expression(device):
    """SGLang's own expression for its Hopper parameter, run in torch on the same bytes (every E8M0 byte,
    0 and 255 included), against mxfp8.convert into "deepgemm_float32": dense and grouped."""
    torch = pytest.importorskip("torch")
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    experts, n, k = 3, 100, 32 * 90
    scale_u8 = (torch.arange(experts * n * (k // 32), dtype=torch.int64) * 7 % 256).to(torch.uint8).reshape(experts, n, -1)
    data = torch.randint(0, 256, (experts * n, k), dtype=torch.uint8).view(torch.float8_e4m3fn).to(device)
    for e in range(experts):  # one expert as a dense weight
        want = (scale_u8[e].contiguous().view(-1).to(torch.int32) << 23).view(torch.float32).view(n, k // 32)
        got = mxfp8.convert(data[e * n:(e + 1) * n], scale_u8[e].to(device), "deepgemm_float32", swizzled=False)
        assert got.scales.dtype == torch.float32 and tuple(got.scales.shape) == (n, k // 32)
        assert torch.equal(got.scales.cpu().view(torch.int32), want.view(torch.int32))
    grouped = mxfp8.convert(data, scale_u8.reshape(-1).to(device), "deepgemm_float32", num_experts=experts,
                            scales="compact", swizzled=False)
    want = (scale_u8.reshape(-1).to(torch.int32) << 23).view(torch.float32).view(experts, n, k // 32)
    assert torch.equal(grouped.scales.cpu().view(torch.int32), want.view(torch.int32))



@pytest.mark.parametrize("swizzled", [False, True])
def test_grouped_scales_in_transformer_engine_jaxs_worst_case_buffer(swizzled):
    """Transformer Engine's JAX grouped quantize writes the experts' padded scales back to back into a buffer
    sized for the worst case of group sizes it does not know at trace time, (G - 1) * 128 +
    roundup(M - G + 1, 128) rows of roundup(C, 4): the bytes past the experts' are never read. (A first
    version of an exact-size rule refused it; the review caught that the same day.)"""
    rng = np.random.default_rng(7)
    experts, n, c = 4, 100, 2
    s = rng.integers(100, 140, (experts, n, c), dtype=np.uint8)
    per_expert = np.full((experts, 128, 4), POISON, np.uint8)
    per_expert[:, :n, :c] = s
    if swizzled:
        per_expert = np.stack([swizzle_reference(s[e]).reshape(128, 4) for e in range(experts)])
    m = experts * n
    worst_rows = (experts - 1) * 128 + round_up(m - experts + 1, 128)
    flat = np.full(worst_rows * 4, POISON, np.uint8)
    flat[:per_expert.size] = per_expert.reshape(-1)
    assert flat.size > per_expert.size
    data = rng.integers(0, 255, (m, 64), dtype=np.uint8)
    out = mxfp8.convert(data, flat, "compact", num_experts=experts, swizzled=swizzled, fp8_dtype="e4m3")
    np.testing.assert_array_equal(np.asarray(out.scales).reshape(experts, n, c), s)
