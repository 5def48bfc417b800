/*
 * lease.h: the per-device sampling lease.
 *
 * The shared buffers (tracebuf.h) are safe only if one profiling context at
 * a time samples a device. The lease enforces that: the first context to
 * ask claims the device (owner-keyed, re-entrant: the owner may acquire
 * again and must release as often); any other context is turned down at
 * once, never made to wait, and told who holds the device, so its window
 * runs without the engine and records "PM sampling busy, held by ...".
 *
 * Besides the re-entrant count the lease counts in-flight uses (a sampling
 * pass writing a slot buffer). The device is really released only when the
 * owner's count is 0 and its last in-flight use has ended, so a stop that
 * arrives mid-pass cannot hand the buffers to another context under the
 * writer's feet.
 *
 * One mutex per device, held only for a few field updates: never across a
 * callback, an allocation or a log call. Context ids are non-zero; 0 means
 * "nobody".
 *
 * Must never: block a caller on another context, let two contexts hold one
 * device, or release a device with a use in flight.
 */
#ifndef FLARE_TRACEBUF_LEASE_H
#define FLARE_TRACEBUF_LEASE_H

#include <stddef.h>
#include <stdint.h>

/* Room for the holder text acquire writes ("context 18446744073709551615"). */
#define TRACEBUF_HOLDER_MAX 32

/* Claims device for context_id, or counts one more claim by its owner.
 * FLARE_OK; FLARE_ERR_STATE at once when another context holds the device
 * (holder_out, if not NULL, gets "context <id>" of the holder) or after
 * shutdown (holder_out gets "shutdown"); FLARE_ERR_INVALID_ARGUMENT for a
 * bad device or a zero id. */
int tracebuf_lease_acquire(int device, uint64_t context_id, char *holder_out);

/* A use (a pass writing the device's buffers) begins / ends. Only the
 * owner may begin one. use_end that leaves the owner with no claims and no
 * uses releases the device. FLARE_OK; FLARE_ERR_STATE when context_id does
 * not hold the device (begin) or has no use in flight (end);
 * FLARE_ERR_INVALID_ARGUMENT for a bad device or a zero id. */
int tracebuf_lease_use_begin(int device, uint64_t context_id);
int tracebuf_lease_use_end(int device, uint64_t context_id);

/* Drops one claim. The device is released when the count reaches 0 and no
 * use is in flight; otherwise the last use_end releases it. FLARE_OK;
 * FLARE_ERR_STATE when context_id holds no claim on the device;
 * FLARE_ERR_INVALID_ARGUMENT for a bad device or a zero id. */
int tracebuf_lease_release(int device, uint64_t context_id);

/* Stop: drops every claim context_id has on every device (uses in flight
 * release their device when they end). Returns how many devices it held. */
int tracebuf_lease_release_all(uint64_t context_id);

/* Shutdown: drops every claim of every context and turns every later
 * acquire down. Called by tracebuf_teardown. */
void tracebuf_lease_shutdown(void);

/* The device's holder (0: free) and its in-flight uses, for the buffer
 * manager and tests. */
uint64_t tracebuf_lease_holder(int device);
uint32_t tracebuf_lease_in_flight(int device);

/* Writes the text a turned-down window records ("PM sampling busy, held by
 * context 7 on device 0") into reason[0..reason_size). */
void tracebuf_lease_busy_reason(int device, const char *holder, char *reason, size_t reason_size);

/* Records a turned-down acquire where the user looks: the pm_sampling row
 * of the capability matrix becomes "degraded" with the busy reason. Not for
 * hot paths (the matrix takes a mutex). */
void tracebuf_lease_note_busy(int device, const char *holder);

#endif /* FLARE_TRACEBUF_LEASE_H */
