/*
 * integrate.c: per-kernel values from PM samples (integrate.h).
 *
 * One pass over the samples that overlap the kernel, found by a binary
 * search on their starts.
 *
 * Must never: sum a flagged or non-finite sample, wrap an unsigned
 * difference, or read outside the arrays it is given. The sums are kept in double: a sample's value
 * times a fraction is not whole, and the totals stay far inside double's
 * exact range for the counts PM samples hold (bytes of a second at HBM
 * speed: 5e12 < 2^53).
 */
#include "attrib/integrate.h"

#include <math.h>
#include <string.h>

/* Index of the first sample that can overlap a kernel starting at start_ns. */
static size_t first_overlapping(const attrib_pm_sample *samples, size_t count, uint64_t start_ns)
{
    size_t low = 0, high = count;
    while (low < high) { /* the first sample that starts after start_ns */
        size_t middle = low + (high - low) / 2;
        if (samples[middle].start_ns <= start_ns)
            low = middle + 1;
        else
            high = middle;
    }
    size_t i = low > 0 ? low - 1 : 0;
    /* A clamped first sample can start before earlier ones end: look back. */
    while (i > 0 && samples[i - 1].end_ns > start_ns)
        i--;
    return i;
}

/* What the overlapping samples add up to, before the status is decided. */
typedef struct sums {
    double sum;          /* additive: value * overlap / width */
    double edge_bound;   /* additive: value * max(f, 1 - f) of each edge sample */
    double weighted;     /* mean: value * overlap */
    double edge_overlap; /* mean: the overlap of edge samples */
    double low, high;    /* mean: the values averaged */
    uint64_t counted_ns; /* overlap of the unflagged samples */
} sums;

static void add_sample(sums *s, const attrib_pm_sample *sample, uint64_t overlap)
{
    uint64_t width = sample->end_ns - sample->start_ns;
    double fraction = (double)overlap / (double)width;
    double value = sample->value;
    s->sum += value * fraction;
    s->weighted += value * (double)overlap;
    if (overlap < width) {
        s->edge_bound += fabs(value) * (fraction > 0.5 ? fraction : 1.0 - fraction);
        s->edge_overlap += (double)overlap;
    }
    if (s->counted_ns == 0 || value < s->low)
        s->low = value;
    if (s->counted_ns == 0 || value > s->high)
        s->high = value;
    s->counted_ns += overlap;
}

/* The value and its bound from the sums (integrate.h says what they mean). */
static void finish_value(const sums *s, int additive, attrib_integral *out)
{
    if (s->counted_ns == 0 && out->duration_ns > 0) {
        out->error_bound = INFINITY; /* nothing counted: no rate to bound it by */
    } else if (additive) {
        /* The missed time at the highest rate the counted time allows (its
         * sum plus the edges' bound), so the bound holds for a steady rate. */
        uint64_t missed = out->duration_ns > s->counted_ns ? out->duration_ns - s->counted_ns : 0;
        double rate =
            s->counted_ns > 0 ? (fabs(s->sum) + s->edge_bound) / (double)s->counted_ns : 0.0;
        out->value = s->sum;
        out->error_bound = s->edge_bound + rate * (double)missed;
    } else if (s->counted_ns > 0) {
        out->value = s->weighted / (double)s->counted_ns;
        out->error_bound = s->edge_overlap / (double)s->counted_ns * (s->high - s->low);
    }
}

int attrib_integrate(const attrib_pm_sample *samples, size_t sample_count, uint64_t kernel_start_ns,
                     uint64_t kernel_end_ns, int additive, uint64_t min_ns, attrib_integral *out)
{
    if (out == NULL || (samples == NULL && sample_count > 0) || kernel_end_ns < kernel_start_ns)
        return -1;
    memset(out, 0, sizeof(*out));
    out->duration_ns = kernel_end_ns - kernel_start_ns;
    sums s = {0};
    size_t i = sample_count > 0 ? first_overlapping(samples, sample_count, kernel_start_ns) : 0;
    for (; i < sample_count && samples[i].start_ns < kernel_end_ns; i++) {
        const attrib_pm_sample *sample = &samples[i];
        uint64_t low = sample->start_ns > kernel_start_ns ? sample->start_ns : kernel_start_ns;
        uint64_t high = sample->end_ns < kernel_end_ns ? sample->end_ns : kernel_end_ns;
        if (high <= low)
            continue;
        out->samples++;
        out->covered_ns += high - low;
        if (sample->flags != 0 || !isfinite(sample->value)) {
            out->flagged++;
            out->flags |= sample->flags != 0 ? sample->flags : ATTRIB_FLAG_NOT_FINITE;
            continue;
        }
        add_sample(&s, sample, high - low);
    }
    if (out->duration_ns < min_ns) {
        out->status = ATTRIB_INTEGRAL_BELOW_MINIMUM;
        return 0;
    }
    finish_value(&s, additive, out);
    if (out->duration_ns == 0)
        out->status = ATTRIB_INTEGRAL_UNCOVERED; /* no time to hold a value */
    else if (out->flagged > 0)
        out->status = ATTRIB_INTEGRAL_FLAGGED;
    else if ((double)out->covered_ns < ATTRIB_MIN_COVERAGE * (double)out->duration_ns)
        out->status = ATTRIB_INTEGRAL_UNCOVERED;
    else
        out->status = ATTRIB_INTEGRAL_MEASURED;
    return 0;
}
