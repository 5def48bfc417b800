/*
 * sim_fault.c: injected faults (hung kernels, slow completion handlers,
 * failing copies, completions held back) that let tests drive flare's
 * timeout, error and late-delivery paths.
 *
 * It must never spin while a kernel hangs, and never keep a pointer to the
 * caller's fault description: the hang name is copied.
 */
#include "backend/sim/sim_internal.h"

#include <pthread.h>
#include <string.h>

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
/* Hung kernels sleep on this; nobody times out on it, so the default clock is fine. */
static pthread_cond_t hung_released = PTHREAD_COND_INITIALIZER;
static char hang_kernel_name[FLARE_NAME_MAX];
static bool hang_enabled;
static uint32_t slow_completion_ms;
static uint32_t copies_left_to_fail;
static uint32_t hold_limit;
/* Each release bumps it; an item hangs only while the generation it saw at
 * submission is current, so one release frees queued hung items too. */
static uint64_t release_generation;

void sim_fault_set(const sim_fault *fault)
{
    pthread_mutex_lock(&fault_lock);
    hang_enabled = false;
    hang_kernel_name[0] = '\0';
    slow_completion_ms = 0;
    copies_left_to_fail = 0;
    hold_limit = 0;
    if (fault != NULL) {
        if (fault->hang_kernel_name != NULL && fault->hang_kernel_name[0] != '\0') {
            /* Truncated like registered names, so the comparison still matches. */
            size_t length = strnlen(fault->hang_kernel_name, FLARE_NAME_MAX - 1);
            memcpy(hang_kernel_name, fault->hang_kernel_name, length);
            hang_kernel_name[length] = '\0';
            hang_enabled = true;
        }
        slow_completion_ms = fault->slow_completion_ms;
        copies_left_to_fail = fault->fail_next_copies;
        hold_limit = fault->hold_completions;
    }
    pthread_mutex_unlock(&fault_lock);
}

void sim_fault_release_hung(void)
{
    pthread_mutex_lock(&fault_lock);
    release_generation++;
    pthread_cond_broadcast(&hung_released);
    pthread_mutex_unlock(&fault_lock);
}

sim_fault_decision sim_fault_decide(backend_work_kind kind, const char *kernel_name)
{
    sim_fault_decision decision = {0};
    pthread_mutex_lock(&fault_lock);
    decision.slow_completion_ms = slow_completion_ms;
    decision.hold_limit = hold_limit;
    if (kind == BACKEND_WORK_KERNEL && hang_enabled && kernel_name != NULL &&
        strcmp(kernel_name, hang_kernel_name) == 0) {
        decision.hang = true;
        decision.hang_generation = release_generation;
    }
    if (kind == BACKEND_WORK_COPY && copies_left_to_fail > 0) {
        copies_left_to_fail--;
        decision.fail = true;
    }
    pthread_mutex_unlock(&fault_lock);
    return decision;
}

void sim_fault_wait_until_released(uint64_t hang_generation)
{
    pthread_mutex_lock(&fault_lock);
    while (release_generation == hang_generation) {
        pthread_cond_wait(&hung_released, &fault_lock);
    }
    pthread_mutex_unlock(&fault_lock);
}
