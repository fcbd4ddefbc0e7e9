/* SPDX-License-Identifier: Apache-2.0 */
/* --plot and --dump-indices name files that stoker-bench writes: checked before the run,
 * so that a run of many minutes does not end in "No such file or directory", and so that
 * no output file replaces a file of the data set being measured (or the other output). */
#include "bench.h"
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The folder a file would be created in (malloc'd): "." for a bare name. */
static char *folder_of(const char *path)
{
    char *d = strdup(path);
    if (!d)
        return NULL;
    char *slash = strrchr(d, '/');
    if (!slash)
        strcpy(d, ".");
    else
        slash[slash == d ? 1 : 0] = '\0';
    return d;
}

/* The data set's real path: a directory, an HDF5 file, or "FILE.h5:/dataset"'s file. */
static bool data_real_path(const char *data, char *out)
{
    if (realpath(data, out))
        return true;
    char *copy = strdup(data);
    char *colon = copy ? strrchr(copy, ':') : NULL;
    bool ok = false;
    if (colon) {
        *colon = '\0';
        ok = realpath(copy, out) != NULL;
    }
    free(copy);
    return ok;
}

static bool within(const char *inner, const char *outer)
{
    const size_t n = strlen(outer);
    return strncmp(inner, outer, n) == 0 && (inner[n] == '/' || inner[n] == '\0');
}

/* One output file: its folder exists and is writable, it is not a folder itself, and it is
 * not the data set nor inside it. 0, or -1 after saying why. */
static int check_output(const char *flag, const char *path, const char *data)
{
    char *dir = folder_of(path);
    struct stat st;
    const char *why = !dir                                          ? strerror(ENOMEM)
                      : stat(dir, &st) != 0                         ? strerror(errno)
                      : !S_ISDIR(st.st_mode)                        ? strerror(ENOTDIR)
                      : access(dir, W_OK | X_OK) != 0               ? strerror(errno)
                      : stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? "is a folder"
                                                                    : NULL;
    if (why) {
        cli_err("%s %s: cannot write it (folder %s: %s)", flag, path, dir ? dir : "?", why);
        free(dir);
        return -1;
    }
    free(dir);
    char rdata[PATH_MAX], rpath[PATH_MAX];
    if (data_real_path(data, rdata) && realpath(path, rpath) && within(rpath, rdata)) {
        cli_err("%s %s: a file of the data set %s; not overwritten", flag, path, data);
        return -1;
    }
    return 0;
}

int bench_check_outputs(const opts *o)
{
    if (o->plot && check_output("--plot", o->plot, o->data) < 0)
        return -1;
    if (o->dump && check_output("--dump-indices", o->dump, o->data) < 0)
        return -1;
    char a[PATH_MAX], b[PATH_MAX];
    if (o->plot && o->dump &&
        (strcmp(o->plot, o->dump) == 0 ||
         (realpath(o->plot, a) && realpath(o->dump, b) && strcmp(a, b) == 0))) {
        cli_err("--plot and --dump-indices name the same file %s", o->plot);
        return -1;
    }
    return 0;
}

FILE *bench_out_open(const char *path, char **tmp)
{
    *tmp = NULL;
    if (asprintf(tmp, "%s.tmp-XXXXXX", path) < 0) {
        *tmp = NULL;
        errno = ENOMEM;
        return NULL;
    }
    const int fd = mkstemp(*tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(*tmp);
        }
        free(*tmp);
        *tmp = NULL;
        errno = e;
    }
    return f;
}

int bench_out_close(FILE *f, char *tmp, const char *path, int keep)
{
    if (!f)
        return 0;
    int rc = ferror(f) ? -EIO : 0;
    if (fclose(f) != 0 && rc == 0)
        rc = -errno;
    /* mkstemp's 0600 would hide the file from those who may read the folder */
    const mode_t mask = umask(0);
    umask(mask);
    if (keep && rc == 0 && (chmod(tmp, 0666 & ~mask) != 0 || rename(tmp, path) != 0))
        rc = -errno;
    if (!keep || rc < 0)
        unlink(tmp);
    free(tmp);
    return rc;
}
