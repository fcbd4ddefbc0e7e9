# SPDX-License-Identifier: Apache-2.0
"""stoker.Loader: batches from a data set, as DLPack-exporting views (zero copy).

Lifetime of a batch: the memory of a batch stays valid while anything holds it: the
``Batch`` object (or its ``.data``, its fields), or any array or tensor made from it through
DLPack (``torch.from_dlpack(batch.data)``, ``numpy.from_dlpack(batch.data)``,
``batch.numpy()``, ``x, y = batch``). When the last of them is gone, the batch's slot goes
back to the loader, which refills it. The loader has ``depth`` slots used in turn (a ring):
before handing out a batch it needs back the one it handed out ``depth`` batches earlier. A
batch still held then (in a list, ``first = next(iter(loader))``, ``kept.append(x)``) has
its memory detached from its slot, without a copy (``stoker_batch_detach``): the slot gets
fresh memory, and the batch's holders keep theirs, at the same addresses, until the last of
them is gone (after the loader is closed too). Keeping batches costs their memory and
nothing else; a loop that keeps nothing allocates nothing. ``set_epoch`` and
``load_state_dict`` leave held batches valid (their slots are needed last).
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import sys
import threading
import time
import weakref
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _dlpack, _lib
from ._config import (Config, INT64_MAX, bind, check_bool, check_int, check_path,
                      dtype_code, is_bool, keyword_doc, set_options, signature, table_keywords)
from .errors import error, StateError

try:
    import numpy as _np
except ImportError:  # labels and ids then come as lists
    _np = None

_L = _lib.lib

# stats()'s window: the last WINDOW_SECONDS of the loader's life (window() takes any span).
WINDOW_SECONDS = 10.0
# next() waits for a batch in steps this long, acting on signals and close() between them
_WAIT_STEP_MS = 100
# counts the binding's own time in next() in the consumer's wait (a module global, which
# bench/step_probe.py wraps to see that time)
_ADD_WAIT = _L.stoker_loader_add_wait
# a batch, with what the binding reads of it, in one foreign call
_TAKE = _L.stoker_loader_take


_torch_profiler = None  # (torch.autograd._profiler_enabled, record_function) once torch is seen


def _profiler_label():
    """A torch.profiler.record_function("stoker.next") context while a torch profiler runs,
    else None. torch is never imported here: only a process that imported it can profile."""
    global _torch_profiler
    if _torch_profiler is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        try:
            _torch_profiler = (torch.autograd._profiler_enabled,
                               torch.autograd.profiler.record_function)
        except AttributeError:  # a torch without them: no label
            _torch_profiler = (lambda: False, None)
    enabled, record = _torch_profiler
    return record("stoker.next") if enabled() else None

_FORKED = ("this %s was created by process %d, and a forked process cannot use it (its "
           "threads and memory stay with that process): create a new %s here")

# What an older library, which cannot detach a batch's memory from its slot, answers.
_HOLD_RULE = ("the next batch needs the slot of the batch of epoch %d, position %d, which an "
              "array or tensor made from it still holds (depth=%d: the loader's slots form a "
              "ring, and this libstoker cannot detach a batch's memory from its slot, which "
              "arrays and tensors share without a copy; a Batch object alone is copied out of "
              "its slot). Use a libstoker with stoker_batch_detach, keep at most the depth - 1 "
              "most recent batches' arrays and tensors (after a break, del them), copy what "
              "you keep longer (tensor.clone(), array.copy()), or create the loader with a "
              "larger depth")


class _Handout:
    """One batch of stoker_loader_next, from the moment the library hands it out until it is
    released; each Loader.__next__ makes one (or goes on with one an interrupt left).

    Ctrl-C: Python raises KeyboardInterrupt where it next checks for signals. A signal that
    comes while next() waits in the library (ctypes lets the GIL go there) is noticed right
    after the call returns, with the batch handed out and not yet wrapped; one may also come
    while the batch is wrapped. So the library writes the batch into ``out``, which the core
    keeps (``_Core.pending``) from before the call, and the batch counts as delivered only
    when ``__next__`` hands its Batch over, by one store (``held[h] = h.owner = token``)
    right before it returns: CPython (3.11 on) checks for signals at calls and backward
    jumps, and none lies after that store before the caller has the batch. A hand-out left
    pending by an interrupt is taken up by the next consumer call: next() delivers it,
    set_epoch and load_state_dict release it, and until then ``epoch``, ``position`` and
    ``state_dict()`` are those at the pending batch (stoker_batch_epoch, stoker_batch_position,
    stoker_batch_state_save: the loader's just before the call that handed it out), so the
    loader stands where it stood before the interrupted call."""

    __slots__ = ("out", "epoch", "position", "buf", "thread", "owner", "stream", "data",
                 "serial")

    def __init__(self):
        self.out = ctypes.c_void_p()  # the stoker_batch, written by stoker_loader_next
        self.epoch = self.position = None  # the batch's, once wrapped
        self.buf = None  # the array the library copies the labels, ids and offsets into
        # The thread that wrapped the batch and is handing it over (the consumer lock is let
        # go before the hand-over): no other thread takes up this hand-out meanwhile.
        self.thread = None
        self.owner = None  # a weakref to the batch's _BatchRef once handed over
        self.stream = None  # the last CUDA stream a consumer named (device batches)
        self.data = None  # a weakref to the batch's BatchData, to copy it out of its slot
        self.serial = 0  # hand-outs of the core before this one: the oldest is needed first


class _Core:
    """Owns the stoker_loader handle. Destroyed when the Loader is closed and every batch
    it handed out has been released (so arrays made from batches never dangle).

    The release path (batch_done, destroy, __del__) may run while the interpreter shuts
    down, from a DLPack deleter called after this module's globals were set to None: it
    uses only what the core holds itself.

    A process forked from the one that created the loader has a copy of this object but
    none of the loader's threads: there the core touches neither the C loader (whose
    destruction would wait for those threads) nor its locks (a parent's thread may have
    held one at the fork); it only forgets the handle."""

    def __init__(self):
        self.handle = ctypes.c_void_p()
        # `calls`: the C loader takes its consumer calls (next, set_epoch, state, sizes) one
        # at a time, so every Loader method holds it; closing too, so the handle is never
        # destroyed under a call. `lock`: the batches held, and the handle's lifetime for
        # the calls allowed from any thread (release, stats). Order: calls, then lock.
        self.calls = threading.RLock()
        self.lock = threading.RLock()
        # Batches handed over and not released: _Handout -> weakref to its _BatchRef.
        self.held = {}
        # The _Handout of the latest next() until its batch is handed over (under `calls`).
        self.pending = None
        self.handouts = 0
        self.state_size = 0
        self.closing = False
        self.stopping = False  # close() was called: a next() waiting in steps gives up
        self.in_next = 0.0  # seconds of the next() in progress inside the library's calls
        # stoker_loader_take's output, which every next() reuses (its buffers are fresh)
        self.take = _lib.Take()
        self.take.struct_size = ctypes.sizeof(self.take)
        self.take_ref = ctypes.byref(self.take)
        self.cap = 0  # the batch size, once known: the take's buffers' capacity
        self.buf_type = None  # the ctypes array type of those buffers (with numpy)
        self.names = None  # the fields' names by index, read at the first batch
        self._release = _L.stoker_batch_release
        self._release_stream = (_L.stoker_batch_release_stream
                                if _lib.has("stoker_batch_release_stream") else None)
        self._detach = (_L.stoker_batch_detach
                        if _lib.has("stoker_batch_detach") and _lib.has("stoker_memory_free")
                        else None)
        self._destroy = _L.stoker_loader_destroy
        self._pid = os.getpid()
        self._getpid = os.getpid

    @property
    def outstanding(self):
        """Batches handed over and not released."""
        return len(self.held)

    def forked(self):
        """True in a process forked from the one that created the loader."""
        return self._getpid() != self._pid

    def errmsg(self):
        return _lib.text(_L.stoker_loader_errmsg(self.handle)) if self.handle else ""

    def batch_done(self, ref):
        """The last holder of a batch let go: gives it back to the library, unless it was
        never handed over (an interrupted next, whose batch the next call delivers)."""
        if self.forked():
            return
        with self.lock:
            h = ref.handout
            token = self.held.get(h)
            if token is None or token() is not ref:
                return
            # Forgotten first, then released: nothing checks for a signal in between, and a
            # batch released and still listed could be released twice (sweep), the second
            # time when its slot holds a later batch.
            del self.held[h]
            if h.stream is not None and self._release_stream is not None:
                # device batch: its buffer is refilled only after the work queued on the
                # consumer's stream (which may still read it) completes
                self._release_stream(h.out, h.stream)
            else:
                self._release(h.out)
            if self.closing and not self.held:
                self.destroy()

    def detach(self, h, ref):
        """Takes the memory of batch `h` (handed over; `ref` counts its holders) out of its
        slot without a copy (stoker_batch_detach) and gives the slot back: the holders keep
        the memory, which the last of them frees (_BatchRef.release). True when the slot is
        free (or being freed by another thread's release); False where the library cannot
        detach (an older one). The consumer's side, under `calls`."""
        if self._detach is None:
            return False
        with self.lock:
            token = self.held.get(h)
            if token is None or token() is not ref:
                return True  # released meanwhile
            with ref.lock:
                if ref.count <= 0:
                    return True  # its last holder is releasing it
                mem = ctypes.c_void_p()
                rc = self._detach(h.out, ctypes.byref(mem))
                if rc != 0:
                    raise error(rc, self.errmsg() or "stoker_batch_detach failed")
                ref.memory = _Memory(mem.value)
                # forgotten first, then released (see batch_done)
                del self.held[h]
                if h.stream is not None and self._release_stream is not None:
                    self._release_stream(h.out, h.stream)
                else:
                    self._release(h.out)
            return True

    def sweep(self):
        """Gives back the batches whose holders are all gone without their release having
        run: a KeyboardInterrupt inside a __del__ is dropped with the rest of it, and
        otherwise the batch's slot would stay held for good. The consumer's side."""
        for token in list(self.held.values()):
            if token() is None:
                break
        else:
            return  # nothing to give back: the lock is not needed to find that out
        with self.lock:
            if not self.handle:
                return
            for h, token in list(self.held.items()):
                if token() is None:
                    del self.held[h]
                    if h.stream is not None and self._release_stream is not None:
                        self._release_stream(h.out, h.stream)
                    else:
                        self._release(h.out)

    def destroy(self):
        with self.lock:
            if self.handle:
                self._destroy(self.handle)
                self.handle.value = None

    def close(self):
        """Destroys the loader now, or at the last batch_done while batches are out."""
        if self.forked():
            self.closing = True
            self.handle.value = None
            return
        with self.lock:
            self.closing = True
            if not self.held:
                self.destroy()

    def __del__(self):
        # The garbage collector may finalise a cycle holding this core and its batches in
        # any order: with batches still out, destruction waits for the last batch_done.
        try:
            self.close()
        except:  # noqa: E722 (at shutdown `Exception` may be None)
            pass


class _Memory:
    """A batch's memory taken out of its slot (stoker_batch_detach), freed with
    stoker_memory_free by the batch's last holder (_BatchRef.release), or when this object
    is collected. That may happen while the interpreter shuts down, from a DLPack deleter
    called after this module's globals were set to None: it uses only what it holds. In a
    process forked from the one that detached it, the memory is forgotten, not freed (pinned
    and device memory belong to the parent's CUDA context)."""

    live = 0  # memories not freed yet, in this process (for tests)
    _count_lock = threading.Lock()

    def __init__(self, handle):
        self._handle = handle
        self._free = _L.stoker_memory_free
        self._cls = type(self)
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._getpid = os.getpid
        with self._cls._count_lock:
            self._cls.live += 1

    def free(self):
        with self._lock:
            handle, self._handle = self._handle, None
        if handle:
            if self._getpid() == self._pid:
                self._free(handle)
            with self._cls._count_lock:
                self._cls.live -= 1

    def __del__(self):
        try:
            self.free()
        except:  # noqa: E722 (at shutdown `Exception` may be None)
            pass


class _BatchRef:
    """Counts the holders of one C batch: its BatchData plus every live DLPack export. Once
    the batch's memory was detached from its slot (_Core.detach), the slot is given back and
    the last holder frees the memory instead."""

    def __init__(self, core, handout, device):
        self.core = core
        self.handout = handout
        self.bh = handout.out.value
        self.device = device
        self.count = 1
        self.memory = None  # a _Memory once detached
        self.lock = threading.RLock()  # a collection inside may release this very ref

    def acquire(self):
        with self.lock:
            if self.count <= 0:
                raise ValueError("the batch was released")
            self.count += 1

    def release(self):
        with self.lock:
            self.count -= 1
            last = self.count == 0
            memory = self.memory
        if last:
            if memory is not None:
                memory.free()
            else:
                self.core.batch_done(self)

    def wait_stream(self, stream):
        """For device batches: makes the consumer's CUDA `stream` wait on the batch's ready
        event (stoker_batch_wait_stream, where the library exports it; without it batches
        are complete when handed out), and remembers the stream so that the final release
        waits for the work queued there (stoker_batch_release_stream). A no-op for host
        batches. Stream -1 (the consumer asks for no synchronisation) skips the wait."""
        if stream is not None:
            if is_bool(stream) or not hasattr(stream, "__index__"):
                raise TypeError("stream must be an int (a cudaStream_t) or None")
            stream = stream.__index__()
            if stream < -1 or stream >= 1 << 64:
                raise ValueError("stream must be -1, None or a cudaStream_t (0 <= stream < "
                                 "2**64), got %d" % stream)
        if self.device < 0 or self.memory is not None:
            return  # detached: the loader's copy completed at the detach, the batch released
        # DLPack's CUDA stream values: None or 1 = legacy default stream, 2 = per-thread
        # default stream, else a cudaStream_t. cudaStreamLegacy and cudaStreamPerThread are
        # the handles 0x1 and 0x2, so the values pass through unchanged.
        handle = 1 if stream is None or stream == 0 else int(stream)
        if handle != -1:
            self.handout.stream = handle
        if handle == -1 or not _lib.has("stoker_batch_wait_stream"):
            return
        rc = _L.stoker_batch_wait_stream(self.bh, handle)
        if rc != 0:
            raise error(rc, self.core.errmsg() or "stoker_batch_wait_stream failed")


class _OwnedRef:
    """The memory of a batch copied out of its slot (BatchData._detach): a host buffer or a
    torch tensor, alive while the BatchData or an export of it is. Nothing to release."""

    def __init__(self, keep, device):
        self.keep = keep
        self.device = device
        self.count = 1
        self.lock = threading.RLock()

    def acquire(self):
        pass

    def release(self):
        pass

    def wait_stream(self, stream):
        pass


def _device_name(device):
    return "cpu" if device < 0 else "cuda:%d" % device


class BatchData:
    """The batch's tensor as a DLPack producer: ``torch.from_dlpack(data)`` and (host
    batches) ``numpy.from_dlpack(data)`` wrap it without a copy. Also ``shape``, ``dtype``
    (a name), ``device`` ("cpu" or "cuda:N"), ``nbytes`` and ``data_ptr()``.

    Once the batch is released (Batch.release()), every attribute and method raises
    ValueError; repr() says "released"."""

    def __init__(self, ref, ptr, shape, dtype, nbytes):
        self._ref = ref
        self._drop_lock = threading.Lock()  # release() from two threads drops one hold
        self._ptr = ptr
        self._shape = tuple(shape)
        self._cshape = None  # the shape as _dlpack.export takes it, made at the first export
        self._dtype = dtype
        self._nbytes = nbytes
        self._group = None  # the batch's _Tensors, which copies it out of its slot

    @property
    def shape(self) -> Tuple[int, ...]:
        self._live()
        return self._shape

    @property
    def dtype(self) -> str:
        self._live()
        return _lib.DTYPE.name(self._dtype, "unknown")

    @property
    def device(self) -> str:
        return _device_name(self._live().device)

    @property
    def nbytes(self) -> int:
        self._live()
        return self._nbytes

    def data_ptr(self) -> int:
        self._live()
        return self._ptr or 0

    def _live(self):
        if self._ref is None:
            raise ValueError("the batch was released")
        return self._ref

    def __dlpack_device__(self) -> Tuple[int, int]:
        dev = self._live().device
        return (_dlpack.kDLCUDA, dev) if dev >= 0 else (_dlpack.kDLCPU, 0)

    def __dlpack__(self, stream: Optional[int] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any:
        """A classic ``"dltensor"`` capsule (also when max_version asks for a versioned one,
        which the DLPack protocol allows). `stream`: the consumer's CUDA stream, made to
        wait for the batch (see _BatchRef.wait_stream)."""
        ref = self._live()
        if copy:
            raise BufferError("stoker batches are exported without a copy (copy=True)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError("the batch is on %s; it cannot be exported to %r"
                              % (self.device, dl_device))
        # A hold for the time of the export, so that a release() in another thread cannot
        # give the batch back while its stream is set up.
        while True:
            try:
                ref.acquire()
                break
            except ValueError:
                if self._ref is ref or self._ref is None:
                    raise
                ref = self._ref  # copied out of its slot meanwhile (_detach)
        try:
            ref.wait_stream(stream)
            if self._cshape is None:
                self._cshape = _dlpack.c_shape(self._shape)
            return _dlpack.export(ref, self._ptr, self._shape, self._dtype, ref.device,
                                  self._cshape)
        finally:
            ref.release()

    def _copy_out(self, ref):
        """This tensor's bytes in memory of its own: (owner, address), or None where that
        cannot be done (a device batch without torch). Under the batch's locks."""
        if ref.device < 0:
            buf = ctypes.create_string_buffer(max(1, self._nbytes))
            ctypes.memmove(buf, self._ptr, self._nbytes)
            return _OwnedRef(buf, -1), ctypes.addressof(buf)
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        # from_dlpack orders torch's stream after the batch, and the slot's release after
        # the clone (release_stream on that stream)
        copy = torch.from_dlpack(self).clone()
        return _OwnedRef(copy, ref.device), copy.data_ptr()

    def _drop(self):
        with self._drop_lock:
            ref, self._ref = self._ref, None
        if ref is not None:
            ref.release()

    def __del__(self):
        try:
            self._drop()
        except:  # noqa: E722 (at shutdown `Exception` may be None)
            pass

    def __repr__(self):
        ref = self._ref
        if ref is None:
            return "BatchData(released)"
        return "BatchData(shape=%s, dtype=%s, device=%s)" % (
            self._shape, _lib.DTYPE.name(self._dtype, "unknown"), _device_name(ref.device))


class _Tensors:
    """The tensors of one batch (its data and its fields), which share the batch's hold:
    each holds one count of it. ``_detach`` copies them all out of the slot into memory of
    their own and gives the slot back, when nothing but they hold it (no array or tensor
    made from any of them). A host batch is copied with memmove, a device batch with torch
    (when torch is imported). Returns True when the slot was given back. The consumer's
    side."""

    def __init__(self):
        self.members = []  # weak references: a tensor the user dropped lets go of its count

    def add(self, member):
        member._group = self
        self.members.append(weakref.ref(member))

    def _detach(self):
        members = [m for m in (w() for w in self.members) if m is not None]
        live = [m for m in members if m._ref is not None and not isinstance(m._ref, _OwnedRef)]
        if not live:
            return False
        ref = live[0]._ref
        with contextlib.ExitStack() as stack:
            for m in live:
                stack.enter_context(m._drop_lock)
            if any(m._ref is not ref for m in live):
                return False
            with ref.lock:
                if ref.count != len(live):
                    return False  # an export is alive: its memory cannot move
                copies = [m._copy_out(ref) for m in live]
                if any(c is None for c in copies):
                    return False
                for m, (owned, ptr) in zip(live, copies):
                    m._ref, m._ptr = owned, ptr
        for _ in live:
            ref.release()
        return True


class RaggedField:
    """A field whose samples hold different numbers of rows (boxes, token ids, bytes):
    ``values``, every sample's rows back to back (``[rows, *row_shape]``), and ``offsets``,
    ``count + 1`` row offsets into them (sample j is ``values[offsets[j]:offsets[j+1]]``),
    both DLPack producers on the batch's device (``torch.from_dlpack``); ``host_offsets``,
    the same offsets as a numpy array on the host. ``field[j]`` (and iterating) gives sample
    j's rows: a tensor on the batch's device where torch is imported, else a numpy array
    (host batches). ``values``/``offsets`` stay valid as the batch's data does."""

    def __init__(self, name, values, offsets, host_offsets, count):
        self.name = name
        self.values = values
        self.offsets = offsets
        self.host_offsets = host_offsets
        self.count = count

    def __len__(self) -> int:
        return self.count

    def _values(self):
        torch = sys.modules.get("torch")
        if torch is not None:
            return torch.from_dlpack(self.values)
        return _np.from_dlpack(self.values)

    def __getitem__(self, j):
        if not isinstance(j, int) and not hasattr(j, "__index__"):
            raise TypeError("a ragged field is indexed by sample number")
        j = j.__index__()
        if j < 0:
            j += self.count
        if not 0 <= j < self.count:
            raise IndexError("sample %d of a batch of %d" % (j, self.count))
        lo, hi = int(self.host_offsets[j]), int(self.host_offsets[j + 1])
        return self._values()[lo:hi]

    def __iter__(self):
        vals = self._values()
        off = [int(x) for x in self.host_offsets]
        for j in range(self.count):
            yield vals[off[j]:off[j + 1]]

    def padded(self, length=None, value=0):
        """``(padded, lengths)``: the samples' rows as one ``[count, length, *row_shape]``
        array and each sample's row count (see TensorPair.padded). Torch tensors on the
        batch's device where torch is imported, else numpy arrays (host batches)."""
        torch = sys.modules.get("torch")
        if torch is not None:
            return TensorPair(torch.from_dlpack(self.values), torch.from_dlpack(self.offsets),
                              self.host_offsets).padded(length, value)
        if _np is None:
            raise ImportError("padded() needs numpy or torch")
        return _pad(_np.from_dlpack(self.values), _np.from_dlpack(self.offsets),
                    self.host_offsets, length, value, None)

    def __repr__(self):
        return "RaggedField(%r, count=%d, rows=%d)" % (
            self.name, self.count, int(self.host_offsets[-1]) if self.count else 0)


class TensorPair:
    """A ragged field as torch tensors: ``values`` and ``offsets`` on the batch's device,
    ``host_offsets`` on the host (what ``x, y, ... = batch`` gives for a ragged field where
    torch is imported; ``torch.nn.EmbeddingBag(values, offsets[:-1])`` takes them as they
    are)."""

    __slots__ = ("values", "offsets", "host_offsets")

    def __init__(self, values, offsets, host_offsets):
        self.values = values
        self.offsets = offsets
        self.host_offsets = host_offsets

    def split(self):
        """One tensor per sample (views of values)."""
        off = [int(x) for x in self.host_offsets]
        return [self.values[off[j]:off[j + 1]] for j in range(len(off) - 1)]

    def padded(self, length=None, value=0):
        """``(padded, lengths)``: sample j's rows in ``padded[j, :lengths[j]]`` and `value`
        after them, ``padded`` of shape ``[count, length, *row_shape]`` and the dtype of
        ``values``, ``lengths`` int64 ``[count]``, both on the values' device: token ids as
        a text encoder takes them (``attention_mask = arange(length) < lengths[:, None]``),
        boxes as a ``[count, max_boxes, 4]`` target. ``length`` defaults to the longest
        sample's row count (read from ``host_offsets``); a sample with more rows keeps its
        first ``length`` (``lengths`` counts those). One gather on the device, whatever the
        count: no per-sample copies (as ``pad_sequence(split())`` makes) and no wait for
        the stream."""
        torch = sys.modules["torch"]
        return _pad(self.values, self.offsets, self.host_offsets, length, value, torch)

    def __len__(self):
        return len(self.host_offsets) - 1


class Batch:
    """One batch handed out by a Loader.

    ``data``: the records as a DLPack producer (see BatchData); for fixed-size records a
    dense ``[count, *record_shape]`` tensor (after transforms: ``[count, 3, H, W]`` for
    NCHW), for records of varying size the packed ``uint8`` bytes, with ``offsets``
    (``count + 1`` entries; record j is ``data[offsets[j]:offsets[j+1]]``), else
    ``offsets`` is None. ``labels`` and ``indices`` (record ids; also ``ids``) are small
    numpy copies. ``epoch`` and ``position`` (the batch's index in its epoch).

    The memory stays valid while this object, its ``data`` or any array/tensor made from it
    lives (module docstring); ``release()`` drops this object's own hold early. After it,
    ``data`` and every method that reaches the memory (``numpy()``, ``torch()``,
    ``records()``) raise ValueError, while what was copied at hand-out (``count``,
    ``epoch``, ``position``, ``device``, ``shape``, ``dtype``, ``labels``, ``indices``,
    ``offsets``) stays readable.
    """

    def __init__(self, ref, view, take, buf, core):
        """From stoker_loader_take's output: `view` (take.view), the fields in `take`, the
        labels, ids and offsets copied into `buf` (3 * cap + 1 entries), or read from the
        view's pointers where `buf` is None (no numpy)."""
        count = self.count = view.count
        self.epoch = view.epoch
        self.position = view.position
        self.device = view.device
        shape = self.shape = tuple(view.shape[:view.ndim])
        if buf is not None:
            cap = core.cap
            self.labels = buf[:count] if view.labels else buf[:0]
            self.indices = buf[cap:cap + count]
            self.offsets = buf[2 * cap:2 * cap + count + 1] if view.offsets else None
        else:
            self.labels = _copy_i64(view.labels, count)
            self.indices = _copy_i64(view.ids, count)
            self.offsets = _copy_i64(view.offsets, count + 1) if view.offsets else None
        data = view.data
        dtype = view.dtype
        self.data = BatchData(ref, data, shape, dtype, view.nbytes)
        self.dtype = _DTYPE_NAMES.get(dtype, "unknown")
        tensors = self._tensors = _Tensors()
        tensors.add(self.data)
        fields = self._fields = {}
        names = core.names
        for i in range(take.num_fields):
            fv = take.fields[i]
            name = names[i] if names is not None and i < len(names) else fv.name.decode()
            fdata = fv.data
            if fdata == data and not fv.tie and fv.nbytes == view.nbytes:
                fields[name] = self.data  # the batch's data is this field
                continue
            ref.acquire()
            values = BatchData(ref, fdata, tuple(fv.shape[:fv.ndim]), fv.dtype, fv.nbytes)
            tensors.add(values)
            if not fv.offsets:
                fields[name] = values
                continue
            ref.acquire()
            offsets = BatchData(ref, ctypes.cast(fv.offsets, ctypes.c_void_p).value,
                                (count + 1,), _lib.DTYPE["int64"], 8 * (count + 1))
            tensors.add(offsets)
            fields[name] = RaggedField(name, values, offsets,
                                       _copy_i64(fv.host_offsets, count + 1), count)

    # ---- the fields, as a mapping ----

    def keys(self) -> List[str]:
        """The batch's field names, in schema order."""
        return list(self._fields)

    def __getitem__(self, name: str) -> Any:
        """Field `name`: a DLPack producer (``torch.from_dlpack(batch["label"])``) on the
        batch's device, or a RaggedField (``.values``, ``.offsets``)."""
        try:
            return self._fields[name]
        except KeyError:
            raise KeyError("the batch has no field %r (its fields: %s)"
                           % (name, ", ".join(self._fields))) from None

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def items(self):
        return [(k, self._fields[k]) for k in self._fields]

    def values(self):
        return [self._fields[k] for k in self._fields]

    def _as_torch(self, f, torch):
        try:
            if isinstance(f, RaggedField):
                return TensorPair(torch.from_dlpack(f.values), torch.from_dlpack(f.offsets),
                                  f.host_offsets)
            return torch.from_dlpack(f)
        except (RuntimeError, BufferError) as e:
            # an older torch refuses some dtypes (uint16/32/64 before 2.3)
            name = f.name if isinstance(f, RaggedField) else next(
                (k for k, v in self._fields.items() if v is f), "data")
            data = f.values if isinstance(f, RaggedField) else f
            raise TypeError("field %r (%s): this torch cannot take it through DLPack (%s); "
                            "read it with numpy.from_dlpack(batch[%r]) on the host, or store "
                            "it in a dtype torch has" % (name, data.dtype, e, name)) from None

    @property
    def ids(self) -> Any:
        return self.indices

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        """``x, y = batch`` (and ``for x, y in loader``): the fields in schema order, as a
        PyTorch user expects them; for a data set without a schema, the data and the
        labels. Where torch is imported each is a tensor made with ``torch.from_dlpack`` (no
        copy, on the batch's device: a GPU batch's labels are on the GPU too, moved there
        with the batch), a ragged field a TensorPair (``values``, ``offsets``); else host
        batches give numpy arrays (``batch.data`` itself for bfloat16) and RaggedFields, GPU
        batches their DLPack producers. Like any array made from the batch, each keeps its
        memory."""
        torch = sys.modules.get("torch")
        fields = list(self._fields.values()) or [self.data]
        for f in fields:
            if isinstance(f, BatchData):
                f._live()
            if torch is not None:
                yield self._as_torch(f, torch)
            elif (isinstance(f, BatchData) and _np is not None and self.device < 0
                  and f._dtype != _lib.DTYPE["bfloat16"]):
                yield _np.from_dlpack(f)
            else:
                yield f
        if not self._fields:
            yield self.labels

    def numpy(self) -> Any:
        """The data as a numpy array sharing the batch's memory (host batches only)."""
        self.data._live()
        if _np is None:
            raise ImportError("numpy is not installed")
        if self.data._dtype == _lib.DTYPE["bfloat16"]:
            raise TypeError("this batch is bfloat16, which numpy cannot represent: use "
                            "torch.from_dlpack(batch.data), or create the loader with "
                            "dtype='float16' or 'float32'")
        if self.device >= 0:
            raise TypeError("this batch is in GPU memory (cuda:%d); numpy reads host memory "
                            "only: use torch.from_dlpack(batch.data), or device='cpu'"
                            % self.device)
        return _np.from_dlpack(self.data)

    def torch(self) -> Any:
        """The data as a torch tensor sharing the batch's memory."""
        self.data._live()
        import torch
        return torch.from_dlpack(self.data)

    def records(self) -> List[bytes]:
        """For records of varying size: a list of bytes, one per record (a copy)."""
        self.data._live()
        if self.offsets is None:
            raise TypeError("records() is for records of varying size; use numpy()")
        raw = bytes(self.numpy())
        off = [int(x) for x in self.offsets]
        return [raw[off[j]:off[j + 1]] for j in range(self.count)]

    def release(self) -> None:
        """Drops this object's hold on the batch (arrays made from it stay valid)."""
        for w in self._tensors.members:
            m = w()
            if m is not None:
                m._drop()

    def __repr__(self):
        return ("Batch(count=%d, epoch=%d, position=%d, shape=%s, dtype=%s, device=%s%s)"
                % (self.count, self.epoch, self.position, self.shape, self.dtype,
                   _device_name(self.device), "" if self.data._ref else ", released"))


_DTYPE_NAMES = _lib.DTYPE.names  # value -> name


def _pad(values, offsets, host_offsets, length, value, torch):
    """RaggedField/TensorPair.padded on torch tensors (`torch` the module), else numpy."""
    n = len(host_offsets) - 1
    if length is None:
        length = max((int(host_offsets[j + 1]) - int(host_offsets[j]) for j in range(n)),
                     default=0)
    elif is_bool(length) or not hasattr(length, "__index__") or length.__index__() < 0:
        raise ValueError("padded(length=%r): a row count >= 0, or None for the longest "
                         "sample's" % (length,))
    length = length.__index__()
    lengths = (offsets[1:] - offsets[:-1]).clip(max=length)
    shape = (n, length) + tuple(values.shape[1:])
    if n == 0 or length == 0 or values.shape[0] == 0:  # nothing to gather from
        if torch is not None:
            return values.new_full(shape, value), lengths
        return _np.full(shape, value, dtype=values.dtype), lengths
    if torch is not None:
        step = torch.arange(length, device=values.device)
    else:
        step = _np.arange(length, dtype=_np.int64)
    pad = step[None, :] >= lengths[:, None]  # [n, length]: the places after a sample's rows
    rows = values[(offsets[:-1, None] + step[None, :]).clip(max=values.shape[0] - 1)]
    pad = pad.reshape((n, length) + (1,) * (values.ndim - 1))
    if torch is not None:
        return rows.masked_fill_(pad, value), lengths
    rows[_np.broadcast_to(pad, rows.shape)] = value
    return rows, lengths


def _copy_i64(ptr, n):
    if not ptr or n <= 0:
        return _np.zeros(0, dtype=_np.int64) if _np is not None else []
    if _np is not None:
        return _np.ctypeslib.as_array(ptr, shape=(n,)).copy()
    return list(ptr[:n])


def _device_option(device):
    """STOKER_OPT_DEVICE: ordinal + 1; -1 CPU; None leaves the library's default."""
    if device is None:
        return None
    if is_bool(device):
        raise TypeError("device must be None, 'cpu', 'cuda', 'cuda:N' or an int")
    if hasattr(device, "__index__"):
        n = check_int("device", device, -1, INT64_MAX - 1)  # -1 is cpu
        return -1 if n == -1 else n + 1
    if not isinstance(device, str):
        if type(device).__name__ == "device":  # torch.device
            device = str(device)
        else:
            raise TypeError("device must be None, 'cpu', 'cuda', 'cuda:N' or an int, not %s"
                            % type(device).__name__)
    d = device.strip().lower()
    if d == "cpu":
        return -1
    if d == "cuda":
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                return torch.cuda.current_device() + 1
        except Exception:
            pass
        local = os.environ.get("LOCAL_RANK", "")
        return (check_int("device 'cuda' = the environment's LOCAL_RANK", int(local), 0,
                          INT64_MAX - 1) if local.isdigit() else 0) + 1
    if d.startswith("cuda:") and d[5:].isdigit():
        return check_int("device %r" % device, int(d[5:]), 0, INT64_MAX - 1) + 1
    raise ValueError("device must be None, 'cpu', 'cuda' or 'cuda:N', got %r" % device)


def _seed(value):
    return value & ((1 << 64) - 1)  # an int64_t holding the 64 bits of the seed


def _enum_name(table):
    return lambda value: table.name(value, str(value))


def _option_value(option):
    """How a value of stoker_loader_get_int reads in Python, by the option's row of the
    library's table: a name for an option an enum names, a bool for a flag (0 or 1), else
    an int."""
    if option.values is not None:
        return _enum_name(option.values)
    if option.type == _lib.OPTION_INT and (option.min, option.max) == (0, 1):
        return bool
    return int


# How a value of stoker_loader_get_int reads in Python, by option.
_OPTION_VALUE = {name: _option_value(o) for name, o in _lib.OPTIONS.items()}
_OPTION_VALUE.update({
    "seed": _seed,
    "device": lambda value: "cpu" if value < 0 else _device_name(value - 1),
})


# The keywords that set several float options: their options' suffixes, in order.
_GROUPED = {"mean": ("r", "g", "b"), "std": ("r", "g", "b"), "scale": ("min", "max"),
            "ratio": ("min", "max")}


def _grouped_floats(name, value):
    """[(option, number)] of keyword `name` (mean, std, scale or ratio) given `value`, one
    number per part, else TypeError naming the parts."""
    parts = _GROUPED[name]
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or \
            len(value) != len(parts) or \
            any(is_bool(v) or not isinstance(v, (int, float)) and not hasattr(v, "__float__")
                for v in value):
        raise TypeError("%s must be %s numbers (%s)" % (
            name, {2: "two", 3: "three"}[len(parts)],
            ", ".join(p.upper() if len(p) == 1 else p for p in parts)))
    return [("%s_%s" % (name, p), v) for p, v in zip(parts, value)]  # set_float checks each


def _dist_defaults(rank, world_size):
    """Fills rank/world_size from torch.distributed when it is imported and initialised."""
    if rank is not None and world_size is not None:
        return rank, world_size
    td = sys.modules.get("torch.distributed")
    try:
        if td is not None and td.is_available() and td.is_initialized():
            if rank is None:
                rank = td.get_rank()
            if world_size is None:
                world_size = td.get_world_size()
    except Exception:
        pass
    return rank, world_size


# The readable fields of a state_dict beside its "state" bytes, and the largest value of
# each integer (the C API's int64_t; a seed is 64 bits).
_STATE_INTS = {"epoch": INT64_MAX, "position": INT64_MAX, "seed": (1 << 64) - 1,
               "batch_size": INT64_MAX, "rank": INT64_MAX, "world_size": INT64_MAX}
_STATE_BOOLS = ("shuffle", "drop_last")


def _check_state_types(state):
    """The readable fields of a state_dict, type- and range-checked (TypeError, ValueError
    naming the field)."""
    out = {}
    for key, value in state.items():
        name = "state_dict[%r]" % key
        if key in _STATE_INTS:
            out[key] = check_int(name, value, 0, _STATE_INTS[key])
        elif key in _STATE_BOOLS:
            out[key] = check_bool(name, value)
        elif key == "order":
            if not isinstance(value, str):
                raise TypeError("%s must be a str, not %s" % (name, type(value).__name__))
            out[key] = value
    return out


# Loader options of the library's table that are not keywords (batch_size is the second
# parameter): dist_env is always on
# (rank and world size come from torch.distributed, else RANK/WORLD_SIZE); max_records and
# max_shards bound the shard index a loader opens, and no data set stoker writes nears them;
# the normalisation's floats are the keywords mean=(r, g, b) and std=(r, g, b), the train
# crop's ranges scale=(min, max) and ratio=(min, max), as torchvision's.
_NOT_KEYWORDS = ("batch_size", "dist_env", "max_records", "max_shards",
                 "mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b",
                 "scale_min", "scale_max", "ratio_min", "ratio_max")
# Every keyword of Loader: the table's loader options, mean, std, scale and ratio.
_KEYWORDS = tuple(table_keywords(_lib.FOR_LOADER, _NOT_KEYWORDS)) + tuple(_GROUPED)
# The parameters Loader took by position before its keywords came from the table, in that
# order (an option added since is keyword-only).
_POSITIONAL = (
    "shuffle", "seed", "transform", "size", "resize", "dtype", "layout", "device", "rank",
    "world_size", "drop_last", "threads", "depth", "on_corrupt", "backend", "direct_io",
    "mean", "std", "epoch", "read_ahead", "simd", "dct", "max_record_size", "max_pixels",
    "h5_images", "h5_labels", "device_buffers", "order", "gpu_normalize", "antialias",
    "resampler", "dct_scale", "max_cache", "decoder", "cache_dir", "cache_limit", "block_size",
    "fetch_window", "fetch_transfers", "fetch_retries", "fetch_retry_ms", "fetch_timeout_ms",
    "ca_bundle", "http_header", "s3_region", "s3_endpoint", "fetch_clients")


class _Epoch:
    """Iterator over the rest of the loader's current epoch."""

    def __init__(self, loader):
        self._loader = loader
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        if self.done:
            raise StopIteration
        try:
            got = self._loader._next()
        except BaseException:
            self.done = True  # a loop stopped by an error is over; the next one continues
            raise
        if got is None:
            self.done = True
            raise StopIteration
        batch, held, handout, token = got
        held[handout] = handout.owner = token  # handed over: no signal is checked after this
        return batch


class Loader:
    """Streams batches of a stoker data set.

    ``Loader(path, batch_size, shuffle=True, seed=0, transform=None, size=None, resize=None,
    dtype=None, layout=None, device=None, rank=None, world_size=None, drop_last=False,
    threads=None, depth=None, on_corrupt="error", backend="auto", direct_io=False, mean=None,
    std=None, epoch=0)``

    Defaults (docs/SEMANTICS.md; the loader's properties below say what they resolved to):
    ``size`` None = 224, ``resize`` None = round(size * 256 / 224); ``transform`` None =
    ``"train"`` for JPEG data sets, none for raw records (``"none"`` keeps encoded bytes;
    ``"eval"``, ``"resize"``, ``"letterbox"``: the whole image, its long side ``size``, at the
    top left of a black ``size`` x ``size`` sample); ``dtype`` None = float16 for images, the stored dtype for raw
    records; ``layout`` "NCHW"; ``device`` None
    = GPU 0 (or ``LOCAL_RANK``) when a GPU is usable, else "cpu" (also "cuda", "cuda:N", an
    int); ``rank``/``world_size`` None = torch.distributed's when it is initialised, else
    the ``RANK``/``WORLD_SIZE`` environment variables, else 0/1; ``batch_size`` is per rank;
    ``threads`` None = the rank's cores - 1 (the affinity mask's CPUs, fewer under a cgroup
    CPU quota, divided among ``LOCAL_WORLD_SIZE`` ranks; cores - 3 under decoder "auto"
    beside a GPU, on 8 cores or more; ``stats()["threads_note"]`` says how); ``depth`` None = the library's (4; for image transforms
    from 4 to 16 slots by threads and batch size; ``loader.depth`` says which);
    ``mean``/``std`` (three floats) ImageNet's; ``scale``/``ratio`` (two floats, min and
    max, as torchvision's RandomResizedCrop takes them) the train transform's crop: a share
    of the image's area in (0, 1] (None = (0.08, 1)) and a width/height ratio drawn
    log-uniformly (None = (3/4, 4/3)); ``fields`` None = every field: the names a
    batch holds, a list (or a comma-separated str), delivered in schema order;
    ``field_dtypes`` a dict (or "NAME=DTYPE,..." str) converting fields' dtypes, such as
    ``{"mask": "int64", "boxes": "float16"}`` (docs/SEMANTICS.md); ``order``
    "records" (a permutation of all records) or "blocks" (a permutation of blocks of
    consecutive ids, each block's records together: a chunk's rows for chunked HDF5,
    docs/HDF5.md; four fetched blocks' records for a remote data set, docs/REMOTE.md).
    ``gpu_normalize`` True: ``(x/255 - mean)/std`` runs on the GPU, so only
    uint8 crosses PCIe (JPEG pipelines and uint8 [H, W, 3] records; needs a GPU device).
    ``antialias`` None = "over2x" (bilinear, antialiased only along an axis shrunk by more
    than 2x; below that two-tap interpolation, as torchvision's ``antialias=False``) or
    "always" (antialiased at every shrink, as Pillow and torchvision's ``antialias=True``:
    more taps, slower). ``resampler`` None = "fast" (the weights rounded to 16 bits, as
    torchvision's uint8 tensor resize does: a pixel may differ from Pillow's by 1) or
    "pillow" (Pillow's 22-bit weights). ``antialias="always", resampler="pillow"`` equals
    Pillow's (and torchvision's) resize of the same decoded pixels exactly. ``dct_scale``
    None = "train" (a crop at least 2x, 4x or 8x the output along both axes is decoded
    at 1/2, 1/4 or 1/8 in libjpeg's IDCT, as Pillow's draft mode does, in the train
    transform only), "always" (eval and resize too) or "never"; ``stats()["reduced"]``
    counts such images. ``max_cache`` None = half the memory available: bytes of page
    cache the data set may fill; a larger data set is read dropping its pages behind the
    reader (buffered reads), so the cache keeps what is still to come and never pushes the
    training job's memory out; ``stats()["dropped_bytes"]`` counts the bytes dropped.
    ``decoder`` None = "auto": who decodes JPEGs. "auto": the hardware JPEG decoder of the
    batches' GPU (nvJPEG) takes what the CPU workers cannot give the training step (its
    share rises while the consumer waits for batches with the workers busy and falls while
    batches wait for the consumer; ``stats()["decoder_note"]`` says why it is what it is),
    when batches go to a GPU that has one and the data set's JPEGs were checked when
    packed (``Dataset.jpeg_checked``; the hardware decoder reports no damaged data), else
    the workers alone; "gpu": every record the hardware decoder can take goes to the GPU,
    checked or not; "cpu": the workers alone. A data set of several fields offers its image
    field when it is a JPEG (its masks and boxes follow the image's crop whichever side
    decodes it); PNG images are the workers' alone.
    ``loader.decoder`` is the one in effect ("cpu" where the GPU decodes none, with the
    reason in ``stats()["decoder_note"]``); ``stats()`` counts the images each side decoded.

    ``for batch in loader`` runs to the end of the current epoch (a loop broken off early
    is continued by the next one); the next loop runs the next epoch. ``len(loader)`` is
    the number of batches per epoch on this rank. ``set_epoch(e)`` restarts at epoch e;
    ``state_dict()``/``load_state_dict()`` save and resume mid-epoch; ``stats()``;
    ``close()`` (or ``with``). Batches and their lifetime: see Batch and the module doc.

    Ctrl-C (KeyboardInterrupt) while ``next`` waits for a batch stops the loop once the
    library returns, and loses nothing: the batch that call got is delivered by the next
    call (a new ``for`` loop continues the epoch with it); until then ``epoch``,
    ``position`` and ``state_dict()`` do not count it, and ``set_epoch`` or
    ``load_state_dict`` releases it. The batches delivered over an interrupted run, and the
    state saved after an interrupt, are an uninterrupted run's (docs/SEMANTICS.md).

    What the loader runs with, defaults resolved (read-only, from the library): ``depth``,
    ``threads``, ``batch_size``, ``seed``, ``shuffle``, ``drop_last``, ``order``, ``rank``,
    ``world_size``, ``backend`` (the one in use), ``simd``, ``on_corrupt``, ``device``
    ("cpu" or "cuda:N"), ``max_cache`` (bytes) and, where the image pipeline runs (else
    None), ``transform``, ``size``, ``resize``, ``dtype``, ``layout``, ``dct``,
    ``antialias``, ``resampler``, ``dct_scale``, ``decoder``, ``mean`` and ``std``.
    ``dtype`` is that of the batches: also for raw records, and ``transform`` is "none"
    where no image transform runs.

    Any thread may call any method: the loader takes them one at a time, a call waiting
    for the one in progress (``set_epoch`` from a second thread applies between two of the
    consumer's batches); ``stats()`` never waits for a ``next``.
    """

    def __init__(self, path: Union[str, bytes, os.PathLike], batch_size: int, *args: Any,
                 **options: Any) -> None:
        # The keywords are the library's table's loader options (_KEYWORDS, the signature
        # below); those the binding spells or resolves its own way are taken out first.
        kw = bind("Loader()", args, options, _POSITIONAL, _KEYWORDS)
        self._core = None
        self._active = None
        raw_path = check_path("path", path)
        self.path = os.fsdecode(raw_path)
        self._shown = _lib.shown(self.path)  # for messages: no password
        rank, world_size = _dist_defaults(kw.pop("rank", None), kw.pop("world_size", None))
        seed, device, dtype = kw.pop("seed", None), kw.pop("device", None), kw.pop("dtype", None)
        grouped = [(name, kw.pop(name, None)) for name in _GROUPED]
        opt = _lib.OPTION
        # (option, value or None to leave the library's default); the library checks each
        # against its table's range and names the range when it refuses one
        ints = [
            ("batch_size", check_int("batch_size", batch_size)),
            # the C seed is 64 bits
            ("seed", None if seed is None else check_int("seed", seed, 0, (1 << 64) - 1)),
            ("dist_env", 1),
            ("rank", check_int("rank", rank, allow_none=True)),
            ("world_size", check_int("world_size", world_size, allow_none=True)),
            ("device", _device_option(device)),
            ("dtype", None if dtype is None else dtype_code(dtype)),
        ]
        with Config() as cfg:
            for name, value in ints:
                if value is not None:
                    # a seed from 2**63 up is the same 64 bits as a negative int64_t
                    cfg.set_int(opt[name], value - (1 << 64) if value >= 1 << 63 else value)
            for name, value in grouped:
                if value is not None:
                    for option, v in _grouped_floats(name, value):
                        cfg.set_float(opt[option], v)
            fields = kw.get("fields")
            if isinstance(fields, (list, tuple)):
                if not all(isinstance(f, str) for f in fields):
                    raise TypeError("fields must be a str or a list of str")
                kw["fields"] = ",".join(fields)
            dtypes = kw.get("field_dtypes")
            if isinstance(dtypes, dict):  # {"mask": "int64", "boxes": np.float16}
                if not all(isinstance(f, str) for f in dtypes):
                    raise TypeError("field_dtypes' keys must be field names (str)")
                kw["field_dtypes"] = ",".join(
                    "%s=%s" % (f, _lib.DTYPE.name(dtype_code(t))) for f, t in dtypes.items())
            set_options(cfg, kw)
            core = _Core()
            rc = _L.stoker_loader_create(ctypes.byref(core.handle), raw_path, cfg.handle)
        if rc != 0:
            msg = core.errmsg()
            core.destroy()
            if self._shown not in msg:
                msg = "%s: %s" % (self._shown, msg) if msg else self._shown
            raise error(rc, msg)
        self._core = core
        # readable after close too
        self._batch_size = self._option(core, "batch_size")
        self._depth = self._option(core, "depth")
        size = ctypes.c_size_t()
        _L.stoker_loader_state_save(core.handle, None, 0, ctypes.byref(size))
        core.state_size = size.value
        core.cap = self._batch_size
        core.buf_type = ctypes.c_int64 * (3 * core.cap + 1) if _np is not None else None
        core.names = [f["name"] for f in self.fields]

    # ---- helpers ----

    def _core_here(self):
        """The core; ValueError once the loader is closed, StateError in a forked process."""
        core = self._core
        if core is None:
            raise ValueError("the loader is closed")
        if core.forked():
            raise StateError(_lib.E_STATE, _FORKED % ("loader", core._pid, "Loader"))
        return core

    @contextlib.contextmanager
    def _consumer(self):
        """The core, with its consumer lock held (a call from another thread waits for the
        one in progress); ValueError once the loader is closed."""
        core = self._core_here()
        with core.calls:
            if core.closing or not core.handle:
                raise ValueError("the loader is closed")
            yield core

    @contextlib.contextmanager
    def _observer(self):
        """The core, for the calls the C loader allows from any thread at any time (stats):
        they wait only for a release or the destruction in progress, not for next()."""
        core = self._core_here()
        with core.lock:
            if core.closing or not core.handle:
                raise ValueError("the loader is closed")
            yield core

    def _fail(self, rc, core=None):
        core = core or self._core
        raise error(rc, core.errmsg() if core is not None else "")

    def _restart(self, core, fn, *args):
        """Runs a restart (set_epoch, state restore): a batch an interrupted next() left
        undelivered is released first; batches still held stay valid (the library needs
        their slots last). The caller holds core.calls."""
        self._drop_leftover(core)
        core.sweep()
        rc = fn(core.handle, *args)
        if rc != 0:
            self._fail(rc, core)

    # ---- iteration ----

    def __iter__(self) -> Iterator[Batch]:
        with self._consumer():
            act = self._active() if self._active is not None else None
            if act is not None and not act.done:
                raise RuntimeError("this loader is already being iterated: finish (or "
                                   "delete) the previous iterator before starting another")
            it = _Epoch(self)
            self._active = weakref.ref(it)
            return it

    def __next__(self) -> Batch:
        """The next batch of the current epoch; StopIteration at its end."""
        got = self._next()
        if got is None:
            raise StopIteration
        batch, held, handout, token = got
        held[handout] = handout.owner = token  # handed over: no signal is checked after this
        return batch

    def _next(self):
        """None at the epoch's end, else (batch, held, handout, token): the caller hands the
        batch over with ``held[handout] = handout.owner = token`` just before returning it
        (see _Handout), after the consumer lock is let go."""
        t0 = time.perf_counter()
        label = _profiler_label()
        if label is not None:
            with label:  # the wait shows in torch.profiler's trace
                return self._next_counted(t0)
        return self._next_counted(t0)

    def _next_counted(self, t0):
        # _consumer() inlined: next() is the one call made every step
        core = self._core_here()
        with core.calls:
            if core.closing or not core.handle:
                raise ValueError("the loader is closed")
            return self._counted(core, t0, self._next_locked(core))

    @staticmethod
    def _counted(core, t0, got):
        """got, once the binding's own time in this next() (since t0, less its time in the
        library's next calls, which the library counts) is added to the consumer's wait: the
        window's wait share is then the loop's whole time in next()."""
        spent = time.perf_counter() - t0 - core.in_next
        core.in_next = 0.0
        if _ADD_WAIT is not None and spent > 0:
            _ADD_WAIT(core.handle, spent)
        return got

    def _free_slot(self, core, h):
        """The next batch's slot is held (the ring rule): frees it and calls next again.
        Held batches are collected if unreachable, else the oldest (whose slot comes first)
        has its memory detached from its slot without a copy (_Core.detach), its holders
        (the Batch, arrays, tensors) keeping it, and its slot is given back. With a library
        that cannot detach, a batch that only its Batch holds is copied out of its slot, and
        one that an array or tensor holds stops the loop with StateError. The caller holds
        core.calls."""
        gc.collect()
        core.sweep()
        while True:
            rc = self._wait_next(core, h)
            if rc != _lib.E_STATE or not core.outstanding:
                return rc
            with core.lock:
                oldest = min(core.held, key=lambda o: o.serial, default=None)
            if oldest is None:
                continue  # released meanwhile by another thread
            ref = oldest.owner() if oldest.owner is not None else None
            if ref is None:  # every holder gone, its release not run: give it back
                core.sweep()
                continue
            try:
                if core.detach(oldest, ref):
                    continue
            except Exception:  # no fresh memory for the slot: nothing was handed out
                core.pending = None
                raise
            data = oldest.data() if oldest.data is not None else None
            if data is None or not data._detach():
                core.pending = None
                raise StateError(rc, _HOLD_RULE % (oldest.epoch, oldest.position, self.depth))

    def _leftover(self, core):
        """The hand-out of a next() that an interrupt (or another exception) stopped before
        the batch was handed over, or None. One that a thread is still handing over is that
        thread's. The caller holds core.calls."""
        h = core.pending
        if h is None or h.owner is not None:
            return None
        if h.thread is not None and h.thread != threading.get_ident():
            return None
        return h

    def _drop_leftover(self, core):
        """Releases the batch an interrupted next() got and never delivered."""
        h = self._leftover(core)
        if h is not None:
            core.pending = None
            if h.out.value:  # nothing checks for a signal between the store and the call
                _L.stoker_batch_release(h.out)

    def _wait_next(self, core, h):
        """stoker_loader_next in steps of _WAIT_STEP_MS while the batch is not ready, so that
        a signal (KeyboardInterrupt, raised between two steps: nothing was consumed) or a
        close() from another thread is acted on within a step, whatever the loader waits
        for. A batch that is ready takes one call."""
        t_ = core.take
        if core.buf_type is not None:
            # the labels, ids and offsets land in the batch's own arrays, in the same call
            raw = core.buf_type()
            h.buf = _np.frombuffer(raw, dtype=_np.int64)
            t_.cap = cap = core.cap
            t_.labels = addr = ctypes.addressof(raw)
            t_.ids = addr + 8 * cap
            t_.offsets = addr + 16 * cap
        else:
            t_.cap = 0
            t_.labels = t_.ids = t_.offsets = None
        out = ctypes.byref(h.out)
        while True:
            t = time.perf_counter()
            rc = _TAKE(core.handle, out, _WAIT_STEP_MS, core.take_ref)
            core.in_next += time.perf_counter() - t
            if rc != _lib.AGAIN:
                return rc
            if core.stopping:
                raise ValueError("the loader was closed while next() waited")

    def _next_locked(self, core):
        core.in_next = 0.0  # a next() that raised left its time here uncounted
        core.sweep()
        h = self._leftover(core)
        t = core.take
        if h is not None and not h.out.value:
            # The interrupted call handed out nothing: it never ran (the take's epoch is
            # still the -1 set before it), or its batch failed (consumed, as ever), or it
            # ended the epoch, which this call reports.
            core.pending = None
            if t.epoch >= 0 and self._c_position(core)[0] != t.epoch:
                return None
            h = None
        if h is None:
            h = _Handout()
            # the library writes where it stood once the call runs: set before the hand-out
            # is pending, so a pending one's -1 means its call never ran
            t.epoch = -1
            core.pending = h  # from here the library's batch is kept, whatever happens
            rc = self._wait_next(core, h)
            if rc == _lib.E_STATE and core.outstanding:
                rc = self._free_slot(core, h)
            if rc != 0:
                core.pending = None
                if rc == _lib.END:
                    return None
                self._fail(rc, core)
        # A hand-out an interrupt left pending is the latest take's: no take runs until the
        # hand-out is delivered or released, so the take still describes its batch.
        v = t.view
        ref = _BatchRef(core, h, v.device)
        batch = Batch(ref, v, t, h.buf, core)
        h.epoch = batch.epoch
        h.position = batch.position
        h.data = weakref.ref(batch._tensors)
        h.serial = core.handouts
        core.handouts += 1
        token = weakref.ref(ref)
        h.thread = threading.get_ident()
        return batch, core.held, h, token

    # ---- epoch, size, state ----

    def __len__(self) -> int:
        n = ctypes.c_int64()
        with self._consumer() as core:
            rc = _L.stoker_loader_num_batches(core.handle, ctypes.byref(n))
            if rc != 0:
                self._fail(rc, core)
        return n.value

    @property
    def num_records(self) -> int:
        """Records per epoch on this rank (padding included)."""
        n = ctypes.c_int64()
        with self._consumer() as core:
            rc = _L.stoker_loader_num_records(core.handle, ctypes.byref(n))
            if rc != 0:
                self._fail(rc, core)
        return n.value

    @property
    def fields(self) -> List[Dict[str, Any]]:
        """The fields every batch holds, in schema order: one dict each with ``name``,
        ``kind`` ("jpeg", "png", "raw", "array", "bytes", "int64", "float32"), ``tie``
        (None, "mask_of", "boxes_of", "rows_of"), ``dtype``, ``shape`` (a batch's: the batch
        size first; a ragged field's values ``[None, *row_shape]``), ``ragged`` and
        ``device``."""
        out = []
        with self._consumer() as core:
            for i in range(_L.stoker_loader_num_fields(core.handle)):
                fv = _lib.FieldView()
                fv.struct_size = ctypes.sizeof(fv)
                rc = _L.stoker_loader_field(core.handle, i, ctypes.byref(fv))
                if rc != 0:
                    self._fail(rc, core)
                shape = [int(fv.shape[k]) for k in range(fv.ndim)]
                ragged = bool(shape) and shape[0] < 0
                if shape and shape[0] < 0:
                    shape[0] = None
                out.append({"name": fv.name.decode(),
                            "kind": _lib.FIELD_KINDS.get(fv.kind, str(fv.kind)),
                            "tie": _lib.FIELD_TIES.get(fv.tie), "dtype":
                            _lib.DTYPE.name(int(fv.dtype), "unknown"), "shape": tuple(shape),
                            "ragged": ragged, "device": _device_name(fv.device)})
        return out

    def _state_blob(self, core):
        """The loader's saved state (stoker_loader_state_save), from before the batch an
        interrupted next() has not delivered yet. The caller holds core.calls."""
        h = self._leftover(core)
        if h is not None and h.out.value:
            return self._c_state_blob(core, _L.stoker_batch_state_save, h.out)
        return self._c_state_blob(core)

    def _c_state_blob(self, core, save=_L.stoker_loader_state_save, of=None):
        """The C loader's saved state (`save` of `of`: stoker_batch_state_save of a batch
        gives it at that batch). The caller holds core.calls."""
        of = core.handle if of is None else of
        if core.state_size:
            buf = ctypes.create_string_buffer(core.state_size)
            rc = save(of, buf, len(buf), None)
            if rc == 0:
                return buf.raw
        size = ctypes.c_size_t()
        rc = save(of, None, 0, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        if rc in (0, _lib.E_LIMIT):
            rc = save(of, buf, len(buf), ctypes.byref(size))
        if rc != 0:
            self._fail(rc, core)
        return buf.raw[:size.value]

    def _position(self, core):
        """(epoch, batches of it handed out), from the consumer's side (core.calls held):
        before the batch an interrupted next() has not delivered yet."""
        h = self._leftover(core)
        if h is not None and h.out.value:
            return _L.stoker_batch_epoch(h.out), _L.stoker_batch_position(h.out)
        return self._c_position(core)

    def _c_position(self, core):
        """The C loader's (epoch, position). The caller holds core.calls."""
        epoch, position = ctypes.c_int64(), ctypes.c_int64()
        rc = _L.stoker_loader_position(core.handle, ctypes.byref(epoch), ctypes.byref(position))
        if rc != 0:
            self._fail(rc, core)
        return epoch.value, position.value

    @property
    def epoch(self) -> int:
        """The epoch the next batch comes from."""
        with self._consumer() as core:
            return self._position(core)[0]

    @property
    def position(self) -> int:
        """Batches consumed in the current epoch."""
        with self._consumer() as core:
            return self._position(core)[1]

    def set_epoch(self, epoch: int) -> None:
        """Restarts at the beginning of `epoch`. A no-op when the loader already stands at
        the start of that epoch (after the previous epoch's end), which keeps its
        read-ahead, and right after ``load_state_dict`` of a state saved in `epoch` (no
        batch taken since): the restored epoch goes on from the restored position, so the
        resumed loop ``for e in range(start, E): loader.set_epoch(e); for b in loader:``
        continues it. Batches still held (a loop variable after ``break``) stay valid."""
        epoch = check_int("epoch", epoch, 0)
        with self._consumer() as core:
            if self._position(core) == (epoch, 0):
                return
            self._restart(core, _L.stoker_loader_set_epoch, epoch)

    def _state_fields(self, core):
        """The readable fields of a state_dict: where the loader stands and the options a
        saved state carries."""
        epoch, position = self._position(core)
        d = {"epoch": epoch, "position": position}
        for name in ("seed", "rank", "world_size", "batch_size", "shuffle", "drop_last",
                     "order"):
            d[name] = self._option(core, name)
        return d

    def state_dict(self) -> Dict[str, Any]:
        """Where the loader stands: ``{"state": bytes, "epoch", "position", "seed", "rank",
        "world_size", "batch_size", "shuffle", "drop_last", "order"}``; only "state" is used
        to resume."""
        with self._consumer() as core:
            d = {"state": self._state_blob(core)}
            d.update(self._state_fields(core))
            return d

    def load_state_dict(self, state: Union[Dict[str, Any], bytes]) -> None:
        """Continues from a state_dict() (or its "state" bytes): the following batches are
        those an uninterrupted loader would have delivered; a following ``set_epoch`` of
        the restored epoch keeps that position. Batches still held stay valid.
        The library checks the state; a state_dict whose other fields disagree with it
        (edited: they are not restored) is refused with ValueError, the loader unchanged."""
        blob = state.get("state") if isinstance(state, dict) else state
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError("load_state_dict takes a state_dict() or its 'state' bytes")
        blob = bytes(blob)
        fields = _check_state_types(state) if isinstance(state, dict) else {}
        with self._consumer() as core:
            before = self._state_blob(core) if fields else None
            self._restore(core, blob)
            now = self._state_fields(core) if fields else {}
            wrong = [key for key in fields if key in now and fields[key] != now[key]]
            if wrong:
                self._restore(core, before)
                key = wrong[0]
                raise ValueError("state_dict[%r] is %r but its 'state' holds %r: only 'state' "
                                 "is restored, so a state_dict must be loaded as it was saved"
                                 % (key, fields[key], now[key]))

    def _restore(self, core, blob):
        self._restart(core, _L.stoker_loader_state_restore, blob, len(blob))

    # ---- what the loader runs with ----

    def _option(self, core, name):
        """Option `name` as the loader resolved it (stoker_loader_get_int), in Python's
        terms: a name for enums, a bool for flags, "cpu"/"cuda:N" for the device; None where
        it does not apply (image options of records that are not transformed)."""
        v = ctypes.c_int64()
        rc = _L.stoker_loader_get_int(core.handle, _lib.OPTION[name], ctypes.byref(v))
        if rc == _lib.E_UNSUPPORTED:
            return None
        if rc != 0:
            self._fail(rc, core)
        return _OPTION_VALUE.get(name, int)(v.value)

    def _get(self, name):
        with self._observer() as core:
            return self._option(core, name)

    def _float(self, name):
        """Float option `name` as the loader resolved it, or None where it does not apply."""
        v = ctypes.c_double()
        with self._observer() as core:
            rc = _L.stoker_loader_get_float(core.handle, _lib.OPTION[name], ctypes.byref(v))
            if rc == _lib.E_UNSUPPORTED:
                return None
            if rc != 0:
                self._fail(rc, core)
        return v.value

    def _floats(self, prefix, ends="rgb"):
        out = []
        with self._observer() as core:
            for channel in ends:
                v = ctypes.c_double()
                rc = _L.stoker_loader_get_float(core.handle, _lib.OPTION[prefix + channel],
                                                ctypes.byref(v))
                if rc == _lib.E_UNSUPPORTED:
                    return None
                if rc != 0:
                    self._fail(rc, core)
                out.append(v.value)
        return tuple(out)

    @property
    def batch_size(self) -> int:
        """Records per batch on this rank (readable after close too)."""
        return self._batch_size

    @property
    def depth(self) -> int:
        """Batch slots, the ring of the lifetime rule (readable after close too)."""
        return self._depth

    @property
    def seed(self):
        return self._get("seed")

    @property
    def shuffle(self):
        return self._get("shuffle")

    @property
    def drop_last(self):
        return self._get("drop_last")

    @property
    def order(self):
        return self._get("order")


    @property
    def backend(self):
        """The back-end in use: "io_uring" or "pread" (the loader's reader), "hdf5" where
        libhdf5 reads the records (an HDF5 file in a layout stoker does not map: docs/HDF5.md),
        or "remote" where the remote source reads them from its block cache (docs/REMOTE.md).
        Read from the library's statistics (stoker_stats.backend), as ``stats()["backend"]``:
        the option read back would name the reader even where the reader reads nothing."""
        st = _lib.Stats()
        st.struct_size = ctypes.sizeof(st)
        with self._observer() as core:
            rc = _L.stoker_loader_get_stats(core.handle, ctypes.byref(st))
        if rc != 0:
            raise error(rc, "stoker_loader_get_stats failed")
        return _OPTION_VALUE["backend"](st.backend)

    device = property(lambda self: self._get("device"), doc='"cpu" or "cuda:N".')
    max_cache = property(lambda self: self._get("max_cache"),
                         doc="Bytes of page cache the data set may fill.")
    dtype = property(lambda self: self._get("dtype"), doc="The dtype of the batches.")
    decoder = property(lambda self: self._get("decoder"),
                       doc='Who decodes the JPEGs, in effect: "cpu" when the GPU decodes '
                           'none (stats()["decoder_note"] says why), "gpu" or "auto".')
    mean = property(lambda self: self._floats("mean_"), doc="(R, G, B), or None.")
    std = property(lambda self: self._floats("std_"), doc="(R, G, B), or None.")
    scale = property(lambda self: self._floats("scale_", ("min", "max")),
                     doc="The train crop's share of the area, (min, max); None without images.")
    ratio = property(lambda self: self._floats("ratio_", ("min", "max")),
                     doc="The train crop's width/height ratio, (min, max); None without images.")

    # ---- stats ----

    def stats(self) -> Dict[str, Any]:
        """Loader statistics as a dict (stoker_loader_stats_json: one snapshot): every field
        of the library's table of statistics (listed below, as ``_lib.STATS_FIELDS`` holds
        them; enums by name, notes as str), plus ``window`` (window() over the last
        WINDOW_SECONDS) and ``overall`` (window() since create): rates, the consumer's wait
        share, each stage's busy share and the verdict. Does not wait for a next() in
        progress in another thread.

        """
        cap = 4096
        for _ in range(3):
            buf = ctypes.create_string_buffer(cap)
            need = ctypes.c_size_t()
            with self._observer() as core:
                rc = _L.stoker_loader_stats_json(core.handle, buf, cap, ctypes.byref(need))
            if rc == 0:  # one snapshot: the JSON carries the decoder's fields too
                out = json.loads(buf.value.decode())
                out["window"] = self.window(WINDOW_SECONDS)
                out["overall"] = self.window(0)
                return out
            if rc != _lib.E_LIMIT:
                raise error(rc, "stoker_loader_stats_json failed")
            cap = max(need.value, cap * 2)
        raise error(rc, "stoker_loader_stats_json: the statistics outgrew %d bytes" % cap)

    def window(self, seconds=WINDOW_SECONDS):
        """What the last ``seconds`` of the loader's life measured (0: since create), as a
        dict (stoker_loader_window): ``seconds`` (the span covered: shorter than asked early
        on; snapshots are taken by next() every half second and kept for 64 s), ``batches``,
        ``records``, ``bytes`` and their rates ``batches_per_sec``, ``records_per_sec``,
        ``bytes_per_sec``; ``wait_seconds`` and ``wait_share`` (the consumer's time in
        next(), the binding's own work included); ``ready_slots``; the busy shares
        ``workers_busy``, ``gpu_decode_busy``, ``h2d_busy``, ``fetch_wait_share``; the
        stages' seconds (``read_seconds``,
        ``crc_seconds``, ``decode_seconds``, ``transform_seconds``, ``h2d_seconds``,
        ``fetch_wait_seconds``); ``verdict`` (``"consumer"`` when the loader is ahead, else
        the limiting stage: ``"storage"``, ``"crc"``, ``"decode"``, ``"transform"``,
        ``"host-to-device copy"``, ``"network"``; ``"none"`` when nothing was delivered) and
        ``verdict_reason``."""
        w = _lib.Window()
        w.struct_size = ctypes.sizeof(w)
        with self._observer() as core:
            rc = _L.stoker_loader_window(core.handle, float(seconds), ctypes.byref(w))
        if rc != 0:
            raise error(rc, "stoker_loader_window failed")
        out = {}
        for name, _ in w._fields_[1:]:
            v = getattr(w, name)
            out[name] = v.decode() if isinstance(v, bytes) else v
        return out

    # ---- lifetime ----

    def close(self) -> None:
        """Stops the loader. Its memory is freed once every batch handed out has been
        released; arrays and tensors made from batches stay valid until then. Using the
        loader afterwards raises ValueError. Idempotent."""
        core, self._core = self._core, None
        if core is None:
            return
        if core.forked():
            core.close()
            return
        gc.collect() if core.outstanding else None
        core.stopping = True  # a next() waiting in another thread gives up within a step
        with core.calls:  # a call in progress in another thread ends first
            core.sweep()
            core.close()

    @property
    def closed(self) -> bool:
        return self._core is None

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self):
        # No gc.collect() here (close() runs one): the collector may be running this, and
        # at shutdown the module's globals may be gone.
        try:
            core, self._core = self._core, None
            if core is not None:
                core.close()
        except:  # noqa: E722 (at shutdown `Exception` may be None)
            pass

    def __repr__(self):
        try:
            batches = len(self)
        except ValueError:  # closed, also by another thread since
            return "Loader(%r, closed)" % self._shown
        return "Loader(%r, batch_size=%d, batches=%d)" % (self._shown, self.batch_size, batches)


if Loader.stats.__doc__:  # None under python -OO
    Loader.stats.__doc__ += "\n        ".join(_lib.stats_doc().splitlines()) + "\n"

# Loader options not read back as properties, each with why: the table's other loader
# options are, as the loader resolved them (an enum by name, a flag as a bool; None where
# the option does not apply), unless the class defines the property itself.
_NOT_PROPERTIES = (
    "dist_env",  # always on; rank and world_size are read back
    # limits on untrusted input: what was asked is what runs, nothing to report
    "max_record_size", "max_records", "max_pixels", "max_shards",
    # the reader's and the copy stage's machinery; stats() reports what they did
    "direct_io", "read_ahead", "device_buffers", "gpu_normalize",
    # names inside an HDF5 file, and remote data sets' settings, as given (stats() reports
    # the cache's)
    "h5_images", "h5_labels", "h5_fields", "cache_dir", "cache_limit", "block_size",
    "fetch_window", "fetch_transfers", "fetch_retries", "fetch_retry_ms", "fetch_timeout_ms",
    "ca_bundle", "http_header", "s3_region", "s3_endpoint", "fetch_clients",
    # as given; the fields property gives each field's dtype as delivered
    "field_dtypes",
    # read back together as mean, std, scale and ratio
    "mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b", "scale_min", "scale_max",
    "ratio_min", "ratio_max")


def _table_property(name):
    if _lib.OPTIONS[name].type == _lib.OPTION_FLOAT:
        return property(lambda self: self._float(name), doc=_lib.OPTIONS[name].doc)
    return property(lambda self: self._get(name), doc=_lib.OPTIONS[name].doc)


for _name in table_keywords(_lib.FOR_LOADER, _NOT_PROPERTIES):
    if not hasattr(Loader, _name):
        setattr(Loader, _name, _table_property(_name))

Loader.__init__.__signature__ = signature(("path", "batch_size"), _POSITIONAL, _KEYWORDS)
if Loader.__doc__:  # None under python -OO
    Loader.__doc__ += "\n    Keywords (the library's table of options; None: its default):\n\n    " + \
        "\n    ".join(keyword_doc(_KEYWORDS).splitlines()) + "\n"
