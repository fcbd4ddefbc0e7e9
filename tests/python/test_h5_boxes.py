# SPDX-License-Identifier: Apache-2.0
"""Detection samples from an HDF5 file's datasets (h5_fields= with boxes_of and rows_of,
docs/HDF5.md "Several datasets as the fields of a sample").

An h5py-written file holds, per sample: a JPEG (variable-length uint8), its boxes
(variable-length float32, 4 values a box, some samples with none), their class ids
(variable-length int64, one a box) and a label. Checked: a Loader over the file delivers,
per id, exactly what a Loader over the same samples packed with stoker.Writer(fields=...)
delivers, under the train transform (a seed) and none; a NaN box, a box outside its image,
a boxes length that is not a whole number of boxes and class ids whose count is not the
boxes' make their sample corrupt, each named with the file, the record and the field under
on_corrupt="error" and replaced (and counted) under "skip", with and without the transform;
and boxes of another dtype, or ties to the wrong kind of field, are refused at open naming
the file and the dataset."""
import io

import numpy as np
import pytest

import stoker

h5py = pytest.importorskip("h5py")
PIL = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.skipif(not stoker.capabilities()["hdf5"], reason="built without HDF5")

N = 17
SPEC = ("image=images:jpeg, boxes=boxes:boxes_of=image, classes=classes:rows_of=boxes, "
        "label=labels")
FIELDS = {
    "image": "jpeg",
    "boxes": {"kind": "array", "dtype": "float32", "shape": (None, 4), "boxes_of": "image"},
    "classes": {"kind": "array", "dtype": "int64", "shape": (None,), "rows_of": "boxes"},
    "label": "int64",
}
TRAIN = dict(transform="train", size=16, dtype="uint8", mean=(0, 0, 0), std=(1, 1, 1))


def encode(arr):
    out = io.BytesIO()
    PIL.fromarray(arr).save(out, format="JPEG", quality=90)
    return out.getvalue()


def sample(i):
    rng = np.random.default_rng(70 + i)
    w, h_ = 24 + 5 * (i % 6), 20 + 3 * (i % 4)
    n = i % 5  # 0 to 4 boxes
    x = np.sort(rng.uniform(0, w, (n, 2)), axis=1)
    y = np.sort(rng.uniform(0, h_, (n, 2)), axis=1)
    boxes = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1).astype(np.float32)
    if n:
        boxes[0] = [0, 0, w, h_]  # the whole image: on the bounds is inside
    return {
        "image": encode(rng.integers(0, 255, (h_, w, 3), dtype=np.uint8)),
        "boxes": boxes.reshape(-1, 4),
        "classes": rng.integers(1, 90, n).astype(np.int64),
        "label": 2 * i - 5,
        "size": (w, h_),
    }


SAMPLES = [sample(i) for i in range(N)]


def write_h5(path, boxes=None, classes=None):
    """The samples, with record i's flat boxes or classes replaced where given."""
    boxes, classes = boxes or {}, classes or {}
    with h5py.File(path, "w") as f:
        img = f.create_dataset("images", (N,), dtype=h5py.vlen_dtype(np.uint8))
        box = f.create_dataset("boxes", (N,), dtype=h5py.vlen_dtype(np.float32))
        cls = f.create_dataset("classes", (N,), dtype=h5py.vlen_dtype(np.int64))
        b64 = f.create_dataset("boxes64", (N,), dtype=h5py.vlen_dtype(np.float64))
        for i, s in enumerate(SAMPLES):
            img[i] = np.frombuffer(s["image"], np.uint8)
            box[i] = np.asarray(boxes.get(i, s["boxes"].ravel()), np.float32)
            cls[i] = np.asarray(classes.get(i, s["classes"]), np.int64)
            b64[i] = s["boxes"].ravel().astype(np.float64)
        f["labels"] = np.array([s["label"] for s in SAMPLES], dtype=np.int64)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("h5boxes")
    write_h5(root / "set.h5")
    with stoker.Writer(root / "packed", fields=FIELDS, fsync=False) as w:
        for s in SAMPLES:
            w.add({k: v for k, v in s.items() if k != "size"})
    return root


def deliveries(loader):
    """[(id, {field: (dtype, shape, bytes)})] in delivery order over one epoch."""
    out = []
    for b in loader:
        keys = b.keys()
        dense = {k: np.from_dlpack(b[k]).copy() for k in keys
                 if not isinstance(b[k], stoker.RaggedField)}
        for j in range(b.count):
            d = {"label_of_batch": int(b.labels[j])}
            for k in keys:
                v = np.asarray(b[k][j]) if k not in dense else dense[k][j]
                d[k] = (v.dtype.str, v.shape, v.tobytes())
            out.append((int(b.indices[j]), d))
    return out


def loader(path, **kw):
    opts = dict(batch_size=4, device="cpu", seed=11, threads=2, transform="none")
    opts.update(kw)
    return stoker.Loader(str(path), **opts)


def test_the_schema_and_payloads_are_the_packed_ones(files):
    with stoker.Dataset(str(files / "set.h5"), h5_fields=SPEC) as ds, \
            stoker.Dataset(str(files / "packed")) as packed:
        assert ds.fields == packed.fields  # kinds, ties, dtypes, shapes and max alike
        for i in range(N):
            assert ds.payload(i) == packed.payload(i)


@pytest.mark.parametrize("kw", [dict(transform="none"), TRAIN], ids=["none", "train"])
def test_a_loader_delivers_what_the_packed_samples_deliver(files, kw):
    got = dict(deliveries(loader(files / "set.h5", h5_fields=SPEC, **kw)))
    want = dict(deliveries(loader(files / "packed", **kw)))
    assert sorted(got) == list(range(N))
    assert got == want
    for i, d in got.items():
        assert d["label_of_batch"] == SAMPLES[i]["label"]
        nb = d["boxes"][1][0]
        assert d["classes"][1] == (nb,)
        if kw["transform"] == "none":
            assert d["image"][2] == SAMPLES[i]["image"]
            assert d["boxes"][2] == SAMPLES[i]["boxes"].tobytes()
            assert d["classes"][2] == SAMPLES[i]["classes"].tobytes()
    if kw["transform"] == "train":  # the crop dropped some boxes somewhere, with their rows
        assert sum(got[i]["boxes"][1][0] for i in got) < sum(len(s["classes"]) for s in SAMPLES)


# record: (flat boxes, classes, the field named, words of the cause)
def bad_records():
    w3, h3 = SAMPLES[3]["size"]
    w6, h6 = SAMPLES[6]["size"]
    b3 = SAMPLES[3]["boxes"].copy()
    b3[1, 2] = np.nan
    b6 = SAMPLES[6]["boxes"].copy()
    b6[0] = [1, 2, w6 + 3, h6 - 1]  # x2 past the right edge
    return {
        3: (b3.ravel(), None, "boxes", ("box 1", "nan")),
        6: (b6.ravel(), None, "boxes", ("box 0", "%dx%d" % (w6, h6))),
        8: (SAMPLES[8]["boxes"].ravel()[:-2], None, "boxes", ("not a whole number",)),
        12: (None, SAMPLES[12]["classes"][:-1], "classes", ("rows", "boxes")),
    }


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    recs = bad_records()
    path = tmp_path_factory.mktemp("h5bad") / "bad.h5"
    write_h5(path, boxes={i: r[0] for i, r in recs.items() if r[0] is not None},
             classes={i: r[1] for i, r in recs.items() if r[1] is not None})
    return path


@pytest.mark.parametrize("kw", [dict(transform="none"), TRAIN], ids=["none", "train"])
def test_bad_boxes_fail_naming_file_record_and_field(bad, kw):
    recs = bad_records()
    L = loader(bad, h5_fields=SPEC, shuffle=False, batch_size=1, on_corrupt="error", **kw)
    msgs = []
    for _ in range(N):
        try:
            for _ in L:
                pass
            break
        except stoker.CorruptError as e:
            msgs.append(str(e))
    assert len(msgs) == len(recs), msgs
    for msg, (i, (_, _, field, words)) in zip(msgs, sorted(recs.items())):
        assert "bad.h5" in msg and "record %d" % i in msg and 'field "%s"' % field in msg, msg
        for word in words:
            assert word.lower() in msg.lower(), (word, msg)


@pytest.mark.parametrize("kw", [dict(transform="none"), TRAIN], ids=["none", "train"])
def test_bad_boxes_are_replaced_whole_and_counted_under_skip(bad, files, kw):
    recs = bad_records()
    L = loader(bad, h5_fields=SPEC, shuffle=False, batch_size=N, on_corrupt="skip", **kw)
    got = deliveries(L)
    assert L.stats()["skipped"] == len(recs)
    assert len(got) == N
    good = dict(deliveries(loader(files / "packed", **kw)))
    for pos, (i, d) in enumerate(got):
        if pos in recs:
            assert i not in recs, (pos, i)
        else:
            assert i == pos
        assert d == good[i], (pos, i)  # every field its own record's


def test_sample_checks_boxes_as_the_loader_does(bad):
    """Dataset.sample(i) applies the loader's check of boxes and their rows: a bad record
    raises a CorruptError naming the file, the record and the field, with the cause; the
    good records' boxes come as written."""
    recs = bad_records()
    with stoker.Dataset(str(bad), h5_fields=SPEC) as ds:
        for i, (_, _, field, words) in sorted(recs.items()):
            with pytest.raises(stoker.CorruptError) as e:
                ds.sample(i)
            msg = str(e.value)
            assert "bad.h5" in msg and "record %d" % i in msg and 'field "%s"' % field in msg, msg
            for word in words:
                assert word.lower() in msg.lower(), (word, msg)
        for i in range(N):
            if i not in recs:
                got = ds.sample(i)
                assert np.array_equal(got["boxes"], SAMPLES[i]["boxes"].reshape(-1, 4))
                assert np.array_equal(got["classes"], SAMPLES[i]["classes"])


def test_sample_refuses_a_box_with_x1_above_x2(tmp_path):
    h_ = SAMPLES[4]["size"][1]
    flipped = [5, 1, 2, h_ - 1] * len(SAMPLES[4]["classes"])  # x1 > x2, one row a class
    path = write_h5(tmp_path / "flip.h5", boxes={4: flipped})
    with stoker.Dataset(str(path), h5_fields=SPEC) as ds:
        with pytest.raises(stoker.CorruptError) as e:
            ds.sample(4)
        msg = str(e.value)
        assert "flip.h5" in msg and "record 4" in msg and 'field "boxes"' in msg, msg
        assert "box 0" in msg and "x1 <= x2" in msg, msg
        ds.sample(3)


def refused(path, spec):
    with pytest.raises(stoker.StokerError) as e:
        stoker.Dataset(str(path), h5_fields=spec)
    return str(e.value)


def test_ties_of_the_wrong_kind_are_refused_at_open(files):
    path = files / "set.h5"
    msg = refused(path, "image=images:jpeg, boxes=boxes64:boxes_of=image")
    assert "set.h5" in msg and "boxes64" in msg and "float64" in msg and "float32" in msg, msg
    msg = refused(path, "image=images:jpeg, boxes=classes:boxes_of=image")
    assert "set.h5" in msg and "classes" in msg and "int64" in msg, msg
    msg = refused(path, "image=images:jpeg, label=labels, boxes=boxes:boxes_of=label")
    assert "set.h5" in msg and "boxes_of" in msg and "not a jpeg or png image" in msg, msg
    msg = refused(path, "image=images:jpeg, boxes=boxes:boxes_of=image, c=classes:rows_of=image")
    assert "set.h5" in msg and "rows_of" in msg and "not a boxes field" in msg, msg
    msg = refused(path, "image=images:jpeg, c=classes:rows_of=boxes, boxes=boxes:boxes_of=image")
    assert "set.h5" in msg and "not an earlier field" in msg, msg
    msg = refused(path, "image=images:jpeg, boxes=boxes:points_of=image")
    assert "set.h5" in msg and "points_of" in msg, msg
    assert "mask_of" in msg and "boxes_of" in msg and "rows_of" in msg, msg
    msg = refused(path, "image=images:jpeg, boxes=boxes:boxes_of=image:mask_of=image")
    assert "set.h5" in msg and "one tie" in msg, msg
    msg = refused(path, "image=images:jpeg, boxes=images:boxes_of=image")
    assert "set.h5" in msg and "images" in msg and "variable-length uint8" in msg, msg
