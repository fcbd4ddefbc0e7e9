# SPDX-License-Identifier: Apache-2.0
"""HDF5 datasets whose bytes are not in the file named: external links, external raw
storage and virtual datasets. stoker reads the bytes by file offset itself, so each must
either give exactly what h5py reads through the same path or be refused at open with a
message naming the file, the dataset and the cause. Soft links and labels or offsets
reached through links are covered too.

Talks to the C library through ctypes, so it tests the library alone."""
import os

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

import test_hdf5 as t  # noqa: E402  (the ctypes bindings and helpers of the HDF5 tests)

pytestmark = t.pytestmark


def h5py_read(path, name="images", labels="labels"):
    """The records and labels as h5py reads them through `path` (links followed)."""
    with h5py.File(path, "r") as f:
        return f[name][:], (f[labels][:] if labels in f else None)


def check_like_h5py(path, name="images"):
    """stoker_dataset_read and a loader's epoch both give h5py's records and labels."""
    imgs, labs = h5py_read(path, name)
    t.check_all(f"{path}:/{name}", imgs, labs)
    t.check_loader(f"{path}:/{name}", imgs, labs if labs is not None else [-1] * len(imgs))


def backend_of(path):
    stats = {}
    t.loader_batches(path, batch=4, stats=stats)
    return stats["backend"]


def refusal(path, **opts):
    with t.Dataset(path, **opts) as d:
        assert d.rc != 0, "opened"
        return d.msg


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """Files go in tmp_path/data; the process runs in tmp_path/cwd, so nothing is found
    relative to the current directory by accident."""
    (tmp_path / "data").mkdir()
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path / "data"


# ---- external links ----

@pytest.mark.parametrize("storage", [{}, dict(chunks=(3, 5, 4, 3)),
                                     dict(chunks=(2, 5, 4, 3), compression="gzip")])
@pytest.mark.parametrize("link_file_size", ["small", "large"])
def test_external_link_images_and_labels(elsewhere, storage, link_file_size):
    """Images and labels are external links to another file. With a small linking file the
    target's offsets lie past its end (a false "truncated file"); with a large one they lie
    inside it (other bytes delivered as records). Both must read the target's bytes."""
    imgs, labs = t.make_images(21, (5, 4, 3)), np.arange(21, dtype=np.int32) * 7 - 3
    with h5py.File(elsewhere / "target.h5", "w") as f:
        f["padding"] = np.full(3000, 0xEE, dtype=np.uint8)
        f.create_dataset("pics", data=imgs, **storage)
        f["targets"] = labs
    with h5py.File(elsewhere / "link.h5", "w") as f:
        if link_file_size == "large":
            f["local"] = np.full(200000, 0x11, dtype=np.uint8)
        f["images"] = h5py.ExternalLink("target.h5", "/pics")
        f["labels"] = h5py.ExternalLink("target.h5", "/targets")
    check_like_h5py(elsewhere / "link.h5")


def test_external_link_chain_and_missing_target(elsewhere):
    """A link to a link: the bytes are in the last file. A link whose file is missing is
    refused with the dataset named."""
    imgs = t.make_images(9, (6, 2))
    with h5py.File(elsewhere / "c.h5", "w") as f:
        f["pad"] = np.zeros(5000, np.uint8)
        f["x"] = imgs
    with h5py.File(elsewhere / "b.h5", "w") as f:
        f["y"] = h5py.ExternalLink("c.h5", "/x")
    with h5py.File(elsewhere / "a.h5", "w") as f:
        f["images"] = h5py.ExternalLink("b.h5", "/y")
        f["gone"] = h5py.ExternalLink("missing.h5", "/x")
    check_like_h5py(elsewhere / "a.h5")
    msg = refusal(f"{elsewhere / 'a.h5'}:/gone")
    assert str(elsewhere / "a.h5") in msg and "gone" in msg


def test_labels_link_to_a_missing_file_refused(elsewhere):
    """A labels link that leads nowhere is not "no labels": every label would be -1."""
    with h5py.File(elsewhere / "l.h5", "w") as f:
        f["images"] = t.make_images(5, (2, 2))
        f["labels"] = h5py.ExternalLink("missing.h5", "/labels")
    msg = refusal(elsewhere / "l.h5")
    assert str(elsewhere / "l.h5") in msg and "labels" in msg


def test_soft_links(elsewhere):
    imgs, labs = t.make_images(8, (4, 4)), np.arange(8) + 40
    with h5py.File(elsewhere / "s.h5", "w") as f:
        f.create_dataset("store/pics", data=imgs, chunks=(3, 4, 4), compression="gzip")
        f["store/targets"] = labs
        f["images"] = h5py.SoftLink("/store/pics")
        f["labels"] = h5py.SoftLink("/store/targets")
    check_like_h5py(elsewhere / "s.h5")


@pytest.mark.parametrize("chunked", [False, True])
def test_blob_and_offsets_in_other_files(elsewhere, chunked):
    """The JPEG blob and its offsets are external links into two other files; the labels
    stay local."""
    pytest.importorskip("PIL")
    jpegs = [t.jpeg_bytes(i) for i in range(7)]
    offs = np.cumsum([0] + [len(j) for j in jpegs]).astype(np.int64)
    blob = np.frombuffer(b"".join(jpegs), dtype=np.uint8)
    with h5py.File(elsewhere / "blob.h5", "w") as f:
        f["pad"] = np.zeros(4000, np.uint8)
        f.create_dataset("blob", data=blob, chunks=(700,) if chunked else None)
    with h5py.File(elsewhere / "offs.h5", "w") as f:
        f["o"] = offs
    with h5py.File(elsewhere / "main.h5", "w") as f:
        f["images"] = h5py.ExternalLink("blob.h5", "/blob")
        f["images_offsets"] = h5py.ExternalLink("offs.h5", "/o")
        f["labels"] = np.arange(7) * 2
    with t.Dataset(elsewhere / "main.h5") as d:
        assert d.rc == 0, d.msg
        assert d.field()[0] == t.FIELD_JPEG
        assert [d.read(i) for i in range(7)] == jpegs
        assert [d.label(i) for i in range(7)] == list(range(0, 14, 2))


# ---- external raw storage (contiguous data in files that are not HDF5) ----

def write_external(path, imgs, segments):
    """A dataset whose raw data h5py writes to the external files `segments`."""
    with h5py.File(path, "w") as f:
        d = f.create_dataset("images", shape=imgs.shape, dtype=imgs.dtype, external=segments)
        d[...] = imgs
        f["labels"] = np.arange(len(imgs), dtype=np.int64) * 5


@pytest.mark.parametrize("offset", [0, 777])
def test_external_storage_one_file_read_by_the_reader(tmp_path, monkeypatch, offset):
    """One external file (h5py names it relative to the current directory): the records
    equal h5py's, and the loader's own reader reads them, not libhdf5."""
    monkeypatch.chdir(tmp_path)
    imgs = t.make_images(13, (5, 3), np.float32)
    write_external(tmp_path / "e.h5", imgs, [("raw.bin", offset, h5py.h5f.UNLIMITED)])
    assert (tmp_path / "raw.bin").stat().st_size == offset + imgs.nbytes
    check_like_h5py(tmp_path / "e.h5")
    assert backend_of(tmp_path / "e.h5") in ("io_uring", "pread")


def test_external_storage_origin_prefix(elsewhere, monkeypatch):
    """HDF5_EXTFILE_PREFIX=${ORIGIN}: libhdf5 looks next to the HDF5 file, and so does
    stoker, from any current directory. libhdf5 reads the variable when it starts, so the
    check runs in a fresh process."""
    import subprocess
    import sys
    imgs = t.make_images(10, (4, 4))
    monkeypatch.chdir(elsewhere)
    write_external(elsewhere / "e.h5", imgs, [("raw.bin", 0, h5py.h5f.UNLIMITED)])
    child = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
             f"import test_hdf5_external as x; x.check_like_h5py({str(elsewhere / 'e.h5')!r}); "
             f"print(x.backend_of({str(elsewhere / 'e.h5')!r}))")
    env = dict(os.environ, HDF5_EXTFILE_PREFIX="${ORIGIN}", STOKER_LIBRARY=t._library())
    run = subprocess.run([sys.executable, "-c", child], cwd=elsewhere.parent / "cwd", env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[-1] in ("io_uring", "pread")


def test_external_storage_several_files(tmp_path, monkeypatch):
    """Raw data cut over three files: records spanning two files still equal h5py's."""
    monkeypatch.chdir(tmp_path)
    imgs = t.make_images(12, (7, 3))
    write_external(tmp_path / "e.h5", imgs, [("a.bin", 0, 50), ("b.bin", 10, 100),
                                             ("c.bin", 0, h5py.h5f.UNLIMITED)])
    check_like_h5py(tmp_path / "e.h5")


@pytest.mark.parametrize("damage", ["missing", "short", "short_middle"])
def test_external_storage_missing_or_short_refused(tmp_path, monkeypatch, damage):
    """libhdf5 reads the part of an external file that is not there as zeros, and a missing
    one fails only when read: stoker refuses both at open, naming the external file."""
    monkeypatch.chdir(tmp_path)
    imgs = t.make_images(12, (7, 3))
    segs = [("a.bin", 0, 50), ("b.bin", 10, 100), ("c.bin", 0, h5py.h5f.UNLIMITED)]
    write_external(tmp_path / "e.h5", imgs, segs if damage == "short_middle" else segs[2:])
    victim = tmp_path / ("b.bin" if damage == "short_middle" else "c.bin")
    if damage == "missing":
        victim.unlink()
    else:
        victim.write_bytes(victim.read_bytes()[:-5])
    msg = refusal(tmp_path / "e.h5")
    assert str(tmp_path / "e.h5") in msg and "images" in msg and victim.name in msg
    assert ("missing" if damage == "missing" else "short") in msg


# ---- virtual datasets ----

def write_vds(path, sources, n_rows, shape=(4, 3)):
    """A virtual dataset `images` of n_rows records, row block k from sources[k] =
    (file name as stored, dataset name, rows, first row in the source or None for the
    whole source dataset)."""
    lay = h5py.VirtualLayout(shape=(n_rows,) + shape, dtype=np.uint8)
    at = 0
    for fname, dname, rows, first in sources:
        if first is None:
            lay[at:at + rows] = h5py.VirtualSource(fname, dname, shape=(rows,) + shape)
        else:
            src = h5py.VirtualSource(fname, dname, shape=(first + rows,) + shape)
            lay[at:at + rows] = src[first:first + rows]
        at += rows
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("images", lay, fillvalue=0)
        f["own"] = t.make_images(5, shape, seed=9)
        f["labels"] = np.arange(n_rows)


def write_parts(folder, rows=(6, 6)):
    for k, n in enumerate(rows):
        with h5py.File(folder / f"part{k}.h5", "w") as f:
            f["x"] = t.make_images(n, (4, 3), seed=k)


def test_virtual_dataset_sources_like_h5py(elsewhere):
    """Sources named relative to the virtual dataset, by absolute path, in the same file,
    whole or sliced: the records equal h5py's."""
    write_parts(elsewhere, (6, 9))
    write_vds(elsewhere / "v.h5", [("part0.h5", "x", 6, None), ("part1.h5", "x", 4, 5),
                                   (str(elsewhere / "part1.h5"), "x", 3, 0),
                                   (".", "own", 5, None)], 18)
    check_like_h5py(elsewhere / "v.h5")


def test_virtual_dataset_sources_under_vds_prefix(elsewhere, monkeypatch):
    """HDF5_VDS_PREFIX names a folder where libhdf5 looks for source files: stoker finds
    them there too."""
    (elsewhere / "sources").mkdir()
    write_parts(elsewhere / "sources")
    write_vds(elsewhere / "v.h5", [("part0.h5", "x", 6, None), ("part1.h5", "x", 6, None)], 12)
    monkeypatch.setenv("HDF5_VDS_PREFIX", f"/nonexistent:{elsewhere / 'sources'}")
    check_like_h5py(elsewhere / "v.h5")


@pytest.mark.parametrize("damage", ["no_file", "no_dataset", "too_small", "slice_past_end",
                                    "not_hdf5"])
def test_virtual_dataset_missing_source_refused(elsewhere, damage):
    """libhdf5 reads an unreachable source as the fill value, without an error: stoker
    refuses at open, naming the virtual dataset and the source."""
    write_parts(elsewhere, (6, 3 if damage in ("too_small", "slice_past_end") else 6))
    second = ("part1.h5", "y" if damage == "no_dataset" else "x", 4,
              2 if damage == "slice_past_end" else None)
    write_vds(elsewhere / "v.h5", [("part0.h5", "x", 6, None), second], 10)
    if damage == "no_file":
        (elsewhere / "part1.h5").unlink()
    if damage == "not_hdf5":
        (elsewhere / "part1.h5").write_bytes(b"not an HDF5 file at all")
    msg = refusal(elsewhere / "v.h5")
    assert str(elsewhere / "v.h5") in msg and "images" in msg and "part1.h5" in msg, msg
    assert "virtual" in msg
