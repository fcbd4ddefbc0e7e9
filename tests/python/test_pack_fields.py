# SPDX-License-Identifier: Apache-2.0
"""stoker-pack's sources of samples of several fields: --jsonl with --schema, --coco with
--images (and --wds). Each is packed from files made here with PIL and numpy and read back
through the library (ctypes: stoker_dataset_num_fields, _field_desc, _read, _split_record);
each refusal names the file, the sample and the field and leaves no output behind, and
--skip-bad leaves the bad samples out and counts them."""
import ctypes
import io
import json
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

from conftest import _library

MAX_DIMS = 8
KINDS = {1: "bytes", 2: "jpeg", 3: "raw", 4: "png", 5: "array", 6: "int64", 7: "float32"}
TIES = {0: None, 1: "mask_of", 2: "boxes_of", 3: "rows_of"}


class FieldDesc(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("kind", ctypes.c_int32),
                ("name", ctypes.c_char_p), ("dtype", ctypes.c_int32), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_DIMS), ("tie", ctypes.c_int32),
                ("tie_to", ctypes.c_char_p), ("max", ctypes.c_int64)]


class FieldValue(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_uint64)]


def _lib():
    lib = ctypes.CDLL(_library())
    P, I64, I32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
    lib.stoker_dataset_open.argtypes = [ctypes.POINTER(P), ctypes.c_char_p, P]
    lib.stoker_dataset_close.argtypes = [P]
    lib.stoker_dataset_num_records.argtypes = [P]
    lib.stoker_dataset_num_records.restype = I64
    lib.stoker_dataset_num_fields.argtypes = [P]
    lib.stoker_dataset_field_desc.argtypes = [P, I32, ctypes.POINTER(FieldDesc)]
    lib.stoker_dataset_record_info.argtypes = [P, I64, ctypes.POINTER(ctypes.c_uint64), P, P]
    lib.stoker_dataset_read.argtypes = [P, I64, P, ctypes.c_size_t,
                                        ctypes.POINTER(ctypes.c_size_t)]
    lib.stoker_dataset_split_record.argtypes = [P, I64, P, ctypes.c_size_t,
                                                ctypes.POINTER(FieldValue)]
    lib.stoker_dataset_record_key.argtypes = [P, I64]
    lib.stoker_dataset_record_key.restype = ctypes.c_char_p
    lib.stoker_dataset_jpeg_checked.argtypes = [P]
    lib.stoker_dataset_format_version.argtypes = [P]
    return lib


LIB = _lib()
TOOL = os.path.join(os.path.dirname(_library()), "stoker-pack")


def read_all(path):
    """(fields, samples): fields as (name, kind, dtype, shape, tie, tie_to); each sample a dict
    of name to bytes, with "__key__"."""
    h = ctypes.c_void_p()
    assert LIB.stoker_dataset_open(ctypes.byref(h), str(path).encode(), None) == 0
    try:
        assert LIB.stoker_dataset_format_version(h) == 3
        n = LIB.stoker_dataset_num_fields(h)
        fields = []
        for i in range(n):
            d = FieldDesc(struct_size=ctypes.sizeof(FieldDesc))
            assert LIB.stoker_dataset_field_desc(h, i, ctypes.byref(d)) == 0
            fields.append((d.name.decode(), KINDS[d.kind], d.dtype, tuple(d.shape[:d.ndim]),
                           TIES[d.tie], d.tie_to.decode() if d.tie_to else None))
        samples = []
        for r in range(LIB.stoker_dataset_num_records(h)):
            size = ctypes.c_uint64()
            assert LIB.stoker_dataset_record_info(h, r, ctypes.byref(size), None, None) == 0
            buf = ctypes.create_string_buffer(max(size.value, 1))
            got = ctypes.c_size_t()
            assert LIB.stoker_dataset_read(h, r, buf, size.value, ctypes.byref(got)) == 0
            vals = (FieldValue * n)()
            assert LIB.stoker_dataset_split_record(h, r, buf, got.value, vals) == 0
            s = {fields[i][0]: ctypes.string_at(vals[i].data, vals[i].size) if vals[i].size
                 else b"" for i in range(n)}
            s["__key__"] = LIB.stoker_dataset_record_key(h, r).decode()
            samples.append(s)
        return fields, samples, bool(LIB.stoker_dataset_jpeg_checked(h))
    finally:
        LIB.stoker_dataset_close(h)


def pack(*args, ok=True):
    if not os.path.exists(TOOL):
        pytest.skip("stoker-pack not built next to the library")
    r = subprocess.run([TOOL, "--no-fsync", "--no-shuffle", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def refused(out, *args, code=1):
    r = pack(*args, out, ok=False)
    assert r.returncode == code, r.stderr
    assert not os.path.exists(out), "output left behind"
    leftovers = [n for n in os.listdir(os.path.dirname(out)) if ".tmp-" in n]
    assert not leftovers, leftovers
    return r.stderr


def jpeg(path, h=32, w=48, seed=0):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(path, quality=90)
    return open(path, "rb").read()


def png_mask(path, h=32, w=48, seed=0, mode="L"):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, (h, w, 3) if mode == "RGB" else (h, w), dtype=np.uint8)
    Image.fromarray(a, mode).save(path)
    return open(path, "rb").read()


SCHEMA = {
    "image": "jpeg",
    "mask": {"kind": "png", "mask_of": "image"},
    "boxes": {"kind": "array", "dtype": "float32", "shape": [None, 4], "boxes_of": "image"},
    "classes": {"kind": "array", "dtype": "int64", "shape": [None], "rows_of": "boxes"},
    "label": "int64",
    "score": "float32",
    "emb": {"kind": "raw", "dtype": "float16", "shape": [2, 2]},
    "caption": "bytes",
    "blob": "bytes",
}


def make_jsonl(tmp_path, n=4):
    """A JSONL file of n samples (images in a subfolder, paths relative to the file)."""
    d = tmp_path / "src"
    (d / "img").mkdir(parents=True)
    lines, expect = [], []
    for i in range(n):
        img = jpeg(d / "img" / f"{i}.jpg", seed=i)
        mask = png_mask(d / "img" / f"{i}.png", seed=i)
        (d / "img" / f"{i}.bin").write_bytes(bytes(range(i + 1)))
        boxes = [[1.5, 2, 10 + k, 20] for k in range(i)]
        line = {"image": f"img/{i}.jpg", "mask": f"img/{i}.png", "boxes": boxes,
                "classes": list(range(i)), "label": 10 * i - 5, "score": i / 4,
                "emb": [[i, 0.5], [-1, 65504]], "caption": f"caption é {i}",
                "blob": {"path": f"img/{i}.bin"}}
        if i % 2:
            line["key"] = f"key-{i}"
        lines.append(json.dumps(line))
        expect.append({"image": img, "mask": mask,
                       "boxes": np.array(boxes, np.float32).reshape(-1, 4).tobytes(),
                       "classes": np.arange(i, dtype=np.int64).tobytes(),
                       "label": np.int64(10 * i - 5).tobytes(),
                       "score": np.float32(i / 4).tobytes(),
                       "emb": np.array([[i, 0.5], [-1, 65504]], np.float16).tobytes(),
                       "caption": f"caption é {i}".encode(), "blob": bytes(range(i + 1)),
                       "__key__": f"key-{i}" if i % 2 else str(i + 1)})
    (d / "s.jsonl").write_text("\n".join(lines) + "\n\n")
    (d / "schema.json").write_text(json.dumps(SCHEMA))
    return d, lines, expect


def test_jsonl_round_trip(tmp_path):
    d, _, expect = make_jsonl(tmp_path)
    out = tmp_path / "out"
    r = pack("--jsonl", d / "s.jsonl", "--schema", d / "schema.json", out)
    assert "4 records" in r.stderr and "0 skipped" in r.stderr, r.stderr
    fields, samples, checked = read_all(out)
    assert [f[0] for f in fields] == list(SCHEMA)
    assert [f[1] for f in fields] == ["jpeg", "png", "array", "array", "int64", "float32", "raw",
                                      "bytes", "bytes"]
    assert fields[1][4:] == ("mask_of", "image") and fields[2][4:] == ("boxes_of", "image")
    assert fields[3][4:] == ("rows_of", "boxes") and fields[2][3] == (4,)
    assert fields[6][3] == (2, 2)
    assert checked
    assert samples == expect


def bad_line(d, lines, i, change=None, drop=None, raw=None):
    """Replaces line i of s.jsonl (a dict change, a member dropped, or raw text)."""
    if raw is None:
        line = json.loads(lines[i])
        line.update(change or {})
        if drop:
            del line[drop]
        raw = json.dumps(line)
    lines = list(lines)
    lines[i] = raw
    (d / "s.jsonl").write_text("\n".join(lines) + "\n")


def prepare_bad(d, what):
    img = d / "img"
    if what == "truncated":
        data = (img / "2.jpg").read_bytes()
        (img / "bad.jpg").write_bytes(data[: len(data) // 2])
        return {"image": "img/bad.jpg"}
    if what == "png_in_jpeg":
        return {"image": "img/2.png"}
    if what == "mask_size":
        png_mask(img / "small.png", h=16, w=16)
        return {"mask": "img/small.png"}
    if what == "mask_rgb":
        png_mask(img / "rgb.png", mode="RGB")
        return {"mask": "img/rgb.png"}
    if what == "mask_corrupt":
        data = bytearray((img / "2.png").read_bytes())
        data[len(data) // 2] ^= 0xFF  # a flipped byte in the IDAT: its CRC fails
        (img / "corrupt.png").write_bytes(bytes(data))
        return {"mask": "img/corrupt.png"}
    if what == "missing_file":
        return {"image": "img/nope.jpg"}
    raise AssertionError(what)


# (name, how line 3 (index 2) is made bad, words the message must hold)
JSONL_BAD = [
    ("missing_field", dict(drop="label"), ["line 3", 'field "label"', "missing"]),
    ("unknown_member", dict(change={"extra": 1, "other": 2}),
     ["line 3", "'extra'", "'other'", "not in the schema"]),
    ("not_json", dict(raw='{"image": "img/2.jpg",'), ["line 3", "not JSON"]),
    ("not_object", dict(raw="[1, 2]"), ["line 3", "expected an object"]),
    ("float_label", dict(change={"label": 1.5}), ["line 3", 'field "label"', "integer"]),
    ("emb_shape", dict(change={"emb": [[1, 2, 3], [4, 5, 6]]}), ["line 3", 'field "emb"']),
    ("box_row", dict(change={"boxes": [[1, 2, 3]], "classes": [0]}),
     ["line 3", 'field "boxes"']),
    ("box_outside", dict(change={"boxes": [[1, 2, 60, 20]], "classes": [0]}),
     ["line 3", 'field "boxes"']),
    ("rows_count", dict(change={"classes": [0, 1, 2]}), ["line 3", 'field "classes"']),
    ("caption_type", dict(change={"caption": 5}), ["line 3", 'field "caption"', "string"]),
    ("truncated", "truncated", ["line 3", 'field "image"', "bad.jpg"]),
    ("png_in_jpeg", "png_in_jpeg", ["line 3", 'field "image"', "2.png", "PNG, not a JPEG"]),
    ("mask_size", "mask_size", ["line 3", 'field "mask"']),
    ("mask_rgb", "mask_rgb", ["line 3", 'field "mask"', "rgb.png"]),
    ("mask_corrupt", "mask_corrupt", ["line 3", 'field "mask"', "corrupt.png"]),
    ("missing_file", "missing_file", ["line 3", 'field "image"', "nope.jpg"]),
]


@pytest.mark.parametrize("name,how,words", JSONL_BAD, ids=[b[0] for b in JSONL_BAD])
def test_jsonl_refusal(tmp_path, name, how, words):
    d, lines, _ = make_jsonl(tmp_path)
    if isinstance(how, str):
        bad_line(d, lines, 2, change=prepare_bad(d, how))
    else:
        bad_line(d, lines, 2, **how)
    out = tmp_path / "out"
    err = refused(out, "--jsonl", d / "s.jsonl", "--schema", d / "schema.json")
    for w in [str(d / "s.jsonl")] + words:
        assert w in err, (w, err)
    # --skip-bad: the sample is left out and counted, the others are packed
    r = pack("--skip-bad", "--jsonl", d / "s.jsonl", "--schema", d / "schema.json", out)
    assert "3 records" in r.stderr and "1 skipped" in r.stderr, r.stderr
    assert "1 sample left out" in r.stderr and "line 3" in r.stderr, r.stderr
    _, samples, _ = read_all(out)
    assert [s["__key__"] for s in samples] == ["1", "key-1", "key-3"]


SCHEMA_BAD = [
    ("kind", {"image": "gif"}, ['field "image"', "kind"]),
    ("tie_unknown", {"image": "jpeg", "mask": {"kind": "png", "mask_of": "picture"}},
     ["mask"]),
    ("array_no_shape", {"x": {"kind": "array", "dtype": "int64"}}, ['field "x"', "shape"]),
    ("dtype", {"x": {"kind": "raw", "dtype": "complex", "shape": [2]}}, ['field "x"', "dtype"]),
    ("member", {"x": {"kind": "int64", "shape": [1]}}, ['field "x"', "shape"]),
    ("not_object", ["image"], ["schema"]),
]


@pytest.mark.parametrize("name,schema,words", SCHEMA_BAD, ids=[b[0] for b in SCHEMA_BAD])
def test_jsonl_schema_refused(tmp_path, name, schema, words):
    d, _, _ = make_jsonl(tmp_path, n=1)
    (d / "bad.json").write_text(json.dumps(schema))
    r = pack("--jsonl", d / "s.jsonl", "--schema", d / "bad.json", tmp_path / "out", ok=False)
    assert r.returncode in (1, 2), r.stderr
    assert not os.path.exists(tmp_path / "out")
    for w in [str(d / "bad.json")] + words:
        assert w in r.stderr, (w, r.stderr)


def test_jsonl_options_refused(tmp_path):
    d, _, _ = make_jsonl(tmp_path, n=1)
    for args, words in [
            (["--jsonl", d / "s.jsonl"], "--schema"),
            (["--jsonl", d / "s.jsonl", "--schema", d / "schema.json", "--rgb"], "--rgb"),
            (["--jsonl", d / "s.jsonl", "--schema", d / "schema.json", "--skip-bad",
              "--strict"], "--skip-bad"),
            (["--skip-bad", d / "img"], "--skip-bad")]:
        r = pack(*args, tmp_path / "out", ok=False)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert not os.path.exists(tmp_path / "out")


# ---- COCO ----

def make_coco(tmp_path):
    d = tmp_path / "coco"
    (d / "images").mkdir(parents=True)
    images = []
    for i, (iid, h, w) in enumerate([(42, 32, 48), (7, 40, 30), (9, 20, 20)]):
        jpeg(d / "images" / f"{iid:012d}.jpg", h=h, w=w, seed=i)
        images.append({"id": iid, "file_name": f"{iid:012d}.jpg", "width": w, "height": h})
    anns = [
        {"id": 1, "image_id": 7, "bbox": [1, 2, 3, 4], "category_id": 18, "iscrowd": 0},
        {"id": 2, "image_id": 42, "bbox": [0.5, 1.25, 47.9, 31], "category_id": 1},
        {"id": 3, "image_id": 7, "bbox": [5, 6, 10, 10], "category_id": 90, "iscrowd": 1},
        {"id": 4, "image_id": 7, "bbox": [10, 20, 20.4, 20.3], "category_id": 3, "iscrowd": 0},
    ]  # image 9 has none; annotation 4 passes the image's edge by 0.4 and 0.3 (clipped)
    inst = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "p"}]}
    (d / "instances.json").write_text(json.dumps(inst))
    return d, inst


def boxes_of(s):
    return np.frombuffer(s["boxes"], np.float32).reshape(-1, 4).tolist()


def test_coco_boxes_and_classes(tmp_path):
    d, _ = make_coco(tmp_path)
    out = tmp_path / "out"
    pack("--coco", d / "instances.json", "--images", d / "images", out)
    fields, samples, checked = read_all(out)
    assert [f[:2] + f[4:] for f in fields] == [
        ("image", "jpeg", None, None), ("boxes", "array", "boxes_of", "image"),
        ("classes", "array", "rows_of", "boxes"), ("image_id", "int64", None, None)]
    assert checked
    assert [s["__key__"] for s in samples] == ["%012d.jpg" % i for i in (42, 7, 9)]
    assert [np.frombuffer(s["image_id"], np.int64)[0] for s in samples] == [42, 7, 9]
    assert samples[0]["image"] == (d / "images" / "000000000042.jpg").read_bytes()
    assert boxes_of(samples[0]) == [[0.5, 1.25, 48.0, 32.0]]  # 48.4 and 32.25: clipped
    # the crowd annotation (3) is left out; 4 is clipped to the image (30x40)
    assert boxes_of(samples[1]) == [[1, 2, 4, 6], [10, 20, 30, 40]]
    assert np.frombuffer(samples[1]["classes"], np.int64).tolist() == [18, 3]
    assert samples[2]["boxes"] == b"" and samples[2]["classes"] == b""


def test_coco_keep_crowd(tmp_path):
    d, _ = make_coco(tmp_path)
    out = tmp_path / "out"
    pack("--keep-crowd", "--coco", d / "instances.json", "--images", d / "images", out)
    fields, samples, _ = read_all(out)
    assert [f[0] for f in fields] == ["image", "boxes", "classes", "iscrowd", "image_id"]
    assert fields[3][4:] == ("rows_of", "boxes")
    assert boxes_of(samples[1]) == [[1, 2, 4, 6], [5, 6, 15, 16], [10, 20, 30, 40]]
    assert np.frombuffer(samples[1]["classes"], np.int64).tolist() == [18, 90, 3]
    assert list(samples[1]["iscrowd"]) == [0, 1, 0]


COCO_BAD = [
    ("outside", lambda d, inst: inst["annotations"][0].update(bbox=[1, 2, 3, 50]),
     ["image 7", "annotation 1", "outside the image"], True),
    ("bbox_type", lambda d, inst: inst["annotations"][0].update(bbox=[1, 2, 3]),
     ["image 7", "annotation 1", "bbox"], True),
    ("missing_image", lambda d, inst: os.remove(d / "images" / "000000000009.jpg"),
     ["image 9", 'field "image"', "000000000009.jpg"], True),
    ("corrupt_image", lambda d, inst: (d / "images" / "000000000009.jpg").write_bytes(
        (d / "images" / "000000000009.jpg").read_bytes()[:300]),
     ["image 9", 'field "image"', "000000000009.jpg"], True),
    ("unknown_image_id", lambda d, inst: inst["annotations"][0].update(image_id=1234),
     ["annotations[0]", "image_id 1234"], False),
    ("no_images", lambda d, inst: inst.pop("images"), ["\"images\""], False),
]


@pytest.mark.parametrize("name,spoil,words,skippable", COCO_BAD, ids=[b[0] for b in COCO_BAD])
def test_coco_refusal(tmp_path, name, spoil, words, skippable):
    d, inst = make_coco(tmp_path)
    spoil(d, inst)
    (d / "instances.json").write_text(json.dumps(inst))
    out = tmp_path / "out"
    args = ["--coco", d / "instances.json", "--images", d / "images"]
    err = refused(out, *args)
    for w in [str(d / "instances.json")] + words:
        assert w in err, (w, err)
    r = pack("--skip-bad", *args, out, ok=False)
    if skippable:
        assert r.returncode == 0 and "2 records" in r.stderr and "1 skipped" in r.stderr, r.stderr
    else:
        assert r.returncode == 1 and not os.path.exists(out), r.stderr


# ---- --info ----

def info(*args):
    r = subprocess.run([TOOL, "--info", *map(str, args)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_info_lists_the_schema(tmp_path):
    """--info of a data set of several fields lists each field (name, kind, dtype and shape,
    tie, largest value) and says it was checked; --json gives the same as "fields"."""
    d, _, _ = make_jsonl(tmp_path)
    out = tmp_path / "out"
    pack("--jsonl", d / "s.jsonl", "--schema", d / "schema.json", out)
    _, samples, _ = read_all(out)
    text = info(out)
    lines = text.splitlines()
    assert "field           bytes" not in text, text
    assert "fields          9" in lines, text
    at = lines.index("fields          9")
    rows = [ln.split(None, 1) for ln in lines[at + 1: at + 10]]
    assert [n for n, _ in rows] == list(SCHEMA), text
    got = dict(rows)
    big = max(len(s["mask"]) for s in samples)
    assert got["mask"] == f"png, mask_of image, max {big} bytes", text
    assert got["boxes"] == "array float32 [N, 4], boxes_of image, max 3 rows", text
    assert got["classes"] == "array int64 [N], rows_of boxes, max 3 rows", text
    assert got["label"] == "int64" and got["score"] == "float32", text
    assert got["emb"] == "raw float16 [2, 2]", text
    assert got["blob"] == "bytes, max 4 bytes", text
    assert "checked         yes (every JPEG and PNG field" in text, text
    js = json.loads(info("--json", out))
    assert js["field"] is None and js["jpeg_checked"] is True
    assert [f["name"] for f in js["fields"]] == list(SCHEMA)
    assert js["fields"][2] == {"name": "boxes", "kind": "array", "dtype": "float32",
                                 "shape": [None, 4], "tie": "boxes_of", "tie_to": "image",
                                 "max": 3}
    assert js["fields"][4] == {"name": "label", "kind": "int64", "dtype": "int64",
                                 "shape": [], "tie": None, "tie_to": None, "max": 0}
    # unchecked: --no-validate
    pack("--no-validate", "--jsonl", d / "s.jsonl", "--schema", d / "schema.json",
         tmp_path / "nv")
    assert "checked         no" in info(tmp_path / "nv")
    # no image field: n/a
    (d / "plain.json").write_text(json.dumps({"label": "int64", "caption": "bytes"}))
    (d / "plain.jsonl").write_text('{"label": 1, "caption": "a"}\n')
    pack("--jsonl", d / "plain.jsonl", "--schema", d / "plain.json", tmp_path / "plain")
    text = info(tmp_path / "plain")
    assert "checked         n/a (no JPEG or PNG field)" in text, text


# ---- WebDataset tars ----

def npy_bytes(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def make_tar(path, members, fmt=None):
    """A tar of (name, bytes) members; a name ending in "/" is a directory, one given as
    (name, None, target) a symbolic link."""
    import tarfile
    with tarfile.open(path, "w", format=fmt or tarfile.USTAR_FORMAT) as t:
        for m in members:
            ti = tarfile.TarInfo(m[0].rstrip("/"))
            if m[0].endswith("/"):
                ti.type = tarfile.DIRTYPE
                t.addfile(ti)
            elif m[1] is None:
                ti.type, ti.linkname = tarfile.SYMTYPE, m[2]
                t.addfile(ti)
            else:
                ti.size = len(m[1])
                t.addfile(ti, io.BytesIO(m[1]))


def wds_samples(tmp_path, n=4, prefix="s/"):
    """n samples of jpg, cls, seg.png, txt, npy and json members, with what each packs to."""
    d = tmp_path / "parts"
    d.mkdir(exist_ok=True)
    members, expect = [], []
    for i in range(n):
        k = f"{prefix}{i:04d}"
        img = jpeg(d / f"{i}.jpg", seed=i)
        mask = png_mask(d / f"{i}.png", seed=i)
        arr = np.arange(6, dtype=np.float32).reshape(2, 3) + i
        meta = json.dumps({"i": i}).encode()
        members += [(k + ".jpg", img), (k + ".cls", f" {i - 1}\n".encode()),
                    (k + ".seg.png", mask), (k + ".txt", f"text {i}".encode()),
                    (k + ".npy", npy_bytes(arr)), (k + ".json", meta)]
        expect.append({"jpg": img, "cls": np.int64(i - 1).tobytes(), "seg_png": mask,
                       "txt": f"text {i}".encode(), "npy": arr.tobytes(), "json": meta,
                       "__key__": k})
    return members, expect


@pytest.mark.parametrize("fmt", ["ustar", "gnu", "pax"])
def test_wds_round_trip(tmp_path, fmt):
    """Fields inferred from the first sample's extensions; long paths (ustar's prefix, GNU's
    'L' member, pax's 'x' header), directories and links passed over; two tars."""
    import tarfile
    f = {"ustar": tarfile.USTAR_FORMAT, "gnu": tarfile.GNU_FORMAT,
         "pax": tarfile.PAX_FORMAT}[fmt]
    long_dir = "d" * 60 + "/" + "e" * 60 + "/"
    m1, e1 = wds_samples(tmp_path, n=3, prefix=long_dir)
    m2, e2 = wds_samples(tmp_path, n=2, prefix="b/")
    make_tar(tmp_path / "a.tar", [(long_dir, b"")] + m1 + [("README", b"x"), ("ln.txt", None,
                                                                            "b/0000.txt")], f)
    make_tar(tmp_path / "b.tar", m2, f)
    out = tmp_path / "out"
    r = pack("--wds", tmp_path / "a.tar", tmp_path / "b.tar", out)
    assert "5 records" in r.stderr and "3 tar members passed over" in r.stderr, r.stderr
    fields, samples, checked = read_all(out)
    assert [(x[0], x[1]) for x in fields] == [
        ("jpg", "jpeg"), ("cls", "int64"), ("seg_png", "png"), ("txt", "bytes"),
        ("npy", "raw"), ("json", "bytes")]
    assert fields[4][3] == (2, 3) and checked
    assert samples == e1 + e2


def test_wds_schema(tmp_path):
    """--schema: extensions renamed and typed, a mask tied to its image, .npy rows as an
    array, an extension left out (null), cls as int64 and a float32 from text."""
    members = []
    for i in range(3):
        k = f"{i:03d}"
        members += [(k + ".JPG", jpeg(tmp_path / "x.jpg", seed=i)),
                    (k + ".seg.png", png_mask(tmp_path / "x.png", seed=i)),
                    (k + ".cls", str(7 * i).encode()), (k + ".score", b"0.25"),
                    (k + ".npy", npy_bytes(np.ones((i, 3), np.int32) * i)),
                    (k + ".json", b"{}")]
    make_tar(tmp_path / "a.tar", members)
    schema = {"jpg": {"kind": "jpeg", "name": "image"},
              "seg.png": {"kind": "png", "mask_of": "image", "name": "mask"},
              "cls": {"kind": "int64", "name": "label"}, "score": "float32",
              "npy": {"kind": "array", "dtype": "int32", "shape": [None, 3], "name": "rows"},
              "json": None}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    out = tmp_path / "out"
    pack("--wds", tmp_path / "a.tar", "--schema", tmp_path / "schema.json", out)
    fields, samples, _ = read_all(out)
    assert [x[:2] + x[4:] for x in fields] == [
        ("image", "jpeg", None, None), ("mask", "png", "mask_of", "image"),
        ("label", "int64", None, None), ("score", "float32", None, None),
        ("rows", "array", None, None)]
    assert [np.frombuffer(s["label"], np.int64)[0] for s in samples] == [0, 7, 14]
    assert [np.frombuffer(s["score"], np.float32)[0] for s in samples] == [0.25] * 3
    assert [np.frombuffer(s["rows"], np.int32).reshape(-1, 3).tolist() for s in samples] == [
        [], [[1, 1, 1]], [[2, 2, 2], [2, 2, 2]]]
    assert [s["__key__"] for s in samples] == ["000", "001", "002"]


def spoil_wds(members, what, tmp_path):
    """Spoils sample 2 (index 2) of wds_samples' members (6 per sample)."""
    m = list(members)
    at = 12
    if what == "missing":
        del m[at + 1]  # its .cls
    elif what == "extra":
        m.insert(at + 2, ("s/0002.foo", b"x"))
    elif what == "cls_text":
        m[at + 1] = ("s/0002.cls", b"seven")
    elif what == "corrupt_jpeg":
        m[at] = ("s/0002.jpg", m[at][1][:200])
    elif what == "npy_dtype":
        m[at + 4] = ("s/0002.npy", npy_bytes(np.zeros((2, 3), np.int64)))
    elif what == "npy_shape":
        m[at + 4] = ("s/0002.npy", npy_bytes(np.zeros((3, 2), np.float32)))
    elif what == "mask_size":
        m[at + 2] = ("s/0002.seg.png", png_mask(tmp_path / "small.png", h=8, w=8))
    elif what == "key_again":
        m.append(("s/0001.extra", b"x"))
    elif what == "ext_twice":
        m.insert(at + 1, ("s/0002.JPG", m[at][1]))
    else:
        raise AssertionError(what)
    return m


# (what, words, skippable)
WDS_BAD = [
    ("missing", ["sample s/0002", 'field "cls"', "missing"], True),
    ("extra", ["sample s/0002", 'extension "foo"', "s/0002.foo", "not in the schema"], True),
    ("cls_text", ["sample s/0002", 'field "cls"', "s/0002.cls", "not an integer"], True),
    ("corrupt_jpeg", ["sample s/0002", 'field "jpg"', "member 's/0002.jpg'"], True),
    ("npy_dtype", ["sample s/0002", 'field "npy"', "s/0002.npy", "int64"], True),
    ("npy_shape", ["sample s/0002", 'field "npy"', "s/0002.npy", "(3, 2)"], True),
    ("mask_size", ["sample s/0002", 'field "seg_png"', "8x8"], True),
    ("key_again", ["s/0001.extra", "s/0001.jpg", "consecutive"], False),
    ("ext_twice", ["s/0002.jpg", "s/0002.JPG", "extension jpg"], False),
]


@pytest.mark.parametrize("what,words,skippable", WDS_BAD, ids=[b[0] for b in WDS_BAD])
def test_wds_refusal(tmp_path, what, words, skippable):
    members, _ = wds_samples(tmp_path)
    schema = {"jpg": "jpeg", "cls": "int64", "seg.png": {"kind": "png", "mask_of": "jpg"},
              "txt": "bytes", "npy": {"kind": "raw", "dtype": "float32", "shape": [2, 3]},
              "json": "bytes"}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    make_tar(tmp_path / "a.tar", spoil_wds(members, what, tmp_path))
    args = ["--wds", tmp_path / "a.tar"] + (
        ["--schema", tmp_path / "schema.json"] if what == "mask_size" else [])
    out = tmp_path / "out"
    err = refused(out, *args)
    for w in [str(tmp_path / "a.tar")] + words:
        assert w in err, (w, err)
    r = pack("--skip-bad", *args, out, ok=False)
    if skippable:
        assert r.returncode == 0 and "3 records" in r.stderr and "1 skipped" in r.stderr, r.stderr
        _, samples, _ = read_all(out)
        assert [s["__key__"] for s in samples] == ["s/0000", "s/0001", "s/0003"]
    else:
        assert r.returncode == 1 and not os.path.exists(out), r.stderr


def test_wds_bad_tars(tmp_path):
    """A tar cut short, a header damaged, a file that is no tar: named, with no output."""
    members, _ = wds_samples(tmp_path, n=2)
    make_tar(tmp_path / "a.tar", members)
    data = (tmp_path / "a.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(data[:2000])
    import tarfile
    with tarfile.open(tmp_path / "a.tar") as t:
        at = t.getmembers()[3].offset
    bad = bytearray(data)
    bad[at + 10] ^= 0x5A  # inside the 4th member's header: its checksum fails
    (tmp_path / "bad.tar").write_bytes(bytes(bad))
    (tmp_path / "no.tar").write_bytes(b"not a tar at all\n" * 64)
    for name, words in [("cut.tar", ["cut short"]), ("bad.tar", [f"byte {at}", "not a tar"]),
                        ("no.tar", ["byte 0", "not a tar header"])]:
        err = refused(tmp_path / "out", "--wds", tmp_path / name)
        for w in [str(tmp_path / name)] + words:
            assert w in err, (w, err)
    r = pack("--wds", tmp_path / "a.tar", "--coco", tmp_path / "x.json", "--images",
             tmp_path, tmp_path / "out", ok=False)
    assert r.returncode == 2 and "choose one of" in r.stderr, r.stderr


# ---- an HDF5 file's datasets ----

def make_h5(tmp_path, n=4, spoil=None):
    """images (vlen JPEG), masks (vlen PNG), labels (int64), scores (float32), emb (float16
    rows of 2x3), caption (vlen uint8): n rows each."""
    h5py = pytest.importorskip("h5py")
    d = tmp_path / "h5"
    d.mkdir(exist_ok=True)
    imgs = [jpeg(d / f"{i}.jpg", seed=i) for i in range(n)]
    masks = [png_mask(d / f"{i}.png", seed=i) for i in range(n)]
    caps = [f"caption {i}".encode() for i in range(n)]
    emb = np.arange(n * 6, dtype=np.float16).reshape(n, 2, 3)
    if spoil == "corrupt_jpeg":
        imgs[2] = imgs[2][:300]
    if spoil == "mask_size":
        masks[2] = png_mask(d / "small.png", h=8, w=8)
    vlen = h5py.vlen_dtype(np.uint8)
    with h5py.File(d / "f.h5", "w") as f:
        for name, vals in (("images", imgs), ("masks", masks), ("caption", caps)):
            ds = f.create_dataset(name, (n,), dtype=vlen)
            for i, v in enumerate(vals):
                ds[i] = np.frombuffer(v, np.uint8)
        f["classes"] = np.arange(n, dtype=np.int64) * 3
        f["scores"] = np.arange(n, dtype=np.float32) / 2
        f["emb"] = emb
        f["short"] = np.zeros(n - 1, np.int64)
        f["labels32"] = np.arange(n, dtype=np.int32)
        f["scalar"] = np.int64(5)
    expect = [{"image": imgs[i], "mask": masks[i], "label": np.int64(3 * i).tobytes(),
               "score": np.float32(i / 2).tobytes(), "emb": emb[i].tobytes(),
               "caption": caps[i], "__key__": str(i)} for i in range(n)]
    return d / "f.h5", expect


H5_FIELDS = ["image=/images:jpeg", "mask=masks:png:mask_of=image", "label=/classes",
             "score=/scores", "emb=/emb", "caption=/caption"]


def h5_args(path, fields=H5_FIELDS):
    args = [path]
    for f in fields:
        args += ["--h5-field", f]
    return args


def test_h5_fields_round_trip(tmp_path):
    path, expect = make_h5(tmp_path)
    out = tmp_path / "out"
    pack(*h5_args(path), out)
    fields, samples, checked = read_all(out)
    assert [f[:2] + f[3:] for f in fields] == [
        ("image", "jpeg", (), None, None), ("mask", "png", (), "mask_of", "image"),
        ("label", "int64", (), None, None), ("score", "float32", (), None, None),
        ("emb", "raw", (2, 3), None, None), ("caption", "bytes", (), None, None)]
    assert checked
    assert samples == expect


# (name, fields, spoil, words, code, skippable)
H5_BAD = [
    ("corrupt_jpeg", H5_FIELDS, "corrupt_jpeg", ["record 2", 'field "image"'], 1, True),
    ("mask_size", H5_FIELDS, "mask_size", ["record 2", 'field "mask"', "8x8"], 1, True),
    ("rows", ["label=/classes", "short=/short"], None, ["/short", "3 rows", "4"], 1, False),
    ("kind", ["label=/classes:jpeg"], None, ["label", "/classes", "holds numbers"], 1, False),
    ("scalar_dtype", ["label=/labels32:int64"], None, ["label", "/labels32", "int32"], 1,
     False),
    # the library's message as it is: the file, the field and its dataset
    ("no_dataset", ["label=/classes", "x=/nope"], None, ['field "x"', "no dataset /nope"], 1,
     False),
    ("rank", ["label=/classes", "x=/scalar"], None, ['field "x"', "/scalar", "rank 0"], 1,
     False),
    ("spec", ["label"], None, ["--h5-field label", "NAME=DATASET"], 2, False),
]


@pytest.mark.parametrize("name,fields,spoil,words,code,skippable", H5_BAD,
                         ids=[b[0] for b in H5_BAD])
def test_h5_fields_refusal(tmp_path, name, fields, spoil, words, code, skippable):
    path, _ = make_h5(tmp_path, spoil=spoil)
    out = tmp_path / "out"
    err = refused(out, *h5_args(path, fields), code=code)
    for w in ([str(path)] if code == 1 else []) + words:
        assert w in err, (w, err)
    r = pack("--skip-bad", *h5_args(path, fields), out, ok=False)
    if skippable:
        assert r.returncode == 0 and "3 records" in r.stderr and "1 skipped" in r.stderr, r.stderr
        _, samples, _ = read_all(out)
        assert [s["__key__"] for s in samples] == ["0", "1", "3"]
    else:
        assert r.returncode == code and not os.path.exists(out), r.stderr


@pytest.mark.parametrize("labels", ["float_rows", "strings"])
def test_h5_fields_ignore_a_labels_dataset_no_field_names(tmp_path, labels):
    """A /labels dataset that is not one integer per row (boxes as float [N, 4], captions as
    strings) is only data: --h5-field reads the datasets it names, and nothing else."""
    h5py = pytest.importorskip("h5py")
    n = 3
    imgs = [jpeg(tmp_path / f"{i}.jpg", seed=i) for i in range(n)]
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("jpegs", (n,), dtype=h5py.vlen_dtype(np.uint8))
        for i, v in enumerate(imgs):
            ds[i] = np.frombuffer(v, np.uint8)
        f["cls"] = np.arange(n, dtype=np.int64) + 7
        if labels == "float_rows":
            f["labels"] = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
        else:
            f.create_dataset("labels", data=[f"a cat {i}" for i in range(n)],
                             dtype=h5py.string_dtype())
    out = tmp_path / "out"
    pack(*h5_args(path, ["image=jpegs", "label=cls"]), out)
    fields, samples, _ = read_all(out)
    assert [f[:2] for f in fields] == [("image", "jpeg"), ("label", "int64")]
    assert samples == [{"image": imgs[i], "label": np.int64(i + 7).tobytes(), "__key__": str(i)}
                       for i in range(n)]
