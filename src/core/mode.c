/*
 * mode.c: the modes of `flare trace` and what each records (mode.h).
 *
 * Must never: hold anything but the table and its parser.
 */
#include "core/mode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flare/flare.h"

static const core_mode_spec specs[CORE_MODE_COUNT] = {
    [CORE_MODE_LIGHT] = {.name = "light",
                         .launch_callbacks = false,
                         .api_calls = false,
                         .storm_guard = false,
                         .nvml_interval_ms = 1000,
                         .records = "every kernel, copy and memset with its GPU times, NVTX "
                                    "ranges, GPU metrics every second; no launch callbacks, so "
                                    "no host launch counts, launch-storm guard, launch-rate "
                                    "rules or API calls"},
    [CORE_MODE_STANDARD] = {.name = "standard",
                            .launch_callbacks = true,
                            .api_calls = true,
                            .storm_guard = true,
                            .nvml_interval_ms = 100,
                            .records = "light, plus host launch counts (launch-rate rules, the "
                                       "launch-storm guard), every launch, copy and memset call "
                                       "on the CPU timeline, GPU metrics every 100 ms"},
    [CORE_MODE_FULL] = {.name = "full",
                        .launch_callbacks = true,
                        .api_calls = true,
                        .storm_guard = false,
                        .nvml_interval_ms = 100,
                        .records = "standard, with every kernel timed during launch storms too "
                                   "(no launch-storm guard unless --storm-rate asks)"},
};

const core_mode_spec *core_mode_spec_of(core_mode mode)
{
    return &specs[mode < CORE_MODE_COUNT ? mode : CORE_MODE_DEFAULT];
}

int core_mode_parse(const char *text, core_mode *mode, char *why, size_t why_size)
{
    for (int i = 0; i < CORE_MODE_COUNT; i++)
        if (text != NULL && strcmp(text, specs[i].name) == 0) {
            *mode = (core_mode)i;
            return FLARE_OK;
        }
    snprintf(why, why_size, "'%.32s' is not a mode: expected light, standard or full",
             text != NULL ? text : "");
    return FLARE_ERR_INVALID_ARGUMENT;
}

int core_mode_from_environment(core_mode *mode, char *why, size_t why_size)
{
    const char *text = getenv("FLARE_MODE");
    *mode = CORE_MODE_DEFAULT;
    if (text == NULL)
        return FLARE_OK;
    char reason[128];
    if (core_mode_parse(text, mode, reason, sizeof(reason)) == FLARE_OK)
        return FLARE_OK;
    *mode = CORE_MODE_DEFAULT;
    snprintf(why, why_size, "FLARE_MODE: %s", reason);
    return FLARE_ERR_INVALID_ARGUMENT;
}
