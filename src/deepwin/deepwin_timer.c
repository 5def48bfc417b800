/*
 * deepwin_timer.c: timed deep-profiling windows and the thread that opens
 * them on time (deepwin_timer.h).
 *
 * One mutex guards the table and the thread's state; it is never held
 * across a coordinator call, so the beat and the thread can both fire due
 * windows and each window is taken out of the table, under the mutex, by
 * exactly one of them. It must never take the session's lock (the session
 * joins this thread while holding it), never open a window outside a
 * session, and never let the application's signals reach its thread.
 */
#include "deepwin/deepwin_timer.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/duration.h"
#include "core/log.h"
#include "deepwin/deepwin_session.h"
#include "flare/flare.h"

typedef struct timer_slot {
    deepwin_timed_window window;
    uint64_t next_try_ns; /* after a busy coordinator; 0 at first */
    /* Not a window to open but the coordinator's tick at the end of one
     * opened here, so it closes on time too, whatever the beat is doing. */
    int tick_only;
} timer_slot;

static pthread_mutex_t timer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t timer_wake;
static pid_t timer_owner; /* the process whose lock, condition and thread these are */
/* Guarded by timer_lock. */
static timer_slot slots[DEEPWIN_TIMER_CAPACITY];
static size_t slot_count;
static int stopping;
static int thread_running;
static int thread_failed;
static pthread_t timer_thread;

void deepwin_timer_begin(void)
{
    if (timer_owner != getpid()) {
        /* First use, or a child made by fork(): the parent's thread does not
         * exist here and its lock may have been held at the fork. */
        pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
        timer_lock = fresh;
        core_cond_init_monotonic(&timer_wake);
        thread_running = 0;
        timer_owner = getpid();
    }
    pthread_mutex_lock(&timer_lock);
    slot_count = 0;
    stopping = 0;
    thread_failed = 0;
    pthread_mutex_unlock(&timer_lock);
}

/* timer_lock held: the slot to fire first (its time or its retry, whichever
 * is later), or -1 when none waits. */
static long earliest_slot(uint64_t *due_ns)
{
    long best = -1;
    uint64_t best_due = UINT64_MAX;
    for (size_t i = 0; i < slot_count; i++) {
        uint64_t due = slots[i].window.at_ns > slots[i].next_try_ns ? slots[i].window.at_ns
                                                                    : slots[i].next_try_ns;
        if (due < best_due) {
            best_due = due;
            best = (long)i;
        }
    }
    *due_ns = best_due;
    return best;
}

/* timer_lock held: adds a slot (a full table drops it: the beat still
 * closes the window, within a beat). */
static void add_locked(const timer_slot *slot)
{
    if (slot_count < DEEPWIN_TIMER_CAPACITY && !stopping)
        slots[slot_count++] = *slot;
}

/* Asks for slot's window now (or, for a tick, runs the coordinator's tick:
 * a window whose duration is reached closes). Returns 1 when it should be
 * tried again (the coordinator was busy and its latest time is not past),
 * else 0; *close_ns is set when a window opened, to its end. */
static int fire(const timer_slot *slot, uint64_t *close_ns)
{
    const deepwin_timed_window *window = &slot->window;
    deepwin_coordinator *coordinator = deepwin_session_coordinator();
    if (coordinator == NULL || !deepwin_session_running())
        return 0;
    uint64_t now_ns = core_now_ns();
    if (slot->tick_only) {
        deepwin_tick(coordinator, now_ns, deepwin_session_launches());
        return 0;
    }
    char late[32];
    if (now_ns > window->latest_ns) {
        core_duration_format(now_ns - window->at_ns, late, sizeof(late));
        core_log(CORE_LOG_WARNING,
                 "deep window of %s not opened: %s after its time, another window was still "
                 "open",
                 window->source, late);
        return 0;
    }
    deepwin_token token = {.kind = DEEPWIN_TOKEN_SCHEDULED};
    snprintf(token.label, sizeof(token.label), "%s", window->label);
    deepwin_bounds bounds = {.max_duration_ns = window->for_ns, .max_launches = 0};
    deepwin_request_result result;
    int status = deepwin_request_open(coordinator, &token, &bounds, NULL, now_ns, &result);
    if (status == FLARE_OK) {
        /* Opened now, not at the next beat: the engine is armed here. */
        deepwin_tick(coordinator, now_ns, deepwin_session_launches());
        *close_ns = now_ns + window->for_ns;
        core_log(CORE_LOG_INFO, "deep window %llu of %s opened %.3f ms after its time",
                 (unsigned long long)result.window_id, window->source,
                 (double)(int64_t)(now_ns - window->at_ns) / 1e6);
        return 0;
    }
    if (status == FLARE_ERR_STATE) {
        CORE_LOG_ONCE("windows.timed_busy", CORE_LOG_INFO, "deep window of %s waits: %s",
                      window->source, result.message);
        return 1;
    }
    core_log(CORE_LOG_WARNING, "deep window of %s not opened: %s", window->source, result.message);
    return 0;
}

/* timer_lock held (released around each window it fires): fires every
 * window that is due. */
static void fire_due_locked(void)
{
    for (;;) {
        uint64_t due_ns;
        long index = earliest_slot(&due_ns);
        if (index < 0 || due_ns > core_now_ns() || stopping)
            return;
        timer_slot slot = slots[index];
        slots[index] = slots[--slot_count];
        pthread_mutex_unlock(&timer_lock);
        uint64_t close_ns = 0;
        int again = fire(&slot, &close_ns);
        pthread_mutex_lock(&timer_lock);
        if (again) {
            slot.next_try_ns = core_now_ns() + DEEPWIN_TIMER_RETRY_NS;
            add_locked(&slot);
        } else if (close_ns != 0) {
            timer_slot tick = {.window = slot.window, .tick_only = 1};
            tick.window.at_ns = close_ns;
            add_locked(&tick);
        }
    }
}

static void *timer_main(void *argument)
{
    (void)argument;
    /* Named for top -H and ps; its own timer slack only (1 ns instead of
     * the default 50 us), so it wakes when asked, not when convenient. */
    pthread_setname_np(pthread_self(), "flare-window");
    prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    pthread_mutex_lock(&timer_lock);
    while (!stopping) {
        uint64_t due_ns;
        if (earliest_slot(&due_ns) < 0) {
            pthread_cond_wait(&timer_wake, &timer_lock);
            continue;
        }
        if (core_now_ns() < due_ns) {
            struct timespec deadline = {.tv_sec = (time_t)(due_ns / 1000000000ull),
                                        .tv_nsec = (long)(due_ns % 1000000000ull)};
            pthread_cond_timedwait(&timer_wake, &timer_lock, &deadline);
            continue;
        }
        fire_due_locked();
    }
    pthread_mutex_unlock(&timer_lock);
    return NULL;
}

/* timer_lock held: starts the thread, with every signal blocked so the
 * application's signals never land on it. On failure the beat fires the
 * windows (later: within a beat). */
static void start_thread_locked(void)
{
    sigset_t all, previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    int error = pthread_create(&timer_thread, NULL, timer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    if (error != 0) {
        thread_failed = 1;
        core_log(CORE_LOG_WARNING,
                 "cannot start the window timer thread (%s): timed windows open on the "
                 "collector's beat, up to 5 ms late",
                 strerror(error));
        return;
    }
    thread_running = 1;
}

int deepwin_timer_add(const deepwin_timed_window *window)
{
    if (timer_owner != getpid())
        return FLARE_ERR_STATE; /* no session began in this process */
    pthread_mutex_lock(&timer_lock);
    if (slot_count == DEEPWIN_TIMER_CAPACITY || stopping) {
        pthread_mutex_unlock(&timer_lock);
        return FLARE_ERR_STATE;
    }
    timer_slot *slot = &slots[slot_count++];
    slot->window = *window;
    slot->window.label[DEEPWIN_LABEL_MAX - 1] = '\0';
    slot->window.source[sizeof(slot->window.source) - 1] = '\0';
    slot->next_try_ns = 0;
    if (!thread_running && !thread_failed)
        start_thread_locked();
    pthread_cond_signal(&timer_wake);
    pthread_mutex_unlock(&timer_lock);
    return FLARE_OK;
}

void deepwin_timer_beat(void)
{
    if (timer_owner != getpid())
        return;
    pthread_mutex_lock(&timer_lock);
    if (slot_count > 0)
        fire_due_locked();
    pthread_mutex_unlock(&timer_lock);
}

void deepwin_timer_stop(void)
{
    if (timer_owner != getpid())
        return; /* never begun in this process */
    pthread_mutex_lock(&timer_lock);
    stopping = 1;
    for (size_t i = 0; i < slot_count; i++)
        if (!slots[i].tick_only)
            core_log(CORE_LOG_INFO,
                     "deep window of %s not opened: the session ended before its time",
                     slots[i].window.source);
    slot_count = 0;
    int joining = thread_running;
    thread_running = 0;
    pthread_cond_broadcast(&timer_wake);
    pthread_mutex_unlock(&timer_lock);
    if (joining)
        pthread_join(timer_thread, NULL);
}
