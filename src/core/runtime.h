/*
 * runtime.h: the core runtime's internal interface: the active session, the
 * per-thread slots (event ring + scope stack) and the emit path.
 *
 * Owns: the process-wide session word (active flag + generation), the table
 * of thread slots, and the collector thread. Modules that produce events
 * (scopes, backend completions, later CUPTI) reserve a core_event with
 * core_emit_reserve(), fill it and commit. That path must stay lock-free and
 * allocation-free; the only allocation is a thread's first event, which
 * claims a slot (reused from exited threads when possible).
 */
#ifndef FLARE_CORE_RUNTIME_H
#define FLARE_CORE_RUNTIME_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/event.h"
#include "core/ring.h"

#define CORE_MAX_THREADS 4096

enum core_thread_state {
    CORE_THREAD_FREE = 0,    /* no owner; ring empty; may be claimed */
    CORE_THREAD_OWNED = 1,   /* a live thread produces into it */
    CORE_THREAD_RETIRED = 2, /* owner exited; collector drains then frees */
};

/* start_ns, end_ns, instance_id and generation are written and read with
 * __atomic builtins: PM attribution (pm/pm_session.c) snapshots the open
 * frames of every thread from the collector while their owners run. The
 * instance id doubles as the frame's sequence number (0 while the frame is
 * being rewritten; unique otherwise), so a reader that sees the same non-zero
 * id before and after reading the times has a consistent frame. */
typedef struct core_scope_frame {
    uint64_t start_ns;
    uint64_t instance_id;
    /* 0 while open; CORE_SCOPE_CLOSING from just before the close is timed
     * until its time is published here, so a snapshot never takes a closing
     * scope for a running one. */
    uint64_t end_ns;
    uint32_t generation;
    char name[FLARE_NAME_MAX];
} core_scope_frame;

#define CORE_SCOPE_CLOSING UINT64_MAX

typedef struct core_thread {
    core_ring ring;
    _Atomic int state;
    /* The owner's kernel thread id. Atomic: a new owner writes it when it
     * claims a freed slot while the collector may be reading it. */
    _Atomic int64_t thread_id;
    uint64_t serial; /* unique per claim; high half of scope instance ids */
    uint64_t scope_sequence;
    /* Written only by the owner; read by shutdown for still-open scopes. */
    _Atomic uint32_t scope_depth;
    uint32_t scope_overflow; /* begins past FLARE_SCOPE_DEPTH_MAX awaiting their end */
    _Atomic uint64_t scope_depth_drops;
    core_scope_frame scopes[FLARE_SCOPE_DEPTH_MAX];
    /* Session/collector bookkeeping: counts at session start, and the last
     * values written to the database (so unchanged counts are not rewritten). */
    uint64_t ring_drops_baseline;
    uint64_t scope_drops_baseline;
    uint64_t ring_drops_stored;
    uint64_t scope_drops_stored;
} core_thread;

/* The innermost open scope (flare's, or an NVTX push range, which flare
 * keeps on the same stack) of thread, which must be the caller's own (its
 * owner is the only writer): NULL for none. */
static inline const core_scope_frame *core_thread_innermost_scope(core_thread *thread)
{
    uint32_t depth = atomic_load_explicit(&thread->scope_depth, memory_order_relaxed);
    return depth == 0 || depth > FLARE_SCOPE_DEPTH_MAX ? NULL : &thread->scopes[depth - 1];
}

/* Bit 0: a session is active. Bits 1..: its generation (never 0 when active). */
extern _Atomic uint64_t core_session_word;
extern _Thread_local core_thread *core_current_thread;

/* Slow path of the emit: claims a slot for the calling thread. NULL when
 * every slot is taken (counted) or memory is short. */
core_thread *core_thread_claim(void);

static inline uint32_t core_active_generation(void)
{
    uint64_t word = atomic_load_explicit(&core_session_word, memory_order_acquire);
    return (word & 1u) ? (uint32_t)(word >> 1) : 0u;
}

/* Reserves an event in the calling thread's ring for the active session.
 * NULL when no session is active, or the ring is full (counted). */
static inline core_event *core_emit_reserve(core_thread **thread_out)
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
    core_event *event = core_ring_reserve(&thread->ring);
    if (event == NULL)
        return NULL;
    event->generation = generation;
    event->flags = 0;
    event->long_name = NULL;
    event->context_id = 0;
    event->graph_id = 0;
    event->graph_node_id = 0;
    *thread_out = thread;
    return event;
}

/* For backend threads that deliver events in bursts (CUPTI buffers): waits
 * up to timeout_ns for room instead of dropping at once (the collector
 * polls every 5 ms). Never for application threads. NULL when no session is active
 * or the ring stayed full (then one drop is counted). */
core_event *core_emit_reserve_patient(core_thread **thread_out, uint64_t timeout_ns);

/* Records a finished interval as a scope of the calling thread (used for
 * NVTX start/end ranges, which may end on another thread). */
void core_record_interval(const char *name, uint64_t start_ns, uint64_t end_ns, uint32_t depth,
                          uint64_t instance_id);

/* A new unique scope instance id for intervals not on a scope stack. */
uint64_t core_new_instance_id(void);

/* Interns a string for the life of the process; NULL when the table is full
 * (bounded; counted as a "name_intern" drop). Takes a lock: not for
 * application hot paths. */
const char *core_intern(const char *text);
uint64_t core_intern_failures(void);

static inline void core_emit_commit(core_thread *thread)
{
    core_ring_commit(&thread->ring);
}

/* ---- Used by the session and the collector. ---- */

/* Visits every slot that exists (any state). */
typedef void (*core_thread_visit)(core_thread *thread, void *user);
void core_threads_for_each(core_thread_visit visit, void *user);
/* Marks a drained retired slot free for reuse. Collector only. */
void core_thread_release_if_retired(core_thread *thread);
/* Events lost because no slot could be claimed. */
uint64_t core_thread_claim_failures(void);
/* The ring capacity for slots created from now on. */
void core_threads_set_ring_capacity(uint32_t capacity);

/* The calling thread's kernel thread id, cached. */
int64_t core_thread_id(void);

#endif /* FLARE_CORE_RUNTIME_H */
