/*
 * replay_trigger.c: replays asked for while the program runs, one at a time
 * (replay.h, "Triggered replays"): a deep-profiling rule whose action is
 * `replay` arms one for the next launch of a kernel named exactly; the
 * launch path takes it (replay_trigger_take, through the selection), the
 * pass loop replays that launch as `flare replay` would, and its record,
 * when queued, finishes the trigger with what happened and how long it
 * took, which is charged to the process's replay budget. `action range
 * NAME` arms one for the next occurrence of a scope or NVTX range: the
 * range selection is pointed at it, and the span's record finishes it.
 *
 * One mutex guards the trigger; the launch path reads one atomic flag and
 * takes the mutex only while a trigger is armed. It must never arm a second
 * trigger while one is outstanding, never replay a launch whose name is not
 * the armed one, and never lose a taken trigger: every record of a taken
 * launch finishes it, declined or not.
 */
#include "replay/replay_internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core/clock.h"
#include "flare/flare.h"

static pthread_mutex_t trigger_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int trigger_armed; /* the launch path's one load */
/* Guarded by trigger_lock. */
static replay_trigger_result current;
static char armed_name[REPLAY_TRIGGER_NAME_MAX];
static uint64_t next_id = 1;
static uint64_t spent_ns;
static int selection_made; /* the trigger-only selection is installed */
static int range_kind;     /* the current trigger is a range's */

void replay_trigger_reset_for_tests(void)
{
    pthread_mutex_lock(&trigger_lock);
    memset(&current, 0, sizeof current);
    armed_name[0] = '\0';
    next_id = 1;
    spent_ns = 0;
    selection_made = 0;
    range_kind = 0;
    atomic_store(&trigger_armed, 0);
    pthread_mutex_unlock(&trigger_lock);
}

/* Makes replay configured for triggers when nothing else has: a selection
 * of the default metric set (speed-of-light) that replays no launch but the
 * triggered ones. (Inside `flare replay`, whose FLARE_REPLAY_* variables
 * installed a selection already, triggers use that one's metrics.)
 * Installed once, before the first trigger is armed, so no replay can be
 * reading its metric list while it is written. */
static int ensure_selection(char *error, size_t error_size)
{
    if (selection_made || replay_selection_installed())
        return FLARE_OK;
    replay_selection selection;
    memset(&selection, 0, sizeof selection);
    selection.triggers_only = 1;
    int status = replay_selection_apply(&selection, error, error_size);
    if (status == FLARE_OK)
        selection_made = 1;
    return status;
}

/* Arms a trigger for name (a kernel, or a range when range is 1). */
static int arm(const char *kernel_name, int range, uint64_t *id, char *error, size_t error_size)
{
    if (kernel_name == NULL || kernel_name[0] == '\0' ||
        strlen(kernel_name) >= REPLAY_TRIGGER_NAME_MAX) {
        snprintf(error, error_size, "no kernel name, or one of %d bytes or more",
                 REPLAY_TRIGGER_NAME_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&trigger_lock);
    if (current.state == REPLAY_TRIGGER_ARMED || current.state == REPLAY_TRIGGER_TAKEN) {
        snprintf(error, error_size, "another triggered replay (%llu, of %s) is outstanding",
                 (unsigned long long)current.id, current.kernel_name);
        pthread_mutex_unlock(&trigger_lock);
        return FLARE_ERR_STATE;
    }
    if (range && replay_selection_installed() && !selection_made) {
        snprintf(error, error_size,
                 "flare replay's own selection is installed: a range replay "
                 "would take its place");
        pthread_mutex_unlock(&trigger_lock);
        return FLARE_ERR_UNSUPPORTED;
    }
    int status = ensure_selection(error, error_size);
    if (status != FLARE_OK) {
        pthread_mutex_unlock(&trigger_lock);
        return status;
    }
    memset(&current, 0, sizeof current);
    current.id = next_id++;
    current.state = REPLAY_TRIGGER_ARMED;
    current.armed_ns = core_now_ns();
    snprintf(current.kernel_name, sizeof current.kernel_name, "%s", kernel_name);
    snprintf(armed_name, sizeof armed_name, "%s", kernel_name);
    *id = current.id;
    range_kind = range;
    if (!range)
        atomic_store(&trigger_armed, 1); /* the launch path's flag */
    pthread_mutex_unlock(&trigger_lock);
    if (range)
        replay_range_select_range(kernel_name, 1); /* its next occurrence */
    return FLARE_OK;
}

int replay_trigger_arm_kernel(const char *kernel_name, uint64_t *id, char *error, size_t error_size)
{
    return arm(kernel_name, 0, id, error, error_size);
}

int replay_trigger_arm_range(const char *range_name, uint64_t *id, char *error, size_t error_size)
{
    return arm(range_name, 1, id, error, error_size);
}

uint64_t replay_trigger_take_range(const char *range_name)
{
    uint64_t id = 0;
    pthread_mutex_lock(&trigger_lock);
    if (range_kind && current.state == REPLAY_TRIGGER_ARMED &&
        strcmp(armed_name, range_name) == 0) {
        current.state = REPLAY_TRIGGER_TAKEN;
        current.taken_ns = core_now_ns();
        id = current.id;
    }
    pthread_mutex_unlock(&trigger_lock);
    return id;
}

int replay_trigger_cancel(uint64_t id)
{
    pthread_mutex_lock(&trigger_lock);
    int status = FLARE_ERR_STATE;
    int was_range = 0;
    if (current.id == id && current.state == REPLAY_TRIGGER_ARMED) {
        atomic_store(&trigger_armed, 0);
        current.state = REPLAY_TRIGGER_CANCELLED;
        current.done_ns = core_now_ns();
        was_range = range_kind;
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&trigger_lock);
    if (was_range)
        replay_range_select_range(NULL, 0); /* the occurrence never came */
    return status;
}

int replay_trigger_status(uint64_t id, replay_trigger_result *result)
{
    pthread_mutex_lock(&trigger_lock);
    int status = current.id == id && id != 0 ? FLARE_OK : FLARE_ERR_NOT_FOUND;
    if (status == FLARE_OK)
        *result = current;
    pthread_mutex_unlock(&trigger_lock);
    return status;
}

uint64_t replay_trigger_spent_ns(void)
{
    pthread_mutex_lock(&trigger_lock);
    uint64_t spent = spent_ns;
    pthread_mutex_unlock(&trigger_lock);
    return spent;
}

uint64_t replay_trigger_take(const char *kernel_name)
{
    if (!atomic_load_explicit(&trigger_armed, memory_order_acquire) || kernel_name == NULL)
        return 0;
    uint64_t id = 0;
    pthread_mutex_lock(&trigger_lock);
    if (current.state == REPLAY_TRIGGER_ARMED && strcmp(armed_name, kernel_name) == 0) {
        atomic_store(&trigger_armed, 0);
        current.state = REPLAY_TRIGGER_TAKEN;
        current.taken_ns = core_now_ns();
        id = current.id;
    }
    pthread_mutex_unlock(&trigger_lock);
    return id;
}

void replay_trigger_lost(uint64_t id, const char *reason)
{
    int was_range = 0;
    pthread_mutex_lock(&trigger_lock);
    if (current.id == id && current.state == REPLAY_TRIGGER_TAKEN) {
        current.state = REPLAY_TRIGGER_DONE;
        current.done_ns = core_now_ns();
        current.declined = 1;
        snprintf(current.reason, sizeof current.reason, "%s", reason);
        was_range = range_kind;
    }
    pthread_mutex_unlock(&trigger_lock);
    /* The range's occurrence is over: scopes stop being looked at. (No
     * lock of the span's is held here; range selection takes only its own.) */
    if (was_range)
        replay_range_select_range(NULL, 0);
}

void replay_trigger_finished(const replay_record *record)
{
    int was_range = 0;
    pthread_mutex_lock(&trigger_lock);
    if (current.id == record->trigger_id && current.state == REPLAY_TRIGGER_TAKEN) {
        current.state = REPLAY_TRIGGER_DONE;
        current.done_ns = core_now_ns();
        current.launch_id = record->launch_id;
        current.launch_index = record->launch_index;
        current.declined = record->declined;
        snprintf(current.reason, sizeof current.reason, "%s", record->reason);
        /* The replay's own time: from the launch's entry to its gate's
         * release, what the program waited for it. */
        if (record->end_ns > record->begin_ns)
            spent_ns += record->end_ns - record->begin_ns;
        was_range = range_kind;
    }
    pthread_mutex_unlock(&trigger_lock);
    /* The range's occurrence is over: scopes stop being looked at. (No
     * lock of the span's is held here; range selection takes only its own.) */
    if (was_range)
        replay_range_select_range(NULL, 0);
}
