/* SPDX-License-Identifier: Apache-2.0 */
/* An installed-library consumer: writes a tiny data set and reads it back. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <stoker.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    if (stoker_version() != STOKER_VERSION_NUMBER) {
        fprintf(stderr, "header %d, library %u\n", STOKER_VERSION_NUMBER, stoker_version());
        return 1;
    }
    char dir[] = "/tmp/stoker-consumer-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char path[512];
    snprintf(path, sizeof path, "%s/ds", dir);
    stoker_writer *w = NULL;
    int rc = stoker_writer_create(&w, path, NULL);
    const char payload[] = "hello, stoker";
    if (rc == 0)
        rc = stoker_writer_add(w, payload, sizeof payload, 7, "hello.txt");
    if (rc == 0)
        rc = stoker_writer_finish(w);
    if (rc != 0) {
        fprintf(stderr, "writer: %s (%s)\n", stoker_strerror(rc), w ? stoker_writer_errmsg(w) : "");
        return 1;
    }
    stoker_writer_destroy(w);
    stoker_dataset *ds = NULL;
    char buf[64];
    size_t n = 0;
    int64_t label = -1;
    rc = stoker_dataset_open(&ds, path, NULL);
    if (rc == 0)
        rc = stoker_dataset_read(ds, 0, buf, sizeof buf, &n);
    if (rc == 0)
        rc = stoker_dataset_record_info(ds, 0, NULL, &label, NULL);
    if (rc != 0 || n != sizeof payload || memcmp(buf, payload, n) != 0 || label != 7) {
        fprintf(stderr, "read back failed: %s\n", stoker_strerror(rc));
        return 1;
    }
    stoker_dataset_close(ds);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        return 1;
    printf("C consumer: stoker %s, round trip ok\n", stoker_version_string());
    return 0;
}
