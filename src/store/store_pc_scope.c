/*
 * store_pc_scope.c: values counted per instruction, attributed to scopes:
 * PC samples (store_read_pc_by_scope, store_pc.h) and SASS metrics
 * (store_read_sass_by_scope, store_sass.h). CUDA hands both over as counts
 * per instruction, with no time of their own, so a function's values in a
 * window are split over the scopes its kernels ran in during the window, by
 * kernel time; for SASS metrics, a function whose launches the GPU did not
 * time while the window counted (untimed_launches) by those launches, each
 * in the scope recorded with it on its launching thread. One implementation serves both: a source
 * (scope_source) names the table, the query of its values (per function: a key, the stall reason or
 * the metric, and a count), the order of the rows handed over and how one is handed over.
 *
 * Three reads and a sweep: the windows' kernels of the table's functions
 * (clipped to the window; the kernels index answers each window with one
 * range, bounded below by the longest kernel), the scopes overlapping each
 * window, and the values. Which scope holds a kernel's midpoint is the
 * caller's resolver (attrib_resolve: O((n + m) log m)); a query per kernel
 * over the window's scopes was quadratic (16.5 s for 10,000 kernels with a
 * scope each). The rest is sorting and merging here.
 *
 * Must never: credit a value to a window, device or function other than
 * its own, lose one (each lands in a scope, "(no range)" or "(no kernel in
 * the window)"), or write to the session.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"
#include "store/store_pc.h"
#include "store/store_sass.h"

#define NO_RANGE  "(no range)"
#define NO_KERNEL "(no kernel in the window)"

/* The windows with rows in table, closed, with the earliest start a kernel
 * overlapping them can have, and when the process's next window opened
 * (nx: a SASS window counts until the program's next launch after its
 * close, which is before the next window can open). */
#define WINDOWS_CTE(table)                                                                         \
    "WITH win AS MATERIALIZED (SELECT pid, id AS window_id, opened_ns AS o, closed_ns AS c,"       \
    " opened_ns - COALESCE((SELECT value FROM meta WHERE key = 'kernel_duration_max_ns'),"         \
    " (SELECT MAX(end_ns - start_ns) FROM kernels), 0) AS lo,"                                     \
    " COALESCE((SELECT MIN(x.opened_ns) FROM windows x WHERE x.pid = windows.pid"                  \
    "  AND x.opened_ns > windows.opened_ns), 9223372036854775807) AS nx"                           \
    " FROM windows WHERE opened_ns IS NOT NULL AND closed_ns IS NOT NULL"                          \
    " AND id IN (SELECT window_id FROM " table "))"

/* The kernels of table's functions in their windows. A name of 255 bytes
 * that no kernel of its process has stands for the kernel names it begins:
 * sessions written before PC samples kept whole names (session 16) cut
 * them there. A kernel whose whole name is 255 bytes keeps its own values.
 * cut holds the few names cut at 255 bytes (one test per distinct name,
 * not per window's function: kernels has no (pid, name_id) index). */
#define KERNELS_CTE(table)                                                                         \
    WINDOWS_CTE(table)                                                                             \
    ","                                                                                            \
    " fn AS MATERIALIZED (SELECT DISTINCT pid, window_id, device, name_id FROM " table "),"        \
    " cut AS MATERIALIZED (SELECT DISTINCT f.pid, f.name_id FROM fn f"                             \
    "  JOIN names n ON n.id = f.name_id AND length(CAST(n.name AS BLOB)) = 255),"                  \
    " orphan AS MATERIALIZED (SELECT c.pid, c.name_id FROM cut c WHERE NOT EXISTS"                 \
    "  (SELECT 1 FROM kernels x WHERE x.pid = c.pid AND x.name_id = c.name_id)),"                  \
    " kn AS (SELECT pid, window_id, device, name_id, name_id AS kernel_name_id FROM fn"            \
    "  UNION SELECT f.pid, f.window_id, f.device, f.name_id, k.id FROM fn f"                       \
    "  JOIN orphan o ON o.pid = f.pid AND o.name_id = f.name_id"                                   \
    "  JOIN names n ON n.id = f.name_id"                                                           \
    "  JOIN names k ON k.id != n.id"                                                               \
    "  AND substr(CAST(k.name AS BLOB), 1, 255) = CAST(n.name AS BLOB))"
#define KERNELS_SELECT(extra)                                                                      \
    " SELECT f.pid, f.window_id, f.device, f.name_id,"                                             \
    "  MAX(k.start_ns, w.o), MIN(k.end_ns, w.c)" extra                                             \
    " FROM kn f JOIN win w ON w.pid = f.pid AND w.window_id = f.window_id"                         \
    " JOIN kernels k ON k.pid = f.pid AND k.device = f.device AND k.name_id = f.kernel_name_id"    \
    " AND k.start_ns >= w.lo AND k.start_ns < w.c AND k.end_ns > w.o"
#define KERNELS_SQL(table) KERNELS_CTE(table) KERNELS_SELECT("") " ORDER BY 1, 2"

/* The launches of a function that the GPU did not time while the window
 * counted (recorded only while a SASS window counts, so each belongs to
 * the last window opened before it): one nanosecond each, in the scope
 * recorded with it on the launching thread (its name id; 0 for none; NULL,
 * resolved by time as kernels are, when that scope has no row), so the
 * split goes by launches. */
#define UNTIMED_ON(u)                                                                              \
    " " u ".pid = f.pid AND " u ".name_id = f.kernel_name_id AND " u ".device = f.device"          \
    " AND " u ".time_ns >= w.o AND " u ".time_ns < w.nx"
#define UNTIMED_SELECT                                                                             \
    " SELECT f.pid, f.window_id, f.device, f.name_id, u.time_ns, u.time_ns + 1,"                   \
    "  CASE WHEN u.scope_instance_id IS NULL THEN 0 ELSE sc.name_id END"                           \
    " FROM kn f JOIN win w ON w.pid = f.pid AND w.window_id = f.window_id"                         \
    " JOIN untimed_launches u ON" UNTIMED_ON("u") " LEFT JOIN sc ON sc.pid = u.pid"                \
                                                  " AND sc.instance_id = u.scope_instance_id"
#define UNTIMED_SCOPES_CTE                                                                         \
    ", sc AS MATERIALIZED (SELECT pid, instance_id, MIN(name_id) AS name_id FROM scopes"           \
    " WHERE instance_id IN (SELECT scope_instance_id FROM untimed_launches)"                       \
    " GROUP BY pid, instance_id)"
/* As KERNELS_SQL, but a function with untimed launches in its window is
 * weighed by those alone (its kernels, if any, ran outside the quiet). */
#define UNTIMED_NONE " WHERE NOT EXISTS (SELECT 1 FROM untimed_launches x WHERE" UNTIMED_ON("x") ")"
#define KERNELS_OR_UNTIMED_SQL(table)                                                              \
    KERNELS_CTE(table)                                                                             \
    UNTIMED_SCOPES_CTE KERNELS_SELECT(", NULL") UNTIMED_NONE " UNION ALL" UNTIMED_SELECT           \
                                                             " ORDER BY 1, 2"

/* The scopes overlapping the windows with rows in table. */
#define SCOPES_SQL(table)                                                                          \
    WINDOWS_CTE(table)                                                                             \
    " SELECT w.pid, w.window_id, s.name_id, s.depth, s.start_ns,"                                  \
    "  CASE WHEN s.still_open != 0 THEN -1 ELSE s.end_ns END, s.instance_id"                       \
    " FROM win w JOIN scopes s ON s.pid = w.pid AND s.start_ns <= w.c"                             \
    " AND (s.end_ns >= w.o OR s.still_open != 0) ORDER BY w.pid, w.window_id"

static const char names_sql[] =
    "SELECT id, name FROM names WHERE id IN (SELECT name_id FROM scopes) ORDER BY id";

/* A kernel's time in a window, then (merged) a function's time in a scope. */
typedef struct credit {
    int64_t pid, device, function, scope; /* scope: its name id; 0 for none */
    uint64_t window_id, ns, middle;
    int fixed; /* scope came with the row (an untimed launch's): not resolved by time */
} credit;

typedef struct window_scope {
    int64_t pid, name_id;
    uint64_t window_id;
    store_pc_scope_span span;
} window_scope;

typedef struct name_entry {
    int64_t id;
    char *name;
} name_entry;

typedef struct out_row {
    int64_t pid, device;
    uint64_t window_id;
    const char *scope;
    const char *key; /* the stall reason or metric, interned in work.keys */
    double value;
} out_row;

typedef struct work {
    credit *credits;
    size_t credit_count, credit_capacity;
    window_scope *scopes;
    size_t scope_count, scope_capacity;
    name_entry *names;
    size_t name_count, name_capacity;
    char **keys; /* sorted: a table has few distinct keys */
    size_t key_count, key_capacity;
    out_row *out;
    size_t out_count, out_capacity;
} work;

/* Where the rows go: the reader's callback of its own row type. */
typedef struct scope_target {
    store_pc_scope_callback pc;
    store_sass_scope_callback sass;
    void *user;
} scope_target;

/* A table of values per instruction, as the split reads it. values_sql
 * gives pid, window_id, device, name_id, the key and the value, in any
 * order and any number of rows per (function, key): the split is per
 * function. order sorts the merged rows; deliver hands one to target and
 * returns its callback's answer (non-zero: stop). */
typedef struct scope_source {
    const char *table;
    const char *kernels_sql, *scopes_sql, *values_sql;
    /* kernels_sql where the session has untimed_launches (schema 14); NULL:
     * kernels_sql always. */
    const char *kernels_untimed_sql;
    const char *what; /* the failure's message */
    int (*order)(const void *a, const void *b);
    int (*deliver)(const out_row *row, const scope_target *target);
} scope_source;

/* Room for one more element in *array; 0, or FLARE_ERR_NO_MEMORY. */
static int reserve(void **array, size_t *capacity, size_t used, size_t size)
{
    if (used < *capacity)
        return 0;
    size_t grown = *capacity == 0 ? 256 : *capacity * 2;
    void *bigger = realloc(*array, grown * size);
    if (bigger == NULL)
        return FLARE_ERR_NO_MEMORY;
    *array = bigger;
    *capacity = grown;
    return 0;
}

#define RESERVE(w, field, count, capacity)                                                         \
    reserve((void **)&(w)->field, &(w)->capacity, (w)->count, sizeof(*(w)->field))

static int kernel_row(sqlite3_stmt *statement, void *user)
{
    work *w = user;
    if (RESERVE(w, credits, credit_count, credit_capacity) != 0)
        return FLARE_ERR_NO_MEMORY;
    uint64_t a = (uint64_t)sqlite3_column_int64(statement, 4);
    uint64_t b = (uint64_t)sqlite3_column_int64(statement, 5);
    w->credits[w->credit_count++] = (credit){
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .device = sqlite3_column_int64(statement, 2),
        .function = sqlite3_column_int64(statement, 3),
        .ns = b > a ? b - a : 0,
        .middle = a + (b > a ? (b - a) / 2 : 0),
    };
    if (sqlite3_column_count(statement) > 6 && sqlite3_column_type(statement, 6) != SQLITE_NULL) {
        w->credits[w->credit_count - 1].scope = sqlite3_column_int64(statement, 6);
        w->credits[w->credit_count - 1].fixed = 1;
    }
    return 0;
}

static int scope_row(sqlite3_stmt *statement, void *user)
{
    work *w = user;
    if (RESERVE(w, scopes, scope_count, scope_capacity) != 0)
        return FLARE_ERR_NO_MEMORY;
    w->scopes[w->scope_count++] = (window_scope){
        .pid = sqlite3_column_int64(statement, 0),
        .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
        .name_id = sqlite3_column_int64(statement, 2),
        .span = {.depth = (uint32_t)sqlite3_column_int64(statement, 3),
                 .start_ns = (uint64_t)sqlite3_column_int64(statement, 4),
                 .end_ns = (uint64_t)sqlite3_column_int64(statement, 5), /* -1: open */
                 .instance_id = (uint64_t)sqlite3_column_int64(statement, 6)},
    };
    return 0;
}

static int name_row(sqlite3_stmt *statement, void *user)
{
    work *w = user;
    if (RESERVE(w, names, name_count, name_capacity) != 0)
        return FLARE_ERR_NO_MEMORY;
    char *name = strdup(store_column_text_or_empty(statement, 1));
    if (name == NULL)
        return FLARE_ERR_NO_MEMORY;
    w->names[w->name_count++] = (name_entry){sqlite3_column_int64(statement, 0), name};
    return 0;
}

/* Each window's kernels credited to the scope holding their middle. Both
 * arrays come sorted by (pid, window). */
static int resolve_windows(work *w, store_pc_scope_resolver resolve)
{
    size_t s = 0;
    int status = 0;
    for (size_t k = 0; k < w->credit_count && status == 0;) {
        size_t end = k;
        while (end < w->credit_count && w->credits[end].pid == w->credits[k].pid &&
               w->credits[end].window_id == w->credits[k].window_id)
            end++;
        while (s < w->scope_count && (w->scopes[s].pid < w->credits[k].pid ||
                                      (w->scopes[s].pid == w->credits[k].pid &&
                                       w->scopes[s].window_id < w->credits[k].window_id)))
            s++;
        size_t s_end = s;
        while (s_end < w->scope_count && w->scopes[s_end].pid == w->credits[k].pid &&
               w->scopes[s_end].window_id == w->credits[k].window_id)
            s_end++;
        size_t n = end - k, m = s_end - s;
        store_pc_scope_span *spans = malloc((m > 0 ? m : 1) * sizeof(*spans));
        uint64_t *times = malloc(n * sizeof(*times));
        int64_t *winners = malloc(n * sizeof(*winners));
        if (spans == NULL || times == NULL || winners == NULL) {
            status = FLARE_ERR_NO_MEMORY;
        } else {
            for (size_t i = 0; i < m; i++)
                spans[i] = w->scopes[s + i].span;
            for (size_t i = 0; i < n; i++)
                times[i] = w->credits[k + i].middle;
            status = resolve(spans, m, times, n, winners);
            for (size_t i = 0; status == 0 && i < n; i++)
                if (!w->credits[k + i].fixed)
                    w->credits[k + i].scope = winners[i] >= 0 && (size_t)winners[i] < m
                                                  ? w->scopes[s + winners[i]].name_id
                                                  : 0;
        }
        free(spans);
        free(times);
        free(winners);
        k = end;
    }
    return status;
}

static int compare_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

/* (pid, window, device): the order every array here shares first. */
static inline int by_window(int64_t pid_a, uint64_t window_a, int64_t device_a, int64_t pid_b,
                            uint64_t window_b, int64_t device_b)
{
    int c = compare_i64(pid_a, pid_b);
    if (c == 0)
        c = window_a < window_b ? -1 : window_a > window_b;
    return c != 0 ? c : compare_i64(device_a, device_b);
}

/* (pid, window, device, function). */
static int by_function(const void *a, const void *b)
{
    const credit *x = a, *y = b;
    int c = by_window(x->pid, x->window_id, x->device, y->pid, y->window_id, y->device);
    return c != 0 ? c : compare_i64(x->function, y->function);
}

static int by_function_then_scope(const void *a, const void *b)
{
    int c = by_function(a, b);
    return c != 0 ? c : compare_i64(((const credit *)a)->scope, ((const credit *)b)->scope);
}

/* Sorted, and one entry per (window, device, function, scope) with its time. */
static void merge_credits(work *w)
{
    if (w->credit_count > 1) /* credits is NULL when there are none */
        qsort(w->credits, w->credit_count, sizeof(*w->credits), by_function_then_scope);
    size_t used = 0;
    for (size_t i = 0; i < w->credit_count; i++) {
        if (used > 0 && by_function_then_scope(&w->credits[used - 1], &w->credits[i]) == 0)
            w->credits[used - 1].ns += w->credits[i].ns;
        else
            w->credits[used++] = w->credits[i];
    }
    w->credit_count = used;
}

static const char *scope_name(const work *w, int64_t id)
{
    size_t low = 0, high = w->name_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (w->names[middle].id < id)
            low = middle + 1;
        else
            high = middle;
    }
    return low < w->name_count && w->names[low].id == id ? w->names[low].name : NO_RANGE;
}

/* The one copy of text in w->keys, in *interned. 0, or
 * FLARE_ERR_NO_MEMORY. */
static int intern_key(work *w, const char *text, const char **interned)
{
    size_t low = 0, high = w->key_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int c = strcmp(w->keys[middle], text);
        if (c == 0) {
            *interned = w->keys[middle];
            return 0;
        }
        if (c < 0)
            low = middle + 1;
        else
            high = middle;
    }
    if (RESERVE(w, keys, key_count, key_capacity) != 0)
        return FLARE_ERR_NO_MEMORY;
    char *copy = strdup(text);
    if (copy == NULL)
        return FLARE_ERR_NO_MEMORY;
    memmove(&w->keys[low + 1], &w->keys[low], (w->key_count - low) * sizeof(*w->keys));
    w->keys[low] = copy;
    w->key_count++;
    *interned = copy;
    return 0;
}

static int add_out(work *w, const credit *where, const char *scope, const char *key, double value)
{
    if (RESERVE(w, out, out_count, out_capacity) != 0)
        return FLARE_ERR_NO_MEMORY;
    w->out[w->out_count++] = (out_row){.pid = where->pid,
                                       .device = where->device,
                                       .window_id = where->window_id,
                                       .scope = scope,
                                       .key = key,
                                       .value = value};
    return 0;
}

/* A value row, split over its function's scopes in its window. */
static int value_row(sqlite3_stmt *statement, void *user)
{
    work *w = user;
    credit where = {.pid = sqlite3_column_int64(statement, 0),
                    .window_id = (uint64_t)sqlite3_column_int64(statement, 1),
                    .device = sqlite3_column_int64(statement, 2),
                    .function = sqlite3_column_int64(statement, 3)};
    const char *key = NULL;
    int status = intern_key(w, store_column_text_or_empty(statement, 4), &key);
    if (status != 0)
        return status;
    double value = (double)sqlite3_column_int64(statement, 5);
    size_t low = 0, high = w->credit_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (by_function(&w->credits[middle], &where) < 0)
            low = middle + 1;
        else
            high = middle;
    }
    uint64_t total = 0;
    size_t end = low;
    for (; end < w->credit_count && by_function(&w->credits[end], &where) == 0; end++)
        total += w->credits[end].ns;
    if (total == 0)
        return add_out(w, &where, NO_KERNEL, key, value);
    for (size_t i = low; i < end && status == 0; i++) {
        if (w->credits[i].ns == 0)
            continue;
        const char *scope =
            w->credits[i].scope != 0 ? scope_name(w, w->credits[i].scope) : NO_RANGE;
        status = add_out(w, &where, scope, key, value * (double)w->credits[i].ns / (double)total);
    }
    return status;
}

/* (pid, window, device, scope, key). */
static int by_out_key(const void *a, const void *b)
{
    const out_row *x = a, *y = b;
    int c = by_window(x->pid, x->window_id, x->device, y->pid, y->window_id, y->device);
    if (c == 0)
        c = strcmp(x->scope, y->scope);
    return c != 0 ? c : strcmp(x->key, y->key);
}

/* PC samples: (pid, window, device, scope), most samples first, then stall. */
static int by_scope_then_value(const void *a, const void *b)
{
    const out_row *x = a, *y = b;
    int c = by_window(x->pid, x->window_id, x->device, y->pid, y->window_id, y->device);
    if (c == 0)
        c = strcmp(x->scope, y->scope);
    if (c == 0)
        c = x->value > y->value ? -1 : x->value < y->value;
    return c != 0 ? c : strcmp(x->key, y->key);
}

/* SASS metrics: (pid, window, device, metric), largest first, then scope. */
static int by_key_then_value(const void *a, const void *b)
{
    const out_row *x = a, *y = b;
    int c = by_window(x->pid, x->window_id, x->device, y->pid, y->window_id, y->device);
    if (c == 0)
        c = strcmp(x->key, y->key);
    if (c == 0)
        c = x->value > y->value ? -1 : x->value < y->value;
    return c != 0 ? c : strcmp(x->scope, y->scope);
}

/* Merged per (pid, window, device, scope, key), sorted by the source's
 * order and handed over until a callback says stop. */
static void emit(work *w, const scope_source *source, const scope_target *target)
{
    if (w->out_count == 0) /* out is NULL then */
        return;
    qsort(w->out, w->out_count, sizeof(*w->out), by_out_key);
    size_t used = 0;
    for (size_t i = 0; i < w->out_count; i++) {
        if (used > 0 && by_out_key(&w->out[used - 1], &w->out[i]) == 0)
            w->out[used - 1].value += w->out[i].value;
        else
            w->out[used++] = w->out[i];
    }
    qsort(w->out, used, sizeof(*w->out), source->order);
    for (size_t i = 0; i < used; i++)
        if (source->deliver(&w->out[i], target) != 0)
            break;
}

static void work_free(work *w)
{
    for (size_t i = 0; i < w->name_count; i++)
        free(w->names[i].name);
    free(w->names);
    for (size_t i = 0; i < w->key_count; i++)
        free(w->keys[i]);
    free(w->keys);
    free(w->credits);
    free(w->scopes);
    free(w->out);
}

/* The split of source's values over scopes, handed to target. FLARE_OK
 * (none for a session without the table), FLARE_ERR_STORE,
 * FLARE_ERR_NO_MEMORY, or what a read said. */
static int split_by_scope(store *handle, const scope_source *source,
                          store_pc_scope_resolver resolve, const scope_target *target)
{
    int found = store_has_table(handle, source->table);
    if (found <= 0)
        return found < 0 ? FLARE_ERR_STORE : 0;
    const char *what = source->what;
    work w = {0};
    const char *kernels_sql = source->kernels_sql;
    if (source->kernels_untimed_sql != NULL) {
        int untimed = store_has_table(handle, "untimed_launches");
        if (untimed < 0)
            return FLARE_ERR_STORE;
        if (untimed > 0)
            kernels_sql = source->kernels_untimed_sql;
    }
    int status = store_query_each(handle, kernels_sql, NULL, kernel_row, &w, what);
    if (status == 0)
        status = store_query_each(handle, source->scopes_sql, NULL, scope_row, &w, what);
    if (status == 0)
        status = store_query_each(handle, names_sql, NULL, name_row, &w, what);
    if (status == 0)
        status = resolve_windows(&w, resolve);
    if (status == 0) {
        merge_credits(&w);
        status = store_query_each(handle, source->values_sql, NULL, value_row, &w, what);
    }
    if (status == 0)
        emit(&w, source, target);
    work_free(&w);
    return status;
}

/* ---- the sources ---- */

static int deliver_pc(const out_row *row, const scope_target *target)
{
    store_pc_scope_row shown = {.pid = row->pid,
                                .window_id = row->window_id,
                                .device = (int32_t)row->device,
                                .scope_name = row->scope,
                                .stall_reason = row->key,
                                .samples = row->value};
    return target->pc(&shown, target->user);
}

static const scope_source pc_samples_source = {
    .table = "pc_samples",
    .kernels_sql = KERNELS_SQL("pc_samples"),
    .scopes_sql = SCOPES_SQL("pc_samples"),
    .values_sql = "SELECT pid, window_id, device, name_id, stall_reason, samples FROM pc_samples",
    .what = "cannot attribute the PC samples to scopes",
    .order = by_scope_then_value,
    .deliver = deliver_pc,
};

int store_read_pc_by_scope(store *handle, store_pc_scope_resolver resolve,
                           store_pc_scope_callback callback, void *user)
{
    if (handle == NULL || resolve == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return split_by_scope(handle, &pc_samples_source, resolve,
                          &(scope_target){.pc = callback, .user = user});
}

static int deliver_sass(const out_row *row, const scope_target *target)
{
    store_sass_scope_row shown = {.pid = row->pid,
                                  .window_id = row->window_id,
                                  .device = (int32_t)row->device,
                                  .scope_name = row->scope,
                                  .metric = row->key,
                                  .value = row->value};
    return target->sass(&shown, target->user);
}

/* A function's instructions summed per metric first: the split is per
 * function, so the rows to split are functions times metrics, not
 * instructions times metrics. */
static const scope_source sass_metrics_source = {
    .table = "sass_metrics",
    .kernels_sql = KERNELS_SQL("sass_metrics"),
    .kernels_untimed_sql = KERNELS_OR_UNTIMED_SQL("sass_metrics"),
    .scopes_sql = SCOPES_SQL("sass_metrics"),
    .values_sql = "SELECT pid, window_id, device, name_id, metric, SUM(value) FROM sass_metrics"
                  " GROUP BY pid, window_id, device, name_id, metric",
    .what = "cannot attribute the SASS metrics to scopes",
    .order = by_key_then_value,
    .deliver = deliver_sass,
};

int store_read_sass_by_scope(store *handle, store_pc_scope_resolver resolve,
                             store_sass_scope_callback callback, void *user)
{
    if (handle == NULL || resolve == NULL || callback == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    return split_by_scope(handle, &sass_metrics_source, resolve,
                          &(scope_target){.sass = callback, .user = user});
}
