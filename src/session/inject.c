/*
 * inject.c: the entry points the CUDA driver (CUDA_INJECTION64_PATH) and
 * NVTX (NVTX_INJECTION64_PATH) look up by name in libflare.so.
 *
 * They start the session if the library's constructor has not, and hand
 * the injected backend to it (session_start_injected). The driver is
 * inside cuInit here: nothing on this path may call back into it, and
 * nothing may fail the program (1 tells the driver the tool initialised,
 * even when tracing is degraded).
 */
#include "flare/flare.h"
#include "session/session.h"

int InitializeInjection(void);
int InitializeInjectionNvtx2(void *get_export_table);

FLARE_API int InitializeInjection(void)
{
    session_start_injected(session_backend_injected());
    return 1;
}

FLARE_API int InitializeInjectionNvtx2(void *get_export_table)
{
    const backend_descriptor *injected = session_backend_injected();
    if (!flare_is_active())
        flare_init(NULL);
    if (injected == NULL || injected->forward_nvtx == NULL)
        return 0;
    return injected->forward_nvtx(get_export_table);
}
