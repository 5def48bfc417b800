/*
 * replay_loop.c: the replay of one launch: decide, take the device's writer
 * gate, drain, snapshot, run the passes with a restore before each, collect,
 * release.
 *
 * Everything runs on the launching thread, inside its launch call. A replay
 * that cannot start safely (drain timed out, memory it cannot see, no room
 * for the snapshot) is declined: the launch runs once, normally, and the
 * reason is recorded. Once pass 0 has run, stopping half-way is no longer
 * safe: a pass that never finishes or a restore that fails part-way leaves
 * the program's memory wrong, so it ends in a message naming the kernel,
 * the pass and what was stuck, and abort(). It must never hold the writer
 * gate past replay_launch_end, and never restore after the last pass.
 */
#include "replay/replay_internal.h"

#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A tool asking "until told to stop" still gets a bound. */
#define REPLAY_PASS_LIMIT 4096u

enum { MODE_UNTOUCHED = 0, MODE_READER = 1, MODE_REPLAYING = 2 };

typedef struct replay_loop {
    const replay_launch_request *request; /* valid until replay_launch_end */
    replay_record *record;
    flare_replay_launch launch;
    const replay_device_ops *ops;
    replay_settings settings;
    replay_tool_snapshot tools;
    uint32_t tool_planned[FLARE_REPLAY_TOOL_MAX];
    bool tool_participates[FLARE_REPLAY_TOOL_MAX];
    bool tool_wants_more[FLARE_REPLAY_TOOL_MAX];
    void *pass_data[FLARE_REPLAY_TOOL_MAX];
    const replay_metric_collector *collector;
    uint32_t collector_passes; /* 0: not collecting */
    uint32_t collector_passes_done;
    bool collector_pass_open;
    bool collector_failed;   /* a pass_begin failed: it will make no more progress */
    bool collector_prepared; /* prepare returned passes: end() is owed */
    bool launch_failed;      /* the program's own submission failed: declined */
    const char *const *metric_names;
    size_t metric_count;
    replay_snapshot snapshot; /* ops == NULL until taken */
    bool needs_snapshot;
    uint32_t pass;
    uint64_t pass_start_ns;
    bool aborted;
} replay_loop;

static atomic_uint_fast64_t next_launch_id = 1;
static _Atomic uint64_t stat_replays, stat_passes, stat_declines, stat_gate_waits,
    stat_bytes_restored;

static void default_abort(const char *message)
{
    fprintf(stderr, "flare: %s\n", message);
    abort();
}
static void (*_Atomic abort_handler)(const char *message) = default_abort;

uint64_t replay_next_id(void)
{
    return atomic_fetch_add(&next_launch_id, 1);
}

void replay_call_abort_handler(const char *message)
{
    atomic_load (&abort_handler)(message);
}

void replay_set_abort_handler(void (*handler)(const char *message))
{
    atomic_store(&abort_handler, handler != NULL ? handler : default_abort);
}

void replay_stats_add(uint64_t replays, uint64_t passes, uint64_t declines, uint64_t gate_waits,
                      uint64_t bytes_restored)
{
    if (replays) {
        atomic_fetch_add_explicit(&stat_replays, replays, memory_order_relaxed);
    }
    if (passes) {
        atomic_fetch_add_explicit(&stat_passes, passes, memory_order_relaxed);
    }
    if (declines) {
        atomic_fetch_add_explicit(&stat_declines, declines, memory_order_relaxed);
    }
    if (gate_waits) {
        atomic_fetch_add_explicit(&stat_gate_waits, gate_waits, memory_order_relaxed);
    }
    if (bytes_restored) {
        atomic_fetch_add_explicit(&stat_bytes_restored, bytes_restored, memory_order_relaxed);
    }
}

void replay_stats_get(replay_stats *stats)
{
    stats->replays = atomic_load(&stat_replays);
    stats->passes = atomic_load(&stat_passes);
    stats->declines = atomic_load(&stat_declines);
    stats->gate_waits = atomic_load(&stat_gate_waits);
    stats->bytes_restored = atomic_load(&stat_bytes_restored);
}

void replay_loop_reset_for_tests(void)
{
    atomic_store(&stat_replays, 0);
    atomic_store(&stat_passes, 0);
    atomic_store(&stat_declines, 0);
    atomic_store(&stat_gate_waits, 0);
    atomic_store(&stat_bytes_restored, 0);
    replay_set_abort_handler(NULL);
}

void replay_reset_for_tests(void)
{
    replay_registry_reset_for_tests();
    replay_selection_reset_for_tests();
    replay_inventory_reset_for_tests();
    replay_records_reset_for_tests();
    replay_loop_reset_for_tests();
    replay_range_reset_for_tests();
    replay_trigger_reset_for_tests();
    replay_settings settings;
    replay_settings_default(&settings);
    replay_settings_apply(&settings);
}

static replay_record *record_new(const replay_launch_request *request, uint64_t launch_id,
                                 uint64_t launch_index)
{
    replay_record *record = calloc(1, sizeof *record);
    if (record == NULL) {
        return NULL;
    }
    record->launch_id = launch_id;
    record->device = request->device;
    record->stream_id = request->stream_id;
    snprintf(record->kernel_name, sizeof record->kernel_name, "%s",
             request->kernel_name != NULL ? request->kernel_name : "(unknown)");
    record->launch_index = launch_index;
    record->begin_ns = core_now_ns();
    for (size_t index = 0; index < REPLAY_RECORD_METRIC_MAX; index++) {
        record->metric_values[index] = NAN;
    }
    return record;
}

static void free_shadows(replay_loop *loop)
{
    if (loop->snapshot.ops != NULL) {
        replay_snapshot_free(&loop->snapshot);
    }
}

static void tools_finished(replay_loop *loop, const char *reason)
{
    for (int index = 0; index < loop->tools.count; index++) {
        const flare_replay_tool *tool = &loop->tools.tools[index];
        if (loop->tool_participates[index] && tool->finished != NULL) {
            tool->finished(&loop->launch, loop->record->passes_run, reason, tool->user);
        }
    }
}

/* Takes the reader side for a launch that runs once. A span recording on
 * the device records it: checked with the gate held, so no span can begin
 * between the check and the submission (its begin takes the writer side). */
static void enter_reader(const replay_launch_request *request, replay_launch_state *state)
{
    state->mode = MODE_READER;
    state->gate_token = replay_gate_reader_enter_always(request->device);
    state->planned = 0;
    if (replay_range_claims(request->device)) {
        state->planned = UINT32_MAX; /* marks "recorded into a span" for end */
        replay_range_record_launch(
            request, replay_next_id(),
            replay_next_launch_index(request->kernel_name != NULL ? request->kernel_name : ""));
    }
}

/* Lets the collector go of what a prepared collection holds (once). */
static void end_collection(replay_loop *loop)
{
    if (loop->collector_prepared && loop->collector->end != NULL) {
        loop->collector->end(&loop->launch);
    }
    loop->collector_prepared = false;
}

/* Ends a loop that never ran a pass: the launch runs once as an ordinary
 * one (reader side), the reason is recorded. */
static void decline(replay_loop *loop, replay_launch_state *state, bool holding_writer,
                    const char *format, ...) __attribute__((format(printf, 4, 5)));
static void decline(replay_loop *loop, replay_launch_state *state, bool holding_writer,
                    const char *format, ...)
{
    replay_record *record = loop->record;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(record->reason, sizeof record->reason, format, arguments);
    va_end(arguments);
    record->declined = 1;
    record->passes_run = 1;
    end_collection(loop);
    free_shadows(loop);
    if (holding_writer) {
        replay_gate_writer_exit(loop->launch.device);
    }
    tools_finished(loop, record->reason);
    record->end_ns = core_now_ns();
    core_log(CORE_LOG_INFO, "replay of %s (launch %" PRIu64 ") declined: %s", record->kernel_name,
             record->launch_id, record->reason);
    replay_stats_add(0, 0, 1, 0, 0);
    replay_record_queue(record);
    const replay_launch_request *request = loop->request;
    free(loop);
    state->loop = NULL;
    enter_reader(request, state);
}

/* Fails the loop after pass 0 ran: memory is no longer what the program
 * expects, so the process must not continue (the test handler returns). */
static void fail_loop(replay_loop *loop, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
static void fail_loop(replay_loop *loop, const char *format, ...)
{
    char detail[512];
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(detail, sizeof detail, format, arguments);
    va_end(arguments);
    char message[1024];
    snprintf(message, sizeof message,
             "replay of kernel %.256s (launch %" PRIu64 ", device %d) failed in pass %u: %s; the "
             "program's device memory is no longer what it expects, so flare stops it",
             loop->record->kernel_name, loop->record->launch_id, loop->launch.device, loop->pass,
             detail);
    snprintf(loop->record->reason, sizeof loop->record->reason, "aborted: %.240s", detail);
    loop->aborted = true;
    core_log(CORE_LOG_ERROR, "%s", message);
    atomic_load (&abort_handler)(message);
}

/* Takes the snapshot; NULL, or the decline reason. */
static const char *take_snapshot(replay_loop *loop, char *reason, size_t reason_size)
{
    const char *declined = replay_snapshot_take(&loop->snapshot, loop->ops, &loop->settings,
                                                loop->launch.device, reason, reason_size);
    loop->record->shadow_on_device = loop->snapshot.on_device ? 1 : 0;
    if (declined == NULL) {
        loop->record->snapshot_ns = loop->snapshot.copy_ns;
        loop->record->snapshot_bytes = loop->snapshot.bytes;
    }
    return declined;
}

/* Tells work held at the device's gate that this replay is alive, and
 * what it is doing (named if a reader gives up on it). */
static void signal_progress(replay_loop *loop, const char *doing)
{
    char what[256];
    snprintf(what, sizeof what, "the replay of kernel %.128s (launch %" PRIu64 ", %s pass %u)",
             loop->record->kernel_name, loop->record->launch_id, doing, loop->pass);
    replay_gate_writer_progress(loop->launch.device, what, replay_gate_stall_ns(&loop->settings));
}

/* Writes every shadow back; false (after fail_loop) when a copy failed. */
static bool restore_snapshot(replay_loop *loop)
{
    char detail[384];
    signal_progress(loop, "restoring memory for");
    if (replay_snapshot_restore(&loop->snapshot, loop->settings.pass_timeout_ns, loop->record,
                                detail, sizeof detail) != FLARE_OK) {
        fail_loop(loop, "%s", detail);
        return false;
    }
    return true;
}

/* Runs the enter callbacks and opens the collector's pass; then stamps the
 * pass start. Toggles are legal only while the callbacks run. */
static void pass_enter(replay_loop *loop)
{
    signal_progress(loop, "in");
    replay_thread_state *thread = replay_thread();
    flare_replay_pass pass = {.launch_id = loop->launch.launch_id,
                              .pass = loop->pass,
                              .planned = loop->record->passes_planned};
    thread->in_pass_enter = 1;
    for (int index = 0; index < loop->tools.count; index++) {
        const flare_replay_tool *tool = &loop->tools.tools[index];
        if (loop->tool_participates[index] && tool->pass_enter != NULL) {
            loop->pass_data[index] = NULL;
            pass.pass_data = &loop->pass_data[index];
            tool->pass_enter(&loop->launch, &pass, tool->user);
        }
    }
    thread->in_pass_enter = 0;
    loop->collector_pass_open = false;
    if (loop->collector_passes > 0 && !loop->collector_failed &&
        loop->collector_passes_done < loop->collector_passes &&
        (thread->active_contexts & (1u << REPLAY_CONTEXT_METRICS)) != 0) {
        loop->collector_pass_open =
            loop->collector->pass_begin(&loop->launch, loop->collector_passes_done) == FLARE_OK;
        loop->collector_failed = !loop->collector_pass_open;
        signal_progress(loop, "running"); /* the collector's start can take a while */
    }
    loop->pass_start_ns = core_now_ns();
}

/* Waits for the pass's work, closes the collector's pass, runs the exit
 * callbacks. False (after fail_loop) when the pass did not finish. */
static bool pass_exit(replay_loop *loop, void *stream)
{
    signal_progress(loop, "waiting for");
    int status = loop->ops->stream_drain(stream, loop->settings.pass_timeout_ns);
    uint64_t end_ns = core_now_ns();
    if (status != FLARE_OK) {
        char limit[32];
        core_duration_format(loop->settings.pass_timeout_ns, limit, sizeof limit);
        fail_loop(loop, "stream %" PRIu64 " did not finish the pass within %s (%s)",
                  loop->launch.stream_id, limit, flare_strerror(status));
        return false;
    }
    if (loop->collector_pass_open) {
        loop->collector->pass_end(&loop->launch, loop->collector_passes_done);
        loop->collector_passes_done++;
        loop->collector_pass_open = false;
    }
    replay_record *record = loop->record;
    replay_record_pass(record, loop->pass, loop->pass_start_ns, end_ns);
    flare_replay_pass pass = {.launch_id = loop->launch.launch_id,
                              .pass = loop->pass,
                              .planned = record->passes_planned,
                              .start_ns = loop->pass_start_ns,
                              .end_ns = end_ns};
    for (int index = 0; index < loop->tools.count; index++) {
        const flare_replay_tool *tool = &loop->tools.tools[index];
        if (loop->tool_participates[index] && tool->pass_exit != NULL) {
            pass.pass_data = &loop->pass_data[index];
            tool->pass_exit(&loop->launch, &pass, tool->user);
        }
    }
    return true;
}

/* After a pass: whether anyone wants another. Tools can only shorten their
 * own loop: a fixed count is an upper bound whatever should_continue says. */
static bool another_pass_wanted(replay_loop *loop)
{
    uint32_t passes_done = loop->pass + 1;
    bool wanted = false;
    flare_replay_pass pass = {.launch_id = loop->launch.launch_id,
                              .pass = loop->pass,
                              .planned = loop->record->passes_planned};
    for (int index = 0; index < loop->tools.count; index++) {
        if (!loop->tool_participates[index] || !loop->tool_wants_more[index]) {
            continue;
        }
        const flare_replay_tool *tool = &loop->tools.tools[index];
        uint32_t planned = loop->tool_planned[index];
        if (planned != 0 && passes_done >= planned) {
            loop->tool_wants_more[index] = false;
        } else if (tool->should_continue != NULL) {
            pass.pass_data = &loop->pass_data[index];
            loop->tool_wants_more[index] = tool->should_continue(&loop->launch, &pass, tool->user);
        }
        wanted = wanted || loop->tool_wants_more[index];
    }
    if (loop->collector_passes > 0 && !loop->collector_failed &&
        loop->collector_passes_done < loop->collector_passes) {
        wanted = true;
    }
    if (wanted && loop->snapshot.ops == NULL) {
        /* Planned as one pass, so nothing was snapshotted: another pass would
         * run on memory the first one changed. */
        return false;
    }
    if (wanted && passes_done >= REPLAY_PASS_LIMIT) {
        CORE_LOG_ONCE("replay.pass_limit", CORE_LOG_WARNING,
                      "replay of %s stopped at the limit of %u passes", loop->record->kernel_name,
                      REPLAY_PASS_LIMIT);
        snprintf(loop->record->reason, sizeof loop->record->reason, "stopped at the %u-pass limit",
                 REPLAY_PASS_LIMIT);
        return false;
    }
    return wanted;
}

/* Decides which tools and whether the metric collection take part. Returns
 * the combined plan: 1 (nobody wants a replay), N, or 0 (until stopped). */
static uint32_t decide(replay_loop *loop, bool selected, char *reason, size_t reason_size,
                       bool *collector_failed)
{
    uint32_t combined = 1;
    bool unbounded = false;
    replay_registry_snapshot(&loop->tools);
    for (int index = 0; index < loop->tools.count; index++) {
        const flare_replay_tool *tool = &loop->tools.tools[index];
        uint32_t planned = tool->decide(&loop->launch, tool->user);
        if (planned == 0 && tool->should_continue == NULL) {
            CORE_LOG_ONCE("replay.tool_zero", CORE_LOG_WARNING,
                          "a replay tool asked for 0 passes without a should_continue callback; "
                          "treated as no replay");
            planned = 1;
        }
        if (planned == 1) {
            continue;
        }
        loop->tool_participates[index] = true;
        loop->tool_wants_more[index] = true;
        loop->tool_planned[index] = planned;
        if (planned == 0) {
            unbounded = true;
        } else if (planned > combined) {
            combined = planned;
        }
    }
    loop->collector = replay_metric_collector_current();
    if (selected) {
        loop->metric_count = replay_selection_metrics(&loop->metric_names);
        if (loop->collector == NULL) {
            snprintf(reason, reason_size, "no metric collector on this device");
            *collector_failed = true;
        } else {
            int passes = loop->collector->prepare(&loop->launch, loop->metric_names,
                                                  loop->metric_count, reason, reason_size);
            if (passes < 1) {
                *collector_failed = true;
            } else {
                loop->collector_passes = (uint32_t)passes;
                loop->collector_prepared = true;
                /* One collector pass needs one replay pass; more when a tool
                 * switches the metrics context off for some passes. */
                if ((uint32_t)passes > combined) {
                    combined = (uint32_t)passes;
                }
                /* A one-pass collection still takes part (as a plan of 1). */
            }
        }
    }
    if (unbounded) {
        return 0;
    }
    return combined;
}

static bool anyone_participates(const replay_loop *loop)
{
    if (loop->collector_passes > 0) {
        return true;
    }
    for (int index = 0; index < loop->tools.count; index++) {
        if (loop->tool_participates[index]) {
            return true;
        }
    }
    return false;
}

/* Takes the device's writer gate and drains the launch's stream and
 * device, bounded by the drain timeout. false: the launch was declined
 * (state says so) and the loop is gone. */
static bool drain_before(replay_loop *loop, replay_launch_state *state)
{
    const replay_launch_request *request = loop->request;
    const replay_device_ops *ops = loop->ops;
    uint64_t drain_started = core_now_ns();
    char limit[32];
    core_duration_format(loop->settings.drain_timeout_ns, limit, sizeof limit);
    if (replay_gate_writer_enter(request->device, loop->settings.drain_timeout_ns) != FLARE_OK) {
        decline(loop, state, false, "device drain stuck: the gate of device %d stayed busy for %s",
                request->device, limit);
        return false;
    }
    signal_progress(loop, "draining before");
    if (replay_range_active_on(request->device)) {
        decline(loop, state, true, "a range replay is recording on device %d", request->device);
        return false;
    }
    if (ops->stream_drain(request->stream, loop->settings.drain_timeout_ns) != FLARE_OK) {
        decline(loop, state, true, "stream drain stuck: stream %" PRIu64 " still had work after %s",
                request->stream_id, limit);
        return false;
    }
    if (ops->device_drain(request->device, loop->settings.drain_timeout_ns) != FLARE_OK) {
        decline(loop, state, true,
                "device drain stuck: another stream of device %d still had work after %s",
                request->device, limit);
        return false;
    }
    loop->record->drain_ns = core_now_ns() - drain_started;
    return true;
}

void replay_launch_begin(const replay_launch_request *request, replay_launch_state *state)
{
    memset(state, 0, sizeof *state);
    if (!replay_configured() || request == NULL) {
        return;
    }
    replay_thread_state *thread = replay_thread();
    if (replay_range_recording() || replay_range_active_on(request->device)) {
        /* Part of a span: recorded and submitted under the reader gate,
         * never replayed on its own. */
        enter_reader(request, state);
        return;
    }
    if (thread->loop_depth > 0) {
        /* A launch from a tool callback or a relaunch: runs once, ungated. */
        return;
    }
    const replay_device_ops *ops = replay_device_operations();
    if (ops == NULL || request->device < 0 || request->device >= REPLAY_DEVICE_MAX) {
        enter_reader(request, state);
        return;
    }
    uint64_t launch_index =
        replay_next_launch_index(request->kernel_name != NULL ? request->kernel_name : "");
    uint64_t trigger_id = 0;
    bool selected =
        request->kernel_name != NULL && replay_selection_matches(request->kernel_name, &trigger_id);
    if (!selected && !replay_registry_has_tools()) {
        /* Nobody can want this launch: no allocation, just the gate. */
        enter_reader(request, state);
        return;
    }
    replay_loop *loop = calloc(1, sizeof *loop);
    uint64_t launch_id = atomic_fetch_add(&next_launch_id, 1);
    replay_record *record = loop != NULL ? record_new(request, launch_id, launch_index) : NULL;
    if (record == NULL) {
        free(loop);
        if (trigger_id != 0)
            replay_trigger_lost(trigger_id, "out of memory deciding the launch; it ran once");
        CORE_LOG_ONCE("replay.no_memory", CORE_LOG_WARNING,
                      "replay: out of memory deciding a launch; it runs once");
        enter_reader(request, state);
        return;
    }
    record->trigger_id = trigger_id;
    loop->request = request;
    loop->record = record;
    loop->ops = ops;
    replay_settings_current(&loop->settings);
    loop->launch = (flare_replay_launch){.launch_id = launch_id,
                                         .device = request->device,
                                         .stream_id = request->stream_id,
                                         .kernel_name = record->kernel_name,
                                         .launch_index = launch_index};
    memcpy(loop->launch.grid, request->grid, sizeof loop->launch.grid);
    memcpy(loop->launch.block, request->block, sizeof loop->launch.block);
    state->launch_id = launch_id;

    char reason[256] = "";
    bool collector_failed = false;
    uint32_t planned = decide(loop, selected, reason, sizeof reason, &collector_failed);
    if (!anyone_participates(loop)) {
        if (collector_failed || trigger_id != 0) {
            /* A triggered launch always leaves a record: its rule waits for it. */
            decline(loop, state, false, "metric collection: %s",
                    reason[0] != '\0' ? reason : "no metric collector takes part");
            return;
        }
        free(record);
        free(loop);
        enter_reader(request, state);
        return;
    }
    record->passes_planned = planned;
    if (loop->collector_passes > 0) {
        snprintf(record->collector, sizeof record->collector, "%s", loop->collector->name);
        record->metric_count = (uint32_t)loop->metric_count;
        for (size_t index = 0; index < loop->metric_count; index++) {
            snprintf(record->metric_names[index], REPLAY_METRIC_NAME_MAX, "%s",
                     loop->metric_names[index]);
        }
    }
    if (request->from_graph) {
        CORE_LOG_ONCE("replay.graph", CORE_LOG_WARNING,
                      "kernels launched from CUDA graphs are not replayed; they run once");
        decline(loop, state, false, "CUDA graph launch: graphs are not replayed");
        return;
    }
    if (request->unsupported_kind) {
        decline(loop, state, false, "cooperative or device-side launch: not replayable");
        return;
    }

    if (!drain_before(loop, state)) {
        return;
    }
    signal_progress(loop, "snapshotting before");
    loop->needs_snapshot = planned != 1;
    if (loop->needs_snapshot && take_snapshot(loop, reason, sizeof reason) != NULL) {
        decline(loop, state, true, "%s", reason);
        return;
    }
    thread->loop_depth++;
    thread->active_contexts = replay_contexts_all_mask();
    replay_stats_add(1, 0, 0, 0, 0);
    state->mode = MODE_REPLAYING;
    state->loop = loop;
    state->planned = planned;
    loop->pass = 0;
    pass_enter(loop);
}

/* Closes the loop: collector results, callbacks, shadows, thread state,
 * gate, record. */
static void finish_loop(replay_loop *loop)
{
    replay_record *record = loop->record;
    if (loop->collector_passes > 0 && !loop->aborted) {
        char reason[256] = "";
        if (loop->collector_passes_done < loop->collector_passes) {
            /* The collector's reason when it failed, else a count. */
            if (!loop->collector_failed ||
                loop->collector->finish(&loop->launch, record->metric_values, loop->metric_count,
                                        reason, sizeof reason) == FLARE_OK ||
                reason[0] == '\0') {
                snprintf(reason, sizeof reason, "%u of %u passes ran", loop->collector_passes_done,
                         loop->collector_passes);
            }
            snprintf(record->reason, sizeof record->reason, "metric collection incomplete: %.200s",
                     reason);
        } else if (loop->collector->finish(&loop->launch, record->metric_values, loop->metric_count,
                                           reason, sizeof reason) != FLARE_OK) {
            snprintf(record->reason, sizeof record->reason, "metric collection: %.200s", reason);
        } else if (reason[0] != '\0') {
            snprintf(record->reason, sizeof record->reason, "%.250s", reason);
        }
    }
    end_collection(loop);
    tools_finished(loop, loop->aborted || loop->launch_failed ? record->reason : NULL);
    free_shadows(loop);
    replay_thread_state *thread = replay_thread();
    thread->loop_depth--;
    thread->active_contexts = 0;
    thread->in_pass_enter = 0;
    replay_gate_writer_exit(loop->launch.device);
    record->end_ns = core_now_ns();
    replay_record_queue(record);
    free(loop);
}

void replay_launch_end(const replay_launch_request *request, replay_launch_state *state,
                       int submit_status)
{
    if (state->mode == MODE_READER) {
        if (state->planned == UINT32_MAX && submit_status != FLARE_OK) {
            /* Recorded, but it never ran: re-issuing it would run work the
             * program never had. */
            replay_range_decline(request->device, "a launch inside the span failed to submit");
        }
        replay_gate_exit(request->device, state->gate_token);
        state->mode = MODE_UNTOUCHED;
        return;
    }
    if (state->mode != MODE_REPLAYING) {
        return;
    }
    replay_loop *loop = state->loop;
    state->loop = NULL;
    state->mode = MODE_UNTOUCHED;
    if (submit_status != FLARE_OK) {
        /* The program's own launch failed: nothing ran, nothing to redo. */
        if (loop->collector_pass_open) {
            loop->collector->pass_end(&loop->launch, loop->collector_passes_done);
            loop->collector_pass_open = false;
        }
        loop->record->declined = 1;
        loop->record->passes_run = 1;
        snprintf(loop->record->reason, sizeof loop->record->reason, "the launch itself failed: %s",
                 flare_strerror(submit_status));
        loop->collector_passes = 0;
        loop->launch_failed = true;
        replay_stats_add(0, 0, 1, 0, 0);
        atomic_fetch_sub(&stat_replays, 1);
        finish_loop(loop);
        return;
    }
    bool healthy = pass_exit(loop, request->stream);
    while (healthy && another_pass_wanted(loop)) {
        loop->pass++;
        if (!restore_snapshot(loop)) {
            healthy = false;
            break;
        }
        pass_enter(loop);
        int status = request->relaunch(request->relaunch_context);
        if (status != FLARE_OK) {
            fail_loop(loop, "re-issuing the launch failed (%s) after memory was restored",
                      flare_strerror(status));
            healthy = false;
            break;
        }
        healthy = pass_exit(loop, request->stream);
    }
    finish_loop(loop);
}
