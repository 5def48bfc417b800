/*
 * cuda_trace.h: the CUDA tracing engine the injection entry points start
 * (src/session/inject.c, through the CUDA backend descriptor).
 *
 * Owns the CUPTI subscription and activity buffers, the NVTX range table and
 * the NVML sampler thread of the process. Must never stop or crash the
 * program: every failure becomes a capability row with the vendor's reason.
 */
#ifndef FLARE_BACKEND_CUDA_TRACE_H
#define FLARE_BACKEND_CUDA_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "pm/pm_session.h"

/* Starts CUPTI tracing and the NVML sampler (once); host counts launches.
 * 0, or -1 when CUPTI is missing (the sampler still starts). */
int cuda_trace_start(const backend_host *host);

/* The NVTX ranges open now, for attribution (backend_descriptor.open_scopes). */
size_t cuda_trace_open_ranges(pm_open_scope *out, size_t capacity, void *user);

/* Hands over the activity records CUPTI holds in buffers that are not full
 * yet (backend_descriptor.deliver); records still incomplete stay. */
void cuda_trace_deliver(void);

/* Hands NVTX's initialisation to CUPTI so its NVTX callbacks fire. */
int cuda_trace_forward_nvtx(void *get_export_table);

/* A readable kernel name: the demangled form when the C++ runtime's
 * demangler is present, else the name itself. The result is valid until
 * the next call on the same thread. */
const char *cuda_demangle(const char *mangled);

/* Records one sample of a metric (device -1: the host) as an event of
 * flare's own; dropped silently when the event buffer is full. */
void cuda_trace_emit_metric(int device, const char *name, uint64_t time_ns, int64_t value);

/* Publishes the tracing engine's loss counters to the drops table. */
void cuda_trace_record_drops(uint64_t cupti_records, uint64_t lost_buffers, uint64_t lost_ranges);

#endif /* FLARE_BACKEND_CUDA_TRACE_H */
