# SPDX-License-Identifier: Apache-2.0
"""An HDF5 file's datasets of one length as the fields of one sample (h5_fields=, docs/HDF5.md
"Several datasets as the fields of a sample").

An h5py-written file holds, per sample: a JPEG (variable-length uint8), a PNG mask tied to it
(variable-length uint8), a label (int64), a float32 [8] feature row (gzip-compressed chunks
of 4 rows), token ids (variable-length int64, some empty) and a float32 weight. Checked:
the schema and Dataset.sample(i) against what was written; a Loader over the file delivers,
per id, exactly what a Loader over the same samples packed with stoker.Writer(fields=...)
delivers, with and without the image transform; resume and rank slices give the same
samples; over HTTP (tests/remote/range_server.py, 127.0.0.1) the same again; and an unknown
dataset, datasets of different lengths, a kind that does not fit the dataset, and a dataset
named twice over (path and option) fail naming the file and the dataset."""
import io
import os
import sys

import numpy as np
import pytest

import conftest as h
import stoker

h5py = pytest.importorskip("h5py")
PIL = pytest.importorskip("PIL.Image")

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402

pytestmark = pytest.mark.skipif(not stoker.capabilities()["hdf5"], reason="built without HDF5")

N = 23
SPEC = ("image=images:jpeg, mask=masks:png:mask_of=image, label=labels, feat=feat, "
        "tokens=tokens, weight=weight")
FIELDS = {
    "image": "jpeg",
    "mask": {"kind": "png", "mask_of": "image"},
    "label": "int64",
    "feat": {"kind": "raw", "dtype": "float32", "shape": (8,)},
    "tokens": {"kind": "array", "dtype": "int64", "shape": (None,)},
    "weight": "float32",
}


def encode(arr, fmt, **kw):
    out = io.BytesIO()
    PIL.fromarray(arr).save(out, format=fmt, **kw)
    return out.getvalue()


def sample(i):
    rng = np.random.default_rng(40 + i)
    w, h_ = 20 + 3 * (i % 7), 18 + 2 * (i % 5)
    return {
        "image": encode(rng.integers(0, 255, (h_, w, 3), dtype=np.uint8), "JPEG", quality=90),
        "mask": encode(rng.integers(0, 5, (h_, w), dtype=np.uint8), "PNG"),  # the image's size
        "label": 3 * i - 10,  # negative labels too
        "feat": rng.normal(size=8).astype(np.float32),
        "tokens": np.arange(i % 6, dtype=np.int64) * 100 + i,  # empty every 6th
        "weight": 0.5 * i - 2,
    }


SAMPLES = [sample(i) for i in range(N)]


def write_h5(path, n=N, **extra):
    with h5py.File(path, "w") as f:
        img = f.create_dataset("images", (n,), dtype=h5py.vlen_dtype(np.uint8))
        msk = f.create_dataset("masks", (n,), dtype=h5py.vlen_dtype(np.uint8))
        tok = f.create_dataset("tokens", (n,), dtype=h5py.vlen_dtype(np.int64))
        for i in range(n):
            s = SAMPLES[i]
            img[i] = np.frombuffer(s["image"], np.uint8)
            msk[i] = np.frombuffer(s["mask"], np.uint8)
            tok[i] = s["tokens"]
        f["labels"] = np.array([s["label"] for s in SAMPLES[:n]], dtype=np.int64)
        f.create_dataset("feat", data=np.stack([s["feat"] for s in SAMPLES[:n]]), chunks=(4, 8),
                         compression="gzip", shuffle=True)
        f["weight"] = np.array([s["weight"] for s in SAMPLES[:n]], dtype=np.float32)
        for k, v in extra.items():
            f[k] = v
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("h5fields")
    write_h5(root / "set.h5")
    with stoker.Writer(root / "packed", fields=FIELDS, fsync=False) as w:
        for s in SAMPLES:
            w.add(s)
    return root


def same_value(name, got, want):
    if name in ("image", "mask"):
        assert (got if isinstance(got, bytes) else np.asarray(got).tobytes()) == want, name
    elif name in ("label", "weight"):
        assert got == np.asarray(want, dtype=np.asarray(got).dtype), (name, got, want)
    else:
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got.shape)
        assert np.array_equal(got, want), name


def deliveries(loader):
    """{id: {field: bytes of its value}, label_of_batch} over one epoch."""
    out = {}
    for b in loader:
        keys = b.keys()
        dense = {k: np.from_dlpack(b[k]).copy() for k in keys
                 if not isinstance(b[k], stoker.RaggedField)}
        for j in range(b.count):
            d = {"label_of_batch": int(b.labels[j])}
            for k in keys:
                v = np.asarray(b[k][j]) if k not in dense else dense[k][j]
                d[k] = (v.dtype.str, v.shape, v.tobytes())
            i = int(b.indices[j])
            assert i not in out
            out[i] = d
    return out


def loader(path, **kw):
    opts = dict(batch_size=5, device="cpu", seed=7, threads=2, transform="none")
    opts.update(kw)
    return stoker.Loader(str(path), **opts)


def test_the_schema_and_samples_are_what_was_written(files):
    with stoker.Dataset(str(files / "set.h5"), h5_fields=SPEC) as ds, \
            stoker.Dataset(str(files / "packed")) as packed:
        assert len(ds) == N
        assert ds.fields == packed.fields  # kinds, dtypes, shapes and max alike
        assert [f["name"] for f in ds.fields] == list(FIELDS)
        for i in range(N):
            got = ds.sample(i)
            assert list(got) == list(FIELDS)
            for k in FIELDS:
                same_value(k, got[k], SAMPLES[i][k])
            assert ds.label(i) == SAMPLES[i]["label"]
            assert ds.payload(i) == packed.payload(i)  # the same layout, byte for byte


@pytest.mark.parametrize("kw", [dict(transform="none"),
                                dict(transform="train", size=16, dtype="uint8",
                                     mean=(0, 0, 0), std=(1, 1, 1))])
def test_a_loader_delivers_what_the_packed_samples_deliver(files, kw):
    got = deliveries(loader(files / "set.h5", h5_fields=SPEC, **kw))
    want = deliveries(loader(files / "packed", **kw))
    assert sorted(got) == list(range(N))
    assert got == want
    for i, d in got.items():
        assert d["label_of_batch"] == SAMPLES[i]["label"]
    if kw["transform"] == "none":
        for i, d in got.items():
            assert d["image"][2] == SAMPLES[i]["image"]
            assert np.frombuffer(d["tokens"][2], np.int64).tolist() == \
                SAMPLES[i]["tokens"].tolist()


def test_resume_and_ranks_give_the_same_samples(files):
    path = files / "set.h5"
    kw = dict(h5_fields=SPEC, transform="train", size=16, seed=4)
    whole = deliveries(loader(path, **kw))
    L = loader(path, **kw)
    it = iter(L)
    first = {}
    for _ in range(2):
        first.update(deliveries([next(it)]))
    state = L.state_dict()
    L.close()
    R = loader(path, **kw)
    R.load_state_dict(state)
    rest = deliveries(R)
    assert not set(first) & set(rest)
    assert {**first, **rest} == whole
    seen = set()
    for rank in (0, 1):  # 23 samples: a rank's share may repeat one to be as long as the other
        for i, d in deliveries(loader(path, rank=rank, world_size=2, **kw)).items():
            assert d == whole[i]
            seen.add(i)
    assert seen == set(whole)


@pytest.mark.skipif(not h.remote_built(), reason="built without libcurl")
def test_over_http_the_same_samples(files, tmp_path):
    local = deliveries(loader(files / "set.h5", h5_fields=SPEC, transform="train", size=16))
    with range_server.start(files) as srv:
        url = srv.url + "/set.h5"
        remote = loader(url, h5_fields=SPEC, transform="train", size=16,
                        cache_dir=str(tmp_path / "cache"), block_size=16384)
        assert deliveries(remote) == local
        remote.close()
        with stoker.Dataset(url, h5_fields=SPEC, cache_dir=str(tmp_path / "cache2")) as ds:
            for i in (0, 5, N - 1):
                got = ds.sample(i)
                for k in FIELDS:
                    same_value(k, got[k], SAMPLES[i][k])


def refused(path, spec):
    with pytest.raises(stoker.StokerError) as e:
        stoker.Dataset(str(path), h5_fields=spec)
    return str(e.value)


def test_errors_name_the_file_and_the_dataset(tmp_path):
    path = write_h5(tmp_path / "e.h5", short=np.zeros(N - 1, dtype=np.int64),
                    grid=np.zeros((N, 2, 2), dtype=np.uint8))
    msg = refused(path, "image=images:jpeg,x=nosuch")
    assert "e.h5" in msg and "nosuch" in msg and "no dataset" in msg, msg
    msg = refused(path, "image=images:jpeg,label=labels,s=short")
    assert "e.h5" in msg and "short" in msg and "images" in msg and str(N - 1) in msg, msg
    assert "one length" in msg, msg
    msg = refused(path, "image=images:jpeg,f=feat:jpeg")
    assert "e.h5" in msg and "feat" in msg and "jpeg" in msg and "fixed-shape float32" in msg, msg
    msg = refused(path, "t=tokens:png")
    assert "e.h5" in msg and "tokens" in msg and "variable-length int64" in msg, msg
    msg = refused(path, "g=grid:int64")
    assert "e.h5" in msg and "grid" in msg and "int64" in msg, msg
    msg = refused(path, "image=images:gif")
    assert "e.h5" in msg and "gif" in msg, msg
    msg = refused(path, "image=images:jpeg,t=tokens:boxes_of=image")
    assert "e.h5" in msg and "tokens" in msg and "boxes_of" in msg and "float32" in msg, msg
    msg = refused(path, "image=images:jpeg,t=tokens:tokens_of=image")
    assert "e.h5" in msg and "tokens_of" in msg and "mask_of" in msg and "rows_of" in msg, msg
    msg = refused(path, "m=masks:png:mask_of=image,image=images:jpeg")
    assert "e.h5" in msg and "not an earlier field" in msg, msg
    msg = refused(path, "image")
    assert "NAME=DATASET" in msg, msg
    msg = refused(str(path) + ":/images", "image=images:jpeg")
    assert "e.h5" in msg and "/images" in msg, msg


def damage_chunk(path, dataset, chunk):
    """Flips every byte of chunk `chunk` of a chunked dataset of the file at `path`."""
    with h5py.File(path, "r") as f:
        info = f[dataset].id.get_chunk_info(chunk)
    bad = bytearray(path.read_bytes())
    for k in range(info.byte_offset, info.byte_offset + info.size):
        bad[k] ^= 0x5A
    path.write_bytes(bytes(bad))


# (error kind, the spec's field and dataset, options, words of the cause); the field's name
# differs from its dataset's, so the message names both
DATASET_ERRORS = [
    ("open", "x=nosuch", {}, ["no dataset"]),
    ("dtype", "x=names", {}, ["element type not supported"]),
    ("shape", "x=scalar", {}, ["rank 0"]),
    ("length", "x=grid", {"max_record_size": 12}, ["16 bytes", "limit of 12"]),
    ("read", "x=feat", {}, ["record 5"]),
]


@pytest.mark.parametrize("kind,entry,opts,words", DATASET_ERRORS,
                         ids=[e[0] for e in DATASET_ERRORS])
def test_every_dataset_error_names_the_file_the_field_and_the_dataset(tmp_path, kind, entry,
                                                                      opts, words):
    """Whatever fails about a field's dataset (it is missing, its type or shape is not one
    the source reads, a row is above a limit, a record does not read) is said naming the
    file, the field as the spec names it and its dataset."""
    path = write_h5(tmp_path / "e.h5", grid=np.zeros((N, 4, 4), dtype=np.uint8),
                    scalar=np.int64(5),
                    names=np.array([b"n%d" % i for i in range(N)], dtype="S4"))
    if kind == "read":
        damage_chunk(path, "feat", 1)  # records 4 to 7
    field, dset = entry.split("=")
    spec = "label=labels, " + entry
    with pytest.raises(stoker.StokerError) as e:
        with stoker.Dataset(str(path), h5_fields=spec, **opts) as ds:
            ds.sample(5)
    msg = str(e.value)
    assert "e.h5" in msg and 'field "%s"' % field in msg and dset in msg, msg
    for w in words:
        assert w in msg, (w, msg)


def test_read_gives_the_fields_as_a_dict(tmp_path):
    """Dataset.read / ds[i] of an HDF5 file read with h5_fields give its fields, as for a
    packed data set of several fields."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(12, dtype=np.float32).reshape(4, 3)
        f["y"] = np.arange(4, dtype=np.int64)
    with stoker.Dataset(str(path), h5_fields="x=x,label=y") as ds:
        s = ds[2]
        assert isinstance(s, dict) and s["label"] == 2
        assert np.array_equal(s["x"], [6, 7, 8])
