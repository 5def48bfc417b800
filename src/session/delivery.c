/*
 * delivery.c: the session's delivery thread (delivery.h).
 *
 * One thread per session, asleep between deliveries on a CLOCK_MONOTONIC
 * condition variable so that stop wakes it at once. It holds no lock while
 * it calls the backend, and must never take the application's signals or
 * touch the store.
 */
#include "session/delivery.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/clock.h"
#include "flare/flare.h"

struct session_delivery {
    const backend_descriptor *_Atomic backend;
    uint64_t interval_ns;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stopping;
    _Atomic uint64_t deliveries;
};

static void deliver_once(session_delivery *delivery)
{
    const backend_descriptor *backend = atomic_load(&delivery->backend);
    if (backend != NULL && backend->deliver != NULL) {
        backend->deliver();
        atomic_fetch_add(&delivery->deliveries, 1);
    }
}

static void *delivery_main(void *argument)
{
    /* Named for top -H and ps, and the H200 soak check's CPU times. */
    pthread_setname_np(pthread_self(), "flare-delivery");
    session_delivery *delivery = argument;
    pthread_mutex_lock(&delivery->lock);
    while (!delivery->stopping) {
        struct timespec deadline = core_deadline_after_ns(delivery->interval_ns);
        while (!delivery->stopping &&
               pthread_cond_timedwait(&delivery->wake, &delivery->lock, &deadline) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&delivery->lock);
        deliver_once(delivery); /* at stop too: the last records before the session ends */
        pthread_mutex_lock(&delivery->lock);
    }
    pthread_mutex_unlock(&delivery->lock);
    return NULL;
}

int session_delivery_start(const backend_descriptor *backend, uint32_t interval_ms,
                           session_delivery **out)
{
    *out = NULL;
    if (interval_ms == 0)
        return FLARE_OK;
    session_delivery *delivery = calloc(1, sizeof(*delivery));
    if (delivery == NULL)
        return FLARE_ERR_NO_MEMORY;
    atomic_init(&delivery->backend, backend);
    atomic_init(&delivery->deliveries, 0);
    delivery->interval_ns = (uint64_t)interval_ms * 1000000ull;
    pthread_mutex_init(&delivery->lock, NULL);
    core_cond_init_monotonic(&delivery->wake);
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int created = pthread_create(&delivery->thread, NULL, delivery_main, delivery);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (created != 0) {
        pthread_cond_destroy(&delivery->wake);
        pthread_mutex_destroy(&delivery->lock);
        free(delivery);
        return FLARE_ERR_BACKEND;
    }
    *out = delivery;
    return FLARE_OK;
}

void session_delivery_adopt(session_delivery *delivery, const backend_descriptor *backend)
{
    if (delivery != NULL)
        atomic_store(&delivery->backend, backend);
}

void session_delivery_stop(session_delivery *delivery)
{
    if (delivery == NULL)
        return;
    pthread_mutex_lock(&delivery->lock);
    delivery->stopping = 1;
    pthread_cond_signal(&delivery->wake);
    pthread_mutex_unlock(&delivery->lock);
    pthread_join(delivery->thread, NULL);
    pthread_cond_destroy(&delivery->wake);
    pthread_mutex_destroy(&delivery->lock);
    free(delivery);
}

uint64_t session_delivery_count(const session_delivery *delivery)
{
    return delivery != NULL ? atomic_load(&((session_delivery *)delivery)->deliveries) : 0;
}
