/*
 * cuda_engine_costs.h: what the CUDA deep engines cost a program while a
 * window of theirs is open, the numbers engine auto (src/deepwin,
 * docs/windows.md) weighs against the deep budget.
 *
 * Measured by bench/gpu_engine_cost.py on the H200 (docs/PERFORMANCE.md,
 * section "Session 16"): each engine's window open over the timed part of
 * tests/gpu/pm_window.cu, paired round by round against tracing only. The
 * per-launch figure is 1/(launches per second, window open) - 1/(launches per
 * second, tracing only) over its storm of 100,000 tiny launches; the GPU
 * figure is 1 - the paired ratio of memory-bound kernels per second (open
 * against tracing only). Medians of the paired figures over 16 rounds (two
 * runs, 5 and 11 rounds, 2026-12-02); the GPU figure the worse run's. The
 * storm's rounds spread widely (pc open: -350 to +2,070 ns a launch), so the
 * launch figures hold to about +-200 ns.
 *
 * Only constants: it must never hold code or state, and a number changes
 * here only with a new measurement recorded in docs/PERFORMANCE.md.
 */
#ifndef FLARE_BACKEND_CUDA_CUDA_ENGINE_COSTS_H
#define FLARE_BACKEND_CUDA_CUDA_ENGINE_COSTS_H

/* Where the numbers below come from (backend_engine_ops.cost_source). */
#define CUDA_ENGINE_COST_SOURCE "H200 (bench/gpu_engine_cost.py), docs/PERFORMANCE.md, Session 16"

/* cuda-pm (PM sampling), window open. */
#define CUDA_PM_COST_LAUNCH_NS 680u
#define CUDA_PM_COST_GPU       0.0003

/* cuda-pc-sampling (PC sampling), window open. */
#define CUDA_PC_COST_LAUNCH_NS 920u
#define CUDA_PC_COST_GPU       0.0006

/* cuda-sass-metrics (SASS metrics), window open: patched kernels ran 6.3x
 * (a dependent chain of global loads) to 465x (an FMA loop) their own time
 * in tests/gpu/sass_metrics_probe.cu's cost mode (docs/PERFORMANCE.md,
 * "Session 17"). The GPU figure is the lowest of them, 6.3x = +530%: auto's
 * estimate is a floor, already past any budget it accepts (at most 100%),
 * so auto never picks SASS metrics; a window asks for them by name. The
 * per-launch cost was not measured apart from the kernels' (0). */
#define CUDA_SASS_COST_SOURCE                                                                      \
    "H200 (tests/gpu/sass_metrics_probe.cu), docs/PERFORMANCE.md, Session 17"
#define CUDA_SASS_COST_LAUNCH_NS 0u
#define CUDA_SASS_COST_GPU       5.3

#endif /* FLARE_BACKEND_CUDA_CUDA_ENGINE_COSTS_H */
