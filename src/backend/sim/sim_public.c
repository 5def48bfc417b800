/*
 * sim_public.c: the public flare_sim_ API (include/flare/sim.h), a thin layer
 * over the same backend table core uses, so applications and flare see one
 * simulated device.
 *
 * It must never hold state of its own or behave differently from the
 * backend table; the only logic here is what the public API adds (copy
 * direction inference, millisecond timeouts) and the replay hooks a driver
 * interception would add on a real GPU: allocations reported to the replay
 * inventory, launches bracketed by replay_launch_begin/end, and copies,
 * memsets and frees held at the device's replay gate. Each launch, copy and
 * memset that was queued is also recorded as an API call (table api_calls:
 * the calling thread, the call's span, its correlation id), as the CUDA
 * backend records the driver's entry points; a call that failed queued
 * nothing and is not recorded.
 */
#include "backend/sim/sim_internal.h"
#include "backend/sim/sim_pc.h"
#include "core/clock.h"
#include "core/event.h"
#include "core/mode.h"
#include "core/runtime.h"
#include "replay/replay.h"

#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A flare_sim_stream is the backend's stream under its public name; the
 * pointer is only ever dereferenced as the backend type. */
static backend_stream *backend_stream_of(flare_sim_stream *stream)
{
    return (backend_stream *)stream;
}

FLARE_API int flare_sim_configure(int device_count)
{
    return sim_configure(device_count);
}

FLARE_API int flare_sim_device_count(void)
{
    return sim_backend()->device_count();
}

FLARE_API int flare_sim_kernel_register(const char *name, flare_sim_kernel_fn function,
                                        int *kernel_id)
{
    sim_state_ensure();
    return sim_kernel_register(name, function, kernel_id);
}

FLARE_API int flare_sim_stream_create(int device, flare_sim_stream **out)
{
    if (out == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    backend_stream *stream = NULL;
    int status = sim_backend()->stream_create(device, &stream);
    if (status == FLARE_OK) {
        *out = (flare_sim_stream *)stream;
    }
    return status;
}

FLARE_API int flare_sim_stream_destroy(flare_sim_stream *stream)
{
    return sim_backend()->stream_destroy(backend_stream_of(stream));
}

FLARE_API int flare_sim_malloc(int device, size_t bytes, void **out)
{
    /* Under the reader gate: an allocation is either in the inventory before
     * a span's snapshot, or made while the span records (and declines it). */
    int token = replay_gate_enter(device);
    if (replay_range_active_on(device)) {
        replay_range_decline(device, "memory allocated inside the span");
    }
    int status = sim_backend()->memory_alloc(device, bytes, out);
    if (status == FLARE_OK) {
        replay_inventory_add(device, (uintptr_t)*out, bytes, REPLAY_ALLOCATION_DEVICE);
    }
    replay_gate_exit(device, token);
    return status;
}

FLARE_API int flare_sim_free(void *pointer)
{
    sim_state_ensure();
    /* A free while the device replays would let a restore write freed
     * memory: it waits at the gate like any other device work. */
    int device = replay_configured() ? replay_inventory_device_of((uintptr_t)pointer) : -1;
    if (device >= 0 && replay_range_active_on(device)) {
        replay_range_decline(device, "memory freed inside the span");
    }
    int token = device >= 0 ? replay_gate_enter(device) : 0;
    replay_inventory_remove((uintptr_t)pointer);
    int status = sim_backend()->memory_free(pointer);
    replay_gate_exit(device, token);
    return status;
}

/* What a relaunch needs: the stream and the launch as first submitted
 * (its args point at the caller's block, alive during the launch call). */
typedef struct sim_relaunch {
    backend_stream *stream;
    const backend_launch *launch;
} sim_relaunch;

static int relaunch(void *context)
{
    const sim_relaunch *relaunch_context = context;
    return sim_backend()->launch(relaunch_context->stream, relaunch_context->launch);
}

/* ---- Range replay: deep copies of a span's work ---- */

typedef struct sim_recorded_work {
    backend_work_kind kind;
    backend_stream *stream;
    backend_launch launch; /* kernels; launch.args points at payload */
    void *destination;     /* copies and memsets */
    const void *source;    /* copies: the device source, or payload for host sources */
    size_t bytes;
    int value;
    backend_copy_kind copy_kind;
    unsigned char payload[]; /* kernel arguments, or host-to-device source bytes */
} sim_recorded_work;

/* flare's own stream per device, for re-issued span work: the program may
 * destroy its streams before the span ends, and one stream in submission
 * order keeps every ordering the program could rely on. */
static pthread_mutex_t replay_streams_lock = PTHREAD_MUTEX_INITIALIZER;
static backend_stream *replay_streams[SIM_DEVICE_MAX];

static backend_stream *replay_stream(int device)
{
    if (device < 0 || device >= SIM_DEVICE_MAX) {
        return NULL;
    }
    pthread_mutex_lock(&replay_streams_lock);
    if (replay_streams[device] == NULL &&
        sim_backend()->stream_create(device, &replay_streams[device]) != FLARE_OK) {
        replay_streams[device] = NULL;
    } else if (replay_streams[device] != NULL) {
        sim_stream_set_timed(replay_streams[device]);
    }
    backend_stream *stream = replay_streams[device];
    pthread_mutex_unlock(&replay_streams_lock);
    return stream;
}

static int reissue(void *data)
{
    sim_recorded_work *work = data;
    switch (work->kind) {
    case BACKEND_WORK_KERNEL:
        return sim_backend()->launch(work->stream, &work->launch);
    case BACKEND_WORK_COPY:
        return sim_backend()->copy_async(work->stream, work->destination, work->source, work->bytes,
                                         work->copy_kind);
    case BACKEND_WORK_MEMSET:
        return sim_backend()->memset_async(work->stream, work->destination, work->value,
                                           work->bytes);
    }
    return FLARE_ERR_INVALID_ARGUMENT;
}

static sim_recorded_work *recorded_work_new(backend_work_kind kind, backend_stream *stream,
                                            size_t payload_size, replay_range_work *out)
{
    backend_stream *own = replay_stream(sim_backend()->stream_device(stream));
    sim_recorded_work *work = own != NULL ? calloc(1, sizeof *work + payload_size) : NULL;
    if (work == NULL) {
        return NULL;
    }
    work->kind = kind;
    work->stream = own;
    stream = own;
    *out = (replay_range_work){.kind = kind == BACKEND_WORK_KERNEL ? REPLAY_WORK_KERNEL
                                       : kind == BACKEND_WORK_COPY ? REPLAY_WORK_COPY
                                                                   : REPLAY_WORK_MEMSET,
                               .stream = stream,
                               .stream_id = sim_backend()->stream_id(stream),
                               .reissue = reissue,
                               .release = free,
                               .data = work};
    return work;
}

static int capture_launch(void *context, replay_range_work *out)
{
    const sim_relaunch *relaunch_context = context;
    const backend_launch *launch = relaunch_context->launch;
    sim_recorded_work *work =
        recorded_work_new(BACKEND_WORK_KERNEL, relaunch_context->stream, launch->args_size, out);
    if (work == NULL) {
        return FLARE_ERR_NO_MEMORY;
    }
    work->launch = *launch;
    if (launch->args_size > 0) {
        memcpy(work->payload, launch->args, launch->args_size);
        work->launch.args = work->payload;
    }
    memcpy(out->grid, launch->grid, sizeof out->grid);
    memcpy(out->block, launch->block, sizeof out->block);
    return FLARE_OK;
}

/* Records a copy or memset the span's thread submits. Host sources are
 * copied now: the program may reuse its buffer before the replay. */
static void record_span_work(backend_stream *stream, backend_work_kind kind, void *destination,
                             const void *source, size_t bytes, int value,
                             backend_copy_kind copy_kind)
{
    int device = sim_backend()->stream_device(stream);
    if (kind == BACKEND_WORK_COPY && copy_kind == BACKEND_COPY_DEVICE_TO_HOST) {
        replay_range_decline(device,
                             "device-to-host copy inside the span (the host may act on it)");
        return;
    }
    bool host_source = kind == BACKEND_WORK_COPY && copy_kind == BACKEND_COPY_HOST_TO_DEVICE;
    replay_range_work span_work;
    sim_recorded_work *work = recorded_work_new(kind, stream, host_source ? bytes : 0, &span_work);
    if (work == NULL) {
        replay_range_decline(device, "out of host memory recording the span");
        return;
    }
    work->destination = destination;
    work->source = source;
    work->bytes = bytes;
    work->value = value;
    work->copy_kind = copy_kind;
    if (host_source) {
        memcpy(work->payload, source, bytes);
        work->source = work->payload;
    }
    replay_range_record(device, &span_work);
}

/* The call named name, begun at start_ns, as an API call event, when it
 * queued its work (status FLARE_OK): its correlation id is the one this
 * thread submitted last. Called before replay's own submissions. */
static void record_api_call(const char *name, uint64_t start_ns, int status)
{
    /* The mode decides, as on CUDA (FLARE_MODE, flare trace --mode); read
     * once: a racing first read by two threads reads the same answer. */
    static _Atomic int wanted = -1;
    int api_calls = atomic_load_explicit(&wanted, memory_order_relaxed);
    if (api_calls < 0) {
        core_mode mode;
        char why[128];
        core_mode_from_environment(&mode, why, sizeof(why));
        api_calls = core_mode_spec_of(mode)->api_calls;
        atomic_store_explicit(&wanted, api_calls, memory_order_relaxed);
    }
    if (status != FLARE_OK || !api_calls)
        return;
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_API_CALL;
    event->start_ns = start_ns;
    event->end_ns = core_now_ns();
    event->id = sim_last_correlation_id();
    event->stream_id = 0;
    event->device = -1;
    event->depth = 0;
    core_copy_name(event->name, name);
    core_emit_commit(thread);
}

FLARE_API int flare_sim_launch_kernel(flare_sim_stream *stream, int kernel_id,
                                      const uint32_t grid[3], const uint32_t block[3],
                                      const void *args, size_t args_size)
{
    if (grid == NULL || block == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    backend_launch launch = {.kernel_id = kernel_id, .args = args, .args_size = args_size};
    for (int axis = 0; axis < 3; axis++) {
        launch.grid[axis] = grid[axis];
        launch.block[axis] = block[axis];
    }
    backend_stream *target = backend_stream_of(stream);
    uint64_t start_ns = core_now_ns();
    if (!replay_configured() || target == NULL) {
        int status = sim_backend()->launch(target, &launch);
        record_api_call("flare_sim_launch_kernel", start_ns, status);
        return status;
    }
    sim_relaunch relaunch_context = {.stream = target, .launch = &launch};
    replay_launch_request request = {.device = sim_backend()->stream_device(target),
                                     .stream = target,
                                     .stream_id = sim_backend()->stream_id(target),
                                     .kernel_name = sim_kernel_name(kernel_id),
                                     .relaunch = relaunch,
                                     .relaunch_context = &relaunch_context,
                                     .capture = capture_launch};
    memcpy(request.grid, launch.grid, sizeof request.grid);
    memcpy(request.block, launch.block, sizeof request.block);
    replay_launch_state state;
    replay_launch_begin(&request, &state);
    int status = sim_backend()->launch(target, &launch);
    record_api_call("flare_sim_launch_kernel", start_ns, status);
    replay_launch_end(&request, &state, status);
    return status;
}

/* Submits a copy or memset with the device's replay gate held. */
static int gated_device(backend_stream *stream)
{
    return stream != NULL ? sim_backend()->stream_device(stream) : -1;
}

FLARE_API int flare_sim_memcpy_async(flare_sim_stream *stream, void *destination,
                                     const void *source, size_t bytes)
{
    bool destination_on_device = sim_memory_lookup(destination, NULL);
    bool source_on_device = sim_memory_lookup(source, NULL);
    backend_copy_kind kind = BACKEND_COPY_HOST_TO_HOST;
    if (destination_on_device && source_on_device) {
        kind = BACKEND_COPY_DEVICE_TO_DEVICE;
    } else if (destination_on_device) {
        kind = BACKEND_COPY_HOST_TO_DEVICE;
    } else if (source_on_device) {
        kind = BACKEND_COPY_DEVICE_TO_HOST;
    }
    backend_stream *target = backend_stream_of(stream);
    int device = gated_device(target);
    int token = replay_gate_enter(device);
    bool recorded = target != NULL && replay_range_claims(device);
    if (recorded) {
        record_span_work(target, BACKEND_WORK_COPY, destination, source, bytes, 0, kind);
    }
    uint64_t start_ns = core_now_ns();
    int status = sim_backend()->copy_async(target, destination, source, bytes, kind);
    record_api_call("flare_sim_memcpy_async", start_ns, status);
    if (recorded && status != FLARE_OK) {
        replay_range_decline(device, "a copy inside the span failed to submit");
    }
    replay_gate_exit(device, token);
    return status;
}

FLARE_API int flare_sim_memset_async(flare_sim_stream *stream, void *destination, int value,
                                     size_t bytes)
{
    backend_stream *target = backend_stream_of(stream);
    int device = gated_device(target);
    int token = replay_gate_enter(device);
    bool recorded = target != NULL && replay_range_claims(device);
    if (recorded) {
        record_span_work(target, BACKEND_WORK_MEMSET, destination, NULL, bytes, value,
                         BACKEND_COPY_UNKNOWN);
    }
    uint64_t start_ns = core_now_ns();
    int status = sim_backend()->memset_async(target, destination, value, bytes);
    record_api_call("flare_sim_memset_async", start_ns, status);
    if (recorded && status != FLARE_OK) {
        replay_range_decline(device, "a memset inside the span failed to submit");
    }
    replay_gate_exit(device, token);
    return status;
}

FLARE_API int flare_sim_stream_synchronize(flare_sim_stream *stream, uint32_t timeout_ms)
{
    return sim_backend()->stream_drain(backend_stream_of(stream), (uint64_t)timeout_ms * 1000000u);
}

FLARE_API int flare_sim_device_synchronize(int device, uint32_t timeout_ms)
{
    return sim_backend()->device_drain(device, (uint64_t)timeout_ms * 1000000u);
}

/* The public stall codes are the simulated hardware's own. */
_Static_assert((int)FLARE_SIM_STALL_SELECTED == SIM_PC_STALL_SELECTED &&
                   (int)FLARE_SIM_STALL_LONG_SCOREBOARD == SIM_PC_STALL_LONG_SCOREBOARD &&
                   (int)FLARE_SIM_STALL_SHORT_SCOREBOARD == SIM_PC_STALL_SHORT_SCOREBOARD &&
                   (int)FLARE_SIM_STALL_MATH_PIPE_THROTTLE == SIM_PC_STALL_MATH_PIPE_THROTTLE &&
                   (int)FLARE_SIM_STALL_BARRIER == SIM_PC_STALL_BARRIER,
               "flare_sim_stall and sim_pc_stall disagree");

FLARE_API void flare_sim_pc_mark(uint64_t pc_offset, flare_sim_stall stall_reason)
{
    sim_pc_mark(pc_offset, (uint32_t)stall_reason);
}
