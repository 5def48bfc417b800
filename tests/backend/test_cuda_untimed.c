/*
 * test_cuda_untimed.c: launches a SASS window's quiet leaves untimed
 * (backend/cuda/cuda_untimed.c), recorded on the launching thread and
 * written by the collector into untimed_launches (schema 14), in a session
 * on the simulated device. The launch callback's data is made here, as
 * CUPTI hands it over (symbol, correlation id, context), and
 * cuda_replay_get_device_id is a fake that knows two contexts.
 *
 * Checked: the kernel's name (demangled as flare names kernels, a name
 * longer than an event's inline copy whole), the context's device, the
 * innermost scope open on the launching thread (none outside one), a graph
 * launch (no symbol) left out, a symbol pointer the driver reused for
 * another name not believed from the thread's cache, a context's device
 * looked up once (a failure too) and again after a context's end, and two
 * threads launching at once, every launch recorded once.
 *
 * Must never: load the real libcupti or libcuda, or wait for a fixed time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_replay_internal.h"
#include "backend/cuda/cuda_trace.h"
#include "backend/cuda/cuda_untimed.h"
#include "flare/flare.h"
#include "test_util.h"

#define CONTEXT_A  ((CUcontext)(uintptr_t)0x1000)
#define CONTEXT_B  ((CUcontext)(uintptr_t)0x2000)
#define PER_THREAD 500

static char dir[256];
/* Read by the launching threads of the second case: atomics. */
static _Atomic int context_a_moved; /* CONTEXT_A made again, on device 5 */
static _Atomic int device_lookups;

static CUptiResult fake_device_id(CUcontext context, uint32_t *device)
{
    device_lookups++;
    if (context == CONTEXT_A)
        *device = context_a_moved ? 5 : 3;
    else if (context == CONTEXT_B)
        *device = 1;
    else
        return CUPTI_ERROR_INVALID_CONTEXT;
    return CUPTI_SUCCESS;
}

static void launch(const char *symbol, CUcontext context, uint32_t correlation)
{
    CUpti_CallbackData call;
    memset(&call, 0, sizeof(call));
    call.symbolName = symbol;
    call.context = context;
    call.correlationId = correlation;
    call.callbackSite = CUPTI_API_ENTER;
    cuda_untimed_launch(&call);
}

static void start(void)
{
    test_make_temp_dir(dir, sizeof(dir), "untimed");
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    assert_int_equal(flare_init(&options), FLARE_OK);
    cuda_replay_get_device_id = fake_device_id;
    context_a_moved = 0;
}

static sqlite3 *open_db(void)
{
    char path[400];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    return db;
}

/* The row of correlation id: its name, device and scope's name ("" for
 * none); false when there is no such row. */
static int row_of(sqlite3 *db, uint32_t correlation, char *name, size_t name_size, int *device,
                  char *scope, size_t scope_size)
{
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_prepare_v2(db,
                                        "SELECT n.name, u.device, COALESCE(sn.name, '') FROM "
                                        "untimed_launches u JOIN names n ON n.id = u.name_id "
                                        "LEFT JOIN scopes s ON s.pid = u.pid AND s.instance_id = "
                                        "u.scope_instance_id LEFT JOIN names sn ON sn.id = "
                                        "s.name_id WHERE u.correlation_id = ?1",
                                        -1, &statement, NULL),
                     SQLITE_OK);
    sqlite3_bind_int64(statement, 1, correlation);
    int found = sqlite3_step(statement) == SQLITE_ROW;
    if (found) {
        snprintf(name, name_size, "%s", (const char *)sqlite3_column_text(statement, 0));
        *device = sqlite3_column_int(statement, 1);
        snprintf(scope, scope_size, "%s", (const char *)sqlite3_column_text(statement, 2));
    }
    sqlite3_finalize(statement);
    return found;
}

static int64_t count(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &statement, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int64_t value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    return value;
}

static void expect_row(sqlite3 *db, uint32_t correlation, const char *name, int device,
                       const char *scope)
{
    char got_name[1024], got_scope[128];
    int got_device = -2;
    if (!row_of(db, correlation, got_name, sizeof(got_name), &got_device, got_scope,
                sizeof(got_scope)))
        fail_msg("no untimed launch with correlation id %u", correlation);
    assert_string_equal(got_name, name);
    assert_int_equal(got_device, device);
    assert_string_equal(got_scope, scope);
}

static void test_launches_recorded_with_name_device_and_scope(void **state)
{
    (void)state;
    start();
    /* A name past the inline copy: a C++ template's. */
    char long_symbol[400];
    int used = snprintf(long_symbol, sizeof(long_symbol), "_Z9long_namePi");
    for (int i = 0; i < 40; i++)
        used += snprintf(long_symbol + used, sizeof(long_symbol) - (size_t)used, "x%d", i);
    /* A buffer the "driver" reuses for another name. */
    char reused[32];
    snprintf(reused, sizeof(reused), "first_kernel");

    assert_int_equal(flare_scope_begin("forward"), FLARE_OK);
    launch("_Z9hot_chainPfi", CONTEXT_A, 1);
    launch("_Z9hot_chainPfi", CONTEXT_B, 2);
    assert_int_equal(flare_scope_begin("inner"), FLARE_OK);
    launch(long_symbol, CONTEXT_A, 3);
    assert_int_equal(flare_scope_end(), FLARE_OK);
    launch(reused, CONTEXT_A, 4);
    snprintf(reused, sizeof(reused), "second_kernel");
    launch(reused, CONTEXT_A, 5);
    assert_int_equal(flare_scope_end(), FLARE_OK);
    launch("_Z9hot_chainPfi", CONTEXT_A, 6); /* outside every scope */
    launch(NULL, CONTEXT_A, 7);              /* a graph launch */
    launch("", CONTEXT_A, 8);
    /* A context the fake does not know: looked up once, the failure kept. */
    int lookups = device_lookups;
    launch("plain", (CUcontext)(uintptr_t)0x9999, 9);
    launch("plain", (CUcontext)(uintptr_t)0x9999, 10);
    assert_int_equal(device_lookups - lookups, 1);
    /* CONTEXT_A ends and is made again at the same address on device 5:
     * the thread's cache holds until a context's end is said. */
    launch("plain", CONTEXT_A, 11);
    context_a_moved = 1;
    launch("plain", CONTEXT_A, 12);
    cuda_untimed_context_destroyed();
    launch("plain", CONTEXT_A, 13);
    char demangled[256];
    snprintf(demangled, sizeof(demangled), "%s", cuda_demangle("_Z9hot_chainPfi"));
    char long_name[1024];
    snprintf(long_name, sizeof(long_name), "%s", cuda_demangle(long_symbol));
    assert_true(strlen(long_name) >= FLARE_NAME_MAX);
    assert_int_equal(flare_shutdown(), FLARE_OK);

    sqlite3 *db = open_db();
    assert_int_equal(count(db, "SELECT COUNT(*) FROM untimed_launches"), 11);
    expect_row(db, 1, demangled, 3, "forward");
    expect_row(db, 2, demangled, 1, "forward");
    expect_row(db, 3, long_name, 3, "inner");
    expect_row(db, 4, "first_kernel", 3, "forward");
    expect_row(db, 5, "second_kernel", 3, "forward");
    expect_row(db, 6, demangled, 3, "");
    expect_row(db, 9, "plain", -1, "");
    expect_row(db, 10, "plain", -1, "");
    expect_row(db, 11, "plain", 3, "");
    expect_row(db, 12, "plain", 3, ""); /* the same context, as far as the thread knows */
    expect_row(db, 13, "plain", 5, "");
    assert_int_equal(count(db, "SELECT COUNT(*) FROM untimed_launches WHERE correlation_id IN "
                               "(7, 8)"),
                     0);
    assert_int_equal(count(db, "SELECT COUNT(*) FROM untimed_launches WHERE time_ns <= 0"), 0);
    sqlite3_close(db);
    test_remove_dir(dir);
}

typedef struct launcher {
    uint32_t first; /* its correlation ids: first .. first + PER_THREAD - 1 */
    const char *scope;
} launcher;

static void *launch_many(void *argument)
{
    const launcher *self = argument;
    static const char *const symbols[] = {"_Z1av", "_Z1bv", "_Z1cv"};
    if (flare_scope_begin(self->scope) != FLARE_OK)
        return (void *)1;
    for (uint32_t i = 0; i < PER_THREAD; i++)
        launch(symbols[i % 3], i % 2 == 0 ? CONTEXT_A : CONTEXT_B, self->first + i);
    return flare_scope_end() == FLARE_OK ? NULL : (void *)1;
}

static void test_two_threads_each_launch_recorded_once(void **state)
{
    (void)state;
    start();
    launcher launchers[2] = {{.first = 1, .scope = "left"},
                             {.first = 1 + PER_THREAD, .scope = "right"}};
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, launch_many, &launchers[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *result = NULL;
        assert_int_equal(pthread_join(threads[i], &result), 0);
        assert_null(result);
    }
    assert_int_equal(flare_shutdown(), FLARE_OK);
    sqlite3 *db = open_db();
    /* The rings hold 500 launches a thread: none dropped here. */
    assert_int_equal(
        count(db, "SELECT COUNT(*) FROM drops WHERE source = 'event_ring' AND count > 0"), 0);
    assert_int_equal(count(db, "SELECT COUNT(DISTINCT correlation_id) FROM untimed_launches"),
                     2 * PER_THREAD);
    assert_int_equal(count(db, "SELECT COUNT(*) FROM untimed_launches"), 2 * PER_THREAD);
    /* Each thread's launches in its own scope, on the device of its context. */
    assert_int_equal(count(db, "SELECT COUNT(*) FROM untimed_launches u JOIN scopes s ON "
                               "s.pid = u.pid AND s.instance_id = u.scope_instance_id JOIN "
                               "names n ON n.id = s.name_id WHERE (n.name = 'left') = "
                               "(u.correlation_id <= 500) AND s.thread_id = u.thread_id"),
                     2 * PER_THREAD);
    assert_int_equal(count(db, "SELECT COUNT(*) FROM untimed_launches WHERE device = 3"),
                     PER_THREAD);
    sqlite3_close(db);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_launches_recorded_with_name_device_and_scope),
        cmocka_unit_test(test_two_threads_each_launch_recorded_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
