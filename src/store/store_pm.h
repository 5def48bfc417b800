/*
 * store_pm.h: the pm_samples table: one row per (PM sample, metric), with
 * the scope the sample was attributed to (docs/pm-sampling.md, schema 5).
 *
 * Written by the collector inside its open batch (pm/pm_session.c); never on
 * an application thread. Like every store function it never aborts and
 * reports SQLite's message through store_last_error.
 */
#ifndef FLARE_STORE_STORE_PM_H
#define FLARE_STORE_STORE_PM_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct store_pm_row {
    int64_t pid;
    uint64_t window_id;
    int device;
    uint64_t sample_index;
    uint64_t start_ns;
    uint64_t end_ns;
    int has_scope; /* 0: no scope covered the sample (NULL columns) */
    uint64_t scope_instance_id;
    const char *scope_name; /* NULL: not known yet (filled when the scope closes) */
    uint32_t flags;         /* PM_SAMPLE_* bits; stored in the overflow column */
    const char *metric;
    double value; /* NaN is stored as NULL */
} store_pm_row;

/* Writes count rows with one prepared statement. FLARE_OK, or the first
 * error (rows before it are written; the batch is marked failed). */
int store_put_pm_samples(store *handle, const store_pm_row *rows, size_t count);

/* Names the samples of one scope whose name was not known when they were
 * written (the scope was still open). FLARE_OK or an error. */
int store_pm_name_scope(store *handle, int64_t pid, uint64_t instance_id, const char *name);

/* The PM samples of one window, range and metric, as `flare report` shows
 * them. Samples with any flag set (docs/pm-sampling.md: a value over an
 * unknown or over-long interval, or an unverified time) are never in the
 * sum or the mean: they are counted in flagged, and that is all. */
typedef struct store_pm_summary_row {
    int64_t pid;
    uint64_t window_id;
    const char *range; /* the attributed scope's name; "(no range)", "(open range)" */
    const char *metric;
    uint64_t samples; /* unflagged samples with a value */
    uint64_t flagged; /* samples left out for their flags */
    int has_value;    /* samples > 0 */
    double sum;       /* of the unflagged values */
    double mean;
} store_pm_summary_row;
typedef int (*store_pm_summary_callback)(const store_pm_summary_row *row, void *user);
/* Rows by pid, window, then ranges with the most samples first, metrics by
 * name. A database without pm_samples rows calls nothing. */
int store_read_pm_summary(store *handle, store_pm_summary_callback callback, void *user);

#endif /* FLARE_STORE_STORE_PM_H */
