/*
 * tracebuf.h: the process-wide shared sampling buffers.
 *
 * A deep engine (PM sampling) writes into hardware buffers, one per ring
 * slot, and copies them through a CPU staging buffer. Only one profiling
 * context may sample a device at a time (lease.h), so giving every context
 * its own buffers wastes memory for nothing: this module gives each device
 * exactly one set, sized to the largest request any context made.
 *
 * The life of a device's buffers:
 *   1. Pre-pass: every context that may sample the device registers its
 *      requested size and ring slot count (tracebuf_register).
 *   2. Build (tracebuf_build): one buffer per ring slot of the largest
 *      request, plus one staging buffer of the same size, all obtained through
 *      one allocation function (and a pluggable allocator, for tests).
 *   3. Use: every context reads the same pointers (tracebuf_slot,
 *      tracebuf_staging) while it holds the device's lease.
 *   4. tracebuf_reset (session end) or tracebuf_teardown (process exit) frees
 *      each buffer exactly once.
 *
 * The manager is a static object that is never destroyed, so atexit handlers
 * and library destructors may run in any order: after teardown every call
 * answers FLARE_ERR_STATE instead of touching freed memory.
 *
 * Must never: allocate on an application thread's hot path (everything here
 * is setup and teardown), free a buffer while a lease holder has a use in
 * flight, or hand out buffers of a device that has not been built.
 */
#ifndef FLARE_TRACEBUF_TRACEBUF_H
#define FLARE_TRACEBUF_TRACEBUF_H

#include <stddef.h>
#include <stdint.h>

/* Devices the manager tracks (ids 0..TRACEBUF_MAX_DEVICES-1). */
#define TRACEBUF_MAX_DEVICES 64
/* Ring slots one device may have (triple buffering needs 3). */
#define TRACEBUF_MAX_SLOTS 8
/* The largest buffer one context may request: a hard cap, so a bad
 * configuration cannot ask for the whole machine. */
#define TRACEBUF_MAX_REQUEST_BYTES (4ull << 30)

/* Where buffer memory comes from. alloc returns zeroed memory or NULL;
 * release is given back the size that alloc was asked for. */
typedef struct tracebuf_allocator {
    void *(*alloc)(size_t bytes, void *user);
    void (*release)(void *data, size_t bytes, void *user);
    void *user;
} tracebuf_allocator;

/* Replaces the allocator (NULL: calloc/free). FLARE_OK, or FLARE_ERR_STATE
 * while any device has buffers built (they must be freed by the allocator
 * that made them) or after teardown. */
int tracebuf_set_allocator(const tracebuf_allocator *allocator);

/* Pre-pass: context_id (non-zero) may sample device with a buffer of
 * requested_bytes per ring slot and ring_slots slots. Registering twice is
 * harmless. FLARE_OK; FLARE_ERR_INVALID_ARGUMENT for a zero id, a bad
 * device, 0 or more than TRACEBUF_MAX_REQUEST_BYTES bytes, or slots outside
 * 1..TRACEBUF_MAX_SLOTS; FLARE_ERR_STATE when the device's buffers are built
 * already (the log names the context, the device and the size built: a
 * larger request could not be honoured) or after teardown. */
int tracebuf_register(uint64_t context_id, int device, size_t requested_bytes, uint32_t ring_slots);

/* Builds the device's buffers from its registrations: one per ring slot
 * (the most slots any context asked for), each of the largest requested
 * size, and one staging buffer of that size. Building a built device is a
 * no-op. FLARE_OK; FLARE_ERR_NOT_FOUND when no context registered for it;
 * FLARE_ERR_NO_MEMORY when an allocation failed (everything allocated so
 * far is freed and registrations stay open, so build may be retried);
 * FLARE_ERR_INVALID_ARGUMENT for a bad device; FLARE_ERR_STATE after
 * teardown. */
int tracebuf_build(int device);

/* The device's buffer for ring slot (0-based), valid until reset or
 * teardown. FLARE_OK; FLARE_ERR_STATE when the device is not built or after
 * teardown; FLARE_ERR_INVALID_ARGUMENT for a bad device, slot or NULL out. */
int tracebuf_slot(int device, uint32_t slot, void **data, size_t *bytes);

/* The device's CPU staging buffer, shared by every context like the slots. */
int tracebuf_staging(int device, void **data, size_t *bytes);

/* The device's built slot count and slot size (tests, logs); 0s when not built. */
int tracebuf_device_shape(int device, uint32_t *slots, size_t *slot_bytes);

/* Bytes held by every buffer of every device now. */
size_t tracebuf_memory_bytes(void);

/* Frees every buffer and forgets every registration, leaving the manager
 * usable (session end, tests). FLARE_OK; FLARE_ERR_STATE, freeing nothing,
 * while any device has a lease use in flight, or after teardown. */
int tracebuf_reset(void);

/* Process exit: shuts the leases down (no new acquire succeeds), frees every
 * buffer without a use in flight (one still in use is left to the exit: it
 * cannot be freed under its user) and makes every later call answer
 * FLARE_ERR_STATE. Safe from an atexit handler or a destructor, in any order.
 * FLARE_OK the first time, FLARE_ERR_STATE after. */
int tracebuf_teardown(void);

/* Non-zero once tracebuf_teardown has run. */
int tracebuf_torn_down(void);

#endif /* FLARE_TRACEBUF_TRACEBUF_H */
