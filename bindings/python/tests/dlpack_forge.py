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

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
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
        return _capsule_new(ctypes.addressof(self.managed), _NAMES[name].value, None)


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
