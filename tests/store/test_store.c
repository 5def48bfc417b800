/*
 * test_store.c: the session database, end to end through store.h.
 *
 * Each test works in its own mkdtemp directory under /tmp and removes it.
 * Where the API cannot show a property (which name id a row got, whether a
 * file was created), the test looks at the file directly with SQLite or
 * stat; it must never depend on anything outside its directory.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flare/flare.h"
#include "store/store.h"
#include "store/store_pm.h"

#define TEST_PID        1234
#define TEST_PATH_MAX   4096
#define TEST_MAX_GROUPS 16

/* ---- helpers ---- */

static void make_dir(char *dir)
{
    strcpy(dir, "/tmp/flare-test-store-XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir)
{
    DIR *handle = opendir(dir);
    if (handle != NULL) {
        struct dirent *entry;
        while ((entry = readdir(handle)) != NULL) {
            if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
                continue;
            char path[TEST_PATH_MAX * 2];
            snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
            unlink(path);
        }
        closedir(handle);
    }
    rmdir(dir);
}

/* dir/name into path (TEST_PATH_MAX bytes); checked, so never truncated. */
static void join_path(char *path, const char *dir, const char *name)
{
    int length = snprintf(path, TEST_PATH_MAX, "%s/%s", dir, name);
    assert_true(length > 0 && length < TEST_PATH_MAX);
}

static void db_path(char *path, const char *dir)
{
    join_path(path, dir, STORE_DATABASE_NAME);
}

static int path_exists(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0;
}

static store *open_write(const char *dir)
{
    store *handle = NULL;
    char error[1024];
    int status = store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof error);
    if (status != 0)
        print_error("store_open(WRITE): %s\n", error);
    assert_int_equal(status, 0);
    assert_non_null(handle);
    return handle;
}

static store *open_read(const char *dir)
{
    store *handle = NULL;
    char error[1024];
    int status = store_open(dir, STORE_OPEN_READ, &handle, error, sizeof error);
    if (status != 0)
        print_error("store_open(READ): %s\n", error);
    assert_int_equal(status, 0);
    assert_non_null(handle);
    return handle;
}

/* The first column of the first row of sql, run on session.db directly. */
static int64_t sql_int(const char *dir, const char *sql)
{
    char path[TEST_PATH_MAX];
    db_path(path, dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &statement, NULL);
    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, sqlite3_errmsg(db));
    assert_int_equal(rc, SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int64_t value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

/* Runs sql on session.db (created if missing) outside the store. */
static void sql_exec(const char *dir, const char *sql)
{
    char path[TEST_PATH_MAX];
    db_path(path, dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *message = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &message);
    if (rc != SQLITE_OK)
        print_error("%s: %s\n", sql, message);
    sqlite3_free(message);
    assert_int_equal(rc, SQLITE_OK);
    sqlite3_close(db);
}

static void put_kernel(store *handle, const char *name, uint64_t start_ns, uint64_t duration_ns,
                       uint64_t correlation_id)
{
    store_kernel_row row = {
        .pid = TEST_PID,
        .device = 0,
        .stream_id = 7,
        .correlation_id = correlation_id,
        .name = name,
        .start_ns = start_ns,
        .end_ns = start_ns + duration_ns,
        .grid = {4, 2, 1},
        .block = {128, 1, 1},
        .shared_memory_bytes = 1024,
        .registers_per_thread = 40,
    };
    int status = store_put_kernel(handle, &row);
    if (status != 0)
        print_error("store_put_kernel: %s\n", store_last_error(handle));
    assert_int_equal(status, 0);
}

static void put_scope(store *handle, const char *name, uint32_t depth, uint64_t start_ns,
                      uint64_t duration_ns, int still_open)
{
    static uint64_t instance = 0;
    store_scope_row row = {
        .pid = TEST_PID,
        .thread_id = 99,
        .instance_id = ++instance,
        .name = name,
        .depth = depth,
        .start_ns = start_ns,
        .end_ns = start_ns + duration_ns,
        .still_open = still_open,
    };
    assert_int_equal(store_put_scope(handle, &row), 0);
}

static void put_copy(store *handle, int is_memset, int kind, uint64_t bytes, uint64_t duration_ns,
                     int copy_status)
{
    store_copy_row row = {
        .pid = TEST_PID,
        .device = 0,
        .stream_id = 7,
        .correlation_id = 5000 + bytes,
        .is_memset = is_memset,
        .copy_kind = kind,
        .bytes = bytes,
        .start_ns = 10000,
        .end_ns = 10000 + duration_ns,
        .status = copy_status,
    };
    assert_int_equal(store_put_copy(handle, &row), 0);
}

typedef struct duration_list {
    int count;
    int stop_after; /* 0: never stop early */
    char names[TEST_MAX_GROUPS][256];
    store_duration_stats stats[TEST_MAX_GROUPS];
} duration_list;

static int collect_durations(const store_duration_stats *stats, void *user)
{
    duration_list *list = user;
    assert_true(list->count < TEST_MAX_GROUPS);
    assert_non_null(stats->name);
    snprintf(list->names[list->count], sizeof list->names[0], "%s", stats->name);
    list->stats[list->count] = *stats;
    list->stats[list->count].name = list->names[list->count];
    list->count++;
    return list->stop_after != 0 && list->count >= list->stop_after;
}

static void assert_stats(const duration_list *list, int index, const char *name, int64_t count,
                         uint64_t total, uint64_t mean, uint64_t p50, uint64_t p99, uint64_t max)
{
    assert_true(index < list->count);
    const store_duration_stats *stats = &list->stats[index];
    assert_string_equal(stats->name, name);
    assert_int_equal(stats->count, count);
    assert_int_equal(stats->total_ns, total);
    assert_int_equal(stats->mean_ns, mean);
    assert_int_equal(stats->p50_ns, p50);
    assert_int_equal(stats->p99_ns, p99);
    assert_int_equal(stats->max_ns, max);
}

typedef struct copy_list {
    int count;
    store_copy_stats stats[TEST_MAX_GROUPS];
} copy_list;

static int collect_copies(const store_copy_stats *stats, void *user)
{
    copy_list *list = user;
    assert_true(list->count < TEST_MAX_GROUPS);
    list->stats[list->count++] = *stats;
    return 0;
}

typedef struct drop_list {
    int count;
    int64_t pid[TEST_MAX_GROUPS];
    char source[TEST_MAX_GROUPS][64];
    char detail[TEST_MAX_GROUPS][64];
    uint64_t drops[TEST_MAX_GROUPS];
} drop_list;

static int collect_drops(const store_drop_row *row, void *user)
{
    drop_list *list = user;
    assert_true(list->count < TEST_MAX_GROUPS);
    list->pid[list->count] = row->pid;
    snprintf(list->source[list->count], sizeof list->source[0], "%s", row->source);
    snprintf(list->detail[list->count], sizeof list->detail[0], "%s", row->detail);
    list->drops[list->count] = row->count;
    list->count++;
    return 0;
}

/* ---- round trip ---- */

/*
 * gemm: 100 durations 1..100 us, written in a scrambled order, so the
 * nearest-rank p50 is exactly 50 us and p99 exactly 99 us (interpolating
 * percentiles would give 50.5 and 99.01). small: 10, 20, 30 ns. big: one.
 */
static void write_round_trip(store *handle)
{
    store_session_info info = {
        .command = "demo --iterations 3",
        .start_ns = 1000,
        .start_unix_ns = 1700000000000000000,
        .host = "testhost",
        .flare_version = "0.1.0",
    };
    assert_int_equal(store_session_begin(handle, &info), 0);
    store_session_info again = info;
    again.command = "must not replace the first";
    assert_int_equal(store_session_begin(handle, &again), 0);

    assert_int_equal(store_process_begin(handle, TEST_PID, 1, 1100, "sim", "/usr/bin/demo"), 0);
    assert_int_equal(store_process_begin(handle, TEST_PID + 1, TEST_PID, 1200, "sim", "child"), 0);
    assert_int_equal(store_put_device(handle, TEST_PID, 0, "Sim GPU 0", "sim"), 0);
    assert_int_equal(store_put_device(handle, TEST_PID, 1, "Sim GPU 1", "sim"), 0);
    assert_int_equal(store_put_device(handle, TEST_PID, 0, "Sim GPU 0", "sim"), 0);

    /* Batch 1: 70 gemm rows, more than one block of buffered rows. */
    assert_int_equal(store_begin(handle), 0);
    for (int i = 0; i < 70; i++)
        put_kernel(handle, "gemm", 10000 + (uint64_t)i, (uint64_t)((i * 37) % 100 + 1) * 1000,
                   (uint64_t)i);
    assert_int_equal(store_put_log(handle, TEST_PID, 2000, "info", "first batch"), 0);
    assert_int_equal(store_commit(handle), 0);

    /* Batch 2: the rest, mixed with everything else. */
    assert_int_equal(store_begin(handle), 0);
    for (int i = 70; i < 100; i++)
        put_kernel(handle, "gemm", 10000 + (uint64_t)i, (uint64_t)((i * 37) % 100 + 1) * 1000,
                   (uint64_t)i);
    put_kernel(handle, "small", 500, 20, 200);
    put_kernel(handle, "small", 600, 30, 201);
    put_kernel(handle, "small", 700, 10, 202);

    put_scope(handle, "outer", 0, 100, 1000, 0);
    put_scope(handle, "outer", 0, 5000, 3000, 0);
    put_scope(handle, "inner", 1, 200, 300, 0);
    put_scope(handle, "inner", 1, 600, 100, 0);
    put_scope(handle, "inner", 1, 5100, 400, 0);
    put_scope(handle, "inner", 1, 5600, 200, 1);

    put_copy(handle, 0, 1, 100, 10, 0);
    put_copy(handle, 0, 1, 200, 20, FLARE_ERR_BACKEND);
    put_copy(handle, 0, 1, 300, 30, 0);
    put_copy(handle, 0, 2, 1000, 5, 0);
    put_copy(handle, 1, 0, 64, 7, 0);
    put_copy(handle, 1, 0, 65, 9, 0);

    assert_int_equal(store_set_drops(handle, TEST_PID, "ring", "thread 1", 5), 0);
    assert_int_equal(store_set_drops(handle, TEST_PID, "ring", "thread 2", 0), 0);
    assert_int_equal(store_set_drops(handle, TEST_PID, "scope", "depth", 3), 0);
    assert_int_equal(store_put_log(handle, TEST_PID, 3000, "warn", "second batch"), 0);
    assert_int_equal(store_commit(handle), 0);

    /* Outside any batch: each call is its own transaction. */
    put_kernel(handle, "big", 900, 7000000, UINT64_MAX);
    assert_int_equal(store_set_drops(handle, TEST_PID, "ring", "thread 1", 7), 0);
    assert_int_equal(store_set_drops(handle, TEST_PID, "scope", "depth", 0), 0);
    assert_int_equal(store_set_drops(handle, TEST_PID + 1, "ring", "thread 9", 2), 0);
    assert_int_equal(store_put_log(handle, TEST_PID, 4000, "info", "done"), 0);

    assert_int_equal(store_process_end(handle, TEST_PID + 1, 8000000), 0);
    assert_int_equal(store_session_end(handle, 9000000, 1, 3), 0);
}

static void test_round_trip(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    write_round_trip(writer);
    store_close(writer);

    store *reader = open_read(dir);
    store_session_summary summary;
    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_string_equal(summary.command, "demo --iterations 3");
    assert_int_equal(summary.start_ns, 1000);
    assert_int_equal(summary.end_ns, 9000000);
    assert_int_equal(summary.start_unix_ns, 1700000000000000000);
    assert_int_equal(summary.has_exit_status, 1);
    assert_int_equal(summary.exit_status, 3);
    assert_string_equal(summary.host, "testhost");
    assert_string_equal(summary.flare_version, "0.1.0");
    assert_int_equal(summary.schema_version, STORE_SCHEMA_VERSION);
    assert_int_equal(summary.process_count, 2);
    assert_int_equal(summary.kernel_count, 104);
    assert_int_equal(summary.copy_count, 6);
    assert_int_equal(summary.scope_count, 6);

    duration_list kernels = {0};
    assert_int_equal(store_read_kernel_stats(reader, 0, collect_durations, &kernels), 0);
    assert_int_equal(kernels.count, 3);
    assert_stats(&kernels, 0, "big", 1, 7000000, 7000000, 7000000, 7000000, 7000000);
    assert_stats(&kernels, 1, "gemm", 100, 5050000, 50500, 50000, 99000, 100000);
    assert_stats(&kernels, 2, "small", 3, 60, 20, 20, 30, 30);

    duration_list scopes = {0};
    assert_int_equal(store_read_scope_stats(reader, 0, collect_durations, &scopes), 0);
    assert_int_equal(scopes.count, 2);
    assert_stats(&scopes, 0, "outer", 2, 4000, 2000, 1000, 3000, 3000);
    assert_stats(&scopes, 1, "inner", 4, 1000, 250, 200, 400, 400);

    copy_list copies = {0};
    assert_int_equal(store_read_copy_stats(reader, collect_copies, &copies), 0);
    assert_int_equal(copies.count, 3);
    assert_int_equal(copies.stats[0].is_memset, 0);
    assert_int_equal(copies.stats[0].copy_kind, 1);
    assert_int_equal(copies.stats[0].count, 3);
    assert_int_equal(copies.stats[0].bytes, 600);
    assert_int_equal(copies.stats[0].total_ns, 60);
    assert_int_equal(copies.stats[0].failed, 1);
    assert_int_equal(copies.stats[1].is_memset, 0);
    assert_int_equal(copies.stats[1].copy_kind, 2);
    assert_int_equal(copies.stats[1].count, 1);
    assert_int_equal(copies.stats[1].bytes, 1000);
    assert_int_equal(copies.stats[1].failed, 0);
    assert_int_equal(copies.stats[2].is_memset, 1);
    assert_int_equal(copies.stats[2].copy_kind, 0);
    assert_int_equal(copies.stats[2].count, 2);
    assert_int_equal(copies.stats[2].bytes, 129);
    assert_int_equal(copies.stats[2].total_ns, 16);

    /* Overwritten counts win; zero counts are kept in the table but not
     * reported. */
    drop_list drops = {0};
    assert_int_equal(store_read_drops(reader, collect_drops, &drops), 0);
    assert_int_equal(drops.count, 2);
    assert_int_equal(drops.pid[0], TEST_PID);
    assert_string_equal(drops.source[0], "ring");
    assert_string_equal(drops.detail[0], "thread 1");
    assert_int_equal(drops.drops[0], 7);
    assert_int_equal(drops.pid[1], TEST_PID + 1);
    assert_string_equal(drops.source[1], "ring");
    assert_string_equal(drops.detail[1], "thread 9");
    assert_int_equal(drops.drops[1], 2);
    store_close(reader);

    /* What the API does not report, straight from the file. */
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM drops"), 4);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM log"), 3);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM devices"), 2);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM processes WHERE end_ns IS NULL"), 1);
    assert_int_equal(sql_int(dir, "SELECT end_ns FROM processes WHERE pid = 1235"), 8000000);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM names"), 5);
    assert_int_equal(sql_int(dir, "SELECT value FROM meta WHERE key = 'schema_version'"),
                     STORE_SCHEMA_VERSION);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM meta WHERE key = 'created_by'"
                                  " AND value = 'flare'"),
                     1);
    /* uint64 values above INT64_MAX are stored as their int64 cast. */
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels WHERE correlation_id = -1 AND"
                                  " grid_x = 4 AND grid_y = 2 AND grid_z = 1 AND block_x = 128 AND"
                                  " block_y = 1 AND block_z = 1 AND shared_memory_bytes = 1024 AND"
                                  " registers_per_thread = 40 AND stream_id = 7 AND pid = 1234"),
                     1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM scopes WHERE still_open = 1"), 1);
    remove_dir(dir);
}

typedef struct gpu_readback {
    int metric_rows;
    int64_t power_min, power_max;
    double power_mean;
    int capability_rows;
    char nvml_status[32];
    char nvml_reason[128];
} gpu_readback;

static int collect_metric(const store_metric_stats *stats, void *user)
{
    gpu_readback *r = user;
    r->metric_rows++;
    if (stats->device == 0 && strcmp(stats->name, "power_mw") == 0) {
        assert_int_equal(stats->count, 3);
        r->power_min = stats->minimum;
        r->power_max = stats->maximum;
        r->power_mean = stats->mean;
    }
    return 0;
}

static int collect_capability(const store_capability_row *row, void *user)
{
    gpu_readback *r = user;
    r->capability_rows++;
    if (strcmp(row->feature, "nvml") == 0) {
        snprintf(r->nvml_status, sizeof(r->nvml_status), "%s", row->status);
        snprintf(r->nvml_reason, sizeof(r->nvml_reason), "%s", row->reason);
    }
    return 0;
}

/* The CUDA backend's rows: kernel context ids, metrics, external
 * correlations and the capability matrix (set, not added). */
static void test_gpu_rows_round_trip(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *handle = open_write(dir);
    assert_int_equal(store_begin(handle), 0);
    store_kernel_row kernel = {.pid = 7,
                               .device = 0,
                               .stream_id = 3,
                               .correlation_id = 11,
                               .name = "k",
                               .start_ns = 100,
                               .end_ns = 200,
                               .context_id = 99};
    assert_int_equal(store_put_kernel(handle, &kernel), 0);
    const int64_t power[] = {70000, 90000, 80000};
    for (int i = 0; i < 3; i++) {
        store_metric_row metric = {.pid = 7,
                                   .device = 0,
                                   .name = "power_mw",
                                   .time_ns = 1000 + (uint64_t)i,
                                   .value = power[i]};
        assert_int_equal(store_put_metric(handle, &metric), 0);
    }
    store_metric_row launches = {
        .pid = 7, .device = -1, .name = "host_kernel_launches", .time_ns = 5000, .value = 12};
    assert_int_equal(store_put_metric(handle, &launches), 0);
    assert_int_equal(store_put_external_correlation(handle, 7, 11, 2, 123456789012ull), 0);
    assert_int_equal(store_set_capability(handle, 7, "nvml", 1, "active", "first"), 0);
    assert_int_equal(store_set_capability(handle, 7, "nvml", 1, "unavailable", "NVML: gone"), 0);
    assert_int_equal(store_set_capability(handle, 7, "kernels", 1, "active", "CUPTI"), 0);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);

    assert_int_equal(sql_int(dir, "SELECT context_id FROM kernels"), 99);
    assert_int_equal(sql_int(dir, "SELECT external_id FROM external_correlations "
                                  "WHERE correlation_id = 11 AND external_kind = 2"),
                     123456789012ll);
    handle = open_read(dir);
    gpu_readback r = {0};
    assert_int_equal(store_read_metric_stats(handle, collect_metric, &r), 0);
    assert_int_equal(r.metric_rows, 2);
    assert_int_equal(r.power_min, 70000);
    assert_int_equal(r.power_max, 90000);
    assert_true(r.power_mean > 79999.0 && r.power_mean < 80001.0);
    assert_int_equal(store_read_capabilities(handle, collect_capability, &r), 0);
    assert_int_equal(r.capability_rows, 2);
    assert_string_equal(r.nvml_status, "unavailable");
    assert_string_equal(r.nvml_reason, "NVML: gone");
    store_close(handle);
    remove_dir(dir);
}

/* ---- CUDA graphs and the PM summary ---- */

typedef struct graph_readback {
    int rows;
    uint64_t launches, kernels, nodes, copies;
    char launched_from[128];
} graph_readback;

static int collect_graph(const store_graph_row *row, void *user)
{
    graph_readback *r = user;
    r->rows++;
    r->launches = row->launches;
    r->kernels = row->kernels;
    r->nodes = row->kernel_nodes;
    r->copies = row->copies;
    snprintf(r->launched_from, sizeof(r->launched_from), "%s", row->launched_from);
    return 0;
}

static void test_graph_rows_round_trip(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *handle = open_write(dir);
    assert_int_equal(store_begin(handle), 0);
    for (uint64_t launch = 0; launch < 3; launch++) {
        for (uint64_t node = 1; node <= 2; node++) {
            store_kernel_row kernel = {.pid = 7,
                                       .correlation_id = 40 + launch,
                                       .name = "node_kernel",
                                       .start_ns = 100 * launch + node,
                                       .end_ns = 100 * launch + node + 10,
                                       .graph_id = 5,
                                       .graph_node_id = (1ull << 40) + node};
            assert_int_equal(store_put_kernel(handle, &kernel), 0);
        }
        store_copy_row set = {.pid = 7,
                              .correlation_id = 40 + launch,
                              .is_memset = 1,
                              .bytes = 64,
                              .graph_id = 5,
                              .graph_node_id = 3};
        assert_int_equal(store_put_copy(handle, &set), 0);
        store_graph_launch_row row = {.pid = 7,
                                      .correlation_id = 40 + launch,
                                      .thread_id = 8,
                                      .time_ns = 100 * launch,
                                      .graph_exec = 0xabc,
                                      .scope_instance_id = launch < 2 ? 9 : 0,
                                      .scope_name = launch < 2 ? "step" : NULL};
        assert_int_equal(store_put_graph_launch(handle, &row), 0);
    }
    store_kernel_row alone = {.pid = 7, .correlation_id = 50, .name = "alone", .end_ns = 5};
    assert_int_equal(store_put_kernel(handle, &alone), 0);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);

    assert_int_equal(sql_int(dir, "SELECT MAX(graph_node_id) FROM kernels"), (1ll << 40) + 2);
    assert_int_equal(sql_int(dir, "SELECT graph_id FROM kernels WHERE correlation_id = 50"), 0);
    assert_int_equal(sql_int(dir, "SELECT COUNT(*) FROM graph_launches WHERE scope_name IS NULL "
                                  "AND scope_instance_id IS NULL"),
                     1);
    handle = open_read(dir);
    graph_readback r = {0};
    assert_int_equal(store_read_graphs(handle, collect_graph, &r), 0);
    assert_int_equal(r.rows, 1); /* one graph, one kernel name */
    assert_int_equal(r.launches, 3);
    assert_int_equal(r.kernels, 6);
    assert_int_equal(r.nodes, 2);
    assert_int_equal(r.copies, 3);
    assert_string_equal(r.launched_from, "step x2, (no range) x1");
    store_close(handle);
    remove_dir(dir);
}

typedef struct pm_readback {
    int rows;
    double heavy_sum, heavy_mean;
    uint64_t heavy_samples, heavy_flagged;
    char first_range[64];
} pm_readback;

static int collect_pm(const store_pm_summary_row *row, void *user)
{
    pm_readback *r = user;
    if (r->rows++ == 0)
        snprintf(r->first_range, sizeof(r->first_range), "%s", row->range);
    if (strcmp(row->range, "heavy") == 0 && strcmp(row->metric, "dram_bytes") == 0) {
        r->heavy_sum = row->sum;
        r->heavy_mean = row->mean;
        r->heavy_samples = row->samples;
        r->heavy_flagged = row->flagged;
    }
    return 0;
}

/* The H200's first sample of a window covered the 871 us from arming and
 * carried 1.3e12 bytes (flag 8): no sum or mean may take it. */
static void test_pm_summary_leaves_flagged_samples_out(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *handle = open_write(dir);
    assert_int_equal(store_begin(handle), 0);
    const struct {
        uint32_t flags;
        const char *scope;
        double value;
    } samples[] = {{8, "heavy", 1.3e12}, {0, "heavy", 1.2e6}, {0, "heavy", 1.2e6},
                   {2, "heavy", 9e9},    {0, "heavy", 1.2e6}, {0, "attention", 5e5}};
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        store_pm_row row = {.pid = 7,
                            .window_id = 1,
                            .sample_index = i,
                            .start_ns = 1000 * i,
                            .end_ns = 1000 * i + 1000,
                            .has_scope = 1,
                            .scope_instance_id = samples[i].scope[0] == 'h' ? 3 : 4,
                            .scope_name = samples[i].scope,
                            .flags = samples[i].flags,
                            .metric = "dram_bytes",
                            .value = samples[i].value};
        assert_int_equal(store_put_pm_samples(handle, &row, 1), 0);
    }
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);

    handle = open_read(dir);
    pm_readback r = {0};
    assert_int_equal(store_read_pm_summary(handle, collect_pm, &r), 0);
    assert_int_equal(r.rows, 2);
    assert_string_equal(r.first_range, "heavy"); /* the range with the most samples first */
    assert_int_equal(r.heavy_samples, 3);
    assert_int_equal(r.heavy_flagged, 2);
    assert_true(r.heavy_sum > 3.6e6 - 1 && r.heavy_sum < 3.6e6 + 1);
    assert_true(r.heavy_mean > 1.2e6 - 1 && r.heavy_mean < 1.2e6 + 1);
    store_close(handle);
    remove_dir(dir);
}

static void test_limit_and_early_stop(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    write_round_trip(writer);
    store_close(writer);

    store *reader = open_read(dir);
    duration_list limited = {0};
    assert_int_equal(store_read_kernel_stats(reader, 2, collect_durations, &limited), 0);
    assert_int_equal(limited.count, 2);
    assert_string_equal(limited.names[0], "big");
    assert_string_equal(limited.names[1], "gemm");

    duration_list stopped = {.stop_after = 1};
    assert_int_equal(store_read_kernel_stats(reader, 0, collect_durations, &stopped), 0);
    assert_int_equal(stopped.count, 1);

    assert_int_equal(store_read_kernel_stats(reader, -1, collect_durations, &stopped),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_kernel_stats(reader, 0, NULL, NULL), FLARE_ERR_INVALID_ARGUMENT);
    store_close(reader);
    remove_dir(dir);
}

/* A writer reading its own open batch sees the rows still buffered. */
static void test_writer_reads_its_batch(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    assert_int_equal(store_begin(writer), 0);
    for (int i = 0; i < 5; i++)
        put_kernel(writer, "k", 100, 10, (uint64_t)i);

    store *reader = open_read(dir);
    store_session_summary summary;
    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_int_equal(summary.kernel_count, 0); /* not committed yet */

    assert_int_equal(store_read_session(writer, &summary), 0);
    assert_int_equal(summary.kernel_count, 5);
    assert_int_equal(store_commit(writer), 0);

    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_int_equal(summary.kernel_count, 5);
    store_close(reader);
    store_close(writer);
    remove_dir(dir);
}

static void test_session_without_session_row(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    put_kernel(writer, "k", 100, 10, 1);
    put_kernel(writer, "k", 200, 10, 2);
    assert_int_equal(store_session_end(writer, 5000, 0, 0), FLARE_ERR_STATE);
    assert_int_equal(store_process_end(writer, 42, 5000), FLARE_ERR_STATE);
    store_close(writer);

    store *reader = open_read(dir);
    store_session_summary summary;
    memset(&summary, 0x5a, sizeof summary);
    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_string_equal(summary.command, "");
    assert_int_equal(summary.end_ns, 0);
    assert_int_equal(summary.has_exit_status, 0);
    assert_int_equal(summary.kernel_count, 2);
    assert_int_equal(summary.process_count, 0);
    assert_int_equal(summary.schema_version, STORE_SCHEMA_VERSION);
    store_close(reader);
    remove_dir(dir);
}

/* ---- interning ---- */

static void test_interning(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    char long_name[301];
    memset(long_name, 'x', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';

    store *first = open_write(dir);
    store *second = open_write(dir);

    assert_int_equal(store_begin(first), 0);
    put_kernel(first, "alpha", 0, 1, 1);
    put_kernel(first, "beta", 0, 1, 2);
    put_kernel(first, long_name, 0, 1, 3);
    put_kernel(first, NULL, 0, 1, 4);
    assert_int_equal(store_commit(first), 0);

    assert_int_equal(store_begin(first), 0);
    put_kernel(first, "alpha", 0, 1, 5);
    put_scope(first, "alpha", 0, 0, 1, 0);
    assert_int_equal(store_commit(first), 0);

    /* The second handle has never seen these names; it must find them. */
    assert_int_equal(store_begin(second), 0);
    put_kernel(second, "beta", 0, 1, 6);
    put_kernel(second, "gamma", 0, 1, 7);
    put_kernel(second, "alpha", 0, 1, 8);
    put_kernel(second, long_name, 0, 1, 9);
    assert_int_equal(store_commit(second), 0);

    /* And the first must find the second's new name. */
    assert_int_equal(store_begin(first), 0);
    put_kernel(first, "gamma", 0, 1, 10);
    assert_int_equal(store_commit(first), 0);
    store_close(first);
    store_close(second);

    assert_int_equal(sql_int(dir, "SELECT count(*) FROM names"), 5);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM names WHERE name = ''"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels WHERE name_id NOT IN"
                                  " (SELECT id FROM names)"),
                     0);
    /* Every row of one name carries one id. */
    assert_int_equal(sql_int(dir, "SELECT max(ids) FROM (SELECT count(DISTINCT name_id) AS ids"
                                  " FROM kernels k JOIN names n ON n.id = k.name_id"
                                  " GROUP BY n.name)"),
                     1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels k JOIN names n ON n.id ="
                                  " k.name_id WHERE n.name = 'alpha'"),
                     3);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels k JOIN names n ON n.id ="
                                  " k.name_id WHERE n.name = 'gamma'"),
                     2);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels k JOIN names n ON n.id ="
                                  " k.name_id WHERE length(n.name) = 300"),
                     2);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM scopes s JOIN kernels k ON"
                                  " k.name_id = s.name_id WHERE k.correlation_id = 1"),
                     1);
    remove_dir(dir);
}

/* Enough names to grow the cache several times; each keeps its own id. */
static void test_interning_many_names(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    assert_int_equal(store_begin(writer), 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 3000; i++) {
            char name[32];
            snprintf(name, sizeof name, "kernel-%d", i);
            put_kernel(writer, name, 0, 1, (uint64_t)(round * 3000 + i));
        }
    }
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);

    assert_int_equal(sql_int(dir, "SELECT count(*) FROM names"), 3000);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels k JOIN names n ON n.id ="
                                  " k.name_id WHERE n.name = 'kernel-' || (k.correlation_id %"
                                  " 3000)"),
                     6000);
    remove_dir(dir);
}

/* ---- rollback ---- */

static void test_rollback_then_reinsert(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);

    assert_int_equal(store_begin(writer), 0);
    put_kernel(writer, "ghost", 0, 5, 1);
    for (int i = 0; i < 100; i++)
        put_kernel(writer, "ghost", 0, 5, (uint64_t)(2 + i));
    store_rollback(writer);
    store_rollback(writer); /* nothing open: harmless */

    /* "real" now takes the id "ghost" had in the rolled-back batch; a stale
     * cache would file the second ghost under "real". */
    assert_int_equal(store_begin(writer), 0);
    put_kernel(writer, "real", 0, 10, 200);
    put_kernel(writer, "ghost", 0, 5, 201);
    assert_int_equal(store_commit(writer), 0);

    assert_int_equal(store_commit(writer), FLARE_ERR_STATE);
    assert_int_equal(store_begin(writer), 0);
    assert_int_equal(store_begin(writer), FLARE_ERR_STATE);
    store_rollback(writer);
    store_close(writer);

    store *reader = open_read(dir);
    duration_list kernels = {0};
    assert_int_equal(store_read_kernel_stats(reader, 0, collect_durations, &kernels), 0);
    assert_int_equal(kernels.count, 2);
    assert_stats(&kernels, 0, "real", 1, 10, 10, 10, 10, 10);
    assert_stats(&kernels, 1, "ghost", 1, 5, 5, 5, 5, 5);
    store_close(reader);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 2);
    remove_dir(dir);
}

/*
 * Write failures injected with triggers. A block that fails to write loses
 * rows whose puts had succeeded, so the whole batch must fail; a row that
 * fails on its own (a log line here) fails alone.
 */
static void test_failed_block_fails_batch(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store_close(open_write(dir));
    sql_exec(dir, "CREATE TRIGGER abort_kernel BEFORE INSERT ON kernels"
                  " WHEN NEW.correlation_id = 666 BEGIN SELECT RAISE(ABORT, 'injected'); END;"
                  "CREATE TRIGGER abort_log BEFORE INSERT ON log"
                  " WHEN NEW.message = 'bad' BEGIN SELECT RAISE(ABORT, 'injected'); END");
    store *writer = open_write(dir);

    /* The failing row sits in a partial block: commit finds out. */
    assert_int_equal(store_begin(writer), 0);
    for (int i = 0; i < 10; i++)
        put_kernel(writer, "k", 0, 1, (uint64_t)i);
    put_kernel(writer, "k", 0, 1, 666);
    assert_int_equal(store_commit(writer), FLARE_ERR_STORE);
    assert_non_null(strstr(store_last_error(writer), dir));
    assert_non_null(strstr(store_last_error(writer), "injected"));
    store_kernel_row row = {.name = "k", .correlation_id = 1};
    assert_int_equal(store_put_kernel(writer, &row), FLARE_ERR_STORE);
    assert_int_equal(store_commit(writer), FLARE_ERR_STORE);
    store_rollback(writer);

    /* The failing row completes a block: its put finds out. */
    assert_int_equal(store_begin(writer), 0);
    for (int i = 0; i < 63; i++)
        put_kernel(writer, "k", 0, 1, (uint64_t)i);
    row.correlation_id = 666;
    assert_int_equal(store_put_kernel(writer, &row), FLARE_ERR_STORE);
    row.correlation_id = 1;
    assert_int_equal(store_put_kernel(writer, &row), FLARE_ERR_STORE);
    assert_int_equal(store_set_drops(writer, 1, "ring", "x", 1), FLARE_ERR_STORE);
    store_rollback(writer);

    /* A row that fails by itself leaves the batch usable. */
    assert_int_equal(store_begin(writer), 0);
    for (int i = 0; i < 5; i++)
        put_kernel(writer, "k", 0, 1, (uint64_t)i);
    assert_int_equal(store_put_log(writer, 1, 0, "info", "bad"), FLARE_ERR_STORE);
    assert_int_equal(store_put_log(writer, 1, 0, "info", "good"), 0);
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);

    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 5);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM log"), 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM drops"), 0);
    remove_dir(dir);
}

/* When SQLite rolls the transaction back by itself, later writes of the
 * batch must not slip into the database one by one, and ids of names the
 * batch inserted must be forgotten. */
static void test_sqlite_rollback_ends_batch(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store_close(open_write(dir));
    sql_exec(dir, "CREATE TRIGGER rollback_kernel BEFORE INSERT ON kernels"
                  " WHEN NEW.correlation_id = 777 BEGIN SELECT RAISE(ROLLBACK, 'injected'); END;"
                  "CREATE TRIGGER rollback_log BEFORE INSERT ON log"
                  " WHEN NEW.message = 'rollback' BEGIN SELECT RAISE(ROLLBACK, 'injected'); END");
    store *writer = open_write(dir);

    /* A row written at once (a log line) takes the batch down. */
    assert_int_equal(store_begin(writer), 0);
    put_kernel(writer, "k", 0, 1, 1);
    assert_int_equal(store_put_log(writer, 1, 0, "info", "rollback"), FLARE_ERR_STORE);
    store_kernel_row after = {.name = "k"};
    assert_int_equal(store_put_kernel(writer, &after), FLARE_ERR_STORE);
    store_rollback(writer);

    /* A block does too; the copy still buffered must not be written by a
     * reader's flush afterwards. */
    assert_int_equal(store_begin(writer), 0);
    put_copy(writer, 0, 1, 100, 10, 0);
    for (int i = 0; i < 63; i++)
        put_kernel(writer, "ghost", 0, 5, (uint64_t)i);
    store_kernel_row row = {.name = "ghost", .correlation_id = 777};
    assert_int_equal(store_put_kernel(writer, &row), FLARE_ERR_STORE);
    row.correlation_id = 1;
    assert_int_equal(store_put_kernel(writer, &row), FLARE_ERR_STORE);
    assert_int_equal(store_put_log(writer, 1, 0, "info", "after"), FLARE_ERR_STORE);
    store_session_summary summary;
    assert_int_equal(store_read_session(writer, &summary), 0);
    assert_int_equal(summary.copy_count, 0);
    assert_int_equal(summary.kernel_count, 0);
    assert_true(store_commit(writer) < 0);
    store_rollback(writer);

    assert_int_equal(store_begin(writer), 0);
    put_kernel(writer, "real", 0, 10, 1);
    put_kernel(writer, "ghost", 0, 5, 2);
    assert_int_equal(store_commit(writer), 0);
    store_close(writer);

    store *reader = open_read(dir);
    duration_list kernels = {0};
    assert_int_equal(store_read_kernel_stats(reader, 0, collect_durations, &kernels), 0);
    assert_int_equal(kernels.count, 2);
    assert_stats(&kernels, 0, "real", 1, 10, 10, 10, 10, 10);
    assert_stats(&kernels, 1, "ghost", 1, 5, 5, 5, 5, 5);
    store_close(reader);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM log"), 0);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM copies"), 0);
    remove_dir(dir);
}

/* Closing with a batch open drops the batch rather than half of it. */
static void test_close_drops_open_batch(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    assert_int_equal(store_begin(writer), 0);
    for (int i = 0; i < 100; i++)
        put_kernel(writer, "k", 0, 1, (uint64_t)i);
    store_close(writer);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 0);
    remove_dir(dir);
}

/* ---- open errors ---- */

static void expect_open_failure(const char *dir, store_open_mode mode, const char *needle)
{
    char path[TEST_PATH_MAX];
    db_path(path, dir);
    store *handle = (store *)&handle; /* must be reset to NULL */
    char error[1024];
    int status = store_open(dir, mode, &handle, error, sizeof error);
    assert_true(status < 0);
    assert_null(handle);
    if (strstr(error, path) == NULL || strstr(error, needle) == NULL)
        print_error("message \"%s\" lacks \"%s\" or \"%s\"\n", error, path, needle);
    assert_non_null(strstr(error, path));
    assert_non_null(strstr(error, needle));
    /* The error buffer is optional. */
    assert_true(store_open(dir, mode, &handle, NULL, 0) < 0);
}

static void test_read_missing_dir(void **state)
{
    (void)state;
    char parent[TEST_PATH_MAX];
    make_dir(parent);
    char dir[TEST_PATH_MAX];
    join_path(dir, parent, "absent");
    expect_open_failure(dir, STORE_OPEN_READ, "no session database at");
    assert_false(path_exists(dir));
    remove_dir(parent);
}

static void test_read_missing_file(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    char path[TEST_PATH_MAX];
    db_path(path, dir);
    expect_open_failure(dir, STORE_OPEN_READ, "no session database at");
    store *handle = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, NULL, 0), FLARE_ERR_NOT_FOUND);
    assert_false(path_exists(path));
    assert_int_equal(rmdir(dir), 0); /* nothing at all was created */
}

static void test_read_empty_file(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    char path[TEST_PATH_MAX];
    db_path(path, dir);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fclose(file);
    expect_open_failure(dir, STORE_OPEN_READ, "is not a flare session database");
    struct stat info;
    assert_int_equal(stat(path, &info), 0);
    assert_int_equal(info.st_size, 0);
    remove_dir(dir);
}

static void test_read_garbage_file(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    char path[TEST_PATH_MAX];
    db_path(path, dir);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    unsigned seed = 20240601;
    for (int i = 0; i < 8192; i++)
        fputc(rand_r(&seed) & 0xff, file);
    fclose(file);
    expect_open_failure(dir, STORE_OPEN_READ, "file is not a database");
    expect_open_failure(dir, STORE_OPEN_WRITE, "file is not a database");
    remove_dir(dir);
}

static void test_read_foreign_database(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    sql_exec(dir, "CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1)");
    expect_open_failure(dir, STORE_OPEN_READ, "is not a flare session database");
    /* Nor may the writer move into someone else's database. */
    expect_open_failure(dir, STORE_OPEN_WRITE, "is not a flare session database");
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM sqlite_schema"), 1);
    remove_dir(dir);

    /* A table called meta is not enough. */
    make_dir(dir);
    sql_exec(dir, "CREATE TABLE meta (a, b); INSERT INTO meta VALUES (1, 2)");
    expect_open_failure(dir, STORE_OPEN_READ, "is not a flare session database");
    remove_dir(dir);

    make_dir(dir);
    sql_exec(dir, "CREATE TABLE meta (key TEXT, value);"
                  "INSERT INTO meta VALUES ('schema_version', 1), ('created_by', 'other')");
    expect_open_failure(dir, STORE_OPEN_READ, "is not a flare session database");
    remove_dir(dir);
}

static void test_read_wrong_schema_version(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    store_close(writer);
    sql_exec(dir, "UPDATE meta SET value = 99 WHERE key = 'schema_version'");

    char expected[96];
    snprintf(expected, sizeof(expected),
             "has schema version 99; this flare reads versions %d to %d",
             STORE_SCHEMA_VERSION_OLDEST, STORE_SCHEMA_VERSION);
    expect_open_failure(dir, STORE_OPEN_READ, expected);
    expect_open_failure(dir, STORE_OPEN_WRITE, "has schema version 99");
    store *handle = NULL;
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &handle, NULL, 0), FLARE_ERR_UNSUPPORTED);
    remove_dir(dir);
}

static void test_write_missing_dir(void **state)
{
    (void)state;
    char parent[TEST_PATH_MAX];
    make_dir(parent);
    char dir[TEST_PATH_MAX];
    join_path(dir, parent, "absent");
    expect_open_failure(dir, STORE_OPEN_WRITE, "session directory");
    assert_false(path_exists(dir));
    remove_dir(parent);
}

static void test_read_handle_refuses_writes(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store_close(open_write(dir));
    store *reader = open_read(dir);
    assert_int_equal(store_begin(reader), FLARE_ERR_STATE);
    store_kernel_row row = {.name = "k"};
    assert_int_equal(store_put_kernel(reader, &row), FLARE_ERR_STATE);
    assert_non_null(strstr(store_last_error(reader), dir));
    assert_int_equal(store_set_drops(reader, 1, "ring", "x", 1), FLARE_ERR_STATE);
    store_rollback(reader);
    store_close(reader);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 0);
    remove_dir(dir);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    assert_non_null(store_last_error(NULL));
    store *handle = NULL;
    char error[256];
    assert_int_equal(store_open(NULL, STORE_OPEN_READ, &handle, error, sizeof error),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_true(strlen(error) > 0);
    assert_int_equal(store_open("/tmp", STORE_OPEN_READ, NULL, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_begin(NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_put_kernel(NULL, NULL), FLARE_ERR_INVALID_ARGUMENT);
    store_close(NULL);
    store_rollback(NULL);

    char dir[TEST_PATH_MAX];
    make_dir(dir);
    handle = open_write(dir);
    assert_non_null(store_last_error(handle));
    assert_int_equal(store_put_kernel(handle, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_read_session(handle, NULL), FLARE_ERR_INVALID_ARGUMENT);
    store_close(handle);
    remove_dir(dir);
}

/* ---- several writers ---- */

/* Two handles on one database, as two processes of a session would be. */
static void test_two_handles_interleaved(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *first = open_write(dir);
    store *second = open_write(dir);
    assert_int_equal(store_process_begin(first, 1, 0, 0, "sim", "one"), 0);
    assert_int_equal(store_process_begin(second, 2, 1, 0, "sim", "two"), 0);
    for (int batch = 0; batch < 10; batch++) {
        assert_int_equal(store_begin(first), 0);
        for (int i = 0; i < 100; i++)
            put_kernel(first, "from-first", 0, 2, (uint64_t)(batch * 100 + i));
        put_kernel(first, "shared", 0, 1, 0);
        assert_int_equal(store_commit(first), 0);

        assert_int_equal(store_begin(second), 0);
        for (int i = 0; i < 100; i++)
            put_kernel(second, "from-second", 0, 3, (uint64_t)(batch * 100 + i));
        put_kernel(second, "shared", 0, 1, 0);
        assert_int_equal(store_commit(second), 0);
    }
    store_close(first);
    store_close(second);

    store *reader = open_read(dir);
    store_session_summary summary;
    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_int_equal(summary.kernel_count, 2020);
    assert_int_equal(summary.process_count, 2);
    duration_list kernels = {0};
    assert_int_equal(store_read_kernel_stats(reader, 0, collect_durations, &kernels), 0);
    assert_int_equal(kernels.count, 3);
    assert_stats(&kernels, 0, "from-second", 1000, 3000, 3, 3, 3, 3);
    assert_stats(&kernels, 1, "from-first", 1000, 2000, 2, 2, 2, 2);
    assert_stats(&kernels, 2, "shared", 20, 20, 1, 1, 1, 1);
    store_close(reader);
    remove_dir(dir);
}

#define FORK_WRITERS 4
#define FORK_BATCHES 20
#define FORK_ROWS    300

/*
 * Real processes, released at once onto a database that does not exist yet:
 * schema creation must be race-free and every batch must land.
 */
static void test_processes_write_concurrently(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    pid_t children[FORK_WRITERS];
    for (int child = 0; child < FORK_WRITERS; child++) {
        children[child] = fork();
        assert_true(children[child] >= 0);
        if (children[child] == 0) {
            close(gate[1]);
            char byte;
            (void)!read(gate[0], &byte, 1); /* returns at EOF: all released */
            store *handle = NULL;
            char error[1024];
            if (store_open(dir, STORE_OPEN_WRITE, &handle, error, sizeof error) != 0) {
                fprintf(stderr, "child %d: %s\n", child, error);
                _exit(1);
            }
            char name[32];
            snprintf(name, sizeof name, "child-%d", child);
            int failed = store_process_begin(handle, 100 + child, 1, 0, "sim", name) != 0;
            for (int batch = 0; batch < FORK_BATCHES && !failed; batch++) {
                failed |= store_begin(handle) != 0;
                for (int i = 0; i < FORK_ROWS && !failed; i++) {
                    store_kernel_row row = {.pid = 100 + child,
                                            .name = i % 2 ? name : "shared",
                                            .start_ns = 0,
                                            .end_ns = 1};
                    failed |= store_put_kernel(handle, &row) != 0;
                }
                failed |= store_commit(handle) != 0;
            }
            if (failed)
                fprintf(stderr, "child %d: %s\n", child, store_last_error(handle));
            store_close(handle);
            _exit(failed ? 1 : 0);
        }
    }
    close(gate[0]);
    close(gate[1]);
    for (int child = 0; child < FORK_WRITERS; child++) {
        int wait_status = 0;
        assert_int_equal(waitpid(children[child], &wait_status, 0), children[child]);
        assert_true(WIFEXITED(wait_status));
        assert_int_equal(WEXITSTATUS(wait_status), 0);
    }

    store *reader = open_read(dir);
    store_session_summary summary;
    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_int_equal(summary.kernel_count, FORK_WRITERS * FORK_BATCHES * FORK_ROWS);
    assert_int_equal(summary.process_count, FORK_WRITERS);
    store_close(reader);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM names"), FORK_WRITERS + 1);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels k JOIN names n ON n.id ="
                                  " k.name_id WHERE n.name = 'shared'"),
                     FORK_WRITERS * FORK_BATCHES * FORK_ROWS / 2);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM meta"), 2);
    remove_dir(dir);
}

/* A writer killed mid-batch leaves every committed batch readable. */
static void test_sigkill_keeps_committed(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        store *handle = NULL;
        if (store_open(dir, STORE_OPEN_WRITE, &handle, NULL, 0) != 0)
            _exit(1);
        for (int batch = 0; batch < 3; batch++) {
            if (store_begin(handle) != 0)
                _exit(1);
            for (int i = 0; i < 100; i++) {
                store_kernel_row row = {.name = "kept", .end_ns = 4};
                if (store_put_kernel(handle, &row) != 0)
                    _exit(1);
            }
            if (store_commit(handle) != 0)
                _exit(1);
        }
        if (store_begin(handle) != 0)
            _exit(1);
        for (int i = 0; i < 200; i++) {
            store_kernel_row row = {.name = "lost", .end_ns = 4};
            if (store_put_kernel(handle, &row) != 0)
                _exit(1);
        }
        raise(SIGKILL);
        _exit(1);
    }
    int wait_status = 0;
    assert_int_equal(waitpid(child, &wait_status, 0), child);
    assert_true(WIFSIGNALED(wait_status));
    assert_int_equal(WTERMSIG(wait_status), SIGKILL);

    store *reader = open_read(dir);
    duration_list kernels = {0};
    assert_int_equal(store_read_kernel_stats(reader, 0, collect_durations, &kernels), 0);
    assert_int_equal(kernels.count, 1);
    assert_stats(&kernels, 0, "kept", 300, 1200, 4, 4, 4, 4);
    store_close(reader);

    /* The session can be appended to afterwards. */
    store *writer = open_write(dir);
    put_kernel(writer, "after", 0, 1, 1);
    store_close(writer);
    assert_int_equal(sql_int(dir, "SELECT count(*) FROM kernels"), 301);
    remove_dir(dir);
}

/* Once the last writer has closed, SQLite has removed -wal and -shm; a
 * read-only open must still work. */
static void test_read_after_writer_closed(void **state)
{
    (void)state;
    char dir[TEST_PATH_MAX];
    make_dir(dir);
    store *writer = open_write(dir);
    put_kernel(writer, "k", 0, 1, 1);
    store_close(writer);

    char shm[TEST_PATH_MAX];
    join_path(shm, dir, STORE_DATABASE_NAME "-shm");
    assert_false(path_exists(shm));
    store *reader = open_read(dir);
    store_session_summary summary;
    assert_int_equal(store_read_session(reader, &summary), 0);
    assert_int_equal(summary.kernel_count, 1);
    store_close(reader);
    remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_gpu_rows_round_trip),
        cmocka_unit_test(test_limit_and_early_stop),
        cmocka_unit_test(test_writer_reads_its_batch),
        cmocka_unit_test(test_session_without_session_row),
        cmocka_unit_test(test_interning),
        cmocka_unit_test(test_interning_many_names),
        cmocka_unit_test(test_rollback_then_reinsert),
        cmocka_unit_test(test_failed_block_fails_batch),
        cmocka_unit_test(test_sqlite_rollback_ends_batch),
        cmocka_unit_test(test_close_drops_open_batch),
        cmocka_unit_test(test_read_missing_dir),
        cmocka_unit_test(test_read_missing_file),
        cmocka_unit_test(test_read_empty_file),
        cmocka_unit_test(test_read_garbage_file),
        cmocka_unit_test(test_read_foreign_database),
        cmocka_unit_test(test_read_wrong_schema_version),
        cmocka_unit_test(test_graph_rows_round_trip),
        cmocka_unit_test(test_pm_summary_leaves_flagged_samples_out),
        cmocka_unit_test(test_write_missing_dir),
        cmocka_unit_test(test_read_handle_refuses_writes),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_two_handles_interleaved),
        cmocka_unit_test(test_processes_write_concurrently),
        cmocka_unit_test(test_sigkill_keeps_committed),
        cmocka_unit_test(test_read_after_writer_closed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
