/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the loader's HDF5 read paths under damage: "a delivered record is an
 * intact record or a counted replacement".
 *
 * Four HDF5 files are written once with libhdf5, each with N records and labels:
 *   0  variable-length uint8 JPEGs (each record fetched in one go by libhdf5, then decoded)
 *   1  gzip-chunked raw images, many chunks per record (assembled from chunks the worker's
 *      reader reads)
 *   2  gzip-chunked raw images, three records per chunk
 *   3  fletcher32-chunked raw images (a filter left to libhdf5: the serialised fallback)
 * The input damages the bytes of records (JPEG bytes in the global heap, stored chunks; never
 * libhdf5's own metadata, which it does not defend against) and picks the loader's options.
 * What each record must be comes from an independent reading of the damaged file: libhdf5's
 * H5Dread for the bytes; for JPEGs, libjpeg's full decode of those bytes (every row, then
 * jpeg_finish_decompress: a JPEG libjpeg warns about is damaged, wherever the crop lies) and
 * the image pipeline run on them by hand for the sample. A record that reading cannot
 * produce is damaged.
 *
 * The loader then runs one epoch, unshuffled, so position k holds record k unless replaced:
 *   - a delivered position holds its own record only if that record is intact, and then its
 *     exact bytes and label; a position whose record is damaged holds (under SKIP) an intact
 *     replacement with that record's bytes and label;
 *   - stats.skipped equals the replaced positions delivered;
 *   - with ERROR, a batch fails (STOKER_E_CORRUPT, naming the file) exactly when one of its
 *     records is damaged; with SKIP, only when no intact replacement was found.
 * Any breach aborts.
 *
 * Input: byte 0 bits 0-1 file, bit 2 SKIP, bit 3 pread (else the default back-end), bits
 * 4-5 threads - 1 (1 to 3, 3 taken as 1), bits 6-7 the JPEGs' transform (eval, train,
 * resize, eval decoded at a DCT reduction); byte 1 bits 0-2 batch size - 1; then up to 8
 * damages of 4 bytes: region (a record's heap object or a chunk), a 2-byte offset into it
 * and a byte that is XORed in (0: the region is zeroed from the offset to its end). The
 * first two bytes of record 0 of the JPEG file are never damaged (see apply_damage). */
#include "common/common.h"
#include "fuzz_util.h"
#include "jpegutil.h"
#include "transform/transform.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A breach (or a broken set-up): says where, then aborts so that the fuzzer keeps the input. */
#define BREACH(...)                                                                                \
    do {                                                                                           \
        fprintf(stderr, "fuzz_h5_loader:%d: ", __LINE__);                                          \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

#ifdef STOKER_HAVE_HDF5
#include <hdf5.h>

#define N 12 /* records per file */
#define H 12 /* raw image rows */
#define W 16 /* raw image columns */
#define REC (H * W * 3)
#define SIZE 8 /* JPEG samples: 8 x 8 x 3 uint8 */
#define MAX_REGIONS 128
#define NFILES 4
#define MAX_PIXELS (1u << 20)

static const int32_t TRANSFORMS[4] = {STOKER_TRANSFORM_EVAL, STOKER_TRANSFORM_TRAIN,
                                      STOKER_TRANSFORM_RESIZE, STOKER_TRANSFORM_EVAL};

typedef struct region {
    uint64_t off, len;
} region;

typedef struct h5file {
    char path[4200];
    uint8_t *bytes; /* pristine */
    size_t size;
    region regions[MAX_REGIONS];
    int nregions;
} h5file;

static h5file g_files[NFILES];
static char g_work[4200];
static uint8_t *g_jpeg[N];
static size_t g_jpeg_size[N];
static stoker__xform_params g_xps[4]; /* per transform (byte 0 bits 6-7) */
static const stoker__xform_params *g_xp;
static stoker__xform_scratch *g_xs;

static int64_t label_of(int64_t id)
{
    return id * 5 - 9;
}

static void raw_image(int64_t id, uint8_t *out)
{
    for (int k = 0; k < REC; k++)
        out[k] = (uint8_t)(id * 37 + k * 11 + (k >> 5));
}

static void write_labels(hid_t f)
{
    int64_t lab[N];
    for (int i = 0; i < N; i++)
        lab[i] = label_of(i);
    const hsize_t n = N;
    const hid_t sp = H5Screate_simple(1, &n, NULL);
    const hid_t d =
        H5Dcreate2(f, "labels", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (d < 0 || H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab) < 0)
        BREACH("set-up");
    H5Dclose(d);
    H5Sclose(sp);
}

static void write_vlen(const char *path)
{
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hvl_t recs[N];
    for (int i = 0; i < N; i++)
        recs[i] = (hvl_t){.len = g_jpeg_size[i], .p = g_jpeg[i]};
    const hsize_t n = N;
    const hid_t sp = H5Screate_simple(1, &n, NULL);
    const hid_t ft = H5Tvlen_create(H5T_STD_U8LE), mt = H5Tvlen_create(H5T_NATIVE_UINT8);
    const hid_t d = H5Dcreate2(f, "images", ft, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0 || d < 0 || H5Dwrite(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, recs) < 0)
        BREACH("set-up");
    write_labels(f);
    H5Dclose(d);
    H5Tclose(ft);
    H5Tclose(mt);
    H5Sclose(sp);
    H5Fclose(f);
}

static void write_chunked(const char *path, const hsize_t *chunk, bool fletcher)
{
    const hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hsize_t dims[4] = {N, H, W, 3};
    const hid_t sp = H5Screate_simple(4, dims, NULL);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    if (fletcher)
        H5Pset_fletcher32(dcpl);
    else
        H5Pset_deflate(dcpl, 6);
    uint8_t *all = malloc((size_t)N * REC);
    for (int i = 0; i < N; i++)
        raw_image(i, all + (size_t)i * REC);
    const hid_t d = H5Dcreate2(f, "images", H5T_STD_U8LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (f < 0 || d < 0 || H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) < 0)
        BREACH("set-up");
    write_labels(f);
    free(all);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
}

/* The damageable regions: every stored chunk, or every JPEG's bytes in the heap. */
static void find_regions(h5file *hf, bool vlen)
{
    hf->bytes = t_read_file(hf->path, &hf->size);
    if (vlen) {
        for (int i = 0; i < N; i++) {
            const uint8_t *at = memmem(hf->bytes, hf->size, g_jpeg[i], g_jpeg_size[i]);
            if (!at)
                BREACH("set-up");
            hf->regions[hf->nregions++] = (region){(uint64_t)(at - hf->bytes), g_jpeg_size[i]};
        }
        return;
    }
    const hid_t f = H5Fopen(hf->path, H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, "images", H5P_DEFAULT);
    const hid_t sp = H5Dget_space(d);
    hsize_t n = 0;
    if (H5Dget_num_chunks(d, sp, &n) < 0 || n == 0 || n > MAX_REGIONS)
        BREACH("set-up");
    for (hsize_t i = 0; i < n; i++) {
        hsize_t off[4];
        unsigned mask = 0;
        haddr_t addr = 0;
        hsize_t len = 0;
        if (H5Dget_chunk_info(d, sp, i, off, &mask, &addr, &len) < 0)
            BREACH("set-up");
        hf->regions[hf->nregions++] = (region){addr, len};
    }
    H5Sclose(sp);
    H5Dclose(d);
    H5Fclose(f);
}

static void setup(void)
{
    char *tmp = t_mkdtemp("fuzz-h5-loader");
    static const t_jpeg_kind kinds[3] = {
        {"420", 3, 2, 2, 0, 0, 0}, {"prog", 3, 2, 1, 1, 0, 0}, {"gray", 1, 1, 1, 0, 0, 0}};
    for (int i = 0; i < N; i++)
        g_jpeg[i] =
            t_make_jpeg(&kinds[i % 3], 24 + i, 20 + 2 * i, 85, (uint64_t)i, &g_jpeg_size[i]);
    static const hsize_t small[4] = {1, 4, 8, 3}, three[4] = {3, H, W, 3}, two[4] = {2, H, W, 3};
    for (int k = 0; k < NFILES; k++)
        snprintf(g_files[k].path, sizeof g_files[k].path, "%s/f%d.h5", tmp, k);
    write_vlen(g_files[0].path);
    write_chunked(g_files[1].path, small, false);
    write_chunked(g_files[2].path, three, false);
    write_chunked(g_files[3].path, two, true);
    for (int k = 0; k < NFILES; k++)
        find_regions(&g_files[k], k == 0);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* reading damaged chunks fails, as expected */
    snprintf(g_work, sizeof g_work, "%s/work.h5", tmp);
    free(tmp);
    stoker__err err = {0};
    for (int t = 0; t < 4; t++)
        if (fuzz_xform_params(&g_xps[t], TRANSFORMS[t], SIZE, t == 3, MAX_PIXELS, &err) != 0)
            BREACH("image pipeline: %s", err.msg);
    if (stoker__xform_scratch_create(&g_xs) != 0)
        BREACH("image pipeline: out of memory");
}

/* A sample must not depend on what the scratch decoded before: the same JPEG through a
 * fresh scratch gives the same status and bytes. */
static void check_fresh(const uint8_t *jpeg, size_t size, int64_t id, int rc, const uint8_t *out)
{
    stoker__xform_scratch *s = NULL;
    uint8_t again[SIZE * SIZE * 3];
    stoker__err err = {0};
    if (stoker__xform_scratch_create(&s) != 0)
        BREACH("set-up");
    const int rc2 = stoker__xform_jpeg(s, g_xp, 0, 0, id, jpeg, size, again, &err) == 0 ? 0 : -1;
    stoker__xform_scratch_destroy(s);
    if (rc2 != rc || (rc == 0 && memcmp(again, out, sizeof again) != 0)) {
        FILE *f = fopen("history-dependent.jpg", "wb");
        if (f) {
            fwrite(jpeg, 1, size, f);
            fclose(f);
        }
        BREACH("record %lld: the image pipeline's result depends on what it decoded before "
               "(status %d, fresh %d; JPEG in history-dependent.jpg)",
               (long long)id, rc, rc2);
    }
}

/* What record id must be, read independently from the damaged file: 0 and its bytes (and
 * label), or -1 when it is damaged. */
static int expected(hid_t d, bool vlen, int64_t id, uint8_t *out)
{
    const hsize_t start[4] = {(hsize_t)id, 0, 0, 0}, one[4] = {1, H, W, 3};
    const hid_t fs = H5Dget_space(d);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
    const hid_t ms = H5Screate_simple(vlen ? 1 : 4, one, NULL);
    int rc = -1;
    if (!vlen) {
        rc = H5Dread(d, H5T_NATIVE_UINT8, ms, fs, H5P_DEFAULT, out) < 0 ? -1 : 0;
    } else {
        const hid_t mt = H5Tvlen_create(H5T_NATIVE_UINT8);
        hvl_t v = {0};
        if (H5Dread(d, mt, ms, fs, H5P_DEFAULT, &v) >= 0) {
            stoker__err err = {0};
            rc = stoker__xform_jpeg(g_xs, g_xp, 0, 0, id, v.p, v.len, out, &err) == 0 ? 0 : -1;
            check_fresh(v.p, v.len, id, rc, out);
            /* the crop may end above damage that libjpeg reports when it reads to the end */
            if (rc == 0 && t_jpeg_verdict(v.p, v.len, MAX_PIXELS, NULL) != 0)
                rc = -1;
            H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, &v);
        }
        H5Tclose(mt);
    }
    H5Sclose(ms);
    H5Sclose(fs);
    return rc;
}

/* Damages a copy of the file. The first two bytes of a variable-length file's record 0 are
 * kept: they decide whether the data set holds JPEGs (docs/HDF5.md), which is not what is
 * tested here. */
static void apply_damage(const h5file *hf, bool vlen, const uint8_t *data, size_t size,
                         uint8_t *file)
{
    memcpy(file, hf->bytes, hf->size);
    for (size_t at = 2; at + 4 <= size && at < 2 + 8 * 4; at += 4) {
        const int k = data[at] % hf->nregions;
        const region *r = &hf->regions[k];
        uint64_t off = (uint64_t)(data[at + 1] | data[at + 2] << 8) % r->len;
        if (vlen && k == 0 && off < 2)
            off = 2;
        if (data[at + 3] == 0)
            memset(file + r->off + off, 0, r->len - off);
        else
            file[r->off + off] ^= data[at + 3];
    }
}

static stoker_loader *open_loader(bool skip, bool pread_backend, int threads, int batch, bool vlen)
{
    stoker_config *cfg = NULL;
    if (stoker_config_create(&cfg) != 0)
        BREACH("set-up");
    stoker_config_set_int(cfg, STOKER_OPT_BATCH_SIZE, batch);
    stoker_config_set_int(cfg, STOKER_OPT_SHUFFLE, 0);
    stoker_config_set_int(cfg, STOKER_OPT_THREADS, threads);
    stoker_config_set_int(cfg, STOKER_OPT_DEVICE, -1);
    stoker_config_set_int(cfg, STOKER_OPT_ON_CORRUPT,
                          skip ? STOKER_ON_CORRUPT_SKIP : STOKER_ON_CORRUPT_ERROR);
    if (pread_backend)
        stoker_config_set_int(cfg, STOKER_OPT_BACKEND, STOKER_BACKEND_PREAD);
    if (vlen) {
        stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, g_xp->transform);
        stoker_config_set_int(cfg, STOKER_OPT_DCT_SCALE, g_xp->dct_scale);
        stoker_config_set_int(cfg, STOKER_OPT_SIZE, SIZE);
        stoker_config_set_int(cfg, STOKER_OPT_DTYPE, STOKER_DTYPE_UINT8);
        stoker_config_set_int(cfg, STOKER_OPT_MAX_PIXELS, MAX_PIXELS);
    } else {
        stoker_config_set_int(cfg, STOKER_OPT_TRANSFORM, STOKER_TRANSFORM_NONE);
    }
    stoker_loader *l = NULL;
    const int rc = stoker_loader_create(&l, g_work, cfg);
    stoker_config_destroy(cfg);
    if (rc != 0) { /* the damage is in record bytes only: the map must still open */
        BREACH("create: %s", stoker_loader_errmsg(l)); /* only record bytes were damaged */
    }
    return l;
}

/* Checks one epoch against the expectations; aborts on any breach. */
static void check_epoch(stoker_loader *l, bool skip, int batch, size_t rec, uint8_t (*want)[REC],
                        const bool *ok)
{
    int64_t replaced = 0, pos = 0;
    stoker_batch *b = NULL;
    int rc;
    while ((rc = stoker_loader_next(l, &b)) != STOKER_END) {
        const int64_t first = pos, last = pos + batch < N ? pos + batch : N;
        pos = last;
        bool damaged = false;
        for (int64_t i = first; i < last; i++)
            damaged |= !ok[i];
        if (rc != 0) {
            const char *msg = stoker_loader_errmsg(l);
            if (rc != STOKER_E_CORRUPT || !strstr(msg, g_work) || !damaged ||
                (skip && !strstr(msg, "without an intact replacement"))) {
                BREACH("batch [%lld, %lld) failed: %s", (long long)first, (long long)last, msg);
            }
            continue;
        }
        if (!skip && damaged)
            BREACH("ERROR policy: batch [%lld, %lld) with a damaged record delivered",
                   (long long)first, (long long)last);
        const int64_t *ids = stoker_batch_ids(b), *labels = stoker_batch_labels(b);
        const uint8_t *bytes = stoker_batch_data(b);
        if (stoker_batch_count(b) != last - first ||
            stoker_batch_nbytes(b) != rec * (size_t)(last - first))
            BREACH("batch [%lld, %lld): wrong size", (long long)first, (long long)last);
        for (int64_t j = 0; j < last - first; j++) {
            const int64_t id = ids[j];
            if (id < 0 || id >= N || !ok[id])
                BREACH("damaged record %lld delivered", (long long)id);
            if (id != first + j) {
                if (ok[first + j])
                    BREACH("intact record %lld replaced", (long long)(first + j));
                replaced++;
            }
            if (labels[j] != label_of(id) || memcmp(bytes + (size_t)j * rec, want[id], rec) != 0)
                BREACH("record %lld: wrong bytes or label", (long long)id);
        }
        stoker_batch_release(b);
    }
    stoker_stats st = {.struct_size = sizeof st};
    if (stoker_loader_get_stats(l, &st) != 0 || st.skipped != replaced)
        BREACH("skipped %lld, replaced positions %lld", (long long)st.skipped, (long long)replaced);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool ready;
    static uint8_t want[N][REC];
    static uint8_t *file;
    if (!ready) {
        setup();
        size_t most = 0;
        for (int k = 0; k < NFILES; k++)
            most = g_files[k].size > most ? g_files[k].size : most;
        file = malloc(most);
        ready = true;
    }
    if (size < 2)
        return 0;
    const int which = data[0] & 3, threads = 1 + ((data[0] >> 4) & 3) % 3;
    const bool skip = data[0] & 4, pread_backend = data[0] & 8, vlen = which == 0;
    g_xp = &g_xps[data[0] >> 6];
    const int batch = 1 + (data[1] & 7);
    const h5file *hf = &g_files[which];
    apply_damage(hf, vlen, data, size, file);
    t_write_file(g_work, file, hf->size);

    bool ok[N];
    const hid_t f = H5Fopen(g_work, H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = f < 0 ? -1 : H5Dopen2(f, "images", H5P_DEFAULT);
    if (d < 0)
        BREACH("libhdf5 cannot open the damaged file");
    for (int64_t i = 0; i < N; i++)
        ok[i] = expected(d, vlen, i, want[i]) == 0;
    H5Dclose(d);
    H5Fclose(f);
    const size_t rec = vlen ? stoker__xform_sample_bytes(g_xp) : REC;

    stoker_loader *l = open_loader(skip, pread_backend, threads, batch, vlen);
    check_epoch(l, skip, batch, rec, want, ok);
    stoker_loader_destroy(l);
    return 0;
}

#else /* no HDF5 in this build: nothing to drive */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)data;
    (void)size;
    return 0;
}

#endif
