/*
 * test_ranks.c: one session per rank or host (issue 24): `flare trace -o`
 * templates (%h, %p, %r, %q{VAR}, %%) expanded before anything runs, each
 * refusal precise with nothing made; every process's host, rank, local
 * rank, world size and job id recorded (process_ranks) with its clock
 * pairs, and shown by `flare report` in text and JSON.
 * Runs the built flare and flare-demo (FLARE_TEST_BIN_DIR) in child
 * processes, on the simulated device.
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
#include <sys/stat.h>
#include <unistd.h>

#include "cli_flare.h"
#include "test_util.h"

static int setup(void **state)
{
    (void)state;
    const char *dir = getenv("FLARE_TEST_BIN_DIR");
    snprintf(bin_dir, sizeof(bin_dir), "%s", dir != NULL ? dir : "bin");
    test_make_temp_dir(scratch, sizeof(scratch), "ranks");
    unsetenv("RANK");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("SLURM_PROCID");
    unsetenv("PMI_RANK");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

/* Nothing was made under scratch/runs. */
static void expect_nothing_made(void)
{
    struct stat info;
    char path[400];
    snprintf(path, sizeof(path), "%s/runs", scratch);
    assert_int_not_equal(stat(path, &info), 0);
    expect_contains(err_text, "Run 'flare trace --help' for usage.");
}

static void test_bad_templates_are_refused(void **state)
{
    (void)state;
    assert_int_equal(FLARE("trace", "-o", "runs/%r", "--", "true"), 2);
    expect_contains(err_text, "'-o runs/%r': %r: no rank in the environment (RANK, "
                              "OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMI_RANK is not set)");
    expect_nothing_made();
    setenv("RANK", "../../etc", 1);
    assert_int_equal(FLARE("trace", "-o", "runs/%r", "--", "true"), 2);
    expect_contains(err_text, "%r expands to '../../etc', which cannot stand in a path");
    expect_nothing_made();
    setenv("RANK", "..", 1);
    assert_int_equal(FLARE("replay", "-o", "runs/x%r", "--kernel", "k", "--", "true"), 2);
    expect_contains(err_text, "flare replay: '-o runs/x%r': %r expands to '..'");
    unsetenv("RANK");
    setenv("FLARE_TEST_EMPTY", "", 1);
    assert_int_equal(FLARE("trace", "-o", "runs/%q{FLARE_TEST_EMPTY}", "--", "true"), 2);
    expect_contains(err_text, "%q{FLARE_TEST_EMPTY}: FLARE_TEST_EMPTY is not set or empty");
    expect_nothing_made();
    assert_int_equal(FLARE("trace", "-o", "runs/%q{FLARE_TEST_EMPTY", "--", "true"), 2);
    expect_contains(err_text, "%q needs a variable name in braces, e.g. %q{SLURM_JOB_ID}");
    assert_int_equal(FLARE("trace", "-o", "runs/%x", "--", "true"), 2);
    expect_contains(err_text, "unknown placeholder '%x': use %h (host), %p (pid), %r (rank), "
                              "%q{VAR} or %% (a percent sign)");
    assert_int_equal(FLARE("trace", "-o", "runs/end%", "--", "true"), 2);
    expect_contains(err_text, "unknown placeholder");
    expect_nothing_made();
}

/* The first row of sql in scratch/dir/session.db, as text ("" when none). */
static void query(const char *dir, const char *sql, char *text, size_t size)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/%s/session.db", scratch, dir);
    sqlite3 *db = NULL;
    sqlite3_stmt *statement = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &statement, NULL), SQLITE_OK);
    text[0] = '\0';
    if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != NULL)
        snprintf(text, size, "%s", (const char *)sqlite3_column_text(statement, 0));
    sqlite3_finalize(statement);
    sqlite3_close(db);
}

static void test_template_names_the_rank_session(void **state)
{
    (void)state;
    char demo[1100], host[256] = "", dir[400], text[512];
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin_dir);
    gethostname(host, sizeof(host) - 1);
    setenv("SLURM_PROCID", "5", 1);
    setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    assert_int_equal(FLARE("trace", "-q", "-o", "runs/%h-r%r-%%", "--", demo, "5"), 0);
    snprintf(dir, sizeof(dir), "runs/%s-r5-%%", host);
    query(dir,
          "SELECT host || '|' || rank || '|' || local_rank || '|' || world_size || '|' || job_id "
          "FROM process_ranks",
          text, sizeof(text));
    char expected[400];
    snprintf(expected, sizeof(expected), "%s|5|1|8|4242", host);
    assert_string_equal(text, expected);
    /* A pair at the start and one at the end, both clocks moving forward. */
    query(dir,
          "SELECT COUNT(*) || '|' || (MAX(clock_ns) > MIN(clock_ns)) || '|' || "
          "(MAX(unix_ns) > MIN(unix_ns)) FROM clock_pairs",
          text, sizeof(text));
    assert_string_equal(text, "2|1|1");
    unsetenv("SLURM_PROCID");
    unsetenv("SLURM_LOCALID");
    unsetenv("SLURM_NTASKS");
    unsetenv("SLURM_JOB_ID");
}

/* One launcher, several rank processes (as torchrun makes): the report
 * names each process's rank. */
static void test_report_lists_the_ranks(void **state)
{
    (void)state;
    char script[1600];
    snprintf(script, sizeof(script),
             "for r in 0 1 2 3; do RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 TORCHELASTIC_RUN_ID=job7 "
             "%s/flare-demo 3 >/dev/null & done; wait",
             bin_dir);
    assert_int_equal(FLARE("trace", "-q", "-o", "job", "--", "sh", "-c", script), 0);
    assert_int_equal(FLARE("report", "job"), 0);
    expect_contains(out_text, "  ranks      4 process(es) with a rank, world size 4, job job7\n");
    expect_contains(out_text, "             rank 0 (local 0): pid ");
    expect_contains(out_text, "             rank 3 (local 3): pid ");
    assert_int_equal(FLARE("report", "--format", "json", "job"), 0);
    expect_contains(out_text, "\"ranks\":[\n{\"pid\":");
    expect_contains(out_text, "\"rank\":3,\"local_rank\":3,\"world_size\":4,\"job_id\":\"job7\"}");
    /* A plain trace says nothing of ranks. */
    char demo[1100];
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin_dir);
    assert_int_equal(FLARE("trace", "-q", "-o", "plain", "--", demo, "3"), 0);
    assert_int_equal(FLARE("report", "plain"), 0);
    assert_null(strstr(out_text, "ranks"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bad_templates_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_template_names_the_rank_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_report_lists_the_ranks, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
