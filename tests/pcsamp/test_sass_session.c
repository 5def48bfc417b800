/*
 * test_sass_session.c: SASS metrics end to end on the simulated device
 * (issue 26, item 2). A kernel's body marks one cold instruction and a hot
 * one HOT_REPEATS times per launch (flare_sim_pc_mark); a window opened with
 * engine "sass" (the C API) arms the simulated SASS metrics engine, the
 * program launches a known number of kernels from two threads at once, and
 * the session database holds, in sass_metrics, exactly the instructions
 * those launches executed: per launch one at offset 0 (the kernel's start),
 * one at the cold offset, HOT_REPEATS at the hot one, and 32 threads' worth
 * of each in smsp__sass_thread_inst_executed, on their source lines.
 * Failure cases: a patching failure refuses the window with its reason; a
 * full counter table loses instructions, counted in drops and never
 * stored; a full aggregate table drops records, counted one per record; another profiling context
 * holding the device turns sass down and the window falls back to PM sampling, saying why. Waits on
 * conditions, never on times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim.h"
#include "backend/sim/sim_pc.h"
#include "backend/sim/sim_sass.h"
#include "flare/flare.h"
#include "flare/sim.h"
#include "pcsamp/pc_engine.h"
#include "test_sql.h"
#include "test_util.h"
#include "tracebuf/lease.h"

#define HOT_OFFSET  0x100u
#define COLD_OFFSET 0x40u
#define HOT_REPEATS 10u
#define LAUNCHES    25u /* per thread */
#define THREADS     2

static void counted_kernel(const flare_sim_launch *launch)
{
    (void)launch;
    flare_sim_pc_mark(COLD_OFFSET, FLARE_SIM_STALL_SELECTED);
    for (unsigned i = 0; i < HOT_REPEATS; i++)
        flare_sim_pc_mark(HOT_OFFSET, FLARE_SIM_STALL_LONG_SCOREBOARD);
}

typedef struct launcher {
    pthread_t thread;
    int kernel;
    int failed;
} launcher;

static void *launch_some(void *argument)
{
    launcher *self = argument;
    flare_sim_stream *stream = NULL;
    if (flare_sim_stream_create(0, &stream) != FLARE_OK) {
        self->failed = 1;
        return NULL;
    }
    const uint32_t grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
    for (unsigned i = 0; i < LAUNCHES && !self->failed; i++)
        self->failed =
            flare_sim_launch_kernel(stream, self->kernel, grid, block, NULL, 0) != FLARE_OK;
    if (flare_sim_stream_synchronize(stream, 10000) != FLARE_OK ||
        flare_sim_stream_destroy(stream) != FLARE_OK)
        self->failed = 1;
    return NULL;
}

/* THREADS threads launch LAUNCHES kernels each, all finished on return. */
static void launch_from_threads(int kernel)
{
    launcher work[THREADS] = {0};
    for (int t = 0; t < THREADS; t++) {
        work[t].kernel = kernel;
        assert_int_equal(pthread_create(&work[t].thread, NULL, launch_some, &work[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(work[t].thread, NULL);
        assert_false(work[t].failed);
    }
}

static void start_session(char *dir, size_t dir_size, int *kernel)
{
    test_make_temp_dir(dir, dir_size, "sass-session");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 20;
    assert_int_equal(flare_init(&options), FLARE_OK);
    assert_int_equal(flare_sim_kernel_register("sass_counted_kernel", counted_kernel, kernel),
                     FLARE_OK);
}

static sqlite3 *end_session(const char *dir)
{
    assert_int_equal(flare_shutdown(), FLARE_OK);
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

static int open_sass_window(void)
{
    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 60000; /* closed by hand */
    window.label = "counts";
    window.engine = "sass";
    return flare_window_open(&window);
}

/* The value of metric at offset in the session (0 when no row). */
static int64_t value_at(sqlite3 *db, const char *metric, unsigned offset)
{
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COALESCE(SUM(value), 0) FROM v_sass_metrics WHERE metric = '%s' AND "
             "pc_offset = %u AND function = 'sass_counted_kernel'",
             metric, offset);
    return test_sql_int(db, sql);
}

static void test_a_sass_window_counts_every_instruction(void **unused)
{
    (void)unused;
    char dir[256];
    int kernel = 0;
    start_session(dir, sizeof(dir), &kernel);
    launch_from_threads(kernel); /* before the window: not counted */
    assert_int_equal(open_sass_window(), FLARE_OK);
    launch_from_threads(kernel);
    assert_int_equal(flare_window_close(), FLARE_OK);
    launch_from_threads(kernel); /* after: not counted */
    sqlite3 *db = end_session(dir);

    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine = "
                                      "'sim-sass-metrics' AND engine_status = 'disarmed' AND "
                                      "engine_reason = ''"),
                     1);
    const int64_t launches = (int64_t)LAUNCHES * THREADS;
    const char *inst = "smsp__sass_inst_executed", *thread = "smsp__sass_thread_inst_executed";
    assert_int_equal(value_at(db, inst, 0), launches);
    assert_int_equal(value_at(db, inst, COLD_OFFSET), launches);
    assert_int_equal(value_at(db, inst, HOT_OFFSET), launches * HOT_REPEATS);
    assert_int_equal(value_at(db, thread, HOT_OFFSET), launches * HOT_REPEATS * 32);
    assert_int_equal(value_at(db, thread, COLD_OFFSET), launches * 32);
    /* Three instructions, two metrics: six rows, the window's engine_samples. */
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM v_sass_metrics"), 6);
    assert_int_equal(test_sql_int(db, "SELECT engine_samples FROM windows"), 6);
    /* Each on its source line; none in pc_samples. */
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM v_sass_metrics WHERE file = '%s' AND line = 1 + pc_offset / 64",
             SIM_PC_SOURCE_FILE);
    assert_int_equal(test_sql_int(db, sql), 6);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM pc_samples"), 0);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM drops WHERE source = 'sass_metrics' "
                                      "AND count > 0"),
                     0);
    sqlite3_close(db);
    test_remove_dir(dir);
}

static void test_a_patching_failure_refuses_the_window(void **unused)
{
    (void)unused;
    char dir[256];
    int kernel = 0;
    start_session(dir, sizeof(dir), &kernel);
    sim_sass_fail_next_starts(1);
    assert_int_not_equal(open_sass_window(), FLARE_OK);
    sim_sass_reset();
    launch_from_threads(kernel);
    sqlite3 *db = end_session(dir);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine_reason LIKE "
                                      "'%patching failed (injected)%'"),
                     1);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM sass_metrics"), 0);
    sqlite3_close(db);
    test_remove_dir(dir);
}

static void test_a_full_table_loses_counted_instructions(void **unused)
{
    (void)unused;
    char dir[256];
    int kernel = 0;
    start_session(dir, sizeof(dir), &kernel);
    sim_sass_set_capacity(2); /* three instructions per launch */
    assert_int_equal(open_sass_window(), FLARE_OK);
    launch_from_threads(kernel);
    assert_int_equal(flare_window_close(), FLARE_OK);
    sim_sass_reset();
    sqlite3 *db = end_session(dir);
    /* Two instructions kept, each counted exactly; the third's every
     * execution counted lost. */
    assert_int_equal(test_sql_int(db, "SELECT COUNT(DISTINCT pc_offset) FROM sass_metrics"), 2);
    int64_t kept = test_sql_int(db, "SELECT SUM(value) FROM v_sass_metrics WHERE metric = "
                                    "'smsp__sass_inst_executed'");
    int64_t lost = test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                    "'sass_metrics' AND detail LIKE '%lost%'");
    assert_true(lost > 0);
    assert_int_equal(kept + lost, (int64_t)LAUNCHES * THREADS * (2 + HOT_REPEATS));
    sqlite3_close(db);
    test_remove_dir(dir);
}

/* The engine's aggregate table full: the records it had no room for are
 * counted, one per (instruction, metric), never their values summed. */
static void test_a_full_aggregate_table_counts_records(void **unused)
{
    (void)unused;
    char dir[256];
    int kernel = 0;
    start_session(dir, sizeof(dir), &kernel);
    assert_int_equal(pc_engine_set_aggregate_capacity(sim_sass_engine_core(), 2), FLARE_OK);
    assert_int_equal(open_sass_window(), FLARE_OK);
    launch_from_threads(kernel);
    assert_int_equal(flare_window_close(), FLARE_OK);
    sqlite3 *db = end_session(dir);
    assert_int_equal(pc_engine_set_aggregate_capacity(sim_sass_engine_core(), PC_AGGREGATE_MAX),
                     FLARE_OK);
    /* Three instructions, two metrics: two rows kept, four records dropped. */
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM sass_metrics"), 2);
    assert_int_equal(test_sql_int(db, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                      "'sass_metrics' AND detail LIKE '%aggregate table full%'"),
                     4);
    sqlite3_close(db);
    test_remove_dir(dir);
}

static void test_a_busy_device_falls_back_to_pm(void **unused)
{
    (void)unused;
    char dir[256];
    int kernel = 0;
    start_session(dir, sizeof(dir), &kernel);
    char holder[TRACEBUF_HOLDER_MAX] = "";
    const uint64_t other_tool = 0x7e57;
    assert_int_equal(tracebuf_lease_acquire(0, other_tool, holder), FLARE_OK);
    int status = open_sass_window();
    launch_from_threads(kernel);
    if (status == FLARE_OK)
        assert_int_equal(flare_window_close(), FLARE_OK);
    tracebuf_lease_release(0, other_tool);
    sqlite3 *db = end_session(dir);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE engine_reason LIKE "
                                      "'asked for sass: SASS metrics busy, held by %'"),
                     1);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM sass_metrics"), 0);
    sqlite3_close(db);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_sass_window_counts_every_instruction),
        cmocka_unit_test(test_a_patching_failure_refuses_the_window),
        cmocka_unit_test(test_a_full_table_loses_counted_instructions),
        cmocka_unit_test(test_a_full_aggregate_table_counts_records),
        cmocka_unit_test(test_a_busy_device_falls_back_to_pm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
