/*
 * tracebuf.c: the process-wide shared sampling buffers (see tracebuf.h).
 *
 * Teardown story. The manager is one static object whose mutex is
 * statically initialized and never destroyed, and whose life is an atomic
 * state (live, then torn down, never back). Nothing here is a pointer that
 * a destructor could free under another user, so:
 *   - an atexit handler and a library destructor may both call
 *     tracebuf_teardown, in either order: the first frees, the second gets
 *     FLARE_ERR_STATE;
 *   - any call after teardown (a late destructor reading a slot) sees the
 *     state and answers FLARE_ERR_STATE without touching freed memory;
 *   - buffers still in use by a lease holder at teardown are left to the
 *     process exit rather than freed under the writer.
 *
 * Every buffer, slot or staging, comes from buffer_obtain and goes back
 * through buffer_give_back: one allocation path, so no buffer ever needs to
 * know whether it is "shared".
 */
#include "tracebuf/tracebuf.h"

#include "core/log.h"
#include "flare/flare.h"
#include "tracebuf/lease.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct tracebuf_buffer {
    void *data;
    size_t bytes;
} tracebuf_buffer;

typedef struct device_buffers {
    size_t largest_request;     /* the sizing rule: every buffer is this big */
    uint32_t slots;             /* the most ring slots any context asked for */
    uint32_t registrations;     /* 0: no context wants this device */
    uint64_t largest_requester; /* for the log when a late request is refused */
    int built;
    tracebuf_buffer slot[TRACEBUF_MAX_SLOTS];
    tracebuf_buffer staging;
} device_buffers;

enum { MANAGER_LIVE = 0, MANAGER_TORN_DOWN = 1 };

static struct {
    pthread_mutex_t lock; /* guards everything below except state */
    atomic_int state;     /* MANAGER_LIVE, then MANAGER_TORN_DOWN for good */
    size_t memory_bytes;
    int has_custom_allocator;
    tracebuf_allocator allocator;
    device_buffers devices[TRACEBUF_MAX_DEVICES];
} manager = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *default_alloc(size_t bytes, void *user)
{
    (void)user;
    return calloc(1, bytes);
}

static void default_release(void *data, size_t bytes, void *user)
{
    (void)bytes;
    (void)user;
    free(data);
}

static int manager_live(void)
{
    return atomic_load(&manager.state) == MANAGER_LIVE;
}

static int device_valid(int device)
{
    return device >= 0 && device < TRACEBUF_MAX_DEVICES;
}

/* The one allocation path. Gives buffer `bytes` bytes, reusing what it
 * holds when that is big enough. Called with the lock held (allocation
 * happens only at build, never on a hot path). FLARE_OK or
 * FLARE_ERR_NO_MEMORY, leaving buffer empty. */
static int buffer_obtain(tracebuf_buffer *buffer, size_t bytes)
{
    if (buffer->data != NULL && buffer->bytes >= bytes)
        return FLARE_OK;
    void *data = manager.allocator.alloc != NULL
                     ? manager.allocator.alloc(bytes, manager.allocator.user)
                     : default_alloc(bytes, NULL);
    if (data == NULL)
        return FLARE_ERR_NO_MEMORY;
    buffer->data = data;
    buffer->bytes = bytes;
    manager.memory_bytes += bytes;
    return FLARE_OK;
}

/* The one release path: frees a buffer exactly once and forgets it. */
static void buffer_give_back(tracebuf_buffer *buffer)
{
    if (buffer->data == NULL)
        return;
    if (manager.allocator.release != NULL)
        manager.allocator.release(buffer->data, buffer->bytes, manager.allocator.user);
    else
        default_release(buffer->data, buffer->bytes, NULL);
    manager.memory_bytes -= buffer->bytes;
    buffer->data = NULL;
    buffer->bytes = 0;
}

/* Frees a device's buffers, staging first, then slots in reverse. Lock held. */
static void device_give_back(device_buffers *buffers)
{
    buffer_give_back(&buffers->staging);
    for (uint32_t slot = TRACEBUF_MAX_SLOTS; slot-- > 0;)
        buffer_give_back(&buffers->slot[slot]);
    buffers->built = 0;
}

static int any_device_built(void)
{
    for (int device = 0; device < TRACEBUF_MAX_DEVICES; device++)
        if (manager.devices[device].built)
            return 1;
    return 0;
}

int tracebuf_set_allocator(const tracebuf_allocator *allocator)
{
    if (allocator != NULL && (allocator->alloc == NULL || allocator->release == NULL))
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&manager.lock);
    int status = FLARE_ERR_STATE;
    if (manager_live() && !any_device_built()) {
        if (allocator != NULL)
            manager.allocator = *allocator;
        else
            memset(&manager.allocator, 0, sizeof(manager.allocator));
        status = FLARE_OK;
    }
    pthread_mutex_unlock(&manager.lock);
    return status;
}

int tracebuf_register(uint64_t context_id, int device, size_t requested_bytes, uint32_t ring_slots)
{
    if (context_id == 0 || !device_valid(device) || requested_bytes == 0 ||
        requested_bytes > TRACEBUF_MAX_REQUEST_BYTES || ring_slots == 0 ||
        ring_slots > TRACEBUF_MAX_SLOTS)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&manager.lock);
    if (!manager_live()) {
        pthread_mutex_unlock(&manager.lock);
        return FLARE_ERR_STATE;
    }
    device_buffers *buffers = &manager.devices[device];
    if (buffers->built) {
        size_t built_bytes = buffers->largest_request;
        uint32_t built_slots = buffers->slots;
        pthread_mutex_unlock(&manager.lock);
        /* Logged outside the lock: the log takes locks of its own. */
        core_log(CORE_LOG_WARNING,
                 "tracebuf: context %" PRIu64 " registered %zu bytes x %u slots for device %d "
                 "after its buffers were built (%u slots of %zu bytes); every context must "
                 "register before tracebuf_build",
                 context_id, requested_bytes, ring_slots, device, built_slots, built_bytes);
        return FLARE_ERR_STATE;
    }
    if (requested_bytes > buffers->largest_request) {
        buffers->largest_request = requested_bytes;
        buffers->largest_requester = context_id;
    }
    if (ring_slots > buffers->slots)
        buffers->slots = ring_slots;
    buffers->registrations++;
    pthread_mutex_unlock(&manager.lock);
    return FLARE_OK;
}

int tracebuf_build(int device)
{
    if (!device_valid(device))
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&manager.lock);
    device_buffers *buffers = &manager.devices[device];
    int status = FLARE_OK;
    if (!manager_live())
        status = FLARE_ERR_STATE;
    else if (buffers->built)
        status = FLARE_OK;
    else if (buffers->registrations == 0)
        status = FLARE_ERR_NOT_FOUND;
    else {
        for (uint32_t slot = 0; slot < buffers->slots && status == FLARE_OK; slot++)
            status = buffer_obtain(&buffers->slot[slot], buffers->largest_request);
        if (status == FLARE_OK)
            status = buffer_obtain(&buffers->staging, buffers->largest_request);
        if (status == FLARE_OK)
            buffers->built = 1;
        else
            device_give_back(buffers); /* nothing half-built survives */
    }
    size_t bytes = buffers->largest_request;
    uint32_t slots = buffers->slots;
    pthread_mutex_unlock(&manager.lock);
    if (status == FLARE_ERR_NO_MEMORY)
        core_log(CORE_LOG_ERROR,
                 "tracebuf: out of memory building %u slots and staging of %zu bytes for device %d",
                 slots, bytes, device);
    return status;
}

/* Looks up a built buffer; which is a slot index, or -1 for staging. */
static int buffer_lookup(int device, int which, void **data, size_t *bytes)
{
    if (!device_valid(device) || data == NULL || bytes == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&manager.lock);
    device_buffers *buffers = &manager.devices[device];
    int status = FLARE_OK;
    if (!manager_live() || !buffers->built)
        status = FLARE_ERR_STATE;
    else if (which >= 0 && (uint32_t)which >= buffers->slots)
        status = FLARE_ERR_INVALID_ARGUMENT;
    else {
        const tracebuf_buffer *buffer = which < 0 ? &buffers->staging : &buffers->slot[which];
        *data = buffer->data;
        *bytes = buffer->bytes;
    }
    pthread_mutex_unlock(&manager.lock);
    return status;
}

int tracebuf_slot(int device, uint32_t slot, void **data, size_t *bytes)
{
    if (slot >= TRACEBUF_MAX_SLOTS)
        return FLARE_ERR_INVALID_ARGUMENT;
    return buffer_lookup(device, (int)slot, data, bytes);
}

int tracebuf_staging(int device, void **data, size_t *bytes)
{
    return buffer_lookup(device, -1, data, bytes);
}

int tracebuf_device_shape(int device, uint32_t *slots, size_t *slot_bytes)
{
    if (!device_valid(device) || slots == NULL || slot_bytes == NULL)
        return FLARE_ERR_INVALID_ARGUMENT;
    pthread_mutex_lock(&manager.lock);
    const device_buffers *buffers = &manager.devices[device];
    *slots = buffers->built ? buffers->slots : 0;
    *slot_bytes = buffers->built ? buffers->largest_request : 0;
    pthread_mutex_unlock(&manager.lock);
    return manager_live() ? FLARE_OK : FLARE_ERR_STATE;
}

size_t tracebuf_memory_bytes(void)
{
    pthread_mutex_lock(&manager.lock);
    size_t bytes = manager.memory_bytes;
    pthread_mutex_unlock(&manager.lock);
    return bytes;
}

int tracebuf_reset(void)
{
    pthread_mutex_lock(&manager.lock);
    int status = manager_live() ? FLARE_OK : FLARE_ERR_STATE;
    /* Check every device before freeing any, so a refusal frees nothing. */
    for (int device = 0; device < TRACEBUF_MAX_DEVICES && status == FLARE_OK; device++)
        if (tracebuf_lease_in_flight(device) > 0)
            status = FLARE_ERR_STATE;
    if (status == FLARE_OK) {
        for (int device = 0; device < TRACEBUF_MAX_DEVICES; device++) {
            device_give_back(&manager.devices[device]);
            memset(&manager.devices[device], 0, sizeof(manager.devices[device]));
        }
    }
    pthread_mutex_unlock(&manager.lock);
    return status;
}

int tracebuf_teardown(void)
{
    int expected = MANAGER_LIVE;
    /* The exchange makes exactly one caller the one that frees, whatever
     * order atexit handlers and destructors run in. */
    if (!atomic_compare_exchange_strong(&manager.state, &expected, MANAGER_TORN_DOWN))
        return FLARE_ERR_STATE;
    tracebuf_lease_shutdown();
    pthread_mutex_lock(&manager.lock);
    for (int device = 0; device < TRACEBUF_MAX_DEVICES; device++) {
        /* A use still in flight keeps its device's buffers: the process is
         * exiting, and freeing them under the writer would be worse. */
        if (tracebuf_lease_in_flight(device) == 0)
            device_give_back(&manager.devices[device]);
    }
    pthread_mutex_unlock(&manager.lock);
    return FLARE_OK;
}

int tracebuf_torn_down(void)
{
    return !manager_live();
}
