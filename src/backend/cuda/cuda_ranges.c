/*
 * cuda_ranges.c: the open NVTX start/end range table (cuda_ranges.h).
 */
#include "backend/cuda/cuda_ranges.h"

#include "core/clock.h"
#include "core/event.h"

static uint32_t home_of(uint64_t id)
{
    /* Ids from NVTX are often sequential: mix them so neighbours spread out. */
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return (uint32_t)(id % CUDA_RANGES_MAX);
}

int cuda_range_start(cuda_range_table *table, uint64_t id, const char *name, uint64_t start_ns,
                     uint64_t instance_id)
{
    if (id == 0)
        return -1;
    int status = -1;
    pthread_mutex_lock(&table->lock);
    if (table->count < CUDA_RANGES_OPEN_MAX) {
        uint32_t slot = home_of(id);
        while (table->slots[slot].id != 0)
            slot = (slot + 1) % CUDA_RANGES_MAX;
        cuda_open_range *range = &table->slots[slot];
        range->id = id;
        range->start_ns = start_ns;
        range->end_ns = 0;
        range->instance_id = instance_id;
        core_copy_name(range->name, name);
        table->count++;
        status = 0;
    }
    pthread_mutex_unlock(&table->lock);
    return status;
}

/* Lock held: the slot holding id, or -1. */
static int64_t find_slot(cuda_range_table *table, uint64_t id)
{
    uint32_t slot = home_of(id);
    for (uint32_t probe = 0; probe < CUDA_RANGES_MAX && table->slots[slot].id != 0; probe++) {
        if (table->slots[slot].id == id)
            return slot;
        slot = (slot + 1) % CUDA_RANGES_MAX;
    }
    return -1;
}

int cuda_range_close(cuda_range_table *table, uint64_t id, cuda_open_range *out)
{
    if (id == 0)
        return -1;
    int status = -1;
    pthread_mutex_lock(&table->lock);
    int64_t slot = find_slot(table, id);
    if (slot >= 0 && table->slots[slot].end_ns == 0) {
        table->slots[slot].end_ns = core_now_ns();
        *out = table->slots[slot];
        status = 0;
    }
    pthread_mutex_unlock(&table->lock);
    return status;
}

void cuda_range_forget(cuda_range_table *table, uint64_t id)
{
    cuda_open_range ignored;
    cuda_range_end(table, id, &ignored);
}

void cuda_range_visit(cuda_range_table *table, void (*visit)(const cuda_open_range *, void *),
                      void *user)
{
    pthread_mutex_lock(&table->lock);
    for (uint32_t slot = 0; slot < CUDA_RANGES_MAX; slot++)
        if (table->slots[slot].id != 0)
            visit(&table->slots[slot], user);
    pthread_mutex_unlock(&table->lock);
}

int cuda_range_end(cuda_range_table *table, uint64_t id, cuda_open_range *out)
{
    if (id == 0)
        return -1;
    int status = -1;
    pthread_mutex_lock(&table->lock);
    uint32_t slot = home_of(id);
    for (uint32_t probe = 0; probe < CUDA_RANGES_MAX && table->slots[slot].id != 0; probe++) {
        if (table->slots[slot].id == id) {
            *out = table->slots[slot];
            /* Backward-shift deletion: move later entries of the chain into
             * the hole when their home does not lie between hole and them. */
            uint32_t hole = slot;
            uint32_t next = (slot + 1) % CUDA_RANGES_MAX;
            while (table->slots[next].id != 0) {
                uint32_t home = home_of(table->slots[next].id);
                int home_between =
                    hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
                if (!home_between) {
                    table->slots[hole] = table->slots[next];
                    hole = next;
                }
                next = (next + 1) % CUDA_RANGES_MAX;
            }
            table->slots[hole].id = 0;
            table->count--;
            status = 0;
            break;
        }
        slot = (slot + 1) % CUDA_RANGES_MAX;
    }
    pthread_mutex_unlock(&table->lock);
    return status;
}
