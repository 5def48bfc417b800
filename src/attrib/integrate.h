/*
 * integrate.h: per-kernel values from PM samples. A PM sample counts a
 * metric over its own interval, for whatever ran then; a kernel's share is
 * read off the samples that overlap it: each contributes its value times
 * the overlap over its width (pro rata at the kernel's edges), and a
 * flagged sample (an overflow, a sample after a hole, a guessed or clamped
 * time: pm_engine.h) contributes nothing, ever. This is what range replay
 * by PM sampling (issue 25) integrates per replayed kernel, the C form of
 * tests/gpu/pm_accuracy.py's integrate_launch that measured the method on
 * the H200 (docs/PERFORMANCE.md, Session 14): the same estimates, the same
 * statuses, plus an error bound.
 *
 * Must never: sum a flagged sample, read past its inputs, or allocate; it
 * does no I/O and takes no locks.
 */
#ifndef FLARE_ATTRIB_INTEGRATE_H
#define FLARE_ATTRIB_INTEGRATE_H

#include <stddef.h>
#include <stdint.h>

/* Least share of a kernel its samples must cover for a value (as
 * pm_accuracy.py's MIN_COVERAGE). */
#define ATTRIB_MIN_COVERAGE 0.9

/* Or'd into attrib_integral.flags for a sample whose value is NaN or
 * infinite: never summed either. */
#define ATTRIB_FLAG_NOT_FINITE 0x80000000u

typedef struct attrib_pm_sample {
    uint64_t start_ns, end_ns; /* end_ns > start_ns; a sample of no width is skipped */
    double value;              /* one metric's value over the sample */
    uint32_t flags;            /* non-zero: never summed (pm_sample's flags) */
} attrib_pm_sample;

typedef enum attrib_integral_status {
    ATTRIB_INTEGRAL_MEASURED = 0,
    ATTRIB_INTEGRAL_FLAGGED,       /* a flagged sample overlapped it: value of the rest */
    ATTRIB_INTEGRAL_UNCOVERED,     /* samples cover under ATTRIB_MIN_COVERAGE of it */
    ATTRIB_INTEGRAL_BELOW_MINIMUM, /* shorter than the method serves: no value */
} attrib_integral_status;

typedef struct attrib_integral {
    attrib_integral_status status;
    /* Additive metrics (counts, bytes, cycles: a .sum): the sum of each
     * unflagged sample's value times overlap over width. Rates and shares
     * (.pct, .ratio, .per_second): the mean of the unflagged samples
     * weighted by their overlap. 0 with BELOW_MINIMUM or when no unflagged
     * sample overlaps. */
    double value;
    /* How far value may be from the kernel's own, in value's unit, if the
     * samples hold only this kernel's work where they overlap it: an edge
     * sample (overlapping fraction f of it) may hold anything from none to
     * all of its value, so it adds value * max(f, 1 - f) for a sum; time
     * the samples miss (holes, flagged samples) adds the highest rate the
     * counted time allows over it (exact bound for a steady rate only).
     * For a mean, the edge samples' overlap share times the spread of the
     * values it averages. INFINITY when no unflagged sample overlaps a
     * kernel of some length. */
    double error_bound;
    uint64_t duration_ns; /* the kernel's */
    /* Its time that samples cover, flagged ones included (as pm_accuracy.py
     * counts coverage). */
    uint64_t covered_ns;
    uint32_t samples; /* samples that overlap it */
    uint32_t flagged; /* of those, flagged */
    uint32_t flags;   /* the flagged ones' flags, or'd */
} attrib_integral;

/*
 * The value of one metric over [kernel_start_ns, kernel_end_ns): samples
 * sorted by start_ns with their end_ns not decreasing either (PM samples
 * follow one another; a clamped first one, which pm_engine flags, may
 * start before an earlier one ends, which is looked back for: the earlier
 * samples that still overlap are the ones just before it). Two unflagged
 * samples that overlap would both be summed there.
 * additive: non-zero for a metric that adds up over time, zero for a rate
 * or share. min_ns: a kernel shorter than it is BELOW_MINIMUM. Statuses in
 * pm_accuracy.py's order: below the minimum, then flagged, then uncovered;
 * a kernel of no length (not below min_ns) is UNCOVERED.
 * Returns 0, or -1 (out untouched) for a NULL pointer with a count, or a
 * kernel that ends before it starts.
 */
int attrib_integrate(const attrib_pm_sample *samples, size_t sample_count, uint64_t kernel_start_ns,
                     uint64_t kernel_end_ns, int additive, uint64_t min_ns, attrib_integral *out);

#endif /* FLARE_ATTRIB_INTEGRATE_H */
