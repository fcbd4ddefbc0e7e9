/* SPDX-License-Identifier: Apache-2.0 */
/* The CPUs this process may use: its affinity mask and its cgroup's CPU quota (common.h). */
#include "common/common.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CPUS 8192 /* the affinity mask's size asked of the kernel */

/* CPUs in the calling thread's affinity mask; 0 when the kernel does not say. */
static int affinity_cpus(void)
{
    cpu_set_t *set = CPU_ALLOC(MAX_CPUS);
    if (!set)
        return 0;
    const size_t size = CPU_ALLOC_SIZE(MAX_CPUS);
    CPU_ZERO_S(size, set);
    const int n = sched_getaffinity(0, size, set) == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    return n;
}

/* The first line of a small file, NUL-terminated; false when it cannot be read. */
static bool read_line(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    const bool ok = fgets(buf, (int)cap, f) != NULL;
    fclose(f);
    return ok;
}

/* cgroup v2: "max PERIOD" or "QUOTA PERIOD" in cpu.max. A quota in CPUs, or 0 for none. */
static double quota_v2(const char *dir)
{
    char path[4096], line[128];
    snprintf(path, sizeof path, "%s/cpu.max", dir);
    long long q = 0, period = 0;
    if (!read_line(path, line, sizeof line) || sscanf(line, "%lld %lld", &q, &period) != 2)
        return 0;
    return q > 0 && period > 0 ? (double)q / (double)period : 0;
}

/* cgroup v1: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us. */
static double quota_v1(const char *dir)
{
    char path[4096], line[128];
    long long q = -1, period = 0;
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
    if (!read_line(path, line, sizeof line) || sscanf(line, "%lld", &q) != 1 || q <= 0)
        return 0;
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
    if (!read_line(path, line, sizeof line) || sscanf(line, "%lld", &period) != 1 || period <= 0)
        return 0;
    return (double)q / (double)period;
}

/* The smallest quota on the way from cgroup `path` (under mount `mount`) up to the mount's
 * root: a parent's quota bounds its children. Folders that are not there are passed over (a
 * container sees its own cgroup at the mount's root while /proc names the host's path). */
static double quota_up(const char *mount, const char *path, double (*quota)(const char *))
{
    char dir[4096];
    const int n = snprintf(dir, sizeof dir, "%s%s", mount, path);
    if (n < 0 || (size_t)n >= sizeof dir)
        return 0;
    const size_t root = strlen(mount);
    double best = 0;
    for (;;) {
        size_t len = strlen(dir);
        while (len > root + 1 && dir[len - 1] == '/')
            dir[--len] = '\0';
        const double q = quota(dir);
        if (q > 0 && (best == 0 || q < best))
            best = q;
        char *slash = strrchr(dir, '/');
        if (len <= root || !slash || (size_t)(slash - dir) < root)
            return best;
        *slash = '\0';
    }
}

/* Whether the comma-separated controller list names `want`. */
static bool has_controller(const char *list, const char *want)
{
    const size_t n = strlen(want);
    for (const char *c = list; c && *c; c = strchr(c, ',') ? strchr(c, ',') + 1 : NULL)
        if (strncmp(c, want, n) == 0 && (c[n] == ',' || c[n] == '\0'))
            return true;
    return false;
}

static double min_quota(double a, double b)
{
    return a > 0 && (b == 0 || a < b) ? a : b;
}

/* The CPU quota of the cgroups listed in `self` (lines "ID:CONTROLLERS:PATH"), in CPUs; 0
 * for none. v2's line is "0::PATH" (cpu.max under root, or root/unified in a hybrid
 * layout); v1's is the line whose controllers name cpu (under root/CONTROLLERS or root/cpu). */
static double cgroup_quota(const char *root, const char *self)
{
    FILE *f = fopen(self, "re");
    if (!f)
        return 0;
    char line[4096], mount[4096];
    double best = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c2 = '\0';
        const char *ctrl = c1 + 1, *path = c2 + 1;
        if (*ctrl == '\0' && strncmp(line, "0:", 2) == 0) {
            best = min_quota(quota_up(root, path, quota_v2), best);
            snprintf(mount, sizeof mount, "%s/unified", root);
            best = min_quota(quota_up(mount, path, quota_v2), best);
        } else if (has_controller(ctrl, "cpu")) {
            snprintf(mount, sizeof mount, "%s/%s", root, ctrl);
            double q = quota_up(mount, path, quota_v1);
            if (q == 0 && strcmp(ctrl, "cpu") != 0) {
                snprintf(mount, sizeof mount, "%s/cpu", root);
                q = quota_up(mount, path, quota_v1);
            }
            best = min_quota(q, best);
        }
    }
    fclose(f);
    return best;
}

void stoker__cpus_probe_at(const char *root, const char *self, stoker__cpus *out)
{
    memset(out, 0, sizeof *out);
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    out->online = online > 0 ? (int)online : 1;
    const int aff = affinity_cpus();
    out->affinity = aff > 0 ? aff : out->online;
    out->quota = cgroup_quota(root, self);
    out->usable = out->affinity;
    if (out->quota > 0) {
        /* rounded up: a fraction of a CPU still runs a thread */
        const double q = out->quota < 1 ? 1 : out->quota > 1e6 ? 1e6 : out->quota;
        const int whole = (int)q + ((double)(int)q < q - 1e-9 ? 1 : 0);
        if (whole < out->usable)
            out->usable = whole;
    }
}

void stoker__cpus_probe(stoker__cpus *out)
{
    stoker__cpus_probe_at("/sys/fs/cgroup", "/proc/self/cgroup", out);
}
