# SPDX-License-Identifier: Apache-2.0
"""The train transform's vertical flip (the vflip option, a probability): a record flipped
vertically is the unflipped sample mirrored top to bottom, the decision a pure function of
(seed, epoch, id) like the horizontal flip's, so 0 never flips and 1 always does."""
import io

import numpy as np
import pytest
from PIL import Image

import stoker

N = 24


@pytest.fixture(scope="module")
def jpeg_ds(tmp_path_factory):
    path = tmp_path_factory.mktemp("vflip") / "ds"
    rng = np.random.default_rng(3)
    with stoker.Writer(path, kind="jpeg", fsync=False) as w:
        for i in range(N):
            h, wd = 40 + 3 * i, 60 + 2 * i
            y, x = np.mgrid[0:h, 0:wd]
            img = np.stack([x * 4, y * 5, (x + y + i * 7) % 256], axis=-1) + rng.integers(
                0, 20, (h, wd, 3))
            buf = io.BytesIO()
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB").save(buf, "JPEG",
                                                                             quality=92)
            w.add(buf.getvalue(), i)
    return path


def samples(path, vflip=None, epoch=0, threads=2):
    """{id: (H, W, 3) uint8 sample} of one epoch of the train transform."""
    out = {}
    kw = {} if vflip is None else {"vflip": vflip}
    with stoker.Loader(path, 8, seed=5, epoch=epoch, transform="train", size=32,
                       dtype="uint8", layout="nhwc", device="cpu", threads=threads,
                       decoder="cpu", **kw) as loader:
        for b in loader:
            for i, s in zip(b.indices, b.numpy()):
                out[int(i)] = s.copy()
    return out


def test_zero_never_flips_and_one_always_flips(jpeg_ds):
    plain = samples(jpeg_ds)
    assert all(np.array_equal(plain[i], s) for i, s in samples(jpeg_ds, 0.0).items())
    flipped = samples(jpeg_ds, 1.0)
    assert sorted(flipped) == sorted(plain) == list(range(N))
    for i in range(N):
        # the same crop and horizontal flip, mirrored top to bottom (numpy's flipud)
        assert np.array_equal(flipped[i], plain[i][::-1]), i
        assert not np.array_equal(flipped[i], plain[i]), i


def test_a_half_flips_some_by_seed_epoch_and_id(jpeg_ds):
    plain = samples(jpeg_ds)
    half = samples(jpeg_ds, 0.5)
    flipped = [i for i in range(N) if np.array_equal(half[i], plain[i][::-1])]
    kept = [i for i in range(N) if np.array_equal(half[i], plain[i])]
    assert sorted(flipped + kept) == list(range(N)) and flipped and kept
    # the decision is the record's, whatever thread drew it
    assert all(np.array_equal(half[i], s) for i, s in samples(jpeg_ds, 0.5, threads=1).items())
    # and another epoch draws again (the crops too)
    assert any(not np.array_equal(half[i], s) for i, s in samples(jpeg_ds, 0.5, epoch=1).items())


def test_the_option_reads_back_and_refuses_what_is_not_a_probability(jpeg_ds):
    with stoker.Loader(jpeg_ds, 8, vflip=0.25, device="cpu") as loader:
        assert loader.vflip == 0.25
    with stoker.Loader(jpeg_ds, 8, device="cpu") as loader:
        assert loader.vflip == 0.0
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="vflip"):
            stoker.Loader(jpeg_ds, 8, vflip=bad, device="cpu")
    with pytest.raises(TypeError, match="vflip"):
        stoker.Loader(jpeg_ds, 8, vflip="half", device="cpu")
