/*
 * fuzz_session_seed.c: the seed session of fuzz_session_reader, written
 * through the store's writer API (store.h, store_pm.h, replay.h) so that it
 * always has the schema this flare writes: a schema change needs no change
 * here unless a writer's arguments change.
 *
 * The rows follow tests/cli/test_golden.c's "full" session, smaller: every
 * table has rows, and the rows reach the report's and the exports' branches
 * (an end before its start, ids above INT64_MAX, names with quotes, commas,
 * line breaks and bad UTF-8, copies of every kind and an unknown one, graph
 * launches with and without a scope, flagged PM samples, declined replays,
 * a span whose record was lost, a span kernel's values with notes on how
 * they were produced). The fuzzer's mutations start from here.
 *
 * Fuzz-only. It must never write outside the directory it is given, and
 * never return with a partial seed: any failure aborts.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "fuzz_session_seed.h"
#include "replay/replay.h"
#include "store/store.h"
#include "store/store_pm.h"

#define ORIGIN     5000000000000ull      /* the session's start, flare clock */
#define UNIX_START 1767225600000000000ll /* 2026-01-01 00:00:00 UTC */
#define PID        31337
#define CHILD_PID  31338

static store *database;

/* Aborts unless a store call succeeded. */
static void seed_check(int status, const char *what)
{
    if (status != 0) {
        fprintf(stderr, "fuzz_session_seed: %s failed (%d): %s\n", what, status,
                store_last_error(database));
        abort();
    }
}

static const char *const kernel_names[] = {
    "void gemm<float, 128>(float const*, float const*, float*, int)",
    "say \"hi\", twice",
    "line1\nline2\r\\",
    "bad \xC3\x28 utf8 \x01",
    "caf\xC3\xA9 \xE6\x97\xA5",
    "a_kernel_name_that_is_long_enough_to_run_past_the_sixty_columns_of_the_report_table",
    "saxpy",
};
#define KERNEL_NAME_COUNT (sizeof kernel_names / sizeof kernel_names[0])

static void seed_kernels(void)
{
    for (size_t name = 0; name < KERNEL_NAME_COUNT; name++) {
        size_t launches = 1 + (name * 7) % 4;
        for (size_t launch = 0; launch < launches; launch++) {
            uint64_t start = ORIGIN + 1000 + name * 100000 + launch * 9000;
            store_kernel_row row = {
                .pid = name == 4 ? CHILD_PID : PID,
                .device = (int)(name % 2),
                .stream_id = name == 2 ? 0x100000007ull : 13 + launch % 2,
                .correlation_id =
                    name == 1 && launch == 0 ? UINT64_MAX - 1 : 500 + name * 10 + launch,
                .name = kernel_names[name],
                .start_ns = start,
                .end_ns = start + 1500 + name * 977 + launch * launch * 311,
                .grid = {(uint32_t)(name + 1), (uint32_t)launch + 1, 1},
                .block = {256, 1, (uint32_t)name % 3 + 1},
                .shared_memory_bytes = (uint32_t)(1024 * name),
                .registers_per_thread = (uint32_t)(32 + name),
                .context_id = name,
            };
            if (name == 3 && launch == 0)
                row.end_ns = row.start_ns - 5; /* damaged: an end before its start */
            seed_check(store_put_kernel(database, &row), "store_put_kernel");
        }
    }
}

static void seed_copies(void)
{
    /* pid, device, stream, correlation, is_memset, kind, bytes, start, end, status, graph,
     * node */
    const store_copy_row copies[] = {
        {PID, 0, 13, 900, 0, 1, 4096, ORIGIN + 50, ORIGIN + 950, 0, 0, 0},
        {PID, 1, 14, 902, 0, 2, 1500, ORIGIN + 3000, ORIGIN + 3100, 0, 0, 0},
        {PID, 1, 14, 903, 0, 3, 20ull << 30, ORIGIN + 4000, ORIGIN + 40000000, 0, 0, 0},
        {PID, 0, 13, 904, 0, 4, 64, ORIGIN + 5000, ORIGIN + 5020, 0, 0, 0},
        {PID, 0, 13, 905, 0, 0, 77, ORIGIN + 6000, ORIGIN + 6030, 0, 0, 0},
        {PID, 0, 0x100000007ull, 906, 1, 0, 1 << 16, ORIGIN + 7000, ORIGIN + 7500, 0, 0, 0},
        {CHILD_PID, 0, 13, 908, 1, 0, 12, ORIGIN + 8100, ORIGIN + 8090, FLARE_ERR_IO, 0, 0},
    };
    for (size_t i = 0; i < sizeof copies / sizeof copies[0]; i++)
        seed_check(store_put_copy(database, &copies[i]), "store_put_copy");
    seed_check(store_put_external_correlation(database, PID, 900, 1, 101),
               "store_put_external_correlation");
}

/* Graph 4 launched twice (once under a scope), two kernel nodes and a
 * memset node; graph 9 once, its launch not recorded. */
static void seed_graphs(void)
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
            seed_check(store_put_kernel(database, &row), "store_put_kernel (graph)");
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
            seed_check(store_put_copy(database, &set), "store_put_copy (graph)");
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
        seed_check(store_put_graph_launch(database, &row), "store_put_graph_launch");
    }
}

/* PM samples of window 1: a flagged outlier, two ranges, a sample no range
 * covered and one of a range still open. */
static void seed_pm_samples(void)
{
    const struct {
        uint32_t flags;
        int has_scope;
        const char *scope;
        double value;
    } samples[] = {{8, 1, "forward", 1.3e12}, {0, 1, "forward", 1.25e6}, {0, 1, "backward", 2e6},
                   {0, 0, NULL, 7e5},         {0, 1, NULL, 3e5},         {0, 1, "forward", NAN}};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
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
            seed_check(store_put_pm_samples(database, &row, 1), "store_put_pm_samples");
        }
}

static void seed_scopes(void)
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
        {PID, PID + 5, "loader, \"worker\"", 0, 30, 77777, 0},
        {PID, PID + 6, "left open", 0, 8000000, 1000000, 1},
        {CHILD_PID, CHILD_PID, "child main", 0, 100, 5000, 0},
    };
    for (size_t i = 0; i < sizeof scopes / sizeof scopes[0]; i++) {
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
        seed_check(store_put_scope(database, &row), "store_put_scope");
    }
}

static void seed_metrics_and_counters(void)
{
    const store_metric_row metrics[] = {
        {PID, 0, "power_mw", ORIGIN + 100, 250000},
        {PID, 0, "power_mw", ORIGIN + 300, 305500},
        {PID, 1, "temperature_c", ORIGIN + 150, 61},
        {PID, -1, "launches", ORIGIN - 1500, -3}, /* before the session: a negative ts */
        {PID, -1, "external_correlation.1.101", ORIGIN + 500, 99},
        {CHILD_PID, 0, "sm_clock_mhz", ORIGIN + 600, 1410},
    };
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++)
        seed_check(store_put_metric(database, &metrics[i]), "store_put_metric");
    seed_check(store_put_counter(database, PID, 0, "samples.seen"), "store_put_counter");
    seed_check(store_put_counter_sample(database, PID, 0, 100, 10), "store_put_counter_sample");
    seed_check(store_put_counter_sample(database, PID, 0, 900, UINT64_MAX),
               "store_put_counter_sample");
    seed_check(store_put_counter(database, CHILD_PID, 0, "never.sampled"), "store_put_counter");
}

static void seed_rules_and_windows(void)
{
    const store_rule_row rules[] = {
        {.pid = PID,
         .rule_id = 1,
         .text = "kernel_launch_rate < 500/s for 2s",
         .canonical = "kernel_launch_rate < 500/s for 2s",
         .status = "fired",
         .times_true = 3,
         .windows_fired = 2,
         .has_last_value = 1,
         .last_value = 12.5,
         .sequence = 1},
        {.pid = PID,
         .rule_id = 2,
         .text = "bogus > 3",
         .canonical = "",
         .status = "refused",
         .reason = "unknown metric 'bogus'",
         .sequence = 1},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        seed_check(store_put_rule(database, &rules[i]), "store_put_rule");

    const store_window_row windows[] = {
        {.pid = PID,
         .id = 1,
         .token_kind = "rule",
         .label = "",
         .has_cause = 1,
         .rule_id = 1,
         .rule_text = "kernel_launch_rate < 500/s for 2s",
         .comparison = "<",
         .threshold = 500,
         .rate_window_ns = 1000000000,
         .sustained_ns = 2000000000,
         .first_true_ns = ORIGIN + 5,
         .observed_value = 12.5,
         .max_duration_ns = 2000000000,
         .requested_ns = ORIGIN + 10,
         .opened_ns = ORIGIN + 20000,
         .closed_ns = ORIGIN + 2020000,
         .close_reason = "duration",
         .launches = 77,
         .engine = "sim-pm",
         .engine_status = "disarmed",
         .engine_samples = 6,
         .observed_partial = 1},
        {.pid = PID,
         .id = 2,
         .token_kind = "manual",
         .label = "a manual label",
         .requested_ns = ORIGIN + 40,
         .opened_ns = ORIGIN - 10,
         .closed_ns = ORIGIN + 15000000000ull,
         .close_reason = "manual",
         .engine = "none",
         .engine_status = "refused",
         .engine_reason = "another window is open"},
        {.pid = CHILD_PID, .id = 1, .token_kind = NULL, .label = NULL, .requested_ns = ORIGIN + 70},
    };
    for (size_t i = 0; i < sizeof windows / sizeof windows[0]; i++)
        seed_check(store_put_window(database, &windows[i]), "store_put_window");
}

static void seed_drops_capabilities_and_log(void)
{
    seed_check(store_set_drops(database, PID, "storm_guard", "kernel launches untimed", 120),
               "store_set_drops");
    seed_check(store_set_drops(database, PID, "storm_guard", "copies untimed", 7),
               "store_set_drops");
    seed_check(store_set_drops(database, PID, "ring", "thread 31342", 4096), "store_set_drops");
    seed_check(store_set_drops(database, CHILD_PID, "replay", NULL, 0), "store_set_drops");
    seed_check(store_set_capability(database, PID, "kernels", 1, "active", "simulated device"),
               "store_set_capability");
    seed_check(store_set_capability(database, CHILD_PID, "nvml", 0, "off", ""),
               "store_set_capability");
    seed_check(store_put_log(database, PID, ORIGIN + 1, "warning", "a log line"), "store_put_log");
}

/* A replay record; the caller adds metrics and frees it. */
static replay_record *seed_replay_record(uint64_t launch_id, const char *kernel, uint64_t index)
{
    replay_record *record = calloc(1, sizeof *record);
    if (record == NULL)
        abort();
    record->launch_id = launch_id;
    record->device = (int)(launch_id % 2);
    record->stream_id = 13;
    snprintf(record->kernel_name, sizeof record->kernel_name, "%s", kernel);
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
    snprintf(record->collector, sizeof record->collector, "sim-metrics");
    return record;
}

static void seed_replay_metric(replay_record *record, const char *name, double value)
{
    uint32_t at = record->metric_count++;
    snprintf(record->metric_names[at], sizeof record->metric_names[at], "%s", name);
    record->metric_values[at] = value;
}

static void seed_replay_decline(replay_record *record, const char *reason)
{
    record->declined = 1;
    record->passes_run = 1;
    record->pass_count_kept = 0;
    record->metric_count = 0;
    record->snapshot_bytes = 0;
    record->collector[0] = '\0';
    snprintf(record->reason, sizeof record->reason, "%s", reason);
}

static void seed_replay(void)
{
    replay_record *records[16];
    size_t count = 0;
    /* Kernel "alpha": three launches, one declined; "beta": one launch of
     * a span whose record was lost. */
    for (uint64_t launch = 1; launch <= 3; launch++) {
        replay_record *record = seed_replay_record(launch, "alpha<int>", launch * 2 - 1);
        seed_replay_metric(record, "gpu__time_duration.sum", 38000.0 + (double)launch);
        seed_replay_metric(record, "dram__bytes_read.sum", launch == 3 ? NAN : 1e16);
        records[count++] = record;
    }
    seed_replay_decline(records[1], "the kernel's footprint is over --footprint-budget");
    records[count] = seed_replay_record(4, "beta", 0);
    records[count]->span_id = 99;
    seed_replay_metric(records[count++], "gpu__time_duration.sum", 123);

    /* Spans: one with two kernels, one declined on no device, one empty. */
    replay_record *span = seed_replay_record(11, "flare_replay_range", 0);
    span->is_span = 1;
    span->span_id = 11;
    span->span_kernels = 2;
    span->span_copies = 1;
    span->passes_planned = 4;
    span->passes_run = 4;
    records[count++] = span;
    for (uint64_t kernel = 12; kernel <= 13; kernel++) {
        replay_record *record = seed_replay_record(kernel, kernel == 12 ? "scale_add" : "k", 1);
        record->span_id = 11;
        seed_replay_metric(record, "gpu__time_duration.sum", 2500.0 * (double)kernel);
        if (kernel == 12) {
            /* How its values were produced, as range replay by PM sampling
             * notes them (replay_value_methods, schema 16). */
            seed_replay_metric(record, "dram__bytes_read.sum", NAN);
            record->has_notes = 1;
            record->metric_notes[0] = (replay_value_note){"kernel-activity", "measured", 12.5, 0};
            record->metric_notes[1] = (replay_value_note){"pm-sampling", "below-minimum", NAN, 1};
        }
        records[count++] = record;
    }
    span = seed_replay_record(21, "step", 2);
    span->is_span = 1;
    span->span_id = 21;
    span->device = -1;
    span->span_kernels = 3;
    seed_replay_decline(span, "memory allocated in the span (cudaMalloc)");
    records[count++] = span;
    span = seed_replay_record(31, "empty step", 1);
    span->is_span = 1;
    span->span_id = 31;
    span->pass_count_kept = 0;
    records[count++] = span;

    seed_check(replay_records_store(database, PID, records, count), "replay_records_store");
    for (size_t i = 0; i < count; i++)
        free(records[i]);
}

void fuzz_session_seed_write(const char *directory)
{
    char error[1024];
    if (store_open(directory, STORE_OPEN_WRITE, &database, error, sizeof error) != 0) {
        fprintf(stderr, "fuzz_session_seed: store_open %s: %s\n", directory, error);
        abort();
    }
    store_session_info info = {
        .command = "train.py --epochs 3 \"quoted, with\ttab\"",
        .start_ns = ORIGIN,
        .start_unix_ns = UNIX_START,
        .host = "seed-host",
        .flare_version = "0.0.0-seed",
    };
    seed_check(store_session_begin(database, &info), "store_session_begin");
    seed_check(store_begin(database), "store_begin");
    seed_check(store_process_begin(database, PID, 1, ORIGIN, "sim", "/opt/my tools/train,v2"),
               "store_process_begin");
    seed_check(store_process_begin(database, CHILD_PID, PID, ORIGIN + 5, "cuda", ""),
               "store_process_begin");
    seed_check(store_process_end(database, CHILD_PID, ORIGIN + 9000), "store_process_end");
    seed_check(store_put_device(database, PID, 0, "Simulated \"GPU\" 0", "sim"),
               "store_put_device");
    seed_check(store_put_device(database, PID, 1, "Second\\GPU", "sim"), "store_put_device");
    seed_kernels();
    seed_copies();
    seed_graphs();
    seed_pm_samples();
    seed_scopes();
    seed_metrics_and_counters();
    seed_rules_and_windows();
    seed_drops_capabilities_and_log();
    seed_replay();
    seed_check(store_commit(database), "store_commit");
    seed_check(store_session_end(database, ORIGIN + 12345678, 1, 3), "store_session_end");
    store_close(database);
    database = NULL;
}
