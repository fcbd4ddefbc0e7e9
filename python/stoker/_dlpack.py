# SPDX-License-Identifier: Apache-2.0
"""DLPack export in pure ctypes: the classic, unversioned ABI (``DLManagedTensor`` in a
PyCapsule named ``"dltensor"``), which numpy >= 1.22 and every PyTorch accept.

Protocol: the consumer takes the capsule, renames it ``"used_dltensor"`` and calls the
managed tensor's deleter when it no longer needs the memory. A capsule destroyed while still
named ``"dltensor"`` (never consumed) calls the deleter itself. The library makes each
managed tensor (stoker_dlpack_export: one foreign call, where building the struct here
takes several) and frees it after its deleter ran; the owner stays in ``_LIVE`` keyed by
the struct's address until then, and the deleter releases one hold on it. The deleter and
destructor the consumer calls are the library's, which run the Python ones below holding
the GIL with any pending exception set aside.

Devices: host batches are exported as ``kDLCPU`` even when the memory is pinned
(page-locked), because numpy accepts only CPU tensors and pinned memory is ordinary host
memory to every CPU consumer; device batches as ``kDLCUDA`` with their device ordinal.
"""
import ctypes

from . import _lib

kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3

kDLInt = 0
kDLUInt = 1
kDLFloat = 2
kDLBfloat = 4
kDLBool = 6


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


class DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),  # void (*)(DLManagedTensor *)
    ]


# DLPack's type code of each of the library's dtypes, by its name; bits from the library.
_CODES = {"uint8": kDLUInt, "int8": kDLInt, "uint16": kDLUInt, "int16": kDLInt,
          "uint32": kDLUInt, "int32": kDLInt, "uint64": kDLUInt, "int64": kDLInt,
          "float16": kDLFloat, "bfloat16": kDLBfloat, "float32": kDLFloat, "float64": kDLFloat,
          "bool": kDLBool}
# stoker_dtype -> (DLPack type code, bits)
DTYPES = {_lib.DTYPE[name]: (code, 8 * _lib.lib.stoker_dtype_size(_lib.DTYPE[name]))
          for name, code in _CODES.items()}

_CAPSULE_NAME = b"dltensor"  # module-level: the capsule keeps a pointer to these bytes

# Private prototypes of the capsule API: ctypes.pythonapi.<name> is one shared object whose
# argtypes any other module may change, so the binding binds its own.
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                                 ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# address of a DLManagedTensor -> its owner; alive until the deleter.
_LIVE = {}

# Py_IncRef, to make the two callbacks below immortal.
_incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", ctypes.pythonapi))


def _callbacks(live, is_valid, get_pointer, name, delete):
    """The managed tensors' deleter and the capsules' destructor. A consumer may call them
    while the interpreter shuts down, after module globals and even builtins were set to
    None, so they touch nothing but what they close over (and the owner's release, written
    likewise: see loader._Core). Nothing may escape them into the consumer's C code; a
    KeyboardInterrupt raised inside (the user's Ctrl-C, its handler run there) is reported
    by returning 1, and the library raises it again once out (stoker_dlpack_guard)."""
    pop = live.pop
    interrupted = KeyboardInterrupt

    def deleter(addr):
        # run by the library's deleter, which frees the struct afterwards
        try:
            owner = pop(addr, None)
            if owner is not None:
                owner.release()
        except interrupted:
            return 1
        except:  # noqa: E722 (at shutdown `Exception` may be None; nothing may escape)
            pass
        return 0

    def destructor(capsule):
        # Called while the capsule is deallocated. Consumed capsules were renamed
        # "used_dltensor" and belong to the consumer; only an unconsumed one owns the tensor,
        # whose own deleter (the library's) is run.
        try:
            if is_valid(capsule, name):
                addr = get_pointer(capsule, name)
                if addr:
                    delete(addr)
        except interrupted:
            return 1
        except:  # noqa: E722
            pass
        return 0

    return deleter, destructor


_deleter, _capsule_destructor = _callbacks(_LIVE, _capsule_is_valid, _capsule_get_pointer,
                                           _CAPSULE_NAME, _lib.lib.stoker_dlpack_delete)

_DELETER_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_DESTRUCTOR_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
_DELETER = _DELETER_T(_deleter)
_DESTRUCTOR = _DESTRUCTOR_T(_capsule_destructor)
# Immortal: an array or tensor may outlive this module (a reference cycle freed at exit,
# after the module's globals were cleared), and its consumer then still calls these C
# thunks. Each keeps its Python function, and so _LIVE and the owners, alive.
_incref(_DELETER)
_incref(_DESTRUCTOR)


class _Guard(ctypes.Structure):
    """stoker_dlpack_guard: the interpreter's entry points and the two callbacks above."""
    _fields_ = [(name, ctypes.c_void_p) for name in
                ("enter", "leave", "save", "restore", "deleter", "destructor", "interrupt")]


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def _set_guard():
    """Gives the library the interpreter's entry points and the callbacks above: its
    managed tensors' deleter and its capsule destructor call them with the interpreter's
    lock held and its pending exception set aside (a consumer frees tensors while an
    exception propagates, a tensor on the stack of a frame the exception leaves, and a
    ctypes callback run then sees that exception pending, which makes the interpreter raise
    SystemError or lose the exception). Returns the capsule destructor's address."""
    api = ctypes.pythonapi
    guard = _Guard(_address(api.PyGILState_Ensure), _address(api.PyGILState_Release),
                   _address(api.PyErr_Fetch), _address(api.PyErr_Restore),
                   _address(_DELETER), _address(_DESTRUCTOR), _address(api.PyErr_SetInterrupt))
    if _lib.lib.stoker_dlpack_set_guard(ctypes.addressof(guard)) != 0:
        raise ImportError("stoker: %s refused the DLPack guard" % _lib.path)
    _incref(guard)  # immortal, as the callbacks: the library keeps its address
    return _address(_lib.lib.stoker_dlpack_capsule_destructor)


_DESTRUCTOR_ADDR = _set_guard()
_export = _lib.lib.stoker_dlpack_export
_c_void_p = ctypes.c_void_p
_byref = ctypes.byref


def live_exports():
    """Number of managed tensors whose deleter has not run yet (for tests)."""
    return len(_LIVE)


def c_shape(shape):
    """`shape` as export() takes it fastest (a ctypes array, made once per tensor)."""
    return (ctypes.c_int64 * max(1, len(shape)))(*shape)


def export(owner, data, shape, dtype, device, cshape=None):
    """A "dltensor" capsule for `data` (an address), C-contiguous `shape` (`cshape`: the
    same as c_shape gives it, where the caller keeps one) of stoker dtype `dtype`, on CUDA
    device `device` (-1: host). The library makes the managed tensor (stoker_dlpack_export).
    `owner.acquire()` is called now and `owner.release()` when the consumer (or the
    unconsumed capsule) lets go."""
    addr = _c_void_p()
    rc = _export(data, len(shape), cshape if cshape is not None else c_shape(shape), dtype,
                 device, _byref(addr))
    if rc != 0:
        if dtype not in DTYPES:
            raise TypeError("stoker dtype %d has no DLPack equivalent" % dtype)
        raise BufferError("stoker_dlpack_export failed: %s" % _lib.strerror(rc))
    addr = addr.value
    try:
        owner.acquire()
    except BaseException:
        _lib.lib.stoker_dlpack_delete(addr)  # nothing owned yet: the deleter finds no owner
        raise
    _LIVE[addr] = owner
    try:
        return _capsule_new(addr, _CAPSULE_NAME, _DESTRUCTOR_ADDR)
    except BaseException:
        _lib.lib.stoker_dlpack_delete(addr)
        raise
