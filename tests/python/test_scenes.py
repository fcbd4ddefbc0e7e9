# SPDX-License-Identifier: Apache-2.0
"""bench/scenes.py: the truth of the generated scenes. Every shape's visible pixels are
where its geometry says (checked against the geometry itself, not the painter), the mask
holds the class of the shape seen at each pixel and 0 elsewhere, each box is the exact
bounds of its shape's visible pixels, wholly covered shapes have no box, the caption names
the visible shapes; the written folder agrees with it; and the output is a function of the
seed alone (not of the number of processes)."""
import io
import json
import os
import sys

import numpy as np
import pytest
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench"))
import scenes  # noqa: E402

TOL = 1.5  # pixels: how far a rasterised edge may lie from the exact one


@pytest.fixture(scope="module")
def photo_dir(tmp_path_factory):
    """Two small 'photographs' (textured, so that a crop of them is not flat)."""
    d = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(7)
    for i, (w, h) in enumerate([(640, 480), (500, 700)]):
        yy, xx = np.mgrid[0:h, 0:w]
        base = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) * 255 // (w + h)], -1)
        img = (base + rng.integers(0, 40, (h, w, 3))).clip(0, 255).astype(np.uint8)
        Image.fromarray(img).save(d / ("p%d.jpg" % i), quality=92)
    (d / "notes.txt").write_text("not a photograph")
    return str(d)


@pytest.fixture(scope="module")
def photos(photo_dir):
    return scenes.load_photos(scenes.photographs(photo_dir))


def inside(shape, h, w, grow):
    """Pixels whose centre lies within the shape's exact outline moved out by `grow` pixels
    (inwards when negative)."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    g = shape["geometry"]
    if shape["kind"] == "rectangle":  # PIL fills the inclusive pixel range x0..x1
        x0, y0, x1, y1 = g
        return ((xx >= x0 - grow) & (xx <= x1 + grow) & (yy >= y0 - grow) & (yy <= y1 + grow))
    if shape["kind"] == "ellipse":  # the ellipse inscribed in the pixels x0..x1, y0..y1
        x0, y0, x1, y1 = g
        cx, cy = (x0 + x1 + 1) / 2, (y0 + y1 + 1) / 2
        rx, ry = (x1 + 1 - x0) / 2 + grow, (y1 + 1 - y0) / 2 + grow
        if rx <= 0 or ry <= 0:
            return np.zeros((h, w), bool)
        return ((xx + 0.5 - cx) / rx) ** 2 + ((yy + 0.5 - cy) / ry) ** 2 <= 1
    pts = np.array(g, np.float64).reshape(3, 2)  # vertices at pixel centres
    area2 = np.cross(pts[1] - pts[0], pts[2] - pts[0])
    if area2 == 0:
        if grow < 0:  # a degenerate triangle: a segment, nothing surely within it
            return np.zeros((h, w), bool)
        lo, hi = pts.min(0) - grow, pts.max(0) + grow
        return (xx >= lo[0]) & (xx <= hi[0]) & (yy >= lo[1]) & (yy <= hi[1])
    sign = 1 if area2 > 0 else -1
    ok = np.ones((h, w), bool)
    for a, b in ((pts[0], pts[1]), (pts[1], pts[2]), (pts[2], pts[0])):
        e = b - a
        dist = sign * (e[0] * (yy - a[1]) - e[1] * (xx - a[0])) / np.hypot(*e)
        ok &= dist >= -grow
    return ok


def check_scene(s, classes):
    inst, mask, img = s["instances"], s["mask"], s["image"]
    h, w = mask.shape
    assert img.shape == (h, w, 3) and img.dtype == np.uint8 and mask.dtype == np.uint8
    shapes = s["shapes"]
    maybe = [inside(sh, h, w, TOL) for sh in shapes]
    surely = [inside(sh, h, w, -TOL) for sh in shapes]
    kept = 0
    for j, sh in enumerate(shapes):
        assert 1 <= sh["class"] <= classes
        vis = inst == j + 1
        later = np.zeros((h, w), bool)
        for m in maybe[j + 1:]:
            later |= m
        # its visible pixels lie within its outline, and every pixel surely within it that
        # no later shape can reach shows it
        assert not (vis & ~maybe[j]).any(), "shape %d seen outside its outline" % j
        assert not (surely[j] & ~later & ~vis).any(), "shape %d hidden where it shows" % j
        # what it shows: its class in the mask, its colour in the image
        assert (mask[vis] == sh["class"]).all()
        assert (img[vis] == scenes.class_shape(sh["class"])[2]).all()
        ys, xs = np.nonzero(vis)
        if xs.size == 0:
            continue  # wholly covered: no box
        box = s["boxes"][kept]
        assert box.tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], (j, box)
        assert s["classes"][kept] == sh["class"]
        assert s["visible"][kept] == xs.size
        kept += 1
    assert kept == len(s["boxes"]) == len(s["classes"])
    assert s["boxes"].dtype == np.float32 and s["classes"].dtype == np.int64
    # background: no shape can reach it, and it is 0 in the mask
    anywhere = np.zeros((h, w), bool)
    for m in maybe:
        anywhere |= m
    assert not (mask[~anywhere]).any()
    assert ((mask > 0) == (inst > 0)).all()
    # the caption names the visible shapes in drawing order
    words = [scenes.VOCAB[t] for t in s["tokens"]]
    assert words[0] == "<bos>" and words[-1] == "<eos>"
    named = [tuple(words[1 + 3 * i: 4 + 3 * i]) for i in range(kept)]
    assert named == [("a", scenes.class_shape(k)[1], scenes.class_shape(k)[0])
                     for k in s["classes"]]
    assert len(words) == 2 + 3 * kept
    if kept:
        assert s["label"] == s["classes"][int(np.argmax(s["visible"]))]
    return kept, len(shapes) - kept


def test_truth_of_generated_scenes(photos):
    boxes = hidden = 0
    kinds = set()
    for i in range(40):
        s = scenes.make_scene(scenes.scene_rng(3, i), photos, classes=12, min_side=40,
                              max_side=120, max_shapes=8)
        b, hd = check_scene(s, 12)
        boxes += b
        hidden += hd
        kinds |= {sh["kind"] for sh in s["shapes"]}
        assert 40 <= min(s["mask"].shape) and max(s["mask"].shape) <= 120
    assert kinds == set(scenes.SHAPES)
    assert boxes > 80 and hidden > 0  # the checks met overlapping and covered shapes


def test_truth_at_bench_sizes(photos):
    for i in range(3):
        s = scenes.make_scene(scenes.scene_rng(11, i), photos, classes=30, min_side=320,
                              max_side=800, max_shapes=8)
        check_scene(s, 30)


def run(photo_dir, out, seed=0, jobs=2, n=6):
    return scenes.main(["--src", photo_dir, "--out", str(out), "--n", str(n), "--seed",
                        str(seed), "--min-side", "48", "--max-side", "96", "--jobs", str(jobs),
                        "--classes", "9"])


def tree(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, d)] = fh.read()
    return out


def test_folder_agrees_with_the_truth(photo_dir, tmp_path):
    assert run(photo_dir, tmp_path / "a") == 0
    d = tmp_path / "a"
    lines = [json.loads(x) for x in (d / "samples.jsonl").read_text().splitlines()]
    coco = json.loads((d / "annotations.json").read_text())
    vocab = json.loads((d / "vocab.json").read_text())
    assert len(lines) == 6 and len(coco["images"]) == 6
    assert [c["id"] for c in coco["categories"]] == list(range(1, 10))
    assert vocab["tokens"] == list(scenes.VOCAB) and len(vocab["classes"]) == 10
    photos = scenes.load_photos(scenes.photographs(photo_dir))
    for i, rec in enumerate(lines):
        s = scenes.make_scene(scenes.scene_rng(0, i), photos, 9, 48, 96, 8)
        mask = np.array(Image.open(d / rec["mask"]))
        assert mask.dtype == np.uint8 and (mask == s["mask"]).all()  # PNG: lossless
        jpg = np.array(Image.open(d / rec["image"]).convert("RGB"))
        assert jpg.shape == s["image"].shape
        assert np.abs(jpg.astype(int) - s["image"]).mean() < 8  # the same picture, as JPEG
        assert rec["boxes"] == s["boxes"].astype(int).tolist()
        assert rec["classes"] == s["classes"].tolist() and rec["tokens"] == s["tokens"].tolist()
        assert (rec["width"], rec["height"]) == (mask.shape[1], mask.shape[0])
        # from the files alone: each box touches its class's pixels on all four sides
        for (x1, y1, x2, y2), k in zip(rec["boxes"], rec["classes"]):
            assert 0 <= x1 < x2 <= mask.shape[1] and 0 <= y1 < y2 <= mask.shape[0]
            inner = mask[y1:y2, x1:x2] == k
            assert inner[0].any() and inner[-1].any() and inner[:, 0].any() and \
                inner[:, -1].any()
        anns = [a for a in coco["annotations"] if a["image_id"] == i]
        assert [[a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2],
                 a["bbox"][1] + a["bbox"][3]] for a in anns] == rec["boxes"]
        assert [a["category_id"] for a in anns] == rec["classes"]
        assert [a["area"] for a in anns] == s["visible"]


def test_deterministic_whatever_the_processes(photo_dir, tmp_path):
    run(photo_dir, tmp_path / "a", seed=5, jobs=2)
    run(photo_dir, tmp_path / "b", seed=5, jobs=1)
    run(photo_dir, tmp_path / "c", seed=6, jobs=2)
    a, b, c = (tree(tmp_path / x) for x in "abc")
    assert a == b
    assert sorted(a) == sorted(c) and a["samples.jsonl"] != c["samples.jsonl"]


def test_refuses_to_replace_what_is_not_its_own(photo_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit, match="holds no scenes"):
        scenes.main(["--src", photo_dir, "--out", str(other), "--n", "1", "--force"])
    assert (other / "keep.txt").read_text() == "mine"
    with pytest.raises(SystemExit, match="exists"):
        scenes.main(["--src", photo_dir, "--out", str(other), "--n", "1"])
    with pytest.raises(SystemExit, match="no JPEG photographs"):
        scenes.main(["--src", str(other), "--out", str(tmp_path / "x"), "--n", "1"])
    assert not (tmp_path / "x").exists()


def test_encode_round_trip(photos):
    s = scenes.make_scene(scenes.scene_rng(1, 0), photos, 12, 64, 64, 3)
    jpg, png = scenes.encode(s, 90)
    assert jpg[:2] == b"\xff\xd8" and png[:8] == b"\x89PNG\r\n\x1a\n"
    m = Image.open(io.BytesIO(png))
    assert m.mode == "L" and (np.array(m) == s["mask"]).all()
