/*
 * pm_replay_plan.c: range replay by PM sampling's plan (pm_replay_plan.h):
 * each sampled metric goes into the first configuration that still samples
 * in one pass with it, or a new one; a metric the hardware cannot sample
 * even alone is marked unsampled.
 *
 * Must never: enable sampling, or keep a plan that failed half-way.
 */
#include "pm/pm_replay_plan.h"

#include "flare/flare.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* What a plan asks its questions of. */
typedef struct planner {
    const pm_hardware_ops *ops;
    void *hw;
    int device;
} planner;

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static replay_plan kept; /* the last plan built (same metrics: no questions again) */

/* Whether names[0..count) sample in one pass (1), not (0), or an error. */
static int one_pass(const planner *p, const char *const *names, size_t count, size_t *unknown,
                    char *reason, size_t reason_size)
{
    if (p->ops->plan == NULL) {
        return count <= PM_METRICS_MAX ? 1 : 0;
    }
    size_t passes = 0;
    int status =
        p->ops->plan(p->hw, p->device, names, count, &passes, unknown, reason, reason_size);
    if (status == FLARE_ERR_NOT_FOUND) {
        return 0;
    }
    return status == FLARE_OK ? passes == 1 : status;
}

/* Places sampled metric m in the first configuration that still samples
 * in one pass with it, or a new one; unsampled when alone it cannot be. */
static int plan_place(const planner *p, replay_plan *plan, size_t m, char *reason,
                      size_t reason_size)
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
        int fits = one_pass(p, names, size + 1, &unknown, reason, reason_size);
        if (fits < 0) {
            return fits;
        }
        if (fits == 1) {
            plan->config_metrics[config][plan->config_sizes[config]++] = m;
            return FLARE_OK;
        }
    }
    names[0] = plan->names[m];
    int alone = one_pass(p, names, 1, &unknown, reason, reason_size);
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

int pm_replay_plan_build(const pm_hardware_ops *ops, void *hw, int device,
                         const char *const *metrics, size_t count, replay_plan *plan, char *reason,
                         size_t reason_size)
{
    pthread_mutex_lock(&kept_lock);
    bool same = plan_matches(&kept, device, metrics, count);
    if (same) {
        *plan = kept;
    }
    pthread_mutex_unlock(&kept_lock);
    if (same) {
        return FLARE_OK;
    }
    const planner p = {.ops = ops, .hw = hw, .device = device};
    memset(plan, 0, sizeof *plan);
    plan->device = device;
    plan->metric_count = count;
    for (size_t m = 0; m < count; m++) {
        snprintf(plan->names[m], REPLAY_METRIC_NAME_MAX, "%s", metrics[m]);
        plan->roles[m] =
            strcmp(metrics[m], PM_REPLAY_DURATION_METRIC) == 0 ? ROLE_DURATION : ROLE_SAMPLED;
    }
    for (size_t m = 0; m < count; m++) {
        if (plan->roles[m] != ROLE_SAMPLED) {
            continue;
        }
        int status = plan_place(&p, plan, m, reason, reason_size);
        if (status != FLARE_OK) {
            return status;
        }
    }
    plan->valid = true;
    pthread_mutex_lock(&kept_lock);
    kept = *plan;
    pthread_mutex_unlock(&kept_lock);
    return FLARE_OK;
}

bool pm_replay_plan_is_kept(int device, const char *const *metrics, size_t count)
{
    pthread_mutex_lock(&kept_lock);
    bool same = plan_matches(&kept, device, metrics, count);
    pthread_mutex_unlock(&kept_lock);
    return same;
}

void pm_replay_plan_forget(void)
{
    pthread_mutex_lock(&kept_lock);
    kept.valid = false;
    pthread_mutex_unlock(&kept_lock);
}

bool pm_replay_plan_same_first(const replay_plan *a, const replay_plan *b)
{
    if (!a->valid || !b->valid || a->device != b->device || a->config_count == 0 ||
        b->config_count == 0 || a->config_sizes[0] != b->config_sizes[0]) {
        return false;
    }
    for (size_t slot = 0; slot < a->config_sizes[0]; slot++) {
        if (strcmp(a->names[a->config_metrics[0][slot]], b->names[b->config_metrics[0][slot]]) !=
            0) {
            return false;
        }
    }
    return true;
}
