/*
 * diff_stats.h: the statistics of `flare diff`: sorting a name's launch
 * durations, summarising them, the Mann-Whitney U test between two
 * sessions' durations of one name, the test of the total GPU time, and the
 * verdict each row gets (docs/cli.md, "flare diff").
 *
 * Pure computation on the caller's arrays: no I/O, no session, no global
 * state. It must never print, never read a clock, and never allocate
 * except where a function says so (the sort's scratch buffer, the exact
 * distribution of a small test), failing then with -1 and nothing changed
 * but the caller's array order.
 *
 * The verdict rule, in one place (diff_verdict_of):
 *   - the rank test says whether the two sets of durations differ beyond
 *     run-to-run noise: p < alpha (default 0.01);
 *   - the relative change of the mean says by how much and which way; the
 *     mean, because total GPU time is count x mean: the change a person
 *     pays for, and the one the total and the gate speak of;
 *   - slower: p < alpha, mean change >= +min_change (default 2%), and the
 *     launches' ranks moved the same way (NEW's durations tend to be the
 *     longer ones: U of NEW above half of its range); faster: the mirror;
 *   - mixed: p < alpha and the mean moved by min_change or more, but the
 *     ranks the other way: the bulk of the launches moved one way and a
 *     few long ones the other (outliers); never gates;
 *   - same: anything else (no evidence, or too small a change to matter:
 *     with a million launches a 0.1% shift is "significant" yet noise).
 */
#ifndef FLARE_CLI_DIFF_STATS_H
#define FLARE_CLI_DIFF_STATS_H

#include <stddef.h>
#include <stdint.h>

/* X(id, name): every verdict and the word the output and JSON use. */
#define DIFF_VERDICTS(X)                                                                           \
    X(SAME, "same")                                                                                \
    X(SLOWER, "slower")                                                                            \
    X(FASTER, "faster")                                                                            \
    X(MIXED, "mixed")                                                                              \
    X(ONLY_BASE, "only in BASE")                                                                   \
    X(ONLY_NEW, "only in NEW")

typedef enum diff_verdict {
#define DIFF_VERDICT_ENUM_(id, name) DIFF_##id,
    DIFF_VERDICTS(DIFF_VERDICT_ENUM_)
#undef DIFF_VERDICT_ENUM_
        DIFF_VERDICT_COUNT
} diff_verdict;

/* The verdict's word ("slower"); "?" for a value out of range. */
const char *diff_verdict_name(diff_verdict verdict);

/* What counts as beyond noise. */
typedef struct diff_rule {
    double alpha;          /* p below this: the durations differ (default 0.01) */
    double min_change_pct; /* and the mean moved by at least this (default 2) */
} diff_rule;

#define DIFF_DEFAULT_ALPHA          0.01
#define DIFF_DEFAULT_MIN_CHANGE_PCT 2.0

/* Sorts values ascending (LSD radix sort, bytes that are the same in every
 * value skipped). Allocates a scratch array of count values; returns 0, or
 * -1 when it cannot (values then unchanged). */
int diff_sort_durations(uint64_t *values, size_t count);

/* One side's summary of one name. */
typedef struct diff_side {
    uint64_t count;
    uint64_t total_ns;  /* saturates at UINT64_MAX (only a damaged file gets there) */
    double mean_ns;     /* 0 when count is 0 */
    uint64_t median_ns; /* nearest rank, as `flare report`'s p50; 0 when count is 0 */
    double variance;    /* sample variance (n - 1), ns^2; 0 when count < 2 */
} diff_side;

/* Summarises count durations sorted ascending. Cannot fail. */
void diff_side_summarize(const uint64_t *sorted, size_t count, diff_side *out);

/* The Mann-Whitney U test of one name between the sessions. */
typedef struct diff_test {
    double u_new;           /* pairs (BASE launch, NEW launch) where NEW's is longer, ties 1/2 */
    double prob_new_longer; /* u_new / (BASE count x NEW count): 0.5 when nothing moved */
    double z;               /* the normal approximation's z (continuity-corrected); 0 when exact */
    double p_value;         /* two-sided; 1 when either side is empty or everything is tied */
    int exact;              /* 1: p from the exact distribution (small samples, no ties) */
} diff_test;

/* Largest side for which the exact distribution of U is used (both sides
 * at most this, and no tied durations); above it, the normal
 * approximation with the tie correction. */
#define DIFF_EXACT_MAX 25

/*
 * The two-sided test between base (base_count durations) and new_values
 * (new_count), both sorted ascending: U by merging the two (ties get half,
 * as with mid-ranks), then the exact p for small samples without ties, or
 * the normal approximation with tie and continuity corrections. O(n) after
 * the sort. Returns 0, or -1 when the exact distribution's table cannot be
 * allocated (*out then says p = 1).
 */
int diff_mann_whitney(const uint64_t *base, size_t base_count, const uint64_t *new_values,
                      size_t new_count, diff_test *out);

/* (new - base) / base in percent; 0 when both are 0, +INFINITY when only
 * base is 0. */
double diff_change_pct(double base, double new_value);

/* The verdict of a row, by the rule in this file's opening comment.
 * test may be NULL when a side is empty (only in BASE or NEW). */
diff_verdict diff_verdict_of(const diff_side *base, const diff_side *new_side,
                             const diff_test *test, const diff_rule *rule);

/*
 * The total GPU time's test: the difference of the totals against its
 * standard error, each total's variance taken as the sum over its names
 * of count x the name's sample variance (each launch an independent draw,
 * the launch counts fixed). base_variance and new_variance are those sums.
 * Fills test (p_value, z; u_new and prob_new_longer are 0) and returns
 * the verdict by the same rule, with the sign of the change for the
 * ranks' direction (there are no ranks across names).
 */
diff_verdict diff_total_verdict(uint64_t base_total, double base_variance, uint64_t new_total,
                                double new_variance, const diff_rule *rule, diff_test *test);

#endif /* FLARE_CLI_DIFF_STATS_H */
