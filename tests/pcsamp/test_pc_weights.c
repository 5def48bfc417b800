/*
 * test_pc_weights.c: the PC sampling engine (pcsamp/pc_engine.c) over
 * hardware that hands over counts, not single samples, as CUPTI's PC
 * sampling does (one record per PC and stall reason with how many samples
 * it had: backend/cuda/cuda_pc.c). A scripted hardware table gives the
 * engine fixed records; the engine's entries, counters and the aggregate
 * table's drops must add the counts, not the records.
 *
 * Without the count (every record taken as one sample) the entries would
 * say 1 where the hardware said 1000, and drops would be undercounted: the
 * first two cases fail on such an engine. The third holds every sample's
 * time inside its window (a late stamp counts at the close): without that,
 * test_pc_session's window bounds failed under TSan in CI.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "flare/flare.h"
#include "pcsamp/pc_engine.h"
#include "test_util.h"

/* ---- scripted hardware: the records of one window, handed over once ---- */

typedef struct scripted {
    atomic_int started;
    atomic_int handed; /* the records went out */
    uint64_t lost;     /* reported with them */
    /* Their times: each record's own when set (as a late stamp would be),
     * else when read. */
    const uint64_t *times;
    /* Hand them over only after the stop, as CUDA's last read does. */
    int after_stop;
    atomic_int stopped;
    /* When set: each record's function instead of records[]'s, all at one
     * offset and stall reason (so only the name tells them apart). */
    const char *const *functions;
} scripted;

static const struct {
    uint64_t count, offset;
    uint32_t reason;
    const char *function;
} records[] = {
    {1000, 0x10, 1, "hot_chain"},
    {7, 0x20, 2, "hot_chain"},
    {0, 0x30, 1, "cheap_math"}, /* 0 reads as 1 */
};
#define RECORDS (sizeof(records) / sizeof(records[0]))

static int scripted_start(void *hardware, int device, uint64_t period_ns, char *reason,
                          size_t reason_size)
{
    (void)device, (void)period_ns, (void)reason, (void)reason_size;
    atomic_store(&((scripted *)hardware)->started, 1);
    return 0;
}

static int scripted_stop(void *hardware, char *reason, size_t reason_size)
{
    (void)reason, (void)reason_size;
    atomic_store(&((scripted *)hardware)->stopped, 1);
    return 0;
}

static size_t scripted_read(void *hardware, pc_raw_sample *out, size_t max, uint64_t *lost)
{
    scripted *script = hardware;
    if (!atomic_load(&script->started) || (script->after_stop && !atomic_load(&script->stopped)) ||
        max < RECORDS || atomic_exchange(&script->handed, 1))
        return 0;
    for (size_t i = 0; i < RECORDS; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].count = records[i].count;
        out[i].time_ns = script->times != NULL ? script->times[i] : test_now_ns();
        out[i].pc_offset = script->functions != NULL ? 0x10 : records[i].offset;
        out[i].stall_reason = script->functions != NULL ? 1 : records[i].reason;
        out[i].function = script->functions != NULL ? script->functions[i] : records[i].function;
    }
    *lost += script->lost;
    return RECORDS;
}

static const char *scripted_stall(void *hardware, uint32_t reason)
{
    (void)hardware;
    return reason == 1 ? "long_scoreboard" : reason == 2 ? "selected" : "unknown";
}

static const pc_hardware_ops scripted_ops = {
    .name = "scripted-pc",
    .start = scripted_start,
    .stop = scripted_stop,
    .read = scripted_read,
    .stall_reason_name = scripted_stall,
};

/* Arms at arm_ns, waits until the records went out, disarms at disarm_ns,
 * takes every entry. */
static size_t run_window_at(pc_engine *engine, scripted *script, uint64_t arm_ns,
                            uint64_t disarm_ns, pc_entry *entries, size_t max)
{
    backend_engine_config config = {.sample_interval_ns = 100000, .label = "t", .window_id = 1};
    char reason[256] = "";
    assert_int_equal(pc_engine_arm(engine, 0, &config, arm_ns, reason, sizeof(reason)), FLARE_OK);
    if (!script->after_stop)
        TEST_WAIT_UNTIL(atomic_load(&script->handed));
    assert_int_equal(pc_engine_disarm(engine, 0, disarm_ns, NULL), FLARE_OK);
    assert_true(atomic_load(&script->handed));
    size_t count = 0, taken;
    while (count < max && (taken = pc_engine_take(engine, entries + count, max - count)) > 0)
        count += taken;
    return count;
}

static size_t run_window(pc_engine *engine, scripted *script, pc_entry *entries, size_t max)
{
    uint64_t now = test_now_ns();
    return run_window_at(engine, script, now, now + 3600000000000ull, entries, max);
}

static const pc_entry *entry_at(const pc_entry *entries, size_t count, uint64_t offset)
{
    for (size_t i = 0; i < count; i++)
        if (entries[i].pc_offset == offset)
            return &entries[i];
    return NULL;
}

static void test_counts_are_weights(void **state)
{
    (void)state;
    scripted script = {.lost = 5};
    pc_engine *engine = NULL;
    assert_int_equal(pc_engine_create(&scripted_ops, &script, 41, &engine), FLARE_OK);
    pc_entry entries[8];
    size_t count = run_window(engine, &script, entries, 8);
    assert_int_equal(count, 3);
    assert_int_equal(entry_at(entries, count, 0x10)->samples, 1000);
    assert_string_equal(entry_at(entries, count, 0x10)->stall_reason, "long_scoreboard");
    assert_int_equal(entry_at(entries, count, 0x20)->samples, 7);
    assert_int_equal(entry_at(entries, count, 0x30)->samples, 1);
    pc_engine_stats stats;
    pc_engine_stats_get(engine, &stats);
    assert_int_equal(stats.samples, 1008);
    assert_int_equal(stats.samples_read, 1008);
    assert_int_equal(stats.samples_lost, 5);
    assert_int_equal(stats.aggregate_drops, 0);
    assert_int_equal(stats.window_samples, 1008);
    pc_engine_destroy(engine);
}

static void test_drops_count_samples_not_records(void **state)
{
    (void)state;
    scripted script = {.lost = 0};
    pc_engine *engine = NULL;
    assert_int_equal(pc_engine_create(&scripted_ops, &script, 42, &engine), FLARE_OK);
    assert_int_equal(pc_engine_set_aggregate_capacity(engine, 1), FLARE_OK);
    pc_entry entries[8];
    size_t count = run_window(engine, &script, entries, 8);
    assert_int_equal(count, 1);
    assert_int_equal(entries[0].samples, 1000);
    pc_engine_stats stats;
    pc_engine_stats_get(engine, &stats);
    assert_int_equal(stats.samples, 1000);
    assert_int_equal(stats.aggregate_drops, 8); /* 7 + the record of count 0, as 1 */
    assert_int_equal(stats.samples_read, 1008);
    assert_int_equal(stats.window_drops, 8);
    pc_engine_destroy(engine);
}

/* Samples stamped before the arm or after the disarm's now, handed over by
 * the read after the stop (the hardware sampled on until its stop; CUDA
 * stamps them when read) count at the window's edges: every entry lies
 * inside the window. */
static void test_times_stay_inside_the_window(void **state)
{
    (void)state;
    const uint64_t arm_ns = 1000000000ull, disarm_ns = 2000000000ull;
    const uint64_t times[] = {arm_ns - 5, disarm_ns + 7, arm_ns + 500};
    scripted script = {.times = times, .after_stop = 1};
    pc_engine *engine = NULL;
    assert_int_equal(pc_engine_create(&scripted_ops, &script, 43, &engine), FLARE_OK);
    pc_entry entries[8];
    size_t count = run_window_at(engine, &script, arm_ns, disarm_ns, entries, 8);
    assert_int_equal(count, 3);
    assert_int_equal(entry_at(entries, count, 0x10)->first_ns, arm_ns);
    assert_int_equal(entry_at(entries, count, 0x20)->last_ns, disarm_ns);
    assert_int_equal(entry_at(entries, count, 0x30)->first_ns, arm_ns + 500);
    pc_engine_destroy(engine);
}

/* C++ kernels' names run to thousands of bytes: two that differ only at
 * their end are two functions, each kept whole. An engine that cut names
 * at 255 bytes merged them (and PyTorch's samples then matched no kernel
 * record on the H200, session 16). */
static void test_long_names_kept_whole(void **state)
{
    (void)state;
    static char first[3000], second[3000], first_again[3000];
    memset(first, 'a', sizeof(first) - 1);
    memset(second, 'a', sizeof(second) - 1);
    second[sizeof(second) - 2] = 'b';
    memcpy(first_again, first, sizeof(first)); /* one name at another address */
    const char *const functions[] = {first, second, first_again};
    scripted script = {.functions = functions};
    pc_engine *engine = NULL;
    assert_int_equal(pc_engine_create(&scripted_ops, &script, 44, &engine), FLARE_OK);
    pc_entry entries[8];
    size_t count = run_window(engine, &script, entries, 8);
    assert_int_equal(count, 2);
    for (size_t i = 0; i < count; i++) {
        assert_int_equal(strlen(entries[i].function), sizeof(first) - 1);
        if (strcmp(entries[i].function, first) == 0)
            assert_int_equal(entries[i].samples, 1001); /* 1000 and the record of count 0 */
        else
            assert_int_equal(entries[i].samples, 7);
    }
    assert_true(strcmp(entries[0].function, entries[1].function) != 0);
    pc_engine_destroy(engine);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_are_weights),
        cmocka_unit_test(test_drops_count_samples_not_records),
        cmocka_unit_test(test_times_stay_inside_the_window),
        cmocka_unit_test(test_long_names_kept_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
