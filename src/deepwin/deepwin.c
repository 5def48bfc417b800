/*
 * deepwin.c: the deep-profiling window coordinator (deepwin.h).
 *
 * Two locks, in this order when both are held: beat_lock serialises the
 * beat (tick, close_now) so the engine is armed and disarmed by one thread
 * at a time; state_lock guards the state, the current request and the
 * record queue, and is held only for copies, never across an engine call, so
 * a requester never waits for an engine. Nothing here reads a clock, logs or
 * writes a file; it must never arm twice or call a refused window open.
 */
#include "deepwin/deepwin.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deepwin/deepwin_auto.h"
#include "flare/flare.h"

#define DEEPWIN_RECORD_CAPACITY_DEFAULT 64

struct deepwin_coordinator {
    deepwin_config config;
    pthread_mutex_t beat_lock;
    pthread_mutex_t state_lock;
    /* Mirrors state for lock-free readers (blackout); written under state_lock. */
    _Atomic int state;
    _Atomic uint64_t queued_total;
    _Atomic uint64_t opened_total;
    _Atomic uint64_t record_drops;
    /* The launch rate auto windows are chosen at, in thousandths of a
     * launch per second: written by the beat, read by requests. */
    _Atomic uint64_t launch_rate_milli;
    deepwin_rate rate; /* the beat's points; guarded by beat_lock */
    /* Guarded by state_lock. */
    uint64_t next_id;
    deepwin_record current; /* the pending / open / closing window */
    /* The engine current arms and disarms (chosen at its request: the one
     * it asked for, or the fallback), or NULL. */
    const backend_engine_ops *current_engine;
    /* An auto request's choice (current.token.engine AUTO only): refused
     * when no engine fits, and whether PM sampling fits for a busy pc. */
    deepwin_auto_choice current_auto;
    uint64_t launches_at_open;
    const char *close_requested; /* a reason, or NULL */
    deepwin_record last_finished;
    deepwin_record *records; /* ring of record_capacity */
    uint32_t record_head;
    uint32_t record_count;
};

static const char *const engine_kind_names[DEEPWIN_ENGINE_KINDS] = {[DEEPWIN_ENGINE_PM] = "pm",
                                                                    [DEEPWIN_ENGINE_PC] = "pc",
                                                                    [DEEPWIN_ENGINE_AUTO] = "auto",
                                                                    [DEEPWIN_ENGINE_SASS] = "sass"};

const char *deepwin_engine_kind_name(deepwin_engine_kind kind)
{
    return (unsigned)kind < DEEPWIN_ENGINE_KINDS ? engine_kind_names[kind] : "?";
}

int deepwin_engine_kind_parse(const char *name, deepwin_engine_kind *kind)
{
    for (unsigned i = 0; name != NULL && i < DEEPWIN_ENGINE_KINDS; i++)
        if (strcmp(name, engine_kind_names[i]) == 0) {
            *kind = (deepwin_engine_kind)i;
            return 0;
        }
    return -1;
}

/* state_lock held: an auto request's engine: the deepest (sass, pc, then
 * pm) whose estimated slowdown at the current launch rate is within the deep
 * budget. The choice and its why go to coordinator->current_auto and the
 * record's engine_reason; when none fits, NULL, and open_pending refuses
 * the window with that reason. */
static const backend_engine_ops *choose_auto(deepwin_coordinator *coordinator,
                                             deepwin_record *record)
{
    const backend_engine_ops *sass = coordinator->config.sass_engine;
    const backend_engine_ops *pc = coordinator->config.pc_engine;
    const backend_engine_ops *pm = coordinator->config.engine;
    deepwin_auto_candidate candidates[] = {
        {sass, "sass", sass != NULL && sass->unusable != NULL ? sass->unusable() : NULL},
        {pc, "pc", pc != NULL && pc->unusable != NULL ? pc->unusable() : NULL},
        {pm, "pm", pm != NULL && pm->unusable != NULL ? pm->unusable() : NULL}};
    /* A device without SASS metrics leaves them out of the words: only a
     * missing pc or pm is worth saying. */
    size_t first = sass == NULL ? 1 : 0;
    deepwin_auto_choose(candidates + first, 3 - first, deepwin_launch_rate(coordinator),
                        coordinator->config.budget, &coordinator->current_auto,
                        record->engine_reason, sizeof(record->engine_reason));
    return coordinator->current_auto.engine;
}

/* state_lock held: the engine a request gets. A pc or sass window on a
 * coordinator without that engine falls back to the PM one, and says so in
 * its engine_reason (kept, and prefixed to any reason arm gives). */
static const backend_engine_ops *choose_engine(deepwin_coordinator *coordinator,
                                               deepwin_record *record)
{
    memset(&coordinator->current_auto, 0, sizeof(coordinator->current_auto));
    deepwin_engine_kind kind = record->token.engine;
    if (kind == DEEPWIN_ENGINE_AUTO)
        return choose_auto(coordinator, record);
    if (kind != DEEPWIN_ENGINE_PC && kind != DEEPWIN_ENGINE_SASS)
        return coordinator->config.engine;
    const backend_engine_ops *asked =
        kind == DEEPWIN_ENGINE_PC ? coordinator->config.pc_engine : coordinator->config.sass_engine;
    if (asked != NULL)
        return asked;
    snprintf(record->engine_reason, sizeof(record->engine_reason),
             "asked for %s: no %s engine on this device; fell back to %s",
             deepwin_engine_kind_name(kind),
             kind == DEEPWIN_ENGINE_PC ? "PC sampling" : "SASS metrics",
             coordinator->config.engine != NULL ? "pm" : "none");
    return coordinator->config.engine;
}

/* record's engine_reason: a fallback note already there, then reason. */
static void set_engine_reason(deepwin_record *record, const char *reason)
{
    size_t size = sizeof(record->engine_reason);
    size_t used = strnlen(record->engine_reason, size - 1);
    if (used != 0 && reason[0] != '\0' && used + 2 < size) {
        memcpy(record->engine_reason + used, "; ", 3);
        used += 2;
    }
    snprintf(record->engine_reason + used, size - used, "%s", reason);
}

const char *deepwin_token_kind_name(deepwin_token_kind kind)
{
    switch (kind) {
    case DEEPWIN_TOKEN_RULE:
        return "rule";
    case DEEPWIN_TOKEN_MANUAL:
        return "manual";
    case DEEPWIN_TOKEN_SCHEDULED:
        return "scheduled";
    }
    return "unknown";
}

int deepwin_create(const deepwin_config *config, deepwin_coordinator **out)
{
    if (config == NULL || out == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    deepwin_coordinator *coordinator = calloc(1, sizeof(*coordinator));
    if (coordinator == NULL)
        return FLARE_ERR_NO_MEMORY;
    coordinator->config = *config;
    if (coordinator->config.budget == 0)
        coordinator->config.budget = DEEPWIN_BUDGET_DEFAULT;
    if (coordinator->config.record_capacity == 0)
        coordinator->config.record_capacity = DEEPWIN_RECORD_CAPACITY_DEFAULT;
    coordinator->records =
        calloc(coordinator->config.record_capacity, sizeof(*coordinator->records));
    if (coordinator->records == NULL) {
        free(coordinator);
        return FLARE_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&coordinator->beat_lock, NULL);
    pthread_mutex_init(&coordinator->state_lock, NULL);
    atomic_init(&coordinator->state, DEEPWIN_IDLE);
    *out = coordinator;
    return FLARE_OK;
}

void deepwin_destroy(deepwin_coordinator *coordinator)
{
    if (coordinator == NULL)
        return;
    pthread_mutex_destroy(&coordinator->beat_lock);
    pthread_mutex_destroy(&coordinator->state_lock);
    free(coordinator->records);
    free(coordinator);
}

/* state_lock held. */
static void set_state(deepwin_coordinator *coordinator, deepwin_state state)
{
    atomic_store_explicit(&coordinator->state, (int)state, memory_order_release);
}

static deepwin_state get_state(const deepwin_coordinator *coordinator)
{
    return (deepwin_state)atomic_load_explicit(&coordinator->state, memory_order_acquire);
}

static void describe_token(const deepwin_token *token, char *buffer, size_t size)
{
    switch (token->kind) {
    case DEEPWIN_TOKEN_RULE:
        snprintf(buffer, size, "rule %u%s%.*s%s", token->rule_id, token->label[0] ? " (" : "",
                 DEEPWIN_LABEL_MAX, token->label, token->label[0] ? ")" : "");
        break;
    case DEEPWIN_TOKEN_MANUAL:
        snprintf(buffer, size, "manual%s%.*s%s", token->label[0] ? " '" : "", DEEPWIN_LABEL_MAX,
                 token->label, token->label[0] ? "'" : "");
        break;
    default:
        snprintf(buffer, size, "%s%s%.*s", deepwin_token_kind_name(token->kind),
                 token->label[0] ? " " : "", DEEPWIN_LABEL_MAX, token->label);
        break;
    }
}

static const char *state_word(deepwin_state state)
{
    switch (state) {
    case DEEPWIN_PENDING:
        return "queued";
    case DEEPWIN_OPEN:
        return "open";
    case DEEPWIN_CLOSING:
        return "closing";
    default:
        return "idle";
    }
}

int deepwin_request_open(deepwin_coordinator *coordinator, const deepwin_token *token,
                         const deepwin_bounds *bounds, const deepwin_cause *cause, uint64_t now_ns,
                         deepwin_request_result *result)
{
    deepwin_request_result local;
    if (result == NULL)
        result = &local;
    memset(result, 0, sizeof(*result));
    if (coordinator == NULL || token == NULL || bounds == NULL ||
        token->kind < DEEPWIN_TOKEN_RULE || token->kind > DEEPWIN_TOKEN_SCHEDULED ||
        bounds->max_duration_ns == 0 || bounds->max_duration_ns > DEEPWIN_DURATION_MAX_NS) {
        snprintf(result->message, sizeof(result->message),
                 "invalid request: a token and a duration bound in 1 ns..%llu s are required",
                 DEEPWIN_DURATION_MAX_NS / 1000000000ull);
        return result->status = FLARE_ERR_INVALID_ARGUMENT;
    }
    /* The one critical section that makes first-wins hold: the check, the
     * queued state and the request record change together, so no second
     * requester can see "idle" after the first has claimed the slot, and no
     * request can overwrite another. */
    pthread_mutex_lock(&coordinator->state_lock);
    deepwin_state state = get_state(coordinator);
    if (state != DEEPWIN_IDLE) {
        char holder[DEEPWIN_LABEL_MAX + 32];
        describe_token(&coordinator->current.token, holder, sizeof(holder));
        result->window_id = coordinator->current.id;
        snprintf(result->message, sizeof(result->message), "busy: window %llu %s by %s",
                 (unsigned long long)coordinator->current.id, state_word(state), holder);
        pthread_mutex_unlock(&coordinator->state_lock);
        return result->status = FLARE_ERR_STATE;
    }
    deepwin_record *record = &coordinator->current;
    memset(record, 0, sizeof(*record));
    record->id = ++coordinator->next_id;
    record->token = *token;
    record->token.label[DEEPWIN_LABEL_MAX - 1] = '\0';
    record->bounds = *bounds;
    if (cause != NULL) {
        record->has_cause = 1;
        record->cause = *cause;
        record->cause.rule_text[DEEPWIN_RULE_TEXT_MAX - 1] = '\0';
        record->cause.comparison[sizeof(record->cause.comparison) - 1] = '\0';
    }
    record->requested_ns = now_ns;
    coordinator->current_engine = choose_engine(coordinator, record);
    snprintf(record->engine, sizeof(record->engine), "%s",
             coordinator->current_engine != NULL ? coordinator->current_engine->name : "none");
    coordinator->close_requested = NULL;
    set_state(coordinator, DEEPWIN_PENDING);
    atomic_fetch_add_explicit(&coordinator->queued_total, 1, memory_order_relaxed);
    result->window_id = record->id;
    snprintf(result->message, sizeof(result->message), "queued: window %llu",
             (unsigned long long)record->id);
    pthread_mutex_unlock(&coordinator->state_lock);
    return result->status = FLARE_OK;
}

int deepwin_request_close(deepwin_coordinator *coordinator, const char *reason, uint64_t *window_id)
{
    if (coordinator == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&coordinator->state_lock);
    deepwin_state state = get_state(coordinator);
    int status = FLARE_ERR_STATE;
    if (state == DEEPWIN_PENDING || state == DEEPWIN_OPEN) {
        /* The first close reason sticks: a later one does not rename it. */
        if (coordinator->close_requested == NULL)
            coordinator->close_requested = reason != NULL ? reason : DEEPWIN_CLOSE_MANUAL;
        if (window_id != NULL)
            *window_id = coordinator->current.id;
        status = FLARE_OK;
    } else if (state == DEEPWIN_CLOSING && window_id != NULL) {
        *window_id = coordinator->current.id;
        status = FLARE_OK; /* already on its way out */
    }
    pthread_mutex_unlock(&coordinator->state_lock);
    return status;
}

/* state_lock held: queues a finished record and makes the coordinator idle. */
static void finish(deepwin_coordinator *coordinator, const deepwin_record *record)
{
    coordinator->last_finished = *record;
    uint32_t capacity = coordinator->config.record_capacity;
    if (coordinator->record_count == capacity) {
        atomic_fetch_add_explicit(&coordinator->record_drops, 1, memory_order_relaxed);
    } else {
        uint32_t slot = (coordinator->record_head + coordinator->record_count) % capacity;
        coordinator->records[slot] = *record;
        coordinator->record_count++;
    }
    coordinator->close_requested = NULL;
    set_state(coordinator, DEEPWIN_IDLE);
}

/* beat_lock held, state_lock not: arms engine (NULL: none) for record.
 * FLARE_OK, BACKEND_ENGINE_BUSY / NOT_READY or an error, with reason. */
static int arm_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine,
                      const deepwin_record *record, uint64_t now_ns,
                      char reason[DEEPWIN_REASON_MAX])
{
    if (engine == NULL)
        return FLARE_OK;
    backend_engine_config engine_config = {
        .sample_interval_ns = 0, .label = record->token.label, .window_id = record->id};
    int status =
        engine->arm(coordinator->config.device, &engine_config, now_ns, reason, DEEPWIN_REASON_MAX);
    if (status != FLARE_OK && reason[0] == '\0')
        snprintf(reason, DEEPWIN_REASON_MAX, "%s: %s", engine->name, flare_strerror(status));
    return status;
}

/* beat_lock held, state_lock not: arms the pending window. */
static void open_pending(deepwin_coordinator *coordinator, uint64_t now_ns, uint64_t launches)
{
    pthread_mutex_lock(&coordinator->state_lock);
    deepwin_record record = coordinator->current;
    deepwin_auto_choice choice = coordinator->current_auto;
    const char *cancelled = coordinator->close_requested;
    if (cancelled != NULL) {
        /* Closed before it opened: nothing was armed, nothing to disarm. */
        snprintf(record.close_reason, sizeof(record.close_reason), "%s", DEEPWIN_CLOSE_CANCELLED);
        snprintf(record.engine_status, sizeof(record.engine_status), "none");
        record.closed_ns = now_ns;
        finish(coordinator, &record);
        pthread_mutex_unlock(&coordinator->state_lock);
        return;
    }
    pthread_mutex_unlock(&coordinator->state_lock);

    /* Still PENDING while the engine arms: requesters keep seeing busy. A
     * PC sampling or SASS metrics engine turned down by the lease (a PM engine or another
     * tool holds the device) gives way to the PM engine; for an auto
     * window only when PM sampling is within the deep budget. An auto
     * window that no engine fits is refused without arming anything: its
     * engine_reason (choose_auto) says why. */
    const backend_engine_ops *engine = coordinator->current_engine;
    int is_auto = record.token.engine == DEEPWIN_ENGINE_AUTO;
    char reason[DEEPWIN_REASON_MAX] = "", pc_busy[DEEPWIN_REASON_MAX] = "";
    int status = is_auto && choice.refused
                     ? FLARE_ERR_UNSUPPORTED
                     : arm_engine(coordinator, engine, &record, now_ns, reason);
    int pc_turned_down =
        status == BACKEND_ENGINE_BUSY && engine != NULL &&
        (engine == coordinator->config.pc_engine || engine == coordinator->config.sass_engine) &&
        coordinator->config.engine != NULL;
    const char *busy_kind = engine == coordinator->config.sass_engine ? "sass" : "pc";
    if (pc_turned_down && (!is_auto || choice.fallback_fits)) {
        snprintf(pc_busy, sizeof(pc_busy), "%s", reason);
        reason[0] = '\0';
        engine = coordinator->config.engine;
        status = arm_engine(coordinator, engine, &record, now_ns, reason);
    } else if (pc_turned_down) {
        char percent[32];
        deepwin_auto_format_percent(choice.fallback_estimate, percent, sizeof(percent));
        size_t used = strnlen(reason, sizeof(reason));
        if (choice.fallback_unusable != NULL)
            snprintf(reason + used, sizeof(reason) - used, "; pm: %.120s: no fallback",
                     choice.fallback_unusable);
        else if (choice.fallback_estimate < 0)
            snprintf(reason + used, sizeof(reason) - used, "; pm: cost not measured: no fallback");
        else
            snprintf(reason + used, sizeof(reason) - used,
                     "; pm about %s%% is over the budget: no fallback", percent);
    }

    pthread_mutex_lock(&coordinator->state_lock);
    deepwin_record *current = &coordinator->current;
    if (pc_busy[0] != '\0') {
        coordinator->current_engine = engine;
        snprintf(current->engine, sizeof(current->engine), "%s", engine->name);
        if (is_auto) {
            char percent[32], busy[DEEPWIN_REASON_MAX];
            deepwin_auto_format_percent(choice.fallback_estimate, percent, sizeof(percent));
            snprintf(busy, sizeof(busy), "%s busy: %.120s; fell back to pm, about %s%%", busy_kind,
                     pc_busy, percent);
            set_engine_reason(current, busy);
        } else {
            snprintf(current->engine_reason, sizeof(current->engine_reason),
                     "asked for %s: %.200s; fell back to pm", busy_kind, pc_busy);
        }
    }
    if (status == BACKEND_ENGINE_BUSY || status == BACKEND_ENGINE_NOT_READY) {
        /* Another context holds the device, or the engine is still being
         * set up: the window runs without the engine (nothing to disarm)
         * and says why. */
        snprintf(current->engine_status, sizeof(current->engine_status), "%s",
                 status == BACKEND_ENGINE_BUSY ? "busy" : "preparing");
        set_engine_reason(current, reason);
        current->opened_ns = now_ns;
        coordinator->launches_at_open = launches;
        set_state(coordinator, DEEPWIN_OPEN);
        atomic_fetch_add_explicit(&coordinator->opened_total, 1, memory_order_relaxed);
    } else if (status != FLARE_OK) {
        snprintf(current->engine_status, sizeof(current->engine_status), "refused");
        current->over_budget = is_auto && choice.over_budget;
        set_engine_reason(current, reason);
        snprintf(current->close_reason, sizeof(current->close_reason), "%s", DEEPWIN_CLOSE_REFUSED);
        current->closed_ns = now_ns;
        deepwin_record finished = *current;
        finish(coordinator, &finished);
    } else {
        snprintf(current->engine_status, sizeof(current->engine_status), "%s",
                 engine != NULL ? "armed" : "none");
        current->opened_ns = now_ns;
        coordinator->launches_at_open = launches;
        set_state(coordinator, DEEPWIN_OPEN);
        atomic_fetch_add_explicit(&coordinator->opened_total, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&coordinator->state_lock);
}

/* beat_lock held, state_lock not; the window is OPEN. Disarms and records. */
static void close_open(deepwin_coordinator *coordinator, const char *reason, uint64_t now_ns,
                       uint64_t launches)
{
    pthread_mutex_lock(&coordinator->state_lock);
    set_state(coordinator, DEEPWIN_CLOSING);
    uint64_t launches_at_open = coordinator->launches_at_open;
    int armed = strcmp(coordinator->current.engine_status, "armed") == 0;
    pthread_mutex_unlock(&coordinator->state_lock);

    backend_engine_result engine_result = {0};
    int status = FLARE_OK;
    if (armed)
        status =
            coordinator->current_engine->disarm(coordinator->config.device, now_ns, &engine_result);

    pthread_mutex_lock(&coordinator->state_lock);
    deepwin_record *current = &coordinator->current;
    /* Never before the open (see deepwin_tick on a now_ns read early). */
    current->closed_ns = now_ns >= current->opened_ns ? now_ns : current->opened_ns;
    current->launches = launches >= launches_at_open ? launches - launches_at_open : 0;
    current->engine_samples = engine_result.samples;
    /* A closed window says what became of its engine: "armed" is only
     * ever seen while the window is open. */
    if (armed && status != FLARE_OK) {
        snprintf(current->engine_status, sizeof(current->engine_status), "disarm failed");
        char failed[256];
        snprintf(failed, sizeof(failed), "disarm failed: %s",
                 engine_result.reason[0] != '\0' ? engine_result.reason : flare_strerror(status));
        set_engine_reason(current, failed);
    } else if (armed) {
        snprintf(current->engine_status, sizeof(current->engine_status), "disarmed");
    }
    snprintf(current->close_reason, sizeof(current->close_reason), "%s", reason);
    deepwin_record finished = *current;
    finish(coordinator, &finished);
    pthread_mutex_unlock(&coordinator->state_lock);
}

void deepwin_tick(deepwin_coordinator *coordinator, uint64_t now_ns, uint64_t launches_so_far)
{
    pthread_mutex_lock(&coordinator->beat_lock);
    double rate = deepwin_rate_note(&coordinator->rate, now_ns, launches_so_far);
    /* A beat that adds nothing (a timer's tick that read its clock first)
     * leaves the rate as it was. */
    if (rate >= 0)
        atomic_store_explicit(&coordinator->launch_rate_milli, (uint64_t)(rate * 1000.0 + 0.5),
                              memory_order_relaxed);
    if (get_state(coordinator) == DEEPWIN_PENDING)
        open_pending(coordinator, now_ns, launches_so_far);
    if (get_state(coordinator) == DEEPWIN_OPEN) {
        pthread_mutex_lock(&coordinator->state_lock);
        const deepwin_record *current = &coordinator->current;
        const char *reason = coordinator->close_requested;
        /* Bounds are checked on the beat, so a window overshoots its bound
         * by at most one beat; the record keeps the real close time. */
        /* now_ns may predate the open by a little: a timed window
         * (deepwin_timer.h) opens on its own thread between the beat's
         * reading of the clock and its tick. Not yet open that long, then. */
        if (reason == NULL && now_ns >= current->opened_ns &&
            now_ns - current->opened_ns >= current->bounds.max_duration_ns)
            reason = DEEPWIN_CLOSE_DURATION;
        if (reason == NULL && current->bounds.max_launches != 0 &&
            launches_so_far >= coordinator->launches_at_open &&
            launches_so_far - coordinator->launches_at_open >= current->bounds.max_launches)
            reason = DEEPWIN_CLOSE_LAUNCHES;
        pthread_mutex_unlock(&coordinator->state_lock);
        if (reason != NULL)
            close_open(coordinator, reason, now_ns, launches_so_far);
    }
    pthread_mutex_unlock(&coordinator->beat_lock);
}

/* Runs the engines' serve hooks (work waiting for an application
 * thread's launch; nothing on flare's threads). */
static void serve_engines(deepwin_coordinator *coordinator)
{
    pthread_mutex_lock(&coordinator->state_lock);
    const backend_engine_ops *engines[3] = {
        coordinator->config.engine, coordinator->config.pc_engine, coordinator->config.sass_engine};
    pthread_mutex_unlock(&coordinator->state_lock);
    for (size_t i = 0; i < 3; i++)
        if (engines[i] != NULL && engines[i]->serve != NULL)
            engines[i]->serve();
}

/* Takes beat_lock. A close in progress on another thread may be waiting
 * for a launch of the program's (CUDA PC sampling's stop is made at the
 * program's next launch): when this caller is the program's thread at its
 * end (it launches no more), the engines' serve runs that stop here
 * meanwhile; on flare's own threads serve does nothing. Without it, a
 * window whose duration ran out as the program exited waited out the
 * stop's bound and failed (1 run in 22 on the H200, session 17). */
static void beat_lock_serving(deepwin_coordinator *coordinator)
{
    while (pthread_mutex_trylock(&coordinator->beat_lock) != 0) {
        serve_engines(coordinator);
        struct timespec pause = {.tv_sec = 0, .tv_nsec = 200000L};
        nanosleep(&pause, NULL);
    }
}

void deepwin_close_now(deepwin_coordinator *coordinator, const char *reason, uint64_t now_ns,
                       uint64_t launches_so_far)
{
    beat_lock_serving(coordinator);
    /* And once more: a stop an earlier close left posted for a launch that
     * will not come now (the program ends) is made here. */
    serve_engines(coordinator);
    deepwin_state state = get_state(coordinator);
    if (state == DEEPWIN_OPEN) {
        close_open(coordinator, reason, now_ns, launches_so_far);
    } else if (state == DEEPWIN_PENDING) {
        pthread_mutex_lock(&coordinator->state_lock);
        deepwin_record record = coordinator->current;
        snprintf(record.close_reason, sizeof(record.close_reason), "%s", reason);
        snprintf(record.engine_status, sizeof(record.engine_status), "none");
        record.closed_ns = now_ns;
        finish(coordinator, &record);
        pthread_mutex_unlock(&coordinator->state_lock);
    }
    pthread_mutex_unlock(&coordinator->beat_lock);
}

int deepwin_blackout_active(const deepwin_coordinator *coordinator)
{
    return get_state(coordinator) != DEEPWIN_IDLE;
}

/* Sets *slot (one of coordinator->config's engines) while no window is
 * in flight. */
static int set_engine_of(deepwin_coordinator *coordinator, const backend_engine_ops **slot,
                         const backend_engine_ops *engine)
{
    pthread_mutex_lock(&coordinator->beat_lock);
    pthread_mutex_lock(&coordinator->state_lock);
    int status = FLARE_ERR_STATE;
    if (get_state(coordinator) == DEEPWIN_IDLE) {
        *slot = engine;
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&coordinator->state_lock);
    pthread_mutex_unlock(&coordinator->beat_lock);
    return status;
}

int deepwin_set_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine)
{
    return set_engine_of(coordinator, &coordinator->config.engine, engine);
}

int deepwin_set_pc_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine)
{
    return set_engine_of(coordinator, &coordinator->config.pc_engine, engine);
}

int deepwin_set_sass_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine)
{
    return set_engine_of(coordinator, &coordinator->config.sass_engine, engine);
}

void deepwin_set_budget(deepwin_coordinator *coordinator, double budget)
{
    pthread_mutex_lock(&coordinator->state_lock);
    coordinator->config.budget = budget == 0 ? DEEPWIN_BUDGET_DEFAULT : budget;
    pthread_mutex_unlock(&coordinator->state_lock);
}

void deepwin_reset_launch_rate(deepwin_coordinator *coordinator)
{
    pthread_mutex_lock(&coordinator->beat_lock);
    memset(&coordinator->rate, 0, sizeof(coordinator->rate));
    atomic_store_explicit(&coordinator->launch_rate_milli, 0, memory_order_relaxed);
    pthread_mutex_unlock(&coordinator->beat_lock);
}

double deepwin_launch_rate(const deepwin_coordinator *coordinator)
{
    return (double)atomic_load_explicit(&coordinator->launch_rate_milli, memory_order_relaxed) /
           1000.0;
}

void deepwin_prepare_engine(deepwin_coordinator *coordinator)
{
    pthread_mutex_lock(&coordinator->state_lock);
    const backend_engine_ops *engine = coordinator->config.engine;
    int device = coordinator->config.device;
    pthread_mutex_unlock(&coordinator->state_lock);
    if (engine != NULL && engine->prepare != NULL)
        engine->prepare(device);
}

deepwin_state deepwin_current_state(const deepwin_coordinator *coordinator)
{
    return get_state(coordinator);
}

uint64_t deepwin_queued_count(const deepwin_coordinator *coordinator)
{
    return atomic_load_explicit(&coordinator->queued_total, memory_order_relaxed);
}

uint64_t deepwin_opened_count(const deepwin_coordinator *coordinator)
{
    return atomic_load_explicit(&coordinator->opened_total, memory_order_relaxed);
}

int deepwin_lookup(deepwin_coordinator *coordinator, uint64_t window_id, deepwin_state *state,
                   deepwin_record *record)
{
    int status = FLARE_ERR_NOT_FOUND;
    pthread_mutex_lock(&coordinator->state_lock);
    deepwin_state now = get_state(coordinator);
    if (now != DEEPWIN_IDLE && coordinator->current.id == window_id) {
        *state = now;
        if (record != NULL)
            *record = coordinator->current;
        status = FLARE_OK;
    } else if (coordinator->last_finished.id == window_id && window_id != 0) {
        *state = DEEPWIN_IDLE;
        if (record != NULL)
            *record = coordinator->last_finished;
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&coordinator->state_lock);
    return status;
}

size_t deepwin_take_records(deepwin_coordinator *coordinator, deepwin_record *out, size_t max)
{
    pthread_mutex_lock(&coordinator->state_lock);
    size_t taken = 0;
    while (taken < max && coordinator->record_count > 0) {
        out[taken++] = coordinator->records[coordinator->record_head];
        coordinator->record_head =
            (coordinator->record_head + 1) % coordinator->config.record_capacity;
        coordinator->record_count--;
    }
    pthread_mutex_unlock(&coordinator->state_lock);
    return taken;
}

uint64_t deepwin_record_drops(const deepwin_coordinator *coordinator)
{
    return atomic_load_explicit(&coordinator->record_drops, memory_order_relaxed);
}
