"""Loading libstoker and declaring, with argtypes and restype, every C function the binding
calls. Nothing here is public API; see stoker/__init__.py.

The shared library is found, in this order:

1. the path in the environment variable ``STOKER_LIBRARY``;
2. ``libstoker.so`` (or ``libstoker.so.0``) next to this package (a wheel may ship it);
3. the system loader's search path (``ctypes.util.find_library("stoker")``,
   ``libstoker.so.0``), e.g. after ``cmake --install``.
"""
import ctypes
import ctypes.util
import os

# The C API major version this binding speaks (STOKER_VERSION_MAJOR).
EXPECTED_MAJOR = 0

# ---- constants mirrored from include/stoker.h ----
STOKER_OK = 0
STOKER_END = 1
E_INVALID = -10001
E_FORMAT = -10002
E_CORRUPT = -10003
E_LIMIT = -10004
E_CUDA = -10005
E_UNSUPPORTED = -10006
E_STATE = -10007
E_EXISTS = -10008
E_CANCELED = -10009
E_EMPTY = -10010

CODE_NAMES = {
    E_INVALID: "STOKER_E_INVALID",
    E_FORMAT: "STOKER_E_FORMAT",
    E_CORRUPT: "STOKER_E_CORRUPT",
    E_LIMIT: "STOKER_E_LIMIT",
    E_CUDA: "STOKER_E_CUDA",
    E_UNSUPPORTED: "STOKER_E_UNSUPPORTED",
    E_STATE: "STOKER_E_STATE",
    E_EXISTS: "STOKER_E_EXISTS",
    E_CANCELED: "STOKER_E_CANCELED",
    E_EMPTY: "STOKER_E_EMPTY",
}

CAP_IO_URING = 1
CAP_CUDA_BUILD = 2
CAP_CUDA_DEVICES = 3
CAP_SIMD = 4
CAP_HDF5 = 5
CAP_CRC32C_HW = 6

OPT_SHARD_SIZE = 1
OPT_ALIGN = 2
OPT_OVERWRITE = 3
OPT_FSYNC = 4
OPT_MAX_RECORD_SIZE = 20
OPT_MAX_RECORDS = 21
OPT_MAX_PIXELS = 22
OPT_MAX_SHARDS = 23
OPT_BATCH_SIZE = 40
OPT_SHUFFLE = 41
OPT_SEED = 42
OPT_DROP_LAST = 43
OPT_RANK = 44
OPT_WORLD_SIZE = 45
OPT_DIST_ENV = 46
OPT_EPOCH = 47
OPT_ORDER = 48
OPT_THREADS = 60
OPT_DEPTH = 61
OPT_BACKEND = 62
OPT_DIRECT_IO = 63
OPT_READ_AHEAD = 64
OPT_ON_CORRUPT = 65
OPT_SIMD = 66
OPT_DEVICE = 67
OPT_DEVICE_BUFFERS = 68
OPT_GPU_NORMALIZE = 69
OPT_TRANSFORM = 80
OPT_SIZE = 81
OPT_RESIZE = 82
OPT_DTYPE = 83
OPT_LAYOUT = 84
OPT_DCT = 85
OPT_ANTIALIAS = 86
OPT_RESAMPLER = 87
OPT_DCT_SCALE = 88
OPT_MEAN_R = 90
OPT_MEAN_G = 91
OPT_MEAN_B = 92
OPT_STD_R = 93
OPT_STD_G = 94
OPT_STD_B = 95
OPT_H5_IMAGES = 120
OPT_H5_LABELS = 121

BACKENDS = {"auto": 0, "io_uring": 1, "pread": 2}
ON_CORRUPT = {"error": 1, "skip": 2}
TRANSFORMS = {"none": 1, "train": 2, "eval": 3, "resize": 4}
DCTS = {"islow": 1, "ifast": 2}
ANTIALIAS = {"always": 1, "over2x": 2}
RESAMPLERS = {"fast": 1, "pillow": 2}
DCT_SCALES = {"never": 1, "train": 2, "always": 3}
LAYOUTS = {"nchw": 1, "nhwc": 2}
FIELD_KINDS = {"bytes": 1, "jpeg": 2, "raw": 3}
FIELD_KIND_NAMES = {v: k for k, v in FIELD_KINDS.items()}

DTYPES = {
    "uint8": 1, "int8": 2, "uint16": 3, "int16": 4, "uint32": 5, "int32": 6,
    "uint64": 7, "int64": 8, "float16": 9, "bfloat16": 10, "float32": 11, "float64": 12,
    "bool": 13,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
DTYPE_BFLOAT16 = 10

MAX_DIMS = 8
STATE_SIZE = 64

c_int64_p = ctypes.POINTER(ctypes.c_int64)


class BatchView(ctypes.Structure):
    """stoker_batch_view (size-prefixed; fields only ever added at the end)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("count", ctypes.c_int64),
        ("shape", ctypes.c_int64 * (MAX_DIMS + 1)),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_uint64),
        ("offsets", c_int64_p),
        ("labels", c_int64_p),
        ("ids", c_int64_p),
        ("epoch", ctypes.c_int64),
        ("position", ctypes.c_int64),
    ]


class Stats(ctypes.Structure):
    """stoker_stats (size-prefixed)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("backend", ctypes.c_int32),
        ("simd", ctypes.c_int32),
        ("threads", ctypes.c_int32),
        ("depth", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("batches", ctypes.c_int64),
        ("records", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("skipped", ctypes.c_int64),
        ("records_read", ctypes.c_int64),
        ("bytes_read", ctypes.c_int64),
        ("pinned_bytes", ctypes.c_int64),
        ("seconds", ctypes.c_double),
        ("records_per_sec", ctypes.c_double),
        ("bytes_per_sec", ctypes.c_double),
        ("wait_seconds", ctypes.c_double),
        ("ready_slots", ctypes.c_double),
        ("reads_in_flight", ctypes.c_double),
        ("read_seconds", ctypes.c_double),
        ("crc_seconds", ctypes.c_double),
        ("process_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
        ("resize_seconds", ctypes.c_double),
        ("normalize_seconds", ctypes.c_double),
        ("reduced", ctypes.c_int64),
    ]


VERIFY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                             ctypes.c_int32, ctypes.c_char_p)

_vp = ctypes.c_void_p
_pp = ctypes.POINTER(ctypes.c_void_p)
_i32 = ctypes.c_int32
_i64 = ctypes.c_int64
_u32 = ctypes.c_uint32
_u64 = ctypes.c_uint64
_sz = ctypes.c_size_t
_int = ctypes.c_int
_str = ctypes.c_char_p

# name: (restype, argtypes)
_SIGNATURES = {
    "stoker_version": (_u32, []),
    "stoker_version_string": (_str, []),
    "stoker_strerror": (_str, [_int]),
    "stoker_capability_get": (_i64, [_int]),
    "stoker_simd_name": (_str, [_i32]),
    "stoker_dtype_size": (_sz, [_i32]),
    "stoker_dtype_name": (_str, [_i32]),
    "stoker_backend_name": (_str, [_i32]),
    "stoker_config_create": (_int, [_pp]),
    "stoker_config_destroy": (None, [_vp]),
    "stoker_config_set_int": (_int, [_vp, _int, _i64]),
    "stoker_config_get_int": (_int, [_vp, _int, c_int64_p]),
    "stoker_config_set_float": (_int, [_vp, _int, ctypes.c_double]),
    "stoker_config_get_float": (_int, [_vp, _int, ctypes.POINTER(ctypes.c_double)]),
    "stoker_config_set_string": (_int, [_vp, _int, _str]),
    "stoker_option_name": (_str, [_int]),
    # writer
    "stoker_writer_create": (_int, [_pp, _str, _vp]),
    "stoker_writer_set_field": (_int, [_vp, _int, _i32, _i32, c_int64_p]),
    "stoker_writer_add_class": (_int, [_vp, _str]),
    "stoker_writer_add": (_int, [_vp, _vp, _sz, _i64, _str]),
    "stoker_writer_finish": (_int, [_vp]),
    "stoker_writer_cancel": (None, [_vp]),
    "stoker_writer_destroy": (None, [_vp]),
    "stoker_writer_errmsg": (_str, [_vp]),
    "stoker_writer_records": (_i64, [_vp]),
    "stoker_writer_bytes": (_i64, [_vp]),
    # dataset
    "stoker_dataset_open": (_int, [_pp, _str, _vp]),
    "stoker_dataset_close": (None, [_vp]),
    "stoker_dataset_errmsg": (_str, [_vp]),
    "stoker_dataset_num_records": (_i64, [_vp]),
    "stoker_dataset_num_shards": (_i32, [_vp]),
    "stoker_dataset_num_classes": (_i32, [_vp]),
    "stoker_dataset_class_name": (_str, [_vp, _i32]),
    "stoker_dataset_payload_bytes": (_i64, [_vp]),
    "stoker_dataset_format_version": (_i32, [_vp]),
    "stoker_dataset_field": (_int, [_vp, ctypes.POINTER(_i32), ctypes.POINTER(_i32),
                                    ctypes.POINTER(_i32), c_int64_p]),
    "stoker_dataset_record_info": (_int, [_vp, _i64, ctypes.POINTER(_u64), c_int64_p,
                                          ctypes.POINTER(_i32)]),
    "stoker_dataset_record_key": (_str, [_vp, _i64]),
    "stoker_dataset_read": (_int, [_vp, _i64, _vp, _sz, ctypes.POINTER(_sz)]),
    "stoker_dataset_verify": (_int, [_str, _vp, VERIFY_FN, _vp, c_int64_p]),
    # loader
    "stoker_loader_create": (_int, [_pp, _str, _vp]),
    "stoker_loader_destroy": (None, [_vp]),
    "stoker_loader_errmsg": (_str, [_vp]),
    "stoker_loader_next": (_int, [_vp, _pp]),
    "stoker_batch_release": (_int, [_vp]),
    "stoker_loader_set_epoch": (_int, [_vp, _i64]),
    "stoker_loader_num_batches": (_int, [_vp, c_int64_p]),
    "stoker_loader_num_records": (_int, [_vp, c_int64_p]),
    "stoker_batch_get_view": (_int, [_vp, ctypes.POINTER(BatchView)]),
    "stoker_batch_data": (_vp, [_vp]),
    "stoker_batch_nbytes": (_u64, [_vp]),
    "stoker_batch_device": (_i32, [_vp]),
    "stoker_loader_get_stats": (_int, [_vp, ctypes.POINTER(Stats)]),
    "stoker_loader_stats_json": (_int, [_vp, _str, _sz, ctypes.POINTER(_sz)]),
    "stoker_loader_state_save": (_int, [_vp, _vp, _sz, ctypes.POINTER(_sz)]),
    "stoker_loader_state_restore": (_int, [_vp, _vp, _sz]),
}

# Functions a library may lack (older builds): declared when the loaded library exports
# them; callers test with has().
_OPTIONAL = {
    # makes a CUDA stream wait (cudaStreamWaitEvent) until the batch's data is on the device
    "stoker_batch_wait_stream": (_int, [_vp, _vp]),
    # releases a batch still read by work queued on a CUDA stream
    "stoker_batch_release_stream": (_int, [_vp, _vp]),
    "stoker_batch_cuda_event": (_vp, [_vp]),
    "stoker_dataset_shard_path": (_str, [_vp, _i32]),
}


def _candidates():
    env = os.environ.get("STOKER_LIBRARY")
    if env:
        yield env, True
        return
    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("libstoker.so", "libstoker.so.0"):
        path = os.path.join(here, name)
        if os.path.exists(path):
            yield path, True
    found = ctypes.util.find_library("stoker")
    if found:
        yield found, False
    yield "libstoker.so.0", False


def _load():
    errors = []
    for path, explicit in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
            if explicit:
                break
    raise ImportError(
        "stoker: cannot load the shared library libstoker (%s). Build it "
        "(cmake -S . -B build && cmake --build build) and set STOKER_LIBRARY to the path of "
        "build/libstoker.so, or install it (cmake --install build) where the system loader "
        "finds it, or place libstoker.so next to the stoker package." % "; ".join(errors))


lib, path = _load()

for _name, (_res, _args) in _SIGNATURES.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise ImportError("stoker: %s does not export %s; it is too old or not libstoker"
                          % (path, _name)) from None
    _f.restype = _res
    _f.argtypes = _args

for _name, (_res, _args) in _OPTIONAL.items():
    if hasattr(lib, _name):
        _f = getattr(lib, _name)
        _f.restype = _res
        _f.argtypes = _args

VERSION = int(lib.stoker_version())
VERSION_STRING = lib.stoker_version_string().decode()
if VERSION // 10000 != EXPECTED_MAJOR:
    raise ImportError("stoker: %s is version %s, but this binding needs major version %d"
                      % (path, VERSION_STRING, EXPECTED_MAJOR))


def has(name):
    """True when the loaded library exports the C function `name`."""
    return hasattr(lib, name)


def strerror(code):
    return lib.stoker_strerror(int(code)).decode(errors="replace")


def text(b):
    return b.decode(errors="replace") if b else ""
