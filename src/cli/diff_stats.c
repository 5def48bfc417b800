/*
 * diff_stats.c: the statistics of `flare diff` (diff_stats.h): the radix
 * sort of a name's durations, its summary, the Mann-Whitney U test (exact
 * for small samples without ties, normal approximation with tie and
 * continuity corrections otherwise), the test of the total GPU time, and
 * the verdict rule.
 *
 * Pure computation: it must never print, never touch a session, and never
 * hold anything between calls. Sums that could leave the range of a
 * double's exact integers (U of two million-launch sides, the tie
 * correction) are kept in long double.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/diff_stats.h"

const char *diff_verdict_name(diff_verdict verdict)
{
    static const char *const names[] = {
#define DIFF_VERDICT_NAME_(id, name) name,
        DIFF_VERDICTS(DIFF_VERDICT_NAME_)
#undef DIFF_VERDICT_NAME_
    };
    if ((int)verdict < 0 || verdict >= DIFF_VERDICT_COUNT)
        return "?";
    return names[verdict];
}

/* ---- sorting ---- */

/* Below this, insertion sort beats the radix sort's eight histograms. */
#define DIFF_SMALL_SORT 64

static void insertion_sort(uint64_t *values, size_t count)
{
    for (size_t i = 1; i < count; i++) {
        uint64_t value = values[i];
        size_t j = i;
        for (; j > 0 && values[j - 1] > value; j--)
            values[j] = values[j - 1];
        values[j] = value;
    }
}

int diff_sort_durations(uint64_t *values, size_t count)
{
    if (count < DIFF_SMALL_SORT) {
        insertion_sort(values, count);
        return 0;
    }
    /* Every byte's histogram in one pass; a byte that is the same in every
     * value (the high bytes of nanosecond durations) costs no pass. */
    size_t(*histograms)[256] = calloc(8, sizeof *histograms);
    uint64_t *scratch = malloc(count * sizeof *scratch);
    if (histograms == NULL || scratch == NULL) {
        free(histograms);
        free(scratch);
        return -1;
    }
    for (size_t i = 0; i < count; i++)
        for (int byte = 0; byte < 8; byte++)
            histograms[byte][(values[i] >> (8 * byte)) & 0xff]++;
    uint64_t *from = values, *to = scratch;
    for (int byte = 0; byte < 8; byte++) {
        size_t *histogram = histograms[byte];
        if (histogram[(from[0] >> (8 * byte)) & 0xff] == count)
            continue;
        size_t offset = 0;
        for (int digit = 0; digit < 256; digit++) {
            size_t here = histogram[digit];
            histogram[digit] = offset;
            offset += here;
        }
        for (size_t i = 0; i < count; i++)
            to[histogram[(from[i] >> (8 * byte)) & 0xff]++] = from[i];
        uint64_t *swap = from;
        from = to;
        to = swap;
    }
    if (from != values)
        memcpy(values, from, count * sizeof *values);
    free(scratch);
    free(histograms);
    return 0;
}

/* ---- one side ---- */

void diff_side_summarize(const uint64_t *sorted, size_t count, diff_side *out)
{
    memset(out, 0, sizeof *out);
    out->count = count;
    if (count == 0)
        return;
    long double sum = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < count; i++) {
        sum += (long double)sorted[i];
        total = sorted[i] > UINT64_MAX - total ? UINT64_MAX : total + sorted[i];
    }
    out->total_ns = total;
    long double mean = sum / (long double)count;
    out->mean_ns = (double)mean;
    /* Nearest rank: the ceil(count / 2)-th smallest, 1-based. */
    out->median_ns = sorted[(count + 1) / 2 - 1];
    if (count < 2)
        return;
    long double squares = 0;
    for (size_t i = 0; i < count; i++) {
        long double deviation = (long double)sorted[i] - mean;
        squares += deviation * deviation;
    }
    out->variance = (double)(squares / (long double)(count - 1));
}

/* ---- the Mann-Whitney U test ---- */

/*
 * The exact two-sided p of U = u for samples of m (the one U counts) and
 * n, no ties: under the null every order of the m + n values is equally
 * likely, and the largest value is the m-sample's with probability
 * m / (m + n) (adding n to U) or the n-sample's (adding nothing):
 *   P(m, n, u) = m/(m+n) P(m-1, n, u-n) + n/(m+n) P(m, n-1, u).
 * Rows over m, each (n + 1) x (m n + 1) probabilities. p = min(1, 2 x the
 * smaller tail). Returns -1 when the table cannot be allocated.
 */
static int exact_p(size_t m, size_t n, double u, double *p)
{
    size_t width = m * n + 1;
    double *previous = calloc((n + 1) * width, sizeof *previous);
    double *current = calloc((n + 1) * width, sizeof *current);
    if (previous == NULL || current == NULL) {
        free(previous);
        free(current);
        return -1;
    }
    /* Row i = 0: U is 0 whatever j. */
    for (size_t j = 0; j <= n; j++)
        previous[j * width] = 1.0;
    for (size_t i = 1; i <= m; i++) {
        memset(current, 0, (n + 1) * width * sizeof *current);
        current[0] = 1.0; /* j = 0: U is 0 */
        for (size_t j = 1; j <= n; j++) {
            double from_m = (double)i / (double)(i + j), from_n = (double)j / (double)(i + j);
            double *cell = current + j * width;
            const double *left = previous + j * width;      /* (i - 1, j) */
            const double *down = current + (j - 1) * width; /* (i, j - 1) */
            for (size_t value = 0; value <= i * j; value++) {
                double probability = from_n * down[value];
                if (value >= j)
                    probability += from_m * left[value - j];
                cell[value] = probability;
            }
        }
        double *swap = previous;
        previous = current;
        current = swap;
    }
    const double *distribution = previous + n * width;
    size_t observed = (size_t)u; /* no ties: u is a whole number */
    double lower = 0, upper = 0;
    for (size_t value = 0; value < width; value++) {
        if (value <= observed)
            lower += distribution[value];
        if (value >= observed)
            upper += distribution[value];
    }
    double two_sided = 2.0 * (lower < upper ? lower : upper);
    *p = two_sided < 1.0 ? two_sided : 1.0;
    free(previous);
    free(current);
    return 0;
}

int diff_mann_whitney(const uint64_t *base, size_t base_count, const uint64_t *new_values,
                      size_t new_count, diff_test *out)
{
    memset(out, 0, sizeof *out);
    out->p_value = 1.0;
    out->prob_new_longer = 0.5;
    if (base_count == 0 || new_count == 0)
        return 0;
    /* Merge the two sorted arrays a run of equal values at a time: each NEW
     * value of the run is longer than every BASE value before the run and
     * ties with the run's BASE values. */
    long double twice_u = 0; /* 2U: a whole number, exact in long double */
    long double ties = 0;    /* sum of t^3 - t over runs of t equal values */
    int tied = 0;
    size_t b = 0, n = 0;
    while (b < base_count || n < new_count) {
        uint64_t value = b == base_count                              ? new_values[n]
                         : n == new_count || base[b] <= new_values[n] ? base[b]
                                                                      : new_values[n];
        size_t base_before = b, run_base = 0, run_new = 0;
        while (b < base_count && base[b] == value) {
            b++;
            run_base++;
        }
        while (n < new_count && new_values[n] == value) {
            n++;
            run_new++;
        }
        twice_u += (long double)run_new * (2.0L * (long double)base_before + (long double)run_base);
        long double t = (long double)(run_base + run_new);
        if (t > 1) {
            ties += t * t * t - t;
            tied = 1;
        }
    }
    long double pairs = (long double)base_count * (long double)new_count;
    long double u = twice_u / 2;
    out->u_new = (double)u;
    out->prob_new_longer = (double)(u / pairs);

    if (!tied && base_count <= DIFF_EXACT_MAX && new_count <= DIFF_EXACT_MAX) {
        out->exact = 1;
        return exact_p(new_count, base_count, (double)u, &out->p_value);
    }
    long double total = (long double)base_count + (long double)new_count;
    long double variance = pairs / 12.0L * ((total + 1) - ties / (total * (total - 1)));
    if (!(variance > 0))
        return 0; /* every duration the same: nothing to test */
    long double distance = u - pairs / 2;
    /* Continuity correction: half a step towards the middle. */
    long double corrected = distance > 0.5L    ? distance - 0.5L
                            : distance < -0.5L ? distance + 0.5L
                                               : 0;
    double z = (double)(corrected / sqrtl(variance));
    out->z = z;
    out->p_value = erfc(fabs(z) / sqrt(2.0));
    return 0;
}

/* ---- verdicts ---- */

double diff_change_pct(double base, double new_value)
{
    if (base == 0)
        return new_value == 0 ? 0 : INFINITY;
    return (new_value - base) / base * 100.0;
}

diff_verdict diff_verdict_of(const diff_side *base, const diff_side *new_side,
                             const diff_test *test, const diff_rule *rule)
{
    if (new_side->count == 0)
        return DIFF_ONLY_BASE;
    if (base->count == 0)
        return DIFF_ONLY_NEW;
    if (test == NULL || !(test->p_value < rule->alpha))
        return DIFF_SAME;
    double change = diff_change_pct(base->mean_ns, new_side->mean_ns);
    int ranks_longer = test->prob_new_longer > 0.5, ranks_shorter = test->prob_new_longer < 0.5;
    if (change >= rule->min_change_pct)
        return ranks_longer ? DIFF_SLOWER : DIFF_MIXED;
    if (change <= -rule->min_change_pct)
        return ranks_shorter ? DIFF_FASTER : DIFF_MIXED;
    return DIFF_SAME;
}

diff_verdict diff_total_verdict(uint64_t base_total, double base_variance, uint64_t new_total,
                                double new_variance, const diff_rule *rule, diff_test *test)
{
    memset(test, 0, sizeof *test);
    test->p_value = 1.0;
    double difference = (double)new_total - (double)base_total;
    double deviation = sqrt(base_variance + new_variance);
    if (deviation > 0) {
        test->z = difference / deviation;
        test->p_value = erfc(fabs(test->z) / sqrt(2.0));
    } else if (difference != 0) {
        test->p_value = 0; /* no spread at all, yet the totals differ */
    }
    if (!(test->p_value < rule->alpha))
        return DIFF_SAME;
    double change = diff_change_pct((double)base_total, (double)new_total);
    if (change >= rule->min_change_pct)
        return DIFF_SLOWER;
    if (change <= -rule->min_change_pct)
        return DIFF_FASTER;
    return DIFF_SAME;
}
