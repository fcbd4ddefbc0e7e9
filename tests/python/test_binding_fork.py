# SPDX-License-Identifier: Apache-2.0
"""A process forked while a Loader or a Writer is alive (os.fork, or a library doing it).

The child has copies of the Python objects but none of the loader's threads: exiting must
not wait for them, using the copies must say why it cannot, and nothing the child does may
disturb the parent's loader or delete the output the parent's writer is still writing.
Each scenario runs in its own interpreter with a deadline, since the failure is a hang.
"""
import os
import subprocess
import sys
import textwrap

import pytest

import conftest as h

PRELUDE = """
import os, sys, warnings
import numpy as np
import stoker
# Python 3.12 warns about any fork of a process with threads (the loader's are); forking is
# the point here
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
sys.path.insert(0, TESTS)
import conftest as h
PATH, OUT = sys.argv[1], sys.argv[2]


def fork(child, timeout=20):
    \"\"\"Runs child() in a forked process that then exits normally (finalizers run); its
    exit status, or "hung" (the child is then killed).\"\"\"
    import signal, time
    pid = os.fork()
    if pid == 0:
        try:
            child()
        except BaseException as e:  # reported through the status
            print("child: %s: %s" % (type(e).__name__, e), flush=True)
            sys.exit(5)
        sys.exit(0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "hung"
"""

SCENARIOS = {
    # the child leaves the loader alone, or finds it refuses every call; the parent goes on
    "loader": """
        loader = stoker.Loader(PATH, 8, device="cpu", shuffle=False, depth=3)
        it = iter(loader)
        b = next(it)
        arr = b.numpy()

        def child_uses_nothing():
            pass

        def child_calls():
            for call in (lambda: next(iter(loader)), lambda: len(loader), loader.stats,
                         loader.state_dict, lambda: loader.set_epoch(1)):
                try:
                    call()
                    raise AssertionError("a forked process used the loader")
                except stoker.StateError as e:
                    assert "fork" in str(e), e
            # what the parent handed out before the fork is the child's copy: readable
            assert list(h.record_id(arr)) == list(range(8))
            assert list(h.record_id(b.numpy())) == list(range(8))
            del b.data  # releases the child's copy only
            loader.close()

        assert fork(child_uses_nothing) == 0
        assert fork(child_calls) == 0
        assert list(h.record_id(arr)) == list(range(8))
        del b, arr
        rest = [int(i) for b in it for i in b.indices]
        assert rest == list(range(8, 103)), rest
        loader.close()
        """,
    # the child exits with the parent's writer alive, or tries to use it
    "writer": """
        w = stoker.Writer(OUT, kind="bytes", fsync=False)
        for i in range(10):
            w.add(b"rec%d" % i, i)

        def child_uses_nothing():
            pass

        def child_calls():
            for call in (lambda: w.add(b"x"), w.finish, lambda: w.records):
                try:
                    call()
                    raise AssertionError("a forked process used the writer")
                except stoker.StateError as e:
                    assert "fork" in str(e), e
            w.cancel()  # a no-op here
            w.close()

        assert fork(child_uses_nothing) == 0
        assert fork(child_calls) == 0
        for i in range(10, 20):
            w.add(b"rec%d" % i, i)
        w.finish()
        w.close()
        with stoker.Dataset(OUT) as ds:
            assert [ds[i] for i in range(len(ds))] == [(b"rec%d" % i, i) for i in range(20)]
        """,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_fork(tmp_path, raw_ds, name):
    script = tmp_path / "scenario.py"
    script.write_text("TESTS = %r\n" % os.path.dirname(os.path.abspath(__file__)) + PRELUDE +
                      textwrap.dedent(SCENARIOS[name]) + '\nprint("ok", flush=True)\n')
    env = dict(os.environ)
    env["STOKER_LIBRARY"] = h._library()
    env["PYTHONPATH"] = os.path.join(h.ROOT, "python")
    env["PYTHONFAULTHANDLER"] = "1"
    try:
        proc = subprocess.run([sys.executable, str(script), raw_ds, str(tmp_path / "out")],
                              env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        pytest.fail("hung: the scenario did not finish in 60s\nstdout:\n%s\nstderr:\n%s"
                    % (e.stdout, e.stderr))
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), (
        "status %d\nstdout:\n%s\nstderr:\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    assert proc.stderr == "", proc.stderr
