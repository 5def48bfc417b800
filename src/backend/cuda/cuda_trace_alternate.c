/*
 * cuda_trace_alternate.c: a benchmark's switch for what flare's tracing
 * costs a program, measured inside one process (issue 22;
 * bench/gpu_cupti_alternate.py --flare-trace). Separate processes on the
 * H200 host differ by 15-30% run to run, far more than the few percent in
 * question; blocks of one process a few hundred ms apart do not.
 *
 * With FLARE_TRACE_ALTERNATE_MS=N (20 to 5000), FLARE_TRACE_ALTERNATE_LOG=
 * PATH and FLARE_STORM_RATE=0 (the launch-storm guard switches the same
 * activity kinds) all set, a thread (flare-trace-alt) takes turns every N
 * ms between two states and writes each switch as "NS none" or "NS flare"
 * (CLOCK_MONOTONIC ns) to PATH:
 *   flare  everything this process's mode set up: the activity kinds flare
 *          enabled, every driver, runtime and NVTX callback it enabled
 *   none   all of those off (CUPTI loaded, subscribed, buffers registered),
 *          as bench/cupti_bare_inject.c's none state
 * The callbacks on at start are read back from CUPTI (cuptiGetCallbackState)
 * once, so "flare" restores exactly them. Records made while switching are
 * the benchmark's business: a range begun in one state may end in the
 * other. The session is a benchmark's, not a user's.
 *
 * The thread and its log are cuda_alternate.h's.
 *
 * Must never: run unless all three variables are set and valid (a bad value
 * is logged and nothing alternates), or leave the process in the none state
 * when a switch fails (it switches back and stops).
 */
#include "backend/cuda/cuda_trace_alternate.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_alternate.h"
#include "backend/cuda/cuda_storm.h"
#include "core/log.h"

/* Callback ids flare may have on, over the three domains it uses. */
#define ALTERNATE_IDS_MAX 512u

typedef struct enabled_id {
    CUpti_CallbackDomain domain;
    CUpti_CallbackId id;
} enabled_id;

static const cuda_cupti_api *cupti;
static CUpti_SubscriberHandle subscriber;
static enabled_id ids[ALTERNATE_IDS_MAX];
static size_t id_count;
static CUpti_ActivityKind kinds[CUDA_STORM_KINDS_MAX];
static size_t kind_count;

/* The callbacks on now in domain, from id 0 up to size. 0, or -1 when
 * there are more than fit. */
static int read_enabled(CUpti_CallbackDomain domain, uint32_t size)
{
    for (uint32_t id = 0; id < size; id++) {
        uint32_t on = 0;
        if (cupti->cuptiGetCallbackState(&on, subscriber, domain, id) != CUPTI_SUCCESS)
            continue; /* an id this CUPTI does not know */
        if (!on)
            continue;
        if (id_count == ALTERNATE_IDS_MAX)
            return -1;
        ids[id_count++] = (enabled_id){.domain = domain, .id = id};
    }
    return 0;
}

/* Switches everything read at start on or off. 0, or -1 on the first
 * failure (the thread switches back on and stops). */
static int switch_to(int on)
{
    for (size_t i = 0; i < kind_count; i++)
        if ((on ? cupti->cuptiActivityEnable(kinds[i]) : cupti->cuptiActivityDisable(kinds[i])) !=
            CUPTI_SUCCESS)
            return -1;
    for (size_t i = 0; i < id_count; i++)
        if (cupti->cuptiEnableCallback((uint32_t)on, subscriber, ids[i].domain, ids[i].id) !=
            CUPTI_SUCCESS)
            return -1;
    return 0;
}

static const cuda_alternation trace_alternation = {
    .variable = "FLARE_TRACE_ALTERNATE",
    .thread_name = "flare-trace-alt",
    .on_word = "flare",
    .switch_to = switch_to,
};

void cuda_trace_alternate_start(const cuda_cupti_api *api, CUpti_SubscriberHandle handle)
{
    if (!cuda_alternation_asked(&trace_alternation))
        return;
    const char *storm = getenv("FLARE_STORM_RATE");
    if (storm == NULL || strcmp(storm, "0") != 0) {
        core_log(CORE_LOG_ERROR, "FLARE_TRACE_ALTERNATE_MS needs FLARE_STORM_RATE=0 (the "
                                 "launch-storm guard switches the same kinds): not alternating");
        return;
    }
    cupti = api;
    subscriber = handle;
    if (cupti->cuptiGetCallbackState == NULL || subscriber == NULL ||
        read_enabled(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE) != 0 ||
        read_enabled(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE) != 0 ||
        read_enabled(CUPTI_CB_DOMAIN_NVTX, CUPTI_CBID_NVTX_SIZE) != 0) {
        core_log(CORE_LOG_ERROR, "FLARE_TRACE_ALTERNATE_MS: the callbacks on cannot be read "
                                 "back from CUPTI: not alternating");
        return;
    }
    kind_count = cuda_storm_kinds(kinds, CUDA_STORM_KINDS_MAX);
    if (cuda_alternation_start(&trace_alternation) == 0)
        core_log(CORE_LOG_INFO, "trace alternation: %zu activity kinds and %zu callbacks",
                 kind_count, id_count);
}
