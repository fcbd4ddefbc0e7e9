# SPDX-License-Identifier: Apache-2.0
"""A job sees its stalls: loader.window() and stats()'s "window" and "overall" give the rate,
the consumer's wait share, the stages' busy shares and the verdict over a recent span, and
the wait share agrees with what the consumer itself timed; torch.profiler labels next()."""
import io
import subprocess
import sys
import time

import numpy as np
import pytest

import stoker

from conftest import ROOT

N = 96
STAGES = ("storage", "crc", "decode", "transform", "host-to-device copy", "network")


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """96 distinct 400x300 JPEGs (a millisecond or two each to decode and resize)."""
    from PIL import Image
    path = str(tmp_path_factory.mktemp("window") / "jpegs")
    y, x = np.mgrid[0:300, 0:400]
    with stoker.Writer(path, kind="jpeg", fsync=False) as w:
        for i in range(N):
            img = np.stack([(x * (i % 7 + 1) + y * i) % 256, (x ^ (y + i)) % 256,
                            (y * 5 + i) % 256], -1)
            buf = io.BytesIO()
            Image.fromarray(img.astype(np.uint8)).save(buf, "JPEG", quality=90)
            w.add(buf.getvalue(), i % 5)
    return path


def consume(loader, seconds, sleep):
    """Takes batches for `seconds` (across epochs), sleeping `sleep` s on each as a training
    step would; returns the seconds spent inside next() and the wall time."""
    waited, t0 = 0.0, time.monotonic()
    it = iter(loader)
    while time.monotonic() - t0 < seconds:
        t = time.monotonic()
        try:
            b = next(it)
        except StopIteration:
            waited += time.monotonic() - t
            it = iter(loader)  # the next epoch
            continue
        waited += time.monotonic() - t
        del b
        if sleep:
            time.sleep(sleep)
    return waited, time.monotonic() - t0


def test_nothing_delivered_is_none(jpegs):
    with stoker.Loader(jpegs, 8, device="cpu", threads=1, size=64) as loader:
        w = loader.window(5.0)
        assert w["verdict"] == "none" and w["records"] == 0, w
        assert w["verdict_reason"] == "nothing was delivered"
        assert 0 <= w["seconds"] <= 5.0


def test_the_wait_share_is_what_the_consumer_timed(jpegs):
    """A consumer faster than one worker waits; one that sleeps long enough does not. The
    window over the last second sees the second phase alone, the overall figure both."""
    t_create = time.monotonic()
    with stoker.Loader(jpegs, 8, device="cpu", threads=1, size=128, depth=4) as loader:
        waited_a, _ = consume(loader, 1.5, 0.0)
        mid = loader.window(0)
        # the loader's batch time, from what phase A delivered: sleep 4x it per batch
        per_batch = 1.5 / max(mid["batches"], 1)
        waited_b, span_b = consume(loader, max(2.0, 12 * per_batch * 4), 4 * per_batch)
        overall = loader.window(0)
        recent = loader.window(1.0)
        st = loader.stats()
    total = time.monotonic() - t_create
    mine = (waited_a + waited_b) / total
    # the consumer's own timing includes the binding's cost per call and the epoch ends
    assert abs(overall["wait_share"] - mine) < 0.08, (overall, mine)
    assert overall["wait_seconds"] <= waited_a + waited_b + 0.05, overall
    assert mid["wait_share"] > 0.5, mid  # phase A: a consumer that never sleeps waits
    assert mid["verdict"] in STAGES, mid
    assert "%" in mid["verdict_reason"] and "while the consumer waited" in mid["verdict_reason"]
    # the last second: the consumer sleeps 4x the batch time, so the loader is ahead
    assert 0.9 <= recent["seconds"] <= 1.6, recent
    assert recent["wait_share"] < 0.2, recent
    assert recent["wait_share"] < overall["wait_share"] - 0.1, (recent, overall)
    assert recent["records_per_sec"] > 0 and recent["batches"] > 0, recent
    assert 0 <= recent["workers_busy"] <= 1.05, recent
    assert recent["h2d_busy"] == 0 and recent["gpu_decode_busy"] == 0, recent
    assert recent["fetch_wait_share"] == 0, recent
    # stats() carries both, the same shape
    assert set(st["window"]) == set(st["overall"]) == set(recent)
    assert st["overall"]["batches"] >= overall["batches"]
    assert abs(overall["records_per_sec"] * overall["seconds"] - overall["records"]) < 1


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """4096 raw records of 12 bytes: a worker copies a batch of them in microseconds."""
    path = str(tmp_path_factory.mktemp("window") / "tiny")
    with stoker.Writer(path, kind="raw", dtype="uint8", shape=(2, 2, 3), fsync=False) as w:
        for i in range(4096):
            w.add(np.full((2, 2, 3), i % 251, np.uint8), i % 10)
    return path


def test_the_binding_s_own_time_counts_as_waiting(tiny):
    """With the loader ahead, a next() is the binding's own work (a batch object, its
    bookkeeping) around a library call that finds the batch ready: the wait share counts
    it, so it is the share of the loop's time spent in next(), as the loop itself timed."""
    with stoker.Loader(tiny, 4, device="cpu", threads=1, depth=16, shuffle=False) as loader:
        it = iter(loader)
        next(it)
        time.sleep(0.3)  # the ring fills: from here the loader stays ahead
        before = loader.window(0)["wait_seconds"]
        mine = 0.0
        for _ in range(1000):
            t = time.perf_counter()
            b = next(it)
            mine += time.perf_counter() - t
            del b
        counted = loader.window(0)["wait_seconds"] - before
    # the loop's timing also holds the iterator's own frame and the clock calls
    assert 0.6 * mine <= counted <= mine + 0.005, (counted, mine)


def test_add_wait_refuses_what_is_not_a_time(tiny):
    add = stoker._lib.lib.stoker_loader_add_wait
    with stoker.Loader(tiny, 4, device="cpu", threads=1) as loader:
        handle = loader._core.handle
        for bad in (-1.0, float("nan"), float("inf")):
            assert add(handle, bad) == stoker._lib.E_INVALID
        before = loader.window(0)["wait_seconds"]
        assert add(handle, 0.25) == 0
        assert loader.window(0)["wait_seconds"] - before == pytest.approx(0.25, abs=1e-6)
    assert add(None, 0.0) == stoker._lib.E_INVALID


def test_a_loader_ahead_is_the_consumer(jpegs):
    with stoker.Loader(jpegs, 8, device="cpu", threads=1, size=32, depth=8) as loader:
        it = iter(loader)
        next(it)
        time.sleep(1.0)  # the ring fills
        t = time.monotonic()
        for _ in range(3):
            next(it)
            time.sleep(0.15)
        w = loader.window(time.monotonic() - t)
    assert w["verdict"] == "consumer", w
    assert w["verdict_reason"].startswith("the loader is ahead: the consumer waited "), w
    assert "batches ready on average" in w["verdict_reason"]


def test_window_refuses_nan_and_a_closed_loader(jpegs):
    loader = stoker.Loader(jpegs, 8, device="cpu", threads=1, size=32)
    with pytest.raises(stoker.StokerError):
        loader.window(float("nan"))
    loader.close()
    with pytest.raises(ValueError):
        loader.window()


LABEL = """
import sys, time
sys.path.insert(0, sys.argv[2])
import torch
import stoker
with stoker.Loader(sys.argv[1], 8, device="cpu", threads=1, size=32) as loader:
    it = iter(loader)
    next(it)  # outside the profiler: no label is made, nothing fails
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            next(it)
    names = [e.key for e in prof.key_averages()]
    print("labels", names.count("stoker.next"), [e.count for e in prof.key_averages()
                                                 if e.key == "stoker.next"])
"""


def test_torch_profiler_labels_next(jpegs):
    pytest.importorskip("torch")
    import os
    p = subprocess.run([sys.executable, "-c", LABEL, jpegs, os.path.join(ROOT, "python")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "labels 1 [3]" in p.stdout, p.stdout


def test_the_binding_never_imports_torch(jpegs):
    code = ("import sys; sys.path.insert(0, sys.argv[2]); import stoker\n"
            "with stoker.Loader(sys.argv[1], 8, device='cpu', threads=1, size=32) as l:\n"
            "    next(iter(l))\n"
            "print('torch' in sys.modules)")
    import os
    p = subprocess.run([sys.executable, "-c", code, jpegs, os.path.join(ROOT, "python")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_the_example_logs_the_window():
    import os
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "log_stalls.py"),
                        "--steps", "30", "--every", "10", "--step-ms", "1"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    steps = [line for line in p.stdout.splitlines() if line.startswith("step ")]
    assert len(steps) == 3, p.stdout
    assert all("waited" in s and "verdict " in s for s in steps), p.stdout
    assert "overall: 30 batches" in p.stdout, p.stdout
