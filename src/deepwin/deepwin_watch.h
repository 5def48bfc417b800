/*
 * deepwin_watch.h: each process's watch on its session's control directory
 * (deepwin_control.h): a request that `flare window open` leaves there
 * becomes a timed window (deepwin_timer.h) that opens at the requested wall
 * time in every process of the session.
 *
 * The session directory is FLARE_SESSION_DIR, read once at begin (the
 * launcher, `flare trace` or `flare replay`, sets it for every process of a
 * session). A process without it does not watch: a program that starts its
 * own session elsewhere with flare_init cannot be reached this way.
 *
 * On each beat (collector thread, every 5 ms) the watch costs one fstatat of
 * the control directory: it reads the directory only when its times or inode
 * changed, again while its last change is too recent to trust the
 * timestamps' granularity (20 ms), and at least once a second. Each new
 * request is read once: at most DEEPWIN_WATCH_REMEMBERED names are
 * remembered (old finished ones are forgotten to make room; names older than
 * the oldest forgotten one are skipped from then on), and requests that
 * cannot be remembered are counted as drops. Requests made before this
 * process's session began are not for it. A malformed request is logged once
 * and skipped. A request is opened on time, or at once when it is seen late,
 * up to DEEPWIN_WATCH_LATE_MAX_NS after its time; later it is logged and
 * skipped.
 *
 * Must never: follow a link inside the session directory, read a request
 * twice, block the beat on anything but a small directory and a small file,
 * or stop the session over a bad request.
 */
#ifndef FLARE_DEEPWIN_DEEPWIN_WATCH_H
#define FLARE_DEEPWIN_DEEPWIN_WATCH_H

#include <stdint.h>

#include "store/store.h"

#define DEEPWIN_WATCH_REMEMBERED 256
/* The latest a window opens after its requested time (seen late, or the
 * coordinator busy with another window). */
#define DEEPWIN_WATCH_LATE_MAX_NS (10ull * 1000000000ull)
/* How often the control directory is read even when it seems unchanged. */
#define DEEPWIN_WATCH_RESCAN_NS 1000000000ull

/* Session thread, before the collector starts: reads FLARE_SESSION_DIR and
 * notes when this session began; nothing is opened yet. */
void deepwin_watch_begin(void);
/* The collector's beat: looks at the control directory, schedules new
 * requests, fires timed windows that are due, and stores the drop counts. */
void deepwin_watch_beat(store *database, int64_t pid, uint64_t now_ns);
/* After the collector stopped (or when the session could not start): stops
 * the timer thread and closes the session directory. Idempotent. */
void deepwin_watch_stop(void);
/* Inside the session's last batch: the final drop counts. */
void deepwin_watch_end(store *database, int64_t pid);

#endif /* FLARE_DEEPWIN_DEEPWIN_WATCH_H */
