/*
 * features.c: flare's features as session participants (participants.h),
 * and the orders they run in.
 *
 * The one place that names every feature's session functions. Each
 * adapter translates the session's hooks into a feature's own calls and
 * hands a feature the backend tables it needs from the session's backend
 * descriptor, so features never look a backend up themselves. Orders are
 * explicit because the phases differ: windows begin before rules (a rule
 * probes the coordinator's engine when it is added), but rules beat before
 * windows (a window a rule asks for is armed on the same beat). Must never
 * hold state of its own beyond what an order needs.
 */
#include "session/participants.h"

#include <stddef.h>

#include "counters/counters_session.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pcsamp/pc_session.h"
#include "pm/pm_replay.h"
#include "pm/pm_session.h"
#include "recorder/recorder.h"
#include "replay/replay.h"
#include "rules/rules_session.h"
#include "storm/storm_completions.h"
#include "deepwin/deepwin_session.h"
#include "deepwin/deepwin_watch.h"

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* ---- Application counters ---- */

static int counters_begin(const session_start *start)
{
    (void)start;
    counters_session_begin();
    return FLARE_OK;
}

static void counters_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    /* Scopes opened across threads and never closed are stored open. */
    counters_scope_handles_end_session(database, pid, generation, end_ns);
}

static const session_participant counters = {
    .name = "counters",
    .begin = counters_begin,
    .cancel = counters_session_end,
    .batch = counters_session_write,
    .committed = counters_session_committed,
    .stop = counters_session_end,
    .end = counters_end,
};

/* ---- Deep-profiling windows ---- */

static const backend_engine_ops *deep_engine_of(const backend_descriptor *backend)
{
    return backend->deep_engine != NULL ? backend->deep_engine() : NULL;
}

static const backend_engine_ops *pc_deep_engine_of(const backend_descriptor *backend)
{
    return backend->pc_deep_engine != NULL ? backend->pc_deep_engine() : NULL;
}

static const backend_engine_ops *sass_deep_engine_of(const backend_descriptor *backend)
{
    return backend->sass_deep_engine != NULL ? backend->sass_deep_engine() : NULL;
}

static int deepwin_begin(const session_start *start)
{
    deepwin_session_set_pc_engine(pc_deep_engine_of(start->backend));
    deepwin_session_set_sass_engine(sass_deep_engine_of(start->backend));
    deepwin_session_begin(start->now_ns, deep_engine_of(start->backend));
    return FLARE_OK;
}

static void deepwin_backend_started(const backend_descriptor *backend)
{
    deepwin_session_set_engine(deep_engine_of(backend));
    deepwin_session_set_pc_engine(pc_deep_engine_of(backend));
    deepwin_session_set_sass_engine(sass_deep_engine_of(backend));
}

static void deepwin_beat(const session_beat *beat)
{
    deepwin_session_beat(beat->store, beat->pid, beat->now_ns);
}

static void deepwin_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    (void)generation;
    deepwin_session_end(database, pid, end_ns);
}

static const session_participant deepwin = {
    .name = "deep windows",
    .begin = deepwin_begin,
    .cancel = deepwin_session_cancel,
    .backend_started = deepwin_backend_started,
    .beat = deepwin_beat,
    .end = deepwin_end,
};

/* ---- Windows asked for from outside: flare window open ---- */

static int window_control_begin(const session_start *start)
{
    (void)start;
    deepwin_watch_begin();
    return FLARE_OK;
}

static void window_control_beat(const session_beat *beat)
{
    deepwin_watch_beat(beat->store, beat->pid, beat->now_ns);
}

static void window_control_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    (void)generation;
    (void)end_ns;
    deepwin_watch_end(database, pid);
}

static const session_participant window_control = {
    .name = "window control",
    .begin = window_control_begin,
    .cancel = deepwin_watch_stop,
    .beat = window_control_beat,
    /* Its timer thread stops with the collector, before the windows close. */
    .stop = deepwin_watch_stop,
    .end = window_control_end,
};

/* ---- Rules ---- */

static int rules_begin(const session_start *start)
{
    rules_session_begin(start->now_ns);
    return FLARE_OK;
}

static void rules_beat(const session_beat *beat)
{
    rules_session_beat(beat->store, beat->pid, beat->now_ns);
}

static void rules_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    (void)generation;
    rules_session_end(database, pid, end_ns);
}

static const session_participant rules = {
    .name = "rules",
    .begin = rules_begin,
    .cancel = rules_session_cancel,
    .beat = rules_beat,
    .end = rules_end,
    .kernel = rules_session_kernel,
    .metric = rules_session_metric,
};

/* ---- PM sampling: collection and attribution ---- */

static int pm_begin(const session_start *start)
{
    (void)start;
    pm_session_begin();
    return FLARE_OK;
}

static void pm_backend_started(const backend_descriptor *backend)
{
    struct pm_engine *engine = backend->pm_engine != NULL ? backend->pm_engine() : NULL;
    if (engine != NULL)
        pm_session_register_engine(engine);
    if (backend->open_scopes != NULL)
        pm_session_set_open_scope_source(backend->open_scopes, NULL);
}

static void pm_beat(const session_beat *beat)
{
    pm_session_beat(beat->store, beat->pid, beat->now_ns, beat->rings_drained);
}

static void pm_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    (void)generation;
    pm_session_end(database, pid, end_ns);
}

static void pm_scope_closed(const session_scope *scope)
{
    pm_session_scope_closed(scope->start_ns, scope->end_ns, scope->instance_id, scope->depth,
                            scope->thread_id, scope->name);
}

static const session_participant pm = {
    .name = "pm",
    .begin = pm_begin,
    .cancel = pm_session_cancel,
    .backend_started = pm_backend_started,
    .beat = pm_beat,
    .end = pm_end,
    .scope_closed = pm_scope_closed,
};

/* ---- PC sampling and SASS metrics: the aggregates of windows that asked
 * for pc or sass ---- */

static void pc_register(const backend_descriptor *backend)
{
    struct pc_engine *engine = backend->pc_engine != NULL ? backend->pc_engine() : NULL;
    if (engine != NULL && pc_session_register_engine(engine) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "PC sampling: too many engines; this one's samples are lost");
    struct pc_engine *sass = backend->sass_engine != NULL ? backend->sass_engine() : NULL;
    if (sass != NULL && pc_session_register_engine(sass) != FLARE_OK)
        core_log(CORE_LOG_WARNING, "SASS metrics: too many engines; this one's values are lost");
}

static int pc_begin(const session_start *start)
{
    pc_session_begin();
    pc_register(start->backend);
    return FLARE_OK;
}

static void pc_batch(store *database, int64_t pid, uint64_t now_ns)
{
    (void)now_ns;
    pc_session_batch(database, pid);
}

static void pc_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    (void)generation;
    (void)end_ns;
    pc_session_end(database, pid);
}

static const session_participant pc = {
    .name = "pc",
    .begin = pc_begin,
    .backend_started = pc_register,
    .batch = pc_batch,
    .committed = pc_session_committed,
    .end = pc_end,
};

/* ---- The launch-storm guard over the simulated device's work ---- */

static int storm_begin(const session_start *start)
{
    storm_completions_begin(start->now_ns);
    return FLARE_OK;
}

static void storm_beat(const session_beat *beat)
{
    storm_completions_beat(beat->now_ns);
}

static void storm_end(store *database, int64_t pid, uint32_t generation, uint64_t end_ns)
{
    (void)generation;
    (void)end_ns;
    storm_completions_write_last(database, pid);
}

static const session_participant storm = {
    .name = "storm",
    .begin = storm_begin,
    .cancel = storm_completions_end,
    .beat = storm_beat,
    /* Whether or not the last batch can be written, the guard ends. */
    .stop = storm_completions_end,
    .end = storm_end,
};

/* ---- Kernel and range replay ---- */

static int replay_begin(const session_start *start)
{
    const backend_descriptor *backend = start->backend;
    /* Only when none is installed: a test or tool may have chosen its own. */
    if (backend->replay_ops != NULL)
        replay_set_device_ops_default(backend->replay_ops());
    if (backend->metric_collector != NULL)
        replay_set_metric_collector_default(backend->metric_collector());
    /* Spans measured by PM sampling (--method pm) go to pm_replay, over
     * whatever device the replay ops above reach. */
    replay_set_pm_collector(pm_replay_collector());
    replay_session_begin();
    return FLARE_OK;
}

static void replay_backend_started(const backend_descriptor *backend)
{
    /* A started backend's tables replace what stood in before it. */
    const replay_device_ops *ops = backend->replay_ops != NULL ? backend->replay_ops() : NULL;
    if (ops != NULL)
        replay_set_device_ops(ops);
    const replay_metric_collector *collector =
        backend->metric_collector != NULL ? backend->metric_collector() : NULL;
    if (collector != NULL)
        replay_set_metric_collector(collector);
}

static void replay_batch(store *database, int64_t pid, uint64_t now_ns)
{
    (void)now_ns;
    replay_write_records(database, pid);
}

static const session_participant replay = {
    .name = "replay",
    .begin = replay_begin,
    .backend_started = replay_backend_started,
    .batch = replay_batch,
};

/* ---- The flight recorder (FLARE_KEEP, FLARE_MAX_SIZE) ---- */

static int deep_window_active(void);

static int recorder_participant_begin(const session_start *start)
{
    recorder_begin(start->now_ns);
    return FLARE_OK;
}

static void recorder_participant_batch(store *database, int64_t pid, uint64_t now_ns)
{
    /* What a window open now covers stays in detail. */
    recorder_batch(database, pid, now_ns, deep_window_active() != 0);
}

static const session_participant recorder = {
    .name = "flight recorder",
    .begin = recorder_participant_begin,
    .cancel = recorder_end,
    .batch = recorder_participant_batch,
    .committed = recorder_committed,
    /* Under --max-size, a batch ends before it can take the database past
     * the share of the cap at which the recorder evicts. */
    .room = recorder_room,
    .stop = recorder_end,
};

static const core_scope_observer scope_observer = {
    .enter = replay_range_scope_enter,
    .exit = replay_range_scope_exit,
};

const core_scope_observer *session_scope_observer(void)
{
    return &scope_observer;
}

/* ---- What the session offers backends and devices ---- */

static int deep_window_active(void)
{
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    return coordinator != NULL && deepwin_blackout_active(coordinator);
}

static const backend_host host = {
    .count_launch = deepwin_session_count_launch,
    .launch_count = deepwin_session_launches,
    .deep_window_active = deep_window_active,
};

const backend_host *session_backend_host(void)
{
    return &host;
}

bool session_device_work_recorded(bool kernel)
{
    /* Launch bounds of deep-profiling windows count the device's kernels. */
    if (kernel)
        deepwin_session_count_launch();
    return storm_completions_record(kernel);
}

/* ---- Orders ---- */

/* The recorder last: its batch sees the replay records written before it.
 * The window control after the windows: it schedules into their coordinator. */
static const session_participant *const begin_items[] = {
    &counters, &deepwin, &window_control, &rules, &pm, &pc, &storm, &replay, &recorder};
/* Rules and the window control first (a window they ask for arms on this
 * beat); the storm guard after the windows (a window armed now holds it);
 * PM last (a window closed on this beat has its samples queued). */
static const session_participant *const beat_items[] = {&rules, &window_control, &deepwin, &storm,
                                                        &pm};
/* Windows close first: the rules and PM attribution see them closed. */
static const session_participant *const end_items[] = {&window_control, &deepwin,  &pm,   &pc,
                                                       &rules,          &counters, &storm};

static const session_order begin_order = {begin_items, COUNT_OF(begin_items)};
static const session_order beat_order = {beat_items, COUNT_OF(beat_items)};
static const session_order end_order = {end_items, COUNT_OF(end_items)};

const session_order *session_begin_order(void)
{
    return &begin_order;
}

const session_order *session_beat_order(void)
{
    return &beat_order;
}

const session_order *session_end_order(void)
{
    return &end_order;
}
