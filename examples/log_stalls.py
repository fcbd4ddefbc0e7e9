# SPDX-License-Identifier: Apache-2.0
"""Logs what a training loop waits for: every --every steps, the loader's window (the last
--window seconds) says the rate, the share of the time the loop waited for data, each
stage's busy share and the verdict (the stage that limits the loader, or "consumer" when
the loader is ahead).

    python3 examples/log_stalls.py DATA [--steps 200] [--every 20] [--step-ms 5]

DATA is a stoker data set; left out, a small raw one is written to a temporary folder. The
loop's "training step" sleeps --step-ms per batch (a model would run there); it runs on the
CPU. With torch imported and its profiler running, each next() is a "stoker.next" range:
--profile OUT.json runs the loop under torch.profiler, writes its Chrome trace (Perfetto and
chrome://tracing open it) and prints how many "stoker.next" ranges it holds.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

import stoker


def small_data_set(folder):
    path = os.path.join(folder, "raw")
    with stoker.Writer(path, kind="raw", dtype="uint8", shape=(32, 32, 3), fsync=False) as w:
        for i in range(2048):
            w.add(np.full((32, 32, 3), i % 251, np.uint8), i % 10)
    return path


def log_window(step, w):
    print("step %5d  %6.0f records/s  waited %4.1f%%  workers busy %3.0f%%  gpu decode %3.0f%%"
          "  h2d %3.0f%%  fetch wait %3.0f%%  verdict %s: %s"
          % (step, w["records_per_sec"], 100 * w["wait_share"], 100 * w["workers_busy"],
             100 * w["gpu_decode_busy"], 100 * w["h2d_busy"], 100 * w["fetch_wait_share"],
             w["verdict"], w["verdict_reason"]), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="?")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--every", type=int, default=20, help="log the window every N steps")
    ap.add_argument("--window", type=float, default=stoker.loader.WINDOW_SECONDS,
                    help="seconds the logged figures cover")
    ap.add_argument("--step-ms", type=float, default=5.0, help="the simulated step's time")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--profile", metavar="OUT.json",
                    help="run under torch.profiler and write its Chrome trace")
    args = ap.parse_args(argv)
    if not args.profile:
        return run(args)
    import torch  # before the loader's first next(): the binding labels it then
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU]
    if args.device.startswith("cuda"):
        acts.append(ProfilerActivity.CUDA)
    with profile(activities=acts) as prof:
        rc = run(args)
    prof.export_chrome_trace(args.profile)
    names = [e.name for e in prof.events()]
    print("%s: %d stoker.next ranges among %d events"
          % (args.profile, names.count("stoker.next"), len(names)))
    return rc


def run(args):
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data or small_data_set(tmp)
        with stoker.Loader(data, args.batch_size, device=args.device) as loader:
            print("threads %d (%s)" % (loader.threads, loader.stats()["threads_note"]))
            step = 0
            while step < args.steps:
                for batch in loader:
                    del batch  # a training step would read it here
                    time.sleep(args.step_ms / 1000)
                    step += 1
                    if step % args.every == 0:
                        log_window(step, loader.window(args.window))
                    if step == args.steps:
                        break
            overall = loader.window(0)
            print("overall: %d batches in %.1f s, waited %.1f%%, verdict %s"
                  % (overall["batches"], overall["seconds"], 100 * overall["wait_share"],
                     overall["verdict"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
