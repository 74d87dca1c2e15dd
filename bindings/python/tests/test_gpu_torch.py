"""The Python API on CUDA tensors: torch in and out, zero copy, streams, Transformer Engine storages,
in-place updates, CuPy and JAX consumers. Skips without a CUDA device."""
import types

import numpy as np
import pytest

import mxfp8
from conftest import make_mxfp8, swizzle_reference

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
    pytest.skip("needs a CUDA device and a CUDA build of mxfp8", allow_module_level=True)


def cuda(a):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_torch_zero_copy_values_and_exact_scales(storage, direction):
    data, buf, s = make_mxfp8((1000, 8192 + 48), storage, direction, seed=11)
    d, b = cuda(data), cuda(buf)
    values, scales = mxfp8.export_components(d, b, swizzled=storage == "swizzled", direction=direction)
    assert isinstance(values, torch.Tensor) and values.dtype == torch.float8_e4m3fn
    assert values.data_ptr() == d.data_ptr()  # zero copy
    assert scales.dtype == torch.uint8 and scales.is_cuda
    torch.testing.assert_close(scales.cpu().reshape(s.shape), torch.from_numpy(s), rtol=0, atol=0)


def test_copies_come_from_torchs_allocator_and_run_on_the_current_stream():
    data, buf, s = make_mxfp8((4096, 4096), "swizzled", seed=12)
    d, b = cuda(data), cuda(buf)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    before = torch.cuda.memory_allocated()
    with torch.cuda.stream(side):
        _, scales = mxfp8.export_components(d, b, swizzled=True)
        assert torch.cuda.memory_allocated() - before >= s.size  # PyTorch's caching allocator
        result = scales.cpu()  # ordered on `side` after the export
    assert torch.equal(result, torch.from_numpy(s))


def test_export_on_an_explicit_stream_object():
    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=13)
    d, b = cuda(data), cuda(buf)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    _, scales = mxfp8.export_components(d, b, swizzled=True, stream=stream)
    torch.cuda.current_stream().wait_stream(stream)
    assert torch.equal(scales.cpu(), torch.from_numpy(s))


@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
@pytest.mark.parametrize("swizzled", [False, True])
def test_fake_transformer_engine_storage(direction, swizzled):
    data, buf, s = make_mxfp8((257, 96), "swizzled" if swizzled else "padded", direction, seed=14)
    storage = types.SimpleNamespace(
        _rowwise_data=None, _rowwise_scale_inv=None, _columnwise_data=None, _columnwise_scale_inv=None,
        _fp8_dtype="DType.kFloat8E4M3", _with_gemm_swizzled_scales=swizzled,
    )
    setattr(storage, f"_{direction}_data", cuda(data))
    setattr(storage, f"_{direction}_scale_inv", cuda(buf))
    values, scales = mxfp8.export_te(storage, direction=direction)
    assert values.shape == (257, 96)
    assert torch.equal(scales.cpu().reshape(s.shape), torch.from_numpy(s))
    other = "columnwise" if direction == "rowwise" else "rowwise"
    with pytest.raises(ValueError, match=f"no {other} data"):
        mxfp8.export_te(storage, direction=other)


def test_views_exported_before_an_optimizer_step_see_it():
    data, buf, s = make_mxfp8((512, 1024), "compact", seed=15)
    d, b = cuda(data), cuda(buf)
    values, scales = mxfp8.export_components(d, b, swizzled=False)
    assert scales.data_ptr() == b.data_ptr()
    # an Adam-like step requantizes the weight in place
    master = torch.randn(512, 1024, device="cuda")
    master -= 1e-3 * torch.sign(master)
    new_values = master.to(torch.float8_e4m3fn).view(torch.uint8)
    d.copy_(new_values)
    b.add_(1)
    assert torch.equal(values.view(torch.uint8), new_values)
    assert torch.equal(scales.cpu(), torch.from_numpy(s) + 1)


def test_cupy_and_jax_consumers():
    data, buf, s = make_mxfp8((200, 80), "swizzled", seed=16)
    d, b = cuda(data), cuda(buf)
    tensor = mxfp8._mxfp8.Tensor(rowwise_data=d, rowwise_scale_inv=b, swizzled=True, stream=1)
    values, scales = tensor.export_components(values_dtype=1)
    torch.cuda.synchronize()
    cupy = pytest.importorskip("cupy")
    assert np.array_equal(cupy.asnumpy(cupy.from_dlpack(scales)), s)
    assert np.array_equal(cupy.asnumpy(cupy.from_dlpack(values)), data)
    jax = pytest.importorskip("jax")
    if not any(dev.platform == "gpu" for dev in jax.devices()):
        pytest.skip("JAX has no GPU here")
    assert np.array_equal(np.asarray(jax.dlpack.from_dlpack(scales)), s)


def test_grouped_experts_and_block_scales_on_the_gpu():
    from test_blocks_and_experts import block_weight, expert_group

    data, flat, expected = expert_group([256] * 8, 4096, True, "padded", seed=17)
    values, scales = mxfp8.export_grouped(cuda(data), cuda(flat), num_experts=8, swizzled=True)
    assert values.shape == (8, 256, 4096) and values.dtype == torch.float8_e4m3fn
    assert torch.equal(scales.cpu(), torch.from_numpy(np.stack(expected)))
    data, buf, blocks = block_weight(257, 300, "columnwise", True, seed=18)
    _, scales = mxfp8.export_components(cuda(data), cuda(buf), swizzled=True, direction="columnwise", block="32x32")
    assert torch.equal(scales.cpu(), torch.from_numpy(blocks))


def test_bucket_on_the_gpu_and_reswizzle_for_the_consumer():
    specs, expected = {}, {}
    for i, (shape, storage) in enumerate([((1000, 4096), "swizzled"), ((4096, 768), "swizzled"), ((300, 200), "padded")]):
        data, buf, s = make_mxfp8(shape, storage, seed=30 + i)
        specs[f"w{i}"] = {"data": cuda(data), "scale_inv": cuda(buf), "swizzled": storage == "swizzled"}
        expected[f"w{i}"] = (data, s, storage == "swizzled")
    bucket, manifest = mxfp8.export_bucket(specs)
    assert bucket.is_cuda and bucket.dtype == torch.uint8
    for name, (values, scales) in mxfp8.unpack_bucket(bucket, manifest).items():
        data, s, swizzled = expected[name]
        assert values.dtype == torch.float8_e4m3fn
        assert torch.equal(values.view(torch.uint8).cpu(), torch.from_numpy(data))
        assert torch.equal(scales.cpu(), torch.from_numpy(s))
        if swizzled:  # the consumer re-swizzles for its GEMM (padding zero, as cuBLAS expects)
            assert torch.equal(mxfp8.swizzle_scales(scales).cpu(), torch.from_numpy(swizzle_reference(s)))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("fp8_dtype", ["e4m3", "e5m2"])
def test_quantize_on_the_gpu_matches_both_references(dtype, fp8_dtype):
    import ml_dtypes
    import mx_reference as ref
    from mx_reference_torch import quantize_rowwise

    numpy_type = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}[dtype]
    x_host = ref.special_input((512, 4096 + 64), numpy_type, seed=5)
    x = torch.from_numpy(x_host.astype(np.float32)).cuda().to(getattr(torch, dtype))  # exact
    q = mxfp8.quantize(x, fp8_dtype=fp8_dtype, rowwise=True, columnwise=True, scales="swizzled")
    assert q.rowwise_data.dtype == getattr(torch, f"float8_{fp8_dtype}{'fn' if fp8_dtype == 'e4m3' else ''}")
    assert q.rowwise_data.is_cuda and q.rowwise_scale_inv.shape == (512, 132)
    for direction in ("rowwise", "columnwise"):
        v_ref, s_ref = ref.quantize(x_host, fp8_dtype, "rceil", direction)
        values = getattr(q, f"{direction}_data").view(torch.uint8).cpu().numpy()
        np.testing.assert_array_equal(values, v_ref)
        exported = mxfp8.export_components(getattr(q, f"{direction}_data"), getattr(q, f"{direction}_scale_inv"),
                                           swizzled=True, direction=direction, fp8_dtype=fp8_dtype)
        np.testing.assert_array_equal(exported.scales.cpu().numpy(), s_ref)
        # quantize -> export -> decode equals dequantize
        decoded = ref.dequantize(values, s_ref, fp8_dtype, direction)
        y = mxfp8.dequantize(exported.values, exported.scales, fp8_dtype=fp8_dtype, direction=direction, swizzled=False)
        np.testing.assert_array_equal(y.cpu().numpy(), decoded)
    v_torch, s_torch = quantize_rowwise(x, fp8_dtype)
    torch.testing.assert_close(q.rowwise_data.view(torch.uint8), v_torch, rtol=0, atol=0)
    torch.testing.assert_close(mxfp8.export_components(q.rowwise_data, q.rowwise_scale_inv, swizzled=True,
                                                       fp8_dtype=fp8_dtype).scales, s_torch, rtol=0, atol=0)


def test_quantize_runs_on_the_current_stream_with_torchs_allocator():
    x = torch.randn(2048, 8192, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        before = torch.cuda.memory_allocated()
        q = mxfp8.quantize(x)
        assert torch.cuda.memory_allocated() - before >= x.numel()
        expected = mxfp8.quantize(x.cpu())
    side.synchronize()
    assert torch.equal(q.rowwise_data.view(torch.uint8).cpu(), expected.rowwise_data.view(torch.uint8))


def test_export_plan_on_cuda_replays_in_a_torch_cuda_graph():
    """A prepare_export plan's run() allocates and synchronizes nothing: torch captures it in a CUDA graph, and each
    replay writes the scales the sources hold at that replay."""
    shapes = [(100, 48), (257, 200), (1000, 8192 + 48)]
    tensors, expected = {}, {}
    for i, shape in enumerate(shapes):
        data, buf, s = make_mxfp8(shape, "swizzled", seed=40 + i)
        tensors[f"w{i}"] = {"data": cuda(data), "scale_inv": cuda(buf), "swizzled": True}
        expected[f"w{i}"] = s
    plan = mxfp8.prepare_export(tensors)
    views = plan.views()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # torch's rule: run once on a side stream before capturing
        plan.run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run()
    for step in range(2):
        plan.buffer.fill_(0xEE)
        graph.replay()
        torch.cuda.synchronize()
        for name, s in expected.items():
            torch.testing.assert_close(views[name].cpu().reshape(s.shape), torch.from_numpy(s), rtol=0, atol=0)
        for i, (name, spec) in enumerate(tensors.items()):  # the next step's scales, in place
            s = np.random.default_rng(200 + 10 * step + i).integers(1, 255, size=expected[name].shape, dtype=np.uint8)
            swz = swizzle_reference(s)
            real = torch.from_numpy(swizzle_reference(np.ones_like(s)) == 1).cuda()
            flat = spec["scale_inv"].reshape(-1)
            flat[real] = torch.from_numpy(swz).cuda()[real]
            expected[name] = s


@pytest.mark.parametrize("storage", ["padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_torch_shards_are_the_crop(storage, direction):
    """Resharding on the GPU: row ranges (tile-aligned and inside a tile), row pieces, K columns, from
    torch tensors, against the crop of the test's own scales; bucket specs and the import of a rank's
    shard of a whole bucket too."""
    m, k = 1024, 8192 + 48
    data, buf, s = make_mxfp8((m, k), storage, direction, seed=40)
    d, b = cuda(data), cuda(buf)
    sw = storage == "swizzled"
    cases = [((128, 640), (1024, 4096)), ((37, 1000), (32, k)), ([(512, 640), (0, 128)], None)] if direction == "rowwise" \
        else [((64, 1024), (7, 3000)), ((0, 992), None)]
    for rows, cols in cases:
        values, scales = mxfp8.export_components(d, b, swizzled=sw, direction=direction, rows=rows, cols=cols)
        pieces = [rows] if isinstance(rows, tuple) else rows
        index = np.concatenate([np.arange(a, e) for a, e in pieces])
        k0, k1 = cols or (0, k)
        assert torch.equal(values.view(torch.uint8).cpu(), torch.from_numpy(data[index][:, k0:k1].copy()))
        if direction == "rowwise":
            want = s[index][:, k0 // 32:-(-k1 // 32)]
        else:
            want = s[pieces[0][0] // 32:-(-pieces[0][1] // 32), k0:k1]
        assert torch.equal(scales.cpu(), torch.from_numpy(np.ascontiguousarray(want))), (rows, cols)
    if direction == "rowwise":
        bucket, manifest = mxfp8.export_bucket({"w": {"data": d, "scale_inv": b, "swizzled": sw}})
        for layout in ("compact", "cutlass_128x4"):
            params = {"w": (torch.empty((256, k), dtype=torch.float8_e4m3fn, device="cuda"),
                            torch.empty(mxfp8.scales_shape((256, k), layout), dtype=torch.uint8, device="cuda"))}
            mxfp8.import_bucket(bucket, manifest, params, layout=layout, shards={"w": {"rows": [(768, 896), (128, 256)]}})
            index = np.concatenate([np.arange(768, 896), np.arange(128, 256)])
            want = s[index] if layout == "compact" else swizzle_reference(s[index])
            assert torch.equal(params["w"][0].view(torch.uint8).cpu(), torch.from_numpy(data[index]))
            assert torch.equal(params["w"][1].cpu().reshape(-1), torch.from_numpy(np.ascontiguousarray(want)).reshape(-1))


@pytest.mark.parametrize("layout", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_nvfp4_on_the_gpu_matches_the_reference(layout, direction):
    """NVFP4 storage as torch CUDA tensors: values a view, scales and both global scales exact, and the
    decode bit for bit TE's formula (nvfp4_reference), float32 and bfloat16."""
    from nvfp4_reference import dequantize as ref_dequantize
    from nvfp4_reference import encode_scale, pack, random_case, store_scales

    m, k = 300, 136
    rows, cols = (m, k) if direction == "rowwise" else (k, m)
    codes, scales = random_case(rows, cols, seed=31)
    amax = np.resize(np.float32([3.5, 0.0, np.inf, np.nan, 2688.0]), rows) if direction == "rowwise" \
        else np.float32([11.0])
    d, b, a = cuda(pack(codes)), cuda(store_scales(scales, layout)), cuda(amax)
    kw = dict(shape=(m, k), swizzled=layout == "swizzled", direction=direction)
    parts = mxfp8.nvfp4.export_components(d, b, a, **kw)
    assert isinstance(parts.values, torch.Tensor) and parts.values.data_ptr() == d.data_ptr()
    np.testing.assert_array_equal(parts.scales.cpu().numpy().reshape(scales.shape), scales)
    np.testing.assert_array_equal(parts.global_scale.cpu().numpy(), amax / np.float32(2688.0))
    enc = mxfp8.nvfp4.export_components(d, b, a, global_scale="encode", **kw).global_scale
    np.testing.assert_array_equal(enc.cpu().numpy(), encode_scale(amax, 448))
    want = ref_dequantize(codes, scales, amax, 448)
    out = mxfp8.nvfp4.dequantize(d, b, a, **kw)
    assert out.is_cuda and out.shape == (rows, cols)
    got = out.cpu().numpy()
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan) and np.all(got.view(np.uint32)[nan] == 0x7FFFFFFF)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    host = mxfp8.nvfp4.dequantize(pack(codes), store_scales(scales, layout), amax, dtype="bfloat16", **kw)
    bf16 = mxfp8.nvfp4.dequantize(d, b, a, dtype="bfloat16", **kw)
    np.testing.assert_array_equal(bf16.view(torch.int16).cpu().numpy(), host.view(np.int16))


@pytest.mark.parametrize("plan", [False, True])
def test_many_large_values_through_the_bulk_copy_and_its_fallbacks(plan):
    """Values of at least MXFP8_COPY_ENGINE_MIN_BYTES (4 MiB) leave the scale kernel: on sm_90+ all of them
    go to the bulk-copy pipeline, 1000 a launch, else (and when a pointer is not 16-byte aligned) to one
    cudaMemcpyAsync each. 1030 tensors (two launches), sizes that end mid-chunk and mid-row, some sources
    and destinations 8 bytes off alignment; parameters poisoned, every byte compared."""
    count, rows = 1030, 1024
    ks = [4113 + 8 * (i % 9) for i in range(count)]  # 4.2 MB each: 16 KiB chunks and 4096-byte rows left over
    sizes = [rows * k for k in ks]
    offsets, o = [], 0
    for i, n in enumerate(sizes):
        o += 8 if i % 97 == 5 else 0  # a few parts 8 bytes off 16-byte alignment: the fallback copy
        offsets.append(o)
        o = (o + n + 16 + 255) // 256 * 256  # room for a destination 8 bytes further
    src = torch.randint(0, 256, (o,), dtype=torch.uint8, device="cuda")
    dst = torch.full((o + 16,), 0xFF, dtype=torch.uint8, device="cuda")
    shift = [8 if i % 89 == 3 else 0 for i in range(count)]  # and a few destinations 8 bytes off
    storage, params = {}, {}
    for i, (k, off) in enumerate(zip(ks, offsets)):
        c = (k + 31) // 32
        scale = torch.randint(1, 255, (rows, c), dtype=torch.uint8, device="cuda")
        storage[f"t{i}"] = {"data": src[off:off + rows * k].view(rows, k), "scale_inv": scale, "swizzled": False}
        d = off + shift[i]
        params[f"t{i}"] = (dst[d:d + rows * k].view(torch.float8_e4m3fn).view(rows, k),
                           torch.full((rows, c), 0xFF, dtype=torch.uint8, device="cuda"), "compact")
    if plan:
        mxfp8.prepare_import_tensors(storage, params).run()
    else:
        mxfp8.import_tensors(storage, params)
    torch.cuda.synchronize()
    for i, (k, off) in enumerate(zip(ks, offsets)):
        d = off + shift[i]
        assert torch.equal(dst[d:d + rows * k], src[off:off + rows * k]), f"values of t{i}"
        assert torch.equal(params[f"t{i}"][1], storage[f"t{i}"]["scale_inv"]), f"scales of t{i}"
    # Nothing written outside the parts: the bytes between them keep the poison.
    written = torch.zeros_like(dst, dtype=torch.bool)
    for i, (k, off) in enumerate(zip(ks, offsets)):
        written[off + shift[i]:off + shift[i] + rows * k] = True
    assert bool((dst[~written] == 0xFF).all())
