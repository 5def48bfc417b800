/*
 * test_session.c: the session lifecycle, scopes, the collector and the sim
 * backend's completions end to end, read back from the database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "flare/flare.h"
#include "flare/sim.h"
#include "store/store.h"
#include "test_util.h"

typedef struct readback {
    store_session_summary summary;
    int64_t scope_count_by_name[8];
    const char *scope_names[8];
    int64_t kernel_count;
    char kernel_name[64];
    uint64_t drops_by_source[4]; /* event_ring, scope_depth, other */
} readback;

static int on_scope(const store_duration_stats *stats, void *user)
{
    readback *r = user;
    for (int i = 0; i < 8 && r->scope_names[i] != NULL; i++)
        if (strcmp(stats->name, r->scope_names[i]) == 0)
            r->scope_count_by_name[i] += stats->count;
    return 0;
}

static int on_kernel(const store_duration_stats *stats, void *user)
{
    readback *r = user;
    r->kernel_count += stats->count;
    snprintf(r->kernel_name, sizeof(r->kernel_name), "%s", stats->name);
    return 0;
}

static int on_drop(const store_drop_row *row, void *user)
{
    readback *r = user;
    if (strcmp(row->source, "event_ring") == 0)
        r->drops_by_source[0] += row->count;
    else if (strcmp(row->source, "scope_depth") == 0)
        r->drops_by_source[1] += row->count;
    else
        r->drops_by_source[2] += row->count;
    return 0;
}

static void read_back(const char *dir, readback *r)
{
    store *database;
    char error[512];
    assert_int_equal(store_open(dir, STORE_OPEN_READ, &database, error, sizeof(error)), 0);
    assert_int_equal(store_read_session(database, &r->summary), 0);
    assert_int_equal(store_read_scope_stats(database, 0, on_scope, r), 0);
    assert_int_equal(store_read_kernel_stats(database, 0, on_kernel, r), 0);
    assert_int_equal(store_read_drops(database, on_drop, r), 0);
    store_close(database);
}

static void start(const char *dir, uint32_t ring_capacity, uint32_t flush_ms)
{
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.ring_capacity = ring_capacity;
    options.flush_interval_ms = flush_ms;
    assert_int_equal(flare_init(&options), FLARE_OK);
}

static void test_lifecycle_is_safe(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "lifecycle");
    assert_int_equal(flare_shutdown(), FLARE_ERR_NOT_ACTIVE);
    assert_false(flare_is_active());
    assert_int_equal(flare_scope_begin("x"), FLARE_ERR_NOT_ACTIVE);
    start(dir, 0, 0);
    assert_true(flare_is_active());
    flare_options options;
    flare_options_init(&options);
    assert_int_equal(flare_init(&options), FLARE_ERR_ALREADY_ACTIVE);
    assert_true(flare_is_active());
    char got[512];
    assert_int_equal(flare_session_dir(got, sizeof(got)), FLARE_OK);
    assert_string_equal(got, dir);
    assert_int_equal(flare_session_dir(got, 3), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_flush(5000), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_ERR_NOT_ACTIVE);
    assert_int_equal(flare_flush(10), FLARE_ERR_NOT_ACTIVE);
    readback r = {0};
    read_back(dir, &r);
    assert_int_equal(r.summary.process_count, 1);
    assert_true(r.summary.end_ns >= r.summary.start_ns);
    test_remove_dir(dir);
}

static int count_entries(const char *dir)
{
    DIR *listing = opendir(dir);
    if (listing == NULL)
        return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        if (entry->d_name[0] != '.')
            count++;
    closedir(listing);
    return count;
}

static void test_bad_settings_start_nothing(void **state)
{
    (void)state;
    char base[256];
    test_make_temp_dir(base, sizeof(base), "badenv");
    setenv("FLARE_OUTPUT_DIR", base, 1);
    const char *bad_flush[] = {"0", "251", "abc", "", "-5", "99999999999"};
    for (size_t i = 0; i < sizeof(bad_flush) / sizeof(bad_flush[0]); i++) {
        setenv("FLARE_FLUSH_MS", bad_flush[i], 1);
        assert_int_equal(flare_init(NULL), FLARE_ERR_INVALID_ARGUMENT);
        assert_false(flare_is_active());
    }
    unsetenv("FLARE_FLUSH_MS");
    const char *bad_delivery[] = {"5", "1001", "abc", "", "-1", "00x"};
    for (size_t i = 0; i < sizeof(bad_delivery) / sizeof(bad_delivery[0]); i++) {
        setenv("FLARE_DELIVERY_MS", bad_delivery[i], 1);
        assert_int_equal(flare_init(NULL), FLARE_ERR_INVALID_ARGUMENT);
        assert_false(flare_is_active());
    }
    unsetenv("FLARE_DELIVERY_MS");
    const char *bad_ring[] = {"100", "32", "2097152", "x"};
    for (size_t i = 0; i < sizeof(bad_ring) / sizeof(bad_ring[0]); i++) {
        setenv("FLARE_RING_EVENTS", bad_ring[i], 1);
        assert_int_equal(flare_init(NULL), FLARE_ERR_INVALID_ARGUMENT);
        assert_false(flare_is_active());
    }
    unsetenv("FLARE_RING_EVENTS");
    flare_options options;
    flare_options_init(&options);
    options.flush_interval_ms = 1000;
    assert_int_equal(flare_init(&options), FLARE_ERR_INVALID_ARGUMENT);
    options.flush_interval_ms = 0;
    options.ring_capacity = 1000;
    assert_int_equal(flare_init(&options), FLARE_ERR_INVALID_ARGUMENT);
    options.ring_capacity = 0;
    options.struct_size = 0;
    assert_int_equal(flare_init(&options), FLARE_ERR_INVALID_ARGUMENT);
    /* Nothing half-applied: no session directory was made. */
    assert_int_equal(count_entries(base), 0);

    /* A directory that cannot be created. */
    flare_options_init(&options);
    options.session_dir = "/proc/flare-cannot-exist/session";
    assert_int_equal(flare_init(&options), FLARE_ERR_IO);
    assert_false(flare_is_active());

    /* The default directory: <base>/<UTC time>-<pid>. */
    assert_int_equal(flare_init(NULL), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(count_entries(base), 1);
    unsetenv("FLARE_OUTPUT_DIR");
    test_remove_dir(base);
}

#define SCOPE_THREADS     2
#define SCOPES_PER_THREAD 5000

typedef struct scope_worker {
    int64_t ended;   /* ends that recorded */
    int64_t refused; /* ends that found the ring full */
    int64_t other;   /* any other status: a bug */
} scope_worker;

/* cmocka's asserts must stay on the main thread: workers only count. */
static void *nest_scopes(void *argument)
{
    scope_worker *worker = argument;
    for (int i = 0; i < SCOPES_PER_THREAD; i++) {
        if (flare_scope_begin("outer") != FLARE_OK || flare_scope_begin("inner") != FLARE_OK)
            worker->other++;
        for (int level = 0; level < 2; level++) {
            int status = flare_scope_end();
            if (status == FLARE_OK)
                worker->ended++;
            else if (status == FLARE_ERR_FULL)
                worker->refused++;
            else
                worker->other++;
        }
    }
    return NULL;
}

static void test_scopes_from_threads_all_recorded(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "scopes");
    start(dir, 1u << 15, 20);
    pthread_t threads[SCOPE_THREADS];
    scope_worker workers[SCOPE_THREADS] = {0};
    for (int i = 0; i < SCOPE_THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, nest_scopes, &workers[i]), 0);
    for (int i = 0; i < SCOPE_THREADS; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(workers[i].ended, 2 * SCOPES_PER_THREAD);
        assert_int_equal(workers[i].other, 0);
    }
    assert_int_equal(flare_shutdown(), FLARE_OK);
    readback r = {.scope_names = {"outer", "inner"}};
    read_back(dir, &r);
    assert_int_equal(r.scope_count_by_name[0], SCOPE_THREADS * SCOPES_PER_THREAD);
    assert_int_equal(r.scope_count_by_name[1], SCOPE_THREADS * SCOPES_PER_THREAD);
    assert_int_equal(r.drops_by_source[0] + r.drops_by_source[1] + r.drops_by_source[2], 0);
    test_remove_dir(dir);
}

static void test_overflow_drops_are_stored_exactly(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "overflow");
    /* The smallest ring and the slowest flush: a burst must overflow. This
     * thread's slot may already exist with a larger ring from an earlier
     * test, so the burst runs on a new thread. */
    start(dir, 64, 250);
    pthread_t thread;
    scope_worker worker = {0};
    assert_int_equal(pthread_create(&thread, NULL, nest_scopes, &worker), 0);
    pthread_join(thread, NULL);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    readback r = {.scope_names = {"outer", "inner"}};
    read_back(dir, &r);
    int64_t recorded = r.scope_count_by_name[0] + r.scope_count_by_name[1];
    assert_int_equal(worker.other, 0);
    assert_true(worker.refused > 0);
    /* What the thread was told, what was stored and what was counted agree. */
    assert_int_equal(recorded, worker.ended);
    assert_int_equal((int64_t)r.drops_by_source[0], worker.refused);
    assert_int_equal(recorded + (int64_t)r.drops_by_source[0], 2 * SCOPES_PER_THREAD);
    test_remove_dir(dir);
}

static void test_scope_edge_cases(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "scopeedge");
    start(dir, 0, 0);
    assert_int_equal(flare_scope_end(), FLARE_ERR_STATE);
    for (int i = 0; i < FLARE_SCOPE_DEPTH_MAX; i++)
        assert_int_equal(flare_scope_begin("deep"), FLARE_OK);
    for (int i = 0; i < 6; i++)
        assert_int_equal(flare_scope_begin("too deep"), FLARE_ERR_FULL);
    for (int i = 0; i < FLARE_SCOPE_DEPTH_MAX + 6; i++)
        assert_int_equal(flare_scope_end(), FLARE_OK);
    assert_int_equal(flare_scope_end(), FLARE_ERR_STATE);
    /* A long name is truncated, not refused. */
    char long_name[200];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_int_equal(flare_scope_begin(long_name), FLARE_OK);
    assert_int_equal(flare_scope_end(), FLARE_OK);
    /* Left open: recorded at shutdown. */
    assert_int_equal(flare_scope_begin("still open"), FLARE_OK);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    /* The scope begun in the ended session is popped without a record. */
    assert_int_equal(flare_scope_end(), FLARE_ERR_NOT_ACTIVE);

    char truncated[FLARE_NAME_MAX];
    memset(truncated, 'n', FLARE_NAME_MAX - 1);
    truncated[FLARE_NAME_MAX - 1] = '\0';
    readback r = {.scope_names = {"deep", "too deep", "still open", truncated}};
    read_back(dir, &r);
    assert_int_equal(r.scope_count_by_name[0], FLARE_SCOPE_DEPTH_MAX);
    assert_int_equal(r.scope_count_by_name[1], 0);
    assert_int_equal(r.scope_count_by_name[2], 1);
    assert_int_equal(r.scope_count_by_name[3], 1);
    assert_int_equal(r.drops_by_source[1], 6);
    test_remove_dir(dir);
}

static void count_kernel(const flare_sim_launch *launch)
{
    int *counter = *(int *const *)launch->args;
    (*counter)++;
}

static void test_sim_completions_recorded(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "simrec");
    start(dir, 0, 0);
    int kernel;
    assert_int_equal(flare_sim_kernel_register("count_kernel", count_kernel, &kernel), FLARE_OK);
    flare_sim_stream *streams[2];
    int counters[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        assert_int_equal(flare_sim_stream_create(0, &streams[s]), FLARE_OK);
    const uint32_t grid[3] = {4, 2, 1}, block[3] = {128, 1, 1};
    for (int i = 0; i < 100; i++) {
        int *target = &counters[i % 2];
        assert_int_equal(
            flare_sim_launch_kernel(streams[i % 2], kernel, grid, block, &target, sizeof(target)),
            FLARE_OK);
    }
    /* One buffer per stream: a copy and a memset into the same memory on two
     * streams at once would be a race in the program (TSan saw it, 1 run in
     * about 12 under load). */
    void *device_buffer, *other_buffer;
    char host[1024] = {0};
    assert_int_equal(flare_sim_malloc(0, sizeof(host), &device_buffer), FLARE_OK);
    assert_int_equal(flare_sim_malloc(0, sizeof(host), &other_buffer), FLARE_OK);
    assert_int_equal(flare_sim_memcpy_async(streams[0], device_buffer, host, sizeof(host)),
                     FLARE_OK);
    assert_int_equal(flare_sim_memset_async(streams[1], other_buffer, 0, sizeof(host)), FLARE_OK);
    assert_int_equal(flare_sim_device_synchronize(0, 10000), FLARE_OK);
    assert_int_equal(counters[0] + counters[1], 100);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    for (int s = 0; s < 2; s++)
        assert_int_equal(flare_sim_stream_destroy(streams[s]), FLARE_OK);
    assert_int_equal(flare_sim_free(device_buffer), FLARE_OK);
    assert_int_equal(flare_sim_free(other_buffer), FLARE_OK);

    readback r = {0};
    read_back(dir, &r);
    assert_int_equal(r.kernel_count, 100);
    assert_string_equal(r.kernel_name, "count_kernel");
    assert_int_equal(r.summary.copy_count, 2);
    test_remove_dir(dir);
}

static void test_second_session_sees_only_its_own(void **state)
{
    (void)state;
    char first[256], second[256];
    test_make_temp_dir(first, sizeof(first), "first");
    test_make_temp_dir(second, sizeof(second), "second");
    start(first, 0, 0);
    for (int i = 0; i < 10; i++) {
        flare_scope_begin("first");
        flare_scope_end();
    }
    assert_int_equal(flare_shutdown(), FLARE_OK);
    start(second, 0, 0);
    for (int i = 0; i < 3; i++) {
        flare_scope_begin("second");
        flare_scope_end();
    }
    assert_int_equal(flare_shutdown(), FLARE_OK);
    readback a = {.scope_names = {"first", "second"}};
    readback b = {.scope_names = {"first", "second"}};
    read_back(first, &a);
    read_back(second, &b);
    assert_int_equal(a.scope_count_by_name[0], 10);
    assert_int_equal(a.scope_count_by_name[1], 0);
    assert_int_equal(b.scope_count_by_name[0], 0);
    assert_int_equal(b.scope_count_by_name[1], 3);
    /* The overflow test's drops belong to its own session only. */
    assert_int_equal(b.drops_by_source[0], 0);
    test_remove_dir(first);
    test_remove_dir(second);
}

/* A child forked without exec must not record into (or hang on) the
 * parent's session: it stops recording, exits promptly through
 * flare_shutdown, and the parent's session carries on intact. */
static void test_forked_child_stops_recording(void **state)
{
    (void)state;
    char dir[256];
    test_make_temp_dir(dir, sizeof(dir), "fork");
    start(dir, 0, 20);
    flare_scope_begin("parent before fork");
    flare_scope_end();
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        int inactive = !flare_is_active();
        int begin = flare_scope_begin("child");
        int end = flare_scope_end();
        int shutdown = flare_shutdown(); /* must not join the parent's collector */
        _exit(inactive && begin == FLARE_ERR_NOT_ACTIVE && end != FLARE_OK &&
                      shutdown == FLARE_ERR_NOT_ACTIVE
                  ? 0
                  : 1);
    }
    int status;
    time_t started = time(NULL);
    assert_int_equal(waitpid(child, &status, 0), child);
    /* Promptly: a child that joined the parent's collector would hang. */
    assert_true(time(NULL) - started < TEST_WAIT_SECONDS);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    flare_scope_begin("parent after fork");
    flare_scope_end();
    assert_int_equal(flare_shutdown(), FLARE_OK);
    readback r = {.scope_names = {"parent before fork", "parent after fork", "child"}};
    read_back(dir, &r);
    assert_int_equal(r.scope_count_by_name[0], 1);
    assert_int_equal(r.scope_count_by_name[1], 1);
    assert_int_equal(r.scope_count_by_name[2], 0);
    assert_int_equal(r.summary.process_count, 1);
    test_remove_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lifecycle_is_safe),
        cmocka_unit_test(test_bad_settings_start_nothing),
        cmocka_unit_test(test_scopes_from_threads_all_recorded),
        cmocka_unit_test(test_overflow_drops_are_stored_exactly),
        cmocka_unit_test(test_scope_edge_cases),
        cmocka_unit_test(test_sim_completions_recorded),
        cmocka_unit_test(test_second_session_sees_only_its_own),
        cmocka_unit_test(test_forked_child_stops_recording),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
