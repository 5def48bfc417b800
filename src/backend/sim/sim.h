/*
 * sim.h: the simulated device's internal interface.
 *
 * Owns: the process-wide simulated devices, their streams (one worker thread
 * each), host-backed device memory, the kernel registry and fault injection.
 * It implements backend_ops (backend.h) and backs the public flare_sim_ API
 * (include/flare/sim.h). It must never block an application thread beyond the
 * bounded waits it is asked for, and never lose a completion: every submitted
 * item reaches the completion handler exactly once (status says if it failed).
 */
#ifndef FLARE_BACKEND_SIM_SIM_H
#define FLARE_BACKEND_SIM_SIM_H

#include "backend/backend.h"

#include <stdint.h>

/* The simulated backend's function table. */
extern const backend_ops sim_device_ops;
const backend_ops *sim_backend(void);
/* The simulated device's backend descriptor (sim_descriptor.c). */
const backend_descriptor *sim_descriptor(void);

/* Faults, injected for tests. Each applies to work submitted after the call. */
typedef struct sim_fault {
    /* Kernels with this name never finish until sim_fault_release_hung() or
     * process exit (NULL: none). */
    const char *hang_kernel_name;
    /* Each completion-handler call sleeps this long first (0: none). */
    uint32_t slow_completion_ms;
    /* The next N copies fail: no bytes move, the completion carries
     * FLARE_ERR_BACKEND, and copy_async itself still returns 0 (as an
     * asynchronous GPU error would). */
    uint32_t fail_next_copies;
    /* Completions of work submitted while set are held back, as CUPTI holds kernel records in its
     * buffers: handed to the handler only when this many are held or when
     * sim_deliver_held() runs (the descriptor's deliver). 0: none held; at
     * most SIM_HELD_MAX. Held work no longer counts as in flight. */
    uint32_t hold_completions;
} sim_fault;

#define SIM_HELD_MAX 4096

/* Hands every held completion to the handler, oldest first. Any thread but
 * a completion handler's. */
void sim_deliver_held(void);

/* Replaces the fault configuration (NULL clears every fault). */
void sim_fault_set(const sim_fault *fault);
/* Lets every hung kernel finish. */
void sim_fault_release_hung(void);

/* Look-up of a registered kernel's name by id; NULL if unknown. */
const char *sim_kernel_name(int kernel_id);

/* Added for the tests, which need to see what the backend table hides. */

/* How many streams of the device exist now; FLARE_ERR_INVALID_ARGUMENT for a
 * bad device. Lets tests check that destroy really unregisters a stream. */
int sim_device_stream_count(int device);

/* Work items one stream holds before submission waits for room, and how long
 * it waits before answering FLARE_ERR_FULL. */
#define SIM_STREAM_QUEUE_CAPACITY 4096
#define SIM_SUBMIT_WAIT_MS        1000

/* ---- The simulated deep engine (sim_engine.c) ---- */

/* The simulated device's deep engine: arming records when it started,
 * disarming reports one synthetic sample per sample interval (default
 * SIM_ENGINE_SAMPLE_INTERVAL_NS). Process-wide, one arm at a time. */
#define SIM_ENGINE_SAMPLE_INTERVAL_NS 100000ull /* 100 us, like PM sampling's default */
const backend_engine_ops *sim_engine(void);
/* The simulated PC sampling engine for windows that ask for pc
 * (sim_pc_engine.c), and the engine behind it, whose aggregates the session
 * collects (created at the first call; NULL when out of memory). */
struct pc_engine;
const backend_engine_ops *sim_pc_engine(void);
struct pc_engine *sim_pc_engine_core(void);
/* The same for SASS metrics, for windows that ask for sass (sim_sass.c). */
const backend_engine_ops *sim_sass_engine(void);
struct pc_engine *sim_sass_engine_core(void);

/* Fault injection: while fail is non-zero every arm and probe fails with
 * FLARE_ERR_UNSUPPORTED and reason (NULL: a default text). */
void sim_engine_fault_set(int fail, const char *reason);

typedef struct sim_engine_stats {
    uint64_t arms;     /* successful arms */
    uint64_t refusals; /* arms refused (fault, or already armed) */
    uint64_t disarms;
    int armed; /* armed now */
} sim_engine_stats;
void sim_engine_stats_get(sim_engine_stats *stats);
/* Clears the counters and the fault (tests). */
void sim_engine_reset(void);

/* ---- Kernel replay on the simulated device (sim_replay.c) ---- */

struct replay_device_ops;
struct replay_metric_collector;
/* The drains, shadows and copies replay uses, and the "sim-metrics"
 * collector: kernel time and launch geometry, two metrics per pass. */
const struct replay_device_ops *sim_replay_ops(void);
const struct replay_metric_collector *sim_replay_collector(void);

/* Replay faults for tests; NULL clears them. */
typedef struct sim_replay_fault {
    int fail_device_shadow; /* device shadow allocations fail */
    int fail_host_shadow;   /* pinned-host shadow allocations fail */
    uint64_t
        fail_copy_after; /* the Nth replay copy from now on fails, and every later one (0: none) */
    size_t device_free_bytes; /* what device_memory_free reports (0: 64 GiB) */
} sim_replay_fault;
void sim_replay_fault_set(const sim_replay_fault *fault);

#endif /* FLARE_BACKEND_SIM_SIM_H */
