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
