/*
 * test_cuda_range_times.c: the times of a span's re-issued kernels read off
 * CUPTI's kernel records (src/backend/cuda/cuda_range_times.c), with the
 * records delivered by another thread as CUPTI's buffer thread does: every
 * noted launch's record fills its slot in re-issue order, records of other
 * launches are ignored, a record that never comes leaves its kernel
 * untimed (the end waits its bound, no longer), and a process without
 * kernel records refuses to time at all. Runs under TSan in CI's tsan
 * stage: the correlation ids cross threads with release/acquire.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <string.h>

#include "backend/cuda/cuda_range_times.h"
#include "flare/flare.h"

/* What the fake CUPTI delivers at the next flush: records (correlation
 * id, start, end), from a thread of its own. */
typedef struct record {
    uint32_t correlation;
    uint64_t start, end;
} record;
static record pending[8];
static size_t pending_count;
static int kernels_on = 1;

static void *deliver(void *argument)
{
    (void)argument;
    for (size_t index = 0; index < pending_count; index++)
        cuda_range_times_offer(pending[index].correlation, pending[index].start,
                               pending[index].end);
    return NULL;
}

static void flush(void)
{
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, deliver, NULL), 0);
    pthread_join(thread, NULL);
    pending_count = 0; /* delivered once, as CUPTI does */
}

static int kernel_records(void)
{
    return kernels_on;
}

static int setup(void **state)
{
    (void)state;
    cuda_range_times_attach(flush, kernel_records);
    kernels_on = 1;
    pending_count = 0;
    return 0;
}

static void test_records_fill_their_kernels(void **state)
{
    (void)state;
    char reason[128];
    assert_int_equal(cuda_range_times_begin(0, 3, reason, sizeof(reason)), FLARE_OK);
    cuda_range_times_note_launch(101);
    cuda_range_times_note_launch(105);
    cuda_range_times_note_launch(230);
    /* Out of order, with a program kernel's record among them. */
    pending[pending_count++] = (record){230, 3000, 3900};
    pending[pending_count++] = (record){104, 1, 2};
    pending[pending_count++] = (record){101, 1000, 1500};
    pending[pending_count++] = (record){105, 1600, 2900};
    uint64_t starts[3], ends[3];
    size_t found = 0;
    assert_int_equal(cuda_range_times_end(0, starts, ends, 3, &found, 5000000000ull), FLARE_OK);
    assert_int_equal(found, 3);
    assert_int_equal(starts[0], 1000);
    assert_int_equal(ends[0], 1500);
    assert_int_equal(starts[1], 1600);
    assert_int_equal(ends[1], 2900);
    assert_int_equal(starts[2], 3000);
    assert_int_equal(ends[2], 3900);
}

static void test_missing_record_waits_its_bound(void **state)
{
    (void)state;
    char reason[128];
    assert_int_equal(cuda_range_times_begin(0, 2, reason, sizeof(reason)), FLARE_OK);
    cuda_range_times_note_launch(7);
    cuda_range_times_note_launch(9);
    pending[pending_count++] = (record){9, 500, 800};
    uint64_t starts[2], ends[2];
    size_t found = 0;
    assert_int_equal(cuda_range_times_end(0, starts, ends, 2, &found, 20000000ull),
                     FLARE_ERR_TIMEOUT);
    assert_int_equal(found, 1);
    assert_int_equal(ends[0], 0); /* untimed */
    assert_int_equal(starts[1], 500);
    /* After the end, records are not taken. */
    cuda_range_times_offer(7, 100, 200);
    assert_int_equal(cuda_range_times_begin(0, 1, reason, sizeof(reason)), FLARE_OK);
    cuda_range_times_note_launch(11);
    pending[pending_count++] = (record){7, 100, 200};
    assert_int_equal(cuda_range_times_end(0, starts, ends, 1, &found, 20000000ull),
                     FLARE_ERR_TIMEOUT);
    assert_int_equal(found, 0);
}

static void test_refusals(void **state)
{
    (void)state;
    char reason[128];
    assert_int_equal(cuda_range_times_begin(0, 100000, reason, sizeof(reason)),
                     FLARE_ERR_INVALID_ARGUMENT);
    kernels_on = 0;
    assert_int_equal(cuda_range_times_begin(0, 2, reason, sizeof(reason)), FLARE_ERR_UNSUPPORTED);
    assert_non_null(strstr(reason, "kernel records are off"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_records_fill_their_kernels, setup),
        cmocka_unit_test_setup(test_missing_record_waits_its_bound, setup),
        cmocka_unit_test_setup(test_refusals, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
