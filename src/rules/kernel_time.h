/*
 * kernel_time.h: recent kernels' GPU time by name, for choosing the kernel a
 * rule's `action replay` replays when its metric names none (a launch rate,
 * a GPU metric, a counter): the kernel with the most GPU time in the rule's
 * `over` (docs/rules.md, "Actions").
 *
 * A bounded ring of the latest kernels (end time, duration, name slot) and a
 * bounded table of names; created only when such a rule exists; fed and read
 * on the collector thread only. Never allocates after creation; a kernel
 * whose name finds no slot is counted, never chosen.
 */
#ifndef FLARE_RULES_KERNEL_TIME_H
#define FLARE_RULES_KERNEL_TIME_H

#include <stddef.h>
#include <stdint.h>

#define RULES_KERNEL_TIME_RING  65536 /* kernels remembered */
#define RULES_KERNEL_TIME_NAMES 1024  /* distinct names remembered */
#define RULES_KERNEL_NAME_MAX   256

typedef struct rules_kernel_time rules_kernel_time;

/* FLARE_OK with *out, or FLARE_ERR_NO_MEMORY. */
int rules_kernel_time_create(rules_kernel_time **out);
void rules_kernel_time_free(rules_kernel_time *times);
void rules_kernel_time_add(rules_kernel_time *times, const char *name, uint64_t end_ns,
                           uint64_t duration_ns);

typedef struct rules_kernel_top {
    char name[RULES_KERNEL_NAME_MAX];
    uint64_t total_ns; /* its GPU time among the kernels looked at */
    uint64_t kernels;  /* kernels looked at (every name) */
    /* The earliest end time looked at: later than the from_ns asked for
     * when the ring no longer held the start of the window. */
    uint64_t covered_from_ns;
} rules_kernel_top;
/* The name with the most GPU time among kernels that ended in [from_ns,
 * to_ns]: 1 with *top filled, 0 when no named kernel ended there. */
int rules_kernel_time_top(const rules_kernel_time *times, uint64_t from_ns, uint64_t to_ns,
                          rules_kernel_top *top);
/* Kernels whose name found no slot (the table was full). */
uint64_t rules_kernel_time_unnamed(const rules_kernel_time *times);

#endif /* FLARE_RULES_KERNEL_TIME_H */
