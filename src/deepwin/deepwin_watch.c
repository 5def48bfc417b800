/*
 * deepwin_watch.c: the watch on the control directory (deepwin_watch.h).
 *
 * All state is the collector's while the session runs: begin writes it
 * before the collector starts, stop and end touch it after the collector
 * stopped. It must never follow a link inside the session directory, read a
 * request twice, grow past its fixed table, or let a bad request reach the
 * coordinator.
 */
#include "deepwin/deepwin_watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "deepwin/deepwin.h"
#include "deepwin/deepwin_control.h"
#include "deepwin/deepwin_session.h"
#include "deepwin/deepwin_timer.h"
#include "flare/flare.h"

/* A change to the directory this recent may hide another one in the same
 * timestamp tick (file times move in jiffies): read it again. */
#define WATCH_FRESH_NS 20000000ll
/* A remembered name may be forgotten once this old and finished. */
#define WATCH_FORGET_AFTER_NS (60ll * 1000000000ll)
#define DROP_SOURCE           "window_control"

typedef struct seen_request {
    int64_t made_unix_ns;
    int64_t pid;
    int64_t done_unix_ns; /* past it the request can no longer open a window */
} seen_request;

static struct {
    int watching;
    char dir[PATH_MAX];
    int session_fd;
    uint64_t next_open_ns; /* the next try to open dir, after a failure */
    int64_t start_unix_ns; /* this session's start: older requests are not for it */
    int have_last;
    struct stat last;          /* the control directory as last read */
    int64_t last_list_unix_ns; /* when it was last read, wall clock */
    uint64_t last_list_ns;     /* and on flare's clock */
    int64_t floor_unix_ns;     /* names made at or before it are skipped (forgotten) */
    uint64_t unremembered;     /* the most requests one reading could not remember */
    uint64_t unscheduled;      /* requests refused by a full timer table */
    uint64_t stored_unremembered, stored_unscheduled;
    size_t seen_count;
    seen_request seen[DEEPWIN_WATCH_REMEMBERED];
} watch = {.session_fd = -1};

void deepwin_watch_begin(void)
{
    deepwin_watch_stop();
    memset(&watch, 0, sizeof(watch));
    watch.session_fd = -1;
    watch.start_unix_ns = core_unix_now_ns();
    const char *dir = getenv("FLARE_SESSION_DIR");
    if (dir != NULL && dir[0] != '\0') {
        char cwd[PATH_MAX];
        int written = 0;
        /* Absolute now: the program may change its directory later. */
        if (dir[0] == '/')
            written = snprintf(watch.dir, sizeof(watch.dir), "%s", dir);
        else if (getcwd(cwd, sizeof(cwd)) != NULL)
            written = snprintf(watch.dir, sizeof(watch.dir), "%s/%s", cwd, dir);
        watch.watching = written > 0 && (size_t)written < sizeof(watch.dir);
    }
    deepwin_timer_begin();
}

void deepwin_watch_stop(void)
{
    deepwin_timer_stop();
    if (watch.session_fd >= 0)
        close(watch.session_fd);
    watch.session_fd = -1;
}

static int64_t time_of(struct timespec time)
{
    return (int64_t)time.tv_sec * 1000000000ll + time.tv_nsec;
}

/* ---- the names read so far ---- */

static seen_request *find_seen(int64_t made_unix_ns, int64_t pid)
{
    for (size_t i = 0; i < watch.seen_count; i++)
        if (watch.seen[i].made_unix_ns == made_unix_ns && watch.seen[i].pid == pid)
            return &watch.seen[i];
    return NULL;
}

/* Forgets names made over a minute ago whose windows can no longer open,
 * raising the floor past them so they are not read again. */
static void forget_finished(int64_t unix_now)
{
    size_t kept = 0;
    for (size_t i = 0; i < watch.seen_count; i++) {
        seen_request *entry = &watch.seen[i];
        if (entry->made_unix_ns < unix_now - WATCH_FORGET_AFTER_NS &&
            entry->done_unix_ns < unix_now) {
            if (entry->made_unix_ns > watch.floor_unix_ns)
                watch.floor_unix_ns = entry->made_unix_ns;
            continue;
        }
        watch.seen[kept++] = *entry;
    }
    watch.seen_count = kept;
}

/* A new entry for a name, or NULL when the table is full even after
 * forgetting what can be. */
static seen_request *remember(int64_t made_unix_ns, int64_t pid, int64_t unix_now)
{
    if (watch.seen_count == DEEPWIN_WATCH_REMEMBERED)
        forget_finished(unix_now);
    if (watch.seen_count == DEEPWIN_WATCH_REMEMBERED)
        return NULL;
    seen_request *entry = &watch.seen[watch.seen_count++];
    *entry = (seen_request){.made_unix_ns = made_unix_ns, .pid = pid, .done_unix_ns = 0};
    return entry;
}

/* ---- one request ---- */

/* request (read and valid) as a timed window. entry learns when it stops
 * mattering. */
static void schedule(const deepwin_control_request *request, const char *name, seen_request *entry)
{
    /* The wall clock against flare's, read now rather than at the session's
     * start, so a clock stepped since then is taken into account. */
    uint64_t before = core_now_ns();
    int64_t unix_now = core_unix_now_ns();
    uint64_t now_ns = before + (core_now_ns() - before) / 2;
    int64_t ahead = request->at_unix_ns - unix_now;
    int64_t latest = (int64_t)DEEPWIN_WATCH_LATE_MAX_NS;
    entry->done_unix_ns =
        request->at_unix_ns > INT64_MAX - latest ? INT64_MAX : request->at_unix_ns + latest;
    char when[DEEPWIN_CONTROL_TIME_MAX], length[32], late[32];
    deepwin_control_format_time(request->at_unix_ns, 0, when, sizeof(when));
    core_duration_format(request->for_ns, length, sizeof(length));
    if (ahead < -latest) {
        core_duration_format((uint64_t)(-ahead), late, sizeof(late));
        core_log(CORE_LOG_WARNING,
                 "window request %s ignored: its time, %s, passed %s ago (a window opens at most "
                 "10s late)",
                 name, when, late);
        return;
    }
    if (ahead > (int64_t)DEEPWIN_SCHEDULE_MAX_NS) {
        core_log(CORE_LOG_WARNING, "window request %s ignored: %s is more than 24h ahead", name,
                 when);
        return;
    }
    /* A time already past stays in the past (the window opens at once and
     * its log line says how late). */
    uint64_t at_ns = 1;
    if (ahead >= 0)
        at_ns = now_ns + (uint64_t)ahead;
    else if ((uint64_t)(-ahead) < now_ns)
        at_ns = now_ns - (uint64_t)(-ahead);
    deepwin_timed_window window = {
        .at_ns = at_ns,
        .latest_ns = at_ns + (uint64_t)latest,
        .for_ns = request->for_ns,
    };
    char time_of_day[DEEPWIN_CONTROL_TIME_MAX];
    deepwin_control_format_time(request->at_unix_ns, 1, time_of_day, sizeof(time_of_day));
    snprintf(window.label, sizeof(window.label), "flare window open %s", time_of_day);
    snprintf(window.source, sizeof(window.source), "%.*s", (int)sizeof(window.source) - 1, name);
    if (deepwin_timer_add(&window) != FLARE_OK) {
        watch.unscheduled++;
        core_log(CORE_LOG_WARNING, "window request %s ignored: %d timed windows wait already", name,
                 DEEPWIN_TIMER_CAPACITY);
        return;
    }
    core_log(CORE_LOG_INFO, "window request %s: a deep window opens at %s for %s", name, when,
             length);
    /* The engine may need time to set up (about 0.8 s for CUDA PM sampling
     * when no rule asked for it earlier): started now, it is ready at the
     * window's time instead of the window running without it. */
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (ahead > 0 && coordinator != NULL)
        deepwin_prepare_engine(coordinator);
}

/* Reads the request name (made by pid at made_unix_ns) and schedules it;
 * a bad one is logged, once: it is remembered all the same. */
static void take_request(int control_fd, const char *name, int64_t made_unix_ns, int64_t pid,
                         seen_request *entry)
{
    char text[DEEPWIN_CONTROL_REQUEST_MAX + 1], why[192];
    size_t length = 0;
    deepwin_control_request request = {.requested_unix_ns = made_unix_ns, .requested_by = pid};
    entry->done_unix_ns = made_unix_ns; /* a bad request is finished at once */
    int status =
        deepwin_control_read(control_fd, name, text, sizeof(text), &length, why, sizeof(why));
    if (status == FLARE_OK)
        status = deepwin_control_parse_request(text, length, &request, why, sizeof(why));
    if (status == FLARE_OK && request.requested_by != pid) {
        snprintf(why, sizeof(why), "requested_by=%lld, but its name says pid %lld",
                 (long long)request.requested_by, (long long)pid);
        status = FLARE_ERR_INVALID_ARGUMENT;
    }
    if (status != FLARE_OK) {
        core_log(CORE_LOG_WARNING, "window request %s/%s/%s ignored: %s", watch.dir,
                 DEEPWIN_CONTROL_DIR, name, why);
        return;
    }
    schedule(&request, name, entry);
}

/* ---- the directory ---- */

/* Reads the control directory and takes every request not read yet. */
static void read_requests(int64_t unix_now)
{
    int control_fd = deepwin_control_open_dir(watch.session_fd);
    if (control_fd < 0)
        return;
    DIR *listing = fdopendir(control_fd);
    if (listing == NULL) {
        close(control_fd);
        return;
    }
    uint64_t unremembered = 0;
    struct dirent *item;
    while ((item = readdir(listing)) != NULL) {
        int64_t made_unix_ns, pid;
        if (deepwin_control_parse_name(item->d_name, &made_unix_ns, &pid) != 0)
            continue; /* not a request: ., .., a temporary file, anything else */
        if (made_unix_ns < watch.start_unix_ns || made_unix_ns <= watch.floor_unix_ns)
            continue; /* made before this session began, or forgotten */
        if (find_seen(made_unix_ns, pid) != NULL)
            continue;
        seen_request *entry = remember(made_unix_ns, pid, unix_now);
        if (entry == NULL) {
            unremembered++;
            CORE_LOG_ONCE("windows.control_full", CORE_LOG_WARNING,
                          "window request %s ignored: %d requests wait or ran in the last minute "
                          "(counted as drops)",
                          item->d_name, DEEPWIN_WATCH_REMEMBERED);
            continue;
        }
        take_request(control_fd, item->d_name, made_unix_ns, pid, entry);
    }
    closedir(listing);
    if (unremembered > watch.unremembered)
        watch.unremembered = unremembered;
}

/* Opens the session directory once (a failure is tried again each second).
 * 0, or -1. */
static int open_session_dir(uint64_t now_ns)
{
    if (watch.session_fd >= 0)
        return 0;
    if (now_ns < watch.next_open_ns)
        return -1;
    watch.session_fd = open(watch.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (watch.session_fd >= 0)
        return 0;
    watch.next_open_ns = now_ns + DEEPWIN_WATCH_RESCAN_NS;
    CORE_LOG_ONCE("windows.control_dir", CORE_LOG_WARNING,
                  "cannot watch %s for flare window open requests: %s", watch.dir, strerror(errno));
    return -1;
}

/* Whether the control directory (info) should be read now. */
static int worth_reading(const struct stat *info, uint64_t now_ns)
{
    if (!watch.have_last || info->st_ino != watch.last.st_ino ||
        time_of(info->st_mtim) != time_of(watch.last.st_mtim) ||
        time_of(info->st_ctim) != time_of(watch.last.st_ctim))
        return 1;
    /* The last reading began so soon after the last change that another
     * change in the same tick would not have moved the times. */
    int64_t after_change = watch.last_list_unix_ns - time_of(info->st_mtim);
    if (after_change < WATCH_FRESH_NS && after_change > -(int64_t)DEEPWIN_WATCH_RESCAN_NS)
        return 1;
    return now_ns - watch.last_list_ns >= DEEPWIN_WATCH_RESCAN_NS;
}

static void look(uint64_t now_ns)
{
    if (open_session_dir(now_ns) != 0)
        return;
    struct stat info;
    if (fstatat(watch.session_fd, DEEPWIN_CONTROL_DIR, &info, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT)
            CORE_LOG_ONCE("windows.control_stat", CORE_LOG_WARNING, "cannot look at %s/%s: %s",
                          watch.dir, DEEPWIN_CONTROL_DIR, strerror(errno));
        return; /* ENOENT: no request was ever made */
    }
    if (!S_ISDIR(info.st_mode)) {
        CORE_LOG_ONCE("windows.control_link", CORE_LOG_WARNING,
                      "%s/%s is not a directory (a link or a file): flare window open requests "
                      "are not read",
                      watch.dir, DEEPWIN_CONTROL_DIR);
        return;
    }
    if (!worth_reading(&info, now_ns))
        return;
    int64_t unix_now = core_unix_now_ns();
    watch.last = info;
    watch.have_last = 1;
    watch.last_list_unix_ns = unix_now;
    watch.last_list_ns = now_ns;
    read_requests(unix_now);
}

static void write_drops(store *database, int64_t pid)
{
    if (watch.unremembered != watch.stored_unremembered &&
        store_set_drops(database, pid, DROP_SOURCE, "window requests not read (too many at once)",
                        watch.unremembered) == FLARE_OK)
        watch.stored_unremembered = watch.unremembered;
    if (watch.unscheduled != watch.stored_unscheduled &&
        store_set_drops(database, pid, DROP_SOURCE,
                        "window requests not scheduled (too many waiting)",
                        watch.unscheduled) == FLARE_OK)
        watch.stored_unscheduled = watch.unscheduled;
}

void deepwin_watch_beat(store *database, int64_t pid, uint64_t now_ns)
{
    if (watch.watching)
        look(now_ns);
    deepwin_timer_beat();
    write_drops(database, pid);
}

void deepwin_watch_end(store *database, int64_t pid)
{
    write_drops(database, pid);
}
