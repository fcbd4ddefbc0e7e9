# SPDX-License-Identifier: Apache-2.0
"""Checkpoint and resume a training loop mid-epoch: model, optimiser and loader state.

    python3 examples/checkpoint_resume.py --make-data /tmp/ck-ds          # CPU, small
    python3 examples/checkpoint_resume.py --data imagenet-train --epochs 2 --stop-at 500

Three runs of the same loop, each a fresh Loader and model as a new process would make:

1. uninterrupted: every epoch, recording the record ids of each batch;
2. interrupted: stops after --stop-at batches (as a job killed after its last checkpoint),
   having saved {"model", "optimizer", "loader", "epoch"} with torch.save;
3. resumed: loads that checkpoint and runs the loop as written for a fresh start,
   ``for epoch in range(start, E): loader.set_epoch(epoch); for x, y in loader: ...``;
   set_epoch of the restored epoch continues it from the saved position.

It checks that runs 2 + 3 saw exactly the records of run 1, batch for batch, and that the
model ends with the same weights (the same batches in the same order), prints the figures
and exits with status 1 when either differs.
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn

try:
    import stoker
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import stoker

CLASSES = 10
SIDE = 16


def make_data(path, n):
    """n learnable 16x16x3 uint8 images: a bright square in one of ten places."""
    rng = np.random.default_rng(0)
    with stoker.Writer(path, kind="raw", dtype="uint8", shape=(SIDE, SIDE, 3),
                       fsync=False) as w:
        for i in range(n):
            label = int(rng.integers(CLASSES))
            img = rng.integers(0, 60, (SIDE, SIDE, 3), dtype=np.uint8)
            r, c = divmod(label, 5)
            img[r * 8:r * 8 + 6, c * 3:c * 3 + 3] = 250
            w.add(img, label)


def model_for(shape):
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(int(np.prod(shape)), 32), nn.ReLU(),
                         nn.Linear(32, CLASSES))


def run(args, device, start_ck=None, stop_at=None, ck_path=None):
    """The training loop; returns (batches seen as lists of ids, final model state)."""
    seen = []
    with stoker.Loader(args.data, args.batch_size, seed=args.seed, threads=args.threads,
                       device=device) as loader:
        x0 = next(iter(loader))
        shape = x0.shape[1:]
        del x0
        loader.set_epoch(0)  # that peek consumed a batch: start again (not the restored)
        model = model_for(shape).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        start = 0
        if start_ck is not None:
            ck = torch.load(start_ck)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            loader.load_state_dict(ck["loader"])
            start = ck["epoch"]
        for epoch in range(start, args.epochs):
            loader.set_epoch(epoch)
            for batch in loader:
                x, y = batch
                seen.append([int(i) for i in batch.indices])
                x = x.to(device).float().div(255)
                loss = nn.functional.cross_entropy(model(x), y.to(device))
                opt.zero_grad()
                loss.backward()
                opt.step()
                if stop_at is not None and len(seen) == stop_at:
                    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                                "loader": loader.state_dict(), "epoch": epoch}, ck_path)
                    return seen, None
        return seen, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="a stoker data set of raw records")
    ap.add_argument("--make-data", metavar="PATH", help="write a small data set there first")
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--stop-at", type=int, default=None,
                    help="batches before the interruption (default: 1.5 epochs)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--device", default=None, help="cpu, cuda, ... (default: the loader's)")
    args = ap.parse_args()
    if args.make_data:
        make_data(args.make_data, args.records)
        args.data = args.make_data
    if not args.data:
        ap.error("--data or --make-data is needed")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")

    full, w_full = run(args, device)
    stop_at = args.stop_at or len(full) * 3 // (2 * args.epochs)
    if not 0 < stop_at < len(full):
        ap.error("--stop-at must be between 1 and %d" % (len(full) - 1))
    with tempfile.TemporaryDirectory() as tmp:
        ck = os.path.join(tmp, "ck.pt")
        first, _ = run(args, device, stop_at=stop_at, ck_path=ck)
        rest, w_rest = run(args, device, start_ck=ck)
    same_records = first + rest == full
    same_model = all(torch.allclose(w_full[k], w_rest[k], atol=1e-5) for k in w_full)
    print("uninterrupted: %d batches, %d records" % (len(full), sum(map(len, full))))
    print("interrupted after %d batches, resumed: %d more batches" % (len(first), len(rest)))
    print("records seen: %s" % ("the same, batch for batch" if same_records else "DIFFERENT"))
    print("final weights: %s" % ("the same" if same_model else "DIFFERENT"))
    return 0 if same_records and same_model else 1


if __name__ == "__main__":
    sys.exit(main())
