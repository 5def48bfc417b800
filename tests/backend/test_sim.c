/*
 * test_sim.c: tests of the simulated device with its real worker threads:
 * per-stream ordering, completion records, in-flight accounting, drains,
 * injected faults, configuration and argument checking.
 *
 * It must never depend on tight timing: it asserts that bounded waits return
 * and that work happens, not how fast. cmocka assertions are made on the
 * test's own thread only, because they longjmp.
 */
#include "backend/sim/sim.h"
#include "flare/sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEST_DEVICES     4
#define LONG_WAIT_MS     5000u
#define LONG_WAIT_NS     (LONG_WAIT_MS * 1000000ull)
#define HANG_KERNEL_NAME "test_hang"

static const uint32_t unit_dimensions[3] = {1, 1, 1};

/* ---- helpers ---------------------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
}

static void sleep_ms(uint32_t milliseconds)
{
    struct timespec pause = {.tv_sec = milliseconds / 1000,
                             .tv_nsec = (long)(milliseconds % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

/* Polls instead of waiting on a condition so test handlers stay trivial. */
static bool wait_for_flag(atomic_bool *flag, uint32_t timeout_ms)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (!atomic_load(flag)) {
        if (now_ns() > deadline) {
            return false;
        }
        sleep_ms(1);
    }
    return true;
}

/* Every completion the handler saw, in delivery order. Written under the
 * lock by workers; tests read it after a drain, which orders those writes
 * before the read. */
typedef struct recorded_completion {
    backend_completion completion;
    char name[FLARE_NAME_MAX];
} recorded_completion;

#define RECORD_MAX 20000
static pthread_mutex_t record_lock = PTHREAD_MUTEX_INITIALIZER;
static recorded_completion records[RECORD_MAX];
static size_t record_count;
static size_t record_overflow;

static void record_completion(const backend_completion *completion, void *user)
{
    (void)user;
    pthread_mutex_lock(&record_lock);
    if (record_count < RECORD_MAX) {
        recorded_completion *record = &records[record_count++];
        record->completion = *completion;
        record->name[0] = '\0';
        if (completion->name != NULL) {
            snprintf(record->name, sizeof record->name, "%s", completion->name);
        }
    } else {
        record_overflow++;
    }
    pthread_mutex_unlock(&record_lock);
}

static size_t records_seen(void)
{
    pthread_mutex_lock(&record_lock);
    size_t count = record_count;
    pthread_mutex_unlock(&record_lock);
    return count;
}

static int register_kernel(const char *name, flare_sim_kernel_fn function)
{
    int kernel_id = 0;
    assert_int_equal(flare_sim_kernel_register(name, function, &kernel_id), FLARE_OK);
    assert_true(kernel_id > 0);
    return kernel_id;
}

static void set_hang_fault(const char *kernel_name)
{
    sim_fault fault = {.hang_kernel_name = kernel_name};
    sim_fault_set(&fault);
}

/* ---- kernels ---------------------------------------------------------- */

static void noop_kernel(const flare_sim_launch *launch)
{
    (void)launch;
}

static void sleepy_kernel(const flare_sim_launch *launch)
{
    (void)launch;
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 200000};
    nanosleep(&pause, NULL);
}

/* A log in simulated device memory that kernels of every stream append to. */
typedef struct shared_log {
    atomic_uint count;
    uint64_t entries[];
} shared_log;

typedef struct append_args {
    shared_log *log;
    uint32_t stream_index;
    uint32_t sequence;
} append_args;

static void append_kernel(const flare_sim_launch *launch)
{
    const append_args *args = launch->args;
    if (launch->args_size != sizeof *args) {
        return;
    }
    unsigned slot = atomic_fetch_add(&args->log->count, 1);
    args->log->entries[slot] = ((uint64_t)args->stream_index << 32) | args->sequence;
}

static shared_log *shared_log_create(int device, size_t capacity)
{
    void *memory = NULL;
    assert_int_equal(
        flare_sim_malloc(device, sizeof(shared_log) + capacity * sizeof(uint64_t), &memory),
        FLARE_OK);
    return memory;
}

/* Checks that the log holds sequences 0..per_stream-1 of every stream, each
 * stream's in submission order. */
static void assert_log_in_stream_order(shared_log *log, uint32_t streams, uint32_t per_stream)
{
    assert_int_equal(atomic_load(&log->count), streams * per_stream);
    uint32_t *next_sequence = calloc(streams, sizeof *next_sequence);
    assert_non_null(next_sequence);
    for (uint32_t slot = 0; slot < streams * per_stream; slot++) {
        uint32_t stream_index = (uint32_t)(log->entries[slot] >> 32);
        uint32_t sequence = (uint32_t)log->entries[slot];
        assert_true(stream_index < streams);
        assert_int_equal(sequence, next_sequence[stream_index]);
        next_sequence[stream_index]++;
    }
    for (uint32_t stream_index = 0; stream_index < streams; stream_index++) {
        assert_int_equal(next_sequence[stream_index], per_stream);
    }
    free(next_sequence);
}

/* Checks the records of one stream: count, strictly increasing start,
 * end >= start, and one item at a time (a start never precedes the previous
 * end). Returns how many records the stream had. */
static size_t assert_stream_records_serial(uint64_t stream_id, int device)
{
    size_t seen = 0;
    uint64_t previous_start = 0;
    uint64_t previous_end = 0;
    uint64_t previous_correlation = 0;
    for (size_t index = 0; index < record_count; index++) {
        const backend_completion *completion = &records[index].completion;
        if (completion->stream_id != stream_id) {
            continue;
        }
        assert_int_equal(completion->device, device);
        assert_true(completion->end_ns >= completion->start_ns);
        if (seen > 0) {
            assert_true(completion->start_ns > previous_start);
            assert_true(completion->start_ns >= previous_end);
            assert_true(completion->correlation_id > previous_correlation);
        }
        previous_start = completion->start_ns;
        previous_end = completion->end_ns;
        previous_correlation = completion->correlation_id;
        seen++;
    }
    return seen;
}

static int compare_u64(const void *left, const void *right)
{
    uint64_t a = *(const uint64_t *)left;
    uint64_t b = *(const uint64_t *)right;
    return (a > b) - (a < b);
}

static void assert_correlation_ids_unique(void)
{
    uint64_t *ids = malloc((record_count + 1) * sizeof *ids);
    assert_non_null(ids);
    for (size_t index = 0; index < record_count; index++) {
        ids[index] = records[index].completion.correlation_id;
        assert_true(ids[index] != 0);
    }
    qsort(ids, record_count, sizeof *ids, compare_u64);
    for (size_t index = 1; index < record_count; index++) {
        assert_true(ids[index] != ids[index - 1]);
    }
    free(ids);
}

/* ---- fixtures --------------------------------------------------------- */

/* A handler that holds its call open until the test lets it go. */
static atomic_bool gate_entered;
static atomic_bool gate_open;
static atomic_bool gate_finished;

static int configure_devices(void **state)
{
    (void)state;
    /* Only configures; the first real use (the first test) fixes it. */
    return flare_sim_configure(TEST_DEVICES) == FLARE_OK ? 0 : -1;
}

static int install_recorder(void **state)
{
    (void)state;
    pthread_mutex_lock(&record_lock);
    record_count = 0;
    record_overflow = 0;
    pthread_mutex_unlock(&record_lock);
    sim_fault_set(NULL);
    sim_backend()->set_completion_handler(record_completion, NULL);
    return 0;
}

static int quiesce(void **state)
{
    (void)state;
    int result = 0;
    /* A failed test may leave a worker held in the gated handler. */
    atomic_store(&gate_open, true);
    sim_fault_release_hung();
    sim_fault_set(NULL);
    for (int device = 0; device < TEST_DEVICES; device++) {
        if (sim_backend()->device_drain(device, LONG_WAIT_NS) != FLARE_OK) {
            result = -1;
        }
    }
    sim_backend()->set_completion_handler(NULL, NULL);
    if (record_overflow != 0) {
        result = -1;
    }
    return result;
}

/* ---- environment group: runs before anything initialises the process ---- */

static int device_count_in_child(const char *value)
{
    pid_t child = fork();
    if (child == 0) {
        if (value != NULL) {
            setenv("FLARE_SIM_DEVICES", value, 1);
        } else {
            unsetenv("FLARE_SIM_DEVICES");
        }
        _exit(flare_sim_device_count());
    }
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

static void test_device_count_from_environment(void **state)
{
    (void)state;
    assert_int_equal(device_count_in_child(NULL), 1);
    assert_int_equal(device_count_in_child("3"), 3);
    assert_int_equal(device_count_in_child("64"), 64);
    assert_int_equal(device_count_in_child("0"), 1);
    assert_int_equal(device_count_in_child("65"), 1);
    assert_int_equal(device_count_in_child("-2"), 1);
    assert_int_equal(device_count_in_child("abc"), 1);
    assert_int_equal(device_count_in_child("2x"), 1);
    assert_int_equal(device_count_in_child(""), 1);
}

/* ---- main group ------------------------------------------------------- */

/* Must run first in its group: it is the first use of the simulated device. */
static void test_configure_is_fixed_by_first_use(void **state)
{
    (void)state;
    /* A session installs its handler at start, possibly before the program
     * configures the device: neither that nor setting faults is a use. */
    sim_backend()->set_completion_handler(record_completion, NULL);
    sim_backend()->set_completion_handler(NULL, NULL);
    sim_fault_set(NULL);
    sim_fault_release_hung();
    assert_null(sim_kernel_name(1));
    assert_string_equal(sim_backend()->name, "sim");
    assert_int_equal(flare_sim_configure(0), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_configure(65), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_configure(TEST_DEVICES), FLARE_OK);
    assert_int_equal(flare_sim_device_count(), TEST_DEVICES);
    assert_int_equal(flare_sim_configure(2), FLARE_ERR_STATE);
    assert_int_equal(flare_sim_configure(TEST_DEVICES), FLARE_ERR_STATE);
    assert_int_equal(flare_sim_device_count(), TEST_DEVICES);
    assert_int_equal(sim_backend()->device_count(), TEST_DEVICES);
}

static void test_backend_table_and_stream_identity(void **state)
{
    (void)state;
    const backend_ops *ops = sim_backend();
    assert_string_equal(ops->name, "sim");
    assert_non_null(ops->device_name);
    assert_non_null(ops->stream_create);
    assert_non_null(ops->stream_destroy);
    assert_non_null(ops->stream_id);
    assert_non_null(ops->stream_device);
    assert_non_null(ops->stream_in_flight);
    assert_non_null(ops->device_in_flight);
    assert_non_null(ops->stream_drain);
    assert_non_null(ops->device_drain);
    assert_non_null(ops->memory_alloc);
    assert_non_null(ops->memory_free);
    assert_non_null(ops->copy_async);
    assert_non_null(ops->memset_async);
    assert_non_null(ops->launch);
    assert_non_null(ops->set_completion_handler);

    char name[128];
    assert_int_equal(ops->device_name(TEST_DEVICES - 1, name, sizeof name), FLARE_OK);
    assert_true(strlen(name) > 0);

    backend_stream *streams[6];
    int baseline = sim_device_stream_count(1);
    for (int index = 0; index < 6; index++) {
        assert_int_equal(ops->stream_create(1, &streams[index]), FLARE_OK);
        assert_int_equal(ops->stream_device(streams[index]), 1);
        assert_true(ops->stream_id(streams[index]) != 0);
        for (int earlier = 0; earlier < index; earlier++) {
            assert_true(ops->stream_id(streams[earlier]) != ops->stream_id(streams[index]));
        }
    }
    assert_int_equal(sim_device_stream_count(1), baseline + 6);
    for (int index = 0; index < 6; index++) {
        assert_int_equal(ops->stream_destroy(streams[index]), FLARE_OK);
    }
    assert_int_equal(sim_device_stream_count(1), baseline);
}

static void test_kernel_registry(void **state)
{
    (void)state;
    int first = register_kernel("test_registry_a", noop_kernel);
    assert_int_equal(register_kernel("test_registry_a", noop_kernel), first);
    assert_int_equal(register_kernel("test_registry_a", sleepy_kernel), first);
    int second = register_kernel("test_registry_b", noop_kernel);
    assert_true(second != first);
    assert_string_equal(sim_kernel_name(first), "test_registry_a");
    assert_string_equal(sim_kernel_name(second), "test_registry_b");

    char long_name[200];
    memset(long_name, 'k', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    int long_id = register_kernel(long_name, noop_kernel);
    assert_int_equal(strlen(sim_kernel_name(long_id)), FLARE_NAME_MAX - 1);
    long_name[FLARE_NAME_MAX - 1] = '\0';
    assert_int_equal(register_kernel(long_name, noop_kernel), long_id);

    assert_null(sim_kernel_name(0));
    assert_null(sim_kernel_name(-1));
    assert_null(sim_kernel_name(1000000));
    int kernel_id = 0;
    assert_int_equal(flare_sim_kernel_register(NULL, noop_kernel, &kernel_id),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_kernel_register("", noop_kernel, &kernel_id),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_kernel_register("test_registry_c", NULL, &kernel_id),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_kernel_register("test_registry_c", noop_kernel, NULL),
                     FLARE_ERR_INVALID_ARGUMENT);
}

static void test_single_stream_order_and_kernel_records(void **state)
{
    (void)state;
    enum { KERNELS = 2000 };
    const backend_ops *ops = sim_backend();
    int kernel_id = register_kernel("test_append", append_kernel);
    shared_log *log = shared_log_create(0, KERNELS);
    backend_stream *stream = NULL;
    assert_int_equal(ops->stream_create(0, &stream), FLARE_OK);

    for (uint32_t sequence = 0; sequence < KERNELS; sequence++) {
        append_args args = {.log = log, .stream_index = 0, .sequence = sequence};
        backend_launch launch = {.kernel_id = kernel_id,
                                 .grid = {sequence % 7 + 1, 2, 3},
                                 .block = {32, 4, 1},
                                 .shared_memory_bytes = 128,
                                 .args = &args,
                                 .args_size = sizeof args};
        assert_int_equal(ops->launch(stream, &launch), FLARE_OK);
    }
    assert_int_equal(ops->stream_drain(stream, LONG_WAIT_NS), FLARE_OK);
    assert_int_equal(ops->stream_in_flight(stream), 0);
    assert_log_in_stream_order(log, 1, KERNELS);

    assert_int_equal(record_count, KERNELS);
    for (uint32_t sequence = 0; sequence < KERNELS; sequence++) {
        const backend_completion *completion = &records[sequence].completion;
        assert_int_equal(completion->kind, BACKEND_WORK_KERNEL);
        assert_string_equal(records[sequence].name, "test_append");
        assert_int_equal(completion->grid[0], sequence % 7 + 1);
        assert_int_equal(completion->grid[1], 2);
        assert_int_equal(completion->grid[2], 3);
        assert_int_equal(completion->block[0], 32);
        assert_int_equal(completion->block[1], 4);
        assert_int_equal(completion->block[2], 1);
        assert_int_equal(completion->shared_memory_bytes, 128);
        assert_int_equal(completion->registers_per_thread, 32);
        assert_int_equal(completion->stream_id, ops->stream_id(stream));
        assert_int_equal(completion->status, FLARE_OK);
        assert_int_equal(completion->bytes, 0);
    }
    assert_int_equal(assert_stream_records_serial(ops->stream_id(stream), 0), KERNELS);
    assert_correlation_ids_unique();

    assert_int_equal(ops->stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(log), FLARE_OK);
}

/* Several application threads, each feeding streams on its own device. */
enum { SUBMITTERS = TEST_DEVICES, STREAMS_PER_SUBMITTER = 2, KERNELS_PER_STREAM = 500 };

typedef struct submitter {
    pthread_t thread;
    int device;
    int kernel_id;
    shared_log *log;
    flare_sim_stream *streams[STREAMS_PER_SUBMITTER];
    int failures;
} submitter;

static void *submit_interleaved(void *argument)
{
    submitter *self = argument;
    for (uint32_t sequence = 0; sequence < KERNELS_PER_STREAM; sequence++) {
        for (int local = 0; local < STREAMS_PER_SUBMITTER; local++) {
            append_args args = {.log = self->log,
                                .stream_index =
                                    (uint32_t)(self->device * STREAMS_PER_SUBMITTER + local),
                                .sequence = sequence};
            if (flare_sim_launch_kernel(self->streams[local], self->kernel_id, unit_dimensions,
                                        unit_dimensions, &args, sizeof args) != FLARE_OK) {
                self->failures++;
            }
        }
    }
    return NULL;
}

static void test_many_streams_many_devices_keep_order(void **state)
{
    (void)state;
    enum { STREAMS = SUBMITTERS * STREAMS_PER_SUBMITTER };
    int kernel_id = register_kernel("test_append", append_kernel);
    shared_log *log = shared_log_create(0, STREAMS * KERNELS_PER_STREAM);
    submitter submitters[SUBMITTERS];
    for (int index = 0; index < SUBMITTERS; index++) {
        submitters[index] = (submitter){.device = index, .kernel_id = kernel_id, .log = log};
        for (int local = 0; local < STREAMS_PER_SUBMITTER; local++) {
            assert_int_equal(flare_sim_stream_create(index, &submitters[index].streams[local]),
                             FLARE_OK);
        }
    }
    for (int index = 0; index < SUBMITTERS; index++) {
        assert_int_equal(
            pthread_create(&submitters[index].thread, NULL, submit_interleaved, &submitters[index]),
            0);
    }
    for (int index = 0; index < SUBMITTERS; index++) {
        pthread_join(submitters[index].thread, NULL);
        assert_int_equal(submitters[index].failures, 0);
    }
    for (int device = 0; device < TEST_DEVICES; device++) {
        assert_int_equal(flare_sim_device_synchronize(device, LONG_WAIT_MS), FLARE_OK);
        assert_int_equal(sim_backend()->device_in_flight(device), 0);
    }
    assert_log_in_stream_order(log, STREAMS, KERNELS_PER_STREAM);

    assert_int_equal(record_count, STREAMS * KERNELS_PER_STREAM);
    for (int index = 0; index < SUBMITTERS; index++) {
        for (int local = 0; local < STREAMS_PER_SUBMITTER; local++) {
            backend_stream *stream = (backend_stream *)submitters[index].streams[local];
            assert_int_equal(assert_stream_records_serial(sim_backend()->stream_id(stream), index),
                             KERNELS_PER_STREAM);
        }
    }
    assert_correlation_ids_unique();

    for (int index = 0; index < SUBMITTERS; index++) {
        for (int local = 0; local < STREAMS_PER_SUBMITTER; local++) {
            assert_int_equal(flare_sim_stream_destroy(submitters[index].streams[local]), FLARE_OK);
        }
    }
    assert_int_equal(flare_sim_free(log), FLARE_OK);
}

static void test_copies_and_memset(void **state)
{
    (void)state;
    enum { SIZE = 256 };
    unsigned char pattern[SIZE];
    unsigned char back_on_host[SIZE] = {0};
    unsigned char host_copy[SIZE] = {0};
    for (int index = 0; index < SIZE; index++) {
        pattern[index] = (unsigned char)(index * 7 + 1);
    }
    void *first = NULL;
    void *second = NULL;
    assert_int_equal(flare_sim_malloc(1, SIZE, &first), FLARE_OK);
    assert_int_equal(flare_sim_malloc(1, SIZE, &second), FLARE_OK);
    for (int index = 0; index < SIZE; index++) {
        assert_int_equal(((unsigned char *)first)[index], 0);
    }
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(1, &stream), FLARE_OK);

    assert_int_equal(flare_sim_memcpy_async(stream, first, pattern, SIZE), FLARE_OK);
    assert_int_equal(flare_sim_memcpy_async(stream, second, first, SIZE), FLARE_OK);
    assert_int_equal(flare_sim_memset_async(stream, first, 0x5a, 64), FLARE_OK);
    assert_int_equal(flare_sim_memcpy_async(stream, back_on_host, second, SIZE), FLARE_OK);
    assert_int_equal(flare_sim_memcpy_async(stream, host_copy, back_on_host, SIZE), FLARE_OK);
    /* An interior pointer still counts as device memory. */
    assert_int_equal(
        flare_sim_memcpy_async(stream, (unsigned char *)first + SIZE / 2, pattern, SIZE / 2),
        FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);

    assert_memory_equal(back_on_host, pattern, SIZE);
    assert_memory_equal(host_copy, pattern, SIZE);
    for (int index = 0; index < 64; index++) {
        assert_int_equal(((unsigned char *)first)[index], 0x5a);
    }
    assert_memory_equal((unsigned char *)first + 64, pattern + 64, SIZE / 2 - 64);
    assert_memory_equal((unsigned char *)first + SIZE / 2, pattern, SIZE / 2);

    static const struct {
        backend_work_kind kind;
        backend_copy_kind copy_kind;
        uint64_t bytes;
    } expected[] = {
        {BACKEND_WORK_COPY, BACKEND_COPY_HOST_TO_DEVICE, SIZE},
        {BACKEND_WORK_COPY, BACKEND_COPY_DEVICE_TO_DEVICE, SIZE},
        {BACKEND_WORK_MEMSET, BACKEND_COPY_UNKNOWN, 64},
        {BACKEND_WORK_COPY, BACKEND_COPY_DEVICE_TO_HOST, SIZE},
        {BACKEND_WORK_COPY, BACKEND_COPY_HOST_TO_HOST, SIZE},
        {BACKEND_WORK_COPY, BACKEND_COPY_HOST_TO_DEVICE, SIZE / 2},
    };
    size_t expected_count = sizeof expected / sizeof expected[0];
    assert_int_equal(record_count, expected_count);
    for (size_t index = 0; index < expected_count; index++) {
        const backend_completion *completion = &records[index].completion;
        assert_int_equal(completion->kind, expected[index].kind);
        assert_int_equal(completion->copy_kind, expected[index].copy_kind);
        assert_int_equal(completion->bytes, expected[index].bytes);
        assert_null(completion->name);
        assert_int_equal(completion->status, FLARE_OK);
        assert_int_equal(completion->grid[0], 0);
    }
    assert_int_equal(
        assert_stream_records_serial(sim_backend()->stream_id((backend_stream *)stream), 1),
        expected_count);

    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(first), FLARE_OK);
    assert_int_equal(flare_sim_free(second), FLARE_OK);
}

static void test_in_flight_counts(void **state)
{
    (void)state;
    const backend_ops *ops = sim_backend();
    int hang_id = register_kernel(HANG_KERNEL_NAME, noop_kernel);
    int noop_id = register_kernel("test_noop", noop_kernel);
    set_hang_fault(HANG_KERNEL_NAME);
    backend_stream *blocked = NULL;
    backend_stream *free_running = NULL;
    assert_int_equal(ops->stream_create(2, &blocked), FLARE_OK);
    assert_int_equal(ops->stream_create(2, &free_running), FLARE_OK);
    backend_launch hang = {.kernel_id = hang_id, .grid = {1, 1, 1}, .block = {1, 1, 1}};
    backend_launch noop = {.kernel_id = noop_id, .grid = {1, 1, 1}, .block = {1, 1, 1}};

    assert_int_equal(ops->launch(blocked, &hang), FLARE_OK);
    for (int index = 0; index < 3; index++) {
        assert_int_equal(ops->launch(blocked, &noop), FLARE_OK);
    }
    assert_int_equal(ops->launch(free_running, &noop), FLARE_OK);
    assert_int_equal(ops->launch(free_running, &noop), FLARE_OK);
    assert_int_equal(ops->stream_drain(free_running, LONG_WAIT_NS), FLARE_OK);

    assert_int_equal(ops->stream_in_flight(blocked), 4);
    assert_int_equal(ops->stream_in_flight(free_running), 0);
    assert_int_equal(ops->device_in_flight(2), 4);
    assert_int_equal(ops->device_in_flight(3), 0);
    assert_int_equal(records_seen(), 2);

    sim_fault_release_hung();
    assert_int_equal(ops->device_drain(2, LONG_WAIT_NS), FLARE_OK);
    assert_int_equal(ops->stream_in_flight(blocked), 0);
    assert_int_equal(ops->device_in_flight(2), 0);
    assert_int_equal(record_count, 6);
    assert_int_equal(ops->stream_destroy(blocked), FLARE_OK);
    assert_int_equal(ops->stream_destroy(free_running), FLARE_OK);
}

static void gated_handler(const backend_completion *completion, void *user)
{
    (void)completion;
    (void)user;
    atomic_store(&gate_entered, true);
    while (!atomic_load(&gate_open)) {
        sleep_ms(1);
    }
    atomic_store(&gate_finished, true);
}

static void reset_gate(void)
{
    atomic_store(&gate_entered, false);
    atomic_store(&gate_open, false);
    atomic_store(&gate_finished, false);
}

static void test_item_in_flight_until_handler_returns(void **state)
{
    (void)state;
    const backend_ops *ops = sim_backend();
    reset_gate();
    ops->set_completion_handler(gated_handler, NULL);
    void *memory = NULL;
    assert_int_equal(flare_sim_malloc(0, 64, &memory), FLARE_OK);
    backend_stream *stream = NULL;
    assert_int_equal(ops->stream_create(0, &stream), FLARE_OK);
    assert_int_equal(ops->memset_async(stream, memory, 1, 64), FLARE_OK);

    assert_true(wait_for_flag(&gate_entered, LONG_WAIT_MS));
    /* The work itself is done; only the handler call keeps it in flight. */
    assert_int_equal(ops->stream_in_flight(stream), 1);
    assert_int_equal(ops->device_in_flight(0), 1);
    assert_int_equal(ops->stream_drain(stream, 20000000), FLARE_ERR_TIMEOUT);
    assert_int_equal(ops->device_drain(0, 20000000), FLARE_ERR_TIMEOUT);

    atomic_store(&gate_open, true);
    assert_int_equal(ops->stream_drain(stream, LONG_WAIT_NS), FLARE_OK);
    assert_true(atomic_load(&gate_finished));
    assert_int_equal(ops->stream_in_flight(stream), 0);
    assert_int_equal(ops->stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(memory), FLARE_OK);
}

static atomic_bool setter_returned;
static atomic_bool handler_finished_when_setter_returned;

static void *remove_handler(void *argument)
{
    (void)argument;
    sim_backend()->set_completion_handler(NULL, NULL);
    atomic_store(&handler_finished_when_setter_returned, atomic_load(&gate_finished));
    atomic_store(&setter_returned, true);
    return NULL;
}

static void test_set_handler_waits_for_call_in_progress(void **state)
{
    (void)state;
    reset_gate();
    atomic_store(&setter_returned, false);
    atomic_store(&handler_finished_when_setter_returned, false);
    sim_backend()->set_completion_handler(gated_handler, NULL);
    int noop_id = register_kernel("test_noop", noop_kernel);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(3, &stream), FLARE_OK);
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_true(wait_for_flag(&gate_entered, LONG_WAIT_MS));

    pthread_t setter;
    assert_int_equal(pthread_create(&setter, NULL, remove_handler, NULL), 0);
    sleep_ms(100);
    /* The handler cannot have returned, so neither may the setter. */
    assert_false(atomic_load(&setter_returned));
    atomic_store(&gate_open, true);
    pthread_join(setter, NULL);
    assert_true(atomic_load(&handler_finished_when_setter_returned));

    /* With no handler, completions are discarded but still retire. */
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    assert_int_equal(sim_backend()->stream_in_flight((backend_stream *)stream), 0);
    assert_int_equal(records_seen(), 0);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

static void test_drain_times_out_on_hung_kernel(void **state)
{
    (void)state;
    const backend_ops *ops = sim_backend();
    int hang_id = register_kernel(HANG_KERNEL_NAME, noop_kernel);
    set_hang_fault(HANG_KERNEL_NAME);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(1, &stream), FLARE_OK);
    assert_int_equal(
        flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);

    uint64_t started = now_ns();
    assert_int_equal(ops->stream_drain((backend_stream *)stream, 100000000), FLARE_ERR_TIMEOUT);
    uint64_t waited = now_ns() - started;
    assert_true(waited >= 90000000ull);
    assert_true(waited < LONG_WAIT_NS);

    started = now_ns();
    assert_int_equal(ops->device_drain(1, 100000000), FLARE_ERR_TIMEOUT);
    waited = now_ns() - started;
    assert_true(waited >= 90000000ull);
    assert_true(waited < LONG_WAIT_NS);

    assert_int_equal(flare_sim_stream_synchronize(stream, 50), FLARE_ERR_TIMEOUT);
    assert_int_equal(flare_sim_device_synchronize(1, 50), FLARE_ERR_TIMEOUT);
    assert_int_equal(ops->stream_drain((backend_stream *)stream, 0), FLARE_ERR_TIMEOUT);
    assert_int_equal(records_seen(), 0);

    sim_fault_release_hung();
    assert_int_equal(flare_sim_device_synchronize(1, LONG_WAIT_MS), FLARE_OK);
    assert_int_equal(records_seen(), 1);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

static void test_device_drain_waits_for_every_stream(void **state)
{
    (void)state;
    enum { STREAMS = 3, KERNELS = 50 };
    int sleepy_id = register_kernel("test_sleepy", sleepy_kernel);
    flare_sim_stream *streams[STREAMS];
    for (int index = 0; index < STREAMS; index++) {
        assert_int_equal(flare_sim_stream_create(3, &streams[index]), FLARE_OK);
    }
    for (int kernel = 0; kernel < KERNELS; kernel++) {
        for (int index = 0; index < STREAMS; index++) {
            assert_int_equal(flare_sim_launch_kernel(streams[index], sleepy_id, unit_dimensions,
                                                     unit_dimensions, NULL, 0),
                             FLARE_OK);
        }
    }
    assert_int_equal(sim_backend()->device_drain(3, LONG_WAIT_NS), FLARE_OK);
    assert_int_equal(records_seen(), STREAMS * KERNELS);
    assert_int_equal(sim_backend()->device_in_flight(3), 0);
    for (int index = 0; index < STREAMS; index++) {
        assert_int_equal(sim_backend()->stream_in_flight((backend_stream *)streams[index]), 0);
        assert_int_equal(flare_sim_stream_destroy(streams[index]), FLARE_OK);
    }
}

static double process_cpu_ms(void)
{
    struct timespec used;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &used);
    return (double)used.tv_sec * 1e3 + (double)used.tv_nsec / 1e6;
}

static void test_hung_kernel_sleeps_until_released(void **state)
{
    (void)state;
    int hang_id = register_kernel(HANG_KERNEL_NAME, noop_kernel);
    int noop_id = register_kernel("test_noop", noop_kernel);
    set_hang_fault(HANG_KERNEL_NAME);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);
    assert_int_equal(
        flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_int_equal(
        flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);

    double cpu_before = process_cpu_ms();
    assert_int_equal(flare_sim_stream_synchronize(stream, 300), FLARE_ERR_TIMEOUT);
    /* A spinning hang would burn about 300 ms of CPU here. */
    assert_true(process_cpu_ms() - cpu_before < 150.0);
    assert_int_equal(records_seen(), 0);

    /* One release frees the hung kernel and the hung kernel queued behind it. */
    sim_fault_release_hung();
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    assert_int_equal(record_count, 3);
    assert_string_equal(records[0].name, HANG_KERNEL_NAME);
    assert_string_equal(records[1].name, HANG_KERNEL_NAME);
    assert_string_equal(records[2].name, "test_noop");

    /* The fault stays set: a kernel submitted after the release hangs again. */
    assert_int_equal(
        flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, 50), FLARE_ERR_TIMEOUT);
    sim_fault_set(NULL);
    assert_int_equal(flare_sim_stream_synchronize(stream, 50), FLARE_ERR_TIMEOUT);
    sim_fault_release_hung();
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    /* Cleared fault: the same kernel now runs straight through. */
    assert_int_equal(
        flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    assert_int_equal(records_seen(), 5);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

static void test_slow_completion_handler_delays_drain(void **state)
{
    (void)state;
    sim_fault fault = {.slow_completion_ms = 300};
    sim_fault_set(&fault);
    void *memory = NULL;
    assert_int_equal(flare_sim_malloc(2, 32, &memory), FLARE_OK);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(2, &stream), FLARE_OK);

    uint64_t submitted = now_ns();
    assert_int_equal(flare_sim_memset_async(stream, memory, 7, 32), FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, 10), FLARE_ERR_TIMEOUT);
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    assert_true(now_ns() - submitted >= 300000000ull);
    /* Drain returned only after the handler call had returned. */
    assert_int_equal(records_seen(), 1);
    assert_int_equal(((unsigned char *)memory)[31], 7);

    sim_fault_set(NULL);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(memory), FLARE_OK);
}

static void test_failed_copy_moves_nothing(void **state)
{
    (void)state;
    enum { SIZE = 128 };
    unsigned char pattern[SIZE];
    memset(pattern, 0xab, sizeof pattern);
    void *failing = NULL;
    void *working = NULL;
    assert_int_equal(flare_sim_malloc(0, SIZE, &failing), FLARE_OK);
    assert_int_equal(flare_sim_malloc(0, SIZE, &working), FLARE_OK);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);

    sim_fault fault = {.fail_next_copies = 1};
    sim_fault_set(&fault);
    /* The failure is asynchronous: submission itself succeeds. */
    assert_int_equal(flare_sim_memcpy_async(stream, failing, pattern, SIZE), FLARE_OK);
    assert_int_equal(flare_sim_memcpy_async(stream, working, pattern, SIZE), FLARE_OK);
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);

    for (int index = 0; index < SIZE; index++) {
        assert_int_equal(((unsigned char *)failing)[index], 0);
    }
    assert_memory_equal(working, pattern, SIZE);
    assert_int_equal(record_count, 2);
    assert_int_equal(records[0].completion.kind, BACKEND_WORK_COPY);
    assert_int_equal(records[0].completion.status, FLARE_ERR_BACKEND);
    assert_int_equal(records[0].completion.copy_kind, BACKEND_COPY_HOST_TO_DEVICE);
    assert_int_equal(records[1].completion.status, FLARE_OK);

    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(failing), FLARE_OK);
    assert_int_equal(flare_sim_free(working), FLARE_OK);
}

/* An argument block of exactly the 4096-byte maximum; the first word says
 * where the kernel reports what it saw. */
typedef struct args_probe {
    unsigned char *report;
    unsigned char payload[4096 - sizeof(unsigned char *)];
} args_probe;
_Static_assert(sizeof(args_probe) == 4096, "the probe must use the whole argument limit");

static void args_probe_kernel(const flare_sim_launch *launch)
{
    const args_probe *probe = launch->args;
    if (launch->args_size == sizeof *probe) {
        memcpy(probe->report, probe->payload, sizeof probe->payload);
    }
}

static void test_launch_copies_args_at_submission(void **state)
{
    (void)state;
    int probe_id = register_kernel("test_args_probe", args_probe_kernel);
    set_hang_fault("test_args_probe");
    args_probe *probe = calloc(1, sizeof *probe);
    assert_non_null(probe);
    void *report = NULL;
    assert_int_equal(flare_sim_malloc(2, sizeof probe->payload, &report), FLARE_OK);
    probe->report = report;
    memset(probe->payload, 0x11, sizeof probe->payload);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(2, &stream), FLARE_OK);
    assert_int_equal(flare_sim_launch_kernel(stream, probe_id, unit_dimensions, unit_dimensions,
                                             probe, sizeof *probe),
                     FLARE_OK);
    /* Changed while the kernel is held back: it must still see the old bytes. */
    memset(probe->payload, 0x22, sizeof probe->payload);
    sim_fault_release_hung();
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    for (size_t index = 0; index < sizeof probe->payload; index++) {
        assert_int_equal(((unsigned char *)report)[index], 0x11);
    }
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(report), FLARE_OK);
    free(probe);
}

static void test_full_queue_returns_full(void **state)
{
    (void)state;
    int hang_id = register_kernel(HANG_KERNEL_NAME, noop_kernel);
    set_hang_fault(HANG_KERNEL_NAME);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(1, &stream), FLARE_OK);

    int accepted = 0;
    int status = FLARE_OK;
    uint64_t last_attempt = 0;
    for (int attempt = 0; attempt < SIM_STREAM_QUEUE_CAPACITY + 10; attempt++) {
        last_attempt = now_ns();
        status =
            flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0);
        if (status != FLARE_OK) {
            break;
        }
        accepted++;
    }
    uint64_t refused_after = now_ns() - last_attempt;
    assert_int_equal(status, FLARE_ERR_FULL);
    /* The queue plus the one item the worker is running. */
    assert_int_equal(accepted, SIM_STREAM_QUEUE_CAPACITY + 1);
    assert_true(refused_after >= (uint64_t)SIM_SUBMIT_WAIT_MS * 900000ull);
    assert_true(refused_after < LONG_WAIT_NS);
    assert_int_equal(sim_backend()->stream_in_flight((backend_stream *)stream), (uint64_t)accepted);

    sim_fault_release_hung();
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    assert_int_equal(records_seen(), (size_t)accepted);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
}

static void test_invalid_arguments(void **state)
{
    (void)state;
    const backend_ops *ops = sim_backend();
    flare_sim_stream *stream = NULL;
    void *memory = NULL;
    char local = 0;
    int noop_id = register_kernel("test_noop", noop_kernel);

    assert_int_equal(flare_sim_stream_create(-1, &stream), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_stream_create(TEST_DEVICES, &stream), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_stream_create(64, &stream), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_stream_create(0, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_stream_destroy(NULL), FLARE_ERR_INVALID_ARGUMENT);

    assert_int_equal(flare_sim_malloc(-1, 16, &memory), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_malloc(TEST_DEVICES, 16, &memory), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_malloc(0, 0, &memory), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_malloc(0, 16, NULL), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_free(&local), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_free(NULL), FLARE_OK);

    assert_int_equal(flare_sim_malloc(0, 16, &memory), FLARE_OK);
    assert_int_equal(flare_sim_free((char *)memory + 1), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_stream_create(0, &stream), FLARE_OK);

    unsigned char *big_args = calloc(1, 4097);
    assert_non_null(big_args);
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, big_args, 4097),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, big_args, 4096),
        FLARE_OK);
    free(big_args);
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, NULL, 8),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        flare_sim_launch_kernel(NULL, noop_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_launch_kernel(stream, 0, unit_dimensions, unit_dimensions, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        flare_sim_launch_kernel(stream, 999999, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_launch_kernel(stream, noop_id, NULL, unit_dimensions, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_launch_kernel(stream, noop_id, unit_dimensions, NULL, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    const uint32_t empty_grid[3] = {4, 0, 1};
    assert_int_equal(flare_sim_launch_kernel(stream, noop_id, empty_grid, unit_dimensions, NULL, 0),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(ops->launch((backend_stream *)stream, NULL), FLARE_ERR_INVALID_ARGUMENT);

    unsigned char host[32] = {0};
    assert_int_equal(flare_sim_memcpy_async(NULL, memory, host, 16), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_memcpy_async(stream, NULL, host, 16), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_memcpy_async(stream, memory, NULL, 16), FLARE_ERR_INVALID_ARGUMENT);
    /* Runs past the end of the 16-byte allocation. */
    assert_int_equal(flare_sim_memcpy_async(stream, memory, host, 32), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_memcpy_async(stream, host, (char *)memory + 8, 16),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(
        ops->copy_async((backend_stream *)stream, memory, host, 16, (backend_copy_kind)99),
        FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_memset_async(NULL, memory, 0, 16), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_memset_async(stream, NULL, 0, 16), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_memset_async(stream, memory, 0, 17), FLARE_ERR_INVALID_ARGUMENT);

    assert_int_equal(flare_sim_stream_synchronize(NULL, 10), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_device_synchronize(-1, 10), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(flare_sim_device_synchronize(TEST_DEVICES, 10), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(ops->stream_drain(NULL, 10), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(ops->stream_id(NULL), 0);
    assert_true(ops->stream_device(NULL) < 0);
    assert_int_equal(ops->stream_in_flight(NULL), 0);
    assert_int_equal(ops->device_in_flight(-1), 0);
    assert_int_equal(ops->device_in_flight(TEST_DEVICES), 0);
    assert_int_equal(sim_device_stream_count(-1), FLARE_ERR_INVALID_ARGUMENT);

    char name[8];
    assert_int_equal(ops->device_name(-1, name, sizeof name), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(ops->device_name(0, NULL, 64), FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(ops->device_name(0, name, sizeof name), FLARE_ERR_INVALID_ARGUMENT);
    assert_string_equal(name, "");

    /* Only the one valid launch reached the device. */
    assert_int_equal(flare_sim_stream_synchronize(stream, LONG_WAIT_MS), FLARE_OK);
    assert_int_equal(records_seen(), 1);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    assert_int_equal(flare_sim_free(memory), FLARE_OK);
    assert_int_equal(flare_sim_free(memory), FLARE_ERR_INVALID_ARGUMENT);
}

static atomic_bool hung_release_pending;

static void *release_hung_later(void *argument)
{
    (void)argument;
    sleep_ms(100);
    atomic_store(&hung_release_pending, false);
    sim_fault_release_hung();
    return NULL;
}

static void test_destroy_waits_for_queued_work(void **state)
{
    (void)state;
    int hang_id = register_kernel(HANG_KERNEL_NAME, noop_kernel);
    int noop_id = register_kernel("test_noop", noop_kernel);
    set_hang_fault(HANG_KERNEL_NAME);
    flare_sim_stream *stream = NULL;
    assert_int_equal(flare_sim_stream_create(2, &stream), FLARE_OK);
    int baseline = sim_device_stream_count(2);
    assert_int_equal(
        flare_sim_launch_kernel(stream, hang_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    assert_int_equal(
        flare_sim_launch_kernel(stream, noop_id, unit_dimensions, unit_dimensions, NULL, 0),
        FLARE_OK);
    atomic_store(&hung_release_pending, true);
    pthread_t releaser;
    assert_int_equal(pthread_create(&releaser, NULL, release_hung_later, NULL), 0);
    assert_int_equal(flare_sim_stream_destroy(stream), FLARE_OK);
    /* Destroy returned only after the release and both completions. */
    assert_false(atomic_load(&hung_release_pending));
    assert_int_equal(records_seen(), 2);
    assert_int_equal(sim_device_stream_count(2), baseline - 1);
    assert_int_equal(sim_backend()->device_in_flight(2), 0);
    pthread_join(releaser, NULL);
}

typedef struct drain_watcher {
    atomic_bool stop;
    int unexpected;
    long drains;
} drain_watcher;

static void *drain_device_repeatedly(void *argument)
{
    drain_watcher *watcher = argument;
    const backend_ops *ops = sim_backend();
    while (!atomic_load(&watcher->stop)) {
        int status = ops->device_drain(0, 1000000);
        if (status != FLARE_OK && status != FLARE_ERR_TIMEOUT) {
            watcher->unexpected++;
        }
        (void)ops->device_in_flight(0);
        if (sim_device_stream_count(0) < 0) {
            watcher->unexpected++;
        }
        watcher->drains++;
    }
    return NULL;
}

static void test_destroy_while_device_drain_runs(void **state)
{
    (void)state;
    enum { ROUNDS = 100, KERNELS = 20 };
    const backend_ops *ops = sim_backend();
    int noop_id = register_kernel("test_noop", noop_kernel);
    int baseline = sim_device_stream_count(0);
    drain_watcher watcher = {.stop = false};
    pthread_t drainer;
    assert_int_equal(pthread_create(&drainer, NULL, drain_device_repeatedly, &watcher), 0);
    backend_launch noop = {.kernel_id = noop_id, .grid = {1, 1, 1}, .block = {1, 1, 1}};
    for (int round = 0; round < ROUNDS; round++) {
        backend_stream *streams[2];
        for (int index = 0; index < 2; index++) {
            assert_int_equal(ops->stream_create(0, &streams[index]), FLARE_OK);
            for (int kernel = 0; kernel < KERNELS; kernel++) {
                assert_int_equal(ops->launch(streams[index], &noop), FLARE_OK);
            }
        }
        for (int index = 0; index < 2; index++) {
            assert_int_equal(ops->stream_destroy(streams[index]), FLARE_OK);
        }
    }
    atomic_store(&watcher.stop, true);
    pthread_join(drainer, NULL);
    assert_int_equal(watcher.unexpected, 0);
    assert_true(watcher.drains > 0);
    assert_int_equal(sim_device_stream_count(0), baseline);
    assert_int_equal(ops->device_in_flight(0), 0);
    assert_int_equal(records_seen(), ROUNDS * 2 * KERNELS);
}

/* Must run last: it fills the process-wide kernel registry. */
static void test_kernel_registry_full(void **state)
{
    (void)state;
    int existing = register_kernel("test_noop", noop_kernel);
    int status = FLARE_OK;
    int added = 0;
    for (int index = 0; index < 2000 && status == FLARE_OK; index++) {
        char name[32];
        snprintf(name, sizeof name, "test_fill_%d", index);
        int kernel_id = 0;
        status = flare_sim_kernel_register(name, noop_kernel, &kernel_id);
        if (status == FLARE_OK) {
            added++;
        }
    }
    assert_int_equal(status, FLARE_ERR_FULL);
    assert_true(added > 0 && added < 1024);
    /* A known name still resolves when the registry is full. */
    assert_int_equal(register_kernel("test_noop", noop_kernel), existing);
    int kernel_id = 0;
    assert_int_equal(flare_sim_kernel_register("test_one_too_many", noop_kernel, &kernel_id),
                     FLARE_ERR_FULL);
}

int main(void)
{
    const struct CMUnitTest environment_tests[] = {
        cmocka_unit_test(test_device_count_from_environment),
    };
#define SIM_TEST(function) cmocka_unit_test_setup_teardown(function, install_recorder, quiesce)
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configure_is_fixed_by_first_use),
        SIM_TEST(test_backend_table_and_stream_identity),
        SIM_TEST(test_kernel_registry),
        SIM_TEST(test_single_stream_order_and_kernel_records),
        SIM_TEST(test_many_streams_many_devices_keep_order),
        SIM_TEST(test_copies_and_memset),
        SIM_TEST(test_in_flight_counts),
        SIM_TEST(test_item_in_flight_until_handler_returns),
        SIM_TEST(test_set_handler_waits_for_call_in_progress),
        SIM_TEST(test_drain_times_out_on_hung_kernel),
        SIM_TEST(test_device_drain_waits_for_every_stream),
        SIM_TEST(test_hung_kernel_sleeps_until_released),
        SIM_TEST(test_slow_completion_handler_delays_drain),
        SIM_TEST(test_failed_copy_moves_nothing),
        SIM_TEST(test_launch_copies_args_at_submission),
        SIM_TEST(test_full_queue_returns_full),
        SIM_TEST(test_invalid_arguments),
        SIM_TEST(test_destroy_waits_for_queued_work),
        SIM_TEST(test_destroy_while_device_drain_runs),
        SIM_TEST(test_kernel_registry_full),
    };
#undef SIM_TEST
    int failures = cmocka_run_group_tests_name("sim_environment", environment_tests, NULL, NULL);
    failures += cmocka_run_group_tests_name("sim", tests, configure_devices, NULL);
    return failures;
}
