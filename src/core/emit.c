/*
 * emit.c: the emit helpers that are not inline hot paths (runtime.h):
 * patient reserve for bursty backend threads, intervals recorded from
 * outside a scope stack, and instance ids.
 */
#include <time.h>

#include "core/clock.h"
#include "core/runtime.h"

static _Atomic uint64_t next_free_instance = 1;

core_event *core_emit_reserve_patient(core_thread **thread_out, uint64_t timeout_ns)
{
    uint32_t generation = core_active_generation();
    if (generation == 0)
        return NULL;
    core_thread *thread = core_current_thread;
    if (thread == NULL) {
        thread = core_thread_claim();
        if (thread == NULL)
            return NULL;
    }
    core_event *event = core_ring_try_reserve(&thread->ring);
    if (event == NULL) {
        uint64_t deadline = core_now_ns() + timeout_ns;
        do {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
            event = core_ring_try_reserve(&thread->ring);
        } while (event == NULL && core_now_ns() < deadline && core_active_generation() != 0);
        if (event == NULL) {
            core_ring_count_drop(&thread->ring);
            return NULL;
        }
    }
    event->generation = generation;
    event->flags = 0;
    event->long_name = NULL;
    event->context_id = 0;
    event->graph_id = 0;
    event->graph_node_id = 0;
    *thread_out = thread;
    return event;
}

uint64_t core_new_instance_id(void)
{
    /* High bit set: never collides with stack scopes' (serial << 32 | n) ids. */
    return (1ull << 63) | atomic_fetch_add_explicit(&next_free_instance, 1, memory_order_relaxed);
}

void core_record_interval(const char *name, uint64_t start_ns, uint64_t end_ns, uint32_t depth,
                          uint64_t instance_id)
{
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_SCOPE;
    event->start_ns = start_ns;
    event->end_ns = end_ns;
    event->id = instance_id;
    event->stream_id = 0;
    event->device = -1;
    event->depth = depth;
    core_copy_name(event->name, name);
    core_emit_commit(thread);
}
