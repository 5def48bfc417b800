/*
 * cuda_range_replay.h: the CUDA side of range replay: deep copies of the launches,
 * copies and memsets a span records, and their re-issue on later passes.
 *
 * cuda_replay*.c call in here from their driver callbacks while the thread
 * records a span (replay_range_recording()). Anything it cannot copy
 * faithfully (old-style packed kernel arguments, 2D/3D/array/peer copies, a
 * device-to-host copy the host may act on) declines the span instead of
 * guessing. It must never call the driver except through the functions
 * handed to it, inside flare's internal bracket.
 */
#ifndef FLARE_BACKEND_CUDA_RANGE_REPLAY_H
#define FLARE_BACKEND_CUDA_RANGE_REPLAY_H

#include <cupti_callbacks.h>

#include "backend/cuda/cuda_loader.h"
#include "replay/replay.h"

/* The driver table, the internal bracket of cuda_replay.c, and the private
 * stream per device that later passes re-issue the span on: everything in
 * submission order on one stream, which respects every dependency the
 * program could have expressed between its streams (an event can only be
 * waited on after it was recorded). */
void cuda_range_replay_attach(const cuda_driver_api *driver, void (*internal_begin)(void),
                              void (*internal_end)(void), CUstream (*replay_stream)(int device));

/* A kernel launch entry point's deep copy (0, or a negative status: the
 * engine then declines the span). */
int cuda_range_replay_capture_launch(CUpti_CallbackId id, const void *params, int device,
                                     replay_range_work *work);

/* A copy or memset entry point on the recording thread, at API_ENTER:
 * records it, or declines the span with the reason. */
void cuda_range_replay_record_copy(CUpti_CallbackId id, const CUpti_CallbackData *call, int device);

#endif /* FLARE_BACKEND_CUDA_RANGE_REPLAY_H */
