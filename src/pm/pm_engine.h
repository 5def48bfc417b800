/*
 * pm_engine.h: the PM sampling deep engine, independent of the hardware.
 *
 * One engine samples one device. The hardware side (CUPTI in
 * backend/cuda/cuda_pm.c, the simulated device in backend/sim/sim_engine.c)
 * fills a pm_hardware_ops table of small steps: prepare, start, stop, decode
 * into a counter-data image, read a sample, reset the image. Everything that
 * must behave the same on every device lives here, written once: presets and
 * FLARE_PM_INTERVAL, the lease, the decode thread and its loop (decode, read,
 * reset; decode again on COUNTER_DATA_FULL), overflow detection and flags,
 * conversion of sample times to flare's clock, and the bounded queue the
 * collector drains (pm_session.h attributes and stores what it finds there).
 *
 * Life: create -> prepare (expensive, once, off the window path) -> arm /
 * disarm per window (cheap: start and stop) -> destroy. Prepare holds the
 * device's lease for the engine's context: a prepared engine owns the device.
 *
 * Must never: block the collector on the hardware for longer than a start or
 * a stop, grow (the queue is fixed; every loss is counted), crash on a
 * hardware error (errors become reasons), or read a clock in arm/disarm other
 * than the now_ns it is given (the decode thread reads the clock to convert
 * and to measure the first-sample latency).
 */
#ifndef FLARE_PM_PM_ENGINE_H
#define FLARE_PM_PM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* Metrics one preset may have. */
#define PM_METRICS_MAX 8
/* Candidate hardware names for one metric (the first the chip accepts wins). */
#define PM_CANDIDATES_MAX  4
#define PM_METRIC_NAME_MAX 96

/* Interval limits (ns). The minimum is flare's documented floor: CUPTI
 * documents none, and 10 us is the shortest interval verified on GH100
 * without overflow (docs/pm-sampling.md). */
#define PM_INTERVAL_MIN_NS     10000ull
#define PM_INTERVAL_MAX_NS     1000000000ull
#define PM_INTERVAL_DEFAULT_NS 100000ull

/* Samples one decode may hold: the counter-data image is sized for this per
 * decode, not per window (20,000 samples of 7 metrics are 261 MB). */
#define PM_IMAGE_SAMPLES_DEFAULT 2000u
/* How often the decode thread decodes while armed. */
#define PM_DECODE_PERIOD_NS 10000000ull
/* Decoded samples waiting for the collector, per engine. */
#define PM_QUEUE_CAPACITY 32768u

typedef struct pm_metric_slot {
    const char *label;                         /* "sm_active_cycles", ... (stored) */
    const char *candidates[PM_CANDIDATES_MAX]; /* hardware names, NULL-terminated */
    int optional;                              /* the preset runs without it */
} pm_metric_slot;

typedef struct pm_preset {
    const char *name; /* "overview" */
    const char *summary;
    size_t metric_count;
    pm_metric_slot metrics[PM_METRICS_MAX];
} pm_preset;

/* The preset named name, or NULL. */
const pm_preset *pm_preset_find(const char *name);
/* "overview, memory, ..." for error messages. */
const char *pm_preset_names(void);

/* What prepare chose: the hardware names resolved per slot. */
typedef struct pm_resolved_metrics {
    size_t count;
    char labels[PM_METRICS_MAX][PM_METRIC_NAME_MAX];   /* what is stored in pm_samples.metric */
    char hardware[PM_METRICS_MAX][PM_METRIC_NAME_MAX]; /* the name the hardware took */
} pm_resolved_metrics;

/*
 * Reads FLARE_PM_PRESET (default "overview") and FLARE_PM_INTERVAL (a
 * duration with a unit: "100us", "1ms"; default 100us). 0, or
 * FLARE_ERR_INVALID_ARGUMENT with error naming the variable, the value and
 * the rule it broke ("FLARE_PM_INTERVAL=5us is below the minimum of 10us").
 */
int pm_settings_from_environment(const pm_preset **preset, uint64_t *interval_ns, char *error,
                                 size_t error_size);
/* Parses "10us", "2.5ms", "1s" into ns (no bare numbers). 0 or
 * FLARE_ERR_INVALID_ARGUMENT with a message. Limits not applied. */
int pm_parse_interval(const char *text, uint64_t *interval_ns, char *error, size_t error_size);

/* ---- the hardware side ---- */

typedef struct pm_hardware_decode {
    int failed;            /* the decode call failed (reason says why) */
    int overflow;          /* the hardware buffer overflowed: samples were lost */
    int counter_data_full; /* stopped because the image is full; more records wait */
    int end_of_records;    /* stopped because the hardware buffer is empty */
    char reason[160];
} pm_hardware_decode;

/* One sample as the hardware reads it (pm_hardware_ops.read_batch). */
typedef struct pm_raw_sample {
    uint64_t start, end; /* the hardware's clock */
    double values[PM_METRICS_MAX];
    int ok; /* 0: it could not be read (skipped, as a failed sample_read is) */
} pm_raw_sample;

typedef struct pm_hardware_ops {
    const char *name; /* "cuda-pm", "sim-pm-sampling" */
    /* The expensive part, once: resolve the preset's metrics (checking one
     * pass), configure the interval, size the image for image_samples.
     * 0, or a negative flare_status with reason. */
    int (*prepare)(void *hardware, int device, const pm_preset *preset, uint64_t interval_ns,
                   uint32_t image_samples, pm_resolved_metrics *resolved, char *reason,
                   size_t reason_size);
    int (*start)(void *hardware, char *reason, size_t reason_size);
    int (*stop)(void *hardware, char *reason, size_t reason_size);
    /* Decodes what the hardware buffer holds into the image. */
    void (*decode)(void *hardware, pm_hardware_decode *result);
    /* Completed samples in the image now. */
    size_t (*sample_count)(void *hardware);
    /* Sample index: times in the hardware's clock, values[resolved count]. */
    int (*sample_read)(void *hardware, size_t index, uint64_t *start, uint64_t *end,
                       double *values);
    /* Empties the image for the next decode (the image is reused). */
    int (*image_reset)(void *hardware);
    /* Undoes prepare (disables sampling on the device). */
    void (*release)(void *hardware);
    /* Optional: an offset that maps the hardware clock to flare's (flare =
     * hardware + offset), measured now; 0 when it has one. */
    int (*clock_offset)(void *hardware, int64_t *offset_ns);
    /* Optional (range replay by PM sampling, pm_replay.h): how many passes
     * sampling names[0..count) together would take on device, checked
     * without enabling anything. FLARE_OK with *passes; FLARE_ERR_NOT_FOUND
     * with *unknown the index of a name the device cannot sample; another
     * status with reason. NULL: every name is taken as sampleable and up to
     * PM_METRICS_MAX of them in one pass. */
    int (*plan)(void *hardware, int device, const char *const *names, size_t count, size_t *passes,
                size_t *unknown, char *reason, size_t reason_size);
    /* Optional: samples [first, first + count) of the decoded image into
     * out, as sample_read reads them one at a time, perhaps on several
     * threads (range replay decodes a whole pass at its stop). NULL:
     * sample_read, one at a time. */
    void (*read_batch)(void *hardware, size_t first, size_t count, pm_raw_sample *out);
} pm_hardware_ops;

/* ---- the engine ---- */

typedef enum pm_engine_state {
    PM_ENGINE_UNPREPARED = 0,
    PM_ENGINE_PREPARING = 1,
    PM_ENGINE_PREPARED = 2, /* idle: enabled and configured, not sampling */
    PM_ENGINE_ARMED = 3,
    PM_ENGINE_FAILED = 4,
} pm_engine_state;

/* Sample flags (stored in pm_samples.overflow as a bit set). */
#define PM_SAMPLE_OVERFLOW    1u /* decoded by a decode that reported overflow */
#define PM_SAMPLE_AFTER_GAP   2u /* the first sample after a hole (lost or missing samples) */
#define PM_SAMPLE_CLOCK_GUESS 4u /* time aligned to the decode, not converted */
/* The first sample after a start spans back to when the counters last
 * stopped (seen on GH100: to the enable, seconds earlier); its start is
 * clamped to the window's open. */
#define PM_SAMPLE_START_CLAMPED 8u

typedef struct pm_sample {
    uint64_t start_ns; /* flare's clock */
    uint64_t end_ns;
    uint64_t window_id;
    uint64_t sample_index; /* within the window */
    int32_t device;
    uint32_t flags;
    double values[PM_METRICS_MAX];
    /* Sample 0 of a window only: from the window's open to the end of this
     * sample (hardware) and to the decode that delivered it. */
    uint64_t open_to_sample_ns;
    uint64_t open_to_delivery_ns;
} pm_sample;

/* A queue entry: a sample, or the end of one decode (its watermark offer). */
typedef struct pm_queue_entry {
    int is_decode_end;
    pm_sample sample;
    /* is_decode_end: what attrib_watermark_advance needs. */
    int exhausted, overflow, failed, truncated;
    uint64_t newest_sample_ns;
} pm_queue_entry;

typedef struct pm_engine_stats {
    uint64_t samples;           /* delivered to the queue */
    uint64_t samples_lost;      /* estimated from gaps after an overflow, plus discarded */
    uint64_t samples_discarded; /* decoded at a window's close but not read (decoder behind) */
    uint64_t samples_missing;   /* holes in the stream with no overflow reported (estimated) */
    uint64_t queue_drops;       /* decoded but the queue was full */
    uint64_t overflows;         /* decodes that reported overflow */
    uint64_t counter_data_full; /* decodes stopped by a full image (decoded again) */
    uint64_t decode_failures;
    uint64_t decodes;
    uint64_t decode_ns;      /* time spent in decode rounds (decode, read, evaluate, reset) */
    uint64_t decode_call_ns; /* of which in the hardware's decode */
    uint64_t stop_failures;  /* stops the hardware refused */
    uint64_t read_ns;        /* of which reading (and evaluating) samples */
    uint64_t arms;
    uint64_t first_sample_latency_ns; /* of the last window; 0: none yet */
    uint64_t prepare_ns;              /* what prepare cost */
    uint64_t start_ns_cost;           /* what the last start cost */
    int clock_method;                 /* PM_CLOCK_* */
} pm_engine_stats;

#define PM_CLOCK_UNKNOWN  0
#define PM_CLOCK_IDENTITY 1 /* the hardware stamps with flare's clock */
#define PM_CLOCK_HARDWARE 2 /* the hardware's own offset (clock_offset op) */
#define PM_CLOCK_REALTIME 3 /* CLOCK_REALTIME, shifted to CLOCK_MONOTONIC */
#define PM_CLOCK_ALIGNED  4 /* none fitted: aligned to the decode (flagged) */
const char *pm_clock_method_name(int method);

typedef struct pm_engine pm_engine;

/* context_id: the lease owner key (non-zero). FLARE_OK or FLARE_ERR_NO_MEMORY. */
int pm_engine_create(const pm_hardware_ops *ops, void *hardware, uint64_t context_id,
                     pm_engine **out);
/* Stops and releases everything (disarm, decode thread, hardware, lease). */
void pm_engine_destroy(pm_engine *engine);
/* Process exit: disarms if armed, gives the hardware and the lease back and
 * leaves the engine FAILED with reason (later arms are refused, a later
 * disarm answers FLARE_ERR_STATE); the memory stays valid. */
void pm_engine_shutdown(pm_engine *engine, const char *reason);

/*
 * The expensive set-up, run by the caller's thread (the CUDA engine runs it
 * on a thread of its own after the first context exists): takes the
 * device's lease, then the hardware prepare. 0, or a negative status with
 * reason; a failure leaves the engine FAILED with the reason kept for probe.
 */
int pm_engine_prepare(pm_engine *engine, int device, const pm_preset *preset, uint64_t interval_ns,
                      char *reason, size_t reason_size);
/* Marks the engine as preparing (a thread will call prepare). */
void pm_engine_mark_preparing(pm_engine *engine);
/* Records a failure found before prepare could run (settings, no CUPTI). */
void pm_engine_mark_failed(pm_engine *engine, const char *reason);

/* backend_engine_ops bodies. arm returns BACKEND_ENGINE_BUSY (window runs
 * without the engine) when another context holds the device's lease, and
 * BACKEND_ENGINE_NOT_READY (the same, "preparing") before prepare is done. */
int pm_engine_arm(pm_engine *engine, int device, const backend_engine_config *config,
                  uint64_t now_ns, char *reason, size_t reason_size);
int pm_engine_disarm(pm_engine *engine, int device, uint64_t now_ns, backend_engine_result *result);
int pm_engine_probe(pm_engine *engine, int device, char *reason, size_t reason_size);

/* Moves up to max queued entries to out, oldest first (collector only). */
size_t pm_engine_take(pm_engine *engine, pm_queue_entry *out, size_t max);
void pm_engine_stats_get(pm_engine *engine, pm_engine_stats *stats);
pm_engine_state pm_engine_state_get(pm_engine *engine);
const pm_resolved_metrics *pm_engine_metrics(pm_engine *engine);
int pm_engine_device(pm_engine *engine);
const char *pm_engine_name(pm_engine *engine);
/* Range replay (pm_replay.h): the disarm reads everything the hardware
 * holds (up to DECODE_ROUNDS_MAX images) instead of a window's first few
 * images, so a pass decoded only at its stop loses nothing to the read. */
void pm_engine_read_all_at_disarm(pm_engine *engine, int all);
/* Before prepare: the samples one decode's image holds (0: the default).
 * On the H200 a decode after the stop returned at most one image's worth:
 * the rest of the pass was gone (session 22). */
void pm_engine_set_image_samples(pm_engine *engine, uint32_t samples);
/* The decode thread skips decoding while paused: a test hook (to make the
 * hardware buffer overflow), and range replay's passes (decoded at the
 * stop). */
void pm_engine_pause_decode(pm_engine *engine, int paused);

#endif /* FLARE_PM_PM_ENGINE_H */
