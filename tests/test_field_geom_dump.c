/* SPDX-License-Identifier: Apache-2.0 */
/* Applies a tied field geometry (src/transform/fields.h) to one mask and a set of boxes, for
 * the Python reference test (tests/python/test_field_geom.py):
 *
 *   test_field_geom_dump geom OX IX UX FX CX OY IY UY FY CY FLIP VFLIP W H IO
 *     the geometry given axis by axis (offset, in, out, first, count)
 *   test_field_geom_dump sample MODE SIZE RESIZE VFLIP_P SEED EPOCH ID W H IO
 *     a sample's geometry, MODE train|eval|resize|letterbox|none (RESIZE 0: the default)
 *
 * IO is a path prefix: it reads IO.mask (W x H uint8, rows W bytes apart) and IO.boxes
 * (float32 rows x1 y1 x2 y2), writes IO.mask.out (the output mask, OUTW x OUTH, rows of its
 * width), IO.boxes.out (the mapped boxes, all rows) and IO.keep (one byte per box), and
 * prints "fgeom OX IX UX FX CX OY IY UY FY CY FLIP VFLIP KEPT OUTW OUTH" (a given geometry's
 * output is CX x CY). Without arguments (as ctest runs
 * it) it checks itself on an identity geometry. */
#include "testutil.h"

#include "transform/fields.h"

static int32_t parse_mode(const char *s)
{
    return !strcmp(s, "train")       ? STOKER_TRANSFORM_TRAIN
           : !strcmp(s, "eval")      ? STOKER_TRANSFORM_EVAL
           : !strcmp(s, "resize")    ? STOKER_TRANSFORM_RESIZE
           : !strcmp(s, "letterbox") ? STOKER_TRANSFORM_LETTERBOX
           : !strcmp(s, "none")      ? STOKER_TRANSFORM_NONE
                                     : -1;
}

static char *path_of(const char *io, const char *ext)
{
    static char buf[4096];
    const size_t n = strlen(io), e = strlen(ext);
    if (n + e >= sizeof buf)
        T_FAIL("path %s too long", io);
    memcpy(buf, io, n);
    memcpy(buf + n, ext, e + 1);
    return buf;
}

/* Applies g to IO.mask and IO.boxes; prints the geometry. */
static int apply(const stoker__fgeom *g, const char *io)
{
    size_t msize, bsize;
    uint8_t *mask = t_read_file(path_of(io, ".mask"), &msize);
    float *boxes = t_read_file(path_of(io, ".boxes"), &bsize);
    if (!mask || !boxes)
        T_FAIL("cannot read %s.mask or %s.boxes", io, io);
    T_EQ_INT(msize, (size_t)g->src_w * (size_t)g->src_h);
    T_EQ_INT(bsize % 16, 0);
    const size_t out = (size_t)g->out_w * (size_t)g->out_h;
    uint8_t *dst = malloc(out ? out : 1);
    stoker__err err;
    if (stoker__mask_geom(mask, g->src_w, g->src_h, (size_t)g->src_w, g, dst, &err) < 0)
        T_FAIL("mask: %s", err.msg);
    const int64_t n = (int64_t)(bsize / 16);
    uint8_t *keep = malloc(n ? (size_t)n : 1);
    const int64_t kept = stoker__boxes_geom(boxes, n, g, 0.0, 0.0, keep);
    t_write_file(path_of(io, ".mask.out"), dst, out);
    t_write_file(path_of(io, ".boxes.out"), boxes, bsize);
    t_write_file(path_of(io, ".keep"), keep, (size_t)n);
    const stoker__faxis *x = &g->x, *y = &g->y;
    printf("fgeom %d %d %d %d %d %d %d %d %d %d %d %d %" PRId64 " %d %d\n", (int)x->offset,
           (int)x->in, (int)x->out, (int)x->first, (int)x->count, (int)y->offset, (int)y->in,
           (int)y->out, (int)y->first, (int)y->count, g->flip, g->vflip, kept, (int)g->out_w,
           (int)g->out_h);
    free(keep);
    free(dst);
    free(boxes);
    free(mask);
    return 0;
}

static int from_args(int argc, char **argv)
{
    stoker__fgeom g = {0};
    if (!strcmp(argv[1], "geom") && argc == 17) {
        int32_t v[14];
        for (int i = 0; i < 14; i++)
            v[i] = (int32_t)strtol(argv[2 + i], NULL, 10);
        g.x = (stoker__faxis){v[0], v[1], v[2], v[3], v[4]};
        g.y = (stoker__faxis){v[5], v[6], v[7], v[8], v[9]};
        g.flip = v[10];
        g.vflip = v[11];
        g.src_w = v[12];
        g.src_h = v[13];
        g.out_w = g.x.count;
        g.out_h = g.y.count;
        return apply(&g, argv[16]);
    }
    if (!strcmp(argv[1], "sample") && argc == 12) {
        stoker__xform_params p = {.transform = parse_mode(argv[2]),
                                  .size = (int32_t)atoi(argv[3]),
                                  .resize = (int32_t)atoi(argv[4]),
                                  .vflip = atof(argv[5])};
        p.std[0] = p.std[1] = p.std[2] = 1.0f;
        stoker__err err;
        const int none = p.transform == STOKER_TRANSFORM_NONE;
        if (none) /* the image pipeline has no NONE: its parameters are prepared as RESIZE */
            p.transform = STOKER_TRANSFORM_RESIZE;
        if (p.transform < 0 || stoker__xform_params_prepare(&p, STOKER_SIMD_SCALAR, &err) < 0)
            T_FAIL("bad parameters: %s", p.transform < 0 ? argv[2] : err.msg);
        if (none)
            p.transform = STOKER_TRANSFORM_NONE;
        stoker__sample_geometry(&p, atoi(argv[9]), atoi(argv[10]), strtoull(argv[6], NULL, 10),
                                strtoll(argv[7], NULL, 10), strtoll(argv[8], NULL, 10), &g);
        return apply(&g, argv[11]);
    }
    fprintf(stderr, "usage: see the head of %s\n", __FILE__);
    return 2;
}

static int self_test(void)
{
    char *dir = t_mkdtemp("field-geom-dump");
    char io[4096];
    snprintf(io, sizeof io, "%s/case", dir);
    uint8_t mask[5 * 3];
    for (size_t i = 0; i < sizeof mask; i++)
        mask[i] = (uint8_t)(i * 7);
    const float boxes[8] = {0, 0, 5, 3, 1, 1, 1, 2}; /* the second has no width */
    t_write_file(path_of(io, ".mask"), mask, sizeof mask);
    t_write_file(path_of(io, ".boxes"), boxes, sizeof boxes);
    const stoker__fgeom g = {
        .src_w = 5, .src_h = 3, .x = {0, 5, 5, 0, 5}, .y = {0, 3, 3, 0, 3}, .out_w = 5, .out_h = 3};
    apply(&g, io);
    size_t size;
    uint8_t *out = t_read_file(path_of(io, ".mask.out"), &size);
    T_EQ_INT(size, sizeof mask);
    T_ASSERT(memcmp(out, mask, sizeof mask) == 0);
    free(out);
    uint8_t *keep = t_read_file(path_of(io, ".keep"), &size);
    T_EQ_INT(size, 2);
    T_EQ_INT(keep[0], 1);
    T_EQ_INT(keep[1], 0);
    free(keep);
    t_rmrf(dir);
    free(dir);
    return 0;
}

int main(int argc, char **argv)
{
    return argc > 1 ? from_args(argc, argv) : self_test();
}
