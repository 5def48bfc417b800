/*
 * counters_session.h: what a session does with counters and with scopes
 * across threads: a baseline when it starts, samples at each commit, and
 * scopes still open when it ends.
 *
 * Owns: the per-session baseline of every counter (so ticks from before the
 * session, or from an earlier one, are never counted in it) and the record
 * of what has been committed to the session database. Used by the session
 * (begin/end, under its lock, while no collector runs) and by the collector
 * (write/committed, on its thread); never by two threads at once, and never
 * on an application's hot path.
 */
#ifndef FLARE_COUNTERS_COUNTERS_SESSION_H
#define FLARE_COUNTERS_COUNTERS_SESSION_H

#include <stdint.h>

#include "flare/flare.h"
#include "store/store.h"

/* The table this copy of libflare reads and writes counters through: its
 * own, or the one of the copy it forwards to. */
const flare_runtime_abi *counters_active_table(void);

/* Takes the baseline: the value and rejection count of every counter now. */
void counters_session_begin(void);
/* Stops recording (after the collector's last commit). */
void counters_session_end(void);

/*
 * Inside the collector's open batch: a counters row for each counter not
 * yet written, a sample (time_ns, value since the baseline) for each whose
 * value changed since the last committed sample, and the drop counts
 * (rejected adds per counter, refused names, full scope table). No-op when
 * no session is recording. counters_session_committed must follow, with
 * whether the batch committed, so a rolled-back sample is written again.
 */
void counters_session_write(store *database, int64_t pid, uint64_t time_ns);
void counters_session_committed(int committed);

/* Scopes opened with flare_scope_open in session generation that are still
 * open: stored with still_open = 1 and end_ns, and released. Called by the
 * session at its end, inside its last batch. */
void counters_scope_handles_end_session(store *database, int64_t pid, uint32_t generation,
                                        uint64_t end_ns);
/* Opens refused because FLARE_SCOPE_OPEN_MAX scopes were open. */
uint64_t counters_scope_handles_refused(void);

#endif /* FLARE_COUNTERS_COUNTERS_SESSION_H */
