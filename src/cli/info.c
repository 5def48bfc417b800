/*
 * info.c: `flare info [--json]`: what this machine offers flare: driver and
 * CUPTI versions, devices, chip names and per-device profiling support.
 * Works (and says why) on machines with no GPU or no CUDA at all: it must
 * never fail for want of a GPU, a driver or CUPTI (their absence is the
 * answer, with exit 0), and never load more than cuda_info asks for.
 */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_info.h"
#include "cli/cli.h"
#include "flare/flare.h"

static const char info_help[] =
    "usage: flare info [--json]\n"
    "\n"
    "Shows what this machine offers flare: the NVIDIA driver and CUPTI versions,\n"
    "each device with its chip, and which CUPTI profiling APIs it supports (range\n"
    "profiler, PC sampling, SASS metrics, PM sampling). Without a GPU or driver it\n"
    "says why. --json prints the same as one JSON object.\n";

static const char *support_text(cuda_info_support support)
{
    switch (support) {
    case CUDA_INFO_SUPPORTED:
        return "supported";
    case CUDA_INFO_UNSUPPORTED:
        return "unsupported";
    default:
        return "unknown";
    }
}

static void json_string(const char *text)
{
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\')
            printf("\\%c", *p);
        else if (*p < 0x20)
            printf("\\u%04x", *p);
        else
            putchar(*p);
    }
    putchar('"');
}

static void print_json(const cuda_info *info)
{
    printf("{\"flare_version\": ");
    json_string(flare_version());
    printf(", \"built_with_cuda\": %s", info->built_with_cuda ? "true" : "false");
    printf(", \"driver\": {\"loaded\": %s, \"cuda_version\": %d, \"version\": ",
           info->driver_loaded ? "true" : "false", info->driver_version);
    json_string(info->nvml_driver_version);
    printf(", \"reason\": ");
    json_string(info->driver_loaded ? "" : info->driver_reason);
    printf("}, \"cupti\": {\"loaded\": %s, \"api_version\": %u, \"path\": ",
           info->cupti_loaded ? "true" : "false", info->cupti_version);
    json_string(info->cupti_path);
    printf(", \"reason\": ");
    json_string(info->cupti_loaded ? "" : info->cupti_reason);
    printf(", \"profiler_api\": %s, \"profiler_reason\": ",
           info->profiler_available ? "true" : "false");
    json_string(info->profiler_reason);
    printf("}, \"devices\": [");
    for (int i = 0; i < info->device_count; i++) {
        const cuda_info_device *device = &info->devices[i];
        printf("%s{\"index\": %d, \"name\": ", i ? ", " : "", device->ordinal);
        json_string(device->name);
        printf(", \"chip\": ");
        json_string(device->chip);
        printf(", \"compute_capability\": \"%d.%d\", \"memory_bytes\": %llu", device->compute_major,
               device->compute_minor, device->memory_bytes);
        printf(", \"range_profiler\": \"%s\", \"pc_sampling\": \"%s\", \"sass_metrics\": \"%s\", "
               "\"pm_sampling\": \"%s\"}",
               support_text(device->range_profiler), support_text(device->pc_sampling),
               support_text(device->sass_metrics), support_text(device->pm_sampling));
    }
    printf("]}\n");
}

static void print_text(const cuda_info *info)
{
    printf("flare %s\n", flare_version());
    if (info->driver_loaded)
        printf("driver     CUDA %d.%d%s%s%s\n", info->driver_version / 1000,
               (info->driver_version % 1000) / 10, info->nvml_driver_version[0] ? " (driver " : "",
               info->nvml_driver_version, info->nvml_driver_version[0] ? ")" : "");
    else
        printf("driver     not available: %s\n", info->driver_reason);
    if (info->cupti_loaded)
        printf("CUPTI      API version %u (%s)\n", info->cupti_version, info->cupti_path);
    else
        printf("CUPTI      not available: %s\n", info->cupti_reason);
    if (info->cupti_loaded)
        printf("profiler   %s%s\n", info->profiler_available ? "available" : "not available: ",
               info->profiler_available ? "" : info->profiler_reason);
    printf("devices    %d\n", info->device_count);
    for (int i = 0; i < info->device_count; i++) {
        const cuda_info_device *device = &info->devices[i];
        printf("  %d: %s (chip %s, compute %d.%d, %.1f GiB)\n", device->ordinal, device->name,
               device->chip[0] ? device->chip : "unknown", device->compute_major,
               device->compute_minor, device->memory_bytes / 1073741824.0);
        printf("     range profiler %s, PC sampling %s, SASS metrics %s, PM sampling %s\n",
               support_text(device->range_profiler), support_text(device->pc_sampling),
               support_text(device->sass_metrics), support_text(device->pm_sampling));
    }
    if (info->device_count == 0)
        printf("  (none: flare traces programs on the simulated device only)\n");
}

int cli_info(int argc, char **argv)
{
    int json = 0;
    for (int index = 1; index < argc; index++) {
        if (cli_is_help(argv[index])) {
            fputs(info_help, stdout);
            return CLI_EXIT_OK;
        }
        if (strcmp(argv[index], "--json") == 0)
            json = 1;
        else if (argv[index][0] == '-')
            return cli_usage_error("info", "unknown option '%s'", argv[index]);
        else
            return cli_usage_error("info", "unexpected argument '%s'", argv[index]);
    }
    static cuda_info info;
    cuda_info_collect(&info);
    if (json)
        print_json(&info);
    else
        print_text(&info);
    return CLI_EXIT_OK;
}
