#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch DataLoader, the classic way: Pillow decode, RandomResizedCrop(224), flip, ToTensor,
Normalize in float32 on the CPU, then onto the GPU (when there is one).

    torch_classic.py ROOT [--workers W] [--batch-size 256] [--epochs 2] [--max-seconds S]
                          [--device auto|cuda|cpu] [--cold]

ROOT is an ImageFolder tree (ROOT/<class>/<image>.jpg). Prints one JSON line: images/s.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    a = common.parse_args(__doc__, "ImageFolder root")
    row = {"id": "torch-classic", "group": "jpeg", "unit": "img/s",
           "name": "PyTorch DataLoader classic: Pillow, RandomResizedCrop 224, flip, "
                   "ToTensor, Normalize float32 on CPU"}
    torch, torchvision = common.need(row, "torch", "torchvision")
    import torchvision.transforms as T
    from torchvision.datasets import ImageFolder

    def body():
        dev = common.pick_device(torch, a.device)
        tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(common.MEAN, common.STD)])
        dl = common.image_loader(torch, ImageFolder(a.data, tf), a, dev)
        out = common.timed(torch, dl, dev, a.epochs, a.max_seconds,
                           lambda x: x.to(dev, non_blocking=True), cold=a.cold)
        return common.image_result(torch, torchvision, out, a, dev)

    common.run(row, body)


if __name__ == "__main__":
    main()
