# SPDX-License-Identifier: Apache-2.0
"""The library's one table of options (src/common/config.c) reaches every place that lists
options: an option added to the table alone fails here, naming what it still needs.

The binding reads names, types, ranges, enums and doc lines from the library at run time
(_lib.OPTIONS); what is still written by hand is checked against the table:

- include/stoker.h declares its key (STOKER_OPT_<NAME>, the table's value) and documents it;
- the Python Loader, Writer and Dataset take a keyword for each option that applies to them,
  and the Loader reads each of its options back as a property;
- stoker-bench has a flag for each loader option (in its table of long options and in its
  --help);
- its default is documented: docs/SEMANTICS.md's Defaults table names it, or the comment
  beside its key in stoker.h gives it.

An option left out of one of these on purpose goes in that check's list below, with why.
"""
import inspect
import os
import re
import subprocess

import pytest

import stoker
from stoker import _lib

from conftest import ROOT

OPTIONS = _lib.OPTIONS


def _for(bit):
    return [name for name, o in OPTIONS.items() if o.applies & bit]


def _read(*parts):
    with open(os.path.join(ROOT, *parts)) as f:
        return f.read()


# The Python spelling of options the binding takes grouped: mean=(r, g, b), std=(r, g, b),
# scale=(min, max), ratio=(min, max).
_PYTHON_NAME = {"mean_r": "mean", "mean_g": "mean", "mean_b": "mean",
                "std_r": "std", "std_g": "std", "std_b": "std",
                "scale_min": "scale", "scale_max": "scale",
                "ratio_min": "ratio", "ratio_max": "ratio"}

# ---- options left out on purpose, each with why ----

LOADER_NOT_KEYWORDS = {
    # always 1: rank and world size come from torch.distributed, else RANK/WORLD_SIZE
    "dist_env",
    # limits of the shard index a loader opens; the defaults (2^28 records per shard, 2^20
    # shards) bound memory, and no data set stoker writes comes near them
    "max_records", "max_shards",
}

LOADER_NOT_PROPERTIES = {
    "dist_env",  # always on (above); rank and world_size are read back
    # limits on untrusted input: what was asked is what runs, nothing to report
    "max_record_size", "max_records", "max_pixels", "max_shards",
    # the reader's and the copy stage's machinery; stats() reports what they did
    "direct_io", "read_ahead", "device_buffers", "gpu_normalize",
    # names inside an HDF5 file, as given
    "h5_images", "h5_labels", "h5_fields",
    # remote data sets' settings: stats() reports those in effect (cache_limit, block_size,
    # fetch_window); the others are as given
    "cache_dir", "cache_limit", "block_size", "fetch_window", "fetch_transfers",
    "fetch_retries", "fetch_retry_ms", "fetch_timeout_ms", "ca_bundle", "http_header",
    "s3_region", "s3_endpoint", "fetch_clients",
    # as given; Loader.fields gives each field's dtype as delivered
    "field_dtypes",
}

WRITER_NOT_KEYWORDS = {
    # limits on untrusted input; a writer's records come from its caller, under the defaults
    "max_record_size", "max_records", "max_shards",
}

DATASET_NOT_KEYWORDS = {
    "max_records", "max_shards",  # as for the Loader
    # Dataset opens an HDF5 file's "images" and "labels"; the Loader takes other names
    "h5_images", "h5_labels",
}

# stoker-bench's flag for an option, where it is not the option's name with - for _.
BENCH_FLAG = {"shuffle": "no-shuffle", "direct_io": "direct"}

BENCH_NOT_FLAGS = {
    "dist_env",  # the benchmark runs one process; --rank/--world-size give a rank's share
    "epoch",  # a run starts at epoch 0 and runs --epochs
    "max_record_size", "max_records", "max_pixels", "max_shards",  # the limits' defaults
    "read_ahead", "device_buffers",  # the library's defaults are what is measured
    # normalisation's constants do not change its cost
    "mean_r", "mean_g", "mean_b", "std_r", "std_g", "std_b",
    "h5_images", "h5_labels",  # HDF5 files are benchmarked with their default names
}


def _missing(names, have, excepted):
    return sorted(n for n in names if _PYTHON_NAME.get(n, n) not in have and n not in excepted)


def _stale(excepted, bit):
    """Exceptions naming no option of the table that applies: a list to trim."""
    return sorted(n for n in excepted if n not in OPTIONS or not OPTIONS[n].applies & bit)


def test_the_table_reads_back():
    assert len(OPTIONS) > 40
    for name, o in OPTIONS.items():
        assert o.type in (_lib.OPTION_INT, _lib.OPTION_FLOAT, _lib.OPTION_STRING), name
        assert o.applies and not o.applies & ~(_lib.FOR_WRITER | _lib.FOR_DATASET |
                                               _lib.FOR_LOADER), name
        assert "default" in o.doc and "\n" not in o.doc, name
        if o.values is not None:
            assert o.type == _lib.OPTION_INT and list(o.values), name
    assert OPTIONS["dct"].values is _lib.DCT
    assert (OPTIONS["shuffle"].min, OPTIONS["shuffle"].max) == (0, 1)


def test_numbers_kept_by_the_binding_equal_the_header():
    defines = dict(re.findall(r"#define (STOKER_(?:OPTION|FOR)_\w+) (\d+)", _read(
        "include", "stoker.h")))
    for name in ("OPTION_INT", "OPTION_FLOAT", "OPTION_STRING", "FOR_WRITER", "FOR_DATASET",
                 "FOR_LOADER"):
        assert getattr(_lib, name) == int(defines["STOKER_" + name]), name


def test_every_option_is_declared_and_documented_in_the_header():
    header = _read("include", "stoker.h")
    body = re.search(r"typedef enum stoker_option \{(.*?)\} stoker_option;", header, re.S)
    lines = body.group(1).splitlines()
    for name, o in OPTIONS.items():
        constant = "STOKER_OPT_" + name.upper()
        at = [i for i, line in enumerate(lines) if re.match(r"\s*%s\s*=" % constant, line)]
        assert at, "include/stoker.h declares no %s for option %r" % (constant, name)
        m = re.match(r"\s*%s\s*=\s*(\d+),\s*(/\*)?" % constant, lines[at[0]])
        assert m and int(m.group(1)) == o.value, constant
        # documented beside it, or by the comment of the run of keys it belongs to
        # (STOKER_OPT_MEAN_G after STOKER_OPT_MEAN_R's "float options")
        i = at[0]
        while i > 0 and "/*" not in lines[i] and re.match(r"\s*STOKER_OPT_\w+\s*=", lines[i - 1]):
            i -= 1
        assert "/*" in lines[i], "include/stoker.h: %s has no comment" % constant


def test_every_default_is_documented():
    semantics = _read("docs", "SEMANTICS.md")
    table = semantics[semantics.index("## Defaults"):]
    table = "\n".join(line for line in table[:table.index("\n## ", 3)].splitlines()
                      if line.startswith("|"))
    header = _read("include", "stoker.h")
    undocumented = []
    for name in OPTIONS:
        base = _PYTHON_NAME.get(name, name)
        if re.search(r"\b%s\b" % base, table):
            continue
        comment = re.search(r"STOKER_OPT_%s\s*=\s*\d+,\s*/\*(.*?)\*/" % name.upper(), header,
                            re.S)
        if comment and "default" in comment.group(1):
            continue
        undocumented.append(name)
    assert not undocumented, ("no default documented (docs/SEMANTICS.md's Defaults table, or "
                              "the comment beside the key in include/stoker.h): %s"
                              % ", ".join(undocumented))


def _keywords(cls):
    return set(inspect.signature(cls.__init__).parameters) - {"self"}


def test_the_loader_takes_every_loader_option():
    missing = _missing(_for(_lib.FOR_LOADER), _keywords(stoker.Loader), LOADER_NOT_KEYWORDS)
    assert not missing, "stoker.Loader takes no keyword for %s (python/stoker/loader.py)" % (
        ", ".join(missing))
    assert not _stale(LOADER_NOT_KEYWORDS, _lib.FOR_LOADER)
    assert not LOADER_NOT_KEYWORDS & _keywords(stoker.Loader)


def test_the_loader_reads_back_every_loader_option():
    props = {n for n, v in inspect.getmembers(stoker.Loader) if isinstance(v, property)}
    missing = _missing(_for(_lib.FOR_LOADER), props, LOADER_NOT_PROPERTIES)
    assert not missing, "stoker.Loader has no property for %s (python/stoker/loader.py)" % (
        ", ".join(missing))
    assert not _stale(LOADER_NOT_PROPERTIES, _lib.FOR_LOADER)


def test_the_writer_and_dataset_take_their_options():
    for cls, bit, excepted in ((stoker.Writer, _lib.FOR_WRITER, WRITER_NOT_KEYWORDS),
                               (stoker.Dataset, _lib.FOR_DATASET, DATASET_NOT_KEYWORDS)):
        missing = _missing(_for(bit), _keywords(cls), excepted)
        assert not missing, "stoker.%s takes no keyword for %s (python/stoker/dataset.py)" % (
            cls.__name__, ", ".join(missing))
        assert not _stale(excepted, bit)


def _bench_no_flag_in_source():
    """The options stoker-bench gives no flag (its no_flag list): every other loader option
    of the table gets one, made from the table at run time."""
    src = _read("tools", "bench", "main.c")
    block = src[src.index("no_flag[] = {"):]
    block = block[:block.index("};")]
    return {n.lower() for n in re.findall(r"STOKER_OPT_(\w+)", block)}


def _bench_flags_in_help():
    bench = os.environ.get("STOKER_BENCH") or os.path.join(
        os.environ.get("STOKER_BUILD_DIR") or os.path.join(ROOT, "build"), "stoker-bench")
    if not os.access(bench, os.X_OK):
        pytest.skip("stoker-bench is not built (%s)" % bench)
    out = subprocess.run([bench, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return set(re.findall(r"--([a-z0-9-]+)", out.stdout + out.stderr))


def test_stoker_bench_has_a_flag_for_every_loader_option():
    flags = _bench_flags_in_help()
    missing = sorted(n for n in _for(_lib.FOR_LOADER) if n not in BENCH_NOT_FLAGS and
                     BENCH_FLAG.get(n, n.replace("_", "-")) not in flags)
    assert not missing, "stoker-bench has no flag for %s (in its --help: tools/bench/main.c)" % (
        ", ".join(missing))
    assert _bench_no_flag_in_source() == BENCH_NOT_FLAGS
    assert not _stale(BENCH_NOT_FLAGS, _lib.FOR_LOADER)


# Options whose table default (0, or an enum's "auto"/"default") stands for a rule the
# loader applies when it is created, each as the table's doc line says: what it runs with
# is read back resolved.
RESOLVED_AT_CREATE = {
    "threads", "depth", "device", "max_cache", "backend", "simd", "transform", "dtype",
    "resize", "decoder",
}


def test_the_loader_runs_with_the_tables_defaults(raw_ds):
    """Every option's default lives in one place, the table: a loader created with nothing
    set runs with each option's table default (as a fresh config reads it), except where
    the table's doc line names a rule. A second default kept below the table (x ? x : 6)
    fails here."""
    import ctypes
    from stoker._config import Config
    L = _lib.lib
    with Config() as cfg:
        defaults = {}
        for name, o in OPTIONS.items():
            if o.type == _lib.OPTION_INT and o.applies & _lib.FOR_LOADER:
                v = ctypes.c_int64()
                assert L.stoker_config_get_int(cfg.handle, o.value, ctypes.byref(v)) == 0
                defaults[name] = v.value
        handle = ctypes.c_void_p()
        assert L.stoker_loader_create(ctypes.byref(handle), os.fsencode(raw_ds), cfg.handle) == 0
    try:
        differ = []
        for name, want in defaults.items():
            v = ctypes.c_int64()
            rc = L.stoker_loader_get_int(handle, OPTIONS[name].value, ctypes.byref(v))
            if rc == 0 and v.value != want and name not in RESOLVED_AT_CREATE:
                differ.append("%s: the table says %d, the loader runs with %d"
                              % (name, want, v.value))
        assert not differ, "a default kept outside the table (src/common/config.c): " + \
            "; ".join(differ)
    finally:
        L.stoker_loader_destroy(handle)
