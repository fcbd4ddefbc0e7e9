/* SPDX-License-Identifier: Apache-2.0 */
/* Loading nvJPEG at run time (src/cuda/nvjpeg.c): a missing or broken library means
 * "unavailable, with the reason", never a failure of another kind or a crash. The library
 * named by STOKER_NVJPEG_LIBRARY (or libnvjpeg.so.13, libnvjpeg.so) may be absent, a file
 * that is no library, or a real library without nvJPEG's functions (libz, libpng): each
 * reason names the library and what is missing, a short reason buffer is cut and
 * terminated, and a library that was loaded and found wanting is unloaded again (run under
 * AddressSanitizer, nothing leaks either). A build without CUDA always says so. Where
 * nvJPEG and a GPU with decoder engines exist (the GPU machine), opening succeeds instead
 * and is checked by test_gpu_nvjpeg. */
#include "testutil.h"

#include "cuda/cuda.h"
#include "cuda/nvjpeg.h"

#include <dlfcn.h>

#define NO_CUDA "this build has no CUDA support"

/* Opens with STOKER_NVJPEG_LIBRARY set to lib (NULL: unset); expects STOKER_E_UNSUPPORTED
 * and a reason holding each of the needles (all of them NO_CUDA in a build without CUDA). */
static void expect_unavailable(const char *lib, const char *const needles[], int n)
{
    static char last[1024];
    if (lib)
        T_ASSERT(setenv("STOKER_NVJPEG_LIBRARY", lib, 1) == 0);
    else
        T_ASSERT(unsetenv("STOKER_NVJPEG_LIBRARY") == 0);
    stoker__nvjpeg *nj = (stoker__nvjpeg *)&n; /* overwritten with NULL */
    char why[1024];
    memset(why, 'x', sizeof why);
    T_EQ_RC(stoker__nvjpeg_open(&nj, 0, why, sizeof why), STOKER_E_UNSUPPORTED);
    T_ASSERT(nj == NULL);
    T_ASSERT(memchr(why, '\0', sizeof why) != NULL);
    if (strcmp(why, last) != 0) /* each reason once */
        printf("%s: %s\n", lib ? lib : "(default)", why);
    snprintf(last, sizeof last, "%s", why);
    if (!stoker__cuda_built()) {
        T_CONTAINS(why, NO_CUDA);
        return;
    }
    for (int i = 0; i < n; i++)
        T_CONTAINS(why, needles[i]);
}

static void check_absent(void)
{
    const char *const path[] = {"/nonexistent/libnvjpeg.so.13", "nvJPEG not found"};
    expect_unavailable(path[0], path, 2);
    const char *const name[] = {"libnvjpeg-absent.so.99", "nvJPEG not found"};
    expect_unavailable(name[0], name, 2);
}

/* The default names, where this machine has neither (CI, and this build machine). */
static void check_default(void)
{
    void *a = dlopen("libnvjpeg.so.13", RTLD_NOW | RTLD_LOCAL);
    void *b = a ? NULL : dlopen("libnvjpeg.so", RTLD_NOW | RTLD_LOCAL);
    if (a || b) {
        printf("nvJPEG is present here: the default names are checked by test_gpu_nvjpeg\n");
        dlclose(a ? a : b);
        return;
    }
    const char *const both[] = {"nvJPEG not found", "libnvjpeg.so.13", "libnvjpeg.so"};
    expect_unavailable(NULL, both, 3);
    expect_unavailable("", both, 3); /* empty: the default names */
}

static void check_not_a_library(void)
{
    char *dir = t_mkdtemp("nvjpeg-load");
    char path[4200];
    snprintf(path, sizeof path, "%s/libnvjpeg.so.13", dir);
    const char text[] = "not a shared object, only text\n";
    t_write_file(path, text, sizeof text - 1);
    const char *const needles[] = {"nvJPEG not found", path};
    expect_unavailable(path, needles, 2);
    t_write_file(path, "", 0); /* empty */
    expect_unavailable(path, needles, 2);
    t_rmrf(dir);
    free(dir);
}

/* A real library without nvJPEG's functions: every required one is named. */
static void check_wrong_library(void)
{
    const char *const needles[] = {"libz.so.1",
                                   "lacks 15 nvJPEG functions",
                                   "nvjpegCreateEx",
                                   "nvjpegDecodeBatchedSupportedEx",
                                   "nvjpegDecodeBatchedEx",
                                   "nvjpegGetImageInfo"};
    expect_unavailable("libz.so.1", needles, 6);
    /* not a dependency of the tests: after the failure, it is no longer loaded */
    const char *png = "libpng16.so.16";
    void *before = dlopen(png, RTLD_NOW | RTLD_NOLOAD);
    if (before) {
        dlclose(before);
        printf("%s is loaded already: its unloading is not observable\n", png);
    }
    const char *const png_needles[] = {png, "nvjpegCreateEx"};
    for (int i = 0; i < 50; i++) /* over and over: nothing accumulates */
        expect_unavailable(png, png_needles, 2);
    void *after = dlopen(png, RTLD_NOW | RTLD_NOLOAD);
    if (!before && after)
        T_FAIL("%s stayed loaded after nvJPEG was found missing in it", png);
    if (after)
        dlclose(after);
}

/* A reason longer than its buffer is cut, terminated, and nothing past it is written. */
static void check_short_reason(void)
{
    T_ASSERT(setenv("STOKER_NVJPEG_LIBRARY", "libz.so.1", 1) == 0);
    for (size_t cap = 0; cap < 40; cap++) {
        char why[64];
        memset(why, 'x', sizeof why);
        stoker__nvjpeg *nj = NULL;
        T_EQ_RC(stoker__nvjpeg_open(&nj, 0, cap ? why : NULL, cap), STOKER_E_UNSUPPORTED);
        T_ASSERT(nj == NULL);
        if (cap)
            T_ASSERT(strlen(why) == cap - 1 || strlen(why) < cap);
        for (size_t i = cap; i < sizeof why; i++)
            T_ASSERT(why[i] == 'x');
    }
    stoker__nvjpeg_close(NULL);
}

int main(void)
{
    check_absent();
    check_default();
    check_not_a_library();
    check_wrong_library();
    check_short_reason();
    return 0;
}
