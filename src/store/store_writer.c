/*
 * store_writer.c: the collector's side of the store: rows and name interning.
 *
 * This is the hot path (at least a million kernel rows a second on one
 * core): statements are prepared once, kernel/copy/scope rows are integers
 * buffered into blocks written by one multi-row INSERT each, and a name
 * costs one hash lookup after its first use. It must never allocate per
 * row, never create indexes, never hand out a name id that a rolled-back
 * transaction took away, and never let a batch that lost rows commit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store_internal.h"

/* Past this many distinct names the cache starts over rather than grow:
 * real sessions have hundreds of names, and a pathological one (a name per
 * launch) should cost database lookups, not unbounded memory. */
#define STORE_NAME_CACHE_MAX_COUNT    65536
#define STORE_NAME_CACHE_MIN_CAPACITY 256

/* ---- statements ---- */

static const char *const store_writer_sql[STORE_STATEMENT_COUNT] = {
#define STORE_STATEMENT_SQL_(id, sql) [STORE_STATEMENT_##id] = sql,
    STORE_WRITER_STATEMENTS(STORE_STATEMENT_SQL_)
#undef STORE_STATEMENT_SQL_
};

/* "INSERT INTO t(list) VALUES (?, ...)" with rows groups of columns markers. */
static char *store_block_sql(const char *table, const char *list, int columns, int rows)
{
    size_t group = 2 + 2 * (size_t)columns; /* "(?,?)" plus the separator */
    size_t size = strlen(table) + strlen(list) + 32 + group * (size_t)rows;
    char *sql = malloc(size);
    if (sql == NULL)
        return NULL;
    int length = snprintf(sql, size, "INSERT INTO %s(%s) VALUES ", table, list);
    char *cursor = sql + length;
    for (int row = 0; row < rows; row++) {
        if (row > 0)
            *cursor++ = ',';
        *cursor++ = '(';
        for (int column = 0; column < columns; column++) {
            if (column > 0)
                *cursor++ = ',';
            *cursor++ = '?';
        }
        *cursor++ = ')';
    }
    *cursor = '\0';
    return sql;
}

static int store_prepare_persistent(store *handle, const char *sql, sqlite3_stmt **statement)
{
    if (sql == NULL) {
        store_set_error(handle, "%s: out of memory preparing statements", handle->path);
        return FLARE_ERR_NO_MEMORY;
    }
    if (sqlite3_prepare_v3(handle->db, sql, -1, SQLITE_PREPARE_PERSISTENT, statement, NULL) !=
        SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot prepare a statement");
    return 0;
}

int store_writer_prepare(store *handle)
{
    for (int i = 0; i < STORE_STATEMENT_COUNT; i++) {
        int status = store_prepare_persistent(handle, store_writer_sql[i], &handle->statements[i]);
        if (status != 0)
            return status;
    }
    static const struct {
        const char *table;
        const char *list;
        int columns;
    } tables[STORE_BLOCK_COUNT] = {
#define STORE_BLOCK_TABLE_(id, table, columns, list, type, put, name)                              \
    [STORE_BLOCK_##id] = {table, list, columns},
        STORE_BLOCK_TABLES(STORE_BLOCK_TABLE_)
#undef STORE_BLOCK_TABLE_
    };
    for (int i = 0; i < STORE_BLOCK_COUNT; i++) {
        store_block *block = &handle->blocks[i];
        block->columns = tables[i].columns;
        block->rows = 0;
        for (int multi = 0; multi < 2; multi++) {
            char *sql = store_block_sql(tables[i].table, tables[i].list, tables[i].columns,
                                        multi ? STORE_BLOCK_ROWS : 1);
            int status =
                store_prepare_persistent(handle, sql, multi ? &block->multi : &block->single);
            free(sql);
            if (status != 0)
                return status;
        }
    }
    return 0;
}

void store_writer_finalize(store *handle)
{
    for (int i = 0; i < STORE_STATEMENT_COUNT; i++) {
        sqlite3_finalize(handle->statements[i]);
        handle->statements[i] = NULL;
    }
    for (int i = 0; i < STORE_BLOCK_COUNT; i++) {
        sqlite3_finalize(handle->blocks[i].single);
        sqlite3_finalize(handle->blocks[i].multi);
        handle->blocks[i].single = NULL;
        handle->blocks[i].multi = NULL;
        handle->blocks[i].rows = 0;
    }
}

/*
 * Steps a bound writer statement once. A failed row is the caller's to
 * count, but on some errors (SQLITE_FULL, SQLITE_IOERR) SQLite rolls the
 * whole transaction back by itself: then the batch is lost, not the row.
 */
int store_step(store *handle, sqlite3_stmt *statement, const char *what)
{
    int rc = sqlite3_step(statement);
    if (rc == SQLITE_DONE) {
        sqlite3_reset(statement);
        return 0;
    }
    int status = store_set_sqlite_error(handle, what);
    sqlite3_reset(statement);
    if (handle->in_batch && sqlite3_get_autocommit(handle->db))
        store_batch_failed(handle);
    return status;
}

/* ---- blocks ---- */

static const char *const store_block_what[STORE_BLOCK_COUNT] = {
#define STORE_BLOCK_WHAT_(id, table, columns, list, type, put, name)                               \
    [STORE_BLOCK_##id] = "cannot write " table " rows",
    STORE_BLOCK_TABLES(STORE_BLOCK_WHAT_)
#undef STORE_BLOCK_WHAT_
};

/*
 * Writes the block's rows. A failure loses rows whose puts already
 * returned success, so it fails the whole batch: the caller could not
 * otherwise know which rows are missing.
 */
static int store_block_flush(store *handle, store_block_id id)
{
    store_block *block = &handle->blocks[id];
    int rows = block->rows;
    block->rows = 0;
    int status = 0;
    if (rows == STORE_BLOCK_ROWS) {
        int count = rows * block->columns;
        for (int i = 0; i < count; i++)
            sqlite3_bind_int64(block->multi, i + 1, block->values[i]);
        status = store_step(handle, block->multi, store_block_what[id]);
    } else {
        for (int row = 0; row < rows && status == 0; row++) {
            const int64_t *values = block->values + row * block->columns;
            for (int i = 0; i < block->columns; i++)
                sqlite3_bind_int64(block->single, i + 1, values[i]);
            status = store_step(handle, block->single, store_block_what[id]);
        }
    }
    if (status != 0)
        store_batch_failed(handle);
    return status;
}

/* The slot for the next row of the block. */
static int64_t *store_block_next(store *handle, store_block_id id)
{
    store_block *block = &handle->blocks[id];
    return block->values + block->rows * block->columns;
}

/* Accepts the row just filled in. Outside a batch a row is written at once,
 * since there is no commit to wait for. */
static int store_block_push(store *handle, store_block_id id)
{
    store_block *block = &handle->blocks[id];
    block->rows++;
    if (!handle->in_batch || block->rows == STORE_BLOCK_ROWS)
        return store_block_flush(handle, id);
    return 0;
}

int store_flush(store *handle)
{
    if (handle->mode != STORE_OPEN_WRITE)
        return 0;
    for (int i = 0; i < STORE_BLOCK_COUNT; i++) {
        if (handle->blocks[i].rows == 0)
            continue;
        int status = store_block_flush(handle, (store_block_id)i);
        if (status != 0) {
            store_discard(handle);
            return status;
        }
    }
    return 0;
}

void store_discard(store *handle)
{
    for (int i = 0; i < STORE_BLOCK_COUNT; i++)
        handle->blocks[i].rows = 0;
}

/* ---- name cache ---- */

/* Word-at-a-time multiply-xorshift: names are short, and a byte-serial hash
 * (FNV) would cost more than the rest of a cache hit. */
static uint64_t store_name_hash(const char *name, size_t length)
{
    const uint64_t multiplier = 0x9e3779b97f4a7c15ull;
    uint64_t hash = 0x51ed270b27902d8bull ^ (length * multiplier);
    size_t i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t word;
        memcpy(&word, name + i, 8);
        hash = (hash ^ word) * multiplier;
        hash ^= hash >> 29;
    }
    if (i < length) {
        uint64_t word = 0;
        memcpy(&word, name + i, length - i);
        hash = (hash ^ word) * multiplier;
        hash ^= hash >> 29;
    }
    hash ^= hash >> 32;
    return hash != 0 ? hash : 1;
}

void store_name_cache_clear(store_name_cache *cache)
{
    for (size_t i = 0; i < cache->capacity; i++) {
        free(cache->slots[i].name);
        cache->slots[i] = (store_name_slot){0};
    }
    cache->count = 0;
}

void store_name_cache_free(store_name_cache *cache)
{
    store_name_cache_clear(cache);
    free(cache->slots);
    *cache = (store_name_cache){0};
}

static store_name_slot *store_name_cache_find(store_name_cache *cache, const char *name,
                                              size_t length, uint64_t hash)
{
    if (cache->capacity == 0)
        return NULL;
    size_t mask = cache->capacity - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        store_name_slot *slot = &cache->slots[i];
        if (slot->hash == 0)
            return slot;
        if (slot->hash == hash && slot->length == length && memcmp(slot->name, name, length) == 0)
            return slot;
    }
}

static int store_name_cache_grow(store_name_cache *cache)
{
    size_t capacity = cache->capacity == 0 ? STORE_NAME_CACHE_MIN_CAPACITY : cache->capacity * 2;
    store_name_slot *slots = calloc(capacity, sizeof *slots);
    if (slots == NULL)
        return FLARE_ERR_NO_MEMORY;
    size_t mask = capacity - 1;
    for (size_t i = 0; i < cache->capacity; i++) {
        store_name_slot *old = &cache->slots[i];
        if (old->hash == 0)
            continue;
        size_t j = old->hash & mask;
        while (slots[j].hash != 0)
            j = (j + 1) & mask;
        slots[j] = *old;
    }
    free(cache->slots);
    cache->slots = slots;
    cache->capacity = capacity;
    return 0;
}

/* Remembers name -> id. Failing to remember only costs a later lookup, so
 * out-of-memory here is not an error. */
static void store_name_cache_put(store_name_cache *cache, const char *name, size_t length,
                                 uint64_t hash, int64_t id)
{
    if (cache->count >= STORE_NAME_CACHE_MAX_COUNT)
        store_name_cache_clear(cache);
    /* Load factor at most one half keeps probe runs short. */
    if ((cache->count + 1) * 2 > cache->capacity && store_name_cache_grow(cache) != 0)
        return;
    store_name_slot *slot = store_name_cache_find(cache, name, length, hash);
    char *copy = malloc(length + 1);
    if (copy == NULL)
        return;
    memcpy(copy, name, length);
    copy[length] = '\0';
    *slot = (store_name_slot){.hash = hash, .id = id, .length = length, .name = copy};
    cache->count++;
}

/* NULL names are stored as the empty string. */
int store_intern(store *handle, const char *name, int64_t *id)
{
    if (name == NULL)
        name = "";
    size_t length = strlen(name);
    uint64_t hash = store_name_hash(name, length);
    store_name_slot *slot = store_name_cache_find(&handle->names, name, length, hash);
    if (slot != NULL && slot->hash != 0) {
        *id = slot->id;
        return 0;
    }

    /* Another process of the session may have inserted the name already;
     * OR IGNORE plus a lookup settles on its id. */
    sqlite3_stmt *insert = handle->statements[STORE_STATEMENT_NAME_INSERT];
    sqlite3_bind_text(insert, 1, name, (int)length, SQLITE_STATIC);
    int status = store_step(handle, insert, "cannot insert a name");
    if (status != 0)
        return status;
    if (sqlite3_changes(handle->db) == 1) {
        *id = sqlite3_last_insert_rowid(handle->db);
    } else {
        sqlite3_stmt *select = handle->statements[STORE_STATEMENT_NAME_SELECT];
        sqlite3_bind_text(select, 1, name, (int)length, SQLITE_STATIC);
        int rc = sqlite3_step(select);
        if (rc != SQLITE_ROW) {
            status = store_set_sqlite_error(handle, rc == SQLITE_DONE ? "interned name vanished"
                                                                      : "cannot look up a name");
            sqlite3_reset(select);
            return status;
        }
        *id = sqlite3_column_int64(select, 0);
        sqlite3_reset(select);
    }
    store_name_cache_put(&handle->names, name, length, hash, *id);
    return 0;
}

/* ---- block rows ---- */

/* Each block table's columns from its row, in the table's column list
 * order, into the block's next slot; name_id is the interned name (0 for a
 * table without one). */

static void store_block_fill_kernel(int64_t *values, const store_kernel_row *row, int64_t name_id)
{
    values[0] = row->pid;
    values[1] = row->device;
    values[2] = (int64_t)row->stream_id;
    values[3] = (int64_t)row->correlation_id;
    values[4] = name_id;
    values[5] = (int64_t)row->start_ns;
    values[6] = (int64_t)row->end_ns;
    values[7] = row->grid[0];
    values[8] = row->grid[1];
    values[9] = row->grid[2];
    values[10] = row->block[0];
    values[11] = row->block[1];
    values[12] = row->block[2];
    values[13] = row->shared_memory_bytes;
    values[14] = row->registers_per_thread;
    values[15] = (int64_t)row->context_id;
    values[16] = row->graph_id;
    values[17] = (int64_t)row->graph_node_id;
}

static void store_block_fill_metric(int64_t *values, const store_metric_row *row, int64_t name_id)
{
    values[0] = row->pid;
    values[1] = row->device;
    values[2] = name_id;
    values[3] = (int64_t)row->time_ns;
    values[4] = row->value;
}

static void store_block_fill_external_correlation_row(int64_t *values,
                                                      const store_external_correlation_row *row,
                                                      int64_t name_id)
{
    (void)name_id;
    values[0] = row->pid;
    values[1] = (int64_t)row->correlation_id;
    values[2] = row->external_kind;
    values[3] = (int64_t)row->external_id;
}

static void store_block_fill_copy(int64_t *values, const store_copy_row *row, int64_t name_id)
{
    (void)name_id;
    values[0] = row->pid;
    values[1] = row->device;
    values[2] = (int64_t)row->stream_id;
    values[3] = (int64_t)row->correlation_id;
    values[4] = row->is_memset ? 1 : 0;
    values[5] = row->copy_kind;
    values[6] = (int64_t)row->bytes;
    values[7] = (int64_t)row->start_ns;
    values[8] = (int64_t)row->end_ns;
    values[9] = row->status;
    values[10] = row->graph_id;
    values[11] = (int64_t)row->graph_node_id;
}

static void store_block_fill_scope(int64_t *values, const store_scope_row *row, int64_t name_id)
{
    values[0] = row->pid;
    values[1] = row->thread_id;
    values[2] = (int64_t)row->instance_id;
    values[3] = name_id;
    values[4] = row->depth;
    values[5] = (int64_t)row->start_ns;
    values[6] = (int64_t)row->end_ns;
    values[7] = row->still_open ? 1 : 0;
}

static void store_block_fill_api_call(int64_t *values, const store_api_call_row *row,
                                      int64_t name_id)
{
    values[0] = row->pid;
    values[1] = row->thread_id;
    values[2] = (int64_t)row->correlation_id;
    values[3] = name_id;
    values[4] = (int64_t)row->start_ns;
    values[5] = (int64_t)row->end_ns;
}

/* The name a row of the table interns: NULL for a table without names (a
 * named row's NULL name is interned as the empty string). */
#define STORE_BLOCK_NAME_NAMED(row)   ((row)->name != NULL ? (row)->name : "")
#define STORE_BLOCK_NAME_UNNAMED(row) ((const char *)NULL)

/* The prologue every block put shares, once: the writer may write, and
 * the row's name (when it has one) is interned into *name_id. */
static int store_block_ready(store *handle, const char *name, int64_t *name_id)
{
    int status = store_require_writer(handle);
    if (status == 0 && name != NULL)
        status = store_intern(handle, name, name_id);
    return status;
}

/* store_put_kernel, store_put_metric, store_put_external_correlation_row,
 * store_put_copy and store_put_scope, from the block table. */
#define STORE_BLOCK_PUT_(id, table, columns, list, type, put, name)                                \
    int store_put_##put(store *handle, const type *row)                                            \
    {                                                                                              \
        if (handle == NULL || row == NULL)                                                         \
            return FLARE_ERR_INVALID_ARGUMENT;                                                     \
        int64_t name_id = 0;                                                                       \
        int status = store_block_ready(handle, STORE_BLOCK_NAME_##name(row), &name_id);            \
        if (status != 0)                                                                           \
            return status;                                                                         \
        store_block_fill_##put(store_block_next(handle, STORE_BLOCK_##id), row, name_id);          \
        return store_block_push(handle, STORE_BLOCK_##id);                                         \
    }
STORE_BLOCK_TABLES(STORE_BLOCK_PUT_)
#undef STORE_BLOCK_PUT_

int store_put_external_correlation(store *handle, int64_t pid, uint64_t correlation_id,
                                   uint32_t external_kind, uint64_t external_id)
{
    store_external_correlation_row row = {pid, correlation_id, external_kind, external_id};
    return store_put_external_correlation_row(handle, &row);
}

/* ---- statement rows ---- */

int store_session_begin(store *handle, const store_session_info *info)
{
    int status = store_writer_ready(handle, info != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_SESSION_BEGIN];
    sqlite3_bind_text(statement, 1, info->command, -1, SQLITE_STATIC);
    sqlite3_bind_int64(statement, 2, (int64_t)info->start_ns);
    sqlite3_bind_int64(statement, 3, info->start_unix_ns);
    sqlite3_bind_text(statement, 4, info->host, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 5, info->flare_version, -1, SQLITE_STATIC);
    return store_step(handle, statement, "cannot write the session row");
}

int store_session_end(store *handle, uint64_t end_ns, int has_exit_status, int exit_status)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_SESSION_END];
    sqlite3_bind_int64(statement, 1, (int64_t)end_ns);
    sqlite3_bind_int(statement, 2, has_exit_status ? 1 : 0);
    if (has_exit_status)
        sqlite3_bind_int(statement, 3, exit_status);
    else
        sqlite3_bind_null(statement, 3);
    status = store_step(handle, statement, "cannot end the session");
    if (status == 0 && sqlite3_changes(handle->db) == 0) {
        store_set_error(handle, "%s: cannot end the session: no session row", handle->path);
        return FLARE_ERR_STATE;
    }
    return status;
}

int store_process_begin(store *handle, int64_t pid, int64_t parent_pid, uint64_t start_ns,
                        const char *backend_name, const char *executable)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PROCESS_BEGIN];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, parent_pid);
    sqlite3_bind_int64(statement, 3, (int64_t)start_ns);
    sqlite3_bind_text(statement, 4, backend_name, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 5, executable, -1, SQLITE_STATIC);
    return store_step(handle, statement, "cannot write a process row");
}

int store_process_end(store *handle, int64_t pid, uint64_t end_ns)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_PROCESS_END];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)end_ns);
    status = store_step(handle, statement, "cannot end a process");
    if (status == 0 && sqlite3_changes(handle->db) == 0) {
        store_set_error(handle, "%s: cannot end process %lld: no process row", handle->path,
                        (long long)pid);
        return FLARE_ERR_STATE;
    }
    return status;
}

int store_put_device(store *handle, int64_t pid, int device, const char *name,
                     const char *backend_name)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_DEVICE];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int(statement, 2, device);
    sqlite3_bind_text(statement, 3, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 4, backend_name, -1, SQLITE_STATIC);
    return store_step(handle, statement, "cannot write a device row");
}

int store_set_capability(store *handle, int64_t pid, const char *feature, int requested,
                         const char *status_text, const char *reason)
{
    int status = store_writer_ready(handle, feature != NULL && status_text != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_CAPABILITY];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_text(statement, 2, feature, -1, SQLITE_STATIC);
    sqlite3_bind_int(statement, 3, requested != 0);
    sqlite3_bind_text(statement, 4, status_text, -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 5, reason != NULL ? reason : "", -1, SQLITE_STATIC);
    return store_step(handle, statement, "cannot write a capability row");
}

int store_set_drops(store *handle, int64_t pid, const char *source, const char *detail,
                    uint64_t count)
{
    int status = store_writer_ready(handle, source != NULL);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_DROPS];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_text(statement, 2, source, -1, SQLITE_STATIC);
    /* NULL would make every row distinct under the primary key. */
    sqlite3_bind_text(statement, 3, detail != NULL ? detail : "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(statement, 4, (int64_t)count);
    return store_step(handle, statement, "cannot write a drop count");
}

int store_put_log(store *handle, int64_t pid, uint64_t time_ns, const char *level,
                  const char *message)
{
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_LOG];
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_int64(statement, 2, (int64_t)time_ns);
    sqlite3_bind_text(statement, 3, level != NULL ? level : "", -1, SQLITE_STATIC);
    sqlite3_bind_text(statement, 4, message != NULL ? message : "", -1, SQLITE_STATIC);
    return store_step(handle, statement, "cannot write a log line");
}

int store_put_graph_launch(store *handle, const store_graph_launch_row *row)
{
    if (row == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_GRAPH_LAUNCH];
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, (int64_t)row->correlation_id);
    sqlite3_bind_int64(statement, 3, row->thread_id);
    sqlite3_bind_int64(statement, 4, (int64_t)row->time_ns);
    sqlite3_bind_int64(statement, 5, (int64_t)row->stream_id);
    sqlite3_bind_int64(statement, 6, (int64_t)row->graph_exec);
    if (row->scope_instance_id != 0) {
        sqlite3_bind_int64(statement, 7, (int64_t)row->scope_instance_id);
        sqlite3_bind_text(statement, 8, row->scope_name != NULL ? row->scope_name : "", -1,
                          SQLITE_STATIC);
    } else {
        sqlite3_bind_null(statement, 7);
        sqlite3_bind_null(statement, 8);
    }
    return store_step(handle, statement, "cannot write a graph launch");
}

int store_put_untimed_launch(store *handle, const store_untimed_launch_row *row)
{
    int status = store_writer_ready(handle, row != NULL && row->name != NULL);
    if (status != 0)
        return status;
    int64_t name_id = 0;
    status = store_intern(handle, row->name, &name_id);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_UNTIMED_LAUNCH];
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, (int64_t)row->correlation_id);
    sqlite3_bind_int64(statement, 3, row->thread_id);
    sqlite3_bind_int64(statement, 4, (int64_t)row->time_ns);
    sqlite3_bind_int64(statement, 5, row->device);
    sqlite3_bind_int64(statement, 6, name_id);
    if (row->scope_instance_id != 0)
        sqlite3_bind_int64(statement, 7, (int64_t)row->scope_instance_id);
    else
        sqlite3_bind_null(statement, 7);
    return store_step(handle, statement, "cannot write an untimed launch");
}

int store_put_storm(store *handle, const store_storm_row *row)
{
    if (row == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_writer_ready(handle, 1);
    if (status != 0)
        return status;
    sqlite3_stmt *statement = handle->statements[STORE_STATEMENT_STORM];
    sqlite3_bind_int64(statement, 1, row->pid);
    sqlite3_bind_int64(statement, 2, row->device);
    sqlite3_bind_int64(statement, 3, (int64_t)row->start_ns);
    sqlite3_bind_int64(statement, 4, (int64_t)row->end_ns);
    sqlite3_bind_int64(statement, 5, (int64_t)row->untimed_launches);
    sqlite3_bind_int(statement, 6, row->still_open ? 1 : 0);
    return store_step(handle, statement, "cannot write a launch storm");
}

int store_process_set_backend(store *handle, int64_t pid, const char *backend_name)
{
    if (handle == NULL || backend_name == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_require_writer(handle);
    if (status != 0)
        return status;
    /* Once per process at most (a backend adopted after the session
     * started): prepared here rather than kept with the hot statements. */
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(handle->db, "UPDATE processes SET backend = ?2 WHERE pid = ?1", -1,
                           &statement, NULL) != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot prepare the process backend update");
    sqlite3_bind_int64(statement, 1, pid);
    sqlite3_bind_text(statement, 2, backend_name, -1, SQLITE_STATIC);
    status = store_step(handle, statement, "cannot update a process's backend");
    sqlite3_finalize(statement);
    return status;
}
