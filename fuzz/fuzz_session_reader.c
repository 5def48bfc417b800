/*
 * fuzz_session_reader.c: a libFuzzer target for the session database
 * reader: `flare report` and `flare export --format perfetto|csv|json`,
 * called in-process (cli_report, cli_export) on a damaged copy of a valid
 * session.
 *
 * Mutated bytes of a SQLite file mostly make SQLite say "not a database",
 * which tests nothing of flare, so an input is a program of structured
 * mutations, applied with SQL to a fresh copy of a seed session (written
 * once per process through the store's own writer: fuzz_session_seed.c):
 * set one cell or a whole column to NULL, 0, +-1, INT64_MIN/MAX, 2^31,
 * 2^32, a float (huge, infinite, negative zero), text (from the input, up
 * to 70,000 bytes, with control characters and bad UTF-8), a blob, or
 * another row's value; delete a row or every row; insert copies of a row
 * with one column changed (duplicate keys, dangling references: a name_id,
 * span_id or pid that nothing has); insert a row of defaults; drop a table,
 * a view or a column; rename or add a column; strip a table of its constraints;
 * change the meta rows (schema version, creator). One input in eight patches
 * the file's bytes instead. Every input may start from the relaxed seed:
 * the seed with each table rebuilt without NOT NULL, keys or indexes, so
 * that NULLs and duplicates can go anywhere.
 *
 * Then the report (as text, or as JSON and CSV with --format where this
 * flare has it) and each export run on the result, and for every input:
 *  - each returns 0 or 1 (never 2: the arguments are valid);
 *  - an export that returned 0 wrote its file, and the file is valid JSON
 *    (perfetto, json) or CSV whose every record is as wide as the header,
 *    all valid UTF-8, and no temporary file beside it; an export that
 *    returned 1 left neither the file nor a temporary one; a report as
 *    JSON that returned 0 is valid JSON, as CSV four fields a record
 *    (section, row, key, value), each ending in LF;
 *  - session.db is byte for byte what it was before they read it;
 *  - nothing crashes, leaks or trips ASan/UBSan, and nothing hangs (the
 *    ctest run passes -timeout).
 * Any violation aborts, which libFuzzer reports as a crash with its input.
 * The untouched seeds must pass with every command returning 0, checked at
 * start-up, so a seed that no longer reads cleanly stops the fuzzer at once.
 *
 * Input: byte 0 is the mode: its low three bits 0 for byte patches, bit 3
 * for the relaxed seed, bit 4 for `report --top 1`, bit 5 alone for the
 * report alone, bit 6 alone for the exports alone, bit 7 for the report as
 * JSON and CSV rather than text. Then operations, each an
 * opcode byte and its operand bytes, until the input ends or FUZZ_OPS_MAX
 * have run; reading past the end gives zeros.
 *
 * Built only with clang (-DFLARE_FUZZ=ON); `ctest -L fuzz` runs it for a
 * bounded time on fuzz/corpus/session_reader. It works in a fresh directory
 * under /dev/shm (else $TMPDIR or /tmp) that it removes at exit, and must
 * never write anywhere else. flare's own output goes to /dev/null unless
 * FLARE_FUZZ_VERBOSE is set (to see why an input failed).
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/export.h"
#include "fuzz_output_check.h"
#include "fuzz_session_seed.h"
#include "store/store.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_OPS_MAX     32
#define FUZZ_TABLES_MAX  48
#define FUZZ_COLUMNS_MAX 48
#define FUZZ_NAME_MAX    64
/* Long text values: the longest goes into one cell only. */
#define FUZZ_LONG_TEXT_MAX 70000

#define CHECK(condition)                                                                           \
    do {                                                                                           \
        if (!(condition)) {                                                                        \
            fprintf(stderr, "fuzz_session_reader: %s:%d: check failed: %s\n", __FILE__, __LINE__,  \
                    #condition);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- the process's state, set up once ---- */

typedef struct seed {
    unsigned char *bytes;
    size_t size;
} seed;

static char work_dir[PATH_MAX];
static char session_dir[PATH_MAX + 16];
static char database_path[PATH_MAX + 32];
static char output_path[PATH_MAX + 16];
static seed strict_seed, relaxed_seed;
/* The seed's tables and views, by name: an operand byte picks one. */
static char tables[FUZZ_TABLES_MAX][FUZZ_NAME_MAX];
static int table_is_view[FUZZ_TABLES_MAX];
static size_t table_count;
static FILE *quiet_stream; /* /dev/null, or NULL when FLARE_FUZZ_VERBOSE is set */
static int verbose;        /* FLARE_FUZZ_VERBOSE: each mutation is shown too */

/* ---- files ---- */

static int remove_entry(const char *path, const struct stat *status, int flag, struct FTW *walk)
{
    (void)status;
    (void)flag;
    (void)walk;
    return remove(path);
}

static void remove_work_dir(void)
{
    if (work_dir[0] != '\0')
        nftw(work_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The whole of path in a malloc'd buffer; NULL when it cannot be read. */
static unsigned char *read_file(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat status;
    CHECK(fstat(fd, &status) == 0);
    size_t capacity = (size_t)status.st_size;
    unsigned char *bytes = malloc(capacity > 0 ? capacity : 1);
    CHECK(bytes != NULL);
    size_t used = 0;
    ssize_t got;
    while (used < capacity && (got = read(fd, bytes + used, capacity - used)) > 0)
        used += (size_t)got;
    close(fd);
    *size = used;
    return bytes;
}

static void write_file(const char *path, const unsigned char *bytes, size_t size)
{
    FILE *file = fopen(path, "wb");
    CHECK(file != NULL);
    CHECK(size == 0 || fwrite(bytes, 1, size, file) == size);
    CHECK(fclose(file) == 0);
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

/* Removes session.db and whatever SQLite left beside it. */
static void clear_session(void)
{
    static const char *const suffixes[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
        char path[sizeof database_path + 16];
        snprintf(path, sizeof path, "%s%s", database_path, suffixes[i]);
        unlink(path);
    }
}

/* ---- the input ---- */

typedef struct input {
    const uint8_t *data;
    size_t size;
    size_t at;
} input;

static uint8_t take_byte(input *in)
{
    return in->at < in->size ? in->data[in->at++] : 0;
}

static uint64_t take_u64(input *in)
{
    uint64_t value = 0;
    for (int i = 0; i < 8; i++)
        value = value << 8 | take_byte(in);
    return value;
}

/* Up to max bytes of the input, however many are left: *bytes points into it. */
static size_t take_bytes(input *in, size_t max, const uint8_t **bytes)
{
    size_t left = in->size - in->at;
    size_t count = max < left ? max : left;
    *bytes = in->data + in->at;
    in->at += count;
    return count;
}

/* ---- values ---- */

static char long_text[FUZZ_LONG_TEXT_MAX];

/* The values a cell can take besides integers and the input's own bytes. */
static const double special_doubles[] = {
    1e308, -1e308, INFINITY, -INFINITY, 0.5, -0.0, 1.8446744073709552e19, 9.3e18, -9.3e18, 1e-300};
static const char *const numeric_texts[] = {
    "12", "-5",  "1e999", " 7 ", "0x10", "9223372036854775808", "-9223372036854775809",
    "6",  "nan", "1.5",   "",    "-0",   "18446744073709551615"};
static const char *const hostile_texts[] = {"\"",
                                            "\\",
                                            ",",
                                            "\r\n",
                                            "\xff\xfe",
                                            "\xc3",
                                            "\xed\xa0\x80",
                                            "\xf4\x90\x80\x80",
                                            "%s%n%x",
                                            "\x1b[31m",
                                            "a\tb\x7f",
                                            "}]\",\n"};
/* Around the fixed buffers a reader might copy into (256, 1024, PATH_MAX),
 * and one far past them (one cell only). */
static const size_t long_lengths[] = {15,
                                      16,
                                      31,
                                      32,
                                      63,
                                      64,
                                      255,
                                      256,
                                      257,
                                      1023,
                                      1024,
                                      1025,
                                      4095,
                                      4096,
                                      4097,
                                      8192,
                                      FUZZ_LONG_TEXT_MAX};
#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* Binds a value the input chooses to parameter index of statement.
 * whole_column is set when it will go into every row of a table: the
 * longest text is then left out, to keep a table in the megabytes. */
static void bind_value(sqlite3_stmt *statement, int index, input *in, int whole_column)
{
    uint8_t kind = take_byte(in) % 19;
    switch (kind) {
    case 0:
        sqlite3_bind_null(statement, index);
        break;
    case 1:
        sqlite3_bind_int64(statement, index, 0);
        break;
    case 2:
        sqlite3_bind_int64(statement, index, 1);
        break;
    case 3:
        sqlite3_bind_int64(statement, index, -1);
        break;
    case 4:
        sqlite3_bind_int64(statement, index, INT64_MIN);
        break;
    case 5:
        sqlite3_bind_int64(statement, index, INT64_MAX);
        break;
    case 6:
        sqlite3_bind_int64(statement, index, UINT32_MAX);
        break;
    case 7:
        sqlite3_bind_int64(statement, index, (int64_t)1 << 31);
        break;
    case 8:
        sqlite3_bind_int64(statement, index, (int64_t)1 << 32);
        break;
    case 9:
        sqlite3_bind_int64(statement, index, (int64_t)take_u64(in));
        break;
    case 10:
        sqlite3_bind_int64(statement, index, (int8_t)take_byte(in));
        break;
    case 11: {
        uint64_t bits = take_u64(in);
        double value;
        memcpy(&value, &bits, sizeof value);
        sqlite3_bind_double(statement, index, value);
        break;
    }
    case 12:
        sqlite3_bind_double(statement, index,
                            special_doubles[take_byte(in) % COUNT(special_doubles)]);
        break;
    case 13:
    case 14: {
        const uint8_t *bytes;
        size_t length = take_bytes(in, take_byte(in), &bytes);
        if (kind == 13)
            sqlite3_bind_text(statement, index, (const char *)bytes, (int)length, SQLITE_TRANSIENT);
        else
            sqlite3_bind_blob(statement, index, bytes, (int)length, SQLITE_TRANSIENT);
        break;
    }
    case 15: {
        size_t count = COUNT(long_lengths);
        size_t length = long_lengths[take_byte(in) % (whole_column ? count - 1 : count)];
        uint8_t fill = take_byte(in);
        memset(long_text, fill != 0 ? fill : 'x', length);
        for (size_t i = 7; i < length; i += 61)
            long_text[i] = (char)(i % 3 == 0 ? '\n' : i % 3 == 1 ? '"' : '\x01');
        sqlite3_bind_text(statement, index, long_text, (int)length, SQLITE_STATIC);
        break;
    }
    case 16:
        sqlite3_bind_text(statement, index, numeric_texts[take_byte(in) % COUNT(numeric_texts)], -1,
                          SQLITE_STATIC);
        break;
    case 17:
        sqlite3_bind_text(statement, index, hostile_texts[take_byte(in) % COUNT(hostile_texts)], -1,
                          SQLITE_STATIC);
        break;
    default:
        sqlite3_bind_zeroblob(statement, index, 0);
        break;
    }
}

/* ---- the mutations ---- */

typedef struct columns {
    char names[FUZZ_COLUMNS_MAX][FUZZ_NAME_MAX];
    size_t count;
} columns;

/* The table's columns as they are now (an earlier operation may have
 * changed them); none when it is gone. */
static void read_columns(sqlite3 *db, const char *table, columns *out)
{
    out->count = 0;
    char sql[128];
    snprintf(sql, sizeof sql, "PRAGMA table_info(\"%s\")", table);
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) {
        sqlite3_finalize(statement);
        return;
    }
    while (out->count < FUZZ_COLUMNS_MAX && sqlite3_step(statement) == SQLITE_ROW) {
        const unsigned char *name = sqlite3_column_text(statement, 1);
        snprintf(out->names[out->count++], FUZZ_NAME_MAX, "%s",
                 name != NULL ? (const char *)name : "");
    }
    sqlite3_finalize(statement);
}

/* Prepares sql; NULL when SQLite refuses it (a table or column gone). */
static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) {
        if (verbose)
            fprintf(stderr, "mutation: %.300s\n  refused: %s\n", sql, sqlite3_errmsg(db));
        sqlite3_finalize(statement);
        return NULL;
    }
    return statement;
}

/* Steps a statement to its end and finalizes it; a refusal (a constraint,
 * a type) is one more outcome of the mutation, not an error. */
static void run(sqlite3_stmt *statement)
{
    if (statement == NULL)
        return;
    int rc;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    }
    if (verbose) {
        sqlite3 *db = sqlite3_db_handle(statement);
        char *sql = sqlite3_expanded_sql(statement);
        fprintf(stderr, "mutation: %.300s\n  %s, %d row(s) changed\n",
                sql != NULL ? sql : sqlite3_sql(statement),
                rc == SQLITE_DONE ? "done" : sqlite3_errmsg(db), sqlite3_changes(db));
        sqlite3_free(sql);
    }
    sqlite3_finalize(statement);
}

/* "a", "b", ... of columns, each as prefix"name", except the one at skip
 * (which becomes replacement when that is not NULL). */
static void column_list(const columns *list, const char *prefix, size_t skip,
                        const char *replacement, char *sql, size_t size)
{
    size_t used = 0;
    sql[0] = '\0';
    for (size_t i = 0; i < list->count && used < size; i++) {
        if (i == skip && replacement == NULL)
            continue;
        int written;
        if (i == skip)
            written = snprintf(sql + used, size - used, "%s%s", used > 0 ? ", " : "", replacement);
        else
            written = snprintf(sql + used, size - used, "%s%s\"%s\"", used > 0 ? ", " : "", prefix,
                               list->names[i]);
        if (written < 0)
            break;
        used += (size_t)written;
    }
}

typedef enum operation {
    OP_SET_CELL,
    OP_SET_COLUMN,
    OP_COPY_CELL,
    OP_DELETE_ROW,
    OP_DELETE_ALL,
    OP_DUPLICATE_ROW,
    OP_INSERT_DEFAULTS,
    OP_DROP_TABLE,
    OP_DROP_COLUMN,
    OP_RENAME_COLUMN,
    OP_ADD_COLUMN,
    OP_RELAX_TABLE,
    OP_META,
} operation;

/* Opcode bytes to operations: cells are set most often. */
static const operation operation_table[] = {
    OP_SET_CELL,      OP_SET_CELL,        OP_SET_CELL,   OP_SET_CELL,      OP_SET_CELL,
    OP_SET_CELL,      OP_SET_COLUMN,      OP_SET_COLUMN, OP_COPY_CELL,     OP_COPY_CELL,
    OP_DELETE_ROW,    OP_DELETE_ROW,      OP_DELETE_ALL, OP_DUPLICATE_ROW, OP_DUPLICATE_ROW,
    OP_DUPLICATE_ROW, OP_INSERT_DEFAULTS, OP_DROP_TABLE, OP_DROP_COLUMN,   OP_RENAME_COLUMN,
    OP_ADD_COLUMN,    OP_RELAX_TABLE,     OP_META,       OP_SET_CELL,
};
#define OPERATION_COUNT (sizeof operation_table / sizeof operation_table[0])

/* Rebuilds table from select (over the table), without its constraints.
 * Returns whether SQLite did it. */
static int rebuild_table(sqlite3 *db, const char *table, const char *select)
{
    char sql[4096];
    snprintf(sql, sizeof sql,
             "CREATE TABLE fuzz_rebuilt AS SELECT %s FROM \"%s\"; DROP TABLE \"%s\";"
             " ALTER TABLE fuzz_rebuilt RENAME TO \"%s\"",
             select, table, table, table);
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    if (verbose)
        fprintf(stderr, "mutation: %.300s\n  %s\n", sql,
                rc == SQLITE_OK ? "done" : sqlite3_errmsg(db));
    if (rc != SQLITE_OK)
        sqlite3_exec(db, "DROP TABLE IF EXISTS fuzz_rebuilt", NULL, NULL, NULL);
    return rc == SQLITE_OK;
}

static void apply_operation(sqlite3 *db, input *in)
{
    operation op = operation_table[take_byte(in) % OPERATION_COUNT];
    size_t picked = take_byte(in) % table_count;
    const char *table = tables[picked];
    columns list;
    read_columns(db, table, &list);
    if (list.count == 0)
        return;
    size_t column = take_byte(in) % list.count;
    const char *name = list.names[column];
    char sql[4096];
    sqlite3_stmt *statement;
    switch (op) {
    case OP_SET_CELL:
        snprintf(sql, sizeof sql,
                 "UPDATE \"%s\" SET \"%s\" = ?1 WHERE rowid = (SELECT rowid FROM \"%s\" ORDER BY "
                 "rowid LIMIT 1 OFFSET (?2 %% max(1, (SELECT count(*) FROM \"%s\"))))",
                 table, name, table, table);
        statement = prepare(db, sql);
        if (statement != NULL) {
            bind_value(statement, 1, in, 0);
            sqlite3_bind_int64(statement, 2, take_byte(in));
        }
        run(statement);
        break;
    case OP_SET_COLUMN:
        snprintf(sql, sizeof sql, "UPDATE \"%s\" SET \"%s\" = ?1", table, name);
        statement = prepare(db, sql);
        if (statement != NULL)
            bind_value(statement, 1, in, 1);
        run(statement);
        break;
    case OP_COPY_CELL: {
        /* One row's cell takes another row's value of any column. */
        const char *source = list.names[take_byte(in) % list.count];
        snprintf(sql, sizeof sql,
                 "UPDATE \"%s\" SET \"%s\" = (SELECT x.\"%s\" FROM \"%s\" AS x WHERE x.rowid ="
                 " (SELECT rowid FROM \"%s\" ORDER BY rowid LIMIT 1 OFFSET (?2 %% max(1,"
                 " (SELECT count(*) FROM \"%s\"))))) WHERE rowid = (SELECT rowid FROM \"%s\""
                 " ORDER BY rowid LIMIT 1 OFFSET (?1 %% max(1, (SELECT count(*) FROM \"%s\"))))",
                 table, name, source, table, table, table, table, table);
        statement = prepare(db, sql);
        if (statement != NULL) {
            sqlite3_bind_int64(statement, 1, take_byte(in));
            sqlite3_bind_int64(statement, 2, take_byte(in));
        }
        run(statement);
        break;
    }
    case OP_DELETE_ROW:
        snprintf(sql, sizeof sql,
                 "DELETE FROM \"%s\" WHERE rowid = (SELECT rowid FROM \"%s\" ORDER BY rowid LIMIT"
                 " 1 OFFSET (?1 %% max(1, (SELECT count(*) FROM \"%s\"))))",
                 table, table, table);
        statement = prepare(db, sql);
        if (statement != NULL)
            sqlite3_bind_int64(statement, 1, take_byte(in));
        run(statement);
        break;
    case OP_DELETE_ALL:
        snprintf(sql, sizeof sql, "DELETE FROM \"%s\"", table);
        run(prepare(db, sql));
        break;
    case OP_DUPLICATE_ROW: {
        /* copies of one row, with the chosen column kept, or set to the
         * value (an integer value counts up from copy to copy, so that
         * keys stay distinct and references dangle). */
        uint8_t how = take_byte(in);
        char targets[2048], values[2048];
        column_list(&list, "", SIZE_MAX, NULL, targets, sizeof targets);
        if (how & 1)
            column_list(&list, "x.", column,
                        "CASE WHEN typeof(?1) = 'integer' THEN ?1 + fuzz_i ELSE ?1 END", values,
                        sizeof values);
        else
            column_list(&list, "x.", SIZE_MAX, NULL, values, sizeof values);
        snprintf(sql, sizeof sql,
                 "WITH RECURSIVE fuzz_n(fuzz_i) AS (SELECT 0 UNION ALL SELECT fuzz_i + 1 FROM"
                 " fuzz_n WHERE fuzz_i + 1 < ?3) INSERT INTO \"%s\" (%s) SELECT %s FROM \"%s\" AS"
                 " x, fuzz_n WHERE x.rowid = (SELECT rowid FROM \"%s\" ORDER BY rowid LIMIT 1"
                 " OFFSET (?2 %% max(1, (SELECT count(*) FROM \"%s\"))))",
                 table, targets, values, table, table, table);
        statement = prepare(db, sql);
        if (statement != NULL) {
            if (how & 1)
                bind_value(statement, 1, in, 0);
            sqlite3_bind_int64(statement, 2, take_byte(in));
            sqlite3_bind_int64(statement, 3, how & 2 ? 64 : 1 + (how >> 2) % 4);
        }
        run(statement);
        break;
    }
    case OP_INSERT_DEFAULTS:
        snprintf(sql, sizeof sql, "INSERT INTO \"%s\" DEFAULT VALUES", table);
        run(prepare(db, sql));
        break;
    case OP_DROP_TABLE:
        snprintf(sql, sizeof sql, "DROP %s \"%s\"", table_is_view[picked] ? "VIEW" : "TABLE",
                 table);
        run(prepare(db, sql));
        break;
    case OP_DROP_COLUMN: {
        if (list.count < 2)
            break;
        char kept[2048];
        column_list(&list, "", column, NULL, kept, sizeof kept);
        rebuild_table(db, table, kept);
        break;
    }
    case OP_RENAME_COLUMN:
        snprintf(sql, sizeof sql, "ALTER TABLE \"%s\" RENAME COLUMN \"%s\" TO \"%s_was\"", table,
                 name, name);
        run(prepare(db, sql));
        break;
    case OP_ADD_COLUMN:
        snprintf(sql, sizeof sql, "ALTER TABLE \"%s\" ADD COLUMN \"fuzz_added_%zu\" DEFAULT 7",
                 table, list.count);
        run(prepare(db, sql));
        break;
    case OP_RELAX_TABLE:
        rebuild_table(db, table, "*");
        break;
    case OP_META: {
        /* The version as this flare writes it, in other types, and others. */
        static const char *const changes[] = {
            "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
            "UPDATE meta SET value = CAST(value AS TEXT) WHERE key = 'schema_version'",
            "UPDATE meta SET value = CAST(value AS REAL) WHERE key = 'schema_version'",
            "UPDATE meta SET value = value + 4294967296 WHERE key = 'schema_version'",
            "UPDATE meta SET value = value - 1 WHERE key = 'schema_version'",
            "UPDATE meta SET value = value + 1 WHERE key = 'schema_version'",
            "UPDATE meta SET value = 'not flare' WHERE key = 'created_by'",
            "DELETE FROM meta WHERE key = 'schema_version'",
            "INSERT INTO meta(key, value) VALUES ('fuzz', ?1)",
        };
        statement = prepare(db, changes[take_byte(in) % (sizeof changes / sizeof changes[0])]);
        if (statement != NULL && sqlite3_bind_parameter_count(statement) > 0)
            bind_value(statement, 1, in, 0);
        run(statement);
        break;
    }
    }
}

/* Writes the seed and applies the input's operations to it with SQL. */
static void mutate_with_sql(const seed *from, input *in)
{
    write_file(database_path, from->bytes, from->size);
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(database_path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    /* legacy_alter_table: a rename does not re-check the views, which may
     * name a table an earlier operation dropped. */
    sqlite3_exec(db, "PRAGMA synchronous = OFF; PRAGMA legacy_alter_table = ON; BEGIN", NULL, NULL,
                 NULL);
    for (int op = 0; op < FUZZ_OPS_MAX && in->at < in->size; op++)
        apply_operation(db, in);
    if (sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    CHECK(sqlite3_close(db) == SQLITE_OK);
}

/* Writes the seed with the input's byte patches: each a 3-byte offset,
 * an opcode and its bytes. */
static void mutate_bytes(const seed *from, input *in)
{
    size_t size = from->size;
    unsigned char *bytes = malloc(size);
    CHECK(bytes != NULL);
    memcpy(bytes, from->bytes, size);
    while (in->at < in->size && size > 0) {
        size_t offset = ((size_t)take_byte(in) << 16 | (size_t)take_byte(in) << 8 | take_byte(in));
        offset %= size;
        uint8_t op = take_byte(in);
        switch (op % 4) {
        case 0:
            bytes[offset] = take_byte(in);
            break;
        case 1:
            bytes[offset] ^= take_byte(in) | 1;
            break;
        case 2:
            /* A big-endian 32-bit field: page numbers, counts, sizes. */
            for (size_t i = 0; i < 4 && offset + i < size; i++)
                bytes[offset + i] = take_byte(in);
            break;
        default:
            if (op & 0x80)
                size = offset; /* truncated */
            else
                bytes[offset] = 0xff;
            break;
        }
    }
    write_file(database_path, bytes, size);
    free(bytes);
}

/* ---- running the readers ---- */

/* Calls a subcommand with argv, its output on /dev/null unless verbose. */
static int call_quietly(int (*command)(int, char **), int argc, char **argv)
{
    FILE *saved_stdout = stdout, *saved_stderr = stderr;
    if (quiet_stream != NULL) {
        stdout = quiet_stream;
        stderr = quiet_stream;
    }
    int status = command(argc, argv);
    fflush(stdout);
    stdout = saved_stdout;
    stderr = saved_stderr;
    return status;
}

/* Aborts unless bytes are what command --format format promises: JSON, or
 * CSV records of columns fields ending in CRLF (crlf set) or LF. */
static void check_output(const char *command, const char *format, const char *bytes, size_t size,
                         size_t columns, int crlf)
{
    size_t where = 0;
    const char *why = NULL;
    int valid = columns > 0 ? fuzz_check_csv(bytes, size, columns, crlf, &where, &why)
                            : fuzz_check_json(bytes, size, &where, &why);
    if (valid != 0) {
        size_t from = where > 80 ? where - 80 : 0;
        size_t to = where + 80 < size ? where + 80 : size;
        fprintf(stderr,
                "fuzz_session_reader: %s --format %s wrote malformed output: %s at byte %zu of "
                "%zu:\n%.*s\n",
                command, format, why, where, size, (int)(to - from), bytes + from);
        abort();
    }
}

/* How many entries of the work directory are the output or a temporary
 * file of it (its name and a suffix: FILE.tmp, FILE.tmp-XXXXXX). */
static int output_files(void)
{
    const char *name = strrchr(output_path, '/') + 1;
    size_t length = strlen(name);
    int count = 0;
    DIR *listing = opendir(work_dir);
    CHECK(listing != NULL);
    struct dirent *entry;
    while ((entry = readdir(listing)) != NULL)
        count += strncmp(entry->d_name, name, length) == 0;
    closedir(listing);
    return count;
}

/* Checks what the export of format wrote, given its exit status. */
static void check_export(const char *format, int status)
{
    if (status != CLI_EXIT_OK) {
        if (status != CLI_EXIT_FAILURE) {
            fprintf(stderr, "fuzz_session_reader: export --format %s returned %d\n", format,
                    status);
            abort();
        }
        if (output_files() != 0) {
            fprintf(stderr, "fuzz_session_reader: export --format %s failed and left a file\n",
                    format);
            abort();
        }
        return;
    }
    /* The file and nothing beside it. */
    CHECK(output_files() == 1);
    size_t size = 0;
    unsigned char *bytes = read_file(output_path, &size);
    if (bytes == NULL) {
        fprintf(stderr, "fuzz_session_reader: export --format %s succeeded with no file\n", format);
        abort();
    }
    if (strcmp(format, "csv") == 0)
        check_output("export", format, (const char *)bytes, size, CLI_EXPORT_KERNEL_COLUMN_COUNT,
                     1);
    else
        check_output("export", format, (const char *)bytes, size, 0, 0);
    free(bytes);
    unlink(output_path);
}

/* `flare report --format json|csv` (report_emit.c), when this flare has it. */
static int report_has_formats;

/* Runs `report --format FORMAT` with its standard output captured, and
 * checks the output of a report that succeeded: JSON, or CSV in long form
 * (section, row, key, value) with LF line ends. Returns its exit status. */
static int check_report_data(const char *format)
{
    char *out = NULL;
    size_t size = 0;
    FILE *captured = open_memstream(&out, &size);
    CHECK(captured != NULL);
    char report[] = "report", format_option[] = "--format", format_value[16];
    snprintf(format_value, sizeof format_value, "%s", format);
    char *argv[] = {report, format_option, format_value, session_dir};
    FILE *saved_stdout = stdout, *saved_stderr = stderr;
    stdout = captured;
    if (quiet_stream != NULL)
        stderr = quiet_stream;
    int status = cli_report(4, argv);
    stdout = saved_stdout;
    stderr = saved_stderr;
    CHECK(fclose(captured) == 0);
    if (status != CLI_EXIT_OK && status != CLI_EXIT_FAILURE) {
        fprintf(stderr, "fuzz_session_reader: report --format %s returned %d\n", format, status);
        abort();
    }
    if (status == CLI_EXIT_OK)
        check_output("report", format, out, size, strcmp(format, "csv") == 0 ? 4 : 0, 0);
    free(out);
    return status;
}

/* Runs the report (with --top 1 when top_one is set; as JSON and CSV
 * instead of text when report_data is set) and every export on the
 * session, or only one of the two; expect_clean: each must return 0 (the
 * untouched seeds). */
static void run_readers(int top_one, int report_data, int run_report, int run_exports,
                        int expect_clean)
{
    size_t before_size = 0;
    unsigned char *before = read_file(database_path, &before_size);

    char report[] = "report", top_option[] = "--top", top_value[] = "1";
    char *report_argv[] = {report, top_option, top_value, session_dir};
    char *plain_argv[] = {report, session_dir};
    int status = CLI_EXIT_OK;
    if (run_report && report_data && report_has_formats) {
        status = check_report_data("json");
        CHECK(!expect_clean || status == CLI_EXIT_OK);
        status = check_report_data("csv");
    } else if (run_report) {
        status = top_one ? call_quietly(cli_report, 4, report_argv)
                         : call_quietly(cli_report, 2, plain_argv);
    }
    if (status != CLI_EXIT_OK && status != CLI_EXIT_FAILURE) {
        fprintf(stderr, "fuzz_session_reader: report returned %d\n", status);
        abort();
    }
    CHECK(!expect_clean || status == CLI_EXIT_OK);

    static const char *const formats[] = {"perfetto", "csv", "json"};
    for (size_t i = 0; run_exports && i < sizeof formats / sizeof formats[0]; i++) {
        char export_word[] = "export", format_option[] = "--format", output_option[] = "-o";
        char format[16];
        snprintf(format, sizeof format, "%s", formats[i]);
        char *argv[] = {export_word, session_dir,   format_option,
                        format,      output_option, output_path};
        status = call_quietly(cli_export, 6, argv);
        check_export(formats[i], status);
        CHECK(!expect_clean || status == CLI_EXIT_OK);
    }

    /* They only read: the file is as it was. */
    size_t after_size = 0;
    unsigned char *after = read_file(database_path, &after_size);
    if (before != NULL || after != NULL) {
        if (before == NULL || after == NULL || before_size != after_size ||
            memcmp(before, after, before_size) != 0) {
            fprintf(stderr, "fuzz_session_reader: reading changed session.db (%zu -> %zu bytes)\n",
                    before_size, after_size);
            abort();
        }
    }
    free(before);
    free(after);
}

/* ---- set-up ---- */

/* Whether `flare report --help` offers --format (json and csv). */
static int report_offers_formats(void)
{
    char *out = NULL;
    size_t size = 0;
    FILE *captured = open_memstream(&out, &size);
    CHECK(captured != NULL);
    char report[] = "report", help[] = "--help";
    char *argv[] = {report, help};
    FILE *saved_stdout = stdout;
    stdout = captured;
    int status = cli_report(2, argv);
    stdout = saved_stdout;
    CHECK(fclose(captured) == 0);
    int offered = status == CLI_EXIT_OK && strstr(out, "--format") != NULL;
    free(out);
    return offered;
}

static void read_seed(seed *out)
{
    char path[sizeof database_path + 8];
    snprintf(path, sizeof path, "%s-wal", database_path);
    /* The last connection's close checkpoints and removes the WAL: the
     * seed is the one file. */
    CHECK(!file_exists(path));
    out->bytes = read_file(database_path, &out->size);
    CHECK(out->bytes != NULL && out->size > 0);
}

static void make_seeds(void)
{
    char seed_dir[PATH_MAX + 8];
    snprintf(seed_dir, sizeof seed_dir, "%s/seed", work_dir);
    CHECK(mkdir(seed_dir, 0700) == 0);
    fuzz_session_seed_write(seed_dir);
    char seed_path[sizeof seed_dir + 16];
    snprintf(seed_path, sizeof seed_path, "%s/session.db", seed_dir);
    size_t size = 0;
    unsigned char *bytes = read_file(seed_path, &size);
    CHECK(bytes != NULL);
    write_file(database_path, bytes, size);
    free(bytes);
    read_seed(&strict_seed);

    /* The tables, in name order: an operand byte picks one. */
    sqlite3 *db = NULL;
    CHECK(sqlite3_open_v2(database_path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
    sqlite3_stmt *statement =
        prepare(db, "SELECT name, type = 'view' FROM sqlite_schema WHERE type IN ('table', 'view')"
                    " AND name NOT LIKE 'sqlite_%' ORDER BY name");
    CHECK(statement != NULL);
    while (table_count < FUZZ_TABLES_MAX && sqlite3_step(statement) == SQLITE_ROW) {
        table_is_view[table_count] = sqlite3_column_int(statement, 1);
        snprintf(tables[table_count++], FUZZ_NAME_MAX, "%s",
                 (const char *)sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
    CHECK(table_count > 0);
    /* The relaxed seed: every table rebuilt bare. */
    CHECK(sqlite3_exec(db, "PRAGMA legacy_alter_table = ON", NULL, NULL, NULL) == SQLITE_OK);
    for (size_t i = 0; i < table_count; i++)
        CHECK(table_is_view[i] || rebuild_table(db, tables[i], "*"));
    CHECK(sqlite3_close(db) == SQLITE_OK);
    read_seed(&relaxed_seed);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *base = "/dev/shm";
    if (access(base, W_OK) != 0) {
        base = getenv("TMPDIR");
        if (base == NULL || base[0] == '\0')
            base = "/tmp";
    }
    snprintf(work_dir, sizeof work_dir, "%s/flare-fuzz-reader-XXXXXX", base);
    CHECK(mkdtemp(work_dir) != NULL);
    atexit(remove_work_dir);
    snprintf(session_dir, sizeof session_dir, "%s/session", work_dir);
    snprintf(database_path, sizeof database_path, "%s/session.db", session_dir);
    snprintf(output_path, sizeof output_path, "%s/export.out", work_dir);
    CHECK(mkdir(session_dir, 0700) == 0);

    const char *setting = getenv("FLARE_FUZZ_VERBOSE");
    verbose = setting != NULL && setting[0] != '\0' && strcmp(setting, "0") != 0;
    if (!verbose) {
        quiet_stream = fopen("/dev/null", "w");
        CHECK(quiet_stream != NULL);
    }
    make_seeds();
    report_has_formats = report_offers_formats();
    if (verbose)
        fprintf(stderr, "fuzz_session_reader: report --format json|csv %s\n",
                report_has_formats ? "checked too" : "not offered by this flare");

    /* The untouched seeds read cleanly, or the fuzzing would prove nothing. */
    const seed *seeds[] = {&strict_seed, &relaxed_seed};
    for (size_t i = 0; i < 2; i++) {
        clear_session();
        write_file(database_path, seeds[i]->bytes, seeds[i]->size);
        run_readers(0, 0, 1, 1, 1);
        run_readers(1, 0, 1, 0, 1);
        run_readers(0, 1, 1, 0, 1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    input in = {data, size, 0};
    uint8_t mode = take_byte(&in);
    const seed *from = mode & 0x08 ? &relaxed_seed : &strict_seed;
    clear_session();
    if ((mode & 0x07) == 0)
        mutate_bytes(from, &in);
    else
        mutate_with_sql(from, &in);
    /* Bits 5 and 6 leave out the exports or the report (both set: neither
     * is left out), so that an input can run faster on one of them. */
    int only_report = (mode & 0x60) == 0x20, only_exports = (mode & 0x60) == 0x40;
    run_readers(mode & 0x10, mode & 0x80, !only_exports, !only_report, 0);
    return 0;
}
