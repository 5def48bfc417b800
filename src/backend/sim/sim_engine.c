/*
 * sim_engine.c: the simulated device's deep engines (sim.h, sim_pm.h).
 *
 * Two engines. sim_engine() stands in for PM sampling so the window
 * coordinator can be exercised with fake time: arming records a start time,
 * disarming turns the armed time into a count of synthetic samples, and a
 * fault makes arming fail with a reason; it never reads a clock.
 * sim_pm_engine() is simulated PM hardware behind the real engine
 * (pm/pm_engine.c): samples with times, a finite hardware buffer that
 * overflows, a finite counter-data image that fills, failing decodes; its
 * samples take the same decode, attribution and store path as CUDA's. It
 * reads the clock as hardware would (to know which samples exist by now).
 * Neither may block beyond its own short mutexes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/sim/sim.h"
#include "backend/sim/sim_busy.h"
#include "backend/sim/sim_pm.h"
#include "core/capability.h"
#include "core/clock.h"
#include "flare/flare.h"
#include "pm/pm_session.h"

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static int engine_armed;         /* guarded by engine_lock */
static int engine_device;        /* the device armed; guarded */
static uint64_t engine_armed_ns; /* guarded */
static uint64_t engine_interval_ns;
static int engine_fail;
static char engine_fail_reason[256];
static sim_engine_stats engine_stats;

static void refusal_reason(char *reason, size_t reason_size)
{
    if (reason != NULL && reason_size > 0)
        snprintf(reason, reason_size, "%s",
                 engine_fail_reason[0] != '\0' ? engine_fail_reason
                                               : "simulated engine refused to arm (fault)");
}

static int engine_check_device(int device, char *reason, size_t reason_size)
{
    int devices = sim_backend()->device_count();
    if (device < -1 || device >= devices) {
        if (reason != NULL && reason_size > 0)
            snprintf(reason, reason_size, "no simulated device %d (%d exist)", device, devices);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    return FLARE_OK;
}

static int engine_probe(int device, char *reason, size_t reason_size)
{
    int status = engine_check_device(device, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    pthread_mutex_lock(&engine_lock);
    if (engine_fail) {
        refusal_reason(reason, reason_size);
        status = FLARE_ERR_UNSUPPORTED;
    }
    pthread_mutex_unlock(&engine_lock);
    return status;
}

static int engine_arm(int device, const backend_engine_config *config, uint64_t now_ns,
                      char *reason, size_t reason_size)
{
    int status = engine_check_device(device, reason, reason_size);
    if (status != FLARE_OK)
        return status;
    pthread_mutex_lock(&engine_lock);
    if (engine_fail) {
        refusal_reason(reason, reason_size);
        status = FLARE_ERR_UNSUPPORTED;
    } else if (engine_armed) {
        /* One collection at a time, as the hardware's counters allow. */
        if (reason != NULL && reason_size > 0)
            snprintf(reason, reason_size, "simulated engine already armed");
        status = FLARE_ERR_STATE;
    } else {
        engine_armed = 1;
        engine_device = device;
        engine_armed_ns = now_ns;
        engine_interval_ns = config != NULL && config->sample_interval_ns != 0
                                 ? config->sample_interval_ns
                                 : SIM_ENGINE_SAMPLE_INTERVAL_NS;
        engine_stats.arms++;
    }
    if (status != FLARE_OK)
        engine_stats.refusals++;
    pthread_mutex_unlock(&engine_lock);
    return status;
}

static int engine_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    pthread_mutex_lock(&engine_lock);
    if (!engine_armed || engine_device != device) {
        pthread_mutex_unlock(&engine_lock);
        return FLARE_ERR_STATE;
    }
    engine_armed = 0;
    engine_stats.disarms++;
    if (result != NULL) {
        result->armed_ns = engine_armed_ns;
        result->disarmed_ns = now_ns;
        result->samples =
            now_ns > engine_armed_ns ? (now_ns - engine_armed_ns) / engine_interval_ns : 0;
    }
    pthread_mutex_unlock(&engine_lock);
    return FLARE_OK;
}

/* The simulated device's PM engines cost nothing real: nominal figures, so
 * engine auto can be exercised (docs/windows.md, "Engine auto"). */
#define SIM_PM_COST_LAUNCH_NS 500u
#define SIM_PM_COST_GPU       0.01
#define SIM_COST_SOURCE       "simulated device (nominal)"

static const backend_engine_ops sim_engine_ops = {
    .name = "sim-pm",
    .arm = engine_arm,
    .disarm = engine_disarm,
    .probe = engine_probe,
    .cost_launch_ns = SIM_PM_COST_LAUNCH_NS,
    .cost_gpu = SIM_PM_COST_GPU,
    .cost_source = SIM_COST_SOURCE,
};

const backend_engine_ops *sim_engine(void)
{
    return &sim_engine_ops;
}

void sim_engine_fault_set(int fail, const char *reason)
{
    pthread_mutex_lock(&engine_lock);
    engine_fail = fail;
    snprintf(engine_fail_reason, sizeof(engine_fail_reason), "%s", reason != NULL ? reason : "");
    pthread_mutex_unlock(&engine_lock);
}

void sim_engine_stats_get(sim_engine_stats *stats)
{
    pthread_mutex_lock(&engine_lock);
    *stats = engine_stats;
    stats->armed = engine_armed;
    pthread_mutex_unlock(&engine_lock);
}

void sim_engine_reset(void)
{
    pthread_mutex_lock(&engine_lock);
    engine_fail = 0;
    engine_fail_reason[0] = '\0';
    engine_stats = (sim_engine_stats){0};
    engine_armed = 0;
    pthread_mutex_unlock(&engine_lock);
}

/* ---- simulated PM hardware (sim_pm.h) ---- */

typedef struct sim_pm_record {
    uint64_t start, end;
    uint64_t number; /* global sample number: values derive from it */
} sim_pm_record;

typedef struct sim_pm_hardware {
    pthread_mutex_t lock;
    int prepared, running;
    int device;
    uint64_t interval_ns;
    size_t metric_count;
    uint32_t buffer_capacity; /* samples */
    uint32_t image_capacity;
    sim_pm_record *image; /* image_capacity records; reused by every decode */
    size_t image_count;
    uint64_t next_start; /* flare clock: the next sample the hardware will take */
    uint64_t stop_at;    /* 0 while running */
    uint64_t buffered;   /* samples waiting in the hardware buffer */
    uint64_t buffered_first_start;
    uint64_t next_number;
    uint64_t taken; /* since the last start, kept or lost (sim_pm_samples_taken) */
    int overflowed;
    int overflow_once;   /* the buffer stops filling once its overflow is decoded */
    int64_t clock_shift; /* added to every time stamped (realtime clock fault) */
    /* Replay's instance: metric m is always (m + 1) times the kernels' busy
     * ns, as values_from_kernels makes the windows' one. */
    int busy_values;
} sim_pm_hardware;

static sim_pm_hardware pm_hardware = {.lock = PTHREAD_MUTEX_INITIALIZER};
/* Range replay's own (pm/pm_replay.h), never the windows' one. */
static sim_pm_hardware replay_pm_hardware = {.lock = PTHREAD_MUTEX_INITIALIZER, .busy_values = 1};
static sim_pm_faults pm_faults;
static pthread_mutex_t pm_engine_lock = PTHREAD_MUTEX_INITIALIZER;
static pm_engine *pm_core;

static int64_t realtime_shift(void)
{
    struct timespec real;
    clock_gettime(CLOCK_REALTIME, &real);
    return (int64_t)((uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec) -
           (int64_t)core_now_ns();
}

static int sim_pm_hw_prepare(void *hardware, int device, const pm_preset *preset,
                             uint64_t interval_ns, uint32_t image_samples,
                             pm_resolved_metrics *resolved, char *reason, size_t reason_size)
{
    sim_pm_hardware *hw = hardware;
    int devices = sim_backend()->device_count();
    if (device < 0 || device >= devices) {
        snprintf(reason, reason_size, "no simulated device %d (%d exist)", device, devices);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&hw->lock);
    if (pm_faults.refuse_prepare) {
        pthread_mutex_unlock(&hw->lock);
        snprintf(reason, reason_size,
                 "preset '%s' needs 2 passes; PM sampling takes single-pass presets only",
                 preset->name);
        return FLARE_ERR_UNSUPPORTED;
    }
    uint32_t capacity = pm_faults.image_samples != 0 ? pm_faults.image_samples : image_samples;
    free(hw->image);
    hw->image = calloc(capacity, sizeof(*hw->image));
    if (hw->image == NULL) {
        pthread_mutex_unlock(&hw->lock);
        snprintf(reason, reason_size, "no memory for a counter-data image of %u samples", capacity);
        return FLARE_ERR_NO_MEMORY;
    }
    hw->image_capacity = capacity;
    hw->buffer_capacity =
        pm_faults.hardware_buffer_samples != 0 ? pm_faults.hardware_buffer_samples : 100000u;
    hw->device = device;
    hw->interval_ns = interval_ns;
    hw->metric_count = preset->metric_count;
    hw->prepared = 1;
    if (hw->busy_values)
        sim_busy_enable(1);
    resolved->count = preset->metric_count;
    for (size_t m = 0; m < preset->metric_count; m++) {
        snprintf(resolved->labels[m], sizeof(resolved->labels[m]), "%s", preset->metrics[m].label);
        snprintf(resolved->hardware[m], sizeof(resolved->hardware[m]), "%s",
                 preset->metrics[m].candidates[0]);
    }
    pthread_mutex_unlock(&hw->lock);
    return FLARE_OK;
}

static int sim_pm_hw_start(void *hardware, char *reason, size_t reason_size)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    int status = FLARE_OK;
    if (!hw->prepared || hw->running) {
        snprintf(reason, reason_size, "simulated PM hardware is %s",
                 hw->running ? "already started" : "not prepared");
        status = FLARE_ERR_STATE;
    } else {
        hw->running = 1;
        hw->stop_at = 0;
        hw->next_start = core_now_ns();
        hw->buffered = 0;
        hw->taken = 0;
        hw->overflowed = 0;
        hw->overflow_once = pm_faults.overflow_once;
        hw->image_count = 0;
        hw->clock_shift = pm_faults.realtime_clock ? realtime_shift() : 0;
    }
    pthread_mutex_unlock(&hw->lock);
    return status;
}

/* lock held: the samples the hardware took up to now go into its buffer;
 * those that find it full are lost (KEEP_OLDEST) and flag an overflow. */
static void sim_pm_produce(sim_pm_hardware *hw)
{
    if (hw->next_start == 0)
        return;
    uint64_t limit = hw->stop_at != 0 ? hw->stop_at : core_now_ns();
    while (hw->next_start + hw->interval_ns <= limit) {
        if (hw->buffered < hw->buffer_capacity) {
            if (hw->buffered == 0)
                hw->buffered_first_start = hw->next_start;
            hw->buffered++;
        } else {
            hw->overflowed = 1;
        }
        hw->next_start += hw->interval_ns;
        hw->next_number++;
        hw->taken++;
    }
}

static int sim_pm_hw_stop(void *hardware, char *reason, size_t reason_size)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    int status = FLARE_OK;
    if (!hw->running) {
        snprintf(reason, reason_size, "simulated PM hardware is not started");
        status = FLARE_ERR_STATE;
    } else {
        hw->stop_at = core_now_ns();
        sim_pm_produce(hw);
        hw->running = 0;
    }
    pthread_mutex_unlock(&hw->lock);
    return status;
}

static void sim_pm_hw_decode(void *hardware, pm_hardware_decode *result)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    if (pm_faults.fail_decodes > 0) {
        pm_faults.fail_decodes--;
        result->failed = 1;
        snprintf(result->reason, sizeof(result->reason), "simulated decode failure");
        pthread_mutex_unlock(&hw->lock);
        return;
    }
    sim_pm_produce(hw);
    /* The buffer holds samples [first, first + buffered) in time order; the
     * ones before them were decoded, the ones after lost or not taken yet. */
    while (hw->buffered > 0 && hw->image_count < hw->image_capacity) {
        sim_pm_record *record = &hw->image[hw->image_count++];
        record->start = hw->buffered_first_start;
        record->end = record->start + hw->interval_ns;
        record->number = hw->next_number; /* any deterministic value will do */
        hw->buffered_first_start += hw->interval_ns;
        hw->buffered--;
    }
    result->overflow = hw->overflowed;
    if (hw->overflowed && hw->overflow_once)
        hw->buffer_capacity = UINT32_MAX; /* about five days of samples at 100 us */
    hw->overflowed = 0;
    if (hw->buffered > 0) {
        result->counter_data_full = 1;
    } else {
        result->end_of_records = 1;
        /* Samples lost to the overflow are gone: the next one taken starts
         * after the hole, which is how the engine sees the gap. */
    }
    pthread_mutex_unlock(&hw->lock);
}

static size_t sim_pm_hw_sample_count(void *hardware)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    size_t count = hw->image_count;
    pthread_mutex_unlock(&hw->lock);
    return count;
}

static int sim_pm_hw_sample_read(void *hardware, size_t index, uint64_t *start, uint64_t *end,
                                 double *values)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    int status = FLARE_ERR_INVALID_ARGUMENT;
    if (index < hw->image_count) {
        const sim_pm_record *record = &hw->image[index];
        *start = (uint64_t)((int64_t)record->start + hw->clock_shift);
        *end = (uint64_t)((int64_t)record->end + hw->clock_shift);
        /* Deterministic values: metric m of the sample starting at t, or
         * the kernels' busy time in it (values_from_kernels). */
        int from_kernels = pm_faults.values_from_kernels || hw->busy_values;
        uint64_t busy =
            from_kernels ? sim_busy_overlap_ns(hw->device, record->start, record->end) : 0;
        for (size_t m = 0; m < hw->metric_count && m < PM_METRICS_MAX; m++)
            values[m] = from_kernels ? (double)(busy * (m + 1))
                                     : (double)((record->start / hw->interval_ns * (m + 1)) % 1000);
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&hw->lock);
    return status;
}

static int sim_pm_hw_image_reset(void *hardware)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    hw->image_count = 0;
    pthread_mutex_unlock(&hw->lock);
    return FLARE_OK;
}

static void sim_pm_hw_release(void *hardware)
{
    sim_pm_hardware *hw = hardware;
    pthread_mutex_lock(&hw->lock);
    free(hw->image);
    hw->image = NULL;
    hw->image_capacity = 0;
    hw->prepared = 0;
    hw->running = 0;
    if (hw->busy_values)
        sim_busy_enable(pm_faults.values_from_kernels);
    pthread_mutex_unlock(&hw->lock);
}

/* What the simulated hardware samples: counts (.sum, .avg, .max, .min),
 * no rates or shares; four metrics a pass. */
#define SIM_PM_METRICS_PER_PASS 4

static int sim_pm_hw_plan(void *hardware, int device, const char *const *names, size_t count,
                          size_t *passes, size_t *unknown, char *reason, size_t reason_size)
{
    (void)hardware;
    if (device < 0 || device >= sim_backend()->device_count()) {
        snprintf(reason, reason_size, "no simulated device %d", device);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    for (size_t index = 0; index < count; index++) {
        const char *dot = strrchr(names[index], '.');
        int count_like = dot != NULL && (strcmp(dot, ".sum") == 0 || strcmp(dot, ".avg") == 0 ||
                                         strcmp(dot, ".max") == 0 || strcmp(dot, ".min") == 0);
        if (!count_like || strstr(names[index], "pct") != NULL) {
            *unknown = index;
            snprintf(reason, reason_size, "the simulated PM hardware has no %s", names[index]);
            return FLARE_ERR_NOT_FOUND;
        }
    }
    *passes = (count + SIM_PM_METRICS_PER_PASS - 1) / SIM_PM_METRICS_PER_PASS;
    return FLARE_OK;
}

static const pm_hardware_ops sim_pm_hardware_ops = {
    .name = "sim-pm-sampling",
    .prepare = sim_pm_hw_prepare,
    .start = sim_pm_hw_start,
    .stop = sim_pm_hw_stop,
    .decode = sim_pm_hw_decode,
    .sample_count = sim_pm_hw_sample_count,
    .sample_read = sim_pm_hw_sample_read,
    .image_reset = sim_pm_hw_image_reset,
    .release = sim_pm_hw_release,
    .clock_offset = NULL,
    .plan = sim_pm_hw_plan,
};

const pm_hardware_ops *sim_pm_replay_hardware(int device, void **hardware, uint64_t *context_id)
{
    if (device < 0 || device >= sim_backend()->device_count())
        return NULL;
    *hardware = &replay_pm_hardware;
    *context_id = SIM_PM_REPLAY_CONTEXT_ID;
    return &sim_pm_hardware_ops;
}

void sim_pm_set_faults(const sim_pm_faults *faults)
{
    pthread_mutex_lock(&pm_hardware.lock);
    pm_faults = faults != NULL ? *faults : (sim_pm_faults){0};
    sim_busy_enable(pm_faults.values_from_kernels);
    pthread_mutex_unlock(&pm_hardware.lock);
}

/* pm_engine_lock held. */
static pm_engine *core_locked(void)
{
    if (pm_core == NULL && pm_engine_create(&sim_pm_hardware_ops, &pm_hardware, SIM_PM_CONTEXT_ID,
                                            &pm_core) == FLARE_OK)
        pm_session_register_engine(pm_core);
    return pm_core;
}

pm_engine *sim_pm_core(void)
{
    pthread_mutex_lock(&pm_engine_lock);
    pm_engine *engine = pm_core;
    pthread_mutex_unlock(&pm_engine_lock);
    return engine;
}

int sim_pm_prepare(int device, const char *preset_name, uint64_t interval_ns, char *reason,
                   size_t reason_size)
{
    const pm_preset *preset = NULL;
    uint64_t interval = 0;
    char error[256] = "";
    int status = pm_settings_from_environment(&preset, &interval, error, sizeof(error));
    if (status == FLARE_OK && preset_name != NULL &&
        (preset = pm_preset_find(preset_name)) == NULL) {
        snprintf(error, sizeof(error), "'%s' is not a preset (presets: %s)", preset_name,
                 pm_preset_names());
        status = FLARE_ERR_INVALID_ARGUMENT;
    }
    if (interval_ns != 0)
        interval = interval_ns;
    pthread_mutex_lock(&pm_engine_lock);
    pm_engine *engine = core_locked();
    if (engine == NULL) {
        pthread_mutex_unlock(&pm_engine_lock);
        snprintf(reason, reason_size, "no memory for the simulated PM engine");
        return FLARE_ERR_NO_MEMORY;
    }
    if (status != FLARE_OK) {
        pm_engine_mark_failed(engine, error);
        snprintf(reason, reason_size, "%s", error);
    } else if (pm_engine_state_get(engine) == PM_ENGINE_PREPARED ||
               pm_engine_state_get(engine) == PM_ENGINE_ARMED) {
        status = FLARE_OK;
    } else {
        status = pm_engine_prepare(engine, device, preset, interval, reason, reason_size);
    }
    pthread_mutex_unlock(&pm_engine_lock);
    if (status == FLARE_OK)
        core_capability_set("pm_sampling", 1, CORE_CAPABILITY_ACTIVE,
                            "simulated PM sampling on device %d: preset %s every %llu ns", device,
                            preset->name, (unsigned long long)interval);
    else
        core_capability_set("pm_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
    return status;
}

/* Prepared lazily (device 0) when a window comes before any prepare. */
static pm_engine *prepared_engine(char *reason, size_t reason_size)
{
    pm_engine *engine = sim_pm_core();
    if (engine == NULL || pm_engine_state_get(engine) == PM_ENGINE_UNPREPARED) {
        char ignored[256];
        sim_pm_prepare(0, NULL, 0, ignored, sizeof(ignored));
        engine = sim_pm_core();
    }
    if (engine == NULL && reason != NULL)
        snprintf(reason, reason_size, "no memory for the simulated PM engine");
    return engine;
}

static int sim_pm_arm(int device, const backend_engine_config *config, uint64_t now_ns,
                      char *reason, size_t reason_size)
{
    pm_engine *engine = prepared_engine(reason, reason_size);
    if (engine == NULL)
        return FLARE_ERR_NO_MEMORY;
    return pm_engine_arm(engine, device, config, now_ns, reason, reason_size);
}

static int sim_pm_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    pm_engine *engine = sim_pm_core();
    if (engine == NULL)
        return FLARE_ERR_STATE;
    return pm_engine_disarm(engine, device, now_ns, result);
}

static int sim_pm_probe(int device, char *reason, size_t reason_size)
{
    pm_engine *engine = prepared_engine(reason, reason_size);
    if (engine == NULL)
        return FLARE_ERR_NO_MEMORY;
    return pm_engine_probe(engine, device, reason, reason_size);
}

static void sim_pm_prepare_ahead(int device)
{
    (void)device; /* prepared on device 0, as at a window's arm */
    prepared_engine(NULL, 0);
}

static const backend_engine_ops sim_pm_engine_ops = {
    .name = "sim-pm-sampling",
    .arm = sim_pm_arm,
    .disarm = sim_pm_disarm,
    .probe = sim_pm_probe,
    .prepare = sim_pm_prepare_ahead,
    .cost_launch_ns = SIM_PM_COST_LAUNCH_NS,
    .cost_gpu = SIM_PM_COST_GPU,
    .cost_source = SIM_COST_SOURCE,
};

const backend_engine_ops *sim_pm_engine(void)
{
    return &sim_pm_engine_ops;
}

uint64_t sim_pm_samples_taken(void)
{
    pthread_mutex_lock(&pm_hardware.lock);
    if (pm_hardware.running)
        sim_pm_produce(&pm_hardware);
    uint64_t taken = pm_hardware.taken;
    pthread_mutex_unlock(&pm_hardware.lock);
    return taken;
}

void sim_pm_reset(void)
{
    pthread_mutex_lock(&pm_engine_lock);
    pm_engine *engine = pm_core;
    pm_core = NULL;
    pthread_mutex_unlock(&pm_engine_lock);
    if (engine != NULL) {
        pm_session_unregister_engine(engine);
        pm_engine_destroy(engine);
    }
    sim_pm_set_faults(NULL);
}
