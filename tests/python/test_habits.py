# SPDX-License-Identifier: Apache-2.0
"""PyTorch's habits on a stoker.Loader: a batch unpacks as (data, labels); the resumed loop
of README continues the restored epoch; batches kept past the ring's depth, a break
followed by set_epoch, and next(iter(loader)) followed by a loop work; host batches of
images are float32."""
import sys
import threading

import numpy as np
import pytest

import conftest as h
import stoker


def guarded(fn, seconds=60):
    """fn() in a thread, failing (not hanging) when it does not end in time."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: B902 (re-raised in the caller)
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "still running after %d s: a hang" % seconds
    if "error" in out:
        raise out["error"]
    return out.get("value")


def check_records(data, ids):
    """Every record of a batch's data holds the bytes written for its id."""
    data = np.asarray(data)
    assert list(h.record_id(data)) == [int(i) for i in ids]
    for j, i in enumerate(ids):
        assert np.array_equal(data[j], h.record_array(int(i)))


def test_batch_unpacks_without_torch(raw_ds, monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with stoker.Loader(raw_ds, 10, seed=1, device="cpu") as loader:
        n = 0
        for x, y in loader:
            assert isinstance(x, np.ndarray) and isinstance(y, np.ndarray)
            assert x.dtype == np.uint8 and x.shape[1:] == h.RECORD_SHAPE
            assert list(y) == [h.label_of(int(i)) for i in h.record_id(x)]
            check_records(x, h.record_id(x))
            n += 1
        assert n == len(loader)
        batch = next(iter(loader))
        x, y = batch
        assert x.ctypes.data == batch.data.data_ptr()  # no copy
        # the labels are the batch's label field, in the batch's memory like its data
        assert np.array_equal(y, batch.labels)
        assert y.ctypes.data == batch["label"].data_ptr()


def test_resumed_loop_of_readme_continues_the_epoch(raw_ds):
    """An interrupted run (checkpoint mid-epoch) and the resumed one, both written as
    README's loop, see exactly the records of an uninterrupted run."""
    epochs, kw = 3, dict(seed=4, device="cpu")

    def run(loader, start, stop_after=None):
        seen = []
        for epoch in range(start, epochs):
            loader.set_epoch(epoch)
            for batch in loader:
                seen.append((batch.epoch, batch.position, list(batch.indices)))
                if stop_after is not None and len(seen) == stop_after:
                    return seen, loader.state_dict()
        return seen, None

    with stoker.Loader(raw_ds, 8, **kw) as loader:
        full, _ = run(loader, 0)
    assert len(full) == epochs * 13
    with stoker.Loader(raw_ds, 8, **kw) as loader:
        first, ck = run(loader, 0, stop_after=13 + 5)  # 5 batches into epoch 1
    assert (ck["epoch"], ck["position"]) == (1, 5)
    with stoker.Loader(raw_ds, 8, **kw) as loader:
        loader.load_state_dict(ck)
        rest, _ = run(loader, ck["epoch"])
    assert len(rest) == 8 + 13  # 8 batches of epoch 1 remained, then epoch 2
    assert first + rest == full


def test_a_list_of_every_batch(raw_ds):
    """list(loader) keeps every batch of the epoch, past the ring's depth: each Batch's
    memory is detached from its slot when the slot is needed, and keeps its records."""
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, seed=2, device="cpu") as loader:
            batches = list(loader)
            assert len(batches) == 13
            assert sorted(int(i) for b in batches for i in b.indices) == list(range(103))
            for b in batches:
                check_records(b.numpy(), b.indices)
                assert (b.epoch, b.dtype, b.shape[1:]) == (0, "uint8", h.RECORD_SHAPE)
            again = list(loader)  # the next epoch, the old batches still held
            assert [b.epoch for b in again] == [1] * 13
            for b in batches + again:
                check_records(b.numpy(), b.indices)
            return True
    assert guarded(run)


def test_first_batch_then_a_loop(raw_ds):
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            first = next(iter(loader))
            rest = [list(b.indices) for b in loader]
            assert list(first.indices) == list(range(8))
            assert len(rest) == 12 and rest[0] == list(range(8, 16))
            check_records(first.numpy(), first.indices)
            return True
    assert guarded(run)


def test_break_then_set_epoch_with_the_loop_variables_alive(raw_ds):
    """A loop left by break keeps its variables (the batch, an array made from it); the
    next epoch starts anyway, and they stay valid."""
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, seed=6, device="cpu") as loader:
            for epoch in range(4):
                loader.set_epoch(epoch)
                for k, batch in enumerate(loader):
                    x, y = batch
                    assert batch.epoch == epoch and batch.position == k
                    if k == 2 + epoch:
                        break
                check_records(x, batch.indices)  # noqa: F821 (the loop's own)
            return True
    assert guarded(run)


def test_an_array_kept_past_the_depth_stays_valid(raw_ds):
    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            it = iter(loader)
            kept = next(it).numpy()
            assert [next(it).position for _ in range(5)] == list(range(1, 6))
            check_records(kept, range(8))
            del kept
            assert [b.position for b in it] == list(range(6, 13))
            return True
    assert guarded(run)


def test_an_older_library_says_what_to_do(raw_ds, monkeypatch):
    """A libstoker without stoker_batch_detach: an array kept past the depth stops the loop
    with a StateError that says what to do."""
    has = stoker.loader._lib.has
    monkeypatch.setattr(stoker.loader._lib, "has",
                        lambda name: name != "stoker_batch_detach" and has(name))

    def run():
        with stoker.Loader(raw_ds, 8, depth=3, shuffle=False, device="cpu") as loader:
            it = iter(loader)
            kept = next(it).numpy()
            with pytest.raises(stoker.StateError) as e:
                for _ in range(5):
                    next(it)
            msg = str(e.value)
            assert "epoch 0, position 0" in msg and "clone()" in msg and "depth" in msg, msg
            assert "stoker_batch_detach" in msg, msg
            check_records(kept, range(8))
            del kept
            assert [b.position for b in loader] == list(range(3, 13))
            return True
    assert guarded(run)


def test_host_images_default_to_float32(tmp_path):
    from test_loader import write_patterns
    path = write_patterns(tmp_path)
    with stoker.Loader(path, 2, size=32, device="cpu", threads=1) as loader:
        assert loader.dtype == "float32"
        b = next(iter(loader))
        assert b.dtype == "float32" and b.numpy().dtype == np.float32
        assert b.shape == (2, 3, 32, 32)
    with stoker.Loader(path, 2, size=32, device="cpu", threads=1, dtype="float16") as loader:
        assert loader.dtype == "float16"


def test_annotations_and_py_typed():
    import os
    import typing
    pkg = os.path.dirname(stoker.__file__)
    assert os.path.isfile(os.path.join(pkg, "py.typed"))
    with open(os.path.join(os.path.dirname(pkg), "pyproject.toml")) as f:
        assert '"py.typed"' in f.read()  # installed with the package
    hints = typing.get_type_hints(stoker.Loader.state_dict)
    assert hints["return"] == typing.Dict[str, typing.Any]
    assert typing.get_type_hints(stoker.Loader.__len__)["return"] is int
    assert typing.get_type_hints(stoker.Loader.set_epoch) == {"epoch": int,
                                                             "return": type(None)}
