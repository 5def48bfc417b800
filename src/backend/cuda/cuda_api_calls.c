/*
 * cuda_api_calls.c: launch, copy and memset calls as ring events
 * (cuda_api_calls.h).
 *
 * Entry keeps the call's correlation id and start in two thread-locals;
 * exit emits the event only when the correlation id matches, so an exit
 * whose entry was not recorded (recording switched on in between, a storm
 * that began in between) is skipped, never paired with the wrong start.
 * Driver calls do not nest on a thread for the entry points watched here;
 * flare's own calls made inside a callback (replay) never reach these
 * functions (cuda_trace.c filters them).
 */
#include "backend/cuda/cuda_api_calls.h"

#include <stdatomic.h>

#include "backend/cuda/cuda_storm.h"
#include "core/clock.h"
#include "core/event.h"
#include "core/runtime.h"

static _Atomic bool recording;

static _Thread_local uint32_t pending_correlation; /* 0: none (CUPTI's ids start at 1) */
static _Thread_local uint64_t pending_start_ns;

void cuda_api_calls_enable(bool on)
{
    atomic_store(&recording, on);
}

bool cuda_api_calls_enabled(void)
{
    return atomic_load_explicit(&recording, memory_order_relaxed);
}

void cuda_api_call_enter(const CUpti_CallbackData *call)
{
    if (!atomic_load_explicit(&recording, memory_order_relaxed) || cuda_storm_untimed_now()) {
        pending_correlation = 0;
        return;
    }
    pending_correlation = call->correlationId;
    pending_start_ns = core_now_ns();
}

void cuda_api_call_exit(const CUpti_CallbackData *call)
{
    if (pending_correlation == 0 || pending_correlation != call->correlationId)
        return;
    pending_correlation = 0;
    uint64_t end_ns = core_now_ns();
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_API_CALL;
    event->start_ns = pending_start_ns;
    event->end_ns = end_ns;
    event->id = call->correlationId;
    event->stream_id = 0;
    event->device = -1;
    event->depth = 0;
    core_copy_name(event->name, call->functionName);
    core_emit_commit(thread);
}
