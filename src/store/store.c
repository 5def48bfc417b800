/*
 * store.c: opening, validating and closing session.db; its schema; batches.
 *
 * The schema lives only in store_schema_ddl (store_schema.c; docs/schema.md describes
 * it). A READ open must never create or modify anything in the session
 * directory beyond what SQLite itself needs to read a WAL database (-shm),
 * and must never accept a file it cannot vouch for (not SQLite, not flare's,
 * another schema version).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "flare/flare.h"
#include "store/store_internal.h"
#include "store/store_views.h"

#ifdef SQLITE_OPEN_NOFOLLOW
#define STORE_OPEN_NOFOLLOW SQLITE_OPEN_NOFOLLOW
#else
#define STORE_OPEN_NOFOLLOW                                                                        \
    0 /* SQLite before 3.31: store_files.c's O_NOFOLLOW claim still holds                          \
       */
#endif

/* ---- errors ---- */

static void store_format(char *buffer, size_t size, const char *format, va_list args)
    __attribute__((format(printf, 3, 0)));

static void store_format(char *buffer, size_t size, const char *format, va_list args)
{
    if (buffer == NULL || size == 0)
        return;
    vsnprintf(buffer, size, format, args);
}

void store_set_error(store *handle, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    store_format(handle->error, sizeof handle->error, format, args);
    va_end(args);
}

int store_set_sqlite_error(store *handle, const char *what)
{
    if (handle->db != NULL)
        store_set_error(handle, "%s: %s: %s", handle->path, what, sqlite3_errmsg(handle->db));
    else
        store_set_error(handle, "%s: %s", handle->path, what);
    return FLARE_ERR_STORE;
}

const char *store_last_error(const store *handle)
{
    if (handle == NULL)
        return "no store handle";
    return handle->error;
}

/* ---- small statement helpers for open-time queries ---- */

/* Runs sql, which returns at most one row of one integer, into *value
 * (untouched when there is no row). */
int store_query_int(store *handle, const char *sql, int64_t *value, int *found)
{
    sqlite3_stmt *statement = NULL;
    if (found != NULL)
        *found = 0;
    int rc = sqlite3_prepare_v2(handle->db, sql, -1, &statement, NULL);
    if (rc != SQLITE_OK)
        return rc;
    rc = sqlite3_step(statement);
    if (rc == SQLITE_ROW) {
        *value = sqlite3_column_int64(statement, 0);
        if (found != NULL)
            *found = 1;
        rc = SQLITE_OK;
    } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
    }
    sqlite3_finalize(statement);
    return rc;
}

int store_exec(store *handle, const char *sql, const char *what)
{
    int rc = sqlite3_exec(handle->db, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return store_set_sqlite_error(handle, what);
    return 0;
}

/* ---- validation ---- */

typedef enum store_schema_state {
    STORE_SCHEMA_OURS = 0,  /* flare's, at STORE_SCHEMA_VERSION */
    STORE_SCHEMA_EMPTY = 1, /* no schema objects at all */
} store_schema_state;

/* What the versions after version added, in words, into text: the
 * notice a reader of an older session prints. Versions 8 on recorded
 * nothing of what a later one added, so the tables read as empty. */
static void store_added_since(int version, char *text, size_t size)
{
    static const char *const added[] = {
        [7] = "the views and name tables of version 7",
        [8] = "the API calls and launch storms of version 8",
        [9] = "the ranks and clock pairs of version 9",
        [10] = "the triggered replays of version 10",
        [11] = "the PC samples of version 11",
        [12] = "the PC source lines of version 12",
        [13] = "the SASS metrics of version 13",
        [14] = "the untimed launches of version 14",
        [15] = "the SASS text of version 15",
        [16] = "the replay value methods of version 16",
    };
    _Static_assert(sizeof added / sizeof added[0] == STORE_SCHEMA_VERSION + 1,
                   "say what the new version added");
    size_t used = 0;
    text[0] = '\0';
    for (int next = version + 1; next <= STORE_SCHEMA_VERSION && used < size; next++) {
        const char *separator = next == version + 1            ? ""
                                : next == STORE_SCHEMA_VERSION ? " and "
                                                               : ", ";
        used += (size_t)snprintf(text + used, size - used, "%s%s", separator, added[next]);
    }
    if (version >= 7 && used < size)
        snprintf(text + used, size - used, " (it recorded none)");
}

/*
 * Decides whether the database is flare's at our version. Returns a
 * store_schema_state, or a negative status with the error recorded. The
 * first statement is also where SQLite first reads the file, so a file that
 * is not a database surfaces here; *sqlite_rc reports that code so READ can
 * tell a missing -shm apart.
 */
static int store_check_schema(store *handle, int *sqlite_rc)
{
    int64_t objects = 0;
    int rc = store_query_int(handle, "SELECT count(*) FROM sqlite_schema", &objects, NULL);
    *sqlite_rc = rc;
    if (rc != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot read database");
    if (objects == 0)
        return STORE_SCHEMA_EMPTY;

    int64_t has_meta = 0;
    rc = store_query_int(
        handle, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'",
        &has_meta, NULL);
    if (rc != SQLITE_OK)
        return store_set_sqlite_error(handle, "cannot read database");

    int64_t is_flare = 0;
    int found_version = 0;
    int64_t version = 0;
    if (has_meta) {
        /* A foreign meta table without these columns fails to prepare;
         * that is "not ours", not a database error. */
        if (store_query_int(
                handle, "SELECT count(*) FROM meta WHERE key = 'created_by' AND value = 'flare'",
                &is_flare, NULL) != SQLITE_OK ||
            store_query_int(handle, "SELECT value FROM meta WHERE key = 'schema_version'", &version,
                            &found_version) != SQLITE_OK) {
            is_flare = 0;
        }
    }
    if (!is_flare || !found_version) {
        store_set_error(handle, "%s is not a flare session database", handle->path);
        return FLARE_ERR_STORE;
    }
    int older = version >= STORE_SCHEMA_VERSION_OLDEST && version < STORE_SCHEMA_VERSION;
    if (older && handle->mode == STORE_OPEN_WRITE && handle->upgrade) {
        handle->schema_version = (int)version; /* store_create_schema brings it up */
        return STORE_SCHEMA_OURS;
    }
    if (older && handle->mode == STORE_OPEN_READ) {
        /* Versions only ever added (store_added_since), which readers find
         * empty when they are not there (store_has_table). Read as it is,
         * and say so. */
        handle->schema_version = (int)version;
        char missing[384];
        store_added_since((int)version, missing, sizeof(missing));
        snprintf(handle->notice, sizeof(handle->notice),
                 "%.1024s has schema version %lld (an older flare): read without %s; "
                 "'flare index' adds %s",
                 handle->path, (long long)version, missing,
                 version < 7 ? "the views and tables" : "the empty tables");
        return STORE_SCHEMA_OURS;
    }
    if (version != STORE_SCHEMA_VERSION) {
        if (handle->mode == STORE_OPEN_READ || version > STORE_SCHEMA_VERSION ||
            version < STORE_SCHEMA_VERSION_OLDEST)
            store_set_error(handle,
                            "%s has schema version %lld; this flare reads versions %d to %d",
                            handle->path, (long long)version, STORE_SCHEMA_VERSION_OLDEST,
                            STORE_SCHEMA_VERSION);
        else
            store_set_error(handle,
                            "%s has schema version %lld; this flare adds only to version %d "
                            "sessions (it reads the older one)",
                            handle->path, (long long)version, STORE_SCHEMA_VERSION);
        return FLARE_ERR_UNSUPPORTED;
    }
    handle->schema_version = (int)version;
    return STORE_SCHEMA_OURS;
}

/* ---- open ---- */

static int store_open_connection(store *handle, int flags)
{
    /* NOMUTEX: a handle is used by one thread at a time (store.h), so
     * SQLite's per-call mutex would be pure overhead on the hot path. */
    int rc = sqlite3_open_v2(handle->path, &handle->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        store_set_sqlite_error(handle, "cannot open");
        return FLARE_ERR_STORE;
    }
    sqlite3_extended_result_codes(handle->db, 1);
    sqlite3_busy_timeout(handle->db, STORE_BUSY_TIMEOUT_MS);
    return 0;
}

static void store_close_connection(store *handle)
{
    store_writer_finalize(handle);
    if (handle->db != NULL) {
        sqlite3_close(handle->db);
        handle->db = NULL;
    }
}

/* The last way in, for a finished session on a read-only mount or in a
 * directory this user cannot write: SQLite cannot make the -shm index a
 * WAL database needs there, but can read the database file as immutable.
 * What a -wal file still holds (a session whose last writer was killed) is
 * then not seen, and the notice says so. */
static int store_open_immutable(store *handle, int *sqlite_rc)
{
    /* A URI: the path percent-encoded where URIs need it. */
    char uri[PATH_MAX * 3 + 32] = "file:";
    size_t used = strlen(uri);
    for (const unsigned char *p = (const unsigned char *)handle->path; *p != '\0'; p++) {
        if (*p == '%' || *p == '?' || *p == '#' || *p < 0x20 || *p >= 0x7f)
            used += (size_t)snprintf(uri + used, sizeof(uri) - used, "%%%02X", *p);
        else
            uri[used++] = (char)*p;
    }
    snprintf(uri + used, sizeof(uri) - used, "?immutable=1");
    int rc = sqlite3_open_v2(uri, &handle->db,
                             SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        store_set_sqlite_error(handle, "cannot open");
        return FLARE_ERR_STORE;
    }
    sqlite3_extended_result_codes(handle->db, 1);
    int status = store_check_schema(handle, sqlite_rc);
    if (status < 0)
        return status;
    char wal[PATH_MAX + 8];
    struct stat info;
    snprintf(wal, sizeof(wal), "%s-wal", handle->path);
    if (stat(wal, &info) == 0 && info.st_size > 0)
        snprintf(handle->notice, sizeof(handle->notice),
                 "%.1024s was read without its write-ahead log (%lld bytes in its -wal file: "
                 "the session's last writes, or one still running) because this user cannot "
                 "write in its directory; copy the directory somewhere writable to read all of it",
                 handle->path, (long long)info.st_size);
    return status;
}

static int store_open_read(store *handle)
{
    struct stat info;
    if (stat(handle->path, &info) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            store_set_error(handle, "no session database at %s", handle->path);
            return FLARE_ERR_NOT_FOUND;
        }
        store_set_error(handle, "%s: %s", handle->path, strerror(errno));
        return FLARE_ERR_IO;
    }
    if (!S_ISREG(info.st_mode)) {
        store_set_error(handle, "%s is not a regular file", handle->path);
        return FLARE_ERR_STORE;
    }

    /* READONLY never creates the database file, unlike the default flags. */
    int status = store_open_connection(handle, SQLITE_OPEN_READONLY);
    if (status != 0)
        return status;
    int sqlite_rc = SQLITE_OK;
    status = store_check_schema(handle, &sqlite_rc);
    if (status < 0 &&
        ((sqlite_rc & 0xff) == SQLITE_CANTOPEN || (sqlite_rc & 0xff) == SQLITE_READONLY)) {
        /* A WAL database whose writer is gone may lack a usable -shm that a
         * read-only connection cannot build. Read-write without CREATE can,
         * and still cannot create session.db itself; query_only keeps this
         * handle from writing anything else. */
        store_close_connection(handle);
        status = store_open_connection(handle, SQLITE_OPEN_READWRITE);
        if (status == 0)
            status =
                store_exec(handle, "PRAGMA query_only = 1", "cannot make the database read-only");
        if (status == 0)
            status = store_check_schema(handle, &sqlite_rc);
        if (status < 0 && ((sqlite_rc & 0xff) == SQLITE_CANTOPEN ||
                           (sqlite_rc & 0xff) == SQLITE_READONLY || sqlite_rc == SQLITE_OK)) {
            store_close_connection(handle);
            status = store_open_immutable(handle, &sqlite_rc);
        }
    }
    if (status == STORE_SCHEMA_EMPTY) {
        store_set_error(handle, "%s is not a flare session database", handle->path);
        return FLARE_ERR_STORE;
    }
    return status;
}

static int store_create_schema(store *handle)
{
    int status = store_exec(handle, "BEGIN IMMEDIATE", "cannot lock the database");
    if (status != 0)
        return status;
    /* Checked inside the write lock so that two processes creating the same
     * new database see each other: the loser finds the winner's schema. */
    int sqlite_rc = SQLITE_OK;
    status = store_check_schema(handle, &sqlite_rc);
    if (status >= 0) {
        for (size_t i = 0; i < store_schema_ddl_count; i++) {
            status = store_exec(handle, store_schema_ddl[i], "cannot create the schema");
            if (status != 0)
                break;
        }
        if (status == 0)
            status = store_views_create(handle);
        if (status == 0 && handle->upgrade && handle->schema_version < STORE_SCHEMA_VERSION) {
            /* Versions 7 to 15 added only what the DDL and
             * store_views_create just made. */
            char update[96];
            snprintf(update, sizeof(update),
                     "UPDATE meta SET value = %d WHERE key = 'schema_version'",
                     STORE_SCHEMA_VERSION);
            status = store_exec(handle, update, "cannot record the new schema version");
            if (status == 0)
                handle->schema_version = STORE_SCHEMA_VERSION;
        }
    }
    if (status == 0)
        status = store_exec(handle, "COMMIT", "cannot commit the schema");
    if (status < 0)
        sqlite3_exec(handle->db, "ROLLBACK", NULL, NULL, NULL);
    return status;
}

/*
 * Switching a new database to WAL needs an exclusive lock, and SQLite does
 * not run the busy handler for it: when several processes of a session
 * open the new database at once, all but one get SQLITE_BUSY at once. So
 * this retries for as long as the busy timeout would have waited.
 */
static int store_enable_wal(store *handle)
{
    const long step_ms = 2;
    for (long waited_ms = 0;; waited_ms += step_ms) {
        sqlite3_stmt *statement = NULL;
        int rc = sqlite3_prepare_v2(handle->db, "PRAGMA journal_mode = WAL", -1, &statement, NULL);
        if (rc == SQLITE_OK)
            rc = sqlite3_step(statement);
        if (rc == SQLITE_ROW) {
            /* The pragma answers with the mode it ended in rather than
             * failing when it cannot switch. */
            const char *journal = (const char *)sqlite3_column_text(statement, 0);
            int is_wal = journal != NULL && strcmp(journal, "wal") == 0;
            if (!is_wal)
                store_set_error(handle, "%s: cannot switch to WAL mode (journal mode is %s)",
                                handle->path, journal != NULL ? journal : "unknown");
            sqlite3_finalize(statement);
            return is_wal ? 0 : FLARE_ERR_STORE;
        }
        int status = store_set_sqlite_error(handle, "cannot switch to WAL mode");
        sqlite3_finalize(statement);
        if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= STORE_BUSY_TIMEOUT_MS)
            return status;
        struct timespec pause = {.tv_sec = 0, .tv_nsec = step_ms * 1000000L};
        nanosleep(&pause, NULL);
    }
}

static int store_open_write(store *handle, const char *session_dir)
{
    struct stat info;
    if (stat(session_dir, &info) != 0) {
        store_set_error(handle, "cannot create %s: session directory %s: %s", handle->path,
                        session_dir, strerror(errno));
        return FLARE_ERR_IO;
    }
    if (!S_ISDIR(info.st_mode)) {
        store_set_error(handle, "cannot create %s: %s is not a directory", handle->path,
                        session_dir);
        return FLARE_ERR_IO;
    }

    /* NOFOLLOW: a session.db planted as a link is refused, not written through. */
    int status = store_open_connection(handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                                   STORE_OPEN_NOFOLLOW);
    if (status != 0)
        return status;

    status = store_enable_wal(handle);
    if (status != 0)
        return status;

    /*
     * synchronous=NORMAL: in WAL mode a commit reaches the OS before COMMIT
     * returns, so a SIGKILL'd process loses nothing committed; only power
     * loss can drop the last transactions (never corrupting the file).
     * FULL would fsync every batch for a guarantee we do not promise.
     *
     * wal_autocheckpoint: each checkpoint copies the WAL into the database
     * and fsyncs it, in whichever writer's COMMIT crosses the threshold.
     * 10000 pages (about 40 MB of WAL) instead of SQLite's 1000 makes those
     * stalls ten times rarer; it measured about 10% more kernel rows a
     * second (bench_store), at the price of a WAL file of that size while
     * the session runs.
     */
    status = store_exec(handle,
                        "PRAGMA synchronous = NORMAL;"
                        "PRAGMA wal_autocheckpoint = 10000;",
                        "cannot configure the database");
    if (status != 0)
        return status;

    status = store_create_schema(handle);
    if (status != 0)
        return status;
    return store_writer_prepare(handle);
}

static int store_open_as(const char *session_dir, store_open_mode mode, int upgrade, store **out,
                         char *error, size_t error_size);

int store_open(const char *session_dir, store_open_mode mode, store **out, char *error,
               size_t error_size)
{
    return store_open_as(session_dir, mode, 0, out, error, error_size);
}

int store_open_upgrading(const char *session_dir, store **out, char *error, size_t error_size)
{
    return store_open_as(session_dir, STORE_OPEN_WRITE, 1, out, error, error_size);
}

static int store_open_as(const char *session_dir, store_open_mode mode, int upgrade, store **out,
                         char *error, size_t error_size)
{
    if (error != NULL && error_size > 0)
        error[0] = '\0';
    if (out != NULL)
        *out = NULL;
    if (session_dir == NULL || out == NULL ||
        (mode != STORE_OPEN_READ && mode != STORE_OPEN_WRITE)) {
        if (error != NULL && error_size > 0)
            snprintf(error, error_size, "store_open: invalid argument");
        return FLARE_ERR_INVALID_ARGUMENT;
    }

    store *handle = calloc(1, sizeof *handle);
    if (handle == NULL) {
        if (error != NULL && error_size > 0)
            snprintf(error, error_size, "%s/%s: out of memory", session_dir, STORE_DATABASE_NAME);
        return FLARE_ERR_NO_MEMORY;
    }
    handle->mode = mode;
    handle->upgrade = upgrade;

    /* Trailing slashes only make the path in messages ugly. */
    size_t dir_length = strlen(session_dir);
    while (dir_length > 1 && session_dir[dir_length - 1] == '/')
        dir_length--;
    int written = snprintf(handle->path, sizeof handle->path, "%.*s/%s", (int)dir_length,
                           session_dir, STORE_DATABASE_NAME);
    int status;
    if (written < 0 || (size_t)written >= sizeof handle->path) {
        store_set_error(handle, "%s/%s: path too long", session_dir, STORE_DATABASE_NAME);
        status = FLARE_ERR_INVALID_ARGUMENT;
    } else if (mode == STORE_OPEN_READ) {
        status = store_open_read(handle);
    } else {
        status = store_open_write(handle, session_dir);
    }

    if (status < 0) {
        if (error != NULL && error_size > 0)
            snprintf(error, error_size, "%s", handle->error);
        store_close(handle);
        return status;
    }
    *out = handle;
    return 0;
}

int store_settle(store *handle)
{
    if (handle == NULL || handle->mode != STORE_OPEN_WRITE || handle->in_batch)
        return FLARE_ERR_STATE;
    /* Needs every other connection gone; with one still open (a process
     * of the session still running, a reader) SQLite refuses at once and
     * the session simply stays in WAL mode. No busy wait: the caller is
     * ending and must not hang on a reader. */
    sqlite3_busy_timeout(handle->db, 0);
    sqlite3_stmt *statement = NULL;
    int settled = 0;
    if (sqlite3_prepare_v2(handle->db, "PRAGMA journal_mode = DELETE", -1, &statement, NULL) ==
            SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(statement, 0);
        settled = mode != NULL && strcmp(mode, "delete") == 0;
    }
    sqlite3_finalize(statement);
    sqlite3_busy_timeout(handle->db, STORE_BUSY_TIMEOUT_MS);
    return settled ? 0 : FLARE_ERR_STATE;
}

void store_close(store *handle)
{
    if (handle == NULL)
        return;
    /* An unfinished batch is dropped whole rather than half-committed. */
    if (handle->db != NULL && !sqlite3_get_autocommit(handle->db))
        sqlite3_exec(handle->db, "ROLLBACK", NULL, NULL, NULL);
    store_close_connection(handle);
    store_name_cache_free(&handle->names);
    free(handle);
}

/* ---- batches ---- */

int store_require_writer(store *handle)
{
    if (handle->mode != STORE_OPEN_WRITE) {
        store_set_error(handle, "%s: opened for reading; cannot write", handle->path);
        return FLARE_ERR_STATE;
    }
    if (handle->in_batch && handle->batch_failed) {
        store_set_error(handle, "%s: an earlier write of this batch failed; roll it back",
                        handle->path);
        return FLARE_ERR_STORE;
    }
    return 0;
}

int store_writer_ready(store *handle, int arguments_valid)
{
    if (handle == NULL || !arguments_valid)
        return FLARE_ERR_INVALID_ARGUMENT;
    return store_require_writer(handle);
}

void store_batch_failed(store *handle)
{
    if (!handle->in_batch)
        return;
    handle->batch_failed = 1;
    /* Buffered rows belong to the lost batch; a reader's flush must not
     * write them on their own. The name cache is cleared by the rollback
     * or commit that ends the batch, and nothing can use it before. */
    store_discard(handle);
}

static int store_run(store *handle, store_statement_id id, const char *what)
{
    sqlite3_stmt *statement = handle->statements[id];
    int rc = sqlite3_step(statement);
    int status = 0;
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        status = store_set_sqlite_error(handle, what);
    sqlite3_reset(statement);
    return status;
}

int store_begin(store *handle)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    int status = store_require_writer(handle);
    if (status != 0)
        return status;
    if (handle->in_batch) {
        store_set_error(handle, "%s: a batch is already open", handle->path);
        return FLARE_ERR_STATE;
    }
    status = store_run(handle, STORE_STATEMENT_BEGIN, "cannot begin a batch");
    if (status == 0) {
        handle->in_batch = 1;
        handle->batch_failed = 0;
    }
    return status;
}

int store_commit(store *handle)
{
    if (handle == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    if (handle->mode != STORE_OPEN_WRITE || !handle->in_batch) {
        store_set_error(handle, "%s: no batch is open", handle->path);
        return FLARE_ERR_STATE;
    }
    int status;
    if (handle->batch_failed) {
        store_set_error(handle, "%s: cannot commit a batch: an earlier write of it failed",
                        handle->path);
        status = FLARE_ERR_STORE;
    } else {
        status = store_flush(handle);
        if (status == 0)
            status = store_run(handle, STORE_STATEMENT_COMMIT, "cannot commit a batch");
    }
    if (status == 0) {
        handle->in_batch = 0;
    } else if (sqlite3_get_autocommit(handle->db)) {
        /* SQLite has rolled the batch back itself: it is over, and names it
         * inserted are gone. Otherwise the caller must roll it back. */
        handle->in_batch = 0;
        handle->batch_failed = 0;
        store_discard(handle);
        store_name_cache_clear(&handle->names);
    }
    return status;
}

void store_rollback(store *handle)
{
    if (handle == NULL || handle->db == NULL || handle->mode != STORE_OPEN_WRITE)
        return;
    store_discard(handle);
    if (!sqlite3_get_autocommit(handle->db))
        store_run(handle, STORE_STATEMENT_ROLLBACK, "cannot roll back a batch");
    handle->in_batch = 0;
    handle->batch_failed = 0;
    /* Ids of names first inserted in the rolled-back batch now belong to
     * nobody and will be reused; telling them apart is not worth it. */
    store_name_cache_clear(&handle->names);
}

const char *store_read_notice(const store *handle)
{
    return handle != NULL && handle->notice[0] != '\0' ? handle->notice : NULL;
}
