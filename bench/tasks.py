#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Segmentation, detection and image+text training steps fed by stoker, by a synthetic feed
and by PyTorch's DataLoader with torchvision.transforms.v2: samples/s.

    bench/tasks.py --data DS --folder DIR [--tasks segmentation,detection,contrastive]
                   [--feeds stoker,synthetic,dataloader] [--repeat N] [--size S]
                   [--batch-size B] [--steps 100] [--warmup 20] [--threads T] [--workers W]
                   [--amp auto|bf16|fp16|none] [--image-encoder resnet18] [--json OUT]
                   [--md OUT] [--device auto|cuda|cpu]
    bench/tasks.py --device cpu --feeds synthetic --size 64 --batch-size 2 --steps 2 \\
                   --warmup 1                 # a smoke run on the CPU, without data

DS is a stoker data set of scenes with the fields image, mask, boxes, classes, tokens and
label, DIR the same scenes as a folder (samples.jsonl, images/, masks/); bench/scenes.py
writes both (`scenes.py --src PHOTOS --out DIR --stoker DS`).

The tasks (--tasks), each a torchvision model built without weights, SGD (momentum 0.9,
weight decay 1e-4), under autocast (--amp: bf16 on a GPU by default, none on the CPU):
  segmentation  deeplabv3_mobilenet_v3_large(num_classes=C+1), or --seg-model (another
                torchvision segmentation builder): image + mask, cross-entropy
                on the mask (uint8 in the batch, int64 on the device), channels_last;
                default --size 384, --batch-size 64
  detection     fasterrcnn_mobilenet_v3_large_fpn, or --det-model (num_classes=C+1,
                min_size=max_size=S, image_mean 0, image_std 1: the images come normalised
                and at their size, so
                its own transform neither rescales nor renormalises): image + boxes +
                classes, the sum of its losses; targets built on the device from the ragged
                fields (an image left without boxes gets an empty target, as torchvision
                allows); default --size 384, --batch-size 32
  contrastive   a CLIP-style step: --image-encoder (resnet18 by default, or any torchvision
                classifier) to 256 dimensions, the caption's token ids through an
                EmbeddingBag (mean; it takes the ragged field's values and offsets as they
                are) and a linear layer, symmetric InfoNCE with a learned temperature;
                channels_last; default --size 224, --batch-size 256
C comes from DIR/vocab.json (else --classes, default 12).

The feeds (--feeds, comma-separated; KEY=VALUE after a colon):
  synthetic     one batch of the same shapes already on the device, every step: random
                images, masks, 1-8 boxes per image with their classes, captions' tokens
  stoker        stoker.Loader(DS, transform="train", size=S, fields=[the task's], layout
                NHWC, the autocast's dtype, onto the training device, drop_last; for
                detection min_box_size=1, the rule of the DataLoader's
                SanitizeBoundingBoxes); stoker:KEY=VALUE,... passes any Loader keyword
                (stoker:decoder=cpu, stoker:threads=12, stoker:min_box_size=0)
  dataloader    torch.utils.data.DataLoader on DIR: --workers workers, pin_memory, 4 batches
                prefetched per worker, persistent workers; in the workers
                torchvision.io.decode_jpeg / decode_png, then transforms.v2 on
                tv_tensors.Image / Mask / BoundingBoxes: RandomResizedCrop(S) +
                RandomHorizontalFlip (+ SanitizeBoundingBoxes for detection) on uint8, and
                ToDtype + Normalize on the device after the copy (pipeline=uint8, the
                default), or ToDtype(float32, scale=True) + Normalize in the workers
                (dataloader:pipeline=float); a collate that stacks images and masks and
                keeps boxes, classes and tokens as lists; dataloader:workers=N
Each (task, feed, repetition) runs in a process of its own (this script again, with a hidden
--child); --repeat N runs every feed N times per task, the order reversed every second
repetition. --warmup untimed steps, then --steps timed ones, the device synchronised at both
ends: samples/s; "waits": the share of that time the host spent getting the next batch (the
DataLoader's copies to the device and normalisation, and the targets' assembly, included);
a stoker feed's line adds the share of the timed steps' images its GPU decoder took, and
the decoder's note (--json: "decoder_timed").
The table gives each feed's median and its ratio to the synthetic feed and to the
DataLoader of the same task. --json OUT keeps every run's record; exit status 1 when a run
failed, 2 for bad arguments.
"""
import argparse
import contextlib
import inspect
import json
import os
import random
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import childrun  # noqa: E402  (the children and the summary, as bench/train.py runs them)
import train  # noqa: E402  (helpers shared with the classification step)

TASKS = ("segmentation", "detection", "contrastive")
FIELDS = {"segmentation": ["image", "mask"], "detection": ["image", "boxes", "classes"],
          "contrastive": ["image", "tokens"]}
DEFAULT_SIZE = {"segmentation": 384, "detection": 384, "contrastive": 224}
DEFAULT_BATCH = {"segmentation": 64, "detection": 32, "contrastive": 256}
EMBED = 256
DATALOADER_KEYS = ("workers", "pipeline")


def vocab_size():
    import scenes
    return len(scenes.VOCAB)


# ---------------------------------------------------------------- feeds: parsing

def parse_feeds(text):
    feeds = []
    for tok in text.split(","):
        tok = tok.strip()
        if not tok:
            continue
        name, _, rest = tok.partition(":")
        if "=" in name:  # KEY=VALUE of the feed before
            if not feeds:
                raise ValueError("%r: a KEY=VALUE follows the feed it belongs to" % tok)
            feeds[-1]["kv"].append(tok)
            continue
        if name not in ("synthetic", "stoker", "dataloader"):
            raise ValueError("unknown feed %r (synthetic, stoker[:KEY=VALUE,...], "
                             "dataloader[:workers=N,pipeline=uint8|float])" % tok)
        feeds.append({"name": name, "kind": name, "kv": [rest] if rest else []})
    for f in feeds:
        kw = {}
        for kv in f["kv"]:
            key, eq, value = kv.partition("=")
            if not eq or not key.strip():
                raise ValueError("%r in feed %r: KEY=VALUE expected" % (kv, f["name"]))
            kw[key.strip()] = train.parse_value(value.strip())
        f["id"] = f["name"] + (":" + ",".join(f.pop("kv")) if kw else "")
        f["kw"] = kw
        if f["kind"] == "synthetic" and kw:
            raise ValueError("feed %s: the synthetic feed takes no keywords" % f["id"])
        if f["kind"] == "stoker" and "fields" in kw:
            raise ValueError("feed %s: the task chooses the fields" % f["id"])
        if f["kind"] == "dataloader":
            bad = sorted(set(kw) - set(DATALOADER_KEYS))
            if bad:
                raise ValueError("feed %s: the dataloader feed takes %s, not %s"
                                 % (f["id"], ", ".join(DATALOADER_KEYS), ", ".join(bad)))
            if kw.get("pipeline", "uint8") not in ("uint8", "float"):
                raise ValueError("feed %s: pipeline is uint8 or float" % f["id"])
            w = kw.get("workers", 0)
            if not isinstance(w, int) or isinstance(w, bool) or w < 0:
                raise ValueError("feed %s: workers is a count" % f["id"])
    ids = [f["id"] for f in feeds]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise ValueError("feed %s given twice" % ", ".join(dup))
    return feeds


# ---------------------------------------------------------------- the feeds

def synthetic_feed(torch, a, task, device, dtype, info):
    """The same batch every step, already on the device: (image, target) as the task's step
    takes it."""
    g = torch.Generator().manual_seed(a.seed)
    b, s = a.batch_size, a.size
    x = torch.randn(b, 3, s, s, generator=g).to(device=device, dtype=dtype)
    x = x.contiguous(memory_format=torch.channels_last)
    if task == "segmentation":
        y = torch.randint(0, a.classes + 1, (b, s, s), generator=g, dtype=torch.uint8)
        y = y.to(device)
    elif task == "detection":
        y = []
        for _ in range(b):
            n = int(torch.randint(1, 9, (1,), generator=g))
            wh = torch.rand(n, 2, generator=g) * (s / 2 - 8) + 8
            xy = torch.rand(n, 2, generator=g) * (s - wh)
            boxes = torch.cat([xy, xy + wh], 1).floor().clamp(0, s)
            labels = torch.randint(1, a.classes + 1, (n,), generator=g)
            y.append({"boxes": boxes.to(device), "labels": labels.to(device)})
        info["rows_per_sample"] = sum(len(t["boxes"]) for t in y) / b
    else:
        n = torch.randint(1, 9, (b,), generator=g) * 3 + 2  # "<bos> (a COLOUR SHAPE)* <eos>"
        offsets = torch.zeros(b + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(n, 0)
        values = torch.randint(0, a.vocab, (int(offsets[-1]),), generator=g)
        y = (values.to(device), offsets.to(device))
    while True:
        yield x, y


def ragged_host_offsets(torch, r, info):
    """A ragged field's offsets on the host, for splitting its rows per sample: the batch's
    host copy where the binding gives one (no wait), else a copy back from the device (which
    waits for the work queued on the stream); info["offsets_from"] says which."""
    for name in ("host_offsets", "offsets_host"):
        h = getattr(r, name, None)
        if h is not None:
            info.setdefault("offsets_from", "ragged.%s (host, no wait)" % name)
            return [int(v) for v in (h.tolist() if hasattr(h, "tolist") else h)]
    info.setdefault("offsets_from", "ragged.offsets copied from the device (waits for the "
                    "stream)")
    return torch.from_dlpack(r.offsets).tolist()


def stoker_feed(torch, a, task, kw, device, dtype, info):
    stoker = train.import_stoker()
    opts = dict(transform="train", size=a.size, dtype=a.dtype, layout="NHWC",
                device="cuda:%d" % device.index if device.type == "cuda" else "cpu",
                threads=a.threads, drop_last=True, seed=a.seed, fields=FIELDS[task])
    if task == "detection":  # the boxes the DataLoader's SanitizeBoundingBoxes keeps
        opts["min_box_size"] = 1.0
    opts.update(kw)
    loader = stoker.Loader(a.data, a.batch_size, **opts)
    info["loader_obj"] = loader
    if len(loader) == 0:
        loader.close()
        raise ValueError("%s holds less than one batch of %d" % (a.data, a.batch_size))
    info["loader"] = {k: getattr(loader, k, None) for k in (
        "threads", "depth", "decoder", "device", "dtype", "layout", "backend")}
    info["loader"]["fields"] = str(getattr(loader, "fields", None))
    info["stoker"] = stoker.version()
    rows = [0, 0]
    info["rows"] = rows
    try:
        while True:
            for b in loader:
                x = torch.from_dlpack(b["image"]).permute(0, 3, 1, 2)  # NHWC: channels_last
                if x.dtype != dtype:
                    x = x.to(dtype)
                if task == "segmentation":
                    y = torch.from_dlpack(b["mask"])  # uint8 [B, S, S] on the device
                elif task == "detection":
                    boxes, classes = b["boxes"], b["classes"]
                    bv = torch.from_dlpack(boxes.values)
                    cv = torch.from_dlpack(classes.values)
                    if bv.shape[0] != cv.shape[0]:
                        raise RuntimeError("a batch with %d boxes and %d classes"
                                           % (bv.shape[0], cv.shape[0]))
                    off = ragged_host_offsets(torch, boxes, info)
                    y = [{"boxes": bv[off[i]:off[i + 1]], "labels": cv[off[i]:off[i + 1]]}
                         for i in range(len(off) - 1)]
                    rows[0] += bv.shape[0]
                    rows[1] += len(off) - 1
                else:
                    t = b["tokens"]
                    y = (torch.from_dlpack(t.values), torch.from_dlpack(t.offsets))
                del b
                yield x, y
                del x, y
    finally:
        loader.close()


def need_v2(torch):
    """torchvision.transforms.v2 and tv_tensors (torchvision 0.16 and later)."""
    import torchvision
    try:
        from torchvision import tv_tensors
        from torchvision.transforms import v2
    except ImportError:
        raise RuntimeError("the dataloader feed needs torchvision.transforms.v2 and "
                           "torchvision.tv_tensors (torchvision 0.16 or later); this is "
                           "torchvision %s" % torchvision.__version__) from None
    return v2, tv_tensors


class SceneSet:
    """The DataLoader feed's data set: DIR/samples.jsonl's scenes, decoded and transformed
    in the workers with transforms.v2; returns (image, target) plain tensors."""

    def __init__(self, folder, task, size, pipeline):
        with open(os.path.join(folder, "samples.jsonl")) as f:
            self.recs = [json.loads(line) for line in f if line.strip()]
        self.folder, self.task, self.size, self.pipeline = folder, task, size, pipeline
        self.tf = None

    def __len__(self):
        return len(self.recs)

    def transform(self):
        import torch
        v2, _ = need_v2(torch)
        steps = [v2.RandomResizedCrop(self.size, antialias=True), v2.RandomHorizontalFlip()]
        if self.task == "detection":
            steps.append(v2.SanitizeBoundingBoxes())
        if self.pipeline == "float":
            steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(train.MEAN, train.STD)]
        return v2.Compose(steps)

    def __getitem__(self, i):
        import torch
        from torchvision.io import ImageReadMode, decode_image, read_file
        _, tv = need_v2(torch)
        if self.tf is None:
            self.tf = self.transform()
        rec = self.recs[i]
        img = tv.Image(decode_image(read_file(os.path.join(self.folder, rec["image"])),
                                    mode=ImageReadMode.RGB))
        if self.task == "segmentation":
            m = decode_image(read_file(os.path.join(self.folder, rec["mask"])),
                             mode=ImageReadMode.GRAY)[0]
            img, m = self.tf(img, tv.Mask(m))
            return img.as_subclass(torch.Tensor), m.as_subclass(torch.Tensor)
        if self.task == "detection":
            h, w = img.shape[-2:]
            target = {"boxes": tv.BoundingBoxes(torch.tensor(rec["boxes"], dtype=torch.float32)
                                                .reshape(-1, 4), format="XYXY",
                                                canvas_size=(h, w)),
                      "labels": torch.tensor(rec["classes"], dtype=torch.int64)}
            img, target = self.tf(img, target)
            return img.as_subclass(torch.Tensor), (target["boxes"].as_subclass(torch.Tensor),
                                                   target["labels"])
        img = self.tf(img)
        return img.as_subclass(torch.Tensor), torch.tensor(rec["tokens"], dtype=torch.int64)


class Collate:
    """Images (and masks) stacked; boxes and classes as lists; tokens as values + offsets."""

    def __init__(self, task):
        self.task = task

    def __call__(self, items):
        import torch
        x = torch.stack([i for i, _ in items])
        if self.task == "segmentation":
            return x, torch.stack([m for _, m in items])
        if self.task == "detection":
            return x, [t for _, t in items]
        toks = [t for _, t in items]
        off = torch.zeros(len(toks) + 1, dtype=torch.int64)
        off[1:] = torch.cumsum(torch.tensor([len(t) for t in toks]), 0)
        return x, (torch.cat(toks), off)


def dataloader_feed(torch, a, task, kw, device, dtype, info):
    from torch.utils.data import DataLoader
    import torchvision
    need_v2(torch)
    info["torchvision"] = torchvision.__version__
    workers = kw.get("workers", a.workers)
    pipeline = kw.get("pipeline", "uint8")
    ds = SceneSet(a.folder, task, a.size, pipeline)
    cuda = device.type == "cuda"
    more = dict(persistent_workers=True, prefetch_factor=4) if workers > 0 else {}
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=workers,
                    pin_memory=cuda, drop_last=True, collate_fn=Collate(task), **more)
    if len(dl) == 0:
        raise ValueError("%s holds %d scenes, less than one batch of %d"
                         % (a.folder, len(ds), a.batch_size))
    info.update(pipeline=pipeline, workers=workers, scenes_in_folder=len(ds))
    mean = torch.tensor(train.MEAN, device=device).view(1, 3, 1, 1)
    std = torch.tensor(train.STD, device=device).view(1, 3, 1, 1)
    rows = [0, 0]
    info["rows"] = rows
    while True:
        for x, y in dl:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            if pipeline == "uint8":  # ToDtype(scale=True) + Normalize, on the device
                x = (x.float() / 255 - mean) / std
            x = x.to(dtype)
            if task == "segmentation":
                y = y.to(device, non_blocking=True)
            elif task == "detection":
                y = [{"boxes": bx.to(device, non_blocking=True),
                      "labels": lb.to(device, non_blocking=True)} for bx, lb in y]
                rows[0] += sum(len(t["boxes"]) for t in y)
                rows[1] += len(y)
            else:
                y = tuple(t.to(device, non_blocking=True) for t in y)
            yield x, y
            del x, y


# ---------------------------------------------------------------- the models and steps

def contrastive_model(torch, encoder, vocab):
    """An image encoder and a bag-of-tokens text encoder into one space; its forward gives
    the symmetric InfoNCE loss of the batch."""
    nn = torch.nn

    class Contrastive(nn.Module):
        def __init__(self):
            super().__init__()
            self.image = train.make_model(torch, encoder, EMBED)
            self.bag = nn.EmbeddingBag(vocab, EMBED, mode="mean", include_last_offset=True)
            self.text = nn.Linear(EMBED, EMBED)
            self.scale = nn.Parameter(torch.tensor(2.659))  # log(1 / 0.07), CLIP's

        def forward(self, x, values, offsets):
            f = nn.functional
            i = f.normalize(self.image(x).float(), dim=1)
            t = f.normalize(self.text(self.bag(values, offsets)).float(), dim=1)
            logits = self.scale.exp().clamp(max=100) * i @ t.t()
            target = torch.arange(x.shape[0], device=x.device)
            return (f.cross_entropy(logits, target) + f.cross_entropy(logits.t(), target)) / 2

    return Contrastive()


def make_task(torch, a, task):
    """(model, loss(model, x, y)) for the task."""
    import torchvision.models as models
    if task == "segmentation":
        build = getattr(models.segmentation, a.seg_model)
        kw = dict(weights=None, weights_backbone=None, num_classes=a.classes + 1)
        if "aux_loss" in inspect.signature(build).parameters:
            kw["aux_loss"] = False
        m = build(**kw)
        ce = torch.nn.CrossEntropyLoss()
        return m, lambda model, x, y: ce(model(x)["out"], y.long())
    if task == "detection":
        m = getattr(models.detection, a.det_model)(
            weights=None, weights_backbone=None, num_classes=a.classes + 1, min_size=a.size,
            max_size=a.size, image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0])
        return m, lambda model, x, y: sum(model(list(x), y).values())
    m = contrastive_model(torch, a.image_encoder, a.vocab)
    return m, lambda model, x, y: model(x, y[0], y[1])


def train_task(torch, a, task, feed, info):
    device = torch.device(a.device)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
        info["gpu"] = torch.cuda.get_device_name(device)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.amp)
    dtype = getattr(torch, a.dtype) if amp is not None else torch.float32
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    model, loss_of = make_task(torch, a, task)
    model = model.to(device)
    if task != "detection":  # its transform batches the images anew, in NCHW
        model = model.to(memory_format=torch.channels_last)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda", enabled=a.amp == "fp16")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=a.amp == "fp16")
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def autocast():
        if amp is None:
            return contextlib.nullcontext()
        return torch.autocast(device.type, dtype=amp)

    make = {"synthetic": lambda: synthetic_feed(torch, a, task, device, dtype, info),
            "stoker": lambda: stoker_feed(torch, a, task, feed["kw"], device, dtype, info),
            "dataloader": lambda: dataloader_feed(torch, a, task, feed["kw"], device, dtype,
                                                  info)}
    batches = make[feed["kind"]]()
    t_start = time.perf_counter()
    try:
        waited, samples, t0, first = 0.0, 0, None, None
        rows0 = [0, 0]
        for step in range(a.warmup + a.steps):
            if step == a.warmup:
                sync()
                info["warmup_seconds"] = round(time.perf_counter() - t_start, 3)
                info["stats_start"] = train.loader_stats(info)
                waited, samples, t0 = 0.0, 0, time.perf_counter()
                rows0 = list(info.get("rows", [0, 0]))
            tw = time.perf_counter()
            x, y = next(batches)
            waited += time.perf_counter() - tw
            if step == 0:
                info["input"] = {"shape": list(x.shape), "dtype": str(x.dtype).replace(
                    "torch.", ""), "device": str(x.device), "channels_last":
                    x.is_contiguous(memory_format=torch.channels_last)}
            with autocast():
                loss = loss_of(model, x, y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            samples += x.shape[0]
            if step == 0:
                first = loss.detach()
            del x, y
        sync()
        seconds = time.perf_counter() - t0
        info["stats"] = train.loader_stats(info)
    finally:
        batches.close()
        loader = info.pop("loader_obj", None)
        if loader is not None and not loader.closed:
            loader.close()
    decoder = train.timed_decoder(info)  # stoker feeds: who decoded the timed steps' images
    if decoder:
        info["decoder_timed"] = decoder
    rows = info.pop("rows", None)
    if rows and rows[1] > rows0[1]:  # boxes per image after the crop, over the timed steps
        info["rows_per_sample"] = round((rows[0] - rows0[0]) / (rows[1] - rows0[1]), 3)
    out = {"samples_per_s": samples / seconds, "seconds": round(seconds, 4),
           "samples": samples, "wait_share": waited / seconds, "waited_s": round(waited, 4),
           "loss_first": float(first), "loss_last": float(loss.detach())}
    if cuda:
        out["max_memory_gb"] = round(torch.cuda.max_memory_allocated(device) / 2 ** 30, 2)
    return out


def child(spec):
    rec = {"task": spec["task"], "feed": spec["feed"]["id"], "rep": spec["rep"]}
    a = argparse.Namespace(**spec["args"])
    info = {}
    try:
        import torch
        rec["torch"] = torch.__version__
        rec.update(train_task(torch, a, spec["task"], spec["feed"], info))
        rec["status"] = "ok"
    except Exception as e:
        traceback.print_exc()
        rec["status"] = "failed"
        rec["error"] = ("%s: %s" % (type(e).__name__, e))[:500]
    info.pop("loader_obj", None)
    info.pop("rows", None)
    rec.update(info)
    sys.stdout.flush()
    print(json.dumps(rec, default=str), flush=True)
    return 0


# ---------------------------------------------------------------- the parent

def summarize(records, tasks, feeds, reps):
    rows = []
    for t in tasks:
        mine = []
        for f in feeds:
            ok, each = childrun.repetitions(records, "task", t, f["id"], reps, "samples_per_s")
            mine.append({
                "task": t, "feed": f["id"], "kind": f["kind"],
                "samples_per_s": childrun.median(ok, "samples_per_s"), "each": each,
                "wait_share": childrun.median(ok, "wait_share"),
                "rows_per_sample": childrun.median(ok, "rows_per_sample")
                if all("rows_per_sample" in r for r in ok) else None,
                "runs_ok": len(ok)})
        for other in ("synthetic", "dataloader"):
            ref = next((r["samples_per_s"] for r in mine if r["kind"] == other), None)
            for r in mine:
                ok = ref and r["samples_per_s"] is not None
                r["x_" + other] = r["samples_per_s"] / ref if ok else None
        rows += mine
    return rows


def fmt_rate(v):
    return train.fmt_int(v) if v >= 100 else "%.1f" % v


def markdown(meta, rows, records, reps):
    fmt = fmt_rate
    out = ["## Training steps of several fields: %s" % meta["title"], ""]
    out += ["- %s: %s" % (k, v) for k, v in meta["lines"]]
    failed = [r for r in records if r.get("status") != "ok"]
    if failed:
        out += ["", "Failed runs:", ""]
        out += ["- %s, %s, repetition %d: %s" % (r["task"], r["feed"], r["rep"] + 1,
                                                 r.get("error", "?")) for r in failed]
    each = "each repetition" if reps > 1 else "run"
    out += ["", "| task | feed | samples/s (median) | %s | waits (median) | boxes/image "
                "| x synthetic | x dataloader |" % each,
            "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["task"], r["feed"],
            "**%s**" % fmt(r["samples_per_s"]) if r["samples_per_s"] is not None else "failed",
            " / ".join(fmt(v) if isinstance(v, float) else v for v in r["each"]),
            train.fmt_pct(r["wait_share"]) if r["wait_share"] is not None else "–",
            "%.2f" % r["rows_per_sample"] if r.get("rows_per_sample") is not None else "–",
            "%.2f" % r["x_synthetic"] if r.get("x_synthetic") is not None else "–",
            "%.2f" % r["x_dataloader"] if r.get("x_dataloader") is not None else "–"))
    return "\n".join(out) + "\n"


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.splitlines()[1:]))
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated: " +
                   ", ".join(TASKS))
    p.add_argument("--feeds", default="stoker,synthetic,dataloader")
    p.add_argument("--repeat", type=int, default=1, help="runs of every feed (default 1)")
    p.add_argument("--data", help="stoker data set of scenes (bench/scenes.py --stoker)")
    p.add_argument("--folder", help="the same scenes as a folder (bench/scenes.py --out)")
    p.add_argument("--build", default=os.environ.get("STOKER_BUILD_DIR") or
                   os.path.join(train.ROOT, "build"),
                   help="stoker's build folder: libstoker.so unless STOKER_LIBRARY is set")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--size", type=int, default=None,
                   help="crop side (default: segmentation and detection 384, contrastive 224)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="default: segmentation 64, detection 32, contrastive 256")
    p.add_argument("--steps", type=int, default=100, help="timed steps (default 100)")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first (default 20)")
    p.add_argument("--threads", type=int, default=None,
                   help="stoker worker threads (default: the library's)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="DataLoader workers (default: cores)")
    p.add_argument("--amp", choices=("auto", "bf16", "fp16", "none"), default="auto")
    p.add_argument("--seg-model", default="deeplabv3_mobilenet_v3_large",
                   help="segmentation's torchvision.models.segmentation builder (default "
                   "deeplabv3_mobilenet_v3_large; lraspp_mobilenet_v3_large is lighter)")
    p.add_argument("--det-model", default="fasterrcnn_mobilenet_v3_large_fpn",
                   help="detection's torchvision.models.detection builder taking min_size, "
                   "max_size, image_mean and image_std (default "
                   "fasterrcnn_mobilenet_v3_large_fpn; e.g. "
                   "fasterrcnn_mobilenet_v3_large_320_fpn, retinanet_resnet50_fpn)")
    p.add_argument("--image-encoder", default="resnet18",
                   help="the contrastive task's image model (torchvision name)")
    p.add_argument("--classes", type=int, default=None,
                   help="shape classes (default: the folder's vocab.json, else 12)")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", metavar="OUT")
    p.add_argument("--md", metavar="OUT")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for the whole run: no run starts after it")
    p.add_argument("--child-timeout", type=float, default=900.0)
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return p, a
    if a.steps < 1 or a.warmup < 0 or a.repeat < 1 or (a.batch_size or 1) < 1 or \
            (a.size or 8) < 8:
        p.error("--steps, --batch-size and --repeat must be positive, --warmup not negative, "
                "--size at least 8")
    a.task_list = [t.strip() for t in a.tasks.split(",") if t.strip()]
    bad = [t for t in a.task_list if t not in TASKS]
    if bad or not a.task_list:
        p.error("--tasks: %s (of %s)" % (", ".join(bad) or "none", ", ".join(TASKS)))
    try:
        a.feed_list = parse_feeds(a.feeds)
    except ValueError as e:
        p.error(str(e))
    if not a.feed_list:
        p.error("no feeds")
    kinds = {f["kind"] for f in a.feed_list}
    if "stoker" in kinds and not a.data:
        p.error("the stoker feed needs --data")
    if "dataloader" in kinds and not a.folder:
        p.error("the dataloader feed needs --folder")
    if a.folder and not os.path.isfile(os.path.join(a.folder, "samples.jsonl")):
        p.error("--folder %s: no samples.jsonl (bench/scenes.py --out writes it)" % a.folder)
    if a.classes is None:
        a.classes = 12
        if a.folder and os.path.isfile(os.path.join(a.folder, "vocab.json")):
            with open(os.path.join(a.folder, "vocab.json")) as f:
                a.classes = len(json.load(f)["classes"]) - 1
    return p, a


def main(argv):
    p, a = parse_args(argv)
    if a.child:
        return child(json.loads(a.child))
    build = os.path.abspath(a.build)
    if not os.environ.get("STOKER_LIBRARY") and os.path.exists(os.path.join(build,
                                                                            "libstoker.so")):
        os.environ["STOKER_LIBRARY"] = os.path.join(build, "libstoker.so")
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
    a.dtype = {"bf16": "bfloat16", "fp16": "float16", "none": "float32"}[a.amp]
    a.vocab = vocab_size()
    if "stoker" in {f["kind"] for f in a.feed_list}:
        stoker = train.import_stoker()  # the keywords are checked before any child runs
        import inspect
        known = set(inspect.signature(stoker.Loader.__init__).parameters)
        for f in a.feed_list:
            bad = sorted(set(f["kw"]) - known) if f["kind"] == "stoker" else []
            if bad:
                p.error("feed %s: stoker.Loader takes no %s" % (f["id"], ", ".join(bad)))
    versions = "torch %s" % torch.__version__
    try:
        import torchvision
        versions += ", torchvision %s" % torchvision.__version__
    except ImportError:
        p.error("bench/tasks.py needs torchvision (its models)")
    meta = {"title": "samples/s (bench/tasks.py)", "lines": [
        ("command", "bench/tasks.py " + " ".join(argv)),
        ("device", "%s; %d cores; %s" % (a.device if cuda else "CPU", os.cpu_count() or 1,
                                         versions)),
        ("step", "%s; autocast %s, SGD lr %g; %d classes + background" % (
            ", ".join("%s (%s) %dx%d batch %d" % (
                t, {"segmentation": a.seg_model, "detection": a.det_model}.get(
                    t, a.image_encoder), a.size or DEFAULT_SIZE[t], a.size or DEFAULT_SIZE[t],
                a.batch_size or DEFAULT_BATCH[t]) for t in a.task_list),
            a.amp, a.lr, a.classes)),
        ("timing", "%d warm-up + %d timed steps; %d repetition(s), feeds in order, reversed "
                   "every second repetition" % (a.warmup, a.steps, a.repeat)),
        ("threads", "stoker %s; DataLoader %d workers"
         % (a.threads if a.threads else "library default", a.workers)),
        ("data", "stoker %s; folder %s" % (a.data or "-", a.folder or "-"))]}
    print("tasks.py: %s" % "; ".join(v for _, v in meta["lines"][1:]), flush=True)
    start = time.time()
    records = []
    env = dict(os.environ)
    for t in a.task_list:
        args = {k: getattr(a, k) for k in (
            "data", "folder", "device", "steps", "warmup", "threads", "workers", "amp",
            "dtype", "lr", "classes", "seed", "vocab", "image_encoder",
                                "seg_model", "det_model")}
        args["size"] = a.size or DEFAULT_SIZE[t]
        args["batch_size"] = a.batch_size or DEFAULT_BATCH[t]
        for rep, f in childrun.schedule(a.feed_list, a.repeat):
            spec = {"args": args, "task": t, "feed": f, "rep": rep}
            rec = childrun.run_timed(a, start, __file__, spec,
                                     {"task": t, "feed": f["id"], "rep": rep}, env,
                                     "%s, %s, repetition %d/%d" % (t, f["id"], rep + 1,
                                                                   a.repeat))
            records.append(rec)
            if rec.get("status") == "ok":
                line = "  %s samples/s, waits %s" % (fmt_rate(rec["samples_per_s"]),
                                                     train.fmt_pct(rec["wait_share"]))
                if rec.get("rows_per_sample") is not None:
                    line += ", %.2f boxes per image" % rec["rows_per_sample"]
                dec = rec.get("decoder_timed")
                if dec and "gpu_share_timed" in dec:
                    line += ", the GPU decoded %.0f%% (%s)" % (100 * dec["gpu_share_timed"],
                                                             dec.get("decoder_note") or "")
                if rec.get("offsets_from"):
                    line += "; offsets: %s" % rec["offsets_from"]
                line += " (%.0f s)" % rec["child_seconds"]
            else:
                line = "  %s: %s" % (rec.get("status"), rec.get("error"))
            print(line, flush=True)
    rows = summarize(records, a.task_list, a.feed_list, a.repeat)
    return childrun.finish(a, meta, markdown(meta, rows, records, a.repeat), rows, records)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
