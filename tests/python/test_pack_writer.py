# SPDX-License-Identifier: Apache-2.0
"""The writer's STOKER_OPT_OVERWRITE replaces a previous stoker data set (or an empty folder)
and nothing else: a regular file, a symbolic link, a folder of other files, a data set with a
foreign entry beside its shards are refused by name (ExistsError), before anything is
written, and every file of theirs is still there afterwards."""
import os

import pytest

import stoker
from stoker.errors import ExistsError


def tree_state(path):
    """Every entry under path with its bytes (files) or None (folders, links as targets)."""
    out = {}
    for root, dirs, files in os.walk(path):
        for d in dirs:
            p = os.path.join(root, d)
            out[os.path.relpath(p, path)] = ("link", os.readlink(p)) if os.path.islink(p) else None
        for f in files:
            p = os.path.join(root, f)
            out[os.path.relpath(p, path)] = open(p, "rb").read()
    return out


def write(path, records, overwrite=True):
    with stoker.Writer(str(path), overwrite=overwrite, fsync=False) as w:
        for i in range(records):
            w.add(b"record %d" % i, i)


def records(path):
    with stoker.Dataset(str(path)) as ds:
        return len(ds)


def refused(path, *names):
    with pytest.raises(ExistsError) as e:
        write(path, 2)
    for name in (str(path),) + names:
        assert name in str(e.value), (name, str(e.value))
    return str(e.value)


def no_temp(folder):
    assert not [n for n in os.listdir(folder) if ".tmp-" in n], os.listdir(folder)


def test_regular_file_is_refused(tmp_path):
    f = tmp_path / "out"
    f.write_bytes(b"the user's file")
    assert "not a stoker data set" in refused(f)
    assert f.read_bytes() == b"the user's file"
    no_temp(tmp_path)


def test_folder_of_other_files_is_refused(tmp_path):
    d = tmp_path / "out"
    (d / "sub").mkdir(parents=True)
    (d / "a.jpg").write_bytes(b"a")
    (d / "sub" / "b.txt").write_bytes(b"b")
    before = tree_state(d)
    assert "manifest.stk" in refused(d)
    assert tree_state(d) == before
    no_temp(tmp_path)


@pytest.mark.parametrize("foreign", ["notes.txt", "shard-1.stk", ".hidden", "shard-00001.stkx"])
def test_data_set_with_a_foreign_file_is_refused(tmp_path, foreign):
    d = tmp_path / "out"
    write(d, 3, overwrite=False)
    (d / foreign).write_bytes(b"not stoker's")
    before = tree_state(d)
    refused(d, foreign)
    assert tree_state(d) == before
    assert records(d) == 3
    no_temp(tmp_path)


def test_folder_named_like_a_shard_is_refused(tmp_path):
    d = tmp_path / "out"
    write(d, 3, overwrite=False)
    (d / "shard-00009.stk").mkdir()
    (d / "shard-00009.stk" / "inner").write_bytes(b"x")
    before = tree_state(d)
    refused(d, "shard-00009.stk")
    assert tree_state(d) == before


def test_foreign_manifest_is_refused(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    (d / "manifest.stk").write_bytes(b"my own manifest, not stoker's\n")
    (d / "shard-00000.stk").write_bytes(b"mine too")
    before = tree_state(d)
    refused(d, "manifest.stk")
    assert tree_state(d) == before


def test_symbolic_link_is_refused(tmp_path):
    d = tmp_path / "ds"
    write(d, 3, overwrite=False)
    link = tmp_path / "out"
    link.symlink_to(d)
    before = tree_state(d)
    assert "symbolic link" in refused(link)
    assert os.path.islink(link) and tree_state(d) == before
    no_temp(tmp_path)


def test_previous_data_set_and_empty_folder_are_replaced(tmp_path):
    d = tmp_path / "out"
    write(d, 3, overwrite=False)
    write(d, 5)
    assert records(d) == 5
    assert sorted(os.listdir(d)) == ["manifest.stk", "shard-00000.stk"]
    e = tmp_path / "empty"
    e.mkdir()
    write(e, 4)
    assert records(e) == 4
    no_temp(tmp_path)


def test_refusal_at_finish(tmp_path):
    """A foreign file that appears while the writer works is still refused at finish."""
    d = tmp_path / "out"
    write(d, 3, overwrite=False)
    w = stoker.Writer(str(d), overwrite=True, fsync=False)
    try:
        w.add(b"x", 0)
        (d / "late.txt").write_bytes(b"arrived meanwhile")
        with pytest.raises(ExistsError) as e:
            w.finish()
        assert "late.txt" in str(e.value)
    finally:
        w.close()
    assert (d / "late.txt").read_bytes() == b"arrived meanwhile"
    assert records(d) == 3
    no_temp(tmp_path)
