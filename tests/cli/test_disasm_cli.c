/*
 * test_disasm_cli.c: the SASS text of sampled instructions without a
 * source line (src/disasm/disasm_session.c), end to end on the simulated
 * device: marks_target under `flare trace` counts instructions with a line,
 * two without one that its listing has, and one that no instruction of the
 * listing starts at. Stand-in disassemblers written by the test (the
 * simulated "cubin" is already a listing in cuobjdump's layout, so one that
 * prints the file is a disassembler for it) check how they are called.
 *
 *   * flare trace with a disassembler: the texts in pc_instructions and the
 *     report (text, JSON), the cubin dropped, sass_text active "2 of 3";
 *   * flare trace without one (FLARE_DISASSEMBLER empty): a warning naming
 *     `flare disasm`, the cubin kept, sass_text unavailable; then `flare
 *     disasm` with one gives the texts, and again says nothing is left;
 *   * a disassembler that fails: exit 1 with its status and words, the
 *     cubin kept for a later try, no text written.
 *
 * Must never depend on a GPU, a real disassembler or time.
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
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_flare.h"
#include "test_sql.h"
#include "test_util.h"

#ifndef MARKS_TARGET_PATH
#error "MARKS_TARGET_PATH is set by tests/cli/CMakeLists.txt"
#endif

/* The simulated listing's texts (src/backend/sim/sim_code.c): instruction
 * (offset - 0x10000) / 16 of its cycle of four. */
#define TEXT_10040 "LDG.E R6, desc[UR4][R8.64]"
#define TEXT_10050 "IMAD.WIDE R7, R8, 0x4, R9"

static char session[400];

/* scratch/bin/NAME: a shell script with body, executable. */
static void write_tool(const char *name, const char *body, char *path, size_t size)
{
    char dir[400];
    snprintf(dir, sizeof dir, "%s/bin", scratch);
    mkdir(dir, 0755);
    snprintf(path, size, "%s/%s", dir, name);
    FILE *file = fopen(path, "w");
    assert_non_null(file);
    fprintf(file, "#!/bin/sh\n%s\n", body);
    assert_int_equal(fclose(file), 0);
    assert_int_equal(chmod(path, 0755), 0);
}

/* A cuobjdump that takes "-sass -fun LIST FILE" (unless fun_fails) or
 * "-sass FILE", prints the file and logs its arguments to scratch/calls. */
static void use_tool(int fun_fails)
{
    char path[600], body[1200];
    snprintf(body, sizeof body,
             "echo \"$*\" | sed 's|/[^ ]*\\.cubin|cubin|' >> %s/calls\n"
             "if [ $# -eq 4 ] && [ \"$1\" = -sass ] && [ \"$2\" = -fun ]; then\n"
             "  [ %d = 0 ] || { echo 'unknown option -fun' >&2; exit 1; }\n"
             "  exec cat \"$4\"\nfi\n"
             "[ $# -eq 2 ] && [ \"$1\" = -sass ] && [ -f \"$2\" ] || "
             "{ echo \"called as: $*\" >&2; exit 9; }\nexec cat \"$2\"",
             scratch, fun_fails);
    write_tool("cuobjdump", body, path, sizeof path);
    assert_int_equal(setenv("FLARE_DISASSEMBLER", path, 1), 0);
}

static void use_good_tool(void)
{
    use_tool(0);
}

/* scratch/calls, the stand-in's arguments one call a line. */
static const char *calls(void)
{
    static char text[2048];
    char path[400];
    snprintf(path, sizeof path, "%s/calls", scratch);
    FILE *file = fopen(path, "r");
    size_t got = file != NULL ? fread(text, 1, sizeof text - 1, file) : 0;
    text[got] = '\0';
    if (file != NULL)
        fclose(file);
    return text;
}

static int64_t session_int(const char *sql)
{
    char path[600];
    snprintf(path, sizeof path, "%s/session.db", session);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int64_t value = test_sql_int(db, sql);
    sqlite3_close(db);
    return value;
}

static void session_exec(const char *sql)
{
    char path[600];
    snprintf(path, sizeof path, "%s/session.db", session);
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    char *message = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &message) != SQLITE_OK)
        fail_msg("%s: %s", sql, message);
    sqlite3_close(db);
}

/* No .flare-disasm-* work folder is left in the session. */
static void expect_no_work_folder(void)
{
    DIR *dir = opendir(session);
    assert_non_null(dir);
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL)
        if (strncmp(entry->d_name, ".flare-disasm-", 14) == 0)
            fail_msg("%s/%s was left behind", session, entry->d_name);
    closedir(dir);
}

static void trace_marks(void)
{
    snprintf(session, sizeof session, "%s/session", scratch);
    int status = FLARE("trace", "-q", "-o", session, "--", MARKS_TARGET_PATH);
    if (status != 0)
        fail_msg("flare trace exited %d: %s", status, err_text);
}

static void expect_texts(void)
{
    assert_int_equal(session_int("SELECT count(*) FROM pc_instructions"), 2);
    assert_int_equal(session_int("SELECT count(*) FROM v_pc_instructions WHERE function = "
                                 "'marks_kernel' AND pc_offset = 65600 AND sass = '" TEXT_10040
                                 "'"),
                     1);
    assert_int_equal(session_int("SELECT count(*) FROM v_pc_instructions WHERE pc_offset = 65616 "
                                 "AND sass = '" TEXT_10050 "'"),
                     1);
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 0);
}

static void test_trace_gives_the_texts(void **state)
{
    (void)state;
    use_good_tool();
    trace_marks();
    expect_texts();
    /* Only the wanted function was asked for, once. */
    assert_string_equal(calls(), "-sass -fun marks_kernel cubin\n");
    /* The instruction with a line has none; the one the listing lacks has none. */
    assert_int_equal(session_int("SELECT count(*) FROM pc_instructions WHERE pc_offset IN "
                                 "(256, 65544)"),
                     0);
    /* Degraded: the instruction no listing line starts at has none. */
    assert_int_equal(session_int("SELECT count(*) FROM capabilities WHERE feature = 'sass_text' "
                                 "AND status = 'degraded' AND reason LIKE '2 of 3 sampled %'"),
                     1);
    assert_int_equal(FLARE("report", session), 0);
    expect_contains(out_text, "marks_kernel+0x10040 [" TEXT_10040 "]");
    expect_contains(out_text, "sass_text");
    assert_int_equal(FLARE("report", "--format", "json", session), 0);
    expect_contains(out_text, "\"sass\":\"" TEXT_10040 "\"");
}

static void test_no_disassembler_keeps_the_cubin_for_flare_disasm(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    expect_contains(err_text, "not disassembled");
    expect_contains(err_text, "flare disasm");
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 1);
    assert_int_equal(session_int("SELECT count(*) FROM pc_instructions"), 0);
    assert_int_equal(session_int("SELECT count(*) FROM capabilities WHERE feature = 'sass_text' "
                                 "AND status = 'unavailable'"),
                     1);
    assert_int_equal(FLARE("disasm", session), 1);
    expect_contains(err_text, "no disassembler");

    use_good_tool();
    assert_int_equal(FLARE("disasm", session), 0);
    expect_contains(out_text, "2 of 3 instructions given their SASS text");
    expect_texts();
    assert_int_equal(session_int("SELECT count(*) FROM capabilities WHERE feature = 'sass_text' "
                                 "AND status = 'degraded' AND reason LIKE '2 of 3 sampled %'"),
                     1);
    assert_int_equal(FLARE("disasm", session), 0);
    expect_contains(out_text, "no cubin left");
    expect_no_work_folder();
}

static void test_a_failing_disassembler_keeps_the_cubin(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    char path[600];
    write_tool("nvdisasm", "echo 'cannot read the cubin' >&2\nexit 3", path, sizeof path);
    assert_int_equal(setenv("FLARE_DISASSEMBLER", path, 1), 0);
    assert_int_equal(FLARE("disasm", session), 1);
    expect_contains(err_text, "cannot read the cubin");
    expect_contains(err_text, "3");
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 1);
    assert_int_equal(session_int("SELECT count(*) FROM pc_instructions"), 0);
    assert_int_equal(FLARE("disasm", "--bogus"), 2);
    assert_int_equal(FLARE("disasm", "--help"), 0);
    expect_contains(out_text, "usage: flare disasm");
}

static void test_a_refused_function_list_falls_back_to_the_whole_cubin(void **state)
{
    (void)state;
    use_tool(1);
    trace_marks();
    expect_texts();
    assert_string_equal(calls(), "-sass -fun marks_kernel cubin\n-sass cubin\n");
}

static void test_a_listing_without_the_wanted_instructions_keeps_the_cubin(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    char path[600];
    write_tool(
        "nvdisasm",
        "printf '.text._Z5otherv:\\n        /*0000*/   NOP ;\\n        /*0010*/   EXIT ;\\n'", path,
        sizeof path);
    assert_int_equal(setenv("FLARE_DISASSEMBLER", path, 1), 0);
    assert_int_equal(FLARE("disasm", session), 1);
    expect_contains(err_text, "none of the instructions wanted");
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 1);
    assert_int_equal(session_int("SELECT count(*) FROM pc_instructions"), 0);
    expect_no_work_folder();
}

static void test_the_pass_is_bounded_in_time(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    char path[600], body[600];
    snprintf(body, sizeof body, "echo \"$*\" >> %s/calls\nexec sleep 60", scratch);
    write_tool("cuobjdump", body, path, sizeof path);
    assert_int_equal(setenv("FLARE_DISASSEMBLER", path, 1), 0);
    assert_int_equal(setenv("FLARE_DISASM_SECONDS", "1", 1), 0);
    uint64_t began = test_now_ns();
    int status = FLARE("disasm", session);
    uint64_t took = test_now_ns() - began;
    unsetenv("FLARE_DISASM_SECONDS");
    assert_int_equal(status, 1);
    expect_contains(err_text, "timed out");
    assert_true(took < 30ull * 1000000000ull); /* a generous bound: 1 s asked, 60 s slept */
    /* No second run of the whole cubin after a timeout: one call. */
    const char *logged = calls();
    assert_true(logged[0] != '\0' && strchr(logged, '\n') == strrchr(logged, '\n'));
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 1);
    expect_no_work_folder();
    assert_int_equal(setenv("FLARE_DISASM_SECONDS", "0", 1), 0);
    assert_int_equal(FLARE("disasm", session), 1);
    unsetenv("FLARE_DISASM_SECONDS");
    expect_contains(err_text, "FLARE_DISASM_SECONDS=0 is not a number of seconds (1 to 3600)");
}

static void test_one_run_serves_every_process_of_a_cubin(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    /* A second process (a fork, a rank) that kept the same cubin. */
    session_exec("INSERT INTO processes(pid, parent_pid, start_ns, end_ns) SELECT pid + 1, pid, "
                 "start_ns, end_ns FROM processes;"
                 "INSERT INTO pc_code SELECT pid + 1, name_id, cubin_crc, symbol FROM pc_code;"
                 "INSERT INTO pc_cubins SELECT pid + 1, cubin_crc, bytes FROM pc_cubins;"
                 "INSERT INTO sass_metrics SELECT pid + 1, window_id, device, name_id, "
                 "pc_offset, metric, value FROM sass_metrics;");
    use_good_tool();
    assert_int_equal(FLARE("disasm", session), 0);
    assert_string_equal(calls(), "-sass -fun marks_kernel cubin\n");
    assert_int_equal(session_int("SELECT count(*) FROM pc_instructions"), 4);
    assert_int_equal(
        session_int("SELECT count(DISTINCT pid) FROM v_pc_instructions WHERE sass = '" TEXT_10040
                    "'"),
        2);
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 0);
}

static void test_a_running_session_is_refused(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    char sql[200];
    snprintf(sql, sizeof sql, "INSERT INTO processes(pid, parent_pid, start_ns) VALUES (%d, 1, 0)",
             (int)getpid());
    session_exec(sql);
    use_good_tool();
    assert_int_equal(FLARE("disasm", session), 1);
    expect_contains(err_text, "is still running");
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 1);
}

/* Ctrl-C in the middle of a disassembly: the disassembler killed, the
 * work folder gone, the cubin still kept. */
static void test_an_interrupted_pass_leaves_nothing_behind(void **state)
{
    (void)state;
    assert_int_equal(setenv("FLARE_DISASSEMBLER", "", 1), 0);
    trace_marks();
    char path[600], body[1200], started[500], tool_pid[500];
    snprintf(started, sizeof started, "%s/started", scratch);
    snprintf(tool_pid, sizeof tool_pid, "%s/tool.pid", scratch);
    snprintf(body, sizeof body, "echo $$ > %s\ntouch %s\nexec sleep 60", tool_pid, started);
    write_tool("cuobjdump", body, path, sizeof path);
    assert_int_equal(setenv("FLARE_DISASSEMBLER", path, 1), 0);
    char flare_path[1200];
    snprintf(flare_path, sizeof flare_path, "%s/flare", bin_dir);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        execl(flare_path, flare_path, "disasm", session, (char *)NULL);
        _exit(127);
    }
    uint64_t deadline = test_now_ns() + 60ull * 1000000000ull;
    while (access(started, F_OK) != 0 && test_now_ns() < deadline)
        test_pause_ms(10);
    assert_int_equal(access(started, F_OK), 0);
    assert_int_equal(kill(child, SIGINT), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT);
    expect_no_work_folder();
    assert_int_equal(session_int("SELECT count(*) FROM pc_cubins"), 1);
    /* The stand-in is gone (killed with its group), within a generous bound. */
    FILE *file = fopen(tool_pid, "r");
    assert_non_null(file);
    int sleeper = 0;
    assert_int_equal(fscanf(file, "%d", &sleeper), 1);
    fclose(file);
    while (kill(sleeper, 0) == 0 && test_now_ns() < deadline)
        test_pause_ms(10);
    assert_int_not_equal(kill(sleeper, 0), 0);
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof bin_dir) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof scratch, "disasm-cli");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("FLARE_DISASSEMBLER");
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_trace_gives_the_texts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_disassembler_keeps_the_cubin_for_flare_disasm,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_failing_disassembler_keeps_the_cubin, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_refused_function_list_falls_back_to_the_whole_cubin,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_a_listing_without_the_wanted_instructions_keeps_the_cubin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_the_pass_is_bounded_in_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_run_serves_every_process_of_a_cubin, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_a_running_session_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_an_interrupted_pass_leaves_nothing_behind, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
