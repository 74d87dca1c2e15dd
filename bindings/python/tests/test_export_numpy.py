"""The Python API on host memory, with NumPy producers and consumers."""
import ctypes
import gc

import numpy as np
import pytest

import mxfp8
from conftest import decode, make_mxfp8

SHAPES = [(100, 48), (128, 4096), (3, 5, 48), (1, 16), (257, 33), (64, 16), (33, 200)]


def scales_as_numpy(arr):
    return np.from_dlpack(arr)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("storage", ["compact", "padded", "swizzled"])
@pytest.mark.parametrize("fp8_dtype", ["e4m3", "e5m2"])
@pytest.mark.parametrize("direction", ["rowwise", "columnwise"])
def test_export_returns_stored_scales_and_decodes_exactly(shape, storage, fp8_dtype, direction):
    data, buf, s = make_mxfp8(shape, storage, direction, seed=hash((shape, storage, direction)) & 0xFFFF)
    buf_before, data_before = buf.copy(), data.copy()
    values, scales = mxfp8.export_components(
        data, buf, fp8_dtype=fp8_dtype, swizzled=storage == "swizzled", direction=direction, values_dtype="uint8"
    )
    v, sc = np.from_dlpack(values), scales_as_numpy(scales)
    expected_shape = (*shape[:-1], s.shape[1]) if direction == "rowwise" else s.shape
    assert sc.shape == expected_shape and sc.dtype == np.uint8
    assert np.array_equal(sc.reshape(s.shape), s)
    assert v.shape == shape and np.shares_memory(v, data)
    assert scales.is_copy == (storage == "swizzled" or (storage == "padded" and buf.shape[1] != s.shape[1] and s.shape[0] > 1))
    np.testing.assert_array_equal(decode(v, sc.reshape(s.shape), fp8_dtype, direction),
                                  decode(data, s, fp8_dtype, direction))
    assert np.array_equal(buf, buf_before) and np.array_equal(data, data_before)


def test_fp8_values_dtype_and_e8m0_scales():
    data, buf, _ = make_mxfp8((100, 48), "padded")
    values, scales = mxfp8.export_components(data, buf, fp8_dtype="e5m2", scales_dtype="e8m0", swizzled=False)
    assert values.dtype == "float8_e5m2"
    assert scales.dtype == "float8_e8m0fnu"
    assert values.data_ptr == data.ctypes.data
    assert not values.is_copy


def test_strided_view_of_padded_scales_follows_later_writes():
    data, buf, s = make_mxfp8((100, 48), "padded")
    values, scales = mxfp8.export_components(data, buf, contiguous=False, values_dtype="uint8", swizzled=False)
    sc, v = np.from_dlpack(scales), np.from_dlpack(values)
    assert not scales.is_copy and scales.strides == (4, 1)
    buf[57, 1] = 42  # an optimizer step rewrites the source in place
    data[3, 7] ^= 0xFF
    assert sc[57, 1] == 42 and v[3, 7] == data[3, 7]


def test_empty_tensor():
    data, buf, _ = make_mxfp8((0, 64), "padded")
    values, scales = mxfp8.export_components(data, buf, values_dtype="uint8", swizzled=False)
    assert np.from_dlpack(values).shape == (0, 64)
    assert np.from_dlpack(scales).shape == (0, 2)


def test_missing_direction_is_value_error():
    data, buf, _ = make_mxfp8((64, 64), "padded", "columnwise")
    tensor = mxfp8._mxfp8.Tensor(columnwise_data=data, columnwise_scale_inv=buf)
    with pytest.raises(ValueError, match="no rowwise data"):
        tensor.export_components(direction=0)


def test_results_have_tuple_shapes_as_numpy_and_torch_do():
    data, buf, s = make_mxfp8((100, 64), "padded")
    values, scales = mxfp8.export_components(data, buf, values_dtype="uint8", swizzled=False)
    assert (values.shape, scales.shape, values.strides) == ((100, 64), s.shape, (64, 1))


@pytest.mark.parametrize("not_te", [np.zeros((4, 32), np.uint8), None, object()])
def test_export_te_of_something_else_is_a_type_error(not_te):
    with pytest.raises(TypeError, match=r"export_te takes a Transformer Engine MXFP8Tensor .* got "):
        mxfp8.export_te(not_te)


class _TEStorage:
    """The fields TE's MXFP8TensorStorage has, the columnwise ones None (a rowwise-only tensor)."""

    def __init__(self, data, scale_inv):
        self._rowwise_data, self._rowwise_scale_inv = data, scale_inv
        self._columnwise_data = self._columnwise_scale_inv = None
        self._fp8_dtype, self._with_gemm_swizzled_scales = "float8_e4m3fn", False


class _Shapeless:
    """A DLPack producer with no .shape (export_components takes one)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_an_empty_shape_is_refused_not_taken_for_the_datas():
    # The library reads ndim 0 as "no shape given": shape=() exported the data's shape without a word, where
    # convert and the bucket specs refuse it.
    data, buf, _ = make_mxfp8((64, 64), "padded")
    for call in (lambda: mxfp8.export_components(data, buf, swizzled=False, shape=()),
                 lambda: mxfp8.dequantize(data, buf, swizzled=False, shape=[]),
                 lambda: mxfp8.nvfp4.export_components(np.zeros((64, 32), np.uint8), np.zeros((128, 4), np.uint8),
                                                       np.ones(1, np.float32), swizzled=False, shape=())):
        with pytest.raises(ValueError, match=r"^shape is empty: an (MXFP8|NVFP4) tensor needs a last dimension K$"):
            call()


def test_export_te_reads_the_shape_from_the_data_and_a_real_bool():
    # export_te read data.shape itself (AttributeError for a producer without one), and bool() of the
    # swizzle flag, so "False" read as True and the scales as swizzled.
    data, buf, s = make_mxfp8((100, 64), "padded")
    te = _TEStorage(_Shapeless(data), buf)
    assert np.array_equal(np.from_dlpack(mxfp8.export_te(te).scales), s)
    te._with_gemm_swizzled_scales = None  # TE's unset flag: row-major
    assert np.array_equal(np.from_dlpack(mxfp8.export_te(te).scales), s)
    for lie in ("False", 0, 1):
        te._with_gemm_swizzled_scales = lie
        with pytest.raises(TypeError, match=r"^_with_gemm_swizzled_scales must be True or False, got "):
            mxfp8.export_te(te)


def test_export_te_of_a_direction_the_tensor_lacks_is_a_value_error():
    data, buf, s = make_mxfp8((100, 64), "padded")
    te = _TEStorage(data, buf)
    assert np.array_equal(np.from_dlpack(mxfp8.export_te(te).scales), s)
    with pytest.raises(ValueError, match="has no columnwise data"):
        mxfp8.export_te(te, direction="columnwise")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"fp8_dtype": "e3m4"}, ValueError, "fp8_dtype must be one of"),
        ({"direction": "diagonal"}, ValueError, "direction must be one of"),
        ({"values_dtype": "int8"}, ValueError, "values_dtype must be one of"),
        ({"scales_dtype": "float32"}, ValueError, "scales_dtype must be one of"),
        ({"shape": (100, 64)}, ValueError, r"does not match the tensor's shape \(100, 64\)"),
        ({"swizzled": True}, ValueError, "need 128 x 4 = 512 bytes, got 200"),
        ({"stream": 5}, ValueError, "stream is only meaningful for CUDA"),
    ],
)
def test_bad_arguments_raise_with_the_library_message(kwargs, error, message):
    data, _, s = make_mxfp8((100, 48), "compact")
    with pytest.raises(error, match=message):
        mxfp8.export_components(data, np.ascontiguousarray(s), **{"swizzled": False, **kwargs})


def test_bad_inputs():
    data, buf, _ = make_mxfp8((100, 48), "padded")
    with pytest.raises(TypeError, match="expected an object with __dlpack__"):
        mxfp8.export_components([1, 2, 3], buf, swizzled=False)
    with pytest.raises(ValueError, match="dtype float32 does not hold E4M3"):
        mxfp8.export_components(data.astype(np.float32), buf, swizzled=False)
    with pytest.raises(ValueError, match="not row-major contiguous"):
        mxfp8.export_components(np.asfortranarray(data), buf, swizzled=False)
    with pytest.raises(ValueError, match="cannot hold the 100 x 2 scale matrix"):
        mxfp8.export_components(data, buf[:99], swizzled=False)


def test_outputs_outlive_their_inputs():
    data, buf, s = make_mxfp8((257, 33), "swizzled")
    expected = data.copy()
    values, scales = mxfp8.export_components(data, buf, swizzled=True, values_dtype="uint8")
    del data, buf
    gc.collect()
    assert np.array_equal(np.from_dlpack(values), expected)
    assert np.array_equal(np.from_dlpack(scales), s)


def test_dlpack_protocol_rules():
    data, buf, _ = make_mxfp8((100, 48), "swizzled")
    values, scales = mxfp8.export_components(data, buf, swizzled=True)
    assert scales.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError, match="copy=True"):
        scales.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="another device"):
        scales.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="stream must be None"):
        scales.__dlpack__(stream=1)
    # A consumer that predates DLPack 1.0 gets a legacy capsule; a newer one a versioned capsule.
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.restype, is_valid.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    assert is_valid(scales.__dlpack__(), b"dltensor")
    assert is_valid(scales.__dlpack__(max_version=(1, 1)), b"dltensor_versioned")
    # each capsule is independent: consuming several is fine
    a, b = np.from_dlpack(scales), np.from_dlpack(scales)
    assert np.array_equal(a, b)


def resident_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_many_exports_do_not_leak():
    import tracemalloc

    # 1 MiB of swizzled scales: a leaked copy or view per export would add 10 GB over the run.
    data, buf, _ = make_mxfp8((8192, 4096), "swizzled")

    def run(n):
        for _ in range(n):
            values, scales = mxfp8.export_components(data, buf, swizzled=True, values_dtype="uint8")
            np.from_dlpack(scales)
            del values, scales

    tracemalloc.start()
    run(10_000)  # warm-up: caches inside Python and pybind11 settle (about 1 MB, once)
    gc.collect()
    python_before, native_before = tracemalloc.get_traced_memory()[0], resident_bytes()
    run(10_000)
    gc.collect()
    python_growth = tracemalloc.get_traced_memory()[0] - python_before
    native_growth = resident_bytes() - native_before
    tracemalloc.stop()
    assert python_growth < 64 * 1024, f"Python memory grew by {python_growth} bytes over 10,000 exports"
    assert native_growth < 16 << 20, f"resident memory grew by {native_growth} bytes over 10,000 exports"


def test_version_matches_the_library():
    major, minor, patch = (int(x) for x in mxfp8.__version__.split("."))
    assert mxfp8._mxfp8.version == major * 10000 + minor * 100 + patch == mxfp8._mxfp8.header_version
