/*
 * flare/sim.h: the simulated device, for programs and tests without a GPU.
 *
 * The simulated device models what flare needs from a GPU: devices, streams
 * that run work in order on their own worker thread, kernels that are plain C
 * functions over host-backed "device" memory, asynchronous completion, and
 * injected faults. flare-demo runs on it when no GPU is present. Functions
 * return 0 or a negative flare_status (see flare.h) and never abort.
 */
#ifndef FLARE_SIM_H
#define FLARE_SIM_H

#include "flare.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct flare_sim_stream flare_sim_stream;

/* What a simulated kernel sees: its launch geometry and its argument block. */
typedef struct flare_sim_launch {
    int device;
    uint32_t grid[3];
    uint32_t block[3];
    const void *args;
    size_t args_size;
} flare_sim_launch;

typedef void (*flare_sim_kernel_fn)(const flare_sim_launch *launch);

/*
 * Sets the number of simulated devices (1..64). Must come before the first
 * other flare_sim_ call; afterwards FLARE_ERR_STATE. Default: $FLARE_SIM_DEVICES,
 * else 1.
 */
FLARE_API int flare_sim_configure(int device_count);
FLARE_API int flare_sim_device_count(void);

/* Registers a kernel under a name (copied, at most FLARE_NAME_MAX - 1 bytes);
 * *kernel_id receives its id. Registering the same name twice returns the same id. */
FLARE_API int flare_sim_kernel_register(const char *name, flare_sim_kernel_fn function,
                                        int *kernel_id);

FLARE_API int flare_sim_stream_create(int device, flare_sim_stream **out);
/* Waits (up to 10 s) for the stream's work, then frees it. FLARE_ERR_TIMEOUT
 * leaves the stream alive. */
FLARE_API int flare_sim_stream_destroy(flare_sim_stream *stream);

/* Host-backed device memory on a device, zero-filled. */
FLARE_API int flare_sim_malloc(int device, size_t bytes, void **out);
FLARE_API int flare_sim_free(void *pointer);

/* Asynchronous work; args are copied (at most 4096 bytes). */
FLARE_API int flare_sim_launch_kernel(flare_sim_stream *stream, int kernel_id,
                                      const uint32_t grid[3], const uint32_t block[3],
                                      const void *args, size_t args_size);
FLARE_API int flare_sim_memcpy_async(flare_sim_stream *stream, void *destination,
                                     const void *source, size_t bytes);
FLARE_API int flare_sim_memset_async(flare_sim_stream *stream, void *destination, int value,
                                     size_t bytes);

/* Where a simulated kernel's warps are, for PC sampling in deep windows
 * that ask for it (rule option `engine pc`): called from inside a kernel
 * body, it says the kernel is now at pc_offset (a byte offset in the
 * function, as a GPU's program counter would be) and, unless issuing
 * (FLARE_SIM_STALL_SELECTED), why it waits. The simulated sampler reads it
 * every period; a kernel that never calls it is sampled at offset 0,
 * selected. Does nothing outside a kernel body. */
typedef enum flare_sim_stall {
    FLARE_SIM_STALL_SELECTED = 0,           /* issuing: not stalled */
    FLARE_SIM_STALL_LONG_SCOREBOARD = 1,    /* waiting for a global memory load */
    FLARE_SIM_STALL_SHORT_SCOREBOARD = 2,   /* waiting for shared memory or a special op */
    FLARE_SIM_STALL_MATH_PIPE_THROTTLE = 3, /* the math pipe is busy */
    FLARE_SIM_STALL_BARRIER = 4,            /* at a barrier */
} flare_sim_stall;
FLARE_API void flare_sim_pc_mark(uint64_t pc_offset, flare_sim_stall stall_reason);

/* Waits at most timeout_ms for the stream / device to be idle. */
FLARE_API int flare_sim_stream_synchronize(flare_sim_stream *stream, uint32_t timeout_ms);
FLARE_API int flare_sim_device_synchronize(int device, uint32_t timeout_ms);

#ifdef __cplusplus
}
#endif

#endif /* FLARE_SIM_H */
