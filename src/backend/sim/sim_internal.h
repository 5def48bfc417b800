/*
 * sim_internal.h: what the simulated device's source files share with each
 * other. Nothing outside src/backend/sim/ may include it; the rest of flare
 * sees the simulated device only through sim.h and include/flare/sim.h.
 */
#ifndef FLARE_BACKEND_SIM_SIM_INTERNAL_H
#define FLARE_BACKEND_SIM_SIM_INTERNAL_H

#include "backend/sim/sim.h"
#include "flare/sim.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define SIM_DEVICE_MAX 64
#define SIM_KERNEL_MAX 1024
#define SIM_ARGS_MAX   4096
/* Reported for every kernel; fixed so records and reports are reproducible. */
#define SIM_REGISTERS_PER_THREAD  32
#define SIM_STREAM_DESTROY_WAIT_S 10

/* flare's clock, read directly so the backend never depends on src/core. */
uint64_t sim_clock_ns(void);
/* The correlation id of the work the calling thread submitted last (0 for
 * none yet): what its API call record points to. */
uint64_t sim_last_correlation_id(void);
/* A CLOCK_MONOTONIC deadline for pthread_cond_timedwait; saturates instead of
 * overflowing so huge timeouts mean "practically forever". */
struct timespec sim_deadline_after_ns(uint64_t timeout_ns);

/* Process-wide state (sim.c). Entry points that touch devices call
 * sim_state_ensure first, and that first call fixes the device count for the
 * rest of the process. Configuring, installing the completion handler and
 * setting faults do not: a session may start before the program configures
 * the device. */
int sim_configure(int device_count);
void sim_state_ensure(void);
bool sim_device_valid(int device);

/* Kernel registry (sim_kernels.c). Entries never change once published, so
 * workers read them without a lock. */
int sim_kernel_register(const char *name, flare_sim_kernel_fn function, int *kernel_id);
flare_sim_kernel_fn sim_kernel_function(int kernel_id);

/* Host-backed device memory (sim_memory.c). */
int sim_memory_alloc(int device, size_t bytes, void **out);
int sim_memory_free(void *pointer);
/* Whether pointer lies inside a live allocation; *bytes_after (if not NULL)
 * receives how many bytes of that allocation start at pointer. */
bool sim_memory_lookup(const void *pointer, size_t *bytes_after);

/* Faults (sim_fault.c), decided once per item at submission because the
 * contract says a fault applies to work submitted after it was set. */
typedef struct sim_fault_decision {
    bool hang;
    uint64_t hang_generation; /* release generation current at submission */
    bool fail;
    uint32_t slow_completion_ms;
    uint32_t hold_limit; /* sim_fault.hold_completions at submission; 0: deliver at once */
} sim_fault_decision;

sim_fault_decision sim_fault_decide(backend_work_kind kind, const char *kernel_name);
/* Blocks (without spinning) until sim_fault_release_hung() has been called
 * after the item was submitted. */
void sim_fault_wait_until_released(uint64_t hang_generation);

/* Marks stream as flare's replay stream: the worker hands its kernels'
 * times to sim_times (range replay by PM sampling). */
void sim_stream_set_timed(backend_stream *stream);

#endif /* FLARE_BACKEND_SIM_SIM_INTERNAL_H */
