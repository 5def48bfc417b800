/*
 * replay_range.c: range replay: record a span of one thread's work on its
 * first run, then restore and re-issue it once per further pass, so the
 * metric collector's per-pass set-up is paid once per pass for every kernel
 * of the span instead of once per pass per kernel.
 *
 * A span belongs to the thread that began it, but records every thread's
 * work on its device while it is open (PyTorch runs backward on its own
 * threads): each submission holds the device's reader gate around its
 * record and submit, and the span takes the writer side at its begin (for
 * the drain and snapshot) and at its end (for the passes), so nothing lands
 * between snapshot and restore unrecorded, and nothing is ever reverted.
 * Collector calls all run on the span's own thread. A span never guesses:
 * anything it cannot re-issue faithfully declines it, the program's own run
 * stands, and the reason is recorded. Once a replay pass has started,
 * failure aborts like a kernel replay's (memory would be wrong).
 */
#include "replay/replay_internal.h"

#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "deepwin/deepwin_session.h" /* the launch count, for the log */

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPAN_WORK_MAX 65536 /* recorded pieces of work; beyond: declined */

typedef struct span_state {
    pthread_mutex_t lock;  /* recording from several threads; declines */
    replay_record *record; /* the span's own record */
    flare_replay_launch span_launch;
    int device;            /* -1 until the first piece of work */
    atomic_bool declined;  /* set under lock (any thread), read by the span's thread */
    atomic_bool replaying; /* later passes: the backend re-issues; nothing is recorded */
    bool from_api;         /* begun by flare_replay_range_begin (only its end may end it) */
    replay_settings settings;
    const replay_device_ops *ops;
    const replay_metric_collector *collector;
    uint32_t collector_passes;
    bool collector_pass_open;
    const char *metric_name_pointers[REPLAY_RECORD_METRIC_MAX]; /* into record->metric_names */
    const char *const *metric_names;
    size_t metric_count;
    replay_range_work *work;
    size_t work_count;
    size_t work_capacity;
    flare_replay_launch *kernels; /* one per recorded kernel, in order */
    replay_record **kernel_records;
    size_t kernel_count;
    replay_snapshot snapshot; /* ops == NULL until taken */
    uint32_t pass;
    uint64_t pass_start_ns;
    uint64_t prepare_ns, restore_ns; /* for the log at the end */
} span_state;

static _Thread_local span_state *thread_span;
/* The span recording on each device (NULL: none), for other threads' work. */
static span_state *_Atomic device_spans[REPLAY_DEVICE_MAX];
static atomic_int open_spans; /* the backends' cheap "any span?" check */

/* Guards the spans' lifetimes for threads other than their own: a span is
 * detached from its device under this lock before its thread frees it, so
 * whoever finds it in device_spans while holding the lock may use it.
 * Order: spans_lock, then a span's own lock. */
static pthread_mutex_t spans_lock = PTHREAD_MUTEX_INITIALIZER;

static bool device_in_range(int device)
{
    return device >= 0 && device < REPLAY_DEVICE_MAX;
}

/* The device's recording span; spans_lock held. */
static span_state *span_on_locked(int device)
{
    return device_in_range(device) ? atomic_load(&device_spans[device]) : NULL;
}

/* A span is attached to its device exactly while it records (declines and
 * its end detach it), so this needs no dereference. */
bool replay_range_active_on(int device)
{
    return atomic_load_explicit(&open_spans, memory_order_relaxed) != 0 &&
           device_in_range(device) &&
           atomic_load_explicit(&device_spans[device], memory_order_acquire) != NULL;
}

bool replay_range_recording(void)
{
    return thread_span != NULL && !thread_span->declined && !thread_span->replaying;
}

/* Stops recording on the device (spans_lock and the span's lock held):
 * later work there is ordinary. */
static void detach_from_device(span_state *span)
{
    if (span->device >= 0) {
        span_state *expected = span;
        if (atomic_compare_exchange_strong(&device_spans[span->device], &expected, NULL)) {
            atomic_fetch_sub(&open_spans, 1);
        }
    }
}

static void release_work(span_state *span)
{
    for (size_t index = 0; index < span->work_count; index++) {
        if (span->work[index].release != NULL) {
            span->work[index].release(span->work[index].data);
        }
    }
    free(span->work);
    span->work = NULL;
    span->work_count = 0;
}

static void release_shadows(span_state *span)
{
    if (span->snapshot.ops != NULL) {
        replay_snapshot_free(&span->snapshot);
    }
}

/* Stops recording (lock held): no replay will happen; the shadows, the
 * collector's open pass and the record are settled at the span's end, on
 * its own thread. Later work on the device is ordinary again. */
static void span_decline_locked(span_state *span, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void span_decline_locked(span_state *span, const char *format, ...)
{
    if (span->declined) {
        return;
    }
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(span->record->reason, sizeof span->record->reason, format, arguments);
    va_end(arguments);
    span->declined = true;
    span->record->declined = 1;
    detach_from_device(span);
    core_log(CORE_LOG_INFO, "range replay of %s declined: %s", span->record->kernel_name,
             span->record->reason);
}

static void span_decline(span_state *span, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void span_decline(span_state *span, const char *format, ...)
{
    char reason[256];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(reason, sizeof reason, format, arguments);
    va_end(arguments);
    pthread_mutex_lock(&spans_lock);
    pthread_mutex_lock(&span->lock);
    span_decline_locked(span, "%s", reason);
    pthread_mutex_unlock(&span->lock);
    pthread_mutex_unlock(&spans_lock);
}

void replay_range_decline(int device, const char *reason)
{
    if (!replay_range_active_on(device)) {
        return;
    }
    pthread_mutex_lock(&spans_lock);
    span_state *span = span_on_locked(device);
    if (span != NULL) {
        pthread_mutex_lock(&span->lock);
        span_decline_locked(span, "%s", reason);
        pthread_mutex_unlock(&span->lock);
    }
    pthread_mutex_unlock(&spans_lock);
}

/* Tells work held at the device's gate that this span's replay is alive,
 * and what it is doing (named if a reader gives up on it). */
static void span_progress(span_state *span, int device, const char *doing)
{
    char what[256];
    snprintf(what, sizeof what, "the range replay of span %.128s (%s pass %u)",
             span->record->kernel_name, doing, span->pass);
    replay_gate_writer_progress(device, what, replay_gate_stall_ns(&span->settings));
}

/* The metrics the span collects: the selection's, else the documented
 * default set. The names are copied into the span's record: the
 * selection's storage may be replaced while the span runs. */
static void choose_metrics(span_state *span)
{
    const char *const *selected = NULL;
    size_t selected_count = replay_selection_metrics(&selected);
    char default_storage[2048];
    const char *default_names[REPLAY_RECORD_METRIC_MAX];
    if (selected_count == 0) {
        snprintf(default_storage, sizeof default_storage, "%s",
                 replay_metric_set_find("speed-of-light")->metrics);
        char *cursor = default_storage;
        while (cursor != NULL && selected_count < REPLAY_RECORD_METRIC_MAX) {
            default_names[selected_count++] = cursor;
            cursor = strchr(cursor, ',');
            if (cursor != NULL) {
                *cursor++ = '\0';
            }
        }
        selected = default_names;
    }
    snprintf(span->record->collector, sizeof span->record->collector, "%s", span->collector->name);
    span->record->metric_count = (uint32_t)selected_count;
    for (size_t index = 0; index < selected_count; index++) {
        snprintf(span->record->metric_names[index], REPLAY_METRIC_NAME_MAX, "%s", selected[index]);
        span->metric_name_pointers[index] = span->record->metric_names[index];
    }
    span->metric_names = span->metric_name_pointers;
    span->metric_count = selected_count;
}

int replay_range_begin(const char *name, uint64_t occurrence)
{
    if (name == NULL || name[0] == '\0') {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    replay_thread_state *thread = replay_thread();
    if (thread_span != NULL || thread->loop_depth > 0) {
        return FLARE_ERR_STATE;
    }
    span_state *span = calloc(1, sizeof *span);
    replay_record *record = calloc(1, sizeof *record);
    if (span == NULL || record == NULL) {
        free(span);
        free(record);
        return FLARE_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&span->lock, NULL);
    span->record = record;
    span->device = -1;
    span->ops = replay_device_operations();
    replay_settings_current(&span->settings);
    record->is_span = 1;
    record->span_id = replay_next_id();
    record->launch_id = record->span_id;
    record->launch_index = occurrence;
    record->begin_ns = core_now_ns();
    record->device = -1;
    snprintf(record->kernel_name, sizeof record->kernel_name, "%s", name);
    span->span_launch = (flare_replay_launch){.launch_id = record->span_id,
                                              .device = -1,
                                              .kernel_name = record->kernel_name,
                                              .launch_index = occurrence};
    thread_span = span;
    if (span->ops == NULL || span->ops->current_device == NULL) {
        span_decline(span, "no device operations for range replay on this backend");
        return FLARE_OK;
    }
    int device = span->ops->current_device();
    if (device < 0 || device >= REPLAY_DEVICE_MAX) {
        span_decline(span, "no current device when the span began");
        return FLARE_OK;
    }
    span->device = device;
    record->device = device;
    span->span_launch.device = device;
    span->collector = replay_metric_collector_current();
    if (span->collector == NULL || span->collector->finish_ranges == NULL) {
        span_decline(span, "no metric collector that can collect per-kernel ranges");
        return FLARE_OK;
    }
    choose_metrics(span);
    char reason[256] = "";
    /* The launch count lets another profiler be pointed at the same span
     * (ncu --launch-skip): scripts/gpu-check-span.sh does. */
    core_log(CORE_LOG_INFO,
             "range replay: span %s (occurrence %" PRIu64 ") begins on device %d after %" PRIu64
             " kernel launches by the program",
             name, occurrence, device, deepwin_session_launches());
    /* The writer side for the drain and the snapshot only: nothing in
     * flight may change memory under the copy. */
    char limit[32];
    core_duration_format(span->settings.drain_timeout_ns, limit, sizeof limit);
    uint64_t started = core_now_ns();
    if (replay_gate_writer_enter(device, span->settings.drain_timeout_ns) != FLARE_OK) {
        span_decline(span, "device drain stuck: the gate of device %d stayed busy for %s", device,
                     limit);
        return FLARE_OK;
    }
    span_progress(span, device, "draining and snapshotting before");
    /* Claim the device first: a second span must not drain and snapshot
     * for nothing (and hold the shadows) while this one records. */
    pthread_mutex_lock(&spans_lock);
    span_state *expected = NULL;
    bool attached = atomic_compare_exchange_strong(&device_spans[device], &expected, span);
    if (attached) {
        atomic_fetch_add(&open_spans, 1);
    }
    pthread_mutex_unlock(&spans_lock);
    if (!attached) {
        replay_gate_writer_exit(device);
        span_decline(span, "another span is already recording on device %d", device);
        return FLARE_OK;
    }
    bool ready = false;
    if (span->ops->device_drain(device, span->settings.drain_timeout_ns) != FLARE_OK) {
        span_decline(span, "device drain stuck: device %d still had work after %s", device, limit);
    } else {
        record->drain_ns = core_now_ns() - started;
        ready = true;
        /* Every span replays at least once: the collector counts only
         * re-issued passes (see replay_range_end). */
        const char *declined = replay_snapshot_take(&span->snapshot, span->ops, &span->settings,
                                                    device, reason, sizeof reason);
        record->shadow_on_device = span->snapshot.on_device ? 1 : 0;
        if (declined != NULL) {
            span_decline(span, "%s", reason);
            ready = false;
        } else {
            record->snapshot_ns = span->snapshot.copy_ns;
            record->snapshot_bytes = span->snapshot.bytes;
        }
    }
    if (ready) {
        long variables = 0;
        for (long index = 0; index < span->snapshot.count; index++) {
            variables += span->snapshot.allocations[index].kind == REPLAY_ALLOCATION_GLOBAL;
        }
        core_log(CORE_LOG_INFO,
                 "range replay: span %s drained in %.3f ms, %" PRIu64
                 " bytes in %ld allocation(s) (%ld of them module variables) snapshotted in "
                 "%.3f ms; recording",
                 name, (double)record->drain_ns / 1e6, record->snapshot_bytes, span->snapshot.count,
                 variables, (double)record->snapshot_ns / 1e6);
        span->pass_start_ns = core_now_ns();
    }
    replay_gate_writer_exit(device);
    return FLARE_OK;
}

bool replay_range_claims(int device)
{
    span_state *own = thread_span;
    if (own != NULL && !own->declined && !own->replaying && own->device != device) {
        span_decline(own, "the span uses devices %d and %d; spans stay on one device", own->device,
                     device);
    }
    return replay_range_active_on(device);
}

static void release_work_item(const replay_range_work *work)
{
    if (work->release != NULL) {
        work->release(work->data);
    }
}

/* Appends (lock held); declines instead when over a bound or out of memory. */
static bool append_work_locked(span_state *span, const replay_range_work *work)
{
    if (span->work_count == SPAN_WORK_MAX) {
        span_decline_locked(span, "more than %d pieces of work in the span", SPAN_WORK_MAX);
        return false;
    }
    if (span->work_count == span->work_capacity) {
        size_t capacity = span->work_capacity != 0 ? span->work_capacity * 2 : 64;
        replay_range_work *grown = realloc(span->work, capacity * sizeof *grown);
        if (grown == NULL) {
            span_decline_locked(span, "out of host memory recording the span");
            return false;
        }
        span->work = grown;
        span->work_capacity = capacity;
    }
    span->work[span->work_count++] = *work;
    if (work->kind == REPLAY_WORK_KERNEL) {
        span->record->span_kernels++;
    } else {
        span->record->span_copies++;
    }
    return true;
}

void replay_range_record(int device, const replay_range_work *work)
{
    bool kept = false;
    pthread_mutex_lock(&spans_lock);
    span_state *span = span_on_locked(device);
    if (span != NULL) {
        pthread_mutex_lock(&span->lock);
        kept = !span->declined && !span->replaying && append_work_locked(span, work);
        pthread_mutex_unlock(&span->lock);
    }
    pthread_mutex_unlock(&spans_lock);
    if (!kept) {
        release_work_item(work);
    }
}

/* Called from replay_launch_begin, with the device's reader gate held,
 * when the launch's device has a span recording. */
void replay_range_record_launch(const replay_launch_request *request, uint64_t launch_id,
                                uint64_t launch_index)
{
    if (!replay_range_active_on(request->device)) {
        return;
    }
    char *decline_reason = NULL;
    char reason[256];
    if (request->from_graph) {
        decline_reason = "CUDA graph launch inside the span";
    } else if (request->unsupported_kind) {
        decline_reason = "cooperative or device-side launch inside the span";
    } else if (request->capture == NULL) {
        decline_reason = "launches of this backend cannot be recorded";
    }
    /* The deep copy is made outside every lock: it may call the driver. */
    replay_range_work work = {0};
    if (decline_reason == NULL && request->capture(request->relaunch_context, &work) != FLARE_OK) {
        snprintf(reason, sizeof reason, "could not record the launch of %.200s",
                 request->kernel_name != NULL ? request->kernel_name : "(unknown)");
        decline_reason = reason;
    }
    if (decline_reason != NULL) {
        replay_range_decline(request->device, decline_reason);
        return;
    }
    replay_record *record = calloc(1, sizeof *record);
    if (record != NULL) {
        record->launch_id = launch_id;
        record->device = request->device;
        record->stream_id = request->stream_id;
        snprintf(record->kernel_name, sizeof record->kernel_name, "%s",
                 request->kernel_name != NULL ? request->kernel_name : "(unknown)");
        record->launch_index = launch_index;
    }
    pthread_mutex_lock(&spans_lock);
    span_state *span = span_on_locked(request->device);
    if (span == NULL) {
        pthread_mutex_unlock(&spans_lock);
        free(record);
        release_work_item(&work);
        return;
    }
    if (record != NULL) {
        record->span_id = span->record->span_id;
    }
    pthread_mutex_lock(&span->lock);
    bool kept = false;
    if (record == NULL) {
        span_decline_locked(span, "out of host memory recording the span");
    } else if (!span->declined && !span->replaying) {
        if (span->kernel_count == REPLAY_RANGE_KERNELS_MAX) {
            span_decline_locked(span, "more than %d kernels in the span", REPLAY_RANGE_KERNELS_MAX);
        } else {
            flare_replay_launch *kernels =
                realloc(span->kernels, (span->kernel_count + 1) * sizeof *kernels);
            if (kernels != NULL) {
                span->kernels = kernels;
            }
            replay_record **records =
                realloc(span->kernel_records, (span->kernel_count + 1) * sizeof *records);
            if (records != NULL) {
                span->kernel_records = records;
            }
            if (kernels == NULL || records == NULL) {
                span_decline_locked(span, "out of host memory recording the span");
            } else if (append_work_locked(span, &work)) {
                /* One result record per kernel, keyed to the id the program saw. */
                flare_replay_launch *kernel = &span->kernels[span->kernel_count];
                *kernel = (flare_replay_launch){.launch_id = launch_id,
                                                .device = request->device,
                                                .stream_id = request->stream_id,
                                                .kernel_name = record->kernel_name,
                                                .launch_index = launch_index};
                memcpy(kernel->grid, request->grid, sizeof kernel->grid);
                memcpy(kernel->block, request->block, sizeof kernel->block);
                span->kernel_records[span->kernel_count++] = record;
                kept = true;
            }
        }
    }
    pthread_mutex_unlock(&span->lock);
    pthread_mutex_unlock(&spans_lock);
    if (!kept) {
        free(record);
        release_work_item(&work);
    }
}

static void span_fail(span_state *span, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void span_fail(span_state *span, const char *format, ...)
{
    char detail[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(detail, sizeof detail, format, arguments);
    va_end(arguments);
    char message[1024];
    snprintf(message, sizeof message,
             "range replay of %.128s (device %d) failed in pass %u: %s; the program's device "
             "memory is no longer what it expects, so flare stops it",
             span->record->kernel_name, span->device, span->pass, detail);
    snprintf(span->record->reason, sizeof span->record->reason, "aborted: %.240s", detail);
    core_log(CORE_LOG_ERROR, "%s", message);
    replay_call_abort_handler(message);
}

/* Finishes the current pass: waits for the device, closes the collector's
 * pass, stamps it. False after span_fail. */
static bool span_pass_finish(span_state *span)
{
    int status = FLARE_OK;
    if (span->pass >= 1) {
        /* Re-issued work may run on streams of flare's own that the device
         * drain does not watch: wait for each distinct one first. */
        void *drained[16];
        size_t drained_count = 0;
        for (size_t index = 0; index < span->work_count && status == FLARE_OK; index++) {
            void *stream = span->work[index].stream;
            bool seen = false;
            for (size_t known = 0; known < drained_count && !seen; known++) {
                seen = drained[known] == stream;
            }
            if (seen || stream == NULL) {
                continue;
            }
            span_progress(span, span->device, "waiting for");
            status = span->ops->stream_drain(stream, span->settings.pass_timeout_ns);
            if (drained_count < 16) {
                drained[drained_count++] = stream;
            }
        }
    }
    if (status == FLARE_OK) {
        span_progress(span, span->device, "waiting for");
        status = span->ops->device_drain(span->device, span->settings.pass_timeout_ns);
    }
    uint64_t end_ns = core_now_ns();
    if (status != FLARE_OK) {
        char limit[32];
        core_duration_format(span->settings.pass_timeout_ns, limit, sizeof limit);
        span_fail(span, "device %d did not finish the pass within %s (%s)", span->device, limit,
                  flare_strerror(status));
        return false;
    }
    if (span->collector_pass_open) {
        span->collector->pass_end(&span->span_launch, span->pass - 1);
        span->collector_pass_open = false;
    }
    replay_record_pass(span->record, span->pass, span->pass_start_ns, end_ns);
    return true;
}

static bool span_restore(span_state *span)
{
    char detail[384];
    span_progress(span, span->device, "restoring memory for");
    if (replay_snapshot_restore(&span->snapshot, span->settings.pass_timeout_ns, span->record,
                                detail, sizeof detail) != FLARE_OK) {
        span_fail(span, "%s", detail);
        return false;
    }
    return true;
}

/* The counting passes: restore, the collector's begin, every piece of work
 * re-issued, the pass's end. Whether all ran. */
static bool span_run_passes(span_state *span)
{
    for (span->pass = 1; span->pass <= span->collector_passes; span->pass++) {
        uint64_t restoring = core_now_ns();
        if (!span_restore(span)) {
            return false;
        }
        span->restore_ns += core_now_ns() - restoring;
        span_progress(span, span->device, "in");
        span->collector_pass_open =
            span->collector->pass_begin(&span->span_launch, span->pass - 1) == FLARE_OK;
        span_progress(span, span->device, "re-issuing");
        span->pass_start_ns = core_now_ns();
        for (size_t index = 0; index < span->work_count; index++) {
            int status = span->work[index].reissue(span->work[index].data);
            if (status != FLARE_OK) {
                span_fail(span, "re-issuing piece %zu of %zu of the span failed (%s)", index + 1,
                          span->work_count, flare_strerror(status));
                return false;
            }
        }
        if (!span_pass_finish(span)) {
            return false;
        }
    }
    return true;
}

/* The collector's notes on how each value was produced, or NULL (none
 * offered, or no memory: the values stand without them). */
static replay_value_note *span_notes(span_state *span)
{
    if (span->collector->finish_notes == NULL) {
        return NULL;
    }
    replay_value_note *notes = calloc(span->kernel_count * span->metric_count, sizeof *notes);
    if (notes != NULL) {
        span->collector->finish_notes(&span->span_launch, span->kernel_count, notes,
                                      span->metric_count);
    }
    return notes;
}

static void queue_results(span_state *span, bool healthy)
{
    replay_record *record = span->record;
    size_t metric_count = span->metric_count;
    double *values = NULL;
    replay_value_note *notes = NULL;
    if (healthy && !span->declined && span->kernel_count > 0 && span->collector_passes > 0) {
        values = malloc(span->kernel_count * metric_count * sizeof *values);
        char reason[256] = "";
        if (values == NULL) {
            snprintf(record->reason, sizeof record->reason, "out of host memory for the results");
        } else {
            for (size_t index = 0; index < span->kernel_count * metric_count; index++) {
                values[index] = NAN;
            }
            if (span->collector->finish_ranges(&span->span_launch, span->kernels,
                                               span->kernel_count, values, metric_count, reason,
                                               sizeof reason) != FLARE_OK) {
                snprintf(record->reason, sizeof record->reason, "metric collection: %.200s",
                         reason);
            } else {
                if (reason[0] != '\0') {
                    snprintf(record->reason, sizeof record->reason, "%.250s", reason);
                }
                notes = span_notes(span);
            }
        }
    }
    for (size_t kernel = 0; kernel < span->kernel_count; kernel++) {
        replay_record *kernel_record = span->kernel_records[kernel];
        kernel_record->passes_planned = record->passes_planned;
        kernel_record->passes_run = span->declined ? 1 : record->passes_run;
        kernel_record->declined = record->declined;
        snprintf(kernel_record->reason, sizeof kernel_record->reason, "%s", record->reason);
        kernel_record->begin_ns = record->begin_ns;
        kernel_record->end_ns = core_now_ns();
        snprintf(kernel_record->collector, sizeof kernel_record->collector, "%s",
                 record->collector);
        if (!span->declined) {
            kernel_record->metric_count = (uint32_t)metric_count;
            for (size_t metric = 0; metric < metric_count; metric++) {
                snprintf(kernel_record->metric_names[metric], REPLAY_METRIC_NAME_MAX, "%s",
                         record->metric_names[metric]);
                kernel_record->metric_values[metric] =
                    values != NULL ? values[kernel * metric_count + metric] : NAN;
                if (notes != NULL) {
                    kernel_record->metric_notes[metric] = notes[kernel * metric_count + metric];
                }
            }
            kernel_record->has_notes = notes != NULL;
        }
        replay_record_queue(kernel_record);
    }
    free(values);
    free(notes);
    record->metric_count = 0; /* the span row carries no values of its own */
    record->end_ns = core_now_ns();
    if (record->declined) {
        record->passes_run = 1;
        replay_stats_add(0, 0, 1, 0, 0);
    }
    replay_record_queue(record);
}

int replay_range_end(void)
{
    span_state *span = thread_span;
    if (span == NULL) {
        return FLARE_ERR_STATE;
    }
    bool healthy = true;
    bool holding_writer = false;
    if (!span->declined && span->ops->current_device() != span->device) {
        /* Restores, re-issues and the collector run in the thread's current
         * device (CUDA: context): it must be the span's. */
        span_decline(span, "the span ended with another device current than the one it began on");
    }
    if (span->device >= 0 && !span->declined) {
        /* The writer side: every submission in progress (record + submit)
         * completes first, and nothing new starts until the passes end. A
         * declined span is detached already: nobody can reach it. */
        if (replay_gate_writer_enter(span->device, span->settings.drain_timeout_ns) == FLARE_OK) {
            holding_writer = true;
            span_progress(span, span->device, "preparing the counters after");
        } else {
            span_decline(span, "the gate of device %d stayed busy at the span's end", span->device);
        }
    }
    pthread_mutex_lock(&spans_lock);
    pthread_mutex_lock(&span->lock);
    span->replaying = true;
    detach_from_device(span);
    pthread_mutex_unlock(&span->lock);
    pthread_mutex_unlock(&spans_lock);
    core_log(CORE_LOG_INFO, "range replay: span %s ends: %zu pieces of work, %zu kernels%s%s",
             span->record->kernel_name, span->work_count, span->kernel_count,
             span->declined ? "; declined: " : "", span->declined ? span->record->reason : "");
    if (!span->declined && span->work_count == 0) {
        span_decline(span, "the span submitted no device work");
    }
    if (!span->declined) {
        /* Pass 0 was the program's own run: it only recorded. The collector
         * is prepared now, for exactly the kernels recorded (its counter
         * image grows with the number of ranges, about 2.4 ms per range on
         * the H200, so sizing it for a guess cost seconds), and every
         * counting pass is a re-issue. */
        /* Nothing is restored yet: a device that does not finish the
         * program's own run declines the span rather than stopping it. */
        if (span->ops->device_drain(span->device, span->settings.pass_timeout_ns) != FLARE_OK) {
            char limit[32];
            core_duration_format(span->settings.pass_timeout_ns, limit, sizeof limit);
            span_decline(span,
                         "device drain stuck: device %d did not finish the span's own run "
                         "within %s",
                         span->device, limit);
        } else {
            healthy = span_pass_finish(span);
        }
    }
    if (!span->declined) {
        char reason[256] = "";
        span_progress(span, span->device, "preparing the counters after");
        uint64_t preparing = core_now_ns();
        int passes = span->kernel_count == 0 ? 0
                     : span->collector->prepare_span != NULL
                         ? span->collector->prepare_span(&span->span_launch, span->metric_names,
                                                         span->metric_count, span->kernel_count,
                                                         reason, sizeof reason)
                         : span->collector->prepare(&span->span_launch, span->metric_names,
                                                    span->metric_count, reason, sizeof reason);
        if (passes < 1) {
            if (span->kernel_count == 0) {
                span_decline(span, "the span launched no kernel: nothing to count");
            } else {
                span_decline(span, "metric collection: %.200s", reason);
            }
            span->collector_passes = 0;
        } else {
            span->collector_passes = (uint32_t)passes;
        }
        span->prepare_ns = core_now_ns() - preparing;
        span_progress(span, span->device, "prepared after");
        span->record->passes_planned = span->collector_passes + 1;
        if (healthy && span->collector_passes > 0) {
            replay_stats_add(1, 0, 0, 0, 0);
        }
        healthy = healthy && span_run_passes(span);
    }
    release_shadows(span);
    /* Results before the gate opens: the collector decodes from state on
     * the device's profiler that the next replay there will reconfigure. */
    uint64_t finishing = core_now_ns();
    char name[sizeof span->record->kernel_name]; /* the record goes with its results */
    snprintf(name, sizeof name, "%s", span->record->kernel_name);
    queue_results(span, healthy);
    if (span->collector_passes > 0 && span->collector->end != NULL) {
        span->collector->end(&span->span_launch);
    }
    core_log(CORE_LOG_INFO,
             "range replay: span %s: collector prepared in %.1f ms, %u restores %.1f ms, results "
             "%.1f ms",
             name, span->prepare_ns / 1e6, span->pass > 1 ? span->pass - 1 : 0,
             span->restore_ns / 1e6, (core_now_ns() - finishing) / 1e6);
    if (holding_writer) {
        replay_gate_writer_exit(span->device);
    }
    release_work(span);
    free(span->kernels);
    free(span->kernel_records);
    thread_span = NULL;
    pthread_mutex_destroy(&span->lock);
    free(span);
    return FLARE_OK;
}

FLARE_API int flare_replay_range_begin(const char *name)
{
    if (name == NULL || name[0] == '\0') {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    /* Configured before the span begins: from its first piece of work on,
     * every launch, copy and memset on the device must reach the hooks. */
    replay_notify_configured();
    atomic_fetch_add(&replay_configured_count, 1);
    int status = replay_range_begin(name, 0);
    if (status == FLARE_OK) {
        thread_span->from_api = true;
    } else {
        atomic_fetch_sub(&replay_configured_count, 1);
    }
    return status;
}

FLARE_API int flare_replay_range_end(void)
{
    /* A span a scope began is ended by that scope's end, never here. */
    if (thread_span == NULL || !thread_span->from_api) {
        return FLARE_ERR_STATE;
    }
    int status = replay_range_end();
    if (status == FLARE_OK) {
        atomic_fetch_sub(&replay_configured_count, 1);
    }
    return status;
}

/* ---- Scope-selected spans ---- */

static pthread_mutex_t range_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int range_selected;
static char range_name[128];
static uint64_t range_occurrence;
static uint64_t range_seen;
static _Thread_local int span_scope_depth; /* nesting of the span's own name */
static _Thread_local bool span_from_scope;

void replay_range_select_range(const char *name, uint64_t occurrence)
{
    pthread_mutex_lock(&range_lock);
    snprintf(range_name, sizeof range_name, "%s", name != NULL ? name : "");
    range_occurrence = occurrence != 0 ? occurrence : 1;
    range_seen = 0;
    atomic_store(&range_selected, range_name[0] != '\0');
    pthread_mutex_unlock(&range_lock);
}

void replay_range_scope_enter(const char *name)
{
    if (!atomic_load_explicit(&range_selected, memory_order_relaxed) || name == NULL) {
        return;
    }
    if (span_from_scope) {
        if (strcmp(name, thread_span != NULL ? thread_span->record->kernel_name : "") == 0) {
            span_scope_depth++;
        }
        return;
    }
    pthread_mutex_lock(&range_lock);
    bool start = strcmp(name, range_name) == 0 && ++range_seen == range_occurrence;
    uint64_t occurrence = range_seen;
    pthread_mutex_unlock(&range_lock);
    uint64_t trigger = start ? replay_trigger_take_range(name) : 0;
    if (start && replay_range_begin(name, occurrence) == FLARE_OK) {
        span_from_scope = true;
        span_scope_depth = 1;
        thread_span->record->trigger_id = trigger; /* queued at the span's end */
    } else if (trigger != 0) {
        replay_trigger_lost(trigger, "the range's span could not begin on its thread");
    }
}

void replay_range_scope_exit(const char *name)
{
    if (!span_from_scope || name == NULL || thread_span == NULL ||
        strcmp(name, thread_span->record->kernel_name) != 0) {
        return;
    }
    if (--span_scope_depth == 0) {
        span_from_scope = false;
        replay_range_end();
    }
}

void replay_range_reset_for_tests(void)
{
    replay_range_select_range(NULL, 0);
}
