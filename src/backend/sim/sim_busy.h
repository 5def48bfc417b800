/*
 * sim_busy.h: when the simulated devices ran kernels, for the simulated PM
 * hardware's values (sim_pm_faults.values_from_kernels): a sample's busy
 * time is the time kernels of its device ran within it, so per-kernel
 * integration of PM samples (attrib/integrate.h) has a known truth to meet
 * on CI, as range replay by PM sampling measured against the range profiler
 * on the H200 (issue 25). A kernel is in the log from its start, so a
 * sample decoded while it still runs counts it too.
 *
 * A bounded log (the SIM_BUSY_MAX newest kernels, older ones overwritten
 * and no longer counted), one mutex: the simulated device's stream workers
 * write, the PM decode reads. Must never grow, or block beyond that mutex.
 */
#ifndef FLARE_BACKEND_SIM_SIM_BUSY_H
#define FLARE_BACKEND_SIM_SIM_BUSY_H

#include <stdint.h>

#define SIM_BUSY_MAX 4096u

/* Whether kernels are logged at all: only while the PM hardware's values
 * come from them (sim_pm_set_faults), so other runs take no lock per kernel. */
void sim_busy_enable(int on);

/* A kernel of device began at start_ns (the stream worker, before its
 * body): a ticket for sim_busy_end (SIM_BUSY_OFF while the log is off). */
#define SIM_BUSY_OFF UINT64_MAX
uint64_t sim_busy_begin(int device, uint64_t start_ns);
/* It ended at end_ns. */
void sim_busy_end(uint64_t ticket, uint64_t end_ns);

/* The time kernels of device ran within [start_ns, end_ns), in ns (a
 * running kernel up to end_ns; kernels of several streams that overlap
 * each count). */
uint64_t sim_busy_overlap_ns(int device, uint64_t start_ns, uint64_t end_ns);

#endif /* FLARE_BACKEND_SIM_SIM_BUSY_H */
