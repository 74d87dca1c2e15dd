"""DLPack producers built by hand with ctypes, to hand the binding what no well-behaved framework would:
other major versions, read-only flags, legacy-only capsules, devices that do not exist. The structs are
DLPack's published layout (dlpack.h 1.x), written from the specification."""
import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", VERSIONED_DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", LEGACY_DELETER)]


FLAG_READ_ONLY = 1
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
KDL_UINT, KDL_FLOAT, KDL_BFLOAT = 1, 2, 4

# Prototypes of our own: ctypes.pythonapi.PyCapsule_New is one object per process, whose argtypes
# jax.ffi.pycapsule sets to its own (a destructor CFUNCTYPE, refusing None) when mxfp8.jax registers its targets.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_NAMES = {b"dltensor_versioned": ctypes.c_char_p(b"dltensor_versioned"), b"dltensor": ctypes.c_char_p(b"dltensor"),
          b"something_else": ctypes.c_char_p(b"something_else")}


def capsule_is(capsule, name: bytes) -> bool:
    return bool(_capsule_is_valid(capsule, name))


class ForgedTensor:
    """One managed tensor over `data_ptr` (an int address, or None), kept alive with its shape, strides
    and deleter until the deleter runs; `deleted` counts deleter calls.

    version: (major, minor) of a versioned capsule, or None for a legacy "dltensor" capsule.
    ndim/shape: written as given; shape=None with ndim > 0 writes a NULL shape pointer (a consumer that
    reads the tensor of a foreign major version would crash on it)."""

    def __init__(self, data_ptr, shape, *, dtype=(KDL_UINT, 8, 1), device=(KDL_CPU, 0), strides=None,
                 byte_offset=0, version=(1, 3), flags=0, ndim=None, keep=None):
        self.keep = keep  # the object owning the memory, alive as long as this tensor
        self.shape = None if shape is None else tuple(shape)
        self.deleted = 0
        self.version = version
        self._shape = None if shape is None else (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._strides = None if strides is None else (ctypes.c_int64 * max(len(strides), 1))(*strides)
        t = DLTensor()
        t.data = data_ptr
        t.device = DLDevice(*device)
        t.ndim = len(shape) if ndim is None else ndim
        t.dtype = DLDataType(*dtype)
        t.shape = ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)) if self._shape is not None else None
        t.strides = ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)) if self._strides is not None else None
        t.byte_offset = byte_offset
        if version is None:
            self._deleter = LEGACY_DELETER(self._on_delete)
            self.managed = DLManagedTensor(t, None, self._deleter)
        else:
            self._deleter = VERSIONED_DELETER(self._on_delete)
            self.managed = DLManagedTensorVersioned(DLPackVersion(*version), None, self._deleter, flags, t)

    def _on_delete(self, _address):
        self.deleted += 1

    def capsule(self, name=None):
        """A capsule without a destructor (these tests consume every capsule they make, or count it)."""
        name = name or (b"dltensor" if self.version is None else b"dltensor_versioned")
        return _capsule_new(ctypes.addressof(self.managed), _NAMES[name], None)


class Producer:
    """A DLPack producer handing out `tensor`'s capsule; records the __dlpack__ calls it gets.

    legacy_only: __dlpack__ does not take max_version (a producer older than DLPack 1.0)."""

    def __init__(self, tensor, device=None, legacy_only=False, shape=None, capsule_name=None):
        self.tensor = tensor
        self.device = device or (tensor.managed.dl_tensor.device.device_type, tensor.managed.dl_tensor.device.device_id)
        self.calls = []
        self.legacy_only = legacy_only
        self.capsule_name = capsule_name
        self.shape = shape if shape is not None else tensor.shape  # what the Python API reads (K, rows)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        if self.legacy_only and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.calls.append(dict(stream=stream, **kwargs))
        return self.tensor.capsule(self.capsule_name)


class DeviceOnly:
    """An object that says it lives on `device` and fails the test if anything asks for its capsule."""

    def __init__(self, device, shape=(128, 64)):
        self.device = device
        self.shape = shape
        self.dlpack_calls = 0

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *args, **kwargs):
        self.dlpack_calls += 1
        raise AssertionError("__dlpack__ called on an object that a device check should have refused first")


class Relabelled:
    """A real array that reports another device in __dlpack_device__ only (torch does this for pinned
    memory: kDLCUDAHost from __dlpack_device__, kDLCPU in the capsule)."""

    def __init__(self, array, device):
        self.array, self.device, self.shape = array, device, array.shape

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)


def numpy_tensor(array, **kwargs):
    """A ForgedTensor over a NumPy array's memory (uint8 unless dtype= says otherwise)."""
    return ForgedTensor(array.ctypes.data, array.shape, keep=array, **kwargs)


# ---------------------------------------------------------------------------- the DLPack exchange API ---
class DLPackExchangeAPIHeader(ctypes.Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [("version", DLPackVersion), ("prev_api", ctypes.POINTER(DLPackExchangeAPIHeader))]
SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOCATOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                             SET_ERROR)
FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
TO_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
DLTENSOR_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))
CURRENT_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ALLOCATOR),
        ("managed_tensor_from_py_object_no_sync", FROM_PY),
        ("managed_tensor_to_py_object_no_sync", TO_PY),
        ("dltensor_from_py_object_no_sync", DLTENSOR_FROM_PY),
        ("current_work_stream", CURRENT_STREAM),
    ]


_DL_DTYPES = {"uint8": (KDL_UINT, 8, 1), "uint16": (KDL_UINT, 16, 1), "float32": (KDL_FLOAT, 32, 1),
              "float16": (KDL_FLOAT, 16, 1), "bfloat16": (KDL_BFLOAT, 16, 1)}
_py_incref = ctypes.pythonapi.Py_IncRef
_py_incref.argtypes = [ctypes.py_object]
_py_incref.restype = None


class ExchangeFramework:
    """A tiny array framework over NumPy host memory that publishes the DLPack C exchange API (as PyTorch
    does), every function written in Python through ctypes, and counts each call, __dlpack__ included: a
    test sees which path the binding took.

    version: the API's (major, minor); older: the (major, minor) of an API reachable through prev_api.
    fail: names of functions that fail (allocator: through SetError; the others: -1 without a Python error).
    Results it makes hold FP8 bytes as uint8 (NumPy has no float8)."""

    def __init__(self, version=(1, 3), older=None, fail=()):
        import collections

        import numpy as np

        self.calls = collections.Counter()
        self.fail = set(fail)
        self.live = []  # every tensor handed out, kept until the test ends (their deleters only count)
        framework = self

        class Array:
            def __init__(self, array, read_only=False):
                self.array, self.read_only, self.shape = array, read_only, array.shape

            def __dlpack_device__(self):
                return (KDL_CPU, 0)

            def __dlpack__(self, **kwargs):
                framework.calls["__dlpack__"] += 1
                return self.array.__dlpack__(**kwargs)

        def guarded(name, body):
            def call(*args):
                framework.calls[name] += 1
                if name in framework.fail and name != "allocator":
                    return -1
                try:
                    return body(*args)
                except Exception as e:  # noqa: BLE001 (ctypes would print it and return garbage)
                    framework.calls["exceptions"] += 1
                    framework.last_exception = e
                    return -1
            return call

        def tensor_over(array, flags=0):
            t = ForgedTensor(array.ctypes.data, array.shape, dtype=_DL_DTYPES[array.dtype.name], flags=flags, keep=array)
            self.live.append(t)
            return ctypes.addressof(t.managed)

        def from_py(obj_address, out):
            obj = ctypes.cast(obj_address, ctypes.py_object).value
            out[0] = tensor_over(obj.array, FLAG_READ_ONLY if obj.read_only else 0)
            return 0

        def to_py(managed_address, out):
            m = DLManagedTensorVersioned.from_address(managed_address)
            if m.dl_tensor.dtype.bits == 8:  # float8 and E8M0 as their bytes
                m.dl_tensor.dtype = DLDataType(KDL_UINT, 8, 1)
            elif m.dl_tensor.dtype.code == KDL_BFLOAT:  # bfloat16 as its bits
                m.dl_tensor.dtype = DLDataType(KDL_UINT, 16, 1)
            # NumPy takes the managed tensor over (and calls its deleter when done with it)
            array = np.from_dlpack(_Capsuled(_capsule_new(managed_address, _NAMES[b"dltensor_versioned"], None)))
            result = Array(array)
            _py_incref(result)  # the new reference the caller steals
            out[0] = id(result)
            return 0

        def allocate(prototype, out, error_ctx, set_error):
            if "allocator" in framework.fail:
                set_error(error_ctx, b"MemoryError", b"the exchange framework is out of memory")
                return -1
            p = prototype.contents
            shape = [p.shape[i] for i in range(p.ndim)]
            dtype = (p.dtype.code, p.dtype.bits, p.dtype.lanes)
            array = np.zeros(shape, {8: np.uint8, 16: np.uint16, 32: np.float32}[p.dtype.bits])
            t = ForgedTensor(array.ctypes.data, array.shape, dtype=dtype, keep=array)
            self.live.append(t)
            out[0] = ctypes.addressof(t.managed)
            return 0

        def current_stream(device_type, device_id, out):
            out[0] = None
            return 0

        self._functions = (
            ALLOCATOR(guarded("allocator", allocate)),
            FROM_PY(guarded("from_py_object", from_py)),
            TO_PY(guarded("to_py_object", to_py)),
            CURRENT_STREAM(guarded("current_work_stream", current_stream)),
        )
        self.api = DLPackExchangeAPI()
        self.api.header.version = DLPackVersion(*version)
        self.api.managed_tensor_allocator, self.api.managed_tensor_from_py_object_no_sync, \
            self.api.managed_tensor_to_py_object_no_sync, self.api.current_work_stream = self._functions
        if older is not None:
            self.older = DLPackExchangeAPI()
            self.older.header.version = DLPackVersion(*older)
            self.older.managed_tensor_allocator, self.older.managed_tensor_from_py_object_no_sync, \
                self.older.managed_tensor_to_py_object_no_sync, self.older.current_work_stream = self._functions
            self.api.header.prev_api = ctypes.cast(ctypes.pointer(self.older.header),
                                                   ctypes.POINTER(DLPackExchangeAPIHeader))
        Array.__dlpack_c_exchange_api__ = _capsule_new(ctypes.addressof(self.api), _EXCHANGE_NAME, None)
        self.Array = Array


_EXCHANGE_NAME = ctypes.c_char_p(b"dlpack_exchange_api")


class _Capsuled:
    """Hands one capsule to a consumer's from_dlpack."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (KDL_CPU, 0)
