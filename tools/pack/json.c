/* SPDX-License-Identifier: Apache-2.0 */
/* A strict JSON parser (json.h): recursive descent over the text, bounded by JSON_MAX_DEPTH. */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *s;
    size_t n, at;
    char *msg;
    size_t msgcap;
} parser;

__attribute__((format(printf, 2, 3))) static int fail(parser *p, const char *fmt, ...)
{
    if (p->msg && p->msgcap) {
        int k = snprintf(p->msg, p->msgcap, "byte %zu: ", p->at);
        if (k >= 0 && (size_t)k < p->msgcap) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(p->msg + k, p->msgcap - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

static void skip_ws(parser *p)
{
    while (p->at < p->n && (p->s[p->at] == ' ' || p->s[p->at] == '\t' || p->s[p->at] == '\n' ||
                            p->s[p->at] == '\r'))
        p->at++;
}

static int peek(parser *p)
{
    return p->at < p->n ? (unsigned char)p->s[p->at] : -1;
}

static int value(parser *p, json_value *v, int depth);

static int literal(parser *p, const char *word)
{
    size_t k = strlen(word);
    if (p->n - p->at < k || memcmp(p->s + p->at, word, k) != 0)
        return fail(p, "not JSON: expected a value");
    p->at += k;
    return 0;
}

static int hex4(parser *p, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int c = peek(p);
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return fail(p, "a \\u escape needs 4 hexadecimal digits");
        v = v << 4 | (uint32_t)d;
        p->at++;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, uint32_t c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | c >> 6), o[1] = (char)(0x80 | (c & 63));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 63));
        o[2] = (char)(0x80 | (c & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 63));
    o[2] = (char)(0x80 | (c >> 6 & 63)), o[3] = (char)(0x80 | (c & 63));
    return 4;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    uint32_t c;
    size_t k;
    if (s[0] < 0x80)
        return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF)
        k = 2, c = s[0] & 31u;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        k = 3, c = s[0] & 15u;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        k = 4, c = s[0] & 7u;
    else
        return 0;
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        c = c << 6 | (s[i] & 63u);
    }
    if ((k == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) ||
        (k == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    return k;
}

static int string(parser *p, char **out)
{
    p->at++; /* the opening quote */
    /* The decoded text is never longer than the source's. */
    size_t start = p->at, end = start;
    while (end < p->n && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n)
        return fail(p, "a string is not closed");
    char *o = malloc(end - start + 1);
    if (!o)
        return fail(p, "out of memory");
    size_t k = 0;
    while (p->s[p->at] != '"') {
        unsigned char c = (unsigned char)p->s[p->at];
        if (c < 0x20) {
            free(o);
            return fail(p, "a control character (0x%02X) inside a string", c);
        }
        if (c != '\\') {
            size_t len = utf8_len((const unsigned char *)p->s + p->at, p->n - p->at);
            if (!len) {
                free(o);
                return fail(p, "invalid UTF-8 in a string");
            }
            memcpy(o + k, p->s + p->at, len);
            k += len, p->at += len;
            continue;
        }
        p->at++;
        c = (unsigned char)p->s[p->at++];
        const char *simple = strchr("\"\\/bfnrt", c);
        if (c && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            o[k++] = map[simple - "\"\\/bfnrt"];
            continue;
        }
        uint32_t u, lo;
        if (c != 'u' || hex4(p, &u) < 0) {
            free(o);
            return c == 'u' ? -1 : fail(p, "an unknown escape \\%c", c);
        }
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (p->n - p->at < 2 || p->s[p->at] != '\\' || p->s[p->at + 1] != 'u') {
                free(o);
                return fail(p, "a lone surrogate \\u%04X", u);
            }
            p->at += 2;
            if (hex4(p, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF) {
                free(o);
                return fail(p, "a high surrogate without its low one");
            }
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        } else if ((u >= 0xDC00 && u <= 0xDFFF) || u == 0) {
            free(o);
            return fail(p, u ? "a lone surrogate \\u%04X" : "a NUL (\\u%04X) inside a string", u);
        }
        k += put_utf8(o + k, u);
    }
    p->at++;
    o[k] = 0;
    *out = o;
    return 0;
}

static int number(parser *p, json_value *v)
{
    size_t start = p->at;
    if (peek(p) == '-')
        p->at++;
    if (peek(p) == '0') {
        p->at++;
        if (peek(p) >= '0' && peek(p) <= '9')
            return fail(p, "a number with a leading zero");
    } else if (peek(p) >= '1' && peek(p) <= '9') {
        while (peek(p) >= '0' && peek(p) <= '9')
            p->at++;
    } else {
        return fail(p, "not JSON: expected a value");
    }
    bool integral = true;
    if (peek(p) == '.') {
        integral = false;
        p->at++;
        if (!(peek(p) >= '0' && peek(p) <= '9'))
            return fail(p, "a digit must follow the decimal point");
        while (peek(p) >= '0' && peek(p) <= '9')
            p->at++;
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        integral = false;
        p->at++;
        if (peek(p) == '+' || peek(p) == '-')
            p->at++;
        if (!(peek(p) >= '0' && peek(p) <= '9'))
            return fail(p, "a digit must follow the exponent");
        while (peek(p) >= '0' && peek(p) <= '9')
            p->at++;
    }
    char buf[512];
    size_t len = p->at - start;
    if (len >= sizeof buf)
        return fail(p, "a number of more than %zu characters", sizeof buf - 1);
    memcpy(buf, p->s + start, len);
    buf[len] = 0;
    v->type = JSON_NUMBER;
    v->number = strtod(buf, NULL);
    if (integral) {
        errno = 0;
        long long i = strtoll(buf, NULL, 10);
        v->is_int = errno == 0;
        v->integer = i;
    }
    return 0;
}

static void free_members(json_value *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    v->items = NULL, v->keys = NULL, v->n = 0;
}

static int members(parser *p, json_value *v, int depth, bool object)
{
    const char close = object ? '}' : ']';
    size_t cap = 0;
    p->at++;
    skip_ws(p);
    if (peek(p) == close) {
        p->at++;
        return 0;
    }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? cap * 2 : 4;
            json_value *items = realloc(v->items, cap * sizeof *items);
            char **keys = object ? realloc(v->keys, cap * sizeof *keys) : NULL;
            if (items)
                v->items = items;
            if (keys)
                v->keys = keys;
            if (!items || (object && !keys))
                return fail(p, "out of memory");
        }
        skip_ws(p);
        char *key = NULL;
        if (object) {
            if (peek(p) != '"')
                return fail(p, "expected a member's name (a string) in an object");
            if (string(p, &key) < 0)
                return -1;
            for (size_t i = 0; i < v->n; i++)
                if (strcmp(v->keys[i], key) == 0) {
                    int rc = fail(p, "the key \"%s\" twice in one object", key);
                    free(key);
                    return rc;
                }
            skip_ws(p);
            if (peek(p) != ':') {
                free(key);
                return fail(p, "expected ':' after a member's name");
            }
            p->at++;
            v->keys[v->n] = key;
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        v->n++;
        if (value(p, &v->items[v->n - 1], depth + 1) < 0)
            return -1;
        skip_ws(p);
        if (peek(p) == ',') {
            p->at++;
            continue;
        }
        if (peek(p) == close) {
            p->at++;
            return 0;
        }
        return fail(p, "expected ',' or '%c' in %s", close, object ? "an object" : "an array");
    }
}

static int value(parser *p, json_value *v, int depth)
{
    memset(v, 0, sizeof *v);
    skip_ws(p);
    if ((peek(p) == '{' || peek(p) == '[') && depth >= JSON_MAX_DEPTH)
        return fail(p, "arrays and objects nested deeper than %d", JSON_MAX_DEPTH);
    switch (peek(p)) {
    case '{': v->type = JSON_OBJECT; return members(p, v, depth, true);
    case '[': v->type = JSON_ARRAY; return members(p, v, depth, false);
    case '"': v->type = JSON_STRING; return string(p, &v->string);
    case 't': v->type = JSON_BOOL, v->boolean = true; return literal(p, "true");
    case 'f': v->type = JSON_BOOL; return literal(p, "false");
    case 'n': v->type = JSON_NULL; return literal(p, "null");
    case -1: return fail(p, "the text ends where a value was expected");
    default: return number(p, v);
    }
}

int json_parse(const char *text, size_t size, json_value *out, char *msg, size_t msgcap)
{
    parser p = {text, size, 0, msg, msgcap};
    int rc = value(&p, out, 0);
    if (rc == 0) {
        skip_ws(&p);
        if (p.at < p.n)
            rc = fail(&p, "bytes after the value");
    }
    if (rc < 0)
        json_free(out);
    return rc;
}

void json_free(json_value *v)
{
    if (!v)
        return;
    free(v->string);
    v->string = NULL;
    free_members(v, v->n);
}

const json_value *json_get(const json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const char *json_type_name(json_type t)
{
    static const char *const names[] = {"null",     "a boolean", "a number",
                                        "a string", "an array",  "an object"};
    return names[t];
}
