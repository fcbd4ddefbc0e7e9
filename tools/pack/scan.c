/* SPDX-License-Identifier: Apache-2.0 */
/* Building the record list: ImageFolder trees (torchvision's order and labels) and list
 * files; the shuffled storage order. */
#include "pack.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* torchvision.datasets.folder.IMG_EXTENSIONS, matched case-insensitively. */
static const char *const image_exts[] = {".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                         ".pgm", ".tif",  ".tiff", ".webp"};

static bool has_image_ext(const char *name)
{
    const size_t n = strlen(name);
    for (size_t i = 0; i < sizeof image_exts / sizeof *image_exts; i++) {
        const size_t e = strlen(image_exts[i]);
        if (n >= e && strcasecmp(name + n - e, image_exts[i]) == 0)
            return true;
    }
    return false;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        cli_err("out of memory");
        exit(PACK_FAIL);
    }
    return d;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        cli_err("out of memory");
        exit(PACK_FAIL);
    }
    return q;
}

static char *join(const char *a, const char *b)
{
    const size_t na = strlen(a), nb = strlen(b);
    char *s = xrealloc(NULL, na + nb + 2);
    memcpy(s, a, na);
    size_t k = na;
    if (na && nb && a[na - 1] != '/')
        s[k++] = '/';
    memcpy(s + k, b, nb + 1);
    return s;
}

static void add_item(pack_source *src, char *path, char *key, int64_t label, int64_t size)
{
    if (src->n == src->cap) {
        src->cap = src->cap ? 2 * src->cap : 1024;
        src->items = xrealloc(src->items, src->cap * sizeof *src->items);
    }
    src->items[src->n++] = (pack_item){path, key, label, -1, size};
}

/* What a file or folder is, for telling two paths to it apart: its device and inode;
 * `known` is false when it could not be stat'ed. */
typedef struct file_id {
    dev_t dev;
    ino_t ino;
    bool known;
} file_id;

/* A file found under a class folder: its folder (relative to the class) and name, sorted
 * as torchvision does: sorted(os.walk(...)) orders by folder path, then names sorted; its
 * size (-1: stat failed), identity, and whether a symbolic link led to it (the file itself,
 * or a folder on its way from the class folder, is a link). */
typedef struct found {
    char *dir, *name;
    int64_t size;
    file_id id;
    bool via_link;
} found;

typedef struct found_list {
    found *v;
    size_t n, cap;
} found_list;

static int cmp_found(const void *a, const void *b)
{
    const found *x = a, *y = b;
    const int c = strcmp(x->dir, y->dir);
    return c ? c : strcmp(x->name, y->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder walked (or one above the class folder): a link to it is not followed again. */
typedef struct seen_dir {
    file_id id;
    char *rel; /* relative to the class folder; NULL for a folder above it */
} seen_dir;

/* A symbolic link to a folder, followed once every folder reached without links was
 * walked, so that a folder is named by a path without links where it has one. */
typedef struct link_dir {
    char *rel;
} link_dir;

/* One class folder's walk (symbolic links followed, like os.walk(followlinks=True), but
 * each folder walked once: a link to a folder walked already, or to one above it, is named
 * in a warning and not followed). */
typedef struct walker {
    const char *base, *cls;
    bool quiet;
    found_list *out;
    size_t *ignored, *warned;
    seen_dir *seen;
    size_t nseen, capseen;
    link_dir *links;
    size_t nlinks, caplinks, nextlink;
} walker;

enum { MAX_WARNINGS = 20, MAX_DEPTH = 64 };

/* A warning about the tree (links not followed, files reached twice), the first
 * MAX_WARNINGS printed, the rest counted (pack_scan_folder says how many). */
static void warn(bool quiet, size_t *warned, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warn(bool quiet, size_t *warned, const char *fmt, ...)
{
    if (quiet || ++*warned > MAX_WARNINGS)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_err("warning: %s", msg);
}

static bool same_id(file_id a, file_id b)
{
    return a.known && b.known && a.dev == b.dev && a.ino == b.ino;
}

static const seen_dir *find_seen(const walker *w, file_id id)
{
    for (size_t i = 0; i < w->nseen; i++)
        if (same_id(w->seen[i].id, id))
            return &w->seen[i];
    return NULL;
}

static void add_seen(walker *w, file_id id, const char *rel)
{
    if (w->nseen == w->capseen) {
        w->capseen = w->capseen ? 2 * w->capseen : 64;
        w->seen = xrealloc(w->seen, w->capseen * sizeof *w->seen);
    }
    w->seen[w->nseen++] = (seen_dir){id, rel ? xstrdup(rel) : NULL};
}

/* Is folder `anc` (relative) `rel` or a folder above it? */
static bool is_within(const char *rel, const char *anc)
{
    const size_t n = strlen(anc);
    return n == 0 || (strncmp(rel, anc, n) == 0 && (rel[n] == '\0' || rel[n] == '/'));
}

/* The folders above the class folder, up to the root: a link to one of them is a loop. */
static void add_above(walker *w)
{
    char *dir = join(w->base, "..");
    file_id last = {0};
    for (int i = 0; i < 4096; i++) {
        struct stat st;
        if (stat(dir, &st) != 0)
            break;
        const file_id id = {st.st_dev, st.st_ino, true};
        if (same_id(id, last)) /* "/.." is "/" */
            break;
        add_seen(w, id, NULL);
        last = id;
        char *up = join(dir, "..");
        free(dir);
        dir = up;
    }
    free(dir);
}

static void add_found(walker *w, const char *rel, const char *name, const struct stat *st,
                      bool via_link)
{
    found_list *out = w->out;
    if (out->n == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 256;
        out->v = xrealloc(out->v, out->cap * sizeof *out->v);
    }
    out->v[out->n++] =
        (found){xstrdup(rel), xstrdup(name), st ? (int64_t)st->st_size : -1,
                st ? (file_id){st->st_dev, st->st_ino, true} : (file_id){0}, via_link};
}

static void add_link(walker *w, const char *rel)
{
    if (w->nlinks == w->caplinks) {
        w->caplinks = w->caplinks ? 2 * w->caplinks : 16;
        w->links = xrealloc(w->links, w->caplinks * sizeof *w->links);
    }
    w->links[w->nlinks++] = (link_dir){xstrdup(rel)};
}

/* The names in folder `dir`, sorted (so that the walk, and which path reaches a folder
 * first, do not depend on the order readdir gives); NULL on failure (reported). */
static char **list_dir(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        cli_err("%s: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t cap = 0;
    *n = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            names = xrealloc(names, cap * sizeof *names);
        }
        names[(*n)++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (*n)
        qsort(names, *n, sizeof *names, cmp_str);
    return names ? names : xrealloc(NULL, 1);
}

/* Walks folder base/rel (already marked seen): files found, sub-folders walked, links to
 * folders kept for later (add_link). via_link: a link led here. */
static int walk(walker *w, const char *rel, int depth, bool via_link)
{
    char *dir = join(w->base, rel);
    size_t n = 0;
    char **names = list_dir(dir, &n);
    int rc = names ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char *path = join(dir, names[i]);
        char *sub = join(rel, names[i]);
        struct stat lst, st;
        const bool is_link = lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode);
        const bool found_it = is_link ? stat(path, &st) == 0 : (st = lst, true);
        const bool is_dir = found_it && S_ISDIR(st.st_mode);
        const file_id id = {st.st_dev, st.st_ino, found_it};
        const seen_dir *again = is_dir && !is_link ? find_seen(w, id) : NULL;
        if (is_dir && is_link) {
            add_link(w, sub);
        } else if (is_dir && again) { /* a bind mount of a folder walked already */
            warn(w->quiet, w->warned, "%s/%s: the folder %s%s%s again: not walked twice", w->cls,
                 sub, again->rel ? w->cls : "a folder above", again->rel && *again->rel ? "/" : "",
                 again->rel ? again->rel : "");
        } else if (is_dir && depth >= MAX_DEPTH) {
            warn(w->quiet, w->warned, "%s/%s: more than %d folders deep: not walked", w->cls, sub,
                 MAX_DEPTH);
        } else if (is_dir) {
            add_seen(w, id, sub);
            rc = walk(w, sub, depth + 1, via_link);
        } else if (has_image_ext(names[i])) {
            add_found(w, rel, names[i], found_it ? &st : NULL, via_link || is_link);
        } else {
            ++*w->ignored;
        }
        free(sub);
        free(path);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(dir);
    return rc;
}

/* How many folders deep `rel` lies below the class folder. */
static int depth_of(const char *rel)
{
    int d = 1;
    for (; *rel; rel++)
        d += *rel == '/';
    return d;
}

/* Follows the links to folders that the walk kept, in the order found (links found in the
 * folders they lead to join the queue): each to a folder not walked yet is walked; one to
 * a folder above it (a loop) or walked already is named and not followed. */
static int follow_links(walker *w)
{
    int rc = 0;
    for (; rc == 0 && w->nextlink < w->nlinks; w->nextlink++) {
        const char *rel = w->links[w->nextlink].rel;
        char *path = join(w->base, rel);
        struct stat st;
        const bool ok = stat(path, &st) == 0;
        free(path);
        const file_id id = {st.st_dev, st.st_ino, ok};
        const seen_dir *again = ok ? find_seen(w, id) : NULL;
        if (!ok)
            continue;
        if (again && !again->rel) {
            warn(w->quiet, w->warned,
                 "%s/%s: a symbolic link to a folder above the class folder (a loop): not "
                 "followed",
                 w->cls, rel);
        } else if (again && is_within(rel, again->rel)) {
            warn(w->quiet, w->warned,
                 "%s/%s: a symbolic link to %s%s%s, a folder it lies in (a loop): not followed",
                 w->cls, rel, w->cls, *again->rel ? "/" : "", again->rel);
        } else if (again) {
            warn(w->quiet, w->warned,
                 "%s/%s: a symbolic link to the folder %s/%s, walked already: not followed", w->cls,
                 rel, w->cls, again->rel);
        } else {
            add_seen(w, id, rel);
            rc = walk(w, rel, depth_of(rel), true);
        }
    }
    return rc;
}

/* Walks one class folder into `out`; -1 on failure (reported). */
static int walk_class(const char *base, const char *cls, bool quiet, bool via_link, found_list *out,
                      size_t *ignored, size_t *warned)
{
    walker w = {
        .base = base, .cls = cls, .quiet = quiet, .out = out, .ignored = ignored, .warned = warned};
    struct stat st;
    int rc = stat(base, &st) == 0 ? 0 : -1;
    if (rc < 0) {
        cli_err("%s: %s", base, strerror(errno));
    } else {
        add_above(&w);
        add_seen(&w, (file_id){st.st_dev, st.st_ino, true}, "");
        rc = walk(&w, "", 0, via_link);
    }
    if (rc == 0)
        rc = follow_links(&w);
    for (size_t i = 0; i < w.nseen; i++)
        free(w.seen[i].rel);
    for (size_t i = 0; i < w.nlinks; i++)
        free(w.links[i].rel);
    free(w.seen);
    free(w.links);
    return rc;
}
/* Class names: the sub-folders of root, sorted byte-wise (torchvision's find_classes). */
static int list_classes(const char *root, pack_source *src)
{
    size_t n = 0;
    char **names = list_dir(root, &n);
    if (!names)
        return -1;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = join(root, names[i]);
        struct stat st;
        const bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        free(path);
        if (!is_dir) {
            free(names[i]);
            continue;
        }
        if (src->nclasses == cap) {
            cap = cap ? 2 * cap : 64;
            src->classes = xrealloc(src->classes, cap * sizeof *src->classes);
        }
        src->classes[src->nclasses++] = names[i];
    }
    free(names);
    return 0;
}

/* Items i's identity and how it was reached, beside pack_source.items while scanning. */
typedef struct item_id {
    file_id id;
    bool via_link;
    size_t index;
} item_id;

static int cmp_item_id(const void *a, const void *b)
{
    const item_id *x = a, *y = b;
    if (x->id.dev != y->id.dev)
        return x->id.dev < y->id.dev ? -1 : 1;
    if (x->id.ino != y->id.ino)
        return x->id.ino < y->id.ino ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Leaves out the files reached more than once where a symbolic link is involved: the same
 * file under several names through links is one record. Of such a group, the names reached
 * without a link are kept (hard links are distinct files to torchvision too, and stay
 * distinct records); where every name goes through a link, the first in record order. */
static void drop_twice(pack_source *src, item_id *ids, bool quiet, size_t *warned)
{
    const size_t n = src->n;
    bool *drop = xrealloc(NULL, n * sizeof *drop);
    memset(drop, 0, n * sizeof *drop);
    qsort(ids, n, sizeof *ids, cmp_item_id);
    for (size_t g = 0, e; g < n; g = e) {
        bool any_link = false, any_direct = false;
        for (e = g; e < n && same_id(ids[e].id, ids[g].id); e++) {
            any_link |= ids[e].via_link;
            any_direct |= !ids[e].via_link;
        }
        if (!ids[g].id.known || e - g < 2 || !any_link)
            continue;
        size_t keep = g; /* the first kept: the first in record order without a link */
        for (size_t k = g; any_direct && k < e; k++)
            if (!ids[k].via_link) {
                keep = k;
                break;
            }
        for (size_t k = g; k < e; k++) {
            if (k == keep || (any_direct && !ids[k].via_link))
                continue;
            drop[ids[k].index] = true;
            warn(quiet, warned, "%s: the file %s again (through a symbolic link): packed once",
                 src->items[ids[k].index].key, src->items[ids[keep].index].key);
        }
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (drop[i]) {
            free(src->items[i].path);
            free(src->items[i].key);
        } else {
            src->items[m++] = src->items[i];
        }
    }
    src->n = m;
    free(drop);
}

/* The files of class c into src (and their identities into *ids); -1 on failure. */
static int scan_class(const char *root, size_t c, bool quiet, pack_source *src, item_id **ids,
                      size_t *capids, size_t *warned)
{
    char *cls = join(root, src->classes[c]);
    struct stat lst;
    const bool via_link = lstat(cls, &lst) == 0 && S_ISLNK(lst.st_mode);
    found_list f = {0};
    const int rc = walk_class(cls, src->classes[c], quiet, via_link, &f, &src->ignored, warned);
    free(cls);
    if (rc == 0 && f.n == 0 && !quiet)
        cli_err("warning: class folder '%s' has no images (label %zu stays assigned to it)",
                src->classes[c], c);
    if (f.n)
        qsort(f.v, f.n, sizeof *f.v, cmp_found);
    for (size_t i = 0; i < f.n; i++) {
        char *dir = join(src->classes[c], f.v[i].dir);
        char *key = join(dir, f.v[i].name);
        free(dir);
        if (src->n == *capids) {
            *capids = *capids ? 2 * *capids : 1024;
            *ids = xrealloc(*ids, *capids * sizeof **ids);
        }
        (*ids)[src->n] = (item_id){f.v[i].id, f.v[i].via_link, src->n};
        add_item(src, join(root, key), key, (int64_t)c, f.v[i].size);
        free(f.v[i].dir);
        free(f.v[i].name);
    }
    free(f.v);
    return rc;
}

int pack_scan_folder(const char *root, bool quiet, pack_source *src)
{
    if (list_classes(root, src) < 0)
        return -1;
    if (src->nclasses == 0) {
        cli_err("%s: no class folders (an ImageFolder tree has one folder per class)", root);
        return -1;
    }
    item_id *ids = NULL;
    size_t capids = 0, warned = 0;
    int rc = 0;
    for (size_t c = 0; rc == 0 && c < src->nclasses; c++)
        rc = scan_class(root, c, quiet, src, &ids, &capids, &warned);
    if (rc == 0 && src->n)
        drop_twice(src, ids, quiet, &warned);
    free(ids);
    if (warned > MAX_WARNINGS)
        cli_err("warning: ... and %zu more such warnings", warned - MAX_WARNINGS);
    return rc;
}

/* One "path<TAB>label" line; paths relative to the list file's folder unless absolute. */
static int parse_line(const char *list, size_t lineno, char *line, const char *base,
                      pack_source *src)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        line[--n] = '\0';
    if (n == 0 || line[0] == '#')
        return 0;
    char *tab = strrchr(line, '\t');
    if (!tab || tab == line) {
        cli_err("%s:%zu: expected 'path<TAB>label'", list, lineno);
        return -1;
    }
    *tab = '\0';
    char *end;
    errno = 0;
    const long long label = strtoll(tab + 1, &end, 10);
    if (errno || end == tab + 1 || *end != '\0') {
        cli_err("%s:%zu: label '%s' is not an integer", list, lineno, tab + 1);
        return -1;
    }
    char *path = line[0] == '/' ? xstrdup(line) : join(base, line);
    add_item(src, path, xstrdup(line), label, -1); /* its size: stat when needed */
    return 0;
}

int pack_scan_list(const char *list, pack_source *src)
{
    FILE *f = fopen(list, "r");
    if (!f) {
        cli_err("%s: %s", list, strerror(errno));
        return -1;
    }
    char *base = xstrdup(list);
    char *slash = strrchr(base, '/');
    if (slash)
        slash[slash == base ? 1 : 0] = '\0';
    else
        strcpy(base, ".");
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) >= 0)
        rc = parse_line(list, ++lineno, line, base, src);
    if (rc == 0 && ferror(f)) {
        cli_err("%s: %s", list, strerror(errno));
        rc = -1;
    }
    free(line);
    free(base);
    fclose(f);
    return rc;
}

void pack_source_free(pack_source *src)
{
    for (size_t i = 0; i < src->n; i++) {
        free(src->items[i].path);
        free(src->items[i].key);
    }
    for (size_t i = 0; i < src->nclasses; i++)
        free(src->classes[i]);
    free(src->items);
    free(src->classes);
    memset(src, 0, sizeof *src);
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, range) without modulo bias (Lemire's multiply-and-reject). */
static uint64_t bounded(uint64_t *s, uint64_t range)
{
    const uint64_t threshold = -range % range;
    for (;;) {
        const unsigned __int128 m = (unsigned __int128)splitmix64(s) * range;
        if ((uint64_t)m >= threshold)
            return (uint64_t)(m >> 64);
    }
}

size_t *pack_order(size_t n, bool shuffle, uint64_t seed)
{
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order)
        return NULL;
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    uint64_t state = seed;
    for (size_t i = n; shuffle && i > 1; i--) {
        const size_t j = (size_t)bounded(&state, i);
        const size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    return order;
}
