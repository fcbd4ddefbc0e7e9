#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Python binding's host time per batch, as a training step sees it: between two
batches the step's work evicts the caches, so the binding runs cold, as it does between a
model's launches.

    bench/binding_cost.py [--build DIR] [--batch-size 256] [--evict-mb 64] [--steps 320]
                          [--repeat 1] [--json OUT]

A raw uint8 data set of 8x8x3 records (written in a temporary folder) is read on the host
by one worker, far faster than it is consumed, so every next() finds its batch ready. Each
step touches --evict-mb of memory (0: no eviction: the warm figure), then, timed apart:
`take` (next(); `binding`: its part outside the library's calls, as the binding counts it),
`data` and `label` (torch.from_dlpack of the batch's data and of its label field) and
`release` (dropping the previous step's tensors, which gives the batch back). Prints the
medians in microseconds, one line per repeat; --json OUT writes them. Needs numpy and torch.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

PARTS = ("take", "binding", "data", "label", "release", "total")


def measure(stoker, path, batch_size, evict_mb, steps):
    import numpy as np
    import torch
    loader = stoker.Loader(path, batch_size, device="cpu", threads=1, shuffle=False)
    binding = []
    real = stoker.loader._ADD_WAIT

    def add_wait(handle, seconds):  # the binding adds its own time here: note it
        binding.append(seconds)
        return real(handle, seconds)

    stoker.loader._ADD_WAIT = add_wait
    big = np.zeros(max(1, evict_mb) << 20, np.uint8)
    parts = {k: [] for k in PARTS}
    x = y = None
    epoch = 0
    try:
        while len(parts["take"]) < steps:
            loader.set_epoch(epoch)
            epoch += 1
            it = iter(loader)
            while len(parts["take"]) < steps:
                if evict_mb:
                    big[::64] += 1  # one write per cache line
                t0 = time.perf_counter()
                del x, y
                t1 = time.perf_counter()
                binding.clear()
                try:
                    b = next(it)
                except StopIteration:
                    x = y = None
                    break
                t2 = time.perf_counter()
                x = torch.from_dlpack(b.data)
                t3 = time.perf_counter()
                y = torch.from_dlpack(b["label"])
                del b
                t4 = time.perf_counter()
                for k, v in zip(PARTS, (t2 - t1, sum(binding), t3 - t2, t4 - t3, t1 - t0,
                                        t4 - t0)):
                    parts[k].append(v)
        x = y = None
    finally:
        stoker.loader._ADD_WAIT = real
        loader.close()
    warm = len(parts["take"]) // 5  # the first epoch's first steps warm up
    return {k: round(1e6 * statistics.median(v[warm:]), 1) for k, v in parts.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"),
                    help="the build whose libstoker.so to load (default: build/)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--evict-mb", type=int, default=64)
    ap.add_argument("--steps", type=int, default=320)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.batch_size < 1 or args.steps < 10 or args.evict_mb < 0 or args.repeat < 1:
        ap.error("--batch-size >= 1, --steps >= 10, --evict-mb >= 0, --repeat >= 1")
    # the library of --build unless STOKER_LIBRARY names one; the binding on PYTHONPATH
    # (another build's, to compare two), else this checkout's
    os.environ.setdefault("STOKER_LIBRARY", os.path.join(args.build, "libstoker.so"))
    if not os.environ.get("PYTHONPATH"):
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
    import numpy as np
    import stoker
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "raw")
        n = args.batch_size * 40
        with stoker.Writer(path, kind="raw", dtype="uint8", shape=(8, 8, 3), fsync=False) as w:
            for i in range(n):
                w.add(np.full((8, 8, 3), i % 251, np.uint8), i % 10)
        for _ in range(args.repeat):
            r = measure(stoker, path, args.batch_size, args.evict_mb, args.steps)
            runs.append(r)
            print("binding per batch (us, medians, caches %s): %s" % (
                "evicted" if args.evict_mb else "warm",
                ", ".join("%s %.1f" % (k, r[k]) for k in PARTS)), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"batch_size": args.batch_size, "evict_mb": args.evict_mb,
                       "steps": args.steps, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
