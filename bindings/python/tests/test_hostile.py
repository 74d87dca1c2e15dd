"""Hostile input through the Python API (host memory; runs in CI): forged DLPack capsules, read-only
outputs, manifests that lie, arguments of the wrong type or range, objects on different devices. Every
case checks the exception, that its message names the Python argument, and that nothing the caller owns
was written."""
import gc
import sys
import types

import numpy as np
import pytest

import mxfp8
from conftest import POISON, make_mxfp8, swizzle_reference
from dlpack_forge import (
    FLAG_READ_ONLY,
    KDL_CPU,
    KDL_CUDA,
    KDL_CUDA_HOST,
    DeviceOnly,
    ForgedTensor,
    Producer,
    Relabelled,
    capsule_is,
    numpy_tensor,
)


def read_only(a):
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def poisoned(shape, dtype=np.uint8):
    a = np.empty(shape, dtype)
    a.view(np.uint8)[...] = POISON
    return a


def one_tensor(shape=(100, 48), storage="padded", seed=0):
    data, buf, s = make_mxfp8(shape, storage, seed=seed)
    return data, buf, s


# ------------------------------------------------------------------------------- the scale layout ---
def _swizzled_storage():
    """TE's GEMM-ready storage: the swizzled scales have the same (128, 4) shape as the padded ones."""
    data, buf, _ = one_tensor(shape=(100, 48), storage="swizzled")
    return data, buf


@pytest.mark.parametrize("call", [
    lambda d, b: mxfp8.export_components(d, b),
    lambda d, b: mxfp8.dequantize(d, b),
    lambda d, b: mxfp8.convert(d, b, "vllm"),
    lambda d, b: mxfp8.export_grouped(d, b, num_experts=1),
    lambda d, b: mxfp8.nvfp4.export_components(d, b, np.float32([1.0])),
    lambda d, b: mxfp8.nvfp4.dequantize(d, b, np.float32([1.0])),
], ids=["export_components", "dequantize", "convert", "export_grouped", "nvfp4.export_components",
        "nvfp4.dequantize"])
def test_forgetting_the_scale_layout_is_a_type_error(call):
    """Swizzled and padded scales of one tensor have the same shape, so a default would decode TE's
    swizzled buffer as row-major without an error (issue 34 item 5): every raw-buffer call needs
    `swizzled` said, and the error names it before anything is read."""
    data, buf = _swizzled_storage()
    with pytest.raises(TypeError, match="required keyword-only argument: 'swizzled'"):
        call(data, buf)
    # said, the same buffer decodes to the same matrix as its compact form
    compact = mxfp8.export_components(*_swizzled_storage(), swizzled=True).scales
    padded = mxfp8.export_components(*_swizzled_storage(), swizzled=False).scales
    assert not np.array_equal(np.asarray(compact), np.asarray(padded))  # the two readings differ


# ------------------------------------------------------------------------------------ read-only outputs ---
@pytest.mark.parametrize("call", [
    lambda t: mxfp8.export_bucket(t),
    lambda t: list(mxfp8.iter_buckets(t, bucket_bytes=1 << 20)),
    lambda t: mxfp8.prepare_export(t),
    lambda t: mxfp8.prepare_buckets(t, bucket_bytes=1 << 20),
    lambda t: mxfp8.import_tensors(t, {"w": (np.zeros(4800, np.uint8), np.zeros(200, np.uint8))}),
    lambda t: mxfp8.prepare_import_tensors(t, {"w": (np.zeros(4800, np.uint8), np.zeros(200, np.uint8))}),
], ids=["export_bucket", "iter_buckets", "prepare_export", "prepare_buckets", "import_tensors",
        "prepare_import_tensors"])
@pytest.mark.parametrize("nvfp4", [False, True], ids=["mxfp8", "nvfp4"])
def test_a_spec_without_its_scale_layout_is_refused(call, nvfp4):
    """A spec dict is the same raw buffers: without "swizzled", TE's swizzled storage was read as
    row-major (the same size) and imported wrong scales silently. Refused, naming the entry, before
    anything is read or written."""
    data, buf = _swizzled_storage()
    spec = {"data": data, "scale_inv": buf}
    if nvfp4:
        spec = {"format": "nvfp4", "data": data[:, :24].copy(), "scale_inv": buf, "amax": np.float32([1.0])}
    with pytest.raises(ValueError, match=r"^tensors\['w'\] has no 'swizzled': True when its scales are in the "
                                         r"cuBLAS 128x4 layout"):
        call({"w": spec})


def test_dequantize_into_a_read_only_array_is_refused():
    data, buf, _ = one_tensor()
    out = read_only(poisoned((100, 48), np.float32))
    with pytest.raises(ValueError, match="out is read-only"):
        mxfp8.dequantize(data, buf, out=out, swizzled=False)
    assert (out.view(np.uint8) == POISON).all()
    # the same array made writeable is accepted: the refusal is the flag's, not the array's
    writable = poisoned((100, 48), np.float32)
    mxfp8.dequantize(data, buf, out=writable, swizzled=False)
    assert not (writable.view(np.uint8) == POISON).all()


def test_export_bucket_into_a_read_only_bucket_is_refused():
    data, buf, _ = one_tensor()
    bucket, manifest = mxfp8.export_bucket({"w": {"data": data, "swizzled": False, "scale_inv": buf}})
    ro = read_only(np.full(bucket.shape, POISON, np.uint8))
    with pytest.raises(ValueError, match="bucket is read-only"):
        mxfp8.export_bucket({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, bucket=ro)
    assert (ro == POISON).all()


def test_iter_buckets_into_a_read_only_buffer_is_refused():
    data, buf, _ = one_tensor()
    ro = read_only(np.full(1 << 16, POISON, np.uint8))
    with pytest.raises(ValueError, match="buffer is read-only"):
        list(mxfp8.iter_buckets({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, bucket_bytes=1 << 16, buffer=ro))
    assert (ro == POISON).all()


def test_swizzle_and_unswizzle_into_read_only_arrays_are_refused():
    s = np.random.default_rng(3).integers(1, 255, (130, 6), dtype=np.uint8)
    ro = read_only(np.full(256 * 8, POISON, np.uint8))
    with pytest.raises(ValueError, match="out is read-only"):
        mxfp8.swizzle_scales(s, ro)
    assert (ro == POISON).all()
    swz = swizzle_reference(s)
    ro_compact = read_only(np.full((130, 6), POISON, np.uint8))
    with pytest.raises(ValueError, match="out is read-only"):
        mxfp8.unswizzle_scales(swz, 130, 6, ro_compact)
    assert (ro_compact == POISON).all()


def test_unswizzle_rows_and_cols_the_buffer_does_not_hold_are_refused_before_anything_is_allocated():
    swz = swizzle_reference(np.ones((128, 2), np.uint8))  # 512 bytes: 128 x 2 (or 64 x 4, 100 x 3)
    # A 4 TiB matrix was allocated first: a MemoryError, not a word about rows and cols.
    for rows, cols, match in [(1 << 30, 1 << 12, "is 4398046511104 bytes, but swizzled has shape"),
                              (1 << 62, 1 << 62, r"rows, cols: layout \(MXFP8_SCALE_LAYOUT_128X4\): swizzled scale "
                                                 "size overflows int64 for a 4611686018427387904 x "
                                                 "4611686018427387904 scale matrix"),
                              (129, 2, "rows, cols are 129, 2: the swizzled layout of a 129 x 2 scale matrix is "
                                       r"1024 bytes, but swizzled has shape \(512,\)")]:
        with pytest.raises(ValueError, match=match):
            mxfp8.unswizzle_scales(swz, rows, cols)
    assert mxfp8.unswizzle_scales(swz, 64, 4).shape == (64, 4)


def test_convert_refuses_a_shape_its_data_does_not_hold_before_anything_is_allocated():
    data, buf, _ = one_tensor(shape=(256, 64), storage="swizzled")
    values = np.full(data.size, POISON, np.uint8)
    # The outputs of the shape were allocated first: 128 GiB of scales, a MemoryError.
    for kw, match in [(dict(shape=(1 << 30, 4096)), r"shape \(256, 64\) does not match the tensor's shape"),
                      (dict(shape=(1 << 30, 4096), values=True), "does not match the tensor's shape"),
                      (dict(shape=(1 << 30, 4096), num_experts=2), r"shape \(1073741824, 4096\) is not data's shape \(256, 64\)"),
                      (dict(shape=(1 << 30, 64), values=values), "does not match the tensor's shape")]:
        with pytest.raises(ValueError, match=match):
            mxfp8.convert(data, buf, "compact", swizzled=True, **kw)
    assert (values == POISON).all()
    assert mxfp8.convert(data, buf, "compact", swizzled=True, num_experts=2).scales.shape == (2, 128, 2)


def test_read_only_inputs_are_fine():
    data, buf, s = one_tensor(storage="swizzled")
    values, scales = mxfp8.export_components(read_only(data), read_only(buf), swizzled=True, values_dtype="uint8")
    assert np.array_equal(np.from_dlpack(scales), s)
    assert np.array_equal(np.from_dlpack(values), data)
    swz = mxfp8.swizzle_scales(read_only(s))
    assert np.array_equal(swz, swizzle_reference(s))


def test_a_forged_read_only_flag_on_an_output_is_refused_and_deleted_once():
    data, buf, _ = one_tensor()
    target = poisoned((100, 48), np.float32)
    forged = numpy_tensor(target, dtype=(2, 32, 1), flags=FLAG_READ_ONLY)
    with pytest.raises(ValueError, match="out is read-only"):
        mxfp8.dequantize(data, buf, out=Producer(forged), swizzled=False)
    assert forged.deleted == 1
    assert (target.view(np.uint8) == POISON).all()


@pytest.mark.parametrize("scales", ["swizzled", "padded"])
def test_a_read_only_allocator_result_is_refused(scales):
    """The library copies swizzled (and padded) scales into what the allocator returns."""
    data, buf, _ = make_mxfp8((100, 48), scales)
    handed_out = []

    def allocator(shape, device):
        a = read_only(np.full(shape, POISON, np.uint8))
        handed_out.append(a)
        return a

    tensor = mxfp8._mxfp8.Tensor(rowwise_data=data, rowwise_scale_inv=buf, swizzled=scales == "swizzled")
    with pytest.raises(ValueError, match="allocator result is read-only"):
        tensor.export_components(allocator=allocator)
    assert handed_out and all((a == POISON).all() for a in handed_out)


def test_a_read_only_allocator_result_is_refused_by_quantize():
    x = np.random.default_rng(4).standard_normal((64, 64)).astype(np.float32)
    handed_out = []

    def allocator(shape, device):
        a = read_only(np.full(shape, POISON, np.uint8))
        handed_out.append(a)
        return a

    with pytest.raises(ValueError, match="allocator result is read-only"):
        mxfp8._mxfp8.quantize(x, "e4m3", "1x32", "rceil", "compact", True, False, "fp8", "uint8", None, allocator)
    assert handed_out and all((a == POISON).all() for a in handed_out)


# --------------------------------------------------------------------------------------- forged capsules ---
@pytest.mark.parametrize("major", [0, 2, 255])
def test_a_capsule_of_another_major_version_is_deleted_unread(major):
    # Every field after the version is hostile: a consumer that read any of them would crash or lie.
    forged = ForgedTensor(0xDEAD0000, None, ndim=100000, version=(major, 0), flags=0xFFFF)
    _, buf, _ = one_tensor()
    with pytest.raises(ValueError, match=rf"data: DLPack version {major}\.0 is not supported"):
        mxfp8.export_components(Producer(forged, device=(KDL_CPU, 0)), buf, swizzled=False)
    assert forged.deleted == 1
    scales = ForgedTensor(0xDEAD0000, None, ndim=100000, version=(major, 7))
    data, _, _ = one_tensor()
    with pytest.raises(ValueError, match=rf"scale_inv: DLPack version {major}\.7 is not supported"):
        mxfp8.export_components(data, Producer(scales, device=(KDL_CPU, 0)), swizzled=False)
    assert scales.deleted == 1


@pytest.mark.parametrize("where", ["out", "bucket", "swizzle out", "quantize input", "allocator"])
def test_another_major_version_is_refused_everywhere(where):
    data, buf, s = one_tensor(storage="swizzled")
    forged = ForgedTensor(0xDEAD0000, None, ndim=7, version=(2, 0))
    producer = Producer(forged, device=(KDL_CPU, 0))
    with pytest.raises(ValueError, match=r"DLPack version 2\.0 is not supported"):
        if where == "out":
            mxfp8.dequantize(data, buf, swizzled=True, out=producer)
        elif where == "bucket":
            mxfp8.export_bucket({"w": {"data": data, "scale_inv": buf, "swizzled": True}}, bucket=producer)
        elif where == "swizzle out":
            mxfp8.swizzle_scales(s, producer)
        elif where == "quantize input":
            mxfp8.quantize(producer)
        else:
            tensor = mxfp8._mxfp8.Tensor(rowwise_data=data, rowwise_scale_inv=buf, swizzled=True)
            tensor.export_components(allocator=lambda shape, device: producer)
    assert forged.deleted == 1


def test_a_legacy_only_producer_is_read_through_the_wrapper():
    """A producer older than DLPack 1.0 (no max_version): its tensor is wrapped with the version of the
    header the binding was built with, and exported like any other; its deleter runs once, when the last
    export made from it is gone."""
    data, buf, s = one_tensor(storage="compact")
    legacy_data = ForgedTensor(data.ctypes.data, data.shape, version=None, keep=data)
    legacy_scales = ForgedTensor(buf.ctypes.data, buf.shape, version=None, keep=buf)
    pd, ps = Producer(legacy_data, legacy_only=True), Producer(legacy_scales, legacy_only=True)
    values, scales = mxfp8.export_components(pd, ps, values_dtype="uint8", swizzled=False)
    assert pd.calls == [{"stream": None}] and ps.calls == [{"stream": None}]
    assert np.array_equal(np.from_dlpack(values), data) and np.array_equal(np.from_dlpack(scales), s)
    assert legacy_data.deleted == 0 and legacy_scales.deleted == 0  # the views hold them
    del values, scales
    gc.collect()
    assert legacy_data.deleted == 1 and legacy_scales.deleted == 1


def test_a_forged_versioned_tensor_of_our_major_is_read():
    data, buf, s = one_tensor(storage="padded")
    d, b = numpy_tensor(data, version=(1, 0)), numpy_tensor(buf, version=(1, 99))
    values, scales = mxfp8.export_components(Producer(d), Producer(b), values_dtype="uint8", swizzled=False)
    assert np.array_equal(np.from_dlpack(scales), s)
    del values, scales
    gc.collect()
    assert d.deleted == 1 and b.deleted == 1


def test_a_capsule_with_another_name_is_a_type_error():
    data, buf, _ = one_tensor()
    forged = numpy_tensor(data)
    with pytest.raises(TypeError, match=r"data.__dlpack__\(\) did not return a DLPack capsule"):
        mxfp8.export_components(Producer(forged, capsule_name=b"something_else"), buf, swizzled=False)
    assert forged.deleted == 0  # not ours to delete: we never took it


def test_dlpack_returning_something_else_is_a_type_error():
    class NotACapsule:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            return 42

    _, buf, _ = one_tensor()
    with pytest.raises(TypeError, match=r"data.__dlpack__\(\) did not return a DLPack capsule"):
        mxfp8.export_components(NotACapsule(), buf, swizzled=False)


@pytest.mark.parametrize("device", [(1,), "cpu", (1, "0"), None, (1.0, 0)])
def test_a_lying_dlpack_device_is_a_type_error(device):
    class Liar:
        def __dlpack_device__(self):
            return device

        def __dlpack__(self, **kwargs):
            raise AssertionError("__dlpack__ called after __dlpack_device__ lied")

    _, buf, _ = one_tensor()
    with pytest.raises(TypeError, match=r"data.__dlpack_device__\(\) returned"):
        mxfp8.export_components(Liar(), buf, swizzled=False)


@pytest.mark.parametrize("overflowing", ["device_type", "device_id"])
def test_a_dlpack_device_past_int64_is_a_type_error_and_drops_no_reference(overflowing):
    # Both numbers are ints made at run time, held only here, so their reference counts are exact: a
    # number past int64 in either place must leave both as they were (one extra drop a call freed the
    # other number under its owner, and the process crashed calls later).
    other, big = int("1" * 15), 2 ** 64 + int("7")
    device = (big, other) if overflowing == "device_type" else (other, big)

    class PastInt64:
        def __dlpack_device__(self):
            return device

        def __dlpack__(self, **kwargs):
            raise AssertionError("__dlpack__ called after __dlpack_device__ failed")

    _, buf, _ = one_tensor()
    counts = sys.getrefcount(big), sys.getrefcount(other)
    for call in (lambda: mxfp8.export_components(PastInt64(), buf, swizzled=False),
                 lambda: mxfp8.import_tensors({"w": {"data": PastInt64(), "swizzled": False, "scale_inv": buf}}, {})):
        for _ in range(50):
            with pytest.raises(TypeError, match=r"__dlpack_device__\(\) returned"):
                call()
    assert (sys.getrefcount(big), sys.getrefcount(other)) == counts


@pytest.mark.parametrize("raised, expected", [(BufferError, TypeError), (RuntimeError, TypeError), (TypeError, TypeError),
                                              (ValueError, ValueError), (KeyboardInterrupt, KeyboardInterrupt)])
def test_a_producer_that_cannot_export_is_a_type_error_naming_the_argument(raised, expected):
    # DLPack's BufferError, torch's RuntimeError and a TypeError (after the retry without max_version) mean
    # "this object cannot be exported": the TypeError the API promises for an object it cannot take,
    # naming the argument, the producer's error its cause. Anything else a producer raises is its own to
    # say and propagates unchanged.
    data, buf, _ = one_tensor()

    class Refusing:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, **kwargs):
            raise raised("cannot export this one\nsecond line")

    with pytest.raises(expected) as caught:
        mxfp8.export_components(data, Refusing(), swizzled=False)
    if expected is TypeError:
        assert str(caught.value) == f"scale_inv: its __dlpack__ could not export it ({raised.__name__}: cannot export this one)"
        assert isinstance(caught.value.__cause__, raised)
    else:
        assert str(caught.value) == "cannot export this one\nsecond line"


def test_objects_their_producers_cannot_export_are_type_errors():
    data, buf, s = one_tensor()
    with pytest.raises(TypeError, match=r"^out: its __dlpack__ could not export it \(BufferError: ") as caught:
        mxfp8.convert(data, buf, "compact", swizzled=False, out=np.zeros(s.size, object))
    assert isinstance(caught.value.__cause__, BufferError)
    with pytest.raises(TypeError, match=r"^compact: its __dlpack__ could not export it \(BufferError: "):
        mxfp8.swizzle_scales(s.astype(object))
    torch = pytest.importorskip("torch")
    for tensor in (torch.ones(4, 32, device="meta"), torch.ones(4, 32).to_sparse()):
        with pytest.raises(TypeError, match=r"^x: (its __dlpack__|the framework's DLPack exchange API) could not "
                                            r"export it \(RuntimeError: [^\n]*\)$"):
            mxfp8.quantize(tensor)


def test_array_dlpack_checks_its_arguments():
    data, buf, _ = one_tensor(storage="swizzled")
    _, scales = mxfp8.export_components(data, buf, swizzled=True)
    for kwargs, message in [
        ({"max_version": (1,)}, r"max_version must be a \(major, minor\) tuple of ints, got \(1,\)"),
        ({"max_version": "1.0"}, "max_version must be a"),
        ({"max_version": (1, 2**80)}, "max_version must be a"),
        ({"dl_device": "cpu"}, r"dl_device must be a \(device_type, device_id\) tuple of ints, got 'cpu'"),
        ({"stream": "x"}, "stream must be None or an int"),
        ({"stream": 2**70}, "stream must be None or an int"),
        ({"copy": "no"}, "copy must be None, True or False"),
    ]:
        with pytest.raises(TypeError, match=message):
            scales.__dlpack__(**kwargs)
    # the well-formed calls still work
    assert capsule_is(scales.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=False), b"dltensor_versioned")
    assert capsule_is(scales.__dlpack__(stream=-1), b"dltensor")


def test_array_dtype_names():
    data, buf, _ = one_tensor(storage="swizzled")
    values, scales = mxfp8.export_components(data, buf, swizzled=True, fp8_dtype="e5m2", scales_dtype="e8m0")
    assert (values.dtype, scales.dtype) == ("float8_e5m2", "float8_e8m0fnu")
    values, scales = mxfp8.export_components(data, buf, swizzled=True, values_dtype="uint8")
    assert (values.dtype, scales.dtype) == ("uint8", "uint8")


def test_a_complex_input_is_named_complex64():
    """The C library names dtypes (format_dtype); complex64 was "code 5 bits 64"."""
    data, buf, _ = one_tensor()
    with pytest.raises(ValueError, match="complex64"):
        mxfp8.export_components(data.astype(np.complex64), buf, swizzled=False)


# ---------------------------------------------------------------------------------- manifests that lie ---
def bucket_of_three():
    specs, truth = {}, {}
    for i, shape in enumerate([(100, 48), (64, 64), (3, 5, 40)]):
        data, buf, s = make_mxfp8(shape, "padded", seed=20 + i)
        specs[f"t{i}"] = {"data": data, "swizzled": False, "scale_inv": buf}
        truth[f"t{i}"] = (data, s)
    bucket, manifest = mxfp8.export_bucket(specs, alignment=64)
    return bucket, manifest, truth


def test_an_honest_manifest_unpacks_exactly():
    bucket, manifest, truth = bucket_of_three()
    parts = mxfp8.unpack_bucket(bucket, manifest)
    for name, (data, s) in truth.items():
        assert np.array_equal(parts[name].values, data)
        assert np.array_equal(parts[name].scales.reshape(s.shape), s)
        assert np.shares_memory(parts[name].values, bucket)
    # a manifest that went through JSON (lists, not tuples) is the same manifest
    import json

    parts = mxfp8.unpack_bucket(bucket, json.loads(json.dumps(manifest)))
    assert np.array_equal(parts["t2"].values, truth["t2"][0])


def lie(manifest, i, **changes):
    forged = [dict(e) for e in manifest]
    forged[i].update(changes)
    return forged


@pytest.mark.parametrize(
    "make_lie, error, message",
    [
        (lambda m: lie(m, 1, values_offset=-1), ValueError, r"manifest\[1\]\['values_offset'\] is -1"),
        (lambda m: lie(m, 1, scales_offset=-64), ValueError, r"manifest\[1\]\['scales_offset'\] is -64"),
        (lambda m: lie(m, 1, values_offset=m[0]["values_offset"]), ValueError,
         r"desc.parts_in\[1\] values \(bytes 0..4096\) and desc.parts_in\[0\] values \(bytes 0..4800\) overlap"),
        (lambda m: lie(m, 0, scales_offset=m[0]["values_offset"] + 1), ValueError,
         r"desc.parts_in\[0\] scales \(bytes 1..201\) and desc.parts_in\[0\] values \(bytes 0..4800\) overlap"),
        (lambda m: lie(m, 0, shape=(48, 100)), ValueError,
         r"desc.parts_in\[0\] gives 200 bytes of scales, its shape and compact layout give 192"),
        (lambda m: lie(m, 0, shape=(100, 49)), ValueError,
         r"desc.parts_in\[0\] gives 4800 bytes of values, its shape and row-major layout give 4900"),
        (lambda m: lie(m, 0, scales_shape=(100, 3)), ValueError, r"desc.scales_shapes\[0\] is \(100, 3\), not the rowwise scale matrix of shape \(100, 48\), which is 100 x 2"),
        (lambda m: lie(m, 0, scales_bytes=201), ValueError, r"desc.parts_in\[0\] gives 201 bytes of scales, its shape and compact layout give 200"),
        (lambda m: lie(m, 2, values_offset=2**64 - 101), ValueError, r"desc.parts_in\[2\]: its 600 bytes of values at byte 18446744073709551515 run past the end of a bucket"),
        (lambda m: lie(m, 2, scales_offset=m[2]["scales_offset"] + 4096), ValueError,
         r"desc.parts_in\[2\]: its 30 bytes of scales at byte \d+ run past the end of a bucket of 9950 bytes"),
        (lambda m: lie(m, 0, values_offset=True), TypeError, r"manifest\[0\]\['values_offset'\] must be an int"),
        (lambda m: lie(m, 0, values_bytes=4800.0), TypeError, r"manifest\[0\]\['values_bytes'\] must be an int"),
        (lambda m: lie(m, 0, shape="100x48"), TypeError, r"manifest\[0\]\['shape'\] must be a sequence of ints"),
        # a dict's iteration gives its keys: {100: 'rows', 48: 'cols'} read as (100, 48) was taken
        (lambda m: lie(m, 0, shape={100: "rows", 48: "cols"}), TypeError, r"manifest\[0\]\['shape'\] must be a sequence of ints"),
        (lambda m: lie(m, 0, shape=(100, True)), TypeError, r"manifest\[0\]\['shape'\]\[1\] must be an int"),
        (lambda m: lie(m, 1, fp8_dtype="e3m4"), ValueError, r"manifest\[1\]\['fp8_dtype'\] must be one of"),
        (lambda m: lie(m, 1, name="t0"), ValueError, r"manifest\[1\]\['name'\] 't0' appears twice"),
        (lambda m: [{k: v for k, v in e.items() if k != "scales_bytes"} for e in m], ValueError,
         r"manifest\[0\] has no 'scales_bytes'"),
        (lambda m: m[0], TypeError, "manifest must be the list export_bucket returned"),
        (lambda m: [m[0], "t1"], TypeError, r"manifest\[1\] must be a dict"),
    ],
)
def test_a_lying_manifest_is_refused(make_lie, error, message):
    bucket, manifest, _ = bucket_of_three()
    before = bucket.copy()
    with pytest.raises(error, match=message):
        mxfp8.unpack_bucket(bucket, make_lie(manifest))
    assert np.array_equal(bucket, before)


class Flipping:
    """An int that reads as `first` once (the check) and as `then` after (the views)."""

    def __init__(self, first, then):
        self.reads, self.first, self.then = 0, first, then

    def __index__(self):
        self.reads += 1
        return self.first if self.reads == 1 else self.then


class ReadTwice:
    """A manifest (an iterable, not an iterator) that gives the honest entries once, then `then`."""

    def __init__(self, first, then):
        self.reads, self.first, self.then = 0, first, then

    def __iter__(self):
        self.reads += 1
        return iter(self.first if self.reads == 1 else self.then)


def test_unpack_views_what_the_check_read():
    """The check and the views read the manifest once: a manifest that changes between two reads passed
    the check as honest and gave views of t1's bytes under t0's name."""
    bucket, manifest, truth = bucket_of_three()
    at_t1 = manifest[1]["values_offset"]
    for forged in (lie(manifest, 0, values_offset=Flipping(0, at_t1)),
                   lie(manifest, 0, shape=[Flipping(100, 64), 48]),
                   ReadTwice(manifest, lie(manifest, 0, values_offset=at_t1))):
        parts = mxfp8.unpack_bucket(bucket, forged)
        assert np.array_equal(parts["t0"].values, truth["t0"][0])


def test_unpack_needs_a_byte_bucket():
    bucket, manifest, _ = bucket_of_three()
    with pytest.raises(ValueError, match="bucket must hold bytes"):
        mxfp8.unpack_bucket(bucket.view(np.uint16), manifest)
    with pytest.raises(ValueError, match="bucket must be a 1-D byte buffer"):
        mxfp8.unpack_bucket(np.stack([bucket, bucket]), manifest)
    with pytest.raises(ValueError, match="bucket must be contiguous"):
        mxfp8.unpack_bucket(np.repeat(bucket, 2)[::2], manifest)
    with pytest.raises(ValueError, match="run past the end of a bucket"):
        mxfp8.unpack_bucket(bucket[:-1], manifest)


# ------------------------------------------------------------------------------------ wrong arguments ---
def export(swizzled=False, **kwargs):
    data, buf, _ = one_tensor()
    return mxfp8.export_components(data, buf, swizzled=swizzled, **kwargs)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: export(swizzled="False"), TypeError, r"swizzled must be True or False, got 'False' \(str\)"),
        (lambda: export(swizzled=1), TypeError, "swizzled must be True or False, got 1"),
        (lambda: export(contiguous=None), TypeError, "contiguous must be True or False"),
        (lambda: export(shape=(2**63, 1)), ValueError, r"shape\[0\] is 9223372036854775808, expected"),
        (lambda: export(shape="100,48"), TypeError, "shape must be a sequence of ints"),
        (lambda: export(shape={100: 0, 48: 0}), TypeError, "shape must be a sequence of ints"),
        (lambda: export(shape=types.MappingProxyType({100: 0, 48: 0})), TypeError, "shape must be a sequence of ints"),
        (lambda: export(shape=(100.0, 48)), TypeError, r"shape\[0\] must be an int"),
        (lambda: export(fp8_dtype=["e4m3"]), ValueError, "fp8_dtype must be one of"),
        (lambda: export(stream="x"), ValueError, "stream is only meaningful for CUDA"),
        (lambda: mxfp8.quantize(np.ones((4, 64), np.float32), rowwise=False, columnwise=False), ValueError,
         "rowwise and columnwise are both False: ask for at least one direction"),
        (lambda: mxfp8.quantize(np.ones((4, 64), np.float32), columnwise="yes"), TypeError,
         "columnwise must be True or False"),
        (lambda: mxfp8.quantize(np.ones((4, 64), np.float32), rowwise=np.bool_(False), columnwise=np.bool_(False)),
         ValueError, "rowwise and columnwise are both False"),
        (lambda: mxfp8.dequantize(*one_tensor()[:2], dtype="float16", swizzled=False), ValueError, "dtype must be one of"),
        (lambda: mxfp8.dequantize(*one_tensor()[:2], shape=(2**64,), swizzled=False), ValueError, r"shape\[0\] is 18446744073709551616"),
        (lambda: mxfp8.swizzle_scales(np.zeros((), np.uint8)), ValueError, "compact is 0-dimensional"),
        (lambda: mxfp8.unswizzle_scales(np.zeros(512, np.uint8), -1, 4), ValueError, "rows is -1, expected 0 to"),
        (lambda: mxfp8.unswizzle_scales(np.zeros(512, np.uint8), 128, "4"), TypeError, "cols must be an int"),
        (lambda: mxfp8.swizzle_scales([1, 2]), TypeError, "compact: expected an object with __dlpack__"),
    ],
)
def test_wrong_arguments_get_a_message_naming_them(call, error, message):
    with pytest.raises(error, match=message):
        call()


def grouped(**kwargs):
    data = np.zeros((4 * 64, 64), np.uint8)
    scales = np.zeros(4 * 128 * 4, np.uint8)
    return mxfp8.export_grouped(data, scales, swizzled=kwargs.pop("swizzled", False), **kwargs)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: grouped(num_experts=0), ValueError, "num_experts is 0, expected 1 to"),
        (lambda: grouped(num_experts=-3), ValueError, "num_experts is -3, expected 1 to"),
        (lambda: grouped(num_experts=2**31), ValueError, "num_experts is 2147483648, expected 1 to 2147483647"),
        (lambda: grouped(num_experts=4.0), TypeError, "num_experts must be an int"),
        (lambda: grouped(num_experts=True), TypeError, "num_experts must be an int"),
        (lambda: grouped(num_experts=4, swizzled="True"), TypeError, "swizzled must be True or False"),
        (lambda: grouped(num_experts=4, stacked="no"), TypeError, "stacked must be True or False"),
        (lambda: grouped(num_experts=2, expert_rows=[2**63, 1]), ValueError, r"expert_rows\[0\] is 9223372036854775808"),
        (lambda: grouped(num_experts=2, expert_rows=[128, "128"]), TypeError, r"expert_rows\[1\] must be an int"),
        (lambda: grouped(num_experts=4, scale_offsets=[0, 1, 2, 2**64]), ValueError, r"scale_offsets\[3\] is"),
        (lambda: mxfp8.export_grouped(np.zeros((), np.uint8), np.zeros(4, np.uint8), num_experts=1, swizzled=False), ValueError,
         "data is 0-dimensional"),
    ],
)
def test_export_grouped_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def bucket_spec():
    data, buf, _ = one_tensor()
    return {"data": data, "swizzled": False, "scale_inv": buf}


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: list(mxfp8.iter_buckets({"w": bucket_spec()}, bucket_bytes=1 << 20, alignment=0)), ValueError,
         "alignment is 0, expected a power of two"),
        (lambda: list(mxfp8.iter_buckets({"w": bucket_spec()}, bucket_bytes=1 << 20, alignment=48)), ValueError,
         "alignment is 48, expected a power of two"),
        (lambda: mxfp8.export_bucket({"w": bucket_spec()}, alignment=2**63 + 2**62), ValueError,
         "expected a power of two"),
        (lambda: mxfp8.export_bucket({"w": bucket_spec()}, alignment=2**64), ValueError, "alignment is 18446744073709551616"),
        # a layout past INT64_MAX bytes was returned and allocated: NumPy's "Maximum allowed dimension exceeded"
        (lambda: mxfp8.export_bucket({"w": bucket_spec()}, alignment=2**63), ValueError,
         "with alignment 9223372036854775808 are past INT64_MAX, the most a bucket"),
        (lambda: list(mxfp8.iter_buckets({"w": bucket_spec()}, bucket_bytes=0)), ValueError, "bucket_bytes is 0"),
        (lambda: list(mxfp8.iter_buckets({"w": bucket_spec()}, bucket_bytes="1M")), TypeError,
         "bucket_bytes must be an int"),
        (lambda: mxfp8.export_bucket({"w": dict(bucket_spec(), swizzle=True)}), ValueError,
         r"tensors\['w'\] has an unknown key 'swizzle'"),
        (lambda: mxfp8.export_bucket({"w": dict(bucket_spec(), swizzled="False")}), TypeError,
         r"tensors\['w'\]\['swizzled'\] must be True or False"),
        (lambda: mxfp8.export_bucket({"w": {"data": bucket_spec()["data"]}}), ValueError,
         r"tensors\['w'\] has no 'scale_inv'"),
        (lambda: mxfp8.export_bucket({"w": dict(bucket_spec(), shape=(100, 2**63))}), ValueError,
         r"tensors\['w'\]\['shape'\]\[1\] is 9223372036854775808"),
        (lambda: mxfp8.export_bucket({"w": dict(bucket_spec(), data=np.zeros((), np.uint8))}), ValueError,
         r"tensors\['w'\]\['data'\] is 0-dimensional"),
        (lambda: mxfp8.export_bucket([bucket_spec()]), TypeError, "tensors must be a dict"),
        (lambda: mxfp8.export_bucket({"w": [1]}), TypeError, r"tensors\['w'\] must be a dict"),
        (lambda: list(mxfp8.iter_buckets({"w": {"data": bucket_spec()["data"]}}, bucket_bytes=1 << 20)),
         ValueError, r"tensors\['w'\] has no 'scale_inv'"),
    ],
)
def test_bucket_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_bucket_errors_from_the_library_name_the_tensor():
    data, buf, _ = one_tensor()
    with pytest.raises(ValueError, match=r"tensors\['w'\]: .*need 128 x 4 = 512 bytes, got 200"):
        mxfp8.export_bucket({"v": {"data": data, "swizzled": False, "scale_inv": buf},
                             "w": {"data": data, "scale_inv": np.zeros((100, 2), np.uint8), "swizzled": True}})
    with pytest.raises(ValueError, match=r"tensors\['w'\]\['scale_inv'\]: DLPack version 2\.0"):
        mxfp8.export_bucket({"w": {"data": data, "swizzled": False, "scale_inv": Producer(ForgedTensor(0, None, ndim=3, version=(2, 0)),
                                                                         device=(KDL_CPU, 0))}})


# -------------------------------------------------------------------------------------- mixed devices ---
# A "CUDA" object here only says it is on CUDA (__dlpack_device__) and fails the test if asked for its
# capsule: the device check must come before any __dlpack__ call, so no GPU is needed to test it.
def cuda_only(shape=(128, 64), device=0):
    return DeviceOnly((KDL_CUDA, device), shape)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda d, s, h: mxfp8.export_components(d, h, swizzled=True), r"scale_inv is on cpu:0 but data is on cuda:0"),
        (lambda d, s, h: mxfp8.export_components(h, s, swizzled=False), r"scale_inv is on cuda:0 but data is on cpu:0"),
        (lambda d, s, h: mxfp8.export_components(d, cuda_only(device=1), swizzled=False), r"scale_inv is on cuda:1 but data is on cuda:0"),
        (lambda d, s, h: mxfp8.dequantize(d, s, out=np.zeros((128, 64), np.float32), swizzled=False),
         r"out is on cpu:0 but data is on cuda:0"),
        (lambda d, s, h: mxfp8.dequantize(d, h, swizzled=False), r"scale_inv is on cpu:0 but data is on cuda:0"),
        (lambda d, s, h: mxfp8.export_grouped(d, h, num_experts=1, swizzled=False), r"scale_inv is on cpu:0 but data is on cuda:0"),
        (lambda d, s, h: mxfp8.export_bucket({"w": {"data": d, "swizzled": False, "scale_inv": s}}, bucket=np.zeros(1 << 16, np.uint8)),
         r"bucket is on cpu:0 but tensors\['w'\]\['data'\] is on cuda:0"),
        (lambda d, s, h: mxfp8.export_bucket({"a": {"data": d, "swizzled": False, "scale_inv": s}, "b": {"data": h, "swizzled": False, "scale_inv": h}}),
         r"tensors\['b'\]\['data'\] is on cpu:0 but tensors\['a'\]\['data'\] is on cuda:0"),
        (lambda d, s, h: mxfp8.swizzle_scales(s, np.zeros(512, np.uint8)), r"out is on cpu:0 but compact is on cuda:0"),
        (lambda d, s, h: mxfp8.unswizzle_scales(s, 128, 4, np.zeros((128, 4), np.uint8)),
         r"out is on cpu:0 but swizzled is on cuda:0"),
        (lambda d, s, h: mxfp8.swizzle_scales(h, d), r"out is on cuda:0 but compact is on cpu:0"),
    ],
)
def test_mixed_devices_are_refused_before_any_dlpack_call(call, message):
    data, scales = cuda_only(), cuda_only((512,))
    host = np.zeros((128, 64), np.uint8)
    host_before = host.copy()
    with pytest.raises(ValueError, match=message):
        call(data, scales, host)
    assert data.dlpack_calls == 0 and scales.dlpack_calls == 0
    assert np.array_equal(host, host_before)


def test_mixed_device_outputs_are_left_untouched():
    data, scales = cuda_only(), cuda_only((512,))
    out = poisoned((128, 64), np.float32)
    with pytest.raises(ValueError, match="out is on cpu:0 but data is on cuda:0"):
        mxfp8.dequantize(data, scales, out=out, swizzled=False)
    assert (out.view(np.uint8) == POISON).all()


def test_pinned_and_plain_host_memory_mix():
    """torch reports pinned tensors as kDLCUDAHost in __dlpack_device__ (and kDLCPU in the capsule): the
    Python check takes host memory as one; the C library compares the capsules' devices."""
    data, buf, s = one_tensor(storage="swizzled")
    values, scales = mxfp8.export_components(Relabelled(data, (KDL_CUDA_HOST, 0)), buf, swizzled=True,
                                             values_dtype="uint8")
    assert np.array_equal(np.from_dlpack(scales), s)
    out = mxfp8.dequantize(data, Relabelled(buf, (KDL_CUDA_HOST, 0)), swizzled=True)
    assert out.shape == (100, 48)


def test_a_device_the_library_does_not_know_is_a_type_error():
    data, buf, _ = one_tensor()
    with pytest.raises(ValueError, match=r"scale_inv is on cpu:0 but data is on type 7:0"):
        mxfp8.export_components(DeviceOnly((7, 0)), buf, swizzled=False)


def test_a_buffer_of_several_dimensions_is_refused_by_iter_buckets_and_prepare_buckets():
    # Each bucket is buffer[:total]: of a 2-D buffer that slices rows, so the bucket handed on was the
    # whole 2-D buffer, not the `total` bytes its manifest describes (unpack_bucket then refused it).
    data, buf, _ = make_mxfp8((128, 64), "padded", seed=1)
    tensors = {"w": {"data": data, "swizzled": False, "scale_inv": buf}}
    for buffer in (np.zeros((1024, 1024), np.uint8), np.zeros((), np.uint8)):
        with pytest.raises(ValueError, match="buffer must be a 1-D byte buffer"):
            mxfp8.prepare_buckets(tensors, bucket_bytes=1 << 20, buffer=buffer)
        with pytest.raises(ValueError, match="buffer must be a 1-D byte buffer"):
            list(mxfp8.iter_buckets(tensors, bucket_bytes=1 << 20, buffer=buffer))
    # export_bucket too: it filled a 2-D bucket and handed it back, which unpack_bucket refused.
    buffer = np.full((2, 8448), POISON, np.uint8)
    with pytest.raises(ValueError, match="bucket must be a 1-D byte buffer, got shape \\(2, 8448\\)"):
        mxfp8.export_bucket(tensors, bucket=buffer)
    assert (buffer == POISON).all()


def _nvfp4_spec(module):
    rng = np.random.default_rng(0)
    spec = {"format": "nvfp4", "data": rng.integers(0, 256, (4, 16), dtype=np.uint8),
            "scale_inv": rng.integers(1, 0x7F, (4, 2), dtype=np.uint8), "amax": np.array([3.5], np.float32),
            "swizzled": False, "shape": (4, 32)}
    if module == "torch":
        import torch
        spec = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in spec.items()}
    return spec


@pytest.mark.parametrize("module", ["numpy", "torch"])
def test_an_nvfp4_bucket_at_an_odd_address_is_refused_where_it_is_made_and_read(module):
    # The float32 amax lies at a multiple of 4 bytes into the bucket; a bucket one byte past an aligned
    # address put it off 4 bytes: export_bucket filled it, every receiver refused it ("byte 512").
    if module == "torch":
        torch = pytest.importorskip("torch")
        zeros = lambda n: torch.zeros(n, dtype=torch.uint8)  # noqa: E731
    else:
        zeros = lambda n: np.zeros(n, np.uint8)  # noqa: E731
    spec = _nvfp4_spec(module)
    odd = zeros(1024)[1:]
    with pytest.raises(ValueError, match="desc.bucket_out starts 1 byte past a multiple of 4, so the float32 amax"):
        mxfp8.export_bucket({"w": spec}, bucket=odd)
    assert not odd.any()
    bucket, manifest = mxfp8.export_bucket({"w": spec})  # aligned: made and read back
    moved = zeros(len(bucket) + 1)[1:]
    moved[:] = bucket  # the same bytes received into a buffer at an odd address
    params = {"w": (zeros(4 * 16), zeros(4 * 2), np.zeros(1, np.float32) if module == "numpy" else
                    __import__("torch").zeros(1))}
    with pytest.raises(ValueError, match="the float32 amax at byte 512 of the bucket is unaligned, as desc.bucket_in "
                                         "starts 1 byte past a multiple of 4"):
        mxfp8.import_bucket(moved, manifest, params)
    # unpack_bucket too (torch views no unaligned float32: mxfp8's words, not torch's RuntimeError; NumPy
    # would, but a reader of the bytes reads only what the library accepts, as import_bucket does)
    with pytest.raises(ValueError, match=r"the float32 amax at byte 512 of the bucket is unaligned, as desc.bucket_in "
                                         r"starts 1 byte past a multiple of 4: .* \(entry 0 is 'w'\)"):
        mxfp8.unpack_bucket(moved, manifest)


def test_an_mxfp8_bucket_at_an_odd_address_is_made_and_read():
    # Only an NVFP4 amax needs the alignment: MXFP8 parts are bytes, at any address.
    data, buf, s = make_mxfp8((100, 64), "padded", seed=3)
    odd = np.full(1 << 16, POISON, np.uint8)[1:]
    bucket, manifest = mxfp8.export_bucket({"w": {"data": data, "swizzled": False, "scale_inv": buf}}, bucket=odd)
    assert bucket.ctypes.data % 4 == 1
    parts = mxfp8.unpack_bucket(bucket, manifest)
    assert np.array_equal(np.from_dlpack(parts["w"].values).view(np.uint8), data.view(np.uint8))
    assert np.array_equal(np.from_dlpack(parts["w"].scales), s)


# ------------------------------------------------------------------- producers without a .shape ---
class FailingAttribute(Exception):
    pass


class FailingLookup:
    """A DLPack producer (`array`'s methods) whose lookup of `failing` fails with its own error (a lazy tensor
    that cannot materialize): Python's hasattr lets that error through, only an AttributeError means "no
    such attribute"."""

    def __init__(self, failing, array):
        self.failing, self.array = failing, array

    def __getattr__(self, name):
        if name == self.failing:
            raise FailingAttribute(f"cannot look up {name}")
        if name in ("__dlpack__", "__dlpack_device__"):
            return getattr(self.array, name)  # None has neither: an AttributeError
        raise AttributeError(name)


@pytest.mark.parametrize("failing", ["__dlpack__", "__dlpack_device__"])
def test_an_attribute_lookup_that_fails_is_the_callers_error_not_a_missing_attribute(failing):
    # The extension's lookups swallowed every exception (PyObject_HasAttrString), so the object read as
    # "not a DLPack producer" and the caller's own error was lost.
    data, buf, s = one_tensor()
    params = {"w": (np.empty_like(data), np.empty_like(s))}
    calls = [lambda o: mxfp8.export_components(data, o, swizzled=False),
             lambda o: mxfp8.swizzle_scales(o),
             lambda o: mxfp8.import_tensors({"w": {"data": data, "scale_inv": o, "swizzled": False}}, params)]
    if failing == "__dlpack_device__":
        calls.pop()  # the import reads the device from the capsule: it never looks __dlpack_device__ up
    for call in calls:
        with pytest.raises(FailingAttribute, match=f"cannot look up {failing}"):
            call(FailingLookup(failing, buf))
    # The same object with nothing failing is read as the producer it is, and one with neither method is
    # still the TypeError that names the argument.
    expected = mxfp8.export_components(data, buf, swizzled=False)
    got = mxfp8.export_components(data, FailingLookup(None, buf), swizzled=False)
    np.testing.assert_array_equal(np.from_dlpack(got.scales), np.from_dlpack(expected.scales))
    with pytest.raises(TypeError, match=r"^scale_inv: expected an object with __dlpack__"):
        mxfp8.export_components(data, FailingLookup(None, None), swizzled=False)


def test_a_shape_whose_length_lookup_fails_is_the_callers_error():
    class Dims:
        def __getattr__(self, name):
            if name == "__len__":
                raise FailingAttribute("cannot look up __len__")
            raise AttributeError(name)

    data, buf, _ = one_tensor()
    with pytest.raises(FailingAttribute):
        mxfp8.export_components(data, buf, shape=Dims(), swizzled=False)


def test_numpy_blocked_in_sys_modules_is_numpy_not_imported(monkeypatch):
    # sys.modules["numpy"] = None is how a program blocks an import; the extension took that None for the
    # module and asked it for numpy.bool_ (AttributeError) where _args reads it as "not imported".
    data, buf, _ = one_tensor()
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(TypeError, match=r"^swizzled must be True or False, got 'yes' \(str\)$"):
        mxfp8.export_components(data, buf, swizzled="yes")


def test_torch_blocked_in_sys_modules_is_torch_not_imported():
    # The same for torch, in a process that never imported it (once a real torch was seen, the extension
    # keeps its Tensor type): torch_of, and the storage pins of every prepare_* call.
    import subprocess
    import textwrap

    script = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None
        import numpy as np, mxfp8
        sys.path.insert(0, %r)
        from conftest import make_mxfp8
        data, buf, s = make_mxfp8((100, 48), "padded", seed=1)
        assert mxfp8._mxfp8.torch_of(data) is None
        values, scales = np.empty(data.size, np.uint8), np.empty(s.size, np.uint8)
        mxfp8.prepare_import_tensors({"w": {"data": data, "scale_inv": buf, "swizzled": False}},
                                     {"w": (values, scales)}).run()
        assert (scales == s.reshape(-1)).all() and (values == data.reshape(-1).view(np.uint8)).all()
        plan = mxfp8.prepare_export({"w": {"data": data, "scale_inv": buf, "swizzled": False}})
        plan.run()
        assert (np.asarray(plan.views()["w"]) == s).all()
        print("done")
    """) % str(__import__("pathlib").Path(__file__).parent)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "done" in result.stdout, (result.stdout[-2000:], result.stderr[-2000:])


class Shapeless:
    """A DLPack producer with no .shape (the protocol does not promise one). The calls that size what they
    allocate read its shape from its capsule instead (_args.dims)."""

    def __init__(self, array):
        self.array = array
        self.dlpack_calls = 0

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.dlpack_calls += 1
        return self.array.__dlpack__(**kwargs)


def _calls_that_size_from_a_shape(wrap):
    data, buf, _ = one_tensor(shape=(100, 48), storage="padded")
    x = np.random.default_rng(3).standard_normal((64, 32)).astype(np.float32)
    packed = np.random.default_rng(4).integers(0, 256, (64, 16), dtype=np.uint8)
    nvfp4_scales = np.full((64, 2), 0x38, np.uint8)
    return [
        lambda: mxfp8.nvfp4_quantize(wrap(x)),
        lambda: mxfp8.nvfp4_quantize_fused([x, wrap(x)])[1],
        lambda: mxfp8.nvfp4.dequantize(wrap(packed), nvfp4_scales, np.float32([1.0]), swizzled=False),
        lambda: mxfp8.export_grouped(wrap(data), buf, num_experts=1, swizzled=False, values_dtype="uint8"),
        lambda: mxfp8.unpack_bucket(*mxfp8.export_bucket({"w": {"data": wrap(data), "scale_inv": buf,
                                                                "swizzled": False}}))["w"],
    ]


def _arrays(result):
    """The NumPy arrays of a call's result (a namedtuple, a list of them, a bucket or an array)."""
    if isinstance(result, np.ndarray):
        return [result]
    if isinstance(result, (tuple, list)):  # Components, NVFP4Quantized, a list of them
        return [a for part in result for a in _arrays(part)]
    return [np.from_dlpack(result)]


@pytest.mark.parametrize("index", range(5), ids=["nvfp4_quantize", "nvfp4_quantize_fused", "nvfp4.dequantize",
                                                "export_grouped", "export_bucket"])
def test_a_producer_without_a_shape_gives_what_its_array_gives(index):
    """Each call read `.shape` to size its outputs: an object with only __dlpack__ and __dlpack_device__
    got an AttributeError, though any DLPack producer is promised to work."""
    made = []

    def shapeless(a):
        made.append(Shapeless(a))
        return made[-1]

    expected = _arrays(_calls_that_size_from_a_shape(lambda a: a)[index]())
    got = _arrays(_calls_that_size_from_a_shape(shapeless)[index]())
    assert made and all(m.dlpack_calls >= 1 for m in made)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def test_a_producer_without_a_shape_or_a_capsule_is_a_type_error_naming_the_argument():
    class Nothing:
        def __dlpack_device__(self):
            return (KDL_CPU, 0)

        def __dlpack__(self, **kwargs):
            raise BufferError("this object exports nothing")

    with pytest.raises(TypeError, match=r"^x\b.*this object exports nothing"):
        mxfp8.nvfp4_quantize(Nothing())


def test_a_shapeless_shard_after_a_torch_shard_gets_torch_outputs():
    """nvfp4_quantize_fused takes its framework from the first shard: a later shard without .shape or
    .device still gets outputs allocated next to the first one."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((64, 32)).astype(np.float32)
    expected = mxfp8.nvfp4_quantize_fused([torch.from_numpy(x), torch.from_numpy(x)])
    got = mxfp8.nvfp4_quantize_fused([torch.from_numpy(x), Shapeless(torch.from_numpy(x))])
    for e, g in zip(expected, got):
        for a, b in zip(e, g):
            assert isinstance(b, torch.Tensor)
            assert torch.equal(a, b)


@pytest.mark.parametrize("shape, ndim, message", [
    (None, 2, r"^x: its DLPack tensor has ndim 2 and no shape array"),
    ((4, -1), None, r"^x: dimension 1 of its DLPack tensor is -1, expected a size of 0 or more"),
    ((), 65, r"^x: its DLPack tensor has ndim 65: expected 0 to 64 dimensions"),
    ((), -1, r"^x: its DLPack tensor has ndim -1: expected 0 to 64 dimensions"),
], ids=["no-shape-array", "negative-dimension", "65-dimensions", "negative-ndim"])
def test_a_shapeless_producer_whose_capsule_lies_is_refused_naming_the_argument(shape, ndim, message):
    """The shape read from a capsule (a producer without .shape) is checked as the library checks a
    tensor before it sizes anything; the capsule is released once."""
    held = np.zeros(16, np.uint8)
    forged = ForgedTensor(held.ctypes.data, shape, ndim=ndim, keep=held)
    producer = Producer(forged)
    producer.shape = None
    with pytest.raises(ValueError, match=message):
        mxfp8.nvfp4_quantize(producer)
    assert forged.deleted == 1


@pytest.mark.parametrize("call, name", [
    (lambda p: mxfp8.swizzle_scales(p), "compact"),
    (lambda p: mxfp8.unswizzle_scales(p, 128, 4), "swizzled"),
    (lambda p: mxfp8.unswizzle_scales(np.zeros(512, np.uint8), 128, 4, p), "out"),
], ids=["swizzle_scales", "unswizzle_scales", "unswizzle_scales-out"])
@pytest.mark.parametrize("legacy", [False, True], ids=["versioned", "legacy"])
def test_a_capsule_without_a_shape_array_is_refused_where_the_binding_reads_its_shape(call, name, legacy):
    """swizzle_scales and unswizzle_scales read a tensor's shape in the extension, before the library checks
    it: a capsule with ndim 2 and no shape array crashed the process there (a NULL read). Every take checks
    ndim and the shape array now; the capsule is released once."""
    held = np.zeros(512, np.uint8)
    forged = ForgedTensor(held.ctypes.data, None, ndim=2, keep=held, version=None if legacy else (1, 3))
    with pytest.raises(ValueError, match=rf"^{name}: its DLPack tensor has ndim 2 and no shape array"):
        call(Producer(forged))
    assert forged.deleted == 1


def test_a_1d_array_is_a_shape_and_a_mapping_is_not():
    """A shape is any sequence of ints, a 1-D NumPy array or torch tensor too; a mapping (a dict, a
    MappingProxyType) has __len__ and __getitem__ as well, but its iteration gives its keys."""
    data, buf, s = one_tensor(storage="compact")
    values, scales = mxfp8.export_components(data, buf, shape=np.array(data.shape), swizzled=False)
    np.testing.assert_array_equal(np.from_dlpack(scales), s)
    torch = pytest.importorskip("torch")
    values, scales = mxfp8.export_components(data, buf, shape=torch.tensor(data.shape), swizzled=False)
    np.testing.assert_array_equal(np.from_dlpack(scales), s)
