/*
 * capability.h: the capability matrix: one row per feature (kernels,
 * copies, nvtx, nvml, pm_sampling, range_profiler, replay, ...) with whether
 * it was requested, its status and the reason.
 *
 * Owns a small fixed table; any module may set a row at any time (a mutex,
 * never on a hot path); the collector stores changed rows at each commit,
 * and every row again at the start of a session.
 */
#ifndef FLARE_CORE_CAPABILITY_H
#define FLARE_CORE_CAPABILITY_H

#include "store/store.h"

#define CORE_CAPABILITY_MAX 32

/* Status words, stored as text. */
#define CORE_CAPABILITY_ACTIVE      "active"
#define CORE_CAPABILITY_DEGRADED    "degraded"
#define CORE_CAPABILITY_UNAVAILABLE "unavailable"
#define CORE_CAPABILITY_OFF         "off"

/* Sets (or replaces) the row for feature; reason is printf-style. */
void core_capability_set(const char *feature, int requested, const char *status,
                         const char *reason_format, ...) __attribute__((format(printf, 4, 5)));

/* Writes changed rows (all rows when everything is set) to the store. */
void core_capabilities_write(store *database, int64_t pid, int everything);

/* Marks every row changed, so the next write stores them all. */
void core_capabilities_mark_all_changed(void);

/* Drop counters kept by modules other than the core (CUPTI's dropped
 * records, NVTX ranges beyond the table...): set, not added; stored by the
 * collector at each commit like the capability rows. */
void core_drops_set(const char *source, const char *detail, uint64_t count);

/* Names a device for the devices table (the CUDA backend names real GPUs;
 * without a name the simulated device's is used). */
void core_device_describe(int device, const char *name, const char *backend);
/* Copies a described device's name and backend; 0 if found, -1 if not. */
int core_device_lookup(int device, char *name, size_t name_size, char *backend,
                       size_t backend_size);

#endif /* FLARE_CORE_CAPABILITY_H */
