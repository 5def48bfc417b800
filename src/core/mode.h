/*
 * mode.h: how much `flare trace` records, as one word (--mode, FLARE_MODE):
 * light, standard or full. A mode is a set of defaults for what each
 * process records through its backend; the FLARE_CUDA_* switches still
 * override each part. The table in mode.c is the one place that says what
 * each mode records, for the backends, `flare trace --help` and the
 * capability row.
 *
 * Must never: read anything but FLARE_MODE, keep state, or decide for a
 * backend what its hardware can do (a mode asks; a backend degrades).
 */
#ifndef FLARE_CORE_MODE_H
#define FLARE_CORE_MODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum core_mode {
    CORE_MODE_LIGHT,
    CORE_MODE_STANDARD,
    CORE_MODE_FULL,
    CORE_MODE_COUNT
} core_mode;

/* Chosen by the H200 measurements in docs/PERFORMANCE.md (*Where a
 * launch's cost goes*). */
#define CORE_MODE_DEFAULT CORE_MODE_STANDARD

typedef struct core_mode_spec {
    const char *name;
    /* Host launch callbacks: launch counts, the launch-storm guard,
     * kernel_launch_rate rules, the replay gate. */
    bool launch_callbacks;
    /* Launch, copy and memset calls on the CPU timeline (api_calls). */
    bool api_calls;
    /* The launch-storm guard's default (on at its default rate, or off);
     * FLARE_STORM_RATE / --storm-rate decide when given. */
    bool storm_guard;
    /* NVML sampling period (FLARE_NVML_INTERVAL_MS overrides). */
    uint32_t nvml_interval_ms;
    /* What it records, for --help and the capability row. */
    const char *records;
} core_mode_spec;

/* The mode named by text. FLARE_OK, or FLARE_ERR_INVALID_ARGUMENT with why
 * (the text quoted, the modes listed; no variable or option named). */
int core_mode_parse(const char *text, core_mode *mode, char *why, size_t why_size);

/* FLARE_MODE, or the default when unset. FLARE_OK, or
 * FLARE_ERR_INVALID_ARGUMENT with why naming FLARE_MODE (*mode is then the
 * default). */
int core_mode_from_environment(core_mode *mode, char *why, size_t why_size);

const core_mode_spec *core_mode_spec_of(core_mode mode);

#endif /* FLARE_CORE_MODE_H */
