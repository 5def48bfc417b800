/*
 * cuda_ready_alternate.c: a benchmark's switch for what a range-ready trace
 * costs on the launch path (issue 23, bench/gpu_cupti_alternate.py
 * --flare-ready). In the default mode the one thing a trace whose rules may
 * range-replay does at a launch that a plain trace does not is resolving
 * the launched function's module variables early (cuda_replay_launch.c,
 * cuda_replay_globals_early). With FLARE_REPLAY_READY_ALTERNATE_MS and
 * _LOG set in such a process, a thread (flare-ready-alt, cuda_alternate.h)
 * turns that off and on in blocks and logs each switch ("none", "ready"):
 * separate processes on the H200 host differ by 15-30% run to run, blocks
 * of one process a few hundred ms apart do not.
 *
 * Must never: run unless its variables ask for it, or block a launch (a
 * switch is one relaxed store).
 */
#include "backend/cuda/cuda_replay_internal.h"

#include <stdatomic.h>

#include "backend/cuda/cuda_alternate.h"

static int switch_to(int on)
{
    atomic_store_explicit(&cuda_replay_globals_early, on, memory_order_relaxed);
    return 0;
}

static const cuda_alternation ready_alternation = {
    .variable = "FLARE_REPLAY_READY_ALTERNATE",
    .thread_name = "flare-ready-alt",
    .on_word = "ready",
    .switch_to = switch_to,
};

void cuda_ready_alternate_start(void)
{
    if (cuda_alternation_asked(&ready_alternation))
        cuda_alternation_start(&ready_alternation);
}
