# SPDX-License-Identifier: Apache-2.0
"""The geometry of tied masks and boxes against PyTorch and torchvision.

A mask goes through its image's crop, resize and flips with nearest neighbour exactly as
torch.nn.functional.interpolate(mode="nearest") does (torchvision's NEAREST on tensors):
torchvision's resized_crop for a crop box resized to the output, resize then crop for a
centre crop of a resized image. Every mask must equal PyTorch's bit for bit, over random
geometries that shrink, enlarge and keep sizes, odd sizes and flips. Boxes are mapped by
v' = (v - offset) * out / in - first per axis, clipped to the output, flipped, and dropped
when no area is left: within 1e-4 of that formula computed here in float64, and the same
boxes dropped.

The functions are internal to the library: test_field_geom_dump (a C test program in
$STOKER_BUILD_DIR/tests) applies them to files.
"""
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")


def dump_program():
    build = os.environ.get("STOKER_BUILD_DIR")
    if not build:
        pytest.skip("STOKER_BUILD_DIR is not set")
    path = os.path.join(build, "tests", "test_field_geom_dump")
    if not os.path.exists(path):
        pytest.skip("test_field_geom_dump was not built")
    return path


def run(tmp_path, args, mask, boxes):
    """Runs the program on mask (H x W uint8) and boxes (N x 4 float32); returns the geometry
    (10 axis values, flip, vflip, kept, the output's width and height), the output mask, the
    mapped boxes and the keep flags."""
    io = str(tmp_path / "case")
    mask.astype(np.uint8).tofile(io + ".mask")
    boxes.astype(np.float32).tofile(io + ".boxes")
    res = subprocess.run([dump_program()] + [str(a) for a in args] + [io],
                         capture_output=True, text=True, check=True)
    words = res.stdout.split()
    assert words[0] == "fgeom", res.stdout
    geo = [int(v) for v in words[1:]]
    out_w, out_h = geo[13], geo[14]
    out = np.fromfile(io + ".mask.out", dtype=np.uint8).reshape(out_h, out_w)
    mapped = np.fromfile(io + ".boxes.out", dtype=np.float32).reshape(-1, 4)
    keep = np.fromfile(io + ".keep", dtype=np.uint8)
    return geo, out, mapped, keep


def nearest(mask, out_h, out_w):
    """PyTorch's nearest resize of an H x W uint8 mask (as float, as torchvision does)."""
    t = torch.from_numpy(mask.astype(np.float32))[None, None]
    r = torch.nn.functional.interpolate(t, size=[out_h, out_w], mode="nearest")
    return r[0, 0].numpy().astype(np.uint8)


def reference_mask(mask, geo):
    """The torch reference of a geometry: the source span cropped, resized to (out_y, out_x)
    with nearest, the shown window [first, first + count) cut out, then the flips; at the
    top left of an output larger than it (a letterbox), the rest 0."""
    ox, ix, ux, fx, cx, oy, iy, uy, fy, cy, flip, vflip = geo[:12]
    r = nearest(mask[oy:oy + iy, ox:ox + ix], uy, ux)[fy:fy + cy, fx:fx + cx]
    if flip:
        r = r[:, ::-1]
    if vflip:
        r = r[::-1, :]
    framed = np.zeros((geo[14], geo[13]), np.uint8)
    framed[:cy, :cx] = r
    return framed


def reference_boxes(boxes, geo):
    ox, ix, ux, fx, cx, oy, iy, uy, fy, cy, flip, vflip = geo[:12]
    b = boxes.astype(np.float64)
    x = np.clip((b[:, [0, 2]] - ox) * ux / ix - fx, 0, cx)
    y = np.clip((b[:, [1, 3]] - oy) * uy / iy - fy, 0, cy)
    if flip:
        x = cx - x[:, ::-1]
    if vflip:
        y = cy - y[:, ::-1]
    m = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1).astype(np.float32)
    keep = (m[:, 2] > m[:, 0]) & (m[:, 3] > m[:, 1])
    return m.astype(np.float64), keep


def random_mask(rng, w, h):
    """Labels in small blobs plus noise: neighbours differ, so an index off by one shows."""
    m = rng.integers(0, 256, size=(h, w), dtype=np.uint8)
    m[rng.random((h, w)) < 0.5] = 7
    return m


def random_boxes(rng, w, h, n=24):
    x = np.sort(rng.uniform(0, w, size=(n, 2)), axis=1)
    y = np.sort(rng.uniform(0, h, size=(n, 2)), axis=1)
    b = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)
    b[0] = [0, 0, w, h]  # the whole image
    b[1] = [w / 2, h / 3, w / 2, h / 2]  # no width: always dropped
    return b.astype(np.float32)


def check_case(tmp_path, args, mask, boxes):
    geo, out, mapped, keep = run(tmp_path, args, mask, boxes)
    want = reference_mask(mask, geo)
    assert out.shape == want.shape, (args, geo)
    bad = np.argwhere(out != want)
    assert bad.size == 0, f"{args} {geo}: {len(bad)} mask pixels differ, first at {bad[0]}"
    ref, ref_keep = reference_boxes(boxes, geo)
    np.testing.assert_array_equal(keep.astype(bool), ref_keep, err_msg=f"{args} {geo}")
    assert geo[12] == int(ref_keep.sum())
    err = np.abs(mapped[ref_keep].astype(np.float64) - ref[ref_keep])
    assert err.size == 0 or err.max() <= 1e-4, f"{args} {geo}: box error {err.max()}"
    return geo


def random_axis(rng, n, centre_crop):
    """(offset, in, out, first, count) for a source axis of n pixels: a box of it resized to
    the output, or (centre_crop) the whole axis resized and a window of that cut out."""
    out = int(rng.choice([rng.integers(1, 2 * n + 8), rng.integers(1, 600), 2 * n, n]))
    if centre_crop:
        out = max(out, 1)
        count = int(rng.integers(1, out + 1))
        return 0, n, out, int(rng.integers(0, out - count + 1)), count
    size = int(rng.integers(1, n + 1))
    return int(rng.integers(0, n - size + 1)), size, out, 0, out


def test_masks_and_boxes_match_torch_on_random_geometries(tmp_path):
    rng = np.random.default_rng(44)
    shrink = enlarge = 0
    for case in range(160):
        w = int(rng.choice([rng.integers(1, 40), rng.integers(40, 700)]))
        h = int(rng.choice([rng.integers(1, 40), rng.integers(40, 700)]))
        centre_crop = case % 3 == 2
        ax, ay = random_axis(rng, w, centre_crop), random_axis(rng, h, centre_crop)
        shrink += ax[2] < ax[1]
        enlarge += ax[2] > ax[1]
        flip, vflip = int(rng.integers(0, 2)), int(rng.integers(0, 2))
        args = ["geom", *ax, *ay, flip, vflip, w, h]
        check_case(tmp_path, args, random_mask(rng, w, h), random_boxes(rng, w, h))
    assert shrink > 20 and enlarge > 20


def test_wide_masks_cross_column_blocks(tmp_path):
    """Outputs wider than one block of the column table (1024), and a 2x enlargement, which
    PyTorch computes as index >> 1."""
    rng = np.random.default_rng(7)
    for w, h, ux, uy in [(700, 5, 2500, 9), (1500, 3, 1500, 3), (1200, 2, 2400, 4)]:
        args = ["geom", 0, w, ux, 0, ux, 0, h, uy, 0, uy, 1, 0, w, h]
        check_case(tmp_path, args, random_mask(rng, w, h), random_boxes(rng, w, h))


def test_sample_geometries_follow_torchvision(tmp_path):
    """Each transform's sample geometry, as the loader asks for it: train crops a box of the
    image and resizes it to C x C; eval resizes the short side to S (the long side
    int(S * long / short)) and centre-crops C (torchvision's Resize + CenterCrop); resize
    gives C x C; none the image itself. The mask equals torchvision's functions on the same
    mask where torchvision is importable."""
    try:
        import torchvision.transforms.functional as TF
        from torchvision.transforms import InterpolationMode
    except ImportError:
        TF = None
    rng = np.random.default_rng(5)
    flips = vflips = 0
    for rid in range(40):
        w, h = int(rng.integers(20, 400)), int(rng.integers(20, 400))
        mask, boxes = random_mask(rng, w, h), random_boxes(rng, w, h)
        t = torch.from_numpy(mask)[None]
        c, s = 64, 80
        geo = check_case(tmp_path, ["sample", "train", c, 0, 0.5, 3, 1, rid, w, h], mask, boxes)
        ox, ix, ux, fx, cx, oy, iy, uy, fy, cy, flip, vflip = geo[:12]
        assert (ux, fx, cx, uy, fy, cy) == (c, 0, c, c, 0, c)
        assert 0 <= ox and ox + ix <= w and 0 <= oy and oy + iy <= h
        flips += flip
        vflips += vflip
        if TF is not None:
            r = TF.resized_crop(t, oy, ox, iy, ix, [c, c], InterpolationMode.NEAREST)[0].numpy()
            r = r[:, ::-1] if flip else r
            r = r[::-1, :] if vflip else r
            _, out, _, _ = run(tmp_path, ["sample", "train", c, 0, 0.5, 3, 1, rid, w, h], mask,
                               boxes)
            np.testing.assert_array_equal(out, r)

        geo = check_case(tmp_path, ["sample", "eval", c, s, 0.5, 3, 1, rid, w, h], mask, boxes)
        short, long = min(w, h), max(w, h)
        rw, rh = (s, int(s * long / short)) if w <= h else (int(s * long / short), s)
        left, top = int(round((rw - c) / 2.0)), int(round((rh - c) / 2.0))
        assert geo[:12] == [0, w, rw, left, c, 0, h, rh, top, c, 0, 0], (w, h)
        if TF is not None:
            r = TF.center_crop(TF.resize(t, s, InterpolationMode.NEAREST), [c, c])[0].numpy()
            _, out, _, _ = run(tmp_path, ["sample", "eval", c, s, 0.5, 3, 1, rid, w, h], mask,
                               boxes)
            np.testing.assert_array_equal(out, r)

        geo = check_case(tmp_path, ["sample", "resize", c, 0, 0.5, 3, 1, rid, w, h], mask, boxes)
        assert geo[:12] == [0, w, c, 0, c, 0, h, c, 0, c, 0, 0]
        geo = check_case(tmp_path, ["sample", "none", c, 0, 0.5, 3, 1, rid, w, h], mask, boxes)
        assert geo[:12] == [0, w, w, 0, w, 0, h, h, 0, h, 0, 0]

        # letterbox: the whole mask resized to (rw, rh), the long side c, at the top left of
        # c x c, the rest 0; every box kept, scaled alike on both axes
        geo = check_case(tmp_path, ["sample", "letterbox", c, 0, 0.5, 3, 1, rid, w, h], mask,
                         boxes)
        rw, rh = (c, max(1, round(h * c / w))) if w >= h else (max(1, round(w * c / h)), c)
        assert geo[:12] == [0, w, rw, 0, rw, 0, h, rh, 0, rh, 0, 0] and geo[13:] == [c, c]
        assert geo[12] == len(boxes) - 1  # only the box without a width is dropped
        if TF is not None:
            r = TF.resize(t, [rh, rw], InterpolationMode.NEAREST)
            r = TF.pad(r, [0, 0, c - rw, c - rh], fill=0)[0].numpy()
            _, out, _, _ = run(tmp_path, ["sample", "letterbox", c, 0, 0.5, 3, 1, rid, w, h],
                               mask, boxes)
            np.testing.assert_array_equal(out, r)
    assert 8 < flips < 32 and 8 < vflips < 32
