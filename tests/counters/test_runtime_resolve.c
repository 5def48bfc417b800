/*
 * test_runtime_resolve.c: where a module looks for the shared libflare
 * runtime. A relative CUDA_INJECTION64_PATH must never make it load a
 * libflare.so from the working directory (issue 19): only absolute paths
 * are searched beside.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "counters/runtime_resolve.h"
#include "test_util.h"

static void test_relative_injection_path_is_not_searched(void **state)
{
    (void)state;
    char dir[256], bait[300], previous[4096];
    test_make_temp_dir(dir, sizeof(dir), "resolve");
    /* A "libflare.so" in the working directory: not a library, so loading
     * it would fail with the loader's complaint about its contents. */
    snprintf(bait, sizeof(bait), "%s/libflare.so", dir);
    int fd = open(bait, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a library\n", 14), 14);
    close(fd);
    assert_non_null(getcwd(previous, sizeof(previous)));
    assert_int_equal(chdir(dir), 0);
    unsetenv("FLARE_RUNTIME_PATH");
    unsetenv("FLARE_RUNTIME_DISABLE_SHARING");
    const char *relative[] = {"libflare.so", "./libflare.so", "sub/../libflare.so"};
    for (size_t i = 0; i < sizeof(relative) / sizeof(relative[0]); i++) {
        setenv("CUDA_INJECTION64_PATH", relative[i], 1);
        counters_runtime_resolution resolution;
        memset(&resolution, 0, sizeof(resolution));
        counters_runtime_resolve(NULL, &resolution);
        if (resolution.path[0] != '\0')
            assert_true(strstr(resolution.path, dir) == NULL);
        assert_non_null(strstr(resolution.reason, "is not an absolute path"));
        /* Never tried: no loader error about the bait. */
        assert_null(strstr(resolution.reason, "invalid ELF header"));
        assert_null(strstr(resolution.reason, "file too short"));
    }
    /* An absolute path is searched beside (and the bait refused by the loader). */
    char absolute[400];
    snprintf(absolute, sizeof(absolute), "%s/injected.so", dir);
    setenv("CUDA_INJECTION64_PATH", absolute, 1);
    counters_runtime_resolution resolution;
    memset(&resolution, 0, sizeof(resolution));
    counters_runtime_resolve(NULL, &resolution);
    assert_null(resolution.table);
    assert_non_null(strstr(resolution.reason, bait));
    unsetenv("CUDA_INJECTION64_PATH");
    assert_int_equal(chdir(previous), 0);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative_injection_path_is_not_searched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
