/* SPDX-License-Identifier: Apache-2.0 */
/* Samples of several fields (docs/FORMAT.md "Samples with several fields"): the schema's
 * rules, the payload layout byte by byte (FORMAT.md's example), encode and split round trips,
 * every check of a sample and of a payload, the manifest's version 3 lines, a version 4
 * manifest refused by name, and the writer and data set API end to end (a legacy data set's
 * fields included). */
#include "common/common.h"
#include "format/manifest.h"
#include "format/schema.h"
#include "testutil.h"

#include <math.h>

static char *g_tmp;

static stoker_field_desc fd(const char *name, int32_t kind)
{
    stoker_field_desc d;
    memset(&d, 0, sizeof d);
    d.struct_size = sizeof d;
    d.name = name;
    d.kind = kind;
    return d;
}

static stoker_field_desc fd_array(const char *name, int32_t dtype, int32_t ndim, int64_t d0)
{
    stoker_field_desc d = fd(name, STOKER_FIELD_ARRAY);
    d.dtype = dtype;
    d.ndim = ndim;
    d.shape[0] = d0;
    return d;
}

static stoker_field_desc tied(stoker_field_desc d, int32_t tie, const char *to)
{
    d.tie = tie;
    d.tie_to = to;
    return d;
}

/* A JPEG as far as its header goes: SOI, an APP0 segment, SOF0 of w x h, then filler. */
static uint8_t *fake_jpeg(uint32_t w, uint32_t h, size_t size)
{
    uint8_t *p = calloc(1, size);
    static const uint8_t head[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8};
    memcpy(p, head, sizeof head);
    p[13] = (uint8_t)(h >> 8), p[14] = (uint8_t)h, p[15] = (uint8_t)(w >> 8), p[16] = (uint8_t)w;
    return p;
}

static uint8_t *fake_png(uint32_t w, uint32_t h, uint8_t depth, uint8_t color, size_t size)
{
    uint8_t *p = calloc(1, size);
    static const uint8_t sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n',
                                  0,    0,   0,   13,  'I',  'H',  'D',  'R'};
    memcpy(p, sig, sizeof sig);
    for (int i = 0; i < 4; i++) {
        p[16 + i] = (uint8_t)(w >> (24 - 8 * i));
        p[20 + i] = (uint8_t)(h >> (24 - 8 * i));
    }
    p[24] = depth;
    p[25] = color;
    return p;
}

static void expect_desc_refused(const stoker_field_desc *d, int32_t n, const char *needle)
{
    stoker__schema s;
    stoker__err e = {0};
    T_EQ_RC(stoker__schema_from_desc(&s, d, n, &e), STOKER_E_INVALID);
    T_CONTAINS(e.msg, needle);
}

static void test_schema_rules(void)
{
    stoker_field_desc d[4];
    d[0] = fd("1image", STOKER_FIELD_JPEG);
    expect_desc_refused(d, 1, "not 1 to 63 bytes");
    d[0] = fd("im-age", STOKER_FIELD_JPEG);
    expect_desc_refused(d, 1, "im-age");
    d[0] = fd("", STOKER_FIELD_JPEG);
    expect_desc_refused(d, 1, "field 0");
    d[0] = fd("image", STOKER_FIELD_JPEG);
    d[1] = fd("image", STOKER_FIELD_PNG);
    expect_desc_refused(d, 2, "used twice");
    expect_desc_refused(d, 0, "0 fields");
    d[1] = fd("x", 99);
    expect_desc_refused(d, 2, "unknown kind");
    /* ties */
    d[1] = tied(fd("mask", STOKER_FIELD_PNG), STOKER_TIE_MASK, "nothing");
    expect_desc_refused(d, 2, "not an earlier field");
    d[1] = tied(fd("mask", STOKER_FIELD_PNG), STOKER_TIE_MASK, NULL);
    expect_desc_refused(d, 2, "needs the name");
    d[0] = fd("cap", STOKER_FIELD_BYTES);
    d[1] = tied(fd("mask", STOKER_FIELD_PNG), STOKER_TIE_MASK, "cap");
    expect_desc_refused(d, 2, "not a jpeg or png image field");
    d[0] = fd("image", STOKER_FIELD_JPEG);
    d[1] = tied(fd("mask", STOKER_FIELD_BYTES), STOKER_TIE_MASK, "image");
    expect_desc_refused(d, 2, "a mask is a png or a raw uint8");
    d[1] = tied(fd_array("boxes", STOKER_DTYPE_FLOAT32, 1, 5), STOKER_TIE_BOXES, "image");
    expect_desc_refused(d, 2, "rows of 4");
    d[1] = tied(fd_array("boxes", STOKER_DTYPE_FLOAT64, 1, 4), STOKER_TIE_BOXES, "image");
    expect_desc_refused(d, 2, "rows of 4");
    d[1] = tied(fd_array("cls", STOKER_DTYPE_INT64, 0, 0), STOKER_TIE_ROWS, "image");
    expect_desc_refused(d, 2, "not a boxes field");
    d[1] = tied(fd_array("boxes", STOKER_DTYPE_FLOAT32, 1, 4), STOKER_TIE_BOXES, "image");
    d[2] = tied(fd("cls", STOKER_FIELD_INT64), STOKER_TIE_ROWS, "boxes");
    expect_desc_refused(d, 3, "rows_of is for an array");
    d[2] = fd_array("tok", STOKER_DTYPE_INT32, 1, 0);
    expect_desc_refused(d, 3, "at least one element");
    d[2] = fd("v", STOKER_FIELD_INT64);
    d[2].dtype = STOKER_DTYPE_FLOAT32;
    expect_desc_refused(d, 3, "dtype");
    /* a raw mask: uint8 [H, W] only */
    d[1] = tied(fd("mask", STOKER_FIELD_RAW), STOKER_TIE_MASK, "image");
    d[1].dtype = STOKER_DTYPE_UINT16, d[1].ndim = 2, d[1].shape[0] = 4, d[1].shape[1] = 4;
    expect_desc_refused(d, 2, "a mask is a png or a raw uint8");
    d[1].dtype = STOKER_DTYPE_UINT8;
    stoker__schema s;
    stoker__err e = {0};
    T_OK(stoker__schema_from_desc(&s, d, 2, &e));
    stoker_field_desc many[STOKER_MAX_FIELDS + 1];
    char names[STOKER_MAX_FIELDS + 1][8];
    for (int i = 0; i <= STOKER_MAX_FIELDS; i++) {
        snprintf(names[i], sizeof names[i], "f%d", i);
        many[i] = fd(names[i], STOKER_FIELD_INT64);
    }
    T_OK(stoker__schema_from_desc(&s, many, STOKER_MAX_FIELDS, &e));
    expect_desc_refused(many, STOKER_MAX_FIELDS + 1, "33 fields");
}

/* docs/FORMAT.md's example: image jpeg, mask png mask_of image, label int64, a JPEG of
 * 70,001 bytes and a PNG of 3,000: a payload of 73,024 bytes. */
static void test_format_example(void)
{
    const stoker_field_desc d[3] = {fd("image", STOKER_FIELD_JPEG),
                                    tied(fd("mask", STOKER_FIELD_PNG), STOKER_TIE_MASK, "image"),
                                    fd("label", STOKER_FIELD_INT64)};
    stoker__schema s;
    stoker__err e = {0};
    T_OK(stoker__schema_from_desc(&s, d, 3, &e));
    T_EQ_INT(s.nvar, 2);
    T_EQ_INT(s.label, 2);
    T_EQ_INT(s.f[2].offset, 8);
    T_EQ_INT(s.var_base, 16);
    uint8_t *jpeg = fake_jpeg(640, 480, 70001), *png = fake_png(640, 480, 8, 3, 3000);
    jpeg[70000] = 0xAB;
    png[2999] = 0xCD;
    const int64_t label = 0x0102030405060708;
    const stoker_field_value v[3] = {{jpeg, 70001}, {png, 3000}, {&label, 8}};
    T_OK(stoker__schema_check(&s, v, &e));
    const uint64_t n = stoker__schema_payload_size(&s, v);
    T_EQ_INT(n, 73024);
    uint8_t *p = malloc(n);
    memset(p, 0xEE, n);
    stoker__schema_encode(&s, v, p);
    T_EQ_INT(stoker__get_u32(p), 70001);
    T_EQ_INT(stoker__get_u32(p + 4), 3000);
    T_EQ_INT(stoker__get_u64(p + 8), (uint64_t)label);
    T_ASSERT(memcmp(p + 16, jpeg, 70001) == 0);
    for (uint64_t i = 70017; i < 70024; i++)
        T_EQ_INT(p[i], 0);
    T_ASSERT(memcmp(p + 70024, png, 3000) == 0);
    T_EQ_INT(p[73023], 0xCD);
    /* the split gives the same spans back */
    s.f[0].max = 70001;
    s.f[1].max = 3000;
    stoker__span sp[3];
    T_OK(stoker__schema_split(&s, p, n, sp, &e));
    T_EQ_INT(sp[0].off, 16);
    T_EQ_INT(sp[0].len, 70001);
    T_EQ_INT(sp[1].off, 70024);
    T_EQ_INT(sp[1].len, 3000);
    T_EQ_INT(sp[2].off, 8);
    T_EQ_INT(sp[2].len, 8);
    /* the payload's checks */
    T_EQ_RC(stoker__schema_split(&s, p, n - 1, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "field \"mask\"");
    T_EQ_RC(stoker__schema_split(&s, p, 12, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "shorter than");
    uint8_t *q = calloc(1, n + 8);
    memcpy(q, p, n);
    T_EQ_RC(stoker__schema_split(&s, q, n + 8, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "make 73024");
    q[70020] = 1; /* padding before the mask */
    T_EQ_RC(stoker__schema_split(&s, q, n, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "padding");
    s.f[1].max = 2999;
    T_EQ_RC(stoker__schema_split(&s, p, n, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "field \"mask\": 3000 bytes, over the data set's max of 2999");
    s.f[1].max = 3000;
    stoker__put_u32(p, 0xFFFFFFF0u);
    T_EQ_RC(stoker__schema_split(&s, p, n, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "field \"image\"");
    free(q);
    free(p);
    free(jpeg);
    free(png);
}

/* image + boxes + classes + tokens + weight + raw: encode, split, every value back. */
static void test_roundtrip_and_checks(void)
{
    stoker_field_desc d[7] = {
        fd("image", STOKER_FIELD_PNG),
        tied(fd_array("boxes", STOKER_DTYPE_FLOAT32, 1, 4), STOKER_TIE_BOXES, "image"),
        tied(fd_array("classes", STOKER_DTYPE_INT64, 0, 0), STOKER_TIE_ROWS, "boxes"),
        fd_array("tokens", STOKER_DTYPE_INT32, 0, 0),
        fd("weight", STOKER_FIELD_FLOAT32),
        fd("emb", STOKER_FIELD_RAW),
        fd("label", STOKER_FIELD_INT64),
    };
    d[5].dtype = STOKER_DTYPE_UINT16, d[5].ndim = 1, d[5].shape[0] = 3;
    stoker__schema s;
    stoker__err e = {0};
    T_OK(stoker__schema_from_desc(&s, d, 7, &e));
    T_EQ_INT(s.nvar, 4);
    /* fixed fields after 16 bytes of lengths: weight at 16, emb at 24, label at 32 */
    T_EQ_INT(s.f[4].offset, 16);
    T_EQ_INT(s.f[5].offset, 24);
    T_EQ_INT(s.f[6].offset, 32);
    uint8_t *png = fake_png(100, 50, 8, 2, 77);
    float boxes[2][4] = {{0, 0, 100, 50}, {10.5f, 5, 20, 5}};
    int64_t classes[2] = {3, 7};
    int32_t tokens[5] = {1, 2, 3, 4, 5};
    float weight = 0.25f;
    uint16_t emb[3] = {9, 8, 7};
    int64_t label = -4;
    stoker_field_value v[7] = {{png, 77},    {boxes, sizeof boxes}, {classes, sizeof classes},
                               {tokens, 20}, {&weight, 4},          {emb, 6},
                               {&label, 8}};
    T_OK(stoker__schema_check(&s, v, &e));
    const uint64_t n = stoker__schema_payload_size(&s, v);
    /* 40 (fixed end) -> png at 40..117, boxes at 120..152, classes 152..168, tokens 168..188 */
    T_EQ_INT(n, 188);
    uint8_t p[188];
    stoker__schema_encode(&s, v, p);
    for (int i = 0; i < 7; i++)
        s.f[i].max = 100;
    stoker__span sp[7];
    T_OK(stoker__schema_split(&s, p, n, sp, &e));
    for (int i = 0; i < 7; i++) {
        T_EQ_INT(sp[i].len, v[i].size);
        T_ASSERT(memcmp(p + sp[i].off, v[i].data, v[i].size) == 0);
        T_EQ_INT(sp[i].off % 8, 0);
    }
    T_EQ_INT(sp[0].off, 40);
    T_EQ_INT(sp[1].off, 120);
    T_EQ_INT(sp[3].off, 168);
    /* an array's rows over max, and a length not a whole number of rows */
    s.f[3].max = 4;
    T_EQ_RC(stoker__schema_split(&s, p, n, sp, &e), STOKER_E_CORRUPT);
    T_CONTAINS(e.msg, "field \"tokens\": 5 rows, over the data set's max of 4");
    s.f[3].max = 100;
    /* every refusal of a sample names its field */
    struct {
        int field;
        stoker_field_value val;
        const char *needle;
    } bad[] = {
        {6, {&label, 4}, "field \"label\": 4 bytes, but a int64 value is 8"},
        {5, {emb, 4}, "field \"emb\": 4 bytes"},
        {3, {tokens, 6}, "field \"tokens\": 6 bytes, not a whole number of rows of 4"},
        {0, {tokens, 20}, "field \"image\": not a readable PNG"},
        {1, {boxes, 16}, "field \"classes\": 2 rows, but its boxes \"boxes\" have 1"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        stoker_field_value w[7];
        memcpy(w, v, sizeof w);
        w[bad[k].field] = bad[k].val;
        T_EQ_RC(stoker__schema_check(&s, w, &e), STOKER_E_INVALID);
        T_CONTAINS(e.msg, bad[k].needle);
    }
    const float outside[][4] = {
        {0, 0, 101, 50}, {-1, 0, 5, 5}, {5, 0, 4, 5}, {0, 6, 5, 5}, {0, 0, 5, 50.5f}};
    for (size_t k = 0; k < sizeof outside / sizeof *outside; k++) {
        memcpy(boxes[1], outside[k], sizeof boxes[1]);
        T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
        T_CONTAINS(e.msg, "field \"boxes\": box 1");
        T_CONTAINS(e.msg, "not within its image of 100x50");
    }
    boxes[1][2] = NAN;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    T_CONTAINS(e.msg, "field \"boxes\": box 1 has a value that is not finite");
    boxes[1][2] = INFINITY;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    free(png);
}

static void test_masks(void)
{
    stoker_field_desc d[3] = {fd("image", STOKER_FIELD_JPEG),
                              tied(fd("mask", STOKER_FIELD_PNG), STOKER_TIE_MASK, "image"),
                              tied(fd("depth", STOKER_FIELD_RAW), STOKER_TIE_MASK, "image")};
    d[2].dtype = STOKER_DTYPE_UINT8, d[2].ndim = 2, d[2].shape[0] = 6, d[2].shape[1] = 8;
    stoker__schema s;
    stoker__err e = {0};
    T_OK(stoker__schema_from_desc(&s, d, 3, &e));
    uint8_t *jpeg = fake_jpeg(8, 6, 64), *png = fake_png(8, 6, 8, 0, 40), raw[48] = {0};
    stoker_field_value v[3] = {{jpeg, 64}, {png, 40}, {raw, 48}};
    T_OK(stoker__schema_check(&s, v, &e));
    uint8_t *small = fake_png(8, 5, 8, 0, 40);
    v[1].data = small;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    T_CONTAINS(e.msg, "field \"mask\": a mask of 8x5, but its image \"image\" is 8x6");
    uint8_t *deep = fake_png(8, 6, 16, 0, 40);
    v[1].data = deep;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    T_CONTAINS(e.msg, "8-bit gray or palette");
    v[1].data = png;
    uint8_t *wide = fake_jpeg(9, 6, 64);
    v[0].data = wide;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    T_CONTAINS(e.msg, "but its image \"image\" is 9x6");
    /* not a JPEG: no SOI, a SOS before any frame, a frame of height 0 */
    uint8_t junk[64] = {0xFF, 0xD8, 0xFF, 0xDA, 0, 2};
    v[0].data = junk;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    T_CONTAINS(e.msg, "field \"image\": not a readable JPEG");
    uint8_t *zero = fake_jpeg(8, 0, 64);
    v[0].data = zero;
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    v[0] = (stoker_field_value){jpeg, 10}; /* the header cut off */
    T_EQ_RC(stoker__schema_check(&s, v, &e), STOKER_E_INVALID);
    free(jpeg), free(png), free(small), free(deep), free(wide), free(zero);
}

/* Manifest text with its CRC line. */
static char *manifest_text(const char *body, size_t *size)
{
    const size_t n = strlen(body);
    char *t = malloc(n + 17);
    memcpy(t, body, n);
    snprintf(t + n, 17, "crc32c %08x\n", stoker_crc32c(0, body, n));
    *size = n + 16;
    return t;
}

static int parse(const char *fields, stoker__manifest *m, stoker__err *e)
{
    char body[2048];
    snprintf(body, sizeof body,
             "stoker-manifest 3\nalign 1\n%srecords 0\nclasses 0\nshards 1\n"
             "shard shard-00000.stk 0 4160 00000000\nkeys 0\n",
             fields);
    size_t size = 0;
    char *t = manifest_text(body, &size);
    char *copy = stoker__malloc(size + 1);
    memcpy(copy, t, size + 1);
    free(t);
    return stoker__manifest_parse(m, copy, size, "m.stk", 10, 10, e);
}

static void test_manifest_v3(void)
{
    stoker__manifest m;
    stoker__err e = {0};
    T_OK(parse("fields 4\nfield image jpeg max 900\nfield mask png mask_of image max 50\n"
               "field boxes array float32 1 4 boxes_of image max 12\nfield label int64\n"
               "checked jpeg\n",
               &m, &e));
    T_EQ_INT(m.version, 3);
    T_ASSERT(m.schema && m.jpeg_checked);
    T_EQ_INT(m.kind, STOKER_FIELD_BYTES);
    T_EQ_INT(m.schema->n, 4);
    T_EQ_INT(m.schema->f[1].target, 0);
    T_EQ_INT(m.schema->f[2].max, 12);
    T_EQ_INT(m.schema->label, 3);
    /* the writer's lines read back as they were */
    stoker__buf b = {0};
    T_OK(stoker__schema_format(m.schema, &b));
    T_OK(stoker__buf_append(&b, "", 1));
    T_EQ_STR(b.data, "fields 4\nfield image jpeg max 900\nfield mask png mask_of image max 50\n"
                     "field boxes array float32 1 4 boxes_of image max 12\nfield label int64\n");
    stoker__buf_free(&b);
    stoker__manifest_free(&m);
    T_OK(parse("fields 1\nfield x int64\n", &m, &e));
    T_ASSERT(!m.jpeg_checked);
    stoker__manifest_free(&m);
    static const struct {
        const char *fields, *needle;
    } bad[] = {
        {"fields 0\nfield x int64\n", "1 to 32 fields"},
        {"fields 33\n", "1 to 32 fields"},
        {"fields 1\nfield image jpeg\n", "a variable kind needs its max"},
        {"fields 1\nfield x int64 max 3\n", "max given for a fixed-size kind"},
        {"fields 1\nfield x png16 max 3\n", "unknown kind"},
        {"fields 1\nfield x raw float99 1 3\n", "unknown dtype"},
        {"fields 2\nfield m png mask_of image max 3\nfield image jpeg max 4\n",
         "does not come before it"},
        {"fields 2\nfield image jpeg max 4\nfield m bytes mask_of image max 3\n",
         "a mask is a png"},
        {"fields 2\nfield image jpeg max 4\nfield image png max 3\n", "used twice"},
        {"fields 1\nfield x int64 junk\n", "unexpected text"},
        {"fields 1\nfield x jpeg max 4 max 5\n", "unexpected text"},
        {"fields 1\nfield x bytes max 4\nchecked jpeg\n", "without a jpeg field"},
        {"fields 2\nfield x bytes max 4\n", "expected \"field NAME"},
        {"field image jpeg\n", "expected \"fields N\""},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        const int rc = parse(bad[k].fields, &m, &e);
        stoker__manifest_free(&m);
        if (rc != STOKER_E_CORRUPT)
            T_FAIL("%s: rc %d (%s)", bad[k].fields, rc, e.msg);
        T_CONTAINS(e.msg, "m.stk: line");
        T_CONTAINS(e.msg, bad[k].needle);
    }
}

static stoker_config *quiet_cfg(void)
{
    stoker_config *cfg = NULL;
    T_OK(stoker_config_create(&cfg));
    T_OK(stoker_config_set_int(cfg, STOKER_OPT_FSYNC, 0));
    return cfg;
}

/* The writer and the data set API, end to end; a refused sample leaves the writer usable. */
static void test_writer_dataset(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/det", g_tmp);
    stoker_config *cfg = quiet_cfg();
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, path, cfg));
    const stoker_field_desc d[4] = {
        fd("image", STOKER_FIELD_JPEG),
        tied(fd_array("boxes", STOKER_DTYPE_FLOAT32, 1, 4), STOKER_TIE_BOXES, "image"),
        tied(fd_array("classes", STOKER_DTYPE_INT64, 0, 0), STOKER_TIE_ROWS, "boxes"),
        fd("label", STOKER_FIELD_INT64)};
    T_OK(stoker_writer_set_fields(w, d, 4));
    uint8_t *jpeg = fake_jpeg(32, 16, 100);
    float boxes[3][4] = {{0, 0, 4, 4}, {1, 1, 32, 16}, {2, 2, 3, 3}};
    int64_t classes[3] = {5, 6, 7};
    int i8 = 0;
    T_EQ_RC(stoker_writer_add(w, &i8, 1, 0, NULL), STOKER_E_INVALID);
    T_CONTAINS(stoker_writer_errmsg(w), "stoker_writer_add_sample");
    for (int64_t r = 0; r < 5; r++) {
        const int64_t label = 10 + r;
        const uint64_t nb = (uint64_t)(r % 4);
        stoker_field_value v[4] = {
            {jpeg, 100 - (uint64_t)r}, {boxes, nb * 16}, {classes, nb * 8}, {&label, 8}};
        if (r == 2) { /* refused samples first: the writer goes on */
            stoker_field_value bad[4];
            memcpy(bad, v, sizeof bad);
            bad[2].size = 8;
            T_EQ_RC(stoker_writer_add_sample(w, bad, 4, "img-2"), STOKER_E_INVALID);
            T_CONTAINS(stoker_writer_errmsg(w), "sample \"img-2\": field \"classes\"");
            T_CONTAINS(stoker_writer_errmsg(w), path);
            T_EQ_RC(stoker_writer_add_sample(w, bad, 3, NULL), STOKER_E_INVALID);
            T_CONTAINS(stoker_writer_errmsg(w), "sample 2: 3 values for 4 fields");
        }
        char key[16];
        snprintf(key, sizeof key, "img-%d", (int)r);
        T_OK(stoker_writer_add_sample(w, v, 4, key));
    }
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);

    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    T_EQ_INT(stoker_dataset_format_version(ds), 3);
    T_EQ_INT(stoker_dataset_num_records(ds), 5);
    T_EQ_INT(stoker_dataset_num_fields(ds), 4);
    T_EQ_INT(stoker_dataset_field_index(ds, "classes"), 2);
    T_EQ_INT(stoker_dataset_field_index(ds, "nope"), -1);
    int32_t kind = 0;
    T_OK(stoker_dataset_field(ds, &kind, NULL, NULL, NULL));
    T_EQ_INT(kind, STOKER_FIELD_BYTES);
    stoker_field_desc got = {.struct_size = sizeof got};
    T_OK(stoker_dataset_field_desc(ds, 1, &got));
    T_EQ_STR(got.name, "boxes");
    T_EQ_INT(got.kind, STOKER_FIELD_ARRAY);
    T_EQ_INT(got.tie, STOKER_TIE_BOXES);
    T_EQ_STR(got.tie_to, "image");
    T_EQ_INT(got.max, 3);
    T_OK(stoker_dataset_field_desc(ds, 0, &got));
    T_EQ_INT(got.max, 100);
    T_OK(stoker_dataset_field_desc(ds, 3, &got));
    T_EQ_INT(got.max, 0);
    T_ASSERT(got.tie_to == NULL);
    T_EQ_RC(stoker_dataset_field_desc(ds, 4, &got), STOKER_E_INVALID);
    uint8_t buf[512];
    for (int64_t r = 0; r < 5; r++) {
        size_t size = 0;
        int64_t label = 0;
        T_OK(stoker_dataset_record_info(ds, r, NULL, &label, NULL));
        T_EQ_INT(label, 10 + r);
        T_OK(stoker_dataset_read(ds, r, buf, sizeof buf, &size));
        stoker_field_value v[4];
        T_OK(stoker_dataset_split_record(ds, r, buf, size, v));
        T_EQ_INT(v[0].size, 100 - r);
        T_ASSERT(memcmp(v[0].data, jpeg, v[0].size) == 0);
        T_EQ_INT(v[1].size, (r % 4) * 16);
        T_ASSERT(v[1].size == 0 || memcmp(v[1].data, boxes, v[1].size) == 0);
        T_EQ_INT(v[2].size, (r % 4) * 8);
        T_ASSERT(v[2].size == 0 || memcmp(v[2].data, classes, v[2].size) == 0);
        T_EQ_INT(stoker__get_u64(v[3].data), 10 + r);
        if (r == 1) {
            T_EQ_RC(stoker_dataset_split_record(ds, r, buf, size - 1, v), STOKER_E_CORRUPT);
            T_CONTAINS(stoker_dataset_errmsg(ds), "record 1: field \"classes\"");
            T_EQ_RC(stoker_dataset_split_record(ds, 9, buf, size, v), STOKER_E_INVALID);
        }
    }
    stoker_dataset_close(ds);

    /* a manifest version 4 is refused, naming the file and the version */
    char mpath[4300];
    snprintf(mpath, sizeof mpath, "%s/manifest.stk", path);
    size_t msize = 0;
    char *text = t_read_file(mpath, &msize);
    T_ASSERT(memcmp(text, "stoker-manifest 3\n", 18) == 0);
    text[16] = '4';
    size_t nsize = 0;
    text[msize - 16] = '\0';
    char *fixed = manifest_text(text, &nsize);
    t_write_file(mpath, fixed, nsize);
    T_EQ_RC(stoker_dataset_open(&ds, path, NULL), STOKER_E_FORMAT);
    T_CONTAINS(stoker_dataset_errmsg(ds), mpath);
    T_CONTAINS(stoker_dataset_errmsg(ds), "manifest version 4 is not supported");
    stoker_dataset_close(ds);
    free(text);
    free(fixed);
    free(jpeg);
    stoker_config_destroy(cfg);
}

/* A data set written with one field reads as "image"/"data" and "label". */
static void test_legacy(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/old", g_tmp);
    stoker_config *cfg = quiet_cfg();
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, path, cfg));
    const int64_t shape[2] = {2, 3};
    T_OK(stoker_writer_set_field(w, STOKER_FIELD_RAW, STOKER_DTYPE_UINT8, 2, shape));
    const uint8_t rec[6] = {1, 2, 3, 4, 5, 6};
    T_OK(stoker_writer_add(w, rec, 6, 42, NULL));
    T_OK(stoker_writer_add(w, rec, 6, -3, NULL));
    T_EQ_RC(stoker_writer_add_sample(w, NULL, 0, NULL), STOKER_E_INVALID);
    T_CONTAINS(stoker_writer_errmsg(w), "no fields were declared");
    T_OK(stoker_writer_finish(w));
    stoker_writer_destroy(w);
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, path, NULL));
    T_EQ_INT(stoker_dataset_format_version(ds), 1);
    T_EQ_INT(stoker_dataset_num_fields(ds), 2);
    stoker_field_desc got = {.struct_size = sizeof got};
    T_OK(stoker_dataset_field_desc(ds, 0, &got));
    T_EQ_STR(got.name, "data");
    T_EQ_INT(got.kind, STOKER_FIELD_RAW);
    T_EQ_INT(got.ndim, 2);
    T_EQ_INT(got.shape[1], 3);
    T_OK(stoker_dataset_field_desc(ds, 1, &got));
    T_EQ_STR(got.name, "label");
    T_EQ_INT(got.kind, STOKER_FIELD_INT64);
    T_EQ_INT(stoker_dataset_field_index(ds, "label"), 1);
    uint8_t buf[16];
    size_t size = 0;
    T_OK(stoker_dataset_read(ds, 1, buf, sizeof buf, &size));
    stoker_field_value v[2];
    T_OK(stoker_dataset_split_record(ds, 1, buf, size, v));
    T_EQ_INT(v[0].size, 6);
    T_ASSERT(v[0].data == buf);
    T_EQ_INT(v[1].size, 8);
    T_EQ_INT((int64_t)stoker__get_u64(v[1].data), -3);
    T_EQ_RC(stoker_dataset_split_record(ds, 1, buf, 5, v), STOKER_E_CORRUPT);
    T_CONTAINS(stoker_dataset_errmsg(ds), "field \"data\": 5 bytes");
    stoker_dataset_close(ds);
    stoker_config_destroy(cfg);
}

int main(void)
{
    g_tmp = t_mkdtemp("schema");
    test_schema_rules();
    test_format_example();
    test_roundtrip_and_checks();
    test_masks();
    test_manifest_v3();
    test_writer_dataset();
    test_legacy();
    t_rmrf(g_tmp);
    return 0;
}
