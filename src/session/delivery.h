/*
 * delivery.h: the session's delivery thread, which asks the backend every
 * FLARE_DELIVERY_MS for the finished records it holds back.
 *
 * Why: CUPTI keeps kernel records in its activity buffers until a buffer is
 * full (its own periodic flush returns full buffers only), which at a low
 * launch rate is seconds or never, so readings that need kernel
 * completions (kernel_duration_pNN rules) would see none. The thread calls
 * the descriptor's deliver op; what that hands over goes through the
 * thread's own ring to the collector like any other record. It must never
 * be the collector (which would wait on its own ring) and never run
 * deliver for a backend without the op.
 */
#ifndef FLARE_SESSION_DELIVERY_H
#define FLARE_SESSION_DELIVERY_H

#include <stdint.h>

#include "backend/backend.h"

typedef struct session_delivery session_delivery;

/* Starts the thread (interval_ms 0: starts nothing, *out is NULL). */
int session_delivery_start(const backend_descriptor *backend, uint32_t interval_ms,
                           session_delivery **out);
/* The session adopted backend: deliveries ask it from now on. Any thread. */
void session_delivery_adopt(session_delivery *delivery, const backend_descriptor *backend);
/* Asks for one last delivery, stops and joins the thread, frees it (NULL: nothing). */
void session_delivery_stop(session_delivery *delivery);
/* Deliveries asked for so far (for tests). */
uint64_t session_delivery_count(const session_delivery *delivery);

#endif /* FLARE_SESSION_DELIVERY_H */
