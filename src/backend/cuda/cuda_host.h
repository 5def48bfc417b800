/*
 * cuda_host.h: what the session offered the CUDA backend when it started it
 * (backend_host: the launch count and whether a deep window is open).
 *
 * Set once by cuda_trace_start before any callback is enabled; inert (no
 * count, no window) until then. Read on the program's threads in launch
 * callbacks, so it must never lock or block.
 */
#ifndef FLARE_BACKEND_CUDA_HOST_H
#define FLARE_BACKEND_CUDA_HOST_H

#include "backend/backend.h"

/* Never NULL. */
extern const backend_host *cuda_session_host;

/* Takes host when it offers every upcall; keeps the inert one otherwise. */
void cuda_host_set(const backend_host *host);

#endif /* FLARE_BACKEND_CUDA_HOST_H */
