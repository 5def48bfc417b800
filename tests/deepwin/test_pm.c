/*
 * test_pm.c: PM sampling end to end on the simulated device: a window arms
 * the simulated PM hardware, samples flow through the shared engine
 * (pm/pm_engine.c), attribution and the pm_samples writer, exactly as CUDA's
 * do. Fault injection covers COUNTER_DATA_FULL (decode again, lose nothing),
 * hardware buffer overflow (counted, flagged, gap estimated), failed
 * decodes, a CLOCK_REALTIME-stamped device, a busy lease (the window runs
 * without the engine and says why), scope-history evictions, and the
 * FLARE_PM_INTERVAL / FLARE_PM_PRESET errors. Margins are generous: the
 * machine may be small and shared.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim_pm.h"
#include "flare/flare.h"
#include "pm/pm_engine.h"
#include "pm/pm_session.h"
#include "test_util.h"
#include "tracebuf/lease.h"
#include "deepwin/deepwin_session.h"

#define MS 1000000ull

static void sleep_ms(long ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

static sqlite3 *open_db(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

static int64_t query_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) {
        fprintf(stderr, "bad query %s: %s\n", sql, sqlite3_errmsg(db));
        fail();
    }
    int64_t value = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    return value;
}

static void query_text(sqlite3 *db, const char *sql, char *out, size_t size)
{
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &statement, NULL), SQLITE_OK);
    out[0] = '\0';
    if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != NULL)
        snprintf(out, size, "%s", (const char *)sqlite3_column_text(statement, 0));
    sqlite3_finalize(statement);
}

/* A thread that keeps an outer scope open and runs short inner scopes. */
typedef struct scope_worker {
    pthread_t thread;
    _Atomic int stop;
    int inner_ms; /* how long each inner scope lasts */
    int burst;    /* extra zero-length scopes per step (history pressure) */
} scope_worker;

static void *scope_main(void *argument)
{
    scope_worker *worker = argument;
    flare_scope_begin("outer");
    while (!atomic_load(&worker->stop)) {
        flare_scope_begin("step");
        sleep_ms(worker->inner_ms);
        flare_scope_end();
        for (int i = 0; i < worker->burst; i++) {
            flare_scope_begin("burst");
            flare_scope_end();
        }
        sleep_ms(1);
    }
    flare_scope_end();
    return NULL;
}

typedef struct run_result {
    char dir[128];
    pm_engine_stats engine;
    pm_session_stats session;
} run_result;

/* One session with one manual window of window_ms while a worker runs
 * scopes; pause_ms > 0 pauses decoding that long inside the window. */
static void run_window(run_result *result, int window_ms, int pause_ms, int burst)
{
    test_make_temp_dir(result->dir, sizeof(result->dir), "pm");
    deepwin_session_set_engine(sim_pm_engine());
    char reason[256] = "";
    assert_int_equal(sim_pm_prepare(0, "overview", 100000, reason, sizeof(reason)), FLARE_OK);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = result->dir;
    options.flush_interval_ms = 50;
    assert_int_equal(flare_init(&options), FLARE_OK);
    scope_worker worker = {.inner_ms = 5, .burst = burst};
    assert_int_equal(pthread_create(&worker.thread, NULL, scope_main, &worker), 0);
    sleep_ms(30);
    flare_window_options window;
    flare_window_options_init(&window);
    window.label = "pm-test";
    window.max_duration_ms = 5000;
    /* Paused before the window opens: on a slow run (TSan, a loaded CI
     * machine) the decoder could otherwise read some fills between the open
     * and the pause, which the bounded-close test then counted as read at
     * the close (seen in CI: more than 4 fills stored). */
    if (pause_ms > 0)
        pm_engine_pause_decode(sim_pm_core(), 1);
    assert_int_equal(flare_window_open(&window), FLARE_OK);
    if (pause_ms > 0) {
        sleep_ms(pause_ms);
        /* Paused for the whole window: the close finds the decoder behind. */
        if (pause_ms < window_ms)
            pm_engine_pause_decode(sim_pm_core(), 0);
    }
    if (window_ms > pause_ms)
        sleep_ms(window_ms - pause_ms);
    assert_int_equal(flare_window_close(), FLARE_OK);
    pm_engine_pause_decode(sim_pm_core(), 0);
    sleep_ms(50);
    atomic_store(&worker.stop, 1);
    pthread_join(worker.thread, NULL);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    pm_engine_stats_get(sim_pm_core(), &result->engine);
    pm_session_stats_get(&result->session);
}

static void finish(run_result *result)
{
    sim_pm_reset();
    pm_session_set_history_capacity(0);
    deepwin_session_set_engine(NULL);
    test_remove_dir(result->dir);
}

/* Every sample of a window is stored once per metric, in the window's time,
 * numbered without holes, and attributed: "step" while a step ran, the
 * still-open "outer" otherwise (named once it closed); the window-open to
 * first-sample latency is stored. */
static void test_window_samples_attributed(void **state)
{
    (void)state;
    run_result result;
    run_window(&result, 300, 0, 0);
    sqlite3 *db = open_db(result.dir);
    int64_t window_samples = query_int(db, "SELECT engine_samples FROM windows");
    int64_t stored = query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples");
    int64_t rows = query_int(db, "SELECT COUNT(*) FROM pm_samples");
    assert_true(window_samples >= 1000); /* 300 ms at 100 us, with room for a slow machine */
    assert_int_equal(stored, window_samples);
    assert_int_equal(rows, stored * 6); /* the overview preset's six metrics */
    assert_int_equal(query_int(db, "SELECT MAX(sample_index) + 1 FROM pm_samples"), stored);
    assert_int_equal(query_int(db, "SELECT COUNT(*) FROM pm_samples p, windows w WHERE "
                                   "p.start_ns < w.opened_ns - 1000000 OR p.end_ns > w.closed_ns + "
                                   "1000000"),
                     0);
    assert_int_equal(query_int(db, "SELECT COUNT(*) FROM pm_samples WHERE overflow != 0"), 0);
    /* Attributed: nothing escapes the outer scope, most go to steps. */
    assert_int_equal(
        query_int(db, "SELECT COUNT(*) FROM pm_samples WHERE scope_instance_id IS NULL"), 0);
    int64_t steps = query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                  "scope_name = 'step'");
    int64_t outer = query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                  "scope_name = 'outer'");
    assert_true(steps > stored / 2);
    assert_true(outer > 0);
    assert_int_equal(steps + outer, stored);
    /* The samples credited to a step lie inside that very step. */
    assert_int_equal(
        query_int(db, "SELECT COUNT(*) FROM pm_samples p JOIN scopes s ON s.instance_id = "
                      "p.scope_instance_id WHERE (p.start_ns + p.end_ns) / 2 < s.start_ns OR "
                      "(p.start_ns + p.end_ns) / 2 > s.end_ns + 1"),
        0);
    assert_int_equal(query_int(db, "SELECT COUNT(*) FROM metrics m JOIN names n ON n.id = "
                                   "m.name_id WHERE n.name = 'pm_open_to_first_sample_ns' AND "
                                   "m.value > 0 AND m.value < 100000000"),
                     1);
    char text[512];
    query_text(db, "SELECT status FROM capabilities WHERE feature = 'pm_attribution'", text,
               sizeof(text));
    assert_string_equal(text, "active");
    query_text(db, "SELECT engine_status FROM windows", text, sizeof(text));
    assert_string_equal(text, "disarmed");
    sqlite3_close(db);
    assert_int_equal(result.engine.overflows, 0);
    assert_int_equal(result.engine.counter_data_full, 0);
    assert_int_equal(result.engine.clock_method, PM_CLOCK_IDENTITY);
    assert_true(result.session.watermark_ns > 0);
    finish(&result);
}

/* An image smaller than a decode's worth of samples stops each decode with
 * COUNTER_DATA_FULL; the engine resets it and decodes again: nothing lost. */
static void test_counter_data_full_decodes_again(void **state)
{
    (void)state;
    sim_pm_faults faults = {.image_samples = 16};
    sim_pm_set_faults(&faults);
    run_result result;
    run_window(&result, 250, 0, 0);
    assert_true(result.engine.counter_data_full > 0);
    assert_int_equal(result.engine.overflows, 0);
    assert_int_equal(result.engine.samples_lost, 0);
    sqlite3 *db = open_db(result.dir);
    int64_t stored = query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples");
    assert_int_equal(stored, query_int(db, "SELECT engine_samples FROM windows"));
    assert_true(stored >= 800);
    /* Consecutive samples, no hole: each starts where the previous ended. */
    assert_int_equal(query_int(db, "SELECT COUNT(*) FROM pm_samples a JOIN pm_samples b ON "
                                   "b.sample_index = a.sample_index + 1 AND a.metric = b.metric "
                                   "WHERE a.metric = 'dram__bytes_read.sum' AND b.start_ns != "
                                   "a.end_ns"),
                     0);
    sqlite3_close(db);
    finish(&result);
}

/* A stalled decoder lets the finite hardware buffer overflow: the overflow
 * is counted, the samples of that decode flagged, the hole after it
 * estimated and stored as a drop, and the watermark is not advanced by it. */
static void test_overflow_counted_and_flagged(void **state)
{
    (void)state;
    sim_pm_faults faults = {.hardware_buffer_samples = 300};
    sim_pm_set_faults(&faults);
    run_result result;
    run_window(&result, 400, 150, 0); /* 150 ms paused = 1500 samples into a 300-sample buffer */
    assert_true(result.engine.overflows >= 1);
    assert_true(result.engine.samples_lost >= 1000);
    sqlite3 *db = open_db(result.dir);
    assert_true(query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                              "(overflow & 1) != 0") >= 300);
    assert_int_equal(query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                   "(overflow & 2) != 0"),
                     1);
    assert_true(query_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND detail "
                              "LIKE 'samples lost%'") >= 1000);
    assert_true(query_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND detail "
                              "LIKE 'decodes that found%'") >= 1);
    sqlite3_close(db);
    finish(&result);
}

/* A close that finds the decoder far behind reads a bounded number of image
 * fills and discards the rest, counted: it never holds the collector for
 * long, and no stale record is left for the next window. */
static void test_close_with_decoder_behind_is_bounded(void **state)
{
    (void)state;
    sim_pm_faults faults = {.image_samples = 16};
    sim_pm_set_faults(&faults);
    run_result result;
    run_window(&result, 150, 150, 0); /* ~1500 samples wait; 4 fills of 16 are read */
    assert_true(result.engine.samples_discarded >= 1000);
    sqlite3 *db = open_db(result.dir);
    int64_t stored = query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples");
    assert_true(stored >= 16 && stored <= 4 * 16);
    assert_int_equal(query_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND "
                                   "detail LIKE 'samples discarded%'"),
                     (int64_t)result.engine.samples_discarded);
    sqlite3_close(db);
    finish(&result);
}

/* Failed decodes are counted and never crash or stall the engine. */
static void test_failed_decodes_counted(void **state)
{
    (void)state;
    sim_pm_faults faults = {.fail_decodes = 3};
    sim_pm_set_faults(&faults);
    run_result result;
    run_window(&result, 200, 0, 0);
    assert_int_equal(result.engine.decode_failures, 3);
    sqlite3 *db = open_db(result.dir);
    assert_int_equal(query_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND "
                                   "detail = 'failed decodes'"),
                     3);
    assert_true(query_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples") >= 500);
    sqlite3_close(db);
    finish(&result);
}

/* A device stamping CLOCK_REALTIME: samples still land in the window. */
static void test_realtime_clock_converted(void **state)
{
    (void)state;
    sim_pm_faults faults = {.realtime_clock = 1};
    sim_pm_set_faults(&faults);
    run_result result;
    run_window(&result, 200, 0, 0);
    assert_int_equal(result.engine.clock_method, PM_CLOCK_REALTIME);
    sqlite3 *db = open_db(result.dir);
    assert_true(query_int(db, "SELECT COUNT(*) FROM pm_samples") > 0);
    assert_int_equal(query_int(db, "SELECT COUNT(*) FROM pm_samples p, windows w WHERE "
                                   "p.start_ns < w.opened_ns - 2000000 OR p.end_ns > w.closed_ns + "
                                   "2000000"),
                     0);
    assert_int_equal(
        query_int(db, "SELECT COUNT(*) FROM pm_samples WHERE scope_instance_id IS NULL"), 0);
    sqlite3_close(db);
    finish(&result);
}

/* Another context holds the device: the window runs without the engine and
 * says who holds it, in the window row and the capability matrix. */
static void test_busy_lease_window_runs_without(void **state)
{
    (void)state;
    char dir[128];
    test_make_temp_dir(dir, sizeof(dir), "pm-busy");
    deepwin_session_set_engine(sim_pm_engine());
    char reason[256];
    assert_int_equal(sim_pm_prepare(0, "overview", 100000, reason, sizeof(reason)), FLARE_OK);
    char holder[TRACEBUF_HOLDER_MAX];
    assert_int_equal(tracebuf_lease_acquire(0, 4242, holder), FLARE_ERR_STATE); /* ours */
    /* Hand the device to context 4242 (the engine gives its claim back). */
    assert_int_equal(tracebuf_lease_release(0, SIM_PM_CONTEXT_ID), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 4242, holder), FLARE_OK);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    assert_int_equal(flare_init(&options), FLARE_OK);
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 5000;
    assert_int_equal(flare_window_open(&window), FLARE_OK);
    sleep_ms(100);
    assert_int_equal(flare_window_close(), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(0, 4242), FLARE_OK);
    sqlite3 *db = open_db(dir);
    char text[512];
    query_text(db, "SELECT engine_status FROM windows", text, sizeof(text));
    assert_string_equal(text, "busy");
    query_text(db, "SELECT engine_reason FROM windows", text, sizeof(text));
    assert_string_equal(text, "PM sampling busy, held by context 4242 on device 0");
    assert_int_equal(query_int(db, "SELECT opened_ns IS NOT NULL FROM windows"), 1);
    query_text(db,
               "SELECT status || ': ' || reason FROM capabilities WHERE feature = "
               "'pm_sampling'",
               text, sizeof(text));
    assert_non_null(strstr(text, "degraded"));
    assert_non_null(strstr(text, "PM sampling busy, held by context 4242"));
    assert_int_equal(query_int(db, "SELECT COUNT(*) FROM pm_samples"), 0);
    sqlite3_close(db);
    /* Re-take the engine's own claim so its teardown releases cleanly. */
    assert_int_equal(tracebuf_lease_acquire(0, SIM_PM_CONTEXT_ID, holder), FLARE_OK);
    run_result cleanup = {0};
    snprintf(cleanup.dir, sizeof(cleanup.dir), "%s", dir);
    finish(&cleanup);
}

/* The history cap bounds memory even inside a window: evictions are
 * counted, shown in the capability matrix and stored as a drop. */
static void test_history_cap_evictions_reported(void **state)
{
    (void)state;
    pm_session_set_history_capacity(32);
    run_result result;
    run_window(&result, 200, 0, 200); /* 200 zero-length scopes per 6 ms step */
    assert_true(result.session.history_evictions > 0);
    assert_true(result.session.history_count <= 32);
    sqlite3 *db = open_db(result.dir);
    char text[512];
    query_text(db,
               "SELECT status || ': ' || reason FROM capabilities WHERE feature = "
               "'pm_attribution'",
               text, sizeof(text));
    assert_non_null(strstr(text, "degraded"));
    assert_non_null(strstr(text, "evicted"));
    assert_true(query_int(db, "SELECT count FROM drops WHERE source = 'scope_history'") > 0);
    sqlite3_close(db);
    finish(&result);
}

/* A preset that is not single-pass is refused at prepare with the reason. */
static void test_multi_pass_preset_refused(void **state)
{
    (void)state;
    sim_pm_faults faults = {.refuse_prepare = 1};
    sim_pm_set_faults(&faults);
    char reason[256] = "";
    assert_int_equal(sim_pm_prepare(0, "overview", 100000, reason, sizeof(reason)),
                     FLARE_ERR_UNSUPPORTED);
    assert_string_equal(reason,
                        "preset 'overview' needs 2 passes; PM sampling takes single-pass presets "
                        "only");
    char probe[256] = "";
    assert_int_equal(sim_pm_engine()->probe(-1, probe, sizeof(probe)), FLARE_ERR_UNSUPPORTED);
    assert_string_equal(probe, reason);
    run_result cleanup = {0};
    snprintf(cleanup.dir, sizeof(cleanup.dir), "/nonexistent");
    finish(&cleanup);
}

static void test_settings_errors(void **state)
{
    (void)state;
    const pm_preset *preset;
    uint64_t interval;
    char error[256];
    unsetenv("FLARE_PM_PRESET");
    setenv("FLARE_PM_INTERVAL", "5us", 1);
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "FLARE_PM_INTERVAL=5us is 5000 ns, below the minimum of "
                                  "10000 ns (10us)"));
    setenv("FLARE_PM_INTERVAL", "100", 1);
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "has no unit"));
    setenv("FLARE_PM_INTERVAL", "2 ms", 1);
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "unknown unit"));
    setenv("FLARE_PM_INTERVAL", "2s", 1);
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "above the maximum"));
    setenv("FLARE_PM_INTERVAL", "0.25ms", 1);
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_OK);
    assert_int_equal(interval, 250000);
    assert_string_equal(preset->name, "overview");
    setenv("FLARE_PM_PRESET", "everything", 1);
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(error,
                        "FLARE_PM_PRESET=everything is not a preset (presets: overview, memory, "
                        "compute)");
    unsetenv("FLARE_PM_PRESET");
    unsetenv("FLARE_PM_INTERVAL");
    assert_int_equal(pm_settings_from_environment(&preset, &interval, error, sizeof(error)),
                     FLARE_OK);
    assert_int_equal(interval, PM_INTERVAL_DEFAULT_NS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_errors),
        cmocka_unit_test(test_window_samples_attributed),
        cmocka_unit_test(test_counter_data_full_decodes_again),
        cmocka_unit_test(test_overflow_counted_and_flagged),
        cmocka_unit_test(test_close_with_decoder_behind_is_bounded),
        cmocka_unit_test(test_failed_decodes_counted),
        cmocka_unit_test(test_realtime_clock_converted),
        cmocka_unit_test(test_busy_lease_window_runs_without),
        cmocka_unit_test(test_history_cap_evictions_reported),
        cmocka_unit_test(test_multi_pass_preset_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
