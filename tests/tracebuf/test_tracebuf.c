/*
 * test_tracebuf.c: the shared sampling buffers and the per-device lease
 * (src/tracebuf): 400 profiling contexts of varied sizes and settings
 * sharing the buffers of 4 simulated devices, the sizing rule, the pre-pass
 * refusal, every allocation failing in turn, lease semantics, 16 threads
 * racing for 2 devices, and teardown twice and use after teardown (last,
 * since teardown is for good).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sim/sim.h"
#include "flare/flare.h"
#include "tracebuf/lease.h"
#include "tracebuf/tracebuf.h"

/* ---- A counting allocator that can fail on demand ---- */

typedef struct counting_allocator {
    atomic_size_t live_bytes;
    atomic_int live_buffers;
    atomic_int allocations;
    int fail_at; /* 1-based allocation that fails; 0: none */
} counting_allocator;

static void *counting_alloc(size_t bytes, void *user)
{
    counting_allocator *counter = user;
    int number = atomic_fetch_add(&counter->allocations, 1) + 1;
    if (counter->fail_at != 0 && number == counter->fail_at)
        return NULL;
    void *data = calloc(1, bytes);
    if (data != NULL) {
        atomic_fetch_add(&counter->live_bytes, bytes);
        atomic_fetch_add(&counter->live_buffers, 1);
    }
    return data;
}

static void counting_release(void *data, size_t bytes, void *user)
{
    counting_allocator *counter = user;
    atomic_fetch_sub(&counter->live_bytes, bytes);
    atomic_fetch_sub(&counter->live_buffers, 1);
    free(data);
}

static counting_allocator counter;

static int setup(void **state)
{
    (void)state;
    if (tracebuf_reset() != FLARE_OK)
        return -1;
    memset(&counter, 0, sizeof(counter));
    tracebuf_allocator allocator = {counting_alloc, counting_release, &counter};
    return tracebuf_set_allocator(&allocator) == FLARE_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    int status = tracebuf_reset();
    tracebuf_set_allocator(NULL);
    return status == FLARE_OK && atomic_load(&counter.live_bytes) == 0 ? 0 : -1;
}

/* ---- 400 contexts on 4 simulated devices ---- */

#define CONTEXTS 400
#define DEVICES  4

typedef struct profiling_context {
    uint64_t id;
    int device;
    size_t buffer_bytes;
    uint32_t ring_slots;
    uint64_t sample_interval_ns; /* varied like a real configuration; unused by the buffers */
    int ran;
} profiling_context;

static void test_four_hundred_contexts_share_one_buffer_set(void **state)
{
    (void)state;
    static profiling_context contexts[CONTEXTS];
    size_t largest[DEVICES] = {0};
    uint32_t most_slots[DEVICES] = {0};
    size_t sum_of_requests = 0;
    for (int i = 0; i < CONTEXTS; i++) {
        profiling_context *context = &contexts[i];
        context->id = 1000 + (uint64_t)i;
        context->device = i % DEVICES;
        /* 4 KiB .. ~1 MiB, and one context per device asks for 2 MiB. */
        context->buffer_bytes = 4096 + ((size_t)i * 7919u) % (1u << 20);
        if (i / DEVICES == 57)
            context->buffer_bytes = 2u << 20;
        context->ring_slots = 1 + (uint32_t)(i % 3); /* single, double, triple buffering */
        context->sample_interval_ns = 50000ull * (1 + (uint64_t)(i % 5));
        context->ran = 0;
        assert_int_equal(tracebuf_register(context->id, context->device, context->buffer_bytes,
                                           context->ring_slots),
                         FLARE_OK);
        if (context->buffer_bytes > largest[context->device])
            largest[context->device] = context->buffer_bytes;
        if (context->ring_slots > most_slots[context->device])
            most_slots[context->device] = context->ring_slots;
        sum_of_requests += context->buffer_bytes * context->ring_slots;
    }
    size_t expected = 0;
    for (int device = 0; device < DEVICES; device++) {
        assert_int_equal(tracebuf_build(device), FLARE_OK);
        assert_int_equal(tracebuf_build(device), FLARE_OK); /* a no-op the second time */
        uint32_t slots = 0;
        size_t slot_bytes = 0;
        assert_int_equal(tracebuf_device_shape(device, &slots, &slot_bytes), FLARE_OK);
        assert_int_equal(slots, most_slots[device]);
        assert_int_equal(slot_bytes, largest[device]);
        expected += (size_t)most_slots[device] * largest[device] + largest[device]; /* + staging */
    }
    assert_int_equal(tracebuf_memory_bytes(), expected);
    assert_int_equal(atomic_load(&counter.live_bytes), expected);
    assert_int_equal(atomic_load(&counter.live_buffers), DEVICES * 3 + DEVICES);
    /* The old way, a buffer set per context, would hold ~0.4 GB; this holds 32 MiB. */
    assert_true(expected * 10 < sum_of_requests);

    /* Each context runs: lease, a pass over its slots through the staging
     * buffer, release. Every fourth one finds its device held first. */
    const profiling_context *blocker = &contexts[0];
    for (int i = 0; i < CONTEXTS; i++) {
        profiling_context *context = &contexts[i];
        char holder[TRACEBUF_HOLDER_MAX] = "";
        if (i % 4 == 1 && blocker->device == context->device) {
            assert_int_equal(tracebuf_lease_acquire(blocker->device, blocker->id, NULL), FLARE_OK);
            assert_int_equal(tracebuf_lease_acquire(context->device, context->id, holder),
                             FLARE_ERR_STATE);
            assert_string_equal(holder, "context 1000");
            assert_int_equal(tracebuf_lease_release(blocker->device, blocker->id), FLARE_OK);
        }
        assert_int_equal(tracebuf_lease_acquire(context->device, context->id, holder), FLARE_OK);
        assert_int_equal(tracebuf_lease_use_begin(context->device, context->id), FLARE_OK);
        void *staging = NULL;
        size_t staging_bytes = 0;
        assert_int_equal(tracebuf_staging(context->device, &staging, &staging_bytes), FLARE_OK);
        assert_true(staging_bytes >= context->buffer_bytes);
        for (uint32_t slot = 0; slot < context->ring_slots; slot++) {
            void *data = NULL;
            size_t bytes = 0;
            assert_int_equal(tracebuf_slot(context->device, slot, &data, &bytes), FLARE_OK);
            assert_true(bytes >= context->buffer_bytes);
            memset(data, (int)((context->id + slot) & 0xff), context->buffer_bytes);
            memcpy(staging, data, context->buffer_bytes);
            const unsigned char *copied = staging;
            assert_int_equal(copied[context->buffer_bytes - 1], (context->id + slot) & 0xff);
        }
        assert_int_equal(tracebuf_lease_use_end(context->device, context->id), FLARE_OK);
        assert_int_equal(tracebuf_lease_release(context->device, context->id), FLARE_OK);
        assert_int_equal(tracebuf_lease_holder(context->device), 0);
        context->ran = 1;
    }
    for (int i = 0; i < CONTEXTS; i++)
        assert_true(contexts[i].ran);
    /* Running allocated nothing more. */
    assert_int_equal(tracebuf_memory_bytes(), expected);
}

static void test_registration_after_build_refused(void **state)
{
    (void)state;
    assert_int_equal(tracebuf_register(1, 0, 4096, 2), FLARE_OK);
    assert_int_equal(tracebuf_build(0), FLARE_OK);
    assert_int_equal(tracebuf_register(2, 0, 8192, 2), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_register(2, 0, 1024, 1), FLARE_ERR_STATE);
    uint32_t slots = 0;
    size_t bytes = 0;
    assert_int_equal(tracebuf_device_shape(0, &slots, &bytes), FLARE_OK);
    assert_int_equal(slots, 2);
    assert_int_equal(bytes, 4096);
    /* Another device is still in its pre-pass. */
    assert_int_equal(tracebuf_register(2, 1, 8192, 1), FLARE_OK);
    /* An allocator cannot change under built buffers. */
    assert_int_equal(tracebuf_set_allocator(NULL), FLARE_ERR_STATE);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    void *data = NULL;
    size_t bytes = 0;
    assert_int_equal(tracebuf_register(0, 0, 4096, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_register(1, -1, 4096, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_register(1, TRACEBUF_MAX_DEVICES, 4096, 1),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_register(1, 0, 0, 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_register(1, 0, TRACEBUF_MAX_REQUEST_BYTES + 1, 1),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_register(1, 0, 4096, 0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_register(1, 0, 4096, TRACEBUF_MAX_SLOTS + 1),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_build(3), FLARE_ERR_NOT_FOUND);
    assert_int_equal(tracebuf_slot(3, 0, &data, &bytes), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_register(1, 3, 4096, 2), FLARE_OK);
    assert_int_equal(tracebuf_build(3), FLARE_OK);
    assert_int_equal(tracebuf_slot(3, 2, &data, &bytes), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_slot(3, 1, NULL, &bytes), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_slot(3, 1, &data, &bytes), FLARE_OK);
    assert_non_null(data);
    assert_int_equal(bytes, 4096);
}

/* Each of the 4 allocations (3 slots + staging) fails in turn. */
static void test_each_allocation_failing(void **state)
{
    (void)state;
    assert_int_equal(tracebuf_register(7, 2, 65536, 3), FLARE_OK);
    for (int fail_at = 1; fail_at <= 4; fail_at++) {
        atomic_store(&counter.allocations, 0);
        counter.fail_at = fail_at;
        assert_int_equal(tracebuf_build(2), FLARE_ERR_NO_MEMORY);
        assert_int_equal(atomic_load(&counter.live_bytes), 0);
        assert_int_equal(atomic_load(&counter.live_buffers), 0);
        assert_int_equal(tracebuf_memory_bytes(), 0);
        void *data = NULL;
        size_t bytes = 0;
        assert_int_equal(tracebuf_slot(2, 0, &data, &bytes), FLARE_ERR_STATE);
    }
    /* Registration stayed open, and a retry works. */
    counter.fail_at = 0;
    assert_int_equal(tracebuf_register(8, 2, 131072, 1), FLARE_OK);
    assert_int_equal(tracebuf_build(2), FLARE_OK);
    assert_int_equal(tracebuf_memory_bytes(), 4 * 131072);
}

static void test_reset_refused_with_use_in_flight(void **state)
{
    (void)state;
    assert_int_equal(tracebuf_register(5, 0, 4096, 1), FLARE_OK);
    assert_int_equal(tracebuf_build(0), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 5, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_use_begin(0, 5), FLARE_OK);
    assert_int_equal(tracebuf_reset(), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_memory_bytes(), 2 * 4096);
    assert_int_equal(tracebuf_lease_release(0, 5), FLARE_OK);
    assert_int_equal(tracebuf_lease_use_end(0, 5), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(0), 0);
}

/* ---- The lease ---- */

static void test_lease_owner_reentrant(void **state)
{
    (void)state;
    char holder[TRACEBUF_HOLDER_MAX] = "";
    assert_int_equal(tracebuf_lease_acquire(1, 10, holder), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(1, 10, holder), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(1), 10);
    assert_int_equal(tracebuf_lease_release(1, 10), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(1), 10); /* one claim left */
    assert_int_equal(tracebuf_lease_release(1, 10), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(1), 0);
    assert_int_equal(tracebuf_lease_release(1, 10), FLARE_ERR_STATE);
}

static void test_lease_other_context_fails_fast(void **state)
{
    (void)state;
    char holder[TRACEBUF_HOLDER_MAX] = "";
    char reason[128];
    assert_int_equal(tracebuf_lease_acquire(0, 10, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 11, holder), FLARE_ERR_STATE);
    assert_string_equal(holder, "context 10");
    tracebuf_lease_busy_reason(0, holder, reason, sizeof(reason));
    assert_string_equal(reason, "PM sampling busy, held by context 10 on device 0");
    tracebuf_lease_note_busy(0, holder);
    /* The loser holds nothing and can neither use nor release. */
    assert_int_equal(tracebuf_lease_use_begin(0, 11), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_lease_release(0, 11), FLARE_ERR_STATE);
    /* Another device is free for it. */
    assert_int_equal(tracebuf_lease_acquire(1, 11, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(1, 11), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(0, 10), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 11, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(0, 11), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 0, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(tracebuf_lease_acquire(-1, 10, NULL), FLARE_ERR_INVALID_ARGUMENT);
}

static void test_lease_released_at_last_use(void **state)
{
    (void)state;
    assert_int_equal(tracebuf_lease_acquire(2, 20, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_use_begin(2, 20), FLARE_OK);
    assert_int_equal(tracebuf_lease_use_begin(2, 20), FLARE_OK);
    assert_int_equal(tracebuf_lease_release(2, 20), FLARE_OK);
    /* No claim left but two uses in flight: still held, and no new use. */
    assert_int_equal(tracebuf_lease_holder(2), 20);
    assert_int_equal(tracebuf_lease_in_flight(2), 2);
    assert_int_equal(tracebuf_lease_acquire(2, 21, NULL), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_lease_use_begin(2, 20), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_lease_use_end(2, 20), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(2), 20);
    assert_int_equal(tracebuf_lease_use_end(2, 20), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(2), 0);
    assert_int_equal(tracebuf_lease_use_end(2, 20), FLARE_ERR_STATE);
}

static void test_lease_release_all(void **state)
{
    (void)state;
    assert_int_equal(tracebuf_lease_acquire(0, 30, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 30, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(1, 30, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(2, 31, NULL), FLARE_OK);
    assert_int_equal(tracebuf_lease_use_begin(1, 30), FLARE_OK);
    assert_int_equal(tracebuf_lease_release_all(30), 2);
    assert_int_equal(tracebuf_lease_holder(0), 0);
    assert_int_equal(tracebuf_lease_holder(1), 30); /* its use is still in flight */
    assert_int_equal(tracebuf_lease_holder(2), 31); /* someone else's */
    assert_int_equal(tracebuf_lease_use_end(1, 30), FLARE_OK);
    assert_int_equal(tracebuf_lease_holder(1), 0);
    assert_int_equal(tracebuf_lease_release_all(30), 0);
    assert_int_equal(tracebuf_lease_release_all(31), 1);
    assert_int_equal(tracebuf_lease_holder(2), 0);
}

/* ---- 16 threads racing for 2 devices ---- */

#define STRESS_THREADS 16
#define STRESS_CYCLES  4000
#define STRESS_DEVICES 2

static atomic_int holders_now[STRESS_DEVICES];
static atomic_int exclusion_violations;
static atomic_long stress_wins;
static atomic_long stress_busy;

static void *stress_thread(void *argument)
{
    uint64_t context_id = (uint64_t)(uintptr_t)argument;
    for (int cycle = 0; cycle < STRESS_CYCLES; cycle++) {
        int device = (int)((context_id + (uint64_t)cycle) % STRESS_DEVICES);
        char holder[TRACEBUF_HOLDER_MAX];
        if (tracebuf_lease_acquire(device, context_id, holder) != FLARE_OK) {
            atomic_fetch_add(&stress_busy, 1);
            continue;
        }
        /* Re-entrant claim inside the held lease, as nested arming would do. */
        if (tracebuf_lease_acquire(device, context_id, holder) != FLARE_OK)
            atomic_fetch_add(&exclusion_violations, 1);
        if (atomic_fetch_add(&holders_now[device], 1) != 0)
            atomic_fetch_add(&exclusion_violations, 1);
        if (tracebuf_lease_use_begin(device, context_id) == FLARE_OK) {
            /* Plain, unsynchronized writes: ThreadSanitizer reports a race
             * here if the lease ever let two contexts in. */
            void *data = NULL;
            size_t bytes = 0;
            if (tracebuf_slot(device, (uint32_t)cycle % 2, &data, &bytes) == FLARE_OK) {
                uint64_t *words = data;
                words[0] = context_id;
                words[bytes / sizeof(uint64_t) - 1] += 1;
            }
            if (tracebuf_lease_use_end(device, context_id) != FLARE_OK)
                atomic_fetch_add(&exclusion_violations, 1);
        } else {
            atomic_fetch_add(&exclusion_violations, 1);
        }
        atomic_fetch_sub(&holders_now[device], 1);
        if (tracebuf_lease_release(device, context_id) != FLARE_OK ||
            tracebuf_lease_release(device, context_id) != FLARE_OK)
            atomic_fetch_add(&exclusion_violations, 1);
        atomic_fetch_add(&stress_wins, 1);
    }
    return NULL;
}

static void test_lease_stress(void **state)
{
    (void)state;
    for (int device = 0; device < STRESS_DEVICES; device++) {
        assert_int_equal(tracebuf_register(1, device, 4096, 2), FLARE_OK);
        assert_int_equal(tracebuf_build(device), FLARE_OK);
    }
    pthread_t threads[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        assert_int_equal(
            pthread_create(&threads[i], NULL, stress_thread, (void *)(uintptr_t)(100 + i)), 0);
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(atomic_load(&exclusion_violations), 0);
    assert_int_equal(atomic_load(&stress_wins) + atomic_load(&stress_busy),
                     (long)STRESS_THREADS * STRESS_CYCLES);
    assert_true(atomic_load(&stress_wins) > 0);
    for (int device = 0; device < STRESS_DEVICES; device++) {
        assert_int_equal(tracebuf_lease_holder(device), 0);
        assert_int_equal(tracebuf_lease_in_flight(device), 0);
    }
}

/* ---- Teardown: twice, in any order, then use after it ---- */

static void test_teardown_twice_and_use_after(void **state)
{
    (void)state;
    assert_int_equal(tracebuf_register(40, 0, 4096, 2), FLARE_OK);
    assert_int_equal(tracebuf_build(0), FLARE_OK);
    assert_int_equal(tracebuf_lease_acquire(0, 40, NULL), FLARE_OK);
    /* What an atexit handler and a library destructor would both do. */
    assert_int_equal(tracebuf_teardown(), FLARE_OK);
    assert_int_equal(tracebuf_teardown(), FLARE_ERR_STATE);
    assert_true(tracebuf_torn_down());
    /* Everything is freed and the lease is gone. */
    assert_int_equal(tracebuf_memory_bytes(), 0);
    assert_int_equal(atomic_load(&counter.live_bytes), 0);
    assert_int_equal(tracebuf_lease_holder(0), 0);
    /* A late user gets clean errors. */
    void *data = NULL;
    size_t bytes = 0;
    char holder[TRACEBUF_HOLDER_MAX] = "";
    assert_int_equal(tracebuf_slot(0, 0, &data, &bytes), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_staging(0, &data, &bytes), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_register(41, 0, 4096, 1), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_build(0), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_reset(), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_set_allocator(NULL), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_lease_acquire(0, 41, holder), FLARE_ERR_STATE);
    assert_string_equal(holder, "shutdown");
    assert_int_equal(tracebuf_lease_release(0, 40), FLARE_ERR_STATE);
    assert_int_equal(tracebuf_lease_release_all(40), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_four_hundred_contexts_share_one_buffer_set, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_registration_after_build_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_allocation_failing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reset_refused_with_use_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_owner_reentrant, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_other_context_fails_fast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_released_at_last_use, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_release_all, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lease_stress, setup, teardown),
        /* Last: teardown is for good. */
        cmocka_unit_test_setup(test_teardown_twice_and_use_after, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
