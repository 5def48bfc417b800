/*
 * test_cli.c: the flare command as a user meets it: usage errors and their
 * exit codes, trace's exit-status pass-through and signal forwarding, the
 * launcher's "nothing recorded" warning, and report on good and bad input.
 * Runs the built binaries (FLARE_TEST_BIN_DIR) in child processes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "test_util.h"

static char bin_dir[1024];
static char scratch[256];
static char out_text[65536];
static char err_text[65536];

/* Runs bin_dir/program with arguments (NULL-terminated) in scratch; captures
 * its output; returns the exit code as a shell reports it. */
static int run(const char *program, const char *const *arguments)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s", bin_dir, program);
    int status = cli_run_program(path, 0, arguments, scratch, out_text, sizeof(out_text), err_text,
                                 sizeof(err_text));
    assert_true(status >= 0);
    return status;
}

#define RUN(program, ...) run(program, (const char *const[]){__VA_ARGS__, NULL})
#define RUN0(program)     run(program, NULL)

static void expect_usage_error(int code, const char *word)
{
    assert_int_equal(code, 2);
    if (strstr(err_text, word) == NULL)
        fail_msg("stderr does not name '%s': %s", word, err_text);
}

static void test_usage_errors(void **state)
{
    (void)state;
    assert_int_equal(RUN0("flare"), 2);
    expect_usage_error(RUN("flare", "bogus"), "bogus");
    expect_usage_error(RUN("flare", "--bogus"), "--bogus");
    expect_usage_error(RUN("flare", "trace"), "--");
    expect_usage_error(RUN("flare", "trace", "true"), "'true'");
    expect_usage_error(RUN("flare", "trace", "--bogus", "--", "true"), "--bogus");
    expect_usage_error(RUN("flare", "trace", "-o"), "-o");
    expect_usage_error(RUN("flare", "trace", "--"), "command");
    expect_usage_error(RUN("flare", "trace", "--flush-ms", "0", "--", "true"), "--flush-ms 0");
    expect_usage_error(RUN("flare", "trace", "--flush-ms", "300", "--", "true"), "300");
    expect_usage_error(RUN("flare", "report", "--top", "0"), "--top 0");
    expect_usage_error(RUN("flare", "report", "--wrong"), "--wrong");
    expect_usage_error(RUN("flare", "report", "a", "b"), "'b'");
}

static void test_help_tells_the_truth(void **state)
{
    (void)state;
    assert_int_equal(RUN("flare", "--help"), 0);
    assert_non_null(strstr(out_text, "trace"));
    assert_non_null(strstr(out_text, "report"));
    assert_int_equal(RUN("flare", "trace", "--help"), 0);
    assert_non_null(strstr(out_text, "-o, --output DIR"));
    assert_non_null(strstr(out_text, "--flush-ms"));
    assert_int_equal(RUN("flare", "report", "--help"), 0);
    assert_non_null(strstr(out_text, "--top"));
    assert_int_equal(RUN("flare", "--version"), 0);
    assert_non_null(strstr(out_text, "flare 0."));
}

static void test_trace_passes_exit_status_and_warns(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/exit7", scratch);
    assert_int_equal(RUN("flare", "trace", "-o", dir, "--", "sh", "-c", "exit 7"), 7);
    /* sh does not use libflare: the launcher must say nothing was recorded. */
    assert_non_null(strstr(err_text, "WARNING: no process"));
    /* The same directory again is refused before anything runs. */
    char marker[512];
    snprintf(marker, sizeof(marker), "%s/marker", scratch);
    assert_int_equal(RUN("flare", "trace", "-o", dir, "--", "touch", marker), 1);
    assert_non_null(strstr(err_text, "already holds a session"));
    assert_int_equal(access(marker, F_OK), -1);
    /* The report of a session where nothing was recorded still works. */
    assert_int_equal(RUN("flare", "report", dir), 0);
    assert_non_null(strstr(out_text, "exit       7"));
    assert_non_null(strstr(out_text, "No process started a flare session"));

    assert_int_equal(RUN("flare", "trace", "--", "flare-no-such-command-here"), 127);
    assert_non_null(strstr(err_text, "flare-no-such-command-here"));
    assert_int_equal(RUN("flare", "trace", "--", "sh", "-c", "kill -TERM $$"), 128 + SIGTERM);
}

static void test_unwritable_output_fails_before_running(void **state)
{
    (void)state;
    char marker[512];
    snprintf(marker, sizeof(marker), "%s/marker2", scratch);
    assert_int_equal(RUN("flare", "trace", "-o", "/proc/flare-nope/x", "--", "touch", marker), 1);
    assert_non_null(strstr(err_text, "/proc/flare-nope"));
    assert_int_equal(access(marker, F_OK), -1);
    if (geteuid() != 0) {
        char locked[512];
        snprintf(locked, sizeof(locked), "%s/locked", scratch);
        mkdir(locked, 0500);
        assert_int_equal(RUN("flare", "trace", "-o", locked, "--", "touch", marker), 1);
        assert_int_equal(access(marker, F_OK), -1);
    }
}

static void test_trace_demo_and_report(void **state)
{
    (void)state;
    char dir[512], demo[1200];
    snprintf(dir, sizeof(dir), "%s/demo", scratch);
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin_dir);
    assert_int_equal(RUN("flare", "trace", "-o", dir, "--", demo, "5"), 0);
    assert_non_null(strstr(err_text, "session saved in"));
    assert_int_equal(RUN("flare", "report", dir), 0);
    assert_non_null(strstr(out_text, "saxpy"));
    assert_non_null(strstr(out_text, "stencil_3pt"));
    assert_non_null(strstr(out_text, "reduce_sum"));
    assert_non_null(strstr(out_text, "step"));
    assert_non_null(strstr(out_text, "host to device"));
    assert_non_null(strstr(out_text, "none: every event was recorded"));
    assert_non_null(strstr(out_text, "exit       0"));
    /* 5 steps x 2 devices x 3 kernels */
    assert_non_null(strstr(out_text, "30 kernels"));
    /* The default directory: the newest session under ./flare-out. */
    assert_int_equal(RUN("flare", "trace", "-q", "--", demo, "2"), 0);
    assert_int_equal(RUN("flare", "report"), 0);
    assert_non_null(strstr(out_text, "12 kernels"));
}

/* Whether process pid has a child running program (its comm). */
static int has_child_running(pid_t pid, const char *program)
{
    char path[96], children[512];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL)
        return 0;
    size_t length = fread(children, 1, sizeof(children) - 1, file);
    fclose(file);
    children[length] = '\0';
    char *cursor = children;
    for (;;) {
        char *end;
        long child = strtol(cursor, &end, 10);
        if (end == cursor)
            return 0;
        cursor = end;
        char comm[64] = "";
        snprintf(path, sizeof(path), "/proc/%ld/comm", child);
        file = fopen(path, "r");
        if (file == NULL)
            continue;
        int matched = fgets(comm, sizeof(comm), file) != NULL &&
                      strncmp(comm, program, strlen(program)) == 0 && comm[strlen(program)] == '\n';
        fclose(file);
        if (matched)
            return 1;
    }
}

/* flare trace passes SIGTERM on to its program and exits as it did. The
 * signal is sent once the program runs (flare watches the signals from
 * before its fork), however long the machine takes to get there. */
static void test_sigterm_is_forwarded(void **state)
{
    (void)state;
    char path[1200];
    snprintf(path, sizeof(path), "%s/flare", bin_dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        if (chdir(scratch) != 0)
            _exit(99);
        execl(path, path, "trace", "-q", "--", "sleep", "600", (char *)NULL);
        _exit(98);
    }
    TEST_WAIT_UNTIL(has_child_running(pid, "sleep"));
    kill(pid, SIGTERM);
    int status;
    time_t started = time(NULL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    /* Not forwarded, flare would wait out the ten-minute sleep. */
    assert_true(time(NULL) - started < TEST_WAIT_SECONDS);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 128 + SIGTERM);
}

static void test_report_on_bad_input(void **state)
{
    (void)state;
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s/missing", scratch);
    assert_int_equal(RUN("flare", "report", dir), 1);
    assert_non_null(strstr(err_text, dir));

    snprintf(dir, sizeof(dir), "%s/empty", scratch);
    mkdir(dir, 0755);
    assert_int_equal(RUN("flare", "report", dir), 1);
    assert_non_null(strstr(err_text, "no flare session"));

    snprintf(dir, sizeof(dir), "%s/zero", scratch);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/session.db", dir);
    close(open(path, O_WRONLY | O_CREAT, 0644));
    assert_int_equal(RUN("flare", "report", dir), 1);
    assert_non_null(strstr(err_text, "session.db"));

    snprintf(dir, sizeof(dir), "%s/garbage", scratch);
    mkdir(dir, 0755);
    snprintf(path, sizeof(path), "%s/session.db", dir);
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    char junk[8192];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)(i * 131 + 7);
    assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(fd);
    assert_int_equal(RUN("flare", "report", dir), 1);
    assert_non_null(strstr(err_text, "session.db"));
}

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "cli");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_remove_dir(scratch);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_help_tells_the_truth),
        cmocka_unit_test(test_trace_passes_exit_status_and_warns),
        cmocka_unit_test(test_unwritable_output_fails_before_running),
        cmocka_unit_test(test_trace_demo_and_report),
        cmocka_unit_test(test_sigterm_is_forwarded),
        cmocka_unit_test(test_report_on_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
