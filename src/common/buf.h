/* SPDX-License-Identifier: Apache-2.0 */
/* A growable byte buffer (stoker__malloc'd), for text built piece by piece: manifests,
 * reports. */
#ifndef STOKER_COMMON_BUF_H
#define STOKER_COMMON_BUF_H

#include "common/common.h"

typedef struct stoker__buf {
    char *data;
    size_t len, cap;
} stoker__buf;

int stoker__buf_append(stoker__buf *b, const void *p, size_t n);
int stoker__buf_printf(stoker__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void stoker__buf_free(stoker__buf *b);

#endif
