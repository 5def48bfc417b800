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
 * Must never wait without bound: a holder may be stuck inside the vendor's
 * library, and the waiter may hold its own device's gate.
 */
#include "replay/replay.h"

#include <pthread.h>
#include <time.h>

#include "flare/flare.h"

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;

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
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += REPLAY_TURN_WAIT_S;
    if (pthread_mutex_timedlock(&turn_lock, &deadline) != 0) {
        return FLARE_ERR_TIMEOUT;
    }
    *held = true;
    return FLARE_OK;
}

void replay_collection_turn_give(bool *held)
{
    if (*held) {
        *held = false;
        pthread_mutex_unlock(&turn_lock);
    }
}
