/*
 * sim_engine.c: the simulated device's deep engine (sim.h, backend.h).
 *
 * Stands in for PM sampling so the window coordinator can be exercised end
 * to end without a GPU: arming records a start time, disarming turns the
 * armed time into a count of synthetic samples, and a fault makes arming
 * fail with a reason. It must never block beyond its own short mutex and
 * never read a clock: the caller passes the time in.
 */
#include <pthread.h>
#include <stdio.h>

#include "backend/sim/sim.h"
#include "flare/flare.h"

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

static const backend_engine_ops sim_engine_ops = {
    .name = "sim-pm",
    .arm = engine_arm,
    .disarm = engine_disarm,
    .probe = engine_probe,
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
