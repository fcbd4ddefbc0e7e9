# SPDX-License-Identifier: Apache-2.0
"""DLPack export and batch lifetime: zero copy, deleters, holding batches, the ring rule."""
import ctypes
import gc
import threading

import numpy as np
import pytest

import conftest as h
import stoker
from stoker import _dlpack


def guarded(fn, timeout=30):
    """Runs fn in a thread; fails (instead of hanging the run) if it does not return."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "deadlock: the call did not return in %ds" % timeout
    if "error" in box:
        raise box["error"]
    return box.get("value")


def managed_tensor(capsule):
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return _dlpack.DLManagedTensor.from_address(get(capsule, b"dltensor"))


def test_numpy_from_dlpack_is_zero_copy(raw_ds):
    with stoker.Loader(raw_ds, 10, device="cpu") as loader:
        b = next(iter(loader))
        assert b.data.__dlpack_device__() == (_dlpack.kDLCPU, 0)
        a1 = np.from_dlpack(b.data)
        a2 = b.numpy()
        assert a1.ctypes.data == b.data.data_ptr() == a2.ctypes.data
        assert np.shares_memory(a1, a2)
        assert a1.shape == (10,) + h.RECORD_SHAPE and a1.dtype == np.uint8
        assert list(h.record_id(a1)) == list(b.indices)
        del a1, a2, b


def test_capsule_fields(raw_ds):
    with stoker.Loader(raw_ds, 10, shuffle=False, device="cpu") as loader:
        b = next(iter(loader))
        before = _dlpack.live_exports()
        cap = b.data.__dlpack__()
        assert type(cap).__name__ == "PyCapsule"
        m = managed_tensor(cap)
        t = m.dl_tensor
        assert t.data == b.data.data_ptr()
        assert (t.device.device_type, t.device.device_id) == (_dlpack.kDLCPU, 0)
        assert t.ndim == 4 and [t.shape[i] for i in range(4)] == [10, 8, 8, 3]
        assert [t.strides[i] for i in range(4)] == [192, 24, 3, 1]
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (_dlpack.kDLUInt, 8, 1)
        assert t.byte_offset == 0 and m.deleter
        assert _dlpack.live_exports() == before + 1
        del m, t, cap  # destroyed unconsumed: its destructor runs the deleter
        assert _dlpack.live_exports() == before
        # the consumer protocol: rename, then call the deleter itself
        cap = b.data.__dlpack__(stream=None)
        m = managed_tensor(cap)
        rename = ctypes.pythonapi.PyCapsule_SetName
        rename.argtypes = [ctypes.py_object, ctypes.c_char_p]
        used = ctypes.c_char_p(b"used_dltensor")
        assert rename(cap, used) == 0
        deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(m.deleter)
        deleter(ctypes.addressof(m))
        assert _dlpack.live_exports() == before
        del cap  # renamed: its destructor must not call the deleter again
        assert _dlpack.live_exports() == before
        # export options of the protocol
        with pytest.raises(BufferError):
            b.data.__dlpack__(copy=True)
        with pytest.raises(BufferError):
            b.data.__dlpack__(dl_device=(_dlpack.kDLCUDA, 0))
        cap = b.data.__dlpack__(stream=-1, max_version=(1, 0), dl_device=(_dlpack.kDLCPU, 0))
        del cap
        with pytest.raises(TypeError):
            b.data.__dlpack__(stream="default")
        del b


@pytest.mark.parametrize("dtype, code, bits", [
    ("float32", _dlpack.kDLFloat, 32), ("float16", _dlpack.kDLFloat, 16),
    ("int64", _dlpack.kDLInt, 64), ("int16", _dlpack.kDLInt, 16),
    ("uint16", _dlpack.kDLUInt, 16), ("float64", _dlpack.kDLFloat, 64)])
def test_dtypes(tmp_path, dtype, code, bits):
    values = (np.arange(30 * 6).reshape(30, 2, 3) % 97 - 40).astype(dtype)
    path = stoker.Writer.from_array(str(tmp_path / dtype), values, labels=range(30), fsync=False)
    with stoker.Loader(path, 7, seed=1, device="cpu") as loader:
        for b in loader:
            arr = b.numpy()
            assert arr.dtype == np.dtype(dtype) and arr.shape == (b.count, 2, 3)
            assert np.array_equal(arr, values[b.indices])
            assert list(b.labels) == list(b.indices)
            cap = b.data.__dlpack__()
            t = managed_tensor(cap).dl_tensor
            assert (t.dtype.code, t.dtype.bits) == (code, bits)
            del t, cap


def test_bfloat16_is_for_torch(tmp_path):
    raw = np.arange(40 * 4, dtype=np.uint16).reshape(40, 4)
    path = str(tmp_path / "bf16")
    with stoker.Writer(path, kind="raw", dtype="bfloat16", shape=(4,), fsync=False) as w:
        for i in range(40):
            w.add(raw[i], i)
    with stoker.Loader(path, 8, device="cpu") as loader:
        b = next(iter(loader))
        assert b.dtype == "bfloat16"
        with pytest.raises(TypeError, match="bfloat16"):
            b.numpy()
        with pytest.raises(Exception):
            np.from_dlpack(b.data)  # numpy has no bfloat16
        cap = b.data.__dlpack__()
        t = managed_tensor(cap).dl_tensor
        assert (t.dtype.code, t.dtype.bits) == (_dlpack.kDLBfloat, 16)
        got = np.ctypeslib.as_array(ctypes.cast(t.data, ctypes.POINTER(ctypes.c_uint16)),
                                    shape=(8, 4))
        assert np.array_equal(got, raw[b.indices])
        del t, got, cap, b


def test_deleter_gives_slots_back(raw_ds):
    """depth 2: after every reference to a batch is dropped the loader goes on, batch after
    batch, whatever the batch was turned into."""
    def run():
        n = 0
        with stoker.Loader(raw_ds, 9, depth=2, seed=3, device="cpu") as loader:
            for epoch in range(4):
                for b in loader:
                    kind = n % 4
                    if kind == 0:
                        x = np.from_dlpack(b.data)
                    elif kind == 1:
                        x = b.data.__dlpack__()  # unconsumed capsule
                    elif kind == 2:
                        x = b.data
                    else:
                        x = b.numpy()[1:3]  # a view keeps the batch too
                    del b
                    n += 1
                    del x
        return n
    gc.collect()
    before = _dlpack.live_exports()
    n = guarded(run)
    assert n == 4 * 12
    gc.collect()
    assert _dlpack.live_exports() == before


def test_held_arrays_stay_intact(raw_ds):
    """depth 4: keep the arrays of the last 3 batches (not the Batch objects) across three
    epochs; every held array keeps its records' bytes while the loader refills the rest."""
    def run():
        window = []
        steps = 0
        with stoker.Loader(raw_ds, 8, depth=4, seed=5, device="cpu", threads=2) as loader:
            for epoch in range(3):
                for b in loader:
                    window.append((b.numpy(), b.indices.copy()))
                    del b
                    if len(window) > 3:
                        window.pop(0)
                    for arr, ids in window:
                        assert list(h.record_id(arr)) == list(ids)
                        for j, i in enumerate(ids):
                            assert np.array_equal(arr[j], h.record_array(int(i)))
                    steps += 1
        return steps
    assert guarded(run, 60) == 3 * 13


def test_holding_every_slot_goes_on(raw_ds):
    """Arrays of every slot's batch held: the next batch comes, each held batch's memory
    detached from its slot at the same address (no copy)."""
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            it = iter(loader)
            held = [next(it).numpy() for _ in range(3)]  # batches 0, 1, 2: every slot
            ptrs = [a.ctypes.data for a in held]
            b3 = next(it)
            assert list(b3.indices) == list(range(24, 32))
            for k, a in enumerate(held):
                assert a.ctypes.data == ptrs[k]
                assert list(h.record_id(a)) == list(range(8 * k, 8 * k + 8))
            return True
    assert guarded(run)


def test_holding_an_old_batch_goes_on(raw_ds):
    """Slots form a ring: an array of batch 0 kept while the others are dropped no longer
    stops the loader at batch `depth`; batch 0 keeps its memory and its address."""
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            it = iter(loader)
            first = next(it)
            arr = first.numpy()
            ptr = first.data.data_ptr()
            got = [list(next(it).indices) for _ in range(10)]
            assert got[-1] == list(range(80, 88))
            assert list(h.record_id(arr)) == list(range(8))
            assert first.data.data_ptr() == ptr == arr.ctypes.data
            del arr
            assert list(h.record_id(first.numpy())) == list(range(8))
            return True
    assert guarded(run)


@pytest.fixture
def no_detach(monkeypatch):
    """The binding as over a libstoker without stoker_batch_detach."""
    has = stoker.loader._lib.has
    monkeypatch.setattr(stoker.loader._lib, "has",
                        lambda name: name != "stoker_batch_detach" and has(name))


def test_holding_every_slot_raises_instead_of_hanging(raw_ds, no_detach):
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            it = iter(loader)
            held = [next(it).numpy() for _ in range(3)]  # batches 0, 1, 2: every slot
            with pytest.raises(RuntimeError, match="depth"):
                next(it)
            with pytest.raises(StopIteration):
                next(it)  # an iterator stopped by an error is over
            with pytest.raises(stoker.StateError):
                next(iter(loader))  # a new one meets the same rule
            del held[0]  # batch 0 goes back
            b3 = next(iter(loader))
            assert list(b3.indices) == list(range(24, 32))
            assert list(h.record_id(held[0])) == list(range(8, 16))
            return True
    assert guarded(run)


def test_holding_an_old_batch_raises_instead_of_hanging(raw_ds, no_detach):
    """Without detach: keeping an array of batch 0 while dropping the others stops the
    loader at batch `depth`, which must be reported, not waited on; the Batch object alone
    is copied out of its slot instead."""
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            it = iter(loader)
            first = next(it)
            arr = first.numpy()
            got = []
            with pytest.raises(RuntimeError, match="holds"):
                for _ in range(10):
                    got.append(list(next(it).indices))
            assert len(got) == 2
            assert list(h.record_id(arr)) == list(range(8))
            del arr
            ptr = first.data.data_ptr()
            assert list(next(iter(loader)).indices) == list(range(24, 32))  # copied out
            assert first.data.data_ptr() != ptr
            assert list(h.record_id(first.numpy())) == list(range(8))
            return True
    assert guarded(run)


def test_released_batch(raw_ds):
    with stoker.Loader(raw_ds, 8, shuffle=False, depth=2, device="cpu") as loader:
        it = iter(loader)
        b = next(it)
        arr = b.numpy()
        b.release()
        with pytest.raises(ValueError):
            b.data.__dlpack__()
        with pytest.raises(ValueError):
            b.numpy()
        b2 = next(it)
        assert list(b2.indices) == list(range(8, 16))
        del b2
        assert list(h.record_id(arr)) == list(range(8))  # still held by the array
        del arr
        for _ in range(5):
            next(it)


def test_arrays_outlive_the_loader(raw_ds):
    loader = stoker.Loader(raw_ds, 8, shuffle=False, device="cpu")
    b = next(iter(loader))
    arr = b.numpy()
    ids = b.indices.copy()
    del b
    loader.close()
    del loader
    gc.collect()
    assert list(h.record_id(arr)) == list(ids)
    assert np.array_equal(arr[3], h.record_array(int(ids[3])))
    del arr


def test_garbage_cycle_with_batches(raw_ds):
    """A cycle holding the loader, a batch and arrays is finalised in any order; the loader
    is freed only after its batches (never a release on a destroyed loader)."""
    def run():
        for _ in range(5):
            loader = stoker.Loader(raw_ds, 8, device="cpu", depth=3)
            it = iter(loader)
            b = next(it)
            cycle = [loader, it, b, b.numpy(), np.from_dlpack(next(it).data)]
            cycle.append(cycle)
            del loader, it, b, cycle
            gc.collect()
        return True
    gc.collect()
    before = _dlpack.live_exports()
    assert guarded(run)
    assert _dlpack.live_exports() == before


def test_default_device(raw_ds):
    """device=None: GPU 0 where one is usable, else host memory."""
    with stoker.Loader(raw_ds, 10, seed=1) as loader:
        b = next(iter(loader))
        assert b.device == loader.stats()["device"]
        if stoker.capabilities()["cuda_devices"] == 0:
            assert b.device == -1 and b.data.device == "cpu"
            assert list(h.record_id(b.numpy())) == list(b.indices)
        else:
            assert b.data.__dlpack_device__() == (_dlpack.kDLCUDA, b.device)
            with pytest.raises(TypeError, match="GPU"):
                b.numpy()
        del b
