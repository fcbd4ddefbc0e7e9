# SPDX-License-Identifier: Apache-2.0
"""HDF5 labels and blob offsets whose values stoker cannot take as they are: unsigned labels
above INT64_MAX, floating-point labels, negative or floating-point offsets. Each is refused
at open with a message naming the file, the dataset and, where one value is at fault, its
index and value; nothing is clipped or truncated. Negative integer labels are delivered as
stored.

Talks to the C library through ctypes, so it tests the library alone."""
import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

import test_hdf5 as t  # noqa: E402  (the ctypes bindings and helpers of the HDF5 tests)

pytestmark = t.pytestmark


def write(path, labels=None, offsets=None):
    with h5py.File(path, "w") as f:
        if offsets is None:
            f["images"] = t.make_images(len(labels), (3, 2))
        else:
            f["images"] = np.arange(100, dtype=np.uint8)
            f["images_offsets"] = offsets
        if labels is not None:
            f["labels"] = labels


def refusal(path):
    with t.Dataset(path) as d:
        assert d.rc != 0, "opened"
        return d.msg


def test_uint64_labels_above_int64_max_refused(tmp_path):
    p = tmp_path / "u.h5"
    labels = np.arange(10, dtype=np.uint64)
    labels[6] = 2**63 + 5
    labels[8] = 2**64 - 1
    write(p, labels)
    msg = refusal(p)
    assert str(p) in msg and "labels" in msg
    assert "label 6" in msg and str(2**63 + 5) in msg, msg


def test_uint64_labels_within_int64(tmp_path):
    p = tmp_path / "u.h5"
    labels = np.array([0, 2**63 - 1, 12, 2**40], dtype=np.uint64)
    write(p, labels)
    with t.Dataset(p) as d:
        assert d.rc == 0, d.msg
        assert [d.label(i) for i in range(4)] == [int(v) for v in labels]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_float_labels_refused(tmp_path, dtype):
    """3.7 is not taken as 3: floating-point labels are refused, whole numbers or not."""
    p = tmp_path / "f.h5"
    write(p, (np.arange(6) + 0.7).astype(dtype))
    msg = refusal(p)
    assert str(p) in msg and "labels" in msg
    assert "floating-point" in msg and "integer" in msg, msg


def test_negative_labels_delivered_as_stored(tmp_path):
    p = tmp_path / "n.h5"
    labels = np.array([-5, -1, 0, 7, -(2**40)], dtype=np.int64)
    write(p, labels)
    with t.Dataset(p) as d:
        assert d.rc == 0, d.msg
        assert [d.label(i) for i in range(5)] == labels.tolist()


@pytest.mark.parametrize("offsets, index, value", [
    (np.array([0, 30, -5, 60, 100], np.int64), 2, "-5"),
    (np.array([-1, 10, 50, 100], np.int32), 0, "-1"),
    (np.array([0, 10, 50, -128], np.int8), 3, "-128"),
])
def test_negative_offsets_refused(tmp_path, offsets, index, value):
    p = tmp_path / "o.h5"
    write(p, offsets=offsets)
    msg = refusal(p)
    assert str(p) in msg and "images_offsets" in msg
    assert f"entry {index}" in msg and value in msg and "negative" in msg, msg


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_offsets_refused(tmp_path, dtype):
    p = tmp_path / "o.h5"
    write(p, offsets=np.array([0, 10.7, 50, 100], dtype))
    msg = refusal(p)
    assert str(p) in msg and "images_offsets" in msg
    assert "floating-point" in msg and "integer" in msg, msg


@pytest.mark.parametrize("chunks", [None, (2, 8, 8, 3)])
def test_user_block_read_right(tmp_path, chunks):
    """A file with a user block: recognised as HDF5, and every record equals h5py's read
    (libhdf5 reads them: its offsets are not trusted past a user block)."""
    p = tmp_path / "ub.h5"
    imgs = np.arange(6 * 8 * 8 * 3, dtype=np.uint8).reshape(6, 8, 8, 3)
    labs = np.arange(6, dtype=np.int64) * 7 - 2
    with h5py.File(p, "w", userblock_size=1024) as f:
        f.create_dataset("images", data=imgs, chunks=chunks)
        f.create_dataset("labels", data=labs)
    with h5py.File(p, "r") as f:
        assert f.userblock_size == 1024
    t.check_all(p, imgs, labs)
    for ids, got, data in t.loader_batches(p, batch=4):
        rec = len(data) // len(ids)
        for k, i in enumerate(ids):
            assert data[k * rec:(k + 1) * rec] == imgs[i].tobytes()
            assert got[k] == labs[i]
