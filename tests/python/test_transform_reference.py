# SPDX-License-Identifier: Apache-2.0
"""The per-sample pipeline against Pillow (and torchvision when importable).

Pillow decodes with libjpeg's accurate IDCT and fancy upsampling, as stoker does, and
stoker's resampling is Pillow's bilinear ImagingResample: with antialias "always" and
resampler "pillow" term for term, so uint8 outputs equal Pillow's exactly (Debian's Pillow
uses the same libjpeg); with the "fast" resampler (the same weights rounded to 16 bits)
within 2 of them, mean absolute error <= 0.05, float32 mean absolute error < 0.02 in
normalised units. The defaults (antialias only past a 2x shrink, fast weights) agree with
torchvision's eval transform within a mean absolute error of 0.05 in normalised units.
CMYK and grayscale JPEGs match Image.open(f).convert("RGB") within a mean absolute error of
1 (here: exactly).

The samples come from test_transform_dump (a C test program in $STOKER_BUILD_DIR/tests),
since the pipeline's functions are internal to the library.
"""
import os
import subprocess

import numpy as np
import pytest
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def dump_program():
    build = os.environ.get("STOKER_BUILD_DIR")
    if not build:
        pytest.skip("STOKER_BUILD_DIR is not set")
    path = os.path.join(build, "tests", "test_transform_dump")
    if not os.path.exists(path):
        pytest.skip("test_transform_dump was not built")
    return path


def photo(w, h, seed):
    """A photo-like RGB image: smooth gradients, shapes and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([
        128 + 100 * np.sin(x / 17.0 + seed) * np.cos(y / 23.0),
        128 + 90 * np.cos((x + y) / 31.0),
        255 * (x / max(w - 1, 1)) * (y / max(h - 1, 1)),
    ], axis=-1)
    img[(x // 40 + y // 30) % 4 == 0] *= 0.4
    img += rng.normal(0, 8, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def run_dump(tmp_path, jpeg, mode, size, resize, dtype, layout, seed=0, epoch=0, rid=0,
             antialias="over2x", resampler="fast", dct_scale="train"):
    """The sample stoker makes of one JPEG and its geometry (W H X0 W0 Y0 H0 FLIP SCALE);
    antialias, resampler and dct_scale default as the library's options do."""
    out = tmp_path / f"{mode}-{dtype}-{layout}-{rid}.bin"
    res = subprocess.run([dump_program(), str(jpeg), mode, str(size), str(resize), dtype,
                          layout, str(out), str(seed), str(epoch), str(rid), antialias,
                          resampler, dct_scale],
                         capture_output=True, text=True, check=True)
    geo = [int(v) for v in res.stdout.split("geometry")[1].split()]
    np_dtype = {"uint8": np.uint8, "float32": np.float32, "float16": np.float16}[dtype]
    data = np.fromfile(out, dtype=np_dtype)
    shape = (3, size, size) if layout == "nchw" else (size, size, 3)
    return data.reshape(shape), geo


def eval_geometry(img, size, resize):
    """torchvision's Resize(resize) + CenterCrop(size): the resized (w, h) and the crop's
    (left, top)."""
    w, h = img.size
    if w <= h:
        rw, rh = resize, int(resize * h / w)
    else:
        rw, rh = int(resize * w / h), resize
    return rw, rh, int(round((rw - size) / 2.0)), int(round((rh - size) / 2.0))


def reduced_decode(path, scale):
    """The JPEG decoded by libjpeg shrunk by `scale` in the IDCT (Pillow's draft mode, which
    keeps the accurate IDCT), as RGB."""
    im = Image.open(path)
    w, h = im.size
    if scale > 1:
        im.draft("RGB", (w // scale, h // scale))
        assert im.size == (-(-w // scale), -(-h // scale)), (path, scale, im.size)
    return im.convert("RGB")


def pil_box_resize(img, scale, x, bw, y, bh, size):
    """Resize of the full-size box (x, y, bw, bh) of an image decoded at 1/scale: the box
    in reduced pixels (fractional), its filters reading only the whole pixels it touches."""
    x0, y0 = x // scale, y // scale
    x1, y1 = -(-(x + bw) // scale), -(-(y + bh) // scale)
    box = (x / scale - x0, y / scale - y0, (x + bw) / scale - x0, (y + bh) / scale - y0)
    return img.crop((x0, y0, x1, y1)).resize((size, size), Image.BILINEAR, box=box)


def pil_eval(img, size, resize):
    """torchvision's Resize(resize) + CenterCrop(size) on a PIL image, as uint8 HWC."""
    rw, rh, left, top = eval_geometry(img, size, resize)
    r = img.resize((rw, rh), Image.BILINEAR)
    return np.asarray(r.crop((left, top, left + size, top + size)))


def plain_bilinear_axis(a, out_size, axis):
    """Two-tap bilinear resize of a uint8 array along `axis` (torchvision's antialias=False:
    output j samples (j + 0.5) * in / out - 0.5), rounded half up to uint8 like Pillow."""
    n = a.shape[axis]
    src = (np.arange(out_size) + 0.5) * n / out_size - 0.5
    x0 = np.clip(np.floor(src).astype(np.int64), 0, n - 1)
    x1 = np.minimum(x0 + 1, n - 1)
    lam = np.clip(src - x0, 0.0, 1.0)
    shape = [1] * a.ndim
    shape[axis] = out_size
    lam = lam.reshape(shape)
    v = (1 - lam) * np.take(a, x0, axis=axis).astype(np.float64) + \
        lam * np.take(a, x1, axis=axis).astype(np.float64)
    return np.clip(np.floor(v + 0.5), 0, 255).astype(np.uint8)


def plain_eval(img, size, resize):
    """Resize(resize, antialias=False) + CenterCrop(size), horizontal pass first."""
    rw, rh, left, top = eval_geometry(img, size, resize)
    a = plain_bilinear_axis(np.asarray(img), rw, 1)
    a = plain_bilinear_axis(a, rh, 0)
    return a[top:top + size, left:left + size]


def normalise(hwc_u8):
    return ((hwc_u8.astype(np.float32) / 255.0 - MEAN) / STD).transpose(2, 0, 1)


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    d = tmp_path_factory.mktemp("jpegs")
    files = []
    for i, (w, h, sub) in enumerate([(500, 375, 2), (333, 257, 0), (300, 451, 1),
                                     (640, 480, 2), (257, 259, 2)]):
        p = d / f"img{i}.jpg"
        photo(w, h, i).save(p, quality=90, subsampling=sub)
        files.append(p)
    p = d / "progressive.jpg"
    photo(411, 311, 9).save(p, quality=85, progressive=True)
    files.append(p)
    return files


@pytest.mark.parametrize("size,resize", [(224, 256), (64, 73), (17, 20)])
def test_eval_uint8_equals_pillow(tmp_path, jpegs, size, resize):
    for f in jpegs:
        ref = pil_eval(Image.open(f).convert("RGB"), size, resize).astype(np.int32)
        exact, _ = run_dump(tmp_path, f, "eval", size, resize, "uint8", "nhwc", antialias="always",
                            resampler="pillow")
        assert np.array_equal(exact.astype(np.int32), ref), f.name
        ours, _ = run_dump(tmp_path, f, "eval", size, resize, "uint8", "nhwc", antialias="always")
        diff = np.abs(ours.astype(np.int32) - ref)
        assert diff.mean() <= 0.05 and diff.max() <= 2, (f.name, diff.mean(), diff.max())


def letterbox_size(w, h, size):
    """The letterbox's resized size: the long side `size`, the short side its share
    rounded half to even (Python's round), at least 1."""
    if w >= h:
        return size, max(1, min(size, round(h * size / w)))
    return max(1, min(size, round(w * size / h))), size


@pytest.mark.parametrize("size", [224, 64, 17])
def test_letterbox_is_the_whole_image_resized_at_the_top_left(tmp_path, jpegs, size):
    """letterbox: Pillow's resize of the whole image to its letterbox size, at the top left
    of a black size x size sample; normalised, the padding is black normalised (-mean/std),
    in either layout."""
    for f in jpegs:
        img = Image.open(f).convert("RGB")
        rw, rh = letterbox_size(*img.size, size)
        ref = np.zeros((size, size, 3), np.int32)
        ref[:rh, :rw] = np.asarray(img.resize((rw, rh), Image.BILINEAR))
        exact, _ = run_dump(tmp_path, f, "letterbox", size, 0, "uint8", "nhwc",
                            antialias="always", resampler="pillow")
        assert np.array_equal(exact.astype(np.int32), ref), f.name
        ours, _ = run_dump(tmp_path, f, "letterbox", size, 0, "uint8", "nhwc", antialias="always")
        diff = np.abs(ours.astype(np.int32) - ref)
        assert diff.max() <= 2 and diff[:rh, :rw].mean() <= 0.05, (f.name, diff.mean())
        assert not ours[rh:].any() and not ours[:, rw:].any(), f.name
        norm, _ = run_dump(tmp_path, f, "letterbox", size, 0, "float32", "nchw",
                           antialias="always", resampler="pillow")
        want = normalise(ref.astype(np.uint8))
        assert np.abs(norm - want).max() < 1e-5, f.name
        black = (-MEAN / STD).reshape(3, 1, 1)
        assert np.allclose(norm[:, rh:, :], black) and np.allclose(norm[:, :, rw:], black)
        packed, _ = run_dump(tmp_path, f, "letterbox", size, 0, "float16", "nhwc",
                             antialias="always", resampler="pillow")
        assert np.abs(packed.astype(np.float32) - want.transpose(1, 2, 0)).max() < 0.002
        # dct_scale "always": the whole image decoded at a reduction, resized from there
        red, geo = run_dump(tmp_path, f, "letterbox", size, 0, "uint8", "nhwc",
                            antialias="always", resampler="pillow", dct_scale="always")
        scale = geo[-1]
        w, h = img.size
        if min(w / rw, h / rh) >= 2:
            assert scale > 1, (f.name, geo)
        ref = np.zeros((size, size, 3), np.uint8)
        ref[:rh, :rw] = np.asarray(reduced_decode(f, scale).resize(
            (rw, rh), Image.BILINEAR, box=(0, 0, w / scale, h / scale)))
        assert np.array_equal(red, ref), (f.name, scale)


def test_eval_antialias_over2x(tmp_path, jpegs):
    """antialias="over2x": a shrink by at most 2x is plain two-tap bilinear interpolation
    (within 1 of a float reference: the weights are 22-bit fixed point), a larger one is
    Pillow's antialiased resize as before, and the two differ where the filter widened."""
    for f in jpegs:
        img = Image.open(f).convert("RGB")
        ours, _ = run_dump(tmp_path, f, "eval", 224, 256, "uint8", "nhwc", antialias="over2x")
        diff = np.abs(ours.astype(np.int32) - plain_eval(img, 224, 256).astype(np.int32))
        assert diff.max() <= 1 and diff.mean() <= 0.05, (f.name, diff.mean(), diff.max())
        aa, _ = run_dump(tmp_path, f, "eval", 224, 256, "uint8", "nhwc", antialias="always")
        if min(img.size) > 256 * 1.25:  # "always" widened the filter here
            assert np.abs(aa.astype(np.int32) - ours.astype(np.int32)).mean() > 0.2, f.name
        # every source here is shrunk by more than 2x to 73: the same as Pillow
        small, _ = run_dump(tmp_path, f, "eval", 64, 73, "uint8", "nhwc", antialias="over2x")
        ref = pil_eval(img, 64, 73)
        diff = np.abs(small.astype(np.int32) - ref.astype(np.int32))
        if min(img.size) > 2 * 73:
            assert diff.mean() <= 0.05 and diff.max() <= 2, (f.name, diff.mean(), diff.max())


def test_eval_float32_normalised_matches_pillow(tmp_path, jpegs):
    for f in jpegs:
        ours, _ = run_dump(tmp_path, f, "eval", 224, 256, "float32", "nchw", antialias="always")
        ref = normalise(pil_eval(Image.open(f).convert("RGB"), 224, 256))
        mae = np.abs(ours - ref).mean()
        assert mae < 0.02, (f.name, mae)


def test_eval_float16_nchw(tmp_path, jpegs):
    ref = normalise(pil_eval(Image.open(jpegs[0]).convert("RGB"), 224, 256))
    ours, _ = run_dump(tmp_path, jpegs[0], "eval", 224, 256, "float16", "nchw",
                       antialias="always", resampler="pillow")
    # float16 keeps 11 significant bits: |x| < 2.7 here, so half an ulp is below 0.001
    assert np.abs(ours.astype(np.float32) - ref).max() < 0.002
    # the fast resampler: a pixel off by one level is 1/(255 std) < 0.018 in these units
    fast, _ = run_dump(tmp_path, jpegs[0], "eval", 224, 256, "float16", "nchw",
                       antialias="always")
    assert np.abs(fast.astype(np.float32) - ref).max() < 1 / (255 * STD.min()) + 0.002


def test_fast_resampler_near_pillow(tmp_path, jpegs):
    """The default resampler rounds Pillow's weights to 16 bits: within 1 of the exact one
    here (2 at most by design), equal almost everywhere, but not everywhere."""
    differs = 0
    for f in jpegs:
        for rid in range(4):
            exact, _ = run_dump(tmp_path, f, "train", 224, 0, "uint8", "nhwc", 5, 1, rid,
                                antialias="always", resampler="pillow")
            fast, _ = run_dump(tmp_path, f, "train", 224, 0, "uint8", "nhwc", 5, 1, rid,
                               antialias="always")
            diff = np.abs(fast.astype(np.int32) - exact.astype(np.int32))
            assert diff.max() <= 2 and diff.mean() <= 0.05, (f.name, rid, diff.mean())
            differs += int(diff.max() > 0)
    assert differs > 0


def test_train_crop_resize_flip_equals_pillow(tmp_path, jpegs):
    """Train samples equal Pillow's crop + resize + flip. A crop at least twice the output
    size along both axes is decoded at 1/2 (1/4, 1/8) by default: then they equal Pillow's
    resize of the same box (fractional) on the image Pillow's draft mode decodes."""
    flips, scales = 0, []
    for f in jpegs:
        img = Image.open(f).convert("RGB")
        reduced = {}
        for rid in range(12):
            ours, geo = run_dump(tmp_path, f, "train", 96, 0, "uint8", "nhwc", 7, 2, rid,
                                 antialias="always", resampler="pillow")
            w, h, x, bw, y, bh, flip, scale = geo
            assert (w, h) == img.size
            assert 0 <= x and x + bw <= w and 0 <= y and y + bh <= h
            # the largest reduction after which the box still shrinks (or stays) to 96
            assert scale == 1 or (bw >= scale * 96 and bh >= scale * 96), (f.name, rid, geo)
            assert scale == 8 or bw < 2 * scale * 96 or bh < 2 * scale * 96, (f.name, rid, geo)
            if scale == 1:
                ref = img.crop((x, y, x + bw, y + bh)).resize((96, 96), Image.BILINEAR)
            else:
                if scale not in reduced:
                    reduced[scale] = reduced_decode(f, scale)
                ref = pil_box_resize(reduced[scale], scale, x, bw, y, bh, 96)
            if flip:
                ref = ref.transpose(Image.FLIP_LEFT_RIGHT)
                flips += 1
            assert np.array_equal(ours, np.asarray(ref)), (f.name, rid, scale)
            never, g = run_dump(tmp_path, f, "train", 96, 0, "uint8", "nhwc", 7, 2, rid,
                                antialias="always", resampler="pillow", dct_scale="never")
            assert g[7] == 1 and g[:7] == geo[:7]
            if scale == 1:
                assert np.array_equal(never, ours)
            else:  # another low-pass of the same box: close, not equal
                diff = np.abs(never.astype(np.int32) - ours.astype(np.int32))
                assert 0 < diff.mean() < 4, (f.name, rid, diff.mean())
            scales.append(scale)
    assert 0 < flips < 12 * len(jpegs)
    assert scales.count(1) > 0 and scales.count(2) > 0, scales


def test_dct_scale_options(tmp_path, jpegs):
    """dct_scale: "train" (the default) leaves eval to the full decode, "always" reduces
    eval too (Pillow's resize of the whole reduced image, box scaled alike), "never" never
    reduces."""
    f = jpegs[3]  # 640 x 480 resized to 97 x 73: 1/4 leaves 160 x 120, 1/8 would not do
    img = Image.open(f).convert("RGB")
    for dct_scale, want in [("train", 1), ("never", 1), ("always", 4)]:
        ours, geo = run_dump(tmp_path, f, "eval", 64, 73, "uint8", "nhwc",
                             antialias="always", resampler="pillow", dct_scale=dct_scale)
        assert geo[7] == want, (dct_scale, geo)
    rw, rh, left, top = eval_geometry(img, 64, 73)
    red = reduced_decode(f, 4)
    ref = red.resize((rw, rh), Image.BILINEAR, box=(0, 0, 640 / 4, 480 / 4))
    ref = np.asarray(ref.crop((left, top, left + 64, top + 64)))
    assert np.array_equal(ours, ref)
    full = pil_eval(img, 64, 73)
    assert 0 < np.abs(ours.astype(np.int32) - full.astype(np.int32)).mean() < 4


def test_train_is_deterministic(tmp_path, jpegs):
    a, ga = run_dump(tmp_path, jpegs[0], "train", 64, 0, "float16", "nchw", 11, 4, 5)
    b, gb = run_dump(tmp_path, jpegs[0], "train", 64, 0, "float16", "nchw", 11, 4, 5)
    c, gc = run_dump(tmp_path, jpegs[0], "train", 64, 0, "float16", "nchw", 11, 4, 6)
    assert ga == gb and np.array_equal(a, b)
    assert gc != ga


def test_cmyk_and_gray_equal_pillow_convert(tmp_path):
    base = photo(96, 96, 3)
    cases = {"cmyk.jpg": base.convert("CMYK"), "gray.jpg": base.convert("L")}
    for name, im in cases.items():
        p = tmp_path / name
        im.save(p, quality=92)
        # resize to the image's own size is the identity: the decoded pixels themselves
        ours, _ = run_dump(tmp_path, p, "resize", 96, 0, "uint8", "nhwc")
        ref = np.asarray(Image.open(p).convert("RGB"))
        mae = np.abs(ours.astype(np.int32) - ref.astype(np.int32)).mean()
        assert mae <= 1.0, (name, mae)


def test_torchvision_eval_agrees(tmp_path, jpegs):
    tv = pytest.importorskip("torchvision")
    T = tv.transforms
    tf = T.Compose([T.Resize(256), T.CenterCrop(224), T.ToTensor(),
                    T.Normalize(MEAN.tolist(), STD.tolist())])
    for f in jpegs:
        ref = tf(Image.open(f).convert("RGB")).numpy()
        exact, _ = run_dump(tmp_path, f, "eval", 224, 256, "float32", "nchw",
                            antialias="always", resampler="pillow")
        mae = np.abs(exact - ref).mean()
        assert mae < 0.002, (f.name, mae)
        ours, _ = run_dump(tmp_path, f, "eval", 224, 256, "float32", "nchw")
        mae = np.abs(ours - ref).mean()
        assert mae < 0.05, (f.name, mae)
