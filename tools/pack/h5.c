/* stoker-pack's HDF5 source: the file is opened as a stoker data set (the library maps it;
 * the tool sees the public API only), and each record is read and written as it is. The
 * key of each record is its index along axis 0, so every record maps back to its source.
 *
 * Converting in a separate process is also the safe way to handle HDF5 files from
 * untrusted places: libhdf5 1.10 is not robust against malicious files. */
#include "pack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    const size_t k = strlen(suffix);
    return n >= k && strncmp(s + n - k, suffix, k) == 0;
}

bool pack_is_h5(const char *path)
{
    const char *colon = strrchr(path, ':');
    const size_t n = colon ? (size_t)(colon - path) : strlen(path);
    return ends_with(path, n, ".h5") || ends_with(path, n, ".hdf5") ||
           ends_with(path, strlen(path), ".h5") || ends_with(path, strlen(path), ".hdf5");
}

int pack_h5_open(const pack_opts *o, stoker_dataset **ds)
{
    stoker_config *cfg = NULL;
    if (stoker_config_create(&cfg) < 0 ||
        (o->labels && stoker_config_set_string(cfg, STOKER_OPT_H5_LABELS, o->labels) < 0)) {
        stoker_config_destroy(cfg);
        pack_err("out of memory");
        return PACK_FAIL;
    }
    const int rc = stoker_dataset_open(ds, o->src, cfg);
    stoker_config_destroy(cfg);
    if (rc == STOKER_E_UNSUPPORTED && !stoker_capability_get(STOKER_CAP_HDF5))
        pack_err("%s: this build of the library has no HDF5 support", o->src);
    else if (rc < 0)
        pack_err("%s", *ds ? stoker_dataset_errmsg(*ds) : "out of memory");
    return rc < 0 ? PACK_FAIL : 0;
}

int pack_h5_field(stoker_writer *w, const stoker_dataset *ds)
{
    int32_t kind = 0, dtype = 0, ndim = 0;
    int64_t shape[STOKER_MAX_DIMS] = {0};
    int rc = stoker_dataset_field(ds, &kind, &dtype, &ndim, shape);
    if (rc == 0)
        rc = kind == STOKER_FIELD_RAW
                 ? stoker_writer_set_field(w, STOKER_FIELD_RAW, dtype, ndim, shape)
                 : stoker_writer_set_field(w, (stoker_field_kind)kind, 0, 0, NULL);
    if (rc < 0)
        pack_err("%s", stoker_writer_errmsg(w));
    return rc < 0 ? PACK_FAIL : 0;
}

/* Reads record id into *buf (grown as needed) and adds it; returns 0 or an exit code. */
static int copy_record(const pack_opts *o, stoker_dataset *ds, int64_t id, stoker_writer *w,
                       uint8_t **buf, size_t *cap, pack_result *res)
{
    uint64_t size = 0;
    int64_t label = -1;
    if (stoker_dataset_record_info(ds, id, &size, &label, NULL) == 0 && size > *cap) {
        free(*buf);
        *cap = (size_t)size;
        *buf = malloc(*cap ? *cap : 1);
    }
    if (!*buf) {
        pack_err("out of memory");
        return PACK_FAIL;
    }
    size_t got = 0;
    if (stoker_dataset_read(ds, id, *buf, *cap, &got) < 0) {
        pack_err("%s", stoker_dataset_errmsg(ds));
        return PACK_FAIL;
    }
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    const int r = stoker_writer_add(w, *buf, got, label, key);
    if (r == STOKER_E_CANCELED || pack_interrupted)
        return PACK_INTERRUPTED;
    if (r < 0) {
        pack_err("%s: record %lld: %s", o->src, (long long)id, stoker_writer_errmsg(w));
        return PACK_FAIL;
    }
    res->records++;
    res->bytes += (int64_t)got;
    return 0;
}

int pack_h5_rows(const pack_opts *o, stoker_dataset *ds, const size_t *order, stoker_writer *w,
                 pack_result *res)
{
    const int64_t n = stoker_dataset_num_records(ds);
    pack_progress prog;
    pack_progress_init(&prog, n, o->quiet);
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    for (int64_t k = 0; rc == 0 && k < n; k++) {
        rc = copy_record(o, ds, (int64_t)order[k], w, &buf, &cap, res);
        pack_progress_update(&prog, k + 1, res->records, res->bytes);
    }
    pack_progress_end(&prog);
    free(buf);
    return rc;
}
