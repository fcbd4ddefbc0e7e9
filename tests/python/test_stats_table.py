# SPDX-License-Identifier: Apache-2.0
"""The library's one table of statistics (src/loader/stats_table.h, read through
stoker_stats_field) is every list of counters: stoker_stats in include/stoker.h (checked
here field by field, by name), the JSON of stoker_loader_stats_json and stoker_stats_json,
the Python binding's ctypes struct and stats() docstring, and stoker-bench's report. A
field added to the struct alone, or to the table alone, fails here naming it."""
import ctypes
import json
import os
import re

import stoker
from stoker import _lib

from conftest import ROOT

FIELDS = _lib.STATS_FIELDS

# Fields of the struct that are not figures: its size prefix and padding kept for the ABI.
NOT_FIGURES = {"struct_size", "reserved0"}


def _struct_fields():
    with open(os.path.join(ROOT, "include", "stoker.h")) as f:
        header = f.read()
    body = re.search(r"typedef struct stoker_stats \{(.*?)\} stoker_stats;", header, re.S)
    body = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    return [m.group(1) for m in re.finditer(r"\b(\w+)(?:\[\d+\])?;", body)]


def test_the_table_is_the_structs_fields():
    declared = [n for n in _struct_fields() if n not in NOT_FIGURES]
    table = list(FIELDS)
    missing = [n for n in declared if n not in table]
    assert not missing, ("stoker_stats declares %s, which the table of statistics "
                         "(src/loader/stats_table.h) lacks" % ", ".join(missing))
    extra = [n for n in table if n not in declared]
    assert not extra, ("the table of statistics has %s, which stoker_stats (include/stoker.h) "
                       "does not declare" % ", ".join(extra))
    assert table == declared, "the table lists the fields in another order than the struct"


def test_the_bindings_struct_is_the_tables():
    st = _lib.Stats
    for name, f in FIELDS.items():
        assert getattr(st, name).offset == f.offset, name
        assert getattr(st, name).size == f.size, name
        assert f.doc and "\n" not in f.doc, name
    assert ctypes.sizeof(st) >= max(f.offset + f.size for f in FIELDS.values())


def test_the_json_has_every_field_and_only_them(raw_ds):
    with stoker.Loader(raw_ds, batch_size=8, device="cpu") as loader:
        next(iter(loader))
        out = loader.stats()
        st = _lib.Stats()
        st.struct_size = ctypes.sizeof(st)
        assert _lib.lib.stoker_loader_get_stats(loader._core.handle, ctypes.byref(st)) == 0
    keys = [k for k in out if k not in ("window", "overall")]
    assert keys == list(FIELDS)
    assert out["records"] >= 8 and out["backend"] in ("io_uring", "pread")
    # a struct's snapshot as JSON: the same fields, enums by name
    cap = 8192
    buf = ctypes.create_string_buffer(cap)
    assert _lib.lib.stoker_stats_json(ctypes.byref(st), buf, cap, None) == 0
    snap = json.loads(buf.value.decode())
    assert list(snap) == list(FIELDS)
    assert snap["records"] == st.records and snap["backend"] == out["backend"]


def test_the_docstring_names_every_field():
    doc = stoker.Loader.stats.__doc__
    missing = [n for n in FIELDS if "``%s``" % n not in doc]
    assert not missing, "Loader.stats()'s docstring does not name %s" % ", ".join(missing)


def _bench():
    import pytest
    bench = os.environ.get("STOKER_BENCH") or os.path.join(
        os.environ.get("STOKER_BUILD_DIR") or os.path.join(ROOT, "build"), "stoker-bench")
    if not os.access(bench, os.X_OK):
        pytest.skip("stoker-bench is not built (%s)" % bench)
    return bench


def test_stoker_bench_reports_every_field(raw_ds):
    import subprocess
    args = [_bench(), str(raw_ds), "--epochs", "1", "--batch-size", "8", "--threads", "1"]
    out = subprocess.run(args + ["--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert list(json.loads(out.stdout)["stats"]) == list(FIELDS)
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # a counter is shown as name=N on the stats line unless report.c's `elsewhere` says
    # another line shows it
    with open(os.path.join(ROOT, "tools", "bench", "report.c")) as f:
        src = f.read()
    elsewhere = re.search(r"elsewhere\[\] = \{(.*?)\};", src, re.S).group(1)
    elsewhere = set(re.findall(r'"(\w+)"', elsewhere))
    counters = [n for n, f in FIELDS.items() if f.type == _lib.STAT_INT64 and n not in elsewhere]
    missing = [n for n in counters if not re.search(r"\b%s=" % n, out.stdout)]
    assert not missing, "stoker-bench's report shows no %s" % ", ".join(missing)
