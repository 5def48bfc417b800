/*
 * test_pc_session.c: PC sampling end to end on the simulated device (issue
 * 26): a thread launches a kernel whose body spends about 90% of its time
 * at one offset waiting on memory (flare_sim_pc_mark); a window opened with
 * engine "pc" (the C API) arms the simulated PC sampling engine, and the
 * session database holds its samples in pc_samples, the hot offset first,
 * adding up to the window's engine_samples. With the simulated PM engine
 * prepared (it holds the device for the process), a pc window still gets PC
 * sampling: both are this process's flare, one profiling context for the
 * lease. The report credits the samples to the scope each launch ran in,
 * and to the source line of each instruction (the hot offset is line 5 of
 * SIM_PC_SOURCE_FILE). A bad engine name is refused. Waits on conditions,
 * never on times.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim.h"
#include "backend/sim/sim_pc.h"
#include "backend/sim/sim_pm.h"
#include "flare/flare.h"
#include "flare/sim.h"
#include "pcsamp/pc_engine.h"
#include "test_sql.h"
#include "test_util.h"

#define HOT_OFFSET  0x100u
#define COLD_OFFSET 0x40u

static uint64_t thread_cpu_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

/* About 2 ms of the thread's own CPU time: 0.2 ms issuing at the cold
 * offset, then 1.8 ms waiting on memory at the hot one. */
static void hot_kernel(const flare_sim_launch *launch)
{
    (void)launch;
    uint64_t start = thread_cpu_ns();
    flare_sim_pc_mark(COLD_OFFSET, FLARE_SIM_STALL_SELECTED);
    while (thread_cpu_ns() - start < 200000) {
    }
    flare_sim_pc_mark(HOT_OFFSET, FLARE_SIM_STALL_LONG_SCOREBOARD);
    while (thread_cpu_ns() - start < 2000000) {
    }
}

typedef struct launcher {
    pthread_t thread;
    int kernel;
    atomic_bool stop;
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
    while (!atomic_load(&self->stop)) {
        /* Each launch inside a scope: the report credits it the samples. */
        int failed =
            flare_scope_begin("pc_step") != FLARE_OK ||
            flare_sim_launch_kernel(stream, self->kernel, grid, block, NULL, 0) != FLARE_OK ||
            flare_sim_stream_synchronize(stream, 10000) != FLARE_OK;
        if (flare_scope_end() != FLARE_OK || failed) {
            self->failed = 1;
            break;
        }
    }
    if (flare_sim_stream_destroy(stream) != FLARE_OK)
        self->failed = 1;
    return NULL;
}

static uint64_t pc_disarms(void)
{
    pc_engine_stats stats;
    pc_engine_stats_get(sim_pc_engine_core(), &stats);
    return stats.disarms;
}

/* One session: the kernel runs, one pc window of 300 ms (opened through the
 * C API, or scheduled by FLARE_DEEP_AFTER/_FOR/_ENGINE), the database. */
static sqlite3 *session_with_a_pc_window(char *dir, size_t dir_size, int scheduled)
{
    test_make_temp_dir(dir, dir_size, "pc-session");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 20;
    uint64_t disarms = pc_disarms();
    if (scheduled) {
        setenv("FLARE_DEEP_AFTER", "200ms", 1);
        setenv("FLARE_DEEP_FOR", "300ms", 1);
        setenv("FLARE_DEEP_ENGINE", "pc", 1);
    }
    assert_int_equal(flare_init(&options), FLARE_OK);
    unsetenv("FLARE_DEEP_AFTER");
    unsetenv("FLARE_DEEP_FOR");
    unsetenv("FLARE_DEEP_ENGINE");
    launcher work = {0};
    assert_int_equal(flare_sim_kernel_register("pc_hot_kernel", hot_kernel, &work.kernel),
                     FLARE_OK);
    assert_int_equal(pthread_create(&work.thread, NULL, launch_until_stopped, &work), 0);

    flare_window_options window;
    flare_window_options_init(&window);
    window.max_duration_ms = 300;
    window.label = "where";
    window.engine = "sas";
    assert_int_equal(flare_window_open(&window), FLARE_ERR_INVALID_ARGUMENT);
    window.engine = "pc";
    if (!scheduled)
        assert_int_equal(flare_window_open(&window), FLARE_OK);
    TEST_WAIT_UNTIL(pc_disarms() > disarms);

    atomic_store(&work.stop, true);
    pthread_join(work.thread, NULL);
    assert_false(work.failed);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

static void expect_pc_samples(sqlite3 *db)
{
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM windows"), 1);
    assert_int_equal(test_sql_int(db,
                                  "SELECT COUNT(*) FROM windows WHERE engine = 'sim-pc-sampling' "
                                  "AND engine_status = 'disarmed' AND engine_reason = ''"),
                     1);
    int64_t samples = test_sql_int(db, "SELECT SUM(samples) FROM v_pc_samples");
    assert_true(samples >= 100);
    /* Every sample the engine counted is a row's. */
    assert_int_equal(test_sql_int(db, "SELECT engine_samples FROM windows"), samples);
    assert_int_equal(test_sql_int(db,
                                  "SELECT COUNT(*) FROM v_pc_samples p JOIN windows w ON w.id = "
                                  "p.window_id WHERE p.function != 'pc_hot_kernel' OR p.first_ns < "
                                  "w.opened_ns OR p.last_ns > w.closed_ns"),
                     0);
    char sql[256];
    snprintf(sql, sizeof(sql),
             "SELECT SUM(samples) FROM v_pc_samples WHERE pc_offset = %u AND stall_reason = "
             "'long_scoreboard'",
             HOT_OFFSET);
    int64_t hot = test_sql_int(db, sql);
    if (hot * 10 < samples * 8)
        fail_msg("%lld of %lld samples at the hot offset: under 80%%", (long long)hot,
                 (long long)samples);
    /* Every simulated offset is below SIM_PC_LINES_END: every sample has
     * its line, the hot offset's most of them. */
    assert_int_equal(test_sql_int(db, "SELECT SUM(samples) FROM v_pc_lines"), samples);
    snprintf(sql, sizeof(sql),
             "SELECT COUNT(*) FROM v_pc_lines WHERE file != '%s' OR line != 1 + pc_offset / 64",
             SIM_PC_SOURCE_FILE);
    assert_int_equal(test_sql_int(db, sql), 0);
    snprintf(sql, sizeof(sql),
             "SELECT SUM(samples) FROM v_pc_lines WHERE file = '%s' AND line = %u",
             SIM_PC_SOURCE_FILE, (unsigned)SIM_PC_LINE(HOT_OFFSET));
    int64_t hot_line = test_sql_int(db, sql);
    if (hot_line * 10 < samples * 8)
        fail_msg("%lld of %lld samples on the hot line: under 80%%", (long long)hot_line,
                 (long long)samples);
    assert_int_equal(test_sql_int(db, "SELECT COUNT(*) FROM drops WHERE source = 'pc_sampling' AND "
                                      "count > 0"),
                     0);
}

/* The output of `flare report ARGS dir`, exit status 0. */
static void report_of(const char *dir, const char *args, char *output, size_t size)
{
    char command[700];
    const char *bin = getenv("FLARE_TEST_BIN_DIR");
    snprintf(command, sizeof(command), "%s/flare report %s '%s' 2>&1", bin != NULL ? bin : "bin",
             args, dir);
    FILE *pipe = popen(command, "r");
    assert_non_null(pipe);
    size_t used = fread(output, 1, size - 1, pipe);
    output[used] = '\0';
    assert_int_equal(pclose(pipe), 0);
}

/* The section's first hottest source line: the hot offset's, with 80% of
 * the window's samples or more, mostly long_scoreboard. */
static void expect_hot_line_first(const char *section)
{
    const char *header = strstr(section, "    hottest source lines:\n");
    const char *row = header != NULL ? strstr(header, " file:line in function\n") : NULL;
    unsigned long long samples = 0;
    double share = 0, stall_share = 0;
    char stall[32] = "", place[64] = "", function[64] = "";
    if (row == NULL ||
        sscanf(row + strlen(" file:line in function\n"), "%llu %lf%% %31s %lf%% %63s in %63s",
               &samples, &share, stall, &stall_share, place, function) != 6)
        fail_msg("no hottest source lines:\n%s", section);
    char expected[64];
    snprintf(expected, sizeof(expected), "%s:%u", SIM_PC_SOURCE_FILE,
             (unsigned)SIM_PC_LINE(HOT_OFFSET));
    if (share < 80.0 || strcmp(stall, "long_scoreboard") != 0 || stall_share < 80.0 ||
        strcmp(place, expected) != 0 || strcmp(function, "pc_hot_kernel") != 0)
        fail_msg("the hottest line is not %s at 80%% or more:\n%s", expected, section);
}

static void test_a_pc_window_stores_where_the_kernel_waits(void **unused)
{
    (void)unused;
    char dir[256];
    sqlite3 *db = session_with_a_pc_window(dir, sizeof(dir), 0);
    expect_pc_samples(db);
    sqlite3_close(db);
    /* The report: the stall reasons, the hot instruction first, the hot
     * line first, and no sample said to lack a line. */
    static char output[65536];
    report_of(dir, "", output, sizeof(output));
    const char *section = strstr(output, "\nPC samples (windows with engine pc: where in their "
                                         "kernels warps waited)\n  window 1 (pid ");
    if (section == NULL || strstr(section, "    stall reasons: long_scoreboard ") == NULL ||
        strstr(section, "long_scoreboard      pc_hot_kernel+0x100 (simulated_kernels.cu:5)\n") ==
            NULL ||
        strstr(section, "    by scope (samples split by kernel time): pc_step ") == NULL ||
        strstr(section, "without line information") != NULL)
        fail_msg("no PC samples section as expected:\n%s", output);
    expect_hot_line_first(section);
    report_of(dir, "--format json", output, sizeof(output));
    if (strstr(output, "\"pc_samples\"") == NULL ||
        strstr(output, "\"function\":\"pc_hot_kernel\"") == NULL ||
        strstr(output, "\"pc_by_scope\":[\n{\"pid\":") == NULL ||
        strstr(output, "\"scope\":\"pc_step\",\"stall_reason\":\"long_scoreboard\"") == NULL ||
        strstr(output, "\"pc_lines\":[\n{\"pid\":") == NULL ||
        strstr(output, "\"device\":0,\"file\":\"simulated_kernels.cu\",\"line\":5,\"function\":"
                       "\"pc_hot_kernel\",\"samples\":") == NULL ||
        strstr(output, "\"top_stall_reason\":\"long_scoreboard\"") == NULL)
        fail_msg("no pc_samples, pc_by_scope and pc_lines in the JSON report:\n%.4000s", output);
    /* The Perfetto export: the window's slice carries the summary. */
    char command[700];
    const char *bin = getenv("FLARE_TEST_BIN_DIR");
    snprintf(command, sizeof(command),
             "%s/flare export --format perfetto -o - '%s' | grep '\"cat\":\"flare_window\"'",
             bin != NULL ? bin : "bin", dir);
    FILE *pipe = popen(command, "r");
    assert_non_null(pipe);
    size_t used = fread(output, 1, sizeof(output) - 1, pipe);
    output[used] = '\0';
    assert_int_equal(pclose(pipe), 0);
    const char *window_args = strstr(output, "\"engine\":\"sim-pc-sampling\"");
    if (window_args == NULL ||
        strstr(window_args, "\"pc_stalls\":\"device 0: long_scoreboard ") == NULL ||
        strstr(window_args, "\"pc_hottest\":\"device 0: pc_hot_kernel+0x100 long_scoreboard ") ==
            NULL ||
        strstr(window_args, "\"pc_by_scope\":\"device 0: pc_step ") == NULL ||
        strstr(window_args, "\"pc_lines\":\"device 0: simulated_kernels.cu:5 long_scoreboard ") ==
            NULL)
        fail_msg("no PC summary on the window's Perfetto slice:\n%.3000s",
                 window_args != NULL ? window_args : output);
    test_remove_dir(dir);
}

static void test_a_scheduled_window_asks_for_pc(void **unused)
{
    (void)unused;
    char dir[256];
    sqlite3 *db = session_with_a_pc_window(dir, sizeof(dir), 1);
    expect_pc_samples(db);
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM windows WHERE token_kind = 'scheduled'"), 1);
    sqlite3_close(db);
    test_remove_dir(dir);
    /* A bad engine: the schedule is ignored, and the session says why. */
    test_make_temp_dir(dir, sizeof(dir), "pc-bad-engine");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    setenv("FLARE_DEEP_AFTER", "1h", 1);
    setenv("FLARE_DEEP_FOR", "1s", 1);
    setenv("FLARE_DEEP_ENGINE", "sas", 1);
    assert_int_equal(flare_init(&options), FLARE_OK);
    unsetenv("FLARE_DEEP_AFTER");
    unsetenv("FLARE_DEEP_FOR");
    unsetenv("FLARE_DEEP_ENGINE");
    assert_int_equal(flare_shutdown(), FLARE_OK);
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(
        test_sql_int(db, "SELECT COUNT(*) FROM capabilities WHERE feature = "
                         "'deep_windows' AND status = 'degraded' AND reason = 'scheduled "
                         "window ignored: FLARE_DEEP_ENGINE=sas: use pm, pc, sass or auto'"),
        1);
    sqlite3_close(db);
    test_remove_dir(dir);
}

static int64_t session_query(const char *dir, const char *sql)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t value = test_sql_int(db, sql);
    sqlite3_close(db);
    return value;
}

/* The simulated engine outlives sessions: what it lost in one session is
 * that session's, never the next one's; FLARE_PC_PERIOD is read again. */
static void test_losses_and_settings_belong_to_their_session(void **unused)
{
    (void)unused;
    static const char lost_sql[] = "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                   "'pc_sampling' AND detail = 'samples lost (hardware buffer "
                                   "full)'";
    sim_pc_set_buffer_samples(64);
    pc_engine_pause_drain(sim_pc_engine_core(), 1);
    char dir[256];
    sqlite3 *db = session_with_a_pc_window(dir, sizeof(dir), 0);
    sqlite3_close(db);
    pc_engine_pause_drain(sim_pc_engine_core(), 0);
    sim_pc_set_buffer_samples(0);
    assert_true(session_query(dir, lost_sql) > 0);
    assert_int_equal(session_query(dir, "SELECT SUM(samples) FROM v_pc_samples"),
                     session_query(dir, "SELECT engine_samples FROM windows"));
    test_remove_dir(dir);
    /* A bad period refuses this session's pc windows ... */
    test_make_temp_dir(dir, sizeof(dir), "pc-next");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    setenv("FLARE_PC_PERIOD", "5", 1);
    assert_int_equal(flare_init(&options), FLARE_OK);
    unsetenv("FLARE_PC_PERIOD");
    flare_window_options window;
    flare_window_options_init(&window);
    window.engine = "pc";
    assert_int_equal(flare_window_open(&window), FLARE_ERR_UNSUPPORTED);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    /* ... and nothing lost in the last one is this one's. */
    assert_int_equal(session_query(dir, lost_sql), 0);
    assert_int_equal(session_query(dir, "SELECT COUNT(*) FROM windows WHERE engine_status = "
                                        "'refused' AND engine_reason LIKE 'FLARE_PC_PERIOD=5%'"),
                     1);
    test_remove_dir(dir);
    /* The next session, without it, samples again. */
    db = session_with_a_pc_window(dir, sizeof(dir), 0);
    expect_pc_samples(db);
    sqlite3_close(db);
    test_remove_dir(dir);
}

static void test_a_prepared_pm_engine_does_not_turn_pc_down(void **unused)
{
    (void)unused;
    char reason[256];
    assert_int_equal(sim_pm_prepare(0, NULL, 0, reason, sizeof(reason)), FLARE_OK);
    char dir[256];
    sqlite3 *db = session_with_a_pc_window(dir, sizeof(dir), 0);
    expect_pc_samples(db);
    sqlite3_close(db);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_pc_window_stores_where_the_kernel_waits),
        cmocka_unit_test(test_a_scheduled_window_asks_for_pc),
        cmocka_unit_test(test_losses_and_settings_belong_to_their_session),
        cmocka_unit_test(test_a_prepared_pm_engine_does_not_turn_pc_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
