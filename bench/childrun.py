# SPDX-License-Identifier: Apache-2.0
"""What bench/train.py and bench/tasks.py share: each measurement in a child process of its
own (the script again, with --child SPEC), within the run's --budget and --child-timeout;
the medians of a feed's repetitions; the tables and records written at the end."""
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time


def schedule(feeds, reps):
    """(repetition, feed) in the order they run: the feeds in order, reversed every second
    repetition."""
    for rep in range(reps):
        for f in (feeds if rep % 2 == 0 else feeds[::-1]):
            yield rep, f


def run_child(script, spec, base, env, timeout):
    """Runs `script --child SPEC` and returns the record it printed last (a line of JSON),
    or `base` with status "failed" and why. Its other lines go to stderr, indented."""
    cmd = [sys.executable, os.path.abspath(script), "--child", json.dumps(spec)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except BaseException as e:  # the time limit, or ^C: the child and its workers go
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        if not isinstance(e, subprocess.TimeoutExpired):
            raise
        return dict(base, status="failed", error="stopped after %.0f s (time limit)" % timeout)
    lines = out.splitlines()
    for line in lines:
        if not line.startswith("{"):
            print("  | " + line, file=sys.stderr)
    results = [line for line in lines if line.startswith("{")]
    if not results:
        return dict(base, status="failed",
                    error="exit status %d and no result (its stderr is above)" % p.returncode)
    rec = json.loads(results[-1])
    if p.returncode != 0 and rec.get("status") == "ok":
        rec["status"] = "failed"
        rec["error"] = "exit status %d after its result" % p.returncode
    return rec


def run_timed(a, start, script, spec, base, env, title):
    """One child under what is left of --budget (a.budget, None for no limit; the run began
    at `start`) and --child-timeout: its record, with child_seconds, or `base` with status
    "skipped" when the budget is spent. `title` is printed as it starts."""
    timeout = a.child_timeout
    if a.budget is not None:
        timeout = min(timeout, a.budget - (time.time() - start))
    if timeout < 5:
        return dict(base, status="skipped", error="the time budget (--budget) was spent")
    print("%s ..." % title, flush=True)
    t = time.time()
    rec = run_child(script, spec, base, env, timeout)
    rec["child_seconds"] = round(time.time() - t, 1)
    return rec


def repetitions(records, key, value, feed, reps, rate):
    """The runs of one feed (its id) for the model or task records[i][key] == value: those
    that ran ok, and each repetition's `rate` or, for one that did not, its status."""
    recs = {r["rep"]: r for r in records if r[key] == value and r["feed"] == feed}
    each = [recs.get(i) for i in range(reps)]
    ok = [r for r in each if r and r.get("status") == "ok"]
    return ok, [r[rate] if r and r.get("status") == "ok" else
                (r or {}).get("status", "not run") for r in each]


def median(ok, field):
    return statistics.median(r[field] for r in ok) if ok else None


def finish(a, meta, md, rows, records):
    """Prints the tables, writes them to --md and every record to --json; the exit status:
    0 when every child ran ok, else 1."""
    print()
    print(md, end="", flush=True)
    if a.md:
        with open(a.md, "w") as f:
            f.write(md)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"meta": dict(meta["lines"]), "rows": rows, "runs": records}, f,
                      indent=1, default=str)
    return 0 if all(r.get("status") == "ok" for r in records) else 1
