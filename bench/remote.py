#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A packed data set read locally and over HTTP with latency: stoker-bench's img/s for each.

    bench/remote.py DATA [--build build] [--latency-ms 20] [--epochs 1] [--repeat 3]
                    [--block-size SIZE] [--ceiling] [-- STOKER-BENCH FLAGS...]

DATA is a data set directory written by stoker-pack. The script serves DATA's parent with
tests/remote/range_server.py on 127.0.0.1 (a real HTTP/1.1 server with byte ranges; every
request waits --latency-ms before its first byte) and runs, --repeat times each, in turn:

  local    stoker-bench DATA
  cold     stoker-bench http://127.0.0.1:PORT/NAME with a new, empty block cache
  cached   the same URL again, over the cache the cold run filled

It prints each run's img/s, the ratio to the local run of the same repetition, and for the
remote runs the requests, the bytes per request and the time workers waited for blocks.
Flags after `--` go to every stoker-bench run (e.g. `-- --threads 2 --device cpu`).

--ceiling also fetches every shard twice from the same server with BUILD/bench_http_ceiling
(bench/ceiling/http_ceiling.c: libcurl alone, one ranged GET per block, as many at once as
stoker's fetch_transfers), once with the bodies discarded and once written to files beside
the block cache (as `curl -o` would), and prints their MB/s beside the record bytes per
second each cold run delivered (stoker-bench's bytes_per_sec, the batches' bytes: for raw
records without a transform, the records' own): how close stoker comes to what plain ranged
GETs pull. With --ceiling every run times its first batch too (`--warmup 0` is added unless
a --warmup is given after `--`): the first batch of a shuffled epoch waits for most blocks,
and a run that left it untimed would count the blocks fetched meanwhile as free.

For the remote runs it also prints the CPU seconds of stoker's HTTP clients' threads
("stoker-http", each driving its share of the transfers) and of their writers
("stoker-http-w", which write the blocks to the cache), each kind summed over its threads,
sampled from /proc while the run lasts: near the run's own seconds times the clients, the
clients' threads are the limit.

The server sends every body by sendfile (tests/remote/range_server.py), so Python's lock
does not bound it: 16 ranged GETs at once pull about 3 GB/s from it on a 16-core machine.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def start_server(root, latency_ms, tmp):
    port_file = os.path.join(tmp, "port")
    cmd = [sys.executable, os.path.join(ROOT, "tests", "remote", "range_server.py"), root,
           "--port-file", port_file, "--lifetime", "7200", "--max-requests", "100000000"]
    if latency_ms > 0:
        cmd += ["--fault", "latency:ms=%d" % latency_ms]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("remote.py: the server did not start")
        time.sleep(0.05)
    with open(port_file) as f:
        return proc, int(f.read().strip())


def thread_cpu(pid, name):
    """CPU seconds of process pid's threads called name (0 when none, or it has gone)."""
    total = 0.0
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return 0.0
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
                st = f.read()
        except OSError:
            continue
        comm, rest = st[st.index("(") + 1:st.rindex(")")], st[st.rindex(")") + 2:].split()
        if comm == name:  # utime and stime: fields 14 and 15
            total += (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    return total


def bench(build, target, epochs, extra, env):
    """stoker-bench's JSON report, with the process's peak resident set (max_rss_mib) and
    the CPU seconds of its HTTP clients' threads and of their writers, each summed
    (http_cpu_s, writers_cpu_s, sampled until it exits)."""
    cmd = [os.path.join(build, "stoker-bench"), target, "--epochs", str(epochs), "--json"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd + extra, stdout=out, stderr=err, env=env)
        http_cpu = writers_cpu = 0.0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            http_cpu = max(http_cpu, thread_cpu(proc.pid, "stoker-http"))
            writers_cpu = max(writers_cpu, thread_cpu(proc.pid, "stoker-http-w"))
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit("remote.py: %s failed:\n%s" % (" ".join(cmd + extra), err.read()))
        r = json.load(out)
    r["max_rss_mib"] = usage.ru_maxrss / 1024.0  # KiB on Linux
    r["http_cpu_s"] = http_cpu
    r["writers_cpu_s"] = writers_cpu
    return r


def http_ceiling(a, extra, url, data, out=None):
    """bench_http_ceiling's JSON for every shard of DATA, at stoker's block size and
    transfers (as given after `--`, else the defaults); with out, the blocks written there."""
    def flag(name, default):
        return extra[extra.index(name) + 1] if name in extra[:-1] else default
    shards = sorted(f for f in os.listdir(data) if f.endswith(".stk") and f != "manifest.stk")
    cmd = [os.path.join(a.build, "bench_http_ceiling")] + ["%s/%s" % (url, f) for f in shards]
    cmd += ["--block", flag("--block-size", "16M"), "--transfers",
            flag("--fetch-transfers", "16")]
    if out:
        os.makedirs(out, exist_ok=True)
        cmd += ["--out", out]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit("remote.py: %s failed:\n%s" % (" ".join(cmd), res.stderr))
    return json.loads(res.stdout)


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("data")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--latency-ms", type=int, default=20)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--block-size", default=None)
    p.add_argument("--ceiling", action="store_true")
    a = p.parse_args(argv)
    data = os.path.abspath(a.data.rstrip("/"))
    if a.block_size:
        extra += ["--block-size", a.block_size]
    if a.ceiling and "--warmup" not in extra:
        extra += ["--warmup", "0"]
    tmp = tempfile.mkdtemp(prefix="stoker-remote-bench-")
    proc, port = start_server(os.path.dirname(data), a.latency_ms, tmp)
    url = "http://127.0.0.1:%d/%s" % (port, os.path.basename(data))
    rows = []
    ceilings = []
    try:
        for rep in range(a.repeat):
            cache = os.path.join(tmp, "cache%d" % rep)
            env = dict(os.environ, STOKER_CACHE_DIR=cache)
            local = bench(a.build, data, a.epochs, extra, env)
            for name in ("cold", "cached"):
                r = bench(a.build, url, a.epochs, extra, env)
                rows.append((rep, name, r, local))
            rows.append((rep, "local", local, local))
            shutil.rmtree(cache, ignore_errors=True)
        if a.ceiling:
            ceilings = [http_ceiling(a, extra, url, data),
                        http_ceiling(a, extra, url, data, os.path.join(tmp, "ceiling"))]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print("latency %d ms per request, %d epoch(s) a run, stoker-bench flags: %s"
          % (a.latency_ms, a.epochs, " ".join(extra) or "(defaults)"))
    print("%-4s %-7s %10s %7s %9s %12s %10s %9s %24s" % (
        "rep", "run", "img/s", "x local", "requests", "MiB/request", "fetch wait", "max RSS",
        "CPU: http thread, writers"))
    for rep, name, r, local in rows:
        rate = r["records_per_sec"]
        reqs = r.get("remote_requests", 0)
        per = r.get("remote_bytes", 0) / reqs / 2**20 if reqs else 0
        cpu = ("%.2fs, %.2fs of %.2fs" % (r["http_cpu_s"], r["writers_cpu_s"],
                                         r.get("seconds", 0))
               if name != "local" else "-")
        print("%-4d %-7s %10.0f %7.3f %9d %12.2f %9.2fs %6.0f MiB %24s" % (
            rep, name, rate, rate / local["records_per_sec"], reqs, per,
            r.get("fetch_wait_seconds", 0), r["max_rss_mib"], cpu))
    for c in ceilings:
        print("ceiling: %d parallel ranged GETs of %d bytes pulled %.1f MB/s (%d requests), "
              "bodies %s" % (c["transfers"], c["block"], c["mb_per_sec"], c["requests"],
                             "written to files" if c["to_files"] else "discarded"))
    for rep, name, r, _ in rows:
        if name == "cold" and ceilings:
            mbs = r["bytes_per_sec"] / 1e6
            print("cold run %d delivered %.1f MB/s of batches: %s" % (rep, mbs, ", ".join(
                "%.3f x the ceiling with bodies %s" % (
                    mbs / c["mb_per_sec"], "written" if c["to_files"] else "discarded")
                for c in ceilings)))


if __name__ == "__main__":
    main()
