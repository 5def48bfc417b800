/*
 * cuda_app_thread.c: one request at a time, run on the application's
 * thread at its next kernel launch (cuda_app_thread.h).
 *
 * The slot is guarded by `lock`; a launch only ever try-locks it, so a
 * launch never waits on flare (a busy lock leaves the request to the next
 * launch). The request runs with the lock released: a CUPTI call can take
 * a second (cuptiPCSamplingStop decodes the hardware buffer), and the
 * waiter's timed wait must be able to wake and decide meanwhile.
 *
 * Must never: run a request twice, run a withdrawn one, or hold the lock
 * across the request.
 */
#include "backend/cuda/cuda_app_thread.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/clock.h"

_Atomic int cuda_app_thread_posted; /* a request waits to be taken */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t done_once = PTHREAD_ONCE_INIT;
static pthread_cond_t done; /* CLOCK_MONOTONIC: a request finished or the slot freed */

static struct {
    cuda_app_thread_fn fn;
    void *argument;
    int *result; /* the waiter's, while it waits; NULL once it left (detached) */
    int posted;  /* set until the request finished (or was withdrawn) */
    int running; /* taken by a launch (or an application thread's own call), running now */
    uint64_t seq;
} slot;
static uint64_t next_seq; /* the last request's number */
static uint64_t done_seq; /* the last finished request's number */

static void done_init(void)
{
    core_cond_init_monotonic(&done);
}

/* lock held, a request posted and not running: runs it (lock released
 * meanwhile) and records it finished. Returns with the lock held. */
static void take_and_run(void)
{
    slot.running = 1;
    atomic_store_explicit(&cuda_app_thread_posted, 0, memory_order_relaxed);
    cuda_app_thread_fn fn = slot.fn;
    void *argument = slot.argument;
    uint64_t seq = slot.seq;
    pthread_mutex_unlock(&lock);
    int result = fn(argument);
    pthread_mutex_lock(&lock);
    /* Each waiter gets its own request's result, never a later one's. */
    if (slot.result != NULL)
        *slot.result = result;
    slot.result = NULL;
    slot.running = 0;
    slot.posted = 0;
    done_seq = seq;
    pthread_cond_broadcast(&done);
}

void cuda_app_thread_run_posted(void)
{
    if (pthread_mutex_trylock(&lock) != 0)
        return; /* a caller is posting or deciding: the next launch takes it */
    if (slot.posted && !slot.running)
        take_and_run();
    pthread_mutex_unlock(&lock);
}

int cuda_app_thread_is_flare(void)
{
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof(name));
    return strncmp(name, "flare-", 6) == 0;
}

int cuda_app_thread_pending(void)
{
    pthread_mutex_lock(&lock);
    int pending = slot.posted;
    pthread_mutex_unlock(&lock);
    return pending;
}

int cuda_app_thread_withdraw(cuda_app_thread_fn fn, void *argument)
{
    pthread_mutex_lock(&lock);
    /* Only a detached one (no waiter: its result pointer is gone). */
    int withdrawn = slot.posted && !slot.running && slot.result == NULL && slot.fn == fn &&
                    slot.argument == argument;
    if (withdrawn) {
        slot.result = NULL;
        slot.posted = 0;
        done_seq = slot.seq;
        atomic_store_explicit(&cuda_app_thread_posted, 0, memory_order_relaxed);
        pthread_cond_broadcast(&done);
    }
    pthread_mutex_unlock(&lock);
    return withdrawn;
}

/* lock held: waits until the deadline for the slot to be free. 1 if it is. */
static int wait_for_free_slot(const struct timespec *deadline)
{
    while (slot.posted || slot.running)
        if (pthread_cond_timedwait(&done, &lock, deadline) == ETIMEDOUT &&
            (slot.posted || slot.running))
            return 0;
    return 1;
}

/* An application thread's own call: requests posted meanwhile run first
 * (in order, here), then fn, holding the slot so that no launch on another
 * thread runs one beside it. */
static cuda_app_thread_outcome call_here(cuda_app_thread_fn fn, void *argument,
                                         const struct timespec *deadline, int *result)
{
    pthread_mutex_lock(&lock);
    for (;;) {
        if (slot.posted && !slot.running) {
            take_and_run();
            continue;
        }
        if (!slot.posted && !slot.running)
            break;
        if (pthread_cond_timedwait(&done, &lock, deadline) == ETIMEDOUT &&
            (slot.posted || slot.running)) {
            pthread_mutex_unlock(&lock);
            return CUDA_APP_THREAD_WITHDRAWN;
        }
    }
    slot.running = 1;
    pthread_mutex_unlock(&lock);
    *result = fn(argument);
    pthread_mutex_lock(&lock);
    slot.running = 0;
    pthread_cond_broadcast(&done);
    pthread_mutex_unlock(&lock);
    return CUDA_APP_THREAD_RAN;
}

cuda_app_thread_outcome cuda_app_thread_call(cuda_app_thread_fn fn, void *argument,
                                             uint64_t wait_ns, int detach, int *result)
{
    pthread_once(&done_once, done_init);
    struct timespec deadline = core_deadline_after_ns(wait_ns);
    if (!cuda_app_thread_is_flare())
        return call_here(fn, argument, &deadline, result);

    pthread_mutex_lock(&lock);
    if (!wait_for_free_slot(&deadline)) {
        pthread_mutex_unlock(&lock);
        return CUDA_APP_THREAD_WITHDRAWN;
    }
    uint64_t seq = ++next_seq;
    int own_result = 0;
    slot.fn = fn;
    slot.argument = argument;
    slot.result = &own_result;
    slot.seq = seq;
    slot.posted = 1;
    atomic_store_explicit(&cuda_app_thread_posted, 1, memory_order_relaxed);
    while (done_seq < seq) {
        if (pthread_cond_timedwait(&done, &lock, &deadline) != ETIMEDOUT || done_seq >= seq)
            continue;
        if (detach) {
            slot.result = NULL; /* own_result goes out of scope */
            pthread_mutex_unlock(&lock);
            return CUDA_APP_THREAD_DETACHED;
        }
        if (!slot.running) {
            slot.result = NULL;
            slot.posted = 0;
            atomic_store_explicit(&cuda_app_thread_posted, 0, memory_order_relaxed);
            pthread_cond_broadcast(&done);
            pthread_mutex_unlock(&lock);
            return CUDA_APP_THREAD_WITHDRAWN;
        }
        /* Taken just now by a launch: it finishes; argument is the caller's. */
        while (done_seq < seq)
            pthread_cond_wait(&done, &lock);
    }
    *result = own_result;
    pthread_mutex_unlock(&lock);
    return CUDA_APP_THREAD_RAN;
}

void cuda_app_thread_serve(void)
{
    if (!cuda_app_thread_is_flare())
        cuda_app_thread_run_posted();
}
