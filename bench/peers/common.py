# SPDX-License-Identifier: Apache-2.0
"""Shared by the peer pipelines: arguments, the timed loop and the one JSON line each prints.

Every peer prints exactly one JSON object on stdout, also when its packages are absent
(status "absent") or it fails (status "failed"), so that bench/report.py always has a row.
"""
import argparse
import json
import os
import resource
import sys
import time


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]  # ImageNet's


def image_loader(torch, dataset, a, dev):
    """The DataLoader of the JPEG peers: shuffled full batches from a.workers workers,
    pinned when the batches go to CUDA, 4 batches prefetched per worker, workers kept."""
    from torch.utils.data import DataLoader
    w = a.workers
    return DataLoader(dataset, batch_size=a.batch_size, shuffle=True, num_workers=w,
                      pin_memory=dev.type == "cuda", drop_last=True,
                      persistent_workers=w > 0, prefetch_factor=4 if w > 0 else None)


def image_result(torch, torchvision, out, a, dev):
    """A JPEG peer's timed result with what it ran on."""
    out.update(device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
               workers=a.workers, batch_size=a.batch_size, dtype="float32",
               versions=f"torch {torch.__version__}, torchvision {torchvision.__version__}")
    return out


def parse_args(doc, data_help, extra=None):
    """The peers' arguments; extra(parser) adds a peer's own."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("data", help=data_help)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=2, help="timed epochs, after one warm-up")
    ap.add_argument("--max-seconds", type=float, default=120.0,
                    help="stop timing after this long and report what was measured")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    ap.add_argument("--cold", action="store_true",
                    help="time one epoch from the first request, without warm-up: for a "
                         "page cache dropped just before (the workers' start is timed too)")
    if extra:
        extra(ap)
    return ap.parse_args()


def emit(row):
    print(json.dumps(row), flush=True)


def need(row, *modules):
    """Imports the modules; when one is absent, prints the row as 'absent' and exits 0."""
    got = []
    for m in modules:
        try:
            got.append(__import__(m))
        except Exception as e:  # ImportError, or a broken install
            emit(dict(row, status="absent", note=f"no {m} in {sys.executable} ({e})"))
            sys.exit(0)
    return got


def pick_device(torch, want):
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def _proc_cpu(pid):
    """CPU seconds (user + system) of a live process, from /proc; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _self_cpu():
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime + u.ru_stime


def _worker_pids(loader):
    """The DataLoader's worker processes (persistent workers only; private attribute)."""
    try:
        return [w.pid for w in loader._iterator._workers]
    except AttributeError:
        return []


def timed(torch, loader, device, epochs, max_seconds, consume, cold=False):
    """One warm-up epoch (cut short after a third of max_seconds), then up to `epochs` timed
    epochs, cut short after max_seconds. Cold: no warm-up, which would fill the page cache,
    and one timed epoch. Returns the figures of the timed part."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    t_start = time.perf_counter()
    if not cold:
        for x, _ in loader:
            consume(x)
            if time.perf_counter() - t_start > max_seconds / 3:
                break
        sync()
    pids = _worker_pids(loader)  # none yet when cold: the workers start in the timed epoch
    cpu0 = _self_cpu() + sum(_proc_cpu(p) for p in pids)
    n, done, t0 = 0, 0, time.perf_counter()
    cut = False
    for _ in range(1 if cold else epochs):
        for x, _ in loader:
            consume(x)
            n += x.shape[0]
            if time.perf_counter() - t0 > max_seconds:
                cut = True
                break
        if cut:
            break
        done += 1
    sync()
    seconds = time.perf_counter() - t0
    pids = pids or _worker_pids(loader)  # persistent workers: alive until the loader goes
    cpu = _self_cpu() + sum(_proc_cpu(p) for p in pids) - cpu0
    out = {"images": n, "seconds": round(seconds, 4), "epochs_timed": done,
           "figure": n / seconds if seconds > 0 else 0.0}
    if n and (pids or loader.num_workers == 0):
        out["cpu_seconds_per_image"] = cpu / n
    if cold:
        out["cold"] = True
    if cut:
        out["note"] = f"timing cut at {max_seconds:.0f} s after {done} full epochs"
    return out


def run(row, body):
    """Runs body() -> dict of figures, merges it into row and prints it; failures too."""
    notes = [row.pop("note", "")]
    try:
        out = body()
        notes.append(out.pop("note", ""))
        row.update(out)
        row.setdefault("status", "ok")
    except Exception as e:
        row["status"] = "failed"
        notes.append(f"{type(e).__name__}: {e}"[:300])
    row["note"] = "; ".join(n for n in notes if n)
    emit(row)
