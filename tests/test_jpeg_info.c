/* SPDX-License-Identifier: Apache-2.0 */
/* The JPEG header reader (src/decode/jpeg_info.c) against libjpeg's jpeg_read_header, on
 * every kind of JPEG libjpeg can write here (baseline 4:2:0, 4:2:2, 4:4:4, 4:4:0, 4:1:1,
 * 4:1:0, unusual factors, grayscale, progressive, arithmetic, CMYK with and without the
 * Adobe marker, YCCK, RGB, restart intervals, one scan per component, no JFIF) and on
 * frames patched to SOF1, SOF3, SOF5, SOF9 and 12 bits; the hardware eligibility and its
 * reason for each; every prefix of each file (placed against an unmapped page, so that a read
 * past the end crashes), mutated headers (wherever both readers accept one, they agree) and
 * random bytes: an error with a message, or fields in range. */
#include "testutil.h"

#include "jpeg_kinds.h"

#include "decode/jpeg_info.h"

#include <sys/mman.h>

static const int SIZES[][2] = {{1, 1}, {17, 9}, {64, 48}, {333, 77}, {8, 1000}};
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* ---- libjpeg's reading of a header, without a word on stderr ------------------------------- */

typedef struct quiet_err {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
} quiet_err;

static void quiet_exit(j_common_ptr c)
{
    longjmp(((quiet_err *)c->err)->jmp, 1);
}

static void quiet_emit(j_common_ptr c, int level)
{
    (void)c, (void)level;
}

typedef struct lj_header {
    int width, height, components, precision, progressive, arith, restart, scan_components;
    int jfif, adobe, adobe_transform, h_max, v_max;
    int id[4], h[4], v[4], tq[4];
    J_COLOR_SPACE space;
} lj_header;

/* 0 with *h filled, or -1 when libjpeg fails on the header. */
static int libjpeg_header(const uint8_t *data, size_t size, lj_header *h)
{
    struct jpeg_decompress_struct c;
    quiet_err e;
    c.err = jpeg_std_error(&e.pub);
    e.pub.error_exit = quiet_exit;
    e.pub.emit_message = quiet_emit;
    jpeg_create_decompress(&c);
    if (setjmp(e.jmp)) {
        jpeg_destroy_decompress(&c);
        return -1;
    }
    jpeg_mem_src(&c, data, (unsigned long)size);
    if (jpeg_read_header(&c, TRUE) != JPEG_HEADER_OK) {
        jpeg_destroy_decompress(&c);
        return -1;
    }
    *h = (lj_header){.width = (int)c.image_width,
                     .height = (int)c.image_height,
                     .components = c.num_components,
                     .precision = c.data_precision,
                     .progressive = c.progressive_mode,
                     .arith = c.arith_code,
                     .restart = (int)c.restart_interval,
                     .scan_components = c.comps_in_scan,
                     .jfif = c.saw_JFIF_marker,
                     .adobe = c.saw_Adobe_marker,
                     .adobe_transform = c.Adobe_transform,
                     .h_max = c.max_h_samp_factor,
                     .v_max = c.max_v_samp_factor,
                     .space = c.jpeg_color_space};
    for (int i = 0; i < c.num_components && i < 4; i++) {
        h->id[i] = c.comp_info[i].component_id;
        h->h[i] = c.comp_info[i].h_samp_factor;
        h->v[i] = c.comp_info[i].v_samp_factor;
        h->tq[i] = c.comp_info[i].quant_tbl_no;
    }
    jpeg_destroy_decompress(&c);
    return 0;
}

static J_COLOR_SPACE as_libjpeg(stoker__jpeg_color c)
{
    switch (c) {
    case STOKER__JPEG_GRAY: return JCS_GRAYSCALE;
    case STOKER__JPEG_YCBCR: return JCS_YCbCr;
    case STOKER__JPEG_RGB: return JCS_RGB;
    case STOKER__JPEG_CMYK: return JCS_CMYK;
    case STOKER__JPEG_YCCK: return JCS_YCCK;
    default: return JCS_UNKNOWN;
    }
}

#define SAME(what, a, b)                                                                           \
    do {                                                                                           \
        if ((long long)(a) != (long long)(b))                                                      \
            T_FAIL("%s: %s = %lld, libjpeg %s = %lld", what, #a, (long long)(a), #b,               \
                   (long long)(b));                                                                \
    } while (0)

static void expect_libjpeg(const char *what, const stoker__jpeg_info *in, const lj_header *h)
{
    SAME(what, in->width, h->width);
    SAME(what, in->height, h->height);
    SAME(what, in->components, h->components);
    SAME(what, in->precision, h->precision);
    SAME(what, in->sof == 0xC2 || in->sof == 0xCA, h->progressive);
    SAME(what, in->sof == 0xC9 || in->sof == 0xCA, h->arith);
    SAME(what, in->restart_interval, h->restart);
    SAME(what, in->scan_components, h->scan_components);
    SAME(what, in->jfif, h->jfif);
    SAME(what, in->adobe, h->adobe);
    if (in->adobe)
        SAME(what, in->adobe_transform, h->adobe_transform);
    SAME(what, in->h_max, h->h_max);
    SAME(what, in->v_max, h->v_max);
    for (int i = 0; i < in->components; i++) {
        SAME(what, in->comp[i].id, h->id[i]);
        SAME(what, in->comp[i].h, h->h[i]);
        SAME(what, in->comp[i].v, h->v[i]);
        SAME(what, in->comp[i].tq, h->tq[i]);
    }
    SAME(what, as_libjpeg(in->color), h->space);
}

/* What every successful read promises, whatever the input. */
static void expect_sane(const stoker__jpeg_info *in, size_t size)
{
    T_ASSERT(in->header_size >= 2 && in->header_size <= size);
    T_ASSERT(in->sof >= 0xC0 && in->sof <= 0xCF);
    T_ASSERT(in->width >= 1 && in->width <= 65535 && in->height >= 1 && in->height <= 65535);
    T_ASSERT(in->components >= 1 && in->components <= STOKER__JPEG_MAX_COMPONENTS);
    T_ASSERT(in->scan_components >= 1 && in->scan_components <= in->components);
    T_ASSERT(in->precision >= 2 && in->precision <= 16);
    for (int i = 0; i < in->components; i++)
        T_ASSERT(in->comp[i].h >= 1 && in->comp[i].h <= 4 && in->comp[i].v >= 1 &&
                 in->comp[i].v <= 4 && in->comp[i].tq >= 0 && in->comp[i].tq <= 3);
    const char *why = NULL;
    if (stoker__jpeg_hw_eligible(in, &why)) {
        T_ASSERT(why == NULL);
        T_ASSERT(in->sof == 0xC0 || in->sof == 0xC1);
        T_ASSERT(in->precision == 8);
        T_ASSERT(in->components == 1 || in->components == 3);
        T_ASSERT(in->scan_components == in->components);
        T_ASSERT(in->components == 1 || in->color == STOKER__JPEG_YCBCR);
    } else {
        T_ASSERT(why != NULL && why[0] != '\0');
    }
}

/* ---- reading data that ends where mapped memory ends -------------------------------------- */

typedef struct guarded {
    uint8_t *map, *data;
    size_t map_size;
} guarded;

/* A copy of data[0, n) whose last byte is the last byte before a page that cannot be read. */
static guarded guard(const uint8_t *data, size_t n)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    guarded g;
    g.map_size = ((n + page - 1) / page + 1) * page;
    g.map = mmap(NULL, g.map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    T_ASSERT(g.map != MAP_FAILED);
    T_ASSERT(mprotect(g.map + g.map_size - page, page, PROT_NONE) == 0);
    g.data = g.map + g.map_size - page - n;
    if (n)
        memcpy(g.data, data, n);
    return g;
}

static void unguard(guarded *g)
{
    munmap(g->map, g->map_size);
}

static int read_guarded(const uint8_t *data, size_t n, stoker__jpeg_info *in, stoker__err *err)
{
    guarded g = guard(data, n);
    err->msg[0] = '\0';
    const int rc = stoker__jpeg_info_read(g.data, n, in, err);
    unguard(&g);
    T_ASSERT(rc == 0 || rc == STOKER_E_CORRUPT || rc == STOKER_E_UNSUPPORTED);
    T_ASSERT(rc == 0 || err->msg[0] != '\0');
    if (rc == 0)
        expect_sane(in, n);
    return rc;
}

/* Every prefix shorter than the header fails; every longer one reads the same header. */
static void check_prefixes(const char *what, const uint8_t *jpg, size_t size,
                           const stoker__jpeg_info *full)
{
    stoker__err err;
    stoker__jpeg_info in;
    for (size_t n = 0; n < full->header_size; n++)
        if (read_guarded(jpg, n, &in, &err) != STOKER_E_CORRUPT)
            T_FAIL("%s: a prefix of %zu bytes (header %zu) was read", what, n, full->header_size);
    for (size_t n = full->header_size; n <= size && n < full->header_size + 64; n++) {
        T_OK(read_guarded(jpg, n, &in, &err));
        T_EQ_INT(in.width, full->width);
        T_EQ_INT(in.header_size, full->header_size);
    }
}

/* ---- the kinds ------------------------------------------------------------------------------ */

static void check_kind(const kind *k, int w, int h)
{
    char what[128];
    snprintf(what, sizeof what, "%s %dx%d", k->name, w, h);
    size_t size;
    uint8_t *jpg = t_make_kind(k, w, h, (uint64_t)w * 7 + h, &size);
    lj_header lj;
    T_ASSERT(libjpeg_header(jpg, size, &lj) == 0);
    stoker__jpeg_info in;
    stoker__err err = {0};
    if (read_guarded(jpg, size, &in, &err) != 0)
        T_FAIL("%s: %s", what, err.msg);
    expect_libjpeg(what, &in, &lj);
    const int prog = k->flags & PROG, arith = k->flags & ARITH;
    T_EQ_INT(in.sof, arith ? (prog ? 0xCA : 0xC9) : prog ? 0xC2 : 0xC0);
    const char *why = "unset";
    const bool ok = stoker__jpeg_hw_eligible(&in, &why);
    if (ok != (k->why == NULL) || (k->why && strcmp(why, k->why) != 0))
        T_FAIL("%s: eligible %d (%s), expected %s", what, ok, why ? why : "-",
               k->why ? k->why : "eligible");
    T_ASSERT(stoker__jpeg_hw_eligible(&in, NULL) == ok);
    check_prefixes(what, jpg, size, &in);
    free(jpg);
}

/* Offset of the first SOF marker's precision byte. */
static size_t sof_at(const uint8_t *jpg, size_t size)
{
    for (size_t i = 2; i + 4 < size; i++)
        if (jpg[i] == 0xFF && jpg[i + 1] >= 0xC0 && jpg[i + 1] <= 0xC2)
            return i;
    T_FAIL("no SOF marker");
}

/* Frames libjpeg cannot write: a baseline file with its SOF marker or precision patched. */
static void check_patched(void)
{
    size_t size;
    uint8_t *jpg = t_make_kind(&JPEG_KINDS[0], 40, 30, 5, &size);
    const size_t at = sof_at(jpg, size);
    static const struct {
        int marker, precision;
        const char *why;
        int libjpeg_reads; /* 1: libjpeg must read it (SOF1, SOF9); 0: it may (its version) */
    } cases[] = {{0xC1, 8, NULL, 1},           {0xC3, 8, "lossless", 0},
                 {0xC5, 8, "hierarchical", 0}, {0xC9, 8, "arithmetic coding", 1},
                 {0xCD, 8, "hierarchical", 0}, {0xC0, 12, "12-bit", 0},
                 {0xC1, 12, "12-bit", 0},      {0xC1, 16, "not 8-bit", 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jpg[at + 1] = (uint8_t)cases[i].marker;
        jpg[at + 4] = (uint8_t)cases[i].precision;
        char what[64];
        snprintf(what, sizeof what, "SOF 0x%02X, %d-bit", cases[i].marker, cases[i].precision);
        stoker__jpeg_info in;
        stoker__err err = {0};
        if (read_guarded(jpg, size, &in, &err) != 0)
            T_FAIL("%s: %s", what, err.msg);
        T_EQ_INT(in.sof, cases[i].marker);
        T_EQ_INT(in.precision, cases[i].precision);
        const char *why = NULL;
        const bool ok = stoker__jpeg_hw_eligible(&in, &why);
        if (ok != (cases[i].why == NULL) || (cases[i].why && strcmp(why, cases[i].why) != 0))
            T_FAIL("%s: eligible %d (%s)", what, ok, why ? why : "-");
        lj_header lj;
        const int lrc = libjpeg_header(jpg, size, &lj);
        T_ASSERT(lrc == 0 || !cases[i].libjpeg_reads);
        if (lrc == 0)
            expect_libjpeg(what, &in, &lj);
    }
    free(jpg);
}

/* Malformed headers, each with the error it must give. */
static void check_malformed(void)
{
    size_t size;
    uint8_t *jpg = t_make_kind(&JPEG_KINDS[0], 16, 16, 9, &size);
    const size_t sof = sof_at(jpg, size);
    stoker__jpeg_info in;
    stoker__err err;
    static const uint8_t not_jpeg[] = {0x89, 'P', 'N', 'G'}, eoi[] = {0xFF, 0xD8, 0xFF, 0xD9};
    static const uint8_t zero[] = {0xFF, 0xD8, 0xFF, 0x00}, soi2[] = {0xFF, 0xD8, 0xFF, 0xD8};
    static const uint8_t junk[] = {0xFF, 0xD8, 0x12, 0xFF, 0xD9};
    static const uint8_t unknown[] = {0xFF, 0xD8, 0xFF, 0xC8, 0x00, 0x02};
    static const uint8_t short_len[] = {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01};
    static const uint8_t sos_first[] = {0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x08, 1, 1, 0, 0, 63, 0};
    static const uint8_t dri_bad[] = {0xFF, 0xD8, 0xFF, 0xDD, 0x00, 0x03, 0};
    static const struct {
        const uint8_t *data;
        size_t size;
        const char *msg;
    } cases[] = {{not_jpeg, sizeof not_jpeg, "no SOI"},
                 {eoi, sizeof eoi, "before any scan"},
                 {zero, sizeof zero, "stuffed zero"},
                 {soi2, sizeof soi2, "before any scan"},
                 {junk, sizeof junk, "where a marker was expected"},
                 {unknown, sizeof unknown, "unknown marker 0xC8"},
                 {short_len, sizeof short_len, "a length of 1 bytes"},
                 {sos_first, sizeof sos_first, "before any frame header"},
                 {dri_bad, sizeof dri_bad, "restart interval (DRI) of 1 bytes"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        T_EQ_RC(read_guarded(cases[i].data, cases[i].size, &in, &err), STOKER_E_CORRUPT);
        T_CONTAINS(err.msg, cases[i].msg);
    }
    /* the frame header's own checks, patched into a valid file */
    uint8_t *p = malloc(size);
    static const struct {
        size_t off;
        uint8_t value;
        int rc;
        const char *msg;
    } frame[] = {{5, 0, STOKER_E_CORRUPT, "empty image"},     /* height 16 -> 0 */
                 {4, 0, STOKER_E_CORRUPT, "precision of 0"},  /* precision */
                 {9, 2, STOKER_E_CORRUPT, "frame header of"}, /* Nf 3 -> 2 */
                 {9, 5, STOKER_E_CORRUPT, "frame header of"}, /* Nf 3 -> 5 */
                 {11, 0x50, STOKER_E_CORRUPT, "sampling factors 5x0"},
                 {12, 4, STOKER_E_CORRUPT, "quantisation table 4"}};
    for (size_t i = 0; i < sizeof frame / sizeof frame[0]; i++) {
        memcpy(p, jpg, size);
        p[sof + frame[i].off] = frame[i].value;
        if (frame[i].off == 5)
            p[sof + 6] = 0;
        T_EQ_RC(read_guarded(p, size, &in, &err), frame[i].rc);
        T_CONTAINS(err.msg, frame[i].msg);
    }
    /* 5 components with a matching length: read, but not kept */
    static const uint8_t five[] = {0xFF, 0xD8, 0xFF, 0xC0, 0x00, 23, 8, 0,    8,
                                   0,    8,    5,    1,    0x11, 0,  2, 0x11, 0,
                                   3,    0x11, 0,    4,    0x11, 0,  5, 0x11, 0};
    T_EQ_RC(read_guarded(five, sizeof five, &in, &err), STOKER_E_UNSUPPORTED);
    T_CONTAINS(err.msg, "5 components");
    /* a scan naming a component the frame lacks, and one naming a component twice */
    for (int twice = 0; twice < 2; twice++) {
        memcpy(p, jpg, size);
        size_t sos = sof;
        while (!(p[sos] == 0xFF && p[sos + 1] == 0xDA))
            sos++;
        p[sos + 5 + 2 * 1] = twice ? p[sos + 5] : 77; /* the scan's second selector */
        T_EQ_RC(read_guarded(p, size, &in, &err), STOKER_E_CORRUPT);
        T_CONTAINS(err.msg, "is not a component of the frame");
    }
    free(p);
    free(jpg);
}

/* ---- garbage --------------------------------------------------------------------------------- */

/* Mutated headers: never a crash; where libjpeg also reads one, the two agree. */
static void check_mutations(void)
{
    uint64_t seed = 12345;
    int agreed = 0, ours_only = 0, libjpeg_only = 0;
    for (int ki = 0; ki < NJPEG_KINDS; ki++) {
        size_t size;
        uint8_t *jpg = t_make_kind(&JPEG_KINDS[ki], 24, 16, (uint64_t)ki, &size);
        stoker__jpeg_info full, in;
        stoker__err err;
        T_OK(read_guarded(jpg, size, &full, &err));
        uint8_t *m = malloc(size);
        for (int t = 0; t < 400; t++) {
            memcpy(m, jpg, size);
            const int flips = 1 + (int)(t_rand(&seed) % 3);
            for (int f = 0; f < flips; f++) {
                const size_t at = (size_t)(t_rand(&seed) % full.header_size);
                m[at] =
                    t % 2 ? (uint8_t)t_rand(&seed) : m[at] ^ (uint8_t)(1u << (t_rand(&seed) % 8));
            }
            const size_t n = t % 5 ? size : (size_t)(t_rand(&seed) % size);
            const int rc = read_guarded(m, n, &in, &err);
            lj_header lj;
            const int lrc = libjpeg_header(m, n, &lj);
            if (rc == 0 && lrc == 0) {
                char what[96];
                snprintf(what, sizeof what, "%s mutation %d", JPEG_KINDS[ki].name, t);
                expect_libjpeg(what, &in, &lj);
                agreed++;
            }
            ours_only += rc == 0 && lrc != 0;
            libjpeg_only += rc != 0 && lrc == 0;
        }
        free(m);
        free(jpg);
    }
    printf("mutations: both read %d, only this reader %d, only libjpeg %d\n", agreed, ours_only,
           libjpeg_only);
    T_ASSERT(agreed > 100); /* the comparison ran on many */
}

static void check_random(void)
{
    uint64_t seed = 99;
    uint8_t buf[300];
    for (int t = 0; t < 20000; t++) {
        const size_t n = (size_t)(t_rand(&seed) % sizeof buf);
        for (size_t i = 0; i < n; i++) /* bytes mostly among those that make markers */
            buf[i] = t_rand(&seed) % 3 ? (uint8_t)t_rand(&seed) : 0xFF;
        if (n >= 2 && t % 2)
            buf[0] = 0xFF, buf[1] = 0xD8;
        stoker__jpeg_info in;
        stoker__err err;
        read_guarded(buf, n, &in, &err);
    }
}

int main(void)
{
    for (int k = 0; k < NJPEG_KINDS; k++)
        for (int s = 0; s < NSIZES; s++)
            check_kind(&JPEG_KINDS[k], SIZES[s][0], SIZES[s][1]);
    check_patched();
    check_malformed();
    check_mutations();
    check_random();
    return 0;
}
