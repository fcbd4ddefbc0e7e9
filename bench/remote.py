#!/usr/bin/env python3
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

--ceiling also fetches every shard once from the same server with BUILD/bench_http_ceiling
(bench/ceiling/http_ceiling.c: libcurl alone, one ranged GET per block, as many at once as
stoker's fetch_transfers) and prints its MB/s beside the record bytes per second each cold
run delivered (stoker-bench's bytes_per_sec, the batches' bytes: for raw records without a
transform, the records' own): how close stoker comes to what plain ranged GETs pull. With
--ceiling every run times its first batch too (`--warmup 0` is added unless a --warmup is
given after `--`): the first batch of a shuffled epoch waits for most blocks, and a run that
left it untimed would count the blocks fetched meanwhile as free.
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


def bench(build, target, epochs, extra, env):
    """stoker-bench's JSON report, with the process's peak resident set (max_rss_mib)."""
    cmd = [os.path.join(build, "stoker-bench"), target, "--epochs", str(epochs), "--json"]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd + extra, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            sys.exit("remote.py: %s failed:\n%s" % (" ".join(cmd + extra), err.read()))
        r = json.load(out)
    r["max_rss_mib"] = usage.ru_maxrss / 1024.0  # KiB on Linux
    return r


def http_ceiling(a, extra, url, data):
    """bench_http_ceiling's JSON for every shard of DATA, at stoker's block size and
    transfers (as given after `--`, else the defaults)."""
    def flag(name, default):
        return extra[extra.index(name) + 1] if name in extra[:-1] else default
    shards = sorted(f for f in os.listdir(data) if f.endswith(".stk") and f != "manifest.stk")
    cmd = [os.path.join(a.build, "bench_http_ceiling")] + ["%s/%s" % (url, f) for f in shards]
    cmd += ["--block", flag("--block-size", "16M"), "--transfers",
            flag("--fetch-transfers", "16")]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("remote.py: %s failed:\n%s" % (" ".join(cmd), out.stderr))
    return json.loads(out.stdout)


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
    ceiling = None
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
            ceiling = http_ceiling(a, extra, url, data)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    print("latency %d ms per request, %d epoch(s) a run, stoker-bench flags: %s"
          % (a.latency_ms, a.epochs, " ".join(extra) or "(defaults)"))
    print("%-4s %-7s %10s %7s %9s %12s %10s %9s" % (
        "rep", "run", "img/s", "x local", "requests", "MiB/request", "fetch wait", "max RSS"))
    for rep, name, r, local in rows:
        rate = r["records_per_sec"]
        reqs = r.get("remote_requests", 0)
        per = r.get("remote_bytes", 0) / reqs / 2**20 if reqs else 0
        print("%-4d %-7s %10.0f %7.3f %9d %12.2f %9.2fs %6.0f MiB" % (
            rep, name, rate, rate / local["records_per_sec"], reqs, per,
            r.get("fetch_wait_seconds", 0), r["max_rss_mib"]))
    if ceiling:
        print("ceiling: %d parallel ranged GETs of %d bytes pulled %.1f MB/s (%d requests)"
              % (ceiling["transfers"], ceiling["block"], ceiling["mb_per_sec"],
                 ceiling["requests"]))
        for rep, name, r, _ in rows:
            if name == "cold":
                mbs = r["bytes_per_sec"] / 1e6
                print("cold run %d delivered %.1f MB/s of batches: %.3f x the ceiling"
                      % (rep, mbs, mbs / ceiling["mb_per_sec"]))


if __name__ == "__main__":
    main()
