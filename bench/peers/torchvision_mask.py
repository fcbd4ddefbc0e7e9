#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PyTorch DataLoader on image+mask samples: Pillow decodes the JPEG and the PNG mask, one
RandomResizedCrop box (get_params) cuts both to SIZE x SIZE (the image bilinear and
antialiased, the mask nearest), both flipped alike half the time, ToTensor + Normalize on the
image in float32, the mask uint8 [SIZE, SIZE]; then onto the GPU (when there is one).

    torchvision_mask.py DIR [--size 512] [--workers W] [--batch-size 256] [--epochs 2]
                            [--max-seconds S] [--device auto|cuda|cpu] [--cold]

DIR is a folder written by bench/scenes.py (DIR/samples.jsonl: the image's and the mask's
paths relative to DIR). It is stoker-bench's train transform with the fields image and mask,
the same pipeline in torchvision's functional transforms (which work in any torchvision from
0.13 on). Prints one JSON line: images/s.
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    a = common.parse_args(__doc__, "a folder of bench/scenes.py",
                          extra=lambda ap: ap.add_argument("--size", type=int, default=512))
    row = {"id": "torchvision-mask", "group": "fields", "unit": "img/s",
           "name": f"PyTorch DataLoader: Pillow, one RandomResizedCrop {a.size} of image "
                   "(bilinear, antialias) and mask (nearest), flip, ToTensor, Normalize "
                   "float32 on CPU"}
    torch, torchvision = common.need(row, "torch", "torchvision")
    import torchvision.transforms as T
    import torchvision.transforms.functional as F
    from PIL import Image

    with open(os.path.join(a.data, "samples.jsonl")) as f:
        samples = [json.loads(line) for line in f if line.strip()]

    class Scenes(torch.utils.data.Dataset):
        def __len__(self):
            return len(samples)

        def __getitem__(self, i):
            s = samples[i]
            img = Image.open(os.path.join(a.data, s["image"])).convert("RGB")
            mask = Image.open(os.path.join(a.data, s["mask"]))
            mask.load()
            top, left, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
            img = F.resized_crop(img, top, left, h, w, [a.size, a.size],
                                 T.InterpolationMode.BILINEAR, antialias=True)
            mask = F.resized_crop(mask, top, left, h, w, [a.size, a.size],
                                  T.InterpolationMode.NEAREST)
            if random.random() < 0.5:
                img, mask = F.hflip(img), F.hflip(mask)
            x = F.normalize(F.to_tensor(img), common.MEAN, common.STD)
            return x, F.pil_to_tensor(mask)[0]

    def body():
        dev = common.pick_device(torch, a.device)
        dl = common.image_loader(torch, Scenes(), a, dev)
        out = common.timed(torch, dl, dev, a.epochs, a.max_seconds,
                           lambda x: x.to(dev, non_blocking=True), cold=a.cold)
        out = common.image_result(torch, torchvision, out, a, dev)
        out["size"] = a.size
        return out

    common.run(row, body)


if __name__ == "__main__":
    main()
