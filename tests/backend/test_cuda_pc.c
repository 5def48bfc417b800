/*
 * test_cuda_pc.c: the CUDA PC sampling engine (backend/cuda/cuda_pc.c),
 * through its window ops (cuda_pc_deep_engine), against a fake CUPTI
 * defined here: the program is linked with ENABLE_EXPORTS (-rdynamic) and
 * hands cuda_pc_install dlopen(NULL) as libcupti, so cuda_pc.c's dlsym
 * finds the cupti* functions below. The fake records each call (thread,
 * count, whether CUPTI is started) and checks the fields CUPTI's header
 * makes the caller's.
 *
 * Windows are armed and disarmed on a thread named "flare-test-win", as the
 * coordinator's are; the main thread is the application's: it "launches"
 * (cuda_app_thread_at_launch), or makes no launch so that a start or stop
 * waits out its bound (1 s, 2 s) and stays posted. Cases: the enable at the
 * first context and .unusable around it; Start/Stop only on application
 * threads; a window with no launch; a late stop after a refused start (it
 * used to skip Stop: CUPTI left started); a start posted beside the drain
 * thread (hw_read used to race discard_stale: run under TSan); a stop
 * never posted, made by the next start; .unusable after the context's end
 * (last: the engine is process-global). Built again with
 * FLARE_TEST_PC_FAIL_ENABLE (test_cuda_pc_enable_fails): Enable fails, and
 * .unusable must say so.
 *
 * Must never: load the real libcupti or reach a GPU, let a fixed sleep be
 * an assertion (conditions are polled with TEST_WAIT_UNTIL; the 1 s and 2 s
 * the code waits for a launch are what make some cases slow), or run under
 * a name that begins "flare-" on its main thread (that thread is the
 * application's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_app_thread.h"
#include "backend/cuda/cuda_loader.h"
#include "backend/cuda/cuda_pc.h"
#include "core/clock.h"
#include "core/log.h"
#include "flare/flare.h"
#include "pcsamp/pc_engine.h"
#include "test_util.h"

#ifdef FLARE_TEST_PC_FAIL_ENABLE
#define FAKE_ENABLE_RESULT CUPTI_ERROR_NOT_SUPPORTED
#else
#define FAKE_ENABLE_RESULT CUPTI_SUCCESS
#endif

/* ---- the fake CUPTI ---- */

/* The context the test "creates", and another one. */
static int context_storage[2];
#define TEST_CONTEXT  ((CUcontext)&context_storage[0])
#define OTHER_CONTEXT ((CUcontext)&context_storage[1])

/* Stall reasons: CUPTI's indexes are not 0..N-1. */
#define FAKE_STALLS 3
static const uint32_t fake_stall_index[FAKE_STALLS] = {5, 9, 12};
static const char *const fake_stall_cupti[FAKE_STALLS] = {
    "smsp__pcsamp_warps_issue_stalled_long_scoreboard", "smsp__pcsamp_warps_issue_stalled_barrier",
    "smsp__pcsamp_warps_issue_selected"};

/* One batch of PC records, one PC per GetData (remainingNumPcs says the
 * rest), with FAKE_BATCH_DROPPED samples the hardware dropped. The function
 * names are CUPTI's to allocate and the client's to free; flare keeps them
 * (cuda_pc.c's header), so static strings here. */
static char fake_function_a[] = "fake_kernel_a";
static char fake_function_b[] = "fake_kernel_b";
static const struct {
    char *function;
    uint64_t offset;
    uint32_t samples[FAKE_STALLS]; /* per fake_stall_index */
    int with_zeros;                /* CUPTI may list a reason with 0 samples */
} fake_batch[] = {
    {fake_function_a, 0x10, {3, 0, 4}, 1},
    {fake_function_b, 0x20, {0, 2, 0}, 0},
};
#define FAKE_BATCH_PCS     ((int)(sizeof(fake_batch) / sizeof(fake_batch[0])))
#define FAKE_BATCH_SAMPLES 9u
#define FAKE_BATCH_DROPPED 1u

static struct {
    _Atomic(CUcontext) enabled; /* Enable's context, until Disable */
    _Atomic CUptiResult enable_result;
    _Atomic int enable_gate_closed; /* Enable waits while set */
    _Atomic int enable_entered;
    _Atomic int start_gate_closed; /* Start waits while set (it took seconds) */
    _Atomic int start_entered;
    _Atomic int enables, disables;
    _Atomic int start_stop_control, continuous, stall_reasons_set;
    _Atomic uint32_t period; /* the last SAMPLING_PERIOD set */
    _Atomic int period_sets;
    _Atomic int started; /* Start made, no Stop since */
    _Atomic int starts, stops;
    _Atomic(pthread_t) start_thread, stop_thread;
    _Atomic int flare_thread_calls;   /* Start or Stop on a thread named flare-* */
    _Atomic int double_starts;        /* Start while started */
    _Atomic int stray_stops;          /* Stop while not started */
    _Atomic int pcs_left;             /* of the batch fed, still to hand over */
    _Atomic int get_data_flare_calls; /* GetData on flare threads (drain, disarm) */
    _Atomic int in_get_data;          /* GetData calls running now (never more than 1) */
    _Atomic int misuse;               /* calls CUPTI would refuse; the first one named below */
    _Atomic int misuse_named;
    char misuse_first[160];
} fake;

static int on_flare_thread(void)
{
    char name[16] = "";
    pthread_getname_np(pthread_self(), name, sizeof(name));
    return strncmp(name, "flare-", 6) == 0;
}

static void misused(const char *what)
{
    if (atomic_fetch_add(&fake.misuse, 1) == 0) {
        snprintf(fake.misuse_first, sizeof(fake.misuse_first), "%s", what);
        atomic_store(&fake.misuse_named, 1);
    }
}

/* A call on the enabled context, with its params' size as CUPTI's macro. */
static int params_ok(size_t size, size_t expected, CUcontext context, const char *call)
{
    if (size == expected && context != NULL && context == atomic_load(&fake.enabled))
        return 1;
    misused(call);
    return 0;
}

/* Bounded: a case that forgets to open a gate fails instead of hanging. */
static void wait_at_gate(_Atomic int *closed)
{
    for (int i = 0; i < 60000 && atomic_load(closed); i++)
        test_pause_ms(1);
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **text)
{
    *text = result == CUPTI_SUCCESS ? "fake: success" : "fake: not supported here";
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *device)
{
    if (context != TEST_CONTEXT)
        return CUPTI_ERROR_INVALID_CONTEXT;
    *device = 0;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiPCSamplingEnable(CUpti_PCSamplingEnableParams *params)
{
    atomic_fetch_add(&fake.enables, 1);
    atomic_store(&fake.enable_entered, 1);
    wait_at_gate(&fake.enable_gate_closed);
    if (params->size != CUpti_PCSamplingEnableParamsSize || params->ctx == NULL) {
        misused("cuptiPCSamplingEnable");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    CUptiResult result = atomic_load(&fake.enable_result);
    if (result == CUPTI_SUCCESS)
        atomic_store(&fake.enabled, params->ctx);
    return result;
}

CUptiResult cuptiPCSamplingDisable(CUpti_PCSamplingDisableParams *params)
{
    atomic_fetch_add(&fake.disables, 1);
    if (!params_ok(params->size, CUpti_PCSamplingDisableParamsSize, params->ctx,
                   "cuptiPCSamplingDisable"))
        return CUPTI_ERROR_INVALID_PARAMETER;
    atomic_store(&fake.enabled, NULL);
    return CUPTI_SUCCESS;
}

CUptiResult cuptiPCSamplingGetNumStallReasons(CUpti_PCSamplingGetNumStallReasonsParams *params)
{
    if (!params_ok(params->size, CUpti_PCSamplingGetNumStallReasonsParamsSize, params->ctx,
                   "cuptiPCSamplingGetNumStallReasons") ||
        params->numStallReasons == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *params->numStallReasons = FAKE_STALLS;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiPCSamplingGetStallReasons(CUpti_PCSamplingGetStallReasonsParams *params)
{
    /* The caller owns both arrays: numStallReasons indexes, and as many
     * names of CUPTI_STALL_REASON_STRING_SIZE bytes each. */
    if (!params_ok(params->size, CUpti_PCSamplingGetStallReasonsParamsSize, params->ctx,
                   "cuptiPCSamplingGetStallReasons") ||
        params->numStallReasons != FAKE_STALLS || params->stallReasonIndex == NULL ||
        params->stallReasons == NULL) {
        misused("cuptiPCSamplingGetStallReasons arguments");
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
    for (size_t i = 0; i < FAKE_STALLS; i++) {
        params->stallReasonIndex[i] = fake_stall_index[i];
        snprintf(params->stallReasons[i], CUPTI_STALL_REASON_STRING_SIZE, "%s",
                 fake_stall_cupti[i]);
    }
    return CUPTI_SUCCESS;
}

CUptiResult
cuptiPCSamplingSetConfigurationAttribute(CUpti_PCSamplingConfigurationInfoParams *params)
{
    if (!params_ok(params->size, CUpti_PCSamplingConfigurationInfoParamsSize, params->ctx,
                   "cuptiPCSamplingSetConfigurationAttribute") ||
        params->pPCSamplingConfigurationInfo == NULL)
        return CUPTI_ERROR_INVALID_PARAMETER;
    for (size_t i = 0; i < params->numAttributes; i++) {
        CUpti_PCSamplingConfigurationInfo *info = &params->pPCSamplingConfigurationInfo[i];
        info->attributeStatus = CUPTI_SUCCESS;
        switch (info->attributeType) {
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD:
            if (atomic_load(&fake.started))
                misused("sampling period set while started");
            atomic_store(&fake.period, info->attributeData.samplingPeriodData.samplingPeriod);
            atomic_fetch_add(&fake.period_sets, 1);
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL:
            atomic_store(&fake.start_stop_control,
                         info->attributeData.enableStartStopControlData.enableStartStopControl !=
                             0);
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE:
            atomic_store(&fake.continuous, info->attributeData.collectionModeData.collectionMode ==
                                               CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS);
            break;
        case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON: {
            size_t count = info->attributeData.stallReasonData.stallReasonCount;
            const uint32_t *index = info->attributeData.stallReasonData.pStallReasonIndex;
            int same = count == FAKE_STALLS && index != NULL;
            for (size_t s = 0; same && s < FAKE_STALLS; s++)
                same = index[s] == fake_stall_index[s];
            if (!same)
                misused("stall reasons not CUPTI's indexes");
            atomic_store(&fake.stall_reasons_set, same);
            break;
        }
        default:
            break;
        }
    }
    return CUPTI_SUCCESS;
}

static CUptiResult start_or_stop(size_t size, CUcontext context, int start)
{
    const char *call = start ? "cuptiPCSamplingStart" : "cuptiPCSamplingStop";
    if (on_flare_thread())
        atomic_fetch_add(&fake.flare_thread_calls, 1);
    if (!params_ok(size, start ? CUpti_PCSamplingStartParamsSize : CUpti_PCSamplingStopParamsSize,
                   context, call))
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (!atomic_load(&fake.start_stop_control)) {
        misused("Start/Stop without ENABLE_START_STOP_CONTROL");
        return CUPTI_ERROR_INVALID_OPERATION;
    }
    if (start) {
        atomic_store(&fake.start_entered, 1);
        wait_at_gate(&fake.start_gate_closed);
        atomic_store(&fake.start_thread, pthread_self());
        atomic_fetch_add(&fake.starts, 1);
        if (atomic_exchange(&fake.started, 1)) {
            atomic_fetch_add(&fake.double_starts, 1);
            return CUPTI_ERROR_INVALID_OPERATION;
        }
    } else {
        atomic_store(&fake.stop_thread, pthread_self());
        atomic_fetch_add(&fake.stops, 1);
        if (!atomic_exchange(&fake.started, 0)) {
            atomic_fetch_add(&fake.stray_stops, 1);
            return CUPTI_ERROR_INVALID_OPERATION;
        }
    }
    return CUPTI_SUCCESS;
}

CUptiResult cuptiPCSamplingStart(CUpti_PCSamplingStartParams *params)
{
    return start_or_stop(params->size, params->ctx, 1);
}

CUptiResult cuptiPCSamplingStop(CUpti_PCSamplingStopParams *params)
{
    return start_or_stop(params->size, params->ctx, 0);
}

/* Fills the caller's PC record (its size and stallReason array are the
 * caller's; room for every configured reason) with batch entry b. */
static int fill_pc(CUpti_PCSamplingPCData *pc, int b)
{
    if (pc->size != sizeof(CUpti_PCSamplingPCData) || pc->stallReason == NULL)
        return 0;
    pc->cubinCrc = 0xc0ffee;
    pc->pcOffset = fake_batch[b].offset;
    pc->functionIndex = (uint32_t)b;
    pc->functionName = fake_batch[b].function;
    pc->correlationId = 0; /* continuous mode */
    size_t count = 0;
    for (size_t s = 0; s < FAKE_STALLS; s++) {
        if (fake_batch[b].samples[s] == 0 && !fake_batch[b].with_zeros)
            continue;
        pc->stallReason[count].pcSamplingStallReasonIndex = fake_stall_index[s];
        pc->stallReason[count].samples = fake_batch[b].samples[s];
        count++;
    }
    pc->stallReasonCount = count;
    return 1;
}

CUptiResult cuptiPCSamplingGetData(CUpti_PCSamplingGetDataParams *params)
{
    if (on_flare_thread())
        atomic_fetch_add(&fake.get_data_flare_calls, 1);
    if (atomic_fetch_add(&fake.in_get_data, 1) != 0)
        misused("two GetData calls at once");
    CUptiResult result = CUPTI_ERROR_INVALID_PARAMETER;
    CUpti_PCSamplingData *data = params->pcSamplingData;
    if (!params_ok(params->size, CUpti_PCSamplingGetDataParamsSize, params->ctx,
                   "cuptiPCSamplingGetData"))
        goto out;
    /* [w] fields are the caller's: size, collectNumPcs, pPcData. */
    if (data == NULL || data->size != sizeof(CUpti_PCSamplingData) || data->collectNumPcs == 0 ||
        data->pPcData == NULL) {
        misused("GetData: the caller's CUpti_PCSamplingData");
        goto out;
    }
    data->totalSamples = data->droppedSamples = data->nonUsrKernelsTotalSamples = 0;
    data->rangeId = 0;
    data->hardwareBufferFull = 0;
    data->totalNumPcs = 0;
    int left = atomic_load(&fake.pcs_left);
    if (left > 0) {
        int b = FAKE_BATCH_PCS - left;
        if (!fill_pc(&data->pPcData[0], b)) {
            misused("GetData: the caller's CUpti_PCSamplingPCData");
            goto out;
        }
        data->totalNumPcs = 1;
        for (size_t s = 0; s < FAKE_STALLS; s++)
            data->totalSamples += fake_batch[b].samples[s];
        if (b == 0)
            data->droppedSamples = FAKE_BATCH_DROPPED;
        data->totalSamples += data->droppedSamples;
        left--;
        atomic_store(&fake.pcs_left, left);
    }
    data->remainingNumPcs = (size_t)left;
    result = CUPTI_SUCCESS;
out:
    atomic_fetch_sub(&fake.in_get_data, 1);
    return result;
}

/* ---- helpers ---- */

static pthread_t app_thread; /* the main thread: the application's */
static uint64_t next_window_id = 100;

static void launch(void)
{
    cuda_app_thread_at_launch();
}

static const backend_engine_ops *ops(void)
{
    const backend_engine_ops *engine = cuda_pc_deep_engine();
    assert_non_null(engine);
    return engine;
}

/* The .unusable hook's answer; a text saying so when the hook is missing. */
static const char *unusable_now(void)
{
    if (ops()->unusable == NULL)
        return "(cuda_pc_engine_ops has no .unusable hook)";
    return ops()->unusable();
}

/* Takes flare's queued log lines; 1 when one of them contains text. */
static int log_says(const char *text)
{
    static core_log_line lines[32];
    int found = 0, count;
    while ((count = core_log_take(lines, 32)) > 0)
        for (int i = 0; i < count; i++)
            if (strstr(lines[i].text, text) != NULL)
                found = 1;
    return found;
}

/* One arm or disarm of the PC engine, made on a flare thread. */
typedef struct window_call {
    int disarm;
    uint64_t interval_ns;
    uint64_t window_id;
    int status;
    char reason[256];
    backend_engine_result result;
    _Atomic int done;
} window_call;

static void *window_call_main(void *argument)
{
    window_call *call = argument;
    pthread_setname_np(pthread_self(), "flare-test-win");
    /* Not ops(): no cmocka assertion off the test's thread (install checked). */
    const backend_engine_ops *engine = cuda_pc_deep_engine();
    if (call->disarm) {
        call->status = engine->disarm(-1, core_now_ns(), &call->result);
    } else {
        backend_engine_config config = {
            .sample_interval_ns = call->interval_ns, .label = "test", .window_id = call->window_id};
        call->status = engine->arm(-1, &config, core_now_ns(), call->reason, sizeof(call->reason));
    }
    atomic_store(&call->done, 1);
    return NULL;
}

static int done_after_launch(window_call *call, int launches)
{
    if (launches)
        launch();
    return atomic_load(&call->done);
}

/* Runs the call on a flare thread while this application thread launches
 * (launches 1) or makes no launch (0: a start or stop waits out its bound). */
static void run_window_call(window_call *call, int launches)
{
    pthread_t thread;
    atomic_store(&call->done, 0);
    assert_int_equal(pthread_create(&thread, NULL, window_call_main, call), 0);
    TEST_WAIT_UNTIL(done_after_launch(call, launches));
    pthread_join(thread, NULL);
}

static window_call arm_window(int launches, uint64_t interval_ns)
{
    window_call call = {.interval_ns = interval_ns, .window_id = ++next_window_id};
    run_window_call(&call, launches);
    return call;
}

/* What every case ends with: nothing CUPTI would refuse was asked of it. */
static void assert_fake_clean(void)
{
    if (atomic_load(&fake.misuse) != 0)
        fail_msg("the fake CUPTI was misused %d times; first: %s", atomic_load(&fake.misuse),
                 atomic_load(&fake.misuse_named) ? fake.misuse_first : "?");
    assert_int_equal(atomic_load(&fake.flare_thread_calls), 0);
    assert_int_equal(atomic_load(&fake.double_starts), 0);
    assert_int_equal(atomic_load(&fake.stray_stops), 0);
}

/* An application thread that launches until stopped (launcher_main),
 * while the test's own thread waits on a window call. */
static _Atomic int launcher_on;
static pthread_t launcher;

static void stop_launcher(void)
{
    if (atomic_exchange(&launcher_on, 0))
        pthread_join(launcher, NULL);
}

/* Each case starts with nothing posted, nothing armed and the fake's error
 * counts at zero. A case that failed half-way (on a tree with the bugs)
 * may have left CUPTI "started": the fake forgets it, so the next case
 * tells its own story. */
static int fresh(void **state)
{
    (void)state;
    atomic_store(&fake.enable_gate_closed, 0);
    atomic_store(&fake.start_gate_closed, 0);
    stop_launcher();
    for (int i = 0; i < 1000 && cuda_app_thread_pending(); i++)
        launch();
    if (cuda_app_thread_pending())
        return -1;
    if (cuda_pc_deep_engine() != NULL && cuda_pc_core() != NULL) {
        window_call call = {.disarm = 1};
        run_window_call(&call, 1);
    }
    atomic_store(&fake.started, 0);
    atomic_store(&fake.pcs_left, 0);
    atomic_store(&fake.misuse, 0);
    atomic_store(&fake.misuse_named, 0);
    atomic_store(&fake.flare_thread_calls, 0);
    atomic_store(&fake.double_starts, 0);
    atomic_store(&fake.stray_stops, 0);
    log_says("");
    return 0;
}

static int install(void **state)
{
    (void)state;
    static cuda_cupti_api cupti;
    pthread_setname_np(pthread_self(), "app-main");
    app_thread = pthread_self();
    setenv("FLARE_DEEP_ENGINE", "pc", 1);
    unsetenv("FLARE_CUDA_PC");
    unsetenv("FLARE_CUDA_PC_LOG");
    unsetenv("FLARE_PC_PERIOD");
    atomic_store(&fake.enable_result, FAKE_ENABLE_RESULT);
    cupti.library = dlopen(NULL, RTLD_NOW);
    snprintf(cupti.path, sizeof(cupti.path), "(the test program's fake CUPTI)");
    if (cupti.library == NULL)
        return -1;
    cuda_pc_install(&cupti, 1);
    /* NULL here: a PC_FUNCTIONS symbol not exported (ENABLE_EXPORTS off?). */
    return cuda_pc_deep_engine() != NULL && cuda_pc_core() != NULL ? 0 : -1;
}

/* The CUPTI resource callback, on an application thread. */
static void *create_context(void *context)
{
    pthread_setname_np(pthread_self(), "app-context");
    cuda_pc_context_created(context);
    return NULL;
}

/* ---- cases ---- */

#ifndef FLARE_TEST_PC_FAIL_ENABLE

static window_call disarm_window(int launches)
{
    window_call call = {.disarm = 1};
    run_window_call(&call, launches);
    return call;
}

static int launch_then(_Atomic int *counter, int value)
{
    launch();
    return atomic_load(counter) >= value;
}

/* Hands the fake a batch of PC records, read by the next GetData calls. */
static void feed_batch(void)
{
    atomic_store(&fake.pcs_left, FAKE_BATCH_PCS);
}

static pc_engine_stats engine_stats(void)
{
    pc_engine_stats stats;
    pc_engine_stats_get(cuda_pc_core(), &stats);
    return stats;
}

/* Takes every entry of window_id, checks each against the fake batch and
 * returns the samples they add up to (*entries: how many). */
static uint64_t take_window(uint64_t window_id, size_t *entries)
{
    /* fake_stall_cupti's names, as flare's report says them. */
    static const char *const flare_names[FAKE_STALLS] = {"long_scoreboard", "barrier", "selected"};
    pc_entry taken[32];
    size_t count;
    uint64_t samples = 0;
    *entries = 0;
    while ((count = pc_engine_take(cuda_pc_core(), taken, 32)) > 0) {
        for (size_t i = 0; i < count; i++) {
            if (taken[i].window_id != window_id)
                continue;
            const pc_entry *e = &taken[i];
            int known = 0;
            for (int b = 0; b < FAKE_BATCH_PCS; b++)
                for (int s = 0; s < FAKE_STALLS; s++)
                    if (strcmp(e->function, fake_batch[b].function) == 0 &&
                        e->pc_offset == fake_batch[b].offset &&
                        strcmp(e->stall_reason, flare_names[s]) == 0 &&
                        e->samples == fake_batch[b].samples[s])
                        known = 1;
            if (!known)
                fail_msg("entry not in the fake's batch: %s+0x%llx %s x%llu", e->function,
                         (unsigned long long)e->pc_offset, e->stall_reason,
                         (unsigned long long)e->samples);
            assert_int_equal(e->device, 0);
            samples += e->samples;
            (*entries)++;
        }
    }
    return samples;
}

/* The enable at the first context, and .unusable around it: NULL before
 * any context (engine auto may still pick pc), a reason while the enable
 * runs, NULL once enabled on a live context. */
static void test_enable_at_first_context(void **state)
{
    (void)state;
    const char *before = unusable_now();
    window_call early = arm_window(1, 0);
    assert_int_equal(early.status, FLARE_ERR_BACKEND);
    assert_non_null(strstr(early.reason, "not enabled on a live context"));

    atomic_store(&fake.enable_gate_closed, 1);
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, create_context, TEST_CONTEXT), 0);
    TEST_WAIT_UNTIL(atomic_load(&fake.enable_entered));
    const char *during = unusable_now();
    int enabled_during = cuda_pc_enabled();
    atomic_store(&fake.enable_gate_closed, 0);
    pthread_join(thread, NULL);

    /* A second context is not sampled: no second enable. */
    cuda_pc_context_created(OTHER_CONTEXT);
    assert_int_equal(atomic_load(&fake.enables), 1);
    assert_ptr_equal(atomic_load(&fake.enabled), TEST_CONTEXT);
    assert_int_equal(cuda_pc_enabled(), 1);
    assert_int_equal(enabled_during, 1); /* from the claim on (PM sampling stays off) */
    assert_true(atomic_load(&fake.start_stop_control));
    assert_true(atomic_load(&fake.continuous));
    assert_true(atomic_load(&fake.stall_reasons_set));
    assert_true(atomic_load(&fake.period_sets) >= 1);
    assert_int_equal(atomic_load(&fake.starts), 0); /* idle until a window */
    char reason[128] = "";
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_OK);

    if (before != NULL)
        fail_msg("unusable before any context: \"%s\" (want NULL)", before);
    if (during == NULL || strstr(during, "still running") == NULL)
        fail_msg("unusable while the enable runs: \"%s\" (want \"...still running\")",
                 during != NULL ? during : "(null)");
    const char *after = unusable_now();
    if (after != NULL)
        fail_msg("unusable once enabled on a live context: \"%s\" (want NULL)", after);
    assert_fake_clean();
}

/* Start and Stop are made on the application's thread at its launches,
 * never on the flare thread that arms; the records CUPTI hands over become
 * the window's entries, its drops the window's losses. An application
 * thread that arms itself makes them at once. */
static void test_start_stop_on_the_application_thread(void **state)
{
    (void)state;
    int starts = atomic_load(&fake.starts), stops = atomic_load(&fake.stops);
    window_call arm = arm_window(1, 0);
    assert_int_equal(arm.status, FLARE_OK);
    TEST_WAIT_UNTIL(launch_then(&fake.starts, starts + 1));
    assert_int_equal(atomic_load(&fake.starts), starts + 1);
    assert_true(pthread_equal(atomic_load(&fake.start_thread), app_thread));
    assert_int_equal(atomic_load(&fake.started), 1);

    feed_batch();
    window_call disarm = disarm_window(1);
    assert_int_equal(disarm.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.stops), stops + 1);
    assert_true(pthread_equal(atomic_load(&fake.stop_thread), app_thread));
    assert_int_equal(atomic_load(&fake.started), 0);
    assert_int_equal(atomic_load(&fake.pcs_left), 0);
    assert_int_equal(disarm.result.samples, FAKE_BATCH_SAMPLES);
    pc_engine_stats stats = engine_stats();
    assert_int_equal(stats.window_samples, FAKE_BATCH_SAMPLES);
    assert_int_equal(stats.window_lost, FAKE_BATCH_DROPPED);
    size_t entries = 0;
    assert_int_equal(take_window(arm.window_id, &entries), FAKE_BATCH_SAMPLES);
    assert_int_equal(entries, 3); /* A: long_scoreboard, selected; B: barrier */
    assert_true(atomic_load(&fake.get_data_flare_calls) > 0);

    /* The application's own thread arms (flare_window_open there): at once,
     * with the window's period set before the Start. */
    uint32_t period = atomic_load(&fake.period);
    int period_sets = atomic_load(&fake.period_sets);
    backend_engine_config config = {.sample_interval_ns = PC_PERIOD_MAX_NS, .window_id = 7};
    char reason[256] = "";
    assert_int_equal(ops()->arm(-1, &config, core_now_ns(), reason, sizeof(reason)), FLARE_OK);
    assert_int_equal(atomic_load(&fake.starts), starts + 2);
    assert_true(pthread_equal(atomic_load(&fake.start_thread), app_thread));
    assert_int_equal(atomic_load(&fake.period_sets), period_sets + 1);
    assert_true(atomic_load(&fake.period) > period);
    assert_int_equal(ops()->disarm(-1, core_now_ns(), NULL), FLARE_OK);
    assert_int_equal(atomic_load(&fake.stops), stops + 2);
    assert_int_equal(atomic_load(&fake.started), 0);
    assert_fake_clean();
}

/* A window during which the program makes no launch: its start stays
 * posted, is withdrawn at the close, and CUPTI is never started. */
static void test_window_without_a_launch_never_starts(void **state)
{
    (void)state;
    int starts = atomic_load(&fake.starts), stops = atomic_load(&fake.stops);
    window_call arm = arm_window(0, 0);
    assert_int_equal(arm.status, FLARE_OK); /* it starts at the next launch */
    assert_int_equal(cuda_app_thread_pending(), 1);
    window_call disarm = disarm_window(0);
    assert_int_equal(disarm.status, FLARE_OK);
    assert_int_equal(cuda_app_thread_pending(), 0);
    assert_true(log_says("never started"));
    for (int i = 0; i < 10; i++)
        launch();
    assert_int_equal(atomic_load(&fake.starts), starts);
    assert_int_equal(atomic_load(&fake.stops), stops);
    assert_int_equal(atomic_load(&fake.started), 0);
    assert_fake_clean();
}

/* Bug 1: window A's stop waits past its bound for a launch (posted,
 * detached); window B's start is refused meanwhile (the stop holds the
 * slot). When a launch finally runs A's stop, CUPTI must be stopped: the
 * old stop_here looked at start_state, which B's refusal had reset, and
 * skipped cuptiPCSamplingStop, leaving CUPTI started. Window C then works. */
static void test_late_stop_after_a_refused_start_stops_cupti(void **state)
{
    (void)state;
    int starts = atomic_load(&fake.starts), stops = atomic_load(&fake.stops);
    window_call a = arm_window(1, 0);
    assert_int_equal(a.status, FLARE_OK);
    TEST_WAIT_UNTIL(launch_then(&fake.starts, starts + 1));
    assert_true(pthread_equal(atomic_load(&fake.start_thread), app_thread));

    window_call close_a = disarm_window(0);
    assert_int_equal(close_a.status, FLARE_ERR_BACKEND);
    assert_true(log_says("no kernel launch within 2 s"));
    assert_int_equal(cuda_app_thread_pending(), 1);
    assert_int_equal(atomic_load(&fake.stops), stops);

    window_call b = arm_window(0, 0);
    assert_int_equal(b.status, FLARE_ERR_BACKEND);
    assert_non_null(strstr(b.reason, "earlier PC start or stop still waits"));
    assert_int_equal(cuda_app_thread_pending(), 1);
    assert_int_equal(atomic_load(&fake.starts), starts + 1);

    /* One launch: A's stop runs on it. */
    for (int i = 0; i < 1000 && cuda_app_thread_pending(); i++)
        launch();
    assert_int_equal(cuda_app_thread_pending(), 0);
    if (atomic_load(&fake.stops) != stops + 1)
        fail_msg("the late stop made no cuptiPCSamplingStop (%d stops, want %d): CUPTI is "
                 "left started",
                 atomic_load(&fake.stops), stops + 1);
    assert_true(pthread_equal(atomic_load(&fake.stop_thread), app_thread));
    assert_int_equal(atomic_load(&fake.started), 0);

    window_call c = arm_window(1, 0);
    assert_int_equal(c.status, FLARE_OK);
    TEST_WAIT_UNTIL(launch_then(&fake.starts, starts + 2));
    assert_int_equal(atomic_load(&fake.started), 1);
    feed_batch();
    window_call close_c = disarm_window(1);
    assert_int_equal(close_c.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.stops), stops + 2);
    assert_int_equal(atomic_load(&fake.started), 0);
    assert_int_equal(close_c.result.samples, FAKE_BATCH_SAMPLES);
    size_t entries = 0;
    assert_int_equal(take_window(c.window_id, &entries), FAKE_BATCH_SAMPLES);
    assert_fake_clean();
}

static void *launcher_main(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "app-launcher");
    while (atomic_load(&launcher_on)) {
        launch();
        test_pause_ms(1);
    }
    return NULL;
}

/* Bug 1's other half: a Start that takes longer than both bounds. The
 * window's start is left running, its close cannot even post the stop
 * (withdrawn: the start holds the application's thread), and CUPTI ends
 * up started with no window. The next window's start must stop CUPTI
 * first; without that, its Start met a started CUPTI and failed. */
static void test_next_start_makes_a_stop_never_posted(void **state)
{
    (void)state;
    int starts = atomic_load(&fake.starts), stops = atomic_load(&fake.stops);
    atomic_store(&fake.start_entered, 0);
    atomic_store(&fake.start_gate_closed, 1);
    atomic_store(&launcher_on, 1);
    assert_int_equal(pthread_create(&launcher, NULL, launcher_main, NULL), 0);
    window_call a = arm_window(0, 0);
    assert_int_equal(a.status, FLARE_OK); /* detached: the start runs on */
    TEST_WAIT_UNTIL(atomic_load(&fake.start_entered));
    window_call close_a = disarm_window(0);
    assert_int_equal(close_a.status, FLARE_ERR_BACKEND);
    int reason_said = log_says("held the application's thread");
    atomic_store(&fake.start_gate_closed, 0);
    TEST_WAIT_UNTIL(!cuda_app_thread_pending());
    stop_launcher();
    assert_int_equal(atomic_load(&fake.starts), starts + 1);
    assert_int_equal(atomic_load(&fake.started), 1); /* no window, CUPTI started */
    assert_int_equal(atomic_load(&fake.stops), stops);

    window_call b = arm_window(1, 0);
    TEST_WAIT_UNTIL(launch_then(&fake.starts, starts + 2));
    if (atomic_load(&fake.stops) != stops + 1)
        fail_msg("the next start made no Stop first (%d stops, want %d; %d Starts while "
                 "started; arm: %d %s)",
                 atomic_load(&fake.stops), stops + 1, atomic_load(&fake.double_starts), b.status,
                 b.reason);
    assert_int_equal(b.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.started), 1);
    window_call close_b = disarm_window(1);
    assert_int_equal(close_b.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.stops), stops + 2);
    assert_int_equal(atomic_load(&fake.started), 0);
    assert_true(reason_said); /* the close said why its stop was not made */
    assert_fake_clean();
}

/* Bug 2, for TSan: after a late stop, a window's start is posted detached
 * (no launch within 1 s) while the drain thread reads every 5 ms; then a
 * launch runs the start, whose discard_stale writes stale_lost and
 * stop_deferred. hw_read used to touch both before looking at start_state
 * (a data race TSan reports); now it leaves everything alone while the
 * start is posted. The stale records count as the window's losses. */
static void test_posted_start_beside_the_drain_thread(void **state)
{
    (void)state;
    int starts = atomic_load(&fake.starts), stops = atomic_load(&fake.stops);
    window_call p = arm_window(1, 0);
    assert_int_equal(p.status, FLARE_OK);
    TEST_WAIT_UNTIL(launch_then(&fake.starts, starts + 1));
    window_call close_p = disarm_window(0);
    assert_int_equal(close_p.status, FLARE_ERR_BACKEND);
    assert_int_equal(cuda_app_thread_pending(), 1);
    TEST_WAIT_UNTIL(launch_then(&fake.stops, stops + 1));
    assert_int_equal(atomic_load(&fake.started), 0);

    /* Samples CUPTI kept after the stop: what discard_stale drops. */
    feed_batch();
    uint64_t reads = engine_stats().reads;
    window_call q = arm_window(0, 0);
    assert_int_equal(q.status, FLARE_OK); /* posted: starts at the next launch */
    assert_int_equal(cuda_app_thread_pending(), 1);
    TEST_WAIT_UNTIL(engine_stats().reads >= reads + 3); /* the drain thread reads meanwhile */
    assert_int_equal(atomic_load(&fake.starts), starts + 1);

    int flare_reads = atomic_load(&fake.get_data_flare_calls);
    TEST_WAIT_UNTIL(launch_then(&fake.starts, starts + 2));
    assert_true(pthread_equal(atomic_load(&fake.start_thread), app_thread));
    assert_int_equal(atomic_load(&fake.pcs_left), 0); /* discard_stale read them */
    /* The drain thread reads again after the start (the race's other side). */
    TEST_WAIT_UNTIL(atomic_load(&fake.get_data_flare_calls) > flare_reads);

    window_call close_q = disarm_window(1);
    assert_int_equal(close_q.status, FLARE_OK);
    assert_int_equal(atomic_load(&fake.stops), stops + 2);
    assert_int_equal(atomic_load(&fake.started), 0);
    assert_int_equal(close_q.result.samples, 0);
    pc_engine_stats after = engine_stats();
    assert_int_equal(after.window_lost, FAKE_BATCH_SAMPLES + FAKE_BATCH_DROPPED);
    assert_true(log_says("taken after a window closed"));
    assert_fake_clean();
}

/* Last (the context stays destroyed): .unusable says so, and windows are
 * refused with the reason. Another context's end changes nothing. */
static void test_unusable_after_the_context_is_destroyed(void **state)
{
    (void)state;
    cuda_pc_context_destroying(OTHER_CONTEXT);
    const char *other = unusable_now();
    char reason[256] = "";
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_OK);

    cuda_pc_context_destroying(TEST_CONTEXT);
    const char *destroyed = unusable_now();
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_ERR_BACKEND);
    int starts = atomic_load(&fake.starts);
    window_call arm = arm_window(1, 0);
    assert_int_equal(arm.status, FLARE_ERR_BACKEND);
    assert_non_null(strstr(arm.reason, "not enabled on a live context"));
    assert_int_equal(atomic_load(&fake.starts), starts);
    assert_int_equal(atomic_load(&fake.disables), 0); /* never disabled (no release) */

    if (other != NULL)
        fail_msg("unusable after another context's end: \"%s\" (want NULL)", other);
    if (destroyed == NULL || strstr(destroyed, "destroyed") == NULL)
        fail_msg("unusable after the sampled context's end: \"%s\" (want \"...destroyed\")",
                 destroyed != NULL ? destroyed : "(null)");
    assert_fake_clean();
}

#else /* FLARE_TEST_PC_FAIL_ENABLE */

/* The fake's Enable fails: the engine is installed but never usable, and
 * .unusable names the failed enable, so engine auto passes over pc. */
static void test_failed_enable_is_unusable(void **state)
{
    (void)state;
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, create_context, TEST_CONTEXT), 0);
    pthread_join(thread, NULL);
    assert_int_equal(atomic_load(&fake.enables), 1);
    assert_int_equal(atomic_load(&fake.disables), 0); /* nothing was enabled */
    assert_null(atomic_load(&fake.enabled));
    assert_int_equal(cuda_pc_enabled(), 0); /* PM sampling may be set up */
    assert_true(log_says("cuptiPCSamplingEnable: fake: not supported here"));
    /* Later contexts do not try again. */
    cuda_pc_context_created(OTHER_CONTEXT);
    assert_int_equal(atomic_load(&fake.enables), 1);

    window_call arm = arm_window(1, 0);
    assert_int_equal(arm.status, FLARE_ERR_BACKEND);
    assert_non_null(strstr(arm.reason, "not enabled on a live context"));
    assert_int_equal(atomic_load(&fake.starts), 0);
    char reason[256] = "";
    assert_int_equal(ops()->probe(-1, reason, sizeof(reason)), FLARE_ERR_BACKEND);

    const char *why = unusable_now();
    if (why == NULL || strstr(why, "enable failed") == NULL)
        fail_msg("unusable after a failed enable: \"%s\" (want \"...enable failed...\")",
                 why != NULL ? why : "(null)");
    assert_fake_clean();
}

#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
#ifndef FLARE_TEST_PC_FAIL_ENABLE
        cmocka_unit_test_setup(test_enable_at_first_context, fresh),
        cmocka_unit_test_setup(test_start_stop_on_the_application_thread, fresh),
        cmocka_unit_test_setup(test_window_without_a_launch_never_starts, fresh),
        cmocka_unit_test_setup(test_late_stop_after_a_refused_start_stops_cupti, fresh),
        cmocka_unit_test_setup(test_posted_start_beside_the_drain_thread, fresh),
        cmocka_unit_test_setup(test_next_start_makes_a_stop_never_posted, fresh),
        cmocka_unit_test_setup(test_unusable_after_the_context_is_destroyed, fresh),
#else
        cmocka_unit_test_setup(test_failed_enable_is_unusable, fresh),
#endif
    };
    return cmocka_run_group_tests(tests, install, NULL);
}
