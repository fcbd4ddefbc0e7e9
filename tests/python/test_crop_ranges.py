# SPDX-License-Identifier: Apache-2.0
"""The train transform's RandomResizedCrop ranges, scale=(min, max) and ratio=(min, max)
(torchvision's names): they reach the crop (a scale of 1 and the images' own ratio crop
the whole image, so the train transform gives the resize transform's sample, mirrored where
it flips), read back as the loader resolved them, and bad ranges are refused naming the
options. The geometry of other ranges is test_transform's (C)."""
import io

import numpy as np
import pytest
from PIL import Image

import stoker

N = 16
W, H = 64, 48


@pytest.fixture(scope="module")
def jpeg_ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("crop") / "ds"
    rng = np.random.default_rng(11)
    with stoker.Writer(path, kind="jpeg", fsync=False) as w:
        for i in range(N):
            y, x = np.mgrid[0:H, 0:W]
            img = np.stack([x * 4, y * 5, (x * y + i * 13) % 256], axis=-1) + rng.integers(
                0, 30, (H, W, 3))
            buf = io.BytesIO()
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").save(buf, "JPEG",
                                                                             quality=90)
            w.add(buf.getvalue(), i)
    return path


def samples(path, **kw):
    out = {}
    with stoker.Loader(path, 8, seed=3, size=24, dtype="uint8", layout="nhwc", device="cpu",
                       threads=2, decoder="cpu", dct_scale="never", **kw) as loader:
        for b in loader:
            for i, s in zip(b.indices, b.numpy()):
                out[int(i)] = s.copy()
    return out


def test_scale_one_and_the_images_ratio_crop_the_whole_image(jpeg_ds):
    whole = samples(jpeg_ds, transform="resize")
    train = samples(jpeg_ds, transform="train", scale=(1, 1), ratio=(W / H, W / H))
    default = samples(jpeg_ds, transform="train")
    mirrored = 0
    for i in range(N):
        if np.array_equal(train[i], whole[i][:, ::-1]):
            mirrored += 1
        else:
            assert np.array_equal(train[i], whole[i]), i
    assert 0 < mirrored < N  # the flips still drawn
    # the default ranges crop otherwise: the options made the difference
    assert sum(not np.array_equal(default[i], train[i]) for i in range(N)) >= N - 2


def test_ranges_read_back(jpeg_ds, raw_ds):
    with stoker.Loader(jpeg_ds, 4, device="cpu") as loader:
        assert loader.scale == (0.08, 1.0) and loader.ratio == (0.75, 4 / 3)
    with stoker.Loader(jpeg_ds, 4, device="cpu", scale=(0.35, 1), ratio=[0.5, 2]) as loader:
        assert loader.scale == (0.35, 1.0) and loader.ratio == (0.5, 2.0)
    with stoker.Loader(raw_ds, 4, device="cpu") as loader:  # no image transform
        assert loader.scale is None and loader.ratio is None


@pytest.mark.parametrize("kw,exc,needle", [
    ({"scale": (0.5, 0.2)}, stoker.InvalidError, "scale 0.5 to 0.2 (scale_min to scale_max)"),
    ({"ratio": (2, 1)}, stoker.InvalidError, "ratio 2 to 1 (ratio_min to ratio_max)"),
    ({"scale": (0, 1)}, stoker.InvalidError, "scale_min"),
    ({"scale": (0.5, 1.5)}, stoker.InvalidError, "scale_max"),
    ({"ratio": (-1, 1)}, stoker.InvalidError, "ratio_min"),
    ({"scale": 0.5}, TypeError, "scale must be two numbers (min, max)"),
    ({"ratio": (1, 2, 3)}, TypeError, "ratio must be two numbers"),
    ({"scale": (True, 1)}, TypeError, "scale must be two numbers"),
    ({"scale_min": 0.5}, TypeError, "scale_min"),
])
def test_bad_ranges_are_refused(jpeg_ds, kw, exc, needle):
    with pytest.raises(exc) as e:
        stoker.Loader(jpeg_ds, 4, device="cpu", **kw)
    assert needle in str(e.value), str(e.value)
