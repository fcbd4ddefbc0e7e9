# SPDX-License-Identifier: Apache-2.0
"""stoker-pack's colour conversions (--rgb) and downscaling (--max-side) against Pillow's
Image.convert("RGB") and BOX resize.

Each source image is packed alone by the real stoker-pack ($STOKER_PACK, else
$STOKER_BUILD_DIR/stoker-pack, else the one beside the library under test; skipped when
none is built), and the record it stored is read back through the library.

Tolerances: a conversion is judged by decoding our JPEG and comparing it with Pillow's own
convert("RGB") of the source, re-encoded by Pillow with the same encoder settings (quality
100, 4:2:0, accurate DCT). Both go through the same libjpeg encoder, so JPEG's own loss
cancels and what remains is the conversion: mean absolute error <= 1 (docs/SEMANTICS.md). As a
second, looser check, the result is compared with the unencoded conversion: on smooth
images 4:2:0 at quality 100 costs well under 2 levels, so <= 2 there.
"""
import io
import itertools
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest
from PIL import Image

import stoker
from conftest import _library


def _find_pack():
    build = os.environ.get("STOKER_BUILD_DIR")
    for tool in (os.environ.get("STOKER_PACK"),
                 os.path.join(build, "stoker-pack") if build else None,
                 os.path.join(os.path.dirname(_library()), "stoker-pack")):
        if tool and os.access(tool, os.X_OK):
            return tool
    return None


PACK = _find_pack()
pytestmark = pytest.mark.skipif(PACK is None, reason="stoker-pack is not built")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def pack(tmp_path):
    """pack(data, rgb=True, max_side=0, quality=100): the record stoker-pack stores for the
    image `data`, or None when it stores the bytes as they are."""
    runs = itertools.count()

    def run(data, rgb=True, max_side=0, quality=100):
        work = tmp_path / ("run%d" % next(runs))
        (work / "src" / "c").mkdir(parents=True)
        ext = ".png" if data.startswith(PNG_SIGNATURE) else ".jpg"
        (work / "src" / "c" / ("image" + ext)).write_bytes(data)
        args = [PACK, "--quiet", "--no-fsync", "--quality", str(quality)]
        args += ["--rgb"] if rgb else []
        args += ["--max-side", str(max_side)] if max_side else []
        done = subprocess.run(args + [str(work / "src"), str(work / "out")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        with stoker.Dataset(str(work / "out")) as ds:
            assert len(ds) == 1
            stored = ds.read(0)
        return None if stored == data else stored

    return run


def smooth(w, h, channels, seed=0):
    """Smooth gradients with a little texture, different per channel."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = []
    for c in range(channels):
        v = (127 + 100 * np.sin(x / (17 + 5 * c) + seed) * np.cos(y / (23 + 3 * c))
             + 20 * np.sin((x + y) / 7.0 + c))
        planes.append(np.clip(v, 0, 255))
    return np.stack(planes, -1).astype(np.uint8)


def encoded(img, fmt, **kw):
    b = io.BytesIO()
    img.save(b, fmt, **kw)
    return b.getvalue()


def decode_rgb(data):
    im = Image.open(io.BytesIO(data))
    assert im.format == "JPEG" and im.mode == "RGB"
    return np.asarray(im).astype(np.int32)


def check(pack, src_bytes, tight=1.0, loose=2.0):
    ours = pack(src_bytes)
    assert ours is not None
    got = decode_rgb(ours)
    want = Image.open(io.BytesIO(src_bytes)).convert("RGB")
    ref = decode_rgb(encoded(want, "JPEG", quality=100, subsampling=2))
    assert got.shape == ref.shape
    e_tight = np.abs(got - ref).mean()
    e_loose = np.abs(got - np.asarray(want).astype(np.int32)).mean()
    assert e_tight <= tight, f"conversion differs from Pillow's by {e_tight:.3f}"
    assert e_loose <= loose, f"result differs from Pillow's conversion by {e_loose:.3f}"


def strip_adobe(jpeg):
    """Removes the APP14 'Adobe' segment, leaving a plain (unmarked) CMYK JPEG."""
    i = 2
    out = bytearray(jpeg[:2])
    while i < len(jpeg):
        marker = jpeg[i + 1]
        length = struct.unpack(">H", jpeg[i + 2:i + 4])[0]
        seg = jpeg[i:i + 2 + length]
        if marker == 0xDA:
            out += jpeg[i:]
            break
        if not (marker == 0xEE and seg[4:9] == b"Adobe"):
            out += seg
        i += 2 + length
    return bytes(out)


def test_cmyk_adobe(pack):
    src = encoded(Image.fromarray(smooth(96, 64, 4), "CMYK"), "JPEG", quality=100)
    assert b"Adobe" in src
    check(pack, src)


def test_cmyk_plain(pack):
    src = strip_adobe(encoded(Image.fromarray(smooth(96, 64, 4, 1), "CMYK"), "JPEG",
                              quality=100))
    assert b"Adobe" not in src
    assert Image.open(io.BytesIO(src)).mode == "CMYK"
    check(pack, src)


def test_grayscale(pack):
    src = encoded(Image.fromarray(smooth(80, 60, 1)[:, :, 0], "L"), "JPEG", quality=95)
    check(pack, src)


def test_png_rgba(pack):
    src = encoded(Image.fromarray(smooth(70, 50, 4, 2), "RGBA"), "PNG")
    check(pack, src)


def test_png_palette(pack):
    img = Image.fromarray(smooth(64, 64, 3, 3), "RGB").convert("P", palette=Image.ADAPTIVE)
    src = encoded(img, "PNG")
    assert Image.open(io.BytesIO(src)).mode == "P"
    check(pack, src)


def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def test_png_16bit(pack):
    w, h = 48, 40
    px = (smooth(w, h, 3, 4).astype(np.uint16) * 257
          + np.arange(w, dtype=np.uint16)[None, :, None])  # low bytes differ from high
    raw = b"".join(b"\0" + px[y].astype(">u2").tobytes() for y in range(h))
    src = (b"\x89PNG\r\n\x1a\n"
           + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
           + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))
    assert Image.open(io.BytesIO(src)).mode == "RGB"
    check(pack, src)


def test_rgb_jpeg_untouched(pack):
    src = encoded(Image.fromarray(smooth(40, 30, 3)), "JPEG", quality=90)
    assert pack(src) is None


def test_resize_matches_pillow_box(pack):
    img = Image.fromarray(smooth(400, 300, 3, 5))
    src = encoded(img, "JPEG", quality=100, subsampling=0)
    got = decode_rgb(pack(src, rgb=False, max_side=100, quality=100))
    assert got.shape == (75, 100, 3)
    box = Image.open(io.BytesIO(src)).resize((100, 75), Image.BOX)
    want = decode_rgb(encoded(box, "JPEG", quality=100, subsampling=2))
    # libjpeg's DCT scaling does the first halving, an exact area average the rest: close
    # to, not identical with, one box filter.
    e = np.abs(got - want).mean()
    assert e <= 1.5, f"resized image differs from Pillow's BOX resize by {e:.3f}"
