/*
 * test_sql.h: one integer out of a session database, for tests that read
 * back what flare stored. Test-only; include after <cmocka.h> (a query that
 * does not prepare fails the test with SQLite's message).
 *
 * Must never: hide a bad query (it fails the test, naming the SQL), or
 * write to the database.
 */
#ifndef FLARE_TESTS_TEST_SQL_H
#define FLARE_TESTS_TEST_SQL_H

#include <sqlite3.h>
#include <stdint.h>

/* The first column of sql's first row as an integer; -1 when no row. */
static inline int64_t test_sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *statement = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    int64_t value = -1;
    if (sqlite3_step(statement) == SQLITE_ROW)
        value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    return value;
}

#endif /* FLARE_TESTS_TEST_SQL_H */
