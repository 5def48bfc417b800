/*
 * bench_window_sync.c: how closely `flare window open --at TIME` windows
 * open together across separate processes on one host (issue 24, item 5).
 *
 * Each run starts PROCESSES traces (`flare trace -q -o sN -- flare-demo
 * STEPS`, each its own session, all at once on this machine), waits until
 * every one has a running process, picks one instant 3 s ahead (whole
 * milliseconds) and asks each session for a 100 ms window at that instant
 * (`flare window open sN --at TIME --for 100ms -q`). Once the traces end it
 * reads each window's opened_ns back, on the wall clock through its
 * session's start pair, and prints per run: the spread (last open minus
 * first), the earliest and latest open against TIME, and the longest
 * window's excess over 100 ms. Then the medians over the runs and the worst.
 *
 * The traces run the CPU-bound demo on every core, so the windows' timer
 * threads wake on a loaded machine: the numbers are not a quiet machine's.
 * The machine's load average at each run's start is printed beside it:
 * other work on the machine shows in the spread.
 * Usage: bench_window_sync [processes] [runs] [steps]   (8, 7, 2500)
 * Exits 0, or 1 with a message on stderr. Must never leave a process or a
 * directory behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench_common.h"
#include "core/clock.h"
#include "deepwin/deepwin_control.h"

#ifndef FLARE_CLI_PATH
#error "FLARE_CLI_PATH names the flare command (bench/CMakeLists.txt)"
#endif
#ifndef FLARE_DEMO_PATH
#error "FLARE_DEMO_PATH names flare-demo (bench/CMakeLists.txt)"
#endif

#define MAX_PROCESSES 32
#define MAX_RUNS      32
#define WINDOW_NS     100000000ll
#define AHEAD_MS      3000
#define WAIT_NS       120000000000ull

/* Runs argv (NULL-terminated) in dir with output to /dev/null; its pid. */
static pid_t spawn(const char *dir, char *const argv[])
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        if (chdir(dir) != 0)
            _exit(99);
        execv(argv[0], argv);
        _exit(98);
    }
    return pid;
}

static int finish(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The first column of sql in dir/name/session.db as a number, or -1. */
static long long query(const char *dir, const char *name, const char *sql)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s/session.db", dir, name);
    if (access(path, F_OK) != 0)
        return -1;
    sqlite3 *db = NULL;
    long long value = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *statement = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) == SQLITE_OK &&
            sqlite3_step(statement) == SQLITE_ROW &&
            sqlite3_column_type(statement, 0) != SQLITE_NULL)
            value = sqlite3_column_int64(statement, 0);
        sqlite3_finalize(statement);
    }
    sqlite3_close(db);
    return value;
}

typedef struct run_result {
    double spread_ms, earliest_ms, latest_ms, excess_ms;
} run_result;

/* Waits (bounded) until every session in dir has a running process. 0 or -1. */
static int wait_running(const char *dir, char names[][16], int processes)
{
    uint64_t deadline = bench_now_ns() + WAIT_NS;
    for (int i = 0; i < processes; i++) {
        while (query(dir, names[i], "SELECT COUNT(*) FROM processes WHERE end_ns IS NULL") < 1) {
            if (bench_now_ns() > deadline)
                return -1;
            usleep(1000);
        }
    }
    return 0;
}

/* Asks each session for the window at when; then waits for every trace
 * (stopping them all once anything failed). 0, or -1 with a message. */
static int ask_and_wait(const char *dir, char names[][16], const pid_t *traces, int processes,
                        int status, const char *when)
{
    if (status != 0)
        fprintf(stderr, "bench_window_sync: not every session was running within 120 s\n");
    for (int i = 0; i < processes && status == 0; i++) {
        char *argv[] = {FLARE_CLI_PATH, "window", "open",  names[i], "--at",
                        (char *)when,   "--for",  "100ms", "-q",     NULL};
        int code = finish(spawn(dir, argv));
        if (code != 0) {
            fprintf(stderr, "bench_window_sync: flare window open %s --at %s: status %d\n",
                    names[i], when, code);
            status = -1;
        }
    }
    for (int i = 0; i < processes; i++) {
        if (status != 0)
            kill(traces[i], SIGTERM);
        int code = finish(traces[i]);
        if (code != 0 && status == 0) {
            fprintf(stderr, "bench_window_sync: the trace of %s ended with status %d\n", names[i],
                    code);
            status = -1;
        }
    }
    return status;
}

/* One run in dir. 0 with *result, or -1 with a message. */
static int one_run(const char *dir, int processes, const char *steps, run_result *result)
{
    char names[MAX_PROCESSES][16];
    pid_t traces[MAX_PROCESSES];
    for (int i = 0; i < processes; i++) {
        snprintf(names[i], sizeof(names[i]), "s%d", i);
        char *argv[] = {FLARE_CLI_PATH, "trace",         "-q",          "-o", names[i],
                        "--",           FLARE_DEMO_PATH, (char *)steps, NULL};
        traces[i] = spawn(dir, argv);
    }
    int status = wait_running(dir, names, processes);
    int64_t at = (core_unix_now_ns() / 1000000 + AHEAD_MS) * 1000000;
    char when[DEEPWIN_CONTROL_TIME_MAX];
    deepwin_control_format_time(at, 0, when, sizeof(when));
    if (ask_and_wait(dir, names, traces, processes, status, when) != 0)
        return -1;
    double earliest = 1e18, latest = -1e18, excess = 0;
    for (int i = 0; i < processes; i++) {
        long long opened = query(dir, names[i],
                                 "SELECT s.start_unix_ns + (w.opened_ns - s.start_ns)"
                                 " FROM windows w, session s");
        long long length = query(dir, names[i],
                                 "SELECT closed_ns - opened_ns FROM windows"
                                 " WHERE close_reason = 'duration'");
        if (opened < 0 || length < 0) {
            fprintf(stderr,
                    "bench_window_sync: no window closed on its duration in %s: did flare-demo "
                    "end first? (give more steps)\n",
                    names[i]);
            return -1;
        }
        double late_ms = (double)(opened - at) / 1e6;
        earliest = late_ms < earliest ? late_ms : earliest;
        latest = late_ms > latest ? late_ms : latest;
        double over_ms = (double)(length - WINDOW_NS) / 1e6;
        excess = over_ms > excess ? over_ms : excess;
    }
    *result = (run_result){latest - earliest, earliest, latest, excess};
    return 0;
}

int main(int argc, char **argv)
{
    int processes = argc > 1 ? atoi(argv[1]) : 8;
    int runs = argc > 2 ? atoi(argv[2]) : 7;
    const char *steps = argc > 3 ? argv[3] : "2500";
    if (processes < 1 || processes > MAX_PROCESSES || runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: bench_window_sync [processes 1..%d] [runs 1..%d] [steps]\n",
                MAX_PROCESSES, MAX_RUNS);
        return 1;
    }
    double spread[MAX_RUNS], earliest[MAX_RUNS], latest[MAX_RUNS], excess[MAX_RUNS];
    double worst_spread = 0, worst_latest = -1e18, worst_excess = 0;
    printf("%d processes (separate flare trace sessions of flare-demo %s), %d runs, windows of "
           "100 ms at one --at 3 s ahead\n",
           processes, steps, runs);
    printf("run  load  spread ms  earliest ms  latest ms  longest window over 100 ms\n");
    for (int run = 0; run < runs; run++) {
        char dir[] = "/tmp/flare-bench-window-XXXXXX";
        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 1;
        }
        double load = 0;
        getloadavg(&load, 1);
        run_result result;
        int status = one_run(dir, processes, steps, &result);
        char command[200];
        snprintf(command, sizeof(command), "rm -rf '%s'", dir);
        if (system(command) != 0)
            fprintf(stderr, "bench_window_sync: could not remove %s\n", dir);
        if (status != 0)
            return 1;
        printf("%3d  %4.1f  %9.3f  %11.3f  %9.3f  %9.3f\n", run + 1, load, result.spread_ms,
               result.earliest_ms, result.latest_ms, result.excess_ms);
        spread[run] = result.spread_ms;
        earliest[run] = result.earliest_ms;
        latest[run] = result.latest_ms;
        excess[run] = result.excess_ms;
        worst_spread = result.spread_ms > worst_spread ? result.spread_ms : worst_spread;
        worst_latest = result.latest_ms > worst_latest ? result.latest_ms : worst_latest;
        worst_excess = result.excess_ms > worst_excess ? result.excess_ms : worst_excess;
    }
    printf("median: spread %.3f ms, earliest %.3f ms, latest %.3f ms after TIME, longest window "
           "+%.3f ms\n",
           bench_median(spread, (size_t)runs), bench_median(earliest, (size_t)runs),
           bench_median(latest, (size_t)runs), bench_median(excess, (size_t)runs));
    printf("worst:  spread %.3f ms, latest %.3f ms after TIME, longest window +%.3f ms\n",
           worst_spread, worst_latest, worst_excess);
    return 0;
}
