# SPDX-License-Identifier: Apache-2.0
"""Fields delivered in another dtype (field_dtypes=, STOKER_OPT_FIELD_DTYPES;
docs/SEMANTICS.md "Samples with several fields").

Every numeric kind (dense int64 and float32 scalars, raw arrays, ragged arrays of integers,
floats and bools) converted to every dtype is checked, sample by sample (by id), against
NumPy's astype of the values as written: integers wrap; floats to integers truncate toward
zero as a C cast where the value fits, NaN gives 0 and values out of range (infinities
too) the type's least or greatest; float16 is NumPy's rounding of the float64 itself
(1 + 2**-11 + 2**-40 rounds up, where rounding through float32 would round down);
bfloat16 the same rounding to 8 significant bits. Under the train transform a mask
converted to int64 (or int8, bool, float16) equals the uint8 mask of the same seed, float16
boxes equal the float32 boxes' astype, and the class ids tied to them follow. Names that
are not delivered fields, bytes, the image, the labels of a data set without a schema, an
unknown dtype and bad syntax are refused at create, naming the field.
"""
import ctypes
import io

import numpy as np
import pytest

import conftest as h
import stoker

PIL = pytest.importorskip("PIL.Image")
torch = pytest.importorskip("torch")

N = 12
FIELDS = {
    "image": "jpeg",
    "mask": {"kind": "png", "mask_of": "image"},
    "boxes": {"kind": "array", "dtype": "float32", "shape": (None, 4), "boxes_of": "image"},
    "classes": {"kind": "array", "dtype": "int64", "shape": (None,), "rows_of": "boxes"},
    "tokens": {"kind": "array", "dtype": "int64", "shape": (None,)},
    "vals": {"kind": "array", "dtype": "float64", "shape": (None, 3)},
    "pts": {"kind": "array", "dtype": "float32", "shape": (None, 2)},
    "small": {"kind": "array", "dtype": "int16", "shape": (None,)},
    "halves": {"kind": "array", "dtype": "float16", "shape": (None,)},
    "flags": {"kind": "array", "dtype": "bool", "shape": (None,)},
    "emb": {"kind": "raw", "dtype": "uint16", "shape": (2, 3)},
    "big": {"kind": "raw", "dtype": "uint64", "shape": (2,)},
    "text": "bytes",
    "weight": "float32",
    "label": "int64",
}
NUMERIC = ["tokens", "vals", "pts", "small", "halves", "flags", "emb", "big", "weight",
           "label", "classes", "boxes"]
TARGETS = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
           "float16", "bfloat16", "float32", "float64", "bool"]
SPECIAL = [np.nan, np.inf, -np.inf, 1e10, -1e10, 1 + 2.0 ** -11 + 2.0 ** -40, 65519.99,
           -0.0, 3e38, 1e-6, -2.5, 2.5, 255.9, -128.7, 2.0 ** 63, -(2.0 ** 63), 2.0 ** 64]


def encode(arr, fmt, **kw):
    out = io.BytesIO()
    PIL.fromarray(arr).save(out, format=fmt, **kw)
    return out.getvalue()


def sample(i):
    rng = np.random.default_rng(100 + i)
    w, h_ = 30 + i, 26 + i % 5
    n = i % 3 + 1
    some = SPECIAL[i % 3::3]  # each special value in every third sample
    vals = np.concatenate([some, rng.normal(scale=10.0 ** (i % 6), size=3 * (1 + i % 3))])
    vals = vals[:len(vals) // 3 * 3]
    return {
        "image": encode(rng.integers(0, 255, (h_, w, 3), dtype=np.uint8), "JPEG", quality=90),
        "mask": encode(rng.integers(0, 256, (h_, w), dtype=np.uint8), "PNG"),
        "boxes": np.array([[1.5, 2, 10, 12.25], [0, 0, w, h_], [w - 3, 4, w, 9]],
                          dtype=np.float32)[:n],
        "classes": np.array([7 * i - 3, 300 + i, -(2 ** 40) - i], dtype=np.int64)[:n],
        "tokens": np.array([i, -1, 255, 256, -129, 70000 + i, 2 ** 40 + i, -(2 ** 62),
                            2 ** 63 - 1][:i % 9 + 1], dtype=np.int64),
        "vals": vals.reshape(-1, 3),
        "pts": rng.normal(scale=300, size=(i % 4, 2)).astype(np.float32),
        "small": np.array([-1, 32767, -32768, 255, -256, i][:i % 6 + 1], dtype=np.int16),
        "halves": np.array([0.1, -2.75, 65504, np.inf, -0.5, 1000.5][:i % 6], dtype=np.float16),
        "flags": (np.arange(i % 5) % 2 == 0),
        "emb": (np.arange(6, dtype=np.uint16).reshape(2, 3) * 9000 + i).astype(np.uint16),
        "big": np.array([2 ** 64 - 1 - i, 2 ** 63 + i], dtype=np.uint64),
        "text": b"t%d" % i,
        "weight": 0.25 * i - 1.3,
        "label": 1000 + i,
    }


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("fdt") / "ds"
    with stoker.Writer(path, fields=FIELDS, fsync=False) as w:
        for i in range(N):
            w.add(sample(i))
    return path


def loader(path, **kw):
    opts = dict(batch_size=5, device="cpu", size=24, seed=3, dtype="uint8",
                mean=(0, 0, 0), std=(1, 1, 1), threads=2)
    opts.update(kw)
    return stoker.Loader(str(path), **opts)


def host(x, dtype):
    """A DLPack producer as numpy (bfloat16: its bits, as uint16). NumPy takes no bool or
    bfloat16 through DLPack, torch (1.13) no bool, uint16, uint32 or uint64."""
    if dtype == "bfloat16":
        return torch.from_dlpack(x).view(torch.int16).numpy().view(np.uint16).copy()
    if dtype == "bool":  # host batches: the bytes at data_ptr()
        raw = ctypes.string_at(x.data_ptr(), x.nbytes)
        return np.frombuffer(raw, dtype=np.bool_).reshape(x.shape).copy()
    return np.from_dlpack(x).copy()


def per_sample(L):
    """{id: {field: numpy values}} of one epoch."""
    dtypes = {f["name"]: f["dtype"] for f in L.fields}
    out = {}
    for b in L:
        got = {}
        for k in b.keys():
            f = b[k]
            if isinstance(f, stoker.RaggedField):
                vals, off = host(f.values, dtypes.get(k)), f.host_offsets
                got[k] = [vals[off[j]:off[j + 1]] for j in range(b.count)]
            else:
                got[k] = host(f, dtypes.get(k))
        for j, i in enumerate(b.indices.tolist()):
            out[i] = {k: v[j] for k, v in got.items()}
            out[i]["labels"] = b.labels[j].copy()
    return out


def bf16_bits(x):
    """float64 values rounded once to bfloat16 (8 significant bits, to nearest even)."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)
    r = np.ldexp(np.rint(m * 256.0), e - 8)  # m * 256 is exact: rint rounds half to even
    r = np.where(np.abs(r) >= 2.0 ** 128, np.copysign(np.inf, x), r)
    r = np.where(np.isfinite(x), r, x)
    bits = r.astype(np.float32).view(np.uint32) >> 16
    return np.where(np.isnan(x), 0x7FC0, bits).astype(np.uint16)


def expected(v, to):
    v = np.asarray(v)
    if to == "bfloat16":
        return bf16_bits(v.astype(np.float64))
    if to in ("float16", "float32", "float64", "bool") or v.dtype.kind != "f":
        with np.errstate(over="ignore"):
            return v.astype(to)
    info = np.iinfo(to)
    flat = []
    for x in v.astype(np.float64).ravel().tolist():
        if np.isnan(x):
            flat.append(0)
        elif np.isinf(x):
            flat.append(info.max if x > 0 else info.min)
        else:
            flat.append(min(max(int(np.trunc(x)), info.min), info.max))
    out = np.array(flat, dtype=to).reshape(v.shape)
    fits = np.isfinite(v) & (np.trunc(v) >= info.min) & (np.trunc(v) < float(info.max) + 1)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(out[fits], v[fits].astype(to))  # C's cast where it fits
    return out


def same(got, want, to, what):
    assert got.shape == want.shape, what
    if to in ("float16", "float32", "float64"):
        assert got.dtype == np.dtype(to), what
        assert np.array_equal(got, want, equal_nan=True), (what, got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want)), what
    else:
        assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
        assert np.array_equal(got, want), (what, got, want)


@pytest.mark.parametrize("to", TARGETS)
def test_every_kind_converted_equals_astype_of_what_was_written(ds, to):
    conv = NUMERIC
    L = loader(ds, transform="none", field_dtypes={k: to for k in conv})
    kinds = {f["name"]: f for f in L.fields}
    for k in FIELDS:
        assert kinds[k]["dtype"] == (to if k in conv else
                                     {"image": "uint8", "mask": "uint8", "text": "uint8"}[k]), k
    got = per_sample(L)
    assert sorted(got) == list(range(N))
    for i, d in got.items():
        want = sample(i)
        for k in conv:
            w = np.asarray(want[k], dtype=FIELDS[k] if isinstance(FIELDS[k], str)
                           else FIELDS[k]["dtype"])
            same(d[k], expected(w, to), to, (k, i))
        assert bytes(d["text"]) == want["text"]
        assert d["labels"].dtype == np.int64 and int(d["labels"]) == 1000 + i


def test_float64_to_float16_rounds_once():
    """The value that rounding through float32 gets wrong, directly."""
    x = np.array([1 + 2.0 ** -11 + 2.0 ** -40])
    assert x.astype(np.float16)[0] == np.float16(1 + 2.0 ** -10)
    assert x.astype(np.float32).astype(np.float16)[0] == np.float16(1.0)


def test_the_string_form_and_the_label(ds):
    L = loader(ds, transform="none", fields="tokens,label",
               field_dtypes="label=int32,tokens=float32")
    assert [f["dtype"] for f in L.fields] == ["float32", "int32"]
    for b in L:
        lab = np.from_dlpack(b["label"])
        assert lab.dtype == np.int32 and np.array_equal(lab, 1000 + b.indices)
        assert b.labels.dtype == np.int64 and np.array_equal(b.labels, 1000 + b.indices)
    # a conversion to the stored dtype changes nothing
    L = loader(ds, transform="none", field_dtypes={"label": np.int64, "boxes": torch.float32})
    assert {f["name"]: f["dtype"] for f in L.fields}["boxes"] == "float32"
    b = next(iter(L))
    assert np.array_equal(np.from_dlpack(b["label"]), b.labels)


@pytest.mark.parametrize("kw", [dict(), dict(vflip=0.5, seed=8), dict(transform="eval")],
                         ids=["train", "train-vflip", "eval"])
def test_masks_and_boxes_converted_after_the_geometry(ds, kw):
    base = per_sample(loader(ds, **kw))
    conv = {"mask": "int64", "boxes": "float16", "classes": "int32", "tokens": "bfloat16"}
    got = per_sample(loader(ds, field_dtypes=conv, **kw))
    assert sorted(got) == sorted(base) == list(range(N))
    boxes_seen = 0
    for i in range(N):
        m8, m64 = base[i]["mask"], got[i]["mask"]
        assert m8.dtype == np.uint8 and m64.dtype == np.int64 and m64.shape == (24, 24)
        assert np.array_equal(m64, m8.astype(np.int64)), i
        assert np.array_equal(got[i]["image"], base[i]["image"]), i
        same(got[i]["boxes"], base[i]["boxes"].astype(np.float16), "float16", ("boxes", i))
        same(got[i]["classes"], base[i]["classes"].astype(np.int32), "int32", ("classes", i))
        same(got[i]["tokens"], bf16_bits(base[i]["tokens"]), "bfloat16", ("tokens", i))
        boxes_seen += len(base[i]["boxes"])
    assert boxes_seen > 0
    # uint8 masks narrowed and to floats: each as NumPy's astype of the uint8 mask
    for to in ("int8", "bool", "float16", "bfloat16"):
        conv = {"mask": to}
        got = per_sample(loader(ds, field_dtypes=conv, **kw))
        for i in range(N):
            want = base[i]["mask"]
            same(got[i]["mask"], bf16_bits(want) if to == "bfloat16" else want.astype(to),
                 to, ("mask", to, i))


@pytest.mark.parametrize("spec, words", [
    ("nosuch=int32", ["nosuch", "does not deliver", "image, mask, boxes"]),
    ("text=int32", ["\"text\"", "bytes"]),
    ("image=float32", ["\"image\"", "STOKER_OPT_DTYPE"]),
    ("mask=int65", ["\"mask\"", "unknown dtype", "int65"]),
    ("mask=default", ["\"mask\"", "unknown dtype"]),
    ("mask", ["NAME=DTYPE"]),
    ("=int32", ["NAME=DTYPE"]),
    ("mask=int32,mask=int64", ["\"mask\"", "twice"]),
])
def test_refused_at_create_naming_the_field(ds, spec, words):
    with pytest.raises(stoker.StokerError) as e:
        loader(ds, field_dtypes=spec)
    assert e.value.codename == "STOKER_E_INVALID"
    for w in words:
        assert w in str(e.value), (spec, str(e.value))


def test_refused_kinds_without_a_transform_and_selection(ds, tmp_path):
    # under transform none the image and the mask are their encoded bytes
    for name in ("image", "mask"):
        with pytest.raises(stoker.StokerError) as e:
            loader(ds, transform="none", field_dtypes={name: "int32"})
        assert name in str(e.value) and "encoded bytes" in str(e.value)
    with pytest.raises(stoker.StokerError) as e:  # a field fields= leaves out
        loader(ds, transform="none", fields=["tokens"], field_dtypes={"label": "int32"})
    assert "\"label\"" in str(e.value) and "does not deliver" in str(e.value)
    with pytest.raises(TypeError):
        loader(ds, field_dtypes={3: "int32"})
    h.write_raw(tmp_path / "legacy", 4)
    for name in ("label", "data"):
        with pytest.raises(stoker.StokerError) as e:
            loader(tmp_path / "legacy", field_dtypes={name: "int32"})
        assert "\"%s\"" % name in str(e.value), str(e.value)
