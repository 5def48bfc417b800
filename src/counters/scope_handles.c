/*
 * scope_handles.c: flare_scope_open / flare_scope_close (flare.h), scopes
 * that begin on one thread and end on another.
 *
 * A fixed table of FLARE_SCOPE_OPEN_MAX slots. A slot's state word is 0
 * (free), SLOT_BUSY (one thread is filling or reading it), or the handle of
 * the scope it holds; every transition is a compare-and-swap, so an open
 * and any number of racing closes (or the session's end) agree on one
 * owner. A handle carries a sequence number above the slot index, so a
 * stale handle never closes the slot's next scope. Must never: block,
 * allocate, or record a scope under a session other than its own.
 */
#include "core/clock.h"
#include "core/runtime.h"
#include "counters/counters_session.h"

#define SLOT_BUSY  1u
#define INDEX_BITS 12u
_Static_assert((1u << INDEX_BITS) == FLARE_SCOPE_OPEN_MAX, "the index must fill INDEX_BITS");

typedef struct open_scope {
    _Atomic uint64_t state;
    uint64_t start_ns;
    uint64_t instance_id;
    int64_t thread_id; /* the thread that opened it */
    uint32_t generation;
    char name[FLARE_NAME_MAX];
} open_scope;

static open_scope open_scopes[FLARE_SCOPE_OPEN_MAX];
static _Atomic uint32_t next_slot;
static _Atomic uint64_t next_sequence = 1;
static _Atomic uint64_t refused;
/* Handles with a sequence below this were released when their session
 * ended: closing one reports the ended session, not a misuse. */
static _Atomic uint64_t released_below = 1;

FLARE_API int flare_scope_open(const char *name, flare_scope_handle *handle)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    *handle = 0;
    uint32_t generation = core_active_generation();
    if (generation == 0)
        return FLARE_ERR_NOT_ACTIVE;
    uint64_t start_ns = core_now_ns();
    uint32_t first = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    for (uint32_t i = 0; i < FLARE_SCOPE_OPEN_MAX; i++) {
        uint32_t index = (first + i) % FLARE_SCOPE_OPEN_MAX;
        open_scope *scope = &open_scopes[index];
        uint64_t expected = 0;
        if (atomic_load_explicit(&scope->state, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(&scope->state, &expected, SLOT_BUSY,
                                                     memory_order_acquire, memory_order_relaxed))
            continue;
        core_copy_name(scope->name, name);
        scope->start_ns = start_ns;
        scope->instance_id = core_new_instance_id();
        scope->thread_id = core_thread_id();
        scope->generation = generation;
        uint64_t sequence = atomic_fetch_add_explicit(&next_sequence, 1, memory_order_relaxed);
        uint64_t value = (sequence << INDEX_BITS) | index;
        atomic_store_explicit(&scope->state, value, memory_order_release);
        *handle = value;
        return FLARE_OK;
    }
    atomic_fetch_add_explicit(&refused, 1, memory_order_relaxed);
    return FLARE_ERR_FULL;
}

FLARE_API int flare_scope_close(flare_scope_handle handle)
{
    uint64_t end_ns = core_now_ns();
    if (handle <= SLOT_BUSY)
        return FLARE_ERR_STATE;
    open_scope *scope = &open_scopes[handle & (FLARE_SCOPE_OPEN_MAX - 1)];
    uint64_t expected = handle;
    if (!atomic_compare_exchange_strong_explicit(&scope->state, &expected, SLOT_BUSY,
                                                 memory_order_acquire, memory_order_relaxed)) {
        if ((handle >> INDEX_BITS) < atomic_load_explicit(&released_below, memory_order_acquire))
            return FLARE_ERR_NOT_ACTIVE;
        return FLARE_ERR_STATE;
    }
    char name[FLARE_NAME_MAX];
    core_copy_name(name, scope->name);
    uint64_t start_ns = scope->start_ns;
    uint64_t instance_id = scope->instance_id;
    uint32_t generation = scope->generation;
    atomic_store_explicit(&scope->state, 0, memory_order_release);
    if (generation != core_active_generation())
        return FLARE_ERR_NOT_ACTIVE;
    core_record_interval(name, start_ns, end_ns, 0, instance_id);
    return FLARE_OK;
}

void counters_scope_handles_end_session(store *database, int64_t pid, uint32_t generation,
                                        uint64_t end_ns)
{
    atomic_store_explicit(&released_below,
                          atomic_load_explicit(&next_sequence, memory_order_relaxed),
                          memory_order_release);
    for (uint32_t index = 0; index < FLARE_SCOPE_OPEN_MAX; index++) {
        open_scope *scope = &open_scopes[index];
        uint64_t state = atomic_load_explicit(&scope->state, memory_order_acquire);
        if (state <= SLOT_BUSY)
            continue;
        if (!atomic_compare_exchange_strong_explicit(&scope->state, &state, SLOT_BUSY,
                                                     memory_order_acquire, memory_order_relaxed))
            continue; /* closed meanwhile: the close recorded it, or it was stale */
        if (scope->generation == generation) {
            store_scope_row row = {.pid = pid,
                                   .thread_id = scope->thread_id,
                                   .instance_id = scope->instance_id,
                                   .name = scope->name,
                                   .depth = 0,
                                   .start_ns = scope->start_ns,
                                   .end_ns = end_ns,
                                   .still_open = 1};
            store_put_scope(database, &row);
        }
        atomic_store_explicit(&scope->state, 0, memory_order_release);
    }
}

uint64_t counters_scope_handles_refused(void)
{
    return atomic_load_explicit(&refused, memory_order_relaxed);
}
