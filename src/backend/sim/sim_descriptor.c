/*
 * sim_descriptor.c: the simulated device's backend descriptor (backend.h).
 *
 * The one table the session layer knows the simulated device by: its device
 * operations, the simulated deep engine, and replay's device operations and
 * "sim-metrics" collector. It must never hold state of its own: every table
 * it points to belongs to the simulated device's other files.
 */
#include "backend/sim/sim.h"

#include <stddef.h>

static const backend_engine_ops *deep_engine(void)
{
    return sim_engine();
}

static const backend_engine_ops *pc_deep_engine(void)
{
    return sim_pc_engine();
}

static struct pc_engine *pc_engine(void)
{
    return sim_pc_engine_core();
}

static const backend_engine_ops *sass_deep_engine(void)
{
    return sim_sass_engine();
}

static struct pc_engine *sass_engine(void)
{
    return sim_sass_engine_core();
}

static const struct replay_device_ops *replay_ops(void)
{
    return sim_replay_ops();
}

static const struct replay_metric_collector *metric_collector(void)
{
    return sim_replay_collector();
}

static const backend_descriptor descriptor = {
    .name = "sim",
    .caps = BACKEND_CAP_DEVICE_OPS | BACKEND_CAP_DEEP_ENGINE | BACKEND_CAP_REPLAY,
    .device = &sim_device_ops,
    .start = NULL,
    .forward_nvtx = NULL,
    .deep_engine = deep_engine,
    .pm_engine = NULL,
    .pc_deep_engine = pc_deep_engine,
    .pc_engine = pc_engine,
    .sass_deep_engine = sass_deep_engine,
    .sass_engine = sass_engine,
    .replay_ops = replay_ops,
    .metric_collector = metric_collector,
    .open_scopes = NULL,
    .deliver = sim_deliver_held,
};

const backend_descriptor *sim_descriptor(void)
{
    return &descriptor;
}
