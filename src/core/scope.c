/*
 * scope.c: flare_scope_begin / flare_scope_end, nested per thread.
 *
 * Hot path: no lock, no allocation, errno untouched. The stack lives in the
 * thread's slot so shutdown can record scopes still open. A begin past
 * FLARE_SCOPE_DEPTH_MAX is counted as a drop and its end is matched (popped
 * silently) so deeper nesting never corrupts the frames below.
 */
#include "core/runtime.h"

#include "core/clock.h"

FLARE_API int flare_scope_begin(const char *name)
{
    uint32_t generation = core_active_generation();
    if (generation == 0)
        return FLARE_ERR_NOT_ACTIVE;
    core_thread *thread = core_current_thread;
    if (thread == NULL) {
        thread = core_thread_claim();
        if (thread == NULL)
            return FLARE_ERR_FULL;
    }
    uint32_t depth = atomic_load_explicit(&thread->scope_depth, memory_order_relaxed);
    if (depth >= FLARE_SCOPE_DEPTH_MAX) {
        thread->scope_overflow++;
        atomic_store_explicit(
            &thread->scope_depth_drops,
            atomic_load_explicit(&thread->scope_depth_drops, memory_order_relaxed) + 1,
            memory_order_relaxed);
        return FLARE_ERR_FULL;
    }
    core_scope_frame *frame = &thread->scopes[depth];
    core_copy_name(frame->name, name);
    frame->generation = generation;
    frame->instance_id = (thread->serial << 32) | (++thread->scope_sequence & 0xffffffffu);
    frame->start_ns = core_now_ns();
    atomic_store_explicit(&thread->scope_depth, depth + 1, memory_order_release);
    return FLARE_OK;
}

FLARE_API int flare_scope_end(void)
{
    uint64_t end_ns = core_now_ns();
    core_thread *thread = core_current_thread;
    if (thread == NULL)
        return core_active_generation() ? FLARE_ERR_STATE : FLARE_ERR_NOT_ACTIVE;
    if (thread->scope_overflow > 0) {
        thread->scope_overflow--;
        return FLARE_OK;
    }
    uint32_t depth = atomic_load_explicit(&thread->scope_depth, memory_order_relaxed);
    if (depth == 0)
        return core_active_generation() ? FLARE_ERR_STATE : FLARE_ERR_NOT_ACTIVE;
    const core_scope_frame *frame = &thread->scopes[depth - 1];
    int status = FLARE_OK;
    core_thread *owner;
    core_event *event = NULL;
    /* A scope begun under an earlier session is popped but not recorded. */
    if (frame->generation == core_active_generation())
        event = core_emit_reserve(&owner);
    else
        status = FLARE_ERR_NOT_ACTIVE;
    if (event != NULL) {
        event->kind = CORE_EVENT_SCOPE;
        event->start_ns = frame->start_ns;
        event->end_ns = end_ns;
        event->id = frame->instance_id;
        event->stream_id = 0;
        event->device = -1;
        event->depth = depth - 1;
        core_copy_name(event->name, frame->name);
        core_emit_commit(owner);
    } else if (status == FLARE_OK) {
        status = FLARE_ERR_FULL;
    }
    atomic_store_explicit(&thread->scope_depth, depth - 1, memory_order_release);
    return status;
}
