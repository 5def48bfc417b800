/*
 * launch.c: running a command under the profiler, shared by `flare trace`
 * and `flare replay`.
 *
 * Prepares the session directory and database before the command starts (so
 * a bad -o fails early and nothing runs), runs the command with the session
 * and libflare's injection in its environment, forwards SIGINT/SIGTERM/
 * SIGHUP/SIGQUIT, records the exit status, and checks that at least one
 * process actually started a flare session: a profiler that silently
 * recorded nothing is the worst outcome. It must never run the command when
 * the session could not be prepared, and never swallow the command's status.
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
#include "disasm/disasm_session.h"
#include "core/config.h"
#include "flare/flare.h"
#include "session/session.h"
#include "store/store.h"
#include "store/store_files.h"
#include "store/store_views.h"

/* Where an installed flare finds libflare, relative to its own directory:
 * the build passes the installed layout's bin-to-lib path and SONAME
 * (cmake/FlareInstall.cmake: ../lib, ../lib64 or ../lib/<multiarch>, then
 * libflare.so.0, which a runtime-only install has without libflare.so). */
#ifndef FLARE_INSTALLED_LIBRARY
#define FLARE_INSTALLED_LIBRARY "../lib/libflare.so.0"
#endif

/* libflare.so, injected into CUDA programs: $FLARE_LIBRARY, else
 * ../lib/libflare.so beside this executable (the build tree's layout, and
 * an install's under lib/), else FLARE_INSTALLED_LIBRARY beside it. Empty
 * when not found. */
static void find_injection_library(char *library, size_t size)
{
    library[0] = '\0';
    const char *explicit_path = getenv("FLARE_LIBRARY");
    if (explicit_path != NULL && explicit_path[0] != '\0') {
        char resolved[PATH_MAX];
        if (realpath(explicit_path, resolved) == NULL)
            fprintf(stderr,
                    "flare: WARNING: FLARE_LIBRARY=%s: %s; CUDA programs will not be traced\n",
                    explicit_path, strerror(errno));
        else
            snprintf(library, size, "%s", resolved);
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
    static const char *const beside[] = {"../lib/libflare.so", FLARE_INSTALLED_LIBRARY};
    for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
        char candidate[PATH_MAX + sizeof(FLARE_INSTALLED_LIBRARY) + 32];
        snprintf(candidate, sizeof(candidate), "%s/%s", executable, beside[i]);
        char resolved[PATH_MAX];
        if (realpath(candidate, resolved) != NULL) {
            snprintf(library, size, "%s", resolved);
            return;
        }
    }
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

/* Whether command names a program execvp could run (searching PATH as it
 * does): checked before anything is made, so `flare trace -- typo` leaves
 * no session behind. 0, or the errno execvp would fail with. */
static int command_runnable(const char *command)
{
    if (command[0] == '\0')
        return ENOENT;
    if (strchr(command, '/') != NULL)
        return access(command, X_OK) == 0 ? 0 : errno;
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/bin:/usr/bin";
    int found_error = ENOENT;
    for (const char *start = path;; start++) {
        const char *end = strchr(start, ':');
        size_t length = end != NULL ? (size_t)(end - start) : strlen(start);
        char candidate[PATH_MAX];
        if (snprintf(candidate, sizeof(candidate), "%.*s%s%s", (int)length, start,
                     length == 0 ? "" : "/", command) < (int)sizeof(candidate)) {
            struct stat info;
            if (stat(candidate, &info) == 0 && S_ISREG(info.st_mode)) {
                if (access(candidate, X_OK) == 0)
                    return 0;
                found_error = EACCES;
            }
        }
        if (end == NULL)
            break;
        start = end;
    }
    return found_error;
}

static int prepare_session(cli_launch *launch, char *session_dir, size_t size)
{
    const char *name = launch->command_name;
    const char *output = launch->output;
    char error[1024];
    launch->created_directory = 0;
    if (output != NULL) {
        if (strlen(output) >= size)
            return cli_failure(name, "output directory path is too long");
        struct stat info;
        launch->created_directory = lstat(output, &info) != 0;
        if (core_make_directories(output, error, sizeof(error)) != FLARE_OK)
            return cli_failure(name, "%s", error);
        snprintf(session_dir, size, "%s", output);
    } else {
        const char *base = getenv("FLARE_OUTPUT_DIR");
        if (base == NULL || base[0] == '\0')
            base = CORE_DEFAULT_OUTPUT_BASE;
        if (core_make_session_directory(base, session_dir, size, error, sizeof(error)) != FLARE_OK)
            return cli_failure(name, "%s", error);
        launch->created_directory = 1;
    }
    if (core_check_writable_directory(session_dir, error, sizeof(error)) != FLARE_OK)
        return cli_failure(name, "%s", error);
    /* One winner per directory, never through a planted link. */
    if (store_claim_directory(session_dir, error, sizeof(error)) != FLARE_OK)
        return cli_failure(name, "%s", error);
    launch->claimed = 1;
    /* The child may run in another directory: give it an absolute path. */
    char absolute[PATH_MAX];
    if (realpath(session_dir, absolute) == NULL)
        return cli_failure(name, "cannot resolve %s: %s", session_dir, strerror(errno));
    snprintf(session_dir, size, "%s", absolute);

    store *database;
    if (store_open(session_dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) != FLARE_OK)
        return cli_failure(name, "%s", error);
    /* The launcher's own share of the disk for recording the end. */
    launch->reserved =
        store_reserve_create(session_dir, (int64_t)getpid(), STORE_RESERVE_LAUNCHER_BYTES, error,
                             sizeof(error)) == 0;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    store_session_info info = {.command = launch->command_line,
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
        cli_failure(name, "cannot write the session row: %s", store_last_error(database));
        store_close(database);
        return CLI_EXIT_FAILURE;
    }
    store_close(database);
    return CLI_EXIT_OK;
}

/* Removes what prepare made for a command that never ran: the session's
 * files, and the directory when prepare created it (only if empty then). */
static void remove_session(const cli_launch *launch)
{
    if (!launch->claimed)
        return;
    static const char *const files[] = {STORE_DATABASE_NAME, STORE_DATABASE_NAME "-wal",
                                        STORE_DATABASE_NAME "-shm", STORE_LOG_NAME};
    store_reserve_release_all(launch->session_dir);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char path[PATH_MAX + 32];
        if (snprintf(path, sizeof(path), "%s/%s", launch->session_dir, files[i]) <
            (int)sizeof(path))
            unlink(path);
    }
    if (launch->created_directory)
        rmdir(launch->session_dir);
}

int cli_launch_prepare(cli_launch *launch, char **command, int command_count)
{
    const char *name = launch->command_name;
    char error[1024];
    /* What each process of the command would refuse at start is refused
     * here, before anything runs, with the same message. */
    if (session_check_environment(error, sizeof(error)) != FLARE_OK)
        return cli_usage_error(name, "%s; nothing was run", error);
    int not_runnable = command_runnable(command[0]);
    if (not_runnable != 0) {
        cli_failure(name, "cannot run '%s': %s", command[0], strerror(not_runnable));
        return not_runnable == ENOENT ? 127 : 126;
    }
    if (join_command_line(command_count, command, launch->command_line,
                          sizeof(launch->command_line)) != 0)
        snprintf(launch->command_line + sizeof(launch->command_line) - 5, 5, "...");
    if (prepare_session(launch, launch->session_dir, sizeof(launch->session_dir)) != CLI_EXIT_OK) {
        remove_session(launch);
        return CLI_EXIT_FAILURE;
    }
    if (launch->flush_ms != 0) {
        char value[16];
        snprintf(value, sizeof(value), "%u", launch->flush_ms);
        setenv("FLARE_FLUSH_MS", value, 1);
    }
    find_injection_library(launch->injection_library, sizeof(launch->injection_library));
    if (!launch->quiet) {
        fprintf(stderr, "flare: %s '%s'; session in %s\n", launch->activity, launch->command_line,
                launch->session_dir);
        if (launch->injection_library[0] == '\0')
            fprintf(stderr, "flare: note: libflare.so not found beside this flare (set "
                            "FLARE_LIBRARY): CUDA programs will not be injected\n");
    }
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
static int run_command(const cli_launch *launch, char **command, int *exec_failed)
{
    *exec_failed = 0;
    int report_pipe[2];
    if (pipe2(report_pipe, O_CLOEXEC) != 0)
        return cli_failure(launch->command_name, "pipe: %s", strerror(errno)), 126;

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
        return cli_failure(launch->command_name, "fork: %s", strerror(errno)), 126;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &previous, NULL);
        close(report_pipe[0]);
        setenv("FLARE_SESSION_DIR", launch->session_dir, 1);
        setenv("FLARE_LAUNCHED_BY_TRACE", "1", 1);
        char launcher[24];
        snprintf(launcher, sizeof(launcher), "%ld", (long)getppid());
        setenv("FLARE_LAUNCHER_PID", launcher, 1);
        if (launch->injection_library[0] != '\0') {
            setenv("CUDA_INJECTION64_PATH", launch->injection_library, 1);
            setenv("NVTX_INJECTION64_PATH", launch->injection_library, 1);
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
        *exec_failed = 1;
        cli_failure(launch->command_name, "cannot run '%s': %s", command[0], strerror(exec_error));
        return exec_error == ENOENT ? 127 : 126;
    }
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}

/* Collection is over: the indexes the session's views need (built now,
 * never while the program wrote). A failure only makes queries slower, and
 * `flare index` can build them later. */
static void index_session(const cli_launch *launch, store *database)
{
    store_index_result result;
    uint64_t started = core_now_ns();
    if (store_build_indexes(database, &result) != FLARE_OK) {
        fprintf(stderr,
                "flare: WARNING: the session's indexes were not built (%s); 'flare index %s' "
                "builds them\n",
                store_last_error(database), launch->session_dir);
        return;
    }
    uint64_t took_ns = core_now_ns() - started;
    if (!launch->quiet && took_ns >= 1000000000ull)
        fprintf(stderr, "flare: indexed the session for its SQL views in %.1f s\n",
                (double)took_ns / 1e9);
}

/* Kept cubins past this many bytes are announced before their disassembly. */
#define CLI_DISASM_ANNOUNCE_BYTES (8u << 20)

/* The SASS text of sampled instructions without a source line, from the
 * cubins the processes kept (docs/pc-sampling.md); every process has ended. */
/* Before a long disassembly (PyTorch's cubins take tens of seconds): why
 * the command has not ended yet, and how to skip it. */
static void announce_disassembly(uint64_t cubins, uint64_t bytes, void *user)
{
    const cli_launch *launch = user;
    if (!launch->quiet && bytes >= CLI_DISASM_ANNOUNCE_BYTES)
        fprintf(stderr,
                "flare: disassembling %llu kept cubin(s) (%.1f MiB) for the SASS text of "
                "instructions without a source line (FLARE_DISASSEMBLER= skips it; 'flare disasm' "
                "does it later)\n",
                (unsigned long long)cubins, (double)bytes / (1024.0 * 1024.0));
}

static void disassemble_session(const cli_launch *launch, store *database)
{
    disasm_session_result result;
    int status = disasm_session_announced(database, launch->session_dir, announce_disassembly,
                                          (void *)launch, &result);
    if (result.cubins == 0 && status == FLARE_OK)
        return;
    if (status == FLARE_ERR_UNSUPPORTED)
        fprintf(stderr,
                "flare: WARNING: %llu kept cubin(s) not disassembled (%s): instructions without a "
                "source line show no SASS text; 'flare disasm %s' does it where cuobjdump or "
                "nvdisasm is\n",
                (unsigned long long)result.cubins, result.problem, launch->session_dir);
    else if (status != FLARE_OK)
        fprintf(stderr,
                "flare: WARNING: disassembling the kept cubins failed (%s); %llu of %llu done\n",
                result.problem, (unsigned long long)result.cubins_done,
                (unsigned long long)result.cubins);
    else if (!launch->quiet && result.took_ns >= 1000000000ull)
        fprintf(stderr,
                "flare: disassembled %llu cubin(s) for the SASS text of %llu "
                "instruction(s) in %.1f s\n",
                (unsigned long long)result.cubins_done, (unsigned long long)result.given,
                (double)result.took_ns / 1e9);
}

/* What the session lost, for the closing line: every drop counter. */
typedef struct drop_tally {
    uint64_t total;
    int sources;
    char first_source[32];
    char first_detail[96];
    uint64_t first_count;
    uint64_t evicted; /* rows the flight recorder evicted, as asked: not lost */
} drop_tally;

static int tally_drop(const store_drop_row *row, void *user)
{
    drop_tally *tally = user;
    if (strcmp(row->source, "flight_recorder") == 0) {
        tally->evicted += row->count;
        return 0;
    }
    tally->total += row->count;
    if (tally->sources++ == 0 || row->count > tally->first_count) {
        cli_format_untrusted(tally->first_source, sizeof(tally->first_source), row->source);
        cli_format_untrusted(tally->first_detail, sizeof(tally->first_detail), row->detail);
        tally->first_count = row->count;
    }
    return 0;
}

int cli_launch_run(cli_launch *launch, char **command)
{
    const char *name = launch->command_name;
    int exec_failed;
    int exit_status = run_command(launch, command, &exec_failed);
    launch->process_count = 0;
    if (exec_failed) {
        /* Nothing ran: no session to keep. */
        remove_session(launch);
        return exit_status;
    }

    char error[1024];
    store *database;
    /* Every process has ended (or been killed, leaving its reserve): free
     * the space, so on a full disk the end and the counts still fit. */
    store_reserve_release_all(launch->session_dir);
    if (store_open(launch->session_dir, STORE_OPEN_WRITE, &database, error, sizeof(error)) !=
        FLARE_OK) {
        cli_failure(name, "cannot reopen the session database: %s", error);
        return exit_status;
    }
    if (store_begin(database) != FLARE_OK ||
        store_session_end(database, core_now_ns(), 1, exit_status) != FLARE_OK ||
        store_commit(database) != FLARE_OK)
        cli_failure(name, "cannot record the end of the session: %s", store_last_error(database));
    index_session(launch, database);
    disassemble_session(launch, database);
    /* A finished session as one file (if no process of it still runs). */
    store_settle(database);
    store_session_summary summary;
    memset(&summary, 0, sizeof(summary));
    store_read_session(database, &summary);
    capability_tally tally = {.launcher_pid = (int64_t)getpid()};
    store_read_capabilities(database, tally_capability, &tally);
    drop_tally drops = {0};
    store_read_drops(database, tally_drop, &drops);
    store_close(database);
    launch->process_count = summary.process_count;

    if (summary.process_count == 0) {
        fprintf(stderr,
                "flare: WARNING: no process of '%s' started a flare session, so nothing was "
                "recorded.\n"
                "flare: flare starts in a process that initialises CUDA (it is injected; %s) "
                "or that links libflare (as flare-demo does).\n"
                "flare: if the program did either, the reason is on its stderr and in "
                "%s/flare.log.\n",
                command[0],
                launch->injection_library[0] == '\0'
                    ? "but libflare.so was not found: set FLARE_LIBRARY"
                    : "needs an NVIDIA driver",
                launch->session_dir);
    } else if (!launch->quiet) {
        fprintf(stderr,
                "flare: session saved in %s: %lld process(es) (%d with CUDA tracing), %lld "
                "kernels, %lld copies and memsets, %lld scopes\n"
                "flare: see 'flare report %s'\n",
                launch->session_dir, (long long)summary.process_count, tally.cuda_processes,
                (long long)summary.kernel_count, (long long)summary.copy_count,
                (long long)summary.scope_count, launch->session_dir);
    }
    if (drops.evicted > 0 && !launch->quiet)
        fprintf(stderr,
                "flare: flight recorder: %llu older detail row(s) evicted as asked, their "
                "per-second totals kept (v_kernel_seconds, ...; 'flare report' says more)\n",
                (unsigned long long)drops.evicted);
    if (drops.total > 0)
        fprintf(stderr,
                "flare: WARNING: not everything was recorded: %llu item(s) dropped (%s: %s: "
                "%llu%s); see 'Dropped data' in 'flare report %s'\n",
                (unsigned long long)drops.total, drops.first_source, drops.first_detail,
                (unsigned long long)drops.first_count, drops.sources > 1 ? ", and more" : "",
                launch->session_dir);
    if (tally.degraded > 0)
        fprintf(stderr,
                "flare: WARNING: %d requested feature(s) degraded or unavailable (first: %s: "
                "%s); see the Capabilities table of 'flare report'\n",
                tally.degraded, tally.first_feature, tally.first_reason);
    return exit_status;
}
