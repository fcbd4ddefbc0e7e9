/* SPDX-License-Identifier: Apache-2.0 */
/* Damaged and hostile data sets: a flipped byte in a payload, an index, a footer and the
 * manifest; truncated and missing shards; manifests naming files outside the data set;
 * index entries crafted past the end, overlapping, misaligned or huge, with their CRCs fixed
 * up so that the structural checks themselves are exercised. Every case must fail with the
 * right code and a message naming the shard (and record), and verify must report it. */
#include "format/format.h"
#include "source/dataset.h"
#include "testutil.h"

static char *g_tmp;
static char g_base[4096];
static int g_case;
static const char *g_shard_name; /* the reported shard's file name when not shard-NNNNN.stk */

#define NREC 40

/* The base data set: align 512, several shards, keys and classes. */
static void make_base(void)
{
    snprintf(g_base, sizeof g_base, "%s/base", g_tmp);
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_ALIGN, 512));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_SHARD_SIZE, 12000));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0));
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, g_base, cfg));
    T_OK(stoker_writer_add_class(w, "a"));
    uint8_t buf[700];
    uint64_t s = 3;
    for (int i = 0; i < NREC; i++) {
        const size_t n = 100 + (size_t)(t_rand(&s) % 600);
        for (size_t j = 0; j < n; j++)
            buf[j] = (uint8_t)t_rand(&s);
        char key[32];
        snprintf(key, sizeof key, "dir/%d.jpg", i);
        T_OK(stoker_writer_add(w, buf, n, i % 3, key));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);
}

/* A fresh copy of the base data set. */
static char *copy_base(void)
{
    static char p[4200];
    snprintf(p, sizeof p, "%s/case%d", g_tmp, ++g_case);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", g_base, p);
    T_ASSERT(system(cmd) == 0);
    return p;
}

static char *file_in(const char *dir, const char *name)
{
    static char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void flip_byte(const char *path, uint64_t off)
{
    size_t n = 0;
    uint8_t *d = t_read_file(path, &n);
    T_ASSERT(d && off < n);
    d[off] ^= 0x40;
    t_write_file(path, d, n);
    free(d);
}

/* Replaces `from` by `to` in the manifest and recomputes its final CRC line, as a hostile
 * writer would. */
static void edit_manifest(const char *dir, const char *from, const char *to)
{
    const char *p = file_in(dir, "manifest.stk");
    size_t n = 0;
    char *d = t_read_file(p, &n);
    T_ASSERT(d && n > 16);
    d[n - 16] = '\0';
    char *at = strstr(d, from);
    if (!at)
        T_FAIL("manifest has no \"%s\"", from);
    const size_t cap = n + strlen(to) + 16;
    char *o = malloc(cap);
    int len = snprintf(o, cap, "%.*s%s%s", (int)(at - d), d, to, at + strlen(from));
    len += snprintf(o + len, cap - (size_t)len, "crc32c %08x\n", stoker_crc32c(0, o, (size_t)len));
    t_write_file(p, o, (size_t)len);
    free(o);
    free(d);
}

/* Rewrites index entry `r` of a shard field by field, then fixes the index and footer CRCs
 * (but not the manifest's whole-file CRC, which only verify reads). */
static void edit_entry(const char *shard, uint64_t r, int field, uint64_t value)
{
    size_t n = 0;
    uint8_t *d = t_read_file(shard, &n);
    uint8_t *f = d + n - STK_FOOTER_SIZE;
    const uint64_t index_off = stoker__get_u64(f + STK_F_INDEX_OFF);
    const uint64_t count = stoker__get_u64(f + STK_F_COUNT);
    T_ASSERT(r < count);
    uint8_t *e = d + index_off + r * STK_ENTRY_SIZE;
    if (field == STK_E_CRC || field == STK_E_FLAGS)
        stoker__put_u32(e + field, (uint32_t)value);
    else
        stoker__put_u64(e + field, value);
    stoker__put_u32(f + STK_F_INDEX_CRC, stoker_crc32c(0, d + index_off, count * STK_ENTRY_SIZE));
    stoker__put_u32(f + STK_F_CRC, stoker_crc32c(0, f, STK_F_CRC));
    t_write_file(shard, d, n);
    free(d);
}

static uint64_t entry_field(const char *shard, uint64_t r, int field)
{
    size_t n = 0;
    uint8_t *d = t_read_file(shard, &n);
    const uint8_t *f = d + n - STK_FOOTER_SIZE;
    const uint64_t v =
        stoker__get_u64(d + stoker__get_u64(f + STK_F_INDEX_OFF) + r * STK_ENTRY_SIZE + field);
    free(d);
    return v;
}

/* Opening fails with `code` and a message containing each of the given strings. */
static void open_fails(const char *dir, int code, const char *m1, const char *m2)
{
    stoker_dataset *ds = NULL;
    T_EQ_RC(stoker_dataset_open(&ds, dir, NULL), code);
    T_CONTAINS(stoker_dataset_errmsg(ds), m1);
    if (m2)
        T_CONTAINS(stoker_dataset_errmsg(ds), m2);
    stoker_dataset_close(ds);
}

typedef struct found {
    int n;
    int shard_hit, record_hit;
    int32_t want_shard;
    int64_t want_record;
    char last[STOKER_ERRMSG_CAP];
} found;

static void on_problem(void *user, int32_t shard, int64_t record, int32_t code, const char *msg)
{
    found *f = user;
    T_ASSERT(code < 0);
    T_ASSERT(msg && *msg);
    f->n++;
    snprintf(f->last, sizeof f->last, "%s", msg);
    if (shard >= 0 && shard == f->want_shard) {
        f->shard_hit++;
        char name[32];
        snprintf(name, sizeof name, "shard-%05d.stk", shard);
        T_CONTAINS(msg, g_shard_name ? g_shard_name : name);
    }
    if (record >= 0 && record == f->want_record)
        f->record_hit++;
}

/* verify reports at least one problem on `shard` (and on `record` when >= 0). */
static void verify_reports(const char *dir, int32_t shard, int64_t record)
{
    found f = {0, 0, 0, shard, record, ""};
    int64_t problems = -1;
    const int rc = stoker_dataset_verify(dir, NULL, on_problem, &f, &problems);
    T_ASSERT(rc < 0);
    T_EQ_INT(problems, f.n);
    T_ASSERT(f.n >= 1);
    if (shard >= 0)
        T_ASSERT(f.shard_hit >= 1);
    if (record >= 0)
        T_ASSERT(f.record_hit == 1);
}

static void test_payload_flip(void)
{
    const char *dir = copy_base();
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, dir, NULL));
    const int64_t id = NREC - 3;
    stoker__recloc loc;
    T_OK(stoker__dataset_locate(ds, id, &loc));
    T_ASSERT(loc.shard > 0);
    char shard[4400], name[32], rec[64];
    snprintf(shard, sizeof shard, "%s", stoker__dataset_shard_path(ds, loc.shard));
    snprintf(name, sizeof name, "shard-%05d.stk", loc.shard);
    flip_byte(shard, loc.offset + loc.length / 2);
    uint8_t buf[1024];
    size_t n = 0;
    T_EQ_RC(stoker_dataset_read(ds, id, buf, sizeof buf, &n), STOKER_E_CORRUPT);
    T_CONTAINS(stoker_dataset_errmsg(ds), name);
    T_CONTAINS(stoker_dataset_errmsg(ds), dir);
    snprintf(rec, sizeof rec, "record %lld (shard record", (long long)id);
    T_CONTAINS(stoker_dataset_errmsg(ds), rec);
    T_CONTAINS(stoker_dataset_errmsg(ds), "CRC32C mismatch");
    T_OK(stoker_dataset_read(ds, id - 1, buf, sizeof buf, &n)); /* the others are intact */
    T_OK(stoker_dataset_read(ds, 0, buf, sizeof buf, &n));
    stoker_dataset_close(ds);
    verify_reports(dir, loc.shard, id);
}

static void test_index_footer_header_flip(void)
{
    const char *dir = copy_base();
    const char *s1 = file_in(dir, "shard-00001.stk");
    size_t n = 0;
    uint8_t *d = t_read_file(s1, &n);
    const uint64_t index_off = stoker__get_u64(d + n - STK_FOOTER_SIZE + STK_F_INDEX_OFF);
    free(d);
    flip_byte(s1, index_off + STK_ENTRY_SIZE + STK_E_LENGTH);
    open_fails(dir, STOKER_E_CORRUPT, "shard-00001.stk", "index CRC32C mismatch");
    verify_reports(dir, 1, -1);

    dir = copy_base();
    d = t_read_file(file_in(dir, "shard-00002.stk"), &n);
    free(d);
    flip_byte(file_in(dir, "shard-00002.stk"), n - STK_FOOTER_SIZE + STK_F_COUNT);
    open_fails(dir, STOKER_E_CORRUPT, "shard-00002.stk", "footer CRC32C mismatch");
    verify_reports(dir, 2, -1);

    dir = copy_base();
    flip_byte(file_in(dir, "shard-00000.stk"), STK_H_ALIGN);
    open_fails(dir, STOKER_E_CORRUPT, "shard-00000.stk", "header CRC32C mismatch");
    dir = copy_base();
    flip_byte(file_in(dir, "shard-00000.stk"), 0);
    open_fails(dir, STOKER_E_FORMAT, "shard-00000.stk", "magic");
}

static void test_manifest_flip(void)
{
    const char *dir = copy_base();
    const char *m = file_in(dir, "manifest.stk");
    size_t n = 0;
    char *d = t_read_file(m, &n);
    const uint64_t at = (uint64_t)(strstr(d, "dir/7.jpg") - d);
    free(d);
    flip_byte(m, at + 4);
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "CRC32C mismatch");
    verify_reports(dir, -1, -1);
    /* the final line cut off */
    dir = copy_base();
    m = file_in(dir, "manifest.stk");
    d = t_read_file(m, &n);
    t_write_file(m, d, n - 5);
    free(d);
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "crc32c");
}

static void test_truncated_and_missing(void)
{
    const char *dir = copy_base();
    const char *s = file_in(dir, "shard-00001.stk");
    T_ASSERT(truncate(s, 5000) == 0);
    open_fails(dir, STOKER_E_CORRUPT, "shard-00001.stk", "truncated");
    verify_reports(dir, 1, -1);
    /* truncated, and the manifest made to agree: the footer catches it */
    char from[128], to[128];
    dir = copy_base();
    s = file_in(dir, "shard-00001.stk");
    struct stat st;
    T_ASSERT(stat(s, &st) == 0);
    T_ASSERT(truncate(s, st.st_size - 10) == 0);
    snprintf(from, sizeof from, " %lld ", (long long)st.st_size);
    snprintf(to, sizeof to, " %lld ", (long long)st.st_size - 10);
    edit_manifest(dir, from, to);
    open_fails(dir, STOKER_E_CORRUPT, "shard-00001.stk", "footer");

    /* a FIFO in place of a shard must fail, not hang */
    dir = copy_base();
    T_ASSERT(unlink(file_in(dir, "shard-00001.stk")) == 0);
    T_ASSERT(mkfifo(file_in(dir, "shard-00001.stk"), 0644) == 0);
    open_fails(dir, STOKER_E_CORRUPT, "shard-00001.stk", "not a regular file");
    verify_reports(dir, 1, -1);

    dir = copy_base();
    T_ASSERT(unlink(file_in(dir, "shard-00002.stk")) == 0);
    open_fails(dir, -ENOENT, "shard-00002.stk", "missing");
    verify_reports(dir, 2, -1);
}

static void test_hostile_names(void)
{
    const char *dir = copy_base();
    edit_manifest(dir, "shard shard-00000.stk", "shard ../x");
    open_fails(dir, STOKER_E_CORRUPT, "../x", "not a plain file name");
    dir = copy_base();
    edit_manifest(dir, "shard shard-00000.stk", "shard /etc/passwd");
    open_fails(dir, STOKER_E_CORRUPT, "/etc/passwd", "not a plain file name");
    dir = copy_base();
    edit_manifest(dir, "shard shard-00000.stk", "shard ..");
    open_fails(dir, STOKER_E_CORRUPT, "\"..\"", "not a plain file name");
    /* a symbolic link inside the directory that leads out of it */
    dir = copy_base();
    char target[4400];
    snprintf(target, sizeof target, "%s/base/shard-00000.stk", g_tmp);
    T_ASSERT(symlink(target, file_in(dir, "evil.stk")) == 0);
    edit_manifest(dir, "shard shard-00000.stk", "shard evil.stk");
    open_fails(dir, STOKER_E_CORRUPT, "evil.stk", "symbolic link");
    g_shard_name = "evil.stk";
    verify_reports(dir, 0, -1);
    g_shard_name = NULL;
    /* the manifest itself as a symbolic link is refused too */
    dir = copy_base();
    T_ASSERT(unlink(file_in(dir, "manifest.stk")) == 0);
    snprintf(target, sizeof target, "%s/base/manifest.stk", g_tmp);
    T_ASSERT(symlink(target, file_in(dir, "manifest.stk")) == 0);
    stoker_dataset *ds = NULL;
    T_EQ_RC(stoker_dataset_open(&ds, dir, NULL), -ELOOP);
    stoker_dataset_close(ds);
}

static void test_manifest_structure(void)
{
    const char *dir = copy_base();
    edit_manifest(dir, "records 40", "records 41");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "do not add up");
    dir = copy_base();
    edit_manifest(dir, "stoker-manifest 1", "stoker-manifest 4");
    open_fails(dir, STOKER_E_FORMAT, "manifest.stk", "manifest version 4 is not supported");
    dir = copy_base(); /* version 3 declares its fields */
    edit_manifest(dir, "stoker-manifest 1", "stoker-manifest 3");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "line 3: expected \"fields N\"");
    dir = copy_base(); /* version 2 holds a "checked jpeg" line after the field */
    edit_manifest(dir, "stoker-manifest 1", "stoker-manifest 2");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "line 4: expected \"checked jpeg\"");
    dir = copy_base();
    edit_manifest(dir, "stoker-manifest 1", "stoker-manifest 2");
    edit_manifest(dir, "field bytes\n", "field bytes\nchecked jpeg\n");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "without a jpeg field");
    dir = copy_base(); /* and version 1 none */
    edit_manifest(dir, "field bytes\n", "field jpeg\nchecked jpeg\n");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "line 4: expected \"records");
    dir = copy_base();
    edit_manifest(dir, "shards ", "shards 99999999");
    open_fails(dir, STOKER_E_LIMIT, "manifest.stk", "MAX_SHARDS");
    dir = copy_base();
    edit_manifest(dir, "shards ", "shards 9999");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "exceeds the manifest's size");
    dir = copy_base();
    edit_manifest(dir, "classes 1", "classes 123456789012");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "class count");
    dir = copy_base();
    edit_manifest(dir, "+dir/3.jpg", "dir/3.jpg");
    open_fails(dir, STOKER_E_CORRUPT, "manifest.stk", "key line");
    dir = copy_base();
    edit_manifest(dir, "+dir/3.jpg", "+dir/\\q.jpg"); /* a bad escape: only the key fails */
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, dir, NULL));
    T_ASSERT(stoker_dataset_record_key(ds, 3) == NULL);
    T_CONTAINS(stoker_dataset_errmsg(ds), "record 3: malformed key");
    stoker_dataset_close(ds);
    dir = copy_base();
    edit_manifest(dir, "field bytes", "field raw uint8 1 100");
    open_fails(dir, STOKER_E_CORRUPT, "record 0 (shard record 0)", "raw records are 100");
    dir = copy_base();
    edit_manifest(dir, "align 512", "align 4096");
    open_fails(dir, STOKER_E_CORRUPT, "shard-00000.stk", "alignment 512");
}

static void test_crafted_entries(void)
{
    /* shard 1's entry 1; its record id is shard 0's count + 1 */
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, g_base, NULL));
    stoker__recloc loc;
    int64_t id = 0;
    while (stoker__dataset_locate(ds, id, &loc) == 0 && loc.shard == 0)
        id++;
    id++;
    stoker_dataset_close(ds);
    char rec[64];
    snprintf(rec, sizeof rec, "record %lld (shard record 1)", (long long)id);

    const char *dir = copy_base();
    const char *s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_OFFSET, UINT64_C(1) << 40);
    open_fails(dir, STOKER_E_CORRUPT, rec, "past the payload area");
    open_fails(dir, STOKER_E_CORRUPT, "shard-00001.stk", NULL);
    verify_reports(dir, 1, -1);

    dir = copy_base();
    s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_OFFSET, entry_field(s, 0, STK_E_OFFSET));
    open_fails(dir, STOKER_E_CORRUPT, rec, "overlaps");

    dir = copy_base();
    s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_LENGTH, UINT64_MAX - 100);
    open_fails(dir, STOKER_E_LIMIT, rec, "MAX_RECORD_SIZE");

    dir = copy_base();
    s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_LENGTH, (UINT64_C(1) << 30) - 1);
    open_fails(dir, STOKER_E_CORRUPT, rec, "past the payload area");

    dir = copy_base();
    s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_OFFSET, entry_field(s, 1, STK_E_OFFSET) + 8);
    open_fails(dir, STOKER_E_CORRUPT, rec, "not aligned");

    dir = copy_base();
    s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_FLAGS, 1);
    open_fails(dir, STOKER_E_CORRUPT, rec, "flags");

    dir = copy_base(); /* the index alone cannot tell: the payload CRC must */
    s = file_in(dir, "shard-00001.stk");
    edit_entry(s, 1, STK_E_LABEL, 99);
    edit_entry(s, 1, STK_E_CRC, 0x12345678);
    T_OK(stoker_dataset_open(&ds, dir, NULL));
    uint8_t buf[1024];
    T_EQ_RC(stoker_dataset_read(ds, id, buf, sizeof buf, NULL), STOKER_E_CORRUPT);
    T_CONTAINS(stoker_dataset_errmsg(ds), "stored 12345678");
    T_CONTAINS(stoker_dataset_errmsg(ds), rec);
    stoker_dataset_close(ds);
    verify_reports(dir, 1, id);
}

typedef struct tally {
    int shard_level[8];
    int64_t records[8];
    int nrecords;
} tally;

static void on_tally(void *user, int32_t shard, int64_t record, int32_t code, const char *msg)
{
    tally *t = user;
    (void)code, (void)msg;
    T_ASSERT(shard >= 0 && shard < 8);
    if (record < 0)
        t->shard_level[shard]++;
    else if (t->nrecords < 8)
        t->records[t->nrecords++] = record;
}

/* verify goes on past each problem: two damaged records in two shards and a missing shard
 * are all reported, each once. */
static void test_verify_continues(void)
{
    const char *dir = copy_base();
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, dir, NULL));
    const int32_t nshards = stoker_dataset_num_shards(ds);
    T_ASSERT(nshards >= 4 && nshards <= 8);
    stoker__recloc a, b;
    T_OK(stoker__dataset_locate(ds, 0, &a));
    T_OK(stoker__dataset_locate(ds, NREC - 1, &b));
    char pa[4400], pb[4400];
    snprintf(pa, sizeof pa, "%s", stoker__dataset_shard_path(ds, a.shard));
    snprintf(pb, sizeof pb, "%s", stoker__dataset_shard_path(ds, b.shard));
    stoker_dataset_close(ds);
    T_ASSERT(a.shard == 0 && b.shard == nshards - 1);
    flip_byte(pa, a.offset);
    flip_byte(pb, b.offset + b.length - 1);
    T_ASSERT(unlink(file_in(dir, "shard-00001.stk")) == 0);
    tally t = {{0}, {0}, 0};
    int64_t problems = 0;
    T_EQ_RC(stoker_dataset_verify(dir, NULL, on_tally, &t, &problems), STOKER_E_CORRUPT);
    /* shard 0: whole-file CRC and record 0; shard 1: missing; last: whole-file and record */
    T_EQ_INT(problems, 5);
    T_EQ_INT(t.shard_level[0], 1);
    T_EQ_INT(t.shard_level[1], 1);
    T_EQ_INT(t.shard_level[nshards - 1], 1);
    T_EQ_INT(t.nrecords, 2);
    T_EQ_INT(t.records[0], 0);
    T_EQ_INT(t.records[1], NREC - 1);
}

int main(void)
{
    g_tmp = t_mkdtemp("format-corrupt");
    make_base();
    T_EQ_RC(stoker_dataset_verify(g_base, NULL, NULL, NULL, NULL), 0);
    test_payload_flip();
    test_index_footer_header_flip();
    test_manifest_flip();
    test_truncated_and_missing();
    test_hostile_names();
    test_manifest_structure();
    test_crafted_entries();
    test_verify_continues();
    t_rmrf(g_tmp);
    free(g_tmp);
    printf("format corruption ok (%d cases)\n", g_case);
    return 0;
}
