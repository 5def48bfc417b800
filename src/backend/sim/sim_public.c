/*
 * sim_public.c: the public flare_sim_ API (include/flare/sim.h), a thin layer
 * over the same backend table core uses, so applications and flare see one
 * simulated device.
 *
 * It must never hold state of its own or behave differently from the
 * backend table; the only logic here is what the public API adds (copy
 * direction inference, millisecond timeouts).
 */
#include "backend/sim/sim_internal.h"

/* A flare_sim_stream is the backend's stream under its public name; the
 * pointer is only ever dereferenced as the backend type. */
static backend_stream *backend_stream_of(flare_sim_stream *stream)
{
    return (backend_stream *)stream;
}

FLARE_API int flare_sim_configure(int device_count)
{
    return sim_configure(device_count);
}

FLARE_API int flare_sim_device_count(void)
{
    return sim_backend()->device_count();
}

FLARE_API int flare_sim_kernel_register(const char *name, flare_sim_kernel_fn function,
                                        int *kernel_id)
{
    sim_state_ensure();
    return sim_kernel_register(name, function, kernel_id);
}

FLARE_API int flare_sim_stream_create(int device, flare_sim_stream **out)
{
    if (out == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    backend_stream *stream = NULL;
    int status = sim_backend()->stream_create(device, &stream);
    if (status == FLARE_OK) {
        *out = (flare_sim_stream *)stream;
    }
    return status;
}

FLARE_API int flare_sim_stream_destroy(flare_sim_stream *stream)
{
    return sim_backend()->stream_destroy(backend_stream_of(stream));
}

FLARE_API int flare_sim_malloc(int device, size_t bytes, void **out)
{
    return sim_backend()->memory_alloc(device, bytes, out);
}

FLARE_API int flare_sim_free(void *pointer)
{
    sim_state_ensure();
    return sim_backend()->memory_free(pointer);
}

FLARE_API int flare_sim_launch_kernel(flare_sim_stream *stream, int kernel_id,
                                      const uint32_t grid[3], const uint32_t block[3],
                                      const void *args, size_t args_size)
{
    if (grid == NULL || block == NULL) {
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    backend_launch launch = {.kernel_id = kernel_id, .args = args, .args_size = args_size};
    for (int axis = 0; axis < 3; axis++) {
        launch.grid[axis] = grid[axis];
        launch.block[axis] = block[axis];
    }
    return sim_backend()->launch(backend_stream_of(stream), &launch);
}

FLARE_API int flare_sim_memcpy_async(flare_sim_stream *stream, void *destination,
                                     const void *source, size_t bytes)
{
    bool destination_on_device = sim_memory_lookup(destination, NULL);
    bool source_on_device = sim_memory_lookup(source, NULL);
    backend_copy_kind kind = BACKEND_COPY_HOST_TO_HOST;
    if (destination_on_device && source_on_device) {
        kind = BACKEND_COPY_DEVICE_TO_DEVICE;
    } else if (destination_on_device) {
        kind = BACKEND_COPY_HOST_TO_DEVICE;
    } else if (source_on_device) {
        kind = BACKEND_COPY_DEVICE_TO_HOST;
    }
    return sim_backend()->copy_async(backend_stream_of(stream), destination, source, bytes, kind);
}

FLARE_API int flare_sim_memset_async(flare_sim_stream *stream, void *destination, int value,
                                     size_t bytes)
{
    return sim_backend()->memset_async(backend_stream_of(stream), destination, value, bytes);
}

FLARE_API int flare_sim_stream_synchronize(flare_sim_stream *stream, uint32_t timeout_ms)
{
    return sim_backend()->stream_drain(backend_stream_of(stream), (uint64_t)timeout_ms * 1000000u);
}

FLARE_API int flare_sim_device_synchronize(int device, uint32_t timeout_ms)
{
    return sim_backend()->device_drain(device, (uint64_t)timeout_ms * 1000000u);
}
