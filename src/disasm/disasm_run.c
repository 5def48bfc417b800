/*
 * disasm_run.c: finding the disassembler and running it (disasm_run.h).
 *
 * The run is one loop of poll() on the child's two pipes, each wait bounded
 * by what is left of the deadline. When both pipes reach end of file the
 * child is about to exit: waitpid is polled (WNOHANG, short pauses) until
 * the same deadline, since a child may close its pipes and linger. Any
 * failure past the spawn kills the child's process group (a wrapper
 * script's own children hold the pipes too) and reaps the child, so no path
 * leaves a zombie, and every descriptor is closed in one place on the way
 * out.
 *
 * SIGPIPE: we only ever read from the child, and reading a pipe never raises
 * it, so the caller needs no change to its dispositions. The child gets
 * SIGPIPE's default back (a caller that ignores it must not hand that on),
 * so a disassembler still writing after we stopped reading dies of it.
 *
 * Must never: block without a bound (except the waitpid that reaps a child
 * already sent SIGKILL), leave a zombie or a descriptor, or hold more than
 * max_bytes + 2 bytes of output.
 */
#include "disasm/disasm_run.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "flare/flare.h"

extern char **environ;

/* The output buffer's first size; it doubles up to max_bytes + 2. */
#define OUTPUT_INITIAL_CAPACITY (64u * 1024u)
/* The longest pause between two looks at a child whose pipes are closed. */
#define EXIT_POLL_MAX_NS 10000000ull

/* Writes a message into buffer when the caller gave room for one. */
static void say(char *buffer, size_t size, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static void say(char *buffer, size_t size, const char *format, ...)
{
    if (buffer == NULL || size == 0)
        return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(buffer, size, format, arguments);
    va_end(arguments);
}

/* ---- finding ---- */

static int is_executable_file(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode) && access(path, X_OK) == 0;
}

/* Copies a found program's path out. FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT
 * when it does not fit. */
static int take(const char *found, char *path, size_t path_size, char *why, size_t why_size)
{
    size_t length = strlen(found);
    if (length >= path_size) {
        say(why, why_size, "the disassembler's path %s does not fit in %zu bytes", found,
            path_size);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    memcpy(path, found, length + 1);
    return FLARE_OK;
}

/* Looks for name in the directory [directory, + length) followed by suffix.
 * FLARE_ERR_NOT_FOUND when it is not there (or the path is too long to
 * exist), else take()'s result. */
static int look_in(const char *directory, size_t length, const char *suffix, const char *name,
                   char *path, size_t path_size, char *why, size_t why_size)
{
    char candidate[PATH_MAX];
    int n =
        snprintf(candidate, sizeof(candidate), "%.*s%s/%s", (int)length, directory, suffix, name);
    if (n < 0 || (size_t)n >= sizeof(candidate) || !is_executable_file(candidate))
        return FLARE_ERR_NOT_FOUND;
    return take(candidate, path, path_size, why, why_size);
}

/* One program on PATH (empty entries, the current directory, are not
 * searched), in $CUDA_HOME/bin, then in /usr/local/cuda/bin. */
static int search(const char *name, char *path, size_t path_size, char *why, size_t why_size)
{
    int result = FLARE_ERR_NOT_FOUND;
    const char *entry = getenv("PATH");
    while (entry != NULL && *entry != '\0' && result == FLARE_ERR_NOT_FOUND) {
        const char *colon = strchr(entry, ':');
        size_t length = colon != NULL ? (size_t)(colon - entry) : strlen(entry);
        if (length > 0)
            result = look_in(entry, length, "", name, path, path_size, why, why_size);
        entry = colon != NULL ? colon + 1 : NULL;
    }
    const char *toolkit_home = getenv("CUDA_HOME");
    if (result == FLARE_ERR_NOT_FOUND && toolkit_home != NULL && *toolkit_home != '\0')
        result = look_in(toolkit_home, strlen(toolkit_home), "/bin", name, path, path_size, why,
                         why_size);
    if (result == FLARE_ERR_NOT_FOUND)
        result = look_in("/usr/local/cuda", 15, "/bin", name, path, path_size, why, why_size);
    return result;
}

/* FLARE_DISASSEMBLER was set: it is the choice, with no search after it. */
static int from_variable(const char *chosen, char *path, size_t path_size, char *why,
                         size_t why_size)
{
    if (*chosen == '\0') {
        say(why, why_size, "FLARE_DISASSEMBLER is set empty: no disassembler");
        return FLARE_ERR_UNSUPPORTED;
    }
    if (!is_executable_file(chosen)) {
        say(why, why_size, "FLARE_DISASSEMBLER=%s is not an executable file", chosen);
        return FLARE_ERR_UNSUPPORTED;
    }
    return take(chosen, path, path_size, why, why_size);
}

int disasm_find(char *path, size_t path_size, char *why, size_t why_size)
{
    say(why, why_size, "%s", "");
    if (path == NULL || path_size == 0) {
        say(why, why_size, "no buffer for the disassembler's path");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    path[0] = '\0';
    const char *chosen = getenv("FLARE_DISASSEMBLER");
    if (chosen != NULL)
        return from_variable(chosen, path, path_size, why, why_size);
    static const char *const names[] = {"cuobjdump", "nvdisasm"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int result = search(names[i], path, path_size, why, why_size);
        if (result != FLARE_ERR_NOT_FOUND)
            return result;
    }
    const char *toolkit_home = getenv("CUDA_HOME");
    int have_home = toolkit_home != NULL && *toolkit_home != '\0';
    say(why, why_size,
        "no cuobjdump or nvdisasm on PATH, in $CUDA_HOME/bin (%s%s) or in /usr/local/cuda/bin; "
        "FLARE_DISASSEMBLER may name one",
        have_home ? toolkit_home : "CUDA_HOME unset", have_home ? "/bin" : "");
    return FLARE_ERR_UNSUPPORTED;
}

/* ---- the child ---- */

typedef struct child {
    pid_t pid;          /* 0 when none is running unreaped */
    int status;         /* waitpid's, once reaped */
    int out_fd, err_fd; /* read ends; -1 once closed */
    char *out;          /* stdout so far, out_length bytes, room for a NUL */
    size_t out_length, out_capacity, max_bytes;
    char err_tail[DISASM_STDERR_TAIL]; /* the last err_length bytes of stderr */
    size_t err_length;
    const char *functions; /* cuobjdump's -fun list, or NULL for all */
} child;

/* The running child's process group, for disasm_run_kill (a signal
 * handler's); 0 when none runs. */
static volatile sig_atomic_t running_group;

void disasm_run_kill(void)
{
    pid_t group = (pid_t)running_group;
    if (group > 0)
        kill(-group, SIGKILL);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* A close-on-exec pipe whose ends are above stderr: were the caller's 0, 1
 * or 2 closed, pipe2 could hand one back, and dup2 onto itself would keep
 * its close-on-exec flag. 0, or -1 with errno. */
static int open_pipe(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    for (int i = 0; i < 2; i++) {
        if (fds[i] > STDERR_FILENO)
            continue;
        int moved = fcntl(fds[i], F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        int saved = errno;
        close(fds[i]);
        fds[i] = moved;
        if (moved < 0) {
            close_fd(&fds[1 - i]);
            errno = saved;
            return -1;
        }
    }
    return 0;
}

/* posix_spawn with stdin from /dev/null, stdout and stderr to the pipes, a
 * process group of its own (so a kill reaches what it starts) and SIGPIPE
 * at its default. 0, or an errno value. */
static int spawn(child *c, const char *program, const char *cubin_path, int out_w, int err_w)
{
    const char *base = strrchr(program, '/');
    base = base != NULL ? base + 1 : program;
    char *argv[6] = {(char *)program, (char *)cubin_path, NULL, NULL, NULL, NULL};
    if (strncmp(base, "cuobjdump", 9) == 0 && c->functions != NULL) {
        argv[1] = "-sass";
        argv[2] = "-fun";
        argv[3] = (char *)c->functions;
        argv[4] = (char *)cubin_path;
    } else if (strncmp(base, "cuobjdump", 9) == 0) {
        argv[1] = "-sass";
        argv[2] = (char *)cubin_path;
    }
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    sigset_t none, pipe_signal;
    sigemptyset(&none);
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0)
        return rc;
    rc = posix_spawnattr_init(&attributes);
    if (rc != 0)
        goto destroy_actions;
    rc = posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&actions, out_w, STDOUT_FILENO);
    if (rc == 0)
        rc = posix_spawn_file_actions_adddup2(&actions, err_w, STDERR_FILENO);
    if (rc == 0)
        rc = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                                       POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(&attributes, 0);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&attributes, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&attributes, &pipe_signal);
    pid_t pid = 0;
    if (rc == 0)
        rc = posix_spawn(&pid, program, &actions, &attributes, argv, environ);
    c->pid = rc == 0 ? pid : 0;
    posix_spawnattr_destroy(&attributes);
destroy_actions:
    posix_spawn_file_actions_destroy(&actions);
    return rc;
}

/* The output buffer, the pipes and the child. On failure what was made is
 * left in c for disasm_run to undo. */
static int start(child *c, const char *program, const char *cubin_path, char *error,
                 size_t error_size)
{
    c->out_capacity =
        c->max_bytes + 2 < OUTPUT_INITIAL_CAPACITY ? c->max_bytes + 2 : OUTPUT_INITIAL_CAPACITY;
    c->out = malloc(c->out_capacity);
    if (c->out == NULL) {
        say(error, error_size, "no memory for %s's output", program);
        return FLARE_ERR_NO_MEMORY;
    }
    int out_pipe[2], err_pipe[2];
    if (open_pipe(out_pipe) != 0) {
        say(error, error_size, "could not make a pipe: %s", strerror(errno));
        return FLARE_ERR_IO;
    }
    c->out_fd = out_pipe[0];
    if (open_pipe(err_pipe) != 0) {
        say(error, error_size, "could not make a pipe: %s", strerror(errno));
        close(out_pipe[1]);
        return FLARE_ERR_IO;
    }
    c->err_fd = err_pipe[0];
    int rc = spawn(c, program, cubin_path, out_pipe[1], err_pipe[1]);
    if (rc == 0)
        running_group = c->pid;
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
        say(error, error_size, "could not start %s: %s", program, strerror(rc));
        return FLARE_ERR_IO;
    }
    /* Non-blocking read ends only: the write ends are other open files. */
    fcntl(c->out_fd, F_SETFL, fcntl(c->out_fd, F_GETFL) | O_NONBLOCK);
    fcntl(c->err_fd, F_SETFL, fcntl(c->err_fd, F_GETFL) | O_NONBLOCK);
    return FLARE_OK;
}

/* ---- reading ---- */

/* One read of stdout. FLARE_OK (data, end of file or nothing yet),
 * FLARE_ERR_FULL past max_bytes, FLARE_ERR_NO_MEMORY, FLARE_ERR_IO. */
static int read_stdout(child *c)
{
    if (c->out_length + 1 == c->out_capacity) {
        /* Only below max_bytes + 1 bytes: that many already returned FULL. */
        size_t capacity =
            c->out_capacity * 2 < c->max_bytes + 2 ? c->out_capacity * 2 : c->max_bytes + 2;
        char *grown = realloc(c->out, capacity);
        if (grown == NULL)
            return FLARE_ERR_NO_MEMORY;
        c->out = grown;
        c->out_capacity = capacity;
    }
    ssize_t n = read(c->out_fd, c->out + c->out_length, c->out_capacity - 1 - c->out_length);
    if (n > 0) {
        c->out_length += (size_t)n;
        return c->out_length > c->max_bytes ? FLARE_ERR_FULL : FLARE_OK;
    }
    if (n == 0)
        close_fd(&c->out_fd);
    else if (errno != EINTR && errno != EAGAIN)
        return FLARE_ERR_IO;
    return FLARE_OK;
}

/* One read of stderr, keeping its last DISASM_STDERR_TAIL bytes. */
static int read_stderr(child *c)
{
    char chunk[4096];
    ssize_t n = read(c->err_fd, chunk, sizeof(chunk));
    if (n == 0) {
        close_fd(&c->err_fd);
        return FLARE_OK;
    }
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? FLARE_OK : FLARE_ERR_IO;
    size_t size = (size_t)n, keep = DISASM_STDERR_TAIL;
    if (size >= keep) {
        memcpy(c->err_tail, chunk + size - keep, keep);
        c->err_length = keep;
    } else {
        size_t old = c->err_length + size > keep ? keep - size : c->err_length;
        memmove(c->err_tail, c->err_tail + c->err_length - old, old);
        memcpy(c->err_tail + old, chunk, size);
        c->err_length = old + size;
    }
    return FLARE_OK;
}

/* Milliseconds to the deadline, rounded up; 0 when it has passed. */
static int ms_left(uint64_t deadline_ns)
{
    uint64_t now = core_now_ns();
    if (now >= deadline_ns)
        return 0;
    uint64_t ms = (deadline_ns - now + 999999ull) / 1000000ull;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Reads both pipes to their end. FLARE_OK, FLARE_ERR_TIMEOUT, or
 * read_stdout's errors; FLARE_ERR_IO names the failing call in error. */
static int collect(child *c, uint64_t deadline_ns, char *error, size_t error_size)
{
    while (c->out_fd >= 0 || c->err_fd >= 0) {
        int wait_ms = ms_left(deadline_ns);
        if (wait_ms == 0)
            return FLARE_ERR_TIMEOUT;
        struct pollfd fds[2] = {{.fd = c->out_fd, .events = POLLIN},
                                {.fd = c->err_fd, .events = POLLIN}};
        int ready = poll(fds, 2, wait_ms); /* a negative fd is passed over */
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready < 0 || ((fds[0].revents | fds[1].revents) & POLLNVAL)) {
            say(error, error_size, "poll on the disassembler's pipes: %s",
                ready < 0 ? strerror(errno) : "a descriptor is not open");
            return FLARE_ERR_IO;
        }
        int result = FLARE_OK;
        if (fds[0].revents != 0)
            result = read_stdout(c);
        if (result == FLARE_OK && fds[1].revents != 0)
            result = read_stderr(c);
        if (result == FLARE_ERR_IO)
            say(error, error_size, "reading the disassembler's output: %s", strerror(errno));
        if (result != FLARE_OK)
            return result;
    }
    return FLARE_OK;
}

/* ---- ending ---- */

/* Reaps a child whose pipes are closed, looking again after pauses that
 * grow to EXIT_POLL_MAX_NS, until the deadline: FLARE_OK or
 * FLARE_ERR_TIMEOUT; FLARE_ERR_IO if someone else reaped it. */
static int wait_exit(child *c, uint64_t deadline_ns, char *error, size_t error_size)
{
    uint64_t pause_ns = 100000ull;
    for (;;) {
        pid_t reaped = waitpid(c->pid, &c->status, WNOHANG);
        if (reaped == c->pid) {
            c->pid = 0;
            running_group = 0;
            return FLARE_OK;
        }
        if (reaped < 0 && errno != EINTR) {
            say(error, error_size, "waiting for the disassembler: %s", strerror(errno));
            c->pid = 0; /* not ours to kill any more: its pid may be reused */
            running_group = 0;
            return FLARE_ERR_IO;
        }
        uint64_t now = core_now_ns();
        if (now >= deadline_ns)
            return FLARE_ERR_TIMEOUT;
        uint64_t wait_ns = pause_ns < deadline_ns - now ? pause_ns : deadline_ns - now;
        struct timespec pause = {.tv_sec = 0, .tv_nsec = (long)wait_ns};
        nanosleep(&pause, NULL);
        pause_ns = pause_ns * 2 < EXIT_POLL_MAX_NS ? pause_ns * 2 : EXIT_POLL_MAX_NS;
    }
}

/* SIGKILL to the child's process group and the child, then waitpid: bounded
 * in practice, as nothing survives SIGKILL for long. */
static void kill_and_reap(child *c)
{
    if (c->pid <= 0)
        return;
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
    while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {
    }
    c->pid = 0;
    running_group = 0;
}

/* stderr's tail on one line: control characters become spaces, the ends
 * are trimmed. */
static void printable_tail(const child *c, char *tail)
{
    size_t n = 0;
    for (size_t i = 0; i < c->err_length; i++) {
        unsigned char byte = (unsigned char)c->err_tail[i];
        tail[n++] = byte < 0x20 || byte == 0x7f ? ' ' : (char)byte;
    }
    while (n > 0 && tail[n - 1] == ' ')
        n--;
    tail[n] = '\0';
    size_t start = strspn(tail, " ");
    memmove(tail, tail + start, n - start + 1);
}

/* The outcome in words, and FLARE_ERR_IO for a child that did not exit 0. */
static int explain(const child *c, int result, const char *program, uint32_t timeout_ms,
                   char *error, size_t error_size)
{
    char tail[DISASM_STDERR_TAIL + 1];
    printable_tail(c, tail);
    const char *gap = tail[0] != '\0' ? "; stderr: " : "";
    if (result == FLARE_ERR_TIMEOUT)
        say(error, error_size, "%s timed out after %u ms and was killed%s%s", program,
            (unsigned)timeout_ms, gap, tail);
    else if (result == FLARE_ERR_FULL)
        say(error, error_size, "%s: output over %zu bytes; it was killed", program, c->max_bytes);
    else if (result == FLARE_ERR_NO_MEMORY)
        say(error, error_size, "no memory for %s's output past %zu bytes", program, c->out_length);
    if (result != FLARE_OK)
        return result;
    if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0)
        return FLARE_OK;
    if (WIFEXITED(c->status))
        say(error, error_size, "%s exited with status %d: %s", program, WEXITSTATUS(c->status),
            tail[0] != '\0' ? tail : "(nothing on stderr)");
    else
        say(error, error_size, "%s was killed by signal %d: %s", program,
            WIFSIGNALED(c->status) ? WTERMSIG(c->status) : 0,
            tail[0] != '\0' ? tail : "(nothing on stderr)");
    return FLARE_ERR_IO;
}

int disasm_run(const char *program, const char *cubin_path, uint32_t timeout_ms, size_t max_bytes,
               char **out, size_t *out_size, char *error, size_t error_size)
{
    return disasm_run_functions(program, cubin_path, NULL, timeout_ms, max_bytes, out, out_size,
                                error, error_size);
}

int disasm_run_functions(const char *program, const char *cubin_path, const char *functions,
                         uint32_t timeout_ms, size_t max_bytes, char **out, size_t *out_size,
                         char *error, size_t error_size)
{
    say(error, error_size, "%s", "");
    if (out != NULL)
        *out = NULL;
    if (out_size != NULL)
        *out_size = 0;
    if (program == NULL || cubin_path == NULL || out == NULL || out_size == NULL ||
        timeout_ms == 0 || max_bytes == 0 || max_bytes > SIZE_MAX / 2) {
        say(error, error_size, "disasm_run: invalid argument");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    uint64_t deadline_ns = core_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    child c = {.pid = 0,
               .out_fd = -1,
               .err_fd = -1,
               .max_bytes = max_bytes,
               .functions = functions != NULL && functions[0] != '\0' ? functions : NULL};
    int result = start(&c, program, cubin_path, error, error_size);
    if (result == FLARE_OK) {
        result = collect(&c, deadline_ns, error, error_size);
        if (result == FLARE_OK)
            result = wait_exit(&c, deadline_ns, error, error_size);
        kill_and_reap(&c); /* nothing to do when wait_exit reaped it */
        result = explain(&c, result, program, timeout_ms, error, error_size);
    }
    close_fd(&c.out_fd);
    close_fd(&c.err_fd);
    if (result != FLARE_OK) {
        free(c.out);
        return result;
    }
    c.out[c.out_length] = '\0';
    *out = c.out;
    *out_size = c.out_length;
    return FLARE_OK;
}
