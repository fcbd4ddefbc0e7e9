# SPDX-License-Identifier: Apache-2.0
"""A delivered record is the right bytes or a counted replacement, on every read path.

Each test damages records of a data set on one fetch path (packed shards, HDF5 variable-length
JPEGs, gzip chunks read through the loader's reader, fletcher32 chunks read by libhdf5) and
reads it with on_corrupt="skip" and "error". With "skip", every position of every batch holds
either its own record, intact, or an intact replacement, and stats()["skipped"] is the number
of positions that hold a replacement in the batches delivered (read-ahead not included). With
"error", the batch holding a damaged record fails with a message naming the file.

Unshuffled, so that position k of an epoch is record k: which positions must be replaced is
known without asking the loader."""
import glob
import io
import os

import numpy as np
import pytest

import conftest as h
import stoker

h5py = pytest.importorskip("h5py")
Image = pytest.importorskip("PIL.Image")


def epochs(loader, n):
    """n epochs of (ids, labels, data copy) per batch."""
    out = []
    for _ in range(n):
        for b in loader:
            out.append((list(b.indices), list(b.labels), b.numpy().copy()))
            b.release()
            del b
    return out


def check_skip(batches, bad, reference, labels, nrec):
    """Every position k (record k % nrec) holds its record when intact, else an intact
    replacement; each sample equals the reference sample of the id it claims. Returns the
    number of replaced positions."""
    replaced = pos = 0
    for ids, labs, data in batches:
        for j, i in enumerate(ids):
            want = pos % nrec
            pos += 1
            assert i not in bad, f"damaged record {i} delivered at position {want}"
            if want in bad:
                replaced += 1
            else:
                assert i == want, f"position {want} holds record {i}"
            assert labs[j] == labels[i], f"record {i}: label"
            assert np.array_equal(data[j], reference[i]), f"record {i}: wrong bytes"
    return replaced


def check_error(path, bad, **opts):
    """on_corrupt="error": each batch holding a damaged record fails, naming the file."""
    failed = 0
    with stoker.Loader(path, shuffle=False, device="cpu", **opts) as loader:
        it = iter(loader)
        while True:
            try:
                b = next(it)
            except StopIteration:
                break
            except stoker.StokerError as e:
                failed += 1
                assert os.path.basename(str(path).split(":")[0]) in str(e)
                continue
            assert not set(b.indices) & bad
            b.release()
            del b
    assert failed >= 1


# ---- HDF5 variable-length JPEGs (each record fetched by libhdf5 in one go) ----

def jpeg(i, size=(40, 48)):
    """A small JPEG whose pixels depend on i."""
    yy, xx = np.mgrid[0:size[0], 0:size[1]]
    img = np.stack([(xx * 5 + i * 17) % 256, (yy * 3 + i * 29) % 256,
                    ((xx + yy) * 2 + i * 7) % 256], axis=-1).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def huge_header(data):
    """The JPEG with its frame header claiming 60000 x 60000 pixels."""
    b = bytearray(data)
    at = b.find(b"\xff\xc0")
    assert at > 0
    b[at + 5:at + 9] = (60000).to_bytes(2, "big") * 2
    return bytes(b)


BAD_JPEGS = {
    3: lambda good: huge_header(good),
    7: lambda good: good[:len(good) // 3],
    12: lambda good: b"\xff\xd8" + bytes((k * 37 + 11) % 256 for k in range(900)),
    18: lambda good: b"",
}


def write_jpeg_h5(path, n, damage):
    recs = [jpeg(i) for i in range(n)]
    if damage:
        for i, make in BAD_JPEGS.items():
            recs[i] = make(recs[i])
    labels = np.array([h.label_of(i) for i in range(n)], dtype=np.int64)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("images", (n,), dtype=h5py.vlen_dtype(np.uint8))
        for i, r in enumerate(recs):
            d[i] = np.frombuffer(r, dtype=np.uint8)
        f.create_dataset("labels", data=labels)
    return labels


JPEG_OPTS = dict(batch_size=8, transform="eval", size=24, resize=28, dtype="uint8",
                 threads=2)


def reference_samples(path, n, **opts):
    with stoker.Loader(path, shuffle=False, device="cpu", **opts) as loader:
        ref = {}
        for ids, _, data in epochs(loader, 1):
            for j, i in enumerate(ids):
                ref[i] = data[j]
    assert sorted(ref) == list(range(n))
    return ref


def test_vlen_jpegs_skip_replaces_and_counts(tmp_path):
    n = 24
    good, bad = tmp_path / "good.h5", tmp_path / "bad.h5"
    labels = write_jpeg_h5(good, n, False)
    write_jpeg_h5(bad, n, True)
    ref = reference_samples(str(good), n, **JPEG_OPTS)
    with stoker.Loader(str(bad), shuffle=False, device="cpu", on_corrupt="skip",
                       **JPEG_OPTS) as loader:
        batches = epochs(loader, 2)
        skipped = loader.stats()["skipped"]
    replaced = check_skip(batches, set(BAD_JPEGS), ref, labels, n)
    assert replaced == 2 * len(BAD_JPEGS)
    assert skipped == replaced


def test_vlen_jpegs_error(tmp_path):
    bad = tmp_path / "bad.h5"
    write_jpeg_h5(bad, 24, True)
    check_error(str(bad), set(BAD_JPEGS), **JPEG_OPTS)


# ---- HDF5 raw images in damaged chunks ----

def raw_images(n, shape=(224, 224, 3)):
    rng = np.random.default_rng(5)
    return rng.integers(0, 256, (n,) + shape, dtype=np.uint8)


def damage_chunk(path, k):
    """XORs the stored bytes of chunk k; returns the rows (records) the chunk covers."""
    with h5py.File(path, "r") as f:
        d = f["images"]
        info = d.id.get_chunk_info(k)
        rows = range(info.chunk_offset[0], min(info.chunk_offset[0] + d.chunks[0], d.shape[0]))
    raw = bytearray(open(path, "rb").read())
    for at in range(info.byte_offset, info.byte_offset + info.size):
        raw[at] ^= 0x5A
    with open(path, "wb") as f:
        f.write(raw)
    return set(rows)


@pytest.mark.parametrize("layout", ["gzip", "fletcher32"])
def test_damaged_chunks_skip_replaces_and_counts(tmp_path, layout):
    """gzip with h5py's default chunking: many chunks per record, so each record is fetched
    in one go from the chunks the worker's reader read. fletcher32: a filter the loader
    leaves to libhdf5 (the serialised fallback)."""
    n = 20
    imgs = raw_images(n)
    labels = np.arange(n, dtype=np.int64) * 3 - 7
    path = tmp_path / (layout + ".h5")
    with h5py.File(path, "w") as f:
        if layout == "gzip":
            f.create_dataset("images", data=imgs, compression="gzip")
        else:
            f.create_dataset("images", data=imgs, chunks=(2, 224, 224, 3), fletcher32=True)
        f.create_dataset("labels", data=labels)
        nchunks = f["images"].id.get_num_chunks()
    bad = damage_chunk(str(path), nchunks // 2)
    assert bad
    opts = dict(batch_size=6, transform="none", threads=2)
    with stoker.Loader(str(path), shuffle=False, device="cpu", on_corrupt="skip",
                       **opts) as loader:
        batches = epochs(loader, 2)
        skipped = loader.stats()["skipped"]
    replaced = check_skip(batches, bad, imgs, labels, n)
    assert replaced == 2 * len(bad)
    assert skipped == replaced
    check_error(str(path), bad, **opts)


# ---- packed shards: what `skipped` counts ----

def corrupt_records(path, victims):
    """Flips one payload byte of each record in victims."""
    left = set(victims)
    for shard in glob.glob(os.path.join(path, "shard-*.stk")):
        raw = bytearray(open(shard, "rb").read())
        for v in list(left):
            at = raw.find(h.record_array(v).tobytes())
            if at >= 0:
                raw[at + 100] ^= 0xFF
                left.discard(v)
        with open(shard, "wb") as f:
            f.write(raw)
    assert not left


def test_skipped_counts_delivered_replacements_only(tmp_path):
    """One bad record, two epochs: two replacements delivered, however far the loader read
    ahead into the third epoch."""
    path = h.write_raw(tmp_path / "ds", 40)
    corrupt_records(path, [5])
    ref = {i: h.record_array(i) for i in range(40)}
    labels = {i: h.label_of(i) for i in range(40)}
    with stoker.Loader(path, 8, shuffle=False, device="cpu", on_corrupt="skip", depth=6,
                       threads=2) as loader:
        batches = epochs(loader, 2)
        it = iter(loader)  # the third epoch's first batch: delivered, then counted
        import time
        time.sleep(0.2)  # let the workers fill every slot ahead
        assert loader.stats()["skipped"] == 2
        b = next(it)
        assert 5 not in list(b.indices)
        assert loader.stats()["skipped"] == 3
        b.release()
        del b, it
    assert check_skip(batches, {5}, ref, labels, 40) == 2


def test_all_corrupt_fails_and_counts_nothing(tmp_path):
    path = h.write_raw(tmp_path / "ds", 12)
    corrupt_records(path, range(12))
    with stoker.Loader(path, 4, shuffle=False, device="cpu", on_corrupt="skip",
                       threads=2) as loader:
        with pytest.raises(stoker.CorruptError) as e:
            next(iter(loader))
        assert "without an intact replacement" in str(e.value)
        assert loader.stats()["skipped"] == 0


def test_shard_cut_short_after_open_replaces_every_record_cut(tmp_path):
    """A shard truncated while the loader has it open: every record of a coalesced read that
    the file no longer holds whole is replaced, not only the first (buffered reads land in
    the batch in place, so a record left unchecked would go out as it happened to be)."""
    n = 30
    path = h.write_raw(tmp_path / "ds", n, align=1)  # records back to back: one read
    shards = sorted(glob.glob(os.path.join(path, "shard-*.stk")))
    assert len(shards) == 1
    cut_at = open(shards[0], "rb").read().find(h.record_array(20).tobytes()) + 50
    ref = {i: h.record_array(i) for i in range(n)}
    labels = {i: h.label_of(i) for i in range(n)}
    with stoker.Loader(path, n, shuffle=False, device="cpu", on_corrupt="skip", threads=1,
                       depth=1, backend="pread") as loader:
        os.truncate(shards[0], cut_at)
        # a restart drops what was read before the cut (at the start of epoch 0, where the
        # loader stands, set_epoch(0) would keep it); unshuffled, every epoch is in id order
        loader.set_epoch(1)
        batches = epochs(loader, 1)
        skipped = loader.stats()["skipped"]
    assert check_skip(batches, set(range(20, n)), ref, labels, n) == 10
    assert skipped == 10


def test_gzip_chunk_damaged_in_stored_block_is_caught(tmp_path):
    """Random pixels do not compress: zlib stores them verbatim, so a flipped byte in a
    chunk's first record decodes to a wrong byte without an error; only the stream's
    checksum, at the chunk's end, shows it. Every record of the chunk must be refused
    (ERROR) or replaced (SKIP), as libhdf5 refuses it, never delivered wrong. The chunk is
    larger than one step of inflation, so its first record is ready before its end."""
    n = 8
    imgs = raw_images(n, shape=(160, 160, 3))
    labels = np.arange(n, dtype=np.int64)
    path = tmp_path / "stored.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("images", data=imgs, chunks=(4, 160, 160, 3), compression="gzip")
        f.create_dataset("labels", data=labels)
        info = f["images"].id.get_chunk_info(0)
    raw = bytearray(open(path, "rb").read())
    raw[info.byte_offset + 100] ^= 0x01  # inside record 0's bytes, in a stored block
    with open(path, "wb") as fh:
        fh.write(raw)
    with h5py.File(path, "r") as f:
        with pytest.raises(OSError):
            f["images"][0]
    bad = set(range(4))
    opts = dict(batch_size=2, transform="none", threads=1)
    check_error(str(path), bad, **opts)
    with stoker.Loader(str(path), shuffle=False, device="cpu", on_corrupt="skip",
                       **opts) as loader:
        batches = epochs(loader, 1)
        skipped = loader.stats()["skipped"]
    assert check_skip(batches, bad, imgs, labels, n) == 4 == skipped
