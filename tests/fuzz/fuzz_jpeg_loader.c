/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for JPEG data sets under damage, checked and unchecked, through the loader:
 * "a record libjpeg warns about never comes out as a good sample".
 *
 * N JPEGs (baseline 4:2:0, 4:2:2 and 4:4:4, grayscale, progressive; taller than wide, so that
 * eval and train crops often end above their last rows) are made once. The input damages
 * their bytes, mostly inside the entropy-coded data, and picks how they are written and read:
 *   - unchecked: the damaged records are written with the public writer as they are, without
 *     STOKER_OPT_JPEG_CHECKED (as stoker-pack --no-validate packs, as a user writes them);
 *   - checked: as stoker-pack packs by default, a damaged record that libjpeg's full decode
 *     warns about or refuses is not packed (its pristine bytes take its place, so that ids
 *     stay put), the rest are, and the data set is marked checked; then, optionally, one
 *     byte of one record is flipped in its shard after packing (its CRC32C must catch it).
 * What each record must be comes from libjpeg's full decode of its stored bytes
 * (t_jpeg_verdict: every row, then jpeg_finish_decompress) and the image pipeline run on
 * them by hand. The loader then runs two unshuffled epochs (the second one decodes the
 * records of an unchecked data set found clean in the first as a checked one's):
 *   - a delivered position holds its own record only if that record is intact, and then
 *     exactly the pipeline's sample of it for that epoch, and its label; a position whose
 *     record is damaged holds (under SKIP) an intact replacement, its sample and label;
 *   - stats.skipped equals the replaced positions delivered;
 *   - with ERROR, a batch fails (STOKER_E_CORRUPT, naming a damaged record of it) exactly
 *     when one of its records is damaged; with SKIP, only when no intact replacement was
 *     found.
 * Any breach aborts.
 *
 * Input: byte 0 bits 0-1 transform (train, eval, resize, eval decoded at a DCT reduction),
 * bit 2 SKIP, bit 3 checked, bit 4 (checked) flip a byte after packing, bit 5 two threads;
 * byte 1 bits 0-2 batch size - 1, bits 3-7 the record and byte flipped; then up to 8 damages
 * of 4 bytes: byte a (bits 0-6 the record; bit 7 set: the offset lies in the entropy-coded
 * data, counted from its first byte, or back from the record's last byte when the offset's
 * bit 15 is set), a 2-byte offset (little-endian, modulo the length it counts in), and a
 * byte XORed in (0: the record is cut short there). */
#include "fuzz_util.h"
#include "jpegutil.h"
#include "test_loader_util.h"
#include "transform/transform.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define BREACH(...)                                                                                \
    do {                                                                                           \
        fprintf(stderr, "fuzz_jpeg_loader:%d: ", __LINE__);                                        \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#define N 10
#define SIZE 8 /* samples: 8 x 8 x 3 uint8 */
#define SAMPLE (SIZE * SIZE * 3)
#define MAX_PIXELS (1u << 20)
#define EPOCHS 2

static uint8_t *g_jpeg[N];
static size_t g_size[N], g_entropy[N]; /* pristine bytes; where the entropy data starts */
static char g_dir[4200];
static stoker__xform_params g_xps[4];
static stoker__xform_scratch *g_xs;

static const int32_t TRANSFORMS[4] = {STOKER_TRANSFORM_TRAIN, STOKER_TRANSFORM_EVAL,
                                      STOKER_TRANSFORM_RESIZE, STOKER_TRANSFORM_EVAL};

/* The first byte after the first SOS segment. */
static size_t entropy_start(const uint8_t *j, size_t n)
{
    for (size_t i = 2; i + 4 < n; i++)
        if (j[i] == 0xFF && j[i + 1] == 0xDA)
            return i + 2 + ((size_t)j[i + 2] << 8 | j[i + 3]);
    BREACH("set-up: no SOS marker");
}

static void setup(void)
{
    static const t_jpeg_kind kinds[5] = {{"420", 3, 2, 2, 0, 0, 0},
                                         {"422", 3, 2, 1, 0, 0, 0},
                                         {"444", 3, 1, 1, 0, 0, 0},
                                         {"gray", 1, 1, 1, 0, 0, 0},
                                         {"prog", 3, 2, 2, 1, 0, 0}};
    for (int i = 0; i < N; i++) {
        g_jpeg[i] =
            t_make_jpeg(&kinds[i % 5], 24 + 4 * i, 64 + 8 * i, 85, (uint64_t)i + 1, &g_size[i]);
        g_entropy[i] = entropy_start(g_jpeg[i], g_size[i]);
    }
    char *tmp = t_mkdtemp("fuzz-jpeg-loader");
    snprintf(g_dir, sizeof g_dir, "%s/ds", tmp);
    free(tmp);
    stoker__err err = {0};
    for (int t = 0; t < 4; t++)
        if (fuzz_xform_params(&g_xps[t], TRANSFORMS[t], SIZE, t == 3, MAX_PIXELS, &err) != 0)
            BREACH("image pipeline: %s", err.msg);
    if (stoker__xform_scratch_create(&g_xs) != 0)
        BREACH("set-up");
}

typedef struct record {
    uint8_t *bytes;
    size_t size;
    bool ok;                      /* intact: libjpeg decodes it cleanly, and its CRC holds */
    uint8_t want[EPOCHS][SAMPLE]; /* the pipeline's sample per epoch, when ok */
} record;

static record g_rec[N];

/* The records as the input damages them (before packing). */
static void damage(const uint8_t *data, size_t size)
{
    for (int i = 0; i < N; i++) {
        free(g_rec[i].bytes);
        g_rec[i].bytes = malloc(g_size[i]);
        memcpy(g_rec[i].bytes, g_jpeg[i], g_size[i]);
        g_rec[i].size = g_size[i];
    }
    for (size_t at = 2; at + 4 <= size && at < 2 + 8 * 4; at += 4) {
        const int i = (data[at] & 127) % N;
        record *r = &g_rec[i];
        if (r->size == 0)
            continue;
        const size_t u = (size_t)(data[at + 1] | data[at + 2] << 8);
        size_t off = u % r->size;
        if ((data[at] & 128) && r->size > g_entropy[i]) { /* in the entropy-coded data */
            const size_t span = r->size - g_entropy[i];
            off = u & 0x8000 ? r->size - 1 - (u & 0x7FFF) % span : g_entropy[i] + u % span;
        }
        if (data[at + 3] == 0)
            r->size = off;
        else
            r->bytes[off] ^= data[at + 3];
    }
}

/* What record i must be when stored as its bytes are now. */
static void expect(const stoker__xform_params *xp, int i)
{
    record *r = &g_rec[i];
    r->ok = t_jpeg_verdict(r->bytes, r->size, MAX_PIXELS, NULL) == 0;
    for (int e = 0; e < EPOCHS && r->ok; e++) {
        stoker__err err = {0};
        const int rc = stoker__xform_jpeg(g_xs, xp, 0, e, i, r->bytes, r->size, r->want[e], &err);
        if (rc != 0) /* fuzz_xform holds the pipeline to libjpeg's verdict; here it is given */
            BREACH("record %d: libjpeg decodes it cleanly, the pipeline fails: %s", i, err.msg);
    }
}

static void write_set(bool checked)
{
    stoker_writer *w = t_jpeg_writer_checked(g_dir, 0, checked);
    for (int i = 0; i < N; i++)
        if (stoker_writer_add(w, g_rec[i].bytes, g_rec[i].size, i, NULL) != 0)
            BREACH("writer: %s", stoker_writer_errmsg(w));
    if (stoker_writer_finish(w) != 0)
        BREACH("writer: %s", stoker_writer_errmsg(w));
    stoker_writer_destroy(w);
}

/* Flips byte k of record i in its shard. */
static void flip_stored(int i, size_t k)
{
    char shard[4200];
    stoker_dataset *ds = NULL;
    stoker__recloc loc;
    if (stoker_dataset_open(&ds, g_dir, NULL) != 0 || stoker__dataset_locate(ds, i, &loc) != 0)
        BREACH("set-up");
    snprintf(shard, sizeof shard, "%s", stoker__dataset_shard_path(ds, loc.shard));
    stoker_dataset_close(ds);
    size_t n = 0;
    uint8_t *bytes = t_read_file(shard, &n);
    bytes[loc.offset + k % loc.length] ^= 0x20;
    t_write_file(shard, bytes, n);
    free(bytes);
}

static stoker_loader *open_loader(int t, bool skip, int threads, int batch)
{
    stoker_config *cfg = NULL;
    if (stoker_config_create(&cfg) != 0)
        BREACH("set-up");
    stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, batch);
    stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0);
    stoker_config_set_int(cfg, STOKER_OPT_THREADS, threads);
    stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1);
    stoker_config_set_int(cfg, STOKER_OPT_DECODER, STOKER_DECODER_CPU);
    stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT,
                          skip ? STOKER_ON_CORRUPT_SKIP : STOKER_ON_CORRUPT_ERROR);
    stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, g_xps[t].transform);
    stoker_config_set_int(cfg, STOKER_OPT_DCT_SCALE, g_xps[t].dct_scale);
    stoker_config_set_int(cfg, STOKER_OPT_SIZE, SIZE);
    stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_UINT8);
    stoker_config_set_int(cfg, STOKER_OPT_MAX_PIXELS, MAX_PIXELS);
    stoker_loader *l = NULL;
    const int rc = stoker_loader_create(&l, g_dir, cfg);
    stoker_config_destroy(cfg);
    if (rc != 0)
        BREACH("create: %s", stoker_loader_errmsg(l));
    return l;
}

/* Checks EPOCHS epochs against the expectations. */
static void check_epochs(stoker_loader *l, bool skip, int batch)
{
    int64_t replaced = 0;
    for (int e = 0; e < EPOCHS; e++) {
        int64_t pos = 0;
        stoker_batch *b = NULL;
        int rc;
        while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
            const int64_t first = pos, last = pos + batch < N ? pos + batch : N;
            pos = last;
            bool damaged = false;
            for (int64_t i = first; i < last; i++)
                damaged |= !g_rec[i].ok;
            if (rc != 0) {
                const char *msg = stoker_loader_errmsg(l);
                bool named = false;
                for (int64_t i = first; i < last; i++) {
                    char want[40];
                    snprintf(want, sizeof want, ": record %lld: ", (long long)i);
                    named |= !g_rec[i].ok && strstr(msg, want);
                }
                if (rc != STOKER_E_CORRUPT || !damaged ||
                    (skip ? !strstr(msg, "without an intact replacement") : !named))
                    BREACH("epoch %d, batch [%lld, %lld) failed: %s", e, (long long)first,
                           (long long)last, msg);
                continue;
            }
            if (!skip && damaged)
                BREACH("epoch %d: ERROR policy: batch [%lld, %lld) with a damaged record "
                       "delivered",
                       e, (long long)first, (long long)last);
            const int64_t *ids = stoker_batch_ids(b), *labels = stoker_batch_labels(b);
            const uint8_t *bytes = stoker_batch_data(b);
            if (stoker_batch_count(b) != last - first)
                BREACH("batch [%lld, %lld): wrong size", (long long)first, (long long)last);
            for (int64_t j = 0; j < last - first; j++) {
                const int64_t id = ids[j];
                if (id < 0 || id >= N || !g_rec[id].ok)
                    BREACH("epoch %d: damaged record %lld delivered at position %lld", e,
                           (long long)id, (long long)(first + j));
                if (id != first + j) {
                    if (g_rec[first + j].ok)
                        BREACH("intact record %lld replaced", (long long)(first + j));
                    replaced++;
                }
                if (labels[j] != id || memcmp(bytes + j * SAMPLE, g_rec[id].want[e], SAMPLE))
                    BREACH("epoch %d, record %lld: wrong sample or label", e, (long long)id);
            }
            stoker_batch_release(b);
        }
    }
    stoker_stats st = {.struct_size = sizeof st};
    if (stoker_loader_get_stats(l, &st) != 0 || st.skipped != replaced)
        BREACH("skipped %lld, replaced positions %lld", (long long)st.skipped, (long long)replaced);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    if (!ready) {
        setup();
        ready = true;
    }
    if (size < 2)
        return 0;
    const int t = data[0] & 3, threads = data[0] & 32 ? 2 : 1, batch = 1 + (data[1] & 7);
    const bool skip = data[0] & 4, checked = data[0] & 8, flip = checked && (data[0] & 16);
    damage(data, size);
    for (int i = 0; i < N; i++) {
        expect(&g_xps[t], i);
        if (checked && !g_rec[i].ok) { /* not packed: the pristine record in its place */
            memcpy(g_rec[i].bytes, g_jpeg[i], g_size[i]);
            g_rec[i].size = g_size[i];
            expect(&g_xps[t], i);
            if (!g_rec[i].ok)
                BREACH("set-up: record %d", i);
        }
    }
    write_set(checked);
    if (flip) {
        const int i = (data[1] >> 3) % N;
        flip_stored(i, (size_t)data[1] * 37);
        g_rec[i].ok = false;
    }
    stoker_loader *l = open_loader(t, skip, threads, batch);
    check_epochs(l, skip, batch);
    stoker_loader_destroy(l);
    return 0;
}
