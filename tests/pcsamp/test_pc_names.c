/*
 * test_pc_names.c: the bounded function-name table of PC sampling's
 * hardware side (pcsamp/pc_names.c): names kept whole at addresses that
 * never move while the table grows, one copy per key, and both bounds
 * (names and bytes) refusing and counting, never keeping a name in part.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "pcsamp/pc_names.h"

static void test_kept_whole_and_once(void **state)
{
    (void)state;
    pc_names *names = NULL;
    assert_int_equal(pc_names_create(16, 1 << 20, &names), FLARE_OK);
    char key[5000], value[6000];
    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    assert_null(pc_names_find(names, key));
    const char *kept = pc_names_add(names, key, value);
    assert_non_null(kept);
    assert_ptr_not_equal(kept, value); /* a copy */
    assert_string_equal(kept, value);
    assert_ptr_equal(pc_names_find(names, key), kept);
    /* Added again (another value): the first copy stays. */
    assert_ptr_equal(pc_names_add(names, key, "other"), kept);
    assert_int_equal(pc_names_count(names), 1);
    /* A key that differs only at its end is another name. */
    key[sizeof(key) - 2] = 'x';
    assert_null(pc_names_find(names, key));
    assert_string_equal(pc_names_add(names, key, "second"), "second");
    assert_int_equal(pc_names_count(names), 2);
    assert_int_equal(pc_names_refused(names), 0);
    pc_names_destroy(names);
}

static void test_addresses_survive_growth(void **state)
{
    (void)state;
    pc_names *names = NULL;
    assert_int_equal(pc_names_create(4096, 1 << 20, &names), FLARE_OK);
    const char *kept[2000];
    char key[32], value[32];
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "_Z%dk", i);
        snprintf(value, sizeof(value), "kernel_%d", i);
        kept[i] = pc_names_add(names, key, value);
        assert_non_null(kept[i]);
    }
    for (int i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "_Z%dk", i);
        snprintf(value, sizeof(value), "kernel_%d", i);
        assert_ptr_equal(pc_names_find(names, key), kept[i]);
        assert_string_equal(kept[i], value);
    }
    assert_int_equal(pc_names_count(names), 2000);
    pc_names_destroy(names);
}

static void test_bounds_refuse_and_count(void **state)
{
    (void)state;
    pc_names *names = NULL;
    assert_int_equal(pc_names_create(2, 1 << 20, &names), FLARE_OK);
    assert_non_null(pc_names_add(names, "a", "A"));
    assert_non_null(pc_names_add(names, "b", "B"));
    assert_null(pc_names_add(names, "c", "C"));
    assert_null(pc_names_add(names, "c", "C"));
    assert_int_equal(pc_names_refused(names), 2);
    assert_null(pc_names_find(names, "c"));
    assert_string_equal(pc_names_add(names, "a", "A"), "A"); /* kept ones still answer */
    pc_names_destroy(names);

    /* Bytes: key and value with their NULs. 4 + 4 of 11; 8 more do not fit,
     * 2 + 1 fill it exactly, then not one byte more. */
    assert_int_equal(pc_names_create(100, 11, &names), FLARE_OK);
    assert_non_null(pc_names_add(names, "abc", "xyz"));
    assert_null(pc_names_add(names, "def", "uvw"));
    assert_non_null(pc_names_add(names, "g", ""));
    assert_null(pc_names_add(names, "", ""));
    assert_int_equal(pc_names_refused(names), 2);
    assert_int_equal(pc_names_count(names), 2);
    pc_names_destroy(names);

    assert_int_equal(pc_names_create(0, 10, &names), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(pc_names_create(10, 0, &names), FLARE_ERR_INVALID_ARGUMENT);
    assert_null(pc_names_add(NULL, "a", "b"));
    assert_null(pc_names_find(NULL, "a"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kept_whole_and_once),
        cmocka_unit_test(test_addresses_survive_growth),
        cmocka_unit_test(test_bounds_refuse_and_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
