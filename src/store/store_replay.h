/*
 * store_replay.h: kernel-replay and range-replay results in the session
 * database: the tables replay_launches, replay_spans, replay_passes and
 * replay_metrics (docs/schema.md, docs/replay.md).
 *
 * The collector writes the engine's finished replay records inside its open
 * batch, converted by the replay feature (src/replay/replay_records.c) into
 * the store_replay_record rows below; `flare report` and `flare replay` read
 * them back. The store knows nothing of the engine's types: it must never
 * include a replay header, only these plain rows. Like every store function
 * these never abort: they return 0 or a negative flare_status and leave
 * SQLite's message in store_last_error. They are never called on a launch
 * path: records reach them through the engine's bounded queue and the
 * collector thread.
 */
#ifndef FLARE_STORE_STORE_REPLAY_H
#define FLARE_STORE_STORE_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/*
 * What one replay of a launch or a span did: the columns replay_launches
 * and replay_spans share, in their order, as members of store_replay_record
 * and of both reader rows (one list, so the three cannot drift apart).
 */
#define STORE_REPLAY_RUN_MEMBERS                                                                   \
    uint32_t passes_planned; /* 0: until a continue callback stopped it */                         \
    uint32_t passes_run;     /* pass 0 (the program's own run) included; 1 when declined */        \
    int declined;                                                                                  \
    const char *reason;      /* why it was declined, or a note on a replayed one, or "" */         \
    uint64_t begin_ns;       /* the replay began (flare clock) */                                  \
    uint64_t end_ns;         /* the last pass finished and the gate was released */                \
    uint64_t drain_ns;       /* time in the drains before the snapshot */                          \
    uint64_t snapshot_bytes; /* bytes copied once into the shadows */                              \
    int shadow_on_device;    /* 1: device shadows, 0: pinned host */                               \
    uint64_t snapshot_ns;    /* time of the snapshot copy */                                       \
    uint64_t restore_ns;     /* total time of every restore */                                     \
    uint64_t bytes_restored; /* total bytes written back */                                        \
    const char *collector;   /* the metric collector ("sim-metrics", ...), or "" */

/* How one value was produced (a replay_value_methods row): the method
 * ("pm-sampling", "kernel-activity"), the value's status ("measured",
 * "flagged", "uncovered", "below-minimum", ...), its error bound in the
 * value's unit (NaN: none known, stored NULL) and the PM samples behind it. */
typedef struct store_replay_value_note {
    const char *method;
    const char *status;
    double error_bound;
    uint32_t samples;
} store_replay_value_note;

/*
 * One finished replay as store_write_replay_records takes it: a launch
 * (is_span 0) or a span (is_span 1). Strings are NUL-terminated (NULL is
 * written as ""); the arrays hold pass_count and metric_count entries and
 * are only read during the call. The caller owns everything.
 */
typedef struct store_replay_record {
    int is_span;
    uint64_t launch_id;
    /* A launch: its span (0: replayed on its own). A span: its own id (0:
     * launch_id is the span's id). */
    uint64_t span_id;
    int device;
    uint64_t stream_id;    /* launches only */
    const char *name;      /* the kernel, or the span's name */
    uint64_t launch_index; /* launches of this name before it; a span's occurrence */
    uint32_t span_kernels; /* spans only: launches recorded in the span */
    uint32_t span_copies;  /* spans only: copies and memsets recorded in it */
    STORE_REPLAY_RUN_MEMBERS
    /* The passes whose times were kept, by pass (at most the first few of
     * passes_run). */
    uint32_t pass_count;
    const uint64_t *pass_start_ns;
    const uint64_t *pass_end_ns;
    /* Launches only (a span's metrics are its kernels'): names and values
     * in order; a NaN value is "not available". */
    uint32_t metric_count;
    const char *const *metric_names;
    const double *metric_values;
    /* Optional (NULL: none): how each value was produced, one per metric;
     * a note with an empty method writes no row (replay_value_methods). */
    const store_replay_value_note *metric_notes;
} store_replay_record;

/*
 * Writes count records of process pid. A launch record (is_span 0) becomes
 * one replay_launches row (span_id NULL for a launch replayed on its own,
 * else its span's id), its kept pass timestamps and its metric values (a
 * NaN value is stored as NULL). A span record (is_span 1) becomes one
 * replay_spans row and its pass timestamps under launch_id = span_id; its
 * metric names are not stored (its kernels carry the values). NULL entries
 * of records are skipped. All the records land or none do: inside a batch
 * they are bracketed by a savepoint, so a failure leaves the batch's other
 * rows intact (unless SQLite itself rolled the batch back, which then fails
 * like any lost batch write). Writing a record again replaces it.
 */
int store_write_replay_records(store *database, int64_t pid,
                               const store_replay_record *const *records, size_t count);

/* One replayed or declined launch as the readers return it. Strings and
 * arrays are valid during the callback only. */
typedef struct store_replay_launch_row {
    int64_t pid;
    uint64_t launch_id;
    /* The span the launch was recorded in (0: replayed on its own). */
    uint64_t span_id;
    int device;
    uint64_t stream_id;
    const char *kernel;
    uint64_t launch_index; /* launches of this name before it, 0-based */
    STORE_REPLAY_RUN_MEMBERS
    /* From replay_passes: the passes whose times were kept, and the mean
     * length of one (0 when none was kept). */
    uint32_t passes_kept;
    uint64_t pass_mean_ns;
    /* From replay_metrics, in the order they were written. has_value[i] is
     * 0 where the value is unavailable (stored NULL). */
    size_t metric_count;
    const char *const *metric_names;
    const double *metric_values;
    const int *metric_has_value;
    /* From replay_value_methods, per metric: "" where the launch's
     * collector measured the value itself (no row); error bounds NaN
     * where none is known. */
    const char *const *metric_methods;
    const char *const *metric_statuses;
    const double *metric_error_bounds;
} store_replay_launch_row;

typedef int (*store_replay_launch_callback)(const store_replay_launch_row *row, void *user);

/* Every launch replayed on its own, with its metrics, by kernel name, then
 * pid, launch index and launch id, so all of one kernel's launches come
 * together. The kernels of spans are not among them (store_read_replay_spans
 * returns those), except a span kernel whose span row is missing (its
 * record was lost): rather than vanish it comes here, span_id set. A
 * callback returning non-zero stops the walk (not an error). */
int store_read_replay_launches(store *database, store_replay_launch_callback callback, void *user);

/* One span (range replay) as store_read_replay_spans returns it, with its
 * kernels. Strings and arrays are valid during the callback only. */
typedef struct store_replay_span_row {
    int64_t pid;
    uint64_t span_id;
    const char *name;    /* the scope, NVTX range or flare_replay_range_begin name */
    uint64_t occurrence; /* which occurrence of the name (1-based); 0: an explicit span */
    int device;          /* -1: the span submitted no device work */
    uint32_t kernels;    /* launches recorded in the span */
    uint32_t copies;     /* copies and memsets recorded in the span */
    STORE_REPLAY_RUN_MEMBERS
    uint32_t passes_kept;  /* pass times kept in replay_passes */
    uint64_t pass_mean_ns; /* mean length of one kept pass (0 when none) */
    /* The span's kernel rows in launch order (launch id), each with its
     * metrics; fewer than kernels when records were lost. */
    size_t kernel_count;
    const store_replay_launch_row *kernel_rows;
} store_replay_span_row;

typedef int (*store_replay_span_callback)(const store_replay_span_row *row, void *user);

/* Every span, by begin time, then pid and span id, each with its kernels in
 * launch order and their metrics. A callback returning non-zero stops the
 * walk (not an error). */
int store_read_replay_spans(store *database, store_replay_span_callback callback, void *user);

/* One launch's (or span's, by span id) kept pass times, by pass. */
typedef struct store_replay_pass_row {
    uint32_t pass;
    uint64_t start_ns;
    uint64_t end_ns;
} store_replay_pass_row;
typedef int (*store_replay_pass_callback)(const store_replay_pass_row *row, void *user);
int store_read_replay_passes(store *database, int64_t pid, uint64_t launch_id,
                             store_replay_pass_callback callback, void *user);

/* Totals over the whole session, for `flare replay`'s closing line and the
 * report. Launches replayed on their own and spans are counted apart: the
 * first group of fields covers the launches that store_read_replay_launches
 * returns, the span_ fields the spans and their kernels. */
typedef struct store_replay_summary {
    int64_t launches; /* launches replayed on their own (replayed or declined) */
    int64_t replayed; /* of those, not declined */
    int64_t declined;
    int64_t kernels;         /* distinct kernel names among them */
    uint64_t passes;         /* sum of passes_run over replayed launches */
    uint64_t snapshot_bytes; /* sum over replayed launches */
    uint64_t bytes_restored;
    uint64_t collection_ns;  /* sum of end_ns - begin_ns over every launch */
    int64_t metric_values;   /* non-NULL metric values of those launches */
    char first_decline[256]; /* the reason of the earliest declined launch, "" when none */

    int64_t spans; /* rows in replay_spans */
    int64_t spans_replayed;
    int64_t spans_declined;
    int64_t span_kernels;         /* kernel rows of spans (replayed or declined) */
    uint64_t span_passes;         /* sum of passes_run over replayed spans */
    uint64_t span_snapshot_bytes; /* sum over replayed spans */
    uint64_t span_bytes_restored;
    uint64_t span_collection_ns;  /* sum of end_ns - begin_ns over every span */
    int64_t span_metric_values;   /* non-NULL metric values of span kernels */
    char first_span_decline[256]; /* the reason of the earliest declined span, "" when none */
} store_replay_summary;
int store_read_replay_summary(store *database, store_replay_summary *out);

#endif /* FLARE_STORE_STORE_REPLAY_H */
