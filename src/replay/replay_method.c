/*
 * replay_method.c: how spans are measured (replay.h, "How spans are
 * measured"): the method's names, its checks against the rest of a
 * selection, its settings from FLARE_REPLAY_METHOD / _PM_INTERVAL /
 * _PM_MIN_KERNEL, and which collector it hands the spans to.
 *
 * Must never: install half a selection (the check runs before anything is
 * kept), or answer the PM collector for a selection that did not ask for it.
 */
#include "replay/replay_internal.h"

#include "core/duration.h"
#include "flare/flare.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The interval limits are PM sampling's own (pm/pm_engine.h): 10 us is the
 * shortest verified on GH100 without overflow. */
#define METHOD_PM_INTERVAL_MIN_NS   10000ull
#define METHOD_PM_INTERVAL_MAX_NS   1000000000ull
#define METHOD_PM_MIN_KERNEL_MAX_NS 10000000000ull

static pthread_mutex_t method_lock = PTHREAD_MUTEX_INITIALIZER;
static replay_method_settings installed = {
    .method = REPLAY_METHOD_PROFILER,
    .pm_interval_ns = REPLAY_PM_INTERVAL_DEFAULT_NS,
    .pm_min_kernel_ns = REPLAY_PM_MIN_KERNEL_DEFAULT_NS,
};
static const replay_metric_collector *_Atomic pm_collector;
static _Atomic int method_is_pm;

int replay_method_parse(const char *text)
{
    if (text == NULL) {
        return -1;
    }
    if (strcmp(text, "profiler") == 0) {
        return REPLAY_METHOD_PROFILER;
    }
    if (strcmp(text, "pm") == 0) {
        return REPLAY_METHOD_PM;
    }
    return -1;
}

const char *replay_method_name(int method)
{
    return method == REPLAY_METHOD_PM ? "pm" : "profiler";
}

void replay_method_current(replay_method_settings *settings)
{
    pthread_mutex_lock(&method_lock);
    *settings = installed;
    pthread_mutex_unlock(&method_lock);
}

void replay_set_pm_collector(const replay_metric_collector *collector)
{
    atomic_store(&pm_collector, collector);
}

const replay_metric_collector *replay_method_collector(void)
{
    return atomic_load(&method_is_pm) ? atomic_load(&pm_collector) : NULL;
}

int replay_method_check(const replay_selection *selection, char *error, size_t error_size)
{
    if (selection->method != REPLAY_METHOD_PROFILER && selection->method != REPLAY_METHOD_PM) {
        snprintf(error, error_size, "unknown replay method %d", selection->method);
        return -1;
    }
    bool pm_settings = selection->pm_interval_ns != 0 || selection->pm_min_kernel_ns != 0;
    if (selection->method != REPLAY_METHOD_PM) {
        if (pm_settings) {
            snprintf(error, error_size, "--pm-interval and --pm-min-kernel need --method pm");
            return -1;
        }
        return 0;
    }
    if (selection->range_name[0] == '\0' && !selection->api_spans_only) {
        snprintf(error, error_size,
                 "--method pm measures spans of work: it needs --range NAME or --range-api");
        return -1;
    }
    uint64_t interval = selection->pm_interval_ns;
    if (interval != 0 &&
        (interval < METHOD_PM_INTERVAL_MIN_NS || interval > METHOD_PM_INTERVAL_MAX_NS)) {
        char text[32];
        core_duration_format(interval, text, sizeof text);
        snprintf(error, error_size, "PM interval %s is outside 10us to 1s", text);
        return -1;
    }
    if (selection->pm_min_kernel_ns > METHOD_PM_MIN_KERNEL_MAX_NS) {
        snprintf(error, error_size, "PM minimum kernel length above 10s");
        return -1;
    }
    return 0;
}

void replay_method_install(const replay_selection *selection)
{
    pthread_mutex_lock(&method_lock);
    installed.method = (replay_method)selection->method;
    installed.pm_interval_ns =
        selection->pm_interval_ns != 0 ? selection->pm_interval_ns : REPLAY_PM_INTERVAL_DEFAULT_NS;
    installed.pm_min_kernel_ns = selection->pm_min_kernel_ns != 0 ? selection->pm_min_kernel_ns
                                                                  : REPLAY_PM_MIN_KERNEL_DEFAULT_NS;
    atomic_store(&method_is_pm, selection->method == REPLAY_METHOD_PM);
    pthread_mutex_unlock(&method_lock);
}

/* A FLARE_REPLAY_PM_* duration: 0, or -1 with error naming the variable. */
static int parse_duration(const char *variable, const char *text, uint64_t minimum_ns,
                          uint64_t *out_ns, char *error, size_t error_size)
{
    char why[192];
    if (core_duration_parse(text, strlen(text), minimum_ns, UINT64_MAX, out_ns, why, sizeof why) ==
        FLARE_OK) {
        return 0;
    }
    snprintf(error, error_size, "%s=\"%s\": %s", variable, text, why);
    return -1;
}

int replay_method_from_environment(replay_selection *selection, bool *any, char *error,
                                   size_t error_size)
{
    const char *method = getenv("FLARE_REPLAY_METHOD");
    const char *interval = getenv("FLARE_REPLAY_PM_INTERVAL");
    const char *min_kernel = getenv("FLARE_REPLAY_PM_MIN_KERNEL");
    *any = method != NULL || interval != NULL || min_kernel != NULL;
    if (method != NULL) {
        int parsed = replay_method_parse(method);
        if (parsed < 0) {
            snprintf(error, error_size, "FLARE_REPLAY_METHOD=\"%s\": expected profiler or pm",
                     method);
            return -1;
        }
        selection->method = parsed;
    }
    if ((interval != NULL && parse_duration("FLARE_REPLAY_PM_INTERVAL", interval, 1,
                                            &selection->pm_interval_ns, error, error_size) != 0) ||
        (min_kernel != NULL &&
         parse_duration("FLARE_REPLAY_PM_MIN_KERNEL", min_kernel, 1, &selection->pm_min_kernel_ns,
                        error, error_size) != 0)) {
        return -1;
    }
    return 0;
}
