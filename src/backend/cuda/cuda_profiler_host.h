/*
 * cuda_profiler_host.h: CUPTI's profiler host API (metric configuration,
 * pass counts, counter-data evaluation) made includable from C.
 *
 * cupti_profiler_host.h is written for C++ only because it includes
 * <string>; host_shim/ supplies an empty one (see host_shim/string). The
 * functions are still resolved at run time through dlsym like every other
 * CUPTI function: never link libcupti.
 */
#ifndef FLARE_BACKEND_CUDA_PROFILER_HOST_H
#define FLARE_BACKEND_CUDA_PROFILER_HOST_H

/* Where a machine puts a C++ include directory on the C search path (seen
 * on the GPU machine: <string> resolved to /usr/include/c++/13/string ahead
 * of host_shim/), libstdc++'s own include guard makes that header empty. */
#ifndef _GLIBCXX_STRING
#define _GLIBCXX_STRING 1
#endif
#include <cupti_profiler_host.h>

#endif /* FLARE_BACKEND_CUDA_PROFILER_HOST_H */
