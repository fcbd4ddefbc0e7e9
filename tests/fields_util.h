/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for tests of samples of several fields: a field's descriptor, and (with HDF5)
 * datasets written as h5py writes them. */
#ifndef STOKER_TESTS_FIELDS_UTIL_H
#define STOKER_TESTS_FIELDS_UTIL_H

#include "testutil.h"

#ifdef STOKER_HAVE_HDF5
#include <hdf5.h>
#endif

/* A field: name, kind, dtype, ndim, shape[0..1], and its tie (STOKER_TIE_NONE, NULL). */
static inline stoker_field_desc t_field(const char *name, int32_t kind, int32_t dtype, int32_t ndim,
                                        int64_t d0, int64_t d1, int32_t tie, const char *tie_to)
{
    stoker_field_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = name;
    d.kind = kind;
    d.dtype = dtype;
    d.ndim = ndim;
    d.shape[0] = d0;
    d.shape[1] = d1;
    d.tie = tie;
    d.tie_to = tie_to;
    return d;
}

/* The fields of t_detection_writer's samples: image, mask, boxes, classes, label. */
#define T_DETECTION_FIELDS 5

/* A writer of samples of an image (JPEG, vouched checked), its h x w uint8 mask, boxes
 * [N, 4] float32 and their int64 class ids, and an int64 label, at `path` (replaced; no
 * fsync): the schema of the tests that compare loaders on such samples. */
static inline stoker_writer *t_detection_writer(const char *path, int64_t h, int64_t w)
{
    stoker_writer *wr = t_writer_open(path, 0, 0, 1);
    const stoker_field_desc d[T_DETECTION_FIELDS] = {
        t_field("image", STOKER_FIELD_JPEG, 0, 0, 0, 0, STOKER_TIE_NONE, NULL),
        t_field("mask", STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 2, h, w, STOKER_TIE_MASK, "image"),
        t_field("boxes", STOKER_FIELD_ARRAY, STOKER_DTYPE_FLOAT32, 1, 4, 0, STOKER_TIE_BOXES,
                "image"),
        t_field("classes", STOKER_FIELD_ARRAY, STOKER_DTYPE_INT64, 0, 0, 0, STOKER_TIE_ROWS,
                "boxes"),
        t_field("label", STOKER_FIELD_INT64, 0, 0, 0, 0, STOKER_TIE_NONE, NULL),
    };
    if (stoker_writer_set_fields(wr, d, T_DETECTION_FIELDS))
        T_FAIL("set_fields: %s", stoker_writer_errmsg(wr));
    return wr;
}

#ifdef STOKER_HAVE_HDF5
/* A 1-D dataset `name` of n elements, file type ft, written from buf of memory type mt. */
static inline void t_h5_write(hid_t f, const char *name, hid_t ft, hid_t mt, hsize_t n,
                              const void *buf)
{
    const hid_t sp = H5Screate_simple(1, &n, NULL);
    T_ASSERT(sp >= 0);
    const hid_t d = H5Dcreate2(f, name, ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    T_ASSERT(d >= 0);
    T_ASSERT(H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0);
    H5Dclose(d);
    H5Sclose(sp);
}

/* A variable-length dataset `name` of n rows of file type ft (memory type mt). */
static inline void t_h5_vlen(hid_t f, const char *name, hid_t ft, hid_t mt, hsize_t n,
                             const hvl_t *rows)
{
    const hid_t fv = H5Tvlen_create(ft), mv = H5Tvlen_create(mt);
    T_ASSERT(fv >= 0 && mv >= 0);
    t_h5_write(f, name, fv, mv, n, rows);
    H5Tclose(fv);
    H5Tclose(mv);
}
#endif

#endif
