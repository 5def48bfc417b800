/*
 * test_cuda_app_thread.c: requests run on an application thread at its
 * launches (cuda_app_thread.h), with real threads: a flare-named caller
 * waits while "application" threads call the launch hook; a request with
 * no launch in time is withdrawn (and never runs) or detached (and runs at
 * a later launch, before the next request); an application thread's own
 * call runs at once; many launching threads run a request exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cuda/cuda_app_thread.h"
#include "core/clock.h"
#include "test_util.h"

#define LONG_WAIT_NS  30000000000ull /* a bound never reached when launches come */
#define SHORT_WAIT_NS 50000000ull    /* the bound a test lets pass, with no launch */

/* ---- what a request records ---- */

static _Atomic int runs;
static _Atomic int order[8];
static _Atomic int order_used;
static pthread_t ran_on;

static int record(void *argument)
{
    int tag = (int)(intptr_t)argument;
    atomic_fetch_add(&runs, 1);
    int at = atomic_fetch_add(&order_used, 1);
    if (at < 8)
        atomic_store(&order[at], tag);
    ran_on = pthread_self();
    return 100 + tag;
}

static void reset(void)
{
    atomic_store(&runs, 0);
    atomic_store(&order_used, 0);
    /* No request of an earlier test may still be posted. */
    for (int i = 0; i < 1000 && cuda_app_thread_pending(); i++)
        cuda_app_thread_run_posted();
    assert_int_equal(cuda_app_thread_pending(), 0);
}

/* ---- application threads that launch until told to stop ---- */

static _Atomic int launching;

static void *launch_loop(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "app-launcher");
    while (atomic_load(&launching)) {
        cuda_app_thread_at_launch();
        sched_yield();
    }
    return NULL;
}

static void start_launchers(pthread_t *threads, int count)
{
    atomic_store(&launching, 1);
    for (int i = 0; i < count; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, launch_loop, NULL), 0);
}

static void stop_launchers(pthread_t *threads, int count)
{
    atomic_store(&launching, 0);
    for (int i = 0; i < count; i++)
        pthread_join(threads[i], NULL);
}

/* ---- a flare-named caller ---- */

typedef struct call {
    int tag;
    uint64_t wait_ns;
    int detach;
    int caller_is_flare;
    cuda_app_thread_outcome outcome;
    int result;
} call;

static void *flare_caller(void *argument)
{
    call *c = argument;
    pthread_setname_np(pthread_self(), "flare-caller");
    c->caller_is_flare = cuda_app_thread_is_flare();
    c->result = -1;
    c->outcome =
        cuda_app_thread_call(record, (void *)(intptr_t)c->tag, c->wait_ns, c->detach, &c->result);
    return NULL;
}

static void call_from_flare(call *c)
{
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, flare_caller, c), 0);
    pthread_join(thread, NULL);
}

/* ---- cases ---- */

static void test_runs_on_a_launching_thread(void **state)
{
    (void)state;
    reset();
    pthread_t launcher;
    start_launchers(&launcher, 1);
    call c = {.tag = 1, .wait_ns = LONG_WAIT_NS};
    call_from_flare(&c);
    stop_launchers(&launcher, 1);
    assert_int_equal(c.outcome, CUDA_APP_THREAD_RAN);
    assert_int_equal(c.result, 101);
    assert_int_equal(atomic_load(&runs), 1);
    assert_true(pthread_equal(ran_on, launcher));
    assert_int_equal(cuda_app_thread_pending(), 0);
}

static void test_withdrawn_without_a_launch_never_runs(void **state)
{
    (void)state;
    reset();
    call c = {.tag = 2, .wait_ns = SHORT_WAIT_NS};
    call_from_flare(&c);
    assert_int_equal(c.outcome, CUDA_APP_THREAD_WITHDRAWN);
    assert_int_equal(c.result, -1);
    assert_int_equal(cuda_app_thread_pending(), 0);
    for (int i = 0; i < 100; i++)
        cuda_app_thread_at_launch();
    assert_int_equal(atomic_load(&runs), 0);
}

static void test_detached_runs_at_a_later_launch_before_the_next(void **state)
{
    (void)state;
    reset();
    call first = {.tag = 3, .wait_ns = SHORT_WAIT_NS, .detach = 1};
    call_from_flare(&first);
    assert_int_equal(first.outcome, CUDA_APP_THREAD_DETACHED);
    assert_int_equal(cuda_app_thread_pending(), 1);
    assert_int_equal(atomic_load(&runs), 0);

    /* The next request waits for the detached one, which runs first. */
    pthread_t launcher;
    start_launchers(&launcher, 1);
    call second = {.tag = 4, .wait_ns = LONG_WAIT_NS};
    call_from_flare(&second);
    stop_launchers(&launcher, 1);
    assert_int_equal(second.outcome, CUDA_APP_THREAD_RAN);
    assert_int_equal(second.result, 104);
    assert_int_equal(atomic_load(&runs), 2);
    assert_int_equal(atomic_load(&order[0]), 3);
    assert_int_equal(atomic_load(&order[1]), 4);
    assert_int_equal(cuda_app_thread_pending(), 0);
}

static void test_waits_for_a_detached_one_within_its_bound(void **state)
{
    (void)state;
    reset();
    call first = {.tag = 5, .wait_ns = SHORT_WAIT_NS, .detach = 1};
    call_from_flare(&first);
    assert_int_equal(first.outcome, CUDA_APP_THREAD_DETACHED);
    /* No launch: the second cannot even be posted in its bound. */
    call second = {.tag = 6, .wait_ns = SHORT_WAIT_NS};
    call_from_flare(&second);
    assert_int_equal(second.outcome, CUDA_APP_THREAD_WITHDRAWN);
    cuda_app_thread_at_launch();
    assert_int_equal(atomic_load(&runs), 1);
    assert_int_equal(atomic_load(&order[0]), 5);
    assert_int_equal(cuda_app_thread_pending(), 0);
}

static void test_an_application_thread_runs_it_at_once(void **state)
{
    (void)state;
    reset();
    call detached = {.tag = 7, .wait_ns = SHORT_WAIT_NS, .detach = 1};
    call_from_flare(&detached);
    assert_int_equal(detached.outcome, CUDA_APP_THREAD_DETACHED);
    /* This thread is not flare's: no launch needed; the posted one first. */
    assert_int_equal(cuda_app_thread_is_flare(), 0);
    int result = -1;
    uint64_t began = core_now_ns();
    assert_int_equal(cuda_app_thread_call(record, (void *)(intptr_t)8, LONG_WAIT_NS, 0, &result),
                     CUDA_APP_THREAD_RAN);
    assert_true(core_now_ns() - began < LONG_WAIT_NS);
    assert_int_equal(result, 108);
    assert_true(pthread_equal(ran_on, pthread_self()));
    assert_int_equal(atomic_load(&runs), 2);
    assert_int_equal(atomic_load(&order[0]), 7);
    assert_int_equal(atomic_load(&order[1]), 8);
    assert_int_equal(cuda_app_thread_pending(), 0);
}

static void test_many_launching_threads_run_each_once(void **state)
{
    (void)state;
    reset();
    enum { LAUNCHERS = 4, CALLS = 200 };
    pthread_t launchers[LAUNCHERS];
    start_launchers(launchers, LAUNCHERS);
    for (int i = 0; i < CALLS; i++) {
        call c = {.tag = i % 8, .wait_ns = LONG_WAIT_NS, .detach = i % 2};
        call_from_flare(&c);
        assert_int_equal(c.outcome, CUDA_APP_THREAD_RAN);
        assert_int_equal(c.result, 100 + i % 8);
    }
    stop_launchers(launchers, LAUNCHERS);
    assert_int_equal(atomic_load(&runs), CALLS);
    assert_int_equal(cuda_app_thread_pending(), 0);
}

/* A request that runs until released: the bound passes while it runs. */
static _Atomic int blocking_started, blocking_release;

static int block_until_released(void *argument)
{
    atomic_store(&blocking_started, 1);
    while (!atomic_load(&blocking_release))
        sched_yield();
    return (int)(intptr_t)argument;
}

typedef struct blocking_call {
    int detach;
    cuda_app_thread_outcome outcome;
    int result;
} blocking_call;

static void *flare_blocking_caller(void *argument)
{
    blocking_call *c = argument;
    pthread_setname_np(pthread_self(), "flare-blocking");
    c->result = -1;
    c->outcome = cuda_app_thread_call(block_until_released, (void *)(intptr_t)42, SHORT_WAIT_NS,
                                      c->detach, &c->result);
    return NULL;
}

static void *launch_once_when_posted(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "app-once");
    while (!cuda_app_thread_pending())
        sched_yield();
    cuda_app_thread_at_launch(); /* runs the request (blocks in it) */
    return NULL;
}

/* The bound passes while the request runs: a detaching caller leaves (the
 * request finishes on its own, its result dropped); a withdrawing one
 * waits for it and gets its result, since it can no longer be withdrawn. */
static void test_the_bound_passes_while_it_runs(void **state)
{
    (void)state;
    for (int detach = 1; detach >= 0; detach--) {
        reset();
        atomic_store(&blocking_started, 0);
        atomic_store(&blocking_release, 0);
        pthread_t app, caller;
        blocking_call c = {.detach = detach};
        assert_int_equal(pthread_create(&app, NULL, launch_once_when_posted, NULL), 0);
        assert_int_equal(pthread_create(&caller, NULL, flare_blocking_caller, &c), 0);
        TEST_WAIT_UNTIL(atomic_load(&blocking_started));
        if (detach) {
            pthread_join(caller, NULL); /* returns while the request still runs */
            assert_int_equal(c.outcome, CUDA_APP_THREAD_DETACHED);
            assert_int_equal(c.result, -1);
            assert_int_equal(cuda_app_thread_pending(), 1);
            atomic_store(&blocking_release, 1);
        } else {
            /* Past the bound, still waiting: released, it returns the result. */
            uint64_t past = core_now_ns() + 2 * SHORT_WAIT_NS;
            while (core_now_ns() < past)
                sched_yield();
            atomic_store(&blocking_release, 1);
            pthread_join(caller, NULL);
            assert_int_equal(c.outcome, CUDA_APP_THREAD_RAN);
            assert_int_equal(c.result, 42);
        }
        pthread_join(app, NULL);
        assert_int_equal(cuda_app_thread_pending(), 0);
    }
}

/* A detached request no launch took is withdrawn at the caller's word and
 * never runs (a PC window whose program launched nothing: its start must
 * not run at a later launch, after the window). Only that request: one
 * with another function or argument, or a waited-for one, stays. */
static void test_a_detached_one_withdrawn_never_runs(void **state)
{
    (void)state;
    reset();
    call detached = {.tag = 2, .wait_ns = SHORT_WAIT_NS, .detach = 1};
    call_from_flare(&detached);
    assert_int_equal(detached.outcome, CUDA_APP_THREAD_DETACHED);
    assert_int_equal(cuda_app_thread_withdraw(record, (void *)(intptr_t)3), 0);
    assert_int_equal(cuda_app_thread_pending(), 1);
    assert_int_equal(cuda_app_thread_withdraw(record, (void *)(intptr_t)2), 1);
    assert_int_equal(cuda_app_thread_pending(), 0);
    assert_int_equal(cuda_app_thread_withdraw(record, (void *)(intptr_t)2), 0);
    for (int i = 0; i < 10; i++)
        cuda_app_thread_at_launch();
    assert_int_equal(atomic_load(&runs), 0);
    /* The slot is free for the next request at once. */
    pthread_t launcher;
    start_launchers(&launcher, 1);
    call next = {.tag = 4, .wait_ns = LONG_WAIT_NS};
    call_from_flare(&next);
    stop_launchers(&launcher, 1);
    assert_int_equal(next.outcome, CUDA_APP_THREAD_RAN);
    assert_int_equal(next.result, 104);
    assert_int_equal(atomic_load(&runs), 1);
    /* A request taken already (ran) is not withdrawn. */
    assert_int_equal(cuda_app_thread_withdraw(record, (void *)(intptr_t)4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_on_a_launching_thread),
        cmocka_unit_test(test_withdrawn_without_a_launch_never_runs),
        cmocka_unit_test(test_detached_runs_at_a_later_launch_before_the_next),
        cmocka_unit_test(test_waits_for_a_detached_one_within_its_bound),
        cmocka_unit_test(test_an_application_thread_runs_it_at_once),
        cmocka_unit_test(test_many_launching_threads_run_each_once),
        cmocka_unit_test(test_the_bound_passes_while_it_runs),
        cmocka_unit_test(test_a_detached_one_withdrawn_never_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
