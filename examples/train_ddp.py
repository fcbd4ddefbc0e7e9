# SPDX-License-Identifier: Apache-2.0
"""Data-parallel training with torchrun, DistributedDataParallel and a sharded stoker Loader.

    torchrun --nproc_per_node=2 examples/train_ddp.py --make-data /tmp/ddp-ds --epochs 5

or without torchrun (Debian 12's, of PyTorch 1.13, fails under Python 3.11), one process
per rank, started with the environment variables torchrun would set:

    for r in 0 1; do MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 RANK=$r WORLD_SIZE=2 \
        LOCAL_RANK=$r python3 examples/train_ddp.py --make-data /tmp/ddp-ds & done; wait

Each rank reads its own slice of every global batch (rank and world size come from
torch.distributed). The script prints, per rank and epoch, the number of batches and
records it saw, and on rank 0 whether the ranks' record ids were disjoint (apart from the
padding that evens out the last batch) and together complete, and the mean loss per epoch,
which must go down: --make-data writes a learnable set of 32x32 images whose label is
recoverable from the picture (a bright square in one of ten places, plus noise). Every
rank checks both (the ids are gathered on all ranks) and exits with status 1, saying why,
when either fails, so that no rank is left waiting for another.

Back-end: NCCL when every rank has a GPU of its own; gloo when ranks share one GPU (NCCL
refuses a duplicate GPU) or there is none.
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

try:
    import stoker
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import stoker

CLASSES = 10
SIDE = 32


def make_data(path, n, seed=0):
    """n raw uint8 (3, 32, 32) images; label c puts a bright 8x8 square at place c."""
    rng = np.random.default_rng(seed)
    with stoker.Writer(path, kind="raw", dtype="uint8", shape=(3, SIDE, SIDE),
                       overwrite=True, classes=["square-%d" % c for c in range(CLASSES)]) as w:
        for i in range(n):
            label = int(rng.integers(CLASSES))
            img = rng.integers(0, 128, size=(3, SIDE, SIDE), dtype=np.uint8)
            r, c = divmod(label, 5)
            img[:, 4 + r * 14:12 + r * 14, 1 + c * 6:7 + c * 6] += 80
            w.add(img, label, key="synthetic/%d" % i)


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 8 * 8, CLASSES))

    def forward(self, x):
        return self.body(x)


def setup():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    gpus = torch.cuda.device_count()
    if gpus > 0:
        device = torch.device("cuda", local % gpus)
        torch.cuda.set_device(device)
        backend = "nccl" if local_world <= gpus else "gloo"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    dist.init_process_group(backend)
    return device, backend


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", help="a stoker data set of raw (3, 32, 32) uint8 images")
    p.add_argument("--make-data", metavar="PATH", help="write the synthetic data set first")
    p.add_argument("--records", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    device, backend = setup()
    rank, world = dist.get_rank(), dist.get_world_size()
    path = args.make_data or args.data
    if not path:
        p.error("--data or --make-data is needed")
    if args.make_data:
        if rank == 0:
            make_data(path, args.records)
        dist.barrier()
    loader = stoker.Loader(path, args.batch_size, seed=1234, threads=args.threads,
                           device=("cuda:%d" % device.index) if device.type == "cuda" else "cpu")
    assert (loader.rank, loader.world_size) == (rank, world)
    with stoker.Dataset(path) as ds:
        total = len(ds)
    torch.manual_seed(0)
    model = TinyNet().to(device)
    ddp = nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    if rank == 0:
        print("backend %s, world %d, %d records, %d batches/epoch per rank of %d"
              % (backend, world, total, len(loader), args.batch_size), flush=True)
    losses = []
    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        ids, batches, loss_sum, seen = [], 0, torch.zeros((), device=device), 0
        for batch in loader:
            x = torch.from_dlpack(batch.data).to(device, non_blocking=True)
            x = x.float().div_(255.0).sub_(0.5).div_(0.25)
            y = torch.from_numpy(batch.labels).to(device, non_blocking=True)
            ids.extend(int(i) for i in batch.indices)
            del batch
            loss = loss_fn(ddp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * y.numel()
            seen += y.numel()
            batches += 1
        print("rank %d epoch %d: %d batches, %d records" % (rank, epoch, batches, len(ids)),
              flush=True)
        stats = torch.tensor([loss_sum.item(), float(seen)], dtype=torch.float64, device=device)
        dist.all_reduce(stats)
        gathered = [None] * world
        dist.all_gather_object(gathered, ids)
        mean_loss = stats[0].item() / stats[1].item()
        losses.append(mean_loss)
        union = set().union(*(set(g) for g in gathered))
        overlap = sum(len(g) for g in gathered) - len(union)
        padding = (-total) % world
        complete = union == set(range(total))
        if rank == 0:
            print("epoch %d: loss %.4f; ids complete: %s, overlap %d (padding %d)"
                  % (epoch, mean_loss, complete, overlap, padding), flush=True)
        if not complete or overlap > padding:
            sys.exit("train_ddp.py: rank %d, epoch %d: the ranks' record ids are %s"
                     % (rank, epoch, "not complete (%d of %d seen)" % (len(union), total)
                        if not complete else "not disjoint (%d seen twice, %d padding)"
                        % (overlap, padding)))
    if rank == 0:
        print("loss went %s: %.4f -> %.4f" % ("down" if losses[-1] < losses[0] else "UP",
                                             losses[0], losses[-1]))
    loader.close()
    dist.destroy_process_group()
    if len(losses) < 2 or losses[-1] >= losses[0]:
        sys.exit("train_ddp.py: rank %d: the loss did not go down over %d epochs"
                 % (rank, len(losses)))


if __name__ == "__main__":
    main()
