/*
 * store_internal.h: what the store's .c files share and nobody else sees.
 *
 * Holds the handle layout, the writer's prepared-statement and block
 * tables, the name-cache types and the query helpers. Nothing outside
 * src/store may include it: the database layout is a contract only through
 * store.h and docs/schema.md. The store is the bottom layer: it must never
 * include anything but store/ and flare/ headers, system headers and
 * sqlite3.h.
 */
#ifndef FLARE_STORE_STORE_INTERNAL_H
#define FLARE_STORE_STORE_INTERNAL_H

#include <limits.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Long enough for a writer of another process to finish a batch of
 * thousands of rows and a checkpoint, short enough that a wedged writer
 * surfaces as an error instead of a hang. */
#define STORE_BUSY_TIMEOUT_MS 5000
#define STORE_ERROR_MAX       (PATH_MAX + 512)

/*
 * Every statement the writer runs, prepared once when a WRITE handle opens.
 * BEGIN is IMMEDIATE so that a batch takes the write lock (waiting through
 * the busy timeout) before its first row; a deferred transaction that reads
 * first (the names lookup) could otherwise fail with SQLITE_BUSY_SNAPSHOT
 * when another process committed in between, which no timeout cures.
 */
#define STORE_WRITER_STATEMENTS(X)                                                                 \
    X(BEGIN, "BEGIN IMMEDIATE")                                                                    \
    X(COMMIT, "COMMIT")                                                                            \
    X(ROLLBACK, "ROLLBACK")                                                                        \
    X(NAME_INSERT, "INSERT OR IGNORE INTO names(name) VALUES (?1)")                                \
    X(NAME_SELECT, "SELECT id FROM names WHERE name = ?1")                                         \
    X(SESSION_BEGIN,                                                                               \
      "INSERT OR IGNORE INTO session(id, command, start_ns, start_unix_ns, has_exit_status, "      \
      "host, flare_version) VALUES (1, ?1, ?2, ?3, 0, ?4, ?5)")                                    \
    X(SESSION_END,                                                                                 \
      "UPDATE session SET end_ns = ?1, has_exit_status = ?2, exit_status = ?3 WHERE id = 1")       \
    X(PROCESS_BEGIN,                                                                               \
      "INSERT INTO processes(pid, parent_pid, start_ns, end_ns, backend, executable) "             \
      "VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON CONFLICT(pid) DO UPDATE SET end_ns = NULL, "           \
      "backend = excluded.backend, executable = excluded.executable")                              \
    X(PROCESS_END, "UPDATE processes SET end_ns = ?2 WHERE pid = ?1")                              \
    X(DEVICE,                                                                                      \
      "INSERT INTO devices(pid, device, name, backend) VALUES (?1, ?2, ?3, ?4) "                   \
      "ON CONFLICT(pid, device) DO UPDATE SET name = excluded.name, backend = excluded.backend")   \
    X(DROPS, "INSERT INTO drops(pid, source, detail, count) VALUES (?1, ?2, ?3, ?4) "              \
             "ON CONFLICT(pid, source, detail) DO UPDATE SET count = excluded.count")              \
    X(LOG, "INSERT INTO log(pid, time_ns, level, message) VALUES (?1, ?2, ?3, ?4)")                \
    X(CAPABILITY,                                                                                  \
      "INSERT INTO capabilities(pid, feature, requested, status, reason) "                         \
      "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(pid, feature) DO UPDATE SET "                       \
      "requested = excluded.requested, status = excluded.status, reason = excluded.reason")        \
    X(COUNTER, "INSERT INTO counters(pid, counter, name) VALUES (?1, ?2, ?3) "                     \
               "ON CONFLICT(pid, counter) DO UPDATE SET name = excluded.name")                     \
    X(COUNTER_SAMPLE,                                                                              \
      "INSERT INTO counter_samples(pid, counter, time_ns, value) VALUES (?1, ?2, ?3, ?4)")         \
    X(GRAPH_LAUNCH, "INSERT INTO graph_launches(pid, correlation_id, thread_id, time_ns, "         \
                    "stream_id, graph_exec, "                                                      \
                    "scope_instance_id, scope_name) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")      \
    X(UNTIMED_LAUNCH,                                                                              \
      "INSERT INTO untimed_launches(pid, correlation_id, thread_id, time_ns, device, name_id, "    \
      "scope_instance_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")                                    \
    X(STORM, "INSERT INTO storms(pid, device, start_ns, end_ns, untimed_launches, still_open) "    \
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6)")                                                    \
    X(PC_SAMPLE,                                                                                   \
      "INSERT INTO pc_samples(pid, window_id, device, name_id, pc_offset, stall_reason, samples, " \
      "first_ns, last_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(pid, "           \
      "window_id, device, name_id, pc_offset, stall_reason) DO UPDATE SET samples = samples + "    \
      "excluded.samples, first_ns = MIN(first_ns, excluded.first_ns), last_ns = MAX(last_ns, "     \
      "excluded.last_ns)")                                                                         \
    X(PC_LINE, "INSERT OR IGNORE INTO pc_lines(pid, name_id, pc_offset, file_name_id, line) "      \
               "VALUES (?1, ?2, ?3, ?4, ?5)")                                                      \
    X(SASS_METRIC,                                                                                 \
      "INSERT INTO sass_metrics(pid, window_id, device, name_id, pc_offset, metric, value) "       \
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT(pid, window_id, device, name_id, "          \
      "pc_offset, metric) DO UPDATE SET value = value + excluded.value")                           \
    X(PC_CODE_CONFLICT, "UPDATE pc_code SET cubin_crc = 0, symbol = '' WHERE pid = ?1 AND "        \
                        "name_id = ?2 AND cubin_crc <> ?3 AND cubin_crc <> 0")                     \
    X(PC_CODE, "INSERT OR IGNORE INTO pc_code(pid, name_id, cubin_crc, symbol) "                   \
               "VALUES (?1, ?2, ?3, ?4)")                                                          \
    X(PC_CUBIN_KNOWN, "SELECT 1 FROM pc_cubins WHERE pid = ?1 AND cubin_crc = ?2")                 \
    X(PC_CUBIN, "INSERT OR IGNORE INTO pc_cubins(pid, cubin_crc, bytes) VALUES (?1, ?2, ?3)")      \
    X(PC_CUBIN_DROP, "DELETE FROM pc_cubins WHERE pid = ?1 AND cubin_crc = ?2")                    \
    X(PC_INSTRUCTION, "INSERT OR IGNORE INTO pc_instructions(pid, name_id, pc_offset, sass) "      \
                      "VALUES (?1, ?2, ?3, ?4)")

typedef enum store_statement_id {
#define STORE_STATEMENT_ENUM_(id, sql) STORE_STATEMENT_##id,
    STORE_WRITER_STATEMENTS(STORE_STATEMENT_ENUM_)
#undef STORE_STATEMENT_ENUM_
        STORE_STATEMENT_COUNT
} store_statement_id;

/* An external correlation as its block's put takes it: the arguments of
 * store_put_external_correlation (store.h), which hands them on. */
typedef struct store_external_correlation_row {
    int64_t pid;
    uint64_t correlation_id;
    uint32_t external_kind;
    uint64_t external_id;
} store_external_correlation_row;

/*
 * The high-rate tables. Inside a batch their rows are buffered in the handle
 * and written STORE_BLOCK_ROWS at a time by one multi-row INSERT: that
 * halves the CPU per row, because SQLite's per-statement work (opening the
 * table cursor, the statement journal, halting) is paid once per block.
 * Every column is an integer once names are interned, so a block is a flat
 * int64 array.
 *
 * X(id, table, column count, column list, row type, put, name): the writer
 * (store_writer.c) generates int store_put_<put>(store *, const <row type>
 * *) from each line, its checks, name interning and block slot included,
 * and calls store_block_fill_<put> for the columns. name is NAMED when the
 * row's name member is interned into name_id, UNNAMED when the table has
 * no name.
 */
#define STORE_BLOCK_TABLES(X)                                                                      \
    X(KERNELS, "kernels", 18,                                                                      \
      "pid, device, stream_id, correlation_id, name_id, start_ns, end_ns, grid_x, grid_y, "        \
      "grid_z, block_x, block_y, block_z, shared_memory_bytes, registers_per_thread, context_id, " \
      "graph_id, graph_node_id",                                                                   \
      store_kernel_row, kernel, NAMED)                                                             \
    X(METRICS, "metrics", 5, "pid, device, name_id, time_ns, value", store_metric_row, metric,     \
      NAMED)                                                                                       \
    X(EXTERNAL_CORRELATIONS, "external_correlations", 4,                                           \
      "pid, correlation_id, external_kind, external_id", store_external_correlation_row,           \
      external_correlation_row, UNNAMED)                                                           \
    X(COPIES, "copies", 12,                                                                        \
      "pid, device, stream_id, correlation_id, is_memset, copy_kind, bytes, start_ns, end_ns, "    \
      "status, graph_id, graph_node_id",                                                           \
      store_copy_row, copy, UNNAMED)                                                               \
    X(SCOPES, "scopes", 8,                                                                         \
      "pid, thread_id, instance_id, name_id, depth, start_ns, end_ns, still_open",                 \
      store_scope_row, scope, NAMED)                                                               \
    X(API_CALLS, "api_calls", 6, "pid, thread_id, correlation_id, name_id, start_ns, end_ns",      \
      store_api_call_row, api_call, NAMED)

#define STORE_BLOCK_ROWS        64
#define STORE_BLOCK_MAX_COLUMNS 18

typedef enum store_block_id {
#define STORE_BLOCK_ENUM_(id, table, columns, list, type, put, name) STORE_BLOCK_##id,
    STORE_BLOCK_TABLES(STORE_BLOCK_ENUM_)
#undef STORE_BLOCK_ENUM_
        STORE_BLOCK_COUNT
} store_block_id;

/* The generated puts (store.h declares all but the external correlation
 * one, which store_put_external_correlation calls). Each returns 0,
 * FLARE_ERR_INVALID_ARGUMENT for a NULL handle or row, or what
 * store_writer_ready, interning the name or writing the block returned. */
#define STORE_BLOCK_PUT_DECLARE_(id, table, columns, list, type, put, name)                        \
    int store_put_##put(store *handle, const type *row);
STORE_BLOCK_TABLES(STORE_BLOCK_PUT_DECLARE_)
#undef STORE_BLOCK_PUT_DECLARE_

typedef struct store_block {
    sqlite3_stmt *single; /* one row: outside a batch and for a partial block */
    sqlite3_stmt *multi;  /* STORE_BLOCK_ROWS rows */
    int columns;
    int rows; /* buffered, not yet written */
    int64_t values[STORE_BLOCK_ROWS * STORE_BLOCK_MAX_COLUMNS];
} store_block;

/* One interned name. hash 0 marks an empty slot (real hashes are never 0). */
typedef struct store_name_slot {
    uint64_t hash;
    int64_t id;
    size_t length;
    char *name;
} store_name_slot;

/* Open addressing, linear probing; capacity is a power of two. */
typedef struct store_name_cache {
    store_name_slot *slots;
    size_t capacity;
    size_t count;
} store_name_cache;

struct store {
    sqlite3 *db;
    store_open_mode mode;
    /* A batch opened by store_begin is in progress. */
    int in_batch;
    /* Rows of the open batch were lost (a block failed to write, or SQLite
     * rolled the transaction back): its writes and its commit now fail
     * until store_rollback, so that a batch never commits with a hole. */
    int batch_failed;
    sqlite3_stmt *statements[STORE_STATEMENT_COUNT];
    store_block blocks[STORE_BLOCK_COUNT];
    store_name_cache names;
    char path[PATH_MAX];
    char error[STORE_ERROR_MAX];
    /* READ: what the reader should know about how it was read ("" when
     * nothing): a session read without its write-ahead log. */
    char notice[STORE_ERROR_MAX];
    int schema_version; /* as found in meta; STORE_SCHEMA_VERSION once created */
    int upgrade;        /* WRITE may bring a version 6 session up to 7 (flare index) */
};

/* Runs sql, which returns at most one row of one integer, into *value
 * (untouched when there is no row; *found says whether there was one).
 * Returns SQLite's code; records nothing. */
int store_query_int(store *handle, const char *sql, int64_t *value, int *found);
/* Runs sql; 0, or FLARE_ERR_STORE with "<path>: what: <SQLite message>". */
int store_exec(store *handle, const char *sql, const char *what);

/* Records "<path>: <what>" followed by ": <SQLite message>" when the handle
 * has a connection. Returns FLARE_ERR_STORE so callers can return it. */
int store_set_sqlite_error(store *store, const char *what);
/* Records a formatted message verbatim (the caller names the path). */
void store_set_error(store *store, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* 0 when a write may go ahead: FLARE_ERR_STATE unless opened for WRITE,
 * FLARE_ERR_STORE while the open batch has failed; the error is recorded. */
int store_require_writer(store *store);
/* Every writer's prologue: FLARE_ERR_INVALID_ARGUMENT (nothing recorded)
 * for a NULL handle or when arguments_valid is 0, else store_require_writer. */
int store_writer_ready(store *store, int arguments_valid);
/* Marks the open batch failed after a write error that lost rows. */
void store_batch_failed(store *store);

/* Writer side (store_writer.c). */
int store_writer_prepare(store *store);
void store_writer_finalize(store *store);
/* Steps a bound writer statement once and resets it. On failure records
 * "what: <SQLite message>", returns FLARE_ERR_STORE, and when SQLite rolled
 * the whole transaction back by itself (SQLITE_FULL, SQLITE_IOERR) marks
 * the open batch failed: the batch is lost, not just the row. */
int store_step(store *store, sqlite3_stmt *statement, const char *what);
/* The names table's id for name (NULL is stored as ""), through the
 * handle's cache; inserted when new. 0, or FLARE_ERR_STORE recorded. */
int store_intern(store *store, const char *name, int64_t *id);
/* Writes every buffered row (commit, and readers on a WRITE handle, call it
 * so they see the whole batch). No-op on a READ handle. */
int store_flush(store *store);
/* Forgets buffered rows: their batch is being rolled back. */
void store_discard(store *store);
void store_name_cache_clear(store_name_cache *cache);
void store_name_cache_free(store_name_cache *cache);

/* ---- queries (store_query.c) ---- */

/* Prepares sql on the handle's connection; on failure sets the handle's
 * error ("what: <sqlite message>") and returns FLARE_ERR_STORE with
 * *statement NULL. For readers and one-off statements. */
int store_prepare(store *handle, const char *sql, sqlite3_stmt **statement, const char *what);

/* A text column as a C string: NULL for SQL NULL. Valid until the next step. */
const char *store_column_text(sqlite3_stmt *statement, int column);
/* The same, "" for SQL NULL: for rows whose strings are never NULL. */
const char *store_column_text_or_empty(sqlite3_stmt *statement, int column);

/* A column holding a number of nanoseconds or bytes as a REAL (an AVG),
 * rounded to the nearest uint64: 0 for NULL, NaN or a negative value,
 * UINT64_MAX for one past its range. A damaged row's value never makes the
 * conversion undefined. */
uint64_t store_column_u64_rounded(sqlite3_stmt *statement, int column);

/* Binds text, NULL as "" (SQLite copies it: SQLITE_TRANSIENT). */
void store_bind_text_or_empty(sqlite3_stmt *statement, int index, const char *text);

/* Steps a one-off write statement once and finalizes it. Returns 0 when
 * it ran to completion, else FLARE_ERR_STORE with "what: <SQLite
 * message>" recorded. */
int store_step_and_finalize(store *handle, sqlite3_stmt *statement, const char *what);

/* Integer parameters of a query, bound to ?1, ?2, ... in order. */
#define STORE_PARAMS_MAX 4
typedef struct store_params {
    int count;
    int64_t values[STORE_PARAMS_MAX];
} store_params;

/* Called with each row while it is current (its text valid until the
 * handler returns). Returns 0 for the next row, a positive value to stop
 * the walk without error, or a negative flare_status to stop it with that
 * status, its message already recorded on the handle. */
typedef int (*store_row_handler)(sqlite3_stmt *statement, void *user);

/* What a reader's row handler gets as user: the reader's typed callback
 * (the address of the caller's function pointer) and the caller's user
 * pointer, so that one handler converts a row and hands it on. */
typedef struct store_reader_call {
    const void *callback;
    void *user;
} store_reader_call;

/* In a reader's row handler: hands row to the reader's callback, of type
 * callback_type, found in the handler's user (a store_reader_call); 1
 * (stop) when the callback returned non-zero, else 0. */
#define STORE_READER_CALL(callback_type, row, call)                                                \
    ((*(const callback_type *)((const store_reader_call *)(call))->callback)(                      \
         (row), ((const store_reader_call *)(call))->user) != 0)

/*
 * The readers' walk: flushes a WRITE handle's buffered rows (a reader sees
 * its own open batch), prepares sql, binds params (NULL: none), hands every
 * row to handler and finalizes. Returns 0 when the rows ran out or the
 * handler stopped the walk; FLARE_ERR_INVALID_ARGUMENT without a handle,
 * sql or handler; the flush's status; FLARE_ERR_STORE with "<path>: what:
 * <SQLite message>" recorded when the statement cannot be prepared or
 * stepped; or the handler's negative status.
 */
int store_query_each(store *handle, const char *sql, const store_params *params,
                     store_row_handler handler, void *user, const char *what);

/* The same walk over a statement the caller prepared and keeps (it is
 * reset before binding and after the walk; never finalized, never
 * flushed for). Same returns, less the invalid-argument and flush ones. */
int store_statement_each(store *handle, sqlite3_stmt *statement, const store_params *params,
                         store_row_handler handler, void *user, const char *what);

/* Whether the session has table (a session of an older flare may lack
 * one: its readers then walk no rows). -1 when SQLite cannot say, the
 * message recorded on the handle. */
int store_has_table(store *handle, const char *table);

/* An instruction's source line into pc_lines (store_pc.c), once per (pid,
 * function, offset): the first engine that saw the instruction with a line
 * writes it, and a later window's or engine's row of it finds it there (a
 * second line for the same instruction is ignored). name_id is the
 * function's interned id. 0 without writing anything when file is NULL or
 * empty (the binary had no line information); else 0, or FLARE_ERR_STORE
 * recorded (interning the file's name or the insert failed). */
int store_put_pc_line(store *handle, int64_t pid, int64_t name_id, uint64_t pc_offset,
                      const char *file, uint32_t line);

/* Where an instruction-less-line function's code is (store_pc_code.c): its
 * pc_code row, and its cubin's bytes the first time the process's cubin is
 * seen. 0 without writing when code is NULL (or incomplete); else 0 or
 * FLARE_ERR_STORE recorded. name_id is the function's interned id. */
struct store_pc_code;
int store_put_pc_code(store *handle, int64_t pid, int64_t name_id,
                      const struct store_pc_code *code);

/* The schema's statements, in the order they run (store_schema.c). */
extern const char *const store_schema_ddl[];
extern const size_t store_schema_ddl_count;

/* A pm_samples row as readers select it: STORE_PM_COLUMNS, in this order,
 * decoded by store_pm_row_read (store_pm.c); strings live as long as the
 * statement's row. */
#define STORE_PM_COLUMNS                                                                           \
    "pid, window_id, device, sample_index, start_ns, end_ns, scope_instance_id, scope_name, "      \
    "overflow, metric, value"
struct store_pm_row;
void store_pm_row_read(sqlite3_stmt *statement, struct store_pm_row *row);

#endif /* FLARE_STORE_STORE_INTERNAL_H */
