#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Scenes cut from real photographs with shapes drawn at known places: image, mask, boxes,
class ids and a caption's token ids, every one of them exact.

    scenes.py --src PHOTOS --out DIR [--n 2000] [--classes 12] [--seed 0] [--min-side 320]
              [--max-side 800] [--max-shapes 8] [--quality 90] [--jobs J]
              [--stoker DS] [--force]

Each scene is a random crop of one of the JPEG photographs under PHOTOS (Debian's
mate-backgrounds, /usr/share/backgrounds/mate, by default), resized to sides drawn from
--min-side .. --max-side, with 1 .. --max-shapes shapes painted on it in drawing order (a
later shape covers an earlier one). A shape is a filled rectangle, ellipse or triangle in
one solid colour; its class (1 .. --classes) names both: class k is shape SHAPES[(k-1) % 3]
in colour COLOURS[(k-1) // 3] ("red rectangle", "red ellipse", "red triangle", "green
rectangle", ...). The truth, computed from the painted pixels themselves:

    mask     uint8 label map the image's size: 0 background, else the class of the shape
             visible at that pixel (a gray PNG)
    boxes    float32 [N, 4] xyxy in pixels, the exact bounds of each shape's VISIBLE pixels
             (pixel (x, y) spans [x, x+1) x [y, y+1)); a shape wholly covered is left out
    classes  int64 [N], one per box
    tokens   int64 [T]: the caption "<bos> a red ellipse a blue triangle ... <eos>" (the
             visible shapes in drawing order) in the ids of VOCAB
    label    int64: the class of the shape with the most visible pixels

Written to DIR (for PyTorch's DataLoader and any other reader):

    DIR/images/NNNNNN.jpg, DIR/masks/NNNNNN.png
    DIR/samples.jsonl       one sample a line: {"image": "images/...jpg", "mask": "masks/...png",
                            "boxes": [[x1, y1, x2, y2], ...], "classes": [...], "tokens": [...],
                            "label": L, "caption": "..."}, paths relative to DIR
    DIR/annotations.json    COCO-style instances: images, annotations (bbox [x, y, w, h],
                            area = visible pixels, category_id), categories
    DIR/vocab.json          the token vocabulary and the class names

and with --stoker DS, the same samples as a stoker data set of the fields image (jpeg),
mask (png, mask_of image), boxes (array float32 [N, 4], boxes_of image), classes (array
int64, rows_of boxes), tokens (array int64) and label (int64).

Deterministic: scene i depends on (--seed, i) and the photographs alone, whatever --jobs.
Needs numpy and Pillow (and the stoker binding for --stoker).
"""
import argparse
import io
import json
import multiprocessing
import os
import shutil
import sys

import numpy as np
from PIL import Image, ImageDraw

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_SRC = "/usr/share/backgrounds/mate"
SHAPES = ("rectangle", "ellipse", "triangle")
COLOURS = (("red", (220, 30, 30)), ("green", (30, 180, 40)), ("blue", (30, 60, 220)),
           ("yellow", (240, 220, 20)), ("cyan", (20, 210, 220)), ("magenta", (210, 30, 200)),
           ("white", (250, 250, 250)), ("black", (5, 5, 5)), ("orange", (250, 140, 10)),
           ("purple", (120, 40, 160)))
MAX_CLASSES = len(SHAPES) * len(COLOURS)
VOCAB = ("<pad>", "<bos>", "<eos>", "a") + tuple(c for c, _ in COLOURS) + SHAPES
TOKEN = {w: i for i, w in enumerate(VOCAB)}
PHOTO_MAX_SIDE = 2400  # sources are shrunk to this first: memory, and the same for any job


def class_shape(k):
    """Class k (1 .. MAX_CLASSES): (shape name, colour name, RGB)."""
    name, rgb = COLOURS[(k - 1) // len(SHAPES)]
    return SHAPES[(k - 1) % len(SHAPES)], name, rgb


def class_names(classes):
    return ["%s %s" % (class_shape(k)[1], class_shape(k)[0]) for k in range(1, classes + 1)]


def photographs(src):
    found = []
    for root, _, files in os.walk(src):
        found += [os.path.join(root, f) for f in files if f.lower().endswith((".jpg", ".jpeg"))]
    return sorted(found)


def load_photos(paths):
    photos = []
    for p in paths:
        with Image.open(p) as im:
            im = im.convert("RGB")
        im.thumbnail((PHOTO_MAX_SIDE, PHOTO_MAX_SIDE), Image.BILINEAR)
        photos.append(im)
    return photos


def draw_shape(kind, geom, size):
    """The shape's pixels: a bool [h, w] array, as PIL fills it (no antialiasing)."""
    w, h = size
    layer = Image.new("L", (w, h), 0)
    d = ImageDraw.Draw(layer)
    if kind == "rectangle":
        d.rectangle(geom, fill=255)
    elif kind == "ellipse":
        d.ellipse(geom, fill=255)
    else:
        d.polygon([tuple(p) for p in np.reshape(geom, (3, 2))], fill=255)
    return np.asarray(layer) > 0


def shape_geometry(rng, kind, w, h):
    """A shape's parameters in pixels: [x0, y0, x1, y1] (inclusive corners, as PIL takes them)
    for rectangles and ellipses, three vertices [x, y, ...] for triangles. Sides 6% .. 45% of
    the scene's shorter side; it may reach past the border (then it is clipped)."""
    short = min(w, h)
    bw, bh = (int(v) for v in rng.integers(max(4, int(0.06 * short)), int(0.45 * short) + 1, 2))
    x0 = int(rng.integers(-bw // 4, w - 3 * bw // 4))
    y0 = int(rng.integers(-bh // 4, h - 3 * bh // 4))
    if kind != "triangle":
        return [x0, y0, x0 + bw - 1, y0 + bh - 1]
    pts = [x0 + int(rng.integers(0, bw)), y0,  # apex on the top edge, base corners below
           x0, y0 + bh - 1, x0 + bw - 1, y0 + bh - 1 - int(rng.integers(0, bh // 3 + 1))]
    return pts


def make_scene(rng, photos, classes=12, min_side=320, max_side=800, max_shapes=8):
    """One scene: {"image": uint8 [h, w, 3] (before JPEG), "instances": int16 [h, w] (0, or
    1 + the index of the shape drawn there, in `shapes`), "mask", "boxes", "classes",
    "tokens", "label", "caption", "shapes": every shape drawn, visible or not}."""
    w, h = (int(v) for v in rng.integers(min_side, max_side + 1, 2))
    photo = photos[int(rng.integers(len(photos)))]
    pw, ph = photo.size
    # a crop with the scene's aspect ratio, 30-100% of what fits, resized to (w, h)
    fit = min(pw / w, ph / h)
    f = fit * rng.uniform(0.3, 1.0)
    cw, ch = max(1, int(w * f)), max(1, int(h * f))
    cx, cy = int(rng.integers(0, pw - cw + 1)), int(rng.integers(0, ph - ch + 1))
    img = np.array(photo.resize((w, h), Image.BILINEAR, box=(cx, cy, cx + cw, cy + ch)))
    if rng.random() < 0.5:
        img = img[:, ::-1].copy()
    inst = np.zeros((h, w), np.int16)
    shapes = []
    for j in range(int(rng.integers(1, max_shapes + 1))):
        k = int(rng.integers(1, classes + 1))
        kind, _, rgb = class_shape(k)
        geom = shape_geometry(rng, kind, w, h)
        inst[draw_shape(kind, geom, (w, h))] = j + 1
        shapes.append({"class": k, "kind": kind, "geometry": geom})
    lut = np.array([0] + [s["class"] for s in shapes], np.uint8)
    mask = lut[inst]
    colours = np.array([(0, 0, 0)] + [class_shape(s["class"])[2] for s in shapes], np.uint8)
    covered = inst > 0
    img[covered] = colours[inst[covered]]
    boxes, cls, visible = [], [], []
    for j, s in enumerate(shapes):
        ys, xs = np.nonzero(inst == j + 1)
        if xs.size == 0:  # wholly covered by later shapes
            continue
        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
        cls.append(s["class"])
        visible.append(xs.size)
    words = ["<bos>"]
    for k in cls:
        kind, colour, _ = class_shape(k)
        words += ["a", colour, kind]
    words.append("<eos>")
    return {"image": img, "instances": inst, "mask": mask,
            "boxes": np.array(boxes, np.float32).reshape(-1, 4),
            "classes": np.array(cls, np.int64), "visible": visible,
            "tokens": np.array([TOKEN[t] for t in words], np.int64),
            "caption": " ".join(words[1:-1]),
            "label": int(cls[int(np.argmax(visible))]) if cls else 0, "shapes": shapes}


def encode(scene, quality):
    """The scene's JPEG and PNG bytes."""
    jpg, png = io.BytesIO(), io.BytesIO()
    Image.fromarray(scene["image"]).save(jpg, "JPEG", quality=quality)
    Image.fromarray(scene["mask"], "L").save(png, "PNG", optimize=False)
    return jpg.getvalue(), png.getvalue()


def scene_rng(seed, i):
    return np.random.default_rng(np.random.SeedSequence([seed, i]))


_photos = None


def _init(paths):
    global _photos
    _photos = load_photos(paths)


def _one(job):
    i, a = job
    s = make_scene(scene_rng(a["seed"], i), _photos, a["classes"], a["min_side"],
                   a["max_side"], a["max_shapes"])
    jpg, png = encode(s, a["quality"])
    h, w = s["mask"].shape
    return {"i": i, "jpg": jpg, "png": png, "w": w, "h": h, "boxes": s["boxes"],
            "classes": s["classes"], "visible": s["visible"], "tokens": s["tokens"],
            "label": s["label"], "caption": s["caption"]}


def import_stoker():
    path = os.path.join(ROOT, "python")
    if os.path.isdir(os.path.join(path, "stoker")) and path not in sys.path:
        sys.path.insert(0, path)
    import stoker
    return stoker


SCHEMA = {"image": "jpeg",
          "mask": {"kind": "png", "mask_of": "image"},
          "boxes": {"kind": "array", "dtype": "float32", "shape": (None, 4),
                    "boxes_of": "image"},
          "classes": {"kind": "array", "dtype": "int64", "shape": (None,),
                      "rows_of": "boxes"},
          "tokens": {"kind": "array", "dtype": "int64", "shape": (None,)},
          "label": "int64"}


def generate(a):
    """Writes the folder (and the stoker data set); returns counts for the summary."""
    paths = photographs(a.src)
    if not paths:
        raise SystemExit("scenes.py: no JPEG photographs under %s (Debian: apt-get install "
                         "mate-backgrounds)" % a.src)
    out = os.path.abspath(a.out)
    if os.path.exists(out):  # replaced only once the new scenes are complete
        if not a.force:
            raise SystemExit("scenes.py: %s exists (--force replaces it)" % out)
        if not os.path.isfile(os.path.join(out, "samples.jsonl")):
            raise SystemExit("scenes.py: %s exists and holds no scenes (samples.jsonl); "
                             "not replaced" % out)
    tmp = out + ".tmp-scenes"
    shutil.rmtree(tmp, ignore_errors=True)
    names = class_names(a.classes)
    coco = {"images": [], "annotations": [],
            "categories": [{"id": k, "name": names[k - 1], "supercategory": class_shape(k)[0]}
                           for k in range(1, a.classes + 1)]}
    opts = {k: getattr(a, k) for k in ("seed", "classes", "min_side", "max_side",
                                       "max_shapes", "quality")}
    jobs = [(i, opts) for i in range(a.n)]
    count = {"scenes": 0, "boxes": 0, "jpeg_bytes": 0, "png_bytes": 0, "empty": 0}
    writer = None
    try:
        os.makedirs(os.path.join(tmp, "images"))
        os.makedirs(os.path.join(tmp, "masks"))
        if a.stoker:
            # the JPEGs are libjpeg's own encodes (Pillow's, below): checked by construction,
            # as stoker-pack marks the images it encodes, so decoder "auto" may send them to
            # the GPU's hardware decoder
            writer = import_stoker().Writer(a.stoker, fields=SCHEMA, overwrite=a.force,
                                            jpeg_checked=True)
        with multiprocessing.Pool(max(1, a.jobs), _init, (paths,)) as pool, \
                open(os.path.join(tmp, "samples.jsonl"), "w") as jl:
            for r in pool.imap(_one, jobs, chunksize=4):  # in order: deterministic output
                name = "%06d" % r["i"]
                img, msk = "images/%s.jpg" % name, "masks/%s.png" % name
                with open(os.path.join(tmp, img), "wb") as f:
                    f.write(r["jpg"])
                with open(os.path.join(tmp, msk), "wb") as f:
                    f.write(r["png"])
                boxes = r["boxes"].astype(int).tolist()
                jl.write(json.dumps({"image": img, "mask": msk, "boxes": boxes,
                                     "classes": r["classes"].tolist(),
                                     "tokens": r["tokens"].tolist(), "label": r["label"],
                                     "caption": r["caption"], "width": r["w"],
                                     "height": r["h"]}) + "\n")
                coco["images"].append({"id": r["i"], "file_name": img, "mask": msk,
                                       "width": r["w"], "height": r["h"]})
                for b, k, v in zip(boxes, r["classes"].tolist(), r["visible"]):
                    coco["annotations"].append({
                        "id": len(coco["annotations"]) + 1, "image_id": r["i"],
                        "category_id": k, "bbox": [b[0], b[1], b[2] - b[0], b[3] - b[1]],
                        "area": v, "iscrowd": 0})
                if writer is not None:
                    writer.add({"image": r["jpg"], "mask": r["png"], "boxes": r["boxes"],
                                "classes": r["classes"], "tokens": r["tokens"],
                                "label": r["label"]})
                count["scenes"] += 1
                count["boxes"] += len(boxes)
                count["empty"] += not boxes
                count["jpeg_bytes"] += len(r["jpg"])
                count["png_bytes"] += len(r["png"])
        with open(os.path.join(tmp, "annotations.json"), "w") as f:
            json.dump(coco, f)
        with open(os.path.join(tmp, "vocab.json"), "w") as f:
            json.dump({"tokens": list(VOCAB), "classes": ["background"] + names,
                       "seed": a.seed, "n": a.n}, f, indent=1)
        if writer is not None:
            writer.finish()
            writer = None
        shutil.rmtree(out, ignore_errors=True)
        os.replace(tmp, out)
    finally:
        if writer is not None:
            writer.close()  # unfinished: the writer leaves no data set behind
        shutil.rmtree(tmp, ignore_errors=True)
    return count


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--src", default=DEFAULT_SRC, help="folder of JPEG photographs")
    p.add_argument("--out", required=True, help="the folder to write")
    p.add_argument("--n", type=int, default=2000, help="scenes (default 2000)")
    p.add_argument("--classes", type=int, default=12,
                   help="shape classes, 1 .. %d (default 12)" % MAX_CLASSES)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-side", type=int, default=320)
    p.add_argument("--max-side", type=int, default=800)
    p.add_argument("--max-shapes", type=int, default=8)
    p.add_argument("--quality", type=int, default=90, help="JPEG quality (default 90)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--stoker", metavar="DS", help="also write a stoker data set of fields")
    p.add_argument("--force", action="store_true",
                   help="replace earlier output (scenes, or a stoker data set)")
    a = p.parse_args(argv)
    if a.n < 1 or not 1 <= a.classes <= MAX_CLASSES or a.max_shapes < 1:
        p.error("--n and --max-shapes must be positive, --classes 1 .. %d" % MAX_CLASSES)
    if not 16 <= a.min_side <= a.max_side:
        p.error("--min-side must be at least 16 and at most --max-side")
    return a


def main(argv):
    a = parse_args(argv)
    c = generate(a)
    print("scenes: %d scenes under %s (%d boxes, %.1f per scene, %d without any; JPEG mean "
          "%.1f KB, PNG mean %.1f KB)%s" % (
              c["scenes"], a.out, c["boxes"], c["boxes"] / c["scenes"], c["empty"],
              c["jpeg_bytes"] / c["scenes"] / 1e3, c["png_bytes"] / c["scenes"] / 1e3,
              "; stoker data set %s" % a.stoker if a.stoker else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
