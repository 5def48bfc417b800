/*
 * threads.c: the table of per-thread slots (runtime.h).
 *
 * Slots live for the whole process and are never freed, so a thread holding
 * a stale pointer across flare_shutdown/flare_init can never touch freed
 * memory; an exited thread's slot is drained by the collector and then
 * reused by a new thread. Claiming takes no lock (a CAS on a free slot, or an
 * atomic append), and allocates only when a new slot is created.
 */
#include "core/runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic uint64_t core_session_word;
_Thread_local core_thread *core_current_thread;

static core_thread *_Atomic thread_table[CORE_MAX_THREADS];
static _Atomic uint32_t thread_table_used;
static _Atomic uint64_t next_serial = 1;
static _Atomic uint64_t claim_failures;
static _Atomic uint32_t new_ring_capacity = CORE_RING_DEFAULT_CAPACITY;

static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static _Thread_local int64_t cached_thread_id;

static void thread_exited(void *value)
{
    core_thread *thread = value;
    if (core_current_thread == thread)
        core_current_thread = NULL;
    atomic_store_explicit(&thread->state, CORE_THREAD_RETIRED, memory_order_release);
}

static void create_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exited);
}

int64_t core_thread_id(void)
{
    if (cached_thread_id == 0)
        cached_thread_id = (int64_t)syscall(SYS_gettid);
    return cached_thread_id;
}

static void adopt(core_thread *thread)
{
    thread->thread_id = core_thread_id();
    thread->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    thread->scope_sequence = 0;
    thread->scope_overflow = 0;
    atomic_store_explicit(&thread->scope_depth, 0, memory_order_relaxed);
    core_current_thread = thread;
    pthread_once(&exit_key_once, create_exit_key);
    pthread_setspecific(exit_key, thread);
}

core_thread *core_thread_claim(void)
{
    uint32_t capacity = atomic_load_explicit(&new_ring_capacity, memory_order_relaxed);
    uint32_t used = atomic_load_explicit(&thread_table_used, memory_order_acquire);
    for (uint32_t i = 0; i < used && i < CORE_MAX_THREADS; i++) {
        core_thread *thread = atomic_load_explicit(&thread_table[i], memory_order_acquire);
        /* A ring is never resized (the collector may be reading it), so only
         * slots of the session's ring capacity are reused. */
        if (thread == NULL || thread->ring.capacity != capacity)
            continue;
        int expected = CORE_THREAD_FREE;
        if (atomic_compare_exchange_strong_explicit(&thread->state, &expected, CORE_THREAD_OWNED,
                                                    memory_order_acq_rel, memory_order_relaxed)) {
            adopt(thread);
            return thread;
        }
    }
    uint32_t index = atomic_fetch_add_explicit(&thread_table_used, 1, memory_order_acq_rel);
    if (index >= CORE_MAX_THREADS) {
        atomic_fetch_sub_explicit(&thread_table_used, 1, memory_order_acq_rel);
        atomic_fetch_add_explicit(&claim_failures, 1, memory_order_relaxed);
        return NULL;
    }
    core_thread *thread = calloc(1, sizeof(*thread));
    if (thread == NULL || core_ring_init(&thread->ring, capacity) != FLARE_OK) {
        free(thread);
        atomic_fetch_add_explicit(&claim_failures, 1, memory_order_relaxed);
        return NULL; /* the index stays a hole; visitors skip NULL entries */
    }
    atomic_init(&thread->state, CORE_THREAD_OWNED);
    adopt(thread);
    atomic_store_explicit(&thread_table[index], thread, memory_order_release);
    return thread;
}

void core_threads_for_each(core_thread_visit visit, void *user)
{
    uint32_t used = atomic_load_explicit(&thread_table_used, memory_order_acquire);
    if (used > CORE_MAX_THREADS)
        used = CORE_MAX_THREADS;
    for (uint32_t i = 0; i < used; i++) {
        core_thread *thread = atomic_load_explicit(&thread_table[i], memory_order_acquire);
        if (thread != NULL)
            visit(thread, user);
    }
}

void core_thread_release_if_retired(core_thread *thread)
{
    if (atomic_load_explicit(&thread->state, memory_order_acquire) != CORE_THREAD_RETIRED)
        return;
    if (core_ring_pending(&thread->ring) != 0)
        return;
    /* The next owner starts its drop counts from zero; the collector has
     * already stored this owner's. */
    atomic_store_explicit(&thread->ring.dropped, 0, memory_order_relaxed);
    atomic_store_explicit(&thread->scope_depth_drops, 0, memory_order_relaxed);
    thread->ring_drops_baseline = 0;
    thread->scope_drops_baseline = 0;
    thread->ring_drops_stored = 0;
    thread->scope_drops_stored = 0;
    atomic_store_explicit(&thread->state, CORE_THREAD_FREE, memory_order_release);
}

uint64_t core_thread_claim_failures(void)
{
    return atomic_load_explicit(&claim_failures, memory_order_relaxed);
}

void core_threads_set_ring_capacity(uint32_t capacity)
{
    atomic_store_explicit(&new_ring_capacity, capacity, memory_order_relaxed);
}
