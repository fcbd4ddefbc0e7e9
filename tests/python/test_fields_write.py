# SPDX-License-Identifier: Apache-2.0
"""Samples of several named fields (docs/FORMAT.md "Samples with several fields"): written
with stoker.Writer(fields=...), read back field by field with real JPEGs and PNGs made by
PIL; every refusal names the sample and the field and leaves the writer usable; no partial
data set after a refusal and a cancel; an old data set reads as image/label; a version 4
manifest is refused by name; a version 3 data set read over HTTP."""
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import conftest as h
import stoker

PIL = pytest.importorskip("PIL.Image")

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402

SCHEMA = {
    "image": "jpeg",
    "mask": {"kind": "png", "mask_of": "image"},
    "boxes": {"kind": "array", "dtype": "float32", "shape": (None, 4), "boxes_of": "image"},
    "classes": {"kind": "array", "dtype": "int64", "shape": (None,), "rows_of": "boxes"},
    "label": "int64",
    "tokens": {"kind": "array", "dtype": "int32", "shape": (None,)},
    "weight": "float32",
    "emb": {"kind": "raw", "dtype": "uint16", "shape": (2, 3)},
}


def jpeg(w, h_, seed=0):
    rng = np.random.default_rng(seed)
    img = PIL.fromarray(rng.integers(0, 255, (h_, w, 3), dtype=np.uint8))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=80)
    return out.getvalue()


def png(w, h_, mode="L", seed=0):
    rng = np.random.default_rng(seed)
    if mode == "P":
        img = PIL.fromarray(rng.integers(0, 4, (h_, w), dtype=np.uint8), mode="L").convert("P")
    elif mode == "RGB":
        img = PIL.fromarray(rng.integers(0, 255, (h_, w, 3), dtype=np.uint8))
    else:
        img = PIL.fromarray(rng.integers(0, 4, (h_, w), dtype=np.uint8), mode=mode)
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def sample(i):
    w, h_ = 40 + i, 30 + (i % 3)
    n = i % 4
    boxes = np.array([[0, 0, w, h_], [1.5, 2, 10, 12], [3, 3, 3, 3], [5, 1, 6, 2]],
                     dtype=np.float32)[:n]
    return {
        "image": jpeg(w, h_, i),
        "mask": png(w, h_, "P" if i % 2 else "L", i),
        "boxes": boxes,
        "classes": np.arange(n, dtype=np.int64) + 10 * i,
        "label": 1000 + i,
        "tokens": list(range(i)),
        "weight": 0.5 * i,
        "emb": np.arange(6, dtype=np.uint16).reshape(2, 3) + i,
    }


def write(path, n=12, **kw):
    with stoker.Writer(path, fields=SCHEMA, fsync=False, **kw) as w:
        for i in range(n):
            assert w.add(sample(i), key="s%d" % i) == i
    return path


def check_sample(got, i):
    want = sample(i)
    assert list(got) == list(SCHEMA)
    assert got["image"] == want["image"] and got["mask"] == want["mask"]
    assert got["boxes"].dtype == np.float32 and got["boxes"].shape == (i % 4, 4)
    assert np.array_equal(got["boxes"], want["boxes"])
    assert got["classes"].dtype == np.int64 and np.array_equal(got["classes"], want["classes"])
    assert got["label"] == 1000 + i and isinstance(got["label"], int)
    assert got["tokens"].dtype == np.int32 and got["tokens"].tolist() == list(range(i))
    assert got["weight"] == 0.5 * i and isinstance(got["weight"], float)
    assert got["emb"].shape == (2, 3) and np.array_equal(got["emb"], want["emb"])


def test_write_and_read_every_field(tmp_path):
    path = write(tmp_path / "ds")
    with stoker.Dataset(path) as ds:
        assert ds.format_version == 3 and len(ds) == 12
        f = {x["name"]: x for x in ds.fields}
        assert [x["name"] for x in ds.fields] == list(SCHEMA)
        assert f["image"] == {"name": "image", "kind": "jpeg", "dtype": None, "shape": None,
                              "tie": None, "tie_to": None,
                              "max": max(len(sample(i)["image"]) for i in range(12))}
        assert f["mask"]["tie"] == "mask_of" and f["mask"]["tie_to"] == "image"
        assert f["boxes"]["shape"] == (None, 4) and f["boxes"]["max"] == 3
        assert f["boxes"]["tie"] == "boxes_of" and f["classes"]["tie_to"] == "boxes"
        assert f["tokens"]["max"] == 11 and f["tokens"]["dtype"] == "int32"
        assert f["label"]["shape"] == () and f["label"]["max"] is None
        assert f["emb"]["shape"] == (2, 3) and f["emb"]["dtype"] == "uint16"
        for i in range(12):
            check_sample(ds[i], i)
            check_sample(ds.read(i), i)
            assert ds.label(i) == 1000 + i  # the index entry's label is the "label" field
            assert ds.key(i) == "s%d" % i
            assert len(ds.payload(i)) == ds.record_info(i)["size"]


def test_no_label_field_gives_label_zero_and_a_raw_mask(tmp_path):
    fields = {"img": "png", "seg": {"kind": "raw", "dtype": "uint8", "shape": (8, 10),
                                    "mask_of": "img"}, "caption": "bytes"}
    with stoker.Writer(tmp_path / "ds", fields=fields, fsync=False) as w:
        w.add({"img": png(10, 8, "RGB"), "seg": np.ones((8, 10), np.uint8), "caption": b"hi"})
        with pytest.raises(stoker.InvalidError, match="field \"seg\": a mask of 10x8, but its "
                           "image \"img\" is 10x9"):
            w.add({"img": png(10, 9, "RGB"), "seg": np.ones((8, 10), np.uint8),
                   "caption": b""})
    with stoker.Dataset(tmp_path / "ds") as ds:
        assert ds.label(0) == 0
        got = ds[0]
        assert got["caption"] == b"hi" and got["seg"].shape == (8, 10) and got["seg"].sum() == 80


@pytest.mark.parametrize("field,value,exc,needle", [
    ("mask", png(41, 30), stoker.InvalidError,
     "field \"mask\": a mask of 41x30, but its image \"image\" is 40x30"),
    ("mask", png(40, 30, "RGB"), stoker.InvalidError, "8-bit gray or palette"),
    ("image", b"not a jpeg at all", stoker.InvalidError, "field \"image\": not a readable JPEG"),
    ("boxes", np.array([[0, 0, 41, 5]], np.float32), stoker.InvalidError,
     "field \"boxes\": box 0 [0, 0, 41, 5] is not within its image of 40x30"),
    ("boxes", np.array([[5, 0, 4, 5]], np.float32), stoker.InvalidError, "box 0"),
    ("boxes", np.array([[0, 0, np.nan, 5]], np.float32), stoker.InvalidError,
     "field \"boxes\": box 0 has a value that is not finite"),
    ("boxes", np.zeros((1, 4), np.float64), TypeError,
     "field 'boxes': dtype float64, but the field's is float32"),
    ("boxes", np.zeros((1, 3), np.float32), ValueError, "field 'boxes': shape (1, 3)"),
    ("classes", np.arange(2, dtype=np.int64), stoker.InvalidError,
     "field \"classes\": 2 rows, but its boxes \"boxes\" have 1"),
    ("emb", np.zeros((3, 2), np.uint16), ValueError, "field 'emb': shape (3, 2)"),
    ("emb", np.zeros((2, 3), np.int16), TypeError, "field 'emb': dtype int16"),
    ("label", 1.5, TypeError, "field 'label': an int64 field takes an integer"),
    ("weight", "x", TypeError, "field 'weight'"),
    ("tokens", [1.5, 2.0], TypeError, "field 'tokens': values of float64"),
    ("image", 7, TypeError, "field 'image': jpeg bytes expected"),
])
def test_a_refused_sample_names_sample_and_field(tmp_path, field, value, exc, needle):
    with stoker.Writer(tmp_path / "ds", fields=SCHEMA, fsync=False) as w:
        w.add(sample(0))
        bad = sample(0)
        bad["boxes"] = np.array([[1, 1, 2, 2]], np.float32)
        bad["classes"] = np.array([7], np.int64)
        bad[field] = value
        with pytest.raises(exc) as e:
            w.add(bad, key="cat-17")
        assert needle in str(e.value), str(e.value)
        assert "cat-17" in str(e.value)
        w.add(sample(1))  # the writer goes on
    with stoker.Dataset(tmp_path / "ds") as ds:
        assert len(ds) == 2
        check_sample(ds[1], 1)


def decoded(b):
    return np.asarray(PIL.open(io.BytesIO(b)))


def pil_jpeg(a, quality):
    out = io.BytesIO()
    PIL.fromarray(a).save(out, "JPEG", quality=quality)
    return out.getvalue()


def test_decoded_images_are_encoded(tmp_path):
    """Arrays and PIL images given to jpeg and png fields: PNGs lossless (masks exactly the
    class ids), JPEGs at the field's quality; the loader delivers them as it does files."""
    rng = np.random.default_rng(5)
    ramp = np.add.outer(np.arange(30), np.arange(40)).astype(np.uint8) * 3
    rgb = np.stack([ramp, ramp[::-1], 255 - ramp], axis=2)
    ids = rng.integers(0, 7, (30, 40), dtype=np.uint8)
    fields = {"image": {"kind": "jpeg", "quality": 95}, "low": {"kind": "jpeg", "quality": 20},
              "mask": {"kind": "png", "mask_of": "image"}, "pic": "png", "plain": "jpeg"}
    with stoker.Writer(tmp_path / "ds", fields=fields, fsync=False) as w:
        w.add({"image": rgb, "low": rgb, "mask": ids, "pic": rgb, "plain": rgb})
        w.add({"image": PIL.fromarray(rgb), "low": ramp[:, :, None], "mask": ids[:, :, None],
               "pic": PIL.fromarray(ids), "plain": ramp})
        w.add({"image": PIL.fromarray(rgb).convert("RGBA"), "low": jpeg(40, 30),
               "mask": np.frombuffer(png(40, 30), np.uint8), "pic": ramp, "plain": rgb})
    with stoker.Dataset(tmp_path / "ds") as ds:
        a, b, c = ds[0], ds[1], ds[2]
        assert a["mask"][:4] == b"\x89PNG" and np.array_equal(decoded(a["mask"]), ids)
        assert np.array_equal(decoded(a["pic"]), rgb) and np.array_equal(decoded(b["pic"]), ids)
        assert np.array_equal(decoded(b["mask"]), ids) and np.array_equal(decoded(c["pic"]), ramp)
        assert np.array_equal(decoded(c["mask"]), decoded(png(40, 30)))  # bytes as given
        assert c["low"] == jpeg(40, 30)
        for x in (a, b, c):
            got = decoded(x["image"]).astype(int)
            assert got.shape == (30, 40, 3) and np.abs(got - rgb).mean() < 2.0
        # Pillow's encoding at the field's quality, its default 90
        assert a["image"] == b["image"] == pil_jpeg(rgb, 95) and a["low"] == pil_jpeg(rgb, 20)
        assert a["plain"] == pil_jpeg(rgb, 90) and b["plain"] == pil_jpeg(ramp, 90)
        assert decoded(b["low"]).shape == (30, 40)  # gray stays gray
    L = stoker.Loader(str(tmp_path / "ds"), batch_size=3, device="cpu", transform="none",
                      shuffle=False, fields=["mask"])
    m = next(iter(L))["mask"]
    got = [decoded(bytes(np.asarray(m[j]))) for j in range(3)]
    assert np.array_equal(got[0], ids) and np.array_equal(got[1], ids)
    assert np.array_equal(got[2], decoded(png(40, 30)))
    # the library decodes the encoded PNGs: the eval transform's mask is the class ids'
    # nearest-neighbour resize and centre crop (40x30 to a short side of 30: as it is)
    L = stoker.Loader(str(tmp_path / "ds"), batch_size=2, device="cpu", transform="eval",
                      size=30, resize=30, shuffle=False, fields=["image", "mask"])
    m = np.from_dlpack(next(iter(L))["mask"])
    assert m.shape == (2, 30, 30) and np.array_equal(m[0], ids[:, 5:35])


@pytest.mark.parametrize("value,needle", [
    (np.zeros((30, 40), np.float32), "not float32 (30, 40)"),
    (np.zeros((30, 40, 4), np.uint8), "not uint8 (30, 40, 4)"),
    (np.zeros((0, 40), np.uint8), "not uint8 (0, 40)"),
    (np.zeros((2, 30, 40, 3), np.uint8), "[h, w, 3] (RGB)"),
])
def test_a_decoded_image_of_another_shape_is_refused(tmp_path, value, needle):
    with stoker.Writer(tmp_path / "ds", fields={"image": "jpeg", "mask": "png"},
                       fsync=False) as w:
        for field in ("image", "mask"):
            s = {"image": jpeg(40, 30), "mask": png(40, 30)}
            s[field] = value
            with pytest.raises(TypeError) as e:
                w.add(s, key="k9")
            assert "'k9': field %r: a decoded image is a uint8 array" % field in str(e.value)
            assert needle in str(e.value)
        w.add({"image": jpeg(40, 30), "mask": png(40, 30)})
    with pytest.raises(TypeError, match="quality is a jpeg field's"):
        stoker.Writer(tmp_path / "q", fields={"m": {"kind": "png", "quality": 5}})
    with pytest.raises(ValueError, match="quality must be <= 100"):
        stoker.Writer(tmp_path / "q", fields={"m": {"kind": "jpeg", "quality": 101}})


def test_decoded_images_without_pillow(tmp_path):
    """PNG needs no Pillow; JPEG asks for it by name, and the writer goes on."""
    code = (
        "import sys; sys.modules['PIL'] = None\n"
        "import numpy as np, stoker\n"
        "with stoker.Writer(sys.argv[1], fields={'image': 'jpeg', 'mask': 'png'},\n"
        "                   fsync=False) as w:\n"
        "    try:\n"
        "        w.add({'image': np.zeros((4, 5, 3), np.uint8), 'mask': np.ones((4, 5), "
        "np.uint8)})\n"
        "    except ImportError as e:\n"
        "        print('refused:', e)\n"
        "    w.add({'image': bytes.fromhex(sys.argv[2]), 'mask': np.ones((4, 5), np.uint8)})\n"
        "print(len(stoker.Dataset(sys.argv[1])))\n")
    env = dict(os.environ, STOKER_LIBRARY=h._library(),
               PYTHONPATH=os.path.join(h.ROOT, "python"))
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "ds"),
                          jpeg(5, 4).hex()], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == ("refused: %s: sample 0: field 'image': encoding a decoded image as "
                        "JPEG needs Pillow; give the JPEG file's bytes instead"
                        % (tmp_path / "ds")), lines
    assert lines[1] == "1"
    with stoker.Dataset(tmp_path / "ds") as ds:
        assert np.array_equal(decoded(ds[0]["mask"]), np.ones((4, 5), np.uint8))


def test_missing_and_unknown_fields(tmp_path):
    with stoker.Writer(tmp_path / "ds", fields=SCHEMA, fsync=False) as w:
        s = sample(2)
        del s["mask"]
        with pytest.raises(ValueError, match="sample 0: missing field.*'mask'"):
            w.add(s)
        s = sample(2)
        s["extra"] = 1
        with pytest.raises(ValueError, match="no such field.*'extra'"):
            w.add(s)
        with pytest.raises(TypeError, match="dict of field"):
            w.add(b"payload")
        with pytest.raises(TypeError, match="label="):
            w.add(sample(2), 5)
        w.add(sample(2))


@pytest.mark.parametrize("fields,exc,needle", [
    ({"mask": {"kind": "png", "mask_of": "image"}, "image": "jpeg"}, stoker.InvalidError,
     "not an earlier field"),
    ({"image": "jpeg", "b": {"kind": "array", "dtype": "float32", "shape": (None, 5),
                             "boxes_of": "image"}}, stoker.InvalidError, "rows of 4"),
    ({"t": {"kind": "array", "dtype": "int32", "shape": (3,)}}, ValueError, "starts with None"),
    ({"t": "gif"}, ValueError, "kind 'gif'"),
    ({"9lives": "int64"}, stoker.InvalidError, "9lives"),
    ({"c": {"kind": "array", "dtype": "int64", "shape": (None,), "rows_of": "x"}},
     stoker.InvalidError, "not an earlier field"),
])
def test_schema_refusals(tmp_path, fields, exc, needle):
    with pytest.raises(exc, match=needle):
        stoker.Writer(tmp_path / "ds", fields=fields, fsync=False)
    assert not os.path.exists(tmp_path / "ds")
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []


def test_no_partial_data_set_after_a_refusal_and_cancel(tmp_path):
    w = stoker.Writer(tmp_path / "ds", fields=SCHEMA, fsync=False)
    w.add(sample(0))
    bad = sample(1)
    bad["boxes"] = np.array([[0, 0, 1e6, 1]], np.float32)
    bad["classes"] = np.array([1], np.int64)
    with pytest.raises(stoker.InvalidError):
        w.add(bad)
    w.cancel()
    with pytest.raises(stoker.CanceledError):
        w.add(sample(2))
    w.close()
    assert os.listdir(tmp_path) == []


def test_old_data_set_reads_as_image_and_label(tmp_path):
    with stoker.Writer(tmp_path / "old", kind="jpeg", fsync=False) as w:
        for i in range(3):
            w.add(jpeg(16, 8, i), label=5 + i)
    with stoker.Dataset(tmp_path / "old") as ds:
        assert ds.format_version == 1
        assert [(f["name"], f["kind"]) for f in ds.fields] == [("image", "jpeg"),
                                                                ("label", "int64")]
        assert ds.fields[0]["max"] == max(len(jpeg(16, 8, i)) for i in range(3))
        assert ds[1] == (jpeg(16, 8, 1), 6)  # unchanged
        assert ds.read(1) == jpeg(16, 8, 1)
        assert ds.sample(2) == {"image": jpeg(16, 8, 2), "label": 7}
    h.write_raw(tmp_path / "raw", 4)
    with stoker.Dataset(tmp_path / "raw") as ds:
        assert [f["name"] for f in ds.fields] == ["data", "label"]
        s = ds.sample(3)
        assert np.array_equal(s["data"], ds.array(3)) and s["label"] == ds.label(3)


def _crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_manifest_version_4_is_refused_by_name(tmp_path):
    path = write(tmp_path / "ds", n=2)
    m = tmp_path / "ds" / "manifest.stk"
    text = m.read_bytes()
    assert text.startswith(b"stoker-manifest 3\n")
    body = b"stoker-manifest 4\n" + text[len(b"stoker-manifest 3\n"):-16]
    m.write_bytes(body + b"crc32c %08x\n" % _crc32c(body))
    with pytest.raises(stoker.FormatError) as e:
        stoker.Dataset(path)
    assert str(m) in str(e.value) and "manifest version 4 is not supported" in str(e.value)


@pytest.mark.skipif(not h.remote_built(), reason="built without libcurl")
def test_version_3_over_http(tmp_path):
    (tmp_path / "served").mkdir()
    write(tmp_path / "served" / "ds", n=9, align=1, shard_size=64 * 1024)
    with range_server.start(tmp_path / "served") as srv:
        with stoker.Dataset(srv.url + "/ds", cache_dir=str(tmp_path / "cache")) as ds:
            assert ds.format_version == 3 and [f["name"] for f in ds.fields] == list(SCHEMA)
            for i in (0, 8, 5):
                check_sample(ds[i], i)


def test_hdf5_file_reads_with_its_legacy_fields(tmp_path):
    h5py = pytest.importorskip("h5py")
    images = np.arange(5 * 2 * 3, dtype=np.uint8).reshape(5, 2, 3)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["images"] = images
        f["labels"] = np.array([4, 3, 2, 1, -7], dtype=np.int64)
    with stoker.Dataset(str(tmp_path / "f.h5")) as ds:
        assert [(f["name"], f["kind"], f["shape"]) for f in ds.fields] == [
            ("data", "raw", (2, 3)), ("label", "int64", ())]
        s = ds.sample(4)
        assert np.array_equal(s["data"], images[4]) and s["label"] == -7
