/*
 * diff_collect.c: the comparison table of `flare diff` (diff_collect.h).
 *
 * Per session: the names table read once into entries (id, bytes), an
 * id -> entry map, and a counting pass over the table that gives each
 * entry its launches (an id with no names row gets an entry named ''). The
 * entries of both sessions, sorted by name bytes, make the groups: one per
 * distinct name. Then, chunk by chunk of consecutive groups whose launches
 * fit the bound, a pass over each session's table drops every duration of
 * the chunk's names into its group's slice of one array per side, and each
 * group is sorted, summarised, tested and judged (diff_stats.h).
 *
 * It must never write to a session, never keep a row (durations only), and
 * never trust that the second pass sees what the first counted: a session
 * that changed in between is an error, not an overrun.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/diff_collect.h"
#include "flare/flare.h"

/* ---- one session's names ---- */

typedef struct diff_entry {
    int64_t id;
    char *name; /* owned, length bytes plus a NUL */
    size_t length;
    uint64_t count; /* launches of this id in the table */
    size_t group;   /* the group of its name, once the groups are made */
} diff_entry;

/* Open addressing, linear probing; a slot holds an entry index + 1, 0 for
 * empty. capacity is a power of two, at least twice the entries. Ids are
 * SQLite rowids, usually 1..N: when they are that dense, dense[id] holds
 * the same index + 1, one lookup in a small array per row instead of two
 * cache misses (the hash still answers for ids outside it). */
typedef struct diff_names {
    diff_entry *entries;
    size_t count;
    size_t capacity;
    uint32_t *slots;
    size_t slot_capacity;
    uint32_t *dense;
    size_t dense_size;
} diff_names;

static size_t slot_of(int64_t id, size_t capacity)
{
    return (size_t)(((uint64_t)id * 0x9E3779B97F4A7C15ull) >> 32) & (capacity - 1);
}

/* The entry of id, or NULL. */
static diff_entry *names_find(const diff_names *names, int64_t id)
{
    if ((uint64_t)id < names->dense_size) {
        uint32_t index = names->dense[id];
        return index != 0 ? &names->entries[index - 1] : NULL;
    }
    if (names->slot_capacity == 0)
        return NULL;
    for (size_t slot = slot_of(id, names->slot_capacity);;
         slot = (slot + 1) & (names->slot_capacity - 1)) {
        uint32_t index = names->slots[slot];
        if (index == 0)
            return NULL;
        if (names->entries[index - 1].id == id)
            return &names->entries[index - 1];
    }
}

static int names_rehash(diff_names *names, size_t slot_capacity)
{
    uint32_t *slots = calloc(slot_capacity, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < names->count; i++) {
        size_t slot = slot_of(names->entries[i].id, slot_capacity);
        while (slots[slot] != 0)
            slot = (slot + 1) & (slot_capacity - 1);
        slots[slot] = (uint32_t)(i + 1);
    }
    free(names->slots);
    names->slots = slots;
    names->slot_capacity = slot_capacity;
    return 0;
}

/* Adds an entry for id with a copy of name; the existing one when id is
 * already there (a damaged file's duplicate keeps its first name).
 * Returns it, or NULL when out of memory. */
static diff_entry *names_add(diff_names *names, int64_t id, const char *name, size_t length)
{
    diff_entry *existing = names_find(names, id);
    if (existing != NULL)
        return existing;
    if (names->count >= UINT32_MAX - 1)
        return NULL;
    if (names->count == names->capacity) {
        size_t grown = names->capacity == 0 ? 64 : names->capacity * 2;
        diff_entry *bigger = realloc(names->entries, grown * sizeof *bigger);
        if (bigger == NULL)
            return NULL;
        names->entries = bigger;
        names->capacity = grown;
    }
    if ((names->count + 1) * 2 > names->slot_capacity &&
        names_rehash(names, names->slot_capacity == 0 ? 128 : names->slot_capacity * 2) != 0)
        return NULL;
    char *copy = malloc(length + 1);
    if (copy == NULL)
        return NULL;
    memcpy(copy, name, length);
    copy[length] = '\0';
    diff_entry *entry = &names->entries[names->count];
    *entry = (diff_entry){.id = id, .name = copy, .length = length};
    size_t slot = slot_of(id, names->slot_capacity);
    while (names->slots[slot] != 0)
        slot = (slot + 1) & (names->slot_capacity - 1);
    names->slots[slot] = (uint32_t)(++names->count);
    if ((uint64_t)id < names->dense_size)
        names->dense[id] = (uint32_t)names->count;
    return entry;
}

/* Builds names->dense when the ids are dense enough (at most four slots
 * per name, or 64 Ki in all); nothing when they are not or there is no
 * memory for it (the hash serves alone). */
static void names_index_dense(diff_names *names)
{
    int64_t largest = -1;
    for (size_t i = 0; i < names->count; i++) {
        if (names->entries[i].id < 0)
            return;
        if (names->entries[i].id > largest)
            largest = names->entries[i].id;
    }
    if (largest < 0 || (uint64_t)largest >= 4 * (uint64_t)names->count + 65536)
        return;
    names->dense = calloc((size_t)largest + 1, sizeof *names->dense);
    if (names->dense == NULL)
        return;
    names->dense_size = (size_t)largest + 1;
    for (size_t i = 0; i < names->count; i++)
        names->dense[names->entries[i].id] = (uint32_t)(i + 1);
}

static void names_free(diff_names *names)
{
    for (size_t i = 0; i < names->count; i++)
        free(names->entries[i].name);
    free(names->entries);
    free(names->slots);
    free(names->dense);
    memset(names, 0, sizeof *names);
}

static int add_name_row(int64_t id, const char *name, size_t length, void *user)
{
    return names_add(user, id, name, length) != NULL ? 0 : FLARE_ERR_NO_MEMORY;
}

static int count_row(int64_t name_id, uint64_t duration_ns, void *user)
{
    (void)duration_ns;
    diff_entry *entry = names_find(user, name_id);
    if (entry == NULL)
        entry = names_add(user, name_id, "", 0); /* a row whose name is missing */
    if (entry == NULL)
        return FLARE_ERR_NO_MEMORY;
    entry->count++;
    return 0;
}

/* ---- the groups: one per distinct name ---- */

typedef struct diff_group {
    const char *name; /* an entry's: valid while the names are */
    size_t length;
    uint64_t count[2];  /* launches in BASE, NEW */
    uint64_t offset[2]; /* where its durations start in the chunk's arrays */
} diff_group;

typedef struct diff_ref {
    diff_entry *entry;
    int side;
} diff_ref;

static int compare_bytes(const char *a, size_t a_length, const char *b, size_t b_length)
{
    int order = memcmp(a, b, a_length < b_length ? a_length : b_length);
    if (order != 0)
        return order;
    return (a_length > b_length) - (a_length < b_length);
}

static int compare_refs(const void *left, const void *right)
{
    const diff_entry *a = ((const diff_ref *)left)->entry, *b = ((const diff_ref *)right)->entry;
    return compare_bytes(a->name, a->length, b->name, b->length);
}

/* Makes the groups from both sides' entries with launches. Returns 0 or
 * -1 (out of memory). */
static int make_groups(diff_names sides[2], diff_group **out, size_t *count)
{
    size_t total = sides[0].count + sides[1].count;
    diff_ref *refs = malloc((total > 0 ? total : 1) * sizeof *refs);
    diff_group *groups = calloc(total > 0 ? total : 1, sizeof *groups);
    if (refs == NULL || groups == NULL) {
        free(refs);
        free(groups);
        return -1;
    }
    size_t used = 0;
    for (int side = 0; side < 2; side++)
        for (size_t i = 0; i < sides[side].count; i++)
            if (sides[side].entries[i].count > 0)
                refs[used++] = (diff_ref){&sides[side].entries[i], side};
    qsort(refs, used, sizeof *refs, compare_refs);
    size_t group_count = 0;
    for (size_t i = 0; i < used; i++) {
        diff_entry *entry = refs[i].entry;
        if (group_count == 0 ||
            compare_bytes(groups[group_count - 1].name, groups[group_count - 1].length, entry->name,
                          entry->length) != 0) {
            groups[group_count].name = entry->name;
            groups[group_count].length = entry->length;
            group_count++;
        }
        entry->group = group_count - 1;
        groups[group_count - 1].count[refs[i].side] += entry->count;
    }
    free(refs);
    *out = groups;
    *count = group_count;
    return 0;
}

/* ---- a chunk's durations ---- */

/* Where the next duration of a group goes in its side's array, and where
 * its slice ends: 16 bytes per group, so that a row costs one small array
 * lookup (group_of_id) and one cursor rather than an entry and a group. */
typedef struct diff_cursor {
    uint64_t next;
    uint64_t end;
} diff_cursor;

typedef struct diff_fill {
    diff_names *names;
    const uint32_t *group_of_id; /* by id, group + 1 (0: none); NULL without names->dense */
    size_t first, end;           /* the chunk's groups */
    diff_cursor *cursors;        /* by group */
    uint64_t *durations;
    int changed; /* a row the counting pass did not see */
} diff_fill;

static int fill_row(int64_t name_id, uint64_t duration_ns, void *user)
{
    diff_fill *fill = user;
    size_t group;
    if (fill->group_of_id != NULL && (uint64_t)name_id < fill->names->dense_size) {
        uint32_t found = fill->group_of_id[name_id];
        if (found == 0) {
            fill->changed = 1;
            return FLARE_ERR_STATE;
        }
        group = found - 1;
    } else {
        diff_entry *entry = names_find(fill->names, name_id);
        if (entry == NULL || entry->count == 0) {
            fill->changed = 1;
            return FLARE_ERR_STATE;
        }
        group = entry->group;
    }
    if (group < fill->first || group >= fill->end)
        return 0;
    diff_cursor *cursor = &fill->cursors[group];
    if (cursor->next == cursor->end) {
        fill->changed = 1;
        return FLARE_ERR_STATE;
    }
    fill->durations[cursor->next++] = duration_ns;
    return 0;
}

/* ---- the comparison ---- */

typedef struct diff_run {
    store *stores[2];
    store_diff_table table;
    const diff_rule *rule;
    diff_names names[2];
    diff_group *groups;
    size_t group_count;
    uint64_t *durations[2];
    uint32_t *group_of_id[2]; /* fill_row's shortcut, when the ids are dense */
    diff_cursor *cursors[2];  /* by group */
    diff_table *out;
    double variance_sum[2]; /* sum over names of count x variance, for the total's test */
    const char *labels[2];  /* the session directories, for messages */
    char *error;
    size_t error_size;
} diff_run;

/* Puts the message in the caller's error; returns -1. */
static int fail(diff_run *run, const char *format, ...) __attribute__((format(printf, 2, 3)));
static int fail(diff_run *run, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(run->error, run->error_size, format, arguments);
    va_end(arguments);
    return -1;
}

/* The error of a failed walk of side's store. */
static int walk_failed(diff_run *run, int side, int status, int changed)
{
    if (changed)
        return fail(run, "the session in %s changed while it was being compared",
                    run->labels[side]);
    if (status == FLARE_ERR_NO_MEMORY)
        return fail(run, "out of memory reading the names of %s", run->labels[side]);
    return fail(run, "%s", store_last_error(run->stores[side]));
}

/* Turns group into its row (durations sorted and judged). */
static int judge_group(diff_run *run, const diff_group *group, diff_row *row)
{
    uint64_t *values[2];
    for (int side = 0; side < 2; side++) {
        values[side] = run->durations[side] + group->offset[side];
        if (diff_sort_durations(values[side], group->count[side]) != 0)
            return fail(run, "out of memory sorting durations");
    }
    memset(row, 0, sizeof *row);
    row->name = malloc(group->length + 1);
    if (row->name == NULL)
        return fail(run, "out of memory");
    memcpy(row->name, group->name, group->length);
    row->name[group->length] = '\0';
    diff_side_summarize(values[0], group->count[0], &row->base);
    diff_side_summarize(values[1], group->count[1], &row->new_side);
    if (diff_mann_whitney(values[0], group->count[0], values[1], group->count[1], &row->test) != 0)
        return fail(run, "out of memory computing an exact p-value");
    row->change_pct = row->base.count > 0 && row->new_side.count > 0
                          ? diff_change_pct(row->base.mean_ns, row->new_side.mean_ns)
                          : NAN;
    row->verdict = diff_verdict_of(&row->base, &row->new_side, &row->test, run->rule);
    for (int side = 0; side < 2; side++) {
        const diff_side *summary = side == 0 ? &row->base : &row->new_side;
        run->variance_sum[side] += (double)summary->count * summary->variance;
    }
    return 0;
}

/* Reads, sorts and judges the groups [first, end), whose durations fit
 * the arrays (allocated by the caller at the chunk's size). */
static int run_chunk(diff_run *run, size_t first, size_t end)
{
    uint64_t offsets[2] = {0, 0};
    for (size_t g = first; g < end; g++)
        for (int side = 0; side < 2; side++) {
            run->groups[g].offset[side] = offsets[side];
            offsets[side] += run->groups[g].count[side];
            run->cursors[side][g] = (diff_cursor){run->groups[g].offset[side], offsets[side]};
        }
    for (int side = 0; side < 2; side++) {
        diff_fill fill = {.names = &run->names[side],
                          .group_of_id = run->group_of_id[side],
                          .first = first,
                          .end = end,
                          .cursors = run->cursors[side],
                          .durations = run->durations[side]};
        int status = store_diff_walk_durations(run->stores[side], run->table, fill_row, &fill);
        if (status != 0)
            return walk_failed(run, side, status, fill.changed);
        for (size_t g = first; g < end; g++)
            if (run->cursors[side][g].next != run->cursors[side][g].end)
                return walk_failed(run, side, FLARE_ERR_STATE, 1);
    }
    for (size_t g = first; g < end; g++)
        if (judge_group(run, &run->groups[g], &run->out->rows[run->out->count++]) != 0)
            return -1;
    return 0;
}

/* Largest absolute change of the total first; ties by name. */
static int compare_rows(const void *left, const void *right)
{
    const diff_row *a = left, *b = right;
    double change_a = fabs((double)a->new_side.total_ns - (double)a->base.total_ns);
    double change_b = fabs((double)b->new_side.total_ns - (double)b->base.total_ns);
    if (change_a != change_b)
        return change_a > change_b ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* The row over every name: counts, totals, the mean of all launches, and
 * the total's test. */
static void make_total(diff_run *run)
{
    diff_table *out = run->out;
    diff_row *total = &out->total;
    memset(total, 0, sizeof *total);
    for (size_t i = 0; i < out->count; i++) {
        const diff_row *row = &out->rows[i];
        total->base.count += row->base.count;
        total->new_side.count += row->new_side.count;
        total->base.total_ns = row->base.total_ns > UINT64_MAX - total->base.total_ns
                                   ? UINT64_MAX
                                   : total->base.total_ns + row->base.total_ns;
        total->new_side.total_ns = row->new_side.total_ns > UINT64_MAX - total->new_side.total_ns
                                       ? UINT64_MAX
                                       : total->new_side.total_ns + row->new_side.total_ns;
        out->verdicts[row->verdict]++;
    }
    diff_side *sides[2] = {&total->base, &total->new_side};
    for (int side = 0; side < 2; side++) {
        if (sides[side]->count > 0)
            sides[side]->mean_ns = (double)sides[side]->total_ns / (double)sides[side]->count;
        sides[side]->variance = run->variance_sum[side];
    }
    total->change_pct =
        diff_change_pct((double)total->base.total_ns, (double)total->new_side.total_ns);
    total->verdict =
        diff_total_verdict(total->base.total_ns, run->variance_sum[0], total->new_side.total_ns,
                           run->variance_sum[1], run->rule, &total->test);
}

/* Both sessions' names and counts, then the groups. */
static int prepare(diff_run *run)
{
    for (int side = 0; side < 2; side++) {
        int status = store_diff_walk_names(run->stores[side], add_name_row, &run->names[side]);
        if (status == 0) {
            names_index_dense(&run->names[side]);
            status = store_diff_walk_durations(run->stores[side], run->table, count_row,
                                               &run->names[side]);
        }
        if (status != 0)
            return walk_failed(run, side, status, 0);
    }
    if (make_groups(run->names, &run->groups, &run->group_count) != 0)
        return fail(run, "out of memory");
    for (int side = 0; side < 2; side++) {
        const diff_names *names = &run->names[side];
        run->cursors[side] =
            calloc(run->group_count > 0 ? run->group_count : 1, sizeof(diff_cursor));
        if (run->cursors[side] == NULL)
            return fail(run, "out of memory");
        if (names->dense == NULL)
            continue;
        /* Without memory for it, fill_row takes the longer way. */
        run->group_of_id[side] = calloc(names->dense_size, sizeof(uint32_t));
        for (size_t i = 0; run->group_of_id[side] != NULL && i < names->count; i++) {
            const diff_entry *entry = &names->entries[i];
            if (entry->count > 0 && (uint64_t)entry->id < names->dense_size)
                run->group_of_id[side][entry->id] = (uint32_t)(entry->group + 1);
        }
    }
    run->out->rows = calloc(run->group_count > 0 ? run->group_count : 1, sizeof *run->out->rows);
    if (run->out->rows == NULL)
        return fail(run, "out of memory");
    return 0;
}

int diff_collect(const diff_sessions *sessions, store_diff_table table, const diff_rule *rule,
                 uint64_t chunk_durations, diff_table *out, char *error, size_t error_size)
{
    memset(out, 0, sizeof *out);
    if (chunk_durations == 0)
        chunk_durations = DIFF_CHUNK_DURATIONS;
    diff_run run = {.stores = {sessions->base, sessions->new_store},
                    .labels = {sessions->base_label, sessions->new_label},
                    .table = table,
                    .rule = rule,
                    .out = out,
                    .error = error,
                    .error_size = error_size};
    int status = prepare(&run);
    for (size_t first = 0; status == 0 && first < run.group_count;) {
        /* The chunk: groups while they fit, at least one. */
        uint64_t sizes[2] = {run.groups[first].count[0], run.groups[first].count[1]};
        size_t end = first + 1;
        while (end < run.group_count &&
               sizes[0] + sizes[1] + run.groups[end].count[0] + run.groups[end].count[1] <=
                   chunk_durations) {
            sizes[0] += run.groups[end].count[0];
            sizes[1] += run.groups[end].count[1];
            end++;
        }
        for (int side = 0; side < 2 && status == 0; side++) {
            free(run.durations[side]);
            run.durations[side] = malloc((sizes[side] > 0 ? sizes[side] : 1) * sizeof(uint64_t));
            if (run.durations[side] == NULL)
                status = fail(&run, "out of memory for the durations");
        }
        if (status == 0)
            status = run_chunk(&run, first, end);
        first = end;
    }
    for (int side = 0; side < 2; side++) {
        free(run.durations[side]);
        free(run.group_of_id[side]);
        free(run.cursors[side]);
        names_free(&run.names[side]);
    }
    free(run.groups);
    if (status != 0) {
        diff_table_free(out);
        return -1;
    }
    qsort(out->rows, out->count, sizeof *out->rows, compare_rows);
    make_total(&run);
    return 0;
}

void diff_table_free(diff_table *table)
{
    for (size_t i = 0; i < table->count; i++)
        free(table->rows[i].name);
    free(table->rows);
    memset(table, 0, sizeof *table);
}
