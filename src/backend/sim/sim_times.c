/*
 * sim_times.c: re-issued kernels' times on the simulated devices
 * (sim_times.h). A mutex and a condition variable per device table; the
 * worker only appends while a table is open.
 *
 * Must never: write past a table, or keep a waiter past its timeout.
 */
#include "backend/sim/sim_times.h"

#include "backend/sim/sim_internal.h"
#include "core/clock.h"
#include "flare/flare.h"
#include "replay/replay.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef struct times_table {
    pthread_mutex_t lock;
    pthread_cond_t arrived; /* CLOCK_MONOTONIC */
    bool open;
    size_t expected;
    size_t count;
    uint64_t start_ns[REPLAY_RANGE_KERNELS_MAX];
    uint64_t end_ns[REPLAY_RANGE_KERNELS_MAX];
} times_table;

static times_table tables[SIM_DEVICE_MAX];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
    for (size_t device = 0; device < SIM_DEVICE_MAX; device++) {
        pthread_mutex_init(&tables[device].lock, NULL);
        core_cond_init_monotonic(&tables[device].arrived);
    }
}

static times_table *table_of(int device)
{
    if (device < 0 || device >= SIM_DEVICE_MAX) {
        return NULL;
    }
    pthread_once(&tables_once, tables_init);
    return &tables[device];
}

int sim_times_begin(int device, size_t kernel_count, char *reason, size_t reason_size)
{
    times_table *table = table_of(device);
    if (table == NULL || kernel_count > REPLAY_RANGE_KERNELS_MAX) {
        snprintf(reason, reason_size, "cannot time %zu kernels on simulated device %d",
                 kernel_count, device);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&table->lock);
    table->open = true;
    table->expected = kernel_count;
    table->count = 0;
    pthread_mutex_unlock(&table->lock);
    return FLARE_OK;
}

void sim_times_note(int device, uint64_t start_ns, uint64_t end_ns)
{
    times_table *table = table_of(device);
    if (table == NULL) {
        return;
    }
    pthread_mutex_lock(&table->lock);
    if (table->open && table->count < table->expected) {
        table->start_ns[table->count] = start_ns;
        table->end_ns[table->count] = end_ns;
        table->count++;
        if (table->count == table->expected) {
            pthread_cond_broadcast(&table->arrived);
        }
    }
    pthread_mutex_unlock(&table->lock);
}

int sim_times_end(int device, uint64_t *start_ns, uint64_t *end_ns, size_t kernel_count,
                  size_t *found, uint64_t timeout_ns)
{
    times_table *table = table_of(device);
    *found = 0;
    if (table == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    struct timespec deadline = core_deadline_after_ns(timeout_ns);
    pthread_mutex_lock(&table->lock);
    while (table->open && table->count < table->expected &&
           pthread_cond_timedwait(&table->arrived, &table->lock, &deadline) != ETIMEDOUT) {
    }
    size_t count = table->count < kernel_count ? table->count : kernel_count;
    memcpy(start_ns, table->start_ns, count * sizeof *start_ns);
    memcpy(end_ns, table->end_ns, count * sizeof *end_ns);
    for (size_t index = count; index < kernel_count; index++) {
        start_ns[index] = end_ns[index] = 0;
    }
    bool complete = table->count == table->expected && count == kernel_count;
    table->open = false;
    pthread_mutex_unlock(&table->lock);
    *found = count;
    return complete ? FLARE_OK : FLARE_ERR_TIMEOUT;
}
