# SPDX-License-Identifier: Apache-2.0
"""Who decodes JPEGs (Loader(decoder=)): the names are the library's, the loader reads back
the decoder in effect, and stats() carries the decoder's figures of stoker_stats. Without a
GPU for the batches (device="cpu", or no usable GPU) the workers decode every image, and
the statistics say so and why."""
import re
import time

import pytest

import stoker
from stoker import _lib
from test_loader import run_epoch, write_patterns

DECODER_STATS = ("decoder", "cpu_decoded", "gpu_decoded", "gpu_retried", "gpu_fallbacks",
                 "gpu_share", "cpu_busy", "gpu_busy", "decoder_note")


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    return write_patterns(tmp_path_factory.mktemp("decoder"))


def settled(loader, timeout=30.0, still=0.5):
    """stats() once the workers have stopped: the ring is full of the next epoch's batches,
    and neither the records read nor the images decoded have changed for `still` s."""
    end = time.monotonic() + timeout
    last = None
    since = time.monotonic()
    while time.monotonic() < end:
        st = loader.stats()
        now = (st["records_read"], st["cpu_decoded"], st["gpu_decoded"])
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= still:
            return st
        time.sleep(0.02)
    raise AssertionError("the loader's workers did not stop within %g s: %r" % (timeout, last))


@pytest.mark.parametrize("asked", ["auto", "cpu", "gpu", "GPU", None])
def test_host_batches_are_decoded_by_the_cpu(jpegs, asked):
    with stoker.Loader(jpegs, 2, device="cpu", threads=2, size=32, decoder=asked) as loader:
        assert loader.device == "cpu"
        assert loader.decoder == "cpu", asked  # the one in effect, not the one asked
        st = loader.stats()
        assert st["decoder"] == "cpu"
        assert st["decoder_note"], "no reason given for decoding on the CPU (%r)" % asked


def test_default_device_without_a_gpu_decodes_on_the_cpu(jpegs):
    """The default device is a GPU when one is usable; a loader delivering host batches
    decodes on the CPU, and says why."""
    with stoker.Loader(jpegs, 2, threads=2, size=32) as loader:
        if loader.device != "cpu":
            pytest.skip("batches go to %s here" % loader.device)
        assert loader.decoder == "cpu"
        assert loader.stats()["decoder_note"]


def test_decoder_names_are_the_librarys(jpegs):
    names = {_lib.DECODER.name(v) for v in _lib.DECODER.values.values()}
    assert names == {"auto", "cpu", "gpu"}
    for bad in ("nvjpeg", "", "cpu "):
        with pytest.raises(ValueError, match="decoder must be one of auto, cpu, gpu, got %r"
                           % bad):
            stoker.Loader(jpegs, 2, device="cpu", decoder=bad)
    with pytest.raises(TypeError, match="decoder must be a str"):
        stoker.Loader(jpegs, 2, device="cpu", decoder=1)


def test_raw_records_have_no_decoder(raw_ds):
    with stoker.Loader(raw_ds, 8, device="cpu", decoder="cpu") as loader:
        assert loader.decoder is None  # no image pipeline runs
        assert set(DECODER_STATS) <= set(loader.stats())
    # nothing for the GPU to decode: refused, naming the data set
    with pytest.raises(stoker.UnsupportedError, match=re.escape(raw_ds) + ": .*not decoded"):
        stoker.Loader(raw_ds, 8, device="cpu", decoder="gpu")


def test_stats_count_what_each_side_decoded(jpegs):
    with stoker.Loader(jpegs, 2, device="cpu", threads=2, size=32, shuffle=False,
                       decoder="auto") as loader:
        ids, _, data, _ = run_epoch(loader)
        delivered = sum(len(i) for i in ids)
        assert delivered == 4 and data[0].shape == (2, 3, 32, 32)
        st = settled(loader)
    missing = [k for k in DECODER_STATS if k not in st]
    assert not missing, missing
    assert isinstance(st["decoder_note"], str) and st["decoder_note"]
    assert st["decoder"] == "cpu"
    # every record read (the next epoch's read-ahead too) was decoded by the workers
    assert st["records_read"] >= delivered
    assert st["cpu_decoded"] == st["records_read"], st
    assert (st["gpu_decoded"], st["gpu_retried"], st["gpu_fallbacks"]) == (0, 0, 0), st
    assert st["gpu_share"] == 0 and st["gpu_busy"] == 0, st
    assert 0 <= st["cpu_busy"] <= 1, st


def test_stats_struct_mirror_reads_the_decoder_fields(jpegs):
    """The mirrored stoker_stats: the same figures as stats(), the note NUL-terminated."""
    import ctypes
    with stoker.Loader(jpegs, 2, device="cpu", threads=2, size=32) as loader:
        run_epoch(loader)
        st = settled(loader)
        raw = _lib.Stats()
        raw.struct_size = ctypes.sizeof(raw)
        assert _lib.lib.stoker_loader_get_stats(loader._core.handle, ctypes.byref(raw)) == 0
    assert _lib.DECODER.name(raw.decoder) == st["decoder"] == "cpu"
    assert (raw.cpu_decoded, raw.gpu_decoded) == (st["cpu_decoded"], st["gpu_decoded"])
    assert raw.decoder_note.decode() == st["decoder_note"]
    assert len(raw.decoder_note) < 160


def _samples(tmp_path, image_kind):
    """Eight samples of an image (JPEG or PNG), its mask and a label."""
    import io
    import numpy as np
    from PIL import Image
    path = str(tmp_path / ("fields-" + image_kind))
    fields = {"image": image_kind, "mask": {"kind": "png", "mask_of": "image"},
              "label": "int64"}
    with stoker.Writer(path, fields=fields) as w:
        for i in range(8):
            yy, xx = np.mgrid[0:40 + i, 0:48]
            rgb = np.stack([xx * 5, yy * 6, (xx + yy + i) * 2], -1).astype(np.uint8)
            img, mask = io.BytesIO(), io.BytesIO()
            Image.fromarray(rgb).save(img, format=image_kind.upper())
            Image.fromarray(((xx // 8 + yy // 8) % 3).astype(np.uint8)).save(mask, format="PNG")
            w.add({"image": img.getvalue(), "mask": mask.getvalue(), "label": i})
    return path


def test_samples_of_several_fields_take_the_gpu_decoder(tmp_path):
    """A sample's JPEG field is the GPU decode stage's as a data set of JPEGs is: asked for
    here, without a GPU for the batches, it leaves the workers every image and says why;
    the batches, every field, are decoder="cpu"'s."""
    import numpy as np
    path = _samples(tmp_path, "jpeg")
    got = {}
    for asked in ("gpu", "cpu"):
        with stoker.Loader(path, 4, device="cpu", threads=2, size=24, shuffle=False,
                           decoder=asked) as loader:
            assert loader.decoder == "cpu"
            if asked == "gpu":
                assert loader.stats()["decoder_note"] == "batches stay in host memory"
            got[asked] = [{k: np.from_dlpack(v).copy() for k, v in b.items()} for b in loader]
    assert len(got["gpu"]) == len(got["cpu"]) == 2
    for a, b in zip(got["gpu"], got["cpu"]):
        assert a.keys() == b.keys() == {"image", "mask", "label"}
        for k in a:
            assert np.array_equal(a[k], b[k]), k


def test_images_the_gpu_decoder_cannot_take_are_named(tmp_path):
    """PNG images, or no image in the batch: decoder="gpu" is refused naming the data set and
    the cause; "auto" leaves the workers every image, with the cause as its note."""
    png = _samples(tmp_path, "png")
    with pytest.raises(stoker.UnsupportedError,
                       match=re.escape(png) + ": .*JPEG.*the data set's images are PNGs"):
        stoker.Loader(png, 4, device="cpu", size=24, decoder="gpu")
    with stoker.Loader(png, 4, device="cpu", threads=2, size=24, decoder="auto") as loader:
        assert loader.decoder == "cpu"
        assert loader.stats()["decoder_note"] == "the data set's images are PNGs"
        assert next(iter(loader))["image"].shape == (4, 3, 24, 24)
    jpeg = _samples(tmp_path, "jpeg")
    with pytest.raises(stoker.UnsupportedError, match="the batch delivers no image"):
        stoker.Loader(jpeg, 4, device="cpu", size=24, decoder="gpu", fields=["label"])
