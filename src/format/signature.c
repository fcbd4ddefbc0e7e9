/* SPDX-License-Identifier: Apache-2.0 */
/* Telling file formats apart by their first bytes (or, for a URL, by its name). */
#include "format/signature.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* HDF5's superblock signature: at byte 0, or past a user block at 512, 1024, 2048, ... */
int stoker__hdf5_signature_by(int (*read8)(void *ctx, uint8_t got[8], uint64_t at), void *ctx)
{
    static const uint8_t sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    uint8_t got[8];
    for (uint64_t at = 0; at <= (UINT64_C(1) << 40); at = at ? at * 2 : 512) {
        const int r = read8(ctx, got, at);
        if (r <= 0)
            return r;
        if (memcmp(got, sig, sizeof sig) == 0)
            return 1;
    }
    return 0;
}

static int fd_read8(void *ctx, uint8_t got[8], uint64_t at)
{
    const int fd = *(const int *)ctx;
    ssize_t n;
    while ((n = pread(fd, got, 8, (off_t)at)) < 0 && errno == EINTR) {
    }
    return n < 0 ? -errno : n == 8;
}

int stoker__hdf5_signature(int fd)
{
    return stoker__hdf5_signature_by(fd_read8, &fd);
}

static bool has_h5_extension(const char *s, size_t n)
{
    static const char *const EXT[] = {".h5", ".hdf5", ".he5"};
    for (size_t i = 0; i < sizeof EXT / sizeof EXT[0]; i++) {
        const size_t e = strlen(EXT[i]);
        if (n > e && strncasecmp(s + n - e, EXT[i], e) == 0 && s[n - e - 1] != '/')
            return true;
    }
    return false;
}

size_t stoker__hdf5_url(const char *url)
{
    const char *rest = strncasecmp(url, "http://", 7) == 0    ? url + 7
                       : strncasecmp(url, "https://", 8) == 0 ? url + 8
                       : strncasecmp(url, "s3://", 5) == 0    ? url + 5
                                                              : NULL;
    if (!rest)
        return 0;
    const size_t end = strcspn(url, "?#");
    if (has_h5_extension(url, end))
        return strlen(url);
    for (const char *c = strstr(rest, ":/"); c; c = strstr(c + 1, ":/"))
        if (has_h5_extension(url, (size_t)(c - url)))
            return (size_t)(c - url);
    return 0;
}
