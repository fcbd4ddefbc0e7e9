/* SPDX-License-Identifier: Apache-2.0 */
/* Shard format round trip: records of random sizes (empty ones too), labels and awkward keys
 * written with each alignment over several shards, then read back through every getter,
 * stoker_dataset_read and stoker__dataset_locate; the same input written twice gives the
 * same bytes; a raw field; a record larger than the staging buffer and than a shard; the
 * manifest's mark of a JPEG data set checked when written (version 2), and its absence. */
#include "source/dataset.h"
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>

#define NREC 300

typedef struct rec {
    uint8_t *data;
    size_t size;
    int64_t label;
    const char *key;
} rec;

static const char *const KEYS[] = {
    "train/cat/0001.jpg",
    "with space/and more.jpg",
    "naïve/日本語/ü.jpg",
    "line\nbreak",
    "tab\there",
    "back\\slash",
    "ctrl\x01\x1f\x7f",
    "",
    "-dash",
    "+plus",
};

static const char *const CLASSES[] = {"cat", "dog with space", "naïve\nnewline\\", ""};

static rec *make_records(int n, uint64_t seed, size_t big)
{
    rec *r = calloc((size_t)n, sizeof *r);
    for (int i = 0; i < n; i++) {
        const uint64_t x = t_rand(&seed);
        r[i].size = x % 7 == 0 ? 0 : (size_t)(t_rand(&seed) % 9000);
        if (big && i == n / 2)
            r[i].size = big;
        r[i].data = malloc(r[i].size + 1);
        for (size_t j = 0; j < r[i].size; j++)
            r[i].data[j] = (uint8_t)t_rand(&seed);
        r[i].label = (int64_t)(t_rand(&seed) % 2000) - 1000;
        r[i].key = x % 5 == 0 ? NULL : KEYS[x % (sizeof KEYS / sizeof KEYS[0])];
    }
    return r;
}

static void free_records(rec *r, int n)
{
    for (int i = 0; i < n; i++)
        free(r[i].data);
    free(r);
}

static void write_set(const char *path, const rec *r, int n, int64_t align, int64_t shard)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ALIGN, align));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHARD_SIZE, shard));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0));
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, path, cfg));
    stoker_config_destroy(cfg);
    T_OK(stoker_writer_set_field(w, STOKER_FIELD_JPEG, 0, 0, NULL));
    for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0]; i++)
        T_OK(stoker_writer_add_class(w, CLASSES[i]));
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        T_OK(stoker_writer_add(w, r[i].data, r[i].size, r[i].label, r[i].key));
        bytes += r[i].size;
    }
    T_EQ_INT(stoker_writer_records(w), n);
    T_EQ_INT(stoker_writer_bytes(w), bytes);
    T_OK(stoker_writer_finish(w));
    T_EQ_STR(stoker_writer_errmsg(w), "");
    T_EQ_RC(stoker_writer_add(w, "x", 1, 0, NULL), STOKER_E_STATE);
    stoker_writer_destroy(w);
}

static void check_record(stoker_dataset *ds, const rec *r, int64_t id, uint32_t align, uint8_t *buf,
                         size_t cap)
{
    uint64_t size = 0;
    int64_t label = 0;
    int32_t shard = -1;
    T_OK(stoker_dataset_record_info(ds, id, &size, &label, &shard));
    T_EQ_INT(size, r->size);
    T_EQ_INT(label, r->label);
    T_ASSERT(shard >= 0 && shard < stoker_dataset_num_shards(ds));
    stoker__recloc loc;
    T_OK(stoker__dataset_locate(ds, id, &loc));
    T_EQ_INT(loc.shard, shard);
    T_EQ_INT(loc.length, r->size);
    T_EQ_INT(loc.label, r->label);
    T_EQ_INT(loc.offset % align, 0);
    T_EQ_INT(loc.has_crc, 1);
    T_EQ_INT(loc.crc, stoker_crc32c(0, r->data, r->size));
    T_ASSERT(loc.fd >= 0);
    if (r->size > 0) { /* the located bytes are the record's, read the reader's way */
        T_EQ_INT(pread(loc.fd, buf, r->size, (off_t)loc.offset), r->size);
        T_ASSERT(memcmp(buf, r->data, r->size) == 0);
    }
    memset(buf, 0xAA, r->size);
    size_t got = 12345;
    T_OK(stoker_dataset_read(ds, id, buf, cap, &got));
    T_EQ_INT(got, r->size);
    T_ASSERT(r->size == 0 || memcmp(buf, r->data, r->size) == 0);
    const char *key = stoker_dataset_record_key(ds, id);
    if (r->key)
        T_EQ_STR(key, r->key);
    else
        T_ASSERT(key == NULL);
}

typedef struct reader_arg {
    stoker_dataset *ds;
    const rec *r;
    int n;
    int start;
} reader_arg;

/* Reads every record and key; several run at once on one handle. */
static void *reader(void *p)
{
    const reader_arg *a = p;
    const size_t cap = (size_t)stoker__dataset_max_record(a->ds) + 1;
    uint8_t *buf = malloc(cap);
    for (int k = 0; k < a->n; k++) {
        const int i = (a->start + k) % a->n;
        size_t got = 0;
        if (stoker_dataset_read(a->ds, i, buf, cap, &got) != 0 || got != a->r[i].size ||
            memcmp(buf, a->r[i].data, got) != 0)
            T_FAIL("concurrent read of record %d: %s", i, stoker_dataset_errmsg(a->ds));
        const char *key = stoker_dataset_record_key(a->ds, i);
        if ((key == NULL) != (a->r[i].key == NULL) || (key && strcmp(key, a->r[i].key) != 0))
            T_FAIL("concurrent key of record %d", i);
    }
    free(buf);
    return NULL;
}

static void check_concurrent(const char *path, const rec *r, int n)
{
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    pthread_t t[4];
    reader_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (reader_arg){ds, r, n, i * n / 4};
        T_ASSERT(pthread_create(&t[i], NULL, reader, &a[i]) == 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    stoker_dataset_close(ds);
}

/* The O_DIRECT descriptor: the same one on every call, and the same file; or refused by
 * the file system with an errno. */
static void check_direct(stoker_dataset *ds, const rec *r, int n)
{
    const int fd = stoker__dataset_direct_fd(ds, 1);
    T_EQ_INT(stoker__dataset_direct_fd(ds, 1), fd);
    if (fd < 0) {
        T_ASSERT(fd > -4096);
        return;
    }
    T_ASSERT(fcntl(fd, F_GETFL) & O_DIRECT);
    for (int64_t id = 0; id < n; id++) {
        stoker__recloc loc;
        T_OK(stoker__dataset_locate(ds, id, &loc));
        if (loc.shard != 1 || loc.length == 0)
            continue;
        const size_t len = (size_t)(loc.length + 4095) / 4096 * 4096;
        void *buf = NULL;
        T_ASSERT(posix_memalign(&buf, 4096, len) == 0);
        T_EQ_INT(pread(fd, buf, len, (off_t)loc.offset), len);
        T_ASSERT(memcmp(buf, r[id].data, loc.length) == 0);
        free(buf);
        return;
    }
}

static void check_set(const char *path, const rec *r, int n, uint32_t align)
{
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    T_EQ_STR(stoker_dataset_errmsg(ds), "");
    T_EQ_INT(stoker_dataset_num_records(ds), n);
    T_EQ_INT(stoker_dataset_format_version(ds), STOKER_FORMAT_VERSION);
    T_EQ_INT(stoker__dataset_align(ds), align);
    T_EQ_STR(stoker__dataset_path(ds), path);
    T_EQ_INT(stoker_dataset_num_classes(ds), sizeof CLASSES / sizeof CLASSES[0]);
    for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0]; i++)
        T_EQ_STR(stoker_dataset_class_name(ds, (int32_t)i), CLASSES[i]);
    T_ASSERT(stoker_dataset_class_name(ds, -1) == NULL);
    T_ASSERT(stoker_dataset_class_name(ds, 4) == NULL);
    int32_t kind = 0, dtype = -1, ndim = -1;
    int64_t shape[STOKER_MAX_DIMS];
    T_OK(stoker_dataset_field(ds, &kind, &dtype, &ndim, shape));
    T_EQ_INT(kind, STOKER_FIELD_JPEG);
    T_EQ_INT(ndim, 0);
    uint64_t bytes = 0, max = 0;
    for (int i = 0; i < n; i++) {
        bytes += r[i].size;
        max = r[i].size > max ? r[i].size : max;
    }
    T_EQ_INT(stoker_dataset_payload_bytes(ds), bytes);
    T_EQ_INT(stoker__dataset_max_record(ds), max);
    T_ASSERT(stoker_dataset_num_shards(ds) > 2);
    T_CONTAINS(stoker__dataset_shard_path(ds, 1), "/shard-00001.stk");
    const size_t cap = (size_t)max + 1;
    uint8_t *buf = malloc(cap);
    for (int i = n - 1; i >= 0; i--) /* backwards: keys decode lazily on any first id */
        check_record(ds, &r[i], i, align, buf, cap);
    /* out of range, a buffer too small */
    T_EQ_RC(stoker_dataset_record_info(ds, n, NULL, NULL, NULL), STOKER_E_INVALID);
    T_EQ_RC(stoker_dataset_record_info(ds, -1, NULL, NULL, NULL), STOKER_E_INVALID);
    stoker__recloc loc;
    T_EQ_RC(stoker__dataset_locate(ds, n, &loc), STOKER_E_INVALID);
    T_EQ_RC(stoker_dataset_read(ds, n, buf, cap, NULL), STOKER_E_INVALID);
    T_ASSERT(stoker_dataset_record_key(ds, n) == NULL);
    for (int i = 0; i < n; i++) {
        if (r[i].size < 2)
            continue;
        size_t need = 0;
        T_EQ_RC(stoker_dataset_read(ds, i, buf, r[i].size - 1, &need), STOKER_E_LIMIT);
        T_EQ_INT(need, r[i].size);
        T_CONTAINS(stoker_dataset_errmsg(ds), "shard-");
        break;
    }
    free(buf);
    if (align == 4096)
        check_direct(ds, r, n);
    stoker_dataset_close(ds);
    check_concurrent(path, r, n);
}

/* Every file of two data sets, byte for byte. */
static void same_bytes(const char *a, const char *b)
{
    DIR *d = opendir(a);
    T_ASSERT(d);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char pa[4400], pb[4400];
        snprintf(pa, sizeof pa, "%s/%s", a, e->d_name);
        snprintf(pb, sizeof pb, "%s/%s", b, e->d_name);
        size_t na = 0, nb = 0;
        void *da = t_read_file(pa, &na), *db = t_read_file(pb, &nb);
        T_ASSERT(da && db);
        T_EQ_INT(na, nb);
        if (memcmp(da, db, na) != 0)
            T_FAIL("%s and %s differ", pa, pb);
        free(da);
        free(db);
        files++;
    }
    closedir(d);
    T_ASSERT(files >= 3);
}

static void test_alignments(const char *tmp)
{
    rec *r = make_records(NREC, 42, 0);
    const int64_t aligns[] = {1, 512, 4096};
    for (int a = 0; a < 3; a++) {
        char p1[4096], p2[4096];
        snprintf(p1, sizeof p1, "%s/a%lld", tmp, (long long)aligns[a]);
        snprintf(p2, sizeof p2, "%s/b%lld", tmp, (long long)aligns[a]);
        write_set(p1, r, NREC, aligns[a], 256 * 1024);
        write_set(p2, r, NREC, aligns[a], 256 * 1024);
        check_set(p1, r, NREC, (uint32_t)aligns[a]);
        same_bytes(p1, p2);
        /* the manifest's own path opens the same data set */
        char mp[4200];
        snprintf(mp, sizeof mp, "%s/manifest.stk", p1);
        stoker_dataset *ds = NULL;
        T_OK(stoker_dataset_open(&ds, mp, NULL));
        T_EQ_INT(stoker_dataset_num_records(ds), NREC);
        int k = 0;
        while (!r[k].key)
            k++;
        T_EQ_STR(stoker_dataset_record_key(ds, k), r[k].key);
        stoker_dataset_close(ds);
        T_EQ_RC(stoker_dataset_verify(p1, NULL, NULL, NULL, NULL), 0);
    }
    free_records(r, NREC);
}

/* A record larger than the staging buffer (written through) and than the shard size. */
static void test_big(const char *tmp)
{
    rec *r = make_records(9, 7, (9u << 20) + 3);
    char p[4096];
    snprintf(p, sizeof p, "%s/big", tmp);
    write_set(p, r, 9, 4096, 1 << 20);
    check_set(p, r, 9, 4096);
    int64_t problems = -1;
    T_EQ_RC(stoker_dataset_verify(p, NULL, NULL, NULL, &problems), 0);
    T_EQ_INT(problems, 0);
    free_records(r, 9);
}

static void test_raw(const char *tmp)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/raw", tmp);
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, p, NULL));
    const int64_t shape[3] = {3, 4, 2};
    T_EQ_RC(stoker_writer_set_field(w, STOKER_FIELD_RAW, 99, 3, shape), STOKER_E_INVALID);
    T_OK(stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_FLOAT32, 3, shape));
    float v[24];
    for (int i = 0; i < 100; i++) {
        for (int j = 0; j < 24; j++)
            v[j] = (float)(i * 24 + j);
        T_OK(stoker_writer_add(w, v, sizeof v, i % 10, NULL));
    }
    /* a wrong size is refused with a message and leaves the writer usable */
    T_EQ_RC(stoker_writer_add(w, v, sizeof v - 4, 0, NULL), STOKER_E_INVALID);
    T_CONTAINS(stoker_writer_errmsg(w), "96 bytes");
    T_EQ_RC(stoker_writer_set_field(w, STOKER_FIELD_BYTES, 0, 0, NULL), STOKER_E_STATE);
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, p, NULL));
    int32_t kind = 0, dtype = 0, ndim = 0;
    int64_t sh[STOKER_MAX_DIMS];
    T_OK(stoker_dataset_field(ds, &kind, &dtype, &ndim, sh));
    T_EQ_INT(kind, STOKER_FIELD_RAW);
    T_EQ_INT(dtype, STOKER_DTYPE_FLOAT32);
    T_EQ_INT(ndim, 3);
    T_EQ_INT(sh[0] * 100 + sh[1] * 10 + sh[2], 342);
    T_EQ_INT(stoker_dataset_num_records(ds), 100);
    T_EQ_INT(stoker_dataset_num_shards(ds), 1);
    T_EQ_INT(stoker_dataset_num_classes(ds), 0);
    T_ASSERT(stoker_dataset_record_key(ds, 5) == NULL);
    float got[24];
    size_t n = 0;
    T_OK(stoker_dataset_read(ds, 57, got, sizeof got, &n));
    T_EQ_INT(n, 96);
    T_EQ_INT((int)got[23], 57 * 24 + 23);
    int64_t label = 0;
    T_OK(stoker_dataset_record_info(ds, 57, NULL, &label, NULL));
    T_EQ_INT(label, 7);
    stoker_dataset_close(ds);
}

/* A JPEG data set of three records (their bytes are not decoded here), written with
 * STOKER_OPT_JPEG_CHECKED = `checked`; returns the manifest's text (free it). */
static char *write_jpeg_set(const char *p, int checked)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_JPEG_CHECKED, checked));
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, p, cfg));
    stoker_config_destroy(cfg);
    const uint8_t soi[4] = {0xFF, 0xD8, 0xFF, 0xD9};
    if (checked) { /* the mark is for JPEG records: before the field is set, or for another
                    * field, a record is refused and the writer stays usable */
        T_EQ_RC(stoker_writer_add(w, soi, sizeof soi, 0, NULL), STOKER_E_INVALID);
        T_CONTAINS(stoker_writer_errmsg(w), "STOKER_OPT_JPEG_CHECKED");
        T_EQ_RC(stoker_writer_set_field(w, STOKER_FIELD_BYTES, 0, 0, NULL), STOKER_E_INVALID);
    }
    T_OK(stoker_writer_set_field(w, STOKER_FIELD_JPEG, 0, 0, NULL));
    for (int i = 0; i < 3; i++)
        T_OK(stoker_writer_add(w, soi, sizeof soi, i, NULL));
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.stk", p);
    size_t n = 0;
    char *text = t_read_file(mp, &n);
    T_ASSERT(text && n > 0);
    text[n - 1] = '\0';
    return text;
}

/* Version 2 only where the JPEGs were checked, so that readers of version 1 still read
 * every other data set; the reader says which. */
static void test_jpeg_checked(const char *tmp)
{
    for (int checked = 0; checked < 2; checked++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/jpeg%d", tmp, checked);
        char *text = write_jpeg_set(p, checked);
        const char *head = checked ? "stoker-manifest 2\nalign 4096\nfield jpeg\nchecked jpeg\n"
                                     "records 3\n"
                                   : "stoker-manifest 1\nalign 4096\nfield jpeg\nrecords 3\n";
        T_ASSERT(strncmp(text, head, strlen(head)) == 0);
        T_ASSERT(!strstr(text + 20, "checked") == !checked);
        free(text);
        stoker_dataset *ds = NULL;
        T_OK(stoker_dataset_open(&ds, p, NULL));
        T_EQ_INT(stoker_dataset_format_version(ds), checked ? 2 : 1);
        T_EQ_INT(stoker_dataset_jpeg_checked(ds), checked);
        T_EQ_INT(stoker_dataset_num_records(ds), 3);
        stoker_dataset_close(ds);
        T_EQ_RC(stoker_dataset_verify(p, NULL, NULL, NULL, NULL), 0);
    }
}

int main(void)
{
    char *tmp = t_mkdtemp("format-roundtrip");
    test_jpeg_checked(tmp);
    test_alignments(tmp);
    test_big(tmp);
    test_raw(tmp);
    t_rmrf(tmp);
    free(tmp);
    printf("format round trip ok\n");
    return 0;
}
