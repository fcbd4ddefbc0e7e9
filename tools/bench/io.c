/* SPDX-License-Identifier: Apache-2.0 */
/* --io: the data set's raw read bandwidth, independent of the loader: every shard file read
 * sequentially in 1 MiB blocks with pread, first with O_DIRECT (the device itself, when the
 * file system allows it), then buffered (the page cache, once warm). */
#include "bench.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK (1u << 20)
#define DIRECT_ALIGN 4096u

/* Reads the file whole; bytes read, or -errno. */
static int64_t read_file(const char *path, int direct, uint8_t *buf)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
    if (fd < 0)
        return -errno;
    int64_t off = 0;
    for (;;) {
        const ssize_t n = pread(fd, buf, BLOCK, (off_t)off);
        if (n < 0) {
            const int e = errno;
            close(fd);
            return -e;
        }
        if (n == 0)
            break;
        off += n;
    }
    close(fd);
    return off;
}

/* MB/s over every shard; < 0 (-errno) when a read failed. */
static double read_all(stoker_dataset *ds, int direct, uint8_t *buf, int64_t *bytes, int *err)
{
    const double t0 = bench_now();
    *bytes = 0;
    for (int32_t i = 0; i < stoker_dataset_num_shards(ds); i++) {
        const char *p = stoker_dataset_shard_path(ds, i);
        const int64_t n = p ? read_file(p, direct, buf) : -ENOENT;
        if (n < 0) {
            *err = (int)-n;
            return -1;
        }
        *bytes += n;
    }
    const double s = bench_now() - t0;
    return s > 0 ? (double)*bytes / s / 1e6 : 0;
}

void bench_io(const char *data, io_result *io)
{
    memset(io, 0, sizeof *io);
    io->buffered_mbps = io->direct_mbps = -1;
    stoker_dataset *ds = NULL;
    uint8_t *buf = aligned_alloc(DIRECT_ALIGN, BLOCK);
    if (!buf || stoker_dataset_open(&ds, data, NULL) != 0) {
        cli_err("--io: cannot open %s: %s", data, ds ? stoker_dataset_errmsg(ds) : "out of memory");
        goto out;
    }
    int err = 0;
    int64_t bytes = 0;
    io->direct_mbps = read_all(ds, 1, buf, &bytes, &err);
    if (io->direct_mbps < 0)
        snprintf(io->direct_note, sizeof io->direct_note, "O_DIRECT refused: %s", strerror(err));
    io->buffered_mbps = read_all(ds, 0, buf, &io->bytes, &err);
    if (io->buffered_mbps < 0) {
        cli_err("--io: read failed: %s", strerror(err));
        io->bytes = 0;
    }
out:
    stoker_dataset_close(ds);
    free(buf);
}
