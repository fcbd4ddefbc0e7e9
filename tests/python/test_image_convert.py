"""stoker_image_transcode's colour conversions against Pillow's Image.convert("RGB").

Runs the real shared library through ctypes; STOKER_LIBRARY names it (skipped when unset).

Tolerances: a conversion is judged by decoding our JPEG and comparing it with Pillow's own
convert("RGB") of the source, re-encoded by Pillow with the same encoder settings (quality
100, 4:2:0, accurate DCT). Both go through the same libjpeg encoder, so JPEG's own loss
cancels and what remains is the conversion: mean absolute error <= 1 (docs/SEMANTICS.md). As a
second, looser check, the result is compared with the unencoded conversion: on smooth
images 4:2:0 at quality 100 costs well under 2 levels, so <= 2 there.
"""
import ctypes
import io
import os
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

LIB = os.environ.get("STOKER_LIBRARY")
pytestmark = pytest.mark.skipif(not LIB, reason="STOKER_LIBRARY is not set")

TO_RGB = 2


@pytest.fixture(scope="module")
def lib():
    lib = ctypes.CDLL(LIB)
    f = lib.stoker_image_transcode
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_int32,
                  ctypes.c_int32, ctypes.c_uint64, ctypes.POINTER(ctypes.c_void_p),
                  ctypes.POINTER(ctypes.c_size_t), ctypes.c_char_p, ctypes.c_size_t]
    f.restype = ctypes.c_int
    lib.stoker_free.argtypes = [ctypes.c_void_p]
    lib.stoker_free.restype = None
    return lib


def transcode(lib, data, flags=TO_RGB, max_side=0, quality=100):
    out = ctypes.c_void_p()
    size = ctypes.c_size_t()
    msg = ctypes.create_string_buffer(512)
    rc = lib.stoker_image_transcode(data, len(data), flags, max_side, quality, 0,
                                    ctypes.byref(out), ctypes.byref(size), msg, len(msg))
    assert rc == 0, msg.value.decode()
    if not out.value:
        return None
    try:
        return ctypes.string_at(out.value, size.value)
    finally:
        lib.stoker_free(out)


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


def check(lib, src_bytes, tight=1.0, loose=2.0):
    ours = transcode(lib, src_bytes)
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


def test_cmyk_adobe(lib):
    src = encoded(Image.fromarray(smooth(96, 64, 4), "CMYK"), "JPEG", quality=100)
    assert b"Adobe" in src
    check(lib, src)


def test_cmyk_plain(lib):
    src = strip_adobe(encoded(Image.fromarray(smooth(96, 64, 4, 1), "CMYK"), "JPEG",
                              quality=100))
    assert b"Adobe" not in src
    assert Image.open(io.BytesIO(src)).mode == "CMYK"
    check(lib, src)


def test_grayscale(lib):
    src = encoded(Image.fromarray(smooth(80, 60, 1)[:, :, 0], "L"), "JPEG", quality=95)
    check(lib, src)


def test_png_rgba(lib):
    src = encoded(Image.fromarray(smooth(70, 50, 4, 2), "RGBA"), "PNG")
    check(lib, src)


def test_png_palette(lib):
    img = Image.fromarray(smooth(64, 64, 3, 3), "RGB").convert("P", palette=Image.ADAPTIVE)
    src = encoded(img, "PNG")
    assert Image.open(io.BytesIO(src)).mode == "P"
    check(lib, src)


def png_chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


def test_png_16bit(lib):
    w, h = 48, 40
    px = (smooth(w, h, 3, 4).astype(np.uint16) * 257
          + np.arange(w, dtype=np.uint16)[None, :, None])  # low bytes differ from high
    raw = b"".join(b"\0" + px[y].astype(">u2").tobytes() for y in range(h))
    src = (b"\x89PNG\r\n\x1a\n"
           + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
           + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))
    assert Image.open(io.BytesIO(src)).mode == "RGB"
    check(lib, src)


def test_rgb_jpeg_untouched(lib):
    src = encoded(Image.fromarray(smooth(40, 30, 3)), "JPEG", quality=90)
    assert transcode(lib, src) is None


def test_resize_matches_pillow_box(lib):
    img = Image.fromarray(smooth(400, 300, 3, 5))
    src = encoded(img, "JPEG", quality=100, subsampling=0)
    got = decode_rgb(transcode(lib, src, flags=0, max_side=100, quality=100))
    assert got.shape == (75, 100, 3)
    box = Image.open(io.BytesIO(src)).resize((100, 75), Image.BOX)
    want = decode_rgb(encoded(box, "JPEG", quality=100, subsampling=2))
    # libjpeg's DCT scaling does the first halving, an exact area average the rest: close
    # to, not identical with, one box filter.
    e = np.abs(got - want).mean()
    assert e <= 1.5, f"resized image differs from Pillow's BOX resize by {e:.3f}"
