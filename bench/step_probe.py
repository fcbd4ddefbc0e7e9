#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where a training step's time goes with one feed: the host's share of it, or the step
captured in a CUDA graph.

    bench/step_probe.py --data DS --feed default [--size 176] [--model resnet18]
                        [--mode eager|graph] [--steps 200] [--warmup 60] [--trace]
                        [--profile N] [--json OUT]
    bench/step_probe.py --device cpu --model tiny --data DS --size 32 --batch-size 16 \\
                        --steps 6 --warmup 2          # a smoke run on the CPU

One process, one feed (`--feed`): `synthetic` (one random batch already on the device),
`cpu`, `auto`, `gpu` (stoker.Loader on DS with that decoder) or `default` (the library's
defaults); the train transform at --size into bfloat16 NHWC batches on the device (float32
on the CPU). The step is bench/train.py's: the model in channels_last, autocast (bf16 on a
GPU), cross-entropy, SGD with momentum.

--mode eager (the default) runs the step as written and measures, per step, the host's
time in each part of taking a batch (`take`: the loader's next(), and `binding`: the part of
it outside the library's calls, as the binding counts it; `dlpack`: torch.from_dlpack
and the NCHW view; `labels`: the label field's tensor, on the batch's device with the batch
(a copy to the device with a library that gives host labels); `release`: giving the last batch
back), the host's time launching the step (`host`: from the batch in hand to the optimiser's
step returned) and, on a GPU, whether the device was idle when the host asked for the next
batch. A host that launches a step in less time than the step takes, with the device busy
when it asks for a batch, leaves the step to the device: what slows the step then is on
the device, not in the host's calls.

--mode graph captures the step (forward, backward, optimiser) in a CUDA graph once and
replays it each step, the batch copied into the graph's input first: the host's time a step
is then one replay, as with torch.compile(mode="reduce-overhead"), and the host waits for
nearly every batch. --trace prints the loader's GPU share, the workers' and the GPU decode
stage's busy shares and the split's note every 8 steps.

--profile N (CUDA only) runs N more steps after the timed ones under torch.profiler (the
device's activity only) and reads, per step: the model's kernels' time on its stream and
the span they cover (a span longer than their time is the device waiting for the host's
launches), the share of that time other streams ran beside them (the loader's and nvJPEG's
kernels and copies) and how much longer the model's kernels ran then than the same kernels
with nothing beside them. Dearer launches show as gaps; a device shared with the decode
shows as the model's kernels running longer.

Prints one line (img/s, the step's time, the medians above; with --profile a second);
--json OUT writes them. Exit status 2 for bad arguments, and for --mode graph or --profile
without a CUDA device.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from train import import_stoker, make_model, synthetic_feed  # noqa: E402 (train.py's)

DECODERS = ("cpu", "auto", "gpu")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--data", help="stoker data set of JPEGs (not needed for synthetic)")
    p.add_argument("--feed", default="default",
                   choices=("synthetic", "default") + DECODERS)
    p.add_argument("--mode", default="eager", choices=("eager", "graph"))
    p.add_argument("--model", default="resnet18",
                   help="a torchvision model name, or tiny (default resnet18)")
    p.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=60)
    p.add_argument("--build", default=os.environ.get("STOKER_BUILD_DIR") or
                   os.path.join(ROOT, "build"),
                   help="stoker's build folder: libstoker.so unless STOKER_LIBRARY is set")
    p.add_argument("--trace", action="store_true",
                   help="the loader's share and the split's note every 8 steps")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="N more steps under torch.profiler: the device's time (CUDA only)")
    p.add_argument("--json", metavar="OUT")
    a = p.parse_args(argv)
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 1 or a.size < 8 or a.profile < 0:
        p.error("--steps and --batch-size must be positive, --warmup not negative, --size "
                "at least 8, --profile not negative")
    if a.feed != "synthetic" and not a.data:
        p.error("--feed %s needs --data" % a.feed)
    a.seed = 0  # train.py's synthetic batch
    return p, a


class Probe:
    def __init__(self, torch, a, device):
        self.torch, self.a, self.device = torch, a, device
        self.cuda = device.type == "cuda"
        self.dtype = torch.bfloat16 if self.cuda else torch.float32
        self.parts = {k: [] for k in ("take", "binding", "dlpack", "labels", "release", "host",
                                      "idle")}
        self.binding = None  # this next()'s time outside the library, where the binding says
        self.loader = None
        self.stats = None  # the loader's, as it closed
        self.trace = []

    def synthetic(self):
        """train.py's fixed batch (seed 0): (x, y) on the device."""
        return next(synthetic_feed(self.torch, self.a, self.device, self.dtype, {}))

    def feed(self):
        """Yields (x, y); each stoker batch's parts are timed into self.parts."""
        torch, a = self.torch, self.a
        if a.feed == "synthetic":
            x, y = self.synthetic()
            while True:
                yield x, y
        stoker = import_stoker()
        real = getattr(stoker.loader, "_ADD_WAIT", None)
        if real is not None:  # the binding adds its own time to the library's wait: note it
            def add_wait(handle, seconds):
                self.binding = seconds
                return real(handle, seconds)
            stoker.loader._ADD_WAIT = add_wait
        kw = {} if a.feed == "default" else {"decoder": a.feed}
        self.loader = stoker.Loader(
            a.data, a.batch_size, transform="train", size=a.size, layout="NHWC",
            dtype="bfloat16" if self.cuda else "float32",
            device="cuda:%d" % self.device.index if self.cuda else "cpu", drop_last=True,
            seed=0, **kw)
        if len(self.loader) == 0:
            raise SystemExit("step_probe.py: %s holds less than one batch of %d"
                             % (a.data, a.batch_size))
        try:
            while True:
                it = iter(self.loader)
                while True:
                    self.binding = None
                    t0 = time.perf_counter()
                    try:
                        b = next(it)
                    except StopIteration:
                        break
                    t1 = time.perf_counter()
                    x = torch.from_dlpack(b.data).permute(0, 3, 1, 2)
                    t2 = time.perf_counter()
                    if "label" in b:  # on the batch's device already: no copy
                        y = torch.from_dlpack(b["label"])
                    else:
                        y = torch.from_numpy(b.labels).to(self.device, non_blocking=True)
                    del b
                    t3 = time.perf_counter()
                    self.parts["take"].append(t1 - t0)
                    if self.binding is not None:
                        self.parts["binding"].append(self.binding)
                    self.parts["dlpack"].append(t2 - t1)
                    self.parts["labels"].append(t3 - t2)
                    yield x, y
                    t4 = time.perf_counter()
                    del x, y
                    self.parts["release"].append(time.perf_counter() - t4)
        finally:
            st = self.loader.stats()
            self.stats = {k: st.get(k) for k in ("decoder", "gpu_share", "gpu_decoded",
                                                  "cpu_decoded", "cpu_busy", "gpu_busy",
                                                  "decoder_note")}
            self.loader.close()

    def note(self, step):
        if self.a.trace and self.loader is not None and step % 8 == 0:
            st = self.loader.stats()
            line = [step, round(st.get("gpu_share", 0), 3), round(st.get("cpu_busy", 0), 3),
                    round(st.get("gpu_busy", 0), 3), st.get("decoder_note", "")]
            self.trace.append(line)
            print("  %4d share %.2f workers %.2f gpu %.2f | %s" % tuple(line), flush=True)


def merged(spans):
    """The union of (start, end) spans, sorted and disjoint."""
    out = []
    for b, e in sorted(spans):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def covered(b, e, union, k):
    """Time of [b, e) inside `union` (merged spans), scanning from index k; returns
    (time, the index to scan from for a later span)."""
    while k < len(union) and union[k][1] <= b:
        k += 1
    t, j = 0.0, k
    while j < len(union) and union[j][0] < e:
        t += min(e, union[j][1]) - max(b, union[j][0])
        j += 1
    return t, k


def device_time(events, steps):
    """Per step, from a profiler trace's events (chrome trace: "X" events of cat kernel,
    gpu_memcpy, gpu_memset, times in us, args.stream): the model's stream is the one whose
    kernels took the most time. Returns ms a step of the model's kernels (`model_ms`) and
    the span from its first kernel's start to its last one's end (`span_ms`; `gaps` is the
    share of the span no model kernel ran), the share of model kernel time with another
    stream's work running (`beside`), how much longer a kernel ran beside such work than the
    mean of the same kernel's runs with nothing beside it (`beside_slowdown`: 1.0 = no
    longer; kernels by name, only names that ran both ways), and the other streams' kernels
    and copies (count and ms a step, by kind)."""
    acts = [e for e in events if e.get("ph") == "X" and
            e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    streams = {}
    for e in acts:
        streams.setdefault((e.get("args") or {}).get("stream"), []).append(e)
    ktime = {s: sum(e["dur"] for e in v if e["cat"] == "kernel") for s, v in streams.items()}
    if not ktime or max(ktime.values()) <= 0 or steps < 1:
        return None
    ms = max(ktime, key=ktime.get)
    mk = sorted((e for e in streams[ms] if e["cat"] == "kernel"), key=lambda e: e["ts"])
    other = merged([(e["ts"], e["ts"] + e["dur"]) for s, v in streams.items() if s != ms
                    for e in v])
    alone, beside, k = {}, [], 0
    over_t = 0.0
    for e in mk:
        t, k = covered(e["ts"], e["ts"] + e["dur"], other, k)
        over_t += t
        if t > 0.5 * e["dur"]:
            beside.append(e)
        elif t == 0:
            alone.setdefault(e["name"], []).append(e["dur"])
    mean = {n: sum(v) / len(v) for n, v in alone.items()}
    ran = [(e["dur"], mean[e["name"]]) for e in beside if e["name"] in mean]
    busy = sum(e["dur"] for e in mk)
    span = mk[-1]["ts"] + mk[-1]["dur"] - mk[0]["ts"]
    kinds = {}
    for s, v in streams.items():
        if s == ms:
            continue
        for e in v:
            kind = "kernels" if e["cat"] == "kernel" else e["name"].split(" (")[0]
            c = kinds.setdefault(kind, [0, 0.0])
            c[0] += 1
            c[1] += e["dur"]
    return {"steps": steps, "model_ms": round(busy / 1000 / steps, 3),
            "span_ms": round(span / 1000 / steps, 3),
            "gaps": round(1 - busy / span, 4) if span > 0 else None,
            "beside": round(over_t / busy, 4) if busy > 0 else None,
            "beside_kernels": len(ran),
            "beside_slowdown": round(sum(d for d, _ in ran) / sum(m for _, m in ran), 3)
            if ran else None,
            "others": {n: {"count_per_step": round(c / steps, 1),
                           "ms_per_step": round(t / 1000 / steps, 3)}
                       for n, (c, t) in sorted(kinds.items())}}


def run(torch, a, device):
    pr = Probe(torch, a, device)
    cuda = pr.cuda
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = make_model(torch, a.model, a.classes).to(device)
    model = model.to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    lossf = torch.nn.CrossEntropyLoss()
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def autocast(cache=True):
        if not cuda:
            return torch.autocast("cpu", enabled=False)
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=cache)

    graph = None
    if a.mode == "graph":
        sx, sy = pr.synthetic()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # the warm-up a capture needs, on a side stream
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                with autocast(cache=False):
                    loss = lossf(model(sx), sy)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            with autocast(cache=False):
                static_loss = lossf(model(sx), sy)
            static_loss.backward()
            opt.step()

    src = pr.feed()
    stream = torch.cuda.current_stream() if cuda else None
    waited = 0.0

    def step():
        """One step: the batch taken, then the step launched; returns the host's wait."""
        tw = time.perf_counter()
        idle = stream.query() if cuda else False
        x, y = next(src)
        th = time.perf_counter()
        if graph is not None:
            if x is not sx:
                sx.copy_(x)
                sy.copy_(y)
            graph.replay()
        else:
            with autocast():
                loss = lossf(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        pr.parts["host"].append(time.perf_counter() - th)
        pr.parts["idle"].append(1.0 if idle else 0.0)
        return th - tw

    profiled = None
    try:
        for i in range(a.warmup + a.steps):
            if i == a.warmup:
                sync()
                t0, waited = time.perf_counter(), 0.0
                for v in pr.parts.values():
                    v.clear()
            waited += step()
            pr.note(i - a.warmup)
        sync()
        seconds = time.perf_counter() - t0
        parts = {k: list(v) for k, v in pr.parts.items()}
        if a.profile:
            profiled = profile(torch, a.profile, step, sync)
    finally:
        src.close()
    pr.parts = parts
    med = {k: round(1000 * statistics.median(v), 3) if v else None
           for k, v in pr.parts.items() if k != "idle"}
    out = {"model": a.model, "feed": a.feed, "mode": a.mode, "size": a.size,
           "device": str(device), "img_per_s": round(a.batch_size * a.steps / seconds, 1),
           "step_ms": round(1000 * seconds / a.steps, 3),
           "host_waited": round(waited / seconds, 4), "median_ms": med,
           "device_idle_at_next": round(sum(pr.parts["idle"]) / a.steps, 3) if cuda else None,
           "split_trace": pr.trace, "loader": pr.stats, "profile": profiled}
    return out


def profile(torch, steps, step, sync):
    """`steps` more steps under torch.profiler, the device's activity only: device_time's
    figures."""
    import tempfile
    from torch.profiler import ProfilerActivity
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    return device_time(events, steps)


def main(argv):
    _, a = parse_args(argv)
    if not os.environ.get("STOKER_LIBRARY"):
        os.environ["STOKER_LIBRARY"] = os.path.join(a.build, "libstoker.so")
    import torch
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        print("step_probe.py: --device cuda: torch finds no CUDA device", file=sys.stderr)
        return 2
    if a.mode == "graph" and a.device != "cuda":
        print("step_probe.py: --mode graph needs a CUDA device (a CUDA graph is captured)",
              file=sys.stderr)
        return 2
    if a.profile and a.device != "cuda":
        print("step_probe.py: --profile needs a CUDA device (it reads the device's activity)",
              file=sys.stderr)
        return 2
    device = torch.device("cuda:0" if a.device == "cuda" else "cpu")
    out = run(torch, a, device)
    m = out["median_ms"]
    fmt = lambda v: "-" if v is None else "%.3f" % v
    print("%s %s %s %d px: %.0f img/s, step %.2f ms, the host waited %.1f%% | medians: host "
          "%s ms, take %s (binding %s), dlpack %s, labels %s, release %s%s"
          % (a.model, a.mode, a.feed, a.size, out["img_per_s"], out["step_ms"],
             100 * out["host_waited"], fmt(m["host"]), fmt(m["take"]), fmt(m["binding"]),
             fmt(m["dlpack"]),
             fmt(m["labels"]), fmt(m["release"]),
             "" if out["device_idle_at_next"] is None else
             " | device idle at next(): %.0f%% of steps" % (100 * out["device_idle_at_next"])))
    d = out["profile"]
    if d:
        o = d["others"]
        print("  device, %d profiled steps: the model's kernels %.2f ms a step in a span of "
              "%.2f ms (gaps %.1f%%); other streams ran beside %.1f%% of that time, the "
              "model's kernels then %s their time alone; other streams a step: %s"
              % (d["steps"], d["model_ms"], d["span_ms"], 100 * d["gaps"], 100 * d["beside"],
                 "-" if d["beside_slowdown"] is None else "%.2fx" % d["beside_slowdown"],
                 ", ".join("%s %.1f (%.2f ms)" % (n, v["count_per_step"], v["ms_per_step"])
                           for n, v in o.items()) or "nothing"))
    elif a.profile:
        print("  device: the profiler recorded no kernel")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
