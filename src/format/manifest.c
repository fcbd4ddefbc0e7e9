/* SPDX-License-Identifier: Apache-2.0 */
/* The manifest: a small line-oriented UTF-8 text (docs/FORMAT.md), its escaping, loading
 * and parsing. Parsing trusts nothing: every count is checked against the limits and the
 * bytes left before allocating, every line against its grammar. */
#include "format/manifest.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int stoker__manifest_escape(stoker__buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s;
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != 0x7F && c != '\\')
            continue;
        int rc = stoker__buf_append(b, run, (size_t)(s - run));
        if (rc < 0)
            return rc;
        char esc[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};
        size_t n = 4;
        if (c == '\\' || c == '\n' || c == '\t') {
            esc[1] = c == '\\' ? '\\' : c == '\n' ? 'n' : 't';
            n = 2;
        }
        if ((rc = stoker__buf_append(b, esc, n)) < 0)
            return rc;
        run = s + 1;
    }
    return stoker__buf_append(b, run, (size_t)(s - run));
}

bool stoker__raw_size(int32_t dtype, int32_t ndim, const int64_t *shape, uint64_t *size)
{
    uint64_t n = stoker_dtype_size(dtype);
    if (n == 0 || ndim < 0 || ndim > STOKER_MAX_DIMS)
        return false;
    for (int32_t i = 0; i < ndim; i++)
        if (shape[i] < 0 || stoker__mul_ovf(n, (uint64_t)shape[i], &n))
            return false;
    *size = n;
    return true;
}

/* ---- loading ---- */

int stoker__manifest_load(int fd, const char *what, char **text, size_t *size, stoker__err *err)
{
    struct stat st;
    *text = NULL;
    STOKER_RETURN_IF(fstat(fd, &st) != 0, err, -errno, "%s: stat: %s", what,
                     stoker_strerror(-errno));
    STOKER_RETURN_IF(!S_ISREG(st.st_mode), err, STOKER_E_FORMAT, "%s: not a regular file", what);
    STOKER_RETURN_IF((uint64_t)st.st_size > STK_MANIFEST_MAX, err, STOKER_E_LIMIT,
                     "%s: manifest of %lld bytes exceeds the limit of %llu", what,
                     (long long)st.st_size, (unsigned long long)STK_MANIFEST_MAX);
    const size_t n = (size_t)st.st_size;
    char *buf = stoker__malloc(n + 1);
    STOKER_RETURN_IF(!buf, err, -ENOMEM, "%s: out of memory for %zu bytes", what, n);
    size_t got = 0;
    while (got < n) {
        const ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            const int e = r < 0 ? -errno : STOKER_E_CORRUPT;
            stoker__free(buf);
            return stoker__fail(err, e, "%s: read: %s", what,
                                r < 0 ? stoker_strerror(e) : "file shrank while reading");
        }
        got += (size_t)r;
    }
    buf[n] = '\0';
    *text = buf;
    *size = n;
    return 0;
}

/* ---- parsing ---- */

typedef struct cursor {
    char *text;
    size_t size;
    size_t pos;
    size_t end; /* where the crc line starts */
    uint64_t line;
    const char *what;
    stoker__err *err;
} cursor;

/* The next line (without its '\n', which becomes NUL); NULL at the crc line. */
static char *next_line(cursor *c, size_t *len)
{
    if (c->pos >= c->end)
        return NULL;
    char *s = c->text + c->pos;
    char *nl = memchr(s, '\n', c->end - c->pos);
    if (!nl) /* cannot happen: the crc line is preceded by '\n' */
        return NULL;
    *nl = '\0';
    *len = (size_t)(nl - s);
    c->pos += *len + 1;
    c->line++;
    return s;
}

static int bad(cursor *c, const char *why)
{
    return stoker__fail(c->err, STOKER_E_CORRUPT, "%s: line %llu: %s", c->what,
                        (unsigned long long)c->line, why);
}

/* Strict decimal: digits only, no leading zeros, at most INT64_MAX. */
static bool parse_u64(const char *s, size_t n, uint64_t *v)
{
    if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x > (uint64_t)INT64_MAX)
        return false;
    *v = x;
    return true;
}

static bool parse_hex32(const char *s, size_t n, uint32_t *v)
{
    if (n != 8)
        return false;
    uint32_t x = 0;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        const int d = ch >= '0' && ch <= '9'   ? ch - '0'
                      : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                               : -1;
        if (d < 0)
            return false;
        x = x << 4 | (uint32_t)d;
    }
    *v = x;
    return true;
}

/* Splits the next space-separated token off *s (of *n bytes). */
static bool token(char **s, size_t *n, char **tok, size_t *tlen)
{
    if (*n == 0)
        return false;
    char *sp = memchr(*s, ' ', *n);
    *tok = *s;
    *tlen = sp ? (size_t)(sp - *s) : *n;
    if (*tlen == 0)
        return false;
    *s += *tlen + (sp ? 1 : 0);
    *n -= *tlen + (sp ? 1 : 0);
    if (sp && *n == 0)
        return false; /* trailing space */
    (*tok)[*tlen] = '\0';
    return true;
}

/* A line "KEYWORD N"; N returned in *v. */
static int keyword_count(cursor *c, const char *kw, uint64_t *v)
{
    size_t n = 0;
    const char *s = next_line(c, &n);
    const size_t k = strlen(kw);
    char msg[96];
    snprintf(msg, sizeof msg, "expected \"%s N\"", kw);
    if (!s || n <= k + 1 || memcmp(s, kw, k) != 0 || s[k] != ' ' ||
        !parse_u64(s + k + 1, n - k - 1, v))
        return bad(c, msg);
    return 0;
}

/* Unescapes s[0..n) in place; NUL-terminates. Raw control bytes are refused. */
static bool unescape(char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch == 0x7F)
            return false;
        if (ch == '\\') {
            if (i + 1 >= n)
                return false;
            const char e = s[++i];
            if (e == '\\' || e == 'n' || e == 't') {
                ch = e == '\\' ? '\\' : e == 'n' ? '\n' : '\t';
            } else if (e == 'x' && i + 2 < n) {
                uint32_t v = 0;
                char hx[9] = "000000";
                hx[6] = s[i + 1];
                hx[7] = s[i + 2];
                if (!parse_hex32(hx, 8, &v) || v == 0)
                    return false;
                ch = (unsigned char)v;
                i += 2;
            } else {
                return false;
            }
        }
        s[o++] = (char)ch;
    }
    s[o] = '\0';
    return true;
}

static int parse_header(cursor *c, stoker__manifest *m)
{
    size_t n = 0;
    char *s = next_line(c, &n);
    const size_t k = strlen(STK_MANIFEST_MAGIC);
    uint64_t v = 0;
    if (!s || n <= k || memcmp(s, STK_MANIFEST_MAGIC " ", k + 1) != 0)
        return stoker__fail(c->err, STOKER_E_FORMAT, "%s: not a stoker manifest", c->what);
    if (!parse_u64(s + k + 1, n - k - 1, &v) || v < 1 || v > STOKER_MANIFEST_VERSION)
        return stoker__fail(c->err, STOKER_E_FORMAT,
                            "%s: manifest version %s is not supported (this library reads "
                            "versions 1 to %d; a newer stoker wrote it?)",
                            c->what, s + k + 1, STOKER_MANIFEST_VERSION);
    m->version = (uint32_t)v;
    int rc = keyword_count(c, "align", &v);
    if (rc < 0)
        return rc;
    if (v != 1 && v != 512 && v != 4096)
        return bad(c, "alignment must be 1, 512 or 4096");
    m->align = (uint32_t)v;
    return 0;
}

static int parse_field(cursor *c, stoker__manifest *m)
{
    size_t n = 0, tl = 0;
    char *s = next_line(c, &n), *tok = NULL;
    if (!s || !token(&s, &n, &tok, &tl) || strcmp(tok, "field") != 0 || !token(&s, &n, &tok, &tl))
        return bad(c, "expected \"field KIND\"");
    if (strcmp(tok, "bytes") == 0 || strcmp(tok, "jpeg") == 0) {
        m->kind = tok[0] == 'b' ? STOKER_FIELD_BYTES : STOKER_FIELD_JPEG;
        return n == 0 ? 0 : bad(c, "unexpected text after the field kind");
    }
    if (strcmp(tok, "raw") != 0)
        return bad(c, "unknown field kind");
    m->kind = STOKER_FIELD_RAW;
    if (!token(&s, &n, &tok, &tl))
        return bad(c, "raw field without dtype");
    for (int32_t d = 1; stoker_dtype_size(d) != 0; d++)
        if (strcmp(stoker_dtype_name(d), tok) == 0)
            m->dtype = d;
    uint64_t v = 0;
    if (m->dtype == 0)
        return bad(c, "unknown dtype");
    if (!token(&s, &n, &tok, &tl) || !parse_u64(tok, tl, &v) || v > STOKER_MAX_DIMS)
        return bad(c, "raw field: bad number of dimensions");
    m->ndim = (int32_t)v;
    for (int32_t i = 0; i < m->ndim; i++) {
        if (!token(&s, &n, &tok, &tl) || !parse_u64(tok, tl, &v))
            return bad(c, "raw field: bad dimension");
        m->shape[i] = (int64_t)v;
    }
    uint64_t size = 0;
    if (n != 0 || !stoker__raw_size(m->dtype, m->ndim, m->shape, &size))
        return bad(c, "raw field: bad shape");
    return 0;
}

/* One "field NAME KIND [ARGS] [TIE TARGET] [max M]" line of version 3 into field i. */
static int parse_schema_field(cursor *c, stoker__schema *sc, int32_t i)
{
    size_t n = 0, tl = 0;
    char *s = next_line(c, &n), *tok = NULL;
    stoker__field *f = &sc->f[i];
    f->target = -1;
    if (!s || !token(&s, &n, &tok, &tl) || strcmp(tok, "field") != 0 || !token(&s, &n, &tok, &tl))
        return bad(c, "expected \"field NAME KIND ...\"");
    if (tl > STOKER_FIELD_NAME_MAX)
        return bad(c, "field name longer than 63 bytes");
    memcpy(f->name, tok, tl + 1);
    if (!token(&s, &n, &tok, &tl) || (f->kind = stoker__field_kind_parse(tok)) == 0)
        return bad(c, "field: unknown kind");
    uint64_t v = 0;
    if (f->kind == STOKER_FIELD_RAW || f->kind == STOKER_FIELD_ARRAY) {
        if (!token(&s, &n, &tok, &tl))
            return bad(c, "field: no dtype");
        for (int32_t d = 1; stoker_dtype_size(d) != 0; d++)
            if (strcmp(stoker_dtype_name(d), tok) == 0)
                f->dtype = d;
        if (f->dtype == 0)
            return bad(c, "field: unknown dtype");
        if (!token(&s, &n, &tok, &tl) || !parse_u64(tok, tl, &v) || v > STOKER_MAX_DIMS)
            return bad(c, "field: bad number of dimensions");
        f->ndim = (int32_t)v;
        for (int32_t d = 0; d < f->ndim; d++) {
            if (!token(&s, &n, &tok, &tl) || !parse_u64(tok, tl, &v))
                return bad(c, "field: bad dimension");
            f->shape[d] = (int64_t)v;
        }
    }
    bool has_max = false;
    while (token(&s, &n, &tok, &tl)) {
        const int32_t tie = stoker__field_tie_parse(tok);
        if (tie != 0 && f->tie == 0 && !has_max) {
            f->tie = tie;
            if (!token(&s, &n, &tok, &tl))
                return bad(c, "field: a tie without its target");
            f->target = stoker__schema_find(sc, tok);
            if (f->target < 0 || f->target >= i)
                return bad(c, "field: tied to a field that does not come before it");
        } else if (strcmp(tok, "max") == 0 && !has_max) {
            if (!token(&s, &n, &tok, &tl) || !parse_u64(tok, tl, &v) || v > UINT32_MAX)
                return bad(c, "field: bad max");
            f->max = v;
            has_max = true;
        } else {
            return bad(c, "field: unexpected text");
        }
    }
    if (n != 0)
        return bad(c, "field: unexpected text");
    if (has_max != stoker__field_kind_variable(f->kind))
        return bad(c, has_max ? "field: max given for a fixed-size kind"
                              : "field: a variable kind needs its max");
    return 0;
}

/* Version 3's "fields F" and F field lines, checked as a schema. */
static int parse_fields(cursor *c, stoker__manifest *m)
{
    uint64_t v = 0;
    int rc = keyword_count(c, "fields", &v);
    if (rc < 0)
        return rc;
    if (v < 1 || v > STOKER_MAX_FIELDS)
        return bad(c, "a schema has 1 to 32 fields");
    m->schema = stoker__calloc(1, sizeof *m->schema);
    if (!m->schema)
        return stoker__fail(c->err, -ENOMEM, "%s: out of memory for the schema", c->what);
    m->schema->n = (int32_t)v;
    for (int32_t i = 0; i < m->schema->n; i++)
        if ((rc = parse_schema_field(c, m->schema, i)) < 0)
            return rc;
    stoker__err e = {0};
    if (stoker__schema_finish(m->schema, &e) < 0)
        return bad(c, e.msg);
    m->kind = STOKER_FIELD_BYTES;
    return 0;
}

/* Version 2's line after the field: "checked jpeg", for a JPEG data set whose every record
 * was decoded without damage before it was written; optional in version 3, for every JPEG
 * field. */
static int parse_checked(cursor *c, stoker__manifest *m)
{
    static const char line[] = "checked jpeg\n";
    if (m->version < 2)
        return 0;
    const size_t k = sizeof line - 1;
    if (m->version >= 3 && (c->end - c->pos < k || memcmp(c->text + c->pos, line, k) != 0))
        return 0;
    size_t n = 0;
    const char *s = next_line(c, &n);
    if (!s || n != k - 1 || memcmp(s, line, n) != 0)
        return bad(c, "expected \"checked jpeg\" (format version 2)");
    bool jpeg = m->kind == STOKER_FIELD_JPEG;
    for (int32_t i = 0; m->schema && i < m->schema->n; i++)
        jpeg = jpeg || m->schema->f[i].kind == STOKER_FIELD_JPEG;
    if (!jpeg)
        return bad(c, "\"checked jpeg\" in a data set without a jpeg field");
    m->jpeg_checked = true;
    return 0;
}

static int parse_classes(cursor *c, stoker__manifest *m)
{
    uint64_t v = 0;
    int rc = keyword_count(c, "classes", &v);
    if (rc < 0)
        return rc;
    /* each class line takes at least 7 bytes ("class \n") */
    if (v > (c->end - c->pos) / 7 || v > INT32_MAX)
        return bad(c, "class count exceeds the manifest's size");
    m->classes = stoker__calloc((size_t)v, sizeof *m->classes);
    if (!m->classes)
        return stoker__fail(c->err, -ENOMEM, "%s: out of memory for %llu classes", c->what,
                            (unsigned long long)v);
    m->nclasses = (uint32_t)v;
    for (uint32_t i = 0; i < m->nclasses; i++) {
        size_t n = 0;
        char *s = next_line(c, &n);
        if (!s || n < 6 || memcmp(s, "class ", 6) != 0 || !unescape(s + 6, n - 6))
            return bad(c, "expected \"class NAME\"");
        m->classes[i] = s + 6;
    }
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool plain_bytes(const char *s, size_t n)
{
    if (n == 0 || n > STK_NAME_MAX || s[0] == '.')
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || s[i] == '/' || s[i] == '\\' || s[i] == 0x7F)
            return false;
    return true;
}

/* A plain name, as it is and after percent-decoding (%XX, once): a remote source puts the
 * name into a URL percent-encoded, but a server or a proxy that decodes a path twice would
 * read "%2e%2e%2f" as "../", so a name whose decoded form is not plain is refused too. */
static bool plain_name(const char *s, size_t n)
{
    if (!plain_bytes(s, n))
        return false;
    char dec[STK_NAME_MAX];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = hex_digit(s[i + 1])) >= 0 &&
            (lo = hex_digit(s[i + 2])) >= 0) {
            dec[m++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            dec[m++] = s[i];
        }
    }
    return m == n || (memchr(dec, '\0', m) == NULL && plain_bytes(dec, m));
}

static int parse_shard_line(cursor *c, stoker__mshard *sh)
{
    size_t n = 0, tl = 0;
    char *s = next_line(c, &n), *tok = NULL;
    if (!s || !token(&s, &n, &tok, &tl) || strcmp(tok, "shard") != 0)
        return bad(c, "expected \"shard NAME RECORDS BYTES CRC32C\"");
    if (!token(&s, &n, &tok, &tl))
        return bad(c, "shard line without a name");
    if (!plain_name(tok, tl))
        return stoker__fail(c->err, STOKER_E_CORRUPT,
                            "%s: line %llu: shard name \"%s\" is not a plain file name in the "
                            "data set directory (no '/', '\\', control byte or leading '.', "
                            "as it is or percent-decoded)",
                            c->what, (unsigned long long)c->line, tok);
    sh->name = tok;
    char *rec = NULL, *bytes = NULL, *crc = NULL;
    size_t rl = 0, bl = 0, cl = 0;
    if (!token(&s, &n, &rec, &rl) || !token(&s, &n, &bytes, &bl) || !token(&s, &n, &crc, &cl) ||
        n != 0 || !parse_u64(rec, rl, &sh->records) || !parse_u64(bytes, bl, &sh->bytes) ||
        !parse_hex32(crc, cl, &sh->crc))
        return bad(c, "bad shard line (expected NAME RECORDS BYTES CRC32C)");
    return 0;
}

static int parse_shards(cursor *c, stoker__manifest *m, uint64_t max_shards, uint64_t max_records)
{
    uint64_t v = 0, total = 0;
    int rc = keyword_count(c, "shards", &v);
    if (rc < 0)
        return rc;
    if (v == 0)
        return bad(c, "a data set has at least one shard");
    if (v > max_shards)
        return stoker__fail(c->err, STOKER_E_LIMIT,
                            "%s: %llu shards exceed the limit of %llu (STOKER_OPT_MAX_SHARDS)",
                            c->what, (unsigned long long)v, (unsigned long long)max_shards);
    /* "shard a 0 0 00000000\n" is at least 21 bytes */
    if (v > (c->end - c->pos) / 21)
        return bad(c, "shard count exceeds the manifest's size");
    m->shards = stoker__calloc((size_t)v, sizeof *m->shards);
    if (!m->shards)
        return stoker__fail(c->err, -ENOMEM, "%s: out of memory for %llu shards", c->what,
                            (unsigned long long)v);
    m->nshards = (uint32_t)v;
    for (uint32_t i = 0; i < m->nshards; i++) {
        if ((rc = parse_shard_line(c, &m->shards[i])) < 0)
            return rc;
        if (m->shards[i].records > max_records)
            return stoker__fail(c->err, STOKER_E_LIMIT,
                                "%s: shard %s holds %llu records, over the limit of %llu "
                                "(STOKER_OPT_MAX_RECORDS)",
                                c->what, m->shards[i].name,
                                (unsigned long long)m->shards[i].records,
                                (unsigned long long)max_records);
        if (m->shards[i].bytes < STK_MIN_SHARD)
            return bad(c, "shard size below the minimum of a shard file");
        if (stoker__add_ovf(total, m->shards[i].records, &total))
            return bad(c, "record counts overflow");
    }
    if (total != m->records)
        return bad(c, "the shards' record counts do not add up to \"records\"");
    return 0;
}

/* Checks the key section's shape (one line per record) without decoding it. */
static int scan_keys(cursor *c, stoker__manifest *m)
{
    uint64_t v = 0;
    int rc = keyword_count(c, "keys", &v);
    if (rc < 0)
        return rc;
    if (v != 0 && v != m->records)
        return bad(c, "key count is neither 0 nor the record count");
    m->nkeys = v;
    m->keys_begin = c->pos;
    for (uint64_t i = 0; i < v; i++) {
        if (c->pos >= c->end)
            return bad(c, "fewer key lines than records");
        const char *s = c->text + c->pos;
        const char *nl = memchr(s, '\n', c->end - c->pos);
        if (!nl || (s[0] != '+' && s[0] != '-') || (s[0] == '-' && nl != s + 1)) {
            c->line++;
            return bad(c, "expected a key line (\"+KEY\" or \"-\")");
        }
        c->pos = (size_t)(nl - c->text) + 1;
        c->line++;
    }
    m->keys_end = c->pos;
    if (c->pos != c->end) {
        c->line++;
        return bad(c, "unexpected text before the crc32c line");
    }
    return 0;
}

/* Checks the final "crc32c HHHHHHHH\n" line against every preceding byte. */
static int check_crc(cursor *c)
{
    const size_t tail = 16; /* "crc32c " + 8 hex + '\n' */
    uint32_t stored = 0;
    if (c->size < tail)
        return stoker__fail(c->err, STOKER_E_CORRUPT, "%s: truncated: no final \"crc32c\" line",
                            c->what);
    const char *t = c->text + c->size - tail;
    if (t[tail - 1] != '\n' || memcmp(t, "crc32c ", 7) != 0 || (c->size > tail && t[-1] != '\n') ||
        !parse_hex32(t + 7, 8, &stored))
        return stoker__fail(c->err, STOKER_E_CORRUPT,
                            "%s: truncated or damaged: no final \"crc32c\" line", c->what);
    const uint32_t computed = stoker_crc32c(0, c->text, c->size - tail);
    if (stored != computed)
        return stoker__fail(c->err, STOKER_E_CORRUPT,
                            "%s: CRC32C mismatch (stored %08x, computed %08x): the manifest "
                            "was modified or damaged",
                            c->what, stored, computed);
    c->end = c->size - tail;
    return 0;
}

int stoker__manifest_parse(stoker__manifest *m, char *text, size_t size, const char *what,
                           uint64_t max_shards, uint64_t max_records, stoker__err *err)
{
    memset(m, 0, sizeof *m);
    m->text = text;
    m->size = size;
    cursor c = {text, size, 0, size, 0, what, err};
    const size_t k = strlen(STK_MANIFEST_MAGIC);
    if (size <= k || memcmp(text, STK_MANIFEST_MAGIC " ", k + 1) != 0)
        return stoker__fail(err, STOKER_E_FORMAT, "%s: not a stoker manifest", what);
    int rc = check_crc(&c);
    if (rc < 0)
        return rc;
    if ((rc = parse_header(&c, m)) < 0 ||
        (rc = m->version >= 3 ? parse_fields(&c, m) : parse_field(&c, m)) < 0 ||
        (rc = parse_checked(&c, m)) < 0)
        return rc;
    uint64_t max_total = 0;
    if (stoker__mul_ovf(max_shards, max_records, &max_total))
        max_total = UINT64_MAX;
    if ((rc = keyword_count(&c, "records", &m->records)) < 0)
        return rc;
    if (m->records > max_total)
        return stoker__fail(err, STOKER_E_LIMIT, "%s: %llu records exceed the limits", what,
                            (unsigned long long)m->records);
    if ((rc = parse_classes(&c, m)) < 0 || (rc = parse_shards(&c, m, max_shards, max_records)) < 0)
        return rc;
    return scan_keys(&c, m);
}

int stoker__manifest_keys(stoker__manifest *m, const char *what, stoker__err *err)
{
    if (m->nkeys == 0)
        return 0;
    m->key_offs = stoker__malloc((size_t)m->nkeys * sizeof *m->key_offs);
    STOKER_RETURN_IF(!m->key_offs, err, -ENOMEM, "%s: out of memory for %llu keys", what,
                     (unsigned long long)m->nkeys);
    size_t pos = m->keys_begin;
    for (uint64_t i = 0; i < m->nkeys; i++) {
        char *s = m->text + pos;
        char *nl = memchr(s, '\n', m->keys_end - pos); /* shape checked by scan_keys */
        const size_t n = (size_t)(nl - s);
        pos += n + 1;
        m->key_offs[i] = UINT64_MAX;
        if (s[0] == '-')
            continue;
        if (!unescape(s + 1, n - 1)) {
            stoker__free(m->key_offs);
            m->key_offs = NULL;
            return stoker__fail(err, STOKER_E_CORRUPT, "%s: record %llu: malformed key", what,
                                (unsigned long long)i);
        }
        m->key_offs[i] = (uint64_t)(s + 1 - m->text);
    }
    return 0;
}

void stoker__manifest_free(stoker__manifest *m)
{
    stoker__free(m->text);
    stoker__free(m->classes);
    stoker__free(m->shards);
    stoker__free(m->key_offs);
    stoker__free(m->schema);
    memset(m, 0, sizeof *m);
}
