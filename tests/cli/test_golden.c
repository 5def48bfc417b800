/*
 * test_golden.c: `flare report` (text, json and csv) and `flare export`
 * byte for byte against saved outputs in tests/cli/golden/, so that a
 * change to how the CLI is put together (its files, its tables of sections
 * and formats) can be proved to change nothing a user sees. The one thing
 * masked is this flare's version in the report's json and csv (VERSION):
 * a release must not need new golden files.
 *
 * Four sessions are crafted through the store API, every value fixed (no
 * clock, no pid, no host name of this machine): "full" has a row for every
 * branch the report and the exports take (hostile and long names, every
 * copy kind and an unknown one, failed copies, counters, metrics, rules,
 * windows of every kind, drops, capabilities, replayed and declined
 * launches, spans replayed, declined and lost); "empty" has a session and
 * nothing else; "pm" a range replay by PM sampling, whose values carry
 * notes (method, status, error bound: schema 16); "broken" is "full" with
 * some tables dropped, so the error paths print what they print ("broken3"
 * also lacks replay_value_methods, as sessions before schema 16 do). Each
 * case's stdout, stderr and exit status must equal its golden file.
 *
 * The golden files are the outputs of the CLI as it was when this test was
 * written. A change meant to alter the output rewrites them with
 * FLARE_GOLDEN_UPDATE=1 (the test then passes and the diff is reviewed);
 * a change not meant to must never need that. Runs the built flare
 * (FLARE_TEST_BIN_DIR) in child processes, in a scratch directory, with
 * relative session paths so the output does not depend on where it runs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include "flare/flare.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_triggered.h"
#include "store/store_pm.h"
#include "store/store_replay.h"
#include "cli_run.h"
#include "test_util.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/cli/golden (set by tests/cli/CMakeLists.txt)"
#endif

static char bin_dir[1024];
static char scratch[256];
static char small_out[256];
static char small_err[256];

#define ORIGIN     5000000000000ull      /* the sessions' start, flare clock */
#define UNIX_START 1767225600000000000ll /* 2026-01-01 00:00:00 UTC */
#define PID        31337
#define CHILD_PID  31338

/* ---- crafting ---- */

static store *open_session(const char *name)
{
    char dir[600], error[1024];
    snprintf(dir, sizeof(dir), "%s/%s", scratch, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    store *database = NULL;
    if (store_open(dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != 0)
        fail_msg("store_open %s: %s", dir, error);
    store_session_info info = {
        .command = "train.py --epochs 3 \"quoted, with\ttab\"",
        .start_ns = ORIGIN,
        .start_unix_ns = UNIX_START,
        .host = "golden-host",
        .flare_version = "0.0.0-golden",
    };
    assert_int_equal(store_session_begin(database, &info), 0);
    return database;
}

static const char *const kernel_names[] = {
    "void gemm<float, 128>(float const*, float const*, float*, int)",
    "say \"hi\", twice",
    "back\\slash",
    "line1\nline2",
    "bad \xC3\x28 utf8 \x01",
    "caf\xC3\xA9 \xE6\x97\xA5",
    "a_kernel_name_that_is_exactly_long_enough_to_run_past_sixty_columns_of_the_table",
    "saxpy",
    "reduce_sum",
    "stencil_3pt",
    "transpose",
    "softmax",
};
#define KERNEL_NAME_COUNT (sizeof(kernel_names) / sizeof(kernel_names[0]))

static void put_kernels(store *database)
{
    for (size_t name = 0; name < KERNEL_NAME_COUNT; name++) {
        /* Launches per name and their lengths differ, so the order by total
         * time, the percentiles and --top all have something to do. */
        size_t launches = 1 + (name * 7) % 5;
        for (size_t launch = 0; launch < launches; launch++) {
            uint64_t start = ORIGIN + 1000 + name * 100000 + launch * 9000;
            store_kernel_row row = {
                .pid = name == 5 ? CHILD_PID : PID,
                .device = (int)(name % 2),
                .stream_id = name == 3 ? 0x100000007ull : 13 + launch % 2,
                .correlation_id =
                    name == 1 && launch == 0 ? UINT64_MAX - 1 : 500 + name * 10 + launch,
                .name = kernel_names[name],
                .start_ns = start,
                .end_ns = start + 1500 + name * 977 + launch * launch * 311,
                .grid = {(uint32_t)(name + 1), (uint32_t)launch + 1, 1},
                .block = {256, 1, (uint32_t)name % 3 + 1},
                .shared_memory_bytes = (uint32_t)(1024 * name),
                .registers_per_thread = (uint32_t)(32 + name),
            };
            if (name == 4 && launch == 0)
                row.end_ns = row.start_ns - 5; /* damaged: an end before its start */
            assert_int_equal(store_put_kernel(database, &row), 0);
        }
    }
}

static void put_copies(store *database)
{
    /* pid, device, stream, correlation, is_memset, kind, bytes, start, end, status, graph,
     * node */
    const store_copy_row copies[] = {
        {PID, 0, 13, 900, 0, 1, 4096, ORIGIN + 50, ORIGIN + 950, 0, 0, 0},
        {PID, 0, 13, 901, 0, 1, 8ull << 20, ORIGIN + 2000, ORIGIN + 9000, 0, 0, 0},
        {PID, 1, 14, 902, 0, 2, 1500, ORIGIN + 3000, ORIGIN + 3100, 0, 0, 0},
        {PID, 1, 14, 903, 0, 3, 20ull << 30, ORIGIN + 4000, ORIGIN + 40000000, 0, 0, 0},
        {PID, 0, 13, 904, 0, 4, 64, ORIGIN + 5000, ORIGIN + 5020, 0, 0, 0},
        {PID, 0, 13, 905, 0, 0, 77, ORIGIN + 6000, ORIGIN + 6030, 0, 0, 0},
        {PID, 0, 0x100000007ull, 906, 1, 0, 1 << 16, ORIGIN + 7000, ORIGIN + 7500, 0, 0, 0},
        {PID, 0, 13, 907, 0, 2, 10, ORIGIN + 8000, ORIGIN + 8040, FLARE_ERR_IO, 0, 0},
        {CHILD_PID, 0, 13, 908, 1, 0, 12, ORIGIN + 8100, ORIGIN + 8090, FLARE_ERR_IO, 0, 0},
    };
    for (size_t i = 0; i < sizeof(copies) / sizeof(copies[0]); i++)
        assert_int_equal(store_put_copy(database, &copies[i]), 0);
}

/* Two CUDA graphs: graph 4 launched twice (once under a range, once with
 * none open), two kernel nodes and a memset node; graph 9 once, its launch
 * not recorded. */
static void put_graphs(store *database)
{
    for (uint64_t launch = 0; launch < 3; launch++) {
        uint32_t graph = launch < 2 ? 4 : 9;
        uint64_t correlation = 7000 + launch;
        uint64_t start = ORIGIN + 900000 + launch * 50000;
        for (uint64_t node = 1; node <= (graph == 4 ? 2u : 1u); node++) {
            store_kernel_row row = {.pid = PID,
                                    .stream_id = 21,
                                    .correlation_id = correlation,
                                    .name = node == 1 ? "graph_gemm" : "graph_relu",
                                    .start_ns = start + node * 10000,
                                    .end_ns = start + node * 10000 + 4000 * node + launch,
                                    .grid = {8, 1, 1},
                                    .block = {128, 1, 1},
                                    .graph_id = graph,
                                    .graph_node_id = 100 + node};
            assert_int_equal(store_put_kernel(database, &row), 0);
        }
        if (graph == 4) {
            store_copy_row set = {.pid = PID,
                                  .stream_id = 21,
                                  .correlation_id = correlation,
                                  .is_memset = 1,
                                  .bytes = 256,
                                  .start_ns = start,
                                  .end_ns = start + 900,
                                  .graph_id = graph,
                                  .graph_node_id = 103};
            assert_int_equal(store_put_copy(database, &set), 0);
        }
        if (launch == 2)
            continue;
        store_graph_launch_row row = {.pid = PID,
                                      .correlation_id = correlation,
                                      .thread_id = 4242,
                                      .time_ns = start - 2000,
                                      .stream_id = 21,
                                      .graph_exec = 0x7f0000001000ull,
                                      .scope_instance_id = launch == 0 ? 77 : 0,
                                      .scope_name = launch == 0 ? "capture_step" : NULL};
        assert_int_equal(store_put_graph_launch(database, &row), 0);
    }
}

/* PM samples of window 1: a flagged outlier first (left out of every sum),
 * two ranges, one sample no range covered and one of a range still open. */
static void put_pm_samples(store *database)
{
    const struct {
        uint32_t flags;
        int has_scope;
        const char *scope;
        double value;
    } samples[] = {{8, 1, "forward", 1.3e12}, {0, 1, "forward", 1.25e6}, {0, 1, "forward", 1.5e6},
                   {0, 1, "backward", 2e6},   {0, 0, NULL, 7e5},         {0, 1, NULL, 3e5}};
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++)
        for (int metric = 0; metric < 2; metric++) {
            store_pm_row row = {.pid = PID,
                                .window_id = 1,
                                .sample_index = i,
                                .start_ns = ORIGIN + 20000 + 100000 * i,
                                .end_ns = ORIGIN + 120000 + 100000 * i,
                                .has_scope = samples[i].has_scope,
                                .scope_instance_id = samples[i].has_scope ? 60 + i : 0,
                                .scope_name = samples[i].scope,
                                .flags = samples[i].flags,
                                .metric = metric == 0 ? "dram__bytes_read.sum" : "sm__busy.pct",
                                .value = metric == 0 ? samples[i].value : 10.0 * (double)i};
            assert_int_equal(store_put_pm_samples(database, &row, 1), 0);
        }
}

static void put_scopes(store *database)
{
    const struct {
        int64_t pid, thread;
        const char *name;
        uint32_t depth;
        uint64_t start, length;
        int still_open;
    } scopes[] = {
        {PID, PID, "training", 0, 10, 9000000, 0},
        {PID, PID, "step", 1, 20, 400000, 0},
        {PID, PID, "step", 1, 500000, 610000, 0},
        {PID, PID, "step", 1, 1200000, 380000, 0},
        {PID, PID + 5, "loader, \"worker\"", 0, 30, 77777, 0},
        {PID, PID + 5, "a scope whose name is longer than the sixty columns the table gives it", 1,
         40, 1234, 0},
        {PID, PID + 6, "left open", 0, 8000000, 1000000, 1},
        {CHILD_PID, CHILD_PID, "child main", 0, 100, 5000, 0},
    };
    for (size_t i = 0; i < sizeof(scopes) / sizeof(scopes[0]); i++) {
        store_scope_row row = {
            .pid = scopes[i].pid,
            .thread_id = scopes[i].thread,
            .instance_id = i == 0 ? UINT64_MAX : 100 + i,
            .name = scopes[i].name,
            .depth = scopes[i].depth,
            .start_ns = ORIGIN + scopes[i].start,
            .end_ns = ORIGIN + scopes[i].start + scopes[i].length,
            .still_open = scopes[i].still_open,
        };
        assert_int_equal(store_put_scope(database, &row), 0);
    }
}

static void put_metrics(store *database)
{
    const store_metric_row metrics[] = {
        {PID, 0, "power_mw", ORIGIN + 100, 250000},
        {PID, 0, "power_mw", ORIGIN + 200, 310001},
        {PID, 0, "power_mw", ORIGIN + 300, 305500},
        {PID, 1, "temperature_c", ORIGIN + 150, 61},
        {PID, 1, "temperature_c", ORIGIN + 250, 64},
        {PID, -1, "launches", ORIGIN + 400, 12},
        {PID, -1, "launches", ORIGIN - 1500, -3}, /* before the session: a negative ts */
        {PID, -1, "external_correlation.1.101", ORIGIN + 500, 99},
        {CHILD_PID, 0, "sm_clock_mhz", ORIGIN + 600, 1410},
    };
    for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++)
        assert_int_equal(store_put_metric(database, &metrics[i]), 0);
}

static void put_counters(store *database)
{
    assert_int_equal(store_put_counter(database, PID, 0, "samples.seen"), 0);
    assert_int_equal(store_put_counter_sample(database, PID, 0, 100, 10), 0);
    assert_int_equal(store_put_counter_sample(database, PID, 0, 900, UINT64_MAX), 0);
    assert_int_equal(
        store_put_counter(database, PID, 1,
                          "a.counter.name.that.goes.on.and.on.past.the.sixty.column.field.width.of."
                          "the.report.and.on.past.ninety.six"),
        0);
    assert_int_equal(store_put_counter_sample(database, PID, 1, 500, 42), 0);
    assert_int_equal(store_put_counter(database, CHILD_PID, 0, "never.sampled"), 0);
}

static void put_rules_and_windows(store *database)
{
    const store_rule_row rules[] = {
        {.pid = PID,
         .rule_id = 1,
         .text = "kernel_launch_rate < 500/s for 2s",
         .canonical = "kernel_launch_rate < 500/s for 2s",
         .status = "fired",
         .times_true = 3,
         .windows_fired = 2,
         .busy_refusals = 1,
         .sequence = 1},
        {.pid = PID,
         .rule_id = 2,
         .text = "bogus > 3",
         .canonical = "",
         .status = "refused",
         .reason = "unknown metric 'bogus'",
         .sequence = 1},
        {.pid = CHILD_PID,
         .rule_id = 1,
         .text = "power_mw > 300000",
         .status = NULL,
         .stale_readings = 4,
         .missing_readings = 5,
         .sequence = 1},
    };
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++)
        assert_int_equal(store_put_rule(database, &rules[i]), 0);

    const store_window_row windows[] = {
        {.pid = PID,
         .id = 1,
         .token_kind = "rule",
         .label = "",
         .has_cause = 1,
         .rule_id = 1,
         .rule_text = "kernel_launch_rate < 500/s for 2s",
         .requested_ns = ORIGIN + 10,
         .opened_ns = ORIGIN + 20000,
         .closed_ns = ORIGIN + 2020000,
         .close_reason = "duration",
         .launches = 77,
         .engine = "sim-pm",
         .engine_status = "disarmed",
         .observed_partial = 1},
        {.pid = PID,
         .id = 2,
         .token_kind = "rule",
         .label = "rule label",
         .has_cause = 1,
         .rule_id = 1,
         .rule_text = "",
         .requested_ns = ORIGIN + 30,
         .opened_ns = 0,
         .closed_ns = 0,
         .close_reason = "refused",
         .engine = "none",
         .engine_status = "refused",
         .engine_reason = "another window is open"},
        {.pid = PID,
         .id = 3,
         .token_kind = "manual",
         .label = "a manual label long enough to be cut at forty-four columns",
         .requested_ns = ORIGIN + 40,
         .opened_ns = ORIGIN - 10,
         .closed_ns = ORIGIN + 15000000000ull,
         .close_reason = "manual",
         .launches = 5},
        {.pid = CHILD_PID,
         .id = 1,
         .token_kind = "scheduled",
         .label = "",
         .requested_ns = ORIGIN + 50,
         .opened_ns = ORIGIN + 60,
         .closed_ns = ORIGIN + 55,
         .close_reason = "session end"},
        {.pid = CHILD_PID, .id = 2, .token_kind = NULL, .label = NULL, .requested_ns = ORIGIN + 70},
    };
    for (size_t i = 0; i < sizeof(windows) / sizeof(windows[0]); i++)
        assert_int_equal(store_put_window(database, &windows[i]), 0);
}

/* Triggered replays: one that replayed alpha's launch 1 while window 1 was
 * open, one that range-replayed span 11, one declined by its budget (in
 * the child), one cancelled. */
static void put_triggered(store *database)
{
    const char *duration_rule = "kernel_duration_p99 > 10ms for 200ms over 1s action replay";
    const store_triggered_row rows[] = {
        {.pid = PID,
         .id = 1,
         .rule_id = 3,
         .rule_text = duration_rule,
         .comparison = ">",
         .threshold = 10e6,
         .observed_value = 21.6e6,
         .action = "replay",
         .target = "alpha<int>",
         .why = "its longest kernel over the threshold in the last 1000.0 ms: 21.600 ms",
         .fired_ns = ORIGIN + 30000,
         .taken_ns = ORIGIN + 100000,
         .done_ns = ORIGIN + 146500,
         .status = "replayed",
         .reason = "",
         .launch_id = 1},
        {.pid = PID,
         .id = 2,
         .rule_id = 4,
         .rule_text = "kernel_launch_rate > 20000/s for 1s action range step",
         .comparison = ">",
         .threshold = 20000,
         .observed_value = 31234.5,
         .action = "range",
         .target = "flare_replay_range",
         .why = "the rule's range",
         .fired_ns = ORIGIN + 1000000,
         .taken_ns = ORIGIN + 1100000,
         .done_ns = ORIGIN + 1157000,
         .status = "replayed",
         .reason = "",
         .launch_id = 11},
        {.pid = PID,
         .id = 3,
         .rule_id = 3,
         .rule_text = duration_rule,
         .comparison = ">",
         .threshold = 10e6,
         .observed_value = 12e6,
         .action = "replay",
         .target = "beta",
         .why = "its longest kernel over the threshold in the last 1000.0 ms: 12.000 ms",
         .fired_ns = ORIGIN + 9000000000ull,
         .done_ns = ORIGIN + 14000000000ull,
         .status = "cancelled",
         .reason = "the kernel was not launched again within deep_for (5s)"},
        {.pid = CHILD_PID,
         .id = 1,
         .rule_id = 1,
         .rule_text = "gpu0.utilization > 90% for 1s action replay replay_budget 10ms",
         .comparison = ">",
         .threshold = 90,
         .observed_value = 97.5,
         .action = "replay",
         .target = "gamma",
         .why = "the most GPU time in the last 1000.0 ms: 800.000 ms of 12 kernels",
         .fired_ns = ORIGIN + 5000000,
         .done_ns = ORIGIN + 5000000,
         .status = "declined",
         .reason = "replay budget 10ms spent (12.0 ms in triggered replays)"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        assert_int_equal(store_put_triggered_replay(database, &rows[i]), 0);
}

static void put_drops_and_capabilities(store *database)
{
    assert_int_equal(store_set_drops(database, PID, "storm_guard", "kernel launches untimed", 120),
                     0);
    assert_int_equal(store_set_drops(database, PID, "storm_guard", "copies untimed", 7), 0);
    assert_int_equal(store_set_drops(database, CHILD_PID, "storm_guard", "kernel launches", 3), 0);
    assert_int_equal(store_set_drops(database, PID, "ring", "thread 31342", 4096), 0);
    assert_int_equal(store_set_drops(database, PID, "replay", NULL, 1), 0);
    assert_int_equal(
        store_set_capability(database, PID, "kernels", 1, "active", "simulated device"), 0);
    assert_int_equal(store_set_capability(database, PID, "range_profiler", 1, "unavailable",
                                          "no NVIDIA driver: libcuda.so.1: cannot open"),
                     0);
    assert_int_equal(store_set_capability(database, CHILD_PID, "nvml", 0, "off", ""), 0);
}

/* One replay record; metrics as name=value pairs (NAN: not available). */
static replay_record *replay_launch(uint64_t launch_id, const char *kernel, uint64_t index)
{
    replay_record *record = calloc(1, sizeof(*record));
    assert_non_null(record);
    record->launch_id = launch_id;
    record->device = (int)(launch_id % 2);
    record->stream_id = 13;
    snprintf(record->kernel_name, sizeof(record->kernel_name), "%s", kernel);
    record->launch_index = index;
    record->passes_planned = 3;
    record->passes_run = 3;
    record->begin_ns = ORIGIN + 100000 * launch_id;
    record->end_ns = record->begin_ns + 45000 + 1000 * launch_id;
    record->drain_ns = 700 * launch_id;
    record->snapshot_bytes = 4096 * launch_id;
    record->shadow_on_device = (int)(launch_id % 2);
    record->restore_ns = 900;
    record->bytes_restored = 8192 * launch_id;
    record->pass_count_kept = 2;
    for (uint32_t pass = 0; pass < 2; pass++) {
        record->pass_start_ns[pass] = record->begin_ns + 1000 + pass * 20000;
        record->pass_end_ns[pass] = record->pass_start_ns[pass] + 15000 + pass * 333;
    }
    snprintf(record->collector, sizeof(record->collector), "sim-metrics");
    return record;
}

static void add_metric(replay_record *record, const char *name, double value)
{
    uint32_t at = record->metric_count++;
    snprintf(record->metric_names[at], sizeof(record->metric_names[at]), "%s", name);
    record->metric_values[at] = value;
}

static void decline(replay_record *record, const char *reason)
{
    record->declined = 1;
    record->passes_planned = 3;
    record->passes_run = 1;
    record->pass_count_kept = 0;
    record->metric_count = 0;
    record->snapshot_bytes = 0;
    record->collector[0] = '\0';
    snprintf(record->reason, sizeof(record->reason), "%s", reason);
}

static replay_record *replay_span(uint64_t span_id, const char *name, uint64_t occurrence)
{
    replay_record *record = replay_launch(span_id, name, occurrence);
    record->is_span = 1;
    record->span_id = span_id;
    record->span_kernels = 2;
    record->span_copies = 1;
    record->passes_planned = 4;
    record->passes_run = 4;
    return record;
}

static void put_replay(store *database)
{
    replay_record *records[32];
    size_t count = 0;
    /* Kernel "alpha": five launches, one declined, one with a note, one
     * short of its planned passes; five metrics, so the table wraps. */
    for (uint64_t launch = 1; launch <= 5; launch++) {
        replay_record *record = replay_launch(launch, "alpha<int>", launch * 2 - 1);
        add_metric(record, "gpu__time_duration.sum", 38000.0 + (double)launch);
        add_metric(record, "sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.345678 * launch);
        if (launch != 2)
            add_metric(record, "dram__bytes_read.sum", launch == 3 ? NAN : 1e16);
        add_metric(record, "launch__grid_size", 4096);
        if (launch >= 4)
            add_metric(record, "late.metric", -0.5);
        records[count++] = record;
    }
    decline(records[2], "the kernel's footprint is over --footprint-budget (3 MiB > 1 MiB)");
    snprintf(records[1]->reason, sizeof(records[1]->reason), "pass 3 ran long");
    records[3]->passes_run = 2;
    records[4]->pass_count_kept = 0;
    /* Kernel "beta": one declined launch, and a launch of a span whose
     * record was lost. */
    records[count] = replay_launch(6, "beta", 0);
    decline(records[count++], "graph launch");
    records[count] = replay_launch(7, "beta", 1);
    records[count]->span_id = 99;
    add_metric(records[count++], "gpu__time_duration.sum", 123);

    /* Spans: an explicit one with two kernels (one with a long name), a
     * declined one on no device that lost two of its three kernels, one
     * with no kernel, and one whose kernels have no metrics. */
    replay_record *span = replay_span(11, "flare_replay_range", 0);
    span->passes_planned = 5;
    snprintf(span->reason, sizeof(span->reason), "metrics from the last pass only");
    records[count++] = span;
    replay_record *kernel = replay_launch(12, "scale_add", 1);
    kernel->span_id = 11;
    add_metric(kernel, "gpu__time_duration.sum", 2500);
    add_metric(kernel, "a_metric_with_a_rather_long_name.sum", NAN);
    records[count++] = kernel;
    kernel = replay_launch(13,
                           "void very::long::namespace::kernel_name<with, template, arguments>"
                           "(float*, int)",
                           0);
    kernel->span_id = 11;
    add_metric(kernel, "gpu__time_duration.sum", 1234567.25);
    records[count++] = kernel;

    span = replay_span(21, "step", 2);
    span->device = -1;
    span->span_kernels = 3;
    decline(span, "memory allocated in the span (cudaMalloc)");
    records[count++] = span;
    kernel = replay_launch(22, "rmw_add", 4);
    kernel->span_id = 21;
    decline(kernel, "");
    records[count++] = kernel;

    span = replay_span(31, "empty step", 1);
    span->span_kernels = 0;
    span->span_copies = 0;
    span->snapshot_bytes = 0;
    span->collector[0] = '\0';
    span->pass_count_kept = 0;
    records[count++] = span;

    span = replay_span(41, "plain", 3);
    span->passes_planned = 0;
    records[count++] = span;
    kernel = replay_launch(42, "k", 0);
    kernel->span_id = 41;
    records[count++] = kernel;
    kernel = replay_launch(43, "kernel_two", 1);
    kernel->span_id = 41;
    records[count++] = kernel;

    assert_int_equal(replay_records_store(database, PID, records, count), 0);
    for (size_t i = 0; i < count; i++)
        free(records[i]);
}

static void make_full_session(const char *name)
{
    store *database = open_session(name);
    assert_int_equal(store_process_begin(database, PID, 1, ORIGIN, "sim", "/opt/my tools/train,v2"),
                     0);
    assert_int_equal(store_process_begin(database, CHILD_PID, PID, ORIGIN + 5, "sim", ""), 0);
    assert_int_equal(store_put_device(database, PID, 0, "Simulated \"GPU\" 0", "sim"), 0);
    assert_int_equal(store_put_device(database, PID, 1, "Second\\GPU", "sim"), 0);
    put_kernels(database);
    put_copies(database);
    put_graphs(database);
    put_pm_samples(database);
    put_scopes(database);
    put_metrics(database);
    put_counters(database);
    put_rules_and_windows(database);
    put_triggered(database);
    put_drops_and_capabilities(database);
    put_replay(database);
    assert_int_equal(store_session_end(database, ORIGIN + 12345678, 1, 3), 0);
    store_close(database);
}

/* A value's note (replay_value_note): how a PM-sampled span's value was
 * produced. bound NAN: none known. */
static void note(replay_record *record, const char *method, const char *status, double bound,
                 uint32_t samples)
{
    replay_value_note *value_note = &record->metric_notes[record->metric_count - 1];
    snprintf(value_note->method, sizeof(value_note->method), "%s", method);
    snprintf(value_note->status, sizeof(value_note->status), "%s", status);
    value_note->error_bound = bound;
    value_note->samples = samples;
    record->has_notes = 1;
}

/* A kernel of span "step" measured by PM sampling (every value with a
 * note): its time from its own times (kernel-activity), DRAM read and SM
 * throughput integrated from samples, its grid size not sampled. */
static replay_record *pm_kernel(uint64_t launch_id, const char *kernel, uint64_t index,
                                double time_ns, double time_bound)
{
    replay_record *record = replay_launch(launch_id, kernel, index);
    record->span_id = 51;
    snprintf(record->collector, sizeof(record->collector), "pm-sampling");
    add_metric(record, "gpu__time_duration.sum", time_ns);
    note(record, "kernel-activity", "measured", time_bound, 0);
    return record;
}

/* A session with range replay by PM sampling (schema 16's notes): span
 * "step" with four kernels (measured, flagged with an unbounded error,
 * below the minimum length, a zero value), and a launch of gemm replayed
 * on its own, whose values have no note. Kernels gemm and softmax have
 * rows, so the Perfetto export puts their values on their slices. */
static void make_pm_session(const char *name)
{
    store *database = open_session(name);
    assert_int_equal(store_process_begin(database, PID, 1, ORIGIN, "sim", "/usr/bin/python3"), 0);
    const char *const names[] = {"gemm<128>", "gemm<128>", "softmax"};
    for (uint64_t i = 0; i < 3; i++) {
        store_kernel_row row = {.pid = PID,
                                .device = 0,
                                .stream_id = 13,
                                .correlation_id = 700 + i,
                                .name = names[i],
                                .start_ns = ORIGIN + 10000 + i * 5000000,
                                .end_ns = ORIGIN + 10000 + i * 5000000 + 1250000,
                                .grid = {1024, 1, 1},
                                .block = {256, 1, 1}};
        assert_int_equal(store_put_kernel(database, &row), 0);
    }
    replay_record *records[8];
    size_t count = 0;
    replay_record *launch = replay_launch(50, "gemm<128>", 0);
    add_metric(launch, "gpu__time_duration.sum", 1251000);
    add_metric(launch, "dram__bytes_read.sum", 349000000);
    records[count++] = launch;

    replay_record *span = replay_span(51, "step", 1);
    span->span_kernels = 4;
    span->passes_planned = span->passes_run = 2;
    snprintf(span->collector, sizeof(span->collector), "pm-sampling");
    snprintf(span->reason, sizeof(span->reason),
             "PM sampling every 10us, 1 configurations: 2 kernels measured, 1 flagged, 0 "
             "uncovered, 0 untimed, 0 failed, 1 under 100us (no value); 9812 samples, 0 lost, 0 "
             "missing; 1 metrics not sampled");
    records[count++] = span;

    replay_record *kernel = pm_kernel(52, "gemm<128>", 1, 1250000, 2000);
    add_metric(kernel, "dram__bytes_read.sum", 348050000);
    note(kernel, "pm-sampling", "measured", 7300000, 125);
    add_metric(kernel, "sm__throughput.avg.pct_of_peak_sustained_elapsed", 36.2);
    note(kernel, "pm-sampling", "measured", 0.02, 125);
    add_metric(kernel, "launch__grid_size", NAN);
    note(kernel, "pm-sampling", "not-sampled", NAN, 0);
    records[count++] = kernel;

    kernel = pm_kernel(53, "softmax", 0, 420000, 1000);
    add_metric(kernel, "dram__bytes_read.sum", 120000000);
    note(kernel, "pm-sampling", "flagged", 9100000, 42);
    add_metric(kernel, "sm__throughput.avg.pct_of_peak_sustained_elapsed", 51.0);
    note(kernel, "pm-sampling", "flagged", INFINITY, 42);
    add_metric(kernel, "launch__grid_size", NAN);
    note(kernel, "pm-sampling", "not-sampled", NAN, 0);
    records[count++] = kernel;

    kernel = pm_kernel(54, "tiny_add", 0, 12000, 500);
    add_metric(kernel, "dram__bytes_read.sum", NAN);
    note(kernel, "pm-sampling", "below-minimum", NAN, 2);
    add_metric(kernel, "sm__throughput.avg.pct_of_peak_sustained_elapsed", NAN);
    note(kernel, "pm-sampling", "below-minimum", NAN, 2);
    add_metric(kernel, "launch__grid_size", NAN);
    note(kernel, "pm-sampling", "not-sampled", NAN, 0);
    records[count++] = kernel;

    kernel = pm_kernel(55, "reduce", 0, 150000, 0);
    add_metric(kernel, "dram__bytes_read.sum", 0);
    note(kernel, "pm-sampling", "measured", 1200, 15);
    add_metric(kernel, "sm__throughput.avg.pct_of_peak_sustained_elapsed", 12.5);
    note(kernel, "pm-sampling", "measured", 0, 15);
    add_metric(kernel, "launch__grid_size", NAN);
    note(kernel, "pm-sampling", "not-sampled", NAN, 0);
    records[count++] = kernel;

    assert_int_equal(replay_records_store(database, PID, records, count), 0);
    for (size_t i = 0; i < count; i++)
        free(records[i]);
    assert_int_equal(store_session_end(database, ORIGIN + 30000000, 1, 0), 0);
    store_close(database);
}

static void make_empty_session(void)
{
    store *database = open_session("empty");
    /* Never ended: the report says so. */
    store_close(database);
}

/* "full" again, less the tables every error path needs gone. */
static void make_broken_session(const char *name, const char *drops)
{
    make_full_session(name);
    char path[700];
    snprintf(path, sizeof(path), "%s/%s/session.db", scratch, name);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *error = NULL;
    if (sqlite3_exec(db, drops, NULL, NULL, &error) != SQLITE_OK)
        fail_msg("%s: %s", drops, error);
    sqlite3_close(db);
}

/* ---- comparing ---- */

/* The whole of path, NUL-terminated, in a malloc'd buffer; *length its size. */
static char *read_whole(const char *path, size_t *length)
{
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        *length = 0;
        return NULL;
    }
    size_t capacity = 1 << 16, used = 0;
    char *buffer = malloc(capacity);
    assert_non_null(buffer);
    size_t got;
    while ((got = fread(buffer + used, 1, capacity - used - 1, file)) > 0) {
        used += got;
        if (capacity - used - 1 == 0) {
            capacity *= 2;
            buffer = realloc(buffer, capacity);
            assert_non_null(buffer);
        }
    }
    fclose(file);
    buffer[used] = '\0';
    *length = used;
    return buffer;
}

/*
 * Compares bytes (length of them) with the golden file name, or writes that
 * file under FLARE_GOLDEN_UPDATE=1. On a difference the test fails showing
 * where, with some context either side.
 */
static void compare_golden(const char *name, const char *bytes, size_t length)
{
    char golden[1200];
    snprintf(golden, sizeof(golden), "%s/%s", GOLDEN_DIR, name);
    const char *update = getenv("FLARE_GOLDEN_UPDATE");
    if (update != NULL && strcmp(update, "1") == 0) {
        FILE *file = fopen(golden, "wb");
        assert_non_null(file);
        assert_int_equal(fwrite(bytes, 1, length, file), length);
        assert_int_equal(fclose(file), 0);
        return;
    }
    size_t expected_length;
    char *expected = read_whole(golden, &expected_length);
    if (expected == NULL)
        fail_msg("no golden file %s (FLARE_GOLDEN_UPDATE=1 writes it)", golden);
    size_t at = 0;
    while (at < length && at < expected_length && bytes[at] == expected[at])
        at++;
    if (at != length || at != expected_length) {
        size_t from = at > 80 ? at - 80 : 0;
        fail_msg("%s differs at byte %zu (%zu bytes, golden %zu):\n...%.*s\n<<<got>>>\n%.160s"
                 "\n<<<golden>>>\n%.160s",
                 name, at, length, expected_length, (int)(at - from), bytes + from, bytes + at,
                 expected + at);
    }
    free(expected);
}

/* The file at scratch/relative, compared with the golden file name. A file
 * that is missing compares as empty (a failed export writes none). */
static void compare_golden_file(const char *name, const char *relative)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s", scratch, relative);
    size_t length;
    char *bytes = read_whole(path, &length);
    compare_golden(name, bytes != NULL ? bytes : "", length);
    free(bytes);
}

/*
 * Copies length bytes of from into to (room for length + 64), with this
 * flare's version, where `flare report --format json|csv` writes it (its
 * first member, its "report" section), as VERSION: a release must not
 * change the golden files. Returns the length copied.
 */
static size_t copy_masking_version(char *to, const char *from, size_t length)
{
    static const char *const places[] = {"{\"flare_version\":\"", "report,0,flare_version,"};
    const char *version = flare_version();
    size_t used = 0;
    for (size_t at = 0; at < length;) {
        size_t place = 0;
        while (place < 2 &&
               !(strncmp(from + at, places[place], strlen(places[place])) == 0 &&
                 strncmp(from + at + strlen(places[place]), version, strlen(version)) == 0))
            place++;
        if (place == 2) {
            to[used++] = from[at++];
            continue;
        }
        used += (size_t)sprintf(to + used, "%sVERSION", places[place]);
        at += strlen(places[place]) + strlen(version);
    }
    return used;
}

/*
 * Runs flare with arguments in scratch and compares its stdout, a line
 * "---- stderr ----", its stderr and a line "---- exit N ----" with the
 * golden file name. When output is set (a path relative to scratch), it is
 * removed first, and what flare left there is compared as name.file too.
 */
static void check_golden(const char *name, const char *output, const char *const *arguments)
{
    char flare[1200], path[700];
    snprintf(flare, sizeof(flare), "%s/flare", bin_dir);
    if (output != NULL) {
        snprintf(path, sizeof(path), "%s/%s", scratch, output);
        unlink(path);
    }
    int code = cli_run_program(flare, 0, arguments, scratch, small_out, sizeof(small_out),
                               small_err, sizeof(small_err));
    assert_true(code >= 0);
    size_t out_length, err_length;
    snprintf(path, sizeof(path), "%s/stdout.txt", scratch);
    char *out = read_whole(path, &out_length);
    snprintf(path, sizeof(path), "%s/stderr.txt", scratch);
    char *err = read_whole(path, &err_length);
    assert_non_null(out);
    assert_non_null(err);
    size_t size = out_length + err_length + 128;
    char *actual = malloc(size);
    assert_non_null(actual);
    size_t length = copy_masking_version(actual, out, out_length);
    length += (size_t)snprintf(actual + length, size - length, "---- stderr ----\n");
    memcpy(actual + length, err, err_length);
    length += err_length;
    length += (size_t)snprintf(actual + length, size - length, "---- exit %d ----\n", code);
    free(out);
    free(err);
    compare_golden(name, actual, length);
    free(actual);
    if (output != NULL) {
        char file_name[300];
        snprintf(file_name, sizeof(file_name), "%s.file", name);
        compare_golden_file(file_name, output);
    }
}

#define GOLDEN(name, ...) check_golden(name, NULL, (const char *const[]){__VA_ARGS__, NULL})
#define GOLDEN_FILE(name, output, ...)                                                             \
    check_golden(name, output, (const char *const[]){__VA_ARGS__, NULL})

/* ---- tests ---- */

static void test_report(void **state)
{
    (void)state;
    GOLDEN("report-full.txt", "report", "full");
    GOLDEN("report-full-top3.txt", "report", "--top", "3", "full");
    /* The replay sections as stored: raw metric names and values, whole names. */
    GOLDEN("report-full-wide.txt", "report", "--wide", "full");
    GOLDEN("report-empty.txt", "report", "empty");
    /* Range replay by PM sampling: values with their error bounds and statuses. */
    GOLDEN("report-pm.txt", "report", "pm");
    GOLDEN("report-pm-wide.txt", "report", "--wide", "pm");
    GOLDEN("report-broken.txt", "report", "broken");
    GOLDEN("report-broken2.txt", "report", "broken2");
    GOLDEN("report-broken3.txt", "report", "broken3");
    GOLDEN("report-broken4.txt", "report", "broken4");
}

/* --format json and csv: every section, --top, and the errors of the
 * broken sessions. */
static void test_report_formats(void **state)
{
    (void)state;
    static const char *const formats[] = {"json", "csv"};
    static const char *const sessions[] = {"full",    "empty",   "pm",     "broken",
                                           "broken2", "broken3", "broken4"};
    for (size_t format = 0; format < sizeof(formats) / sizeof(formats[0]); format++) {
        char name[128];
        for (size_t session = 0; session < sizeof(sessions) / sizeof(sessions[0]); session++) {
            snprintf(name, sizeof(name), "report-%s.%s", sessions[session], formats[format]);
            GOLDEN(name, "report", "--format", formats[format], sessions[session]);
        }
        snprintf(name, sizeof(name), "report-full-top3.%s", formats[format]);
        GOLDEN(name, "report", "--top", "3", "-f", formats[format], "full");
        /* --wide changes the text only: the data is always raw and whole. */
        snprintf(name, sizeof(name), "report-full.%s", formats[format]);
        GOLDEN(name, "report", "--wide", "-f", formats[format], "full");
    }
    GOLDEN("report-bad-format.txt", "report", "--format", "xml", "full");
    GOLDEN("report-format-no-value.txt", "report", "full", "--format");
}

static void test_export(void **state)
{
    (void)state;
    static const char *const formats[] = {"perfetto", "csv", "json"};
    static const char *const sessions[] = {"full",    "empty",   "broken",
                                           "broken2", "broken3", "broken4"};
    for (size_t session = 0; session < sizeof(sessions) / sizeof(sessions[0]); session++) {
        for (size_t format = 0; format < sizeof(formats) / sizeof(formats[0]); format++) {
            char name[128];
            snprintf(name, sizeof(name), "export-%s.%s", sessions[session], formats[format]);
            GOLDEN(name, "export", sessions[session], "--format", formats[format]);
            snprintf(name, sizeof(name), "export-%s-o.%s", sessions[session], formats[format]);
            GOLDEN_FILE(name, "exported", "export", sessions[session], "-f", formats[format], "-o",
                        "exported");
        }
    }
    /* The values' notes in the replay args (metric_notes). */
    GOLDEN("export-pm.perfetto", "export", "pm", "--format", "perfetto");
}

static void test_messages(void **state)
{
    (void)state;
    GOLDEN("export-help.txt", "export", "--help");
    GOLDEN("export-no-format.txt", "export", "full");
    GOLDEN("export-bad-format.txt", "export", "full", "--format", "xml");
    GOLDEN("export-format-no-value.txt", "export", "full", "--format");
    GOLDEN("export-empty-output.txt", "export", "full", "-f", "csv", "--output=");
    GOLDEN("export-into-directory.txt", "export", "full", "-f", "csv", "-o", ".");
    GOLDEN("export-missing-directory.txt", "export", "full", "-f", "json", "-o", "no/such/x.json");
    GOLDEN("export-missing-session.txt", "export", "missing", "-f", "csv");
    GOLDEN("report-help.txt", "report", "--help");
    GOLDEN("report-bad-top.txt", "report", "--top", "0", "full");
    GOLDEN("report-missing-session.txt", "report", "missing");
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "golden");
    make_full_session("full");
    make_empty_session();
    make_pm_session("pm");
    make_broken_session("broken", "DROP TABLE counters; DROP TABLE metrics; DROP TABLE rules; "
                                  "DROP TABLE windows; DROP TABLE replay_spans; "
                                  "DROP TABLE capabilities; DROP TABLE drops;");
    make_broken_session("broken2", "DROP TABLE names; DROP TABLE replay_metrics;");
    make_broken_session("broken3", "DROP TABLE replay_passes; DROP TABLE devices; "
                                   "DROP VIEW v_replay_values; DROP TABLE replay_value_methods;");
    make_broken_session("broken4", "DROP TABLE processes;");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_report),
        cmocka_unit_test(test_report_formats),
        cmocka_unit_test(test_export),
        cmocka_unit_test(test_messages),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
