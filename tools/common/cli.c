/* SPDX-License-Identifier: Apache-2.0 */
/* The command-line machinery stoker-pack and stoker-bench share (cli.h). */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *tool_name = "stoker";

void cli_init(const char *tool)
{
    tool_name = tool;
}

void cli_put_escaped(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\\')
            fputs("\\\\", f);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\x%02x", *p);
        else
            fputc(*p, f);
    }
}

void cli_put_json_string(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        const unsigned c = *p;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
            p++;
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc((int)c, f);
            p++;
        } else {
            const int len = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
            int ok = len > 0 && !(len == 3 && c > 0xEF);
            for (int i = 1; ok && i < len; i++)
                ok = (p[i] & 0xC0) == 0x80;
            if (ok) {
                fwrite(p, 1, (size_t)len, f);
                p += len;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

static void vreport(const char *fmt, va_list ap)
{
    char stack[1024];
    va_list again;
    va_copy(again, ap);
    const int n = vsnprintf(stack, sizeof stack, fmt, ap);
    char *msg = n >= (int)sizeof stack ? malloc((size_t)n + 1) : stack;
    if (msg && msg != stack)
        vsnprintf(msg, (size_t)n + 1, fmt, again);
    va_end(again);
    fprintf(stderr, "%s: ", tool_name);
    cli_put_escaped(stderr, msg && n >= 0 ? msg : stack);
    fputc('\n', stderr);
    if (msg != stack)
        free(msg);
}

void cli_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
}

int cli_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    fprintf(stderr, "(%s --help lists the options)\n", tool_name);
    return -1;
}

/* ---- options ------------------------------------------------------------------------------ */

static const char *name_of(const struct option *options, int val)
{
    for (const struct option *o = options; o->name; o++)
        if (o->val == val)
            return o->name;
    return "?";
}

/* An option getopt_long refused: `text` (as typed, "--name[=value]") names no option, or
 * the start of several. */
static void unknown_option(const char *text, const struct option *options)
{
    const char *eq = strchr(text + 2, '=');
    const size_t len = eq ? (size_t)(eq - text - 2) : strlen(text + 2);
    char matches[512] = "";
    size_t n = 0, used = 0;
    for (const struct option *o = options; o->name; o++)
        if (strncmp(o->name, text + 2, len) == 0 && used < sizeof matches) {
            used += (size_t)snprintf(matches + used, sizeof matches - used, "%s--%s",
                                     n++ ? ", " : "", o->name);
        }
    if (n > 1)
        cli_usage("ambiguous option '%.*s' (%s)", (int)len + 2, text, matches);
    else
        cli_usage("unknown option '%s'", text);
}

int cli_next(int argc, char **argv, const struct option *options, const char **name,
             const char **arg)
{
    opterr = 0; /* every message is ours, escaped and worded alike in both tools */
    int index = -1;
    const int c = getopt_long(argc, argv, ":h", options, &index);
    *name = NULL;
    *arg = NULL;
    if (c == -1)
        return CLI_END;
    if (c == ':') {
        cli_usage("--%s requires a value", name_of(options, optopt));
        return CLI_ERROR;
    }
    if (c == '?') {
        /* optopt: 0 for a long option that is unknown or ambiguous, a long option's value
         * for one given a value it does not take, else the unknown short option */
        if (optopt == 0)
            unknown_option(argv[optind - 1], options);
        else if (optopt >= 256 || optopt == 'h')
            cli_usage("--%s takes no value", name_of(options, optopt));
        else
            cli_usage("unknown option '-%c'", optopt);
        return CLI_ERROR;
    }
    *name = index >= 0 ? options[index].name : name_of(options, c);
    *arg = optarg;
    return c;
}

/* ---- values ------------------------------------------------------------------------------- */

int cli_bad_value(const char *name, const char *arg, const char *expected)
{
    return cli_usage("invalid value '%s' for --%s: expected %s", arg, name, expected);
}

bool cli_parse_int(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    const long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return false;
    *v = x;
    return true;
}

int cli_int(const char *name, const char *arg, int64_t lo, int64_t hi, int64_t *v)
{
    int64_t x;
    if (cli_parse_int(arg, &x) && x >= lo && x <= hi) {
        *v = x;
        return 0;
    }
    char expected[96];
    if (lo == INT64_MIN && hi == INT64_MAX)
        snprintf(expected, sizeof expected, "an integer");
    else if (hi == INT64_MAX)
        snprintf(expected, sizeof expected, "an integer >= %lld", (long long)lo);
    else
        snprintf(expected, sizeof expected, "an integer from %lld to %lld", (long long)lo,
                 (long long)hi);
    return cli_bad_value(name, arg, expected);
}

int cli_u64(const char *name, const char *arg, uint64_t *v)
{
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(arg, &end, 10);
    if (!errno && end != arg && !*end && !strchr(arg, '-')) { /* strtoull negates "-1" */
        *v = x;
        return 0;
    }
    return cli_bad_value(name, arg, "an integer >= 0");
}

/* The shift of a K/M/G/T suffix (with an optional B or iB after it), or -1. */
static int size_shift(const char *s)
{
    if (!*s)
        return 0;
    const char *units = "KMGT";
    const char *u = strchr(units, s[0] >= 'a' ? s[0] - 32 : s[0]);
    if (!u || !*u)
        return -1;
    const char *rest = s + 1;
    if (strcmp(rest, "") && strcmp(rest, "B") && strcmp(rest, "iB"))
        return -1;
    return 10 * (int)(u - units + 1);
}

int cli_size(const char *name, const char *arg, int64_t *v)
{
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(arg, &end, 10);
    const int shift = end != arg ? size_shift(end) : -1;
    if (!errno && shift >= 0 && !strchr(arg, '-') && x > 0 &&
        x <= (unsigned long long)INT64_MAX >> shift) {
        *v = (int64_t)(x << shift);
        return 0;
    }
    return cli_bad_value(name, arg, "a size in bytes > 0, such as 65536, 64K, 256M or 1G");
}

int cli_double(const char *name, const char *arg, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    const double x = strtod(arg, &end);
    if (!errno && end != arg && !*end && x >= lo && x <= hi) {
        *v = x;
        return 0;
    }
    char expected[96];
    snprintf(expected, sizeof expected, "a number from %.15g to %.15g", lo, hi);
    return cli_bad_value(name, arg, expected);
}
