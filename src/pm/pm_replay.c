/*
 * pm_replay.c: range replay measured by PM sampling (pm_replay.h).
 *
 * The collector's calls all come from the span's own thread, one span at
 * a time in the process (a second is declined while one collects): the
 * state is one static collection, claimed and released under
 * collection_lock, which also guards the spare engine (taken at a pass's
 * begin and end and by the early set-up, never across an engine call). Each pass takes a PM engine
 * over the backend's replay hardware prepared for its configuration (CUPTI: enable, set the
 * configuration, size the image): the spare when it holds the first
 * configuration (set up early, or kept by the span before), else a new
 * one; arms it, lets the re-issued work run, then disarms and takes every
 * sample. A plan of one configuration keeps the engine as the spare; with
 * more, each pass destroys its own (disable).
 *
 * Must never: sum a flagged sample, leave an engine armed after end(),
 * keep one prepared but as the spare, or write past the arrays sized at
 * prepare.
 */
#include "pm/pm_replay.h"

#include "attrib/integrate.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pm/pm_engine.h"
#include "pm/pm_replay_plan.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    pm_engine *engine;
    bool armed, timing;
    uint64_t armed_ns;           /* this pass's start of sampling */
    pm_engine_stats armed_stats; /* the engine's counts at the arm (a kept engine's run on) */
    uint64_t begin_ns, prepared_ns, settled_ns; /* this pass's steps, for the log */
    uint64_t decode_call_ns, read_ns;           /* this pass's decode, for the log */
    bool stop_failed; /* this pass's stop was refused: its engine is not kept */
    uint64_t samples_total, samples_lost, samples_missing;
    char failure[160]; /* the first failure, for the reason */
} collection;

static pthread_mutex_t collection_lock = PTHREAD_MUTEX_INITIALIZER;
static collection state;

/* The engine kept between passes and spans (the "spare"): the first
 * configuration of engine_plan enabled and configured on a device, its
 * sampling stopped. Set up early (pm_replay_prepare_early) or kept after a
 * span of one configuration, it saves a pass CUPTI's enable and configure
 * (0.3-0.5 s on the H200) and the disable (50-90 ms). collection_lock. */
typedef enum spare_state {
    SPARE_NONE = 0,
    SPARE_PREPARING, /* the early set-up is building it: spans wait */
    SPARE_READY,
    SPARE_TAKEN, /* a pass samples with it */
} spare_state;
static struct {
    spare_state state;
    pm_engine *engine;
    int device;
    uint64_t interval_ns;
} spare;
static pthread_cond_t spare_changed; /* CLOCK_MONOTONIC, at the first use (spare_once) */
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
/* How long a span waits for the early set-up to finish. */
#define SPARE_WAIT_NS 60000000000ull
/* What the one live engine samples: the hardware keeps pointers to the
 * names, so both change only while no engine lives (at most one does). */
static replay_plan engine_plan;
static pm_preset engine_preset;
/* The early set-up's own (it runs while no span does: spare PREPARING). */
static collection early;

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

/* Destroys the spare engine when it is ready and drop(c) says so (NULL:
 * always). One being set up or sampling stays: callers wait for the set-up
 * first (spare_wait_locked) where it matters. */
static void spare_drop_if(bool (*drop)(const collection *c), const collection *c)
{
    pthread_mutex_lock(&collection_lock);
    pm_engine *engine = NULL;
    if (spare.state == SPARE_READY && (drop == NULL || drop(c))) {
        engine = spare.engine;
        spare.engine = NULL;
        spare.state = SPARE_NONE;
    }
    pthread_mutex_unlock(&collection_lock);
    if (engine != NULL) {
        pm_engine_destroy(engine); /* disables sampling */
    }
}

static void engine_put(collection *c, bool keep);

static void spare_init(void)
{
    core_cond_init_monotonic(&spare_changed);
}

/* Whether the spare cannot serve c's first pass (another device,
 * interval or first configuration). collection_lock held. */
static bool spare_unfit(const collection *c)
{
    return spare.device != c->device || spare.interval_ns != c->method.pm_interval_ns ||
           !pm_replay_plan_same_first(&engine_plan, &c->plan);
}

/* Waits (bounded) while the early set-up builds the spare: it holds the
 * hardware. collection_lock held. */
static int spare_wait_locked(char *reason, size_t reason_size)
{
    struct timespec deadline = core_deadline_after_ns(SPARE_WAIT_NS);
    while (spare.state == SPARE_PREPARING) {
        if (pthread_cond_timedwait(&spare_changed, &collection_lock, &deadline) != 0 &&
            spare.state == SPARE_PREPARING) {
            snprintf(reason, reason_size, "PM sampling's early set-up still running after 60 s");
            return FLARE_ERR_TIMEOUT;
        }
    }
    return FLARE_OK;
}

void pm_replay_reset_for_tests(void)
{
    pm_replay_plan_forget();
    spare_drop_if(NULL, NULL);
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

/* ---- prepare and end ---- */

static void collection_release(collection *c)
{
    if (c->timing) { /* a pass that never reached its end (an abort) */
        uint64_t none = 0;
        size_t found = 0;
        c->ops->kernel_times_end(c->device, &none, &none, 0, &found, 0);
        c->timing = false;
    }
    if (c->engine != NULL && c->armed) { /* an aborted pass: nothing of it is kept */
        pm_engine_disarm(c->engine, c->device, core_now_ns(), NULL);
    }
    engine_put(c, false);
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
    pthread_once(&spare_once, spare_init);
    pthread_mutex_lock(&collection_lock);
    if (state.busy) {
        pthread_mutex_unlock(&collection_lock);
        snprintf(reason, reason_size, "another span is being measured by PM sampling");
        return FLARE_ERR_STATE;
    }
    collection *c = &state;
    memset(c, 0, sizeof *c);
    c->busy = true;
    int status = spare_wait_locked(reason, reason_size);
    pthread_mutex_unlock(&collection_lock);
    c->device = span->device;
    c->kernel_count = max_ranges;
    replay_method_current(&c->method);
    if (status == FLARE_OK) {
        status = find_backend(c, span->device, reason, reason_size);
    }
    if (status == FLARE_OK) {
        /* New questions to the hardware would reconfigure the instance
         * under the spare: it goes first. */
        if (!pm_replay_plan_is_kept(c->device, metrics, metric_count)) {
            spare_drop_if(NULL, NULL);
        }
        status = pm_replay_plan_build(c->hw_ops, c->hw, c->device, metrics, metric_count, &c->plan,
                                      reason, reason_size);
        spare_drop_if(spare_unfit, c);
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

/* A new engine for configuration config of plan, prepared (CUPTI: enable,
 * set the configuration, size the image); NULL with reason. No other
 * engine may live (engine_plan changes). */
static pm_engine *engine_create(const collection *c, const replay_plan *plan, size_t config,
                                char *reason, size_t reason_size)
{
    engine_plan = *plan;
    pm_preset *preset = &engine_preset;
    memset(preset, 0, sizeof *preset);
    preset->name = "replay";
    preset->summary = "a configuration of range replay by PM sampling";
    preset->metric_count = engine_plan.config_sizes[config];
    for (size_t slot = 0; slot < preset->metric_count; slot++) {
        const char *name = engine_plan.names[engine_plan.config_metrics[config][slot]];
        preset->metrics[slot].label = name;
        preset->metrics[slot].candidates[0] = name;
    }
    pm_engine *engine = NULL;
    if (pm_engine_create(c->hw_ops, c->hw, c->context_id, &engine) != FLARE_OK) {
        snprintf(reason, reason_size, "no memory for a PM sampling engine");
        return NULL;
    }
    pm_engine_set_image_samples(engine, IMAGE_SAMPLES);
    if (pm_engine_prepare(engine, c->device, preset, c->method.pm_interval_ns, reason,
                          reason_size) != FLARE_OK) {
        pm_engine_destroy(engine);
        return NULL;
    }
    return engine;
}

/* The pass's engine goes: kept as the spare when the plan has one
 * configuration (the next pass or span re-arms it), else destroyed. */
static void engine_put(collection *c, bool keep)
{
    if (c->engine == NULL) {
        return;
    }
    pthread_mutex_lock(&collection_lock);
    if (keep) {
        spare.engine = c->engine;
        spare.state = SPARE_READY;
        spare.device = c->device;
        spare.interval_ns = c->method.pm_interval_ns;
    } else if (spare.state == SPARE_TAKEN) {
        spare.engine = NULL;
        spare.state = SPARE_NONE;
    }
    pthread_cond_broadcast(&spare_changed);
    pthread_mutex_unlock(&collection_lock);
    if (!keep) {
        pm_engine_destroy(c->engine); /* disables sampling */
    }
    c->engine = NULL;
}

static void start_sampling(collection *c, size_t config)
{
    char reason[256] = "";
    pthread_mutex_lock(&collection_lock);
    bool take = config == 0 && spare.state == SPARE_READY;
    if (take) {
        spare.state = SPARE_TAKEN;
        c->engine = spare.engine;
    }
    pthread_mutex_unlock(&collection_lock);
    if (!take) {
        c->engine = engine_create(c, &c->plan, config, reason, sizeof reason);
        if (c->engine == NULL) {
            note_failure(c, "PM sampling: %.140s", reason[0] != '\0' ? reason : "could not start");
            return;
        }
    }
    backend_engine_config window = {.sample_interval_ns = c->method.pm_interval_ns,
                                    .label = "range replay",
                                    .window_id = config + 1};
    /* No decoding while the work runs: decoding and evaluating a sample
     * takes 25-40 us on the H200, so at 10 us the decoder falls behind,
     * and what it did not take in time was gone without an overflow
     * (session 22). The stop decodes the whole pass. */
    pm_engine_pause_decode(c->engine, 1);
    pm_engine_read_all_at_disarm(c->engine, 1);
    if (pm_engine_arm(c->engine, c->device, &window, core_now_ns(), reason, sizeof reason) !=
        FLARE_OK) {
        note_failure(c, "PM sampling: %.140s", reason[0] != '\0' ? reason : "could not start");
        engine_put(c, false);
        return;
    }
    c->armed = true;
    c->armed_ns = core_now_ns();
    pm_engine_stats_get(c->engine, &c->armed_stats);
}

static int collector_pass_begin(const flare_replay_launch *span, uint32_t pass)
{
    (void)span;
    collection *c = &state;
    c->sample_count = 0;
    c->armed = false;
    c->timing = false;
    c->begin_ns = core_now_ns();
    c->decode_call_ns = c->read_ns = 0;
    c->stop_failed = false;
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
    c->prepared_ns = core_now_ns();
    if (c->armed) {
        sleep_ns(SETTLE_NS + 2 * c->method.pm_interval_ns);
    }
    c->settled_ns = core_now_ns();
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
    const pm_engine_stats *before = &c->armed_stats;
    c->samples_total += c->sample_count;
    c->samples_lost += (stats.samples_lost - before->samples_lost) +
                       (stats.queue_drops - before->queue_drops) +
                       (stats.samples_discarded - before->samples_discarded);
    c->decode_call_ns = stats.decode_call_ns - before->decode_call_ns;
    c->stop_failed = stats.stop_failures != before->stop_failures;
    c->read_ns = stats.read_ns - before->read_ns;
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
    uint64_t ran_ns = core_now_ns(), stopped = ran_ns, taken = ran_ns;
    if (c->armed) {
        sleep_ns(TAIL_INTERVALS * c->method.pm_interval_ns);
        stopped = core_now_ns();
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
        taken = core_now_ns();
    }
    /* One configuration: kept enabled for the next span (CUPTI decodes
     * nothing after a configuration switch on an enabled sampler, so with
     * more each pass enables its own). */
    engine_put(c, c->plan.config_count == 1 && !c->stop_failed);
    uint64_t destroyed = core_now_ns();
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
    uint64_t timed = core_now_ns();
    integrate_pass(c, pass, sampled);
    core_log(CORE_LOG_INFO,
             "range replay by PM sampling, pass %u: prepare %.1f ms, settle %.1f, work %.1f, "
             "tail %.1f, stop+decode+read %.1f (decode %.1f, read %.1f), release %.1f, kernel "
             "records %.1f, integrate %.1f; %zu samples",
             pass + 1, (c->prepared_ns - c->begin_ns) / 1e6, (c->settled_ns - c->prepared_ns) / 1e6,
             (ran_ns - c->settled_ns) / 1e6, (stopped - ran_ns) / 1e6, (taken - stopped) / 1e6,
             c->decode_call_ns / 1e6, c->read_ns / 1e6, (destroyed - taken) / 1e6,
             (timed - destroyed) / 1e6, (core_now_ns() - timed) / 1e6, c->sample_count);
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

int pm_replay_prepare_early(int device)
{
    replay_method_settings method;
    replay_method_current(&method);
    const char *const *names = NULL;
    size_t count = replay_selection_metrics(&names);
    if (method.method != REPLAY_METHOD_PM || count == 0) {
        return FLARE_ERR_STATE;
    }
    pthread_once(&spare_once, spare_init);
    pthread_mutex_lock(&collection_lock);
    if (state.busy || spare.state != SPARE_NONE) {
        pthread_mutex_unlock(&collection_lock);
        return FLARE_ERR_STATE;
    }
    spare.state = SPARE_PREPARING;
    pthread_mutex_unlock(&collection_lock);

    uint64_t began = core_now_ns();
    collection *c = &early;
    memset(c, 0, sizeof *c);
    c->device = device;
    c->method = method;
    char reason[256] = "";
    pm_engine *engine = NULL;
    int status = find_backend(c, device, reason, sizeof reason);
    if (status == FLARE_OK) {
        status = pm_replay_plan_build(c->hw_ops, c->hw, device, names, count, &c->plan, reason,
                                      sizeof reason);
    }
    if (status == FLARE_OK && c->plan.config_count > 0) {
        engine = engine_create(c, &c->plan, 0, reason, sizeof reason);
        status = engine != NULL ? FLARE_OK : FLARE_ERR_BACKEND;
    }
    pthread_mutex_lock(&collection_lock);
    spare.engine = engine;
    spare.state = engine != NULL ? SPARE_READY : SPARE_NONE;
    spare.device = device;
    spare.interval_ns = method.pm_interval_ns;
    pthread_cond_broadcast(&spare_changed);
    pthread_mutex_unlock(&collection_lock);
    if (status != FLARE_OK) {
        core_log(CORE_LOG_INFO,
                 "range replay by PM sampling: early set-up on device %d failed (%s); the first "
                 "span sets up instead",
                 device, reason);
        return status;
    }
    core_log(CORE_LOG_INFO,
             "range replay by PM sampling: set up early on device %d in %.1f ms (%zu "
             "configurations planned, the first enabled)",
             device, (core_now_ns() - began) / 1e6, c->plan.config_count);
    return FLARE_OK;
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
