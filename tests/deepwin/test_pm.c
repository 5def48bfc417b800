/*
 * test_pm.c: PM sampling end to end on the simulated device: a window arms
 * the simulated PM hardware, samples flow through the shared engine
 * (pm/pm_engine.c), attribution and the pm_samples writer, exactly as CUDA's
 * do. Fault injection covers COUNTER_DATA_FULL (decode again, lose nothing),
 * hardware buffer overflow (counted, flagged, gap estimated), failed
 * decodes, a CLOCK_REALTIME-stamped device, a busy lease (the window runs
 * without the engine and says why), scope-history evictions, and the
 * FLARE_PM_INTERVAL / FLARE_PM_PRESET errors.
 *
 * Nothing here waits a fixed time or counts on a thread being scheduled
 * soon (the suite passes on two cores kept busy, scripts/test.sh stress):
 * the simulated hardware takes samples by the clock, so a window lasts
 * until it has taken enough (sim_pm_samples_taken), and whatever a check
 * needs from the decoder or the scope thread (an overflow decoded, a step
 * finished inside the window) is waited for with TEST_WAIT_UNTIL.
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
#include "test_sql.h"
#include "test_util.h"
#include "tracebuf/lease.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_session.h"

#define MS 1000000ull

static sqlite3 *open_db(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
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
    _Atomic int outer_open;      /* "outer" has begun */
    _Atomic uint64_t steps_done; /* "step" scopes ended */
    int inner_ms;                /* how long each inner scope lasts, at least */
    int burst;                   /* extra zero-length scopes per step (history pressure) */
} scope_worker;

static void *scope_main(void *argument)
{
    scope_worker *worker = argument;
    flare_scope_begin("outer");
    atomic_store(&worker->outer_open, 1);
    while (!atomic_load(&worker->stop)) {
        flare_scope_begin("step");
        test_pause_ms(worker->inner_ms);
        flare_scope_end();
        atomic_fetch_add(&worker->steps_done, 1);
        for (int i = 0; i < worker->burst; i++) {
            flare_scope_begin("burst");
            flare_scope_end();
        }
        test_pause_ms(1);
    }
    flare_scope_end();
    return NULL;
}

typedef struct run_result {
    char dir[128];
    pm_engine_stats engine;
    pm_session_stats session;
    uint64_t close_returned_ns; /* after flare_window_close: the hardware had stopped */
} run_result;

/* The worker of the running case, file-wide so that the teardown of a case
 * that failed half-way can stop it (its stack frame is gone by then). */
static scope_worker worker;
static int worker_running;

static void worker_stop(void)
{
    if (!worker_running)
        return;
    atomic_store(&worker.stop, 1);
    pthread_join(worker.thread, NULL);
    worker_running = 0;
}

/* flare_window_open and _close wait for the collector's beat at most 2 s and
 * then answer FLARE_ERR_TIMEOUT with the request still on its way; these
 * wait for it to arrive (that bound is the API's, not what these cases test). */
static void window_open_and_wait(const flare_window_options *window)
{
    int status = flare_window_open(window);
    if (status == FLARE_ERR_TIMEOUT)
        TEST_WAIT_UNTIL(deepwin_current_state(deepwin_session_coordinator()) == DEEPWIN_OPEN);
    else
        assert_int_equal(status, FLARE_OK);
}

static void window_close_and_wait(void)
{
    int status = flare_window_close();
    if (status == FLARE_ERR_TIMEOUT)
        TEST_WAIT_UNTIL(deepwin_current_state(deepwin_session_coordinator()) == DEEPWIN_IDLE);
    else
        assert_int_equal(status, FLARE_OK);
}

/* What a window waits for before it closes. */
typedef struct window_plan {
    uint64_t taken;     /* samples the hardware has taken since the window opened */
    uint64_t decoded;   /* samples the decoder has delivered (0: none needed) */
    uint64_t failures;  /* failed decodes seen (0: none needed) */
    uint64_t evictions; /* scopes the attribution history evicted (0: none needed) */
    /* Held: the decoder is paused for the whole window, so the close finds
     * it behind. Stall: paused until the hardware has taken stall samples,
     * then let go. */
    int held;
    uint64_t stall;
} window_plan;

static pm_engine_stats engine_stats(void)
{
    pm_engine_stats stats;
    pm_engine_stats_get(sim_pm_core(), &stats);
    return stats;
}

static uint64_t session_evictions(void)
{
    pm_session_stats stats;
    pm_session_stats_get(&stats);
    return stats.history_evictions;
}

/* One session with one manual window while a worker runs scopes; the window
 * closes once the plan's conditions hold and the worker has run two whole
 * steps inside it (so it holds a step and the gap before it). */
static void run_window(run_result *result, const window_plan *plan, int burst)
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
    worker = (scope_worker){.inner_ms = 5, .burst = burst};
    assert_int_equal(pthread_create(&worker.thread, NULL, scope_main, &worker), 0);
    worker_running = 1;
    /* Every sample of the window must find "outer" open. */
    TEST_WAIT_UNTIL(atomic_load(&worker.outer_open));
    flare_window_options window;
    flare_window_options_init(&window);
    window.label = "pm-test";
    window.max_duration_ms = 600000; /* closed by the test, however slow the machine */
    /* Paused before the window opens, so the decoder reads nothing of it
     * until the test lets it. */
    int paused = plan->held || plan->stall > 0;
    if (paused)
        pm_engine_pause_decode(sim_pm_core(), 1);
    window_open_and_wait(&window);
    uint64_t steps_at_open = atomic_load(&worker.steps_done);
    if (plan->stall > 0) {
        TEST_WAIT_UNTIL(sim_pm_samples_taken() >= plan->stall);
        pm_engine_pause_decode(sim_pm_core(), 0);
    }
    TEST_WAIT_UNTIL(sim_pm_samples_taken() >= plan->taken);
    TEST_WAIT_UNTIL(atomic_load(&worker.steps_done) >= steps_at_open + 2);
    TEST_WAIT_UNTIL(engine_stats().samples >= plan->decoded);
    TEST_WAIT_UNTIL(engine_stats().decode_failures >= plan->failures);
    TEST_WAIT_UNTIL(session_evictions() >= plan->evictions);
    window_close_and_wait();
    result->close_returned_ns = test_now_ns();
    pm_engine_pause_decode(sim_pm_core(), 0);
    worker_stop();
    assert_int_equal(flare_shutdown(), FLARE_OK);
    pm_engine_stats_get(sim_pm_core(), &result->engine);
    pm_session_stats_get(&result->session);
}

/* "p.end_ns <= N": samples end before the close returned (by then the
 * hardware had stopped; the window's closed_ns is the collector's beat,
 * read a moment before it stopped the hardware). */
static void assert_no_sample_after(sqlite3 *db, uint64_t limit_ns)
{
    char sql[160];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM pm_samples WHERE end_ns > %llu",
             (unsigned long long)limit_ns);
    assert_int_equal(test_sql_int(db, sql), 0);
}

/* Every case starts from no session, no faults and a fresh engine, and
 * leaves them so even when it fails: a failure is that case's alone. */
static int reset_all(void **state)
{
    (void)state;
    worker_stop();
    if (flare_is_active())
        flare_shutdown();
    sim_pm_reset();
    pm_session_set_history_capacity(0);
    deepwin_session_set_engine(NULL);
    return 0;
}

static void finish(run_result *result)
{
    reset_all(NULL);
    test_remove_dir(result->dir);
}

/* Every sample of a window is stored once per metric, in the window's time,
 * numbered without holes, and attributed: "step" while a step ran, the
 * still-open "outer" otherwise (named once it closed); the window-open to
 * first-sample latency is stored. */
static void test_window_samples_attributed(void **state)
{
    (void)state;
    /* A buffer no stall of the decoder can fill, and an image that holds a
     * minute of samples: this case is about attribution, and on a machine
     * busy enough to keep the decoder off a core for 200 ms the default
     * image fills (rightly: test_counter_data_full_decodes_again). */
    sim_pm_faults faults = {.hardware_buffer_samples = UINT32_MAX, .image_samples = 600000};
    sim_pm_set_faults(&faults);
    run_result result;
    window_plan plan = {.taken = 3000, .decoded = 1000}; /* 300 ms of samples */
    run_window(&result, &plan, 0);
    sqlite3 *db = open_db(result.dir);
    int64_t window_samples = test_sql_int(db, "SELECT engine_samples FROM windows");
    int64_t stored = test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples");
    int64_t rows = test_sql_int(db, "SELECT COUNT(*) FROM pm_samples");
    assert_true(window_samples >= 1000); /* the decoder delivered 1000 before the close */
    assert_int_equal(stored, window_samples);
    assert_int_equal(rows, stored * 6); /* the overview preset's six metrics */
    assert_int_equal(test_sql_int(db, "SELECT MAX(sample_index) + 1 FROM pm_samples"), stored);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM pm_samples p, windows w WHERE "
                                      "p.start_ns < w.opened_ns - 1000000"),
                     0);
    assert_no_sample_after(db, result.close_returned_ns);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM pm_samples WHERE overflow != 0"), 0);
    /* Attributed: nothing escapes the outer scope; the window held a whole
     * step and the gap before it (run_window waits for both), so both get
     * samples; and no sample that fell inside a step is left to "outer". */
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM pm_samples WHERE scope_instance_id IS NULL"), 0);
    int64_t steps = test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                     "scope_name = 'step'");
    int64_t outer = test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                     "scope_name = 'outer'");
    assert_true(steps > 0);
    assert_true(outer > 0);
    assert_int_equal(steps + outer, stored);
    assert_int_equal(
        test_sql_int(db,
                     "SELECT COUNT(*) FROM pm_samples p JOIN scopes s JOIN names n ON n.id = "
                     "s.name_id WHERE n.name = 'step' AND p.scope_name = 'outer' AND "
                     "(p.start_ns + p.end_ns) / 2 > s.start_ns AND (p.start_ns + p.end_ns) / 2 < "
                     "s.end_ns"),
        0);
    /* The samples credited to a step lie inside that very step. */
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM pm_samples p JOIN scopes s ON s.instance_id = "
                         "p.scope_instance_id WHERE (p.start_ns + p.end_ns) / 2 < s.start_ns OR "
                         "(p.start_ns + p.end_ns) / 2 > s.end_ns + 1"),
        0);
    /* The latency is a real one: the first sample ended inside the window. */
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM metrics m JOIN names n ON n.id = "
                                      "m.name_id, windows w WHERE n.name = "
                                      "'pm_open_to_first_sample_ns' AND m.value > 0 AND m.value < "
                                      "w.closed_ns - w.opened_ns"),
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
    sim_pm_faults faults = {.image_samples = 16, .hardware_buffer_samples = UINT32_MAX};
    sim_pm_set_faults(&faults);
    run_result result;
    /* 800 decoded by the decode thread itself: a close reads 4 fills only. */
    window_plan plan = {.taken = 2500, .decoded = 800};
    run_window(&result, &plan, 0);
    assert_true(result.engine.counter_data_full > 0);
    assert_int_equal(result.engine.overflows, 0);
    assert_int_equal(result.engine.samples_lost, 0);
    sqlite3 *db = open_db(result.dir);
    int64_t stored = test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples");
    assert_int_equal(stored, test_sql_int(db, "SELECT engine_samples FROM windows"));
    assert_true(stored >= 800);
    /* Consecutive samples, no hole: each starts where the previous ended. */
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM pm_samples a JOIN pm_samples b ON "
                                      "b.sample_index = a.sample_index + 1 AND a.metric = b.metric "
                                      "WHERE a.metric = 'dram__bytes_read.sum' AND b.start_ns != "
                                      "a.end_ns"),
                     0);
    sqlite3_close(db);
    finish(&result);
}

/* A stalled decoder lets the finite hardware buffer overflow: the overflow
 * is counted, the samples of that decode flagged, the hole after it
 * estimated and stored as a drop, and the watermark is not advanced by it.
 *
 * One stall, one overflow: the buffer overflows once only (overflow_once),
 * or a machine that keeps the decoder off a core for 30 ms after the stall
 * (a 300-sample buffer at 100 us) would overflow it again and flag a second
 * gap. The window closes once a sample after the hole was decoded, so that
 * sample, the one flagged after the gap, is always there. */
static void test_overflow_counted_and_flagged(void **state)
{
    (void)state;
    sim_pm_faults faults = {.hardware_buffer_samples = 300, .overflow_once = 1};
    sim_pm_set_faults(&faults);
    run_result result;
    /* Stalled for 1500 samples into a 300-sample buffer: 1200 lost. */
    window_plan plan = {.stall = 1500, .taken = 4000, .decoded = 301};
    run_window(&result, &plan, 0);
    assert_true(result.engine.overflows >= 1);
    assert_true(result.engine.samples_lost >= 1000);
    sqlite3 *db = open_db(result.dir);
    assert_true(test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                 "(overflow & 1) != 0") >= 300);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples WHERE "
                                      "(overflow & 2) != 0"),
                     1);
    assert_true(test_sql_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND detail "
                                 "LIKE 'samples lost%'") >= 1000);
    assert_true(test_sql_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND detail "
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
    /* The decoder held for the whole window: 1500 samples wait at the
     * close, which reads 4 fills of 16 and discards the rest. */
    window_plan plan = {.held = 1, .taken = 1500};
    run_window(&result, &plan, 0);
    assert_true(result.engine.samples_discarded >= 1000);
    sqlite3 *db = open_db(result.dir);
    int64_t stored = test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples");
    assert_true(stored >= 16 && stored <= 4 * 16);
    assert_int_equal(test_sql_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND "
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
    window_plan plan = {.taken = 2000, .failures = 3, .decoded = 500};
    run_window(&result, &plan, 0);
    assert_int_equal(result.engine.decode_failures, 3);
    sqlite3 *db = open_db(result.dir);
    assert_int_equal(test_sql_int(db, "SELECT count FROM drops WHERE source = 'pm_sampling' AND "
                                      "detail = 'failed decodes'"),
                     3);
    assert_true(test_sql_int(db, "SELECT COUNT(DISTINCT sample_index) FROM pm_samples") >= 500);
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
    window_plan plan = {.taken = 2000, .decoded = 1};
    run_window(&result, &plan, 0);
    assert_int_equal(result.engine.clock_method, PM_CLOCK_REALTIME);
    sqlite3 *db = open_db(result.dir);
    assert_true(test_sql_int(db, "SELECT COUNT(*) FROM pm_samples") > 0);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM pm_samples p, windows w WHERE "
                                      "p.start_ns < w.opened_ns - 2000000"),
                     0);
    assert_no_sample_after(db, result.close_returned_ns + 2000000);
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM pm_samples WHERE scope_instance_id IS NULL"), 0);
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
    window_open_and_wait(&window);
    window_close_and_wait();
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(0, 4242), FLARE_OK);
    sqlite3 *db = open_db(dir);
    char text[512];
    query_text(db, "SELECT engine_status FROM windows", text, sizeof(text));
    assert_string_equal(text, "busy");
    query_text(db, "SELECT engine_reason FROM windows", text, sizeof(text));
    assert_string_equal(text, "PM sampling busy, held by context 4242 on device 0");
    assert_int_equal(test_sql_int(db, "SELECT opened_ns IS NOT NULL FROM windows"), 1);
    query_text(db,
               "SELECT status || ': ' || reason FROM capabilities WHERE feature = "
               "'pm_sampling'",
               text, sizeof(text));
    assert_non_null(strstr(text, "degraded"));
    assert_non_null(strstr(text, "PM sampling busy, held by context 4242"));
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM pm_samples"), 0);
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
    /* 200 zero-length scopes per step; open until the history evicted. */
    window_plan plan = {.taken = 2000, .evictions = 1};
    run_window(&result, &plan, 200);
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
    assert_true(test_sql_int(db, "SELECT count FROM drops WHERE source = 'scope_history'") > 0);
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
        cmocka_unit_test_setup_teardown(test_settings_errors, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_window_samples_attributed, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_counter_data_full_decodes_again, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_overflow_counted_and_flagged, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_close_with_decoder_behind_is_bounded, reset_all,
                                        reset_all),
        cmocka_unit_test_setup_teardown(test_failed_decodes_counted, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_realtime_clock_converted, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_busy_lease_window_runs_without, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_history_cap_evictions_reported, reset_all, reset_all),
        cmocka_unit_test_setup_teardown(test_multi_pass_preset_refused, reset_all, reset_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
