/* SPDX-License-Identifier: Apache-2.0 */
/* Telling file formats apart by their first bytes (or, for a URL, by its name). */
#ifndef STOKER_FORMAT_SIGNATURE_H
#define STOKER_FORMAT_SIGNATURE_H

#include <stddef.h>
#include <stdint.h>

/* Whether the open file fd holds HDF5's signature where libhdf5 looks for it (byte 0, or
 * after a user block): 1 or 0, or -errno when a read failed (which tells nothing of what the
 * file holds: the caller reports it). */
int stoker__hdf5_signature(int fd);
/* The same through read8(ctx, got, at): 1 when it read the 8 bytes at `at`, 0 when the file
 * ends first, -errno (or a negative stoker error) when the read failed. */
int stoker__hdf5_signature_by(int (*read8)(void *ctx, uint8_t got[8], uint64_t at), void *ctx);

/* Whether a URL (http://, https://, s3://) names an HDF5 file, by its name: the file's name
 * (before any `?` or `#`) ends in .h5, .hdf5 or .he5, in any case, the URL whole or followed
 * by ":/dataset/path" (as a local FILE:/dataset). The length of the file's URL, or 0 when it
 * names no HDF5 file. */
size_t stoker__hdf5_url(const char *url);

#endif
