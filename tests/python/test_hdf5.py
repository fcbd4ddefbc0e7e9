# SPDX-License-Identifier: Apache-2.0
"""HDF5 sources: files written by h5py in every layout stoker maps (contiguous, chunked with
any grid, deflate and shuffle, JPEG blob plus offsets, variable-length bytes) and in layouts it
reads through libhdf5 (lzf, big-endian); every record stoker delivers must equal h5py's read
of it, labels too. Damaged files must fail with a message, never crash.

Talks to the C library through ctypes, so it tests the library alone."""
import ctypes
import io
import os

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

from conftest import _library  # noqa: E402

LIB = ctypes.CDLL(_library())
P, I32, I64, U64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
for name, res, args in [
    ("stoker_capability_get", ctypes.c_int64, [I32]),
    ("stoker_config_create", ctypes.c_int, [ctypes.POINTER(P)]),
    ("stoker_config_destroy", None, [P]),
    ("stoker_config_set_int", ctypes.c_int, [P, I32, I64]),
    ("stoker_config_set_string", ctypes.c_int, [P, I32, ctypes.c_char_p]),
    ("stoker_dataset_open", ctypes.c_int, [ctypes.POINTER(P), ctypes.c_char_p, P]),
    ("stoker_dataset_close", None, [P]),
    ("stoker_dataset_errmsg", ctypes.c_char_p, [P]),
    ("stoker_dataset_num_records", I64, [P]),
    ("stoker_dataset_field", ctypes.c_int, [P, ctypes.POINTER(I32), ctypes.POINTER(I32),
                                            ctypes.POINTER(I32), ctypes.POINTER(I64)]),
    ("stoker_dataset_record_info", ctypes.c_int, [P, I64, ctypes.POINTER(U64),
                                                  ctypes.POINTER(I64), ctypes.POINTER(I32)]),
    ("stoker_dataset_read", ctypes.c_int, [P, I64, P, ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_size_t)]),
    ("stoker_loader_create", ctypes.c_int, [ctypes.POINTER(P), ctypes.c_char_p, P]),
    ("stoker_loader_destroy", None, [P]),
    ("stoker_loader_errmsg", ctypes.c_char_p, [P]),
    ("stoker_loader_next", ctypes.c_int, [P, ctypes.POINTER(P)]),
    ("stoker_batch_release", ctypes.c_int, [P]),
    ("stoker_batch_count", I64, [P]),
    ("stoker_batch_data", P, [P]),
    ("stoker_batch_nbytes", U64, [P]),
    ("stoker_batch_ids", ctypes.POINTER(I64), [P]),
    ("stoker_batch_labels", ctypes.POINTER(I64), [P]),
    ("stoker_loader_stats_json", ctypes.c_int, [P, ctypes.c_char_p, ctypes.c_size_t,
                                                ctypes.POINTER(ctypes.c_size_t)]),
]:
    fn = getattr(LIB, name)
    fn.restype, fn.argtypes = res, args

CAP_HDF5, OPT_H5_IMAGES, OPT_H5_LABELS = 5, 120, 121
OPT_BATCH, OPT_THREADS, OPT_TRANSFORM, OPT_DEVICE, OPT_SEED = 40, 60, 80, 67, 42
OPT_BACKEND, BACKEND_AUTO, BACKEND_IO_URING, BACKEND_PREAD = 62, 0, 1, 2
FIELD_BYTES, FIELD_JPEG, FIELD_RAW = 1, 2, 3
END = 1

pytestmark = pytest.mark.skipif(LIB.stoker_capability_get(CAP_HDF5) != 1,
                                reason="library built without HDF5")


class Dataset:
    def __init__(self, path, **strings):
        self.cfg = P()
        assert LIB.stoker_config_create(ctypes.byref(self.cfg)) == 0
        for opt, value in strings.items():
            key = {"images": OPT_H5_IMAGES, "labels": OPT_H5_LABELS}[opt]
            assert LIB.stoker_config_set_string(self.cfg, key, value.encode()) == 0
        self.ds = P()
        self.rc = LIB.stoker_dataset_open(ctypes.byref(self.ds), str(path).encode(), self.cfg)
        self.msg = LIB.stoker_dataset_errmsg(self.ds).decode()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        LIB.stoker_dataset_close(self.ds)
        LIB.stoker_config_destroy(self.cfg)

    def field(self):
        kind, dtype, ndim = I32(), I32(), I32()
        shape = (I64 * 8)()
        assert LIB.stoker_dataset_field(self.ds, ctypes.byref(kind), ctypes.byref(dtype),
                                        ctypes.byref(ndim), shape) == 0
        return kind.value, dtype.value, tuple(shape[: ndim.value])

    def n(self):
        return LIB.stoker_dataset_num_records(self.ds)

    def label(self, i):
        lab = I64()
        assert LIB.stoker_dataset_record_info(self.ds, i, None, ctypes.byref(lab), None) == 0
        return lab.value

    def read(self, i):
        size = U64()
        assert LIB.stoker_dataset_record_info(self.ds, i, ctypes.byref(size), None, None) == 0
        buf = ctypes.create_string_buffer(max(1, size.value))
        got = ctypes.c_size_t()
        rc = LIB.stoker_dataset_read(self.ds, i, buf, size.value, ctypes.byref(got))
        if rc != 0:
            raise IOError(LIB.stoker_dataset_errmsg(self.ds).decode())
        return buf.raw[: got.value]


def check_all(path, want_images, want_labels=None, **opts):
    """Every record and label through stoker_dataset_read equals h5py's read."""
    with Dataset(path, **opts) as d:
        assert d.rc == 0, d.msg
        assert d.n() == len(want_images)
        for i in range(len(want_images)):
            rec = want_images[i]
            want = np.ascontiguousarray(rec).astype(rec.dtype.newbyteorder("<"))
            assert d.read(i) == want.tobytes(), f"record {i}"
            assert d.label(i) == (-1 if want_labels is None else int(want_labels[i]))
        return d.field()


def loader_stats(ld):
    import json
    buf = ctypes.create_string_buffer(8192)
    assert LIB.stoker_loader_stats_json(ld, buf, len(buf), None) == 0
    return json.loads(buf.value.decode())


def loader_batches(path, batch=5, threads=2, backend=BACKEND_AUTO, stats=None):
    """Every batch of one epoch as (ids, labels, bytes); `stats` (a dict) receives the
    loader's statistics after the epoch."""
    cfg = P()
    assert LIB.stoker_config_create(ctypes.byref(cfg)) == 0
    for opt, v in [(OPT_BATCH, batch), (OPT_THREADS, threads), (OPT_TRANSFORM, 1),
                   (OPT_DEVICE, -1), (OPT_SEED, 7), (OPT_BACKEND, backend)]:
        assert LIB.stoker_config_set_int(cfg, opt, v) == 0
    ld = P()
    rc = LIB.stoker_loader_create(ctypes.byref(ld), str(path).encode(), cfg)
    LIB.stoker_config_destroy(cfg)
    out = []
    try:
        assert rc == 0, LIB.stoker_loader_errmsg(ld).decode()
        while True:
            b = P()
            rc = LIB.stoker_loader_next(ld, ctypes.byref(b))
            if rc == END:
                break
            assert rc == 0, LIB.stoker_loader_errmsg(ld).decode()
            n = LIB.stoker_batch_count(b)
            data = ctypes.string_at(LIB.stoker_batch_data(b), LIB.stoker_batch_nbytes(b))
            ids = [LIB.stoker_batch_ids(b)[k] for k in range(n)]
            labs = [LIB.stoker_batch_labels(b)[k] for k in range(n)]
            out.append((ids, labs, data))
            LIB.stoker_batch_release(b)
        if stats is not None:
            stats.update(loader_stats(ld))
    finally:
        LIB.stoker_loader_destroy(ld)
    return out


def check_loader(path, images, labels):
    seen = set()
    for ids, labs, data in loader_batches(path):
        rec = len(data) // len(ids)
        for k, i in enumerate(ids):
            assert data[k * rec:(k + 1) * rec] == np.ascontiguousarray(images[i]).tobytes()
            assert labs[k] == labels[i]
            seen.add(i)
    assert seen == set(range(len(images)))


def write_vlen(f, name, recs):
    """A variable-length uint8 dataset of the byte strings recs, as h5py writes one."""
    d = f.create_dataset(name, (len(recs),), dtype=h5py.vlen_dtype(np.uint8))
    for i, r in enumerate(recs):
        d[i] = np.frombuffer(r, dtype=np.uint8)


def make_images(n, shape, dtype=np.uint8, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal((n,) + shape).astype(dtype)
    return rng.integers(0, 250, (n,) + shape).astype(dtype)


# ---- the mapped layouts ----

def test_contiguous_uint8_and_loader(tmp_path):
    p = tmp_path / "c.h5"
    imgs, labs = make_images(23, (8, 6, 3)), np.arange(23, dtype=np.int16) * 3 - 5
    with h5py.File(p, "w") as f:
        f["images"], f["labels"] = imgs, labs
    assert check_all(p, imgs, labs) == (FIELD_RAW, 1, (8, 6, 3))
    check_loader(p, imgs, labs)


def test_contiguous_float32_named_datasets(tmp_path):
    p = tmp_path / "f.h5"
    imgs, labs = make_images(11, (4, 5), np.float32), np.arange(11, dtype=np.uint8)
    with h5py.File(p, "w") as f:
        f["x"], f["y"] = imgs, labs
    assert check_all(p, imgs, labs, images="x", labels="y") == (FIELD_RAW, 11, (4, 5))


def test_group_path_syntax_and_no_labels(tmp_path):
    p = tmp_path / "g.h5"
    imgs, labs = make_images(7, (3, 3)), np.arange(7, dtype=np.int64) + 100
    with h5py.File(p, "w") as f:
        f.create_group("grp")
        f["grp/pics"], f["grp/labels"] = imgs, labs
        f["other"] = imgs
    check_all(f"{p}:/grp/pics", imgs, labs)
    check_all(f"{p}:/other", imgs, None)


@pytest.mark.parametrize("chunks", [(3, 4, 2, 3), (1, 8, 6, 3), (5, 3, 5, 2), True])
def test_chunked_any_grid(tmp_path, chunks):
    p = tmp_path / "k.h5"
    imgs, labs = make_images(17, (8, 6, 3)), np.arange(17)
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=chunks)
        f["labels"] = labs
    check_all(p, imgs, labs)
    check_loader(p, imgs, labs)


def test_auto_chunking_splits_records(tmp_path):
    p = tmp_path / "auto.h5"
    imgs = make_images(6, (64, 96, 3))
    with h5py.File(p, "w") as f:
        d = f.create_dataset("images", data=imgs, chunks=True)
        assert d.chunks[1] < 64 or d.chunks[2] < 96  # records really span chunks
    check_all(p, imgs)


@pytest.mark.parametrize("filters", [dict(compression="gzip"),
                                     dict(compression="gzip", shuffle=True),
                                     dict(shuffle=True)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.int16])
def test_deflate_shuffle(tmp_path, filters, dtype):
    p = tmp_path / "z.h5"
    imgs, labs = make_images(21, (7, 5, 3), dtype), np.arange(21, dtype=np.int32)
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=(4, 3, 5, 3), **filters)
        f["labels"] = labs
    check_all(p, imgs, labs)
    check_loader(p, imgs, labs)


def test_unallocated_chunks_give_fill_value(tmp_path):
    p = tmp_path / "fill.h5"
    with h5py.File(p, "w") as f:
        d = f.create_dataset("images", (12, 4, 4), dtype="int32", chunks=(2, 2, 4),
                             fillvalue=-7, compression="gzip")
        d[3] = np.arange(16).reshape(4, 4)
    with h5py.File(p, "r") as f:
        want = f["images"][:]
    check_all(p, want)


def test_block_order_over_gzip_chunks(tmp_path):
    """order="blocks": each chunk's 8 rows are visited together (the last chunk holds 3),
    every record equals h5py's, each exactly once per epoch, the same order every run."""
    import stoker
    p = tmp_path / "blocks.h5"
    imgs, labs = make_images(203, (6, 5, 3)), np.arange(203, dtype=np.int64) * 3
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=(8, 6, 5, 3), compression="gzip")
        f["labels"] = labs
    with h5py.File(p, "r") as f:
        want, want_labels = f["images"][:], f["labels"][:]

    def epochs(order, count=2):
        out = []
        with stoker.Loader(str(p), 16, seed=5, device="cpu", threads=2, order=order) as ld:
            for _ in range(count):
                ids = []
                for b in ld:
                    data = b.numpy()
                    for k, i in enumerate(b.indices):
                        assert np.array_equal(data[k], want[i]), f"record {i}"
                        assert b.labels[k] == want_labels[i]
                    ids.extend(int(i) for i in b.indices)
                out.append(ids)
        return out

    first = epochs("blocks")
    for ids in first:
        assert sorted(ids) == list(range(203))
        starts = [k for k in range(len(ids)) if k == 0 or ids[k] // 8 != ids[k - 1] // 8]
        assert len(starts) == 26  # one run per chunk: blocks are contiguous
    assert first[0] != first[1]
    assert epochs("blocks") == first
    assert epochs("records", 1)[0] != first[0]
    with pytest.raises(ValueError):
        stoker.Loader(str(p), 16, device="cpu", order="chunks")


def jpeg_bytes(i):
    from PIL import Image
    img = Image.fromarray(make_images(1, (16 + i, 24, 3), seed=i)[0])
    buf = io.BytesIO()
    img.save(buf, format="JPEG")
    return buf.getvalue()


@pytest.mark.parametrize("chunked", [False, True])
def test_jpeg_blob_with_offsets(tmp_path, chunked):
    pytest.importorskip("PIL")
    p = tmp_path / "blob.h5"
    jpegs = [jpeg_bytes(i) for i in range(9)]
    offs = np.cumsum([0] + [len(j) for j in jpegs]).astype(np.int64)
    with h5py.File(p, "w") as f:
        blob = np.frombuffer(b"".join(jpegs), dtype=np.uint8)
        f.create_dataset("images", data=blob, chunks=(1000,) if chunked else None)
        f["images_offsets"] = offs
        f["labels"] = np.arange(9)
    with Dataset(p) as d:
        assert d.rc == 0, d.msg
        assert d.field()[0] == FIELD_JPEG
        assert [d.read(i) for i in range(9)] == jpegs


def test_vlen_bytes_serialised(tmp_path):
    p = tmp_path / "vlen.h5"
    recs = [bytes(range(i, i + 3 * i + 1)) for i in range(10)]
    with h5py.File(p, "w") as f:
        write_vlen(f, "images", recs)
        f["labels"] = np.arange(10) * 2
    with Dataset(p) as d:
        assert d.rc == 0, d.msg
        assert d.field()[0] == FIELD_BYTES
        assert [d.read(i) for i in range(10)] == recs
        assert [d.label(i) for i in range(10)] == list(range(0, 20, 2))


@pytest.mark.parametrize("chunks", [(8, 6, 5, 3), (4, 3, 5, 3), (4, 1, 1, 3)])
def test_chunk_reads_through_the_reader(tmp_path, chunks):
    """The worker reads a chunked gzip file's chunks through its own reader: io_uring and
    pread give the same batches, equal to h5py's records, and the reads are counted. With
    (4, 1, 1, 3) a record spans 30 chunks, more than the chunk cache holds: such a record
    is read inside its fetch."""
    p = tmp_path / "gz.h5"
    imgs, labs = make_images(150, (6, 5, 3)), np.arange(150, dtype=np.int64) + 11
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=chunks, compression="gzip")
        f["labels"] = labs
    runs = {}
    for name, backend in [("pread", BACKEND_PREAD), ("io_uring", BACKEND_IO_URING)]:
        stats = {}
        try:
            runs[name] = loader_batches(p, batch=16, threads=2, backend=backend, stats=stats)
        except AssertionError as e:
            if name == "io_uring" and "io_uring" in str(e):
                continue  # not available here: pread alone is checked
            raise
        assert stats["backend"] == name
        assert stats["records_read"] >= 150
        assert stats["bytes_read"] >= imgs.nbytes
        # chunks read by the workers' readers are sampled at submit; a record of 30 chunks
        # never goes through the reader
        assert (stats["reads_in_flight"] > 0) == (chunks != (4, 1, 1, 3))
        seen = set()
        for ids, got_labs, data in runs[name]:
            rec = len(data) // len(ids)
            for k, i in enumerate(ids):
                assert data[k * rec:(k + 1) * rec] == imgs[i].tobytes(), f"{name}: record {i}"
                assert got_labs[k] == labs[i]
                seen.add(i)
        assert seen == set(range(150))
    if "io_uring" in runs:
        assert runs["io_uring"] == runs["pread"]


@pytest.mark.parametrize("backend", [BACKEND_PREAD, BACKEND_IO_URING])
def test_damaged_chunk_fails_the_loader_cleanly(tmp_path, backend):
    """A gzip chunk damaged on disk: the loader's batch fails with a message naming the
    file, whichever back-end read the chunk."""
    p = tmp_path / "gz.h5"
    imgs = make_images(40, (16, 16, 3))
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=(4, 16, 16, 3), compression="gzip")
    with h5py.File(p, "r") as f:
        info = f["images"].id.get_chunk_info(3)
    bad = bytearray(p.read_bytes())
    for k in range(info.byte_offset, info.byte_offset + info.size):
        bad[k] ^= 0x5A
    p.write_bytes(bytes(bad))
    try:
        loader_batches(p, batch=8, backend=backend)
    except AssertionError as e:
        if backend == BACKEND_IO_URING and "io_uring is not available" in str(e):
            pytest.skip("io_uring is not available here")
        assert str(p) in str(e)
    else:
        pytest.fail("a damaged chunk was delivered")


def test_serialised_fallback_reported_as_hdf5_backend(tmp_path):
    """Records that libhdf5 reads (variable-length, lzf, big-endian) show backend "hdf5" in
    the loader's stats; mapped layouts show the reader's back-end."""
    p = tmp_path / "vlen.h5"
    recs = [bytes(range(i, i + 2 * i + 1)) for i in range(12)]
    with h5py.File(p, "w") as f:
        write_vlen(f, "images", recs)
        f.create_dataset("lzf", data=make_images(12, (4, 3)), chunks=(2, 4, 3),
                         compression="lzf")
        f.create_dataset("gz", data=make_images(12, (4, 3)), chunks=(2, 4, 3),
                         compression="gzip")
    stats = {}
    batches = loader_batches(p, batch=4, stats=stats)
    assert stats["backend"] == "hdf5"
    assert stats["records_read"] >= 12
    got = {}
    for ids, _, data in batches:
        assert b"".join(recs[i] for i in ids) == data
        got.update(dict.fromkeys(ids))
    assert sorted(got) == list(range(12))
    stats = {}
    loader_batches(f"{p}:/lzf", batch=4, stats=stats)
    assert stats["backend"] == "hdf5"
    stats = {}
    loader_batches(f"{p}:/gz", batch=4, stats=stats)
    assert stats["backend"] in ("io_uring", "pread")


# ---- layouts read through libhdf5 ----

def test_lzf_and_big_endian_through_libhdf5(tmp_path):
    p = tmp_path / "lzf.h5"
    imgs = make_images(9, (5, 4), np.float32)
    big = make_images(9, (3,), np.int32).astype(">i4")
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=(2, 5, 4), compression="lzf")
        f["big"] = big
    check_all(p, imgs)
    check_all(f"{p}:/big", big)


# ---- refusals and damage ----

def test_unsupported_type_names_file_and_dataset(tmp_path):
    p = tmp_path / "cmp.h5"
    with h5py.File(p, "w") as f:
        f["images"] = np.zeros(4, dtype=[("a", "i4"), ("b", "f4")])
    with Dataset(p) as d:
        assert d.rc != 0
        assert str(p) in d.msg and "images" in d.msg and "not supported" in d.msg
    with Dataset(f"{p}:/nothere") as d:
        assert d.rc != 0 and "nothere" in d.msg


def test_wrong_labels(tmp_path):
    p = tmp_path / "lab.h5"
    with h5py.File(p, "w") as f:
        f["images"] = make_images(4, (2,))
        f["labels"] = np.arange(5)
    with Dataset(p) as d:
        assert d.rc != 0 and "labels" in d.msg
    with Dataset(p, labels="missing") as d:
        assert d.rc != 0 and "missing" in d.msg


@pytest.mark.parametrize("layout", ["contiguous", "gzip"])
def test_truncated_and_corrupted(tmp_path, layout):
    p = tmp_path / "t.h5"
    imgs = make_images(40, (16, 16, 3))
    with h5py.File(p, "w") as f:
        kw = {} if layout == "contiguous" else dict(chunks=(4, 16, 16, 3), compression="gzip")
        f.create_dataset("images", data=imgs, **kw)
    raw = p.read_bytes()
    for cut in [len(raw) // 2, len(raw) - 100, 1000, 9]:
        q = tmp_path / f"cut{cut}.h5"
        q.write_bytes(raw[:cut])
        with Dataset(q) as d:
            if d.rc == 0:  # the map fits: the damage shows when reading
                for i in range(d.n()):
                    try:
                        d.read(i)
                    except IOError as e:
                        assert str(q) in str(e)
            else:
                assert str(q) in d.msg
    # flip bytes inside the data: contiguous data just differs; gzip chunks must not crash
    with h5py.File(p, "r") as f:
        off = f["images"].id.get_offset() if layout == "contiguous" else \
            f["images"].id.get_chunk_info(3).byte_offset
    bad = bytearray(raw)
    for k in range(off + 10, off + 200, 7):
        bad[k] ^= 0x5A
    q = tmp_path / "flip.h5"
    q.write_bytes(bytes(bad))
    with Dataset(q) as d:
        assert d.rc == 0, d.msg
        for i in range(d.n()):
            try:
                d.read(i)
            except IOError as e:
                assert str(q) in str(e)


# ---- stoker-pack FILE.h5 OUT ----

def test_stoker_pack_converts(tmp_path):
    import subprocess
    tool = os.path.join(os.path.dirname(_library()), "stoker-pack")
    if not os.path.exists(tool):
        pytest.skip("stoker-pack not built next to the library")
    p = tmp_path / "pack.h5"
    imgs, labs = make_images(19, (6, 4, 3)), np.arange(19) % 5
    with h5py.File(p, "w") as f:
        f.create_dataset("images", data=imgs, chunks=(4, 3, 4, 3), compression="gzip")
        f["labels"] = labs
    out = tmp_path / "out"
    subprocess.run([tool, "--quiet", "--no-fsync", str(p), str(out)], check=True)
    LIB.stoker_dataset_record_key.restype = ctypes.c_char_p
    LIB.stoker_dataset_record_key.argtypes = [P, I64]
    with Dataset(out) as d:
        assert d.rc == 0, d.msg
        assert d.field() == (FIELD_RAW, 1, (6, 4, 3))
        for i in range(19):
            src = int(LIB.stoker_dataset_record_key(d.ds, i))
            assert d.read(i) == imgs[src].tobytes() and d.label(i) == labs[src]
