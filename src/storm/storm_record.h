/*
 * storm_record.h: a launch storm's period into the session (table
 * storms), from whichever guard watched it: the CUDA tracer's
 * (src/backend/cuda/cuda_storm.c) or the simulated device's
 * (storm_completions.c).
 *
 * The period travels as one event through the calling thread's ring, like
 * every other record, so the store is written only by the collector. Must
 * never block or allocate: a full ring drops the record, counted as every
 * ring drop is.
 */
#ifndef FLARE_STORM_STORM_RECORD_H
#define FLARE_STORM_STORM_RECORD_H

#include <stdbool.h>

#include "storm/storm_guard.h"

/* Records period on device (-1: the whole process); still_open when the
 * session ends during it. Returns whether the record is on its way: false
 * when recording has stopped (the session is ending: the caller's last
 * batch may write it instead) or the ring was full (counted as a drop). */
bool storm_record_period(int device, const storm_guard_period *period, bool still_open);

/* After a step: records the storm the step ended, if it ended one. */
void storm_record_finished(storm_guard *guard, int device);

/* At the session's end: records the storm still running, if one is. */
void storm_record_running(const storm_guard *guard, int device);

#endif /* FLARE_STORM_STORM_RECORD_H */
