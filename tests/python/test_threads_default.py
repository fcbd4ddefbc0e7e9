# SPDX-License-Identifier: Apache-2.0
"""The default worker count fits the node: the CPUs of the process's affinity mask, fewer
under its cgroup's CPU quota, shared among LOCAL_WORLD_SIZE ranks, less one (at least one);
stats()'s threads_note says how it was chosen.

Each case runs a child interpreter (its own affinity, environment or cgroup) that creates a
loader with the default thread count and prints what it chose.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import conftest as h

CHILD = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, os.environ["TESTS"])
    cpus = os.environ.get("CHILD_AFFINITY")
    if cpus:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    procs = os.environ.get("CHILD_CGROUP_PROCS")
    if procs:
        with open(procs, "w") as f:
            f.write(str(os.getpid()))
    import conftest as h
    import stoker
    with stoker.Loader(sys.argv[1], 4, device="cpu") as loader:
        print(json.dumps({"threads": loader.threads, "stats": loader.stats(),
                          "affinity": len(os.sched_getaffinity(0))}))
""")


def run_child(path, **env):
    full = dict(os.environ, TESTS=os.path.dirname(os.path.abspath(__file__)))
    full.pop("LOCAL_WORLD_SIZE", None)
    full.update(env)
    p = subprocess.run([sys.executable, "-c", CHILD, path], env=full, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_affinity_mask_bounds_the_default(raw_ds):
    first = min(os.sched_getaffinity(0))
    out = run_child(raw_ds, CHILD_AFFINITY=str(first))
    note = out["stats"]["threads_note"]
    assert out["threads"] == 1 == out["stats"]["threads"], out
    assert "affinity 1," in note and note.startswith("1 = 1 cores"), note


def test_every_cpu_of_the_mask_counts(raw_ds):
    out = run_child(raw_ds)
    n = out["affinity"]
    note = out["stats"]["threads_note"]
    if "cgroup quota none" not in note:
        pytest.skip("this process runs under a CPU quota: %s" % note)
    assert out["threads"] == max(1, n - 1), out
    assert note.startswith("%d = %d cores" % (out["threads"], n)), note
    assert "affinity %d," % n in note and "/ 1 rank - 1" in note, note


def test_local_world_size_shares_the_node(raw_ds):
    out = run_child(raw_ds, LOCAL_WORLD_SIZE="2")
    note = out["stats"]["threads_note"]
    usable = int(note.split(" cores")[0].split("= ")[1])
    assert out["threads"] == max(1, usable // 2 - 1), out
    assert "/ 2 ranks - 1" in note, note
    # a value that is not a count is passed over, as if unset
    out = run_child(raw_ds, LOCAL_WORLD_SIZE="two")
    assert "/ 1 rank - 1" in out["stats"]["threads_note"], out


def test_an_explicit_count_is_kept(raw_ds):
    with h_loader(raw_ds, threads=3) as loader:
        assert loader.threads == 3
        assert loader.stats()["threads_note"] == "3 as asked (STOKER_OPT_THREADS)"


def h_loader(path, **kw):
    import stoker
    return stoker.Loader(path, 4, device="cpu", **kw)


def _cpu_cgroup():
    """A new cgroup with the cpu controller (v2, else v1): (folder, how to set a quota), or
    None where none can be made here (not root, read-only, no controller)."""
    v2 = "/sys/fs/cgroup"
    if os.path.exists(os.path.join(v2, "cgroup.controllers")):
        with open(os.path.join(v2, "cgroup.controllers")) as f:
            if "cpu" not in f.read().split():
                return None
        kind, base = "v2", v2
    elif os.path.isdir("/sys/fs/cgroup/cpu"):
        kind, base = "v1", "/sys/fs/cgroup/cpu"
    else:
        return None
    # the child joins a cgroup beside this process's own (v1 lists it as "N:cpu...:PATH")
    with open("/proc/self/cgroup") as f:
        lines = [line.strip().split(":", 2) for line in f]
    own = next((p for i, c, p in lines if (kind == "v2" and i == "0" and c == "")
                or (kind == "v1" and "cpu" in c.split(","))), "/")
    parent = os.path.join(base, own.lstrip("/"))
    if not os.path.isdir(parent):
        parent = base
    folder = os.path.join(parent, "stoker-test-%d" % os.getpid())
    try:
        os.mkdir(folder)
    except OSError:
        return None
    return kind, folder


def test_a_cgroup_quota_bounds_the_default(raw_ds):
    made = _cpu_cgroup()
    if made is None:
        pytest.skip("no cgroup with the cpu controller can be made here (root needed)")
    kind, folder = made
    try:
        try:
            if kind == "v2":
                with open(os.path.join(folder, "cpu.max"), "w") as f:
                    f.write("150000 100000")
            else:
                with open(os.path.join(folder, "cpu.cfs_period_us"), "w") as f:
                    f.write("100000")
                with open(os.path.join(folder, "cpu.cfs_quota_us"), "w") as f:
                    f.write("150000")
        except OSError as e:
            pytest.skip("cannot set a CPU quota here: %s" % e)
        out = run_child(raw_ds, CHILD_CGROUP_PROCS=os.path.join(folder, "cgroup.procs"))
        note = out["stats"]["threads_note"]
        assert "cgroup quota 1.50" in note, note
        usable = min(out["affinity"], 2)
        assert out["threads"] == max(1, usable - 1), out
        assert note.startswith("%d = %d cores" % (out["threads"], usable)), note
    finally:
        os.rmdir(folder)
