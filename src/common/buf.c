/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer. */
#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int stoker__buf_append(stoker__buf *b, const void *p, size_t n)
{
    if (n > b->cap - b->len) {
        uint64_t need;
        if (stoker__add_ovf(b->len, n, &need) || need > SIZE_MAX / 2)
            return -ENOMEM;
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need)
            cap *= 2;
        char *d = stoker__realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int stoker__buf_printf(stoker__buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return STOKER_E_INVALID;
    return stoker__buf_append(b, tmp, (size_t)n);
}

void stoker__buf_free(stoker__buf *b)
{
    stoker__free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
