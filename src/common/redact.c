/* SPDX-License-Identifier: Apache-2.0 */
/* stoker_redact: the one rule by which URLs are shown (stoker.h). */
#include "common/common.h"

#include <string.h>

typedef struct sink {
    char *out;
    size_t cap, n; /* bytes written, the NUL excluded; at most cap - 1 */
} sink;

static void put(sink *s, const char *p, size_t len)
{
    const size_t room = s->cap - 1 - s->n;
    const size_t k = len < room ? len : room;
    memcpy(s->out + s->n, p, k);
    s->n += k;
}

/* Where a URL's authority ends: at its path, query or fragment, or where the text around
 * it resumes (a space, a quote, a bracket). */
static size_t authority_len(const char *a)
{
    return strcspn(a, "/?#\\ \t\r\n\"'<>()[]{}");
}

char *stoker_redact(const char *text, char *out, size_t cap)
{
    if (!out || cap == 0)
        return out;
    sink s = {out, cap, 0};
    const char *p = text ? text : "";
    for (const char *sep; (sep = strstr(p, "://")) != NULL;) {
        const char *auth = sep + 3;
        put(&s, p, (size_t)(auth - p));
        const size_t alen = authority_len(auth);
        const char *at = NULL; /* the last '@': a password may hold one */
        for (const char *q = auth; q < auth + alen; q++)
            if (*q == '@')
                at = q;
        if (at) {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            if (colon) /* the user's name stays; its password goes */
                put(&s, auth, (size_t)(colon + 1 - auth));
            put(&s, "***", 3); /* a name alone is often a token */
            p = at;
        } else {
            p = auth;
        }
    }
    put(&s, p, strlen(p));
    out[s.n] = '\0';
    return out;
}
