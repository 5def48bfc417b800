/*
 * deepwin_session.h: the process's one window coordinator, tied to the
 * session: flare_window_open/close, scheduled windows (FLARE_DEEP_AFTER /
 * FLARE_DEEP_FOR), the collector's beat and the records it stores.
 *
 * Owns the process-wide coordinator (created at the first session, kept for
 * the life of the process like the thread slots, so a late caller can never
 * touch freed memory) and the launch count that launch bounds use. Only
 * deepwin_session_count_launch may run on a hot path (one relaxed atomic
 * add); everything else takes locks and must stay off application hot paths.
 */
#ifndef FLARE_DEEPWIN_DEEPWIN_SESSION_H
#define FLARE_DEEPWIN_DEEPWIN_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "store/store.h"
#include "deepwin/deepwin.h"

/* Called by flare_init before the collector starts: resets the coordinator
 * for a new session, arming default_engine (the session backend's deep
 * engine, may be NULL) unless deepwin_session_set_engine chose one, and
 * reads FLARE_DEEP_AFTER / FLARE_DEEP_FOR / FLARE_DEEP_ENGINE and the deep
 * budget of auto windows, FLARE_DEEP_BUDGET (malformed: auto windows are
 * refused, and a scheduled auto window is ignored). A bad value
 * is logged and recorded as a degraded "deep_windows" capability; it never
 * stops the session (the CLI refuses bad values before the command runs). */
void deepwin_session_begin(uint64_t start_ns, const backend_engine_ops *default_engine);
/* Undoes deepwin_session_begin when the session could not start: no window
 * opens, nothing is written. */
void deepwin_session_cancel(void);
/* Whether a session's windows are running (begun, not yet ended). */
int deepwin_session_running(void);
/* The collector's beat, inside its open batch at every poll (5 ms): starts a due
 * scheduled window, runs deepwin_tick, and writes finished windows. */
void deepwin_session_beat(store *database, int64_t pid, uint64_t now_ns);
/* Called by flare_shutdown inside its last batch, after the collector has
 * stopped: closes any window with reason "session end" and writes it. */
void deepwin_session_end(store *database, int64_t pid, uint64_t end_ns);
/* One host kernel launch (hot path: a relaxed atomic add). */
void deepwin_session_count_launch(void);
/* Launches counted since the process started (every session's). */
uint64_t deepwin_session_launches(void);
/* The engine windows arm from the next window on, in this session and the
 * next ones (until then, the default_engine each begin is given). NULL:
 * windows open with no engine. */
void deepwin_session_set_engine(const backend_engine_ops *engine);
/* The PC sampling engine for windows that ask for pc, from now on (NULL:
 * none; such windows fall back to the engine above). */
void deepwin_session_set_pc_engine(const backend_engine_ops *engine);
/* The same for the SASS metrics engine of windows that ask for sass. */
void deepwin_session_set_sass_engine(const backend_engine_ops *engine);
/* The process's coordinator (NULL before the first session). For tests and
 * the evaluator. */
deepwin_coordinator *deepwin_session_coordinator(void);

/* The latest a scheduled window may open after the session starts
 * (FLARE_DEEP_AFTER, --deep-after); FLARE_DEEP_FOR and --deep-for are bound
 * by DEEPWIN_DURATION_MAX_NS. Both are read with core_duration_parse, from
 * 1 ns up. */
#define DEEPWIN_SCHEDULE_MAX_NS (24ull * 3600ull * 1000000000ull)

#endif /* FLARE_DEEPWIN_DEEPWIN_SESSION_H */
