/*
 * session.h: the session lifecycle behind flare_init/flare_shutdown.
 *
 * Owns: the one active session of the process (its directory, store handle,
 * log file and collector) and the generation counter. Start and stop are
 * serialised by one mutex; nothing on a hot path touches it.
 */
#ifndef FLARE_CORE_SESSION_H
#define FLARE_CORE_SESSION_H

#include <stddef.h>
#include <stdint.h>

/* The error text of the last failed flare_init in this process ("" if none). */
const char *core_session_last_error(void);

/* The process id the session's records carry. */
int64_t core_session_pid(void);

#endif /* FLARE_CORE_SESSION_H */
