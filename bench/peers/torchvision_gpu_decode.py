#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torchvision's batched GPU decode alone: torchvision.io.decode_jpeg(list of encoded
images, device="cuda") (nvJPEG) on batches of whole images, no crop, resize or normalise;
the GPU decode ceiling a user gets from torchvision.

    torchvision_gpu_decode.py ROOT [--batch-size 256] [--epochs 2] [--max-seconds S]
                              [--device auto|cuda]

ROOT is a folder of JPEGs (an ImageFolder tree). Every file is read into memory first. The
first pass over them is untimed and finds the images the GPU decoder refuses (a batch fails
as a whole, so a failed batch is split in halves until each refused image stands alone);
those are left out of the timed epochs and counted. CPU time per image is this process's
(every thread's, nvJPEG's included) over the timed epochs. --workers is accepted for the
common command line and unused: one process feeds the decoder. Without CUDA the row is
"skipped". Prints one JSON line: images/s.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def jpeg_files(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        out += [os.path.join(dirpath, f) for f in sorted(files)
                if f.lower().endswith((".jpg", ".jpeg"))]
    return out


def main():
    a = common.parse_args(__doc__, "folder of JPEGs (ImageFolder root)")
    row = {"id": "torchvision-gpu-decode", "group": "jpeg", "unit": "img/s",
           "name": "torchvision.io.decode_jpeg on the GPU (batched nvJPEG), whole images, "
                   "decode only"}
    torch, torchvision = common.need(row, "torch", "torchvision")
    from torchvision.io import ImageReadMode, decode_jpeg, read_file

    if a.device == "cpu" or not torch.cuda.is_available():
        why = "--device cpu" if a.device == "cpu" else "torch.cuda.is_available() is False"
        common.emit(dict(row, status="skipped", note=f"no CUDA device ({why})"))
        return
    dev = torch.device("cuda")
    refused = []  # (path, error) of the images the GPU decoder does not take

    def decode(items):
        return decode_jpeg([d for _, d in items], device=dev, mode=ImageReadMode.RGB)

    def accepted(items):
        """The items that decode, splitting a failed batch until each refusal is alone."""
        try:
            decode(items)
            return items
        except RuntimeError as e:
            if len(items) == 1:
                refused.append((items[0][0], str(e).splitlines()[0][:160]))
                return []
            half = len(items) // 2
            return accepted(items[:half]) + accepted(items[half:])

    def body():
        paths = jpeg_files(a.data)
        if not paths:
            raise RuntimeError(f"no JPEGs under {a.data}")
        items = [(p, read_file(p)) for p in paths]
        bs = a.batch_size
        good, t_start, screened = [], time.perf_counter(), 0
        for s in range(0, len(items), bs):  # untimed: warms nvJPEG, finds refusals
            good += accepted(items[s:s + bs])
            screened = min(s + bs, len(items))
            if time.perf_counter() - t_start > a.max_seconds / 3:
                break
        torch.cuda.synchronize()
        if not good:
            raise RuntimeError(f"the GPU decoder refused all {screened} images screened: "
                               f"{refused[0][1] if refused else 'no error given'}")
        cpu0, t0 = common._self_cpu(), time.perf_counter()
        n = done = 0
        cut = False
        for _ in range(a.epochs):
            for s in range(0, len(good), bs):
                n += len(decode(good[s:s + bs]))
                if time.perf_counter() - t0 > a.max_seconds:
                    cut = True
                    break
            if cut:
                break
            done += 1
        torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        cpu = common._self_cpu() - cpu0
        notes = [f"{len(good)} of {screened} images accepted"
                 + (f" (screened {screened} of {len(items)} in the time)"
                    if screened < len(items) else "")]
        if refused:
            notes.append(f"{len(refused)} refused, not counted: "
                         f"{os.path.basename(refused[0][0])}: {refused[0][1]}")
        if cut:
            notes.append(f"timing cut at {a.max_seconds:.0f} s after {done} full epochs")
        return {"images": n, "seconds": round(seconds, 4), "epochs_timed": done,
                "figure": n / seconds if seconds > 0 else 0.0,
                "cpu_seconds_per_image": cpu / n if n else None,
                "accepted": len(good), "refused": len(refused), "screened": screened,
                "device": torch.cuda.get_device_name(), "batch_size": bs, "dtype": "uint8",
                "versions": f"torch {torch.__version__}, torchvision {torchvision.__version__}",
                "note": "; ".join(notes)}

    common.run(row, body)


if __name__ == "__main__":
    main()
