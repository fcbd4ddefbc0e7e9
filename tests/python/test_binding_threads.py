# SPDX-License-Identifier: Apache-2.0
"""Loader and Batch methods called from several threads at once, with real threads.

Each scenario runs in its own interpreter with a deadline, so that a hang fails the test
(instead of hanging the run) and a crash is reported with its status. The script prints
"ok" once every thread finished in time and every check passed.
"""
import os
import subprocess
import sys
import textwrap

import pytest

import conftest as h

PRELUDE = """
import gc, sys, threading, time
import numpy as np
import stoker
sys.path.insert(0, TESTS)
import conftest as h
PATH = sys.argv[1]
SWITCH = sys.getswitchinterval()


def thread_failed(args):  # an exception in any thread fails the scenario at once
    import os, traceback
    traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback)
    sys.stderr.flush()
    os._exit(3)


threading.excepthook = thread_failed


def start(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def join(*threads, timeout=20):
    for t in threads:
        t.join(timeout)
        if t.is_alive():
            print("hung: a thread did not finish in %ds" % timeout, flush=True)
            import os
            os._exit(2)


def check_batch(b):
    assert list(h.record_id(b.numpy())) == list(b.indices)
"""

SCENARIOS = {
    # set_epoch from a second thread while the consumer iterates: each call either takes
    # effect between two batches or refuses (a batch is held), and the consumer goes on.
    "set_epoch_while_iterating": """
        for round in range(6):
            loader = stoker.Loader(PATH, 4, device="cpu", depth=2, seed=1)
            done = threading.Event()
            seen, outcomes, goal = [], {}, [0]

            def consume():  # until 10 batches past the end of the steering
                while True:
                    for b in loader:
                        check_batch(b)
                        seen.append(b.epoch)
                        del b
                        if done.is_set() and len(seen) >= goal[0]:
                            return

            def steer():
                for i in range(100):
                    try:
                        loader.set_epoch(i % 5)
                        outcomes["set"] = outcomes.get("set", 0) + 1
                    except stoker.StateError as e:
                        assert "release" in str(e) or "held" in str(e), e
                        outcomes["refused"] = outcomes.get("refused", 0) + 1
                goal[0] = 1 << 62  # until the main thread sets it
                done.set()

            c, s = start(consume), start(steer)
            join(s)
            goal[0] = len(seen) + 10
            join(c)
            assert sum(outcomes.values()) == 100, outcomes
            loader.close()
        """,
    "load_state_dict_while_iterating": """
        for round in range(12):
            loader = stoker.Loader(PATH, 4, device="cpu", depth=2, seed=1)
            saved = loader.state_dict()
            done = threading.Event()
            seen, goal = [], [0]

            def consume():  # until 10 batches past the end of the steering
                while True:
                    for b in loader:
                        check_batch(b)
                        seen.append(b.position)
                        del b
                        if done.is_set() and len(seen) >= goal[0]:
                            return

            def steer():
                for i in range(100):
                    try:
                        loader.load_state_dict(saved if i % 2 else loader.state_dict())
                    except stoker.StateError as e:
                        assert "release" in str(e) or "held" in str(e), e
                goal[0] = 1 << 62  # until the main thread sets it
                done.set()

            c, s = start(consume), start(steer)
            join(s)
            goal[0] = len(seen) + 10
            join(c)
            loader.close()
        """,
    # close() from another thread: the consumer's next call says the loader is closed, and
    # what it made from earlier batches stays valid.
    "close_while_iterating": """
        for round in range(60):
            loader = stoker.Loader(PATH, 4, device="cpu", depth=3, seed=round)
            kept, errors = [], []

            def consume():
                try:
                    while True:
                        for b in loader:
                            kept[:] = kept[-1:] + [(b.numpy(), b.indices.copy())]
                            del b
                except ValueError as e:
                    errors.append(str(e))

            c = start(consume)
            time.sleep(0.002 * (round % 5))
            loader.close()
            join(c)
            assert errors and "closed" in errors[0], errors
            for arr, ids in kept:
                assert list(h.record_id(arr)) == list(ids)
        """,
    # stats, len, state_dict and the read-only properties from other threads, while the
    # consumer iterates and then closes the loader.
    "observers_while_iterating_and_closing": """
        for round in range(30):
            loader = stoker.Loader(PATH, 4, device="cpu", depth=2, seed=round)
            batches, records = len(loader), loader.num_records
            stop = threading.Event()

            def observe():
                while not stop.is_set():
                    try:
                        assert loader.stats()["batches"] >= 0
                        assert len(loader) == batches
                        assert loader.state_dict()["batch_size"] == 4
                        assert loader.num_records == records
                        assert 0 <= loader.position <= batches and loader.epoch >= 0
                    except ValueError as e:
                        assert "closed" in str(e), e

            def consume():
                for _ in range(3):
                    for b in loader:
                        check_batch(b)
                        del b
                loader.close()

            watchers = [start(observe) for _ in range(3)]
            join(start(consume))
            stop.set()
            join(*watchers)
        """,
    # A data set closed while other threads read it: each read returns the record or
    # raises ValueError (closed), never reads freed memory.
    "dataset_closed_while_read": """
        for round in range(40):
            ds = stoker.Dataset(PATH)
            n = len(ds)
            go = threading.Barrier(4)

            def read(k):
                go.wait()
                try:
                    for i in range(k, n, 3):
                        payload, label = ds[i]
                        assert payload == h.record_array(i).tobytes()
                        assert label == h.label_of(i) and ds.key(i) == "r/%d" % i
                        assert ds.record_info(i)["size"] == len(payload)
                except ValueError as e:
                    assert "closed" in str(e), e

            readers = [start(read, k) for k in range(3)]
            go.wait()
            time.sleep(0.0005 * (round % 4))
            ds.close()
            join(*readers)
        """,
    # cancel() from other threads while a writer adds records and is then closed: the
    # writer stops with CanceledError or finishes, and cancel after close does nothing.
    "writer_cancel_and_close": """
        import os, shutil, tempfile
        out = tempfile.mkdtemp()
        for round in range(40):
            w = stoker.Writer(os.path.join(out, "w%d" % round), kind="bytes", fsync=False)
            go = threading.Barrier(3)
            stop = threading.Event()

            def add():
                go.wait()
                try:
                    for i in range(200):
                        w.add(b"x" * 100, i)
                except stoker.CanceledError:
                    pass
                except ValueError as e:
                    assert "closed" in str(e), e

            def cancel():
                go.wait()
                while not stop.is_set():
                    w.cancel()

            threads = [start(add), start(cancel)]
            go.wait()
            time.sleep(0.0005 * (round % 4))
            w.close()
            stop.set()
            join(*threads)
            assert os.listdir(out) == [], os.listdir(out)  # nothing left behind
        shutil.rmtree(out)
        """,
}


def run_scenario(tmp_path, body, ds, timeout=120):
    script = tmp_path / "scenario.py"
    script.write_text("TESTS = %r\n" % os.path.dirname(os.path.abspath(__file__)) + PRELUDE +
                      textwrap.dedent(body) + '\nprint("ok", flush=True)\n')
    env = dict(os.environ)
    env["STOKER_LIBRARY"] = h._library()
    env["PYTHONPATH"] = os.path.join(h.ROOT, "python")
    env["PYTHONFAULTHANDLER"] = "1"
    try:
        proc = subprocess.run([sys.executable, str(script), ds], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail("hung: the scenario did not finish in %ds\n%s" % (timeout, e.stderr))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        "status %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    assert "Exception" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_threads(tmp_path, raw_ds, name):
    run_scenario(tmp_path, SCENARIOS[name], raw_ds)
