/* SPDX-License-Identifier: Apache-2.0 */
/* Reader factory and the test fault hook. */
#include "io/reader.h"

#include <stdatomic.h>
#include <unistd.h>

/* The hook's fields are written only while no reader runs (stoker__io_fault_set's
 * contract); the read counter is the one field readers change, atomically. */
static atomic_bool armed;
static stoker__io_fault fault;
static atomic_uint_fast64_t fault_reads;

void stoker__io_fault_set(const stoker__io_fault *f)
{
    if (f)
        fault = *f;
    atomic_store(&fault_reads, 0);
    atomic_store(&armed, f != NULL);
}

bool stoker__io_fault_armed(void)
{
    return atomic_load_explicit(&armed, memory_order_acquire);
}

uint64_t stoker__io_fault_reads(void)
{
    return atomic_load(&fault_reads);
}

/* The system call behind the fault back-end: pread with the armed faults applied. */
static ssize_t fault_pread(int fd, void *dst, size_t n, off_t off)
{
    const uint64_t k = atomic_fetch_add(&fault_reads, 1) + 1;
    if (fault.fail_read_at && k == fault.fail_read_at) {
        errno = fault.fail_errno ? fault.fail_errno : EIO;
        return -1;
    }
    const uint64_t at = (uint64_t)off, bad_end = fault.bad_offset + fault.bad_length;
    if (fault.bad_length && at < bad_end && at + n > fault.bad_offset) {
        if (at >= fault.bad_offset) {
            errno = fault.fail_errno ? fault.fail_errno : EIO;
            return -1;
        }
        n = (size_t)(fault.bad_offset - at); /* the bytes before the bad ones */
    }
    if (fault.eintr && (k & 1)) {
        errno = EINTR;
        return -1;
    }
    if (fault.short_reads && n > 1)
        n /= 2;
    return pread(fd, dst, n, off);
}

int64_t stoker__io_pread_full(int fd, void *dst, uint64_t length, uint64_t offset, bool faults,
                              uint64_t *got)
{
    uint64_t done = 0;
    if (got)
        *got = 0;
    while (done < length) {
        uint64_t n = length - done;
        if (n > (UINT64_C(1) << 30))
            n = UINT64_C(1) << 30;
        const ssize_t r = faults ? fault_pread(fd, (uint8_t *)dst + done, n, (off_t)(offset + done))
                                 : pread(fd, (uint8_t *)dst + done, n, (off_t)(offset + done));
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            if (got)
                *got = done;
            return -errno;
        }
        if (r == 0)
            break; /* end of file */
        done += (uint64_t)r;
    }
    return (int64_t)done;
}

int64_t stoker__reader_pread(const stoker__reader *r, int fd, void *dst, uint64_t length,
                             uint64_t offset)
{
    return stoker__io_pread_full(fd, dst, length, offset, r->fault, NULL);
}

int stoker__reader_open(stoker__reader **out, int32_t backend, uint32_t depth)
{
    *out = NULL;
    if (depth == 0)
        depth = 1;
    const bool faults = stoker__io_fault_armed();
    if (backend == STOKER_BACKEND_IO_URING)
        return faults ? -ENOSYS : stoker__uring_open(out, depth);
    if (backend == STOKER_BACKEND_PREAD)
        return stoker__pread_open(out, depth, faults);
    return STOKER_E_INVALID;
}

void stoker__reader_close(stoker__reader *r)
{
    if (r)
        r->ops->close(r);
}
