/*
 * log.c: flare's own log and the log-once facility (log.h).
 *
 * Never on a hot path except through CORE_LOG_ONCE, whose repeat hits are a
 * single atomic add. Writes use write(2) on an O_APPEND descriptor so lines
 * from several threads and processes do not interleave mid-line.
 */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"

static _Atomic int log_fd = -1;
static _Atomic int log_to_stderr;
static _Atomic(core_log_once_site *) fired_sites;

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static core_log_line queue[CORE_LOG_QUEUE_CAPACITY];
static int queue_head;
static int queue_count;
static _Atomic uint64_t queue_drops;

const char *core_log_level_name(core_log_level level)
{
    switch (level) {
    case CORE_LOG_DEBUG:
        return "debug";
    case CORE_LOG_INFO:
        return "info";
    case CORE_LOG_WARNING:
        return "warning";
    case CORE_LOG_ERROR:
        return "error";
    }
    return "unknown";
}

void core_log_set_file(int fd)
{
    atomic_store(&log_fd, fd);
}

void core_log_configure_from_environment(void)
{
    const char *debug = getenv("FLARE_DEBUG");
    atomic_store(&log_to_stderr, debug != NULL && debug[0] != '\0' && strcmp(debug, "0") != 0);
}

static void enqueue(uint64_t time_ns, core_log_level level, const char *text)
{
    pthread_mutex_lock(&queue_lock);
    if (queue_count == CORE_LOG_QUEUE_CAPACITY) {
        atomic_fetch_add(&queue_drops, 1);
    } else {
        core_log_line *line = &queue[(queue_head + queue_count) % CORE_LOG_QUEUE_CAPACITY];
        line->time_ns = time_ns;
        line->level = level;
        snprintf(line->text, sizeof(line->text), "%s", text);
        queue_count++;
    }
    pthread_mutex_unlock(&queue_lock);
}

static void log_formatted(core_log_level level, const char *format, va_list arguments)
{
    char text[CORE_LOG_LINE_MAX];
    vsnprintf(text, sizeof(text), format, arguments);
    uint64_t now = core_now_ns();
    enqueue(now, level, text);

    char line[CORE_LOG_LINE_MAX + 64];
    int length = snprintf(line, sizeof(line), "flare[%ld] %s: %s\n", (long)getpid(),
                          core_log_level_name(level), text);
    if (length < 0)
        return;
    if ((size_t)length >= sizeof(line))
        length = (int)sizeof(line) - 1;
    int fd = atomic_load(&log_fd);
    if (fd >= 0 && write(fd, line, (size_t)length) < 0) {
        /* Nowhere better to report a failing log file; the database copy remains. */
    }
    if (atomic_load(&log_to_stderr) && write(STDERR_FILENO, line, (size_t)length) < 0) {
    }
}

void core_log(core_log_level level, const char *format, ...)
{
    va_list arguments;
    va_start(arguments, format);
    log_formatted(level, format, arguments);
    va_end(arguments);
}

int core_log_once_hit(core_log_once_site *site, core_log_level level, const char *format, ...)
{
    if (atomic_fetch_add_explicit(&site->hits, 1, memory_order_relaxed) != 0)
        return 0;
    core_log_once_site *head = atomic_load(&fired_sites);
    do {
        site->next = head;
    } while (!atomic_compare_exchange_weak(&fired_sites, &head, site));
    va_list arguments;
    va_start(arguments, format);
    log_formatted(level, format, arguments);
    va_end(arguments);
    return 1;
}

void core_log_once_for_each(core_log_once_visit visit, void *user)
{
    for (core_log_once_site *site = atomic_load(&fired_sites); site != NULL; site = site->next)
        visit(site->key, atomic_load_explicit(&site->hits, memory_order_relaxed), user);
}

int core_log_take(core_log_line *lines, int max)
{
    pthread_mutex_lock(&queue_lock);
    int taken = 0;
    while (taken < max && queue_count > 0) {
        lines[taken++] = queue[queue_head];
        queue_head = (queue_head + 1) % CORE_LOG_QUEUE_CAPACITY;
        queue_count--;
    }
    pthread_mutex_unlock(&queue_lock);
    return taken;
}

uint64_t core_log_queue_drops(void)
{
    return atomic_load(&queue_drops);
}
