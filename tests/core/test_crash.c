/*
 * test_crash.c: durability against SIGKILL. A child process records scopes
 * as fast as it can, counting them in shared memory; the parent reads the
 * live database until the child's collector has committed a few hundred,
 * kills the child, reopens the database and requires every scope it had
 * seen committed (and none the child never recorded).
 *
 * It used to require every scope that ended more than 250 ms (a flush
 * interval and more) before the kill; on a busy machine the collector may
 * wait longer than that for a core, so the test now waits for the commit it
 * needs instead of for a time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flare/flare.h"
#include "store/store.h"
#include "test_util.h"

#define MAX_SCOPES (1u << 22)
/* Scopes the parent waits to see committed before the kill. */
#define COMMITTED_BEFORE_KILL 500

typedef struct shared_progress {
    _Atomic uint64_t count;
    _Atomic int started;
} shared_progress;

static void child_main(const char *dir, shared_progress *progress)
{
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 100;
    if (flare_init(&options) != FLARE_OK)
        _exit(3);
    atomic_store(&progress->started, 1);
    for (uint64_t i = 0; i < MAX_SCOPES; i++) {
        flare_scope_begin("tick");
        flare_scope_end();
        atomic_store_explicit(&progress->count, i + 1, memory_order_release);
        /* Pace the child so its ring never overflows: this test is about
         * durability, not drops. */
        if ((i & 63) == 63) {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
    }
    /* Done early (the parent waited long for a core): wait for the kill. */
    for (;;)
        pause();
}

static int64_t tick_count;

static int on_scope(const store_duration_stats *stats, void *user)
{
    (void)user;
    if (strcmp(stats->name, "tick") == 0)
        tick_count = stats->count;
    return 0;
}

/* The "tick" scopes in the database of dir now (the child may be writing
 * it); -1 when it cannot be read yet. */
static int64_t committed_ticks(const char *dir)
{
    store *database;
    char error[512];
    if (store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)) != 0)
        return -1;
    tick_count = 0;
    int64_t count = store_read_scope_stats(database, 0, on_scope, NULL) == 0 ? tick_count : -1;
    store_close(database);
    return count;
}

static void test_sigkill_keeps_everything_before_last_flush(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "crash");
    shared_progress *progress =
        mmap(NULL, sizeof(*progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(progress != MAP_FAILED);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        child_main(dir, progress);
    int status;
    TEST_WAIT_UNTIL(atomic_load(&progress->started) || waitpid(child, &status, WNOHANG) != 0);
    assert_true(atomic_load(&progress->started)); /* else the child failed to start flare */
    /* Committed, as a reader sees it: what the kill must not take away. */
    int64_t must_have;
    TEST_WAIT_UNTIL((must_have = committed_ticks(dir)) >= COMMITTED_BEFORE_KILL);
    assert_int_equal(kill(child, SIGKILL), 0);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    uint64_t emitted = atomic_load(&progress->count);

    store *database;
    char error[512];
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), 0);
    store_session_summary summary;
    assert_int_equal(store_read_session(database, &summary), 0);
    assert_int_equal(summary.process_count, 1);
    assert_int_equal(store_read_scope_stats(database, 0, on_scope, NULL), 0);
    store_close(database);
    print_message("emitted %llu scopes, %lld seen committed before the kill, %lld in the "
                  "database\n",
                  (unsigned long long)emitted, (long long)must_have, (long long)tick_count);
    assert_true(tick_count >= must_have);
    assert_true(tick_count <= (int64_t)emitted);
    munmap(progress, sizeof(*progress));
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigkill_keeps_everything_before_last_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
