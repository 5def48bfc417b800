/*
 * test_store_pc_code.c: the machine code of sampled functions without line
 * information (store_pc_code.c, schema 15): a PC sample or SASS row that
 * carries its function's code writes pc_code once per function and the
 * cubin's bytes once per process, whichever engine and window; a row with a
 * line writes neither; the instructions wanted of a cubin are the sampled
 * ones with neither a line nor a text, by symbol then offset; texts read
 * back with the rows (store_read_pc_samples, store_read_sass_metrics) and
 * in v_pc_instructions; a dropped cubin is gone; the counts say what has a
 * text. Must never depend on time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"
#include "store/store.h"
#include "store/store_pc.h"
#include "store/store_pc_code.h"
#include "store/store_sass.h"
#include "test_util.h"

#define PID  4242
#define INST "smsp__sass_inst_executed"

static char dir[256];
static const char cubin_bytes[] = "\x7f"
                                  "ELF pretend cubin bytes";
static const store_pc_code code_a = {.cubin_crc = 0xfeedfacecafebeefull,
                                     .symbol = "_Z5alphav",
                                     .cubin = cubin_bytes,
                                     .cubin_size = sizeof cubin_bytes};
static const store_pc_code code_b = {.cubin_crc = 0xfeedfacecafebeefull,
                                     .symbol = "_Z4betav",
                                     .cubin = cubin_bytes,
                                     .cubin_size = sizeof cubin_bytes};

static store *open_mode(store_open_mode mode)
{
    store *handle = NULL;
    char error[512];
    if (store_open(dir, mode, &handle, error, sizeof(error)) != 0)
        fail_msg("%s", error);
    return handle;
}

static int64_t query_int(const char *sql)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/session.db", dir);
    sqlite3 *db;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *statement;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(statement), SQLITE_ROW);
    int64_t value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

static int set_up(void **state)
{
    (void)state;
    test_make_temp_dir(dir, sizeof(dir), "store-pc-code");
    return 0;
}

static int tear_down(void **state)
{
    (void)state;
    test_remove_dir(dir);
    return 0;
}

/* alpha: 0x10 and 0x20 without lines, 0x30 with one, in two windows and
 * both engines; beta: 0x10 without a line. */
static void write_rows(void)
{
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    const store_pc_sample_row pcs[] = {
        {PID, 1, 0, "alpha", 0x10, "selected", 5, 10, 20, NULL, 0, &code_a, NULL},
        {PID, 1, 0, "alpha", 0x10, "barrier", 2, 10, 20, NULL, 0, &code_a, NULL},
        {PID, 2, 0, "alpha", 0x20, "selected", 1, 30, 40, NULL, 0, &code_a, NULL},
        {PID, 2, 0, "alpha", 0x30, "selected", 1, 30, 40, "a.cu", 7, &code_a, NULL},
    };
    for (size_t i = 0; i < sizeof pcs / sizeof pcs[0]; i++)
        assert_int_equal(store_put_pc_sample(handle, &pcs[i]), FLARE_OK);
    const store_sass_row sass[] = {
        {PID, 3, 0, "beta", 0x10, INST, 9, NULL, 0, &code_b, NULL},
        {PID, 3, 0, "alpha", 0x10, INST, 4, NULL, 0, &code_a, NULL},
        {PID, 3, 0, "gamma", 0x10, INST, 4, NULL, 0, NULL, NULL}, /* no code known */
    };
    for (size_t i = 0; i < sizeof sass / sizeof sass[0]; i++)
        assert_int_equal(store_put_sass_metric(handle, &sass[i]), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
}

static void test_code_and_cubin_written_once(void **state)
{
    (void)state;
    write_rows();
    assert_int_equal(query_int("SELECT count(*) FROM pc_code"), 2);
    assert_int_equal(query_int("SELECT count(*) FROM pc_code c JOIN names n ON n.id = c.name_id "
                               "WHERE n.name = 'alpha' AND c.symbol = '_Z5alphav' AND "
                               "c.cubin_crc = -77129852519530769"),
                     1);
    assert_int_equal(query_int("SELECT count(*) FROM pc_cubins"), 1);
    assert_int_equal(query_int("SELECT length(bytes) FROM pc_cubins"), (int64_t)sizeof cubin_bytes);
}

typedef struct wanted_seen {
    int count;
    char symbols[8][16];
    uint64_t offsets[8];
} wanted_seen;

static int see_wanted(const store_pc_wanted_row *row, void *user)
{
    wanted_seen *seen = user;
    assert_true(seen->count < 8);
    snprintf(seen->symbols[seen->count], sizeof seen->symbols[0], "%s", row->symbol);
    seen->offsets[seen->count++] = row->pc_offset;
    return 0;
}

typedef struct cubin_seen {
    int count;
    int64_t pid;
    uint64_t crc;
    size_t size;
} cubin_seen;

static int see_cubin(int64_t pid, uint64_t crc, const void *bytes, size_t size, void *user)
{
    cubin_seen *seen = user;
    seen->count++;
    seen->pid = pid;
    seen->crc = crc;
    seen->size = size;
    assert_memory_equal(bytes, cubin_bytes, size);
    return 0;
}

static int64_t name_id_of(const char *name)
{
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT id FROM names WHERE name = '%s'", name);
    return query_int(sql);
}

static void test_wanted_texts_and_drop(void **state)
{
    (void)state;
    write_rows();
    store *handle = open_mode(STORE_OPEN_WRITE);
    cubin_seen cubins = {0};
    assert_int_equal(store_read_pc_cubins(handle, see_cubin, &cubins), FLARE_OK);
    assert_int_equal(cubins.count, 1);
    assert_int_equal(cubins.pid, PID);
    assert_true(cubins.crc == code_a.cubin_crc);
    /* By symbol in byte order (_Z4betav before _Z5alphav), then offset;
     * alpha+0x30 has a line, alpha+0x10 is wanted once for both engines. */
    wanted_seen seen = {0};
    assert_int_equal(store_read_pc_wanted(handle, PID, code_a.cubin_crc, see_wanted, &seen),
                     FLARE_OK);
    assert_int_equal(seen.count, 3);
    assert_string_equal(seen.symbols[0], "_Z4betav");
    assert_string_equal(seen.symbols[1], "_Z5alphav");
    assert_string_equal(seen.symbols[2], "_Z5alphav");
    assert_true(seen.offsets[0] == 0x10 && seen.offsets[1] == 0x10 && seen.offsets[2] == 0x20);

    store_pc_code_counts counts;
    assert_int_equal(store_read_pc_code_counts(handle, PID, &counts), FLARE_OK);
    assert_true(counts.without_line == 4 && counts.with_text == 0 && counts.cubins_kept == 1);

    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(store_put_pc_instruction(handle, PID, name_id_of("alpha"), 0x10,
                                              "LDG.E R2, desc[UR4][R2.64]"),
                     FLARE_OK);
    assert_int_equal(store_put_pc_instruction(handle, PID, name_id_of("alpha"), 0x10, "other"),
                     FLARE_OK); /* a second text is ignored */
    assert_int_equal(store_put_pc_instruction(handle, PID, name_id_of("alpha"), 0x20, ""),
                     FLARE_ERR_INVALID_ARGUMENT);
    assert_int_equal(store_drop_pc_cubin(handle, PID, code_a.cubin_crc), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);

    seen.count = 0;
    assert_int_equal(store_read_pc_wanted(handle, PID, code_a.cubin_crc, see_wanted, &seen),
                     FLARE_OK);
    assert_int_equal(seen.count, 2); /* beta+0x10, alpha+0x20 */
    assert_int_equal(store_read_pc_code_counts(handle, PID, &counts), FLARE_OK);
    assert_true(counts.without_line == 4 && counts.with_text == 1 && counts.cubins_kept == 0);
    cubins.count = 0;
    assert_int_equal(store_read_pc_cubins(handle, see_cubin, &cubins), FLARE_OK);
    assert_int_equal(cubins.count, 0);
    store_close(handle);
    assert_int_equal(query_int("SELECT count(*) FROM v_pc_instructions WHERE function = 'alpha' "
                               "AND pc_offset = 16 AND sass = 'LDG.E R2, desc[UR4][R2.64]'"),
                     1);
}

typedef struct texts_seen {
    int with_text, rows;
    char text[64];
} texts_seen;

static int see_pc(const store_pc_sample_row *row, void *user)
{
    texts_seen *seen = user;
    seen->rows++;
    if (row->sass != NULL) {
        seen->with_text++;
        assert_string_equal(row->function, "alpha");
        assert_true(row->pc_offset == 0x10 && row->file == NULL);
        snprintf(seen->text, sizeof seen->text, "%s", row->sass);
    }
    return 0;
}

static int see_sass(const store_sass_row *row, void *user)
{
    return see_pc(&(store_pc_sample_row){.function = row->function,
                                         .pc_offset = row->pc_offset,
                                         .file = row->file,
                                         .sass = row->sass},
                  user);
}

static void test_rows_read_back_with_their_text(void **state)
{
    (void)state;
    write_rows();
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(
        store_put_pc_instruction(handle, PID, name_id_of("alpha"), 0x10, "BAR.SYNC 0x0"), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    store_close(handle);
    handle = open_mode(STORE_OPEN_READ);
    texts_seen pcs = {0}, sass = {0};
    assert_int_equal(store_read_pc_samples(handle, see_pc, &pcs), FLARE_OK);
    assert_int_equal(pcs.rows, 4);
    assert_int_equal(pcs.with_text, 2); /* alpha+0x10's two stall reasons */
    assert_string_equal(pcs.text, "BAR.SYNC 0x0");
    assert_int_equal(store_read_sass_metrics(handle, see_sass, &sass), FLARE_OK);
    assert_int_equal(sass.rows, 3);
    assert_int_equal(sass.with_text, 1);
    store_close(handle);
}

/* Two cubins with a function of one name: no cubin is said to hold it,
 * so it is never disassembled, and the counts say so. */
static void test_a_name_two_cubins_hold_gets_no_code(void **state)
{
    (void)state;
    write_rows();
    static const char other_bytes[] = "another cubin";
    const store_pc_code other = {.cubin_crc = 0x1234,
                                 .symbol = "_Z5alphav",
                                 .cubin = other_bytes,
                                 .cubin_size = sizeof other_bytes};
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    const store_pc_sample_row row = {PID, 4,  0,    "alpha", 0x10,   "selected", 1,
                                     50,  60, NULL, 0,       &other, NULL};
    assert_int_equal(store_put_pc_sample(handle, &row), FLARE_OK);
    assert_int_equal(store_put_pc_sample(handle, &row), FLARE_OK); /* again: still none */
    assert_int_equal(store_commit(handle), 0);
    assert_int_equal(query_int("SELECT cubin_crc FROM pc_code c JOIN names n ON n.id = c.name_id "
                               "WHERE n.name = 'alpha'"),
                     0);
    wanted_seen seen = {0};
    assert_int_equal(store_read_pc_wanted(handle, PID, code_a.cubin_crc, see_wanted, &seen),
                     FLARE_OK);
    assert_int_equal(seen.count, 1); /* beta+0x10 only */
    assert_string_equal(seen.symbols[0], "_Z4betav");
    store_pc_code_counts counts;
    assert_int_equal(store_read_pc_code_counts(handle, PID, &counts), FLARE_OK);
    assert_true(counts.shared_names == 1 && counts.with_text == 0);
    store_close(handle);
}

/* Dropped cubins of 16 MiB or more, and a quarter of the file: its size
 * goes back; less is left alone. */
static void test_dropped_cubins_give_their_space_back(void **state)
{
    (void)state;
    size_t size = (size_t)20 << 20;
    char *big = calloc(1, size);
    assert_non_null(big);
    const store_pc_code code = {
        .cubin_crc = 77, .symbol = "_Z3bigv", .cubin = big, .cubin_size = size};
    store *handle = open_mode(STORE_OPEN_WRITE);
    assert_int_equal(store_begin(handle), 0);
    const store_sass_row row = {PID, 1, 0, "big", 0x10, INST, 1, NULL, 0, &code, NULL};
    assert_int_equal(store_put_sass_metric(handle, &row), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    int64_t before = query_int("PRAGMA page_count") * query_int("PRAGMA page_size");
    assert_true(before > (int64_t)size);
    assert_int_equal(store_begin(handle), 0);
    assert_int_equal(store_drop_pc_cubin(handle, PID, 77), FLARE_OK);
    assert_int_equal(store_commit(handle), 0);
    assert_int_equal(store_pc_cubins_compact(handle, 1u << 20), FLARE_OK); /* too little */
    assert_true(query_int("PRAGMA page_count") * query_int("PRAGMA page_size") >= before);
    assert_int_equal(store_pc_cubins_compact(handle, size), FLARE_OK);
    assert_true(query_int("PRAGMA page_count") * query_int("PRAGMA page_size") < before / 4);
    store_close(handle);
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_code_and_cubin_written_once, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_wanted_texts_and_drop, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_rows_read_back_with_their_text, set_up, tear_down),
        cmocka_unit_test_setup_teardown(test_a_name_two_cubins_hold_gets_no_code, set_up,
                                        tear_down),
        cmocka_unit_test_setup_teardown(test_dropped_cubins_give_their_space_back, set_up,
                                        tear_down),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
