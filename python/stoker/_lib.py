# SPDX-License-Identifier: Apache-2.0
"""Loading libstoker and declaring, with argtypes and restype, every C function the binding
calls. Nothing here is public API; see stoker/__init__.py.

The shared library is found, in this order:

1. the path in the environment variable ``STOKER_LIBRARY``;
2. ``libstoker.so`` (or ``libstoker.so.0``) next to this package, where ``pip install``
   puts the one it builds;
3. the system loader's search path (``ctypes.util.find_library("stoker")``,
   ``libstoker.so.0``), then ``lib`` folders of /usr/local and /usr, where ``cmake
   --install`` puts it before ``ldconfig`` has run.
"""
import ctypes
import ctypes.util
import os

# The C API major version this binding speaks (STOKER_VERSION_MAJOR).
EXPECTED_MAJOR = 0

# ---- what cannot be read from the library: the enum kinds of stoker_enum_name and its
# siblings (STOKER_ENUM_* in include/stoker.h), array bounds and struct layouts ----
ENUM_STATUS = 1
ENUM_CAPABILITY = 2
ENUM_SIMD = 3
ENUM_LOG_LEVEL = 4
ENUM_OPTION = 5
ENUM_BACKEND = 6
ENUM_ON_CORRUPT = 7
ENUM_ORDER = 8
ENUM_TRANSFORM = 9
ENUM_DCT = 10
ENUM_ANTIALIAS = 11
ENUM_RESAMPLER = 12
ENUM_DCT_SCALE = 13
ENUM_DTYPE = 14
ENUM_LAYOUT = 15
ENUM_FIELD = 16
ENUM_DECODER = 17
ENUM_FIELD_TIE = 18

# The types of stoker_stats_field (STOKER_STAT_* in the header).
STAT_INT32 = 1
STAT_INT64 = 2
STAT_DOUBLE = 3
STAT_TEXT = 4

# What stoker_option_describe reports (STOKER_OPTION_* and STOKER_FOR_* in the header).
OPTION_INT = 1
OPTION_FLOAT = 2
OPTION_STRING = 3
FOR_WRITER = 1
FOR_DATASET = 2
FOR_LOADER = 4

MAX_DIMS = 8

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


class FieldView(ctypes.Structure):
    """stoker_field_view (size-prefixed): one field of a batch, or of a loader's batches."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int32),
        ("name", ctypes.c_char_p),
        ("tie", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("shape", ctypes.c_int64 * (MAX_DIMS + 1)),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_uint64),
        ("offsets", c_int64_p),
        ("host_offsets", c_int64_p),
    ]


MAX_FIELDS = 32


class Take(ctypes.Structure):
    """stoker_take: what stoker_loader_take writes (its buffers as plain addresses)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_fields", ctypes.c_int32),
        ("epoch", ctypes.c_int64),
        ("position", ctypes.c_int64),
        ("cap", ctypes.c_int64),
        ("labels", ctypes.c_void_p),
        ("ids", ctypes.c_void_p),
        ("offsets", ctypes.c_void_p),
        ("view", BatchView),
        ("fields", FieldView * MAX_FIELDS),
    ]


# stoker_field_kind and stoker_field_tie by value
FIELD_KINDS = {1: "bytes", 2: "jpeg", 3: "raw", 4: "png", 5: "array", 6: "int64", 7: "float32"}
FIELD_TIES = {0: None, 1: "mask_of", 2: "boxes_of", 3: "rows_of"}


class Window(ctypes.Structure):
    """stoker_window (size-prefixed)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("threads", ctypes.c_int32),
        ("seconds", ctypes.c_double),
        ("batches", ctypes.c_int64),
        ("records", ctypes.c_int64),
        ("bytes", ctypes.c_int64),
        ("batches_per_sec", ctypes.c_double),
        ("records_per_sec", ctypes.c_double),
        ("bytes_per_sec", ctypes.c_double),
        ("wait_seconds", ctypes.c_double),
        ("wait_share", ctypes.c_double),
        ("ready_slots", ctypes.c_double),
        ("workers_busy", ctypes.c_double),
        ("gpu_decode_busy", ctypes.c_double),
        ("h2d_busy", ctypes.c_double),
        ("fetch_wait_share", ctypes.c_double),
        ("read_seconds", ctypes.c_double),
        ("crc_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
        ("transform_seconds", ctypes.c_double),
        ("h2d_seconds", ctypes.c_double),
        ("fetch_wait_seconds", ctypes.c_double),
        ("verdict", ctypes.c_char * 24),
        ("verdict_reason", ctypes.c_char * 256),
    ]


class FieldDesc(ctypes.Structure):
    """stoker_field_desc (size-prefixed)."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("kind", ctypes.c_int32),
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_int64 * MAX_DIMS),
        ("tie", ctypes.c_int32),
        ("tie_to", ctypes.c_char_p),
        ("max", ctypes.c_int64),
    ]


class FieldValue(ctypes.Structure):
    """stoker_field_value."""
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_uint64)]


MAX_FIELDS = 32

VERIFY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                             ctypes.c_int32, ctypes.c_char_p)
LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p)

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
    "stoker_redact": (_vp, [_str, _str, _sz]),
    "stoker_capability_get": (_i64, [_int]),
    "stoker_dtype_size": (_sz, [_i32]),
    "stoker_config_create": (_int, [_pp]),
    "stoker_config_destroy": (None, [_vp]),
    "stoker_config_set_int": (_int, [_vp, _int, _i64]),
    "stoker_config_get_int": (_int, [_vp, _int, c_int64_p]),
    "stoker_config_set_float": (_int, [_vp, _int, ctypes.c_double]),
    "stoker_config_get_float": (_int, [_vp, _int, ctypes.POINTER(ctypes.c_double)]),
    "stoker_config_set_string": (_int, [_vp, _int, _str]),
    "stoker_config_set_log": (_int, [_vp, LOG_FN, _vp, _i32]),
    "stoker_option_name": (_str, [_int]),
    "stoker_option_doc": (_str, [_int]),
    "stoker_option_describe": (_int, [_int, ctypes.POINTER(_i32), ctypes.POINTER(_i32),
                                      ctypes.POINTER(_i32), c_int64_p, c_int64_p]),
    "stoker_enum_name": (_str, [_int, _i32]),
    "stoker_enum_parse": (_int, [_int, _str, ctypes.POINTER(_i32)]),
    "stoker_enum_at": (_int, [_int, _i32, ctypes.POINTER(_i32)]),
    # writer
    "stoker_writer_create": (_int, [_pp, _str, _vp]),
    "stoker_writer_set_field": (_int, [_vp, _int, _i32, _i32, c_int64_p]),
    "stoker_writer_set_fields": (_int, [_vp, ctypes.POINTER(FieldDesc), _i32]),
    "stoker_writer_add_sample": (_int, [_vp, ctypes.POINTER(FieldValue), _i32, _str]),
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
    "stoker_dataset_jpeg_checked": (_int, [_vp]),
    "stoker_dataset_field": (_int, [_vp, ctypes.POINTER(_i32), ctypes.POINTER(_i32),
                                    ctypes.POINTER(_i32), c_int64_p]),
    "stoker_dataset_num_fields": (_i32, [_vp]),
    "stoker_dataset_field_desc": (_int, [_vp, _i32, ctypes.POINTER(FieldDesc)]),
    "stoker_dataset_field_index": (_i32, [_vp, _str]),
    "stoker_dataset_split_record": (_int, [_vp, _i64, _vp, _sz, ctypes.POINTER(FieldValue)]),
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
    "stoker_loader_next_wait": (_int, [_vp, _pp, _i64]),
    "stoker_batch_release": (_int, [_vp]),
    "stoker_loader_set_epoch": (_int, [_vp, _i64]),
    "stoker_loader_num_batches": (_int, [_vp, c_int64_p]),
    "stoker_loader_num_records": (_int, [_vp, c_int64_p]),
    "stoker_loader_get_int": (_int, [_vp, _int, c_int64_p]),
    "stoker_loader_get_float": (_int, [_vp, _int, ctypes.POINTER(ctypes.c_double)]),
    "stoker_loader_position": (_int, [_vp, c_int64_p, c_int64_p]),
    "stoker_batch_get_view": (_int, [_vp, ctypes.POINTER(BatchView)]),
    "stoker_batch_data": (_vp, [_vp]),
    "stoker_batch_nbytes": (_u64, [_vp]),
    "stoker_batch_device": (_i32, [_vp]),
    "stoker_batch_num_fields": (_i32, [_vp]),
    "stoker_batch_field": (_int, [_vp, _i32, _str, ctypes.POINTER(FieldView)]),
    "stoker_loader_num_fields": (_i32, [_vp]),
    "stoker_loader_field": (_int, [_vp, _i32, ctypes.POINTER(FieldView)]),
    "stoker_loader_get_stats": (_int, [_vp, _vp]),  # a Stats (below), by reference
    "stoker_stats_json": (_int, [_vp, _str, _sz, ctypes.POINTER(_sz)]),
    "stoker_stats_field": (_int, [_i32, ctypes.POINTER(_str), ctypes.POINTER(_i32),
                                  ctypes.POINTER(_i32), ctypes.POINTER(_u32),
                                  ctypes.POINTER(_u32), ctypes.POINTER(_str)]),
    "stoker_loader_stats_json": (_int, [_vp, _str, _sz, ctypes.POINTER(_sz)]),
    "stoker_loader_window": (_int, [_vp, ctypes.c_double, ctypes.POINTER(Window)]),
    "stoker_loader_state_save": (_int, [_vp, _vp, _sz, ctypes.POINTER(_sz)]),
    "stoker_loader_state_restore": (_int, [_vp, _vp, _sz]),
    # a batch and what the binding reads of it, in one call
    "stoker_loader_take": (_int, [_vp, _pp, _i64, ctypes.POINTER(Take)]),
    "stoker_batch_state_save": (_int, [_vp, _vp, _sz, ctypes.POINTER(_sz)]),
    "stoker_batch_epoch": (_i64, [_vp]),
    "stoker_batch_position": (_i64, [_vp]),
    # counts the binding's own time around next() in the consumer's wait
    "stoker_loader_add_wait": (_int, [_vp, ctypes.c_double]),
    # DLPack: managed tensors made by the library, whose deleters set the interpreter's
    # pending exception aside (see _dlpack)
    "stoker_dlpack_set_guard": (_int, [_vp]),
    "stoker_dlpack_deleter": (None, [_vp]),
    "stoker_dlpack_capsule_destructor": (None, [_vp]),
    "stoker_dlpack_export": (_int, [_vp, _i32, _vp, _i32, _i32, ctypes.POINTER(_vp)]),
    "stoker_dlpack_delete": (None, [_vp]),
}

# Functions a library may lack (older builds): declared when the loaded library exports
# them; callers test with has().
_OPTIONAL = {
    # makes a CUDA stream wait (cudaStreamWaitEvent) until the batch's data is on the device
    "stoker_batch_wait_stream": (_int, [_vp, _vp]),
    # releases a batch still read by work queued on a CUDA stream
    "stoker_batch_release_stream": (_int, [_vp, _vp]),
    "stoker_batch_cuda_event": (_vp, [_vp]),
    # takes a batch's memory out of the loader (no copy); freed with stoker_memory_free
    "stoker_batch_detach": (_int, [_vp, ctypes.POINTER(_vp)]),
    "stoker_memory_free": (None, [_vp]),
    "stoker_dataset_shard_path": (_str, [_vp, _i32]),
}


def _multiarch():
    """Debian's multiarch folder name (x86_64-linux-gnu), or "" elsewhere."""
    import sysconfig
    return sysconfig.get_config_var("MULTIARCH") or ""


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
    # `cmake --install` puts the library in a prefix whose cache `ldconfig` has not read yet
    for prefix in ("/usr/local", "/usr"):
        for sub in ("lib", "lib64", os.path.join("lib", _multiarch())):
            path = os.path.join(prefix, sub, "libstoker.so.0")
            if os.path.exists(path):
                yield path, False


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


def shown(path):
    """`path` as it may be shown: a URL's password as *** (the library's stoker_redact)."""
    raw = os.fsencode(path)
    cap = 2 * len(raw) + 8
    out = ctypes.create_string_buffer(cap)
    lib.stoker_redact(raw, out, cap)
    return os.fsdecode(out.value)


def text(b):
    return b.decode(errors="replace") if b else ""


class Enum:
    """One of the library's enums, read from its table of names (stoker_enum_at,
    stoker_enum_name, stoker_enum_parse): ``table["batch_size"]`` is a value,
    ``table.name(value)`` its name (None for a value without one), ``table.parse(text)``
    the value of a name or an alias, in any case (None for an unknown name)."""

    def __init__(self, kind):
        self.kind = kind
        self.values = {}
        v = ctypes.c_int32()
        i = 0
        while lib.stoker_enum_at(kind, i, ctypes.byref(v)) == 0:
            self.values[text(lib.stoker_enum_name(kind, v.value))] = v.value
            i += 1
        if not self.values:
            raise ImportError("stoker: %s names no value of enum %d" % (path, kind))
        self.names = {value: name for name, value in self.values.items()}

    def __getitem__(self, name):
        try:
            return self.values[name]
        except KeyError:
            raise KeyError("stoker: %s has no %r in enum %d: it does not match this binding"
                           % (path, name, self.kind)) from None

    def __iter__(self):
        return iter(self.values)

    def name(self, value, default=None):
        return self.names.get(value, default)

    def parse(self, name):
        raw = name.encode(errors="surrogateescape")
        if b"\0" in raw:  # C would read a shorter name
            return None
        v = ctypes.c_int32()
        return v.value if lib.stoker_enum_parse(self.kind, raw, ctypes.byref(v)) == 0 else None


STATUS = Enum(ENUM_STATUS)
CAPABILITY = Enum(ENUM_CAPABILITY)
SIMD = Enum(ENUM_SIMD)
OPTION = Enum(ENUM_OPTION)
BACKEND = Enum(ENUM_BACKEND)
ON_CORRUPT = Enum(ENUM_ON_CORRUPT)
ORDER = Enum(ENUM_ORDER)
TRANSFORM = Enum(ENUM_TRANSFORM)
DCT = Enum(ENUM_DCT)
ANTIALIAS = Enum(ENUM_ANTIALIAS)
RESAMPLER = Enum(ENUM_RESAMPLER)
DCT_SCALE = Enum(ENUM_DCT_SCALE)
DTYPE = Enum(ENUM_DTYPE)
LAYOUT = Enum(ENUM_LAYOUT)
FIELD = Enum(ENUM_FIELD)
FIELD_TIE = Enum(ENUM_FIELD_TIE)
# the ties by the names a schema gives them (docs/FORMAT.md), and back
TIE = {name: FIELD_TIE[name] for name in ("mask_of", "boxes_of", "rows_of")}
TIE_NAMES = {v: k for k, v in TIE.items()}
DECODER = Enum(ENUM_DECODER)



class Option:
    """One row of the library's table of options (stoker_option_describe, stoker_option_doc):
    ``name``, ``value`` (its key), ``type`` (OPTION_INT, _FLOAT or _STRING), ``applies``
    (FOR_* bits), ``values`` (the Enum naming its values, or None), ``min`` and ``max`` (an
    integer's range), ``doc`` (one line: what it sets, its default)."""

    def __init__(self, name, value):
        t, a, e = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        lo, hi = ctypes.c_int64(), ctypes.c_int64()
        if lib.stoker_option_describe(value, ctypes.byref(t), ctypes.byref(a), ctypes.byref(e),
                                      ctypes.byref(lo), ctypes.byref(hi)) != 0:
            raise ImportError("stoker: %s does not describe its option %r" % (path, name))
        self.name, self.value, self.type, self.applies = name, value, t.value, a.value
        self.values = (_ENUMS.get(e.value) or Enum(e.value)) if e.value else None
        self.min, self.max = lo.value, hi.value
        self.doc = text(lib.stoker_option_doc(value))

    def __repr__(self):
        return "Option(%r)" % self.name


_ENUMS = {t.kind: t for t in (STATUS, CAPABILITY, SIMD, BACKEND, ON_CORRUPT, ORDER, TRANSFORM,
                              DCT, ANTIALIAS, RESAMPLER, DCT_SCALE, DTYPE, LAYOUT, FIELD,
                              DECODER)}

# Every option of the library, by name, in the order of its table.
OPTIONS = {name: Option(name, value) for name, value in OPTION.values.items()}

# The statuses the binding tests for by value.
END = STATUS["end"]
AGAIN = STATUS["again"]
E_INVALID = STATUS["invalid"]
E_LIMIT = STATUS["limit"]
E_UNSUPPORTED = STATUS["unsupported"]
E_STATE = STATUS["state"]


class StatsField:
    """One row of the library's table of statistics (stoker_stats_field): ``name``, ``type``
    (STAT_INT32, _INT64, _DOUBLE or _TEXT), ``values`` (the Enum naming an int32's values,
    or None), ``offset`` and ``size`` in stoker_stats, ``doc`` (one line)."""

    def __init__(self, index):
        name, doc = ctypes.c_char_p(), ctypes.c_char_p()
        t, e = ctypes.c_int32(), ctypes.c_int32()
        off, size = ctypes.c_uint32(), ctypes.c_uint32()
        self.found = lib.stoker_stats_field(index, ctypes.byref(name), ctypes.byref(t),
                                            ctypes.byref(e), ctypes.byref(off),
                                            ctypes.byref(size), ctypes.byref(doc)) == 0
        self.name, self.type, self.doc = text(name.value), t.value, text(doc.value)
        self.values = (_ENUMS.get(e.value) or Enum(e.value)) if e.value else None
        self.offset, self.size = off.value, size.value

    def __repr__(self):
        return "StatsField(%r)" % self.name


def _stats_fields():
    out = {}
    while True:
        f = StatsField(len(out))
        if not f.found:
            return out
        out[f.name] = f


# Every field of stoker_stats, by name, in the struct's order.
STATS_FIELDS = _stats_fields()

_STAT_CTYPES = {STAT_INT32: ctypes.c_int32, STAT_INT64: ctypes.c_int64,
                STAT_DOUBLE: ctypes.c_double}


def _stats_struct():
    """stoker_stats as a ctypes struct, laid out from the library's table: its fields at the
    table's offsets (reserved space as padding), size-prefixed."""
    layout, at = [("struct_size", ctypes.c_uint32)], 4
    for f in sorted(STATS_FIELDS.values(), key=lambda f: f.offset):
        ctype = ctypes.c_char * f.size if f.type == STAT_TEXT else _STAT_CTYPES.get(f.type)
        if ctype is None or ctypes.sizeof(ctype) != f.size or f.offset < at:
            raise ImportError("stoker: %s describes stoker_stats.%s in a way this binding "
                              "cannot lay out" % (path, f.name))
        if f.offset > at:
            layout.append(("_reserved%d" % at, ctypes.c_char * (f.offset - at)))
        layout.append((f.name, ctype))
        at = f.offset + f.size
    cls = type("Stats", (ctypes.Structure,), {
        "__doc__": "stoker_stats (size-prefixed), laid out from the library's table.",
        "_fields_": layout})
    for f in STATS_FIELDS.values():
        if getattr(cls, f.name).offset != f.offset:
            raise ImportError("stoker: stoker_stats.%s lies at %d in %s, at %d here"
                              % (f.name, f.offset, path, getattr(cls, f.name).offset))
    return cls


Stats = _stats_struct()


def stats_doc():
    """The fields of stoker_stats, one line each, for a docstring."""
    return "\n".join("``%s``: %s." % (name, f.doc) for name, f in STATS_FIELDS.items())
