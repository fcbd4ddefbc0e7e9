/* SPDX-License-Identifier: Apache-2.0 */
/* Writer and open error paths: existing outputs (with and without overwrite), cancel and
 * destroy of unfinished writers (the previous output untouched, no temporary left behind),
 * STOKER_E_EMPTY, invalid arguments, limits, and a failed allocation at every point of
 * writing and of opening (a clean error or success, never a crash or a leak). */
#include "common/common.h"
#include "testutil.h"

#include <dirent.h>

static char *g_tmp;

static char *pathf(const char *name)
{
    static char buf[4][4096];
    static int n;
    char *p = buf[n++ % 4];
    snprintf(p, 4096, "%s/%s", g_tmp, name);
    return p;
}

/* Entries of the test directory whose name starts with '.': leftover temporaries. */
static int hidden_entries(void)
{
    DIR *d = opendir(g_tmp);
    T_ASSERT(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static stoker_config *cfg_with(int overwrite)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_OVERWRITE, overwrite));
    return cfg;
}

static void write_n(const char *path, int n, int overwrite)
{
    stoker_config *cfg = cfg_with(overwrite);
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, path, cfg));
    for (int i = 0; i < n; i++)
        T_OK(stoker_writer_add(w, &i, sizeof i, i, NULL));
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);
}

static int64_t count_records(const char *path)
{
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    const int64_t n = stoker_dataset_num_records(ds);
    stoker_dataset_close(ds);
    return n;
}

static void test_exists_and_overwrite(void)
{
    const char *p = pathf("set");
    write_n(p, 3, 0);
    stoker_writer *w = NULL;
    T_EQ_RC(stoker_writer_create(&w, p, NULL), STOKER_E_EXISTS);
    T_CONTAINS(stoker_writer_errmsg(w), p);
    stoker_writer_destroy(w);
    T_EQ_INT(count_records(p), 3);
    write_n(p, 5, 1);
    T_EQ_INT(count_records(p), 5);
    /* a trailing slash names the same output */
    char slashed[4200];
    snprintf(slashed, sizeof slashed, "%s/", p);
    write_n(slashed, 6, 1);
    T_EQ_INT(count_records(p), 6);
    /* a plain file in the way is not a data set: refused, and kept */
    const char *f = pathf("file");
    t_write_file(f, "x", 1);
    stoker_config *cfg = cfg_with(1);
    T_EQ_RC(stoker_writer_create(&w, f, cfg), STOKER_E_EXISTS);
    T_CONTAINS(stoker_writer_errmsg(w), "not a stoker data set");
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);
    size_t n = 0;
    free(t_read_file(f, &n));
    T_EQ_INT(n, 1);
    T_EQ_INT(hidden_entries(), 0);
}

/* The output appears between create and finish: finish refuses to replace it. */
static void test_exists_at_finish(void)
{
    const char *p = pathf("late");
    stoker_config *cfg = cfg_with(0);
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, p, cfg));
    T_OK(stoker_writer_add(w, "abc", 3, 1, "k"));
    T_ASSERT(mkdir(p, 0755) == 0);
    T_EQ_RC(stoker_writer_finish(w), STOKER_E_EXISTS);
    T_EQ_RC(stoker_writer_add(w, "abc", 3, 1, "k"), STOKER_E_STATE);
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);
    char m[4200];
    snprintf(m, sizeof m, "%s/manifest.stk", p);
    T_ASSERT(!t_exists(m));
    T_EQ_INT(hidden_entries(), 0);
}

static void test_cancel_and_destroy(void)
{
    const char *p = pathf("keep");
    write_n(p, 3, 0);
    stoker_config *cfg = cfg_with(1);
    for (int mode = 0; mode < 3; mode++) {
        stoker_writer *w = NULL;
        T_OK(stoker_writer_create(&w, p, cfg));
        T_EQ_INT(hidden_entries(), 1); /* the temporary directory */
        for (int i = 0; i < 50; i++)
            T_OK(stoker_writer_add(w, &i, sizeof i, i, "key"));
        if (mode == 0) {
            stoker_writer_cancel(w);
            T_EQ_RC(stoker_writer_add(w, "x", 1, 0, NULL), STOKER_E_CANCELED);
            T_EQ_RC(stoker_writer_finish(w), STOKER_E_CANCELED);
        } else if (mode == 1) {
            stoker_writer_cancel(w);
            T_EQ_RC(stoker_writer_finish(w), STOKER_E_CANCELED);
            T_CONTAINS(stoker_writer_errmsg(w), "canceled");
        }
        stoker_writer_destroy(w);
        T_EQ_INT(count_records(p), 3);
        T_EQ_INT(hidden_entries(), 0);
    }
    stoker_writer_cancel(NULL);
    stoker_writer_destroy(NULL);
    stoker_config_destroy(cfg);
}

static void test_empty_and_invalid(void)
{
    const char *p = pathf("empty");
    stoker_writer *w = NULL;
    T_EQ_RC(stoker_writer_create(&w, NULL, NULL), STOKER_E_INVALID);
    T_ASSERT(w != NULL);
    stoker_writer_destroy(w);
    T_EQ_RC(stoker_writer_create(&w, "..", NULL), STOKER_E_INVALID);
    stoker_writer_destroy(w);
    T_EQ_RC(stoker_writer_create(NULL, p, NULL), STOKER_E_INVALID);

    stoker_config *cfg = cfg_with(0);
    T_EQ_RC(stoker_config_set_int(cfg, STOKER_OPT_ALIGN, 100), STOKER_E_INVALID);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_MAX_RECORD_SIZE, 10));
    T_OK(stoker_writer_create(&w, p, cfg));
    T_EQ_RC(stoker_writer_finish(w), STOKER_E_EMPTY);
    T_ASSERT(!t_exists(p));
    T_EQ_RC(stoker_writer_add(w, NULL, 5, 0, NULL), STOKER_E_INVALID);
    T_EQ_RC(stoker_writer_add(w, "01234567890", 11, 0, NULL), STOKER_E_LIMIT);
    T_CONTAINS(stoker_writer_errmsg(w), "record 0");
    T_EQ_RC(stoker_writer_set_field(w, (stoker_field_kind)7, 0, 0, NULL), STOKER_E_INVALID);
    const int64_t shape[2] = {4, 4};
    T_EQ_RC(stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 2, shape),
            STOKER_E_LIMIT);
    T_EQ_RC(stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 2, NULL),
            STOKER_E_INVALID);
    T_EQ_RC(stoker_writer_add_class(w, NULL), STOKER_E_INVALID);
    T_EQ_RC(stoker_writer_add(NULL, "x", 1, 0, NULL), STOKER_E_INVALID);
    /* still usable after those refusals */
    T_OK(stoker_writer_add(w, "", 0, 0, NULL));
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);
    T_EQ_INT(count_records(p), 1);
}

/* Relative paths: the output in the working directory, the manifest by a relative name. */
static void test_relative(void)
{
    char cwd[4096];
    T_ASSERT(getcwd(cwd, sizeof cwd) != NULL);
    T_ASSERT(chdir(g_tmp) == 0);
    write_n("rel", 4, 0);
    T_EQ_INT(count_records("rel"), 4);
    T_EQ_INT(count_records("rel/manifest.stk"), 4);
    T_ASSERT(chdir("rel") == 0);
    T_EQ_INT(count_records("manifest.stk"), 4);
    T_ASSERT(chdir(cwd) == 0);
}

static void test_open_errors(void)
{
    stoker_dataset *ds = NULL;
    T_EQ_RC(stoker_dataset_open(&ds, pathf("nothing-here"), NULL), -ENOENT);
    T_CONTAINS(stoker_dataset_errmsg(ds), "nothing-here");
    T_EQ_INT(stoker_dataset_num_records(ds), 0);
    T_ASSERT(stoker_dataset_record_key(ds, 0) == NULL);
    stoker_dataset_close(ds);
    T_EQ_RC(stoker_dataset_open(&ds, g_tmp, NULL), STOKER_E_FORMAT);
    T_CONTAINS(stoker_dataset_errmsg(ds), "not a stoker data set");
    stoker_dataset_close(ds);
    const char *f = pathf("random.bin");
    t_write_file(f, "hello world\n", 12);
    T_EQ_RC(stoker_dataset_open(&ds, f, NULL), STOKER_E_FORMAT);
    stoker_dataset_close(ds);
    t_write_file(f, "\x89HDF\r\n\x1a\n\0\0\0\0", 12);
    /* only an HDF5 signature: not an HDF5 file (HDF5 builds) or HDF5 unsupported */
    T_EQ_RC(stoker_dataset_open(&ds, f, NULL),
            stoker_capability_get(STOKER_CAP_HDF5) ? STOKER_E_FORMAT : STOKER_E_UNSUPPORTED);
    stoker_dataset_close(ds);
    T_EQ_RC(stoker_dataset_open(NULL, f, NULL), STOKER_E_INVALID);
    T_EQ_RC(stoker_dataset_open(&ds, NULL, NULL), STOKER_E_INVALID);
    stoker_dataset_close(ds);
    stoker_dataset_close(NULL);
}

/* Limits of the reading side, each applied to a data set that exceeds it. */
static void test_limits(void)
{
    const char *p = pathf("limits");
    stoker_config *w = cfg_with(0);
    T_OK(stoker_config_set_int(w, STOKER_OPT_SHARD_SIZE, 4400)); /* a few records a shard */
    T_OK(stoker_config_set_int(w, STOKER_OPT_ALIGN, 1));
    stoker_writer *wr = NULL;
    T_OK(stoker_writer_create(&wr, p, w));
    for (int i = 0; i < 40; i++)
        T_OK(stoker_writer_add(wr, "0123456789", (size_t)(i % 11), i, NULL));
    T_OK(stoker_writer_finish(wr));
    stoker_writer_destroy(wr);
    stoker_config_destroy(w);
    const stoker_option opts[3] = {STOKER_OPT_MAX_SHARDS, STOKER_OPT_MAX_RECORDS,
                                   STOKER_OPT_MAX_RECORD_SIZE};
    const char *want[3] = {"MAX_SHARDS", "MAX_RECORDS", "MAX_RECORD_SIZE"};
    for (int i = 0; i < 3; i++) {
        stoker_config *cfg = cfg_with(0);
        T_OK(stoker_config_set_int(cfg, opts[i], i == 2 ? 9 : 1));
        stoker_dataset *ds = NULL;
        T_EQ_RC(stoker_dataset_open(&ds, p, cfg), STOKER_E_LIMIT);
        T_CONTAINS(stoker_dataset_errmsg(ds), want[i]);
        if (i == 2)
            T_CONTAINS(stoker_dataset_errmsg(ds), "record 10 ");
        stoker_dataset_close(ds);
        stoker_config_destroy(cfg);
    }
}

/* One write under allocation failure: a clean error (and no output) or success. */
static int write_once(const char *p, const stoker_config *cfg)
{
    stoker_writer *w = NULL;
    int rc = stoker_writer_create(&w, p, cfg);
    if (rc == 0)
        rc = stoker_writer_add_class(w, "class a");
    for (int i = 0; i < 300 && rc == 0; i++)
        rc = stoker_writer_add(w, "payload bytes", (size_t)(i % 13), i,
                               i % 3 ? "some/key name.jpg" : NULL);
    if (rc == 0)
        rc = stoker_writer_finish(w);
    if (rc != 0) {
        T_ASSERT(w == NULL || stoker_writer_errmsg(w)[0] != '\0');
        T_ASSERT(!t_exists(p));
    }
    stoker_writer_destroy(w);
    return rc;
}

static void test_alloc_failures(void)
{
    const char *p = pathf("alloc");
    stoker_config *cfg = cfg_with(0);
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHARD_SIZE, 8192));
    int rc = -1;
    uint64_t n = 1;
    for (;; n++) {
        stoker__alloc_fail_at(n);
        rc = write_once(p, cfg);
        const uint64_t made = stoker__alloc_fail_at(0);
        if (rc != 0)
            T_EQ_RC(rc, -ENOMEM);
        if (made < n) /* the failure never fired: the write ran through */
            break;
        T_EQ_INT(hidden_entries(), 0);
        if (rc == 0)
            T_FAIL("write succeeded although allocation %llu failed", (unsigned long long)n);
    }
    T_OK(rc);
    T_ASSERT(n > 5);
    printf("write ran through after %llu allocation failures\n", (unsigned long long)(n - 1));
    stoker_config_destroy(cfg);
    for (n = 1;; n++) {
        stoker_dataset *ds = NULL;
        stoker__alloc_fail_at(n);
        rc = stoker_dataset_open(&ds, p, NULL);
        const char *key = rc == 0 ? stoker_dataset_record_key(ds, 1) : NULL;
        const uint64_t made = stoker__alloc_fail_at(0);
        if (rc != 0)
            T_EQ_RC(rc, -ENOMEM);
        else
            T_EQ_INT(stoker_dataset_num_records(ds), 300);
        const bool done = made < n; /* the failure never fired */
        if (done) {
            T_OK(rc);
            T_EQ_STR(key, "some/key name.jpg");
        }
        stoker_dataset_close(ds);
        if (done)
            break;
    }
    T_ASSERT(n > 3);
    printf("open ran through after %llu allocation failures\n", (unsigned long long)(n - 1));
}

int main(void)
{
    g_tmp = t_mkdtemp("format-errors");
    test_exists_and_overwrite();
    test_exists_at_finish();
    test_cancel_and_destroy();
    test_empty_and_invalid();
    test_relative();
    test_open_errors();
    test_limits();
    test_alloc_failures();
    t_rmrf(g_tmp);
    free(g_tmp);
    printf("format errors ok\n");
    return 0;
}
