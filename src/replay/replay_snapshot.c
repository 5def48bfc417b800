/*
 * replay_snapshot.c: the copy of a device's tracked memory that kernel and
 * range replay restore before each pass.
 *
 * Shadows go to device memory when enough is free (restores then run at
 * device-to-device copy bandwidth), else to pinned host memory; a footprint
 * over the budget, or room in neither, declines the replay. Copies go
 * through the backend's batched copy when it has one: issuing every copy
 * and waiting once is what lets many small allocations restore near copy
 * bandwidth. It must never leave a shadow allocated after free, and never
 * report a restore as complete when any copy failed.
 */
#include "replay/replay_internal.h"

#include "core/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs copies through copy_batch, or one by one. On failure *failed_index
 * is the first copy known to have failed (count when unknown). */
static int copy_all(const replay_device_ops *ops, int device, const replay_copy *copies,
                    size_t count, uint64_t timeout_ns, size_t *failed_index)
{
    *failed_index = count;
    if (count == 0) {
        return FLARE_OK;
    }
    if (ops->copy_batch != NULL) {
        return ops->copy_batch(device, copies, count, timeout_ns, failed_index);
    }
    uint64_t deadline = core_now_ns() + timeout_ns;
    for (size_t index = 0; index < count; index++) {
        uint64_t now = core_now_ns();
        uint64_t left = deadline > now ? deadline - now : 1;
        int status = ops->copy(device, copies[index].destination, copies[index].source,
                               copies[index].bytes, left);
        if (status != FLARE_OK) {
            *failed_index = index;
            return status;
        }
    }
    return FLARE_OK;
}

void replay_snapshot_free(replay_snapshot *snapshot)
{
    if (snapshot->shadows != NULL) {
        for (long index = 0; index < snapshot->count; index++) {
            if (snapshot->shadows[index] != NULL) {
                snapshot->ops->shadow_free(snapshot->device, snapshot->on_device,
                                           snapshot->shadows[index]);
            }
        }
    }
    free(snapshot->shadows);
    free(snapshot->allocations);
    free(snapshot->copies);
    snapshot->shadows = NULL;
    snapshot->allocations = NULL;
    snapshot->copies = NULL;
    snapshot->count = 0;
}

/* Allocates one shadow per allocation on the chosen side; false (with
 * everything allocated so far freed) when one fails. */
static bool allocate_shadows(replay_snapshot *snapshot, bool on_device)
{
    for (long index = 0; index < snapshot->count; index++) {
        if (snapshot->ops->shadow_alloc(snapshot->device, on_device,
                                        snapshot->allocations[index].bytes,
                                        &snapshot->shadows[index]) != FLARE_OK) {
            snapshot->shadows[index] = NULL;
            for (long freed = 0; freed < index; freed++) {
                snapshot->ops->shadow_free(snapshot->device, on_device, snapshot->shadows[freed]);
                snapshot->shadows[freed] = NULL;
            }
            return false;
        }
    }
    snapshot->on_device = on_device;
    return true;
}

const char *replay_snapshot_take(replay_snapshot *snapshot, const replay_device_ops *ops,
                                 const replay_settings *settings, int device, char *reason,
                                 size_t reason_size)
{
    memset(snapshot, 0, sizeof *snapshot);
    snapshot->ops = ops;
    snapshot->device = device;
    char untracked[256];
    snapshot->count =
        replay_inventory_copy(device, &snapshot->allocations, untracked, sizeof untracked);
    if (untracked[0] != '\0') {
        snprintf(reason, reason_size, "untracked memory: %.200s", untracked);
        return reason;
    }
    if (snapshot->count < 0) {
        snapshot->count = 0;
        snprintf(reason, reason_size, "snapshot failed: out of host memory for the inventory");
        return reason;
    }
    for (long index = 0; index < snapshot->count; index++) {
        snapshot->bytes += snapshot->allocations[index].bytes;
    }
    if (snapshot->bytes > settings->footprint_budget) {
        snprintf(reason, reason_size,
                 "footprint budget: %" PRIu64 " bytes tracked on device %d, budget %" PRIu64,
                 snapshot->bytes, device, settings->footprint_budget);
        return reason;
    }
    size_t slots = (size_t)(snapshot->count > 0 ? snapshot->count : 1);
    snapshot->shadows = calloc(slots, sizeof *snapshot->shadows);
    snapshot->copies = calloc(slots, sizeof *snapshot->copies);
    if (snapshot->shadows == NULL || snapshot->copies == NULL) {
        snprintf(reason, reason_size, "snapshot failed: out of host memory");
        return reason;
    }
    /* Device shadows only with an eighth of free memory (at least 256 MiB)
     * left over for the program and the profiler. */
    bool on_device = settings->allow_device_shadow;
    if (on_device && ops->device_memory_free != NULL) {
        size_t free_bytes = ops->device_memory_free(device);
        size_t reserve = free_bytes / 8 > (256u << 20) ? free_bytes / 8 : (256u << 20);
        on_device = free_bytes > reserve && snapshot->bytes <= free_bytes - reserve;
    }
    if (!allocate_shadows(snapshot, on_device) &&
        (!on_device || !allocate_shadows(snapshot, false))) {
        snprintf(reason, reason_size,
                 "footprint budget: neither device nor pinned host memory holds a %" PRIu64
                 "-byte snapshot",
                 snapshot->bytes);
        return reason;
    }
    for (long index = 0; index < snapshot->count; index++) {
        snapshot->copies[index] =
            (replay_copy){.destination = snapshot->shadows[index],
                          .source = (const void *)snapshot->allocations[index].address,
                          .bytes = snapshot->allocations[index].bytes};
    }
    uint64_t started = core_now_ns();
    size_t failed = 0;
    int status = copy_all(ops, device, snapshot->copies, (size_t)snapshot->count,
                          settings->pass_timeout_ns, &failed);
    snapshot->copy_ns = core_now_ns() - started;
    if (status != FLARE_OK) {
        if (failed < (size_t)snapshot->count) {
            snprintf(reason, reason_size,
                     "snapshot failed: copying allocation 0x%" PRIxPTR " (%zu bytes): %s",
                     snapshot->allocations[failed].address, snapshot->allocations[failed].bytes,
                     flare_strerror(status));
        } else {
            snprintf(reason, reason_size, "snapshot failed: %ld copies: %.100s", snapshot->count,
                     flare_strerror(status));
        }
        return reason;
    }
    /* From now on the copies run the other way: shadow to allocation. */
    for (long index = 0; index < snapshot->count; index++) {
        snapshot->copies[index] =
            (replay_copy){.destination = (void *)snapshot->allocations[index].address,
                          .source = snapshot->shadows[index],
                          .bytes = snapshot->allocations[index].bytes};
    }
    return NULL;
}

int replay_snapshot_restore(replay_snapshot *snapshot, uint64_t timeout_ns, replay_record *record,
                            char *detail, size_t detail_size)
{
    uint64_t started = core_now_ns();
    size_t failed = 0;
    int status = copy_all(snapshot->ops, snapshot->device, snapshot->copies,
                          (size_t)snapshot->count, timeout_ns, &failed);
    record->restore_ns += core_now_ns() - started;
    if (status == FLARE_OK) {
        record->bytes_restored += snapshot->bytes;
        replay_stats_add(0, 0, 0, 0, snapshot->bytes);
        return FLARE_OK;
    }
    if (failed < (size_t)snapshot->count) {
        snprintf(detail, detail_size,
                 "restore failed part-way: allocation %zu of %ld (0x%" PRIxPTR
                 ", %zu bytes) could not be written back (%s)",
                 failed + 1, snapshot->count, snapshot->allocations[failed].address,
                 snapshot->allocations[failed].bytes, flare_strerror(status));
    } else {
        snprintf(detail, detail_size,
                 "restore failed part-way: %ld copies of %" PRIu64 " bytes did not all finish (%s)",
                 snapshot->count, snapshot->bytes, flare_strerror(status));
    }
    return status;
}

void replay_record_pass(replay_record *record, uint32_t pass, uint64_t start_ns, uint64_t end_ns)
{
    if (pass < REPLAY_RECORD_PASS_MAX) {
        record->pass_start_ns[pass] = start_ns;
        record->pass_end_ns[pass] = end_ns;
        record->pass_count_kept = pass + 1;
    }
    record->passes_run = pass + 1;
    replay_stats_add(0, 1, 0, 0, 0);
}
