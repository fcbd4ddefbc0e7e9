/* SPDX-License-Identifier: Apache-2.0 */
/* Telling file formats apart by their first bytes. */
#ifndef STOKER_FORMAT_SIGNATURE_H
#define STOKER_FORMAT_SIGNATURE_H

/* Whether the open file fd holds HDF5's signature where libhdf5 looks for it (byte 0, or
 * after a user block): 1 or 0, or -errno when a read failed (which tells nothing of what the
 * file holds: the caller reports it). */
int stoker__hdf5_signature(int fd);

#endif
