/* SPDX-License-Identifier: Apache-2.0 */
/* Where the output may go. --force replaces the old output, so no input may lie inside it
 * (nor may it lie inside the source, which the pack would read back). Paths are compared
 * real, symbolic links followed, so no spelling of a path gets around the check. */
#include "pack.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Splits `path` (a copy the caller owns, written to) into its parent folder and last
 * component, trailing slashes dropped: "a/b/" gives "a" and "b", "b" gives "." and "b". */
static void split_path(char *path, const char **parent, const char **base)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        path[--n] = '\0';
    char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    *parent = !slash ? "." : slash == path ? "/" : path;
    if (slash)
        *slash = '\0';
}

/* The real path of `path` into out[PATH_MAX]: that of the path itself when it exists, else
 * its parent's real path with its last component appended (an output need not exist). */
static bool real_path(const char *path, char *out)
{
    if (realpath(path, out))
        return true;
    char *copy = strdup(path);
    if (!copy)
        return false;
    const char *base, *parent;
    split_path(copy, &parent, &base);
    char rparent[PATH_MAX], full[2 * PATH_MAX + 2];
    bool ok = realpath(parent, rparent) && strcmp(base, "..") != 0;
    if (ok)
        ok = snprintf(full, sizeof full, "%s/%s", strcmp(rparent, "/") ? rparent : "", base) <
             PATH_MAX;
    if (ok)
        memcpy(out, full, strlen(full) + 1);
    free(copy);
    return ok;
}

/* Is the real path `inner` the real path `outer` or inside it? */
static bool within(const char *inner, const char *outer)
{
    const size_t n = strlen(outer);
    if (strcmp(outer, "/") == 0)
        return true;
    return strncmp(inner, outer, n) == 0 && (inner[n] == '/' || inner[n] == '\0');
}

/* The file an HDF5 source names: "x.h5:/images" is x.h5 (malloc'd). */
static char *source_file(const char *src)
{
    char *f = strdup(src);
    char *colon = f ? strrchr(f, ':') : NULL;
    if (colon && colon[1] == '/' && pack_is_h5(f)) {
        *colon = '\0';
        if (!pack_is_h5(f)) /* the colon was part of the file's name */
            *colon = ':';
    }
    return f;
}

static int input_inside_out(const char *what, const char *path, const char *rout, const char *out)
{
    char rin[PATH_MAX];
    if (!realpath(path, rin) || !within(rin, rout))
        return 0;
    cli_err("%s %s lies inside the output %s, which --force would replace; choose another "
            "output",
            what, path, out);
    return PACK_USAGE;
}

int pack_check_paths(const pack_opts *o)
{
    char rout[PATH_MAX], rsrc[PATH_MAX];
    char *file = source_file(o->src);
    if (!file) {
        cli_err("out of memory");
        return PACK_FAIL;
    }
    /* a missing source is reported when it is read */
    const bool known = real_path(o->out, rout) && realpath(file, rsrc);
    int code = 0;
    if (known && strcmp(rout, rsrc) == 0) {
        cli_err("%s is the source %s; choose another output", o->out, o->src);
        code = PACK_USAGE;
    } else if (known && within(rout, rsrc)) {
        cli_err("%s is inside the source %s; choose an output outside it", o->out, o->src);
        code = PACK_USAGE;
    } else if (known) {
        code = input_inside_out("the source", file, rout, o->out);
    }
    /* an HDF5 source's --labels names a dataset inside it, not a file */
    if (code == 0 && known && o->labels && !pack_is_h5(o->src))
        code = input_inside_out("--labels", o->labels, rout, o->out);
    free(file);
    return code;
}

int pack_check_items(const pack_opts *o, const pack_source *src)
{
    char rout[PATH_MAX];
    if (!realpath(o->out, rout)) /* nothing there yet: nothing to replace */
        return 0;
    int code = 0;
    for (size_t i = 0; code == 0 && i < src->n; i++)
        if (src->items[i].record < 0)
            code = input_inside_out("the source file", src->items[i].path, rout, o->out);
    return code;
}

/* The first folder of `dir` (a path, cut at each '/') that is missing or not a folder, into
 * `dir` itself; false when each one is a folder or cannot be told (no permission). */
static bool first_bad_folder(char *dir, bool *missing)
{
    const size_t n = strlen(dir);
    for (size_t i = 1; i <= n; i++) {
        if (i < n && dir[i] != '/')
            continue;
        const char c = dir[i];
        dir[i] = '\0';
        struct stat st;
        const int rc = stat(dir, &st);
        if ((rc != 0 && errno == ENOENT) || (rc == 0 && !S_ISDIR(st.st_mode))) {
            *missing = rc != 0;
            return true;
        }
        dir[i] = c;
    }
    return false;
}

int pack_check_out_folder(const char *out)
{
    char *dir = strdup(out);
    if (!dir) {
        cli_err("out of memory");
        return PACK_FAIL;
    }
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = '\0';
    char *slash = strrchr(dir, '/');
    int code = 0;
    bool missing = false;
    if (slash && slash != dir) { /* "/x" and "x" lie in folders that exist */
        *slash = '\0';
        if (first_bad_folder(dir, &missing)) {
            if (missing)
                cli_err("%s: folder %s does not exist (stoker-pack creates the output, not the "
                        "folders it goes in)",
                        out, dir);
            else
                cli_err("%s: %s is not a folder", out, dir);
            code = PACK_FAIL;
        }
    }
    free(dir);
    return code;
}

/* Is `name` ".BASE.tmp-XXXXXX" (six letters or digits), the writer's temporary directory for
 * the output BASE (docs/FORMAT.md)? */
static bool is_leftover_name(const char *name, const char *base, size_t blen)
{
    static const char tail[] = ".tmp-";
    if (name[0] != '.' || strncmp(name + 1, base, blen) != 0 ||
        strncmp(name + 1 + blen, tail, sizeof tail - 1) != 0)
        return false;
    const char *x = name + 1 + blen + sizeof tail - 1;
    for (int i = 0; i < 6; i++)
        if (!isalnum((unsigned char)x[i]))
            return false;
    return x[6] == '\0';
}

/* Does folder `fd` hold only what a writer puts in its temporary directory (manifest.stk,
 * shard-NNNNN.stk), and something? Then those files are removed; true when all were. */
static bool empty_leftover(int fd, bool *had_files)
{
    DIR *d = fdopendir(dup(fd));
    if (!d)
        return false;
    bool ok = true;
    *had_files = false;
    const struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        unsigned shard;
        char end;
        const bool ours = strcmp(e->d_name, "manifest.stk") == 0 ||
                          (strlen(e->d_name) == 15 &&
                           sscanf(e->d_name, "shard-%5u.st%c", &shard, &end) == 2 && end == 'k');
        ok = ours && unlinkat(fd, e->d_name, 0) == 0;
        *had_files = true;
    }
    closedir(d);
    return ok;
}

/* Removes the leftover `name` in folder `dfd` if no live writer holds it (its lock) and it
 * holds only a writer's files; true when removed. A folder made in the last seconds with
 * nothing in it may be a writer's that has not taken its lock yet: left alone. */
static bool remove_leftover(int dfd, const char *name)
{
    const int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return false;
    struct stat st;
    bool removed = false, had_files = false;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid()) {
        const bool young = time(NULL) - st.st_mtime < 10;
        removed = empty_leftover(fd, &had_files) && (had_files || !young) &&
                  unlinkat(dfd, name, AT_REMOVEDIR) == 0;
    }
    close(fd);
    return removed;
}

void pack_remove_leftovers(const char *out, bool quiet)
{
    char *dir = strdup(out);
    if (!dir)
        return;
    const char *base, *parent;
    split_path(dir, &parent, &base);
    const size_t blen = strlen(base);
    const int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dup(dfd)) : NULL;
    const struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!is_leftover_name(e->d_name, base, blen) || !remove_leftover(dfd, e->d_name) || quiet)
            continue;
        fputs("stoker-pack: removed ", stderr);
        cli_put_escaped(stderr, parent);
        fputc('/', stderr);
        cli_put_escaped(stderr, e->d_name);
        fputs(", left by an earlier run that was killed\n", stderr);
    }
    if (d)
        closedir(d);
    if (dfd >= 0)
        close(dfd);
    free(dir);
}
