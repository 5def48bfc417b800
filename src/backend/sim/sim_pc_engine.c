/*
 * sim_pc_engine.c: the simulated device's PC sampling deep engine, as the
 * window coordinator sees it (backend_engine_ops "sim-pc-sampling"): the
 * hardware-independent engine (pcsamp/pc_engine.h) over the simulated PC
 * sampling hardware (sim_pc.c), created at the first use and kept for the
 * process, as the simulated PM engine is.
 *
 * A window asks for "every device" (-1): the simulated engine samples device
 * 0, where the demo and the tests run their kernels. Its lease context is
 * the simulated PM engine's (SIM_PM_CONTEXT_ID): the lease keeps profiling
 * contexts (tools, processes) apart, and both engines are this process's
 * flare, so a prepared PM engine, which holds device 0 for as long as it
 * stays prepared, does not turn PC sampling down (the re-entrant lease
 * counts both claims). Another context holding the device does.
 *
 * Must never: hold its lock across an engine call that can wait (arm and
 * disarm are serialised by the coordinator), or lose the engine a window
 * armed (the same engine disarms it).
 */
#include "backend/sim/sim.h"
#include "backend/sim/sim_pc.h"
#include "backend/sim/sim_pm.h"

#include <pthread.h>
#include <stdio.h>

#include "flare/flare.h"

#define SIM_PC_DEVICE 0

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static pc_engine *engine;

pc_engine *sim_pc_engine_core(void)
{
    pthread_mutex_lock(&engine_lock);
    if (engine == NULL && pc_engine_create(sim_pc_hardware_ops(), sim_pc_hardware(SIM_PC_DEVICE),
                                           SIM_PM_CONTEXT_ID, &engine) != FLARE_OK)
        engine = NULL;
    pc_engine *found = engine;
    pthread_mutex_unlock(&engine_lock);
    return found;
}

static int device_of(int device)
{
    return device < 0 ? SIM_PC_DEVICE : device;
}

static int pc_arm(int device, const backend_engine_config *config, uint64_t now_ns, char *reason,
                  size_t reason_size)
{
    pc_engine *core = sim_pc_engine_core();
    if (core == NULL) {
        snprintf(reason, reason_size, "no memory for the simulated PC sampling engine");
        return FLARE_ERR_NO_MEMORY;
    }
    return pc_engine_arm(core, device_of(device), config, now_ns, reason, reason_size);
}

static int pc_disarm(int device, uint64_t now_ns, backend_engine_result *result)
{
    pc_engine *core = sim_pc_engine_core();
    if (core == NULL)
        return FLARE_ERR_STATE;
    return pc_engine_disarm(core, device_of(device), now_ns, result);
}

static int pc_probe(int device, char *reason, size_t reason_size)
{
    (void)device;
    pc_engine *core = sim_pc_engine_core();
    if (core == NULL) {
        snprintf(reason, reason_size, "no memory for the simulated PC sampling engine");
        return FLARE_ERR_NO_MEMORY;
    }
    return pc_engine_probe(core, reason, reason_size);
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

const backend_engine_ops *sim_pc_engine(void)
{
    return &sim_pc_engine_ops;
}
