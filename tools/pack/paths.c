/* Where the output may go. --force replaces the old output, so no input may lie inside it
 * (nor may it lie inside the source, which the pack would read back). Paths are compared
 * real, symbolic links followed, so no spelling of a path gets around the check. */
#include "pack.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The real path of `path` into out[PATH_MAX]: that of the path itself when it exists, else
 * its parent's real path with its last component appended (an output need not exist). */
static bool real_path(const char *path, char *out)
{
    if (realpath(path, out))
        return true;
    char *copy = strdup(path);
    if (!copy)
        return false;
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    const char *parent = !slash ? "." : slash == copy ? "/" : copy;
    if (slash)
        *slash = '\0';
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
