#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A training step fed by stoker, by PyTorch's DataLoader and by one fixed batch: img/s.

    bench/train.py --data DS --imagefolder DIR [--models resnet18,resnet50] [--repeat N]
                   [--feeds synthetic,cpu,default,torch] [--size 224] [--batch-size 256]
                   [--steps 200] [--warmup 30] [--threads T] [--workers W] [--trace LIB]
                   [--nvtx-trace DIR] [--json OUT] [--md OUT]
    bench/train.py --device cpu --models tiny --make-data DIR --size 32 --batch-size 16 \\
                   --steps 6 --warmup 2 --workers 2          # a smoke run on the CPU

DS is a stoker data set of JPEGs (`stoker-pack IMAGEFOLDER DS`), DIR the same images as an
ImageFolder tree (for the DataLoader). `--make-data DIR` writes a small tree of JPEGs with
Pillow (`--images N`) and packs it with stoker-pack (from `--build`), for a run without data.

The step: a torchvision model (`--models`: any name torchvision.models knows; `tiny`, a few
convolutions built in, needs no torchvision) in channels_last memory format, under autocast
(`--amp`: bf16 on a GPU by default, none on the CPU), cross-entropy, SGD (momentum 0.9, lr
`--lr`, weight decay 1e-4), `--batch-size` images of `--size`x`--size` a step.

The feeds (`--feeds`, comma-separated; each one a row of the table):
  synthetic   one random batch already on the device, the same every step: the model alone
  cpu         stoker.Loader on DS, decoder="cpu" (the JPEGs decoded on the CPU workers)
  default     stoker.Loader on DS with the library's defaults (decoder "auto")
  auto, gpu   stoker.Loader on DS, decoder="auto" or "gpu"
  stoker:KEY=VALUE,KEY=VALUE    stoker.Loader with any of its keywords, e.g.
              stoker:threads=12,decoder=auto (also cpu:threads=12 and the like); a value is
              parsed as an int, a float, true/false, none, or A/B/C for a tuple. One key is
              the feed's own: labels=device (default: the batch's label field, which the
              loader moved to the device with the batch: no copy in the step),
              labels=pageable (from the batch's numpy array, as most training code does) or
              labels=pinned (through torch's pinned memory first). A key env.NAME sets NAME in the feed's child
              process's environment (the library's measuring switches, docs/GPU.md), e.g.
              stoker:env.STOKER_GPU_DECODE_PRIORITY=greatest, or the script's own
              TRAIN_CUDA_SCHED=spin|yield|blocking|auto: how the child's host threads wait
              for the device (the CUDA context's scheduling, set with cuCtxSetFlags before
              the model is built; a synthetic feed takes this key too, as
              synthetic:env.TRAIN_CUDA_SCHED=yield). consume=background: the model
              trains on the synthetic batch while a thread drops the loader's batches as
              fast as they come: the step never waits, so what it loses against synthetic
              is what the loader's work costs it (the loader's img/s over the timed steps
              is printed). consume=discard: each step takes the loader's batch as a step
              does (DLPack, the labels' copy) and drops it, then trains on the synthetic
              batch: the step waits for data, yet its kernels do not wait for the batch's
  torch       PyTorch's DataLoader on DIR: --workers workers, pin_memory, 4 batches
              prefetched per worker, persistent workers; torchvision.io.decode_jpeg and
              RandomResizedCrop + horizontal flip on uint8 in the workers, normalised on the
              device (of the two DataLoader pipelines in docs/BENCHMARKS.md the faster one);
              without torchvision, Pillow and the same crop by hand (torch:pipeline=pil asks
              for it); torch:workers=N
Every stoker feed runs the train transform at --size, --dtype (the autocast's dtype by
default), --layout (NHWC by default: channels_last without a copy) and --threads, onto the
training device; its keywords override these.

Each (model, feed, repetition) runs in a process of its own (this script, called again with
a hidden --child), so that no two feeds share a CUDA context, threads or memory. `--repeat
N` runs every feed N times, the order reversed every second repetition. Each child takes
--warmup untimed steps, then --steps timed ones, timed by the wall clock with the device
synchronised at both ends: img/s = images / seconds; "waits" = the share of that time the
host spent in the feed's next() (for the DataLoader and host batches: the copy to the device
and the normalisation's launch included). "x synthetic" divides a feed's median by the
synthetic feed's of the same model. Each stoker child's decoder figures (loader.stats():
the decoder in effect, the GPU's share of the timed steps' images, the images each side
decoded, how busy the CPU workers were, the loader's wait) are printed as it ends, and
again before the table that ends the run.

--trace LIB sets CUDA_INJECTION64_PATH=LIB in the stoker children's environment
(bench/cuda_trace.c, built as libbench_cuda_trace.so: each child's report goes to its
stderr, or to STOKER_TRACE_OUT). --nvtx-trace DIR attaches the NVTX injection library of
--build (bench/nvtx_trace.c, libbench_nvtx_trace.so, made by a CUDA build) to each stoker
child, which writes its ranges as a Chrome trace (Perfetto, chrome://tracing) to
DIR/MODEL-FEED-rREP.json; the count of each range name is printed as the child ends.
--json OUT keeps every child's record (a stoker child's
split_trace: the GPU's share and the split's note every 8 steps from the first, warm-up
included, as [step counted from the first timed one, seconds since the first step, share,
note]; step_waits_ms: each step's wait for its batch), --md OUT the
tables. Exit status 1 when a child failed (the tables say which and why), 2 for bad
arguments.
"""
import argparse
import contextlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import childrun  # noqa: E402  (what bench/tasks.py shares: the children, the summary)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)  # ImageNet's
STOKER_NAMED = {"cpu": {"decoder": "cpu"}, "default": {}, "auto": {"decoder": "auto"},
                "gpu": {"decoder": "gpu"}}
TORCH_KEYS = ("workers", "pipeline")
TRACE_EVERY = 8  # steps between samples of the split's share and note (its period)
STATS_KEYS = ("decoder", "gpu_share", "gpu_decoded", "cpu_decoded", "gpu_retried",
              "gpu_fallbacks", "cpu_busy", "gpu_busy", "decoder_note", "wait_seconds",
              "threads", "depth", "device", "records")


def import_stoker():
    """The binding of this checkout (python/), bound to STOKER_LIBRARY."""
    path = os.path.join(ROOT, "python")
    if os.path.isdir(os.path.join(path, "stoker")) and path not in sys.path:
        sys.path.insert(0, path)
    import stoker
    return stoker


# ---------------------------------------------------------------- feeds: parsing

def parse_value(text):
    low = text.lower()
    if low == "none":
        return None
    if low in ("true", "false"):
        return low == "true"
    if "/" in text:
        return tuple(parse_value(p) for p in text.split("/"))
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_feeds(specs):
    """Feeds from --feeds texts: [{"id", "kind": synthetic|stoker|torch, "kw"}]."""
    feeds = []
    for tok in ",".join(specs).split(","):
        tok = tok.strip()
        if not tok:
            continue
        name, colon, rest = tok.partition(":")
        if "=" in tok and ":" not in tok.split("=", 1)[0]:  # KEY=VALUE of the feed before
            if not feeds:
                raise ValueError("%r: a KEY=VALUE follows the feed it belongs to" % tok)
            feeds[-1]["kv"].append(tok)
            continue
        if name == "synthetic":
            feeds.append({"name": name, "kind": "synthetic", "kv": []})
        elif name in STOKER_NAMED or name == "stoker":
            feeds.append({"name": name, "kind": "stoker", "kv": []})
        elif name == "torch":
            feeds.append({"name": name, "kind": "torch", "kv": []})
        else:
            raise ValueError("unknown feed %r (synthetic, cpu, default, auto, gpu, "
                             "stoker:KEY=VALUE,..., torch)" % tok)
        if rest:
            feeds[-1]["kv"].append(rest)
    for f in feeds:
        kw = dict(STOKER_NAMED.get(f["name"], {}))
        f["env"] = {}
        for kv in f["kv"]:
            key, eq, value = kv.partition("=")
            key = key.strip()
            if not eq or not key:
                raise ValueError("%r in feed %r: KEY=VALUE expected" % (kv, f["name"]))
            if key.startswith("env."):  # the child's environment: the library's switches
                f["env"][key[4:]] = value.strip()
            else:
                kw[key] = parse_value(value.strip())
        f["kw"] = kw
        kv = f.pop("kv")
        f["id"] = f["name"] + (":" + ",".join(kv) if kv else "")
        if f["kind"] == "synthetic" and kw:
            raise ValueError("feed %s: a synthetic feed takes env.NAME=VALUE only" % f["id"])
        if f["kind"] == "torch":
            bad = sorted(set(kw) - set(TORCH_KEYS))
            if bad:
                raise ValueError("feed %s: the torch feed takes %s, not %s"
                                 % (f["id"], ", ".join(TORCH_KEYS), ", ".join(bad)))
            if kw.get("pipeline", "auto") not in ("auto", "torchvision", "pil"):
                raise ValueError("feed %s: pipeline is torchvision or pil" % f["id"])
            w = kw.get("workers", 0)
            if not isinstance(w, int) or isinstance(w, bool) or w < 0:
                raise ValueError("feed %s: workers is a count" % f["id"])
    ids = [f["id"] for f in feeds]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError("feed %s given twice" % ", ".join(dup))
    return feeds


def feed_title(f, workers):
    extra = f["id"].partition(":")[2]
    if f["kind"] == "synthetic":
        return "synthetic (one batch on the device)" + (" (%s)" % extra if extra else "")
    if f["kind"] == "torch":
        w = f["kw"].get("workers", workers)
        return "DataLoader, %d worker%s" % (w, "" if w == 1 else "s") + \
            (", %s" % f["kw"]["pipeline"] if "pipeline" in f["kw"] else "")
    if f["name"] == "stoker":
        return "stoker " + (extra or "default")
    return "stoker %s%s" % (f["name"], " (%s)" % extra if extra else "")


# ---------------------------------------------------------------- data for a smoke run

def make_data(root, n, size, build):
    """n JPEGs (10 classes) written with Pillow under ROOT/images, packed into ROOT/packed
    with stoker-pack; kept for the next run with the same n and size."""
    import numpy as np
    from PIL import Image
    tree, packed = os.path.join(root, "images"), os.path.join(root, "packed")
    marker, key = os.path.join(root, ".made"), "%d %d" % (n, size)
    try:
        with open(marker) as f:
            if f.read() == key and os.path.isdir(packed):
                return tree, packed
    except OSError:
        pass
    shutil.rmtree(tree, ignore_errors=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        label = i % 10
        d = os.path.join(tree, "class%02d" % label)
        os.makedirs(d, exist_ok=True)
        h, w = (int(size * s) for s in rng.uniform(1.1, 2.6, 2))
        base = np.linspace(0, 255, w, dtype=np.float32)[None, :, None] * (label + 1) / 10
        img = (base + rng.normal(60, 40, (h, w, 3))).clip(0, 255).astype(np.uint8)
        Image.fromarray(img).save(os.path.join(d, "%05d.jpg" % i), quality=90)
    pack = os.path.join(build, "stoker-pack")
    if not os.access(pack, os.X_OK):
        pack = shutil.which("stoker-pack")
    if not pack:
        raise SystemExit("train.py: --make-data needs stoker-pack (in --build %s or on the "
                         "PATH)" % build)
    subprocess.run([pack, "--quiet", "--force", "--no-fsync", tree, packed], check=True)
    with open(marker, "w") as f:
        f.write(key)
    return tree, packed


# ---------------------------------------------------------------- the child: one run

def image_folder(root):
    """ImageFolder's samples: (path, label), labels in sorted class-name order."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    exts = (".jpg", ".jpeg", ".png")
    out = []
    for label, c in enumerate(classes):
        for dirpath, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
            out += [(os.path.join(dirpath, f), label) for f in sorted(files)
                    if f.lower().endswith(exts)]
    return out


def crop_box(w, h, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params: (left, top, width, height)."""
    area = w * h
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * random.uniform(*scale)
        aspect = math.exp(random.uniform(*log_ratio))
        cw = int(round(math.sqrt(target * aspect)))
        ch = int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            return random.randint(0, w - cw), random.randint(0, h - ch), cw, ch
    if w / h < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif w / h > ratio[1]:
        cw, ch = int(round(h * ratio[1])), h
    else:
        cw, ch = w, h
    return (w - cw) // 2, (h - ch) // 2, cw, ch


class JpegFolder:
    """The DataLoader feed's data set: (uint8 [3, size, size] tensor, label) per image.
    torchvision: decode_jpeg (Pillow for what it refuses) and RandomResizedCrop + flip on
    uint8 (transforms.v2 where torchvision has it); pil: Pillow decode, the same crop by
    hand, bilinear resize, flip."""

    def __init__(self, samples, size, pipeline):
        self.samples, self.size, self.pipeline = samples, size, pipeline
        self.tf = None

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        if self.pipeline == "torchvision":
            return self.torchvision_item(path), label
        return self.pil_item(path), label

    def torchvision_item(self, path):
        from torchvision.io import ImageReadMode, decode_jpeg, read_file
        if self.tf is None:
            try:
                from torchvision.transforms import v2 as T
            except ImportError:  # torchvision < 0.15: the v1 transforms take uint8 too
                import torchvision.transforms as T
            self.tf = T.Compose([T.RandomResizedCrop(self.size, antialias=True),
                                 T.RandomHorizontalFlip()])
        try:
            img = decode_jpeg(read_file(path), mode=ImageReadMode.RGB)
        except RuntimeError:  # CMYK on older torchvision, PNG
            img = self.pil_rgb(path)
        return self.tf(img)

    @staticmethod
    def pil_rgb(path):
        import numpy as np
        import torch
        from PIL import Image
        with Image.open(path) as im:
            return torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)

    def pil_item(self, path):
        import numpy as np
        import torch
        from PIL import Image
        with Image.open(path) as im:
            im = im.convert("RGB")
        left, top, cw, ch = crop_box(*im.size)
        bilinear = getattr(Image, "Resampling", Image).BILINEAR
        im = im.resize((self.size, self.size), bilinear, box=(left, top, left + cw, top + ch))
        if random.random() < 0.5:
            im = im.transpose(getattr(Image, "Transpose", Image).FLIP_LEFT_RIGHT)
        return torch.from_numpy(np.array(im)).permute(2, 0, 1)


def synthetic_feed(torch, a, device, dtype, info):
    g = torch.Generator().manual_seed(a.seed)
    x = torch.randn(a.batch_size, 3, a.size, a.size, generator=g)
    x = x.to(device=device, dtype=dtype).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch_size,), generator=g).to(device)
    info["layout"] = "channels_last"
    while True:
        yield x, y


def stoker_feed(torch, a, kw, device, dtype, info):
    stoker = import_stoker()
    opts = dict(transform="train", size=a.size, dtype=a.dtype, layout=a.layout,
                device="cuda:%d" % device.index if device.type == "cuda" else "cpu",
                threads=a.threads, drop_last=True, seed=a.seed)
    kw = dict(kw)
    labels = kw.pop("labels", "device")
    if labels not in ("device", "pinned", "pageable"):
        raise ValueError("labels=%s: device, pinned or pageable" % labels)
    consume = kw.pop("consume", "step")
    if consume not in ("step", "background", "discard"):
        raise ValueError("consume=%s: step, background or discard" % consume)
    opts.update(kw)
    info["labels"] = labels
    info["consume"] = consume
    # The labels' copy to the device: from pageable memory the CUDA runtime may make the
    # copy wait for the stream's queued work; labels=pinned measures whether that costs the
    # step (beside ResNet-18 on one H200 it did not: docs/GPU.md)
    pinned = device.type == "cuda" and labels == "pinned"
    loader = stoker.Loader(a.data, a.batch_size, **opts)
    info["loader_obj"] = loader
    if len(loader) == 0:
        loader.close()
        raise ValueError("%s holds less than one batch of %d" % (a.data, a.batch_size))
    nhwc = str(loader.layout).upper() == "NHWC"
    info["loader"] = {k: getattr(loader, k) for k in ("threads", "depth", "decoder", "device",
                                                        "dtype", "layout", "backend")}
    info["stoker"] = stoker.version()
    info["batches_per_epoch"] = len(loader)
    if consume == "background":
        yield from background_feed(torch, a, loader, device, dtype, info)
        return
    fixed = synthetic_feed(torch, a, device, dtype, {}) if consume == "discard" else None
    try:
        while True:
            for batch in loader:
                x = torch.from_dlpack(batch.data)  # zero copy
                if x.device != device:  # host batches: the copy counts as waiting
                    x = x.to(device, non_blocking=True)
                if nhwc:
                    x = x.permute(0, 3, 1, 2)  # an NCHW view with channels_last strides
                else:
                    x = x.contiguous(memory_format=torch.channels_last)
                if x.dtype != dtype:
                    x = x.to(dtype)
                if labels == "device":  # on the batch's device already: no copy
                    y = torch.from_dlpack(batch["label"])
                else:
                    y = torch.from_numpy(batch.labels)
                    if pinned:
                        y = y.pin_memory()
                y = y.to(device, non_blocking=True)
                del batch  # the batch lives on in x
                if fixed is not None:  # consume=discard: taken, and dropped
                    del x, y
                    x, y = next(fixed)
                yield x, y
                del x, y
    finally:
        loader.close()


def background_feed(torch, a, loader, device, dtype, info):
    """consume=background: the model trains on the synthetic batch while a thread of its
    own takes the loader's batches as fast as they come and drops them, so the step never
    waits for data and what it loses against the synthetic feed is what the loader's work
    costs it (cores, the device, the driver)."""
    stop, failed = threading.Event(), []

    def drain():
        try:
            while not stop.is_set():
                for batch in loader:
                    del batch
                    if stop.is_set():
                        break
        except BaseException as e:  # the run fails with it, never goes on unburdened
            failed.append(e)

    t = threading.Thread(target=drain, name="stoker-drain", daemon=True)
    t.start()
    try:
        for xy in synthetic_feed(torch, a, device, dtype, info):
            if failed:
                raise RuntimeError("the background loader failed: %s" % failed[0])
            yield xy
    finally:
        stop.set()
        t.join()
        loader.close()


def torch_feed(torch, a, kw, device, dtype, info):
    from torch.utils.data import DataLoader
    workers = kw.get("workers", a.workers)
    pipeline = kw.get("pipeline", "auto")
    if pipeline in ("auto", "torchvision"):
        try:
            import torchvision
            import torchvision.io  # noqa: F401
            pipeline = "torchvision"
            info["torchvision"] = torchvision.__version__
        except ImportError:
            if pipeline == "torchvision":
                raise
            pipeline = "pil"
    samples = image_folder(a.imagefolder)
    cuda = device.type == "cuda"
    more = dict(persistent_workers=True, prefetch_factor=4) if workers > 0 else {}
    dl = DataLoader(JpegFolder(samples, a.size, pipeline), batch_size=a.batch_size,
                    shuffle=True, num_workers=workers, pin_memory=cuda, drop_last=True, **more)
    if len(dl) == 0:
        raise ValueError("%s holds %d images, less than one batch of %d"
                         % (a.imagefolder, len(samples), a.batch_size))
    info.update(pipeline=pipeline, workers=workers, images_in_folder=len(samples),
                batches_per_epoch=len(dl))
    mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device=device).view(1, 3, 1, 1) * 255
    while True:
        for x, y in dl:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            x = ((x.float() - mean) / std).to(dtype)
            yield x, y.to(device, non_blocking=True)


def make_model(torch, name, classes):
    nn = torch.nn
    if name == "tiny":
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes))
    import torchvision.models as models
    if hasattr(models, "get_model"):
        return models.get_model(name, weights=None, num_classes=classes)
    return getattr(models, name)(num_classes=classes)


def loader_stats(info):
    loader = info.get("loader_obj")
    if loader is None or loader.closed:
        return None
    return loader.stats()


def loader_window(info, seconds):
    """The loader's own figures over the timed steps (stoker feeds): its window of the last
    `seconds` (Loader.window), to set beside the step's measured waits."""
    loader = info.get("loader_obj")
    if loader is None or loader.closed or not hasattr(loader, "window"):
        return None
    w = loader.window(seconds)
    return {k: w[k] for k in ("seconds", "wait_share", "records_per_sec", "workers_busy",
                              "gpu_decode_busy", "h2d_busy", "verdict", "verdict_reason")}


def trace_split(info, step, seconds):
    """The split's share and last word at a step (stoker feeds): info["split_trace"]."""
    st = loader_stats(info)
    if st and st.get("decoder_note") is not None:
        info.setdefault("split_trace", []).append(
            [step, round(seconds, 3), round(st.get("gpu_share", 0.0), 3), st["decoder_note"]])


CUDA_SCHED = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}  # CU_CTX_SCHED_*


def set_cuda_sched(torch, device, how):
    """How the host waits for the device in this process (the CUDA context's scheduling
    flags, cuCtxSetFlags): spin, yield, blocking or auto. Returns the flags set."""
    import ctypes
    if how not in CUDA_SCHED:
        raise ValueError("TRAIN_CUDA_SCHED=%s: %s" % (how, ", ".join(CUDA_SCHED)))
    torch.zeros(1, device=device)  # the device's context made, and current on this thread
    cu = ctypes.CDLL("libcuda.so.1")
    flags = ctypes.c_uint(0)
    if cu.cuCtxGetFlags(ctypes.byref(flags)) != 0:
        raise RuntimeError("cuCtxGetFlags failed")
    new = (flags.value & ~0x7) | CUDA_SCHED[how]
    rc = cu.cuCtxSetFlags(ctypes.c_uint(new))
    if rc != 0:
        raise RuntimeError("cuCtxSetFlags(0x%x) failed: CUresult %d" % (new, rc))
    return new


def train(torch, a, model_name, feed, info):
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
        info["gpu"] = torch.cuda.get_device_name(device)
        sched = os.environ.get("TRAIN_CUDA_SCHED")
        if sched:
            info["cuda_sched"] = "%s (context flags 0x%x)" % (
                sched, set_cuda_sched(torch, device, sched))
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
    dtype = getattr(torch, a.dtype) if amp is not None else torch.float32
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    model = make_model(torch, model_name, a.classes).to(device)
    model = model.to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda", enabled=a.amp == "fp16")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=a.amp == "fp16")
    loss_fn = torch.nn.CrossEntropyLoss()
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def autocast():
        if amp is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp)

    if feed["kind"] == "synthetic":
        batches = synthetic_feed(torch, a, device, dtype, info)
    else:
        make = stoker_feed if feed["kind"] == "stoker" else torch_feed
        batches = make(torch, a, feed["kw"], device, dtype, info)
    t_start = time.perf_counter()
    try:
        waited, images, t0, first_loss = 0.0, 0, None, None
        step_waits = info["step_waits_ms"] = []
        for step in range(a.warmup + a.steps):
            if step == a.warmup:
                sync()
                info["stats_start"] = loader_stats(info)
                info["warmup_seconds"] = round(time.perf_counter() - t_start, 3)
                waited, images, t0 = 0.0, 0, time.perf_counter()
            tw = time.perf_counter()
            x, y = next(batches)
            w = time.perf_counter() - tw
            waited += w
            step_waits.append(round(1000 * w, 2))
            if step == 0:
                info["input"] = {"shape": list(x.shape), "dtype": str(x.dtype).replace(
                    "torch.", ""), "channels_last": x.is_contiguous(
                    memory_format=torch.channels_last), "device": str(x.device)}
            with autocast():
                loss = loss_fn(model(x), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            images += x.shape[0]
            if step % TRACE_EVERY == 0:
                trace_split(info, step - a.warmup, time.perf_counter() - t_start)
            if step == 0:
                first_loss = loss.detach()
            del x, y
        sync()
        seconds = time.perf_counter() - t0
        info["stats"] = loader_stats(info)
        info["window"] = loader_window(info, seconds)
    finally:
        batches.close()
    st0, st1 = info.get("stats_start") or {}, info.get("stats") or {}
    if info.get("consume") == "background" and "records" in st0 and "records" in st1:
        info["loader_img_per_s"] = round((st1["records"] - st0["records"]) / seconds, 1)
    out = {"img_per_s": images / seconds, "seconds": round(seconds, 4), "images": images,
           "wait_share": waited / seconds, "waited_s": round(waited, 4),
           "loss_first": float(first_loss), "loss_last": float(loss.detach())}
    if cuda:
        out["max_memory_gb"] = round(torch.cuda.max_memory_allocated(device) / 2 ** 30, 2)
    return out


def timed_decoder(rec):
    """The decoder's figures of the timed steps (the end's stats less the start's)."""
    s1, s0 = rec.get("stats") or {}, rec.get("stats_start") or {}
    if not s1:
        return None
    d = {k: s1.get(k) for k in STATS_KEYS if k in s1}
    for k in ("gpu_decoded", "cpu_decoded", "wait_seconds", "gpu_retried", "records"):
        if k in s1 and k in s0:
            d[k] = s1[k] - s0[k]
    if "gpu_decoded" in d and "cpu_decoded" in d:
        both = d["gpu_decoded"] + d["cpu_decoded"]
        d["gpu_share_timed"] = d["gpu_decoded"] / both if both else 0.0
    return d


def child(spec):
    rec = {"model": spec["model"], "feed": spec["feed"]["id"], "rep": spec["rep"]}
    a = argparse.Namespace(**spec["args"])
    info = {}
    try:
        import torch
        rec["torch"] = torch.__version__
        rec.update(train(torch, a, spec["model"], spec["feed"], info))
        rec["status"] = "ok"
    except Exception as e:
        traceback.print_exc()
        rec["status"] = "failed"
        rec["error"] = ("%s: %s" % (type(e).__name__, e))[:500]
    info.pop("loader_obj", None)
    rec.update(info)
    if rec.get("stats"):
        rec["decoder_timed"] = timed_decoder(rec)
    sys.stdout.flush()
    print(json.dumps(rec), flush=True)
    return 0


# ---------------------------------------------------------------- the parent

def fmt_int(v):
    return "{:,}".format(int(round(v)))


def fmt_pct(v):
    return "%.1f%%" % (100.0 * v)


def decoder_line(d):
    if not d:
        return ""
    parts = ["decoder %s" % d.get("decoder", "?")]
    if "gpu_share_timed" in d:
        parts.append("GPU share %s (%s GPU, %s CPU images)"
                     % (fmt_pct(d["gpu_share_timed"]), fmt_int(d.get("gpu_decoded", 0)),
                        fmt_int(d.get("cpu_decoded", 0))))
    if d.get("cpu_busy") is not None:
        parts.append("CPU workers busy %s" % fmt_pct(d["cpu_busy"]))
    if d.get("gpu_busy"):
        parts.append("GPU decode busy %s" % fmt_pct(d["gpu_busy"]))
    if d.get("wait_seconds") is not None:
        parts.append("loader wait %.2f s" % d["wait_seconds"])
    if d.get("threads") is not None:
        parts.append("%d threads" % d["threads"])
    if d.get("decoder_note"):
        parts.append("note: %s" % d["decoder_note"])
    return "; ".join(parts)


def nvtx_counts(path):
    """The ranges of each name in a child's trace (bench/nvtx_trace.c's file), and what the
    tool lost (dropped, unmatched, unclosed) where not zero; {"no trace": 1} without it."""
    try:
        with open(path) as f:
            t = json.load(f)
    except (OSError, ValueError):
        return {"no trace": 1}
    n = {}
    for e in t.get("traceEvents", []):
        if e.get("ph") in ("X", "b"):
            n[e["name"]] = n.get(e["name"], 0) + 1
    n.update({"(%s)" % k: v for k, v in t.get("otherData", {}).items()
              if k != "capacity" and v})
    return n


def summarize(records, models, feeds, reps):
    rows = []
    for m in models:
        syn = None
        for f in feeds:
            ok, each = childrun.repetitions(records, "model", m, f["id"], reps, "img_per_s")
            med = childrun.median(ok, "img_per_s")
            if f["kind"] == "synthetic" and syn is None:
                syn = med
            rows.append({"model": m, "feed": f["id"], "title": f["title"], "img_per_s": med,
                         "each": each, "wait_share": childrun.median(ok, "wait_share"),
                         "runs_ok": len(ok)})
        for row in rows:
            if row["model"] == m:
                ok = syn and row["img_per_s"] is not None
                row["x_synthetic"] = row["img_per_s"] / syn if ok else None
    return rows


def markdown(meta, rows, records, reps):
    out = ["## Training step: %s" % meta["title"], ""]
    out += ["- %s: %s" % (k, v) for k, v in meta["lines"]]
    dec = [r for r in records if r.get("decoder_timed")]
    if dec:
        out += ["", "Decoder figures of each stoker run (timed steps):", "",
                "| model | feed | rep | decoder | GPU share | GPU decoded | CPU decoded | "
                "CPU workers busy | loader wait | note |",
                "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        for r in dec:
            d = r["decoder_timed"]
            out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                r["model"], r["feed"], r["rep"] + 1, d.get("decoder", "?"),
                fmt_pct(d["gpu_share_timed"]) if "gpu_share_timed" in d else "–",
                fmt_int(d.get("gpu_decoded", 0)), fmt_int(d.get("cpu_decoded", 0)),
                fmt_pct(d["cpu_busy"]) if d.get("cpu_busy") is not None else "–",
                "%.2f s" % d["wait_seconds"] if d.get("wait_seconds") is not None else "–",
                (d.get("decoder_note") or "").replace("|", "/")))
    failed = [r for r in records if r.get("status") != "ok"]
    if failed:
        out += ["", "Failed runs:", ""]
        out += ["- %s, %s, repetition %d: %s" % (r["model"], r["feed"], r["rep"] + 1,
                                                 r.get("error", "?")) for r in failed]
    each = "each repetition" if reps > 1 else "run"
    out += ["", "| model | feed | img/s (median) | %s | waits (median) | x synthetic |" % each,
            "| --- | --- | ---: | --- | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            r["model"], r["title"],
            "**%s**" % fmt_int(r["img_per_s"]) if r["img_per_s"] is not None else "failed",
            " / ".join(fmt_int(v) if isinstance(v, float) else v for v in r["each"]),
            fmt_pct(r["wait_share"]) if r["wait_share"] is not None else "–",
            "%.2f" % r["x_synthetic"] if r.get("x_synthetic") is not None else "–"))
    return "\n".join(out) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--models", "--model", dest="models", default="resnet18,resnet50",
                   help="comma-separated: torchvision model names, or tiny")
    p.add_argument("--feeds", action="append", default=None,
                   help="comma-separated feeds (default synthetic,cpu,default,torch)")
    p.add_argument("--repeat", type=int, default=1, help="runs of every feed (default 1)")
    p.add_argument("--data", help="stoker data set of JPEGs (stoker-pack IMAGEFOLDER DS)")
    p.add_argument("--imagefolder", help="the same images as an ImageFolder tree")
    p.add_argument("--make-data", metavar="DIR",
                   help="write --images JPEGs under DIR/images, pack them into DIR/packed, "
                        "and use both")
    p.add_argument("--images", type=int, default=256, help="with --make-data (default 256)")
    p.add_argument("--build", default=os.environ.get("STOKER_BUILD_DIR") or
                   os.path.join(ROOT, "build"),
                   help="stoker's build folder: libstoker.so (unless STOKER_LIBRARY is set) "
                        "and stoker-pack (default: build)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--size", type=int, default=224, help="crop side (default 224)")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=200, help="timed steps (default 200)")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first (default 30)")
    p.add_argument("--threads", type=int, default=None,
                   help="stoker worker threads (default: the library's, cores - 1; cores - 3 "
                   "under auto beside a GPU)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="DataLoader workers (default: cores)")
    p.add_argument("--amp", choices=("auto", "bf16", "fp16", "none"), default="auto",
                   help="autocast dtype (default: bf16 on a GPU, none on the CPU)")
    p.add_argument("--dtype", choices=("auto", "bfloat16", "float16", "float32"),
                   default="auto", help="the feeds' image dtype (default: the autocast's, "
                                        "float32 without)")
    p.add_argument("--layout", choices=("NHWC", "NCHW"), default="NHWC",
                   help="stoker's layout (default NHWC: channels_last without a copy)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--classes", type=int, default=1000, help="the model's output classes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trace", metavar="LIB",
                   help="CUDA_INJECTION64_PATH=LIB for the stoker children")
    p.add_argument("--nvtx-trace", metavar="DIR",
                   help="each stoker child's NVTX ranges as a Chrome trace in DIR")
    p.add_argument("--json", metavar="OUT", help="write every child's record")
    p.add_argument("--md", metavar="OUT", help="write the tables")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run: no child starts after it")
    p.add_argument("--child-timeout", type=float, default=900.0,
                   help="seconds one child may take (default 900)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return p, a
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 1 or a.size < 8 or a.repeat < 1:
        p.error("--steps, --batch-size and --repeat must be positive, --warmup not negative, "
                "--size at least 8")
    try:
        a.feed_list = parse_feeds(a.feeds or ["synthetic,cpu,default,torch"])
    except ValueError as e:
        p.error(str(e))
    a.model_list = [m.strip() for m in a.models.split(",") if m.strip()]
    if not a.model_list or not a.feed_list:
        p.error("no models or no feeds")
    if a.trace and not os.path.isfile(a.trace):
        p.error("--trace: no file %s" % a.trace)
    return p, a


def main(argv):
    p, a = parse_args(argv)
    if a.child:
        return child(json.loads(a.child))
    build = os.path.abspath(a.build)
    if not os.environ.get("STOKER_LIBRARY") and os.path.exists(os.path.join(build,
                                                                            "libstoker.so")):
        os.environ["STOKER_LIBRARY"] = os.path.join(build, "libstoker.so")
    kinds = {f["kind"] for f in a.feed_list}
    nvtx_tool = os.path.join(build, "libbench_nvtx_trace.so")
    if a.nvtx_trace and not os.path.isfile(nvtx_tool):
        p.error("--nvtx-trace: no %s (a build with CUDA makes it)" % nvtx_tool)
    if a.make_data:
        a.imagefolder, a.data = make_data(os.path.abspath(a.make_data), a.images, a.size,
                                          build)
    if "stoker" in kinds and not a.data:
        p.error("the stoker feeds need --data (or --make-data)")
    if "torch" in kinds and not a.imagefolder:
        p.error("the torch feed needs --imagefolder (or --make-data)")
    import torch
    if a.device == "auto":
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda":
        if not torch.cuda.is_available():
            p.error("--device cuda: torch sees no usable GPU")
        a.device = "cuda:%d" % int(os.environ.get("LOCAL_RANK", "0"))
    cuda = a.device.startswith("cuda")
    if a.amp == "auto":
        a.amp = "bf16" if cuda else "none"
    if a.amp == "fp16" and not cuda:
        p.error("--amp fp16 needs a GPU (autocast on the CPU takes bf16)")
    if a.dtype == "auto":
        a.dtype = {"bf16": "bfloat16", "fp16": "float16", "none": "float32"}[a.amp]
    if "stoker" in kinds:
        stoker = import_stoker()  # the keywords are checked here, before any child runs
        import inspect
        known = set(inspect.signature(stoker.Loader.__init__).parameters) - {
            "self", "path", "batch_size"} | {"labels", "consume"}  # the feed's own
        for f in a.feed_list:
            bad = sorted(set(f["kw"]) - known) if f["kind"] == "stoker" else []
            if bad:
                p.error("feed %s: stoker.Loader takes no %s" % (f["id"], ", ".join(bad)))
    for f in a.feed_list:
        f["title"] = feed_title(f, a.workers)

    child_args = {k: getattr(a, k) for k in (
        "data", "imagefolder", "device", "size", "batch_size", "steps", "warmup", "threads",
        "workers", "amp", "dtype", "layout", "lr", "classes", "seed")}
    env = dict(os.environ)
    versions = "torch %s" % torch.__version__
    try:
        import torchvision
        versions += ", torchvision %s" % torchvision.__version__
    except ImportError:
        versions += ", no torchvision"
    meta = {"title": "img/s (bench/train.py)", "lines": [
        ("command", "bench/train.py " + " ".join(argv)),
        ("device", "%s; %d cores; %s" % (a.device if cuda else "CPU", os.cpu_count() or 1,
                                         versions)),
        ("step", "%s, batch %d, %dx%d, autocast %s, input %s (stoker layout %s), "
                 "channels_last, SGD lr %g" % (", ".join(a.model_list), a.batch_size, a.size,
                                               a.size, a.amp, a.dtype, a.layout, a.lr)),
        ("timing", "%d warm-up + %d timed steps; %d repetition(s), feeds in order, reversed "
                   "every second repetition" % (a.warmup, a.steps, a.repeat)),
        ("threads", "stoker %s; DataLoader %d workers"
         % (a.threads if a.threads else "library default", a.workers)),
        ("data", "stoker %s; ImageFolder %s" % (a.data or "-", a.imagefolder or "-"))]}
    print("train.py: %s" % "; ".join(v for _, v in meta["lines"][1:]), flush=True)

    start = time.time()
    records = []
    for m in a.model_list:
        for rep, f in childrun.schedule(a.feed_list, a.repeat):
            spec = {"args": child_args, "model": m, "feed": f, "rep": rep}
            e = dict(env, **f["env"])
            if a.trace and f["kind"] == "stoker":
                e["CUDA_INJECTION64_PATH"] = os.path.abspath(a.trace)
            nvtx_out = None
            if a.nvtx_trace and f["kind"] == "stoker":
                os.makedirs(a.nvtx_trace, exist_ok=True)
                name = re.sub(r"[^A-Za-z0-9._-]+", "_", "%s-%s-r%d" % (m, f["id"], rep))
                nvtx_out = os.path.abspath(os.path.join(a.nvtx_trace, name + ".json"))
                e.update(NVTX_INJECTION64_PATH=nvtx_tool, STOKER_NVTX_TRACE=nvtx_out)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(nvtx_out)  # a file from an earlier run counts nothing
            rec = childrun.run_timed(a, start, __file__, spec,
                                     {"model": m, "feed": f["id"], "rep": rep}, e,
                                     "%s, %s, repetition %d/%d" % (m, f["title"], rep + 1,
                                                                   a.repeat))
            if nvtx_out and rec.get("status") != "skipped":
                rec["nvtx_trace"] = nvtx_out
                rec["nvtx_ranges"] = nvtx_counts(nvtx_out)
            records.append(rec)
            if rec.get("status") == "ok":
                line = "  %s img/s, waits %s" % (fmt_int(rec["img_per_s"]),
                                                 fmt_pct(rec["wait_share"]))
                if rec.get("loader_img_per_s"):
                    line += "; loader in the background %s img/s" % fmt_int(
                        rec["loader_img_per_s"])
                if rec.get("decoder_timed"):
                    line += "; " + decoder_line(rec["decoder_timed"])
                if rec.get("window"):
                    w = rec["window"]
                    line += "; the loader's window (%.1f s): waits %s, verdict %s" % (
                        w["seconds"], fmt_pct(w["wait_share"]), w["verdict"])
                if rec.get("pipeline"):
                    line += "; pipeline %s, %d workers" % (rec["pipeline"], rec["workers"])
                line += " (%.0f s)" % rec["child_seconds"]
            else:
                line = "  %s: %s" % (rec.get("status"), rec.get("error"))
            print(line, flush=True)
            if rec.get("nvtx_trace"):
                print("  NVTX ranges in %s: %s" % (rec["nvtx_trace"], ", ".join(
                    "%s %d" % kv for kv in sorted(rec["nvtx_ranges"].items())) or "none"),
                    flush=True)
    gpus = sorted({r["gpu"] for r in records if r.get("gpu")})  # the children's: the parent
    if gpus:                                                    # makes no CUDA context
        meta["lines"][1] = ("device", "%s (%s)%s" % (a.device, ", ".join(gpus),
                                                     meta["lines"][1][1][len(a.device):]))
    rows = summarize(records, a.model_list, a.feed_list, a.repeat)
    return childrun.finish(a, meta, markdown(meta, rows, records, a.repeat), rows, records)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
