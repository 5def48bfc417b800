/*
 * test_participants.c: the session layer runs its participants in order and
 * unwinds exactly what began (src/session/participants.c), a failed
 * flare_init leaves nothing running, and a session records the backend it
 * chose (processes.backend).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "session/participants.h"
#include "session/session.h"
#include "test_util.h"
#include "deepwin/deepwin_session.h"

/* ---- Fake participants that log what ran ---- */

static char journal[256];
static int fail_at = -1; /* the participant whose begin fails (-1: none) */

static void note(const char *what)
{
    strncat(journal, what, sizeof(journal) - strlen(journal) - 1);
}

#define FAKE(index)                                                                                \
    static int begin_##index(const session_start *start)                                           \
    {                                                                                              \
        (void)start;                                                                               \
        note("b" #index " ");                                                                      \
        return fail_at == index ? FLARE_ERR_NO_MEMORY : FLARE_OK;                                  \
    }                                                                                              \
    __attribute__((unused)) static void cancel_##index(void)                                       \
    {                                                                                              \
        note("c" #index " ");                                                                      \
    }                                                                                              \
    static void stop_##index(void)                                                                 \
    {                                                                                              \
        note("s" #index " ");                                                                      \
    }

FAKE(0)
FAKE(1)
FAKE(2)

static const session_participant fake0 = {
    .name = "zero", .begin = begin_0, .cancel = cancel_0, .stop = stop_0};
/* No cancel: nothing to undo, and nothing may be called in its place. */
static const session_participant fake1 = {.name = "one", .begin = begin_1, .stop = stop_1};
static const session_participant fake2 = {
    .name = "two", .begin = begin_2, .cancel = cancel_2, .stop = stop_2};
static const session_participant *const fakes[] = {&fake0, &fake1, &fake2};
static const session_order fake_order = {fakes, 3};

static void run_begin(int failing, int expected_status, const char *expected_failed,
                      const char *expected_journal)
{
    journal[0] = '\0';
    fail_at = failing;
    size_t begun = 99;
    const char *failed = "unset";
    session_start start = {.backend = NULL, .now_ns = 1};
    assert_int_equal(session_participants_begin(&fake_order, &start, &begun, &failed),
                     expected_status);
    if (expected_failed == NULL)
        assert_null(failed);
    else
        assert_string_equal(failed, expected_failed);
    assert_int_equal(begun, expected_status == FLARE_OK ? 3 : 0);
    assert_string_equal(journal, expected_journal);
}

static void test_all_begin_in_order(void **state)
{
    (void)state;
    run_begin(-1, FLARE_OK, NULL, "b0 b1 b2 ");
    journal[0] = '\0';
    session_participants_stop(&fake_order);
    assert_string_equal(journal, "s0 s1 s2 ");
}

static void test_failure_cancels_what_began_in_reverse(void **state)
{
    (void)state;
    run_begin(2, FLARE_ERR_NO_MEMORY, "two", "b0 b1 b2 c0 ");
    run_begin(0, FLARE_ERR_NO_MEMORY, "zero", "b0 ");
    run_begin(1, FLARE_ERR_NO_MEMORY, "one", "b0 b1 c0 ");
}

static void test_cancel_is_bounded_by_the_order(void **state)
{
    (void)state;
    journal[0] = '\0';
    session_participants_cancel(&fake_order, 10);
    assert_string_equal(journal, "c2 c0 ");
}

/* ---- The real session ---- */

static void test_failed_init_leaves_nothing_running(void **state)
{
    (void)state;
    char dir[128];
    test_make_temp_dir(dir, sizeof(dir), "participants");
    setenv("FLARE_OUTPUT_DIR", dir, 1);
    /* Participants begin before the settings are resolved: a bad value
     * found then must cancel every one of them. */
    setenv("FLARE_DEEP_AFTER", "1s", 1);
    setenv("FLARE_FLUSH_MS", "not-a-number", 1);
    assert_int_equal(flare_init(NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_false(deepwin_session_running());
    assert_false(flare_is_active());
    assert_non_null(strstr(session_last_error(), "FLARE_FLUSH_MS"));

    unsetenv("FLARE_FLUSH_MS");
    assert_int_equal(flare_init(NULL), FLARE_OK);
    assert_true(deepwin_session_running());
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_false(deepwin_session_running());
    unsetenv("FLARE_DEEP_AFTER");
    unsetenv("FLARE_OUTPUT_DIR");
    test_remove_dir(dir);
}

static void test_bad_backend_refused_before_anything_begins(void **state)
{
    (void)state;
    setenv("FLARE_BACKEND", "opencl", 1);
    assert_int_equal(flare_init(NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(session_last_error(), "FLARE_BACKEND='opencl'"));
    assert_false(deepwin_session_running());
    unsetenv("FLARE_BACKEND");
}

static int read_backend(void *user, int columns, char **values, char **names)
{
    (void)columns;
    (void)names;
    snprintf(user, 16, "%s", values[0] != NULL ? values[0] : "(null)");
    return 0;
}

static void test_process_row_names_the_chosen_backend(void **state)
{
    (void)state;
    char dir[128];
    test_make_temp_dir(dir, sizeof(dir), "backend");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    setenv("FLARE_BACKEND", "sim", 1);
    assert_int_equal(flare_init(&options), FLARE_OK);
    assert_string_equal(session_backend()->name, "sim");
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_BACKEND");
    assert_null(session_backend());

    char path[256], backend[16] = "";
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "SELECT backend FROM processes", read_backend, backend, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_string_equal(backend, "sim");
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_begin_in_order),
        cmocka_unit_test(test_failure_cancels_what_began_in_reverse),
        cmocka_unit_test(test_cancel_is_bounded_by_the_order),
        cmocka_unit_test(test_failed_init_leaves_nothing_running),
        cmocka_unit_test(test_bad_backend_refused_before_anything_begins),
        cmocka_unit_test(test_process_row_names_the_chosen_backend),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
