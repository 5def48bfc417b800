/*
 * cuda_pc.c: CUPTI's PC sampling API under flare's PC sampling engine
 * (cuda_pc.h): the four hardware steps pcsamp/pc_engine.h asks for (start,
 * stop, read, name a stall reason), the enable at the first context, and
 * the backend_engine_ops windows arm.
 *
 * What the H200 probe (tests/gpu/pc_sampling_probe.cu, docs/PERFORMANCE.md)
 * settled, and this file follows: continuous collection with start/stop
 * control, enabled before the context's modules load; a period of 2^N SM
 * cycles, where N = 5 and 8 filled the hardware buffer faster than CUPTI
 * drained it and returned nothing at all (so N >= CUDA_PC_PERIOD_EXP_MIN);
 * the hardware samples at no measurable cost to the kernels (b/a 1.000,
 * c/a 1.000); cuptiPCSamplingStop decodes what the hardware buffer holds
 * and takes time in proportion (34 ms for 1.5 M samples, 1.6 s for 74 M).
 *
 * CUPTI hands over per-PC counts per stall reason, not single samples: one
 * pc_raw_sample per (PC, stall reason) with its count. Its function name
 * strings are left to the process: the header makes freeing them the
 * client's job once every record that may share one is processed, which
 * later reads can still be; a wrong free crashes the program, a kept one
 * costs bytes per function.
 *
 * One context: the first created (the device most programs use); later
 * contexts are not sampled, and the capability says which device is.
 *
 * Start and stop are made on the application's thread at its next launch
 * (cuda_app_thread.h): made from flare's collector, cuptiPCSamplingStop
 * never returned on the H200 (session 15). So PC windows need the launch
 * callbacks, and a window's bounds are those launches. With PC sampling
 * enabled, PM sampling is never set up in the process (cuda_pm.c: CUPTI
 * crashed enabling it beside PC sampling).
 *
 * Must never: call CUPTI before the first context or from
 * InitializeInjection, make Start or Stop on a flare thread, hold a lock of
 * its own across a CUPTI call, or crash on an error (each is a reason: the
 * capability's, or the failed start's, which the refused window records).
 * The engine serialises hw_start, hw_stop and hw_read; start_here and
 * stop_here run beside them on the application's thread, so what both
 * sides touch is atomic or handed over by start_state (release/acquire).
 */
#include "backend/cuda/cuda_pc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cuda/cuda_app_thread.h"
#include "backend/cuda/cuda_engine_costs.h"
#include "backend/cuda/cuda_pc_hw.h"
#include "backend/cuda/cuda_pc_lines.h"
#include "backend/cuda/cuda_pc_settings.h"
#include "backend/cuda/cuda_pm.h"
#include "backend/cuda/cuda_trace.h"
#include "core/capability.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pcsamp/pc_engine.h"
#include "pcsamp/pc_names.h"

static cuda_pc_hardware hardware;
static pc_engine *engine;
static _Atomic int context_claimed; /* the first context's enable ran (or runs) */
static _Atomic int enable_failed;   /* the first context's enable failed */
static _Atomic int context_ready;   /* the first context's enable succeeded */

static const char *result_text(CUptiResult result)
{
    return cuda_pc_result_text(&hardware.api, result);
}

static int failed(CUptiResult result, const char *what, char *reason, size_t reason_size)
{
    return cuda_pc_failed(&hardware.api, result, what, reason, reason_size);
}

/* ---- the hardware steps (serialised by the engine) ----
 * Start and stop are made on the application's thread, at its next kernel
 * launch (cuda_app_thread.h): made from flare's collector, Stop never
 * returned on the H200 and held the program (session 15). GetData stays on
 * the drain thread: it never synchronises, and ran there throughout. */

/* How long a window's start or stop waits for the application's next
 * launch: past it, either stays posted for a later launch (a start then
 * samples from that launch on; a stop's leftovers are discarded at the
 * next start, counted as lost then). */
#define CUDA_PC_START_WAIT_NS 1000000000ull
#define CUDA_PC_STOP_WAIT_NS  2000000000ull

static size_t fetch(cuda_pc_hardware *hw, uint64_t *lost);

/* A stop that ran late (detached) left the samples of after its window in
 * CUPTI: read and dropped before the next start, counted as lost. */
static void discard_stale(cuda_pc_hardware *hw)
{
    uint64_t lost = 0;
    for (int i = 0; i < CUDA_PC_FETCHES_MAX; i++) {
        size_t pcs = fetch(hw, &lost);
        for (size_t p = 0; p < pcs; p++) {
            const CUpti_PCSamplingPCData *pc = &hw->read_buffer.pcs[p];
            for (size_t r = 0; r < pc->stallReasonCount && r < hw->read_buffer.per_pc; r++)
                lost += pc->stallReason[r].samples;
        }
        if (pcs == 0 && hw->remaining == 0)
            break;
    }
    if (lost > 0)
        core_log(CORE_LOG_WARNING,
                 "PC sampling: %llu samples taken after a window closed (its stop waited for "
                 "a launch) dropped",
                 (unsigned long long)lost);
    atomic_fetch_add(&hw->stale_lost, lost);
}

/* hw->start_state: no window's start asked; posted for a launch (none came
 * within CUDA_PC_START_WAIT_NS); Start made; Start failed (call_reason). */
enum { CUDA_PC_START_IDLE, CUDA_PC_START_POSTED, CUDA_PC_START_RAN, CUDA_PC_START_FAILED };

static int start_cupti(cuda_pc_hardware *hw);
static int stop_cupti(cuda_pc_hardware *hw, CUcontext context);

/* On the application's thread: the period, then Start; its outcome in
 * start_state (a start made late has no waiter to tell). */
static int start_here(void *opaque)
{
    cuda_pc_hardware *hw = opaque;
    int status = start_cupti(hw);
    atomic_store_explicit(&hw->start_state,
                          status == FLARE_OK ? CUDA_PC_START_RAN : CUDA_PC_START_FAILED,
                          memory_order_release);
    if (status != FLARE_OK)
        core_log(CORE_LOG_WARNING, "PC sampling did not start: %s", hw->call_reason);
    return status;
}

static int start_cupti(cuda_pc_hardware *hw)
{
    /* Written only on the application's thread, one request at a time. */
    hw->call_reason[0] = '\0';
    CUcontext context = atomic_load(&hw->context);
    if (context == NULL) {
        snprintf(hw->call_reason, sizeof(hw->call_reason), "the sampled context was destroyed");
        return FLARE_ERR_BACKEND;
    }
    /* A window's stop that was never posted (an earlier request held the
     * slot past its bound): CUPTI is still started; stop it here. */
    if (hw->cupti_started && stop_cupti(hw, context) != FLARE_OK) {
        /* Not started after all, or a context that will refuse the Start
         * too (which then says why): go on either way, never stuck here. */
        core_log(CORE_LOG_WARNING, "PC sampling: the stop before a start failed: %s",
                 hw->call_reason);
        hw->cupti_started = 0;
        hw->call_reason[0] = '\0';
    }
    /* Taken, not read: a close that gave up on its stop while this start
     * ran sets it again, for the next start. */
    if (atomic_exchange(&hw->stop_deferred, 0))
        discard_stale(hw);
    if (hw->wanted_exp != hw->period_exp) {
        CUpti_PCSamplingConfigurationInfo info;
        memset(&info, 0, sizeof(info));
        info.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
        info.attributeData.samplingPeriodData.samplingPeriod = hw->wanted_exp;
        CUptiResult result = cuda_pc_set_attributes(hw, context, &info, 1);
        if (result != CUPTI_SUCCESS)
            return failed(result, "cuptiPCSamplingSetConfigurationAttribute (period)",
                          hw->call_reason, sizeof(hw->call_reason));
        hw->period_exp = hw->wanted_exp;
    }
    hw->pending_pcs = hw->cursor_pc = hw->cursor_stall = hw->remaining = 0;
    CUpti_PCSamplingStartParams params = {.size = CUpti_PCSamplingStartParamsSize, .ctx = context};
    CUptiResult result = PC_LOGGED(hw, cuptiPCSamplingStart, &params);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiPCSamplingStart", hw->call_reason, sizeof(hw->call_reason));
    hw->cupti_started = 1;
    return FLARE_OK;
}

static int stop_cupti(cuda_pc_hardware *hw, CUcontext context)
{
    CUpti_PCSamplingStopParams params = {.size = CUpti_PCSamplingStopParamsSize, .ctx = context};
    CUptiResult result = PC_LOGGED(hw, cuptiPCSamplingStop, &params);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiPCSamplingStop", hw->call_reason, sizeof(hw->call_reason));
    hw->cupti_started = 0;
    return FLARE_OK;
}

/* On the application's thread: Stop (it decodes what the hardware holds). */
static int stop_here(void *opaque)
{
    cuda_pc_hardware *hw = opaque;
    /* Never started (a start that failed at a late launch keeps its
     * reason in call_reason), or already stopped: nothing to stop. */
    if (!hw->cupti_started) {
        if (hw->call_reason[0] == '\0')
            snprintf(hw->call_reason, sizeof(hw->call_reason), "PC sampling was not running");
        return FLARE_ERR_BACKEND;
    }
    hw->call_reason[0] = '\0';
    CUcontext context = atomic_load(&hw->context);
    if (context == NULL) {
        snprintf(hw->call_reason, sizeof(hw->call_reason), "the sampled context was destroyed");
        return FLARE_ERR_BACKEND;
    }
    return stop_cupti(hw, context);
}

static int hw_start(void *opaque, int device, uint64_t period_ns, char *reason, size_t reason_size)
{
    cuda_pc_hardware *hw = opaque;
    if (atomic_load(&hw->context) == NULL) {
        snprintf(reason, reason_size,
                 "PC sampling is not enabled on a live context (see the "
                 "pc_sampling capability)");
        return FLARE_ERR_BACKEND;
    }
    if (device != hw->device) {
        snprintf(reason, reason_size, "PC sampling runs on device %d only (the first context's)",
                 hw->device);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    /* The last window's start still being made (its close gave up waiting
     * for it): nothing of the hardware's is touched until it ends. */
    if (atomic_load_explicit(&hw->start_state, memory_order_acquire) == CUDA_PC_START_POSTED) {
        snprintf(reason, reason_size,
                 "the last window's PC start is still being made on the application's thread");
        return FLARE_ERR_BACKEND;
    }
    hw->wanted_exp = cuda_pc_period_exp_of(hw, period_ns);
    int status = FLARE_ERR_BACKEND;
    atomic_store_explicit(&hw->start_state, CUDA_PC_START_POSTED, memory_order_relaxed);
    /* Detached: a program between launches (a pause, a slow phase: when a
     * rule fires) starts sampling at its next launch, not never. */
    cuda_app_thread_outcome outcome =
        cuda_app_thread_call(start_here, hw, CUDA_PC_START_WAIT_NS, 1, &status);
    if (outcome == CUDA_APP_THREAD_WITHDRAWN) {
        atomic_store_explicit(&hw->start_state, CUDA_PC_START_IDLE, memory_order_relaxed);
        snprintf(reason, reason_size,
                 "an earlier PC start or stop still waits for a kernel launch (CUPTI's start "
                 "and stop are made on the application's thread, at its launches)");
        return FLARE_ERR_BACKEND;
    }
    if (outcome == CUDA_APP_THREAD_DETACHED) {
        core_log(CORE_LOG_INFO,
                 "PC sampling starts at the program's next kernel launch (none within %.0f s "
                 "of the window's opening)",
                 CUDA_PC_START_WAIT_NS / 1e9);
        return FLARE_OK;
    }
    if (status != FLARE_OK) {
        snprintf(reason, reason_size, "%s", hw->call_reason);
        return status;
    }
    core_log(CORE_LOG_INFO,
             "PC sampling started on device %d: every 2^%u cycles (%.1f us at %.0f MHz)",
             hw->device, hw->period_exp, ldexp(1.0, (int)hw->period_exp) / hw->sm_mhz, hw->sm_mhz);
    return FLARE_OK;
}

static int hw_stop(void *opaque, char *reason, size_t reason_size)
{
    cuda_pc_hardware *hw = opaque;
    int start_state = atomic_load_explicit(&hw->start_state, memory_order_acquire);
    if (start_state == CUDA_PC_START_POSTED) {
        if (cuda_app_thread_withdraw(start_here, hw)) {
            /* No launch in the whole window: nothing sampled, nothing to stop. */
            atomic_store_explicit(&hw->start_state, CUDA_PC_START_IDLE, memory_order_relaxed);
            core_log(CORE_LOG_INFO,
                     "PC sampling never started: no kernel launch during the window");
            return FLARE_OK;
        }
        /* Taken by a launch: it ran, or runs now (the stop below waits). */
        start_state = atomic_load_explicit(&hw->start_state, memory_order_acquire);
    }
    if (atomic_load(&hw->context) == NULL) {
        snprintf(reason, reason_size, "the sampled context was destroyed");
        return FLARE_ERR_BACKEND;
    }
    if (start_state == CUDA_PC_START_FAILED) {
        snprintf(reason, reason_size, "PC sampling did not start: %s", hw->call_reason);
        return FLARE_ERR_BACKEND;
    }
    int status = FLARE_ERR_BACKEND;
    cuda_app_thread_outcome outcome =
        cuda_app_thread_call(stop_here, hw, CUDA_PC_STOP_WAIT_NS, 1, &status);
    /* What Stop decoded is read after it: more PCs may be waiting. (Not
     * when withdrawn: the start may still be running, resetting it.) */
    if (outcome == CUDA_APP_THREAD_RAN)
        hw->remaining = 1;
    if (outcome != CUDA_APP_THREAD_WITHDRAWN && hw->hardware_full_reads > 0)
        core_log(CORE_LOG_WARNING,
                 "PC sampling: %llu reads found the hardware buffer full (samples lost; a "
                 "longer FLARE_PC_PERIOD keeps up)",
                 (unsigned long long)hw->hardware_full_reads);
    if (outcome != CUDA_APP_THREAD_WITHDRAWN)
        hw->hardware_full_reads = 0;
    if (outcome != CUDA_APP_THREAD_RAN) {
        /* Posted still, or (withdrawn) never posted: an earlier request
         * held the slot, and the next start stops CUPTI first. Either way
         * the next start discards what this leaves. */
        atomic_store(&hw->stop_deferred, 1);
        snprintf(reason, reason_size,
                 outcome == CUDA_APP_THREAD_DETACHED
                     ? "no kernel launch within %.0f s to stop PC sampling at: it stops at the "
                       "application's next launch, and its samples after this close are dropped"
                     : "an earlier PC request held the application's thread past %.0f s: PC "
                       "sampling stops when the next window starts, and its samples after this "
                       "close are dropped",
                 CUDA_PC_STOP_WAIT_NS / 1e9);
        return FLARE_ERR_BACKEND;
    }
    if (status != FLARE_OK) {
        snprintf(reason, reason_size, "%s", hw->call_reason);
        return status;
    }
    return FLARE_OK;
}

/* One GetData into the read buffer; adds what CUPTI could not give as
 * records to *lost. Returns the PCs it brought. */
static size_t fetch(cuda_pc_hardware *hw, uint64_t *lost)
{
    CUcontext context = atomic_load(&hw->context);
    hw->pending_pcs = hw->cursor_pc = hw->cursor_stall = 0;
    hw->remaining = 0;
    if (context == NULL)
        return 0;
    cuda_pc_buffer_reset(&hw->read_buffer);
    CUpti_PCSamplingGetDataParams params = {.size = CUpti_PCSamplingGetDataParamsSize,
                                            .ctx = context,
                                            .pcSamplingData = &hw->read_buffer.data};
    CUptiResult result = PC_LOGGED(hw, cuptiPCSamplingGetData, &params);
    const CUpti_PCSamplingData *data = &hw->read_buffer.data;
    if (result != CUPTI_SUCCESS && result != CUPTI_ERROR_OUT_OF_MEMORY) {
        CORE_LOG_ONCE("cuda.pc_getdata", CORE_LOG_WARNING,
                      "cuptiPCSamplingGetData: %s (PC samples of this read are lost)",
                      result_text(result));
        return 0;
    }
    /* Out of memory: the hardware buffer filled and CUPTI gives no PC
     * data for it; what it counted is still in the totals. */
    if (result == CUPTI_ERROR_OUT_OF_MEMORY || data->hardwareBufferFull)
        hw->hardware_full_reads++;
    *lost += data->droppedSamples + data->nonUsrKernelsTotalSamples;
    if (result != CUPTI_SUCCESS)
        return 0;
    hw->pending_pcs = data->totalNumPcs < hw->read_buffer.pcs_capacity
                          ? data->totalNumPcs
                          : hw->read_buffer.pcs_capacity;
    hw->remaining = data->remainingNumPcs;
    return hw->pending_pcs;
}

/* Hands over pending (PC, stall reason) counts, from the cursor on. */
/* CUPTI's name for a PC's function, demangled as kernel records are (so
 * both name one kernel alike), kept whole in hw->names for the engine's
 * entries to point at. Consecutive records mostly share a function: the
 * last one is checked first, then the table; demangled once per function.
 * A function past the table's bounds counts under names_full (one name for
 * many functions: no line is looked up for it). */
static const char names_full[] = "(function name not kept: PC sampling's name table is full)";
static const char unknown_function[] = "(unknown function)";
static const char *function_name(cuda_pc_hardware *hw, const char *cupti_name)
{
    if (cupti_name == NULL)
        return unknown_function;
    /* By address: CUPTI's name strings are never freed here (cuda_pc.c's
     * header), so no other name can ever come at this address. */
    if (cupti_name == hw->last_key)
        return hw->last_name;
    const char *name = pc_names_find(hw->names, cupti_name);
    if (name == NULL) {
        const char *demangled = cuda_demangle(cupti_name);
        name = pc_names_add(hw->names, cupti_name, demangled != NULL ? demangled : cupti_name);
        if (name == NULL)
            return names_full;
    }
    hw->last_key = cupti_name;
    hw->last_name = name;
    return name;
}

/* The PC's function name and source line, once for all its stall reasons.
 * Lines are keyed by flare's kept name (one per function, whatever CUPTI's
 * strings do) and asked with CUPTI's, the cubin's own. */
static void place_pc(cuda_pc_hardware *hw, const CUpti_PCSamplingPCData *pc)
{
    hw->pc_function = function_name(hw, pc->functionName);
    hw->pc_file = NULL;
    hw->pc_line = 0;
    hw->pc_code = NULL;
    if (hw->pc_function != names_full && hw->pc_function != unknown_function)
        cuda_pc_lines_find(pc->cubinCrc, pc->functionName, hw->pc_function, pc->pcOffset,
                           &hw->pc_file, &hw->pc_line, &hw->pc_code);
}

static size_t emit_pending(cuda_pc_hardware *hw, pc_raw_sample *out, size_t max, uint64_t now)
{
    size_t moved = 0;
    while (moved < max && hw->cursor_pc < hw->pending_pcs) {
        const CUpti_PCSamplingPCData *pc = &hw->read_buffer.pcs[hw->cursor_pc];
        size_t stalls = pc->stallReasonCount < hw->read_buffer.per_pc ? pc->stallReasonCount
                                                                      : hw->read_buffer.per_pc;
        if (hw->cursor_stall >= stalls) {
            hw->cursor_pc++;
            hw->cursor_stall = 0;
            continue;
        }
        if (hw->cursor_stall == 0)
            place_pc(hw, pc);
        const CUpti_PCSamplingStallReason *stall = &pc->stallReason[hw->cursor_stall++];
        if (stall->samples == 0)
            continue;
        pc_raw_sample *sample = &out[moved++];
        sample->count = stall->samples;
        sample->time_ns = now;
        sample->device = hw->device;
        sample->stall_reason = stall->pcSamplingStallReasonIndex;
        sample->pc_offset = pc->pcOffset;
        sample->function = hw->pc_function;
        sample->file = hw->pc_file;
        sample->line = hw->pc_line;
        sample->code = hw->pc_code;
    }
    return moved;
}

static size_t hw_read(void *opaque, pc_raw_sample *out, size_t max, uint64_t *lost)
{
    cuda_pc_hardware *hw = opaque;
    /* A start posted (it may be running on the application's thread,
     * reading into the same buffer): nothing here is touched. */
    int start_state = atomic_load_explicit(&hw->start_state, memory_order_acquire);
    if (start_state == CUDA_PC_START_POSTED)
        return 0;
    *lost += atomic_exchange(&hw->stale_lost, 0);
    /* A start not made (or failed), or a stop posted for a later launch:
     * CUPTI is left alone. */
    if (start_state != CUDA_PC_START_RAN ||
        (atomic_load(&hw->stop_deferred) && cuda_app_thread_pending()))
        return 0;
    uint64_t now = core_now_ns();
    size_t moved = 0;
    int fetches = 0;
    while (moved < max) {
        if (hw->cursor_pc < hw->pending_pcs) {
            moved += emit_pending(hw, out + moved, max - moved, now);
            continue;
        }
        /* The first fetch of a read always; more while CUPTI says PCs remain. */
        if (fetches == CUDA_PC_FETCHES_MAX || (fetches > 0 && hw->remaining == 0))
            break;
        fetches++;
        if (fetch(hw, lost) == 0 && hw->remaining == 0)
            break;
    }
    cuda_pc_lines_report();
    uint64_t refused = pc_names_refused(hw->names);
    if (refused != hw->names_refused_reported) {
        hw->names_refused_reported = refused;
        core_drops_set("pc_sampling",
                       "PC records whose function name was not kept (name table full)", refused);
    }
    return moved;
}

static const char *hw_stall_name(void *opaque, uint32_t reason)
{
    const cuda_pc_hardware *hw = opaque;
    for (size_t i = 0; i < hw->stall_count; i++)
        if (hw->stall_index[i] == reason)
            return hw->stall_name[i];
    return "unknown";
}

static const pc_hardware_ops cuda_pc_ops = {
    .name = "cuda-pc-sampling",
    .start = hw_start,
    .stop = hw_stop,
    .read = hw_read,
    .stall_reason_name = hw_stall_name,
    /* No release: disabling from an exit handler is what crashed PM
     * sampling's programs at exit on the H200; the driver cleans up. */
    .release = NULL,
};

/* ---- the first context ---- */

static double sm_clock_mhz(int device)
{
    /* Zeroed: cuda_load_driver takes a non-NULL library as already loaded
     * (an uninitialised one crashed every PC-enabled run on the H200). */
    cuda_driver_api driver = {0};
    char reason[128];
    CUdevice handle;
    int khz = 0;
    if (cuda_load_driver(&driver, reason, sizeof(reason)) == 0 &&
        driver.cuDeviceGet(&handle, device) == CUDA_SUCCESS &&
        driver.cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, handle) == CUDA_SUCCESS &&
        khz > 0)
        return khz / 1e3;
    return 1980.0; /* the H200's, for the period's conversion only */
}

static int enable_on(CUcontext context, char *reason, size_t reason_size)
{
    uint32_t device = 0;
    CUptiResult result = hardware.api.cuptiGetDeviceId(context, &device);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiGetDeviceId", reason, reason_size);
    hardware.device = (int)device;
    hardware.sm_mhz = sm_clock_mhz((int)device);
    uint64_t period_ns = PC_PERIOD_DEFAULT_NS;
    char ignored[160];
    if (pc_settings_from_environment(&period_ns, ignored, sizeof(ignored)) != FLARE_OK)
        period_ns = PC_PERIOD_DEFAULT_NS; /* the engine refuses the windows, saying why */
    CUpti_PCSamplingEnableParams enable = {.size = CUpti_PCSamplingEnableParamsSize,
                                           .ctx = context};
    result = PC_LOGGED(&hardware, cuptiPCSamplingEnable, &enable);
    if (result != CUPTI_SUCCESS)
        return failed(result, "cuptiPCSamplingEnable", reason, reason_size);
    int status = cuda_pc_stall_table_read(&hardware, context, reason, reason_size);
    if (status == FLARE_OK && (cuda_pc_buffer_make(&hardware.read_buffer, CUDA_PC_READ_PCS,
                                                   hardware.stall_count) != FLARE_OK ||
                               cuda_pc_buffer_make(&hardware.config_buffer, CUDA_PC_READ_PCS,
                                                   hardware.stall_count) != FLARE_OK)) {
        snprintf(reason, reason_size, "no memory for PC sampling's buffers");
        status = FLARE_ERR_NO_MEMORY;
    }
    if (status == FLARE_OK)
        status = cuda_pc_configure(&hardware, context, cuda_pc_period_exp_of(&hardware, period_ns),
                                   reason, reason_size);
    if (status != FLARE_OK) {
        CUpti_PCSamplingDisableParams disable = {.size = CUpti_PCSamplingDisableParamsSize,
                                                 .ctx = context};
        hardware.api.cuptiPCSamplingDisable(&disable);
        return status;
    }
    atomic_store(&hardware.context, context);
    atomic_store(&context_ready, 1);
    return FLARE_OK;
}

void cuda_pc_context_created(CUcontext context)
{
    if (engine == NULL || atomic_exchange(&context_claimed, 1))
        return;
    char reason[384] = "";
    uint64_t began = core_now_ns();
    if (enable_on(context, reason, sizeof(reason)) != FLARE_OK) {
        atomic_store(&enable_failed, 1);
        core_log(CORE_LOG_WARNING, "PC sampling unavailable: %s", reason);
        core_capability_set("pc_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return;
    }
    core_capability_set("pc_sampling", 1, CORE_CAPABILITY_ACTIVE,
                        "enabled on device %d at its first context (%.0f ms), idle until a "
                        "window with engine pc: every 2^%u cycles (%.1f us at %.0f MHz), %zu "
                        "stall reasons",
                        hardware.device, (double)(core_now_ns() - began) / 1e6, hardware.period_exp,
                        ldexp(1.0, (int)hardware.period_exp) / hardware.sm_mhz, hardware.sm_mhz,
                        hardware.stall_count);
}

int cuda_pc_enabled(void)
{
    /* From the claim on, not from the enable's end (70-100 ms later): a
     * second context made meanwhile must not start PM sampling's set-up. */
    return atomic_load(&context_claimed) && !atomic_load(&enable_failed);
}

void cuda_pc_context_destroying(CUcontext context)
{
    CUcontext expected = context;
    if (atomic_compare_exchange_strong(&hardware.context, &expected, NULL))
        core_capability_set("pc_sampling", 1, CORE_CAPABILITY_DEGRADED,
                            "the sampled context (device %d) was destroyed; no later context "
                            "is sampled",
                            hardware.device);
}

/* ---- install ---- */

static int resolve(const cuda_cupti_api *cupti, char *reason, size_t reason_size)
{
    if (cupti == NULL || cupti->library == NULL) {
        snprintf(reason, reason_size, "libcupti is not loaded");
        return FLARE_ERR_BACKEND;
    }
#define PC_FUNCTION_RESOLVE_(name, result, arguments)                                              \
    *(void **)(&hardware.api.name) = dlsym(cupti->library, #name);                                 \
    if (hardware.api.name == NULL) {                                                               \
        snprintf(reason, reason_size,                                                              \
                 "symbol %s missing in %.120s (CUPTI too old for PC "                              \
                 "sampling)",                                                                      \
                 #name, cupti->path);                                                              \
        return FLARE_ERR_BACKEND;                                                                  \
    }
    PC_FUNCTIONS(PC_FUNCTION_RESOLVE_)
#undef PC_FUNCTION_RESOLVE_
    return FLARE_OK;
}

void cuda_pc_install(const cuda_cupti_api *cupti, int launch_callbacks)
{
    if (engine != NULL)
        return;
    const char *off = NULL;
    const char *why = cuda_pc_wanted_by(&off);
    if (why == NULL) {
        core_capability_set("pc_sampling", 0, CORE_CAPABILITY_OFF, "%s", off);
        return;
    }
    if (!launch_callbacks) {
        core_capability_set("pc_sampling", 1, CORE_CAPABILITY_UNAVAILABLE,
                            "needs the launch callbacks (CUPTI's PC start and stop are made at "
                            "the application's launches), which this mode has off: pc windows "
                            "use PM sampling");
        return;
    }
    cuda_pc_log_open();
    char reason[384] = "";
    if (resolve(cupti, reason, sizeof(reason)) == FLARE_OK &&
        (pc_names_create(PC_NAMES_MAX_DEFAULT, PC_NAMES_MAX_BYTES_DEFAULT, &hardware.names) !=
             FLARE_OK ||
         pc_engine_create(&cuda_pc_ops, &hardware, CUDA_PM_CONTEXT_ID, &engine) != FLARE_OK))
        snprintf(reason, sizeof(reason), "no memory for the PC sampling engine");
    if (reason[0] != '\0') {
        engine = NULL;
        core_capability_set("pc_sampling", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
        return;
    }
    core_capability_set("pc_sampling", 1, CORE_CAPABILITY_DEGRADED,
                        "installed (%s): enabled at the first context", why);
    if (cuda_pc_lines_install(cupti, reason, sizeof(reason)) != FLARE_OK)
        core_capability_set("pc_source_lines", 1, CORE_CAPABILITY_UNAVAILABLE, "%s", reason);
}

/* ---- the window coordinator's engine ---- */

static int device_of(int device)
{
    /* A window asks for every device (-1): the sampled one, known once the
     * enable wrote it (context_ready orders the read after the write; a
     * window armed meanwhile is refused by the engine anyway). */
    if (device >= 0)
        return device;
    return atomic_load(&context_ready) ? hardware.device : 0;
}

static int engine_arm(int device, const backend_engine_config *config, uint64_t now_ns,
                      char *reason, size_t reason_size)
{
    return pc_engine_arm(engine, device_of(device), config, now_ns, reason, reason_size);
}

static int engine_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    return pc_engine_disarm(engine, device_of(device), now_ns, result);
}

static int engine_probe(int device, char *reason, size_t reason_size)
{
    (void)device;
    if (atomic_load(&hardware.context) == NULL) {
        snprintf(reason, reason_size, "PC sampling is not enabled on a live context");
        return FLARE_ERR_BACKEND;
    }
    return pc_engine_probe(engine, reason, reason_size);
}

/* Why auto must not pick PC sampling now (NULL when it may). */
static const char *engine_unusable(void)
{
    if (atomic_load(&enable_failed))
        return "PC sampling's enable failed at the first context (see the pc_sampling capability)";
    if (atomic_load(&context_claimed) && atomic_load(&hardware.context) == NULL)
        return atomic_load(&context_ready)
                   ? "the context PC sampling was enabled on was destroyed"
                   : "PC sampling's enable at the first context is still running";
    return NULL;
}

static const backend_engine_ops cuda_pc_engine_ops = {
    .name = "cuda-pc-sampling",
    .arm = engine_arm,
    .disarm = engine_disarm,
    .probe = engine_probe,
    .prepare = NULL,
    /* flare_window_open/close wait on the program's thread: serve there. */
    .serve = cuda_app_thread_serve,
    .cost_launch_ns = CUDA_PC_COST_LAUNCH_NS,
    .cost_gpu = CUDA_PC_COST_GPU,
    .cost_source = CUDA_ENGINE_COST_SOURCE,
    .unusable = engine_unusable,
};

const backend_engine_ops *cuda_pc_deep_engine(void)
{
    return engine != NULL ? &cuda_pc_engine_ops : NULL;
}

struct pc_engine *cuda_pc_core(void)
{
    return engine;
}
