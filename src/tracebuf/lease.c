/*
 * lease.c: the per-device sampling lease (see lease.h).
 *
 * The lease table is static and its mutexes are never destroyed, for the
 * same reason as the buffer manager's: a destructor or atexit handler that
 * runs after shutdown must find a valid (if shut) table, not freed memory.
 */
#include "tracebuf/lease.h"

#include "core/capability.h"
#include "flare/flare.h"
#include "tracebuf/tracebuf.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

typedef struct device_lease {
    pthread_mutex_t lock;
    uint64_t owner;     /* 0: free; guarded by lock */
    uint32_t claims;    /* the owner's re-entrant count; guarded */
    uint32_t in_flight; /* the owner's uses not yet ended; guarded */
} device_lease;

static device_lease leases[TRACEBUF_MAX_DEVICES];
/* Set once by shutdown, never cleared: a process that is exiting must not
 * start sampling again. Read outside the device locks, so atomic. */
static atomic_int leases_shut;
static pthread_once_t leases_once = PTHREAD_ONCE_INIT;

/* pthread_once rather than a static initializer: C has no portable way to
 * initialize an array of mutexes statically. */
static void leases_init(void)
{
    for (int device = 0; device < TRACEBUF_MAX_DEVICES; device++)
        pthread_mutex_init(&leases[device].lock, NULL);
}

static device_lease *lease_for(int device, uint64_t context_id)
{
    if (device < 0 || device >= TRACEBUF_MAX_DEVICES || context_id == 0)
        return NULL;
    pthread_once(&leases_once, leases_init);
    return &leases[device];
}

/* Frees the device once nothing keeps it: no claim and no use in flight.
 * Called with the lock held. */
static void release_if_idle(device_lease *lease)
{
    if (lease->claims == 0 && lease->in_flight == 0)
        lease->owner = 0;
}

int tracebuf_lease_acquire(int device, uint64_t context_id, char *holder_out)
{
    device_lease *lease = lease_for(device, context_id);
    if (lease == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (atomic_load(&leases_shut)) {
        if (holder_out != NULL)
            snprintf(holder_out, TRACEBUF_HOLDER_MAX, "shutdown");
        return FLARE_ERR_STATE;
    }
    pthread_mutex_lock(&lease->lock);
    uint64_t holder = lease->owner;
    if (holder == 0 || holder == context_id) {
        lease->owner = context_id;
        lease->claims++;
        pthread_mutex_unlock(&lease->lock);
        return FLARE_OK;
    }
    pthread_mutex_unlock(&lease->lock);
    /* Formatted after unlocking: the lock guards fields, not printf. */
    if (holder_out != NULL)
        snprintf(holder_out, TRACEBUF_HOLDER_MAX, "context %" PRIu64, holder);
    return FLARE_ERR_STATE;
}

int tracebuf_lease_use_begin(int device, uint64_t context_id)
{
    device_lease *lease = lease_for(device, context_id);
    if (lease == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lease->lock);
    /* A use needs a live claim: an owner whose claims are all dropped is
     * only waiting for its last use to end and must not start another. */
    int status = FLARE_ERR_STATE;
    if (lease->owner == context_id && lease->claims > 0) {
        lease->in_flight++;
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&lease->lock);
    return status;
}

int tracebuf_lease_use_end(int device, uint64_t context_id)
{
    device_lease *lease = lease_for(device, context_id);
    if (lease == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lease->lock);
    int status = FLARE_ERR_STATE;
    if (lease->owner == context_id && lease->in_flight > 0) {
        lease->in_flight--;
        release_if_idle(lease);
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&lease->lock);
    return status;
}

int tracebuf_lease_release(int device, uint64_t context_id)
{
    device_lease *lease = lease_for(device, context_id);
    if (lease == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lease->lock);
    int status = FLARE_ERR_STATE;
    if (lease->owner == context_id && lease->claims > 0) {
        lease->claims--;
        release_if_idle(lease);
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&lease->lock);
    return status;
}

int tracebuf_lease_release_all(uint64_t context_id)
{
    if (context_id == 0)
        return 0;
    int held = 0;
    for (int device = 0; device < TRACEBUF_MAX_DEVICES; device++) {
        device_lease *lease = lease_for(device, context_id);
        pthread_mutex_lock(&lease->lock);
        if (lease->owner == context_id && lease->claims > 0) {
            lease->claims = 0;
            release_if_idle(lease);
            held++;
        }
        pthread_mutex_unlock(&lease->lock);
    }
    return held;
}

void tracebuf_lease_shutdown(void)
{
    /* Shut first, so no acquire can slip in between the devices below. */
    atomic_store(&leases_shut, 1);
    pthread_once(&leases_once, leases_init);
    for (int device = 0; device < TRACEBUF_MAX_DEVICES; device++) {
        device_lease *lease = &leases[device];
        pthread_mutex_lock(&lease->lock);
        lease->claims = 0;
        release_if_idle(lease);
        pthread_mutex_unlock(&lease->lock);
    }
}

uint64_t tracebuf_lease_holder(int device)
{
    device_lease *lease = lease_for(device, 1);
    if (lease == NULL)
        return 0;
    pthread_mutex_lock(&lease->lock);
    uint64_t owner = lease->owner;
    pthread_mutex_unlock(&lease->lock);
    return owner;
}

uint32_t tracebuf_lease_in_flight(int device)
{
    device_lease *lease = lease_for(device, 1);
    if (lease == NULL)
        return 0;
    pthread_mutex_lock(&lease->lock);
    uint32_t in_flight = lease->in_flight;
    pthread_mutex_unlock(&lease->lock);
    return in_flight;
}

void tracebuf_lease_busy_reason(int device, const char *holder, char *reason, size_t reason_size)
{
    if (reason == NULL || reason_size == 0)
        return;
    snprintf(reason, reason_size, "PM sampling busy, held by %s on device %d",
             holder != NULL ? holder : "another context", device);
}

void tracebuf_lease_note_busy(int device, const char *holder)
{
    char reason[128];
    tracebuf_lease_busy_reason(device, holder, reason, sizeof(reason));
    core_capability_set("pm_sampling", 1, CORE_CAPABILITY_DEGRADED, "%s", reason);
}
