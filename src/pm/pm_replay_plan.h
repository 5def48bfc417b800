/*
 * pm_replay_plan.h: range replay by PM sampling's plan (pm_replay.h): a
 * span's metrics grouped into the fewest PM configurations the device
 * samples in one pass each, asked of the backend's PM hardware
 * (pm_hardware_ops.plan), and the last plan kept so the same metrics cost
 * no second round of questions.
 *
 * Internal to src/pm. Must never: enable sampling (planning only builds
 * and checks configuration images), or hand out a plan it did not finish.
 */
#ifndef FLARE_PM_PM_REPLAY_PLAN_H
#define FLARE_PM_PM_REPLAY_PLAN_H

#include <stdbool.h>
#include <stddef.h>

#include "pm/pm_engine.h"
#include "pm/pm_replay.h"

#define PM_REPLAY_DURATION_METRIC "gpu__time_duration.sum"

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

/* Plans metrics[0..count) on device over the hardware (ops, hw) into *plan:
 * the kept plan when it is for the same device and metrics, else a new
 * one, then kept. 0, or a status with reason. Callers take turns: one
 * plan is built at a time (the hardware instance is shared). */
int pm_replay_plan_build(const pm_hardware_ops *ops, void *hw, int device,
                         const char *const *metrics, size_t count, replay_plan *plan, char *reason,
                         size_t reason_size);

/* Whether the kept plan is for device and metrics[0..count). */
bool pm_replay_plan_is_kept(int device, const char *const *metrics, size_t count);

/* Forgets the kept plan (tests). */
void pm_replay_plan_forget(void);

/* Whether two plans ask for the same first configuration on one device. */
bool pm_replay_plan_same_first(const replay_plan *a, const replay_plan *b);

#endif /* FLARE_PM_PM_REPLAY_PLAN_H */
