/* SPDX-License-Identifier: Apache-2.0 */
/* A process forked while a loader or a writer is alive: the child's copy is not its own.
 * Destroying it there must neither hang (the loader's threads are the parent's) nor delete
 * the parent's unfinished output; the parent goes on as if nothing happened. */
#include "test_loader_util.h"

#include <signal.h>
#include <sys/wait.h>

/* Runs fn(arg) in a child and expects it to exit 0 within 20 seconds. */
static void in_child(void (*fn)(void *), void *arg)
{
    const pid_t pid = fork();
    T_ASSERT(pid >= 0);
    if (pid == 0) {
        alarm(20); /* a hang kills the child: the parent sees the signal */
        fn(arg);
        _exit(0);
    }
    int status = 0;
    T_ASSERT(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        T_FAIL("the child %s %d", WIFSIGNALED(status) ? "died of signal" : "exited with",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static void destroy_loader(void *arg)
{
    stoker_loader_destroy(arg);
}

static void destroy_writer(void *arg)
{
    stoker_writer_destroy(arg);
}

int main(void)
{
    char *dir = t_mkdtemp("fork");
    char path[4200], out[4200];
    snprintf(path, sizeof path, "%s/raw", dir);
    tl_make(path, 100, 64, 0, 0);

    stoker_config *cfg = tl_cfg(8, 2);
    stoker_loader *l = tl_open(path, cfg);
    stoker_batch *b = NULL;
    T_OK(stoker_loader_next(l, &b)); /* the workers are running */
    in_child(destroy_loader, l);
    tl_check_batch(b, 64);
    T_OK(stoker_batch_release(b));
    int n = 1;
    while (stoker_loader_next(l, &b) == 0) {
        tl_check_batch(b, 64);
        T_OK(stoker_batch_release(b));
        n++;
    }
    T_EQ_INT(n, 13);
    stoker_loader_destroy(l);

    snprintf(out, sizeof out, "%s/out", dir);
    stoker_writer *w = NULL;
    T_OK(stoker_writer_create(&w, out, NULL));
    T_OK(stoker_writer_add(w, "abc", 3, 0, NULL));
    in_child(destroy_writer, w);
    T_OK(stoker_writer_add(w, "defg", 4, 1, NULL));
    if (stoker_writer_finish(w) != 0)
        T_FAIL("finish after a child's destroy: %s", stoker_writer_errmsg(w));
    stoker_writer_destroy(w);
    stoker_dataset *ds = NULL;
    T_OK(stoker_dataset_open(&ds, out, NULL));
    T_EQ_INT(stoker_dataset_num_records(ds), 2);
    stoker_dataset_close(ds);

    stoker_config_destroy(cfg);
    t_rmrf(dir);
    free(dir);
    printf("fork ok\n");
    return 0;
}
