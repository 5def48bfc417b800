/*
 * test_storm_completions.c: the launch-storm guard end to end on the simulated
 * device, with real threads: two threads launch in bursts while
 * the collector's beat steps the guard; every launch is then either a
 * kernel row, counted untimed, or a counted ring drop; a deep window opened
 * during the storm records its kernels; the report says what went untimed;
 * a later session without the guard inherits nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/capability.h"
#include "flare/flare.h"
#include "flare/sim.h"
#include "storm/storm_guard.h"
#include "storm/storm_completions.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_session.h"
#include "test_sql.h"
#include "test_util.h"

#define LAUNCHERS 2
/* Each launcher pauses 1 ms after every burst: a few 10,000 launches a
 * second, a storm for a guard set at 2000/s even in a sanitizer build,
 * without starving the tests that run beside this one. */
#define BURST 20
#define MS    1000000ull

static void empty_kernel(const flare_sim_launch *launch)
{
    (void)launch;
}

typedef struct launcher {
    pthread_t thread;
    int kernel;
    atomic_bool *stop;
    uint64_t launched;
    int failed;
} launcher;

static void *launch_until_stopped(void *argument)
{
    launcher *self = argument;
    flare_sim_stream *stream = NULL;
    if (flare_sim_stream_create(0, &stream) != FLARE_OK) {
        self->failed = 1;
        return NULL;
    }
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    while (!atomic_load(self->stop)) {
        if (flare_sim_launch_kernel(stream, self->kernel, grid, block, NULL, 0) != FLARE_OK) {
            self->failed = 1;
            break;
        }
        if (++self->launched % BURST == 0) {
            struct timespec pause = {0, 1000000};
            nanosleep(&pause, NULL);
        }
    }
    if (flare_sim_stream_destroy(stream) != FLARE_OK)
        self->failed = 1;
    return NULL;
}

static void pause_ms(unsigned ms)
{
    struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* The session database of dir, read-only. */
static sqlite3 *open_session_db(const char *dir)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

static void start_session(const char *dir)
{
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 20;
    assert_int_equal(flare_init(&options), FLARE_OK);
}

static void test_storm_on_the_simulated_device(void **unused)
{
    (void)unused;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "storm");
    setenv("FLARE_STORM_RATE", "2000/s", 1);
    start_session(dir);
    int kernel;
    assert_int_equal(flare_sim_kernel_register("storm_kernel", empty_kernel, &kernel), FLARE_OK);
    atomic_bool stop = false;
    launcher launchers[LAUNCHERS];
    for (int i = 0; i < LAUNCHERS; i++) {
        launchers[i] = (launcher){.kernel = kernel, .stop = &stop};
        assert_int_equal(
            pthread_create(&launchers[i].thread, NULL, launch_until_stopped, &launchers[i]), 0);
    }
    /* The storm is confirmed 50 ms after the rate is over the limit. */
    TEST_WAIT_UNTIL(storm_completions_in_storm());
    pause_ms(100); /* an untimed stretch: no slice comes before a second */
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 100;
    window.label = "during the storm";
    assert_int_equal(flare_window_open(&window), FLARE_OK);
    TEST_WAIT_UNTIL(!deepwin_blackout_active(deepwin_session_coordinator()));
    atomic_store(&stop, true);
    uint64_t launched = 0;
    for (int i = 0; i < LAUNCHERS; i++) {
        pthread_join(launchers[i].thread, NULL);
        assert_false(launchers[i].failed);
        launched += launchers[i].launched;
    }
    assert_int_equal(flare_sim_device_synchronize(0, 10000), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_STORM_RATE");

    sqlite3 *db = open_session_db(dir);
    int64_t rows = test_sql_int(db, "SELECT COUNT(*) FROM kernels");
    int64_t untimed = test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                       "'storm_guard' AND detail LIKE 'kernel launches%'");
    /* A launcher's ring holds its API calls, kernels complete into the
     * device threads' rings: ring drops split by thread. */
    int64_t ring = test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                    "'event_ring'");
    int64_t ring_api = test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                        "'event_ring' AND detail IN (SELECT DISTINCT 'thread ' || "
                                        "thread_id FROM api_calls)");
    int64_t ring_kernels = ring - ring_api;
    /* Every launch accounted for, exactly. */
    if ((uint64_t)(rows + untimed + ring_kernels) != launched)
        fail_msg("%lld rows + %lld untimed + %lld kernels dropped in rings != %llu launched",
                 (long long)rows, (long long)untimed, (long long)ring_kernels,
                 (unsigned long long)launched);
    assert_true(untimed > 0);
    assert_true(rows > 0);
    /* The storm's period (table storms): one or more, in order, the one the
     * window held still running or ended, each with launches left untimed
     * and spanning the moment the test saw the storm. */
    int64_t storms = test_sql_int(db, "SELECT COUNT(*) FROM storms");
    assert_true(storms >= 1);
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM storms WHERE end_ns < start_ns OR device != "
                         "-1"),
        0);
    assert_true(test_sql_int(db, "SELECT COALESCE(SUM(untimed_launches), 0) FROM storms") > 0);
    assert_true(test_sql_int(db, "SELECT COUNT(*) FROM storms WHERE still_open = 1") <= 1);
    assert_true(test_sql_int(db, "SELECT COUNT(*) FROM storms s JOIN windows w ON s.start_ns < "
                                 "w.opened_ns") >= 1);
    /* Every launch that queued work is an API call on its launching thread
     * (the simulated device records them in storms too), each pointing to
     * its kernel by correlation id when the kernel was timed. */
    int64_t calls = test_sql_int(db, "SELECT COUNT(*) FROM api_calls");
    if ((uint64_t)(calls + ring_api) != launched)
        fail_msg("%lld API calls + %lld dropped in rings != %llu launches", (long long)calls,
                 (long long)ring_api, (unsigned long long)launched);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(DISTINCT thread_id) FROM api_calls"),
                     LAUNCHERS);
    int64_t unmatched =
        test_sql_int(db, "SELECT COUNT(*) FROM kernels k WHERE NOT EXISTS (SELECT 1 FROM "
                         "api_calls a WHERE a.pid = k.pid AND a.correlation_id = "
                         "k.correlation_id AND a.start_ns <= k.start_ns)");
    if (unmatched > ring_api)
        fail_msg("%lld kernels without their API call (%lld dropped in rings)",
                 (long long)unmatched, (long long)ring_api);
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM capabilities WHERE feature = 'storm_guard' "
                         "AND status = 'active' AND reason LIKE 'over 2000 launches/s: %'"),
        1);
    /* The window held the guard: kernels that finished in it (after its first
     * beat) were recorded; next to none in the untimed stretch just before it
     * (the storm began at least 100 ms before, its first slice comes a second
     * after; a completion delayed past the switch under load may still be
     * recorded). Counted over the window's own 100 ms: its row closes later. */
    int64_t opened = test_sql_int(db, "SELECT opened_ns FROM windows");
    assert_true(opened > 0);
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM kernels WHERE end_ns BETWEEN %lld AND %lld",
             (long long)(opened + (int64_t)(10 * MS)), (long long)(opened + (int64_t)(100 * MS)));
    int64_t inside = test_sql_int(db, sql);
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM kernels WHERE end_ns BETWEEN %lld AND %lld",
             (long long)(opened - (int64_t)(95 * MS)), (long long)(opened - (int64_t)(5 * MS)));
    int64_t before = test_sql_int(db, sql);
    if (inside == 0 || before * 20 > inside)
        fail_msg("%lld kernels recorded in the window, %lld in the 90 ms before it",
                 (long long)inside, (long long)before);
    sqlite3_close(db);

    /* The report says it up front. */
    char command[700], output[4096] = "";
    const char *bin = getenv("FLARE_TEST_BIN_DIR");
    snprintf(command, sizeof(command), "%s/flare report '%s' 2>&1", bin != NULL ? bin : "bin", dir);
    FILE *pipe = popen(command, "r");
    assert_non_null(pipe);
    size_t used = fread(output, 1, sizeof(output) - 1, pipe);
    output[used] = '\0';
    assert_int_equal(pclose(pipe), 0);
    if (strstr(output, "  untimed    ") == NULL)
        fail_msg("no 'untimed' line in the report:\n%s", output);
    test_remove_dir(dir);

    /* A later session with the guard asked for but no simulated work (as in
     * a CUDA process): nothing inherited either. */
    test_make_temp_dir(dir, sizeof(dir), "idle");
    setenv("FLARE_STORM_RATE", "5000", 1);
    start_session(dir);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_STORM_RATE");
    db = open_session_db(dir);
    assert_int_equal(test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                      "'storm_guard'"),
                     0);
    assert_int_equal(test_sql_int(db,
                                  "SELECT COUNT(*) FROM capabilities WHERE feature = 'storm_guard' "
                                  "AND status = 'off' AND reason = 'no simulated work in this "
                                  "session'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);

    /* A later session without the guard: nothing inherited. */
    test_make_temp_dir(dir, sizeof(dir), "calm");
    start_session(dir);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    db = open_session_db(dir);
    assert_int_equal(test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                      "'storm_guard'"),
                     0);
    assert_int_equal(test_sql_int(db,
                                  "SELECT COUNT(*) FROM capabilities WHERE feature = 'storm_guard' "
                                  "AND status = 'active'"),
                     0);
    sqlite3_close(db);
    test_remove_dir(dir);
}

/* A guard asked for in a process whose work is not the simulated device's
 * (a CUDA program under flare trace --storm-rate): the CUDA tracer's rows,
 * set here as it sets them, are left as they are. */
static void test_no_simulated_work_leaves_the_rows_alone(void **unused)
{
    (void)unused;
    char dir[256];
    /* Whatever an earlier test left: a session without the guard first. */
    unsetenv("FLARE_STORM_RATE");
    test_make_temp_dir(dir, sizeof(dir), "reset");
    start_session(dir);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    test_remove_dir(dir);
    test_make_temp_dir(dir, sizeof(dir), "cuda");
    setenv("FLARE_STORM_RATE", "5000", 1);
    start_session(dir);
    core_capability_set("storm_guard", 1, CORE_CAPABILITY_ACTIVE, "the CUDA tracer's summary");
    core_drops_set("storm_guard", STORM_GUARD_DROP_LAUNCHES, 42);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_STORM_RATE");
    sqlite3 *db = open_session_db(dir);
    assert_int_equal(test_sql_int(db,
                                  "SELECT COUNT(*) FROM capabilities WHERE feature = 'storm_guard' "
                                  "AND reason = 'the CUDA tracer''s summary'"),
                     1);
    assert_int_equal(test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                      "'storm_guard'"),
                     42);
    sqlite3_close(db);
    test_remove_dir(dir);
    core_drops_set("storm_guard", STORM_GUARD_DROP_LAUNCHES, 0); /* for the next test */
}

/* Without FLARE_STORM_RATE the simulated device's work is all recorded,
 * whatever its rate; a bad value is logged and the default rate used. */
static void test_guard_only_when_asked(void **unused)
{
    (void)unused;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "asked");
    setenv("FLARE_STORM_RATE", "fast", 1);
    start_session(dir);
    /* A little simulated work, far from a storm: the guard reports. */
    int kernel;
    assert_int_equal(flare_sim_kernel_register("calm_kernel", empty_kernel, &kernel), FLARE_OK);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    for (int i = 0; i < 10; i++)
        assert_int_equal(flare_sim_launch_kernel(stream, kernel, grid, block, NULL, 0), FLARE_OK);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_STORM_RATE");
    sqlite3 *db = open_session_db(dir);
    assert_int_equal(test_sql_int(db,
                                  "SELECT COUNT(*) FROM capabilities WHERE feature = 'storm_guard' "
                                  "AND reason LIKE 'over 50000 launches/s: 0 storm(s)%'"),
                     1);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM kernels"), 10);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM log WHERE message LIKE "
                                      "'FLARE_STORM_RATE: ''fast'' is not a number%'"),
                     1);
    sqlite3_close(db);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storm_on_the_simulated_device),
        cmocka_unit_test(test_no_simulated_work_leaves_the_rows_alone),
        cmocka_unit_test(test_guard_only_when_asked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
