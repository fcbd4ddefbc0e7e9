/* SPDX-License-Identifier: Apache-2.0 */
/* --coco FILE --images DIR: a COCO-style instances file, one sample per entry of "images" in
 * the file's order, with the fields
 *   image     jpeg: DIR/file_name
 *   boxes     array float32 [N, 4], boxes_of image: each annotation's bbox [x, y, w, h] as
 *             [x, y, x + w, y + h] in pixels, in the annotations' order; a coordinate past the
 *             image's width or height (as the file states them) by at most COCO_CLIP_PX is
 *             clipped to it (COCO's rounding), by more it is an error
 *   classes   array int64 [N], rows_of boxes: category_id as it is (not renumbered)
 *   iscrowd   array uint8 [N], rows_of boxes: only with --keep-crowd
 *   image_id  int64: the image's id
 * Annotations with iscrowd 1 are left out unless --keep-crowd. An image without annotations
 * is a sample with no boxes. Segmentations (polygons, RLE) are not packed. The key is
 * file_name. The whole file is parsed in memory. */
#include "fields.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COCO_CLIP_PX 1.0

enum { F_IMAGE, F_BOXES, F_CLASSES };

typedef struct image_ref {
    int64_t id;
    size_t index; /* in "images" */
} image_ref;

static int by_id(const void *a, const void *b)
{
    const int64_t x = ((const image_ref *)a)->id, y = ((const image_ref *)b)->id;
    return (x > y) - (x < y);
}

static const image_ref *find(const image_ref *refs, size_t n, int64_t id)
{
    const image_ref key = {.id = id};
    return bsearch(&key, refs, n, sizeof *refs, by_id);
}

/* An integer member, or false. */
static bool int_member(const json_value *obj, const char *name, int64_t *out)
{
    const json_value *v = json_get(obj, name);
    if (!v || v->type != JSON_NUMBER || !v->is_int)
        return false;
    *out = v->integer;
    return true;
}

typedef struct coco {
    const pack_opts *o;
    const json_value *images, *anns;
    image_ref *refs;
    size_t *count, *first, *order; /* per image: its annotations kept, where they start;
                                       the kept annotations grouped by image */
} coco;

/* Checks the lists and indexes the images by id; 0 or an exit code after printing why. */
static int index_images(coco *c)
{
    const char *path = c->o->coco;
    const size_t n = c->images->n;
    c->refs = calloc(n ? n : 1, sizeof *c->refs);
    c->count = calloc(n ? n : 1, sizeof *c->count);
    c->first = calloc(n + 1, sizeof *c->first);
    if (!c->refs || !c->count || !c->first) {
        cli_err("out of memory");
        return PACK_FAIL;
    }
    for (size_t i = 0; i < n; i++) {
        const json_value *im = &c->images->items[i];
        const json_value *fn = json_get(im, "file_name");
        if (im->type != JSON_OBJECT || !int_member(im, "id", &c->refs[i].id) || !fn ||
            fn->type != JSON_STRING || !fn->string[0]) {
            cli_err("%s: images[%zu]: an image needs an integer \"id\" and a \"file_name\"", path,
                    i);
            return PACK_FAIL;
        }
        c->refs[i].index = i;
    }
    qsort(c->refs, n, sizeof *c->refs, by_id);
    for (size_t i = 1; i < n; i++)
        if (c->refs[i].id == c->refs[i - 1].id) {
            cli_err("%s: image id %lld is given twice", path, (long long)c->refs[i].id);
            return PACK_FAIL;
        }
    return 0;
}

/* Groups the annotations kept by image (stable: each image's in the file's order). */
static int group_annotations(coco *c)
{
    const char *path = c->o->coco;
    const size_t n = c->anns ? c->anns->n : 0, ni = c->images->n;
    size_t *owner = calloc(n ? n : 1, sizeof *owner);
    c->order = calloc(n ? n : 1, sizeof *c->order);
    if (!owner || !c->order) {
        free(owner);
        cli_err("out of memory");
        return PACK_FAIL;
    }
    for (size_t a = 0; a < n; a++) {
        const json_value *an = &c->anns->items[a];
        int64_t image_id = 0, crowd = 0;
        const image_ref *r = NULL;
        if (an->type != JSON_OBJECT || !int_member(an, "image_id", &image_id)) {
            cli_err("%s: annotations[%zu]: no integer \"image_id\"", path, a);
        } else if (!(r = find(c->refs, ni, image_id))) {
            cli_err("%s: annotations[%zu]: image_id %lld is not among the images", path, a,
                    (long long)image_id);
        } else if (json_get(an, "iscrowd") &&
                   (!int_member(an, "iscrowd", &crowd) || (crowd != 0 && crowd != 1))) {
            cli_err("%s: annotations[%zu]: \"iscrowd\" must be 0 or 1", path, a);
            r = NULL;
        }
        if (!r) {
            free(owner);
            return PACK_FAIL;
        }
        owner[a] = crowd && !c->o->keep_crowd ? SIZE_MAX : r->index;
        if (owner[a] != SIZE_MAX)
            c->count[r->index]++;
    }
    for (size_t i = 0; i < ni; i++)
        c->first[i + 1] = c->first[i] + c->count[i];
    size_t *at = calloc(ni ? ni : 1, sizeof *at);
    if (!at) {
        free(owner);
        cli_err("out of memory");
        return PACK_FAIL;
    }
    for (size_t a = 0; a < n; a++)
        if (owner[a] != SIZE_MAX)
            c->order[c->first[owner[a]] + at[owner[a]]++] = a;
    free(at);
    free(owner);
    return 0;
}

/* One image's boxes, classes (and iscrowd) into the sample; "" or why not in why. */
static void fill_boxes(const coco *c, size_t img, const json_value *im, pack_sample *s, char *why,
                       size_t cap)
{
    const size_t n = c->count[img];
    float *boxes = malloc(n ? n * 16 : 1);
    int64_t *classes = malloc(n ? n * 8 : 1);
    uint8_t *crowd = malloc(n ? n : 1);
    int64_t width = 0, height = 0;
    const bool sized = int_member(im, "width", &width) && int_member(im, "height", &height);
    if (!boxes || !classes || !crowd)
        snprintf(why, cap, "out of memory");
    for (size_t k = 0; k < n && !why[0]; k++) {
        const size_t a = c->order[c->first[img] + k];
        const json_value *an = &c->anns->items[a];
        const json_value *bb = json_get(an, "bbox");
        int64_t id = -1, cat = 0, iscrowd = 0;
        int_member(an, "id", &id);
        int_member(an, "iscrowd", &iscrowd);
        double v[4] = {0};
        bool ok = bb && bb->type == JSON_ARRAY && bb->n == 4;
        for (int j = 0; ok && j < 4; j++) {
            ok = bb->items[j].type == JSON_NUMBER && isfinite(bb->items[j].number);
            v[j] = ok ? bb->items[j].number : 0;
        }
        double x2 = v[0] + v[2], y2 = v[1] + v[3];
        if (!ok || v[2] < 0 || v[3] < 0) {
            snprintf(why, cap,
                     "annotation %lld (annotations[%zu]): \"bbox\" must be 4 numbers "
                     "[x, y, w, h] with w, h >= 0",
                     (long long)id, a);
        } else if (!int_member(an, "category_id", &cat)) {
            snprintf(why, cap, "annotation %lld (annotations[%zu]): no integer \"category_id\"",
                     (long long)id, a);
        } else if (sized &&
                   (x2 > (double)width + COCO_CLIP_PX || y2 > (double)height + COCO_CLIP_PX ||
                    v[0] < -COCO_CLIP_PX || v[1] < -COCO_CLIP_PX)) {
            snprintf(why, cap,
                     "annotation %lld (annotations[%zu]): bbox [%g, %g, %g, %g] lies outside the "
                     "image (%lldx%lld) by more than %g pixel",
                     (long long)id, a, v[0], v[1], v[2], v[3], (long long)width, (long long)height,
                     COCO_CLIP_PX);
        } else {
            if (sized) {
                x2 = fmin(x2, (double)width);
                y2 = fmin(y2, (double)height);
            }
            boxes[4 * k + 0] = (float)fmax(v[0], 0);
            boxes[4 * k + 1] = (float)fmax(v[1], 0);
            boxes[4 * k + 2] = (float)x2;
            boxes[4 * k + 3] = (float)y2;
            classes[k] = cat;
            crowd[k] = (uint8_t)iscrowd;
        }
    }
    if (!why[0] && (pack_value_bytes(&s->v[F_BOXES], boxes, n * 16) < 0 ||
                    pack_value_bytes(&s->v[F_CLASSES], classes, n * 8) < 0 ||
                    (c->o->keep_crowd && pack_value_bytes(&s->v[F_CLASSES + 1], crowd, n) < 0)))
        snprintf(why, cap, "out of memory");
    free(boxes);
    free(classes);
    free(crowd);
}

static void schema(const pack_opts *o, pack_schema *sc)
{
    const int64_t four = 4;
    pack_schema_add(sc, "image", STOKER_FIELD_JPEG, 0, 0, NULL, 0, NULL);
    pack_schema_add(sc, "boxes", STOKER_FIELD_ARRAY, STOKER_DTYPE_FLOAT32, 1, &four,
                    STOKER_TIE_BOXES, "image");
    pack_schema_add(sc, "classes", STOKER_FIELD_ARRAY, STOKER_DTYPE_INT64, 0, NULL, STOKER_TIE_ROWS,
                    "boxes");
    if (o->keep_crowd)
        pack_schema_add(sc, "iscrowd", STOKER_FIELD_ARRAY, STOKER_DTYPE_UINT8, 0, NULL,
                        STOKER_TIE_ROWS, "boxes");
    pack_schema_add(sc, "image_id", STOKER_FIELD_INT64, STOKER_DTYPE_INT64, 0, NULL, 0, NULL);
}

static int add_samples(coco *c, pack_samples *ss)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < c->images->n; i++) {
        const json_value *im = &c->images->items[i];
        const char *fn = json_get(im, "file_name")->string;
        int64_t id = 0;
        int_member(im, "id", &id);
        char where[600], why[768] = "";
        snprintf(where, sizeof where, "%s: image %lld (%s)", c->o->coco, (long long)id, fn);
        pack_sample *s = pack_samples_add(ss, where, fn);
        if (!s || pack_value_file(&s->v[F_IMAGE], c->o->images, fn) < 0) {
            cli_err("out of memory");
            return PACK_FAIL;
        }
        fill_boxes(c, i, im, s, why, sizeof why);
        if (!why[0] && pack_value_bytes(&s->v[ss->schema.n - 1], &id, 8) < 0)
            snprintf(why, sizeof why, "out of memory");
        if (why[0])
            rc = pack_samples_bad(c->o, ss, where, why);
    }
    return rc;
}

int pack_coco_load(const pack_opts *o, pack_samples *ss)
{
    json_value root = {0};
    if (pack_read_json(o->coco, "instances file", &root) < 0)
        return PACK_FAIL;
    coco c = {.o = o, .images = json_get(&root, "images"), .anns = json_get(&root, "annotations")};
    int rc = 0;
    if (root.type != JSON_OBJECT || !c.images || c.images->type != JSON_ARRAY ||
        (c.anns && c.anns->type != JSON_ARRAY)) {
        cli_err("%s: a COCO instances file is an object with a list \"images\" (and a list "
                "\"annotations\")",
                o->coco);
        rc = PACK_FAIL;
    }
    ss->source = "COCO instances";
    ss->schema_from = o->coco;
    schema(o, &ss->schema);
    if (rc == 0)
        rc = index_images(&c);
    if (rc == 0)
        rc = group_annotations(&c);
    if (rc == 0)
        rc = add_samples(&c, ss);
    free(c.refs);
    free(c.count);
    free(c.first);
    free(c.order);
    json_free(&root);
    return rc;
}
