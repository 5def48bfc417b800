/*
 * cuda_callback_ids.h: the CUPTI driver callback ids that more than one
 * file of the CUDA backend acts on, each list written once as an X-macro so
 * that tracing (cuda_trace.c), kernel replay (cuda_replay*.c) and range
 * replay (cuda_range_replay.c) cannot drift apart.
 *
 * Each list calls X(name) with the driver function's name, in a fixed
 * order. CUDA_CALLBACK_ID turns a name into its CUPTI_DRIVER_TRACE_CBID_
 * constant and a comma, for arrays:
 *
 *     static const CUpti_CallbackId ids[] = {CUDA_LAUNCH_IDS(CUDA_CALLBACK_ID)};
 *
 * The lists differ on purpose, and are named for why: tracing counts every
 * launch; replay brackets every launch but re-issues only some of them,
 * and it also watches every copy and memset (range replay records some of
 * those and declines the rest). A switch that handles a list's ids one by
 * one checks the list's count with _Static_assert, so a new id in a list
 * fails the build there until it is handled.
 *
 * Must never hold anything but lists of ids: no state, no functions.
 */
#ifndef FLARE_BACKEND_CUDA_CALLBACK_IDS_H
#define FLARE_BACKEND_CUDA_CALLBACK_IDS_H

#include <cupti_callbacks.h>

#define CUDA_CALLBACK_ID(name)     CUPTI_DRIVER_TRACE_CBID_##name,
#define CUDA_CALLBACK_ID_ONE(name) +1

/* Launch entry points whose parameters flare can issue again itself:
 * cuda_replay_launch.c's relaunch() calls each one again for every pass,
 * and cuda_range_replay.c copies each one for a span. Both handle them case by
 * case (the parameter layouts differ), hence the count they check. */
#define CUDA_LAUNCH_IDS_RELAUNCHABLE(X)                                                            \
    X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz)
#define CUDA_LAUNCH_IDS_RELAUNCHABLE_COUNT (0 CUDA_LAUNCH_IDS_RELAUNCHABLE(CUDA_CALLBACK_ID_ONE))

/* Launch entry points that are counted and bracketed, but whose replay the
 * engine declines: cooperative launches (the request's unsupported_kind)
 * and graph launches (its from_graph), so nothing issues them again. */
#define CUDA_LAUNCH_IDS_DECLINED(X)                                                                \
    X(cuLaunchCooperativeKernel)                                                                   \
    X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz)

/* Every kernel-launch entry point: tracing hooks and counts them (host
 * launches), replay brackets each one (cuda_replay_is_launch). */
#define CUDA_LAUNCH_IDS(X)    CUDA_LAUNCH_IDS_RELAUNCHABLE(X) CUDA_LAUNCH_IDS_DECLINED(X)
#define CUDA_LAUNCH_IDS_COUNT (0 CUDA_LAUNCH_IDS(CUDA_CALLBACK_ID_ONE))

/* Every driver entry point that copies or sets memory (synchronous ones
 * too: they write memory a replay would otherwise revert). Replay gates
 * them and the launch-storm guard counts them (cuda_replay_is_copy);
 * cuda_range_replay.c records the 1D copies and memsets it can issue again, case by
 * case, and declines the rest. */
/* clang-format off */
#define CUDA_COPY_IDS(X) \
    X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoD_v2) X(cuMemcpyDtoA_v2) \
    X(cuMemcpyAtoD_v2) X(cuMemcpyHtoA_v2) X(cuMemcpyAtoH_v2) X(cuMemcpyAtoA_v2) X(cuMemcpy2D_v2) \
    X(cuMemcpy2DUnaligned_v2) X(cuMemcpy3D_v2) X(cuMemcpy) X(cuMemcpyPeer) X(cuMemcpy3DPeer) \
    X(cuMemcpyHtoDAsync_v2) X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyHtoAAsync_v2) \
    X(cuMemcpyAtoHAsync_v2) X(cuMemcpy2DAsync_v2) X(cuMemcpy3DAsync_v2) X(cuMemcpyAsync) \
    X(cuMemcpyPeerAsync) X(cuMemcpy3DPeerAsync) X(cuMemsetD8_v2) X(cuMemsetD16_v2) \
    X(cuMemsetD32_v2) X(cuMemsetD2D8_v2) X(cuMemsetD2D16_v2) X(cuMemsetD2D32_v2) X(cuMemsetD8Async) \
    X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8Async) X(cuMemsetD2D16Async) \
    X(cuMemsetD2D32Async) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyDtoH_v2_ptds) X(cuMemcpyDtoD_v2_ptds) \
    X(cuMemcpyDtoA_v2_ptds) X(cuMemcpyAtoD_v2_ptds) X(cuMemcpyHtoA_v2_ptds) X(cuMemcpyAtoH_v2_ptds) \
    X(cuMemcpyAtoA_v2_ptds) X(cuMemcpy2D_v2_ptds) X(cuMemcpy2DUnaligned_v2_ptds) \
    X(cuMemcpy3D_v2_ptds) X(cuMemcpy_ptds) X(cuMemcpyPeer_ptds) X(cuMemcpy3DPeer_ptds) \
    X(cuMemsetD8_v2_ptds) X(cuMemsetD16_v2_ptds) X(cuMemsetD32_v2_ptds) X(cuMemsetD2D8_v2_ptds) \
    X(cuMemsetD2D16_v2_ptds) X(cuMemsetD2D32_v2_ptds) X(cuMemcpyAsync_ptsz) \
    X(cuMemcpyHtoAAsync_v2_ptsz) X(cuMemcpyAtoHAsync_v2_ptsz) X(cuMemcpyHtoDAsync_v2_ptsz) \
    X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoDAsync_v2_ptsz) X(cuMemcpy2DAsync_v2_ptsz) \
    X(cuMemcpy3DAsync_v2_ptsz) X(cuMemcpyPeerAsync_ptsz) X(cuMemcpy3DPeerAsync_ptsz) \
    X(cuMemsetD8Async_ptsz) X(cuMemsetD16Async_ptsz) X(cuMemsetD32Async_ptsz) \
    X(cuMemsetD2D8Async_ptsz) X(cuMemsetD2D16Async_ptsz) X(cuMemsetD2D32Async_ptsz) \
    X(cuMemcpyBatchAsync) X(cuMemcpyBatchAsync_ptsz) X(cuMemcpy3DBatchAsync) \
    X(cuMemcpy3DBatchAsync_ptsz) X(cuMemcpyBatchAsync_v2) X(cuMemcpyBatchAsync_v2_ptsz) \
    X(cuMemcpy3DBatchAsync_v2) X(cuMemcpy3DBatchAsync_v2_ptsz)
/* clang-format on */

#endif /* FLARE_BACKEND_CUDA_CALLBACK_IDS_H */
