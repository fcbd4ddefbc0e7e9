/* SPDX-License-Identifier: Apache-2.0 */
/* The CPUs a process may use (common/cpus.c): cgroup v2 and v1 quota files found through a
 * /proc/self/cgroup list, in trees of the test's own; the affinity mask of this process. */
#include "common/common.h"
#include "testutil.h"

#include <sched.h>

static char root[4096];

/* Writes `text` to root/rel, making the folders on the way. */
static void put(const char *rel, const char *text)
{
    char path[8192], cmd[8300];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    T_ASSERT(system(cmd) == 0);
    *slash = '/';
    t_write_file(path, text, strlen(text));
}

static stoker__cpus probe(const char *self_rel)
{
    char cg[8192], self[8192];
    snprintf(cg, sizeof cg, "%s/fs", root);
    snprintf(self, sizeof self, "%s/%s", root, self_rel);
    stoker__cpus c;
    stoker__cpus_probe_at(cg, self, &c);
    return c;
}

static int affinity(void)
{
    cpu_set_t set;
    T_ASSERT(sched_getaffinity(0, sizeof set, &set) == 0);
    return CPU_COUNT(&set);
}

int main(void)
{
    char *made = t_mkdtemp("cpus");
    snprintf(root, sizeof root, "%s", made);
    free(made);
    const int aff = affinity();
    T_ASSERT(aff >= 1);

    /* no quota anywhere: the affinity mask's CPUs */
    put("none", "0::/job\n");
    put("fs/job/cpu.max", "max 100000\n");
    stoker__cpus c = probe("none");
    T_EQ_INT(c.affinity, aff);
    T_ASSERT(c.quota == 0);
    T_EQ_INT(c.usable, aff);
    T_ASSERT(c.online >= 1);

    /* v2: the smallest quota on the way up (the parent's 0.5 CPU bounds the child's 3) */
    put("v2", "0::/a/b\n");
    put("fs/a/b/cpu.max", "300000 100000\n");
    put("fs/a/cpu.max", "50000 100000\n");
    c = probe("v2");
    T_ASSERT(c.quota > 0.49 && c.quota < 0.51);
    T_EQ_INT(c.usable, 1); /* a fraction still runs a thread */

    /* v2, 2.5 CPUs: rounded up to 3 (then bounded by the mask) */
    put("v2b", "0::/c\n");
    put("fs/c/cpu.max", "250000 100000\n");
    c = probe("v2b");
    T_ASSERT(c.quota > 2.49 && c.quota < 2.51);
    T_EQ_INT(c.usable, aff < 3 ? aff : 3);

    /* v1 with cpu,cpuacct mounted together; a path /proc names that the mount does not hold
     * (a container's view) falls back to the folders above it */
    put("v1", "12:memory:/x\n4:cpu,cpuacct:/docker/abc\n2:cpuacct:/\n");
    put("fs/cpu,cpuacct/cpu.cfs_quota_us", "100000\n");
    put("fs/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    c = probe("v1");
    T_ASSERT(c.quota > 0.99 && c.quota < 1.01);
    T_EQ_INT(c.usable, 1);

    /* v1 mounted as cpu alone; -1 is no quota */
    put("v1b", "1:cpu:/j\n");
    put("fs/cpu/j/cpu.cfs_quota_us", "-1\n");
    put("fs/cpu/j/cpu.cfs_period_us", "100000\n");
    c = probe("v1b");
    T_ASSERT(c.quota == 0);
    T_EQ_INT(c.usable, aff);

    /* unreadable or malformed files: no quota, never a failure */
    put("bad", "garbage\n0::\n1:cpu:relative\n0::/m\n");
    put("fs/m/cpu.max", "lots 0\n");
    c = probe("bad");
    T_ASSERT(c.quota == 0);
    c = probe("no-such-file");
    T_ASSERT(c.quota == 0);
    T_EQ_INT(c.usable, aff);

    t_rmrf(root);
    return 0;
}
