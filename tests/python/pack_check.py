# SPDX-License-Identifier: Apache-2.0
"""Checks on stoker-pack's output for tests/test_pack_cli.sh, reading data sets through the
real shared library (ctypes; STOKER_LIBRARY names it). Usage: pack_check.py MODE ARGS...;
exit status 0 when the check holds."""
import ctypes
import json
import os
import sys

import numpy as np

IMG_EXT = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


class Dataset:
    def __init__(self, path):
        lib = ctypes.CDLL(os.environ["STOKER_LIBRARY"])
        lib.stoker_dataset_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                            ctypes.c_void_p]
        lib.stoker_dataset_errmsg.argtypes = [ctypes.c_void_p]
        lib.stoker_dataset_errmsg.restype = ctypes.c_char_p
        lib.stoker_dataset_close.argtypes = [ctypes.c_void_p]
        lib.stoker_dataset_num_records.argtypes = [ctypes.c_void_p]
        lib.stoker_dataset_num_records.restype = ctypes.c_int64
        lib.stoker_dataset_num_classes.argtypes = [ctypes.c_void_p]
        lib.stoker_dataset_class_name.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        lib.stoker_dataset_class_name.restype = ctypes.c_char_p
        lib.stoker_dataset_record_info.argtypes = [
            ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32)]
        lib.stoker_dataset_record_key.argtypes = [ctypes.c_void_p, ctypes.c_int64]
        lib.stoker_dataset_record_key.restype = ctypes.c_char_p
        lib.stoker_dataset_read.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                            ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        lib.stoker_dataset_jpeg_checked.argtypes = [ctypes.c_void_p]
        lib.stoker_dataset_format_version.argtypes = [ctypes.c_void_p]
        self.lib = lib
        self.h = ctypes.c_void_p()
        rc = lib.stoker_dataset_open(ctypes.byref(self.h), path.encode(), None)
        if rc != 0:
            sys.exit(f"open {path}: {rc} {lib.stoker_dataset_errmsg(self.h)}")

    def __len__(self):
        return self.lib.stoker_dataset_num_records(self.h)

    def classes(self):
        n = self.lib.stoker_dataset_num_classes(self.h)
        return [self.lib.stoker_dataset_class_name(self.h, i) for i in range(n)]

    def info(self, i):
        size, label, shard = ctypes.c_uint64(), ctypes.c_int64(), ctypes.c_int32()
        rc = self.lib.stoker_dataset_record_info(self.h, i, ctypes.byref(size),
                                                 ctypes.byref(label), ctypes.byref(shard))
        assert rc == 0, rc
        return size.value, label.value, shard.value

    def key(self, i):
        return self.lib.stoker_dataset_record_key(self.h, i)

    def read(self, i):
        size = self.info(i)[0]
        buf = ctypes.create_string_buffer(max(size, 1))
        got = ctypes.c_size_t()
        rc = self.lib.stoker_dataset_read(self.h, i, buf, size, ctypes.byref(got))
        if rc != 0:
            sys.exit(f"read record {i}: {rc} {self.lib.stoker_dataset_errmsg(self.h)}")
        return buf.raw[:got.value]

    def records(self):
        for i in range(len(self)):
            yield i, self.key(i), self.info(i)[1], self.read(i)


def torchvision_order(src):
    """(key, label) pairs in torchvision ImageFolder's order, keys as bytes."""
    srcb = os.fsencode(src)
    classes = sorted(e.name for e in os.scandir(srcb) if e.is_dir())
    out = []
    for label, c in enumerate(classes):
        base = os.path.join(srcb, c)
        for root, _, files in sorted(os.walk(base, followlinks=True)):
            for f in sorted(files):
                if f.lower().endswith(tuple(e.encode() for e in IMG_EXT)):
                    out.append((os.path.relpath(os.path.join(root, f), srcb), label))
    return classes, out


def check_json(path, *pairs):
    d = json.load(open(path))
    for p in pairs:
        k, v = p.split("=", 1)
        got = d[k]
        want = [int(x) for x in v.split(",")] if k == "shape" else v
        if str(got) != str(want) and got != want:
            sys.exit(f"{k}: got {got!r}, want {want!r} in {d}")


def check_folder(out, src):
    ds = Dataset(out)
    classes, order = torchvision_order(src)
    assert ds.classes() == classes, (ds.classes(), classes)
    labels = dict(order)
    seen = set()
    for i, key, label, data in ds.records():
        assert key in labels, key
        assert label == labels[key], (key, label, labels[key])
        with open(os.path.join(os.fsencode(src), key), "rb") as f:
            assert f.read() == data, f"record {i} ({key}) differs from its file"
        seen.add(key)
    assert seen == set(labels), set(labels) ^ seen


def check_sorted(out, src):
    ds = Dataset(out)
    _, order = torchvision_order(src)
    keys = [ds.key(i) for i in range(len(ds))]
    assert keys == [k for k, _ in order], (keys, order)


def check_shuffled(out):
    ds = Dataset(out)
    labels = [ds.info(i)[1] for i in range(len(ds))]
    assert labels != sorted(labels), "records are stored class-sorted"


def check_list(out, listfile):
    base = os.path.dirname(listfile)
    want = {}
    for line in open(listfile, encoding="utf-8"):
        line = line.rstrip("\n")
        if line and not line.startswith("#"):
            p, label = line.rsplit("\t", 1)
            want[p.encode()] = (os.path.join(base, p), int(label))
    ds = Dataset(out)
    assert len(ds) == len(want)
    for i, key, label, data in ds.records():
        path, wl = want[key]
        assert label == wl, (key, label, wl)
        assert open(path, "rb").read() == data, key


def check_npy(out, xfile, yfile, mode):
    x, y = np.load(xfile), np.load(yfile)
    ds = Dataset(out)
    got = [(data, label) for _, _, label, data in ds.records()]
    want = [(x[i].tobytes(), int(y[i])) for i in range(len(x))]
    if mode == "ordered":
        assert got == want
    else:
        assert sorted(got) == sorted(want) and got != want


def check_jpeg_key(out, key):
    ds = Dataset(out)
    for i, k, _, data in ds.records():
        if k == key.encode():
            assert data[:3] == b"\xff\xd8\xff", data[:8]
            return
    sys.exit(f"no record with key {key}")


def check_maxside(out, n):
    from PIL import Image
    import io
    ds = Dataset(out)
    for i, key, _, data in ds.records():
        im = Image.open(io.BytesIO(data))
        assert im.format == "JPEG" and max(im.size) <= int(n), (key, im.size)
        assert max(im.size) == int(n), (key, im.size)  # every source image is larger


def check_h5(out, h5file, count):
    """OUT holds `count` records, each equal (bytes and label) to the HDF5 record its key
    names; variable-length records are compared as their bytes."""
    import h5py
    ds = Dataset(out)
    assert len(ds) == int(count), (len(ds), count)
    with h5py.File(h5file, "r") as f:
        images = f["images"]
        labels = f["labels"][()] if "labels" in f else None
        for i, key, label, data in ds.records():
            src = int(key)
            want = np.asarray(images[src]).tobytes()
            assert data == want, f"record {i} (source record {src}) differs"
            assert label == (int(labels[src]) if labels is not None else -1), (i, label)


def check_jpegs(out, max_side, mode, *keys):
    """Every record is a JPEG (of PIL mode `mode` unless it is "any") no larger than
    max_side; the given keys are present, the first one exactly max_side on its longer
    side."""
    from PIL import Image
    import io
    ds = Dataset(out)
    seen = {}
    for i, key, _, data in ds.records():
        im = Image.open(io.BytesIO(data))
        assert im.format == "JPEG" and mode in ("any", im.mode), (key, im.format, im.mode)
        assert max(im.size) <= int(max_side), (key, im.size)
        seen[key.decode()] = im.size
    missing = [k for k in keys if k not in seen]
    assert not missing, (missing, sorted(seen))
    if keys:
        assert max(seen[keys[0]]) == int(max_side), (keys[0], seen[keys[0]])


def check_checked(out, want):
    """`want` is "yes" or "no": whether the library reads OUT as a data set whose JPEGs were
    checked (stoker_dataset_jpeg_checked), with the manifest to match: version 2 and a line
    "checked jpeg" right after "field jpeg", or version 1 and no such line."""
    ds = Dataset(out)
    yes = want == "yes"
    got = ds.lib.stoker_dataset_jpeg_checked(ds.h)
    assert got == int(yes), f"stoker_dataset_jpeg_checked: got {got}, want {int(yes)}"
    version = ds.lib.stoker_dataset_format_version(ds.h)
    assert version == (2 if yes else 1), f"format version {version}"
    lines = open(os.path.join(out, "manifest.stk"), "rb").read().split(b"\n")
    assert lines[0] == b"stoker-manifest %d" % (2 if yes else 1), lines[0]
    assert (b"checked jpeg" in lines) == yes, lines[:5]
    if yes:
        assert lines[lines.index(b"checked jpeg") - 1] == b"field jpeg", lines[:5]


def flip(out, src):
    """Flips one byte inside record 3's payload in its shard; prints the record id."""
    ds = Dataset(out)
    rid = 3
    data = ds.read(rid)
    shard = ds.info(rid)[2]
    names = sorted(n for n in os.listdir(out) if n != "manifest.stk")
    path = os.path.join(out, names[shard])
    blob = bytearray(open(path, "rb").read())
    at = blob.find(data)
    assert at >= 0
    blob[at + len(data) // 2] ^= 0x40
    open(path, "wb").write(bytes(blob))
    print(rid)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    {"json": check_json, "folder": check_folder, "sorted": check_sorted,
     "shuffled": check_shuffled, "list": check_list, "npy": check_npy,
     "jpeg_key": check_jpeg_key, "maxside": check_maxside, "h5": check_h5,
     "jpegs": check_jpegs, "checked": check_checked, "flip": flip}[mode](*args)


if __name__ == "__main__":
    main()
