# SPDX-License-Identifier: Apache-2.0
"""Exceptions raised by the binding."""
import errno as _errno

from . import _lib


class StokerError(Exception):
    """A libstoker call failed.

    Attributes: ``code`` (the negative status: ``-errno`` or a ``STOKER_E_*`` value),
    ``codename`` (``"STOKER_E_CORRUPT"``, ``"ENOENT"``, ...) and ``message`` (the library's
    detailed message: file, record id, cause). ``str()`` joins the message with
    ``stoker_strerror`` of the code.
    """

    def __init__(self, code, message=""):
        self.code = int(code)
        self.message = message or ""
        if self.code < 0 and _lib.STATUS.name(self.code):
            self.codename = "STOKER_E_" + _lib.STATUS.name(self.code).upper()
        elif -self.code in _errno.errorcode:
            self.codename = _errno.errorcode[-self.code]
        else:
            self.codename = str(self.code)
        reason = _lib.strerror(self.code)
        text = "%s (%s)" % (self.message, reason) if self.message else reason
        super().__init__("%s [%s]" % (text, self.codename))


class StokerWarning(UserWarning):
    """The library's warnings (its log at level "warn"): a remote data set larger than its
    block cache, an HDF5 layout read one record at a time, batch memory that could not be
    pinned, a GPU decode that failed and fell back to the CPU. Filter them with the
    ``warnings`` module."""


class InvalidError(StokerError, ValueError):
    """STOKER_E_INVALID: an argument or option is invalid for the call."""


class FormatError(StokerError):
    """STOKER_E_FORMAT: a file is not in the expected format or version."""


class CorruptError(StokerError):
    """STOKER_E_CORRUPT: data failed a check (CRC32C, decode, size)."""


class LimitError(StokerError):
    """STOKER_E_LIMIT: a configured safety limit was exceeded."""


class CudaError(StokerError):
    """STOKER_E_CUDA: a CUDA runtime call failed."""


class UnsupportedError(StokerError):
    """STOKER_E_UNSUPPORTED: unavailable in this build or on this host."""


class StateError(StokerError, RuntimeError):
    """STOKER_E_STATE: the call is not valid in the object's current state (for example
    every batch slot is held by the caller)."""


class ExistsError(StokerError):
    """STOKER_E_EXISTS: the output exists and overwriting was not allowed."""


class CanceledError(StokerError):
    """STOKER_E_CANCELED: the operation was canceled."""


class EmptyError(StokerError):
    """STOKER_E_EMPTY: the input holds no records."""


# The class of each of the library's error statuses, by its name in the library's table.
_CLASSES = {_lib.STATUS[name]: cls for name, cls in (
    ("invalid", InvalidError), ("format", FormatError), ("corrupt", CorruptError),
    ("limit", LimitError), ("cuda", CudaError), ("unsupported", UnsupportedError),
    ("state", StateError), ("exists", ExistsError), ("canceled", CanceledError),
    ("empty", EmptyError))}


def error(code, message=""):
    """The exception for status `code` with the library's `message`."""
    return _CLASSES.get(int(code), StokerError)(code, message)
