/*
 * session.h: the session lifecycle behind flare_init/flare_shutdown, and
 * the composition of a session: its backend and its participants.
 *
 * Owns: the one active session of the process (its directory, store handle,
 * log file, collector and backend descriptor) and the generation counter.
 * Start and stop are serialised by one mutex; nothing on a hot path touches
 * it. The only layer that names features and backends together: features
 * and core must never include this header.
 */
#ifndef FLARE_SESSION_SESSION_H
#define FLARE_SESSION_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* The error text of the last failed flare_init in this process ("" if none). */
const char *session_last_error(void);

/* The process id the session's records carry. */
int64_t session_pid(void);

/* The active session's backend descriptor (NULL without a session). */
const backend_descriptor *session_backend(void);

/*
 * Picks the descriptor for FLARE_BACKEND's value asked (NULL or "auto":
 * CUDA when the CUDA driver is in the process, else the simulated device).
 * *automatic says whether the choice was automatic. FLARE_OK, or
 * FLARE_ERR_INVALID_ARGUMENT / FLARE_ERR_UNSUPPORTED with a message naming
 * the variable (backend_choice.c).
 */
int session_backend_choose(const char *asked, const backend_descriptor **out, int *automatic,
                           char *error, size_t error_size);
/* Checks the FLARE_* variables a process of a launched session would read
 * at start (FLARE_BACKEND, FLARE_FLUSH_MS, FLARE_DELIVERY_MS,
 * FLARE_RING_EVENTS, FLARE_OUTPUT_DIR) exactly as that process will, so
 * the launcher can refuse a bad value before anything runs. FLARE_OK, or
 * the status session start would fail with and error naming the variable. */
int session_check_environment(char *error, size_t error_size);

/* The descriptor of the backend whose driver injects libflare (CUDA), or
 * NULL in a build without it. */
const backend_descriptor *session_backend_injected(void);

/*
 * The injection entry point's work (inject.c): starts a session if none is
 * active, makes injected its backend (a session that chose the simulated
 * device automatically adopts it, and processes.backend follows), starts
 * the backend once, and hands its tables to the participants. Never fails
 * the program.
 */
void session_start_injected(const backend_descriptor *injected);

#endif /* FLARE_SESSION_SESSION_H */
