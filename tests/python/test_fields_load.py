# SPDX-License-Identifier: Apache-2.0
"""Loading samples of several fields (docs/SEMANTICS.md "Samples with several fields").

Geometry is checked on generated scenes: filled rectangles and ellipses of saturated
colours, one class id each, drawn at known places on a grey textured background (JPEG
quality 95), with a gray PNG mask of the class ids and the exact pixel bounds of each shape
as its box. Under the train transform (two seeds, two epochs, vertical flips too) and eval:

- the image agrees with the mask: where the mask (eroded by one pixel) says class c, the
  image shows c's colour, and where it says background, no shape's colour;
- every class seen in the mask keeps its box and class row, the rows paired (each class id
  is distinct in its sample), every kept box bounds its shape's mask pixels within one
  pixel (a rectangle's box is also tight within one pixel), a kept rectangle box at least a
  pixel wide and high shows its shape, and a dropped box's shape is not in the mask.

Equality with torchvision: each scene also carries two masks that encode the source
coordinates, "mx" (a pixel's value is its column) and "my" (its row), tied to the image
like the class mask. The delivered mx/my give, for every output pixel, the source pixel
the library took. The crop box (top, left, h, w) and the flips are recovered from them:
the flips from their direction, left/top from the first (unflipped) column/row, w/h as
the span whose torch "nearest" source indices (interpolate of an arange) reproduce the
delivered row/column exactly; such a span must exist and be a RandomResizedCrop box
(scale 0.08-1, ratio 3/4-4/3, rounded). Then the class mask, mx and my must each equal
torchvision's resized_crop(mask, top, left, h, w, [C, C], NEAREST), flipped alike, and
the delivered image must be Pillow's bilinear resize of that same box within JPEG-decoder
rounding. For eval, resize(NEAREST, S) then center_crop(C) is compared directly.

Besides: ragged and dense fields against what was written, in shuffled order; fields=
selection and its refusals; a corrupt record replaced whole under on_corrupt="skip" and
named with its field under "error"; resume, ranks and HTTP give the same samples; the
transform none gives the written image bytes; a data set without a schema unpacks as
data and labels.
"""
import io
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest

import conftest as h
import stoker

PIL = pytest.importorskip("PIL.Image")
from PIL import ImageDraw  # noqa: E402

torch = pytest.importorskip("torch")
TF = pytest.importorskip("torchvision.transforms.functional")
from torchvision.transforms import InterpolationMode  # noqa: E402

REMOTE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "remote")
sys.path.insert(0, REMOTE)
import range_server  # noqa: E402

C = 40  # the crop
S = 46  # eval's short side
N_SCENES = 24
PALETTE = {1: (230, 20, 20), 2: (20, 200, 20), 3: (20, 20, 230), 4: (230, 230, 20),
           5: (230, 20, 230), 6: (20, 220, 220)}
SCENE_FIELDS = {
    "image": "jpeg",
    "mask": {"kind": "png", "mask_of": "image"},
    "mx": {"kind": "png", "mask_of": "image"},
    "my": {"kind": "png", "mask_of": "image"},
    "boxes": {"kind": "array", "dtype": "float32", "shape": (None, 4), "boxes_of": "image"},
    "classes": {"kind": "array", "dtype": "int64", "shape": (None,), "rows_of": "boxes"},
    "label": "int64",
}


def encode(arr, fmt, **kw):
    out = io.BytesIO()
    PIL.fromarray(arr).save(out, format=fmt, **kw)
    return out.getvalue()


def scene(i):
    """Scene i: its sample (as written) and its shapes [(class, is_rectangle)]."""
    rng = np.random.default_rng(500 + i)
    w = int(rng.integers(40, 250))
    h_ = int(rng.integers(36, 200))
    yy, xx = np.mgrid[0:h_, 0:w]
    grey = 125 + 45 * np.sin(xx / (5.0 + i % 5)) * np.cos(yy / (7.0 + i % 3))
    grey = grey[..., None] + rng.normal(0, 5, (h_, w, 3))
    img = PIL.fromarray(np.clip(grey, 60, 190).astype(np.uint8))
    mask = PIL.new("L", (w, h_), 0)
    di, dm = ImageDraw.Draw(img), ImageDraw.Draw(mask)
    n = i % 5  # 0 to 4 shapes, one per quarter of the image (no overlap)
    classes = [int(c) + 1 for c in rng.permutation(6)[:n]]
    shapes, boxes = [], []
    for k, c in enumerate(classes):
        qx0, qy0 = (k % 2) * (w // 2), (k // 2) * (h_ // 2)
        qw, qh = w // 2, h_ // 2
        sw = int(rng.integers(max(3, qw // 3), qw - 1))
        sh = int(rng.integers(max(3, qh // 3), qh - 1))
        x0 = qx0 + int(rng.integers(0, qw - sw))
        y0 = qy0 + int(rng.integers(0, qh - sh))
        rect = (i + k) % 2 == 0
        xy = [x0, y0, x0 + sw - 1, y0 + sh - 1]
        (di.rectangle if rect else di.ellipse)(xy, fill=PALETTE[c])
        (dm.rectangle if rect else dm.ellipse)(xy, fill=c)
        shapes.append((c, rect))
    m = np.asarray(mask)
    for c in classes:
        ys, xs = np.nonzero(m == c)
        boxes.append([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1])
    xmap = np.tile(np.arange(w, dtype=np.uint8), (h_, 1))
    ymap = np.tile(np.arange(h_, dtype=np.uint8)[:, None], (1, w))
    sample = {"image": encode(np.asarray(img), "JPEG", quality=95, subsampling=0),
              "mask": encode(m, "PNG"), "mx": encode(xmap, "PNG"), "my": encode(ymap, "PNG"),
              "boxes": np.array(boxes, dtype=np.float32).reshape(-1, 4),
              "classes": np.array(classes, dtype=np.int64), "label": 100 + i}
    return sample, shapes, m


SCENES = [scene(i) for i in range(N_SCENES)]


@pytest.fixture(scope="module")
def scenes_ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("served")
    path = root / "scenes"
    with stoker.Writer(path, fields=SCENE_FIELDS, fsync=False, shard_size=64 * 1024) as w:
        for s, _, _ in SCENES:
            w.add(s)
    return path


def deliveries(loader):
    """Every delivered sample of one epoch: a dict of numpy arrays per field, with its id."""
    out = []
    for b in loader:
        got = {k: b[k] for k in b.keys()}
        dense = {k: np.from_dlpack(v).copy() for k, v in got.items()
                 if not isinstance(v, stoker.RaggedField)}
        for j in range(b.count):
            d = {"id": int(b.indices[j]), "label_of_batch": int(b.labels[j])}
            for k, v in got.items():
                if isinstance(v, stoker.RaggedField):
                    d[k] = np.asarray(v[j]).copy()
                else:
                    d[k] = dense[k][j]
            out.append(d)
    return out


def loader(path, **kw):
    opts = dict(batch_size=5, device="cpu", size=C, seed=3, dtype="uint8",
                mean=(0, 0, 0), std=(1, 1, 1), threads=2)
    opts.update(kw)
    return stoker.Loader(str(path), **opts)


def interior(m, bx, by):
    """Pixels whose neighbours up to bx columns and by rows away hold their own value (the
    output's edges count as unknown: the image there is made of source pixels beyond)."""
    p = np.pad(m, ((by, by), (bx, bx)), constant_values=255)
    ok = np.ones(m.shape, dtype=bool)
    for dy in range(2 * by + 1):
        for dx in range(2 * bx + 1):
            ok &= p[dy:dy + m.shape[0], dx:dx + m.shape[1]] == m
    return ok


def border(scale):
    """How far a mask's edge may lie from the image's, in output pixels, for an axis
    enlarged `scale` times: a pixel, plus the half-pixel convention's (scale - 1) / 2
    (nearest takes a pixel's left source, bilinear its centre)."""
    return 1 + int(np.ceil(max(0.0, (scale - 1) / 2)))


def check_geometry(d, counts, scale):
    """scale: (x, y) enlargement of the sample's crop (output / source pixels)."""
    i = d["id"]
    _, shapes, _ = SCENES[i]
    img = d["image"].transpose(1, 2, 0).astype(np.int32)
    m, boxes, classes = d["mask"], d["boxes"], d["classes"]
    assert m.shape == (C, C) and img.shape == (C, C, 3)
    assert boxes.shape == (len(classes), 4) and boxes.dtype == np.float32
    written = [c for c, _ in shapes]
    # the rows follow the boxes: a subsequence of the written classes
    assert [c for c in written if c in classes.tolist()] == classes.tolist(), (i, classes)
    palette = np.array([PALETTE[c] for c in sorted(PALETTE)], dtype=np.int32)
    dist = np.abs(img[:, :, None, :] - palette[None, None]).max(axis=3)  # C x C x 6
    inner = interior(m, border(scale[0]), border(scale[1]))
    bg = inner & (m == 0)
    assert (dist[bg].min(axis=1) > 50).all() if bg.any() else True, i
    for c in np.unique(m):
        if c == 0:
            continue
        assert c in written, (i, c)
        sel = inner & (m == c)
        if sel.any():
            assert (dist[sel][:, c - 1] < 70).all(), (i, c)
            assert (dist[sel].argmin(axis=1) == c - 1).all(), (i, c)
        # a class seen keeps its box, which bounds its pixels within a pixel
        assert c in classes, ("box of a visible shape dropped", i, c)
    assert ((boxes >= 0) & (boxes <= C)).all(), (i, boxes)
    for r, c in enumerate(classes.tolist()):
        x1, y1, x2, y2 = boxes[r].tolist()
        assert x2 > x1 and y2 > y1, (i, boxes[r])
        ys, xs = np.nonzero(m == c)
        rect = dict(shapes)[c]
        if not len(xs):
            assert not (rect and x2 - x1 >= 1.01 and y2 - y1 >= 1.01), \
                ("a kept rectangle of a pixel or more shows nothing", i, c, boxes[r])
            continue
        counts["kept"] += 1
        assert xs.min() >= x1 - 1 and xs.max() + 1 <= x2 + 1, (i, c, boxes[r], xs.min(), xs.max())
        assert ys.min() >= y1 - 1 and ys.max() + 1 <= y2 + 1, (i, c, boxes[r], ys.min(), ys.max())
        if rect:
            assert abs(xs.min() - x1) <= 1 and abs(xs.max() + 1 - x2) <= 1, (i, c, boxes[r])
            assert abs(ys.min() - y1) <= 1 and abs(ys.max() + 1 - y2) <= 1, (i, c, boxes[r])
    for c in written:
        if c not in classes:
            counts["dropped"] += 1
            assert c not in m, (i, c)


def scale_of(d, transform):
    hh_, ww_ = SCENES[d["id"]][2].shape
    if transform == "eval":
        return (S / min(ww_, hh_),) * 2
    if transform == "letterbox":
        return (C / max(ww_, hh_),) * 2
    return (C / recover_span(d["mx"][0], ww_)[1], C / recover_span(d["my"][:, 0], hh_)[1])


@pytest.mark.parametrize("kw", [dict(seed=3, epochs=2), dict(seed=11, vflip=0.5, epochs=1),
                                dict(seed=7, scale=(0.3, 0.6), ratio=(1.2, 1.6), epochs=1),
                                dict(seed=9, hflip=0, vflip=1.0, epochs=1),
                                dict(transform="eval", resize=S, epochs=1),
                                dict(transform="letterbox", epochs=1)],
                         ids=["train", "train-vflip", "train-ranges", "train-no-hflip",
                              "eval", "letterbox"])
def test_masks_and_boxes_agree_with_the_image(scenes_ds, kw):
    kw = dict(kw)
    epochs = kw.pop("epochs")
    counts = {"kept": 0, "dropped": 0}
    L = loader(scenes_ds, **kw)
    seen = 0
    for _ in range(epochs):
        for d in deliveries(L):
            assert d["label"] == 100 + d["id"] == d["label_of_batch"]
            check_geometry(d, counts, scale_of(d, kw.get("transform")))
            if kw.get("hflip") == 0:  # the coordinate masks show the flips: none, and all
                assert d["mx"][0, 0] <= d["mx"][0, -1] and d["my"][0, 0] > d["my"][-1, 0]
            seen += 1
    assert seen == epochs * N_SCENES
    assert counts["kept"] > 10, counts
    if kw.get("transform") not in ("eval", "letterbox"):
        assert counts["dropped"] > 0, counts


# torch's "nearest" source indices of a resize of n pixels to C, for every n a scene has
_NEAREST = {n: torch.nn.functional.interpolate(
    torch.arange(n, dtype=torch.float32).view(1, 1, n), size=C, mode="nearest")[0, 0]
    .long().numpy() for n in range(1, 256)}


def recover_spans(line, limit):
    """(first, lengths, flipped) of the crop along one axis from the delivered source
    coordinates `line` (C values): every span length whose torch nearest indices give them
    (several can: a span of 40 or 41 pixels resized to 40 reads the same 40 pixels)."""
    flipped = bool(line[0] > line[-1])
    ln = line[::-1] if flipped else line
    first = int(ln[0])
    ns = [n for n in range(1, limit - first + 1) if np.array_equal(first + _NEAREST[n], ln)]
    assert ns, "no span of torch's nearest indices gives %s" % ln.tolist()
    return first, ns, flipped


def recover_span(line, limit):
    first, ns, flipped = recover_spans(line, limit)
    return first, ns[0], flipped


def torch_mask(m, box, flip, vflip):
    top, left, hh, ww = box
    r = TF.resized_crop(torch.from_numpy(np.array(m))[None], top, left, hh, ww,
                        [C, C], InterpolationMode.NEAREST)
    if flip:
        r = TF.hflip(r)
    if vflip:
        r = TF.vflip(r)
    return r[0].numpy()


def test_a_train_mask_is_torchvisions_resized_crop_of_the_image_box(scenes_ds):
    L = loader(scenes_ds, seed=5, vflip=0.5, antialias="always", resampler="pillow",
               dct_scale="never")
    flips, vflips, shrunk, grown = set(), set(), 0, 0
    for epoch in range(2):
        for d in deliveries(L):
            sample, _, m = SCENES[d["id"]]
            hh_, ww_ = m.shape
            top, hhs, vflip = recover_spans(d["my"][:, 0], hh_)
            left, wws, flip = recover_spans(d["mx"][0], ww_)
            flips.add(flip)
            vflips.add(vflip)
            shrunk += wws[0] > C
            grown += wws[-1] < C
            # one of the boxes is a RandomResizedCrop box: scale (0.08, 1), ratio (3/4, 4/3),
            # rounded; the image shows it: torchvision's resized_crop of the PIL image (a
            # crop, then Pillow's antialiased bilinear resize)
            pil = PIL.open(io.BytesIO(sample["image"])).convert("RGB")
            img = d["image"].transpose(1, 2, 0).astype(np.int32)
            best = None
            for hh in hhs:
                for ww in wws:
                    if not (0.08 * ww_ * hh_ - (ww + hh + 1) <= ww * hh <= ww_ * hh_ and
                            0.75 * (hh - 1) - 1 <= ww <= 4 / 3 * (hh + 1) + 1):
                        continue
                    ref = np.asarray(TF.resized_crop(pil, top, left, hh, ww, [C, C],
                                                     InterpolationMode.BILINEAR))
                    ref = ref[::-1 if vflip else 1, ::-1 if flip else 1].astype(np.int32)
                    diff = np.abs(img - ref)
                    if best is None or diff.max() < best[0]:
                        best = (diff.max(), diff.mean(), (top, left, hh, ww))
            assert best is not None, (d["id"], top, hhs, left, wws)
            assert best[0] <= 2 and best[1] < 0.5, (d["id"], best)
            # the masks: torchvision's nearest resized_crop of that box (every candidate
            # box gives the same nearest indices), flipped alike
            box = best[2]
            xmap = np.tile(np.arange(ww_, dtype=np.uint8), (hh_, 1))
            ymap = np.tile(np.arange(hh_, dtype=np.uint8)[:, None], (1, ww_))
            assert np.array_equal(torch_mask(xmap, box, flip, vflip), d["mx"])
            assert np.array_equal(torch_mask(ymap, box, flip, vflip), d["my"])
            assert np.array_equal(torch_mask(m, box, flip, vflip), d["mask"]), d["id"]
    assert flips == {False, True} and vflips == {False, True}
    assert shrunk and grown, (shrunk, grown)


def test_the_crop_ranges_bound_every_sample(scenes_ds):
    """scale=(0.3, 0.6), ratio=(1.2, 1.6): the crop box the delivered masks show keeps to
    them (within the rounding of its width and height), or is the fallback torchvision
    takes where no box in them fits the image (the image's centre, its ratio clamped into
    the range), for every sample; the default ranges give boxes outside them."""
    scale, ratio = (0.3, 0.6), (1.2, 1.6)

    def fallback(ww_, hh_):
        w, h = ww_, hh_
        if ww_ / hh_ < ratio[0]:
            h = round(ww_ / ratio[0])
        elif ww_ / hh_ > ratio[1]:
            w = round(hh_ * ratio[1])
        return (ww_ - w) // 2, (hh_ - h) // 2, w, h

    def within(d):
        hh_, ww_ = SCENES[d["id"]][2].shape
        top, hhs, _ = recover_spans(d["my"][:, 0], hh_)
        left, wws, _ = recover_spans(d["mx"][0], ww_)
        for hh in hhs:
            for ww in wws:
                s_, r, n = ww * hh / (ww_ * hh_), ww / hh, min(ww, hh)
                if scale[0] * (1 - 2 / n) <= s_ <= scale[1] * (1 + 2 / n) and \
                        ratio[0] * (1 - 2 / n) <= r <= ratio[1] * (1 + 2 / n):
                    return "in"
                if (left, top, ww, hh) == fallback(ww_, hh_):
                    return "fallback"
        return None

    got = {"in": 0, "fallback": 0, None: 0}
    default = 0
    for epoch in range(2):
        for d in deliveries(loader(scenes_ds, seed=13, epoch=epoch, scale=scale, ratio=ratio)):
            got[within(d)] += 1
        default += sum(within(d) is None for d in deliveries(loader(scenes_ds, seed=13,
                                                                      epoch=epoch)))
    assert got[None] == 0 and got["in"] > got["fallback"], got
    assert sum(got.values()) == 2 * N_SCENES
    assert default > N_SCENES // 2, default


def by_id(L, epochs=1):
    """{(epoch, id): delivered sample} over `epochs` epochs."""
    out = {}
    for e in range(epochs):
        L.set_epoch(e)
        out.update({(e, d["id"]): d for d in deliveries(L)})
    return out


def test_min_box_size_drops_thin_boxes_and_their_rows(scenes_ds):
    """Train, two epochs: min_box_size=4 delivers the default run's boxes (same seed: same
    crops) less those narrower or lower than 4 output pixels, classes alike."""
    plain = by_id(loader(scenes_ds, seed=21, size=16), 2)
    L = loader(scenes_ds, seed=21, size=16, min_box_size=4)
    assert L.min_box_size == 4.0 and L.min_box_visibility == 0.0
    ruled = by_id(L, 2)
    assert plain.keys() == ruled.keys()
    dropped = 0
    for k, d in plain.items():
        b = d["boxes"]
        keep = (b[:, 2] - b[:, 0] >= 4) & (b[:, 3] - b[:, 1] >= 4)
        dropped += int((~keep).sum())
        assert np.array_equal(ruled[k]["boxes"], b[keep]), k
        assert np.array_equal(ruled[k]["classes"], d["classes"][keep]), k
        assert np.array_equal(ruled[k]["image"], d["image"])
    print("train: %d boxes dropped" % dropped)
    assert dropped > 0


def test_min_box_visibility_keeps_boxes_the_crop_shows_enough_of(scenes_ds):
    """Eval (resize the short side to S, centre crop C): a box is kept where the crop shows
    at least min_box_visibility of its mapped area, computed here from the written boxes."""
    vis = 0.7
    plain = by_id(loader(scenes_ds, transform="eval", resize=S))
    ruled = by_id(loader(scenes_ds, transform="eval", resize=S, min_box_visibility=vis))
    partly = dropped = 0
    for k, d in plain.items():
        sample, _, m = SCENES[d["id"]]
        hh_, ww_ = m.shape
        rw, rh = (S, int(S * hh_ / ww_)) if ww_ <= hh_ else (int(S * ww_ / hh_), S)
        left, top = round((rw - C) / 2), round((rh - C) / 2)
        want = []
        for box, c in zip(sample["boxes"].astype(np.float64), sample["classes"]):
            u = [box[0] * rw / ww_ - left, box[1] * rh / hh_ - top,
                 box[2] * rw / ww_ - left, box[3] * rh / hh_ - top]
            v = np.clip(u, 0, C)
            whole, shown = (u[2] - u[0]) * (u[3] - u[1]), (v[2] - v[0]) * (v[3] - v[1])
            if 0 < shown < whole:
                partly += 1
            if shown > 0 and shown >= vis * whole:
                want.append(int(c))
        dropped += len(d["classes"]) - len(want)
        assert ruled[k]["classes"].tolist() == want, (k, d["classes"].tolist())
        keep = np.isin(d["classes"], want)
        assert np.array_equal(ruled[k]["boxes"], d["boxes"][keep])
    print("eval: %d boxes partly shown, %d dropped" % (partly, dropped))
    assert partly > 0 and dropped > 0, (partly, dropped)


def test_an_eval_mask_is_torchvisions_resize_and_center_crop(scenes_ds):
    for d in deliveries(loader(scenes_ds, transform="eval", resize=S)):
        _, _, m = SCENES[d["id"]]
        want = TF.center_crop(TF.resize(torch.from_numpy(np.array(m))[None], S,
                                        interpolation=InterpolationMode.NEAREST), [C, C])
        assert np.array_equal(want[0].numpy(), d["mask"]), d["id"]


def letterbox_size(w, h_):
    if w >= h_:
        return C, max(1, round(h_ * C / w))
    return max(1, round(w * C / h_)), C


def test_a_letterbox_keeps_the_whole_image_and_every_box(scenes_ds):
    """letterbox: the whole scene, its long side C, at the top left; the mask is
    torchvision's resize (NEAREST) to the same size padded with 0, every box is kept and
    scaled by the image's own factor, and the image's padding is black."""
    seen = 0
    for d in deliveries(loader(scenes_ds, transform="letterbox", batch_size=4)):
        sample, _, m = SCENES[d["id"]]
        hh_, ww_ = m.shape
        rw, rh = letterbox_size(ww_, hh_)
        want = TF.resize(torch.from_numpy(np.array(m))[None], [rh, rw],
                         interpolation=InterpolationMode.NEAREST)
        want = TF.pad(want, [0, 0, C - rw, C - rh], fill=0)[0].numpy()
        assert np.array_equal(want, d["mask"]), d["id"]
        assert d["classes"].tolist() == sample["classes"].tolist(), d["id"]
        scaled = sample["boxes"].astype(np.float64) * [rw / ww_, rh / hh_, rw / ww_, rh / hh_]
        assert np.abs(d["boxes"] - scaled).max(initial=0) < 1e-4, d["id"]
        img = d["image"]  # uint8 NCHW, mean 0 and std 1: black is 0
        assert not img[:, rh:, :].any() and not img[:, :, rw:].any(), d["id"]
        assert img[:, :rh, :rw].min(axis=(1, 2)).max() > 0, d["id"]
        seen += 1
    assert seen == N_SCENES


def test_letterbox_mask_fill_pads_masks_with_the_value_asked(scenes_ds):
    """mask_fill=255 (an ignore index) pads the masks with 255, the image shown unchanged;
    the option reads back, and a value past a byte is refused."""
    plain = {d["id"]: d for d in deliveries(loader(scenes_ds, transform="letterbox"))}
    L = loader(scenes_ds, transform="letterbox", mask_fill=255)
    assert L.mask_fill == 255 and loader(scenes_ds).mask_fill == 0
    for d in deliveries(L):
        m = d["mask"]
        hh_, ww_ = SCENES[d["id"]][2].shape
        rw, rh = letterbox_size(ww_, hh_)
        assert (m[rh:] == 255).all() and (m[:, rw:] == 255).all(), d["id"]
        assert np.array_equal(m[:rh, :rw], plain[d["id"]]["mask"][:rh, :rw]), d["id"]
        assert np.array_equal(d["image"], plain[d["id"]]["image"]), d["id"]
    with pytest.raises(stoker.StokerError, match="mask_fill"):
        loader(scenes_ds, transform="letterbox", mask_fill=256)


def test_image_size_gives_each_image_its_stored_size(scenes_ds, tmp_path):
    """fields= naming IMAGE.size delivers int64 [count, 2], each image's stored height and
    width, right after the image whatever order the names come in: under letterbox the
    delivered boxes divided by each axis's factor (rw / width, rh / height, the letterbox's
    size from the delivered size) are the written ones. It converts as
    a dense field does, and is refused without a transform, without its image and for a
    data set without a schema."""
    for transform in ("letterbox", "train"):
        L = loader(scenes_ds, transform=transform,
                   fields=["boxes", "classes", "image.size", "image"])
        assert [f["name"] for f in L.fields] == ["image", "image.size", "boxes", "classes"]
        seen = 0
        for d in deliveries(L):
            sample, _, m = SCENES[d["id"]]
            assert d["image.size"].dtype == np.int64 and d["image.size"].tolist() == \
                list(m.shape), d["id"]
            if transform == "letterbox":
                hh_, ww_ = d["image.size"].tolist()
                rw, rh = letterbox_size(ww_, hh_)
                back = d["boxes"] / np.array([rw / ww_, rh / hh_] * 2)
                assert np.abs(back - sample["boxes"]).max(initial=0) < 1e-3, d["id"]
            seen += 1
        assert seen == N_SCENES
    L = loader(scenes_ds, transform="eval", fields="image,image.size",
               field_dtypes="image.size=int32")
    b = next(iter(L))
    sizes = np.from_dlpack(b["image.size"])
    assert sizes.dtype == np.int32
    assert sizes.tolist() == [list(SCENES[i][2].shape) for i in b.indices]
    with pytest.raises(stoker.StokerError, match="image transform"):
        loader(scenes_ds, transform="none", fields=["image", "image.size"])
    with pytest.raises(stoker.StokerError, match="without the image"):
        loader(scenes_ds, fields=["image.size", "mask"])
    with pytest.raises(stoker.StokerError, match="does not have"):
        loader(scenes_ds, fields=["image", "mask.size"])
    h.write_raw(tmp_path / "raw", 4)
    with pytest.raises(stoker.StokerError, match="schema"):
        loader(tmp_path / "raw", dtype=None, fields=["data", "data.size"])


def test_letterbox_is_the_cpus_alone(scenes_ds):
    """The GPU's kernels do not pad: decoder gpu is refused for letterbox naming the cause,
    and auto decodes on the CPU saying why."""
    with pytest.raises(stoker.StokerError, match="letterbox"):
        loader(scenes_ds, transform="letterbox", decoder="gpu")
    L = loader(scenes_ds, transform="letterbox", decoder="auto")
    assert "letterbox" in L.stats()["decoder_note"]


# ---- fields passed through ----

MISC_FIELDS = {
    "image": "jpeg",
    "boxes": {"kind": "array", "dtype": "float32", "shape": (None, 4), "boxes_of": "image"},
    "classes": {"kind": "array", "dtype": "int64", "shape": (None,), "rows_of": "boxes"},
    "tokens": {"kind": "array", "dtype": "int64", "shape": (None,)},
    "text": "bytes",
    "pts": {"kind": "array", "dtype": "float32", "shape": (None, 2)},
    "weight": "float32",
    "emb": {"kind": "raw", "dtype": "int16", "shape": (2, 3)},
    "label": "int64",
}
N_MISC = 13


def misc(i):
    rng = np.random.default_rng(i)
    w, h_ = 24 + i, 20 + i % 4
    n = i % 3
    return {
        "image": encode(rng.integers(0, 255, (h_, w, 3), dtype=np.uint8), "JPEG", quality=90),
        "boxes": np.array([[1, 2, 10, 12], [0, 0, w, h_]], dtype=np.float32)[:n],
        "classes": np.array([7 * i, 7 * i + 1], dtype=np.int64)[:n],
        "tokens": np.arange(i % 5, dtype=np.int64) * 1000 + i,  # 0 rows every 5th
        "text": b"MARKER-%03d-" % i + b"x" * (i % 4) if i % 6 else b"",
        "pts": rng.normal(size=(i % 4, 2)).astype(np.float32),
        "weight": 0.25 * i - 1,
        "emb": np.arange(6, dtype=np.int16).reshape(2, 3) * (i + 1),
        "label": 1000 + i,
    }


@pytest.fixture(scope="module")
def misc_ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("misc") / "ds"
    with stoker.Writer(path, fields=MISC_FIELDS, fsync=False) as w:
        for i in range(N_MISC):
            w.add(misc(i))
    return path


def same_as_written(d, i, fields):
    want = misc(i)
    for k in fields:
        got = d[k]
        if k in ("image", "text"):
            assert got.dtype == np.uint8 and bytes(got) == want[k], (k, i)
        elif k in ("weight", "label"):
            assert got == np.asarray(want[k], dtype=got.dtype), (k, i)
        else:
            assert got.dtype == want[k].dtype and got.shape == want[k].shape, (k, i, got.shape)
            assert np.array_equal(got, want[k]), (k, i)


def test_ragged_and_dense_fields_equal_what_was_written(misc_ds):
    L = loader(misc_ds, transform="none", batch_size=5, seed=9)
    assert [f["name"] for f in L.fields] == list(MISC_FIELDS)
    kinds = {f["name"]: f for f in L.fields}
    assert kinds["tokens"]["ragged"] and kinds["tokens"]["shape"] == (None,)
    assert kinds["pts"]["shape"] == (None, 2) and kinds["emb"]["shape"] == (5, 2, 3)
    assert not kinds["weight"]["ragged"] and kinds["weight"]["dtype"] == "float32"
    ids = []
    for b in L:
        ids += b.indices.tolist()
        assert np.array_equal(np.from_dlpack(b["label"]), b.labels)
        assert np.array_equal(b.labels, 1000 + b.indices)
        w = np.from_dlpack(b["weight"])
        assert w.dtype == np.float32 and np.array_equal(w, 0.25 * b.indices - 1)
        emb = np.from_dlpack(b["emb"])
        assert emb.shape == (b.count, 2, 3) and emb.dtype == np.int16
        for name in ("image", "boxes", "classes", "tokens", "text", "pts"):
            f = b[name]
            vals, offs = np.from_dlpack(f.values), np.from_dlpack(f.offsets)
            assert len(f) == b.count and offs.shape == (b.count + 1,) and offs[0] == 0
            assert np.array_equal(offs, f.host_offsets) and (np.diff(offs) >= 0).all()
            assert offs[-1] == len(vals)
            for j in range(b.count):
                assert np.array_equal(vals[offs[j]:offs[j + 1]], f[j])
        for j, i in enumerate(b.indices.tolist()):
            d = {k: (np.asarray(b[k][j]) if isinstance(b[k], stoker.RaggedField)
                     else np.from_dlpack(b[k])[j]) for k in b.keys()}
            same_as_written(d, i, MISC_FIELDS)
    assert sorted(ids) == list(range(N_MISC)) and ids != list(range(N_MISC))


def test_ragged_fields_unpack_as_tensor_pairs(misc_ds):
    L = loader(misc_ds, transform="none", batch_size=4, shuffle=False)
    b = next(iter(L))
    image, boxes, classes, tokens, text, pts, weight, emb, label = b
    assert isinstance(tokens, stoker.TensorPair) and isinstance(label, torch.Tensor)
    assert torch.equal(label, torch.arange(1000, 1004))
    assert len(tokens) == 4 and [t.tolist() for t in tokens.split()] == \
        [misc(i)["tokens"].tolist() for i in range(4)]
    bag = torch.nn.EmbeddingBag(4000, 3, mode="sum")
    assert bag(tokens.values, tokens.offsets[:-1]).shape == (4, 3)


def cuda_usable():
    return torch.cuda.is_available() and stoker.capabilities()["cuda_devices"] > 0


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.skipif(
    not cuda_usable(), reason="no usable CUDA device"))])
def test_ragged_fields_padded(misc_ds, device):
    """padded() equals pad_sequence of the samples, truncates at `length`, and fills; on
    the GPU without waiting for the stream."""
    L = loader(misc_ds, transform="none", batch_size=N_MISC, shuffle=False, device=device)
    b = next(iter(L))
    _, boxes, _, tokens, *_ = b
    rows = [torch.from_numpy(misc(i)["tokens"]) for i in range(N_MISC)]
    if device != "cpu":
        torch.cuda.set_sync_debug_mode("error")  # a call that syncs the stream raises
        try:
            on_gpu = tokens.padded(length=4, value=-1)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert on_gpu[0].device == on_gpu[1].device == tokens.values.device
        assert torch.equal(on_gpu[0].cpu(), tokens.padded(value=-1)[0].cpu())
        tokens = stoker.TensorPair(tokens.values.cpu(), tokens.offsets.cpu(),
                                   tokens.host_offsets)
        boxes = stoker.TensorPair(boxes.values.cpu(), boxes.offsets.cpu(), boxes.host_offsets)
    got, n = tokens.padded()
    assert got.dtype == torch.int64 and n.dtype == torch.int64
    assert torch.equal(got, torch.nn.utils.rnn.pad_sequence(rows, batch_first=True))
    assert n.tolist() == [i % 5 for i in range(N_MISC)]
    got, n = tokens.padded(length=2, value=-7)
    assert got.shape == (N_MISC, 2) and n.tolist() == [min(i % 5, 2) for i in range(N_MISC)]
    for i in range(N_MISC):
        want = misc(i)["tokens"][:2].tolist()
        assert got[i].tolist() == want + [-7] * (2 - len(want))
    got, n = boxes.padded(value=-1.0)  # rows of 4: [count, max boxes, 4]
    assert got.shape == (N_MISC, 2, 4) and got.dtype == torch.float32
    for i in range(N_MISC):
        want = torch.from_numpy(misc(i)["boxes"])
        assert torch.equal(got[i, :len(want)], want) and (got[i, len(want):] == -1).all()
    assert tokens.padded(length=0)[0].shape == (N_MISC, 0)
    # the RaggedField gives the same (torch imported: tensors)
    field = b["tokens"]
    assert torch.equal(field.padded(3)[0].cpu(), tokens.padded(3)[0])
    # a batch whose samples all have no rows (written with 0 tokens: every 5th)
    L5 = loader(misc_ds, transform="none", batch_size=1, shuffle=False)
    it = iter(L5)
    empty = next(it)["tokens"]
    assert empty.padded()[0].shape == (1, 0) and empty.padded(3)[0].tolist() == [[0, 0, 0]]
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="row count"):
            tokens.padded(bad)


def test_ragged_fields_padded_without_torch(misc_ds):
    """Where torch is not imported, a host batch's RaggedField pads with numpy."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np, stoker\n"
        "L = stoker.Loader(sys.argv[1], batch_size=%d, device='cpu', transform='none', "
        "shuffle=False)\n"
        "f = next(iter(L))['tokens']\n"
        "v, n = f.padded(value=-1)\n"
        "print(type(v).__name__, v.dtype, v.shape, n.tolist())\n"
        "print(v.tolist())\n" % N_MISC)
    env = dict(os.environ, STOKER_LIBRARY=h._library(),
               PYTHONPATH=os.path.join(h.ROOT, "python"))
    res = subprocess.run([sys.executable, "-c", code, str(misc_ds)], env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    first, second = res.stdout.splitlines()[-2:]
    assert first == "ndarray int64 (13, 4) %s" % [i % 5 for i in range(N_MISC)]
    want = [list(misc(i)["tokens"]) + [-1] * (4 - i % 5) for i in range(N_MISC)]
    assert second == str([[int(x) for x in r] for r in want])


def test_empty_rows_and_zero_boxes_in_train(misc_ds):
    """Samples with 0 boxes and 0 tokens sit beside others after the crop; offsets agree."""
    L = loader(misc_ds, size=16, batch_size=N_MISC, shuffle=False)
    b = next(iter(L))
    nb = np.diff(b["boxes"].host_offsets)
    assert np.array_equal(nb, np.diff(b["classes"].host_offsets))
    assert (nb[0::3] == 0).all()  # written with none
    assert np.array_equal(np.diff(b["tokens"].host_offsets), np.arange(N_MISC) % 5)
    for j in range(N_MISC):
        assert b["classes"][j].tolist() == [c for c in misc(j)["classes"].tolist()
                                            if c in b["classes"][j].tolist()]


# ---- fields= ----

def test_fields_selection(misc_ds, tmp_path):
    L = loader(misc_ds, size=16, fields=["label", "tokens", "boxes", "classes", "image"])
    assert [f["name"] for f in L.fields] == ["image", "boxes", "classes", "tokens", "label"]
    b = next(iter(L))
    assert b.keys() == ["image", "boxes", "classes", "tokens", "label"]
    assert loader(misc_ds, transform="none", fields="text,weight").fields[1]["name"] == "weight"
    assert np.array_equal(np.from_dlpack(b["label"]), b.labels)
    with pytest.raises(stoker.StokerError) as e:
        loader(misc_ds, transform="none", fields=["tokens", "nosuch"])
    assert "nosuch" in str(e.value) and "image, boxes, classes, tokens" in str(e.value)
    with pytest.raises(stoker.StokerError) as e:
        loader(misc_ds, fields=["image", "classes"])
    assert "classes" in str(e.value) and "boxes" in str(e.value)
    # without a transform nothing is reshaped: boxes pass through without their image
    L = loader(misc_ds, transform="none", fields=["boxes", "classes"])
    b = next(iter(L))
    assert b.keys() == ["boxes", "classes"]
    assert list(b["boxes"].host_offsets) == list(b["classes"].host_offsets)
    L.close()
    h.write_raw(tmp_path / "legacy", 4)
    with pytest.raises(stoker.StokerError) as e:
        loader(tmp_path / "legacy", fields=["label"])
    assert "always delivers" in str(e.value)


# ---- corrupt records ----

def bad_png(w, h_):
    """A PNG whose chunks and CRCs are right but whose image data is too short."""
    good = encode(np.zeros((h_, w), dtype=np.uint8), "PNG")
    out, p = good[:8], 8
    while p < len(good):
        n, = struct.unpack(">I", good[p:p + 4])
        t, data = good[p + 4:p + 8], good[p + 8:p + 8 + n]
        if t == b"IDAT":
            data = zlib.compress(b"\0" * 5)
        out += struct.pack(">I", len(data)) + t + data + struct.pack(">I", zlib.crc32(t + data))
        p += 12 + n
    return out


def test_a_corrupt_record_is_replaced_whole(tmp_path):
    """Record 3's mask does not decode (its record's CRC is right); record 7's bytes are
    damaged in the shard after writing (its CRC fails). Under skip each position holds
    another record whole: every field is the replacement's."""
    path = tmp_path / "ds"
    samples = [SCENES[i][0] for i in range(10)]
    with stoker.Writer(path, fields=SCENE_FIELDS, fsync=False) as w:
        for i, s in enumerate(samples):
            w.add(dict(s, mask=bad_png(*SCENES[i][2].shape[::-1])) if i == 3 else s)
    shard = [p for p in os.listdir(path) if p.startswith("shard")]
    assert len(shard) == 1
    raw = bytearray((path / shard[0]).read_bytes())
    at = raw.find(samples[7]["mx"])
    assert at > 0
    raw[at + len(samples[7]["mx"]) // 2] ^= 0x55
    (path / shard[0]).write_bytes(bytes(raw))

    L = loader(path, seed=2, shuffle=False, batch_size=10, on_corrupt="skip")
    got = deliveries(L)
    assert L.stats()["skipped"] == 2
    assert [d["id"] for d in got] == [0, 1, 2, got[3]["id"], 4, 5, 6, got[7]["id"], 8, 9]
    # every field of a replacement is its own record's: what its own position gives (the
    # same seed, epoch and id), with its label and class rows as written
    for pos in (3, 7):
        d = got[pos]
        assert d["id"] not in (3, 7)
        assert d["label"] == 100 + d["id"] == d["label_of_batch"]
        check_geometry(d, {"kept": 0, "dropped": 0}, scale_of(d, "train"))
        for k in SCENE_FIELDS:
            assert np.array_equal(d[k], got[d["id"]][k]), (pos, k)

    L = loader(path, seed=2, shuffle=False, batch_size=1, on_corrupt="error")
    msgs = []
    for _ in range(N_SCENES):
        try:
            for _ in L:
                pass
            break
        except stoker.CorruptError as e:
            msgs.append(str(e))
    assert len(msgs) == 2, msgs
    assert shard[0] in msgs[0] and "record 3" in msgs[0] and 'field "mask"' in msgs[0], msgs
    assert shard[0] in msgs[1] and "record 7" in msgs[1], msgs


def test_a_damaged_field_is_named_with_file_and_record(tmp_path):
    path = tmp_path / "ds"
    with stoker.Writer(path, fields=SCENE_FIELDS, fsync=False) as w:
        for i in range(4):
            s = SCENES[i][0]
            w.add(dict(s, mask=bad_png(*SCENES[i][2].shape[::-1])) if i == 2 else s)
    L = loader(path, shuffle=False, batch_size=1)
    with pytest.raises(stoker.CorruptError) as e:
        for _ in L:
            pass
    msg = str(e.value)
    assert ".stk" in msg and "record 2" in msg and 'field "mask"' in msg, msg


# ---- resume, ranks, remote ----

def flat(ds):
    return [(d["id"],) + tuple(d[k].tobytes() for k in SCENE_FIELDS) for d in ds]


def test_resume_and_ranks_give_the_same_samples(scenes_ds):
    whole = flat(deliveries(loader(scenes_ds, seed=4)))
    L = loader(scenes_ds, seed=4)
    it = iter(L)
    first = []
    for _ in range(2):
        b = next(it)
        first += flat(deliveries([b]))
    state = L.state_dict()
    L.close()
    R = loader(scenes_ds, seed=4)
    R.load_state_dict(state)
    assert first + flat(deliveries(R)) == whole
    by_id = {t[0]: t for t in whole}
    ranks = []
    for rank in (0, 1):
        for t in flat(deliveries(loader(scenes_ds, seed=4, rank=rank, world_size=2))):
            assert t == by_id[t[0]]
            ranks.append(t[0])
    assert sorted(ranks) == sorted(by_id)


@pytest.mark.skipif(not h.remote_built(), reason="built without libcurl")
def test_over_http_the_same_samples(scenes_ds, tmp_path):
    local = flat(deliveries(loader(scenes_ds, seed=6, vflip=0.5)))
    with range_server.start(scenes_ds.parent) as srv:
        remote = loader(srv.url + "/" + scenes_ds.name, seed=6, vflip=0.5,
                        cache_dir=str(tmp_path / "cache"))
        assert flat(deliveries(remote)) == local
        remote.close()


# ---- a data set without a schema ----

def test_a_data_set_without_a_schema_unpacks_as_data_and_labels(tmp_path):
    h.write_raw(tmp_path / "raw", 6)
    L = loader(tmp_path / "raw", batch_size=3, shuffle=False, dtype=None)
    assert [f["name"] for f in L.fields] == ["data", "label"]
    for b in L:
        x, y = b
        assert isinstance(x, torch.Tensor) and torch.equal(y, torch.from_numpy(b.labels))
        assert np.array_equal(np.from_dlpack(b["label"]), b.labels)
        assert torch.equal(x, torch.from_dlpack(b.data))
        assert [h.record_id(r) for r in x.numpy()] == b.indices.tolist()


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ragged_room_follows_the_records_not_the_largest_value(tmp_path):
    """A bytes field whose largest value (one record of 6 MB) is far above the rest (100 to
    300 bytes): a slot takes the room its batch's records can fill, growing for the batch
    that holds the large one, not batch x 6 MB per slot (768 MB for these two slots, in
    pages the slot touches at create). Every value arrives whole, the large one included,
    in both epochs."""
    path = tmp_path / "ds"
    big = 57
    rng = np.random.default_rng(5)
    blobs = [rng.integers(0, 256, 6 << 20 if i == big else 100 + i, dtype=np.uint8).tobytes()
             for i in range(200)]
    with stoker.Writer(path, fields={"blob": "bytes", "label": "int64"}, fsync=False) as w:
        for i, b in enumerate(blobs):
            w.add({"blob": b, "label": i})
    before = _rss_bytes()
    with stoker.Loader(path, 64, depth=2, threads=1, transform="none", device="cpu",
                       seed=4) as L:
        seen = {}
        for epoch in range(2):
            L.set_epoch(epoch)
            for b in L:
                f = b["blob"]
                for j, i in enumerate(b.indices.tolist()):
                    seen[i] = bytes(np.asarray(f[j]))
        grown = _rss_bytes() - before
    assert sorted(seen) == list(range(200))
    assert all(seen[i] == blobs[i] for i in range(200))
    assert grown < 128 << 20, "the loader's slots took %.0f MB" % (grown / 2**20)
