#!/usr/bin/env python3
"""PyTorch DataLoader, the classic way: Pillow decode, RandomResizedCrop(224), flip, ToTensor,
Normalize in float32 on the CPU, then onto the GPU (when there is one).

    torch_classic.py ROOT [--workers W] [--batch-size 256] [--epochs 2] [--max-seconds S]
                          [--device auto|cuda|cpu]

ROOT is an ImageFolder tree (ROOT/<class>/<image>.jpg). Prints one JSON line: images/s.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def main():
    a = common.parse_args(__doc__, "ImageFolder root")
    row = {"id": "torch-classic", "group": "jpeg", "unit": "img/s",
           "name": "PyTorch DataLoader classic: Pillow, RandomResizedCrop 224, flip, "
                   "ToTensor, Normalize float32 on CPU"}
    torch, torchvision = common.need(row, "torch", "torchvision")
    import torchvision.transforms as T
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    def body():
        dev = common.pick_device(torch, a.device)
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(MEAN, STD)])
        w = a.workers
        dl = DataLoader(ImageFolder(a.data, tf), batch_size=a.batch_size, shuffle=True,
                        num_workers=w, pin_memory=dev.type == "cuda", drop_last=True,
                        persistent_workers=w > 0, prefetch_factor=4 if w > 0 else None)
        out = common.timed(torch, dl, dev, a.epochs, a.max_seconds,
                           lambda x: x.to(dev, non_blocking=True))
        out.update(device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
                   workers=w, batch_size=a.batch_size, dtype="float32",
                   versions=f"torch {torch.__version__}, torchvision {torchvision.__version__}")
        return out

    common.run(row, body)


if __name__ == "__main__":
    main()
