# SPDX-License-Identifier: Apache-2.0
"""The train transform's flips (the vflip and hflip options, probabilities): a record
flipped vertically is the unflipped sample mirrored top to bottom, one flipped horizontally
left to right, each decision a pure function of (seed, epoch, id), so 0 never flips and 1
always does; the default hflip 0.5 flips some records and keeps others."""
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


def samples(path, vflip=None, epoch=0, threads=2, **kw):
    """{id: (H, W, 3) uint8 sample} of one epoch of the train transform."""
    out = {}
    if vflip is not None:
        kw["vflip"] = vflip
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


def test_hflip_zero_never_flips_one_always_and_the_default_some(jpeg_ds):
    never = samples(jpeg_ds, hflip=0)
    always = samples(jpeg_ds, hflip=1.0)
    default = samples(jpeg_ds)
    assert sorted(never) == sorted(always) == list(range(N))
    mirrored = 0
    for i in range(N):
        # the same crop, mirrored left to right
        assert np.array_equal(always[i], never[i][:, ::-1]), i
        assert not np.array_equal(always[i], never[i]), i
        if np.array_equal(default[i], always[i]):
            mirrored += 1
        else:
            assert np.array_equal(default[i], never[i]), i
    assert 0 < mirrored < N
    # with vflip: both mirrors
    both = samples(jpeg_ds, 1.0, hflip=1.0)
    assert all(np.array_equal(both[i], never[i][::-1, ::-1]) for i in range(N))


def test_hflip_reads_back_and_refuses_what_is_not_a_probability(jpeg_ds, raw_ds):
    with stoker.Loader(jpeg_ds, 8, device="cpu") as loader:
        assert loader.hflip == 0.5
    for p in (0, 0.0, 0.3, 1):
        with stoker.Loader(jpeg_ds, 8, hflip=p, device="cpu") as loader:
            assert loader.hflip == p
    with stoker.Loader(raw_ds, 8, device="cpu") as loader:  # no image transform
        assert loader.hflip is None
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="hflip"):
            stoker.Loader(jpeg_ds, 8, hflip=bad, device="cpu")
