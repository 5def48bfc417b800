/*
 * cuda_replay.h: the CUDA side of kernel replay. CUPTI driver and resource
 * callbacks feed the device-independent engine (src/replay/replay.h): the
 * allocation inventory, the gate around launches, copies and memsets, the
 * launch bracket whose EXIT callback runs the whole pass loop, and the
 * device operations (drains, shadow memory, bounded copies).
 *
 * cuda_trace.c owns the CUPTI subscriber and calls in here; this module
 * never subscribes itself. It must never crash or stop the program: a
 * missing driver function or a CUPTI error degrades the "replay"
 * capability with a reason, and every wait here is bounded.
 */
#ifndef FLARE_BACKEND_CUDA_REPLAY_H
#define FLARE_BACKEND_CUDA_REPLAY_H

#include <cupti_callbacks.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/cuda/cuda_loader.h"

/* Called once from cuda_trace_start (inside InitializeInjection: no driver
 * calls are made here) after the subscription succeeded: loads the driver
 * functions replay needs, installs the device operations and the range
 * profiler collector, and enables the allocation, resource, copy and memset
 * callbacks. Returns the number of callback ids enabled (0: replay is
 * unavailable, with the reason in the capability matrix). */
int cuda_replay_attach(const cuda_cupti_api *cupti, CUpti_SubscriberHandle subscriber);
/* Replay's device operations once attach offered them, else NULL. */
const struct replay_device_ops *cuda_replay_device_ops(void);

/* Whether a driver callback id is one of the kernel-launch entry points. */
bool cuda_replay_is_launch(CUpti_CallbackId id);
/* Whether id is a driver entry point that copies or sets memory (known
 * once attached). */
bool cuda_replay_is_copy(CUpti_CallbackId id);
/* Switches on the callbacks of every copy and memset entry point (once; the
 * replay gate uses them too), so the launch-storm guard can count the
 * copies it leaves untimed. FLARE_ERR_STATE before attach,
 * FLARE_ERR_BACKEND when CUPTI refused any of them. */
int cuda_replay_watch_copies(void);

/* True on a thread while flare itself calls the driver for replay (shadow
 * allocations, copies, relaunches): those calls are neither traced as the
 * program's own nor counted as its launches. */
bool cuda_replay_internal(void);

/* flare's own device work during a replay (relaunches, snapshot and
 * restore copies) must not show up as the program's kernels and copies.
 * The driver callback notes each internal call's correlation id (one
 * relaxed store into a fixed table, never a lock); the activity handler
 * asks before emitting a record, and the skipped records are counted in
 * the drops table as flare's own work. */
void cuda_replay_note_internal_work(uint32_t correlation_id);
/* kernel_name: the activity record's kernel, NULL for copies and memsets. */
bool cuda_replay_is_internal_work(uint32_t correlation_id, const char *kernel_name);

/* The FLARE_REPLAY_* variable that asks this process for a replay (the
 * first set and non-empty), or NULL. A process asked for one needs the
 * launch callbacks whatever the mode, and no PM sampling. */
const char *cuda_replay_requested(void);

/* Dispatch from cuda_trace.c's callback: every driver-API callback, and
 * every resource callback. */
void cuda_replay_on_driver(CUpti_CallbackId id, const CUpti_CallbackData *call);
void cuda_replay_on_resource(CUpti_CallbackId id, const void *data);

#endif /* FLARE_BACKEND_CUDA_REPLAY_H */
