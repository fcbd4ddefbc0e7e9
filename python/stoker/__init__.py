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
                     EmptyError)
from .dataset import Writer, Dataset, verify
from .loader import Loader, Batch, BatchData

__version__ = _lib.VERSION_STRING
library_path = _lib.path


def version():
    """The loaded library's version string, e.g. "0.1.0"."""
    return _lib.VERSION_STRING


def capabilities():
    """What this build and host can do: io_uring, CUDA (build, devices), SIMD, HDF5."""
    get = _lib.lib.stoker_capability_get
    simd = int(get(_lib.CAP_SIMD))
    return {
        "io_uring": bool(get(_lib.CAP_IO_URING)),
        "cuda_build": bool(get(_lib.CAP_CUDA_BUILD)),
        "cuda_devices": int(get(_lib.CAP_CUDA_DEVICES)),
        "simd": _lib.text(_lib.lib.stoker_simd_name(simd)),
        "hdf5": bool(get(_lib.CAP_HDF5)),
        "crc32c_hw": bool(get(_lib.CAP_CRC32C_HW)),
    }


__all__ = ["Loader", "Batch", "BatchData", "Writer", "Dataset", "verify", "version",
           "capabilities", "StokerError", "InvalidError", "FormatError", "CorruptError",
           "LimitError", "CudaError", "UnsupportedError", "StateError", "ExistsError",
           "CanceledError", "EmptyError"]
