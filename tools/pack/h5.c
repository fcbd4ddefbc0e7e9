/* SPDX-License-Identifier: Apache-2.0 */
/* stoker-pack's HDF5 source: the file is opened as a stoker data set (the library maps it;
 * the tool sees the public API only), and each record is read and written as it is, or,
 * for JPEG records (unless --no-validate) or given image options, checked and converted by
 * the pipeline as image files are (main.c, open_h5). The key of each record is its index
 * along axis 0, so every record maps back to its source.
 *
 * Converting in a separate process is also the safe way to handle HDF5 files from
 * untrusted places: libhdf5 1.10 is not robust against malicious files. */
#include "pack.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, size_t n, const char *suffix)
{
    const size_t k = strlen(suffix);
    return n >= k && strncmp(s + n - k, suffix, k) == 0;
}

/* HDF5's superblock signature, where the format puts it: at byte 0, or past a user block
 * at 512, 1024, 2048, ... (the library's rule, which the tool cannot call). */
static bool has_h5_signature(const char *path)
{
    static const char sig[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
    char got[sizeof sig];
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return false;
    bool yes = false;
    for (off_t at = 0; !yes && pread(fd, got, sizeof got, at) == (ssize_t)sizeof got;
         at = at ? 2 * at : 512)
        yes = memcmp(got, sig, sizeof sig) == 0;
    close(fd);
    return yes;
}

bool pack_is_h5(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return false; /* a folder named x.h5 is a folder (an image tree, or a data set) */
    const char *colon = strrchr(path, ':');
    const size_t n = colon ? (size_t)(colon - path) : strlen(path);
    return ends_with(path, n, ".h5") || ends_with(path, n, ".hdf5") ||
           ends_with(path, strlen(path), ".h5") || ends_with(path, strlen(path), ".hdf5") ||
           has_h5_signature(path);
}

int pack_h5_open(const pack_opts *o, stoker_dataset **ds)
{
    stoker_config *cfg = NULL;
    if (stoker_config_create(&cfg) < 0 ||
        (o->labels && stoker_config_set_string(cfg, STOKER_OPT_H5_LABELS, o->labels) < 0)) {
        stoker_config_destroy(cfg);
        cli_err("out of memory");
        return PACK_FAIL;
    }
    const int rc = stoker_dataset_open(ds, o->src, cfg);
    stoker_config_destroy(cfg);
    if (rc == STOKER_E_UNSUPPORTED && !stoker_capability_get(STOKER_CAP_HDF5))
        cli_err("%s: this build of the library has no HDF5 support", o->src);
    else if (rc < 0)
        cli_err("%s", *ds ? stoker_dataset_errmsg(*ds) : "out of memory");
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
        cli_err("%s", stoker_writer_errmsg(w));
    return rc < 0 ? PACK_FAIL : 0;
}

/* Makes *buf hold `size` bytes; it exists even for an empty record, which is written from
 * it as a record of 0 bytes. */
static bool room(uint8_t **buf, size_t *cap, uint64_t size)
{
    if (*buf && size <= *cap)
        return true;
    free(*buf);
    *cap = (size_t)size;
    *buf = malloc(*cap ? *cap : 1);
    return *buf != NULL;
}

/* Reads record id into *buf (grown as needed) and adds it; returns 0 or an exit code. */
static int copy_record(const pack_opts *o, stoker_dataset *ds, int64_t id, stoker_writer *w,
                       uint8_t **buf, size_t *cap, pack_result *res)
{
    uint64_t size = 0;
    int64_t label = -1;
    if (stoker_dataset_record_info(ds, id, &size, &label, NULL) < 0) {
        cli_err("%s: record %lld: %s", o->src, (long long)id, stoker_dataset_errmsg(ds));
        return PACK_FAIL;
    }
    if (!room(buf, cap, size)) {
        cli_err("%s: record %lld: out of memory for %llu bytes", o->src, (long long)id,
                (unsigned long long)size);
        return PACK_FAIL;
    }
    size_t got = 0;
    if (stoker_dataset_read(ds, id, *buf, *cap, &got) < 0) {
        cli_err("%s", stoker_dataset_errmsg(ds));
        return PACK_FAIL;
    }
    char key[32];
    snprintf(key, sizeof key, "%lld", (long long)id);
    const int r = stoker_writer_add(w, *buf, got, label, key);
    if (r == STOKER_E_CANCELED || pack_interrupted)
        return PACK_INTERRUPTED;
    if (r < 0) {
        cli_err("%s: record %lld: %s", o->src, (long long)id, stoker_writer_errmsg(w));
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
    pack_progress_init(&prog, n, o->quiet, "records");
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

int pack_h5_items(const pack_opts *o, stoker_dataset *ds, pack_source *src)
{
    const int64_t n = stoker_dataset_num_records(ds);
    src->items = calloc(n > 0 ? (size_t)n : 1, sizeof *src->items);
    src->cap = n > 0 ? (size_t)n : 1;
    src->ds = ds;
    for (int64_t i = 0; src->items && i < n; i++) {
        pack_item *it = &src->items[i];
        uint64_t size = 0;
        it->record = i;
        it->label = -1;
        stoker_dataset_record_info(ds, i, &size, &it->label, NULL);
        it->size = (int64_t)size;
        if (asprintf(&it->path, "%s: record %lld", o->src, (long long)i) < 0 ||
            asprintf(&it->key, "%lld", (long long)i) < 0) {
            it->path = it->key = NULL;
            break;
        }
        src->n++;
    }
    if (src->n != (size_t)n) {
        cli_err("out of memory for %lld records", (long long)n);
        return PACK_FAIL;
    }
    return 0;
}

/* --verify of an HDF5 file: HDF5 keeps no checksums, so what can be checked is that every
 * record reads (chunks present and inflating, extents inside the file). */
/* Prints "PATH: " with the path escaped. */
static void put_path(const char *path)
{
    cli_put_escaped(stdout, path);
    fputs(": ", stdout);
}

/* --verify of an HDF5 file: HDF5 keeps no checksums, so what can be checked is that every
 * record reads (chunks present and inflating, extents inside the file). */
int pack_h5_verify(const char *path, bool quiet)
{
    stoker_dataset *ds = NULL;
    if (stoker_dataset_open(&ds, path, NULL) < 0) {
        put_path(path);
        fputs("cannot be read: ", stdout);
        cli_put_escaped(stdout, ds ? stoker_dataset_errmsg(ds) : "out of memory");
        putchar('\n');
        stoker_dataset_close(ds);
        return PACK_FAIL;
    }
    const int64_t n = stoker_dataset_num_records(ds);
    int64_t bad = 0;
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t size = 0;
        size_t got = 0;
        const bool ok =
            stoker_dataset_record_info(ds, i, &size, NULL, NULL) == 0 && room(&buf, &cap, size);
        if (!ok || stoker_dataset_read(ds, i, buf, cap, &got) < 0) {
            printf("record %lld: ", (long long)i);
            cli_put_escaped(stdout, buf ? stoker_dataset_errmsg(ds) : "out of memory");
            putchar('\n');
            bad++;
        }
    }
    free(buf);
    stoker_dataset_close(ds);
    if (bad) {
        put_path(path);
        printf("%lld of %lld records cannot be read\n", (long long)bad, (long long)n);
    } else if (!quiet) {
        put_path(path);
        printf("every one of %lld records reads (HDF5 keeps no checksums: damage inside a "
               "record that still reads is not detected)\n",
               (long long)n);
    }
    return bad ? PACK_FAIL : PACK_OK;
}
