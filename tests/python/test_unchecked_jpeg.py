# SPDX-License-Identifier: Apache-2.0
"""JPEGs nobody checked, damaged inside their entropy-coded data below the rows a crop needs.

Written with Writer(kind="jpeg") (not jpeg_checked) or as an h5py variable-length dataset, such
a record decodes cleanly as far as the crop's last row: the damage, and the extraneous bytes
it leaves before the EOI marker, come after it. Under every transform it must fail its batch
naming the record (on_corrupt="error") or be replaced and counted ("skip"), on every epoch.
transform="resize" decodes every row, so it is the reference that the damage is there."""
import io
import re

import numpy as np
import pytest

import stoker

h5py = pytest.importorskip("h5py")
Image = pytest.importorskip("PIL.Image")

N = 12
BAD = {2, 7}
TRANSFORMS = ["train", "eval", "resize"]
OPTS = dict(size=32, dtype="uint8", threads=2, device="cpu", decoder="cpu", shuffle=False)


def clean_jpeg(i):
    """A tall, textured 160 x 320 JPEG (4:2:0): its eval crop ends well above the bottom."""
    rng = np.random.default_rng(i)
    yy, xx = np.mgrid[0:320, 0:160]
    img = np.stack([(xx * 3 + yy + i * 17) % 256, (yy * 2 + i * 29) % 256,
                    (xx + yy * 3) % 256], axis=-1)
    img = np.clip(img + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def damage_tail(data):
    """40 bytes of the entropy-coded data changed, ending 20 bytes before EOI; no 0xFF byte
    (nor the byte after one) changes or appears, so no marker is made or unmade."""
    b = bytearray(data)
    n = len(b)
    assert b[-2:] == b"\xff\xd9"
    for k in range(n - 62, n - 22):
        v = b[k] ^ ((0x5A + 17 * k) & 0xFF | 1)
        if b[k] != 0xFF and b[k - 1] != 0xFF and v != 0xFF:
            b[k] = v
    return bytes(b)


def records():
    recs = [clean_jpeg(i) for i in range(N)]
    for i in BAD:
        recs[i] = damage_tail(recs[i])
    return recs


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("unchecked")
    recs = records()
    packed = root / "packed"
    with stoker.Writer(str(packed), kind="jpeg", fsync=False, shard_size=100000) as w:
        for i, r in enumerate(recs):
            w.add(r, i)
    h5 = root / "vlen.h5"
    with h5py.File(h5, "w") as f:
        d = f.create_dataset("images", (N,), dtype=h5py.vlen_dtype(np.uint8))
        for i, r in enumerate(recs):
            d[i] = np.frombuffer(r, dtype=np.uint8)
        f.create_dataset("labels", data=np.arange(N, dtype=np.int64))
    with stoker.Dataset(str(packed)) as ds:
        assert not ds.jpeg_checked
    return {"packed": (str(packed), ".stk"), "hdf5": (str(h5), "vlen.h5")}


@pytest.mark.parametrize("source", ["packed", "hdf5"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_error_names_the_damaged_record_every_epoch(datasets, source, transform):
    path, file_name = datasets[source]
    with stoker.Loader(path, batch_size=1, transform=transform, on_corrupt="error",
                       **OPTS) as loader:
        for epoch in range(2):
            it = iter(loader)
            for pos in range(N):
                if pos in BAD:
                    with pytest.raises(stoker.StokerError) as e:
                        next(it)
                    msg = str(e.value)
                    assert re.search(r"record %d: JPEG: Corrupt JPEG data" % pos, msg), msg
                    assert file_name in msg
                    it = iter(loader)  # a loop stopped by an error is over; a new one goes on
                    continue
                b = next(it)
                assert list(b.indices) == [pos], f"epoch {epoch}"
                b.release()
                del b
            with pytest.raises(StopIteration):
                next(it)
        assert loader.stats()["skipped"] == 0


@pytest.mark.parametrize("source", ["packed", "hdf5"])
@pytest.mark.parametrize("transform", TRANSFORMS)
def test_skip_replaces_and_counts_every_epoch(datasets, source, transform):
    path, _ = datasets[source]
    replaced = 0
    with stoker.Loader(path, batch_size=4, transform=transform, on_corrupt="skip",
                       **OPTS) as loader:
        for _ in range(2):
            pos = 0
            for b in loader:
                for i in b.indices:
                    assert i not in BAD, f"damaged record {i} delivered at position {pos}"
                    if pos in BAD:
                        replaced += 1
                    else:
                        assert i == pos
                    pos += 1
                b.release()
                del b
            assert pos == N
        assert loader.stats()["skipped"] == replaced == 2 * len(BAD)


@pytest.mark.parametrize("checked", [False, True])
def test_a_clean_record_is_decoded_to_the_end_once(tmp_path, checked):
    """stats()["full_checks"]: each record of an unchecked data set once, on its first use,
    however many epochs follow; none of a checked one. One thread, so that no record is
    decoded twice at the same time."""
    path = str(tmp_path / "clean")
    with stoker.Writer(path, kind="jpeg", fsync=False, jpeg_checked=checked) as w:
        for i in range(N):
            w.add(clean_jpeg(i), i)
    opts = dict(OPTS, threads=1)
    with stoker.Loader(path, batch_size=4, transform="train", **opts) as loader:
        counts = []
        for _ in range(3):
            for b in loader:
                b.release()
                del b
            counts.append(loader.stats()["full_checks"])
    assert counts == [0, 0, 0] if checked else counts == [N, N, N]
