#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Makes the benchmark's data: an ImageNet-like JPEG tree and an HDF5 file of raw images.

    make_data.py images --out DIR --n N [--classes C] [--src PHOTOS] [--jobs J] [--seed S]
        DIR/train/<class>/<name>.jpg: N JPEGs cut from the real photographs in PHOTOS
        (default /usr/share/backgrounds/mate, from Debian's mate-backgrounds), made by
        scripts/make-sample.py in J processes at once.

    make_data.py h5 --out FILE.h5 --n N [--from DIR] [--npy DIR] [--jobs J] [--seed S]
        FILE.h5 as a typical h5py user writes it: `images` (N,224,224,3) uint8, contiguous,
        and `labels` (N,) int64. The images are the JPEGs of the tree DIR (short side resized
        to 256, centre crop 224, cycling through the tree when N is larger); without --from,
        random bytes. With --npy, the same arrays also go to DIR/images.npy and
        DIR/labels.npy, which stoker-pack packs.

    make_data.py h5-to-npy FILE.h5 DIR
        DIR/images.npy and DIR/labels.npy from an existing HDF5 file (`images`, `labels`).

Deterministic for a given --seed.
"""
import argparse
import multiprocessing
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_SAMPLE = os.path.join(HERE, "..", "scripts", "make-sample.py")
SIDE = 224
CHUNK = 512


def jpeg_tree(a):
    jobs = max(1, min(a.jobs, a.n // 100 or 1))
    parts = os.path.join(a.out, ".parts")
    shutil.rmtree(parts, ignore_errors=True)
    procs = []
    for k in range(jobs):
        n = a.n // jobs + (1 if k < a.n % jobs else 0)
        cmd = [sys.executable, MAKE_SAMPLE, "--out", os.path.join(parts, str(k)), "--n", str(n),
               "--classes", str(a.classes), "--seed", str(a.seed * 1000 + k)]
        if a.src:
            cmd += ["--src", a.src]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL))
    failed = [p.wait() for p in procs]
    if any(failed):
        sys.exit("make_data.py: make-sample.py failed")
    # merge the parts into one tree; names stay unique with the part's number in front
    count = total = 0
    for k in range(jobs):
        train = os.path.join(parts, str(k), "train")
        for cls in sorted(os.listdir(train)):
            dst = os.path.join(a.out, "train", cls)
            os.makedirs(dst, exist_ok=True)
            for name in sorted(os.listdir(os.path.join(train, cls))):
                path = os.path.join(dst, f"p{k:02d}_{name}")
                os.replace(os.path.join(train, cls, name), path)
                count += 1
                total += os.path.getsize(path)
    shutil.rmtree(parts)
    print(f"make_data: {count} JPEGs in {a.classes} classes under {a.out}/train "
          f"({total / 1e6:.1f} MB, mean {total / max(count, 1) / 1e3:.1f} KB; {jobs} processes)")


def list_tree(root):
    train = os.path.join(root, "train") if os.path.isdir(os.path.join(root, "train")) else root
    classes = sorted(d for d in os.listdir(train) if os.path.isdir(os.path.join(train, d)))
    items = []
    for label, cls in enumerate(classes):
        for name in sorted(os.listdir(os.path.join(train, cls))):
            if name.lower().endswith((".jpg", ".jpeg")):
                items.append((os.path.join(train, cls, name), label))
    return items


def center_224(path):
    """Short side to 256, centre crop 224, RGB: how a preprocessed HDF5 copy of ImageNet looks."""
    import numpy as np
    from PIL import Image
    with Image.open(path) as im:
        im = im.convert("RGB")
        w, h = im.size
        s = 256 / min(w, h)
        im = im.resize((max(SIDE, round(w * s)), max(SIDE, round(h * s))), Image.BILINEAR)
        w, h = im.size
        x, y = (w - SIDE) // 2, (h - SIDE) // 2
        return np.asarray(im.crop((x, y, x + SIDE, y + SIDE)), dtype=np.uint8)


def chunks_from_tree(items, n, jobs):
    import numpy as np
    with multiprocessing.Pool(jobs) as pool:
        for s in range(0, n, CHUNK):
            idx = range(s, min(n, s + CHUNK))
            imgs = pool.map(center_224, [items[i % len(items)][0] for i in idx], chunksize=16)
            yield np.stack(imgs), np.array([items[i % len(items)][1] for i in idx], np.int64)


def chunks_random(n, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    for s in range(0, n, CHUNK):
        e = min(n, s + CHUNK)
        yield (rng.integers(0, 256, (e - s, SIDE, SIDE, 3), dtype=np.uint8),
               rng.integers(0, 1000, e - s, dtype=np.int64))


def h5_file(a):
    import h5py
    import numpy as np
    items = list_tree(a.from_tree) if a.from_tree else []
    if a.from_tree and not items:
        sys.exit(f"make_data.py: no JPEGs under {a.from_tree}")
    chunks = chunks_from_tree(items, a.n, a.jobs) if items else chunks_random(a.n, a.seed)
    npy_images = npy_labels = None
    if a.npy:
        os.makedirs(a.npy, exist_ok=True)
        npy_images = np.lib.format.open_memmap(os.path.join(a.npy, "images.npy"), "w+",
                                               np.uint8, (a.n, SIDE, SIDE, 3))
        npy_labels = np.zeros(a.n, np.int64)
    tmp = a.out + ".part"
    with h5py.File(tmp, "w") as f:
        images = f.create_dataset("images", (a.n, SIDE, SIDE, 3), dtype="uint8")
        labels = f.create_dataset("labels", (a.n,), dtype="int64")
        s = 0
        for x, y in chunks:
            images[s:s + len(x)] = x
            labels[s:s + len(x)] = y
            if npy_images is not None:
                npy_images[s:s + len(x)] = x
                npy_labels[s:s + len(x)] = y
            s += len(x)
    os.replace(tmp, a.out)
    if npy_images is not None:
        npy_images.flush()
        del npy_images
        np.save(os.path.join(a.npy, "labels.npy"), npy_labels)
    print(f"make_data: {a.out}: images ({a.n},{SIDE},{SIDE},3) uint8, labels ({a.n},) int64, "
          f"{os.path.getsize(a.out) / 1e6:.1f} MB, "
          + (f"from the JPEGs of {a.from_tree}" if items else "random bytes")
          + (f"; same arrays in {a.npy}/images.npy, labels.npy" if a.npy else ""))


def h5_to_npy(a):
    import h5py
    import numpy as np
    os.makedirs(a.dir, exist_ok=True)
    with h5py.File(a.h5, "r") as f:
        src = f["images"]
        dst = np.lib.format.open_memmap(os.path.join(a.dir, "images.npy"), "w+", src.dtype,
                                        src.shape)
        for s in range(0, src.shape[0], CHUNK):
            dst[s:s + CHUNK] = src[s:s + CHUNK]
        dst.flush()
        labels = f["labels"][:] if "labels" in f else np.zeros(src.shape[0], np.int64)
        np.save(os.path.join(a.dir, "labels.npy"), labels.astype(np.int64))
    print(f"make_data: {a.dir}/images.npy {tuple(src.shape)} {src.dtype} from {a.h5}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("images")
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=600)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--src", default=None, help="folder of photographs")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("h5")
    p.add_argument("--out", required=True)
    p.add_argument("--n", type=int, default=600)
    p.add_argument("--from", dest="from_tree", default=None, help="JPEG tree to fill it from")
    p.add_argument("--npy", default=None, help="also write the arrays as .npy files here")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("h5-to-npy")
    p.add_argument("h5")
    p.add_argument("dir")
    a = ap.parse_args()
    {"images": jpeg_tree, "h5": h5_file, "h5-to-npy": h5_to_npy}[a.what](a)


if __name__ == "__main__":
    main()
