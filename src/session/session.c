/*
 * session.c: flare_init / flare_shutdown and friends (session.h).
 *
 * Start is all-or-nothing: the backend is chosen, the participants begin in
 * order, then settings are resolved and the directory, log file and
 * database opened before the session word is published; a failure at any
 * step cancels every participant that began, in reverse. Stop unpublishes
 * first (producers go quiet), lets the collector write everything left,
 * stops and ends the participants, records still-open scopes and the
 * process end, and closes. Neither may crash or abort the host program.
 */
#include "session/session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/capability.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "core/scope.h"
#include "session/collector.h"
#include "session/delivery.h"
#include "session/participants.h"
#include "session/placement.h"
#include "store/store.h"
#include "store/store_files.h"
#include "store/store_views.h"

typedef struct session {
    core_config config;
    store *store;
    session_collector *collector;
    session_delivery *delivery; /* NULL when FLARE_DELIVERY_MS is 0 */
    const backend_descriptor *backend;
    int backend_automatic; /* chosen by "auto": an injection may replace it */
    int log_fd;
    int reserved; /* holds a disk reserve (store_files.h) */
    uint32_t generation;
    int64_t pid;
} session;

static pthread_mutex_t session_lock = PTHREAD_MUTEX_INITIALIZER;
static session *active_session;  /* guarded by session_lock */
static uint32_t last_generation; /* guarded by session_lock */
static char last_error[512];
static _Atomic int64_t active_pid;

const char *session_last_error(void)
{
    return last_error;
}

int64_t session_pid(void)
{
    return atomic_load(&active_pid);
}

const backend_descriptor *session_backend(void)
{
    pthread_mutex_lock(&session_lock);
    const backend_descriptor *backend = active_session != NULL ? active_session->backend : NULL;
    pthread_mutex_unlock(&session_lock);
    return backend;
}

FLARE_API void flare_options_init(flare_options *options)
{
    if (options == NULL)
        return;
    memset(options, 0, sizeof(*options));
    options->struct_size = sizeof(*options);
}

FLARE_API uint64_t flare_now_ns(void)
{
    return core_now_ns();
}

/* Completions of the device flare drives arrive on backend threads; each
 * becomes an event in that thread's ring. Must not block. */
static void on_backend_completion(const backend_completion *completion, void *user)
{
    (void)user;
    /* Window launch bounds and the storm guard see it first; a launch
     * storm's work (FLARE_STORM_RATE) is counted, not recorded. */
    if (!session_device_work_recorded(completion->kind == BACKEND_WORK_KERNEL))
        return;
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->start_ns = completion->start_ns;
    event->end_ns = completion->end_ns;
    event->id = completion->correlation_id;
    event->stream_id = completion->stream_id;
    event->device = completion->device;
    event->depth = 0;
    if (completion->kind == BACKEND_WORK_KERNEL) {
        event->kind = CORE_EVENT_KERNEL;
        memcpy(event->detail.kernel.grid, completion->grid, sizeof(completion->grid));
        memcpy(event->detail.kernel.block, completion->block, sizeof(completion->block));
        event->detail.kernel.shared_memory_bytes = completion->shared_memory_bytes;
        event->detail.kernel.registers_per_thread = completion->registers_per_thread;
        core_copy_name(event->name, completion->name);
    } else {
        event->kind = completion->kind == BACKEND_WORK_MEMSET ? CORE_EVENT_MEMSET : CORE_EVENT_COPY;
        event->detail.copy.bytes = completion->bytes;
        event->detail.copy.copy_kind = (int32_t)completion->copy_kind;
        event->detail.copy.status = completion->status;
        event->name[0] = '\0';
    }
    core_emit_commit(thread);
}

static void read_executable(char *buffer, size_t size)
{
    ssize_t length = readlink("/proc/self/exe", buffer, size - 1);
    if (length < 0)
        length = 0;
    buffer[length] = '\0';
}

static void read_command_line(char *buffer, size_t size)
{
    buffer[0] = '\0';
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t length = read(fd, buffer, size - 1);
    close(fd);
    if (length <= 0) {
        buffer[0] = '\0';
        return;
    }
    buffer[length] = '\0';
    for (ssize_t i = 0; i < length - 1; i++)
        if (buffer[i] == '\0')
            buffer[i] = ' ';
}

/* Why this process records nothing, where its user will look: last_error
 * (flare_last_error), stderr when flare trace launched it or FLARE_DEBUG
 * is set, and the session's flare.log when the launcher made one (the
 * launcher points there). Never creates the log or a directory. */
static void say_why_not_started(const char *error)
{
    snprintf(last_error, sizeof(last_error), "%s", error);
    const char *by_trace = getenv("FLARE_LAUNCHED_BY_TRACE");
    int launched = by_trace != NULL && strcmp(by_trace, "1") == 0;
    /* Once per process: a program may try again (flare-demo does). */
    static int said;
    if (said++ != 0)
        return;
    if (launched || getenv("FLARE_DEBUG") != NULL)
        fprintf(stderr, "flare[%ld]: not recording this process: %s\n", (long)getpid(), error);
    const char *dir = getenv("FLARE_SESSION_DIR");
    if (!launched || dir == NULL || dir[0] == '\0')
        return;
    char path[PATH_MAX + 16];
    if (snprintf(path, sizeof(path), "%s/%s", dir, STORE_LOG_NAME) >= (int)sizeof(path))
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    char line[sizeof(last_error) + 64];
    int length = snprintf(line, sizeof(line), "flare[%ld] error: not recording this process: %s\n",
                          (long)getpid(), error);
    if (length > 0 &&
        write(fd, line, (size_t)length < sizeof(line) ? (size_t)length : sizeof(line) - 1) < 0) {
    }
    close(fd);
}

static int start_session(const flare_options *options, const backend_descriptor *backend,
                         int backend_automatic)
{
    char error[sizeof(last_error)] = "";
    session *current = calloc(1, sizeof(*current));
    if (current == NULL) {
        snprintf(last_error, sizeof(last_error), "out of memory");
        return FLARE_ERR_NO_MEMORY;
    }
    current->backend = backend;
    current->backend_automatic = backend_automatic;
    current->log_fd = -1;
    current->pid = (int64_t)getpid();
    int status = core_config_resolve(options, &current->config, error, sizeof(error));
    if (status != FLARE_OK)
        goto fail_free;

    if (current->config.session_dir_given) {
        status = core_make_directories(current->config.session_dir, error, sizeof(error));
    } else {
        status =
            core_make_session_directory(current->config.output_base, current->config.session_dir,
                                        sizeof(current->config.session_dir), error, sizeof(error));
    }
    if (status != FLARE_OK)
        goto fail_free;

    /* Never through a link planted in the directory (store_files.h). */
    current->log_fd = store_open_log(current->config.session_dir);
    if (current->log_fd < 0) {
        snprintf(error, sizeof(error), "cannot write %.400s/%s: %s", current->config.session_dir,
                 STORE_LOG_NAME, strerror(errno));
        status = FLARE_ERR_IO;
        goto fail_free;
    }

    status = store_open(current->config.session_dir, STORE_OPEN_WRITE, &current->store, error,
                        sizeof(error));
    if (status != FLARE_OK)
        goto fail_log;

    char command[1024];
    char host[256] = "";
    read_command_line(command, sizeof(command));
    gethostname(host, sizeof(host) - 1);
    store_session_info info = {.command = command,
                               .start_ns = core_now_ns(),
                               .start_unix_ns = core_unix_now_ns(),
                               .host = host,
                               .flare_version = FLARE_VERSION_STRING};
    char executable[PATH_MAX];
    read_executable(executable, sizeof(executable));
    if (store_begin(current->store) != FLARE_OK ||
        store_session_begin(current->store, &info) != FLARE_OK ||
        store_process_begin(current->store, current->pid, (int64_t)getppid(), info.start_ns,
                            backend->name, executable) != FLARE_OK ||
        session_placement_begin(current->store, current->pid, host, info.start_ns,
                                (uint64_t)info.start_unix_ns) != FLARE_OK) {
        snprintf(error, sizeof(error), "cannot write the session rows: %s",
                 store_last_error(current->store));
        store_rollback(current->store);
        status = FLARE_ERR_STORE;
        goto fail_store;
    }
    if (store_commit(current->store) != FLARE_OK) {
        snprintf(error, sizeof(error), "cannot commit the session rows: %s",
                 store_last_error(current->store));
        status = FLARE_ERR_STORE;
        goto fail_store;
    }

    current->generation = ++last_generation;
    if (current->generation == 0 || current->generation > (UINT32_MAX >> 1))
        current->generation = last_generation = 1;
    core_threads_set_ring_capacity(current->config.ring_capacity);
    status = session_collector_start(current->store, backend, current->pid, current->generation,
                                     current->config.flush_interval_ms, &current->collector);
    if (status != FLARE_OK) {
        snprintf(error, sizeof(error), "cannot start the collector thread");
        goto fail_store;
    }
    core_log_set_file(current->log_fd);
    /* Space for the last transaction on a full disk: the drop counts and
     * the end must never be what the full disk loses. */
    char reserve_error[256];
    current->reserved =
        store_reserve_create(current->config.session_dir, current->pid, STORE_RESERVE_PROCESS_BYTES,
                             reserve_error, sizeof(reserve_error)) == 0;
    if (!current->reserved)
        core_log(CORE_LOG_WARNING,
                 "no disk reserve for the session's end (%s): on a full disk this process's "
                 "last counts may not be written",
                 reserve_error);
    active_session = current;
    atomic_store(&active_pid, current->pid);
    atomic_store_explicit(&core_session_word, ((uint64_t)current->generation << 1) | 1u,
                          memory_order_release);
    if (backend->device != NULL)
        backend->device->set_completion_handler(on_backend_completion, NULL);
    /* Without it, kernel-duration readings on CUDA arrive only when a CUPTI
     * buffer fills: a session that cannot ask runs on, with the reason logged. */
    if (session_delivery_start(backend, current->config.delivery_interval_ms, &current->delivery) !=
        FLARE_OK)
        core_log(CORE_LOG_WARNING,
                 "cannot start the delivery thread: kernel records arrive only as the "
                 "backend hands them over");
    core_log(CORE_LOG_INFO,
             "session started in %s (backend %s, flush every %u ms, %u events per ring)",
             current->config.session_dir, backend->name, current->config.flush_interval_ms,
             current->config.ring_capacity);
    last_error[0] = '\0';
    return FLARE_OK;

fail_store:
    store_close(current->store);
fail_log:
    close(current->log_fd);
fail_free:
    say_why_not_started(error);
    free(current);
    return status;
}

/* Sets each existing slot's drop baselines, so a session counts only its own drops. */
static void take_drop_baseline(core_thread *thread, void *user)
{
    (void)user;
    thread->ring_drops_baseline = core_ring_dropped(&thread->ring);
    thread->scope_drops_baseline =
        atomic_load_explicit(&thread->scope_depth_drops, memory_order_relaxed);
    thread->ring_drops_stored = 0;
    thread->scope_drops_stored = 0;
}

/*
 * A child made by fork() without exec inherits the session's memory but not
 * its collector thread, and shares the parent's database connection and log
 * descriptor. Using any of them from the child would corrupt the parent's
 * session, and joining the missing collector at exit would hang the child.
 * So the child stops recording: the session is switched off and abandoned
 * (not freed: its locks and handles belong to the parent). A child that
 * execs starts afresh: libflare's constructor sees FLARE_SESSION_DIR again.
 */
static void stop_recording_in_forked_child(void)
{
    atomic_store_explicit(&core_session_word, 0, memory_order_release);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    session_lock = fresh; /* a parent thread may have held it at fork time */
    active_session = NULL;
    core_log_set_file(-1);
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void install_fork_handler(void)
{
    pthread_atfork(NULL, NULL, stop_recording_in_forked_child);
}

/* Records why flare_init failed before start_session could. */
static int refuse_start(int status, const char *error)
{
    say_why_not_started(error);
    return status;
}

/* session_lock held. Chooses the backend, begins the participants, then
 * starts the session proper; any failure unwinds what began. */
static int begin_locked(const flare_options *options)
{
    char error[sizeof(last_error)] = "";
    const backend_descriptor *backend = NULL;
    int automatic = 0;
    int status =
        session_backend_choose(getenv("FLARE_BACKEND"), &backend, &automatic, error, sizeof(error));
    if (status != FLARE_OK)
        return refuse_start(status, error);
    core_log_configure_from_environment();
    core_threads_for_each(take_drop_baseline, NULL);
    core_capabilities_mark_all_changed();
    /* Set once and kept: a scope begun under it must end under it. */
    core_scope_set_observer(session_scope_observer());
    session_start start = {.backend = backend, .now_ns = core_now_ns()};
    size_t begun = 0;
    const char *failed = NULL;
    status = session_participants_begin(session_begin_order(), &start, &begun, &failed);
    if (status != FLARE_OK) {
        snprintf(error, sizeof(error), "%s could not begin: %s", failed, flare_strerror(status));
        return refuse_start(status, error);
    }
    status = start_session(options, backend, automatic);
    if (status != FLARE_OK)
        session_participants_cancel(session_begin_order(), begun);
    return status;
}

FLARE_API int flare_init(const flare_options *options)
{
    pthread_once(&fork_handler_once, install_fork_handler);
    pthread_mutex_lock(&session_lock);
    int status = FLARE_ERR_ALREADY_ACTIVE;
    if (active_session == NULL)
        status = begin_locked(options);
    pthread_mutex_unlock(&session_lock);
    return status;
}

/* Whether the flare launcher that started this session has died (killed:
 * it never records the end). Its pid comes from FLARE_LAUNCHER_PID. */
static int launcher_is_gone(void)
{
    session *current = active_session;
    pid_t launcher = (pid_t)current->config.launcher_pid;
    return launcher > 0 && kill(launcher, 0) != 0 && errno == ESRCH;
}

typedef struct open_scope_context {
    session *session;
    uint64_t end_ns;
} open_scope_context;

/* Scopes still open when the session ends are stored with the end time and a
 * still_open flag, so long-running outer scopes are not lost. */
static void record_open_scopes(core_thread *thread, void *user)
{
    open_scope_context *context = user;
    uint32_t depth = atomic_load_explicit(&thread->scope_depth, memory_order_acquire);
    if (depth > FLARE_SCOPE_DEPTH_MAX)
        depth = FLARE_SCOPE_DEPTH_MAX;
    for (uint32_t level = 0; level < depth; level++) {
        const core_scope_frame *frame = &thread->scopes[level];
        if (frame->generation != context->session->generation)
            continue;
        store_scope_row row = {.pid = context->session->pid,
                               .thread_id = thread->thread_id,
                               .instance_id = frame->instance_id,
                               .name = frame->name,
                               .depth = level,
                               .start_ns = frame->start_ns,
                               .end_ns = context->end_ns,
                               .still_open = 1};
        store_put_scope(context->session->store, &row);
    }
}

static void write_log_once_counts(const char *key, uint64_t hits, void *user)
{
    (void)user;
    if (hits > 1)
        core_log(CORE_LOG_INFO, "'%s' happened %llu times (logged once)", key,
                 (unsigned long long)hits);
}

FLARE_API int flare_shutdown(void)
{
    pthread_mutex_lock(&session_lock);
    session *current = active_session;
    if (current == NULL) {
        pthread_mutex_unlock(&session_lock);
        return FLARE_ERR_NOT_ACTIVE;
    }
    /* First, while recording is on: the delivery thread's last delivery
     * hands over what the backend still holds. */
    session_delivery_stop(current->delivery);
    atomic_store_explicit(&core_session_word, 0, memory_order_release);
    if (current->backend->device != NULL)
        current->backend->device->set_completion_handler(NULL, NULL);
    core_log_once_for_each(write_log_once_counts, NULL);
    session_collector_stats stats;
    session_collector_stop(current->collector, &stats);
    /* Whether or not the last batch can be written, the participants stop. */
    session_participants_stop(session_begin_order());

    uint64_t end_ns = core_now_ns();
    int status = FLARE_OK;
    /* The reserve goes just before the last transaction, which is small
     * (counts, capabilities, open scopes, the end), so on a full disk it
     * still fits: what was lost is always said. */
    if (current->reserved)
        store_reserve_release(current->config.session_dir, current->pid);
    int launcher_gone = current->config.launched_by_trace && launcher_is_gone();
    if (store_begin(current->store) == FLARE_OK) {
        open_scope_context context = {.session = current, .end_ns = end_ns};
        session_participants_end(session_end_order(), current->store, current->pid,
                                 current->generation, end_ns);
        /* After the collector's last commit: the guard's rows are written here. */
        core_capabilities_write(current->store, current->pid, 0);
        session_collector_write_drops(current->store, current->pid, &stats);
        core_threads_for_each(record_open_scopes, &context);
        store_process_end(current->store, current->pid, end_ns);
        session_placement_end(current->store, current->pid);
        /* Without a launcher left to end the session, each process that
         * ends says so, and the last one's end stands. */
        if (!current->config.launched_by_trace || launcher_gone)
            store_session_end(current->store, end_ns, 0, 0);
        if (store_commit(current->store) != FLARE_OK) {
            store_rollback(current->store);
            status = FLARE_ERR_STORE;
        } else if (!current->config.launched_by_trace || launcher_gone) {
            /* No launcher will: this process builds the views' indexes. */
            store_index_result indexed;
            if (store_build_indexes(current->store, &indexed) != FLARE_OK)
                core_log(CORE_LOG_WARNING,
                         "the session's indexes were not built (%s); 'flare "
                         "index' builds them",
                         store_last_error(current->store));
            store_settle(current->store); /* one file, unless another process still writes */
        }
    } else {
        status = FLARE_ERR_STORE;
    }
    if (launcher_gone)
        core_log(CORE_LOG_WARNING,
                 "the flare launcher (pid %lld) is gone: this process recorded the session's end "
                 "(the command's exit status is unknown)",
                 (long long)current->config.launcher_pid);
    core_log(CORE_LOG_INFO, "session ended: %llu events written, %llu lost",
             (unsigned long long)stats.events_written, (unsigned long long)stats.events_lost);
    core_log_set_file(-1);
    store_close(current->store);
    close(current->log_fd);
    active_session = NULL;
    free(current);
    pthread_mutex_unlock(&session_lock);
    return status;
}

FLARE_API int flare_is_active(void)
{
    return core_active_generation() != 0;
}

FLARE_API int flare_session_dir(char *buffer, size_t size)
{
    if (buffer == NULL || size == 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&session_lock);
    int status = FLARE_ERR_NOT_ACTIVE;
    if (active_session != NULL) {
        size_t length = strlen(active_session->config.session_dir);
        if (length < size) {
            memcpy(buffer, active_session->config.session_dir, length + 1);
            status = FLARE_OK;
        } else {
            status = FLARE_ERR_INVALID_ARGUMENT;
        }
    }
    pthread_mutex_unlock(&session_lock);
    return status;
}

FLARE_API int flare_flush(uint32_t timeout_ms)
{
    pthread_mutex_lock(&session_lock);
    int status = FLARE_ERR_NOT_ACTIVE;
    if (active_session != NULL)
        status =
            session_collector_flush(active_session->collector, (uint64_t)timeout_ms * 1000000ull);
    pthread_mutex_unlock(&session_lock);
    return status;
}

/* session_lock held. An automatic choice gives way to the injected backend;
 * a backend asked for (FLARE_BACKEND) stands. Returns whether the session
 * runs on the injected backend now. */
static int adopt_locked(session *current, const backend_descriptor *injected)
{
    if (current->backend == injected)
        return 1;
    if (!current->backend_automatic)
        return 0;
    core_log(CORE_LOG_INFO, "backend %s adopted (the session started on %s)", injected->name,
             current->backend->name);
    current->backend = injected;
    session_collector_adopt_backend(current->collector, injected);
    session_delivery_adopt(current->delivery, injected);
    return 1;
}

void session_start_injected(const backend_descriptor *injected)
{
    if (injected == NULL)
        return;
    if (!flare_is_active()) {
        int status = flare_init(NULL);
        if (status != FLARE_OK && status != FLARE_ERR_ALREADY_ACTIVE)
            core_log(CORE_LOG_ERROR, "injected, but no session could start: %s",
                     flare_strerror(status));
    }
    pthread_mutex_lock(&session_lock);
    /* Without a session the backend still starts: a later flare_init in
     * the program records what it sees from then on. */
    int runs = active_session == NULL || adopt_locked(active_session, injected);
    pthread_mutex_unlock(&session_lock);
    if (!runs) {
        core_log(CORE_LOG_WARNING, "injected as %s, but FLARE_BACKEND asks for another backend",
                 injected->name);
        return;
    }
    if (injected->start != NULL)
        injected->start(session_backend_host());
    session_participants_backend_started(session_begin_order(), injected);
}
