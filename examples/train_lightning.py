# SPDX-License-Identifier: Apache-2.0
"""A small Lightning training fed by stoker through stoker.torch.LoaderDataset.

    python3 examples/train_lightning.py --make-data /tmp/pl-ds --epochs 2

train_dataloader() returns DataLoader(LoaderDataset(loader), batch_size=None) (num_workers
0: the loader has its own threads). A callback gives the loader the trainer's epoch at the
start of each one (Lightning 2.x calls set_epoch on a sampler, not on an IterableDataset).
The script prints the records seen per epoch, checks each epoch saw every record once, and
exits 1 when not; without Lightning it says so and exits 0.
"""
import argparse
import os
import sys

try:
    import lightning.pytorch as pl
except ImportError:
    try:
        import pytorch_lightning as pl
    except ImportError:
        print("train_lightning.py: Lightning is not installed (pip install lightning): "
              "nothing to run")
        sys.exit(0)

import torch
import torch.nn as nn

try:
    import stoker
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import stoker
import stoker.torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_resume import CLASSES, make_data  # noqa: E402


class EpochToLoader(pl.Callback):
    def on_train_epoch_start(self, trainer, module):
        module.data.set_epoch(trainer.current_epoch)


class Module(pl.LightningModule):
    def __init__(self, args):
        super().__init__()
        self.args = args
        self.net = nn.Sequential(nn.Flatten(), nn.LazyLinear(32), nn.ReLU(),
                                 nn.Linear(32, CLASSES))
        self.loader = stoker.Loader(args.data, args.batch_size, seed=1, threads=args.threads)
        self.data = stoker.torch.LoaderDataset(self.loader)
        self.seen = {}

    def train_dataloader(self):
        return torch.utils.data.DataLoader(self.data, batch_size=None, num_workers=0)

    def training_step(self, batch, i):
        x, y = batch
        ids = self.seen.setdefault(self.current_epoch, [])
        ids.append(x.shape[0])
        loss = nn.functional.cross_entropy(self.net(x.float().div(255)), y)
        self.log("loss", loss, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data")
    ap.add_argument("--make-data", metavar="PATH")
    ap.add_argument("--records", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.make_data:
        make_data(args.make_data, args.records)
        args.data = args.make_data
    if not args.data:
        ap.error("--data or --make-data is needed")
    module = Module(args)
    trainer = pl.Trainer(max_epochs=args.epochs, callbacks=[EpochToLoader()], logger=False,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(module)
    records = module.loader.num_records
    ok = True
    for epoch in range(args.epochs):
        n = sum(module.seen.get(epoch, []))
        print("epoch %d: %d batches, %d records (of %d)"
              % (epoch, len(module.seen.get(epoch, [])), n, records))
        ok = ok and n == records
    module.loader.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
