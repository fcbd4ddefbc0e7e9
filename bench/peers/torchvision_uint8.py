#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch DataLoader, the faster way: torchvision.io.decode_jpeg (libjpeg-turbo), v2
RandomResizedCrop(224) and flip on uint8 in the workers; normalise on the GPU (on the CPU
when there is none).

    torchvision_uint8.py ROOT [--workers W] [--batch-size 256] [--epochs 2] [--max-seconds S]
                              [--device auto|cuda|cpu] [--cold]

ROOT is an ImageFolder tree. Before torchvision 0.15 (no transforms.v2) the v1 transforms
do the same on uint8 tensors. A JPEG that decode_jpeg refuses (CMYK on older torchvision) is
decoded with Pillow instead, as a user would have to. Prints one JSON line: images/s.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    a = common.parse_args(__doc__, "ImageFolder root")
    row = {"id": "torchvision-uint8", "group": "jpeg", "unit": "img/s",
           "name": "PyTorch DataLoader + torchvision.io.decode_jpeg, v2 RandomResizedCrop 224 "
                   "+ flip on uint8, normalise on the device"}
    torch, torchvision = common.need(row, "torch", "torchvision")
    from torch.utils.data import Dataset
    from torchvision.datasets import ImageFolder
    from torchvision.io import ImageReadMode, decode_jpeg, read_file
    try:
        from torchvision.transforms import v2
    except ImportError:  # torchvision < 0.15: the v1 transforms also take uint8 tensors
        import torchvision.transforms as v2
        row["note"] = f"torchvision {torchvision.__version__} has no transforms.v2; v1 used"

    class Decoded(Dataset):
        def __init__(self, root):
            self.samples = ImageFolder(root).samples
            self.tf = v2.Compose([v2.RandomResizedCrop(224, antialias=True),
                                  v2.RandomHorizontalFlip()])

        def __len__(self):
            return len(self.samples)

        def __getitem__(self, i):
            path, label = self.samples[i]
            try:
                img = decode_jpeg(read_file(path), mode=ImageReadMode.RGB)
            except RuntimeError:
                from PIL import Image
                from torchvision.transforms.functional import pil_to_tensor
                with Image.open(path) as im:
                    img = pil_to_tensor(im.convert("RGB"))
            return self.tf(img), label

    def body():
        dev = common.pick_device(torch, a.device)
        dl = common.image_loader(torch, Decoded(a.data), a, dev)
        mean = torch.tensor(common.MEAN, device=dev).view(1, 3, 1, 1) * 255
        std = torch.tensor(common.STD, device=dev).view(1, 3, 1, 1) * 255

        def consume(x):
            return (x.to(dev, non_blocking=True).float() - mean) / std

        out = common.timed(torch, dl, dev, a.epochs, a.max_seconds, consume, cold=a.cold)
        return common.image_result(torch, torchvision, out, a, dev)

    common.run(row, body)


if __name__ == "__main__":
    main()
