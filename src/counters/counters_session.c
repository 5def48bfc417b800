/*
 * counters_session.c: baselines and samples of counters for the session
 * (counters_session.h).
 *
 * Counters outlive sessions, so a session records each counter relative to
 * its value when the session started; a counter registered later starts at
 * 0, since every add to it came after. Samples are written only when a
 * value changed, and what counts as written is only what committed: a
 * rolled-back batch leaves its samples to be written again. Reads go
 * through the active runtime table, so a copy of libflare that forwards
 * records the registry it forwards to.
 */
#include "counters/counters_session.h"

#include <string.h>

enum {
    RECORD_ROW = 1,     /* the counters row */
    RECORD_SAMPLE = 2,  /* at least one sample */
    RECORD_REJECTED = 4 /* a counter_value drop count */
};

typedef struct counter_record {
    uint64_t baseline;
    uint64_t rejected_baseline;
    uint64_t stored_value; /* last committed sample */
    uint64_t stored_rejected;
    uint64_t pending_value; /* written in the open batch */
    uint64_t pending_rejected;
    unsigned stored;  /* RECORD_* committed */
    unsigned pending; /* RECORD_* written in the open batch */
} counter_record;

/* A drop source of the registry as a whole, with its session baseline. */
typedef struct registry_drop {
    const char *source;
    const char *detail;
    uint64_t baseline;
    uint64_t stored;
    uint64_t pending;
    int pending_set;
} registry_drop;

enum { DROP_INVALID_NAME, DROP_REGISTRY_FULL, DROP_SCOPE_TABLE_FULL, DROP_COUNT };

static counter_record records[FLARE_COUNTER_CAPACITY];
static uint32_t records_known; /* counters that have a record */
static int recording;
static registry_drop registry_drops[DROP_COUNT] = {
    [DROP_INVALID_NAME] = {.source = "counter_name", .detail = "invalid counter names"},
    [DROP_REGISTRY_FULL] = {.source = "counter_registry", .detail = "registry full"},
    [DROP_SCOPE_TABLE_FULL] = {.source = "scope_handles", .detail = "open-scope table full"},
};

static void read_registry_drops(const flare_runtime_abi *table, uint64_t values[DROP_COUNT])
{
    table->counter_registry_rejections(&values[DROP_INVALID_NAME], &values[DROP_REGISTRY_FULL]);
    values[DROP_SCOPE_TABLE_FULL] = counters_scope_handles_refused();
}

void counters_session_begin(void)
{
    const flare_runtime_abi *table = counters_active_table();
    uint32_t count = 0;
    table->counter_count(&count);
    if (count > FLARE_COUNTER_CAPACITY)
        count = FLARE_COUNTER_CAPACITY;
    for (uint32_t index = 0; index < count; index++) {
        counter_record *record = &records[index];
        memset(record, 0, sizeof(*record));
        flare_counter *counter;
        if (table->counter_at(index, &counter) != FLARE_OK)
            continue;
        table->counter_value(counter, &record->baseline);
        table->counter_rejected(counter, &record->rejected_baseline);
    }
    records_known = count;
    uint64_t values[DROP_COUNT];
    read_registry_drops(table, values);
    for (int i = 0; i < DROP_COUNT; i++) {
        registry_drops[i].baseline = values[i];
        registry_drops[i].stored = 0;
        registry_drops[i].pending_set = 0;
    }
    recording = 1;
}

void counters_session_end(void)
{
    recording = 0;
}

static void write_counter(store *database, int64_t pid, uint64_t time_ns,
                          const flare_runtime_abi *table, uint32_t index)
{
    counter_record *record = &records[index];
    flare_counter *counter;
    char name[FLARE_COUNTER_NAME_MAX + 1];
    uint64_t value = 0, rejected = 0;
    if (table->counter_at(index, &counter) != FLARE_OK ||
        table->counter_name(counter, name, sizeof(name)) != FLARE_OK ||
        table->counter_value(counter, &value) != FLARE_OK ||
        table->counter_rejected(counter, &rejected) != FLARE_OK)
        return;
    /* Unsigned differences: exact across a wrap of the 64-bit total. */
    value -= record->baseline;
    rejected -= record->rejected_baseline;
    if (!(record->stored & RECORD_ROW) && store_put_counter(database, pid, index, name) == FLARE_OK)
        record->pending |= RECORD_ROW;
    if ((!(record->stored & RECORD_SAMPLE) || value != record->stored_value) &&
        store_put_counter_sample(database, pid, index, time_ns, value) == FLARE_OK) {
        record->pending |= RECORD_SAMPLE;
        record->pending_value = value;
    }
    if (rejected != record->stored_rejected &&
        store_set_drops(database, pid, "counter_value", name, rejected) == FLARE_OK) {
        record->pending |= RECORD_REJECTED;
        record->pending_rejected = rejected;
    }
}

void counters_session_write(store *database, int64_t pid, uint64_t time_ns)
{
    if (!recording)
        return;
    const flare_runtime_abi *table = counters_active_table();
    uint32_t count = 0;
    table->counter_count(&count);
    if (count > FLARE_COUNTER_CAPACITY)
        count = FLARE_COUNTER_CAPACITY;
    /* Registered since the session began: every add to them is the session's. */
    for (; records_known < count; records_known++)
        memset(&records[records_known], 0, sizeof(records[records_known]));
    for (uint32_t index = 0; index < count; index++)
        write_counter(database, pid, time_ns, table, index);

    uint64_t values[DROP_COUNT];
    read_registry_drops(table, values);
    for (int i = 0; i < DROP_COUNT; i++) {
        registry_drop *drop = &registry_drops[i];
        uint64_t count_now = values[i] - drop->baseline;
        if (count_now != drop->stored &&
            store_set_drops(database, pid, drop->source, drop->detail, count_now) == FLARE_OK) {
            drop->pending = count_now;
            drop->pending_set = 1;
        }
    }
}

void counters_session_committed(int committed)
{
    if (!recording)
        return;
    for (uint32_t index = 0; index < records_known; index++) {
        counter_record *record = &records[index];
        if (committed) {
            record->stored |= record->pending;
            if (record->pending & RECORD_SAMPLE)
                record->stored_value = record->pending_value;
            if (record->pending & RECORD_REJECTED)
                record->stored_rejected = record->pending_rejected;
        }
        record->pending = 0;
    }
    for (int i = 0; i < DROP_COUNT; i++) {
        if (committed && registry_drops[i].pending_set)
            registry_drops[i].stored = registry_drops[i].pending;
        registry_drops[i].pending_set = 0;
    }
}
