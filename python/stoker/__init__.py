# SPDX-License-Identifier: Apache-2.0
"""stoker: data sets on disk to ready training batches, from Python.

A pure ctypes binding of libstoker (include/stoker.h). The shared library is found through
the environment variable ``STOKER_LIBRARY`` (a path), else a ``libstoker.so`` next to this
package, else the system loader's search path.

    import stoker, torch
    with stoker.Loader("imagenet-train", batch_size=256) as loader:
        for epoch in range(90):
            loader.set_epoch(epoch)
            for batch in loader:
                x = torch.from_dlpack(batch.data)      # zero copy
                y = torch.from_numpy(batch.labels)

``Writer`` and ``Dataset`` write and read data sets; ``verify`` checks one completely.
"""
from . import _lib
from .errors import (StokerError, InvalidError, FormatError, CorruptError, LimitError,
                     CudaError, UnsupportedError, StateError, ExistsError, CanceledError,
                     EmptyError, StokerWarning)
from .dataset import Writer, Dataset, verify
from .loader import Loader, Batch, BatchData, RaggedField, TensorPair

__version__ = _lib.VERSION_STRING
library_path = _lib.path


def version():
    """The loaded library's version string, e.g. "0.1.0"."""
    return _lib.VERSION_STRING


def capabilities():
    """What this build and host can do: io_uring, CUDA (build, devices), SIMD, HDF5."""
    get = _lib.lib.stoker_capability_get
    cap = _lib.CAPABILITY
    return {
        "io_uring": bool(get(cap["io_uring"])),
        "cuda_build": bool(get(cap["cuda_build"])),
        "cuda_devices": int(get(cap["cuda_devices"])),
        "simd": _lib.SIMD.name(int(get(cap["simd"])), "unknown"),
        "hdf5": bool(get(cap["hdf5"])),
        "crc32c_hw": bool(get(cap["crc32c_hw"])),
    }


__all__ = ["Loader", "Batch", "BatchData", "RaggedField", "TensorPair", "Writer", "Dataset", "verify", "version",
           "capabilities", "StokerError", "InvalidError", "FormatError", "CorruptError",
           "LimitError", "CudaError", "UnsupportedError", "StateError", "ExistsError",
           "CanceledError", "EmptyError", "StokerWarning"]
