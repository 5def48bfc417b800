/*
 * trace.c: `flare trace [-o DIR] -- CMD [ARGS...]`.
 *
 * Prepares the session directory and database before the command starts (so
 * a bad -o fails early and nothing runs), runs the command with the session
 * in its environment, forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT, records the
 * exit status, and checks that at least one process actually started a flare
 * session: a profiler that silently recorded nothing is the worst outcome.
 * Exits with the command's own status (128+N if a signal N ended it).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/cuda/cuda_info.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "core/config.h"
#include "flare/flare.h"
#include "store/store.h"
#include "windows/windows_session.h"

static const char trace_help[] =
    "usage: flare trace [-o DIR] [--flush-ms N] [--deep-when RULE]... [--quiet]\n"
    "                   [--deep-after DURATION --deep-for DURATION] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD under the profiler and saves a session in DIR/session.db: kernels,\n"
    "copies, memsets, NVTX ranges, scopes, counters and GPU metrics of every\n"
    "process of CMD that initialises CUDA (flare is injected through\n"
    "CUDA_INJECTION64_PATH) or links libflare (as flare-demo does).\n"
    "\n"
    "Options:\n"
    "  -o, --output DIR   session directory (must not already hold a session);\n"
    "                     default ./flare-out/<UTC time>-<pid>/ ($FLARE_OUTPUT_DIR\n"
    "                     replaces ./flare-out)\n"
    "  --flush-ms N       how often collected events are written, 1..250 ms\n"
    "                     (default 100); a killed program keeps all but the last N ms\n"
    "  --deep-when RULE   a deep-profiling rule, e.g. 'kernel_launch_rate < 500/s\n"
    "                     for 2s' (docs/rules.md); repeatable, or rules separated by\n"
    "                     ';'. Rules are parsed and validated before CMD starts and\n"
    "                     passed to it in FLARE_DEEP_WHEN; a refused rule is reported\n"
    "                     and never stops the trace. Deep-profiling windows are not\n"
    "                     opened yet: the evaluator is still to come.\n"
    "                     'flare rules check RULE' tries a rule without running CMD.\n"
    "  --deep-after DURATION --deep-for DURATION\n"
    "                     one scheduled deep-profiling window in each process: it\n"
    "                     opens DURATION after the process's session starts and\n"
    "                     lasts the --deep-for DURATION (units: ms, s, min; e.g.\n"
    "                     --deep-after 30s --deep-for 2s). Both or neither.\n"
    "  -q, --quiet        print nothing but errors and warnings\n"
    "  -h, --help         this help\n"
    "\n"
    "The '--' is required: everything after it is the command.\n"
    "Exit status: the command's own (128+N if signal N ended it); 2 for a usage\n"
    "error; 1 if the session could not be prepared (nothing is run then).\n"
    "Then: flare report DIR\n";

/* libflare.so, injected into CUDA programs: $FLARE_LIBRARY, else
 * ../lib/libflare.so beside this executable (the build and install layout).
 * Empty when not found. */
static char injection_library[PATH_MAX];

static void find_injection_library(void)
{
    injection_library[0] = '\0';
    const char *explicit_path = getenv("FLARE_LIBRARY");
    if (explicit_path != NULL && explicit_path[0] != '\0') {
        if (realpath(explicit_path, injection_library) == NULL) {
            fprintf(stderr,
                    "flare: WARNING: FLARE_LIBRARY=%s: %s; CUDA programs will not be traced\n",
                    explicit_path, strerror(errno));
            injection_library[0] = '\0';
        }
        return;
    }
    char executable[PATH_MAX];
    ssize_t length = readlink("/proc/self/exe", executable, sizeof(executable) - 1);
    if (length <= 0)
        return;
    executable[length] = '\0';
    char *slash = strrchr(executable, '/');
    if (slash == NULL)
        return;
    *slash = '\0';
    char candidate[PATH_MAX + 32];
    snprintf(candidate, sizeof(candidate), "%s/../lib/libflare.so", executable);
    if (realpath(candidate, injection_library) == NULL)
        injection_library[0] = '\0';
}

static int join_command_line(int argc, char **argv, char *buffer, size_t size)
{
    size_t used = 0;
    buffer[0] = '\0';
    for (int i = 0; i < argc; i++) {
        int written = snprintf(buffer + used, size - used, "%s%s", i ? " " : "", argv[i]);
        if (written < 0 || (size_t)written >= size - used)
            return -1;
        used += (size_t)written;
    }
    return 0;
}

static int prepare_session(const char *output, char *session_dir, size_t size,
                           const char *command_line)
{
    char error[1024];
    if (output != NULL) {
        if (strlen(output) >= size)
            return cli_failure("trace", "output directory path is too long");
        if (core_make_directories(output, error, sizeof(error)) != FLARE_OK)
            return cli_failure("trace", "%s", error);
        char database[PATH_MAX + 32];
        snprintf(database, sizeof(database), "%s/%s", output, STORE_DATABASE_NAME);
        if (access(database, F_OK) == 0)
            return cli_failure("trace",
                               "%s already holds a session (%s); choose another directory or "
                               "remove it",
                               output, STORE_DATABASE_NAME);
        snprintf(session_dir, size, "%s", output);
    } else {
        const char *base = getenv("FLARE_OUTPUT_DIR");
        if (base == NULL || base[0] == '\0')
            base = CORE_DEFAULT_OUTPUT_BASE;
        if (core_make_session_directory(base, session_dir, size, error, sizeof(error)) != FLARE_OK)
            return cli_failure("trace", "%s", error);
    }
    if (core_check_writable_directory(session_dir, error, sizeof(error)) != FLARE_OK)
        return cli_failure("trace", "%s", error);
    /* The child may run in another directory: give it an absolute path. */
    char absolute[PATH_MAX];
    if (realpath(session_dir, absolute) == NULL)
        return cli_failure("trace", "cannot resolve %s: %s", session_dir, strerror(errno));
    snprintf(session_dir, size, "%s", absolute);

    store *database;
    if (store_open(session_dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != FLARE_OK)
        return cli_failure("trace", "%s", error);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    store_session_info info = {.command = command_line,
                               .start_ns = core_now_ns(),
                               .start_unix_ns = core_unix_now_ns(),
                               .host = host,
                               .flare_version = FLARE_VERSION_STRING};
    /* Recorded by the launcher (its own pid), so that on a machine without
     * a GPU the report says why nothing GPU-side was recorded. */
    char driver_reason[512] = "";
    int driver_present = cuda_info_driver_present(driver_reason, sizeof(driver_reason));
    int status = store_begin(database);
    if (status == FLARE_OK)
        status = store_session_begin(database, &info);
    if (status == FLARE_OK)
        status = store_set_capability(database, (int64_t)getpid(), "gpu_driver", 1,
                                      driver_present ? "active" : "unavailable",
                                      driver_present ? "libcuda.so.1 loads" : driver_reason);
    if (status == FLARE_OK)
        status = store_commit(database);
    if (status != FLARE_OK) {
        cli_failure("trace", "cannot write the session row: %s", store_last_error(database));
        store_close(database);
        return CLI_EXIT_FAILURE;
    }
    store_close(database);
    return CLI_EXIT_OK;
}

/* What the processes of the session said about their capabilities: how
 * many traced CUDA, and which requested features they could not honour. */
typedef struct capability_tally {
    int64_t launcher_pid;
    int cuda_processes;
    int degraded;
    char first_feature[64];
    char first_reason[256];
} capability_tally;

static int tally_capability(const store_capability_row *row, void *user)
{
    capability_tally *tally = user;
    if (row->pid == tally->launcher_pid)
        return 0; /* the launcher's own note about the driver */
    if (strcmp(row->feature, "cuda_injection") == 0 && strcmp(row->status, "active") == 0)
        tally->cuda_processes++;
    if (row->requested && strcmp(row->status, "active") != 0) {
        if (tally->degraded++ == 0) {
            snprintf(tally->first_feature, sizeof(tally->first_feature), "%s", row->feature);
            snprintf(tally->first_reason, sizeof(tally->first_reason), "%s", row->reason);
        }
    }
    return 0;
}

/* Runs the command; returns its exit status as a shell would, or 127/126
 * when it could not be started (the message says why).
 *
 * The signals to forward are blocked and taken synchronously with
 * sigwaitinfo, together with SIGCHLD, rather than in an asynchronous
 * handler: no signal can slip in between a check and a wait, and nothing
 * runs in signal context. */
static int run_command(char **command, const char *session_dir)
{
    int report_pipe[2];
    if (pipe2(report_pipe, O_CLOEXEC) != 0)
        return cli_failure("trace", "pipe: %s", strerror(errno)), 126;

    sigset_t watched, previous;
    sigemptyset(&watched);
    sigaddset(&watched, SIGINT);
    sigaddset(&watched, SIGTERM);
    sigaddset(&watched, SIGHUP);
    sigaddset(&watched, SIGQUIT);
    sigaddset(&watched, SIGCHLD);
    sigprocmask(SIG_BLOCK, &watched, &previous);

    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &previous, NULL);
        close(report_pipe[0]);
        close(report_pipe[1]);
        return cli_failure("trace", "fork: %s", strerror(errno)), 126;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &previous, NULL);
        close(report_pipe[0]);
        setenv("FLARE_SESSION_DIR", session_dir, 1);
        setenv("FLARE_LAUNCHED_BY_TRACE", "1", 1);
        if (injection_library[0] != '\0') {
            setenv("CUDA_INJECTION64_PATH", injection_library, 1);
            setenv("NVTX_INJECTION64_PATH", injection_library, 1);
        }
        execvp(command[0], command);
        int error = errno;
        if (write(report_pipe[1], &error, sizeof(error)) < 0) {
        }
        _exit(error == ENOENT ? 127 : 126);
    }
    close(report_pipe[1]);
    int exec_error = 0;
    ssize_t got;
    do {
        got = read(report_pipe[0], &exec_error, sizeof(exec_error));
    } while (got < 0 && errno == EINTR);
    close(report_pipe[0]);

    int wait_status = 0;
    for (;;) {
        pid_t done = waitpid(pid, &wait_status, WNOHANG);
        if (done == pid || (done < 0 && errno != EINTR))
            break;
        siginfo_t info;
        int signal_number = sigwaitinfo(&watched, &info);
        if (signal_number > 0 && signal_number != SIGCHLD)
            kill(pid, signal_number);
    }
    sigprocmask(SIG_SETMASK, &previous, NULL);
    if (got == (ssize_t)sizeof(exec_error)) {
        cli_failure("trace", "cannot run '%s': %s", command[0], strerror(exec_error));
        return exec_error == ENOENT ? 127 : 126;
    }
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}

int cli_trace(int argc, char **argv)
{
    const char *output = NULL;
    uint32_t flush_ms = 0;
    int quiet = 0;
    const char *deep_after = NULL, *deep_for = NULL;
    int index = 1;
    for (; index < argc; index++) {
        const char *argument = argv[index];
        if (strcmp(argument, "--") == 0)
            break;
        if (cli_is_help(argument)) {
            fputs(trace_help, stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argument, "-o") == 0 || strcmp(argument, "--output") == 0) {
            if (index + 1 >= argc || strcmp(argv[index + 1], "--") == 0)
                return cli_usage_error("trace", "option '%s' needs a directory", argument);
            output = argv[++index];
            if (output[0] == '\0')
                return cli_usage_error("trace", "option '%s' needs a non-empty directory",
                                       argument);
        } else if (strcmp(argument, "--flush-ms") == 0) {
            if (index + 1 >= argc)
                return cli_usage_error("trace", "option '--flush-ms' needs a value");
            const char *value = argv[++index];
            if (core_parse_u32(value, 1, CORE_FLUSH_INTERVAL_MAX_MS, &flush_ms) != 0)
                return cli_usage_error("trace",
                                       "'--flush-ms %s': expected whole milliseconds in 1..%u",
                                       value, CORE_FLUSH_INTERVAL_MAX_MS);
        } else if (strcmp(argument, "--deep-when") == 0) {
            int status = cli_deep_when_add(index + 1 < argc ? argv[index + 1] : NULL);
            if (status != CLI_EXIT_OK)
                return status;
            index++;
        } else if (strcmp(argument, "--deep-after") == 0 || strcmp(argument, "--deep-for") == 0) {
            if (index + 1 >= argc || strcmp(argv[index + 1], "--") == 0)
                return cli_usage_error("trace", "option '%s' needs a duration, e.g. %s %s",
                                       argument, argument,
                                       strcmp(argument, "--deep-after") == 0 ? "30s" : "2s");
            const char *value = argv[++index];
            char why[192];
            uint64_t duration_ns;
            if (windows_parse_duration(value, &duration_ns, why, sizeof(why)) != FLARE_OK)
                return cli_usage_error("trace", "'%s %s': %s", argument, value, why);
            if (strcmp(argument, "--deep-for") == 0 && duration_ns > WINDOWS_DURATION_MAX_NS)
                return cli_usage_error("trace", "'--deep-for %s': a window lasts at most %llu s",
                                       value, WINDOWS_DURATION_MAX_NS / 1000000000ull);
            if (strcmp(argument, "--deep-after") == 0)
                deep_after = value;
            else
                deep_for = value;
        } else if (strcmp(argument, "-q") == 0 || strcmp(argument, "--quiet") == 0) {
            quiet = 1;
        } else if (argument[0] == '-') {
            return cli_usage_error("trace", "unknown option '%s'", argument);
        } else {
            return cli_usage_error("trace",
                                   "expected '--' before the command, found '%s' "
                                   "(flare trace [OPTIONS] -- CMD [ARGS...])",
                                   argument);
        }
    }
    if (index >= argc)
        return cli_usage_error("trace", "missing '--' and the command to run "
                                        "(flare trace [OPTIONS] -- CMD [ARGS...])");
    char **command = argv + index + 1;
    int command_count = argc - index - 1;
    if (command_count == 0)
        return cli_usage_error("trace", "missing the command after '--'");
    /* A scheduled window needs both when and how long; checked here, after
     * every option, so the answer is the same whichever came first. */
    if ((deep_after != NULL) != (deep_for != NULL))
        return cli_usage_error(
            "trace",
            "'%s %s' needs '%s' too: add %s DURATION (e.g. --deep-after 30s --deep-for 2s)",
            deep_after != NULL ? "--deep-after" : "--deep-for",
            deep_after != NULL ? deep_after : deep_for,
            deep_after != NULL ? "--deep-for" : "--deep-after",
            deep_after != NULL ? "--deep-for" : "--deep-after");
    if (deep_after != NULL) {
        setenv("FLARE_DEEP_AFTER", deep_after, 1);
        setenv("FLARE_DEEP_FOR", deep_for, 1);
    }
    /* Rules are checked before anything is prepared, so their warnings come
     * first; a refused rule never stops the trace (cli_deep_when_export). */
    cli_deep_when_export(quiet);

    char command_line[1024];
    if (join_command_line(command_count, command, command_line, sizeof(command_line)) != 0)
        snprintf(command_line + sizeof(command_line) - 5, 5, "...");
    char session_dir[PATH_MAX];
    if (prepare_session(output, session_dir, sizeof(session_dir), command_line) != CLI_EXIT_OK)
        return CLI_EXIT_FAILURE;
    if (flush_ms != 0) {
        char value[16];
        snprintf(value, sizeof(value), "%u", flush_ms);
        setenv("FLARE_FLUSH_MS", value, 1);
    }
    find_injection_library();
    if (!quiet) {
        fprintf(stderr, "flare: tracing '%s'; session in %s\n", command_line, session_dir);
        if (injection_library[0] == '\0')
            fprintf(stderr, "flare: note: libflare.so not found beside this flare (set "
                            "FLARE_LIBRARY): CUDA programs will not be injected\n");
    }

    int exit_status = run_command(command, session_dir);

    char error[1024];
    store *database;
    if (store_open(session_dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != FLARE_OK) {
        cli_failure("trace", "cannot reopen the session database: %s", error);
        return exit_status;
    }
    if (store_begin(database) != FLARE_OK ||
        store_session_end(database, core_now_ns(), 1, exit_status) != FLARE_OK ||
        store_commit(database) != FLARE_OK)
        cli_failure("trace", "cannot record the end of the session: %s",
                    store_last_error(database));
    store_session_summary summary;
    memset(&summary, 0, sizeof(summary));
    store_read_session(database, &summary);
    capability_tally tally = {.launcher_pid = (int64_t)getpid()};
    store_read_capabilities(database, tally_capability, &tally);
    store_close(database);

    if (summary.process_count == 0) {
        fprintf(stderr,
                "flare: WARNING: no process of '%s' started a flare session, so nothing was "
                "recorded.\n"
                "flare: flare starts in a process that initialises CUDA (it is injected; %s) "
                "or that links libflare (as flare-demo does).\n"
                "flare: if the program did either, see %s/flare.log for why flare did not "
                "start.\n",
                command[0],
                injection_library[0] == '\0' ? "but libflare.so was not found: set FLARE_LIBRARY"
                                             : "needs an NVIDIA driver",
                session_dir);
    } else if (!quiet) {
        fprintf(stderr,
                "flare: session saved in %s: %lld process(es) (%d with CUDA tracing), %lld "
                "kernels, %lld copies and memsets, %lld scopes\n"
                "flare: see 'flare report %s'\n",
                session_dir, (long long)summary.process_count, tally.cuda_processes,
                (long long)summary.kernel_count, (long long)summary.copy_count,
                (long long)summary.scope_count, session_dir);
    }
    if (tally.degraded > 0)
        fprintf(stderr,
                "flare: WARNING: %d requested feature(s) degraded or unavailable (first: %s: "
                "%s); see the Capabilities table of 'flare report'\n",
                tally.degraded, tally.first_feature, tally.first_reason);
    return exit_status;
}
