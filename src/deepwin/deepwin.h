/*
 * deepwin.h: the deep-profiling window coordinator.
 *
 * A window is a short, bounded stretch of time during which a deep engine
 * (backend_engine_ops: PM sampling on a GPU, the simulated engine here) is
 * armed. Rules, the application (flare_window_open) and a schedule
 * (--deep-after/--deep-for) ask for windows; the coordinator decides.
 *
 * At most ONE window exists at a time per process, across all devices.
 * Per process rather than per device because a process-wide window keeps
 * attribution simple (everything the process did between open and close is
 * "inside"), because the engines it arms are device-wide anyway (PM sampling
 * sees every context on the GPU, so two windows on one device would overlap
 * regardless), and because the evaluator's blackout (readings taken while a
 * window is open are discarded) is then one flag instead of one per device.
 *
 * States: IDLE -> PENDING (queued) -> OPEN -> CLOSING -> IDLE. A request moves
 * IDLE to PENDING; the coordinator's beat (deepwin_tick, from the collector's
 * loop) arms the engine and moves PENDING to OPEN, or, when arming fails,
 * back to IDLE with a "refused" record: a refused request never becomes open.
 * The beat closes an open window on its duration bound, its launch bound or
 * a manual close request; deepwin_close_now closes at session end.
 *
 * First wins: the state check, the queued state and the request record are
 * claimed in one critical section, so of racing requests exactly one is
 * queued and every other gets a "busy" answer naming the window in the way.
 * A losing request changes nothing and costs its requester nothing.
 *
 * Threads: deepwin_request_open, deepwin_request_close, deepwin_blackout_active
 * and deepwin_state may be called from any thread (a mutex, never on a hot
 * path; blackout and state are one atomic load). deepwin_tick and
 * deepwin_close_now are the beat: they arm and disarm the engine, outside the
 * state mutex, serialised by a second mutex so engine calls never overlap.
 * The coordinator reads no clock: time comes in as now_ns.
 *
 * Engine auto (DEEPWIN_ENGINE_AUTO): a request may leave the engine to the
 * coordinator, which picks at request time the deepest engine (pc, then pm)
 * whose measured cost at the launch rate the beat has seen over about the
 * last second fits the deep budget (deepwin_auto.h), or refuses the window
 * through the ordinary refused path, saying why; it never picks an engine
 * whose cost was not measured.
 *
 * It must never arm an engine twice, never report a refused window as open,
 * and never grow: finished records wait in a fixed queue (overflow counted).
 */
#ifndef FLARE_DEEPWIN_DEEPWIN_H
#define FLARE_DEEPWIN_DEEPWIN_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

typedef enum deepwin_state {
    DEEPWIN_IDLE = 0,
    DEEPWIN_PENDING = 1, /* queued; the next beat arms the engine */
    DEEPWIN_OPEN = 2,
    DEEPWIN_CLOSING = 3, /* the beat is disarming the engine */
} deepwin_state;

typedef enum deepwin_token_kind {
    DEEPWIN_TOKEN_RULE = 1,
    DEEPWIN_TOKEN_MANUAL = 2,
    DEEPWIN_TOKEN_SCHEDULED = 3,
} deepwin_token_kind;

#define DEEPWIN_LABEL_MAX     64
#define DEEPWIN_RULE_TEXT_MAX 256
#define DEEPWIN_REASON_MAX    256
#define DEEPWIN_MESSAGE_MAX   256

/* The deep engine a window asks for: PM sampling (the default; how busy
 * the GPU was), PC sampling (where in its kernels warps stalled), SASS
 * metrics (how often each instruction ran, exactly), or auto: the deepest
 * (sass, pc, pm) whose estimated cost at the process's launch rate is
 * within the deep budget (deepwin_auto.h). A window whose engine the
 * coordinator has none of falls back to PM sampling, and its engine_reason
 * says so; an auto window that no engine fits is refused, saying why. */
typedef enum deepwin_engine_kind {
    DEEPWIN_ENGINE_PM = 0,
    DEEPWIN_ENGINE_PC = 1,
    DEEPWIN_ENGINE_AUTO = 2,
    DEEPWIN_ENGINE_SASS = 3, /* after auto: the values are kept as they were */
    DEEPWIN_ENGINE_KINDS
} deepwin_engine_kind;

/* Who asks. The evaluator tells its own windows apart by kind and rule id,
 * so a manual or scheduled window never spends a rule's budget; cookie is
 * the requester's own value, returned untouched in the record. */
typedef struct deepwin_token {
    deepwin_token_kind kind;
    uint32_t rule_id;              /* RULE only */
    uint64_t cookie;               /* the caller's; the coordinator never reads it */
    char label[DEEPWIN_LABEL_MAX]; /* manual label, "deep-after 30s", rule name... */
    deepwin_engine_kind engine;    /* the engine asked for (0: PM sampling) */
} deepwin_token;

/* Longest window anyone may ask for: a deep engine is expensive. */
#define DEEPWIN_DURATION_MAX_NS (600ull * 1000000000ull)

typedef struct deepwin_bounds {
    uint64_t max_duration_ns; /* 1..DEEPWIN_DURATION_MAX_NS; every window has one */
    uint64_t max_launches;    /* 0: no launch bound */
} deepwin_bounds;

/* Why a rule asked, recorded with its window (filled by the evaluator). */
typedef struct deepwin_cause {
    char rule_text[DEEPWIN_RULE_TEXT_MAX];
    char comparison[8];
    double threshold;
    uint64_t rate_window_ns;
    uint64_t sustained_ns;
    uint64_t first_true_ns;
    double observed_value;
    int observed_partial; /* the observed value came from a truncated window */
} deepwin_cause;

/* A finished window (or refused request), as the store will keep it. */
typedef struct deepwin_record {
    uint64_t id;
    deepwin_token token;
    deepwin_bounds bounds;
    int has_cause;
    deepwin_cause cause;
    uint64_t requested_ns;
    uint64_t opened_ns; /* 0: never opened */
    uint64_t closed_ns;
    char close_reason[32];
    uint64_t launches; /* counted while open */
    char engine[32];
    /* "armed" (only while open), then "disarmed" or "disarm failed" once
     * closed; "refused", "none", or "busy" / "preparing" (ran without the
     * engine: another context held the device / it was still being set up).
     * docs/windows.md lists every one. */
    char engine_status[16];
    char engine_reason[DEEPWIN_REASON_MAX];
    uint64_t engine_samples;
    /* Refused because, for engine auto, no engine fitted the deep budget at
     * the launch rate of its request: a refusal of the moment, not of the
     * engines (a rule may ask again). */
    int over_budget;
} deepwin_record;

/* Close reasons, stored as text. */
#define DEEPWIN_CLOSE_DURATION    "duration"
#define DEEPWIN_CLOSE_LAUNCHES    "launches"
#define DEEPWIN_CLOSE_MANUAL      "manual"
#define DEEPWIN_CLOSE_SESSION_END "session end"
#define DEEPWIN_CLOSE_REFUSED     "refused"
#define DEEPWIN_CLOSE_CANCELLED   "cancelled" /* closed while still queued */

typedef struct deepwin_coordinator deepwin_coordinator;

typedef struct deepwin_config {
    const backend_engine_ops *engine; /* NULL: windows open with no engine ("none") */
    /* The PC sampling engine, for windows that ask for pc; NULL: none on
     * this backend yet (they fall back to engine). */
    const backend_engine_ops *pc_engine;
    /* The SASS metrics engine, for windows that ask for sass; NULL: none
     * (they fall back to engine). */
    const backend_engine_ops *sass_engine;
    int device;               /* the engine's device; -1: every device */
    uint32_t record_capacity; /* finished records held until taken; 0: 64 */
    /* The deep budget of auto windows: the slowdown they may cost, a
     * fraction (0.05: 5%). 0: DEEPWIN_BUDGET_DEFAULT; negative: none valid
     * (a malformed FLARE_DEEP_BUDGET), and every auto window is refused. */
    double budget;
} deepwin_config;

/* 0 with *out set, FLARE_ERR_INVALID_ARGUMENT or FLARE_ERR_NO_MEMORY. */
int deepwin_create(const deepwin_config *config, deepwin_coordinator **out);
/* Frees the coordinator; an armed engine is left as it is (close first). */
void deepwin_destroy(deepwin_coordinator *coordinator);

typedef struct deepwin_request_result {
    int status;         /* FLARE_OK (queued), FLARE_ERR_STATE (busy), FLARE_ERR_INVALID_ARGUMENT */
    uint64_t window_id; /* the queued window's id; when busy, the window in the way */
    char message[DEEPWIN_MESSAGE_MAX]; /* "busy: window 3 open by rule 2 (...)" */
} deepwin_request_result;

/*
 * Asks for a window. First wins: queued (FLARE_OK) only when no window is
 * pending, open or closing; otherwise FLARE_ERR_STATE and a "busy" message
 * naming the window and its token, and nothing changes. cause may be NULL.
 * Returns result->status; result may be NULL.
 */
int deepwin_request_open(deepwin_coordinator *coordinator, const deepwin_token *token,
                         const deepwin_bounds *bounds, const deepwin_cause *cause, uint64_t now_ns,
                         deepwin_request_result *result);

/* Asks the beat to close the current window (queued or open) with reason
 * (a static string). FLARE_ERR_STATE when there is none. *window_id (may be
 * NULL) names it. */
int deepwin_request_close(deepwin_coordinator *coordinator, const char *reason,
                          uint64_t *window_id);

/* The beat: arms a pending window, closes an open one whose bound is
 * reached or whose close was asked for. launches_so_far is a cumulative
 * launch count (any origin; only differences matter); the beat also keeps
 * the launch rate auto windows are chosen at (deepwin_launch_rate). */
void deepwin_tick(deepwin_coordinator *coordinator, uint64_t now_ns, uint64_t launches_so_far);

/* Closes whatever exists now with reason (session end): an open window is
 * disarmed and recorded, a queued one recorded as never opened. While
 * another thread's close holds the coordinator, serves the engines (their
 * serve hook: a stop that waits for this thread's launch). */
void deepwin_close_now(deepwin_coordinator *coordinator, const char *reason, uint64_t now_ns,
                       uint64_t launches_so_far);

/* Replaces the engine from the next window on (the CUDA engine is chosen
 * after the session, and so the coordinator, already exist). FLARE_OK, or
 * FLARE_ERR_STATE while a window is pending, open or closing (the engine
 * that armed it must be the one that disarms it). */
int deepwin_set_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine);
/* The same for the PC sampling engine of windows that ask for pc, and the
 * SASS metrics engine of windows that ask for sass. */
int deepwin_set_pc_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine);
int deepwin_set_sass_engine(deepwin_coordinator *coordinator, const backend_engine_ops *engine);
/* Replaces the deep budget of auto windows from the next request on (as
 * deepwin_config.budget: 0 is the default, negative refuses them). */
void deepwin_set_budget(deepwin_coordinator *coordinator, double budget);
/* Forgets the launch rate (a new session's beat starts afresh). */
void deepwin_reset_launch_rate(deepwin_coordinator *coordinator);
/* The process's kernel launch rate over about the last second, as the beat
 * saw it (launches per second; 0 before two beats). One atomic load. */
double deepwin_launch_rate(const deepwin_coordinator *coordinator);
/* "pm", "pc", "sass", "auto"; "?" when unknown. */
const char *deepwin_engine_kind_name(deepwin_engine_kind kind);
/* The kind named name ("pm", "pc", "sass" or "auto"): 0 with *kind set,
 * else -1. */
int deepwin_engine_kind_parse(const char *name, deepwin_engine_kind *kind);
/* Asks the engine windows arm to get ready for one (its optional prepare
 * op), outside every lock of the coordinator: for a window known to be
 * coming, such as a request for a later time. Returns at once. */
void deepwin_prepare_engine(deepwin_coordinator *coordinator);

/* True while a window is pending, open or closing: the evaluator discards
 * readings then, whoever opened the window. One atomic load. */
int deepwin_blackout_active(const deepwin_coordinator *coordinator);
deepwin_state deepwin_current_state(const deepwin_coordinator *coordinator);
/* Windows ever queued and ever opened. Monotonic: a window that opens and
 * closes between two looks of the evaluator still moves them. */
uint64_t deepwin_queued_count(const deepwin_coordinator *coordinator);
uint64_t deepwin_opened_count(const deepwin_coordinator *coordinator);

/* Where a request stands: DEEPWIN_PENDING while queued, DEEPWIN_OPEN while
 * open, DEEPWIN_IDLE once finished (then *record, which may be NULL, is a
 * copy of its record if still held). FLARE_ERR_NOT_FOUND for an id the
 * coordinator no longer knows. */
int deepwin_lookup(deepwin_coordinator *coordinator, uint64_t window_id, deepwin_state *state,
                   deepwin_record *record);

/* Moves up to max finished records into out, oldest first; returns how many. */
size_t deepwin_take_records(deepwin_coordinator *coordinator, deepwin_record *out, size_t max);
/* Records lost because the queue was full when a window finished. */
uint64_t deepwin_record_drops(const deepwin_coordinator *coordinator);

/* "rule", "manual", "scheduled". */
const char *deepwin_token_kind_name(deepwin_token_kind kind);

#endif /* FLARE_DEEPWIN_DEEPWIN_H */
