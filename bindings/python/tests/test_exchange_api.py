"""The DLPack C exchange API path (issue 15), on host memory with a framework written for the test: objects
of a framework that publishes the API are taken, allocated and returned through its C functions (no
__dlpack__ call); everything else keeps the __dlpack__ path. Each test proves which path was taken by the
framework's own call counts and the extension's."""
import numpy as np
import pytest

import mxfp8
from conftest import POISON, decode, make_mxfp8, swizzle_reference
from dlpack_forge import ExchangeFramework


def taken():
    return dict(mxfp8._mxfp8.taken_counts())


def delta(before):
    after = taken()
    return {k: after[k] - before[k] for k in after}


@pytest.fixture
def fw():
    return ExchangeFramework()


def test_an_export_goes_through_the_exchange_api(fw):
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=1)
    before = taken()
    values, scales = mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    assert delta(before) == {"exchange_api": 2, "dlpack": 0}
    assert isinstance(values, fw.Array) and isinstance(scales, fw.Array)  # the framework's own results
    assert fw.calls["__dlpack__"] == 0
    assert fw.calls["from_py_object"] == 2 and fw.calls["to_py_object"] == 2
    assert fw.calls["allocator"] == 1  # the unswizzled copy, from the framework's allocator
    assert fw.calls["current_work_stream"] == 0  # host memory: no stream to ask for
    assert fw.calls["exceptions"] == 0
    assert np.array_equal(values.array, data) and np.shares_memory(values.array, data)  # still a view
    assert np.array_equal(scales.array, s)


def test_numpy_keeps_the_dlpack_path(fw):
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=2)
    before = taken()
    values, scales = mxfp8.export_components(data, buf, swizzled=True)
    assert delta(before) == {"exchange_api": 0, "dlpack": 2}
    assert isinstance(scales, mxfp8.Array)
    assert np.array_equal(np.from_dlpack(scales), s)


def test_mixed_frameworks_take_each_object_its_own_way(fw):
    data, buf, s = make_mxfp8((100, 64), "padded", seed=3)
    before = taken()
    values, scales = mxfp8.export_components(fw.Array(data), buf, swizzled=False)  # the first decides the mode
    assert delta(before) == {"exchange_api": 1, "dlpack": 1}
    assert np.array_equal(scales.array, s)
    before = taken()
    values, scales = mxfp8.export_components(data, fw.Array(buf), swizzled=False)  # NumPy first: __dlpack__ for both
    assert delta(before) == {"exchange_api": 0, "dlpack": 2}
    assert fw.calls["__dlpack__"] == 1
    assert np.array_equal(np.from_dlpack(scales), s)


def test_quantize_and_dequantize_through_the_exchange_api(fw):
    x = np.random.default_rng(4).standard_normal((64, 96)).astype(np.float32)
    expected = mxfp8.quantize(x, rowwise=True, columnwise=True, scales="swizzled", values_dtype="uint8")
    before = taken()
    q = mxfp8.quantize(fw.Array(x), rowwise=True, columnwise=True, scales="swizzled")
    assert delta(before) == {"exchange_api": 1, "dlpack": 0}
    assert fw.calls["allocator"] == 4 and fw.calls["to_py_object"] == 4
    for mine, reference in zip(q, expected):
        assert isinstance(mine, fw.Array)
        assert np.array_equal(mine.array, np.from_dlpack(reference))
    out = fw.Array(np.full((64, 96), np.nan, np.float32))
    before = taken()
    y = mxfp8.dequantize(q.rowwise_data, q.rowwise_scale_inv, swizzled=True, out=out)
    assert y is out and delta(before) == {"exchange_api": 3, "dlpack": 0}
    s = mxfp8.export_components(np.from_dlpack(expected.rowwise_data), np.from_dlpack(expected.rowwise_scale_inv),
                                swizzled=True).scales
    np.testing.assert_array_equal(out.array, decode(q.rowwise_data.array, np.from_dlpack(s), "e4m3"))


def test_a_read_only_output_is_refused_through_the_exchange_api_too(fw):
    data, buf, _ = make_mxfp8((64, 64), "compact", seed=5)
    target = np.full((64, 64), np.nan, np.float32)
    with pytest.raises(ValueError, match="out is read-only"):
        mxfp8.dequantize(fw.Array(data), fw.Array(buf), out=fw.Array(target, read_only=True), swizzled=False)
    assert np.isnan(target).all()


def test_buckets_swizzles_and_experts_through_the_exchange_api(fw):
    data, buf, s = make_mxfp8((300, 64), "swizzled", seed=6)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": fw.Array(data), "scale_inv": fw.Array(buf), "swizzled": True}})
    parts = mxfp8.unpack_bucket(bucket, manifest)  # no torch: a NumPy bucket, taken through __dlpack__
    assert np.array_equal(parts["w"].values, data) and np.array_equal(parts["w"].scales, s)
    before = taken()
    swz = mxfp8.swizzle_scales(fw.Array(s))  # its output from the framework's allocator
    assert delta(before) == {"exchange_api": 1, "dlpack": 0}
    assert isinstance(swz, fw.Array) and np.array_equal(swz.array, swizzle_reference(s))
    before = taken()
    swz = mxfp8.swizzle_scales(fw.Array(s), np.full(384 * 4, POISON, np.uint8))  # a NumPy out: __dlpack__
    assert delta(before) == {"exchange_api": 1, "dlpack": 1}
    assert np.array_equal(swz, swizzle_reference(s))
    out = fw.Array(np.full((300, 2), POISON, np.uint8))
    mxfp8.unswizzle_scales(fw.Array(swizzle_reference(s)), 300, 2, out)
    assert np.array_equal(out.array, s)
    flat = np.zeros((4 * 128, 64), np.uint8)
    flat[:] = np.random.default_rng(7).integers(0, 256, flat.shape, dtype=np.uint8)
    scales = np.random.default_rng(8).integers(1, 255, (4, 128, 4), dtype=np.uint8)
    values, stacked = mxfp8.export_grouped(fw.Array(flat), fw.Array(scales.reshape(-1)), num_experts=4, swizzled=False)
    assert isinstance(values, fw.Array) and values.array.shape == (4, 128, 64)
    assert np.array_equal(stacked.array, scales[:, :, :2])
    experts = mxfp8.export_grouped(fw.Array(flat), fw.Array(scales.reshape(-1)), num_experts=4, stacked=False, swizzled=False)
    assert all(isinstance(v, fw.Array) for v, _ in experts)
    assert np.array_equal(experts[3].scales.array, scales[3, :, :2])


def test_an_api_of_another_major_version_is_not_used():
    fw = ExchangeFramework(version=(2, 0))
    data, buf, s = make_mxfp8((64, 64), "swizzled", seed=9)
    before = taken()
    _, scales = mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    assert delta(before) == {"exchange_api": 0, "dlpack": 2}
    assert fw.calls["__dlpack__"] == 2 and fw.calls["from_py_object"] == 0
    assert np.array_equal(np.from_dlpack(scales), s)


def test_an_older_api_in_the_chain_is_used():
    fw = ExchangeFramework(version=(2, 0), older=(1, 2))
    data, buf, s = make_mxfp8((64, 64), "swizzled", seed=10)
    before = taken()
    _, scales = mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    assert delta(before) == {"exchange_api": 2, "dlpack": 0}
    assert np.array_equal(scales.array, s)


def test_failures_of_the_framework_are_reported():
    data, buf, _ = make_mxfp8((64, 64), "swizzled", seed=11)
    fw = ExchangeFramework(fail={"allocator"})
    with pytest.raises(MemoryError, match="the exchange framework is out of memory"):
        mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    fw = ExchangeFramework(fail={"from_py_object"})
    with pytest.raises(TypeError, match="data: the framework's DLPack exchange API failed"):
        mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    fw = ExchangeFramework(fail={"to_py_object"})
    with pytest.raises(TypeError, match="managed_tensor_to_py_object_no_sync"):
        mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    fw = ExchangeFramework()
    tensor_capsules = len(fw.live)
    with pytest.raises(ValueError, match="scale_inv"):
        mxfp8.export_components(fw.Array(data), fw.Array(buf[:10]), swizzled=True)
    import gc

    gc.collect()
    assert all(t.deleted == 1 for t in fw.live[tensor_capsules:])  # what was taken is given back


# ------------------------------------------------------------- PyTorch on the GPU (bench/device/gpu_check.sh) ---
def torch_on_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or not mxfp8._mxfp8.with_cuda:
        pytest.skip("needs a CUDA device and a CUDA build of mxfp8")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} publishes no DLPack exchange API")
    return torch


def test_torch_takes_the_exchange_api_and_other_frameworks_dlpack():
    torch = torch_on_cuda()
    assert mxfp8._mxfp8.has_exchange_api(torch.empty(1))
    data, buf, s = make_mxfp8((300, 640), "swizzled", seed=20)
    d, b = torch.from_numpy(data).cuda(), torch.from_numpy(buf).cuda()
    expected = torch.from_numpy(s)
    before = taken()
    values, scales = mxfp8.export_components(d, b, swizzled=True)
    assert delta(before) == {"exchange_api": 2, "dlpack": 0}
    assert isinstance(scales, torch.Tensor) and scales.is_cuda and values.dtype == torch.float8_e4m3fn
    assert values.data_ptr() == d.data_ptr() and torch.equal(scales.cpu(), expected)
    # on a side stream made current, the framework's current stream is that one
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        before = taken()
        _, scales = mxfp8.export_components(d, b, swizzled=True)
        assert delta(before) == {"exchange_api": 2, "dlpack": 0}
        result = scales.cpu()
    assert torch.equal(result, expected)
    # an explicit stream keeps __dlpack__, which orders that stream after the producer's
    before = taken()
    _, scales = mxfp8.export_components(d, b, swizzled=True, stream=side)
    assert delta(before) == {"exchange_api": 0, "dlpack": 3}  # the two inputs and the Python allocator's result
    torch.cuda.current_stream().wait_stream(side)
    assert torch.equal(scales.cpu(), expected)
    # quantize, dequantize, buckets, swizzles, experts: torch in, torch out, no __dlpack__
    x = torch.randn(256, 512, device="cuda")
    before = taken()
    q = mxfp8.quantize(x, scales="swizzled")
    y = mxfp8.dequantize(q.rowwise_data, q.rowwise_scale_inv, swizzled=True)
    bucket, manifest = mxfp8.export_bucket({"w": {"data": d, "scale_inv": b, "swizzled": True}})
    swz = mxfp8.swizzle_scales(scales)
    assert delta(before) == {"exchange_api": 1 + 2 + 3 + 1, "dlpack": 0}  # x; data, scales; 2 + bucket; scales
    reference = mxfp8.quantize(x.cpu(), scales="swizzled")
    assert torch.equal(q.rowwise_data.view(torch.uint8).cpu(), reference.rowwise_data.view(torch.uint8))
    assert torch.equal(y.cpu(), mxfp8.dequantize(reference.rowwise_data, reference.rowwise_scale_inv, swizzled=True))
    assert torch.equal(mxfp8.unpack_bucket(bucket, manifest)["w"].scales.cpu(), expected)
    assert torch.equal(swz.cpu(), torch.from_numpy(swizzle_reference(s)))
    # CuPy (no exchange API) keeps __dlpack__
    cupy = pytest.importorskip("cupy")
    before = taken()
    _, scales = mxfp8.export_components(cupy.asarray(data), cupy.asarray(buf), swizzled=True)
    assert delta(before) == {"exchange_api": 0, "dlpack": 2}
    torch.cuda.synchronize()
    assert np.array_equal(cupy.asnumpy(cupy.from_dlpack(scales)), s)


# -------------------------------------------------------------- export_components done by the extension ---
def test_export_components_runs_in_the_extension_alone(fw):
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=30)
    before = mxfp8._mxfp8.fast_exports()
    values, scales = mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True, shape=(257, 96))
    _, col_scales = mxfp8.export_components(*map(fw.Array, make_mxfp8((64, 96), "padded", "columnwise", seed=31)[:2]),
                                            direction="columnwise", values_dtype="uint8", scales_dtype="e8m0", swizzled=False)
    assert mxfp8._mxfp8.fast_exports() - before == 2
    assert isinstance(values, fw.Array) and np.array_equal(scales.array, s)
    assert fw.calls["__dlpack__"] == 0
    # NumPy, a NumPy scale_inv, or a shape Python code must read: the same entry, but not a plain call
    before = mxfp8._mxfp8.fast_exports()
    mxfp8.export_components(data, buf, swizzled=True)
    mxfp8.export_components(fw.Array(data), buf, swizzled=True)
    mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True, shape=np.array([257, 96]))
    assert mxfp8._mxfp8.fast_exports() == before


def test_the_fast_path_returns_the_components_itself(fw):
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=34)
    before = mxfp8._mxfp8.fast_exports()
    result = mxfp8.export_components(fw.Array(data), fw.Array(buf), swizzled=True)
    assert mxfp8._mxfp8.fast_exports() - before == 1
    assert type(result) is mxfp8.Components  # built by the extension, not a plain tuple
    assert result.values is result[0] and result.scales is result[1]
    assert np.array_equal(result.scales.array, s) and np.shares_memory(result.values.array, data)


def test_the_entry_checks_its_arguments_and_takes_every_other_framework_itself(fw):
    # One entry for every call (issue 33): no NotImplemented; other frameworks go through __dlpack__ there.
    entry = mxfp8._mxfp8.export_components
    with pytest.raises(TypeError, match="expected 13 positional arguments, got 2"):
        entry(1, 2)
    with pytest.raises(TypeError, match="a tuple subclass without a __dict__"):
        mxfp8._mxfp8.set_result_types(dict)

    class WithDict(tuple):
        pass

    with pytest.raises(TypeError, match="a tuple subclass without a __dict__"):
        mxfp8._mxfp8.set_result_types(WithDict)
    data, buf, s = make_mxfp8((100, 48), "padded", seed=35)
    args = (None, "e4m3", False, "rowwise", "fp8", "uint8", True, "1x32", None, None, None)
    before, counts = mxfp8._mxfp8.fast_exports(), taken()
    numpy_result = entry(data, buf, *args)  # NumPy: __dlpack__, in the same entry
    assert type(numpy_result) is mxfp8.Components and np.array_equal(np.from_dlpack(numpy_result.scales), s)
    assert delta(counts) == {"exchange_api": 0, "dlpack": 2}
    counts = taken()
    mixed = entry(fw.Array(data), buf, *args)  # the framework's data, NumPy scales
    assert type(mixed) is mxfp8.Components and np.array_equal(np.from_dlpack(mixed.scales), s)
    assert delta(counts) == {"exchange_api": 1, "dlpack": 1}
    assert mxfp8._mxfp8.fast_exports() == before  # neither call was plain
    # a failure inside the entry is the exception the library's status maps to, with its message
    with pytest.raises(ValueError, match=r"does not match the tensor's shape \(100, 64\)"):
        entry(fw.Array(data), fw.Array(buf), (100, 64), *args[1:])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"swizzled": "False"}, TypeError, r"swizzled must be True or False, got 'False' \(str\)"),
        ({"contiguous": 1}, TypeError, "contiguous must be True or False"),
        ({"fp8_dtype": "e3m4"}, ValueError, r"fp8_dtype must be one of \['e4m3', 'e5m2'\], got 'e3m4'"),
        ({"direction": "diagonal"}, ValueError, "direction must be one of"),
        ({"values_dtype": b"fp8"}, ValueError, "values_dtype must be one of"),
        ({"block": "16x16"}, ValueError, "block must be one of"),
        ({"shape": (2**63, 48)}, ValueError, r"shape\[0\] is 9223372036854775808"),
        ({"shape": (100, 64)}, ValueError, r"does not match the tensor's shape \(100, 64\)"),
        ({"stream": 5}, ValueError, "stream is only meaningful for CUDA"),
    ],
)
def test_the_extension_refuses_every_bad_argument_in_the_python_layers_words(fw, kwargs, error, message):
    data, buf, _ = make_mxfp8((100, 48), "padded", seed=32)
    before = mxfp8._mxfp8.fast_exports()
    with pytest.raises(error, match=message):
        mxfp8.export_components(fw.Array(data), fw.Array(buf), **{"swizzled": False, **kwargs})
    assert mxfp8._mxfp8.fast_exports() == before


@pytest.mark.parametrize("wrap", ["exchange", "numpy"])
def test_the_entry_takes_every_argument_form_the_python_layer_took(fw, wrap):
    # NumPy's bools and ints, a str subclass, a shape given as an array: accepted as before (issue 33 moved
    # their reading into the extension); such a call is not plain, whatever the framework.
    class Name(str):
        pass

    w = fw.Array if wrap == "exchange" else (lambda a: a)
    data, buf, s = make_mxfp8((100, 48), "swizzled", seed=36)
    before = mxfp8._mxfp8.fast_exports()
    values, scales = mxfp8.export_components(w(data), w(buf), swizzled=np.bool_(True), contiguous=np.True_,
                                             shape=np.array([100, 48]), fp8_dtype=Name("e4m3"))
    assert np.array_equal(np.from_dlpack(scales) if wrap == "numpy" else scales.array, s)
    compact = mxfp8.unswizzle_scales(w(swizzle_reference(s)), np.int64(100), np.int32(2))
    # the framework's own array, as a plain call gives (the Python layer used to make a NumPy one here)
    assert isinstance(compact, np.ndarray if wrap == "numpy" else fw.Array)
    assert np.array_equal(compact if wrap == "numpy" else compact.array, s)
    q = mxfp8.quantize(w(np.ones((4, 64), np.float32)), rowwise=np.bool_(False), columnwise=np.True_)
    assert q.rowwise_data is None and q.columnwise_data is not None
    assert mxfp8._mxfp8.fast_exports() == before


def test_mixed_devices_are_refused_before_any_dlpack_call(fw):
    from dlpack_forge import DeviceOnly

    data, _, _ = make_mxfp8((128, 64), "padded", seed=33)
    scales = DeviceOnly((2, 0))
    with pytest.raises(ValueError, match="scale_inv is on cuda:0 but data is on cpu:0"):
        mxfp8.export_components(fw.Array(data), scales, swizzled=False)
    assert scales.dlpack_calls == 0


def test_quantize_dequantize_and_swizzles_run_in_the_extension_alone(fw):
    x = np.random.default_rng(40).standard_normal((96, 64)).astype(np.float32)
    before = mxfp8._mxfp8.fast_exports()
    q = mxfp8.quantize(fw.Array(x), scales="swizzled", values_dtype="uint8")
    y = mxfp8.dequantize(q.rowwise_data, q.rowwise_scale_inv, swizzled=True)
    compact = mxfp8.unswizzle_scales(q.rowwise_scale_inv, 96, 2)
    again = mxfp8.swizzle_scales(compact)
    assert mxfp8._mxfp8.fast_exports() - before == 4
    assert all(isinstance(r, fw.Array) for r in (q.rowwise_data, q.rowwise_scale_inv, y, compact, again))
    assert q.columnwise_data is None and q.columnwise_scale_inv is None
    reference = mxfp8.quantize(x, scales="swizzled", values_dtype="uint8")
    assert np.array_equal(q.rowwise_data.array, np.from_dlpack(reference.rowwise_data))
    np.testing.assert_array_equal(y.array, mxfp8.dequantize(np.from_dlpack(reference.rowwise_data),
                                                            np.from_dlpack(reference.rowwise_scale_inv), swizzled=True))
    # the swizzle's padding is zero, the reference's too: both equal the layout of the compact scales
    assert np.array_equal(again.array.reshape(-1), swizzle_reference(compact.array))
    out = fw.Array(np.full((96, 64), np.nan, np.float32))
    assert mxfp8.dequantize(q.rowwise_data, q.rowwise_scale_inv, swizzled=True, out=out) is out
    np.testing.assert_array_equal(out.array, y.array)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda a: mxfp8.quantize(a.x, rowwise=False, columnwise=False), ValueError,
         "rowwise and columnwise are both False"),
        (lambda a: mxfp8.quantize(a.x, rowwise="yes"), TypeError, "rowwise must be True or False"),
        (lambda a: mxfp8.quantize(a.x, rounding="nearest"), ValueError, "rounding must be one of"),
        (lambda a: mxfp8.quantize(a.x, scales="tiled"), ValueError, "scales must be one of"),
        (lambda a: mxfp8.dequantize(a.data, a.buf, dtype="float16", swizzled=False), ValueError, "dtype must be one of"),
        (lambda a: mxfp8.dequantize(a.data, a.buf, swizzled="no"), TypeError, "swizzled must be True or False"),
        (lambda a: mxfp8.dequantize(a.data, a.buf, shape=(2**64,), swizzled=False), ValueError, r"shape\[0\] is 18446744073709551616"),
        (lambda a: mxfp8.unswizzle_scales(a.swizzled, -1, 4), ValueError, "rows is -1, expected 0 to"),
        (lambda a: mxfp8.unswizzle_scales(a.swizzled, 128, True), TypeError, "cols must be an int"),
        (lambda a: mxfp8.swizzle_scales(a.zero_d), ValueError, "compact is 0-dimensional"),
    ],
)
def test_the_extension_refuses_bad_arguments_in_the_python_layers_words_everywhere(fw, call, error, message):
    import types

    data, buf, _ = make_mxfp8((128, 64), "compact", seed=41)
    args = types.SimpleNamespace(x=fw.Array(np.ones((4, 64), np.float32)), data=fw.Array(data), buf=fw.Array(buf),
                                 swizzled=fw.Array(np.zeros(512, np.uint8)), zero_d=fw.Array(np.zeros((), np.uint8)))
    before = mxfp8._mxfp8.fast_exports()
    with pytest.raises(error, match=message):
        call(args)
    assert mxfp8._mxfp8.fast_exports() == before


# ------------------------------------------------------------------ the receiver's import (issue 33) ---
IMPORT_SHAPES = [((100, 48), "swizzled"), ((257, 33), "padded"), ((3, 5, 64), "compact"), ((31, 1000), "swizzled")]


def import_call(wrap, direction="rowwise", seed=50):
    """import_tensors' sources and poisoned parameters ('cutlass_128x4' and 'compact' in turn, the layout
    given per parameter or by the call), every buffer through `wrap`, and the bytes each parameter must
    end with (the scales from conftest's permute-form swizzle)."""
    tensors, params, expected = {}, {}, {}
    for i, (shape, storage) in enumerate(IMPORT_SHAPES):
        data, buf, s = make_mxfp8(shape, storage, direction=direction, seed=seed + i)
        name = f"layer{i}.weight"
        tensors[name] = {"data": wrap(data), "scale_inv": wrap(buf), "swizzled": storage == "swizzled"}
        layout = "cutlass_128x4" if i % 2 else "compact"
        values = np.full(data.shape, POISON, np.uint8)
        scales = np.full(mxfp8.scales_shape(data.shape, layout, direction), POISON, np.uint8)
        params[name] = (wrap(values), wrap(scales), layout) if i != 2 else (wrap(values), wrap(scales))
        scale_bytes = s if layout == "compact" else swizzle_reference(s if direction == "rowwise" else s.T.copy())
        expected[name] = (values, scales, data, scale_bytes)
    return tensors, params, expected


def check_import(expected):
    for name, (values, scales, data, scale_bytes) in expected.items():
        np.testing.assert_array_equal(values, data, err_msg=name)
        np.testing.assert_array_equal(scales.reshape(-1), scale_bytes.reshape(-1), err_msg=name)


def test_a_prepared_import_holds_its_destinations_until_it_goes(fw):
    # The library's plan writes through the destinations' addresses: the plan, not the caller's params
    # dict, keeps them taken (the framework's storage alive) for as long as it lives. shards={} (every
    # tensor whole) sends the same call down the Python layer's reading.
    for shards in (None, {}):
        tensors, params, expected = import_call(fw.Array, seed=60)
        first, n = len(fw.live), len(tensors)
        plan = mxfp8.prepare_import_tensors(tensors, params, shards=shards)
        destinations = fw.live[first + 2 * n:first + 4 * n]  # taken after the 2n sources
        assert len(destinations) == 2 * n and not any(t.deleted for t in destinations), shards
        params.clear()
        plan.run()
        check_import(expected)
        del plan
        assert all(t.deleted == 1 for t in destinations), shards


def test_one_buffer_path_for_the_python_layers_reading_too(fw):
    # A NumPy parameter among the framework's: the Python layer reads the call, and the extension still
    # takes every one of the framework's buffers through its exchange API (no __dlpack__ but NumPy's).
    tensors, params, expected = import_call(fw.Array, seed=70)
    values, scales, layout = params["layer1.weight"]
    params["layer1.weight"] = (values, expected["layer1.weight"][1], layout)
    before, counts = mxfp8._mxfp8.fast_exports(), taken()
    mxfp8.import_tensors(tensors, params)
    assert mxfp8._mxfp8.fast_exports() == before
    assert delta(counts) == {"exchange_api": 4 * len(tensors) - 1, "dlpack": 1}
    assert fw.calls["__dlpack__"] == 0
    check_import(expected)
    # a bucket and its parameters alike
    bucket, manifest = mxfp8.export_bucket({n: {k: (v.array if k in ("data", "scale_inv") else v) for k, v in t.items()}
                                            for n, t in tensors.items()})
    _, params, expected = import_call(fw.Array, seed=70)
    counts = taken()
    mxfp8.import_bucket(fw.Array(bucket), manifest, params)
    assert delta(counts) == {"exchange_api": 1 + 2 * len(tensors), "dlpack": 0}
    check_import(expected)


@pytest.mark.parametrize("framework", ["exchange", "numpy"])
def test_a_source_the_library_refuses_is_named(fw, framework):
    # One bad tensor among thousands: the library's message names the field, the binding which tensor.
    wrap = fw.Array if framework == "exchange" else (lambda a: a)
    tensors, params, expected = import_call(wrap, seed=100)
    tensors["layer1.weight"]["scale_inv"] = wrap(np.zeros((64, 2), np.uint8))
    for call in (mxfp8.import_tensors, mxfp8.prepare_import_tensors):
        with pytest.raises(ValueError, match=r"^tensors\['layer1.weight'\]: rowwise_scale_inv: a 64 x 2 buffer"):
            call(tensors, params)
    assert all((v == POISON).all() and (s == POISON).all() for v, s, _, _ in expected.values())


def test_convert_takes_the_framework_buffers_through_the_exchange_api(fw):
    data, buf, s = make_mxfp8((257, 96), "swizzled", seed=120)
    out = fw.Array(np.full(384 * 4, POISON, np.uint8))
    values = fw.Array(np.full(data.shape, POISON, np.uint8))
    counts = taken()
    mxfp8.convert(fw.Array(data), fw.Array(buf), "cutlass_128x4", swizzled=True, values=values, out=out)
    assert delta(counts) == {"exchange_api": 4, "dlpack": 0}
    assert fw.calls["__dlpack__"] == 0
    assert np.array_equal(values.array, data) and np.array_equal(out.array, swizzle_reference(s).reshape(-1))


def test_convert_allocates_its_outputs_in_the_framework(fw):
    """convert is one call of the extension (issue 33): its new outputs come from the inputs' framework's
    allocator, the scales shaped as the engine's parameter (DeepGEMM's strided int32 view), no Python code."""
    data, buf, s = make_mxfp8((256, 96), "padded", seed=121)
    before, counts = mxfp8._mxfp8.fast_exports(), taken()
    got = mxfp8.convert(fw.Array(data), fw.Array(buf), "deepgemm", swizzled=False, values=True)
    assert mxfp8._mxfp8.fast_exports() - before == 1
    assert delta(counts) == {"exchange_api": 2, "dlpack": 0}
    assert type(got) is mxfp8.Converted
    assert isinstance(got.values, fw.Array) and isinstance(got.scales, fw.Array)
    assert fw.calls["allocator"] == 2 and fw.calls["__dlpack__"] == 0
    scales = got.scales.array
    assert scales.shape == (256, 1) and scales.dtype == np.int32 and scales.strides == (4, 4 * 256)
    np.testing.assert_array_equal(scales, mxfp8.convert(data, buf, "deepgemm", swizzled=False).scales)
    np.testing.assert_array_equal(got.values.array, data)
