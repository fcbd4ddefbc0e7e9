# SPDX-License-Identifier: Apache-2.0
"""stoker.Loader as a PyTorch ``IterableDataset``, for ``torch.utils.data.DataLoader`` and
Lightning.

    import stoker, stoker.torch, torch
    loader = stoker.Loader("train-set", batch_size=256)
    data = stoker.torch.LoaderDataset(loader)
    dl = torch.utils.data.DataLoader(data, batch_size=None)   # stoker batches already
    for epoch in range(E):
        data.set_epoch(epoch)
        for x, y in dl:                                       # torch tensors
            ...

Each iteration runs the loader's current epoch (the rest of it, after a resume), and the
next iteration the next epoch, so a trainer that iterates the DataLoader once per epoch
keeps the loader's epoch equal to its own; ``set_epoch`` (called by a training loop, or by
a Lightning callback with ``trainer.current_epoch``) says which epoch explicitly.

The DataLoader must be made with ``batch_size=None`` (stoker batches whole) and
``num_workers=0``: the loader has its own reader and decoder threads, and a loader cannot
cross into a DataLoader worker process (it is refused there with a RuntimeError).
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Tuple

import torch as _torch  # noqa: F401  (imported, batches unpack as torch tensors)
import torch.utils.data as _data

from .loader import Loader

__all__ = ["LoaderDataset"]

_WORKERS = ("stoker.torch.LoaderDataset runs in the process that created its loader: make "
            "the DataLoader with num_workers=0 (the loader already reads and decodes with "
            "its own threads; Loader(threads=N) sets how many) and batch_size=None")


class LoaderDataset(_data.IterableDataset):
    """A ``torch.utils.data.IterableDataset`` over a ``stoker.Loader``: yields each batch as
    ``for ... in loader`` unpacks it, a tuple in schema order: ``(x, y)`` for images and
    labels, the batch's data as a tensor sharing its memory (``torch.from_dlpack``, on the
    batch's device) and its labels as an int64 tensor; for samples of several fields, one
    tensor per field (a ``stoker.TensorPair`` for a ragged one: ``(image, boxes, classes)``);
    ``len()`` is the loader's batches per epoch; ``set_epoch``, ``state_dict`` and
    ``load_state_dict`` are the loader's.

    ``x`` keeps the batch's slot while it lives; a DataLoader and a training step hold at
    most a couple of batches, far below the loader's ``depth``."""

    def __init__(self, loader: Loader) -> None:
        if not isinstance(loader, Loader):
            raise TypeError("LoaderDataset takes a stoker.Loader, not %s"
                            % type(loader).__name__)
        self.loader = loader

    def __iter__(self) -> Iterator[Tuple[Any, ...]]:
        if _data.get_worker_info() is not None:
            raise RuntimeError(_WORKERS)
        for batch in self.loader:
            yield tuple(batch)  # torch tensors (torch is imported here), in schema order

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        """The loader's set_epoch: the next iteration runs `epoch` (the rest of it right
        after load_state_dict of a state saved in it)."""
        self.loader.set_epoch(epoch)

    def state_dict(self) -> Dict[str, Any]:
        return self.loader.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.loader.load_state_dict(state)
