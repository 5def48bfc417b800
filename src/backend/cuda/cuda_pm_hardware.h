/*
 * cuda_pm_hardware.h: CUPTI's PM sampling as pm_hardware_ops (pm/pm_engine.h),
 * over one cuda_pm_hardware instance each: cuda_pm.c keeps two, the deep
 * windows' and range replay's, sharing one table of CUPTI functions.
 *
 * Internal to the CUDA backend. Must never: hold state outside an
 * instance, or call CUPTI before the instance's table is resolved.
 */
#ifndef FLARE_BACKEND_CUDA_CUDA_PM_HARDWARE_H
#define FLARE_BACKEND_CUDA_CUDA_PM_HARDWARE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cuda/cuda_pm_functions.h"
#include "pm/pm_engine.h"

/* The raw buffer the GPU writes samples into (measured on the H200: 512 MiB
 * enabled and configured in 460-630 ms, no overflow at 10 us with a 20 ms
 * decode loop). */
#define HARDWARE_BUFFER_BYTES ((size_t)512 << 20)

/* Where an instance's time went since it was last prepared (range replay
 * logs it per pass; the windows' engine ignores it). */
typedef struct cuda_pm_costs {
    uint64_t decode_ns;   /* cuptiPmSamplingDecodeData */
    uint64_t info_ns;     /* cuptiPmSamplingCounterDataGetSampleInfo */
    uint64_t evaluate_ns; /* cuptiProfilerHostEvaluateToGpuValues */
    uint64_t reads;       /* samples read */
    uint64_t threads;     /* the most threads a batch was evaluated on */
    uint64_t disable_ns;  /* cuptiPmSamplingDisable */
} cuda_pm_costs;

/* The most threads a batch of samples is evaluated on (range replay). */
#define CUDA_PM_EVALUATE_THREADS_MAX 16

typedef struct cuda_pm_hardware {
    pm_functions api;
    int device;
    uint64_t interval_ns;
    CUpti_Profiler_Host_Object *host;
    CUpti_PmSampling_Object *sampler;
    uint8_t *availability;
    uint8_t *config;
    size_t config_size;
    uint8_t *image; /* the counter-data image: sized once, reused by every decode */
    size_t image_size;
    size_t metric_count;
    const char *metric_names[PM_METRICS_MAX];
    pm_resolved_metrics resolved;
    int availability_device; /* the device availability was read for (+1; 0: none) */
    uint64_t host_setup_ns;  /* availability + config image */
    uint64_t enable_ns;      /* enable + set config + image */
    char chip[32];
    size_t buffer_bytes; /* the hardware buffer SetConfig allocates; 0: HARDWARE_BUFFER_BYTES */
    int free_image_at_release; /* range replay's image is large: not kept past a pass */
    /* Threads a batch of samples is evaluated on (read_batch; 1: the
     * caller's only), each past the first with a host object of its own,
     * made at prepare: evaluating is CPU work on the image (9-12 us a
     * sample on the H200's host), and range replay waits for it. */
    int evaluate_threads;
    CUpti_Profiler_Host_Object *evaluators[CUDA_PM_EVALUATE_THREADS_MAX - 1];
    size_t evaluator_count;
    cuda_pm_costs costs;
} cuda_pm_hardware;

extern const pm_hardware_ops cuda_pm_hardware_ops;

/* CUPTI's words for result ("unknown CUPTI error" when it has none). */
const char *cuda_pm_result_text(const pm_functions *api, CUptiResult result);

#endif /* FLARE_BACKEND_CUDA_CUDA_PM_HARDWARE_H */
