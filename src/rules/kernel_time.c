/*
 * kernel_time.c: recent kernels' GPU time by name (kernel_time.h).
 *
 * Names are kept in an open-addressing table (FNV-1a, linear probing) that
 * only grows; the ring refers to them by slot. Collector thread only: no
 * lock, and nothing here may be called from the program's threads.
 */
#include "rules/kernel_time.h"

#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"

#define NO_SLOT UINT16_MAX

typedef struct kernel_entry {
    uint64_t end_ns;
    uint64_t duration_ns;
    uint16_t slot;
} kernel_entry;

struct rules_kernel_time {
    kernel_entry ring[RULES_KERNEL_TIME_RING];
    size_t next;  /* where the next kernel goes */
    size_t count; /* kernels in the ring */
    char names[RULES_KERNEL_TIME_NAMES][RULES_KERNEL_NAME_MAX];
    uint8_t used[RULES_KERNEL_TIME_NAMES];
    size_t names_used;
    uint64_t unnamed;
};

int rules_kernel_time_create(rules_kernel_time **out)
{
    *out = calloc(1, sizeof(**out));
    return *out != NULL ? FLARE_OK : FLARE_ERR_NO_MEMORY;
}

void rules_kernel_time_free(rules_kernel_time *times)
{
    free(times);
}

static uint16_t slot_of(rules_kernel_time *times, const char *name)
{
    uint64_t hash = 1469598103934665603ull;
    for (const char *c = name; *c != '\0'; c++)
        hash = (hash ^ (uint8_t)*c) * 1099511628211ull;
    size_t slot = (size_t)(hash % RULES_KERNEL_TIME_NAMES);
    for (size_t probe = 0; probe < RULES_KERNEL_TIME_NAMES; probe++) {
        size_t at = (slot + probe) % RULES_KERNEL_TIME_NAMES;
        if (!times->used[at]) {
            /* Kept a quarter free, so probes stay short. */
            if (times->names_used * 4 >= RULES_KERNEL_TIME_NAMES * 3)
                return NO_SLOT;
            times->used[at] = 1;
            times->names_used++;
            size_t length = strnlen(name, RULES_KERNEL_NAME_MAX - 1);
            memcpy(times->names[at], name, length);
            times->names[at][length] = '\0';
            return (uint16_t)at;
        }
        if (strncmp(times->names[at], name, RULES_KERNEL_NAME_MAX - 1) == 0)
            return (uint16_t)at;
    }
    return NO_SLOT;
}

void rules_kernel_time_add(rules_kernel_time *times, const char *name, uint64_t end_ns,
                           uint64_t duration_ns)
{
    uint16_t slot = name != NULL ? slot_of(times, name) : NO_SLOT;
    if (slot == NO_SLOT)
        times->unnamed++;
    times->ring[times->next] =
        (kernel_entry){.end_ns = end_ns, .duration_ns = duration_ns, .slot = slot};
    times->next = (times->next + 1) % RULES_KERNEL_TIME_RING;
    if (times->count < RULES_KERNEL_TIME_RING)
        times->count++;
}

int rules_kernel_time_top(const rules_kernel_time *times, uint64_t from_ns, uint64_t to_ns,
                          rules_kernel_top *top)
{
    static uint64_t totals[RULES_KERNEL_TIME_NAMES]; /* collector thread only */
    memset(totals, 0, sizeof(totals));
    memset(top, 0, sizeof(*top));
    for (size_t i = 0; i < times->count; i++) {
        const kernel_entry *entry = &times->ring[i];
        if (entry->end_ns < from_ns || entry->end_ns > to_ns)
            continue;
        top->kernels++;
        if (entry->slot != NO_SLOT)
            totals[entry->slot] += entry->duration_ns;
    }
    size_t best = NO_SLOT;
    for (size_t slot = 0; slot < RULES_KERNEL_TIME_NAMES; slot++) {
        if (times->used[slot] && totals[slot] > 0 &&
            (best == NO_SLOT || totals[slot] > totals[best]))
            best = slot;
    }
    if (best == NO_SLOT)
        return 0;
    memcpy(top->name, times->names[best], sizeof(top->name));
    top->total_ns = totals[best];
    /* A full ring has forgotten what ended before its oldest kernel. */
    top->covered_from_ns = from_ns;
    if (times->count == RULES_KERNEL_TIME_RING && times->ring[times->next].end_ns > from_ns)
        top->covered_from_ns = times->ring[times->next].end_ns;
    return 1;
}

uint64_t rules_kernel_time_unnamed(const rules_kernel_time *times)
{
    return times->unnamed;
}
