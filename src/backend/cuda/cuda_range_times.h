/*
 * cuda_range_times.h: the start and end of the kernels a span re-issues on
 * CUDA, for range replay by PM sampling (replay_device_ops.kernel_times_*,
 * pm/pm_replay.h), read off CUPTI's kernel records of flare's own launches.
 *
 * While a pass is timed, each launch flare re-issues (inside its internal
 * bracket) gives its correlation id here in re-issue order; each kernel
 * record that CUPTI delivers is offered here before it is dropped as
 * flare's own work, and a record whose id is among them fills that
 * kernel's times (flare's clock: cuda_trace registers it as CUPTI's
 * timestamp). The end flushes CUPTI's buffers and waits, bounded.
 *
 * One span at a time (pm_replay claims it); fixed tables of
 * REPLAY_RANGE_KERNELS_MAX. Must never: allocate, block a launch or a
 * record's delivery, or take a lock (the offer runs on CUPTI's thread).
 */
#ifndef FLARE_BACKEND_CUDA_CUDA_RANGE_TIMES_H
#define FLARE_BACKEND_CUDA_CUDA_RANGE_TIMES_H

#include <stddef.h>
#include <stdint.h>

/* flush: hands over CUPTI's completed buffers now (cuda_trace_deliver);
 * kernels_recorded: whether kernel records are on in this process. */
void cuda_range_times_attach(void (*flush)(void), int (*kernels_recorded)(void));

int cuda_range_times_begin(int device, size_t kernel_count, char *reason, size_t reason_size);
/* A launch flare re-issued (the callback's entry, internal bracket). One
 * relaxed load while no pass is timed. */
void cuda_range_times_note_launch(uint32_t correlation_id);
/* A kernel record (any): fills its kernel's times when it is one noted. */
void cuda_range_times_offer(uint32_t correlation_id, uint64_t start_ns, uint64_t end_ns);
int cuda_range_times_end(int device, uint64_t *start_ns, uint64_t *end_ns, size_t kernel_count,
                         size_t *found, uint64_t timeout_ns);

#endif /* FLARE_BACKEND_CUDA_CUDA_RANGE_TIMES_H */
