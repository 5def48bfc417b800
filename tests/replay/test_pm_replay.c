/*
 * test_pm_replay.c: range replay measured by PM sampling (src/pm/pm_replay.c,
 * replay.h's REPLAY_METHOD_PM) on the simulated device, with real threads:
 * its stream workers run the kernels, its PM hardware samples them (metric
 * m of a configuration is (m + 1) times the ns kernels ran in a sample),
 * and the replay stream's kernels are timed (sim_times.c). So every value
 * has a known truth: the kernel's own time in its pass times its slot's
 * factor.
 *
 * Never waits a fixed time for a condition; the kernels spin for fixed
 * times because their length is what is measured.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim.h"
#include "backend/sim/sim_pm.h"
#include "core/clock.h"
#include "flare/replay.h"
#include "flare/sim.h"
#include <pthread.h>

#include "pm/pm_replay.h"
#include "replay/replay.h"
#include "test_util.h"

#define TIMEOUT_MS 10000

typedef struct spin_args {
    uint64_t ns;
} spin_args;

/* Spins for args->ns of CLOCK_MONOTONIC: a kernel of known length. */
static void spin_kernel(const flare_sim_launch *launch)
{
    const spin_args *args = launch->args;
    uint64_t until = core_now_ns() + args->ns;
    while (core_now_ns() < until) {
    }
}

static int spin_id;
static const uint32_t one[3] = {1, 1, 1};

static int setup(void **state)
{
    (void)state;
    replay_reset_for_tests();
    pm_replay_reset_for_tests();
    replay_set_device_ops(sim_replay_ops());
    replay_set_metric_collector(sim_replay_collector());
    replay_set_pm_collector(pm_replay_collector());
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int device = 0; device < flare_sim_device_count(); device++) {
        flare_sim_device_synchronize(device, TIMEOUT_MS);
    }
    replay_reset_for_tests();
    return 0;
}

/* The five counts split four and one over two configurations on the
 * simulated hardware; the share is not sampled there. */
static const char *const metrics[] = {"gpu__time_duration.sum",
                                      "dram__bytes_read.sum",
                                      "dram__bytes_write.sum",
                                      "sm__cycles_active.avg",
                                      "gr__cycles_elapsed.max",
                                      "lts__t_bytes.sum",
                                      "sm__throughput.avg.pct_of_peak_sustained_elapsed"};
#define METRIC_COUNT (sizeof metrics / sizeof metrics[0])
/* Each metric's factor over the kernel's busy ns: its slot in its
 * configuration plus one (0: no sampled value). */
static const double factors[METRIC_COUNT] = {0, 1, 2, 3, 4, 1, 0};

static int select_pm(const char *metric_list, const char *kernel, uint64_t interval_ns,
                     uint64_t min_kernel_ns, char *error, size_t error_size)
{
    replay_selection selection;
    memset(&selection, 0, sizeof selection);
    selection.api_spans_only = kernel == NULL;
    if (kernel != NULL) {
        snprintf(selection.kernel_regex, sizeof selection.kernel_regex, "%s", kernel);
    }
    snprintf(selection.metrics, sizeof selection.metrics, "%s", metric_list);
    selection.method = REPLAY_METHOD_PM;
    selection.pm_interval_ns = interval_ns;
    selection.pm_min_kernel_ns = min_kernel_ns;
    return replay_selection_apply(&selection, error, error_size);
}

static void select_test_metrics(void)
{
    char list[1024] = "";
    for (size_t m = 0; m < METRIC_COUNT; m++) {
        strcat(list, m == 0 ? "" : ",");
        strcat(list, metrics[m]);
    }
    char error[256];
    assert_int_equal(select_pm(list, NULL, 100000, 1000000, error, sizeof error), FLARE_OK);
}

/* Takes every record queued; waits for want of them (generous bound). */
static size_t take_all(replay_record **records, size_t max, size_t want)
{
    size_t count = 0;
    uint64_t deadline = core_now_ns() + 10000000000ull;
    while (count < want && core_now_ns() < deadline) {
        count += replay_records_take(records + count, max - count, NULL);
    }
    return count;
}

static void launch_spin(flare_sim_stream *stream, uint64_t ns)
{
    spin_args args = {.ns = ns};
    assert_int_equal(flare_sim_launch_kernel(stream, spin_id, one, one, &args, sizeof args),
                     FLARE_OK);
}

static void test_span_measured_by_pm_sampling(void **state)
{
    (void)state;
    select_test_metrics();
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    /* 3 ms, 0.2 ms (under the 1 ms minimum), 5 ms, 3 ms. */
    const uint64_t lengths[] = {3000000, 200000, 5000000, 3000000};
    assert_int_equal(flare_replay_range_begin("step"), FLARE_OK);
    for (size_t kernel = 0; kernel < 4; kernel++) {
        launch_spin(stream, lengths[kernel]);
    }
    assert_int_equal(flare_replay_range_end(), FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, TIMEOUT_MS), FLARE_OK);

    replay_record *records[8];
    size_t count = take_all(records, 8, 5);
    assert_int_equal(count, 5); /* four kernels, then the span */
    replay_record *span = records[4];
    assert_true(span->is_span);
    assert_int_equal(span->declined, 0);
    assert_string_equal(span->collector, "pm-sampling");
    assert_int_equal(span->passes_planned, 3); /* the program's run, two configurations */
    assert_int_equal(span->passes_run, 3);
    assert_non_null(strstr(span->reason, "PM sampling every 100us, 2 configurations"));
    assert_non_null(strstr(span->reason, "3 kernels measured"));
    assert_non_null(strstr(span->reason, "1 under 1ms"));
    assert_non_null(strstr(span->reason, "1 metrics not sampled"));
    for (size_t kernel = 0; kernel < 4; kernel++) {
        const replay_record *record = records[kernel];
        assert_int_equal(record->span_id, span->span_id);
        assert_true(record->has_notes);
        assert_int_equal(record->metric_count, METRIC_COUNT);
        double duration = record->metric_values[0];
        /* The kernel's own time in the passes: at least its spin. */
        assert_true(duration >= (double)lengths[kernel]);
        assert_string_equal(record->metric_notes[0].method, "kernel-activity");
        assert_string_equal(record->metric_notes[0].status, "measured");
        for (size_t m = 1; m < METRIC_COUNT; m++) {
            const replay_value_note *note = &record->metric_notes[m];
            assert_string_equal(note->method, "pm-sampling");
            if (factors[m] == 0) {
                assert_string_equal(note->status, "not-sampled");
                assert_true(isnan(record->metric_values[m]));
                continue;
            }
            if (lengths[kernel] < 1000000) {
                assert_string_equal(note->status, "below-minimum");
                assert_true(isnan(record->metric_values[m]));
                continue;
            }
            /* A 3-5 ms kernel under 100 us samples: dozens of them, every
             * one unflagged (the work starts after the first sample). */
            assert_string_equal(note->status, "measured");
            assert_true(note->samples >= 20);
            assert_true(isfinite(note->error_bound) && note->error_bound > 0);
            /* Its busy ns in its pass times the factor, within the bound.
             * Its time in that pass lies within the two passes' times: the
             * median and half their spread (a preempted spin stretches a
             * pass on a busy machine, and busy time with it). */
            double value = record->metric_values[m];
            double spread = record->metric_notes[0].error_bound;
            double low = (duration - spread) * factors[m], high = (duration + spread) * factors[m];
            printf("kernel %zu %s: %.0f (truth %.0f to %.0f, bound %.0f, %u samples)\n", kernel,
                   metrics[m], value, low, high, note->error_bound, note->samples);
            assert_true(value >= low * 0.98 - note->error_bound);
            assert_true(value <= high * 1.02 + note->error_bound);
        }
    }
    for (size_t index = 0; index < count; index++) {
        free(records[index]);
    }
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

/* The method measures spans only, and checks its settings. */
static void test_method_refusals(void **state)
{
    (void)state;
    char error[256] = "";
    assert_int_equal(select_pm("dram__bytes_read.sum", "spin", 0, 0, error, sizeof error),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "--method pm measures spans of work"));
    assert_int_equal(select_pm("dram__bytes_read.sum", NULL, 5000, 0, error, sizeof error),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "PM interval 5us is outside 10us to 1s"));
    replay_selection selection;
    memset(&selection, 0, sizeof selection);
    selection.api_spans_only = 1;
    selection.pm_interval_ns = 20000;
    assert_int_equal(replay_selection_apply(&selection, error, sizeof error),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "need --method pm"));
    assert_int_equal(replay_method_parse("pm"), REPLAY_METHOD_PM);
    assert_int_equal(replay_method_parse("profiler"), REPLAY_METHOD_PROFILER);
    assert_int_equal(replay_method_parse("PM"), -1);
    assert_int_equal(pm_replay_metric_additive("dram__bytes_read.sum"), 1);
    assert_int_equal(pm_replay_metric_additive("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
                     0);
}

/* A device that cannot time re-issued kernels declines the span, saying
 * why, and the program's own run stands. */
static void test_device_without_kernel_times_declines(void **state)
{
    (void)state;
    replay_device_ops ops = *sim_replay_ops();
    ops.kernel_times_begin = NULL;
    replay_set_device_ops(&ops);
    char error[256];
    assert_int_equal(select_pm("dram__bytes_read.sum", NULL, 100000, 0, error, sizeof error),
                     FLARE_OK);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    assert_int_equal(flare_replay_range_begin("step"), FLARE_OK);
    launch_spin(stream, 100000);
    assert_int_equal(flare_replay_range_end(), FLARE_OK);
    replay_record *records[4];
    size_t count = take_all(records, 4, 2);
    assert_int_equal(count, 2);
    assert_int_equal(records[1]->declined, 1);
    assert_non_null(strstr(records[1]->reason, "cannot time re-issued kernels"));
    for (size_t index = 0; index < count; index++) {
        free(records[index]);
    }
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    replay_set_device_ops(sim_replay_ops());
}

/* A pass whose sampling cannot start (the hardware refuses the
 * configuration): its metrics are "failed" and have no value, the kernels
 * keep their time, the span says why, and nothing is left enabled (the
 * next span samples). */
static void test_pass_that_cannot_sample(void **state)
{
    (void)state;
    char error[256];
    assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_read.sum", NULL, 100000, 0,
                               error, sizeof error),
                     FLARE_OK);
    sim_pm_set_faults(&(sim_pm_faults){.refuse_prepare = 1});
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    assert_int_equal(flare_replay_range_begin("step"), FLARE_OK);
    launch_spin(stream, 2000000);
    assert_int_equal(flare_replay_range_end(), FLARE_OK);
    sim_pm_set_faults(NULL);
    replay_record *records[4];
    size_t count = take_all(records, 4, 2);
    assert_int_equal(count, 2);
    assert_int_equal(records[1]->declined, 0);
    assert_non_null(strstr(records[1]->reason, "1 failed"));
    assert_non_null(strstr(records[1]->reason, "PM sampling: preset 'replay' needs 2 passes"));
    assert_string_equal(records[0]->metric_notes[1].status, "failed");
    assert_true(isnan(records[0]->metric_values[1]));
    assert_string_equal(records[0]->metric_notes[0].status, "measured");
    assert_true(records[0]->metric_values[0] >= 2000000);
    for (size_t index = 0; index < count; index++) {
        free(records[index]);
    }
    /* The hardware was given back: the next span samples. */
    assert_int_equal(flare_replay_range_begin("step"), FLARE_OK);
    launch_spin(stream, 2000000);
    assert_int_equal(flare_replay_range_end(), FLARE_OK);
    count = take_all(records, 4, 2);
    assert_int_equal(count, 2);
    assert_string_equal(records[0]->metric_notes[1].status, "measured");
    for (size_t index = 0; index < count; index++) {
        free(records[index]);
    }
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

/* Time alone needs no PM configuration: one pass, the kernels timed. */
static void test_time_only_span(void **state)
{
    (void)state;
    char error[256];
    assert_int_equal(select_pm("gpu__time_duration.sum", NULL, 0, 0, error, sizeof error),
                     FLARE_OK);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    assert_int_equal(flare_replay_range_begin("step"), FLARE_OK);
    launch_spin(stream, 300000);
    launch_spin(stream, 600000);
    assert_int_equal(flare_replay_range_end(), FLARE_OK);
    replay_record *records[4];
    size_t count = take_all(records, 4, 3);
    assert_int_equal(count, 3);
    assert_int_equal(records[2]->declined, 0);
    assert_int_equal(records[2]->passes_run, 2);
    assert_true(records[0]->metric_values[0] >= 300000);
    assert_true(records[1]->metric_values[0] >= 600000);
    assert_string_equal(records[1]->metric_notes[0].status, "measured");
    for (size_t index = 0; index < count; index++) {
        free(records[index]);
    }
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

/* One span over a kernel of ns: the sampled metric's (index 1) status on
 * the kernel and the span's reason (either may be NULL). */
static void run_span(flare_sim_stream *stream, uint64_t ns, char *status, size_t status_size,
                     char *reason, size_t reason_size)
{
    assert_int_equal(flare_replay_range_begin("step"), FLARE_OK);
    launch_spin(stream, ns);
    assert_int_equal(flare_replay_range_end(), FLARE_OK);
    replay_record *records[4];
    size_t count = take_all(records, 4, 2);
    assert_int_equal(count, 2);
    assert_int_equal(records[1]->declined, 0);
    if (status != NULL)
        snprintf(status, status_size, "%s", records[0]->metric_notes[1].status);
    if (reason != NULL)
        snprintf(reason, reason_size, "%s", records[1]->reason);
    for (size_t index = 0; index < count; index++) {
        free(records[index]);
    }
}

static void span_status(flare_sim_stream *stream, char *status, size_t status_size)
{
    run_span(stream, 2000000, status, status_size, NULL, 0);
}

/* A span of one configuration keeps its engine: the next span samples
 * without preparing (a refused prepare does not reach it); other metrics
 * give it up and prepare their own. */
static void test_kept_configuration_needs_no_prepare(void **state)
{
    (void)state;
    char error[256], status[32];
    assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_read.sum", NULL, 100000, 0,
                               error, sizeof error),
                     FLARE_OK);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    span_status(stream, status, sizeof status);
    assert_string_equal(status, "measured");
    sim_pm_set_faults(&(sim_pm_faults){.refuse_prepare = 1});
    span_status(stream, status, sizeof status);
    assert_string_equal(status, "measured");
    assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_write.sum", NULL, 100000, 0,
                               error, sizeof error),
                     FLARE_OK);
    span_status(stream, status, sizeof status);
    assert_string_equal(status, "failed");
    sim_pm_set_faults(NULL);
    /* Another interval cannot use what is kept either. */
    span_status(stream, status, sizeof status);
    assert_string_equal(status, "measured");
    assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_write.sum", NULL, 200000, 0,
                               error, sizeof error),
                     FLARE_OK);
    sim_pm_set_faults(&(sim_pm_faults){.refuse_prepare = 1});
    span_status(stream, status, sizeof status);
    assert_string_equal(status, "failed");
    sim_pm_set_faults(NULL);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

/* The early set-up prepares the first configuration before any span: the
 * first span needs no prepare. It sets up once, and only for PM spans. */
static void test_early_set_up(void **state)
{
    (void)state;
    char error[256], status[32];
    assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_read.sum", NULL, 100000, 0,
                               error, sizeof error),
                     FLARE_OK);
    assert_int_equal(pm_replay_prepare_early(0), FLARE_OK);
    assert_int_equal(pm_replay_prepare_early(0), FLARE_ERR_STATE); /* there already */
    sim_pm_set_faults(&(sim_pm_faults){.refuse_prepare = 1});
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    span_status(stream, status, sizeof status);
    assert_string_equal(status, "measured");
    sim_pm_set_faults(NULL);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);

    pm_replay_reset_for_tests();
    replay_selection selection;
    memset(&selection, 0, sizeof selection);
    selection.api_spans_only = true;
    snprintf(selection.metrics, sizeof selection.metrics, "dram__bytes_read.sum");
    assert_int_equal(replay_selection_apply(&selection, error, sizeof error), FLARE_OK);
    /* Spans measured by the range profiler: nothing to set up early. */
    assert_int_equal(pm_replay_prepare_early(0), FLARE_ERR_STATE);
}

static void span_reason(flare_sim_stream *stream, char *reason, size_t reason_size)
{
    run_span(stream, 3000000, NULL, 0, reason, reason_size);
}

/* A kept engine's counts run on across spans: each span reports its own
 * losses, not the engine's since it was made. */
static void test_kept_engine_counts_each_span_alone(void **state)
{
    (void)state;
    char error[256], reason[256];
    assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_read.sum", NULL, 100000, 0,
                               error, sizeof error),
                     FLARE_OK);
    /* A buffer of 4 samples that overflows once (3 ms: about 30 samples). */
    sim_pm_set_faults(&(sim_pm_faults){.hardware_buffer_samples = 4, .overflow_once = 1});
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    span_reason(stream, reason, sizeof reason);
    printf("first span: %s\n", reason);
    assert_null(strstr(reason, ", 0 lost"));
    span_reason(stream, reason, sizeof reason);
    printf("second span: %s\n", reason);
    assert_non_null(strstr(reason, ", 0 lost"));
    sim_pm_set_faults(NULL);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

static void *prepare_early_main(void *argument)
{
    (void)argument;
    pm_replay_prepare_early(0);
    return NULL;
}

/* (Its races, the set-up and the span both building engine_plan without the
 * wait, show under TSan, CI's tsan stage: the values alone may not.)
 * The early set-up and a span, on two threads, in either order: the span
 * waits for a set-up under way or the set-up stands back for the span;
 * every span measures. */
static void test_early_set_up_beside_a_span(void **state)
{
    (void)state;
    char error[256], status[32];
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    for (int round = 0; round < 12; round++) {
        pm_replay_reset_for_tests();
        assert_int_equal(select_pm("gpu__time_duration.sum,dram__bytes_read.sum", NULL, 100000, 0,
                                   error, sizeof error),
                         FLARE_OK);
        pthread_t thread;
        assert_int_equal(pthread_create(&thread, NULL, prepare_early_main, NULL), 0);
        span_status(stream, status, sizeof status);
        assert_int_equal(pthread_join(thread, NULL), 0);
        assert_string_equal(status, "measured");
    }
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

int main(void)
{
    if (flare_sim_kernel_register("spin", spin_kernel, &spin_id) != FLARE_OK) {
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_span_measured_by_pm_sampling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_method_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_without_kernel_times_declines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_time_only_span, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pass_that_cannot_sample, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_configuration_needs_no_prepare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_set_up, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_set_up_beside_a_span, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_engine_counts_each_span_alone, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
