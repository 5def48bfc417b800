/*
 * sim_pc_engine.c: the simulated device's instruction-level deep engines,
 * as the window coordinator sees them (backend_engine_ops "sim-pc-sampling"
 * and "sim-sass-metrics"): the hardware-independent engine
 * (pcsamp/pc_engine.h) over the simulated PC sampling hardware (sim_pc.c)
 * or SASS metrics hardware (sim_sass.c), each created at its first use and
 * kept for the process, as the simulated PM engine is.
 *
 * A window asks for "every device" (-1): the simulated engine samples device
 * 0, where the demo and the tests run their kernels. Its lease context is
 * the simulated PM engine's (SIM_PM_CONTEXT_ID): the lease keeps profiling
 * contexts (tools, processes) apart, and both engines are this process's
 * flare, so a prepared PM engine, which holds device 0 for as long as it
 * stays prepared, does not turn PC sampling or SASS metrics down (the re-entrant lease
 * counts both claims). Another context holding the device does.
 *
 * Must never: hold its lock across an engine call that can wait (arm and
 * disarm are serialised by the coordinator), or lose the engine a window
 * armed (the same engine disarms it).
 */
#include "backend/sim/sim.h"
#include "backend/sim/sim_pc.h"
#include "backend/sim/sim_pm.h"
#include "backend/sim/sim_sass.h"

#include <pthread.h>
#include <stdio.h>

#include "flare/flare.h"

#define SIM_PC_DEVICE 0

/* One instruction-level engine of the simulated device: PC sampling or
 * SASS metrics, made at its first use and kept for the process. */
typedef struct sim_instruction_engine {
    const char *what; /* for the out-of-memory reason */
    const pc_hardware_ops *(*hardware_ops)(void);
    void *(*hardware)(int device);
    pc_engine *engine; /* under engine_lock */
} sim_instruction_engine;

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static sim_instruction_engine pc_sampling = {"PC sampling", sim_pc_hardware_ops, sim_pc_hardware,
                                             NULL};
static sim_instruction_engine sass_metrics = {"SASS metrics", sim_sass_hardware_ops,
                                              sim_sass_hardware, NULL};

static pc_engine *core_of(sim_instruction_engine *kind)
{
    pthread_mutex_lock(&engine_lock);
    if (kind->engine == NULL &&
        pc_engine_create(kind->hardware_ops(), kind->hardware(SIM_PC_DEVICE), SIM_PM_CONTEXT_ID,
                         &kind->engine) != FLARE_OK)
        kind->engine = NULL;
    pc_engine *found = kind->engine;
    pthread_mutex_unlock(&engine_lock);
    return found;
}

pc_engine *sim_pc_engine_core(void)
{
    return core_of(&pc_sampling);
}

pc_engine *sim_sass_engine_core(void)
{
    return core_of(&sass_metrics);
}

static int device_of(int device)
{
    return device < 0 ? SIM_PC_DEVICE : device;
}

static int arm(sim_instruction_engine *kind, int device, const backend_engine_config *config,
               uint64_t now_ns, char *reason, size_t reason_size)
{
    pc_engine *core = core_of(kind);
    if (core == NULL) {
        snprintf(reason, reason_size, "no memory for the simulated %s engine", kind->what);
        return FLARE_ERR_NO_MEMORY;
    }
    return pc_engine_arm(core, device_of(device), config, now_ns, reason, reason_size);
}

static int disarm(sim_instruction_engine *kind, int device, uint64_t now_ns,
                  backend_engine_result *result)
{
    pc_engine *core = core_of(kind);
    if (core == NULL)
        return FLARE_ERR_STATE;
    return pc_engine_disarm(core, device_of(device), now_ns, result);
}

static int probe(sim_instruction_engine *kind, char *reason, size_t reason_size)
{
    pc_engine *core = core_of(kind);
    if (core == NULL) {
        snprintf(reason, reason_size, "no memory for the simulated %s engine", kind->what);
        return FLARE_ERR_NO_MEMORY;
    }
    return pc_engine_probe(core, reason, reason_size);
}

static int pc_arm(int device, const backend_engine_config *config, uint64_t now_ns, char *reason,
                  size_t reason_size)
{
    return arm(&pc_sampling, device, config, now_ns, reason, reason_size);
}

static int pc_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    return disarm(&pc_sampling, device, now_ns, result);
}

static int pc_probe(int device, char *reason, size_t reason_size)
{
    (void)device;
    return probe(&pc_sampling, reason, reason_size);
}

static int sass_arm(int device, const backend_engine_config *config, uint64_t now_ns, char *reason,
                    size_t reason_size)
{
    return arm(&sass_metrics, device, config, now_ns, reason, reason_size);
}

static int sass_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    return disarm(&sass_metrics, device, now_ns, result);
}

static int sass_probe(int device, char *reason, size_t reason_size)
{
    (void)device;
    return probe(&sass_metrics, reason, reason_size);
}

static const backend_engine_ops sim_pc_engine_ops = {
    .name = "sim-pc-sampling",
    .arm = pc_arm,
    .disarm = pc_disarm,
    .probe = pc_probe,
    .prepare = NULL,
    /* Nominal, for engine auto: the simulated device costs nothing real. */
    .cost_launch_ns = 1000,
    .cost_gpu = 0.02,
    .cost_source = "simulated device (nominal)",
};

static const backend_engine_ops sim_sass_engine_ops = {
    .name = "sim-sass-metrics",
    .arm = sass_arm,
    .disarm = sass_disarm,
    .probe = sass_probe,
    .prepare = NULL,
    /* Nominal, shaped like the H200's (docs/PERFORMANCE.md, Session 17):
     * patched kernels run several times slower, so engine auto picks SASS
     * metrics only under a budget no real window would be given. */
    .cost_launch_ns = 1000,
    .cost_gpu = 5.0,
    .cost_source = "simulated device (nominal)",
};

const backend_engine_ops *sim_pc_engine(void)
{
    return &sim_pc_engine_ops;
}

const backend_engine_ops *sim_sass_engine(void)
{
    return &sim_sass_engine_ops;
}
