/*
 * test_cuda_ranges.c: the NVTX start/end range table, against a naive model
 * under random operations (forcing long probe chains and wrap-around), at
 * capacity, and with starts and ends on different threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_ranges.h"

static cuda_range_table table = CUDA_RANGE_TABLE_INITIALIZER;

static void reset(void)
{
    memset(table.slots, 0, sizeof(table.slots));
    table.count = 0;
}

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static void test_matches_naive_model(void **state)
{
    (void)state;
    reset();
    /* The model: which ids are open, with their start times. Ids come from a
     * range a little larger than the table, so the table runs near full and
     * chains grow long and wrap. */
    enum { ID_SPACE = CUDA_RANGES_OPEN_MAX + 512 };
    static uint64_t model_start[ID_SPACE + 1];
    memset(model_start, 0, sizeof(model_start));
    uint32_t model_count = 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < 200000; step++) {
        uint64_t id = 1 + next_random(&seed) % ID_SPACE;
        int start = (next_random(&seed) % 100) < 55;
        if (start && model_start[id] == 0) {
            char name[32];
            snprintf(name, sizeof(name), "range %llu", (unsigned long long)id);
            int status = cuda_range_start(&table, id, name, 1000 + (uint64_t)step, id * 7);
            if (model_count < CUDA_RANGES_OPEN_MAX) {
                assert_int_equal(status, 0);
                model_start[id] = 1000 + (uint64_t)step;
                model_count++;
            } else {
                assert_int_equal(status, -1); /* full: refused, counted by the caller */
            }
        } else if (!start) {
            cuda_open_range range;
            int status = cuda_range_end(&table, id, &range);
            if (model_start[id] != 0) {
                assert_int_equal(status, 0);
                assert_int_equal(range.id, id);
                assert_int_equal(range.start_ns, model_start[id]);
                assert_int_equal(range.instance_id, id * 7);
                char name[32];
                snprintf(name, sizeof(name), "range %llu", (unsigned long long)id);
                assert_string_equal(range.name, name);
                model_start[id] = 0;
                model_count--;
            } else {
                assert_int_equal(status, -1);
            }
        }
        assert_int_equal(table.count, model_count);
    }
}

static void test_zero_id_and_unknown_end(void **state)
{
    (void)state;
    reset();
    cuda_open_range range;
    assert_int_equal(cuda_range_start(&table, 0, "zero", 1, 1), -1);
    assert_int_equal(cuda_range_end(&table, 0, &range), -1);
    assert_int_equal(cuda_range_end(&table, 42, &range), -1);
    assert_int_equal(cuda_range_start(&table, 42, "x", 1, 1), 0);
    assert_int_equal(cuda_range_end(&table, 42, &range), 0);
    assert_int_equal(cuda_range_end(&table, 42, &range), -1);
}

#define THREADS    4
#define PER_THREAD 5000

typedef struct handoff {
    _Atomic uint64_t ids[PER_THREAD];
    int thread;
    int ended;
} handoff;

static handoff handoffs[THREADS];

static void *starter(void *argument)
{
    handoff *h = argument;
    for (int i = 0; i < PER_THREAD; i++) {
        uint64_t id = ((uint64_t)(h->thread + 1) << 32) | (uint64_t)(i + 1);
        while (cuda_range_start(&table, id, "cross", (uint64_t)i, id) != 0)
            sched_yield(); /* full: the enders will make room */
        atomic_store(&h->ids[i], id);
    }
    return NULL;
}

/* Each ender finishes the ranges another thread started. */
static void *ender(void *argument)
{
    handoff *h = argument;
    for (int i = 0; i < PER_THREAD; i++) {
        uint64_t id;
        while ((id = atomic_load(&h->ids[i])) == 0)
            sched_yield(); /* 8 threads share 2 cores here: let the starter run */
        cuda_open_range range;
        if (cuda_range_end(&table, id, &range) == 0 && range.id == id && range.instance_id == id)
            h->ended++;
    }
    return NULL;
}

static void test_start_and_end_on_different_threads(void **state)
{
    (void)state;
    reset();
    pthread_t starters[THREADS], enders[THREADS];
    for (int t = 0; t < THREADS; t++) {
        memset(&handoffs[t], 0, sizeof(handoffs[t]));
        handoffs[t].thread = t;
    }
    for (int t = 0; t < THREADS; t++) {
        assert_int_equal(pthread_create(&enders[t], NULL, ender, &handoffs[t]), 0);
        assert_int_equal(pthread_create(&starters[t], NULL, starter, &handoffs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(starters[t], NULL);
        pthread_join(enders[t], NULL);
        assert_int_equal(handoffs[t].ended, PER_THREAD);
    }
    assert_int_equal(table.count, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_naive_model),
        cmocka_unit_test(test_zero_id_and_unknown_end),
        cmocka_unit_test(test_start_and_end_on_different_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
