/*
 * store_triggered.h: triggered replays (table triggered_replays, schema 10,
 * docs/schema.md): one row per replay a deep-profiling rule asked for with
 * `action replay` or `action range NAME` (docs/rules.md "Actions"), written
 * by the rules' session on the collector thread when the replay has
 * finished, was declined or was cancelled; read by `flare report`, its
 * JSON/CSV and HTML forms.
 *
 * A row names the rule, the reading that fired it, the kernel (or range)
 * chosen and why, and what became of the replay; its launch_id leads to the
 * replay_launches row (or replay_spans row for a range) that holds the
 * metrics. Must never be written from a launch path: the writer prepares
 * its statement each time, as rules' summaries do.
 */
#ifndef FLARE_STORE_TRIGGERED_H
#define FLARE_STORE_TRIGGERED_H

#include <stdint.h>

#include "store/store.h"

typedef struct store_triggered_row {
    int64_t pid;
    uint64_t id;            /* per process, from 1, in the order the rows were written */
    uint32_t rule_id;       /* the rule's 1-based position in FLARE_DEEP_WHEN */
    const char *rule_text;  /* as written */
    const char *comparison; /* "<", ">=", ... */
    double threshold;       /* in the metric's unit */
    double observed_value;  /* the reading that fired the rule */
    const char *action;     /* "replay" or "range" */
    const char *target;     /* the kernel's name, or the range's */
    const char *why;        /* why that kernel, in words */
    uint64_t fired_ns;      /* when the rule fired (and the replay was armed) */
    uint64_t taken_ns;      /* when the launch or occurrence began; 0: never */
    uint64_t done_ns;       /* when its record was queued, or it was cancelled */
    const char *status;     /* "replayed", "declined", "cancelled" or "unfinished" */
    const char *reason;     /* why declined or cancelled; "" when replayed */
    uint64_t launch_id;     /* replay_launches.launch_id / replay_spans.span_id; 0: none */
} store_triggered_row;

/* Writes one row (inside the collector's batch, as rules' summaries are).
 * 0, or a flare_status with the store's error set. */
int store_put_triggered_replay(store *handle, const store_triggered_row *row);

/* Every row, by pid then id; none (and 0) for a session older than
 * version 10. Strings are never NULL; a NULL taken_ns or launch_id reads
 * as 0. callback returns non-zero to stop (not an error). */
typedef int (*store_triggered_callback)(const store_triggered_row *row, void *user);
int store_read_triggered_replays(store *handle, store_triggered_callback callback, void *user);

#endif /* FLARE_STORE_TRIGGERED_H */
