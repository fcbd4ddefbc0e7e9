#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a data set of raw uint8 records through stoker's public writer (ctypes).

Record i holds bytes (i * 131 + k * 7 + (k >> 8) + 1) mod 256, k = 0.., so every byte a
loader delivers can be checked; its label is i mod 10 - 3.

    make_raw_dataset.py --lib build/libstoker.so OUT [--records 2000] [--size 150528]
                        [--shape 224,224,3] [--shard-size BYTES] [--align 4096]
"""
import argparse
import ctypes
import sys

import numpy as np

FIELD_RAW = 3
DTYPE_UINT8 = 1
OPT_SHARD_SIZE, OPT_ALIGN, OPT_OVERWRITE, OPT_FSYNC = 1, 2, 3, 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--lib", required=True, help="path of libstoker.so")
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--shape", default="224,224,3", help="record shape (uint8)")
    ap.add_argument("--shard-size", type=int, default=0)
    ap.add_argument("--align", type=int, default=0)
    a = ap.parse_args()

    lib = ctypes.CDLL(a.lib)
    lib.stoker_writer_errmsg.restype = ctypes.c_char_p
    lib.stoker_strerror.restype = ctypes.c_char_p
    vp = ctypes.c_void_p
    lib.stoker_config_create.argtypes = [ctypes.POINTER(vp)]
    lib.stoker_config_set_int.argtypes = [vp, ctypes.c_int, ctypes.c_int64]
    lib.stoker_config_destroy.argtypes = [vp]
    lib.stoker_writer_create.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p, vp]
    lib.stoker_writer_set_field.argtypes = [vp, ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                            ctypes.POINTER(ctypes.c_int64)]
    lib.stoker_writer_add.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int64, ctypes.c_char_p]
    lib.stoker_writer_finish.argtypes = [vp]
    lib.stoker_writer_destroy.argtypes = [vp]
    lib.stoker_writer_errmsg.argtypes = [vp]

    cfg, w = vp(), vp()

    def check(rc, what):
        if rc != 0:
            msg = lib.stoker_writer_errmsg(w).decode() if w.value else ""
            sys.exit("%s: %s: %s" % (what, lib.stoker_strerror(rc).decode(), msg))

    check(lib.stoker_config_create(ctypes.byref(cfg)), "config")
    check(lib.stoker_config_set_int(cfg, OPT_OVERWRITE, 1), "overwrite")
    check(lib.stoker_config_set_int(cfg, OPT_FSYNC, 0), "fsync")
    if a.shard_size:
        check(lib.stoker_config_set_int(cfg, OPT_SHARD_SIZE, a.shard_size), "shard size")
    if a.align:
        check(lib.stoker_config_set_int(cfg, OPT_ALIGN, a.align), "align")
    check(lib.stoker_writer_create(ctypes.byref(w), a.out.encode(), cfg), "create")
    shape = [int(x) for x in a.shape.split(",")]
    cshape = (ctypes.c_int64 * len(shape))(*shape)
    check(lib.stoker_writer_set_field(w, FIELD_RAW, DTYPE_UINT8, len(shape), cshape), "field")
    size = int(np.prod(shape))
    k = np.arange(size, dtype=np.uint64)
    base = (k * 7 + (k >> 8) + 1).astype(np.uint64)
    for i in range(a.records):
        rec = np.ascontiguousarray(((base + i * 131) & 0xFF).astype(np.uint8))
        check(lib.stoker_writer_add(w, rec.ctypes.data, size, i % 10 - 3, None), "add")
    check(lib.stoker_writer_finish(w), "finish")
    lib.stoker_writer_destroy(w)
    lib.stoker_config_destroy(cfg)


if __name__ == "__main__":
    main()
