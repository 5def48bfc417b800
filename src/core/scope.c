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
#include "core/scope.h"

static const core_scope_observer *_Atomic scope_observer;

void core_scope_set_observer(const core_scope_observer *observer)
{
    atomic_store_explicit(&scope_observer, observer, memory_order_release);
}

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
    /* Id 0 first: a concurrent snapshot reading this level (it may still
     * see the old depth) then knows the frame is being rewritten. An
     * exchange with acquire order keeps the rewrite after it; a fence would
     * do the same, but ThreadSanitizer cannot model fences. */
    (void)__atomic_exchange_n(&frame->instance_id, 0, __ATOMIC_ACQ_REL);
    core_copy_name(frame->name, name);
    __atomic_store_n(&frame->generation, generation, __ATOMIC_RELAXED);
    __atomic_store_n(&frame->end_ns, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&frame->start_ns, core_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&frame->instance_id,
                     (thread->serial << 32) | (++thread->scope_sequence & 0xffffffffu),
                     __ATOMIC_RELEASE);
    atomic_store_explicit(&thread->scope_depth, depth + 1, memory_order_release);
    /* Range replay selected by scope name (one load when nothing observes). */
    const core_scope_observer *observer =
        atomic_load_explicit(&scope_observer, memory_order_acquire);
    if (observer != NULL)
        observer->enter(frame->name);
    return FLARE_OK;
}

FLARE_API int flare_scope_end(void)
{
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
    core_scope_frame *frame = &thread->scopes[depth - 1];
    /* The close is published with its time, as one step for a snapshot:
     * marked closing before the time is taken, the time stored after. */
    (void)__atomic_exchange_n(&frame->end_ns, CORE_SCOPE_CLOSING, __ATOMIC_SEQ_CST);
    uint64_t end_ns = core_now_ns();
    __atomic_store_n(&frame->end_ns, end_ns, __ATOMIC_RELEASE);
    int status = FLARE_OK;
    core_thread *owner;
    core_event *event = NULL;
    /* A scope begun under an earlier session is popped but not recorded. */
    if (__atomic_load_n(&frame->generation, __ATOMIC_RELAXED) == core_active_generation())
        event = core_emit_reserve(&owner);
    else
        status = FLARE_ERR_NOT_ACTIVE;
    if (event != NULL) {
        event->kind = CORE_EVENT_SCOPE;
        event->start_ns = __atomic_load_n(&frame->start_ns, __ATOMIC_RELAXED);
        event->end_ns = end_ns;
        event->id = __atomic_load_n(&frame->instance_id, __ATOMIC_RELAXED);
        event->stream_id = 0;
        event->device = -1;
        event->depth = depth - 1;
        core_copy_name(event->name, frame->name);
        core_emit_commit(owner);
    } else if (status == FLARE_OK) {
        status = FLARE_ERR_FULL;
    }
    atomic_store_explicit(&thread->scope_depth, depth - 1, memory_order_release);
    const core_scope_observer *observer =
        atomic_load_explicit(&scope_observer, memory_order_acquire);
    if (observer != NULL)
        observer->exit(frame->name);
    return status;
}
