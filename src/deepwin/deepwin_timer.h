/*
 * deepwin_timer.h: deep-profiling windows that must open at a given moment,
 * on time: the windows `flare window open` asks for (deepwin_watch.h), which
 * several processes open together.
 *
 * The collector's beat comes every 5 ms, and in a session of several
 * processes it can wait for another process's batch (one writer at a time),
 * so a window opened on the beat would be up to a flush interval late. A
 * timed window is therefore opened by a small thread of its own,
 * "flare-window", which sleeps until the window's time on flare's clock
 * (CLOCK_MONOTONIC, with a timer slack of 1 ns for itself) and then asks the
 * coordinator and runs its tick at once, so the record's opened_ns is the
 * moment it woke; it runs the coordinator's tick again at the window's end,
 * so the window closes on time as well (reason "duration"). The beat does
 * the same for anything already due, so a window still opens and closes if
 * the thread could not start. The thread starts at the
 * session's first timed window and is joined at its stop; a session that
 * never gets one never has it.
 *
 * A window that finds the coordinator busy (another window open) is tried
 * again every 5 ms until its latest time; then it is given up and logged.
 * The table holds DEEPWIN_TIMER_CAPACITY windows; adding to a full one
 * fails. Must never: open a window outside a session, open one twice, take
 * the session's lock, or block the beat beyond one coordinator request.
 */
#ifndef FLARE_DEEPWIN_DEEPWIN_TIMER_H
#define FLARE_DEEPWIN_DEEPWIN_TIMER_H

#include <stddef.h>
#include <stdint.h>

#include "deepwin/deepwin.h"
#include "deepwin/deepwin_control.h"

#define DEEPWIN_TIMER_CAPACITY 64
/* How often a window that found the coordinator busy is tried again. */
#define DEEPWIN_TIMER_RETRY_NS 5000000ull

typedef struct deepwin_timed_window {
    uint64_t at_ns;                        /* flare's clock: when it opens */
    uint64_t latest_ns;                    /* the latest it may still open; later, it is given up */
    uint64_t for_ns;                       /* its duration bound, 1 ns..DEEPWIN_DURATION_MAX_NS */
    char label[DEEPWIN_LABEL_MAX];         /* the record's label (token kind "scheduled") */
    char source[DEEPWIN_CONTROL_NAME_MAX]; /* what asked, for the log */
} deepwin_timed_window;

/* A new session: no window waits. Also notices a process made by fork()
 * (whose parent's thread does not exist here) and starts afresh. Session
 * thread, before the collector starts. */
void deepwin_timer_begin(void);
/* Adds window. FLARE_OK, or FLARE_ERR_STATE when DEEPWIN_TIMER_CAPACITY
 * windows wait already. Any thread. */
int deepwin_timer_add(const deepwin_timed_window *window);
/* The beat: opens any window that is due and was not opened yet. */
void deepwin_timer_beat(void);
/* Stops the thread (joined) and forgets the windows still waiting, each
 * logged as not opened. After the collector stopped; idempotent. */
void deepwin_timer_stop(void);

#endif /* FLARE_DEEPWIN_DEEPWIN_TIMER_H */
