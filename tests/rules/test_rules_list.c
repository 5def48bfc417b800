/*
 * test_rules_list.c: ';'-separated rule lists (src/rules/rule.h,
 * rules_parse_list): each item's span, status and exact message, empty
 * items, the capacity bound; and what a list asks a backend to set up before
 * any rule fires (rules_list_wants_replay, rules_list_actions,
 * rules_list_engines). The rules themselves: test_rules_parse.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "rules/rule.h"

/* ---- lists ---- */

static rules_list_entry entries[RULES_LIST_MAX];

static void expect_entry(const char *list, size_t index, int status, const char *text,
                         const char *error)
{
    const rules_list_entry *entry = &entries[index];
    assert_int_equal(entry->status, status);
    assert_int_equal(entry->length, strlen(text));
    assert_memory_equal(list + entry->offset, text, entry->length);
    if (strcmp(entry->error, error) != 0)
        fail_msg("entry %zu of '%s':\n  message  %s\n  expected %s", index, list, entry->error,
                 error);
}

static void test_lists(void **state)
{
    (void)state;
    size_t count = 99;
    assert_int_equal(rules_parse_list("", entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 0);
    assert_int_equal(rules_parse_list(" \t\n", entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 0);

    const char *two = "kernel_launch_rate < 500/s for 2s;gpu0.utilization < 20% ";
    assert_int_equal(rules_parse_list(two, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 2);
    expect_entry(two, 0, FLARE_OK, "kernel_launch_rate < 500/s for 2s", "");
    expect_entry(two, 1, FLARE_OK, "gpu0.utilization < 20%", "");
    assert_int_equal(entries[1].rule.metric, RULES_METRIC_GPU_UTILIZATION);

    /* A refused rule does not stop the others; its columns count from its
     * own first character. */
    const char *mixed = "kernel_launch_rate < 500/s;  gpu0.power > 300 ; custom.tokens < 5/s";
    assert_int_equal(rules_parse_list(mixed, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 3);
    expect_entry(mixed, 0, FLARE_OK, "kernel_launch_rate < 500/s", "");
    expect_entry(mixed, 1, FLARE_ERR_INVALID_ARGUMENT, "gpu0.power > 300",
                 "at column 14: '300' needs a unit: write 300W (a power is written in mW or W)");
    expect_entry(mixed, 2, FLARE_OK, "custom.tokens < 5/s", "");
    assert_int_equal(entries[1].rule.metric, 0);

    const char *middle = "kernel_launch_rate < 500/s;  ;custom.tokens < 5/s";
    assert_int_equal(rules_parse_list(middle, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 3);
    expect_entry(middle, 1, FLARE_ERR_INVALID_ARGUMENT, "",
                 "empty rule between the ';' at column 27 and the ';' at column 30");
    expect_entry(middle, 2, FLARE_OK, "custom.tokens < 5/s", "");

    const char *leading = " ;kernel_launch_rate < 500/s";
    assert_int_equal(rules_parse_list(leading, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 2);
    expect_entry(leading, 0, FLARE_ERR_INVALID_ARGUMENT, "",
                 "empty rule before the ';' at column 2");
    expect_entry(leading, 1, FLARE_OK, "kernel_launch_rate < 500/s", "");

    const char *trailing = "kernel_launch_rate < 500/s;";
    assert_int_equal(rules_parse_list(trailing, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 2);
    expect_entry(trailing, 0, FLARE_OK, "kernel_launch_rate < 500/s", "");
    expect_entry(trailing, 1, FLARE_ERR_INVALID_ARGUMENT, "",
                 "empty rule after the ';' at column 27");

    const char *only = ";";
    assert_int_equal(rules_parse_list(only, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 2);
    expect_entry(only, 0, FLARE_ERR_INVALID_ARGUMENT, "", "empty rule before the ';' at column 1");
    expect_entry(only, 1, FLARE_ERR_INVALID_ARGUMENT, "", "empty rule after the ';' at column 1");

    /* An item longer than a rule may be is refused, not cut short. */
    static char long_list[RULES_TEXT_MAX + 64];
    memset(long_list, ' ', sizeof(long_list));
    memcpy(long_list, "kernel_launch_rate < 1/s;", 25);
    memcpy(long_list + 25, "kernel_launch_rate < 2/s", 24);
    long_list[25 + RULES_TEXT_MAX] = 'x';
    long_list[26 + RULES_TEXT_MAX] = '\0';
    assert_int_equal(rules_parse_list(long_list, entries, RULES_LIST_MAX, &count), FLARE_OK);
    assert_int_equal(count, 2);
    assert_int_equal(entries[0].status, FLARE_OK);
    assert_int_equal(entries[1].status, FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(entries[1].error, "the rule is longer than 1024 characters");

    /* More items than entries: the first ones are parsed, the count says
     * how many there were. */
    const char *three = "kernel_launch_rate < 1/s; bogus; kernel_launch_rate < 3/s";
    assert_int_equal(rules_parse_list(three, entries, 2, &count), FLARE_ERR_FULL);
    assert_int_equal(count, 3);
    assert_int_equal(entries[0].status, FLARE_OK);
    assert_int_equal(entries[1].status, FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(rules_parse_list(three, NULL, 0, &count), FLARE_ERR_FULL);
    assert_int_equal(count, 3);

    assert_int_equal(rules_parse_list(NULL, entries, 1, &count), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(rules_parse_list("a", entries, 1, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(rules_parse_list("a", NULL, 1, &count), FLARE_ERR_INVALID_ARGUMENT);
}

/* Whether FLARE_DEEP_WHEN asks for replays: only rules that parse count. */
static void test_list_wants_replay(void **state)
{
    (void)state;
    assert_int_equal(rules_list_wants_replay(NULL), 0);
    assert_int_equal(rules_list_wants_replay(""), 0);
    assert_int_equal(rules_list_wants_replay("  ;  "), 0);
    assert_int_equal(rules_list_wants_replay("bogus"), 0);
    assert_int_equal(rules_list_wants_replay("kernel_launch_rate < 500/s; gpu0.utilization < 20% "
                                             "action window"),
                     0);
    assert_int_equal(rules_list_wants_replay("kernel_launch_rate < 500/s action replay"), 1);
    assert_int_equal(rules_list_wants_replay("kernel_launch_rate < 500/s; gpu0.power > 300W action "
                                             "range forward"),
                     1);
    /* A refused rule is ignored, whatever it says: the one after it counts. */
    assert_int_equal(rules_list_wants_replay("kernel_launch_rate < 500 action replay; "
                                             "custom.tokens < 5/s action replay"),
                     1);
    assert_int_equal(rules_list_wants_replay("kernel_launch_rate < 500 action replay; "
                                             "kernel_launch_rate < 500/s action range"),
                     0);
    assert_int_equal(rules_list_wants_replay("kernel_launch_rate < 500/s replay_budget 1s"), 0);
    /* Like rules_parse_list with RULES_LIST_MAX entries: items past the first
     * RULES_LIST_MAX are not read. */
    static char list[(RULES_LIST_MAX + 1) * 64];
    size_t used = 0;
    for (int i = 0; i < RULES_LIST_MAX; i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "kernel_launch_rate < 5/s;");
    snprintf(list + used, sizeof(list) - used, "kernel_launch_rate < 5/s action replay");
    assert_int_equal(rules_list_wants_replay(list), 0);
    used = 0;
    for (int i = 0; i < RULES_LIST_MAX - 1; i++)
        used += (size_t)snprintf(list + used, sizeof(list) - used, "kernel_launch_rate < 5/s;");
    snprintf(list + used, sizeof(list) - used, "kernel_launch_rate < 5/s action replay");
    assert_int_equal(rules_list_wants_replay(list), 1);
}

/* Each action the list's valid rules ask for, as one bit each: what the
 * backend sets up early (PM sampling for windows, module variables for
 * ranges). A refused rule adds nothing. */
static void test_list_actions(void **state)
{
    (void)state;
    assert_int_equal(rules_list_actions(NULL), 0);
    assert_int_equal(rules_list_actions("bogus; kernel_launch_rate < 5 action range x"), 0);
    assert_int_equal(rules_list_actions("kernel_launch_rate < 500/s"), RULES_ACTIONS_WINDOW);
    assert_int_equal(rules_list_actions("kernel_launch_rate < 500/s action replay"),
                     RULES_ACTIONS_REPLAY);
    assert_int_equal(rules_list_actions("kernel_launch_rate < 500/s action range step; "
                                        "gpu0.utilization < 20% action window"),
                     RULES_ACTIONS_RANGE | RULES_ACTIONS_WINDOW);
    assert_int_equal(rules_list_actions("kernel_launch_rate < 500/s action range step; bogus; "
                                        "kernel_duration_p99 > 5ms action replay"),
                     RULES_ACTIONS_RANGE | RULES_ACTIONS_REPLAY);
}

static void test_list_engines(void **state)
{
    (void)state;
    assert_int_equal(rules_list_engines(NULL), 0);
    assert_int_equal(rules_list_engines("kernel_launch_rate < 500/s"), RULES_ENGINES_PM);
    assert_int_equal(rules_list_engines("kernel_launch_rate < 500/s engine pc"), RULES_ENGINES_PC);
    /* Replay rules open no window: no engine. A refused item adds nothing. */
    assert_int_equal(rules_list_engines("kernel_duration_p99 > 5ms action replay; bogus engine pc"),
                     0);
    assert_int_equal(rules_list_engines("gpu0.utilization < 20% engine pc; "
                                        "kernel_launch_rate < 5/s action window"),
                     RULES_ENGINES_PC | RULES_ENGINES_PM);
    /* Engine auto is its own bit: a backend may need both engines ready. */
    assert_int_equal(rules_list_engines("gpu0.utilization < 20% engine auto; "
                                        "kernel_launch_rate < 5/s; bogus engine auto"),
                     RULES_ENGINES_AUTO | RULES_ENGINES_PM);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_list_wants_replay),
        cmocka_unit_test(test_list_actions),
        cmocka_unit_test(test_list_engines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
