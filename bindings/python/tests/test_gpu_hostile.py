"""Hostile input on the GPU path (issue 24), run by bench/device/gpu_check.sh through its pytest step: mixed
devices and frameworks, a device that does not exist, managed and pinned memory, misaligned pointers,
streams whose Python object is gone, exports and quantizes racing on many streams and threads, sources
freed and their memory reused under live views and buckets. Every failing case checks that the outputs
it was given are untouched. Skips without a CUDA device and a CUDA build."""
import gc
import threading

import numpy as np
import pytest

import mxfp8
from conftest import POISON, make_mxfp8, swizzle_reference
from dlpack_forge import KDL_BFLOAT, KDL_CUDA, KDL_FLOAT, KDL_UINT, DeviceOnly, ForgedTensor, Producer

torch = pytest.importorskip("torch")
if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
    pytest.skip("needs a CUDA device and a CUDA build of mxfp8", allow_module_level=True)

import mx_reference as ref  # noqa: E402  (after the skip: it needs ml_dtypes, like the GPU tests)


def cuda(a):
    return torch.from_numpy(np.ascontiguousarray(a)).cuda()


def poisoned_cuda(nbytes):
    return torch.full((nbytes,), POISON, dtype=torch.uint8, device="cuda")


def untouched(buffer):
    torch.cuda.synchronize()
    return bool((buffer == POISON).all())


def context_still_works():
    """After a failure, the CUDA context and the library are still usable: a swizzled export (a kernel
    launch) gives the right scales."""
    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=99)
    _, scales = mxfp8.export_components(cuda(data), cuda(buf), swizzled=True)
    torch.cuda.synchronize()
    return torch.equal(scales.cpu(), torch.from_numpy(s))


# --------------------------------------------------------------------------------------- mixed devices ---
def test_cuda_values_with_host_scales_get_the_librarys_error():
    """The probe's repro: was torch's "stream should be None on cpu" from the host tensor's __dlpack__."""
    data, buf, _ = make_mxfp8((256, 512), "swizzled", seed=1)
    with pytest.raises(ValueError, match="scale_inv is on cpu:0 but data is on cuda:0"):
        mxfp8.export_components(cuda(data), torch.from_numpy(buf), swizzled=True)
    with pytest.raises(ValueError, match="scale_inv is on cuda:0 but data is on cpu:0"):
        mxfp8.export_components(torch.from_numpy(data), cuda(buf), swizzled=True)
    with pytest.raises(ValueError, match="scale_inv is on cpu:0 but data is on cuda:0"):
        mxfp8.export_components(cuda(data), buf, swizzled=True)  # a NumPy array
    with pytest.raises(ValueError, match="scale_inv is on cuda:1 but data is on cuda:0"):
        mxfp8.export_components(cuda(data), DeviceOnly((KDL_CUDA, 1)), swizzled=True)
    assert context_still_works()


def test_outputs_on_the_host_for_cuda_inputs_are_refused_and_untouched():
    data, buf, s = make_mxfp8((256, 512), "swizzled", seed=2)
    d, b = cuda(data), cuda(buf)
    out = torch.full((256, 512), float("nan"))
    with pytest.raises(ValueError, match="out is on cpu:0 but data is on cuda:0"):
        mxfp8.dequantize(d, b, swizzled=True, out=out)
    assert torch.isnan(out).all()
    bucket = torch.full((1 << 20,), POISON, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"bucket is on cpu:0 but tensors\['w'\]\['data'\] is on cuda:0"):
        mxfp8.export_bucket({"w": {"data": d, "scale_inv": b, "swizzled": True}}, bucket=bucket)
    assert (bucket == POISON).all()
    with pytest.raises(ValueError, match=r"buffer is on cpu:0 but tensors\['w'\]\['data'\] is on cuda:0"):
        list(mxfp8.iter_buckets({"w": {"data": d, "scale_inv": b, "swizzled": True}}, bucket_bytes=1 << 20,
                                buffer=bucket))
    assert (bucket == POISON).all()
    host = np.full(512 * 16, POISON, np.uint8)
    with pytest.raises(ValueError, match="out is on cpu:0 but compact is on cuda:0"):
        mxfp8.swizzle_scales(cuda(s), host)
    with pytest.raises(ValueError, match="out is on cpu:0 but swizzled is on cuda:0"):
        mxfp8.unswizzle_scales(b, 256, 16, host[: 256 * 16].reshape(256, 16))
    assert (host == POISON).all()
    # and the other way round: a CUDA output for host inputs
    cuda_out = poisoned_cuda(256 * 512 * 4).view(torch.float32).view(256, 512)
    with pytest.raises(ValueError, match="out is on cuda:0 but data is on cpu:0"):
        mxfp8.dequantize(data, buf, swizzled=True, out=cuda_out)
    assert untouched(cuda_out.view(torch.uint8))


def test_tensors_of_one_bucket_on_different_devices():
    a, abuf, _ = make_mxfp8((128, 64), "padded", seed=3)
    with pytest.raises(ValueError, match=r"tensors\['b'\]\['data'\] is on cpu:0 but tensors\['a'\]\['data'\] is on cuda:0"):
        mxfp8.export_bucket({"a": {"data": cuda(a), "swizzled": False, "scale_inv": cuda(abuf)},
                             "b": {"data": torch.from_numpy(a), "swizzled": False, "scale_inv": torch.from_numpy(abuf)}})


def test_an_allocator_returning_host_memory_for_a_cuda_input():
    data, buf, _ = make_mxfp8((256, 512), "swizzled", seed=4)
    handed_out = []

    def host_allocator(shape, device):
        a = np.full(shape, POISON, np.uint8)
        handed_out.append(a)
        return a

    tensor = mxfp8._mxfp8.Tensor(rowwise_data=cuda(data), rowwise_scale_inv=cuda(buf), swizzled=True, stream=1)
    with pytest.raises(ValueError, match=r"cpu:0.*cuda:0|cuda:0.*cpu:0"):
        tensor.export_components(allocator=host_allocator)
    x = torch.randn(256, 512, device="cuda")
    with pytest.raises(ValueError, match=r"cpu:0.*cuda:0|cuda:0.*cpu:0"):
        # a given stream (0, the legacy default): the __dlpack__ route, not the exchange API
        mxfp8._mxfp8.quantize(x, "e4m3", "1x32", "rceil", "compact", True, False, "fp8", "uint8", 0, host_allocator)
    assert handed_out and all((a == POISON).all() for a in handed_out)
    assert context_still_works()


def test_torch_with_cupy_and_jax():
    cupy = pytest.importorskip("cupy")
    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=5)
    # the same device, two frameworks: fine, the first input's framework shapes the results
    values, scales = mxfp8.export_components(cuda(data), cupy.asarray(buf), swizzled=True)
    torch.cuda.synchronize()
    assert isinstance(scales, torch.Tensor) and torch.equal(scales.cpu(), torch.from_numpy(s))
    values, scales = mxfp8.export_components(cupy.asarray(data), cuda(buf), swizzled=True)
    torch.cuda.synchronize()
    assert np.array_equal(cupy.asnumpy(cupy.from_dlpack(scales)), s)
    # CuPy on CUDA with torch or NumPy on the host
    with pytest.raises(ValueError, match="scale_inv is on cpu:0 but data is on cuda:0"):
        mxfp8.export_components(cupy.asarray(data), torch.from_numpy(buf), swizzled=True)
    out = cupy.full((300, 640), cupy.nan, cupy.float32)
    with pytest.raises(ValueError, match="out is on cuda:0 but data is on cpu:0"):
        mxfp8.dequantize(torch.from_numpy(data), buf, swizzled=True, out=out)
    assert bool(cupy.isnan(out).all())
    jax = pytest.importorskip("jax")
    cpu = _jax_devices(jax, "cpu")
    if cpu:
        host_scales = jax.device_put(buf, cpu[0])
        with pytest.raises(ValueError, match="scale_inv is on cpu:0 but data is on cuda:0"):
            mxfp8.export_components(cuda(data), host_scales, swizzled=True)
    gpus = _jax_devices(jax, "gpu")
    if gpus:
        with pytest.raises(ValueError, match="scale_inv is on cpu:0 but data is on cuda:0"):
            mxfp8.export_components(jax.device_put(data, gpus[0]), torch.from_numpy(buf), swizzled=True)


def _jax_devices(jax, platform):
    try:
        return jax.devices(platform)
    except RuntimeError:  # no such backend
        return []


# ------------------------------------------------------------------------ a device that does not exist ---
def test_a_forged_tensor_on_a_device_that_does_not_exist():
    """A DLPack tensor claiming a CUDA device the machine does not have, over real device memory: every
    call that has to run something there fails with an error naming it (CUDA's "invalid device ordinal",
    MXFP8_ERROR_CUDA, or the library's own check naming the device), writes nothing, and leaves the
    context usable."""
    bogus = torch.cuda.device_count() + 6
    data, buf, s = make_mxfp8((256, 512), "swizzled", seed=6)
    d, b = cuda(data), cuda(buf)

    def on_bogus(t, dtype=(KDL_UINT, 8, 1)):
        return Producer(ForgedTensor(t.data_ptr(), tuple(t.shape), dtype=dtype, device=(KDL_CUDA, bogus), keep=t))

    expected = rf"invalid device ordinal|cuda:{bogus}"
    with pytest.raises((RuntimeError, ValueError), match=expected):
        mxfp8.export_components(on_bogus(d), on_bogus(b), swizzled=True)
    target = poisoned_cuda(256 * 512 * 4)
    with pytest.raises((RuntimeError, ValueError), match=expected):
        mxfp8.dequantize(on_bogus(d), on_bogus(b), swizzled=True,
                         out=on_bogus(target.view(torch.float32).view(256, 512), dtype=(KDL_FLOAT, 32, 1)))
    assert untouched(target)
    x = torch.randn(256, 512, device="cuda")
    with pytest.raises((RuntimeError, ValueError), match=expected):
        mxfp8.quantize(on_bogus(x, dtype=(KDL_FLOAT, 32, 1)))
    compact = cuda(s)
    swizzled = poisoned_cuda(256 * 16)
    with pytest.raises((RuntimeError, ValueError), match=expected):
        mxfp8.swizzle_scales(on_bogus(compact), on_bogus(swizzled))
    assert untouched(swizzled)
    gc.collect()
    assert context_still_works()


# ------------------------------------------------------------------------------ managed and pinned ---
def test_cuda_managed_inputs():
    cupy = pytest.importorskip("cupy")

    def managed(a):
        a = np.ascontiguousarray(a)
        m = cupy.ndarray(a.shape, a.dtype, memptr=cupy.cuda.malloc_managed(max(a.nbytes, 1)))
        m.set(a)
        return m

    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=7)
    md, mb = managed(data), managed(buf)
    if md.__dlpack_device__()[0] != 13:
        pytest.skip(f"this CuPy reports managed memory as {md.__dlpack_device__()}, not kDLCUDAManaged")
    values, scales = mxfp8.export_components(md, mb, swizzled=True, values_dtype="uint8")
    cupy.cuda.runtime.deviceSynchronize()
    assert np.array_equal(cupy.asnumpy(cupy.from_dlpack(scales)), s)
    assert values.data_ptr == md.data.ptr
    y = mxfp8.dequantize(md, mb, swizzled=True, out=managed(np.full((300, 640), np.nan, np.float32)))
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cupy.asnumpy(y), ref.dequantize(data, s, "e4m3"))
    # CUDA (device) outputs for managed inputs: the header says one device, so refused, naming both
    out = cupy.full((300, 640), cupy.nan, cupy.float32)
    with pytest.raises(ValueError, match="out is on cuda:0 but data is on cuda_managed:0"):
        mxfp8.dequantize(md, mb, swizzled=True, out=out)
    assert bool(cupy.isnan(out).all())
    with pytest.raises(ValueError, match="scale_inv is on cuda:0 but data is on cuda_managed:0"):
        mxfp8.export_components(md, cupy.asarray(buf), swizzled=True)
    x = ref.special_input((256, 512 + 32), np.float32, seed=8)
    q = mxfp8.quantize(managed(x), scales="compact", values_dtype="uint8")  # CuPy has no float8
    cupy.cuda.runtime.deviceSynchronize()
    v_ref, s_ref = ref.quantize(x, "e4m3", "rceil", "rowwise")
    np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(q.rowwise_data)), v_ref)
    np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(q.rowwise_scale_inv)), s_ref)


def test_pinned_host_inputs():
    """Pinned torch tensors (kDLCUDAHost in torch's __dlpack_device__) take the host path; a CUDA output
    for them is refused, naming both devices."""
    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=9)
    d, b = torch.from_numpy(data).pin_memory(), torch.from_numpy(buf).pin_memory()
    values, scales = mxfp8.export_components(d, b, swizzled=True)
    assert values.data_ptr() == d.data_ptr() and not scales.is_cuda
    assert torch.equal(scales, torch.from_numpy(s))
    # pinned with plain host memory is one kind of memory to the Python check; the C library compares
    # the devices torch writes in the capsules (the same, or kDLCUDAHost against kDLCPU)
    try:
        _, scales = mxfp8.export_components(d, torch.from_numpy(buf), swizzled=True)
        assert torch.equal(scales, torch.from_numpy(s))
    except ValueError as e:
        assert "cpu:0" in str(e) and "cuda_host:0" in str(e) and "share one device" in str(e), str(e)
    out = torch.full((300, 640), float("nan"), device="cuda")
    with pytest.raises(ValueError, match=r"out is on cuda:0 but data is on (cpu|cuda_host):0"):
        mxfp8.dequantize(d, b, swizzled=True, out=out)
    assert torch.isnan(out).all()
    x = ref.special_input((256, 512 + 32), np.float32, seed=10)
    q = mxfp8.quantize(torch.from_numpy(x).pin_memory(), scales="compact")
    v_ref, s_ref = ref.quantize(x, "e4m3", "rceil", "rowwise")
    np.testing.assert_array_equal(q.rowwise_data.view(torch.uint8).numpy(), v_ref)
    np.testing.assert_array_equal(q.rowwise_scale_inv.numpy(), s_ref)


# ---------------------------------------------------------------------------------- misaligned pointers ---
WIDE_TYPES = {"float32": ((KDL_FLOAT, 32, 1), 4), "bfloat16": ((KDL_BFLOAT, 16, 1), 2), "float16": ((KDL_FLOAT, 16, 1), 2)}


def at_offset(base, shift, shape, dtype, use_byte_offset):
    """A forged CUDA tensor `shift` bytes into `base` (through the pointer or through byte_offset)."""
    if use_byte_offset:
        return Producer(ForgedTensor(base.data_ptr(), shape, dtype=dtype, device=(KDL_CUDA, 0), byte_offset=shift,
                                     keep=base))
    return Producer(ForgedTensor(base.data_ptr() + shift, shape, dtype=dtype, device=(KDL_CUDA, 0), keep=base))


@pytest.mark.parametrize("dtype", list(WIDE_TYPES))
@pytest.mark.parametrize("use_byte_offset", [False, True])
def test_misaligned_quantize_inputs_are_refused(dtype, use_byte_offset):
    dl_dtype, size = WIDE_TYPES[dtype]
    base = torch.zeros(128 * 64 * 4 + 16, dtype=torch.uint8, device="cuda")
    for shift in range(1, size):
        with pytest.raises(ValueError, match="not aligned"):
            mxfp8.quantize(at_offset(base, shift, (128, 64), dl_dtype, use_byte_offset))
    # at its own alignment (not 16) it works
    q = mxfp8.quantize(at_offset(base, size, (128, 64), dl_dtype, use_byte_offset), scales="compact")
    torch.cuda.synchronize()
    assert np.array_equal(_host(q.rowwise_scale_inv), np.zeros((128, 2), np.uint8))  # amax 0: scale 0


def _host(array):
    """An mxfp8.Array on CUDA, as NumPy (through torch)."""
    return torch.from_dlpack(array).cpu().numpy()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("use_byte_offset", [False, True])
def test_misaligned_dequantize_outputs_are_refused_and_untouched(dtype, use_byte_offset):
    dl_dtype, size = WIDE_TYPES[dtype]
    data, buf, s = make_mxfp8((128, 64), "swizzled", seed=11)
    d, b = cuda(data), cuda(buf)
    for shift in range(1, size):
        target = poisoned_cuda(128 * 64 * size + 16)
        with pytest.raises(ValueError, match="align"):
            mxfp8.dequantize(d, b, swizzled=True, out=at_offset(target, shift, (128, 64), dl_dtype, use_byte_offset))
        assert untouched(target)
    target = poisoned_cuda(128 * 64 * size + 16)
    mxfp8.dequantize(d, b, swizzled=True, out=at_offset(target, size, (128, 64), dl_dtype, use_byte_offset))
    torch.cuda.synchronize()
    assert bool((target[:size] == POISON).all()) and bool((target[size + 128 * 64 * size:] == POISON).all())
    got = target[size:size + 128 * 64 * size].view(getattr(torch, dtype)).float().cpu().reshape(128, 64)
    expected = torch.from_numpy(ref.dequantize(data, s, "e4m3").astype(np.float32)).to(getattr(torch, dtype)).float()
    assert torch.equal(got.nan_to_num(), expected.nan_to_num()) and torch.equal(got.isnan(), expected.isnan())


@pytest.mark.parametrize("shift", [1, 3, 7, 13])
def test_byte_operands_at_odd_addresses_are_exact(shift):
    """FP8 values and E8M0 scales are bytes: any address is fine, and vectorized kernels must not assume
    more. Sources, copies, swizzles and a bucket at odd offsets."""
    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=12 + shift)
    src = poisoned_cuda(data.size + buf.size + 64)
    src[shift:shift + data.size] = cuda(data.reshape(-1))
    src[shift + data.size + shift:shift + data.size + shift + buf.size] = cuda(buf.reshape(-1))
    d = at_offset(src, shift, data.shape, (KDL_UINT, 8, 1), False)
    b = at_offset(src, shift + data.size + shift, buf.shape, (KDL_UINT, 8, 1), shift % 2 == 1)
    values, scales = mxfp8.export_components(d, b, swizzled=True, values_dtype="uint8")
    torch.cuda.synchronize()
    assert np.array_equal(_host(values), data) and np.array_equal(_host(scales), s)
    y = mxfp8.dequantize(d, b, swizzled=True, out=torch.empty((300, 640), device="cuda"))
    np.testing.assert_array_equal(y.cpu().numpy(), ref.dequantize(data, s, "e4m3"))
    # swizzle both ways between odd addresses
    pad = poisoned_cuda(s.size + 2 * shift + 512 * 32)
    pad[shift:shift + s.size] = cuda(s.reshape(-1))
    swz_target = poisoned_cuda(384 * 20 + shift + 16)
    mxfp8.swizzle_scales(at_offset(pad, shift, s.shape, (KDL_UINT, 8, 1), False),
                         at_offset(swz_target, shift, (384 * 20,), (KDL_UINT, 8, 1), True))
    torch.cuda.synchronize()
    assert np.array_equal(swz_target[shift:shift + 384 * 20].cpu().numpy(), swizzle_reference(s))
    assert bool((swz_target[:shift] == POISON).all()) and bool((swz_target[shift + 384 * 20:] == POISON).all())
    back = poisoned_cuda(s.size + shift + 16)
    mxfp8.unswizzle_scales(at_offset(swz_target, shift, (384 * 20,), (KDL_UINT, 8, 1), False), 300, 20,
                           at_offset(back, shift, s.shape, (KDL_UINT, 8, 1), False))
    torch.cuda.synchronize()
    assert np.array_equal(back[shift:shift + s.size].cpu().numpy().reshape(s.shape), s)
    # a bucket that starts at an odd address
    d2, b2 = cuda(data), cuda(buf)
    sized, manifest = mxfp8.export_bucket({"w": {"data": d2, "scale_inv": b2, "swizzled": True}}, alignment=64)
    total = sized.numel()
    bucket_memory = poisoned_cuda(total + shift + 16)
    mxfp8.export_bucket({"w": {"data": d2, "scale_inv": b2, "swizzled": True}}, alignment=64,
                        bucket=at_offset(bucket_memory, shift, (total,), (KDL_UINT, 8, 1), False))
    torch.cuda.synchronize()
    parts = mxfp8.unpack_bucket(bucket_memory[shift:shift + total], manifest)
    assert torch.equal(parts["w"].values.view(torch.uint8).cpu(), torch.from_numpy(data))
    assert torch.equal(parts["w"].scales.cpu(), torch.from_numpy(s))
    assert bool((bucket_memory[:shift] == POISON).all())


# ----------------------------------------------------------------------------------------------- streams ---
def test_a_stream_whose_python_object_is_gone():
    """torch.cuda.Stream objects come from a per-device pool that torch never destroys: the handle of a
    deleted Stream stays a valid stream, and work queued on it completes in order."""
    data, buf, s = make_mxfp8((1024, 4096), "swizzled", seed=20)
    d, b = cuda(data), cuda(buf)
    stream = torch.cuda.Stream()
    handle = stream.cuda_stream
    stream.wait_stream(torch.cuda.current_stream())
    del stream
    gc.collect()
    _, scales = mxfp8.export_components(d, b, swizzled=True, stream=handle)
    q = mxfp8.quantize(torch.ones(256, 256, device="cuda"), stream=handle)
    torch.cuda.synchronize()
    assert torch.equal(scales.cpu(), torch.from_numpy(s))
    assert bool((q.rowwise_scale_inv == 119).all())  # amax 1.0: rceil(1/448) = 2^-8 -> E8M0 127 - 8


def test_a_stream_argument_of_the_wrong_type():
    data, buf, _ = make_mxfp8((128, 64), "swizzled", seed=21)
    for bad in ["x", 1.5, True, -5, 2**64]:
        with pytest.raises((TypeError, ValueError), match="stream"):
            mxfp8.export_components(cuda(data), cuda(buf), swizzled=True, stream=bad)


def test_exports_and_quantizes_racing_on_many_streams_and_threads():
    threads, rounds = 8, 30
    cases = []
    for i in range(threads):
        data, buf, s = make_mxfp8((257 + 64 * i, 640), "swizzled", seed=30 + i)
        x = ref.special_input((128, 512 + 32 * i), np.float32, seed=30 + i)
        cases.append((cuda(data), cuda(buf), torch.from_numpy(s), cuda(x), ref.quantize(x, "e4m3", "rceil", "rowwise")))
    torch.cuda.synchronize()
    failures, barrier = [], threading.Barrier(threads)

    def worker(i):
        d, b, s, x, (v_ref, s_ref) = cases[i]
        stream = torch.cuda.Stream()
        results = []
        try:
            barrier.wait()
            with torch.cuda.stream(stream):
                for r in range(rounds):
                    if r % 2:
                        results.append(("export", mxfp8.export_components(d, b, swizzled=True).scales))
                    else:
                        results.append(("quantize", mxfp8.quantize(x, scales="swizzled")))
                    if r % 7 == 0:  # and buckets, which pack many tensors in one launch
                        bucket, manifest = mxfp8.export_bucket({"w": {"data": d, "scale_inv": b, "swizzled": True}})
                        results.append(("bucket", (bucket, manifest)))
            stream.synchronize()
            for kind, result in results:
                if kind == "export":
                    ok = torch.equal(result.cpu(), s)
                elif kind == "quantize":
                    exported = mxfp8.export_components(result.rowwise_data, result.rowwise_scale_inv, swizzled=True)
                    torch.cuda.synchronize()
                    ok = (np.array_equal(result.rowwise_data.view(torch.uint8).cpu().numpy(), v_ref)
                          and np.array_equal(exported.scales.cpu().numpy(), s_ref))
                else:
                    parts = mxfp8.unpack_bucket(*result)
                    ok = torch.equal(parts["w"].scales.cpu(), s) and torch.equal(
                        parts["w"].values.view(torch.uint8), d)
                if not ok:
                    failures.append(f"thread {i}: a {kind} result differs")
        except Exception as e:  # noqa: BLE001 (reported below, with the thread)
            failures.append(f"thread {i}: {type(e).__name__}: {e}")

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not failures, failures


# ---------------------------------------------------------------------------- sources freed and reused ---
def test_views_copies_and_buckets_outlive_their_sources_when_memory_is_reused():
    swz_data, swz_buf, swz_s = make_mxfp8((1024, 2048), "swizzled", seed=40)
    cmp_data, cmp_buf, cmp_s = make_mxfp8((1024, 2048), "compact", seed=41)
    d, b = cuda(swz_data), cuda(swz_buf)
    values, scales = mxfp8.export_components(d, b, swizzled=True)  # values a view, scales a copy
    cd, cb = cuda(cmp_data), cuda(cmp_buf)
    cvalues, cscales = mxfp8.export_components(cd, cb, swizzled=False)  # both views
    td, tb = cuda(swz_data), cuda(swz_buf)
    raw_values, raw_scales = mxfp8._mxfp8.Tensor(rowwise_data=td, rowwise_scale_inv=tb, swizzled=True,
                                                 stream=1).export_components(values_dtype=1)  # mxfp8.Arrays
    bucket, manifest = mxfp8.export_bucket({"w": {"data": cuda(swz_data), "scale_inv": cuda(swz_buf), "swizzled": True}})
    parts = mxfp8.unpack_bucket(bucket, manifest)
    freed = [t.numel() for t in (d, b, cd, cb, td, tb, bucket)]
    del d, b, cd, cb, td, tb, bucket
    gc.collect()
    # the caching allocator hands freed blocks out again: take them all and fill them with garbage
    junk = [torch.full((n,), 0xA5, dtype=torch.uint8, device="cuda") for n in freed for _ in range(2)]
    torch.cuda.synchronize()
    assert torch.equal(values.view(torch.uint8).cpu(), torch.from_numpy(swz_data))
    assert torch.equal(scales.cpu(), torch.from_numpy(swz_s))
    assert torch.equal(cvalues.view(torch.uint8).cpu(), torch.from_numpy(cmp_data))
    assert torch.equal(cscales.cpu(), torch.from_numpy(cmp_s))
    assert np.array_equal(_host(raw_values), swz_data) and np.array_equal(_host(raw_scales), swz_s)
    assert torch.equal(parts["w"].values.view(torch.uint8).cpu(), torch.from_numpy(swz_data))
    assert torch.equal(parts["w"].scales.cpu(), torch.from_numpy(swz_s))
    del junk


def test_a_cuda_producer_without_a_shape_is_read_from_its_capsule_without_a_sync():
    """A DLPack producer need not have .shape or .dtype; the Python layer reads them from its capsule,
    asked with stream -1 (DLPack's "no synchronization": nothing is read), and grouped export of it gives
    what the tensor itself gives."""
    class Shapeless:
        def __init__(self, tensor):
            self.tensor, self.calls = tensor, []

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

        def __dlpack__(self, **kwargs):
            self.calls.append(kwargs)
            return self.tensor.__dlpack__(**kwargs)

    raw = Shapeless(torch.arange(3 * 5 * 7, dtype=torch.uint8, device="cuda").reshape(3, 5, 7))
    assert mxfp8._args.dims("x", raw) == (3, 5, 7)
    assert mxfp8._args.dtype_name("x", raw) == "uint8"
    assert raw.calls and all(c.get("stream") == -1 for c in raw.calls)
    data, buf, _ = make_mxfp8((100, 48), "padded", seed=5)
    expected = mxfp8.export_grouped(cuda(data), cuda(buf), num_experts=1, swizzled=False, values_dtype="uint8")
    got = mxfp8.export_grouped(Shapeless(cuda(data)), cuda(buf), num_experts=1, swizzled=False, values_dtype="uint8")
    for g, e in zip(got, expected):
        assert torch.equal(torch.from_dlpack(g), torch.from_dlpack(e))
