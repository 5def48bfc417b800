/*
 * test_util.h: small helpers shared by the tests: temporary directories,
 * reading back a session database, and waiting for a condition. Test-only;
 * never linked into flare.
 *
 * Waiting: a test never sleeps for a fixed time hoping another thread got
 * somewhere; it polls the condition it needs with TEST_WAIT_UNTIL, whose
 * bound (TEST_WAIT_SECONDS) is only there to turn a hang into a failure. The
 * suite runs on small machines kept busy by other work (scripts/test.sh
 * stress), where a thread may wait seconds for a core.
 */
#ifndef FLARE_TESTS_TEST_UTIL_H
#define FLARE_TESTS_TEST_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* How long TEST_WAIT_UNTIL waits before it calls the condition a failure. */
#define TEST_WAIT_SECONDS 60

/* CLOCK_MONOTONIC in nanoseconds (flare's clock). */
static inline uint64_t test_now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* Sleeps at least ms milliseconds, even when a signal interrupts it. For the
 * shape of a workload (a step that lasts 5 ms) and the poll of a wait, never
 * to let another thread get somewhere: wait for that with TEST_WAIT_UNTIL. */
static inline void test_pause_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

/* Polls condition (evaluated again each millisecond) until it holds; fails
 * the test, naming it, when it still does not after TEST_WAIT_SECONDS.
 * Needs cmocka.h (fail_msg). */
#define TEST_WAIT_UNTIL(condition)                                                                 \
    do {                                                                                           \
        uint64_t test_wait_deadline_ = test_now_ns() + TEST_WAIT_SECONDS * 1000000000ull;          \
        while (!(condition)) {                                                                     \
            if (test_now_ns() >= test_wait_deadline_)                                              \
                fail_msg("%s:%d: still false after %d s: %s", __FILE__, __LINE__,                  \
                         TEST_WAIT_SECONDS, #condition);                                           \
            test_pause_ms(1);                                                                      \
        }                                                                                          \
    } while (0)

#endif /* FLARE_TESTS_TEST_UTIL_H */
