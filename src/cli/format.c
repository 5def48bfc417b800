/*
 * format.c: the units every flare command prints sizes and durations in,
 * so `flare report` and `flare replay`'s summary always agree.
 *
 * Pure formatting: it must never allocate or fail (output is truncated to
 * the buffer like snprintf).
 */
#include <stdio.h>

#include "cli/cli.h"

void cli_format_bytes(uint64_t bytes, char *buffer, size_t size)
{
    if (bytes < 10240ull)
        snprintf(buffer, size, "%llu B", (unsigned long long)bytes);
    else if (bytes < 10485760ull)
        snprintf(buffer, size, "%.1f KiB", bytes / 1024.0);
    else if (bytes < 10737418240ull)
        snprintf(buffer, size, "%.1f MiB", bytes / 1048576.0);
    else
        snprintf(buffer, size, "%.2f GiB", bytes / 1073741824.0);
}

void cli_format_duration(uint64_t ns, char *buffer, size_t size)
{
    if (ns < 10000ull)
        snprintf(buffer, size, "%llu ns", (unsigned long long)ns);
    else if (ns < 10000000ull)
        snprintf(buffer, size, "%.1f us", ns / 1e3);
    else if (ns < 10000000000ull)
        snprintf(buffer, size, "%.1f ms", ns / 1e6);
    else
        snprintf(buffer, size, "%.2f s", ns / 1e9);
}
