# SPDX-License-Identifier: Apache-2.0
"""The binding's view of include/stoker.h: every value of every public enum, as the binding
reads it from the library's tables of names, equals the header's constant; the few
numbers the binding keeps itself (the STOKER_ENUM_* kinds, STOKER_MAX_DIMS, the major
version) equal the header's; and the structs it mirrors with ctypes (stoker_batch_view,
stoker_stats) have the header's fields, in its order, of its types, at the offsets a C
compiler gives them."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import stoker
from stoker import _dlpack, _lib

from conftest import ROOT

HEADER = os.path.join(ROOT, "include", "stoker.h")


def _source():
    with open(HEADER) as f:
        return f.read()


def _uncommented(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def _enums():
    """{typedef name: [(constant, value), ...]} of every enum in the header."""
    out = {}
    for name, body, end in re.findall(r"typedef enum (\w+) \{(.*?)\} (\w+);",
                                      _uncommented(_source()), re.S):
        assert name == end, name
        out[name] = [(c, int(v)) for c, v in re.findall(r"(STOKER_\w+)\s*=\s*(-?\d+)", body)]
    return out


def _defines():
    return {k: int(v) for k, v in re.findall(r"#define (STOKER_\w+) (\d+)\n", _source())}


def _kinds():
    """{typedef name: STOKER_ENUM_* value}: the header names the enum each kind lists."""
    block = re.search(r"typedef enum stoker_enum \{(.*?)\} stoker_enum;", _source(), re.S)
    found = re.findall(r"(STOKER_ENUM_\w+) = (\d+), */\* (stoker_\w+):", block.group(1))
    assert found, "no STOKER_ENUM_* kinds found in the header"
    return {typedef: (const, int(v)) for const, v, typedef in found}


# The binding's table of each kind, where it keeps one.
_TABLES = {t.kind: t for t in vars(_lib).values() if isinstance(t, _lib.Enum)}


def _table(kind):
    return _TABLES.get(kind) or _lib.Enum(kind)


def _suffix(typedef, constant, constants):
    """The constant's name in the library's table: what follows the prefix its enum's
    constants share (STOKER_DCT_SCALE_ of STOKER_DCT_SCALE_NEVER), and the E_ of errors."""
    prefix = os.path.commonprefix([c for c, _ in constants])
    prefix = prefix[:prefix.rfind("_") + 1]
    rest = constant[len(prefix):]
    return rest[2:] if typedef == "stoker_status" and rest.startswith("E_") else rest


def test_enum_kinds_equal_the_header():
    enums = _enums()
    header = dict(enums["stoker_enum"])
    kept = {"STOKER_" + k: v for k, v in vars(_lib).items() if k.startswith("ENUM_")}
    assert kept == header
    # every kind names an enum of the header, each enum but stoker_enum has a kind
    kinds = _kinds()
    assert sorted(c for c, _ in kinds.values()) == sorted(header)
    assert set(kinds) == set(enums) - {"stoker_enum"}


@pytest.mark.parametrize("typedef", sorted(set(_enums()) - {"stoker_enum"}))
def test_every_enum_value_equals_the_header(typedef):
    constants = _enums()[typedef]
    table = _table(_kinds()[typedef][1])
    assert len(constants) >= 2
    for constant, value in constants:
        suffix = _suffix(typedef, constant, constants)
        if suffix == "DEFAULT":  # means "choose for me": no name of its own
            assert table.name(value) is None, constant
            continue
        assert table.parse(suffix) == value, "%s = %d, the binding has %r" % (
            constant, value, table.parse(suffix))
        assert table.name(value) is not None, constant
    # and the binding knows no value the header lacks
    assert set(table.values.values()) <= {v for _, v in constants}


def test_statuses_the_binding_uses_equal_the_header():
    status = dict(_enums()["stoker_status"])
    assert (_lib.END, _lib.E_INVALID, _lib.E_LIMIT, _lib.E_UNSUPPORTED, _lib.E_STATE) == (
        status["STOKER_END"], status["STOKER_E_INVALID"], status["STOKER_E_LIMIT"],
        status["STOKER_E_UNSUPPORTED"], status["STOKER_E_STATE"])
    for constant, value in status.items():
        if constant.startswith("STOKER_E_"):
            e = stoker.errors.error(value)
            assert e.codename == constant
            assert type(e).__name__.upper() == constant[len("STOKER_E_"):] + "ERROR"


def test_numbers_kept_by_the_binding_equal_the_header():
    defines = _defines()
    assert _lib.MAX_DIMS == defines["STOKER_MAX_DIMS"]
    assert _lib.EXPECTED_MAJOR == defines["STOKER_VERSION_MAJOR"]
    # DLPack's view of each dtype: every one of the header's, of the library's size
    for constant, value in _enums()["stoker_dtype"]:
        if value:
            code, bits = _dlpack.DTYPES[value]
            assert bits == 8 * _lib.lib.stoker_dtype_size(value), constant


_C_TYPES = {"uint32_t": ctypes.c_uint32, "int32_t": ctypes.c_int32,
            "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "double": ctypes.c_double,
            "char": ctypes.c_char}


def _struct_fields(name):
    """[(field, ctypes type)] of struct `name` as the header declares it."""
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name),
                     _uncommented(_source()), re.S).group(1)
    defines = _defines()
    out = []
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        m = re.fullmatch(r"(const )?(\w+) (\*?)(\w+)(?:\[(.*)\])?", " ".join(decl.split()))
        assert m, decl
        _, base, pointer, field, dim = m.groups()
        t = ctypes.c_void_p if base == "void" and pointer else _C_TYPES[base]
        if pointer and base != "void":
            t = ctypes.POINTER(t)
        if dim:
            t = t * eval(re.sub(r"STOKER_\w+", lambda d: str(defines[d.group(0)]), dim))
        out.append((field, t))
    return out


def _same_type(a, b):
    if hasattr(a, "_length_") or hasattr(b, "_length_"):
        return getattr(a, "_length_", None) == getattr(b, "_length_", None) and \
            a._type_ is b._type_
    return a is b


def _named(fields):
    """The fields but reserved space (the binding lays stoker_stats out from the library's
    table, which lists no reserved field: its padding is named _reservedN)."""
    return [(f, t) for f, t in fields if not re.match(r"_?reserved\d*$", f)]


@pytest.mark.parametrize("name, cls", [("stoker_batch_view", _lib.BatchView),
                                       ("stoker_stats", _lib.Stats),
                                       ("stoker_window", _lib.Window)])
def test_structs_equal_the_header(name, cls):
    header = _named(_struct_fields(name))
    assert [f for f, _ in _named(cls._fields_)] == [f for f, _ in header]
    for (field, mine), (_, theirs) in zip(_named(cls._fields_), header):
        assert _same_type(mine, theirs), "%s.%s: %r in the binding, %r in the header" % (
            name, field, mine, theirs)


@pytest.mark.parametrize("name, cls", [("stoker_batch_view", _lib.BatchView),
                                       ("stoker_stats", _lib.Stats),
                                       ("stoker_window", _lib.Window),
                                       ("stoker_field_view", _lib.FieldView),
                                       ("stoker_take", _lib.Take)])
def test_struct_offsets_equal_the_compilers(name, cls, tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    fields = [f for f, _ in _named(cls._fields_)]
    src = tmp_path / "layout.c"
    src.write_text('#include <stddef.h>\n#include <stdio.h>\n#include "stoker.h"\n'
                   "int main(void) {\n  printf(\"%%zu\\n\", sizeof(%s));\n" % name +
                   "".join('  printf("%%zu\\n", offsetof(%s, %s));\n' % (name, f)
                           for f in fields) + "  return 0;\n}\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.dirname(HEADER), str(src), "-o", str(exe)],
                   check=True)
    numbers = [int(x) for x in subprocess.run([str(exe)], check=True, capture_output=True,
                                              text=True).stdout.split()]
    assert numbers == [ctypes.sizeof(cls)] + [getattr(cls, f).offset for f in fields]
