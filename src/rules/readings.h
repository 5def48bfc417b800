/*
 * readings.h: live metric readings for deep-profiling rules.
 *
 * A reading is one published value of a watched metric: kernel launch rate,
 * percentiles of completed-kernel durations, an NVML gauge, or the rate of an
 * application counter. Every reading carries three clocks' worth of truth:
 *   - source_time_ns: when the newest event that contributed happened (a
 *     kernel's end, a gauge's sample time, a counter read);
 *   - publish_time_ns: when this reading was computed (the now_ns passed in);
 *   - sequence: a number that grows by one with every reading of a source.
 * Staleness is judged on source_time_ns, never on publish_time_ns: a dead
 * source keeps being re-published with a fresh publish time, and only its
 * source time shows that nothing new arrived.
 *
 * The module is pure: every function that needs the time takes now_ns, it
 * reads no clock, does no I/O and logs nothing, so tests drive it with a fake
 * clock. Memory is bounded and fixed at init: the rate ring holds at most
 * RULES_RATE_BUCKETS_MAX buckets, the percentile window a caller-chosen
 * number of samples (at most RULES_PERCENTILE_CAPACITY_MAX).
 *
 * Threads: a source is not locked. One thread feeds and reads it; in flare
 * that is the collector thread, which sees kernel completions as it drains the
 * rings and runs the rule evaluator on the same beat, so feeding and reading
 * from that one thread is the intended use. Separate sources may be used by
 * separate threads. It must never be fed from an application thread's hot
 * path.
 */
#ifndef FLARE_RULES_READINGS_H
#define FLARE_RULES_READINGS_H

#include <stddef.h>
#include <stdint.h>

/* One published value of a metric source. */
typedef struct rules_reading {
    double value;             /* per second for rates; ns for durations; the gauge's unit */
    uint64_t source_time_ns;  /* newest contributing source event; 0 when none ever came */
    uint64_t publish_time_ns; /* the now_ns this reading was computed at */
    uint64_t sequence;        /* 1 for a source's first reading, then +1 per reading */
    uint32_t samples; /* values the reading was computed from (percentiles, rates' buckets) */
    int missing;      /* no value: a source never fed, or a percentile over an empty window */
    int stale;        /* source_time_ns older than the source's stale_after (vs now_ns) */
    int truncated;    /* a percentile computed from part of its window (the buffer overflowed) */
} rules_reading;

/* ---- Rates over a sliding window of fixed buckets ---- */

#define RULES_RATE_BUCKET_DEFAULT_NS 100000000ull /* 100 ms */
#define RULES_RATE_BUCKETS_MAX       600

typedef struct rules_rate_config {
    uint64_t window_ns;      /* the sliding window; a whole number of buckets */
    uint64_t bucket_ns;      /* 0: RULES_RATE_BUCKET_DEFAULT_NS */
    uint64_t stale_after_ns; /* 0: never stale */
} rules_rate_config;

typedef struct rules_rate_bucket {
    uint64_t index; /* source_time_ns / bucket_ns of the events it holds */
    uint64_t count;
} rules_rate_bucket;

/* Events per second over the last window_ns. Fed either with increments or
 * with a cumulative count (not both). Fixed size; no allocation. */
typedef struct rules_rate {
    rules_rate_config config;
    uint32_t bucket_count;
    int fed;             /* any feed at all (an increment of 0 counts: a heartbeat) */
    int have_cumulative; /* a cumulative baseline exists */
    uint64_t last_cumulative;
    uint64_t newest_source_ns;
    uint64_t newest_index; /* bucket index of newest_source_ns */
    uint64_t too_old;      /* events older than the ring could hold, not counted */
    uint64_t sequence;
    rules_rate_bucket buckets[RULES_RATE_BUCKETS_MAX];
} rules_rate;

/*
 * Sets up a rate. window_ns must be a multiple of the bucket width and hold
 * 1..RULES_RATE_BUCKETS_MAX buckets. Returns 0 or FLARE_ERR_INVALID_ARGUMENT.
 */
int rules_rate_init(rules_rate *rate, const rules_rate_config *config);
/*
 * Counts increment events that happened at source_time_ns. An increment of 0
 * is a heartbeat: the source is alive and saw nothing. Events older than the
 * ring can hold (a whole window behind the newest) are counted in too_old and
 * otherwise ignored.
 */
void rules_rate_add(rules_rate *rate, uint64_t source_time_ns, uint64_t increment);
/*
 * Feeds a cumulative count as read at source_time_ns. The first call sets the
 * baseline (contributes nothing but a heartbeat); later ones add the
 * difference, modulo 2^64 (flare's counters wrap rather than saturate).
 */
void rules_rate_add_cumulative(rules_rate *rate, uint64_t source_time_ns, uint64_t cumulative);
/*
 * Publishes the rate at now_ns: events with source time in the window
 * (now_ns - window_ns, now_ns] per second of window. An empty window of a fed
 * source reads 0.0, a real value, not missing; a source never fed is missing.
 * The rate is over the full window even in the source's first window, so it
 * ramps up rather than spiking on the first events.
 */
void rules_rate_read(rules_rate *rate, uint64_t now_ns, rules_reading *reading);

/* ---- Percentiles of completed-kernel durations ---- */

#define RULES_PERCENTILE_CAPACITY_DEFAULT 4096
#define RULES_PERCENTILE_CAPACITY_MAX     65536

typedef struct rules_percentile_config {
    uint64_t window_ns;      /* samples whose end time is in (now - window, now] count */
    uint32_t capacity;       /* 0: RULES_PERCENTILE_CAPACITY_DEFAULT */
    uint64_t stale_after_ns; /* 0: never stale */
} rules_percentile_config;

typedef struct rules_duration_sample {
    uint64_t end_ns; /* the kernel's end: its source time */
    uint64_t duration_ns;
} rules_duration_sample;

/* A bounded buffer of the newest samples. When more samples arrive than it
 * holds, the oldest are overwritten; a reading whose window reaches back to
 * an overwritten sample is marked truncated. */
typedef struct rules_percentiles {
    rules_percentile_config config;
    rules_duration_sample *samples; /* ring of capacity, in arrival order */
    uint64_t *scratch;              /* capacity durations, sorted on read */
    uint32_t head;                  /* next slot to write */
    uint32_t count;                 /* valid samples */
    uint64_t newest_end_ns;
    uint64_t newest_evicted_end_ns; /* newest end time among overwritten samples */
    int evicted;                    /* any sample was overwritten */
    uint64_t overwritten;           /* samples overwritten in total */
    uint64_t sequence;
} rules_percentiles;

/* Allocates the buffers. 0, FLARE_ERR_INVALID_ARGUMENT (window 0, capacity
 * above the maximum) or FLARE_ERR_NO_MEMORY. */
int rules_percentiles_init(rules_percentiles *window, const rules_percentile_config *config);
void rules_percentiles_free(rules_percentiles *window);
/* Records one completed kernel, stamped with its end time. */
void rules_percentiles_add(rules_percentiles *window, uint64_t end_ns, uint64_t duration_ns);
/*
 * Publishes count percentiles (each in (0, 100], e.g. 50, 90, 99) at now_ns
 * into readings[0..count): nearest rank, i.e. the smallest sample with at
 * least p% of the window's samples at or below it. One sort serves them all
 * and they share one sequence number. An empty window is missing; a window
 * that reaches back past an overwritten sample is truncated.
 */
void rules_percentiles_read(rules_percentiles *window, uint64_t now_ns, const double *percentiles,
                            size_t count, rules_reading *readings);

/* ---- Gauges (NVML values carrying their own sample time) ---- */

typedef struct rules_gauge {
    uint64_t stale_after_ns; /* 0: never stale */
    int have;
    double value;
    uint64_t source_time_ns;
    uint64_t sequence;
} rules_gauge;

void rules_gauge_init(rules_gauge *gauge, uint64_t stale_after_ns);
/* Sets the value sampled at source_time_ns; a sample older than the one
 * held (delivered out of order) is ignored. */
void rules_gauge_set(rules_gauge *gauge, uint64_t source_time_ns, double value);
void rules_gauge_read(rules_gauge *gauge, uint64_t now_ns, rules_reading *reading);

/* ---- Rates of application counters ---- */

/* Reads a cumulative counter: 0 and *value, or a negative flare_status. */
typedef int (*rules_counter_reader)(void *user, uint64_t *value);

/* A counter's increase per second: a rate fed by polling a cumulative
 * counter. The read time is the source time; a failed read feeds nothing, so
 * a counter that cannot be read goes stale instead of reading 0. */
typedef struct rules_counter_rate {
    rules_rate rate;
    rules_counter_reader reader;
    void *user;
    uint64_t read_failures;
} rules_counter_rate;

int rules_counter_rate_init(rules_counter_rate *counter, const rules_rate_config *config,
                            rules_counter_reader reader, void *user);
/* Reads the counter once at now_ns and feeds the rate. Returns the reader's status. */
int rules_counter_rate_poll(rules_counter_rate *counter, uint64_t now_ns);
void rules_counter_rate_read(rules_counter_rate *counter, uint64_t now_ns, rules_reading *reading);
/* A rules_counter_reader over flare_counter_value; user is a flare_counter *. */
int rules_flare_counter_reader(void *user, uint64_t *value);

#endif /* FLARE_RULES_READINGS_H */
