/*
 * test_ring.c: the event ring under real threads: two producers and one
 * collector draining concurrently; nothing lost when there is room, exact
 * drop counts when there is not.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "core/ring.h"

#define PRODUCERS 2

typedef struct producer {
    core_ring ring;
    uint64_t to_push;
    uint64_t pushed;
    uint64_t refused;
    /* consumer-side view */
    uint64_t received;
    uint64_t next_expected;
    int out_of_order;
} producer;

static void *produce(void *argument)
{
    producer *p = argument;
    for (uint64_t i = 0; i < p->to_push; i++) {
        core_event *event = core_ring_reserve(&p->ring);
        if (event == NULL) {
            p->refused++;
            continue;
        }
        event->kind = CORE_EVENT_KERNEL;
        event->id = i;
        core_ring_commit(&p->ring);
        p->pushed++;
        if ((i & 1023) == 0)
            sched_yield();
    }
    return NULL;
}

static void check_order(const core_event *event, void *user)
{
    producer *p = user;
    /* Sequence numbers only grow; gaps are the dropped ones. */
    if (event->id < p->next_expected)
        p->out_of_order = 1;
    p->next_expected = event->id + 1;
    p->received++;
}

typedef struct consumer_args {
    producer *producers;
    _Atomic int done;
} consumer_args;

static void *consume(void *argument)
{
    consumer_args *args = argument;
    for (;;) {
        int done = atomic_load(&args->done);
        size_t drained = 0;
        for (int i = 0; i < PRODUCERS; i++)
            drained +=
                core_ring_drain(&args->producers[i].ring, 4096, check_order, &args->producers[i]);
        if (done && drained == 0)
            break;
        if (drained == 0)
            sched_yield();
    }
    return NULL;
}

static void run(uint32_t capacity, uint64_t per_producer, producer *producers)
{
    for (int i = 0; i < PRODUCERS; i++) {
        memset(&producers[i], 0, sizeof(producers[i]));
        assert_int_equal(core_ring_init(&producers[i].ring, capacity), FLARE_OK);
        producers[i].to_push = per_producer;
    }
    consumer_args args = {.producers = producers};
    pthread_t consumer, threads[PRODUCERS];
    assert_int_equal(pthread_create(&consumer, NULL, consume, &args), 0);
    for (int i = 0; i < PRODUCERS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, produce, &producers[i]), 0);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(threads[i], NULL);
    atomic_store(&args.done, 1);
    pthread_join(consumer, NULL);
}

static void test_nothing_lost_when_room(void **state)
{
    (void)state;
    producer producers[PRODUCERS];
    /* Capacity holds every event, so nothing can be dropped whatever the timing. */
    run(1u << 17, 100000, producers);
    for (int i = 0; i < PRODUCERS; i++) {
        assert_int_equal(producers[i].refused, 0);
        assert_int_equal(core_ring_dropped(&producers[i].ring), 0);
        assert_int_equal(producers[i].received, 100000);
        assert_int_equal(producers[i].out_of_order, 0);
        assert_int_equal(producers[i].next_expected, 100000);
        core_ring_destroy(&producers[i].ring);
    }
}

static void test_concurrent_drops_are_exact(void **state)
{
    (void)state;
    producer producers[PRODUCERS];
    /* A small ring under a concurrent consumer: some events drop; every event
     * is either received or counted, never both, never neither. */
    run(64, 200000, producers);
    for (int i = 0; i < PRODUCERS; i++) {
        assert_int_equal(producers[i].pushed + producers[i].refused, 200000);
        assert_int_equal(core_ring_dropped(&producers[i].ring), producers[i].refused);
        assert_int_equal(producers[i].received, producers[i].pushed);
        assert_int_equal(producers[i].out_of_order, 0);
        core_ring_destroy(&producers[i].ring);
    }
}

static void count_event(const core_event *event, void *user)
{
    (void)event;
    (*(uint64_t *)user)++;
}

static void test_full_ring_drops_exactly_the_excess(void **state)
{
    (void)state;
    core_ring ring;
    assert_int_equal(core_ring_init(&ring, 64), FLARE_OK);
    for (int i = 0; i < 100; i++) {
        core_event *event = core_ring_reserve(&ring);
        if (event != NULL)
            core_ring_commit(&ring);
    }
    assert_int_equal(core_ring_dropped(&ring), 36);
    assert_int_equal(core_ring_pending(&ring), 64);
    uint64_t seen = 0;
    assert_int_equal(core_ring_drain(&ring, 1000, count_event, &seen), 64);
    assert_int_equal(seen, 64);
    /* Room again after the drain. */
    assert_non_null(core_ring_reserve(&ring));
    core_ring_destroy(&ring);
}

static void test_capacity_bounds(void **state)
{
    (void)state;
    core_ring ring;
    assert_int_equal(core_ring_init(&ring, 0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(core_ring_init(&ring, 32), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(core_ring_init(&ring, 100), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(core_ring_init(&ring, CORE_RING_MAX_CAPACITY * 2), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(core_ring_init(&ring, 64), FLARE_OK);
    core_ring_destroy(&ring);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_lost_when_room),
        cmocka_unit_test(test_concurrent_drops_are_exact),
        cmocka_unit_test(test_full_ring_drops_exactly_the_excess),
        cmocka_unit_test(test_capacity_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
