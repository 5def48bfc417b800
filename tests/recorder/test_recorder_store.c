/*
 * test_recorder_store.c: the flight recorder's passes (src/recorder/
 * recorder.c) over a real session database (src/store/store_evict.c), on a
 * made-up clock, batch by batch as the collector runs them: what --keep
 * evicts and what it must keep (a deep window from the database, a window
 * open now, rows delivered late, each counter's newest sample, the
 * external correlations of kept kernels); that the per-second totals and
 * the rows left add up exactly to what was written; that a lost batch
 * takes its pass with it; that --max-size holds the database, its -wal
 * included, under the cap while many times more rows go through it; and
 * that without either limit nothing is written at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

#include "flare/flare.h"
#include "recorder/recorder.h"
#include "store/store.h"
#include "test_util.h"

#define S     RECORDER_NS_PER_S
#define MS    1000000ull
#define START (1000 * S) /* session.start_ns */
#define PID   4242

typedef struct run {
    char dir[256];
    store *db;
    uint64_t now; /* the made-up clock: the end of the last batch */
    uint64_t correlation;
    uint64_t written[2]; /* kernels per name */
    uint64_t gpu_ns[2];
    uint64_t api_calls;
    bool window_active;
} run;

static const char *const kernel_names[2] = {"gemm", "softmax"};

static void run_open(run *r, const char *tag)
{
    memset(r, 0, sizeof(*r));
    test_make_temp_dir(r->dir, sizeof(r->dir), tag);
    char error[512];
    assert_int_equal(store_open(r->dir, STORE_OPEN_WRITE, &r->db, error, sizeof(error)), FLARE_OK);
    store_session_info info = {
        .command = "test", .start_ns = START, .host = "h", .flare_version = "t"};
    assert_int_equal(store_session_begin(r->db, &info), FLARE_OK);
    assert_int_equal(store_process_begin(r->db, PID, 1, START, "sim", "test"), FLARE_OK);
    r->now = START;
}

static void run_close(run *r)
{
    recorder_end();
    store_close(r->db);
    test_remove_dir(r->dir);
}

static void put_kernel(run *r, uint64_t start, uint64_t duration)
{
    int name = (int)(r->correlation % 2);
    store_kernel_row row = {.pid = PID,
                            .correlation_id = ++r->correlation,
                            .name = kernel_names[name],
                            .start_ns = start,
                            .end_ns = start + duration};
    assert_int_equal(store_put_kernel(r->db, &row), FLARE_OK);
    r->written[name]++;
    r->gpu_ns[name] += duration;
    store_api_call_row call = {.pid = PID,
                               .correlation_id = r->correlation,
                               .name = "cuLaunchKernel",
                               .start_ns = start,
                               .end_ns = start + 100};
    assert_int_equal(store_put_api_call(r->db, &call), FLARE_OK);
    r->api_calls++;
}

/* One 100 ms batch of the collector: rows kernels spread over it (and one
 * delivered 500 ms late), a metric and a counter sample, then the
 * recorder's turn and the commit. */
static void batch(run *r, int kernels, bool commit)
{
    uint64_t from = r->now, step = 100 * MS / (uint64_t)kernels;
    assert_int_equal(store_begin(r->db), FLARE_OK);
    for (int i = 0; i < kernels; i++)
        put_kernel(r, from + (uint64_t)i * step, 1000 + (r->correlation % 7) * 100);
    if (from >= START + S)
        put_kernel(r, from - 500 * MS, 2000); /* late: ended half a second ago */
    store_metric_row metric = {.pid = PID,
                               .device = 0,
                               .name = "power_mw",
                               .time_ns = from,
                               .value = (int64_t)(from / MS % 1000)};
    assert_int_equal(store_put_metric(r->db, &metric), FLARE_OK);
    assert_int_equal(store_put_counter_sample(r->db, PID, 0, from, from / MS), FLARE_OK);
    assert_int_equal(store_put_external_correlation(r->db, PID, r->correlation, 3, 77), FLARE_OK);
    r->now = from + 100 * MS;
    recorder_batch(r->db, PID, r->now, r->window_active);
    if (commit) {
        assert_int_equal(store_commit(r->db), FLARE_OK);
        recorder_committed(1);
    } else {
        store_rollback(r->db); /* a lost batch: its rows and the pass go */
        recorder_committed(0);
        for (int name = 0; name < 2; name++) {
            r->written[name] = 0; /* recounted from the database below */
            r->gpu_ns[name] = 0;
        }
    }
}

static int64_t query(run *r, const char *sql)
{
    sqlite3 *db = NULL;
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", r->dir);
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    int64_t value = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

static int64_t queryf(run *r, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int64_t queryf(run *r, const char *format, ...)
{
    char sql[2048];
    va_list args;
    va_start(args, format);
    vsnprintf(sql, sizeof(sql), format, args);
    va_end(args);
    return query(r, sql);
}

/* Per name: the totals plus the rows left are what was written, exactly;
 * the drops say how many went; v_kernel_seconds covers the whole run. */
static void expect_kernels_add_up(run *r)
{
    uint64_t evicted = 0;
    for (int name = 0; name < 2; name++) {
        const char *n = kernel_names[name];
        int64_t kept = queryf(r,
                              "SELECT COUNT(*) FROM kernels k JOIN names n ON n.id = k.name_id "
                              "WHERE n.name = '%s'",
                              n);
        int64_t kept_ns = queryf(r,
                                 "SELECT COALESCE(SUM(end_ns - start_ns), 0) FROM kernels k JOIN "
                                 "names n ON n.id = k.name_id WHERE n.name = '%s'",
                                 n);
        int64_t totals = queryf(r,
                                "SELECT COALESCE(SUM(count), 0) FROM kernel_seconds s JOIN names "
                                "n ON n.id = s.name_id WHERE n.name = '%s'",
                                n);
        int64_t totals_ns = queryf(r,
                                   "SELECT COALESCE(SUM(gpu_ns), 0) FROM kernel_seconds s JOIN "
                                   "names n ON n.id = s.name_id WHERE n.name = '%s'",
                                   n);
        assert_int_equal(kept + totals, r->written[name]);
        assert_int_equal(kept_ns + totals_ns, r->gpu_ns[name]);
        assert_int_equal(queryf(r, "SELECT SUM(count) FROM v_kernel_seconds WHERE name = '%s'", n),
                         r->written[name]);
        assert_int_equal(queryf(r, "SELECT SUM(gpu_ns) FROM v_kernel_seconds WHERE name = '%s'", n),
                         r->gpu_ns[name]);
        evicted += (uint64_t)totals;
    }
    assert_int_equal(query(r, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                              "'flight_recorder' AND detail LIKE 'kernels evicted%'"),
                     evicted);
    assert_int_equal(query(r, "SELECT SUM(count) FROM v_api_call_seconds"), r->api_calls);
    assert_int_equal(query(r, "SELECT COUNT(*) FROM api_calls") +
                         query(r, "SELECT COALESCE(SUM(count), 0) FROM drops WHERE source = "
                                  "'flight_recorder' AND detail LIKE 'API calls%'"),
                     r->api_calls);
}

static void test_keep_evicts_old_rows_and_keeps_the_rest(void **unused)
{
    (void)unused;
    run r;
    run_open(&r, "rec-keep");
    recorder_settings settings = {.keep_ns = 3 * S};
    recorder_begin_with(&settings, START);
    assert_int_equal(store_put_counter(r.db, PID, 0, "tokens"), FLARE_OK);
    for (int i = 0; i < 50; i++)
        batch(&r, 40, true);
    /* A deep window at 5.0..5.2 s, written as the deep-window beat does. */
    store_window_row window = {.pid = PID,
                               .id = 1,
                               .token_kind = "manual",
                               .label = "w",
                               .max_duration_ns = S,
                               .requested_ns = START + 5 * S,
                               .opened_ns = START + 5 * S,
                               .closed_ns = START + 5200 * MS,
                               .close_reason = "duration",
                               .engine = "sim",
                               .engine_status = "disarmed",
                               .engine_reason = ""};
    assert_int_equal(store_begin(r.db), FLARE_OK);
    assert_int_equal(store_put_window(r.db, &window), FLARE_OK);
    assert_int_equal(store_commit(r.db), FLARE_OK);
    /* A window open now, from 8.0 s, as the collector sees it. */
    for (int i = 50; i < 80; i++)
        batch(&r, 40, true);
    r.window_active = true;
    for (int i = 80; i < 100; i++)
        batch(&r, 40, true);
    r.window_active = false;
    for (int i = 100; i < 130; i++)
        batch(&r, 40, true); /* to 13 s: the window closed at 10 s */

    recorder_stats stats;
    recorder_stats_get(&stats);
    assert_true(stats.passes >= 10);
    assert_true(stats.evicted_kernels > 0);
    uint64_t until = stats.evicted_until_ns;
    /* The cursor follows --keep within a pass or two. */
    assert_in_range(until, r.now - 3 * S - 2 * S, r.now - 3 * S);
    /* Nothing old is left but what the windows protect (1 s each side) and
     * rows delivered late past the cursor (500 ms). */
    assert_int_equal(
        queryf(&r,
               "SELECT COUNT(*) FROM kernels WHERE end_ns < %llu AND NOT (start_ns "
               "<= %llu AND end_ns >= %llu) AND NOT (start_ns <= %llu AND end_ns >= "
               "%llu)",
               (unsigned long long)(until - 600 * MS), (unsigned long long)(START + 6200 * MS),
               (unsigned long long)(START + 4 * S), (unsigned long long)(START + 11 * S),
               (unsigned long long)(START + 7 * S)),
        0);
    /* Everything the windows cover is still there (40 a batch, 10 batches a second). */
    assert_true(queryf(&r, "SELECT COUNT(*) FROM kernels WHERE start_ns >= %llu AND end_ns <= %llu",
                       (unsigned long long)(START + 4 * S),
                       (unsigned long long)(START + 6 * S)) >= 2 * 400);
    assert_true(queryf(&r, "SELECT COUNT(*) FROM kernels WHERE start_ns >= %llu AND end_ns <= %llu",
                       (unsigned long long)(START + 7200 * MS),
                       (unsigned long long)(START + 10 * S)) >= 2 * 400 + 300);
    /* Nothing younger than the cutoff went. */
    assert_true(queryf(&r, "SELECT COUNT(*) FROM kernels WHERE start_ns >= %llu",
                       (unsigned long long)(r.now - 3 * S)) >= 3 * 400);
    expect_kernels_add_up(&r);
    /* The counter's newest sample always stays, and its value is final. */
    assert_int_equal(query(&r, "SELECT MAX(time_ns) FROM counter_samples"), r.now - 100 * MS);
    assert_true(query(&r, "SELECT COUNT(*) FROM counter_samples") < 100);
    /* External correlations of kept kernels stay (protected ones included). */
    assert_true(queryf(&r,
                       "SELECT COUNT(*) FROM external_correlations WHERE correlation_id IN "
                       "(SELECT correlation_id FROM kernels WHERE start_ns BETWEEN %llu AND "
                       "%llu)",
                       (unsigned long long)(START + 5 * S),
                       (unsigned long long)(START + 5200 * MS)) > 0);
    /* Metric samples: min, max and sum per second, the whole run. */
    assert_int_equal(query(&r, "SELECT SUM(samples) FROM v_metric_seconds"), 130);
    assert_int_equal(query(&r, "SELECT MIN(min_value) FROM v_metric_seconds WHERE second = 2"), 0);
    assert_int_equal(query(&r, "SELECT MAX(max_value) FROM v_metric_seconds WHERE second = 2"),
                     900);
    assert_int_equal(query(&r, "SELECT sum_value FROM v_metric_seconds WHERE second = 2"), 4500);
    run_close(&r);
}

static void test_lost_batch_takes_its_pass_with_it(void **unused)
{
    (void)unused;
    run r;
    run_open(&r, "rec-lost");
    recorder_settings settings = {.keep_ns = S};
    recorder_begin_with(&settings, START);
    for (int i = 0; i < 40; i++)
        batch(&r, 20, i % 7 != 6); /* every seventh batch is lost */
    recorder_stats stats;
    recorder_stats_get(&stats);
    assert_true(stats.evicted_kernels > 0);
    /* What the lost batches wrote is gone with them: count what stands. */
    for (int name = 0; name < 2; name++) {
        r.written[name] = (uint64_t)queryf(&r,
                                           "SELECT (SELECT COUNT(*) FROM kernels k JOIN names n ON "
                                           "n.id = k.name_id WHERE n.name = '%s') + (SELECT "
                                           "COALESCE(SUM(count), 0) FROM kernel_seconds s JOIN "
                                           "names n ON n.id = s.name_id WHERE n.name = '%s')",
                                           kernel_names[name], kernel_names[name]);
    }
    /* The totals match the drops: no pass counted rows its batch lost. */
    assert_int_equal(query(&r, "SELECT SUM(count) FROM kernel_seconds"),
                     query(&r, "SELECT SUM(count) FROM drops WHERE source = 'flight_recorder' AND "
                               "detail LIKE 'kernels%'"));
    assert_int_equal((uint64_t)stats.evicted_kernels,
                     (uint64_t)query(&r, "SELECT SUM(count) FROM kernel_seconds"));
    run_close(&r);
}

static long long file_size(const run *r, const char *name)
{
    char path[400];
    struct stat info;
    snprintf(path, sizeof(path), "%s/%s", r->dir, name);
    return stat(path, &info) == 0 ? (long long)info.st_size : 0;
}

static void test_max_size_holds_the_database_under_the_cap(void **unused)
{
    (void)unused;
    run r;
    run_open(&r, "rec-size");
    const uint64_t cap = 4ull << 20;
    recorder_settings settings = {.max_bytes = cap};
    recorder_begin_with(&settings, START);
    long long largest = 0, largest_wal = 0;
    /* 1000 kernels and API calls a batch: about 1 MB of rows a second. */
    for (int i = 0; i < 500; i++) {
        batch(&r, 1000, true);
        long long size = file_size(&r, "session.db"), wal = file_size(&r, "session.db-wal");
        largest = size > largest ? size : largest;
        largest_wal = wal > largest_wal ? wal : largest_wal;
    }
    recorder_stats stats;
    recorder_stats_get(&stats);
    uint64_t written = r.written[0] + r.written[1];
    /* Many times what fits went through. */
    assert_true(written * 100 > 10 * cap);
    assert_true(stats.evicted_kernels > written / 2);
    assert_true(stats.used_bytes <= cap);
    /* The file plateaus under the cap (freed pages are reused), and the
     * log stays small beside it. */
    if (largest > (long long)cap)
        fail_msg("session.db reached %lld bytes, over the cap of %llu", largest,
                 (unsigned long long)cap);
    if (largest_wal > (long long)cap)
        fail_msg("session.db-wal reached %lld bytes", largest_wal);
    assert_true(query(&r, "SELECT COUNT(*) FROM kernels") > 0);
    expect_kernels_add_up(&r);
    assert_true(query(&r, "SELECT COUNT(*) FROM drops WHERE detail = 'kernels evicted (over "
                          "--max-size)'") == 1);
    run_close(&r);
}

/* Rows faster than a pass's plan allows for: at 3.5 MB a second into a
 * 4 MB cap, the target's floor (half the cap) plus a second's growth is
 * past the cap before the next pass (the file reached 5.7 MB when batches
 * waited for it). Batches that find the database over 90% of the cap evict
 * at once (urgent passes), and the file stays under. */
static void test_max_size_holds_when_rows_outrun_the_pass(void **unused)
{
    (void)unused;
    run r;
    run_open(&r, "rec-urgent");
    const uint64_t cap = 4ull << 20;
    recorder_settings settings = {.max_bytes = cap};
    recorder_begin_with(&settings, START);
    long long largest = 0;
    for (int i = 0; i < 150; i++) {
        batch(&r, 3500, true);
        long long size = file_size(&r, "session.db");
        largest = size > largest ? size : largest;
    }
    recorder_stats stats;
    recorder_stats_get(&stats);
    if (largest > (long long)cap)
        fail_msg("session.db reached %lld bytes, over the cap of %llu (%llu urgent passes)",
                 largest, (unsigned long long)cap, (unsigned long long)stats.urgent_passes);
    assert_true(stats.urgent_passes > 0);
    assert_true(stats.urgent_passes < stats.passes);
    assert_true(stats.used_bytes <= cap);
    /* Urgent passes do not throw away more than the cap asks: a good part of
     * it still holds detail (at most half goes below the target's floor). */
    assert_true(stats.used_bytes >= cap / 4);
    assert_true(query(&r, "SELECT COUNT(*) FROM kernels") > 3500);
    expect_kernels_add_up(&r);
    run_close(&r);
}

static void test_off_writes_nothing(void **unused)
{
    (void)unused;
    run r;
    run_open(&r, "rec-off");
    recorder_settings settings = {0, 0};
    recorder_begin_with(&settings, START);
    for (int i = 0; i < 30; i++)
        batch(&r, 20, true);
    recorder_stats stats;
    recorder_stats_get(&stats);
    assert_int_equal(stats.passes, 0);
    static const char *const tables[] = {"kernel_seconds", "copy_seconds", "api_call_seconds",
                                         "metric_seconds"};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(queryf(&r, "SELECT COUNT(*) FROM %s", tables[i]), 0);
    assert_int_equal(query(&r, "SELECT COUNT(*) FROM drops WHERE source = 'flight_recorder'"), 0);
    assert_int_equal(query(&r, "SELECT COUNT(*) FROM kernels"), r.written[0] + r.written[1]);
    run_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keep_evicts_old_rows_and_keeps_the_rest),
        cmocka_unit_test(test_lost_batch_takes_its_pass_with_it),
        cmocka_unit_test(test_max_size_holds_the_database_under_the_cap),
        cmocka_unit_test(test_max_size_holds_when_rows_outrun_the_pass),
        cmocka_unit_test(test_off_writes_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
