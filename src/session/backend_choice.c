/*
 * backend_choice.c: picks the session's backend descriptor, once, when the
 * session starts (session.h).
 *
 * FLARE_BACKEND=sim|cuda asks for one; unset, empty or "auto" picks CUDA
 * when the CUDA driver is already in the process (always so when the
 * driver loaded libflare as its injection library) and the simulated
 * device otherwise. A process whose session started on the simulated
 * device and is injected later adopts CUDA then (session.c). Also checks
 * the start-time variables for the launcher. The only file
 * besides inject.c that names a backend; it must never load a driver.
 */
#include "session/session.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_descriptor.h"
#include "backend/sim/sim.h"
#include "core/config.h"
#include "flare/flare.h"
#include "recorder/recorder.h"

/* Whether the CUDA driver library is mapped already (RTLD_NOLOAD: never
 * loads it, so a program without CUDA stays without). */
static int cuda_driver_mapped(void)
{
    void *handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (handle == NULL)
        return 0;
    dlclose(handle);
    return 1;
}

int session_backend_choose(const char *asked, const backend_descriptor **out, int *automatic,
                           char *error, size_t error_size)
{
    const backend_descriptor *cuda = cuda_descriptor();
    *automatic = 0;
    if (asked == NULL || asked[0] == '\0' || strcmp(asked, "auto") == 0) {
        *automatic = 1;
        *out = cuda != NULL && cuda_driver_mapped() ? cuda : sim_descriptor();
        return FLARE_OK;
    }
    if (strcmp(asked, "sim") == 0) {
        *out = sim_descriptor();
        return FLARE_OK;
    }
    if (strcmp(asked, "cuda") == 0) {
        if (cuda == NULL) {
            snprintf(error, error_size,
                     "FLARE_BACKEND=cuda: this flare was built without the CUDA backend");
            return FLARE_ERR_UNSUPPORTED;
        }
        *out = cuda;
        return FLARE_OK;
    }
    snprintf(error, error_size, "FLARE_BACKEND='%.32s': expected auto, sim or cuda", asked);
    return FLARE_ERR_INVALID_ARGUMENT;
}

const backend_descriptor *session_backend_injected(void)
{
    return cuda_descriptor();
}

int session_check_environment(char *error, size_t error_size)
{
    const backend_descriptor *backend;
    int automatic;
    int status =
        session_backend_choose(getenv("FLARE_BACKEND"), &backend, &automatic, error, error_size);
    if (status != FLARE_OK)
        return status;
    /* The launcher gives each process its session directory: whatever
     * FLARE_SESSION_DIR says here is replaced, so it is not checked. */
    flare_options options;
    flare_options_init(&options);
    options.session_dir = "/";
    core_config config;
    status = core_config_resolve(&options, &config, error, error_size);
    if (status != FLARE_OK)
        return status;
    /* The flight recorder's limits (flare trace --keep, --max-size). */
    if (recorder_check_environment(error, error_size) != 0)
        return FLARE_ERR_INVALID_ARGUMENT;
    return FLARE_OK;
}
