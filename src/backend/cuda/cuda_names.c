/*
 * cuda_names.c: demangling kernel names and publishing the tracer's loss
 * counters (cuda_trace.h).
 *
 * The demangler is the C++ runtime's __cxa_demangle, found at run time in
 * the process (CUDA programs carry libstdc++); flare itself stays C and
 * links no C++ runtime. Runs on CUPTI's buffer thread and on PC sampling's
 * reading thread (cuda_pc.c, so PC samples name a kernel as its records
 * do), on the thread that closes a SASS metrics window (cuda_sass.c), and
 * on a program's thread at a launch during one (cuda_untimed.c, once per
 * name and thread): the buffer is per thread, freed when its thread ends,
 * the look-up once.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_trace.h"
#include "core/capability.h"

typedef char *(*demangle_function)(const char *mangled, char *buffer, size_t *length, int *status);

static _Thread_local char *demangle_buffer;
static _Thread_local size_t demangle_length;

static demangle_function demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;
/* Frees a thread's buffer when the thread ends (a window's closing thread
 * may be short-lived). */
static pthread_key_t buffer_key;
static int buffer_key_ready;

static void free_buffer(void *buffer)
{
    free(buffer);
}

static void demangle_look_up(void)
{
    buffer_key_ready = pthread_key_create(&buffer_key, free_buffer) == 0;
    /* A C++ runtime loaded privately (PyTorch's extensions load theirs
     * RTLD_LOCAL) is not in the global scope: open it by name. */
    *(void **)&demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (demangle == NULL) {
        void *runtime = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (runtime != NULL)
            *(void **)&demangle = dlsym(runtime, "__cxa_demangle");
    }
}

const char *cuda_demangle(const char *mangled)
{
    if (mangled == NULL)
        return NULL;
    pthread_once(&demangle_once, demangle_look_up);
    if (demangle == NULL || strncmp(mangled, "_Z", 2) != 0)
        return mangled;
    int status = 0;
    char *result = demangle(mangled, demangle_buffer, &demangle_length, &status);
    if (status != 0 || result == NULL)
        return mangled;
    if (result != demangle_buffer && buffer_key_ready)
        pthread_setspecific(buffer_key, result);
    demangle_buffer = result; /* the demangler may have grown it */
    return result;
}

void cuda_trace_record_drops(uint64_t cupti_records, uint64_t lost_buffers, uint64_t lost_ranges)
{
    core_drops_set("cupti_activity", "records dropped by CUPTI", cupti_records);
    core_drops_set("cupti_activity", "buffers not allocated", lost_buffers);
    core_drops_set("nvtx_ranges", "start/end ranges beyond the open-range table", lost_ranges);
}
