/*
 * cuda_host.c: the session's upcalls for the CUDA backend (cuda_host.h).
 *
 * The CUDA backend reaches the features it serves (the windows' launch
 * count, the deep window a storm must not starve) only through these, never
 * through a feature's header. Must never hold state beyond the one pointer.
 */
#include "backend/cuda/cuda_host.h"

#include <stddef.h>

static void count_nothing(void)
{
}

static uint64_t no_launches(void)
{
    return 0;
}

static int no_window(void)
{
    return 0;
}

static const backend_host inert = {
    .count_launch = count_nothing, .launch_count = no_launches, .deep_window_active = no_window};

const backend_host *cuda_session_host = &inert;

void cuda_host_set(const backend_host *host)
{
    if (host != NULL && host->count_launch != NULL && host->launch_count != NULL &&
        host->deep_window_active != NULL)
        cuda_session_host = host;
}
