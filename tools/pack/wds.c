/* SPDX-License-Identifier: Apache-2.0 */
/* --wds A.tar [B.tar ...]: WebDataset shards, read by a reader of its own (no dependency).
 *
 * The tar: POSIX ustar and GNU tar headers, each checked by its checksum; sizes in octal or
 * GNU's base-256. A pax header ('x') gives the next member its "path" and "size" (its other
 * keys are ignored); a global one ('g') is passed over; a GNU long name ('L') names the next
 * member, a long link name ('K') is passed over. Regular files ('0', NUL, '7') are the data;
 * directories, links, devices and FIFOs are passed over, as WebDataset passes them over, and
 * so are members whose name has no KEY.EXT form (below) and WebDataset's "__...__" members at
 * the top; a GNU sparse member ('S') is refused. The archive ends at its zero block or where
 * the file ends on a header's boundary; a member cut short is an error.
 *
 * Samples (WebDataset's rule): a member "dir/abc.seg.png" has key "dir/abc" (its path up to
 * the first dot of its base name) and extension "seg.png" (lower-cased). Consecutive members
 * of one key form a sample; a key met again after another is an error naming both members,
 * and so is an extension given twice in a sample. The sample's record key is its key.
 *
 * Fields: without --schema, the first sample's extensions in member order, each named as its
 * extension with '.' and '-' as '_' ("seg.png": "seg_png"), of the kind its last part says:
 * jpg, jpeg: jpeg; png: png; cls: int64 (the member's ASCII integer); npy: raw of the first
 * sample's dtype and shape; anything else (txt, json, ...): bytes, as they are. With --schema
 * FILE: a JSON object mapping each extension to the Writer's form of a field (a kind name, or
 * an object with "kind", "dtype", "shape" and a tie naming another field by its name), plus
 * an optional "name"; null leaves that extension out. Values: jpeg, png, bytes: the member's
 * bytes; int64, float32: its ASCII number; raw, array: a .npy member (versions 1 to 3,
 * C order, the field's dtype; raw: its shape, array: any number of rows of its row shape).
 * Every sample must hold exactly the schema's extensions: one missing, or one more, makes it
 * bad (an error naming the tar, the key and the field; --skip-bad leaves it out). */
#include "fields.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TAR_BLOCK 512
#define WDS_MAX_PARTS 256      /* members of one sample */
#define WDS_MAX_NAME 65536     /* a GNU long name, a pax path */
#define WDS_MAX_PAX (1u << 20) /* a pax header's records */
#define WDS_MAX_NUMBER 256     /* an int64 or float32 member's text */
#define WDS_MAX_NPY_HEAD 65548 /* a .npy member's magic, length and header */

/* ---- the tar reader ---- */

typedef struct tar {
    const char *path;
    int fd;
    uint64_t size; /* the file's */
    uint64_t pos;  /* the next header */
} tar;

typedef struct member {
    char *name;            /* owned */
    uint64_t at;           /* its header's byte offset, for messages */
    uint64_t offset, size; /* its data */
} member;

enum { TAR_END = 0, TAR_FILE = 1, TAR_OTHER = 2 };

static int read_at(int fd, uint64_t off, void *buf, size_t n)
{
    size_t done = 0;
    while (done < n) {
        const ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = EIO;
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

/* A header's number: octal digits (after spaces, ending at a space or NUL), or GNU's
 * base-256 (the first byte 0x80, then big-endian). false when it is neither. */
static bool tar_number(const uint8_t *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (p[0] & 0x80) {
        if (p[0] != 0x80)
            return false; /* negative, or too large */
        for (size_t i = 1; i < n; i++) {
            if (v >> 56)
                return false;
            v = v << 8 | p[i];
        }
        *out = v;
        return true;
    }
    size_t i = 0;
    while (i < n && p[i] == ' ')
        i++;
    const size_t first = i;
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v >> 60)
            return false;
        v = v << 3 | (uint64_t)(p[i] - '0');
    }
    if (i == first && !(i < n && p[i] == '\0'))
        return false;
    for (; i < n; i++)
        if (p[i] != ' ' && p[i] != '\0')
            return false;
    *out = v;
    return true;
}

/* The sum of the header's bytes with its checksum field as spaces, unsigned (POSIX) or
 * signed (some old tars): either may match. */
static bool tar_checksum_ok(const uint8_t *h)
{
    uint64_t want = 0;
    if (!tar_number(h + 148, 8, &want))
        return false;
    uint64_t u = 0;
    int64_t s = 0;
    for (int i = 0; i < TAR_BLOCK; i++) {
        const uint8_t b = i >= 148 && i < 156 ? ' ' : h[i];
        u += b;
        s += (int8_t)b;
    }
    return u == want || (uint64_t)s == want;
}

/* The header's own name: POSIX ustar's prefix "/" name, else the name field. */
static char *header_name(const uint8_t *h)
{
    const size_t n = strnlen((const char *)h, 100);
    const bool posix = memcmp(h + 257, "ustar\0", 6) == 0;
    const size_t pn = posix ? strnlen((const char *)h + 345, 155) : 0;
    char *s = malloc(pn + 1 + n + 1);
    if (s)
        snprintf(s, pn + 1 + n + 1, "%.*s%s%.*s", (int)pn, (const char *)h + 345, pn ? "/" : "",
                 (int)n, (const char *)h);
    return s;
}

/* Reads a member's data (a long name, a pax header) of n bytes as a string. */
static char *read_text(const tar *t, uint64_t off, uint64_t n)
{
    char *s = malloc(n + 1);
    if (s && read_at(t->fd, off, s, (size_t)n) < 0) {
        free(s);
        return NULL;
    }
    if (s)
        s[n] = '\0';
    return s;
}

/* A pax header's records "LEN KEY=VALUE\n": its path (owned, into *path) and size. false
 * when a record is malformed. */
static bool pax_parse(const char *p, size_t n, char **path, int64_t *size)
{
    size_t at = 0;
    while (at < n) {
        size_t len = 0, i = at;
        while (i < n && p[i] >= '0' && p[i] <= '9' && len < n)
            len = len * 10 + (size_t)(p[i++] - '0');
        if (i == at || i >= n || p[i] != ' ' || len < i - at + 3 || len > n - at ||
            p[at + len - 1] != '\n')
            return false;
        const char *kv = p + i + 1, *end = p + at + len - 1;
        const char *eq = memchr(kv, '=', (size_t)(end - kv));
        if (!eq)
            return false;
        const size_t klen = (size_t)(eq - kv);
        if (klen == 4 && memcmp(kv, "path", 4) == 0) {
            free(*path);
            *path = strndup(eq + 1, (size_t)(end - eq - 1));
            if (!*path || strlen(*path) != (size_t)(end - eq - 1))
                return false; /* out of memory, or a NUL inside */
        } else if (klen == 4 && memcmp(kv, "size", 4) == 0) {
            int64_t v = 0;
            const char *q = eq + 1;
            for (; q < end && *q >= '0' && *q <= '9' && v < INT64_MAX / 10; q++)
                v = v * 10 + (*q - '0');
            if (q != end || q == eq + 1)
                return false;
            *size = v;
        }
        at += len;
    }
    return true;
}

static bool all_zero(const uint8_t *h)
{
    for (int i = 0; i < TAR_BLOCK; i++)
        if (h[i])
            return false;
    return true;
}

/* The next member: TAR_FILE (a regular file, into *m), TAR_OTHER (one passed over, named in
 * *m), TAR_END, or -1 with why. */
static int tar_next(tar *t, member *m, char *why, size_t cap)
{
    char *long_name = NULL;
    int64_t pax_size = -1;
    int rc = -1;
    for (;;) {
        uint8_t h[TAR_BLOCK];
        const uint64_t at = t->pos;
        if (at == t->size && !long_name && pax_size < 0) {
            rc = TAR_END; /* no end-of-archive blocks: accepted, as tar accepts it */
            break;
        }
        if (at + TAR_BLOCK > t->size || read_at(t->fd, at, h, TAR_BLOCK) < 0) {
            snprintf(why, cap, "byte %llu: %s", (unsigned long long)at,
                     at + TAR_BLOCK > t->size ? "cut short inside a header" : strerror(errno));
            break;
        }
        if (all_zero(h)) {
            if (long_name || pax_size >= 0)
                snprintf(why, cap, "byte %llu: a long name or pax header with no member after it",
                         (unsigned long long)at);
            else
                rc = TAR_END;
            break;
        }
        uint64_t size = 0;
        if (!tar_checksum_ok(h) || !tar_number(h + 124, 12, &size)) {
            snprintf(why, cap, "byte %llu: not a tar header (its checksum or size is wrong)",
                     (unsigned long long)at);
            break;
        }
        const char type = (char)h[156];
        const bool meta = type == 'x' || type == 'g' || type == 'L' || type == 'K';
        if (!meta && pax_size >= 0)
            size = (uint64_t)pax_size;
        const uint64_t data = at + TAR_BLOCK;
        if (size > t->size - data) {
            char *name = long_name ? long_name : header_name(h);
            snprintf(why, cap, "member '%s' (byte %llu): cut short (%llu bytes stated, %llu left)",
                     name ? name : "?", (unsigned long long)at, (unsigned long long)size,
                     (unsigned long long)(t->size - data));
            if (name != long_name)
                free(name);
            break;
        }
        t->pos = data + (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
        if (type == 'g' || type == 'K')
            continue;
        if (type == 'x' || type == 'L') {
            const uint64_t limit = type == 'x' ? WDS_MAX_PAX : WDS_MAX_NAME;
            char *text = size <= limit ? read_text(t, data, size) : NULL;
            bool ok = text != NULL;
            if (ok && type == 'x') {
                ok = pax_parse(text, (size_t)size, &long_name, &pax_size);
                free(text);
            } else if (ok) {
                free(long_name);
                long_name = text;
                ok = long_name[0] != '\0';
            }
            if (!ok) {
                snprintf(why, cap, "byte %llu: a %s that cannot be read (%llu bytes)",
                         (unsigned long long)at, type == 'x' ? "pax header" : "GNU long name",
                         (unsigned long long)size);
                break;
            }
            continue;
        }
        m->name = long_name ? long_name : header_name(h);
        long_name = NULL;
        m->at = at;
        m->offset = data;
        m->size = size;
        if (!m->name) {
            snprintf(why, cap, "out of memory");
            break;
        }
        if (type == 'S') {
            snprintf(why, cap, "member '%s' (byte %llu): a GNU sparse file, not supported", m->name,
                     (unsigned long long)at);
            free(m->name);
            m->name = NULL;
            break;
        }
        return type == '0' || type == '\0' || type == '7' ? TAR_FILE : TAR_OTHER;
    }
    free(long_name);
    return rc;
}

/* ---- keys seen: an open-addressing set of strings, each with its first member ---- */

typedef struct seen {
    char **key, **first;
    size_t n, cap;
} seen;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static size_t seen_slot(const seen *s, const char *key)
{
    size_t i = (size_t)hash_str(key) & (s->cap - 1);
    while (s->key[i] && strcmp(s->key[i], key) != 0)
        i = (i + 1) & (s->cap - 1);
    return i;
}

/* The first member of `key`, or NULL when it is new (then it is added with `first`). -1 in
 * *oom when out of memory. */
static const char *seen_add(seen *s, const char *key, const char *first, bool *oom)
{
    if (2 * (s->n + 1) > s->cap) {
        seen g = {calloc(s->cap ? 2 * s->cap : 1024, sizeof(char *)),
                  calloc(s->cap ? 2 * s->cap : 1024, sizeof(char *)), s->n,
                  s->cap ? 2 * s->cap : 1024};
        if (!g.key || !g.first) {
            free(g.key);
            free(g.first);
            *oom = true;
            return NULL;
        }
        for (size_t i = 0; i < s->cap; i++)
            if (s->key[i]) {
                const size_t j = seen_slot(&g, s->key[i]);
                g.key[j] = s->key[i];
                g.first[j] = s->first[i];
            }
        free(s->key);
        free(s->first);
        *s = g;
    }
    const size_t i = seen_slot(s, key);
    if (s->key[i])
        return s->first[i];
    s->key[i] = strdup(key);
    s->first[i] = strdup(first);
    if (!s->key[i] || !s->first[i]) {
        *oom = true;
        return NULL;
    }
    s->n++;
    return NULL;
}

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->cap; i++) {
        free(s->key[i]);
        free(s->first[i]);
    }
    free(s->key);
    free(s->first);
}

/* ---- samples ---- */

typedef struct part {
    char *ext;    /* lower-cased */
    char *member; /* its name in the tar */
    uint64_t offset, size;
} part;

typedef struct wds {
    const pack_opts *o;
    pack_samples *ss;
    bool have_schema;
    char *exts[STOKER_MAX_FIELDS]; /* field i's extension */
    char **dropped;                /* extensions --schema maps to null */
    size_t ndropped;
    char schema_from[1300];
    const char *tar; /* the tar being read */
    int fd;
    char *key; /* the current sample's */
    part parts[WDS_MAX_PARTS];
    size_t nparts;
    seen keys;
    size_t passed_over;
} wds;

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
}

/* WebDataset's split of a member's name into key and extension; false when the name has no
 * such form (no dot in its base name, or a base name that starts with one) or is one of
 * WebDataset's "__...__" members at the top. */
static bool split_name(const char *name, char **key, char **ext)
{
    const char *slash = strrchr(name, '/'), *base = slash ? slash + 1 : name;
    const char *dot = strchr(base, '.');
    const size_t n = strlen(name);
    if (!dot || dot == base || !dot[1] ||
        (!slash && n >= 4 && strncmp(name, "__", 2) == 0 && strcmp(name + n - 2, "__") == 0))
        return false;
    *key = strndup(name, (size_t)(dot - name));
    *ext = strdup(dot + 1);
    if (*ext)
        lower(*ext);
    return *key && *ext;
}

/* The default field name of an extension: '.' and '-' as '_'; NULL when that is no field
 * name (other characters, a leading digit, too long). */
static bool default_name(const char *ext, char *out, size_t cap)
{
    const size_t n = strlen(ext);
    if (n == 0 || n > STOKER_FIELD_NAME_MAX || n >= cap || (ext[0] >= '0' && ext[0] <= '9'))
        return false;
    for (size_t i = 0; i <= n; i++) {
        const char c = ext[i];
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '\0';
        if (!ok && c != '.' && c != '-')
            return false;
        out[i] = ok ? c : '_';
    }
    return true;
}

/* The kind an extension's last part gives without --schema. */
static int32_t kind_of_ext(const char *ext)
{
    const char *last = strrchr(ext, '.');
    last = last ? last + 1 : ext;
    if (strcmp(last, "jpg") == 0 || strcmp(last, "jpeg") == 0)
        return STOKER_FIELD_JPEG;
    if (strcmp(last, "png") == 0)
        return STOKER_FIELD_PNG;
    if (strcmp(last, "cls") == 0)
        return STOKER_FIELD_INT64;
    if (strcmp(last, "npy") == 0)
        return STOKER_FIELD_RAW;
    return STOKER_FIELD_BYTES;
}

/* Reads a .npy member's header; 0, or -1 with why. */
static int npy_head(const wds *w, const part *p, pack_npy_head *h, char *why, size_t cap)
{
    const size_t n = p->size < WDS_MAX_NPY_HEAD ? (size_t)p->size : WDS_MAX_NPY_HEAD;
    uint8_t *buf = malloc(n ? n : 1);
    char msg[300];
    int rc = -1;
    if (!buf)
        snprintf(why, cap, "out of memory");
    else if (read_at(w->fd, p->offset, buf, n) < 0)
        snprintf(why, cap, "member '%s': %s", p->member, strerror(errno));
    else if (pack_npy_head_parse(buf, n, h, msg, sizeof msg) < 0)
        snprintf(why, cap, "member '%s': %s", p->member, msg);
    else if (h->fortran)
        snprintf(why, cap, "member '%s': a Fortran-order array (save it in C order)", p->member);
    else
        rc = 0;
    free(buf);
    return rc;
}

/* The schema from the first sample (w->parts); 0 or an exit code after printing why. */
static int infer_schema(wds *w, const char *where)
{
    pack_schema *sc = &w->ss->schema;
    snprintf(w->schema_from, sizeof w->schema_from, "%s (the schema of its first sample)", where);
    for (size_t i = 0; i < w->nparts; i++) {
        const part *p = &w->parts[i];
        char name[STOKER_FIELD_NAME_MAX + 1], why[600];
        if (sc->n == STOKER_MAX_FIELDS) {
            cli_err("%s: more than %d extensions: a sample has at most %d fields", where,
                    STOKER_MAX_FIELDS, STOKER_MAX_FIELDS);
            return PACK_FAIL;
        }
        if (!default_name(p->ext, name, sizeof name)) {
            cli_err("%s: extension '%s' (member '%s') makes no field name (letters, digits and "
                    "_, not first a digit); name it with --schema",
                    where, p->ext, p->member);
            return PACK_FAIL;
        }
        const int32_t kind = kind_of_ext(p->ext);
        pack_npy_head h = {0};
        if (kind == STOKER_FIELD_RAW && npy_head(w, p, &h, why, sizeof why) < 0) {
            cli_err("%s: %s", where, why);
            return PACK_FAIL;
        }
        if (h.ndim > STOKER_MAX_DIMS) {
            cli_err("%s: member '%s': more than %d dimensions", where, p->member, STOKER_MAX_DIMS);
            return PACK_FAIL;
        }
        if (pack_schema_find(sc, name) >= 0) {
            cli_err("%s: extensions give the field name \"%s\" twice; name them with --schema",
                    where, name);
            return PACK_FAIL;
        }
        pack_schema_add(sc, name, kind, h.dtype, h.ndim, h.shape, 0, NULL);
        w->exts[sc->n - 1] = strdup(p->ext);
        if (!w->exts[sc->n - 1]) {
            cli_err("out of memory");
            return PACK_FAIL;
        }
    }
    w->have_schema = true;
    return 0;
}

/* --schema FILE: extensions to fields; 0 or an exit code after printing why. */
static int load_schema(wds *w)
{
    const char *path = w->o->schema;
    json_value v = {0};
    if (pack_read_json(path, "schema", &v) < 0)
        return PACK_FAIL;
    snprintf(w->schema_from, sizeof w->schema_from, "%s", path);
    int rc = 0;
    if (v.type != JSON_OBJECT || v.n == 0) {
        cli_err("%s: a --wds schema is an object of extensions ({\"jpg\": \"jpeg\", \"cls\": "
                "{\"kind\": \"int64\", \"name\": \"label\"}, ...}), not %s",
                path, v.type == JSON_OBJECT ? "an empty one" : json_type_name(v.type));
        rc = PACK_FAIL;
    }
    w->dropped = calloc(v.n ? v.n : 1, sizeof *w->dropped);
    pack_schema *sc = &w->ss->schema;
    for (size_t i = 0; rc == 0 && i < v.n; i++) {
        char *ext = strdup(v.keys[i]);
        const json_value *f = &v.items[i];
        const json_value *nm = f->type == JSON_OBJECT ? json_get(f, "name") : NULL;
        char name[STOKER_FIELD_NAME_MAX + 1];
        if (!ext || !w->dropped) {
            free(ext);
            cli_err("out of memory");
            rc = PACK_FAIL;
            break;
        }
        lower(ext);
        bool twice = false;
        for (int32_t j = 0; j < sc->n; j++)
            twice |= strcmp(w->exts[j], ext) == 0;
        for (size_t j = 0; j < w->ndropped; j++)
            twice |= strcmp(w->dropped[j], ext) == 0;
        if (twice) {
            cli_err("%s: extension \"%s\" is given twice (extensions are matched in lower case)",
                    path, ext);
            free(ext);
            rc = PACK_FAIL;
        } else if (f->type == JSON_NULL) {
            w->dropped[w->ndropped++] = ext;
        } else if (nm && (nm->type != JSON_STRING || strlen(nm->string) > STOKER_FIELD_NAME_MAX)) {
            cli_err("%s: extension \"%s\": \"name\" must be a field name (a string of at most %d "
                    "bytes)",
                    path, ext, STOKER_FIELD_NAME_MAX);
            free(ext);
            rc = PACK_FAIL;
        } else if (!nm && !default_name(ext, name, sizeof name)) {
            cli_err("%s: extension \"%s\" makes no field name: give it a \"name\"", path, ext);
            free(ext);
            rc = PACK_FAIL;
        } else if (sc->n == STOKER_MAX_FIELDS) {
            cli_err("%s: more than %d fields", path, STOKER_MAX_FIELDS);
            free(ext);
            rc = PACK_FAIL;
        } else {
            /* The field's own form: the object without "name" (a shallow copy). */
            json_value copy = *f;
            json_value items[64];
            char *keys[64];
            if (nm) {
                copy.n = 0;
                copy.items = items;
                copy.keys = keys;
                for (size_t k = 0; k < f->n && copy.n < 64; k++)
                    if (strcmp(f->keys[k], "name") != 0) {
                        items[copy.n] = f->items[k];
                        keys[copy.n++] = f->keys[k];
                    }
            }
            if (pack_schema_parse_field(nm ? nm->string : name, &copy, path, sc) < 0) {
                free(ext);
                rc = PACK_FAIL;
            } else {
                w->exts[sc->n - 1] = ext;
            }
        }
    }
    if (rc == 0 && sc->n == 0) {
        cli_err("%s: every extension is left out (null): no fields", path);
        rc = PACK_FAIL;
    }
    json_free(&v);
    w->have_schema = rc == 0;
    return rc;
}

/* Reads a member of ASCII text (an int64 or float32 value), blanks around it dropped. */
static int read_number_text(const wds *w, const part *p, char *buf, size_t cap, char *why,
                            size_t wcap)
{
    if (p->size >= cap) {
        snprintf(why, wcap, "member '%s': %llu bytes, not a number's text", p->member,
                 (unsigned long long)p->size);
        return -1;
    }
    if (read_at(w->fd, p->offset, buf, (size_t)p->size) < 0) {
        snprintf(why, wcap, "member '%s': %s", p->member, strerror(errno));
        return -1;
    }
    size_t b = 0, e = (size_t)p->size;
    while (b < e && strchr(" \t\r\n", buf[b]))
        b++;
    while (e > b && strchr(" \t\r\n", buf[e - 1]))
        e--;
    memmove(buf, buf + b, e - b);
    buf[e - b] = '\0';
    if (strlen(buf) != e - b || e == b) {
        snprintf(why, wcap, "member '%s': %s", p->member,
                 e == b ? "empty, not a number" : "holds a NUL, not a number");
        return -1;
    }
    return 0;
}

/* Field f's value from member p; 0, or -1 with why. */
static int part_value(const wds *w, const stoker_field_desc *f, const part *p, pack_value *v,
                      char *why, size_t cap)
{
    char text[WDS_MAX_NUMBER];
    if (f->kind == STOKER_FIELD_INT64 || f->kind == STOKER_FIELD_FLOAT32) {
        if (read_number_text(w, p, text, sizeof text, why, cap) < 0)
            return -1;
        char *end = NULL;
        errno = 0;
        if (f->kind == STOKER_FIELD_INT64) {
            const long long x = strtoll(text, &end, 10);
            if (errno || *end || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) {
                snprintf(why, cap, "member '%s': '%s' is not an integer (int64)", p->member, text);
                return -1;
            }
            const int64_t i = x;
            return pack_value_bytes(v, &i, 8) < 0 ? (snprintf(why, cap, "out of memory"), -1) : 0;
        }
        const double d = strtod(text, &end);
        if (*end || end == text || (isfinite(d) && fabs(d) > FLT_MAX)) {
            snprintf(why, cap, "member '%s': '%s' is not a number (float32)", p->member, text);
            return -1;
        }
        const float x = (float)d;
        return pack_value_bytes(v, &x, 4) < 0 ? (snprintf(why, cap, "out of memory"), -1) : 0;
    }
    uint64_t off = p->offset, size = p->size;
    if (f->kind == STOKER_FIELD_RAW || f->kind == STOKER_FIELD_ARRAY) {
        pack_npy_head h;
        if (npy_head(w, p, &h, why, cap) < 0)
            return -1;
        const bool array = f->kind == STOKER_FIELD_ARRAY;
        bool same = h.dtype == f->dtype && h.ndim == f->ndim + (array ? 1 : 0);
        uint64_t count = h.itemsize;
        for (int32_t d = 0; same && d < h.ndim; d++) {
            same = !(array && d == 0) ? h.shape[d] == f->shape[d - (array ? 1 : 0)] : true;
            if (__builtin_mul_overflow(count, (uint64_t)h.shape[d], &count))
                count = UINT64_MAX; /* matches no member's size */
        }
        if (!same) {
            char got[160] = "", want[160] = "";
            size_t gl = 0, wl = 0;
            for (int32_t d = 0; d < h.ndim && gl < sizeof got; d++)
                gl += (size_t)snprintf(got + gl, sizeof got - gl, "%s%lld", d ? ", " : "",
                                       (long long)h.shape[d]);
            if (array)
                wl += (size_t)snprintf(want, sizeof want, "N");
            for (int32_t d = 0; d < f->ndim && wl < sizeof want; d++)
                wl += (size_t)snprintf(want + wl, sizeof want - wl, "%s%lld",
                                       d || array ? ", " : "", (long long)f->shape[d]);
            snprintf(why, cap, "member '%s': a %s array of shape (%s), the field is %s [%s]",
                     p->member, stoker_dtype_name(h.dtype), got, stoker_dtype_name(f->dtype), want);
            return -1;
        }
        if (count != p->size - h.data_off) {
            snprintf(why, cap, "member '%s': %llu data bytes, its header says %llu", p->member,
                     (unsigned long long)(p->size - h.data_off), (unsigned long long)count);
            return -1;
        }
        off += h.data_off;
        size -= h.data_off;
    }
    v->file = strdup(w->tar);
    v->member = strdup(p->member);
    if (!v->file || !v->member) {
        snprintf(why, cap, "out of memory");
        return -1;
    }
    v->offset = (int64_t)off;
    v->size = size;
    v->set = true;
    return 0;
}

static int32_t field_of_ext(const wds *w, const char *ext)
{
    for (int32_t i = 0; i < w->ss->schema.n; i++)
        if (strcmp(w->exts[i], ext) == 0)
            return i;
    return -1;
}

static bool dropped(const wds *w, const char *ext)
{
    for (size_t i = 0; i < w->ndropped; i++)
        if (strcmp(w->dropped[i], ext) == 0)
            return true;
    return false;
}

static void clear_parts(wds *w)
{
    for (size_t i = 0; i < w->nparts; i++) {
        free(w->parts[i].ext);
        free(w->parts[i].member);
    }
    w->nparts = 0;
    free(w->key);
    w->key = NULL;
}

/* The current sample (w->key, w->parts) into the list, or bad; 0 or an exit code. */
static int finish_sample(wds *w)
{
    if (!w->key)
        return 0;
    char where[1200], why[2800];
    snprintf(where, sizeof where, "%s: sample %s", w->tar, w->key);
    int rc = !w->have_schema ? infer_schema(w, where) : 0;
    pack_samples *ss = w->ss;
    pack_sample *s = rc == 0 ? pack_samples_add(ss, where, w->key) : NULL;
    if (rc == 0 && !s) {
        cli_err("out of memory");
        rc = PACK_FAIL;
    }
    why[0] = '\0';
    for (size_t i = 0; rc == 0 && !why[0] && i < w->nparts; i++) {
        const part *p = &w->parts[i];
        const int32_t f = field_of_ext(w, p->ext);
        char r[900];
        if (f < 0 && !dropped(w, p->ext))
            snprintf(why, sizeof why, "extension \"%s\" (member '%s') is not in the schema (%s)",
                     p->ext, p->member, w->schema_from);
        else if (f >= 0 && part_value(w, &ss->schema.f[f], p, &s->v[f], r, sizeof r) < 0)
            snprintf(why, sizeof why, "field \"%s\": %s", ss->schema.names[f], r);
    }
    for (int32_t f = 0; rc == 0 && !why[0] && f < ss->schema.n; f++)
        if (!s->v[f].set)
            snprintf(why, sizeof why, "field \"%s\" (extension %s): missing", ss->schema.names[f],
                     w->exts[f]);
    if (rc == 0 && why[0])
        rc = pack_samples_bad(w->o, ss, where, why);
    clear_parts(w);
    return rc;
}

/* One regular member; 0 or an exit code. */
static int take_member(wds *w, member *m)
{
    char *key = NULL, *ext = NULL;
    if (!split_name(m->name, &key, &ext)) {
        free(key);
        free(ext);
        w->passed_over++;
        return 0;
    }
    int rc = 0;
    if (!w->key || strcmp(w->key, key) != 0) {
        rc = finish_sample(w);
        char first[1200];
        snprintf(first, sizeof first, "member '%s' of %s", m->name, w->tar);
        bool oom = false;
        const char *before = rc == 0 ? seen_add(&w->keys, key, first, &oom) : NULL;
        if (rc == 0 && (before || oom)) {
            if (oom)
                cli_err("out of memory");
            else
                cli_err("%s: member '%s' (byte %llu): key %s was met before, in %s: a sample's "
                        "members must be consecutive",
                        w->tar, m->name, (unsigned long long)m->at, key, before);
            rc = PACK_FAIL;
        }
        if (rc == 0) {
            w->key = key;
            key = NULL;
        }
    }
    for (size_t i = 0; rc == 0 && i < w->nparts; i++)
        if (strcmp(w->parts[i].ext, ext) == 0) {
            cli_err("%s: members '%s' and '%s' both give sample %s the extension %s", w->tar,
                    w->parts[i].member, m->name, w->key, ext);
            rc = PACK_FAIL;
        }
    if (rc == 0 && w->nparts == WDS_MAX_PARTS) {
        cli_err("%s: sample %s has more than %d members", w->tar, w->key, WDS_MAX_PARTS);
        rc = PACK_FAIL;
    }
    if (rc == 0) {
        w->parts[w->nparts++] = (part){ext, m->name, m->offset, m->size};
        m->name = NULL;
        ext = NULL;
    }
    free(key);
    free(ext);
    return rc;
}

static int read_tar(wds *w, const char *path)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    const bool got = fd >= 0 && fstat(fd, &st) == 0;
    if (!got || !S_ISREG(st.st_mode)) {
        cli_err("%s: %s", path, got ? "not a regular file" : strerror(errno));
        if (fd >= 0)
            close(fd);
        return PACK_FAIL;
    }
    tar t = {path, fd, (uint64_t)st.st_size, 0};
    w->tar = path;
    w->fd = fd;
    int rc = 0;
    char why[1200];
    for (;;) {
        member m = {0};
        const int r = tar_next(&t, &m, why, sizeof why);
        if (r < 0) {
            cli_err("%s: %s", path, why);
            rc = PACK_FAIL;
        } else if (r == TAR_OTHER) {
            w->passed_over++;
        } else if (r == TAR_FILE) {
            rc = take_member(w, &m);
        }
        free(m.name);
        if (r <= 0 || rc != 0)
            break;
    }
    if (rc == 0)
        rc = finish_sample(w); /* a sample ends with its tar: keys never span two */
    clear_parts(w);
    close(fd);
    return rc;
}

int pack_wds_load(const pack_opts *o, pack_samples *ss)
{
    wds *w = calloc(1, sizeof *w);
    if (!w) {
        cli_err("out of memory");
        return PACK_FAIL;
    }
    w->o = o;
    w->ss = ss;
    ss->source = "WebDataset tars";
    int rc = o->schema ? load_schema(w) : 0;
    for (int i = -1; rc == 0 && i < o->n_wds_more; i++)
        rc = read_tar(w, i < 0 ? o->wds : o->wds_more[i]);
    if (rc == 0 && w->passed_over && !o->quiet)
        fprintf(stderr,
                "stoker-pack: %zu tar members passed over (not regular files, or no KEY.EXT "
                "name)\n",
                w->passed_over);
    ss->schema_from_owned = strdup(w->schema_from[0] ? w->schema_from : o->wds);
    ss->schema_from = ss->schema_from_owned ? ss->schema_from_owned : o->wds;
    for (int32_t i = 0; i < STOKER_MAX_FIELDS; i++)
        free(w->exts[i]);
    for (size_t i = 0; i < w->ndropped; i++)
        free(w->dropped[i]);
    free(w->dropped);
    seen_free(&w->keys);
    free(w);
    return rc;
}
