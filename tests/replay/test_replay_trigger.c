/*
 * test_replay_trigger.c: triggered replays (src/replay/replay_trigger.c),
 * the one-shot replays a rule with action replay arms: one outstanding at a
 * time, taken only by the named kernel and only once (also with threads
 * racing for it), cancelled only while armed, finished by its record, and
 * charged to the process's replay time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "replay/replay.h"
#include "replay/replay_internal.h"

static int reset(void **state)
{
    (void)state;
    replay_reset_for_tests();
    return 0;
}

static void test_one_at_a_time_and_taken_once(void **state)
{
    (void)state;
    char error[256] = "";
    uint64_t id = 0, other = 0;
    assert_false(replay_configured());
    assert_int_equal(replay_trigger_arm_kernel("gemm", &id, error, sizeof(error)), FLARE_OK);
    assert_true(replay_configured()); /* the trigger-only selection */
    assert_int_equal(replay_trigger_arm_kernel("relu", &other, error, sizeof(error)),
                     FLARE_ERR_STATE);
    assert_non_null(strstr(error, "another triggered replay"));
    uint64_t trigger = 0;
    /* The selection replays nothing but the trigger. */
    assert_false(replay_selection_matches("relu", &trigger));
    assert_int_equal(trigger, 0);
    assert_false(replay_selection_matches("gemm_but_longer", &trigger));
    assert_true(replay_selection_matches("gemm", &trigger));
    assert_int_equal(trigger, id);
    assert_false(replay_selection_matches("gemm", &trigger)); /* once */
    replay_trigger_result result;
    assert_int_equal(replay_trigger_status(id, &result), FLARE_OK);
    assert_int_equal(result.state, REPLAY_TRIGGER_TAKEN);
    assert_int_equal(replay_trigger_cancel(id), FLARE_ERR_STATE); /* too late */
    /* Its record finishes it and is charged. */
    replay_record *record = calloc(1, sizeof(*record));
    assert_non_null(record);
    record->trigger_id = id;
    record->launch_id = 42;
    record->begin_ns = 1000;
    record->end_ns = 5000;
    replay_trigger_finished(record);
    free(record);
    assert_int_equal(replay_trigger_status(id, &result), FLARE_OK);
    assert_int_equal(result.state, REPLAY_TRIGGER_DONE);
    assert_int_equal(result.launch_id, 42);
    assert_int_equal(result.declined, 0);
    assert_int_equal(replay_trigger_spent_ns(), 4000);
    /* Now another may be armed, and cancelled while armed. */
    assert_int_equal(replay_trigger_arm_kernel("relu", &other, error, sizeof(error)), FLARE_OK);
    assert_int_not_equal(other, id);
    assert_int_equal(replay_trigger_status(id, &result), FLARE_ERR_NOT_FOUND);
    assert_int_equal(replay_trigger_cancel(other), FLARE_OK);
    assert_false(replay_selection_matches("relu", &trigger));
    assert_int_equal(replay_trigger_status(other, &result), FLARE_OK);
    assert_int_equal(result.state, REPLAY_TRIGGER_CANCELLED);
    assert_int_equal(replay_trigger_spent_ns(), 4000);
}

static void test_bad_names(void **state)
{
    (void)state;
    char error[256] = "", name[REPLAY_TRIGGER_NAME_MAX + 1];
    uint64_t id = 0;
    assert_int_equal(replay_trigger_arm_kernel("", &id, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(replay_trigger_arm_kernel(NULL, &id, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    memset(name, 'k', REPLAY_TRIGGER_NAME_MAX);
    name[REPLAY_TRIGGER_NAME_MAX] = '\0';
    assert_int_equal(replay_trigger_arm_kernel(name, &id, error, sizeof(error)),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_false(replay_configured());        /* nothing was installed */
    name[REPLAY_TRIGGER_NAME_MAX - 1] = '\0'; /* 255 bytes: the longest a launch names */
    assert_int_equal(replay_trigger_arm_kernel(name, &id, error, sizeof(error)), FLARE_OK);
}

/* A range trigger is taken by the range's next occurrence only, never by a
 * kernel of that name; it cannot replace flare replay's own selection. */
static void test_range_triggers(void **state)
{
    (void)state;
    char error[256] = "";
    uint64_t id = 0, trigger = 0;
    assert_int_equal(replay_trigger_arm_range("step", &id, error, sizeof(error)), FLARE_OK);
    assert_false(replay_selection_matches("step", &trigger)); /* a kernel named step */
    assert_int_equal(replay_trigger_take_range("other"), 0);
    assert_int_equal(replay_trigger_take_range("step"), id);
    assert_int_equal(replay_trigger_take_range("step"), 0); /* once */
    replay_trigger_lost(id, "no span");
    replay_trigger_result result;
    assert_int_equal(replay_trigger_status(id, &result), FLARE_OK);
    assert_int_equal(result.state, REPLAY_TRIGGER_DONE);
    assert_int_equal(result.declined, 1);
    assert_string_equal(result.reason, "no span");
    /* Cancelled while armed: its occurrence is no longer looked for. */
    assert_int_equal(replay_trigger_arm_range("step", &id, error, sizeof(error)), FLARE_OK);
    assert_int_equal(replay_trigger_cancel(id), FLARE_OK);
    assert_int_equal(replay_trigger_take_range("step"), 0);

    replay_reset_for_tests();
    replay_selection selection;
    memset(&selection, 0, sizeof(selection));
    snprintf(selection.kernel_regex, sizeof(selection.kernel_regex), "gemm");
    assert_int_equal(replay_selection_apply(&selection, error, sizeof(error)), FLARE_OK);
    assert_int_equal(replay_trigger_arm_range("step", &id, error, sizeof(error)),
                     FLARE_ERR_UNSUPPORTED);
    assert_non_null(strstr(error, "flare replay's own selection"));
    /* A kernel trigger goes beside it, with its metrics. */
    assert_int_equal(replay_trigger_arm_kernel("relu", &id, error, sizeof(error)), FLARE_OK);
    assert_true(replay_selection_matches("relu", &trigger));
    assert_int_equal(trigger, id);
    assert_true(replay_selection_matches("gemm", &trigger)); /* flare replay's own */
    assert_int_equal(trigger, 0);
}

/* Threads launching the named kernel race for each armed trigger: every
 * trigger is taken exactly once, by one of them. */
#define RACERS 4
#define ROUNDS 2000
static atomic_int stop_racing;
static atomic_uint_fast64_t taken_total;

static void *racer(void *argument)
{
    (void)argument;
    while (!atomic_load(&stop_racing)) {
        uint64_t trigger = 0;
        if (replay_selection_matches("hot", &trigger) && trigger != 0)
            atomic_fetch_add(&taken_total, 1);
    }
    return NULL;
}

static void test_threads_take_each_trigger_once(void **state)
{
    (void)state;
    atomic_store(&stop_racing, 0);
    atomic_store(&taken_total, 0);
    char error[256];
    uint64_t id = 0;
    /* The selection exists before the racers start (installed once). */
    assert_int_equal(replay_trigger_arm_kernel("hot", &id, error, sizeof(error)), FLARE_OK);
    pthread_t threads[RACERS];
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, racer, NULL), 0);
    replay_record *record = calloc(1, sizeof(*record));
    assert_non_null(record);
    for (int round = 0; round < ROUNDS; round++) {
        if (round > 0)
            assert_int_equal(replay_trigger_arm_kernel("hot", &id, error, sizeof(error)), FLARE_OK);
        replay_trigger_result result;
        do {
            assert_int_equal(replay_trigger_status(id, &result), FLARE_OK);
        } while (result.state == REPLAY_TRIGGER_ARMED);
        assert_int_equal(result.state, REPLAY_TRIGGER_TAKEN);
        record->trigger_id = id;
        record->begin_ns = 0;
        record->end_ns = 1;
        replay_trigger_finished(record);
    }
    atomic_store(&stop_racing, 1);
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    free(record);
    assert_int_equal(atomic_load(&taken_total), ROUNDS);
    assert_int_equal(replay_trigger_spent_ns(), ROUNDS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_at_a_time_and_taken_once, reset, reset),
        cmocka_unit_test_setup_teardown(test_bad_names, reset, reset),
        cmocka_unit_test_setup_teardown(test_range_triggers, reset, reset),
        cmocka_unit_test_setup_teardown(test_threads_take_each_trigger_once, reset, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
