/*
 * cuda_range_times.c: re-issued kernels' times from CUPTI's kernel records
 * (cuda_range_times.h).
 *
 * The correlation ids are written by the span's thread only (the launches
 * it re-issues), published with a release store of the count; CUPTI's
 * thread reads them with an acquire load and searches them by binary
 * search (CUPTI's correlation ids grow in launch order). Each kernel's
 * times are written once, by whichever thread delivers its record.
 *
 * Must never: write outside its tables, or wait without a bound.
 */
#include "backend/cuda/cuda_range_times.h"

#include "core/clock.h"
#include "flare/flare.h"
#include "replay/replay.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define TIMES_MAX REPLAY_RANGE_KERNELS_MAX
/* How often the end hands CUPTI's buffers over again while it waits. */
#define REFLUSH_NS 50000000ull

static void (*flush_buffers)(void);
static int (*kernels_on)(void);
static atomic_int timing;
/* The span's own thread: only its launches are the span's (a replay on
 * another thread, another device, brackets its relaunches too). */
static _Thread_local bool timing_thread;
static _Atomic size_t expected;
static _Atomic size_t noted;
static _Atomic uint32_t correlations[TIMES_MAX];
static _Atomic uint64_t starts[TIMES_MAX];
static _Atomic uint64_t ends[TIMES_MAX];
static _Atomic size_t found_count;

void cuda_range_times_attach(void (*flush)(void), int (*kernels_recorded)(void))
{
    flush_buffers = flush;
    kernels_on = kernels_recorded;
}

int cuda_range_times_begin(int device, size_t kernel_count, char *reason, size_t reason_size)
{
    (void)device;
    if (kernel_count > TIMES_MAX) {
        snprintf(reason, reason_size, "%zu kernels: at most %d can be timed", kernel_count,
                 TIMES_MAX);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (flush_buffers == NULL || kernels_on == NULL || !kernels_on()) {
        snprintf(reason, reason_size,
                 "CUPTI's kernel records are off in this process (they time the kernels)");
        return FLARE_ERR_UNSUPPORTED;
    }
    for (size_t index = 0; index < TIMES_MAX; index++) {
        atomic_store_explicit(&starts[index], 0, memory_order_relaxed);
        atomic_store_explicit(&ends[index], 0, memory_order_relaxed);
    }
    atomic_store(&expected, kernel_count);
    atomic_store(&found_count, 0);
    atomic_store(&noted, 0);
    timing_thread = true;
    atomic_store(&timing, 1);
    return FLARE_OK;
}

void cuda_range_times_note_launch(uint32_t correlation_id)
{
    if (!timing_thread)
        return;
    size_t index = atomic_load_explicit(&noted, memory_order_relaxed);
    if (index >= atomic_load_explicit(&expected, memory_order_relaxed))
        return;
    atomic_store_explicit(&correlations[index], correlation_id, memory_order_relaxed);
    atomic_store_explicit(&noted, index + 1, memory_order_release);
}

void cuda_range_times_offer(uint32_t correlation_id, uint64_t start_ns, uint64_t end_ns)
{
    if (!atomic_load_explicit(&timing, memory_order_relaxed) || correlation_id == 0)
        return;
    size_t count = atomic_load_explicit(&noted, memory_order_acquire);
    size_t low = 0, high = count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (atomic_load_explicit(&correlations[middle], memory_order_relaxed) < correlation_id)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == count ||
        atomic_load_explicit(&correlations[low], memory_order_relaxed) != correlation_id)
        return;
    uint64_t none = 0;
    if (atomic_compare_exchange_strong(&ends[low], &none,
                                       end_ns > start_ns ? end_ns : start_ns + 1)) {
        atomic_store(&starts[low], start_ns);
        atomic_fetch_add(&found_count, 1);
    }
}

int cuda_range_times_end(int device, uint64_t *start_ns, uint64_t *end_ns, size_t kernel_count,
                         size_t *found, uint64_t timeout_ns)
{
    (void)device;
    uint64_t began = core_now_ns();
    uint64_t flushed = 0;
    size_t expected_count = atomic_load(&expected);
    size_t want = kernel_count < expected_count ? kernel_count : expected_count;
    while (atomic_load(&found_count) < want && core_now_ns() - began < timeout_ns) {
        if (flushed == 0 || core_now_ns() - flushed >= REFLUSH_NS) {
            flush_buffers();
            flushed = core_now_ns();
            continue;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    atomic_store(&timing, 0);
    timing_thread = false;
    size_t count = 0;
    for (size_t index = 0; index < kernel_count; index++) {
        uint64_t end = index < TIMES_MAX ? atomic_load(&ends[index]) : 0;
        /* The start is stored after the end: a record still being filled
         * reads as missing. */
        uint64_t start = end != 0 ? atomic_load(&starts[index]) : 0;
        if (start == 0)
            end = 0;
        start_ns[index] = start;
        end_ns[index] = end;
        count += end != 0;
    }
    *found = count;
    return count == kernel_count ? FLARE_OK : FLARE_ERR_TIMEOUT;
}
