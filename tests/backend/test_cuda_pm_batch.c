/*
 * test_cuda_pm_batch.c: range replay's batch read of PM samples on CUDA
 * (src/backend/cuda/cuda_pm_hardware.c, pm_hardware_ops.read_batch) over a
 * fake CUPTI: times are read on the caller's thread, values are evaluated
 * on as many threads as the instance has host objects, each host object on
 * one thread only, every sample exactly once with its own index; a sample
 * whose times cannot be read is skipped, and a value CUPTI cannot evaluate
 * is NaN. Runs under TSan in CI's tsan stage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/cuda/cuda_pm_hardware.h"
#include "flare/flare.h"

#define SAMPLES 3000
#define FIRST   7 /* the batch starts past the image's first samples */
#define HOSTS   4 /* the instance's own and three evaluators */

static pthread_t caller;
static _Atomic int info_off_caller; /* sample times asked on another thread */
static _Atomic int evaluations[FIRST + SAMPLES];
static pthread_t host_thread[HOSTS]; /* the thread each host object was used on */
static _Atomic int host_used[HOSTS];
static _Atomic int host_shared; /* a host object used on two threads */
static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;

/* Host objects are the addresses of these. */
static char hosts[HOSTS];

static CUptiResult fake_info(CUpti_PmSampling_CounterData_GetSampleInfo_Params *params)
{
    if (!pthread_equal(pthread_self(), caller))
        atomic_store(&info_off_caller, 1);
    if (params->sampleIndex % 500 == 3)
        return CUPTI_ERROR_INVALID_PARAMETER; /* its times cannot be read */
    params->startTimestamp = params->sampleIndex * 10;
    params->endTimestamp = params->sampleIndex * 10 + 10;
    return CUPTI_SUCCESS;
}

static CUptiResult fake_evaluate(CUpti_Profiler_Host_EvaluateToGpuValues_Params *params)
{
    size_t host = (size_t)((char *)params->pHostObject - hosts);
    pthread_mutex_lock(&hosts_lock);
    if (atomic_load(&host_used[host]) && !pthread_equal(host_thread[host], pthread_self()))
        atomic_store(&host_shared, 1);
    host_thread[host] = pthread_self();
    atomic_store(&host_used[host], 1);
    pthread_mutex_unlock(&hosts_lock);
    atomic_fetch_add(&evaluations[params->rangeIndex], 1);
    if (params->rangeIndex % 700 == 5)
        return CUPTI_ERROR_UNKNOWN; /* no value */
    for (size_t m = 0; m < params->numMetrics; m++)
        params->pMetricValues[m] = (double)params->rangeIndex * 100.0 + (double)m;
    return CUPTI_SUCCESS;
}

/* An instance over the fake CUPTI with HOSTS host objects. */
static void fake_hardware(cuda_pm_hardware *hw, size_t metric_count)
{
    memset(hw, 0, sizeof *hw);
    hw->api.cuptiPmSamplingCounterDataGetSampleInfo = fake_info;
    hw->api.cuptiProfilerHostEvaluateToGpuValues = fake_evaluate;
    hw->host = (CUpti_Profiler_Host_Object *)&hosts[0];
    for (size_t index = 1; index < HOSTS; index++)
        hw->evaluators[index - 1] = (CUpti_Profiler_Host_Object *)&hosts[index];
    hw->evaluator_count = HOSTS - 1;
    hw->metric_count = metric_count;
}

static void test_batch_on_several_threads(void **state)
{
    (void)state;
    static cuda_pm_hardware hw;
    static pm_raw_sample out[SAMPLES];
    fake_hardware(&hw, 2);
    caller = pthread_self();

    cuda_pm_hardware_ops.read_batch(&hw, FIRST, SAMPLES, out);

    assert_int_equal(atomic_load(&info_off_caller), 0);
    assert_int_equal(atomic_load(&host_shared), 0);
    for (size_t host = 0; host < HOSTS; host++)
        assert_int_equal(atomic_load(&host_used[host]), 1);
    for (size_t index = 0; index < SAMPLES; index++) {
        size_t sample = FIRST + index;
        if (sample % 500 == 3) {
            assert_int_equal(out[index].ok, 0);
            assert_int_equal(atomic_load(&evaluations[sample]), 0);
            continue;
        }
        assert_int_equal(out[index].ok, 1);
        assert_int_equal(atomic_load(&evaluations[sample]), 1);
        assert_int_equal(out[index].start, sample * 10);
        assert_int_equal(out[index].end, sample * 10 + 10);
        if (sample % 700 == 5) {
            assert_true(isnan(out[index].values[0]) && isnan(out[index].values[1]));
            continue;
        }
        assert_true(out[index].values[0] == (double)sample * 100.0);
        assert_true(out[index].values[1] == (double)sample * 100.0 + 1.0);
    }
    assert_int_equal(hw.costs.reads, SAMPLES);
    assert_int_equal(hw.costs.threads, HOSTS);
}

/* A handful of samples is not worth a thread: the caller's host only. */
static void test_small_batch_stays_on_the_caller(void **state)
{
    (void)state;
    static cuda_pm_hardware hw;
    pm_raw_sample out[40];
    memset(host_used, 0, sizeof host_used);
    memset(evaluations, 0, sizeof evaluations);
    fake_hardware(&hw, 1);
    cuda_pm_hardware_ops.read_batch(&hw, 0, 40, out);
    assert_int_equal(atomic_load(&host_used[0]), 1);
    for (size_t host = 1; host < HOSTS; host++)
        assert_int_equal(atomic_load(&host_used[host]), 0);
    assert_int_equal(hw.costs.threads, 1);
    assert_true(out[39].values[0] == 3900.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_on_several_threads),
        cmocka_unit_test(test_small_batch_stays_on_the_caller),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
