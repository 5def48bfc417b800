/*
 * deepwin_session.c: the process's window coordinator within a session
 * (deepwin_session.h): the public flare_window_ API, scheduled windows and
 * the collector's beat.
 *
 * The coordinator lives for the life of the process once created, like the
 * thread slots: an application thread racing flare_shutdown may still call
 * flare_window_open, and must find memory, not a freed pointer. Nothing here
 * may block an application's hot path; the public calls wait, boundedly, and
 * are documented as not for hot paths.
 */
#include "deepwin/deepwin_session.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/capability.h"
#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "deepwin/deepwin_auto.h"
#include "flare/flare.h"

#define DEEPWIN_DEFAULT_DURATION_MS 2000u
#define DEEPWIN_API_WAIT_NS         2000000000ull /* eight beats at the longest flush interval */
#define DEEPWIN_WRITE_BATCH         16

static pthread_mutex_t coordinator_lock = PTHREAD_MUTEX_INITIALIZER;
static deepwin_coordinator *_Atomic process_coordinator;
static _Atomic uint64_t launch_count;
static _Atomic int session_running;
static _Atomic(const backend_engine_ops *) chosen_engine;
static _Atomic int engine_chosen;
/* The PC sampling engine of windows that ask for pc (NULL: they fall back). */
static _Atomic(const backend_engine_ops *) pc_engine;
/* The SASS metrics engine of windows that ask for sass (NULL: they fall back). */
static _Atomic(const backend_engine_ops *) sass_engine;

/* The schedule of this session; written by begin (before the collector
 * runs) and read by the beat on the collector thread. */
static uint64_t schedule_at_ns; /* 0: no scheduled window */
static uint64_t schedule_for_ns;
static char schedule_label[DEEPWIN_LABEL_MAX];
static deepwin_engine_kind schedule_engine; /* FLARE_DEEP_ENGINE */
static uint64_t stored_drops;               /* record drops last written; collector only */
/* The deep_windows row without its engine, so a later engine choice
 * (deepwin_session_set_engine, the CUDA engine after injection) can restate
 * it. Guarded by coordinator_lock. */
static int capability_requested;
static const char *capability_status = CORE_CAPABILITY_ACTIVE;
static char capability_text[256] = "on request (flare_window_open)";

deepwin_coordinator *deepwin_session_coordinator(void)
{
    return atomic_load_explicit(&process_coordinator, memory_order_acquire);
}

void deepwin_session_set_engine(const backend_engine_ops *engine)
{
    atomic_store(&chosen_engine, engine);
    atomic_store(&engine_chosen, 1);
    /* A coordinator that exists already takes it too, when no window is in
     * flight (else from the next session). */
    pthread_mutex_lock(&coordinator_lock);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator != NULL && deepwin_set_engine(coordinator, engine) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "deep engine %s takes over from the next window session",
                 engine != NULL ? engine->name : "none");
    else if (coordinator != NULL && atomic_load(&session_running))
        core_capability_set("deep_windows", capability_requested, capability_status,
                            "%s; default engine %s", capability_text,
                            engine != NULL ? engine->name : "none");
    pthread_mutex_unlock(&coordinator_lock);
}

void deepwin_session_set_pc_engine(const backend_engine_ops *engine)
{
    atomic_store(&pc_engine, engine);
    pthread_mutex_lock(&coordinator_lock);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator != NULL && deepwin_set_pc_engine(coordinator, engine) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "PC sampling engine %s takes over from the next window session",
                 engine != NULL ? engine->name : "none");
    pthread_mutex_unlock(&coordinator_lock);
}

void deepwin_session_set_sass_engine(const backend_engine_ops *engine)
{
    atomic_store(&sass_engine, engine);
    pthread_mutex_lock(&coordinator_lock);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator != NULL && deepwin_set_sass_engine(coordinator, engine) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "SASS metrics engine %s takes over from the next window session",
                 engine != NULL ? engine->name : "none");
    pthread_mutex_unlock(&coordinator_lock);
}

void deepwin_session_count_launch(void)
{
    atomic_fetch_add_explicit(&launch_count, 1, memory_order_relaxed);
}

static uint64_t launches_now(void)
{
    return atomic_load_explicit(&launch_count, memory_order_relaxed);
}

uint64_t deepwin_session_launches(void)
{
    return launches_now();
}

/* A schedule variable's value through the duration parser, within
 * 1ns..DEEPWIN_SCHEDULE_MAX_NS. error is left empty, or says
 * VARIABLE=TEXT: why. */
static int parse_schedule_value(const char *variable, const char *text, uint64_t *out_ns,
                                char *error, size_t error_size)
{
    int written = snprintf(error, error_size, "%s=%.48s: ", variable, text);
    size_t used = written > 0 && (size_t)written < error_size ? (size_t)written : error_size;
    if (core_duration_parse(text, strlen(text), 1, DEEPWIN_SCHEDULE_MAX_NS, out_ns, error + used,
                            error_size - used) == FLARE_OK) {
        if (error_size > 0)
            error[0] = '\0';
        return FLARE_OK;
    }
    return FLARE_ERR_INVALID_ARGUMENT;
}

/* FLARE_DEEP_ENGINE (pm, pc, sass or auto; unset or empty: pm) into schedule_engine. */
static int read_schedule_engine(char *error, size_t error_size)
{
    const char *engine = getenv("FLARE_DEEP_ENGINE");
    schedule_engine = DEEPWIN_ENGINE_PM;
    if (engine == NULL || engine[0] == '\0' ||
        deepwin_engine_kind_parse(engine, &schedule_engine) == 0)
        return FLARE_OK;
    snprintf(error, error_size, "FLARE_DEEP_ENGINE=%.48s: use pm, pc, sass or auto", engine);
    return FLARE_ERR_INVALID_ARGUMENT;
}

/* FLARE_DEEP_BUDGET (a percentage, "5%"; unset or empty: the default) as
 * deepwin_config.budget: 0 for the default, the fraction, or -1 when
 * malformed, with error saying FLARE_DEEP_BUDGET=TEXT: why. */
static double read_budget(char *error, size_t error_size)
{
    const char *text = getenv("FLARE_DEEP_BUDGET");
    double budget = 0;
    char why[160];
    if (text == NULL || text[0] == '\0' ||
        deepwin_budget_parse(text, &budget, why, sizeof(why)) == 0)
        return budget;
    snprintf(error, error_size, "FLARE_DEEP_BUDGET=%.48s: %.100s", text, why);
    return -1;
}

/* The deep_windows capability row, kept for a later engine choice to restate. */
static void set_capability(int requested, const char *status, const char *engine_name,
                           const char *text)
{
    core_capability_set("deep_windows", requested, status, "%s; default engine %s", text,
                        engine_name);
    pthread_mutex_lock(&coordinator_lock);
    capability_requested = requested;
    capability_status = status;
    snprintf(capability_text, sizeof(capability_text), "%.255s", text);
    pthread_mutex_unlock(&coordinator_lock);
}

/* Reads FLARE_DEEP_AFTER / FLARE_DEEP_FOR / FLARE_DEEP_ENGINE into the
 * schedule. budget_error (empty, or why FLARE_DEEP_BUDGET is malformed)
 * ignores a schedule with engine auto, as a bad FLARE_DEEP_ENGINE does, and
 * is said in the capability otherwise (auto windows are refused). */
static void read_schedule(uint64_t start_ns, const char *engine_name, const char *budget_error)
{
    schedule_at_ns = 0;
    const char *after = getenv("FLARE_DEEP_AFTER");
    const char *length = getenv("FLARE_DEEP_FOR");
    int have_after = after != NULL && after[0] != '\0';
    int have_length = length != NULL && length[0] != '\0';
    /* A malformed deep budget is said beside whatever else the row says. */
    char budget_note[160] = "", text[320];
    if (budget_error[0] != '\0')
        snprintf(budget_note, sizeof(budget_note), "; %.100s; engine auto windows are refused",
                 budget_error);
    const char *status = budget_note[0] != '\0' ? CORE_CAPABILITY_DEGRADED : CORE_CAPABILITY_ACTIVE;
    if (!have_after && !have_length) {
        if (budget_note[0] != '\0')
            core_log(CORE_LOG_WARNING, "%s", budget_note + 2);
        snprintf(text, sizeof(text), "on request (flare_window_open)%s", budget_note);
        set_capability(budget_note[0] != '\0', status, engine_name, text);
        return;
    }
    char error[192] = "";
    uint64_t after_ns = 0, for_ns = 0;
    if (!have_after || !have_length) {
        snprintf(error, sizeof(error), "%s is set without %s; both are needed",
                 have_after ? "FLARE_DEEP_AFTER" : "FLARE_DEEP_FOR",
                 have_after ? "FLARE_DEEP_FOR" : "FLARE_DEEP_AFTER");
    } else if (parse_schedule_value("FLARE_DEEP_AFTER", after, &after_ns, error, sizeof(error)) !=
                   FLARE_OK ||
               parse_schedule_value("FLARE_DEEP_FOR", length, &for_ns, error, sizeof(error)) !=
                   FLARE_OK) {
        /* error says which */
    } else if (for_ns > DEEPWIN_DURATION_MAX_NS) {
        snprintf(error, sizeof(error), "FLARE_DEEP_FOR=%s: a window lasts at most %llu s", length,
                 DEEPWIN_DURATION_MAX_NS / 1000000000ull);
    } else if (read_schedule_engine(error, sizeof(error)) != FLARE_OK) {
        /* error says why */
    } else if (schedule_engine == DEEPWIN_ENGINE_AUTO && budget_error[0] != '\0') {
        snprintf(error, sizeof(error), "%s", budget_error);
    }
    if (error[0] != '\0') {
        core_log(CORE_LOG_WARNING, "scheduled deep window ignored: %s", error);
        core_capability_set("deep_windows", 1, CORE_CAPABILITY_DEGRADED,
                            "scheduled window ignored: %s", error);
        pthread_mutex_lock(&coordinator_lock);
        capability_requested = 1;
        capability_status = CORE_CAPABILITY_DEGRADED;
        snprintf(capability_text, sizeof(capability_text), "scheduled window ignored: %.150s",
                 error);
        pthread_mutex_unlock(&coordinator_lock);
        return;
    }
    schedule_at_ns = start_ns + after_ns;
    schedule_for_ns = for_ns;
    snprintf(schedule_label, sizeof(schedule_label), "deep-after %s for %s", after, length);
    if (budget_note[0] != '\0')
        core_log(CORE_LOG_WARNING, "%s", budget_note + 2);
    /* The schedule's own engine, beside the default (rules' and API windows'
     * unless they name one): a pc schedule said "engine cuda-pm" alone. */
    snprintf(text, sizeof(text), "scheduled: after %.60s for %.60s (engine %s)%s", after, length,
             deepwin_engine_kind_name(schedule_engine), budget_note);
    set_capability(1, status, engine_name, text);
}

void deepwin_session_begin(uint64_t start_ns, const backend_engine_ops *default_engine)
{
    const backend_engine_ops *engine =
        atomic_load(&engine_chosen) ? atomic_load(&chosen_engine) : default_engine;
    pthread_mutex_lock(&coordinator_lock);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator == NULL) {
        deepwin_config config = {.engine = engine,
                                 .pc_engine = atomic_load(&pc_engine),
                                 .sass_engine = atomic_load(&sass_engine),
                                 .device = -1};
        if (deepwin_create(&config, &coordinator) != FLARE_OK) {
            pthread_mutex_unlock(&coordinator_lock);
            core_capability_set("deep_windows", 0, CORE_CAPABILITY_UNAVAILABLE,
                                "out of memory for the window coordinator");
            return;
        }
        atomic_store_explicit(&process_coordinator, coordinator, memory_order_release);
    } else {
        /* A request that raced the last session's end must not open in this
         * one, and that session's unwritten records are not this one's. */
        deepwin_close_now(coordinator, DEEPWIN_CLOSE_SESSION_END, start_ns, launches_now());
        deepwin_record discard[DEEPWIN_WRITE_BATCH];
        while (deepwin_take_records(coordinator, discard, DEEPWIN_WRITE_BATCH) > 0) {
        }
        deepwin_set_engine(coordinator, engine);
        deepwin_set_pc_engine(coordinator, atomic_load(&pc_engine));
        deepwin_set_sass_engine(coordinator, atomic_load(&sass_engine));
        /* The last session's launch rate is not this one's (engine auto). */
        deepwin_reset_launch_rate(coordinator);
    }
    pthread_mutex_unlock(&coordinator_lock);
    stored_drops = deepwin_record_drops(coordinator);
    char budget_error[192] = "";
    deepwin_set_budget(coordinator, read_budget(budget_error, sizeof(budget_error)));
    read_schedule(start_ns, engine != NULL ? engine->name : "none", budget_error);
    atomic_store(&session_running, 1);
}

static void write_records(deepwin_coordinator *coordinator, store *database, int64_t pid)
{
    deepwin_record records[DEEPWIN_WRITE_BATCH];
    size_t count;
    while ((count = deepwin_take_records(coordinator, records, DEEPWIN_WRITE_BATCH)) > 0) {
        for (size_t i = 0; i < count; i++) {
            const deepwin_record *record = &records[i];
            store_window_row row = {
                .pid = pid,
                .id = record->id,
                .token_kind = deepwin_token_kind_name(record->token.kind),
                .label = record->token.label,
                .has_cause = record->has_cause || record->token.kind == DEEPWIN_TOKEN_RULE,
                .rule_id = record->token.rule_id,
                .rule_text = record->has_cause ? record->cause.rule_text : NULL,
                .comparison = record->has_cause ? record->cause.comparison : NULL,
                .threshold = record->cause.threshold,
                .rate_window_ns = record->cause.rate_window_ns,
                .sustained_ns = record->cause.sustained_ns,
                .first_true_ns = record->cause.first_true_ns,
                .observed_value = record->cause.observed_value,
                .observed_partial = record->cause.observed_partial,
                .max_duration_ns = record->bounds.max_duration_ns,
                .max_launches = record->bounds.max_launches,
                .requested_ns = record->requested_ns,
                .opened_ns = record->opened_ns,
                .closed_ns = record->closed_ns,
                .close_reason = record->close_reason,
                .launches = record->launches,
                .engine = record->engine,
                .engine_status = record->engine_status,
                .engine_reason = record->engine_reason,
                .engine_samples = record->engine_samples,
            };
            if (store_put_window(database, &row) != FLARE_OK)
                CORE_LOG_ONCE("windows.store", CORE_LOG_ERROR, "cannot store window %llu: %s",
                              (unsigned long long)record->id, store_last_error(database));
            if (strcmp(record->close_reason, DEEPWIN_CLOSE_REFUSED) == 0)
                core_log(CORE_LOG_WARNING, "deep window %llu refused: %s",
                         (unsigned long long)record->id, record->engine_reason);
        }
    }
    uint64_t drops = deepwin_record_drops(coordinator);
    if (drops != stored_drops &&
        store_set_drops(database, pid, "windows", "window records", drops) == FLARE_OK)
        stored_drops = drops;
}

/* Queues the scheduled window once it is due. A busy coordinator does not
 * cancel it: it is tried again at each beat until it gets in. */
static void start_scheduled(deepwin_coordinator *coordinator, uint64_t now_ns)
{
    if (schedule_at_ns == 0 || now_ns < schedule_at_ns)
        return;
    deepwin_token token = {.kind = DEEPWIN_TOKEN_SCHEDULED, .engine = schedule_engine};
    snprintf(token.label, sizeof(token.label), "%s", schedule_label);
    deepwin_bounds bounds = {.max_duration_ns = schedule_for_ns, .max_launches = 0};
    deepwin_request_result result;
    if (deepwin_request_open(coordinator, &token, &bounds, NULL, now_ns, &result) == FLARE_OK) {
        schedule_at_ns = 0;
    } else {
        CORE_LOG_ONCE("windows.scheduled_busy", CORE_LOG_INFO, "scheduled deep window waits: %s",
                      result.message);
    }
}

void deepwin_session_beat(store *database, int64_t pid, uint64_t now_ns)
{
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator == NULL)
        return;
    start_scheduled(coordinator, now_ns);
    deepwin_tick(coordinator, now_ns, launches_now());
    write_records(coordinator, database, pid);
}

int deepwin_session_running(void)
{
    return atomic_load(&session_running);
}

void deepwin_session_cancel(void)
{
    atomic_store(&session_running, 0);
    schedule_at_ns = 0;
    pthread_mutex_lock(&coordinator_lock);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator != NULL) {
        deepwin_close_now(coordinator, DEEPWIN_CLOSE_SESSION_END, core_now_ns(), launches_now());
        deepwin_record discard[DEEPWIN_WRITE_BATCH];
        while (deepwin_take_records(coordinator, discard, DEEPWIN_WRITE_BATCH) > 0) {
        }
    }
    pthread_mutex_unlock(&coordinator_lock);
}

void deepwin_session_end(store *database, int64_t pid, uint64_t end_ns)
{
    atomic_store(&session_running, 0);
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator == NULL)
        return;
    schedule_at_ns = 0;
    deepwin_close_now(coordinator, DEEPWIN_CLOSE_SESSION_END, end_ns, launches_now());
    write_records(coordinator, database, pid);
}

/* ---- the public API ---- */

FLARE_API void flare_window_options_init(flare_window_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof(*options));
    options->struct_size = sizeof(*options);
}

static void pause_briefly(void)
{
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 1000000L};
    nanosleep(&pause, NULL);
}

/* Waits until window_id leaves PENDING (want_idle: until it is finished). */
static int wait_for(deepwin_coordinator *coordinator, uint64_t window_id, int want_idle,
                    deepwin_state *state, deepwin_record *record)
{
    uint64_t deadline = core_now_ns() + DEEPWIN_API_WAIT_NS;
    for (;;) {
        if (deepwin_lookup(coordinator, window_id, state, record) != FLARE_OK)
            return FLARE_ERR_NOT_FOUND;
        if (want_idle ? *state == DEEPWIN_IDLE : *state != DEEPWIN_PENDING)
            return FLARE_OK;
        if (core_now_ns() >= deadline)
            return FLARE_ERR_TIMEOUT;
        /* This thread may be the one the engine waits for (a start or stop
         * made at the program's next launch). */
        const backend_engine_ops *pc = atomic_load(&pc_engine);
        if (pc != NULL && pc->serve != NULL)
            pc->serve();
        const backend_engine_ops *sass = atomic_load(&sass_engine);
        if (sass != NULL && sass->serve != NULL)
            sass->serve();
        pause_briefly();
    }
}

FLARE_API int flare_window_open(const flare_window_options *options)
{
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (!flare_is_active() || !atomic_load(&session_running) || coordinator == NULL)
        return FLARE_ERR_NOT_ACTIVE;
    flare_window_options settings;
    flare_window_options_init(&settings);
    if (options != NULL) {
        /* Only the fields the caller's struct has: it may predate later ones. */
        if (options->struct_size <
            offsetof(flare_window_options, max_duration_ms) + sizeof(options->max_duration_ms))
            return FLARE_ERR_INVALID_ARGUMENT;
        size_t size =
            options->struct_size < sizeof(settings) ? options->struct_size : sizeof(settings);
        memcpy(&settings, options, size);
    }
    if (settings.max_duration_ms == 0)
        settings.max_duration_ms = DEEPWIN_DEFAULT_DURATION_MS;
    if ((uint64_t)settings.max_duration_ms * 1000000ull > DEEPWIN_DURATION_MAX_NS)
        return FLARE_ERR_INVALID_ARGUMENT;
    deepwin_token token = {.kind = DEEPWIN_TOKEN_MANUAL};
    if (settings.engine != NULL && deepwin_engine_kind_parse(settings.engine, &token.engine) != 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (settings.label != NULL)
        snprintf(token.label, sizeof(token.label), "%s", settings.label);
    deepwin_bounds bounds = {.max_duration_ns = (uint64_t)settings.max_duration_ms * 1000000ull,
                             .max_launches = settings.max_launches};
    deepwin_request_result result;
    int status = deepwin_request_open(coordinator, &token, &bounds, NULL, core_now_ns(), &result);
    if (status == FLARE_ERR_STATE)
        core_log(CORE_LOG_INFO, "flare_window_open: %s", result.message);
    if (status != FLARE_OK)
        return status;
    deepwin_state state;
    deepwin_record record;
    status = wait_for(coordinator, result.window_id, 0, &state, &record);
    if (status == FLARE_ERR_TIMEOUT)
        return status;
    if (status != FLARE_OK || state == DEEPWIN_IDLE) {
        /* Finished without ever being open: refused by the engine, or closed
         * while queued. */
        if (status == FLARE_OK && strcmp(record.close_reason, DEEPWIN_CLOSE_REFUSED) == 0) {
            core_log(CORE_LOG_WARNING, "flare_window_open: window %llu refused: %s",
                     (unsigned long long)record.id, record.engine_reason);
            return FLARE_ERR_UNSUPPORTED;
        }
        if (status == FLARE_OK && record.opened_ns != 0)
            return FLARE_OK; /* opened and already closed on a bound */
        return FLARE_ERR_STATE;
    }
    return FLARE_OK;
}

FLARE_API int flare_window_close(void)
{
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (!flare_is_active() || !atomic_load(&session_running) || coordinator == NULL)
        return FLARE_ERR_NOT_ACTIVE;
    uint64_t window_id = 0;
    int status = deepwin_request_close(coordinator, DEEPWIN_CLOSE_MANUAL, &window_id);
    if (status != FLARE_OK)
        return status;
    deepwin_state state;
    status = wait_for(coordinator, window_id, 1, &state, NULL);
    return status == FLARE_ERR_NOT_FOUND ? FLARE_OK : status;
}
