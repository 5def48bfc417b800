/*
 * cuda_trace_metric.c: one sampled device metric (NVML's power, clocks,
 * memory; cuda_trace.h) into the calling thread's ring as a metric event.
 *
 * Must never: block (a full ring drops the sample, counted by core), or
 * write past the event's name.
 */
#include "backend/cuda/cuda_trace.h"

#include "core/event.h"
#include "core/runtime.h"

void cuda_trace_emit_metric(int device, const char *name, uint64_t time_ns, int64_t value)
{
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return;
    event->kind = CORE_EVENT_METRIC;
    event->start_ns = event->end_ns = time_ns;
    event->id = 0;
    event->stream_id = 0;
    event->device = device;
    event->depth = 0;
    event->detail.metric.value = value;
    core_copy_name(event->name, name);
    core_emit_commit(thread);
}
