# SPDX-License-Identifier: Apache-2.0
"""Writing and reading stoker data sets: thin wrappers of stoker_writer_* and
stoker_dataset_* (include/stoker.h; the format is docs/FORMAT.md)."""
import contextlib
import ctypes
import io
import os
import struct
import sys
import threading
import zlib

from . import _lib
from ._config import (Config, bind, c_string, check_int, check_path, choice, dtype_code,
                      keyword_doc, set_options, signature, table_keywords)
from .errors import error, StateError

_L = _lib.lib


def _payload(payload):
    """(object keeping the bytes alive, address, size) for any C-contiguous buffer."""
    if isinstance(payload, bytes):
        return payload, ctypes.cast(ctypes.c_char_p(payload), ctypes.c_void_p).value, \
            len(payload)
    try:
        mv = memoryview(payload)
    except TypeError:
        raise TypeError("payload must be bytes or a buffer (bytearray, memoryview, numpy "
                        "array), not %s" % type(payload).__name__) from None
    if not mv.c_contiguous:
        raise ValueError("payload must be C-contiguous")
    if mv.nbytes == 0:
        return b"", None, 0
    if mv.readonly:
        data = mv.tobytes()
        return _payload(data)
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B"))
    return arr, ctypes.addressof(arr), mv.nbytes


# Writer's keywords: its own (kind, dtype, shape, classes) and the library's table's writer
# options, less the limits on untrusted input (a writer's records come from its caller,
# under the defaults).
_WRITER_KEYWORDS = ("kind", "dtype", "shape", "classes", "fields") + tuple(table_keywords(
    _lib.FOR_WRITER, ("max_record_size", "max_records", "max_shards")))
# Its parameters after path by position, in their historical order (later ones keyword-only).
_WRITER_POSITIONAL = ("kind", "dtype", "shape", "shard_size", "align", "overwrite", "fsync",
                      "classes", "jpeg_checked")
# Dataset's keywords: the table's data set options, less the shard index's limits (as for
# the Loader) and the HDF5 dataset names (Dataset opens "images" and "labels").
_DATASET_KEYWORDS = tuple(table_keywords(_lib.FOR_DATASET, (
    "max_records", "max_shards", "h5_images", "h5_labels")))
_DATASET_POSITIONAL = (
    "max_record_size", "cache_dir", "cache_limit", "block_size", "fetch_window",
    "fetch_transfers", "fetch_retries", "fetch_retry_ms", "fetch_timeout_ms", "ca_bundle",
    "http_header", "s3_region", "s3_endpoint", "fetch_clients")


_SCALAR_KINDS = {"int64": ("int64", "<i8"), "float32": ("float32", "<f4")}
_ENCODED_KINDS = ("jpeg", "png", "bytes")


def _field_spec(name, spec):
    """One entry of Writer(fields=...) as a FieldDesc's values: (kind, dtype, shape, tie,
    tie_to); raises naming the field."""
    where = "fields[%r]" % name
    if not isinstance(name, str):
        raise TypeError("field names must be str, not %s" % type(name).__name__)
    if isinstance(spec, str):
        spec = {"kind": spec}
    if not isinstance(spec, dict):
        raise TypeError("%s: a kind name or a dict with \"kind\", not %s"
                        % (where, type(spec).__name__))
    unknown = set(spec) - {"kind", "dtype", "shape", "mask_of", "boxes_of", "rows_of",
                           "quality"}
    if unknown:
        raise TypeError("%s: unknown key(s) %s" % (where, ", ".join(sorted(map(repr, unknown)))))
    kind = spec.get("kind")
    if kind not in ("jpeg", "png", "bytes", "raw", "array", "int64", "float32"):
        raise ValueError("%s: kind %r is not one of jpeg, png, bytes, raw, array, int64, "
                         "float32" % (where, kind))
    if "quality" in spec:
        if kind != "jpeg":
            raise TypeError("%s: quality is a jpeg field's (the quality its decoded images "
                            "are encoded at)" % where)
        check_int("%s quality" % where, spec["quality"], 1, 100)
    dtype, shape = 0, ()
    if kind in ("raw", "array"):
        if spec.get("dtype") is None or spec.get("shape") is None:
            raise TypeError("%s: kind %r needs dtype and shape" % (where, kind))
        dtype = dtype_code(spec["dtype"])
        shape = tuple(spec["shape"])
        if kind == "array":
            if not shape or shape[0] is not None:
                raise ValueError("%s: an array's shape starts with None (any number of rows), "
                                 "e.g. (None, 4)" % where)
            shape = shape[1:]
        shape = tuple(check_int("%s shape[%d]" % (where, i), d, 0) for i, d in enumerate(shape))
        if len(shape) > _lib.MAX_DIMS:
            raise ValueError("%s: at most %d dimensions" % (where, _lib.MAX_DIMS))
    elif spec.get("shape") is not None or (spec.get("dtype") is not None and
                                           kind not in _SCALAR_KINDS):
        raise TypeError("%s: kind %r takes no dtype or shape" % (where, kind))
    elif kind in _SCALAR_KINDS and spec.get("dtype") is not None:
        if dtype_code(spec["dtype"]) != dtype_code(_SCALAR_KINDS[kind][0]):
            raise ValueError("%s: an %s field's dtype is %s" % (where, kind, kind))
    ties = [t for t in _lib.TIE if t in spec]
    if len(ties) > 1:
        raise ValueError("%s: one tie at most (%s)" % (where, ", ".join(ties)))
    tie, tie_to = 0, None
    if ties:
        tie, tie_to = _lib.TIE[ties[0]], spec[ties[0]]
        if not isinstance(tie_to, str):
            raise TypeError("%s: %s names a field (str)" % (where, ties[0]))
    return kind, dtype, shape, tie, tie_to


JPEG_QUALITY = 90  # a jpeg field's decoded images are encoded at this quality by default


def _png_bytes(a):
    """A PNG of an 8-bit gray [h, w] or RGB [h, w, 3] array: rows unfiltered, deflated."""
    import numpy as np
    h, w = a.shape[:2]
    ch = a.shape[2] if a.ndim == 3 else 1
    rows = np.zeros((h, 1 + w * ch), np.uint8)  # each row's filter byte: 0, none
    rows[:, 1:] = a.reshape(h, w * ch)

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(
            ">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" +
            chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2 if ch == 3 else 0, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)) + chunk(b"IEND", b""))


def _encoded_image(where, kind, value, quality):
    """An image field's bytes for a decoded image (a numpy uint8 array [h, w] or [h, w, 1]
    gray, [h, w, 3] RGB, or a PIL image), else None (`value` is taken as the file's bytes).
    PNG: lossless (PIL's modes as they are); JPEG: through Pillow at `quality`."""
    np = sys.modules.get("numpy")
    pil = sys.modules.get("PIL.Image")
    if pil is not None and isinstance(value, pil.Image):
        fmt = "JPEG" if kind == "jpeg" else "PNG"
        if fmt == "JPEG" and value.mode not in ("L", "RGB", "CMYK"):
            value = value.convert("RGB")
        out = io.BytesIO()
        value.save(out, fmt, **({"quality": quality} if fmt == "JPEG" else {}))
        return out.getvalue()
    if np is None or not isinstance(value, np.ndarray) or value.ndim == 1:
        return None  # bytes, or a buffer of them (a 1-D uint8 array read from a file)
    if value.dtype != np.uint8 or not (value.ndim == 2 or (
            value.ndim == 3 and value.shape[2] in (1, 3))) or 0 in value.shape:
        raise TypeError("%s: a decoded image is a uint8 array [h, w] or [h, w, 1] (gray) or "
                        "[h, w, 3] (RGB), not %s %s; else give the %s file's bytes"
                        % (where, value.dtype, tuple(value.shape), kind.upper()))
    a = np.ascontiguousarray(value[:, :, 0] if value.ndim == 3 and value.shape[2] == 1
                             else value)
    if kind == "png":
        return _png_bytes(a)
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("%s: encoding a decoded image as JPEG needs Pillow; give the JPEG "
                          "file's bytes instead" % where) from None
    out = io.BytesIO()
    Image.fromarray(a).save(out, "JPEG", quality=quality)
    return out.getvalue()


def _field_value(name, f, value, keep):
    """(address, size) of one value for a field of the schema; `keep` holds what must live
    until the call returns. Raises naming the field."""
    import numpy as np
    kind = f["kind"]
    where = "field %r" % name
    if kind in _ENCODED_KINDS:
        if isinstance(value, (str, int, float)) or value is None:
            raise TypeError("%s: %s bytes expected, not %s" % (where, kind, type(value).__name__))
        if kind != "bytes":
            encoded = _encoded_image(where, kind, value, f.get("quality", JPEG_QUALITY))
            if encoded is not None:
                value = encoded
        obj, addr, size = _payload(value)
        keep.append(obj)
        return addr, size
    if kind in _SCALAR_KINDS:
        code = _SCALAR_KINDS[kind][1]
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise TypeError("%s: an %s number expected, not %s" % (where, kind,
                                                                   type(value).__name__))
        if kind == "int64":
            if isinstance(value, (float, np.floating)):
                raise TypeError("%s: an int64 field takes an integer, not %r" % (where, value))
            if not -2**63 <= int(value) < 2**63:
                raise OverflowError("%s: %d does not fit an int64" % (where, int(value)))
        arr = np.array([value], dtype=code)
    else:
        dtype = np.dtype(f["dtype"]) if f["dtype"] != "bfloat16" else None
        if dtype is None:
            raise TypeError("%s: numpy has no bfloat16" % where)
        row = tuple(f["shape"][1:]) if kind == "array" else tuple(f["shape"])
        if isinstance(value, np.ndarray):
            arr = value
            if arr.dtype != dtype:
                raise TypeError("%s: dtype %s, but the field's is %s" % (where, arr.dtype, dtype))
        else:
            arr = np.asarray(value)
            if arr.size == 0:
                arr = arr.astype(dtype)
            if not np.can_cast(arr.dtype, dtype, "same_kind"):
                raise TypeError("%s: values of %s, but the field's dtype is %s"
                                % (where, arr.dtype, dtype))
            arr = arr.astype(dtype)
            if kind == "array" and arr.size == 0:
                arr = arr.reshape((0,) + row)
        want = ("N",) + row if kind == "array" else row
        ok = arr.shape[1:] == row and arr.ndim == len(row) + 1 if kind == "array" \
            else arr.shape == row
        if not ok:
            raise ValueError("%s: shape %s, but the field's is %s"
                             % (where, tuple(arr.shape), "(%s)" % ", ".join(map(str, want))
                                if kind == "array" else row))
        arr = np.ascontiguousarray(arr, dtype=dtype.newbyteorder("<"))
    keep.append(arr)
    return (arr.ctypes.data if arr.nbytes else None), arr.nbytes


class Writer:
    """Builds a data set directory (shards + manifest), atomically.

    ``Writer(path, kind="bytes"|"raw"|"jpeg", dtype=None, shape=None, shard_size=None,
    align=None, overwrite=False, fsync=True, classes=None, jpeg_checked=False)``. For
    ``kind="raw"`` every record is a tensor of ``dtype`` (a name such as ``"uint8"``) and
    ``shape`` (without the batch dimension). ``add(payload, label=0, key=None)`` appends a record (any C-contiguous
    buffer); ``finish()`` publishes the data set. Used as a context manager, a clean exit
    finishes it and an exception discards it (any previous output is left untouched).
    ``overwrite=True`` replaces only a previous data set (or an empty folder) at ``path``:
    anything else there is refused with ``StokerError``, and nothing of it is deleted.
    ``jpeg_checked=True`` (``kind="jpeg"``, or ``fields`` with a ``"jpeg"`` field) vouches
    that every JPEG was decoded by libjpeg without an error or a warning before it was added,
    or encoded by it (``stoker-pack`` checks them so by default); the manifest says so, and
    the loader's ``decoder="auto"`` sends only such data sets' JPEGs to the GPU's hardware
    decoder, which does not report damaged data.

    ``fields={name: spec, ...}`` writes samples of several named fields instead (manifest
    version 3, docs/FORMAT.md): each spec a kind name (``"jpeg"``, ``"png"``, ``"bytes"``,
    ``"int64"``, ``"float32"``) or a dict with ``"kind"`` (``"raw"`` and ``"array"`` take
    ``"dtype"`` and ``"shape"``, an array's shape starting with ``None``: ``(None, 4)``) and
    a tie where it has one (``"mask_of": "image"``, ``"boxes_of": "image"``,
    ``"rows_of": "boxes"``). ``add({name: value, ...}, key=None)`` then takes bytes for
    encoded fields, numbers or numpy arrays for the others; a refused sample raises with
    the sample and the field named, and the writer goes on. A field ``"label"`` of kind
    int64 is also the record's label. A jpeg or png field also takes a decoded image: a
    uint8 array ``[h, w]`` (a mask's class ids, a gray image), ``[h, w, 1]`` or
    ``[h, w, 3]`` (RGB), or a PIL image. PNG encodes it losslessly (arrays without
    Pillow); JPEG through Pillow at the field's ``"quality"`` (1-100, default 90:
    ``{"kind": "jpeg", "quality": 95}``), with libjpeg, so such a data set may be marked
    ``jpeg_checked``.

    Any thread: calls are taken one at a time, except ``cancel()``, which does not wait.
    """

    def __init__(self, path, *args, **options):
        kw = bind("Writer()", args, options, _WRITER_POSITIONAL, _WRITER_KEYWORDS)
        fields = kw.pop("fields", None)
        if fields is not None and any(k in kw for k in ("kind", "dtype", "shape")):
            raise TypeError("Writer(): fields= replaces kind, dtype and shape")
        kind, dtype, shape = kw.pop("kind", "bytes"), kw.pop("dtype", None), kw.pop("shape", None)
        classes = kw.pop("classes", None)
        self._fields = None
        if fields is not None:
            if not isinstance(fields, dict) or not fields:
                raise TypeError("fields must be a non-empty dict of name -> kind or spec")
            if len(fields) > _lib.MAX_FIELDS:
                raise ValueError("at most %d fields" % _lib.MAX_FIELDS)
            specs = [(n,) + _field_spec(n, v) for n, v in fields.items()]
            quality = {n: v["quality"] for n, v in fields.items()
                       if isinstance(v, dict) and "quality" in v}
        raw_path = check_path("path", path)
        self.path = os.fsdecode(raw_path)
        self._shown = _lib.shown(self.path)  # for messages: no password
        kind_code = choice("kind", kind, _lib.FIELD)
        self._handle = ctypes.c_void_p()
        self._finished = False
        # `_calls`: the C writer takes one call at a time. `_life`: cancel() (allowed while
        # a call runs) against destruction. Order: _calls, then _life.
        self._calls = threading.RLock()
        self._life = threading.Lock()
        self._destroy = _L.stoker_writer_destroy
        # A forked process has a copy of this object: destroying it there would delete the
        # output the creating process is still writing.
        self._pid = os.getpid()
        self._getpid = os.getpid
        with Config() as cfg:
            set_options(cfg, kw)
            rc = _L.stoker_writer_create(ctypes.byref(self._handle), raw_path, cfg.handle)
        if rc != 0:
            self._fail(rc)
        try:
            if fields is not None:
                self._set_fields(specs)
                for f in self._fields:
                    if f["name"] in quality:
                        f["quality"] = int(quality[f["name"]])
            elif kind_code == _lib.FIELD["raw"]:
                if dtype is None or shape is None:
                    raise TypeError("kind='raw' needs dtype and shape")
                dims = [check_int("shape[%d]" % i, s, 0) for i, s in enumerate(tuple(shape))]
                if len(dims) > _lib.MAX_DIMS:
                    raise ValueError("at most %d dimensions" % _lib.MAX_DIMS)
                arr = (ctypes.c_int64 * max(1, len(dims)))(*dims)
                rc = _L.stoker_writer_set_field(self._handle, kind_code, dtype_code(dtype),
                                                len(dims), arr)
            else:
                rc = _L.stoker_writer_set_field(self._handle, kind_code, 0, 0, None)
            if fields is None and rc != 0:
                self._fail(rc)
            for name in classes or ():
                self.add_class(name)
        except BaseException:
            self.close()
            raise

    def _set_fields(self, specs):
        descs = (_lib.FieldDesc * len(specs))()
        names = []
        for d, (name, kind, dtype, shape, tie, tie_to) in zip(descs, specs):
            names.append(c_string("field name", name.encode()))
            d.struct_size = ctypes.sizeof(_lib.FieldDesc)
            d.kind = _lib.FIELD[kind]
            d.name = names[-1]
            d.dtype = dtype
            d.ndim = len(shape)
            for i, s in enumerate(shape):
                d.shape[i] = s
            d.tie = tie
            d.tie_to = tie_to.encode() if tie_to is not None else None
        rc = _L.stoker_writer_set_fields(self._handle, descs, len(specs))
        if rc != 0:
            self._fail(rc)
        self._fields = [{"name": n, "kind": k,
                         "dtype": _lib.DTYPE.name(dt) if k in ("raw", "array") else None,
                         "shape": ((None,) + sh) if k == "array" else sh}
                        for n, k, dt, sh, _t, _to in specs]

    def _fail(self, rc):
        msg = _lib.text(_L.stoker_writer_errmsg(self._handle)) if self._handle else ""
        if not msg:
            msg = self._shown
        raise error(rc, msg)

    @contextlib.contextmanager
    def _live(self):
        """The handle, with the writer's call lock held; ValueError once closed."""
        if self._getpid() != self._pid:
            raise StateError(_lib.E_STATE, "this writer was created by process %d, and a "
                             "forked process cannot use it: its output belongs to that "
                             "process" % self._pid)
        with self._calls:
            if not self._handle:
                raise ValueError("the writer is closed")
            yield self._handle

    def add_class(self, name):
        """Appends a class name; its label is its position."""
        if not isinstance(name, str):
            raise TypeError("class name must be a str")
        with self._live() as h:
            rc = _L.stoker_writer_add_class(h, c_string("class name", name.encode()))
            if rc != 0:
                self._fail(rc)

    def add(self, payload, label=0, key=None):
        """Appends one record; returns its id. With ``fields``: ``add(sample, key=None)``,
        sample a dict of every field's value."""
        if self._fields is not None:
            if label != 0:
                raise TypeError("add(): a data set with fields takes its label from its "
                                "\"label\" field, not label=")
            return self._add_sample(payload, key)
        label = check_int("label", label)
        if key is not None and not isinstance(key, (str, bytes)):
            raise TypeError("key must be a str, bytes or None")
        keep, addr, size = _payload(payload)
        raw_key = key.encode() if isinstance(key, str) else key
        if raw_key is not None:
            c_string("key", raw_key)
        with self._live() as h:
            rc = _L.stoker_writer_add(h, addr, size, label, raw_key)
            del keep
            if rc != 0:
                self._fail(rc)
            return int(_L.stoker_writer_records(h)) - 1

    def _add_sample(self, sample, key):
        if not isinstance(sample, dict):
            raise TypeError("add(): a data set with fields takes a dict of field -> value, not "
                            "%s" % type(sample).__name__)
        if key is not None and not isinstance(key, (str, bytes)):
            raise TypeError("key must be a str, bytes or None")
        raw_key = key.encode() if isinstance(key, str) else key
        if raw_key is not None:
            c_string("key", raw_key)
        with self._live() as h:
            what = "sample %r" % (key,) if key is not None else \
                "sample %d" % int(_L.stoker_writer_records(h))
            names = [f["name"] for f in self._fields]
            missing = [n for n in names if n not in sample]
            extra = [n for n in sample if n not in names]
            if missing:
                raise ValueError("%s: %s: missing field(s) %s" % (self._shown, what,
                                                                   ", ".join(map(repr, missing))))
            if extra:
                raise ValueError("%s: %s: no such field(s) %s in the schema" % (
                    self._shown, what, ", ".join(map(repr, extra))))
            keep = []
            values = (_lib.FieldValue * len(names))()
            for v, f in zip(values, self._fields):
                try:
                    v.data, v.size = _field_value(f["name"], f, sample[f["name"]], keep)
                except (TypeError, ValueError, OverflowError, ImportError) as e:
                    raise type(e)("%s: %s: %s" % (self._shown, what, e)) from None
            rc = _L.stoker_writer_add_sample(h, values, len(names), raw_key)
            del keep
            if rc != 0:
                self._fail(rc)
            return int(_L.stoker_writer_records(h)) - 1

    @property
    def records(self):
        with self._live() as h:
            return int(_L.stoker_writer_records(h))

    @property
    def bytes(self):
        with self._live() as h:
            return int(_L.stoker_writer_bytes(h))

    def finish(self):
        """Publishes the data set (renamed into place)."""
        with self._live() as h:
            rc = _L.stoker_writer_finish(h)
            if rc != 0:
                self._fail(rc)
            self._finished = True

    def cancel(self):
        """Makes the next (or a running) add/finish fail with CanceledError. Any thread;
        does not wait for the call in progress. A no-op once the writer is closed, and in a
        forked process."""
        if self._getpid() != self._pid:
            return
        with self._life:
            if self._handle:
                _L.stoker_writer_cancel(self._handle)

    def close(self):
        """Destroys the writer; an unfinished data set is discarded. Waits for a call in
        progress in another thread."""
        if not hasattr(self, "_calls"):  # __init__ failed before the handle existed
            return
        if self._getpid() != self._pid:  # forget the creating process's writer, no more
            self._handle.value = None
            return
        with self._calls, self._life:
            if self._handle:
                self._destroy(self._handle)
                self._handle.value = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and self._handle and not self._finished:
                self.finish()
        finally:
            self.close()

    def __del__(self):
        try:
            self.close()
        except:  # noqa: E722 (at shutdown `Exception` may be None)
            pass

    @classmethod
    def from_array(cls, path, array, labels=None, keys=None, **kwargs):
        """Writes an (N, ...) numpy array as N raw records; returns the path."""
        import numpy as np
        array = np.ascontiguousarray(array)
        if array.ndim < 1:
            raise ValueError("array needs a record dimension")
        with cls(path, kind="raw", dtype=array.dtype.name, shape=array.shape[1:],
                 **kwargs) as w:
            for i in range(array.shape[0]):
                # labels[i] as it is: add() refuses a float rather than truncate it
                w.add(array[i], 0 if labels is None else labels[i],
                      None if keys is None else keys[i])
        return path


class Dataset:
    """An open, read-only data set: ``len(ds)``, ``ds.read(i)`` (bytes, CRC-checked),
    ``ds.label(i)``, ``ds.key(i)``, ``ds.record_info(i)``, ``ds.field``, ``ds.classes``,
    ``ds[i]`` -> ``(payload bytes, label)``; ``ds.array(i)`` for raw records (numpy).
    ``ds.fields`` lists the fields (a data set written without a schema has ``image`` or
    ``data``, and ``label``); ``ds.sample(i)`` gives record `i` as a dict of field name ->
    value (bytes for jpeg, png and bytes fields, numpy arrays for raw and array fields,
    int or float for scalars). For a data set with a schema (format version 3), ``read(i)``
    and ``ds[i]`` give that dict too.
    Any thread: calls are taken one at a time (close waits for the call in progress)."""

    def __init__(self, path, *args, **options):
        kw = bind("Dataset()", args, options, _DATASET_POSITIONAL, _DATASET_KEYWORDS)
        raw_path = check_path("path", path)
        self.path = os.fsdecode(raw_path)
        self._shown = _lib.shown(self.path)  # for messages: no password
        self._handle = ctypes.c_void_p()
        # every call, and close: the handle is never closed under a call, and a failure's
        # message (per handle) is read before another call replaces it
        self._lock = threading.RLock()
        self._close = _L.stoker_dataset_close
        with Config() as cfg:
            self._h5_fields = bool(kw.get("h5_fields"))
            set_options(cfg, kw)
            rc = _L.stoker_dataset_open(ctypes.byref(self._handle), raw_path, cfg.handle)
        if rc != 0:
            msg = _lib.text(_L.stoker_dataset_errmsg(self._handle)) if self._handle else ""
            self.close()
            raise error(rc, msg if self._shown in msg else ("%s: %s" % (self._shown, msg)
                                                          if msg else self._shown))

    @contextlib.contextmanager
    def _live(self):
        """The handle, with the data set's lock held; ValueError once closed."""
        with self._lock:
            if not self._handle:
                raise ValueError("the data set is closed")
            yield self._handle

    def _fail(self, rc):
        raise error(rc, _lib.text(_L.stoker_dataset_errmsg(self._handle)) or self._shown)

    def close(self):
        if not hasattr(self, "_lock"):  # __init__ failed before the handle existed
            return
        with self._lock:
            if self._handle:
                self._close(self._handle)
                self._handle.value = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except:  # noqa: E722 (at shutdown `Exception` may be None)
            pass

    def __len__(self):
        with self._live() as h:
            return int(_L.stoker_dataset_num_records(h))

    @property
    def num_shards(self):
        with self._live() as h:
            return int(_L.stoker_dataset_num_shards(h))

    @property
    def payload_bytes(self):
        with self._live() as h:
            return int(_L.stoker_dataset_payload_bytes(h))

    @property
    def format_version(self):
        with self._live() as h:
            return int(_L.stoker_dataset_format_version(h))

    @property
    def jpeg_checked(self):
        """Whether the manifest says every JPEG was decoded without damage when written."""
        with self._live() as h:
            return bool(_L.stoker_dataset_jpeg_checked(h))

    @property
    def classes(self):
        with self._live() as h:
            n = _L.stoker_dataset_num_classes(h)
            return [_lib.text(_L.stoker_dataset_class_name(h, i)) for i in range(n)]

    @property
    def field(self):
        """``{"kind": "bytes"|"jpeg"|"raw", "dtype": name or None, "shape": tuple or None}``"""
        kind, dtype, ndim = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
        shape = (ctypes.c_int64 * _lib.MAX_DIMS)()
        with self._live() as h:
            rc = _L.stoker_dataset_field(h, ctypes.byref(kind), ctypes.byref(dtype),
                                         ctypes.byref(ndim), shape)
            if rc != 0:
                self._fail(rc)
        raw = kind.value == _lib.FIELD["raw"]
        return {"kind": _lib.FIELD.name(kind.value, str(kind.value)),
                "dtype": _lib.DTYPE.name(dtype.value) if raw else None,
                "shape": tuple(shape[:ndim.value]) if raw else None}

    @property
    def fields(self):
        """The schema: a list of ``{"name", "kind", "dtype", "shape", "tie", "tie_to",
        "max"}`` in schema order. ``shape``: a raw field's, an array's with None first
        (``(None, 4)``), ``()`` for int64 and float32, None for encoded fields; ``max``: the
        largest value of a variable field (bytes; rows for an array), else None."""
        with self._live() as h:
            if getattr(self, "_fields_cache", None) is not None:
                return [dict(f) for f in self._fields_cache]
            out = []
            for i in range(int(_L.stoker_dataset_num_fields(h))):
                d = _lib.FieldDesc()
                d.struct_size = ctypes.sizeof(d)
                rc = _L.stoker_dataset_field_desc(h, i, ctypes.byref(d))
                if rc != 0:
                    self._fail(rc)
                kind = _lib.FIELD.name(d.kind, str(d.kind))
                shape = tuple(d.shape[:d.ndim])
                if kind == "array":
                    shape = (None,) + shape
                elif kind in _SCALAR_KINDS:
                    shape = ()
                elif kind != "raw":
                    shape = None
                out.append({
                    "name": _lib.text(d.name), "kind": kind,
                    "dtype": _lib.DTYPE.name(d.dtype) if d.dtype else None, "shape": shape,
                    "tie": _lib.TIE_NAMES.get(d.tie), "tie_to": _lib.text(d.tie_to) if d.tie_to
                    else None,
                    "max": int(d.max) if kind in ("jpeg", "png", "bytes", "array") else None})
            self._fields_cache = out
            return [dict(f) for f in out]

    def sample(self, i):
        """Record `i` as a dict of field name -> value (its CRC32C checked, its layout too, and
        its boxes by the loader's rule: CorruptError naming the file, the record and the
        field)."""
        import numpy as np
        fields = self.fields
        with self._live() as h:
            i = self._id(i)
            data = self._read(h, i)
            vals = (_lib.FieldValue * len(fields))()
            rc = _L.stoker_dataset_split_record(h, i, data, len(data), vals)
            if rc != 0:
                self._fail(rc)
            out = {}
            for f, v in zip(fields, vals):
                raw = ctypes.string_at(v.data, v.size) if v.size else b""
                kind = f["kind"]
                if kind in _ENCODED_KINDS:
                    out[f["name"]] = raw
                elif kind in _SCALAR_KINDS:
                    out[f["name"]] = np.frombuffer(raw, _SCALAR_KINDS[kind][1])[0].item()
                elif f["dtype"] == "bfloat16":
                    out[f["name"]] = raw  # numpy has no bfloat16
                else:
                    dt = np.dtype(f["dtype"]).newbyteorder("<")
                    shape = (-1,) + f["shape"][1:] if kind == "array" else f["shape"]
                    out[f["name"]] = np.frombuffer(raw, dt).reshape(shape).copy()
            return out

    def _schema(self):
        """Whether records hold a schema's fields: a version 3 data set, or an HDF5 file read
        with h5_fields."""
        return self.format_version >= 3 or getattr(self, "_h5_fields", False)

    def _id(self, i):
        i = check_int("record id", i, None, None)  # any int: out of range is IndexError
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("record id %d out of range (%d records)" % (i, n))
        return i

    def record_info(self, i):
        """``{"size", "label", "shard"}`` of record `i`, without reading it."""
        size, label, shard = ctypes.c_uint64(), ctypes.c_int64(), ctypes.c_int32()
        with self._live() as h:
            rc = _L.stoker_dataset_record_info(h, self._id(i), ctypes.byref(size),
                                               ctypes.byref(label), ctypes.byref(shard))
            if rc != 0:
                self._fail(rc)
        return {"size": size.value, "label": label.value, "shard": shard.value}

    def label(self, i):
        return self.record_info(i)["label"]

    def key(self, i):
        with self._live() as h:
            k = _L.stoker_dataset_record_key(h, self._id(i))
            return None if k is None else k.decode(errors="surrogateescape")

    def _read(self, h, i):
        need = self.record_info(i)["size"]
        buf = ctypes.create_string_buffer(max(1, need))
        size = ctypes.c_size_t()
        rc = _L.stoker_dataset_read(h, i, buf, need, ctypes.byref(size))
        if rc != 0:
            self._fail(rc)
        return buf.raw[:size.value]

    def read(self, i):
        """Record `i`'s payload as bytes (its CRC32C checked); for a data set with a schema
        (format version 3), its fields as ``sample(i)`` gives them."""
        if self._schema():
            return self.sample(i)
        with self._live() as h:
            return self._read(h, self._id(i))

    def payload(self, i):
        """Record `i`'s payload as bytes (its CRC32C checked), whatever its schema."""
        with self._live() as h:
            return self._read(h, self._id(i))

    def array(self, i):
        """Raw record `i` as a numpy array of the stored dtype and shape."""
        import numpy as np
        f = self.field
        if f["kind"] != "raw":
            raise TypeError("%s holds %s records, not raw tensors" % (self._shown, f["kind"]))
        if f["dtype"] == "bfloat16":
            raise TypeError("numpy has no bfloat16")
        return np.frombuffer(self.read(i), dtype=f["dtype"]).reshape(f["shape"])

    def __getitem__(self, i):
        with self._lock:
            if self._schema():
                return self.sample(i)
            return self.read(i), self.label(i)


def verify(path):
    """Checks a data set completely (every CRC32C). Returns a list of problems, each
    ``(shard, record, code, message)`` (shard/record -1 where not applicable); empty when
    the data set is intact."""
    raw_path = check_path("path", path)
    problems = []

    def report(_user, shard, record, code, msg):
        problems.append((shard, record, code, _lib.text(msg)))

    fn = _lib.VERIFY_FN(report)
    count = ctypes.c_int64()
    rc = _L.stoker_dataset_verify(raw_path, None, fn, None, ctypes.byref(count))
    if rc != 0 and not problems:
        problems.append((-1, -1, rc, "%s: %s" % (os.fsdecode(raw_path), _lib.strerror(rc))))
    return problems


Writer.__init__.__signature__ = signature(("path",), _WRITER_POSITIONAL, _WRITER_KEYWORDS,
                                          {"kind": "bytes"})
Dataset.__init__.__signature__ = signature(("path",), _DATASET_POSITIONAL, _DATASET_KEYWORDS)
for _cls, _names in ((Writer, _WRITER_KEYWORDS), (Dataset, _DATASET_KEYWORDS)):
    if _cls.__doc__:  # None under python -OO
        _cls.__doc__ += ("\n    Options (the library's table; None: its default):\n\n    " +
                         "\n    ".join(keyword_doc(_names).splitlines()) + "\n")
