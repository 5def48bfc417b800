/*
 * sim_pm.h: the simulated device's PM sampling engine, a real sample stream
 * through the same engine (pm/pm_engine.h), attribution and store path as
 * CUDA's, with the hardware's failure modes on demand.
 *
 * The simulated hardware produces one sample per interval while started,
 * into a finite hardware buffer (KEEP_OLDEST: when full, newer samples are
 * lost and the next decode reports overflow), decoded into a counter-data
 * image of finite size (a decode that fills it stops with
 * COUNTER_DATA_FULL). Sample times may be stamped with CLOCK_REALTIME to
 * exercise the clock conversion. Process-wide; for tests and the no-GPU
 * demo. Never blocks beyond its own short mutex.
 */
#ifndef FLARE_BACKEND_SIM_SIM_PM_H
#define FLARE_BACKEND_SIM_SIM_PM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "pm/pm_engine.h"

/* The engine's lease key on the simulated devices. */
#define SIM_PM_CONTEXT_ID 0x5350u

typedef struct sim_pm_faults {
    uint32_t hardware_buffer_samples; /* 0: 100000 */
    uint32_t image_samples;           /* samples one decode holds; 0: PM_IMAGE_SAMPLES_DEFAULT */
    int realtime_clock;               /* stamp samples with CLOCK_REALTIME */
    uint32_t fail_decodes;            /* the next N decodes fail */
    int refuse_prepare;               /* prepare fails (e.g. a multi-pass preset) */
    /* The buffer holds hardware_buffer_samples until its first overflow is
     * decoded, and never fills after: one stall makes one overflow, however
     * late the decoder runs from then on. */
    int overflow_once;
    /* Metric m of a sample is (m + 1) times the ns kernels of its device
     * ran within it (sim_busy.h), instead of a pattern of its start: a
     * truth for per-kernel integration (attrib/integrate.h). */
    int values_from_kernels;
} sim_pm_faults;

/* Applies from the next prepare (buffer and image sizes) or at once
 * (fail_decodes, realtime_clock). NULL clears them. */
void sim_pm_set_faults(const sim_pm_faults *faults);

/* The engine's backend table ("sim-pm-sampling"). It is prepared on the
 * first call of sim_pm_prepare (or lazily at the first probe/arm, with the
 * environment's FLARE_PM_PRESET and FLARE_PM_INTERVAL). */
const backend_engine_ops *sim_pm_engine(void);
/* Prepares on device with preset and interval (0: from the environment).
 * 0 or a negative status with reason. */
int sim_pm_prepare(int device, const char *preset_name, uint64_t interval_ns, char *reason,
                   size_t reason_size);
/* The engine itself (stats, pause): NULL before the first use. */
pm_engine *sim_pm_core(void);
/* Samples the simulated hardware has taken since its last start, kept in
 * its buffer or lost to a full one: it takes one per interval by the clock,
 * so tests wait on this instead of sleeping. 0 before the first start. */
uint64_t sim_pm_samples_taken(void);
/* Range replay's PM hardware on device (replay_device_ops.pm_hardware): an
 * instance of its own whose metric m is (m + 1) times the ns kernels ran
 * in a sample; NULL for no such device. */
#define SIM_PM_REPLAY_CONTEXT_ID 0x5352u
const pm_hardware_ops *sim_pm_replay_hardware(int device, void **hardware, uint64_t *context_id);
/* Tears the engine down (tests between cases); unregisters it. */
void sim_pm_reset(void);

#endif /* FLARE_BACKEND_SIM_SIM_PM_H */
