# SPDX-License-Identifier: Apache-2.0
"""ResNet-50 training throughput with stoker, or with a PyTorch DataLoader as the baseline.

    # stoker on a packed JPEG data set (stoker-pack IMAGEFOLDER DS)
    python3 examples/train_resnet.py --data DS --steps 300 --batch-size 256
    # the PyTorch DataLoader baseline on the same images (an ImageFolder tree)
    python3 examples/train_resnet.py --imagefolder IMAGEFOLDER --loader torch
    # both, one after the other, with a comparison at the end
    python3 examples/train_resnet.py --data DS --imagefolder IMAGEFOLDER --loader both

The model is torchvision's ResNet-50 in channels_last memory format under autocast
(bfloat16 by default, or float16 with a gradient scaler), trained with SGD. The first
--warmup steps are not timed. images/s counts training images through the whole step
(data + forward + backward + update); "waited" is the share of that time spent waiting for
the next batch.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

try:
    import stoker
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import stoker

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def stoker_batches(args, device):
    """(images, labels) on the GPU: float16, normalised, channels_last."""
    loader = stoker.Loader(args.data, args.batch_size, transform="train", size=args.size,
                           dtype="float16", layout=args.layout, device=device,
                           threads=args.threads, drop_last=True, seed=args.seed)
    print("stoker %s: %d batches/epoch, %s" % (stoker.version(), len(loader),
                                             {k: v for k, v in loader.stats().items()
                                              if k in ("backend", "simd", "threads", "device")}))
    try:
        while True:
            for batch in loader:
                x = torch.from_dlpack(batch.data)  # zero copy
                if x.device != device:             # a build that delivers host batches
                    x = x.to(device, non_blocking=True)
                if args.layout == "NHWC":
                    x = x.permute(0, 3, 1, 2)      # NCHW view with channels_last strides
                else:
                    x = x.contiguous(memory_format=torch.channels_last)
                y = torch.from_numpy(batch.labels).to(device, non_blocking=True)
                del batch  # the batch lives on in x (or is released after the copy)
                yield x, y
    finally:
        print("stoker stats:", loader.stats())
        loader.close()


def torch_batches(args, device):
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(MEAN, STD)])
    ds = datasets.ImageFolder(args.imagefolder, transform=tf)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True,
                                     num_workers=args.workers, pin_memory=True,
                                     drop_last=True, persistent_workers=args.workers > 0)
    print("torch DataLoader: %d images, %d workers, %d batches/epoch"
          % (len(ds), args.workers, len(dl)))
    while True:
        for x, y in dl:
            x = x.to(device, non_blocking=True).contiguous(memory_format=torch.channels_last)
            yield x, y.to(device, non_blocking=True)


def train(args, name, batches, device):
    import torchvision
    torch.manual_seed(args.seed)
    model = torchvision.models.resnet50().to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    amp_dtype = torch.bfloat16 if args.amp == "bf16" else torch.float16
    if hasattr(torch.amp, "GradScaler"):
        scaler = torch.amp.GradScaler("cuda", enabled=args.amp == "fp16")
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=args.amp == "fp16")
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    waited = 0.0
    t0 = None
    for step in range(args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            t0, waited = time.perf_counter(), 0.0
        tw = time.perf_counter()
        x, y = next(batches)
        waited += time.perf_counter() - tw
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = loss_fn(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if step % args.print_every == 0:
            print("%s step %d loss %.3f" % (name, step, loss.item()))
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    images = (args.steps - args.warmup) * args.batch_size
    rate = images / seconds
    print("%s: %.1f images/s over %d steps (%.1f s), waited for data %.1f%% of the time"
          % (name, rate, args.steps - args.warmup, seconds, 100.0 * waited / seconds))
    batches.close()
    return rate


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="stoker data set of JPEGs (for --loader stoker)")
    p.add_argument("--imagefolder", help="the same images as an ImageFolder tree (torch)")
    p.add_argument("--loader", choices=("stoker", "torch", "both"), default="stoker")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--amp", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--layout", choices=("NCHW", "NHWC"), default="NCHW",
                   help="stoker's output layout; NHWC gives channels_last without a copy")
    p.add_argument("--threads", type=int, default=None, help="stoker worker threads")
    p.add_argument("--workers", type=int, default=16, help="DataLoader workers")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--print-every", type=int, default=50)
    args = p.parse_args()
    if args.warmup >= args.steps:
        p.error("--steps must exceed --warmup")
    if not torch.cuda.is_available():
        sys.exit("train_resnet.py needs a CUDA GPU")
    if args.loader in ("stoker", "both") and not args.data:
        p.error("--data is needed for the stoker loader")
    if args.loader in ("torch", "both") and not args.imagefolder:
        p.error("--imagefolder is needed for the torch loader")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    torch.backends.cudnn.benchmark = True
    rates = {}
    if args.loader in ("stoker", "both"):
        rates["stoker"] = train(args, "stoker", stoker_batches(args, device), device)
    if args.loader in ("torch", "both"):
        rates["torch"] = train(args, "torch", torch_batches(args, device), device)
    if len(rates) == 2:
        print("stoker / torch DataLoader: %.2fx" % (rates["stoker"] / rates["torch"]))


if __name__ == "__main__":
    main()
