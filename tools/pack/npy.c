/* SPDX-License-Identifier: Apache-2.0 */
/* NumPy .npy files (format versions 1, 2 and 3), mapped read-only. The header is untrusted
 * text: it is parsed by a small strict tokenizer and every size is overflow-checked against
 * the file's real size before anything is read. */
#include "pack.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

bool pack_is_npy(const char *path)
{
    char head[6];
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    const bool yes = read(fd, head, sizeof head) == (ssize_t)sizeof head &&
                     memcmp(head, npy_magic, sizeof head) == 0;
    close(fd);
    return yes;
}

/* The header dictionary's three entries. */
typedef struct npy_header {
    char descr[16];
    int fortran; /* -1 unset */
    int ndim;    /* -1 unset */
    int64_t shape[STOKER_MAX_DIMS + 1];
} npy_header;

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes (all the header ever holds) into out[cap]. */
static bool read_string(cursor *c, char *out, size_t cap)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    const char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[n] = '\0';
    return true;
}

static bool read_word(cursor *c, const char *word)
{
    skip_space(c);
    const size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return false;
    c->p += n;
    return true;
}

static bool read_int(cursor *c, int64_t *v)
{
    skip_space(c);
    int64_t x = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (x > (INT64_MAX - (*c->p - '0')) / 10)
            return false;
        x = x * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') /* Python 2 longs */
        c->p++;
    *v = x;
    return c->p > start;
}

static bool read_shape(cursor *c, npy_header *h)
{
    if (!eat(c, '('))
        return false;
    h->ndim = 0;
    if (eat(c, ')'))
        return true;
    for (;;) {
        if (h->ndim > STOKER_MAX_DIMS || !read_int(c, &h->shape[h->ndim]))
            return false;
        h->ndim++;
        if (eat(c, ')'))
            return true;
        if (!eat(c, ','))
            return false;
        if (eat(c, ')'))
            return true;
    }
}

static bool parse_header(const char *text, size_t len, npy_header *h)
{
    cursor c = {text, text + len};
    h->descr[0] = '\0';
    h->fortran = -1;
    h->ndim = -1;
    if (!eat(&c, '{'))
        return false;
    while (!eat(&c, '}')) {
        char key[32];
        if (!read_string(&c, key, sizeof key) || !eat(&c, ':'))
            return false;
        bool ok;
        if (strcmp(key, "descr") == 0)
            ok = read_string(&c, h->descr, sizeof h->descr);
        else if (strcmp(key, "fortran_order") == 0) {
            h->fortran = read_word(&c, "True") ? 1 : read_word(&c, "False") ? 0 : -1;
            ok = h->fortran >= 0;
        } else if (strcmp(key, "shape") == 0)
            ok = read_shape(&c, h);
        else
            ok = false;
        if (!ok)
            return false;
        if (!eat(&c, ',')) {
            if (!eat(&c, '}'))
                return false;
            break;
        }
    }
    return h->descr[0] && h->fortran >= 0 && h->ndim >= 0;
}

/* '<u1', '|b1', '<f4', ...: little-endian (or byte-sized) numbers only. */
static bool parse_descr(const char *d, pack_npy_head *a)
{
    static const struct {
        char kind;
        size_t size;
        int32_t dtype;
    } types[] = {
        {'u', 1, STOKER_DTYPE_UINT8},   {'i', 1, STOKER_DTYPE_INT8},
        {'u', 2, STOKER_DTYPE_UINT16},  {'i', 2, STOKER_DTYPE_INT16},
        {'u', 4, STOKER_DTYPE_UINT32},  {'i', 4, STOKER_DTYPE_INT32},
        {'u', 8, STOKER_DTYPE_UINT64},  {'i', 8, STOKER_DTYPE_INT64},
        {'f', 2, STOKER_DTYPE_FLOAT16}, {'f', 4, STOKER_DTYPE_FLOAT32},
        {'f', 8, STOKER_DTYPE_FLOAT64}, {'b', 1, STOKER_DTYPE_BOOL},
    };
    if (strlen(d) != 3 || !strchr("<|=>", d[0]) || d[2] < '1' || d[2] > '8')
        return false;
    const size_t size = (size_t)(d[2] - '0');
    if (d[0] == '>' && size != 1)
        return false;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (types[i].kind == d[1] && types[i].size == size) {
            a->kind = d[1];
            a->itemsize = size;
            a->dtype = types[i].dtype;
            return true;
        }
    return false;
}

int pack_npy_head_parse(const uint8_t *p, size_t avail, pack_npy_head *a, char *why, size_t cap)
{
    memset(a, 0, sizeof *a);
    if (avail < 10 || memcmp(p, npy_magic, 6) != 0) {
        snprintf(why, cap, "not a .npy file");
        return -1;
    }
    const int major = p[6];
    size_t hlen, off;
    if (major == 1) {
        hlen = (size_t)p[8] | (size_t)p[9] << 8;
        off = 10;
    } else if ((major == 2 || major == 3) && avail >= 12) {
        hlen = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
        off = 12;
    } else {
        snprintf(why, cap, ".npy format version %d is not supported", major);
        return -1;
    }
    if (hlen > avail - off) {
        snprintf(why, cap, "header length %zu runs past the end of the file", hlen);
        return -1;
    }
    npy_header h;
    if (!parse_header((const char *)p + off, hlen, &h)) {
        snprintf(why, cap, "malformed .npy header");
        return -1;
    }
    if (!parse_descr(h.descr, a)) {
        snprintf(why, cap,
                 "dtype '%s' is not supported (little-endian u1..u8, i1..i8, f2, f4, f8, b1)",
                 h.descr);
        return -1;
    }
    a->data_off = off + hlen;
    a->fortran = h.fortran == 1 && h.ndim > 1; /* one dimension reads alike in both orders */
    a->ndim = h.ndim;
    memcpy(a->shape, h.shape, sizeof a->shape);
    return 0;
}

/* Checks the parsed header against the file and fills the array's geometry. */
static int check_geometry(pack_npy *a, const pack_npy_head *h)
{
    if (h->ndim < 1) {
        cli_err("%s: a 0-d array has no rows", a->path);
        return -1;
    }
    if (h->fortran) {
        cli_err("%s: Fortran-order arrays are not supported (save with C order)", a->path);
        return -1;
    }
    a->kind = h->kind;
    a->itemsize = h->itemsize;
    a->dtype = h->dtype;
    uint64_t row = a->itemsize, total;
    a->ndim = h->ndim - 1;
    for (int i = 1; i < h->ndim; i++) {
        a->shape[i - 1] = h->shape[i];
        if (__builtin_mul_overflow(row, (uint64_t)h->shape[i], &row)) {
            cli_err("%s: shape overflows", a->path);
            return -1;
        }
    }
    a->rows = (uint64_t)h->shape[0];
    if (row == 0 || __builtin_mul_overflow(row, a->rows, &total) || row > SIZE_MAX) {
        cli_err("%s: rows of %llu bytes cannot be records", a->path, (unsigned long long)row);
        return -1;
    }
    a->row_bytes = (size_t)row;
    if (a->map_size - h->data_off != total) {
        cli_err("%s: holds %zu data bytes, its header says %llu (truncated or padded)", a->path,
                a->map_size - h->data_off, (unsigned long long)total);
        return -1;
    }
    a->data = (const uint8_t *)a->map + h->data_off;
    return 0;
}

static int parse(pack_npy *a)
{
    pack_npy_head h;
    char why[256];
    if (pack_npy_head_parse(a->map, a->map_size, &h, why, sizeof why) < 0) {
        cli_err("%s: %s", a->path, why);
        return -1;
    }
    return check_geometry(a, &h);
}

int pack_npy_open(const char *path, pack_npy *a)
{
    memset(a, 0, sizeof *a);
    a->path = path;
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cli_err("%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    a->map_size = (size_t)st.st_size;
    a->map = a->map_size ? mmap(NULL, a->map_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    const int err = errno;
    close(fd);
    if (a->map == MAP_FAILED) {
        a->map = NULL;
        cli_err("%s: %s", path, a->map_size ? strerror(err) : "empty file");
        return -1;
    }
    if (parse(a) < 0) {
        pack_npy_close(a);
        return -1;
    }
    return 0;
}

void pack_npy_close(pack_npy *a)
{
    if (a->map)
        munmap(a->map, a->map_size);
    a->map = NULL;
}
