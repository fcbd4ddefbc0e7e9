# SPDX-License-Identifier: Apache-2.0
"""Writing and reading stoker data sets: thin wrappers of stoker_writer_* and
stoker_dataset_* (include/stoker.h; the format is docs/FORMAT.md)."""
import contextlib
import ctypes
import os
import threading

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
_WRITER_KEYWORDS = ("kind", "dtype", "shape", "classes") + tuple(table_keywords(
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
    ``jpeg_checked=True`` (``kind="jpeg"`` only) vouches that every record was decoded by
    libjpeg without an error or a warning before it was added (``stoker-pack`` checks them so
    by default); the manifest says so, and the loader's ``decoder="auto"`` sends only such
    data sets' JPEGs to the GPU's hardware decoder, which does not report damaged data.

    Any thread: calls are taken one at a time, except ``cancel()``, which does not wait.
    """

    def __init__(self, path, *args, **options):
        kw = bind("Writer()", args, options, _WRITER_POSITIONAL, _WRITER_KEYWORDS)
        kind, dtype, shape = kw.pop("kind", "bytes"), kw.pop("dtype", None), kw.pop("shape", None)
        classes = kw.pop("classes", None)
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
            if kind_code == _lib.FIELD["raw"]:
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
            if rc != 0:
                self._fail(rc)
            for name in classes or ():
                self.add_class(name)
        except BaseException:
            self.close()
            raise

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
        """Appends one record; returns its id."""
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

    def read(self, i):
        """Record `i`'s payload as bytes (its CRC32C checked)."""
        with self._live() as h:
            i = self._id(i)
            need = self.record_info(i)["size"]
            buf = ctypes.create_string_buffer(max(1, need))
            size = ctypes.c_size_t()
            rc = _L.stoker_dataset_read(h, i, buf, need, ctypes.byref(size))
            if rc != 0:
                self._fail(rc)
        return buf.raw[:size.value]

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
