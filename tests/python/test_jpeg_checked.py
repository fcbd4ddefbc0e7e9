# SPDX-License-Identifier: Apache-2.0
"""Writer(jpeg_checked=True) marks a JPEG data set as checked (manifest version 2), which
Dataset.jpeg_checked reads back; without it the manifest stays at version 1. The mark is for
JPEG data sets only."""
import pytest

import stoker
from stoker.errors import StokerError

SOI_EOI = b"\xff\xd8\xff\xd9"


def write(path, checked, kind="jpeg"):
    with stoker.Writer(str(path), kind=kind, fsync=False, jpeg_checked=checked) as w:
        for i in range(3):
            w.add(SOI_EOI, i)


@pytest.mark.parametrize("checked", [False, True])
def test_mark_round_trip(tmp_path, checked):
    write(tmp_path / "ds", checked)
    head = (tmp_path / "ds" / "manifest.stk").read_bytes().split(b"\n")[:4]
    with stoker.Dataset(str(tmp_path / "ds")) as ds:
        assert ds.jpeg_checked is checked
        assert ds.format_version == (2 if checked else 1)
        assert len(ds) == 3
    if checked:
        assert head == [b"stoker-manifest 2", b"align 4096", b"field jpeg", b"checked jpeg"]
    else:
        assert head[0] == b"stoker-manifest 1" and b"checked jpeg" not in head


def test_mark_is_for_jpeg_only(tmp_path):
    with pytest.raises(StokerError, match="JPEG_CHECKED"):
        write(tmp_path / "ds", True, kind="bytes")
    assert not (tmp_path / "ds").exists()
    with pytest.raises(TypeError):
        write(tmp_path / "ds2", "yes")
