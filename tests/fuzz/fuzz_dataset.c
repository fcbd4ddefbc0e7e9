/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the shard format's reader: the input becomes a manifest, a shard, or both,
 * in a temporary data set directory, which is then opened, located, read and verified.
 *
 * Input: byte 0 chooses the mode (modulo 5), the rest is the payload.
 *   0: the payload is the manifest; the shard is a fixed valid one (make_fixed).
 *   1: the payload is shard-00000.stk; a manifest matching its size, whole-file CRC, record
 *      count (from its footer) and alignment (from its header) is generated, so that the
 *      shard's own checks are reached rather than the manifest's size check.
 *   2: two bytes of manifest length (little-endian), the manifest, then the shard.
 *   3: as 0, with the manifest's final CRC line appended by the harness, so that mutations
 *      reach the parser behind the checksum.
 *   4: as 1, with the shard's header, footer and index CRCs fixed up first, so that mutations
 *      reach the structural checks behind them. */
#include "common/common.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_dir[4096];
static uint8_t *g_fixed_shard;
static size_t g_fixed_size;

static void put_file(const char *name, const void *p, size_t n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort(); /* the harness itself is broken, not the library */
    if (n && fwrite(p, 1, n, f) != n)
        abort();
    fclose(f);
}

static void *get_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        abort();
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*n + 1);
    if (fread(p, 1, *n, f) != *n)
        abort();
    fclose(f);
    return p;
}

/* A small valid data set (align 1, one shard, keys and classes) in `dir`. */
static void make_fixed(const char *dir)
{
    stoker_config *cfg = NULL;
    stoker_writer *w = NULL;
    if (stoker_config_create(&cfg) != 0)
        abort();
    stoker_config_set_int(cfg, STOKER_OPT_ALIGN, 1);
    stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0);
    stoker_config_set_int(cfg, STOKER_OPT_OVERWRITE, 1);
    if (stoker_writer_create(&w, dir, cfg) != 0)
        abort();
    stoker_writer_add_class(w, "cat");
    stoker_writer_add_class(w, "dog\n");
    stoker_writer_add(w, "hello", 5, 0, "a/b c.jpg");
    stoker_writer_add(w, "", 0, 1, NULL);
    stoker_writer_add(w, "world!!", 7, -5, "ü\\x");
    if (stoker_writer_finish(w) != 0)
        abort();
    stoker_writer_destroy(w);
    stoker_config_destroy(cfg);
}

static void remove_dir(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/manifest.stk", g_dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/shard-00000.stk", g_dir);
    unlink(path);
    rmdir(g_dir);
}

static void setup(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/fuzz-dataset-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir))
        abort();
    char fixed[4200], shard[4300];
    snprintf(fixed, sizeof fixed, "%s.fixed", g_dir);
    make_fixed(fixed);
    snprintf(shard, sizeof shard, "%s/shard-00000.stk", fixed);
    g_fixed_shard = get_file(shard, &g_fixed_size);
    unlink(shard);
    snprintf(shard, sizeof shard, "%s/manifest.stk", fixed);
    unlink(shard);
    rmdir(fixed);
    atexit(remove_dir);
}

/* A manifest that agrees with an arbitrary shard file's size, CRC and footer. */
static void manifest_for(const uint8_t *shard, size_t n)
{
    uint64_t count = 0;
    uint32_t align = 4096;
    if (n >= 64)
        count = stoker__get_u64(shard + n - 64 + 16);
    if (count > 4096)
        count = 0;
    if (n >= 16) {
        const uint32_t a = stoker__get_u32(shard + 12);
        align = a == 1 || a == 512 ? a : 4096;
    }
    char text[512];
    int len = snprintf(text, sizeof text,
                       "stoker-manifest 1\nalign %u\nfield bytes\nrecords %llu\nclasses 0\n"
                       "shards 1\nshard shard-00000.stk %llu %zu %08x\nkeys 0\n",
                       align, (unsigned long long)count, (unsigned long long)count, n,
                       stoker_crc32c(0, shard, n));
    len += snprintf(text + len, sizeof text - (size_t)len, "crc32c %08x\n",
                    stoker_crc32c(0, text, (size_t)len));
    put_file("manifest.stk", text, (size_t)len);
}

/* Recomputes the header, index and footer CRCs of a shard image, where they fit. */
static void fix_shard_crcs(uint8_t *d, size_t n)
{
    if (n >= 64)
        stoker__put_u32(d + 60, stoker_crc32c(0, d, 60));
    if (n < 128)
        return;
    uint8_t *f = d + n - 64;
    const uint64_t off = stoker__get_u64(f + 24), count = stoker__get_u64(f + 16);
    if (count <= n / 32 && off <= n - 64 && count * 32 <= n - 64 - off)
        stoker__put_u32(f + 48, stoker_crc32c(0, d + off, count * 32));
    stoker__put_u32(f + 60, stoker_crc32c(0, f, 60));
}

static void put_sealed_manifest(const uint8_t *data, size_t size)
{
    uint8_t *m = malloc(size + 17);
    memcpy(m, data, size);
    size += (size_t)snprintf((char *)m + size, 17, "crc32c %08x\n", stoker_crc32c(0, data, size));
    put_file("manifest.stk", m, size);
    free(m);
}

static void on_problem(void *user, int32_t shard, int64_t record, int32_t code, const char *msg)
{
    (void)shard, (void)record, (void)code;
    *(size_t *)user += strlen(msg);
}

static void exercise(const stoker_config *cfg)
{
    stoker_dataset *ds = NULL;
    static uint8_t buf[1 << 16];
    if (stoker_dataset_open(&ds, g_dir, cfg) == 0) {
        const int64_t n = stoker_dataset_num_records(ds);
        for (int64_t i = 0; i < n; i++) {
            uint64_t size = 0;
            int64_t label = 0;
            int32_t shard = 0;
            size_t got = 0;
            stoker_dataset_record_info(ds, i, &size, &label, &shard);
            stoker_dataset_read(ds, i, buf, sizeof buf, &got);
            const char *key = stoker_dataset_record_key(ds, i);
            if (key)
                got += strlen(key);
        }
        for (int32_t c = 0; c < stoker_dataset_num_classes(ds); c++)
            if (strlen(stoker_dataset_class_name(ds, c)) > (1u << 30))
                abort();
    }
    stoker_dataset_close(ds);
    size_t total = 0;
    int64_t problems = 0;
    stoker_dataset_verify(g_dir, cfg, on_problem, &total, &problems);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static stoker_config *cfg;
    if (!g_dir[0]) {
        setup();
        if (stoker_config_create(&cfg) != 0)
            abort();
        stoker_config_set_int(cfg, STOKER_OPT_MAX_RECORDS, 4096);
        stoker_config_set_int(cfg, STOKER_OPT_MAX_SHARDS, 16);
        stoker_config_set_int(cfg, STOKER_OPT_MAX_RECORD_SIZE, 1 << 20);
    }
    if (size < 1)
        return 0;
    const uint8_t mode = data[0] % 5;
    data++;
    size--;
    if (mode == 0) {
        put_file("manifest.stk", data, size);
        put_file("shard-00000.stk", g_fixed_shard, g_fixed_size);
    } else if (mode == 1) {
        put_file("shard-00000.stk", data, size);
        manifest_for(data, size);
    } else if (mode == 3) {
        put_sealed_manifest(data, size);
        put_file("shard-00000.stk", g_fixed_shard, g_fixed_size);
    } else if (mode == 4) {
        uint8_t *copy = malloc(size + 1);
        memcpy(copy, data, size);
        fix_shard_crcs(copy, size);
        put_file("shard-00000.stk", copy, size);
        manifest_for(copy, size);
        free(copy);
    } else {
        if (size < 2)
            return 0;
        size_t mlen = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        size -= 2;
        mlen = mlen < size ? mlen : size;
        put_file("manifest.stk", data, mlen);
        put_file("shard-00000.stk", data + mlen, size - mlen);
    }
    exercise(cfg);
    return 0;
}
