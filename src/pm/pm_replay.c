/*
 * pm_replay.c: range replay measured by PM sampling (pm_replay.h).
 *
 * The collector's calls all come from the span's own thread, one span at
 * a time in the process (a second is declined while one collects): the
 * state is one static collection under a lock taken only to claim and
 * release it. Each pass creates a PM engine over the backend's replay
 * hardware, prepares one configuration (CUPTI: enable, set the
 * configuration, size the image), arms it, lets the re-issued work run,
 * then disarms, takes every sample and destroys the engine (disable).
 *
 * Must never: sum a flagged sample, leave an engine armed or prepared
 * after end(), or write past the arrays sized at prepare.
 */
#include "pm/pm_replay.h"

#include "attrib/integrate.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pm/pm_engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DURATION_METRIC "gpu__time_duration.sum"
/* After the start, before the work: the first sample after a start spans
 * back to the last stop and is flagged (PM_SAMPLE_START_CLAMPED; 0.63-0.87
 * ms on the H200), so kernels begin after it ends. */
#define SETTLE_NS 2000000ull
/* After the work, before the stop: the sample holding the last kernel's
 * end completes. */
#define TAIL_INTERVALS 3u
/* How long the kernels' records may take to arrive after a pass. */
#define TIMES_WAIT_NS 5000000000ull
#define TAKE_CHUNK    512u
/* Samples one decode holds: a pass is decoded at its stop, and on the H200
 * a decode after the stop returned one image's worth and no more (2,000 of
 * a 63 ms pass's 6,300 at 10 us, session 22). 8,192 hold 82 ms at 10 us;
 * the image costs about 26 KiB a sample of host memory (217 MB). */
#define IMAGE_SAMPLES 8192u

typedef enum value_role {
    ROLE_SAMPLED = 0,
    ROLE_DURATION,  /* the kernels' own times */
    ROLE_UNSAMPLED, /* PM sampling has no such metric here */
} value_role;

typedef struct replay_plan {
    bool valid;
    int device;
    size_t metric_count;
    char names[REPLAY_RECORD_METRIC_MAX][REPLAY_METRIC_NAME_MAX];
    value_role roles[REPLAY_RECORD_METRIC_MAX];
    size_t config_count;
    size_t config_sizes[PM_REPLAY_PASSES_MAX];
    size_t config_metrics[PM_REPLAY_PASSES_MAX][PM_METRICS_MAX]; /* metric indexes */
} replay_plan;

typedef struct pass_sample {
    uint64_t start_ns, end_ns;
    uint32_t flags;
    double values[PM_METRICS_MAX];
} pass_sample;

typedef struct collection {
    bool busy;
    replay_plan plan;
    const replay_device_ops *ops;
    const pm_hardware_ops *hw_ops;
    void *hw;
    uint64_t context_id;
    int device;
    replay_method_settings method;
    size_t kernel_count;
    uint32_t passes;
    double *values;           /* kernel * metric_count + metric */
    replay_value_note *notes; /* likewise */
    uint64_t *durations;      /* pass * kernel_count + kernel; 0: untimed */
    uint64_t *starts, *ends;  /* this pass's kernel times */
    pass_sample *samples;     /* this pass's, PM_QUEUE_CAPACITY at most */
    size_t sample_count;
    attrib_pm_sample *series; /* one metric of samples */
    pm_queue_entry *take;     /* TAKE_CHUNK */
    pm_preset preset;         /* this pass's configuration (names point into plan) */
    pm_engine *engine;
    bool armed, timing;
    uint64_t armed_ns; /* this pass's start of sampling */
    uint64_t samples_total, samples_lost, samples_missing;
    char failure[160]; /* the first failure, for the reason */
} collection;

static pthread_mutex_t collection_lock = PTHREAD_MUTEX_INITIALIZER;
static collection state;
static replay_plan cached_plan; /* the last plan built (same metrics: no CUPTI calls again) */

int pm_replay_metric_additive(const char *metric)
{
    static const char *const rates[] = {"pct",       "ratio", "per_second",
                                        "per_cycle", "per_",  "peak_sustained"};
    for (size_t index = 0; index < sizeof rates / sizeof rates[0]; index++) {
        if (strstr(metric, rates[index]) != NULL) {
            return 0;
        }
    }
    return 1;
}

void pm_replay_reset_for_tests(void)
{
    pthread_mutex_lock(&collection_lock);
    cached_plan.valid = false;
    pthread_mutex_unlock(&collection_lock);
}

static void sleep_ns(uint64_t ns)
{
    struct timespec pause = {.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
    while (nanosleep(&pause, &pause) != 0) {
    }
}

static void note_failure(collection *c, const char *format, const char *detail)
{
    if (c->failure[0] == '\0') {
        snprintf(c->failure, sizeof c->failure, format, detail);
    }
}

/* ---- the plan: metrics into one-pass configurations ---- */

/* Whether names[0..count) sample in one pass (1), not (0), or an error. */
static int one_pass(collection *c, const char *const *names, size_t count, size_t *unknown,
                    char *reason, size_t reason_size)
{
    if (c->hw_ops->plan == NULL) {
        return count <= PM_METRICS_MAX ? 1 : 0;
    }
    size_t passes = 0;
    int status =
        c->hw_ops->plan(c->hw, c->device, names, count, &passes, unknown, reason, reason_size);
    if (status == FLARE_ERR_NOT_FOUND) {
        return 0;
    }
    return status == FLARE_OK ? passes == 1 : status;
}

/* Places sampled metric m in the first configuration that still samples
 * in one pass with it, or a new one; unsampled when alone it cannot be. */
static int plan_place(collection *c, replay_plan *plan, size_t m, char *reason, size_t reason_size)
{
    const char *names[PM_METRICS_MAX];
    size_t unknown = 0;
    for (size_t config = 0; config < plan->config_count; config++) {
        size_t size = plan->config_sizes[config];
        if (size == PM_METRICS_MAX) {
            continue;
        }
        for (size_t slot = 0; slot < size; slot++) {
            names[slot] = plan->names[plan->config_metrics[config][slot]];
        }
        names[size] = plan->names[m];
        int fits = one_pass(c, names, size + 1, &unknown, reason, reason_size);
        if (fits < 0) {
            return fits;
        }
        if (fits == 1) {
            plan->config_metrics[config][plan->config_sizes[config]++] = m;
            return FLARE_OK;
        }
    }
    names[0] = plan->names[m];
    int alone = one_pass(c, names, 1, &unknown, reason, reason_size);
    if (alone < 0) {
        return alone;
    }
    if (alone == 0 || plan->config_count == PM_REPLAY_PASSES_MAX) {
        plan->roles[m] = ROLE_UNSAMPLED;
        return FLARE_OK;
    }
    plan->config_metrics[plan->config_count][0] = m;
    plan->config_sizes[plan->config_count++] = 1;
    return FLARE_OK;
}

static bool plan_matches(const replay_plan *plan, int device, const char *const *metrics,
                         size_t count)
{
    if (!plan->valid || plan->device != device || plan->metric_count != count) {
        return false;
    }
    for (size_t m = 0; m < count; m++) {
        if (strcmp(plan->names[m], metrics[m]) != 0) {
            return false;
        }
    }
    return true;
}

static int plan_build(collection *c, const char *const *metrics, size_t count, char *reason,
                      size_t reason_size)
{
    if (plan_matches(&cached_plan, c->device, metrics, count)) {
        c->plan = cached_plan;
        return FLARE_OK;
    }
    replay_plan *plan = &c->plan;
    memset(plan, 0, sizeof *plan);
    plan->device = c->device;
    plan->metric_count = count;
    for (size_t m = 0; m < count; m++) {
        snprintf(plan->names[m], REPLAY_METRIC_NAME_MAX, "%s", metrics[m]);
        plan->roles[m] = strcmp(metrics[m], DURATION_METRIC) == 0 ? ROLE_DURATION : ROLE_SAMPLED;
    }
    for (size_t m = 0; m < count; m++) {
        if (plan->roles[m] != ROLE_SAMPLED) {
            continue;
        }
        int status = plan_place(c, plan, m, reason, reason_size);
        if (status != FLARE_OK) {
            return status;
        }
    }
    plan->valid = true;
    cached_plan = *plan;
    return FLARE_OK;
}

/* ---- prepare and end ---- */

static void collection_release(collection *c)
{
    if (c->timing) { /* a pass that never reached its end (an abort) */
        uint64_t none = 0;
        size_t found = 0;
        c->ops->kernel_times_end(c->device, &none, &none, 0, &found, 0);
        c->timing = false;
    }
    if (c->engine != NULL) {
        if (c->armed) {
            pm_engine_disarm(c->engine, c->device, core_now_ns(), NULL);
        }
        pm_engine_destroy(c->engine);
        c->engine = NULL;
    }
    c->armed = false;
    free(c->values);
    free(c->notes);
    free(c->durations);
    free(c->starts);
    free(c->ends);
    free(c->samples);
    free(c->series);
    free(c->take);
    c->values = NULL;
    c->notes = NULL;
    c->durations = NULL;
    c->starts = c->ends = NULL;
    c->samples = NULL;
    c->series = NULL;
    c->take = NULL;
}

static int allocate(collection *c, size_t metric_count)
{
    size_t cells = c->kernel_count * metric_count;
    c->values = malloc(cells * sizeof *c->values);
    c->notes = calloc(cells, sizeof *c->notes);
    c->durations = calloc((size_t)c->passes * c->kernel_count, sizeof *c->durations);
    c->starts = calloc(c->kernel_count, sizeof *c->starts);
    c->ends = calloc(c->kernel_count, sizeof *c->ends);
    c->samples = malloc(PM_QUEUE_CAPACITY * sizeof *c->samples);
    c->series = malloc(PM_QUEUE_CAPACITY * sizeof *c->series);
    c->take = malloc(TAKE_CHUNK * sizeof *c->take);
    if (c->values == NULL || c->notes == NULL || c->durations == NULL || c->starts == NULL ||
        c->ends == NULL || c->samples == NULL || c->series == NULL || c->take == NULL) {
        return FLARE_ERR_NO_MEMORY;
    }
    for (size_t cell = 0; cell < cells; cell++) {
        c->values[cell] = NAN;
        c->notes[cell].error_bound = NAN;
    }
    return FLARE_OK;
}

/* Finds the backend's pieces; 0, or a status with reason. */
static int find_backend(collection *c, int device, char *reason, size_t reason_size)
{
    c->ops = replay_device_operations();
    if (c->ops == NULL || c->ops->kernel_times_begin == NULL || c->ops->kernel_times_end == NULL ||
        c->ops->pm_hardware == NULL) {
        snprintf(reason, reason_size,
                 "PM sampling cannot measure spans on this device (%s cannot time re-issued "
                 "kernels or lend its PM sampling hardware)",
                 c->ops != NULL ? c->ops->name : "no device");
        return FLARE_ERR_UNSUPPORTED;
    }
    c->hw_ops = c->ops->pm_hardware(device, &c->hw, &c->context_id);
    if (c->hw_ops == NULL) {
        snprintf(reason, reason_size, "no PM sampling on device %d for replay (see flare info)",
                 device);
        return FLARE_ERR_UNSUPPORTED;
    }
    return FLARE_OK;
}

static int collector_prepare_span(const flare_replay_launch *span, const char *const *metrics,
                                  size_t metric_count, size_t max_ranges, char *reason,
                                  size_t reason_size)
{
    if (metric_count == 0 || metric_count > REPLAY_RECORD_METRIC_MAX || max_ranges == 0) {
        snprintf(reason, reason_size, "no metrics or no kernels to measure");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&collection_lock);
    if (state.busy) {
        pthread_mutex_unlock(&collection_lock);
        snprintf(reason, reason_size, "another span is being measured by PM sampling");
        return FLARE_ERR_STATE;
    }
    collection *c = &state;
    memset(c, 0, sizeof *c);
    c->busy = true;
    pthread_mutex_unlock(&collection_lock);
    c->device = span->device;
    c->kernel_count = max_ranges;
    replay_method_current(&c->method);
    int status = find_backend(c, span->device, reason, reason_size);
    if (status == FLARE_OK) {
        status = plan_build(c, metrics, metric_count, reason, reason_size);
    }
    if (status == FLARE_OK) {
        /* A span of time metrics only still needs one pass to time it. */
        c->passes = c->plan.config_count > 0 ? (uint32_t)c->plan.config_count : 1u;
        status = allocate(c, metric_count);
        if (status != FLARE_OK) {
            snprintf(reason, reason_size, "out of host memory for %zu kernels", max_ranges);
        }
    }
    if (status != FLARE_OK) {
        /* replay_range calls end only after a prepare that returned passes. */
        collection_release(c);
        pthread_mutex_lock(&collection_lock);
        c->busy = false;
        pthread_mutex_unlock(&collection_lock);
        return status;
    }
    core_log(CORE_LOG_INFO,
             "range replay by PM sampling: %zu metrics in %zu configurations (%u passes), "
             "interval %llu ns, kernels under %llu ns get no value",
             metric_count, c->plan.config_count, c->passes,
             (unsigned long long)c->method.pm_interval_ns,
             (unsigned long long)c->method.pm_min_kernel_ns);
    return (int)c->passes;
}

static int collector_prepare(const flare_replay_launch *launch, const char *const *metrics,
                             size_t metric_count, char *reason, size_t reason_size)
{
    (void)launch;
    (void)metrics;
    (void)metric_count;
    snprintf(reason, reason_size,
             "PM sampling measures spans of work only (flare replay --range ... --method pm)");
    return FLARE_ERR_UNSUPPORTED;
}

static void collector_end(const flare_replay_launch *launch)
{
    (void)launch;
    collection_release(&state);
    pthread_mutex_lock(&collection_lock);
    state.busy = false;
    pthread_mutex_unlock(&collection_lock);
}

/* ---- passes ---- */

static void start_sampling(collection *c, size_t config)
{
    const replay_plan *plan = &c->plan;
    pm_preset *preset = &c->preset;
    memset(preset, 0, sizeof *preset);
    preset->name = "replay";
    preset->summary = "a configuration of range replay by PM sampling";
    preset->metric_count = plan->config_sizes[config];
    for (size_t slot = 0; slot < preset->metric_count; slot++) {
        const char *name = plan->names[plan->config_metrics[config][slot]];
        preset->metrics[slot].label = name;
        preset->metrics[slot].candidates[0] = name;
    }
    char reason[256] = "";
    if (pm_engine_create(c->hw_ops, c->hw, c->context_id, &c->engine) != FLARE_OK) {
        note_failure(c, "%s", "no memory for a PM sampling engine");
        return;
    }
    backend_engine_config window = {.sample_interval_ns = c->method.pm_interval_ns,
                                    .label = "range replay",
                                    .window_id = config + 1};
    pm_engine_set_image_samples(c->engine, IMAGE_SAMPLES);
    int status = pm_engine_prepare(c->engine, c->device, preset, c->method.pm_interval_ns, reason,
                                   sizeof reason);
    if (status == FLARE_OK) {
        /* No decoding while the work runs: decoding and evaluating a
         * sample takes about 53 us on the H200, so at 10 us the decoder
         * falls behind, and what it did not take in time was gone without
         * an overflow (session 22). The stop decodes the whole pass. */
        pm_engine_pause_decode(c->engine, 1);
        pm_engine_read_all_at_disarm(c->engine, 1);
        status = pm_engine_arm(c->engine, c->device, &window, core_now_ns(), reason, sizeof reason);
    }
    if (status != FLARE_OK) {
        note_failure(c, "PM sampling: %.140s", reason[0] != '\0' ? reason : "could not start");
        pm_engine_destroy(c->engine);
        c->engine = NULL;
        return;
    }
    c->armed = true;
    c->armed_ns = core_now_ns();
}

static int collector_pass_begin(const flare_replay_launch *span, uint32_t pass)
{
    (void)span;
    collection *c = &state;
    c->sample_count = 0;
    c->armed = false;
    c->timing = false;
    memset(c->starts, 0, c->kernel_count * sizeof *c->starts);
    memset(c->ends, 0, c->kernel_count * sizeof *c->ends);
    if (pass < c->plan.config_count) {
        start_sampling(c, pass);
    }
    char reason[256] = "";
    if (c->ops->kernel_times_begin(c->device, c->kernel_count, reason, sizeof reason) == FLARE_OK) {
        c->timing = true;
    } else {
        note_failure(c, "kernel times: %.140s", reason);
    }
    if (c->armed) {
        sleep_ns(SETTLE_NS + 2 * c->method.pm_interval_ns);
    }
    return FLARE_OK;
}

/* Takes every sample the engine delivered into c->samples (the rest, past
 * its capacity, counted as lost). */
static void take_samples(collection *c)
{
    size_t taken;
    while ((taken = pm_engine_take(c->engine, c->take, TAKE_CHUNK)) > 0) {
        for (size_t index = 0; index < taken; index++) {
            const pm_queue_entry *entry = &c->take[index];
            if (entry->is_decode_end) {
                continue;
            }
            if (c->sample_count == PM_QUEUE_CAPACITY) {
                c->samples_lost++;
                continue;
            }
            pass_sample *sample = &c->samples[c->sample_count++];
            sample->start_ns = entry->sample.start_ns;
            sample->end_ns = entry->sample.end_ns;
            sample->flags = entry->sample.flags;
            memcpy(sample->values, entry->sample.values, sizeof sample->values);
        }
    }
    pm_engine_stats stats;
    pm_engine_stats_get(c->engine, &stats);
    c->samples_total += c->sample_count;
    c->samples_lost += stats.samples_lost + stats.queue_drops + stats.samples_discarded;
}

static const char *status_name(attrib_integral_status status)
{
    switch (status) {
    case ATTRIB_INTEGRAL_MEASURED:
        return "measured";
    case ATTRIB_INTEGRAL_FLAGGED:
        return "flagged";
    case ATTRIB_INTEGRAL_UNCOVERED:
        return "uncovered";
    case ATTRIB_INTEGRAL_BELOW_MINIMUM:
        return "below-minimum";
    }
    return "uncovered";
}

static void set_note(replay_value_note *note, const char *method, const char *status, double bound,
                     uint32_t samples)
{
    snprintf(note->method, sizeof note->method, "%s", method);
    snprintf(note->status, sizeof note->status, "%s", status);
    note->error_bound = bound;
    note->samples = samples;
}

/* Each kernel's value of the configuration's metric at slot. */
static void integrate_metric(collection *c, size_t metric, size_t slot)
{
    size_t metric_count = c->plan.metric_count;
    int additive = pm_replay_metric_additive(c->plan.names[metric]);
    for (size_t index = 0; index < c->sample_count; index++) {
        c->series[index] = (attrib_pm_sample){.start_ns = c->samples[index].start_ns,
                                              .end_ns = c->samples[index].end_ns,
                                              .value = c->samples[index].values[slot],
                                              .flags = c->samples[index].flags};
    }
    for (size_t kernel = 0; kernel < c->kernel_count; kernel++) {
        replay_value_note *note = &c->notes[kernel * metric_count + metric];
        double *value = &c->values[kernel * metric_count + metric];
        if (c->ends[kernel] == 0 || c->ends[kernel] < c->starts[kernel]) {
            set_note(note, "pm-sampling", "untimed", NAN, 0);
            continue;
        }
        attrib_integral out;
        if (attrib_integrate(c->series, c->sample_count, c->starts[kernel], c->ends[kernel],
                             additive, c->method.pm_min_kernel_ns, &out) != 0) {
            set_note(note, "pm-sampling", "untimed", NAN, 0);
            continue;
        }
        bool valued =
            out.status == ATTRIB_INTEGRAL_MEASURED || out.status == ATTRIB_INTEGRAL_FLAGGED;
        *value = valued ? out.value : NAN;
        set_note(note, "pm-sampling", status_name(out.status), valued ? out.error_bound : NAN,
                 out.samples);
    }
}

static void integrate_pass(collection *c, uint32_t pass, bool sampled)
{
    const replay_plan *plan = &c->plan;
    for (size_t kernel = 0; kernel < c->kernel_count; kernel++) {
        c->durations[(size_t)pass * c->kernel_count + kernel] =
            c->ends[kernel] > c->starts[kernel] ? c->ends[kernel] - c->starts[kernel] : 0;
    }
    if (pass >= plan->config_count) {
        return;
    }
    for (size_t slot = 0; slot < plan->config_sizes[pass]; slot++) {
        size_t metric = plan->config_metrics[pass][slot];
        if (sampled) {
            integrate_metric(c, metric, slot);
            continue;
        }
        for (size_t kernel = 0; kernel < c->kernel_count; kernel++) {
            set_note(&c->notes[kernel * plan->metric_count + metric], "pm-sampling", "failed", NAN,
                     0);
        }
    }
}

static int collector_pass_end(const flare_replay_launch *span, uint32_t pass)
{
    (void)span;
    collection *c = &state;
    bool sampled = c->armed;
    if (c->armed) {
        sleep_ns(TAIL_INTERVALS * c->method.pm_interval_ns);
        uint64_t stopped = core_now_ns();
        pm_engine_disarm(c->engine, c->device, stopped, NULL);
        c->armed = false;
        uint64_t lost_before = c->samples_lost;
        take_samples(c);
        uint64_t lost = c->samples_lost - lost_before;
        /* What the interval should have given and did not come: the
         * hardware drops samples it has no room for without a word. */
        uint64_t expected = (stopped - c->armed_ns) / c->method.pm_interval_ns;
        if (expected > c->sample_count + lost + 1)
            c->samples_missing += expected - c->sample_count - lost - 1;
    }
    if (c->engine != NULL) {
        pm_engine_destroy(c->engine); /* disables sampling: the next pass configures anew */
        c->engine = NULL;
    }
    if (c->timing) {
        size_t found = 0;
        if (c->ops->kernel_times_end(c->device, c->starts, c->ends, c->kernel_count, &found,
                                     TIMES_WAIT_NS) != FLARE_OK) {
            char detail[96];
            snprintf(detail, sizeof detail, "%zu of %zu kernels' records", found, c->kernel_count);
            note_failure(c, "kernel times: only %s came", detail);
        }
        c->timing = false;
    }
    integrate_pass(c, pass, sampled);
    return FLARE_OK;
}

/* ---- results ---- */

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The kernel's time: the median of its passes' times; the bound half
 * their spread. */
static void duration_value(collection *c, size_t kernel, double *value, replay_value_note *note)
{
    uint64_t times[PM_REPLAY_PASSES_MAX];
    size_t count = 0;
    for (uint32_t pass = 0; pass < c->passes && count < PM_REPLAY_PASSES_MAX; pass++) {
        uint64_t time = c->durations[(size_t)pass * c->kernel_count + kernel];
        if (time != 0) {
            times[count++] = time;
        }
    }
    if (count == 0) {
        set_note(note, "kernel-activity", "untimed", NAN, 0);
        return;
    }
    qsort(times, count, sizeof times[0], compare_u64);
    *value = count % 2 == 1 ? (double)times[count / 2]
                            : ((double)times[count / 2 - 1] + (double)times[count / 2]) / 2.0;
    set_note(note, "kernel-activity", "measured", (double)(times[count - 1] - times[0]) / 2.0, 0);
}

/* What the record's reason says of the collection. */
static void summarize(collection *c, size_t range_count, char *reason, size_t reason_size)
{
    size_t measured = 0, flagged = 0, uncovered = 0, untimed = 0, short_kernels = 0;
    size_t unsampled = 0, failed = 0;
    size_t metric_count = c->plan.metric_count;
    for (size_t m = 0; m < metric_count; m++) {
        unsampled += c->plan.roles[m] == ROLE_UNSAMPLED;
    }
    for (size_t kernel = 0; kernel < range_count && c->plan.config_count > 0; kernel++) {
        /* A kernel counts once, by its first sampled metric whose pass
         * sampled; failed when none did. */
        const char *status = "failed";
        for (size_t m = 0; m < metric_count && strcmp(status, "failed") == 0; m++) {
            if (c->plan.roles[m] == ROLE_SAMPLED) {
                status = c->notes[kernel * metric_count + m].status;
            }
        }
        measured += strcmp(status, "measured") == 0;
        flagged += strcmp(status, "flagged") == 0;
        uncovered += strcmp(status, "uncovered") == 0;
        untimed += strcmp(status, "untimed") == 0;
        short_kernels += strcmp(status, "below-minimum") == 0;
        failed += strcmp(status, "failed") == 0;
    }
    char interval[32], minimum[32];
    core_duration_format(c->method.pm_interval_ns, interval, sizeof interval);
    core_duration_format(c->method.pm_min_kernel_ns, minimum, sizeof minimum);
    snprintf(reason, reason_size,
             "PM sampling every %s, %zu configurations: %zu kernels measured, %zu flagged, %zu "
             "uncovered, %zu untimed, %zu failed, %zu under %s (no value); %llu samples, %llu "
             "lost, %llu missing; %zu metrics not sampled%s%.80s",
             interval, c->plan.config_count, measured, flagged, uncovered, untimed, failed,
             short_kernels, minimum, (unsigned long long)c->samples_total,
             (unsigned long long)c->samples_lost, (unsigned long long)c->samples_missing, unsampled,
             c->failure[0] != '\0' ? "; " : "", c->failure);
}

static int collector_finish_ranges(const flare_replay_launch *span,
                                   const flare_replay_launch *ranges, size_t range_count,
                                   double *values, size_t metric_count, char *reason,
                                   size_t reason_size)
{
    (void)span;
    (void)ranges;
    collection *c = &state;
    if (range_count > c->kernel_count || metric_count != c->plan.metric_count) {
        snprintf(reason, reason_size, "PM sampling: %zu kernels where %zu were prepared",
                 range_count, c->kernel_count);
        return FLARE_ERR_STATE;
    }
    for (size_t kernel = 0; kernel < range_count; kernel++) {
        for (size_t m = 0; m < metric_count; m++) {
            size_t cell = kernel * metric_count + m;
            if (c->plan.roles[m] == ROLE_DURATION) {
                duration_value(c, kernel, &c->values[cell], &c->notes[cell]);
            } else if (c->plan.roles[m] == ROLE_UNSAMPLED) {
                set_note(&c->notes[cell], "pm-sampling", "not-sampled", NAN, 0);
            }
            values[cell] = c->values[cell];
        }
    }
    summarize(c, range_count, reason, reason_size);
    return FLARE_OK;
}

static void collector_finish_notes(const flare_replay_launch *span, size_t range_count,
                                   replay_value_note *notes, size_t metric_count)
{
    (void)span;
    collection *c = &state;
    if (range_count > c->kernel_count || metric_count != c->plan.metric_count) {
        return;
    }
    memcpy(notes, c->notes, range_count * metric_count * sizeof *notes);
}

static const replay_metric_collector collector = {
    .name = "pm-sampling",
    .prepare = collector_prepare,
    .pass_begin = collector_pass_begin,
    .pass_end = collector_pass_end,
    .finish = NULL,
    .prepare_span = collector_prepare_span,
    .finish_ranges = collector_finish_ranges,
    .end = collector_end,
    .finish_notes = collector_finish_notes,
};

const replay_metric_collector *pm_replay_collector(void)
{
    return &collector;
}
