/*
 * replay_turn.c: the devices' collection turn.
 *
 * With replay_settings.serial_devices, metric collections on different
 * devices of a process take turns: a collector takes the turn at its first
 * pass (and around any set-up that calls the vendor profiler) and gives it
 * back when the collection ends (its end() at the latest). On the H200 the
 * range profiler's calls on two GPUs of one process contended, and two GPUs
 * collecting at once were slower than one after the other. Without the
 * setting both calls do nothing.
 *
 * Waiters are served in arrival order (a plain mutex may hand the turn to
 * the same device again and again). Must never wait without bound: a holder
 * may be stuck inside the vendor's library, and a waiter may hold its own
 * device's gate; the bound is one pass timeout, the longest a pass of the
 * holder's may take.
 */
#include "replay/replay.h"

#include <pthread.h>
#include <time.h>

#include "core/clock.h"
#include "flare/flare.h"

/* A ticket queue: each waiter draws a ticket and waits for its number. A
 * waiter that gives up marks its ticket abandoned, and whoever advances
 * the queue skips it. Waiters are at most one collecting thread per device
 * plus early set-up threads; should more give up at once than the list
 * holds, the queue drops its order (unordered) rather than stall. */
#define TURN_ABANDONED_MAX (4 * REPLAY_DEVICE_MAX)

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_changed;
static pthread_once_t turn_once = PTHREAD_ONCE_INIT;
static uint64_t next_ticket;
static uint64_t serving;
static bool turn_held;
static uint64_t abandoned[TURN_ABANDONED_MAX];
static size_t abandoned_count;
static bool unordered;

static void turn_init(void)
{
    core_cond_init_monotonic(&turn_changed);
}

/* Moves the queue past abandoned tickets (turn_lock held). */
static void skip_abandoned(void)
{
    for (bool skipped = true; skipped;) {
        skipped = false;
        for (size_t index = 0; index < abandoned_count; index++) {
            if (abandoned[index] == serving) {
                abandoned[index] = abandoned[--abandoned_count];
                serving++;
                skipped = true;
                break;
            }
        }
    }
}

int replay_collection_turn_take(bool *held)
{
    if (*held) {
        return FLARE_OK;
    }
    replay_settings settings;
    replay_settings_get(&settings);
    if (!settings.serial_devices) {
        return FLARE_OK;
    }
    pthread_once(&turn_once, turn_init);
    struct timespec deadline = core_deadline_after_ns(settings.pass_timeout_ns);
    pthread_mutex_lock(&turn_lock);
    uint64_t ticket = next_ticket++;
    int waited = 0;
    while ((turn_held || (!unordered && serving != ticket)) && waited == 0) {
        waited = pthread_cond_timedwait(&turn_changed, &turn_lock, &deadline);
    }
    if (turn_held || (!unordered && serving != ticket)) {
        /* Given up: the queue must not wait for this ticket. */
        if (abandoned_count < TURN_ABANDONED_MAX) {
            abandoned[abandoned_count++] = ticket;
        } else {
            unordered = true;
        }
        skip_abandoned();
        pthread_cond_broadcast(&turn_changed);
        pthread_mutex_unlock(&turn_lock);
        return FLARE_ERR_TIMEOUT;
    }
    turn_held = true;
    if (serving == ticket) {
        serving++;
    }
    skip_abandoned();
    pthread_mutex_unlock(&turn_lock);
    *held = true;
    return FLARE_OK;
}

void replay_collection_turn_give(bool *held)
{
    if (!*held) {
        return;
    }
    *held = false;
    pthread_mutex_lock(&turn_lock);
    turn_held = false;
    pthread_cond_broadcast(&turn_changed);
    pthread_mutex_unlock(&turn_lock);
}
