/*
 * test_util.h: small helpers shared by the tests: temporary directories and
 * reading back a session database. Test-only; never linked into flare.
 */
#ifndef FLARE_TESTS_TEST_UTIL_H
#define FLARE_TESTS_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Creates a fresh directory under /tmp; aborts the test program on failure. */
static inline void test_make_temp_dir(char *buffer, size_t size, const char *tag)
{
    snprintf(buffer, size, "/tmp/flare-test-%s-XXXXXX", tag);
    if (mkdtemp(buffer) == NULL) {
        perror("mkdtemp");
        abort();
    }
}

/* rm -rf of a test directory (paths under /tmp/flare-test- only). */
static inline void test_remove_dir(const char *path)
{
    if (strncmp(path, "/tmp/flare-test-", 16) != 0)
        return;
    char command[4200];
    snprintf(command, sizeof(command), "rm -rf '%s'", path);
    if (system(command) != 0) {
    }
}

#endif /* FLARE_TESTS_TEST_UTIL_H */
