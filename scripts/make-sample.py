#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Make a small ImageNet-like sample data set from real photographs.

Cuts random crops out of the photographs in SRC (by default the ones Debian's
mate-backgrounds package installs), resizes them to ImageNet-like sizes (long side
around 500 px, a few larger) and writes them as JPEGs into an ImageFolder tree:

    OUT/train/<class>/<name>.jpg

Like real ImageNet, a few images are grayscale, CMYK or progressive. Deterministic for
a given --seed.

    make-sample.py --out DIR [--src DIR] [--n 600] [--classes 10] [--seed 0]
"""
import argparse
import os
import random
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit("make-sample.py needs Pillow: apt-get install python3-pil (run with /usr/bin/python3)")

DEFAULT_SRC = "/usr/share/backgrounds/mate"


def photographs(src):
    found = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if f.lower().endswith((".jpg", ".jpeg")):
                found.append(os.path.join(root, f))
    return sorted(found)


def one_image(rng, photo):
    w, h = photo.size
    long_side = int(min(1200, max(160, rng.gauss(500, 90) if rng.random() > 0.05 else 1000)))
    aspect = rng.choice([4 / 3, 3 / 4, 1.0, 3 / 2, 16 / 9]) * rng.uniform(0.92, 1.08)
    ow, oh = (long_side, round(long_side / aspect)) if aspect >= 1 else (round(long_side * aspect), long_side)
    # a crop of the photograph with the output's aspect ratio, 30-100% of its width
    cw = int(w * rng.uniform(0.3, 1.0))
    ch = min(h, max(16, round(cw * oh / ow)))
    cw = min(w, round(ch * ow / oh))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    im = photo.crop((x, y, x + cw, y + ch)).resize((max(16, ow), max(16, oh)), Image.BILINEAR)
    if rng.random() < 0.5:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    return im


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default=DEFAULT_SRC)
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    paths = photographs(a.src)
    if not paths:
        sys.exit(f"make-sample.py: no photographs under {a.src} (apt-get install mate-backgrounds)")
    # keep the sources modest in memory: at most 2400 px on the long side
    photos = []
    for p in paths:
        im = Image.open(p).convert("RGB")
        im.thumbnail((2400, 2400))
        photos.append(im)

    rng = random.Random(a.seed)
    kinds = {"rgb": 0, "gray": 0, "cmyk": 0, "progressive": 0}
    total = 0
    for i in range(a.n):
        cls = i % a.classes
        d = os.path.join(a.out, "train", f"class_{cls:03d}")
        os.makedirs(d, exist_ok=True)
        im = one_image(rng, photos[(cls + i // a.classes) % len(photos)])
        r = rng.random()
        opts = {"quality": rng.randint(80, 95)}
        if r < 0.03:
            im, kind = im.convert("L"), "gray"
        elif r < 0.04:
            im, kind = im.convert("CMYK"), "cmyk"
        elif r < 0.06:
            opts["progressive"], kind = True, "progressive"
        else:
            kind = "rgb"
        path = os.path.join(d, f"img_{i:06d}.jpg")
        im.save(path, "JPEG", **opts)
        kinds[kind] += 1
        total += os.path.getsize(path)
    print(f"make-sample: {a.n} JPEGs in {a.classes} classes under {a.out}/train "
          f"({total / 1e6:.1f} MB, mean {total / max(a.n, 1) / 1e3:.1f} KB; "
          + ", ".join(f"{k} {v}" for k, v in kinds.items()) + ")")


if __name__ == "__main__":
    main()
