# SPDX-License-Identifier: Apache-2.0
"""A stoker_config owned by Python (created, filled and destroyed within one call)."""
import ctypes
import math
import os
import sys
import warnings

from . import _lib
from .errors import StokerWarning, error

_L = _lib.lib
LOG_WARN = 2  # STOKER_LOG_WARN


def _warn(user, level, msg):
    """The library's log callback: a StokerWarning. It may run on a library thread, and it
    never raises into C: a warning filtered into an error is printed instead."""
    text = (msg or b"").decode("utf-8", "replace")
    try:
        warnings.warn(text, StokerWarning, stacklevel=2)
    except BaseException:  # noqa: B902 (an exception must not cross into C)
        try:
            sys.stderr.write("stoker: warning: %s\n" % text)
        except BaseException:  # noqa: B902
            pass


# One callback object for the life of the process: a config's copy (a loader's, a data
# set's) may call it as long as they live.
_ON_LOG = _lib.LOG_FN(_warn)

# The C API takes int64_t, which ctypes fills with any Python int modulo 2**64.
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


class Config:
    """Context manager around a stoker_config handle."""

    def __init__(self):
        self.handle = ctypes.c_void_p()
        rc = _L.stoker_config_create(ctypes.byref(self.handle))
        if rc != 0:
            raise MemoryError("stoker_config_create failed: %s" % _lib.strerror(rc))
        _L.stoker_config_set_log(self.handle, _ON_LOG, None, LOG_WARN)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.handle:
            _L.stoker_config_destroy(self.handle)
            self.handle = ctypes.c_void_p()

    def __del__(self):
        self.close()

    def _check(self, rc, opt, value):
        if rc != 0:
            name = _lib.text(_L.stoker_option_name(opt)) or str(opt)
            row = _lib.OPTIONS.get(name)
            if (row is not None and row.type == _lib.OPTION_INT and row.values is None
                    and isinstance(value, int) and not row.min <= value <= row.max):
                raise error(rc, "option %s = %d is out of range: %d..%d"
                            % (name, value, row.min, row.max))
            raise error(rc, "option %s = %r is not valid" % (name, value))

    def set_int(self, opt, value):
        value = int(value)
        if not INT64_MIN <= value <= INT64_MAX:
            name = _lib.text(_L.stoker_option_name(opt)) or str(opt)
            raise ValueError("option %s = %d is out of the 64-bit range" % (name, value))
        self._check(_L.stoker_config_set_int(self.handle, opt, value), opt, value)

    def set_float(self, opt, value):
        name = _lib.text(_L.stoker_option_name(opt)) or str(opt)
        try:
            value = float(value)
        except OverflowError:  # an int beyond the double range
            raise ValueError("option %s = %r is out of range" % (name, value)) from None
        if not math.isfinite(value):
            raise ValueError("option %s = %r is not a finite number" % (name, value))
        self._check(_L.stoker_config_set_float(self.handle, opt, value), opt, value)

    def set_string(self, opt, value):
        name = _lib.text(_L.stoker_option_name(opt)) or str(opt)
        raw = None if value is None else c_string(name, os.fsencode(value))
        self._check(_L.stoker_config_set_string(self.handle, opt, raw), opt, value)


def is_bool(value):
    """True for bool and for the booleans of numpy and torch (numpy.bool_, a torch.bool
    tensor), which also convert to an int."""
    if isinstance(value, bool):
        return True
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.bool_):
        return True
    return str(getattr(value, "dtype", "")) == "torch.bool"


def check_int(name, value, minimum=INT64_MIN, maximum=INT64_MAX, allow_none=False):
    """`value` as an int within [minimum, maximum] (by default the int64_t range of the C
    API; None: unbounded), refusing bools, floats and strings with TypeError and values
    out of range with ValueError."""
    if value is None and allow_none:
        return None
    if is_bool(value) or not hasattr(value, "__index__"):
        raise TypeError("%s must be an int, not %s" % (name, type(value).__name__))
    value = value.__index__()
    if minimum is not None and value < minimum:
        raise ValueError("%s must be >= %d, got %d" % (name, minimum, value))
    if maximum is not None and value > maximum:
        raise ValueError("%s must be <= %d, got %d" % (name, maximum, value))
    return value


def check_bool(name, value):
    if is_bool(value):
        return bool(value)
    if not isinstance(value, int) or value not in (0, 1):
        raise TypeError("%s must be a bool, not %r" % (name, value))
    return bool(value)


def c_string(name, raw):
    """`raw` (bytes), refused with ValueError if it holds a NUL byte: C would read it only
    up to there, silently naming another file, key or class."""
    if b"\0" in raw:
        raise ValueError("%s must not contain a NUL byte: %r" % (name, raw))
    return raw


def check_path(name, value):
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError("%s must be a path (str, bytes or os.PathLike), not %s"
                        % (name, type(value).__name__))
    return c_string(name, os.fsencode(value))


_TAKEN = {}  # (enum kind, option) -> {name: value} the option takes


def taken(table, option=None):
    """The names of `table` (an _lib.Enum) and their values; with `option`, only the values
    a config takes for it (the library's tables also name values that are only reported,
    such as the "hdf5" back-end)."""
    key = (table.kind, option)
    if key not in _TAKEN:
        names = dict(table.values)
        if option is not None:
            with Config() as cfg:
                names = {n: v for n, v in names.items()
                         if _L.stoker_config_set_int(cfg.handle, option, v) == 0}
        _TAKEN[key] = names
    return _TAKEN[key]


def choice(name, value, table, option=None):
    """The value named `value` (in any case, or one of its aliases) in the library's enum
    `table`, among those `option` takes."""
    names = taken(table, option)
    if not isinstance(value, str):
        raise TypeError("%s must be a str (one of %s), not %s"
                        % (name, ", ".join(sorted(names)), type(value).__name__))
    code = table.parse(value)
    if code is None or code not in names.values():
        raise ValueError("%s must be one of %s, got %r" % (name, ", ".join(sorted(names)), value))
    return code


# NumPy's and PyTorch's other spellings of a dtype, as the library names it.
_DTYPE_SPELLINGS = {"bool_": "bool", "f2": "float16", "f4": "float32", "f8": "float64",
                    "u1": "uint8", "i1": "int8"}


def dtype_code(value):
    """A stoker_dtype from a name ("float16"), a numpy dtype or a torch dtype."""
    if isinstance(value, str):
        name = value
    else:
        name = str(value)  # torch.float16 -> "torch.float16"; numpy dtype -> "float16"
        if not (name.startswith("torch.") or hasattr(value, "itemsize") or
                isinstance(value, type)):
            raise TypeError("dtype must be a str, numpy dtype or torch dtype, not %s"
                            % type(value).__name__)
        if isinstance(value, type):  # numpy scalar type such as np.uint8
            name = getattr(value, "__name__", name)
    name = name.lower()
    if name.startswith("torch."):
        name = name[len("torch."):]
    code = _lib.DTYPE.parse(_DTYPE_SPELLINGS.get(name, name))
    if code is None:
        raise ValueError("unknown dtype %r (one of %s)" % (value, ", ".join(_lib.DTYPE)))
    return code


# ---- keywords from the library's table of options ----


def table_keywords(bit, left_out=()):
    """The options of the library's table that apply to an object (a FOR_* bit), by name in
    the table's order, less those `left_out`: the keywords its constructor takes."""
    return [name for name, o in _lib.OPTIONS.items() if o.applies & bit and name not in left_out]


def bind(what, args, kw, positional, allowed):
    """The keyword arguments of a call `what`(..., *args, **kw) as one dict: `args` are the
    parameters named by `positional`, in order (the constructors' historical order; options
    added since are keyword-only); a name not in `allowed`, or given twice, is a TypeError
    as Python gives for a fixed signature."""
    if len(args) > len(positional):
        raise TypeError("%s takes at most %d positional arguments after its first ones (%d "
                        "given)" % (what, len(positional), len(args)))
    out = dict(kw)
    for name, value in zip(positional, args):
        if name in out:
            raise TypeError("%s got multiple values for argument %r" % (what, name))
        out[name] = value
    unknown = sorted(set(out) - set(allowed))
    if unknown:
        raise TypeError("%s got an unexpected keyword argument %r" % (what, unknown[0]))
    return out


def signature(first, positional, keywords, defaults=None):
    """An inspect.Signature for a constructor taking `first` (names, required), then
    `positional` and `keywords` (keyword-only) with None, the library's default (or the
    binding's own parameter's, in `defaults`)."""
    defaults = defaults or {}
    import inspect
    P = inspect.Parameter
    params = [P("self", P.POSITIONAL_OR_KEYWORD)]
    params += [P(n, P.POSITIONAL_OR_KEYWORD) for n in first]
    params += [P(n, P.POSITIONAL_OR_KEYWORD, default=defaults.get(n)) for n in positional]
    params += [P(n, P.KEYWORD_ONLY, default=defaults.get(n)) for n in keywords
               if n not in positional and n not in first]
    return inspect.Signature(params)


def keyword_doc(names):
    """The table's doc line of each option in `names`, one line each, for a docstring."""
    return "\n".join("``%s``: %s." % (n, _lib.OPTIONS[n].doc) for n in names
                      if n in _lib.OPTIONS)


def set_options(cfg, values):
    """Sets each option of the table given (not None) in `values` (name: value), as its row
    says: a name of its enum (any case, or an alias) for an option an enum names; a bool for
    a flag (range 0..1); an int for an integer, a number for a float, a str or path for a
    string. The library checks the range and names it when it refuses a value."""
    for name, value in values.items():
        if value is None:
            continue
        o = _lib.OPTIONS[name]
        if o.type == _lib.OPTION_STRING:
            if not isinstance(value, (str, bytes, os.PathLike)):
                raise TypeError("%s must be a str, not %s" % (name, type(value).__name__))
            cfg.set_string(o.value, value)
        elif o.type == _lib.OPTION_FLOAT:
            if is_bool(value) or not isinstance(value, (int, float)) and \
                    not hasattr(value, "__float__"):
                raise TypeError("%s must be a number, not %s" % (name, type(value).__name__))
            cfg.set_float(o.value, value)
        elif o.values is not None:
            cfg.set_int(o.value, choice(name, value, o.values, o.value))
        elif (o.min, o.max) == (0, 1):
            cfg.set_int(o.value, check_bool(name, value))
        else:
            cfg.set_int(o.value, check_int(name, value))
