/*
 * format.c: the units every flare command prints sizes and durations in,
 * and the names it gives copy kinds, so `flare report`, `flare export` and
 * `flare replay`'s summary always agree.
 *
 * Pure formatting: it must never allocate or fail (output is truncated to
 * the buffer like snprintf).
 */
#include <stdio.h>

#include "backend/backend.h"
#include "cli/cli.h"

/* A larger unit a value is shown in from `from` on: value / divisor, with
 * decimals digits after the point. */
typedef struct format_step {
    uint64_t from;
    double divisor;
    int decimals;
    const char *unit;
} format_step;

/* value in the largest of count steps (ascending) it reaches, or as a
 * whole number of unit when it reaches none. */
static void format_scaled(uint64_t value, const char *unit, const format_step *steps, size_t count,
                          char *buffer, size_t size)
{
    size_t step = count;
    while (step > 0 && value < steps[step - 1].from)
        step--;
    if (step == 0)
        snprintf(buffer, size, "%llu %s", (unsigned long long)value, unit);
    else
        snprintf(buffer, size, "%.*f %s", steps[step - 1].decimals, value / steps[step - 1].divisor,
                 steps[step - 1].unit);
}

/* Bytes: B, then KiB, MiB, GiB; nanoseconds: ns, then us, ms, s. */
static const format_step byte_steps[] = {
    {10240ull, 1024.0, 1, "KiB"},
    {10485760ull, 1048576.0, 1, "MiB"},
    {10737418240ull, 1073741824.0, 2, "GiB"},
};
static const format_step duration_steps[] = {
    {10000ull, 1e3, 1, "us"},
    {10000000ull, 1e6, 1, "ms"},
    {10000000000ull, 1e9, 2, "s"},
};
#define FORMAT_STEP_COUNT(steps) (sizeof(steps) / sizeof((steps)[0]))

void cli_format_bytes(uint64_t bytes, char *buffer, size_t size)
{
    format_scaled(bytes, "B", byte_steps, FORMAT_STEP_COUNT(byte_steps), buffer, size);
}

void cli_format_duration(uint64_t ns, char *buffer, size_t size)
{
    format_scaled(ns, "ns", duration_steps, FORMAT_STEP_COUNT(duration_steps), buffer, size);
}

const char *cli_copy_kind_name(int kind, const char *unknown)
{
    switch (kind) {
    case BACKEND_COPY_HOST_TO_DEVICE:
        return "host to device";
    case BACKEND_COPY_DEVICE_TO_HOST:
        return "device to host";
    case BACKEND_COPY_DEVICE_TO_DEVICE:
        return "device to device";
    case BACKEND_COPY_HOST_TO_HOST:
        return "host to host";
    default:
        return unknown;
    }
}
