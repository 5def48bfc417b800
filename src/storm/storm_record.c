/*
 * storm_record.c: launch storm periods as ring events (storm_record.h).
 * Runs on the thread that steps a guard; never blocks, never allocates.
 */
#include "storm/storm_record.h"

#include "core/event.h"
#include "core/runtime.h"

bool storm_record_period(int device, const storm_guard_period *period, bool still_open)
{
    core_thread *thread;
    core_event *event = core_emit_reserve(&thread);
    if (event == NULL)
        return false;
    event->kind = CORE_EVENT_STORM;
    event->flags = still_open ? CORE_EVENT_FLAG_STILL_OPEN : 0;
    event->start_ns = period->start_ns;
    event->end_ns = period->end_ns;
    event->id = 0;
    event->stream_id = 0;
    event->device = device;
    event->depth = 0;
    event->detail.storm.untimed_launches = period->untimed_launches;
    event->name[0] = '\0';
    core_emit_commit(thread);
    return true;
}

void storm_record_finished(storm_guard *guard, int device)
{
    storm_guard_period period;
    if (guard != NULL && storm_guard_take_finished(guard, &period))
        storm_record_period(device, &period, false);
}

void storm_record_running(const storm_guard *guard, int device)
{
    storm_guard_period period;
    if (guard != NULL && storm_guard_running(guard, &period))
        storm_record_period(device, &period, true);
}
