/* Building the record list: ImageFolder trees (torchvision's order and labels) and list
 * files; the shuffled storage order. */
#include "pack.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
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

/* A file found under a class folder: its folder (relative to the class) and name, sorted
 * as torchvision does: sorted(os.walk(...)) orders by folder path, then names sorted; and
 * its size (-1: stat failed). */
typedef struct found {
    char *dir, *name;
    int64_t size;
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

/* Collects image files under base/rel (symlinks followed, like os.walk(followlinks=True);
 * depth-limited against link loops). */
static int walk(const char *base, const char *rel, int depth, found_list *out, size_t *ignored)
{
    char *dir = join(base, rel);
    DIR *d = opendir(dir);
    if (!d) {
        cli_err("%s: %s", dir, strerror(errno));
        free(dir);
        return -1;
    }
    int rc = 0;
    const struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = join(dir, e->d_name);
        struct stat st;
        const bool found_it = stat(path, &st) == 0;
        const bool is_dir = found_it && S_ISDIR(st.st_mode);
        free(path);
        if (is_dir && depth < 32) {
            char *sub = join(rel, e->d_name);
            rc = walk(base, sub, depth + 1, out, ignored);
            free(sub);
        } else if (!is_dir && has_image_ext(e->d_name)) {
            if (out->n == out->cap) {
                out->cap = out->cap ? 2 * out->cap : 256;
                out->v = xrealloc(out->v, out->cap * sizeof *out->v);
            }
            out->v[out->n++] =
                (found){xstrdup(rel), xstrdup(e->d_name), found_it ? (int64_t)st.st_size : -1};
        } else if (!is_dir) {
            ++*ignored;
        }
    }
    closedir(d);
    free(dir);
    return rc;
}

/* Class names: the sub-folders of root, sorted byte-wise (torchvision's find_classes). */
static int list_classes(const char *root, pack_source *src)
{
    DIR *d = opendir(root);
    if (!d) {
        cli_err("%s: %s", root, strerror(errno));
        return -1;
    }
    size_t cap = 0;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *path = join(root, e->d_name);
        struct stat st;
        const bool is_dir = stat(path, &st) == 0 && S_ISDIR(st.st_mode);
        free(path);
        if (!is_dir)
            continue;
        if (src->nclasses == cap) {
            cap = cap ? 2 * cap : 64;
            src->classes = xrealloc(src->classes, cap * sizeof *src->classes);
        }
        src->classes[src->nclasses++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (src->nclasses)
        qsort(src->classes, src->nclasses, sizeof *src->classes, cmp_str);
    return 0;
}

int pack_scan_folder(const char *root, bool quiet, pack_source *src)
{
    if (list_classes(root, src) < 0)
        return -1;
    if (src->nclasses == 0) {
        cli_err("%s: no class folders (an ImageFolder tree has one folder per class)", root);
        return -1;
    }
    for (size_t c = 0; c < src->nclasses; c++) {
        char *cls = join(root, src->classes[c]);
        found_list f = {0};
        const int rc = walk(cls, "", 0, &f, &src->ignored);
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
            add_item(src, join(root, key), key, (int64_t)c, f.v[i].size);
            free(f.v[i].dir);
            free(f.v[i].name);
        }
        free(f.v);
        if (rc < 0)
            return -1;
    }
    return 0;
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
