#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""h5py in a PyTorch DataLoader: random batches of raw records from an HDF5 file, each batch
one sorted fancy-index read (h5py needs increasing indices), onto the GPU when there is one.

    h5py_loader.py FILE.h5 [--workers W] [--batch-size 256] [--epochs 2] [--max-seconds S]
                           [--device auto|cuda|cpu] [--dataset images] [--cold]

Each worker opens the file itself (an h5py handle does not survive fork). Prints one JSON
line: records/s, with bytes/s beside it.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    sys.argv, dataset = strip_dataset(sys.argv)
    a = common.parse_args(__doc__, "HDF5 file")
    row = {"id": "h5py-dataloader", "group": "raw", "unit": "rec/s",
           "name": "h5py + PyTorch DataLoader, sorted random batches"}
    np, torch, h5py = common.need(row, "numpy", "torch", "h5py")
    from torch.utils.data import DataLoader, Dataset

    class Batches(Dataset):
        """Item b is batch b of a fixed random permutation; the loader shuffles batches."""

        def __init__(self, n, bs):
            self.n, self.bs, self.f = n, bs, None
            self.order = np.random.default_rng(0).permutation(n)

        def __len__(self):
            return self.n // self.bs

        def __getitem__(self, b):
            if self.f is None:
                self.f = h5py.File(a.data, "r")
            idx = np.sort(self.order[b * self.bs:(b + 1) * self.bs])
            return (torch.from_numpy(self.f[dataset][idx]),
                    torch.from_numpy(self.f["labels"][idx]) if "labels" in self.f
                    else torch.zeros(len(idx)))

    def body():
        with h5py.File(a.data, "r") as f:
            n = f[dataset].shape[0]
            rec = int(np.prod(f[dataset].shape[1:])) * f[dataset].dtype.itemsize
        if n < a.batch_size:
            raise ValueError(f"{n} records: fewer than one batch of {a.batch_size}")
        dev = common.pick_device(torch, a.device)
        w = a.workers
        dl = DataLoader(Batches(n, a.batch_size), batch_size=None, shuffle=True, num_workers=w,
                        pin_memory=dev.type == "cuda", persistent_workers=w > 0,
                        prefetch_factor=4 if w > 0 else None)
        out = common.timed(torch, dl, dev, a.epochs, a.max_seconds,
                           lambda x: x.to(dev, non_blocking=True), cold=a.cold)
        out["records"] = out.pop("images")
        if "cpu_seconds_per_image" in out:
            out["cpu_seconds_per_record"] = out.pop("cpu_seconds_per_image")
        out.update(bytes_per_sec=out["figure"] * rec, record_bytes=rec,
                   device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                   workers=w, batch_size=a.batch_size,
                   versions=f"torch {torch.__version__}, h5py {h5py.__version__}")
        return out

    common.run(row, body)


def strip_dataset(argv):
    """Takes --dataset NAME out of argv (the shared parser does not know it)."""
    if "--dataset" in argv:
        i = argv.index("--dataset")
        return argv[:i] + argv[i + 2:], argv[i + 1]
    return argv, "images"


if __name__ == "__main__":
    main()
