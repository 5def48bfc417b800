/*
 * config.c: resolving session settings and making session directories
 * (config.h). Runs at session start only; never on a hot path.
 */
#include "core/config.h"
#include "core/mode.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/ring.h"

int core_parse_u32(const char *text, uint32_t minimum, uint32_t maximum, uint32_t *out)
{
    if (text == NULL || text[0] == '\0')
        return -1;
    uint64_t value = 0;
    for (const char *p = text; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        value = value * 10 + (uint64_t)(*p - '0');
        if (value > UINT32_MAX)
            return -1;
    }
    if (value < minimum || value > maximum)
        return -1;
    *out = (uint32_t)value;
    return 0;
}

static int copy_path(char *destination, size_t size, const char *source, const char *what,
                     char *error, size_t error_size)
{
    if (source[0] == '\0') {
        snprintf(error, error_size, "%s is empty", what);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    if (strlen(source) >= size) {
        snprintf(error, error_size, "%s is longer than %zu bytes", what, size - 1);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    memcpy(destination, source, strlen(source) + 1);
    return FLARE_OK;
}

int core_config_resolve(const flare_options *options, core_config *config, char *error,
                        size_t error_size)
{
    core_config result;
    memset(&result, 0, sizeof(result));
    flare_options defaults;
    flare_options_init(&defaults);
    if (options == NULL)
        options = &defaults;
    if (options->struct_size < sizeof(size_t)) {
        snprintf(error, error_size,
                 "flare_options.struct_size is %zu; initialise options with flare_options_init()",
                 options->struct_size);
        return FLARE_ERR_INVALID_ARGUMENT;
    }
    /* Fields beyond what the caller's struct holds keep their defaults. */
    flare_options known = defaults;
    memcpy(&known, options,
           options->struct_size < sizeof(known) ? options->struct_size : sizeof(known));

    const char *environment_dir = getenv("FLARE_SESSION_DIR");
    if (known.session_dir != NULL) {
        if (copy_path(result.session_dir, sizeof(result.session_dir), known.session_dir,
                      "flare_options.session_dir", error, error_size) != FLARE_OK)
            return FLARE_ERR_INVALID_ARGUMENT;
        result.session_dir_given = 1;
    } else if (environment_dir != NULL) {
        if (copy_path(result.session_dir, sizeof(result.session_dir), environment_dir,
                      "FLARE_SESSION_DIR", error, error_size) != FLARE_OK)
            return FLARE_ERR_INVALID_ARGUMENT;
        result.session_dir_given = 1;
        const char *by_trace = getenv("FLARE_LAUNCHED_BY_TRACE");
        result.launched_by_trace = by_trace != NULL && strcmp(by_trace, "1") == 0;
        /* Only for knowing whether it still runs: a bad value means unknown. */
        const char *launcher = getenv("FLARE_LAUNCHER_PID");
        uint32_t launcher_pid;
        if (result.launched_by_trace && launcher != NULL &&
            core_parse_u32(launcher, 1, INT32_MAX, &launcher_pid) == 0)
            result.launcher_pid = launcher_pid;
    }
    const char *base = getenv("FLARE_OUTPUT_DIR");
    if (copy_path(result.output_base, sizeof(result.output_base),
                  base != NULL ? base : CORE_DEFAULT_OUTPUT_BASE, "FLARE_OUTPUT_DIR", error,
                  error_size) != FLARE_OK)
        return FLARE_ERR_INVALID_ARGUMENT;

    result.flush_interval_ms = CORE_FLUSH_INTERVAL_DEFAULT_MS;
    const char *flush = getenv("FLARE_FLUSH_MS");
    if (known.flush_interval_ms != 0) {
        if (known.flush_interval_ms > CORE_FLUSH_INTERVAL_MAX_MS) {
            snprintf(error, error_size, "flare_options.flush_interval_ms is %u; it must be 1..%u",
                     known.flush_interval_ms, CORE_FLUSH_INTERVAL_MAX_MS);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        result.flush_interval_ms = known.flush_interval_ms;
    } else if (flush != NULL && core_parse_u32(flush, 1, CORE_FLUSH_INTERVAL_MAX_MS,
                                               &result.flush_interval_ms) != 0) {
        snprintf(error, error_size,
                 "FLARE_FLUSH_MS='%.40s' is not a whole number of milliseconds in 1..%u", flush,
                 CORE_FLUSH_INTERVAL_MAX_MS);
        return FLARE_ERR_INVALID_ARGUMENT;
    }

    result.delivery_interval_ms = CORE_DELIVERY_INTERVAL_DEFAULT_MS;
    const char *delivery = getenv("FLARE_DELIVERY_MS");
    if (delivery != NULL && strcmp(delivery, "0") == 0) {
        result.delivery_interval_ms = 0;
    } else if (delivery != NULL &&
               core_parse_u32(delivery, CORE_DELIVERY_INTERVAL_MIN_MS,
                              CORE_DELIVERY_INTERVAL_MAX_MS, &result.delivery_interval_ms) != 0) {
        snprintf(error, error_size,
                 "FLARE_DELIVERY_MS='%.40s' is not 0 or a whole number of milliseconds in %u..%u",
                 delivery, CORE_DELIVERY_INTERVAL_MIN_MS, CORE_DELIVERY_INTERVAL_MAX_MS);
        return FLARE_ERR_INVALID_ARGUMENT;
    }

    /* Read by each backend as it starts (core_mode_from_environment):
     * checked here so a bad FLARE_MODE refuses the session, not one part. */
    core_mode mode;
    if (core_mode_from_environment(&mode, error, error_size) != FLARE_OK)
        return FLARE_ERR_INVALID_ARGUMENT;

    result.ring_capacity = CORE_RING_DEFAULT_CAPACITY;
    const char *ring = getenv("FLARE_RING_EVENTS");
    uint32_t capacity = known.ring_capacity;
    const char *capacity_source = "flare_options.ring_capacity";
    if (capacity == 0 && ring != NULL) {
        capacity_source = "FLARE_RING_EVENTS";
        if (core_parse_u32(ring, CORE_RING_MIN_CAPACITY, CORE_RING_MAX_CAPACITY, &capacity) != 0)
            capacity = 1; /* fails the check below with the same message */
    }
    if (capacity != 0) {
        if (capacity < CORE_RING_MIN_CAPACITY || capacity > CORE_RING_MAX_CAPACITY ||
            (capacity & (capacity - 1)) != 0) {
            snprintf(error, error_size, "%s must be a power of two in %u..%u", capacity_source,
                     CORE_RING_MIN_CAPACITY, CORE_RING_MAX_CAPACITY);
            return FLARE_ERR_INVALID_ARGUMENT;
        }
        result.ring_capacity = capacity;
    }
    *config = result;
    return FLARE_OK;
}

int core_make_directories(const char *path, char *error, size_t error_size)
{
    char buffer[PATH_MAX];
    if (strlen(path) >= sizeof(buffer)) {
        snprintf(error, error_size, "path too long: %.80s...", path);
        return FLARE_ERR_IO;
    }
    strcpy(buffer, path);
    for (char *p = buffer + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char saved = *p;
            *p = '\0';
            if (mkdir(buffer, 0777) != 0 && errno != EEXIST) {
                snprintf(error, error_size, "cannot create directory %s: %s", buffer,
                         strerror(errno));
                return FLARE_ERR_IO;
            }
            *p = saved;
            if (saved == '\0')
                break;
        }
    }
    struct stat status;
    if (stat(path, &status) != 0 || !S_ISDIR(status.st_mode)) {
        snprintf(error, error_size, "%s exists and is not a directory", path);
        return FLARE_ERR_IO;
    }
    return FLARE_OK;
}

int core_make_session_directory(const char *base, char *path, size_t path_size, char *error,
                                size_t error_size)
{
    int status = core_make_directories(base, error, error_size);
    if (status != FLARE_OK)
        return status;
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
    for (int attempt = 0; attempt < 1000; attempt++) {
        int length;
        if (attempt == 0)
            length = snprintf(path, path_size, "%s/%s-%ld", base, stamp, (long)getpid());
        else
            length =
                snprintf(path, path_size, "%s/%s-%ld-%d", base, stamp, (long)getpid(), attempt + 1);
        if (length < 0 || (size_t)length >= path_size) {
            snprintf(error, error_size, "session directory path under %s is too long", base);
            return FLARE_ERR_IO;
        }
        if (mkdir(path, 0777) == 0)
            return FLARE_OK;
        if (errno != EEXIST) {
            snprintf(error, error_size, "cannot create session directory %s: %s", path,
                     strerror(errno));
            return FLARE_ERR_IO;
        }
    }
    snprintf(error, error_size, "cannot find a free session directory name under %s", base);
    return FLARE_ERR_IO;
}

int core_check_writable_directory(const char *path, char *error, size_t error_size)
{
    char probe[PATH_MAX];
    int length = snprintf(probe, sizeof(probe), "%s/.flare-write-check-%ld", path, (long)getpid());
    if (length < 0 || (size_t)length >= sizeof(probe)) {
        snprintf(error, error_size, "path too long: %s", path);
        return FLARE_ERR_IO;
    }
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(error, error_size, "cannot write in %s: %s", path, strerror(errno));
        return FLARE_ERR_IO;
    }
    close(fd);
    unlink(probe);
    return FLARE_OK;
}
