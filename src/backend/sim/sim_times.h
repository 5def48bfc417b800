/*
 * sim_times.h: the start and end of kernels the simulated device re-issues
 * for a span (flare's own replay stream per device), for range replay by
 * PM sampling (replay.h, replay_device_ops.kernel_times_*): CUDA reads the
 * same off CUPTI's kernel records.
 *
 * One bounded table per device (REPLAY_RANGE_KERNELS_MAX kernels), filled
 * by the stream worker in execution order, which on the one replay stream
 * is re-issue order. Must never grow, or block the worker beyond its mutex.
 */
#ifndef FLARE_BACKEND_SIM_SIM_TIMES_H
#define FLARE_BACKEND_SIM_SIM_TIMES_H

#include <stddef.h>
#include <stdint.h>

/* Starts timing device's next kernel_count re-issued kernels. */
int sim_times_begin(int device, size_t kernel_count, char *reason, size_t reason_size);
/* A re-issued kernel of device ran from start_ns to end_ns (the worker). */
void sim_times_note(int device, uint64_t start_ns, uint64_t end_ns);
/* Waits at most timeout_ns for them; writes what came and *found; stops
 * timing. FLARE_OK when all came, FLARE_ERR_TIMEOUT otherwise. */
int sim_times_end(int device, uint64_t *start_ns, uint64_t *end_ns, size_t kernel_count,
                  size_t *found, uint64_t timeout_ns);

#endif /* FLARE_BACKEND_SIM_SIM_TIMES_H */
