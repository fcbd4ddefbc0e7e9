# SPDX-License-Identifier: Apache-2.0
"""stoker.Loader through the real library: contents, order, epochs, resume, ranks, errors."""
import glob
import os
import threading

import numpy as np
import pytest

import conftest as h
import stoker


def run_epoch(loader):
    """(ids, labels, data copies, positions) of the rest of the current epoch."""
    ids, labels, data, pos = [], [], [], []
    for b in loader:
        ids.append(b.indices.copy())
        labels.append(b.labels.copy())
        data.append(b.numpy().copy())
        pos.append(b.position)
    return ids, labels, data, pos


def flat_ids(ids):
    return [int(x) for a in ids for x in a]


def test_batches_equal_written_records(raw_ds):
    with stoker.Loader(raw_ds, 10, shuffle=False, device="cpu", threads=2) as loader:
        assert len(loader) == 11
        assert loader.num_records == 103
        ids, labels, data, pos = run_epoch(loader)
    assert flat_ids(ids) == list(range(103))
    assert pos == list(range(11))
    assert [len(a) for a in ids] == [10] * 10 + [3]
    with stoker.Dataset(raw_ds) as ds:
        for a, lab, d in zip(ids, labels, data):
            assert d.shape == (len(a),) + h.RECORD_SHAPE and d.dtype == np.uint8
            for j, i in enumerate(a):
                assert np.array_equal(d[j], h.record_array(int(i)))
                assert lab[j] == h.label_of(int(i)) == ds.label(int(i))
                assert d[j].tobytes() == ds.read(int(i))  # the C API's own read


def test_shuffled_epoch_is_exactly_once(raw_ds):
    with stoker.Loader(raw_ds, 16, seed=3, device="cpu") as loader:
        ids, labels, data, _ = run_epoch(loader)
    order = flat_ids(ids)
    assert sorted(order) == list(range(103))
    assert order != list(range(103))
    for a, lab, d in zip(ids, labels, data):
        assert list(h.record_id(d)) == list(a)
        assert list(lab) == [h.label_of(int(i)) for i in a]


def test_epochs_seeds_and_set_epoch(raw_ds):
    with stoker.Loader(raw_ds, 16, seed=7, device="cpu") as loader:
        e0 = flat_ids(run_epoch(loader)[0])
        assert loader.epoch == 1
        e1_batches = []
        for b in loader:
            assert b.epoch == 1
            e1_batches.append(b.indices.copy())
        e1 = flat_ids(e1_batches)
        assert sorted(e1) == list(range(103)) and e1 != e0
        loader.set_epoch(0)  # `b` still holds epoch 1's last batch, which stays valid
        assert list(h.record_id(b.numpy())) == list(b.indices)
        del b
        assert flat_ids(run_epoch(loader)[0]) == e0
        loader.set_epoch(1)  # already standing at epoch 1's start: keeps its read-ahead
        assert flat_ids(run_epoch(loader)[0]) == e1
        loader.set_epoch(5)
        e5 = flat_ids(run_epoch(loader)[0])
    with stoker.Loader(raw_ds, 16, seed=7, device="cpu", threads=1, epoch=5) as other:
        assert flat_ids(run_epoch(other)[0]) == e5
    with stoker.Loader(raw_ds, 16, seed=7, device="cpu", threads=1) as same:
        assert flat_ids(run_epoch(same)[0]) == e0
    with stoker.Loader(raw_ds, 16, seed=8, device="cpu") as diff:
        assert flat_ids(run_epoch(diff)[0]) != e0


@pytest.mark.parametrize("k", [0, 1, 4, 7])
def test_resume_equals_uninterrupted(raw_ds, k):
    with stoker.Loader(raw_ds, 15, seed=11, device="cpu") as ref:
        full = run_epoch(ref)[0] + run_epoch(ref)[0]  # epochs 0 and 1
    with stoker.Loader(raw_ds, 15, seed=11, device="cpu") as first:
        it = iter(first)
        for _ in range(k):
            next(it)
        del it
        state = first.state_dict()
    assert state["position"] == k and state["epoch"] == 0 and state["seed"] == 11
    assert isinstance(state["state"], bytes) and len(state["state"]) == 64
    # seed and shuffle come from the state, whatever the new loader was given
    with stoker.Loader(raw_ds, 15, seed=999, threads=1, device="cpu") as resumed:
        resumed.load_state_dict(state)
        rest = run_epoch(resumed)[0] + run_epoch(resumed)[0]
    assert flat_ids(rest) == flat_ids(full[k:])


def test_resume_refuses_other_shape(raw_ds):
    with stoker.Loader(raw_ds, 15, device="cpu") as a:
        state = a.state_dict()
    with stoker.Loader(raw_ds, 16, device="cpu") as b:
        with pytest.raises(stoker.StokerError) as e:
            b.load_state_dict(state)
        assert e.value.codename == "STOKER_E_STATE"
        bad = bytearray(state["state"])
        bad[20] ^= 1
        with pytest.raises(stoker.StokerError):
            b.load_state_dict(bytes(bad))
        with pytest.raises(TypeError):
            b.load_state_dict(12)


def test_variable_size_records(var_ds):
    seen = []
    with stoker.Loader(var_ds, 8, seed=1, device="cpu") as loader:
        assert len(loader) == 8
        for b in loader:
            assert b.offsets is not None and len(b.offsets) == b.count + 1
            arr = b.numpy()
            assert arr.dtype == np.uint8 and arr.ndim == 1
            assert b.offsets[0] == 0 and b.offsets[-1] == arr.nbytes
            for j, rec in enumerate(b.records()):
                i = int(b.indices[j])
                assert rec == h.var_record(i)
                assert b.labels[j] == h.label_of(i)
            seen += [int(i) for i in b.indices]
    assert sorted(seen) == list(range(57))


def test_drop_last(raw_ds):
    with stoker.Loader(raw_ds, 10, drop_last=True, device="cpu") as loader:
        assert len(loader) == 10
        ids = run_epoch(loader)[0]
    assert [len(a) for a in ids] == [10] * 10
    assert len(set(flat_ids(ids))) == 100


@pytest.mark.parametrize("drop_last", [False, True])
def test_two_ranks_disjoint_and_complete(raw_ds, drop_last):
    per_rank = []
    for rank in (0, 1):
        with stoker.Loader(raw_ds, 10, seed=4, rank=rank, world_size=2, drop_last=drop_last,
                           device="cpu") as loader:
            assert loader.rank == rank and loader.world_size == 2
            n = len(loader)
            ids = run_epoch(loader)[0]
            assert len(ids) == n
            per_rank.append((n, ids))
    (n0, ids0), (n1, ids1) = per_rank
    assert n0 == n1 and [len(a) for a in ids0] == [len(a) for a in ids1]
    a, b = flat_ids(ids0), flat_ids(ids1)
    if drop_last:
        assert n0 == 5 and len(a) == len(b) == 50
        assert not set(a) & set(b)
    else:
        assert n0 == 6 and len(a) == len(b) == 52  # 103 padded to 104
        assert set(a) | set(b) == set(range(103))
        assert len(set(a) & set(b)) <= 1  # the padding record
        assert len(set(a)) == 52 or len(set(b)) == 52


def test_rank_and_world_from_environment(raw_ds, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "3")
    with stoker.Loader(raw_ds, 10, device="cpu") as loader:
        assert (loader.rank, loader.world_size) == (1, 3)
        assert len(loader) == 4  # ceil(103 / 3) = 35 records per rank, in batches of 10
    with stoker.Loader(raw_ds, 10, device="cpu", rank=0, world_size=1) as loader:
        assert (loader.rank, loader.world_size) == (0, 1)
    monkeypatch.setenv("RANK", "x")
    with pytest.raises(stoker.StokerError) as e:
        stoker.Loader(raw_ds, 10, device="cpu")
    assert "RANK" in str(e.value)


def test_stats(raw_ds):
    with stoker.Loader(raw_ds, 10, device="cpu", threads=1, depth=3) as loader:
        run_epoch(loader)
        s = loader.stats()
    assert s["batches"] == 11 and s["records"] == 103
    assert s["bytes"] == 103 * 192
    assert s["threads"] == 1 and s["depth"] == 3 and s["device"] == -1
    assert s["backend"] in ("io_uring", "pread")
    with stoker.Loader(raw_ds, 10, device="cpu", backend="pread") as loader:
        assert loader.stats()["backend"] == "pread"


def test_missing_path_names_it(tmp_path):
    missing = str(tmp_path / "no-such-dataset")
    with pytest.raises(stoker.StokerError) as e:
        stoker.Loader(missing, 8)
    assert missing in str(e.value)
    assert e.value.code < 0 and e.value.codename
    with pytest.raises(stoker.StokerError) as e:
        stoker.Dataset(missing)
    assert missing in str(e.value)


def corrupt_copy(tmp_path, victim):
    """A raw data set with one payload byte of record `victim` flipped."""
    path = h.write_raw(tmp_path / "bad", 40)
    pattern = h.record_array(victim).tobytes()
    for shard in glob.glob(os.path.join(path, "shard-*.stk")):
        raw = bytearray(open(shard, "rb").read())
        at = raw.find(pattern)
        if at >= 0:
            assert raw.find(pattern, at + 1) < 0
            raw[at + 100] ^= 0xFF
            with open(shard, "wb") as f:
                f.write(raw)
            return path
    raise AssertionError("record payload not found")


def test_corrupt_record_is_named(tmp_path):
    path = corrupt_copy(tmp_path, 13)
    with stoker.Loader(path, 8, shuffle=False, device="cpu") as loader:
        got = []
        with pytest.raises(stoker.CorruptError) as e:
            for b in loader:
                got += list(b.indices)
        assert "13" in str(e.value)
        assert e.value.codename == "STOKER_E_CORRUPT"
        assert got == list(range(8))
        del b  # the loop variable holds batch 0's slot (see the lifetime rule)
        # a failed batch counts as consumed: the epoch goes on with the next one
        rest = flat_ids(run_epoch(loader)[0])
        assert rest == list(range(16, 40))
    problems = stoker.verify(path)
    assert any(rec == 13 for _, rec, _, _ in problems)
    with stoker.Dataset(path) as ds:
        with pytest.raises(stoker.CorruptError):
            ds.read(13)


def test_corrupt_record_skipped(tmp_path):
    path = corrupt_copy(tmp_path, 5)
    with stoker.Loader(path, 8, on_corrupt="skip", device="cpu") as loader:
        ids, _, data, _ = run_epoch(loader)
        assert loader.stats()["skipped"] >= 1  # read-ahead of the next epoch may count too
    got = flat_ids(ids)
    assert len(got) == 40 and 5 not in got
    for a, d in zip(ids, data):
        assert list(h.record_id(d)) == list(a)


def test_use_after_close_raises_value_error(raw_ds):
    loader = stoker.Loader(raw_ds, 10, device="cpu")
    it = iter(loader)
    b = next(it)
    arr = b.numpy()
    loader.close()
    loader.close()  # idempotent
    assert loader.closed
    for call in (lambda: len(loader), lambda: iter(loader), lambda: next(it),
                 loader.state_dict, loader.stats, lambda: loader.set_epoch(1),
                 lambda: loader.load_state_dict(b"x" * 64), lambda: loader.num_records):
        with pytest.raises(ValueError):
            call()
    # what was handed out stays valid until dropped
    assert list(h.record_id(arr)) == list(b.indices)
    del b, arr
    w = stoker.Writer(str(raw_ds) + "-x", fsync=False)
    w.close()
    with pytest.raises(ValueError):
        w.add(b"x")
    ds = stoker.Dataset(raw_ds)
    ds.close()
    with pytest.raises(ValueError):
        len(ds)


def test_wrong_types_raise_type_error(raw_ds):
    bad = [dict(batch_size="8"), dict(batch_size=8.0), dict(batch_size=True),
           dict(shuffle="yes"), dict(seed=1.5), dict(dtype=3.5), dict(device=[0]),
           dict(mean="abc"), dict(mean=(1, 2)), dict(transform=1), dict(on_corrupt=1),
           dict(threads="2"), dict(layout=1)]
    for kw in bad:
        args = dict(batch_size=8)
        args.update(kw)
        with pytest.raises(TypeError):
            stoker.Loader(raw_ds, **args)
    with pytest.raises(TypeError):
        stoker.Loader(123, 8)
    with pytest.raises(TypeError):
        stoker.Loader(None, 8)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shufle'"):
        stoker.Loader(raw_ds, 8, shufle=False)
    with pytest.raises(TypeError, match="multiple values for argument 'shuffle'"):
        stoker.Loader(raw_ds, 8, True, shuffle=False)
    # None is the library's default (its table's), for every keyword alike
    with stoker.Loader(raw_ds, 8, device="cpu", on_corrupt=None, shuffle=None) as loader:
        assert loader.on_corrupt == "error" and loader.shuffle is True
    with pytest.raises(ValueError):
        stoker.Loader(raw_ds, 0)
    with pytest.raises(ValueError):
        stoker.Loader(raw_ds, 8, on_corrupt="ignore")
    with pytest.raises(ValueError):
        stoker.Loader(raw_ds, 8, device="tpu")
    with pytest.raises(stoker.StokerError):
        stoker.Loader(raw_ds, 8, rank=2, world_size=2)
    with stoker.Loader(raw_ds, 8, device="cpu") as loader:
        with pytest.raises(TypeError):
            loader.set_epoch("1")
        with pytest.raises(ValueError):
            loader.set_epoch(-1)


def test_two_iterations_at_once(raw_ds):
    with stoker.Loader(raw_ds, 10, shuffle=False, device="cpu") as loader:
        it = iter(loader)
        first = next(it).indices.copy()
        with pytest.raises(RuntimeError):
            iter(loader)
        del it  # abandoning the iterator lets a new loop continue the epoch
        rest = flat_ids(run_epoch(loader)[0])
        assert list(first) == list(range(10)) and rest == list(range(10, 103))
        for b in loader:
            break
        del b
        assert flat_ids(run_epoch(loader)[0]) == list(range(10, 103))


def test_consumer_in_another_thread(raw_ds):
    """Batches released from another thread while the consumer keeps going."""
    got, errors = [], []

    def consume():
        try:
            with stoker.Loader(raw_ds, 7, seed=2, depth=2, device="cpu") as loader:
                for _ in range(3):
                    for b in loader:
                        got.extend(int(i) for i in h.record_id(b.numpy()))
                        threading.Thread(target=b.release).start()
                        del b
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "consumer hung"
    assert not errors, errors
    assert sorted(got) == sorted(list(range(103)) * 3)


def test_writer_and_dataset(tmp_path):
    path = str(tmp_path / "w")
    with stoker.Writer(path, kind="bytes", classes=["cat", "dog"], fsync=False) as w:
        assert w.add(b"hello", 1, "a/x.bin") == 0
        assert w.add(bytearray(b"\x00\x01"), 0) == 1
        assert w.add(np.arange(4, dtype=np.int32), 1) == 2
        assert w.add(memoryview(b"")) == 3
        assert w.records == 4
    with stoker.Dataset(path) as ds:
        assert len(ds) == 4 and ds.classes == ["cat", "dog"]
        assert ds.field == {"kind": "bytes", "dtype": None, "shape": None}
        assert ds[0] == (b"hello", 1) and ds.key(0) == "a/x.bin" and ds.key(1) is None
        assert ds.read(2) == np.arange(4, dtype=np.int32).tobytes()
        assert ds.read(-1) == b""
        with pytest.raises(IndexError):
            ds.read(4)
    with pytest.raises(stoker.ExistsError):
        stoker.Writer(path)
    with pytest.raises(stoker.StokerError):
        with stoker.Writer(str(tmp_path / "raw"), kind="raw", dtype="float32", shape=(2,)) as w:
            w.add(b"\x00" * 4)  # wrong size for a (2,) float32 record
    assert not os.path.exists(str(tmp_path / "raw"))
    with pytest.raises(TypeError):
        stoker.Writer(str(tmp_path / "r2"), kind="raw")
    with pytest.raises(TypeError):
        with stoker.Writer(str(tmp_path / "r3")) as w:
            w.add(12)
    assert not os.path.exists(str(tmp_path / "r3"))
    assert stoker.verify(path) == []


def write_patterns(tmp_path):
    """A JPEG data set of four 400x300 patterns, labelled 0..3; returns its path."""
    import io
    from PIL import Image
    path = str(tmp_path / "jpegs")
    y, x = np.mgrid[0:300, 0:400]
    with stoker.Writer(path, kind="jpeg", fsync=False) as w:
        for i in range(4):
            img = np.stack([(x * 3 + y * i) % 256, (x ^ y) % 256, (y * 5) % 256], -1)
            buf = io.BytesIO()
            Image.fromarray(img.astype(np.uint8)).save(buf, "JPEG", quality=90)
            w.add(buf.getvalue(), i)
    return path


def test_antialias_option(tmp_path):
    """antialias="over2x" (the default) resamples a shrink by at most 2x with two taps: the
    batch keeps its shape and ids but its pixels differ from "always"'s; unknown values are
    refused."""
    path = write_patterns(tmp_path)
    out = {}
    for aa in ("always", "over2x", None):
        with stoker.Loader(path, 4, shuffle=False, transform="eval", size=64, resize=160,
                           dtype="uint8", device="cpu", antialias=aa) as loader:
            ids, labels, data, _ = run_epoch(loader)
            out[aa] = (data[0], [int(v) for v in labels[0]])
    assert np.array_equal(out[None][0], out["over2x"][0])
    assert out["always"][0].shape == out["over2x"][0].shape == (4, 3, 64, 64)
    assert out["always"][1] == out["over2x"][1] == [0, 1, 2, 3]
    # 300 -> 160 is a 1.9x shrink: "always" widened the filter
    assert np.abs(out["always"][0].astype(int) - out["over2x"][0].astype(int)).mean() > 1
    with pytest.raises(ValueError):
        stoker.Loader(path, 4, antialias="never")


def test_dct_scale_option(tmp_path):
    """dct_scale: the train transform (by default) and, with "always", eval decode a crop at
    least twice the output both ways at 1/2 (1/4, 1/8) in the IDCT; stats()["reduced"]
    counts those images. The batch keeps its shape; its pixels differ a little; unknown
    values are refused."""
    path = write_patterns(tmp_path)  # 400 x 300
    out = {}
    for mode, ds, every in [("eval", None, False), ("eval", "always", True),
                            ("eval", "never", False), ("train", None, None),
                            ("train", "never", False)]:
        with stoker.Loader(path, 4, shuffle=False, transform=mode, size=64, resize=128,
                           dtype="uint8", device="cpu", dct_scale=ds) as loader:
            _, _, data, _ = run_epoch(loader)
            st = loader.stats()  # read-ahead into the next epoch counts too
            reduced, read = st["reduced"], st["records_read"]
            out[mode, ds] = data[0].astype(int)
        assert read >= 4
        if every is not None:  # eval: 400 x 300 to 170 x 128 fits 1/2, every image
            assert reduced == (read if every else 0), (mode, ds, reduced, read)
        else:  # random crops: those of 128+ pixels both ways (most, here) are reduced
            assert 0 < reduced <= read, (reduced, read)
    assert out["eval", None].shape == out["eval", "always"].shape == (4, 3, 64, 64)
    assert np.array_equal(out["eval", None], out["eval", "never"])
    diff = np.abs(out["eval", None] - out["eval", "always"]).mean()
    assert 0 < diff < 8, diff
    assert not np.array_equal(out["train", None], out["train", "never"])
    with pytest.raises(ValueError):
        stoker.Loader(path, 4, dct_scale="sometimes")


def test_resampler_option(tmp_path, raw_ds):
    """resampler="pillow" applies Pillow's 22-bit weights, the default "fast" the same ones
    rounded to 16 bits: the same batch within 2 levels, not identical; unknown values are
    refused. The default slot count depends on threads and batch size, and is reported."""
    path = write_patterns(tmp_path)
    out = {}
    for rs in ("fast", "pillow"):
        with stoker.Loader(path, 4, shuffle=False, transform="eval", size=64, resize=160,
                           dtype="uint8", device="cpu", antialias="always", resampler=rs,
                           threads=2) as loader:
            assert loader.depth == 8 == loader.stats()["depth"]  # 2 + ceil(6 / 1 piece)
            _, _, data, _ = run_epoch(loader)
            out[rs] = data[0].astype(int)
    diff = np.abs(out["fast"] - out["pillow"])
    assert 0 < diff.mean() <= 0.05 and diff.max() <= 2, (diff.mean(), diff.max())
    with pytest.raises(ValueError):
        stoker.Loader(path, 4, resampler="exact")
    with stoker.Loader(path, 1, device="cpu", threads=15) as loader:
        assert loader.depth == 16  # 2 + ceil(45 pieces / 1 piece per batch), at most 16
    with stoker.Loader(path, 1, device="cpu", threads=15, depth=3) as loader:
        assert loader.depth == 3
    with stoker.Loader(raw_ds, 1, device="cpu", threads=15) as loader:
        assert loader.depth == 4  # copying raw records: short, even pieces
