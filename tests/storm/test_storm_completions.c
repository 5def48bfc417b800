/*
 * test_storm_completions.c: the launch-storm guard end to end on the simulated
 * device, with real threads: two threads launch in bursts while
 * the collector's beat steps the guard; every launch is then either a
 * kernel row, counted untimed, or a counted ring drop; a deep window opened
 * during the storm records its kernels, while the untimed stretch just
 * before it (measured from the guard's own switches, not from the test's
 * clock) recorded next to none; the report says what went untimed; a later
 * session without the guard inherits nothing.
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
#include "store/store.h"
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

/* The guard's switches so far; fails the test when the session kept no
 * more of them (then the last one kept is not the guard's answer now). */
static size_t read_switches(storm_completions_switch *log)
{
    size_t count = storm_completions_switches(log, STORM_COMPLETIONS_SWITCHES_MAX);
    if (count >= STORM_COMPLETIONS_SWITCHES_MAX)
        fail_msg("the guard switched %zu times or more: the test cannot follow it", count);
    return count;
}

/* Whether the guard has left the simulated device's work untimed, without
 * a break, for at least for_ns: its last switch stopped timing that long
 * ago. *count: the switches so far. */
static bool untimed_for(uint64_t for_ns, size_t *count)
{
    storm_completions_switch log[STORM_COMPLETIONS_SWITCHES_MAX];
    *count = read_switches(log);
    return *count > 0 && !log[*count - 1].timed && flare_now_ns() - log[*count - 1].at_ns >= for_ns;
}

/* An untimed stretch of the storm that the window's request ended. */
typedef struct untimed_stretch {
    uint64_t off_ns; /* the guard stopped timing */
    uint64_t on_ns;  /* and timed again, at or after the window's request */
    char label[32];  /* the window's */
} untimed_stretch;

/* Opens a 100 ms window once the guard has left the work untimed for
 * 100 ms, and waits for it to close. true with *out filled when the
 * stretch lasted until the window was asked for; false when the guard
 * timed again before that (a sample slice, a second into the storm, or
 * the storm's end after half a second under half the rate: the test's
 * thread was held up that long on a loaded machine). */
static bool window_after_untimed_stretch(int attempt, untimed_stretch *out)
{
    size_t count = 0;
    TEST_WAIT_UNTIL(untimed_for(100 * MS, &count));
    uint64_t requested_ns = flare_now_ns();
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 100;
    snprintf(out->label, sizeof(out->label), "during the storm %d", attempt);
    window.label = out->label;
    assert_int_equal(flare_window_open(&window), FLARE_OK);
    TEST_WAIT_UNTIL(!deepwin_blackout_active(deepwin_session_coordinator()));
    /* The window's hold times every kernel: the switch after the one the
     * wait saw is the guard timing again, whoever asked for it first. */
    storm_completions_switch log[STORM_COMPLETIONS_SWITCHES_MAX];
    assert_true(read_switches(log) > count);
    assert_true(log[count].timed);
    out->off_ns = log[count - 1].at_ns;
    out->on_ns = log[count].at_ns;
    return out->on_ns >= requested_ns;
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
    /* A window after an untimed stretch of at least 100 ms; again when the
     * guard timed a sample slice or ended the storm before the request. */
    untimed_stretch stretch;
    int attempt = 1;
    while (!window_after_untimed_stretch(attempt, &stretch)) {
        if (++attempt > 10)
            fail_msg("the guard timed again before each of 10 windows was asked for");
    }
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
     * beat) were recorded; next to none in the 90 ms of the untimed stretch
     * before the guard timed again for it (the switches' times bracket the
     * stretch, at least 100 ms; a completion that ended just before the
     * switch and reached the guard after it, held up under load, may still
     * be recorded). Counted over the window's own 100 ms: its row closes
     * later. */
    assert_true(stretch.on_ns - stretch.off_ns >= 100 * MS);
    char sql[256];
    snprintf(sql, sizeof(sql), "SELECT opened_ns FROM windows WHERE label = '%s'", stretch.label);
    int64_t opened = test_sql_int(db, sql);
    assert_true(opened > 0);
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM kernels WHERE end_ns BETWEEN %lld AND %lld",
             (long long)(opened + (int64_t)(10 * MS)), (long long)(opened + (int64_t)(100 * MS)));
    int64_t inside = test_sql_int(db, sql);
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM kernels WHERE end_ns BETWEEN %lld AND %lld",
             (long long)(stretch.on_ns - 95 * MS), (long long)(stretch.on_ns - 5 * MS));
    int64_t before = test_sql_int(db, sql);
    if (inside == 0 || before * 20 > inside)
        fail_msg("%lld kernels recorded in the window, %lld in the 90 ms of the untimed stretch "
                 "before it",
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

/* A storm that ends on the collector's last beats, after flare_shutdown
 * turned recording off (its last passes still step the guard, and a
 * machine that held the collector half a second ends a storm there): the
 * ring refuses the storm's record, and the session's last batch writes it
 * instead. The guard's module alone, without a session (recording off, as
 * it is then), on a made-up clock. */
static void test_storm_ending_as_recording_stops_is_kept(void **unused)
{
    (void)unused;
    const uint64_t t0 = 1000000 * MS;
    setenv("FLARE_STORM_RATE", "2000/s", 1);
    storm_completions_begin(t0);
    unsetenv("FLARE_STORM_RATE");
    /* 100,000 launches a second: a storm, confirmed after 50 ms; 1000
     * launches in it left untimed. */
    for (uint64_t step = 1; step <= 6; step++) {
        for (int i = 0; i < 1000; i++)
            assert_true(storm_completions_record(true) == (step <= 5));
        storm_completions_beat(t0 + step * 10 * MS);
        assert_true(storm_completions_in_storm() == (step >= 5));
    }
    /* Then nothing for 600 ms: the storm ends, with nowhere to go. */
    storm_completions_beat(t0 + 660 * MS);
    assert_false(storm_completions_in_storm());
    storm_completions_end();

    char dir[256], error[256];
    test_make_temp_dir(dir, sizeof(dir), "storm-end");
    store *database = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)), FLARE_OK);
    assert_int_equal(store_begin(database), FLARE_OK);
    storm_completions_write_last(database, 42);
    storm_completions_write_last(database, 42); /* once */
    assert_int_equal(store_commit(database), FLARE_OK);
    store_close(database);
    sqlite3 *db = open_session_db(dir);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM storms"), 1);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM storms WHERE pid = 42 AND device = -1 AND start_ns = %lld AND "
             "end_ns = %lld AND untimed_launches = 1000 AND still_open = 0",
             (long long)(t0 + 50 * MS), (long long)(t0 + 660 * MS));
    assert_int_equal(test_sql_int(db, sql), 1);
    sqlite3_close(db);
    test_remove_dir(dir);
    core_drops_set("storm_guard", STORM_GUARD_DROP_LAUNCHES, 0); /* for a later test */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storm_on_the_simulated_device),
        cmocka_unit_test(test_no_simulated_work_leaves_the_rows_alone),
        cmocka_unit_test(test_guard_only_when_asked),
        cmocka_unit_test(test_storm_ending_as_recording_stops_is_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
