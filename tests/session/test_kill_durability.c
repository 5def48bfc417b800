/*
 * test_kill_durability.c: a recording process SIGKILLed at 50 random
 * points, at every flush interval from 1 ms to 250 ms. After each kill the
 * session must open, pass SQLite's integrity check, hold a prefix of what
 * the process recorded (never a hole, never more than it recorded), and
 * have lost no more than the documented bound: the last flush interval,
 * the collector's 5 ms poll and one commit (docs/RELIABILITY.md), with a
 * generous allowance for a machine whose cores are all busy (the
 * collector may wait for one). The gaps measured are printed for the
 * figures in docs/RELIABILITY.md.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "flare/flare.h"
#include "test_util.h"

#define KILLS      50
#define MAX_SCOPES (1u << 20)
/* What a machine with every core busy may add to the bound: the collector
 * waiting for a core, a write-ahead-log checkpoint inside a commit. */
#define BUSY_ALLOWANCE_NS 2000000000ull
#define POLL_NS           5000000ull

typedef struct shared_progress {
    _Atomic uint64_t count;
    _Atomic int started;
    uint64_t end_ns[MAX_SCOPES];
} shared_progress;

static void child_main(const char *dir, uint32_t flush_ms, shared_progress *progress)
{
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = flush_ms;
    if (flare_init(&options) != FLARE_OK)
        _exit(3);
    atomic_store(&progress->started, 1);
    for (uint64_t i = 0; i < MAX_SCOPES; i++) {
        if (flare_scope_begin("tick") != FLARE_OK || flare_scope_end() != FLARE_OK)
            _exit(4); /* a dropped scope would read as a hole */
        progress->end_ns[i] = core_now_ns();
        atomic_store_explicit(&progress->count, i + 1, memory_order_release);
        /* Paced so the ring never fills: this is about durability. */
        if ((i & 31) == 31) {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
    }
    _exit(0);
}

static int64_t query(sqlite3 *db, const char *sql, char *text, size_t text_size)
{
    sqlite3_stmt *statement;
    int64_t value = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(statement) == SQLITE_ROW) {
        value = sqlite3_column_int64(statement, 0);
        if (text != NULL)
            snprintf(text, text_size, "%s", (const char *)sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
    return value;
}

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_fifty_kills_at_random_points(void **state)
{
    (void)state;
    static const uint32_t intervals_ms[] = {1, 10, 100, 250};
    enum { INTERVALS = sizeof(intervals_ms) / sizeof(intervals_ms[0]) };
    uint64_t seed = (uint64_t)time(NULL) | 1;
    const char *fixed = getenv("FLARE_TEST_SEED");
    if (fixed != NULL)
        seed = strtoull(fixed, NULL, 10) | 1;
    print_message("seed %llu (FLARE_TEST_SEED reproduces it)\n", (unsigned long long)seed);
    uint64_t random_state = seed;
    shared_progress *progress =
        mmap(NULL, sizeof(*progress), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(progress != MAP_FAILED);
    uint64_t gaps[INTERVALS][KILLS];
    int gap_count[INTERVALS] = {0};
    for (int kill_index = 0; kill_index < KILLS; kill_index++) {
        int which = kill_index % INTERVALS;
        uint32_t flush_ms = intervals_ms[which];
        char dir[256];
        test_make_temp_dir(dir, sizeof(dir), "kill");
        atomic_store(&progress->count, 0);
        atomic_store(&progress->started, 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0)
            child_main(dir, flush_ms, progress);
        /* Wait (bounded) for the session to start, then kill at a random
         * point 0-600 ms into the recording: across commits, mid-commit. */
        for (int i = 0; i < 60000 && !atomic_load(&progress->started); i++) {
            int status;
            assert_int_equal(waitpid(child, &status, WNOHANG), 0);
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
        }
        assert_true(atomic_load(&progress->started));
        uint64_t delay_us = next_random(&random_state) % 600000;
        struct timespec pause = {(time_t)(delay_us / 1000000), (long)(delay_us % 1000000) * 1000};
        nanosleep(&pause, NULL);
        uint64_t kill_ns = core_now_ns();
        assert_int_equal(kill(child, SIGKILL), 0);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        uint64_t emitted = atomic_load(&progress->count);

        /* The session opens, is sound, and holds a prefix of the ticks. */
        char path[300], text[64];
        snprintf(path, sizeof(path), "%s/session.db", dir);
        sqlite3 *db;
        assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        query(db, "PRAGMA integrity_check", text, sizeof(text));
        assert_string_equal(text, "ok");
        assert_int_equal(query(db, "SELECT COUNT(*) FROM session", NULL, 0), 1);
        int64_t stored = query(db, "SELECT COUNT(*) FROM scopes", NULL, 0);
        sqlite3_close(db);
        assert_true(stored >= 0 && (uint64_t)stored <= emitted);
        /* The loss: from the last stored tick's end (or the start) to the
         * kill. Ticks are stored in order, so the stored ones are the first. */
        uint64_t last_kept_ns = stored > 0 ? progress->end_ns[stored - 1] : 0;
        uint64_t bound_ns = (uint64_t)flush_ms * 1000000ull + POLL_NS + BUSY_ALLOWANCE_NS;
        if (stored > 0) {
            uint64_t gap = kill_ns - last_kept_ns;
            gaps[which][gap_count[which]++] = gap;
            if (gap > bound_ns)
                fail_msg("kill %d (flush %u ms): the last %llu ms before the kill were lost "
                         "(%lld of %llu ticks stored)",
                         kill_index, flush_ms, (unsigned long long)(gap / 1000000),
                         (long long)stored, (unsigned long long)emitted);
        } else {
            /* Nothing committed yet: only allowed within the first bound. */
            assert_true(emitted == 0 || progress->end_ns[0] + bound_ns >= kill_ns);
        }
        test_remove_dir(dir);
    }
    for (int which = 0; which < INTERVALS; which++) {
        if (gap_count[which] == 0)
            continue;
        qsort(gaps[which], (size_t)gap_count[which], sizeof(uint64_t), compare_u64);
        print_message("flush %3u ms: %2d kills, lost window median %.1f ms, max %.1f ms\n",
                      intervals_ms[which], gap_count[which],
                      (double)gaps[which][gap_count[which] / 2] / 1e6,
                      (double)gaps[which][gap_count[which] - 1] / 1e6);
    }
    munmap(progress, sizeof(*progress));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fifty_kills_at_random_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
