/* SPDX-License-Identifier: Apache-2.0 */
/* The io_uring reader and the descriptors it is given: a transient read (a remote block's
 * file, pinned by a shared flock until the cache closes it) leaves nothing of the file open
 * once its caller closes the descriptor, so that the block cache can take the exclusive
 * lock it evicts with. */
#include "testutil.h"

#include "io/reader.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

int main(void)
{
    stoker__reader *r = NULL;
    if (stoker__uring_open(&r, 8) < 0)
        return T_SKIP; /* no io_uring here */
    char *dir = t_mkdtemp("uring_files");
    char path[512];
    snprintf(path, sizeof path, "%s/b0000000000", dir);
    uint8_t data[4096], got[4096];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);
    t_write_file(path, data, sizeof data);

    /* read it twice, as a worker reads the records of one block in a round */
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    T_ASSERT(fd >= 0);
    T_OK(flock(fd, LOCK_SH | LOCK_NB)); /* the cache's pin */
    for (int k = 0; k < 2; k++) {
        memset(got, 0, sizeof got);
        const stoker__read_req req = {
            .fd = fd, .offset = 0, .length = sizeof got, .dst = got, .tag = 1, .transient = true};
        T_OK(r->ops->submit(r, &req, 1));
        stoker__read_done done;
        uint32_t n = 0;
        while (n == 0)
            T_OK(r->ops->reap(r, &done, 1, &n));
        T_EQ_INT(done.res, (int64_t)sizeof got);
        T_ASSERT(memcmp(got, data, sizeof got) == 0);
    }
    close(fd); /* the pin let go: nothing may hold the file open any more */

    const int evictor = open(path, O_RDONLY | O_CLOEXEC);
    T_ASSERT(evictor >= 0);
    T_ASSERT(flock(evictor, LOCK_EX | LOCK_NB) == 0); /* failed while the ring held the file */
    close(evictor);

    stoker__reader_close(r);
    t_rmrf(dir);
    free(dir);
    return 0;
}
