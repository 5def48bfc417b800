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
 * Must never: run unless all three variables are set and valid (a bad value
 * is logged and nothing alternates), follow a planted link or write into an
 * existing file (O_EXCL | O_NOFOLLOW), or leave the process in the none
 * state when a switch fails (it switches back and stops).
 */
#include "backend/cuda/cuda_trace_alternate.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/cuda/cuda_storm.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"

#define ALTERNATE_MS_MIN   20u
#define ALTERNATE_MS_MAX   5000u
#define ALTERNATE_SWITCHES 100000u
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
static int log_fd = -1;
static uint32_t block_ms;

/* The callbacks on now in domain, from id 0 up to size. 0, or -1 when
 * CUPTI cannot say or there are more than fit. */
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
 * failure (the caller switches back on and stops). */
static int switch_all(int on)
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

static void log_switch(int on)
{
    char line[48];
    int length = snprintf(line, sizeof(line), "%llu %s\n", (unsigned long long)core_now_ns(),
                          on ? "flare" : "none");
    if (write(log_fd, line, (size_t)length) != length)
        CORE_LOG_ONCE("cuda.trace_alternate.write", CORE_LOG_WARNING,
                      "FLARE_TRACE_ALTERNATE_LOG: a switch was not logged");
}

static void *alternate_main(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "flare-trace-alt");
    struct timespec pause = {block_ms / 1000, (long)(block_ms % 1000) * 1000000L};
    int on = 1;
    for (uint32_t switches = 0; switches < ALTERNATE_SWITCHES; switches++) {
        on = !on;
        if (switch_all(on) != 0) {
            switch_all(1);
            core_log(CORE_LOG_ERROR, "FLARE_TRACE_ALTERNATE_MS: switching %s failed: stopped",
                     on ? "on" : "off");
            return NULL;
        }
        log_switch(on);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* Whether the three variables ask for the alternation and are valid. */
static int wanted(const char **path)
{
    const char *period = getenv("FLARE_TRACE_ALTERNATE_MS");
    *path = getenv("FLARE_TRACE_ALTERNATE_LOG");
    if (period == NULL && *path == NULL)
        return 0;
    const char *storm = getenv("FLARE_STORM_RATE");
    if (period == NULL || *path == NULL || (*path)[0] == '\0' || storm == NULL ||
        strcmp(storm, "0") != 0 ||
        core_parse_u32(period, ALTERNATE_MS_MIN, ALTERNATE_MS_MAX, &block_ms) != 0) {
        core_log(CORE_LOG_ERROR,
                 "FLARE_TRACE_ALTERNATE_MS (%u..%u), FLARE_TRACE_ALTERNATE_LOG and "
                 "FLARE_STORM_RATE=0 must all be set: not alternating",
                 ALTERNATE_MS_MIN, ALTERNATE_MS_MAX);
        return 0;
    }
    return 1;
}

void cuda_trace_alternate_start(const cuda_cupti_api *api, CUpti_SubscriberHandle handle)
{
    const char *path = NULL;
    if (!wanted(&path))
        return;
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
    log_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (log_fd < 0) {
        core_log(CORE_LOG_ERROR, "FLARE_TRACE_ALTERNATE_LOG=%s: %s: not alternating", path,
                 strerror(errno));
        return;
    }
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attributes, alternate_main, NULL) != 0) {
        core_log(CORE_LOG_ERROR, "FLARE_TRACE_ALTERNATE_MS: no thread: not alternating");
        close(log_fd);
        log_fd = -1;
    } else {
        core_log(CORE_LOG_INFO,
                 "trace alternation: %zu activity kinds and %zu callbacks off and on every %u "
                 "ms, logged to %s",
                 kind_count, id_count, block_ms, path);
    }
    pthread_attr_destroy(&attributes);
}
