/*
 * replay_registry.c: the tool registry, profiling contexts and per-thread
 * replay state behind include/flare/replay.h, plus the device operations and
 * settings the pass loop uses.
 *
 * Tools are copied into a snapshot at each replay decision, so a tool
 * unregistered meanwhile is never called through a dangling slot. Context
 * toggles live only in the launching thread's state and only inside a loop:
 * global state is never modified by a toggle. Nothing here runs on a hot
 * path except replay_thread(), a thread-local access.
 */
#include "replay/replay_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t tools_lock = PTHREAD_MUTEX_INITIALIZER;
static flare_replay_tool tools[FLARE_REPLAY_TOOL_MAX];
static bool tool_used[FLARE_REPLAY_TOOL_MAX];
static atomic_int tools_registered; /* tool_used entries set, for the launch path */

bool replay_registry_has_tools(void)
{
    return atomic_load_explicit(&tools_registered, memory_order_relaxed) > 0;
}

static char context_names[FLARE_REPLAY_CONTEXT_MAX][64] = {"metrics"};
static int context_count = 1;

static _Thread_local replay_thread_state thread_state;

replay_thread_state *replay_thread(void)
{
    return &thread_state;
}

FLARE_API int flare_replay_tool_register(const flare_replay_tool *tool, int *tool_id)
{
    if (tool == NULL || tool_id == NULL || tool->decide == NULL ||
        tool->struct_size < sizeof(flare_replay_tool)) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&tools_lock);
    for (int slot = 0; slot < FLARE_REPLAY_TOOL_MAX; slot++) {
        if (!tool_used[slot]) {
            tools[slot] = *tool;
            tool_used[slot] = true;
            atomic_fetch_add(&tools_registered, 1);
            pthread_mutex_unlock(&tools_lock);
            replay_notify_configured();
            atomic_fetch_add(&replay_configured_count, 1);
            *tool_id = slot + 1;
            return FLARE_OK;
        }
    }
    pthread_mutex_unlock(&tools_lock);
    return FLARE_ERR_FULL;
}

FLARE_API int flare_replay_tool_unregister(int tool_id)
{
    int slot = tool_id - 1;
    if (slot < 0 || slot >= FLARE_REPLAY_TOOL_MAX) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&tools_lock);
    if (!tool_used[slot]) {
        pthread_mutex_unlock(&tools_lock);
        return FLARE_ERR_NOT_FOUND;
    }
    tool_used[slot] = false;
    atomic_fetch_sub(&tools_registered, 1);
    atomic_fetch_sub(&replay_configured_count, 1);
    pthread_mutex_unlock(&tools_lock);
    return FLARE_OK;
}

void replay_registry_snapshot(replay_tool_snapshot *snapshot)
{
    snapshot->count = 0;
    pthread_mutex_lock(&tools_lock);
    for (int slot = 0; slot < FLARE_REPLAY_TOOL_MAX; slot++) {
        if (tool_used[slot]) {
            snapshot->ids[snapshot->count] = slot + 1;
            snapshot->tools[snapshot->count] = tools[slot];
            snapshot->count++;
        }
    }
    pthread_mutex_unlock(&tools_lock);
}

FLARE_API int flare_replay_context_register(const char *name, int *context_id)
{
    if (name == NULL || name[0] == '\0' || strlen(name) >= sizeof context_names[0] ||
        context_id == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&tools_lock);
    for (int index = 0; index < context_count; index++) {
        if (strcmp(context_names[index], name) == 0) {
            pthread_mutex_unlock(&tools_lock);
            *context_id = index;
            return FLARE_OK;
        }
    }
    if (context_count == FLARE_REPLAY_CONTEXT_MAX) {
        pthread_mutex_unlock(&tools_lock);
        return FLARE_ERR_FULL;
    }
    snprintf(context_names[context_count], sizeof context_names[0], "%s", name);
    *context_id = context_count++;
    pthread_mutex_unlock(&tools_lock);
    return FLARE_OK;
}

uint32_t replay_contexts_all_mask(void)
{
    return (uint32_t)((1ull << FLARE_REPLAY_CONTEXT_MAX) - 1);
}

FLARE_API int flare_replay_context_set_active(int context_id, int active)
{
    if (context_id < 0 || context_id >= FLARE_REPLAY_CONTEXT_MAX) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (!thread_state.in_pass_enter) {
        return FLARE_ERR_STATE;
    }
    uint32_t bit = 1u << context_id;
    thread_state.active_contexts =
        active ? (thread_state.active_contexts | bit) : (thread_state.active_contexts & ~bit);
    return FLARE_OK;
}

FLARE_API int flare_replay_context_active(int context_id)
{
    if (context_id < 0 || context_id >= FLARE_REPLAY_CONTEXT_MAX) {
        return 0;
    }
    /* Outside a loop every context is active: toggles never outlive it. */
    if (thread_state.loop_depth == 0) {
        return 1;
    }
    return (thread_state.active_contexts >> context_id) & 1u;
}

void replay_registry_reset_for_tests(void)
{
    pthread_mutex_lock(&tools_lock);
    for (int slot = 0; slot < FLARE_REPLAY_TOOL_MAX; slot++) {
        if (tool_used[slot]) {
            tool_used[slot] = false;
            atomic_fetch_sub(&tools_registered, 1);
            atomic_fetch_sub(&replay_configured_count, 1);
        }
    }
    context_count = 1;
    pthread_mutex_unlock(&tools_lock);
}

/* ---- Device operations and settings ---- */

static const replay_device_ops *_Atomic device_operations;
static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;
static replay_settings settings;
static bool settings_set;

void replay_set_device_ops(const replay_device_ops *ops)
{
    atomic_store(&device_operations, ops);
}

void replay_notify_configured(void)
{
    const replay_device_ops *ops = atomic_load(&device_operations);
    if (ops != NULL && ops->on_configured != NULL) {
        ops->on_configured();
    }
}

void replay_set_device_ops_default(const replay_device_ops *ops)
{
    const replay_device_ops *expected = NULL;
    atomic_compare_exchange_strong(&device_operations, &expected, ops);
}

const replay_device_ops *replay_device_operations(void)
{
    return atomic_load(&device_operations);
}

void replay_settings_default(replay_settings *out)
{
    *out = (replay_settings){
        .drain_timeout_ns = 10ull * 1000000000ull,
        .pass_timeout_ns = 60ull * 1000000000ull,
        .footprint_budget = 32ull << 30,
        .allow_device_shadow = true,
    };
}

void replay_settings_apply(const replay_settings *in)
{
    pthread_mutex_lock(&settings_lock);
    settings = *in;
    settings_set = true;
    pthread_mutex_unlock(&settings_lock);
}

void replay_settings_get(replay_settings *out)
{
    pthread_mutex_lock(&settings_lock);
    if (!settings_set) {
        replay_settings_default(&settings);
        settings_set = true;
    }
    *out = settings;
    pthread_mutex_unlock(&settings_lock);
}

void replay_settings_current(replay_settings *out)
{
    replay_settings_get(out);
}
