# SPDX-License-Identifier: Apache-2.0
"""PNG decoding (src/decode/png.c) against Pillow: PNGs written here by Pillow, of every mode a
data set meets, decoded by the C program test_png (tests/test_png.c, `decode` mode) and
compared pixel for pixel with Pillow's own decode: RGB mode with convert("RGB"), mask mode with
the stored samples (a palette image's indices, not its colours). 16-bit gray, which Pillow's
convert clips rather than scales, is compared with its samples' high byte.

The program: $STOKER_BUILD_DIR/tests/test_png, else build/tests/test_png in the repository;
skipped when it is not built, or was built without libspng."""
import os
import subprocess

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def program():
    build = os.environ.get("STOKER_BUILD_DIR") or os.path.join(ROOT, "build")
    path = os.path.join(build, "tests", "test_png")
    if not os.path.exists(path):
        pytest.skip("test_png was not built (%s)" % path)
    return path


def decode(path, mode, out, max_pixels=None):
    """(rc, stdout) of the program decoding `path` in `mode` ("rgb" or "mask") to `out`."""
    args = [program(), "decode", mode, str(path), str(out)]
    if max_pixels is not None:
        args.append(str(max_pixels))
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if p.returncode == 77 or "without libspng" in p.stdout:
        pytest.skip("built without libspng")
    return p.returncode, p.stdout.strip()


def decoded(path, mode, tmp_path):
    out = tmp_path / (path.name + "." + mode)
    rc, text = decode(path, mode, out)
    assert rc == 0, text
    w, h = map(int, text.split())
    a = np.fromfile(out, dtype=np.uint8)
    return a.reshape(h, w, 3) if mode == "rgb" else a.reshape(h, w)


def pixels(h, w, c, seed):
    return np.random.default_rng(seed).integers(0, 256, size=(h, w, c), dtype=np.uint8)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "LA"])
def test_rgb_matches_pillow(tmp_path, mode):
    c = len(mode)
    a = pixels(37, 53, c, 1)
    img = Image.fromarray(a[:, :, 0] if c == 1 else a, mode)
    path = tmp_path / ("x_%s.png" % mode)
    img.save(path)
    want = np.asarray(Image.open(path).convert("RGB"))
    np.testing.assert_array_equal(decoded(path, "rgb", tmp_path), want)


@pytest.mark.parametrize("bits", [8, 4, 2, 1])
def test_palette_colours_and_indices(tmp_path, bits):
    n = 1 << bits
    rng = np.random.default_rng(bits)
    idx = rng.integers(0, n, size=(29, 31), dtype=np.uint8)
    img = Image.fromarray(idx, "P")
    img.putpalette(rng.integers(0, 256, size=3 * n, dtype=np.uint8).tolist())
    path = tmp_path / ("p%d.png" % bits)
    img.save(path, bits=bits)
    with Image.open(path) as f:
        assert f.mode == "P"
        stored = np.asarray(f)
        rgb = np.asarray(f.convert("RGB"))
    np.testing.assert_array_equal(stored, idx)  # Pillow kept the indices we wrote
    np.testing.assert_array_equal(decoded(path, "mask", tmp_path), idx)
    np.testing.assert_array_equal(decoded(path, "rgb", tmp_path), rgb)


def test_gray_mask_is_its_values(tmp_path):
    a = pixels(40, 41, 1, 3)[:, :, 0]
    path = tmp_path / "m.png"
    Image.fromarray(a, "L").save(path)
    np.testing.assert_array_equal(decoded(path, "mask", tmp_path), a)


def test_16bit_gray_keeps_high_byte(tmp_path):
    a = np.random.default_rng(4).integers(0, 65536, size=(23, 19), dtype=np.uint16)
    path = tmp_path / "g16.png"
    Image.fromarray(a, "I;16").save(path)
    with Image.open(path) as f:
        np.testing.assert_array_equal(np.asarray(f).astype(np.uint16), a)
    want = np.repeat((a >> 8).astype(np.uint8)[:, :, None], 3, axis=2)
    np.testing.assert_array_equal(decoded(path, "rgb", tmp_path), want)
    rc, text = decode(path, "mask", tmp_path / "o")
    assert rc == 2 and "error -10001" in text and "one channel" in text, text


def test_rgb_is_not_a_mask(tmp_path):
    path = tmp_path / "rgb.png"
    Image.fromarray(pixels(8, 8, 3, 5), "RGB").save(path)
    rc, text = decode(path, "mask", tmp_path / "o")
    assert rc == 2 and "error -10001" in text and "colour type 2" in text, text


def test_truncated_and_limit(tmp_path):
    path = tmp_path / "t.png"
    Image.fromarray(pixels(64, 64, 3, 6), "RGB").save(path)
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 1, 20):
        short = tmp_path / ("cut%d.png" % cut)
        short.write_bytes(data[:cut])
        rc, text = decode(short, "rgb", tmp_path / "o")
        assert rc == 2 and "error -10003" in text and "PNG" in text, (cut, text)
    rc, text = decode(path, "rgb", tmp_path / "o", max_pixels=64 * 64 - 1)
    assert rc == 2 and "error -10004" in text and "4096 pixels" in text, text
    rc, text = decode(path, "rgb", tmp_path / "o", max_pixels=64 * 64)
    assert rc == 0, text
