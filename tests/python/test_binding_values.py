# SPDX-License-Identifier: Apache-2.0
"""Values that cross into C: integers out of the 64-bit range the C API takes (which ctypes
would wrap silently), negative ones where none is allowed, booleans where an int is
expected, numbers that are not finite, strings with a NUL byte (which C would cut); and
what a released batch or a closed object answers."""
from functools import partial

import numpy as np
import pytest

import stoker

BIG = 2 ** 64  # wraps to 0 in an int64_t


@pytest.mark.parametrize("kw", [
    # each wraps, modulo 2**64, to a value the library would accept
    dict(batch_size=BIG + 8), dict(rank=BIG), dict(world_size=BIG + 1),
    dict(threads=BIG + 2), dict(depth=BIG + 3), dict(epoch=BIG + 1), dict(size=BIG + 32),
    dict(resize=BIG + 40), dict(read_ahead=BIG + 4), dict(max_record_size=BIG + 4096),
    dict(max_pixels=BIG + 10 ** 6), dict(device_buffers=BIG + 2), dict(device=BIG - 1),
    dict(device="cuda:%d" % (BIG - 1)),
], ids=lambda kw: "%s=%s" % next(iter(kw.items())))
def test_loader_integer_out_of_range(raw_ds, kw):
    args = dict(batch_size=8, device="cpu")
    args.update(kw)
    with pytest.raises(ValueError, match=list(kw)[0]):
        stoker.Loader(raw_ds, **args).close()


def test_set_epoch_out_of_range(raw_ds):
    with stoker.Loader(raw_ds, 8, device="cpu", seed=4) as loader:
        first = list(next(iter(loader)).indices)
        for bad in (BIG, BIG + 3, 2 ** 63, -1):
            with pytest.raises(ValueError, match="epoch"):
                loader.set_epoch(bad)
        assert (loader.epoch, loader.position) == (0, 1)
        loader.set_epoch(3)
        loader.set_epoch(0)
        assert list(next(iter(loader)).indices) == first


def test_load_state_dict_contents(raw_ds):
    with stoker.Loader(raw_ds, 8, device="cpu", seed=4) as a:
        for _ in range(3):
            next(iter(a))
        saved = a.state_dict()
        expected = list(next(iter(a)).indices)
    with stoker.Loader(raw_ds, 8, device="cpu", seed=4) as b:
        for key, value in (("epoch", BIG), ("position", BIG + 3), ("seed", -1),
                           ("batch_size", 2 ** 63), ("rank", BIG)):
            with pytest.raises(ValueError, match=key):
                b.load_state_dict(dict(saved, **{key: value}))
        # a field that disagrees with the blob would be ignored: refused instead
        for key, value in (("epoch", 5), ("position", 0), ("seed", 9), ("shuffle", False)):
            with pytest.raises(ValueError, match=key):
                b.load_state_dict(dict(saved, **{key: value}))
        for key, value in (("epoch", "3"), ("position", 1.0), ("shuffle", "yes"),
                           ("rank", True)):
            with pytest.raises(TypeError, match=key):
                b.load_state_dict(dict(saved, **{key: value}))
        assert b.position == 0
        b.load_state_dict(saved)  # intact, or only "state": both resume
        assert list(next(iter(b)).indices) == expected
        b.load_state_dict({"state": saved["state"]})
        assert list(next(iter(b)).indices) == expected


def test_writer_integers_out_of_range(tmp_path):
    path = str(tmp_path / "w")
    with stoker.Writer(path, kind="bytes", fsync=False) as w:
        for label in (2 ** 63, BIG + 5, -(2 ** 63) - 1):
            with pytest.raises(ValueError, match="label"):
                w.add(b"abc", label)
        w.add(b"ok", 2 ** 63 - 1)
        w.add(b"ok", -(2 ** 63))
    with stoker.Dataset(path) as ds:
        assert len(ds) == 2 and [ds.label(0), ds.label(1)] == [2 ** 63 - 1, -(2 ** 63)]
    for kw, name in ((dict(shape=(BIG + 8,)), "shape"), (dict(shape=(4, 2 ** 63)), "shape"),
                     (dict(shape=(-1,)), "shape")):
        with pytest.raises(ValueError, match=name):
            stoker.Writer(str(tmp_path / "r"), kind="raw", dtype="uint8", **kw)
    for kw in (dict(shard_size=BIG + 8192), dict(align=BIG + 4096), dict(shard_size=2 ** 63)):
        with pytest.raises(ValueError, match=list(kw)[0]):
            stoker.Writer(str(tmp_path / "o"), fsync=False, **kw)
    with pytest.raises(TypeError, match="label"):  # not truncated to 1
        stoker.Writer.from_array(str(tmp_path / "f"), np.zeros((3, 2), np.uint8),
                                 labels=[0.0, 1.5, 2.0], fsync=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]  # nothing else left


def test_dataset_integers_out_of_range(raw_ds):
    with pytest.raises(ValueError, match="max_record_size"):
        stoker.Dataset(raw_ds, max_record_size=BIG + 10 ** 6)
    with stoker.Dataset(raw_ds) as ds:
        for i in (BIG, 2 ** 63, -(BIG + 1)):
            with pytest.raises(IndexError):
                ds.read(i)


def test_stream_out_of_range(raw_ds):
    with stoker.Loader(raw_ds, 8, device="cpu") as loader:
        b = next(iter(loader))
        for stream in (BIG, BIG + 1, -2, -(2 ** 63)):
            with pytest.raises(ValueError, match="stream"):
                b.data.__dlpack__(stream=stream)
        for stream in (None, -1, 0, 1, 2, BIG - 1):  # accepted (a host batch ignores it)
            cap = b.data.__dlpack__(stream=stream)
            del cap
        del b


def test_bools_where_ints_are_expected(raw_ds, tmp_path):
    for flag in (True, np.True_, np.bool_(False)):
        for kw in (dict(batch_size=flag), dict(threads=flag), dict(seed=flag),
                   dict(size=flag), dict(device=flag), dict(mean=(flag, 0.5, 0.5))):
            args = dict(batch_size=8, device="cpu")
            args.update(kw)
            with pytest.raises(TypeError):
                stoker.Loader(raw_ds, **args).close()
        with stoker.Loader(raw_ds, 8, device="cpu") as loader:
            with pytest.raises(TypeError):
                loader.set_epoch(flag)
            b = next(iter(loader))
            with pytest.raises(TypeError):
                b.data.__dlpack__(stream=flag)
            del b
        with stoker.Writer(str(tmp_path / "w"), fsync=False, overwrite=True) as w:
            with pytest.raises(TypeError):
                w.add(b"x", flag)
            w.add(b"x", 1)
        with pytest.raises(TypeError):
            stoker.Writer(str(tmp_path / "r"), kind="raw", dtype="uint8", shape=(flag,))
        with stoker.Dataset(raw_ds) as ds:
            with pytest.raises(TypeError):
                ds[flag]
    # a numpy bool where a bool is expected is a bool
    with stoker.Loader(raw_ds, 8, device="cpu", shuffle=np.False_) as loader:
        assert list(next(iter(loader)).indices) == list(range(8))


def test_released_batch_and_closed_objects(raw_ds, var_ds):
    with stoker.Loader(var_ds, 5, device="cpu", shuffle=False) as loader:
        b = next(iter(loader))
        kept = dict(count=b.count, epoch=b.epoch, position=b.position, device=b.device,
                    shape=b.shape, dtype=b.dtype, len=len(b))
        copies = dict(labels=b.labels.copy(), indices=b.indices.copy(),
                      offsets=b.offsets.copy())
        data = b.data
        b.release()
        b.release()  # idempotent
        # the memory is no longer reachable through the batch ...
        for name in ("device", "shape", "dtype", "nbytes"):
            with pytest.raises(ValueError, match="released"):
                getattr(data, name)
        for call in (data.data_ptr, data.__dlpack__, data.__dlpack_device__, b.numpy, b.torch,
                     b.records, partial(np.from_dlpack, data)):
            with pytest.raises(ValueError, match="released"):
                call()
        assert "released" in repr(b) and "released" in repr(data)
        # ... while what was copied at hand-out stays readable
        assert dict(count=b.count, epoch=b.epoch, position=b.position, device=b.device,
                    shape=b.shape, dtype=b.dtype, len=len(b)) == kept
        assert np.array_equal(b.labels, copies["labels"])
        assert np.array_equal(b.indices, copies["indices"])
        assert np.array_equal(b.ids, copies["indices"])
        assert np.array_equal(b.offsets, copies["offsets"])
        del b, data

    loader = stoker.Loader(raw_ds, 8, device="cpu")
    loader.close()
    assert loader.closed and "closed" in repr(loader)
    assert (loader.path, loader.batch_size) == (raw_ds, 8) and loader.depth >= 1
    for name in ("epoch", "position", "rank", "world_size", "num_records"):
        with pytest.raises(ValueError, match="closed"):
            getattr(loader, name)
    for call in (lambda: len(loader), lambda: iter(loader), lambda: next(loader),
                 loader.stats, loader.state_dict, lambda: loader.set_epoch(0),
                 lambda: loader.load_state_dict(b"x" * 64)):
        with pytest.raises(ValueError, match="closed"):
            call()

    w = stoker.Writer(str(raw_ds) + "-closed", fsync=False)
    w.close()
    w.cancel()  # a no-op
    w.close()
    for call in (lambda: w.records, lambda: w.bytes, lambda: w.add(b"x"),
                 lambda: w.add_class("c"), w.finish):
        with pytest.raises(ValueError, match="closed"):
            call()

    ds = stoker.Dataset(raw_ds)
    ds.close()
    ds.close()
    for call in (lambda: len(ds), lambda: ds.num_shards, lambda: ds.payload_bytes,
                 lambda: ds.format_version, lambda: ds.jpeg_checked, lambda: ds.classes,
                 lambda: ds.field,
                 lambda: ds.record_info(0), lambda: ds.label(0), lambda: ds.key(0),
                 lambda: ds.read(0), lambda: ds.array(0), lambda: ds[0]):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_floats_out_of_range(raw_ds):
    for kw in (dict(mean=(10 ** 400, 0.5, 0.5)), dict(std=(0.2, 0.2, -(10 ** 400))),
               dict(mean=(float("inf"), 0.5, 0.5)), dict(std=(0.2, float("inf"), 0.2)),
               dict(mean=(0.5, float("-inf"), 0.5))):
        with pytest.raises(ValueError, match=list(kw)[0]):
            stoker.Loader(raw_ds, 8, device="cpu", **kw).close()


def test_nul_bytes_in_strings(raw_ds, tmp_path):
    """C reads a string up to its first NUL: another path, key or class, silently."""
    for path in (raw_ds + "\0junk", raw_ds.encode() + b"\0"):
        with pytest.raises(ValueError, match="NUL"):
            stoker.Loader(path, 8, device="cpu").close()
        with pytest.raises(ValueError, match="NUL"):
            stoker.Dataset(path).close()
        with pytest.raises(ValueError, match="NUL"):
            stoker.verify(path)
    with pytest.raises(ValueError, match="NUL"):
        stoker.Loader(raw_ds, 8, device="cpu", h5_images="images\0x").close()
    with pytest.raises(ValueError, match="NUL"):
        stoker.Writer(str(tmp_path / "w") + "\0x", fsync=False)
    path = str(tmp_path / "w")
    with stoker.Writer(path, fsync=False) as w:
        with pytest.raises(ValueError, match="NUL"):
            w.add(b"x", 0, "key\0tail")
        with pytest.raises(ValueError, match="NUL"):
            w.add(b"x", 0, b"key\0tail")
        with pytest.raises(ValueError, match="NUL"):
            w.add_class("cat\0dog")
        w.add_class("cat")
        w.add(b"x", 0, "key")
    with stoker.Dataset(path) as ds:
        assert len(ds) == 1 and ds.key(0) == "key" and ds.classes == ["cat"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w"]
