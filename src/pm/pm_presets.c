/*
 * pm_presets.c: PM sampling's presets, its settings from the environment
 * (FLARE_PM_PRESET, FLARE_PM_INTERVAL) and the names of its clock methods
 * (pm_engine.h).
 *
 * Must never: hold state (the presets are constant), or accept an interval
 * outside the limits pm_engine.h states.
 */
#include "pm/pm_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "flare/flare.h"

/* ---- presets ---- */

/* Chosen so each is one pass on GH100 (checked again at prepare time with
 * the profiler host API: a preset that needs more passes is refused). The
 * first three metrics of overview are those measured one-pass on the H200
 * (REFERENCES.md); the tensor slot lists the names GH100 may know it by. */
static const pm_preset presets[] = {
    {.name = "overview",
     .summary = "SM activity, DRAM read/write bytes, tensor pipe activity",
     .metric_count = 6,
     .metrics =
         {
             {.label = "sm__cycles_active.avg", .candidates = {"sm__cycles_active.avg"}},
             {.label = "gr__cycles_elapsed.max", .candidates = {"gr__cycles_elapsed.max"}},
             {.label = "dram__bytes_read.sum", .candidates = {"dram__bytes_read.sum"}},
             {.label = "dram__bytes_write.sum", .candidates = {"dram__bytes_write.sum"}},
             {.label = "tensor_pipe_active",
              .candidates = {"sm__pipe_tensor_cycles_active_realtime.avg",
                             "sm__pipe_tensor_op_hmma_cycles_active_realtime.avg",
                             "sm__pipe_tensor_cycles_active.avg",
                             "sm__pipe_tensor_op_hmma_cycles_active.avg"},
              .optional = 1},
             {.label = "gpu__time_duration.sum", .candidates = {"gpu__time_duration.sum"}},
         }},
    {.name = "memory",
     .summary = "DRAM read/write bytes and elapsed cycles",
     .metric_count = 3,
     .metrics =
         {
             {.label = "dram__bytes_read.sum", .candidates = {"dram__bytes_read.sum"}},
             {.label = "dram__bytes_write.sum", .candidates = {"dram__bytes_write.sum"}},
             {.label = "gr__cycles_elapsed.max", .candidates = {"gr__cycles_elapsed.max"}},
         }},
    {.name = "compute",
     .summary = "SM activity and instruction rate",
     .metric_count = 3,
     .metrics =
         {
             {.label = "sm__cycles_active.avg", .candidates = {"sm__cycles_active.avg"}},
             {.label = "sm__inst_executed_realtime.avg.per_cycle_active",
              .candidates = {"sm__inst_executed_realtime.avg.per_cycle_active"}},
             {.label = "gr__cycles_active.avg", .candidates = {"gr__cycles_active.avg"}},
         }},
};

const pm_preset *pm_preset_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof(presets) / sizeof(presets[0]); i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

const char *pm_preset_names(void)
{
    return "overview, memory, compute";
}

int pm_parse_interval(const char *text, uint64_t *interval_ns, char *error, size_t error_size)
{
    if (text == NULL || text[0] == '\0') {
        snprintf(error, error_size, "expected an interval with a unit, e.g. 100us or 1ms");
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    /* Digits by hand: strtod would follow the locale's decimal point. */
    const char *cursor = text;
    uint64_t whole = 0, fraction = 0, fraction_scale = 1;
    int digits = 0;
    while (*cursor >= '0' && *cursor <= '9') {
        if (whole > 1000000000ull) {
            snprintf(error, error_size, "'%s' is too large", text);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        whole = whole * 10 + (uint64_t)(*cursor++ - '0');
        digits++;
    }
    if (*cursor == '.') {
        cursor++;
        while (*cursor >= '0' && *cursor <= '9') {
            if (fraction_scale < 1000000000ull) {
                fraction = fraction * 10 + (uint64_t)(*cursor - '0');
                fraction_scale *= 10;
            }
            cursor++;
            digits++;
        }
    }
    if (digits == 0) {
        snprintf(error, error_size, "'%s': expected a number and a unit (ns, us, ms or s)", text);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    uint64_t unit;
    if (strcmp(cursor, "ns") == 0)
        unit = 1;
    else if (strcmp(cursor, "us") == 0)
        unit = 1000;
    else if (strcmp(cursor, "ms") == 0)
        unit = 1000000;
    else if (strcmp(cursor, "s") == 0)
        unit = 1000000000;
    else if (*cursor == '\0') {
        snprintf(error, error_size, "'%s' has no unit: write %sus or %sms (ns, us, ms, s)", text,
                 text, text);
        return FLARE_ERR_INVALID_ARGUMENT;
    } else {
        snprintf(error, error_size, "'%s': unknown unit '%s' (use ns, us, ms or s)", text, cursor);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    *interval_ns = whole * unit + fraction * unit / fraction_scale;
    return FLARE_OK;
}

int pm_settings_from_environment(const pm_preset **preset, uint64_t *interval_ns, char *error,
                                 size_t error_size)
{
    const char *preset_name = getenv("FLARE_PM_PRESET");
    if (preset_name == NULL || preset_name[0] == '\0')
        preset_name = "overview";
    *preset = pm_preset_find(preset_name);
    if (*preset == NULL) {
        snprintf(error, error_size, "FLARE_PM_PRESET=%.32s is not a preset (presets: %s)",
                 preset_name, pm_preset_names());
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    *interval_ns = PM_INTERVAL_DEFAULT_NS;
    const char *interval = getenv("FLARE_PM_INTERVAL");
    if (interval == NULL || interval[0] == '\0')
        return FLARE_OK;
    char parse_error[128];
    uint64_t value = 0;
    if (pm_parse_interval(interval, &value, parse_error, sizeof(parse_error)) != FLARE_OK) {
        snprintf(error, error_size, "FLARE_PM_INTERVAL=%.32s: %s", interval, parse_error);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (value < PM_INTERVAL_MIN_NS) {
        snprintf(error, error_size,
                 "FLARE_PM_INTERVAL=%.32s is %llu ns, below the minimum of %llu ns (10us): "
                 "shorter intervals are not verified to sample without overflow",
                 interval, (unsigned long long)value, PM_INTERVAL_MIN_NS);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (value > PM_INTERVAL_MAX_NS) {
        snprintf(error, error_size, "FLARE_PM_INTERVAL=%.32s is above the maximum of 1s", interval);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    *interval_ns = value;
    return FLARE_OK;
}

const char *pm_clock_method_name(int method)
{
    switch (method) {
    case PM_CLOCK_IDENTITY:
        return "flare's clock (no conversion)";
    case PM_CLOCK_HARDWARE:
        return "hardware offset measured at arm";
    case PM_CLOCK_REALTIME:
        return "CLOCK_REALTIME shifted to CLOCK_MONOTONIC";
    case PM_CLOCK_ALIGNED:
        return "aligned to the decode (unverified)";
    default:
        return "unknown";
    }
}
