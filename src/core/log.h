/*
 * log.h: flare's own log, and the log-once facility.
 *
 * Lines go to flare.log in the session directory, into the session database
 * (through a bounded queue the collector drains; overflow is counted), and
 * to stderr only when FLARE_DEBUG is set: a library inside someone else's
 * process must not write to their terminal by default. CORE_LOG_ONCE logs
 * the first occurrence of an error at one call site and counts the rest, so
 * an error on a hot path costs one atomic add after the first time.
 */
#ifndef FLARE_CORE_LOG_H
#define FLARE_CORE_LOG_H

#include <stdatomic.h>
#include <stdint.h>

typedef enum core_log_level {
    CORE_LOG_DEBUG = 0,
    CORE_LOG_INFO = 1,
    CORE_LOG_WARNING = 2,
    CORE_LOG_ERROR = 3,
} core_log_level;

const char *core_log_level_name(core_log_level level);

void core_log(core_log_level level, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* Where lines go: the session's log file (fd -1 for none). Called by the
 * session at start and end. */
void core_log_set_file(int fd);
/* Re-reads FLARE_DEBUG. */
void core_log_configure_from_environment(void);

typedef struct core_log_once_site {
    _Atomic uint64_t hits;
    struct core_log_once_site *next; /* in the list of sites that fired */
    const char *key;
} core_log_once_site;

/* Logs on the site's first hit (returns 1), counts later hits (returns 0). */
int core_log_once_hit(core_log_once_site *site, core_log_level level, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

#define CORE_LOG_ONCE(key_, level_, ...)                                                           \
    do {                                                                                           \
        static core_log_once_site log_once_site_ = {.key = (key_)};                                \
        core_log_once_hit(&log_once_site_, (level_), __VA_ARGS__);                                 \
    } while (0)

/* Visits every site that fired at least once, with its total hit count. */
typedef void (*core_log_once_visit)(const char *key, uint64_t hits, void *user);
void core_log_once_for_each(core_log_once_visit visit, void *user);

/* The bounded queue of lines waiting for the database. */
#define CORE_LOG_QUEUE_CAPACITY 256
#define CORE_LOG_LINE_MAX       512
typedef struct core_log_line {
    uint64_t time_ns;
    core_log_level level;
    char text[CORE_LOG_LINE_MAX];
} core_log_line;
/* Moves up to max queued lines into lines; returns how many. */
int core_log_take(core_log_line *lines, int max);
/* Lines lost because the queue was full. */
uint64_t core_log_queue_drops(void);

#endif /* FLARE_CORE_LOG_H */
