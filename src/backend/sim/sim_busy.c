/*
 * sim_busy.c: the simulated devices' kernel times (sim_busy.h).
 *
 * A ring in start order; a look-up reads the whole ring (SIM_BUSY_MAX
 * entries at most: the simulated device is for tests and the demo, and
 * only a PM window with values_from_kernels asks). Must never allocate.
 */
#include "backend/sim/sim_busy.h"

#include <pthread.h>
#include <stdatomic.h>

#define RUNNING UINT64_MAX /* end_ns of a kernel still running */

typedef struct busy_entry {
    uint64_t start_ns, end_ns;
    int device;
} busy_entry;

static pthread_mutex_t busy_lock = PTHREAD_MUTEX_INITIALIZER;
static busy_entry entries[SIM_BUSY_MAX];
static uint64_t written; /* entries ever written; tickets count them */
static _Atomic int enabled;

void sim_busy_enable(int on)
{
    atomic_store(&enabled, on);
}

uint64_t sim_busy_begin(int device, uint64_t start_ns)
{
    if (!atomic_load_explicit(&enabled, memory_order_relaxed))
        return SIM_BUSY_OFF;
    pthread_mutex_lock(&busy_lock);
    uint64_t ticket = written++;
    entries[ticket % SIM_BUSY_MAX] = (busy_entry){start_ns, RUNNING, device};
    pthread_mutex_unlock(&busy_lock);
    return ticket;
}

void sim_busy_end(uint64_t ticket, uint64_t end_ns)
{
    if (ticket == SIM_BUSY_OFF)
        return;
    pthread_mutex_lock(&busy_lock);
    busy_entry *e = &entries[ticket % SIM_BUSY_MAX];
    if (written - ticket <= SIM_BUSY_MAX) /* not overwritten since */
        e->end_ns = end_ns > e->start_ns ? end_ns : e->start_ns;
    pthread_mutex_unlock(&busy_lock);
}

uint64_t sim_busy_overlap_ns(int device, uint64_t start_ns, uint64_t end_ns)
{
    uint64_t busy = 0;
    pthread_mutex_lock(&busy_lock);
    uint64_t oldest = written > SIM_BUSY_MAX ? written - SIM_BUSY_MAX : 0;
    for (uint64_t i = oldest; i < written; i++) {
        const busy_entry *e = &entries[i % SIM_BUSY_MAX];
        if (e->device != device)
            continue;
        uint64_t low = e->start_ns > start_ns ? e->start_ns : start_ns;
        uint64_t high = e->end_ns < end_ns ? e->end_ns : end_ns;
        if (high > low)
            busy += high - low;
    }
    pthread_mutex_unlock(&busy_lock);
    return busy;
}
