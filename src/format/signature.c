/* SPDX-License-Identifier: Apache-2.0 */
/* Telling file formats apart by their first bytes. */
#include "format/signature.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* HDF5's superblock signature: at byte 0, or past a user block at 512, 1024, 2048, ... */
int stoker__hdf5_signature(int fd)
{
    static const uint8_t sig[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    uint8_t got[8];
    for (uint64_t at = 0; at <= (UINT64_C(1) << 40); at = at ? at * 2 : 512) {
        ssize_t n;
        while ((n = pread(fd, got, sizeof got, (off_t)at)) < 0 && errno == EINTR) {
        }
        if (n < 0)
            return -errno;
        if (n != (ssize_t)sizeof got)
            return 0;
        if (memcmp(got, sig, sizeof sig) == 0)
            return 1;
    }
    return 0;
}
