/*
 * cuda_replay_internal.h: what the files of the CUDA replay module
 * (cuda_replay.c and cuda_replay_*.c) share: the driver table and CUPTI
 * lookups filled at attach, flare's internal bracket, and the functions one
 * of those files calls in another. The rest of the backend goes through
 * cuda_replay.h; nothing outside these files includes this one.
 *
 * Must never declare thread-local state: libflare's static TLS must stay a
 * few hundred bytes (see cuda_replay_launch.c), so each file keeps its
 * thread-locals static and reaches another's through a function.
 */
#ifndef FLARE_BACKEND_CUDA_REPLAY_INTERNAL_H
#define FLARE_BACKEND_CUDA_REPLAY_INTERNAL_H

#include <cupti_callbacks.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/cuda/cuda_loader.h"

/* ---- cuda_replay.c: attach, the internal bracket, the gates ---- */

/* The driver functions replay calls, loaded at attach. */
extern cuda_driver_api cuda_replay_driver;
/* cuptiGetDeviceId and cuptiGetStreamIdEx, resolved at attach (NULL when
 * this CUPTI lacks them). */
extern CUptiResult (*cuda_replay_get_device_id)(CUcontext context, uint32_t *device);
extern CUptiResult (*cuda_replay_get_stream_id)(CUcontext context, CUstream stream,
                                                uint8_t per_thread, uint32_t *id);
/* Set once the copy and memset callbacks are switched on (never cleared). */
extern _Atomic int cuda_replay_gates_enabled;
/* Set once attach succeeded: callbacks before it are ignored. */
extern int cuda_replay_attached;
/* A rule may range-replay (action range): launches resolve their module's
 * __device__ variables before replay is configured, so a span begun later
 * finds them in the inventory (cuda_replay_launch.c). Atomic: a benchmark
 * switches it while launches read it (cuda_ready_alternate.c). */
extern _Atomic int cuda_replay_globals_early;
/* FLARE_REPLAY_READY_ALTERNATE_MS/_LOG set: starts the thread that turns
 * cuda_replay_globals_early off and on in blocks (a benchmark's switch). */
void cuda_ready_alternate_start(void);

/* flare's own driver calls on this thread go between begin and end (they
 * nest): replay's callbacks ignore them, and cuda_replay_internal() is true
 * meanwhile. Never fail. */
void cuda_replay_internal_begin(void);
void cuda_replay_internal_end(void);

/* Switches on the callbacks of every copy and memset entry point (once per
 * process, under a lock; callers test cuda_replay_gates_enabled first).
 * Returns how many entry points are watched. */
int cuda_replay_enable_gates(void);

/* What the driver call of a callback returned (CUDA_SUCCESS when CUPTI
 * gives no return value). */
static inline CUresult cuda_replay_result_of(const CUpti_CallbackData *call)
{
    return call->functionReturnValue != NULL ? *(const CUresult *)call->functionReturnValue
                                             : CUDA_SUCCESS;
}

/* ---- cuda_replay_device.c: contexts, streams, the engine's device ops ---- */

/* The device ordinal of a context, else of the current context (-1 when
 * unknown). */
int cuda_replay_device_of(CUcontext context);
/* Whether work submitted to the stream is being captured into a graph. */
bool cuda_replay_stream_capturing(CUstream stream);
/* flare's own non-blocking copy stream on the device (made on first use in
 * the current context); NULL when the driver refused one (logged once). */
CUstream cuda_replay_copy_stream(int device);
/* Resource callbacks: the registry drains poll. A destroy waits, bounded,
 * until no drain has its entry pinned. */
void cuda_replay_context_created(CUcontext context);
void cuda_replay_context_destroying(CUcontext context);
void cuda_replay_stream_created(CUcontext context, CUstream stream);
void cuda_replay_stream_destroying(CUstream stream);
/* Makes the device operations available (cuda_replay_device_ops): the
 * session hands them to the replay engine once the backend has started. */
void cuda_replay_offer_device_ops(void);

/* ---- cuda_replay_modules.c: module-scope __device__ variables ---- */

/* Resource callbacks: a module's variables are read from its cubin when it
 * loads, and leave the inventory when it unloads. */
void cuda_replay_module_loaded(CUcontext context, const CUpti_ModuleResourceData *data);
void cuda_replay_module_unloading(const CUpti_ModuleResourceData *data);
/* A context goes: the handles cached for it are forgotten. */
void cuda_replay_forget_cached_context(CUcontext context);
/* A launch of function on device: its module's variables are resolved
 * (loading the function first), cheaply when already settled. */
void cuda_replay_resolve_globals(int device, CUcontext context, CUfunction function);
/* A cuModuleGetGlobal or cuLibraryGetGlobal callback: the module handed out
 * a variable's address, so its variables are resolved now. */
void cuda_replay_global_queried(CUpti_CallbackId id, const CUpti_CallbackData *call);

/* ---- cuda_replay_inventory.c: allocations and frees ---- */

/* An allocation entry point returned: a successful one joins the
 * inventory. */
void cuda_replay_allocation_returned(CUpti_CallbackId id, const CUpti_CallbackData *call);
/* The address a free or unmap entry point releases (0 for any other id). */
uintptr_t cuda_replay_freed_address(CUpti_CallbackId id, const void *params);

/* ---- cuda_replay_launch.c: the gate and the launch bracket ---- */

/* A copy, memset, allocation or free callback: passes the device's gate
 * while replay is configured (taken at ENTER, given back at EXIT). */
void cuda_replay_gate_call(const CUpti_CallbackData *call);
/* A launch callback: replay_launch_begin at ENTER, replay_launch_end (the
 * pass loop) at EXIT. */
void cuda_replay_launch_call(CUpti_CallbackId id, const CUpti_CallbackData *call);

#endif /* FLARE_BACKEND_CUDA_REPLAY_INTERNAL_H */
