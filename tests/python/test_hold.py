# SPDX-License-Identifier: Apache-2.0
"""Batches, and arrays and tensors made from them, kept past the ring's depth: the loader
goes on (the kept batch's memory is detached from its slot, without a copy), every kept
array still holds its records, and the memory is freed once the last holder is gone."""
import gc
import sys

import numpy as np
import pytest

import conftest as h
import stoker
from stoker import loader as stoker_loader
from test_habits import check_records, guarded

DEPTH = 3


def detached_live():
    """Detached batch memories not freed yet."""
    gc.collect()
    return getattr(getattr(stoker_loader, "_Memory", None), "live", 0)


def test_tensors_kept_past_the_depth(raw_ds):
    torch = pytest.importorskip("torch")

    def run():
        start = detached_live()
        with stoker.Loader(raw_ds, 8, depth=DEPTH, seed=3, device="cpu") as loader:
            kept = []
            for epoch in range(3):  # several times the depth, over epochs
                loader.set_epoch(epoch)
                kept += [(torch.from_dlpack(b.data), b.indices, b.data.data_ptr())
                         for b in loader]
            assert len(kept) == 3 * 13
            for t, ids, ptr in kept:
                assert t.data_ptr() == ptr  # zero copy: the tensor is the batch's memory
                check_records(t.numpy(), ids)
            assert len({ptr for _, _, ptr in kept}) == len(kept)
            assert detached_live() - start >= len(kept) - DEPTH
        for t, ids, _ in kept:  # the loader closed: the tensors still hold their records
            check_records(t.numpy(), ids)
        del kept, t
        assert detached_live() == start
        return True
    assert guarded(run)


def test_numpy_arrays_and_unpacked_fields_kept(raw_ds, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)

    def run():
        start = detached_live()
        with stoker.Loader(raw_ds, 8, depth=DEPTH, seed=5, device="cpu") as loader:
            arrays = [(np.from_dlpack(b.data), b.indices) for b in loader]
            pairs = [(x, y) for x, y in loader]  # y: the batch's label field
            assert len(arrays) == len(pairs) == 13
            for a, ids in arrays:
                check_records(a, ids)
            for x, y in pairs:
                ids = h.record_id(x)
                check_records(x, ids)
                assert list(y) == [h.label_of(int(i)) for i in ids]
        del arrays, pairs, a, x, y
        assert detached_live() == start
        return True
    assert guarded(run)


def test_a_list_of_batches_and_first_then_a_loop(raw_ds):
    def run():
        start = detached_live()
        with stoker.Loader(raw_ds, 8, depth=DEPTH, shuffle=False, device="cpu") as loader:
            batches = list(loader)
            first = next(iter(loader))
            rest = list(loader)
            assert [b.position for b in batches] == list(range(13))
            assert first.position == 0 and [b.position for b in rest] == list(range(1, 13))
            for b in batches + [first] + rest:
                check_records(b.numpy(), b.indices)
                assert np.array_equal(np.from_dlpack(b["label"]),
                                      [h.label_of(int(i)) for i in b.indices])
            data = first.numpy()
            first.release()  # an array made from it keeps the memory
            check_records(data, range(8))
        del batches, first, rest, b, data
        assert detached_live() == start
        return True
    assert guarded(run)


def test_memory_freed_lets_fresh_loaders_run(raw_ds):
    """Detached memory dropped with the loader still open, then loaders over and over."""
    torch = pytest.importorskip("torch")

    def run():
        start = detached_live()
        for seed in range(3):
            with stoker.Loader(raw_ds, 8, depth=DEPTH, seed=seed, device="cpu") as loader:
                kept = [torch.from_dlpack(b.data) for b in loader]
                assert detached_live() > start
                del kept
                assert detached_live() == start
                assert len([b.position for b in loader]) == 13
        return True
    assert guarded(run)


def cuda_usable():
    torch = sys.modules.get("torch")
    return (torch is not None and torch.cuda.is_available()
            and stoker.capabilities()["cuda_devices"] > 0)


def test_device_tensors_kept_past_the_depth(raw_ds):
    """The same on the device: kept tensors (data and the label field) keep their records
    after the ring reused their slots and after the loader closed."""
    torch = pytest.importorskip("torch")
    if not cuda_usable():
        pytest.skip("no usable CUDA device")

    def run():
        start = detached_live()
        with stoker.Loader(raw_ds, 8, depth=DEPTH, seed=7, device="cuda:0") as loader:
            kept = []
            for epoch in range(3):
                loader.set_epoch(epoch)
                for b in loader:
                    if b.device < 0:
                        pytest.skip("this build delivers host batches only")
                    x, y = b
                    kept.append((x, y, b.indices))
            assert len(kept) == 3 * 13
            assert all(x.is_cuda and y.is_cuda for x, y, _ in kept)
            assert len({x.data_ptr() for x, _, _ in kept}) == len(kept)
            for x, y, ids in kept:
                check_records(x.cpu().numpy(), ids)
                assert y.cpu().tolist() == [h.label_of(int(i)) for i in ids]
        torch.cuda.synchronize()
        for x, y, ids in kept:  # the loader closed: the tensors still hold their records
            check_records(x.cpu().numpy(), ids)
        del kept, x, y
        assert detached_live() == start
        return True
    assert guarded(run)
