/*
 * config.h: a session's settings, resolved once from flare_options, the
 * FLARE_* environment and defaults, with precise errors for bad values.
 *
 * Resolution is all-or-nothing: a bad value anywhere leaves nothing applied.
 * Also home to the directory helpers the session and the CLI share.
 */
#ifndef FLARE_CORE_CONFIG_H
#define FLARE_CORE_CONFIG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "flare/flare.h"

#define CORE_FLUSH_INTERVAL_DEFAULT_MS 100u
#define CORE_FLUSH_INTERVAL_MAX_MS     250u
/* FLARE_DELIVERY_MS: how often the backend is asked for the records it holds
 * back (session/delivery.c); 0 never asks. */
#define CORE_DELIVERY_INTERVAL_DEFAULT_MS 100u
#define CORE_DELIVERY_INTERVAL_MIN_MS     10u
#define CORE_DELIVERY_INTERVAL_MAX_MS     1000u
#define CORE_DEFAULT_OUTPUT_BASE          "flare-out"

typedef struct core_config {
    char session_dir[PATH_MAX];
    int session_dir_given; /* 0: a new directory is to be made under output_base */
    char output_base[PATH_MAX];
    uint32_t flush_interval_ms;
    uint32_t delivery_interval_ms; /* 0: the backend is never asked to deliver */
    uint32_t ring_capacity;
    int launched_by_trace; /* FLARE_SESSION_DIR came from `flare trace` */
    int64_t launcher_pid;  /* FLARE_LAUNCHER_PID: that launcher, 0 when unknown */
} core_config;

/* Fills config from options (may be NULL), then the environment, then
 * defaults. Returns FLARE_OK or FLARE_ERR_INVALID_ARGUMENT with a message
 * naming the option or variable and the rule it broke. */
int core_config_resolve(const flare_options *options, core_config *config, char *error,
                        size_t error_size);

/* Parses a whole decimal string into [minimum, maximum]. 0 or -1 (bad). */
int core_parse_u32(const char *text, uint32_t minimum, uint32_t maximum, uint32_t *out);

/* mkdir -p; FLARE_OK or FLARE_ERR_IO with a message naming the path. */
int core_make_directories(const char *path, char *error, size_t error_size);

/* Makes a new directory <base>/<UTC time>-<pid>[-N] and writes its path.
 * FLARE_OK or FLARE_ERR_IO with a message. */
int core_make_session_directory(const char *base, char *path, size_t path_size, char *error,
                                size_t error_size);

/* Checks that a directory exists and that this process can create files in
 * it (by creating and removing one). FLARE_OK or FLARE_ERR_IO. */
int core_check_writable_directory(const char *path, char *error, size_t error_size);

#endif /* FLARE_CORE_CONFIG_H */
