/*
 * test_window_open.c: `flare window open DIR --for DURATION [--at TIME]`,
 * deep-profiling windows asked for from outside a running session (issue
 * 24, item 5; docs/cli.md, "flare window").
 *
 * Every bad input is answered precisely (exit 2 for usage, 1 for the
 * session's state) and writes nothing; the request file's format is read
 * strictly; a process's watch on DIR/control skips malformed requests (one
 * log line each, however often the directory is read again), links and
 * requests older than its session; a real `flare trace` of flare-demo gets
 * its window on request, lasting what was asked; and four separate traces
 * (of window_target, which runs until told to stop, whatever the machine's
 * speed) given one --at open their windows together, within a generous
 * bound (a busy 2-core CI machine; the real spread is measured by
 * bench/bench_window_sync.c). Runs the built flare and flare-demo
 * (FLARE_TEST_BIN_DIR) in child processes; never sleeps to synchronise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_flare.h"
#include "core/clock.h"
#include "backend/sim/sim_pm.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_control.h"
#include "deepwin/deepwin_session.h"
#include "flare/flare.h"
#include "test_util.h"

/* flare-demo steps for a trace that outlives a window asked for at once by
 * seconds (about 1 ms a step on the simulated device, on our CI machine). */
#define DEMO_STEPS "3000"
#ifndef WINDOW_TARGET_PATH
#error "WINDOW_TARGET_PATH names window_target (tests/cli/CMakeLists.txt)"
#endif
/* How far apart windows asked for one --at may open, and how late, on a
 * busy CI machine. The target on one quiet host is 5 ms (the bench). */
#define SYNC_BOUND_NS 250000000ll
/* How late a window asked for "now" may open: each process sees the request
 * at its next beat (5 ms), later while its collector waits for a commit on
 * a busy machine. */
#define NOTICE_BOUND_NS 2000000000ll

/* Traces started and not yet waited for: a failing test's are stopped. */
static pid_t started[8];
static int started_count;

static int setup(void **state)
{
    (void)state;
    if (cli_test_environment(bin_dir, sizeof(bin_dir)) != 0)
        return -1;
    test_make_temp_dir(scratch, sizeof(scratch), "window-open");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < started_count; i++) {
        if (started[i] > 0) {
            kill(started[i], SIGTERM); /* forwarded to its command */
            waitpid(started[i], NULL, 0);
        }
    }
    started_count = 0;
    if (flare_is_active())
        flare_shutdown();
    unsetenv("FLARE_SESSION_DIR");
    test_remove_dir(scratch);
    return 0;
}

static void path_in_scratch(char *path, size_t size, const char *name)
{
    snprintf(path, size, "%s/%s", scratch, name);
}

static int exists(const char *name)
{
    char path[600];
    struct stat info;
    path_in_scratch(path, sizeof(path), name);
    return lstat(path, &info) == 0;
}

/* Starts a session of this test process in scratch/name. */
static void start_own_session(const char *name)
{
    char dir[600];
    path_in_scratch(dir, sizeof(dir), name);
    assert_int_equal(mkdir(dir, 0755), 0);
    flare_options options;
    flare_options_init(&options);
    options.session_dir = dir;
    options.flush_interval_ms = 5;
    assert_int_equal(flare_init(&options), FLARE_OK);
}

/* ---- sessions read back ---- */

static sqlite3 *open_database(const char *name)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s/session.db", scratch, name);
    sqlite3 *db = NULL;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    sqlite3_busy_timeout(db, 5000);
    return db;
}

/* The first column of the first row of sql on scratch/name's database, or
 * -1 when it cannot be read (yet). */
static long long query_number(const char *name, const char *sql)
{
    sqlite3 *db = open_database(name);
    if (db == NULL)
        return -1;
    sqlite3_stmt *statement = NULL;
    long long value = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW)
        value = sqlite3_column_int64(statement, 0);
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

static long long running_processes(const char *name)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s/session.db", scratch, name);
    if (access(path, F_OK) != 0)
        return 0;
    return query_number(name, "SELECT COUNT(*) FROM processes WHERE end_ns IS NULL");
}

/* ---- traces in the background ---- */

/* Starts `flare trace -q -o name -- flare-demo DEMO_STEPS` in scratch, or
 * with until_stopped, `... -- window_target scratch/stop`, which runs until
 * that file exists. */
static pid_t start_trace(const char *name, int until_stopped)
{
    char flare[1100], demo[1100], log[700], stop[700];
    snprintf(flare, sizeof(flare), "%s/flare", bin_dir);
    snprintf(demo, sizeof(demo), "%s/flare-demo", bin_dir);
    snprintf(log, sizeof(log), "%s/%s.out", scratch, name);
    snprintf(stop, sizeof(stop), "%s/stop", scratch);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        if (chdir(scratch) != 0)
            _exit(99);
        if (until_stopped)
            execl(flare, "flare", "trace", "-q", "-o", name, "--", WINDOW_TARGET_PATH, stop,
                  (char *)NULL);
        else
            execl(flare, "flare", "trace", "-q", "-o", name, "--", demo, DEMO_STEPS, (char *)NULL);
        _exit(98);
    }
    if (started_count < (int)(sizeof(started) / sizeof(started[0])))
        started[started_count++] = pid;
    return pid;
}

static void wait_for_trace(pid_t pid, const char *name)
{
    int status;
    while (waitpid(pid, &status, 0) < 0) {
    }
    for (int i = 0; i < started_count; i++)
        if (started[i] == pid)
            started[i] = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char path[700];
        snprintf(path, sizeof(path), "%s/%s.out", scratch, name);
        cli_read_file(path, out_text, sizeof(out_text));
        fail_msg("flare trace of %s ended with status %d:\n%s", name, status, out_text);
    }
}

/* One window of a finished session, on the wall clock. */
typedef struct window_seen {
    int count;
    long long for_ns;
    int64_t opened_unix_ns;
    long long length_ns;
    char label[128];
    char kind[32];
    char close_reason[32];
} window_seen;

static void read_windows(const char *name, window_seen *seen)
{
    memset(seen, 0, sizeof(*seen));
    sqlite3 *db = open_database(name);
    assert_non_null(db);
    sqlite3_stmt *statement = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(db,
                           "SELECT w.max_duration_ns, s.start_unix_ns + (w.opened_ns - s.start_ns),"
                           " w.closed_ns - w.opened_ns, w.label, w.token_kind, w.close_reason"
                           " FROM windows w, session s ORDER BY w.pid, w.id",
                           -1, &statement, NULL),
        SQLITE_OK);
    while (sqlite3_step(statement) == SQLITE_ROW) {
        if (seen->count++ > 0)
            continue;
        seen->for_ns = sqlite3_column_int64(statement, 0);
        seen->opened_unix_ns = sqlite3_column_int64(statement, 1);
        seen->length_ns = sqlite3_column_int64(statement, 2);
        snprintf(seen->label, sizeof(seen->label), "%s",
                 (const char *)sqlite3_column_text(statement, 3));
        snprintf(seen->kind, sizeof(seen->kind), "%s",
                 (const char *)sqlite3_column_text(statement, 4));
        snprintf(seen->close_reason, sizeof(seen->close_reason), "%s",
                 (const char *)sqlite3_column_text(statement, 5));
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
}

/* The at_unix_ns of the one request in scratch/name/control. */
static int64_t request_time(const char *name)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/%s/control", scratch, name);
    int control_fd = open(path, O_RDONLY | O_DIRECTORY);
    assert_true(control_fd >= 0);
    DIR *listing = fdopendir(control_fd);
    assert_non_null(listing);
    struct dirent *item;
    int64_t at = 0;
    int requests = 0;
    while ((item = readdir(listing)) != NULL) {
        int64_t made, pid;
        if (deepwin_control_parse_name(item->d_name, &made, &pid) != 0)
            continue;
        char text[DEEPWIN_CONTROL_REQUEST_MAX + 1], why[128];
        size_t length;
        deepwin_control_request request;
        assert_int_equal(deepwin_control_read(control_fd, item->d_name, text, sizeof(text), &length,
                                              why, sizeof(why)),
                         FLARE_OK);
        assert_int_equal(deepwin_control_parse_request(text, length, &request, why, sizeof(why)),
                         FLARE_OK);
        at = request.at_unix_ns;
        requests++;
    }
    closedir(listing);
    assert_int_equal(requests, 1);
    return at;
}

/* ---- the command line ---- */

static void test_help_tells_the_truth(void **state)
{
    (void)state;
    assert_int_equal(FLARE("window", "--help"), 0);
    expect_contains(out_text, "usage: flare window open DIR --for DURATION [--at TIME]");
    expect_contains(out_text, "at most 10min");
    expect_contains(out_text, "+DURATION from now, e.g. +2s; at most 24h ahead");
    expect_contains(out_text, "up to 10 s after TIME");
    expect_contains(out_text, "Nothing is written unless the status is 0.");
    assert_int_equal(FLARE("window", "open", "--help"), 0);
    expect_contains(out_text, "usage: flare window open DIR");
    assert_int_equal(FLARE("--help"), 0);
    expect_contains(out_text, "  window   open a deep-profiling window in every process");
}

/* One usage error: exit 2, the message, the hint, and no control directory
 * in the running session "live". */
static void expect_usage(const char *const *arguments, const char *message)
{
    assert_int_equal(run_flare(arguments), 2);
    expect_contains(err_text, message);
    expect_contains(err_text, "Run 'flare window");
    assert_string_equal(out_text, "");
    assert_false(exists("live/control"));
}

#define USAGE(message, ...) expect_usage((const char *const[]){__VA_ARGS__, NULL}, message)

static void test_usage_errors_write_nothing(void **state)
{
    (void)state;
    start_own_session("live");
    USAGE("flare window: missing the action: flare window open DIR --for DURATION", "window");
    USAGE("flare window: unknown action 'close' (the one action is open", "window", "close");
    USAGE("flare window: unknown option '--bogus'", "window", "--bogus");
    USAGE("flare window open: missing --for DURATION: how long each window stays open", "window",
          "open", "live");
    USAGE("flare window open: missing the session directory", "window", "open", "--for", "1s");
    USAGE("flare window open: unknown option '--bogus'", "window", "open", "live", "--for", "1s",
          "--bogus");
    USAGE("option '--for' needs a duration, e.g. --for 300ms", "window", "open", "live", "--for");
    USAGE("option '--for' given twice", "window", "open", "live", "--for", "1s", "--for", "2s");
    USAGE("unexpected 'extra': one session directory only (DIR is 'live')", "window", "open",
          "live", "extra", "--for", "1s");
    USAGE("'--for 2': '2' needs a unit: write 2s", "window", "open", "live", "--for", "2");
    USAGE("'--for 0s': '0s' must be more than zero", "window", "open", "live", "--for", "0s");
    USAGE("'--for 11min': a window lasts at most 600 s", "window", "open", "live", "--for",
          "11min");
    USAGE("option '--at' needs a time, e.g. --at 2026-12-02T04:30:00.250Z or --at +2s", "window",
          "open", "live", "--for", "1s", "--at");
    USAGE("'--at yesterday': not a time: write an RFC 3339 time such as 2026-12-02T04:30:00.250Z",
          "window", "open", "live", "--for", "1s", "--at", "yesterday");
    USAGE("'--at 2030-01-01T04:30:00': no time zone: add Z for UTC (2030-01-01T04:30:00Z) or an "
          "offset such as +01:00",
          "window", "open", "live", "--for", "1s", "--at", "2030-01-01T04:30:00");
    USAGE("'--at 2030-13-01T00:00:00Z': month 13 does not exist", "window", "open", "live", "--for",
          "1s", "--at", "2030-13-01T00:00:00Z");
    USAGE("'--at 2031-02-29T00:00:00Z': day 29 does not exist in 2031-02", "window", "open", "live",
          "--for", "1s", "--at", "2031-02-29T00:00:00Z");
    USAGE("'--at 2030-01-01T24:00:00Z': hours run 00..23", "window", "open", "live", "--for", "1s",
          "--at", "2030-01-01T24:00:00Z");
    USAGE("second 60: a leap second cannot be asked for", "window", "open", "live", "--for", "1s",
          "--at", "2030-06-30T23:59:60Z");
    USAGE("at most 9 digits after the decimal point (nanoseconds)", "window", "open", "live",
          "--for", "1s", "--at", "2030-01-01T00:00:00.1234567890Z");
    USAGE("a decimal point needs digits after it", "window", "open", "live", "--for", "1s", "--at",
          "2030-01-01T00:00:00.Z");
    USAGE("the offset +24:00 is out of range", "window", "open", "live", "--for", "1s", "--at",
          "2030-01-01T00:00:00+24:00");
    USAGE("the time zone must be Z or an offset such as +01:00, and end the time", "window", "open",
          "live", "--for", "1s", "--at", "2030-01-01T00:00:00Z+");
    USAGE("'--at 2020-01-01T00:00:00Z' is ", "window", "open", "live", "--for", "1s", "--at",
          "2020-01-01T00:00:00Z");
    expect_contains(err_text, " s in the past (now: 20");
    USAGE("'--at 2099-01-01T00:00:00Z' is more than 24h from now", "window", "open", "live",
          "--for", "1s", "--at", "2099-01-01T00:00:00Z");
    USAGE("'--at +2x': unknown unit 'x' in '2x'", "window", "open", "live", "--for", "1s", "--at",
          "+2x");
    USAGE("'--at +25h': '25h' is more than the maximum, 24h", "window", "open", "live", "--for",
          "1s", "--at", "+25h");

    /* The same session takes a good request; -q prints nothing. */
    assert_int_equal(FLARE("window", "open", "live", "--for", "10ms", "-q", "--at", "+1s"), 0);
    assert_string_equal(out_text, "");
    assert_string_equal(err_text, "");
    struct stat info;
    char path[600];
    path_in_scratch(path, sizeof(path), "live/control");
    assert_int_equal(lstat(path, &info), 0);
    assert_true(S_ISDIR(info.st_mode));
    assert_int_equal(info.st_mode & 077, 0);
}

/* A time in the past says by how much, to the millisecond. */
static void test_past_time_says_by_how_much(void **state)
{
    (void)state;
    start_own_session("live");
    char when[DEEPWIN_CONTROL_TIME_MAX];
    /* Two minutes and a quarter ago: 135.00 s and a little. */
    deepwin_control_format_time(core_unix_now_ns() - 135000000000ll, 0, when, sizeof(when));
    assert_int_equal(FLARE("window", "open", "live", "--for", "1s", "--at", when), 2);
    const char *amount = strstr(err_text, "' is ");
    double seconds = 0;
    if (amount == NULL || sscanf(amount, "' is %lf s in the past (now: 20", &seconds) != 1 ||
        seconds < 135.0 || seconds > 195.0) /* the command's start-up counts too */
        fail_msg("not 135 s and a little in the past:\n%s", err_text);
    expect_contains(err_text, " s in the past (now: 20");
    assert_false(exists("live/control"));
}

/* The session's state: exit 1, nothing written. */
static void test_state_errors_write_nothing(void **state)
{
    (void)state;
    assert_int_equal(FLARE("window", "open", "nothere", "--for", "1s"), 1);
    expect_contains(err_text, "flare window open: nothere: No such file or directory");
    char path[600];
    path_in_scratch(path, sizeof(path), "plain");
    int fd = open(path, O_WRONLY | O_CREAT, 0644);
    close(fd);
    assert_int_equal(FLARE("window", "open", "plain", "--for", "1s"), 1);
    expect_contains(err_text, "flare window open: plain is not a directory");
    path_in_scratch(path, sizeof(path), "empty");
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(FLARE("window", "open", "empty", "--for", "1s"), 1);
    expect_contains(err_text, "flare window open: empty holds no flare session (no session.db "
                              "in it)");
    assert_false(exists("empty/control"));

    /* A session that ended: when, and nothing written. */
    start_own_session("ended");
    assert_int_equal(flare_shutdown(), FLARE_OK);
    assert_int_equal(FLARE("window", "open", "ended", "--for", "1s"), 1);
    expect_contains(err_text, "flare window open: the session in ended ended at 20");
    expect_contains(err_text, "Z (");
    expect_contains(err_text, " ago): no process is left to open a window");
    assert_false(exists("ended/control"));

    /* A link planted where the control directory goes is never followed. */
    start_own_session("live");
    char target[600];
    path_in_scratch(target, sizeof(target), "elsewhere");
    assert_int_equal(mkdir(target, 0755), 0);
    path_in_scratch(path, sizeof(path), "live/control");
    assert_int_equal(symlink(target, path), 0);
    assert_int_equal(FLARE("window", "open", "live", "--for", "1s"), 1);
    expect_contains(err_text, "live/control: a link or a file stands there, not a directory: "
                              "refusing to write through it");
    DIR *listing = opendir(target);
    int entries = 0;
    while (readdir(listing) != NULL)
        entries++;
    closedir(listing);
    assert_int_equal(entries, 2); /* . and .. */
}

/* ---- the request file ---- */

static int parse(const char *text, char *why, size_t size)
{
    deepwin_control_request request = {0};
    return deepwin_control_parse_request(text, strlen(text), &request, why, size);
}

static void expect_refused(const char *text, const char *reason)
{
    char why[256];
    assert_int_equal(parse(text, why, sizeof(why)), FLARE_ERR_INVALID_ARGUMENT);
    expect_contains(why, reason);
}

static void test_request_format(void **state)
{
    (void)state;
    deepwin_control_request written = {.requested_unix_ns = 1796185798000000000ll,
                                       .requested_by = 4242,
                                       .at_unix_ns = 1796185800250000000ll,
                                       .for_ns = 300000000ull};
    char text[256], name[DEEPWIN_CONTROL_NAME_MAX], why[256];
    int length = deepwin_control_format_request(&written, text, sizeof(text));
    assert_string_equal(text, "version=1\nat_unix_ns=1796185800250000000\nfor_ns=300000000\n"
                              "requested_by=4242\n");
    deepwin_control_request read = {0};
    assert_int_equal(deepwin_control_parse_request(text, (size_t)length, &read, why, sizeof(why)),
                     FLARE_OK);
    assert_int_equal(read.at_unix_ns, written.at_unix_ns);
    assert_int_equal(read.for_ns, written.for_ns);
    assert_int_equal(read.requested_by, 4242);
    deepwin_control_format_name(&written, name, sizeof(name));
    assert_string_equal(name, "window-1796185798000000000-4242.req");
    int64_t made, pid;
    assert_int_equal(deepwin_control_parse_name(name, &made, &pid), 0);
    assert_int_equal(made, written.requested_unix_ns);
    assert_int_equal(pid, 4242);
    assert_int_equal(deepwin_control_parse_name(".window-1-2.tmp", &made, &pid), -1);
    assert_int_equal(deepwin_control_parse_name("window-01-2.req", &made, &pid), -1);
    assert_int_equal(deepwin_control_parse_name("window-1-0.req", &made, &pid), -1);
    assert_int_equal(deepwin_control_parse_name("window-1-2.req~", &made, &pid), -1);
    assert_int_equal(deepwin_control_parse_name("window--2.req", &made, &pid), -1);

    /* A later version's keys are skipped; the last newline is optional. */
    assert_int_equal(
        parse("version=1\nlabel=x\n\nat_unix_ns=5\nfor_ns=1\nrequested_by=7", why, sizeof(why)),
        FLARE_OK);
    expect_refused("version=2\nat_unix_ns=5\nfor_ns=1\nrequested_by=7\n",
                   "line 1: version=2: expected 1");
    expect_refused("version=1\nat_unix_ns=5\nfor_ns=0\nrequested_by=7\n",
                   "line 3: for_ns=0: expected 1..600000000000");
    expect_refused("version=1\nat_unix_ns=5\nfor_ns=600000000001\nrequested_by=7\n",
                   "for_ns=600000000001: expected");
    expect_refused("version=1\nat_unix_ns=-5\nfor_ns=1\nrequested_by=7\n",
                   "line 2: at_unix_ns=-5: expected Unix nanoseconds");
    expect_refused("version=1\nat_unix_ns=5\nat_unix_ns=6\nfor_ns=1\nrequested_by=7\n",
                   "line 3: at_unix_ns given twice");
    expect_refused("version=1\nfor_ns=1\nrequested_by=7\n", "no at_unix_ns line");
    expect_refused("garbage\n", "line 1: 'garbage' is not key=value");
    expect_refused("version=1\r\nat_unix_ns=5\nfor_ns=1\nrequested_by=7\n",
                   "line 1 holds a NUL or a carriage return");
    expect_refused("version=1\nat_unix_ns=5 \nfor_ns=1\nrequested_by=7\n", "line 2");
    char long_text[DEEPWIN_CONTROL_REQUEST_MAX + 2];
    memset(long_text, 'a', sizeof(long_text) - 1);
    long_text[sizeof(long_text) - 1] = '\0';
    expect_refused(long_text, "a request is at most 1024");
}

/* ---- a process's watch, in this process ---- */

/* Writes text as a request file name in dir/control (made beforehand),
 * whole at once, as a writer must: written aside, then renamed. */
static void plant_request(const char *dir, const char *name, const char *text)
{
    char path[900], aside[900];
    snprintf(path, sizeof(path), "%s/control/%s", dir, name);
    snprintf(aside, sizeof(aside), "%s/control/.%s.tmp", dir, name);
    int fd = open(aside, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    assert_int_equal(rename(aside, path), 0);
}

/* Log lines of this process's session in scratch/name naming part. */
static long long log_lines_naming(const char *name, const char *part)
{
    char sql[600];
    snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM log WHERE message LIKE '%%%s%%'", part);
    return query_number(name, sql);
}

static void test_watch_skips_bad_and_old_requests(void **state)
{
    (void)state;
    char dir[600], name[DEEPWIN_CONTROL_NAME_MAX], error[512];
    path_in_scratch(dir, sizeof(dir), "watched");
    assert_int_equal(mkdir(dir, 0755), 0);
    /* Made before the session: not for it. */
    deepwin_control_request old = {.requested_unix_ns = core_unix_now_ns() - 1000000000ll,
                                   .requested_by = 4242,
                                   .at_unix_ns = core_unix_now_ns() + 300000000ll,
                                   .for_ns = 1000000};
    assert_int_equal(deepwin_control_write(dir, &old, name, sizeof(name), error, sizeof(error)),
                     FLARE_OK);
    char old_name[DEEPWIN_CONTROL_NAME_MAX];
    snprintf(old_name, sizeof(old_name), "%s", name);
    setenv("FLARE_SESSION_DIR", dir, 1); /* as flare trace sets it */
    flare_options options;
    flare_options_init(&options);
    options.flush_interval_ms = 5;
    assert_int_equal(flare_init(&options), FLARE_OK);

    /* A malformed one, a link, and a good one, in that order of names. */
    int64_t now = core_unix_now_ns();
    char bad[64], link_name[64], target[900], link_path[900];
    snprintf(bad, sizeof(bad), "window-%lld-1.req", (long long)now);
    snprintf(link_name, sizeof(link_name), "window-%lld-2.req", (long long)now);
    plant_request(dir, bad, "version=1\nat_unix_ns=1\nfor_ns=0\nrequested_by=1\n");
    path_in_scratch(target, sizeof(target), "target.req");
    int fd = open(target, O_WRONLY | O_CREAT, 0644);
    close(fd);
    snprintf(link_path, sizeof(link_path), "%s/control/%s", dir, link_name);
    assert_int_equal(symlink(target, link_path), 0);
    deepwin_control_request good = {.requested_unix_ns = now + 1,
                                    .requested_by = (int64_t)getpid(),
                                    .at_unix_ns = now + 100000000ll,
                                    .for_ns = 30000000ull};
    assert_int_equal(deepwin_control_write(dir, &good, name, sizeof(name), error, sizeof(error)),
                     FLARE_OK);

    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    TEST_WAIT_UNTIL(deepwin_opened_count(coordinator) >= 1);
    TEST_WAIT_UNTIL(deepwin_current_state(coordinator) == DEEPWIN_IDLE);
    /* Past a rescan of the directory (once a second): still one line each. */
    uint64_t until = core_now_ns() + 1500000000ull;
    while (core_now_ns() < until)
        test_pause_ms(50);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_SESSION_DIR");

    window_seen seen;
    read_windows("watched", &seen);
    assert_int_equal(seen.count, 1);
    assert_string_equal(seen.kind, "scheduled");
    expect_contains(seen.label, "flare window open ");
    assert_int_equal(seen.for_ns, 30000000);
    assert_string_equal(seen.close_reason, "duration");
    assert_true(seen.opened_unix_ns >= good.at_unix_ns - 1000000);
    char part[200];
    snprintf(part, sizeof(part), "%s ignored: line 3: for_ns=0", bad);
    assert_int_equal(log_lines_naming("watched", part), 1);
    snprintf(part, sizeof(part), "%s ignored: cannot open it: it is a link", link_name);
    assert_int_equal(log_lines_naming("watched", part), 1);
    assert_int_equal(log_lines_naming("watched", old_name), 0);
}

/* An engine that only counts what it is asked to prepare: the window of
 * this test is never due. */
static atomic_int prepare_calls;
static int fake_arm(int device, const backend_engine_config *config, uint64_t now_ns, char *reason,
                    size_t reason_size)
{
    return sim_pm_engine()->arm(device, config, now_ns, reason, reason_size);
}
static int fake_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    return sim_pm_engine()->disarm(device, now_ns, result);
}
static int fake_probe(int device, char *reason, size_t reason_size)
{
    return sim_pm_engine()->probe(device, reason, reason_size);
}
static void fake_prepare(int device)
{
    (void)device;
    atomic_fetch_add(&prepare_calls, 1);
}
static const backend_engine_ops fake_engine = {.name = "counting",
                                               .arm = fake_arm,
                                               .disarm = fake_disarm,
                                               .probe = fake_probe,
                                               .prepare = fake_prepare};

/* A request for a later time sets the engine up when it is read, long
 * before the window is due (the H200's PM sampling takes 0.8 s to set up
 * when no rule asked for it: without this the window ran without it). */
static void test_request_ahead_prepares_the_engine(void **state)
{
    (void)state;
    char dir[600], name[DEEPWIN_CONTROL_NAME_MAX], error[512];
    path_in_scratch(dir, sizeof(dir), "ahead");
    assert_int_equal(mkdir(dir, 0755), 0);
    atomic_store(&prepare_calls, 0);
    deepwin_session_set_engine(&fake_engine);
    setenv("FLARE_SESSION_DIR", dir, 1);
    flare_options options;
    flare_options_init(&options);
    options.flush_interval_ms = 5;
    assert_int_equal(flare_init(&options), FLARE_OK);
    /* The process's coordinator counts every session's windows. */
    uint64_t opened_before = deepwin_opened_count(deepwin_session_coordinator());
    int64_t now = core_unix_now_ns();
    deepwin_control_request later = {.requested_unix_ns = now + 1,
                                     .requested_by = (int64_t)getpid(),
                                     .at_unix_ns = now + 3600ll * 1000000000ll,
                                     .for_ns = 30000000ull};
    assert_int_equal(deepwin_control_write(dir, &later, name, sizeof(name), error, sizeof(error)),
                     FLARE_OK);
    TEST_WAIT_UNTIL(atomic_load(&prepare_calls) >= 1);
    assert_int_equal(deepwin_opened_count(deepwin_session_coordinator()), opened_before);
    assert_int_equal(flare_shutdown(), FLARE_OK);
    unsetenv("FLARE_SESSION_DIR");
    deepwin_session_set_engine(sim_pm_engine());
    assert_int_equal(atomic_load(&prepare_calls), 1);
    window_seen seen;
    read_windows("ahead", &seen);
    assert_int_equal(seen.count, 0); /* the session ended first: nothing opened */
}

/* ---- real traces ---- */

static void test_running_trace_opens_a_window(void **state)
{
    (void)state;
    pid_t trace = start_trace("e2e", 0);
    TEST_WAIT_UNTIL(running_processes("e2e") > 0);
    assert_int_equal(FLARE("window", "open", "e2e", "--for", "300ms"), 0);
    expect_contains(out_text, "flare: window requested in e2e: opens at 20");
    expect_contains(out_text, "Z for 300ms, in each of its 1 running process(es)\n");
    wait_for_trace(trace, "e2e");

    int64_t at = request_time("e2e");
    long long processes = query_number("e2e", "SELECT COUNT(*) FROM processes");
    window_seen seen;
    read_windows("e2e", &seen);
    assert_int_equal(seen.count, processes);
    assert_string_equal(seen.kind, "scheduled");
    expect_contains(seen.label, "flare window open ");
    assert_int_equal(seen.for_ns, 300000000);
    assert_string_equal(seen.close_reason, "duration");
    /* Closed on time by the window timer: never under, barely over. */
    if (seen.length_ns < 300000000 || seen.length_ns > 300000000 + SYNC_BOUND_NS)
        fail_msg("the window lasted %lld ns", seen.length_ns);
    if (seen.opened_unix_ns < at - 1000000 || seen.opened_unix_ns > at + NOTICE_BOUND_NS)
        fail_msg("opened %lld ns after its time", (long long)(seen.opened_unix_ns - at));
    assert_int_equal(FLARE("report", "e2e"), 0);
    expect_contains(out_text, "scheduled 'flare window open ");
}

#define SYNC_SESSIONS 4

static void test_windows_of_several_processes_open_together(void **state)
{
    (void)state;
    const char *names[SYNC_SESSIONS] = {"sync0", "sync1", "sync2", "sync3"};
    pid_t traces[SYNC_SESSIONS];
    for (int i = 0; i < SYNC_SESSIONS; i++)
        traces[i] = start_trace(names[i], 1);
    for (int i = 0; i < SYNC_SESSIONS; i++)
        TEST_WAIT_UNTIL(running_processes(names[i]) > 0);
    /* One instant, three seconds ahead (four commands must run before it,
     * on a busy machine), written in UTC and, for the last session, with an
     * offset of +05:30. */
    int64_t at = (core_unix_now_ns() / 1000000 + 3000) * 1000000;
    char utc[DEEPWIN_CONTROL_TIME_MAX], offset[DEEPWIN_CONTROL_TIME_MAX];
    deepwin_control_format_time(at, 0, utc, sizeof(utc));
    deepwin_control_format_time(at + 19800000000000ll, 0, offset, sizeof(offset));
    offset[strlen(offset) - 1] = '\0';
    strcat(offset, "+05:30");
    for (int i = 0; i < SYNC_SESSIONS; i++) {
        const char *when = i == SYNC_SESSIONS - 1 ? offset : utc;
        assert_int_equal(FLARE("window", "open", names[i], "--at", when, "--for", "200ms"), 0);
        expect_contains(out_text, utc); /* the offset's time is printed in UTC too */
    }
    /* Each window is stored once it has closed; then the programs may end. */
    for (int i = 0; i < SYNC_SESSIONS; i++)
        TEST_WAIT_UNTIL(query_number(names[i], "SELECT COUNT(*) FROM windows") >= 1);
    char stop[600];
    path_in_scratch(stop, sizeof(stop), "stop");
    close(open(stop, O_WRONLY | O_CREAT, 0644));
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (int i = 0; i < SYNC_SESSIONS; i++) {
        wait_for_trace(traces[i], names[i]);
        window_seen seen;
        read_windows(names[i], &seen);
        assert_int_equal(seen.count, 1);
        assert_string_equal(seen.close_reason, "duration");
        if (seen.opened_unix_ns < at - 1000000)
            fail_msg("%s opened %lld ns before its time", names[i],
                     (long long)(at - seen.opened_unix_ns));
        first = seen.opened_unix_ns < first ? seen.opened_unix_ns : first;
        last = seen.opened_unix_ns > last ? seen.opened_unix_ns : last;
    }
    print_message("windows opened %.3f ms to %.3f ms after their time\n", (first - at) / 1e6,
                  (last - at) / 1e6);
    if (last - first > SYNC_BOUND_NS || last - at > SYNC_BOUND_NS)
        fail_msg("windows opened %.3f ms apart, the last %.3f ms late", (last - first) / 1e6,
                 (last - at) / 1e6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_help_tells_the_truth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_errors_write_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_past_time_says_by_how_much, setup, teardown),
        cmocka_unit_test_setup_teardown(test_state_errors_write_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_skips_bad_and_old_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_ahead_prepares_the_engine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_running_trace_opens_a_window, setup, teardown),
        cmocka_unit_test_setup_teardown(test_windows_of_several_processes_open_together, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
