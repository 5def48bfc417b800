/*
 * test_kernel_time.c: recent kernels' GPU time by name (src/rules/
 * kernel_time.c), what a rule with action replay uses to choose the kernel
 * when its metric names none: the name with the most GPU time in a window,
 * not the most launched one; what the ring forgot is said; a full name
 * table counts the rest and never chooses them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "flare/flare.h"
#include "rules/kernel_time.h"

static void test_most_time_not_most_launches(void **state)
{
    (void)state;
    rules_kernel_time *times = NULL;
    assert_int_equal(rules_kernel_time_create(&times), FLARE_OK);
    rules_kernel_top top;
    assert_int_equal(rules_kernel_time_top(times, 0, 1000, &top), 0); /* nothing yet */
    for (uint64_t i = 0; i < 100; i++)
        rules_kernel_time_add(times, "many_short", 100 + i, 10); /* 1,000 ns */
    rules_kernel_time_add(times, "few_long", 150, 600);
    rules_kernel_time_add(times, "few_long", 160, 600); /* 1,200 ns */
    rules_kernel_time_add(times, "before", 50, 100000); /* outside the window */
    assert_int_equal(rules_kernel_time_top(times, 100, 1000, &top), 1);
    assert_string_equal(top.name, "few_long");
    assert_int_equal(top.total_ns, 1200);
    assert_int_equal(top.kernels, 102);
    assert_int_equal(top.covered_from_ns, 100);
    /* A window that holds only the long one from before. */
    assert_int_equal(rules_kernel_time_top(times, 0, 99, &top), 1);
    assert_string_equal(top.name, "before");
    rules_kernel_time_free(times);
}

static void test_full_ring_says_what_it_covers(void **state)
{
    (void)state;
    rules_kernel_time *times = NULL;
    assert_int_equal(rules_kernel_time_create(&times), FLARE_OK);
    /* One more lap than the ring holds: the first lap is forgotten. */
    for (uint64_t i = 0; i < 2 * RULES_KERNEL_TIME_RING; i++)
        rules_kernel_time_add(times, i % 2 ? "odd" : "even", 1000 + i, i % 2 ? 2 : 1);
    rules_kernel_top top;
    assert_int_equal(rules_kernel_time_top(times, 0, UINT64_MAX, &top), 1);
    assert_string_equal(top.name, "odd");
    assert_int_equal(top.kernels, RULES_KERNEL_TIME_RING);
    assert_int_equal(top.total_ns, RULES_KERNEL_TIME_RING); /* half of them, 2 ns each */
    assert_int_equal(top.covered_from_ns, 1000 + RULES_KERNEL_TIME_RING);
    rules_kernel_time_free(times);
}

static void test_full_name_table_counts_the_rest(void **state)
{
    (void)state;
    rules_kernel_time *times = NULL;
    assert_int_equal(rules_kernel_time_create(&times), FLARE_OK);
    char name[32];
    for (int i = 0; i < RULES_KERNEL_TIME_NAMES; i++) {
        snprintf(name, sizeof(name), "kernel_%d", i);
        rules_kernel_time_add(times, name, 10, 1);
    }
    /* Three quarters of the table hold names; the rest were counted. */
    uint64_t unnamed = rules_kernel_time_unnamed(times);
    assert_int_equal(unnamed, RULES_KERNEL_TIME_NAMES - RULES_KERNEL_TIME_NAMES * 3 / 4);
    /* A late name with the most time is never chosen; a known one still is. */
    rules_kernel_time_add(times, "late_and_long", 11, 1000);
    rules_kernel_time_add(times, "kernel_0", 11, 500);
    assert_int_equal(rules_kernel_time_unnamed(times), unnamed + 1);
    rules_kernel_top top;
    assert_int_equal(rules_kernel_time_top(times, 0, 100, &top), 1);
    assert_string_equal(top.name, "kernel_0");
    assert_int_equal(top.total_ns, 501);
    /* A NULL name is counted, not stored. */
    rules_kernel_time_add(times, NULL, 12, 5);
    assert_int_equal(rules_kernel_time_unnamed(times), unnamed + 2);
    rules_kernel_time_free(times);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_most_time_not_most_launches),
        cmocka_unit_test(test_full_ring_says_what_it_covers),
        cmocka_unit_test(test_full_name_table_counts_the_rest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
